// The differential conformance battery: one scenario (SCENARIO) against one
// endpoint (KIND: chrome = Chrome's own debugging port, extension = the relay
// with the real extension, managed = the relay with the managed driver).
// tests/tests/conformance.rs runs every scenario on all three and compares
// what the clients observed.
//
// Env: KIND, SCENARIO, CDP_HTTP (for connectOverCDP), CDP_WS (the browser's
//      WebSocket URL), JSON_BASE (where /json/* is served), TOKEN (may be
//      empty), FIXTURE, FIXTURE_ALT.
// Output: `ok - …` per check, then one line `observation {"same":…,"own":…}`:
//   `same` must be equal on all three endpoints; `own` is what differs by
//   design, checked here against the documented difference.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import CDP from 'chrome-remote-interface';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';

import { STEP_MS, bounded, check, env, ok, run, waitFor } from './harness.mjs';

const KIND = env('KIND');
const FIXTURE = env('FIXTURE');
const FIXTURE_ALT = env('FIXTURE_ALT');
const CDP_HTTP = env('CDP_HTTP');
const CDP_WS = env('CDP_WS');
const JSON_BASE = env('JSON_BASE');
const TOKEN = process.env.TOKEN || '';
const INDEX = `${FIXTURE}/index.html`;
const RELAYED = KIND !== 'chrome';

const same = {};
const own = {};

/** URLs without the fixture servers' ports, comparable across endpoints. */
function norm(value) {
  if (typeof value === 'string') return value.split(FIXTURE_ALT).join('{alt}').split(FIXTURE).join('{fixture}');
  if (Array.isArray(value)) return value.map(norm);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, norm(v)]));
  return value;
}

/** A `/json/*` URL of this endpoint, with the token where one is needed. */
function jsonUrl(path) {
  if (!TOKEN) return `${JSON_BASE}${path}`;
  return `${JSON_BASE}${path}${path.includes('?') ? '&' : '?'}token=${TOKEN}`;
}

