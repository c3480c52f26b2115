//! HTTP/1.1 requests over hyper's client: a browser's `/json/*` documents
//! (a remote one over TLS, with its headers: [`get_with`]), and the CLI
//! talking to the control API ([`KeptConnection`], request after request;
//! tests also `request`, one a connection, loopback). Bounded in time and size;
//! no redirects.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper_util::rt::TokioIo;

use crate::endpoint_error::EndpointError;
use crate::net::Dial;

/// Every request must finish within this.
pub const REQUEST_WITHIN: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// `GET url` → (status, body as text), within 5 s.
#[cfg(feature = "testing")]
pub async fn get(url: &str) -> std::io::Result<(u16, String)> {
    let response = tokio::time::timeout(Duration::from_secs(5), request("GET", url, &[], None))
        .await
        .map_err(|_| std::io::Error::other("timed out"))??;
    Ok((response.status, response.text()))
}

/// The largest response read (Chrome's `/json/protocol` is about 1.5 MiB).
const MAX_RESPONSE: usize = 32 << 20;

/// Sends one request to an `http://host:port/path` URL over hyper's HTTP/1
/// client (one connection per request, no pool: a browser's `/json/*` and
/// the control API are on loopback). A JSON `body` is sent with
/// `Content-Type: application/json`. The response is read up to
/// [`MAX_RESPONSE`]; the whole exchange within [`REQUEST_WITHIN`].
#[cfg(any(test, feature = "testing"))]
pub async fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> std::io::Result<HttpResponse> {
    let rest = url.strip_prefix("http://").ok_or_else(|| std::io::Error::other("http:// URL expected"))?;
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let exchange = async {
        let stream = tokio::net::TcpStream::connect(host).await?;
        send(stream, method, host, &path, headers, body).await?.read().await
    };
    tokio::time::timeout(REQUEST_WITHIN, exchange).await.map_err(|_| std::io::Error::other("timed out"))?
}

/// `GET url` (`http://` or `https://`) with `dial`'s headers, roots and
/// deadlines: TCP within its connect deadline, TLS and the answer's head
/// within its handshake deadline, and the body within a handshake deadline
/// more (a farm that sends a head and stalls must not hold a profile's
/// connection for a minute).
pub async fn get_with(url: &str, dial: &Dial) -> Result<HttpResponse, EndpointError> {
    let shown = crate::redact(url);
    let parsed =
        url::Url::parse(url).map_err(|e| EndpointError::BadUrl { url: shown.clone(), reason: e.to_string() })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(EndpointError::BadUrl { url: shown, reason: "http:// or https:// expected".into() });
    }
    let (stream, answer_by) = crate::net::open(&parsed, dial, &shown).await?;
    let host = match parsed.port() {
        Some(port) => format!("{}:{port}", parsed.host_str().unwrap_or_default()),
        None => parsed.host_str().unwrap_or_default().to_string(),
    };
    let path = match parsed.query() {
        Some(query) => format!("{}?{query}", parsed.path()),
        None => parsed.path().to_string(),
    };
    let headers: Vec<(&str, &str)> = dial.headers.iter().map(|(name, value)| (name.as_str(), value.expose())).collect();
    let failed = |e: std::io::Error| EndpointError::Unreachable { url: shown.clone(), reason: e.to_string() };
    let answer = tokio::time::timeout_at(answer_by, send(stream, "GET", &host, &path, &headers, None))
        .await
        .map_err(|_| EndpointError::HandshakeTimeout {
            url: shown.clone(),
            stage: "HTTP answer",
            within: dial.handshake_within,
        })?
        .map_err(failed)?;
    tokio::time::timeout(dial.handshake_within, answer.read())
        .await
        .map_err(|_| EndpointError::HandshakeTimeout {
            url: shown.clone(),
            stage: "HTTP answer's body",
            within: dial.handshake_within,
        })?
        .map_err(failed)
}

/// An answer whose head has arrived; its body is still to read.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: hyper::body::Incoming,
    /// The connection's I/O, which runs until the body is read (none: a
    /// [`KeptConnection`] runs its own).
    _connection: Option<AbortOnDrop<Result<(), hyper::Error>>>,
}

/// Sends one request over `stream`; the answer once its head has arrived.
async fn send<S>(
    stream: S,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> std::io::Result<Answer>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let request = build(method, host, path, headers, body)?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(std::io::Error::other)?;
    // The connection's I/O runs beside the request; it ends with it.
    let connection = AbortOnDrop(tokio::spawn(connection));
    let response = sender.send_request(request).await.map_err(std::io::Error::other)?;
    Ok(Answer::of(response, Some(connection)))
}

fn build(
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> std::io::Result<hyper::Request<Full<Bytes>>> {
    let mut builder = hyper::Request::builder()
        .method(hyper::Method::from_bytes(method.as_bytes()).map_err(std::io::Error::other)?)
        .uri(path)
        .header(hyper::header::HOST, host);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    if body.is_some() {
        builder = builder.header(hyper::header::CONTENT_TYPE, "application/json");
    }
    builder.body(Full::new(Bytes::copy_from_slice(body.unwrap_or_default()))).map_err(std::io::Error::other)
}

/// One HTTP/1.1 connection to a loopback `host:port`, kept for request
/// after request: for a client that proves the server once per connection
/// (the control API's), so that a server which went away, and whatever
/// took its port, is met on a new connection, proved again before
/// anything is sent. One request at a time.
pub struct KeptConnection {
    host: String,
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    _io: AbortOnDrop<Result<(), hyper::Error>>,
}

impl std::fmt::Debug for KeptConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptConnection").field("host", &self.host).field("open", &self.is_open()).finish()
    }
}

