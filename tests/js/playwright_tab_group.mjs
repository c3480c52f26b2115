// The "Browser Relay" tab group is the access list, as a real Playwright
// client (`connectOverCDP` on the relay) sees it: a tab the user drags into
// the group appears, dragged out it goes at once.
//
// Env: RELAY_HTTP (http URL incl. ?token=…), FIXTURE (http://127.0.0.1:PORT),
//      CHROME_WS and EXTENSION_ID: the test's hands. `chrome.tabs.group`
//      run in the extension's service worker over Chrome's own port moves a
//      tab as the user's drag does; it is never the path under test.
// The extension shares exactly one tab, `${FIXTURE}/index.html`, in its group.
// Prints `ok - <check>` per check; exits 0 on success, 1 (with the error) on failure.
import { chromium } from 'playwright-core';
import CDP from 'chrome-remote-interface';

import { env, bounded, ok, check, waitFor, STEP_MS, run } from './harness.mjs';

run(async () => {
  const RELAY_HTTP = env('RELAY_HTTP');
  const FIXTURE = env('FIXTURE');
  const CHROME_WS = env('CHROME_WS');
  const EXTENSION_ID = env('EXTENSION_ID');
  const INDEX = `${FIXTURE}/index.html`;
  const DRAGGED = `${FIXTURE}/index.html?dragged`;

  const hands = await bounded(CDP({ target: CHROME_WS, local: true }), "CDP on Chrome's own port");
  let browser;
  try {
    const { targetInfos } = await bounded(hands.Target.getTargets(), 'Target.getTargets');
    const worker = targetInfos.find(
      (t) => t.type === 'service_worker' && t.url.startsWith(`chrome-extension://${EXTENSION_ID}/`)
    );
    check(!!worker, "the extension's service worker runs", targetInfos.map((t) => t.url));
    const { sessionId } = await bounded(
      hands.Target.attachToTarget({ targetId: worker.targetId, flatten: true }),
      'attach to the service worker'
    );
    const inWorker = async (expression) => {
      const answer = await bounded(
        hands.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true }, sessionId),
        expression
      );
      if (answer.exceptionDetails) throw new Error(`${expression}: ${JSON.stringify(answer.exceptionDetails)}`);
      return answer.result.value;
    };
    const tabOf = (url) => inWorker(`chrome.tabs.query({}).then((tabs) => tabs.find((t) => t.url === ${JSON.stringify(url)}))`);
    const listed = async (url) => {
      const list = new URL(RELAY_HTTP);
      list.pathname = '/json/list';
      const entries = await (await bounded(fetch(list), 'GET /json/list')).json();
      return entries.some((t) => t.url === url);
    };

    browser = await bounded(chromium.connectOverCDP(RELAY_HTTP, { timeout: STEP_MS }), 'connectOverCDP');
    const context = browser.contexts()[0];
    const index = await waitFor(() => context.pages().find((p) => p.url() === INDEX), 'the shared tab in Playwright');
    ok('Playwright sees the shared tab');
    const shared = await tabOf(INDEX);
    check(shared.groupId !== -1, 'the shared tab is in a tab group', shared);
    const group = await inWorker(`chrome.tabGroups.get(${shared.groupId})`);
    check(group.title === 'Browser Relay' && group.color === 'orange', 'named "Browser Relay", in orange', group);

    const badgeOf = (id, want) =>
      waitFor(async () => {
        const text = await inWorker(`chrome.action.getBadgeText({ tabId: ${id} })`);
        return text === want ? `badge "${text}"` : null;
      }, `the badge "${want}"`);

    // A tab opened from the shared tab: Chrome puts it into the tab's group,
    // so it is shared (as popups of shared tabs are).
    let appeared = context.waitForEvent('page', { predicate: (p) => p.url() === DRAGGED, timeout: STEP_MS });
    await bounded(hands.Target.createTarget({ url: DRAGGED }), 'open a tab from the shared one (the user)');
    let page = await bounded(appeared, 'a page event for the opened tab');
    const tab = await waitFor(async () => {
      const t = await tabOf(DRAGGED);
      return t && t.status === 'complete' ? t : null;
    }, 'the new tab loaded');
    check(tab.groupId === shared.groupId, 'Chrome opened it into the group, and Playwright sees it', tab);

    // Dragged out: gone at once.
    let closed = new Promise((resolve) => page.once('close', resolve));
    await inWorker(`chrome.tabs.ungroup([${tab.id}])`);
    await bounded(closed, 'the page closes for Playwright');
    ok('taken out of the group, the page is gone for Playwright');
    await waitFor(async () => !(await listed(DRAGGED)), 'the tab gone from /json/list');
    ok('and from /json/list: a tab outside the group is not listed');
    check((await tabOf(DRAGGED)).groupId === -1, 'the tab itself stays open, outside the group');
    ok(await badgeOf(tab.id, ''));

    // Dragged into the group: shared again.
    appeared = context.waitForEvent('page', { predicate: (p) => p.url() === DRAGGED, timeout: STEP_MS });
    await inWorker(`chrome.tabs.group({ tabIds: [${tab.id}], groupId: ${shared.groupId} })`);
    page = await bounded(appeared, 'a page event for the tab put into the group');
    ok('put into the group, the tab appears in Playwright');
    await waitFor(() => listed(DRAGGED), 'the tab on /json/list');
    ok('and on /json/list');
    check((await bounded(page.evaluate(() => location.search), 'page.evaluate')) === '?dragged', 'Playwright drives it');
    ok(await badgeOf(tab.id, 'ON'));

    // And out again.
    closed = new Promise((resolve) => page.once('close', resolve));
    await inWorker(`chrome.tabs.ungroup([${tab.id}])`);
    await bounded(closed, 'the page closes for Playwright again');
    await waitFor(async () => !(await listed(DRAGGED)), 'the tab gone from /json/list again');
    ok('taken out again, gone again');
    check((await bounded(index.title(), 'index.title()')) === 'Fixture Index', 'the tab still in the group is still driven');
  } finally {
    if (browser) await bounded(browser.close(), 'browser.close').catch(() => {});
    await hands.close();
  }
});
