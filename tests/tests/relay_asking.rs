//! The person in the loop, on the relay, against real Chromium through the
//! simulated extension (the real extension's notifications and its Done
//! are `e2e_asking.rs`): a grant's `--ask` holds a form, a new site, a
//! download, a file and input until the person answers; a no never
//! happens, whoever started it; no answer in time is a no; a handed-over
//! tab is the person's until Done. Each test tries the way around the
//! rule, and fails without it.

use std::sync::Arc;
use std::time::Duration;

use cdp_client::{CdpClient, CdpError, CdpEvent};
use e2e::{Chromium, FixtureServer, SimExtension};
use grants::{AskKind, Door, Grant, GrantBook, GrantName, NewGrant, Sites};
use relay_engine::{Answer, AnsweredBy, HandoffEnd, Question};
use serde_json::{Value, json};
use state_dir::{StateDir, Token};
use tokio::sync::mpsc::UnboundedReceiver;

const WITHIN: Duration = Duration::from_secs(15);

/// Chromium, the fixtures (two sites: 127.0.0.1 and localhost), a relay
/// with one grant asking `ask` (its sites: both), and the simulated
/// extension, linked, sharing nothing yet.
struct AskEnv {
    ext: SimExtension,
    server: browser_relay::RunningServer,
    fixtures: FixtureServer,
    _chrome: Chromium,
    _state: tempfile::TempDir,
    token: Token,
    grant: Grant,
}

impl AskEnv {
    async fn start(ask: &[AskKind], ask_within: Option<Duration>) -> Self {
        e2e::init_logging();
        let fixtures = FixtureServer::start().await.unwrap();
        let chrome = Chromium::launch(&[], "about:blank").unwrap();
        let token = Token::generate();
        let state = tempfile::tempdir().unwrap();
        let book = GrantBook::new(StateDir::at(state.path()));
        let sites = Sites::parse_list(&format!("{}, {}", fixtures.url(), fixtures.alt_url())).unwrap();
        let new = NewGrant {
            name: GrantName::parse("shop").unwrap(),
            sites,
            color: None,
            expires_in: None,
            evaluate: true,
            ask: ask.to_vec(),
        };
        let grant = book.add(&token, new).unwrap();
        let mut options = e2e::test_options(Some(token.clone()));
        if let Some(within) = ask_within {
            options.relay.ask_within = within;
        }
        options.state_root = Some(state.path().to_path_buf());
        let server = browser_relay::RunningServer::start(options).await.unwrap();
        let ext = SimExtension::new(&chrome.ws_url).await.unwrap();
        ext.connect(server.addr, Some(token.as_str())).await.unwrap();
        ext.welcomed().await.unwrap();
        Self { ext, server, fixtures, _chrome: chrome, _state: state, token, grant }
    }

    /// A browser-level client of the grant, auto-attaching as Playwright does.
    async fn grant_client(&self) -> (Arc<CdpClient>, UnboundedReceiver<CdpEvent>) {
        self.client(&self.grant.key(&self.token, Door::Cdp)).await
    }

    async fn client(&self, key: &Token) -> (Arc<CdpClient>, UnboundedReceiver<CdpEvent>) {
        let url = format!("ws://{}/cdp?token={}", self.server.addr, key.as_str());
        // Longer than WITHIN: a held command answers when the person does.
        let client = CdpClient::connect(&url).await.unwrap().with_timeout(WITHIN * 2);
        let events = client.take_events().unwrap();
        e2e::auto_attach(&client).await;
        (Arc::new(client), events)
    }

    /// The next question to the person.
    async fn question(&self) -> Question {
        let mut changed = self.server.relay.watch_asks();
        loop {
            if let Some(question) = self.server.relay.questions().into_iter().next() {
                return question;
            }
            tokio::time::timeout(WITHIN, changed.changed()).await.expect("no question within 15 s").unwrap();
        }
    }

