// What mosh-server drops, through the recorder's channel (issue 34 item 3, docs/IMAGES.md
// "Clipboard and notifications"): real tern-relay (spawn mode, its recorder), mosh-server and
// Chromium. OSC 52 with a selector mosh ignores (`p`) and one over mosh's 16384 characters reach
// the clipboard with the setting "on", ask first with "ask", never with "off"; OSC 9 and OSC 777 make a browser notification only while
// the tab is hidden and the setting "Programs may notify me" allows it; an OSC 8 hyperlink is a
// link (its URL on hover, a click opens it), a javascript: one is not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  until, screen, waitForPrompt, typeLine, screenshotsOfState, setPageHidden, sleep, ARTIFACTS,
} from '../lib/helpers.mjs';
import { browserFixture, onlyChromium } from '../lib/fixture.mjs';

// Clipboard and notification permissions: only Chromium's driver grants them.
const chromiumOnly = onlyChromium();
const fx = browserFixture({
  open: true, relayLog: true, grant: ['clipboard-read', 'clipboard-write', 'notifications'],
});

const clipboardText = (p) => p.evaluate(() => navigator.clipboard.readText());

/// Runs `command` in the shell and waits for the marker it prints after.
async function run(p, command, marker) {
  await typeLine(p, `clear; ${command}; echo ${marker}-$((40+2))`);
  await until(async () => new RegExp(`^${marker}-42$`, 'm').test(await screen(p)), { what: `${marker} to run` });
}

test('OSC 52 that mosh-server drops goes by the clipboard setting: on writes, ask asks, off refuses', chromiumOnly, async () => {
  const { page } = fx;
  await waitForPrompt(page);
  await page.evaluate(() => window.tern.settings.set({ remoteCopy: 'on' }));
  await page.evaluate(() => navigator.clipboard.writeText('before'));
  // Selector p (primary): mosh 1.4 takes only `52;c;`.
  await run(page, `printf '\\033]52;p;%s\\007' "$(printf 'primary-selection-42' | base64)"`, 'osc52p');
  await until(async () => (await clipboardText(page)) === 'primary-selection-42', { what: 'the p write on the clipboard' });
  await until(() => page.evaluate(() => !document.getElementById('copy-offer').hidden), { what: 'the notice' });
  assert.equal(await page.textContent('#copy-offer-text'), 'A program copied 20 characters to the clipboard.');
  // 200 kB: mosh keeps 16384 characters of an OSC string, so this one never reaches its client
  // whole; the recorder lifts it.
  await run(page, "head -c 200000 /dev/zero | tr '\\0' q > big.txt; printf '\\033]52;c;%s\\033\\\\' \"$(base64 -w0 big.txt)\"", 'osc52big');
  await until(async () => (await clipboardText(page)).length === 200000, { what: 'the 200 kB write on the clipboard' });
  assert.match(await clipboardText(page), /^q{200000}$/);
  // The screen shows only the command and its marker: no base64, no escape left over.
  assert.doesNotMatch(await screen(page), /cXFxcXFx|52;c/);
  // Ask: the prompt with the text's start; written on Copy.
  await page.click('#copy-offer-close');
  await page.evaluate(() => window.tern.settings.set({ remoteCopy: 'ask' }));
  await run(page, `printf '\\033]52;s;%s\\007' "$(printf 'asked text' | base64)"`, 'osc52ask');
  await until(async () => (await page.textContent('#copy-offer-text')) === 'The program wants to copy 10 characters:', { what: 'the prompt' });
  assert.equal(await page.textContent('#copy-offer-preview'), 'asked text');
  assert.equal((await clipboardText(page)).length, 200000, 'written before Copy');
  await page.click('#copy-offer-button');
  await until(async () => (await clipboardText(page)) === 'asked text', { what: 'Copy to write it' });
  // Off: refused and said so, the clipboard kept.
  await page.evaluate(() => window.tern.settings.set({ remoteCopy: 'off' }));
  await run(page, `printf '\\033]52;s;%s\\007' "$(printf 'nope' | base64)"`, 'osc52off');
  await until(async () => /settings do not allow it/.test(await page.textContent('#copy-offer-text')), { what: 'the refusal notice' });
  assert.equal(await clipboardText(page), 'asked text');
  await page.click('#copy-offer-close');
});

