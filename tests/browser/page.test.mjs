// The page people expect (issue 15): clipboard, links, settings, keys that reach the shell, the
// bell in a hidden tab, the extra-keys bar on a phone. Real tern-relay (spawn mode), mosh-server,
// shell and headless Chromium; screenshots of every new state.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  freePort, startRelay, stopRelay, launchBrowser, until, screen, waitForPrompt, typeLine,
  tempDir, cleanupState, newSession, screenshotsOfState, sleep, setPageHidden, browserName,
} from './helpers.mjs';

// What only Chromium's driver can do here: clipboard permissions, touch emulation, routing a page
// the test opens, the Keyboard Lock API, the beforeunload prompt (Firefox's tests turn it off).
const chromiumOnly = browserName() === 'chromium' ? {} : { skip: `needs Chromium's driver (${browserName()})` };

const token = 'test-token-' + Math.random().toString(36).slice(2);
let port, stateDir, relay, browser, page;

before(async () => {
  port = await freePort();
  stateDir = tempDir('tern-relay-state-');
  relay = await startRelay({ port, token, stateDir });
  browser = await launchBrowser();
  page = browser.page;
  if (browserName() === 'chromium') {
    await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(relay.url).origin });
  }
  await page.goto(newSession(relay.url));
  await waitForPrompt(page);
});

after(async () => {
  await browser?.close();
  await stopRelay(relay);
  cleanupState(stateDir);
  if (process.exitCode) console.log(browser?.consoleLog.join('\n'));
});

const clipboardText = (p) => p.evaluate(() => navigator.clipboard.readText());

/// The page position of the middle of cell (col, row) of xterm.js's screen (0-based).
async function cellCenter(p, col, row) {
  return p.evaluate(([c, r]) => {
    const { term } = window.tern;
    const box = term.element.querySelector('.xterm-screen').getBoundingClientRect();
    return { x: box.left + (c + 0.5) * (box.width / term.cols), y: box.top + (r + 0.5) * (box.height / term.rows) };
  }, [col, row]);
}

/// The screen row (0-based, in xterm.js's viewport) whose text matches `re`, once xterm.js shows
/// it (the core has a state a moment before xterm.js has parsed and drawn it).
async function rowOf(p, re) {
  let rows = [];
  const row = await until(async () => {
    rows = await p.evaluate(() => {
      const { term } = window.tern;
      const buf = term.buffer.active;
      return Array.from({ length: term.rows }, (_, y) => buf.getLine(buf.viewportY + y)?.translateToString(true) ?? '');
    });
    const i = rows.findIndex((r) => re.test(r));
    return i >= 0 ? i + 1 : 0;
  }, { what: `a row matching ${re}` }).catch(() => {
    throw new Error(`no row matches ${re}:\n${rows.join('\n')}`);
  });
  return row - 1;
}

/// Runs `od -c` on the next `n` bytes the terminal sends (raw mode), after `press()` typed them.
async function bytesOfKeys(p, n, press) {
  await typeLine(p, `clear; stty raw -echo; od -An -c -N ${n}; stty sane; echo od-done`);
  await sleep(500);
  await press();
  await until(async () => /od-done/.test(await screen(p)), { what: 'od to read the key' });
  return (await screen(p)).split('\n').find((l) => /^\s+\S/.test(l) && !/od -An/.test(l))?.trim() ?? '';
}

