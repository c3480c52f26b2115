//! Grants on the relay, against real Chromium through the simulated
//! extension (the real extension's part, its tab groups and its cookie
//! rules, is `e2e_grants.rs`): what a grant's client sees, where its tabs
//! may go whoever starts the navigation, which cookies it reads, and that
//! revoking or expiring a grant closes its clients at once. Each test tries
//! the way around the rule, and fails without it.

use std::time::Duration;

use cdp_client::{CdpClient, CdpError, CdpEvent};
use e2e::{Chromium, FixtureServer, SimExtension, http_get};
use grants::{Door, Grant, GrantBook, GrantName, NewGrant, Sites};
use serde_json::{Value, json};
use state_dir::{StateDir, Token};
use tokio::sync::mpsc::UnboundedReceiver;

const WITHIN: Duration = Duration::from_secs(15);

/// Chromium, the fixtures (two sites: 127.0.0.1 and localhost), a relay
/// with a state folder and two grants, and the simulated extension sharing
/// the person's own tab (the fixture's index) with nobody but the person.
struct GrantEnv {
    ext: SimExtension,
    server: browser_relay::RunningServer,
    fixtures: FixtureServer,
    _chrome: Chromium,
    state: tempfile::TempDir,
    token: Token,
    /// Its tabs may go to the fixture's 127.0.0.1 origin only.
    alpha: Grant,
    /// Any site.
    beta: Grant,
    /// The person's own shared tab.
    own_tab: i64,
}

fn new_grant(name: &str, sites: Sites) -> NewGrant {
    NewGrant {
        name: GrantName::parse(name).unwrap(),
        sites,
        color: None,
        expires_in: None,
        evaluate: true,
        ask: Vec::new(),
    }
}

impl GrantEnv {
    async fn start() -> Self {
        e2e::init_logging();
        let fixtures = FixtureServer::start().await.unwrap();
        let index = format!("{}/index.html", fixtures.url());
        let chrome = Chromium::launch(&[], &index).unwrap();
        let token = Token::generate();
        let state = tempfile::tempdir().unwrap();
        let book = GrantBook::new(StateDir::at(state.path()));
        let alpha = book.add(&token, new_grant("alpha", Sites::parse_list(&fixtures.url()).unwrap())).unwrap();
        let beta = book.add(&token, new_grant("beta", Sites::any())).unwrap();
        let mut options = e2e::test_options(Some(token.clone()));
        options.state_root = Some(state.path().to_path_buf());
        let server = browser_relay::RunningServer::start(options).await.unwrap();
        let ext = SimExtension::new(&chrome.ws_url).await.unwrap();
        let tab = ext.wait_for_tab("the fixture index page", |t| t.url == index).await.unwrap();
        ext.connect(server.addr, Some(token.as_str())).await.unwrap();
        ext.welcomed().await.unwrap();
        ext.user_attach(tab.tab_id).await.unwrap();
        e2e::wait_for_stats(&server.relay, "the person's tab", WITHIN, |s| s.targets == 1).await.unwrap();
        Self { ext, server, fixtures, _chrome: chrome, state, token, alpha, beta, own_tab: tab.tab_id }
    }

    fn key(&self, grant: &Grant) -> Token {
        grant.key(&self.token, Door::Cdp)
    }

    fn person_key(&self) -> Token {
        browser_relay::cdp_key(&self.token)
    }

    /// A browser-level client with `key`, auto-attaching as Playwright does.
    async fn client(&self, key: &Token) -> (CdpClient, UnboundedReceiver<CdpEvent>) {
        let url = format!("ws://{}/cdp?token={}", self.server.addr, key.as_str());
        let client = CdpClient::connect(&url).await.unwrap().with_timeout(WITHIN);
        let events = client.take_events().unwrap();
        e2e::auto_attach(&client).await;
        (client, events)
    }

    /// The page targets `key` lists in `/json/list`.
    async fn listed(&self, key: &Token) -> Vec<String> {
        let (status, body) =
            http_get(&format!("http://{}/json/list?token={}", self.server.addr, key.as_str())).await.unwrap();
        assert_eq!(status, 200, "{body}");
        let list: Vec<Value> = serde_json::from_str(&body).unwrap();
        list.iter().map(|t| t["id"].as_str().unwrap().to_string()).collect()
    }
}

