// The chaos run: for a while, with the real tern-relay (spawn mode), a real mosh-server
// and the page in headless Chromium, it kills and restarts the relay at random moments (SIGKILL
// and SIGTERM), drops the network (linkemu's TUN link at 100 % loss for a few seconds), switches
// the page between WebTransport and the WebSocket fallback, reloads the page, and hides it for a
// few seconds (the relay then holds the server's datagrams and sends them together), while a typist
// types at a person's pace through the page's keyboard path and pastes (uploads) and `tern send`
// downloads run. At the end it checks:
//   - every typed byte arrived exactly once and in order: the session runs chaos-shell.py, which
//     logs every byte it reads from its terminal (raw mode), instead of a shell;
//   - every upload and download is byte-identical (SHA-256) and `tern send` succeeded;
//   - no (direction, sequence number) repeated under the session's key: chaos-seqs.py taps the
//     datagrams between the relay and mosh-server (the nonce is in the clear);
//   - the notification bar showed every outage the page noticed;
//   - nothing panicked (the relay's stderr, the page's console), and the same shell and
//     mosh-server ran throughout.
// Prints the totals as one JSON line (`chaos totals {...}`) and exits 1 with the reasons when a
// check fails.
//
//   node tests/browser/chaos/chaos.mjs [--seconds 300 | --minutes 5] [--seed 1] [--json-out FILE]
//
// Everything runs in a network namespace of its own (`unshare -rn`, see helpers.mjs inOwnNetns):
// the page reaches the relay through linkemu's TUN link, TCP (the fallback) and UDP
// (WebTransport) alike, so a drop cuts both. docs/CHAOS.md.
import { createHash, randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ROOT, ARTIFACTS, inOwnNetns, startTunLink, freePort, startRelay, stopRelay, launchBrowser, until, stats,
  tempDir, sleep, cleanupState, cliArg, pageDetail, setPageHidden,
} from '../lib/helpers.mjs';
import { makePng, pasteFile } from '../lib/paste.mjs';

const SECONDS = Number(cliArg('seconds', 0)) || Number(cliArg('minutes', 0)) * 60 || 300;
const SEED = Number(cliArg('seed', 1));
const JSON_OUT = cliArg('json-out', '');
inOwnNetns();

// xorshift32 from the seed: the same typing and the same events (not their timing) every run.
let rngState = (SEED * 2654435761) >>> 0 || 1;
const random = () => {
  rngState ^= rngState << 13; rngState >>>= 0; rngState ^= rngState >>> 17;
  rngState ^= rngState << 5; rngState >>>= 0;
  return rngState / 2 ** 32;
};
const between = (lo, hi) => lo + random() * (hi - lo);
const pick = (list) => list[Math.floor(random() * list.length)];

const started = Date.now();
const elapsed = () => (Date.now() - started) / 1000;
const say = (msg) => console.log(`[chaos ${elapsed().toFixed(1)}s] ${msg}`);
const sha256 = (b) => createHash('sha256').update(b).digest('hex');

const token = 'chaos-' + randomBytes(12).toString('hex'); // 30 characters: the relay refuses tokens under 16
const stateDir = tempDir('tern-chaos-state-');
const work = tempDir('tern-chaos-');
const shellDir = join(work, 'shell');
/// The session's chaos shell (its files carry its pid).
let shellPid = null;
const pasteDir = join(work, 'pastes');
const seqsFile = join(work, 'seqs.txt');
const SHELL = join(ROOT, 'tests/browser/chaos/chaos-shell.py');
const TAP = join(ROOT, 'tests/browser/chaos/chaos-seqs.py');
const MOSH_PORTS = [60001, 60999];
// A link slow enough that an upload or a download takes seconds, so that the events after it
// (relay restarts, drops) land while it runs: 8 Mbit/s each way, at most 300 ms queued.
const LINK = 'rate=8mbit,queue-delay=300ms';

