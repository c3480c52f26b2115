//! The person in the loop: a grant's action held where it becomes real
//! until the person answers, and a tab handed to the person.
//!
//! - **Questions.** A grant given `--ask` (`grants::AskKind`) has the
//!   matching actions held: a document POST or a top-level document to a
//!   site its tabs have not been on (the site hold keeps the request
//!   paused, before it leaves Chrome: `lending.rs`), a download (the
//!   response held before its body), files given to an input or dropped
//!   on the page, and the start of its input (the client's command held,
//!   and its later commands behind it: `forward.rs`). Whoever started it:
//!   an agent's click, a CDP command, the page's own script. The person
//!   answers in the extension's notification, on the dashboard or in a
//!   terminal ([`Relay::answer`]); no answer in [`crate::ASK_WITHIN`] is a
//!   no, and so is a question whose tab, grant or client goes first. Allow: it goes
//!   on as if never held (an allowed input's rest for a few seconds);
//!   "allow for this site" lets the same kind on the same site go for
//!   [`SITE_ALLOWANCE`] (files excepted); deny: it never happens, and
//!   whoever caused it is told the person said no.
//! - **Handoffs.** A grant's agent hands its tab to the person
//!   ([`Relay::hand_over`]): the extension brings it to the front and says
//!   who needs the person and why; while the person has it, the grant's
//!   clients may do nothing there but watch where it goes
//!   (`lending::refused_while_handed_over`, `shown_while_handed_over`);
//!   Done (the notification, the button's menu, the dashboard,
//!   `browser-relay done`), the agent's timeout, or the agent no longer
//!   waiting gives it back.
//!
//! Every question, answer and handoff is in the activity record.

use std::sync::Arc;
use std::time::Duration;

use activity::{Entry, Kind, Source};
use grants::{AskKind, Grant};
use shared_protocol::{RelayMessage, TabId, encode};
use tokio::sync::{oneshot, watch};

use super::questions::{
    Answer, AnsweredBy, AskError, AskedTab, Asking, Handoff, HandoffEnd, InputRun, Question, Verdict, Waiting,
};
use super::relay::Relay;

/// How many questions of one grant may wait at once.
pub(crate) const WAITING_PER_GRANT: usize = 8;

/// How long "allow for this site" lasts.
pub const SITE_ALLOWANCE: Duration = Duration::from_secs(600);

/// A duration as a person reads it: "2 minutes", "90 seconds".
fn said_as(within: Duration) -> String {
    let secs = within.as_secs();
    match secs {
        0 => format!("{} ms", within.as_millis()),
        s if s % 60 == 0 && s >= 60 => format!("{} minute{}", s / 60, if s == 60 { "" } else { "s" }),
        s => format!("{s} second{}", if s == 1 { "" } else { "s" }),
    }
}

/// A question still waiting when whoever asked it stops waiting: it is
/// withdrawn (dropped with the future that waits for it).
struct Unasked {
    relay: Relay,
    id: Option<u64>,
}

impl Unasked {
    /// Answered: nothing to take away.
    fn disarm(&mut self) {
        self.id = None;
    }
}

impl Drop for Unasked {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let waiting = self.relay.asking().waiting.remove(&id);
        if let Some(waiting) = waiting {
            self.relay.note_answer(&waiting.question, "no longer waited for: withdrawn", true);
            self.relay.close_question(id);
        }
    }
}

/// The person's answer to `unasked`'s question, or a no when none comes
/// within `within`.
async fn answer_within(mut unasked: Unasked, mut rx: oneshot::Receiver<Verdict>, within: Duration) -> Verdict {
    let verdict = match tokio::time::timeout(within, &mut rx).await {
        Ok(Ok(verdict)) => verdict,
        // The relay stopped, or the question was withdrawn.
        Ok(Err(_)) => Verdict::Refused("Browser Relay: the question was withdrawn".into()),
        Err(_) => match unasked.id.and_then(|id| unasked.relay.asking().waiting.remove(&id)) {
            Some(waiting) => {
                let said = format!("not answered within {}: denied", said_as(within));
                // Recorded before anyone hears it is over.
                unasked.relay.note_answer(&waiting.question, &said, true);
                unasked.relay.close_question(waiting.question.id);
                let why = format!("Browser Relay: the person did not answer within {}", said_as(within));
                Verdict::Refused(format!("{why}: {}", waiting.question.what))
            }
            // Answered just as the time ran out: that answer counts.
            None => rx.await.unwrap_or(Verdict::Refused("Browser Relay: the question was withdrawn".into())),
        },
    };
    unasked.disarm();
    verdict
}

