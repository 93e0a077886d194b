// Keyboards as iPads, iPhones and Android phones deliver them (www/hardware_keys.js,
// docs/BROWSER.md "Hardware keyboards on iPad and iPhone, IMEs"): each key is sent to xterm.js's
// textarea in the shape WebKit on iOS gives it (Ctrl+C with keyCode 13, Esc as
// 'UIKeyInputEscape' with keyCode 0, ...), and a word composed as Gboard composes it, and the
// shell must get the right bytes, once. Real tern-relay (spawn mode), mosh-server, bash, vi.
//
// Chromium: the keys go through its input pipeline (CDP `Input.dispatchKeyEvent` with the iPad's
// key, code and keyCode: trusted events, default actions included), the composition through its
// IME path (`Input.imeSetComposition`, `Input.insertText`). CDP takes standard `key` values only
// (it turns 'UIKeyInputEscape' into ''), so the UIKit-named keys are KeyboardEvents made in the
// page, on xterm.js's textarea, with the iPad's keyCode (xterm.js reads them as it reads trusted
// ones). Firefox (tests/browser/firefox/) has no such driver call: there every key is made in the
// page, and the composition test is skipped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  until, screen, typeLine, sleep, tempDir, pageDetail, browserName, screenshotsOfState,
} from '../lib/helpers.mjs';
import { browserFixture, onlyChromium } from '../lib/fixture.mjs';

const fx = browserFixture({ open: true, relayLog: true });
const dir = tempDir('tern-keyboard-');
fx.defer(() => rmSync(dir, { recursive: true, force: true }));

/// The core's screen without the blank rows under the prompt.
const shown = async (page = fx.page) => (await screen(page)).trimEnd();
const seen = (re, what, timeout = 15000) =>
  until(async () => re.test(await shown()), { timeout, what, detail: pageDetail(fx.page) });
