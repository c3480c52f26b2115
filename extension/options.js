// Options page: relay port + pairing token in chrome.storage.local (the WASM
// service worker reads `relayPort` / `relayToken` and reconnects when they change),
// one-step pairing from a `#port=…&code=…` link (a one-time code the worker
// redeems with the relay for the token), a live status line, the shared
// tabs (whose each is, and the clients the relay says hold each) with "stop
// sharing", and the grants the relay announced with their cookie rules.
'use strict';

const DEFAULT_PORT = 18792;
const $ = (id) => document.getElementById(id);
const form = $('form');
const portInput = $('port');
const tokenInput = $('token');
const toggle = $('toggle');
const message = $('message');

function say(text, kind) {
  message.textContent = text;
  message.className = kind || '';
}

// The port, or throws an Error whose message is shown to the user.
function validPort(portText) {
  const portStr = String(portText).trim();
  const port = Number(portStr);
  if (!/^\d+$/.test(portStr) || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new Error(`Relay port must be a whole number from 1 to 65535 (got "${portStr}").`);
  }
  return port;
}

// Returns {port, token} or throws an Error whose message is shown to the user.
function validate(portText, tokenText) {
  const port = validPort(portText);
  const token = String(tokenText).trim();
  if (token.length === 0) {
    throw new Error('Pairing token is missing: run `browser-relay token` and paste the 64-character value.');
  }
  if (!/^[0-9a-fA-F]+$/.test(token)) {
    throw new Error('Pairing token must contain only hexadecimal characters (0-9, a-f).');
  }
  if (token.length !== 64) {
    throw new Error(`Pairing token must be exactly 64 hexadecimal characters (got ${token.length}).`);
  }
  return { port, token: token.toLowerCase() };
}

async function save(portText, tokenText) {
  const { port, token } = validate(portText, tokenText);
  // A pairing link's code still waiting is replaced by what the user typed.
  await chrome.storage.local.set({ relayPort: port, relayToken: token, pairingCode: null, pairingPort: null });
  portInput.value = String(port);
  tokenInput.value = token;
  return port;
}

async function load() {
  const { relayPort, relayToken } = await chrome.storage.local.get(['relayPort', 'relayToken']);
  portInput.value = String(relayPort || DEFAULT_PORT);
  tokenInput.value = relayToken || '';
}

/** Which relay a pairing is: its port and the end of its token (what
 * `browser-relay pair` prints too), never the whole secret; a link's code
 * names no token until it is redeemed. */
function describe({ port, token, code }) {
  if (token) return `the relay on port ${port} (token …${token.slice(-6)})`;
  return `the relay on port ${port} that printed this link (code …${code.slice(-6)})`;
}

/** Resolves true once the worker is done with the code (it clears it),
 * false after `ms`. */
function codeCleared(ms) {
  return new Promise((resolve) => {
    const done = (cleared) => {
      chrome.storage.onChanged.removeListener(listen);
      clearTimeout(timer);
      resolve(cleared);
    };
    const listen = (changes, area) => {
      const code = changes.pairingCode;
      if (area === 'local' && code && !code.newValue) done(true);
    };
    const timer = setTimeout(() => done(false), ms);
    chrome.storage.onChanged.addListener(listen);
  });
}

