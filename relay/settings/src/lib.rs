//! Browser Relay's settings: `<state>/config.toml`, read on every use (an
//! edit applies at once) by whoever needs it: the product-wide policy
//! (`defaultProfile`, `allowEvaluate`, `allowFileUrls`,
//! `allowWipingBrowserData`, `uploadRoots`, the media folder's retention,
//! `extensionIds`, `maxManagedBrowsers`) for the relay, the control engine
//! and the binary, and the profiles for the managed driver.
//!
//! Profiles. Two profiles exist without any file:
//! `chrome` (the user's own Chrome through the extension) and `managed` (an
//! isolated Chrome that Browser Relay launches, orange). Without a
//! `defaultProfile` the default is [`AUTO_PROFILE`]: the user's shared tabs
//! when the extension shares one, else the managed Chrome.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cdp_client::{Dial, Secret};
use serde::{Deserialize, Serialize};
use state_dir::ReadTrustedError;
use toml::Spanned;

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
    /// config.toml, or the state folder around it, could be changed by
    /// someone other than the user: it is not read at all.
    #[error(transparent)]
    Untrusted(#[from] state_dir::Untrusted),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    /// The user's own Chrome, through the extension.
    Extension,
    /// A Chrome that Browser Relay launches with its own profile.
    Managed,
}

/// One profile as written in the file (every field optional). No `Debug`:
/// it holds the secrets as written.
#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProfileEntry {
    driver: Option<Driver>,
    color: Option<String>,
    headless: Option<bool>,
    no_sandbox: Option<bool>,
    attach_only: Option<bool>,
    // Where a path or a flag was written is kept (its span in the file):
    // see `check_escapes`.
    executable_path: Option<Spanned<PathBuf>>,
    cdp_port: Option<u16>,
    cdp_url: Option<String>,
    cdp_headers: Option<BTreeMap<String, Secret>>,
    cdp_ca_file: Option<Spanned<PathBuf>>,
    #[serde(default)]
    args: Vec<Spanned<String>>,
}

impl ProfileEntry {
    /// The profile `name` as written, on top of `base` (the default profile
    /// of that name, when it has the same driver), or what is wrong with it.
    fn into_profile(self, name: &str, base: Option<Profile>, text: &str) -> Result<Profile, String> {
        let driver = self
            .driver
            .or(base.as_ref().map(|b| b.driver))
            .ok_or_else(|| format!("profiles.{name}.driver is missing: \"extension\" or \"managed\""))?;
        let headers = self.check(name, driver, text)?;
        let mut profile = base.filter(|b| b.driver == driver).unwrap_or_else(|| Profile::default_named(name, driver));
        if let Some(color) = self.color {
            profile.color = color.to_ascii_uppercase();
        }
        let args: Vec<String> = self.args.into_iter().map(Spanned::into_inner).collect();
        profile.headless = self.headless.or(profile.headless);
        profile.no_sandbox = self.no_sandbox.unwrap_or(profile.no_sandbox);
        profile.attach_only = self.attach_only.unwrap_or(profile.attach_only);
        profile.executable_path = self.executable_path.map(Spanned::into_inner).or(profile.executable_path);
        profile.cdp_port = self.cdp_port.or(profile.cdp_port);
        profile.cdp_url = self.cdp_url.or(profile.cdp_url);
        profile.cdp_headers = headers;
        profile.cdp_ca_file = self.cdp_ca_file.map(Spanned::into_inner);
        if !args.is_empty() {
            profile.args = args;
        }
        Ok(profile)
    }

