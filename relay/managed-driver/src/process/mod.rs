//! The one seam between the managed driver and the operating system's
//! processes: launching a browser with its CDP pipe, telling whether it
//! (and every helper it started) still runs, and ending it.
//!
//! | concern | Unix (Linux, macOS) | Windows |
//! |---|---|---|
//! | the CDP pipe | the browser's fds 3 and 4 | two inherited handles named by `--remote-debugging-io-pipes=R,W` |
//! | what else the browser inherits | stdin, stdout, stderr (std opens every other descriptor close-on-exec; one serve inherited open goes on) | stdin, stdout, stderr: `CreateProcessW` with exactly those and the pipe's two in `PROC_THREAD_ATTRIBUTE_HANDLE_LIST` |
//! | its command line | a list of arguments | one line, quoted as the browser splits it ([`windows_command_line`]) |
//! | the browser and its helpers | its own process group | a Job Object that kills them all when closed, the browser in it before it runs (started suspended) |
//! | asking it to end | `SIGTERM` to the group | none (Chrome has no console to signal): ending is killing |
//! | killing it | `SIGKILL` to the group | `TerminateJobObject` |
//! | a process of another serve | its group, by pid | the process, by pid (its job died with that serve) |
//! | a recorded pid still that process | its start: `/proc/<pid>/stat` (Linux), `proc_pidinfo` (macOS) | its creation time (`GetProcessTimes`) |
//!
//! The rules that are data (which switch names the pipes, how a Windows
//! command line is quoted, which ending does what) are plain functions
//! tested on every host; what needs the system is behind `cfg` in [`unix`]
//! and [`windows`].

use std::path::Path;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as os;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as os;

pub(crate) use os::{BrowserReader, BrowserWriter, Child, Tree};

/// How to end a browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Ask it to quit (Unix: `SIGTERM`); where a platform cannot ask, it
    /// kills.
    Ask,
    /// Kill it and every helper it started.
    Kill,
}

/// A browser this process launched: the child (reaped when it exits: a
/// zombie still answers "alive"; on Windows our handle on the process
/// keeps its pid from being handed out) and the handle on all of its
/// processes.
#[derive(Debug)]
pub(crate) struct Launched {
    pub(crate) child: Child,
    pub(crate) tree: Tree,
}

/// Launches `executable` with `args` (which hold `--remote-debugging-pipe`),
/// its stdin and stdout empty and its stderr to `stderr`, our environment
/// and working folder, in a tree of its own (so `stop` reaches every helper
/// and a Ctrl-C aimed at our terminal does not reach it). It inherits its
/// ends of the pipe, its stdin, stdout and stderr, and no other handle of
/// ours (on Unix: no descriptor we opened). Returns it and our ends of its
/// CDP pipe.
pub(crate) fn spawn_with_pipe(
    executable: &Path,
    args: &[String],
    stderr: std::fs::File,
) -> std::io::Result<(Launched, BrowserWriter, BrowserReader)> {
    let (browser_reads, to_browser) = std::io::pipe()?;
    let (from_browser, browser_writes) = std::io::pipe()?;
    // The browser's ends go to it and close here, in this process: its exit
    // is then our end-of-file.
    let launched = os::spawn(executable, args, stderr, browser_reads, browser_writes)?;
    Ok((launched, os::writer(to_browser)?, os::reader(from_browser)?))
}

/// Our ends of an OS pipe as the async halves the CDP pipe reads and
/// writes: what the tests' fake browser speaks over.
#[cfg(test)]
pub(crate) fn async_pipe() -> std::io::Result<(BrowserReader, BrowserWriter)> {
    let (reader, writer) = std::io::pipe()?;
    Ok((os::reader(reader)?, os::writer(writer)?))
}

/// Whether the process `pid` (not one of ours: those are asked through
/// their [`Launched::child`]) is alive.
pub(crate) fn is_alive(pid: u32) -> bool {
    os::is_alive(pid)
}

