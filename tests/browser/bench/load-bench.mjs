// Page load to a usable prompt, this page against an older one, for the benchmark suite
// (tern-bench's `load` rows):
//
//   node tests/browser/bench/load-bench.mjs --new-relay BIN --old-relay BIN [--runs 10]
//        [--old-env NAME=VALUE] [--latency 0,50] [--from blank,site] [--json]
//
// Two tern-relays in spawn mode on loopback, each serving the page it was built with (a relay
// embeds relay/page when it is built; bench/src/page_load.rs builds the old one from a commit).
// Each load is a first visit: a fresh headless Chromium profile (empty HTTP, code and wasm caches)
// opening `#session=new`, so every load starts its own mosh-server and shell. The two pages are
// loaded in turns, the order swapped every round (old, new, new, old, ...), so machine noise falls
// on both. `--latency` adds that many ms to every HTTP request (Chromium's network emulation, the
// DevTools "throttling": per request, so a page that needs one more wave of module imports pays one
// more; WebTransport is not delayed). `--from` says what the tab shows before it opens the page:
// `blank` (a new tab's about:blank, whose renderer process Chromium reuses for the page unless the
// page's Cross-Origin-Opener-Policy asks for a browsing context group of its own) or `site`
// (another site's page, http://localhost:PORT/, as when the URL is typed into a tab already in
// use: the page then gets a new renderer process with or without COOP). Every latency is run
// from every start. Per load, ms on the page's clock (navigation start = 0):
//   promptMs:  the first xterm.js render after which its screen shows a shell prompt (a line
//              ending in `$` or `#`): the page is usable;
//   wasmMs:    WebAssembly.instantiate(Streaming) resolved (the core is compiled and instantiated);
//   scriptMs:  app.js started (performance mark `tern:script`: its static imports are loaded);
//   connectMs / readyMs / frameMs: the page's first request to the relay, the relay's `ready`,
//              the first frame written to xterm.js (the page's stats()).
//   files:     every response (path → responseEnd, from Resource Timing);
//   main:      the renderer's main thread up to the prompt, from DevTools' Performance metrics (CPU
//              time): taskMs in all, jsMs running script (wasm included), layoutMs, styleMs (style
//              recalculation), their counts, and the DOM's node count;
//   cpu:       CPU time of Chromium's processes from navigation to the prompt (/proc, 10 ms ticks):
//              rendererMs, gpuMs (software WebGL), browserMs;
//   resizes:   the terminal's size when the page made it, and each later change.
// One untimed load of each page first lists what the browser fetched (the network log, until the
// page is quiet 2 s after the prompt: the WebGL addon loads after the first draw) with each body's
// size raw and `gzip -9`, and whether it arrived before the prompt.
// `--floor` (issue 36): the new relay also serves the floor (`/floor.html`, TERN_BENCH_FLOOR=1,
// relay/src/floor.rs: the same xterm.js and stylesheet drawing a fixed prompt, no wasm, no
// session), loaded in the same turns as a third side; `--old-relay` may then be left out.
// `--variant NAME=PARAM=VALUE`: a side that is the new page with that address parameter. With
// `--repeat`, every load is followed by a repeat visit: a new tab of the same browser (its HTTP,
// code and wasm caches warm) opening the same URL. `--throughput MBIT` limits HTTP to that many
// Mbit/s each way beside `--latency` (Chromium's emulation: WebTransport is neither delayed nor
// limited unless `--emulate-wt` puts it behind linkemu, RTT/2 each way). The first prompt's time budget, stage by stage (page marks `tern:*`, Resource Timing
// of /api/challenge and /api/info, the core's milestones), is printed as a table per side.
// Prints a summary, and with --json one JSON object on the last line.
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import { readFileSync, readdirSync } from 'node:fs';
import {
  freePort, stopRelay, launchBrowser, tempDir, cleanupState, cliArg, newSession, sleep, startLinkemu, startRelay,
} from '../lib/helpers.mjs';

