//! The link to the relay: the socket, the pairing proved both ways, the
//! hello and the welcome, the keepalive and the watch for a relay that went
//! silent or takes nothing, reconnecting after the backoff, the grace before
//! the shared tabs are released, and letting the worker sleep. Its rules,
//! with their tests, are in the core's module doc.

use shared_protocol::auth::{self, Prover};
use shared_protocol::{
    ExtensionMessage, GRANTS_SINCE, Hello, PROTOCOL_VERSION, RelayMessage, SUBPROTOCOL, TabInfo, close_code, encode,
};

use super::grant_record::RelayGrants;
use super::host::{ChromeCall, Host, Settings, Timer};
use super::machine::{Core, Link, NOT_PAIRED, Purpose};
use super::policy::{self, Badge};
use super::versions;

/// When a lost link is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// After the backoff (`policy::reconnect_delay_ms`).
    Backoff,
    /// After the backoff's longest wait: a relay that refused our protocol.
    Slowest,
    /// At once: a handshake lost.
    AtOnce,
}

impl<H: Host> Core<H> {
    pub(super) fn ensure_connected(&mut self) {
        if self.link != Link::Idle {
            return;
        }
        if !self.settings.is_paired() {
            self.last_error = Some(NOT_PAIRED.into());
            self.refresh_badges();
            return;
        }
        let url = format!("ws://127.0.0.1:{}/extension", self.settings.dial_port());
        // The token is proved inside the socket, never sent.
        let protocols = [SUBPROTOCOL.to_string()];
        self.link = Link::Connecting;
        self.opened = false;
        self.heard = false;
        self.silent_watches = 0;
        self.link_generation += 1;
        self.host.connect(&url, &protocols);
        self.host.set_timer(Timer::RelayWatch, policy::RELAY_WATCH_MS);
        self.refresh_badges();
    }

    /// The socket opened: our nonce, nothing else, until the relay proves
    /// the pairing.
    pub fn on_socket_open(&mut self) {
        if self.link != Link::Connecting {
            return;
        }
        self.link = Link::Authenticating;
        self.opened = true;
        self.heard = true;
        let Some(random) = self.host.random_bytes() else {
            self.host.disconnect();
            return self.on_socket_closed(close_code::BAD_MESSAGE, "no secure random source for the pairing proof");
        };
        self.auth_nonce = auth::nonce_hex(&random);
        self.redeeming = None;
        let auth = ExtensionMessage::Auth {
            protocol_version: PROTOCOL_VERSION,
            nonce: self.auth_nonce.clone(),
            pairing_code: self.settings.pairing_code.as_deref().map(auth::pairing_code_id),
        };
        self.send(&auth);
    }

    pub fn on_socket_message(&mut self, text: &str) {
        self.heard = true;
        let message = match RelayMessage::parse(text) {
            Ok(message) => message,
            // A newer relay may send what we do not know; ignoring it keeps
            // the link up (the relay answers unknown calls' timeouts itself).
            Err(_) => return,
        };
        match (self.link, message) {
            (Link::Authenticating, RelayMessage::Challenge { nonce, proof }) => self.on_challenge(&nonce, &proof),
            (Link::Open, RelayMessage::Welcome { protocol_version, relay_version, protocols, sealed }) => {
                let redeemed = self.redeeming.take();
                if let Some(bound) = &redeemed
                    && !self.keep_sealed_pairing(bound, sealed.as_deref())
                {
                    return;
                }
                self.relay_versions = Some(versions::RelayVersions { version: Some(relay_version), protocols });
                self.host.set_batching(protocol_version >= shared_protocol::BATCHES_SINCE);
                self.link = Link::Ready;
                if protocol_version < GRANTS_SINCE {
                    // A relay from before grants has none.
                    self.relay_grants = RelayGrants::None;
                    self.on_grants(Vec::new());
                }
                self.attempt = 0;
                self.handshake_retried = false;
                self.tell_what_changed_since_the_hello();
                self.last_error = None;
                self.grace_running = false;
                self.host.cancel_timer(Timer::DetachGrace);
                self.host.cancel_timer(Timer::Reconnect);
                self.host.set_timer(Timer::Keepalive, policy::KEEPALIVE_MS);
                self.refresh_badges();
                // A connection made only to redeem a pairing link's code
                // has done its work (its relay's `grants` notice, sent
                // next, is not waited for: its status route is asked).
                self.maybe_idle();
                if redeemed.is_some() {
                    self.probe_relay();
                }
            }
            (Link::Ready, RelayMessage::Ping { nonce }) => self.send(&ExtensionMessage::Pong { nonce }),
            (Link::Ready, RelayMessage::Pong { .. }) => {}
            (Link::Ready, RelayMessage::Clients { tabs }) => {
                self.clients = tabs.into_iter().map(|t| (t.tab_id, t.clients)).collect();
            }
            (Link::Ready, RelayMessage::Grants { grants }) => self.on_grants_notice(grants),
            (Link::Ready, call) => self.on_relay_call(call),
            // Before the relay has proved the pairing (or before its
            // welcome), nothing is obeyed or answered: the other end may be
            // any program that took the port.
            _ => {}
        }
    }

