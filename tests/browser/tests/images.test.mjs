// Images from the shell (docs/IMAGES.md), in the real page against the real tern-relay, its
// recorder and mosh-server: `tern show` and img2sixel print images, the recorder lifts them and
// leaves a marker in mosh-server's screen, the page finds it and draws the image over its cells.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  until, screen, waitForPrompt, typeLine, screenshotsOfState, tempDir, pageDetail, stats, freePort, sleep,
} from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';
import {
  QUADRANTS, quadrantPng, colorsAt as colorsAtOf, assertQuadrants as assertQuadrantsOf,
} from '../lib/pictures.mjs';

const fx = browserFixture({ open: true, relayLog: true });
const dir = tempDir('tern-images-');

const PNG = join(dir, 'quads.png');
writeFileSync(PNG, quadrantPng(200, 120));
writeFileSync(join(dir, 'notes.txt'), 'just text\n');

// This relay's own `tern` (the shared link in /usr/local/bin is whichever relay started last; a
// login shell's PATH puts that first).
const tern = () => `${fx.stateDir}/bin/tern`;

const placed = (page) => page.evaluate(() => window.tern.images.placed());
const drawnImage = (page) => until(async () => (await placed(page)).find((p) => p.drawn), {
  what: 'an image drawn', timeout: 20000, detail: async () => `${JSON.stringify(await placed(page))}\n${await pageDetail(page)()}`,
});

const colorsAt = (page, points) => colorsAtOf(fx.browser.context, page, points);
const assertQuadrants = (page, id, w, h) => assertQuadrantsOf(fx.browser.context, page, id, w, h);

const rowOf = (text, re) => text.split('\n').findIndex((l) => re.test(l));

const shown = fx.step('tern show of a PNG', async () => {
  await typeLine(fx.page, `cd ${dir}; clear`);
  await until(async () => !/clear/.test(await screen(fx.page)), { what: 'the screen cleared' });
  await until(() => fx.page.evaluate(() => window.tern.images.waitingNext()), { what: 'the page waiting for the next picture' });
  await typeLine(fx.page, `${tern()} show quads.png; echo after-$((20+1))`);
  await until(async () => /^after-21/m.test(await screen(fx.page)), { what: 'after-21' });
  return drawnImage(fx.page);
});

test('tern show draws the PNG at its rows, the prompt comes below, the colours are the file\'s', async () => {
  const image = await shown();
  const { page } = fx;
  const text = await screen(page);
  const after = rowOf(text, /^after-21/);
  const base = await page.evaluate(() => window.tern.term.buffer.active.baseY);
  const top = image.line - base;
  // The command's last row (it may wrap) right above the picture; 120 px in 20 px cells: 6 rows,
  // and after-21 right below them.
  assert.match(text.split('\n')[top - 1] ?? '', /\)$/, `the command right above the picture:\n${text}`);
  assert.equal(after, top + 6, `after-21 right below the picture's 6 rows:\n${text}`);
  assert.equal(image.col, 0);
  // Its bytes came on a stream of the session's link, paced as a download, as the next picture
  // the page was waiting for (sent before its marker reached the page: no round trip after it).
  assert.equal(image.via, 'stream');
  assert.equal(image.next, true, 'the picture came as the next one, not asked for by its marker');
  await assertQuadrants(page, image.id, 200, 120);
  await screenshotsOfState(page, 'image-inline');
});

test('a click opens the full-size view; Escape closes it', async () => {
  const image = await shown();
  const { page } = fx;
  await page.click(`.tern-image[data-image="${image.id}"]`);
  await page.waitForSelector('#image-view:not([hidden])');
  const size = await page.evaluate(() => {
    const i = document.getElementById('image-view-img');
    return [i.naturalWidth, i.naturalHeight, document.getElementById('image-view-name').textContent];
  });
  assert.deepEqual(size, [200, 120, 'quads.png']);
  await screenshotsOfState(page, 'image-full');
  await page.keyboard.press('Escape');
  await page.waitForSelector('#image-view', { state: 'hidden' });
});

test('the image is still there after a reload and in another page', async () => {
  const image = await shown();
  let { page } = fx;
  await page.reload();
  await waitForPrompt(page);
  const again = await drawnImage(page);
  assert.equal(again.id, image.id);
  await assertQuadrants(page, again.id, 200, 120);
  // Another page of the browser (the tab closed, the printed URL opened again): it resumes.
  const next = await fx.browser.context.newPage();
  await page.close({ runBeforeUnload: true });
  fx.page = page = next;
  await page.goto(fx.url);
  await until(async () => (await stats(page))?.phase === 'live', { what: 'live' });
  const third = await drawnImage(page);
  assert.equal(third.id, image.id);
  await assertQuadrants(page, third.id, 200, 120);
});

