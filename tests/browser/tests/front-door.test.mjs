// The page behind a trusted front door (issue 35 items 2 and 3), in headless Chromium: Debian's
// nginx logs people in (basic auth) and names them to the relay in X-Forwarded-User
// (`--identity-header X-Forwarded-User --trust-proxy 127.0.0.2`, nginx connecting from
// 127.0.0.2). The page has no token in its URL: it finds the relay answering without one, and
// runs over the WebSocket through nginx (WebTransport's CONNECT would not pass the proxy).
// Alice and Bob each start a session; each sees only their own in the session list (the API
// and the page's chooser); the owner's token sees both. The same header sent straight to the
// relay, by a script and by a browser, gets no session. Screenshots of the page behind the front
// door, dark and light. Fails, never skips, without nginx.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync, readFileSync, rmSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import {
  freePort, until, screen, stats, waitForPrompt, typeLine, tempDir, sleep, screenshotsOfState,
} from '../lib/helpers.mjs';
import { browserFixture, randomToken } from '../lib/fixture.mjs';

const fx = browserFixture({ relay: false, browser: false });
const token = randomToken('front-door-');
const USERS = { alice: 'wonderland', bob: 'builder' };

before(() => {
  if (!existsSync('/usr/sbin/nginx')) throw new Error('/usr/sbin/nginx is missing (apt-get install -y nginx, or scripts/setup.sh)');
});

