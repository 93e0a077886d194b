// When the early link's pieces reach the browser, from Chromium's own net log: a first visit and a
// repeat visit (a new tab of the same browser: a resumed TLS session) of the relay's page behind a
// linkemu link, and for each WebTransport session the moments (ms since its connection started) of
// the CONNECT's answer, the relay's streams, and the page's control stream, beside the page's own
// marks. It tells the network's share of a late stage from the page's (docs/BENCHMARKS.md, "The
// info in `ready`…": the pushed challenge arrives with the CONNECT's answer; the page reads it when
// its main thread is free).
//
//   node tests/browser/bench/link-netlog.mjs [--relay BIN] [--delay-ms 25]
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startRelay, stopRelay, freePort, tempDir, launchBrowser, newSession, waitForPrompt, sleep, startLinkemu, relayBinary, cliArg } from '../lib/helpers.mjs';

const bin = cliArg('relay', relayBinary());
const delayMs = Number(cliArg('delay-ms', '25'));
const dir = tempDir('tern-netlog-');
const netlog = join(dir, 'netlog.json');
const port = await freePort();
const relay = await startRelay({ port, token: 'n'.repeat(43), stateDir: tempDir('tern-netlog-state-'), bin });
const emuPort = await freePort();
const emu = await startLinkemu({ listenPort: emuPort, targetPort: port, link: `delay=${delayMs}ms` });
const browser = await launchBrowser({ args: [`--log-net-log=${netlog}`, '--net-log-capture-mode=Everything'] });
try {
  for (const visit of ['first', 'repeat']) {
    const page = visit === 'first' ? browser.page : await browser.context.newPage();
    await page.goto(newSession(relay.url.replace('#token=', `#wt_port=${emuPort}&token=`)));
    await waitForPrompt(page);
    const marks = await page.evaluate(() => Object.fromEntries(performance.getEntriesByType('mark')
      .filter((e) => e.name.startsWith('tern:')).map((e) => [e.name, Math.round(e.startTime)])));
    console.log(`${visit} visit, page marks (ms since navigation): ${JSON.stringify(marks)}`);
    await page.keyboard.type('exit\n');
    await sleep(800);
  }
} finally {
  await browser.close();
  await emu.stop();
  await stopRelay(relay);
}

// The net log is JSON once the browser closed it (a crash leaves it unterminated).
let raw = readFileSync(netlog, 'utf8').trimEnd();
if (!raw.endsWith('}')) raw = `${raw.replace(/,$/, '')}]}`;
const log = JSON.parse(raw);
const types = Object.fromEntries(Object.entries(log.constants.logEventTypes).map(([k, v]) => [v, k]));
const sessions = new Map();
for (const e of log.events) {
  const type = types[e.type] ?? '';
  if (type.startsWith('QUIC_SESSION')) {
    if (!sessions.has(e.source.id)) sessions.set(e.source.id, []);
    sessions.get(e.source.id).push({ t: Number(e.time), type, params: e.params ?? {} });
  }
}
let n = 0;
for (const events of sessions.values()) {
  if (!events.some((e) => e.type === 'QUIC_SESSION_WEBTRANSPORT_SESSION_READY')) continue;
  const t0 = events[0].t;
  const at = (pred) => events.find(pred)?.t - t0;
  // Stream ids: server-initiated unidirectional ones are 3 mod 4 (3 is HTTP/3's control stream),
  // client-initiated bidirectional ones 0 mod 4 (0 is the CONNECT's own).
  const rows = {
    'CONNECT answered (session ready)': at((e) => e.type === 'QUIC_SESSION_WEBTRANSPORT_SESSION_READY'),
    "relay's first stream of the session (the pushed challenge)": at((e) => e.type === 'QUIC_SESSION_STREAM_FRAME_RECEIVED' && e.params.stream_id % 4 === 3 && e.params.stream_id > 3),
    "page's control stream opened": at((e) => e.type === 'QUIC_SESSION_STREAM_FRAME_SENT' && e.params.stream_id % 4 === 0 && e.params.stream_id > 0),
    "page's hello (the control stream's first line)": at((e) => e.type === 'QUIC_SESSION_STREAM_FRAME_SENT' && e.params.stream_id % 4 === 0 && e.params.stream_id > 0 && e.params.offset > 0),
  };
  console.log(`WebTransport session ${++n} (ms since its connection started):`);
  for (const [what, ms] of Object.entries(rows)) console.log(`  ${what}: ${ms ?? '-'}`);
}
