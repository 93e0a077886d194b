// The relay's share of a new tab's first `ready` and prompt (issue 36), with the warm spare and
// without: three relays in spawn mode (real mosh-server and bash), the default (a spare whose
// shell the relay started ahead), `--no-spare-prestart` and `--no-spare`, loaded in turns
// by headless Chromium with a fresh profile each time (`#session=new`). The page's own clocks
// (resource timing for /api/challenge and /api/info, its stats' first connect, ready and frame)
// are put on one time line with the relay's debug log (its UTC timestamps: "session opened" with
// the time its hello check and its attach took, "bridging" once `ready` was written), both
// measured from the page's navigation start. Prints medians; asserts nothing about speed.
//
//   node tests/browser/bench/relay-share-bench.mjs [loads per relay, default 8]
import { startRelay, stopRelay, launchBrowser, newSession, waitForPrompt, tempDir, cleanupState, stats } from '../lib/helpers.mjs';
import { freePort } from '../lib/helpers.mjs';

const LOADS = Number(process.argv[2] || 8);

/// The relay log's lines at and after `from` (an offset into the log text) with their epoch ms.
function events(log, from) {
  const out = [];
  for (const line of log.slice(from).split('\n')) {
    const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z)\s+\w+\s+(.*)$/.exec(line);
    if (m) out.push({ at: Date.parse(m[1]) + Number(`0.${m[1].split('.')[1].slice(3, -1) || '0'}`), text: m[2] });
  }
  return out;
}

const field = (text, name) => Number(new RegExp(`${name}=(\\d+)`).exec(text)?.[1] ?? NaN);

