// Someone takes the relay's port while it is down. A page with a live session, the relay killed,
// and a listener of the test's own on the same port for 15 s, answering like a relay would (a
// made-up challenge, a WebSocket accepted): it must receive no token and no session state, in any
// header, URL, subprotocol or body, over either transport, and the page says the relay could not
// be verified. Then the real relay comes back and the session goes on, the keys typed meanwhile
// included: the page kept them, and its saved session, sealed under the token, restores.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import {
  freePort, until, screen, stats, waitForPrompt, typeLine, sleep, screenshotsOfState,
} from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';

const fx = browserFixture({ relay: { token: `squat-${randomBytes(12).toString('hex')}` } });

/// A squatter on `port`: records every byte it is sent; answers HTTP like a relay would (any
/// POST with a challenge of made-up hex, anything else 200 `{}`), accepts WebSocket upgrades and
/// keeps reading them.
function squatter(port) {
  const received = [];
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let head = '';
    let upgraded = false;
    socket.on('data', (chunk) => {
      received.push(Buffer.from(chunk));
      if (upgraded) return;
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      const request = head;
      head = '';
      const key = /sec-websocket-key:\s*(\S+)/i.exec(request)?.[1];
      if (key) {
        upgraded = true;
        const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
        socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Protocol: tern\r\n\r\n`);
        return;
      }
      const body = request.startsWith('POST')
        ? JSON.stringify({ nonce: randomBytes(32).toString('hex'), proof: randomBytes(32).toString('hex') })
        : '{}';
      socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    });
  });
  return new Promise((res, rej) => {
    server.once('error', rej);
    server.listen(port, '127.0.0.1', () => res({
      text: () => Buffer.concat(received).toString('latin1'),
      close: () => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(r); }),
    }));
  });
}

/// What must never reach the squatter: the token (as it is, in hex as the old WebSocket
/// subprotocol carried it, in base64), the session's id, what was typed before and during the
/// outage, and the messages that carry session state.
function secrets({ token, session, typed }) {
  return [
    ['the token', token],
    ['the token in hex', Buffer.from(token).toString('hex')],
    ['the token in base64', Buffer.from(token).toString('base64').replace(/=+$/, '')],
    ['the session id', session],
    ...typed.map((t) => [`the typed text ${t}`, t]),
    ['a hello', '"hello"'],
    ['a seed', '"seed"'],
    ['a bearer token', 'Bearer'],
    ['a token subprotocol', 'tern-token'],
  ];
}

for (const transport of ['webtransport', 'websocket']) {
  test(`over ${transport}: a squatter on the relay's port gets no token and no session state, and the page says so`, async () => {
    const { page, relay, token } = fx;
    const deadUdp = await freePort();
    const extra = transport === 'websocket' ? `&wt_port=${deadUdp}` : '';
    // A new document (the address differs from the last test's in its fragment only).
    await page.goto('about:blank');
    await page.goto(`${relay.url.replace('#', '#session=new&')}${extra}`);
    await waitForPrompt(page);
    const before = `before-${transport}-${randomBytes(4).toString('hex')}`;
    await typeLine(page, `echo ${before}-$((6*7))`);
    await until(async () => (await screen(page)).includes(`${before}-42`), { what: 'the echo' });
    const s = await stats(page);
    assert.equal(s.transport, transport);
    const session = s.session;
    assert.ok(session, 'a session id');

    // What a tab keeps in storage is sealed: no key, no session id, no screen in the clear.
    const stored = await page.evaluate(() => [localStorage.getItem('tern.last'), sessionStorage.getItem('tern.session'),
      Object.keys(sessionStorage).join(' ')].join('\n'));
    assert.match(stored, /^tern-sealed-1:/);
    for (const leak of [session, before, token]) assert.ok(!stored.includes(leak), `storage shows ${leak}`);

    await relay.stop('SIGKILL');
    const squat = await squatter(relay.port);
    // Typed while the relay is down: the page keeps it, and must not hand it to the squatter.
    const during = `during-${randomBytes(4).toString('hex')}`;
    try {
      await page.keyboard.type(`echo ${during}`);
      // 15 s of squatting; what the squatter got is judged first, then what the page says.
      const until15s = Date.now() + 15000;
      const notice = page.locator('#notice');
      await notice.waitFor({ state: 'visible', timeout: 15000 }).catch(() => {});
      await sleep(Math.max(0, until15s - Date.now()));
      const got = squat.text();
      for (const [what, secret] of secrets({ token, session, typed: [before, during] })) {
        assert.ok(!got.includes(secret), `the squatter received ${what}:\n${got}`);
      }
      assert.match(got, /POST \S*\/api\/challenge/, 'the page did ask the squatter for a challenge');
      assert.ok(await notice.isVisible(), 'the page tells the person');
      assert.match(await notice.innerText(), /could not be verified/i);
      const after = await stats(page);
      assert.equal(after.phase, 'failed');
      await screenshotsOfState(page, `squat-not-verified-${transport}`);
      console.log(`# the squatter received ${got.length} bytes over ${transport}: ${got.split('\r\n')[0]}`);
    } finally {
      await squat.close();
    }

    // The real relay again: "Try again" continues the same shell, the keys typed meanwhile
    // included (from the tab's sealed saved session).
    await relay.start();
    await page.locator('#notice button', { hasText: 'Try again' }).click();
    await until(async () => {
      const now = await stats(page).catch(() => null);
      return now?.phase === 'live' && now.session === session;
    }, { what: 'the same session, live again' });
    await until(async () => (await screen(page)).includes(`echo ${during}`), { what: `the keys typed while down:\n${await screen(page)}` });
    await page.keyboard.type('-$((6*7))');
    await page.keyboard.press('Enter');
    await until(async () => /during-[0-9a-f]{8}-42/.test(await screen(page)), { what: 'the keys typed while down' });
  });
}
