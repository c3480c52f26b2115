//! The control API in-process, without Chromium: the guard on every route,
//! the JSON error contract, request validation, and the extension driver
//! against a scripted fake extension (no extension, no shared tab, a shared
//! tab listed through the relay's own `/cdp`).

use std::time::Duration;

use cdp_client::http as http_client;
use e2e::ControlEnv;
use e2e::control_env::eventually;
use e2e::fake_extension::{FakeExtension, Mode, fake_tab, fake_target_id, hello};
use serde_json::json;

const EXTENSION_PROFILE: &str = "defaultProfile = \"chrome\"\n";

#[tokio::test]
async fn every_route_needs_the_token_a_loopback_host_and_no_origin() {
    let env = ControlEnv::start().await.unwrap();
    let routes = [
        ("GET", "/"),
        ("GET", "/profiles"),
        ("POST", "/start"),
        ("POST", "/stop"),
        ("GET", "/tabs"),
        ("POST", "/tabs/open"),
        ("POST", "/tabs/focus"),
        ("DELETE", "/tabs/X"),
        ("POST", "/navigate"),
        ("POST", "/back"),
        ("POST", "/forward"),
        ("GET", "/snapshot"),
        ("GET", "/find"),
        ("POST", "/screenshot"),
        ("GET", "/console"),
        ("GET", "/requests"),
        ("GET", "/requests/body"),
        ("POST", "/act"),
        ("POST", "/hooks/dialog"),
        ("POST", "/hooks/file-chooser"),
        ("POST", "/pdf"),
        ("GET", "/no-such-route"),
    ];
    let good_auth = format!("Bearer {}", browser_relay::control_key(&env.token).as_str());
    for (method, path) in routes {
        let url = format!("{}{path}", env.base);
        let no_token = http_client::request(method, &url, &[], None).await.unwrap();
        assert_eq!(no_token.status, 401, "{method} {path} without a token");
        assert_eq!(no_token.json()["error"]["code"], "unauthorized", "{method} {path}");

        let wrong = http_client::request(method, &url, &[("Authorization", "Bearer wrong")], None).await.unwrap();
        assert_eq!(wrong.status, 401, "{method} {path} with a wrong token");
        assert!(!wrong.text().contains(env.token.as_str()));

        let origin = http_client::request(
            method,
            &url,
            &[("Authorization", &good_auth), ("Origin", "http://evil.example")],
            None,
        )
        .await
        .unwrap();
        assert_eq!(origin.status, 403, "{method} {path} from a web page");
        assert_eq!(origin.json()["error"]["code"], "forbidden");
        // Not even the extension's own origin may use the control API.
        let extension = format!("chrome-extension://{}", browser_relay::DEFAULT_EXTENSION_ID);
        let from_extension =
            http_client::request(method, &url, &[("Authorization", &good_auth), ("Origin", &extension)], None)
                .await
                .unwrap();
        assert_eq!(from_extension.status, 403, "{method} {path} from the extension");
    }
    // DNS rebinding: a non-loopback Host, sent on a raw socket.
    let raw = raw_request(&env, "GET /tabs HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n").await;
    assert!(raw.starts_with("HTTP/1.1 403"), "{raw}");
    assert!(raw.contains("not a loopback name"), "{raw}");
    // The token in the query works too (for curl one-liners).
    let query = http_client::request(
        "GET",
        &format!("{}/profiles?token={}", env.base, browser_relay::control_key(&env.token).as_str()),
        &[],
        None,
    )
    .await
    .unwrap();
    assert_eq!(query.status, 200, "{}", query.text());
}