// A link's one-time code: stored for the worker, which redeems it with the
// relay at once (the proof is made with the code; the token comes sealed for
// it); the page reports the outcome.
async function pairWithCode(portText, codeText, current) {
  const port = validPort(portText);
  const code = String(codeText).trim().toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(code)) throw new Error('the code in the link is not 64 hexadecimal characters: copy the whole link');
  if (await keepsCurrent(current, { port, code })) return;
  const outcome = codeCleared(15000);
  // The relay's port and token change only once the code is redeemed: a
  // code refused leaves the pairing from before as it was.
  await chrome.storage.local.set({ pairingPort: port, pairingCode: code });
  say(`Pairing with the relay on port ${port}…`, 'ok');
  const cleared = await outcome;
  // The worker says what went wrong last, until a relay welcomed it. A
  // token the same as before (the link was the same relay's) is in no
  // change storage reported: it is read back.
  const [{ relayToken, pairingCode }, status] = await Promise.all([
    chrome.storage.local.get(['relayToken', 'pairingCode']),
    extensionStatus(),
  ]);
  if (cleared && !status.error && relayToken) {
    portInput.value = String(port);
    tokenInput.value = relayToken;
    say(`Paired with ${describe({ port, token: relayToken })}.`, 'ok');
  } else {
    // Not left waiting: until it is cleared, every connection would go to
    // the link's port.
    if (pairingCode === code) await chrome.storage.local.set({ pairingCode: null, pairingPort: null });
    const why = status.error || status.detail || 'the relay did not answer';
    say(
      `Not paired: ${why}. Run \`browser-relay pair\` again and open the new link (or, if a double-click ` +
        'started serve, open the newest link in its window: it shows a new one before each expires, until an ' +
        'extension connects).',
      'error',
    );
  }
  return port;
}

/** Whether the user keeps `current` rather than let `offered` replace it
 * (asked only when there is a pairing); says so when they do. */
async function keepsCurrent(current, offered) {
  if (!current || (await askToReplace(current, offered))) return false;
  say(`Pairing link not used: the extension stays paired with ${describe(current)}.`, 'ok');
  return true;
}

/** Asks whether `offered` may replace `current`: resolves true or false. */
function askToReplace(current, offered) {
  const panel = $('replace');
  $('replace-what').textContent =
    `This pairing link would pair the extension with ${describe(offered)}, replacing its pairing ` +
    `with ${describe(current)}. Replace it only if you opened the link yourself, from ` +
    '`browser-relay pair` on this computer.';
  panel.hidden = false;
  return new Promise((resolve) => {
    const answer = (yes) => () => {
      panel.hidden = true;
      resolve(yes);
    };
    $('replace-yes').onclick = answer(true);
    $('replace-no').onclick = answer(false);
  });
}

// One-step pairing: `options.html#port=18792&code=<64 hex>` (printed by
// `browser-relay pair`). A first pairing is saved at once; one that would
// replace another pairing is asked about first (any program on the computer
// can open this page with a link of its own).
async function pairFromHash() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  if (!params.has('port') && !params.has('token') && !params.has('code')) return;
  // The code does not linger in the address bar or in the page's history
  // entry (Chrome's own history keeps the address as it was opened: what
  // `browser-relay pair` puts there is a one-time code).
  history.replaceState(null, '', location.pathname + location.search);
  if (params.has('token')) {
    // A link that holds the secret itself (as links did before pairing
    // codes): Chrome has just put it in its history, which the address bar
    // suggests from and history sync sends away. Pairing with it would keep
    // a secret that is no longer one.
    say(
      'Pairing link not used: it holds the relay\'s secret itself, and Chrome has now kept it in its history. ' +
        'Stop `browser-relay serve`, run `browser-relay rotate` (a new secret: it prints a new pairing link ' +
        'with a one-time code), start serve again and open that link.',
      'error',
    );
    return;
  }
  const { relayPort, relayToken } = await chrome.storage.local.get(['relayPort', 'relayToken']);
  const current = relayToken ? { port: relayPort || DEFAULT_PORT, token: relayToken } : null;
  try {
    return await pairWithCode(params.get('port') ?? String(DEFAULT_PORT), params.get('code') ?? '', current);
  } catch (e) {
    say(`Pairing link not used: ${e.message}`, 'error');
  }
}

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  try {
    const port = await save(portInput.value, tokenInput.value);
    say(`Saved. The extension will connect to the relay on port ${port}.`, 'ok');
  } catch (e) {
    say(e.message, 'error');
  }
  refresh();
});

toggle.addEventListener('click', () => {
  const hidden = tokenInput.type === 'password';
  tokenInput.type = hidden ? 'text' : 'password';
  toggle.textContent = hidden ? 'Hide' : 'Show';
});

// --- status ---------------------------------------------------------------