test('a mouse selection is on the clipboard; Ctrl+Shift+V types the clipboard; OSC 52 copies', chromiumOnly, async () => {
  await typeLine(page, 'clear; echo select-me-$((6*7))');
  await until(async () => /^select-me-42$/m.test(await screen(page)), { what: 'the text to select' });
  const row = await rowOf(page, /^select-me-42$/);
  const from = await cellCenter(page, 0, row);
  const to = await cellCenter(page, 11, row);
  await page.mouse.move(from.x - 3, from.y);
  await page.mouse.down();
  await page.mouse.move(to.x + 3, to.y, { steps: 5 });
  await page.mouse.up();
  await until(async () => (await clipboardText(page)) === 'select-me-42', { what: 'copy on select' })
    .catch(async (e) => { throw new Error(`${e.message}; clipboard: ${JSON.stringify(await clipboardText(page))}`); });
  await screenshotsOfState(page, 'page-selection');

  await page.evaluate(() => navigator.clipboard.writeText('echo pasted-by-keys-$((40+2))'));
  await typeLine(page, 'clear');
  await page.keyboard.press('Control+Shift+V');
  await page.keyboard.press('Enter');
  await until(async () => /^pasted-by-keys-42$/m.test(await screen(page)), { what: 'Ctrl+Shift+V to paste' });

  await page.evaluate(() => navigator.clipboard.writeText('nothing yet'));
  await typeLine(page, `printf '\\e]52;c;%s\\a' "$(printf hello | base64)"`);
  await until(async () => (await clipboardText(page)) === 'hello', { what: 'OSC 52 to copy hello' });
});

test('OSC 52 the browser refuses offers a Copy button', chromiumOnly, async () => {
  // A browser refuses a clipboard write from a page without focus (Chromium: NotAllowedError,
  // "Document is not focused"). Headless pages always have focus, so the refusal is the
  // browser's answer played by the page's own clipboard object, once.
  await page.evaluate(() => {
    const real = navigator.clipboard.writeText.bind(navigator.clipboard);
    navigator.clipboard.writeText = (text) => {
      navigator.clipboard.writeText = real;
      return Promise.reject(new DOMException('Document is not focused.', 'NotAllowedError'));
    };
  });
  await typeLine(page, 'clear; printf \'\\e]52;c;%s\\a\' "$(printf offered | base64)"');
  await until(() => page.evaluate(() => !document.getElementById('copy-offer').hidden), { what: 'the Copy button' });
  assert.match(await page.textContent('#copy-offer-text'), /copied 7 characters/);
  await screenshotsOfState(page, 'page-copy-offer');
  await page.click('#copy-offer-button');
  await until(async () => (await clipboardText(page)) === 'offered', { what: 'the Copy button to copy' });
  assert.equal(await page.evaluate(() => document.getElementById('copy-offer').hidden), true);
});

test('a printed URL is a link that opens a new page', chromiumOnly, async () => {
  await typeLine(page, 'clear; echo https://example.invalid/x');
  await until(async () => /^https:\/\/example\.invalid\/x$/m.test(await screen(page)), { what: 'the URL' });
  const row = await rowOf(page, /^https:\/\/example\.invalid\/x$/);
  const at = await cellCenter(page, 10, row);
  await page.mouse.move(at.x, at.y);
  await sleep(200);
  // The address does not resolve: the test answers it.
  await browser.context.route('https://example.invalid/**', (r) => r.fulfill({ contentType: 'text/html', body: '<title>x</title>opened' }));
  const opened = browser.context.waitForEvent('page', { timeout: 10000 });
  await page.mouse.click(at.x, at.y);
  const other = await opened;
  await until(() => other.url() !== 'about:blank', { what: 'the new page to navigate' });
  assert.match(other.url(), /^https:\/\/example\.invalid\/x/);
  // noopener: the new page cannot reach this one.
  assert.equal(await other.evaluate(() => window.opener).catch(() => null), null);
  await other.close();
});

test('Shift+Enter sends ESC CR and Alt+b sends ESC b', async () => {
  assert.equal(await bytesOfKeys(page, 2, () => page.keyboard.press('Shift+Enter')), '033  \\r');
  assert.equal(await bytesOfKeys(page, 2, () => page.keyboard.press('Alt+b')), '033   b');
});

