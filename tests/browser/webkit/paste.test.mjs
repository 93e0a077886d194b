// Paste a picture in WebKit (Debian's WebKitGTK): a synthesized paste event whose DataTransfer
// holds a PNG File, as WebKit hands a pasted screenshot to the page (../lib/paste.mjs, the same
// helpers as the Chromium and Firefox runs); the upload goes over the WebSocket fallback (no
// WebTransport in WebKitGTK) to the real tern-relay's paste directory, and the path is typed into
// the shell. Skipped, with the reason printed, when WebKitGTK is missing (../lib/webkit-run.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ARTIFACTS, until, screen, stats, typeLine, tempDir, pageDetail } from '../lib/helpers.mjs';
import { makePng, sha256, pasteFile } from '../lib/paste.mjs';
import { webkitFixture, webkitScreenshots } from '../lib/webkit-run.mjs';
import { webkitUnavailable } from '../lib/webkit.mjs';

// The relay makes the paste dir itself (0700); its parent is removed with everything in it.
const pasteDir = webkitUnavailable() ? null : join(tempDir('tern-pastes-'), 'pastes');
const { fx, skip } = webkitFixture('paste.test.mjs', { relay: { args: ['--paste-dir', pasteDir] }, open: true, relayLog: true });
fx?.defer(() => rmSync(dirname(pasteDir), { recursive: true, force: true }));
// Rows come trimmed of trailing blanks, so a long path's soft wrap loses a space: compare without
// white space.
const squash = (text) => text.replace(/\s+/g, '');

test('WebKit: a pasted PNG lands in the paste dir with identical bytes and its path is typed', { skip }, async () => {
  const { page } = fx;
  const detail = pageDetail(page);
  const png = makePng(300_000, 7);
  await typeLine(page, 'clear');
  await until(async () => /^\S*[#$]$/.test((await screen(page)).split('\n')[0] ?? ''), { what: 'a clean prompt', detail });
  await page.keyboard.type('ls -l ');
  await until(async () => /ls -l$/m.test(await screen(page)), { what: 'ls -l typed', detail });
  await pasteFile(page, png);
  await until(async () => (await stats(page)).paste.pathsTyped >= 1, { timeout: 60000, what: 'the path typed', detail });
  const s = await stats(page);
  assert.equal(s.transport, 'websocket', 'uploaded over the WebSocket fallback');
  assert.equal(s.paste.uploadBytesSent, png.length, 'every byte sent once');
  const path = s.paste.lastPath;
  assert.equal(path, join(pasteDir, `${sha256(png)}.png`), 'named by its hash');
  assert.ok(readFileSync(path).equals(png), 'the file holds the pasted bytes');
  await until(async () => squash(await screen(page)).includes(squash(`ls -l ${path}`)),
    { what: 'the path on the command line', detail });
  await page.keyboard.press('Enter');
  await until(async () => squash(await screen(page)).includes(`${png.length}`), { what: 'ls to list the file', detail });
  await webkitScreenshots(page, 'paste');
});