const failures = [];
const fail = (msg) => { failures.push(msg); say(`FAIL: ${msg}`); };
const totals = {
  seed: SEED, seconds: 0,
  events: { relay_sigkill: 0, relay_sigterm: 0, network_drop: 0, to_websocket: 0, to_webtransport: 0, reload: 0, hide: 0, paste: 0, download: 0 },
  held_batches: 0, held_datagrams: 0,
  events_injected: 0, events_during_transfers: 0, network_down_s: 0, relay_down_s: 0,
  bytes_typed: 0, bytes_verified: 0, duplicates: 0, losses: 0,
  uploads: 0, uploads_verified: 0, upload_bytes_verified: 0,
  downloads: 0, downloads_verified: 0, download_bytes_verified: 0,
  datagrams_checked: 0, seq_repeats: 0,
  outages: 0, outages_noticed: 0, outages_with_bar: 0,
  transports_seen: [], panics: 0, failures: 0,
};

let tun, tap, relay, browser, page, port, origin;
const relayLogs = [];

async function startTheRelay() {
  relay = await startRelay({
    port, token, stateDir, host: '0.0.0.0',
    args: ['--tls-self-signed', '--paste-dir', pasteDir, '--', 'python3', SHELL, shellDir],
  });
  relayLogs.push(relay);
}

/// The page's state, sampled all along: the outage checks read it afterwards.
const timeline = [];
async function sample() {
  try {
    const s = await page.evaluate(() => {
      if (!window.tern) return null;
      const { term } = window.tern;
      const buf = term.buffer.active;
      let text = '';
      for (let y = 0; y < term.rows; y++) text += (buf.getLine(buf.viewportY + y)?.translateToString(true) ?? '') + '\n';
      const st = window.tern.stats();
      return { phase: st.phase, transport: st.transport, text };
    });
    if (!s) return;
    // The bar over the screen: the page's own line (relay lost) or the core's mosh-style one.
    const bar = /tern: Connection to the relay lost|Last contact|reconnecting/i.test(s.text);
    timeline.push({ t: Date.now(), phase: s.phase, transport: s.transport, bar });
    if (s.transport && !totals.transports_seen.includes(s.transport)) totals.transports_seen.push(s.transport);
  } catch { /* the page is navigating */ }
}

const phase = async () => (await stats(page))?.phase;
const waitLive = (what, timeout = 90000) => until(async () => (await phase()) === 'live',
  { timeout, interval: 200, what, detail: pageDetail(page) });

/// The person at the keyboard: a seeded stream of printable ASCII and Enter, in bursts at a
/// typist's pace, through playwright's keyboard (xterm.js's key handling, the page, the core).
const typist = {
  typed: [], paused: false, stopped: false, idle: Promise.resolve(),
  async run() {
    while (!this.stopped) {
      if (this.paused) { await sleep(50); continue; }
      let release;
      this.idle = new Promise((r) => { release = r; });
      try {
        const burst = 1 + Math.floor(random() * 8);
        for (let i = 0; i < burst && !this.stopped; i++) {
          if (random() < 0.08) {
            await page.keyboard.press('Enter');
            this.typed.push(13); // raw mode: Enter arrives as CR
          } else {
            const ch = String.fromCharCode(32 + Math.floor(random() * 95));
            await page.keyboard.type(ch);
            this.typed.push(ch.charCodeAt(0));
          }
          await sleep(between(20, 90));
        }
      } finally { release(); }
      await sleep(between(100, 600));
    }
  },
  /// Resolves once the key in progress is handed over; nothing is typed until resume().
  async pause() { this.paused = true; await this.idle; },
  resume() { this.paused = false; },
};

// Uploads and downloads run in the background while other events happen; a reload (which would
// drop the page's transfer state) waits for them.
const jobs = new Set();
const running = { paste: false, download: false };
const pastes = []; // { path, bytes }
const downloads = []; // { id, bytes, got }

