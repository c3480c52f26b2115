//! `<state>/media`: the screenshots and PDFs agents asked for. They show
//! the user's pages, so the folder is the owner's alone (0700, files 0600,
//! whatever the state directory's own mode), and it does not grow without
//! end or keep pages past their time: every save prunes it to the newest
//! files within the retention, and `serve` prunes it at start and every
//! few minutes ([`MediaDir::prune`]), so old pages go also when nothing new
//! is saved.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How much the media folder keeps (`mediaKeep`, `mediaMaxAgeHours`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// The newest files kept.
    pub keep: usize,
    /// Older files go.
    pub max_age: Duration,
}

/// The media folder of a state directory.
#[derive(Debug, Clone)]
pub struct MediaDir {
    dir: PathBuf,
}

/// The kinds of file the folder holds; nothing else in it is ever deleted.
const KINDS: [&str; 2] = ["screenshot-", "page-"];

impl MediaDir {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes `data` as a new owner-only file `<kind>-<millis>-<random>.<extension>`,
    /// then prunes the folder. Returns the file's path.
    pub fn save(&self, kind: &str, extension: &str, data: &[u8], retention: Retention) -> io::Result<PathBuf> {
        self.ensure()?;
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        let mut random = [0u8; 4];
        getrandom::fill(&mut random).map_err(|e| io::Error::other(e.to_string()))?;
        let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let path = self.dir.join(format!("{kind}-{}-{suffix}.{extension}", now.as_millis()));
        crate::private::create_new_private(&path)?.write_all(data)?;
        self.prune_but(retention, Some(&path));
        Ok(path)
    }

    /// Deletes our files beyond the newest `keep` or older than `max_age`.
    pub fn prune(&self, retention: Retention) {
        self.prune_but(retention, None);
    }

    /// Whether `path` is a file of this folder (after resolving links, so
    /// `media/../token` or a symlink out of it is not).
    pub fn contains(&self, path: &Path) -> bool {
        let (Ok(dir), Ok(file)) = (self.dir.canonicalize(), path.canonicalize()) else {
            return false;
        };
        file.parent() == Some(dir.as_path()) && file.is_file()
    }

    /// Creates the folder owner-only, and makes an existing one owner-only
    /// again (it is ours, unlike the state directory the user may choose).
    fn ensure(&self) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        crate::private::tighten_dir(&self.dir)
    }

    /// Deletes our files beyond the newest `keep` or older than `max_age`;
    /// never `just_saved`. Best effort: a file that will not go stays.
    fn prune_but(&self, retention: Retention, just_saved: Option<&Path>) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        let mut files: Vec<(SystemTime, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_str().is_some_and(|n| KINDS.iter().any(|k| n.starts_with(k))))
            .filter_map(|e| {
                let meta = e.metadata().ok().filter(fs::Metadata::is_file)?;
                Some((meta.modified().ok()?, e.path()))
            })
            .collect();
        files.sort_by(|a, b| b.cmp(a));
        let now = SystemTime::now();
        for (index, (modified, path)) in files.iter().enumerate() {
            let too_old = now.duration_since(*modified).is_ok_and(|age| age > retention.max_age);
            if Some(path.as_path()) != just_saved
                && (index >= retention.keep || too_old)
                && let Err(e) = fs::remove_file(path)
            {
                tracing::debug!(path = %path.display(), "could not prune a media file: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retention(keep: usize) -> Retention {
        Retention { keep, max_age: Duration::from_secs(3600) }
    }

    #[cfg(unix)]
    #[test]
    fn files_are_owner_only_even_in_an_open_folder() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let media = MediaDir::new(root.path().join("media"));
        fs::create_dir(media.path()).unwrap();
        fs::set_permissions(media.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let path = media.save("screenshot", "png", b"png", retention(10)).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(media.path()).unwrap().permissions().mode() & 0o777, 0o700);
    }

    #[test]
    fn the_newest_are_kept_and_nothing_else_is_touched() {
        let root = tempfile::tempdir().unwrap();
        let media = MediaDir::new(root.path().join("media"));
        fs::create_dir(media.path()).unwrap();
        fs::write(media.path().join("notes.txt"), "the user's").unwrap();
        // Four earlier saves, a minute apart.
        let now = SystemTime::now();
        let earlier: Vec<PathBuf> = (0..4u64)
            .map(|minutes_ago| {
                let path = media.save("screenshot", "png", b"png", retention(10)).unwrap();
                let at = now - Duration::from_secs(60 * (minutes_ago + 1));
                fs::File::options().write(true).open(&path).unwrap().set_modified(at).unwrap();
                path
            })
            .collect();
        let newest = media.save("page", "pdf", b"%PDF", retention(3)).unwrap();
        assert!(newest.exists());
        let left: Vec<bool> = earlier.iter().map(|p| p.exists()).collect();
        assert_eq!(left, [true, true, false, false], "the newest three in all");
        assert!(media.path().join("notes.txt").exists(), "only our files are pruned");
    }

    #[test]
    fn old_files_go() {
        let root = tempfile::tempdir().unwrap();
        let media = MediaDir::new(root.path().join("media"));
        let old = media.save("screenshot", "png", b"png", retention(10)).unwrap();
        let stale = SystemTime::now() - Duration::from_secs(7200);
        fs::File::options().write(true).open(&old).unwrap().set_modified(stale).unwrap();
        let new = media.save("screenshot", "png", b"png", retention(10)).unwrap();
        assert!(!old.exists() && new.exists());
    }

    #[test]
    fn only_its_own_files_are_contained() {
        let root = tempfile::tempdir().unwrap();
        let media = MediaDir::new(root.path().join("media"));
        let shot = media.save("screenshot", "png", b"png", retention(10)).unwrap();
        fs::write(root.path().join("token"), "secret").unwrap();
        assert!(media.contains(&shot));
        assert!(!media.contains(&media.path().join("../token")), "no way out by ..");
        assert!(!media.contains(&root.path().join("token")));
        assert!(!media.contains(Path::new("/etc/passwd")));
        #[cfg(unix)]
        {
            let link = media.path().join("screenshot-link.png");
            std::os::unix::fs::symlink(root.path().join("token"), &link).unwrap();
            assert!(!media.contains(&link), "nor by a link");
        }
    }
}