    /// The activity record's entries about questions, oldest first.
    fn answers(&self) -> Vec<String> {
        let answer = self.server.activity.answer(&activity::Query::default());
        let mut found: Vec<String> = answer
            .entries
            .into_iter()
            .filter(|e| e.kind == activity::Kind::Question && !e.summary.starts_with("asked"))
            .map(|e| e.summary)
            .collect();
        found.reverse();
        found
    }

    /// The requests the fixtures got for `path` (on either site).
    fn reached(&self, path: &str) -> usize {
        self.fixtures.requests().iter().filter(|r| r.path.starts_with(path)).count()
    }
}

/// A tab of the grant's client at `url`: its target id and session, once
/// the page has loaded.
async fn open(client: &CdpClient, events: &mut UnboundedReceiver<CdpEvent>, url: &str) -> (String, String) {
    let created = client.call("Target.createTarget", json!({"url": "about:blank"}), None).await.unwrap();
    let target = created["targetId"].as_str().unwrap().to_string();
    let session = loop {
        let attached = e2e::next_event(events, "Target.attachedToTarget", WITHIN).await;
        if attached.params["targetInfo"]["targetId"] == target.as_str() {
            break attached.params["sessionId"].as_str().unwrap().to_string();
        }
    };
    client.call("Runtime.runIfWaitingForDebugger", json!({}), Some(&session)).await.unwrap();
    if url != "about:blank" {
        go(client, &session, url).await.unwrap();
    }
    (target, session)
}

/// `Page.navigate`, then the page's load.
async fn go(client: &CdpClient, session: &str, url: &str) -> Result<(), CdpError> {
    let navigated = client.call("Page.navigate", json!({"url": url}), Some(session)).await?;
    assert!(navigated.get("errorText").is_none(), "{navigated}");
    wait_until(client, session, &format!("location.href == {} && document.readyState == 'complete'", json!(url))).await;
    Ok(())
}

async fn eval(client: &CdpClient, session: &str, expression: &str) -> Value {
    let params = json!({"expression": expression, "returnByValue": true});
    let answer = client.call("Runtime.evaluate", params, Some(session)).await.unwrap();
    answer["result"]["value"].clone()
}

/// Waits until `condition` holds in the page (a promise the page settles).
async fn wait_until(client: &CdpClient, session: &str, condition: &str) {
    let expression = format!(
        "new Promise(done => {{ const check = () => ({condition}) ? done(true) : setTimeout(check, 10); check(); }})"
    );
    let params = json!({"expression": expression, "awaitPromise": true});
    let waited = tokio::time::timeout(WITHIN, client.call("Runtime.evaluate", params, Some(session))).await;
    let answer = waited.unwrap_or_else(|_| panic!("never true in the page: {condition}"));
    assert_eq!(answer.unwrap()["result"]["value"], true, "{condition}");
}

