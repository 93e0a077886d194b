// Shared set-up for the browser tests: the real tern-relay on a free port, headless Chromium (or
// Firefox with TERN_BROWSER=firefox, see ./firefox.mjs).
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { createSocket } from 'node:dgram';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const ARTIFACTS = join(ROOT, 'test-artifacts');
mkdirSync(ARTIFACTS, { recursive: true });

import { sleep, until } from '../../until.mjs';
export { sleep, until };

/// Builds tern-relay (debug) unless TERN_RELAY_BIN names one. Cargo rebuilds it when relay/page
/// changed (its build.rs embeds the page), so scripts/build-wasm.sh must have run first.
let relayBin;
export function relayBinary() {
  if (relayBin) return relayBin;
  if (process.env.TERN_RELAY_BIN) return (relayBin = process.env.TERN_RELAY_BIN);
  execFileSync('cargo', ['build', '-q', '-p', 'tern-relay'], { cwd: ROOT, stdio: 'inherit' });
  const target = process.env.CARGO_TARGET_DIR || join(ROOT, 'target');
  return (relayBin = join(target, 'debug', 'tern-relay'));
}

/// A port free for both TCP (HTTP) and UDP (WebTransport).
export async function freePort() {
  for (;;) {
    const port = await new Promise((res, rej) => {
      const s = createServer();
      s.once('error', rej);
      s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); });
    });
    const udpFree = await new Promise((res) => {
      const u = createSocket('udp4');
      u.once('error', () => res(false));
      u.bind(port, '127.0.0.1', () => u.close(() => res(true)));
    });
    if (udpFree) return port;
  }
}