    /// What is wrong with the profile `name` of `driver` as written, if
    /// anything, else its `cdpHeaders`, checked.
    fn check(&self, name: &str, driver: Driver, text: &str) -> Result<CdpHeaders, String> {
        if let Some(color) = self.color.as_ref().filter(|color| !is_hex_color(color)) {
            return Err(format!("profiles.{name}.color = \"{color}\": expected \"#RRGGBB\""));
        }
        if self.cdp_port == Some(9222) {
            return Err(format!(
                "profiles.{name}.cdpPort = 9222: that is the user's Chrome's usual debugging port; pick another or leave it out"
            ));
        }
        if let Some(url) = &self.cdp_url {
            check_cdp_url(url).map_err(|why| format!("profiles.{name}.cdpUrl = \"{}\": {why}", redacted_url(url)))?;
        }
        if driver == Driver::Extension
            && (self.executable_path.is_some()
                || self.cdp_port.is_some()
                || self.cdp_url.is_some()
                || self.cdp_headers.is_some()
                || self.cdp_ca_file.is_some())
        {
            return Err(format!(
                "profiles.{name}: executablePath, cdpPort, cdpUrl, cdpHeaders and cdpCaFile apply to managed profiles only"
            ));
        }
        if (self.cdp_headers.is_some() || self.cdp_ca_file.is_some()) && self.cdp_url.is_none() {
            return Err(format!(
                "profiles.{name}: cdpHeaders and cdpCaFile are for the browser at cdpUrl, and there is no cdpUrl"
            ));
        }
        for (key, path) in [("executablePath", &self.executable_path), ("cdpCaFile", &self.cdp_ca_file)] {
            if let Some(path) = path {
                check_written_path(path, text).map_err(|why| format!("profiles.{name}.{key}: {why}"))?;
            }
        }
        for arg in &self.args {
            check_written(arg, text).map_err(|why| format!("profiles.{name}.args: {why}"))?;
        }
        if let Some(ca) = self.cdp_ca_file.as_ref().map(Spanned::get_ref).filter(|ca| !ca.is_absolute()) {
            return Err(format!("profiles.{name}.cdpCaFile: \"{}\" is not an absolute path", ca.display()));
        }
        let headers = match &self.cdp_headers {
            Some(headers) => check_headers(headers).map_err(|why| format!("profiles.{name}.cdpHeaders: {why}"))?,
            None => CdpHeaders::default(),
        };
        if self.cdp_port.is_some() && self.attach_only != Some(true) {
            return Err(format!(
                "profiles.{name}.cdpPort: a browser Browser Relay launches has no debugging port (it speaks CDP over a pipe, which no other process can reach); cdpPort is for attachOnly profiles"
            ));
        }
        if self.attach_only == Some(true) && self.cdp_port.is_none() && self.cdp_url.is_none() {
            return Err(format!("profiles.{name}.attachOnly needs cdpPort or cdpUrl: where is the browser?"));
        }
        // Extra flags must not undo the isolation Browser Relay sets up.
        if let Some(arg) = self.args.iter().map(Spanned::get_ref).find(|a| is_reserved_switch(a)) {
            return Err(format!(
                "profiles.{name}.args: {arg} is set by Browser Relay (the profile folder and debugging port are its own)"
            ));
        }
        Ok(headers)
    }
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConfigFile {
    default_profile: Option<String>,
    allow_evaluate: Option<bool>,
    allow_file_urls: Option<bool>,
    allow_wiping_browser_data: Option<bool>,
    record_activity: Option<bool>,
    upload_roots: Option<Vec<Spanned<PathBuf>>>,
    media_keep: Option<usize>,
    media_max_age_hours: Option<u64>,
    max_managed_browsers: Option<usize>,
    remote_cdp_timeout_ms: Option<u64>,
    remote_cdp_handshake_timeout_ms: Option<u64>,
    extension_ids: Option<Vec<String>>,
    #[serde(default)]
    profiles: BTreeMap<String, ProfileEntry>,
}

/// A resolved profile. Its `Debug` and its serialization show `cdp_url`
/// redacted and the headers' values as `***`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// A browser started by someone else (any address: a farm's
    /// `wss://…?token=…`, a Grid's `…/se/cdp`): never launched, reached
    /// through the relay's `/profiles/<name>/`. Shown (serialized) without
    /// credentials or query: [`redacted_url`].
    #[serde(serialize_with = "serialize_redacted")]
    pub cdp_url: Option<String>,
    /// Headers sent to `cdp_url` (a farm's `Authorization`): their values
    /// are secrets, shown as `***`.
    #[serde(default, skip_serializing_if = "CdpHeaders::is_empty")]
    pub cdp_headers: CdpHeaders,
    /// A PEM file of CA certificates trusted for `cdp_url` besides the
    /// system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdp_ca_file: Option<PathBuf>,
    /// config.toml's `remoteCdpTimeoutMs` and `remoteCdpHandshakeTimeoutMs`,
    /// for this profile's connections.
    #[serde(skip)]
    pub remote_deadlines: RemoteDeadlines,
    pub args: Vec<String>,
    /// Not in config.toml: started with `ephemeral: true` for one run. Its
    /// folder is deleted when it stops, and it is forgotten then (see
    /// `ManagedBrowsers::start`).
    #[serde(default)]
    pub ephemeral: bool,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Every field, so that a new one cannot be forgotten here.
        let Self {
            name,
            driver,
            color,
            headless,
            no_sandbox,
            attach_only,
            executable_path,
            cdp_port,
            cdp_url,
            cdp_headers,
            cdp_ca_file,
            remote_deadlines,
            args,
            ephemeral,
        } = self;
        f.debug_struct("Profile")
            .field("name", name)
            .field("driver", driver)
            .field("color", color)
            .field("headless", headless)
            .field("no_sandbox", no_sandbox)
            .field("attach_only", attach_only)
            .field("executable_path", executable_path)
            .field("cdp_port", cdp_port)
            .field("cdp_url", &cdp_url.as_deref().map(redacted_url))
            .field("cdp_headers", cdp_headers)
            .field("cdp_ca_file", cdp_ca_file)
            .field("remote_deadlines", remote_deadlines)
            .field("args", args)
            .field("ephemeral", ephemeral)
            .finish()
    }
}

fn serialize_redacted<S: serde::Serializer>(url: &Option<String>, serializer: S) -> Result<S::Ok, S::Error> {
    url.as_deref().map(redacted_url).serialize(serializer)
}

/// A remote profile's headers: names as written, values [`Secret`]. Shown
/// (serialized, `Debug`) as `{"Authorization": "***"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CdpHeaders(pub Vec<(String, Secret)>);

impl CdpHeaders {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for CdpHeaders {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, _) in &self.0 {
            map.serialize_entry(name, "***")?;
        }
        map.end()
    }
}

/// What a client reads back (`GET /profiles`) is the names; the values it
/// gets are the `***` they were shown as.
impl<'de> Deserialize<'de> for CdpHeaders {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let shown = BTreeMap::<String, String>::deserialize(deserializer)?;
        Ok(Self(shown.into_iter().map(|(name, value)| (name, Secret::new(value))).collect()))
    }
}

/// How long a remote profile's connection may take: TCP
/// (`remoteCdpTimeoutMs`, default 1500), then TLS with the HTTP answer or
/// the WebSocket upgrade (`remoteCdpHandshakeTimeoutMs`, default 3000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteDeadlines {
    pub connect: Duration,
    pub handshake: Duration,
}

impl Default for RemoteDeadlines {
    fn default() -> Self {
        Self { connect: cdp_client::CONNECT_WITHIN, handshake: cdp_client::HANDSHAKE_WITHIN }
    }
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
            cdp_headers: CdpHeaders::default(),
            cdp_ca_file: None,
            remote_deadlines: RemoteDeadlines::default(),
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

