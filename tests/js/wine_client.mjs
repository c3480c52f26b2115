// A Playwright client of browser-relay on the user's tab the real extension
// shares with it: connect, evaluate, screenshot, leave. tests/tests/e2e_wine.rs
// runs it twice in a row against the Windows browser-relay.exe under Wine, and
// tests/tests/e2e_desktop.rs against the native binary (in CI, on each system).
//
// Env: RELAY_HTTP (http URL incl. ?token=…, as `browser-relay cdp-url` prints
//      it), FIXTURE (http://127.0.0.1:PORT). The shared tab shows
//      `${FIXTURE}/index.html`.
import { chromium } from 'playwright-core';

import { env, bounded, ok, check, waitFor, PNG_SIGNATURE, STEP_MS, run } from './harness.mjs';

async function main() {
  const RELAY_HTTP = env('RELAY_HTTP');
  const FIXTURE = env('FIXTURE');
  const browser = await bounded(chromium.connectOverCDP(RELAY_HTTP, { timeout: STEP_MS }), 'connectOverCDP');
  ok('connectOverCDP to the Windows relay');
  try {
    const context = browser.contexts()[0];
    const page = await waitFor(
      () => context.pages().find((p) => p.url() === `${FIXTURE}/index.html`),
      'the shared tab in context.pages()'
    );
    ok('the shared tab is a page of the default context');
    const evaluated = await bounded(page.evaluate(() => ({ title: document.title, sum: 20 + 22 })), 'page.evaluate');
    check(evaluated.title === 'Fixture Index' && evaluated.sum === 42, 'page.evaluate runs in the shared tab', evaluated);
    const png = await bounded(page.screenshot(), 'page.screenshot()');
    check(png.length > 1000 && png.subarray(0, 8).equals(PNG_SIGNATURE), 'page.screenshot() returns a PNG', png.length);
  } finally {
    // connectOverCDP's close leaves: the user's tab stays open and shared.
    await bounded(browser.close(), 'browser.close()');
  }
  ok('left');
}

run(main);