async function loadOnce(relay) {
  const browser = await launchBrowser({ viewport: { width: 1000, height: 640 } });
  try {
    const page = browser.page;
    const logFrom = relay.log().length;
    await page.goto(newSession(relay.url));
    // The moment the core's screen first shows a prompt, on the page's clock (polled every 2 ms).
    const promptAt = await page.evaluate(() => new Promise((resolve) => {
      const look = () => {
        const text = window.tern?.screenText?.() ?? '';
        if (/[$#] ?$/m.test(text)) resolve(performance.now()); else setTimeout(look, 2);
      };
      look();
    }));
    await waitForPrompt(page, 30000);
    const s = await stats(page);
    const p = await page.evaluate(() => {
      const at = (path) => performance.getEntriesByType('resource').find((e) => new URL(e.name).pathname.endsWith(path));
      const c = at('/api/challenge');
      const i = at('/api/info');
      return {
        origin: performance.timeOrigin,
        challenge: c?.startTime, challengeDone: c?.responseEnd, challengeWait: c && c.responseStart - c.requestStart,
        infoStart: i?.startTime, info: i?.responseEnd, infoWait: i && i.responseStart - i.requestStart,
      };
    });
    const ev = events(relay.log(), logFrom);
    const opened = ev.find((e) => e.text.includes('session opened'));
    const bridging = ev.find((e) => e.text.includes('bridging'));
    const rel = (epoch) => epoch - p.origin;
    const attach = field(opened?.text ?? '', 'attach_us') / 1000;
    const admit = field(opened?.text ?? '', 'admit_us') / 1000;
    const rest = field(opened?.text ?? '', 'rest_us') / 1000;
    const openedAt = rel(opened.at);
    const took = ev.some((e) => e.text.includes('took the warm spare'));
    const recorded = field(ev.find((e) => e.text.includes('session recorded'))?.text ?? '', 'record_us') / 1000;
    const attachStart = openedAt - attach - rest;
    const helloCheckStart = attachStart - admit;
    const readySent = rel(bridging.at);
    // Each stage's length, one after the other: from the page's first request to its `ready`.
    return {
      toChallenge: p.challenge - s.firstConnectMs,
      challenge: p.challengeDone - p.challenge,
      challengeWait: p.challengeWait,
      toInfo: p.infoStart - p.challengeDone,
      info: p.info - p.infoStart,
      infoWait: p.infoWait,
      toGreet: helloCheckStart - p.info,
      greetToHello: admit,
      attachMs: attach,
      recordMs: recorded,
      spareTaken: took ? 1 : 0,
      toReadySent: readySent - (attachStart + attach),
      toReadyRead: s.firstReadyMs - readySent,
      relayWork: p.challengeWait + p.infoWait + attach + (readySent - (attachStart + attach)),
      total: s.firstReadyMs - s.firstConnectMs,
      frame: s.firstFrameMs - s.firstReadyMs,
      framePrompt: promptAt - s.firstFrameMs,
      readyPrompt: promptAt - s.firstReadyMs,
      prompt: promptAt,
    };
  } finally {
    await browser.close();
  }
}

const median = (xs) => {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  return v.length ? v[Math.floor(v.length / 2)] : NaN;
};

const relays = [];
try {
  // The spare with its shell started ahead (the default), the spare whose shell waits for the
  // page (issue 36's first lever alone), no spare.
  for (const args of [[], ['--no-spare-prestart'], ['--no-spare']]) {
    const stateDir = tempDir('tern-spare-bench-');
    const port = await freePort();
    const token = `spare-bench-${Math.random().toString(36).slice(2)}`;
    const running = await startRelay({ port, token, stateDir, args, env: { RUST_LOG: 'info,tern_relay=debug' } });
    relays.push({ name: args[0] ?? 'spare', running, stateDir, url: running.url, log: running.log, rows: [] });
  }
  // One untimed load each (first compile of the page's caches in the OS, the relays' first spawn).
  for (const r of relays) await loadOnce(r);
  for (let n = 0; n < LOADS; n++) {
    const order = n % 2 ? [...relays].reverse() : relays;
    for (const r of order) r.rows.push(await loadOnce(r));
  }
  const load = (await import('node:fs')).readFileSync('/proc/loadavg', 'utf8').trim();
  console.log(`load average: ${load}; median of ${LOADS} loads each, ms per stage`);
  const keys = [
    ['toChallenge', 'page: first request -> POST /api/challenge sent'],
    ['challenge', 'POST /api/challenge (sent -> answered)'],
    ['challengeWait', '  relay: its wait (sent -> first byte)'],
    ['toInfo', 'page: -> GET /api/info sent'],
    ['info', 'GET /api/info (sent -> answered)'],
    ['infoWait', '  relay: its wait (sent -> first byte)'],
    ['toGreet', 'page + link: -> WebTransport connected, greet read by the relay'],
    ['greetToHello', 'greet -> challenge -> hello admitted (a round trip, proofs)'],
    ['attachMs', 'relay: attach (spawn or spare, record)'],
    ['recordMs', '  relay: of which the session record written'],
    ['spareTaken', '  relay: took the spare (median of 0/1)'],
    ['toReadySent', 'relay: -> `ready` written'],
    ['toReadyRead', 'page: `ready` read'],
    ['relayWork', "relay's own work (its two waits, attach, -> `ready`)"],
    ['total', "total: page's first request -> `ready` read"],
    ['frame', 'page: `ready` -> first frame'],
    ['framePrompt', 'page: first frame -> prompt on the screen'],
    ['readyPrompt', 'page: `ready` -> prompt on the screen'],
    ['prompt', 'page: navigation -> prompt on the screen'],
  ];
  console.log(`| | ${relays.map((r) => r.name).join(' | ')} |`);
  console.log(`| --- | ${relays.map(() => '---:').join(' | ')} |`);
  for (const [k, name] of keys) {
    console.log(`| ${name} | ${relays.map((r) => median(r.rows.map((x) => x[k])).toFixed(1)).join(' | ')} |`);
  }
  const total = (r) => median(r.rows.map((x) => x.total));
  const work = (r) => median(r.rows.map((x) => x.relayWork));
  const [spare, waiting, none] = relays;
  console.log(`relay's own work: spare ${work(spare).toFixed(1)} ms, --no-spare ${work(none).toFixed(1)} ms, ratio ${(work(spare) / work(none)).toFixed(2)}`);
  console.log(`first request -> ready: spare ${total(spare).toFixed(1)} ms, --no-spare ${total(none).toFixed(1)} ms, ratio ${(total(spare) / total(none)).toFixed(2)}`);
  const ready2prompt = (r) => median(r.rows.map((x) => x.readyPrompt));
  console.log(`ready -> prompt: pre-started ${ready2prompt(spare).toFixed(1)} ms, --no-spare-prestart ${ready2prompt(waiting).toFixed(1)} ms, --no-spare ${ready2prompt(none).toFixed(1)} ms`);
} finally {
  for (const r of relays) {
    await stopRelay(r.running, 'SIGTERM');
    cleanupState(r.stateDir);
  }
}
