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
                        if client_tx.send(m).await.is_err() {
                            break;
                        }
                    }
                });
                while let Some(Ok(m)) = client_rx.next().await {
                    if server_tx.send(m).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}
