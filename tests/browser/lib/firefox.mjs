// Headless Debian Firefox ESR for the browser tests, driven over WebDriver BiDi with puppeteer-core
// (no geckodriver, no downloaded browser). launchFirefox() returns what helpers.launchBrowser()
// returns for Chromium, and its pages offer the playwright calls the tests use, so one test body
// runs in both browsers: the tests/browser/firefox/*.test.mjs files import the Chromium test files
// with TERN_BROWSER=firefox (docs/BROWSER.md, "Firefox").
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

/// The Firefox binary: Debian's firefox-esr unless TERN_FIREFOX names another.
export const FIREFOX = process.env.TERN_FIREFOX || '/usr/bin/firefox-esr';

/// Prefs for the fresh profile, on top of what puppeteer's profile and Firefox's remote agent
/// ("recommended preferences") already set (no updates, no safe browsing, no telemetry upload, no
/// push, no captive-portal probe, blocklist and remote settings pointed at dummy servers).
export const FIREFOX_PREFS = {
  // WebTransport over HTTP/3 with serverCertificateHashes. Both are on by default since Firefox
  // 114; set explicitly so that a distribution or enterprise default cannot turn the page into its
  // "This browser cannot connect" notice. No other pref is needed for self-signed certificates
  // with hashes: Firefox checks the hash (and the 14-day validity) itself.
  'network.webtransport.enabled': true,
  // The page's beforeunload guard would stop the tests' reloads with a prompt that WebDriver BiDi
  // leaves open: off (page.test.mjs checks the guard in Chromium).
  'dom.disable_beforeunload': true,
  'network.http.http3.enable': true,
  // Straight to the relay on loopback: no proxy, no DNS over HTTPS.
  'network.proxy.type': 0,
  'network.trr.mode': 5,
  // Nothing beyond loopback: no prefetch or speculative connections, no connectivity probes,
  // no OCSP / CRLite / intermediate-certificate fetches, no region or add-on look-ups.
  'network.dns.disablePrefetch': true,
  'network.prefetch-next': false,
  'network.predictor.enabled': false,
  'network.http.speculative-parallel-limit': 0,
  'network.captive-portal-service.enabled': false,
  'network.connectivity-service.enabled': false,
  'security.OCSP.enabled': 0,
  'security.remote_settings.crlite_filters.enabled': false,
  'security.remote_settings.intermediates.enabled': false,
  'extensions.blocklist.enabled': false,
  // Remote Settings (blocklists, certificate data, ...) ignores this pref in release builds
  // unless MOZ_DISABLE_NONLOCAL_CONNECTIONS=1 is set (launchFirefox sets it); then it reads
  // nothing from the network.
  'services.settings.server': 'data:,#remote-settings-dummy/v1',
  'extensions.getAddons.cache.enabled': false,
  'browser.region.network.url': '',
  'browser.region.update.enabled': false,
  'browser.discovery.enabled': false,
  'identity.fxaccounts.enabled': false,
  'media.gmp-gmpopenh264.enabled': false,
  'dom.push.connection.enabled': false,
  // Updates, studies and telemetry off.
  'app.update.auto': false,
  'app.normandy.enabled': false,
  'app.shield.optoutstudies.enabled': false,
  'messaging-system.rsexperimentloader.enabled': false,
  'toolkit.telemetry.enabled': false,
  'toolkit.telemetry.unified': false,
  'toolkit.telemetry.archive.enabled': false,
  'toolkit.telemetry.server': 'data:,',
  'datareporting.usage.uploadEnabled': false,
  'browser.ping-centre.telemetry': false,
  'browser.newtabpage.activity-stream.telemetry': false,
  'browser.newtabpage.activity-stream.feeds.telemetry': false,
  'browser.aboutwelcome.enabled': false,
};

let unavailable;
/// Why the Firefox tests cannot run here (a sentence), or null when they can.
export function firefoxUnavailable() {
  if (unavailable !== undefined) return unavailable;
  try {
    accessSync(FIREFOX, constants.X_OK);
  } catch {
    return (unavailable = `${FIREFOX} is not installed (scripts/setup.sh installs Debian's firefox-esr as root)`);
  }
  try {
    createRequire(import.meta.url).resolve('puppeteer-core');
  } catch {
    return (unavailable = 'npm puppeteer-core is not installed (npm ci)');
  }
  return (unavailable = null);
}

