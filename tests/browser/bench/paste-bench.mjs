// Paste benchmark: a large picture over an emulated slow link, in headless Chromium, through the
// real tern-relay, mosh-server and a shell (docs/BENCHMARKS.md, "Paste").
//
//   node tests/browser/bench/paste-bench.mjs [--size 13400000] [--rate 9mbit] [--rtt 80] [--queue 1s] [--keys 40] [--eager 1] [--queue-target MS] [--json]
//
// Prints (and with --json, one JSON object on the last line):
//   upload time (first byte to the relay's path) / link limit (size x 8 / rate),
//   keystroke echo latency while idle and during the upload (a key handed to xterm.js until its
//   echo is on the core's screen; keys into `cat >/dev/null`, one every 150 ms; the page's
//   hold-keys-behind-the-paste is turned off so the keys go out at once and measure the link),
//   the bytes a repeated paste sends, the pacer's view and mosh's SRTT, and the wait from the
//   file hashed to its first byte (--eager 0: the first bytes wait for the relay's `have`, one
//   round trip, as before the eager start; for a before/after in one session).
// The link: linkemu between the page's WebTransport and the relay, delay RTT/2 each way, the
// rate and bottleneck queue (queue-delay) in both directions. Needs scripts/build-wasm.sh first.
import { join } from 'node:path';
import { rateBitsPerSecond, LINK_STATS_ARGS, watchLink, summary as linkSummary, describe as describeLink } from './link-usage.mjs';
import {
  freePort, startRelay, stopRelay, launchBrowser, until, screen, stats, waitForPrompt, typeLine,
  tempDir, sleep, cleanupState, startLinkemu, cliArg,
  newSession,
} from '../lib/helpers.mjs';
import { keyEcho, pct, summary, fmt } from './key-echo.mjs';
import { makePng, loadFile, pasteLoaded } from '../lib/paste.mjs';

const arg = cliArg;
const SIZE = Number(arg('size', 13_400_000));
const RATE = arg('rate', '9mbit');
const RTT = Number(arg('rtt', 80));
const QUEUE = arg('queue', '1s');
const KEYS = Number(arg('keys', 40));
const EAGER = arg('eager', '1') !== '0';
// The pacer's standing-queue target (default: the page's, 2 ms; 5 is the transfer default and
// what pastes used before): echo against link idle.
const QUEUE_TARGET = arg('queue-target', null);
const JSON_OUT = process.argv.includes('--json');
const rateBps = rateBitsPerSecond(RATE);


