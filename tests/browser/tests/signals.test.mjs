// What mosh-server drops, through the recorder's channel (issue 34 item 3, docs/IMAGES.md
// "Clipboard and notifications"): real tern-relay (spawn mode, its recorder), mosh-server and
// Chromium. OSC 52 with a selector mosh ignores (`p`) and one over mosh's 16384 characters reach
// the clipboard with the setting "on"; OSC 9 and OSC 777 make a browser notification only while
// the tab is hidden and the setting "Programs may notify me" allows it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  until, screen, waitForPrompt, typeLine, screenshotsOfState, setPageHidden,
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

test('OSC 52 that mosh-server drops reaches the clipboard with the setting on', chromiumOnly, async () => {
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
  // Off: refused and said so, the clipboard kept.
  await page.evaluate(() => window.tern.settings.set({ remoteCopy: 'off' }));
  await run(page, `printf '\\033]52;s;%s\\007' "$(printf 'nope' | base64)"`, 'osc52off');
  await until(async () => /settings do not allow it/.test(await page.textContent('#copy-offer-text')), { what: 'the refusal notice' });
  assert.equal((await clipboardText(page)).length, 200000);
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
