//! Every security rule of SECURITY.md, each tried against a real relay on
//! 127.0.0.1:0 with real HTTP requests and WebSocket handshakes.

use std::net::SocketAddr;
use std::time::Duration;

use browser_relay::DEFAULT_EXTENSION_ID;
use browser_relay::ServeLimits;
use browser_relay::{RunningServer, ServerOptions};
use e2e::fake_extension::{FakeExtension, Mode, hello};
use state_dir::Token;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// One row of a rule table: what it tries, the path, the Host (HTTP rows
/// only), extra headers, and the status the relay must answer.
type HttpCase<'a> = (&'a str, String, &'a str, Vec<(&'a str, &'a str)>, u16);
type WsCase<'a> = (&'a str, String, Vec<(&'a str, &'a str)>, u16);

/// Sends one raw HTTP/1.1 request; returns the status code and the response.
async fn raw_request(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf).to_string();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

fn get(path: &str, host: &str, extra: &[(&str, &str)]) -> String {
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in extra {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request + "\r\n"
}

/// Attempts a WebSocket handshake; returns the HTTP status (101 on success).
async fn ws_status(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> u16 {
    let mut request = format!("ws://{addr}{path}").into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            http::HeaderValue::from_str(value).unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok(_) => 101,
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(e) => panic!("handshake to {path} failed without an HTTP status: {e}"),
    }
}

struct Relay {
    server: RunningServer,
    token: Token,
    _ext: FakeExtension,
}

/// `serve` with its control API, in a state folder of its own, on free
/// ports; `tweak` adjusts the options first.
struct WithControl {
    server: RunningServer,
    token: Token,
    /// Where the control API listens.
    control: SocketAddr,
    _state: tempfile::TempDir,
}

async fn serve_with_control(tweak: impl FnOnce(&mut ServerOptions)) -> WithControl {
    let state = tempfile::tempdir().unwrap();
    let token = Token::generate();
    let mut options = e2e::test_options(Some(token.clone()));
    options.state_root = Some(state.path().to_path_buf());
    options.control_addr = Some("127.0.0.1:0".parse().unwrap());
    tweak(&mut options);
    let server = RunningServer::start(options).await.unwrap();
    let control = server.control_url().unwrap().trim_start_matches("http://").parse().unwrap();
    WithControl { server, token, control, _state: state }
}

async fn relay_with_extension() -> Relay {
    e2e::init_logging();
    let token = Token::generate();
    let server = RunningServer::start(e2e::test_options(Some(token.clone()))).await.unwrap();
    let ext = FakeExtension::connect(server.addr, Some(token.as_str()), Some(hello(vec![])), Mode::Echo).await.unwrap();
    assert!(server.relay.wait_for_extension(Duration::from_secs(5)).await);
    Relay { server, token, _ext: ext }
}

#[tokio::test]
async fn http_routes_check_host_origin_and_token() {
    let relay = relay_with_extension().await;
    let addr = relay.server.addr;
    // Clients hold the CDP key; the install's secret opens no door (R5).
    let key = browser_relay::cdp_key(&relay.token);
    let token = key.as_str();
    let secret = format!("/json/version?token={}", relay.token.as_str());
    let host = format!("127.0.0.1:{}", addr.port());
    let with_token = format!("/json/version?token={token}");
    let bearer = format!("Bearer {token}");
    let wrong = format!("/json/list?token={}", "0".repeat(64));
    let rebinding_with_port = format!("evil.example:{}", addr.port());
    let ext_origin = format!("chrome-extension://{DEFAULT_EXTENSION_ID}");
    let cases: Vec<HttpCase> = vec![
        ("token in query", with_token.clone(), &host, vec![], 200),
        ("token as bearer", "/json/version".into(), &host, vec![("Authorization", &bearer)], 200),
        ("trailing slash (Playwright)", format!("/json/version/?token={token}"), &host, vec![], 200),
        ("no token", "/json/version".into(), &host, vec![], 401),
        ("wrong token", wrong, &host, vec![], 401),
        ("the install's secret", secret, &host, vec![], 401),
        ("token in the wrong place", format!("/json/list?tok={token}"), &host, vec![], 401),
        ("DNS rebinding Host", with_token.clone(), "evil.example", vec![], 403),
        ("rebinding Host with our port", with_token.clone(), &rebinding_with_port, vec![], 403),
        ("loopback-looking Host", with_token.clone(), "127.0.0.1.evil.example", vec![], 403),
        ("localhost Host", with_token.clone(), "localhost", vec![], 200),
        ("web Origin (CSRF)", with_token.clone(), &host, vec![("Origin", "http://evil.example")], 403),
        ("null Origin", with_token.clone(), &host, vec![("Origin", "null")], 403),
        ("localhost web Origin", with_token.clone(), &host, vec![("Origin", "http://127.0.0.1:8000")], 403),
        (
            "other extension Origin",
            with_token.clone(),
            &host,
            vec![("Origin", "chrome-extension://abcdefghijklmnop")],
            403,
        ),
        ("close with GET needs token", "/json/close/X".into(), &host, vec![], 401),
        ("health without token", "/".into(), &host, vec![], 200),
        ("health from rebinding Host", "/".into(), "evil.example", vec![], 403),
        ("status without token", "/extension/status".into(), &host, vec![], 200),
        // Chrome's protocol description holds no secret (chrome-remote-interface
        // fetches it before connecting, without a token)...
        ("protocol without token", "/json/protocol".into(), &host, vec![], 200),
        ("profile protocol without token", "/profiles/managed/json/protocol".into(), &host, vec![], 404),
        // ...but the other rules hold for it too.
        ("protocol from a rebinding Host", "/json/protocol".into(), "evil.example", vec![], 403),
        ("protocol from a web page", "/json/protocol".into(), &host, vec![("Origin", "http://evil.example")], 403),
        ("new tab needs the token", "/json/new?about:blank".into(), &host, vec![], 401),
        ("nothing else under the name", "/json/protocolx".into(), &host, vec![], 401),
        ("health from a web page", "/".into(), &host, vec![("Origin", "http://evil.example")], 403),
        ("managed profile without token", "/profiles/managed/json/version".into(), &host, vec![], 401),
        ("managed profile close without token", "/profiles/managed/json/close/X".into(), &host, vec![], 401),
        ("managed profile activate without token", "/profiles/managed/json/activate/X".into(), &host, vec![], 401),
        (
            "managed profile from a web page",
            format!("/profiles/managed/json/list?token={token}"),
            &host,
            vec![("Origin", "http://evil.example")],
            403,
        ),
        (
            "managed profile, rebinding Host",
            format!("/profiles/managed/json/version?token={token}"),
            "evil.example",
            vec![],
            403,
        ),
        (
            "managed profiles not served here",
            format!("/profiles/managed/json/version?token={token}"),
            &host,
            vec![],
            404,
        ),
        ("status from a web page", "/extension/status".into(), &host, vec![("Origin", "http://evil.example")], 403),
        (
            "status from our extension's options page",
            "/extension/status".into(),
            &host,
            vec![("Origin", &ext_origin)],
            200,
        ),
    ];
    for (what, path, host, headers, expected) in cases {
        let (status, response) = raw_request(addr, &get(&path, host, &headers)).await;
        assert_eq!(status, expected, "{what}: {response}");
        assert!(!response.to_ascii_lowercase().contains("access-control-allow"), "{what}: CORS header in {response}");
        assert!(!response.contains(token) || path.contains("version"), "{what}: token echoed in {response}");
    }
    // No Host at all (HTTP/1.0 style) is refused too.
    let (status, _) = raw_request(addr, "GET /json/version HTTP/1.0\r\n\r\n").await;
    assert!(status == 400 || status == 403, "missing Host gave {status}");
    // A CORS preflight from a web page is refused without CORS headers.
    let preflight = format!(
        "OPTIONS /json/version HTTP/1.1\r\nHost: {host}\r\nOrigin: http://evil.example\r\nAccess-Control-Request-Method: GET\r\nConnection: close\r\n\r\n"
    );
    let (status, response) = raw_request(addr, &preflight).await;
    assert_eq!(status, 403, "{response}");
}

#[tokio::test]
async fn websocket_upgrades_check_host_origin_and_token() {
    let relay = relay_with_extension().await;
    let addr = relay.server.addr;
    let key = browser_relay::cdp_key(&relay.token);
    let token = key.as_str();
    let with_secret = format!("/cdp?token={}", relay.token.as_str());
    let cdp = format!("/cdp?token={token}");
    let ext_origin = format!("chrome-extension://{DEFAULT_EXTENSION_ID}");
    let ext_protocols = "browser-relay.v2".to_string();
    let token_protocols = format!("browser-relay.v2, token.{token}");
    let bearer = format!("Bearer {token}");
    let cases: Vec<WsCase> = vec![
        ("CDP client with token", cdp.clone(), vec![], 101),
        ("browser endpoint path", format!("/devtools/browser/anything?token={token}"), vec![], 101),
        ("CDP client without token", "/cdp".into(), vec![], 401),
        ("CDP client with the install's secret", with_secret, vec![], 401),
        ("CDP client with a bearer token", "/cdp".into(), vec![("Authorization", &bearer)], 101),
        (
            "CDP client with the token as subprotocol",
            "/cdp".into(),
            vec![("Sec-WebSocket-Protocol", &token_protocols)],
            401,
        ),
        ("CDP client, web Origin", cdp.clone(), vec![("Origin", "http://evil.example")], 403),
        ("CDP client, null Origin", cdp.clone(), vec![("Origin", "null")], 403),
        ("CDP client, https localhost Origin", cdp.clone(), vec![("Origin", "https://localhost")], 403),
        ("CDP client, our extension's Origin", cdp.clone(), vec![("Origin", &ext_origin)], 403),
        ("CDP client, rebinding Host", cdp.clone(), vec![("Host", "evil.example")], 403),
        ("page endpoint, unknown target", format!("/devtools/page/NOPE?token={token}"), vec![], 404),
        // A managed profile's sockets are behind the same guard; this relay
        // serves no profiles, so what passes the guard is told so (404).
        (
            "managed profile socket with token",
            format!("/profiles/managed/devtools/browser/X?token={token}"),
            vec![],
            404,
        ),
        ("managed profile socket without token", "/profiles/managed/devtools/page/X".into(), vec![], 401),
        (
            "managed profile socket, web Origin",
            format!("/profiles/managed/devtools/browser/X?token={token}"),
            vec![("Origin", "http://evil.example")],
            403,
        ),
        (
            "managed profile socket, rebinding Host",
            format!("/profiles/managed/devtools/page/X?token={token}"),
            vec![("Host", "evil.example")],
            403,
        ),
        ("extension without Origin", "/extension".into(), vec![("Sec-WebSocket-Protocol", &ext_protocols)], 403),
        (
            "extension with a web Origin",
            "/extension".into(),
            vec![("Origin", "http://evil.example"), ("Sec-WebSocket-Protocol", &ext_protocols)],
            403,
        ),
        (
            "extension with another extension's Origin",
            "/extension".into(),
            vec![
                ("Origin", "chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
                ("Sec-WebSocket-Protocol", &ext_protocols),
            ],
            403,
        ),
        // No token on /extension: the pairing is proved inside the socket,
        // both ways (relay_reliability's handshake rules; the squatter
        // test with the real extension in e2e_extension).
        (
            "second extension while one is live",
            "/extension".into(),
            vec![("Origin", &ext_origin), ("Sec-WebSocket-Protocol", &ext_protocols)],
            409,
        ),
    ];
    for (what, path, headers, expected) in cases {
        assert_eq!(ws_status(addr, &path, &headers).await, expected, "{what}");
    }
    assert!(relay.server.relay.stats().extension_connected, "the live extension was never replaced");
}

#[tokio::test]
async fn urls_are_built_from_the_bound_address_never_from_host() {
    let relay = relay_with_extension().await;
    let addr = relay.server.addr;
    let request =
        get(&format!("/json/version?token={}", browser_relay::cdp_key(&relay.token).as_str()), "localhost:1", &[]);
    let (status, response) = raw_request(addr, &request).await;
    assert_eq!(status, 200, "{response}");
    let expected = format!("\"webSocketDebuggerUrl\":\"ws://127.0.0.1:{}/devtools/browser/", addr.port());
    assert!(response.contains(&expected), "{response}");
    assert!(!response.contains("localhost:1"), "Host leaked into a URL: {response}");
}

#[tokio::test]
async fn no_auth_mode_drops_only_the_token_rule() {
    let server = RunningServer::start(e2e::test_options(None)).await.unwrap();
    let addr = server.addr;
    let host = format!("127.0.0.1:{}", addr.port());
    assert_eq!(raw_request(addr, &get("/json/version", &host, &[])).await.0, 200);
    assert_eq!(raw_request(addr, &get("/json/version", "evil.example", &[])).await.0, 403);
    assert_eq!(raw_request(addr, &get("/json/version", &host, &[("Origin", "http://evil.example")])).await.0, 403);
}

#[tokio::test]
async fn only_loopback_addresses_are_bound() {
    for addr in ["0.0.0.0:0", "[::]:0", "192.168.1.1:0"] {
        let options = ServerOptions::new(addr.parse().unwrap(), Some(Token::generate()));
        let error = RunningServer::start(options).await.expect_err(addr).to_string();
        assert!(error.contains("only listens on loopback"), "{addr}: {error}");
    }
}

#[tokio::test]
async fn the_extension_allow_list_is_configurable() {
    let token = Token::generate();
    let mut options = e2e::test_options(Some(token.clone()));
    options.extension_ids = vec!["abcdefghijklmnopabcdefghijklmnop".into()];
    let server = RunningServer::start(options).await.unwrap();
    let protocols = "browser-relay.v2".to_string();
    let default_origin = format!("chrome-extension://{DEFAULT_EXTENSION_ID}");
    let headers = |origin: &'static str| vec![("Origin", origin), ("Sec-WebSocket-Protocol", protocols.as_str())];
    let default_origin: &'static str = Box::leak(default_origin.into_boxed_str());
    assert_eq!(
        ws_status(server.addr, "/extension", &headers(default_origin)).await,
        403,
        "the default id is no longer allowed"
    );
    assert_eq!(
        ws_status(server.addr, "/extension", &headers("chrome-extension://abcdefghijklmnopabcdefghijklmnop")).await,
        101
    );
}

/// One door per key (issue 46, item 6): the extension holds a key of its
/// own, derived from the secret. A program that has the secret itself, or
/// an extension from before protocol 8 (which proved the secret), pairs
/// nothing; the extension's key pairs, and opens no other door.
#[tokio::test]
async fn only_the_extensions_own_key_pairs_never_the_secret_nor_an_older_protocol() {
    use futures_util::{SinkExt as _, StreamExt as _};
    use shared_protocol::RelayMessage;
    use tokio_tungstenite::tungstenite::Message;
    e2e::init_logging();
    let WithControl { server, token: secret, control, .. } = serve_with_control(|_| {}).await;
    let port = server.addr.port();
    // What the relay says to one proof: its close (code, reason), or the welcome.
    let pair = |proof: e2e::pairing::ExtensionProof, version: u32| async move {
        let mut socket = extension_socket(server.addr).await;
        socket.send(Message::Text(proof.auth_frame(version).into())).await.unwrap();
        let first = match tokio::time::timeout(Duration::from_secs(5), socket.next()).await.unwrap() {
            Some(Ok(Message::Text(text))) => text.to_string(),
            Some(Ok(Message::Close(Some(frame)))) => return Err((u16::from(frame.code), frame.reason.to_string())),
            other => panic!("neither a challenge nor a close: {other:?}"),
        };
        let RelayMessage::Challenge { nonce, proof: relay_proof } = RelayMessage::parse(&first).unwrap() else {
            panic!("not a challenge: {first}")
        };
        let Ok([prove, hello_frame]) = proof.answer_frames(&nonce, &relay_proof, hello(vec![])) else {
            return Err((0, "the relay proved another key".to_string()));
        };
        socket.send(Message::Text(prove.into())).await.unwrap();
        socket.send(Message::Text(hello_frame.into())).await.unwrap();
        match tokio::time::timeout(Duration::from_secs(5), socket.next()).await.unwrap() {
            Some(Ok(Message::Text(text))) => Ok((socket, text.to_string())),
            Some(Ok(Message::Close(Some(frame)))) => Err((u16::from(frame.code), frame.reason.to_string())),
            other => panic!("neither a welcome nor a close: {other:?}"),
        }
    };
    let version = shared_protocol::PROTOCOL_VERSION;
    // The secret itself: the relay proves another key, and takes no proof of it.
    let refused = pair(e2e::pairing::ExtensionProof::with_key(Some(secret.as_str()), port), version).await;
    assert_eq!(refused.err().map(|(_, why)| why).as_deref(), Some("the relay proved another key"));
    // Another door's key: the same.
    let cdp = browser_relay::cdp_key(&secret);
    let refused = pair(e2e::pairing::ExtensionProof::with_key(Some(cdp.as_str()), port), version).await;
    assert!(refused.is_err(), "the CDP key paired an extension");
    // An extension of protocol 7 (it proved the secret): told to update.
    let (code, why) = pair(e2e::pairing::ExtensionProof::new(Some(secret.as_str()), port), 7).await.err().unwrap();
    assert_eq!(code, shared_protocol::close_code::PROTOCOL_MISMATCH, "{why}");
    assert!(why.contains("update the one that is older"), "{why}");
    assert!(!server.relay.stats().extension_connected);
    // The extension's key pairs...
    let key = browser_relay::extension_key(&secret);
    let (socket, welcome) =
        pair(e2e::pairing::ExtensionProof::with_key(Some(key.as_str()), port), version).await.expect("paired");
    assert!(welcome.contains("welcome"), "{welcome}");
    assert!(server.relay.stats().extension_connected);
    drop(socket);
    // ... and opens no other door.
    let host = format!("127.0.0.1:{port}");
    let bearer = format!("Bearer {}", key.as_str());
    let (status, _) = raw_request(server.addr, &get("/json/list", &host, &[("Authorization", &bearer)])).await;
    assert_eq!(status, 401, "the extension's key opened the CDP routes");
    let control_host = format!("127.0.0.1:{}", control.port());
    let (status, _) = raw_request(control, &get("/profiles", &control_host, &[("Authorization", &bearer)])).await;
    assert_eq!(status, 401, "the extension's key opened the control API");
}

#[tokio::test]
async fn a_version_1_extension_is_told_to_update_and_its_token_is_never_read() {
    use futures_util::StreamExt as _;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let token = Token::generate();
    let server = RunningServer::start(e2e::test_options(Some(token.clone()))).await.unwrap();
    // Protocol 1 sent the token as a subprotocol; a wrong one changes nothing.
    let mut request = format!("ws://{}/extension", server.addr).into_client_request().unwrap();
    let headers = request.headers_mut();
    headers.insert("Origin", format!("chrome-extension://{DEFAULT_EXTENSION_ID}").parse().unwrap());
    headers.insert("Sec-WebSocket-Protocol", format!("browser-relay.v1, token.{}", "f".repeat(64)).parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.expect("let in, to be told");
    let close = tokio::time::timeout(Duration::from_secs(5), socket.next()).await.unwrap();
    match close {
        Some(Ok(tokio_tungstenite::tungstenite::Message::Close(Some(frame)))) => {
            assert_eq!(u16::from(frame.code), shared_protocol::close_code::PROTOCOL_MISMATCH);
            assert!(frame.reason.contains("update the extension"), "{}", frame.reason);
        }
        other => panic!("expected a close frame, got {other:?}"),
    }
    assert!(!server.relay.stats().extension_connected);
}

#[tokio::test]
async fn the_extension_frame_limit_drops_only_the_extension() {
    let token = Token::generate();
    let mut options = e2e::test_options(Some(token.clone()));
    options.relay.extension_max_message = 64 * 1024;
    let server = RunningServer::start(options).await.unwrap();
    let ext = FakeExtension::connect(server.addr, Some(token.as_str()), Some(hello(vec![])), Mode::Echo).await.unwrap();
    assert!(server.relay.wait_for_extension(Duration::from_secs(5)).await);
    ext.send_raw(&format!(r#"{{"ping":{{"nonce":1}},"pad":"{}"}}"#, "x".repeat(128 * 1024)));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while server.relay.stats().extension_connected {
        assert!(tokio::time::Instant::now() < deadline, "oversized extension frame accepted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The relay is still up and a well-behaved extension can connect again.
    let _again =
        FakeExtension::connect(server.addr, Some(token.as_str()), Some(hello(vec![])), Mode::Echo).await.unwrap();
    assert!(server.relay.wait_for_extension(Duration::from_secs(5)).await);
}

#[tokio::test]
async fn slow_headers_are_cut_off() {
    let mut options = e2e::test_options(Some(Token::generate()));
    options.limits = ServeLimits { header_read_timeout: Duration::from_millis(300), ..ServeLimits::default() };
    let server = RunningServer::start(options).await.unwrap();
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    // Half a request, then nothing (slowloris).
    stream.write_all(b"GET /json/version HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the relay kept a connection with unfinished headers open for 5 s");
    // And it still serves everyone else.
    let host = format!("127.0.0.1:{}", server.addr.port());
    assert_eq!(raw_request(server.addr, &get("/", &host, &[])).await.0, 200);
}

#[tokio::test]
async fn oversized_client_messages_close_only_that_client() {
    e2e::init_logging();
    let token = Token::generate();
    let mut options = e2e::test_options(Some(token.clone()));
    options.relay.client_max_message = 64 * 1024;
    let server = RunningServer::start(options).await.unwrap();
    let _ext =
        FakeExtension::connect(server.addr, Some(token.as_str()), Some(hello(vec![])), Mode::Echo).await.unwrap();
    assert!(server.relay.wait_for_extension(Duration::from_secs(5)).await);
    let url = format!("ws://{}/cdp?token={}", server.addr, browser_relay::cdp_key(&token).as_str());
    let big = cdp_client::CdpClient::connect(&url).await.unwrap();
    let small = cdp_client::CdpClient::connect(&url).await.unwrap();
    let huge =
        format!(r#"{{"id":1,"method":"Runtime.evaluate","params":{{"expression":"{}"}}}}"#, "x".repeat(200 * 1024));
    big.send_raw(&huge);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !big.is_closed() {
        assert!(tokio::time::Instant::now() < deadline, "oversized sender not disconnected");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    small.call("Browser.getVersion", serde_json::json!({}), None).await.expect("other clients unaffected");
}

#[test]
fn token_file_is_private_and_stable() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_dir::StateDir::at(dir.path().join("state"));
    let token = state.load_or_create_token().unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(state.token_path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "token readable by others: {mode:o}");
    assert_eq!(state.load_or_create_token().unwrap(), token);
    assert!(!format!("{token:?}").contains(token.as_str()), "Debug must redact the token");
}

/// `/profiles/<name>/json/protocol` is public (chrome-remote-interface reads
/// it before it connects, without a token), so it must touch no browser,
/// pipe or farm: a farm profile's connection (with its credentials) is not
/// opened by it. And an unknown name says nothing about the profiles there
/// are.
#[tokio::test]
async fn the_public_protocol_route_opens_no_farm_connection_and_names_no_profile() {
    e2e::init_logging();
    // A farm that counts who connects to it.
    let farm = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let farm_port = farm.local_addr().unwrap().port();
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = farm.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(socket);
        }
    });
    let state = tempfile::tempdir().unwrap();
    std::fs::write(
        state.path().join("config.toml"),
        format!(
            "[profiles.farm]\ndriver = \"managed\"\ncdpUrl = \"ws://127.0.0.1:{farm_port}/?token=farm-secret\"\n\
             [profiles.secret-project]\ndriver = \"managed\"\n"
        ),
    )
    .unwrap();
    let token = Token::generate();
    let mut options = e2e::test_options(Some(token.clone()));
    options.state_root = Some(state.path().to_path_buf());
    let server = RunningServer::start(options).await.unwrap();
    let host = format!("127.0.0.1:{}", server.addr.port());

    let (status, response) = raw_request(server.addr, &get("/profiles/farm/json/protocol", &host, &[])).await;
    assert_eq!(status, 200, "{response}");
    assert!(response.contains("\"domains\""), "the protocol description: {response}");
    let (status, response) = raw_request(server.addr, &get("/profiles/nobody/json/protocol", &host, &[])).await;
    assert_eq!(status, 404, "{response}");
    for name in ["farm", "secret-project", "managed"] {
        assert!(!response.contains(name), "an unknown name lists '{name}': {response}");
    }
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 0, "the public route opened the farm");
    // With the token, the farm is used (so the count above is zero for
    // want of a call, not of a way to reach it).
    let with_token = format!("/profiles/farm/json/version?token={}", browser_relay::cdp_key(&token).as_str());
    let _ = raw_request(server.addr, &get(&with_token, &host, &[])).await;
    assert!(connections.load(std::sync::atomic::Ordering::SeqCst) > 0, "the tokened route reaches the farm");
}

/// Screenshots show the user's pages: past their time (`mediaMaxAgeHours`)
/// they go, also when no agent saves anything new (serve prunes the media
/// folder at start and every few minutes, not only on a save).
#[tokio::test]
async fn old_screenshots_go_without_a_new_save() {
    e2e::init_logging();
    let state = tempfile::tempdir().unwrap();
    let media = state.path().join("media");
    std::fs::create_dir(&media).unwrap();
    let old = media.join("screenshot-1700000000000-aabbccdd.png");
    std::fs::write(&old, b"\x89PNG an old page").unwrap();
    let two_days_ago = std::time::SystemTime::now() - Duration::from_secs(48 * 3600);
    std::fs::File::options().write(true).open(&old).unwrap().set_modified(two_days_ago).unwrap();
    let fresh = media.join("screenshot-1800000000000-aabbccdd.png");
    std::fs::write(&fresh, b"\x89PNG a new page").unwrap();
    let notes = media.join("notes.txt");
    std::fs::write(&notes, "the user's own").unwrap();

    let mut options = e2e::test_options(Some(Token::generate()));
    options.state_root = Some(state.path().to_path_buf());
    options.control_addr = Some("127.0.0.1:0".parse().unwrap());
    let server = RunningServer::start(options).await.unwrap();
    e2e::control_env::eventually("the old screenshot pruned", Duration::from_secs(10), || async {
        (!old.exists()).then_some(())
    })
    .await;
    assert!(fresh.exists() && notes.exists(), "within the retention, and not ours: kept");
    server.stop().await;
}

/// A request body trickled forever must not hold a connection: not on the
/// control API's `POST /session`, which anyone may call (it needs no
/// token), nor anywhere else. The relay answers once the body is late; and
/// a session request's body too large for a nonce is refused unread.
#[tokio::test]
async fn a_body_that_never_arrives_or_is_too_large_is_answered_not_waited_on() {
    e2e::init_logging();
    let WithControl { server, control, .. } = serve_with_control(|options| {
        options.limits = ServeLimits { body_read_timeout: Duration::from_millis(300), ..ServeLimits::default() };
    })
    .await;
    let mut stream = TcpStream::connect(control).await.unwrap();
    let head = format!(
        "POST /session HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"nonce\":",
        control.port()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer)).await;
    let n = read.expect("the control API kept waiting for a body that never came").unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]).to_string();
    assert!(answer.starts_with("HTTP/1.1 4"), "{answer}");
    // And it still serves everyone else.
    let host = format!("127.0.0.1:{}", server.addr.port());
    assert_eq!(raw_request(server.addr, &get("/", &host, &[])).await.0, 200);

    // A session request, which needs no key, is read up to a few hundred
    // bytes: a larger body is refused, not read.
    let big = format!(r#"{{"nonce":"{}"}}"#, "a".repeat(64 << 10));
    let request = format!(
        "POST /session HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{big}",
        control.port(),
        big.len()
    );
    let (status, _) = raw_request(control, &request).await;
    assert_eq!(status, 413, "a 64 KiB session request was read");
}

/// A local program that opens `/extension` with our Origin (a forged one)
/// and never proves the pairing must not keep the real extension out: the
/// extension's place is taken at the proof, not at the upgrade. Unproven
/// connections are few at once, the oldest gives its place up to a newer
/// one (issue 46, item 9: before, four squatters made every later
/// connection, the extension's too, a 503 for 10 s a step), and a second
/// proven extension is still refused while one is live.
#[tokio::test]
async fn a_connection_that_never_proves_the_pairing_does_not_hold_the_extension_slot() {
    e2e::init_logging();
    let token = Token::generate();
    let server = RunningServer::start(e2e::test_options(Some(token.clone()))).await.unwrap();
    let squatter = FakeExtension::connect(server.addr, None, None, Mode::Echo).await.unwrap();
    let real = FakeExtension::connect(server.addr, Some(token.as_str()), Some(hello(vec![])), Mode::Echo)
        .await
        .expect("the real extension is let in beside a connection that proved nothing");
    assert!(server.relay.wait_for_extension(Duration::from_secs(5)).await);
    // While it is live, another extension (even a proven one) is refused.
    let second = FakeExtension::connect(server.addr, Some(token.as_str()), Some(hello(vec![])), Mode::Echo).await;
    assert!(second.is_err(), "a second extension was let in");
    drop(real);
    e2e::control_env::eventually("the relay sees the extension gone", Duration::from_secs(5), || async {
        (!server.relay.extension_connected()).then_some(())
    })
    .await;
    // Squatters take every proving place, and more: the real extension
    // still gets one, and proves within a round trip.
    drop(squatter);
    let mut squatters = Vec::new();
    for _ in 0..relay_engine::MAX_HANDSHAKES + 2 {
        squatters.push(FakeExtension::connect(server.addr, None, None, Mode::Echo).await.unwrap());
    }
    let _real = FakeExtension::connect(server.addr, Some(token.as_str()), Some(hello(vec![])), Mode::Echo)
        .await
        .expect("let in past the squatters");
    assert!(server.relay.wait_for_extension(Duration::from_secs(5)).await, "the squatters kept the extension out");
    // The oldest squatters gave their places up, told to retry.
    let oldest = squatters.remove(0);
    let close = tokio::time::timeout(Duration::from_secs(5), oldest.close).await.unwrap().unwrap();
    assert_eq!(close.map(|c| c.0), Some(1013), "the oldest squatter is told to try again later");
}

/// A long-lived control client (`browser-relay mcp`) whose server went away
/// must neither tell whatever listens on the port next what it asks nor
/// take its answers: the client proves the server on each connection, so
/// the program that took the port hears a session request and nothing
/// more, and its forged answer is refused.
#[tokio::test]
async fn a_program_that_takes_the_control_port_after_serve_cannot_answer_its_clients() {
    e2e::init_logging();
    let WithControl { server, token, control, .. } = serve_with_control(|_| {}).await;
    let client = browser_relay::ControlClient::new(control.port(), token.clone());
    let genuine = client.call("GET", "/profiles", &[], None).await.expect("the real server's answer");
    assert!(genuine["profiles"].is_array(), "{genuine}");
    server.stop().await;

    // A program takes the port and answers everything with a forged result.
    let squatter = tokio::net::TcpListener::bind(control).await.expect("the port is free again");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let heard = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = squatter.accept().await {
            let heard = heard.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 64 * 1024];
                while let Ok(n @ 1..) = socket.read(&mut buffer).await {
                    let request = String::from_utf8_lossy(&buffer[..n]).to_string();
                    heard.lock().unwrap().push(request.lines().next().unwrap_or_default().to_string());
                    let body = r#"{"profiles":[{"profile":"forged"}],"nonce":"00","proof":"00"}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if socket.write_all(answer.as_bytes()).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    for _ in 0..2 {
        let forged = client.call("GET", "/profiles", &[], None).await;
        let error = forged.expect_err("the forged answer was taken").to_string();
        assert!(
            error.contains("is not this install's `browser-relay serve`") && error.contains("could not prove"),
            "{error}"
        );
    }
    let seen = seen.lock().unwrap().clone();
    assert!(
        !seen.is_empty() && seen.iter().all(|line| line.starts_with("POST /session")),
        "the program on the port heard more than a session request: {seen:?}"
    );
}

/// Every CDP client sends its key to whatever listens on the relay's port
/// (a program that took it while the relay was down learns it), so the key
/// clients are handed opens the CDP routes only: no control session, no
/// control route, no pairing with the extension. Each door has a key
/// derived from the install's secret (`browser_relay::keys`).
#[tokio::test]
async fn the_key_cdp_clients_send_opens_no_other_door() {
    e2e::init_logging();
    let WithControl { server, token: secret, control, .. } = serve_with_control(|_| {}).await;
    let host = format!("127.0.0.1:{}", server.addr.port());
    let control_host = format!("127.0.0.1:{}", control.port());

    // The install's secret opens neither door (it pairs nothing either:
    // the extension has a key of its own). Before, it opened both.
    let with_secret = format!("Bearer {}", secret.as_str());
    let (status, _) = raw_request(server.addr, &get("/json/list", &host, &[("Authorization", &with_secret)])).await;
    assert_eq!(status, 401, "the secret opened the relay's CDP routes");
    let (status, _) = raw_request(control, &get("/profiles", &control_host, &[("Authorization", &with_secret)])).await;
    assert_eq!(status, 401, "the secret opened the control API");
    // The key a client is handed, as Playwright reads it from /json/version.
    let cdp_key = browser_relay::cdp_key(&secret);
    let (status, version) =
        raw_request(server.addr, &get(&format!("/json/version?token={}", cdp_key.as_str()), &host, &[])).await;
    assert_eq!(status, 200, "{version}");
    let ws = version.split("webSocketDebuggerUrl\":\"").nth(1).unwrap().split('"').next().unwrap().to_string();
    let key = ws.split("token=").nth(1).unwrap().to_string();
    assert!(!ws.contains(secret.as_str()), "clients are handed the secret itself: {ws}");
    assert_eq!(key, browser_relay::cdp_key(&secret).as_str());
    // It opens the CDP routes...
    let (status, _) = raw_request(server.addr, &get(&format!("/json/list?token={key}"), &host, &[])).await;
    assert_eq!(status, 200);
    // ... and no control route,
    let bearer = format!("Bearer {key}");
    let (status, _) = raw_request(control, &get("/profiles", &control_host, &[("Authorization", &bearer)])).await;
    assert_eq!(status, 401, "the CDP key opened the control API");
    // no control session (a client holding it cannot check the server's proof),
    let holder = browser_relay::ControlClient::new(control.port(), Token::parse(&key).unwrap());
    let refused = holder.call("GET", "/profiles", &[], None).await.expect_err("a session opened with the CDP key");
    assert!(refused.to_string().contains("could not prove"), "{refused}");
    // and no pairing with the extension.
    let forged = FakeExtension::connect(server.addr, Some(&key), Some(hello(vec![])), Mode::Echo).await.unwrap();
    assert!(!server.relay.wait_for_extension(Duration::from_secs(1)).await, "the CDP key paired an extension");
    drop(forged);
    // The control key opens the control API and nothing of the relay's.
    let control_key = browser_relay::control_key(&secret);
    let bearer = format!("Bearer {}", control_key.as_str());
    let (status, _) = raw_request(control, &get("/profiles", &control_host, &[("Authorization", &bearer)])).await;
    assert_eq!(status, 200);
    let (status, _) = raw_request(server.addr, &get("/json/list", &host, &[("Authorization", &bearer)])).await;
    assert_eq!(status, 401, "the control key opened the relay's CDP routes");
}

/// A socket on `/extension` with the extension's Origin and subprotocol,
/// as a local program that forges them opens one.
async fn extension_socket(
    relay: SocketAddr,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>> {
    let mut request = format!("ws://{relay}/extension").into_client_request().unwrap();
    let headers = request.headers_mut();
    headers.insert("Origin", format!("chrome-extension://{DEFAULT_EXTENSION_ID}").parse().unwrap());
    headers.insert("Sec-WebSocket-Protocol", shared_protocol::SUBPROTOCOL.parse().unwrap());
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

/// The pairing proofs are bound to the port the extension connected to: a
/// program on the extension's port that passes frames to a relay listening
/// elsewhere cannot hand the relay's proof on (the extension checks it for
/// its own port and finds it wrong).
#[tokio::test]
async fn a_relays_proof_passed_on_from_another_port_proves_nothing() {
    use futures_util::{SinkExt as _, StreamExt as _};
    use shared_protocol::RelayMessage;
    use tokio_tungstenite::tungstenite::Message;
    e2e::init_logging();
    let token = Token::generate();
    let server = RunningServer::start(e2e::test_options(Some(token.clone()))).await.unwrap();
    let mut socket = extension_socket(server.addr).await;
    // The extension believes it connected to another port (the relayed case).
    let believed = server.addr.port().wrapping_add(1);
    for (port, proves) in [(believed, false), (server.addr.port(), true)] {
        let proof = e2e::pairing::ExtensionProof::new(Some(token.as_str()), port);
        socket.send(Message::Text(proof.auth_frame(shared_protocol::PROTOCOL_VERSION).into())).await.unwrap();
        let Some(Ok(Message::Text(text))) = socket.next().await else { panic!("no challenge") };
        let RelayMessage::Challenge { nonce, proof: relay_proof, .. } = RelayMessage::parse(&text).unwrap() else {
            panic!("not a challenge: {text}")
        };
        let hello = proof.answer_frames(&nonce, &relay_proof, hello(vec![]));
        assert_eq!(hello.is_ok(), proves, "port {port}: {hello:?}");
        if !proves {
            // Start over on a connection of its own.
            let _ = socket.close(None).await;
            socket = extension_socket(server.addr).await;
        }
    }
}

/// A pairing link carries a one-time code, never the secret: the relay
/// proves the code, and only once the extension has proved it too does the
/// relay spend it and send the secret, sealed for it, in its welcome. An
/// unknown code is refused before anything is sent; whoever names the code
/// without proving it learns nothing and spends nothing.
#[tokio::test]
async fn a_pairing_links_code_brings_the_secret_sealed_once() {
    use futures_util::{SinkExt as _, StreamExt as _};
    use shared_protocol::{RelayMessage, close_code};
    use tokio_tungstenite::tungstenite::Message;
    e2e::init_logging();
    let token = Token::generate();
    let state = tempfile::tempdir().unwrap();
    let mut options = e2e::test_options(Some(token.clone()));
    options.state_root = Some(state.path().to_path_buf());
    let server = RunningServer::start(options).await.unwrap();
    let code = state_dir::StateDir::at(state.path()).pairing_codes().issue(&token).unwrap();
    let port = server.addr.port();
    // The next frame: a message, or why the relay closed.
    async fn answer(
        socket: &mut tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>,
    ) -> Result<String, (u16, String)> {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => Ok(text.to_string()),
            Some(Ok(Message::Close(Some(frame)))) => Err((frame.code.into(), frame.reason.to_string())),
            other => panic!("neither a frame nor a close: {other:?}"),
        }
    }

    // A code nobody issued: refused before any challenge.
    let mut socket = extension_socket(server.addr).await;
    let unknown = e2e::pairing::ExtensionProof::with_code(&"ab".repeat(32), port);
    socket.send(Message::Text(unknown.auth_frame(shared_protocol::PROTOCOL_VERSION).into())).await.unwrap();
    let (code_sent, reason) = answer(&mut socket).await.expect_err("refused");
    assert_eq!(code_sent, close_code::NOT_PAIRED);
    assert!(reason.contains("code is unknown, spent or expired"), "{reason}");

    for attempt in ["names the code, proves nothing", "proves the code"] {
        let mut socket = extension_socket(server.addr).await;
        let proof = e2e::pairing::ExtensionProof::with_code(code.as_str(), port);
        socket.send(Message::Text(proof.auth_frame(shared_protocol::PROTOCOL_VERSION).into())).await.unwrap();
        let text = answer(&mut socket).await.expect("a challenge");
        let RelayMessage::Challenge { nonce, proof: relay_proof } = RelayMessage::parse(&text).unwrap() else {
            panic!("not a challenge: {text}")
        };
        let [prove, hello_frame] =
            proof.answer_frames(&nonce, &relay_proof, hello(vec![])).expect("the relay proved the code");
        if attempt == "names the code, proves nothing" {
            let forged = shared_protocol::encode(&shared_protocol::ExtensionMessage::Prove { proof: "00".repeat(32) });
            socket.send(Message::Text(forged.into())).await.unwrap();
            let (code_sent, _) = answer(&mut socket).await.expect_err("refused");
            assert_eq!(code_sent, close_code::NOT_PAIRED, "{attempt}");
            continue;
        }
        socket.send(Message::Text(prove.into())).await.unwrap();
        socket.send(Message::Text(hello_frame.into())).await.unwrap();
        let welcome = answer(&mut socket).await.expect("welcomed");
        assert!(!welcome.contains(token.as_str()), "the secret itself went out: {welcome}");
        let RelayMessage::Welcome { sealed, .. } = RelayMessage::parse(&welcome).unwrap() else {
            panic!("not a welcome: {welcome}")
        };
        let opened = proof.unseal(&nonce, sealed.as_deref().expect("the extension's key, sealed"));
        let key = browser_relay::extension_key(&token);
        assert_eq!(opened.as_deref(), Some(key.as_str()), "the code that was not proved before was still good");
        assert_ne!(opened.as_deref(), Some(token.as_str()), "never the secret itself, even sealed");
        assert!(server.relay.stats().extension_connected, "the code paired");
        let _ = socket.close(None).await;
    }
    e2e::control_env::eventually("the extension to go", Duration::from_secs(5), || async {
        (!server.relay.stats().extension_connected).then_some(())
    })
    .await;

    // Spent: the same code again is refused, before any challenge.
    let mut socket = extension_socket(server.addr).await;
    let again = e2e::pairing::ExtensionProof::with_code(code.as_str(), port);
    socket.send(Message::Text(again.auth_frame(shared_protocol::PROTOCOL_VERSION).into())).await.unwrap();
    let (code_sent, reason) = answer(&mut socket).await.expect_err("spent");
    assert_eq!((code_sent, reason.contains("spent")), (close_code::NOT_PAIRED, true), "{reason}");
}

/// Before its proof checks out an extension connection may send a few KiB,
/// no more: a local program that forged the extension's Origin, took the
/// challenge and then sends a 64 MiB frame (a hello of junk tabs) is cut
/// off after `PRE_PROOF_BYTES` instead of having it read and parsed. The
/// real extension then still connects.
#[tokio::test]
async fn before_its_proof_an_extension_connection_is_read_no_more_than_a_few_kib() {
    use futures_util::{SinkExt as _, StreamExt as _};
    use shared_protocol::RelayMessage;
    use tokio_tungstenite::tungstenite::Message;
    e2e::init_logging();
    let token = Token::generate();
    let server = RunningServer::start(e2e::test_options(Some(token.clone()))).await.unwrap();
    let mut socket = extension_socket(server.addr).await;
    let forger = e2e::pairing::ExtensionProof::new(None, server.addr.port());
    socket.send(Message::Text(forger.auth_frame(shared_protocol::PROTOCOL_VERSION).into())).await.unwrap();
    let Some(Ok(Message::Text(text))) = socket.next().await else { panic!("no challenge") };
    assert!(matches!(RelayMessage::parse(&text), Ok(RelayMessage::Challenge { .. })), "{text}");
    // Well under the relay's message limit (256 MiB): only the pre-proof
    // limit can stop it.
    let junk = format!(r#"{{"hello":{{"attachedTabs":[{}]}}}}"#, "{},".repeat(32 << 20));
    let sent = tokio::time::timeout(Duration::from_secs(30), socket.send(Message::Text(junk.into())))
        .await
        .expect("the relay neither read nor dropped the frame");
    assert!(sent.is_err(), "the relay read a 64 MiB frame from a connection that proved nothing");

    // Nothing was lost: the real extension connects and is welcomed.
    let _extension =
        FakeExtension::connect(server.addr, Some(token.as_str()), Some(hello(vec![])), Mode::Echo).await.unwrap();
    assert!(
        server.relay.wait_for_extension(Duration::from_secs(5)).await,
        "the extension connects after the cut-off one"
    );
}

/// A control session's proofs are bound to the port the client dialled: a
/// program on that port which passes the client's bytes to a serve
/// listening elsewhere cannot pass that serve's proof on, so the client
/// sends it nothing but the session request.
#[tokio::test]
async fn a_control_servers_proof_passed_on_from_another_port_proves_nothing() {
    e2e::init_logging();
    let WithControl { server: _server, token, control, .. } = serve_with_control(|_| {}).await;
    // The real serve, dialled where it listens: a session opens.
    let direct = browser_relay::ControlClient::new(control.port(), token.clone());
    direct.call("GET", "/profiles", &[], None).await.expect("the real serve proves itself");
    // A program on another port that passes every byte on to it.
    let relaying = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_port = relaying.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = relaying.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(control).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    let fooled = browser_relay::ControlClient::new(relay_port, token.clone());
    let refused = fooled.call("GET", "/profiles", &[], None).await.expect_err("a proof passed on from another port");
    assert!(refused.to_string().contains("could not prove"), "{refused}");
}

/// A raw request with a body; `extra` headers as given.
fn post(path: &str, host: &str, extra: &[(&str, &str)], body: &str) -> String {
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in extra {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request + "\r\n" + body
}

fn header_of<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    let head = response.split("\r\n\r\n").next().unwrap_or_default();
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// The dashboard (`/ui`): reached only through a one-time login link that
/// only a holder of the control key can ask for (never the token); the
/// login's answer hands the page a session token once, which every API
/// request, read or change, carries in `x-browser-relay-session`. No
/// cookie: the page's shell carries no secret, and whatever a program
/// replays of what the browser sends by itself (a cookie, as curl would)
/// opens nothing (issue 46, item 1). The API takes nothing else (not the
/// key), and answers only its own origin, never another site.
#[tokio::test]
async fn the_dashboard_takes_a_one_time_login_its_own_origin_and_a_session_header() {
    e2e::init_logging();
    let WithControl { server, token, control, .. } = serve_with_control(|_| {}).await;
    let host = format!("127.0.0.1:{}", control.port());
    let key = format!("Bearer {}", browser_relay::control_key(&token).as_str());
    const SESSION: &str = "x-browser-relay-session";
    let body_of = |answer: &str| answer.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    let session_in = |page: &str| {
        page.split(r#"name="session" content=""#).nth(1).and_then(|rest| rest.split('"').next()).map(str::to_string)
    };

    // The link: only for the key; it carries a code, not a key.
    let (status, _) = raw_request(control, &post("/ui/login-link", &host, &[], "{}")).await;
    assert_eq!(status, 401, "a login link without the control key");
    let (status, answer) = raw_request(control, &post("/ui/login-link", &host, &[("Authorization", &key)], "{}")).await;
    assert_eq!(status, 200, "{answer}");
    let body: serde_json::Value = serde_json::from_str(&body_of(&answer)).unwrap();
    let link = body["url"].as_str().unwrap().to_string();
    assert!(link.starts_with(&format!("http://{host}/ui/login?code=")), "{link}");
    let secrets = [token.as_str().to_string(), browser_relay::control_key(&token).as_str().to_string()];
    assert!(secrets.iter().all(|s| !link.contains(s.as_str())), "the link carries no key");
    let login = link.trim_start_matches(&format!("http://{host}"));

    // Without a login: the page's shell, which says what to do; no data.
    let (status, shell) = raw_request(control, &get("/ui", &host, &[])).await;
    assert_eq!(status, 200, "{shell}");
    assert!(shell.contains("browser-relay ui"), "{shell}");
    assert_eq!(session_in(&shell).as_deref(), Some(""), "the shell holds no session");
    for path in ["/ui/api/overview", "/ui/api/asks"] {
        let (status, answer) = raw_request(control, &get(path, &host, &[])).await;
        assert_eq!(status, 401, "{path}: {answer}");
        assert!(answer.contains("browser-relay ui"), "{answer}");
        let (status, _) = raw_request(control, &get(path, &host, &[("Authorization", &key)])).await;
        assert_eq!(status, 401, "{path}: the dashboard's API does not take the control key");
    }

    // The code works once; its answer is the page with the session in it,
    // and sets no cookie.
    let (status, logged_in) = raw_request(control, &get(login, &host, &[("Sec-Fetch-Site", "cross-site")])).await;
    assert_eq!(status, 200, "{logged_in}");
    assert_eq!(header_of(&logged_in, "set-cookie"), None, "no cookie: nothing the browser sends by itself");
    let session = session_in(&logged_in).expect("the page, with its session");
    assert_eq!(session.len(), 64, "{session}");
    let (status, _) = raw_request(control, &get(login, &host, &[])).await;
    assert_eq!(status, 403, "a login link used twice");
    let csp = header_of(&logged_in, "content-security-policy").unwrap();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"), "{csp}");

    // What a program could lift and replay, as curl would: a cookie (the
    // session under the name the dashboard's cookie had), the page's shell
    // fetched with it. The shell reveals no session; the API answers 401.
    let cookie = format!("browser_relay_ui_{}={session}", control.port());
    let (status, page) = raw_request(control, &get("/ui", &host, &[("Cookie", &cookie)])).await;
    assert_eq!(status, 200);
    assert_eq!(session_in(&page).as_deref(), Some(""), "the page fetched with a cookie holds no session");
    assert!(!body_of(&page).contains(&session), "no session in the page's shell");
    for path in ["/ui/api/overview", "/ui/api/view?targetId=T", "/ui/api/asks", "/ui/api/activity"] {
        let (status, answer) = raw_request(control, &get(path, &host, &[("Cookie", &cookie)])).await;
        assert_eq!(status, 401, "{path} with a cookie alone: {answer}");
    }

    // With the page's header: the data.
    let own_origin = format!("http://{host}");
    let reads = [(SESSION, session.as_str()), ("Sec-Fetch-Site", "same-origin")];
    let (status, overview) = raw_request(control, &get("/ui/api/overview", &host, &reads)).await;
    assert_eq!(status, 200, "{overview}");
    assert!(overview.contains("\"profiles\""), "{overview}");
    assert!(
        secrets.iter().all(|s| !overview.contains(s.as_str()) && !logged_in.contains(s.as_str())),
        "no key in the dashboard"
    );
    let (status, view) = raw_request(control, &get("/ui/api/view", &host, &reads)).await;
    assert_eq!(status, 400, "past the guard, to the handler: {view}");

    // Other origins, other sites, other hosts: refused, session or not.
    let rebound = format!("evil.example:{}", control.port());
    let zeros = "0".repeat(64);
    let refused: Vec<HttpCase> = vec![
        (
            "another site's page",
            "/ui/api/overview".into(),
            &host,
            vec![(SESSION, &session), ("Origin", "http://evil.example")],
            403,
        ),
        (
            "another port's page",
            "/ui/api/overview".into(),
            &host,
            vec![(SESSION, &session), ("Origin", "http://127.0.0.1:1")],
            403,
        ),
        (
            "a cross-site fetch",
            "/ui/api/overview".into(),
            &host,
            vec![(SESSION, &session), ("Sec-Fetch-Site", "cross-site")],
            403,
        ),
        ("DNS rebinding", "/ui/api/overview".into(), &rebound, vec![(SESSION, &session)], 403),
        ("a forged session", "/ui/api/overview".into(), &host, vec![(SESSION, &zeros)], 401),
    ];
    for (what, path, host, headers, expected) in &refused {
        let (status, _) = raw_request(control, &get(path, host, headers)).await;
        assert_eq!(status, *expected, "{what}");
    }

    // A change: the cookie alone is nothing; the page's session is.
    let change = r#"{"clientId": 424242}"#;
    let (status, _) = raw_request(control, &post("/ui/api/disconnect", &host, &[("Cookie", &cookie)], change)).await;
    assert_eq!(status, 401, "a change with a cookie alone");
    let forged = [(SESSION, zeros.as_str())];
    assert_eq!(raw_request(control, &post("/ui/api/disconnect", &host, &forged, change)).await.0, 401);
    let own = [(SESSION, session.as_str()), ("Origin", own_origin.as_str())];
    let (status, answer) = raw_request(control, &post("/ui/api/disconnect", &host, &own, change)).await;
    assert_eq!(status, 404, "past the guard, to the handler: {answer}");
    assert!(answer.contains("no client 424242"), "{answer}");

    // The person's answers to a grant's questions and Done on a handed-over
    // tab are changes too: the same session; past the guard, the handler
    // says what it did not find, or what it did not understand.
    let answers: [(&str, &str, u16, &str); 3] = [
        ("/ui/api/answer", r#"{"id": 424242, "answer": "allow"}"#, 404, "no question 424242 is waiting"),
        ("/ui/api/answer", r#"{"id": 424242, "answer": "maybe"}"#, 400, "no answer 'maybe'"),
        ("/ui/api/handoff-done", r#"{"targetId": "NO-SUCH-TAB"}"#, 404, "no tab NO-SUCH-TAB is handed over"),
    ];
    for (path, body, expected, says) in answers {
        let (status, _) = raw_request(control, &post(path, &host, &[("Cookie", &cookie)], body)).await;
        assert_eq!(status, 401, "{path} with a cookie alone");
        assert_eq!(raw_request(control, &post(path, &host, &forged, body)).await.0, 401, "{path}, a forged session");
        let (status, answer) = raw_request(control, &post(path, &host, &own, body)).await;
        assert_eq!(status, expected, "{path}: {answer}");
        assert!(answer.contains(says), "{path}: {answer}");
    }
    // What waits for the person: the session's alone, and the long poll
    // answers at once for a version it has moved on from.
    let (status, asks) = raw_request(control, &get("/ui/api/asks", &host, &reads)).await;
    assert_eq!(status, 200, "{asks}");
    let asks: serde_json::Value = serde_json::from_str(&body_of(&asks)).unwrap();
    assert_eq!((&asks["questions"], &asks["handoffs"]), (&serde_json::json!([]), &serde_json::json!([])), "{asks}");
    let moved_on = format!("/ui/api/asks?wait={}", asks["version"].as_u64().unwrap() + 1);
    let at_once =
        tokio::time::timeout(Duration::from_secs(2), raw_request(control, &get(&moved_on, &host, &reads))).await;
    assert_eq!(at_once.expect("an old version is answered at once").0, 200);
    let (status, _) = raw_request(control, &get("/ui/api/asks?wait=soon", &host, &reads)).await;
    assert_eq!(status, 400, "a version is a number");

    // Logging out ends the session.
    let (status, _) = raw_request(control, &post("/ui/api/logout", &host, &own, "{}")).await;
    assert_eq!(status, 200);
    assert_eq!(raw_request(control, &get("/ui/api/overview", &host, &reads)).await.0, 401);
    server.stop().await;
}
