// Times Playwright's click and fill on the page the managed browser shows,
// for the actions benchmark (benches/actions.rs).
// Env: CDP_HTTP (connectOverCDP endpoint), PAGE_URL, RUNS, FILL_RUNS.
// Prints one JSON line: {click: [ms...], fill: [ms...]}.
import { chromium } from 'playwright-core';

const runs = Number(process.env.RUNS || 30);
const fillRuns = Number(process.env.FILL_RUNS || 10);
const browser = await chromium.connectOverCDP(process.env.CDP_HTTP, { timeout: 30000 });
try {
  const page = browser.contexts().flatMap(c => c.pages()).find(p => p.url() === process.env.PAGE_URL);
  if (!page) throw new Error(`no page at ${process.env.PAGE_URL}`);
  const button = page.getByRole('button', { name: 'Count', exact: true });
  await button.click(); // warm-up
  const click = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await button.click();
    click.push(performance.now() - t);
  }
  const fields = Array.from({ length: 20 }, (_, i) => page.getByLabel(`Field ${i + 1}`, { exact: true }));
  const fillOnce = async (round) => { for (let i = 0; i < 20; i++) await fields[i].fill(`pw ${round} ${i}`); };
  await fillOnce(-1); // warm-up
  const fill = [];
  for (let r = 0; r < fillRuns; r++) {
    const t = performance.now();
    await fillOnce(r);
    fill.push(performance.now() - t);
  }
  const last = await page.locator('input[name=f20]').inputValue();
  if (last !== `pw ${fillRuns - 1} 19`) throw new Error(`fill did not land: ${last}`);
  console.log(JSON.stringify({ click, fill }));
} finally {
  await browser.close().catch(() => {});
}
