// A script in a loop beside an agent: connect, read the user's tab, open a
// page of its own, close it, leave; again until DURATION_MS has passed.
//
// Env: RELAY_HTTP (connectOverCDP, with the token), FIXTURE, DURATION_MS,
// USER_URL and USER_TITLE (the user's shared tab: its address and title).
// Prints `runs N`.
import { chromium } from 'playwright-core';

import { STEP_MS, bounded, check, env, run, waitFor } from './harness.mjs';

run(async () => {
  const RELAY_HTTP = env('RELAY_HTTP');
  const FIXTURE = env('FIXTURE');
  const USER_URL = env('USER_URL');
  const USER_TITLE = env('USER_TITLE');
  const until = Date.now() + Number(env('DURATION_MS'));
  let runs = 0;
  while (Date.now() < until) {
    const browser = await bounded(chromium.connectOverCDP(RELAY_HTTP, { timeout: STEP_MS }), 'connectOverCDP');
    const context = browser.contexts()[0];
    context.setDefaultTimeout(STEP_MS);
    const user = await waitFor(() => context.pages().find((p) => p.url() === USER_URL), 'the user tab');
    const title = await bounded(user.evaluate(() => document.title), 'evaluate on the user tab');
    check(title === USER_TITLE, `run ${runs}: the user tab`, title);
    const page = await bounded(context.newPage(), 'newPage');
    await bounded(page.goto(`${FIXTURE}/form.html?run=${runs}`), 'goto');
    await bounded(page.close(), 'page.close');
    await bounded(browser.close(), 'leave');
    runs += 1;
  }
  console.log(`runs ${runs}`);
});
