//! Where a grant's tabs may go: a list of site patterns.
//!
//! - `example.com`: that host, on any port, over http(s) (and ws(s));
//! - `*.example.com`: any subdomain of example.com (not example.com itself:
//!   list both when both are meant);
//! - `https://app.example.com`, `http://127.0.0.1:8765`: that scheme, host
//!   and port (the scheme's default port when none is written).
//!
//! No list (`Sites::any`) allows every site. Hosts are read as a browser
//! reads them (the `url` crate is WHATWG's parser: `EXAMPLE.com`, a
//! trailing dot and internationalised names come out as Chrome writes
//! them), and the URLs checked against them are the ones Chrome reports
//! (a paused request's URL), so the two never read a host differently.
//!
//! The same list answers three questions: may a tab's page be at this URL
//! ([`Sites::allows_url`]), may a client see this cookie
//! ([`Sites::allows_cookie`]), and what does the extension's
//! declarativeNetRequest allow-list look like ([`Sites::url_regexes`]).

use serde::{Deserialize, Serialize};

/// Why a site pattern was refused; the message says the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SiteError {
    #[error(
        "'{0}': a site is a host (example.com), any subdomain of one (*.example.com) or an origin (https://app.example.com, http://127.0.0.1:8765); {1}"
    )]
    Invalid(String, &'static str),
}

/// One site pattern, as written and as matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SitePattern {
    /// `example.com`: that host, any port.
    Host(String),
    /// `*.example.com`: any subdomain.
    Subdomains(String),
    /// `https://app.example.com`: scheme, host (or `*.` subdomains) and port.
    Origin { scheme: String, host: String, subdomains: bool, port: u16 },
}

/// Schemes whose URLs name a site; anything else is not a site.
const WEB_SCHEMES: [&str; 4] = ["http", "https", "ws", "wss"];

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    }
}

/// A host as Chrome writes it, from what a person typed.
fn normal_host(written: &str, pattern: &str) -> Result<String, SiteError> {
    let bad = |why| SiteError::Invalid(pattern.to_string(), why);
    if written.is_empty() {
        return Err(bad("there is no host"));
    }
    if written.contains('*') {
        return Err(bad("a '*' may only begin a pattern, as in *.example.com"));
    }
    let host = url::Host::parse(written).map_err(|_| bad("that is not a host name"))?;
    let host = host.to_string();
    Ok(host.trim_end_matches('.').to_string())
}

impl SitePattern {
    pub fn parse(written: &str) -> Result<Self, SiteError> {
        let pattern = written.trim();
        let bad = |why| SiteError::Invalid(pattern.to_string(), why);
        if pattern.is_empty() {
            return Err(bad("it is empty"));
        }
        if pattern == "*" {
            return Err(bad("leave --sites out to allow every site"));
        }
        if let Some((scheme, rest)) = pattern.split_once("://") {
            let scheme = scheme.to_ascii_lowercase();
            if !WEB_SCHEMES.contains(&scheme.as_str()) {
                return Err(bad("only http, https, ws and wss origins are sites"));
            }
            let rest = rest.strip_suffix('/').unwrap_or(rest);
            if rest.contains(['/', '?', '#', '@', '\\']) {
                return Err(bad("a site has no path, query, fragment or user name"));
            }
            let (subdomains, rest) = match rest.strip_prefix("*.") {
                Some(rest) => (true, rest),
                None => (false, rest),
            };
            // The port is what follows the last ':' outside an IPv6 address.
            let (host, port) = match rest.rsplit_once(':') {
                Some((host, port)) if !port.contains(']') => {
                    let port = port.parse::<u16>().map_err(|_| bad("its port is not a number from 0 to 65535"))?;
                    (host, Some(port))
                }
                _ => (rest, None),
            };
            let port = port.or_else(|| default_port(&scheme)).expect("web schemes have a default port");
            return Ok(Self::Origin { host: normal_host(host, pattern)?, scheme, subdomains, port });
        }
        if pattern.contains(['/', '?', '#', '@', '\\']) {
            return Err(bad("a site has no path, query, fragment or user name (write an origin as https://host)"));
        }
        if let Some(base) = pattern.strip_prefix("*.") {
            return Ok(Self::Subdomains(normal_host(base, pattern)?));
        }
        if pattern.contains(':') && !pattern.starts_with('[') {
            return Err(bad("a port needs the scheme too: http://host:port"));
        }
        Ok(Self::Host(normal_host(pattern, pattern)?))
    }

    /// Whether `host` is this pattern's host (`subdomains`: a subdomain of it).
    fn host_matches(base: &str, subdomains: bool, host: &str) -> bool {
        match subdomains {
            false => host == base,
            true => {
                host.len() > base.len() + 1 && host.ends_with(base) && host[..host.len() - base.len()].ends_with('.')
            }
        }
    }

