// Deployment shapes end to end in headless Chromium: the real tern-relay (spawn mode),
// mosh-server and a shell.
//
// 1. `--tls-cert/--tls-key` with a certificate from a test CA made here with openssl (never
//    committed keys; the leaf's key in SEC1 form, "EC PRIVATE KEY", as some tools write it).
//    Chromium trusts that CA the ordinary way: it is added as a trusted root to the NSS database
//    of a fresh $HOME ($HOME/.pki/nssdb, where Chromium on Linux reads locally trusted roots) with
//    certutil from libnss3-tools; nothing is hash-pinned (`/api/info` says
//    `cert_self_signed: false` and lists no hash). A browser whose $HOME lacks the CA refuses the
//    page, so the trust comes from that database alone. Chromium then loads the page over HTTPS,
//    but by default refuses QUIC (so WebTransport) to a certificate under a locally added root,
//    and the session runs over the WebSocket; with `--webtransport-developer-mode` (the
//    chrome://flags switch for private CAs) the session runs over WebTransport, which still
//    verifies the chain and the name (a name the certificate lacks is refused). A certificate
//    from a public CA (Let's Encrypt, `--acme`) needs neither.
// 2. `--base-path /tern/` behind Debian's nginx, configured as docs/DEPLOY.md says: the page at
//    /tern/ reaches /tern/api/info and, with WebTransport blocked (`#wt_port=` pointing at a dead
//    UDP port), the WebSocket at /tern/ws through the proxy; nginx sends /tern to /tern/.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { writeFileSync, existsSync, rmSync, readFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  ARTIFACTS, freePort, launchBrowser, until, screen, stats, waitForPrompt, typeLine, tempDir, sleep,
  newSession,
} from '../lib/helpers.mjs';
import { browserFixture, randomToken } from '../lib/fixture.mjs';

// Each test starts its own relays and browsers (each deployment shape its own): the fixture only
// ends them.
const fx = browserFixture({ relay: false, browser: false });
const token = randomToken();

function need(path, pkg) {
  if (!existsSync(path)) throw new Error(`${path} is missing (apt-get install -y ${pkg}, or scripts/setup.sh)`);
}

/// A CA and a leaf for localhost/127.0.0.1 signed by it, with openssl; the leaf's key in SEC1.
function makeCerts(dir) {
  const ossl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  ossl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '30', '-subj', '/CN=Tern browser test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  ossl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'leaf.p8.key', '-out', 'leaf.csr', '-subj', '/CN=localhost');
  writeFileSync(join(dir, 'ext.cnf'), [
    'subjectAltName=DNS:localhost,IP:127.0.0.1',
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature',
    'extendedKeyUsage=serverAuth', '',
  ].join('\n'));
  const serial = '0x' + execFileSync('openssl', ['rand', '-hex', '8']).toString().trim();
  ossl('x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-set_serial', serial,
    '-out', 'leaf.pem', '-days', '7', '-extfile', 'ext.cnf');
  ossl('ec', '-in', 'leaf.p8.key', '-out', 'leaf.key');
  assert.match(readFileSync(join(dir, 'leaf.key'), 'utf8'), /BEGIN EC PRIVATE KEY/);
  return { ca: join(dir, 'ca.pem'), cert: join(dir, 'leaf.pem'), key: join(dir, 'leaf.key') };
}

/// A fresh $HOME whose NSS database trusts `caPem` as a root (or an empty one without it).
function homeTrusting(caPem) {
  const home = tempDir('tern-home-');
  const db = join(home, '.pki', 'nssdb');
  mkdirSync(db, { recursive: true });
  execFileSync('certutil', ['-d', `sql:${db}`, '-N', '--empty-password']);
  if (caPem) execFileSync('certutil', ['-d', `sql:${db}`, '-A', '-t', 'C,,', '-n', 'Tern browser test CA', '-i', caPem]);
  return home;
}

/// Headless Chromium with a fresh profile and the given $HOME (launchBrowser's flags). `localhost`
/// resolves to 127.0.0.1 only, where the relay listens (Chromium would also try ::1, and a
/// WebTransport attempt there fails instead of falling back to IPv4); so does `wrong-name.test`,
/// a name the certificate does not carry. `webtransportDevMode`: Chromium refuses QUIC, and so
/// WebTransport, to a certificate that chains to a locally added root instead of a public one
/// (the first test shows it); `--webtransport-developer-mode` (chrome://flags) lifts only that
/// rule, the chain and the name are still verified (the first test shows that too).
async function chromiumWithHome(home, { webtransportDevMode = false } = {}) {
  return launchBrowser({
    browser: 'chromium',
    env: { HOME: home },
    args: [
      '--host-resolver-rules=MAP localhost 127.0.0.1,MAP wrong-name.test 127.0.0.1',
      ...(webtransportDevMode ? ['--webtransport-developer-mode'] : []),
    ],
  });
}

/// Whether a bare WebTransport to `host:port` opens from the page ('open' or the error).
const wtOpens = (page, host, port) => page.evaluate(async ([h, p]) => {
  const t = new WebTransport(`https://${h}:${p}/wt`);
  try { await t.ready; t.close(); return 'open'; } catch (e) { return String(e); }
}, [host, port]);

/// `/api/info` as the page sees it, from the page's own directory.
const pageInfo = (page) => page.evaluate(async (t) => {
  const r = await fetch('api/info', { headers: { Authorization: `Bearer ${t}` } });
  return { status: r.status, body: await r.json() };
}, token);

