//! Profiles: `<state>/config.toml`. Two profiles exist without any file:
//! `chrome` (the user's own Chrome through the extension) and `managed` (an
//! isolated Chrome that Browser Relay launches, orange). Without a
//! `defaultProfile` the default is [`AUTO_PROFILE`]: the user's shared tabs
//! when the extension shares one, else the managed Chrome.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const CONFIG_FILE: &str = "config.toml";
/// The managed profile's colour: recognisable at a glance.
pub const MANAGED_COLOR: &str = "#FF4500";
/// `defaultProfile = "auto"` (the default): requests that name no profile
/// go to the user's shared tabs when the extension shares one, else to the
/// managed Chrome. Not a profile name.
pub const AUTO_PROFILE: &str = "auto";
/// How many managed browsers one serve runs at once unless config.toml
/// says otherwise (`maxManagedBrowsers`). Each headless Chrome is a browser,
/// a GPU, a network and a renderer process per tab, a few hundred MB
/// together: 8 fit on an ordinary laptop next to the user's own work, and
/// are what the parallel-profiles benchmark runs. The cap is what stops an
/// agent that loops on ephemeral starts before the machine swaps.
pub const DEFAULT_MAX_MANAGED_BROWSERS: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("no profile named '{name}'; profiles: {known}")]
    UnknownProfile { name: String, known: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    /// The user's own Chrome, through the extension.
    Extension,
    /// A Chrome that Browser Relay launches with its own profile.
    Managed,
}

/// One profile as written in the file (every field optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProfileEntry {
    driver: Option<Driver>,
    color: Option<String>,
    headless: Option<bool>,
    no_sandbox: Option<bool>,
    attach_only: Option<bool>,
    executable_path: Option<PathBuf>,
    cdp_port: Option<u16>,
    cdp_url: Option<String>,
    #[serde(default)]
    args: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConfigFile {
    default_profile: Option<String>,
    allow_evaluate: Option<bool>,
    allow_file_urls: Option<bool>,
    upload_roots: Option<Vec<PathBuf>>,
    media_keep: Option<usize>,
    media_max_age_hours: Option<u64>,
    max_managed_browsers: Option<usize>,
    #[serde(default)]
    profiles: BTreeMap<String, ProfileEntry>,
}

/// A resolved profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    pub name: String,
    pub driver: Driver,
    pub color: String,
    /// `None`: headless when no display is available.
    pub headless: Option<bool>,
    pub no_sandbox: bool,
    /// Never launch; connect to `cdp_url`/`cdp_port` only.
    pub attach_only: bool,
    pub executable_path: Option<PathBuf>,
    /// The debugging port of a browser started by someone else
    /// (`attachOnly`); a launched browser has none (it speaks over a pipe).
    pub cdp_port: Option<u16>,
    /// A browser started by someone else (any address): never launched.
    /// Shown (serialized) without credentials or query: [`redacted_url`].
    #[serde(serialize_with = "serialize_redacted")]
    pub cdp_url: Option<String>,
    pub args: Vec<String>,
    /// Not in config.toml: started with `ephemeral: true` for one run. Its
    /// folder is deleted when it stops, and it is forgotten then (see
    /// `ManagedBrowsers::start`).
    #[serde(default)]
    pub ephemeral: bool,
}

fn serialize_redacted<S: serde::Serializer>(url: &Option<String>, serializer: S) -> Result<S::Ok, S::Error> {
    url.as_deref().map(redacted_url).serialize(serializer)
}

impl Profile {
    fn default_named(name: &str, driver: Driver) -> Self {
        Self {
            name: name.to_string(),
            driver,
            color: if driver == Driver::Managed { MANAGED_COLOR.into() } else { "#1A73E8".into() },
            headless: None,
            no_sandbox: false,
            attach_only: false,
            executable_path: None,
            cdp_port: None,
            cdp_url: None,
            args: Vec::new(),
            ephemeral: false,
        }
    }

