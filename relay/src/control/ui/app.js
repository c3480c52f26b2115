// The Browser Relay dashboard. Everything on the page is built with
// textContent (titles, URLs and user agents come from pages and clients,
// never markup); it polls only while the page is visible.
"use strict";

// The session: the login's answer hands this page its token once (a meta
// tag that no later answer carries: the shell at /ui is the same for
// everyone). It is kept in this tab's sessionStorage, so a reload keeps
// it while no other tab, origin or program has it, and sent in a header
// on every request to the API; the browser sends nothing by itself that
// opens the dashboard (no cookie).
const SESSION_HEADER = "x-browser-relay-session";
const SESSION_KEY = "browserRelaySession";
const session = (() => {
  const given = document.querySelector('meta[name="session"]');
  if (given?.content) sessionStorage.setItem(SESSION_KEY, given.content);
  given?.remove();
  // The login link's spent code leaves the address bar (and a reload asks for /ui).
  if (location.pathname !== "/ui") history.replaceState(null, "", "/ui");
  return sessionStorage.getItem(SESSION_KEY);
})();
// Set when this tab's session ends (or it had none): the polls stop.
let signedOutAlready = false;
const timers = [];
const OVERVIEW_EVERY = 1500;
const ACTIVITY_EVERY = 2000;
// The activity table's newest entries; after the first answer each poll
// asks only for what is new since a little before the newest it has (an
// evaluation's count grows for 10 s after its time), so a poll never
// reads the day's record back.
const ACTIVITY_SHOWN = 200;
const ACTIVITY_AGAIN = 30000;
const VIEW_EVERY = 700;
// After a failed long poll of the questions (serve restarting, logged
// out): how long before asking again.
const ASKS_RETRY = 2000;
const COUNTDOWN_EVERY = 1000;

let watching = null; // {profile, targetId, title}
let activityShown = null; // newest first
let viewUrl = null;
// One request of each kind at a time: a slow answer (a tab busy with an
// agent's action) does not pile up more behind it.
const busy = { overview: false, activity: false, frame: false };

function once(kind, work) {
  return async () => {
    if (busy[kind] || document.hidden) return;
    busy[kind] = true;
    try { await work(); } finally { busy[kind] = false; }
  };
}
const clientNames = new Map();

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else if (key === "onclick") node.addEventListener("click", value);
    else node[key] = value;
  }
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  return node;
}

// Every request to the API: the session in its header, no cookie. A 401
// (no session, logged out, a new serve) ends this page's session.
async function call(path, options = {}) {
  if (signedOutAlready) throw new Error("not logged in");
  const headers = { ...options.headers, [SESSION_HEADER]: session };
  const response = await fetch(path, { ...options, headers, credentials: "omit" });
  if (response.status === 401) {
    signedOut("This tab's login has ended (logged out, or serve restarted).");
    throw new Error("not logged in");
  }
  return response;
}

async function getJson(path) {
  const response = await call(path);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error?.message || response.statusText);
  return body;
}