test('OSC 9 and OSC 777 make a notification while the tab is hidden, as the setting says', chromiumOnly, async () => {
  const { page } = fx;
  await waitForPrompt(page);
  // Observe what the page constructs (the permission is granted to the origin).
  await page.evaluate(() => {
    const Real = window.Notification;
    window.__notes = [];
    window.Notification = class extends Real {
      constructor(title, options) {
        super(title, options);
        window.__notes.push({ title, body: options?.body });
      }
    };
  });
  assert.equal(await page.evaluate(() => window.tern.settings.get().programNotify), 'off', 'off by default');
  // Off, hidden: received, not shown.
  await setPageHidden(page, true);
  await run(page, "printf '\\033]9;off so quiet\\007'", 'osc9off');
  await until(() => page.evaluate(() => window.tern.programNotes.received === 1), { what: 'the first OSC 9 to reach the page' });
  // The setting, turned on in the panel (the browser's permission is granted already).
  await setPageHidden(page, false);
  await page.click('#gear');
  await until(() => page.evaluate(() => window.tern.settings.isOpen()), { what: 'the settings panel' });
  await page.evaluate(() => {
    const el = document.querySelector('#settings-form [name=programNotify]');
    el.value = 'hidden';
    el.dispatchEvent(new Event('change', { bubbles: true }));
  });
  await until(() => page.evaluate(() => window.tern.settings.get().programNotify === 'hidden'), { what: 'the setting on' });
  await page.evaluate(() => document.querySelector('#settings-form [name=programNotify]').scrollIntoView());
  await screenshotsOfState(page, 'signals-settings-notify');
  await page.keyboard.press('Escape');
  // Visible: received, not shown.
  await run(page, "printf '\\033]9;you are looking\\007'", 'osc9visible');
  await until(() => page.evaluate(() => window.tern.programNotes.received === 2), { what: 'the second OSC 9' });
  // Hidden: shown.
  await setPageHidden(page, true);
  await run(page, "printf '\\033]9;Build finished\\007'", 'osc9');
  await until(() => page.evaluate(() => window.__notes.length === 1), { what: 'the OSC 9 notification' });
  await run(page, "printf '\\033]777;notify;Agent;Waiting for input\\033\\\\'", 'osc777');
  await until(() => page.evaluate(() => window.__notes.length === 2), { what: 'the OSC 777 notification' });
  assert.deepEqual(await page.evaluate(() => window.__notes), [
    { title: 'tern', body: 'Build finished' },
    { title: 'Agent', body: 'Waiting for input' },
  ]);
  assert.deepEqual(await page.evaluate(() => ({ ...window.tern.programNotes })), { received: 4, shown: 2 });
  await setPageHidden(page, false);
});

/// The page position of the middle of cell (col, row) of xterm.js's screen (0-based).
async function cellCenter(p, col, row) {
  return p.evaluate(([c, r]) => {
    const { term } = window.tern;
    const box = term.element.querySelector('.xterm-screen').getBoundingClientRect();
    return { x: box.left + (c + 0.5) * (box.width / term.cols), y: box.top + (r + 0.5) * (box.height / term.rows) };
  }, [col, row]);
}

/// The viewport row (0-based) whose text is `text`.
async function rowOf(p, text) {
  return until(() => p.evaluate((t) => {
    const { term } = window.tern;
    const buf = term.buffer.active;
    for (let y = 0; y < term.rows; y++) {
      if ((buf.getLine(buf.viewportY + y)?.translateToString(true) ?? '').trimEnd() === t) return y + 1;
    }
    return 0;
  }, text), { what: `the row "${text}"` }).then((r) => r - 1);
}

test('an OSC 8 hyperlink is a link on the page: its URL on hover, a click opens it', chromiumOnly, async () => {
  const { page } = fx;
  await waitForPrompt(page);
  await run(page, "printf 'see \\033]8;;https://example.invalid/docs\\033\\\\the docs\\033]8;;\\033\\\\ now\\n'; printf '\\033]8;;javascript:alert(1)\\007evil link\\033]8;;\\007\\n'", 'osc8');
  await until(() => page.evaluate(() => window.tern.programLinks.count() >= 1), { what: 'the link to reach the page' });
  const row = await rowOf(page, 'see the docs now');
  // Off the link ("see"): no pointer, no tip.
  const off = await cellCenter(page, 1, row);
  await page.mouse.move(off.x, off.y);
  const at = await cellCenter(page, 6, row);
  await page.mouse.move(at.x, at.y);
  await until(() => page.evaluate(() => !document.getElementById('link-hover').hidden), { what: 'the URL on hover' });
  assert.equal(await page.textContent('#link-hover'), 'https://example.invalid/docs');
  // The javascript: link was never made one: its text is plain.
  const evil = await cellCenter(page, 2, await rowOf(page, 'evil link'));
  await page.mouse.move(evil.x, evil.y);
  await until(() => page.evaluate(() => document.getElementById('link-hover').hidden), { what: 'the tip to go' });
  assert.equal(await page.evaluate(() => window.tern.programLinks.count()), 1);
  for (const scheme of ['dark', 'light']) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const [size, viewport] of [['desktop', { width: 1100, height: 700 }], ['phone', { width: 390, height: 844 }]]) {
      await page.setViewportSize(viewport);
      await sleep(200);
      const r = await rowOf(page, 'see the docs now');
      const c = await cellCenter(page, 6, r);
      await page.mouse.move(c.x + 1, c.y, { steps: 4 });
      await until(() => page.evaluate(() => !document.getElementById('link-hover').hidden), { what: `the tip again (${scheme} ${size}, row ${r})` });
      await page.screenshot({ path: join(ARTIFACTS, `signals-link-hover-${scheme}-${size}.png`) });
      await page.mouse.move(0, 0);
    }
  }
  await page.setViewportSize({ width: 1100, height: 700 });
  await page.emulateMedia({ colorScheme: null });
  await sleep(200);
  // A click opens it in a new page (the test answers the address).
  await fx.browser.context.route('https://example.invalid/**', (r) => r.fulfill({ contentType: 'text/html', body: '<title>docs</title>opened' }));
  const c = await cellCenter(page, 6, await rowOf(page, 'see the docs now'));
  await page.mouse.move(c.x, c.y, { steps: 4 });
  await until(() => page.evaluate(() => !document.getElementById('link-hover').hidden), { what: 'the tip before the click' });
  const opened = fx.browser.context.waitForEvent('page', { timeout: 10000 });
  await page.mouse.click(c.x, c.y);
  const other = await opened;
  await until(() => other.url() !== 'about:blank', { what: 'the new page to navigate' });
  assert.equal(other.url(), 'https://example.invalid/docs');
  assert.equal(await other.evaluate(() => window.opener).catch(() => null), null);
  await other.close();
});