async fn raw_request(env: &ControlEnv, head: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = env.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("{head}Authorization: Bearer {}\r\n\r\n", browser_relay::control_key(&env.token).as_str());
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await.unwrap().unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn errors_are_json_an_agent_can_act_on() {
    let env = ControlEnv::start().await.unwrap();

    let (status, body) = env.api.call("GET", "/tabs", None).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "not_running");
    assert_eq!(body["error"]["message"], "profile 'managed' is not running");
    assert!(body["error"]["hint"].as_str().unwrap().contains("POST /start"), "{body}");

    let (status, body) = env.api.call("GET", "/snapshot?profile=nope", None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("unknown_profile")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("managed"), "lists the profiles: {body}");

    let (status, body) = env.api.call("POST", "/tabs/open", Some(json!({"urll": "https://example.com"}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("bad_request")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("unknown field `urll`"), "{body}");

    let response = env.api.request("POST", "/navigate", &[], None).await;
    assert_eq!(response.status, 400, "a body without url: {}", response.text());
    assert!(response.json()["error"]["message"].as_str().unwrap().contains("missing field `url`"));

    let garbage = http_client::request(
        "POST",
        &format!("{}/navigate", env.base),
        &[("Authorization", &format!("Bearer {}", browser_relay::control_key(&env.token).as_str()))],
        Some(b"{\"url\": "),
    )
    .await
    .unwrap();
    assert_eq!(garbage.status, 400);
    assert!(garbage.json()["error"]["message"].as_str().unwrap().starts_with("invalid JSON body"));

    let (status, body) = env.api.call("POST", "/navigate", Some(json!({"url": "javascript:alert(1)"}))).await;
    assert_eq!(status, 400, "{body}");

    let (status, body) = env.api.call("GET", "/snapshot?depth=deep", None).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("depth=deep"), "{body}");

    let (status, body) = env.api.call("GET", "/snapshot?format=xml", None).await;
    assert_eq!(status, 400, "{body}");

    let (status, body) = env.api.call("GET", "/console?level=loud", None).await;
    assert_eq!(status, 400, "{body}");

    let (status, body) = env.api.call("GET", "/nothing", None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not_found")));
    assert!(body["error"]["hint"].as_str().unwrap().contains("GET /snapshot"), "lists the routes: {body}");

    let oversized = vec![b' '; 2 << 20];
    let big = http_client::request(
        "POST",
        &format!("{}/start", env.base),
        &[("Authorization", &format!("Bearer {}", browser_relay::control_key(&env.token).as_str()))],
        Some(&oversized),
    )
    .await
    .unwrap();
    assert_eq!(big.status, 413, "a 2 MiB body is refused");

    // The server is still up and answering.
    let status = env.api.ok("GET", "/", None).await;
    let names: Vec<&str> =
        status["profiles"].as_array().unwrap().iter().filter_map(|p| p["profile"].as_str()).collect();
    assert_eq!(names, ["chrome", "managed"]);
    let managed = &status["profiles"][1];
    assert_eq!((managed["running"].as_bool(), managed["default"].as_bool()), (Some(false), Some(true)), "{status}");
    assert_eq!(managed["state"], "stopped");
}

#[tokio::test]
async fn extension_driver_says_what_to_click_and_lists_shared_tabs() {
    let env = ControlEnv::start_with(Some(EXTENSION_PROFILE)).await.unwrap();

    let (status, body) = env.api.call("POST", "/start", None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("no_extension")), "{body}");
    let (status, body) = env.api.call("GET", "/tabs", None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("no_extension")), "{body}");

    // Connected, nothing shared yet.
    let addr = env.server.addr;
    let token = env.token.as_str().to_string();
    let ext = FakeExtension::connect(addr, Some(&token), Some(hello(vec![])), Mode::Echo).await.unwrap();
    eventually("the extension's hello", Duration::from_secs(5), || async {
        env.server.relay.stats().extension_connected.then_some(())
    })
    .await;
    let (status, body) = env.api.call("POST", "/start", None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("no_shared_tab")), "{body}");
    assert_eq!(body["error"]["hint"], "click the Browser Relay icon on a tab to share it");
    let (status, body) = env.api.call("GET", "/snapshot", None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("no_shared_tab")), "{body}");
    drop(ext);
    eventually("the extension to go", Duration::from_secs(5), || async {
        (!env.server.relay.stats().extension_connected).then_some(())
    })
    .await;

    // A shared tab: listed through the relay's own /cdp.
    let _ext = FakeExtension::connect(addr, Some(&token), Some(hello(vec![fake_tab(7)])), Mode::Echo).await.unwrap();
    let started = eventually("the shared tab", Duration::from_secs(5), || async {
        let (status, body) = env.api.call("POST", "/start", None).await;
        (status == 200).then_some(body)
    })
    .await;
    assert_eq!(started["state"], "connected", "{started}");
    assert_eq!(started["tabs"], 1);
    let tabs = env.api.ok("GET", "/tabs", None).await;
    assert_eq!(tabs["tabs"][0]["targetId"], fake_target_id(7), "{tabs}");
    assert_eq!(tabs["tabs"][0]["url"], "https://example.test/7");
    assert_eq!(tabs["tabs"][0]["title"], "Tab 7");

    let (status, body) = env.api.call("POST", "/tabs/focus", Some(json!({"targetId": "NOPE"}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("unknown_tab")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains(&fake_target_id(7)), "lists the tabs: {body}");

    let (status, body) = env.api.call("POST", "/stop", None).await;
    assert_eq!(status, 400, "your own Chrome is never stopped: {body}");
}

/// The agent API reaches the shared tabs in process, as one more client of
/// the relay: under the same cap as the sockets, and when the cap is full
/// the agent is told so and what to do, not "the browser connection
/// failed".
#[tokio::test]
async fn the_agent_api_on_shared_tabs_is_a_relay_client_under_its_cap() {
    let env = ControlEnv::start_with_relay(Some(EXTENSION_PROFILE), |relay| relay.max_clients = 1).await.unwrap();
    let (addr, token) = (env.server.addr, env.token.as_str().to_string());
    let _ext = FakeExtension::connect(addr, Some(&token), Some(hello(vec![fake_tab(7)])), Mode::Echo).await.unwrap();
    eventually("the extension's hello", Duration::from_secs(5), || async {
        (env.server.relay.stats().targets == 1).then_some(())
    })
    .await;

    // A script holds the one place: the agent is refused, with what to do.
    let cdp_url = format!("ws://{addr}/cdp?token={}", browser_relay::cdp_key(&env.token).as_str());
    let script = cdp_client::CdpClient::connect(&cdp_url).await.unwrap();
    let (status, body) = env.api.call("GET", "/tabs", None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("too_many_clients")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("too many CDP clients connected (1)"), "{body}");
    assert!(body["error"]["hint"].as_str().unwrap().contains("dashboard"), "{body}");

    // The script leaves: the agent gets in, and then holds the place itself.
    drop(script);
    let tabs = eventually("the agent's connection", Duration::from_secs(5), || async {
        let (status, body) = env.api.call("GET", "/tabs", None).await;
        (status == 200).then_some(body)
    })
    .await;
    assert_eq!(tabs["tabs"][0]["targetId"], fake_target_id(7), "{tabs}");
    let Err(refused) = cdp_client::CdpClient::connect(&cdp_url).await else {
        panic!("a second client got in: the agent holds the one place");
    };
    assert!(refused.to_string().contains("503"), "{refused}");
}

#[tokio::test]
async fn evaluate_can_be_switched_off_in_config() {
    let env = ControlEnv::start_with(Some("defaultProfile = \"managed\"\nallowEvaluate = false\n")).await.unwrap();
    for body in [json!({"kind": "evaluate", "fn": "() => 1"}), json!({"kind": "wait", "fn": "() => true"})] {
        let (status, error) = env.api.call("POST", "/act", Some(body)).await;
        assert_eq!((status, error["error"]["code"].as_str()), (403, Some("not_allowed")), "{error}");
        let hint = error["error"]["hint"].as_str().unwrap_or_default();
        assert!(hint.contains("`allowEvaluate = true` in config.toml"), "the line to write: {error}");
    }
    // Other kinds are not refused for it (here: the browser is not running).
    let (status, error) = env.api.call("POST", "/act", Some(json!({"kind": "press", "key": "Enter"}))).await;
    assert_eq!((status, error["error"]["code"].as_str()), (409, Some("not_running")), "{error}");
    let (status, error) = env.api.call("POST", "/act", Some(json!({"kind": "fly"}))).await;
    assert_eq!(status, 400, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("unknown variant `fly`"), "{error}");
}

#[tokio::test]
async fn the_session_route_proves_the_server_and_opens_nothing_without_the_token() {
    let env = ControlEnv::start().await.unwrap();
    let url = format!("{}/session", env.base);
    let nonce = shared_protocol::auth::nonce_hex(&[9; 32]);
    let body = json!({"nonce": nonce}).to_string();
    let opened = http_client::request("POST", &url, &[], Some(body.as_bytes())).await.unwrap();
    assert_eq!(opened.status, 200, "public: {}", opened.text());
    let opened = opened.json();
    let (server_nonce, proof) = (opened["nonce"].as_str().unwrap(), opened["proof"].as_str().unwrap());
    // Only a holder of the token derives the session's secret...
    let port = env.base.rsplit(':').next().unwrap().parse().unwrap();
    let secret =
        browser_relay::client_secret(&browser_relay::control_key(&env.token), port, &nonce, server_nonce, proof)
            .expect("the server proved this install's token");
    let with = |secret: &str| format!("Bearer {secret}");
    let tabs = format!("{}/profiles", env.base);
    let ok = http_client::request("GET", &tabs, &[("Authorization", &with(&secret))], None).await.unwrap();
    assert_eq!(ok.status, 200, "{}", ok.text());
    // ...and the proof itself, or a guess, opens nothing.
    for guess in [proof.to_string(), "c".repeat(64)] {
        let refused = http_client::request("GET", &tabs, &[("Authorization", &with(&guess))], None).await.unwrap();
        assert_eq!(refused.status, 401, "{guess}");
    }
    // The usual rules still hold on it.
    let from_page =
        http_client::request("POST", &url, &[("Origin", "http://evil.example")], Some(body.as_bytes())).await.unwrap();
    assert_eq!(from_page.status, 403);
    let bad = http_client::request("POST", &url, &[], Some(b"{\"nonce\":\"short\"}")).await.unwrap();
    assert_eq!(bad.status, 400);
}
