//! The control API end to end on the managed driver: real Chromium launched
//! by `POST /start`, fixture pages, every route of part 1; refs across
//! re-renders, replacement, navigation and an engine reconnect.

use std::time::Duration;

use e2e::ControlEnv;
use e2e::control_env::{eventually, line_ref, ref_of};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_session_start_tabs_navigate_screenshot_console_stop() {
    let env = ControlEnv::start().await.unwrap();

    let started = env.start_browser().await;
    assert_eq!((started["running"].as_bool(), started["connected"].as_bool()), (Some(true), Some(true)), "{started}");
    assert!(started["cdpEndpoint"].as_str().unwrap().contains("/profiles/managed/"), "{started}");
    assert_eq!(env.start_browser().await["running"], true, "a second start is a no-op");

    // Open a page: it becomes the current tab.
    let console_tab = env.open("control/console.html").await;
    let tabs = env.api.ok("GET", "/tabs", None).await;
    let listed = tabs["tabs"].as_array().unwrap();
    let me = listed.iter().find(|t| t["targetId"] == console_tab.as_str()).expect("the new tab is listed");
    assert_eq!(me["title"], "Console", "{tabs}");
    assert_eq!(me["type"], "page");
    assert_eq!(me["active"], true);
    assert_eq!(listed.iter().filter(|t| t["active"] == true).count(), 1, "one current tab: {tabs}");

    // Console: collected since the engine saw the tab, newest kept, by level.
    let console = eventually("the timer's page error", Duration::from_secs(10), || async {
        let console = env.api.ok("GET", "/console", None).await;
        (!console["pageErrors"].as_array().unwrap().is_empty()).then_some(console)
    })
    .await;
    let texts: Vec<&str> = console["messages"].as_array().unwrap().iter().filter_map(|m| m["text"].as_str()).collect();
    assert!(texts.contains(&"hello from the page 42 Object"), "{console}");
    assert!(texts.contains(&"careful") && texts.contains(&"something failed"), "{console}");
    assert!(console["pageErrors"][0]["message"].as_str().unwrap().contains("boom from a timer"), "{console}");
    // The page's own calls, and Chrome's messages (a missing favicon, say).
    let errors_only = env.api.ok("GET", "/console?level=error", None).await;
    let calls: Vec<(&str, &str)> = errors_only["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["type"] != "network")
        .filter_map(|m| Some((m["level"].as_str()?, m["text"].as_str()?)))
        .collect();
    assert_eq!(calls, [("error", "something failed")], "{errors_only}");
    // (A message may still arrive between the two reads: read again then.)
    eventually("limit to keep the newest", Duration::from_secs(5), || async {
        let limited = env.api.ok("GET", "/console?level=warning&limit=1", None).await;
        let warnings_up = env.api.ok("GET", "/console?level=warning", None).await;
        let newest = warnings_up["messages"].as_array().unwrap().last().cloned();
        (limited["messages"] == json!([newest?])).then_some(())
    })
    .await;

    // Navigate the current tab; the result says where it landed.
    let refs_url = env.fixture("control/refs.html");
    let navigated = env.api.ok("POST", "/navigate", Some(json!({"url": refs_url}))).await;
    assert_eq!(navigated["targetId"], console_tab.as_str());
    assert_eq!((navigated["url"].as_str(), navigated["title"].as_str()), (Some(refs_url.as_str()), Some("Refs")));
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let unreachable = format!("http://127.0.0.1:{closed_port}/unreachable");
    let (status, failed) = env.api.call("POST", "/navigate", Some(json!({"url": unreachable}))).await;
    assert_eq!((status, failed["error"]["code"].as_str()), (502, Some("navigation_failed")), "{failed}");
    assert!(failed["error"]["message"].as_str().unwrap().contains("ERR_CONNECTION_REFUSED"), "{failed}");
    env.api.ok("POST", "/navigate", Some(json!({"url": refs_url, "waitUntil": "domcontentloaded"}))).await;
    // The user's files are not pages an agent may open, unless the user
    // says so (allowFileUrls): with evaluate off, a snapshot would still
    // read them.
    let secret = env.state.path().join("secret.html");
    std::fs::write(&secret, "<title>Secret</title><p>the user's file</p>").unwrap();
    let file_url = format!("file://{}", secret.display());
    for (method, path, body) in [
        ("POST", "/navigate", json!({"url": file_url})),
        ("POST", "/tabs/open", json!({"url": file_url.to_uppercase()})),
    ] {
        let (status, refused) = env.api.call(method, path, Some(body)).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (403, Some("not_allowed")), "{path}: {refused}");
        assert!(refused["error"]["hint"].as_str().unwrap().contains("allowFileUrls = true"), "{refused}");
    }
    let config = std::fs::read_to_string(env.state.path().join("config.toml")).unwrap();
    std::fs::write(env.state.path().join("config.toml"), format!("allowFileUrls = true\n{config}")).unwrap();
    let opened = env.api.ok("POST", "/navigate", Some(json!({"url": file_url}))).await;
    assert_eq!(opened["title"], "Secret", "allowed once the user says so");
    std::fs::write(env.state.path().join("config.toml"), config).unwrap();
    env.api.ok("POST", "/navigate", Some(json!({"url": refs_url}))).await;
    // The file is in the tab's history now: going back to it, once the
    // user took the leave back, is refused too.
    let (status, refused) = env.api.call("POST", "/back", None).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (403, Some("not_allowed")), "back to a file: {refused}");
    let here = env.api.ok("GET", "/tabs", None).await;
    assert!(here["tabs"].as_array().unwrap().iter().any(|t| t["url"] == refs_url.as_str()), "stayed: {here}");

    // Screenshots: viewport, full page, an element by ref, raw bytes.
    let viewport = env.api.ok("POST", "/screenshot", None).await;
    let path = std::path::PathBuf::from(viewport["path"].as_str().unwrap());
    assert!(path.starts_with(env.state.path().join("media")), "{viewport}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            (mode(&path), mode(&env.state.path().join("media"))),
            (0o600, 0o700),
            "the user's pages, the user's alone"
        );
    }
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG file");
    assert_eq!(viewport["bytes"].as_u64(), Some(bytes.len() as u64));
    let (width, height) = (viewport["width"].as_u64().unwrap(), viewport["height"].as_u64().unwrap());
    assert!(width >= 300 && height >= 200, "{viewport}");

    let full = env.api.ok("POST", "/screenshot", Some(json!({"fullPage": true}))).await;
    assert!(full["height"].as_u64().unwrap() > 1500, "the 1500px spacer is in a full-page shot: {full}");

    let snapshot = env.snapshot_text("interactive=true").await;
    let save = ref_of(&snapshot, "button \"Save\"");
    let element = env.api.ok("POST", "/screenshot", Some(json!({"ref": save}))).await;
    assert_eq!((element["width"].as_u64(), element["height"].as_u64()), (Some(120), Some(40)), "{element}");
    let far = ref_of(&snapshot, "button \"Far away\"");
    let far_shot = env.api.ok("POST", "/screenshot", Some(json!({"ref": far, "type": "jpeg", "quality": 50}))).await;
    assert_eq!(far_shot["type"], "image/jpeg", "{far_shot}");
    assert!(std::fs::read(far_shot["path"].as_str().unwrap()).unwrap().starts_with(&[0xFF, 0xD8]));
    let by_selector = env.api.ok("POST", "/screenshot", Some(json!({"selector": "#save"}))).await;
    assert_eq!(by_selector["width"].as_u64(), Some(120), "{by_selector}");
    let (status, missing) = env.api.call("POST", "/screenshot", Some(json!({"selector": "#nope"}))).await;
    assert_eq!((status, missing["error"]["code"].as_str()), (404, Some("no_such_element")), "{missing}");

    let raw = env.api.request("POST", "/screenshot", &[("Accept", "image/jpeg")], None).await;
    assert_eq!(raw.status, 200);
    assert_eq!(raw.header("content-type"), Some("image/jpeg"));
    assert!(raw.body.starts_with(&[0xFF, 0xD8]), "raw JPEG bytes");
    assert!(raw.header("x-screenshot-path").is_some_and(|p| std::path::Path::new(p).exists()));

    // A second tab: with two tabs the current one is still targeted.
    let second = env.open("index.html").await;
    assert_eq!(env.api.ok("GET", "/snapshot", None).await["targetId"], second.as_str(), "the last opened is current");
    env.api.ok("POST", "/tabs/focus", Some(json!({"targetId": console_tab}))).await;
    assert_eq!(env.api.ok("GET", "/snapshot", None).await["targetId"], console_tab.as_str(), "focus makes current");
    let explicit = env.api.ok("GET", &format!("/snapshot?targetId={second}"), None).await;
    assert!(explicit["snapshot"].as_str().unwrap().contains("Fixture Index"), "{explicit}");

    let (status, unknown) = env.api.call("GET", "/snapshot?targetId=NOPE", None).await;
    assert_eq!((status, unknown["error"]["code"].as_str()), (404, Some("unknown_tab")), "{unknown}");
    assert!(unknown["error"]["message"].as_str().unwrap().contains(&second), "lists the tabs: {unknown}");

    env.api.ok("DELETE", &format!("/tabs/{second}"), None).await;
    eventually("the closed tab to leave /tabs", Duration::from_secs(5), || async {
        let tabs = env.api.ok("GET", "/tabs", None).await;
        (!tabs["tabs"].as_array().unwrap().iter().any(|t| t["targetId"] == second.as_str())).then_some(())
    })
    .await;

    let status = env.api.ok("GET", "/?profile=managed", None).await;
    assert_eq!(status["state"], "running", "{status}");
    assert!(status["tabs"].as_u64().unwrap() >= 1, "{status}");

    let stopped = env.api.ok("POST", "/stop", None).await;
    assert_eq!(stopped["running"], false, "{stopped}");
    let (status, body) = env.api.call("GET", "/tabs", None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("not_running")), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refs_survive_rerenders_and_reconnects_fall_back_by_role_and_name_and_go_stale() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    let tab = env.open("control/refs.html").await;
    let engine = env.engine();
    let snapshot = env.snapshot_text("").await;
    let save = ref_of(&snapshot, "button \"Save\"");
    let cancel = ref_of(&snapshot, "button \"Cancel\"");
    let far = ref_of(&snapshot, "button \"Far away\"");

    let first = engine.ref_box(&Default::default(), &save).await.unwrap();
    assert_eq!((first.width, first.height), (120.0, 40.0), "{first:?}");
    for spelling in [format!("@{save}"), format!("ref={save}")] {
        assert_eq!(engine.ref_box(&Default::default(), &spelling).await.unwrap(), first, "{spelling}");
    }

    // Far below the fold: resolving scrolls it into the viewport.
    let far_box = engine.ref_box(&Default::default(), &far).await.unwrap();
    let viewport_height = env.eval(&tab, "innerHeight").await.as_f64().unwrap();
    assert!(far_box.y >= 0.0 && far_box.y + far_box.height <= viewport_height, "{far_box:?} in {viewport_height}");
    assert!(env.eval(&tab, "scrollY").await.as_f64().unwrap() > 0.0, "the page scrolled");
    env.eval(&tab, "scrollTo(0, 0)").await;

    // The ref map lives in an isolated world: the page can neither see it
    // nor forge it.
    assert_eq!(env.eval(&tab, "typeof window.__browserRelayState").await, "undefined");
    env.eval(&tab, "window.__browserRelayState = {refs: new Map([['e1', document.body]])}; 1").await;
    assert_eq!(engine.ref_box(&Default::default(), &save).await.unwrap(), first, "a forged map changes nothing");

    // A re-render around the node keeps it.
    env.eval(&tab, "rerenderKeep()").await;
    assert_eq!(engine.ref_box(&Default::default(), &save).await.unwrap(), first);

    // The engine's connection drops and comes back: refs are kept per tab.
    engine.disconnect("managed").await;
    assert_eq!(engine.ref_box(&Default::default(), &save).await.unwrap(), first, "refs survive a reconnect");

    // Replaced by an identical copy: found again by role, name and position.
    env.eval(&tab, "replaceIdentical()").await;
    assert_eq!(engine.ref_box(&Default::default(), &save).await.unwrap(), first, "role+name fallback");
    assert!(engine.ref_box(&Default::default(), &cancel).await.is_ok());

    // Gone for good: stale.
    env.eval(&tab, "removeSave()").await;
    let error = engine.ref_box(&Default::default(), &save).await.unwrap_err();
    assert_eq!(error.to_string(), format!("ref {save} is stale: take a new snapshot"));

    // Unknown and malformed refs.
    assert_eq!(
        engine.ref_box(&Default::default(), "e999").await.unwrap_err().to_string(),
        "no ref e999 in the last snapshot of this tab"
    );
    assert!(engine.ref_box(&Default::default(), "button").await.unwrap_err().to_string().contains("is not a ref"));

    // A navigation makes every ref stale, even where an identical element
    // exists on the new document.
    env.api.ok("POST", "/navigate", Some(json!({"url": env.fixture("control/refs.html")}))).await;
    let error = engine.ref_box(&Default::default(), &cancel).await.unwrap_err();
    assert_eq!(error.to_string(), format!("ref {cancel} is stale: take a new snapshot"));

    // A new snapshot replaces the tab's refs.
    let fresh = env.snapshot_text("").await;
    let save_again = ref_of(&fresh, "button \"Save\"");
    assert!(engine.ref_box(&Default::default(), &save_again).await.is_ok());
}

