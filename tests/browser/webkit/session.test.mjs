// A session in WebKit (Debian's WebKitGTK, MiniBrowser under WebKitWebDriver): the page, the real
// tern-relay, mosh-server and a shell. WebKitGTK has no WebTransport, so the page runs over its
// WebSocket fallback; a reload continues the same shell. Skipped, with the reason printed, when
// WebKitWebDriver, MiniBrowser or Xvfb is missing (../lib/webkit-run.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ARTIFACTS, until, screen, stats, typeLine, waitForPrompt, pageDetail } from '../lib/helpers.mjs';
import { webkitFixture, webkitScreenshots } from '../lib/webkit-run.mjs';

const { fx, skip } = webkitFixture('session.test.mjs');
/// The session every test types into, opened by the first test that runs.
const opened = fx?.step('a new session at its prompt', () => fx.openSession());
const detail = () => pageDetail(fx.page);

test('WebKit: a prompt shows and a command runs', { skip }, async () => {
  await opened();
  const { page } = fx;
  assert.match(await page.evaluate(() => navigator.userAgent), /AppleWebKit\/.* Safari\//);
  // The hello left before xterm.js opened the terminal, sized by www/terminal_size.js's estimate:
  // WebKit's font metrics give the size the opened terminal fits (no refit), and the shell has it.
  const refits = await page.evaluate(() => performance.getEntriesByName('tern:refit').length);
  assert.equal(refits, 0, 'the estimated size was the fitted one');
  const grid = await page.evaluate(() => `${window.tern.term.rows} ${window.tern.term.cols}`);
  await typeLine(page, 'echo size=$(stty size)');
  await until(async () => (await screen(page)).includes(`size=${grid}`), { what: `stty size ${grid}`, detail: detail() });
  await typeLine(page, 'echo $((6*7))');
  await until(async () => /^42$/m.test(await screen(page)), { what: '42', detail: detail() });
  // Something with colour for the screenshots.
  await typeLine(page, 'ls --color=always -F /usr/bin | head -n 12 | column -c 90; echo shot-ready');
  await until(async () => /^shot-ready$/m.test(await screen(page)), { what: 'ls output', detail: detail() });
  const sizes = await webkitScreenshots(page, 'session');
  console.log(`# viewports: desktop ${JSON.stringify(sizes.desktop)}, phone ${JSON.stringify(sizes.phone)}`);
  assert.deepEqual(sizes.desktop, { width: 1280, height: 720 });
  assert.deepEqual(sizes.phone, { width: 390, height: 844 });
  // The shell still answers at the desktop size again.
  await typeLine(page, 'clear; stty size');
  await until(async () => /^\d+ \d+$/m.test(await screen(page)), { what: 'stty size', detail: detail() });
});

test('WebKit: no WebTransport, so the session runs over the WebSocket fallback and says so', { skip }, async () => {
  await opened();
  const { page } = fx;
  assert.equal(await page.evaluate(() => typeof WebTransport), 'undefined', 'WebKitGTK has no WebTransport');
  const s = await stats(page);
  assert.equal(s.phase, 'live');
  assert.equal(s.transport, 'websocket');
  assert.ok(s.websocketLinks >= 1, `websocketLinks ${s.websocketLinks}`);
  const pill = await page.evaluate(() => {
    const p = document.getElementById('pill');
    return { text: p.textContent, hidden: p.hidden, link: document.body.dataset.link };
  });
  assert.deepEqual(pill, { text: 'TCP fallback', hidden: false, link: 'websocket' });
  await page.screenshot({ path: join(ARTIFACTS, 'webkit-fallback.png') });
});

test('WebKit: a reload continues the same shell', { skip }, async () => {
  await opened();
  const { page } = fx;
  await typeLine(page, 'clear; tern_mark=kept-$((3*5)); echo "pid=$$"');
  const pidOf = async () => (await screen(page)).match(/^pid=(\d+)$/m)?.[1];
  const pid = await until(pidOf, { what: 'the shell\'s pid', detail: detail() });
  const session = (await stats(page)).session;
  assert.ok(session, 'a relay session id');
  await page.reload();
  await waitForPrompt(page);
  const s = await stats(page);
  assert.notEqual(s.restoredMs, null, 'the saved screen was drawn before the relay answered');
  assert.equal(s.session, session, 'the same relay session');
  await typeLine(page, 'clear; echo "after=$$ $tern_mark"');
  await until(async () => new RegExp(`^after=${pid} kept-15$`, 'm').test(await screen(page)),
    { what: `the same shell (pid ${pid}, its variable)`, detail: detail() });
  await page.screenshot({ path: join(ARTIFACTS, 'webkit-resumed.png') });
});
