//! The keys derived from the install's secret (the token file): one per
//! door, so a key that leaks opens no other ([`shared_protocol::auth::derive_key`]).
//! The secret itself opens no door: it stays in the token file, where the
//! keys are derived from it.
//!
//! - The extension's key is what the extension holds and proves the
//!   pairing with (`browser-relay pair` sends it sealed, R37;
//!   `browser-relay token` prints it for the options page). It is derived
//!   in `relay-engine`, which proves it to the extension.
//! - The CDP key is what CDP clients present (`browser-relay cdp-url`, the
//!   `webSocketDebuggerUrl` of `/json/version`): every client sends it to
//!   whatever listens on the port, so it opens the relay's CDP routes only,
//!   no control session, and proves nothing to the extension.
//! - The control key is what an HTTP agent presents to the control API
//!   (`browser-relay token --control`), and what the CLI and the MCP server
//!   prove their sessions with (R38); it opens no CDP route.

pub use relay_engine::extension_key;
use shared_protocol::auth::{KeyPurpose, derive_key};
use state_dir::Token;

/// The key CDP clients present.
pub fn cdp_key(secret: &Token) -> Token {
    derived(secret, KeyPurpose::Cdp)
}

/// The key HTTP agents present to the control API.
pub fn control_key(secret: &Token) -> Token {
    derived(secret, KeyPurpose::Control)
}

fn derived(secret: &Token, purpose: KeyPurpose) -> Token {
    Token::parse(&derive_key(secret.as_str(), purpose)).expect("a derived key is 64 hex characters")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_differ_from_each_other_and_from_the_secret() {
        let secret = Token::generate();
        let (cdp, control, extension) = (cdp_key(&secret), control_key(&secret), extension_key(&secret));
        for key in [&cdp, &control, &extension] {
            assert!(!secret.matches(key.as_str()));
        }
        assert!(!cdp.matches(control.as_str()) && !cdp.matches(extension.as_str()));
        assert!(!control.matches(extension.as_str()));
        assert!(cdp.matches(cdp_key(&secret).as_str()), "stable across runs");
    }
}
