// The cost of a frame in the browser, for the benchmark suite (tern-bench's `cost` rows):
//
//   node tests/browser/bench/frame-cost-bench.mjs [--seconds 10] [--renderer auto|dom|webgl]
//        [--scenarios flood,flood-unheld,log,clock,hidden,hidden-unheld,idle] [--profile [--top]] [--css RULES] [--json]
//
// Headless Chromium, the real tern-relay in spawn mode on loopback. Each scenario runs a command in
// the shell, waits for it to settle, then counts over `--seconds`:
//   rendererCpuS / gpuCpuS / browserCpuS: CPU time of Chromium's renderer processes, its GPU
//        process and the rest (browser, utility), from /proc (utime + stime);
//   states: server states the page applied; writes: screen writes to xterm.js; bytesWritten;
//   page: the page's own split (ms): decrypt, inflate (reassemble + inflate + decode), apply,
//        diff (compose + display diff), write (handing bytes to xterm.js);
//   profile (with --profile, in a second window of the flood, hidden and idle scenarios only, so the profiler's
//        own cost stays out of the CPU figures): the renderer's main thread from Chromium's
//        sampling profiler, ms by where the time went: tern (wasm and its glue), xterm.js
//        (parse and render), gc, browser (style, layout, paint: "(program)"); with --top also
//        the functions with the most self time;
//   rendererThreadsCpuS: the renderer's CPU by thread (main, compositor, IO, workers);
//   afterShown (hidden scenarios): once the page is shown again, the server states it applied in
//        the first second, and when a whole second first brought FULL_PACE_STATES or more again
//        (the start of that second, s after showing; null if not within AFTER_SHOWN_S): a hidden
//        page slows mosh-server to its hold (crate/src/session/draw_pacer.rs, held_batch_echo),
//        and this is what that costs once someone looks;
//   --css RULES: a style sheet added to the page before the command, to try a style change
//        without rebuilding the page.
// Scenarios: flood = `seq` in a loop, full screen (after 0.5 s the relay holds the datagrams up to
// 250 ms, the flood's draw interval); log = a line every 50 ms; clock = the time
// rewritten every second on an otherwise still screen; hidden = the flood with the page hidden
// (document.visibilityState, as tests/browser/tests/frames.test.mjs sets it), the relay holding the
// server's datagrams and sending them together; flood-unheld and hidden-unheld = the same with the
// relay told not to hold datagrams (each delivered alone, as before the hold); idle = a prompt, nothing
// happening, measured from 12 s after the last key (the cursor blinks for 10 s after a key);
// blank = about:blank in the same browser, what headless Chromium costs with no page of ours
// (the floor under idle and hidden). The JSON carries the commands too: tern-bench types the same ones into the stock
// mosh-client in tmux for the comparison (bench/src/frame_cost.rs).
// Prints a summary, and with --json one JSON object on the last line.
import { readFileSync, readdirSync } from 'node:fs';
import {
  freePort, startRelay, stopRelay, launchBrowser, stats, waitForPrompt, typeLine,
  tempDir, cleanupState, cliArg, newSession, sleep, setPageHidden,
} from '../lib/helpers.mjs';

const COMMANDS = {
  flood: 'while :; do seq 1 200000; done',
  log: 'i=0; while :; do i=$((i+1)); echo "[$(date +%T)] step $i: compiling module $((i*7919 % 1000)) of 1000"; sleep 0.05; done',
  clock: 'clear; while :; do printf "\\r%s" "$(date +%T)"; sleep 1; done',
  hidden: 'while :; do seq 1 200000; done',
  'hidden-unheld': 'while :; do seq 1 200000; done',
  'flood-unheld': 'while :; do seq 1 200000; done',
  idle: '',
};

const SECONDS = Number(cliArg('seconds', 10));
const RENDERER = cliArg('renderer', 'auto');
const SCENARIOS = cliArg('scenarios', 'flood,flood-unheld,log,clock,hidden,hidden-unheld,idle').split(',');
const PROFILE = process.argv.includes('--profile');
const JSON_OUT = process.argv.includes('--json');
const EXTRA_CSS = cliArg('css', '');
const SETTLE_MS = 2000;
const IDLE_SETTLE_MS = 12000;

/// Chromium's processes started by this script, by kind, with their CPU seconds so far.
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
    for (let p = pid, n = 0; p > 1 && n < 20; p = parent.get(p)?.ppid ?? 0, n++) {
      if (p === process.pid) return true;
    }
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
  cpu.threads = rendererThreads(parent, mine);
  return cpu;
}