test('the picture scrolls into the scrollback with its text and is drawn there when scrolled back to', async () => {
  await shown();
  const { page } = fx;
  // Paced output (mosh sends screens, not output: a page sees rows scroll only between frames it
  // draws; lines faster than frames are only in the history).
  await typeLine(page, `${tern()} show quads.png; for i in $(seq 1 60); do echo $i; sleep 0.03; done; echo scrolled-$((1+1))`);
  await until(async () => /^scrolled-2/m.test(await screen(page)), { what: 'scrolled-2' });
  const base = await page.evaluate(() => window.tern.term.buffer.active.baseY);
  const newest = async () => (await placed(page)).sort((a, b) => b.id - a.id)[0];
  const gone = await until(async () => { const p = await newest(); return p && p.id > 1 && p.line < base ? p : null; }, { what: 'an image above the screen', detail: async () => JSON.stringify({ base, placed: await placed(page), now: await page.evaluate(() => window.tern.term.buffer.active.baseY) }) });
  // Back up to it, as a person scrolls: drawn again there, over the same line.
  await page.evaluate((line) => window.tern.term.scrollToLine(line), gone.line);
  const back = await until(async () => (await placed(page)).find((p) => p.id === gone.id && p.drawn), { what: 'the picture drawn in the scrollback' });
  assert.equal(back.line, gone.line);
  const row = await page.evaluate((line) => window.tern.term.buffer.active.getLine(line + 6)?.translateToString(true), gone.line);
  assert.equal(row, '1', 'the text after it scrolled with it');
  await assertQuadrants(page, gone.id, 200, 120);
  await page.evaluate(() => window.tern.term.scrollToBottom());
});

test('the history view draws the pictures in its lines', async () => {
  await shown();
  const { page } = fx;
  // Enough lines after a picture that it left the recorder's screen into the history.
  await typeLine(page, `${tern()} show quads.png; seq -f 'hist-%g' 1 80`);
  await until(async () => /^hist-80/m.test(await screen(page)), { what: 'hist-80' });
  const { first } = await page.evaluate(() => window.tern.history.page(null, 1));
  const lines = await page.evaluate(() => window.tern.history.lines());
  const cmd = lines.findLastIndex((l) => /show quads\.png; seq/.test(l));
  assert.ok(cmd >= 0, 'the command in the history');
  await page.evaluate((line) => window.tern.history.open(line), first + cmd + 1);
  const id = await until(() => page.evaluate(() => {
    const el = [...document.querySelectorAll('#history .hl-image')].at(-1);
    const img = el?.querySelector('img');
    return img?.complete && img.naturalWidth === 200 ? Number(el.dataset.image) : null;
  }), { what: 'the picture in the history view' });
  const box = await page.evaluate((id) => {
    const r = [...document.querySelectorAll(`#history .hl-image[data-image="${id}"]`)].at(-1).getBoundingClientRect();
    return { x: r.x, y: r.y, width: r.width, height: r.height };
  }, id);
  const scale = Math.min(box.width / 200, box.height / 120);
  const got = await colorsAt(page, [[0.25, 0.25], [0.75, 0.25], [0.25, 0.75], [0.75, 0.75]]
    .map(([a, b]) => [box.x + a * 200 * scale, box.y + b * 120 * scale]));
  got.forEach((rgb, i) => assert.ok(rgb.every((v, k) => Math.abs(v - QUADRANTS[i][k]) <= 12), `quadrant ${i}: ${rgb} (box ${JSON.stringify(box)})`));
  await screenshotsOfState(page, 'image-history');
  await page.evaluate(() => window.tern.history.close());
});

test('sixty pictures: at most 48 held decoded, the old ones fetched again when scrolled back to', async () => {
  await shown();
  const { page } = fx;
  const before = new Set((await placed(page)).map((p) => p.id));
  // One row each, paced so that frames see the scroll (a row that scrolls past between two frames
  // mosh sends never reaches the page, picture or text: only the history has it).
  await typeLine(page, `for i in $(seq 1 60); do ${tern()} show --rows 1 quads.png; sleep 0.05; done; echo sixty-$((30*2))`);
  await until(async () => /^sixty-60/m.test(await screen(page)), { what: 'sixty-60', timeout: 30000 });
  const fresh = await until(async () => {
    const p = (await placed(page)).filter((x) => !before.has(x.id));
    return p.length > 48 ? p : null;
  }, { what: 'more than 48 of the pictures placed', detail: async () => `${(await placed(page)).length} placed` });
  assert.ok(await page.evaluate(() => window.tern.images.loadedCount()) <= 48);
  // The first of them, far above now: drawn again when scrolled to.
  const first = fresh.sort((a, b) => a.id - b.id)[0];
  await page.evaluate((line) => window.tern.term.scrollToLine(line), first.line);
  await until(async () => (await placed(page)).find((p) => p.id === first.id && p.drawn), {
    what: 'the first picture drawn again',
    detail: async () => JSON.stringify({ first, now: (await placed(page)).find((p) => p.id === first.id), view: await page.evaluate(() => window.tern.term.buffer.active.viewportY), els: await page.evaluate((id) => [...document.querySelectorAll(`.tern-image[data-image="${id}"]`)].map((e) => [e.style.display, e.textContent, e.getBoundingClientRect().y]), first.id) }),
  });
  assert.ok(await page.evaluate(() => window.tern.images.loadedCount()) <= 48);
  await page.evaluate(() => window.tern.term.scrollToBottom());
});

