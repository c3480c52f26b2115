//! The keys derived from the install's secret (the token file): one per
//! door, so a key that leaks opens no other ([`shared_protocol::auth::derive_key`]).
//!
//! - The secret itself pairs the extension (`browser-relay pair`, R37) and
//!   proves the control API's sessions to the CLI and the MCP server (R38).
//!   It is accepted everywhere, as the master it is.
//! - The CDP key is what CDP clients present (`browser-relay cdp-url`, the
//!   `webSocketDebuggerUrl` of `/json/version`): every client sends it to
//!   whatever listens on the port, so it opens the relay's CDP routes only,
//!   no control session, and proves nothing to the extension.
//! - The control key is what an HTTP agent presents to the control API
//!   (`browser-relay token --control`); it opens no CDP route.

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
        let (cdp, control) = (cdp_key(&secret), control_key(&secret));
        assert!(!secret.matches(cdp.as_str()) && !secret.matches(control.as_str()));
        assert!(!cdp.matches(control.as_str()));
        assert!(cdp.matches(cdp_key(&secret).as_str()), "stable across runs");
    }
}
