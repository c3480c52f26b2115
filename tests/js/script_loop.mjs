// A script in a loop beside an agent: connect, read the user's tab, open a
// page of its own, close it, leave; again until DURATION_MS has passed.
//
// Env: RELAY_HTTP (connectOverCDP, with the token), FIXTURE, DURATION_MS.
// The user's shared tab is at `${FIXTURE}/index.html`. Prints `runs N`.
import { chromium } from 'playwright-core';

import { STEP_MS, bounded, check, env, run, waitFor } from './harness.mjs';

run(async () => {
  const RELAY_HTTP = env('RELAY_HTTP');
  const FIXTURE = env('FIXTURE');
  const until = Date.now() + Number(env('DURATION_MS'));
  let runs = 0;
  while (Date.now() < until) {
    const browser = await bounded(chromium.connectOverCDP(RELAY_HTTP, { timeout: STEP_MS }), 'connectOverCDP');
    const context = browser.contexts()[0];
    context.setDefaultTimeout(STEP_MS);
    const user = await waitFor(() => context.pages().find((p) => p.url() === `${FIXTURE}/index.html`), 'the user tab');
    const title = await bounded(user.evaluate(() => document.title), 'evaluate on the user tab');
    check(title === 'Fixture Index', `run ${runs}: the user tab`, title);
    const page = await bounded(context.newPage(), 'newPage');
    await bounded(page.goto(`${FIXTURE}/form.html?run=${runs}`), 'goto');
    await bounded(page.close(), 'page.close');
    await bounded(browser.close(), 'leave');
    runs += 1;
  }
  console.log(`runs ${runs}`);
});