function extensionStatus() {
  return new Promise((resolve) => {
    try {
      chrome.runtime.sendMessage({ type: 'status' }, (response) => {
        if (chrome.runtime.lastError || !response) {
          const why = chrome.runtime.lastError ? chrome.runtime.lastError.message : 'no answer';
          resolve({ state: 'unknown', detail: `the service worker did not answer (${why})`, attachedTabs: 0 });
        } else {
          resolve(response);
        }
      });
    } catch (e) {
      resolve({ state: 'unknown', detail: String(e && e.message ? e.message : e), attachedTabs: 0 });
    }
  });
}

/** The dashboard's address from a status answer, if it is one: a
 * loopback `http://…/ui` (anything else is not linked). */
function dashboardUrl(text) {
  try {
    const url = new URL(text);
    const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
    return url.protocol === 'http:' && loopback && url.pathname === '/ui' && !url.search ? url.href : null;
  } catch {
    return null;
  }
}

/** The relay's state as a line of text, and its dashboard's address. */
async function relayStatus(port) {
  const notReachable = `relay not reachable on port ${port}: run \`browser-relay serve\``;
  let response;
  try {
    response = await fetch(`http://127.0.0.1:${port}/extension/status`, {
      cache: 'no-store',
      signal: AbortSignal.timeout(1500),
    });
  } catch {
    return { text: notReachable };
  }
  if (!response.ok) {
    const text = (await response.text().catch(() => '')).trim();
    return { text: `relay on port ${port} refused the request (HTTP ${response.status})${text ? `: ${text}` : ''}` };
  }
  try {
    const s = await response.json();
    const dashboard = typeof s.dashboard === 'string' ? dashboardUrl(s.dashboard) : null;
    // How many grants it honours (a relay older than grants says nothing).
    const grants = Number.isInteger(s.grants) ? `; ${s.grants} grant(s)` : '';
    if (!s.connected) return { text: `relay answers on port ${port}, but this browser is not connected to it yet${grants}`, dashboard };
    const who = [s.browser, s.extensionVersion && `extension ${s.extensionVersion}`].filter(Boolean).join(', ');
    return { text: `relay answers on port ${port}; connected${who ? ` (${who})` : ''}; ${s.attachedTabs ?? 0} shared tab(s)${grants}`, dashboard };
  } catch {
    return { text: `something answers on port ${port}, but it is not Browser Relay` };
  }
}

// --- shared tabs --------------------------------------------------------------

function stopSharing(message) {
  try {
    chrome.runtime.sendMessage(message, () => void chrome.runtime.lastError);
  } catch (e) {
    say(`Could not reach the service worker: ${e && e.message ? e.message : e}`, 'error');
  }
  setTimeout(refresh, 300);
}

