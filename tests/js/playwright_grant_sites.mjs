// A grant limited to one site (${FIXTURE}), driven by Playwright on the real
// extension: page.goto elsewhere fails with the grant's error; a link, a
// form post, `location =` and a redirect to the other site (${FIXTURE_ALT})
// leave the tab where it was; context.cookies() holds none of the other
// site's cookies; and a credentialed fetch from the grant's page to the
// other site arrives without the person's cookie, where the same fetch from
// the person's own tab carries it (the control that shows the check can
// fail). That other site is ${FIXTURE_OTHER}: another origin of the same
// host, to which Chrome sends the host's cookies as a first party (it keeps
// third-party cookies from cross-site fetches itself).
// The Rust test then reads the fixture server's log: nothing of the
// navigations reached the other site.
//
// Env: GRANT_URL (the grant's CDP URL), PERSON_URL (the person's), FIXTURE,
//      FIXTURE_ALT, FIXTURE_OTHER. The person shares `${FIXTURE}/index.html`.
import { chromium } from 'playwright-core';

import { env, bounded, ok, check, STEP_MS, run } from './harness.mjs';

run(async () => {
  const FIXTURE = env('FIXTURE');
  const FIXTURE_ALT = env('FIXTURE_ALT');
  const FIXTURE_OTHER = env('FIXTURE_OTHER');
  const browsers = [];
  try {
    const person = await bounded(chromium.connectOverCDP(env('PERSON_URL'), { timeout: STEP_MS }), 'the person connects');
    browsers.push(person);
    const personContext = person.contexts()[0];
    const index = personContext.pages().find((p) => p.url() === `${FIXTURE}/index.html`);
    check(!!index, "the person's shared tab");
    // The person is signed in on both sites: each sets its cookie, as a
    // first party (a tab of the person's at each).
    for (const [site, name] of [[FIXTURE, 'mine'], [FIXTURE_ALT, 'theirs']]) {
      const visit = await bounded(personContext.newPage(), 'a tab of the person');
      await bounded(visit.goto(`${site}/set-cookie?name=${name}&value=${name[0]}1`), `${site} sets its cookie`);
      await bounded(visit.close(), 'closed');
    }

    const grant = await bounded(chromium.connectOverCDP(env('GRANT_URL'), { timeout: STEP_MS }), 'the grant connects');
    browsers.push(grant);
    const context = grant.contexts()[0];
    const page = await bounded(context.newPage(), 'the grant opens a page');
    const home = `${FIXTURE}/form.html`;
    await bounded(page.goto(home), 'goto its own site');
    ok('the grant goes to its own site');

    const refused = await bounded(page.goto(`${FIXTURE_ALT}/echo?goto`).then(() => 'went', (e) => e.message), 'goto elsewhere');
    check(refused.includes("the grant 'alpha' may not go to") && refused.includes(FIXTURE),
      "page.goto elsewhere fails with the grant's error", refused);

    const tries = {
      link: `document.body.insertAdjacentHTML('beforeend', '<a id=l href="${FIXTURE_ALT}/echo?link">go</a>'); document.getElementById('l').click()`,
      'form post': `document.body.insertAdjacentHTML('beforeend', '<form id=f method=post action="${FIXTURE_ALT}/echo?post"><input name=a value=1></form>'); document.getElementById('f').submit()`,
      'location =': `location = '${FIXTURE_ALT}/echo?location'`,
      redirect: `location = '${FIXTURE}/redirect?to=' + encodeURIComponent('${FIXTURE_ALT}/echo?redirected')`,
    };
    for (const [what, script] of Object.entries(tries)) {
      const failed = page.waitForEvent('requestfailed', { predicate: (r) => r.url().startsWith(FIXTURE_ALT), timeout: STEP_MS });
      await bounded(page.evaluate(script), what);
      const request = await bounded(failed, `${what}: the request fails`);
      check(request.failure().errorText.includes('ERR_ABORTED'), `${what}: held and refused before it left`, request.failure());
      check(page.url() === home && (await bounded(page.evaluate(() => location.href), 'href')) === home,
        `${what}: the tab stays where it was`, page.url());
    }

    const names = (cookies) => cookies.map((c) => c.name).sort();
    const persons = await bounded(personContext.cookies(), "the person's cookies");
    check(names(persons).join() === 'mine,theirs', 'the person has both', persons);
    const seen = names(await bounded(context.cookies(), 'context.cookies()'));
    check(seen.join() === 'mine', "context.cookies() holds its site's cookie and none of the other site's", seen);

    const fetched = (target) => target.evaluate(async (url) => {
      const answer = await fetch(url, { credentials: 'include' });
      const text = await answer.text();
      return /<pre id=cookie>(.*)<\/pre>/.exec(text)[1];
    }, `${FIXTURE_OTHER}/echo?fetch`);
    const fromPerson = await bounded(fetched(index), "a fetch from the person's tab");
    check(fromPerson.includes('mine=m1'), "from the person's own tab the other site gets the person's cookie (the control)", fromPerson);
    const fromGrant = await bounded(fetched(page), "a fetch from the grant's tab");
    check(fromGrant === '', "from the grant's tab the other site gets no cookie of the person's", fromGrant);
  } finally {
    for (const browser of browsers) await bounded(browser.close(), 'browser.close').catch(() => {});
  }
});
