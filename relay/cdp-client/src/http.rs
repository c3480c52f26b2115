//! A minimal HTTP/1.1 client for loopback requests: a browser's
//! `/json/version`, and the CLI and tests talking to the control API. One
//! request per connection, bounded in time; no TLS, no redirects.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
pub async fn get(url: &str) -> std::io::Result<(u16, String)> {
    let response = tokio::time::timeout(Duration::from_secs(5), request("GET", url, &[], None))
        .await
        .map_err(|_| std::io::Error::other("timed out"))??;
    Ok((response.status, response.text()))
}

/// The largest response read (Chrome's `/json/protocol` is about 1.5 MiB).
const MAX_RESPONSE: usize = 32 << 20;
/// Where the end of the head must be found.
const MAX_HEAD: usize = 64 << 10;

/// Sends one request to an `http://host:port/path` URL. A JSON `body` is
/// sent with `Content-Type: application/json`.
pub async fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> std::io::Result<HttpResponse> {
    let rest = url.strip_prefix("http://").ok_or_else(|| std::io::Error::other("http:// URL expected"))?;
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(host).await?;
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(body) = body {
            head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await?;
        if let Some(body) = body {
            stream.write_all(body).await?;
        }
        // Chrome keeps the connection open after answering: read until the
        // response is complete by its length, not to the end of the stream.
        let mut raw = Vec::new();
        let mut chunk = vec![0u8; 16384];
        loop {
            let n = stream.read(&mut chunk).await?;
            raw.extend_from_slice(&chunk[..n]);
            if n == 0 {
                return parse_response(&raw);
            }
            if is_complete(&raw)
                && let Ok(response) = parse_response(&raw)
            {
                return Ok(response);
            }
            if raw.len() > MAX_RESPONSE {
                return Err(std::io::Error::other(format!("response larger than {} MiB", MAX_RESPONSE >> 20)));
            }
        }
    };
    tokio::time::timeout(REQUEST_WITHIN, exchange).await.map_err(|_| std::io::Error::other("timed out"))?
}

/// A response's status line and headers, and where its body starts.
struct Head {
    status: u16,
    headers: Vec<(String, String)>,
    body_at: usize,
}

impl Head {
    /// The head, once its end is within the first [`MAX_HEAD`] bytes.
    fn parse(raw: &[u8]) -> Option<Self> {
        let split = raw.windows(4).take(MAX_HEAD).position(|w| w == b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&raw[..split]);
        let mut lines = head.lines();
        let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
        let headers = lines
            .filter_map(|line| line.split_once(':').map(|(n, v)| (n.trim().to_string(), v.trim().to_string())))
            .collect();
        Some(Self { status, headers, body_at: split + 4 })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn chunked(&self) -> bool {
        self.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    }

    fn content_length(&self) -> Option<usize> {
        self.header("content-length").and_then(|v| v.parse().ok())
    }
}

fn parse_response(raw: &[u8]) -> std::io::Result<HttpResponse> {
    let truncated = || std::io::Error::other("connection closed before a full response");
    let head = Head::parse(raw).ok_or_else(truncated)?;
    let mut body = raw[head.body_at..].to_vec();
    if head.chunked() {
        body = dechunk(&body)?;
    } else if let Some(length) = head.content_length() {
        if body.len() < length {
            return Err(truncated());
        }
        body.truncate(length);
    }
    Ok(HttpResponse { status: head.status, headers: head.headers, body })
}

/// The response has its whole body (by length, or the last chunk). Looks
/// at the head and the length only, never re-reads the body, so that
/// reading stays linear in the response's size.
fn is_complete(raw: &[u8]) -> bool {
    let Some(head) = Head::parse(raw) else { return false };
    let body = &raw[head.body_at..];
    if head.chunked() {
        return raw.ends_with(b"\r\n0\r\n\r\n") || body.starts_with(b"0\r\n\r\n");
    }
    head.content_length().is_some_and(|length| body.len() >= length)
}

fn dechunk(mut data: &[u8]) -> std::io::Result<Vec<u8>> {
    let bad = || std::io::Error::other("malformed chunked body");
    let mut out = Vec::new();
    loop {
        let end = data.windows(2).position(|w| w == b"\r\n").ok_or_else(bad)?;
        let size_text = std::str::from_utf8(&data[..end]).map_err(|_| bad())?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16).map_err(|_| bad())?;
        data = &data[end + 2..];
        if size == 0 {
            return Ok(out);
        }
        // A size from the peer: never trusted to fit (ffffffffffffffff).
        if data.len().saturating_sub(2) < size {
            return Err(bad());
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_with_length_and_chunks() {
        let plain = parse_response(b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\nX-A: b\r\n\r\nhi").unwrap();
        assert_eq!((plain.status, plain.text(), plain.header("x-a")), (404, "hi".into(), Some("b")));
        let chunked =
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
                .unwrap();
        assert_eq!(chunked.text(), "abcde");
        assert!(parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nshort").is_err());
        assert!(parse_response(b"HTTP/1.1 200").is_err());
    }

    #[test]
    fn a_hostile_chunk_size_is_an_error_not_a_panic() {
        let huge = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc\r\n0\r\n\r\n";
        assert!(parse_response(huge).is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
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
