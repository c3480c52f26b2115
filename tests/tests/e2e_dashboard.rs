//! The dashboard end to end: real Chromium with the real extension sharing
//! a tab, the managed profile running, a real Playwright script on the
//! shared tab, and the dashboard opened through its login link in another
//! real headless Chromium. The page lists the managed profile's tab and the
//! shared tab with its client; its live view changes when the page does;
//! its activity shows the script's navigation and click, and never the
//! password it typed; its Disconnect button closes the script's socket, and
//! its Stop sharing button makes the extension let the tab go, and its Stop
//! browser button stops the managed Chrome.
//!
//! The dashboard's session is its page's alone: a CDP client of the
//! person's Chrome finds nothing in its cookies that opens it.
//!
//! With `DASHBOARD_SCREENSHOT=<path>` the test also saves the dashboard as
//! a PNG there (`scripts/screenshot-dashboard.sh` makes docs/dashboard.png).

use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use cdp_client::CdpClient;
use e2e::chromium::Chromium;
use e2e::control_env::eventually;
use e2e::extension_env::ExtensionEnv;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

/// The dashboard page in its own headless Chromium, driven over that
/// browser's own port (the test's eyes and hands).
struct Dashboard {
    _chrome: Chromium,
    client: CdpClient,
    session: String,
}

impl Dashboard {
    async fn open(link: &str) -> anyhow::Result<Self> {
        let chrome = Chromium::launch(&["--window-size=1280,900".into()], link)?;
        let client = CdpClient::connect(&chrome.ws_url).await?.with_timeout(Duration::from_secs(20));
        let (_, session) = e2e::attach_first_page(&client).await?;
        Ok(Self { _chrome: chrome, client, session })
    }

    /// An expression's value in the dashboard page.
    async fn eval(&self, expression: &str) -> Value {
        self.try_eval(expression).await.unwrap_or_else(|e| panic!("{expression}: {e}"))
    }

    async fn try_eval(&self, expression: &str) -> Result<Value, cdp_client::CdpError> {
        let result = self
            .client
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
                Some(&self.session),
            )
            .await?;
        Ok(result["result"]["value"].clone())
    }

    /// Waits until `expression` is truthy in the dashboard. An evaluation
    /// that fails (the page is between two documents, after the sign-in
    /// link) is not yet.
    async fn until(&self, what: &str, expression: &str) -> Value {
        eventually(what, Duration::from_secs(20), || async {
            let value = self.try_eval(expression).await.ok()?;
            (!value.is_null() && value != json!(false) && value != json!("")).then_some(value)
        })
        .await
    }

    /// The colour of the middle of the live view's current frame.
    async fn view_middle(&self) -> Value {
        self.eval(
            "(() => { const img = document.getElementById('view');
               if (!img.classList.contains('on') || !img.complete || !img.naturalWidth) return null;
               const canvas = document.createElement('canvas');
               canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
               const g = canvas.getContext('2d'); g.drawImage(img, 0, 0);
               const d = g.getImageData(canvas.width >> 1, canvas.height >> 1, 1, 1).data;
               return [d[0], d[1], d[2]]; })()",
        )
        .await
    }
}

/// The `fetch` options of a request the dashboard's page makes: its
/// session, from its tab's `sessionStorage`, in its header.
const SESSION_HEADERS: &str = "{headers: {'x-browser-relay-session': sessionStorage.getItem('browserRelaySession')}}";

fn is_red(rgb: &Value) -> bool {
    let c = |i: usize| rgb[i].as_i64().unwrap_or(-1);
    c(0) > 200 && c(1) < 60 && c(2) < 60
}

fn is_white(rgb: &Value) -> bool {
    (0..3).all(|i| rgb[i].as_i64().unwrap_or(0) > 230)
}

