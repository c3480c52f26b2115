// End-to-end check: two independent Playwright `connectOverCDP` clients on the same relay tab.
//
// Env: RELAY_HTTP (http URL incl. ?token=…, passed verbatim to connectOverCDP), FIXTURE (http://127.0.0.1:PORT).
// The relay is attached to exactly one page, already at `${FIXTURE}/index.html`.
// Prints `ok - <check>` per check; exits 0 on success, 1 (with the error) on failure.
import { chromium } from 'playwright-core';

import { env, bounded, ok, check, waitFor, STEP_MS, run } from './harness.mjs';

async function fixturePage(browser, FIXTURE, label) {
  const context = browser.contexts()[0];
  if (!context) throw new Error(`${label}: no browser context`);
  const page = await waitFor(
    () => context.pages().find((p) => p.url() === `${FIXTURE}/index.html`),
    `${label}: the attached fixture page in context.pages()`
  );
  page.setDefaultTimeout(STEP_MS);
  return page;
}

async function main() {
  const RELAY_HTTP = env('RELAY_HTTP');
  const FIXTURE = env('FIXTURE');

  let clientA;
  let clientB;
  try {
    // Connect both clients concurrently.
    [clientA, clientB] = await bounded(
      Promise.all([
        chromium.connectOverCDP(RELAY_HTTP, { timeout: STEP_MS }),
        chromium.connectOverCDP(RELAY_HTTP, { timeout: STEP_MS }),
      ]),
      'two concurrent connectOverCDP calls'
    );
    ok('client A and client B connected at the same time');

    const pageA = await fixturePage(clientA, FIXTURE, 'client A');
    ok('client A sees the fixture page');
    const pageB = await fixturePage(clientB, FIXTURE, 'client B');
    ok('client B sees the fixture page');
    check(clientA.contexts()[0].pages().length === 1, 'client A sees exactly one page', clientA.contexts()[0].pages().length);
    check(clientB.contexts()[0].pages().length === 1, 'client B sees exactly one page', clientB.contexts()[0].pages().length);

    // Both evaluate on the page at the same time.
    const [titleA, titleB] = await Promise.all([
      bounded(pageA.evaluate(() => document.title), 'client A evaluate (concurrent with B)'),
      bounded(pageB.evaluate(() => document.title), 'client B evaluate (concurrent with A)'),
    ]
    );
    check(titleA === 'Fixture Index' && titleB === 'Fixture Index', 'both clients evaluate document.title', [titleA, titleB]);

    // A changes the DOM, B sees it.
    await bounded(
      pageA.evaluate(() => {
        document.querySelector('#marker').textContent = 'changed-by-A';
        document.body.dataset.relay = 'A';
      }),
      'client A changes the DOM'
    );
    const seenByB = await bounded(pageB.textContent('#marker'), 'client B reads #marker');
    check(seenByB === 'changed-by-A', 'client B sees the DOM change made by client A', seenByB);

    // B changes the DOM, A sees it.
    await bounded(pageB.evaluate(() => { document.body.dataset.relay = 'B'; }), 'client B changes the DOM');
    const seenByA = await bounded(pageA.evaluate(() => document.body.dataset.relay), 'client A reads data-relay');
    check(seenByA === 'B', 'client A sees the DOM change made by client B', seenByA);

    // A navigates; B follows the navigation of the shared tab.
    await bounded(pageA.goto(`${FIXTURE}/form.html`), 'client A page.goto(form.html)');
    await bounded(pageB.waitForURL(`${FIXTURE}/form.html`, { timeout: STEP_MS }), 'client B waitForURL(form.html)');
    const titleAfterNav = await bounded(pageB.evaluate(() => document.title), 'client B evaluate after navigation');
    check(titleAfterNav === 'Fixture Form', 'client B sees the navigation made by client A', titleAfterNav);
    await bounded(pageB.click('#btn'), 'client B click(#btn)');
    const outSeenByA = await bounded(pageA.textContent('#out'), 'client A reads #out');
    check(outSeenByA === 'clicked', 'client A sees the click made by client B', outSeenByA);

    // A disconnects; B keeps working and the tab stays open.
    await bounded(clientA.close(), 'client A browser.close() (disconnect)');
    clientA = undefined;
    ok('client A disconnected');
    await new Promise((r) => setTimeout(r, 500)); // let any (wrong) detach/close propagate to B
    check(clientB.isConnected(), 'client B is still connected');
    check(!pageB.isClosed(), 'the tab is still open for client B');
    const afterA = await bounded(pageB.evaluate(() => document.querySelector('#out').textContent), 'client B evaluate after A left');
    check(afterA === 'clicked', 'client B still evaluates after client A disconnected', afterA);
    await bounded(pageB.fill('#name', 'still here'), 'client B fill(#name) after A left');
    check((await bounded(pageB.inputValue('#name'), 'client B inputValue')) === 'still here', 'client B still drives the page after client A disconnected');
    await bounded(pageB.goto(`${FIXTURE}/index.html`), 'client B page.goto(index.html)');
    check((await bounded(pageB.title(), 'client B title')) === 'Fixture Index', 'client B navigates after client A disconnected');
  } finally {
    for (const client of [clientA, clientB]) {
      if (client) {
        await bounded(client.close(), 'browser.close() (disconnect)').catch((e) => console.error(`warning: ${e.message}`));
      }
    }
  }
  ok('disconnected');
}

run(main);
