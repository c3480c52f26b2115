// The shared harness of the Node test clients: environment, bounded steps,
// TAP-like `ok - …` lines, polling, and the script's watchdog and exit code.
// Each client script is `run(async () => { … })` around its checks.

export const STEP_MS = Number(process.env.STEP_TIMEOUT_MS || 15000);
export const TOTAL_MS = Number(process.env.TOTAL_TIMEOUT_MS || 180000);

export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** A required environment variable. */
export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`missing env var ${name}`);
  return value;
}

/** Races `promise` against a timer so no step can hang the script. */
export function bounded(promise, what, ms = STEP_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([Promise.resolve(promise), timeout]).finally(() => clearTimeout(timer));
}

export function ok(what) {
  console.log(`ok - ${what}`);
}

export function check(condition, what, detail) {
  if (!condition) throw new Error(`check failed: ${what}${detail === undefined ? '' : ` (got ${JSON.stringify(detail)})`}`);
  ok(what);
}

/** Polls `fn` until it returns a truthy value (bounded). */
export async function waitFor(fn, what, ms = STEP_MS) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Runs the script's checks: exit 0 when they pass, 1 (with the error) when
 * one fails or the whole script outlives TOTAL_MS. */
export function run(main) {
  const watchdog = setTimeout(() => {
    console.error(`not ok - whole script exceeded ${TOTAL_MS} ms`);
    process.exit(1);
  }, TOTAL_MS);
  watchdog.unref();
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(`not ok - ${error && error.stack ? error.stack : error}`);
      process.exit(1);
    }
  );
}
