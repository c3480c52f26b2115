//! The relay against real Chromium through the simulated extension, with
//! raw CDP clients: page-level endpoints, popups, detach, and faults.

use std::time::{Duration, Instant};

use cdp_client::{CdpClient, CdpError, CdpEvent};
use e2e::{Faults, RelayEnv, http_get};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

async fn next_event(events: &mut UnboundedReceiver<CdpEvent>, method: &str) -> CdpEvent {
    e2e::next_event(events, method, Duration::from_secs(15)).await
}

async fn browser_client(env: &RelayEnv) -> (CdpClient, UnboundedReceiver<CdpEvent>, String) {
    let client = CdpClient::connect(&env.browser_ws()).await.unwrap().with_timeout(Duration::from_secs(15));
    let mut events = client.take_events().unwrap();
    e2e::auto_attach(&client).await;
    let session =
        next_event(&mut events, "Target.attachedToTarget").await.params["sessionId"].as_str().unwrap().to_string();
    (client, events, session)
}

async fn evaluate(client: &CdpClient, expression: &str, session: Option<&str>) -> Value {
    let result = client
        .call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            session,
        )
        .await
        .unwrap();
    result["result"]["value"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_level_endpoint_takes_commands_without_session_id() {
    let env = RelayEnv::start().await.unwrap();
    let list_url =
        format!("http://{}/json/list?token={}", env.server.addr, browser_relay::cdp_key(&env.token).as_str());
    let (status, list) = http_get(&list_url).await.unwrap();
    assert_eq!(status, 200, "{list}");
    let list: Value = serde_json::from_str(&list).unwrap();
    let page = &list[0];
    assert_eq!(page["type"], "page");
    assert_eq!(page["url"], format!("{}/index.html", env.fixtures.url()));
    let ws = page["webSocketDebuggerUrl"].as_str().unwrap();
    assert!(ws.starts_with(&format!("ws://127.0.0.1:{}/devtools/page/", env.server.addr.port())), "{ws}");

    let client = CdpClient::connect(ws).await.unwrap().with_timeout(Duration::from_secs(15));
    let mut events = client.take_events().unwrap();
    assert_eq!(evaluate(&client, "document.title", None).await, "Fixture Index");
    client.call("Page.enable", json!({}), None).await.unwrap();
    client.call("Page.setLifecycleEventsEnabled", json!({"enabled": true}), None).await.unwrap();
    let navigated =
        client.call("Page.navigate", json!({"url": format!("{}/form.html", env.fixtures.url())}), None).await.unwrap();
    // Wait for the load of this navigation's document: a bare
    // `Page.loadEventFired` may be a late one from the index page (CI saw the
    // title read from the wrong document that way).
    let loader = navigated["loaderId"].as_str().expect("a cross-document navigation has a loaderId").to_string();
    let loaded = loop {
        let event = next_event(&mut events, "Page.lifecycleEvent").await;
        if event.params["name"] == "load" && event.params["loaderId"] == loader.as_str() {
            break event;
        }
    };
    assert_eq!(loaded.session_id, None, "page-level events carry no sessionId");
    assert_eq!(evaluate(&client, "document.title", None).await, "Fixture Form");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn popups_of_attached_tabs_are_attached_and_user_detach_is_seen() {
    let env = RelayEnv::start().await.unwrap();
    let (client, mut events, session) = browser_client(&env).await;
    let opener = env.ext.target_id(env.tab.tab_id).unwrap();
    let popup_url = format!("{}/index.html?popup", env.fixtures.url());
    e2e::open_popup(&client, &session, &popup_url).await.unwrap();
    let popup = next_event(&mut events, "Target.attachedToTarget").await;
    assert_eq!(popup.params["targetInfo"]["openerId"].as_str(), Some(&*opener), "{:?}", popup.params);
    let popup_session = popup.params["sessionId"].as_str().unwrap().to_string();
    let popup_target = popup.params["targetInfo"]["targetId"].as_str().unwrap().to_string();
    // The popup is drivable.
    let deadline = Instant::now() + Duration::from_secs(15);
    while evaluate(&client, "location.href", Some(&popup_session)).await != popup_url {
        assert!(Instant::now() < deadline, "popup never reached {popup_url}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The user clicks the toolbar button on the popup: detached for the client.
    let popup_tab =
        env.ext.tabs().into_iter().find(|t| env.ext.target_id(t.tab_id).as_deref() == Some(&*popup_target)).unwrap();
    env.ext.user_detach(popup_tab.tab_id).await.unwrap();
    let detached = next_event(&mut events, "Target.detachedFromTarget").await;
    assert_eq!(detached.params["targetId"].as_str(), Some(&*popup_target));
    match client.call("Runtime.evaluate", json!({"expression": "1"}), Some(&popup_session)).await {
        Err(CdpError::Protocol { code: -32001, .. }) => {}
        other => panic!("expected session-not-found after detach, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_dropping_mid_command_then_reconnecting() {
    let env = RelayEnv::start().await.unwrap();
    let (client, mut events, session) = browser_client(&env).await;
    assert_eq!(evaluate(&client, "1 + 1", Some(&session)).await, 2);

    env.ext.set_faults(Faults { swallow_commands: true, ..Faults::default() });
    let pending = client.start_call("Runtime.evaluate", json!({"expression": "2 + 2"}), Some(&session));
    // Dropped only once the command waits on the (hung) extension.
    e2e::wait_for_stats(&env.server.relay, "the command in flight", Duration::from_secs(10), |s| s.pending >= 1)
        .await
        .unwrap();
    let dropped_at = Instant::now();
    env.ext.drop_connection();
    match pending.await {
        Err(CdpError::Protocol { message, .. }) => assert!(message.contains("disconnected"), "{message}"),
        other => panic!("expected an error for the in-flight command, got {other:?}"),
    }
    // Well under the 30 s a command may take: answered when the socket goes.
    assert!(dropped_at.elapsed() < Duration::from_secs(5), "answered after {:?}", dropped_at.elapsed());
    next_event(&mut events, "Target.detachedFromTarget").await;

    // The extension (its service worker restarted) reconnects with the tab
    // still attached: the page comes back without a new click.
    env.ext.set_faults(Faults::default());
    env.ext.connect(env.server.addr, Some(env.token.as_str())).await.unwrap();
    let attached = next_event(&mut events, "Target.attachedToTarget").await;
    let session = attached.params["sessionId"].as_str().unwrap();
    assert_eq!(evaluate(&client, "document.title", Some(session)).await, "Fixture Index");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_from_either_side_is_survived() {
    let env = RelayEnv::start().await.unwrap();
    let (client, _events, session) = browser_client(&env).await;
    env.ext.send_raw("\u{0}\u{1} garbage");
    env.ext.send_raw(r#"{"reply":{"id":"not a number"}}"#);
    client.send_raw("][");
    client.send_raw(r#"{"id":"x","method":1}"#);
    assert_eq!(evaluate(&client, "6 * 7", Some(&session)).await, 42);
    env.ext.set_faults(Faults { reply_delay: Some(Duration::from_millis(300)), ..Faults::default() });
    let slow = Instant::now();
    assert_eq!(evaluate(&client, "'slow but answered'", Some(&session)).await, "slow but answered");
    assert!(slow.elapsed() >= Duration::from_millis(300));
}
