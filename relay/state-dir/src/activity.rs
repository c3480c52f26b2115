//! `<state>/activity`: the activity record's files, one JSON line per
//! entry, one file per UTC day (`activity-2026-11-26.jsonl`). They say what
//! clients and agents did to the user's tabs, so the folder is the owner's
//! alone (0700, files 0600) like the media folder, and it is bounded: a
//! day's file never grows past [`DAY_FILE_MAX`] (when full it rolls,
//! keeping its newest lines: a page cannot blind the rest of the day by
//! filling it), and files past the retention go ([`ActivityDir::prune`]).
//!
//! A day's file that rolled begins with one line that says how many of
//! its oldest lines went that day, `{"dropped":N}` ([`ActivityDir::dropped`]).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::media::Retention;

/// The most one day's file holds, so a runaway script cannot fill the disk.
pub(crate) const DAY_FILE_MAX: u64 = 16 << 20;
/// What a full day's file keeps of its newest lines when it rolls: half,
/// so the copy a roll costs comes at most once per this many bytes
/// written.
const KEPT_WHEN_ROLLING: u64 = DAY_FILE_MAX / 2;
/// The first line of a day's file that rolled: `{"dropped":N}`.
const NOTE_START: &str = "{\"dropped\":";

const PREFIX: &str = "activity-";
const SUFFIX: &str = ".jsonl";

/// The activity folder of a state directory.
#[derive(Debug, Clone)]
pub struct ActivityDir {
    dir: PathBuf,
}

/// What [`ActivityDir::append`] did with the lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    Written,
    /// The day's file was full ([`DAY_FILE_MAX`]): it rolled, and kept its
    /// newest lines, the new ones with them; `dropped` of its oldest went.
    Rolled {
        dropped: u64,
    },
}

impl ActivityDir {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Appends `lines` (each ending in `\n`) to the file of `now`'s day,
    /// created owner-only before anything is written to it; a file they
    /// would take past [`DAY_FILE_MAX`] rolls ([`Self::roll`]). The folder
    /// is made here, never the state directory around it: one removed
    /// under a running serve is not brought back (with the process's
    /// default permissions) by its next entry.
    pub fn append(&self, lines: &str, now: SystemTime) -> io::Result<Appended> {
        match fs::create_dir(&self.dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => crate::private::tighten_dir(&self.dir)?,
        }
        let path = self.dir.join(file_name(now));
        let mut file = match crate::private::create_new_private(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => OpenOptions::new().append(true).open(&path)?,
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        if len + lines.len() as u64 > DAY_FILE_MAX {
            drop(file);
            return roll(&path, len, lines.as_bytes());
        }
        file.write_all(lines.as_bytes())?;
        Ok(Appended::Written)
    }

    /// How many of the oldest lines of `now`'s day went when its file
    /// rolled (0: none, or no file). Reads the file's first line only.
    pub fn dropped(&self, now: SystemTime) -> u64 {
        fs::File::open(self.dir.join(file_name(now)))
            .ok()
            .and_then(|mut file| note_of(&mut file).ok())
            .map_or(0, |n| n.0)
    }

    /// Deletes day files beyond the newest `keep` or older than `max_age`.
    /// Best effort; nothing but our day files is ever deleted.
    pub fn prune(&self, retention: Retention) {
        let now = SystemTime::now();
        for (index, (modified, path)) in self.files().into_iter().enumerate() {
            let too_old = now.duration_since(modified).is_ok_and(|age| age > retention.max_age);
            if (index >= retention.keep || too_old)
                && let Err(e) = fs::remove_file(&path)
            {
                tracing::debug!(path = %path.display(), "could not prune an activity file: {e}");
            }
        }
    }

    /// The record's lines, newest first, across the day files, each read
    /// from its end (a file that cannot be read is skipped).
    pub fn newest_first(&self) -> impl Iterator<Item = String> {
        self.files().into_iter().flat_map(|(_, path)| Backwards::open(&path).into_iter().flatten())
    }

    /// Our day files, newest day first (the names sort by day).
    fn files(&self) -> Vec<(SystemTime, PathBuf)> {
        let Ok(entries) = fs::read_dir(&self.dir) else { return Vec::new() };
        let mut files: Vec<(String, SystemTime, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_string();
                (name.starts_with(PREFIX) && name.ends_with(SUFFIX)).then_some(())?;
                let meta = e.metadata().ok().filter(fs::Metadata::is_file)?;
                Some((name, meta.modified().ok()?, e.path()))
            })
            .collect();
        files.sort_by(|a, b| b.0.cmp(&a.0));
        files.into_iter().map(|(_, modified, path)| (modified, path)).collect()
    }
}

