//! The relay's limits and timeouts, as the binary sets them: read by every
//! part of the engine, so they stand below all of it.

use std::time::Duration;

/// How long a question waits for the person: then it is a no.
pub const ASK_WITHIN: Duration = Duration::from_secs(120);

/// Limits and timeouts. Defaults suit a user's machine; tests shorten them.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// How long `/cdp` waits for the extension before answering 503.
    pub extension_grace: Duration,
    /// How long a connection to `/extension` has, from its upgrade, to
    /// prove the pairing (its `auth`, then its `prove`): the real extension
    /// takes a round trip on loopback; a program that only holds a place
    /// among the provers is closed after this.
    pub proof_timeout: Duration,
    /// How long the extension has to send its hello (after its proof).
    pub hello_timeout: Duration,
    /// Deadline for the relay's own calls to the extension (attach, tabs.*).
    pub call_timeout: Duration,
    /// Interval of the relay's pings to the extension.
    pub ping_interval: Duration,
    /// The extension is considered gone after this long without a message.
    pub extension_silence: Duration,
    /// Messages queued to one client before it is dropped as too slow.
    pub client_queue: usize,
    /// Bytes queued to one client before it is dropped as too slow (one
    /// frame of any size always fits an empty queue; see [`crate::queue`]).
    pub client_queue_bytes: usize,
    /// Bytes queued to all clients together; a client with something
    /// queued is dropped when it would take the total over.
    pub total_client_queue_bytes: usize,
    /// Bytes of one client's commands waiting to go to the extension; a
    /// client over it is dropped.
    pub client_command_bytes: usize,
    /// Bytes of all clients' commands waiting to go to the extension; a
    /// command over it is refused with an error (the extension is behind,
    /// which is not that client's doing).
    pub extension_queue_bytes: usize,
    /// Commands one client may have waiting on the extension.
    pub max_in_flight: usize,
    /// Sessions one client may hold (`Target.attachToTarget`,
    /// `attachToBrowserTarget`): each is fanned out to on every event of
    /// its tab, so they are bounded like the commands in flight.
    pub max_sessions_per_client: usize,
    /// CDP client connections at once; more get 503.
    pub max_clients: usize,
    /// Largest message a CDP client may send.
    pub client_max_message: usize,
    /// Largest message the extension may send (screenshots, PDFs).
    pub extension_max_message: usize,
    /// A `Page.captureScreenshot` still unanswered after this long has its
    /// tab checked: Chrome paints no tab that is not in front (see
    /// [`crate::capture`]).
    pub capture_check: Duration,
    /// And is answered with an error after this long, in any case.
    pub capture_timeout: Duration,
    /// The extension is told who holds each tab (`clients`, for its options
    /// page) as soon as that changes; this is how often the relay looks
    /// anyway, a backstop.
    pub clients_report: Duration,
    /// Whether clients may wipe the user's whole cookie jar or cache
    /// (`allowWipingBrowserData` in config.toml; see `browser_domain::WIPES`).
    pub wipes_allowed: bool,
    /// How long a question to the person waits for an answer (a grant's
    /// `--ask`): then it is a no.
    pub ask_within: Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            extension_grace: Duration::from_secs(2),
            proof_timeout: Duration::from_secs(5),
            hello_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(30),
            ping_interval: Duration::from_secs(20),
            extension_silence: Duration::from_secs(60),
            client_queue: 4096,
            client_queue_bytes: 128 << 20,
            total_client_queue_bytes: 512 << 20,
            client_command_bytes: 64 << 20,
            extension_queue_bytes: 256 << 20,
            max_in_flight: 512,
            max_sessions_per_client: 1024,
            max_clients: 64,
            client_max_message: 32 << 20,
            extension_max_message: 256 << 20,
            capture_check: Duration::from_secs(1),
            capture_timeout: Duration::from_secs(30),
            clients_report: Duration::from_secs(30),
            wipes_allowed: false,
            ask_within: ASK_WITHIN,
        }
    }
}
