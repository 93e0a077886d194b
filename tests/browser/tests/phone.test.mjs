// The page on a phone: the terminal refits once when the on-screen keyboard opens and once when it
// closes, with the cursor's row in sight; the two-row extra-keys bar (44 px keys, sticky Ctrl
// applied to a soft keyboard's text, long-press variants, its keys chosen in the settings and
// kept over a reload); what an installed app needs (manifest, icons, iOS's meta tags). Real
// tern-relay (spawn mode), mosh-server, shell and headless Chromium emulating a 390x844 phone
// (touch, `pointer: coarse`); screenshots in test-artifacts/phone-*.png.
//
// The keyboard: no CDP call shrinks only the visual viewport here (Chromium 156 headless):
// `Emulation.setVisibleSize` changes nothing the page sees, and setDeviceMetricsOverride's
// `viewport` is "not observed by the page". setDeviceMetricsOverride with a smaller `height` shrinks
// the layout and the visual viewport together, as Android does with `interactive-widget=
// resizes-content`; the page sizes itself by the visual viewport either way (its `resize` fires in
// both), so the test shrinks the height in steps, as a keyboard slides in.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  ARTIFACTS, until, screen, typeLine, sleep, tempDir, pageDetail,
} from '../lib/helpers.mjs';
import { browserFixture, onlyChromium } from '../lib/fixture.mjs';

const PHONE = { width: 390, height: 844 };
// An iPhone's keyboard with its suggestion row takes about 350 of 844 px.
const KEYBOARD_OPEN = 494;

const fx = browserFixture({ browser: { viewport: PHONE, mobile: true }, open: true });
const chromiumOnly = onlyChromium('phone emulation (touch, device metrics) is CDP');

/// The phone's visible height, moved to `height` in `steps` frames about 30 ms apart (a keyboard's
/// slide): the page sees a visualViewport `resize` at each.
async function slideKeyboard(page, height, steps = 5) {
  const [from, width] = await page.evaluate(() => [window.visualViewport.height, window.innerWidth]);
  for (let i = 1; i <= steps; i++) {
    // playwright's setViewportSize is setDeviceMetricsOverride in its own CDP session, phone
    // emulation kept (a second session's override would be undone when it detaches).
    await page.setViewportSize({ width, height: Math.round(from + ((height - from) * i) / steps) });
    await sleep(16);
  }
}

/// Where things are: the cursor row's bottom, the bar, the terminal, the visible area.
const geometry = (page) => page.evaluate(() => {
  const { term } = window.tern;
  const box = term.element.querySelector('.xterm-screen').getBoundingClientRect();
  const cell = box.height / term.rows;
  const bar = document.getElementById('extra-keys').getBoundingClientRect();
  const vv = window.visualViewport;
  return {
    rows: term.rows,
    cursorBottom: box.top + (term.buffer.active.cursorY + 1) * cell,
    termBottom: document.getElementById('terminal').getBoundingClientRect().bottom,
    barTop: bar.top,
    barBottom: bar.bottom,
    visibleBottom: vv.height + vv.offsetTop,
    scrollY: window.scrollY,
  };
});

/// A finger on `page` through Chromium's input pipeline (touch events, the pointer events and
/// click they make): down at the middle of `selector`, held `hold` ms, lifted.
async function press(page, selector, hold = 0) {
  await page.locator(selector).scrollIntoViewIfNeeded();
  const box = await page.locator(selector).boundingBox();
  assert.ok(box, `no ${selector}`);
  const point = [{ x: Math.round(box.x + box.width / 2), y: Math.round(box.y + box.height / 2), id: 1 }];
  const cdp = await page.context().newCDPSession(page);
  try {
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: point });
    await sleep(hold || 40);
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
  } finally {
    await cdp.detach();
  }
  await sleep(60);
}
const LONG = 750; // held past keys.js's LONG_PRESS_MS (500)

/// Text as a soft keyboard commits it: an `input` event with no keydown (CDP Input.insertText,
/// the IME path; Android's keyboards send no key for a letter).
async function softType(page, text) {
  const cdp = await page.context().newCDPSession(page);
  try {
    await cdp.send('Input.insertText', { text });
  } finally {
    await cdp.detach();
  }
}

