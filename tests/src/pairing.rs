//! The extension's side of the pairing proof, for the test peers that
//! speak the relay ⇄ extension protocol (`FakeExtension`, `SimExtension`):
//! the same `shared_protocol::auth` the real extension uses.

use shared_protocol::auth::{self, Prover};
use shared_protocol::{ExtensionMessage, Hello, encode};

/// One connection's proof: our nonce and the key we prove (none: the
/// proof is empty, as an unpaired extension's).
#[derive(Debug, Clone)]
pub struct ExtensionProof {
    nonce: String,
    key: Option<String>,
    /// A pairing link's code is the key: its id goes in `auth`.
    code_id: Option<String>,
    /// The relay's port, which the proofs are bound to (`auth::on_port`).
    port: u16,
}

impl ExtensionProof {
    /// As the extension of the install whose secret is `secret`: it proves
    /// the extension's key derived from it (protocol 8), as the real one
    /// does once paired (and does with a secret kept from before).
    pub fn new(secret: Option<&str>, port: u16) -> Self {
        let key = secret.map(|secret| auth::derive_key(secret, auth::KeyPurpose::Extension));
        Self::with_key(key.as_deref(), port)
    }

    /// As an extension that proves `key` itself (the secret, to show it
    /// pairs nothing; another door's key).
    pub fn with_key(key: Option<&str>, port: u16) -> Self {
        let mut random = [0u8; 32];
        getrandom::fill(&mut random).expect("random");
        Self { nonce: auth::nonce_hex(&random), key: key.map(str::to_string), code_id: None, port }
    }

    /// As the extension that holds a pairing link's `code` and nothing else.
    pub fn with_code(code: &str, port: u16) -> Self {
        Self { code_id: Some(auth::pairing_code_id(code)), ..Self::with_key(Some(code), port) }
    }

    /// The secret the relay sealed for our code in its `challenge`.
    pub fn unseal(&self, relay_nonce: &str, sealed: &str) -> Option<String> {
        let code = self.key.as_deref()?;
        auth::unseal(code, &self.nonce, &auth::on_port(relay_nonce, self.port), sealed)
    }

    /// The first frame: `auth` with our nonce.
    pub fn auth_frame(&self, protocol_version: u32) -> String {
        encode(&ExtensionMessage::Auth {
            protocol_version,
            nonce: self.nonce.clone(),
            pairing_code: self.code_id.clone(),
        })
    }

    /// What answers the relay's `challenge`: our `prove` (an empty proof
    /// without a key, as an unpaired extension's), then the hello; an
    /// error when the relay did not prove the pairing.
    pub fn answer_frames(&self, relay_nonce: &str, relay_proof: &str, hello: Hello) -> Result<[String; 2], String> {
        let bound = auth::on_port(relay_nonce, self.port);
        let proof = match &self.key {
            Some(key) if !auth::verify(key, Prover::Relay, &self.nonce, &bound, relay_proof) => {
                return Err("the relay did not prove the pairing".into());
            }
            Some(key) => auth::proof(key, Prover::Extension, &self.nonce, &bound),
            None => String::new(),
        };
        Ok([encode(&ExtensionMessage::Prove { proof }), encode(&ExtensionMessage::Hello(hello))])
    }
}
