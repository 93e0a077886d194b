// Waiting for a condition in the tests: one poller for the browser tests (tests/browser/lib/helpers.mjs
// re-exports it) and the release tests (tests/dist/), which must not load a browser driver.

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/// Polls `fn` until it returns something truthy.
/// On a timeout, `detail` (if given) says what was there instead, e.g. the screen.
export async function until(fn, { timeout = 15000, interval = 50, what = 'condition', detail } = {}) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try { last = await fn(); } catch (e) { last = e; }
    if (last && !(last instanceof Error)) return last;
    if (Date.now() > end) {
      let seen = '';
      if (detail) {
        try { seen = `\n${await detail()}`; } catch (e) { seen = `\n(no detail: ${e.message})`; }
      }
      throw new Error(`timed out waiting for ${what} (last: ${last})${seen}`);
    }
    await sleep(interval);
  }
}