/// `Firefox 153.8.0esr` or the like.
export function firefoxVersion() {
  try { return execFileSync(FIREFOX, ['--version'], { encoding: 'utf8' }).trim(); } catch { return null; }
}

/// Headless Firefox with a fresh temporary profile; the same shape as helpers.launchBrowser().
export async function launchFirefox(viewport = { width: 1100, height: 700 }) {
  const why = firefoxUnavailable();
  if (why) throw new Error(`Firefox tests cannot run: ${why}`);
  const { default: puppeteer } = await import('puppeteer-core');
  const profile = mkdtempSync(join(tmpdir(), 'tern-firefox-'));
  let browser;
  try {
    browser = await puppeteer.launch({
      browser: 'firefox',
      protocol: 'webDriverBiDi',
      executablePath: FIREFOX,
      headless: true,
      userDataDir: profile,
      defaultViewport: viewport,
      extraPrefsFirefox: FIREFOX_PREFS,
      // MOZ_DISABLE_NONLOCAL_CONNECTIONS: Necko refuses every connection to a non-loopback
      // address (Mozilla's own test harness runs with it).
      env: { ...process.env, MOZ_CRASHREPORTER_DISABLE: '1', MOZ_DISABLE_NONLOCAL_CONNECTIONS: '1' },
      timeout: 60000,
    });
  } catch (e) {
    rmSync(profile, { recursive: true, force: true });
    throw e;
  }
  const consoleLog = [];
  const watch = (p) => {
    p.on('console', (m) => consoleLog.push(`${m.type()}: ${m.text()}`));
    p.on('pageerror', (e) => consoleLog.push(`pageerror: ${e.message}`));
    return p;
  };
  const context = {
    // Watched too: a failing test's detail shows every tab's console (a resume's `tern: ready`).
    async newPage() { return adaptPage(watch(await prepare(await browser.newPage()))); },
    pages: async () => (await browser.pages()).map(adaptPage),
  };
  const first = (await browser.pages())[0] ?? await browser.newPage();
  // defaultViewport applies to pages opened later, not to the tab Firefox starts with.
  if (viewport) await first.setViewport(viewport);
  const page = adaptPage(watch(await prepare(first)));
  return {
    name: 'firefox', context, page, consoleLog, puppeteer: browser,
    async close() {
      await browser.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/// Gecko's `new ClipboardEvent('paste', { clipboardData })` ignores the DataTransfer passed in
/// (the event gets a fresh, empty one), so a synthesized paste of a File arrives with no files.
/// A real paste in Firefox carries the image as `clipboardData.files` like Chromium's; to
/// synthesize that event, the constructor is made to keep the DataTransfer it is given, before
/// the page's own scripts run. The page's paste handler is untouched.
const KEEP_CLIPBOARD_DATA = `(() => {
  const Native = window.ClipboardEvent;
  const probe = new DataTransfer();
  if (new Native('paste', { clipboardData: probe }).clipboardData === probe) return;
  class ClipboardEvent extends Native {
    constructor(type, init) {
      super(type, init);
      if (init && init.clipboardData) Object.defineProperty(this, 'clipboardData', { value: init.clipboardData });
    }
  }
  window.ClipboardEvent = ClipboardEvent;
})();`;

async function prepare(p) {
  await p.evaluateOnNewDocument(KEEP_CLIPBOARD_DATA);
  return p;
}

const MODIFIERS = new Set(['Alt', 'Control', 'Meta', 'Shift', 'ControlOrMeta']);

/// A puppeteer page with the playwright calls the tests use: keyboard.press('Control+U'),
/// mouse.wheel(dx, dy), setViewportSize, emulateMedia, waitForSelector, textContent, isHidden,
/// fill, addInitScript,
/// locator(sel).waitFor/innerText/allTextContents; screenshots named browser-*.png are written
/// as firefox-*.png. Everything else is puppeteer's own (goto, url, evaluate, keyboard.type,
/// screenshot, on, close have the same shape there).
const adapted = new WeakMap();
export function adaptPage(p) {
  if (adapted.has(p)) return adapted.get(p);
  const keyboard = {
    type: (text, opts) => p.keyboard.type(text, opts),
    down: (key) => p.keyboard.down(key),
    up: (key) => p.keyboard.up(key),
    async press(combo, opts) {
      const keys = combo.length > 1 ? combo.split('+') : [combo];
      const key = keys.pop();
      const mods = keys.map((k) => (k === 'ControlOrMeta' ? 'Control' : k));
      for (const m of mods) if (!MODIFIERS.has(m)) throw new Error(`unknown modifier ${m} in ${combo}`);
      for (const m of mods) await p.keyboard.down(m);
      // Playwright's `Control+U` means the U key; with a modifier held, send its unshifted character.
      await p.keyboard.press(mods.length && /^[A-Z]$/.test(key) ? key.toLowerCase() : key, opts);
      for (const m of mods.reverse()) await p.keyboard.up(m);
    },
  };
  // Playwright's wheel(deltaX, deltaY); puppeteer's takes an object.
  const mouse = {
    move: (x, y, opts) => p.mouse.move(x, y, opts),
    wheel: (deltaX, deltaY) => p.mouse.wheel({ deltaX, deltaY }),
    click: (x, y, opts) => p.mouse.click(x, y, opts),
  };
  const extra = {
    keyboard,
    mouse,
    raw: p,
    setViewportSize: (size) => p.setViewport(size),
    viewportSize: () => p.viewport(),
    emulateMedia: ({ colorScheme }) => p.emulateMediaFeatures(
      colorScheme ? [{ name: 'prefers-color-scheme', value: colorScheme }] : []),
    waitForSelector: (selector, { state, timeout = 30000 } = {}) => p.waitForSelector(selector,
      { timeout, visible: state === 'visible' || undefined, hidden: state === 'hidden' || undefined }),
    textContent: (selector) => p.$eval(selector, (el) => el.textContent),
    isHidden: (selector) => p.$eval(selector, (el) => !el.checkVisibility()).catch(() => true),
    // Sets the value as a paste would (typing a newline into a field would submit its form).
    fill: (selector, text) => p.$eval(selector, (el, v) => {
      el.value = v;
      el.dispatchEvent(new Event('input', { bubbles: true }));
    }, text),
    addInitScript: (fn, arg) => p.evaluateOnNewDocument(fn, arg),
    screenshot: (opts = {}) => p.screenshot({ ...opts, path: opts.path && firefoxArtifact(opts.path) }),
    locator: (selector) => ({
      async waitFor({ state = 'visible', timeout = 30000 } = {}) {
        const o = { timeout };
        if (state === 'visible') o.visible = true;
        if (state === 'hidden') o.hidden = true;
        await p.waitForSelector(selector, o);
      },
      innerText: () => p.$eval(selector, (el) => el.innerText),
      textContent: () => p.$eval(selector, (el) => el.textContent),
      allTextContents: () => p.$$eval(selector, (els) => els.map((el) => el.textContent)),
      isVisible: () => p.$eval(selector, (el) => el.checkVisibility()).catch(() => false),
    }),
  };
  const proxy = new Proxy(p, {
    get(target, key) {
      if (Object.hasOwn(extra, key)) return extra[key];
      const v = Reflect.get(target, key);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  adapted.set(p, proxy);
  return proxy;
}

const ARTIFACTS = resolve(dirname(fileURLToPath(import.meta.url)), '../../../test-artifacts');

/// test-artifacts/browser-session.png → test-artifacts/firefox-session.png (other names there get
/// a firefox- prefix), so the Firefox runs keep Chromium's screenshots. Paths elsewhere stay.
export function firefoxArtifact(path) {
  if (resolve(dirname(path)) !== ARTIFACTS) return path;
  const name = basename(path);
  return join(ARTIFACTS, name.startsWith('browser-') ? name.replace(/^browser-/, 'firefox-') : `firefox-${name}`);
}