#[tokio::test]
async fn the_dashboard_shows_both_drivers_watches_a_tab_and_disconnects_a_client() {
    let (env, _index) = ExtensionEnv::sharing_index().await.expect("the extension shares the index tab");
    let shared = env.server().relay.shared_tabs()[0].target_id.clone();

    // The managed profile, with a tab of its own.
    env.control.ok("POST", "/start", Some(json!({"profile": "managed"}))).await;
    let opened = env
        .control
        .ok(
            "POST",
            "/tabs/open",
            Some(json!({"profile": "managed", "url": format!("{}/form.html", env.fixtures.url())})),
        )
        .await;
    let managed_tab = opened["targetId"].as_str().unwrap().to_string();

    // A Playwright script on the shared tab: it signs in (a password).
    let (mut script, _temp) = e2e::node_command("dashboard_client.mjs").unwrap();
    script.envs(env.node_env()).stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut script = script.spawn().expect("node runs");
    let mut said = BufReader::new(script.stdout.take().unwrap()).lines();
    let mut tell = script.stdin.take().unwrap();
    let mut next_line = async || {
        tokio::time::timeout(Duration::from_secs(60), said.next_line()).await.expect("the script said nothing").unwrap()
    };
    assert_eq!(next_line().await.as_deref(), Some("ready"));

    // The extension's options page links to the dashboard.
    let options = e2e::extension_env::open_loaded_page(
        &env.chrome.ws_url,
        &format!("chrome-extension://{}/options.html", env.id),
    )
    .await
    .expect("the options page opens");
    let dashboard_url = format!("{}/ui", env.server().control_url().unwrap());
    eventually("the options page's dashboard link", Duration::from_secs(20), || async {
        let link = options
            .client
            .call(
                "Runtime.evaluate",
                json!({"expression": "document.getElementById('dashboard-line').hidden ? null : document.getElementById('dashboard').href", "returnByValue": true}),
                Some(&options.session),
            )
            .await
            .ok()?;
        (link["result"]["value"] == json!(dashboard_url)).then_some(())
    })
    .await;
    options.client.call("Target.closeTarget", json!({"targetId": options.target}), None).await.unwrap();

    // The dashboard, through its one-time link.
    let link = env.control.ok("POST", "/ui/login-link", None).await["url"].as_str().unwrap().to_string();
    let dashboard = Dashboard::open(&link).await.expect("the dashboard opens");
    dashboard.until("the dashboard itself (not its login page)", "document.getElementById('profiles') !== null").await;

    // Both drivers: the managed profile's tab, the shared tab marked and its client.
    let managed_row =
        format!("document.querySelector('[data-profile=managed] [data-tab=\"{managed_tab}\"]')?.textContent");
    let row = dashboard.until("the managed profile's tab", &managed_row).await;
    assert!(row.as_str().unwrap().contains("Fixture Form"), "{row}");
    let shared_row = format!("document.querySelector('[data-profile=chrome] [data-tab=\"{shared}\"]')?.textContent");
    let row = dashboard
        .until(
            "the shared tab with its client",
            &format!("(({shared_row}) || '').includes('Playwright') && ({shared_row})"),
        )
        .await;
    assert!(row.as_str().unwrap().starts_with("shared") && row.as_str().unwrap().contains("Fixture Sign-in"), "{row}");
    // Its icon, as Chrome shows it in the tab strip, loaded (the page's CSP
    // lets it in) from the site.
    let icon = dashboard
        .until(
            "the shared tab's icon, loaded",
            &format!(
                "(() => {{ const i = document.querySelector('[data-tab=\"{shared}\"] img.favicon'); \
                 return i && i.complete && i.naturalWidth > 0 ? i.src : null; }})()"
            ),
        )
        .await;
    assert_eq!(icon, json!(format!("{}/icon.png", env.fixtures.url())));
    let clients = dashboard
        .until(
            "the script in the clients table",
            "[...document.querySelectorAll('#clients tbody tr')].map(r => r.textContent).join('\\n')",
        )
        .await;
    assert!(clients.as_str().unwrap().contains("Playwright/"), "{clients}");

    // The live view of the shared tab: white, then red when the page turns red.
    dashboard.eval(&format!("document.querySelector('[data-watch=\"{shared}\"]').click()")).await;
    let first = eventually("a first frame", Duration::from_secs(20), || async {
        let rgb = dashboard.view_middle().await;
        (!rgb.is_null()).then_some(rgb)
    })
    .await;
    assert!(is_white(&first), "the sign-in page is white: {first}");
    tell.write_all(b"click\n").await.unwrap();
    assert_eq!(next_line().await.as_deref(), Some("clicked"));
    eventually("the live view to show the page turned red", Duration::from_secs(20), || async {
        is_red(&dashboard.view_middle().await).then_some(())
    })
    .await;

    // The activity: the script's navigation and click on the shared tab, with
    // who and when; the password it typed is nowhere.
    let activity = dashboard
        .until(
            "the script's click in the activity",
            "(() => { const t = document.querySelector('#activity tbody').innerText;
               return t.includes('left click at') && t.includes('signin.html') ? t : null; })()",
        )
        .await;
    let activity = activity.as_str().unwrap();
    assert!(
        activity.lines().any(|l| l.contains("Playwright/") && l.contains("navigate to") && l.contains("signin.html")),
        "{activity}"
    );
    assert!(activity.contains("type 21 characters"), "the password's length only: {activity}");
    let record = env.server().activity.read(&activity::Query::default());
    let text = serde_json::to_string(&record).unwrap();
    assert!(!text.contains("hunter2"), "the password is not in the record");
    let click = record.iter().find(|e| e.summary.starts_with("left click")).expect("the click is recorded");
    assert_eq!(click.tab.as_deref(), Some(shared.as_str()));
    assert!(click.client.starts_with("Playwright/") && click.client_id.is_some() && click.at > 0, "{click:?}");

    if let Some(path) = std::env::var_os("DASHBOARD_SCREENSHOT") {
        let shot = dashboard
            .client
            .call(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true}),
                Some(&dashboard.session),
            )
            .await
            .unwrap();
        let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
        std::fs::write(&path, png).unwrap();
    }

    // Its Disconnect button: the script's socket closes.
    let client_id = env.server().relay.clients().iter().find(|c| c.name.starts_with("Playwright/")).unwrap().id;
    dashboard.eval(&format!("document.querySelector('[data-disconnect=\"{client_id}\"]').click()")).await;
    assert_eq!(next_line().await.as_deref(), Some("disconnected"));
    let status = tokio::time::timeout(Duration::from_secs(20), script.wait()).await.expect("the script ends").unwrap();
    assert!(status.success(), "{status}");
    dashboard.until("the client gone from the table", "document.getElementById('no-clients').hidden === false").await;

    // Its Stop sharing button: the extension lets the tab go, as the user's own click would.
    let signin = format!("{}/signin.html", env.fixtures.url());
    env.wait_for_group(&signin, true, Duration::from_secs(20)).await.expect("the shared tab is in the group");
    dashboard.eval(&format!("document.querySelector('[data-unshare=\"{shared}\"]').click()")).await;
    env.wait_for_tabs(0, Duration::from_secs(20)).await.expect("the tab is no longer shared");
    env.wait_for_group(&signin, false, Duration::from_secs(20)).await.expect("the tab left the group");
    dashboard
        .until(
            "the dashboard to show no shared tab",
            "document.querySelector('[data-profile=chrome]').textContent.includes('No tab is shared')",
        )
        .await;

    // Its Stop browser button: the managed profile's Chrome stops.
    dashboard.eval("document.querySelector('[data-stop-profile=managed]').click()").await;
    eventually("the managed browser to stop", Duration::from_secs(20), || async {
        let status = env.control.ok("GET", "/?profile=managed", None).await;
        (status["running"] == json!(false)).then_some(())
    })
    .await;
    dashboard.until("the dashboard to show it stopped", "!document.querySelector('[data-stop-profile=managed]')").await;
}