function startPaste(n) {
  const png = makePng(Math.floor(between(500_000, 2_000_000)), SEED * 1000 + n);
  const path = join(pasteDir, `${sha256(png)}.png`);
  running.paste = true;
  const t0 = Date.now();
  const job = (async () => {
    const before = (await stats(page)).paste.pathsTyped;
    await pasteFile(page, png);
    await until(async () => (await stats(page)).paste.pathsTyped > before,
      { timeout: 180000, interval: 250, what: `paste ${n}: its path typed`, detail: pageDetail(page) });
    pastes.push({ path, bytes: png });
    say(`paste ${n} done (${png.length} bytes, ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  })().catch((e) => fail(`paste ${n}: ${e.message}`)).finally(() => { jobs.delete(job); running.paste = false; });
  jobs.add(job);
}

function startDownload(n) {
  const bytes = randomBytes(Math.floor(between(2_000_000, 6_000_000)));
  const file = join(work, `send-${n}.bin`);
  writeFileSync(file, bytes);
  running.download = true;
  const t0 = Date.now();
  const job = (async () => {
    const event = page.waitForEvent('download', { timeout: 180000 });
    writeFileSync(join(shellDir, `control-${shellPid}`), `send ${n} ${file}\n`, { flag: 'a' });
    const download = await event;
    const saved = join(work, `saved-${n}.bin`);
    await download.saveAs(saved);
    const rcFile = join(shellDir, `send-${n}.rc`);
    await until(() => existsSync(rcFile), { timeout: 60000, what: `tern send ${n} to exit` });
    downloads.push({ n, bytes, got: readFileSync(saved), rc: readFileSync(rcFile, 'utf8').trim(),
      out: readFileSync(join(shellDir, `send-${n}.out`), 'utf8') });
    say(`download ${n} done (${bytes.length} bytes, ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  })().catch((e) => fail(`download ${n}: ${e.message}; ${sendSaid(n)}`)).finally(() => { jobs.delete(job); running.download = false; });
  jobs.add(job);
}

/// What `tern send` N said and its exit status so far, for a failure's message.
function sendSaid(n) {
  const read = (name) => { try { return readFileSync(join(shellDir, name), 'utf8').trim(); } catch { return null; } };
  const rc = read(`send-${n}.rc`);
  return `tern send ${n}: ${rc === null ? 'still running' : `exit ${rc}`}, said: ${JSON.stringify(read(`send-${n}.out`) ?? '')}`;
}

/// Every event and how many bytes had been typed when it came: a lost or doubled byte is named
/// by the event before it.
const injected = [];

/// An outage: from the moment it was injected until the page was live again.
const outages = [];

async function restartRelay(signal) {
  const t0 = Date.now();
  // The page may not have noticed a SIGKILL yet when the new relay is up: wait for a new link
  // (its `ready`), not merely a phase that still says `live`.
  const readies = (await stats(page)).readies;
  await stopRelay(relay, signal);
  const down = between(0.5, 6);
  await sleep(down * 1000);
  await startTheRelay();
  totals.relay_down_s += (Date.now() - t0) / 1000;
  await until(async () => { const s = await stats(page); return s.readies > readies && s.phase === 'live'; },
    { timeout: 90000, interval: 200, what: `a new link after a relay ${signal}`, detail: pageDetail(page) });
  outages.push({ kind: `relay ${signal}`, from: t0, to: Date.now() });
}

async function dropNetwork() {
  const t0 = Date.now();
  const { transport } = await stats(page);
  const seconds = between(5, SECONDS >= 240 ? 30 : 12);
  await tun.set('link loss=100%');
  await sleep(seconds * 1000);
  await tun.set('link loss=0');
  totals.network_down_s += seconds;
  await waitLive(`the page live again after ${seconds.toFixed(1)} s without network`);
  outages.push({ kind: `network ${seconds.toFixed(1)} s over ${transport}`, from: t0, to: Date.now(), seconds });
}

/// Reloads the page, with WebTransport pointed at `wtPort` (a UDP port where nothing listens
/// stands for blocked UDP: the page falls back to the WebSocket), or unchanged.
async function reload(wtPort) {
  while (jobs.size) await Promise.race([...jobs]);
  await typist.pause();
  // The event's own position is where it was chosen; the burst in progress then ends first.
  say(`reloading after byte ${typist.typed.length}`);
  try {
    if (wtPort !== undefined) {
      await page.evaluate((p) => (p ? sessionStorage.setItem('tern.wt_port', String(p)) : sessionStorage.removeItem('tern.wt_port')), wtPort);
    }
    await page.reload();
    await until(() => page.evaluate(() => !!window.tern && !!document.activeElement?.classList.contains('xterm-helper-textarea')),
      { timeout: 60000, what: 'the reloaded page, its terminal focused', detail: pageDetail(page) });
  } finally { typist.resume(); }
  await waitLive('the page live after a reload');
}

let deadUdpPort;
let onFallback = false;
async function switchTransport() {
  onFallback = !onFallback;
  await reload(onFallback ? deadUdpPort : 0);
  const { transport } = await stats(page);
  const want = onFallback ? 'websocket' : 'webtransport';
  say(`switched: now ${transport}`);
  // Pointed at a dead UDP port the page can only use the fallback; the way back may fall back too
  // on a loaded machine (the WebTransport patience), so only the first is a check.
  if (onFallback && transport !== want) fail(`after the switch to the fallback the page uses ${transport}`);
}

/// Hides the page for a few seconds while the typist goes on (a tab in the background: the relay
/// holds the server's datagrams and sends them together), then shows it again.
async function hidePage() {
  const before = await stats(page);
  await setPageHidden(page, true);
  await sleep(between(2, 5) * 1000);
  const during = await stats(page);
  await setPageHidden(page, false);
  const batches = during.heldBatches - before.heldBatches;
  const datagrams = during.heldDatagrams - before.heldDatagrams;
  totals.held_batches += batches;
  totals.held_datagrams += datagrams;
  say(`shown again: ${datagrams} server datagrams came in ${batches} held batches while hidden`);
}

const KINDS = ['relay_sigkill', 'relay_sigterm', 'network_drop', 'switch', 'reload', 'hide', 'paste', 'download'];
const DISRUPTIONS = ['relay_sigkill', 'relay_sigterm', 'network_drop'];
async function inject(kind, n) {
  totals.events_injected++;
  injected.push({ n, kind, at: typist.typed.length });
  // A restart or a drop while an upload or download runs: the transfer must resume.
  if (jobs.size && DISRUPTIONS.includes(kind)) totals.events_during_transfers++;
  say(`event ${n}: ${kind}${jobs.size ? ` (${[...Object.keys(running)].filter((k) => running[k]).join(', ')} running)` : ''}`);
  switch (kind) {
    case 'relay_sigkill': totals.events.relay_sigkill++; return restartRelay('SIGKILL');
    case 'relay_sigterm': totals.events.relay_sigterm++; return restartRelay('SIGTERM');
    case 'network_drop': totals.events.network_drop++; return dropNetwork();
    case 'switch':
      totals.events[onFallback ? 'to_webtransport' : 'to_websocket']++;
      return switchTransport();
    case 'reload': totals.events.reload++; return reload();
    case 'hide': totals.events.hide++; return hidePage();
    case 'paste':
      totals.events.paste++; totals.uploads++;
      return startPaste(n);
    case 'download':
      totals.events.download++; totals.downloads++;
      return startDownload(n);
    default: throw new Error(kind);
  }
}

/// Longest common subsequence length of two byte arrays (two rows of the table).
function lcs(a, b) {
  let prev = new Uint32Array(b.length + 1);
  let row = new Uint32Array(b.length + 1);
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      row[j] = a[i - 1] === b[j - 1] ? prev[j - 1] + 1 : Math.max(prev[j], row[j - 1]);
    }
    [prev, row] = [row, prev];
  }
  return prev[b.length];
}

