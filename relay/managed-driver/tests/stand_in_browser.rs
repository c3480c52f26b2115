//! The managed driver's own launch, pipe, readiness and stop, for real, on
//! every system the tests run on, against `support/pipe_browser.rs`, a
//! stand-in that takes the pipe as Chrome does (fds 3 and 4 on Unix,
//! `--remote-debugging-io-pipes` handles on Windows), reads its arguments
//! and starts a helper process as Chrome does. On Windows it also tries a
//! handle of serve's it must not have been given. On Linux the real Chrome
//! runs too (`tests/tests/e2e_managed.rs`); on Windows (under Wine) this is
//! the managed driver's only run with a browser on the other end.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use managed_driver::{ManagedBrowsers, State};
use settings::Config;

/// The stand-in, which Cargo builds for this test.
fn stand_in() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pipe-browser-stand-in"))
}

/// The helper's heartbeat: its count, or `None` before its first beat.
fn beat(dir: &std::path::Path) -> Option<u32> {
    std::fs::read_to_string(dir.join("helper.beat")).ok()?.trim().parse().ok()
}

/// Whether the helper beats within `within` (it beats every 20 ms).
async fn helper_beats(dir: &std::path::Path, within: Duration) -> bool {
    let before = beat(dir);
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        // A process of another program gives no event to await.
        tokio::time::sleep(Duration::from_millis(20)).await;
        if beat(dir).is_some() && beat(dir) != before {
            return true;
        }
    }
    false
}

/// Arguments a profile may pass that a Windows command line must quote and
/// escape for the browser to split them back as they were: spaces, quotes,
/// backslashes before a quote or at the end, an empty one, beyond ASCII.
const AWKWARD_ARGS: [&str; 7] = [
    r#"--quoted="a b" c"#,
    r"--trailing=C:\Program Files\",
    r#"--slashes=a\\"b"#,
    r"--plain=C:\dir\",
    "",
    r#"""#,
    "--name=Jos\u{e9} \u{2603}",
];

/// A stand-in browser installed where a desktop puts one (the browser under
/// a folder with spaces, `C:\Program Files\Google\Chrome\Application`, the
/// state in a home folder whose name has a space and a letter beyond
/// ASCII), as the profile `standin` with `args`: the launch must hand
/// every path and argument to the browser intact (on Windows, one command
/// line that the browser splits again).
fn stand_in_profile(args: &[&str]) -> (tempfile::TempDir, ManagedBrowsers, settings::Profile) {
    let root = tempfile::tempdir().unwrap();
    let installed = root.path().join("Program Files").join("Stand In");
    std::fs::create_dir_all(&installed).unwrap();
    let browser = installed.join(stand_in().file_name().unwrap());
    std::fs::copy(stand_in(), &browser).unwrap();
    let state = root.path().join("Jos\u{e9} Smith").join(".browser-relay");
    std::fs::create_dir_all(&state).unwrap();
    // TOML's basic strings, escaped as JSON escapes them.
    let args = serde_json::to_string(args).unwrap();
    let toml = format!(
        "[profiles.standin]\ndriver = \"managed\"\nheadless = true\nexecutablePath = {:?}\nargs = {args}\n",
        browser.display().to_string()
    );
    std::fs::write(state.join("config.toml"), toml).unwrap();
    let profile = Config::load(&state).unwrap().profile(Some("standin")).unwrap().clone();
    let browsers = ManagedBrowsers::new(&state);
    (root, browsers, profile)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_on_the_pipe_starts_answers_and_stops_with_its_helpers() {
    let (_root, browsers, profile) = stand_in_profile(&AWKWARD_ARGS);

    let status = browsers.start(&profile).await.expect("the stand-in becomes ready over the pipe");
    assert_eq!(status.state, State::Running, "{status:?}");
    assert_eq!(status.browser_version.as_deref(), Some("PipeBrowser/1.0"), "read over the pipe");
    let pid = status.pid.expect("a pid");
    let record = browsers.record("standin").expect("run.json");
    assert_eq!(record.browser_id, "pipe-browser");
    let dir = browsers.user_data_dir("standin");
    assert!(helper_beats(&dir, Duration::from_secs(10)).await, "the stand-in's helper runs");
    let argv: Vec<String> = serde_json::from_slice(&std::fs::read(dir.join("argv.json")).unwrap()).unwrap();
    let at = argv.iter().position(|a| a == AWKWARD_ARGS[0]).unwrap_or_else(|| panic!("{argv:?}"));
    assert_eq!(argv[at..at + AWKWARD_ARGS.len()], AWKWARD_ARGS, "the browser read its arguments as given: {argv:?}");

    // A client's own session on the pipe, as /profiles/<name>/ gives one.
    let pipe = browsers.pipe("standin").expect("this process holds the pipe");
    let version = pipe.send(&cdp_client::protocol::browser::GetVersion {}, Duration::from_secs(5)).await.unwrap();
    assert_eq!(version.product, "PipeBrowser/1.0");

    let stopped = browsers.stop(&profile).await.unwrap();
    assert_eq!(stopped.state, State::Stopped, "{stopped:?}");
    assert!(browsers.record("standin").is_none(), "run.json is gone");
    // The pipe's end arrives as the last process holding the browser's end
    // (the browser, or a helper that inherited it) goes.
    tokio::time::timeout(Duration::from_secs(5), pipe.closed()).await.expect("the pipe closed with the browser");
    // Its helper ended with it (its process group, or its Job Object).
    assert!(!helper_beats(&dir, Duration::from_millis(500)).await, "the helper of browser {pid} still runs");
}

/// Serve holds handles the browser must not have (a log, a client's socket,
/// another child's pipe), some of them inheritable: here a pipe's writing
/// end, marked so as any could be. The browser is given its handle value
/// and writes to it, as a browser an attacker took over would; nothing
/// must arrive.
#[cfg(windows)]
#[allow(unsafe_code)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_inherits_its_pipe_and_no_other_handle_of_serve() {
    use std::io::Read;
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Foundation::{HANDLE_FLAG_INHERIT, SetHandleInformation};

    let (mut ours, theirs) = std::io::pipe().unwrap();
    // SAFETY: the handle is open (borrowed for the call).
    let marked = unsafe { SetHandleInformation(theirs.as_raw_handle(), HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT) };
    assert_ne!(marked, 0, "{}", std::io::Error::last_os_error());
    let probe = format!("--leak-probe={}", theirs.as_raw_handle() as usize);
    let (_root, browsers, profile) = stand_in_profile(&[&probe]);

    let status = browsers.start(&profile).await.expect("the stand-in becomes ready over the pipe");
    assert_eq!(status.state, State::Running, "{status:?}");
    let verdict_file = browsers.user_data_dir("standin").join("leak-probe.txt");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !verdict_file.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let verdict = std::fs::read_to_string(&verdict_file).expect("the stand-in tried the handle");
    drop(theirs);
    browsers.stop(&profile).await.unwrap();

    // Every copy of the writing end is closed once the browser and its
    // helpers are gone: what the pipe holds is all that was written.
    let read = tokio::task::spawn_blocking(move || {
        let mut got = Vec::new();
        ours.read_to_end(&mut got).map(|_| got)
    });
    let got = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("no process kept the pipe's writing end")
        .unwrap()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&got), "", "the browser wrote to serve's handle (it said: {verdict})");
    assert!(verdict.starts_with("refused"), "the browser could use serve's handle: {verdict}");
}
