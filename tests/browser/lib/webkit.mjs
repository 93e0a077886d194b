// Debian's WebKitGTK for the browser tests: MiniBrowser driven by WebKitWebDriver over the W3C
// WebDriver protocol (plain HTTP + JSON, Node's fetch; no npm driver), on an Xvfb display of its
// own (MiniBrowser has no headless mode). launchWebKit() returns what helpers.launchBrowser()
// returns for Chromium, `{ name, page, consoleLog, close() }`, and its page offers the playwright
// calls the WebKit tests use (goto, reload, evaluate, keyboard.type/press, screenshot,
// setViewportSize, close), so the shared helpers (screen, stats, waitForPrompt, typeLine, the
// paste helpers) work on it unchanged. docs/BROWSER.md, "WebKit (WebKitGTK) tests".
import { spawn } from 'node:child_process';
import { accessSync, constants, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { freePort, sleep, until, tempDir } from './helpers.mjs';

/// MiniBrowser: TERN_MINIBROWSER, or where Debian's libwebkit2gtk-4.1-0 / libwebkitgtk-6.0-4 put it.
const MINIBROWSER_PATHS = [
  '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser',
  '/usr/lib/aarch64-linux-gnu/webkit2gtk-4.1/MiniBrowser',
  '/usr/lib/x86_64-linux-gnu/webkitgtk-6.0/MiniBrowser',
  '/usr/lib/aarch64-linux-gnu/webkitgtk-6.0/MiniBrowser',
];

const executable = (p) => { try { accessSync(p, constants.X_OK); return true; } catch { return false; } };
const onPath = (name) => (process.env.PATH || '').split(delimiter).map((d) => join(d, name)).find(executable) ?? null;

export function minibrowser() {
  const named = process.env.TERN_MINIBROWSER;
  if (named) return executable(named) ? named : null;
  return MINIBROWSER_PATHS.find(executable) ?? null;
}

let unavailable;
/// Why the WebKit tests cannot run here (a sentence), or null when they can.
export function webkitUnavailable() {
  if (unavailable !== undefined) return unavailable;
  const missing = [];
  if (!onPath('WebKitWebDriver')) missing.push('WebKitWebDriver (Debian webkit2gtk-driver)');
  if (!minibrowser()) missing.push('MiniBrowser (Debian libwebkit2gtk-4.1-0, or TERN_MINIBROWSER)');
  // xvfb-run is the package's other program; Xvfb itself is what runs.
  if (!onPath('Xvfb')) missing.push('Xvfb (Debian xvfb)');
  unavailable = missing.length
    ? `${missing.join(', ')} not installed (scripts/setup.sh test installs webkit2gtk-driver and xvfb as root)`
    : null;
  return unavailable;
}

// Every process group this module started, killed when node exits however it exits (a failed
// test, the runner's timeout): no Xvfb or MiniBrowser outlives the test file.
const groups = new Set();
const killGroup = (pid, signal = 'SIGKILL') => { try { process.kill(-pid, signal); } catch { /* gone */ } };
process.once('exit', () => { for (const pid of groups) killGroup(pid); });
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    for (const pid of groups) killGroup(pid);
    process.kill(process.pid, signal);
  });
}

/// Starts `cmd` in a process group of its own (so its children, MiniBrowser and WebKit's web and
/// network processes, go with it). The group stays listed until stopGroup() (its leader may exit
/// before its children).
function startGroup(cmd, args, opts) {
  const child = spawn(cmd, args, { ...opts, detached: true });
  groups.add(child.pid);
  return child;
}

/// SIGTERM to the group, up to 3 s for its leader to exit, then SIGKILL to whatever is left in it.
async function stopGroup(child) {
  if (!child) return;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    killGroup(child.pid, 'SIGTERM');
    await Promise.race([exited, sleep(3000)]);
  }
  killGroup(child.pid, 'SIGKILL');
  groups.delete(child.pid);
}

