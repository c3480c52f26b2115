// Two grants, two Playwright clients, the real extension: each client sees
// only its grant's tab group, a new page of each opens in its own group,
// one cannot reach the other's tab by id, and a tab the person drags into a
// grant's group appears to that grant (and leaves it, dragged out).
//
// Env: ALPHA_URL, BETA_URL (the grants' CDP URLs, as `grant add` printed
//      them), FIXTURE, FIXTURE_ALT; CHROME_WS and EXTENSION_ID: the test's
//      hands (`chrome.tabs.group` in the extension's worker moves a tab as
//      the person's drag does; never the path under test).
// The person shares one tab, `${FIXTURE}/index.html`, in their own group.
// Prints `ok - <check>` per check and `dragged-in-ms <n>`; exits 0 on success.
import { chromium } from 'playwright-core';
import CDP from 'chrome-remote-interface';

import { env, bounded, ok, check, waitFor, STEP_MS, run } from './harness.mjs';

run(async () => {
  const FIXTURE = env('FIXTURE');
  const FIXTURE_ALT = env('FIXTURE_ALT');
  const INDEX = `${FIXTURE}/index.html`;
  const hands = await bounded(CDP({ target: env('CHROME_WS'), local: true }), "CDP on Chrome's own port");
  const browsers = [];
  try {
    const { targetInfos } = await bounded(hands.Target.getTargets(), 'Target.getTargets');
    const worker = targetInfos.find(
      (t) => t.type === 'service_worker' && t.url.startsWith(`chrome-extension://${env('EXTENSION_ID')}/`)
    );
    check(!!worker, "the extension's service worker runs");
    const { sessionId } = await bounded(hands.Target.attachToTarget({ targetId: worker.targetId, flatten: true }), 'attach');
    const inWorker = async (expression) => {
      const answer = await bounded(
        hands.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true }, sessionId),
        expression
      );
      if (answer.exceptionDetails) throw new Error(`${expression}: ${JSON.stringify(answer.exceptionDetails)}`);
      return answer.result.value;
    };
    const tabOf = (url) => inWorker(`chrome.tabs.query({}).then((tabs) => tabs.find((t) => t.url === ${JSON.stringify(url)}))`);
    const groupOf = async (url) => {
      const tab = await waitFor(async () => {
        const t = await tabOf(url);
        return t && t.groupId !== -1 ? t : null;
      }, `the tab at ${url} in a group`);
      return { tab, group: await inWorker(`chrome.tabGroups.get(${tab.groupId})`) };
    };

    const alpha = await bounded(chromium.connectOverCDP(env('ALPHA_URL'), { timeout: STEP_MS }), 'alpha connects');
    const beta = await bounded(chromium.connectOverCDP(env('BETA_URL'), { timeout: STEP_MS }), 'beta connects');
    browsers.push(alpha, beta);
    const [alphaContext, betaContext] = [alpha.contexts()[0], beta.contexts()[0]];
    check(alphaContext.pages().length === 0 && betaContext.pages().length === 0,
      "neither grant sees the person's own shared tab", alphaContext.pages().map((p) => p.url()));

    const person = await tabOf(INDEX);
    const alphaPage = await bounded(alphaContext.newPage(), 'alpha opens a page');
    const alphaUrl = `${FIXTURE}/index.html?alpha`;
    await bounded(alphaPage.goto(alphaUrl), 'alpha goes to its page');
    const betaPage = await bounded(betaContext.newPage(), 'beta opens a page');
    const betaUrl = `${FIXTURE_ALT}/index.html?beta`;
    await bounded(betaPage.goto(betaUrl), 'beta goes to its page');
    const a = await groupOf(alphaUrl);
    const b = await groupOf(betaUrl);
    check(a.group.title === 'alpha' && b.group.title === 'beta', "each new page sits in its grant's group", [a.group, b.group]);
    check(a.group.color !== b.group.color && a.group.color !== 'orange', 'in colours of their own', [a.group.color, b.group.color]);
    check(a.tab.windowId !== person.windowId && b.tab.windowId !== person.windowId,
      "in windows of the grants' own, not the person's", [person.windowId, a.tab.windowId, b.tab.windowId]);
    const personNow = await tabOf(INDEX);
    check(personNow.active, "the person's tab is still the active one of its window");

    check(alphaContext.pages().length === 1 && alphaContext.pages()[0] === alphaPage, 'alpha sees its one page only',
      alphaContext.pages().map((p) => p.url()));
    check(betaContext.pages().length === 1 && betaContext.pages()[0] === betaPage, 'beta sees its one page only',
      betaContext.pages().map((p) => p.url()));

    // Beta's tab by its id, from alpha: unknown to alpha.
    const betaInfo = await bounded((await betaContext.newCDPSession(betaPage)).send('Target.getTargetInfo'), 'beta target');
    const alphaRoot = await bounded(alpha.newBrowserCDPSession(), 'alpha browser session');
    const reached = await bounded(
      alphaRoot.send('Target.attachToTarget', { targetId: betaInfo.targetInfo.targetId, flatten: true }).then(
        () => 'attached',
        (e) => e.message
      ),
      'alpha attaches to beta tab by id'
    );
    check(reached.includes('No target with given id found'), "alpha cannot attach to beta's tab by its id", reached);
    const { targetInfos: alphaTargets } = await bounded(alphaRoot.send('Target.getTargets'), 'alpha getTargets');
    check(alphaTargets.filter((t) => t.type === 'page').length === 1, "alpha's getTargets lists its page only");

    // The person drags their tab into alpha's group: alpha sees it.
    const appeared = alphaContext.waitForEvent('page', { predicate: (p) => p.url() === INDEX, timeout: STEP_MS });
    const moved = Date.now();
    await inWorker(`chrome.tabs.group({ tabIds: [${person.id}], groupId: ${a.tab.groupId} })`);
    const lent = await bounded(appeared, "alpha's page event for the dragged tab");
    console.log(`dragged-in-ms ${Date.now() - moved}`);
    check((await bounded(lent.title(), 'title')) === 'Fixture Index', 'alpha drives the tab the person gave it');
    check(betaContext.pages().length === 1, 'beta still sees only its own page');

    // Dragged out: gone from alpha.
    const gone = new Promise((resolve) => lent.once('close', resolve));
    const out = Date.now();
    await inWorker(`chrome.tabs.ungroup([${person.id}])`);
    await bounded(gone, 'the page closes for alpha');
    console.log(`dragged-out-ms ${Date.now() - out}`);
    ok('dragged out of the group, the tab is gone for alpha');
    check(alphaContext.pages().length === 1, "alpha keeps its own page");
  } finally {
    for (const browser of browsers) await bounded(browser.close(), 'browser.close').catch(() => {});
    await hands.close();
  }
});
