// Keystroke echo in the browser through an emulated link, for the benchmark suite (tern-bench's
// `browser` module calls it once per RTT and parses the JSON line; docs/BENCHMARKS.md, "How the
// suite measures").
//
//   node tests/browser/bench/echo-bench.mjs [--rtt 200] [--warmup 3] [--keys 25] [--seed 1 | --gaps MS,MS,..]
//                                     [--transport webtransport|websocket] [--hops]
//                                     [--loss PERCENT] [--datagram-api chromium|safari] [--json]
//
// Headless Chromium, the real tern-relay in spawn mode (mosh-server, a shell), the page loaded
// through a TCP proxy that delays each direction by RTT/2, and linkemu between the page's
// WebTransport and the relay (`#wt_port=`), delay RTT/2 each way: both paths see the RTT, as on
// a real link (the page's WebTransport patience grows with the time `/api/info` took; with only
// UDP delayed, WebTransport at RTT 500 lost the race to the fallback). With
// `--transport websocket`: WebTransport is pointed at a UDP socket that drops everything (a
// firewall that blocks UDP silently, the slow case: the page waits out its WebTransport patience),
// so the session runs over the WebSocket fallback through the same delay. `firstFrameMs` in the
// output is navigation start → the first frame with the server's screen (the page's stats), for
// the suite's "page load to a prompt, UDP blocked minus UDP open" row. Distinct letters are
// typed at a short prompt (`tern$ `) a random 150-400 ms apart (a typist's pace whatever the RTT,
// as the suite types for tern-probe and mosh-client), so at high RTT several keys are in flight.
// Per key, all on the page's clock (performance.now()):
//   screen: key handed to xterm.js → the frame that shows the letter on the core's screen is
//           written to xterm.js (checked at every frame write, and polled as a fallback);
//   send:   key handed to xterm.js → the next datagram handed to WebTransport's datagram writer
//           (the page's key-to-wire; Chromium's own QUIC send is after it and not included);
//   core:   the page's own echo statistic (docs/BROWSER.md, "Echo latency"), for comparison.
// `--loss PERCENT`: instead of the proxy and linkemu, the whole run (Chromium, tern-relay,
// mosh-server) happens in a network namespace of its own, and the page reaches the relay through
// linkemu's TUN link (delay RTT/2 each way and this loss, for the page's TCP and UDP alike: the
// kernel's own TCP retransmits, so the fallback's head-of-line blocking is real; this kernel has
// no netem). docs/LINK-EMULATOR.md, "TUN mode".
// `--hops` (WebTransport only) splits each key's echo by hop, on one clock (the machine's wall
// clock: the page's performance.timeOrigin + now(), and tern-relay's trace log of every datagram it
// forwards, `RUST_LOG=tern_relay::hops=trace`): page key → datagram written; written → relay got
// it (Chromium's QUIC send, the emulator's RTT/2, wtransport's receive); relay → mosh-server →
// relay (the server's turn and the relay's UDP); relay sent the echo frame → the page read it
// (wtransport's send, RTT/2, Chromium's receive and its hand-over to the page); read → frame
// written to xterm.js (the core and the page's drawing).
// `--datagram-api safari` (WebTransport only) gives the page Safari's datagram API before its
// scripts run (lib/safari-shape.mjs: no `datagrams.writable`, only `createWritable()`, handing out
// Chromium's own writable), for the suite's "Safari's datagram API / Chromium's" row; the run
// fails unless the page used `createWritable()`.
// Prints a summary, and with --json one JSON object on the last line with the raw samples (the
// suite computes medians and p95s itself, as for the other clients).
import dgram from 'node:dgram';
import {
  inOwnNetns, startTunLink, freePort, startRelay, stopRelay, launchBrowser, until, screen, stats, waitForPrompt, typeLine,
  tempDir, sleep, cleanupState, startLinkemu, cliArg, delayProxy,
} from '../lib/helpers.mjs';
import { safariDatagramShape } from '../lib/safari-shape.mjs';