/// `e7` → 7.
fn number(element_ref: &str) -> u32 {
    element_ref.trim_start_matches('e').parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_snapshot_keeps_the_refs_it_does_not_cover() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    let tab = env.open("control/refs.html").await;
    let full = env.snapshot_text("").await;
    let (save, cancel, far) =
        (ref_of(&full, "button \"Save\""), ref_of(&full, "button \"Cancel\""), ref_of(&full, "button \"Far away\""));
    let highest = full.lines().filter_map(line_ref).map(number).max();

    // A new button in the toolbar, then a snapshot of the toolbar only: its
    // buttons keep their refs, the new one gets a number never used before.
    env.eval(&tab, "document.getElementById('toolbar').insertAdjacentHTML('beforeend', '<button>Undo</button>')").await;
    let partial = env.snapshot_text("selector=%23toolbar").await;
    assert!(!partial.contains("Far away"), "{partial}");
    assert_eq!((ref_of(&partial, "\"Save\""), ref_of(&partial, "\"Cancel\"")), (save.clone(), cancel.clone()));
    let undo = ref_of(&partial, "button \"Undo\"");
    assert!(Some(number(&undo)) > highest, "{undo} is new: {full}");

    // So does a snapshot of the first few nodes only (up to Save's line):
    // the refs past its cut stay, the ones it shows keep their numbers.
    let nodes = 1 + full.lines().position(|line| line.contains("button \"Save\"")).unwrap();
    let first_few = env.api.ok("GET", &format!("/snapshot?limit={nodes}"), None).await;
    let shown = first_few["snapshot"].as_str().unwrap();
    assert!(!shown.contains("Far away") && shown.contains(&format!("[{save}]")), "{first_few}");
    assert!(first_few["notes"].to_string().contains(&format!("cut at limit={nodes}")), "{first_few}");

    // A ref of the full snapshot outside the selector and the cut still acts.
    let clicked = env.api.ok("POST", "/act", Some(json!({"kind": "click", "ref": far}))).await;
    assert_eq!(clicked["ok"], true, "{clicked}");
    assert_eq!(env.eval(&tab, "document.getElementById('status').textContent").await, "Far clicked");
    env.api.ok("POST", "/act", Some(json!({"kind": "click", "ref": undo}))).await;
    assert!(env.engine().ref_box(&Default::default(), &save).await.is_ok());

    // A limit that cuts nothing shows the whole page: its refs replace the
    // tab's, each element keeping its number, and a removed element's ref
    // goes (a merge would keep it).
    env.eval(&tab, "document.querySelector('#toolbar button:nth-of-type(2)').remove()").await;
    let whole = env.api.ok("GET", "/snapshot?limit=10000", None).await;
    let whole = whole["snapshot"].as_str().unwrap();
    assert!(!whole.contains("Cancel") && whole.contains("Far away"), "{whole}");
    assert_eq!((ref_of(whole, "button \"Undo\""), ref_of(whole, "button \"Save\"")), (undo.clone(), save.clone()));
    let error = env.engine().ref_box(&Default::default(), &cancel).await.unwrap_err();
    assert!(error.to_string().contains("no ref"), "{error}");

    // A full snapshot replaces the tab's refs: numbering starts again.
    let again = env.snapshot_text("").await;
    assert_eq!(ref_of(&again, "button \"Save\""), save, "the same element, the same place in the page");
    let error = env.engine().ref_box(&Default::default(), &format!("e{}", number(&undo) + 1)).await.unwrap_err();
    assert!(error.to_string().contains("no ref"), "{error}");
}

