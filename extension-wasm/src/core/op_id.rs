//! The tag of one `chrome.*` call.

/// Tags one `chrome.*` call so its outcome finds its way back.
pub type OpId = u64;