const arg = cliArg;
const RTT = Number(arg('rtt', 200));
const WARMUP = Number(arg('warmup', 3));
const KEYS = Number(arg('keys', 25));
const SEED = Number(arg('seed', 1));
const JSON_OUT = process.argv.includes('--json');
const TRANSPORT = arg('transport', 'webtransport');
const HOPS = process.argv.includes('--hops');
const LOSS = arg('loss', null);
if (LOSS !== null) inOwnNetns();
// The pause before each key (the suite passes tern-probe's, so both type at the same moments).
const GAPS = arg('gaps', '') ? arg('gaps', '').split(',').map(Number) : null;
if (HOPS && TRANSPORT !== 'webtransport') throw new Error('--hops times WebTransport only');
if (HOPS) process.env.RUST_LOG = 'info,tern_relay::hops=trace';
if (!['webtransport', 'websocket'].includes(TRANSPORT)) throw new Error(`--transport ${TRANSPORT}?`);
const DATAGRAM_API = arg('datagram-api', 'chromium');
if (!['chromium', 'safari'].includes(DATAGRAM_API)) throw new Error(`--datagram-api ${DATAGRAM_API}?`);
if (DATAGRAM_API === 'safari' && TRANSPORT !== 'webtransport') throw new Error('--datagram-api safari needs WebTransport');

// 52 distinct letters: every key's echo is told apart from its neighbours'.
const LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
if (WARMUP + KEYS > LETTERS.length) throw new Error(`at most ${LETTERS.length} keys`);

// xorshift32 from the seed: the same gaps in every run with this seed.
let rng = (SEED * 2654435761) >>> 0 || 1;
const random = () => {
  rng ^= rng << 13; rng >>>= 0; rng ^= rng >>> 17; rng ^= rng << 5; rng >>>= 0;
  return rng / 2 ** 32;
};

