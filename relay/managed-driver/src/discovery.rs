//! Which Chrome to launch: the profile's `executablePath`, else
//! `$BROWSER_RELAY_CHROME`, else the usual places for the platform, in
//! this order:
//!
//! - **Linux**: Debian's Chromium, Google Chrome, Ubuntu's Chromium, Chrome
//!   for Testing (Puppeteer's cache, newest first), Edge, Brave; then
//!   `chromium`, `google-chrome`, `microsoft-edge`, `brave-browser`… on `PATH`.
//! - **macOS**: in `/Applications`, then `~/Applications`: Chrome Canary,
//!   Chromium, Google Chrome, Microsoft Edge, Brave.
//! - **Windows**: Chrome, Chrome Canary, Chromium, Edge, Brave, each in
//!   `%ProgramFiles%`, `%ProgramFiles(x86)%` and `%LOCALAPPDATA%` where its
//!   installer puts it; then `chrome.exe`, `msedge.exe`, `brave.exe` on `PATH`.
//!
//! A pure function over a view of the filesystem and the platform's
//! [`Places`], so every platform's rules are tested on every host with
//! fake trees.

use std::path::{Path, PathBuf};

/// Environment variable naming the browser to launch.
pub const CHROME_ENV: &str = "BROWSER_RELAY_CHROME";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Platform {
    Linux,
    MacOs,
    Windows,
}

impl Platform {
    pub(crate) fn current() -> Self {
        if cfg!(target_os = "macos") {
            Self::MacOs
        } else if cfg!(windows) {
            Self::Windows
        } else {
            Self::Linux
        }
    }
}

/// Where a platform keeps its applications, as the environment says
/// (`%ProgramFiles%`, `%ProgramFiles(x86)%`, `%LOCALAPPDATA%` on Windows;
/// the home folder everywhere).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Places {
    pub home: Option<PathBuf>,
    pub program_files: Option<PathBuf>,
    pub program_files_x86: Option<PathBuf>,
    pub local_app_data: Option<PathBuf>,
}

impl Places {
    /// This process's places.
    pub(crate) fn current() -> Self {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Self {
            home: std::env::home_dir(),
            program_files: var("ProgramFiles"),
            program_files_x86: var("ProgramFiles(x86)"),
            local_app_data: var("LOCALAPPDATA"),
        }
    }

    /// Windows' folders, with the defaults of an English install where the
    /// environment does not name them.
    fn windows_roots(&self) -> (PathBuf, PathBuf, Option<PathBuf>) {
        let local = self.local_app_data.clone().or_else(|| self.home.as_ref().map(|h| h.join(r"AppData\Local")));
        (
            self.program_files.clone().unwrap_or_else(|| PathBuf::from(r"C:\Program Files")),
            self.program_files_x86.clone().unwrap_or_else(|| PathBuf::from(r"C:\Program Files (x86)")),
            local,
        )
    }
}

/// What discovery may look at.
pub(crate) trait FileView {
    fn is_executable(&self, path: &Path) -> bool;
    /// A command name resolved through `PATH`.
    fn which(&self, name: &str) -> Option<PathBuf>;
    /// The entries of a folder (none when it does not exist).
    fn list(&self, dir: &Path) -> Vec<PathBuf>;
}

/// The real filesystem.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RealFiles;

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
        search_path(&std::env::var_os("PATH")?, name, |candidate| self.is_executable(candidate))
    }

    fn list(&self, dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir).map(|entries| entries.filter_map(|e| Some(e.ok()?.path())).collect()).unwrap_or_default()
    }
}

/// `name` in the folders of `path` (a `PATH` value), the first that
/// `is_executable` takes. Only absolute folders: an empty entry or a
/// relative one means the working folder, where anyone who can write there
/// would plant the browser Browser Relay runs.
fn search_path(path: &std::ffi::OsStr, name: &str, is_executable: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    #[error("executablePath {0} is not an executable file")]
    ConfiguredMissing(PathBuf),
    #[error("${CHROME_ENV}={0} is not an executable file")]
    EnvMissing(PathBuf),
    #[error(
        "no Chrome, Chromium, Edge or Brave found; looked in: {}. Install one (Chrome: https://www.google.com/chrome/; Debian: apt-get install chromium) or set executablePath in config.toml or ${CHROME_ENV}",
        .0.join(", ")
    )]
    NotFound(Vec<String>),
}