/// `diff: true` answers what changed since the last snapshot, in its
/// lines, and the refs the agent holds stay valid (issue 43).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_with_diff_tells_what_changed_and_keeps_the_refs() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    let tab = env.open("control/refs.html").await;
    let full = env.snapshot_text("").await;
    let (save, far) = (ref_of(&full, "button \"Save\""), ref_of(&full, "button \"Far away\""));
    let highest = full.lines().filter_map(line_ref).map(number).max();

    // A button comes in before Save (a full snapshot would number it e1
    // and move every ref after it); the click changes the status line.
    env.eval(&tab, "document.getElementById('toolbar').insertAdjacentHTML('afterbegin', '<button>Undo</button>')")
        .await;
    let clicked = env.api.ok("POST", "/act", Some(json!({"kind": "click", "ref": far, "diff": true}))).await;
    let changes = clicked["changes"].as_str().unwrap_or_else(|| panic!("{clicked}"));
    assert!(changes.lines().any(|l| l == "+paragraph: Far clicked"), "{changes}");
    assert!(changes.lines().any(|l| l == "-paragraph: Ready"), "{changes}");
    let undo = ref_of(changes, "button \"Undo\"");
    assert!(changes.lines().any(|l| l.starts_with('+') && l.contains("Undo")), "{changes}");
    assert!(Some(number(&undo)) > highest, "a new element gets a new number: {changes}");
    assert!(!changes.contains("Save") && !changes.contains("Far away"), "what did not change is not told: {changes}");
    assert!(clicked.get("snapshot").is_none(), "the page is not sent again: {clicked}");

    // The refs the agent held still act, and so does the new one.
    env.api.ok("POST", "/act", Some(json!({"kind": "click", "ref": save}))).await;
    env.api.ok("POST", "/act", Some(json!({"kind": "click", "ref": undo}))).await;
    assert!(env.engine().ref_box(&Default::default(), &far).await.is_ok());

    // Nothing changed since: an empty diff.
    let again = env.api.ok("POST", "/act", Some(json!({"kind": "click", "ref": save, "diff": true}))).await;
    assert_eq!(again["changes"], "", "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_of_any_route_holds_the_token() {
    let env = ControlEnv::start().await.expect("environment");
    let token = env.token.as_str().to_string();
    let started = env.start_browser().await;
    assert!(!started.to_string().contains(&token), "{started}");
    let tab = env.open("form.html").await;
    env.snapshot_text("").await;
    let requests: [(&str, String, Option<serde_json::Value>); 15] = [
        ("GET", "/".into(), None),
        ("GET", "/?profile=managed".into(), None),
        ("GET", "/profiles".into(), None),
        ("POST", "/start".into(), None),
        ("GET", "/tabs".into(), None),
        ("POST", "/tabs/focus".into(), Some(json!({"targetId": tab}))),
        ("POST", "/navigate".into(), Some(json!({"url": env.fixture("form.html")}))),
        ("GET", "/snapshot".into(), None),
        ("GET", "/find?text=e".into(), None),
        ("POST", "/screenshot".into(), None),
        ("GET", "/console".into(), None),
        ("POST", "/act".into(), Some(json!({"kind": "press", "key": "Tab"}))),
        ("POST", "/hooks/dialog".into(), Some(json!({"accept": true}))),
        ("POST", "/pdf".into(), None),
        ("GET", "/no-such-route".into(), None),
    ];
    for (method, path, body) in requests {
        let response = env.api.request(method, &path, &[], body.as_ref()).await;
        let headers = format!("{:?}", response.headers);
        assert!(!response.text().contains(&token) && !headers.contains(&token), "{method} {path}: {}", response.text());
    }
    let status = env.api.ok("GET", "/?profile=managed", None).await;
    assert_eq!(status["cdpUrlCommand"], "browser-relay cdp-url --profile managed", "{status}");
    let stopped = env.api.request("POST", "/stop", &[], None).await;
    assert!(!stopped.text().contains(&token));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_requests_their_bodies_chromes_own_messages_and_history() {
    let env = ControlEnv::start().await.unwrap();
    env.start_browser().await;
    let tab = env.open("index.html").await;
    let index = env.fixture("index.html");
    // The page a tab was opened at is in its log from its first request
    // (the engine listens before the tab loads it).
    let opened = env.api.ok("GET", "/requests?resourceType=Document", None).await;
    let first = &opened["requests"][0];
    assert_eq!((first["url"].as_str(), first["status"].as_u64()), (Some(index.as_str()), Some(200)), "{opened}");

    // A first page has nothing forward of it.
    let (status, end) = env.api.call("POST", "/forward", None).await;
    assert_eq!((status, end["error"]["code"].as_str()), (409, Some("no_history")), "{end}");
    assert!(end["error"]["hint"].as_str().unwrap().contains("POST /navigate"), "{end}");

    // The page loads a script and an image, and fetches one JSON file that
    // exists and one that does not.
    let page = env.fixture("network/page.html");
    env.api.ok("POST", "/navigate", Some(json!({"url": page}))).await;
    env.api.ok("POST", "/act", Some(json!({"kind": "wait", "text": "fetched 3 items, missing 404"}))).await;
    let ends_with = |request: &serde_json::Value, suffix: &str| request["url"].as_str().unwrap().ends_with(suffix);
    let list = eventually("both fetches to finish in the log", Duration::from_secs(10), || async {
        let list = env.api.ok("GET", "/requests", None).await;
        let finished = |suffix: &str| {
            list["requests"].as_array().unwrap().iter().any(|r| ends_with(r, suffix) && r["durationMs"].is_number())
        };
        (finished("/api/missing.json") && finished("network/data.json")).then_some(list)
    })
    .await;
    assert_eq!(list["targetId"], tab.as_str());
    let requests = list["requests"].as_array().unwrap();
    assert_eq!(
        (list["total"].as_u64(), list["shown"].as_u64()),
        (Some(requests.len() as u64), Some(requests.len() as u64))
    );
    let find = |suffix: &str| {
        requests.iter().find(|r| ends_with(r, suffix)).unwrap_or_else(|| panic!("no request for {suffix}: {list}"))
    };
    let missing = find("/api/missing.json");
    assert_eq!(
        (missing["status"].as_u64(), missing["method"].as_str(), missing["resourceType"].as_str()),
        (Some(404), Some("GET"), Some("Fetch")),
        "{missing}"
    );
    assert!(missing.get("failure").is_none(), "an HTTP error is an answer, not a network failure: {missing}");
    for (suffix, kind) in
        [("network/page.html", "Document"), ("network/app.js", "Script"), ("network/dot.png", "Image")]
    {
        let request = find(suffix);
        assert_eq!(
            (request["status"].as_u64(), request["resourceType"].as_str()),
            (Some(200), Some(kind)),
            "{request}"
        );
    }
    assert!(find("network/dot.png")["size"].as_u64().unwrap() > 73, "the image's bytes and headers: {list}");
    assert!(find("network/page.html")["startTime"].as_f64().unwrap() > 1.6e12, "ms since the epoch: {list}");

    // Filters: failures, a URL's text, a type, the newest N.
    let failed = env.api.ok("GET", "/requests?failed=true", None).await;
    let failed = failed["requests"].as_array().unwrap();
    assert!(failed.iter().any(|r| ends_with(r, "/api/missing.json")), "{failed:?}");
    assert!(failed.iter().all(|r| r["status"].as_u64().is_none_or(|s| s >= 400)), "{failed:?}");
    let data = env.api.ok("GET", "/requests?url=data.json", None).await;
    assert_eq!(data["shown"], 1, "{data}");
    let images = env.api.ok("GET", "/requests?resourceType=image", None).await;
    assert!(images["requests"].as_array().unwrap().iter().all(|r| r["resourceType"] == "Image"), "{images}");
    let newest = env.api.ok("GET", "/requests?limit=1", None).await;
    assert_eq!((newest["shown"].as_u64(), newest["total"].as_u64()), (Some(1), Some(requests.len() as u64)));

    // Bodies on demand: the JSON as text, the image in base64.
    let data_id = data["requests"][0]["requestId"].as_str().unwrap();
    let body = env.api.ok("GET", &format!("/requests/body?requestId={data_id}"), None).await;
    let file = std::fs::read_to_string(e2e::fixtures::fixtures_dir().join("network/data.json")).unwrap();
    assert_eq!(
        (body["mimeType"].as_str(), body["base64Encoded"].as_bool(), body["truncated"].as_bool()),
        (Some("application/json"), Some(false), Some(false)),
        "{body}"
    );
    assert_eq!((body["body"].as_str(), body["bytes"].as_u64()), (Some(file.as_str()), Some(file.len() as u64)));
    let image_id = find("network/dot.png")["requestId"].as_str().unwrap();
    let image = env.api.ok("GET", &format!("/requests/body?requestId={image_id}"), None).await;
    assert_eq!((image["base64Encoded"].as_bool(), image["bytes"].as_u64()), (Some(true), Some(73)), "{image}");
    let (status, unknown) = env.api.call("GET", "/requests/body?requestId=nope", None).await;
    assert_eq!((status, unknown["error"]["code"].as_str()), (404, Some("unknown_request")), "{unknown}");
    assert!(unknown["error"]["hint"].as_str().unwrap().contains("GET /requests"), "{unknown}");

    // Chrome's own message about the 404 is in the console.
    let console = eventually("Chrome's failed-load message", Duration::from_secs(10), || async {
        let console = env.api.ok("GET", "/console", None).await;
        let about_missing =
            |m: &&serde_json::Value| m["location"].as_str().is_some_and(|l| l.ends_with("/api/missing.json"));
        let found = console["messages"].as_array().unwrap().iter().find(about_missing).cloned();
        found.map(|message| (message, console))
    })
    .await;
    let (message, console) = console;
    assert_eq!((message["level"].as_str(), message["type"].as_str()), (Some("error"), Some("network")), "{console}");
    assert!(message["text"].as_str().unwrap().contains("Failed to load resource"), "{message}");
    assert!(message["text"].as_str().unwrap().contains("404"), "{message}");

    // History: a same-document entry, the previous page, and back again.
    let fragment = format!("{page}#details");
    env.api.ok("POST", "/navigate", Some(json!({"url": fragment}))).await;
    let back = env.api.ok("POST", "/back", None).await;
    assert_eq!((back["targetId"].as_str(), back["url"].as_str()), (Some(tab.as_str()), Some(page.as_str())), "{back}");
    let back = env.api.ok("POST", "/back", None).await;
    assert_eq!((back["url"].as_str(), back["title"].as_str()), (Some(index.as_str()), Some("Fixture Index")), "{back}");
    // A tab opens at about:blank, then loads its page (as Playwright's do).
    let blank = env.api.ok("POST", "/back", None).await;
    assert_eq!(blank["url"], "about:blank", "{blank}");
    let (status, start) = env.api.call("POST", "/back", None).await;
    assert_eq!((status, start["error"]["code"].as_str()), (409, Some("no_history")), "{start}");
    env.api.ok("POST", "/forward", None).await;
    let forward = env.api.ok("POST", "/forward", Some(json!({"waitUntil": "domcontentloaded"}))).await;
    assert_eq!((forward["url"].as_str(), forward["title"].as_str()), (Some(page.as_str()), Some("Network")));
    let forward = env.api.ok("POST", "/forward", None).await;
    assert_eq!(forward["url"].as_str(), Some(fragment.as_str()), "{forward}");
    let (status, end) = env.api.call("POST", "/forward", None).await;
    assert_eq!((status, end["error"]["code"].as_str()), (409, Some("no_history")), "{end}");
}
