//! Fixed rules: which pages may be shared, reconnect backoff, badges.

/// Pages the extension never attaches to (one rule with the relay's:
/// [`shared_protocol::is_restricted_url`]).
pub(super) use shared_protocol::is_restricted_url as is_restricted;

/// Why the user cannot share a page, for the badge tooltip.
pub(super) fn restricted_reason(url: &str) -> String {
    let scheme = url.split_once(':').map_or(url, |(s, _)| s);
    format!("Browser Relay cannot share {scheme}: pages (browser, DevTools and extension pages are off limits)")
}

/// Reconnect delay before attempt `attempt` (0-based): 1 s·2ⁿ, capped at
/// 5 s, scaled by a jitter factor in [0.75, 1.25) from `random` ∈ [0, 1).
/// The cap keeps the promise of the grace period: a relay back before it
/// ends is found before it ends (a refused loopback connection costs
/// nothing, so there is no load to spare it).
pub(super) fn reconnect_delay_ms(attempt: u32, random: f64) -> u64 {
    let base = 1000u64.saturating_mul(1u64 << attempt.min(3)).min(RECONNECT_CAP_MS);
    let jitter = 0.75 + 0.5 * random.clamp(0.0, 0.999_999);
    (base as f64 * jitter) as u64
}

/// Delay before re-attach try `attempt` after a navigation-caused detach.
pub(super) fn reattach_delay_ms(attempt: u32) -> u64 {
    250 * (1u64 << attempt.min(4))
}

/// Re-attach tries before giving up on a tab.
pub(super) const REATTACH_TRIES: u32 = 3;
/// While anything is attached, a message at least this often keeps the MV3
/// service worker alive (it is stopped after ~30 s without events).
pub(super) const KEEPALIVE_MS: u64 = 20_000;
/// How often the worker looks whether the relay said anything since the
/// last look (a live relay pings every 20 s and answers our pings).
pub(super) const RELAY_WATCH_MS: u64 = 20_000;
/// Silent looks in a row after which the relay counts as gone: 40 to 60 s
/// without a word, what the relay allows the extension too.
pub(super) const RELAY_SILENT_WATCHES: u32 = 3;
/// Bytes the browser may hold for the relay, sent but not yet taken,
/// before the worker leaves it: a relay that does not read (suspended, or
/// stuck) would otherwise pile up a busy tab's answers and events in the
/// browser's memory until the watch notices, up to a minute later. Twice
/// the largest frame the relay takes (256 MiB): a relay that reads takes
/// that at loopback speed, so a backlog this large means it is not reading.
pub(super) const UNSENT_LIMIT: u64 = 512 << 20;
/// How long tabs stay attached while the relay is gone before the extension
/// detaches them (the "is being debugged" bar goes away).
pub(super) const DETACH_GRACE_MS: u64 = 60_000;

/// The longest wait between two reconnect attempts (before jitter).
pub(super) const RECONNECT_CAP_MS: u64 = 5_000;
/// The first attempt whose delay is the cap.
pub(super) const SLOWEST_ATTEMPT: u32 = 3;

/// What a tab's toolbar badge shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Badge {
    /// Not shared.
    Off,
    /// Attached, talking to the relay.
    On,
    /// Attached (or attaching), connecting to the relay.
    Connecting,
    /// Something is wrong; the tooltip says what.
    Error(String),
    /// Shared, and handed to the person by its grant: "GRANT needs you:
    /// REASON" (protocol 7).
    Handoff(String),
}

impl Badge {
    pub fn text(&self) -> &'static str {
        match self {
            Self::Off => "",
            Self::On => "ON",
            Self::Connecting => "…",
            Self::Error(_) => "!",
            Self::Handoff(_) => "?",
        }
    }

    pub fn color(&self) -> &'static str {
        match self {
            Self::Off | Self::On => "#1a7f37",
            Self::Connecting => "#9a6700",
            Self::Error(_) => "#cf222e",
            Self::Handoff(_) => "#0969da",
        }
    }

    pub fn title(&self, port: u16) -> String {
        match self {
            Self::Off => "Browser Relay: click to share this tab".into(),
            Self::On => {
                "Browser Relay: this tab is shared (click, or take it out of the Browser Relay group, to stop)".into()
            }
            Self::Connecting => format!("Browser Relay: connecting to the relay on 127.0.0.1:{port}…"),
            Self::Error(why) => format!("Browser Relay: {why}"),
            Self::Handoff(what) => {
                format!("Browser Relay: {what}. Done (in its notification, or this button's menu) gives the tab back")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_pages() {
        for url in [
            "chrome://settings",
            "CHROME://newtab/",
            "devtools://devtools/bundled/inspector.html",
            "chrome-extension://abcdefghijklmnopabcdefghijklmnop/options.html",
            "view-source:https://example.com",
            "https://chromewebstore.google.com/detail/x",
            "edge://flags",
        ] {
            assert!(is_restricted(url), "{url}");
        }
        for url in [
            "https://example.com",
            "http://127.0.0.1:8000/",
            "about:blank",
            "",
            "file:///tmp/x.html",
            "data:text/html,hi",
        ] {
            assert!(!is_restricted(url), "{url}");
        }
        assert!(restricted_reason("chrome://settings").contains("chrome:"));
    }

    #[test]
    fn backoff_doubles_caps_and_jitters() {
        assert_eq!(reconnect_delay_ms(0, 0.5), 1000);
        assert_eq!(reconnect_delay_ms(1, 0.5), 2000);
        assert_eq!(reconnect_delay_ms(2, 0.5), 4000);
        assert_eq!(reconnect_delay_ms(3, 0.5), 5000);
        assert_eq!(reconnect_delay_ms(60, 0.5), 5000);
        assert_eq!(reconnect_delay_ms(0, 0.0), 750);
        assert!(reconnect_delay_ms(0, 0.999) < 1250);
        assert_eq!(reattach_delay_ms(0), 250);
        assert_eq!(reattach_delay_ms(2), 1000);
    }

    /// README: "restart the relay within that time and the tabs come back".
    /// With the slowest jitter, the last attempt before the grace ends is
    /// less than one capped wait before its end, so a relay back by then is
    /// found (the 30 s cap this replaced left 29 s of the grace unwatched).
    #[test]
    fn a_relay_back_within_the_grace_is_tried_before_it_ends() {
        let (mut at, mut attempt, mut last) = (0, 0, 0);
        while at < DETACH_GRACE_MS {
            last = at;
            at += reconnect_delay_ms(attempt, 0.999_999);
            attempt += 1;
        }
        assert!(DETACH_GRACE_MS - last <= RECONNECT_CAP_MS * 5 / 4, "the last try is at {last} ms");
    }
}