    fn matches(&self, scheme: &str, host: &str, port: u16) -> bool {
        match self {
            Self::Host(base) => host == base,
            Self::Subdomains(base) => Self::host_matches(base, true, host),
            Self::Origin { scheme: want, host: base, subdomains, port: want_port } => {
                // An https origin takes its WebSocket twin too.
                let scheme_ok = scheme == want
                    || matches!(
                        (want.as_str(), scheme),
                        ("https", "wss") | ("http", "ws") | ("wss", "https") | ("ws", "http")
                    );
                scheme_ok && port == *want_port && Self::host_matches(base, *subdomains, host)
            }
        }
    }

    /// Whether a cookie of `domain` (Chrome's: `.example.com` for a domain
    /// cookie, `example.com` for a host-only one) is sent to some URL of
    /// this site. `secure`: only over https.
    fn sees_cookie(&self, domain: &str, secure: bool) -> bool {
        let (domain_cookie, domain) = match domain.strip_prefix('.') {
            Some(d) => (true, d.to_ascii_lowercase()),
            None => (false, domain.to_ascii_lowercase()),
        };
        let domain = domain.trim_end_matches('.');
        // A cookie of `domain` reaches `host` when host-only and equal, or
        // when a domain cookie and host is domain or under it.
        let reaches = |host: &str| host == domain || (domain_cookie && host.ends_with(&format!(".{domain}")));
        // Some subdomain of `base` is reached: one under `domain` (the
        // cookie's domain is below base), or base is under a domain cookie.
        let reaches_a_subdomain = |base: &str| {
            domain.ends_with(&format!(".{base}"))
                || (domain_cookie && (base == domain || base.ends_with(&format!(".{domain}"))))
        };
        match self {
            Self::Host(host) => reaches(host),
            Self::Subdomains(base) => reaches_a_subdomain(base),
            Self::Origin { scheme, host, subdomains, .. } => {
                // Chrome sends a secure cookie over TLS, and to loopback
                // hosts over plain http too (it trusts them).
                let over_tls = matches!(scheme.as_str(), "https" | "wss") || is_loopback(host);
                (!secure || over_tls) && if *subdomains { reaches_a_subdomain(host) } else { reaches(host) }
            }
        }
    }

    /// An RE2 regular expression (declarativeNetRequest's `regexFilter`)
    /// matching exactly the URLs of this site, as Chrome writes them.
    fn url_regex(&self) -> String {
        // Chrome writes no default port and a `/` after the host; user
        // names never reach a request's URL, but cost nothing to allow.
        const USER: &str = "([^/?#@]*@)?";
        let host_re = |host: &str, subdomains: bool| {
            let escaped = regex_escape(host);
            if subdomains { format!("[^/?#@:]+\\.{escaped}") } else { escaped }
        };
        match self {
            Self::Host(host) => format!("^(https?|wss?)://{USER}{}(:[0-9]+)?/", host_re(host, false)),
            Self::Subdomains(base) => format!("^(https?|wss?)://{USER}{}(:[0-9]+)?/", host_re(base, true)),
            Self::Origin { scheme, host, subdomains, port } => {
                let schemes = match scheme.as_str() {
                    "https" | "wss" => "(https|wss)",
                    _ => "(http|ws)",
                };
                let port = if default_port(scheme) == Some(*port) { String::new() } else { format!(":{port}") };
                format!("^{schemes}://{USER}{}{port}/", host_re(host, *subdomains))
            }
        }
    }
}

/// Whether `host` (as Chrome writes it) is this machine's: Chrome treats
/// such an origin as secure over plain http.
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host == "[::1]"
        || host.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// The host of `url` as Chrome writes it (`None`: no URL, or no host).
pub fn host_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    Some(parsed.host_str()?.trim_end_matches('.').to_string())
}

/// RE2's escape for a literal.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl std::fmt::Display for SitePattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Host(host) => f.write_str(host),
            Self::Subdomains(base) => write!(f, "*.{base}"),
            Self::Origin { scheme, host, subdomains, port } => {
                let star = if *subdomains { "*." } else { "" };
                match default_port(scheme) == Some(*port) {
                    true => write!(f, "{scheme}://{star}{host}"),
                    false => write!(f, "{scheme}://{star}{host}:{port}"),
                }
            }
        }
    }
}

/// A grant's sites: an empty list allows every site.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sites(Vec<SitePattern>);

/// What a URL is, as far as the sites are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlVerdict {
    /// On one of the sites (or every site is allowed).
    Allowed,
    /// No network and no site of its own: `about:blank`, `data:`, a
    /// `blob:` of an allowed site.
    Local,
    /// Elsewhere: the navigation is refused.
    Refused,
}

impl Sites {
    /// Every site.
    pub fn any() -> Self {
        Self(Vec::new())
    }

