// Browser client numbers (not a test): wasm size, page load to a usable prompt, echo latency
// over loopback. Run after scripts/build-wasm.sh:  node tests/browser/bench/bench.mjs [keystrokes]
// The page load is measured in headless Chromium (WebTransport) and, beside it in the same run,
// in WebKitGTK's MiniBrowser (the WebSocket fallback: no WebTransport there; ../lib/webkit.mjs),
// which is reported only and skipped, saying why, where WebKitGTK is not installed.
import { readFileSync, readdirSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';
import {
  ROOT, freePort, startRelay, stopRelay, launchBrowser, until, screen, stats, tempDir, sleep,
  cleanupState,
  newSession,
} from '../lib/helpers.mjs';
import { webkitUnavailable } from '../lib/webkit.mjs';

const keystrokes = Number(process.argv[2] || 200);
// Under their content-hashed names (scripts/hash-page.mjs): pkg/tern_bg.<hash>.wasm, pkg/tern.<hash>.js.
const pkgFile = (re) => join(ROOT, 'relay/page/pkg', readdirSync(join(ROOT, 'relay/page/pkg')).find((f) => re.test(f)));
const wasm = readFileSync(pkgFile(/^tern_bg\.[0-9a-f]{8}\.wasm$/));
const glue = readFileSync(pkgFile(/^tern\.[0-9a-f]{8}\.js$/));
console.log(`wasm: ${wasm.length} bytes raw, ${gzipSync(wasm, { level: 9 }).length} gzip -9`);
console.log(`glue (tern.js): ${glue.length} bytes raw, ${gzipSync(glue, { level: 9 }).length} gzip -9`);

/// Three page loads to a usable prompt (the prompt on the core's screen, polled every 50 ms from
/// here), each a fresh navigation: a new mosh-server and shell per load. Prints each load and the
/// median, `what` naming the browser and transport.
async function pageLoads(page, what) {
  const loads = [];
  for (let i = 0; i < 3; i++) {
    await page.goto('about:blank');
    await page.goto(newSession(relay.url));
    await until(async () => /[$#] ?$/m.test(await screen(page)), { timeout: 20000, what: 'prompt' });
    // performance.now() counts from navigation start.
    loads.push(await page.evaluate(() => performance.now()));
    const t = await stats(page);
    console.log(`  load ${i + 1}: relay ready at ${t.firstReadyMs.toFixed(0)} ms, first frame at ${t.firstFrameMs.toFixed(0)} ms (${t.transport})`);
    // End the shell (and its mosh-server) before the next load.
    await page.keyboard.type('exit\n');
    await sleep(300);
  }
  loads.sort((a, b) => a - b);
  console.log(`page load to usable prompt, ${what}: ${loads.map((x) => x.toFixed(0)).join(', ')} ms (median ${loads[1].toFixed(0)})`);
}

const stateDir = tempDir('tern-bench-');
const relay = await startRelay({ port: await freePort(), token: 'bench-token-0123456789', stateDir });
const browser = await launchBrowser();
const page = browser.page;
try {
  await pageLoads(page, 'headless Chromium, WebTransport');
  const noWebKit = webkitUnavailable();
  if (noWebKit) {
    console.log(`page load to usable prompt, WebKitGTK: skipped (${noWebKit})`);
  } else {
    const webkit = await launchBrowser({ browser: 'webkit', viewport: { width: 1100, height: 700 } });
    try {
      await pageLoads(webkit.page, `${webkit.version} (MiniBrowser on Xvfb), WebSocket fallback`);
    } finally {
      await webkit.close();
    }
  }
  await page.goto('about:blank');
  await page.goto(newSession(relay.url));
  await until(async () => /[$#] ?$/m.test(await screen(page)), { timeout: 20000, what: 'prompt' });

  // One key at a time, each after the previous echo: the latency of an idle keystroke.
  await page.keyboard.type('cat >/dev/null', { delay: 5 });
  await page.keyboard.press('Enter');
  await sleep(300);
  const before = (await stats(page)).echo.count;
  for (let i = 0; i < keystrokes; i++) {
    await page.keyboard.type('x');
    await until(async () => (await stats(page)).echo.count > before + i, { interval: 2, what: 'echo' });
    await sleep(20);
  }
  const s = await stats(page);
  const samples = s.echo.samplesMs.slice(-keystrokes).sort((a, b) => a - b);
  const q = (p) => samples[Math.min(samples.length - 1, Math.round((samples.length - 1) * p))].toFixed(1);
  console.log(`echo latency over loopback (${samples.length} keystrokes): median ${q(0.5)} ms, p90 ${q(0.9)} ms, min ${q(0)} ms, max ${q(1)} ms`);
  console.log(`srtt ${s.core.srttMs.toFixed(1)} ms, datagrams in/out ${s.core.datagramsIn}/${s.core.datagramsOut}, droppedUnknownBase ${s.core.droppedUnknownBase}`);
  await page.keyboard.press('Control+C');
} finally {
  await browser.close();
  await stopRelay(relay);
  cleanupState(stateDir);
}