function cell(row, className) {
  const td = document.createElement('td');
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

// Rows are built with textContent only: titles and URLs come from web pages.
// They are rebuilt only when what they show changed, so that a refresh does
// not take the focus (or a half-done click) from a "Stop sharing" button.
let shownTabs = null;
function showTabs(tabs) {
  const shown = JSON.stringify(tabs);
  if (shown === shownTabs) return;
  shownTabs = shown;
  const rows = $('rows');
  rows.replaceChildren();
  for (const tab of tabs) {
    const row = document.createElement('tr');
    row.dataset.tabId = String(tab.tabId);
    const what = cell(row, 'tab');
    const title = document.createElement('div');
    title.textContent = tab.title || '(untitled)';
    const url = document.createElement('div');
    url.className = 'url';
    url.textContent = tab.url;
    what.append(title, url);
    if (!tab.inGroup) {
      const note = document.createElement('div');
      note.className = 'warn';
      note.textContent = tab.notInGroup ? `not in the group: ${tab.notInGroup}` : 'not in the group';
      what.append(note);
    }
    const owner = cell(row, 'owner');
    owner.textContent = tab.grant ? tab.grant : 'you';
    if (tab.needsYou) {
      // Handed to you by its grant (a login, a CAPTCHA): Done gives it back.
      const note = document.createElement('div');
      note.className = 'warn';
      note.textContent = `${tab.needsYou} (Done, in its notification or the toolbar button's menu, gives it back)`;
      owner.append(note);
    }
    const clients = cell(row, 'clients');
    clients.textContent = tab.clients && tab.clients.length
      ? tab.clients.map((c) => `${c.name} (#${c.id})`).join(', ')
      : 'none';
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'stop';
    button.textContent = 'Stop sharing';
    button.addEventListener('click', () => stopSharing({ type: 'stopSharing', tabId: tab.tabId }));
    cell(row).appendChild(button);
    rows.appendChild(row);
  }
  $('shared').hidden = tabs.length === 0;
  $('none').hidden = tabs.length !== 0;
  $('stop-all').hidden = tabs.length === 0;
}

$('stop-all').addEventListener('click', () => stopSharing({ type: 'stopSharingAll' }));

// --- grants -------------------------------------------------------------------

// Chrome's tab group colours (chrome.tabGroups.Color), as the tab strip shows them.
const GROUP_COLORS = {
  grey: '#5f6368', blue: '#1a73e8', red: '#d93025', yellow: '#f9ab00', green: '#188038',
  pink: '#d01884', purple: '#a142f4', cyan: '#007b83', orange: '#fa903e',
};

const RULES = {
  'every site': 'not needed: the grant may use every site',
  'no tabs': 'none yet: it has no tab',
  'in force': 'in force: its tabs send your cookies only to its sites',
  applying: 'being applied…',
  failed: 'FAILED: its tabs may send your cookies anywhere',
};

// The grants the relay announced, with whether their cookie rules are in
// force (a grant whose rules Chrome refused is shown as such). Names come
// from the relay, and are shown with textContent only.
let shownGrants = null;
function showGrants(grants) {
  const shown = JSON.stringify(grants);
  if (shown === shownGrants) return;
  shownGrants = shown;
  const rows = $('grant-rows');
  rows.replaceChildren();
  for (const grant of grants) {
    const row = document.createElement('tr');
    const name = cell(row);
    const swatch = document.createElement('span');
    swatch.className = 'swatch';
    swatch.style.background = GROUP_COLORS[grant.color] ?? '#999';
    swatch.title = grant.color;
    name.append(swatch, document.createTextNode(grant.name));
    cell(row).textContent = grant.sites ? `${grant.sites} site(s)` : 'every site';
    cell(row).textContent = String(grant.tabs ?? 0);
    const rules = cell(row, grant.rules === 'failed' ? 'error' : '');
    rules.textContent = RULES[grant.rules] ?? grant.rules;
    if (grant.rulesError) {
      const why = document.createElement('div');
      why.className = 'url';
      why.textContent = grant.rulesError;
      rules.append(why);
    }
    rows.appendChild(row);
  }
  $('grants').hidden = grants.length === 0;
  $('grants-none').hidden = grants.length !== 0;
}

let refreshing = false;
async function refresh() {
  if (refreshing) return;
  refreshing = true;
  try {
    const { relayPort } = await chrome.storage.local.get('relayPort');
    const port = relayPort || DEFAULT_PORT;
    const [ext, relay] = await Promise.all([extensionStatus(), relayStatus(port)]);
    $('state').textContent = ext.state ?? 'unknown';
    $('detail').textContent = ext.detail ? `— ${ext.detail}` : '';
    $('attached').textContent = String(ext.attachedTabs ?? 0);
    const groups = ext.tabGroups;
    $('groups').textContent = groups ? groups.detail : '…';
    $('groups').className = groups && !groups.available ? 'warn' : '';
    showTabs(Array.isArray(ext.tabs) ? ext.tabs : []);
    showGrants(Array.isArray(ext.grants) ? ext.grants : []);
    $('relay').textContent = relay.text;
    // Both sides' versions, and what to update when they do not take each
    // other's protocol: the worker's core says them (versions.rs).
    const versions = ext.versions || {};
    $('versions').textContent = versions.line || '…';
    $('version-mismatch').textContent = versions.mismatch || '';
    $('version-mismatch').hidden = !versions.mismatch;
    $('dashboard-line').hidden = !relay.dashboard;
    if (relay.dashboard) $('dashboard').href = relay.dashboard;
  } finally {
    refreshing = false;
  }
}

(async () => {
  await load();
  await pairFromHash();
  refresh();
  setInterval(refresh, 2000);
})();
