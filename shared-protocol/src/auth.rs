//! The pairing proof. The relay and the extension share a secret (the
//! pairing token, given to the extension once by `browser-relay pair`) and
//! never send it: each proves it knows it with an HMAC over two fresh
//! nonces, one from each side, so a proof is good for that one connection
//! only. The relay proves first; the extension obeys nothing before, and
//! the relay trusts nothing before the extension's proof. A program that
//! squats the relay's port (the relay not running yet, restarting) can
//! neither prove itself nor learn anything it could replay.
//!
//! Also used by the CLI and the MCP server with the control API (same
//! scheme, other labels).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Length of a nonce on the wire: 32 random bytes as lowercase hex.
pub const NONCE_HEX_LEN: usize = 64;

/// What a proof is for. Each label makes a proof good for one purpose
/// only: a relay's proof is never an extension's, nor a control API's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prover {
    /// The relay, to the extension (`challenge`).
    Relay,
    /// The extension, to the relay (`hello`).
    Extension,
    /// The control API, to the CLI or the MCP server.
    ControlServer,
    /// The CLI or the MCP server, to the control API (its session).
    ControlClient,
    /// The control API, on each answer of a session ([`answer_mac`]).
    ControlAnswer,
}

impl Prover {
    fn label(self) -> &'static [u8] {
        match self {
            Self::Relay => b"browser-relay/2 relay",
            Self::Extension => b"browser-relay/2 extension",
            Self::ControlServer => b"browser-relay/2 control server",
            Self::ControlClient => b"browser-relay/2 control client",
            Self::ControlAnswer => b"browser-relay/2 control answer",
        }
    }
}

/// What a key derived from the install's secret is for ([`derive_key`]).
/// Each door has its own, and the secret itself opens none: one that leaks
/// (the CDP key travels in every client's URL, to whatever listens on the
/// port; the extension's sits in the browser's storage) opens no other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPurpose {
    /// What CDP clients present (`browser-relay cdp-url`).
    Cdp,
    /// What an HTTP agent presents to the control API
    /// (`browser-relay token --control`), and what the CLI and the MCP
    /// server prove their sessions with.
    Control,
    /// What the extension proves the pairing with (protocol 8): it is
    /// given this key, never the secret (`browser-relay token` prints it).
    Extension,
}