/// The page targets a client's `Target.getTargets` shows.
async fn pages(client: &CdpClient) -> Vec<String> {
    let targets = client.call("Target.getTargets", json!({}), None).await.unwrap();
    let infos = targets["targetInfos"].as_array().unwrap();
    infos.iter().filter(|t| t["type"] == "page").map(|t| t["targetId"].as_str().unwrap().to_string()).collect()
}

/// A new tab of a grant's client: its target id and the client's session.
async fn open(client: &CdpClient, events: &mut UnboundedReceiver<CdpEvent>, url: &str) -> (String, String) {
    let created = client.call("Target.createTarget", json!({"url": url}), None).await.unwrap();
    let target = created["targetId"].as_str().unwrap().to_string();
    loop {
        let attached = e2e::next_event(events, "Target.attachedToTarget", WITHIN).await;
        if attached.params["targetInfo"]["targetId"] == target.as_str() {
            return (target, attached.params["sessionId"].as_str().unwrap().to_string());
        }
    }
}

fn refused(result: Result<Value, CdpError>) -> (i64, String) {
    match result {
        Err(CdpError::Protocol { code, message, .. }) => (code, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The page's location, read in the page.
async fn location(client: &CdpClient, session: &str) -> String {
    let answer = client.call("Runtime.evaluate", json!({"expression": "location.href"}), Some(session)).await.unwrap();
    answer["result"]["value"].as_str().unwrap().to_string()
}

/// Waits until the activity record holds `n` refused navigations.
async fn refusals(env: &GrantEnv, n: usize) -> Vec<activity::Entry> {
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        let answer = env.server.activity.answer(&activity::Query::default());
        let found: Vec<activity::Entry> =
            answer.entries.into_iter().filter(|e| e.source == activity::Source::Relay).collect();
        if found.len() >= n {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "{} refused navigations recorded, not {n}", found.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_grant_sees_only_its_own_tabs_and_another_grants_tab_is_unknown_to_it() {
    let env = GrantEnv::start().await;
    let own = env.ext.target_id(env.own_tab).unwrap();
    let (alpha, mut alpha_events) = env.client(&env.key(&env.alpha)).await;
    let (beta, mut beta_events) = env.client(&env.key(&env.beta)).await;
    assert!(pages(&alpha).await.is_empty(), "the person's own shared tab is not a grant's");
    assert!(env.listed(&env.key(&env.alpha)).await.is_empty());
    // Its discovery documents hand it back its own key, never the person's.
    let version = format!("http://{}/json/version?token={}", env.server.addr, env.key(&env.alpha).as_str());
    let (_, document) = http_get(&version).await.unwrap();
    let ws = serde_json::from_str::<Value>(&document).unwrap()["webSocketDebuggerUrl"].as_str().unwrap().to_string();
    assert!(ws.ends_with(&format!("?token={}", env.key(&env.alpha).as_str())), "{ws}");
    assert!(!document.contains(env.person_key().as_str()) && !document.contains(env.token.as_str()), "{document}");

    let (alphas, _) = open(&alpha, &mut alpha_events, &format!("{}/index.html?alpha", env.fixtures.url())).await;
    let (betas, _) = open(&beta, &mut beta_events, &format!("{}/index.html?beta", env.fixtures.alt_url())).await;
    assert_eq!(pages(&alpha).await, std::slice::from_ref(&alphas));
    assert_eq!(pages(&beta).await, std::slice::from_ref(&betas));
    assert_eq!(env.listed(&env.key(&env.alpha)).await, std::slice::from_ref(&alphas));
    let list = format!("http://{}/json/list?token={}", env.server.addr, env.key(&env.alpha).as_str());
    let (_, listed) = http_get(&list).await.unwrap();
    assert!(listed.contains(env.key(&env.alpha).as_str()) && !listed.contains(env.person_key().as_str()), "{listed}");
    let tab = env.ext.tabs().into_iter().find(|t| env.ext.target_id(t.tab_id).as_deref() == Some(&alphas)).unwrap();
    assert_eq!(tab.grant.as_deref(), Some("alpha"), "the extension was asked to open it in alpha's group");

    // Beta reaches for alpha's tab by its id: unknown, as Chrome says.
    let (code, message) =
        refused(beta.call("Target.attachToTarget", json!({"targetId": alphas, "flatten": true}), None).await);
    assert_eq!((code, message.as_str()), (-32602, "No target with given id found"));
    let info = beta.call("Target.getTargetInfo", json!({"targetId": own}), None).await;
    assert_eq!(refused(info).0, -32602, "the person's tab is as unknown");
    for route in [format!("/json/close/{alphas}"), format!("/json/activate/{alphas}")] {
        let url = format!("http://{}{route}?token={}", env.server.addr, env.key(&env.beta).as_str());
        let (status, body) = http_get(&url).await.unwrap();
        assert_eq!(status, 404, "{route}: {body}");
    }
    let page_url = format!("ws://{}/devtools/page/{alphas}?token={}", env.server.addr, env.key(&env.beta).as_str());
    assert!(CdpClient::connect(&page_url).await.is_err(), "no page-level socket on another grant's tab");
    assert_eq!(refused(beta.call("Target.closeTarget", json!({"targetId": alphas}), None).await).0, -32602);

    // The person's own keys see every shared tab, as before.
    let (person, _) = env.client(&env.person_key()).await;
    let mut all = pages(&person).await;
    all.sort();
    let mut expected = vec![own, alphas, betas];
    expected.sort();
    assert_eq!(all, expected);
    // A managed profile is the person's: a grant's key is refused there.
    let url =
        format!("http://{}/profiles/managed/json/version?token={}", env.server.addr, env.key(&env.alpha).as_str());
    let (status, body) = http_get(&url).await.unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("grant 'alpha'"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tab_moved_into_a_grants_group_appears_to_it_and_moved_out_leaves_it() {
    let env = GrantEnv::start().await;
    let own = env.ext.target_id(env.own_tab).unwrap();
    let (alpha, mut alpha_events) = env.client(&env.key(&env.alpha)).await;
    let (beta, mut beta_events) = env.client(&env.key(&env.beta)).await;
    alpha.call("Target.setDiscoverTargets", json!({"discover": true}), None).await.unwrap();

    // Into alpha's group: alpha is announced the tab, beta is not.
    env.ext.share_with(env.own_tab, Some("alpha")).await.unwrap();
    let attached = e2e::next_event(&mut alpha_events, "Target.attachedToTarget", WITHIN).await;
    assert_eq!(attached.params["targetInfo"]["targetId"], own.as_str());
    let session = attached.params["sessionId"].as_str().unwrap().to_string();
    assert_eq!(pages(&alpha).await, std::slice::from_ref(&own));
    assert!(pages(&beta).await.is_empty());
    alpha.call("Runtime.evaluate", json!({"expression": "1"}), Some(&session)).await.unwrap();

    // On to beta's: it leaves alpha (its session ends) and appears to beta.
    env.ext.share_with(env.own_tab, Some("beta")).await.unwrap();
    let detached = e2e::next_event(&mut alpha_events, "Target.detachedFromTarget", WITHIN).await;
    assert_eq!(detached.params["sessionId"], session.as_str());
    let destroyed = e2e::next_event(&mut alpha_events, "Target.targetDestroyed", WITHIN).await;
    assert_eq!(destroyed.params["targetId"], own.as_str());
    let refused_now = alpha.call("Runtime.evaluate", json!({"expression": "1"}), Some(&session)).await;
    assert_eq!(refused(refused_now).0, -32001, "its old session is gone");
    let attached = e2e::next_event(&mut beta_events, "Target.attachedToTarget", WITHIN).await;
    assert_eq!(attached.params["targetInfo"]["targetId"], own.as_str());
    assert!(pages(&alpha).await.is_empty());

    // Back to the person's own group: no grant sees it.
    env.ext.share_with(env.own_tab, None).await.unwrap();
    e2e::next_event(&mut beta_events, "Target.detachedFromTarget", WITHIN).await;
    assert!(pages(&beta).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grants_tab_stays_on_its_sites_whoever_starts_the_navigation() {
    let env = GrantEnv::start().await;
    let (alpha, mut events) = env.client(&env.key(&env.alpha)).await;
    let (home, elsewhere) = (env.fixtures.url(), env.fixtures.alt_url());
    let other_host = elsewhere.trim_start_matches("http://").to_string();
    let start = format!("{home}/form.html");
    let (_, session) = open(&alpha, &mut events, &start).await;
    let deadline = tokio::time::Instant::now() + WITHIN;
    while location(&alpha, &session).await != start {
        assert!(tokio::time::Instant::now() < deadline, "the grant's tab never reached {start}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The client's own navigation: refused at once, the grant named.
    let (_, message) =
        refused(alpha.call("Page.navigate", json!({"url": format!("{elsewhere}/echo?goto")}), Some(&session)).await);
    assert!(message.contains("the grant 'alpha' may not go to") && message.contains(&home), "{message}");
    let created = alpha.call("Target.createTarget", json!({"url": format!("{elsewhere}/echo?new")}), None).await;
    assert!(refused(created).1.contains("grant 'alpha'"));

    // What the page starts, whoever makes it: each is held and refused.
    let tries = [
        format!("location = '{elsewhere}/echo?location'"),
        format!(
            "document.body.insertAdjacentHTML('beforeend', '<a id=l href=\"{elsewhere}/echo?link\">x</a>'); document.getElementById('l').click()"
        ),
        format!(
            "document.body.insertAdjacentHTML('beforeend', '<form id=f method=post action=\"{elsewhere}/echo?post\"></form>'); document.getElementById('f').submit()"
        ),
        format!("location = '{home}/redirect?to=' + encodeURIComponent('{elsewhere}/echo?redirected')"),
        format!(
            "document.head.insertAdjacentHTML('beforeend', '<meta http-equiv=refresh content=\"0;url={elsewhere}/echo?meta\">')"
        ),
    ];
    for (n, expression) in tries.iter().enumerate() {
        alpha.call("Runtime.evaluate", json!({"expression": expression}), Some(&session)).await.unwrap();
        let recorded = refusals(&env, n + 1).await;
        assert_eq!(recorded[0].grant.as_deref(), Some("alpha"), "{recorded:?}");
        assert_eq!(location(&alpha, &session).await, start, "the tab stays where it was: {expression}");
    }
    // A popup to the other site: its first request may leave before the
    // relay can hold the new tab, but the tab is closed before the grant's
    // client is shown it.
    let tabs = env.ext.tabs().len();
    let popup = format!("window.open('{elsewhere}/index.html?popup') && true");
    alpha.call("Runtime.evaluate", json!({"expression": popup, "userGesture": true}), Some(&session)).await.unwrap();
    let recorded = refusals(&env, tries.len() + 1).await;
    assert!(recorded[0].summary.starts_with("closed a popup at"), "{recorded:?}");
    let deadline = tokio::time::Instant::now() + WITHIN;
    while env.ext.tabs().len() != tabs {
        assert!(tokio::time::Instant::now() < deadline, "the popup was not closed: {:?}", env.ext.tabs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(pages(&alpha).await.len(), 1, "the grant's client was never shown the popup");
    while let Ok(event) = events.try_recv() {
        assert!(
            event.method != "Target.attachedToTarget"
                || event.params["targetInfo"]["url"].as_str().is_some_and(|u| u.starts_with(&home)),
            "{event:?}"
        );
    }

    // The redirect's first leg went to the grant's own site; nothing the
    // grant's tab was refused reached the other one.
    assert_eq!(env.fixtures.requests_to(&format!("127.0.0.1:{}", env.fixtures.addr.port()), "/redirect").len(), 1);
    let reached = env.fixtures.requests_to(&other_host, "/echo");
    assert!(reached.is_empty(), "{reached:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_reads_and_sets_only_its_sites_cookies() {
    let env = GrantEnv::start().await;
    let (home, elsewhere) = (env.fixtures.url(), env.fixtures.alt_url());
    let (person, _) = env.client(&env.person_key()).await;
    let own = env.ext.target_id(env.own_tab).unwrap();
    let attached = person.call("Target.attachToTarget", json!({"targetId": own, "flatten": true}), None).await.unwrap();
    let session = attached["sessionId"].as_str().unwrap();
    for (url, name) in [(&home, "mine"), (&elsewhere, "theirs")] {
        let cookie = json!({"name": name, "value": "1", "url": format!("{url}/")});
        person.call("Network.setCookie", cookie, Some(session)).await.unwrap();
    }
    let (alpha, mut events) = env.client(&env.key(&env.alpha)).await;
    let (_, page) = open(&alpha, &mut events, &format!("{home}/index.html")).await;
    let names = |answer: Value| -> Vec<String> {
        let mut names: Vec<String> =
            answer["cookies"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_string()).collect();
        names.sort();
        names
    };
    assert_eq!(names(alpha.call("Network.getAllCookies", json!({}), Some(&page)).await.unwrap()), ["mine"]);
    assert_eq!(names(alpha.call("Storage.getCookies", json!({}), None).await.unwrap()), ["mine"]);
    let asked = json!({"urls": [format!("{elsewhere}/"), format!("{home}/")]});
    assert_eq!(names(alpha.call("Network.getCookies", asked, Some(&page)).await.unwrap()), ["mine"]);
    let (_, set) = refused(
        alpha
            .call("Network.setCookie", json!({"name": "x", "value": "1", "url": format!("{elsewhere}/")}), Some(&page))
            .await,
    );
    assert!(set.contains("grant 'alpha'"), "{set}");
    let delete = alpha
        .call("Network.deleteCookies", json!({"name": "theirs", "url": format!("{elsewhere}/")}), Some(&page))
        .await;
    assert!(refused(delete).1.contains("grant 'alpha'"));
    assert!(refused(alpha.call("Network.clearBrowserCookies", json!({}), Some(&page)).await).1.contains("clear"));
    // The person still has both, untouched.
    let all = person.call("Network.getAllCookies", json!({}), Some(session)).await.unwrap();
    assert_eq!(names(all), ["mine", "theirs"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_or_expiring_a_grant_closes_its_clients_at_once_and_its_key_then_gets_401() {
    use futures_util::StreamExt as _;
    let env = GrantEnv::start().await;
    let book = GrantBook::new(StateDir::at(env.state.path()));
    let dial = |key: &Token| format!("ws://{}/cdp?token={}", env.server.addr, key.as_str());
    let (mut socket, _) = tokio_tungstenite::connect_async(dial(&env.key(&env.alpha))).await.unwrap();
    let (mut other, _) = tokio_tungstenite::connect_async(dial(&env.key(&env.beta))).await.unwrap();

    book.revoke(&env.token, "alpha").unwrap();
    env.server.lent.reload();
    let (code, reason) = e2e::close_frame_of(&mut socket, Duration::from_secs(1)).await.expect("a close frame");
    assert_eq!(code, 1008);
    assert!(reason.contains("grant 'alpha' was revoked"), "{reason}");
    let version = format!("http://{}/json/version?token={}", env.server.addr, env.key(&env.alpha).as_str());
    assert_eq!(http_get(&version).await.unwrap().0, 401);
    // The other grant's client is untouched.
    use futures_util::SinkExt as _;
    let ping = r#"{"id":1,"method":"Target.getTargets"}"#;
    other.send(tokio_tungstenite::tungstenite::Message::Text(ping.into())).await.unwrap();
    let answer = tokio::time::timeout(WITHIN, other.next()).await.unwrap().unwrap().unwrap();
    assert!(answer.to_text().unwrap().contains("targetInfos"), "{answer:?}");

    // A grant that expires: its client is closed with that reason.
    let mut timed = new_grant("brief", Sites::any());
    timed.expires_in = Some(Duration::from_secs(2));
    let brief = book.add(&env.token, timed).unwrap();
    env.server.lent.reload();
    let (mut socket, _) = tokio_tungstenite::connect_async(dial(&env.key(&brief))).await.unwrap();
    let (code, reason) = e2e::close_frame_of(&mut socket, Duration::from_secs(10)).await.expect("a close frame");
    assert_eq!((code, reason.contains("grant 'brief' expired")), (1008, true), "{reason}");
    let version = format!("http://{}/json/version?token={}", env.server.addr, env.key(&brief).as_str());
    let (status, body) = http_get(&version).await.unwrap();
    assert_eq!(status, 401);
    assert!(body.contains("'brief' has expired"), "{body}");
}
