// The page as a security boundary (docs/SECURITY.md), in the real browser against the real relay:
// the page runs a whole session under its Content-Security-Policy without one violation (wasm,
// xterm.js, WebTransport to the relay's UDP port) and the token never reaches the relay's log; a
// page of another origin (a tiny node server on localhost, the relay on 127.0.0.1) that frames the
// terminal gets no terminal, and its WebSocket and WebTransport handshakes are refused, even when
// it knows the token and the certificate hashes. The same attempts from the relay's own page work.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { join } from 'node:path';
import {
  ARTIFACTS, freePort, until, screen, stats, waitForPrompt, typeLine, sleep, newSession,
} from '../lib/helpers.mjs';
import { browserFixture, randomToken } from '../lib/fixture.mjs';

const fx = browserFixture({ relay: { token: randomToken('sec-token-') }, relayLog: true });
let foreignPort;

fx.before(async () => {
  // The other origin: a page that frames the terminal (with the token: the worst case).
  foreignPort = await freePort();
  const foreign = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><title>someone else's page</title>
<body style="margin:0;font:16px sans-serif;background:#fde">
<p style="margin:8px">A page on http://localhost:${foreignPort} framing the terminal of 127.0.0.1:${fx.port}:</p>
<iframe id="victim" src="${newSession(fx.url)}" style="width:900px;height:520px;border:3px solid #c00"></iframe>
</body>`);
  });
  await new Promise((r) => foreign.listen(foreignPort, '127.0.0.1', r));
  fx.defer(() => foreign.close());
});

/// Collects the document's CSP violations in `window.__csp` from its first script on.
function watchViolations() {
  window.__csp = [];
  document.addEventListener('securitypolicyviolation', (e) => {
    window.__csp.push(`${e.effectiveDirective} blocked ${e.blockedURI || '(inline)'} at ${e.sourceFile}:${e.lineNumber}`);
  });
}

/// In the page's own context: a WebSocket to the relay's /ws and a WebTransport to its /wt, as
/// the page opens them; what became of each (`open` / `ready`, or why not).
function handshakes({ wsUrl, wtUrl, token, hashes }) {
  const ws = new Promise((resolve) => {
    let s;
    try {
      s = new WebSocket(wsUrl, ['tern', `tern-token.${token}`]);
    } catch (e) {
      return resolve(`threw ${e.name}`);
    }
    s.onopen = () => { s.close(); resolve('open'); };
    s.onclose = (e) => resolve(`closed ${e.code}`);
    setTimeout(() => resolve('timeout'), 8000);
  });
  const wt = (async () => {
    let t;
    try {
      t = new WebTransport(wtUrl, {
        serverCertificateHashes: hashes.map((h) => ({
          algorithm: 'sha-256', value: Uint8Array.from(atob(h), (c) => c.charCodeAt(0)),
        })),
      });
    } catch (e) {
      return `threw ${e.name}`;
    }
    const timeout = new Promise((r) => setTimeout(() => r('timeout'), 8000));
    const outcome = await Promise.race([t.ready.then(() => 'ready', (e) => `refused: ${e.message}`), timeout]);
    try { t.close(); } catch {}
    return outcome;
  })();
  return Promise.all([ws, wt]).then(([ws, wt]) => ({ ws, wt }));
}

async function certHashes() {
  const r = await fetch(`http://127.0.0.1:${fx.port}/api/info`, { headers: { authorization: `Bearer ${fx.token}` } });
  return (await r.json()).cert_hashes;
}

/// The relay's own page, its CSP violations collected from its first script on: the response.
const ownPage = fx.step("the relay's page, watched for CSP violations", async () => {
  await fx.page.addInitScript(watchViolations);
  return fx.page.goto(newSession(fx.url));
});

test('the page runs a session under its policy with no violation, and the token stays out of the log', async () => {
  const response = await ownPage();
  const { page, relay, token } = fx;
  const h = response.headers();
  assert.match(h['content-security-policy'], /script-src 'self' 'wasm-unsafe-eval'/);
  assert.match(h['content-security-policy'], /frame-ancestors 'none'/);
  assert.equal(h['x-frame-options'], 'DENY');
  assert.equal(h['referrer-policy'], 'no-referrer');
  assert.equal(h['cache-control'], 'no-store');
  await waitForPrompt(page);
  await typeLine(page, 'echo csp-$((6*7)); printf "\\033[38;2;255;100;0mtrue colour\\033[0m\\n"');
  await until(async () => /^csp-42$/m.test(await screen(page)), { what: 'csp-42' });
  // The settings panel, and a look at what the page holds, under the same policy.
  await page.click('#gear');
  await page.waitForSelector('#settings', { state: 'visible' });
  await page.keyboard.press('Escape');
  const s = await stats(page);
  assert.equal(s.transport, 'webtransport', 'connect-src lets WebTransport reach the relay\'s UDP port');
  await sleep(500);
  const violations = await page.evaluate(() => window.__csp);
  assert.deepEqual(violations, [], 'no CSP violation in a whole session');
  // The token reached the relay (hello, /api/*), never its log.
  assert.ok(relay.log().includes('bridging'), relay.log());
  assert.ok(!relay.log().includes(token), 'the token is not in the relay log');
});

test('another origin cannot frame the terminal, and its WebSocket and WebTransport are refused', async () => {
  await ownPage();
  const { page, browser, relay, token, port } = fx;
  const hashes = await certHashes();
  const wsUrl = `ws://127.0.0.1:${port}/ws`;
  const wtUrl = `https://127.0.0.1:${port}/wt`;
  const attacker = await browser.context.newPage();
  const attackerLog = [];
  attacker.on('console', (m) => attackerLog.push(m.text()));
  await attacker.goto(`http://localhost:${foreignPort}/`);
  await sleep(2500);
  await attacker.screenshot({ path: join(ARTIFACTS, 'security-framed.png') });
  // The frame holds no terminal: the browser refused to render the relay's page in it.
  const frames = attacker.frames().filter((f) => f !== attacker.mainFrame());
  assert.equal(frames.length, 1, 'one child frame');
  const inFrame = await frames[0].evaluate(() => ({
    tern: typeof window.tern,
    terminal: !!document.querySelector('#terminal .xterm'),
    href: location.href,
  })).catch((e) => ({ tern: 'undefined', terminal: false, href: `not evaluable: ${e.message}` }));
  assert.equal(inFrame.tern, 'undefined', `no Tern page in the frame (${inFrame.href})`);
  assert.equal(inFrame.terminal, false);
  if (browser.name === 'chromium') {
    // Blocked for the policy's reason, not some other failure.
    assert.ok(attackerLog.some((l) => /frame-ancestors 'none'/.test(l)), attackerLog.join('\n'));
  }

  // Its own WebSocket and WebTransport, with the token and the hashes: refused by the relay.
  const fromForeign = await attacker.evaluate(handshakes, { wsUrl, wtUrl, token, hashes });
  assert.notEqual(fromForeign.ws, 'open', `WebSocket from another origin: ${fromForeign.ws}`);
  assert.match(fromForeign.wt, /^refused/, `WebTransport from another origin: ${fromForeign.wt}`);
  await until(() => /webtransport connect from a foreign Origin refused.*localhost:/.test(relay.log())
    && /websocket from a foreign Origin refused.*localhost:/.test(relay.log()),
  { what: 'both refusals in the relay log', detail: () => relay.log() });

  // The same handshakes from the relay's own page go through (under its CSP).
  const fromOwn = await page.evaluate(handshakes, { wsUrl, wtUrl, token, hashes });
  assert.deepEqual(fromOwn, { ws: 'open', wt: 'ready' });
  assert.deepEqual(await page.evaluate(() => window.__csp), []);
  assert.ok(!relay.log().includes(token), 'the token is not in the relay log');
  await attacker.close();
});

test('styles need \'unsafe-inline\': without it xterm.js\'s style elements are refused (tighten the policy when this fails)', async (t) => {
  const { browser, port } = fx;
  if (browser.name !== 'chromium') return t.skip('needs playwright\'s request routing');
  const p = await browser.context.newPage();
  await p.addInitScript(watchViolations);
  // The page's service worker (registered by the first test's page) would answer the navigation
  // from its cache, where the route below does not reach: this page goes to the network.
  await fx.page.evaluate(async () => {
    for (const r of await navigator.serviceWorker?.getRegistrations() ?? []) await r.unregister();
  });
  // The relay's own policy with styles from files only.
  await p.route(`http://127.0.0.1:${port}/`, async (route) => {
    const r = await route.fetch();
    const csp = r.headers()['content-security-policy'];
    assert.match(csp, /style-src 'self' 'unsafe-inline';/);
    await route.fulfill({
      response: r,
      headers: { ...r.headers(), 'content-security-policy': csp.replace("style-src 'self' 'unsafe-inline'", "style-src 'self'") },
    });
  });
  await p.goto(newSession(fx.url).replace('#', '#renderer=dom&'));
  // Not waiting for a prompt: without its styles the terminal may not get that far.
  await sleep(5000);
  const violations = await p.evaluate(() => window.__csp);
  const byDirective = {};
  for (const v of violations) {
    const d = v.split(' ')[0];
    byDirective[d] = (byDirective[d] ?? 0) + 1;
  }
  console.log(`# style-src 'self' alone, DOM renderer: ${violations.length} violations ${JSON.stringify(byDirective)}`);
  for (const v of new Set(violations)) console.log(`#   ${v}`);
  await p.screenshot({ path: join(ARTIFACTS, 'security-no-inline-styles.png') });
  assert.ok(byDirective['style-src-elem'] > 0, 'xterm.js writes <style> elements');
  await p.close();
});
