//! Which Chrome to launch: the profile's `executablePath`, else
//! `$BROWSER_RELAY_CHROME`, else the usual places for the platform. A pure
//! function over a view of the filesystem, so it is tested with fake trees.

use std::path::{Path, PathBuf};

/// Environment variable naming the browser to launch.
pub const CHROME_ENV: &str = "BROWSER_RELAY_CHROME";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Linux,
    MacOs,
    Windows,
}

impl Platform {
    pub fn current() -> Self {
        if cfg!(target_os = "macos") {
            Self::MacOs
        } else if cfg!(windows) {
            Self::Windows
        } else {
            Self::Linux
        }
    }
}

/// What discovery may look at.
pub trait FileView {
    fn is_executable(&self, path: &Path) -> bool;
    /// A command name resolved through `PATH`.
    fn which(&self, name: &str) -> Option<PathBuf>;
}

/// The real filesystem.
#[derive(Debug, Clone, Copy)]
pub struct RealFiles;

impl FileView for RealFiles {
    fn is_executable(&self, path: &Path) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        }
        #[cfg(not(unix))]
        {
            path.is_file()
        }
    }

    fn which(&self, name: &str) -> Option<PathBuf> {
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
            .map(|dir| dir.join(name))
            .find(|candidate| self.is_executable(candidate))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    #[error("executablePath {0} is not an executable file")]
    ConfiguredMissing(PathBuf),
    #[error("${CHROME_ENV}={0} is not an executable file")]
    EnvMissing(PathBuf),
    #[error(
        "no Chrome or Chromium found; looked in: {}. Install Chromium (Debian: apt-get install chromium) or set executablePath in config.toml or ${CHROME_ENV}",
        .0.join(", ")
    )]
    NotFound(Vec<String>),
}

/// Where to look on each platform, in order of preference.
fn candidates(platform: Platform, home: Option<&Path>) -> (Vec<PathBuf>, Vec<&'static str>) {
    match platform {
        Platform::Linux => (
            // Debian's real binary first: /usr/bin/chromium is a wrapper script.
            ["/usr/lib/chromium/chromium", "/opt/google/chrome/chrome", "/usr/lib/chromium-browser/chromium-browser"]
                .iter()
                .map(PathBuf::from)
                .collect(),
            vec!["chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"],
        ),
        Platform::MacOs => {
            let apps = [
                "Google Chrome Canary.app/Contents/MacOS/Google Chrome Canary",
                "Chromium.app/Contents/MacOS/Chromium",
                "Google Chrome.app/Contents/MacOS/Google Chrome",
            ];
            let mut dirs = vec![PathBuf::from("/Applications")];
            if let Some(home) = home {
                dirs.push(home.join("Applications"));
            }
            (dirs.iter().flat_map(|dir| apps.iter().map(move |app| dir.join(app))).collect(), Vec::new())
        }
        Platform::Windows => {
            let roots = [r"C:\Program Files", r"C:\Program Files (x86)"];
            let mut paths: Vec<PathBuf> =
                roots.iter().map(|r| Path::new(r).join(r"Google\Chrome\Application\chrome.exe")).collect();
            if let Some(home) = home {
                paths.push(home.join(r"AppData\Local\Google\Chrome\Application\chrome.exe"));
                paths.push(home.join(r"AppData\Local\Chromium\Application\chrome.exe"));
            }
            (paths, vec!["chrome.exe"])
        }
    }
}

