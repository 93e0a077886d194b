// `tern show` benchmark (docs/BENCHMARKS.md, "Pictures"): a picture printed in the shell drawn on
// the page over an emulated slow link, in headless Chromium, through the real tern-relay (its
// recorder lifts the picture), mosh-server and a shell; then many pictures scrolled past and the
// page's memory.
//
//   node tests/browser/bench/show-bench.mjs [--size 1000000] [--rate 9mbit] [--rtt 80] [--queue 1s] [--shows 3] [--keys 30] [--many 200] [--relay-bin PATH] [--next-ab] [--json]
//
// The page waits for the next picture the shell prints (images.js): its bytes leave the relay as
// soon as the recorder stores it. --next-ab also measures `--shows` pictures without that (each
// asked for when its marker is drawn, as before), alternating, the page reloaded between them.
//
// Prints (and with --json, one JSON object on the last line), medians over `--shows` pictures:
//   the picture's marker seen by the page → the picture drawn (its <img> decoded), against the
//   link's limit (size x 8 / rate); Enter on `tern show FILE` → marker, and → drawn;
//   keystroke echo while idle and while the picture arrives (key-echo.mjs, into `cat`);
//   after `--many` small pictures printed one after another and scrolled past: the browser's
//   memory (proportional set size of its processes, the renderers alone, the JS heap) against
//   before them, and how many pictures the page holds decoded.
import { readFileSync, readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { rateBitsPerSecond, LINK_STATS_ARGS } from './link-usage.mjs';
import { keyEcho, pct, summary, fmt } from './key-echo.mjs';
import {
  freePort, startRelay, stopRelay, launchBrowser, until, waitForPrompt, typeLine,
  tempDir, sleep, cleanupState, startLinkemu, cliArg, newSession, pageDetail,
} from '../lib/helpers.mjs';
import { makePng } from '../lib/paste.mjs';

const arg = cliArg;
const SIZE = Number(arg('size', 1_000_000));
const RATE = arg('rate', '9mbit');
const RTT = Number(arg('rtt', 80));
const QUEUE = arg('queue', '1s');
const SHOWS = Number(arg('shows', 3));
const KEYS = Number(arg('keys', 30));
const MANY = Number(arg('many', 200));
const JSON_OUT = process.argv.includes('--json');
const NEXT_AB = process.argv.includes('--next-ab');
// Another build of the relay (an A/B of a relay-side change in one session).
const RELAY_BIN = arg('relay-bin', null);
const rateBps = rateBitsPerSecond(RATE);

/// Memory of the browser this process launched: every process below this one whose name is
/// chromium's (the relay and the shells are below it too, and left out), proportional set sizes
/// (shared pages counted once across them), in bytes.
function browserMemory() {
  const procs = new Map(); // pid -> { ppid, comm, cmd }
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      procs.set(Number(d), { ppid, comm, cmd: readFileSync(`/proc/${d}/cmdline`, 'utf8') });
    } catch { /* gone meanwhile */ }
  }
  const mine = (pid) => {
    for (let p = pid, i = 0; p > 1 && i < 64; p = procs.get(p)?.ppid ?? 0, i++) if (p === process.pid) return true;
    return false;
  };
  let all = 0, renderers = 0, count = 0;
  for (const [pid, p] of procs) {
    if (!/chrom/.test(p.comm) || !mine(pid)) continue;
    let pss = 0;
    try {
      const m = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').match(/^Pss:\s+(\d+) kB/m);
      pss = m ? Number(m[1]) * 1024 : 0;
    } catch { continue; }
    all += pss; count++;
    if (p.cmd.includes('--type=renderer')) renderers += pss;
  }
  return { all, renderers, processes: count };
}