/// Ends the browser `pid` and its helpers: through `ours` when this
/// process launched it, else by pid (a browser of a serve that died).
pub(crate) fn end_tree(pid: u32, ours: Option<&Tree>, ending: Ending) {
    os::end_tree(pid, ours, ending);
}

/// Whether any process of the browser `pid`'s tree still runs (zombies,
/// which run nothing, do not count).
pub(crate) fn tree_alive(pid: u32, ours: Option<&Tree>) -> bool {
    os::tree_alive(pid, ours)
}

/// When the process `pid` started, as the system keeps it for the
/// process's whole life: Linux's clock ticks after boot, macOS's
/// microseconds and Windows' 100 ns since their epochs. `None` when it is
/// gone or not ours to look at. A pid names a process only while it runs
/// (Windows hands it out again within minutes, any system after a reboot);
/// a pid and its start name one process (on Linux within one boot, which
/// counts from zero again: the caller's command-line check covers that).
pub(crate) fn started(pid: u32) -> Option<u64> {
    os::started(pid)
}

/// Whether the process `pid` was started with the argument `arg`, where
/// the system lets us read a process's command line (Linux); `None`
/// elsewhere.
pub(crate) fn has_argument(pid: u32, arg: &str) -> Option<bool> {
    os::has_argument(pid, arg)
}

/// Whether we run with the rights that make Chrome refuse its sandbox
/// (root on Unix; Chrome on Windows has no such rule).
pub(crate) fn is_superuser() -> bool {
    os::is_superuser()
}

/// The switch that names the browser's ends of the pipe on Windows: two
/// handle values, read first, as unsigned integers (Chromium's
/// `--remote-debugging-io-pipes`; without it Chrome looks for fds 3 and 4,
/// which a Windows process does not have). Compiled on every host for its
/// test.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) fn io_pipes_switch(browser_reads: usize, browser_writes: usize) -> String {
    format!("--remote-debugging-io-pipes={browser_reads},{browser_writes}")
}

