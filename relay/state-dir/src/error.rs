//! Why the state directory, or a file Browser Relay trusts in it, could
//! not be had.

use std::io;
use std::path::PathBuf;

use crate::env::HOME_ENV;
use crate::private::Untrusted;

#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    #[error("cannot find a home directory for the state directory; set {HOME_ENV}")]
    NoHome,
    #[error("cannot create state directory {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
    #[error("cannot read token file {path}: {source}")]
    ReadToken { path: PathBuf, source: io::Error },
    #[error("cannot write token file {path}: {source}")]
    WriteToken { path: PathBuf, source: io::Error },
    #[error("token file {path} is malformed: expected 64 hex characters; delete it to make a new one")]
    BadToken { path: PathBuf },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    /// The state folder or the token could be changed by someone else.
    #[error(transparent)]
    Untrusted(#[from] Untrusted),
}

/// Why a file Browser Relay trusts could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadTrustedError {
    /// It, or the state folder, could be changed by someone else.
    #[error(transparent)]
    Untrusted(#[from] Untrusted),
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
}
