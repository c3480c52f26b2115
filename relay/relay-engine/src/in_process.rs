//! A CDP client in the relay's own process: the control engine on the
//! person's shared tabs. It is served by the same code as a `/cdp` socket
//! ([`Relay::serve_client`]: the same routing, the same `Target.*`
//! synthesis, the same grant rules, the same books), over a pair of
//! channels instead of a WebSocket: no token check against ourselves, no
//! socket, no second JSON pass through a WebSocket codec.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::ws::Message;
use futures_util::{Sink, Stream};
use tokio::sync::mpsc;

use crate::client::ClientLabel;
use crate::relay::Relay;

/// Every client place under `max_clients` is taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("too many CDP clients connected ({max}); close one and retry")]
pub struct TooManyClients {
    pub max: usize,
}

/// The client's ends of an in-process connection: CDP text frames to the
/// relay and from it. Dropping `to_relay` ends the connection as a closed
/// socket would (the client's sessions go, what it set on the tabs is taken
/// back); `from_relay` ends when the relay closes it.
#[derive(Debug)]
pub struct InProcessClient {
    pub to_relay: mpsc::UnboundedSender<String>,
    pub from_relay: mpsc::UnboundedReceiver<String>,
}

impl Relay {
    /// Connects a client in this process, as `label` with `access` (a
    /// grant's connection sees the grant's tabs and sites only), within the
    /// same `max_clients` as the sockets.
    pub fn connect_in_process(
        &self,
        label: ClientLabel,
        access: grants::Access,
    ) -> Result<InProcessClient, TooManyClients> {
        let slot = self.try_client_slot().ok_or(TooManyClients { max: self.config().max_clients })?;
        let (to_relay, from_client) = mpsc::unbounded_channel();
        let (to_client, from_relay) = mpsc::unbounded_channel();
        let socket = ChannelSocket { from_client, to_client: Some(to_client) };
        let relay = self.clone();
        tokio::spawn(async move { relay.serve_client(socket, None, label, access, slot).await });
        Ok(InProcessClient { to_relay, from_relay })
    }
}

/// The relay's end of an in-process connection, as the socket
/// [`Relay::serve_client`] reads and writes: text frames pass, a close
/// frame ends the client's side, anything else (binary, pings) is nothing
/// to a channel.
#[derive(Debug)]
pub(crate) struct ChannelSocket {
    from_client: mpsc::UnboundedReceiver<String>,
    to_client: Option<mpsc::UnboundedSender<String>>,
}

/// The client dropped its end.
fn client_gone() -> axum::Error {
    axum::Error::new("the in-process client is gone")
}

impl Stream for ChannelSocket {
    type Item = Result<Message, axum::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().from_client.poll_recv(cx).map(|text| text.map(|text| Ok(Message::Text(text.into()))))
    }
}

impl Sink<Message> for ChannelSocket {
    type Error = axum::Error;

    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, message: Message) -> Result<(), Self::Error> {
        let this = self.get_mut();
        match message {
            Message::Text(text) => {
                let to_client = this.to_client.as_ref().ok_or_else(client_gone)?;
                to_client.send(text.as_str().to_owned()).map_err(|_| client_gone())
            }
            Message::Close(_) => {
                this.to_client = None;
                Ok(())
            }
            Message::Binary(_) | Message::Ping(_) | Message::Pong(_) => Ok(()),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.get_mut().to_client = None;
        Poll::Ready(Ok(()))
    }
}