    /// The relay's proof: right, and we prove ours, then say hello; wrong, and
    /// the other end is not our relay: close and say so.
    fn on_challenge(&mut self, relay_nonce: &str, proof: &str) {
        // Bound to the port we connected to (shared-protocol's `auth::on_port`).
        let bound = auth::on_port(relay_nonce, self.settings.dial_port());
        let proves = |key: &str| {
            auth::is_nonce(relay_nonce) && auth::verify(key, Prover::Relay, &self.auth_nonce, &bound, proof)
        };
        let by_code = self.settings.pairing_code.as_deref().is_some_and(proves);
        // A pairing from before protocol 8 holds the install's secret; the
        // relay proves the extension's key derived from it. That key takes
        // the secret's place in storage now: the secret leaves the browser
        // with no new pairing.
        let same_relay = self.settings.dial_port() == self.settings.port;
        let upgraded = match self.settings.token.as_deref() {
            Some(held) if !by_code && same_relay && !proves(held) => {
                Some(auth::derive_key(held, auth::KeyPurpose::Extension)).filter(|key| proves(key))
            }
            _ => None,
        };
        if let Some(key) = upgraded {
            let port = self.settings.port;
            self.host.save_pairing(Some((&key, port)));
            self.settings = Settings { port, token: Some(key), pairing_code: None, pairing_port: None };
            self.host.log("the pairing now holds the extension's own key in place of the relay's secret");
        }
        let proves = |key: &str| {
            auth::is_nonce(relay_nonce) && auth::verify(key, Prover::Relay, &self.auth_nonce, &bound, proof)
        };
        let code = self.settings.pairing_code.clone();
        let token = self.settings.token.clone();
        let by_token = token.as_deref().is_some_and(proves);
        // A pairing link's code, while it waits, is what both sides prove;
        // the token comes sealed for it in the welcome. A relay on our
        // pairing's port that proves the token we hold instead did not
        // take the code (it is older than pairing codes): the code is
        // forgotten and the link goes on with the token.
        let key = match (code, token) {
            (Some(code), _) if by_code => {
                self.redeeming = Some(bound.clone());
                code
            }
            (Some(_), Some(token)) if by_token && same_relay => {
                self.forget_pairing_code();
                token
            }
            (None, Some(token)) if by_token => token,
            _ => {
                let port = self.settings.dial_port();
                self.host.disconnect();
                self.on_socket_closed(
                    close_code::NOT_PAIRED,
                    &format!(
                        "the program on 127.0.0.1:{port} is not your paired relay: it could not prove the pairing (another program on the port, or the relay's token changed: run `browser-relay pair` again)"
                    ),
                );
                return;
            }
        };
        self.link = Link::Open;
        // Our proof alone first: the relay reads only a few KiB before it
        // checks out, and the hello may be larger.
        self.send(&ExtensionMessage::Prove { proof: auth::proof(&key, Prover::Extension, &self.auth_nonce, &bound) });
        let attached_tabs: Vec<TabInfo> = self.attached.values().map(|tab| self.with_owner(tab.clone())).collect();
        self.said_hello = attached_tabs.iter().map(|tab| (tab.tab_id, tab.clone())).collect();
        let hello = ExtensionMessage::Hello(Hello {
            protocol_version: PROTOCOL_VERSION,
            extension_version: self.env.extension_version.clone(),
            user_agent: self.env.user_agent.clone(),
            browser_version: self.env.browser_version.clone(),
            attached_tabs,
        });
        self.send(&hello);
    }

