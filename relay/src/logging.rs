//! The log, on stderr, written so that it can never stop the relay.
//!
//! A write to stderr blocks when nobody takes what is written: a pipe whose
//! reader never reads (a script or agent that started `serve` and reads
//! only stdout) fills after 64 KiB; a Windows console holds every write
//! while the user has text selected in it (copying the pairing link is
//! enough). Written from the task that logged, that would stall a runtime
//! thread, and with it the relay: every refused request logs a warning, so
//! a page hammering the port would have frozen a relay with an unread
//! stderr.
//!
//! So lines go to a queue and a thread of their own writes them. When the
//! queue is full, a line is dropped and counted, and the count is written
//! as soon as stderr takes lines again. [`Flush`] writes what is queued
//! when the process ends, waiting a moment at most.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

/// Lines held while stderr takes none (a few MiB of log at most).
const QUEUED_LINES: usize = 16_384;

/// How long the end of the process waits for queued lines to be written.
const FLUSH_WITHIN: Duration = Duration::from_secs(1);

enum Queued {
    Line(Vec<u8>),
    /// Everything before it is written; answered on the sender.
    Flush(SyncSender<()>),
}

/// Where the log's formatter writes: each event becomes one queued line.
pub(crate) struct LogLines {
    queue: SyncSender<Queued>,
    dropped: Arc<AtomicU64>,
}

/// One event's text, queued whole when the formatter is done with it.
pub(crate) struct Line<'a> {
    text: Vec<u8>,
    lines: &'a LogLines,
}

impl Write for Line<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.text.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line<'_> {
    fn drop(&mut self) {
        if self.text.is_empty() {
            return;
        }
        match self.lines.queue.try_send(Queued::Line(std::mem::take(&mut self.text))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.lines.dropped.fetch_add(1, Ordering::Relaxed);
            }
            // The writer is gone (it failed writing): there is nowhere to log.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogLines {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        Line { text: Vec::new(), lines: self }
    }
}

/// Held by `main` for the life of the process: dropping it writes what is
/// queued, within [`FLUSH_WITHIN`].
pub(crate) struct Flush {
    queue: SyncSender<Queued>,
}

impl Drop for Flush {
    fn drop(&mut self) {
        let (done, written) = sync_channel(1);
        let queue = self.queue.clone();
        // Queued from a thread of its own: when stderr takes nothing, the
        // queue stays full, and the exit must not wait beyond FLUSH_WITHIN.
        std::thread::spawn(move || queue.send(Queued::Flush(done)));
        let _ = written.recv_timeout(FLUSH_WITHIN);
    }
}

/// A log whose lines `writer` gets from a thread of its own; at most
/// `capacity` wait for it.
pub(crate) fn lines_to(writer: impl Write + Send + 'static, capacity: usize) -> (LogLines, Flush) {
    let (queue, queued) = sync_channel(capacity);
    let dropped = Arc::new(AtomicU64::new(0));
    let counted = dropped.clone();
    std::thread::Builder::new()
        .name("log-writer".into())
        .spawn(move || write_lines(writer, queued, &counted))
        .expect("a thread for the log");
    (LogLines { queue: queue.clone(), dropped }, Flush { queue })
}

/// [`lines_to`] stderr.
pub(crate) fn stderr_lines() -> (LogLines, Flush) {
    lines_to(std::io::stderr(), QUEUED_LINES)
}

fn write_lines(mut writer: impl Write, queued: Receiver<Queued>, dropped: &AtomicU64) {
    let say_dropped = |writer: &mut dyn Write| {
        let count = dropped.swap(0, Ordering::Relaxed);
        if count == 0 {
            return Ok(());
        }
        let s = if count == 1 { "" } else { "s" };
        writeln!(writer, "browser-relay: {count} log line{s} dropped here: stderr took no more for a while")
    };
    for item in queued {
        let written = match item {
            Queued::Line(line) => say_dropped(&mut writer).and_then(|()| writer.write_all(&line)),
            Queued::Flush(done) => {
                let _ = say_dropped(&mut writer).and_then(|()| writer.flush());
                let _ = done.send(());
                Ok(())
            }
        };
        if written.is_err() {
            // stderr is closed: lines from now on are dropped at the queue.
            return;
        }
    }
}