/// What the page types for a finished paste: the path and a space (the shell did not ask for
/// bracketed paste). Its place among the typed keys is the page's to choose.
const typedPath = (path) => `${path} `;

/// What the shell read, without the paths the page typed for the pastes (each exactly once).
function typedFromLog({ quiet = false } = {}) {
  let log = readFileSync(join(shellDir, `typed-${shellPid}.log`)).toString('latin1');
  for (const { path } of pastes) {
    const parts = log.split(typedPath(path));
    if (parts.length !== 2 && !quiet) fail(`the path of paste ${path} arrived ${parts.length - 1} times`);
    log = parts.join('');
  }
  return Buffer.from(log, 'latin1');
}

function checkTyping() {
  const want = Buffer.from(typist.typed);
  const got = typedFromLog();
  totals.bytes_typed = want.length;
  if (got.equals(want)) {
    totals.bytes_verified = want.length;
    return;
  }
  const common = lcs(want, got);
  totals.bytes_verified = common;
  totals.losses = want.length - common;
  totals.duplicates = got.length - common;
  let at = 0;
  while (at < want.length && want[at] === got[at]) at++;
  const before = injected.filter((e) => e.at <= at).pop();
  const after = injected.find((e) => e.at > at);
  fail(`typed ${want.length} bytes, the shell read ${got.length}: ${totals.losses} lost, ${totals.duplicates} extra `
    + `(or reordered); first difference at byte ${at}: typed ${JSON.stringify(want.subarray(at, at + 40).toString('latin1'))}, `
    + `read ${JSON.stringify(got.subarray(at, at + 40).toString('latin1'))}; the byte was typed after event `
    + `${before ? `${before.n} (${before.kind}, at byte ${before.at})` : 'none'} and before event `
    + `${after ? `${after.n} (${after.kind}, at byte ${after.at})` : 'none'}`);
}