const token = 'echo-bench-' + Math.random().toString(36).slice(2);
const stateDir = tempDir('tern-echo-bench-state-');
let relay, emu, proxy, blackHole, browser, tun;
try {
  // The TUN link first: it brings up the namespace's loopback, which freePort needs.
  if (LOSS !== null) tun = await startTunLink({ link: `delay=${RTT / 2}ms,loss=${LOSS}%`, seed: SEED });
  const port = await freePort();
  // Off loopback the relay insists on TLS: its self-signed certificate (the page's WebTransport
  // pins its hash as always; Chromium is told to accept it for the page).
  relay = tun
    ? await startRelay({ port, token, stateDir, host: '0.0.0.0', args: ['--tls-self-signed'] })
    : await startRelay({ port, token, stateDir });
  let origin, wtPort;
  if (tun) {
    // Both transports cross the TUN link to the relay's own port; a UDP port where nothing
    // listens stands for blocked UDP (the link passes no ICMP errors back: silence).
    origin = `https://${tun.far}:${port}`;
    wtPort = TRANSPORT === 'webtransport' ? port : await freePort();
  } else {
    const emuPort = await freePort();
    const proxyPort = await freePort();
    proxy = await delayProxy(proxyPort, port, RTT / 2);
    origin = `http://127.0.0.1:${proxyPort}`;
    wtPort = emuPort;
    if (TRANSPORT === 'webtransport') {
      emu = await startLinkemu({ listenPort: emuPort, targetPort: port, link: `delay=${RTT / 2}ms` });
    } else {
      blackHole = dgram.createSocket('udp4');
      await new Promise((res) => blackHole.bind(0, '127.0.0.1', res));
      wtPort = blackHole.address().port;
    }
  }
  browser = await launchBrowser(tun ? { args: ['--ignore-certificate-errors'] } : undefined);
  const page = browser.page;
  if (DATAGRAM_API === 'safari') await page.addInitScript(safariDatagramShape);
  // Before the page's scripts run: note when each datagram is handed to a WebTransport writer.
  // The core writes datagrams synchronously on their own writer (docs/BROWSER.md); chunks of at
  // most 1500 bytes are datagrams (upload stream chunks are larger, and there is no upload here).
  await page.addInitScript(() => {
    window.__benchWrites = [];
    // For --hops, on the wall clock with lengths: datagrams written, and chunks read (a datagram
    // read resolves with at most 1500 bytes; the few control lines are told apart by length).
    window.__benchWallWrites = [];
    window.__benchWallReads = [];
    const wall = () => performance.timeOrigin + performance.now();
    const write = WritableStreamDefaultWriter.prototype.write;
    WritableStreamDefaultWriter.prototype.write = function (chunk) {
      if (chunk && chunk.byteLength !== undefined && chunk.byteLength <= 1500) {
        window.__benchWrites.push(performance.now());
        window.__benchWallWrites.push({ t: wall(), len: chunk.byteLength });
      }
      return write.call(this, chunk);
    };
    const read = ReadableStreamDefaultReader.prototype.read;
    ReadableStreamDefaultReader.prototype.read = function () {
      return read.call(this).then((r) => {
        if (r && r.value && r.value.byteLength !== undefined && r.value.byteLength <= 1500) {
          window.__benchWallReads.push({ t: wall(), len: r.value.byteLength });
        }
        return r;
      });
    };
    // Over the fallback a datagram is a WebSocket message of kind 0x00.
    const send = WebSocket.prototype.send;
    WebSocket.prototype.send = function (data) {
      if (data && data[0] === 0x00 && data.byteLength <= 1500) window.__benchWrites.push(performance.now());
      return send.call(this, data);
    };
  });
  // The page through the delaying proxy; WebTransport through linkemu, or (fallback) to a port
  // where nothing listens.
  // Prediction off: this measures the echo path against mosh-client's protocol-level echo (the
  // predictive rows measure prediction). With it on, a letter already drawn as a prediction makes
  // the server's echo frame write nothing to xterm.js, and only the slow poll saw the echo.
  await page.goto(`${origin}/#session=new&predict=never&wt_port=${wtPort}&token=${token}`);
  await waitForPrompt(page, 30000);
  // A short, known prompt so the typed letters are easy to find on its line.
  await typeLine(page, "PS1='tern$ '; clear");
  await until(async () => (await screen(page)).trimEnd().endsWith('tern$'), { timeout: 20000, what: 'the tern$ prompt' });
  await sleep(1000);

  // In the page: a key goes to xterm.js's input (as typing does). The core's screen is checked
  // each time the page writes a frame to xterm.js (so an echo is timed when it is handed to
  // xterm.js, as docs/BROWSER.md's echo statistic is), and by a slow poll as a fallback (Chromium
  // clamps nested timers to 4 ms, too coarse to be the clock; every 50 ms keeps it out of the way
  // of the page's own send timers). `seenAtWrite` in the output says which one saw them.
  await page.evaluate(() => {
    const keys = [];
    window.__benchKeys = keys;
    window.__benchByWrite = 0;
    const check = (byWrite) => {
      const line = window.tern.screenText().split('\n').findLast((l) => l.includes('tern$ ')) ?? '';
      const typed = line.slice(line.lastIndexOf('tern$ ') + 6);
      const now = performance.now();
      for (let i = 0; i < keys.length; i++) {
        if (keys[i].echo === null && typed.length > i && typed[i] === keys[i].ch) {
          keys[i].echo = now;
          if (byWrite) window.__benchByWrite++;
        }
      }
    };
    const term = window.tern.term;
    const write = term.write;
    term.write = function (...args) {
      const r = write.apply(this, args);
      if (keys.length) check(true);
      return r;
    };
    window.__benchKey = (ch) => {
      const t0 = performance.now();
      window.tern.term.input(ch, true);
      keys.push({ ch, t0, echo: null, wallOffset: performance.timeOrigin });
      if (keys.length === 1) {
        const poll = () => {
          check(false);
          if (keys.some((k) => k.echo === null) || !window.__benchDone) setTimeout(poll, 50);
        };
        poll();
      }
    };
  });
  const total = WARMUP + KEYS;
  for (let i = 0; i < total; i++) {
    await page.evaluate((ch) => window.__benchKey(ch), LETTERS[i]);
    await sleep(GAPS ? GAPS[i] ?? 0 : 150 + random() * 250);
  }
  await page.evaluate(() => { window.__benchDone = true; });
  await until(() => page.evaluate(() => window.__benchKeys.every((k) => k.echo !== null)), {
    timeout: 5000 + 4 * RTT, what: 'the last echoes',
  }).catch(() => { /* counted as missing below */ });
  const { keys, writes, byWrite, wallWrites, wallReads } = await page.evaluate(() => ({
    keys: window.__benchKeys, writes: window.__benchWrites, byWrite: window.__benchByWrite,
    wallWrites: window.__benchWallWrites, wallReads: window.__benchWallReads,
  }));
  const s = await stats(page);
  const shape = await page.evaluate(() => window.__safariShape ?? null);
  if (DATAGRAM_API === 'safari' && !(shape?.installed && shape.createWritableCalls >= 1)) {
    throw new Error(`Safari's datagram API was not used: ${JSON.stringify(shape)}`);
  }

  const counted = keys.slice(WARMUP);
  // The first datagram written at or after the key (before the next key): the one carrying it.
  const sendMs = counted.map((k, i) => {
    const next = keys[WARMUP + i + 1]?.t0 ?? Infinity;
    const w = writes.find((t) => t >= k.t0 && t < next);
    return w === undefined ? null : w - k.t0;
  });
  const result = {
    rttMs: RTT, lossPercent: LOSS === null ? 0 : Number(LOSS), warmup: WARMUP, keys: KEYS,
    screenMs: counted.map((k) => (k.echo === null ? null : k.echo - k.t0)),
    sendMs,
    missing: counted.filter((k) => k.echo === null).length,
    // Echoes seen at a frame write (the rest by the poll; all of them should be by the write).
    seenAtWrite: byWrite,
    coreEchoMs: s.echo.samplesMs.slice(-KEYS),
    srttMs: s.core.srttMs,
    droppedUnknownBase: s.core.droppedUnknownBase,
    transport: s.transport,
    datagramApi: DATAGRAM_API,
    firstFrameMs: s.firstFrameMs,
  };
  if (HOPS) result.hops = splitHops(keys.slice(WARMUP), wallWrites, wallReads, relay.log());
  if (s.transport !== TRANSPORT) throw new Error(`asked for ${TRANSPORT}, the page used ${s.transport}`);
  const med = (xs) => {
    const v = xs.filter((x) => x != null).sort((a, b) => a - b);
    return v.length ? v[Math.floor((v.length - 1) / 2)].toFixed(1) : '-';
  };
  const api = DATAGRAM_API === 'safari' ? " (Safari's datagram API)" : '';
  console.log(`browser echo over ${s.transport}${api} at RTT ${RTT} ms: ${KEYS} keys (+${WARMUP} warm-up), ${result.missing} without echo`);
  console.log(`  key → screen median ${med(result.screenMs)} ms; key → datagram written median ${med(sendMs)} ms; core echo median ${med(result.coreEchoMs)} ms; SRTT ${s.core.srttMs.toFixed(1)} ms; first frame ${s.firstFrameMs?.toFixed(0)} ms after navigation`);
  if (HOPS) {
    const h = result.hops;
    console.log(`  hops (median ms): key → written ${med(h.keyToWrite)}; written → relay ${med(h.up)} (RTT/2 = ${RTT / 2}); ` +
      `relay → mosh-server → relay ${med(h.server)}; relay → page read ${med(h.down)} (RTT/2 = ${RTT / 2}); ` +
      `read → frame written ${med(h.readToScreen)}; ${h.matched} of ${KEYS} keys matched`);
  }
  if (JSON_OUT) console.log(JSON.stringify(result));
} finally {
  await browser?.close();
  await emu?.stop();
  await proxy?.stop();
  blackHole?.close();
  await tun?.stop();
  await stopRelay(relay);
  cleanupState(stateDir);
}

