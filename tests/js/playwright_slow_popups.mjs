// Popups of the shared tab whose first document is slow to come (the
// server answers after DELAYS_MS, one popup each): Playwright's `popup`
// event fires for each, `waitForLoadState` returns, and the popup shows
// the page it was opened on. Then each popup is closed, and the user's tab
// stays where it was.
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
  } finally {
    await browser.close();
  }
});
