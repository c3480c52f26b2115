// A grant's Playwright client is closed at once when the person revokes the
// grant (`browser-relay grant revoke`, run here), and when a grant expires;
// its URL is then refused (401), saying why for an expired one.
//
// Env: ALPHA_URL (a grant's CDP URL), BRIEF_URL (a grant that expires a few
//      seconds after it was made), REVOKE (the revoke command, as a JSON
//      array: program and arguments).
// Prints `revoked-closed-ms <n>`; exits 0 on success.
import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';

import { env, bounded, check, STEP_MS, run } from './harness.mjs';

/** `/json/version` of a CDP URL: its status and body. */
async function version(url) {
  const at = new URL(url);
  at.pathname = '/json/version';
  const answer = await bounded(fetch(at), 'GET /json/version');
  return { status: answer.status, body: await answer.text() };
}

run(async () => {
  const alpha = await bounded(chromium.connectOverCDP(env('ALPHA_URL'), { timeout: STEP_MS }), 'alpha connects');
  const brief = await bounded(chromium.connectOverCDP(env('BRIEF_URL'), { timeout: STEP_MS }), 'brief connects');
  check((await version(env('ALPHA_URL'))).status === 200, "the grant's URL works while it is given");

  const closed = new Promise((resolve) => alpha.once('disconnected', resolve));
  const [program, ...args] = JSON.parse(env('REVOKE'));
  const started = Date.now();
  const said = execFileSync(program, args, { encoding: 'utf8' });
  await bounded(closed, 'the revoked grant is disconnected');
  console.log(`revoked-closed-ms ${Date.now() - started}`);
  check(said.includes("Revoked 'alpha': its connections are closed"), 'grant revoke says so', said);
  const after = await version(env('ALPHA_URL'));
  check(after.status === 401, "the revoked grant's URL then gets 401", after);
  check(brief.isConnected(), "another grant's client is untouched");

  // The brief grant expires a few seconds after it was made.
  await bounded(new Promise((resolve) => brief.once('disconnected', resolve)), 'the expired grant is disconnected', 30000);
  const expired = await version(env('BRIEF_URL'));
  check(expired.status === 401 && expired.body.includes("'brief' has expired"), 'and its URL then gets 401, saying it expired', expired);
});