/// Where to look on each platform, in order of preference: paths, then
/// commands on `PATH`.
fn candidates(platform: Platform, places: &Places, files: &impl FileView) -> (Vec<PathBuf>, Vec<&'static str>) {
    match platform {
        Platform::Linux => {
            let mut paths: Vec<PathBuf> = [
                // Debian's real binary first: /usr/bin/chromium is a wrapper script.
                "/usr/lib/chromium/chromium",
                "/opt/google/chrome/chrome",
                "/usr/lib/chromium-browser/chromium-browser",
            ]
            .iter()
            .map(PathBuf::from)
            .collect();
            paths.extend(chrome_for_testing(places, files));
            paths.extend(["/opt/microsoft/msedge/msedge", "/opt/brave.com/brave/brave"].iter().map(PathBuf::from));
            let commands = vec![
                "chromium",
                "chromium-browser",
                "google-chrome",
                "google-chrome-stable",
                "chrome",
                "microsoft-edge",
                "microsoft-edge-stable",
                "brave-browser",
            ];
            (paths, commands)
        }
        Platform::MacOs => {
            // The specs' order, then Edge and Brave.
            let apps = [
                "Google Chrome Canary.app/Contents/MacOS/Google Chrome Canary",
                "Chromium.app/Contents/MacOS/Chromium",
                "Google Chrome.app/Contents/MacOS/Google Chrome",
                "Microsoft Edge.app/Contents/MacOS/Microsoft Edge",
                "Brave Browser.app/Contents/MacOS/Brave Browser",
            ];
            let mut dirs = vec![PathBuf::from("/Applications")];
            if let Some(home) = &places.home {
                dirs.push(home.join("Applications"));
            }
            (dirs.iter().flat_map(|dir| apps.iter().map(move |app| dir.join(app))).collect(), Vec::new())
        }
        Platform::Windows => {
            let (program_files, program_files_x86, local) = places.windows_roots();
            // Each browser where its installer puts it: for every user
            // (Program Files, either) or for one (LOCALAPPDATA).
            let browsers: [(&str, bool, bool); 5] = [
                // (its folder and executable, installed for every user, for one)
                (r"Google\Chrome\Application\chrome.exe", true, true),
                (r"Google\Chrome SxS\Application\chrome.exe", false, true),
                (r"Chromium\Application\chrome.exe", true, true),
                (r"Microsoft\Edge\Application\msedge.exe", true, false),
                (r"BraveSoftware\Brave-Browser\Application\brave.exe", true, true),
            ];
            let mut paths = Vec::new();
            for (app, machine, user) in browsers {
                if machine {
                    paths.push(program_files.join(app));
                    paths.push(program_files_x86.join(app));
                }
                if let Some(local) = local.as_ref().filter(|_| user) {
                    paths.push(local.join(app));
                }
            }
            (paths, vec!["chrome.exe", "msedge.exe", "brave.exe"])
        }
    }
}

/// Chrome for Testing as Puppeteer and `@puppeteer/browsers` install it
/// (`~/.cache/puppeteer/chrome/linux-<version>/chrome-linux64/chrome`),
/// newest version first.
fn chrome_for_testing(places: &Places, files: &impl FileView) -> Vec<PathBuf> {
    let Some(home) = &places.home else { return Vec::new() };
    let mut builds: Vec<(Vec<u64>, PathBuf)> = files
        .list(&home.join(".cache/puppeteer/chrome"))
        .into_iter()
        .filter_map(|dir| {
            let name = dir.file_name()?.to_str()?.to_string();
            let version =
                name.strip_prefix("linux-")?.split('.').map(str::parse).collect::<Result<Vec<u64>, _>>().ok()?;
            Some((version, dir.join("chrome-linux64/chrome")))
        })
        .collect();
    builds.sort_by(|a, b| b.0.cmp(&a.0));
    builds.into_iter().map(|(_, path)| path).collect()
}

/// The browser a profile launches on this computer: its `executablePath`
/// (`configured`), else `BROWSER_RELAY_CHROME`, else the first of this
/// system's places that holds one. `launch` and `browser-relay profiles`
/// (which shows it) ask here.
pub fn find_executable(configured: Option<&Path>) -> Result<PathBuf, DiscoveryError> {
    let env_override = std::env::var_os(CHROME_ENV).map(state_dir::path_from_env);
    discover(configured, env_override.as_deref(), Platform::current(), &Places::current(), &RealFiles)
}