/// CPU seconds of the renderer processes' threads by thread name (`CrRendererMain`, the IO
/// thread `Chrome_ChildIOT`, the compositor `Compositor`, raster workers...), from
/// /proc/<pid>/task/*/stat: which thread the renderer's CPU goes to.
function rendererThreads(parent, mine) {
  const threads = {};
  for (const pid of parent.keys()) {
    if (pid === process.pid || !mine(pid)) continue;
    let cmd = '';
    try { cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8'); } catch { continue; }
    if (!cmd.includes('--type=renderer')) continue;
    let tasks = [];
    try { tasks = readdirSync(`/proc/${pid}/task`); } catch { continue; }
    for (const tid of tasks) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/\d+$/, '');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        threads[name] = (threads[name] ?? 0) + (Number(fields[11]) + Number(fields[12])) / 100;
      } catch { /* gone */ }
    }
  }
  return threads;
}

const pageCounts = async (page) => {
  const s = await stats(page);
  if (!s) return { states: 0, writes: 0, datagramsOut: 0, datagramsIn: 0, heldBatches: 0, controlChunks: 0, cost: {} };
  return {
    states: Number(s.core.applied), writes: s.xtermWrites, datagramsOut: Number(s.linkDatagramsOut),
    datagramsIn: Number(s.linkDatagramsIn), heldBatches: Number(s.heldBatches), controlChunks: Number(s.controlChunks),
    cost: Object.fromEntries(Object.entries(s.cost).map(([k, v]) => [k, Number(v)])),
  };
};

/// Chromium's sampling profile of the page's main thread for `ms`, self time by where it went.
async function profile(browser, page, ms) {
  const cdp = await browser.context.newCDPSession(page);
  await cdp.send('Profiler.enable');
  await cdp.send('Profiler.setSamplingInterval', { interval: 500 });
  await cdp.send('Profiler.start');
  await sleep(ms);
  const { profile: p } = await cdp.send('Profiler.stop');
  const kind = new Map();
  for (const node of p.nodes) {
    const { url, functionName } = node.callFrame;
    let k = 'other';
    if (functionName === '(idle)') k = 'idle';
    else if (functionName === '(garbage collector)') k = 'gc';
    else if (functionName === '(program)') k = 'browser';
    else if (/xterm/.test(url)) k = 'xterm';
    else if (/tern|wasm/.test(url)) k = 'tern';
    kind.set(node.id, k);
  }
  const out = { tern: 0, xterm: 0, gc: 0, browser: 0, other: 0, idle: 0 };
  const self = new Map();
  p.samples.forEach((id, i) => {
    const ms = (p.timeDeltas[i] ?? 0) / 1000;
    out[kind.get(id)] += ms;
    self.set(id, (self.get(id) ?? 0) + ms);
  });
  await cdp.detach();
  // The functions with the most self time (not idle), for a look at what to cut.
  const byName = new Map();
  for (const node of p.nodes) {
    const { url, functionName, lineNumber } = node.callFrame;
    if (functionName === '(idle)') continue;
    const name = `${functionName || '(anonymous)'} ${url.split('/').pop()}:${lineNumber}`;
    byName.set(name, (byName.get(name) ?? 0) + (self.get(node.id) ?? 0));
  }
  const top = [...byName].sort((a, b) => b[1] - a[1]).slice(0, 25).map(([n, v]) => [n, Number(v.toFixed(1))]);
  return [out, top];
}

/// States a second that count as mosh-server's full pace again (it sends a flood at ~46-50).
const FULL_PACE_STATES = 40;
const AFTER_SHOWN_S = 8;

/// Just after the page is shown again: see `afterShown` above.
async function paceAfterShown(page) {
  const shown = performance.now();
  const samples = [];
  while (performance.now() - shown < AFTER_SHOWN_S * 1000) {
    samples.push({ t: (performance.now() - shown) / 1000, states: (await pageCounts(page)).states });
    await sleep(100);
  }
  const statesAt = (t) => samples.findLast((s) => s.t <= t)?.states ?? samples[0].states;
  const firstSecond = statesAt(1) - samples[0].states;
  const full = samples.find((s) => s.t >= 1 && s.states - statesAt(s.t - 1) >= FULL_PACE_STATES);
  return { statesFirstSecond: firstSecond, fullPaceAfterS: full ? Number((full.t - 1).toFixed(2)) : null };
}