    /// Welcomed: what changed in the shared tabs between the hello and
    /// the welcome (nothing else is sent to the relay before it) is told
    /// now, as the messages it would have been: a tab shared or no longer
    /// shared, moved to another group, or gone to another page.
    fn tell_what_changed_since_the_hello(&mut self) {
        let said = std::mem::take(&mut self.said_hello);
        let now: Vec<TabInfo> = self.attached.values().map(|tab| self.with_owner(tab.clone())).collect();
        for (id, before) in &said {
            if !self.attached.contains_key(id) {
                self.send(&ExtensionMessage::UserToggledAttach { tab: before.clone(), attached: false });
            }
        }
        for tab in now {
            match said.get(&tab.tab_id) {
                None => self.send(&ExtensionMessage::UserToggledAttach { tab, attached: true }),
                Some(before) => {
                    if before.grant != tab.grant {
                        self.send(&ExtensionMessage::TabGrant { tab_id: tab.tab_id, grant: tab.grant.clone() });
                    }
                    if before.url != tab.url || before.title != tab.title {
                        self.send(&ExtensionMessage::TabUpdated { tab });
                    }
                }
            }
        }
    }

    /// The socket closed (or failed to open), with the close code and reason.
    pub fn on_socket_closed(&mut self, code: u16, reason: &str) {
        if self.link == Link::Idle {
            return;
        }
        // A handshake lost once the socket opened, for whatever reason but
        // a protocol refusal (the relay dropped it, took too long, or did
        // not take a message): tried again at once, once, if the link is
        // wanted (tabs shared, a pairing link's code to redeem; a link for
        // the grants alone waits for the next alarm, as always). The
        // backoff is for a relay that is not there.
        let wanted = !self.attached.is_empty() || self.settings.pairing_code.is_some();
        // Not a proof that failed (the other end is not our relay, or ours
        // holds another key): at once would only meet it again, and its
        // verdict, which the person must read, would give way to the next
        // attempt's.
        let at_once = matches!(self.link, Link::Authenticating | Link::Open)
            && !matches!(code, close_code::PROTOCOL_MISMATCH | close_code::NOT_PAIRED)
            && wanted
            && !self.handshake_retried;
        let port = self.settings.dial_port();
        let error = match code {
            close_code::PROTOCOL_MISMATCH => format!("the relay refused this extension's protocol: {reason}"),
            close_code::HELLO_TIMEOUT | close_code::BAD_MESSAGE => {
                format!("the relay dropped the connection: {reason}")
            }
            // Our own verdict on the relay's proof, or the relay's on ours.
            close_code::NOT_PAIRED if reason.starts_with("the program on") => reason.to_string(),
            close_code::NOT_PAIRED => {
                // A code the relay does not know (spent, expired, another
                // relay's) never will: forget it, and the token kept from
                // before, if any, pairs again.
                self.forget_pairing_code();
                format!("the relay refused the pairing: {reason}")
            }
            _ if !self.opened => {
                // A pairing link's relay that is not there: the link is not
                // waited on (its code is good for minutes, and meanwhile
                // every connection would go to its port); the pairing from
                // before goes on.
                self.forget_pairing_code();
                format!(
                    "cannot connect to the relay on 127.0.0.1:{port}: is `browser-relay serve` (0.2 or newer) running?"
                )
            }
            _ => format!("the relay on 127.0.0.1:{port} went away"),
        };
        // A protocol refusal comes before any proof: any program on the
        // port can send it, so it never stops the retries (a squatter would
        // keep us away for good); it only makes them the slowest, as
        // retrying a relay that really is older helps only once it is
        // updated.
        if code == close_code::PROTOCOL_MISMATCH {
            // No welcome said which relay this is: its status route does,
            // for the options page.
            self.ask_relay_versions();
        }
        let retry = match code {
            close_code::PROTOCOL_MISMATCH => Retry::Slowest,
            _ if at_once => Retry::AtOnce,
            _ => Retry::Backoff,
        };
        self.link_lost(error, retry);
    }