/// Rolls the full day's file at `path` (`len` bytes) with `lines`: a new
/// file takes the roll's note, then the newest whole lines of the two
/// together that fit in [`KEPT_WHEN_ROLLING`], and replaces it. Costs a
/// read of the file and a write of half of it, once per half a file
/// appended.
fn roll(path: &Path, len: u64, lines: &[u8]) -> io::Result<Appended> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut old = fs::File::open(path)?;
    let (before, note_len) = note_of(&mut old)?;
    // The new lines first: all of them, or their newest whole lines.
    let lines_from = line_start_from(lines, lines.len().saturating_sub(KEPT_WHEN_ROLLING as usize));
    let mut dropped = count_newlines(&lines[..lines_from]);
    // Then the old file's newest whole lines, in what room is left.
    let room = KEPT_WHEN_ROLLING.saturating_sub((lines.len() - lines_from) as u64);
    let mut kept = Vec::new();
    let mut cut = len;
    if room > 0 {
        // Read from the byte before, to see whether a line starts there.
        let wanted = len.saturating_sub(room).max(note_len);
        let (start, at) = if wanted == note_len { (wanted, 0) } else { (wanted - 1, 1) };
        old.seek(SeekFrom::Start(start))?;
        (&mut old).take(len - start).read_to_end(&mut kept)?;
        let from = line_start_from(&kept, at);
        kept.drain(..from);
        cut = start + from as u64;
    }
    // What goes: the old lines before the cut, the note aside.
    old.seek(SeekFrom::Start(note_len))?;
    let mut chunk = vec![0u8; CHUNK as usize];
    let mut head = old.take(cut.saturating_sub(note_len));
    loop {
        let n = head.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        dropped += count_newlines(&chunk[..n]);
    }
    // Closed before the file is replaced: Windows renames over no open file.
    drop(head);
    let total = before + dropped;
    let rolling = path.with_extension("jsonl.rolling");
    match fs::remove_file(&rolling) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut new = crate::private::create_new_private(&rolling)?;
    new.write_all(format!("{NOTE_START}{total}}}\n").as_bytes())?;
    new.write_all(&kept)?;
    new.write_all(&lines[lines_from..])?;
    drop(new);
    fs::rename(&rolling, path)?;
    Ok(Appended::Rolled { dropped })
}

/// The count a day's file's note gives, and the note's length in bytes
/// with its newline (`(0, 0)`: the file has none).
fn note_of(file: &mut fs::File) -> io::Result<(u64, u64)> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    file.seek(SeekFrom::Start(0))?;
    let mut head = Vec::with_capacity(48);
    (&mut *file).take(48).read_to_end(&mut head)?;
    let note = head
        .iter()
        .position(|b| *b == b'\n')
        .and_then(|end| Some((std::str::from_utf8(&head[..end]).ok()?, end)))
        .and_then(|(line, end)| {
            let count = line.strip_prefix(NOTE_START)?.strip_suffix('}')?.parse::<u64>().ok()?;
            Some((count, end as u64 + 1))
        });
    Ok(note.unwrap_or((0, 0)))
}

/// Where the first line that starts at or after `at` begins (the end,
/// when none does).
fn line_start_from(bytes: &[u8], at: usize) -> usize {
    if at == 0 || bytes.get(at - 1) == Some(&b'\n') {
        return at.min(bytes.len());
    }
    bytes[at..].iter().position(|b| *b == b'\n').map_or(bytes.len(), |i| at + i + 1)
}

fn count_newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|b| **b == b'\n').count() as u64
}

