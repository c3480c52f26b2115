//! Grants: a named, revocable key per agent or script, lent a part of the
//! person's browser.
//!
//! A grant has a name (its tab group's title), a colour (its group's), the
//! sites its tabs may use ([`Sites`]), an optional expiry and whether its
//! agents may run their own script (`evaluate`). Its keys (one per door:
//! CDP and control) are derived from the install's secret, its name and a
//! salt drawn when it was made ([`Grant::key`]): `rotate` changes them
//! all, and a grant revoked and made again gets new ones.
//!
//! Grants live in `<state>/grants.json` ([`GrantBook`]), owner-only and
//! signed by the secret, so that a file another user put in a shared state
//! directory grants nothing. Who presented which key is [`Access`].

mod access;
mod book;
mod grant;
mod sites;

pub use access::{Access, GrantKeys};
pub use book::{GrantBook, GrantError, NewGrant};
pub use grant::{AskKind, BadName, Door, Grant, GrantName, GroupColor, human_duration, now_ms, parse_duration};
pub use sites::{SiteError, SitePattern, Sites, UrlVerdict, host_of};
