// Download benchmark: `tern send FILE` in the shell over an emulated slow link, in headless
// Chromium, through the real tern-relay, mosh-server and a shell (docs/BENCHMARKS.md, "Download
// (tern send)"). The paste benchmark's roles swapped: the relay sends, paced by the same pacer
// (`tern::transfer::Upload`) on the page's acks, and the bottleneck is relay → page.
//
//   node tests/browser/bench/download-bench.mjs [--size 13400000] [--rate 9mbit] [--rtt 80] [--queue 1s] [--keys 40] [--json]
//
// Prints (and with --json, one JSON object on the last line):
//   download time (the first byte at the page → the browser's download event) / link limit
//   (size x 8 / rate), also from the page's first sight of the offer;
//   keystroke echo latency while idle and during the download (a key handed to xterm.js until its
//   echo is on the core's screen; keys into `cat >/dev/null`, one every 150 ms);
//   what the page saw of the pacer: its receive rate (stats().download.rate), the longest gap
//   between reads, mosh's SRTT.
// The link: linkemu between the page's WebTransport and the relay, delay RTT/2 each way, the
// rate and bottleneck queue (queue-delay) in both directions, as the paste benchmark. Needs
// scripts/build-wasm.sh first.
import { randomBytes, createHash } from 'node:crypto';
import { writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { rateBitsPerSecond, LINK_STATS_ARGS, watchLink, summary as linkSummary, describe as describeLink } from './link-usage.mjs';
import {
  freePort, startRelay, stopRelay, launchBrowser, until, stats, waitForPrompt, typeLine,
  tempDir, sleep, cleanupState, startLinkemu, cliArg, newSession, pageDetail,
} from '../lib/helpers.mjs';
import { keyEcho, pct, summary, fmt } from './key-echo.mjs';

const arg = cliArg;
const SIZE = Number(arg('size', 13_400_000));
const RATE = arg('rate', '9mbit');
const RTT = Number(arg('rtt', 80));
const QUEUE = arg('queue', '1s');
const KEYS = Number(arg('keys', 40));
const JSON_OUT = process.argv.includes('--json');
const READS = !!process.env.DOWNLOAD_READS;
const rateBps = rateBitsPerSecond(RATE);

const sha256 = (b) => createHash('sha256').update(b).digest('hex');

// 16 characters at least (the relay refuses a shorter token): base36 of Math.random() can be 9.
const token = 'paste-dl-bench-' + Math.random().toString(36).slice(2);
const port = await freePort();
const stateDir = tempDir('tern-bench-state-');
const files = tempDir('tern-bench-send-');
let relay, emu, browser;
try {
  relay = await startRelay({ port, token, stateDir });
  const emuPort = await freePort();
  emu = await startLinkemu({
    listenPort: emuPort, targetPort: port,
    link: `delay=${RTT / 2}ms,rate=${RATE},queue-delay=${QUEUE}`,
    extraArgs: LINK_STATS_ARGS,
  });
  // The down direction carries the download: its counters split the time into wire and idle.
  const linkWatch = watchLink(emu.child, 'down');
  browser = await launchBrowser();
  const page = browser.page;
  // DOWNLOAD_READS=1: every read of every stream the page makes, and every line it writes, with
  // the page's time (what the relay's pacer is fed: the acks and the reads they are stamped by).
  if (READS) {
    await browser.context.addInitScript(() => {
      const log = { reads: [], writes: [] };
      window.__benchIo = log;
      const ids = new WeakMap();
      let next = 0;
      const read = ReadableStreamDefaultReader.prototype.read;
      ReadableStreamDefaultReader.prototype.read = function () {
        if (!ids.has(this)) ids.set(this, next++);
        const id = ids.get(this);
        return read.call(this).then((r) => {
          if (r.value && r.value.byteLength != null) log.reads.push([performance.now(), id, r.value.byteLength]);
          return r;
        });
      };
      const write = WritableStreamDefaultWriter.prototype.write;
      WritableStreamDefaultWriter.prototype.write = function (chunk) {
        if (chunk && chunk.byteLength != null && chunk.byteLength < 200 && chunk[0] === 0x7b) {
          log.writes.push([performance.now(), new TextDecoder().decode(chunk)]);
        }
        return write.call(this, chunk);
      };
    });
  }
  await page.goto(newSession(relay.url.replace('#token=', `#wt_port=${emuPort}&token=`)));
  await waitForPrompt(page, 30000);

  // The file: random bytes (nothing on the path compresses them).
  const bytes = randomBytes(SIZE);
  const path = join(files, 'bench.bin');
  writeFileSync(path, bytes);

  // The page's view of the download, on its own clock: every 20 ms what stats().download says
  // (only changes are kept), and the moment the page hands the checked file to the browser (its
  // <a download> click, the step before Chromium's download event).
  await page.evaluate(() => {
    const dl = { samples: [], clickAt: null };
    window.__benchDownload = dl;
    document.addEventListener('click', (e) => {
      if (e.target instanceof HTMLAnchorElement && e.target.download && dl.clickAt == null) dl.clickAt = performance.now();
    }, true);
    let last = '';
    dl.timer = setInterval(() => {
      const d = window.tern.stats().download;
      if (!d) return;
      const key = `${d.state} ${d.bytesDone} ${d.rate}`;
      if (key === last) return;
      last = key;
      dl.samples.push({ t: performance.now(), state: d.state, bytesDone: d.bytesDone, total: d.total, rate: d.rate ?? null });
    }, 20);
  });

  // Echo, measured on the screen (key-echo.mjs) into `cat >/dev/null`.
  const typist = keyEcho(page);
  const typeKeys = typist.type;

  await typeLine(page, 'cat >/dev/null');
  await sleep(1000);
  const idle = await typeKeys(KEYS);
  const idleSrtt = (await stats(page)).core.srttMs;
  // End that cat, then start the download in the background and a new cat in front of it (the
  // keys during the download go to it; the job's notice comes before cat starts, and its end
  // only at the next prompt).
  await page.evaluate(() => window.tern.term.input('\r\x04', true));
  await waitForPrompt(page);
  typist.newLine();
  const downloaded = page.waitForEvent('download', { timeout: 300000 });
  downloaded.catch(() => {}); // awaited below; a failure before then is the one to report
  const nodeStart = Date.now();
  const linkFrom = linkWatch.now();
  await typeLine(page, `tern send ${path} </dev/null >${files}/send.log 2>&1 & cat >/dev/null`);
  await until(async () => (await stats(page)).download, { timeout: 30000, what: 'the offer', detail: pageDetail(page) });
  await sleep(300);
  const trace = [];
  const during = await typeKeys(0, async () => {
    const s = await stats(page);
    const d = s.download;
    if (d) trace.push({ bytesDone: d.bytesDone, rate: d.rate ?? null, srttMs: s.core.srttMs });
    return d && !['verifying', 'saved', 'failed'].includes(d.state);
  });
  const download = await downloaded;
  const linkTo = linkWatch.now();
  const nodeMs = Date.now() - nodeStart;
  const saved = join(files, 'saved.bin');
  await download.saveAs(saved);
  const identical = sha256(readFileSync(saved)) === sha256(bytes);
  await page.evaluate(() => window.tern.term.input('\x03', true));

  const view = await page.evaluate(async () => {
    const dl = window.__benchDownload;
    for (let i = 0; i < 100 && dl.clickAt == null; i++) await new Promise((r) => setTimeout(r, 10));
    clearInterval(dl.timer);
    return { samples: dl.samples, clickAt: dl.clickAt };
  });
  const s = view.samples;
  if (!s.length) throw new Error('the page never showed the download');
  const failed = s.find((x) => x.state === 'failed');
  if (failed) throw new Error(`the download failed: ${JSON.stringify((await stats(page)).download)}`);
  if (!identical) throw new Error('the saved file differs from the one sent');
  const offerAt = s[0].t;
  const firstByte = s.find((x) => x.bytesDone > 0);
  const lastByte = s.find((x) => x.bytesDone === x.total);
  const savedAt = view.clickAt;
  // Reads as the 20 ms poller saw them: the longest time the count did not move.
  let maxGapMs = 0;
  const moving = s.filter((x) => x.state === 'receiving' || x.bytesDone === x.total);
  for (let i = 1; i < moving.length; i++) {
    if (moving[i].bytesDone > moving[i - 1].bytesDone) maxGapMs = Math.max(maxGapMs, moving[i].t - moving[i - 1].t);
  }
  // Goodput per second of the download, from the samples (bytes at the page).
  const perSecond = [];
  if (firstByte && lastByte) {
    for (let t = firstByte.t; t + 1000 <= lastByte.t; t += 1000) {
      const at = (u) => { let b = 0; for (const x of s) { if (x.t <= u) b = x.bytesDone; else break; } return b; };
      perSecond.push((at(t + 1000) - at(t)) * 8);
    }
  }
  const limitMs = (SIZE * 8 / rateBps) * 1000;
  const downloadMs = savedAt - firstByte.t;
  const mid = trace.slice(Math.floor(trace.length / 5), Math.ceil(trace.length * 4 / 5));
  const result = {
    size: SIZE, rate: RATE, rttMs: RTT, queue: QUEUE,
    downloadMs, limitMs, ratio: downloadMs / limitMs,
    offerToSavedMs: savedAt - offerAt,
    offerToFirstByteMs: firstByte.t - offerAt,
    receiveMs: lastByte.t - firstByte.t,
    verifyMs: savedAt - lastByte.t,
    typedToDownloadEventMs: nodeMs,
    echoIdleMs: summary(idle), echoDuringMs: summary(during),
    echoMedianDeltaMs: pct(during, 0.5) - pct(idle, 0.5),
    srttIdleMs: idleSrtt,
    link: linkSummary(linkWatch, { t0: linkFrom, t1: linkTo, contentBytes: SIZE, rateBps }),
    identical,
    page: {
      rateMedianBps: (() => { const r = mid.map((t) => t.rate).filter((x) => x != null); return r.length ? pct(r, 0.5) * 8 : null; })(),
      goodputPerSecondBps: perSecond,
      goodputMedianBps: pct(perSecond, 0.5),
      maxReadGapMs: maxGapMs,
      moshSrttMedianMs: pct(mid.map((t) => t.srttMs), 0.5),
    },
  };
  console.log(`download benchmark: ${(SIZE / 1e6).toFixed(1)} MB over ${RATE}, ${RTT} ms RTT, ${QUEUE} queue`);
  console.log(`  download (first byte at the page to the browser's download): ${(downloadMs / 1000).toFixed(2)} s; link limit ${(limitMs / 1000).toFixed(2)} s; ratio ${result.ratio.toFixed(3)}`);
  console.log(`  offer to download ${(result.offerToSavedMs / 1000).toFixed(2)} s (${(result.offerToSavedMs / limitMs).toFixed(3)}x): offer to first byte ${fmt(result.offerToFirstByteMs)} ms, receiving ${(result.receiveMs / 1000).toFixed(2)} s, SHA-256 and save ${fmt(result.verifyMs)} ms; typed to Chromium's download event ${(nodeMs / 1000).toFixed(2)} s`);
  console.log(`  ${describeLink(result.link)}`);
  console.log(`  echo idle:     median ${fmt(result.echoIdleMs.median)} ms, p90 ${fmt(result.echoIdleMs.p90)}, max ${fmt(result.echoIdleMs.max)} (n=${idle.length})`);
  console.log(`  echo download: median ${fmt(result.echoDuringMs.median)} ms, p90 ${fmt(result.echoDuringMs.p90)}, max ${fmt(result.echoDuringMs.max)} (n=${during.length})`);
  console.log(`  echo median during the download minus idle: ${fmt(result.echoMedianDeltaMs)} ms`);
  const pg = result.page;
  console.log(`  the page: rate shown (median, middle) ${pg.rateMedianBps == null ? '-' : (pg.rateMedianBps / 1e6).toFixed(2)} Mbit/s; goodput per second median ${pg.goodputMedianBps == null ? '-' : (pg.goodputMedianBps / 1e6).toFixed(2)} Mbit/s [${perSecond.map((b) => (b / 1e6).toFixed(1)).join(' ')}]; longest read gap ${fmt(maxGapMs)} ms`);
  console.log(`  mosh SRTT: idle ${fmt(result.srttIdleMs)} ms, during the download (median) ${fmt(pg.moshSrttMedianMs)} ms`);
  if (READS) {
    const io = await page.evaluate(() => window.__benchIo);
    const file = join(process.env.DOWNLOAD_READS === '1' ? '/tmp' : process.env.DOWNLOAD_READS, 'download-reads.json');
    writeFileSync(file, JSON.stringify({ offerAt, firstByte: firstByte.t, lastByte: lastByte.t, ...io }));
    console.log(`  the page's reads and writes: ${file}`);
  }
  if (process.env.DOWNLOAD_TRACE) console.log(JSON.stringify(s.map((x) => [+(x.t - offerAt).toFixed(1), x.bytesDone])));
  if (JSON_OUT) console.log(JSON.stringify(result));
} finally {
  await browser?.close();
  await emu?.stop();
  await stopRelay(relay);
  cleanupState(stateDir);
  cleanupState(files);
}
