// Bytes on the wire for a first visit and a repeat visit, for the benchmark suite (tern-bench's
// `bytes` rows; docs/BROWSER.md, "Caching and the service worker"):
//
//   node tests/browser/bench/bytes-bench.mjs [--relay BIN] [--runs 3] [--json]
//
// One tern-relay (spawn mode) behind a counting TCP forwarder on loopback: every byte the relay
// sends the browser over HTTP is counted (headers included; the page's files, /api/*, what the
// service worker fetches, the favicon and manifest the browser fetches itself). The session's
// WebTransport goes to the relay's UDP port and is not counted: it is the session.
// Per run, a fresh headless Chromium profile: a first visit (`#session=new`), then a repeat visit
// (a new tab, `#session=new` again, in the same profile). Each visit is counted from its navigation
// until the relay has sent nothing for 3 s, at least 7 s after the prompt (the page registers its
// service worker once its session has settled, which then fetches what it caches).
// Two ways, in turns in the same run:
//   now:     as the page is served (brotli, hashed immutable names, the service worker);
//   before:  as the relay served it before issue 36: no compression (the browser asks for
//            `identity`), no HTTP cache (DevTools' cache disabled: the old `no-cache` without a
//            validator downloaded everything again), no service worker.
// Prints a summary, and with --json one JSON object on the last line:
//   { runs: { now: [{ first, repeat }], before: [...] } }  (bytes)
import { createServer, connect } from 'node:net';
import {
  freePort, launchBrowser, tempDir, cleanupState, cliArg, newSession, sleep, relayBinary, startRelay,
} from '../lib/helpers.mjs';

const RUNS = Number(cliArg('runs', 3));
const BIN = cliArg('relay', '') || relayBinary();
const JSON_OUT = process.argv.includes('--json');
const QUIET_MS = 3000;
const AFTER_PROMPT_MS = 7000;

/// A TCP forwarder to `target` counting the bytes that come back from it.
function countingForwarder(listenPort, target) {
  const sockets = new Set();
  const counter = { down: 0, last: Date.now() };
  const server = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => { client.destroy(); upstream.destroy(); });
    }
    upstream.on('data', (d) => { counter.down += d.length; counter.last = Date.now(); });
    client.pipe(upstream);
    upstream.pipe(client);
  });
  return new Promise((res) => server.listen(listenPort, '127.0.0.1', () => res({
    counter,
    close: () => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(r); }),
  })));
}


const hasPrompt = (page) => page.evaluate(() => {
  const term = window.tern?.term;
  if (!term) return false;
  const buf = term.buffer.active;
  for (let y = 0; y < term.rows; y++) if (/[$#]\s*$/.test(buf.getLine(buf.viewportY + y)?.translateToString(true) ?? '')) return true;
  return false;
}).catch(() => false);

/// Opens `url` in a new tab of `context` and counts the bytes until the relay is quiet.
async function visit(context, url, counter, mode) {
  const page = await context.newPage();
  if (mode === 'before') {
    const cdp = await context.newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
    await cdp.send('Network.setExtraHTTPHeaders', { headers: { 'Accept-Encoding': 'identity' } });
  }
  const start = counter.down;
  await page.goto(url);
  const deadline = Date.now() + 30000;
  while (!(await hasPrompt(page))) {
    if (Date.now() > deadline) throw new Error(`no prompt at ${url}`);
    await sleep(50);
  }
  const prompt = Date.now();
  while (Date.now() - prompt < AFTER_PROMPT_MS || Date.now() - counter.last < QUIET_MS) await sleep(200);
  const bytes = counter.down - start;
  return { page, bytes };
}

async function run(mode) {
  const port = await freePort();
  const front = await freePort();
  const stateDir = tempDir('tern-bytes-state-');
  const token = `bytes-${Math.random().toString(36).slice(2)}-bench-token`;
  const relay = await startRelay({ bin: BIN, port, stateDir, token, env: { RUST_LOG: 'warn' } });
  const fwd = await countingForwarder(front, port);
  // No service worker for `before`: its script is refused (the page then works without one).
  const browser = await launchBrowser();
  try {
    if (mode === 'before') await browser.context.route('**/sw.js', (r) => r.abort());
    const url = newSession(relay.url.replace(`:${port}/`, `:${front}/`));
    const first = await visit(browser.context, url, fwd.counter, mode);
    const repeat = await visit(browser.context, url, fwd.counter, mode);
    const worker = await repeat.page.evaluate(() => !!navigator.serviceWorker?.controller);
    return { first: first.bytes, repeat: repeat.bytes, worker };
  } finally {
    await browser.close();
    await fwd.close();
    relay.child.kill('SIGTERM');
    await new Promise((r) => relay.child.once('exit', r));
    cleanupState(stateDir);
  }
}

const runs = { now: [], before: [] };
for (let i = 0; i < RUNS; i++) {
  for (const mode of i % 2 ? ['before', 'now'] : ['now', 'before']) {
    const r = await run(mode);
    runs[mode].push(r);
    console.log(`${mode}: first visit ${(r.first / 1000).toFixed(1)} KB, repeat visit ${(r.repeat / 1000).toFixed(1)} KB${r.worker ? ' (service worker)' : ''}`);
  }
}
if (JSON_OUT) console.log(JSON.stringify({ runs }));