/// Finds the browser to launch.
pub fn discover(
    configured: Option<&Path>,
    env_override: Option<&Path>,
    platform: Platform,
    home: Option<&Path>,
    files: &impl FileView,
) -> Result<PathBuf, DiscoveryError> {
    if let Some(path) = configured {
        return if files.is_executable(path) {
            Ok(path.to_path_buf())
        } else {
            Err(DiscoveryError::ConfiguredMissing(path.to_path_buf()))
        };
    }
    if let Some(path) = env_override {
        return if files.is_executable(path) {
            Ok(path.to_path_buf())
        } else {
            Err(DiscoveryError::EnvMissing(path.to_path_buf()))
        };
    }
    let (paths, commands) = candidates(platform, home);
    if let Some(found) = paths.iter().find(|p| files.is_executable(p)) {
        return Ok(found.clone());
    }
    if let Some(found) = commands.iter().find_map(|c| files.which(c)) {
        return Ok(found);
    }
    let mut looked: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    looked.extend(commands.iter().map(|c| format!("{c} on PATH")));
    Err(DiscoveryError::NotFound(looked))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// A fake tree: these paths are executables; `PATH` holds `bin`.
    struct Tree {
        files: HashSet<PathBuf>,
        bin: PathBuf,
    }

    impl Tree {
        fn new(files: &[&str]) -> Self {
            Self { files: files.iter().map(PathBuf::from).collect(), bin: PathBuf::from("/usr/local/bin") }
        }
    }

    impl FileView for Tree {
        fn is_executable(&self, path: &Path) -> bool {
            self.files.contains(path)
        }
        fn which(&self, name: &str) -> Option<PathBuf> {
            Some(self.bin.join(name)).filter(|p| self.files.contains(p))
        }
    }

    #[test]
    fn configured_path_wins_and_must_exist() {
        let tree = Tree::new(&["/opt/c/chrome", "/usr/lib/chromium/chromium"]);
        let found = discover(Some(Path::new("/opt/c/chrome")), None, Platform::Linux, None, &tree);
        assert_eq!(found.unwrap(), PathBuf::from("/opt/c/chrome"));
        let missing = discover(Some(Path::new("/nope")), None, Platform::Linux, None, &tree).unwrap_err();
        assert_eq!(missing, DiscoveryError::ConfiguredMissing("/nope".into()));
    }

    #[test]
    fn env_override_comes_next() {
        let tree = Tree::new(&["/env/chrome", "/usr/lib/chromium/chromium"]);
        let found = discover(None, Some(Path::new("/env/chrome")), Platform::Linux, None, &tree).unwrap();
        assert_eq!(found, PathBuf::from("/env/chrome"));
        assert!(
            discover(None, Some(Path::new("/gone")), Platform::Linux, None, &tree)
                .unwrap_err()
                .to_string()
                .contains(CHROME_ENV)
        );
    }

    #[test]
    fn linux_prefers_the_real_chromium_binary_then_path() {
        let tree = Tree::new(&["/usr/lib/chromium/chromium", "/usr/local/bin/google-chrome"]);
        assert_eq!(
            discover(None, None, Platform::Linux, None, &tree).unwrap(),
            PathBuf::from("/usr/lib/chromium/chromium")
        );
        let tree = Tree::new(&["/usr/local/bin/google-chrome"]);
        assert_eq!(
            discover(None, None, Platform::Linux, None, &tree).unwrap(),
            PathBuf::from("/usr/local/bin/google-chrome")
        );
    }

    #[test]
    fn macos_looks_in_both_application_folders_canary_first() {
        let home = Path::new("/Users/ana");
        let canary = "/Users/ana/Applications/Google Chrome Canary.app/Contents/MacOS/Google Chrome Canary";
        let tree = Tree::new(&[canary, "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"]);
        // /Applications is searched before ~/Applications, Canary first in each.
        let found = discover(None, None, Platform::MacOs, Some(home), &tree).unwrap();
        assert_eq!(found, PathBuf::from("/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"));
        let tree = Tree::new(&[canary]);
        assert_eq!(discover(None, None, Platform::MacOs, Some(home), &tree).unwrap(), PathBuf::from(canary));
    }

    #[test]
    fn windows_program_files_and_local_app_data() {
        let home = Path::new(r"C:\Users\ana");
        let local = home.join(r"AppData\Local\Google\Chrome\Application\chrome.exe");
        let tree = Tree { files: [local.clone()].into_iter().collect(), bin: PathBuf::from(r"C:\bin") };
        assert_eq!(discover(None, None, Platform::Windows, Some(home), &tree).unwrap(), local);
    }

    #[test]
    fn nothing_found_lists_where_it_looked() {
        let error = discover(None, None, Platform::Linux, None, &Tree::new(&[])).unwrap_err().to_string();
        assert!(error.contains("/usr/lib/chromium/chromium") && error.contains("google-chrome on PATH"), "{error}");
        assert!(error.contains("apt-get install chromium") && error.contains("executablePath"), "{error}");
    }
}