/// Makes the grant `new` (as `grant add` does, and `serve` is told), and
/// connects a CDP client with its key.
async fn lend(env: &ExtensionEnv, new: grants::NewGrant) -> CdpClient {
    let book = grants::GrantBook::new(state_dir::StateDir::at(env.state.path()));
    let grant = book.add(&env.token, new).unwrap();
    env.server().lent.reload();
    let key = grant.key(&env.token, grants::Door::Cdp);
    let url = format!("ws://127.0.0.1:{}/cdp?token={}", env.port, key.as_str());
    CdpClient::connect(&url).await.unwrap().with_timeout(Duration::from_secs(20))
}

#[tokio::test]
async fn the_dashboard_lists_the_grants_with_their_tabs_and_revokes_one() {
    let (env, _index) = ExtensionEnv::sharing_index().await.expect("the extension shares the index tab");
    let new = grants::NewGrant {
        name: grants::GrantName::parse("research").unwrap(),
        sites: grants::Sites::parse_list(&env.fixtures.url()).unwrap(),
        color: None,
        expires_in: Some(Duration::from_secs(3600)),
        evaluate: false,
        ask: vec![grants::AskKind::Submit],
    };
    // The grant's client opens a tab of its own.
    let client = lend(&env, new).await;
    let page = format!("{}/form.html?research", env.fixtures.url());
    let created = client.call("Target.createTarget", json!({"url": page}), None).await.unwrap();
    let target = created["targetId"].as_str().unwrap().to_string();
    client.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}), None).await.unwrap();

    let link = env.control.ok("POST", "/ui/login-link", None).await["url"].as_str().unwrap().to_string();
    let dashboard = Dashboard::open(&link).await.expect("the dashboard opens");
    dashboard.until("the dashboard itself (not its login page)", "document.getElementById('grants') !== null").await;
    let id = env.server().relay.clients().iter().find(|c| c.grant.as_deref() == Some("research")).unwrap().id;
    let row = dashboard
        .until(
            "the grant with its tab and client",
            &format!(
                "(() => {{ const r = document.querySelector('[data-grant=research]');
                   return r && r.textContent.includes('#{id}') ? r.textContent : null; }})()"
            ),
        )
        .await;
    let row = row.as_str().unwrap();
    assert!(row.contains(&env.fixtures.url().to_string()) && row.contains("no evaluate"), "{row}");
    assert!(row.contains("in 59m") || row.contains("in 1h"), "its expiry: {row}");
    let badge = dashboard
        .until(
            "the tab marked as the grant's",
            &format!("document.querySelector('[data-grant-of=\"{target}\"]')?.textContent"),
        )
        .await;
    assert_eq!(badge, json!("research"));
    let clients = dashboard.until("the grant's client", "document.querySelector('#clients tbody').textContent").await;
    assert!(clients.as_str().unwrap().contains("research"), "{clients}");

    // Revoke: the grant's client is closed, and the grant is gone.
    let mut events = client.take_events().unwrap();
    dashboard.eval("document.querySelector('[data-revoke=research]').click()").await;
    let closed = tokio::time::timeout(Duration::from_secs(5), async { while events.recv().await.is_some() {} }).await;
    assert!(closed.is_ok() && client.is_closed(), "the grant's client is closed at once");
    dashboard.until("no grant left", "document.getElementById('no-grants').hidden === false").await;
    let record = env.server().activity.read(&activity::Query { grant: Some("research".into()), ..Default::default() });
    assert!(
        record.iter().any(|e| e.source == activity::Source::Dashboard && e.summary == "revoke the grant"),
        "{record:?}"
    );
    let listed = dashboard
        .until(
            "the revoke in the activity",
            "(() => { const t = document.querySelector('#activity tbody').innerText;
               return t.includes('revoke the grant') ? t : null; })()",
        )
        .await;
    let revoke = listed.as_str().unwrap().lines().find(|l| l.contains("revoke the grant")).unwrap().to_string();
    assert!(revoke.contains("dashboard [grant research]"), "{revoke}");
}

