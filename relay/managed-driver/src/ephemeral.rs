//! Ephemeral profiles ([`Profile::ephemeral`]): not in config.toml, known
//! to the serve that started them, in `ephemeral/<name>` under the state
//! directory, wiped before each launch and deleted when stopped; and the
//! clean-up of those a killed serve left behind.

use std::path::Path;

use crate::browsers::ManagedBrowsers;
use crate::lock::lock;
use crate::process::Ending;
use crate::running::record_in;
use settings::Profile;

impl ManagedBrowsers {
    /// The ephemeral profiles this serve started and has not stopped.
    pub fn ephemeral_profiles(&self) -> Vec<Profile> {
        lock(&self.held.ephemeral).values().cloned().collect()
    }

    pub(crate) fn is_ephemeral(&self, name: &str) -> bool {
        lock(&self.held.ephemeral).contains_key(name)
    }

    pub(crate) fn register_ephemeral(&self, profile: &Profile) {
        lock(&self.held.ephemeral).insert(profile.name.clone(), profile.clone());
    }

    pub(crate) fn forget_ephemeral(&self, name: &str) {
        lock(&self.held.ephemeral).remove(name);
    }

    /// Deletes the folders of ephemeral profiles whose process is gone (a
    /// serve killed before it could delete them), killing a browser still
    /// on one. Called when serve starts; folders another live process owns,
    /// or locks for a start or stop under way, are left alone. How many
    /// were deleted.
    pub async fn remove_abandoned_ephemeral(&self) -> usize {
        let parent = self.root.join("ephemeral");
        if refuse_link(&parent).is_err() {
            return 0;
        }
        let Ok(entries) = std::fs::read_dir(&parent) else { return 0 };
        let children = &self.held.children;
        let mut removed = 0;
        // `DirEntry::file_type` does not follow links: a link planted here
        // (to the user's Documents, say) is no profile folder, and is left
        // alone, said in the log.
        for entry in entries.filter_map(Result::ok) {
            let dir = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => {}
                Ok(kind) if kind.is_symlink() => {
                    let _ = refuse_link(&dir);
                    continue;
                }
                _ => continue,
            }
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if self.is_ephemeral(name) {
                continue;
            }
            let Ok(lock) = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("lock"))
            else {
                continue;
            };
            if lock.try_lock().is_err() {
                continue;
            }
            let record = record_in(&dir);
            if record.as_ref().is_some_and(|r| !self.launched(r) && children.owner_lives(r)) {
                continue;
            }
            if let Some(record) = record {
                let was_on = children.is_browser_on(&dir, &record);
                children.end_browser(&dir, &record, false, Ending::Kill);
                // A browser killed here is gone before its folder goes (that
                // takes a moment), so nothing of it writes there any more.
                if was_on {
                    children.wait_exit(record.pid, std::time::Duration::from_secs(2)).await;
                }
            }
            children.remove_singleton_folder(&dir);
            if remove_locked_folder(&dir, lock).is_ok() {
                tracing::info!(folder = %dir.display(), "deleted an ephemeral profile's folder left by a serve that was killed");
                removed += 1;
            }
        }
        removed
    }
}

/// Refuses a path that is a symbolic link (or, on Windows, a junction):
/// an ephemeral profile's folder, and the folder that holds them, are
/// emptied and deleted, and a link there would have that done to whatever
/// it points to. Whoever can write the state folder could plant one;
/// Browser Relay never deletes through a link. The refusal is logged.
pub(crate) fn refuse_link(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            tracing::warn!(
                link = %path.display(),
                "a link where an ephemeral profile's folder belongs: left alone, nothing deleted through it; remove the link"
            );
            Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{} is a link, not a profile folder: Browser Relay never empties or deletes through a link; remove it",
                    path.display()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// [`refuse_link`] for an ephemeral profile's folder and the folder that
/// holds it.
pub(crate) fn refuse_links_to(dir: &Path) -> std::io::Result<()> {
    if let Some(parent) = dir.parent() {
        refuse_link(parent)?;
    }
    refuse_link(dir)
}

/// Deletes a profile folder whose `lock` the caller holds: all but the
/// lock under it, then the lock and the folder (Windows deletes no file
/// that is open, nor a folder with one in it). A start that takes the lock
/// meanwhile finds its file deleted and takes a new one
/// (`ManagedBrowsers::lock_folder`).
pub(crate) fn remove_locked_folder(dir: &Path, lock: std::fs::File) -> std::io::Result<()> {
    clear_folder_but_lock(dir)?;
    drop(lock);
    std::fs::remove_file(dir.join("lock"))?;
    std::fs::remove_dir(dir)
}

/// Empties a profile folder, keeping the lock its caller holds. A link
/// in its place (or in its parent's) is refused, and the entries are
/// deleted without following links (`remove_dir_all` follows none).
pub(crate) fn clear_folder_but_lock(dir: &Path) -> std::io::Result<()> {
    refuse_links_to(dir)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name() == "lock" {
            continue;
        }
        match entry.file_type()?.is_dir() {
            true => std::fs::remove_dir_all(entry.path())?,
            false => std::fs::remove_file(entry.path())?,
        }
    }
    Ok(())
}
