//! Outgoing queues with byte budgets, and the one loop that writes them.
//!
//! Frame counts alone do not bound memory: 512 replies of 30 MiB each fit
//! any sensible frame limit. So every queued frame carries a [`Charge`]
//! against one or two [`Meter`]s (its connection's, and the total over all
//! connections of its kind); the charge is released when the frame is
//! written or dropped, so the meters read exactly what is held.
//!
//! A frame is admitted when it fits, or when its connection has nothing
//! queued at all: one reply larger than the budget (a full-page PDF) still
//! goes to a client that reads, and a client that does not read holds at
//! most its budget plus one frame.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes};
use futures_util::{Sink, SinkExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long a closing connection may take to get its close frame out.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// The close code of a connection the relay ends for breaking its limits.
pub(crate) const POLICY_VIOLATION: u16 = 1008;

/// A close frame; the reason is cut to the 123 bytes a close frame has room
/// for, at a character boundary.
pub(crate) fn close_frame(code: u16, reason: &str) -> CloseFrame {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    CloseFrame { code, reason: reason[..end].into() }
}

/// Bytes held in queued frames, against a limit.
#[derive(Debug)]
pub(crate) struct Meter {
    used: AtomicUsize,
    limit: usize,
}

/// A meter's state when a frame did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OverBudget {
    pub used: usize,
    pub limit: usize,
    /// The total over all connections was full, not the connection's own.
    pub shared: bool,
}

impl OverBudget {
    /// "130 MiB queued, the limit is 128 MiB", for close reasons and errors.
    pub(crate) fn describe(&self) -> String {
        format!("{} queued, the limit is {}", mib(self.used), mib(self.limit))
    }
}

fn mib(bytes: usize) -> String {
    if bytes >= 1 << 20 { format!("{} MiB", bytes >> 20) } else { format!("{} KiB", bytes.div_ceil(1 << 10)) }
}

impl Meter {
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self { used: AtomicUsize::new(0), limit })
    }

    /// Bytes held now.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// Adds `bytes`; returns what was held before.
    fn add(&self, bytes: usize) -> usize {
        self.used.fetch_add(bytes, Ordering::AcqRel)
    }

    fn sub(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Charges `bytes` to `own` (this connection's meter) and `total` (all
    /// connections'), or neither. A connection with nothing queued is always
    /// admitted; otherwise both must have room.
    pub(crate) fn charge(own: &Arc<Self>, total: &Arc<Self>, bytes: usize) -> Result<Charge, OverBudget> {
        let (own_held, had_some) = own.take(bytes)?;
        let total_before = total.add(bytes);
        let total_held = Held::new(total, bytes);
        if had_some && total_before + bytes > total.limit {
            return Err(OverBudget { used: total_before, limit: total.limit, shared: true });
        }
        Ok(Charge { _own: Some(own_held), _total: Some(Arc::new(total_held)) })
    }

    /// Takes `bytes` on this connection's own meter, unless it holds some
    /// already and they do not fit; with whether it held any before. The
    /// bytes are given back when the `Held` is dropped (also on a refusal
    /// further on).
    fn take(self: &Arc<Self>, bytes: usize) -> Result<(Held, bool), OverBudget> {
        let before = self.add(bytes);
        let held = Held::new(self, bytes);
        if before != 0 && before + bytes > self.limit {
            return Err(OverBudget { used: before, limit: self.limit, shared: false });
        }
        Ok((held, before != 0))
    }

    /// Charges `bytes` whatever the meter holds: for the relay's own small
    /// frames, which must not be refused but must be counted.
    pub(crate) fn charge_always(self: &Arc<Self>, bytes: usize) -> Charge {
        self.add(bytes);
        Charge { _own: Some(Held::new(self, bytes)), _total: None }
    }
}

/// Bytes held against one meter; given back on drop.
#[derive(Debug)]
struct Held {
    bytes: usize,
    meter: Arc<Meter>,
}

impl Held {
    /// For bytes already added to `meter`.
    fn new(meter: &Arc<Meter>, bytes: usize) -> Self {
        Self { bytes, meter: meter.clone() }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.meter.sub(self.bytes);
    }
}

/// Bytes a queued frame holds against its meters; released on drop. The
/// total's part may be shared by every connection the same frame is queued
/// to, since they share its bytes.
#[derive(Debug)]
pub(crate) struct Charge {
    // Read by nobody: they give the bytes back when dropped.
    _own: Option<Held>,
    _total: Option<Arc<Held>>,
}

impl Charge {
    /// A frame counted nowhere (close frames).
    pub(crate) fn none() -> Self {
        Self { _own: None, _total: None }
    }
}

/// One frame for many connections (an event fanned out to the clients of a
/// tab): its bytes exist once, so they count once against the total.
#[derive(Debug, Clone)]
pub(crate) struct SharedFrame {
    pub text: Utf8Bytes,
    total: Arc<Held>,
}

impl SharedFrame {
    pub(crate) fn new(text: impl Into<Utf8Bytes>, total: &Arc<Meter>) -> Self {
        let text = text.into();
        total.add(text.len());
        Self { total: Arc::new(Held::new(total, text.len())), text }
    }

    /// Charges this frame to one more connection: to its own meter, and to
    /// the total only in that the total must not already be over (it was
    /// charged once, when the frame was built).
    pub(crate) fn charge(&self, own: &Arc<Meter>) -> Result<Charge, OverBudget> {
        let (own_held, had_some) = own.take(self.text.len())?;
        let total = &self.total.meter;
        if had_some && total.used() > total.limit {
            return Err(OverBudget { used: total.used(), limit: total.limit, shared: true });
        }
        Ok(Charge { _own: Some(own_held), _total: Some(self.total.clone()) })
    }
}

/// A frame on its way out, holding its bytes against the budgets until it is
/// written.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub message: Message,
    /// Held, not read: dropped once the frame is written, which gives its
    /// bytes back to the budgets.
    pub _charge: Charge,
}