/// The key for `purpose`, derived from the install's `secret`: 64 hex
/// characters, the shape of the secret.
pub fn derive_key(secret: &str, purpose: KeyPurpose) -> String {
    let label: &[u8] = match purpose {
        KeyPurpose::Cdp => b"browser-relay/2 key cdp",
        KeyPurpose::Control => b"browser-relay/2 key control",
        KeyPurpose::Extension => b"browser-relay/2 key extension",
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(label);
    hex(&mac.finalize().into_bytes())
}

/// The key of one grant (a named, revocable key per agent) for one door,
/// derived from the install's `secret`, the grant's `name` and its `salt`
/// (random, drawn when the grant was made: a grant revoked and made again
/// under the same name has a new key). A new secret (`rotate`) changes
/// every grant's keys.
pub fn derive_grant_key(secret: &str, purpose: KeyPurpose, name: &str, salt: &str) -> String {
    let label: &[u8] = match purpose {
        KeyPurpose::Cdp => b"browser-relay/2 grant cdp",
        KeyPurpose::Control => b"browser-relay/2 grant control",
        // No grant pairs an extension; a label of its own all the same.
        KeyPurpose::Extension => b"browser-relay/2 grant extension",
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    for part in [label, name.as_bytes(), salt.as_bytes()] {
        mac.update(part);
        mac.update(b"\n");
    }
    hex(&mac.finalize().into_bytes())
}

/// The install's signature on the grants file's `body`: a file someone
/// else wrote or changed (a shared state directory keeps its permissions)
/// grants nothing ([`verify_grants_signature`]).
pub fn grants_signature(secret: &str, body: &str) -> String {
    hex(&grants_mac(secret, body).finalize().into_bytes())
}

/// Whether `presented` is [`grants_signature`] of `body`, in constant time.
pub fn verify_grants_signature(secret: &str, body: &str, presented: &str) -> bool {
    let Some(bytes) = unhex(presented) else { return false };
    grants_mac(secret, body).verify_slice(&bytes).is_ok()
}

fn grants_mac(secret: &str, body: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(b"browser-relay/2 grants file\n");
    mac.update(body.as_bytes());
    mac
}

/// Hex of 32 bytes the caller drew from a secure random source.
pub fn nonce_hex(bytes: &[u8; 32]) -> String {
    hex(bytes)
}

/// Whether `nonce` has the shape of a nonce (a peer's malformed one is
/// refused before any work).
pub fn is_nonce(nonce: &str) -> bool {
    nonce.len() == NONCE_HEX_LEN && nonce.bytes().all(|b| b.is_ascii_hexdigit())
}

fn mac(key: &str, prover: Prover, first_nonce: &str, second_nonce: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(prover.label());
    mac.update(b"\n");
    mac.update(first_nonce.as_bytes());
    mac.update(b"\n");
    mac.update(second_nonce.as_bytes());
    mac
}

/// The relay's nonce of a pairing proof, bound to the port the extension
/// connected to: a proof made on one port fails on another, so a program on
/// the port the extension uses cannot pass the proofs of a relay it reaches
/// elsewhere back and forth between the two.
pub fn on_port(relay_nonce: &str, port: u16) -> String {
    format!("{relay_nonce}\n{port}")
}

/// `prover`'s proof of `key` for the connection whose nonces are
/// `first_nonce` (the connecting side's) and `second_nonce` (the other's).
pub fn proof(key: &str, prover: Prover, first_nonce: &str, second_nonce: &str) -> String {
    hex(&mac(key, prover, first_nonce, second_nonce).finalize().into_bytes())
}

/// Whether `presented` is `prover`'s proof of `key` for these nonces, in
/// constant time.
pub fn verify(key: &str, prover: Prover, first_nonce: &str, second_nonce: &str, presented: &str) -> bool {
    let Some(bytes) = unhex(presented) else { return false };
    mac(key, prover, first_nonce, second_nonce).verify_slice(&bytes).is_ok()
}

/// The control API's signature on one answer of the session whose nonces
/// are `client_nonce` and `server_nonce`: over the client's id for the
/// request, the status and the body. The client sends its session's secret
/// (derived with another label) but never this key, so a program that took
/// the port after the server went away learns nothing that signs an answer.
pub fn answer_mac(
    key: &str,
    client_nonce: &str,
    server_nonce: &str,
    request_id: &str,
    status: u16,
    body: &[u8],
) -> String {
    hex(&answer(key, client_nonce, server_nonce, request_id, status, body).finalize().into_bytes())
}

/// Whether `presented` is [`answer_mac`] of these, in constant time.
pub fn verify_answer(
    key: &str,
    client_nonce: &str,
    server_nonce: &str,
    request_id: &str,
    status: u16,
    body: &[u8],
    presented: &str,
) -> bool {
    let Some(bytes) = unhex(presented) else { return false };
    answer(key, client_nonce, server_nonce, request_id, status, body).verify_slice(&bytes).is_ok()
}

fn answer(
    key: &str,
    client_nonce: &str,
    server_nonce: &str,
    request_id: &str,
    status: u16,
    body: &[u8],
) -> Hmac<Sha256> {
    let mut mac = mac(key, Prover::ControlAnswer, client_nonce, server_nonce);
    for part in [request_id.as_bytes(), status.to_string().as_bytes(), body] {
        mac.update(b"\n");
        mac.update(part);
    }
    mac
}

/// How a pairing code (what `browser-relay pair`'s link carries instead
/// of the secret, good once and for minutes) is named on the wire: an HMAC
/// of it, so that naming it tells nothing of it.
pub fn pairing_code_id(code: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(code.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(b"browser-relay/2 pairing code id");
    hex(&mac.finalize().into_bytes()[..8])
}

/// The install's signature on a pairing `code` it issued: an HMAC keyed by
/// the `secret`, kept beside the code, so a code file someone else put in
/// a shared state directory is no code ([`verify_pairing_code_signature`]).
pub fn pairing_code_signature(secret: &str, code: &str) -> String {
    hex(&code_signature(secret, code).finalize().into_bytes())
}

/// Whether `presented` is [`pairing_code_signature`] of `code`, in
/// constant time.
pub fn verify_pairing_code_signature(secret: &str, code: &str, presented: &str) -> bool {
    let Some(bytes) = unhex(presented) else { return false };
    code_signature(secret, code).verify_slice(&bytes).is_ok()
}

fn code_signature(secret: &str, code: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(b"browser-relay/2 pairing code\n");
    mac.update(code.as_bytes());
    mac
}

/// The install's `secret` (64 hex characters) sealed for the extension
/// that holds the pairing `code`, on the connection whose nonces these are:
/// XORed with an HMAC keyed by the code (a pad used once: each connection
/// has its own nonces), then tagged with another, so only a holder of the
/// code can open it, only on this connection, and nobody can alter it
/// unseen. `None` for a secret of another shape.
pub fn seal(code: &str, first_nonce: &str, second_nonce: &str, secret: &str) -> Option<String> {
    let plain = unhex(secret).filter(|bytes| bytes.len() == 32)?;
    let pad = sealing_mac(code, b"browser-relay/2 sealed secret", first_nonce, second_nonce).finalize().into_bytes();
    let sealed: Vec<u8> = plain.iter().zip(pad.iter()).map(|(a, b)| a ^ b).collect();
    let mut tag = sealing_mac(code, b"browser-relay/2 sealed tag", first_nonce, second_nonce);
    tag.update(&sealed);
    Some(hex(&sealed) + &hex(&tag.finalize().into_bytes()))
}

/// The secret [`seal`] sealed, opened with the `code`; `None` for what is
/// not a sealed secret of this code and connection, or was altered.
pub fn unseal(code: &str, first_nonce: &str, second_nonce: &str, sealed: &str) -> Option<String> {
    let bytes = unhex(sealed).filter(|bytes| bytes.len() == 64)?;
    let (sealed, presented) = bytes.split_at(32);
    let mut tag = sealing_mac(code, b"browser-relay/2 sealed tag", first_nonce, second_nonce);
    tag.update(sealed);
    tag.verify_slice(presented).ok()?;
    let pad = sealing_mac(code, b"browser-relay/2 sealed secret", first_nonce, second_nonce).finalize().into_bytes();
    Some(hex(&sealed.iter().zip(pad.iter()).map(|(a, b)| a ^ b).collect::<Vec<u8>>()))
}

fn sealing_mac(code: &str, label: &[u8], first_nonce: &str, second_nonce: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(code.as_bytes()).expect("HMAC takes a key of any length");
    for part in [label, first_nonce.as_bytes(), second_nonce.as_bytes()] {
        mac.update(part);
        mac.update(b"\n");
    }
    mac
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "4f0c6b1e0f2a0d5c8e9b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d";

    fn nonce(fill: u8) -> String {
        nonce_hex(&[fill; 32])
    }

    #[test]
    fn a_proof_verifies_only_for_its_key_side_and_nonces() {
        let (ours, theirs) = (nonce(1), nonce(2));
        let relay = proof(KEY, Prover::Relay, &ours, &theirs);
        assert_eq!(relay.len(), 64);
        assert!(verify(KEY, Prover::Relay, &ours, &theirs, &relay));
        assert!(!verify(&KEY.replace('4', "5"), Prover::Relay, &ours, &theirs, &relay), "another key");
        assert!(!verify(KEY, Prover::Extension, &ours, &theirs, &relay), "a relay proof is not the extension's");
        assert!(!verify(KEY, Prover::ControlServer, &ours, &theirs, &relay), "nor a control server's");
        assert!(!verify(KEY, Prover::Relay, &nonce(3), &theirs, &relay), "another connection");
        assert!(!verify(KEY, Prover::Relay, &theirs, &ours, &relay), "nonces in their order");
        assert!(!verify(KEY, Prover::Relay, &ours, &theirs, &relay[..62]), "cut");
        assert!(!verify(KEY, Prover::Relay, &ours, &theirs, "zz"), "not hex");
        assert!(!verify(KEY, Prover::Relay, &ours, &theirs, ""), "empty");
    }

    #[test]
    fn a_sealed_secret_opens_only_with_its_code_on_its_connection() {
        let (ours, theirs) = (nonce(1), nonce(2));
        let code = nonce(9);
        let sealed = seal(&code, &ours, &theirs, KEY).expect("a secret's shape");
        assert_ne!(sealed, KEY, "sealed, not sent");
        assert_eq!(unseal(&code, &ours, &theirs, &sealed).as_deref(), Some(KEY));
        assert_eq!(unseal(&nonce(8), &ours, &theirs, &sealed), None, "another code");
        assert_eq!(unseal(&code, &nonce(3), &theirs, &sealed), None, "another connection");
        assert_eq!(unseal(&code, &ours, &on_port(&theirs, 1), &sealed), None, "another port");
        let flipped = format!("{}{}", if sealed.starts_with('0') { '1' } else { '0' }, &sealed[1..]);
        assert_eq!(unseal(&code, &ours, &theirs, &flipped), None, "altered");
        assert_eq!(unseal(&code, &ours, &theirs, "zz"), None);
        assert_eq!(seal(&code, &ours, &theirs, "short"), None);
        let id = pairing_code_id(&code);
        assert_eq!(id.len(), 16);
        assert!(!code.contains(&id), "the id tells nothing of the code");
        assert_ne!(pairing_code_id(&nonce(8)), id);
    }

    #[test]
    fn an_answer_is_signed_for_its_session_request_status_and_body() {
        let (client, server) = (nonce(1), nonce(2));
        let signed = answer_mac(KEY, &client, &server, "r1", 200, b"{}");
        assert!(verify_answer(KEY, &client, &server, "r1", 200, b"{}", &signed));
        assert!(!verify_answer(KEY, &client, &server, "r2", 200, b"{}", &signed), "another request");
        assert!(!verify_answer(KEY, &client, &server, "r1", 404, b"{}", &signed), "another status");
        assert!(!verify_answer(KEY, &client, &server, "r1", 200, b"[]", &signed), "another body");
        assert!(!verify_answer(KEY, &client, &nonce(3), "r1", 200, b"{}", &signed), "another session");
        // The session's secret (what the client sends) signs nothing.
        let secret = proof(KEY, Prover::ControlClient, &client, &server);
        assert_ne!(answer_mac(&secret, &client, &server, "r1", 200, b"{}"), signed);
    }

    #[test]
    fn each_derived_key_is_its_own_and_none_is_the_secret() {
        let cdp = derive_key(KEY, KeyPurpose::Cdp);
        let control = derive_key(KEY, KeyPurpose::Control);
        assert_eq!((cdp.len(), control.len()), (64, 64));
        assert!(cdp != control && cdp != KEY && control != KEY);
        assert_eq!(cdp, derive_key(KEY, KeyPurpose::Cdp), "stable");
        assert_ne!(cdp, derive_key(&KEY.replace('4', "5"), KeyPurpose::Cdp), "another install, another key");
        // A CDP key proves nothing: a proof made with it is not the secret's.
        let (ours, theirs) = (nonce(1), nonce(2));
        assert!(!verify(KEY, Prover::Extension, &ours, &theirs, &proof(&cdp, Prover::Extension, &ours, &theirs)));
    }

    #[test]
    fn a_grants_key_is_its_own_and_changes_with_its_salt_and_the_secret() {
        let key = derive_grant_key(KEY, KeyPurpose::Cdp, "research", "salt1");
        assert_eq!(key.len(), 64);
        assert_eq!(key, derive_grant_key(KEY, KeyPurpose::Cdp, "research", "salt1"), "stable");
        for other in [
            derive_grant_key(KEY, KeyPurpose::Control, "research", "salt1"),
            derive_grant_key(KEY, KeyPurpose::Cdp, "research", "salt2"),
            derive_grant_key(KEY, KeyPurpose::Cdp, "researcher", "salt1"),
            derive_grant_key(&KEY.replace('4', "5"), KeyPurpose::Cdp, "research", "salt1"),
            derive_key(KEY, KeyPurpose::Cdp),
        ] {
            assert_ne!(key, other);
        }
        // No way to make one name's key from another's by moving the seam.
        assert_ne!(
            derive_grant_key(KEY, KeyPurpose::Cdp, "ab", "c"),
            derive_grant_key(KEY, KeyPurpose::Cdp, "a", "bc")
        );
    }

    #[test]
    fn the_grants_file_is_signed_by_the_secret() {
        let signed = grants_signature(KEY, "[1]");
        assert!(verify_grants_signature(KEY, "[1]", &signed));
        assert!(!verify_grants_signature(KEY, "[2]", &signed), "another body");
        assert!(!verify_grants_signature(&KEY.replace('4', "5"), "[1]", &signed), "another secret");
        assert!(!verify_grants_signature(KEY, "[1]", "zz"));
    }

    #[test]
    fn a_pairing_proof_is_good_on_its_port_only() {
        let (ours, theirs) = (nonce(1), nonce(2));
        let relay = proof(KEY, Prover::Relay, &ours, &on_port(&theirs, 18792));
        assert!(verify(KEY, Prover::Relay, &ours, &on_port(&theirs, 18792), &relay));
        assert!(!verify(KEY, Prover::Relay, &ours, &on_port(&theirs, 18793), &relay), "another port");
        assert!(!verify(KEY, Prover::Relay, &ours, &theirs, &relay), "no port");
    }

    #[test]
    fn nonces_have_one_shape() {
        assert!(is_nonce(&nonce(0xab)));
        assert!(!is_nonce("abc"));
        assert!(!is_nonce(&"g".repeat(64)));
    }
}