const RUNS = Number(cliArg('runs', 10));
const LATENCIES = cliArg('latency', '0,50').split(',').map(Number);
const FROMS = cliArg('from', 'blank').split(',');
for (const f of FROMS) if (f !== 'blank' && f !== 'site') throw new Error(`--from ${f}: blank or site`);
const JSON_OUT = process.argv.includes('--json');
const BINS = { old: cliArg('old-relay', ''), new: cliArg('new-relay', '') };
// `--old-env NAME=VALUE[,NAME=VALUE]`: the old relay's environment besides the bench's, e.g. the
// same binary as `--new-relay` with `TERN_RELAY_NO_SPARE_PRESTART=1` (a relay lever off, before
// and after in one run).
const OLD_ENV = Object.fromEntries(cliArg('old-env', '').split(',').filter(Boolean).map((kv) => {
  const at = kv.indexOf('=');
  if (at < 1) throw new Error(`--old-env ${kv}: NAME=VALUE`);
  return [kv.slice(0, at), kv.slice(at + 1)];
}));
const FLOOR = process.argv.includes('--floor');
const REPEAT = process.argv.includes('--repeat');
const THROUGHPUT_MBIT = Number(cliArg('throughput', 0));
// `--emulate-wt`: WebTransport too goes through the emulated link at a latency above 0 (linkemu in
// front of the new relay's UDP port, `#wt_port=`: RTT/2 each way and the throughput), as
// echo-bench does; without it only HTTP is delayed.
const EMULATE_WT = process.argv.includes('--emulate-wt');
if (!BINS.new || (!BINS.old && !FLOOR)) throw new Error('--new-relay BIN and --old-relay BIN (or --floor) are needed');
// The relays' sides, then the floor's (served by the new relay).
const RELAY_SIDES = BINS.old ? ['old', 'new'] : ['new'];
// `--variant NAME=PARAM=VALUE` (repeatable as a comma list): one more side, the new relay's page
// with `#PARAM=VALUE` in its address, e.g. `late=early_info=0` (the page's lever off): before
// and after in the same run.
const VARIANTS = cliArg('variant', '').split(',').filter(Boolean).map((v) => {
  const [name, ...param] = v.split('=');
  if (!name || param.length !== 2) throw new Error(`--variant ${v}: NAME=PARAM=VALUE`);
  return { name, fragment: param.join('=') };
});
const SIDES = [...RELAY_SIDES, ...VARIANTS.map((v) => v.name), ...(FLOOR ? ['floor'] : [])];
const TIMEOUT_MS = 30000;

/// CPU seconds (utime + stime) of the Chromium processes this script started, by kind: the
/// renderers, the GPU process (software WebGL here: --disable-gpu), the rest.
function chromiumCpu() {
  const parent = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parent.set(Number(name), { ppid: Number(fields[1]), cpu: (Number(fields[11]) + Number(fields[12])) / 100 });
    } catch { /* gone */ }
  }
  const mine = (pid) => {
    for (let p = pid, n = 0; p > 1 && n < 20; p = parent.get(p)?.ppid ?? 0, n++) if (p === process.pid) return true;
    return false;
  };
  const cpu = { renderer: 0, gpu: 0, browser: 0 };
  for (const [pid, { cpu: s }] of parent) {
    if (pid === process.pid || !mine(pid)) continue;
    let cmd = '';
    try { cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8'); } catch { continue; }
    if (!/chrom/i.test(cmd)) continue;
    if (cmd.includes('--type=renderer')) cpu.renderer += s;
    else if (cmd.includes('--type=gpu-process')) cpu.gpu += s;
    else cpu.browser += s;
  }
  return cpu;
}

/// tern-relay from `bin`, quiet (warnings only); `floor`: it serves the floor page too.
function startRelayBin(bin, { port, token, stateDir, floor = false, extraEnv = {} }) {
  const env = { RUST_LOG: 'warn', ...(floor ? { TERN_BENCH_FLOOR: '1' } : {}), ...extraEnv };
  return startRelay({ bin, port, token, stateDir, env });
}

