// Reload and resume, for the benchmark suite (tern-bench's `resume` rows):
//
//   node tests/browser/bench/resume-bench.mjs [--rtt 200] [--reloads 5] [--json]
//
// Headless Chromium, the real tern-relay in spawn mode, the page through a TCP proxy delaying each
// direction by RTT/2 and its WebTransport through linkemu with the same delay (as echo-bench.mjs).
// A marker is printed, then the page is reloaded `--reloads` times; per reload, on the new page's
// clock (performance.now()):
//   oldScreen: the page's script started (performance mark `tern:script`, its modules loaded)
//              → the screen it saved drawn into xterm.js (`stats().restoredMs`);
//   live:      the relay's `ready` on the new link (`firstReadyMs`: the connection open, the
//              session attached) → the first new server state (`liveMs`): the session taken over;
//   liveFromRequest: the page first asked the relay (`firstConnectMs`) → the same;
//   navToOld, navToLive: navigation start → each.
// Prints a summary, and with --json one JSON object on the last line.
import {
  freePort, startRelay, stopRelay, launchBrowser, until, screen, stats, waitForPrompt, typeLine,
  tempDir, cleanupState, startLinkemu, cliArg, delayProxy,
} from '../lib/helpers.mjs';

const RTT = Number(cliArg('rtt', 200));
const RELOADS = Number(cliArg('reloads', 5));
const JSON_OUT = process.argv.includes('--json');

const token = 'resume-bench-' + Math.random().toString(36).slice(2);
const stateDir = tempDir('tern-resume-bench-state-');
let relay, emu, proxy, browser;
try {
  const port = await freePort();
  relay = await startRelay({ port, token, stateDir });
  const emuPort = await freePort();
  const proxyPort = await freePort();
  proxy = await delayProxy(proxyPort, port, RTT / 2);
  emu = await startLinkemu({ listenPort: emuPort, targetPort: port, link: `delay=${RTT / 2}ms` });
  browser = await launchBrowser();
  const page = browser.page;
  await page.goto(`http://127.0.0.1:${proxyPort}/#session=new&wt_port=${emuPort}&token=${token}`);
  await waitForPrompt(page, 30000);
  await typeLine(page, 'echo marker-$$');
  const marker = await until(async () => (await screen(page)).match(/^marker-\d+$/m)?.[0], { what: 'the marker' });

  const runs = [];
  for (let i = 0; i < RELOADS; i++) {
    await page.reload();
    await until(async () => (await stats(page))?.liveMs != null, { timeout: 20000 + 10 * RTT, what: 'the resumed session live' });
    const s = await stats(page);
    const script = await page.evaluate(() => performance.getEntriesByName('tern:script')[0]?.startTime ?? null);
    if (s.restoredMs == null || script == null) throw new Error(`reload ${i}: nothing restored (${JSON.stringify({ restored: s.restoredMs, script })})`);
    if (!(await screen(page)).includes(marker)) throw new Error(`reload ${i}: the old screen is not there`);
    runs.push({
      oldScreenMs: s.restoredMs - script,
      liveMs: s.liveMs - s.firstReadyMs,
      liveFromRequestMs: s.liveMs - s.firstConnectMs,
      navToOldMs: s.restoredMs,
      navToLiveMs: s.liveMs,
      transport: s.transport,
    });
    // Something new on the screen between reloads, as in use.
    await typeLine(page, `echo reload-${i}`);
    await until(async () => (await screen(page)).includes(`reload-${i}\n`), { what: `reload-${i}` });
  }
  const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
  const result = {
    rttMs: RTT,
    reloads: RELOADS,
    oldScreenMs: runs.map((r) => r.oldScreenMs),
    liveMs: runs.map((r) => r.liveMs),
    liveFromRequestMs: runs.map((r) => r.liveFromRequestMs),
    navToOldMs: runs.map((r) => r.navToOldMs),
    navToLiveMs: runs.map((r) => r.navToLiveMs),
    transports: runs.map((r) => r.transport),
  };
  console.log(`resume at RTT ${RTT} ms, ${RELOADS} reloads: old screen ${med(result.oldScreenMs).toFixed(1)} ms after the script started ` +
    `(${med(result.navToOldMs).toFixed(0)} after navigation); live ${med(result.liveMs).toFixed(1)} ms after the relay's ready, ${med(result.liveFromRequestMs).toFixed(0)} after the first request ` +
    `(${med(result.navToLiveMs).toFixed(0)} after navigation)`);
  if (JSON_OUT) console.log(JSON.stringify(result));
} finally {
  await browser?.close();
  await emu?.stop();
  await proxy?.stop();
  await stopRelay(relay);
  cleanupState(stateDir);
}
