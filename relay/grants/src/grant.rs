//! One grant: its name, its colour, what it asks the person about, the
//! door each of its keys opens, and how long it lasts.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use shared_protocol::auth::{KeyPurpose, derive_grant_key};
use state_dir::Token;

use crate::sites::Sites;

/// A grant's name: letters, digits, `-` and `_`, at most 32.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GrantName(String);

/// Why a name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a grant name: use letters, digits, '-' and '_', at most 32 (e.g. research or ci-bot)")]
pub struct BadName(pub String);

impl GrantName {
    pub const MAX_LEN: usize = 32;

    pub fn parse(name: &str) -> Result<Self, BadName> {
        let ok = !name.is_empty()
            && name.len() <= Self::MAX_LEN
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        ok.then(|| Self(name.to_string())).ok_or_else(|| BadName(name.chars().take(64).collect()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for GrantName {
    type Error = BadName;
    fn try_from(name: String) -> Result<Self, BadName> {
        Self::parse(&name)
    }
}

impl From<GrantName> for String {
    fn from(name: GrantName) -> Self {
        name.0
    }
}

impl std::fmt::Display for GrantName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A tab group's colour: Chrome's palette has these nine. The person's own
/// "Browser Relay" group is orange, so a grant gets another unless asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupColor {
    Grey,
    Blue,
    Red,
    Yellow,
    Green,
    Pink,
    Purple,
    Cyan,
    Orange,
}

impl GroupColor {
    /// In the order new grants take them.
    pub const ALL: [GroupColor; 9] = [
        Self::Blue,
        Self::Green,
        Self::Purple,
        Self::Cyan,
        Self::Pink,
        Self::Red,
        Self::Yellow,
        Self::Grey,
        Self::Orange,
    ];

    /// Chrome's name (`chrome.tabGroups.Color`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Grey => "grey",
            Self::Blue => "blue",
            Self::Red => "red",
            Self::Yellow => "yellow",
            Self::Green => "green",
            Self::Pink => "pink",
            Self::Purple => "purple",
            Self::Cyan => "cyan",
            Self::Orange => "orange",
        }
    }

    /// How Chrome paints it (light theme), for the dashboard.
    pub fn hex(self) -> &'static str {
        match self {
            Self::Grey => "#5F6368",
            Self::Blue => "#1A73E8",
            Self::Red => "#D93025",
            Self::Yellow => "#F9AB00",
            Self::Green => "#188038",
            Self::Pink => "#D01884",
            Self::Purple => "#A142F4",
            Self::Cyan => "#007B83",
            Self::Orange => "#FA903E",
        }
    }

    /// A palette name (`blue`, `gray` too) or `#RRGGBB`, which takes the
    /// palette's nearest colour (Chrome has no other).
    pub fn parse(written: &str) -> Result<Self, String> {
        let written = written.trim().to_ascii_lowercase();
        if let Some(found) = Self::ALL.iter().find(|c| c.name() == written || (written == "gray" && **c == Self::Grey))
        {
            return Ok(*found);
        }
        let rgb = |hex: &str| -> Option<(i32, i32, i32)> {
            let hex = hex.strip_prefix('#')?;
            if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            let part = |i: usize| i32::from_str_radix(&hex[i..i + 2], 16).ok();
            Some((part(0)?, part(2)?, part(4)?))
        };
        let Some((r, g, b)) = rgb(&written) else {
            let names: Vec<&str> = Self::ALL.iter().map(|c| c.name()).collect();
            return Err(format!(
                "'{written}' is not a colour: use #RRGGBB or one of Chrome's tab group colours ({})",
                names.join(", ")
            ));
        };
        let distance = |c: &Self| {
            let (cr, cg, cb) = rgb(&c.hex().to_ascii_lowercase()).expect("the palette is hex");
            (cr - r).pow(2) + (cg - g).pow(2) + (cb - b).pow(2)
        };
        Ok(*Self::ALL.iter().min_by_key(|c| distance(c)).expect("the palette is not empty"))
    }
}

/// What a grant asks the person about before it happens (`--ask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AskKind {
    /// A form submission, or any top-level POST, of one of its tabs.
    Submit,
    /// A download starting.
    Download,
    /// A file given to a file input (`DOM.setFileInputFiles`).
    Upload,
    /// A top-level navigation to a site its tabs have not been on since
    /// its clients connected.
    NewSite,
    /// Every input event of its clients: clicks, keys, typed text.
    Input,
}

