// The WebKit test files' set-up: the shared fixture (./fixture.mjs: the real tern-relay, its
// session) with WebKitGTK's MiniBrowser as the browser (./webkit.mjs), and `skip`, the reason the
// WebKit tests cannot run here (printed once), or undefined. Each test passes `{ skip }`, so a
// machine without WebKitGTK shows every test skipped with the reason: never a silent pass.
import { join } from 'node:path';
import { browserFixture } from './fixture.mjs';
import { ARTIFACTS, sleep } from './helpers.mjs';
import { webkitUnavailable } from './webkit.mjs';

export const DESKTOP = { width: 1280, height: 720 };
export const PHONE = { width: 390, height: 844 };

/// `{ fx, skip }`: `fx` is browserFixture(opts) in WebKit (null when skipped); `file` names the
/// test file in the printed line.
export function webkitFixture(file, opts = {}) {
  const skip = webkitUnavailable() ?? undefined;
  if (skip) {
    console.log(`# WebKit tests of ${file} SKIPPED: ${skip}`);
    return { fx: null, skip };
  }
  const fx = browserFixture({ ...opts, browser: { viewport: DESKTOP, ...opts.browser, browser: 'webkit' } });
  fx.before(() => console.log(`# ${file} in ${fx.browser.version} (MiniBrowser under WebKitWebDriver, on Xvfb)`));
  return { fx, skip };
}

/// Screenshots of the page as it is now: `test-artifacts/webkit-NAME-{dark,light}-{desktop,phone}.png`.
/// WebDriver cannot switch WebKitGTK's prefers-color-scheme in a running browser (MiniBrowser's
/// --dark-mode is a start-up flag), so Tern's own theme setting picks dark and light; the setting
/// goes back to what it was, and the window to the desktop size. The cursor's blinking is off
/// meanwhile, so that each shot shows the cursor (a blink's off phase would hide it). Returns the
/// viewport sizes got.
export async function webkitScreenshots(page, name) {
  const was = await page.evaluate(() => window.tern.settings.get());
  const sizes = {};
  for (const theme of ['dark', 'light']) {
    await page.evaluate((t) => window.tern.settings.set({ theme: t, cursorBlink: false }), theme);
    for (const [size, viewport] of [['desktop', DESKTOP], ['phone', PHONE]]) {
      sizes[size] = await page.setViewportSize(viewport);
      // The terminal refits after the resize (a frame or two) and the shell redraws.
      await sleep(400);
      await page.screenshot({ path: join(ARTIFACTS, `webkit-${name}-${theme}-${size}.png`) });
    }
  }
  await page.evaluate(({ theme, cursorBlink }) => window.tern.settings.set({ theme, cursorBlink }), was);
  await page.setViewportSize(DESKTOP);
  return sizes;
}
