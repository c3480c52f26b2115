// Popups of the shared tab whose first document is slow to come (the
// server answers after DELAYS_MS, one popup each): Playwright's `popup`
// event fires for each, `waitForLoadState` returns, and the popup shows
// the page it was opened on. Then each popup is closed, and the user's tab
// stays where it was. Last, the same for a popup of a tab the client opened.
//
// Env: RELAY_HTTP, FIXTURE, DELAYS_MS (comma-separated milliseconds).
// The relay is attached to one page, at `${FIXTURE}/index.html`.
import { chromium } from 'playwright-core';

import { STEP_MS, bounded, check, env, ok, run, waitFor } from './harness.mjs';

run(async () => {
  const RELAY_HTTP = env('RELAY_HTTP');
  const FIXTURE = env('FIXTURE');
  const delays = env('DELAYS_MS').split(',').map(Number);
  const browser = await bounded(chromium.connectOverCDP(RELAY_HTTP, { timeout: STEP_MS }), 'connectOverCDP');
  try {
    const context = browser.contexts()[0];
    context.setDefaultTimeout(STEP_MS);
    const user = await waitFor(() => context.pages().find((p) => p.url() === `${FIXTURE}/index.html`), 'the user tab');
    for (const delay of delays) {
      const url = `${FIXTURE}/status/200?delay=${delay}`;
      const [popup] = await bounded(
        Promise.all([user.waitForEvent('popup'), user.evaluate((u) => void window.open(u), url)]),
        `the popup of ${delay} ms`
      );
      await bounded(popup.waitForLoadState(), `the popup of ${delay} ms loaded`);
      check(popup.url() === url, `the popup of ${delay} ms shows its page`, popup.url());
      const text = await bounded(popup.evaluate(() => document.body.innerText), `read the popup of ${delay} ms`);
      check(text.includes('status 200'), `the popup of ${delay} ms has its document`, text);
      await bounded(popup.close(), `close the popup of ${delay} ms`);
      ok(`a popup whose page took ${delay} ms`);
    }
    check(user.url() === `${FIXTURE}/index.html`, "the user's tab stays", user.url());
    // The same from a tab the client opened (conformance's left_behind_tabs,
    // whose `waitForEvent('popup')` once timed out): its popup is a
    // grandchild of the shared tab, announced the same way.
    const page = await bounded(context.newPage(), 'newPage');
    await bounded(page.goto(`${FIXTURE}/popup.html`), 'goto popup.html');
    const slowest = Math.max(...delays);
    const url = `${FIXTURE}/status/200?delay=${slowest}`;
    const [popup] = await bounded(
      Promise.all([page.waitForEvent('popup'), page.evaluate((u) => void window.open(u), url)]),
      `the popup of ${slowest} ms of the client's tab`
    );
    await bounded(popup.waitForLoadState(), `the popup of ${slowest} ms of the client's tab loaded`);
    check(popup.url() === url, "the client's tab's popup shows its page", popup.url());
    ok(`a popup of the client's own tab, whose page took ${slowest} ms`);
  } finally {
    await browser.close();
  }
});
