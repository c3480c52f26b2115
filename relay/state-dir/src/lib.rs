//! The state directory (`~/.browser-relay` unless `BROWSER_RELAY_HOME` or a
//! flag says otherwise), the per-install token stored in it, and its media
//! folder.

mod activity;
mod dir;
mod env;
mod error;
mod media;
mod pairing;
mod private;
mod serving;
mod token;
pub use activity::{ActivityDir, Appended, civil_from_days};
pub use dir::StateDir;
pub use env::{HOME_ENV, path_from_env};
pub use error::{ReadTrustedError, StateDirError};
pub use media::{MediaDir, Retention};
pub use pairing::{CODE_LIFETIME, PairingCodes};
pub use private::Untrusted;
pub use serving::{RotationLock, ServingError, ServingLock};
pub use token::Token;
