// A grant made with `--ask submit`, driven by Playwright on the real
// extension: its click on a form's submit button sends nothing until the
// person answers (the Rust test answers with `browser-relay allow` and
// `deny` while this waits); allowed, the click's navigation lands on the
// form's answer; denied, the navigation fails and the page's console says
// the person said no; the tab stays usable.
//
// Env: GRANT_URL (the grant's CDP URL), FIXTURE.
import { chromium } from 'playwright-core';

import { env, bounded, ok, check, STEP_MS, run } from './harness.mjs';

run(async () => {
  const FIXTURE = env('FIXTURE');
  const browser = await bounded(chromium.connectOverCDP(env('GRANT_URL'), { timeout: STEP_MS }), 'the grant connects');
  try {
    const page = await bounded(browser.contexts()[0].newPage(), 'the grant opens a page');
    const order = `${FIXTURE}/order.html`;
    await bounded(page.goto(order), 'goto the form');
    const warnings = [];
    page.on('console', (m) => { if (m.type() === 'warning') warnings.push(m.text()); });

    // Allowed: the click's navigation waits for the person, then lands.
    const answered = 60000;
    await bounded(Promise.all([page.waitForURL('**/echo?order', { timeout: answered }), page.click('#buy')]),
      'the click, allowed', answered);
    check((await page.title()) === 'echo POST', 'the allowed form arrived', await page.title());
    ok('allowed: the form went');

    // Denied: the navigation never happens, and the page says why.
    await bounded(page.goto(order), 'back to the form');
    const refused = await bounded(Promise.all([
      page.waitForURL('**/echo?order', { timeout: answered }).then(() => 'went', (e) => e.message),
      page.click('#buy'),
      page.waitForEvent('console', { predicate: (m) => m.type() === 'warning', timeout: answered }),
    ]), 'the click, denied', answered);
    const said = warnings.join('\n');
    check(said.includes('the person said no'), "the page's console says the person said no", said);
    check(page.url() === order, 'the tab stays on the form', page.url());
    console.log(`denied-navigation ${refused[0].split('\n')[0]}`);
    // Usable afterwards.
    await bounded(page.fill('#item', 'coffee'), 'the form is usable after a no');
    check((await page.inputValue('#item')) === 'coffee', 'typed into it');
    ok('denied: nothing went, the tab is usable');
  } finally {
    await browser.close().catch(() => {});
  }
});