// Runs in the page before its own scripts: times the wasm's instantiation and the first xterm.js
// render that shows a prompt. Polls each animation frame until window.tern.term exists, then
// listens to its renders (the old and the new page both expose it).
const probe = () => {
  let done;
  const t = (window.__load = { wasmMs: null, promptMs: null, bufferMs: null, resizes: [] });
  Object.defineProperty(t, 'done', { value: new Promise((res) => { done = res; }), enumerable: false });
  for (const k of ['instantiateStreaming', 'instantiate']) {
    const orig = WebAssembly[k];
    if (typeof orig !== 'function') continue;
    WebAssembly[k] = function (...args) {
      return orig.apply(this, args).then((r) => {
        if (t.wasmMs === null) t.wasmMs = performance.now();
        return r;
      });
    };
  }
  const prompt = (term) => {
    const buf = term.buffer.active;
    for (let y = 0; y < term.rows; y++) {
      if (/[$#]\s*$/.test(buf.getLine(buf.viewportY + y)?.translateToString(true) ?? '')) return true;
    }
    return false;
  };
  const poll = () => {
    const term = window.tern?.term;
    if (!term) { requestAnimationFrame(poll); return; }
    t.resizes.push({ ms: performance.now(), cols: term.cols, rows: term.rows });
    term.onResize(({ cols, rows }) => t.resizes.push({ ms: performance.now(), cols, rows }));
    const sub = term.onRender(() => {
      if (t.promptMs === null && prompt(term)) { t.promptMs = performance.now(); sub.dispose(); done(); }
    });
    const buffer = () => {
      if (prompt(term)) t.bufferMs = performance.now();
      else requestAnimationFrame(buffer);
    };
    buffer();
  };
  requestAnimationFrame(poll);
};

/// Another site for `--from site`: `localhost` is a different site from the relays' 127.0.0.1.
async function startOtherSite() {
  const server = createServer((_, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>another site</title><p>a page the tab showed before');
  });
  await new Promise((res) => server.listen(0, '127.0.0.1', res));
  return { server, url: `http://localhost:${server.address().port}/` };
}

/// One first visit of `relay`'s page (and with --repeat a repeat visit after it, as `repeat`);
/// `inventory`: also the bodies the browser fetched. `from`: the URL the tab shows first, or null
/// for a new tab's about:blank.
async function load(relay, latencyMs, inventory = false, from = null) {
  const browser = await launchBrowser({ viewport: { width: 1000, height: 640 } });
  try {
    const first = await visit(browser, browser.page, relay, latencyMs, inventory, from);
    if (!REPEAT || inventory) return first;
    // A new tab of the same browser: what it fetched, compiled and kept is warm.
    await browser.page.close();
    const page = await browser.context.newPage();
    return { ...first, repeat: await visit(browser, page, relay, latencyMs, false, from) };
  } finally {
    await browser.close();
  }
}

/// The stages of the first prompt on the page's clock (ms from navigation start; null: not
/// reached, or not on this page): the page's marks, Resource Timing's entries of its API
/// requests, the core's milestones.
const stageNames = [
  'htmlMs', 'scriptMs', 'wasmMs', 'termMs', 'startMs', 'challengeMs', 'infoMs', 'linkMs',
  'controlChallengeMs', 'readyMs', 'datagramMs', 'frameMs', 'promptMs',
  // The early link (www/index.html's inline script): its handshake started and up, and the relay's
  // pushed challenge in. Last, so their "+" columns read
  // against the prompt; their "at" is the moment.
  'earlyMs', 'earlyReadyMs', 'earlyPushedMs',
];

async function visit(browser, page, relay, latencyMs, inventory, from) {
  {
    await page.addInitScript(probe);
    const cdp = await browser.context.newCDPSession(page);
    // The renderer's main-thread time by kind (cumulative since the page's process started).
    await cdp.send('Performance.enable', { timeDomain: 'threadTicks' });
    if (latencyMs > 0 || THROUGHPUT_MBIT > 0) {
      await cdp.send('Network.enable');
      await cdp.send('Network.emulateNetworkConditions', {
        offline: false, latency: latencyMs,
        // Bytes per second; -1: unlimited.
        downloadThroughput: THROUGHPUT_MBIT > 0 ? THROUGHPUT_MBIT * 125000 : -1,
        uploadThroughput: THROUGHPUT_MBIT > 0 ? THROUGHPUT_MBIT * 125000 : -1,
      });
    }
    if (from) await page.goto(from);
    const responses = [];
    if (inventory) page.on('response', (r) => responses.push(r));
    const cpu0 = chromiumCpu();
    // The load event at 10 Mbit/s on a loaded machine can take longer than playwright's 30 s.
    await page.goto(newSession(relay.url), { timeout: TIMEOUT_MS * 2 });
    // Resolved inside the page: no polling from here while the page loads.
    let timer;
    await Promise.race([
      page.evaluate(() => window.__load.done),
      new Promise((_, rej) => {
        timer = setTimeout(() => rej(new Error(`no prompt rendered by xterm.js within ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
      }),
    ]).catch(async (e) => {
      const seen = await page.evaluate(() => {
        const term = window.tern?.term;
        const rows = [];
        for (let y = 0; term && y < term.rows; y++) rows.push(term.buffer.active.getLine(term.buffer.active.viewportY + y)?.translateToString(true) ?? '');
        return `${JSON.stringify(window.__load)}\nxterm.js screen:\n${rows.join('\n').trimEnd()}\nstatus: ${document.body.innerText.slice(0, 400)}`;
      }).catch((err) => `(page unreadable: ${err.message})`);
      throw new Error(`${e.message} (${relay.url})\n${seen}\n${browser.consoleLog.slice(-10).join('\n')}`);
    }).finally(() => clearTimeout(timer));
    const cpu1 = chromiumCpu();
    const metrics = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
    const main = {
      taskMs: metrics.TaskDuration * 1000, jsMs: metrics.ScriptDuration * 1000,
      layoutMs: metrics.LayoutDuration * 1000, styleMs: metrics.RecalcStyleDuration * 1000,
      layouts: metrics.LayoutCount, styles: metrics.RecalcStyleCount, nodes: metrics.Nodes,
    };
    const cpu = Object.fromEntries(Object.keys(cpu1).map((k) => [`${k}Ms`, (cpu1[k] - cpu0[k]) * 1000]));
    const r = await page.evaluate(() => {
      const s = window.tern.stats();
      const mark = (name) => performance.getEntriesByName(name)[0]?.startTime ?? null;
      const files = {};
      for (const e of performance.getEntriesByType('resource')) files[new URL(e.name).pathname] = e.responseEnd;
      const nav = performance.getEntriesByType('navigation')[0];
      return {
        ...window.__load,
        scriptMs: mark('tern:script'),
        connectMs: s.firstConnectMs ?? null,
        readyMs: s.firstReadyMs ?? null,
        frameMs: s.firstFrameMs ?? null,
        ...Object.fromEntries([['termMs', 'tern:term'], ['startMs', 'tern:start'], ['infoMs', 'tern:info'],
          ['linkMs', 'tern:link'], ['controlChallengeMs', 'tern:challenge'], ['datagramMs', 'tern:datagram'],
          ['earlyMs', 'tern:early'], ['earlyReadyMs', 'tern:early-ready'], ['earlyPushedMs', 'tern:early-pushed']]
          .map(([k, name]) => [k, mark(name)])),
        // The API requests' answers (Resource Timing): the first of each.
        ...Object.fromEntries(['challenge', 'info'].map((r) => [`${r}Ms`,
          performance.getEntriesByType('resource').find((e) => new URL(e.name).pathname.endsWith(`/api/${r}`))?.responseEnd ?? null])),
        domContentLoadedMs: nav?.domContentLoadedEventEnd ?? null,
        htmlMs: nav?.responseEnd ?? null,
        renderer: window.tern.renderer,
        files,
      };
    });
    let fetched;
    if (inventory) {
      // Quiet for 2 s: whatever the page loads after its first draw is in the log too.
      let seen = -1;
      for (let quiet = 0; quiet < 2000; quiet = responses.length === seen ? quiet + 100 : 0) {
        seen = responses.length;
        await sleep(100);
      }
      fetched = [];
      for (const resp of responses) {
        const url = new URL(resp.url());
        if (url.pathname.startsWith('/api/')) continue;
        let body;
        try { body = await resp.body(); } catch { continue; }
        const gzip = execFileSync('gzip', ['-9', '-n', '-c'], { input: body }).length;
        const path = url.pathname === '/' ? '/index.html' : url.pathname;
        const end = r.files[url.pathname];
        fetched.push({
          path, status: resp.status(), type: resp.headers()['content-type'] ?? '',
          bytes: body.length, gzip,
          // The document itself arrives first; everything else by its Resource Timing entry.
          beforePrompt: path === '/index.html' || (end != null && end <= r.promptMs),
        });
      }
    }
    // End the shell (and its mosh-server) before the next load.
    await page.keyboard.type('exit\n');
    await sleep(300);
    return { ...r, main, cpu, fetched };
  }
}

const token = 'load-bench-' + Math.random().toString(36).slice(2);
const state = Object.fromEntries(RELAY_SIDES.map((side) => [side, tempDir(`tern-load-bench-${side}-`)]));
const relays = {};
let other = null;
let emu = null;
const out = { runs: RUNS, throughputMbit: THROUGHPUT_MBIT || null, settings: [], files: {} };
try {
  for (const side of RELAY_SIDES) {
    relays[side] = await startRelayBin(BINS[side], {
      port: await freePort(), token, stateDir: state[side], floor: FLOOR && side === 'new',
      extraEnv: side === 'old' ? OLD_ENV : {},
    });
  }
  // The floor: the new relay's /floor.html (newSession's `#session=new` means nothing to it).
  if (FLOOR) relays.floor = { url: `${new URL(relays.new.url).origin}/floor.html#floor` };
  for (const { name, fragment } of VARIANTS) relays[name] = { url: relays.new.url.replace('#', `#${fragment}&`) };
  // The inventory loads also warm the relays, mosh-server's and the shell's files, and Chromium's.
  for (const side of SIDES) out.files[side] = (await load(relays[side], 0, true)).fetched;
  if (FROMS.includes('site')) other = await startOtherSite();
  for (const latencyMs of LATENCIES) {
    // The new relay's sides through linkemu for WebTransport, at this latency.
    let target = relays;
    if (EMULATE_WT && latencyMs > 0) {
      const listenPort = await freePort();
      const rate = THROUGHPUT_MBIT ? `,rate=${THROUGHPUT_MBIT}mbit` : '';
      emu = await startLinkemu({
        listenPort, targetPort: Number(new URL(relays.new.url).port), link: `delay=${latencyMs / 2}ms${rate}`,
      });
      target = Object.fromEntries(Object.entries(relays).map(([side, r]) => [side,
        side === 'old' || side === 'floor' ? r : { ...r, url: r.url.replace('#', `#wt_port=${listenPort}&`) }]));
    }
    for (const from of FROMS) {
      const setting = { latencyMs, from, ...Object.fromEntries(SIDES.map((side) => [side, []])) };
      for (let i = 0; i < RUNS; i++) {
        // The order turns every round, so machine noise falls on every side.
        const order = SIDES.map((_, k) => SIDES[(k + i) % SIDES.length]);
        for (const side of i % 2 ? order.reverse() : order) {
          setting[side].push(await load(target[side], latencyMs, false, from === 'site' ? other.url : null));
        }
        process.stderr.write(`[load] latency ${latencyMs} ms, from ${from}: round ${i + 1}/${RUNS}\n`);
      }
      out.settings.push(setting);
    }
    await emu?.stop();
    emu = null;
  }
} finally {
  await emu?.stop();
  other?.server.close();
  for (const side of RELAY_SIDES) {
    await stopRelay(relays[side]);
    cleanupState(state[side]);
  }
}

const median = (v) => {
  const s = v.filter((x) => x != null).sort((a, b) => a - b);
  if (!s.length) return null;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (v) => (v == null ? '-' : v.toFixed(0));
const m = (runs, k) => median(runs.map((r) => r[k]));
for (const setting of out.settings) {
  const { latencyMs, from } = setting;
  console.log(`HTTP latency ${latencyMs} ms${THROUGHPUT_MBIT ? `, ${THROUGHPUT_MBIT} Mbit/s` : ''}, from ${from}, ` +
    `${RUNS} loads each, medians (ms): ` +
    ['scriptMs', 'wasmMs', 'connectMs', 'readyMs', 'frameMs', 'promptMs']
      .map((k) => `${k} ${SIDES.map((side) => `${side} ${fmt(m(setting[side], k))}`).join(' ')}`).join('; '));
  // The time budget: each stage's median moment and its median share since the stage before
  // (medians of per-load differences, so they need not add up exactly).
  for (const visitKind of REPEAT ? ['first', 'repeat'] : ['first']) {
    const pick = (runs) => runs.map((r) => (visitKind === 'first' ? r : r.repeat)).filter(Boolean);
    console.log(`\nfirst-prompt budget, ${visitKind} visit, HTTP latency ${latencyMs} ms, from ${from} ` +
      '(ms since navigation, median; +: since the stage before)');
    console.log(`| stage | ${SIDES.map((side) => `${side} at | ${side} +`).join(' | ')} |`);
    console.log(`| --- | ${SIDES.map(() => '---: | ---:').join(' | ')} |`);
    for (const [n, k] of stageNames.entries()) {
      const cells = SIDES.map((side) => {
        const runs = pick(setting[side]);
        const at = m(runs, k);
        // The nearest earlier stage this load reached.
        const delta = median(runs.map((r) => {
          if (r[k] == null) return null;
          for (let j = n - 1; j >= 0; j--) if (r[stageNames[j]] != null) return r[k] - r[stageNames[j]];
          return r[k];
        }));
        return `${fmt(at)} | ${at == null ? '-' : fmt(delta)}`;
      });
      console.log(`| ${k.replace(/Ms$/, '')} | ${cells.join(' | ')} |`);
    }
  }
}
// The issue-36 rows, each with its target, when the floor ran beside (the suite's `load` part
// reads them from the JSON: bench/src/page_load.rs, `floor_rows`).
if (FLOOR) {
  const rows = [];
  const row = (name, value, unit, target, ok) => rows.push({ name, value, unit, target, ok });
  for (const setting of out.settings) {
    if (setting.from !== 'blank') continue;
    const tern = m(setting.new, 'promptMs');
    const floor = m(setting.floor, 'promptMs');
    const again = REPEAT ? median(setting.new.map((r) => r.repeat?.promptMs)) : null;
    const floorAgain = REPEAT ? median(setting.floor.map((r) => r.repeat?.promptMs)) : null;
    const rtt = setting.latencyMs;
    if (rtt === 0 && !THROUGHPUT_MBIT) {
      row(`first usable prompt, median of ${RUNS}, new tab, loopback: Tern / floor`,
        tern / floor, 'x', `≤ 1.30 (${fmt(tern)} / ${fmt(floor)} ms)`, tern / floor <= 1.3);
      row(`first usable prompt, median of ${RUNS}, new tab, loopback`, tern, 'ms', '≤ 450 ms', tern <= 450);
      if (REPEAT) row(`first usable prompt, repeat visit, median of ${RUNS}, loopback`, again, 'ms', `≤ 300 ms (floor ${fmt(floorAgain)} ms)`, again <= 300);
    } else if (rtt > 0) {
      const link = `${rtt} ms ${EMULATE_WT ? 'RTT (HTTP and WebTransport)' : 'HTTP latency'}${THROUGHPUT_MBIT ? ` and ${THROUGHPUT_MBIT} Mbit/s` : ''}`;
      row(`first usable prompt at ${link}, first visit: (Tern − floor) / round trip`, (tern - floor) / rtt, 'RTT',
        `≤ 3 (${fmt(tern)} − ${fmt(floor)} ms)`, tern - floor <= 3 * rtt);
      if (REPEAT) {
        row(`first usable prompt at ${link}, repeat visit: (Tern − floor) / round trip`, (again - floorAgain) / rtt, 'RTT',
          `≤ 2 (${fmt(again)} − ${fmt(floorAgain)} ms)`, again - floorAgain <= 2 * rtt);
      }
    }
  }
  console.log('\n| row | value | target | met |\n| --- | ---: | --- | --- |');
  for (const r of rows) console.log(`| ${r.name} | ${r.value.toFixed(r.unit === 'ms' ? 0 : 2)} ${r.unit} | ${r.target} | ${r.ok ? 'yes' : 'no'} |`);
  out.rows = rows;
}
for (const side of SIDES) {
  const f = out.files[side];
  const sum = (k, pred = () => true) => f.filter(pred).reduce((a, x) => a + x[k], 0);
  console.log(`${side}: ${f.length} files, ${sum('bytes')} B raw, ${sum('gzip')} B gzip -9 ` +
    `(${f.map((x) => `${x.path} ${x.gzip}`).join(', ')})`);
}
if (JSON_OUT) console.log(JSON.stringify(out));