/// Why a connection is being closed by the relay, sent as its close frame
/// when the peer still takes one.
pub(crate) type Farewell = Arc<OnceLock<CloseFrame>>;

/// Waits for `future` unless `stop` fires first.
async fn unless_stopped<F: Future>(stop: &CancellationToken, future: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        () = stop.cancelled() => None,
        output = future => Some(output),
    }
}

/// Runs `future` once with a waker that does nothing and, unless that
/// finished it, awaits it with the task's own.
///
/// For the writes of [`write_loop`]. The WebSocket (tokio-tungstenite,
/// under axum's) wakes the task that last wrote whenever the socket turns
/// readable, since a read may need to write (a pong). Written with this
/// task's waker, every frame the peer sends would wake the writer beside the
/// reader: two tasks woken by one event, and tokio hands one of them,
/// usually the reader, to another worker thread. A write that completes at
/// once (nearly all of them) leaves the no-op waker there instead; one that
/// must wait registers the task's own, as before. (`cdp-client`'s writer and
/// the benchmarks' forwarder have their own copy: the crates share no code.)
async fn at_once_or_waiting<F: Future + Unpin>(mut future: F) -> F::Output {
    {
        let mut quiet = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(output) = std::pin::Pin::new(&mut future).poll(&mut quiet) {
            return output;
        }
    }
    future.await
}