impl AskKind {
    pub const ALL: [AskKind; 5] = [Self::Submit, Self::Download, Self::Upload, Self::NewSite, Self::Input];

    pub fn name(self) -> &'static str {
        match self {
            Self::Submit => "submit",
            Self::Download => "download",
            Self::Upload => "upload",
            Self::NewSite => "new-site",
            Self::Input => "input",
        }
    }

    /// `submit,download,new-site` (or `all`: every kind, input events
    /// too), comma- or space-separated; `none` (or empty) asks nothing.
    pub fn parse_list(list: &str) -> Result<Vec<AskKind>, String> {
        let mut kinds = Vec::new();
        for word in list.split([',', ' ']).map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "all" => kinds.extend(Self::ALL),
                "none" => {}
                word => match Self::ALL.iter().find(|k| k.name() == word) {
                    Some(kind) => kinds.push(*kind),
                    None => {
                        return Err(format!(
                            "'{word}' is not something a grant can ask about: submit, download, upload, new-site, input or all (or none)"
                        ));
                    }
                },
            }
        }
        kinds.sort();
        kinds.dedup();
        Ok(kinds)
    }
}

/// Which door a key opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// The relay's CDP routes (`/cdp`, `/json/*`, `/devtools/*`).
    Cdp,
    /// The control API (HTTP agents, the CLI and MCP).
    Control,
}

/// One grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    pub name: GrantName,
    /// Where its tabs may go (none: anywhere).
    #[serde(default, skip_serializing_if = "Sites::is_any")]
    pub sites: Sites,
    pub color: GroupColor,
    /// When its keys stop working (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// Whether its agents may run script of their own (the agent API's
    /// `evaluate` and `wait {fn}`); `--no-evaluate` says no.
    pub evaluate: bool,
    /// What it asks the person about before it happens (`--ask`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ask: Vec<AskKind>,
    pub created_at_ms: u64,
    /// Part of its keys; drawn when it was made.
    pub(crate) salt: String,
}

impl Grant {
    /// Its key for `door`, from the install's `secret`.
    pub fn key(&self, secret: &Token, door: Door) -> Token {
        let purpose = match door {
            Door::Cdp => KeyPurpose::Cdp,
            Door::Control => KeyPurpose::Control,
        };
        Token::parse(&derive_grant_key(secret.as_str(), purpose, self.name.as_str(), &self.salt))
            .expect("a derived key is 64 hex characters")
    }

    /// Whether it asks the person before `kind` happens.
    pub fn asks(&self, kind: AskKind) -> bool {
        self.ask.contains(&kind)
    }