/// One command with params written as they are (`params`: raw JSON text),
/// on a page session of `target`, over a raw socket of the grant: its
/// answer.
async fn raw_call(env: &AskEnv, target: &str, method: &str, params: &str) -> Value {
    use futures_util::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;
    let url = format!("ws://{}/cdp?token={}", env.server.addr, env.grant.key(&env.token, Door::Cdp).as_str());
    let (mut socket, _) = tokio_tungstenite::connect_async(url.as_str()).await.unwrap();
    let attach = json!({"id": 1, "method": "Target.attachToTarget", "params": {"targetId": target, "flatten": true}});
    let frames = [attach.to_string(), String::new()];
    let mut session = String::new();
    for (id, frame) in (1u64..).zip(frames) {
        let frame = if id == 1 {
            frame
        } else {
            format!(r#"{{"id":{id},"method":"{method}","sessionId":"{session}","params":{params}}}"#)
        };
        socket.send(Message::Text(frame.into())).await.unwrap();
        let answer = loop {
            let next = tokio::time::timeout(WITHIN, socket.next()).await.unwrap().unwrap().unwrap();
            let Message::Text(text) = next else { continue };
            let value: Value = serde_json::from_str(&text).unwrap();
            if value["id"] == id {
                break value;
            }
        };
        if id == 1 {
            session = answer["result"]["sessionId"].as_str().unwrap().to_string();
        } else {
            return answer;
        }
    }
    unreachable!("two frames, two answers")
}

fn refused(result: Result<Value, CdpError>) -> String {
    match result {
        Err(CdpError::Protocol { message, .. }) => message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_waits_for_the_person_and_a_no_never_reaches_the_site() {
    let env = AskEnv::start(&[AskKind::Submit], None).await;
    let (client, mut events) = env.grant_client().await;
    let order = format!("{}/order.html", env.fixtures.url());
    let (target, session) = open(&client, &mut events, &order).await;

    // The page's own submit (a click in the page): held before it leaves.
    eval(&client, &session, "document.getElementById('buy').click(); true").await;
    let question = env.question().await;
    assert_eq!((question.kind, question.grant.as_str()), (AskKind::Submit, "shop"));
    assert!(question.what.starts_with("shop wants to submit a form to 127.0.0.1"), "{}", question.what);
    assert_eq!(question.target_id.as_deref(), Some(target.as_str()));
    let told = env.ext.notice("ask", 0, WITHIN).await.unwrap();
    assert_eq!(told["id"], question.id, "the extension is told, to show its notification: {told}");
    assert_eq!(env.reached("/echo?order"), 0, "the form waits for the person");
    // The extension's link drops meanwhile (its worker restarted): the
    // question is shown again on the new one, and still waits.
    let before = env.ext.notices_count();
    env.ext.drop_connection();
    e2e::wait_for_stats(&env.server.relay, "the old link gone", WITHIN, |s| !s.extension_connected).await.unwrap();
    env.ext.connect(env.server.addr, Some(env.token.as_str())).await.unwrap();
    let again = env.ext.notice("ask", before, WITHIN).await.unwrap();
    assert_eq!(again["id"], question.id, "{again}");
    assert_eq!(env.server.relay.questions().len(), 1);

    // Yes, in the browser's notification: it goes on as if never held.
    env.ext.answer_ask(question.id, true);
    env.ext.notice("ask.closed", 1, WITHIN).await.unwrap();
    let deadline = tokio::time::Instant::now() + WITHIN;
    while env.reached("/echo?order") == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the allowed form never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The link's drop ended the client's session on the tab: a new one.
    let attached = client.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}), None).await;
    let session = attached.unwrap()["sessionId"].as_str().unwrap().to_string();
    wait_until(&client, &session, "location.pathname == '/echo'").await;
    assert_eq!(env.reached("/echo?order"), 1);

    // No, on the dashboard: it never happens, and the tab stays.
    go(&client, &session, &order).await.unwrap();
    let asked = env.ext.notices_count();
    eval(&client, &session, "document.getElementById('buy').click(); true").await;
    let question = env.question().await;
    env.server.relay.answer(question.id, Answer::Deny, AnsweredBy::Dashboard).unwrap();
    env.ext.notice("ask.closed", asked, WITHIN).await.unwrap();
    assert_eq!(eval(&client, &session, "location.pathname").await, "/order.html");
    assert_eq!(env.reached("/echo?order"), 1, "the refused form never reached the site");
    assert_eq!(
        env.server.relay.answer(question.id, Answer::Allow, AnsweredBy::Terminal).unwrap_err().to_string(),
        format!("no question {} is waiting (answered already, or timed out)", question.id),
        "an answer counts once"
    );
    assert_eq!(
        env.answers(),
        [
            "allowed in the notification: shop wants to submit a form to 127.0.0.1 (".to_string()
                + &format!("{}/echo?order)", env.fixtures.url()),
            format!(
                "denied in the dashboard: shop wants to submit a form to 127.0.0.1 ({}/echo?order)",
                env.fixtures.url()
            ),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_in_time_is_a_no() {
    let env = AskEnv::start(&[AskKind::Submit], Some(Duration::from_millis(800))).await;
    let (client, mut events) = env.grant_client().await;
    let order = format!("{}/order.html", env.fixtures.url());
    let (_, session) = open(&client, &mut events, &order).await;
    eval(&client, &session, "document.getElementById('buy').click(); true").await;
    let question = env.question().await;
    let mut changed = env.server.relay.watch_asks();
    tokio::time::timeout(WITHIN, changed.wait_for(|_| env.server.relay.questions().is_empty())).await.unwrap().unwrap();
    assert!(env.answers()[0].starts_with("not answered within 800 ms: denied"), "{:?}", env.answers());
    assert!(env.server.relay.answer(question.id, Answer::Allow, AnsweredBy::Terminal).is_err(), "too late");
    assert_eq!(eval(&client, &session, "location.pathname").await, "/order.html");
    assert_eq!(env.reached("/echo?order"), 0);
}

/// A question its grant leaves (revoked: the grants the relay honours no
/// longer hold it) is a no: the held form fails in Chrome, never sent on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_whose_grant_ends_sends_nothing() {
    let env = AskEnv::start(&[AskKind::Submit], None).await;
    let (client, mut events) = env.grant_client().await;
    let order = format!("{}/order.html", env.fixtures.url());
    let (target, session) = open(&client, &mut events, &order).await;
    // The person watches the tab with their own key.
    let (person, mut seen) = env.client(&browser_relay::cdp_key(&env.token)).await;
    let attached = person.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}), None).await;
    let person_session = attached.unwrap()["sessionId"].as_str().unwrap().to_string();
    person.call("Page.enable", json!({}), Some(&person_session)).await.unwrap();
    // A grant's client cannot slip params past the relay's reading (a lone
    // surrogate: Chrome's parser takes it, serde's Value does not).
    let answer =
        raw_call(&env, &target, "Fetch.continueRequest", r#"{"requestId":"interception-job-1.0","x":"\ud800"}"#).await;
    assert!(answer["error"]["message"].as_str().unwrap_or_default().contains("plain JSON"), "{answer}");

    eval(&client, &session, "document.getElementById('buy').click(); true").await;
    env.question().await;
    env.server.relay.set_grants(Vec::new());
    let mut changed = env.server.relay.watch_asks();
    tokio::time::timeout(WITHIN, changed.wait_for(|_| env.server.relay.questions().is_empty())).await.unwrap().unwrap();
    // The held navigation ends where it was: it stopped loading, and never landed.
    loop {
        let event = tokio::time::timeout(WITHIN, seen.recv()).await.unwrap().unwrap();
        if event.method == "Page.frameNavigated" {
            assert!(!event.params.to_string().contains("/echo"), "the held form went on: {event:?}");
        }
        if event.method == "Page.frameStoppedLoading" {
            break;
        }
    }
    assert_eq!(env.reached("/echo?order"), 0, "the held form never reached the site");
    assert!(env.answers()[0].ends_with(&format!("({}/echo?order)", env.fixtures.url())), "{:?}", env.answers());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_site_a_download_and_a_file_each_wait_for_the_person() {
    let env = AskEnv::start(&[AskKind::NewSite, AskKind::Download, AskKind::Upload], None).await;
    let (client, mut events) = env.grant_client().await;
    let (home, elsewhere) = (env.fixtures.url(), env.fixtures.alt_url());
    let (_, session) = open(&client, &mut events, "about:blank").await;

    // The client's navigation to a site the grant's tabs have not been on:
    // held until the person answers, then it goes.
    let going = {
        let client = client.clone();
        let session = session.clone();
        let order = format!("{home}/order.html");
        tokio::spawn(async move { go(&client, &session, &order).await })
    };
    let question = env.question().await;
    assert_eq!((question.kind, question.site.as_str()), (AskKind::NewSite, "127.0.0.1"));
    assert!(!going.is_finished(), "the navigation waits for the person");
    env.server.relay.answer(question.id, Answer::Allow, AnsweredBy::Terminal).unwrap();
    going.await.unwrap().unwrap();

    // The other site, from the page (a link): held; allowed for the site,
    // its next visits go without a question.
    let link = format!("{elsewhere}/index.html");
    eval(&client, &session, &format!("location = {}; true", json!(link))).await;
    let question = env.question().await;
    assert_eq!((question.kind, question.site.as_str()), (AskKind::NewSite, "localhost"));
    env.server.relay.answer(question.id, Answer::AllowSite, AnsweredBy::Terminal).unwrap();
    wait_until(&client, &session, "location.host.startsWith('localhost')").await;
    go(&client, &session, &format!("{home}/order.html")).await.unwrap();
    go(&client, &session, &format!("{elsewhere}/form.html")).await.unwrap();
    go(&client, &session, &format!("{home}/order.html")).await.unwrap();
    assert!(env.server.relay.questions().is_empty(), "visited sites ask nothing");
    assert_eq!(env.answers().len(), 2, "{:?}", env.answers());

    // A download (a link's `download`): no, and Chrome never starts it.
    client.call("Page.enable", json!({}), Some(&session)).await.unwrap();
    eval(&client, &session, "document.getElementById('dl').click(); true").await;
    let question = env.question().await;
    assert_eq!(question.kind, AskKind::Download);
    assert_eq!(question.what, "shop wants to download data.txt from 127.0.0.1");
    env.server.relay.answer(question.id, Answer::Deny, AnsweredBy::Terminal).unwrap();
    // An attachment: yes, and it downloads.
    eval(&client, &session, "document.getElementById('invoice').click(); true").await;
    let question = env.question().await;
    assert_eq!(question.what, "shop wants to download invoice.csv from 127.0.0.1");
    env.server.relay.answer(question.id, Answer::Allow, AnsweredBy::Terminal).unwrap();
    // Chrome may announce the refused one, but never finishes it: the
    // folder gets the allowed file alone.
    let completed = loop {
        let progress = e2e::next_event(&mut events, "Page.downloadProgress", WITHIN).await;
        if progress.params["state"] == "completed" {
            break progress;
        }
    };
    assert_eq!(env.ext.downloaded(), ["invoice.csv"], "{completed:?}");

    // A file given to a file input: no, then yes.
    let input = client
        .call("Runtime.evaluate", json!({"expression": "document.getElementById('file')"}), Some(&session))
        .await
        .unwrap();
    let object = input["result"]["objectId"].as_str().unwrap().to_string();
    let file = e2e::fixtures::fixtures_dir().join("data.txt");
    let give = json!({"files": [file.to_str().unwrap()], "objectId": object});
    let giving = {
        let (client, session, give) = (client.clone(), session.clone(), give.clone());
        tokio::spawn(async move { client.call("DOM.setFileInputFiles", give, Some(&session)).await })
    };
    let question = env.question().await;
    assert_eq!(question.what, "shop wants to give data.txt to a file input on 127.0.0.1");
    env.server.relay.answer(question.id, Answer::Deny, AnsweredBy::Terminal).unwrap();
    let message = refused(giving.await.unwrap());
    assert!(message.starts_with("Browser Relay: the person said no (the terminal): shop wants to give"), "{message}");
    assert_eq!(eval(&client, &session, "document.getElementById('file').files.length").await, 0);
    let giving = {
        let (client, session) = (client.clone(), session.clone());
        tokio::spawn(async move { client.call("DOM.setFileInputFiles", give, Some(&session)).await })
    };
    let question = env.question().await;
    env.server.relay.answer(question.id, Answer::Allow, AnsweredBy::Terminal).unwrap();
    giving.await.unwrap().unwrap();
    assert_eq!(eval(&client, &session, "document.getElementById('file').files[0].name").await, "data.txt");
}

/// A press at the middle of `#btn`, and its release.
fn click_at(x: f64, y: f64) -> [Value; 2] {
    let event = |kind: &str| json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1});
    [event("mousePressed"), event("mouseReleased")]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_waits_for_the_person_and_the_clients_later_commands_wait_behind_it() {
    let env = AskEnv::start(&[AskKind::Input], None).await;
    let (client, mut events) = env.grant_client().await;
    let (_, session) = open(&client, &mut events, &format!("{}/order.html", env.fixtures.url())).await;
    let middle = eval(
        &client,
        &session,
        "(() => { const r = document.getElementById('btn').getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()",
    )
    .await;
    let (x, y) = (middle[0].as_f64().unwrap(), middle[1].as_f64().unwrap());
    let [press, release] = click_at(x, y);

    // A press is held, and what the client sends after it waits behind it.
    let pressing = {
        let (client, session, press) = (client.clone(), session.clone(), press.clone());
        tokio::spawn(async move { client.call("Input.dispatchMouseEvent", press, Some(&session)).await })
    };
    let question = env.question().await;
    assert_eq!(question.what, "shop wants to click on 127.0.0.1");
    let later = {
        let (client, session) = (client.clone(), session.clone());
        tokio::spawn(async move {
            let expression = "document.getElementById('out').textContent";
            client.call("Runtime.evaluate", json!({"expression": expression}), Some(&session)).await
        })
    };
    // The person has not answered: the later command has no answer either
    // (the relay reads nothing more of this client until they do).
    let early = tokio::time::timeout(Duration::from_millis(300), async {
        while !later.is_finished() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(early.is_err(), "a command after the held press was answered first");
    env.server.relay.answer(question.id, Answer::Allow, AnsweredBy::Terminal).unwrap();
    pressing.await.unwrap().unwrap();
    assert_eq!(later.await.unwrap().unwrap()["result"]["value"], "not clicked", "it went after the press, in order");
    // The rest of the allowed click (its release) asks nothing.
    client.call("Input.dispatchMouseEvent", release.clone(), Some(&session)).await.unwrap();
    assert_eq!(eval(&client, &session, "document.getElementById('out').textContent").await, "clicked");

    // Another client of the grant is asked for its own; no, and nothing
    // happens in the page.
    eval(&client, &session, "document.getElementById('out').textContent = 'not clicked'").await;
    let (other, _other_events) = env.grant_client().await;
    let attached =
        other.call("Target.attachToTarget", json!({"targetId": question.target_id, "flatten": true}), None).await;
    let other_session = attached.unwrap()["sessionId"].as_str().unwrap().to_string();
    let pressing = {
        let (other, session) = (other.clone(), other_session.clone());
        tokio::spawn(async move { other.call("Input.dispatchMouseEvent", press, Some(&session)).await })
    };
    let question = env.question().await;
    env.server.relay.answer(question.id, Answer::Deny, AnsweredBy::Terminal).unwrap();
    assert!(refused(pressing.await.unwrap()).contains("the person said no"));
    other.call("Input.dispatchMouseEvent", release, Some(&other_session)).await.unwrap();
    assert_eq!(eval(&client, &session, "document.getElementById('out').textContent").await, "not clicked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_over_tab_is_the_persons_until_they_say_done() {
    let env = AskEnv::start(&[], None).await;
    let (client, mut events) = env.grant_client().await;
    let order = format!("{}/order.html", env.fixtures.url());
    let (target, session) = open(&client, &mut events, &order).await;
    client.call("Network.enable", json!({}), Some(&session)).await.unwrap();
    client.call("Page.enable", json!({}), Some(&session)).await.unwrap();
    let relay = env.server.relay.clone();
    let grant = Arc::new(env.grant.clone());
    let handing = {
        let (relay, target, grant) = (relay.clone(), target.clone(), grant.clone());
        tokio::spawn(async move { relay.hand_over(&target, Some(&grant), "log in, please", WITHIN).await })
    };
    let told = env.ext.notice("handoff", 0, WITHIN).await.unwrap();
    assert_eq!((told["grant"].as_str(), told["reason"].as_str()), (Some("shop"), Some("log in, please")));
    let handed = env.server.relay.handoffs();
    assert_eq!(handed.len(), 1);

    // The grant may not act, look or run script in the tab meanwhile.
    for (method, params) in [
        ("Input.dispatchKeyEvent", json!({"type": "keyDown", "key": "a", "text": "a"})),
        ("Input.insertText", json!({"text": "x"})),
        ("Runtime.evaluate", json!({"expression": "document.getElementById('card').value"})),
        ("Page.captureScreenshot", json!({})),
        ("Page.addScriptToEvaluateOnNewDocument", json!({"source": "1"})),
        ("DOM.getDocument", json!({})),
        ("Page.navigate", json!({"url": format!("{}/form.html", env.fixtures.url())})),
    ] {
        let message = refused(client.call(method, params, Some(&session)).await);
        assert!(
            message.contains("the person has this tab (shop handed it over: log in, please)"),
            "{method}: {message}"
        );
    }

    // The person types their password and sends the form (here through
    // their own key): the grant's client hears the tab go on, not what was
    // sent, and can ask Chrome for none of it.
    let (person, _person_events) = env.client(&browser_relay::cdp_key(&env.token)).await;
    let attached = person.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}), None).await;
    let person_session = attached.unwrap()["sessionId"].as_str().unwrap().to_string();
    let typed = "document.getElementById('card').value = 'hunter2'; document.getElementById('buy').click(); true";
    eval(&person, &person_session, typed).await;
    let landed = loop {
        let event = e2e::next_event(&mut events, "Page.frameNavigated", WITHIN).await;
        if event.params["frame"]["url"].as_str().unwrap().contains("/echo?order") {
            break event;
        }
    };
    let request_id = landed.params["frame"]["loaderId"].as_str().unwrap().to_string();
    assert_eq!(env.reached("/echo?order"), 1, "the person's form went");
    while let Ok(event) = events.try_recv() {
        assert!(event.method != "Network.requestWillBeSent", "the grant heard the person's request: {event:?}");
        assert!(!event.params.to_string().contains("hunter2"), "the grant saw what the person sent: {event:?}");
    }
    // Done, in the browser: the grant's call returns, and the tab is its again.
    env.ext.handoff_done(env.server.relay.tab_of_target(&target).unwrap());
    assert_eq!(handing.await.unwrap().unwrap(), HandoffEnd::Done);
    env.ext.notice("handoff.end", 1, WITHIN).await.unwrap();
    assert_eq!(eval(&client, &session, "location.pathname").await, "/echo");
    let body = client.call("Network.getRequestPostData", json!({"requestId": request_id}), Some(&session)).await;
    let message = refused(body);
    assert!(message.contains("that request was the person's"), "{message}");

    // The agent's time running out gives it back too.
    let ended = relay.hand_over(&target, Some(&grant), "a CAPTCHA", Duration::from_millis(300)).await.unwrap();
    assert_eq!(ended, HandoffEnd::TimedOut);
    eval(&client, &session, "1").await;
    // A grant hands over its own tabs only.
    let other = GrantBook::new(StateDir::at(env._state.path()));
    let stranger = other
        .add(
            &env.token,
            NewGrant {
                name: GrantName::parse("stranger").unwrap(),
                sites: Sites::any(),
                color: None,
                expires_in: None,
                evaluate: true,
                ask: Vec::new(),
            },
        )
        .unwrap();
    let refused_handoff = relay.hand_over(&target, Some(&Arc::new(stranger)), "mine", WITHIN).await;
    assert_eq!(refused_handoff.unwrap_err(), relay_engine::AskError::NotTheGrants);
}