/// A file's non-empty lines from the last to the first, read from its end
/// in chunks: the newest entries cost what they are, not the day's file.
struct Backwards {
    file: fs::File,
    /// Where the bytes not read yet end.
    pos: u64,
    /// Bytes read whose line's start is not read yet.
    carry: Vec<u8>,
    /// Whole lines, in file order (the next is the last).
    ready: Vec<String>,
}

/// How much of a file one read takes.
const CHUNK: u64 = 64 << 10;

impl Backwards {
    fn open(path: &Path) -> io::Result<Self> {
        let file = fs::File::open(path)?;
        let pos = file.metadata()?.len();
        Ok(Self { file, pos, carry: Vec::new(), ready: Vec::new() })
    }

    fn split_into_ready(&mut self, bytes: &[u8]) {
        self.ready.extend(
            bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| String::from_utf8_lossy(l).into_owned()),
        );
    }
}

impl Iterator for Backwards {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        use std::io::{Read as _, Seek as _, SeekFrom};
        loop {
            if let Some(line) = self.ready.pop() {
                return Some(line);
            }
            if self.pos == 0 {
                if self.carry.is_empty() {
                    return None;
                }
                let all = std::mem::take(&mut self.carry);
                self.split_into_ready(&all);
                continue;
            }
            let start = self.pos.saturating_sub(CHUNK);
            let mut chunk = vec![0u8; (self.pos - start) as usize];
            self.file.seek(SeekFrom::Start(start)).ok()?;
            self.file.read_exact(&mut chunk).ok()?;
            self.pos = start;
            chunk.extend_from_slice(&self.carry);
            self.carry = chunk;
            if start == 0 {
                continue;
            }
            // The bytes before the first newline may be the end of a line
            // that starts in the part not read yet.
            if let Some(first) = self.carry.iter().position(|b| *b == b'\n') {
                let whole = self.carry.split_off(first + 1);
                self.carry.truncate(first);
                self.split_into_ready(&whole);
            }
        }
    }
}