/// Whether log lines get ANSI colours: only on a terminal that shows them,
/// and not when the user asked for none (<https://no-color.org>). A log
/// file or pipe gets plain text.
pub(crate) fn colours(
    terminal: bool,
    no_color: Option<&std::ffi::OsStr>,
    shows_colours: impl FnOnce() -> bool,
) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty()) && shows_colours()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Condvar, Mutex};

    /// Whether it is open, and what it took.
    type Taken = Mutex<(bool, Vec<u8>)>;

    /// A stderr that takes nothing until opened, then keeps what it takes.
    #[derive(Clone, Default)]
    struct HeldStderr {
        state: Arc<(Taken, Condvar)>,
    }

    impl HeldStderr {
        fn open(&self) {
            self.state.0.lock().unwrap().0 = true;
            self.state.1.notify_all();
        }

        fn text(&self) -> String {
            String::from_utf8(self.state.0.lock().unwrap().1.clone()).unwrap()
        }
    }

    impl Write for HeldStderr {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let (lock, opened) = &*self.state;
            let mut state = opened.wait_while(lock.lock().unwrap(), |(open, _)| !*open).unwrap();
            state.1.extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn log(lines: &LogLines, text: &str) {
        use tracing_subscriber::fmt::MakeWriter;
        let mut line = lines.make_writer();
        line.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn a_stderr_that_takes_nothing_never_holds_the_logger_and_the_drop_is_told() {
        let stderr = HeldStderr::default();
        let (lines, flush) = lines_to(stderr.clone(), 4);
        // The writer thread holds one line in its blocked write; four wait;
        // the rest are dropped. None of these calls may wait.
        for n in 0..100 {
            log(&lines, &format!("line {n}\n"));
        }
        stderr.open();
        drop(flush);
        let text = stderr.text();
        assert!(text.contains("line 0\n"), "{text}");
        let kept = text.lines().filter(|l| l.starts_with("line ")).count();
        assert!((4..=5).contains(&kept), "the queue's lines and the one being written: {text}");
        // Told before the next line written after the drops (twice if the
        // writer took its first line between drops).
        let told: u64 = text
            .lines()
            .filter_map(|l| l.strip_prefix("browser-relay: "))
            .map(|l| l.split(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(told, 100 - kept as u64, "every dropped line is counted: {text}");
    }

    #[test]
    fn every_line_is_written_whole_and_in_order_by_the_end() {
        let stderr = HeldStderr::default();
        stderr.open();
        let (lines, flush) = lines_to(stderr.clone(), 64);
        for n in 0..50 {
            log(&lines, &format!("line {n}\n"));
        }
        drop(flush);
        let expected: String = (0..50).map(|n| format!("line {n}\n")).collect();
        assert_eq!(stderr.text(), expected, "the flush waited for the queue");
    }

    #[test]
    fn colours_only_on_a_terminal_that_shows_them_unless_no_color() {
        let yes = || true;
        assert!(colours(true, None, yes));
        assert!(colours(true, Some("".as_ref()), yes), "an empty NO_COLOR asks for nothing");
        assert!(!colours(true, Some("1".as_ref()), yes), "NO_COLOR");
        assert!(!colours(false, None, yes), "a file or pipe gets plain text");
        assert!(!colours(true, None, || false), "a console that shows escapes as text");
        let mut asked = false;
        assert!(!colours(false, None, || {
            asked = true;
            true
        }));
        assert!(!asked, "the console is not switched to escapes for a log that is not on it");
    }
}
