//! The person in the loop with the real extension in real Chromium, the
//! real CLI and a real MCP server: a grant made with `--ask submit` has its
//! form held until the person answers in a terminal (the extension shows
//! the question meanwhile), and an agent's `browser_handoff` gives the tab
//! to the person (its group and badge say so) until `browser-relay done`.
//! Two ignored tests set up the docs' pictures of a question, on the
//! dashboard and as Chrome's notification (`scripts/screenshot-headed.sh
//! asking`, `… notification`).

use std::time::Duration;

use e2e::extension_env::ExtensionEnv;
use e2e::mcp_host::McpHost;
use e2e::serve_process::native_exe;
use serde_json::{Value, json};

const WITHIN: Duration = Duration::from_secs(20);

/// The next question to the person, from the relay (awaited, not polled).
async fn question(env: &ExtensionEnv) -> relay_engine::Question {
    let relay = &env.server().relay;
    let mut changed = relay.watch_asks();
    loop {
        if let Some(question) = relay.questions().into_iter().next() {
            return question;
        }
        tokio::time::timeout(WITHIN, changed.changed()).await.expect("no question within 20 s").unwrap();
    }
}

/// The ids of the extension's notifications showing now.
async fn notifications(env: &ExtensionEnv) -> Vec<String> {
    let shown = env.worker_eval("chrome.notifications.getAll().then(all => Object.keys(all))").await.unwrap();
    shown.as_array().unwrap().iter().map(|id| id.as_str().unwrap().to_string()).collect()
}

