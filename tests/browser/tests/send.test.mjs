// From the shell to the browser: `tern send FILE` downloads the file in the page
// (identical bytes, SHA-256 checked, resumed across a relay restart), `tern open URL` opens a new
// page once the person allows it. Real tern-relay (spawn mode), mosh-server, shell, Chromium.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, createHash } from 'node:crypto';
import { writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  freePort, until, screen, stats, waitForPrompt, typeLine, tempDir, newSession, screenshotsOfState,
  startLinkemu, pageDetail,
} from '../lib/helpers.mjs';
import { browserFixture, onlyChromium } from '../lib/fixture.mjs';

const chromiumOnly = onlyChromium();
const files = tempDir('tern-send-');
const fx = browserFixture({ open: true, relayLog: true });
let emu;
fx.defer(() => emu?.stop());

const sha256 = (b) => createHash('sha256').update(b).digest('hex');
const flat = async (p) => (await screen(p)).replace(/\s+/g, '');
const seen = (p, re, what, timeout = 30000) => until(async () => re.test(await flat(p)), { timeout, what, detail: pageDetail(p) });

/// A file of random bytes in the test's directory.
function makeFile(name, size) {
  const bytes = randomBytes(size);
  const path = join(files, name);
  writeFileSync(path, bytes);
  return { path, bytes };
}

/// The next download the page starts, its bytes once the browser has it.
async function nextDownload(p, run) {
  const [download] = await Promise.all([p.waitForEvent('download', { timeout: 60000 }), run()]);
  const saved = join(files, `saved-${Math.random().toString(36).slice(2)}`);
  await download.saveAs(saved);
  return { name: download.suggestedFilename(), bytes: readFileSync(saved) };
}

test('tern send of a 5 MB file: the browser downloads identical bytes and the shell hears so', chromiumOnly, async () => {
  const { page } = fx;
  const { path, bytes } = makeFile('report 5MB.bin', 5_000_000);
  await typeLine(page, 'clear');
  const got = await nextDownload(page, () => typeLine(page, `tern send '${path}'; echo sent-$?`));
  assert.equal(got.name, 'report 5MB.bin');
  assert.equal(got.bytes.length, bytes.length);
  assert.equal(sha256(got.bytes), sha256(bytes), 'identical bytes');
  await seen(page, /downloadedbythebrowser,SHA-256checked/, 'the shell told of the download');
  await seen(page, /sent-0/, 'tern send to succeed');
  // The bar says so too, for a few seconds.
  const s = await stats(page);
  assert.equal(s.download?.state, 'saved', JSON.stringify(s.download));
  assert.match(s.download.line, /Downloaded report 5MB\.bin \(5\.0 MB\), SHA-256 checked/);
  await screenshotsOfState(page, 'send-downloaded');
});

test('tern send refuses what it cannot send, and says why', async () => {
  const { page } = fx;
  await typeLine(page, 'clear');
  await typeLine(page, `tern send ${files}/no-such-file; echo missing-$?`);
  await seen(page, /no-such-file:Nosuchfileordirectory.*missing-1/, 'a missing file refused');
  await typeLine(page, `tern send ${files}; echo dir-$?`);
  await seen(page, /isnotaregularfile.*dir-1/, 'a directory refused');
  await typeLine(page, 'env -u TERN_SOCKET tern send /etc/hostname; echo nosock-$?');
  await seen(page, /notinaTernsession.*nosock-2/, 'outside a session, a clear message');
  await typeLine(page, "tern open 'javascript:alert(1)'; echo js-$?");
  await seen(page, /onlyhttp:\/\/andhttps:\/\/URLscanbeopened.*js-1/, 'a javascript: URL refused');
});

test('tern open: the page asks, Open opens a new page with the URL, Not now declines', chromiumOnly, async () => {
  const { page } = fx;
  // example.invalid never resolves: the new page's request is answered here.
  await fx.browser.context.route('https://example.invalid/**', (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<title>opened</title>' }));
  await typeLine(page, 'clear');
  await typeLine(page, 'tern open https://example.invalid/some/page?x=1; echo open-$?');
  await until(() => page.evaluate(() => !document.getElementById('open-offer').hidden), { what: 'the allow prompt' });
  assert.equal(await page.textContent('#open-offer-url'), 'https://example.invalid/some/page?x=1');
  await screenshotsOfState(page, 'send-open-prompt');
  const [opened] = await Promise.all([
    fx.browser.context.waitForEvent('page', { timeout: 15000 }),
    page.click('#open-offer-open'),
  ]);
  await opened.waitForLoadState();
  assert.equal(opened.url(), 'https://example.invalid/some/page?x=1');
  // noopener: the new page cannot reach back into the terminal.
  assert.equal(await opened.evaluate(() => window.opener), null);
  await opened.close();
  await seen(page, /openedinthebrowser.*open-0/, 'the shell told it opened');
  assert.equal(await page.evaluate(() => document.getElementById('open-offer').hidden), true);

  await typeLine(page, 'tern open https://example.invalid/two; echo two-$?');
  await until(() => page.evaluate(() => !document.getElementById('open-offer').hidden), { what: 'the second prompt', detail: pageDetail(page) });
  await page.click('#open-offer-dismiss');
  await seen(page, /thepersondeclined.*two-1/, 'the shell told it was declined');
});

test('a download interrupted by a relay restart resumes where it was and arrives whole', chromiumOnly, async () => {
  // A slow link (8 Mbit/s down) so the download is still under way when the relay goes.
  const emuPort = await freePort();
  emu = await startLinkemu({ listenPort: emuPort, targetPort: fx.port, down: 'rate=8mbit,queue-delay=200ms', link: 'delay=10ms' });
  const slow = await fx.browser.context.newPage();
  try {
    await slow.goto(newSession(fx.url.replace('#token=', `#wt_port=${emuPort}&token=`)));
    await waitForPrompt(slow);
    const { path, bytes } = makeFile('big.bin', 6_000_000);
    const download = slow.waitForEvent('download', { timeout: 90000 });
    await typeLine(slow, `tern send ${path}; echo resumed-$?`);
    await until(async () => ((await stats(slow)).download?.bytesDone ?? 0) > 1_500_000, { timeout: 30000, what: 'a quarter of the download' });
    await screenshotsOfState(slow, 'send-downloading');
    const before = (await stats(slow)).download.bytesDone;
    await fx.relay.restart();
    const after = await until(async () => {
      const d = (await stats(slow)).download;
      return d && d.state === 'receiving' && d.bytesDone >= before ? d : null;
    }, { timeout: 30000, what: 'the download to resume' });
    assert.ok(after.bytesDone >= before, `started again from ${after.bytesDone} after ${before}`);
    const got = await download;
    const saved = join(files, 'resumed.bin');
    await got.saveAs(saved);
    assert.equal(sha256(readFileSync(saved)), sha256(bytes), 'identical bytes after the restart');
    await seen(slow, /resumed-0/, 'tern send to succeed across the restart', 60000);
  } finally {
    await slow.close();
    await emu.stop();
    emu = undefined;
  }
});
