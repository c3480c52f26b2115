//! The per-install secret.

/// The per-install secret. Its `Debug` never shows the value, so it cannot
/// leak into logs by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).expect("the OS random source is available");
        Self(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Accepts exactly 64 lowercase or uppercase hex characters.
    pub fn parse(text: &str) -> Option<Self> {
        (text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())).then(|| Self(text.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Constant-time comparison against what a client presented (hex
    /// digits in either case).
    pub fn matches(&self, presented: &str) -> bool {
        use subtle::ConstantTimeEq;
        // Length is not secret (always 64); comparing it first is fine.
        presented.len() == self.0.len()
            && bool::from(self.0.as_bytes().ct_eq(presented.to_ascii_lowercase().as_bytes()))
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_matching_is_exact_and_debug_redacts() {
        let token = Token::generate();
        assert!(token.matches(token.as_str()));
        assert!(token.matches(&token.as_str().to_ascii_uppercase()), "hex is case-insensitive");
        assert!(!token.matches(&token.as_str()[..63]));
        let mut wrong = token.as_str().to_string();
        wrong.replace_range(0..1, if wrong.starts_with('0') { "1" } else { "0" });
        assert!(!token.matches(&wrong));
        assert!(!format!("{token:?}").contains(token.as_str()));
    }
}