const token = 'show-bench-' + Math.random().toString(16).slice(2).padEnd(13, '0');
const port = await freePort();
const stateDir = tempDir('tern-bench-state-');
const files = tempDir('tern-bench-show-');
let relay, emu, browser;
try {
  relay = await startRelay({ port, token, stateDir, ...(RELAY_BIN ? { bin: RELAY_BIN } : {}) });
  const emuPort = await freePort();
  emu = await startLinkemu({
    listenPort: emuPort, targetPort: port,
    link: `delay=${RTT / 2}ms,rate=${RATE},queue-delay=${QUEUE}`,
    extraArgs: LINK_STATS_ARGS,
  });
  browser = await launchBrowser();
  const page = browser.page;
  await page.goto(newSession(relay.url.replace('#token=', `#wt_port=${emuPort}&token=`)));
  await waitForPrompt(page, 30000);

  // The page's view of pictures, on its own clock: when each id's marker was first placed and
  // when its <img> was first decoded on the screen (and whether it came as the next picture).
  const watchPictures = () => page.evaluate(() => {
    const seen = {};
    window.__benchShow = seen;
    seen.timer = setInterval(() => {
      const now = performance.now();
      for (const p of window.tern.images.placed()) {
        const s = (seen[p.id] ??= { marker: now, drawn: null, next: false });
        if (s.drawn == null) {
          const img = document.querySelector(`.tern-image[data-image="${p.id}"] img`);
          if (img?.complete && img.naturalWidth > 0) [s.drawn, s.next] = [now, p.next];
        }
      }
    }, 5);
  });
  await watchPictures();
  const pictures = () => page.evaluate(() => Object.fromEntries(Object.entries(window.__benchShow).filter(([k]) => k !== 'timer')));

  const typist = keyEcho(page);
  await typeLine(page, 'cat >/dev/null');
  await sleep(1000);
  const idle = await typist.type(KEYS);
  await page.evaluate(() => window.tern.term.input('\r\x04', true));
  await waitForPrompt(page);

  const runs = [];
  const during = [];
  const duringWithoutNext = [];
  for (let n = 0; n < (NEXT_AB ? 2 * SHOWS : SHOWS); n++) {
    const mode = NEXT_AB && n % 2 ? 'marker' : 'next';
    if (NEXT_AB) {
      await page.evaluate((m) => localStorage.setItem('tern.nextImage', m === 'next' ? 'on' : 'off'), mode);
      await page.reload();
      await waitForPrompt(page, 30000);
      await watchPictures();
      // The pictures still on the screen are fetched again by the reloaded page: done before this
      // one is printed, so that they do not share the link with it.
      await sleep(500);
      await until(() => page.evaluate(() => window.tern.images.placed().every((p) => p.drawn)), { what: 'the pictures on the screen drawn again', timeout: 30000 });
    }
    if (mode === 'next') {
      // The page's request for the next picture is at the relay before the picture is printed.
      await until(() => page.evaluate(() => window.tern.images.waitingNext()), { what: 'the page waiting for the next picture', timeout: 10000 })
        .catch(() => console.log('# the page is not waiting for the next picture (an older relay?)'));
    }
    const png = makePng(SIZE, 1000 + n); // a different picture each time: nothing cached
    const path = join(files, `show-${n}.png`);
    writeFileSync(path, png);
    // Ids only grow: this picture's is the first above every one shown before (a reloaded page
    // places the pictures still on its screen again, after this line would have looked).
    const newest = Math.max(0, ...runs.map((r) => r.id), ...Object.keys(await pictures()).map(Number));
    typist.newLine();
    await page.keyboard.type(`clear; tern show ${path}; cat >/dev/null`, { delay: 5 });
    const enterAt = await page.evaluate(() => { window.tern.term.input('\r', true); return performance.now(); });
    let id = null;
    await until(async () => {
      const now = await pictures();
      id = Object.keys(now).map(Number).filter((k) => k > newest).sort((a, b) => a - b)[0] ?? null;
      return id != null;
    }, { timeout: 60000, interval: 20, what: `picture ${n}'s marker`, detail: pageDetail(page) });
    // Keys while it comes (bounded: a picture that never comes fails the wait below, with why).
    const typingUntil = Date.now() + 60000;
    const echoes = await typist.type(0, async () => Date.now() < typingUntil && (await pictures())[id].drawn == null);
    (mode === 'next' ? during : duringWithoutNext).push(...echoes);
    await until(async () => (await pictures())[id].drawn != null, { timeout: 120000, interval: 20, what: `picture ${n} (${mode}) drawn`, detail: async () => `${JSON.stringify(await page.evaluate(() => [window.tern.images.placed(), [...document.querySelectorAll('.tern-image')].map((e) => [e.dataset.image, e.isConnected, e.querySelector('img')?.complete, e.querySelector('img')?.naturalWidth, e.querySelector('img')?.src])]))}\n${await pageDetail(page)()}` });
    const p = (await pictures())[id];
    runs.push({ id, mode, next: p.next, size: png.length, enterToMarkerMs: p.marker - enterAt, markerToDrawnMs: p.drawn - p.marker, enterToDrawnMs: p.drawn - enterAt, echoes });
    await page.evaluate(() => window.tern.term.input('\x03', true));
    await waitForPrompt(page);
  }
  const limitMs = (SIZE * 8 / rateBps) * 1000;
  const med = (k, mode = 'next') => pct(runs.filter((r) => r.mode === mode).map((r) => r[k]), 0.5);
  const nextRuns = runs.filter((r) => r.mode === 'next');

  // Many pictures scrolled past: small distinct ones printed one after another (a pause between
  // them, so that mosh's frames show each on the page's screen and the page fetches it).
  const memBefore = browserMemory();
  const cdp = await browser.context.newCDPSession(page);
  await cdp.send('Performance.enable');
  const heap = async () => (await cdp.send('Performance.getMetrics')).metrics.find((m) => m.name === 'JSHeapUsedSize')?.value ?? null;
  const heapBefore = await heap();
  const many = join(files, 'many');
  mkdirSync(many);
  for (let i = 0; i < MANY; i++) writeFileSync(join(many, `${String(i).padStart(4, '0')}.png`), makePng(40_000, 5000 + i));
  const placedBefore = Object.keys(await pictures()).length;
  await typeLine(page, `clear; for f in ${many}/*.png; do tern show --rows 4 "$f"; sleep 0.1; done; echo many-done`);
  await until(async () => /^many-done/m.test(await page.evaluate(() => window.tern.screenText())), { timeout: 600000, interval: 500, what: 'the pictures printed', detail: pageDetail(page) });
  await sleep(3000); // the last fetches land
  const seenMany = Object.keys(await pictures()).length - placedBefore;
  const memAfter = browserMemory();
  const heapAfter = await heap();
  const loaded = await page.evaluate(() => window.tern.images.loadedCount());

  const result = {
    size: SIZE, rate: RATE, rttMs: RTT, queue: QUEUE, shows: runs,
    limitMs, markerToDrawnMs: med('markerToDrawnMs'), enterToMarkerMs: med('enterToMarkerMs'), enterToDrawnMs: med('enterToDrawnMs'),
    ratio: med('markerToDrawnMs') / limitMs, ratioFromEnter: med('enterToDrawnMs') / limitMs,
    echoIdleMs: summary(idle), echoDuringMs: summary(during),
    echoMedianDeltaMs: during.length ? pct(during, 0.5) - pct(idle, 0.5) : null,
    // --next-ab: the same without waiting for the next picture (asked for when its marker is drawn).
    withoutNext: NEXT_AB ? {
      markerToDrawnMs: med('markerToDrawnMs', 'marker'), enterToDrawnMs: med('enterToDrawnMs', 'marker'),
      ratio: med('markerToDrawnMs', 'marker') / limitMs, ratioFromEnter: med('enterToDrawnMs', 'marker') / limitMs,
      echoDuringMs: summary(duringWithoutNext),
      echoMedianDeltaMs: duringWithoutNext.length ? pct(duringWithoutNext, 0.5) - pct(idle, 0.5) : null,
    } : null,
    // The pictures come in series on one link: the relay's pacer starts the later ones from the
    // rate the earlier ones found (docs/UPLOAD.md, "The remembered start"), so the first apart
    // (with --next-ab each picture has a link of its own: the page is reloaded between them).
    echoFirstMs: summary(nextRuns[0]?.echoes ?? []),
    echoLaterMs: summary(nextRuns.slice(1).flatMap((r) => r.echoes)),
    many: {
      printed: MANY, placed: seenMany, decodedHeld: loaded,
      browserPssBefore: memBefore.all, browserPssAfter: memAfter.all,
      rendererPssBefore: memBefore.renderers, rendererPssAfter: memAfter.renderers,
      jsHeapBefore: heapBefore, jsHeapAfter: heapAfter, processes: memAfter.processes,
    },
  };
  const mb = (b) => (b == null ? '-' : (b / 1048576).toFixed(1));
  console.log(`tern show benchmark: ${(SIZE / 1e6).toFixed(1)} MB PNG over ${RATE}, ${RTT} ms RTT, ${QUEUE} queue (${SHOWS} pictures, medians)`);
  console.log(`  marker on the page → drawn ${fmt(result.markerToDrawnMs)} ms; link limit ${fmt(limitMs)} ms; ratio ${result.ratio.toFixed(3)}`);
  console.log(`  Enter → marker ${fmt(result.enterToMarkerMs)} ms; Enter → drawn ${fmt(result.enterToDrawnMs)} ms (${result.ratioFromEnter.toFixed(3)}x the limit); ${runs.filter((r) => r.mode === 'next' && r.next).length} of ${runs.filter((r) => r.mode === 'next').length} came as the next picture`);
  if (result.withoutNext) {
    const w = result.withoutNext;
    console.log(`  without the next picture (asked at its marker): marker → drawn ${fmt(w.markerToDrawnMs)} ms, ratio ${w.ratio.toFixed(3)}; Enter → drawn ${fmt(w.enterToDrawnMs)} ms (${w.ratioFromEnter.toFixed(3)}x); echo during it median ${fmt(w.echoDuringMs.median)} ms, minus idle ${fmt(w.echoMedianDeltaMs)} ms (n=${duringWithoutNext.length})`);
  }
  console.log(`  echo idle:    median ${fmt(result.echoIdleMs.median)} ms, p90 ${fmt(result.echoIdleMs.p90)} (n=${idle.length})`);
  console.log(`  echo picture: median ${fmt(result.echoDuringMs.median)} ms, p90 ${fmt(result.echoDuringMs.p90)} (n=${during.length}); minus idle ${fmt(result.echoMedianDeltaMs)} ms`);
  const later = nextRuns.slice(1);
  console.log(`  echo first picture: median ${fmt(result.echoFirstMs.median)} ms (n=${nextRuns[0].echoes.length}), drawn/limit ${(nextRuns[0].markerToDrawnMs / limitMs).toFixed(3)}; later ones: median ${fmt(result.echoLaterMs.median)} ms (n=${later.flatMap((r) => r.echoes).length}), drawn/limit ${later.map((r) => (r.markerToDrawnMs / limitMs).toFixed(3)).join(' ')}`);
  const m = result.many;
  console.log(`  ${MANY} pictures printed, ${m.placed} seen by the page, ${m.decodedHeld} held decoded`);
  console.log(`  browser memory (PSS, ${m.processes} processes): ${mb(m.browserPssBefore)} → ${mb(m.browserPssAfter)} MB; renderers ${mb(m.rendererPssBefore)} → ${mb(m.rendererPssAfter)} MB; JS heap ${mb(m.jsHeapBefore)} → ${mb(m.jsHeapAfter)} MB`);
  if (JSON_OUT) console.log(JSON.stringify(result));
} finally {
  await browser?.close();
  await emu?.stop();
  await stopRelay(relay);
  cleanupState(stateDir);
  cleanupState(files);
}
