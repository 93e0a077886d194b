// DNS rebinding against a relay on loopback, in headless Chromium against the real relay. A page
// on a name its author controls (evil.example) has that name re-resolve to 127.0.0.1 (here:
// Chromium's host-resolver rules; the page itself is what evil.example served before, here a
// route). Its requests to the relay are then same-origin for the browser, with a matching Origin
// and Host, so the Origin check cannot refuse them. The relay answers only to loopback names and
// addresses: the page's fetches of /api/info and / get 421 and its WebSocket does not open. Its
// wrong tokens, sent from 127.0.0.1 too, are not counted either, so the person's own page is not
// locked out by them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { freePort, launchBrowser, startRelay, stopRelay, tempDir } from '../lib/helpers.mjs';
import { randomToken } from '../lib/fixture.mjs';

test('a DNS-rebinding page gets 421 from a loopback relay and cannot lock its person out', async (t) => {
  const port = await freePort();
  const token = randomToken('rebind-');
  const relay = await startRelay({
    port, token, stateDir: tempDir('tern-rebind-'), args: ['--bridge', '--allow', '127.0.0.1:1'],
  });
  t.after(() => stopRelay(relay));
  const browser = await launchBrowser({
    browser: 'chromium',
    args: [
      '--host-resolver-rules=MAP evil.example 127.0.0.1',
      // Chromium's own partial defence (Private/Local Network Access: a public page's requests to
      // loopback) is off: Firefox and Safari have none, and it depends on how the page was
      // loaded; the relay must hold by itself.
      '--disable-features=BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults,LocalNetworkAccessChecks',
    ],
  });
  t.after(() => browser.close());
  const { page } = browser;
  const evil = `http://evil.example:${port}`;
  await page.route(`${evil}/attack.html`, (r) => r.fulfill({
    contentType: 'text/html', body: '<!doctype html><title>a page that rebinds its name</title>',
  }));
  await page.goto(`${evil}/attack.html`);
  const got = await page.evaluate(async () => {
    const guesses = [];
    for (let i = 0; i < 8; i++) {
      guesses.push((await fetch('/api/info', { headers: { authorization: `Bearer guess-${i}` } })).status);
    }
    const pageStatus = (await fetch('/')).status;
    const ws = await new Promise((resolve) => {
      const s = new WebSocket(`ws://${location.host}/ws`, ['tern', 'tern-token.guess']);
      s.onopen = () => { s.close(); resolve('open'); };
      s.onclose = (e) => resolve(`closed ${e.code}`);
      setTimeout(() => resolve('timeout'), 8000);
    });
    return { guesses, pageStatus, ws };
  });
  assert.deepEqual(got.guesses, Array(8).fill(421), 'the API refuses the rebound name before the token');
  assert.equal(got.pageStatus, 421, 'the page too');
  assert.notEqual(got.ws, 'open', 'the WebSocket upgrade is refused');
  // The person's own page (127.0.0.1) gets in at once: the guesses never reached the token check.
  const own = await fetch(`http://127.0.0.1:${port}/api/info`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(own.status, 200);
  assert.match(relay.log(), /does not answer to refused \(421\)|host name this relay does not answer to/);
  assert.match(relay.log(), /evil\.example/);
});