/// A tab's `expression`'s value (a promise's, awaited), through `client`.
async fn in_tab(client: &CdpClient, session: &str, expression: &str) -> Value {
    let params = json!({"expression": expression, "returnByValue": true, "awaitPromise": true});
    let answer = client.call("Runtime.evaluate", params, Some(session)).await.unwrap();
    answer["result"]["value"].clone()
}

/// Navigates a grant's tab to `url` and waits for its load.
async fn load_in_tab(client: &CdpClient, session: &str, url: &str) {
    client.call("Page.navigate", json!({"url": url}), Some(session)).await.unwrap();
    let loaded = format!("location.href == {} && document.readyState == 'complete'", json!(url));
    eventually(&format!("{url} to load"), Duration::from_secs(20), || async {
        (in_tab(client, session, &loaded).await == json!(true)).then_some(())
    })
    .await;
}

/// The person in the loop, on the dashboard: a grant that asks before a
/// form goes (`ask: submit`) has its order held, and the dashboard shows
/// the question at the top within moments of it being asked (its long poll
/// wakes; the overview's poll has no questions), with the grant's badge,
/// what it wants, the tab and a countdown. Deny: the POST never reaches
/// the site. Allow: the next one does. Allow on this site: that one and
/// the next go, the next without a question. A tab the grant hands over
/// shows who needs the person and why; Show the tab watches it, Done gives
/// it back. Each answer is in the activity record once.
#[tokio::test]
async fn the_dashboard_asks_the_person_and_a_denied_form_never_reaches_the_site() {
    let (env, _index) = ExtensionEnv::sharing_index().await.expect("the extension shares the index tab");
    let new = grants::NewGrant {
        name: grants::GrantName::parse("shop").unwrap(),
        sites: grants::Sites::parse_list(&env.fixtures.url()).unwrap(),
        color: None,
        expires_in: None,
        evaluate: true,
        ask: vec![grants::AskKind::Submit],
    };
    let client = lend(&env, new).await;
    let order = format!("{}/order.html", env.fixtures.url());
    let created = client.call("Target.createTarget", json!({"url": "about:blank"}), None).await.unwrap();
    let target = created["targetId"].as_str().unwrap().to_string();
    let attached =
        client.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}), None).await.unwrap();
    let session = attached["sessionId"].as_str().unwrap().to_string();
    load_in_tab(&client, &session, &order).await;
    let site = env.fixtures.url().trim_start_matches("http://").to_string();
    let orders = || env.fixtures.requests_to(&site, "/echo?order").len();

    let link = env.control.ok("POST", "/ui/login-link", None).await["url"].as_str().unwrap().to_string();
    let dashboard = Dashboard::open(&link).await.expect("the dashboard opens");
    dashboard
        .until("the dashboard itself (not its login page)", "document.getElementById('asks-section') !== null")
        .await;
    dashboard.until("the page's first look at the questions", "document.getElementById('asks-section').hidden").await;
    // The page keeps its session before it asks anything (the requests
    // below are made with it).
    dashboard.until("the page's session kept", "sessionStorage.getItem('browserRelaySession') !== null").await;
    assert_eq!(dashboard.eval("document.body.children[1].id").await, json!("asks-section"), "first under the header");

    // The long poll itself (with the page's session, as the page asks):
    // with the version it has, it waits...
    let version = dashboard
        .eval(&format!("fetch('/ui/api/asks', {SESSION_HEADERS}).then(r => r.json()).then(a => a.version)"))
        .await;
    dashboard
        .eval(&format!(
            "window.waited = null; const started = Date.now();
             fetch('/ui/api/asks?wait={version}', {SESSION_HEADERS}).then(r => r.json())
               .then(asks => {{ window.waited = {{asks, after: Date.now() - started}}; }}); true"
        ))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(dashboard.eval("window.waited").await, Value::Null, "nothing changed: the long poll waits");

    // ...and answers when the grant's form is held; the page shows it.
    let asked = std::time::Instant::now();
    in_tab(&client, &session, "document.getElementById('buy').click(); true").await;
    let question = dashboard
        .until(
            "the question on the dashboard",
            "document.querySelector('#asks-section:not([hidden]) [data-question]')?.innerText",
        )
        .await;
    assert!(asked.elapsed() < Duration::from_secs(5), "shown at once, not at the next 25 s: {:?}", asked.elapsed());
    let question = question.as_str().unwrap();
    for part in ["shop wants to submit a form to 127.0.0.1", "Fixture Order", "left", "Allow", "Deny"] {
        assert!(question.contains(part), "{part} in {question}");
    }
    assert!(question.contains("Allow on this site for 10 min"), "{question}");
    let waited = dashboard.until("the long poll's answer", "window.waited").await;
    assert_eq!(waited["asks"]["questions"][0]["kind"], "submit", "{waited}");
    assert!(waited["after"].as_u64().unwrap() >= 1000, "it waited for the question: {waited}");
    let badge = dashboard
        .eval("(() => { const b = document.querySelector('[data-question] [data-ask-grant]'); return [b.textContent, b.style.backgroundColor]; })()")
        .await;
    assert_eq!(badge[0], "shop");
    assert!(!badge[1].as_str().unwrap().is_empty(), "in the grant's colour: {badge}");
    assert_eq!(dashboard.eval("document.title").await, "(1) Browser Relay");
    assert_eq!(orders(), 0, "the order waits for the person");

    // Deny: the question goes, and the order never reaches the site.
    dashboard.eval("document.querySelector('[data-question] [data-answer=deny]').click()").await;
    dashboard.until("the questions to go", "document.getElementById('asks-section').hidden").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(orders(), 0, "the denied order never reached the site");
    assert_eq!(in_tab(&client, &session, "location.pathname").await, "/order.html");

    // Allow: the next order arrives.
    in_tab(&client, &session, "document.getElementById('buy').click(); true").await;
    dashboard.until("the second question", "document.querySelector('[data-question] [data-answer=allow]')").await;
    dashboard.eval("document.querySelector('[data-question] [data-answer=allow]').click()").await;
    eventually("the allowed order to arrive", Duration::from_secs(20), || async { (orders() == 1).then_some(()) })
        .await;
    dashboard.until("the questions to go", "document.getElementById('asks-section').hidden").await;

    // Allow on this site: this order goes, and the next asks nothing.
    load_in_tab(&client, &session, &order).await;
    in_tab(&client, &session, "document.getElementById('buy').click(); true").await;
    dashboard.until("the third question", "document.querySelector('[data-question] [data-answer=allow-site]')").await;
    dashboard.eval("document.querySelector('[data-question] [data-answer=allow-site]').click()").await;
    eventually("the order allowed for the site", Duration::from_secs(20), || async { (orders() == 2).then_some(()) })
        .await;
    load_in_tab(&client, &session, &order).await;
    in_tab(&client, &session, "document.getElementById('buy').click(); true").await;
    eventually("the next order, unasked", Duration::from_secs(20), || async { (orders() == 3).then_some(()) }).await;
    assert!(env.server().relay.questions().is_empty(), "allowed on this site for 10 minutes");

    // A handoff: who needs the person and why, the tab watched, Done.
    let shop = env.server().lent.named("shop").unwrap();
    let relay = env.server().relay.clone();
    let handed = target.clone();
    let handing =
        tokio::spawn(
            async move { relay.hand_over(&handed, Some(&shop), "log in, please", Duration::from_secs(60)).await },
        );
    let row = format!("document.querySelector('[data-handoff=\"{target}\"]')?.innerText");
    let handoff = dashboard.until("the handoff on the dashboard", &row).await;
    assert!(handoff.as_str().unwrap().contains("shop needs you: log in, please"), "{handoff}");
    dashboard.eval(&format!("document.querySelector('[data-show=\"{target}\"]').click()")).await;
    dashboard
        .until("the handed-over tab in the live view", "document.getElementById('view').classList.contains('on')")
        .await;
    assert!(!handing.is_finished(), "the tab is the person's until Done");
    dashboard.eval(&format!("document.querySelector('[data-done=\"{target}\"]').click()")).await;
    let ended = tokio::time::timeout(Duration::from_secs(20), handing).await.expect("Done ends the handoff");
    assert_eq!(ended.unwrap().unwrap(), relay_engine::HandoffEnd::Done);
    dashboard.until("the handoff to go", "document.getElementById('asks-section').hidden").await;
    assert_eq!(dashboard.eval("document.title").await, "Browser Relay");

    // Each answer recorded once, by the relay, as given on the dashboard.
    let record = env.server().activity.read(&activity::Query { grant: Some("shop".into()), ..Default::default() });
    let said: Vec<&str> = record.iter().map(|e| e.summary.as_str()).collect();
    for answer in ["denied", "allowed", "allowed for this site for 10 minutes"] {
        let told = format!("{answer} in the dashboard: shop wants to submit");
        assert_eq!(said.iter().filter(|s| s.starts_with(&told)).count(), 1, "{told} once in {said:#?}");
    }
    assert!(said.contains(&"the person gave the tab back (Done, in the dashboard)"), "{said:#?}");
    assert!(record.iter().all(|e| e.source != activity::Source::Dashboard), "not twice: {said:#?}");
}