    /// A comma- (or space-) separated list, as `--sites` takes it.
    pub fn parse_list(list: &str) -> Result<Self, SiteError> {
        let patterns: Result<Vec<SitePattern>, SiteError> =
            list.split([',', ' ']).filter(|p| !p.trim().is_empty()).map(SitePattern::parse).collect();
        let mut patterns = patterns?;
        if patterns.is_empty() {
            return Err(SiteError::Invalid(
                list.to_string(),
                "the list is empty (leave --sites out to allow every site)",
            ));
        }
        patterns.dedup();
        Ok(Self(patterns))
    }

    pub fn patterns(&self) -> &[SitePattern] {
        &self.0
    }

    /// Whether every site is allowed (no list).
    pub fn is_any(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a page may be at `url` (a top-level navigation's target).
    pub fn check_url(&self, url: &str) -> UrlVerdict {
        let Ok(parsed) = url::Url::parse(url) else { return UrlVerdict::Refused };
        match parsed.scheme() {
            "about" | "data" => return UrlVerdict::Local,
            "blob" => {
                // `blob:https://site/uuid`: its site is the inner URL's.
                let inner = parsed.path();
                return match self.check_url(inner) {
                    UrlVerdict::Allowed => UrlVerdict::Local,
                    verdict => verdict,
                };
            }
            _ => {}
        }
        // A grant's tab never goes to a local file, whatever its sites.
        let scheme = parsed.scheme();
        if !WEB_SCHEMES.contains(&scheme) {
            return UrlVerdict::Refused;
        }
        if self.is_any() {
            return UrlVerdict::Allowed;
        }
        let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default()) else {
            return UrlVerdict::Refused;
        };
        let host = host.trim_end_matches('.');
        match self.0.iter().any(|p| p.matches(scheme, host, port)) {
            true => UrlVerdict::Allowed,
            false => UrlVerdict::Refused,
        }
    }

    /// [`Self::check_url`] is not [`UrlVerdict::Refused`].
    pub fn allows_url(&self, url: &str) -> bool {
        self.check_url(url) != UrlVerdict::Refused
    }

    /// Whether a client may see or set a cookie of `domain` (`secure`:
    /// sent over https only): it is sent to one of the sites.
    pub fn allows_cookie(&self, domain: &str, secure: bool) -> bool {
        self.is_any() || self.0.iter().any(|p| p.sees_cookie(domain, secure))
    }

    /// The extension's allow-list: one RE2 expression per site.
    pub fn url_regexes(&self) -> Vec<String> {
        self.0.iter().map(SitePattern::url_regex).collect()
    }

    /// `a, b, c`, or `any site`.
    pub fn describe(&self) -> String {
        if self.is_any() {
            return "any site".into();
        }
        self.0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    }
}

impl Serialize for Sites {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let written: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        written.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Sites {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let written = Vec::<String>::deserialize(deserializer)?;
        let patterns: Result<Vec<SitePattern>, SiteError> = written.iter().map(|p| SitePattern::parse(p)).collect();
        patterns.map(Self).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sites(list: &str) -> Sites {
        Sites::parse_list(list).unwrap()
    }

    #[test]
    fn patterns_read_as_written_and_print_back() {
        for (written, shown) in [
            ("example.com", "example.com"),
            ("EXAMPLE.com.", "example.com"),
            ("*.wikipedia.org", "*.wikipedia.org"),
            ("https://app.example.com", "https://app.example.com"),
            ("https://app.example.com:443/", "https://app.example.com"),
            ("http://127.0.0.1:8765", "http://127.0.0.1:8765"),
            ("https://*.example.com", "https://*.example.com"),
            ("http://[::1]:9000", "http://[::1]:9000"),
            ("bücher.de", "xn--bcher-kva.de"),
        ] {
            assert_eq!(SitePattern::parse(written).unwrap().to_string(), shown, "{written}");
        }
    }

    #[test]
    fn what_is_not_a_site_is_refused_with_the_rule() {
        for (written, says) in [
            ("", "empty"),
            ("*", "leave --sites out"),
            ("example.com/mail", "no path"),
            ("ftp://example.com", "only http, https"),
            ("file:///etc", "only http, https"),
            ("example.*", "may only begin"),
            ("*example.com", "may only begin"),
            ("https://user@example.com", "user name"),
            ("example.com:8080", "needs the scheme"),
            ("http://example.com:99999", "port"),
            ("exa<mple.com", "not a host name"),
        ] {
            let refused = Sites::parse_list(written).map(|_| ()).unwrap_err_or(written);
            assert!(refused.contains(says) && refused.contains("a site is a host"), "{written}: {refused}");
        }
    }