    /// Where a managed profile's browser that Browser Relay does not launch
    /// is: its `cdpUrl`, or `http://127.0.0.1:<cdpPort>`. `None` for the
    /// others.
    pub fn remote_url(&self) -> Option<String> {
        if self.driver != Driver::Managed || self.launches() {
            return None;
        }
        Some(self.cdp_url.clone().unwrap_or_else(|| format!("http://127.0.0.1:{}", self.cdp_port.unwrap_or(0))))
    }

    /// How to reach [`Self::remote_url`]: this profile's headers, CA file
    /// and deadlines.
    pub fn dial(&self) -> Dial {
        Dial {
            headers: self.cdp_headers.0.clone(),
            ca_file: self.cdp_ca_file.clone(),
            connect_within: self.remote_deadlines.connect,
            handshake_within: self.remote_deadlines.handshake,
        }
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
    /// Whether CDP clients may wipe the whole cookie jar or cache of the
    /// user's own browser (`allowWipingBrowserData`, default off: it signs
    /// the person out of every site). Managed profiles are not concerned.
    pub allow_wiping_browser_data: bool,
    /// Whether serve keeps the activity record (`recordActivity`, default
    /// on): what clients and agents did to which tab, under
    /// `<state>/activity` and in the dashboard.
    pub record_activity: bool,
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
    /// How long a remote profile's connection may take
    /// (`remoteCdpTimeoutMs`, `remoteCdpHandshakeTimeoutMs`); every profile
    /// carries them too.
    pub remote_deadlines: RemoteDeadlines,
    /// Ids of the Browser Relay extension allowed on `/extension` besides
    /// the pinned development id (`extensionIds`): the Chrome Web Store
    /// gives the published extension an id of its own.
    pub extension_ids: Vec<String>,
    pub profiles: BTreeMap<String, Profile>,
}

/// Whether `id` has the form of a Chrome extension id: 32 letters from
/// `a` to `p` (a hash's hex digits, shifted).
pub fn is_extension_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| (b'a'..=b'p').contains(&b))
}

impl Config {
    /// Reads `<state>/config.toml`; a missing file gives the defaults. Its
    /// `executablePath` and `args` run a program as the user, so a file
    /// (or state folder) that someone else owns or may write to, or a link,
    /// is refused, with the commands that fix it
    /// ([`state_dir::StateDir::read_trusted`]).
    pub fn load(state_root: &Path) -> Result<Self, ConfigError> {
        let path = state_root.join(CONFIG_FILE);
        match state_dir::StateDir::at(state_root).read_trusted(CONFIG_FILE) {
            Ok(Some(bytes)) => {
                let text =
                    config_text(&bytes).map_err(|message| ConfigError::Invalid { path: path.clone(), message })?;
                Self::parse(&text, &path)
            }
            Ok(None) => Ok(Self::defaults()),
            Err(ReadTrustedError::Untrusted(untrusted)) => Err(untrusted.into()),
            Err(ReadTrustedError::Read { path, source }) => Err(ConfigError::Read { path, source }),
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
            allow_wiping_browser_data: false,
            record_activity: true,
            upload_roots: Vec::new(),
            extension_ids: Vec::new(),
            media_keep: 100,
            media_max_age: std::time::Duration::from_secs(24 * 3600),
            max_managed_browsers: DEFAULT_MAX_MANAGED_BROWSERS,
            remote_deadlines: RemoteDeadlines::default(),
            profiles,
        }
    }