    /// An ephemeral profile: a managed one with the default settings, under
    /// a name checked as config.toml's are ([`check_profile_name`]).
    pub fn ephemeral(name: &str) -> Result<Self, String> {
        check_profile_name(name)?;
        Ok(Self { ephemeral: true, ..Self::default_named(name, Driver::Managed) })
    }

    /// Whether Browser Relay may launch this profile's browser.
    pub fn launches(&self) -> bool {
        self.driver == Driver::Managed && !self.attach_only && self.cdp_url.is_none()
    }
}

/// All profiles and the default one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub default_profile: String,
    /// Whether agents may run their own JavaScript (`/act` kinds `evaluate`
    /// and `wait {fn}`). `allowEvaluate = false` switches it off.
    pub allow_evaluate: bool,
    /// Whether agents may open `file://` URLs (`allowFileUrls`, default
    /// off: a page of the user's disk is then readable through snapshots).
    pub allow_file_urls: bool,
    /// The folders agents may upload files from (`uploadRoots`, absolute
    /// paths; default none: no uploads).
    pub upload_roots: Vec<PathBuf>,
    /// How many screenshots and PDFs the media folder keeps (`mediaKeep`,
    /// the newest; default 100).
    pub media_keep: usize,
    /// How long it keeps them (`mediaMaxAgeHours`, default 24).
    pub media_max_age: std::time::Duration,
    /// How many managed browsers one serve runs at once
    /// (`maxManagedBrowsers`, default [`DEFAULT_MAX_MANAGED_BROWSERS`]).
    pub max_managed_browsers: usize,
    pub profiles: BTreeMap<String, Profile>,
}

impl Config {
    /// Reads `<state>/config.toml`; a missing file gives the defaults.
    pub fn load(state_root: &Path) -> Result<Self, ConfigError> {
        let path = state_root.join(CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::defaults()),
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }

    pub fn defaults() -> Self {
        let mut profiles = BTreeMap::new();
        profiles.insert("chrome".into(), Profile::default_named("chrome", Driver::Extension));
        profiles.insert("managed".into(), Profile::default_named("managed", Driver::Managed));
        Self {
            default_profile: AUTO_PROFILE.into(),
            allow_evaluate: true,
            allow_file_urls: false,
            upload_roots: Vec::new(),
            media_keep: 100,
            media_max_age: std::time::Duration::from_secs(24 * 3600),
            max_managed_browsers: DEFAULT_MAX_MANAGED_BROWSERS,
            profiles,
        }
    }