const token = 'cost-bench-' + Math.random().toString(36).slice(2);
const stateDir = tempDir('tern-cost-bench-state-');
let relay, browser;
const results = {};
try {
  relay = await startRelay({ port: await freePort(), token, stateDir });
  browser = await launchBrowser({ viewport: { width: 1000, height: 640 } });
  for (const scenario of SCENARIOS) {
    const page = await browser.context.newPage();
    const blank = scenario === 'blank';
    if (blank) await page.goto('about:blank');
    else {
      await page.goto(newSession(relay.url).replace('#', `#renderer=${RENDERER}&`));
      await waitForPrompt(page, 30000);
    }
    if (EXTRA_CSS) await page.addStyleTag({ content: EXTRA_CSS });
    // The WebGL addon loads after the first draw.
    await sleep(500);
    const size = blank ? { cols: 0, rows: 0, renderer: 'none' }
      : await page.evaluate(() => ({ cols: window.tern.term.cols, rows: window.tern.term.rows, renderer: window.tern.renderer }));
    if (COMMANDS[scenario]) await typeLine(page, COMMANDS[scenario]);
    const hidden = scenario.startsWith('hidden');
    if (scenario.endsWith('-unheld')) await page.evaluate(() => window.tern.relayHold(false));
    if (hidden) await setPageHidden(page, true);
    // Idle is measured once the cursor has stopped blinking (www/app.js, CURSOR_BLINK_MS).
    await sleep(scenario === 'idle' || blank ? IDLE_SETTLE_MS : SETTLE_MS);
    const c0 = chromiumCpu();
    const p0 = await pageCounts(page);
    await sleep(SECONDS * 1000);
    const c1 = chromiumCpu();
    const p1 = await pageCounts(page);
    const r = {
      ...size, seconds: SECONDS,
      rendererCpuS: c1.renderer - c0.renderer, gpuCpuS: c1.gpu - c0.gpu, browserCpuS: c1.browser - c0.browser,
      states: p1.states - p0.states, writes: p1.writes - p0.writes, datagramsOut: p1.datagramsOut - p0.datagramsOut,
      datagramsIn: p1.datagramsIn - p0.datagramsIn, heldBatches: p1.heldBatches - p0.heldBatches,
      controlChunks: p1.controlChunks - p0.controlChunks,
      page: Object.fromEntries(Object.keys(p1.cost).map((k) => [k, p1.cost[k] - p0.cost[k]])),
      rendererThreadsCpuS: Object.fromEntries(Object.keys(c1.threads)
        .map((k) => [k, c1.threads[k] - (c0.threads[k] ?? 0)])
        .filter(([, v]) => v > 0)
        .sort((a, b) => b[1] - a[1])),
    };
    if (PROFILE && (scenario.startsWith('flood') || hidden || scenario === 'idle')) {
      const q0 = await pageCounts(page);
      [r.profile, r.profileTop] = await profile(browser, page, SECONDS * 1000);
      r.profileStates = (await pageCounts(page)).states - q0.states;
    }
    if (hidden) {
      await setPageHidden(page, false);
      r.afterShown = await paceAfterShown(page);
    }
    results[scenario] = r;
    if (!blank) {
      await page.keyboard.press('Control+C');
      await sleep(300);
      await typeLine(page, 'exit');
      await sleep(500);
    }
    await page.close();
  }
} finally {
  await browser?.close();
  await stopRelay(relay);
  cleanupState(stateDir);
}

for (const [name, r] of Object.entries(results)) {
  const perFrame = (s) => (r.states ? (s * 1000 / r.states).toFixed(2) : '-');
  console.log(`${name} (${r.cols}x${r.rows}, ${r.renderer}): ${(r.states / r.seconds).toFixed(1)} states/s, ` +
    `${(r.writes / r.seconds).toFixed(1)} writes/s, ${(r.datagramsIn / r.seconds).toFixed(1)} datagrams in/s, ` +
    `${(r.heldBatches / r.seconds).toFixed(1)} held batches/s (${(r.controlChunks / r.seconds).toFixed(1)} control reads/s), ${(r.datagramsOut / r.seconds).toFixed(1)} datagrams out/s; renderer ${(100 * r.rendererCpuS / r.seconds).toFixed(1)} % ` +
    `(${perFrame(r.rendererCpuS)} ms/state), GPU ${(100 * r.gpuCpuS / r.seconds).toFixed(1)} %; ` +
    `page ms: ${Object.entries(r.page).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(', ')}` +
    `; renderer threads %: ${Object.entries(r.rendererThreadsCpuS).map(([k, v]) => `${k} ${(100 * v / r.seconds).toFixed(1)}`).join(', ')}` +
    (r.afterShown ? `; shown again: ${r.afterShown.statesFirstSecond} states in the first second, full pace from ${r.afterShown.fullPaceAfterS ?? 'never'} s` : '') +
    (r.profile ? `; profile ms: ${Object.entries(r.profile).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(', ')}` : ''));
}
if (PROFILE && process.argv.includes('--top')) {
  for (const [name, r] of Object.entries(results)) {
    if (r.profile) console.log(`${name}, main thread self time (ms): ${r.profileTop.map(([n, v]) => `${n} ${v}`).join('; ')}`);
  }
}
if (JSON_OUT) console.log(JSON.stringify({ scenarios: results, commands: COMMANDS }));