/// nginx in the foreground with a private prefix: basic auth for USERS, the login passed on as
/// X-Forwarded-User (replacing any the client sent), connecting to the relay from 127.0.0.2.
async function startFrontDoor(relayPort) {
  const dir = tempDir('tern-front-door-');
  const port = await freePort();
  writeFileSync(join(dir, 'htpasswd'), Object.entries(USERS).map(([u, p]) => `${u}:{PLAIN}${p}\n`).join(''));
  writeFileSync(join(dir, 'nginx.conf'), `
worker_processes 1;
daemon off;
master_process off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log info;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path ${dir}/body;
    proxy_temp_path ${dir}/proxy;
    fastcgi_temp_path ${dir}/fastcgi;
    uwsgi_temp_path ${dir}/uwsgi;
    scgi_temp_path ${dir}/scgi;
    map $http_upgrade $connection_upgrade {
        default upgrade;
        ''      close;
    }
    server {
        listen 127.0.0.1:${port};
        location / {
            auth_basic "tern";
            auth_basic_user_file ${dir}/htpasswd;
            proxy_pass http://127.0.0.1:${relayPort};
            proxy_bind 127.0.0.2;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-User $remote_user;
            proxy_read_timeout 1h;
            proxy_buffering off;
        }
    }
}
`);
  const child = spawn('/usr/sbin/nginx', ['-p', dir, '-e', 'stderr', '-c', join(dir, 'nginx.conf')], { stdio: 'ignore' });
  await until(async () => {
    try { return (await fetch(`http://127.0.0.1:${port}/`)).status > 0; } catch { return false; }
  }, { what: 'nginx listening', timeout: 10000 });
  return {
    port,
    log: () => { try { return readFileSync(join(dir, 'error.log'), 'utf8'); } catch { return ''; } },
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(3000)]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/// Chromium logged in as `user` (playwright answers the proxy's basic-auth challenge, as a
/// person typing into the browser's login box), or with no login and `headers` on every request.
async function chromiumAs(user, headers = undefined) {
  const profile = mkdtempSync(join(tmpdir(), 'tern-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1100, height: 700 },
    ...(user ? { httpCredentials: { username: user, password: USERS[user] } } : {}),
    ...(headers ? { extraHTTPHeaders: headers } : {}),
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  context.on('page', (p) => p.on('dialog', (d) => (d.type() === 'beforeunload' ? d.accept() : d.dismiss())));
  const page = context.pages()[0] ?? await context.newPage();
  page.on('dialog', (d) => (d.type() === 'beforeunload' ? d.accept() : d.dismiss()));
  const consoleLog = [];
  page.on('console', (m) => consoleLog.push(`${user}: ${m.type()}: ${m.text()}`));
  fx.defer(async () => {
    if (process.exitCode) console.log(consoleLog.join('\n'));
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  });
  return { context, page };
}

/// The session list `page` gets from the relay (through whatever front it was loaded from), as
/// the page asks it: no token.
const listed = (page) => page.evaluate(async () => {
  const r = await fetch('api/sessions', { cache: 'no-store' });
  return { status: r.status, ids: r.ok ? (await r.json()).sessions.map((s) => s.id) : [] };
});

/// A new session in `page` at the front door, titled `title`: its id.
async function startSession(page, base, title) {
  await page.goto(`${base}#session=new`);
  await waitForPrompt(page);
  assert.equal(await page.evaluate(() => document.body.dataset.frontDoor), '1', 'the page runs without a token');
  const s = await stats(page);
  assert.equal(s.transport, 'websocket', `the WebSocket through nginx carries it (${JSON.stringify(s)})`);
  await typeLine(page, `printf '\\033]0;${title}\\007'; echo ${title}-$((6*7))`);
  await until(async () => new RegExp(`^${title}-42$`, 'm').test(await screen(page)), { what: `${title}-42` });
  return s.session;
}

test('behind nginx with basic auth: no token, each person sees only their own sessions, a spoofed header gets nothing', async () => {
  const relay = await fx.addRelay({
    token,
    args: ['--identity-header', 'X-Forwarded-User', '--trust-proxy', '127.0.0.2'],
  });
  const nginx = await startFrontDoor(relay.port);
  fx.defer(() => nginx.stop());
  fx.defer(() => { if (process.exitCode) console.log(nginx.log(), relay.log()); });
  const base = `http://127.0.0.1:${nginx.port}/`;

  const alice = await chromiumAs('alice');
  const bob = await chromiumAs('bob');
  const a = await startSession(alice.page, base, 'alice-shell');
  const b = await startSession(bob.page, base, 'bob-shell');
  assert.ok(a && b && a !== b, `two sessions (${a}, ${b})`);

  // The list: each their own; the owner's token, straight to the relay, both.
  assert.deepEqual(await listed(alice.page), { status: 200, ids: [a] });
  assert.deepEqual(await listed(bob.page), { status: 200, ids: [b] });
  const owner = await fetch(`http://127.0.0.1:${relay.port}/api/sessions`, { headers: { Authorization: `Bearer ${token}` } });
  assert.deepEqual((await owner.json()).sessions.map((s) => s.id).sort(), [a, b].sort());

  // The page's chooser (a second tab with nothing saved): Alice's shell, not Bob's.
  const chooser = await alice.context.newPage();
  await chooser.goto(base);
  await chooser.waitForSelector('#chooser:not([hidden])');
  const rows = await chooser.$$eval('#chooser-list li .name', (els) => els.map((e) => e.textContent));
  assert.equal(rows.length, 1, `one row: ${rows}`);
  assert.match(rows[0], /^alice-shell/);
  await screenshotsOfState(chooser, 'front-door-chooser');
  await chooser.close();
  await screenshotsOfState(alice.page, 'front-door-session');

  // Bob names Alice's session: refused in words, and his page keeps nothing of it.
  const steal = await bob.context.newPage();
  await steal.goto(`${base}#session=${a}`);
  await steal.waitForSelector('#notice:not([hidden])');
  const words = await steal.$eval('#notice', (n) => n.textContent);
  assert.match(words, /Not your session/);
  assert.match(words, /someone else/);
  assert.doesNotMatch(await screen(steal), /alice-shell-42/);
  await screenshotsOfState(steal, 'front-door-not-yours');
  await steal.close();
  // Alice's session was not taken from her: she still types into it.
  await typeLine(alice.page, 'echo still-$((40+2))');
  await until(async () => /^still-42$/m.test(await screen(alice.page)), { what: "alice's session still hers" });

  // Straight to the relay with the header of a trusted proxy: ignored, so nothing without a token.
  const spoofed = await fetch(`http://127.0.0.1:${relay.port}/api/sessions`, {
    headers: { 'X-Forwarded-User': 'alice', Origin: `http://127.0.0.1:${relay.port}` },
  });
  assert.equal(spoofed.status, 401);
  const mallory = await chromiumAs(null, { 'X-Forwarded-User': 'alice' });
  await mallory.page.goto(`http://127.0.0.1:${relay.port}/#session=${a}`);
  await mallory.page.waitForSelector('#notice:not([hidden])');
  assert.match(await mallory.page.$eval('#notice', (n) => n.textContent), /No token/);
  assert.deepEqual(await listed(mallory.page), { status: 401, ids: [] });
  assert.equal(await mallory.page.evaluate(() => document.body.classList.contains('live')), false);

  const audit = readFileSync(join(relay.stateDir, 'audit.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const has = (want) => audit.some((l) => Object.entries(want).every(([k, v]) => l[k] === v));
  assert.ok(has({ event: 'attach', who: 'proxy:alice', session: a }), JSON.stringify(audit));
  assert.ok(has({ event: 'refused', who: 'proxy:bob', session: a, reason: "another identity's session" }), JSON.stringify(audit));
  assert.ok(audit.some((l) => l.event === 'refused' && /not a trusted proxy/.test(l.reason)), JSON.stringify(audit));
});
