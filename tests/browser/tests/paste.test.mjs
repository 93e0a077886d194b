// Paste a picture, end to end: the page, the real tern-relay with a paste directory, mosh-server,
// a shell. Slow-link cases put tern-tests' linkemu between the page's WebTransport and the relay.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, statSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  ARTIFACTS, freePort, until, screen, stats, waitForPrompt, typeLine, tempDir, startLinkemu, newSession,
} from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';
import { makePng, sha256, loadFile, pasteLoaded, pasteFile } from '../lib/paste.mjs';

const pasteDir = join(tempDir('tern-pastes-'), 'pastes');
const fx = browserFixture({ relay: { args: ['--paste-dir', pasteDir] }, open: true, relayLog: true });
let emu;
fx.defer(() => emu?.stop());

const pasteStats = async (p = fx.page) => (await stats(p)).paste;
/// The command line: the screen's last non-empty row(s) joined (a long path wraps).
// Rows come trimmed of trailing blanks, so a space at a soft wrap is lost: compare without any
// white space at all.
const squash = (text) => text.replace(/\s+/g, '');
const screenFlat = async (p = fx.page) => squash(await screen(p));
// After `clear`, wait for the fresh prompt before typing on: keys typed while clear runs are echoed
// by the tty at the top of the screen and confuse readline's redisplay.
const cleared = (p) => until(async () => /^\S+[#$]$/.test((await screen(p)).split('\n')[0] ?? ''), { what: 'a clean prompt' });

async function waitPathsTyped(n, p = fx.page) {
  return until(async () => (await pasteStats(p)).pathsTyped >= n, { timeout: 60000, what: `${n} paths typed` });
}

function checkStored(path, bytes) {
  assert.ok(path.startsWith(pasteDir + '/'), path);
  const hash = sha256(bytes);
  assert.equal(path, join(pasteDir, `${hash}.png`), 'named by hash, extension from magic bytes');
  assert.equal(sha256(readFileSync(path)), hash, 'identical bytes');
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.equal(statSync(pasteDir).mode & 0o777, 0o700);
}

/// The first paste of a picture in this page (`ls -l ` typed before it, its path after): the
/// stats before it and after the path was typed. The repeat paste and the second tab paste it again.
const firstPaste = fx.step('a picture pasted once', async () => {
  const { page } = fx;
  const png = makePng(300_000, 1);
  await typeLine(page, 'clear');
  await cleared(page);
  await page.keyboard.type('ls -l ', { delay: 5 });
  const before = await pasteStats();
  await pasteFile(page, png);
  await waitPathsTyped(before.pathsTyped + 1);
  return { png, before, s: await pasteStats() };
});

test('a pasted PNG lands on the host with identical bytes and its path is typed', async () => {
  const { png, before, s } = await firstPaste();
  const { page } = fx;
  checkStored(s.lastPath, png);
  assert.equal(s.uploadsStarted - before.uploadsStarted, 1);
  assert.equal(s.uploadBytesSent - before.uploadBytesSent, png.length);
  await until(async () => (await screenFlat()).includes(squash(`ls -l ${s.lastPath}`)), { what: 'the path on the command line' });
  await page.keyboard.press('Enter');
  await until(async () => (await screenFlat()).includes(squash(`${png.length}`)), { what: 'ls to list the file' });
  await page.screenshot({ path: join(ARTIFACTS, 'browser-paste.png') });
});

test('pasting the same picture again sends 0 bytes and types the same path', async () => {
  await firstPaste();
  const { page } = fx;
  // The command line empty (alone, the first paste's `ls -l PATH` is still on it).
  await page.keyboard.press('Control+U');
  const png = makePng(300_000, 1);
  await typeLine(page, 'clear');
  await cleared(page);
  const before = await pasteStats();
  await pasteFile(page, png);
  await waitPathsTyped(before.pathsTyped + 1);
  const s = await pasteStats();
  assert.equal(s.uploadBytesSent - before.uploadBytesSent, 0, 'a repeat paste sends nothing');
  assert.equal(s.uploadsStarted - before.uploadsStarted, 0, 'nor asks the relay');
  assert.equal(s.lastPath, before.lastPath);
  await until(async () => (await screenFlat()).includes(squash(s.lastPath)), { what: 'the path again' });
  await page.keyboard.press('Control+U');
});

test('ten pastes in a row make one upload', async () => {
  const { page } = fx;
  const png = makePng(1_000_000, 2);
  await typeLine(page, 'clear');
  await cleared(page);
  const before = await pasteStats();
  await loadFile(page, png);
  await pasteLoaded(page, 10);
  await waitPathsTyped(before.pathsTyped + 10);
  const s = await pasteStats();
  assert.equal(s.uploadsStarted - before.uploadsStarted, 1, 'one upload');
  assert.equal(s.uploadBytesSent - before.uploadBytesSent, png.length, 'its bytes once');
  checkStored(s.lastPath, png);
  await page.keyboard.press('Control+U');
});

test('a page that forgot the paste asks the relay, which has it: 0 bytes', async () => {
  await firstPaste();
  // A second tab has no memory of the first one's pastes; the relay's answer decides.
  const other = await fx.browser.context.newPage();
  try {
    await other.goto(newSession(fx.url));
    await waitForPrompt(other);
    const png = makePng(300_000, 1);
    await pasteFile(other, png);
    await waitPathsTyped(1, other);
    const s = await pasteStats(other);
    assert.equal(s.uploadsStarted, 1, 'it asked the relay');
    assert.equal(s.uploadBytesSent, 0, 'and sent nothing');
    assert.equal(s.lastPath, join(pasteDir, `${sha256(png)}.png`));
  } finally {
    await other.close();
  }
});

// The rest goes through the link emulator, so that an upload takes long enough to type into
// and to kill the relay under.
let slow;
async function slowPage(rate) {
  const emuPort = await freePort();
  emu = await startLinkemu({ listenPort: emuPort, targetPort: fx.port, up: `rate=${rate},queue-delay=200ms`, link: 'delay=5ms' });
  const p = await fx.browser.context.newPage();
  p.on('console', (m) => fx.browser.consoleLog.push(`slow ${m.type()}: ${m.text()}`));
  await p.goto(newSession(fx.url.replace('#token=', `#wt_port=${emuPort}&token=`)));
  await waitForPrompt(p);
  return p;
}
/// The page through linkemu at 16 Mbit/s up, for the tests of keys held during an upload.
const slow16 = fx.step('a page through linkemu at 16 Mbit/s', async () => { slow = await slowPage('16mbit'); });

test('keys typed during an upload reach the remote after the path, in order', async () => {
  await slow16();
  const png = makePng(3_000_000, 3);
  await typeLine(slow, 'clear');
  await cleared(slow);
  await slow.keyboard.type('echo ', { delay: 5 });
  await loadFile(slow, png);
  await pasteLoaded(slow);
  await until(async () => (await pasteStats(slow)).uploadBytesSent > 0, { what: 'the upload to start' });
  await slow.keyboard.type('; echo held-$((6*7))', { delay: 10 });
  await slow.keyboard.press('Enter');
  const during = await pasteStats(slow);
  assert.equal(during.active, true, 'the keys were typed while the upload ran');
  assert.ok(during.heldKeys >= 20, `held ${during.heldKeys} bytes`);
  assert.match(during.line ?? '', /^Pasting: \d+% of 3\.\d MB/, 'progress is shown');
  await slow.screenshot({ path: join(ARTIFACTS, 'browser-paste-progress.png') });
  await waitPathsTyped(1, slow);
  const path = (await pasteStats(slow)).lastPath;
  checkStored(path, png);
  await until(async () => /^held-42$/m.test(await screen(slow)), { timeout: 30000, what: 'the held command to run' });
  // Held keys after the path: `echo PATH ; echo held-42` prints the path, then held-42. Keys sent
  // before the path would have made `echo ; echo held-42PATH`.
  const rows = (await screen(slow)).split('\n');
  const at = rows.lastIndexOf('held-42');
  assert.ok(squash(rows.slice(0, at).join('')).endsWith(squash(path)), `the path printed just before held-42:\n${rows.join('\n')}`);
  assert.ok((await screenFlat(slow)).includes(squash(`echo ${path} ; echo held-$((6*7))`)), 'in order on the command line');
});

test('Escape cancels an upload and releases the held keys', async () => {
  await slow16();
  const png = makePng(3_000_000, 4);
  await typeLine(slow, 'clear');
  await cleared(slow);
  const before = await pasteStats(slow);
  await loadFile(slow, png);
  await pasteLoaded(slow);
  await until(async () => (await pasteStats(slow)).uploadBytesSent > before.uploadBytesSent, { what: 'the upload to start' });
  await slow.keyboard.type('echo after-$((2*3))', { delay: 5 });
  await slow.keyboard.press('Escape');
  await slow.keyboard.press('Enter');
  await until(async () => /^after-6$/m.test(await screen(slow)), { what: 'the held keys after cancel' });
  const s = await pasteStats(slow);
  assert.equal(s.cancelled - before.cancelled, 1);
  assert.equal(s.pathsTyped, before.pathsTyped, 'no path typed');
  assert.equal(s.line, 'Paste cancelled.');
  assert.ok(!readdirSync(pasteDir).includes(`${sha256(png)}.png`));
});

test('an upload interrupted by a relay restart resumes and completes with identical bytes', async () => {
  await emu?.stop();
  await slow?.close();
  slow = await slowPage('8mbit');
  const png = makePng(6_000_000, 5);
  await typeLine(slow, 'clear');
  await cleared(slow);
  await loadFile(slow, png);
  await pasteLoaded(slow);
  await until(async () => ((await pasteStats(slow)).progress?.acked ?? 0) > png.length * 0.3,
    { timeout: 30000, what: 'a third of the upload' });
  await fx.relay.stop('SIGKILL');
  const part = join(pasteDir, `${sha256(png)}.part`);
  const held = statSync(part).size;
  assert.ok(held > 0 && held < png.length, `the relay kept ${held} bytes`);
  await fx.relay.start();
  await waitPathsTyped(1, slow);
  const s = await pasteStats(slow);
  checkStored(s.lastPath, png);
  assert.ok(s.streams >= 2, `resumed on a new stream (${s.streams})`);
  assert.ok(s.bytesSkipped >= held * 0.9, `resumed from the relay's ${held} bytes (skipped ${s.bytesSkipped})`);
  assert.ok(s.uploadBytesSent < png.length * 1.5, `sent ${s.uploadBytesSent} of ${png.length}`);
  await until(async () => (await screenFlat(slow)).includes(squash(s.lastPath)), { what: 'the path' });
});
