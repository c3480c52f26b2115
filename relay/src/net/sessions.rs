//! Sessions of the control API's own clients (the CLI, the MCP server),
//! which never send their key: `POST /session` with the client's nonce is
//! answered with the server's nonce and its proof of the control key (the
//! install's, derived from the secret, or a grant's;
//! [`shared_protocol::auth`]), so the client knows it talks to this
//! install's `serve` and not to a program squatting the port. Both sides
//! then derive the session secret (the client's proof over both nonces);
//! the client sends it as its bearer, and the guard accepts it like the
//! key. A squatter learns a nonce, nothing it could use.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use shared_protocol::auth::{self, Prover};
use state_dir::Token;
use subtle::ConstantTimeEq as _;

/// Sessions in use kept at once; past it, the one unused longest goes (its
/// client opens a new one on its next 401).
const MAX_SESSIONS: usize = 256;
/// Sessions opened and not used yet: anyone may open one, so a flood of
/// opens churns these alone and never evicts a session in use.
const MAX_UNUSED: usize = 64;
/// A session unused this long is forgotten.
const IDLE: Duration = Duration::from_secs(24 * 3600);

/// What the server keeps of a session.
#[derive(Debug, Clone)]
struct Session {
    secret: String,
    nonces: SessionNonces,
    /// The key it was proved with: the install's control key, or a grant's
    /// control key (its answers are signed with the same).
    key: Token,
    /// Whose session it is.
    access: grants::Access,
}

/// The two nonces a session was opened with: what the server signs its
/// answers for ([`Sessions::sign_answer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionNonces {
    pub client: String,
    pub server: String,
}

#[derive(Debug, Default)]
struct Open {
    /// Opened, never presented: oldest first.
    unused: VecDeque<(Session, Instant)>,
    /// Presented at least once: (session, last use).
    used: Vec<(Session, Instant)>,
}

#[derive(Debug)]
pub struct Sessions {
    /// The control key the person's proofs are made with (`None`: no
    /// sessions); a grant's are made with the grant's control key.
    key: Option<Token>,
    /// The control API's port, which the proofs are bound to
    /// (`auth::on_port`): a program on the port a client dials that passes
    /// its requests to a server elsewhere cannot pass that server's proof on.
    port: u16,
    open: Mutex<Open>,
    /// The grants whose sessions can be opened (`--grant`).
    lent: Option<std::sync::Arc<crate::lent::Lent>>,
}

/// The server's half of a session: its nonce and proof.
#[derive(Debug, serde::Serialize)]
pub struct Opened {
    pub nonce: String,
    pub proof: String,
}

impl Sessions {
    pub fn new(key: Option<Token>) -> Self {
        Self { key, port: 0, open: Mutex::new(Open::default()), lent: None }
    }

    /// Sessions of the grants too (`POST /session {"grant"}`).
    pub fn with_grants(mut self, lent: std::sync::Arc<crate::lent::Lent>) -> Self {
        self.lent = Some(lent);
        self
    }

    /// Opens a session of the grant `name`, proved with its control key;
    /// `None` when no such grant is honoured (expired ones are not).
    pub fn open_grant(&self, client_nonce: &str, name: &str) -> Option<Opened> {
        let lent = self.lent.as_ref()?;
        let grant = lent.named(name).filter(|g| !g.expired())?;
        let key = lent.key_of(&grant, grants::Door::Control)?;
        self.open_for(client_nonce, grant, key)
    }

    /// Sessions of the control API listening on `port`.
    pub fn on_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Opens a session for a client's nonce: `None` when there is no key or
    /// the nonce is malformed.
    pub fn open(&self, client_nonce: &str) -> Option<Opened> {
        let key = self.key.clone()?;
        self.open_with(client_nonce, key, grants::Access::Person)
    }

    /// Opens a session of a grant (the CLI and MCP server with `--grant`):
    /// proved with the grant's control key, so only a holder of that key
    /// gets its secret, and held to the grant like its key.
    pub fn open_for(&self, client_nonce: &str, grant: std::sync::Arc<grants::Grant>, key: Token) -> Option<Opened> {
        self.key.as_ref()?;
        self.open_with(client_nonce, key, grants::Access::Grant(grant))
    }

    fn open_with(&self, client_nonce: &str, key: Token, access: grants::Access) -> Option<Opened> {
        let key = &key;
        if !auth::is_nonce(client_nonce) {
            return None;
        }
        let mut random = [0u8; 32];
        getrandom::fill(&mut random).ok()?;
        let nonce = auth::nonce_hex(&random);
        let bound = auth::on_port(&nonce, self.port);
        let proof = auth::proof(key.as_str(), Prover::ControlServer, client_nonce, &bound);
        let secret = auth::proof(key.as_str(), Prover::ControlClient, client_nonce, &bound);
        let nonces = SessionNonces { client: client_nonce.to_string(), server: nonce.clone() };
        let session = Session { secret, nonces, key: key.clone(), access };
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.unused.retain(|(_, opened)| opened.elapsed() < IDLE);
        if open.unused.len() >= MAX_UNUSED {
            open.unused.pop_front();
        }
        open.unused.push_back((session, Instant::now()));
        Some(Opened { nonce, proof })
    }

    /// Whether `presented` is an open session's secret.
    #[cfg(any(test, feature = "testing"))]
    pub fn accepts(&self, presented: &str) -> bool {
        self.session(presented).is_some()
    }