test('pictures printed faster than they are seen: the page fetches at most one ahead of its screen', async () => {
  await shown();
  const { page } = fx;
  const count = () => page.evaluate(() => [window.tern.images.fetchedUnseen().length, window.tern.images.placedEver()]);
  const [before, placedBefore] = await count();
  // Forty pictures with no pause, each scrolled off at once by a screenful of text: most markers
  // never reach the page (mosh sends the newest screen), so nothing should fetch their bytes.
  await typeLine(page, `for i in $(seq 1 40); do ${tern()} show --rows 2 quads.png; seq 1 40; done; echo burst-$((20*2))`);
  await until(async () => /^burst-40/m.test(await screen(page)), { what: 'burst-40', timeout: 60000 });
  await sleep(1000);
  const [after, placedAfter] = await count();
  const [unseen, seen] = [after - before, placedAfter - placedBefore];
  // One picture may be on its way ahead of its marker each time the page sees a newer marker.
  console.log(`# burst of 40: ${seen} markers seen, ${unseen} pictures fetched unseen`);
  assert.ok(unseen <= seen + 1, `${unseen} pictures fetched that the page never showed (${seen} markers seen)`);
});

test('img2sixel output appears as an image, the text around it unchanged', async () => {
  await shown();
  const { page } = fx;
  const before = new Set((await placed(page)).map((p) => p.id));
  await typeLine(page, `clear; printf 'sx-before\\n'; img2sixel ${PNG}; printf 'sx-after\\n'`);
  await until(async () => /^sx-after/m.test(await screen(page)), { what: 'sx-after' });
  const image = await until(async () => (await placed(page)).find((p) => p.drawn && !before.has(p.id)), { what: 'the SIXEL drawn' });
  const text = await screen(page);
  const b = rowOf(text, /^sx-before$/);
  const a = rowOf(text, /^sx-after$/);
  // 6 rows: the cursor ends on the image's last row, column 0 (a VT340's SIXEL rule).
  assert.equal(a, b + 6, text);
  const base = await page.evaluate(() => window.tern.term.buffer.active.baseY);
  assert.equal(image.line - base, b + 1, text);
  // The image's last row holds sx-after: the picture is cut above it, the text shows.
  const clip = () => page.evaluate((id) => document.querySelector(`.tern-image[data-image="${id}"]`).style.clipPath, image.id);
  await until(async () => /16\.66\d*%/.test(await clip()), { what: 'the picture cut above sx-after', detail: clip });
  await assertQuadrants(page, image.id, 200, 100);
  await screenshotsOfState(page, 'image-sixel');
});

test('a malformed and a truncated image leave the terminal working', async () => {
  await shown();
  const { page } = fx;
  await typeLine(page, `printf '\\033]1337;File=inline=1:@@@@\\a'; echo ok-$((1+1))`);
  await until(async () => /^ok-2/m.test(await screen(page)), { what: 'ok-2' });
  // Cut by the next escape sequence (as a terminal, the recorder ends it there; until then the
  // output is the image's, as in any terminal).
  await typeLine(page, `printf '\\033Pq#0;2;0;0;0#0~~'; printf '\\033[1mok-%s\\033[0m\\n' $((2+1))`);
  await until(async () => /ok-3/m.test(await screen(page)), { what: 'ok-3' });
  await page.keyboard.type('echo still-typing', { delay: 5 });
  await until(async () => (await screen(page)).includes('echo still-typing'), { what: 'the keys echoed' });
  await page.keyboard.press('Enter');
  await until(async () => /^still-typing/m.test(await screen(page)), { what: 'still-typing' });
});

test('tern show of a text file says why and exits 1', async () => {
  await shown();
  const { page } = fx;
  await typeLine(page, `${tern()} show notes.txt; echo rc=$?`);
  await until(async () => /^rc=1/m.test(await screen(page)), { what: 'rc=1', detail: pageDetail(page) });
  assert.match(await screen(page), /notes\.txt: not a PNG, JPEG, GIF or WebP picture/);
});

test('over the WebSocket fallback the picture comes on a stream of it too', async () => {
  await shown();
  // WebTransport pointed at a UDP port where nothing listens (test-only `wt_port`): the page falls
  // back to the WebSocket on its own origin (tests/browser/tests/fallback.test.mjs).
  const page = await fx.browser.context.newPage();
  try {
    await page.goto(`${fx.origin}/#session=new&token=${fx.token}&wt_port=${await freePort()}`);
    await waitForPrompt(page);
    assert.equal((await stats(page)).transport, 'websocket');
    await typeLine(page, `cd ${dir}; ${tern()} show quads.png`);
    const image = await drawnImage(page);
    assert.equal(image.via, 'stream');
    await assertQuadrants(page, image.id, 200, 120);
  } finally {
    await page.close();
  }
});
