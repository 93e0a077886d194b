// Keystroke echo in the browser through an emulated link, for the benchmark suite (tern-bench's
// `browser` module calls it once per RTT and parses the JSON line; docs/BENCHMARKS.md, "How the
// suite measures").
//
//   node tests/browser/echo-bench.mjs [--rtt 200] [--warmup 3] [--keys 25] [--seed 1]
//                                     [--transport webtransport|websocket] [--json]
//
// Headless Chromium, the real tern-relay in spawn mode (mosh-server, a shell), and linkemu between
// the page's WebTransport and the relay (`#wt_port=`), delay RTT/2 each way. With
// `--transport websocket`: the page is loaded through a TCP proxy that delays each direction by
// RTT/2, and WebTransport is pointed at a dead UDP port, so the session runs over the WebSocket
// fallback through the same delay. Distinct letters are
// typed at a short prompt (`tern$ `) a random 150-400 ms apart (a typist's pace whatever the RTT,
// as the suite types for tern-probe and mosh-client), so at high RTT several keys are in flight.
// Per key, all on the page's clock (performance.now()):
//   screen: key handed to xterm.js → the frame that shows the letter on the core's screen is
//           written to xterm.js (checked at every frame write, and polled as a fallback);
//   send:   key handed to xterm.js → the next datagram handed to WebTransport's datagram writer
//           (the page's key-to-wire; Chromium's own QUIC send is after it and not included);
//   core:   the page's own echo statistic (docs/BROWSER.md, "Echo latency"), for comparison.
// Prints a summary, and with --json one JSON object on the last line with the raw samples (the
// suite computes medians and p95s itself, as for the other clients).
import net from 'node:net';
import {
  freePort, startRelay, stopRelay, launchBrowser, until, screen, stats, waitForPrompt, typeLine,
  tempDir, sleep, cleanupState, startLinkemu, cliArg,
} from './helpers.mjs';

const arg = cliArg;
const RTT = Number(arg('rtt', 200));
const WARMUP = Number(arg('warmup', 3));
const KEYS = Number(arg('keys', 25));
const SEED = Number(arg('seed', 1));
const JSON_OUT = process.argv.includes('--json');
const TRANSPORT = arg('transport', 'webtransport');
if (!['webtransport', 'websocket'].includes(TRANSPORT)) throw new Error(`--transport ${TRANSPORT}?`);

/// A TCP proxy that delays every chunk by `delayMs` in each direction (order kept: equal delays).
function delayProxy(listenPort, targetPort, delayMs) {
  const sockets = new Set();
  const later = (to) => (chunk) => setTimeout(() => to.write(chunk), delayMs);
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      s.setNoDelay(true);
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => { client.destroy(); upstream.destroy(); });
    }
    client.on('data', later(upstream));
    upstream.on('data', later(client));
    client.on('end', () => setTimeout(() => upstream.end(), delayMs));
    upstream.on('end', () => setTimeout(() => client.end(), delayMs));
  });
  return new Promise((res) => server.listen(listenPort, '127.0.0.1', () => res({
    stop: () => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(r); }),
  })));
}
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
const port = await freePort();
const stateDir = tempDir('tern-echo-bench-state-');
let relay, emu, browser;
try {
  relay = await startRelay({ port, token, stateDir });
  const emuPort = await freePort();
  emu = TRANSPORT === 'webtransport'
    ? await startLinkemu({ listenPort: emuPort, targetPort: port, link: `delay=${RTT / 2}ms` })
    : await delayProxy(emuPort, port, RTT / 2);
  browser = await launchBrowser();
  const page = browser.page;
  // Before the page's scripts run: note when each datagram is handed to a WebTransport writer.
  // The core writes datagrams synchronously on their own writer (docs/BROWSER.md); chunks of at
  // most 1500 bytes are datagrams (upload stream chunks are larger, and there is no upload here).
  await page.addInitScript(() => {
    window.__benchWrites = [];
    const write = WritableStreamDefaultWriter.prototype.write;
    WritableStreamDefaultWriter.prototype.write = function (chunk) {
      if (chunk && chunk.byteLength !== undefined && chunk.byteLength <= 1500) {
        window.__benchWrites.push(performance.now());
      }
      return write.call(this, chunk);
    };
    // Over the fallback a datagram is a WebSocket message of kind 0x00.
    const send = WebSocket.prototype.send;
    WebSocket.prototype.send = function (data) {
      if (data && data[0] === 0x00 && data.byteLength <= 1500) window.__benchWrites.push(performance.now());
      return send.call(this, data);
    };
  });
  if (TRANSPORT === 'webtransport') {
    await page.goto(relay.url.replace('#token=', `#wt_port=${emuPort}&token=`));
  } else {
    // The page through the delaying proxy; WebTransport to a port where nothing listens.
    const dead = await freePort();
    await page.goto(`http://127.0.0.1:${emuPort}/#wt_port=${dead}&token=${token}`);
  }
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
      keys.push({ ch, t0, echo: null });
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
    await sleep(150 + random() * 250);
  }
  await page.evaluate(() => { window.__benchDone = true; });
  await until(() => page.evaluate(() => window.__benchKeys.every((k) => k.echo !== null)), {
    timeout: 5000 + 4 * RTT, what: 'the last echoes',
  }).catch(() => { /* counted as missing below */ });
  const { keys, writes, byWrite } = await page.evaluate(() => ({
    keys: window.__benchKeys, writes: window.__benchWrites, byWrite: window.__benchByWrite,
  }));
  const s = await stats(page);

  const counted = keys.slice(WARMUP);
  // The first datagram written at or after the key (before the next key): the one carrying it.
  const sendMs = counted.map((k, i) => {
    const next = keys[WARMUP + i + 1]?.t0 ?? Infinity;
    const w = writes.find((t) => t >= k.t0 && t < next);
    return w === undefined ? null : w - k.t0;
  });
  const result = {
    rttMs: RTT, warmup: WARMUP, keys: KEYS,
    screenMs: counted.map((k) => (k.echo === null ? null : k.echo - k.t0)),
    sendMs,
    missing: counted.filter((k) => k.echo === null).length,
    // Echoes seen at a frame write (the rest by the poll; all of them should be by the write).
    seenAtWrite: byWrite,
    coreEchoMs: s.echo.samplesMs.slice(-KEYS),
    srttMs: s.core.srttMs,
    droppedUnknownBase: s.core.droppedUnknownBase,
    transport: s.transport,
  };
  if (s.transport !== TRANSPORT) throw new Error(`asked for ${TRANSPORT}, the page used ${s.transport}`);
  const med = (xs) => {
    const v = xs.filter((x) => x != null).sort((a, b) => a - b);
    return v.length ? v[Math.floor((v.length - 1) / 2)].toFixed(1) : '-';
  };
  console.log(`browser echo over ${s.transport} at RTT ${RTT} ms: ${KEYS} keys (+${WARMUP} warm-up), ${result.missing} without echo`);
  console.log(`  key → screen median ${med(result.screenMs)} ms; key → datagram written median ${med(sendMs)} ms; core echo median ${med(result.coreEchoMs)} ms; SRTT ${s.core.srttMs.toFixed(1)} ms`);
  if (JSON_OUT) console.log(JSON.stringify(result));
} finally {
  await browser?.close();
  await emu?.stop();
  await stopRelay(relay);
  cleanupState(stateDir);
}
