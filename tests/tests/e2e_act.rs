//! `POST /act`, the hooks, PDF and labelled screenshots end to end on the
//! managed driver with real Chromium: every kind, every error an agent
//! should see, and no deadlock behind a dialog.

use std::time::Duration;

use e2e::ControlEnv;
use e2e::control_env::{eventually, ref_of};
use serde_json::{Value, json};

/// The page's log lines (`#log li`), as the page wrote them.
async fn log(env: &ControlEnv, tab: &str) -> Vec<String> {
    let lines = env.eval(tab, "[...document.querySelectorAll('#log li')].map(li => li.textContent)").await;
    lines.as_array().unwrap().iter().filter_map(|l| l.as_str().map(str::to_string)).collect()
}

async fn act(env: &ControlEnv, body: Value) -> (u16, Value) {
    env.api.call("POST", "/act", Some(body)).await
}

async fn act_ok(env: &ControlEnv, body: Value) -> Value {
    env.api.ok("POST", "/act", Some(body)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_filled_and_submitted() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    let tab = env.open("act/form.html").await;
    let snap = env.snapshot_text("").await;
    let field = |needle: &str| ref_of(&snap, needle);
    let filled = act_ok(
        &env,
        json!({"kind": "fill", "fields": [
            {"ref": field("textbox \"Name\""), "value": "Ada Lovelace"},
            {"ref": field("textbox \"Email\""), "value": "ada@example.com"},
            {"ref": field("spinbutton \"Age\""), "value": 36},
            {"ref": field("textbox \"Birthday\""), "value": "1815-12-10"},
            {"ref": field("textbox \"Bio\""), "value": "Mathematician"},
            {"ref": field("checkbox \"Newsletter\""), "value": false},
            {"ref": field("checkbox \"I accept the terms\""), "value": true},
            {"ref": field("radio \"Pro\""), "value": true},
            {"ref": field("combobox \"Country\""), "value": "United Kingdom"},
            {"ref": field("listbox \"Languages\""), "value": ["en", "German"]},
            {"ref": field("textbox \"Notes\""), "value": "Hello notes"},
        ]}),
    )
    .await;
    assert_eq!(filled["navigated"], false, "{filled}");
    act_ok(&env, json!({"kind": "click", "ref": field("button \"Create account\"")})).await;
    let result = env.eval(&tab, "JSON.parse(document.getElementById('result').textContent)").await;
    assert_eq!(result["name"], "Ada Lovelace", "the old value was replaced: {result}");
    assert_eq!(result["email"], "ada@example.com");
    assert_eq!(result["age"], "36");
    assert_eq!(result["birthday"], "1815-12-10");
    assert_eq!(result["bio"], "Mathematician");
    assert_eq!(result.get("news"), None, "unchecked: {result}");
    assert_eq!(result["terms"], "on");
    assert_eq!(result["plan"], "pro");
    assert_eq!(result["country"], "uk");
    assert_eq!(result["langs"], json!(["en", "de"]), "<select multiple>");
    assert_eq!(result["notes"], "Hello notes", "contenteditable");

    // type + submit: Enter in a field submits its form.
    act_ok(&env, json!({"kind": "type", "ref": field("textbox \"Name\""), "text": "Grace", "submit": true})).await;
    let result = env.eval(&tab, "JSON.parse(document.getElementById('result').textContent)").await;
    assert_eq!(result["name"], "Grace", "{result}");
    // Slowly: one key at a time, into what is there (no replacement).
    act_ok(&env, json!({"kind": "type", "ref": field("textbox \"Bio\""), "text": "!?", "slowly": true})).await;
    let bio = env.eval(&tab, "document.querySelector('textarea').value").await;
    assert!(bio.as_str().unwrap().ends_with("!?"), "{bio}");
    // What cannot be typed slowly within the deadline is refused before a
    // key is pressed (it would hold the tab's lock for as long).
    let long = "x".repeat(100);
    let slow =
        json!({"kind": "type", "ref": field("textbox \"Bio\""), "text": long, "slowly": true, "timeoutMs": 1000});
    let (status, refused) = act(&env, slow).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("raise timeoutMs"), "{refused}");
    assert_eq!(env.eval(&tab, "document.querySelector('textarea').value").await, bio, "nothing was typed");

    // select: by label or value; several at once in a <select multiple>.
    act_ok(&env, json!({"kind": "select", "ref": field("combobox \"Country\""), "values": ["United States"]})).await;
    act_ok(&env, json!({"kind": "select", "ref": field("listbox \"Languages\""), "values": ["fr", "Spanish"]})).await;
    act_ok(&env, json!({"kind": "click", "ref": field("button \"Create account\"")})).await;
    let result = env.eval(&tab, "JSON.parse(document.getElementById('result').textContent)").await;
    assert_eq!((&result["country"], &result["langs"]), (&json!("us"), &json!(["fr", "es"])), "{result}");

    // Mistakes get precise answers.
    let (status, error) =
        act(&env, json!({"kind": "select", "ref": field("combobox \"Country\""), "values": ["Mars"]})).await;
    assert_eq!((status, error["error"]["code"].as_str()), (400, Some("bad_action")), "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("no option \"Mars\"") && message.contains("United Kingdom"), "lists options: {message}");
    let (status, error) =
        act(&env, json!({"kind": "type", "ref": field("checkbox \"Newsletter\""), "text": "x"})).await;
    assert_eq!(status, 400, "a checkbox is not a text field: {error}");
    let (status, error) = act(&env, json!({"kind": "click", "reff": "e1"})).await;
    assert!(status == 400 && error["error"]["message"].as_str().unwrap().contains("reff"), "{error}");
    let (status, error) = act(&env, json!({"kind": "press", "key": "Control+Banana"})).await;
    assert!(status == 400 && error["error"]["message"].as_str().unwrap().contains("Banana"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_keys_drags_waits_and_what_goes_wrong() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    let tab = env.open("act/page.html").await;
    let snap = env.snapshot_text("").await;
    let r = |needle: &str| ref_of(&snap, needle);

    act_ok(&env, json!({"kind": "click", "ref": r("button \"Count\"")})).await;
    act_ok(&env, json!({"kind": "click", "ref": format!("@{}", r("button \"Count\""))})).await;
    act_ok(&env, json!({"kind": "click", "ref": r("button \"Double me\""), "doubleClick": true})).await;
    act_ok(&env, json!({"kind": "hover", "ref": r("button \"Hover me\"")})).await;
    assert_eq!(log(&env, &tab).await, ["clicked 1", "clicked 2", "double clicked", "hovered"]);

    // Covered, disabled, not visible: errors that say what to do.
    let (status, covered) = act(&env, json!({"kind": "click", "ref": r("button \"Under the modal\"")})).await;
    assert_eq!((status, covered["error"]["code"].as_str()), (409, Some("covered")), "{covered}");
    let under = r("button \"Under the modal\"");
    assert_eq!(
        covered["error"]["message"],
        format!("{under} is covered by <div id=\"modal\" class=\"modal backdrop\">: close it or take a new snapshot")
    );
    let disabled = r("button \"Disabled action\"");
    let (status, error) = act(&env, json!({"kind": "click", "ref": disabled})).await;
    assert_eq!((status, error["error"]["message"].as_str()), (409, Some(format!("{disabled} is disabled").as_str())));
    let hidden_snapshot = env.api.ok("GET", "/snapshot", None).await;
    assert!(!hidden_snapshot["snapshot"].as_str().unwrap().contains("Appears later"), "hidden: no ref yet");
    assert!(log(&env, &tab).await.len() == 4, "nothing was clicked by the failed actions");

    // Waiting: text that appears after a second, and a button with it.
    act_ok(&env, json!({"kind": "click", "ref": r("button \"Load more\"")})).await;
    let waited = act_ok(&env, json!({"kind": "wait", "text": "Loaded!"})).await;
    assert_eq!(waited["ok"], true);
    assert_eq!(env.eval(&tab, "document.getElementById('status').textContent").await, "Loaded!");
    act_ok(&env, json!({"kind": "wait", "textGone": "Idle", "timeoutMs": 1000})).await;
    act_ok(&env, json!({"kind": "wait", "selector": "#later"})).await;
    let (status, error) = act(&env, json!({"kind": "wait", "text": "Never", "timeoutMs": 600})).await;
    assert_eq!((status, error["error"]["code"].as_str()), (504, Some("timeout")), "{error}");
    assert_eq!(error["error"]["message"], "timed out after 600 ms waiting for text \"Never\" to appear");
    // The URL (a glob), a function, load states, and a plain pause.
    env.eval(&tab, "setTimeout(() => history.pushState({}, '', '#step-2'), 300); 0").await;
    act_ok(&env, json!({"kind": "wait", "url": "*/act/page.html#step-2"})).await;
    env.eval(&tab, "setTimeout(() => { window.ready = 42 }, 300); 0").await;
    act_ok(&env, json!({"kind": "wait", "fn": "() => window.ready === 42"})).await;
    for state in ["domcontentloaded", "load", "networkidle"] {
        act_ok(&env, json!({"kind": "wait", "loadState": state})).await;
    }
    let (status, error) = act(&env, json!({"kind": "wait", "loadState": "interactive"})).await;
    assert!(status == 400 && error["error"]["message"].as_str().unwrap().contains("networkidle"), "{error}");
    let (status, error) = act(&env, json!({"kind": "wait", "url": "*never*", "timeoutMs": 500})).await;
    assert_eq!(
        (status, error["error"]["message"].as_str()),
        (504, Some("timed out after 500 ms waiting for the URL to match '*never*'"))
    );
    let paused = std::time::Instant::now();
    act_ok(&env, json!({"kind": "wait", "timeMs": 300})).await;
    assert!(paused.elapsed() >= Duration::from_millis(300), "waited {:?}", paused.elapsed());
    let (status, error) = act(&env, json!({"kind": "wait"})).await;
    assert!(status == 400 && error["error"]["message"].as_str().unwrap().contains("timeMs"), "{error}");

    let later = ref_of(&env.snapshot_text("").await, "button \"Appears later\"");
    act_ok(&env, json!({"kind": "click", "ref": later})).await;
    assert_eq!(log(&env, &tab).await.last().map(String::as_str), Some("later clicked"));

    // A hidden element times out with the reason.
    env.eval(&tab, "document.getElementById('later').hidden = true").await;
    let (status, error) = act(&env, json!({"kind": "click", "ref": later, "timeoutMs": 700})).await;
    assert_eq!(status, 504, "{error}");
    assert_eq!(error["error"]["message"], format!("timed out after 700 ms waiting for {later} to become visible"));

    // Keyboard.
    let snap = env.snapshot_text("").await;
    let keys = ref_of(&snap, "textbox \"Keys\"");
    act_ok(&env, json!({"kind": "type", "ref": keys, "text": "hello"})).await;
    for key in ["Enter", "Control+A"] {
        act_ok(&env, json!({"kind": "press", "key": key})).await;
    }
    let selection = env.eval(&tab, "(k => [k.selectionStart, k.selectionEnd])(document.getElementById('keys'))").await;
    assert_eq!(selection, json!([0, 5]), "Control+A selected the field's text");
    for key in ["Alt+ArrowLeft", "Shift+Tab"] {
        act_ok(&env, json!({"kind": "press", "key": key})).await;
    }
    let lines = log(&env, &tab).await;
    let tail: Vec<&str> = lines.iter().rev().take(4).rev().map(String::as_str).collect();
    assert_eq!(tail, ["key Enter", "key Control+A", "key Alt+ArrowLeft", "key Shift+Tab"], "{lines:?}");
    assert_eq!(env.eval(&tab, "document.getElementById('keys').value").await, "hello");
    // Tab and Shift+Tab move the focus as they do for a person.
    let focused = "document.activeElement.id || document.activeElement.textContent";
    assert_eq!(env.eval(&tab, focused).await, "item", "Shift+Tab went back to the drag item");
    act_ok(&env, json!({"kind": "press", "key": "Tab"})).await;
    assert_eq!(env.eval(&tab, focused).await, "keys");
    act_ok(&env, json!({"kind": "press", "key": "Tab"})).await;
    assert_eq!(env.eval(&tab, focused).await, "Alert");

    // HTML5 drag and drop between two zones.
    let dragged = act_ok(
        &env,
        json!({"kind": "drag", "startRef": ref_of(&snap, "button \"Drag item\""), "endRef": ref_of(&snap, "button \"Right zone\"")}),
    )
    .await;
    assert_eq!(dragged["ok"], true);
    assert_eq!(log(&env, &tab).await.last().map(String::as_str), Some("dropped in right"));
    assert_eq!(env.eval(&tab, "document.getElementById('item').parentElement.id").await, "right");

    // Resize and evaluate.
    act_ok(&env, json!({"kind": "resize", "width": 640, "height": 480})).await;
    assert_eq!(env.eval(&tab, "innerWidth").await, 640);
    let title = act_ok(&env, json!({"kind": "evaluate", "fn": "() => document.title"})).await;
    assert_eq!(title["result"], "Act: page");
    let text = act_ok(
        &env,
        json!({"kind": "evaluate", "fn": "(el) => el.textContent", "ref": ref_of(&snap, "button \"Count\"")}),
    )
    .await;
    assert_eq!(text["result"], "Count");
    let (status, error) = act(&env, json!({"kind": "evaluate", "fn": "() => { throw new Error('nope') }"})).await;
    assert!(status == 502 && error["error"]["message"].as_str().unwrap().contains("nope"), "{error}");

    // A click that navigates: the new URL, and the old refs are stale.
    let link = ref_of(&snap, "link \"Go to the form\"");
    let navigated = act_ok(&env, json!({"kind": "click", "ref": link})).await;
    assert_eq!(navigated["navigated"], true, "{navigated}");
    assert!(navigated["page"]["url"].as_str().unwrap().ends_with("/act/form.html"), "{navigated}");
    let (status, error) = act(&env, json!({"kind": "click", "ref": keys})).await;
    assert_eq!((status, error["error"]["code"].as_str()), (409, Some("stale_ref")), "{error}");

    // close: the tab goes.
    act_ok(&env, json!({"kind": "close"})).await;
    eventually("the closed tab to go", Duration::from_secs(5), || async {
        let tabs = env.api.ok("GET", "/tabs", None).await;
        (!tabs["tabs"].as_array().unwrap().iter().any(|t| t["targetId"] == tab.as_str())).then_some(())
    })
    .await;
}

/// What an agent checks after acting comes with the action's answer: where
/// the page is, what went wrong since the last action (once), the tabs it
/// opened, and on request the new snapshot, whose refs are the tab's then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_answer_carries_the_page_state_an_agent_checks_next() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    env.open("act/news.html").await;
    let snap = env.snapshot_text("").await;

    let failed = act_ok(&env, json!({"kind": "click", "ref": ref_of(&snap, "button \"Fail\"")})).await;
    assert_eq!((failed["profile"].as_str(), failed["page"]["title"].as_str()), (Some("managed"), Some("News")));
    let errors: Vec<&str> =
        failed["page"]["consoleErrors"].as_array().expect("errors").iter().filter_map(Value::as_str).collect();
    assert_eq!(errors.len(), 2, "{failed}");
    assert_eq!(errors[0], "bad thing happened");
    assert!(errors[1].contains("Error: boom") && !errors[1].contains('\n'), "one line: {failed}");

    // Reported once: the next answer has nothing new, and carries the
    // snapshot asked for.
    let quiet =
        act_ok(&env, json!({"kind": "click", "ref": ref_of(&snap, "button \"Quiet\""), "snapshot": true})).await;
    assert!(quiet["page"].get("consoleErrors").is_none(), "{quiet}");
    let fresh = quiet["snapshot"].as_str().expect("the snapshot asked for");
    assert!(
        fresh.lines().any(|l| l.contains("button \"Popup\"") && e2e::control_env::line_ref(l).is_some()),
        "{fresh}"
    );

    let popup = act_ok(&env, json!({"kind": "click", "ref": ref_of(fresh, "button \"Popup\"")})).await;
    let new_tabs = popup["page"]["newTabs"].as_array().expect("the popup is reported");
    assert_eq!(new_tabs.len(), 1, "{popup}");
    assert!(new_tabs[0]["url"].as_str().unwrap().ends_with("/act/page.html"), "with the URL it opened: {popup}");
    let tabs = env.api.ok("GET", "/tabs", None).await;
    assert!(tabs["tabs"].as_array().unwrap().iter().any(|t| t["targetId"] == new_tabs[0]["targetId"]), "{tabs}");

    // A request the click starts is told by the click's own answer, with
    // what the page logged when it came back; it is told once.
    let news = env.api.ok("POST", "/tabs/focus", Some(json!({"targetId": popup["targetId"]}))).await;
    assert_eq!(news["ok"], true);
    for (button, failed, logged) in
        [("Fetch", "404 GET ", "/act/missing.json"), ("Slow failure", "503 GET ", "/status/503?delay=300")]
    {
        let clicked =
            act_ok(&env, json!({"kind": "click", "ref": ref_of(fresh, &format!("button \"{button}\""))})).await;
        let told: Vec<&str> =
            clicked["page"]["failedRequests"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        assert_eq!(told.len(), 1, "{button}: {clicked}");
        assert!(told[0].starts_with(failed) && told[0].ends_with(logged), "{button}: {told:?}");
        if button == "Slow failure" {
            let errors = clicked["page"]["consoleErrors"].as_array().expect("what the page logged");
            assert_eq!(errors, &[json!("slow request answered 503")], "{clicked}");
        }
        assert!(clicked["page"].get("earlier").is_none(), "nothing before the click: {clicked}");
        let next = act_ok(&env, json!({"kind": "press", "key": "Shift"})).await;
        assert!(next["page"].get("failedRequests").is_none() && next["page"].get("earlier").is_none(), "{next}");
    }

    // What went wrong before an action is told apart from what it caused.
    let later = "() => { setTimeout(() => console.error('on its own'), 200); }";
    act_ok(&env, json!({"kind": "evaluate", "fn": later})).await;
    eventually("the page's own error to be logged", Duration::from_secs(5), || async {
        let console = env.api.ok("GET", "/console", None).await;
        console.to_string().contains("on its own").then_some(())
    })
    .await;
    let quiet = act_ok(&env, json!({"kind": "click", "ref": ref_of(fresh, "button \"Quiet\"")})).await;
    assert!(quiet["page"].get("consoleErrors").is_none(), "not the click's doing: {quiet}");
    assert_eq!(quiet["page"]["earlier"]["consoleErrors"], json!(["on its own"]), "{quiet}");
}

/// An action's answer says where it changed the page without a snapshot:
/// nothing, the part it changed, a part it opened, a part it closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_answer_names_the_part_of_the_page_it_changed() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    env.open("act/parts.html").await;
    let snap = env.snapshot_text("").await;
    let click = |name: &str| json!({"kind": "click", "ref": ref_of(&snap, &format!("button \"{name}\""))});

    let nothing = act_ok(&env, click("Nothing")).await;
    assert!(nothing["page"].get("changed").is_none(), "a click that changes nothing says nothing: {nothing}");
    let added = act_ok(&env, click("Add")).await;
    assert_eq!(added["page"]["changed"], json!(["region \"Cart\""]), "{added}");
    let opened = act_ok(&env, click("Sign in")).await;
    assert_eq!(opened["page"]["changed"], json!(["dialog \"Sign in\" (new)"]), "{opened}");

    let in_dialog = env.snapshot_text("").await;
    let closed = act_ok(&env, json!({"kind": "click", "ref": ref_of(&in_dialog, "button \"Close\"")})).await;
    assert_eq!(closed["page"]["changed"], json!(["dialog \"Sign in\" (gone)"]), "{closed}");
    // A navigation is the whole page: said by `navigated`, not by parts.
    let top = act_ok(&env, json!({"kind": "click", "ref": ref_of(&in_dialog, "link \"Top\"")})).await;
    assert!(top["page"].get("changed").is_none(), "{top}");
}

