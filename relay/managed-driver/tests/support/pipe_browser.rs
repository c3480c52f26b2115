//! A stand-in for Chrome on its CDP pipe, for `tests/stand_in_browser.rs`:
//! where no real Chrome can run (Windows under Wine), the managed driver's
//! own launch, pipe, readiness and stop still run for real against it.
//!
//! Takes the pipe as Chrome does: `--remote-debugging-io-pipes=R,W` (two
//! inherited handles) on Windows, fds 3 and 4 elsewhere. Answers
//! `Browser.getVersion`, `Target.getTargetInfo` and `Browser.close` (then
//! exits), refuses the rest with -32601. Like Chrome it starts a helper
//! process (itself with `--helper <user-data-dir>`), which counts in
//! `<user-data-dir>/helper.beat` every 20 ms while it lives, so the test
//! can see the helper end with the browser on any system.
//!
//! It writes the arguments it was given, as it split them, to
//! `<user-data-dir>/argv.json` (so the test sees what a browser reads of
//! its command line). Given `--leak-probe=<handle value>` on Windows, it
//! writes `leaked` to that handle as an attacker in the browser would, and
//! says in `<user-data-dir>/leak-probe.txt` whether the write went through.
#![allow(unsafe_code)]

use std::io::{BufRead, BufReader, Read, Write};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, dir] = args.as_slice()
        && flag == "--helper"
    {
        // At most 10 minutes, should nobody end it.
        for beat in 0..30_000u32 {
            let _ = std::fs::write(std::path::Path::new(dir).join("helper.beat"), beat.to_string());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        return;
    }
    let user_data = args.iter().find_map(|a| a.strip_prefix("--user-data-dir=")).expect("--user-data-dir");
    std::fs::create_dir_all(user_data).expect("user data dir");
    let argv = serde_json::to_vec(&args[1..]).expect("serialises");
    std::fs::write(std::path::Path::new(user_data).join("argv.json"), argv).expect("argv.json");
    leak_probe(&args, user_data);
    // Not waited for, as Chrome's helpers are not: the driver ends them.
    #[allow(clippy::zombie_processes)]
    let _helper = std::process::Command::new(std::env::current_exe().expect("own path"))
        .args(["--helper", user_data])
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("helper starts");

    let (reads, mut writes) = pipe_ends(&args);
    let mut reader = BufReader::new(reads);
    let mut message = Vec::new();
    loop {
        message.clear();
        match reader.read_until(0, &mut message) {
            Ok(0) | Err(_) => return, // the pipe closed: Chrome quits too
            Ok(_) => {}
        }
        message.pop();
        let command: serde_json::Value = serde_json::from_slice(&message).expect("JSON");
        let method = command["method"].as_str().unwrap_or_default();
        let mut answer = match method {
            "Browser.getVersion" => serde_json::json!({"id": command["id"], "result": {"product": "PipeBrowser/1.0"}}),
            "Target.getTargetInfo" => serde_json::json!({"id": command["id"],
                "result": {"targetInfo": {"targetId": "pipe-browser", "type": "browser"}}}),
            "Browser.close" => serde_json::json!({"id": command["id"], "result": {}}),
            _ => {
                serde_json::json!({"id": command["id"], "error": {"code": -32601, "message": format!("'{method}' wasn't found")}})
            }
        };
        if let Some(session) = command.get("sessionId") {
            answer["sessionId"] = session.clone();
        }
        let mut bytes = serde_json::to_vec(&answer).expect("serialises");
        bytes.push(0);
        writes.write_all(&bytes).expect("write");
        if method == "Browser.close" {
            // Chrome's helpers outlive it for a moment; the driver ends them.
            std::process::exit(0);
        }
    }
}

/// Writes to the handle `--leak-probe=` names, which the browser should
/// not have, and says in `leak-probe.txt` whether the write went through.
#[cfg(windows)]
fn leak_probe(args: &[String], user_data: &str) {
    use std::os::windows::io::{FromRawHandle, RawHandle};
    let Some(value) = args.iter().find_map(|a| a.strip_prefix("--leak-probe=")) else { return };
    let value = value.parse::<usize>().expect("a handle value") as RawHandle;
    // SAFETY: never closed (ManuallyDrop): a value this process holds no
    // handle by fails the write, and one it holds is only written to.
    let handle = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_handle(value) });
    let verdict = match (&*handle).write_all(b"leaked") {
        Ok(()) => "written".to_string(),
        Err(error) => format!("refused: {error}"),
    };
    std::fs::write(std::path::Path::new(user_data).join("leak-probe.txt"), verdict).expect("leak-probe.txt");
}

#[cfg(unix)]
fn leak_probe(_args: &[String], _user_data: &str) {}

#[cfg(unix)]
fn pipe_ends(_args: &[String]) -> (impl Read, impl Write) {
    let reads = std::fs::File::open("/dev/fd/3").expect("fd 3");
    let writes = std::fs::OpenOptions::new().write(true).open("/dev/fd/4").expect("fd 4");
    (reads, writes)
}

#[cfg(windows)]
fn pipe_ends(args: &[String]) -> (impl Read, impl Write) {
    use std::os::windows::io::{FromRawHandle, RawHandle};
    let handles = args.iter().find_map(|a| a.strip_prefix("--remote-debugging-io-pipes=")).expect("io pipes");
    let (read, write) = handles.split_once(',').expect("R,W");
    let handle = |value: &str| value.parse::<usize>().expect("a handle value") as RawHandle;
    // SAFETY: Chrome's contract: these handles were inherited for us and
    // are ours alone from here.
    unsafe { (std::fs::File::from_raw_handle(handle(read)), std::fs::File::from_raw_handle(handle(write))) }
}
