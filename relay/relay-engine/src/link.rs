//! The live extension connection as the rest of the relay sends on it: its
//! queue, with the byte budget every frame is charged against. The
//! connection's own life (handshake, replies, events) is `extension.rs`.

use std::sync::Arc;

use axum::extract::ws::Message;
use shared_protocol::Hello;
use tokio::sync::mpsc;

use crate::queue::{Charge, Meter, Outgoing, OverBudget};

/// A live, greeted extension connection.
#[derive(Debug)]
pub(crate) struct ExtensionLink {
    /// Distinguishes this connection from earlier ones, so pending calls of a
    /// dead connection can be failed without touching a new one's.
    pub generation: u64,
    tx: mpsc::Sender<Outgoing>,
    /// Bytes queued to the extension ([`crate::RelayConfig::extension_queue_bytes`]).
    queued: Arc<Meter>,
    pub hello: Hello,
}

impl ExtensionLink {
    /// A link whose frames go to `tx`, at most `queue_bytes` of them queued.
    pub(crate) fn new(generation: u64, tx: mpsc::Sender<Outgoing>, queue_bytes: usize, hello: Hello) -> Self {
        Self { generation, tx, queued: Meter::new(queue_bytes), hello }
    }

    /// Queues one of the relay's own frames for the extension (counted,
    /// never refused); `false` once the connection is gone.
    pub(crate) async fn send(&self, text: String) -> bool {
        let charge = self.queued.charge_always(text.len());
        self.send_charged(text, charge).await
    }

    /// Takes room for `bytes` of a client's command, against the client's
    /// own budget (`commands`) and the link's.
    pub(crate) fn charge_command(&self, commands: &Arc<Meter>, bytes: usize) -> Result<Charge, OverBudget> {
        Meter::charge(commands, &self.queued, bytes)
    }

    /// Queues a frame whose room was taken with [`Self::charge_command`].
    pub(crate) async fn send_charged(&self, text: String, charge: Charge) -> bool {
        self.tx.send(Outgoing { message: Message::Text(text.into()), _charge: charge }).await.is_ok()
    }

    /// Queues a frame now, behind everything queued so far (for frames that
    /// must keep their place: undo commands sent under the registry lock).
    /// `false` when the queue is full or the connection gone.
    pub(crate) fn send_now(&self, text: String) -> bool {
        let charge = self.queued.charge_always(text.len());
        self.tx.try_send(Outgoing { message: Message::Text(text.into()), _charge: charge }).is_ok()
    }

    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued.used()
    }
}
