//! `<state>/activity`: the activity record's files, one JSON line per
//! entry, one file per UTC day (`activity-2026-11-26.jsonl`). They say what
//! clients and agents did to the user's tabs, so the folder is the owner's
//! alone (0700, files 0600) like the media folder, and it is bounded: a
//! day's file stops growing at [`DAY_FILE_MAX`], and files past the
//! retention go ([`ActivityDir::prune`]).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::Retention;

/// The most one day's file holds; later entries of that day are dropped
/// (and counted), so a runaway script cannot fill the disk.
pub(crate) const DAY_FILE_MAX: u64 = 16 << 20;

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
    /// The day's file is full ([`DAY_FILE_MAX`]).
    DayFull,
}

impl ActivityDir {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Appends `lines` (each ending in `\n`) to the file of `now`'s day,
    /// created owner-only before anything is written to it. The folder is
    /// made here, never the state directory around it: one removed under a
    /// running serve is not brought back (with the process's default
    /// permissions) by its next entry.
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
        if file.metadata()?.len() + lines.len() as u64 > DAY_FILE_MAX {
            return Ok(Appended::DayFull);
        }
        file.write_all(lines.as_bytes())?;
        Ok(Appended::Written)
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

    #[test]
    fn a_full_day_drops_what_comes_after_and_prune_keeps_the_newest_days() {
        let root = tempfile::tempdir().unwrap();
        let dir = ActivityDir::new(root.path().join("activity"));
        let day = |n: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(n * 86_400);
        let big = "x".repeat(DAY_FILE_MAX as usize - 2) + "\n";
        assert_eq!(dir.append(&big, day(5)).unwrap(), Appended::Written);
        assert_eq!(dir.append("y\n", day(5)).unwrap(), Appended::DayFull);
        for n in 6..10 {
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