function checkTransfers() {
  for (const { path, bytes } of pastes) {
    const stored = existsSync(path) ? readFileSync(path) : null;
    if (stored && sha256(stored) === sha256(bytes)) {
      totals.uploads_verified++;
      totals.upload_bytes_verified += bytes.length;
    } else fail(`upload ${path}: ${stored ? 'different bytes' : 'missing'}`);
  }
  for (const { n, bytes, got, rc, out } of downloads) {
    if (sha256(got) === sha256(bytes) && rc === '0') {
      totals.downloads_verified++;
      totals.download_bytes_verified += bytes.length;
    } else fail(`download ${n}: ${got.length} of ${bytes.length} bytes, identical: ${sha256(got) === sha256(bytes)}, tern send exit ${rc}: ${out}`);
  }
  if (pastes.length < totals.uploads) fail(`${totals.uploads - pastes.length} pastes did not finish`);
  if (downloads.length < totals.downloads) fail(`${totals.downloads - downloads.length} downloads did not finish`);
}

/// No (direction, sequence number) twice under the session's key (mosh-server's port: one
/// session, one key, from the relay's record).
function checkSequences() {
  const records = readdirSync(join(stateDir, 'sessions')).filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(stateDir, 'sessions', f), 'utf8')));
  if (records.length !== 1) fail(`the relay recorded ${records.length} sessions, not 1`);
  const serverPort = records[0]?.port;
  const seen = new Set();
  for (const line of readFileSync(seqsFile, 'utf8').split('\n')) {
    const [sport, dport, nonce] = line.split(' ');
    if (!nonce || (Number(sport) !== serverPort && Number(dport) !== serverPort)) continue;
    totals.datagrams_checked++;
    const toClient = BigInt(`0x${nonce}`) >> 63n === 1n;
    if (toClient !== (Number(sport) === serverPort)) fail(`datagram ${line}: direction bit against its direction`);
    if (seen.has(nonce)) { totals.seq_repeats++; if (totals.seq_repeats <= 5) fail(`nonce ${nonce} repeated (${line})`); }
    seen.add(nonce);
  }
  if (totals.datagrams_checked < 100) fail(`only ${totals.datagrams_checked} datagrams tapped`);
  return records[0];
}