    /// Parses the file's text; `path` names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid { path: path.to_path_buf(), message };
        // toml's messages name the key and show the line.
        let file: ConfigFile = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let mut config = Self::defaults();
        for (name, entry) in file.profiles {
            check_profile_name(&name).map_err(invalid)?;
            let base = config.profiles.get(&name).cloned();
            let driver = entry
                .driver
                .or(base.as_ref().map(|b| b.driver))
                .ok_or_else(|| invalid(format!("profiles.{name}.driver is missing: \"extension\" or \"managed\"")))?;
            let mut profile =
                base.filter(|b| b.driver == driver).unwrap_or_else(|| Profile::default_named(&name, driver));
            if let Some(color) = entry.color {
                if !is_hex_color(&color) {
                    return Err(invalid(format!("profiles.{name}.color = \"{color}\": expected \"#RRGGBB\"")));
                }
                profile.color = color.to_ascii_uppercase();
            }
            if entry.cdp_port == Some(9222) {
                return Err(invalid(format!(
                    "profiles.{name}.cdpPort = 9222: that is the user's Chrome's usual debugging port; pick another or leave it out"
                )));
            }
            if let Some(url) = entry.cdp_url.as_ref().filter(|u| !(u.starts_with("http://") || u.starts_with("ws://")))
            {
                return Err(invalid(format!("profiles.{name}.cdpUrl = \"{url}\": expected http:// or ws://")));
            }
            if driver == Driver::Extension
                && (entry.executable_path.is_some() || entry.cdp_port.is_some() || entry.cdp_url.is_some())
            {
                return Err(invalid(format!(
                    "profiles.{name}: executablePath, cdpPort and cdpUrl apply to managed profiles only"
                )));
            }
            if entry.cdp_port.is_some() && entry.attach_only != Some(true) {
                return Err(invalid(format!(
                    "profiles.{name}.cdpPort: a browser Browser Relay launches has no debugging port (it speaks CDP over a pipe, which no other process can reach); cdpPort is for attachOnly profiles"
                )));
            }
            if entry.attach_only == Some(true) && entry.cdp_port.is_none() && entry.cdp_url.is_none() {
                return Err(invalid(format!(
                    "profiles.{name}.attachOnly needs cdpPort or cdpUrl: where is the browser?"
                )));
            }
            // Extra flags must not undo the isolation Browser Relay sets up.
            if let Some(arg) = entry.args.iter().find(|a| {
                a.starts_with("--user-data-dir")
                    || a.starts_with("--remote-debugging-")
                    || a.starts_with("--profile-directory")
            }) {
                return Err(invalid(format!(
                    "profiles.{name}.args: {arg} is set by Browser Relay (the profile folder and debugging port are its own)"
                )));
            }
            profile.headless = entry.headless.or(profile.headless);
            profile.no_sandbox = entry.no_sandbox.unwrap_or(profile.no_sandbox);
            profile.attach_only = entry.attach_only.unwrap_or(profile.attach_only);
            profile.executable_path = entry.executable_path.or(profile.executable_path);
            profile.cdp_port = entry.cdp_port.or(profile.cdp_port);
            profile.cdp_url = entry.cdp_url.or(profile.cdp_url);
            if !entry.args.is_empty() {
                profile.args = entry.args;
            }
            config.profiles.insert(name, profile);
        }
        config.allow_evaluate = file.allow_evaluate.unwrap_or(true);
        config.allow_file_urls = file.allow_file_urls.unwrap_or(false);
        if let Some(roots) = file.upload_roots {
            if let Some(relative) = roots.iter().find(|r| !r.is_absolute()) {
                return Err(invalid(format!("uploadRoots: \"{}\" is not an absolute path", relative.display())));
            }
            config.upload_roots = roots;
        }
        if let Some(keep) = file.media_keep {
            if keep == 0 {
                return Err(invalid("mediaKeep = 0: keep at least the newest file (the answer names it)".into()));
            }
            config.media_keep = keep;
        }
        if let Some(hours) = file.media_max_age_hours {
            // Saturating: a huge number of hours means "keep", not an
            // overflow (a panic, or a wrapped, tiny age in release).
            config.media_max_age = std::time::Duration::from_secs(hours.max(1).saturating_mul(3600));
        }
        if let Some(max) = file.max_managed_browsers {
            if max == 0 {
                return Err(invalid(
                    "maxManagedBrowsers = 0: allow at least 1 (a profile you never start launches nothing)".into(),
                ));
            }
            config.max_managed_browsers = max;
        }
        if let Some(default) = file.default_profile {
            if default != AUTO_PROFILE && !config.profiles.contains_key(&default) {
                return Err(invalid(format!("defaultProfile = \"{default}\": no such profile")));
            }
            config.default_profile = default;
        }
        Ok(config)
    }

    /// Whether requests without a profile choose one by what runs
    /// ([`AUTO_PROFILE`]).
    pub fn default_is_auto(&self) -> bool {
        self.default_profile == AUTO_PROFILE
    }

    /// What `auto` chooses between: the extension's profile (`chrome`, else
    /// the first extension profile) and the managed one (`managed`, else the
    /// first managed profile). `shares_tabs`: whether the extension shares a
    /// tab now.
    pub fn auto_profile(&self, shares_tabs: bool) -> Result<&Profile, ConfigError> {
        let first = |driver: Driver, preferred: &str| {
            self.profiles
                .get(preferred)
                .filter(|p| p.driver == driver)
                .or_else(|| self.profiles.values().find(|p| p.driver == driver))
        };
        let extension = first(Driver::Extension, "chrome");
        let managed = first(Driver::Managed, "managed");
        let chosen = if shares_tabs { extension.or(managed) } else { managed.or(extension) };
        chosen.ok_or_else(|| ConfigError::UnknownProfile { name: AUTO_PROFILE.into(), known: String::new() })
    }

    /// The named profile, or the configured default; `auto` without knowing
    /// what the extension shares means the extension's profile (what the
    /// relay's own root endpoint serves). The control engine resolves `auto`
    /// by what runs instead.
    pub fn profile(&self, name: Option<&str>) -> Result<&Profile, ConfigError> {
        if name.is_none() && self.default_is_auto() {
            return self.auto_profile(true);
        }
        let name = name.unwrap_or(&self.default_profile);
        self.profiles.get(name).ok_or_else(|| ConfigError::UnknownProfile {
            name: name.to_string(),
            known: self.profiles.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }
}

/// A profile's name, in config.toml or for an ephemeral profile: letters,
/// digits, `-` and `_` (it names a folder under the state directory, and
/// must stay inside it), and not [`AUTO_PROFILE`].
pub fn check_profile_name(name: &str) -> Result<(), String> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(format!("profile name '{name}': use letters, digits, '-' and '_'"));
    }
    if name == AUTO_PROFILE {
        return Err(format!(
            "profile name '{AUTO_PROFILE}' is taken: defaultProfile = \"{AUTO_PROFILE}\" means \"the shared tabs, else the managed Chrome\""
        ));
    }
    Ok(())
}

