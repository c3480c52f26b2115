//! A static file server for `tests/fixtures`, on an ephemeral loopback port.
//! Reachable as `127.0.0.1` and as `localhost`: two sites, for cross-site iframes.

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::Router;
use axum::extract::{Path, Query};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio_util::sync::CancellationToken;

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

#[derive(Debug)]
pub struct FixtureServer {
    pub addr: SocketAddr,
    stop: CancellationToken,
}

impl FixtureServer {
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/status/{code}", get(status))
            .route("/auth", get(basic_auth))
            .route("/{*path}", get(serve_file))
            .route("/", get(|| serve_file(Path("index.html".into()))));
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).with_graceful_shutdown(stopped.cancelled_owned()).await;
        });
        Ok(Self { addr, stop })
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.addr.port())
    }

    /// `http://localhost:PORT`: another site than [`Self::url`].
    pub fn alt_url(&self) -> String {
        format!("http://localhost:{}", self.addr.port())
    }
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// `/status/503?delay=300`: that status, after that many milliseconds (at
/// most 5 s): a request that fails, and takes a while to.
async fn status(Path(code): Path<u16>, Query(query): Query<std::collections::HashMap<String, u64>>) -> Response {
    let delay = query.get("delay").copied().unwrap_or(0).min(5_000);
    tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    (status, format!("status {code}")).into_response()
}

/// `/auth`: HTTP basic auth as `user`/`pass`; a 401 with its challenge
/// until then.
async fn basic_auth(headers: axum::http::HeaderMap) -> Response {
    // base64("user:pass")
    if headers.get(header::AUTHORIZATION).is_some_and(|v| v == "Basic dXNlcjpwYXNz") {
        return (StatusCode::OK, "signed in").into_response();
    }
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, r#"Basic realm="fixture""#)], "sign in").into_response()
}

async fn serve_file(Path(path): Path<String>) -> Response {
    if path.split('/').any(|part| part == ".." || part.starts_with('.')) {
        return StatusCode::NOT_FOUND.into_response();
    }
    let file = fixtures_dir().join(&path);
    let Ok(bytes) = tokio::fs::read(&file).await else { return StatusCode::NOT_FOUND.into_response() };
    let mime = match file.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript",
        Some("css") => "text/css",
        Some("png") => "image/png",
        Some("txt") => "text/plain; charset=utf-8",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    };
    ([(header::CONTENT_TYPE, mime)], bytes).into_response()
}
