//! What a serve holds of its connections to remote browsers ([`Remotes`]),
//! and when a request for one came ([`Arrival`]); `remote.rs` opens,
//! shares and closes them.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use cdp_client::Dial;
use cdp_client::endpoint::EndpointError;

use crate::lock::lock;
use crate::pipe::Pipe;

/// One open connection, and how it was reached. No `Debug`: `reach`
/// holds the farm's URL and headers as written, secrets included.
pub(crate) struct Remote {
    pub(crate) reach: (String, Dial),
    pub(crate) pipe: Arc<Pipe>,
    pub(crate) browser_id: String,
}

/// A serve's connections to remote browsers, by profile name.
#[derive(Default)]
pub(crate) struct Remotes {
    pub(crate) open: Mutex<HashMap<String, Remote>>,
    /// One connection attempt at a time per profile.
    pub(crate) gates: Mutex<HashMap<String, Arc<Gate>>>,
}

/// When a request came, counted in its profile's finished connection
/// attempts (`ManagedBrowsers::arrival`). A request that came while an
/// attempt ran, and waited for it, takes that attempt's failure instead of
/// making one more: requests at once to a farm that is down wait out one
/// deadline, not one each in turn. The control engine notes it before it
/// waits for its own gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival(pub(crate) u64);

/// One profile's connection attempts: one at a time, and the last one's
/// failure for the requests that waited on it.
#[derive(Default)]
pub(crate) struct Gate {
    /// Held while an attempt runs.
    pub(crate) last: tokio::sync::Mutex<LastAttempt>,
    /// Attempts finished so far: a request notes it when it comes, so it
    /// knows whether an attempt ended while it waited.
    pub(crate) finished: AtomicU64,
}

/// How the last attempt failed, and how it tried to reach the browser. No
/// `Debug`: `reach` holds the farm's secrets.
#[derive(Default)]
pub(crate) struct LastAttempt {
    pub(crate) failed: Option<((String, Dial), EndpointError)>,
}

impl std::fmt::Debug for Remotes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = lock(&self.open).keys().cloned().collect();
        f.debug_struct("Remotes").field("open", &names).finish_non_exhaustive()
    }
}