    /// Whether it has expired at `now_ms`.
    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| now_ms >= at)
    }

    pub fn expired(&self) -> bool {
        self.expired_at(now_ms())
    }

    /// Why its tabs may not go to `url`, if they may not: the one wording
    /// of that refusal, for CDP clients and agents alike.
    pub fn refuses_url(&self, url: &str) -> Option<String> {
        if self.sites.allows_url(url) {
            return None;
        }
        let shown = match url.char_indices().nth(200) {
            Some((at, _)) => format!("{}…", &url[..at]),
            None => url.to_string(),
        };
        Some(format!(
            "Browser Relay: the grant '{}' may not go to {shown}: its sites are {}",
            self.name,
            self.sites.describe()
        ))
    }

    /// Its expiry as a person reads it: `never`, `in 7h 59m`, `expired`.
    pub fn expiry_text(&self, now_ms: u64) -> String {
        match self.expires_at_ms {
            None => "never".into(),
            Some(at) if at <= now_ms => "expired".into(),
            Some(at) => format!("in {}", human_duration(Duration::from_millis(at - now_ms))),
        }
    }
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// `30m`, `8h`, `2d`, `1h30m`, `90s`, `1w`: how long until a grant
/// expires.
pub fn parse_duration(written: &str) -> Result<Duration, String> {
    let bad = || format!("'{written}' is not a duration: write it as 30m, 8h, 2d or 1h30m (s, m, h, d, w)");
    let text = written.trim();
    if text.is_empty() {
        return Err(bad());
    }
    let (mut total, mut number) = (0u64, String::new());
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(bad()),
        };
        let n: u64 = number.parse().map_err(|_| bad())?;
        total = n.checked_mul(unit).and_then(|s| total.checked_add(s)).ok_or_else(bad)?;
        number.clear();
    }
    if !number.is_empty() || total == 0 {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

/// `2d 3h`, `7h 59m`, `4m 10s`, `12s`: the two largest units.
pub fn human_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    let parts = [(secs / 86_400, "d"), (secs / 3600 % 24, "h"), (secs / 60 % 60, "m"), (secs % 60, "s")];
    let first = parts.iter().position(|(n, _)| *n > 0).unwrap_or(3);
    parts[first..]
        .iter()
        .take(2)
        .filter(|(n, _)| *n > 0 || first == 3)
        .map(|(n, u)| format!("{n}{u}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn names_are_letters_digits_dash_and_underscore_up_to_32() {
        for good in ["research", "ci-bot", "agent_7", &"a".repeat(32)] {
            assert_eq!(GrantName::parse(good).unwrap().as_str(), good);
        }
        for bad in ["", "two words", "café", "a/b", "Browser Relay", &"a".repeat(33), "x;rm"] {
            let refused = GrantName::parse(bad).unwrap_err().to_string();
            assert!(refused.contains("letters, digits, '-' and '_', at most 32"), "{bad}: {refused}");
        }
    }

    #[test]
    fn colours_are_chromes_named_or_the_nearest_to_a_hex() {
        assert_eq!(GroupColor::parse("Blue"), Ok(GroupColor::Blue));
        assert_eq!(GroupColor::parse("gray"), Ok(GroupColor::Grey));
        assert_eq!(GroupColor::parse("#1a73e8"), Ok(GroupColor::Blue));
        assert_eq!(GroupColor::parse("#00ff00"), Ok(GroupColor::Green));
        assert_eq!(GroupColor::parse("#FF4500"), Ok(GroupColor::Red), "the product's own orange-red is nearest red");
        assert_eq!(GroupColor::parse("#ffa500"), Ok(GroupColor::Yellow));
        let refused = GroupColor::parse("#12345").unwrap_err();
        assert!(refused.contains("#RRGGBB") && refused.contains("purple"), "{refused}");
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("8h"), Ok(Duration::from_secs(8 * 3600)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(2 * 86_400)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        for bad in ["", "8", "h", "0m", "8 hours", "-1h", "99999999999999999999w"] {
            assert!(parse_duration(bad).unwrap_err().contains("30m, 8h, 2d"), "{bad}");
        }
        assert_eq!(human_duration(Duration::from_secs(2 * 86_400 + 3 * 3600 + 59)), "2d 3h");
        assert_eq!(human_duration(Duration::from_secs(7 * 3600 + 59 * 60 + 30)), "7h 59m");
        assert_eq!(human_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(human_duration(Duration::from_secs(12)), "12s");
        assert_eq!(human_duration(Duration::from_secs(0)), "0s");
    }

    pub(crate) fn grant(name: &str, expires_at_ms: Option<u64>) -> Grant {
        Grant {
            name: GrantName::parse(name).unwrap(),
            sites: Sites::any(),
            color: GroupColor::Blue,
            expires_at_ms,
            evaluate: true,
            ask: Vec::new(),
            created_at_ms: 0,
            salt: format!("salt-{name}"),
        }
    }

    #[test]
    fn asks_read_as_a_list_and_all_means_every_kind() {
        assert_eq!(AskKind::parse_list("submit, new-site"), Ok(vec![AskKind::Submit, AskKind::NewSite]));
        assert_eq!(AskKind::parse_list("all").unwrap(), AskKind::ALL.to_vec());
        assert_eq!(AskKind::parse_list("none"), Ok(vec![]));
        assert_eq!(AskKind::parse_list("download download"), Ok(vec![AskKind::Download]));
        let refused = AskKind::parse_list("submit,buy").unwrap_err();
        assert!(refused.contains("'buy'") && refused.contains("new-site"), "{refused}");
    }

    #[test]
    fn expiry_reads_in_words() {
        let g = grant("a", Some(10_000_000));
        assert_eq!(g.expiry_text(10_000_000 - 3_600_000), "in 1h");
        assert_eq!(g.expiry_text(10_000_000), "expired");
        assert_eq!(grant("b", None).expiry_text(0), "never");
    }
}
