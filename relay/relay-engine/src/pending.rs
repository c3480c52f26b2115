//! The calls sent to the extension and not answered yet: [`PendingCalls`]
//! holds each until it is answered, by its reply or with an error when its
//! extension connection is gone (`forward.rs` sends and answers them).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use dashmap::DashMap;
use shared_protocol::{CallId, TabId};
use tokio::sync::oneshot;

use crate::cdp::{self, code};
use crate::client::ClientHandle;
use crate::error::CallError;
use crate::targets::EnableEffect;

/// The answer to every command in flight when the extension goes away.
pub(crate) const EXTENSION_GONE: &str = "Browser Relay extension disconnected while this command was in flight";

/// Where a reply from the extension goes.
#[derive(Debug)]
pub(crate) enum Pending {
    /// A client's forwarded command: answered with the client's own id, on
    /// the session it was sent on.
    Client {
        client: Arc<ClientHandle>,
        cdp_id: i64,
        session: Option<Arc<str>>,
        generation: u64,
        /// What the reply means to the relay's books, besides the client.
        hook: Option<ReplyHook>,
        /// When it was queued for the extension: its round trip through the
        /// extension's worker is measured from here
        /// (`Relay::extension_round_trips`, for the benchmarks).
        queued_at: Instant,
    },
    /// One of the relay's own calls.
    Internal { reply: oneshot::Sender<Result<String, CallError>>, generation: u64, name: &'static str },
    /// A command that puts a tab back after a client left (see
    /// [`ledger`](crate::ledger)); its answer goes nowhere.
    Undo { generation: u64, method: String },
}

impl Pending {
    fn generation(&self) -> u64 {
        match self {
            Self::Client { generation, .. } | Self::Internal { generation, .. } | Self::Undo { generation, .. } => {
                *generation
            }
        }
    }
}

/// What a client's reply means to the relay's books.
#[derive(Debug)]
pub(crate) enum ReplyHook {
    /// `Runtime.enable`: see [`crate::targets::Target::runtime`].
    RuntimeEnable(RuntimeEnable),
    /// `Page.addScriptToEvaluateOnNewDocument`: its identifier is recorded,
    /// to remove the script when the client leaves.
    ScriptAdded { tab: TabId, child: Option<Arc<str>> },
    /// A cookie answer to a grant's client: only its sites' cookies
    /// (`lending.rs`).
    OnlyItsCookies(Arc<grants::Grant>),
}

/// A client's `Runtime.enable` on a tab's shared debugger session.
#[derive(Debug)]
pub(crate) struct RuntimeEnable {
    pub(crate) tab: TabId,
    pub(crate) child: Option<Arc<str>>,
    pub(crate) effect: EnableEffect,
}

/// The calls sent to the extension and not answered yet, by call id.
#[derive(Debug)]
pub(crate) struct PendingCalls {
    pub(crate) calls: DashMap<CallId, Pending>,
    pub(crate) next_id: AtomicU64,
}

impl Default for PendingCalls {
    fn default() -> Self {
        Self { calls: DashMap::new(), next_id: AtomicU64::new(1) }
    }
}

impl PendingCalls {
    pub(crate) fn next_id(&self) -> CallId {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn insert(&self, id: CallId, pending: Pending) {
        self.calls.insert(id, pending);
    }

    /// The call `id`, taken out: whoever takes it answers it.
    pub(crate) fn take(&self, id: CallId) -> Option<Pending> {
        self.calls.remove(&id).map(|(_, pending)| pending)
    }

    pub(crate) fn contains(&self, id: CallId) -> bool {
        self.calls.contains_key(&id)
    }

    pub(crate) fn len(&self) -> usize {
        self.calls.len()
    }

    /// Drops the answers a client that left waits for.
    pub(crate) fn forget_client(&self, client: u64) {
        self.calls.retain(|_, pending| !matches!(pending, Pending::Client { client: c, .. } if c.id == client));
    }

    /// Answers every call of an extension connection that is gone (by
    /// `generation`, so a reconnecting extension's calls are untouched).
    pub(crate) fn fail(&self, generation: u64) {
        let ids: Vec<CallId> =
            self.calls.iter().filter(|e| e.value().generation() == generation).map(|e| *e.key()).collect();
        for id in ids {
            match self.take(id) {
                Some(Pending::Client { client, cdp_id, session, .. }) => {
                    client.finish_command();
                    client.send(cdp::error(Some(cdp_id), code::SERVER_ERROR, EXTENSION_GONE, session.as_deref()));
                }
                Some(Pending::Internal { reply, name, .. }) => {
                    let _ = reply.send(Err(CallError::Disconnected(name)));
                }
                Some(Pending::Undo { .. }) | None => {}
            }
        }
    }
}