    /// The open session whose secret is `presented` (constant time per
    /// comparison), and whose it is; using it keeps it open, and a first
    /// use moves it among the sessions in use.
    pub fn session(&self, presented: &str) -> Option<(SessionNonces, grants::Access)> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let matches = |session: &Session| bool::from(session.secret.as_bytes().ct_eq(presented.as_bytes()));
        let mut found = None;
        for (session, used) in &mut open.used {
            if matches(session) && now.duration_since(*used) < IDLE {
                *used = now;
                found = Some((session.nonces.clone(), session.access.clone()));
            }
        }
        let first_use =
            open.unused.iter().position(|(session, opened)| matches(session) && now.duration_since(*opened) < IDLE);
        if let Some(index) = first_use {
            let (session, _) = open.unused.remove(index).expect("found");
            open.used.retain(|(_, used)| now.duration_since(*used) < IDLE);
            if open.used.len() >= MAX_SESSIONS
                && let Some(oldest) = open.used.iter().enumerate().min_by_key(|(_, (_, used))| *used).map(|(i, _)| i)
            {
                open.used.swap_remove(oldest);
            }
            found = Some((session.nonces.clone(), session.access.clone()));
            open.used.push((session, now));
        }
        found
    }

    /// The signature of one answer of the session `nonces`
    /// ([`auth::answer_mac`]), with the key the session was proved with;
    /// `None` without one.
    pub fn sign_answer(&self, nonces: &SessionNonces, request_id: &str, status: u16, body: &[u8]) -> Option<String> {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let key = open.used.iter().map(|(s, _)| s).find(|s| s.nonces == *nonces).map(|s| s.key.clone());
        drop(open);
        let key = key.or_else(|| self.key.clone())?;
        Some(auth::answer_mac(key.as_str(), &nonces.client, &nonces.server, request_id, status, body))
    }
}

/// The header a session's client names its request in (random, fresh per
/// request), and the one the server signs the answer in.
pub(crate) const REQUEST_HEADER: &str = "browser-relay-request";
pub(crate) const ANSWER_HEADER: &str = "browser-relay-answer";

/// The client's side: checks the server's proof for `client_nonce` and
/// derives the session secret; `None` when the proof is wrong.
pub fn client_secret(
    key: &Token,
    port: u16,
    client_nonce: &str,
    opened_nonce: &str,
    opened_proof: &str,
) -> Option<String> {
    let bound = auth::on_port(opened_nonce, port);
    let proved = auth::is_nonce(opened_nonce)
        && auth::verify(key.as_str(), Prover::ControlServer, client_nonce, &bound, opened_proof);
    proved.then(|| auth::proof(key.as_str(), Prover::ControlClient, client_nonce, &bound))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nonce(fill: u8) -> String {
        auth::nonce_hex(&[fill; 32])
    }

    #[test]
    fn a_client_with_the_token_gets_a_session_the_guard_accepts() {
        let key = Token::generate();
        let sessions = Sessions::new(Some(key.clone()));
        let client_nonce = nonce(1);
        let opened = sessions.open(&client_nonce).expect("opened");
        let secret = client_secret(&key, 0, &client_nonce, &opened.nonce, &opened.proof).expect("the server proved it");
        assert!(sessions.accepts(&secret));
        assert!(!sessions.accepts(key.as_str()), "the token is not a session");
        assert!(!sessions.accepts(&secret[..63]));
        // Another install's token proves nothing, and derives nothing.
        assert!(client_secret(&Token::generate(), 0, &client_nonce, &opened.nonce, &opened.proof).is_none());
        // Nor on another port (a program there passing the requests on).
        assert!(client_secret(&key, 18791, &client_nonce, &opened.nonce, &opened.proof).is_none());
        // A proof for another nonce (a replay) does not pass.
        assert!(client_secret(&key, 0, &nonce(2), &opened.nonce, &opened.proof).is_none());
    }

    #[test]
    fn no_key_no_sessions_and_malformed_nonces_are_refused() {
        assert!(Sessions::new(None).open(&nonce(1)).is_none());
        assert!(Sessions::new(Some(Token::generate())).open("short").is_none());
    }

    #[test]
    fn a_flood_of_opens_never_evicts_a_session_in_use() {
        let key = Token::generate();
        let sessions = Sessions::new(Some(key.clone()));
        let open = |fill: u8| {
            let client_nonce = nonce(fill);
            let opened = sessions.open(&client_nonce).unwrap();
            client_secret(&key, 0, &client_nonce, &opened.nonce, &opened.proof).unwrap()
        };
        let live = open(1);
        assert!(sessions.accepts(&live), "in use");
        // Anyone on the machine may open sessions (it proves nothing):
        // thousands of them must not push the live one out.
        for i in 0..4 * (MAX_SESSIONS + MAX_UNUSED) {
            sessions.open(&auth::nonce_hex(&[(i % 250) as u8 + 2; 32])).unwrap();
        }
        assert!(sessions.accepts(&live), "a session in use survives a flood of opens");
        // A client that opens and then uses its session still gets in.
        let newcomer = open(3);
        assert!(sessions.accepts(&newcomer));
        // Sessions in use are bounded too: the one unused longest goes.
        for i in 0..MAX_SESSIONS {
            let secret = open((i % 250) as u8 + 4);
            assert!(sessions.accepts(&secret));
        }
        assert!(!sessions.accepts(&live), "the least recently used makes room");
    }

    #[test]
    fn an_opened_session_never_used_makes_room_first() {
        let key = Token::generate();
        let sessions = Sessions::new(Some(key.clone()));
        let first_nonce = nonce(1);
        let first = sessions.open(&first_nonce).unwrap();
        let first = client_secret(&key, 0, &first_nonce, &first.nonce, &first.proof).unwrap();
        for i in 0..MAX_UNUSED {
            sessions.open(&auth::nonce_hex(&[(i % 250) as u8 + 2; 32])).unwrap();
        }
        assert!(!sessions.accepts(&first), "evicted before it was used");
    }
}