/// A `cdpUrl` as it may be shown (status, errors, logs): credentials and
/// the query (farms put their keys there) replaced by `***`.
pub fn redacted_url(url: &str) -> String {
    // Only a scheme ends at `://`: in `user:pass@host/a://b` it is the path's.
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) if is_scheme(scheme) => (scheme, rest),
        _ => ("", url),
    };
    let (authority_and_path, query) = match rest.split_once(['?', '#']) {
        Some((before, _)) => (before, true),
        None => (rest, false),
    };
    let (authority, path) = authority_and_path.split_once('/').map_or((authority_and_path, ""), |(a, p)| (a, p));
    let host = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_string(),
    };
    let prefix = if scheme.is_empty() { String::new() } else { format!("{scheme}://") };
    let slash = if path.is_empty() && !authority_and_path.ends_with('/') { "" } else { "/" };
    format!("{prefix}{host}{slash}{path}{}", if query { "?***" } else { "" })
}

/// RFC 3986: a letter, then letters, digits, `+`, `-` and `.`.
fn is_scheme(text: &str) -> bool {
    text.starts_with(|c: char| c.is_ascii_alphabetic())
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

fn is_hex_color(color: &str) -> bool {
    color.len() == 7 && color.starts_with('#') && color[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// `#RRGGBB` as Chrome stores colours in profile files: an opaque ARGB
/// value read as a signed 32-bit integer.
pub fn signed_argb(color: &str) -> i32 {
    let rgb = u32::from_str_radix(color.trim_start_matches('#'), 16).unwrap_or(0);
    (0xFF00_0000 | rgb) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(text, Path::new("/state/config.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_have_chrome_and_an_orange_managed_profile() {
        let config = parse("").unwrap();
        assert_eq!(config.default_profile, "auto");
        assert_eq!(config.profile(None).unwrap().driver, Driver::Extension);
        let managed = config.profile(Some("managed")).unwrap();
        assert_eq!((managed.driver, managed.color.as_str()), (Driver::Managed, "#FF4500"));
        assert!(managed.launches());
    }

    #[test]
    fn profiles_override_and_add() {
        let config = parse(
            r##"
            defaultProfile = "work"
            [profiles.managed]
            headless = false
            noSandbox = true
            args = ["--lang=fr"]
            [profiles.work]
            driver = "managed"
            color = "#00aa11"
            executablePath = "/opt/chrome/chrome"
            [profiles.remote]
            driver = "managed"
            cdpUrl = "http://10.0.0.5:9333"
            "##,
        )
        .unwrap();
        let managed = config.profile(Some("managed")).unwrap();
        assert_eq!((managed.headless, managed.no_sandbox, managed.color.as_str()), (Some(false), true, "#FF4500"));
        assert_eq!(managed.args, vec!["--lang=fr".to_string()]);
        let work = config.profile(None).unwrap();
        assert_eq!((work.name.as_str(), work.color.as_str()), ("work", "#00AA11"));
        assert!(!config.profile(Some("remote")).unwrap().launches(), "a cdpUrl is never launched");
    }

    #[test]
    fn auto_chooses_the_shared_tabs_else_the_managed_chrome() {
        let config = parse("").unwrap();
        assert!(config.default_is_auto());
        assert_eq!(config.auto_profile(true).unwrap().name, "chrome");
        assert_eq!(config.auto_profile(false).unwrap().name, "managed");
        // Written out, auto is the same; a named default is not auto.
        assert!(parse("defaultProfile = \"auto\"").unwrap().default_is_auto());
        assert!(!parse("defaultProfile = \"managed\"").unwrap().default_is_auto());
        // A `chrome` turned into a managed profile is not the extension's.
        let config = parse("[profiles.chrome]\ndriver = \"managed\"\n[profiles.mine]\ndriver = \"extension\"").unwrap();
        assert_eq!(config.auto_profile(true).unwrap().name, "mine");
        assert_eq!(config.auto_profile(false).unwrap().name, "managed");
    }

    #[test]
    fn bad_files_are_clear_errors_naming_file_and_key() {
        for (text, expected) in [
            ("[profiles.managed]\nheadles = true", "headles"),
            ("[profiles.x]\ncolor = \"#FF4500\"", "profiles.x.driver is missing"),
            ("[profiles.x]\ndriver = \"firefox\"", "firefox"),
            ("[profiles.managed]\ncolor = \"orange\"", "expected \"#RRGGBB\""),
            ("[profiles.managed]\ncdpPort = 9222", "9222"),
            ("[profiles.chrome]\nexecutablePath = \"/x\"", "managed profiles only"),
            ("defaultProfile = \"nope\"", "no such profile"),
            ("[profiles.auto]\ndriver = \"managed\"", "'auto' is taken"),
            ("[profiles.\"a b\"]\ndriver = \"managed\"", "profile name"),
            ("[profiles.managed]\nheadless = \"yes\"", "headless"),
            ("[profiles.a]\ndriver = \"managed\"\nattachOnly = true", "needs cdpPort or cdpUrl"),
            ("[profiles.a]\ndriver = \"managed\"\ncdpPort = 9333", "has no debugging port"),
            ("[profiles.managed]\nargs = [\"--user-data-dir=/home/me/.config/google-chrome\"]", "set by Browser Relay"),
            ("[profiles.managed]\nargs = [\"--remote-debugging-port=9222\"]", "set by Browser Relay"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.starts_with("/state/config.toml: "), "{error}");
            assert!(error.contains(expected), "{text:?}: {error}");
        }
        let unknown = Config::defaults().profile(Some("work")).unwrap_err().to_string();
        assert!(unknown.contains("chrome, managed"), "{unknown}");
    }

    #[test]
    fn file_urls_uploads_and_media_default_to_safe_and_can_be_set() {
        let defaults = parse("").unwrap();
        assert!(!defaults.allow_file_urls && defaults.upload_roots.is_empty());
        assert_eq!((defaults.media_keep, defaults.media_max_age.as_secs()), (100, 24 * 3600));
        let set =
            parse("allowFileUrls = true\nuploadRoots = [\"/home/me/uploads\"]\nmediaKeep = 5\nmediaMaxAgeHours = 2")
                .unwrap();
        assert!(set.allow_file_urls);
        assert_eq!(set.upload_roots, vec![PathBuf::from("/home/me/uploads")]);
        assert_eq!((set.media_keep, set.media_max_age.as_secs()), (5, 7200));
        assert!(parse("uploadRoots = [\"uploads\"]").unwrap_err().contains("not an absolute path"));
        assert!(parse("mediaKeep = 0").unwrap_err().contains("mediaKeep"));
    }

    #[test]
    fn the_managed_browser_cap_defaults_to_eight_and_can_be_set() {
        assert_eq!(parse("").unwrap().max_managed_browsers, DEFAULT_MAX_MANAGED_BROWSERS);
        assert_eq!(parse("maxManagedBrowsers = 2").unwrap().max_managed_browsers, 2);
        assert!(parse("maxManagedBrowsers = 0").unwrap_err().contains("maxManagedBrowsers = 0"));
    }

    #[test]
    fn ephemeral_profiles_are_managed_defaults_under_a_checked_name() {
        let tmp = Profile::ephemeral("tmp-1").unwrap();
        assert!(tmp.ephemeral && tmp.launches());
        assert_eq!(tmp, Profile { ephemeral: true, ..Profile::default_named("tmp-1", Driver::Managed) });
        assert!(Profile::ephemeral("auto").unwrap_err().contains("'auto' is taken"));
        for bad in ["", "a b", "../x", "x/y"] {
            assert!(Profile::ephemeral(bad).unwrap_err().contains("letters, digits"), "{bad:?}");
        }
        // Profiles from config.toml are not ephemeral, and say so in JSON.
        let managed = serde_json::to_value(Config::defaults().profile(Some("managed")).unwrap()).unwrap();
        assert_eq!(managed["ephemeral"], false);
    }

    /// Found by `tests/tests/fuzz.rs`: `hours * 3600` overflowed.
    #[test]
    fn a_huge_media_age_saturates_instead_of_overflowing() {
        let config = parse("mediaMaxAgeHours = 9223372036854775807").unwrap();
        assert_eq!(config.media_max_age.as_secs(), u64::MAX);
        assert_eq!(parse("mediaMaxAgeHours = 5124095576030432").unwrap().media_max_age.as_secs(), u64::MAX);
    }

    #[test]
    fn urls_are_shown_without_their_secrets() {
        for (url, shown) in [
            ("http://10.0.0.5:9333", "http://10.0.0.5:9333"),
            ("wss://user:pass@farm.example/chrome?token=abc", "wss://***@farm.example/chrome?***"),
            ("http://farm.example/?apiKey=k#frag", "http://farm.example/?***"),
            ("ws://127.0.0.1:9222/devtools/browser/X", "ws://127.0.0.1:9222/devtools/browser/X"),
        ] {
            assert_eq!(redacted_url(url), shown);
        }
        // Found by `tests/tests/fuzz.rs`: a `://` after the credentials was
        // taken for the scheme's, and everything before it shown.
        assert_eq!(redacted_url("u:secret@host/a://b"), "***@host/a://b");
        let config =
            parse("[profiles.farm]\ndriver = \"managed\"\ncdpUrl = \"ws://u:p@farm.example/?token=abc\"").unwrap();
        let shown = serde_json::to_string(config.profile(Some("farm")).unwrap()).unwrap();
        assert!(shown.contains("ws://***@farm.example/?***") && !shown.contains("abc"), "{shown}");
    }

    #[test]
    fn colours_are_stored_as_chrome_does() {
        assert_eq!(signed_argb("#FF4500"), -47872);
        assert_eq!(signed_argb("#000000"), -16_777_216);
    }
}