/// The Xvfb screen. Without a window manager X gives the keyboard focus to the window under the
/// pointer, which stays at the screen's centre: windows are placed over the centre (see
/// setViewportSize), or the page would lose focus (document.hasFocus(), xterm.js's hollow cursor).
const SCREEN = { width: 1920, height: 1200 };

/// An Xvfb display (the server picks a free number and says which on fd 3).
async function startXvfb() {
  const child = startGroup('Xvfb', ['-displayfd', '3', '-screen', '0', `${SCREEN.width}x${SCREEN.height}x24`, '-nolisten', 'tcp'],
    { stdio: ['ignore', 'ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => { log += d; });
  const display = await new Promise((res, rej) => {
    let out = '';
    const timer = setTimeout(() => rej(new Error(`Xvfb gave no display number:\n${log}`)), 15000);
    child.stdio[3].on('data', (d) => {
      out += d;
      if (out.includes('\n')) { clearTimeout(timer); res(`:${out.trim()}`); }
    });
    child.once('exit', (code) => { clearTimeout(timer); rej(new Error(`Xvfb exited ${code}:\n${log}`)); });
  });
  return { child, display };
}

/// A GTK configuration of the run's own (XDG_CONFIG_HOME for MiniBrowser): its toolbar's buttons
/// without padding, so that the window can be as narrow as a phone (390 px; with GTK's default
/// theme MiniBrowser's toolbar keeps it at least 447 px wide). Only the browser's own bar changes:
/// WebKitGTK draws the page's form controls itself, not with GTK's theme.
function gtkConfig() {
  const dir = tempDir('tern-webkit-gtk-');
  for (const gtk of ['gtk-3.0', 'gtk-4.0']) {
    mkdirSync(join(dir, gtk));
    writeFileSync(join(dir, gtk, 'gtk.css'), 'button { padding: 0; min-width: 0; }\n');
  }
  return dir;
}

const KEYS = {
  Enter: '\uE007', Escape: '\uE00C', Backspace: '\uE003', Tab: '\uE004', Delete: '\uE017',
  ArrowLeft: '\uE012', ArrowUp: '\uE013', ArrowRight: '\uE014', ArrowDown: '\uE015',
  Home: '\uE011', End: '\uE010', PageUp: '\uE00E', PageDown: '\uE00F',
  Shift: '\uE008', Control: '\uE009', Alt: '\uE00A', Meta: '\uE03D',
};
const key = (name) => KEYS[name] ?? (name.length === 1 ? name : (() => { throw new Error(`unknown key ${name}`); })());
const stroke = (value) => [{ type: 'keyDown', value }, { type: 'keyUp', value }];

/// A W3C WebDriver session's commands (`cmd(method, path, body)` against /session/ID).
class Session {
  constructor(base, id) { Object.assign(this, { base, id }); }

  async cmd(method, path, body) {
    const res = await fetch(`${this.base}/session/${this.id}${path}`, {
      method,
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: body === undefined ? undefined : JSON.stringify(body),
      // A browser that stopped answering fails the command rather than hanging the test file.
      signal: AbortSignal.timeout(90000),
    });
    const json = await res.json().catch(() => ({}));
    if (!res.ok) {
      const v = json.value ?? {};
      throw new Error(`WebDriver ${method} ${path}: ${v.error ?? res.status}: ${v.message ?? ''}`);
    }
    return json.value;
  }
}

// The page's console in `consoleLog`: WebDriver classic has no log command, and MiniBrowser's
// --enable-write-console-messages-to-stdout does not apply to the web views automation opens. So
// after each load the page's console and its uncaught errors are copied into an array, which is
// read before the next navigation and at close; what the page logs before its load event is lost.
const CONSOLE_HOOK = `(() => {
  if (window.__ternConsole) return;
  const log = (window.__ternConsole = []);
  for (const k of ['log', 'info', 'warn', 'error', 'debug']) {
    const orig = console[k];
    console[k] = function (...args) { log.push(k + ': ' + args.map(String).join(' ')); return orig.apply(this, args); };
  }
  addEventListener('error', (e) => log.push('pageerror: ' + e.message));
  addEventListener('unhandledrejection', (e) => log.push('pageerror: ' + e.reason));
})()`;

/// The page of a WebKit session, with the playwright calls the tests use.
class WebKitPage {
  constructor(session, consoleLog) {
    this.session = session;
    this.consoleLog = consoleLog;
    const actions = (list) => this.session.cmd('POST', '/actions', { actions: [{ type: 'key', id: 'keyboard', actions: list }] });
    this.keyboard = {
      /// Keys to the focused element (xterm.js's textarea) as W3C key actions: real key events
      /// in WebKit. `\n` is Enter. All in one action sequence: WebKit dispatches them in order.
      type: async (text) => {
        await actions([...text].flatMap((c) => stroke(c === '\n' ? KEYS.Enter : c)));
      },
      /// `Enter`, `Control+U`, `Shift+Tab`: modifiers held around the last key (a letter in lower
      /// case: with Control held, the key, not the shifted character).
      press: async (combo) => {
        const parts = combo.length > 1 ? combo.split('+') : [combo];
        const last = parts.pop();
        const mods = parts.map((m) => key(m === 'ControlOrMeta' ? 'Control' : m));
        const k = mods.length && /^[A-Z]$/.test(last) ? last.toLowerCase() : key(last);
        await actions([
          ...mods.map((value) => ({ type: 'keyDown', value })),
          ...stroke(k),
          ...mods.reverse().map((value) => ({ type: 'keyUp', value })),
        ]);
      },
    };
  }

  /// Loads `url` and returns when its load event fired (the page's scripts go on after).
  async goto(url) {
    await this.readConsole();
    await this.session.cmd('POST', '/url', { url });
    await this.evaluate(CONSOLE_HOOK).catch(() => {});
  }

  async reload() {
    await this.readConsole();
    await this.session.cmd('POST', '/refresh', {});
    await this.evaluate(CONSOLE_HOOK).catch(() => {});
  }

  /// Moves what the page logged since the last reading into consoleLog.
  async readConsole() {
    const lines = await this.evaluate(() => window.__ternConsole?.splice(0) ?? []).catch(() => []);
    this.consoleLog.push(...lines);
  }

  async url() { return this.session.cmd('GET', '/url'); }

  /// `fn` (a function, or a script's source) run in the page with `arg`; a returned promise is
  /// awaited (WebKitWebDriver's synchronous execute waits for it, as the W3C spec says).
  async evaluate(fn, arg) {
    const script = typeof fn === 'function' ? `return (${fn}).apply(null, arguments);` : `return (${fn});`;
    return this.session.cmd('POST', '/execute/sync', { script, args: arg === undefined ? [] : [arg] });
  }

  /// WebDriver's asynchronous execute: `script` is a function body whose last argument is the
  /// callback that ends it.
  async executeAsync(script, ...args) {
    return this.session.cmd('POST', '/execute/async', { script, args });
  }

  /// The viewport as a PNG (WebDriver's screenshot is of the document's viewport, without the
  /// browser's own bar), written to `path` when given.
  async screenshot({ path } = {}) {
    const png = Buffer.from(await this.session.cmd('GET', '/screenshot'), 'base64');
    if (path) writeFileSync(path, png);
    return png;
  }

  async viewportSize() {
    return this.evaluate(() => ({ width: window.innerWidth, height: window.innerHeight }));
  }

  /// Sizes the window so that the page's viewport is `width` x `height` (WebDriver sizes the
  /// outer window; MiniBrowser's bar takes some of it). Returns the viewport obtained: MiniBrowser's
  /// toolbar bounds the window's width from below (under 390 px with gtkConfig()'s buttons).
  async setViewportSize({ width, height }) {
    // What MiniBrowser's bar takes, learnt from the last resize (the window's size is applied
    // asynchronously: the viewport is read once it stopped changing, and a second round corrects
    // a stale reading).
    this.chrome ??= { width: 0, height: 0 };
    let got;
    for (let round = 0; round < 3; round++) {
      const w = Math.max(1, width + this.chrome.width);
      const h = Math.max(1, height + this.chrome.height);
      // Over the screen's centre, where the pointer is: the window keeps the focus (SCREEN).
      const outer = await this.session.cmd('POST', '/window/rect', {
        x: Math.max(0, Math.round((SCREEN.width - w) / 2)), y: Math.max(0, Math.round((SCREEN.height - h) / 2)),
        width: w, height: h,
      });
      got = await this.settledViewport();
      this.chrome = { width: Math.max(0, outer.width - got.width), height: Math.max(0, outer.height - got.height) };
      if (got.width === width && got.height === height) break;
    }
    // The page's resize handling (xterm.js refits) runs on the next frames.
    await sleep(200);
    return got;
  }

  /// The viewport once two readings 100 ms apart agree.
  async settledViewport() {
    let last = await this.viewportSize();
    for (let i = 0; i < 30; i++) {
      await sleep(100);
      const now = await this.viewportSize();
      if (now.width === last.width && now.height === last.height) return now;
      last = now;
    }
    return last;
  }

  /// Ends the session: MiniBrowser closes.
  async close() {
    await this.readConsole();
    await this.session.cmd('DELETE', '');
  }
}

/// MiniBrowser under WebKitWebDriver on an Xvfb display of its own, with a fresh ephemeral
/// profile (automation mode), its viewport `viewport`. Throws with the reason when WebKit cannot run here (tests check
/// webkitUnavailable() first and skip). `consoleLog` holds the driver's messages and what the
/// page wrote to its console after its load event (CONSOLE_HOOK).
export async function launchWebKit(viewport = { width: 1280, height: 720 }) {
  const why = webkitUnavailable();
  if (why) throw new Error(`WebKit tests cannot run: ${why}`);
  const xvfb = await startXvfb();
  const config = gtkConfig();
  const consoleLog = [];
  let driver;
  let page;
  let version;
  try {
    const port = await freePort();
    driver = startGroup('WebKitWebDriver', [`--port=${port}`], {
      env: { ...process.env, DISPLAY: xvfb.display, XDG_CONFIG_HOME: config },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const s of [driver.stdout, driver.stderr]) {
      s.setEncoding('utf8');
      s.on('data', (d) => consoleLog.push(...d.split('\n').filter(Boolean)));
    }
    const base = `http://127.0.0.1:${port}`;
    await until(async () => {
      if (driver.exitCode !== null) throw new Error(`WebKitWebDriver exited ${driver.exitCode}:\n${consoleLog.join('\n')}`);
      const r = await fetch(`${base}/status`).then((x) => x.json()).catch(() => null);
      return r?.value?.ready;
    }, { timeout: 15000, what: 'WebKitWebDriver to listen' });
    const res = await fetch(`${base}/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        capabilities: {
          alwaysMatch: {
            'webkitgtk:browserOptions': {
              binary: minibrowser(),
              args: ['--automation'],
            },
            // The page's beforeunload guard (a live session asks before a reload) must not stop
            // the tests' reloads: accepted as "leave".
            unhandledPromptBehavior: 'accept',
          },
        },
      }),
    });
    const json = await res.json();
    if (!res.ok) throw new Error(`WebKitWebDriver refused a session: ${JSON.stringify(json.value)}`);
    page = new WebKitPage(new Session(base, json.value.sessionId), consoleLog);
    version = json.value.capabilities?.browserVersion;
    if (viewport) await page.setViewportSize(viewport);
  } catch (e) {
    await stopGroup(driver);
    await stopGroup(xvfb.child);
    rmSync(config, { recursive: true, force: true });
    throw e;
  }
  return {
    name: 'webkit', page, consoleLog, version: `WebKitGTK ${version}`, display: xvfb.display,
    async close() {
      await Promise.race([page.close().catch(() => {}), sleep(5000)]);
      await stopGroup(driver);
      await stopGroup(xvfb.child);
      rmSync(config, { recursive: true, force: true });
    },
  };
}
