// WebTransport with Safari's datagram API shape, in Chromium: WebKit (Safari 26.4+) has no
// `datagrams.writable` getter, only the spec's `datagrams.createWritable()`. Before the page's
// scripts run, lib/safari-shape.mjs takes Chromium's getter away and adds a `createWritable()`
// that hands out Chromium's own datagram writable (so the transport stays real). The page must
// still run its session over WebTransport, not fall back to the WebSocket: it used to read the
// getter, got `undefined`, threw, and fell back (docs/BROWSER.md, "Browser APIs the page uses").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { readFileSync, statSync } from 'node:fs';
import { ARTIFACTS, until, screen, stats, waitForPrompt, typeLine, tempDir, newSession } from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';
import { makePng, pasteFile, sha256 } from '../lib/paste.mjs';
import { safariDatagramShape } from '../lib/safari-shape.mjs';

const pasteDir = tempDir('tern-pastes-');
const fx = browserFixture({ relay: { args: ['--paste-dir', pasteDir] }, relayLog: true });

const shape = () => fx.page.evaluate(() => window.__safariShape);

/// A new session at its prompt in a page with Safari's datagram API.
const opened = fx.step("a session in a page with Safari's datagram API", async () => {
  await fx.page.addInitScript(safariDatagramShape);
  await fx.page.goto(newSession(fx.url));
  await waitForPrompt(fx.page);
});

test("with only createWritable() (Safari's shape) the session runs over WebTransport", async () => {
  await opened();
  const { page } = fx;
  const s0 = await shape();
  assert.ok(s0?.installed, 'this browser had a datagrams.writable getter to take away');
  assert.equal(await page.evaluate(() => 'writable' in WebTransportDatagramDuplexStream.prototype), false);
  const s = await stats(page);
  assert.equal(s.transport, 'webtransport', 'not the WebSocket fallback');
  assert.equal(s.websocketLinks, 0);
  assert.ok(s0.createWritableCalls >= 1, `createWritable() called ${s0.createWritableCalls} times`);
  const pill = await page.evaluate(() => document.getElementById('pill').textContent);
  assert.notEqual(pill, 'TCP fallback', 'no fallback pill');
  assert.equal(await page.evaluate(() => document.body.dataset.link), 'webtransport');
  // Keys leave only as datagrams: the echo came through createWritable()'s writer.
  const out = s.core.datagramsOut;
  await typeLine(page, 'echo tern-$((6*7))');
  await until(async () => /^tern-42$/m.test(await screen(page)), { what: 'tern-42' });
  assert.ok((await stats(page)).core.datagramsOut > out, 'datagrams were written');
  await page.screenshot({ path: join(ARTIFACTS, 'browser-safari-shape.png') });
});

test("a pasted picture lands with its path typed over Safari's datagram API", async () => {
  await opened();
  const { page } = fx;
  await typeLine(page, 'clear');
  const png = makePng(300_000, 33);
  await pasteFile(page, png);
  await until(async () => (await stats(page)).paste.pathsTyped >= 1, { timeout: 30000, what: 'the path' });
  const { lastPath } = (await stats(page)).paste;
  assert.equal(sha256(readFileSync(lastPath)), sha256(png));
  assert.equal(statSync(lastPath).mode & 0o777, 0o600);
  // Typed once the relay answered; on screen once the shell's echo came back.
  await until(async () => (await screen(page)).replace(/\s+/g, '').includes(lastPath),
    { what: 'the path on the command line' });
  assert.equal((await stats(page)).transport, 'webtransport');
});

test('a createWritable() that throws leaves the page on the writable getter, still WebTransport', async () => {
  const other = await fx.browser.context.newPage();
  try {
    // Both shapes, the new one broken (as a browser whose createWritable() refuses): the page
    // must not give up WebTransport while the getter still works.
    await other.addInitScript(() => {
      window.__throwingCreateWritable = 0;
      WebTransportDatagramDuplexStream.prototype.createWritable = function () {
        window.__throwingCreateWritable++;
        throw new DOMException('refused for the test', 'InvalidStateError');
      };
    });
    await other.goto(newSession(fx.url));
    await waitForPrompt(other);
    assert.ok(await other.evaluate(() => window.__throwingCreateWritable) >= 1, 'createWritable() was tried');
    assert.equal((await stats(other)).transport, 'webtransport');
    await typeLine(other, 'echo getter-$((6*7))');
    await until(async () => /^getter-42$/m.test(await screen(other)), { what: 'getter-42' });
  } finally {
    await other.close();
  }
});