/// `browser-relay evaluate FN --grant shop`, run beside the test: an
/// agent's call that sends a form answers once the person has.
fn click_in_background(env: &ExtensionEnv, function: &str) -> tokio::task::JoinHandle<Result<String, String>> {
    let (env_cli, function) = (env.cli_command(), function.to_string());
    tokio::task::spawn_blocking(move || env_cli(&["evaluate", &function, "--grant", "shop"]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grants_form_waits_for_the_person_who_answers_in_a_terminal() {
    let (env, _index) = ExtensionEnv::sharing_index().await.expect("the extension, sharing a tab of the person's");
    env.keep_token();
    env.add_grant("shop", &["--sites", &env.fixtures.url(), "--ask", "submit"]);
    let listed = env.cli(&["grant", "list"]).unwrap();
    assert!(listed.contains("asks: submit"), "{listed}");
    let order = format!("{}/order.html", env.fixtures.url());
    env.cli(&["open", &order, "--grant", "shop"]).unwrap();
    let buy = "() => { document.getElementById('buy').click(); return 'sent' }";

    // The agent's click sends the form: it waits for the person, who sees
    // it in the browser and in a terminal.
    let clicking = click_in_background(&env, buy);
    let asked = question(&env).await;
    let notification = format!("ask-{}", asked.id);
    let deadline = tokio::time::Instant::now() + WITHIN;
    while !notifications(&env).await.contains(&notification) {
        assert!(tokio::time::Instant::now() < deadline, "the extension never showed the question");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let waiting = env.cli(&["asks"]).unwrap();
    assert!(waiting.contains("shop wants to submit a form to 127.0.0.1"), "{waiting}");
    let host = format!("127.0.0.1:{}", env.fixtures.addr.port());
    assert!(env.fixtures.requests_to(&host, "/echo?order").is_empty(), "held before it left");
    // The grant's own key answers nothing.
    let secret = env.token.clone();
    let shop = grants::GrantBook::new(state_dir::StateDir::at(env.state.path())).load(&secret).unwrap().remove(0);
    let port: u16 = env.server().control_url().unwrap().rsplit(':').next().unwrap().parse().unwrap();
    let as_shop = browser_relay::ControlClient::new(port, secret.clone())
        .as_grant("shop", shop.key(&secret, grants::Door::Control));
    let refused = as_shop.call("POST", &format!("/asks/{}", asked.id), &[], Some(&json!({"answer": "allow"}))).await;
    let refused = refused.unwrap_err().to_string();
    assert!(refused.contains("this route is the person's"), "a grant answers nothing: {refused}");
    env.cli(&["allow", &asked.id.to_string()]).unwrap();
    clicking.await.unwrap().expect("the agent's call answers once the person has");
    let title = env.cli(&["evaluate", "() => document.title", "--grant", "shop"]).unwrap();
    assert!(title.contains("echo POST"), "the form went: {title}");
    assert_eq!(env.fixtures.requests_to(&host, "/echo?order").len(), 1);
    let deadline = tokio::time::Instant::now() + WITHIN;
    while notifications(&env).await.contains(&notification) {
        assert!(tokio::time::Instant::now() < deadline, "answered, its notification stays");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // No: it never reaches the site, and the tab stays on the form.
    env.cli(&["navigate", &order, "--grant", "shop"]).unwrap();
    let clicking = click_in_background(&env, buy);
    let asked = question(&env).await;
    env.cli(&["deny", &asked.id.to_string()]).unwrap();
    clicking.await.unwrap().expect("the agent's call answers once the person has");
    let here = env.cli(&["evaluate", "() => location.pathname", "--grant", "shop"]).unwrap();
    assert!(here.contains("/order.html"), "{here}");
    assert_eq!(env.fixtures.requests_to(&host, "/echo?order").len(), 1, "the refused form never arrived");
    let record = env.cli(&["activity", "--grant", "shop"]).unwrap();
    assert!(record.contains("denied in the terminal: shop wants to submit a form"), "{record}");
    let again = env.cli(&["deny", &asked.id.to_string()]).unwrap_err();
    assert!(again.contains("answered already, or timed out"), "{again}");
}

/// The "done when": Playwright's click on a form's submit button,
/// through a grant that asks, sends nothing until `browser-relay allow`;
/// with `deny` nothing arrives and the page says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_playwright_click_on_submit_waits_for_allow_and_a_deny_sends_nothing() {
    let (env, _index) = ExtensionEnv::sharing_index().await.expect("the extension, sharing a tab of the person's");
    env.keep_token();
    let url = env.add_grant("shop", &["--sites", &env.fixtures.url(), "--ask", "submit"]);
    let mut pairs = env.node_env();
    pairs.push(("GRANT_URL", url));
    let script = tokio::spawn(async move { e2e::run_node("playwright_ask_submit.mjs", &pairs).await });
    let host = format!("127.0.0.1:{}", env.fixtures.addr.port());

    let asked = question(&env).await;
    assert_eq!(asked.kind, grants::AskKind::Submit);
    assert!(env.fixtures.requests_to(&host, "/echo?order").is_empty(), "held before it left");
    env.cli(&["allow", &asked.id.to_string()]).unwrap();

    let asked = loop {
        let next = question(&env).await;
        if next.id != asked.id {
            break next;
        }
    };
    env.cli(&["deny", &asked.id.to_string()]).unwrap();
    let out = script.await.unwrap().unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.contains("denied-navigation"), "{out}");
    assert_eq!(env.fixtures.requests_to(&host, "/echo?order").len(), 1, "the denied form never arrived");
    let record = env.cli(&["activity", "--grant", "shop"]).unwrap();
    assert!(record.contains("allowed in the terminal") && record.contains("denied in the terminal"), "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_hands_a_tab_to_the_person_over_mcp_until_done() {
    let (env, _index) = ExtensionEnv::sharing_index().await.expect("the extension, sharing a tab of the person's");
    env.keep_token();
    env.add_grant("helper", &["--sites", &env.fixtures.url()]);
    let signin = format!("{}/signin.html", env.fixtures.url());
    let control = env.server().control_url().unwrap();
    let mut command = std::process::Command::new(native_exe().unwrap());
    command
        .args(["mcp", "--grant", "helper", "--control-port", control.rsplit(':').next().unwrap()])
        .args(["--state-dir", &env.state.path().display().to_string()]);
    let mut host = McpHost::spawn(&mut command).unwrap().never_showing(env.token.as_str());
    host.initialize("e2e-asking").unwrap();
    let opened = host.call("browser_open", json!({"url": signin})).unwrap();
    assert!(!opened.is_error, "{}", opened.text);
    env.wait_for_group(&signin, true, WITHIN).await.unwrap();

    // The agent hands the tab over and waits (its call answers at Done).
    let handing = tokio::task::spawn_blocking(move || {
        let answer = host.call("browser_handoff", json!({"reason": "log in, please"}));
        (host, answer)
    });
    let mut changed = env.server().relay.watch_asks();
    tokio::time::timeout(WITHIN, changed.wait_for(|_| !env.server().relay.handoffs().is_empty()))
        .await
        .unwrap()
        .unwrap();
    // The person sees who needs them and why: the group's title, the badge.
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        let group = env.group_of(&signin).await.unwrap();
        if group["title"] == "helper needs you: log in, please" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the group never said so: {group}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(env.badge(&signin).await.unwrap(), "?");
    // Meanwhile the grant may not act in it, even from another agent command.
    let refused = env.cli(&["evaluate", "() => document.title", "--grant", "helper"]).unwrap_err();
    assert!(refused.contains("the person has this tab (helper handed it over: log in, please)"), "{refused}");
    let waiting = env.cli(&["asks"]).unwrap();
    assert!(waiting.contains("helper needs you: log in, please"), "{waiting}");

    // The person is done.
    env.cli(&["done"]).unwrap();
    let (mut host, answer) = handing.await.unwrap();
    let answer = answer.unwrap();
    assert!(!answer.is_error, "{}", answer.text);
    let back: Value = serde_json::from_str(&answer.text).unwrap();
    assert_eq!(back["ended"], "done", "{back}");
    assert_eq!(back["url"], signin.as_str(), "{back}");
    let page = back["snapshot"].as_str().unwrap_or_default();
    let sign_in = page.lines().find(|l| l.contains("button \"Sign in\""));
    assert!(sign_in.and_then(e2e::control_env::line_ref).is_some(), "the page now, with fresh refs: {back}");
    let deadline = tokio::time::Instant::now() + WITHIN;
    while env.group_of(&signin).await.unwrap()["title"] != "helper" {
        assert!(tokio::time::Instant::now() < deadline, "the group's title never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let title = host.call("browser_evaluate", json!({"fn": "() => document.title"})).unwrap();
    assert!(!title.is_error && title.text.contains("Fixture Sign-in"), "the tab is the agent's again: {}", title.text);
    host.close(Duration::from_secs(10)).unwrap();
}

// ---- the docs' pictures (scripts/screenshot-headed.sh) ----------------------

/// What the pictures show: the grant "shop" (asks before a form goes) has
/// opened the fixture's order form in its window and clicked Buy; the order
/// waits for the person, and the extension shows the question. The
/// question, the form's URL and the agent's waiting call.
async fn a_question_waits(
    env: &ExtensionEnv,
) -> (relay_engine::Question, String, tokio::task::JoinHandle<Result<String, String>>) {
    env.keep_token();
    env.add_grant("shop", &["--sites", &env.fixtures.url(), "--ask", "submit"]);
    let order = format!("{}/order.html", env.fixtures.url());
    env.cli(&["open", &order, "--grant", "shop"]).unwrap();
    let clicking = click_in_background(env, "() => { document.getElementById('buy').click(); return 'sent' }");
    let asked = question(env).await;
    let notification = format!("ask-{}", asked.id);
    let deadline = tokio::time::Instant::now() + WITHIN;
    while !notifications(env).await.contains(&notification) {
        assert!(tokio::time::Instant::now() < deadline, "the extension never showed the question");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    env.wait_for_group(&order, true, WITHIN).await.unwrap();
    (asked, order, clicking)
}

/// Moves the window of the tab whose URL starts with each prefix to
/// `[left, top, width, height]` and brings it to the front, in order.
async fn place_windows(env: &ExtensionEnv, places: &[(&str, [u32; 4])]) {
    for (prefix, [left, top, width, height]) in places {
        let placed = format!(
            "chrome.tabs.query({{}}).then(tabs => tabs.find(t => t.url.startsWith({prefix:?})))
               .then(t => chrome.windows.update(t.windowId, {{ left: {left}, top: {top}, width: {width},
                 height: {height}, state: 'normal', focused: true }})).then(w => w.id)"
        );
        env.worker_eval(&placed).await.unwrap_or_else(|e| panic!("the window of {prefix}: {e:#}"));
    }
}

/// Copies Xvfb's screen (the script's `XVFB_FRAME`) to `SCREENSHOT_XWD`,
/// once the windows have settled (their tab strips animate).
async fn take_the_frame(mode: &str) {
    let frame = std::env::var("XVFB_FRAME").unwrap_or_else(|_| panic!("run scripts/screenshot-headed.sh {mode}"));
    let copy = std::env::var("SCREENSHOT_XWD").unwrap_or_else(|_| panic!("run scripts/screenshot-headed.sh {mode}"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    std::fs::copy(&frame, &copy).expect("copy Xvfb's frame buffer");
}

/// The dashboard's Questions panel (in a window of the person's browser)
/// beside the grant's window, its order waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "makes docs/ask-dashboard.png: run scripts/screenshot-headed.sh asking"]
async fn screenshot_of_a_question_on_the_dashboard() {
    let (env, index) = ExtensionEnv::sharing_index().await.expect("the extension, sharing a tab of the person's");
    let (asked, order, clicking) = a_question_waits(&env).await;
    // The person opens the dashboard (its login link) in a window of its own.
    let session = env.open_dashboard_window().await.unwrap();
    let shown = "document.querySelector('#asks-section:not([hidden]) [data-question]')?.innerText";
    let question = e2e::control_env::eventually("the question on the dashboard", WITHIN, || async {
        let params = json!({"expression": shown, "returnByValue": true});
        // Between the login link and the dashboard there is no document.
        let value = env.browser.call("Runtime.evaluate", params, Some(&session)).await.ok()?["result"]["value"].clone();
        value.as_str().map(str::to_string)
    })
    .await;
    assert!(question.contains("shop wants to submit a form"), "{question}");
    let dashboard = env.server().control_url().unwrap();
    // The person's own window behind; the dashboard, and the grant's window beside it.
    place_windows(&env, &[(&index, [0, 0, 1024, 420]), (&dashboard, [0, 0, 880, 420]), (&order, [880, 0, 560, 420])])
        .await;
    take_the_frame("asking").await;
    env.cli(&["deny", &asked.id.to_string()]).unwrap();
    let _ = clicking.await.unwrap();
}

/// The extension's notification (drawn by the desktop's notification
/// daemon, over D-Bus) beside the grant's window, its order waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "makes docs/ask-notification.png: run scripts/screenshot-headed.sh notification"]
async fn screenshot_of_a_question_notification() {
    let (env, index) = ExtensionEnv::sharing_index().await.expect("the extension, sharing a tab of the person's");
    let (asked, order, clicking) = a_question_waits(&env).await;
    // The grant's window in front of the person's, the notification beside it.
    place_windows(&env, &[(&index, [0, 0, 760, 300]), (&order, [0, 0, 760, 300])]).await;
    take_the_frame("notification").await;
    env.cli(&["deny", &asked.id.to_string()]).unwrap();
    let _ = clicking.await.unwrap();
}