    /// Parses the file's text; `path` names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid { path: path.to_path_buf(), message };
        // toml's messages name the key and show the line.
        let mut file: ConfigFile = toml::from_str(text).map_err(|e| invalid(toml_error(&e, text)))?;
        let mut config = Self::defaults();
        for (name, entry) in std::mem::take(&mut file.profiles) {
            check_profile_name(&name).map_err(invalid)?;
            let base = config.profiles.get(&name).cloned();
            let profile = entry.into_profile(&name, base, text).map_err(invalid)?;
            config.profiles.insert(name, profile);
        }
        config.apply_settings(file, text).map_err(invalid)?;
        Ok(config)
    }

    /// The file's settings but its profiles, on top of the defaults (and
    /// its remote deadlines on every profile, already read), or what is
    /// wrong with them.
    fn apply_settings(&mut self, file: ConfigFile, text: &str) -> Result<(), String> {
        if let Some(ids) = file.extension_ids {
            if let Some(bad) = ids.iter().find(|id| !is_extension_id(id)) {
                return Err(format!(
                    "extensionIds: \"{bad}\" is not an extension id (32 letters a-p, as chrome://extensions shows it)"
                ));
            }
            self.extension_ids = ids;
        }
        self.allow_evaluate = file.allow_evaluate.unwrap_or(true);
        self.allow_file_urls = file.allow_file_urls.unwrap_or(false);
        self.allow_wiping_browser_data = file.allow_wiping_browser_data.unwrap_or(false);
        self.record_activity = file.record_activity.unwrap_or(true);
        if let Some(roots) = file.upload_roots {
            for root in &roots {
                check_written_path(root, text).map_err(|why| format!("uploadRoots: {why}"))?;
            }
            let roots: Vec<PathBuf> = roots.into_iter().map(Spanned::into_inner).collect();
            if let Some(relative) = roots.iter().find(|r| !r.is_absolute()) {
                return Err(format!("uploadRoots: \"{}\" is not an absolute path", relative.display()));
            }
            self.upload_roots = roots;
        }
        if let Some(keep) = file.media_keep {
            if keep == 0 {
                return Err("mediaKeep = 0: keep at least the newest file (the answer names it)".into());
            }
            self.media_keep = keep;
        }
        if let Some(hours) = file.media_max_age_hours {
            // Saturating: a huge number of hours means "keep", not an
            // overflow (a panic, or a wrapped, tiny age in release).
            self.media_max_age = std::time::Duration::from_secs(hours.max(1).saturating_mul(3600));
        }
        if let Some(max) = file.max_managed_browsers {
            if max == 0 {
                return Err(
                    "maxManagedBrowsers = 0: allow at least 1 (a profile you never start launches nothing)".into()
                );
            }
            self.max_managed_browsers = max;
        }
        for (key, value, slot) in [
            ("remoteCdpTimeoutMs", file.remote_cdp_timeout_ms, &mut self.remote_deadlines.connect),
            ("remoteCdpHandshakeTimeoutMs", file.remote_cdp_handshake_timeout_ms, &mut self.remote_deadlines.handshake),
        ] {
            if let Some(ms) = value {
                if ms == 0 {
                    return Err(format!("{key} = 0: allow at least 1 ms"));
                }
                *slot = Duration::from_millis(ms);
            }
        }
        for profile in self.profiles.values_mut() {
            profile.remote_deadlines = self.remote_deadlines;
        }
        if let Some(default) = file.default_profile {
            if default != AUTO_PROFILE && !self.profiles.contains_key(&default) {
                return Err(format!("defaultProfile = \"{default}\": no such profile"));
            }
            self.default_profile = default;
        }
        Ok(())
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
/// the query (farms put their keys there) replaced by `***`. The CDP
/// client's [`cdp_client::redact`], the one redaction of the project.
pub fn redacted_url(url: &str) -> String {
    cdp_client::redact(url)
}

/// A `cdpUrl`: `http(s)://` (a debugging endpoint with `/json/version`) or
/// `ws(s)://` (the browser's WebSocket), with a host and without
/// credentials (they would not be sent: headers carry them). The reason,
/// never the URL (the caller shows it redacted).
fn check_cdp_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https" | "ws" | "wss") {
        return Err("expected http://, https://, ws:// or wss://".into());
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("no host".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(
            "credentials in the URL (user:password@) are not sent: put them in cdpHeaders (Authorization = \"Basic …\")"
                .into(),
        );
    }
    Ok(())
}

/// Headers Browser Relay's client writes itself, which a profile may not
/// set (nor any `Sec-WebSocket-*`).
const OWN_HEADERS: [&str; 6] = ["host", "connection", "upgrade", "content-length", "transfer-encoding", "te"];

/// A profile's `cdpHeaders`: valid names (not one the client writes) and
/// values. Errors name the header, never its value.
fn check_headers(headers: &BTreeMap<String, Secret>) -> Result<CdpHeaders, String> {
    let mut checked = Vec::new();
    for (name, value) in headers {
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || !name.bytes().all(token) {
            return Err(format!("{name:?} is not a header name"));
        }
        let lower = name.to_ascii_lowercase();
        if OWN_HEADERS.contains(&lower.as_str()) || lower.starts_with("sec-websocket-") {
            return Err(format!("{name} is set by Browser Relay's client"));
        }
        // Header names are case-insensitive: two spellings would send the
        // header twice, and which one a farm reads is its own choice.
        if let Some((other, _)) = checked.iter().find(|(other, _): &&(String, Secret)| other.eq_ignore_ascii_case(name))
        {
            return Err(format!("{other} and {name} are the same header (names ignore case): keep one"));
        }
        // Visible ASCII, spaces and tabs: never a line break that would end
        // the header and start another.
        let value = value.expose();
        if !value.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)) || value.trim().is_empty() {
            return Err(format!(
                "the value of {name} is empty or holds characters a header cannot (line breaks, control or non-ASCII characters)"
            ));
        }
        checked.push((name.clone(), Secret::new(value)));
    }
    Ok(CdpHeaders(checked))
}

/// What a value with backslashes needs (a Windows path, most often): in
/// double quotes, `\` starts an escape (`"C:\new"` is "C:", a line break,
/// "ew").
const BACKSLASH_HINT: &str = "in double quotes \\ starts an escape: double each \\ (\"C:\\\\Program Files\\\\…\"), or write the value in single quotes ('C:\\Program Files\\…')";

/// A value that holds a tab, a line break or another control character,
/// which no path or browser flag does: most often a Windows path in double
/// quotes whose `\t` or `\n` TOML read as an escape.
fn check_no_control(text: &str) -> Result<(), String> {
    match text.chars().any(char::is_control) {
        true => Err(format!("{text:?} holds a tab, a line break or another control character: {BACKSLASH_HINT}")),
        false => Ok(()),
    }
}

/// As [`check_no_control`], without showing the value: a flag may hold a
/// secret (a proxy's password), and config errors reach agents.
fn check_no_control_unshown(text: &str) -> Result<(), String> {
    check_no_control(text)
        .map_err(|_| format!("a value holds a tab, a line break or another control character: {BACKSLASH_HINT}"))
}

/// A path as written in the file: no control character, and no escape
/// that quietly made it another path ([`check_written`]).
fn check_written_path(path: &Spanned<PathBuf>, text: &str) -> Result<(), String> {
    check_no_control(&path.get_ref().to_string_lossy())?;
    check_escapes(text, path.span())
}

/// A flag as written in the file: as [`check_written_path`], its value
/// never shown.
fn check_written(value: &Spanned<String>, text: &str) -> Result<(), String> {
    check_no_control_unshown(value.get_ref())?;
    check_escapes(text, value.span())
}

