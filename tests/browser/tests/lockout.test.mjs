// The lock-out attack of issue 32 (finding 2), in the real browser against the real relay: a page
// on another origin (a tiny node server on localhost, the relay on 127.0.0.1) fires 8 hostile
// requests at the relay (no-cors POSTs to /api/history, GETs, a preflighted fetch with a wrong
// token, cross-origin WebSockets with wrong tokens); then 8 wrong tokens come from 127.0.0.1 itself
// (what every client is behind nginx, Caddy or `ssh -L`), and a guesser keeps sending wrong ones.
// The owner's page, opened with the right URL from the same address, connects at once and its
// shell answers. Before the fix the relay refused every request from 127.0.0.1, the right token
// included, for as long as the guessing went on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { join } from 'node:path';
import {
  ARTIFACTS, freePort, until, screen, waitForPrompt, typeLine, sleep, newSession, pageDetail,
} from '../lib/helpers.mjs';
import { browserFixture, randomToken } from '../lib/fixture.mjs';

const fx = browserFixture({ relay: { token: randomToken('lockout-token-') }, relayLog: true });
let foreignPort;

fx.before(async () => {
  // Someone else's page, on another origin, that the person happens to visit.
  foreignPort = await freePort();
  const foreign = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>someone else\'s page</title><p>nothing to see here</p>');
  });
  await new Promise((r) => foreign.listen(foreignPort, '127.0.0.1', r));
  fx.defer(() => foreign.close());
});

/// In the foreign page: 8 hostile requests at the relay; what became of each.
function hostileRequests(port) {
  const base = `http://127.0.0.1:${port}`;
  const body = '{"session":"x","count":1}';
  const settle = (p) => p.then((r) => `answered ${r.type} ${r.status}`, (e) => `failed ${e.name}`);
  const socket = (url, protocols) => new Promise((resolve) => {
    const s = new WebSocket(url, protocols);
    s.onopen = () => { s.close(); resolve('open'); };
    s.onclose = (e) => resolve(`closed ${e.code}`);
    setTimeout(() => resolve('timeout'), 8000);
  });
  return Promise.all([
    settle(fetch(`${base}/api/history`, { method: 'POST', mode: 'no-cors', body })),
    settle(fetch(`${base}/api/history/search`, { method: 'POST', mode: 'no-cors', body })),
    settle(fetch(`${base}/api/info`, { mode: 'no-cors' })),
    settle(fetch(`${base}/api/sessions`, { method: 'POST', mode: 'no-cors', body: 'x' })),
    settle(fetch(`${base}/api/info`, { headers: { authorization: 'Bearer wrong-from-a-page' } })),
    settle(fetch(`${base}/api/history`, {
      method: 'POST', headers: { authorization: 'Bearer wrong-from-a-page' }, body,
    })),
    socket(`ws://127.0.0.1:${port}/ws`, ['tern', 'tern-token.wrong-from-a-page']),
    socket(`ws://127.0.0.1:${port}/ws?token=wrong-from-a-page`, ['tern']),
  ]);
}

/// `GET /api/info` from this process (127.0.0.1, no Origin: a local user or a client behind a
/// proxy) with `token`: the status.
async function apiInfo(token) {
  const r = await fetch(`http://127.0.0.1:${fx.port}/api/info`, { headers: { authorization: `Bearer ${token}` } });
  await r.arrayBuffer();
  return r.status;
}

test('hostile cross-origin requests and wrong tokens from 127.0.0.1 cannot lock the owner out', async () => {
  const { browser, relay, token, port } = fx;

  // 1. A page on another origin fires 8 hostile requests.
  const attacker = await browser.context.newPage();
  await attacker.goto(`http://localhost:${foreignPort}/`);
  const outcomes = await attacker.evaluate(hostileRequests, port);
  console.log(`# hostile cross-origin requests: ${JSON.stringify(outcomes)}`);
  assert.equal(outcomes.length, 8);
  assert.ok(!outcomes.includes('open'), 'no cross-origin WebSocket opened');
  await attacker.close();
  assert.equal(await apiInfo(token), 200, 'the right token right after the foreign page');

  // 2. Eight wrong tokens from 127.0.0.1: the guesser is rate limited...
  const wrong = [];
  for (let i = 0; i < 8; i++) wrong.push(await apiInfo(`wrong-${i}`));
  console.log(`# 8 wrong tokens from 127.0.0.1: ${wrong.join(' ')}`);
  assert.deepEqual(wrong.slice(0, 5), [401, 401, 401, 401, 401], 'five free failures');
  assert.equal(wrong[7], 429, 'then the guesser is rate limited');
  // ... the owner is not.
  assert.equal(await apiInfo(token), 200, 'the right token is served at once');

  // 3. The guesser keeps going while the owner opens the page with the right URL.
  let guessing = true;
  const guessed = [];
  const guesser = (async () => {
    for (let i = 0; guessing; i++) {
      guessed.push(await apiInfo(`still-wrong-${i}`));
      await sleep(200);
    }
  })();
  try {
    const { page } = fx;
    await page.goto(newSession(fx.url));
    await waitForPrompt(page);
    await typeLine(page, 'echo ok-$((6*7))');
    await until(async () => /^ok-42$/m.test(await screen(page)), { what: 'ok-42', detail: pageDetail(page) });
    await page.screenshot({ path: join(ARTIFACTS, 'lockout-owner-served.png') });
  } finally {
    guessing = false;
    await guesser;
  }
  console.log(`# the guesser meanwhile: ${guessed.length} wrong tokens, ${guessed.filter((s) => s === 429).length} rate limited`);
  assert.ok(guessed.includes(429), `the guesser was refused as rate limited meanwhile: ${guessed.join(' ')}`);
  // The foreign page's requests were refused for their Origin, before their token was looked at.
  assert.match(relay.log(), /history request from a foreign Origin refused/);
  assert.match(relay.log(), /websocket from a foreign Origin refused/);
  assert.ok(!relay.log().includes(token), 'the token is not in the relay log');
});