    trait UnwrapErrOr {
        fn unwrap_err_or(self, what: &str) -> String;
    }
    impl UnwrapErrOr for Result<(), SiteError> {
        fn unwrap_err_or(self, what: &str) -> String {
            match self {
                Ok(()) => panic!("{what} was taken"),
                Err(e) => e.to_string(),
            }
        }
    }

    #[test]
    fn a_host_takes_any_port_a_subdomain_pattern_only_subdomains_an_origin_its_own() {
        let s = sites("example.com, *.wiki.org, https://app.test, http://127.0.0.1:8765");
        for allowed in [
            "https://example.com/",
            "http://example.com:8080/x?y#z",
            "https://EXAMPLE.com./a",
            "https://en.wiki.org/wiki/Rust",
            "https://a.b.wiki.org/",
            "https://app.test/inbox",
            "https://app.test:443/",
            "wss://app.test/socket",
            "http://127.0.0.1:8765/form",
        ] {
            assert_eq!(s.check_url(allowed), UrlVerdict::Allowed, "{allowed}");
        }
        for refused in [
            "https://mail.example.com/",
            "https://example.com.evil.net/",
            "https://evilexample.com/",
            "https://wiki.org/",
            "https://notwiki.org/",
            "http://app.test/",
            "https://app.test:8443/",
            "https://sub.app.test/",
            "http://127.0.0.1:8766/",
            "http://localhost:8765/",
            "https://example.com@evil.net/",
            "file:///etc/passwd",
            "chrome://settings",
            "not a url",
        ] {
            assert_eq!(s.check_url(refused), UrlVerdict::Refused, "{refused}");
        }
        for local in ["about:blank", "data:text/html,<p>hi", "blob:https://app.test/5b1f"] {
            assert_eq!(s.check_url(local), UrlVerdict::Local, "{local}");
        }
        assert_eq!(s.check_url("blob:https://evil.net/5b1f"), UrlVerdict::Refused);
        assert_eq!(Sites::any().check_url("https://anything.example/"), UrlVerdict::Allowed);
        assert_eq!(Sites::any().check_url("file:///etc/passwd"), UrlVerdict::Refused, "never a local file");
    }

    #[test]
    fn a_cookie_is_seen_when_it_is_sent_to_one_of_the_sites() {
        let s = sites("app.example.com, *.wiki.org, https://bank.test");
        for (domain, secure) in [
            ("app.example.com", false),
            (".example.com", true),
            (".app.example.com", false),
            ("en.wiki.org", false),
            (".wiki.org", false),
            ("bank.test", true),
            (".bank.test", false),
        ] {
            assert!(s.allows_cookie(domain, secure), "{domain} secure={secure}");
        }
        for (domain, secure) in [
            ("mail.example.com", false),
            ("example.com", false),
            ("wiki.org", false),
            ("evil.net", false),
            (".other.test", false),
            ("sub.bank.test", false),
        ] {
            assert!(!s.allows_cookie(domain, secure), "{domain} secure={secure}");
        }
        let plain = sites("http://bank.test");
        assert!(plain.allows_cookie("bank.test", false));
        assert!(!plain.allows_cookie("bank.test", true), "a secure cookie never goes over http");
        let local = sites("http://127.0.0.1:8765, http://localhost:9");
        assert!(
            local.allows_cookie("127.0.0.1", true) && local.allows_cookie("localhost", true),
            "but to loopback it does"
        );
        assert!(Sites::any().allows_cookie("anything.example", true));
    }

    #[test]
    fn the_extensions_expressions_match_what_the_sites_allow() {
        // RE2 is not at hand here; the expressions' shape is checked, and
        // the e2e tests run them in Chrome.
        let s = sites("example.com, *.wiki.org, https://app.test, http://127.0.0.1:8765");
        assert_eq!(
            s.url_regexes(),
            [
                r"^(https?|wss?)://([^/?#@]*@)?example\.com(:[0-9]+)?/",
                r"^(https?|wss?)://([^/?#@]*@)?[^/?#@:]+\.wiki\.org(:[0-9]+)?/",
                r"^(https|wss)://([^/?#@]*@)?app\.test/",
                r"^(http|ws)://([^/?#@]*@)?127\.0\.0\.1:8765/",
            ]
        );
        assert_eq!(sites("http://[::1]:9").url_regexes(), [r"^(http|ws)://([^/?#@]*@)?\[::1\]:9/"]);
    }

    #[test]
    fn sites_keep_their_written_form_in_the_file() {
        let s = sites("example.com *.wiki.org,https://app.test");
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, r#"["example.com","*.wiki.org","https://app.test"]"#);
        assert_eq!(serde_json::from_str::<Sites>(&json).unwrap(), s);
        assert!(serde_json::from_str::<Sites>(r#"["example.com/x"]"#).is_err());
        assert_eq!(s.describe(), "example.com, *.wiki.org, https://app.test");
        assert_eq!(Sites::any().describe(), "any site");
    }
}
