// A Playwright script on the user's shared tab, for the dashboard test: it
// goes to the sign-in fixture and types a password, says `ready`; on the
// line `click` from stdin it clicks "Sign in" (the page turns red) and says
// `clicked`; when its connection is closed (by the dashboard's button) it
// says `disconnected` and exits 0.
//
// Env: RELAY_HTTP, FIXTURE.
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

import { env, bounded, waitFor, STEP_MS } from './harness.mjs';

const RELAY_HTTP = env('RELAY_HTTP');
const FIXTURE = env('FIXTURE');
const PASSWORD = 'hunter2-correct-horse';

setTimeout(() => {
  console.log('timeout: never disconnected');
  process.exit(1);
}, 180000).unref();

const browser = await bounded(chromium.connectOverCDP(RELAY_HTTP, { timeout: STEP_MS }), 'connectOverCDP');
browser.on('disconnected', () => {
  console.log('disconnected');
  process.exit(0);
});
const context = browser.contexts()[0];
const page = await waitFor(() => context.pages().find((p) => p.url() === `${FIXTURE}/index.html`), 'the shared tab');
page.setDefaultTimeout(STEP_MS);
await page.goto(`${FIXTURE}/signin.html`);
await page.fill('#password', PASSWORD);
console.log('ready');

for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === 'click') {
    await page.click('#go');
    console.log('clicked');
  }
}
