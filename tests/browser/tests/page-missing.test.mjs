// What a relay built without its page serves at `/` (relay/src/assets.rs, PAGE_MISSING_HTML): a
// plain document that says how to build the real page. A relay built that way is a checkout where
// scripts/build-wasm.sh never ran, which the test suite never is, so the document is rendered here
// from the relay's source: readable, in dark and light, on desktop and phone (the screenshots).
// relay/tests/bridge.rs checks the relay serves it (200, at `/` only) when the page is absent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, screenshotsOfState } from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';

// A browser, no relay: the document is the relay's source, rendered here.
const fx = browserFixture({ relay: false });

test('the page-missing document says what happened and the commands that fix it', async () => {
  const source = readFileSync(join(ROOT, 'relay/src/assets.rs'), 'utf8');
  const html = source.match(/pub const PAGE_MISSING_HTML: &str = r#"([\s\S]*?)"#;/)?.[1];
  assert.ok(html, 'PAGE_MISSING_HTML in relay/src/assets.rs');
  const { page } = fx;
  await page.setContent(html);
  assert.equal(await page.title(), 'Tern: page not built');
  const text = await page.evaluate(() => document.body.innerText);
  assert.match(text, /built without its page/);
  assert.match(text, /npm start/);
  assert.match(text, /scripts\/build-wasm\.sh/);
  assert.match(text, /install\.sh \| sh/);
  // No script, nothing fetched: nothing the relay's CSP (inline style allowed) could refuse.
  assert.equal(await page.evaluate(() => document.querySelectorAll('script, link, img').length), 0);
  // The commands fit a phone: long ones wrap instead of running off the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 390), 'no sideways scrolling on a phone');
  await page.setViewportSize({ width: 1100, height: 700 });
  // Dark when the system is dark (color-scheme), so it does not flash white at night.
  await page.emulateMedia({ colorScheme: 'dark' });
  const textColour = () => page.evaluate(() => getComputedStyle(document.body).color);
  assert.equal(await textColour(), 'rgb(255, 255, 255)', 'light text on the dark canvas');
  await page.emulateMedia({ colorScheme: 'light' });
  assert.equal(await textColour(), 'rgb(0, 0, 0)');
  await screenshotsOfState(page, 'page-missing');
});