before(() => {
  need('/usr/bin/certutil', 'libnss3-tools');
  need('/usr/sbin/nginx', 'nginx');
});

test('--tls-cert from a CA the browser trusts: HTTPS page and WebTransport without hash pinning', async () => {
  const dir = tempDir('tern-tls-');
  fx.defer(() => rmSync(dir, { recursive: true, force: true }));
  const { ca, cert, key } = makeCerts(dir);
  const relay = await fx.addRelay({ token, args: ['--tls-cert', cert, '--tls-key', key] });
  const { port } = relay;
  assert.equal(relay.url, `https://localhost:${port}/#token=${token}`, 'the URL names the certificate');

  // Without the CA: the page does not load.
  const bareHome = homeTrusting(null);
  const bare = await chromiumWithHome(bareHome);
  fx.defer(async () => { await bare.close(); rmSync(bareHome, { recursive: true, force: true }); });
  await assert.rejects(bare.page.goto(relay.url), /ERR_CERT_AUTHORITY_INVALID/);

  // With it, Chromium's default: the page loads, but QUIC refuses the private root, so the
  // session falls back to the WebSocket (what a person with a private CA sees, docs/DEPLOY.md).
  const home = homeTrusting(ca);
  const plain = await chromiumWithHome(home);
  fx.defer(() => plain.close());
  await plain.page.goto(newSession(relay.url));
  await waitForPrompt(plain.page);
  assert.equal((await stats(plain.page)).transport, 'websocket');
  assert.notEqual(await wtOpens(plain.page, 'localhost', port), 'open');
  await plain.close();

  // With WebTransport's developer mode: the page, then a session over WebTransport verified
  // against the CA.
  const browser = await chromiumWithHome(home, { webtransportDevMode: true });
  fx.defer(async () => {
    if (process.exitCode) console.log(browser.consoleLog.join('\n'));
    await browser.close();
    rmSync(home, { recursive: true, force: true });
  });
  const { page } = browser;
  const response = await page.goto(newSession(relay.url));
  assert.equal(response.status(), 200);
  assert.equal(await page.evaluate(() => location.protocol), 'https:');
  await waitForPrompt(page);
  const info = await pageInfo(page);
  assert.equal(info.status, 200);
  assert.equal(info.body.cert_self_signed, false);
  assert.deepEqual(info.body.cert_hashes, [], 'no serverCertificateHashes for a CA certificate');
  const s = await stats(page);
  assert.equal(s.transport, 'webtransport', `the session runs over WebTransport (${JSON.stringify(s)})`);
  // Verified, not waved through: a name the certificate lacks is refused.
  assert.equal(await wtOpens(page, 'localhost', port), 'open');
  // The page's CSP (connect-src) would stop a connection to another name before TLS is tried:
  // asked from a document of the relay whose policy is bypassed, so the refusal is the name check's.
  const unpoliced = await page.context().newPage();
  await (await page.context().newCDPSession(unpoliced)).send('Page.setBypassCSP', { enabled: true });
  await unpoliced.goto(`https://localhost:${port}/icon.svg`);
  assert.notEqual(await wtOpens(unpoliced, 'wrong-name.test', port), 'open', 'the name is checked');
  await unpoliced.close();
  await typeLine(page, 'echo tls-$((6*7))');
  await until(async () => /^tls-42$/m.test(await screen(page)), { what: 'tls-42' });
  await page.screenshot({ path: join(ARTIFACTS, 'browser-tls-ca.png') });
});

/// nginx in the foreground with a private prefix, proxying `/tern/` to the relay as docs/DEPLOY.md says.
async function startNginx(relayPort) {
  const dir = tempDir('tern-nginx-');
  const port = await freePort();
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
        location /tern/ {
            proxy_pass http://127.0.0.1:${relayPort};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-Proto $scheme;
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

test('--base-path /tern/ behind nginx: page, /api/info and the WebSocket under the base', async () => {
  const relay = await fx.addRelay({ token, args: ['--base-path', '/tern/'] });
  const { port } = relay;
  const deadUdpPort = await freePort();
  assert.equal(relay.url, `http://127.0.0.1:${port}/tern/#token=${token}`);
  const nginx = await startNginx(port);
  fx.defer(() => nginx.stop());
  const home = homeTrusting(null);
  const browser = await chromiumWithHome(home);
  fx.defer(async () => {
    if (process.exitCode) console.log(browser.consoleLog.join('\n'), nginx.log());
    await browser.close();
    rmSync(home, { recursive: true, force: true });
  });
  const { page } = browser;
  const base = `http://127.0.0.1:${nginx.port}/tern/`;

  // WebTransport blocked: the page must find the WebSocket at /tern/ws through nginx.
  await page.goto(`${base}#session=new&token=${token}&wt_port=${deadUdpPort}`);
  await waitForPrompt(page);
  const s = await stats(page);
  assert.equal(s.transport, 'websocket', `the fallback through the proxy carries the session (${JSON.stringify(s)})`);
  const info = await pageInfo(page);
  assert.equal(info.status, 200);
  assert.equal(info.body.webtransport_path, '/wt');
  await typeLine(page, 'echo base-$((6*7))');
  await until(async () => /^base-42$/m.test(await screen(page)), { what: 'base-42' });
  await page.screenshot({ path: join(ARTIFACTS, 'browser-base-path.png') });

  // nginx sends /tern to /tern/, where the page's relative URLs resolve under the base.
  const redirected = await page.goto(`http://127.0.0.1:${nginx.port}/tern`);
  assert.equal(redirected.status(), 200);
  assert.equal(new URL(page.url()).pathname, '/tern/');
});
