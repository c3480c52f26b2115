// Playwright `connectOverCDP` against a managed profile through the relay
// (`/profiles/<name>/?token=…`): the same client code as for the extension.
// Env: RELAY_HTTP, FIXTURE. Prints `ok - …` per check; exits 1 on failure.
import { chromium } from 'playwright-core';

import { STEP_MS, bounded, check, run } from './harness.mjs';

run(async () => {
  let browser;
  try {
    browser = await bounded(chromium.connectOverCDP(process.env.RELAY_HTTP, { timeout: STEP_MS }), 'connectOverCDP');
    const context = browser.contexts()[0];
    check(!!context, 'the managed browser has a default context', browser.contexts().length);
    const page = context.pages()[0] || (await bounded(context.newPage(), 'newPage'));
    await bounded(page.goto(`${process.env.FIXTURE}/form.html`), 'goto form.html');
    check((await page.title()) === 'Fixture Form', 'navigated to the fixture', await page.title());
    await bounded(page.click('#btn'), 'click');
    check((await page.textContent('#out')) === 'clicked', 'the click reached the page', await page.textContent('#out'));
    const version = browser.version();
    check(/^\d+\./.test(version), 'browser version reported', version);
  } finally {
    // On a CDP-connected browser this only disconnects.
    if (browser) await browser.close().catch(() => {});
  }
});