// 16 characters at least (the relay refuses a shorter token): base36 of Math.random() can be 9.
const token = 'paste-dl-bench-' + Math.random().toString(36).slice(2);
const port = await freePort();
const stateDir = tempDir('tern-bench-state-');
const pasteDir = join(tempDir('tern-bench-pastes-'), 'pastes');
let relay, emu, browser;
try {
  relay = await startRelay({ port, token, stateDir, args: ['--paste-dir', pasteDir] });
  const emuPort = await freePort();
  emu = await startLinkemu({
    listenPort: emuPort, targetPort: port,
    link: `delay=${RTT / 2}ms,rate=${RATE},queue-delay=${QUEUE}`,
    extraArgs: LINK_STATS_ARGS,
  });
  // The up direction carries the paste: its counters split the time into wire and idle.
  const linkWatch = watchLink(emu.child, 'up');
  browser = await launchBrowser();
  const page = browser.page;
  await page.goto(newSession(relay.url.replace('#token=', `#wt_port=${emuPort}&token=`)));
  await waitForPrompt(page, 30000);
  await typeLine(page, 'cat >/dev/null');
  await sleep(1000);

  // Echo, measured on the screen (key-echo.mjs) into `cat >/dev/null`.
  const typist = keyEcho(page);
  const typeKeys = typist.type;

  const idle = await typeKeys(KEYS);
  const idleSrtt = (await stats(page)).core.srttMs;
  await page.evaluate(() => window.tern.holdKeysDuringPaste(false));
  await page.evaluate((eager) => window.tern.eagerPaste(eager), EAGER);
  if (QUEUE_TARGET != null) await page.evaluate((ms) => window.tern.pasteQueueTarget(ms), Number(QUEUE_TARGET));
  const png = makePng(SIZE, 42);
  await loadFile(page, png);
  const t0 = Date.now();
  const linkFrom = linkWatch.now();
  await pasteLoaded(page);
  await until(async () => (await stats(page)).paste.uploadBytesSent > 0, { what: 'the upload to start' });
  const trace = [];
  const during = await typeKeys(0, async () => {
    const p = (await stats(page)).paste;
    if (p.progress) trace.push({ ...p.progress, srttMs: (await stats(page)).core.srttMs });
    return p.active;
  });
  await until(async () => (await stats(page)).paste.completed >= 1, { timeout: 300000, what: 'the upload' });
  const wallMs = Date.now() - t0;
  const linkTo = linkWatch.now();
  const s1 = (await stats(page)).paste;
  if (s1.failed) throw new Error(`upload failed: ${s1.lastError}`);

  // The same picture again: the page remembers it, so nothing is asked or sent.
  await pasteLoaded(page);
  await until(async () => (await stats(page)).paste.pathsTyped >= 2, { what: 'the repeat paste' });
  const s2 = (await stats(page)).paste;

  const limitMs = (png.length * 8 / rateBps) * 1000;
  const result = {
    size: png.length, rate: RATE, rttMs: RTT, queue: QUEUE,
    uploadMs: s1.lastUploadMs, wallMs, limitMs, eager: s1.eager, queueTargetMs: s1.queueTargetMs ?? 5,
    firstByteWaitMs: s1.lastFirstByteWaitMs, readMs: s1.lastReadMs,
    ratio: s1.lastUploadMs / limitMs,
    echoIdleMs: summary(idle), echoDuringMs: summary(during),
    echoMedianDeltaMs: pct(during, 0.5) - pct(idle, 0.5),
    repeatBytesSent: s2.uploadBytesSent - s1.uploadBytesSent,
    streams: s1.streams, uploadBytesSent: s1.uploadBytesSent,
    srttIdleMs: idleSrtt,
    link: linkSummary(linkWatch, { t0: linkFrom, t1: linkTo, contentBytes: png.length, rateBps }),
    // The pacer's view over the middle of the upload (first and last fifth left out).
    pacer: (() => {
      const mid = trace.slice(Math.floor(trace.length / 5), Math.ceil(trace.length * 4 / 5));
      const rates = mid.map((t) => t.rate).filter((r) => r != null);
      return {
        rateMedianBps: pct(rates, 0.5) * 8, windowMedianBytes: pct(mid.map((t) => t.window), 0.5),
        inFlightMedianBytes: pct(mid.map((t) => t.inFlight), 0.5), minRttMs: trace.at(-1)?.minRttMs ?? null,
        moshSrttMedianMs: pct(mid.map((t) => t.srttMs), 0.5),
        pacingRateMedianBps: pct(mid.map((t) => t.pacingRate).filter((r) => r != null), 0.5) * 8,
        queueMedianMs: pct(mid.map((t) => t.queueMs).filter((q) => q != null), 0.5),
        queueP90Ms: pct(mid.map((t) => t.queueMs).filter((q) => q != null), 0.9),
      };
    })(),
  };
  console.log(`paste benchmark: ${(png.length / 1e6).toFixed(1)} MB over ${RATE}, ${RTT} ms RTT, ${QUEUE} queue`);
  console.log(`  upload (first byte to path): ${(result.uploadMs / 1000).toFixed(2)} s; link limit ${(limitMs / 1000).toFixed(2)} s; ratio ${result.ratio.toFixed(3)} (paste to path: ${(wallMs / 1000).toFixed(2)} s)`);
  console.log(`  pacer queue target ${result.queueTargetMs} ms`);
  console.log(`  start: eager ${result.eager ? 'on' : 'off'}; paste event to the file read and hashed ${fmt(result.readMs)} ms, then to its first byte ${fmt(result.firstByteWaitMs)} ms`);
  console.log(`  ${describeLink(result.link)}`);
  console.log(`  echo idle:   median ${fmt(result.echoIdleMs.median)} ms, p90 ${fmt(result.echoIdleMs.p90)}, max ${fmt(result.echoIdleMs.max)} (n=${idle.length})`);
  console.log(`  echo upload: median ${fmt(result.echoDuringMs.median)} ms, p90 ${fmt(result.echoDuringMs.p90)}, max ${fmt(result.echoDuringMs.max)} (n=${during.length})`);
  console.log(`  echo median during upload minus idle: ${fmt(result.echoMedianDeltaMs)} ms`);
  console.log(`  repeated paste sent ${result.repeatBytesSent} bytes`);
  const pc = result.pacer;
  console.log(`  pacer (middle of the upload): rate estimate ${(pc.rateMedianBps / 1e6).toFixed(2)} Mbit/s, window ${(pc.windowMedianBytes / 1024).toFixed(0)} KiB, in flight ${(pc.inFlightMedianBytes / 1024).toFixed(0)} KiB, min RTT ${fmt(pc.minRttMs)} ms`);
  console.log(`  pacer: pacing rate (median) ${(pc.pacingRateMedianBps / 1e6).toFixed(2)} Mbit/s, standing queue median ${fmt(pc.queueMedianMs)} ms, p90 ${fmt(pc.queueP90Ms)} ms`);
  if (process.env.PASTE_TRACE) console.log(JSON.stringify(trace.map((t) => [t.acked, t.inFlight, t.rate, t.pacingRate, t.queueMs && +t.queueMs.toFixed(1)])));
  console.log(`  mosh SRTT: idle ${fmt(result.srttIdleMs)} ms, during the upload (median) ${fmt(pc.moshSrttMedianMs)} ms`);
  if (JSON_OUT) console.log(JSON.stringify(result));
} finally {
  await browser?.close();
  await emu?.stop();
  await stopRelay(relay);
  cleanupState(stateDir);
}
