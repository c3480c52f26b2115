// End-to-end check: Playwright `chromium.connectOverCDP` against the relay.
//
// Env: RELAY_HTTP (http URL incl. ?token=…, passed verbatim to connectOverCDP),
//      FIXTURE (http://127.0.0.1:PORT, no trailing slash), FIXTURE_ALT (same server, other site).
// The relay is attached to exactly one page, already at `${FIXTURE}/index.html`.
// Prints `ok - <check>` per check; exits 0 on success, 1 (with the error) on failure.
import { chromium } from 'playwright-core';

import { env, bounded, ok, check, waitFor, PNG_SIGNATURE, STEP_MS, run } from './harness.mjs';

async function main() {
  const RELAY_HTTP = env('RELAY_HTTP');
  const FIXTURE = env('FIXTURE');
  const FIXTURE_ALT = env('FIXTURE_ALT');

  let browser;
  try {
    browser = await bounded(chromium.connectOverCDP(RELAY_HTTP, { timeout: STEP_MS }), 'connectOverCDP');
    ok('connectOverCDP connected');

    const contexts = browser.contexts();
    check(contexts.length >= 1, 'browser has a default context', contexts.length);
    const context = contexts[0];
    context.setDefaultTimeout(STEP_MS);

    const page = await waitFor(
      () => context.pages().find((p) => p.url() === `${FIXTURE}/index.html`),
      'the attached fixture page in context.pages()'
    );
    ok('context.pages() contains the attached fixture page');
    page.setDefaultTimeout(STEP_MS);
    check((await bounded(page.title(), 'page.title()')) === 'Fixture Index', 'attached page title is "Fixture Index"');

    // Navigation + evaluate.
    const response = await bounded(page.goto(`${FIXTURE}/form.html`), 'page.goto(form.html)');
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
    const outText = await bounded(page.textContent('#out'), 'page.textContent(#out)');
    check(outText === 'clicked', 'click on #btn changed #out to "clicked"', outText);

    // Fill.
    await bounded(page.fill('#name', 'relay user'), 'page.fill(#name)');
    const nameValue = await bounded(page.inputValue('#name'), 'page.inputValue(#name)');
    check(nameValue === 'relay user', 'page.fill(#name) value reads back', nameValue);

    // Screenshot.
    const png = await bounded(page.screenshot(), 'page.screenshot()');
    check(
      Buffer.isBuffer(png) && png.length > 1000 && png.subarray(0, 8).equals(PNG_SIGNATURE),
      'page.screenshot() returns a PNG (> 1000 bytes)',
      png && png.length
    );

    // Download via <a download="report.txt">.
    const [download] = await bounded(
      Promise.all([page.waitForEvent('download', { timeout: STEP_MS }), page.click('#dl')]),
      'download event after clicking #dl'
    );
    check(download.suggestedFilename() === 'report.txt', 'download suggestedFilename() is "report.txt"', download.suggestedFilename());
    check(download.url() === `${FIXTURE}/data.txt`, 'download url() is data.txt', download.url());

    // Raw CDP session on the page.
    const cdp = await bounded(context.newCDPSession(page), 'context.newCDPSession(page)');
    ok('context.newCDPSession(page) created a session');
    const evalResult = await bounded(
      cdp.send('Runtime.evaluate', { expression: 'document.title + ":" + (6 * 7)', returnByValue: true }),
      'CDP Runtime.evaluate'
    );
    check(evalResult.result && evalResult.result.value === 'Fixture Form:42', 'Runtime.evaluate through the CDP session', evalResult.result);
    await bounded(cdp.detach(), 'cdpSession.detach()');
    ok('CDP session detached');

    // Cookies.
    await bounded(
      context.addCookies([{ name: 'relay_cookie', value: 'v1', url: `${FIXTURE}/` }]),
      'context.addCookies'
    );
    const cookies = await bounded(context.cookies(`${FIXTURE}/`), 'context.cookies()');
    check(
      cookies.some((c) => c.name === 'relay_cookie' && c.value === 'v1'),
      'context.cookies() contains the added cookie',
      cookies.map((c) => c.name)
    );
    const documentCookie = await bounded(page.evaluate(() => document.cookie), 'document.cookie');
    check(documentCookie.includes('relay_cookie=v1'), 'the added cookie is visible to the page (document.cookie)', documentCookie);

    // Cross-site iframe (OOPIF): FIXTURE page embedding FIXTURE_ALT/frame.html.
    const childUrl = `${FIXTURE_ALT}/frame.html`;
    await bounded(page.goto(`${FIXTURE}/iframe.html?src=${encodeURIComponent(childUrl)}`), 'page.goto(iframe.html)');
    const frame = await waitFor(() => page.frames().find((f) => f.url() === childUrl), `frame with url ${childUrl}`);
    ok('page.frames() contains the cross-site child frame');
    const childMarker = await bounded(frame.evaluate(() => window.childMarker), 'frame.evaluate(childMarker)');
    check(childMarker === 'child-ok', 'frame.evaluate runs in the cross-site child document', childMarker);
    const childOrigin = await bounded(frame.evaluate(() => location.origin), 'frame.evaluate(location.origin)');
    check(childOrigin === new URL(FIXTURE_ALT).origin, 'child frame has the other origin', childOrigin);
    const parentMarker = await bounded(page.evaluate(() => typeof window.childMarker), 'page.evaluate(typeof childMarker)');
    check(parentMarker === 'undefined', 'main frame does not see the child marker', parentMarker);

    // New page: create, navigate, close.
    const newPage = await bounded(context.newPage(), 'context.newPage()');
    ok('context.newPage() created a page');
    newPage.setDefaultTimeout(STEP_MS);
    await bounded(newPage.goto(`${FIXTURE}/index.html`), 'newPage.goto(index.html)');
    check((await bounded(newPage.title(), 'newPage.title()')) === 'Fixture Index', 'new page title is "Fixture Index"');
    check(context.pages().includes(newPage), 'context.pages() contains the new page');
    await bounded(newPage.close(), 'newPage.close()');
    check(newPage.isClosed(), 'new page reports isClosed()');
    check(!context.pages().includes(newPage), 'closed page is gone from context.pages()');
    check(context.pages().includes(page), 'original page is still in context.pages()');
    const stillAlive = await bounded(page.evaluate(() => 1 + 1), 'original page evaluate after closing the new page');
    check(stillAlive === 2, 'original page still responds');

    // Leave the shared tab where we found it, so scripts can run in any order on one relay.
    await bounded(page.goto(`${FIXTURE}/index.html`), 'page.goto(index.html) (restore)');
    check(page.url() === `${FIXTURE}/index.html`, 'original page navigated back to index.html');
  } finally {
    if (browser) {
      await bounded(browser.close(), 'browser.close() (disconnect)').catch((e) => console.error(`warning: ${e.message}`));
    }
  }
  ok('disconnected');
}

run(main);
