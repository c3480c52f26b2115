//! A read limit on one connection that a route can set and lift: the
//! `/extension` socket reads no more than a few KiB until the pairing proof
//! checks out (shared-protocol's `PRE_PROOF_BYTES`). axum fixes a
//! WebSocket's message limit when it upgrades, so the limit lives below it,
//! on the connection's bytes; every request carries its connection's
//! [`ReadAllowance`] as an extension.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// No limit (the state of every connection until a route sets one).
const UNLIMITED: usize = usize::MAX;

/// How many more bytes the connection may read; shared by the connection
/// and the requests it carries.
#[derive(Debug, Clone)]
pub(crate) struct ReadAllowance(Arc<AtomicUsize>);

impl Default for ReadAllowance {
    fn default() -> Self {
        Self(Arc::new(AtomicUsize::new(UNLIMITED)))
    }
}

impl ReadAllowance {
    /// From now on the connection reads at most `bytes` more; past them,
    /// reading fails and the connection ends.
    pub(crate) fn limit(&self, bytes: usize) {
        self.0.store(bytes.min(UNLIMITED - 1), Ordering::Release);
    }

    /// Reads are unlimited again.
    pub(crate) fn lift(&self) {
        self.0.store(UNLIMITED, Ordering::Release);
    }

    /// `None`: unlimited.
    fn left(&self) -> Option<usize> {
        match self.0.load(Ordering::Acquire) {
            UNLIMITED => None,
            left => Some(left),
        }
    }

    fn spend(&self, bytes: usize) {
        // Only the connection's own reads spend, one at a time; a lift in
        // between wins.
        let _ = self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
            (left != UNLIMITED).then(|| left.saturating_sub(bytes))
        });
    }
}

/// A connection whose reads obey its [`ReadAllowance`].
#[derive(Debug)]
pub(crate) struct Allowed<S> {
    inner: S,
    allowance: ReadAllowance,
}

impl<S> Allowed<S> {
    pub(crate) fn new(inner: S, allowance: ReadAllowance) -> Self {
        Self { inner, allowance }
    }
}

/// The largest read while limited: one stack buffer, as limits are a few
/// KiB (a larger limit is read in several such steps).
const LIMITED_STEP: usize = 4096;

impl<S: AsyncRead + Unpin> AsyncRead for Allowed<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let Some(left) = this.allowance.left() else {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        };
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        if left == 0 {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the peer sent more than this connection may send before it proves itself",
            )));
        }
        // Never read past the allowance, not even into a buffer: what lies
        // beyond stays in the kernel until the limit is lifted.
        let mut step = [0u8; LIMITED_STEP];
        let room = buf.remaining().min(left).min(LIMITED_STEP);
        let mut limited = ReadBuf::new(&mut step[..room]);
        ready!(Pin::new(&mut this.inner).poll_read(cx, &mut limited))?;
        let read = limited.filled();
        buf.put_slice(read);
        this.allowance.spend(read.len());
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Allowed<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    #[tokio::test]
    async fn a_limited_connection_reads_its_allowance_then_fails_until_lifted() {
        let (mut peer, ours) = tokio::io::duplex(1 << 16);
        let allowance = ReadAllowance::default();
        let mut ours = Allowed::new(ours, allowance.clone());
        peer.write_all(&[7u8; 10_000]).await.unwrap();

        allowance.limit(100);
        let mut got = vec![0u8; 10_000];
        let mut read = 0;
        let error = loop {
            match ours.read(&mut got[read..]).await {
                Ok(n) => read += n,
                Err(e) => break e,
            }
        };
        assert_eq!(read, 100, "exactly the allowance, not a byte more");
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);

        // Lifted: the rest, which stayed unread, arrives whole.
        allowance.lift();
        ours.read_exact(&mut got[100..]).await.unwrap();
        assert!(got.iter().all(|&b| b == 7));
    }

    #[tokio::test]
    async fn an_unlimited_connection_reads_as_the_stream_does() {
        let (mut peer, ours) = tokio::io::duplex(1 << 20);
        let mut ours = Allowed::new(ours, ReadAllowance::default());
        let sent: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        peer.write_all(&sent).await.unwrap();
        drop(peer);
        let mut got = Vec::new();
        ours.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, sent);
    }
}