const PROMPT_AT_END = /[$#]$/;

/// The keydowns the page received (key, keyCode, Ctrl), recorded in the capture phase: proof that
/// the key arrived in the iPad's shape.
async function recordKeys(page) {
  await page.evaluate(() => {
    if (window.keysSeen) return;
    window.keysSeen = [];
    window.addEventListener('keydown', (e) => {
      window.keysSeen.push({ key: e.key, keyCode: e.keyCode, ctrl: e.ctrlKey });
    }, true);
  });
  return {
    last: () => page.evaluate(() => window.keysSeen.at(-1)),
  };
}

/// One key pressed and released as an iPad hands it over: `key`, `code`, `keyCode` (what WebKit
/// on iOS puts there), Ctrl/Alt/Shift. Chromium: through CDP; Firefox: events made in the page.
async function ipadKey(page, { key, code = '', keyCode, ctrl = false, alt = false, shift = false }) {
  const keys = await recordKeys(page);
  // CDP takes standard key values only (a UIKit name arrives as key ''): those are made in the page.
  if (browserName() === 'chromium' && !key.startsWith('UIKeyInput')) {
    const cdp = await page.context().newCDPSession(page);
    try {
      const ev = {
        key, code, windowsVirtualKeyCode: keyCode, nativeVirtualKeyCode: keyCode,
        modifiers: (alt ? 1 : 0) | (ctrl ? 2 : 0) | (shift ? 8 : 0),
      };
      await cdp.send('Input.dispatchKeyEvent', { type: 'rawKeyDown', ...ev });
      await cdp.send('Input.dispatchKeyEvent', { type: 'keyUp', ...ev });
    } finally {
      await cdp.detach();
    }
  } else {
    await page.evaluate((k) => {
      const target = window.tern.term.textarea;
      for (const type of ['keydown', 'keyup']) {
        const e = new KeyboardEvent(type, {
          key: k.key, code: k.code, ctrlKey: k.ctrl, altKey: k.alt, shiftKey: k.shift, bubbles: true, cancelable: true,
        });
        // A made KeyboardEvent's keyCode is 0: the iPad's is put there.
        Object.defineProperty(e, 'keyCode', { get: () => k.keyCode });
        Object.defineProperty(e, 'which', { get: () => k.keyCode });
        target.dispatchEvent(e);
      }
    }, { key, code, keyCode, ctrl, alt, shift });
  }
  const got = await keys.last();
  assert.deepEqual(got, { key, keyCode, ctrl }, 'the key did not arrive in the shape sent');
}

/// Waits until the shell shows its prompt again at the end of the screen.
const atPrompt = () => seen(PROMPT_AT_END, 'the prompt', 15000).then(() => sleep(200));

/// `od` reading what `typeInto` types, then Enter and Ctrl+D: resolves to the bytes the shell's
/// side received, in hex (`1b 78 0a`): each byte that arrived, as often as it arrived.
async function odOf(page, typeInto) {
  const mark = `od-${Math.random().toString(36).slice(2, 7)}`;
  await typeLine(page, `clear; od -An -tx1 -w32; echo ${mark}`);
  await sleep(500);
  await typeInto();
  await page.keyboard.press('Enter');
  await sleep(200);
  await page.keyboard.press('Control+D');
  await seen(new RegExp(`^${mark}$`, 'm'), `od to end (${mark})`);
  // `clear` ran first: the screen holds what was typed (echoed), od's lines and the mark.
  return (await shown(page)).split('\n').filter((l) => /^( [0-9a-f]{2})+$/.test(l)).join('').trim();
}

test('Ctrl+C as an iPad sends it (keyCode 13, key c) interrupts sleep', async () => {
  const { page } = fx;
  await typeLine(page, 'clear; sleep 100');
  await sleep(500);
  await ipadKey(page, { key: 'c', code: 'KeyC', keyCode: 13, ctrl: true });
  try {
    // bash drops the rest of a command line a Ctrl+C interrupts: the status comes in its own.
    await seen(/\^C\n[^\n]*[$#]$/, 'the prompt after ^C (an Enter instead leaves sleep running)');
    await typeLine(page, 'echo status-$?');
    await seen(/^status-130$/m, 'sleep to have died of SIGINT');
  } finally {
    // Still sleeping when it failed: a desktop Ctrl+C, for the next test.
    if (!PROMPT_AT_END.test(await shown(page))) {
      await page.keyboard.press('Control+C');
      await atPrompt();
    }
  }
});

test('Esc as an iPad sends it (UIKeyInputEscape, keyCode 0) leaves vi\'s insert mode', async () => {
  const { page } = fx;
  const file = join(dir, 'esc.txt');
  await typeLine(page, `clear; vi ${file}`);
  await seen(/~\s*\n/, 'vi to start');
  await page.keyboard.type('ihello', { delay: 5 });
  await sleep(300);
  await ipadKey(page, { key: 'UIKeyInputEscape', keyCode: 0 });
  await sleep(300);
  try {
    await typeLine(page, `:wq`);
    await until(() => { try { return readFileSync(file, 'utf8') === 'hello\n'; } catch { return false; } },
      { what: `vi to write ${file} (the Esc was lost: still in insert mode)`, detail: pageDetail(page) });
    await atPrompt();
  } finally {
    // Still in vi when it failed: out of it without writing, for the next test.
    if (!PROMPT_AT_END.test(await shown(page))) {
      await page.keyboard.press('Escape');
      await typeLine(page, ':q!');
      await atPrompt();
    }
  }
});

test('Ctrl+[ as an iPad sends it (keyCode 0) is ESC; a desktop\'s Ctrl+[ and Ctrl+C stay xterm.js\'s', async () => {
  const { page } = fx;
  const bytes = await odOf(page, async () => {
    await ipadKey(page, { key: '[', code: 'BracketLeft', keyCode: 0, ctrl: true });
    await page.keyboard.type('x');
    // The same keys from a desktop keyboard (keyCode 219, 67): untouched by the workaround. In
    // canonical mode a Ctrl+C would interrupt od, so it goes after a literal-next (Ctrl+V).
    await page.keyboard.press('Control+BracketLeft');
    await page.keyboard.type('y');
    await page.keyboard.press('Control+V');
    await page.keyboard.press('Control+C');
  });
  assert.equal(bytes, '1b 78 1b 79 03 0a', 'the bytes of Ctrl+[ (iPad), x, Ctrl+[ (desktop), y, Ctrl+V Ctrl+C, Enter');
});

test('PageUp and PageDown as an iPad sends them (UIKeyInput names), and Escape by name with keyCode 0', async () => {
  const { page } = fx;
  const bytes = await odOf(page, async () => {
    await ipadKey(page, { key: 'UIKeyInputPageUp', keyCode: 0 });
    await ipadKey(page, { key: 'UIKeyInputPageDown', keyCode: 0 });
    await ipadKey(page, { key: 'Escape', code: 'Escape', keyCode: 0 });
  });
  assert.equal(bytes, '1b 5b 35 7e 1b 5b 36 7e 1b 0a', 'the bytes of PageUp, PageDown, Escape, Enter');
});

test('arrows, Home and End as an iPad sends them (UIKeyInput names, keyCode 0) move the cursor', async () => {
  const { page } = fx;
  // xterm.js keeps the cursor keys in application mode (DECCKM) here, as mosh-client does.
  assert.equal(await page.evaluate(() => window.tern.term.modes.applicationCursorKeysMode), true);
  await typeLine(page, 'clear');
  // Left, Left, X: `aXbc`.
  await page.keyboard.type('echo abc', { delay: 5 });
  for (let i = 0; i < 2; i++) await ipadKey(page, { key: 'UIKeyInputLeftArrow', keyCode: 0 });
  await page.keyboard.type('X');
  await page.keyboard.press('Enter');
  await seen(/^aXbc$/m, 'aXbc (Left Left moved the cursor)');
  // Up brings the line back from the history; Home, a `#`, End, ` # end`: a comment, run as such.
  await ipadKey(page, { key: 'UIKeyInputUpArrow', keyCode: 0 });
  await seen(/echo aXbc$/, 'the last line back with Up');
  await ipadKey(page, { key: 'UIKeyInputHome', keyCode: 0 });
  await page.keyboard.type('# ');
  await ipadKey(page, { key: 'UIKeyInputEnd', keyCode: 0 });
  await page.keyboard.type(' home-end');
  await page.keyboard.press('Enter');
  await typeLine(page, 'history 2 | head -1');
  await seen(/^\s*\d+\s+# echo aXbc home-end$/m, '`# echo aXbc home-end` in the history (Home and End moved the cursor)');
});

test('words composed as Gboard does arrive once', onlyChromium('the composition needs CDP Input.imeSetComposition'), async () => {
  const { page } = fx;
  let ime = [];
  const bytes = await odOf(page, async () => {
    // What the textarea sees: proof that the words go the IME's way (compositions, not keys).
    await page.evaluate(() => {
      window.imeSeen = [];
      const ta = window.tern.term.textarea;
      for (const type of ['compositionstart', 'compositionend']) ta.addEventListener(type, () => window.imeSeen?.push(type));
      ta.addEventListener('input', (e) => window.imeSeen?.push(`input:${e.inputType}:${e.data}`));
    });
    const cdp = await page.context().newCDPSession(page);
    // Gboard's keys reach the page as keyCode 229 ('Unidentified') around each change it makes.
    // `late`: the change lands that long after the keydown, in a later task, as a keyboard's
    // commit may (xterm.js reads the textarea one timer after the keydown: a space that came
    // after it was dropped, CI 2026-12-07).
    const key229 = async (change, late = 0) => {
      const ev = { key: 'Unidentified', windowsVirtualKeyCode: 229, nativeVirtualKeyCode: 229 };
      await cdp.send('Input.dispatchKeyEvent', { type: 'rawKeyDown', ...ev });
      if (late) await sleep(late);
      await change();
      await cdp.send('Input.dispatchKeyEvent', { type: 'keyUp', ...ev });
      await sleep(30);
    };
    const compose = (text) => cdp.send('Input.imeSetComposition', { text, selectionStart: text.length, selectionEnd: text.length });
    const commit = (text) => cdp.send('Input.insertText', { text });
    try {
      // The word being typed is a composition, letter by letter; the space key commits it and
      // types the space.
      for (const text of ['h', 'he', 'hel', 'hell', 'hello']) await key229(() => compose(text));
      // xterm.js shows the word being composed at the cursor, not yet sent.
      await screenshotsOfState(page, 'keyboard-composing');
      await key229(() => commit('hello'));
      await key229(() => commit(' '), 50);
      // The next one is committed by tapping the suggestion: no key at all.
      for (const text of ['o', 'ok']) await key229(() => compose(text));
      await commit('ok');
      await sleep(200);
    } finally {
      await cdp.detach();
    }
    ime = await page.evaluate(() => { const seen = window.imeSeen; window.imeSeen = null; return seen; });
  });
  assert.equal(ime.filter((t) => t === 'compositionstart').length, 2, `two compositions: ${ime.join(', ')}`);
  assert.equal(ime.filter((t) => t === 'compositionend').length, 2, `two compositions: ${ime.join(', ')}`);
  assert.equal(bytes, '68 65 6c 6c 6f 20 6f 6b 0a', `the bytes of \`hello ok\` and Enter (events: ${ime.join(', ')})`);
  console.log(`# the textarea saw: ${ime.join(', ')}`);
});