/// The command line that starts `program` with `args` on Windows, as UTF-16
/// without its terminating NUL: each argument quoted and escaped so that
/// the browser, which splits its line as `CommandLineToArgvW` and the MSVC
/// runtime do, reads back exactly `args`. The program comes first, always
/// in quotes (that first word has no escapes, so it may hold no quote).
/// An argument goes in quotes when it is empty or holds a space or a tab;
/// a quote in it is escaped with a backslash, and the backslashes just
/// before a quote (or before the closing quote) are doubled. Fails, as
/// `InvalidInput`, on a NUL anywhere or a quote in the program. Compiled on
/// every host for its tests.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) fn windows_command_line<'a>(
    program: &[u16],
    args: impl IntoIterator<Item = &'a [u16]>,
) -> std::io::Result<Vec<u16>> {
    const QUOTE: u16 = b'"' as u16;
    const BACKSLASH: u16 = b'\\' as u16;
    let invalid = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_string());
    if program.contains(&0) {
        return Err(invalid("the program's path holds a NUL"));
    }
    if program.contains(&QUOTE) {
        return Err(invalid("the program's path holds a quote"));
    }
    let mut line = Vec::with_capacity(program.len() + 2);
    line.push(QUOTE);
    line.extend_from_slice(program);
    line.push(QUOTE);
    for arg in args {
        if arg.contains(&0) {
            return Err(invalid("an argument holds a NUL"));
        }
        line.push(u16::from(b' '));
        let quoted = arg.is_empty() || arg.iter().any(|&c| c == u16::from(b' ') || c == u16::from(b'\t'));
        if quoted {
            line.push(QUOTE);
        }
        let mut backslashes = 0;
        for &c in arg {
            match c {
                BACKSLASH => backslashes += 1,
                QUOTE => {
                    // Each backslash before it doubled, then the quote escaped.
                    line.extend(std::iter::repeat_n(BACKSLASH, backslashes + 1));
                    backslashes = 0;
                }
                _ => backslashes = 0,
            }
            line.push(c);
        }
        if quoted {
            // The closing quote must not be read as escaped.
            line.extend(std::iter::repeat_n(BACKSLASH, backslashes));
            line.push(QUOTE);
        }
    }
    Ok(line)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn windows_names_the_pipe_handles_read_first_as_chromium_parses_them() {
        assert_eq!(io_pipes_switch(3, 4), "--remote-debugging-io-pipes=3,4");
        assert_eq!(io_pipes_switch(0x2c8, 0x2d0), "--remote-debugging-io-pipes=712,720");
    }

    fn wide(text: &str) -> Vec<u16> {
        text.encode_utf16().collect()
    }

    /// [`windows_command_line`] over `&str`s, read back as a `String`.
    fn command_line(program: &str, args: &[&str]) -> std::io::Result<String> {
        let args: Vec<Vec<u16>> = args.iter().map(|a| wide(a)).collect();
        let line = windows_command_line(&wide(program), args.iter().map(Vec::as_slice))?;
        Ok(String::from_utf16(&line).unwrap())
    }

    /// How a Windows program splits its command line (`CommandLineToArgvW`,
    /// the MSVC runtime; Microsoft's "Parsing C++ command-line arguments"):
    /// the first word up to the next quote if it starts with one, else to
    /// the next space or tab, with no escapes; then 2n backslashes and a
    /// quote are n backslashes and a quote that opens or closes, 2n + 1
    /// and a quote are n backslashes and a literal quote, other
    /// backslashes are themselves, and a space or a tab outside quotes
    /// ends an argument.
    fn split_as_windows_does(line: &str) -> Vec<String> {
        let mut chars = line.chars().peekable();
        let mut program = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            program.extend(chars.by_ref().take_while(|&c| c != '"'));
        } else {
            while let Some(c) = chars.next_if(|&c| c != ' ' && c != '\t') {
                program.push(c);
            }
        }
        let mut args = vec![program];
        loop {
            while chars.next_if(|&c| c == ' ' || c == '\t').is_some() {}
            if chars.peek().is_none() {
                return args;
            }
            let (mut arg, mut quoted) = (String::new(), false);
            while let Some(&c) = chars.peek() {
                match c {
                    '\\' => {
                        let mut backslashes = 0;
                        while chars.next_if_eq(&'\\').is_some() {
                            backslashes += 1;
                        }
                        if chars.peek() == Some(&'"') {
                            arg.extend(std::iter::repeat_n('\\', backslashes / 2));
                            if backslashes % 2 == 1 {
                                arg.push('"');
                                chars.next();
                            }
                        } else {
                            arg.extend(std::iter::repeat_n('\\', backslashes));
                        }
                    }
                    '"' => {
                        quoted = !quoted;
                        chars.next();
                    }
                    ' ' | '\t' if !quoted => break,
                    _ => {
                        arg.push(c);
                        chars.next();
                    }
                }
            }
            args.push(arg);
        }
    }

    #[test]
    fn a_windows_command_line_quotes_and_escapes_as_msvc_splits_it() {
        let program = r"C:\Program Files\Google\Chrome\Application\chrome.exe";
        let cases: [(&str, &str); 12] = [
            ("--headless=new", "--headless=new"),
            (
                r"--user-data-dir=C:\Users\José Smith\.browser-relay",
                r#""--user-data-dir=C:\Users\José Smith\.browser-relay""#,
            ),
            ("", r#""""#),
            ("a\tb", "\"a\tb\""),
            (r#"a"b"#, r#"a\"b"#),
            (r"a\b", r"a\b"),
            (r#"a\"b"#, r#"a\\\"b"#),
            (r"C:\dir\", r"C:\dir\"),
            (r"C:\Program Files\", r#""C:\Program Files\\""#),
            (r"a b\\", r#""a b\\\\""#),
            (r#"\\""#, r#"\\\\\""#),
            (r#"--quoted="a b" c"#, r#""--quoted=\"a b\" c""#),
        ];
        let args: Vec<&str> = cases.iter().map(|(arg, _)| *arg).collect();
        let written: Vec<&str> = cases.iter().map(|(_, written)| *written).collect();
        let line = command_line(program, &args).unwrap();
        assert_eq!(line, format!("\"{program}\" {}", written.join(" ")));
        let mut expected = vec![program];
        expected.extend(&args);
        assert_eq!(split_as_windows_does(&line), expected, "{line}");
    }

    #[test]
    fn a_windows_command_line_refuses_what_no_line_can_carry() {
        let refused = |program: &str, args: &[&str]| command_line(program, args).unwrap_err().kind();
        assert_eq!(refused(r"C:\chrome.exe", &["a\0b"]), std::io::ErrorKind::InvalidInput);
        assert_eq!(refused("C:\\chrome\0.exe", &[]), std::io::ErrorKind::InvalidInput);
        // The first word ends at the next quote, whatever comes before it.
        assert_eq!(refused(r#"C:\a"b.exe"#, &[]), std::io::ErrorKind::InvalidInput);
        assert_eq!(command_line(r"C:\chrome.exe", &[]).unwrap(), r#""C:\chrome.exe""#);
    }

    #[tokio::test]
    async fn an_os_pipe_carries_bytes_and_ends_when_its_writer_goes() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut reader, mut writer) = async_pipe().unwrap();
        writer.write_all(b"{\"id\":1}\0").await.unwrap();
        writer.flush().await.unwrap();
        drop(writer);
        let mut got = Vec::new();
        reader.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"{\"id\":1}\0");
    }

    #[test]
    fn a_process_that_exited_is_not_alive_and_its_tree_is_gone() {
        let mut exited = exit_at_once();
        let pid = exited.id();
        exited.wait().unwrap();
        assert!(!is_alive(pid));
        assert!(!tree_alive(pid, None));
        assert!(is_alive(std::process::id()), "this test runs");
    }

    #[test]
    fn a_process_keeps_its_start_and_another_has_its_own() {
        let me = std::process::id();
        let mine = started(me).expect("this process's own start is readable");
        assert_eq!(started(me), Some(mine), "a process keeps its start");
        let child = run_for_a_while();
        let pid = child.0.id();
        let theirs = started(pid).expect("a child's start is readable");
        // Linux counts in 10 ms ticks: a child started at once may share
        // this process's tick.
        assert!(theirs >= mine, "a process started later has a later start");
        assert_eq!(started(pid), Some(theirs));
        drop(child);
    }

    /// A process a test started: killed and reaped when the test lets go
    /// of it, also when the test fails.
    pub(crate) struct Running(pub(crate) std::process::Child);

    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// A process that exits at once.
    pub(crate) fn exit_at_once() -> std::process::Child {
        let (program, args): (&str, &[&str]) = if cfg!(windows) { ("cmd", &["/c", "exit"]) } else { ("true", &[]) };
        std::process::Command::new(program).args(args).spawn().unwrap()
    }

    /// A process that runs for 30 s unless killed: on Unix the leader of a
    /// process group of its own, as a browser is, so that ending a browser
    /// by its pid would reach it.
    pub(crate) fn run_for_a_while() -> Running {
        run_for_a_while_with(None)
    }

    /// [`run_for_a_while`] with `arg` on its command line, where the system
    /// shows one (Unix: as its `argv[0]`, which `sleep` ignores; Windows has
    /// no reader of it).
    pub(crate) fn run_for_a_while_with(arg: Option<&str>) -> Running {
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            let mut command = std::process::Command::new("sleep");
            command.arg("30").process_group(0);
            if let Some(arg) = arg {
                command.arg0(arg);
            }
            let running = Running(command.spawn().unwrap());
            // The command line is written a moment after `spawn` returns
            // (exec sets it up after waking the parent); nothing announces it.
            #[cfg(target_os = "linux")]
            if let Some(arg) = arg {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
                while has_argument(running.0.id(), arg) != Some(true) && std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
            running
        }
        #[cfg(windows)]
        {
            let _ = arg;
            Running(std::process::Command::new("ping").args(["-n", "30", "127.0.0.1"]).spawn().unwrap())
        }
    }
}