/// One raw HTTP/1.1 GET, as curl would send it: the status and the answer.
async fn raw_get(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    stream.write_all(format!("{request}\r\n").as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ =
        tokio::time::timeout(Duration::from_secs(10), tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut answer))
            .await;
    let answer = String::from_utf8_lossy(&answer).to_string();
    (answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), answer)
}

/// Issue 46, item 2: `Storage.getCookies` and `Network.getAllCookies`
/// hand any CDP client of the person's Chrome the cookies of the whole
/// profile, and the dashboard's session was one (`HttpOnly` keeps a cookie
/// from a page's script, not from CDP). The person opens the dashboard in
/// their own browser through its login link; a client with their CDP key,
/// on a shared tab, takes every cookie Chrome has for 127.0.0.1 and
/// replays them, as curl would, on the dashboard's API: 401, and the page
/// fetched with them holds no session. None of them is the dashboard's.
/// The person's dashboard tab goes on working with its session, which only
/// that tab holds: a reload keeps it, a tab opened on the dashboard's
/// address without a login says how to log in, and Log out ends it.
#[tokio::test]
async fn a_cdp_client_of_the_persons_browser_finds_no_dashboard_session_in_its_cookies() {
    let (env, _index) = ExtensionEnv::sharing_index().await.expect("the extension shares the index tab");
    let shared = env.server().relay.shared_tabs()[0].target_id.clone();
    let control = env.server().control_url().unwrap();
    let control_addr = control.trim_start_matches("http://").to_string();

    // The person's dashboard, in their own Chrome (the test's hands open it),
    // in a window of its own: a tab opened beside a shared one would join
    // its group, shared.
    let person = env.open_dashboard_window().await.unwrap();
    let shown = format!("document.querySelector('[data-tab=\"{shared}\"]') !== null");
    eventually("the person's dashboard, showing the shared tab", Duration::from_secs(20), || async {
        let params = json!({"expression": shown, "returnByValue": true});
        // Between the login link and the page there is no document.
        let value = env.browser.call("Runtime.evaluate", params, Some(&person)).await.ok()?["result"]["value"].clone();
        (value == json!(true)).then_some(())
    })
    .await;
    let shared_now = env.server().relay.shared_tabs();
    assert!(shared_now.iter().all(|t| !t.url.contains("/ui")), "the dashboard's tab is not shared: {shared_now:?}");

    // A client with the person's CDP key, on the shared tab: every cookie.
    let key = browser_relay::cdp_key(&env.token);
    let url = format!("ws://127.0.0.1:{}/cdp?token={}", env.port, key.as_str());
    let client = CdpClient::connect(&url).await.unwrap().with_timeout(Duration::from_secs(20));
    let attached =
        client.call("Target.attachToTarget", json!({"targetId": shared, "flatten": true}), None).await.unwrap();
    let session = attached["sessionId"].as_str().unwrap().to_string();
    let mut cookies = client.call("Network.getAllCookies", json!({}), Some(&session)).await.unwrap()["cookies"].clone();
    let root = client.call("Storage.getCookies", json!({}), None).await.unwrap();
    cookies.as_array_mut().unwrap().extend(root["cookies"].as_array().unwrap().iter().cloned());
    let loopback: Vec<String> = cookies
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["domain"] == "127.0.0.1" || c["domain"] == "localhost")
        .map(|c| format!("{}={}", c["name"].as_str().unwrap(), c["value"].as_str().unwrap()))
        .collect();

    // Replayed, as curl would: the API says 401, and the page holds no session.
    let jar = loopback.join("; ");
    for path in ["/ui/api/overview", "/ui/api/asks", &format!("/ui/api/view?targetId={shared}")] {
        let (status, answer) = raw_get(&control_addr, path, &[("Cookie", &jar)]).await;
        assert_eq!(status, 401, "{path} with every cookie of 127.0.0.1 ({loopback:?}): {answer}");
    }
    let (status, page) = raw_get(&control_addr, "/ui", &[("Cookie", &jar)]).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(r#"name="session" content="""#), "the page fetched with them holds no session: {page}");
    assert!(loopback.iter().all(|c| !c.starts_with("browser_relay_ui")), "a cookie of the dashboard's: {loopback:?}");

    // The person's dashboard tab goes on: its session, only in that tab, in its header.
    let token = in_tab(&env.browser, &person, "sessionStorage.getItem('browserRelaySession')").await;
    let token = token.as_str().expect("the dashboard tab's session").to_string();
    assert!(loopback.iter().all(|c| !c.contains(&token)), "{loopback:?}");
    assert_eq!(in_tab(&env.browser, &person, "location.href").await, json!(format!("{control}/ui")), "no code left");
    let (status, overview) = raw_get(&control_addr, "/ui/api/overview", &[("x-browser-relay-session", &token)]).await;
    assert_eq!(status, 200, "{overview}");

    // A reload of that tab keeps its session; a tab opened on the dashboard's
    // address without a login says how to log in; Log out ends the session.
    let page_says = |session: String, expression: String| {
        let browser = &env.browser;
        async move {
            let params = json!({"expression": expression, "returnByValue": true});
            let value = browser.call("Runtime.evaluate", params, Some(&session)).await.ok()?["result"]["value"].clone();
            value.as_str().filter(|s| !s.is_empty()).map(str::to_string)
        }
    };
    in_tab(&env.browser, &person, "window.beforeReload = true").await;
    env.browser.call("Page.reload", json!({}), Some(&person)).await.unwrap();
    let status_line =
        "!window.beforeReload && document.getElementById('status').textContent.startsWith('updated') && location.href";
    eventually("the reloaded dashboard, updated", Duration::from_secs(20), || {
        page_says(person.clone(), status_line.into())
    })
    .await;
    let signed_out =
        "document.getElementById('signed-out').hidden ? '' : document.getElementById('signed-out').innerText";
    let other = env
        .browser
        .call("Target.createTarget", json!({"url": format!("{control}/ui"), "newWindow": true}), None)
        .await
        .unwrap();
    let other = env
        .browser
        .call("Target.attachToTarget", json!({"targetId": other["targetId"], "flatten": true}), None)
        .await
        .unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let says = eventually("a tab without a login to say how", Duration::from_secs(20), || {
        page_says(other.clone(), signed_out.into())
    })
    .await;
    assert!(says.contains("not logged in") && says.contains("browser-relay ui"), "{says}");
    in_tab(&env.browser, &person, "document.getElementById('logout').click(); true").await;
    let says = eventually("Log out", Duration::from_secs(20), || page_says(person.clone(), signed_out.into())).await;
    assert!(says.contains("Logged out") && says.contains("browser-relay ui"), "{says}");
    let (status, _) = raw_get(&control_addr, "/ui/api/overview", &[("x-browser-relay-session", &token)]).await;
    assert_eq!(status, 401, "the session ended");
    assert_eq!(in_tab(&env.browser, &person, "sessionStorage.length").await, json!(0), "and left the tab");
}