test('the font size from the settings changes the columns the shell sees and survives a reload', async () => {
  await typeLine(page, 'clear; tput cols');
  await until(async () => /^\d+$/m.test(await screen(page)), { what: 'tput cols' });
  const before = Number((await screen(page)).match(/^(\d+)$/m)[1]);
  await page.click('#gear');
  await until(() => page.evaluate(() => window.tern.settings.isOpen()), { what: 'the settings panel' });
  await screenshotsOfState(page, 'page-settings');
  // As a person changes a field: its value, then a change event.
  await page.evaluate(() => {
    const set = (name, value) => {
      const el = document.querySelector(`#settings-form [name=${name}]`);
      el.value = value;
      el.dispatchEvent(new Event('change', { bubbles: true }));
    };
    set('fontSize', '22');
    set('theme', 'light');
  });
  await page.keyboard.press('Escape');
  await until(() => page.evaluate(() => !window.tern.settings.isOpen()), { what: 'Escape to close the panel' });
  await until(() => page.evaluate(() => window.tern.term.options.fontSize === 22), { what: 'the font size' });
  await until(() => page.evaluate((b) => window.tern.term.cols < b, before), { what: 'fewer columns with the bigger font' });
  const wanted = await page.evaluate(() => window.tern.term.cols);
  await sleep(500);
  await typeLine(page, 'clear; tput cols');
  await until(async () => new RegExp(`^${wanted}$`, 'm').test(await screen(page)), { what: `tput cols = ${wanted}` });
  // The chosen light theme, whatever the system says.
  // Firefox's driver cannot emulate the system's scheme (no CDP): there the chosen theme alone.
  const emulate = (colorScheme) => page.emulateMedia({ colorScheme }).catch((e) => console.log(`# ${e.message}`));
  await emulate('dark');
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'light');
  await page.screenshot({ path: 'test-artifacts/page-light-theme-chosen.png' });

  await page.reload();
  await waitForPrompt(page);
  assert.equal(await page.evaluate(() => window.tern.term.options.fontSize), 22, 'the font size did not survive a reload');
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'light');
  await typeLine(page, 'clear; tput cols');
  await until(async () => new RegExp(`^${wanted}$`, 'm').test(await screen(page)), { what: `tput cols = ${wanted} after the reload` });
  // Ctrl+- changes the terminal's font, not the page's zoom.
  await page.keyboard.press('Control+Minus');
  await until(() => page.evaluate(() => window.tern.term.options.fontSize === 21), { what: 'Ctrl+- to shrink the font' });
  assert.equal(await page.evaluate(() => window.visualViewport.scale), 1);
  await page.evaluate(() => window.tern.settings.set({ fontSize: 15, theme: 'system' }));
  await emulate(null);
});

test('a bell in a hidden tab marks its title until the tab is seen', async () => {
  await typeLine(page, "clear; printf '\\e]0;build\\a'; sleep 1; printf '\\a'; echo rang-$((6*7))");
  await setPageHidden(page, true);
  await until(async () => /^rang-42$/m.test(await screen(page)), { what: 'the bell' });
  await until(async () => (await page.title()) === '🔔 build — tern', { what: 'the title marked' })
    .catch(async (e) => { throw new Error(`${e.message}; title: ${await page.title()}`); });
  await setPageHidden(page, false);
  assert.equal(await page.title(), 'build — tern');
});