/// A handoff whose agent stopped waiting: it ends.
struct Abandoned {
    relay: Relay,
    tab: Option<TabId>,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(tab) = self.tab.take() {
            self.relay.end_handoff(tab, HandoffEnd::TimedOut, "the agent stopped waiting");
        }
    }
}

/// How long an allowed input goes on without asking again: the rest of a
/// click (its release) or of typed text, while the events keep coming
/// (each renews it), on the same site, and never past [`INPUT_RUN_MAX`].
pub(crate) const INPUT_RUN: Duration = Duration::from_secs(5);
pub(crate) const INPUT_RUN_MAX: Duration = Duration::from_secs(30);

impl Relay {
    fn asking(&self) -> std::sync::MutexGuard<'_, Asking> {
        self.0.asking.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes whenever a question or a handoff comes or goes (the
    /// dashboard's live view, `GET /asks?wait`).
    pub fn watch_asks(&self) -> watch::Receiver<u64> {
        self.0.asks_changed.subscribe()
    }

    /// The questions waiting for the person, oldest first.
    pub fn questions(&self) -> Vec<Question> {
        self.asking().waiting.values().map(|w| w.question.clone()).collect()
    }

    /// The tabs the person has now.
    pub fn handoffs(&self) -> Vec<Handoff> {
        self.asking().handed.values().cloned().collect()
    }

    /// The person answers question `id`.
    pub fn answer(&self, id: u64, answer: Answer, by: AnsweredBy) -> Result<(), AskError> {
        let waiting = self.asking().waiting.remove(&id).ok_or(AskError::Unknown(id))?;
        let question = waiting.question;
        // A file is asked about each time: a yes for the site would give
        // the page any file for ten minutes.
        let answer = match (answer, question.kind) {
            (Answer::AllowSite, AskKind::Upload) => Answer::Allow,
            (answer, _) => answer,
        };
        if answer == Answer::AllowSite {
            let until = activity::now_millis() + SITE_ALLOWANCE.as_millis() as u64;
            let key = (question.grant.clone(), question.kind, question.site.clone());
            self.asking().allowed.insert(key, until);
        }
        let verdict = match answer {
            Answer::Allow | Answer::AllowSite => Verdict::Allowed,
            Answer::Deny => {
                Verdict::Refused(format!("Browser Relay: the person said no ({}): {}", by.name(), question.what))
            }
        };
        let said = match answer {
            Answer::Allow => "allowed",
            Answer::AllowSite => "allowed for this site for 10 minutes",
            Answer::Deny => "denied",
        };
        self.note_answer(&question, &format!("{said} in {}", by.name()), answer == Answer::Deny);
        self.close_question(id);
        let _ = waiting.reply.send(verdict);
        Ok(())
    }

    /// Asks the person whether `grant` may do `kind` on `site`: the answer
    /// (the future resolves at once when the person allowed it for a while).
    pub(crate) fn ask(
        &self,
        grant: &Grant,
        kind: AskKind,
        site: &str,
        what: String,
        tab: Option<&AskedTab>,
    ) -> impl Future<Output = Verdict> + Send + 'static {
        let now = activity::now_millis();
        let within = self.config().ask_within;
        let key = (grant.name.to_string(), kind, site.to_string());
        let pass = {
            let mut asking = self.asking();
            asking.allowed.retain(|_, until| *until > now);
            asking.allowed.contains_key(&key)
        };
        let (tx, rx) = oneshot::channel();
        // A page looping on a form, or an agent on a click, asks no more
        // than a few questions at once: the rest are no at once.
        let crowded = self.asking().waiting.values().filter(|w| w.question.grant == grant.name.as_str()).count()
            >= WAITING_PER_GRANT;
        if crowded && !pass {
            tracing::info!(grant = %grant.name, "too many questions wait for the person: refused without asking");
            let _ = tx.send(Verdict::Refused(format!(
                "Browser Relay: {WAITING_PER_GRANT} questions of this grant already wait for the person: {what}"
            )));
            return futures_util::future::Either::Left(
                async move { rx.await.unwrap_or(Verdict::Refused(String::new())) },
            );
        }
        let id = if pass {
            let _ = tx.send(Verdict::Allowed);
            None
        } else {
            let question = Question {
                id: 0,
                grant: grant.name.to_string(),
                kind,
                what,
                site: site.to_string(),
                target_id: tab.map(|t| t.target_id.clone()),
                url: tab.map(|t| t.url.clone()),
                asked_at: now,
                deadline: now + within.as_millis() as u64,
            };
            Some(self.put_question(question, tx, tab.map(|t| t.tab_id)))
        };
        // Whoever stops waiting (a client gone, a request dropped) takes
        // the question away with it: none waits for an answer no one reads.
        let unasked = Unasked { relay: self.clone(), id };
        futures_util::future::Either::Right(answer_within(unasked, rx, within))
    }