/// Writes queued frames to a socket, batching what is ready before flushing.
/// Ends on a close frame, when the queue closes, or when `stop` fires, also
/// while blocked on a peer that does not read. Then it drops whatever is
/// still queued (releasing its bytes), and gives the peer [`CLOSE_GRACE`] to
/// take the `farewell` close frame, if one was set.
pub(crate) async fn write_loop<W: Sink<Message> + Unpin>(
    mut sink: W,
    mut rx: mpsc::Receiver<Outgoing>,
    stop: CancellationToken,
    farewell: Farewell,
) {
    let mut closed = false;
    'outer: loop {
        let Some(Some(first)) = unless_stopped(&stop, rx.recv()).await else { break };
        closed = matches!(first.message, Message::Close(_));
        if !matches!(unless_stopped(&stop, at_once_or_waiting(sink.feed(first.message))).await, Some(Ok(()))) {
            break;
        }
        while !closed {
            let Ok(next) = rx.try_recv() else { break };
            closed = matches!(next.message, Message::Close(_));
            if !matches!(unless_stopped(&stop, at_once_or_waiting(sink.feed(next.message))).await, Some(Ok(()))) {
                break 'outer;
            }
        }
        if !matches!(unless_stopped(&stop, at_once_or_waiting(sink.flush())).await, Some(Ok(()))) || closed {
            break;
        }
    }
    rx.close();
    while rx.try_recv().is_ok() {}
    drop(rx);
    let goodbye = async {
        if !closed && let Some(frame) = farewell.get() {
            sink.send(Message::Close(Some(frame.clone()))).await?;
        }
        sink.close().await
    };
    let _ = tokio::time::timeout(CLOSE_GRACE, goodbye).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_with_nothing_queued_is_always_admitted() {
        let (own, total) = (Meter::new(10), Meter::new(15));
        let big = Meter::charge(&own, &total, 100).expect("alone, any size goes");
        assert_eq!((own.used(), total.used()), (100, 100));
        assert_eq!(Meter::charge(&own, &total, 1).unwrap_err(), OverBudget { used: 100, limit: 10, shared: false });
        drop(big);
        assert_eq!((own.used(), total.used()), (0, 0), "written frames release their bytes");
    }

    #[test]
    fn a_frame_that_does_not_fit_is_refused_and_charges_nothing() {
        let (own, total) = (Meter::new(10), Meter::new(100));
        let _a = Meter::charge(&own, &total, 6).unwrap();
        assert_eq!(Meter::charge(&own, &total, 5).unwrap_err(), OverBudget { used: 6, limit: 10, shared: false });
        let _b = Meter::charge(&own, &total, 4).unwrap();
        assert_eq!((own.used(), total.used()), (10, 10));
    }

    #[test]
    fn the_total_binds_connections_that_each_fit() {
        let total = Meter::new(10);
        let (a, b) = (Meter::new(8), Meter::new(8));
        let _a1 = Meter::charge(&a, &total, 6).unwrap();
        let _b1 = Meter::charge(&b, &total, 4).unwrap();
        assert_eq!(Meter::charge(&b, &total, 1).unwrap_err(), OverBudget { used: 10, limit: 10, shared: true });
        assert_eq!(b.used(), 4, "a refused frame leaves its connection's meter as it was");
        // A connection with nothing queued still gets one frame through.
        let c = Meter::new(8);
        let _c1 = Meter::charge(&c, &total, 3).unwrap();
        assert_eq!(total.used(), 13);
    }

    #[test]
    fn a_shared_frame_counts_once_against_the_total() {
        let total = Meter::new(100);
        let (a, b) = (Meter::new(50), Meter::new(50));
        let frame = SharedFrame::new("x".repeat(40), &total);
        let to_a = frame.charge(&a).unwrap();
        let to_b = frame.charge(&b).unwrap();
        drop(frame);
        assert_eq!((a.used(), b.used(), total.used()), (40, 40, 40));
        drop(to_a);
        assert_eq!(total.used(), 40, "still queued to b");
        drop(to_b);
        assert_eq!((a.used(), b.used(), total.used()), (0, 0, 0));
    }

    #[test]
    fn a_shared_frame_is_refused_to_a_connection_over_its_own_budget_or_when_the_total_is_over() {
        let total = Meter::new(100);
        let a = Meter::new(50);
        let _queued = Meter::charge(&a, &total, 30).unwrap();
        let frame = SharedFrame::new("x".repeat(30), &total);
        assert!(matches!(frame.charge(&a), Err(OverBudget { shared: false, .. })));
        let _big = SharedFrame::new("x".repeat(50), &total);
        let b = Meter::new(50);
        let _b1 = Meter::charge(&b, &total, 1).unwrap();
        assert!(matches!(frame.charge(&b), Err(OverBudget { shared: true, .. })), "total {}", total.used());
        assert!(frame.charge(&Meter::new(50)).is_ok(), "a connection with nothing queued gets it");
    }

    /// A future that is done after `pending` polls, and keeps the waker of
    /// its last poll (where a socket keeps the writer's).
    struct Write {
        pending: usize,
        waker: Option<std::task::Waker>,
    }

    impl Future for &mut Write {
        type Output = ();
        fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
            self.waker = Some(cx.waker().clone());
            if self.pending == 0 {
                return std::task::Poll::Ready(());
            }
            self.pending -= 1;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }

    #[tokio::test]
    async fn a_write_done_at_once_leaves_no_waker_of_the_writer_behind() {
        let task = std::future::poll_fn(|cx| std::task::Poll::Ready(cx.waker().clone())).await;
        let mut done = Write { pending: 0, waker: None };
        at_once_or_waiting(&mut done).await;
        assert!(!done.waker.unwrap().will_wake(&task), "a frame in from the peer must not wake the writer");

        let mut waits = Write { pending: 1, waker: None };
        at_once_or_waiting(&mut waits).await;
        assert!(waits.waker.unwrap().will_wake(&task), "a write that waits is woken when it can go on");
    }

    #[test]
    fn close_reasons_fit_a_close_frame() {
        let reason = "é".repeat(100);
        let frame = close_frame(1008, &reason);
        assert!(frame.reason.len() <= 123 && reason.starts_with(frame.reason.as_str()));
    }

    #[test]
    fn sizes_read_as_a_person_would_say_them() {
        assert_eq!(
            OverBudget { used: 130 << 20, limit: 128 << 20, shared: false }.describe(),
            "130 MiB queued, the limit is 128 MiB"
        );
        assert_eq!(OverBudget { used: 1500, limit: 1024, shared: true }.describe(), "2 KiB queued, the limit is 1 KiB");
    }
}