/// The bar must have shown every outage the page noticed (it left `live`), and every drop long
/// enough that it must have noticed (the page's liveness closes a silent link after 7 s).
function checkOutages() {
  totals.outages = outages.length;
  for (const o of outages) {
    const during = timeline.filter((s) => s.t >= o.from && s.t <= o.to);
    const noticed = during.some((s) => s.phase !== 'live');
    const bar = during.some((s) => s.bar);
    if (noticed) totals.outages_noticed++;
    if (bar) totals.outages_with_bar++;
    if ((noticed || o.seconds >= 10) && !bar) {
      // Seen on the WebSocket fallback: the page stayed `live`, bar-less, through a 13.6 s drop
      // (docs/CHAOS.md, "Found").
      fail(`outage "${o.kind}" (${((o.to - o.from) / 1000).toFixed(1)} s, ${during.length} samples): `
        + `${noticed ? 'the page noticed it but the bar never showed' : 'the page stayed live and the bar never showed'}`);
    }
  }
}

function checkPanics(consoleLog) {
  for (const r of relayLogs) {
    const lines = r.log().split('\n').filter((l) => /panicked/.test(l));
    totals.panics += lines.length;
    for (const l of lines.slice(0, 3)) fail(`relay panic: ${l}`);
  }
  const pageLines = consoleLog.filter((l) => /panicked|RuntimeError/.test(l));
  totals.panics += pageLines.length;
  for (const l of pageLines.slice(0, 3)) fail(`page: ${l}`);
}

const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };

let exitCode = 0;
try {
  // The TUN link first: it brings up the namespace's loopback.
  tun = await startTunLink({ link: LINK, seed: SEED });
  mkdirSync(shellDir);
  tap = spawn('python3', [TAP, seqsFile, String(MOSH_PORTS[0]), String(MOSH_PORTS[1])], { stdio: ['ignore', 'pipe', 'pipe'] });
  let tapLog = '';
  tap.stdout.on('data', (d) => { tapLog += d; });
  tap.stderr.on('data', (d) => { tapLog += d; });
  await until(() => tapLog.includes('chaos-seqs ready'), { timeout: 10000, what: 'the nonce tap', detail: async () => tapLog });
  port = await freePort();
  deadUdpPort = await freePort();
  await startTheRelay();
  origin = `https://${tun.far}:${port}`;
  browser = await launchBrowser({ args: ['--ignore-certificate-errors'] });
  page = browser.page;
  await page.goto(`${origin}/#session=new&token=${token}`);
  // The session's shell says its pid on the screen (the warm spare runs one of its own).
  let ready = null;
  await until(async () => (ready = /chaos-shell ready pid=(\d+)/.exec(await page.evaluate(() => window.tern?.screenText() ?? ''))),
    { timeout: 60000, what: 'the chaos shell', detail: pageDetail(page) });
  await waitLive('the session live');
  shellPid = Number(ready[1]);
  const firstSession = (await stats(page)).session;
  say(`live; the shell is pid ${shellPid}; chaos for ${SECONDS} s, seed ${SEED}`);

  const sampler = setInterval(sample, 250);
  // A key the page could not take (it crashed, the browser went) ends the typing: a failure.
  const typing = typist.run().catch((e) => fail(`the typist stopped: ${e.message}`));
  // Every kind once (in a seeded order), then at random; a few seconds of plain typing between.
  // Right after a transfer starts comes a restart or a drop, soon: it lands while it runs.
  const order = [...KINDS].sort(() => random() - 0.5);
  let n = 0;
  let next = 0;
  let afterTransfer = false;
  const chaosFrom = Date.now();
  // The run must see a restart or a drop land while a transfer runs. A transfer that was last in
  // the order still gets its disruption, and one that finished before it came (a small paste on
  // a quick link) is made up for past the run's time by a download (seconds long at LINK's rate),
  // at most three times; the test then says what it saw.
  let makeUps = 0;
  const nextKind = () => {
    if (afterTransfer) return pick(DISRUPTIONS);
    if (next < order.length) return order[next++];
    if ((Date.now() - chaosFrom) / 1000 < SECONDS) return pick(KINDS);
    if (totals.events_during_transfers === 0 && makeUps < 3) { makeUps++; return 'download'; }
    return null;
  };
  for (;;) {
    await sleep((afterTransfer ? between(0.3, 1.5) : between(2, 6)) * 1000);
    let kind = nextKind();
    if (!kind) break;
    n++;
    // One upload and one download at a time (each is told apart by what the page counts).
    if (running[kind]) kind = pick(DISRUPTIONS);
    await inject(kind, n);
    afterTransfer = kind === 'paste' || kind === 'download';
  }
  say('chaos over; settling');
  while (jobs.size) await Promise.race([...jobs]);
  await waitLive('the session live at the end');
  await sleep(1000);
  typist.stopped = true;
  await typing;
  // Everything typed reaches the shell: the core keeps it until mosh-server acknowledged it.
  const want = typist.typed.length;
  await until(() => typedFromLog({ quiet: true }).length >= want, { timeout: 60000, interval: 250, what: `the shell to read ${want} bytes` })
    .catch((e) => say(e.message));
  await until(async () => (await stats(page)).core.unackedInput === 0, { timeout: 30000, what: 'no input unacknowledged' })
    .catch((e) => fail(e.message));
  clearInterval(sampler);
  totals.seconds = Math.round((Date.now() - chaosFrom) / 1000);

  checkTyping();
  checkTransfers();
  const record = checkSequences();
  checkOutages();
  checkPanics(browser.consoleLog);
  if ((await stats(page)).session !== firstSession) fail('the page ended on another relay session');
  if (!alive(shellPid)) fail(`the shell (pid ${shellPid}) is gone`);
  if (record?.pid && !alive(record.pid)) fail(`mosh-server (pid ${record.pid}) is gone`);
  const c = (await stats(page)).core;
  if (c.authFailures + c.applyFailures > 0) fail(`the core counted ${c.authFailures} auth failures and ${c.applyFailures} apply failures`);
} catch (e) {
  fail(`the run stopped: ${e.stack || e.message}`);
} finally {
  totals.failures = failures.length;
  const line = JSON.stringify(totals);
  console.log(`chaos totals ${line}`);
  if (JSON_OUT) writeFileSync(JSON_OUT, `${line}\n`);
  // Kept for a look afterwards: every relay's log (one per restart) and the page's console.
  const logs = join(ARTIFACTS, `chaos-seed-${SEED}.log`);
  writeFileSync(logs, `${relayLogs.map((r, i) => `=== relay ${i + 1}\n${r.log()}`).join('\n')}\n=== page console\n${browser?.consoleLog.join('\n')}\n`);
  console.log(`chaos logs in ${logs}`);
  if (failures.length) {
    console.log(`chaos FAILED (${failures.length}):\n- ${failures.join('\n- ')}`);
    console.log(`relay log (last 60 lines):\n${relay?.log().split('\n').slice(-60).join('\n')}`);
    console.log(`page console (last 40 lines):\n${browser?.consoleLog.slice(-40).join('\n')}`);
    exitCode = 1;
  }
  await browser?.close().catch(() => {});
  await stopRelay(relay);
  tap?.kill();
  await tun?.stop();
  cleanupState(stateDir);
}
process.exit(exitCode);