/// Finds the browser to launch.
pub(crate) fn discover(
    configured: Option<&Path>,
    env_override: Option<&Path>,
    platform: Platform,
    places: &Places,
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
    let (paths, commands) = candidates(platform, places, files);
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
        fn list(&self, dir: &Path) -> Vec<PathBuf> {
            let children = self.files.iter().filter_map(|f| {
                let rest = f.strip_prefix(dir).ok()?;
                Some(dir.join(rest.components().next()?))
            });
            children.collect::<HashSet<_>>().into_iter().collect()
        }
    }

    fn linux(tree: &Tree) -> Result<PathBuf, DiscoveryError> {
        let places = Places { home: Some("/home/ana".into()), ..Places::default() };
        discover(None, None, Platform::Linux, &places, tree)
    }

    #[test]
    fn configured_path_wins_and_must_exist() {
        let tree = Tree::new(&["/opt/c/chrome", "/usr/lib/chromium/chromium"]);
        let places = Places::default();
        let found = discover(Some(Path::new("/opt/c/chrome")), None, Platform::Linux, &places, &tree);
        assert_eq!(found.unwrap(), PathBuf::from("/opt/c/chrome"));
        let missing = discover(Some(Path::new("/nope")), None, Platform::Linux, &places, &tree).unwrap_err();
        assert_eq!(missing, DiscoveryError::ConfiguredMissing("/nope".into()));
    }

    #[test]
    fn env_override_comes_next() {
        let tree = Tree::new(&["/env/chrome", "/usr/lib/chromium/chromium"]);
        let places = Places::default();
        let found = discover(None, Some(Path::new("/env/chrome")), Platform::Linux, &places, &tree).unwrap();
        assert_eq!(found, PathBuf::from("/env/chrome"));
        assert!(
            discover(None, Some(Path::new("/gone")), Platform::Linux, &places, &tree)
                .unwrap_err()
                .to_string()
                .contains(CHROME_ENV)
        );
    }

    #[test]
    fn linux_prefers_the_real_chromium_binary_then_path() {
        let tree = Tree::new(&["/usr/lib/chromium/chromium", "/usr/local/bin/google-chrome"]);
        assert_eq!(linux(&tree).unwrap(), PathBuf::from("/usr/lib/chromium/chromium"));
        let tree = Tree::new(&["/usr/local/bin/google-chrome"]);
        assert_eq!(linux(&tree).unwrap(), PathBuf::from("/usr/local/bin/google-chrome"));
    }

    #[test]
    fn linux_finds_chrome_for_testing_newest_first_then_edge_then_brave() {
        let cft = "/home/ana/.cache/puppeteer/chrome";
        let old = format!("{cft}/linux-131.0.6778.85/chrome-linux64/chrome");
        let new = format!("{cft}/linux-142.0.7444.59/chrome-linux64/chrome");
        let edge = "/opt/microsoft/msedge/msedge";
        let brave = "/opt/brave.com/brave/brave";
        let tree = Tree::new(&[&old, &new, edge, brave]);
        assert_eq!(linux(&tree).unwrap(), PathBuf::from(&new), "142 before 131, though '13' sorts after '14'");
        assert_eq!(linux(&Tree::new(&[edge, brave])).unwrap(), PathBuf::from(edge));
        assert_eq!(linux(&Tree::new(&[brave])).unwrap(), PathBuf::from(brave));
        let on_path = Tree::new(&["/usr/local/bin/microsoft-edge"]);
        assert_eq!(linux(&on_path).unwrap(), PathBuf::from("/usr/local/bin/microsoft-edge"));
        // Google Chrome is preferred to all of them.
        assert_eq!(
            linux(&Tree::new(&["/opt/google/chrome/chrome", &new])).unwrap(),
            PathBuf::from("/opt/google/chrome/chrome")
        );
    }

    #[test]
    fn macos_looks_in_both_application_folders_canary_first() {
        let places = Places { home: Some("/Users/ana".into()), ..Places::default() };
        let canary = "/Users/ana/Applications/Google Chrome Canary.app/Contents/MacOS/Google Chrome Canary";
        let tree = Tree::new(&[canary, "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"]);
        // /Applications is searched before ~/Applications, Canary first in each.
        let found = discover(None, None, Platform::MacOs, &places, &tree).unwrap();
        assert_eq!(found, PathBuf::from("/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"));
        let tree = Tree::new(&[canary]);
        assert_eq!(discover(None, None, Platform::MacOs, &places, &tree).unwrap(), PathBuf::from(canary));
    }

    #[test]
    fn macos_takes_edge_then_brave_after_the_chromes() {
        let places = Places { home: Some("/Users/ana".into()), ..Places::default() };
        let edge = "/Applications/Microsoft Edge.app/Contents/MacOS/Microsoft Edge";
        let brave = "/Applications/Brave Browser.app/Contents/MacOS/Brave Browser";
        let chromium = "/Applications/Chromium.app/Contents/MacOS/Chromium";
        let find = |files: &[&str]| discover(None, None, Platform::MacOs, &places, &Tree::new(files)).unwrap();
        assert_eq!(find(&[brave, edge, chromium]), PathBuf::from(chromium));
        assert_eq!(find(&[brave, edge]), PathBuf::from(edge));
        assert_eq!(find(&[brave]), PathBuf::from(brave));
        let error = discover(None, None, Platform::MacOs, &places, &Tree::new(&[])).unwrap_err().to_string();
        let in_home =
            Path::new("/Users/ana").join("Applications").join("Brave Browser.app/Contents/MacOS/Brave Browser");
        assert!(error.contains(&in_home.display().to_string()), "{error}");
    }

    /// A Windows user whose folders the environment names, on drive D:.
    fn windows_places() -> Places {
        Places {
            home: Some(PathBuf::from(r"D:\Users\ana")),
            program_files: Some(PathBuf::from(r"D:\Program Files")),
            program_files_x86: Some(PathBuf::from(r"D:\Program Files (x86)")),
            local_app_data: Some(PathBuf::from(r"D:\Users\ana\AppData\Local")),
        }
    }

    fn windows(places: &Places, files: &[PathBuf]) -> Result<PathBuf, DiscoveryError> {
        let tree = Tree { files: files.iter().cloned().collect(), bin: PathBuf::from(r"C:\bin") };
        discover(None, None, Platform::Windows, places, &tree)
    }

    #[test]
    fn windows_looks_where_each_installer_puts_its_browser_in_order() {
        let places = windows_places();
        let program_files = places.program_files.clone().unwrap();
        let x86 = places.program_files_x86.clone().unwrap();
        let local = places.local_app_data.clone().unwrap();
        let chrome = program_files.join(r"Google\Chrome\Application\chrome.exe");
        let chrome_x86 = x86.join(r"Google\Chrome\Application\chrome.exe");
        let chrome_user = local.join(r"Google\Chrome\Application\chrome.exe");
        let canary = local.join(r"Google\Chrome SxS\Application\chrome.exe");
        let chromium = local.join(r"Chromium\Application\chrome.exe");
        let edge = x86.join(r"Microsoft\Edge\Application\msedge.exe");
        let brave = program_files.join(r"BraveSoftware\Brave-Browser\Application\brave.exe");
        // Each found alone, where the environment says.
        for alone in [&chrome, &chrome_x86, &chrome_user, &canary, &chromium, &edge, &brave] {
            assert_eq!(&windows(&places, std::slice::from_ref(alone)).unwrap(), alone);
        }
        // And in order of preference.
        let all = [brave.clone(), edge.clone(), chromium.clone(), canary.clone(), chrome_user.clone(), chrome.clone()];
        assert_eq!(windows(&places, &all).unwrap(), chrome);
        assert_eq!(windows(&places, &all[..5]).unwrap(), chrome_user);
        assert_eq!(windows(&places, &all[..4]).unwrap(), canary);
        assert_eq!(windows(&places, &all[..3]).unwrap(), chromium);
        assert_eq!(windows(&places, &all[..2]).unwrap(), edge);
        // On PATH last.
        assert_eq!(
            windows(&places, &[PathBuf::from(r"C:\bin").join("msedge.exe")]).unwrap(),
            PathBuf::from(r"C:\bin").join("msedge.exe")
        );
    }

    #[test]
    fn windows_defaults_its_folders_when_the_environment_is_silent() {
        let places = Places { home: Some(PathBuf::from(r"C:\Users\ana")), ..Places::default() };
        let local = PathBuf::from(r"C:\Users\ana").join(r"AppData\Local").join(r"Google\Chrome\Application\chrome.exe");
        assert_eq!(windows(&places, std::slice::from_ref(&local)).unwrap(), local);
        let machine = PathBuf::from(r"C:\Program Files (x86)").join(r"Microsoft\Edge\Application\msedge.exe");
        assert_eq!(windows(&places, std::slice::from_ref(&machine)).unwrap(), machine);
    }

    #[test]
    fn path_search_skips_empty_and_relative_entries() {
        // A `chromium` in the working folder, planted, and one in a real folder.
        let real = std::env::temp_dir().join("bin");
        let planted =
            |p: &Path| p == Path::new("chromium") || p == Path::new("bin/chromium") || p == real.join("chromium");
        let path = std::env::join_paths([PathBuf::new(), PathBuf::from("bin"), real.clone()]).unwrap();
        assert_eq!(search_path(&path, "chromium", planted), Some(real.join("chromium")));
        let only_relative = std::env::join_paths([PathBuf::new(), PathBuf::from("bin")]).unwrap();
        assert_eq!(search_path(&only_relative, "chromium", planted), None);
    }

    #[test]
    fn nothing_found_lists_where_it_looked() {
        let error = linux(&Tree::new(&[])).unwrap_err().to_string();
        assert!(error.contains("/usr/lib/chromium/chromium") && error.contains("google-chrome on PATH"), "{error}");
        assert!(error.contains("/opt/microsoft/msedge/msedge") && error.contains("brave-browser on PATH"), "{error}");
        assert!(error.contains("apt-get install chromium") && error.contains("executablePath"), "{error}");
    }
}
