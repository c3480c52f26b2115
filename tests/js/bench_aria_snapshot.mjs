// Times Playwright's own accessibility snapshots on a page the managed
// browser already shows, for the snapshot benchmark (benches/snapshot.rs).
// Env: CDP_HTTP (connectOverCDP endpoint), PAGE_URL, RUNS.
// Prints one JSON line: {ariaSnapshot: {ms: [...], chars}, snapshotForAI: {...} | null}.
import { chromium } from 'playwright-core';

const runs = Number(process.env.RUNS || 7);
const browser = await chromium.connectOverCDP(process.env.CDP_HTTP, { timeout: 30000 });
try {
  const page = browser.contexts().flatMap(c => c.pages()).find(p => p.url() === process.env.PAGE_URL);
  if (!page) throw new Error(`no page at ${process.env.PAGE_URL}`);
  async function time(fn) {
    await fn(); // warm-up
    const ms = [];
    let chars = 0;
    for (let i = 0; i < runs; i++) {
      const t = performance.now();
      const out = await fn();
      ms.push(performance.now() - t);
      chars = (typeof out === 'string' ? out : out.full ?? JSON.stringify(out)).length;
    }
    return { ms, chars };
  }
  const ariaSnapshot = await time(() => page.locator('body').ariaSnapshot({ timeout: 60000 }));
  const snapshotForAI = typeof page._snapshotForAI === 'function'
    ? await time(() => page._snapshotForAI({ timeout: 60000 }))
    : null;
  console.log(JSON.stringify({ ariaSnapshot, snapshotForAI }));
} finally {
  // Disconnect only: the browser belongs to the benchmark.
  await browser.close().catch(() => {});
}