/// A value written in double quotes with a `\x..`, `\u....` or
/// `\U........` escape: TOML turns it into one character, which no path or
/// flag means to hold. It is a Windows path (`"D:\xfer"`, `"C:\uabc1"`)
/// read as escapes; the other escapes are refused by TOML itself or, made
/// into a tab or line break, by [`check_no_control`]. `span` is where the
/// value is written in `text`, quotes included; in single quotes nothing
/// escapes.
fn check_escapes(text: &str, span: std::ops::Range<usize>) -> Result<(), String> {
    let raw = text.get(span.clone()).unwrap_or_default();
    if !raw.starts_with('"') {
        return Ok(());
    }
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            continue;
        }
        match chars.next() {
            Some(escape @ ('x' | 'u' | 'U')) => {
                let line = text[..span.start].matches('\n').count() + 1;
                return Err(format!(
                    "on line {line}, \"…\\{escape}…\" was read as a character code (TOML's \\{escape} escape), not as written: {BACKSLASH_HINT}"
                ));
            }
            _ => continue,
        }
    }
    Ok(())
}

/// config.toml's text: UTF-8, with or without a byte-order mark, or UTF-16
/// with one (what Windows PowerShell 5's `>` and `Out-File` write, and
/// Notepad's "UTF-16" choices). Anything else is an error that says how to
/// save the file.
fn config_text(bytes: &[u8]) -> Result<String, String> {
    let utf16 = |rest: &[u8], unit: fn([u8; 2]) -> u16| {
        if !rest.len().is_multiple_of(2) {
            return Err("is UTF-16 text with a byte missing at its end: save it again, as UTF-8".to_string());
        }
        let units: Vec<u16> = rest.chunks_exact(2).map(|pair| unit([pair[0], pair[1]])).collect();
        String::from_utf16(&units).map_err(|_| "is not valid UTF-16 text: save it again, as UTF-8".to_string())
    };
    let utf8 = |text: &[u8]| -> Result<String, String> {
        if text.contains(&0) {
            // Valid UTF-8 as far as bytes go, but no TOML file has NULs.
            return Err("holds NUL bytes: it looks like UTF-16 or UTF-32 without a byte-order mark; \
                        save it as UTF-8 (Notepad: Save as, Encoding UTF-8)"
                .to_string());
        }
        std::str::from_utf8(text).map(str::to_string).map_err(|error| {
            let valid = &text[..error.valid_up_to()];
            let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
            let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
            let column = String::from_utf8_lossy(&valid[line_start..]).chars().count() + 1;
            format!(
                "is not UTF-8 text (line {line}, column {column} is not): save it as UTF-8 \
                 (Notepad: Save as, Encoding UTF-8)"
            )
        })
    };
    match bytes {
        [0xEF, 0xBB, 0xBF, rest @ ..] => utf8(rest),
        [0xFF, 0xFE, rest @ ..] => utf16(rest, u16::from_le_bytes),
        [0xFE, 0xFF, rest @ ..] => utf16(rest, u16::from_be_bytes),
        _ => utf8(bytes),
    }
}

/// toml's error without the line it quotes: a line may hold a secret (a
/// `cdpUrl`'s token, a header's value), and config errors reach agents.
/// The position, the key of ours on that line, and toml's message with
/// any quoted value replaced by `…`.
fn toml_error(error: &toml::de::Error, text: &str) -> String {
    let message = strip_quoted(error.message());
    let Some(span) = error.span() else { return message };
    let mut start = span.start.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    let line_text = text.lines().nth(line - 1).unwrap_or_default();
    // Only a key of ours is named: whatever else precedes a `=` might be
    // the inside of a string.
    let key = line_text.split_once('=').map(|(key, _)| key.trim()).filter(|k| KEYS.contains(k));
    // A backslash escape TOML does not know (most often in a Windows path):
    // toml's own message lists the escapes it knows, which reads badly
    // once its quotes are taken out.
    let message = match message.contains("escape") || message.contains("unicode") {
        true => format!("a backslash escape TOML does not know: {BACKSLASH_HINT}"),
        false => message,
    };
    match key {
        Some(key) => format!("line {line}, column {column}, at {key}: {message}"),
        None => format!("line {line}, column {column}: {message}"),
    }
}

/// The keys of config.toml.
const KEYS: [&str; 22] = [
    "defaultProfile",
    "allowEvaluate",
    "allowFileUrls",
    "allowWipingBrowserData",
    "recordActivity",
    "uploadRoots",
    "mediaKeep",
    "mediaMaxAgeHours",
    "maxManagedBrowsers",
    "remoteCdpTimeoutMs",
    "remoteCdpHandshakeTimeoutMs",
    "driver",
    "color",
    "headless",
    "noSandbox",
    "attachOnly",
    "executablePath",
    "cdpPort",
    "cdpUrl",
    "cdpHeaders",
    "cdpCaFile",
    "args",
];

/// `text` with the inside of every `"…"` (as Rust's `Debug` quotes a
/// string, escapes included) replaced by `…`.
fn strip_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '"' {
            out.push('…');
            while let Some(inner) = chars.next() {
                match inner {
                    '\\' => drop(chars.next()),
                    '"' => break,
                    _ => {}
                }
            }
            out.push('"');
        }
    }
    out
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