/// Starts tern-relay (`bin`: another build of it, e.g. a bench's old side); resolves once it
/// printed its URL. `env` is added to its environment.
export async function startRelay({ port, token, stateDir, args = [], host = '127.0.0.1', env = {}, bin = relayBinary() }) {
  const child = spawn(bin, [
    // --print-url: stdout is a pipe here, where the relay otherwise keeps the token-bearing URL
    // to a 0600 file (docs/RELAY.md); the test reads it from stdout on purpose. A bench's older
    // build from before the flag printed it there anyway, and refuses the flag.
    '--listen', `${host}:${port}`, '--state-dir', stateDir, ...(knowsPrintUrl(bin) ? ['--print-url'] : []), ...args,
  ], {
    env: { ...process.env, TERN_RELAY_TOKEN: token, RUST_BACKTRACE: '0', RUST_LOG: process.env.RUST_LOG || 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stderr.on('data', (d) => { log += d; });
  const url = await new Promise((res, rej) => {
    let out = '';
    const timer = setTimeout(() => rej(new Error(`${bin} printed no URL:\n${out}\n${log}`)), 20000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/Open (\S+)/);
      if (m) { clearTimeout(timer); res(m[1]); }
    });
    child.once('exit', (code) => rej(new Error(`${bin} exited ${code}:\n${log}`)));
  });
  return { child, url, log: () => log };
}

const printUrlKnown = new Map();
/// Whether this build of tern-relay has `--print-url` (asked once per binary, from its `--help`).
function knowsPrintUrl(bin) {
  if (!printUrlKnown.has(bin)) {
    const help = spawnSync(bin, ['--help'], { encoding: 'utf8' });
    if (help.error) throw new Error(`${bin} --help: ${help.error.message}`);
    printUrlKnown.set(bin, `${help.stdout}${help.stderr}`.includes('--print-url'));
  }
  return printUrlKnown.get(bin);
}

export async function stopRelay(relay, signal = 'SIGTERM') {
  if (!relay || relay.child.exitCode !== null) return;
  const exited = new Promise((r) => relay.child.once('exit', r));
  relay.child.kill(signal);
  await Promise.race([exited, sleep(5000)]);
  if (relay.child.exitCode === null && relay.child.signalCode === null) {
    relay.child.kill('SIGKILL');
    await exited;
  }
}

/// The browser the tests run in: `chromium` (default) or `firefox` (TERN_BROWSER=firefox; the
/// tests/browser/firefox/*.test.mjs files set it and import the Chromium test files).
export function browserName() {
  const name = (process.env.TERN_BROWSER || 'chromium').toLowerCase();
  if (name !== 'chromium' && name !== 'firefox') throw new Error(`TERN_BROWSER=${name}: chromium or firefox`);
  return name;
}

/// Headless browser with a fresh profile: `launchBrowser(viewport?)` or
/// `launchBrowser({ browser: 'chromium' | 'firefox' | 'webkit', viewport, mobile, args, env })`; the browser
/// defaults to browserName(); Chromium only: `mobile` (a phone), `args` (more flags), `env` (added
/// to its environment, e.g. another HOME). Returns `{ name, context, page, consoleLog, close() }`;
/// `context.newPage()` and `page` offer the playwright calls the tests use in both browsers
/// (Firefox: ./firefox.mjs).
export async function launchBrowser(opts = {}) {
  const isOptions = opts !== null && ['browser', 'viewport', 'args', 'mobile', 'env'].some((k) => k in opts);
  // A bare viewport (or null: playwright's "no fixed viewport") as before.
  let viewport = isOptions ? opts.viewport : opts;
  if (viewport === undefined || (viewport && !viewport.width)) viewport = { width: 1100, height: 700 };
  const name = (isOptions && opts.browser) || browserName();
  if (name === 'firefox') {
    const { launchFirefox } = await import('./firefox.mjs');
    return launchFirefox(viewport);
  }
  if (name === 'webkit') {
    // Only asked for by name (tests/browser/webkit/): WebKitGTK's MiniBrowser, ./webkit.mjs.
    const { launchWebKit } = await import('./webkit.mjs');
    return launchWebKit(viewport);
  }
  if (name !== 'chromium') throw new Error(`unknown browser ${name}`);
  return launchChromium(viewport, (isOptions && opts.args) || [], isOptions && opts.mobile, isOptions && opts.env);
}

/// Headless Debian Chromium with a fresh profile (flags from docs TOOLCHAIN.md), and `args`;
/// `mobile`: a phone (touch, a mobile viewport and user agent: playwright's emulation); `env`:
/// added to its environment.
async function launchChromium(viewport, args, mobile = false, env = undefined) {
  const profile = mkdtempSync(join(tmpdir(), 'tern-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport,
    ...(env ? { env: { ...process.env, ...env } } : {}),
    ...(mobile ? { isMobile: true, hasTouch: true, deviceScaleFactor: 3 } : {}),
    args: [
      '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync',
      ...args,
    ],
  });
  // The page asks before a live session's tab closes or reloads (a beforeunload guard); tests
  // reload and close on purpose, so every such question is answered "leave".
  const leave = (p) => p.on('dialog', (d) => (d.type() === 'beforeunload' ? d.accept() : d.dismiss()));
  context.pages().forEach(leave);
  context.on('page', leave);
  const page = context.pages()[0] ?? await context.newPage();
  const consoleLog = [];
  page.on('console', (m) => consoleLog.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => consoleLog.push(`pageerror: ${e.message}`));
  return {
    name: 'chromium', context, page, consoleLog,
    async close() { await context.close(); rmSync(profile, { recursive: true, force: true }); },
  };
}

/// What a failed wait on the page shows: the core's screen, xterm.js's, the session's stats and
/// where the keyboard's focus is (keys typed into an element that ignores them go nowhere).
export const pageDetail = (page) => async () => {
  const [core, xterm, s, focus] = await page.evaluate(() => {
    const { term } = window.tern;
    const buf = term.buffer.active;
    const rows = [];
    for (let y = 0; y < term.rows; y++) rows.push(buf.getLine(buf.viewportY + y)?.translateToString(true) ?? '');
    const el = document.activeElement;
    const focus = el ? `${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}${el.className ? '.' + String(el.className).trim().split(/\s+/).join('.') : ''}` : 'none';
    return [window.tern.screenText(), rows.join('\n'), JSON.stringify(window.tern.stats()), focus];
  });
  // Blank rows left out: a CI log keeps only the start and end of a failure, and the stats and
  // the focus are what tell why.
  const rows = (text) => text.replace(/\s+$/, '');
  return `focus: ${focus}\ncore screen:\n${rows(core)}\nxterm.js screen:\n${rows(xterm)}\nstats: ${s}`;
};

export const screen = (page) => page.evaluate(() => window.tern ? window.tern.screenText() : '');
export const stats = (page) => page.evaluate(() => window.tern ? window.tern.stats() : null);

/// Waits for a shell prompt (a line ending in `$ ` or `# `) on the core's screen.
export async function waitForPrompt(page, timeout = 20000) {
  return until(async () => /[$#] ?$/m.test(await screen(page)), { timeout, what: 'a shell prompt' });
}

/// Types a line into the terminal (xterm.js's hidden textarea has focus).
export async function typeLine(page, text) {
  await page.keyboard.type(text, { delay: 5 });
  await page.keyboard.press('Enter');
}

/// A new directory under the system's temporary directory, removed when this process exits
/// (each test file is a process of its own): a test's files, a fake host's 180 MB recorder copy
/// among them, never pile up in /tmp run after run.
export function tempDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

const tempDirs = [];
process.on('exit', () => {
  for (const dir of tempDirs) {
    try { rmSync(dir, { recursive: true, force: true }); } catch { /* in use by a process that outlived us: leave it */ }
  }
});

/// Ends the mosh-servers this test's relay spawned (they outlive the relay by design) and removes
/// the state dir. Only pids recorded in this state dir are touched (a session on an ssh host has
/// its host's pid under `remote`: the tests' ssh hosts are this machine).
export function cleanupState(stateDir) {
  if (!stateDir) return;
  let files = [];
  try { files = readdirSync(join(stateDir, 'sessions')); } catch { /* no sessions */ }
  for (const f of files) {
    try {
      const record = JSON.parse(readFileSync(join(stateDir, 'sessions', f), 'utf8'));
      const pid = record.pid ?? record.remote?.pid;
      if (Number.isInteger(pid) && pid > 1) process.kill(pid, 'SIGTERM');
    } catch { /* already gone */ }
  }
  rmSync(stateDir, { recursive: true, force: true });
}

/// Builds (debug) and starts tern-tests' linkemu between the page and the relay's UDP port.
let linkemuBin;
function linkemuBinary() {
  if (!linkemuBin) {
    execFileSync('cargo', ['build', '-q', '-p', 'tern-tests', '--bin', 'linkemu'], { cwd: ROOT, stdio: 'inherit' });
    const target = process.env.CARGO_TARGET_DIR || join(ROOT, 'target');
    linkemuBin = join(target, 'debug', 'linkemu');
  }
  return linkemuBin;
}

/// Runs this script again inside a network namespace of its own (`unshare -n`), where
/// `startTunLink` may create its device; returns only in the inner run (the outer one exits with
/// the inner's status). docs/LINK-EMULATOR.md, "TUN mode".
export function inOwnNetns() {
  if (process.env.TERN_NETNS === '1') return;
  linkemuBinary();
  relayBinary();
  const unshareArgs = process.getuid() === 0 ? ['-n'] : ['-rn'];
  const r = spawnSync('unshare', [...unshareArgs, process.execPath, ...process.argv.slice(1)], {
    stdio: 'inherit', env: { ...process.env, TERN_NETNS: '1' },
  });
  if (r.error) throw new Error(`unshare (util-linux) could not run: ${r.error.message}`);
  process.exit(r.status ?? 1);
}

/// The TUN link emulator (linkemu tun) in this namespace: TCP, UDP and ICMP to the returned `far`
/// address reach the local servers through `link` (delay, loss, ...) in both directions. Start it
/// before anything binds 127.0.0.1: it brings `lo` up.
export async function startTunLink({ link, seed = 1 }) {
  const child = spawn(linkemuBinary(), ['tun', '--link', link, '--seed', String(seed), '--exit-on-stdin-eof'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let log = '';
  child.stderr.on('data', (d) => { log += d; });
  const far = await new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`linkemu tun not ready:\n${log}`)), 20000);
    child.stdout.on('data', (d) => {
      log += d;
      const m = log.match(/linkemu tun ready far (\S+)/);
      if (m) { clearTimeout(timer); res(m[1]); }
    });
    child.once('exit', (code) => { clearTimeout(timer); rej(new Error(`linkemu tun exited ${code}:\n${log}`)); });
  });
  const answers = () => log.split('\n').filter((l) => /^linkemu (set|bad line)/.test(l));
  return {
    far,
    log: () => log,
    /// Changes the link from the next packet on: `link loss=100%`, `up delay=50ms`, ... (on top
    /// of the current spec); resolves once linkemu applied it.
    async set(line) {
      const before = answers().length;
      child.stdin.write(`${line}\n`);
      await until(() => answers().length > before, { timeout: 10000, what: `linkemu to apply ${line}` });
      const answer = answers()[before];
      if (answer.startsWith('linkemu bad line')) throw new Error(answer);
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.stdin.end();
      await Promise.race([exited, sleep(3000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

export async function startLinkemu({ listenPort, targetPort, link = '', up = '', down = '', extraArgs = [] }) {
  linkemuBinary();
  const args = ['--listen', `127.0.0.1:${listenPort}`, '--target', `127.0.0.1:${targetPort}`, ...extraArgs];
  if (link) args.push('--link', link);
  if (up) args.push('--up', up);
  if (down) args.push('--down', down);
  const child = spawn(linkemuBin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (d) => { log += d; });
  child.stderr.on('data', (d) => { log += d; });
  await sleep(300);
  if (child.exitCode !== null) throw new Error(`linkemu exited: ${log}`);
  return {
    child,
    log: () => log,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(3000)]);
    },
  };
}

/// `--name VALUE` from the command line of a benchmark script, or `dflt`.
export function cliArg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
}

/// Forwards each TCP connection to `listenPort` (on 127.0.0.1) to `target`: a port on 127.0.0.1,
/// or a Unix socket's path (as `ssh -L PORT:PATH` does). Nothing on UDP.
export function tcpForwarder(listenPort, target) {
  const sockets = new Set();
  const server = createServer((client) => {
    const upstream = typeof target === 'number' ? connect(target, '127.0.0.1') : connect(target);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => { client.destroy(); upstream.destroy(); });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  return new Promise((res) => server.listen(listenPort, '127.0.0.1', () => res({
    close: () => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(r); }),
  })));
}

/// A TCP proxy that delays every chunk by `delayMs` in each direction (order kept: equal delays).
export function delayProxy(listenPort, targetPort, delayMs) {
  const sockets = new Set();
  const later = (to) => (chunk) => setTimeout(() => to.write(chunk), delayMs);
  const server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
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

/// The page's address asking for a new session (`#session=new`): without it, a page with nothing
/// saved on a relay with sessions running offers them first (the session chooser).
export const newSession = (url) => url.replace('#', '#session=new&');

/// Screenshots of the page as it is now, in dark and light, desktop and phone sizes:
/// `test-artifacts/NAME-{dark,light}-{desktop,phone}.png`. Restores the desktop size and the
/// system's scheme after.
export async function screenshotsOfState(page, name) {
  const desktop = page.viewportSize() ?? { width: 1280, height: 720 };
  for (const scheme of ['dark', 'light']) {
    try {
      await page.emulateMedia({ colorScheme: scheme });
    } catch (e) {
      console.log(`# no ${scheme} screenshots of ${name}: this browser's driver cannot emulate it (${e.message})`);
      continue;
    }
    for (const [size, viewport] of [['desktop', desktop], ['phone', { width: 390, height: 844 }]]) {
      await page.setViewportSize(viewport);
      await sleep(150);
      await page.screenshot({ path: join(ARTIFACTS, `${name}-${scheme}-${size}.png`) });
    }
  }
  await page.setViewportSize(desktop);
  await page.emulateMedia({ colorScheme: null }).catch(() => {});
  // The page refits to the restored size a few frames later (a ResizeObserver, then a frame, then
  // xterm.js's write queue): a test reading the terminal's size right away would see the phone's.
  await sleep(150);
}

/// `mosh-server new` on loopback running /bin/sh, as a person starts one for bridge mode: its port,
/// key, `MOSH CONNECT` line and pid (the caller ends it). Fails loudly without mosh-server.
export function moshServerNew() {
  const run = spawnSync('mosh-server', ['new', '-i', '127.0.0.1', '-p', '60400:60999', '-c', '256',
    '--', '/bin/sh'], {
    env: { ...process.env, LANG: 'C.UTF-8', PS1: '$ ', ENV: '' },
    encoding: 'utf8',
  });
  if (run.error) throw new Error(`mosh-server is required for this test: ${run.error}`);
  const m = run.stdout.match(/MOSH CONNECT (\d+) (\S+)/);
  if (!m) throw new Error(`mosh-server printed no MOSH CONNECT line: ${run.stdout} ${run.stderr}`);
  const pid = Number(run.stderr.match(/pid = (\d+)/)?.[1]);
  return { port: Number(m[1]), key: m[2], line: m[0], pid };
}

/// Hides or shows `page` as a browser does for a background tab: `document.visibilityState`,
/// `document.hidden` and a `visibilitychange` event. Headless Chromium and Firefox report every
/// page as visible (a minimized window or another tab in front change nothing there), so this sets
/// the document's own properties, which are what the page reads.
export async function setPageHidden(page, hidden) {
  await page.evaluate((h) => {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => (h ? 'hidden' : 'visible') });
    Object.defineProperty(document, 'hidden', { configurable: true, get: () => h });
    document.dispatchEvent(new Event('visibilitychange'));
  }, hidden);
}