async function post(path, body) {
  const response = await call(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(answer.error?.message || response.statusText);
  return answer;
}

// No session in this tab: say how to log in, and ask the API nothing more.
function signedOut(why) {
  signedOutAlready = true;
  sessionStorage.removeItem(SESSION_KEY);
  for (const timer of timers) clearInterval(timer);
  for (const node of document.body.children) node.hidden = node.id !== "signed-out";
  document.getElementById("signed-out-why").textContent = why;
  document.title = "Browser Relay";
}

function status(text) {
  document.getElementById("status").textContent = text;
}

function since(ms) {
  const seconds = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

function act(button, path, body, label) {
  button.disabled = true;
  post(path, body)
    .then(() => { status(label); refresh(); })
    .catch((error) => { status(`${label} failed: ${error.message}`); button.disabled = false; });
}

function watchButton(profile, tab) {
  const selected = watching && watching.targetId === tab.targetId;
  return el("button", {
    type: "button",
    "data-watch": tab.targetId,
    textContent: selected ? "Watching" : "Watch",
    disabled: selected,
    onclick: () => watch(profile, tab.targetId, tab.title || tab.url),
  });
}

// A tab's icon as Chrome shows it (the relay passes web and inline images
// only), or an empty box of its size so the titles line up; one that fails
// to load leaves the box.
function tabIcon(url) {
  if (!url) return el("span", { class: "favicon" });
  const icon = el("img", { class: "favicon", src: url, alt: "", referrerPolicy: "no-referrer", decoding: "async" });
  icon.addEventListener("error", () => icon.replaceWith(el("span", { class: "favicon" })));
  return icon;
}

function watch(profile, targetId, title) {
  watching = { profile, targetId, title };
  refresh();
  frame();
}

function renderProfiles(overview) {
  const root = document.getElementById("profiles");
  const shownTabs = new Set();
  root.replaceChildren(...overview.profiles.map((profile) => {
    const shared = profile.driver === "extension";
    const tabs = Array.isArray(profile.tabList) ? profile.tabList : [];
    const state = shared
      ? (overview.extension.connected ? `extension connected · ${tabs.length} shared tab(s)` : "extension not connected")
      : profile.state;
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = profile.color; // CSSOM: allowed by the page's CSP, unlike a style attribute
    const head = el("h3", {},
      swatch,
      profile.profile,
      el("span", { class: "muted" }, `${profile.driver} · ${state}`));
    if (!shared && profile.running) {
      head.append(el("button", {
        type: "button", class: "stop", "data-stop-profile": profile.profile, textContent: "Stop browser",
        onclick: (event) => act(event.target, "/ui/api/stop", { profile: profile.profile }, `stopped ${profile.profile}`),
      }));
    }
    const list = tabs.map((tab) => {
      shownTabs.add(tab.targetId);
      if (watching && watching.targetId === tab.targetId) watching.title = tab.title || tab.url;
      const row = el("div", { class: "tab", "data-tab": tab.targetId },
        tabIcon(tab.favIconUrl),
        el("span", { class: "title", title: tab.title || "" }, tab.title || "(untitled)"),
        el("span", { class: "url", title: tab.url }, tab.url));
      if (shared) {
        const clients = (tab.clients || []).map((id) => clientNames.get(id) || `#${id}`);
        const badge = tab.grant
          ? el("span", { class: "shared grant", title: `lent to the grant ${tab.grant}`, "data-grant-of": tab.targetId }, tab.grant)
          : el("span", { class: "shared", title: "shared by you with Browser Relay" }, "shared");
        if (tab.grant && grantColors.has(tab.grant)) badge.style.background = grantColors.get(tab.grant);
        row.prepend(badge);
        if (clients.length) row.append(el("span", { class: "muted" }, clients.join(", ")));
      }
      row.append(watchButton(shared ? null : profile.profile, tab));
      if (shared) {
        row.append(el("button", {
          type: "button", class: "stop", "data-unshare": tab.targetId, textContent: "Stop sharing",
          onclick: (event) => act(event.target, "/ui/api/unshare", { targetId: tab.targetId }, "stopped sharing the tab"),
        }));
      }
      return row;
    });
    if (profile.tabList && profile.tabList.error) list.push(el("p", { class: "muted" }, profile.tabList.error));
    if (!list.length) list.push(el("p", { class: "muted" }, shared ? "No tab is shared." : "No tabs."));
    return el("div", { class: "profile", "data-profile": profile.profile }, head, ...list);
  }));
  if (watching && !shownTabs.has(watching.targetId)) stopWatching("the tab is gone");
  else if (watching) document.getElementById("view-title").textContent = watching.title;
}

const grantColors = new Map();

function renderGrants(list) {
  grantColors.clear();
  const grants = list.grants || [];
  for (const grant of grants) grantColors.set(grant.name, grant.colorHex);
  const body = document.querySelector("#grants tbody");
  body.replaceChildren(...grants.map((grant) => {
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = grant.colorHex;
    const sites = grant.sites.length ? grant.sites.join(", ") : "any site";
    const abilities = grant.evaluate ? "" : " · no evaluate";
    return el("tr", { "data-grant": grant.name },
      el("td", {}, swatch, grant.name),
      el("td", { class: "url", title: sites }, sites + abilities),
      el("td", { class: grant.expires === "expired" ? "warning" : "" }, grant.expires),
      el("td", { title: grant.tabs.map((t) => t.url).join("\n") }, grant.tabs.length),
      el("td", { title: grant.clients.map((c) => c.userAgent).join("\n") }, grant.clients.map((c) => `${c.name} #${c.id}`).join(", ") || "none"),
      el("td", {}, el("button", {
        type: "button", class: "stop", "data-revoke": grant.name, textContent: "Revoke",
        onclick: (event) => act(event.target, "/ui/api/revoke", { name: grant.name }, `revoked ${grant.name}`),
      })));
  }));
  document.getElementById("no-grants").hidden = grants.length > 0;
  const problem = document.getElementById("grants-problem");
  problem.hidden = !list.problem;
  problem.textContent = list.problem || "";
}

function renderClients(clients) {
  clientNames.clear();
  for (const client of clients) clientNames.set(client.id, client.name);
  const body = document.querySelector("#clients tbody");
  body.replaceChildren(...clients.map((client) => el("tr", { "data-client": client.id },
    el("td", {}, client.id),
    el("td", { title: client.userAgent }, client.name),
    el("td", {}, client.grant || "you"),
    el("td", {}, client.profile ? `${client.profile} (whole browser)` : `${client.tabs.length} shared tab(s)`),
    el("td", {}, since(client.since)),
    el("td", {}, client.commands),
    el("td", {}, el("button", {
      type: "button", class: "stop", "data-disconnect": client.id, textContent: "Disconnect",
      onclick: (event) => act(event.target, "/ui/api/disconnect", { clientId: client.id }, `disconnected ${client.name}`),
    })))));
  document.getElementById("no-clients").hidden = clients.length > 0;
}

// A cell shown on one line, cut with an ellipsis (a long URL would make a
// row five lines tall); the whole text on hover.
function cut(cell, whole = cell.textContent) {
  cell.replaceChildren(el("span", { class: "cut", title: whole }, cell.textContent));
  return cell;
}

// "http://host/path" as "host/path": the part that tells pages apart.
function withoutScheme(url) {
  return url && url.replace(/^https?:\/\//, "");
}

function renderActivity(entries, droppedToday) {
  const dropped = document.getElementById("activity-dropped");
  dropped.hidden = !droppedToday;
  dropped.textContent = droppedToday
    ? `Today's record was full: its ${droppedToday} oldest entries were dropped to keep the newest.`
    : "";
  const body = document.querySelector("#activity tbody");
  body.replaceChildren(...entries.map((entry) => el("tr", { "data-kind": entry.kind },
    el("td", { class: "time" }, new Date(entry.at).toLocaleTimeString()),
    cut(el("td", { class: "who" }, (entry.source === "agent" ? `agent (${entry.client})` : entry.clientId ? `${entry.client} #${entry.clientId}` : entry.client)
      + (entry.grant ? ` [grant ${entry.grant}]` : ""))),
    cut(el("td", { class: "url" }, [entry.profile, withoutScheme(entry.url) || entry.tab].filter(Boolean).join(" · ")), entry.url),
    el("td", {}, `${entry.summary}${entry.count > 1 ? ` ×${entry.count}` : ""}${entry.failed ? " (failed)" : ""}`))));
}

const refresh = once("overview", async () => {
  try {
    const overview = await getJson("/ui/api/overview");
    renderGrants(overview.grants);
    renderClients(overview.clients);
    renderProfiles(overview);
    status(`updated ${new Date().toLocaleTimeString()}`);
  } catch (error) {
    status(error.message);
  }
});

const refreshActivity = once("activity", async () => {
  try {
    const newest = activityShown?.[0];
    const since = newest ? newest.at - ACTIVITY_AGAIN : null;
    const query = new URLSearchParams({ limit: ACTIVITY_SHOWN });
    if (since !== null) query.set("since", since);
    const answer = await getJson(`/ui/api/activity?${query}`);
    // A full answer may leave out entries since `since`: it is the newest.
    activityShown = since === null || answer.entries.length >= ACTIVITY_SHOWN
      ? answer.entries
      : [...answer.entries, ...activityShown.filter((entry) => entry.at < since)].slice(0, ACTIVITY_SHOWN);
    renderActivity(activityShown, answer.droppedToday);
    if (!answer.recording) {
      document.querySelector("#activity tbody").replaceChildren(el("tr", {}, el("td", { colSpan: 4, class: "muted" },
        "The activity record is off (recordActivity = false in config.toml).")));
    }
  } catch (error) {
    status(error.message);
  }
});

function stopWatching(why) {
  watching = null;
  const view = document.getElementById("view");
  view.classList.remove("on");
  document.getElementById("view-title").textContent = "";
  document.getElementById("view-note").textContent = why;
}

const frame = once("frame", async () => {
  if (!watching) return;
  const query = new URLSearchParams({ targetId: watching.targetId });
  if (watching.profile) query.set("profile", watching.profile);
  try {
    const response = await call(`/ui/api/view?${query}`);
    if (!response.ok) throw new Error((await response.json()).error?.message || response.statusText);
    const blob = await response.blob();
    const view = document.getElementById("view");
    const previous = viewUrl;
    viewUrl = URL.createObjectURL(blob);
    view.src = viewUrl;
    view.classList.add("on");
    if (previous) URL.revokeObjectURL(previous);
    document.getElementById("view-title").textContent = watching.title;
    document.getElementById("view-note").textContent = `frame of ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    document.getElementById("view-note").textContent = error.message;
  }
});

// The questions and the handed-over tabs. The relay's deadlines are by
// its clock: the countdowns correct for this page's (`now` in each answer).
let relayClockAhead = 0;

function grantBadge(grant, colorHex) {
  const badge = el("span", { class: "shared grant", "data-ask-grant": grant }, grant);
  if (colorHex) badge.style.background = colorHex;
  return badge;
}

function askedTab(title, url) {
  return el("div", { class: "tab" },
    el("span", { class: "title" }, title || "(a tab)"),
    el("span", { class: "url" }, url || ""));
}

function timeLeft(deadline) {
  const seconds = Math.max(0, Math.ceil((deadline - relayClockAhead - Date.now()) / 1000));
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")} left`;
}

function answerQuestion(row, id, answer) {
  const buttons = row.querySelectorAll("button");
  for (const button of buttons) button.disabled = true;
  post("/ui/api/answer", { id, answer })
    .then(() => status(`answered: ${answer}`))
    .catch((error) => {
      status(`the answer failed: ${error.message}`);
      for (const button of buttons) button.disabled = false;
    });
}

const ANSWERS = [["allow", "Allow"], ["allow-site", "Allow on this site for 10 min"], ["deny", "Deny"]];

function renderAsks(asks) {
  relayClockAhead = asks.now - Date.now();
  const questions = asks.questions.map((question) => {
    // "shop wants to submit a form to …": the grant's name is its badge.
    const what = question.what.startsWith(`${question.grant} `)
      ? question.what.slice(question.grant.length)
      : ` ${question.what}`;
    const row = el("div", { class: "ask", "data-question": question.id },
      el("div", { class: "what" }, grantBadge(question.grant, question.colorHex), what),
      askedTab(question.title, question.url));
    const countdown = el("span", { class: "countdown", "data-deadline": question.deadline }, timeLeft(question.deadline));
    row.append(el("div", { class: "answers" }, countdown, ...ANSWERS.map(([answer, label]) => el("button", {
      type: "button", class: answer === "deny" ? "stop" : "", "data-answer": answer, textContent: label,
      onclick: () => answerQuestion(row, question.id, answer),
    }))));
    return row;
  });
  const handoffs = asks.handoffs.map((handoff) => el("div", { class: "ask", "data-handoff": handoff.targetId },
    el("div", { class: "what" }, grantBadge(handoff.grant, handoff.colorHex), ` needs you: ${handoff.reason}`),
    askedTab(handoff.title, handoff.url),
    el("div", { class: "answers" },
      el("span", { class: "muted" }, `since ${new Date(handoff.since - relayClockAhead).toLocaleTimeString()}`),
      el("button", {
        type: "button", "data-show": handoff.targetId, textContent: "Show the tab",
        onclick: () => {
          watch(null, handoff.targetId, handoff.title || handoff.url);
          document.getElementById("view-section").scrollIntoView({ block: "nearest" });
        },
      }),
      el("button", {
        type: "button", "data-done": handoff.targetId, textContent: "Done — give it back",
        onclick: (event) => act(event.target, "/ui/api/handoff-done", { targetId: handoff.targetId }, `gave ${handoff.grant} its tab back`),
      }))));
  document.getElementById("questions").replaceChildren(...questions);
  document.getElementById("handoffs").replaceChildren(...handoffs);
  const waiting = questions.length + handoffs.length;
  document.getElementById("asks-section").hidden = waiting === 0;
  document.title = waiting ? `(${waiting}) Browser Relay` : "Browser Relay";
}

function countDown() {
  for (const countdown of document.querySelectorAll("[data-deadline]")) {
    countdown.textContent = timeLeft(Number(countdown.dataset.deadline));
  }
}

// A long poll: the relay answers when a question or a handoff comes or
// goes (or after 25 s with what there is), and the page asks again at
// once, so a question shows the moment it is asked. It goes on while the
// page is hidden (a waiting request costs nothing) so the tab's title
// counts what waits.
async function followAsks() {
  let version = null;
  while (!signedOutAlready) {
    try {
      const asks = await getJson(version === null ? "/ui/api/asks" : `/ui/api/asks?wait=${version}`);
      // Unchanged after the wait: the rows stay, and a button under the
      // person's pointer with them.
      if (asks.version !== version) renderAsks(asks);
      version = asks.version;
    } catch {
      // A new serve counts its versions anew: start from a fresh answer.
      // (The overview's poll says what is wrong.)
      version = null;
      await new Promise((done) => setTimeout(done, ASKS_RETRY));
    }
  }
}

document.getElementById("logout").addEventListener("click", () => {
  post("/ui/api/logout", {}).finally(() => signedOut("Logged out."));
});
if (session) {
  document.addEventListener("visibilitychange", () => { refresh(); refreshActivity(); });
  refresh();
  refreshActivity();
  timers.push(setInterval(refresh, OVERVIEW_EVERY));
  timers.push(setInterval(refreshActivity, ACTIVITY_EVERY));
  timers.push(setInterval(frame, VIEW_EVERY));
  timers.push(setInterval(countDown, COUNTDOWN_EVERY));
  followAsks();
} else {
  signedOut("This tab is not logged in to the dashboard.");
}