impl KeptConnection {
    /// Connects to `host` (`127.0.0.1:port`).
    pub async fn open(host: &str) -> std::io::Result<Self> {
        let stream = tokio::net::TcpStream::connect(host).await?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(std::io::Error::other)?;
        Ok(Self { host: host.to_string(), sender, _io: AbortOnDrop(tokio::spawn(connection)) })
    }

    /// Whether the peer may still be sent a request: `false` once it
    /// closed the connection.
    pub fn is_open(&self) -> bool {
        !self.sender.is_closed()
    }

    /// One request and its whole answer, within [`REQUEST_WITHIN`]. After
    /// an error the connection is not to be used again; the error says
    /// whether the request provably never left ([`KeptError::unsent`]).
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<HttpResponse, KeptError> {
        self.request_within(method, path, headers, body, REQUEST_WITHIN).await
    }

    /// [`Self::request`], its answer awaited for `within` (a request that
    /// waits for a person).
    pub async fn request_within(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
        within: Duration,
    ) -> Result<HttpResponse, KeptError> {
        let failed = |source| KeptError { source, unsent: false };
        let request = build(method, &self.host, path, headers, body).map_err(failed)?;
        let exchange = async {
            // Closed before anything was written: the request never left.
            self.sender.ready().await.map_err(|e| KeptError { source: std::io::Error::other(e), unsent: true })?;
            let response = self.sender.try_send_request(request).await.map_err(|e| KeptError {
                unsent: e.message().is_some(),
                source: std::io::Error::other(e.into_error()),
            })?;
            Answer::of(response, None).read().await.map_err(failed)
        };
        tokio::time::timeout(within, exchange).await.map_err(|_| failed(std::io::Error::other("timed out")))?
    }
}

/// A [`KeptConnection`]'s request that failed.
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub struct KeptError {
    pub source: std::io::Error,
    /// The connection was closed before the request was written: it
    /// reached no server, and may be sent again on another connection.
    /// Otherwise the server may have acted on it.
    pub unsent: bool,
}

impl Answer {
    fn of(
        response: hyper::Response<hyper::body::Incoming>,
        connection: Option<AbortOnDrop<Result<(), hyper::Error>>>,
    ) -> Self {
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect();
        Self { status, headers, body: response.into_body(), _connection: connection }
    }

    /// Reads the body, up to [`MAX_RESPONSE`].
    async fn read(self) -> std::io::Result<HttpResponse> {
        let Self { status, headers, body, _connection } = self;
        let body = Limited::new(body, MAX_RESPONSE).collect().await.map_err(|e| {
            if e.is::<LengthLimitError>() {
                std::io::Error::other(format!("response larger than {} MiB", MAX_RESPONSE >> 20))
            } else {
                std::io::Error::other(e)
            }
        })?;
        Ok(HttpResponse { status, headers, body: body.to_bytes().to_vec() })
    }
}

/// Aborts a spawned task when dropped (also when the request is).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Serves `answer` to one request; the request as received.
    async fn answering(answer: &'static [u8]) -> (String, tokio::task::JoinHandle<Vec<u8>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; 4096];
            let n = socket.read(&mut request).await.unwrap();
            socket.write_all(answer).await.unwrap();
            request.truncate(n);
            request
        });
        (format!("http://{addr}"), server)
    }

    #[tokio::test]
    async fn responses_with_length_and_chunks() {
        let (base, server) = answering(b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\nX-A: b\r\n\r\nhi").await;
        let plain = request("GET", &format!("{base}/json/version"), &[], None).await.unwrap();
        assert_eq!((plain.status, plain.text(), plain.header("x-a")), (404, "hi".into(), Some("b")));
        let sent = String::from_utf8(server.await.unwrap()).unwrap();
        assert!(sent.starts_with("GET /json/version HTTP/1.1\r\n") && sent.contains("host: 127.0.0.1:"), "{sent}");

        let (base, _server) =
            answering(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").await;
        assert_eq!(request("GET", &base, &[], None).await.unwrap().text(), "abcde");
        let (base, _server) = answering(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nshort").await;
        assert!(request("GET", &base, &[], None).await.is_err(), "a body shorter than its length");
    }

    #[tokio::test]
    async fn a_hostile_chunk_size_is_an_error_not_a_panic() {
        let (base, _server) =
            answering(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc\r\n0\r\n\r\n")
                .await;
        assert!(request("GET", &base, &[], None).await.is_err());
        let (base, _server) = answering(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").await;
        assert!(request("GET", &base, &[], None).await.is_err());
    }

    #[tokio::test]
    async fn an_endless_response_is_cut_off() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let _ = socket.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n").await;
            let block = vec![b'x'; 1 << 20];
            while socket.write_all(&block).await.is_ok() {}
        });
        let error = request("GET", &format!("http://{addr}/json/version"), &[], None).await.unwrap_err();
        assert!(error.to_string().contains("larger than 32 MiB"), "{error}");
        server.abort();
    }
}