/// `activity-YYYY-MM-DD.jsonl` of `at`'s UTC day.
fn file_name(at: SystemTime) -> String {
    let days = at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs() / 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!("{PREFIX}{y:04}-{m:02}-{d:02}{SUFFIX}")
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's algorithm: exact, no calendar crate).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_files_are_named_by_their_utc_date() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_783), (2026, 11, 26));
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(20_783 * 86_400 + 86_399);
        assert_eq!(file_name(at), "activity-2026-11-26.jsonl");
    }

    #[test]
    fn lines_come_back_newest_first_across_days() {
        let root = tempfile::tempdir().unwrap();
        let dir = ActivityDir::new(root.path().join("activity"));
        let day = |n: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(n * 86_400);
        dir.append("a\nb\n", day(100)).unwrap();
        dir.append("c\n", day(101)).unwrap();
        dir.append("d\n", day(101)).unwrap();
        let lines: Vec<String> = dir.newest_first().collect();
        assert_eq!(lines, ["d", "c", "b", "a"]);
    }

    #[test]
    fn an_entry_does_not_bring_back_a_removed_state_directory() {
        let root = tempfile::tempdir().unwrap();
        let state = root.path().join("state");
        fs::create_dir(&state).unwrap();
        let dir = ActivityDir::new(state.join("activity"));
        dir.append("a\n", SystemTime::now()).unwrap();
        fs::remove_dir_all(&state).unwrap();
        assert_eq!(dir.append("b\n", SystemTime::now()).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert!(!state.exists());
    }

    #[test]
    fn a_file_is_read_backwards_across_chunk_boundaries() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("lines");
        // Lines of many lengths, so chunk edges fall inside lines, on their
        // newlines, and a line is longer than a chunk.
        let lines: Vec<String> = (0..3000).map(|i| format!("{i}:{}", "é".repeat(i * 7 % 300))).collect();
        let mut text = lines.join("\n");
        text.push_str("\n\n");
        text.push_str(&"z".repeat(CHUNK as usize * 2 + 5));
        fs::write(&path, &text).unwrap();
        let read: Vec<String> = Backwards::open(&path).unwrap().collect();
        let mut expected: Vec<String> = lines.clone();
        expected.push("z".repeat(CHUNK as usize * 2 + 5));
        expected.reverse();
        assert_eq!(read.len(), expected.len());
        assert!(read == expected, "lines differ");
        fs::write(&path, "").unwrap();
        assert_eq!(Backwards::open(&path).unwrap().count(), 0);
    }

    /// One line of exactly 1 MiB with its newline, numbered.
    fn mib_line(n: usize) -> String {
        format!("{n:03}{}\n", "x".repeat((1 << 20) - 4))
    }

    #[test]
    fn a_full_day_rolls_keeping_its_newest_lines_and_says_how_many_went() {
        let root = tempfile::tempdir().unwrap();
        let dir = ActivityDir::new(root.path().join("activity"));
        let day = SystemTime::UNIX_EPOCH + Duration::from_secs(5 * 86_400);
        // A page's flood fills the day: 16 lines of 1 MiB.
        for n in 0..16 {
            assert_eq!(dir.append(&mib_line(n), day).unwrap(), Appended::Written);
        }
        assert_eq!(dir.dropped(day), 0);
        // What comes after is kept, with the newest of what was there.
        assert_eq!(dir.append("after\n", day).unwrap(), Appended::Rolled { dropped: 9 });
        let path = dir.path().join(file_name(day));
        assert!(fs::metadata(&path).unwrap().len() <= KEPT_WHEN_ROLLING + 64);
        let lines: Vec<String> = dir.newest_first().collect();
        assert_eq!(lines[0], "after");
        let numbers: Vec<&str> = lines[1..8].iter().map(|l| &l[..3]).collect();
        assert_eq!(numbers, ["015", "014", "013", "012", "011", "010", "009"]);
        assert_eq!(lines[8], "{\"dropped\":9}", "the note, first in the file");
        assert_eq!(lines.len(), 9);
        assert_eq!(dir.dropped(day), 9);
        // The next roll counts on from the note, which goes with it.
        for n in 16..25 {
            dir.append(&mib_line(n), day).unwrap();
        }
        assert_eq!(dir.dropped(day), 9 + 9, "lines 9–15 and \"after\" went the second time, and 16");
        let lines: Vec<String> = dir.newest_first().collect();
        assert_eq!(lines.iter().filter(|l| l.starts_with("{\"dropped")).count(), 1);
        assert_eq!(&lines[0][..3], "024");
        assert!(fs::read_dir(dir.path()).unwrap().count() == 1, "nothing left beside the day's file");
    }

    #[test]
    fn a_batch_larger_than_a_day_keeps_its_newest_lines() {
        let root = tempfile::tempdir().unwrap();
        let dir = ActivityDir::new(root.path().join("activity"));
        let day = SystemTime::UNIX_EPOCH + Duration::from_secs(7 * 86_400);
        dir.append("first\n", day).unwrap();
        let batch: String = (0..20).map(mib_line).collect();
        assert_eq!(dir.append(&batch, day).unwrap(), Appended::Rolled { dropped: 1 + 12 });
        let lines: Vec<String> = dir.newest_first().collect();
        let numbers: Vec<&str> = lines.iter().map(|l| &l[..3]).collect();
        assert_eq!(numbers, ["019", "018", "017", "016", "015", "014", "013", "012", "{\"d"]);
        assert_eq!(dir.dropped(day), 13);
    }

    #[test]
    fn prune_keeps_the_newest_days() {
        let root = tempfile::tempdir().unwrap();
        let dir = ActivityDir::new(root.path().join("activity"));
        let day = |n: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(n * 86_400);
        for n in 5..10 {
            dir.append("z\n", day(n)).unwrap();
        }
        fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        dir.prune(Retention { keep: 2, max_age: Duration::from_secs(3600) });
        let mut left: Vec<String> =
            fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["activity-1970-01-09.jsonl", "activity-1970-01-10.jsonl", "notes.txt"]);
    }

    #[cfg(unix)]
    #[test]
    fn the_folder_and_its_files_are_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let dir = ActivityDir::new(root.path().join("activity"));
        dir.append("a\n", SystemTime::now()).unwrap();
        let file = fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
        assert_eq!(fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(dir.path()).unwrap().permissions().mode() & 0o777, 0o700);
    }
}