    /// The link is gone, for `error`: retry as `retry` says, and keep the
    /// tabs for the grace period.
    fn link_lost(&mut self, error: String, retry: Retry) {
        self.link = Link::Idle;
        self.link_left_the_loop();
        self.opened = false;
        // A link only the grants held is not retried: the next alarm asks
        // the relay's status route again (`on_alarm`).
        self.relay_grants = RelayGrants::None;
        self.clients.clear();
        self.host.cancel_timer(Timer::Keepalive);
        self.host.cancel_timer(Timer::RelayWatch);
        self.last_error = Some(error);
        self.said_hello.clear();
        if retry == Retry::AtOnce {
            self.handshake_retried = true;
            self.host.set_timer(Timer::Reconnect, 0);
        }
        if self.attached.is_empty() {
            self.refresh_badges();
            return;
        }
        if retry == Retry::Slowest {
            self.attempt = self.attempt.max(policy::SLOWEST_ATTEMPT);
        }
        if retry != Retry::AtOnce {
            let delay = policy::reconnect_delay_ms(self.attempt, self.host.random());
            self.attempt = self.attempt.saturating_add(1);
            self.host.set_timer(Timer::Reconnect, delay);
        }
        if !self.grace_running {
            self.grace_running = true;
            self.host.set_timer(Timer::DetachGrace, policy::DETACH_GRACE_MS);
        }
        self.refresh_badges();
    }

    /// A relay that says nothing for [`policy::RELAY_SILENT_WATCHES`]
    /// watches in a row is stuck, though its socket is open (a suspended
    /// `serve` still accepts connections, and what the worker sends piles
    /// up in Chrome): leave it as one that went away. A live relay pings
    /// every 20 s and answers our pings, so each watch hears something.
    pub(super) fn on_relay_watch(&mut self) {
        if self.link == Link::Idle {
            return;
        }
        if self.grants_unlisted() {
            return;
        }
        if std::mem::take(&mut self.heard) {
            self.silent_watches = 0;
        } else {
            self.silent_watches += 1;
            if self.silent_watches >= policy::RELAY_SILENT_WATCHES {
                return self.leave_relay(
                    "stopped answering (nothing for about a minute: is `browser-relay serve` suspended?)",
                );
            }
        }
        self.host.set_timer(Timer::RelayWatch, policy::RELAY_WATCH_MS);
    }

    /// The token the relay sealed for our pairing link's code (it proved the
    /// code, and spent it on our proof), kept with the link's port, in one
    /// write; storage's change that follows matches these settings, and
    /// changes nothing. Without a good seal the relay did not pair us: the
    /// code is forgotten and the relay left. Whether the link goes on.
    fn keep_sealed_pairing(&mut self, bound: &str, sealed: Option<&str>) -> bool {
        let code = self.settings.pairing_code.clone().unwrap_or_default();
        let Some(token) = sealed.and_then(|sealed| auth::unseal(&code, &self.auth_nonce, bound, sealed)) else {
            // Left while it is named by its port (the link's), then the code goes.
            self.leave_relay("took the pairing link's code and sent no pairing: run `browser-relay pair` again");
            self.forget_pairing_code();
            return false;
        };
        let port = self.settings.dial_port();
        self.host.save_pairing(Some((&token, port)));
        self.settings = Settings { port, token: Some(token), pairing_code: None, pairing_port: None };
        true
    }

