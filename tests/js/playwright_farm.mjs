// Playwright `connectOverCDP` against a remote profile (a browser farm)
// through the relay (`/profiles/<name>/?token=…`): the same browser the
// control API drives (the tab it opened is there), and a page of its own.
// Env: RELAY_HTTP, AGENT_TITLE (the title of the agent's tab). Prints
// `ok - …` per check; exits 1 on failure.
import { chromium } from 'playwright-core';

import { STEP_MS, bounded, check, env, run } from './harness.mjs';

run(async () => {
  let browser;
  try {
    browser = await bounded(chromium.connectOverCDP(env('RELAY_HTTP'), { timeout: STEP_MS }), 'connectOverCDP');
    const context = browser.contexts()[0];
    check(!!context, 'the remote browser has a default context', browser.contexts().length);
    const titles = await Promise.all(context.pages().map((p) => p.title()));
    check(titles.includes(env('AGENT_TITLE')), "the agent's tab is in the same browser", titles);
    const page = await bounded(context.newPage(), 'newPage');
    await bounded(
      page.goto('data:text/html,<title>Playwright</title><button id=b onclick="this.textContent=`clicked`">Go</button>'),
      'goto',
    );
    await bounded(page.click('#b'), 'click');
    check((await page.textContent('#b')) === 'clicked', 'the click reached the page', await page.textContent('#b'));
    check(/^\d+\./.test(browser.version()), 'browser version reported', browser.version());
    await bounded(page.close(), 'close the page');
  } finally {
    // On a CDP-connected browser this only disconnects.
    if (browser) await browser.close().catch(() => {});
  }
});
