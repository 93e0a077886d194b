// Pictures on a viewer's page (issue 34 item 5, issue 35's shares): the owner runs `tern show`; a
// viewer whose share includes the history gets the picture drawn as the owner's page draws it
// (its pixels compared), a viewer with a screen-only share gets none: no marker reaches its
// screen, nothing is drawn in the picture's place, and asking for it by id is refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  launchBrowser, until, screen, typeLine, screenshotsOfState, tempDir, pageDetail, stats,
} from '../lib/helpers.mjs';
import { browserFixture, onlyChromium } from '../lib/fixture.mjs';
import { quadrantPng, assertQuadrants } from '../lib/pictures.mjs';

const fx = browserFixture({ open: true, relayLog: true });
const dir = tempDir('tern-share-images-');
writeFileSync(join(dir, 'quads.png'), quadrantPng(200, 120));
// This relay's own `tern` (see images.test.mjs).
const tern = () => `${fx.stateDir}/bin/tern`;

const placed = (page) => page.evaluate(() => window.tern.images.placed());
/// What xterm.js shows (a viewer's core has no session screen of its own).
const termText = (page) => page.evaluate(() => {
  const b = window.tern.term.buffer.active;
  const lines = [];
  for (let i = 0; i < b.length; i++) lines.push(b.getLine(i)?.translateToString(true) ?? '');
  return lines.join('\n');
});
/// Two animation frames: images.js scans the screen on the frame after a write.
const frames = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

/// `tern share ARGS` in the owner's shell: the viewer's link, on this relay's origin.
async function share(args, file) {
  await typeLine(fx.page, `${tern()} share ${args} > ${join(dir, file)} 2>/dev/null`);
  const printed = await until(() => {
    try {
      const u = readFileSync(join(dir, file), 'utf8').trim();
      return u.includes('#token=') ? u : null;
    } catch { return null; }
  }, { what: `the share link (${args || 'screen only'})`, detail: pageDetail(fx.page) });
  return `${fx.origin}/${new URL(printed).hash}`;
}

/// A second browser (its own profile) watching `link`, once it shows the owner's after-21.
async function watch(link) {
  const other = await launchBrowser();
  fx.defer(() => other.close());
  await other.page.goto(link);
  await until(() => other.page.evaluate(() => document.body.classList.contains('viewing')), { what: 'the viewer page' });
  await until(async () => /^after-21/m.test(await termText(other.page)), {
    what: "the owner's screen on the viewer", timeout: 20000, detail: () => termText(other.page),
  });
  return other;
}

test('a viewer with the history sees the picture as the owner does; one without sees none and is refused it', onlyChromium('second Chromium profiles'), async () => {
  const owner = fx.page;
  await typeLine(owner, `cd ${dir}; clear`);
  await until(async () => !/clear/.test(await screen(owner)), { what: 'the screen cleared' });
  await typeLine(owner, `${tern()} show quads.png; echo after-$((20+1))`);
  await until(async () => /^after-21/m.test(await screen(owner)), { what: 'after-21' });
  const mine = await until(async () => (await placed(owner)).find((p) => p.drawn), { what: "the owner's picture" });
  const ownerRow = mine.line - await owner.evaluate(() => window.tern.term.buffer.active.baseY);
  const session = (await stats(owner)).session;
  const screenOnly = await share('', 'screen.url');
  const withHistory = await share('--allow-history', 'history.url');
  assert.ok(screenOnly.endsWith(`&view=${session}`) && withHistory.endsWith(`&view=${session}`));

  // With the history: drawn at the owner's row, its colours the file's, a click opens it.
  const h = await watch(withHistory);
  const seen = await until(async () => (await placed(h.page)).find((p) => p.drawn), {
    what: "the picture on the history viewer's page", timeout: 20000,
    detail: async () => JSON.stringify({ placed: await placed(h.page), markers: await h.page.evaluate(() => window.tern.images.markers()) }),
  });
  assert.equal(seen.id, mine.id, 'the same picture');
  assert.equal(seen.via, 'stream', "on a stream of the viewer's link");
  assert.equal(seen.line - await h.page.evaluate(() => window.tern.term.buffer.active.baseY), ownerRow, "at the owner's row");
  await assertQuadrants(h.context, h.page, seen.id, 200, 120);
  await screenshotsOfState(h.page, 'viewer-image');
  await h.page.click(`.tern-image[data-image="${seen.id}"]`);
  await h.page.waitForSelector('#image-view:not([hidden])');
  assert.equal(await h.page.evaluate(() => document.getElementById('image-view-img').naturalWidth), 200);
  await screenshotsOfState(h.page, 'viewer-image-full');
  await h.page.keyboard.press('Escape');

  // Screen only: the same text, no marker in its screen, nothing drawn, and asked by id: refused.
  const s = await watch(screenOnly);
  await frames(s.page);
  assert.deepEqual(await s.page.evaluate(() => window.tern.images.markers()), [], 'no marker reaches it');
  assert.ok((await h.page.evaluate(() => window.tern.images.markers())).length > 0, 'the history viewer has it');
  assert.deepEqual(await placed(s.page), [], 'nothing placed');
  assert.equal(await s.page.evaluate(() => document.querySelectorAll('#terminal img, .tern-image').length), 0, 'no picture, no broken icon');
  const asked = await s.page.evaluate((id) => window.tern.images.fetch(id).then(() => 'served', (e) => String(e)), mine.id);
  assert.match(asked, /did not share the session's history or pictures/, 'a picture by id is refused');
  await screenshotsOfState(s.page, 'viewer-no-image');
  const audit = readFileSync(join(fx.stateDir, 'audit.log'), 'utf8');
  assert.match(audit, /"event":"refused".*"kind":"image"/, 'the refusal is audited');
});