    /// A pairing link's code that will never pair: gone from storage too,
    /// and the pairing from before it (if any) is the one used.
    fn forget_pairing_code(&mut self) {
        if self.settings.pairing_code.take().is_some() {
            self.settings.pairing_port = None;
            self.host.save_pairing(None);
        }
    }

    /// After an answer or an event (what a busy tab sends most): a relay
    /// that has not taken [`policy::UNSENT_LIMIT`] bytes is not reading. It
    /// is left as one that went away, at once rather than when the watch
    /// notices, so the browser holds no more for it.
    pub(super) fn leave_if_backed_up(&mut self) {
        let unsent = self.host.unsent_bytes();
        if unsent > policy::UNSENT_LIMIT {
            self.leave_relay(&format!(
                "is not taking what this browser sends ({} MiB waiting): is `browser-relay serve` suspended or overloaded?",
                unsent >> 20
            ));
        }
    }

    /// Closes a socket whose relay is stuck (it stays open) and goes on as
    /// for a relay that went away: retries, the grace, and `why` (after
    /// "the relay on 127.0.0.1:PORT") on the button.
    fn leave_relay(&mut self, why: &str) {
        let port = self.settings.dial_port();
        self.host.disconnect();
        self.link_lost(format!("the relay on 127.0.0.1:{port} {why}"), Retry::Backoff);
    }

    /// Nothing shared, nothing pending and no grants: close the link and
    /// let the service worker sleep.
    pub(super) fn maybe_idle(&mut self) {
        let attaching = self.pending.values().any(|(p, _)| {
            matches!(
                p,
                Purpose::UserAttach(_) | Purpose::GroupAttach(_) | Purpose::GrantWindow(_) | Purpose::GrantTab(..)
            )
        });
        let opening = !self.grants.opening.is_empty() || !self.grants.awaiting.is_empty();
        // The relay has grants: their agents may open a tab at any time.
        let for_grants = self.link != Link::Idle && self.relay_grants.holds();
        if !self.attached.is_empty() || !self.reattaching.is_empty() || attaching || opening || for_grants {
            return;
        }
        for timer in [Timer::Reconnect, Timer::Keepalive, Timer::DetachGrace, Timer::RelayWatch] {
            self.host.cancel_timer(timer);
        }
        self.grace_running = false;
        if self.link != Link::Idle {
            self.host.disconnect();
            self.link = Link::Idle;
            self.link_left_the_loop();
        }
    }

    pub(super) fn send(&mut self, message: &ExtensionMessage<'_>) {
        self.host.send(encode(message));
    }

    /// A keepalive ping, while tabs are shared or grants hold the link: an
    /// MV3 worker that sends nothing is stopped after ~30 s.
    pub(super) fn on_keepalive(&mut self) {
        if self.link == Link::Ready && (!self.attached.is_empty() || self.relay_grants.holds()) {
            let nonce = self.next_nonce;
            self.next_nonce += 1;
            self.send(&ExtensionMessage::Ping { nonce });
            self.host.set_timer(Timer::Keepalive, policy::KEEPALIVE_MS);
        }
    }

    /// The grace after the relay went away is over: unless it came back,
    /// the shared tabs are released and the link given up.
    pub(super) fn on_grace_over(&mut self) {
        self.grace_running = false;
        if self.link == Link::Ready {
            return;
        }
        // The relay stayed away: give the user their tabs back.
        for tab in std::mem::take(&mut self.attached).into_keys() {
            self.start_call(Purpose::Cleanup, ChromeCall::DebuggerDetach { tab });
            self.leave_group(tab);
            self.badge(tab, &Badge::Off);
        }
        self.drop_pending_shares();
        self.persist();
        self.host.cancel_timer(Timer::Reconnect);
        if self.link != Link::Idle {
            self.host.disconnect();
            self.link = Link::Idle;
        }
        self.last_error = Some(format!(
            "the relay was gone for {} s, so the shared tabs were released",
            policy::DETACH_GRACE_MS / 1000
        ));
    }
}