test('a phone gets the extra-keys bar; sticky Ctrl then c interrupts sleep', chromiumOnly, async () => {
  const phone = await launchBrowser({ viewport: { width: 390, height: 760 }, mobile: true });
  try {
    await phone.page.goto(newSession(relay.url));
    await waitForPrompt(phone.page);
    assert.equal(await phone.page.evaluate(() => !document.getElementById('extra-keys').hidden), true, 'no extra-keys bar');
    await typeLine(phone.page, 'clear; sleep 100');
    await sleep(500);
    await phone.page.tap('#extra-keys [data-sticky=ctrl]');
    assert.equal(await phone.page.getAttribute('#extra-keys [data-sticky=ctrl]', 'aria-pressed'), 'true');
    await screenshotsOfState(phone.page, 'page-extra-keys');
    await phone.page.keyboard.press('c');
    // bash drops the rest of a command line a Ctrl+C interrupts: the status comes in its own.
    await until(async () => /\^C\n[^\n]*[$#] ?$/.test((await screen(phone.page)).trimEnd()), { what: 'the prompt after ^C' });
    await typeLine(phone.page, 'echo status-$?');
    await until(async () => /^status-130$/m.test(await screen(phone.page)), { what: 'Ctrl+C from the bar to interrupt sleep' })
      .catch(async (e) => { throw new Error(`${e.message}; screen:\n${await screen(phone.page)}\n${phone.consoleLog.join('\n')}`); });
    assert.equal(await phone.page.getAttribute('#extra-keys [data-sticky=ctrl]', 'aria-pressed'), 'false', 'Ctrl stayed down');
    // The terminal ends above the bar.
    const [termBottom, barTop] = await phone.page.evaluate(() => [
      document.getElementById('terminal').getBoundingClientRect().bottom,
      document.getElementById('extra-keys').getBoundingClientRect().top,
    ]);
    assert.ok(termBottom <= barTop + 1, `the terminal (bottom ${termBottom}) runs under the bar (top ${barTop})`);
  } finally {
    await phone.close();
  }
});

test('the page is an installable app: a manifest with icons', async () => {
  const manifest = await page.evaluate(async () => {
    const href = document.querySelector('link[rel=manifest]').href;
    const r = await fetch(href);
    return { type: r.headers.get('content-type'), body: await r.json() };
  });
  assert.equal(manifest.type, 'application/manifest+json');
  assert.equal(manifest.body.display, 'standalone');
  for (const icon of manifest.body.icons) {
    const ok = await page.evaluate(async (src) => (await fetch(src)).ok, icon.src);
    assert.ok(ok, `icon ${icon.src} missing`);
  }
});

test('full screen takes the keyboard (Keyboard Lock) and leaves again', chromiumOnly, async () => {
  await page.click('#fullscreen');
  await until(() => page.evaluate(() => document.fullscreenElement !== null), { what: 'full screen' });
  // The button follows `fullscreenchange`, which comes a moment after the element is set.
  await until(async () => (await page.getAttribute('#fullscreen', 'aria-pressed')) === 'true', { what: 'the button pressed' });
  assert.equal(await page.evaluate(() => typeof navigator.keyboard?.lock), 'function', 'no Keyboard Lock API');
  await screenshotsOfState(page, 'page-fullscreen');
  await page.click('#fullscreen');
  await until(() => page.evaluate(() => document.fullscreenElement === null), { what: 'leaving full screen' });
  await until(async () => (await page.getAttribute('#fullscreen', 'aria-pressed')) === 'false', { what: 'the button released' });
});

test('a live session asks before its tab closes, unless turned off in the settings', chromiumOnly, async () => {
  const guarded = () => page.evaluate(() => {
    const e = new Event('beforeunload', { cancelable: true });
    window.dispatchEvent(e);
    return e.defaultPrevented;
  });
  assert.equal(await guarded(), true, 'no beforeunload guard while live');
  // The browser's real question, on a real close.
  const asked = new Promise((resolve) => page.once('dialog', (d) => resolve(d.type())));
  const other = await browser.context.newPage();
  await page.bringToFront();
  await page.close({ runBeforeUnload: true }).catch(() => {});
  assert.equal(await Promise.race([asked, sleep(5000).then(() => 'no question')]), 'beforeunload');
  // The harness answered "leave": the page is gone; the session lives on for the next page.
  page = other;
  await page.goto(newSession(relay.url));
  await waitForPrompt(page);
  await page.evaluate(() => window.tern.settings.set({ confirmClose: false }));
  assert.equal(await guarded(), false, 'the guard stayed on after turning it off');
  await page.evaluate(() => window.tern.settings.set({ confirmClose: true }));
});
