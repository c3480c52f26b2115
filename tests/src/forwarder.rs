//! The smallest possible relay, for benchmarks: every WebSocket frame
//! forwarded unchanged to one upstream, nothing read. Whatever a relay
//! costs beyond this is its own; this much (one more loopback hop each
//! way) any relay pays.

use std::net::SocketAddr;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default().max_message_size(Some(256 << 20)).max_frame_size(Some(256 << 20))
}

/// Runs `future` once with a waker that does nothing, then, unless that
/// finished it, with the task's own: a write done at once leaves no waker of
/// its task in tokio-tungstenite, which would otherwise wake it beside the
/// reader on every frame that comes in (the relay's own writers do the
/// same, so the forwarder is the least any relay pays, not more).
async fn at_once_or_waiting<F: Future + Unpin>(mut future: F) -> F::Output {
    {
        let mut quiet = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(output) = std::pin::Pin::new(&mut future).poll(&mut quiet) {
            return output;
        }
    }
    future.await
}

/// Listens on an ephemeral loopback port; each connection is forwarded to
/// a connection of its own to `upstream` (a `ws://` URL). Lives as long as
/// the runtime.
pub async fn minimal_forwarder(upstream: String) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let _ = stream.set_nodelay(true);
                let Ok(client) = tokio_tungstenite::accept_async_with_config(stream, Some(ws_config())).await else {
                    return;
                };
                let Ok((server, _)) =
                    tokio_tungstenite::connect_async_with_config(upstream.as_str(), Some(ws_config()), true).await
                else {
                    return;
                };
                let (mut client_tx, mut client_rx) = client.split();
                let (mut server_tx, mut server_rx) = server.split();
                tokio::spawn(async move {
                    while let Some(Ok(m)) = server_rx.next().await {
                        if at_once_or_waiting(client_tx.send(m)).await.is_err() {
                            break;
                        }
                    }
                });
                while let Some(Ok(m)) = client_rx.next().await {
                    if at_once_or_waiting(server_tx.send(m)).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}
