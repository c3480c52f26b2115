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

/// Python's own HTML documentation (Debian's `python3-doc`, which
/// `scripts/setup.sh` installs), served under `/pydoc/`: real pages for the
/// token benchmark.
pub const PYTHON_DOCS: &str = "/usr/share/doc/python3/html";

#[derive(Debug)]
pub struct FixtureServer {
    pub addr: SocketAddr,
    stop: CancellationToken,
    seen: Seen,
}

/// One request the fixture server received: which site (its `Host`),
/// method, path with query, and the cookies it carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub host: String,
    pub method: String,
    pub path: String,
    pub cookie: Option<String>,
}

type Seen = std::sync::Arc<std::sync::Mutex<Vec<Request>>>;

impl FixtureServer {
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let seen = Seen::default();
        let log = seen.clone();
        let app = Router::new()
            .route("/status/{code}", get(status))
            .route("/auth", get(basic_auth))
            .route("/redirect", get(redirect))
            .route("/set-cookie", get(set_cookie))
            .route("/echo", get(echo).post(echo))
            .route("/attachment", get(attachment))
            .route("/pydoc/{*path}", get(|Path(path): Path<String>| serve_from(PathBuf::from(PYTHON_DOCS), path)))
            .route("/{*path}", get(serve_file).post(echo))
            .route("/", get(|| serve_file(Path("index.html".into()))))
            .layer(axum::middleware::from_fn(move |request: axum::extract::Request, next: axum::middleware::Next| {
                let text = |name| request.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
                let seen = Request {
                    host: text(header::HOST).unwrap_or_default(),
                    method: request.method().to_string(),
                    path: request.uri().path_and_query().map(ToString::to_string).unwrap_or_default(),
                    cookie: text(header::COOKIE),
                };
                log.lock().unwrap_or_else(|p| p.into_inner()).push(seen);
                next.run(request)
            }));
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).with_graceful_shutdown(stopped.cancelled_owned()).await;
        });
        Ok(Self { addr, stop, seen })
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The requests whose `Host` is `host` (`localhost:PORT`, say) and
    /// whose path starts with `path`.
    pub fn requests_to(&self, host: &str, path: &str) -> Vec<Request> {
        self.requests().into_iter().filter(|r| r.host == host && r.path.starts_with(path)).collect()
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

/// `/redirect?to=URL`: a 302 there.
async fn redirect(Query(query): Query<std::collections::HashMap<String, String>>) -> Response {
    let to = query.get("to").cloned().unwrap_or_else(|| "/".into());
    (StatusCode::FOUND, [(header::LOCATION, to)], "moved").into_response()
}

/// `/set-cookie?name=N&value=V`: sets that cookie, sent everywhere the
/// browser sends a third party's (`SameSite=None; Secure`: Chrome takes a
/// secure cookie from http://localhost and 127.0.0.1, which it trusts).
async fn set_cookie(
    Query(query): Query<std::collections::HashMap<String, String>>,
    headers: axum::http::HeaderMap,
) -> Response {
    let name = query.get("name").cloned().unwrap_or_else(|| "sid".into());
    let value = query.get("value").cloned().unwrap_or_else(|| "secret".into());
    let cookie = format!("{name}={value}; Path=/; SameSite=None; Secure");
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()).unwrap_or("*").to_string();
    let headers = [
        (header::SET_COOKIE, cookie),
        (header::CONTENT_TYPE, "text/html".into()),
        (header::ACCESS_CONTROL_ALLOW_ORIGIN, origin),
        (header::ACCESS_CONTROL_ALLOW_CREDENTIALS, "true".into()),
    ];
    (headers, "<title>cookie set</title>").into_response()
}

/// `/attachment?name=N`: a file Chrome downloads, not shows
/// (`Content-Disposition: attachment`).
async fn attachment(Query(query): Query<std::collections::HashMap<String, String>>) -> Response {
    let name: String = query
        .get("name")
        .map_or("file.txt", String::as_str)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
        .take(40)
        .collect();
    let disposition = format!("attachment; filename=\"{name}\"");
    ([(header::CONTENT_TYPE, "text/csv".to_string()), (header::CONTENT_DISPOSITION, disposition)], "a,b\n1,2\n")
        .into_response()
}

/// `/echo`: a page that says what it got (its method and cookies), with
/// CORS open to credentialed requests from any origin (a cross-site
/// `fetch(…, {credentials: "include"})` reads it).
async fn echo(method: axum::http::Method, headers: axum::http::HeaderMap) -> Response {
    let cookie = headers.get(header::COOKIE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()).unwrap_or("*").to_string();
    let body = format!("<title>echo {method}</title><pre id=cookie>{cookie}</pre>");
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_string()),
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, origin),
            (header::ACCESS_CONTROL_ALLOW_CREDENTIALS, "true".into()),
        ],
        body,
    )
        .into_response()
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
    serve_from(fixtures_dir(), path).await
}

async fn serve_from(root: PathBuf, path: String) -> Response {
    if path.split('/').any(|part| part == ".." || part.starts_with('.')) {
        return StatusCode::NOT_FOUND.into_response();
    }
    let file = root.join(&path);
    let Ok(bytes) = tokio::fs::read(&file).await else { return StatusCode::NOT_FOUND.into_response() };
    let mime = match file.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript",
        Some("css") => "text/css",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        Some("txt") => "text/plain; charset=utf-8",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    };
    ([(header::CONTENT_TYPE, mime)], bytes).into_response()
}