async function fetchJson(path, init) {
  const response = await bounded(fetch(jsonUrl(path), init), `fetch ${path}`);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${text}`);
  return JSON.parse(text);
}

/** The browser's pages (as `/json/list` lists them), sorted, normalized. */
async function tabList() {
  const list = await fetchJson('/json/list');
  return norm(list.filter((t) => t.type === 'page').map((t) => t.url)).sort();
}

async function connect() {
  const browser = await bounded(chromium.connectOverCDP(CDP_HTTP, { timeout: STEP_MS }), 'connectOverCDP');
  const context = browser.contexts()[0];
  context.setDefaultTimeout(STEP_MS);
  return { browser, context };
}

/** The user's tab: the one page at the fixture's index when a scenario starts. */
async function userPage(context) {
  const page = await waitFor(() => context.pages().find((p) => p.url() === INDEX), 'the user tab in context.pages()');
  page.setDefaultTimeout(STEP_MS);
  return page;
}

/** What a client leaves behind on a tab, as the page itself sees it. */
function pageState(page) {
  return bounded(
    page.evaluate(() => ({ width: innerWidth, height: innerHeight, ua: navigator.userAgent, url: location.href })),
    'page state'
  );
}

function sameJson(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The user's tab's state and the tab list, read by a client of its own. */
async function browserState() {
  const { browser, context } = await connect();
  try {
    return { tabs: await tabList(), user: await pageState(await userPage(context)) };
  } finally {
    await browser.close();
  }
}

/** Waits (bounded) until a fresh client sees `expected` again: the relay
 * and Chrome both undo a leaving client's state when they see its socket
 * close, which a client that already left cannot await. */
async function stateBecomes(expected, what) {
  let last;
  try {
    return await waitFor(async () => {
      last = await browserState();
      return sameJson(last, expected) && last;
    }, what);
  } catch (error) {
    throw new Error(`${error.message}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(last)}`);
  }
}

// ---------------------------------------------------------------- scenarios

/** 25 Playwright clients, one after another, each setting an emulation on
 * the user's tab, opening a page with a cross-site iframe and a dialog, and
 * a popup from the user's tab: the browser ends as it started. */
async function churn() {
  const rounds = Number(process.env.CHURN_ROUNDS || 25);
  const start = await browserState();
  const observed = [];
  for (let round = 0; round < rounds; round++) {
    const { browser, context } = await connect();
    const user = await userPage(context);
    await bounded(user.setViewportSize({ width: 1000, height: 700 }), 'setViewportSize');
    const session = await bounded(context.newCDPSession(user), 'newCDPSession');
    await bounded(session.send('Emulation.setUserAgentOverride', { userAgent: `Conformance/${round}` }), 'UA override');
    const emulated = await pageState(user);

    const page = await bounded(context.newPage(), 'newPage');
    const frameSrc = encodeURIComponent(`${FIXTURE_ALT}/frame.html`);
    await bounded(page.goto(`${FIXTURE}/iframe.html?src=${frameSrc}`), 'goto iframe.html');
    const child = await waitFor(() => page.frames().find((f) => f.url().startsWith(FIXTURE_ALT)), 'the cross-site frame');
    const marker = await bounded(child.evaluate(() => window.childMarker), 'evaluate in the cross-site frame');

    let dialog = null;
    page.once('dialog', (d) => {
      dialog = `${d.type()}:${d.message()}`;
      d.accept().catch(() => {});
    });
    const confirmed = await bounded(page.evaluate(() => confirm('round')), 'confirm dialog');

    await bounded(page.close(), 'page.close');

    // The popup comes from the user's tab, which every earlier client drove
    // too (where the first bug of issue 12 was).
    await bounded(user.goto(`${FIXTURE}/popup.html`), 'goto popup.html');
    const [popup] = await bounded(Promise.all([user.waitForEvent('popup'), user.click('#open')]), 'popup');
    await bounded(popup.waitForLoadState(), 'popup load');
    const popupTitle = await bounded(popup.title(), 'popup title');
    const popupUrl = popup.url();
    await bounded(popup.close(), 'popup.close');
    await bounded(user.goto(INDEX), 'back to the index');
    await bounded(browser.close(), 'browser.close');
    observed.push({
      viewport: [emulated.width, emulated.height],
      ua: emulated.ua.replace(String(round), 'N'),
      marker,
      dialog,
      confirmed,
      popup: [norm(popupUrl), popupTitle],
    });
  }
  ok(`${rounds} clients came and went`);
  const first = observed[0];
  const alike = observed.filter((o) => sameJson(o, first)).length;
  check(alike === rounds, 'every client saw the same', observed);
  same.round = first;
  const end = await stateBecomes(start, 'the browser as it started');
  check(sameJson(end, start), 'tab list, viewport and user agent at the end equal the start', { start, end });
  same.endEqualsStart = true;
  same.tabs = start.tabs;
}

/** Two clients at once on the user's tab. */
async function twoClients() {
  const start = await browserState();
  const a = await connect();
  const b = await connect();
  const pa = await userPage(a.context);
  const pb = await userPage(b.context);
  await bounded(pa.setViewportSize({ width: 800, height: 600 }), 'A viewport');
  await bounded(pb.setViewportSize({ width: 1000, height: 700 }), 'B viewport');
  const seen = { a: [], b: [] };
  pa.on('console', (m) => seen.a.push(m.text()));
  pb.on('console', (m) => seen.b.push(m.text()));
  const both = [await pageState(pa), await pageState(pb)].map((s) => [s.width, s.height]);
  await bounded(pa.evaluate(() => console.log('from-a')), 'A logs');
  await bounded(pb.evaluate(() => console.log('from-b')), 'B logs');
  await waitFor(() => seen.a.length >= 2 && seen.b.length >= 2, 'both clients see both messages');
  ok('both clients see the console of the shared tab');
  same.whileBoth = both;
  same.console = [seen.a.sort(), seen.b.sort()];
  await bounded(b.browser.close(), 'B leaves');
  // What A sees once B has gone: awaited (bounded), as the undo follows B's
  // socket close.
  const afterB = await waitFor(async () => {
    const s = await pageState(pa);
    return s.width !== 1000 && [s.width, s.height];
  }, 'B\'s viewport gone').catch(() => 'B\'s viewport stayed');
  own.afterBLeft = afterB;
  if (RELAYED && KIND === 'extension') check(sameJson(afterB, [800, 600]), 'A keeps the viewport it set', afterB);
  await bounded(a.browser.close(), 'A leaves');
  await stateBecomes(start, 'the browser as it started');
  same.endEqualsStart = true;
}

/** A client killed without closing its socket: what it set goes. */
async function dyingClient() {
  const start = await browserState();
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
    env: { ...process.env, SCENARIO: 'dying_child', TOTAL_TIMEOUT_MS: '60000' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await bounded(
      new Promise((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d) => {
          out += d;
          if (out.includes('ready')) resolve();
        });
        child.on('exit', (code) => reject(new Error(`the child exited (${code}) before it was ready: ${out}`)));
      }),
      'the dying client is ready'
    );
  } finally {
    child.kill('SIGKILL');
  }
  ok('the client was killed without closing its socket');
  const end = await stateBecomes(start, 'the browser as it started');
  same.endEqualsStart = true;
  // Its script on new documents is gone too.
  const { browser, context } = await connect();
  try {
    const user = await userPage(context);
    await bounded(user.reload(), 'reload');
    same.initScriptAfterReload = await bounded(user.evaluate(() => window.__dyingInit ?? null), 'init script');
    check(same.initScriptAfterReload === null, 'the dead client\'s init script no longer runs');
  } finally {
    await browser.close();
  }
  same.tabs = end.tabs;
}

async function dyingChild() {
  const { context } = await connect();
  const user = await userPage(context);
  await user.setViewportSize({ width: 1000, height: 700 });
  const session = await context.newCDPSession(user);
  await session.send('Emulation.setUserAgentOverride', { userAgent: 'Dying/1' });
  await session.send('Page.addScriptToEvaluateOnNewDocument', { source: 'window.__dyingInit = "ran"' });
  await session.send('Emulation.setTimezoneOverride', { timezoneId: 'Asia/Tokyo' });
  console.log('ready');
  await new Promise(() => {});
}

/** A client that leaves tabs open: Chrome keeps them; the relay closes the
 * tabs a client opened in the user's browser (a documented difference). */
async function leftBehindTabs() {
  const before = await tabList();
  const kept = new Set((await fetchJson('/json/list')).map((t) => t.id));
  const { browser, context } = await connect();
  const page = await bounded(context.newPage(), 'newPage');
  await bounded(page.goto(`${FIXTURE}/popup.html`), 'goto popup.html');
  const [popup] = await bounded(Promise.all([page.waitForEvent('popup'), page.click('#open')]), 'popup');
  await bounded(popup.waitForLoadState(), 'popup load');
  await bounded(browser.close(), 'leave without closing them');
  if (KIND === 'extension') {
    const after = await waitFor(async () => {
      const tabs = await tabList();
      return sameJson(tabs, before) && tabs;
    }, 'the tabs the client opened closed').catch(async () => tabList());
    own.leftBehind = after.length - before.length;
    check(own.leftBehind === 0, 'the relay closed the tabs the client opened', after);
  } else {
    const after = await tabList();
    own.leftBehind = after.length - before.length;
    check(own.leftBehind === 2, 'Chrome keeps the tabs a client leaves open', after);
    // Put the browser back for the next scenario.
    const list = await fetchJson('/json/list');
    for (const t of list.filter((t) => t.type === 'page' && !kept.has(t.id))) {
      await bounded(fetch(jsonUrl(`/json/close/${t.id}`)), 'close a left-behind tab');
    }
    await waitFor(async () => sameJson(await tabList(), before), 'the left-behind tabs closed');
  }
  same.tabsAfterCleanup = await tabList();
}

/** Puppeteer's tab-target model: pages, a new page, a popup, targets. */
async function puppeteerTabs() {
  const browser = await bounded(
    puppeteer.connect({ browserWSEndpoint: CDP_WS, defaultViewport: null, protocolTimeout: STEP_MS }),
    'puppeteer.connect'
  );
  try {
    const pages = await bounded(browser.pages(), 'browser.pages()');
    const user = pages.find((p) => p.url() === INDEX);
    check(!!user, 'the user tab is among browser.pages()', pages.map((p) => p.url()));
    same.userTitle = await bounded(user.title(), 'title');
    same.userTargetType = user.target().type();
    const page = await bounded(browser.newPage(), 'newPage');
    page.setDefaultTimeout(STEP_MS);
    await bounded(page.goto(`${FIXTURE}/form.html`, { waitUntil: 'load' }), 'goto form.html');
    await bounded(page.click('#btn'), 'click');
    await bounded(page.waitForFunction(() => document.querySelector('#out').textContent === 'clicked'), 'clicked');
    same.form = await page.evaluate(() => [document.title, document.querySelector('#out').textContent]);
    await bounded(page.goto(`${FIXTURE}/popup.html`, { waitUntil: 'load' }), 'goto popup.html');
    const popupCreated = new Promise((resolve) => page.once('popup', resolve));
    await bounded(page.click('#open'), 'click #open');
    const popup = await bounded(popupCreated, 'popup event');
    await bounded(popup.waitForFunction(() => document.readyState === 'complete'), 'popup loaded');
    same.popup = [norm(popup.url()), await popup.title()];
    same.pageTargets = norm(
      browser
        .targets()
        .filter((t) => t.type() === 'page')
        .map((t) => t.url())
        .sort()
    );
    same.openerOfPopup = norm(popup.target().opener()?.url() ?? null);
    await bounded(popup.close(), 'popup.close');
    await bounded(page.close(), 'page.close');
    same.pagesAtEnd = norm((await bounded(browser.pages(), 'pages')).map((p) => p.url()).sort());
  } finally {
    await browser.disconnect();
  }
}

/** chrome-remote-interface with its defaults on a page's own socket from
 * `/json/list` (it fetches /json/protocol first, without a token). */
async function pageSockets() {
  const list = await fetchJson('/json/list');
  const entry = list.find((t) => t.type === 'page' && t.url === INDEX);
  check(!!entry?.webSocketDebuggerUrl, '/json/list has the user tab with its socket', list);
  same.listEntry = norm({ type: entry.type, url: entry.url, title: entry.title });
  const client = await bounded(CDP({ target: entry.webSocketDebuggerUrl }), 'CDP({target})');
  try {
    const { Page, Runtime } = client;
    await bounded(Page.enable(), 'Page.enable');
    let loaded = Page.loadEventFired();
    await bounded(Page.navigate({ url: `${FIXTURE}/form.html` }), 'Page.navigate');
    await bounded(loaded, 'Page.loadEventFired');
    const { result } = await bounded(Runtime.evaluate({ expression: 'document.title' }), 'Runtime.evaluate');
    same.titleAfterNavigate = result.value;
    loaded = Page.loadEventFired();
    await bounded(Page.navigate({ url: INDEX }), 'navigate back');
    await bounded(loaded, 'loaded again');
    await bounded(Page.disable(), 'Page.disable');
  } finally {
    await client.close();
  }
  ok('the page socket navigated the tab and evaluated in it');
}

/** chrome-remote-interface at the browser level, and its HTTP helpers. */
async function criBrowser() {
  const { hostname, port, pathname } = new URL(JSON_BASE.endsWith('/') ? JSON_BASE : `${JSON_BASE}/`);
  const prefix = pathname.replace(/\/$/, '');
  // CRI cannot send a token but through its alterPath hook (HTTP only).
  const alterPath = (path) => `${prefix}${path}${TOKEN ? `${path.includes('?') ? '&' : '?'}token=${TOKEN}` : ''}`;
  const protocol = await bounded(CDP.Protocol({ host: hostname, port }), 'CDP.Protocol');
  same.protocolHasDomains = ['Page', 'Runtime', 'Target'].every((d) => protocol.domains.some((x) => x.domain === d));
  const client = await bounded(CDP({ target: CDP_WS }), 'CDP({target: browser})');
  try {
    const { targetInfos } = await bounded(client.Target.getTargets(), 'Target.getTargets');
    const user = targetInfos.find((t) => t.type === 'page' && t.url === INDEX);
    check(!!user, 'Target.getTargets lists the user tab', targetInfos);
    const { sessionId } = await bounded(client.Target.attachToTarget({ targetId: user.targetId, flatten: true }), 'attach');
    const evaluated = await bounded(
      client.send('Runtime.evaluate', { expression: '6 * 7', returnByValue: true }, sessionId),
      'Runtime.evaluate on the session'
    );
    same.evaluated = evaluated.result.value;
    await bounded(client.Target.detachFromTarget({ sessionId }), 'detach');

    const created = await bounded(
      CDP.New({ host: hostname, port, url: `${FIXTURE}/index.html?cri-new`, alterPath }),
      'CDP.New (PUT /json/new)'
    );
    same.created = norm({ type: created.type, url: created.url });
    const page = await bounded(CDP({ target: created.webSocketDebuggerUrl }), 'CDP on the new tab');
    const { result } = await bounded(page.Runtime.evaluate({ expression: 'location.search' }), 'evaluate in new tab');
    same.newTabSearch = result.value;
    await page.close();
    await bounded(CDP.Close({ host: hostname, port, id: created.id, alterPath }), 'CDP.Close');
    await waitFor(async () => !(await tabList()).some((u) => u.includes('cri-new')), 'the new tab closed');
    ok('CDP.New and CDP.Close');
  } finally {
    await client.close();
  }
}

/** A dedicated worker of the user's tab. */
async function workers() {
  const { browser, context } = await connect();
  try {
    const user = await userPage(context);
    const [worker] = await bounded(
      Promise.all([user.waitForEvent('worker'), user.goto(`${FIXTURE}/worker.html`)]),
      'the worker event'
    );
    same.workerUrl = norm(worker.url());
    same.workerMarker = await bounded(worker.evaluate(() => self.workerMarker), 'evaluate in the worker');
    same.echo = await bounded(
      user.evaluate(
        () =>
          new Promise((resolve) => {
            window.worker.onmessage = (e) => resolve(e.data);
            window.worker.postMessage(21);
          })
      ),
      'the worker answers the page'
    );
    await bounded(user.goto(INDEX), 'back to the index');
  } finally {
    await browser.close();
  }
}

/** A download from the user's tab. */
async function downloads() {
  const { browser, context } = await connect();
  try {
    const user = await userPage(context);
    await bounded(user.goto(`${FIXTURE}/form.html`), 'goto form.html');
    const [download] = await bounded(Promise.all([user.waitForEvent('download'), user.click('#dl')]), 'download');
    same.download = norm([download.suggestedFilename(), download.url()]);
    same.downloadFailure = await bounded(download.failure(), 'download finished');
    await bounded(user.goto(INDEX), 'back to the index');
  } finally {
    await browser.close();
  }
}

/** Playwright's raw sessions: on a page, twice, and on the browser. */
async function cdpSessions() {
  const { browser, context } = await connect();
  try {
    const user = await userPage(context);
    const first = await bounded(context.newCDPSession(user), 'first session');
    const second = await bounded(context.newCDPSession(user), 'second session');
    const tree = await bounded(first.send('Page.getFrameTree'), 'Page.getFrameTree');
    same.frameUrl = norm(tree.frameTree.frame.url);
    await bounded(first.detach(), 'detach the first');
    const value = await bounded(
      second.send('Runtime.evaluate', { expression: 'document.title', returnByValue: true }),
      'the second still works'
    );
    same.titleOnSecond = value.result.value;
    const detached = await first.send('Runtime.evaluate', { expression: '1' }).then(
      () => 'answered',
      (e) => (/detached|closed|Session/i.test(e.message) ? 'refused' : e.message)
    );
    same.detachedSession = detached;
    const root = await bounded(browser.newBrowserCDPSession(), 'browser session');
    const version = await bounded(root.send('Browser.getVersion'), 'Browser.getVersion');
    same.product = version.product.split('/')[0];
    const { targetInfos } = await bounded(root.send('Target.getTargets'), 'Target.getTargets');
    same.pageTargets = norm(targetInfos.filter((t) => t.type === 'page').map((t) => t.url).sort());
    await root.detach();
  } finally {
    await browser.close();
  }
}

/** What the user's browser refuses, and Chrome's own port does (docs/limits.md). Last: on Chrome and the managed driver, Browser.close ends the
 * browser. */
async function browserLimits() {
  const client = await bounded(CDP({ target: CDP_WS }), 'CDP({target: browser})');
  const outcome = (promise) =>
    promise.then(
      () => 'ok',
      (e) => `error: ${e.response?.message ?? e.message}`
    );
  own.createBrowserContext = await outcome(client.Target.createBrowserContext({}));
  own.grantPermissions = await outcome(client.Browser.grantPermissions({ permissions: ['geolocation'] }));
  if (KIND === 'extension') {
    check(own.createBrowserContext.startsWith('error'), 'no new browser contexts in the user\'s browser', own);
    check(own.grantPermissions.startsWith('error: Not allowed'), 'no permission grants on the user\'s browser', own);
  } else {
    check(own.createBrowserContext === 'ok' && own.grantPermissions === 'ok', 'Chrome takes both', own);
  }
  const closed = new Promise((resolve) => client.on('disconnect', resolve));
  await outcome(client.Browser.close());
  await bounded(closed, 'the connection closes');
  // The user's browser stays; Chrome's own, and the managed one, exit.
  const answers = () =>
    fetchJson('/json/version').then(
      () => true,
      () => false
    );
  own.browserStays = KIND === 'extension' ? await answers() : !(await waitFor(async () => !(await answers()), 'exit'));
  check(own.browserStays === (KIND === 'extension'), 'Browser.close closes only the client on the user\'s browser', own);
}

/** The person's cookie jar, and a domain Chrome keeps from extensions.
 * Cookies by name work on all three. On Chrome's port and the managed
 * profile a script's clearCookies() empties the jar and a CDP session has
 * HeapProfiler; on the user's browser the wipe is refused with the config
 * key that allows it, the person's other cookies stay, and HeapProfiler's
 * error names the managed profile (documented differences). */
async function personData() {
  const { browser, context } = await connect();
  try {
    const page = await userPage(context);
    const persons = { name: 'person', value: 'signed-in', domain: 'other.example', path: '/' };
    await bounded(context.addCookies([persons, { name: 'scratch', value: '1', url: FIXTURE }]), 'addCookies');
    const names = async () =>
      (await bounded(context.cookies(), 'cookies')).map((c) => c.name).filter((n) => n === 'person' || n === 'scratch').sort();
    same.cookiesSet = await names();
    await bounded(context.clearCookies({ name: 'scratch' }), 'clearCookies by name');
    same.afterClearingByName = await names();
    let wipe = 'cleared';
    await bounded(context.clearCookies(), 'clearCookies()').catch((e) => { wipe = e.message; });
    const session = await bounded(context.newCDPSession(page), 'newCDPSession');
    let heap = 'enabled';
    await bounded(session.send('HeapProfiler.enable'), 'HeapProfiler.enable').catch((e) => { heap = e.message; });
    await session.detach().catch(() => {});
    const left = await names();
    if (KIND === 'extension') {
      check(wipe.includes('allowWipingBrowserData = true'), 'wiping the jar is refused, the key named', wipe);
      check(sameJson(left, ['person']), "the person's cookie stays", left);
      check(
        heap.includes('does not give extensions the HeapProfiler domain') && heap.includes('--profile managed'),
        'HeapProfiler is withheld, and the managed profile named',
        heap
      );
      own.wipe = 'refused';
      own.heapProfiler = 'withheld';
      await bounded(context.clearCookies({ name: 'person' }), "the test's stand-in for the person's cookie goes");
    } else {
      check(wipe === 'cleared' && sameJson(left, []), "Chrome's behaviour: the jar is emptied", { wipe, left });
      check(heap === 'enabled', 'HeapProfiler is there', heap);
      own.wipe = 'cleared';
      own.heapProfiler = 'enabled';
    }
  } finally {
    await browser.close();
  }
}

/** What a page's fetch of each URL gets: `status body`. */
function fetchAll(page, urls, what = 'fetch from the page') {
  return bounded(
    page.evaluate(
      (list) => Promise.all(list.map((u) => fetch(u).then(async (r) => `${r.status} ${await r.text()}`, (e) => `failed ${e}`))),
      urls
    ),
    what
  );
}

/** Three clients intercepting the user's tab at once (Playwright's
 * `page.route`, each for its own URL), one that answers auth challenges,
 * one that leaves, and one that dies holding a paused request. */
async function interception() {
  const start = await browserState();
  const names = ['a', 'b', 'c'];
  const clients = [];
  const pages = [];
  for (const name of names) {
    const client = await connect();
    const page = await userPage(client.context);
    await bounded(
      page.route(`**/intercepted/${name}`, (route) => route.fulfill({ status: 200, body: `from-${name}` })),
      `route of ${name}`
    );
    clients.push(client);
    pages.push(page);
  }
  const urls = [...names.map((n) => `${FIXTURE}/intercepted/${n}`), `${FIXTURE}/status/418`];
  same.threeClients = [await fetchAll(pages[0], urls), await fetchAll(pages[2], urls)];
  check(
    sameJson(same.threeClients[0], ['200 from-a', '200 from-b', '200 from-c', '418 status 418']),
    "every client's route fulfils its own URL; the rest reaches the network",
    same.threeClients
  );
  await bounded(pages[1].reload(), 'a reload through three interceptors');
  same.reloaded = norm(pages[1].url());

  // Auth: a client without credentials lets the challenge go on to one with.
  await bounded(clients[0].context.setHTTPCredentials({ username: 'user', password: 'pass' }), 'credentials of a');
  same.auth = await fetchAll(pages[0], [`${FIXTURE}/auth`], 'fetch behind basic auth');
  check(sameJson(same.auth, ['200 signed in']), 'the credentials of one client answer the challenge', same.auth);

  await bounded(clients[1].browser.close(), 'b leaves');
  same.afterBLeft = await fetchAll(pages[0], urls, 'fetch after b left');
  check(
    sameJson(same.afterBLeft, ['200 from-a', '404 ', '200 from-c', '418 status 418']),
    "b's route left with b; a's and c's stay",
    same.afterBLeft
  );

  // A client that dies while it holds a paused request.
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
    env: { ...process.env, SCENARIO: 'intercepting_child', TOTAL_TIMEOUT_MS: '60000' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const said = (word) =>
    bounded(
      new Promise((resolve, reject) => {
        const look = () => out.includes(word) && resolve();
        child.stdout.on('data', (d) => {
          out += d;
          look();
        });
        child.on('exit', (code) => reject(new Error(`the child exited (${code}) before '${word}': ${out}`)));
        look();
      }),
      `the intercepting child says ${word}`
    );
  let held;
  try {
    await said('ready');
    held = fetchAll(pages[0], [`${FIXTURE}/intercepted/held`], 'the fetch the dead client held');
    await said('paused');
  } finally {
    child.kill('SIGKILL');
  }
  same.heldByTheDead = await held;
  check(sameJson(same.heldByTheDead, ['404 ']), 'the request a dead client held goes on to the network', same.heldByTheDead);
  same.afterDeath = await fetchAll(pages[2], urls, 'fetch after the death');
  check(sameJson(same.afterDeath, same.afterBLeft), 'the living clients intercept as before', same.afterDeath);
  for (const { browser } of [clients[0], clients[2]]) await bounded(browser.close(), 'leave');
  await stateBecomes(start, 'the browser as it started');
  same.endEqualsStart = true;
}

/** Traces of a reload of the user's tab: Playwright's own trace
 * (`context.tracing`), Chrome's trace through a page session
 * (`Tracing.start`, its data as a stream read with `IO.read`), and
 * Playwright's `browser.startTracing`. What each holds is `own`: the
 * docs/limits.md says how the user's browser differs. */
async function traces() {
  const { browser, context } = await connect();
  try {
    const page = await userPage(context);
    const zip = `${process.env.TMPDIR || '/tmp'}/conformance-trace-${KIND}-${process.pid}.zip`;
    await bounded(context.tracing.start({ screenshots: true, snapshots: true }), 'tracing.start');
    await bounded(page.reload(), 'reload while tracing');
    await bounded(page.evaluate(() => document.title), 'evaluate while tracing');
    await bounded(context.tracing.stop({ path: zip }), 'tracing.stop');
    const { statSync, rmSync } = await import('node:fs');
    own.playwrightTraceBytes = statSync(zip).size;
    rmSync(zip, { force: true });
    same.playwrightTrace = own.playwrightTraceBytes > 1000;

    // Chrome's tracing on the page's own session, as a stream.
    const session = await bounded(context.newCDPSession(page), 'newCDPSession');
    const complete = new Promise((resolve) => session.once('Tracing.tracingComplete', resolve));
    // The timeline with its frame screenshots: a big trace (megabytes, read in several chunks).
    const categories = [
      'devtools.timeline', 'disabled-by-default-devtools.timeline', 'disabled-by-default-devtools.timeline.frame',
      'disabled-by-default-devtools.screenshot', 'blink.user_timing', 'v8', 'loading',
    ];
    await bounded(session.send('Tracing.start', { transferMode: 'ReturnAsStream', traceConfig: { includedCategories: categories } }), 'Tracing.start');
    await bounded(page.reload(), 'reload while Chrome traces');
    // Frames to capture: the page animates for a second.
    await bounded(page.evaluate(() => new Promise((done) => {
      const box = document.body.appendChild(document.createElement('div'));
      box.style.cssText = 'width:300px;height:300px;background:linear-gradient(red,blue)';
      const end = performance.now() + 1000;
      const step = (t) => { box.style.transform = `rotate(${t / 3}deg)`; if (t < end) requestAnimationFrame(step); else done(); };
      requestAnimationFrame(step);
    })), 'animate');
    await bounded(session.send('Tracing.end'), 'Tracing.end');
    const { stream } = await bounded(complete, 'Tracing.tracingComplete');
    const chunks = [];
    let reads = 0;
    for (;;) {
      // In chunks of 256 KiB: a big trace is read in many.
      const chunk = await bounded(session.send('IO.read', { handle: stream, size: 256 << 10 }), 'IO.read');
      reads += 1;
      chunks.push(chunk.base64Encoded ? Buffer.from(chunk.data, 'base64').toString() : chunk.data);
      if (chunk.eof) break;
    }
    await bounded(session.send('IO.close', { handle: stream }), 'IO.close');
    const events = JSON.parse(chunks.join('')).traceEvents;
    const names = new Set(events.map((e) => e.name));
    own.chromeTrace = {
      bytes: chunks.reduce((n, c) => n + c.length, 0),
      reads,
      events: events.length,
      processes: [...new Set(events.filter((e) => e.name === 'process_name').map((e) => e.args.name))].sort(),
      screenshots: events.filter((e) => e.name === 'Screenshot').length,
      categories: [...new Set(events.map((e) => e.cat))].sort(),
    };
    same.chromeTraceReadInChunks = reads > 2;
    same.chromeTraceHasTheReload = ['ParseHTML', 'EvaluateScript'].filter((n) => names.has(n)).concat(
      events.some((e) => e.name === 'navigationStart' || e.name === 'NavigationBodyLoader::StartLoadingBody' || e.name === 'ResourceSendRequest') ? ['loading'] : []
    );
    await session.detach().catch(() => {});
    const { processes, screenshots } = own.chromeTrace;
    if (KIND === 'extension') {
      check(
        sameJson(processes, ['Renderer']) && screenshots === 0,
        "through chrome.debugger a trace holds the tab's renderer only, without frame screenshots (docs/limits.md)",
        { processes, screenshots }
      );
    } else {
      check(processes.includes('Browser') && screenshots > 0, 'the browser process and frame screenshots are traced', { processes, screenshots });
    }

    // Playwright's browser-level tracing.
    try {
      await bounded(browser.startTracing(page, { screenshots: false }), 'browser.startTracing');
      await bounded(page.reload(), 'reload while the browser traces');
      const buffer = await bounded(browser.stopTracing(), 'browser.stopTracing');
      own.browserTracing = { bytes: buffer.length, events: JSON.parse(buffer.toString()).traceEvents.length };
    } catch (error) {
      own.browserTracing = String(error.message).split('\n')[0];
    }
  } finally {
    await browser.close();
  }
}

async function interceptingChild() {
  const { context } = await connect();
  const user = await userPage(context);
  await user.route('**/intercepted/held', () => console.log('paused'));
  console.log('ready');
  await new Promise(() => {});
}

const scenarios = {
  churn,
  two_clients: twoClients,
  dying_client: dyingClient,
  dying_child: dyingChild,
  left_behind_tabs: leftBehindTabs,
  puppeteer_tabs: puppeteerTabs,
  page_sockets: pageSockets,
  cri_browser: criBrowser,
  workers,
  downloads,
  cdp_sessions: cdpSessions,
  person_data: personData,
  interception,
  traces,
  intercepting_child: interceptingChild,
  browser_limits: browserLimits,
};

run(async () => {
  const name = env('SCENARIO');
  const scenario = scenarios[name];
  if (!scenario) throw new Error(`unknown scenario ${name}: ${Object.keys(scenarios).join(', ')}`);
  await scenario();
  console.log(`observation ${JSON.stringify({ same, own })}`);
});