    /// `question` waits for the person, who hears of it (on the dashboard,
    /// in the activity record, in the extension on `tab_id`): its number.
    fn put_question(&self, question: Question, reply: oneshot::Sender<Verdict>, tab_id: Option<TabId>) -> u64 {
        let mut asking = self.asking();
        asking.next_id += 1;
        let id = asking.next_id;
        let question = Question { id, ..question };
        asking.waiting.insert(id, Waiting { question: question.clone(), reply });
        drop(asking);
        tracing::info!(id, grant = %question.grant, kind = question.kind.name(), "asking the person: {}", question.what);
        self.note_question(&question);
        self.asks_changed();
        self.tell_extension_ask(&question, tab_id);
        id
    }

    /// Whether `grant`'s tabs have been on `site` since its clients
    /// connected (a navigation there asks nothing under `new-site`).
    pub(crate) fn visited(&self, grant: &str, site: &str) -> bool {
        self.asking().visited.get(grant).is_some_and(|sites| sites.contains(site))
    }

    /// `grant`'s tabs are on `site` now.
    pub(crate) fn visit(&self, grant: &str, site: &str) {
        self.asking().visited.entry(grant.to_string()).or_default().insert(site.to_string());
    }

    /// `grant`'s last client left: what its tabs visited is forgotten.
    pub(crate) fn forget_visits(&self, grant: &str) {
        self.asking().visited.remove(grant);
    }

    /// Whether `client`'s input on `tab` goes on without asking: the person
    /// allowed its start a moment ago, on `site`. Each event that goes
    /// renews it for [`INPUT_RUN`], up to [`INPUT_RUN_MAX`] after the yes;
    /// another site, or a pause, asks again.
    pub(crate) fn input_runs(&self, client: u64, tab: TabId, site: &str) -> bool {
        let now = std::time::Instant::now();
        let mut asking = self.asking();
        asking.input_runs.retain(|_, run| run.until > now && run.ends > now);
        match asking.input_runs.get_mut(&(client, tab)) {
            Some(run) if run.site == site => {
                run.until = (now + INPUT_RUN).min(run.ends);
                true
            }
            _ => false,
        }
    }

    /// The person allowed `client`'s input on `tab` (on `site`): the rest
    /// of it goes, for a while.
    pub(crate) fn start_input_run(&self, client: u64, tab: TabId, site: &str) {
        let now = std::time::Instant::now();
        let run = InputRun { until: now + INPUT_RUN, ends: now + INPUT_RUN_MAX, site: site.to_string() };
        self.asking().input_runs.insert((client, tab), run);
    }

    fn tell_extension_ask(&self, question: &Question, tab_id: Option<TabId>) {
        let Some(link) = self.link().filter(|l| l.hello.protocol_version >= shared_protocol::ASKS_SINCE) else {
            return;
        };
        let Some(tab_id) = tab_id else { return };
        let title = format!("{} asks you", question.grant);
        let within = Duration::from_millis(question.deadline.saturating_sub(question.asked_at));
        let message = format!("{} (no answer within {} is a no)", question.what, said_as(within));
        let notice = RelayMessage::Ask { id: question.id, grant: question.grant.clone(), tab_id, title, message };
        let _ = link.send_now(encode(&notice));
    }

