//! Records what `browser-relay --version` says beside the crate's version:
//! the commit it was built from and the day it was built.
//!
//! - `BROWSER_RELAY_COMMIT`: `git rev-parse --short HEAD`, with `-dirty` when
//!   tracked files differ from it; `unknown` without git (a source tarball,
//!   `cargo install` from a registry). `BROWSER_RELAY_COMMIT` in the build's
//!   environment takes its place (a packager building from a tarball).
//! - `BROWSER_RELAY_BUILD_DATE`: the UTC day, `YYYY-MM-DD`; from
//!   `SOURCE_DATE_EPOCH` when set, so that a reproducible build says the same
//!   every time.
//!
//! It runs again only when HEAD moves, the branch it names moves, or the
//! index changes (a file staged or committed: the dirty mark), not on every
//! build. An edit to a tracked file not yet staged is seen at the next of
//! those (or a `cargo clean -p browser-relay`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=BROWSER_RELAY_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let commit = match std::env::var("BROWSER_RELAY_COMMIT") {
        Ok(commit) if !commit.trim().is_empty() => commit.trim().to_string(),
        _ => git_commit(&manifest_dir).unwrap_or_else(|| "unknown".into()),
    };
    println!("cargo:rustc-env=BROWSER_RELAY_COMMIT={commit}");
    let seconds =
        std::env::var("SOURCE_DATE_EPOCH").ok().and_then(|s| s.trim().parse::<i64>().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
        });
    println!("cargo:rustc-env=BROWSER_RELAY_BUILD_DATE={}", utc_date(seconds));
}

/// `git` in the crate's folder, its trimmed output if it succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn git_commit(dir: &Path) -> Option<String> {
    let short = git(dir, &["rev-parse", "--short", "HEAD"])?;
    // Where HEAD, the branch and the index live. In a worktree `.git` is a
    // file and HEAD is in the worktree's own folder, while the branches are
    // in the common one; `rev-parse` names both.
    let resolve = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() { p } else { dir.join(p) }
    };
    if let Some(git_dir) = git(dir, &["rev-parse", "--git-dir"]).map(resolve) {
        let common = git(dir, &["rev-parse", "--git-common-dir"]).map(resolve).unwrap_or_else(|| git_dir.clone());
        watch(&git_dir.join("HEAD"));
        watch(&git_dir.join("index"));
        if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
            // A branch is a loose file or a line of packed-refs.
            watch(&common.join(&branch));
            watch(&common.join("packed-refs"));
        }
    }
    // Tracked files that differ from HEAD (untracked ones do not count:
    // a build's own output must not make it dirty).
    let dirty = git(dir, &["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{short}-dirty") } else { short })
}

fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// The UTC day of a Unix time, `YYYY-MM-DD` (Howard Hinnant's
/// days-to-civil; no date crate for one line).
fn utc_date(seconds: i64) -> String {
    let z = seconds.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