/// The network log shows the current page by default: requests since the
/// tab last loaded a document, each marked with its page; `all` shows the
/// earlier pages' too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_log_is_per_page() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    env.open("act/news.html").await;
    let snap = env.snapshot_text("").await;
    act_ok(&env, json!({"kind": "click", "ref": ref_of(&snap, "button \"Fetch\"")})).await;
    let first = env.api.ok("GET", "/requests", None).await;
    let urls = |list: &Value| -> Vec<String> {
        list["requests"].as_array().unwrap().iter().map(|r| r["url"].as_str().unwrap().to_string()).collect()
    };
    assert!(urls(&first).iter().any(|u| u.ends_with("/act/missing.json")), "{first}");
    let page = first["page"].as_u64().unwrap();

    let second = env.fixtures.url() + "/act/form.html";
    env.api.ok("POST", "/navigate", Some(json!({"url": second}))).await;
    let now = env.api.ok("GET", "/requests", None).await;
    assert_eq!(now["page"].as_u64(), Some(page + 1), "{now}");
    assert_eq!(urls(&now).first(), Some(&second), "the page's own document first: {now}");
    assert!(!urls(&now).iter().any(|u| u.contains("/act/news.html") || u.contains("missing.json")), "{now}");
    assert!(now["requests"].as_array().unwrap().iter().all(|r| r["page"].as_u64() == Some(page + 1)), "{now}");
    assert!(now["earlierPages"].as_u64().unwrap() >= 2, "the earlier page's are counted: {now}");

    let all = env.api.ok("GET", "/requests?all=true", None).await;
    assert!(urls(&all).iter().any(|u| u.ends_with("/act/missing.json")), "{all}");
    let missing =
        all["requests"].as_array().unwrap().iter().find(|r| r["url"].as_str().unwrap().ends_with("missing.json"));
    assert_eq!(missing.unwrap()["page"].as_u64(), Some(page), "marked with its page: {all}");
    assert!(all.get("earlierPages").is_none(), "{all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialogs_never_deadlock_and_files_upload() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    let tab = env.open("act/page.html").await;
    let snap = env.snapshot_text("").await;
    let r = |needle: &str| ref_of(&snap, needle);

    // Nothing armed: the click happened, and its answer (at once) says the
    // page now shows a dialog; so does the tab list.
    let started = std::time::Instant::now();
    let clicked = act_ok(&env, json!({"kind": "click", "ref": r("button \"Alert\"")})).await;
    assert!(started.elapsed() < Duration::from_secs(5), "no deadlock: {:?}", started.elapsed());
    assert_eq!(clicked["page"]["dialog"], json!({"type": "alert", "message": "Hello!"}), "{clicked}");
    assert!(clicked["page"]["url"].as_str().unwrap().ends_with("/act/page.html"), "{clicked}");
    assert_eq!(clicked["page"]["title"], "Act: page", "the page's title, although its scripts are paused: {clicked}");
    let tabs = env.api.ok("GET", "/tabs", None).await;
    let me = tabs["tabs"].as_array().unwrap().iter().find(|t| t["targetId"] == tab.as_str()).unwrap().clone();
    assert_eq!(me["dialog"]["message"], "Hello!", "{tabs}");
    // Another action while it is open cannot happen: refused at once, with
    // the way out; a snapshot shows the dialog (and keeps the page's refs);
    // the other page reads (whose scripts the dialog stops) are refused.
    let (status, error) = act(&env, json!({"kind": "click", "ref": r("button \"Count\"")})).await;
    assert_eq!((status, error["error"]["code"].as_str()), (409, Some("dialog_open")), "{error}");
    assert_eq!(error["error"]["message"], "a dialog 'Hello!' is open (alert): the page is paused until it is answered");
    assert!(error["error"]["hint"].as_str().unwrap().contains("POST /hooks/dialog"), "{error}");
    let paused = env.api.ok("GET", "/snapshot", None).await;
    assert_eq!(paused["snapshot"], "dialog \"Hello!\" (alert)", "{paused}");
    assert_eq!(paused["dialog"]["message"], "Hello!", "{paused}");
    for (method, path) in [("POST", "/screenshot"), ("POST", "/pdf")] {
        let started = std::time::Instant::now();
        let (status, error) = env.api.call(method, path, None).await;
        assert_eq!((status, error["error"]["code"].as_str()), (409, Some("dialog_open")), "{path}: {error}");
        assert!(started.elapsed() < Duration::from_secs(5), "{path} answered at once: {:?}", started.elapsed());
    }
    let console = env.api.ok("GET", "/console", None).await;
    assert!(console["messages"].is_array(), "the console needs no page script: {console}");
    // Arming answers the open dialog.
    let armed = env.api.ok("POST", "/hooks/dialog", Some(json!({"accept": true}))).await;
    assert_eq!(armed["answered"]["message"], "Hello!", "{armed}");
    eventually("the alert to close", Duration::from_secs(5), || async {
        log(&env, &tab).await.contains(&"alert done".to_string()).then_some(())
    })
    .await;

    // confirm and prompt with nothing armed: answered once the agent arms;
    // the refs of the page's snapshot still work after the dialog.
    let clicked = act_ok(&env, json!({"kind": "click", "ref": r("button \"Confirm\"")})).await;
    assert_eq!(clicked["page"]["dialog"]["type"], "confirm", "{clicked}");
    assert_eq!(clicked["page"]["dialog"]["message"], "Are you sure?", "{clicked}");
    env.api.ok("POST", "/hooks/dialog", Some(json!({"accept": true}))).await;
    let clicked = act_ok(&env, json!({"kind": "click", "ref": r("button \"Prompt\"")})).await;
    assert_eq!(clicked["page"]["dialog"]["type"], "prompt", "{clicked}");
    assert_eq!(clicked["page"]["dialog"]["message"], "Your name?", "{clicked}");
    env.api.ok("POST", "/hooks/dialog", Some(json!({"accept": true, "promptText": "Grace"}))).await;
    eventually("confirm and prompt to be answered", Duration::from_secs(5), || async {
        log(&env, &tab).await.ends_with(&["confirm true".to_string(), "prompt Grace".to_string()]).then_some(())
    })
    .await;

    // An alert with the hook armed: the action goes through.
    env.api.ok("POST", "/hooks/dialog", Some(json!({"accept": true}))).await;
    act_ok(&env, json!({"kind": "click", "ref": r("button \"Alert\"")})).await;
    eventually("the armed alert to be answered", Duration::from_secs(5), || async {
        (log(&env, &tab).await.iter().filter(|l| *l == "alert done").count() == 2).then_some(())
    })
    .await;

    // Armed before: confirm dismissed, prompt answered; the last arm wins.
    env.api.ok("POST", "/hooks/dialog", Some(json!({"accept": true}))).await;
    env.api.ok("POST", "/hooks/dialog", Some(json!({"accept": false}))).await;
    act_ok(&env, json!({"kind": "click", "ref": r("button \"Confirm\"")})).await;
    env.api.ok("POST", "/hooks/dialog", Some(json!({"accept": true, "promptText": "Ada"}))).await;
    act_ok(&env, json!({"kind": "click", "ref": r("button \"Prompt\"")})).await;
    env.api.ok("POST", "/hooks/dialog", Some(json!({"accept": false}))).await;
    act_ok(&env, json!({"kind": "click", "ref": r("button \"Prompt\"")})).await;
    let lines = log(&env, &tab).await;
    assert!(
        lines.ends_with(&["confirm false".to_string(), "prompt Ada".to_string(), "prompt null".to_string()]),
        "{lines:?}"
    );

    // Files: none may be uploaded until the user names folders
    // (uploadRoots); then only from them; checked before arming, then read
    // back by the page.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hello.txt");
    std::fs::write(&file, "file contents\n").unwrap();
    let (status, error) = env.api.call("POST", "/hooks/file-chooser", Some(json!({"paths": [file]}))).await;
    assert_eq!((status, error["error"]["code"].as_str()), (403, Some("not_allowed")), "{error}");
    assert!(error["error"]["hint"].as_str().unwrap().contains("uploadRoots"), "{error}");
    let config = std::fs::read_to_string(env.state.path().join("config.toml")).unwrap();
    let roots = format!("uploadRoots = [{:?}]\n", dir.path().display().to_string());
    std::fs::write(env.state.path().join("config.toml"), roots + &config).unwrap();
    for outside in ["/etc/hostname", "/no/such/file.txt"] {
        let (status, error) = env.api.call("POST", "/hooks/file-chooser", Some(json!({"paths": [outside]}))).await;
        assert_eq!(status, 403, "{outside} is outside uploadRoots, existing or not: {error}");
    }
    let sneaky = format!("{}/../../etc/hostname", dir.path().display());
    let (status, _) = env.api.call("POST", "/hooks/file-chooser", Some(json!({"paths": [sneaky]}))).await;
    assert_eq!(status, 403, "no way out with ..");
    #[cfg(unix)]
    {
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        let (status, _) = env.api.call("POST", "/hooks/file-chooser", Some(json!({"paths": [link]}))).await;
        assert_eq!(status, 403, "nor with a link");
    }
    let missing = dir.path().join("missing.txt");
    let (status, error) = env.api.call("POST", "/hooks/file-chooser", Some(json!({"paths": [missing]}))).await;
    assert!(status == 400 && error["error"]["message"].as_str().unwrap().contains("missing.txt"), "{error}");
    env.api.ok("POST", "/hooks/file-chooser", Some(json!({"paths": [file]}))).await;
    act_ok(&env, json!({"kind": "click", "ref": r("button \"Upload\"")})).await;
    eventually("the page to read the file", Duration::from_secs(5), || async {
        log(&env, &tab).await.contains(&"file hello.txt: file contents".to_string()).then_some(())
    })
    .await;
    // With a ref, the files are set on that input directly.
    let other = dir.path().join("second.txt");
    std::fs::write(&other, "second").unwrap();
    env.api.ok("POST", "/hooks/file-chooser", Some(json!({"paths": [other], "ref": r("button \"Upload\"")}))).await;
    eventually("the second file", Duration::from_secs(5), || async {
        log(&env, &tab).await.contains(&"file second.txt: second".to_string()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdf_and_labelled_screenshots() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    let tab = env.open("snap/article.html").await;

    let pdf = env.api.ok("POST", "/pdf", None).await;
    let path = pdf["path"].as_str().unwrap();
    assert!(pdf["pages"].as_u64().unwrap() >= 1, "{pdf}");
    assert!(std::fs::read(path).unwrap().starts_with(b"%PDF"), "a PDF file");
    let text = std::process::Command::new("pdftotext").args([path, "-"]).output().expect("pdftotext (poppler-utils)");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("The Daily Relay"), "pdftotext finds the page's text: {text:.300}");

    // Labels need a snapshot; then orange boxes are in the picture, and gone after.
    let (status, error) = env.api.call("POST", "/screenshot", Some(json!({"labels": true}))).await;
    assert_eq!(status, 400, "{error}");
    env.api.ok("GET", "/snapshot", None).await;
    let plain = env.api.ok("POST", "/screenshot", None).await;
    let labelled = env.api.ok("POST", "/screenshot", Some(json!({"labels": true}))).await;
    let labels = labelled["labels"].as_u64().unwrap();
    assert!(labels > 3 && labels <= 150, "{labelled}");
    assert!(labelled["skipped"].as_u64().unwrap() > 0, "refs below the fold are skipped: {labelled}");
    let orange = |path: &str| orange_pixels(&std::fs::read(path).unwrap());
    assert_eq!(orange(plain["path"].as_str().unwrap()), 0, "the page itself has no label orange");
    assert!(orange(labelled["path"].as_str().unwrap()) > 200, "label boxes are drawn");
    assert_eq!(env.eval(&tab, "document.querySelectorAll('[data-browser-relay-labels]').length").await, 0);

    // 300 refs in the viewport: 150 labels at most, the rest reported.
    env.open("act/grid.html").await;
    let refs =
        env.snapshot_text("interactive=true").await.lines().filter(|l| e2e::control_env::line_ref(l).is_some()).count();
    assert_eq!(refs, 300);
    let labelled = env.api.ok("POST", "/screenshot", Some(json!({"labels": true}))).await;
    assert_eq!((labelled["labels"].as_u64(), labelled["skipped"].as_u64()), (Some(150), Some(150)), "{labelled}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_of_elements_at_the_edges_are_drawn_inside_the_viewport() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    let tab = env.open("control/labels.html").await;
    let snapshot = env.snapshot_text("").await;
    // The page records where each label is drawn while the overlay is up
    // (it is taken down before the screenshot's answer).
    let watch = "window.drawn = null; new MutationObserver(() => { \
        const host = document.querySelector('[data-browser-relay-labels]'); \
        if (!host || window.drawn) return; \
        window.drawn = Array.from(host.querySelectorAll('span'), (s) => { const r = s.getBoundingClientRect(); \
          return {ref: s.textContent, left: r.left, top: r.top, right: r.right, bottom: r.bottom}; }); \
      }).observe(document.documentElement, {childList: true}); true";
    env.eval(&tab, watch).await;
    let labelled = env.api.ok("POST", "/screenshot", Some(json!({"labels": true}))).await;
    assert_eq!(labelled["labels"], 6, "{labelled}");
    let drawn = env.eval(&tab, "window.drawn").await;
    let viewport =
        env.eval(&tab, "[document.documentElement.clientWidth, document.documentElement.clientHeight]").await;
    let (width, height) = (viewport[0].as_f64().unwrap(), viewport[1].as_f64().unwrap());
    let labels = drawn.as_array().expect("the overlay was seen");
    assert_eq!(labels.len(), 6, "{drawn}");
    for label in labels {
        let edge = |key: &str| label[key].as_f64().unwrap();
        assert!(edge("bottom") - edge("top") >= 14.0, "a whole label: {label}");
        assert!(
            edge("left") >= 0.0 && edge("top") >= 0.0 && edge("right") <= width && edge("bottom") <= height,
            "{label} inside {width}×{height}"
        );
    }
    // At the top edge the label goes below its box instead of above it.
    let top_left = ref_of(&snapshot, "button \"Top left\"");
    let label = labels.iter().find(|l| l["ref"] == top_left.as_str()).unwrap();
    assert!(label["top"].as_f64().unwrap() >= 30.0, "below the 30px button: {label}");
}

/// Pixels of the labels' orange (#FF4500, allowing for compression).
fn orange_pixels(png_bytes: &[u8]) -> usize {
    let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buffer = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buffer).unwrap();
    let channels = info.color_type.samples();
    buffer[..info.buffer_size()]
        .chunks(channels)
        .filter(|p| p[0] > 230 && (50..=90).contains(&p[1]) && p[2] < 30)
        .count()
}