    /// `target` is announced again (the extension's link dropped and came
    /// back; its worker may have restarted and forgotten): the questions
    /// about it still waiting and its handoff are shown again (called
    /// under the registry lock).
    pub(crate) fn reshow_asks(&self, target: &mut crate::targets::Target) {
        let (questions, handoff) = {
            let asking = self.asking();
            let questions: Vec<Question> = asking
                .waiting
                .values()
                .filter(|w| w.question.target_id.as_deref() == Some(&*target.target_id))
                .map(|w| w.question.clone())
                .collect();
            (questions, asking.handed.get(&target.tab_id).cloned())
        };
        for question in questions {
            self.tell_extension_ask(&question, Some(target.tab_id));
        }
        if let Some(handoff) = handoff {
            target.handed_over = true;
            if let Some(link) = self.link().filter(|l| l.hello.protocol_version >= shared_protocol::ASKS_SINCE) {
                let notice =
                    RelayMessage::Handoff { tab_id: target.tab_id, grant: handoff.grant, reason: handoff.reason };
                let _ = link.send_now(encode(&notice));
            }
        }
    }

    fn close_question(&self, id: u64) {
        self.asks_changed();
        if let Some(link) = self.link().filter(|l| l.hello.protocol_version >= shared_protocol::ASKS_SINCE) {
            let _ = link.send_now(encode(&RelayMessage::AskClosed { id }));
        }
    }

    /// The words a grant's client is refused with on a tab the person has.
    pub(crate) fn handed_refusal(&self, tab: TabId) -> String {
        let asking = self.asking();
        let (grant, reason) =
            asking.handed.get(&tab).map(|h| (h.grant.as_str(), h.reason.as_str())).unwrap_or(("an agent", "-"));
        format!(
            "Browser Relay: the person has this tab ({grant} handed it over: {reason}); it comes back when they say Done"
        )
    }

    /// Hands `target_id` (a tab of `grant`'s, or any shared tab for the
    /// person's own key) to the person, with `reason`, until they say Done
    /// or `within` passes.
    pub async fn hand_over(
        &self,
        target_id: &str,
        grant: Option<&Arc<Grant>>,
        reason: &str,
        within: Duration,
    ) -> Result<HandoffEnd, AskError> {
        let reason: String = reason.chars().filter(|c| !c.is_control()).take(200).collect();
        let (tab, name, mut over) = {
            let mut registry = self.registry();
            let target = registry.by_target_id_mut(target_id).ok_or_else(|| AskError::NoSuchTab(target_id.into()))?;
            let name = match (grant, target.grant.as_deref()) {
                (Some(grant), owner) if owner != Some(grant.name.as_str()) => return Err(AskError::NotTheGrants),
                (Some(grant), _) => grant.name.to_string(),
                (None, owner) => owner.unwrap_or("an agent").to_string(),
            };
            let mut asking = self.asking();
            if let Some(existing) = asking.handed.get(&target.tab_id) {
                return Err(AskError::AlreadyHandedOver(existing.grant.clone()));
            }
            let (sender, receiver) = watch::channel(None);
            let handoff = Handoff {
                grant: name.clone(),
                reason: reason.clone(),
                target_id: target_id.to_string(),
                since: activity::now_millis(),
                over: sender,
            };
            asking.handed.insert(target.tab_id, handoff);
            target.handed_over = true;
            (target.tab_id, name, receiver)
        };
        tracing::info!(tab, grant = %name, "handing a tab over to the person: {reason}");
        self.asks_changed();
        self.note_handoff(&name, target_id, &format!("handed the tab to the person: {reason}"));
        if let Some(link) = self.link().filter(|l| l.hello.protocol_version >= shared_protocol::ASKS_SINCE) {
            let notice = RelayMessage::Handoff { tab_id: tab, grant: name.clone(), reason: reason.clone() };
            let _ = link.send_now(encode(&notice));
        } else if let Err(e) = self.activate_tab(tab).await {
            tracing::debug!(tab, "could not bring the handed-over tab to the front: {e}");
        }
        // An agent that stops waiting (its request dropped) gives the tab
        // back: no handoff outlives whoever waits for it.
        let mut abandoned = Abandoned { relay: self.clone(), tab: Some(tab) };
        let ended = tokio::time::timeout(within, over.wait_for(Option::is_some)).await;
        abandoned.tab = None;
        match ended {
            Ok(Ok(end)) => Ok(end.unwrap_or(HandoffEnd::TabClosed)),
            // The relay is stopping.
            Ok(Err(_)) => Ok(HandoffEnd::TabClosed),
            Err(_) => {
                self.end_handoff(tab, HandoffEnd::TimedOut, "its time ran out");
                Ok(HandoffEnd::TimedOut)
            }
        }
    }

