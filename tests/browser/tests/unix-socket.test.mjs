// The recommended tunnel layout: tern-relay on a Unix socket (`--listen unix:PATH`), reached as
// `ssh -L 7480:PATH host` reaches it: a local TCP port forwarded to the socket (here by the test,
// as ssh would). The page goes straight to the WebSocket (the relay says it has no WebTransport),
// proves the token, and the shell answers; nothing listens on a port of the relay's own.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import {
  relayBinary, freePort, until, screen, stats, waitForPrompt, typeLine, tempDir, cleanupState,
  screenshotsOfState, tcpForwarder,
} from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';

const fx = browserFixture({ relay: false });
const stateDir = tempDir('tern-unix-state-');
const socketDir = tempDir('tern-unix-sock-');
const socketPath = join(socketDir, 'run', 'tern.sock');
const token = `unix-${randomBytes(12).toString('hex')}`;
let relay, forwarder, port;

fx.before(async () => {
  relay = spawn(relayBinary(), ['--listen', `unix:${socketPath}`, '--state-dir', stateDir, '--print-url'], {
    env: { ...process.env, TERN_RELAY_TOKEN: token, RUST_LOG: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  relay.stderr.on('data', (d) => { log += d; });
  await new Promise((res, rej) => {
    let out = '';
    const timer = setTimeout(() => rej(new Error(`no URL:\n${out}\n${log}`)), 20000);
    relay.stdout.on('data', (d) => { out += d; if (/Open \S+/.test(out)) { clearTimeout(timer); res(); } });
    relay.once('exit', (code) => rej(new Error(`tern-relay exited ${code}:\n${log}`)));
  });
  port = await freePort();
  // What `ssh -L PORT:SOCKET` does.
  forwarder = await tcpForwarder(port, socketPath);
});

after(async () => {
  await forwarder?.close();
  relay?.kill('SIGTERM');
  cleanupState(stateDir);
});

test('through a tunnel to the relay\'s Unix socket the page proves the token and the shell answers over the WebSocket', async () => {
  const { page } = fx;
  await page.goto(`http://localhost:${port}/#session=new&token=${token}`);
  await waitForPrompt(page);
  const s = await stats(page);
  assert.equal(s.transport, 'websocket');
  assert.equal(s.connects, 1, 'one attempt: no WebTransport tried first');
  await typeLine(page, 'echo unix-$((6*7))');
  await until(async () => /^unix-42$/m.test(await screen(page)), { what: 'unix-42' });
  // The WebSocket is this layout's way, not a fallback: nothing says something is missing.
  assert.notEqual(await page.evaluate(() => document.getElementById('pill').textContent), 'TCP fallback');
  await screenshotsOfState(page, 'unix-socket-session');
});