/// Per key, on the wall clock (ms): each hop of its echo (see the header), from the page's
/// datagram writes and reads and the relay's trace log of what it forwarded.
function splitHops(keys, wallWrites, wallReads, relayLog) {
  const events = [];
  for (const line of relayLog.split('\n')) {
    const m = line.match(/^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z.*tern_relay::hops: (browser → server|server → browser) len=(\d+)/);
    if (!m) continue;
    const t = Date.parse(`${m[1]}Z`) + Number(m[2] ?? 0) * 1000;
    events.push({ t, up: m[3] === 'browser → server', len: Number(m[4]) });
  }
  const out = { keyToWrite: [], up: [], server: [], down: [], readToScreen: [], matched: 0 };
  for (const k of keys) {
    if (k.echo === null) continue;
    const key = k.wallOffset + k.t0;
    const shown = k.wallOffset + k.echo;
    const w = wallWrites.find((x) => x.t >= key);
    const r = wallReads.findLast((x) => x.t <= shown);
    if (!w || !r) continue;
    const got = events.find((e) => e.up && e.len === w.len && e.t >= w.t - 1);
    const sent = events.findLast((e) => !e.up && e.len === r.len && e.t <= r.t + 1);
    if (!got || !sent || sent.t < got.t) continue;
    out.matched++;
    out.keyToWrite.push(w.t - key);
    out.up.push(got.t - w.t);
    out.server.push(sent.t - got.t);
    out.down.push(r.t - sent.t);
    out.readToScreen.push(shown - r.t);
  }
  return out;
}