/// Whether `arg` is a Chrome switch Browser Relay sets itself (the profile
/// folder, the debugging pipe): as Chrome's command line reads it, with
/// `--`, `-` or (Windows) `/` before the name, any case (Windows lowercases
/// switch names), a value after `=` or none.
fn is_reserved_switch(arg: &str) -> bool {
    let Some(name) = ["--", "-", "/"].iter().find_map(|prefix| arg.strip_prefix(prefix)) else { return false };
    let name = name.split('=').next().unwrap_or_default().to_ascii_lowercase();
    name == "user-data-dir" || name == "profile-directory" || name.starts_with("remote-debugging-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_toml_is_read_as_windows_editors_and_powershell_save_it() {
        let text =
            "allowEvaluate = false\r\n[profiles.work]\r\ndriver = \"managed\"\r\nargs = [\"--window-name=José\"]\r\n";
        let utf16 = |to_bytes: fn(u16) -> [u8; 2], mark: [u8; 2]| {
            mark.into_iter().chain(text.encode_utf16().flat_map(to_bytes)).collect::<Vec<u8>>()
        };
        let with_bom = [&[0xEF, 0xBB, 0xBF][..], text.as_bytes()].concat();
        for (what, bytes) in [
            ("UTF-8", text.as_bytes().to_vec()),
            ("UTF-8 with a byte-order mark", with_bom),
            ("UTF-16LE (PowerShell 5's Out-File)", utf16(u16::to_le_bytes, [0xFF, 0xFE])),
            ("UTF-16BE", utf16(u16::to_be_bytes, [0xFE, 0xFF])),
        ] {
            let read = config_text(&bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
            let config = Config::parse(&read, Path::new("config.toml")).unwrap_or_else(|e| panic!("{what}: {e}"));
            let args = &config.profile(Some("work")).unwrap().args;
            assert!(!config.allow_evaluate && args == &["--window-name=José"], "{what}: {args:?}");
        }
        let latin1 = b"allowEvaluate = false # Jos\xe9\n";
        let error = config_text(latin1).unwrap_err();
        assert!(
            error.contains("not UTF-8 text (line 1, column 28 is not)") && error.contains("save it as UTF-8"),
            "{error}"
        );
        let later = config_text(b"allowEvaluate = false\n# Jos\xe9\n").unwrap_err();
        assert!(later.contains("(line 2, column 6 is not)"), "{later}");
        let no_mark: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let error = config_text(&no_mark).unwrap_err();
        assert!(error.contains("UTF-16 or UTF-32 without a byte-order mark"), "{error}");
        let odd = config_text(&[0xFF, 0xFE, b'a', 0, b'b']).unwrap_err();
        assert!(odd.contains("a byte missing"), "{odd}");
    }

    #[test]
    fn a_windows_path_in_double_quotes_is_refused_with_how_to_write_it() {
        let managed_with = |line: &str| parse(&format!("[profiles.managed]\n{line}\n"));
        let managed = |value: &str| managed_with(&format!("executablePath = {value}"));
        // `\P` is no escape TOML knows; `\U` starts one that needs 8 hex digits.
        for value in [r#""C:\Program Files\Google\Chrome\Application\chrome.exe""#, r#""C:\Users\ana\chrome.exe""#] {
            let error = managed(value).unwrap_err();
            assert!(
                error.contains("at executablePath: a backslash escape TOML does not know")
                    && error.contains("double each \\")
                    && !error.contains('`'),
                "{value}: {error}"
            );
        }
        // Escapes TOML does know make another path than the one meant.
        let error = parse(r#"uploadRoots = ["C:\tools\new"]"#).unwrap_err();
        assert!(error.contains(r#"uploadRoots: "C:\tools\new" holds a tab, a line break"#), "{error}");
        assert!(error.contains("or write the value in single quotes"), "{error}");
        let flag = managed_with(r#"args = ["--load-extension=C:\ext\new"]"#).unwrap_err();
        assert!(flag.contains("profiles.managed.args:") && flag.contains("holds a tab, a line break"), "{flag}");
        assert!(!flag.contains("load-extension"), "a flag's value (it may hold a secret) is not shown: {flag}");
        // `\x..` and `\u....` make one character out of what was a path's
        // folder name: refused, naming the key, in a path, a list of them
        // and a flag; a line with a secret on it is not shown.
        for (line, key) in [
            (r#"executablePath = "D:\xfer""#, "profiles.managed.executablePath"),
            (r#"executablePath = "C:\uabc1""#, "profiles.managed.executablePath"),
            (r#"args = ["--disk-cache-dir=E:\U0001F600cache"]"#, "profiles.managed.args"),
        ] {
            let error = managed_with(line).unwrap_err();
            assert!(
                error.contains(&format!("{key}: on line 2, "))
                    && error.contains("read as a character code")
                    && error.contains("single quotes"),
                "{line}: {error}"
            );
        }
        let error = parse(r#"uploadRoots = ['C:\ok', "D:\xfer"]"#).unwrap_err();
        assert!(error.contains("uploadRoots: ") && error.contains(r"TOML's \x escape"), "{error}");
        // An escaped backslash before the letter is a backslash: read as meant.
        let config = managed(r#""D:\\xfer\\chrome.exe""#).unwrap();
        let path = config.profile(Some("managed")).unwrap().executable_path.clone().unwrap();
        assert_eq!(path, PathBuf::from(r"D:\xfer\chrome.exe"));
        // Written as the hint says, both are read as meant.
        for value in [r"'C:\Program Files\Chrome\chrome.exe'", r#""C:\\Program Files\\Chrome\\chrome.exe""#] {
            let config = managed(value).unwrap_or_else(|e| panic!("{value}: {e}"));
            let path = config.profile(Some("managed")).unwrap().executable_path.clone().unwrap();
            assert_eq!(path, PathBuf::from(r"C:\Program Files\Chrome\chrome.exe"), "{value}");
        }
    }

    /// config.toml's `executablePath` and `args` run a program as the
    /// user: a file someone else could have written is not read at all,
    /// and the error says the command that makes it the user's alone.
    #[cfg(unix)]
    #[test]
    fn a_config_file_someone_else_could_write_is_not_read() {
        use std::os::unix::fs::PermissionsExt;
        let state = tempfile::tempdir().unwrap();
        let path = state.path().join(CONFIG_FILE);
        let hostile =
            "defaultProfile = \"managed\"\n[profiles.managed]\nexecutablePath = \"/tmp/evil\"\nargs = [\"--evil\"]\n";
        std::fs::write(&path, hostile).unwrap();
        let quoted = format!("'{}'", path.display());

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let error = Config::load(state.path()).unwrap_err();
        assert!(matches!(error, ConfigError::Untrusted(_)), "{error}");
        let said = error.to_string();
        assert!(said.contains(&format!("refusing to use {}", path.display())), "{said}");
        assert!(said.contains(&format!("chmod go-w {quoted}")), "{said}");

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        if std::os::unix::fs::chown(&path, Some(4242), None).is_ok() {
            let said = Config::load(state.path()).unwrap_err().to_string();
            assert!(said.contains("belongs to user 4242") && said.contains(&format!("chown root {quoted}")), "{said}");
            std::os::unix::fs::chown(&path, Some(0), None).unwrap();
        } else {
            eprintln!("not checked: chown needs root");
        }

        // A link is not followed, even to a file of the user's.
        let elsewhere = state.path().join("elsewhere.toml");
        std::fs::rename(&path, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        let said = Config::load(state.path()).unwrap_err().to_string();
        assert!(said.contains("symbolic link") && said.contains(&format!("rm {quoted}")), "{said}");

        // The user's own file, which others may read, is read.
        std::fs::remove_file(&path).unwrap();
        std::fs::rename(&elsewhere, &path).unwrap();
        let config = Config::load(state.path()).unwrap();
        assert_eq!(config.profile(None).unwrap().executable_path, Some(PathBuf::from("/tmp/evil")));

        // And so is nothing in a folder others may write to.
        std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let said = Config::load(state.path()).unwrap_err().to_string();
        assert!(said.contains(&format!("chmod go-w '{}'", state.path().display())), "{said}");
    }

    #[test]
    fn a_config_file_in_another_encoding_is_refused_with_how_to_save_it() {
        let state = tempfile::tempdir().unwrap();
        std::fs::write(state.path().join(CONFIG_FILE), b"allowEvaluate = \xff\n").unwrap();
        let error = Config::load(state.path()).unwrap_err().to_string();
        assert!(error.contains("config.toml: is not UTF-8 text (line 1, column 17 is not)"), "{error}");
    }

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
            // Chrome reads single-dash switches too, and any case on Windows.
            ("[profiles.managed]\nargs = [\"-remote-debugging-port=9222\"]", "set by Browser Relay"),
            ("[profiles.managed]\nargs = [\"-user-data-dir=/home/me/.config/google-chrome\"]", "set by Browser Relay"),
            ("[profiles.managed]\nargs = [\"--Remote-Debugging-Address=0.0.0.0\"]", "set by Browser Relay"),
            ("[profiles.managed]\nargs = [\"/user-data-dir=C:\\\\Users\\\\me\"]", "set by Browser Relay"),
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
        let uploads = absolute("/home/me/uploads");
        let set =
            parse(&format!("allowFileUrls = true\nuploadRoots = [{uploads:?}]\nmediaKeep = 5\nmediaMaxAgeHours = 2"))
                .unwrap();
        assert!(set.allow_file_urls);
        assert_eq!(set.upload_roots, vec![PathBuf::from(uploads)]);
        assert_eq!((set.media_keep, set.media_max_age.as_secs()), (5, 7200));
        assert!(parse("uploadRoots = [\"uploads\"]").unwrap_err().contains("not an absolute path"));
        assert!(parse("mediaKeep = 0").unwrap_err().contains("mediaKeep"));
    }

    #[test]
    fn wiping_the_users_browser_data_is_off_unless_set() {
        assert!(!parse("").unwrap().allow_wiping_browser_data);
        assert!(parse("allowWipingBrowserData = true").unwrap().allow_wiping_browser_data);
        assert!(parse("allowWipingBrowserData = \"yes\"").unwrap_err().contains("allowWipingBrowserData"));
        assert!(parse("").unwrap().record_activity, "the record is kept unless turned off");
        assert!(!parse("recordActivity = false").unwrap().record_activity);
    }

    #[test]
    fn store_extension_ids_are_taken_next_to_the_pinned_one_and_checked() {
        assert!(parse("").unwrap().extension_ids.is_empty());
        let store = "abcdefghijklmnopabcdefghijklmnop";
        assert_eq!(parse(&format!("extensionIds = [{store:?}]")).unwrap().extension_ids, [store]);
        for bad in ["short", "ABCDEFGHIJKLMNOPABCDEFGHIJKLMNOP", "qbcdefghijklmnopabcdefghijklmnop"] {
            let error = parse(&format!("extensionIds = [{bad:?}]")).unwrap_err();
            assert!(error.contains("extensionIds") && error.contains(bad), "{error}");
        }
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
            parse("[profiles.farm]\ndriver = \"managed\"\ncdpUrl = \"wss://farm.example/?token=abc\"").unwrap();
        let shown = serde_json::to_string(config.profile(Some("farm")).unwrap()).unwrap();
        assert!(shown.contains("wss://farm.example/?***") && !shown.contains("abc"), "{shown}");
    }

    /// A path that is absolute on this system (`C:/…` on Windows).
    fn absolute(unix: &str) -> String {
        if cfg!(windows) { format!("C:{unix}") } else { unix.to_string() }
    }

    #[test]
    fn remote_profiles_take_tls_urls_secret_headers_a_ca_file_and_deadlines() {
        let ca = absolute("/etc/farm/ca.pem");
        let config = parse(&format!(
            r##"
            remoteCdpTimeoutMs = 2500
            remoteCdpHandshakeTimeoutMs = 7000
            [profiles.farm]
            driver = "managed"
            cdpUrl = "https://farm.example/?token=t0ps3cret"
            cdpHeaders = {{ Authorization = "Bearer h3ad3rs3cret", "X-Team" = "qa" }}
            cdpCaFile = {ca:?}
            [profiles.grid]
            driver = "managed"
            cdpUrl = "wss://grid.example:4444/session/abc/se/cdp"
            "##,
        ))
        .unwrap();
        let farm = config.profile(Some("farm")).unwrap();
        assert!(!farm.launches());
        assert_eq!(farm.remote_url().as_deref(), Some("https://farm.example/?token=t0ps3cret"));
        let dial = farm.dial();
        assert_eq!(dial.headers[0].0, "Authorization");
        assert_eq!(dial.headers[0].1.expose(), "Bearer h3ad3rs3cret");
        assert_eq!(dial.ca_file.as_deref(), Some(Path::new(&ca)));
        assert_eq!((dial.connect_within.as_millis(), dial.handshake_within.as_millis()), (2500, 7000));
        assert_eq!(config.profile(Some("grid")).unwrap().dial().handshake_within.as_millis(), 7000);
        // Shown: the header's name, never its value nor the URL's token, in
        // JSON and in Debug.
        let shown = serde_json::to_string(farm).unwrap();
        assert!(shown.contains(r#""cdpHeaders":{"Authorization":"***","X-Team":"***"}"#), "{shown}");
        assert!(shown.contains(r#""cdpUrl":"https://farm.example/?***""#), "{shown}");
        let debug = format!("{config:?}");
        for shown in [shown, debug] {
            assert!(!shown.contains("h3ad3rs3cret") && !shown.contains("qa\""), "{shown}");
            assert!(!shown.contains("t0ps3cret"), "{shown}");
        }
        // A profile without headers says nothing of them.
        let managed = serde_json::to_value(config.profile(Some("managed")).unwrap()).unwrap();
        assert!(managed.get("cdpHeaders").is_none() && managed.get("cdpCaFile").is_none(), "{managed}");
        assert_eq!(parse("").unwrap().remote_deadlines, RemoteDeadlines::default());
        assert_eq!(RemoteDeadlines::default().connect.as_millis(), 1500);
        assert_eq!(RemoteDeadlines::default().handshake.as_millis(), 3000);
    }

    #[test]
    fn bad_remote_settings_are_refused_without_showing_a_secret() {
        let remote = |keys: &str| format!("[profiles.farm]\ndriver = \"managed\"\n{keys}");
        for (text, expected) in [
            (remote("cdpUrl = \"ftp://farm.example/?token=s3cr3t\""), "expected http://, https://, ws:// or wss://"),
            (remote("cdpUrl = \"wss://user:s3cr3t@farm.example/\""), "put them in cdpHeaders"),
            (remote("cdpUrl = \"https:///?token=s3cr3t\""), "cdpUrl"),
            (remote("cdpUrl = \"wss://f/\"\ncdpHeaders = { Host = \"s3cr3t\" }"), "Host is set by Browser Relay"),
            (
                remote("cdpUrl = \"wss://f/\"\ncdpHeaders = { Sec-WebSocket-Protocol = \"s3cr3t\" }"),
                "set by Browser Relay",
            ),
            (remote("cdpUrl = \"wss://f/\"\ncdpHeaders = { \"a b\" = \"s3cr3t\" }"), "is not a header name"),
            (
                remote("cdpUrl = \"wss://f/\"\ncdpHeaders = { Authorization = \"s3cr3t\", authorization = \"x\" }"),
                "Authorization and authorization are the same header",
            ),
            (
                remote("cdpUrl = \"wss://f/\"\ncdpHeaders = { Authorization = \"Bearer s3cr3t\\r\\nX: y\" }"),
                "line breaks",
            ),
            (remote("cdpUrl = \"wss://f/\"\ncdpCaFile = \"ca.pem\""), "not an absolute path"),
            (remote("cdpHeaders = { Authorization = \"s3cr3t\" }"), "there is no cdpUrl"),
            ("[profiles.chrome]\ncdpHeaders = { Authorization = \"s3cr3t\" }".into(), "managed profiles only"),
            ("remoteCdpTimeoutMs = 0".into(), "remoteCdpTimeoutMs = 0"),
            ("remoteCdpHandshakeTimeoutMs = 0".into(), "remoteCdpHandshakeTimeoutMs = 0"),
            // toml's own errors: the line is not quoted, nor the value.
            (remote("cdpUrl = \"wss://f/?token=s3cr3t"), "line 3"),
            (remote("cdpUrl = \"wss://f/\"\ncdpHeaders = \"Authorization: s3cr3t\""), "at cdpHeaders"),
            (remote("cdpUrl = \"wss://f/\"\ncdpHeaders = { Authorization = 's3cr3t }"), "line 4"),
        ] {
            let error = parse(&text).unwrap_err();
            assert!(error.contains(expected), "{text:?}: {error}");
            assert!(!error.contains("s3cr3t"), "{text:?} shows its secret: {error}");
        }
    }

    #[test]
    fn colours_are_stored_as_chrome_does() {
        assert_eq!(signed_argb("#FF4500"), -47872);
        assert_eq!(signed_argb("#000000"), -16_777_216);
    }
}