    /// The person says Done on the handed-over tab `target_id`.
    pub fn handoff_done(&self, target_id: &str, by: AnsweredBy) -> Result<(), AskError> {
        let tab = self.tab_of_target(target_id).ok_or_else(|| AskError::NotHandedOver(target_id.into()))?;
        if !self.asking().handed.contains_key(&tab) {
            return Err(AskError::NotHandedOver(target_id.into()));
        }
        self.end_handoff(tab, HandoffEnd::Done, &format!("Done, in {}", by.name()));
        Ok(())
    }

    /// The person says Done in the extension (`handoff.done`).
    pub(crate) fn handoff_done_in_extension(&self, tab: TabId) {
        self.end_handoff(tab, HandoffEnd::Done, "Done, in the browser");
    }

    fn end_handoff(&self, tab: TabId, end: HandoffEnd, how: &str) {
        if let Some(target) = self.registry().by_tab_mut(tab) {
            target.handed_over = false;
        }
        let Some(handoff) = self.asking().handed.remove(&tab) else { return };
        tracing::info!(tab, grant = %handoff.grant, "the person gives the tab back: {how}");
        self.note_handoff(&handoff.grant, &handoff.target_id, &format!("the person gave the tab back ({how})"));
        let _ = handoff.over.send(Some(end));
        self.asks_changed();
        if let Some(link) = self.link().filter(|l| l.hello.protocol_version >= shared_protocol::ASKS_SINCE) {
            let _ = link.send_now(encode(&RelayMessage::HandoffEnd { tab_id: tab }));
        }
    }

    /// A tab went (called without the registry lock): its handoff is
    /// over, and its questions are answered no.
    pub(crate) fn forget_asks_of(&self, tab: TabId, target_id: &str) {
        let handed = self.asking().handed.remove(&tab);
        if let Some(handoff) = handed {
            let _ = handoff.over.send(Some(HandoffEnd::TabClosed));
            self.asks_changed();
        }
        self.withdraw_questions(|q| q.target_id.as_deref() == Some(target_id), "the tab was closed");
        self.asking().input_runs.retain(|(_, t), _| *t != tab);
    }

    /// The questions `which` takes are withdrawn: answered no, because of
    /// `why` (recorded, and said to whoever caused them).
    pub(crate) fn withdraw_questions(&self, which: impl Fn(&Question) -> bool, why: &str) {
        let gone: Vec<Waiting> = {
            let mut asking = self.asking();
            let ids: Vec<u64> = asking.waiting.values().filter(|w| which(&w.question)).map(|w| w.question.id).collect();
            ids.iter().filter_map(|id| asking.waiting.remove(id)).collect()
        };
        for waiting in gone {
            self.note_answer(&waiting.question, &format!("{why}: denied"), true);
            self.close_question(waiting.question.id);
            let _ = waiting.reply.send(Verdict::Refused(format!("Browser Relay: {why}")));
        }
    }

    fn note_question(&self, question: &Question) {
        let mut entry = Entry::now(Source::Relay, "Browser Relay", Kind::Question, format!("asked: {}", question.what));
        entry.tab = question.target_id.clone();
        entry.url = question.url.clone();
        entry.grant = Some(question.grant.clone());
        self.note(entry);
    }

    fn note_answer(&self, question: &Question, said: &str, refused: bool) {
        let mut entry =
            Entry::now(Source::Relay, "Browser Relay", Kind::Question, format!("{said}: {}", question.what));
        entry.tab = question.target_id.clone();
        entry.grant = Some(question.grant.clone());
        entry.failed = refused;
        self.note(entry);
    }

    fn note_handoff(&self, grant: &str, target_id: &str, summary: &str) {
        let mut entry = Entry::now(Source::Relay, "Browser Relay", Kind::Tab, summary.to_string());
        entry.tab = Some(target_id.to_string());
        entry.grant = Some(grant.to_string());
        self.note(entry);
    }
}
