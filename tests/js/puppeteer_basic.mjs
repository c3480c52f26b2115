// End-to-end check: Puppeteer `puppeteer.connect({browserWSEndpoint})` against the relay.
//
// Env: RELAY_WS (browser-level webSocketDebuggerUrl incl. ?token=…), FIXTURE (http://127.0.0.1:PORT).
// The relay is attached to exactly one page, already at `${FIXTURE}/index.html`.
// Prints `ok - <check>` per check; exits 0 on success, 1 (with the error) on failure.
import puppeteer from 'puppeteer-core';

import { env, bounded, ok, check, waitFor, PNG_SIGNATURE, STEP_MS, run } from './harness.mjs';

async function main() {
  const RELAY_WS = env('RELAY_WS');
  const FIXTURE = env('FIXTURE');

  let browser;
  try {
    browser = await bounded(
      puppeteer.connect({ browserWSEndpoint: RELAY_WS, defaultViewport: null, protocolTimeout: STEP_MS }),
      'puppeteer.connect'
    );
    ok('puppeteer.connect connected');
    check(browser.connected, 'browser.connected is true');

    const page = await waitFor(async () => {
      const pages = await bounded(browser.pages(), 'browser.pages()');
      return pages.find((p) => p.url() === `${FIXTURE}/index.html`);
    }, 'the attached fixture page in browser.pages()');
    ok('browser.pages() contains the attached fixture page');
    page.setDefaultTimeout(STEP_MS);
    page.setDefaultNavigationTimeout(STEP_MS);
    check((await bounded(page.title(), 'page.title()')) === 'Fixture Index', 'attached page title is "Fixture Index"');

    // Navigation + evaluate.
    const response = await bounded(page.goto(`${FIXTURE}/form.html`, { waitUntil: 'load' }), 'page.goto(form.html)');
    check(response && response.status() === 200, 'page.goto(form.html) returned HTTP 200', response && response.status());
    check(page.url() === `${FIXTURE}/form.html`, 'page.url() is form.html', page.url());
    const evaluated = await bounded(
      page.evaluate(() => ({ title: document.title, out: document.querySelector('#out').textContent, sum: 20 + 22 })),
      'page.evaluate'
    );
    check(
      evaluated.title === 'Fixture Form' && evaluated.out === 'not clicked' && evaluated.sum === 42,
      'page.evaluate returns values from the page',
      evaluated
    );

    // Click.
    await bounded(page.click('#btn'), 'page.click(#btn)');
    await bounded(
      page.waitForFunction(() => document.querySelector('#out').textContent === 'clicked', { timeout: STEP_MS }),
      'waiting for #out to become "clicked"'
    );
    const outText = await bounded(page.$eval('#out', (el) => el.textContent), '$eval(#out)');
    check(outText === 'clicked', 'click on #btn changed #out to "clicked"', outText);

    // Typing.
    await bounded(page.type('#name', 'relay user'), 'page.type(#name)');
    const nameValue = await bounded(page.$eval('#name', (el) => el.value), '$eval(#name)');
    check(nameValue === 'relay user', 'page.type(#name) value reads back', nameValue);

    // Screenshot.
    const shot = await bounded(page.screenshot({ type: 'png' }), 'page.screenshot()');
    const png = Buffer.from(shot);
    check(png.length > 1000 && png.subarray(0, 8).equals(PNG_SIGNATURE), 'page.screenshot() returns a PNG (> 1000 bytes)', png.length);

    // New page: create, navigate, close.
    const newPage = await bounded(browser.newPage(), 'browser.newPage()');
    ok('browser.newPage() created a page');
    newPage.setDefaultTimeout(STEP_MS);
    newPage.setDefaultNavigationTimeout(STEP_MS);
    await bounded(newPage.goto(`${FIXTURE}/index.html`, { waitUntil: 'load' }), 'newPage.goto(index.html)');
    check((await bounded(newPage.title(), 'newPage.title()')) === 'Fixture Index', 'new page title is "Fixture Index"');
    const pagesWithNew = await bounded(browser.pages(), 'browser.pages() with the new page');
    check(pagesWithNew.includes(newPage), 'browser.pages() contains the new page');
    await bounded(newPage.close(), 'newPage.close()');
    check(newPage.isClosed(), 'new page reports isClosed()');
    await waitFor(async () => !(await bounded(browser.pages(), 'browser.pages()')).includes(newPage), 'closed page to leave browser.pages()');
    ok('closed page is gone from browser.pages()');
    const pagesAfter = await bounded(browser.pages(), 'browser.pages() after close');
    check(pagesAfter.includes(page), 'original page is still in browser.pages()');
    const stillAlive = await bounded(page.evaluate(() => 1 + 1), 'original page evaluate after closing the new page');
    check(stillAlive === 2, 'original page still responds');

    // Leave the shared tab where we found it, so scripts can run in any order on one relay.
    await bounded(page.goto(`${FIXTURE}/index.html`, { waitUntil: 'load' }), 'page.goto(index.html) (restore)');
    check(page.url() === `${FIXTURE}/index.html`, 'original page navigated back to index.html');
  } finally {
    if (browser) {
      await bounded(browser.disconnect(), 'browser.disconnect()').catch((e) => console.error(`warning: ${e.message}`));
    }
  }
  ok('disconnected');
}

run(main);