/// Text as a composing keyboard types it: shown as composition, then committed (CDP
/// Input.imeSetComposition, then Input.insertText).
async function compose(page, text) {
  const cdp = await page.context().newCDPSession(page);
  try {
    await cdp.send('Input.imeSetComposition', { text, selectionStart: text.length, selectionEnd: text.length });
    await sleep(30);
    await cdp.send('Input.insertText', { text });
  } finally {
    await cdp.detach();
  }
}

/// Dark and light screenshots of the phone as it is now: test-artifacts/phone-NAME-{dark,light}.png.
async function phoneShots(page, name) {
  for (const scheme of ['dark', 'light']) {
    await page.emulateMedia({ colorScheme: scheme });
    await sleep(200);
    await page.screenshot({ path: join(ARTIFACTS, `phone-${name}-${scheme}.png`) });
  }
  await page.emulateMedia({ colorScheme: null });
}

const barKeys = (page) => page.evaluate(() => [...document.querySelectorAll('#extra-keys .row')]
  .map((row) => [...row.querySelectorAll('button')].map((b) => b.dataset.key)));

test('the keyboard opening refits the terminal once, to the visible part, with the cursor row in sight; closing once more', chromiumOnly, async () => {
  const { page } = fx;
  const dir = tempDir('tern-phone-');
  const winch = join(dir, 'winch');
  // The screen full (the cursor on the last row, where the keyboard will be), then a foreground
  // program that notes each SIGWINCH with the size the terminal then has: every size change
  // mosh-server made.
  await typeLine(page, `seq 1 80; sh -c 'trap "stty size >> $0" WINCH; while :; do sleep 0.05; done' ${winch}`);
  await until(async () => /^80$/m.test(await screen(page)), { what: 'seq to finish', detail: pageDetail(page) });
  await sleep(500);
  const before = await geometry(page);
  assert.ok(before.cursorBottom > KEYBOARD_OPEN - 97, `the cursor (bottom ${before.cursorBottom}) would not be covered by a keyboard: the test proves nothing`);
  const changes = () => (existsSync(winch) ? readFileSync(winch, 'utf8').trim().split('\n').filter(Boolean) : []);

  await slideKeyboard(page, KEYBOARD_OPEN);
  await until(async () => (await geometry(page)).rows < before.rows, { what: 'the terminal to refit to the visible part' });
  await until(() => changes().length >= 1, { what: 'the shell to see the new size' });
  await sleep(1500);
  const open = await geometry(page);
  console.log(`# keyboard open: ${before.rows} rows → ${open.rows}, cursor row bottom ${Math.round(open.cursorBottom)} px, bar top ${open.barTop} px, visible ${open.visibleBottom} px`);
  assert.deepEqual(changes().length, 1, `one size change per keyboard opening, saw ${JSON.stringify(changes())}`);
  assert.equal(changes()[0].split(' ')[0], String(open.rows), 'the size the shell saw is the terminal\'s');
  assert.ok(open.cursorBottom <= open.barTop + 0.5, `the cursor row (bottom ${open.cursorBottom}) is under the bar (top ${open.barTop})`);
  assert.ok(open.barBottom <= open.visibleBottom + 0.5, `the bar (bottom ${open.barBottom}) is below the visible part (${open.visibleBottom})`);
  assert.ok(open.termBottom <= open.barTop + 0.5, `the terminal (bottom ${open.termBottom}) runs under the bar (top ${open.barTop})`);
  assert.equal(open.scrollY, 0, 'the page scrolled');

  await slideKeyboard(page, PHONE.height);
  await until(() => changes().length >= 2, { what: 'the shell to see the size back' });
  await sleep(1500);
  const closed = await geometry(page);
  assert.equal(changes().length, 2, `one size change per keyboard closing, saw ${JSON.stringify(changes())}`);
  assert.equal(closed.rows, before.rows, 'the terminal has its rows back');
  assert.equal(changes()[1].split(' ')[0], String(before.rows));

  // A pinch zoom changes visualViewport.height, not what fits: no resize.
  const cdp = await page.context().newCDPSession(page);
  try {
    await cdp.send('Emulation.setPageScaleFactor', { pageScaleFactor: 2 });
    await until(() => page.evaluate(() => window.visualViewport.scale > 1.5), { what: 'the page zoomed' });
    await sleep(800);
    await cdp.send('Emulation.setPageScaleFactor', { pageScaleFactor: 1 });
    await until(() => page.evaluate(() => window.visualViewport.scale === 1), { what: 'the zoom back' });
    await sleep(800);
  } finally {
    await cdp.detach();
  }
  assert.equal(changes().length, 2, `a pinch zoom resized the terminal: ${JSON.stringify(changes())}`);

  await page.keyboard.press('Control+C');
  await until(async () => /[$#] ?$/.test((await screen(page)).trimEnd()), { what: 'the prompt back' });

  // As a person sees it: the keyboard open at a shell's prompt. (mosh-server keeps the top rows
  // of a screen it shrinks, so the newest rows of a full screen go; the shell redraws its prompt
  // on the cursor's row.)
  await slideKeyboard(page, KEYBOARD_OPEN);
  await until(async () => (await geometry(page)).rows < before.rows, { what: 'the terminal to refit' });
  await typeLine(page, 'clear; ls -d /usr/*');
  await until(async () => /\/usr\/share/.test(await screen(page)), { what: 'ls' });
  await phoneShots(page, 'keyboard-open');
  // The session's history view, over the terminal, ends above the bar as well.
  await page.evaluate(() => window.tern.history.open());
  await until(() => page.evaluate(() => window.tern.history.isOpen() && document.querySelector('#history .hl') !== null), { what: 'the history view' });
  const [historyBottom, barTop] = await page.evaluate(() => [
    document.getElementById('history').getBoundingClientRect().bottom,
    document.getElementById('extra-keys').getBoundingClientRect().top,
  ]);
  assert.ok(historyBottom <= barTop + 0.5, `the history view (bottom ${historyBottom}) runs under the bar (top ${barTop})`);
  await phoneShots(page, 'history-keyboard-open');
  await page.evaluate(() => window.tern.history.close());
  await slideKeyboard(page, PHONE.height);
  await until(async () => (await geometry(page)).rows === before.rows, { what: 'the rows back' });
});

test('the bar: two rows of keys at least 44 px tall; sticky Ctrl then a soft keyboard\'s c interrupts sleep', chromiumOnly, async () => {
  const { page } = fx;
  assert.deepEqual(await barKeys(page), [
    ['esc', '/', '-', '|', 'home', 'up', 'end', 'pgup'],
    ['tab', 'ctrl', 'alt', '~', 'left', 'down', 'right', 'pgdn'],
  ]);
  const rects = await page.evaluate(() => [...document.querySelectorAll('#extra-keys button')]
    .map((b) => { const r = b.getBoundingClientRect(); return { key: b.dataset.key, top: r.top, width: r.width, height: r.height }; }));
  for (const r of rects) {
    assert.ok(r.height >= 44, `${r.key} is ${r.height} px tall`);
    assert.ok(r.width >= 40, `${r.key} is ${r.width} px wide`);
  }
  assert.equal(new Set(rects.map((r) => Math.round(r.top))).size, 2, 'two rows');

  await typeLine(page, 'clear; sleep 100');
  await sleep(500);
  await press(page, '#extra-keys [data-key=ctrl]');
  assert.equal(await page.getAttribute('#extra-keys [data-key=ctrl]', 'aria-pressed'), 'true');
  await softType(page, 'c');
  await until(async () => /\^C\n[^\n]*[$#] ?$/.test((await screen(page)).trimEnd()), { what: 'the prompt after ^C', detail: pageDetail(page) });
  assert.equal(await page.getAttribute('#extra-keys [data-key=ctrl]', 'aria-pressed'), 'false', 'Ctrl stayed down');
  // Let go after one key: the next letter from the soft keyboard is a letter.
  await softType(page, 'echo status-$?');
  await page.keyboard.press('Enter');
  await until(async () => /^status-130$/m.test(await screen(page)), { what: 'Ctrl+C from the bar', detail: pageDetail(page) });

  // A keyboard that composes (Gboard underlines a letter until it is committed): the committed
  // text gets the modifier too. CDP Input.imeSetComposition then insertText: compositionstart,
  // compositionupdate, insertCompositionText, compositionend, and no keydown.
  await typeLine(page, 'clear; sleep 100');
  await sleep(500);
  await press(page, '#extra-keys [data-key=ctrl]');
  await compose(page, 'c');
  await until(async () => /\^C\n[^\n]*[$#] ?$/.test((await screen(page)).trimEnd()), { what: 'the prompt after a composed ^C', detail: pageDetail(page) });
  assert.equal(await page.getAttribute('#extra-keys [data-key=ctrl]', 'aria-pressed'), 'false', 'Ctrl stayed down after a composed key');
  await compose(page, 'echo composed-$?');
  await page.keyboard.press('Enter');
  await until(async () => /^composed-130$/m.test(await screen(page)), { what: 'Ctrl+C composed', detail: pageDetail(page) });

  // A long press holds Ctrl down until it is tapped again.
  await press(page, '#extra-keys [data-key=ctrl]', LONG);
  assert.equal(await page.evaluate(() => document.querySelector('#extra-keys [data-key=ctrl]').classList.contains('locked')), true, 'Ctrl not held');
  await phoneShots(page, 'bar-ctrl-held');
  await press(page, '#extra-keys [data-key=ctrl]');
  assert.equal(await page.getAttribute('#extra-keys [data-key=ctrl]', 'aria-pressed'), 'false', 'Ctrl not let go');

  // A key never moves the focus: with the on-screen keyboard closed (the terminal not focused) a
  // tap sends its key and leaves it closed; with it open, it stays open.
  const typing = () => page.evaluate(() => document.activeElement === window.tern.term.textarea);
  await page.evaluate(() => {
    window.__sent = [];
    window.tern.term.onData((d) => window.__sent.push(d));
    document.activeElement.blur();
  });
  await press(page, '#extra-keys [data-key=pgdn]');
  assert.deepEqual(await page.evaluate(() => window.__sent), ['\x1b[6~']);
  assert.equal(await typing(), false, 'a tap focused the terminal (it would open the keyboard)');
  await page.evaluate(() => window.tern.term.focus());
  await press(page, '#extra-keys [data-key=tab]');
  assert.equal(await typing(), true, 'a tap took the focus from the terminal (it would close the keyboard)');
  await page.keyboard.press('Control+C');
});

test('a phone on its side puts the two rows side by side in one line of 44 px keys', chromiumOnly, async () => {
  const { page } = fx;
  const keys = () => page.evaluate(() => [...document.querySelectorAll('#extra-keys button')]
    .map((b) => { const r = b.getBoundingClientRect(); return { key: b.dataset.key, top: Math.round(r.top), width: r.width, height: r.height }; }));
  try {
    await page.setViewportSize({ width: PHONE.height, height: PHONE.width });
    await until(() => page.evaluate(() => document.getElementById('extra-keys').classList.contains('one-line')), { what: 'one line' });
    const wide = await keys();
    assert.equal(new Set(wide.map((k) => k.top)).size, 1, `not one line: ${JSON.stringify(wide)}`);
    for (const k of wide) assert.ok(k.width >= 44 && k.height >= 44, `${k.key} is ${k.width}x${k.height}`);
    // The keyboard open on its side: about 200 px left.
    await slideKeyboard(page, 200, 3);
    await until(async () => { const g = await geometry(page); return g.termBottom <= g.barTop + 0.5 && g.barBottom <= g.visibleBottom + 0.5 && g.rows >= 6; },
      { what: 'the terminal above the one-line bar', detail: async () => JSON.stringify(await geometry(page)) });
    await typeLine(page, 'clear; echo on its side');
    await until(async () => /^on its side$/m.test(await screen(page)), { what: 'echo' });
    await phoneShots(page, 'landscape-keyboard-open');
  } finally {
    await page.setViewportSize(PHONE);
  }
  await until(async () => new Set((await keys()).map((k) => k.top)).size === 2, { what: 'two rows again in portrait' });
});

test('a long press on a key sends its variant; a tap the key; Ctrl on the bar\'s arrow as xterm sends it', chromiumOnly, async () => {
  const { page } = fx;
  await typeLine(page, 'clear; head -c 14 | od -c');
  await sleep(500);
  await press(page, '#extra-keys [data-key="-"]');
  await press(page, '#extra-keys [data-key="-"]', LONG);
  await press(page, '#extra-keys [data-key="/"]', LONG);
  await press(page, '#extra-keys [data-key=up]', LONG);
  await press(page, '#extra-keys [data-key=ctrl]');
  await press(page, '#extra-keys [data-key=left]');
  await page.keyboard.press('Enter');
  // od -c: - _ \ PgUp (ESC [ 5 ~) Ctrl+Left (ESC [ 1 ; 5 D), then the newline.
  await until(async () => /-\s+_\s+\\\s+033\s+\[\s+5\s+~\s+033\s+\[\s+1\s+;\s+5\s+D\s+\\n/.test(await screen(page)),
    { what: 'od to show - _ \\ ESC [ 5 ~ ESC [ 1 ; 5 D', detail: pageDetail(page) });
});

test('the bar\'s keys are chosen in the settings, checked, applied at once and kept over a reload', chromiumOnly, async () => {
  const { page } = fx;
  await press(page, '#gear');
  await until(() => page.evaluate(() => !document.getElementById('settings').hidden), { what: 'the settings panel' });
  const field = page.locator('#settings-extra-keys');
  assert.equal(await field.inputValue(), 'esc / - | home up end pgup\ntab ctrl alt ~ left down right pgdn');
  await field.scrollIntoViewIfNeeded();
  await phoneShots(page, 'settings-keys');

  await field.fill('ESC ctrl : ; ( ) [ ]\nleft right enter');
  await until(async () => JSON.stringify(await barKeys(page)) === JSON.stringify([['esc', 'ctrl', ':', ';', '(', ')', '[', ']'], ['left', 'right', 'enter']]),
    { what: 'the bar rebuilt', detail: async () => JSON.stringify(await barKeys(page)) });
  // What is wrong is said, and the bar keeps its keys.
  await field.fill('esc foo');
  assert.match(await page.textContent('#settings-extra-keys-error'), /“foo” is not a key/);
  assert.equal(await field.getAttribute('aria-invalid'), 'true');
  assert.deepEqual(await barKeys(page), [['esc', 'ctrl', ':', ';', '(', ')', '[', ']'], ['left', 'right', 'enter']]);
  await phoneShots(page, 'settings-keys-error');
  await field.fill('a b c d e f g h i j k');
  assert.match(await page.textContent('#settings-extra-keys-error'), /At most 10 keys in a row/);
  await field.fill('esc ctrl : ; ( ) [ ]\nleft right enter');
  assert.equal(await page.textContent('#settings-extra-keys-error'), '');
  await press(page, '#settings-close');

  // One row: a shorter bar, and a taller terminal.
  const twoRows = await page.evaluate(() => document.getElementById('extra-keys').getBoundingClientRect().height);
  await page.reload();
  await until(() => page.evaluate(() => document.body.classList.contains('live')), { what: 'the session back after the reload' });
  assert.deepEqual(await barKeys(page), [['esc', 'ctrl', ':', ';', '(', ')', '[', ']'], ['left', 'right', 'enter']], 'the keys after a reload');
  await press(page, '#extra-keys [data-key=":"]');
  await press(page, '#extra-keys [data-key=";"]', LONG);
  await until(async () => /[$#] :: ?$/m.test(await screen(page)), { what: 'the new keys to type', detail: pageDetail(page) });
  await page.keyboard.press('Control+U');

  await press(page, '#gear');
  await page.locator('#settings-extra-keys').fill('esc tab ctrl alt left down up right');
  await until(async () => (await barKeys(page)).length === 1, { what: 'one row' });
  const oneRow = await page.evaluate(() => document.getElementById('extra-keys').getBoundingClientRect().height);
  assert.ok(oneRow < twoRows - 40, `one row (${oneRow} px) is not shorter than two (${twoRows} px)`);
  await until(async () => (await geometry(page)).termBottom <= (await geometry(page)).barTop + 0.5, { what: 'the terminal to grow to the bar' });
  await press(page, '#settings-extra-keys-reset');
  await until(async () => (await barKeys(page)).length === 2, { what: 'the default keys back' });
  assert.equal(await page.locator('#settings-extra-keys').inputValue(), 'esc / - | home up end pgup\ntab ctrl alt ~ left down right pgdn');
  await press(page, '#settings-close');
});

test('an installable app: the manifest and its icons are served and valid, iOS\'s meta tags are there', async () => {
  const { page, origin } = fx;
  const get = async (path) => {
    const r = await fetch(new URL(path, origin));
    return { status: r.status, type: r.headers.get('content-type'), csp: r.headers.get('content-security-policy'), body: Buffer.from(await r.arrayBuffer()) };
  };
  const index = await get('/');
  assert.match(index.csp, /manifest-src 'self'/);
  assert.match(index.csp, /img-src 'self'/);
  // The page links the manifest once its session has started, under its content-hashed name.
  await until(() => page.evaluate(() => document.querySelector('link[rel=manifest]') !== null), { what: 'the manifest linked' });
  const manifestHref = await page.evaluate(() => document.querySelector('link[rel=manifest]').getAttribute('href'));
  assert.match(manifestHref, /^manifest\.[0-9a-f]{8}\.webmanifest$/);
  const manifest = await get(`/${manifestHref}`);
  assert.equal(manifest.status, 200);
  assert.equal(manifest.type, 'application/manifest+json');
  const m = JSON.parse(manifest.body.toString('utf8'));
  assert.equal(m.name, 'Tern');
  assert.equal(m.display, 'standalone');
  assert.ok(m.start_url, 'no start_url');
  assert.ok(m.icons.length >= 3);
  for (const icon of m.icons) {
    const r = await get(`/${icon.src}`);
    assert.equal(r.status, 200, icon.src);
    assert.equal(r.type, icon.type, icon.src);
    if (icon.type === 'image/png') {
      const [w, h] = icon.sizes.split('x').map(Number);
      assert.deepEqual([r.body.readUInt32BE(16), r.body.readUInt32BE(20)], [w, h], `${icon.src} is not ${icon.sizes}`);
    }
  }
  assert.ok(m.icons.some((i) => i.sizes === '512x512') && m.icons.some((i) => i.sizes === '192x192'), 'Chromium wants 192 and 512 px icons');

  const meta = await page.evaluate(() => Object.fromEntries(
    ['mobile-web-app-capable', 'apple-mobile-web-app-capable', 'apple-mobile-web-app-status-bar-style', 'apple-mobile-web-app-title']
      .map((n) => [n, document.querySelector(`meta[name="${n}"]`)?.content ?? null]),
  ));
  assert.deepEqual(meta, {
    'mobile-web-app-capable': 'yes',
    'apple-mobile-web-app-capable': 'yes',
    'apple-mobile-web-app-status-bar-style': 'black',
    'apple-mobile-web-app-title': 'Tern',
  });
  const touchIcon = await page.evaluate(() => document.querySelector('link[rel=apple-touch-icon]')?.getAttribute('href'));
  const icon = await get(`/${touchIcon}`);
  assert.equal(icon.status, 200);
  assert.equal(icon.type, 'image/png');
  assert.deepEqual([icon.body.readUInt32BE(16), icon.body.readUInt32BE(20)], [180, 180], 'the apple-touch-icon is not 180x180');
  // The browser fetched the manifest under the CSP.
  if (fx.browser.name === 'chromium') {
    const cdp = await page.context().newCDPSession(page);
    try {
      const { errors } = await cdp.send('Page.getAppManifest');
      assert.deepEqual(errors, [], 'Chromium found errors in the manifest');
    } finally {
      await cdp.detach();
    }
  }
});
