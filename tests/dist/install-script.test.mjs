// install.sh, the `curl -fsSL .../install.sh | sh` installer, against the release in dist/ (made by
// `npm run dist`), served by a local HTTP server as a release mirror. HOME, the XDG directories and
// the prefix are temporary; systemctl is never called (TERN_INSTALL_SYSTEMCTL=0).
//   node --test tests/dist/install-script.test.mjs
// It runs under /bin/sh (dash on Debian), as `curl | sh` does, reading the script from stdin.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dist = path.join(repo, 'dist');
const hostTarget = { x64: 'x86_64-unknown-linux-musl', arm64: 'aarch64-unknown-linux-musl' }[process.arch];
const tarballName = `tern-relay-${hostTarget}.tar.gz`;
const noDist = fs.existsSync(path.join(dist, tarballName)) && fs.existsSync(path.join(dist, 'SHA256SUMS'))
  ? false
  : `dist/${tarballName} missing: run npm run dist first`;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tern-install-'));
const home = path.join(tmp, 'home');
const binDir = path.join(home, '.local/bin');
const installed = path.join(binDir, 'tern-relay');
const configHome = path.join(home, '.config');
const unitPath = path.join(configHome, 'systemd/user/tern-relay.service');
const tokenPath = path.join(configHome, 'tern-relay/token');
fs.mkdirSync(home, { recursive: true });

const env = { ...process.env };
delete env.DBUS_SESSION_BUS_ADDRESS;
delete env.TERN_BASE_URL;
Object.assign(env, {
  HOME: home,
  XDG_CONFIG_HOME: configHome,
  XDG_STATE_HOME: path.join(home, '.local/state'),
  XDG_CACHE_HOME: path.join(home, '.cache'),
  XDG_DATA_HOME: path.join(home, '.local/share'),
  XDG_RUNTIME_DIR: path.join(tmp, 'no-runtime-dir'),
  TERN_INSTALL_SYSTEMCTL: '0',
});

// The mirror: a plain HTTP server over a directory, as a release host serves files.
let mirror, mirrorUrl, mirrorDir;
before(async () => {
  mirrorDir = path.join(tmp, 'mirror');
  fs.mkdirSync(mirrorDir);
  if (!noDist) for (const f of fs.readdirSync(dist)) fs.copyFileSync(path.join(dist, f), path.join(mirrorDir, f));
  mirror = http.createServer((req, res) => {
    const file = path.join(mirrorDir, path.basename(decodeURIComponent(req.url.split('?')[0])));
    fs.readFile(file, (err, body) => {
      if (err) { res.writeHead(404).end('not found\n'); return; }
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(body);
    });
  });
  await new Promise((r) => mirror.listen(0, '127.0.0.1', r));
  mirrorUrl = `http://127.0.0.1:${mirror.address().port}`;
});
after(() => {
  mirror?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/// Runs install.sh as `curl ... | sh -s -- ARGS` does: the script on stdin of /bin/sh. Async: the
/// mirror answers from this process's event loop, which spawnSync would block.
function install(args, extraEnv = {}) {
  return new Promise((resolve, reject) => {
    // --prefix: the tests run as root, whose default is /usr/local; the temporary HOME's
    // ~/.local is what a person's install gets.
    const child = spawn('sh', ['-s', '--', '--prefix', path.join(home, '.local'), ...args], {
      env: { ...env, TERN_BASE_URL: mirrorUrl, ...extraEnv },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('error', reject);
    child.once('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr, out: `${stdout}${stderr}` });
    });
    child.stdin.end(fs.readFileSync(path.join(repo, 'install.sh')));
  });
}
async function installOk(args, extraEnv) {
  const r = await install(args, extraEnv);
  assert.equal(r.status, 0, `install.sh ${args.join(' ')} failed:\n${r.out}`);
  return r;
}
const mode = (p) => fs.statSync(p).mode & 0o777;
/// Every file and link under HOME (directories left out), relative.
function filesUnder(dir) {
  const out = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p); else out.push(path.relative(dir, p));
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return out.sort();
}

test('an unknown option and an unsupported architecture are refused with a clear message', async () => {
  const bad = await install(['--bogus']);
  assert.equal(bad.status, 1, bad.out);
  assert.match(bad.stderr, /unknown option '--bogus'/);
  const riscv = await install([], { TERN_INSTALL_ARCH: 'riscv64' });
  assert.equal(riscv.status, 1, riscv.out);
  assert.match(riscv.stderr, /unsupported architecture 'riscv64': Tern's releases are for x86_64 and aarch64 Linux/);
  assert.match(riscv.stderr, /cargo install tern-relay/);
  assert.deepEqual(filesUnder(home), [], 'nothing written');
});

test('a tarball with one flipped byte is refused and installs nothing', { skip: noDist }, async () => {
  const bad = path.join(tmp, 'tampered');
  fs.mkdirSync(bad);
  for (const f of fs.readdirSync(mirrorDir)) fs.copyFileSync(path.join(mirrorDir, f), path.join(bad, f));
  const tarball = path.join(bad, tarballName);
  const bytes = fs.readFileSync(tarball);
  bytes[Math.floor(bytes.length / 2)] ^= 0x01;
  fs.writeFileSync(tarball, bytes);
  const r = await install(['--from', bad]);
  assert.equal(r.status, 1, r.out);
  assert.match(r.stderr, /checksum mismatch for tern-relay-.*\.tar\.gz: SHA256SUMS says [0-9a-f]{64}, the download is [0-9a-f]{64}/);
  assert.match(r.stderr, /nothing was installed/);
  assert.deepEqual(filesUnder(home), [], 'nothing written');

  // A SHA256SUMS without the tarball's line is no verification at all: refused too.
  fs.writeFileSync(path.join(bad, 'SHA256SUMS'), `${'0'.repeat(64)}  something-else.tar.gz\n`);
  const unlisted = await install(['--from', bad]);
  assert.equal(unlisted.status, 1, unlisted.out);
  assert.match(unlisted.stderr, /SHA256SUMS has no line for/);
  assert.deepEqual(filesUnder(home), []);
});

test('installs from the mirror over HTTP, verified, and says what to do next', { skip: noDist }, async () => {
  const r = await installOk([]);
  assert.match(r.stdout, new RegExp(`downloading ${tarballName} from ${mirrorUrl}`));
  assert.match(r.stdout, /checksum ok \([0-9a-f]{64}\)/);
  assert.match(r.stdout, /installed .*\/\.local\/bin\/tern-relay \(tern-relay 0\.\d+\.\d+/);
  assert.equal(mode(installed) & 0o111, 0o111, 'executable');
  assert.equal(fs.readlinkSync(path.join(binDir, 'tern')), 'tern-relay', 'the `tern` command');
  const version = spawnSync(installed, ['--version'], { encoding: 'utf8' });
  assert.equal(version.status, 0, version.stderr);
  assert.match(version.stdout, /^tern-relay \d+\.\d+\.\d+/);
  // The next step: how to run it, and the tunnel line for the default loopback address.
  assert.match(r.stdout, /Run it: .*tern-relay/);
  assert.match(r.stdout, /ssh -L 7480:127\.0\.0\.1:7480 /);
  assert.match(r.stdout, /is not on your PATH/);
  assert.ok(!fs.existsSync(unitPath), 'no unit without --systemd');
});

test('a second run changes nothing and says so; a newer binary is renamed over a running one', { skip: noDist }, async () => {
  const before = fs.statSync(installed);
  const again = await installOk([]);
  assert.match(again.stdout, /is already tern-relay/);
  assert.equal(fs.statSync(installed).ino, before.ino, 'same file kept');
  assert.deepEqual(fs.readdirSync(binDir).sort(), ['tern', 'tern-relay'], 'no temporary file left');

  // A running relay keeps running its file while a different build replaces it.
  const relay = spawn(installed, ['--listen', '127.0.0.1:0', '--bridge', '--allow', '127.0.0.1:1', '--print-url'], {
    env: { ...env, TERN_RELAY_TOKEN: 'install-test-token-0123456789' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((resolve) => relay.once('exit', resolve));
  try {
    const url = await new Promise((resolve, reject) => {
      let out = '', err = '';
      const timer = setTimeout(() => reject(new Error(`relay printed no URL in 15 s:\n${err}`)), 15_000);
      relay.stderr.on('data', (d) => (err += d));
      relay.stdout.on('data', (d) => {
        out += d;
        const m = out.match(/Open (http:\/\/127\.0\.0\.1:\d+)\//);
        if (m) { clearTimeout(timer); resolve(m[1]); }
      });
      relay.once('exit', (code) => reject(new Error(`relay exited (${code}):\n${err}`)));
    });
    // A "new release": the same tarball with one more file, so its bytes and checksum differ,
    // and a binary that differs by an appended byte (ELF ignores trailing bytes).
    const newer = path.join(tmp, 'newer');
    const unpack = path.join(tmp, 'unpack');
    fs.mkdirSync(newer);
    fs.mkdirSync(unpack);
    assert.equal(spawnSync('tar', ['-xzf', path.join(mirrorDir, tarballName), '-C', unpack]).status, 0);
    const [top] = fs.readdirSync(unpack);
    fs.appendFileSync(path.join(unpack, top, 'tern-relay'), Buffer.from([0]));
    assert.equal(spawnSync('tar', ['-czf', path.join(newer, tarballName), '-C', unpack, top]).status, 0);
    const sum = spawnSync('sha256sum', [tarballName], { cwd: newer, encoding: 'utf8' }).stdout;
    fs.writeFileSync(path.join(newer, 'SHA256SUMS'), sum);
    const r = await installOk(['--from', newer]);
    assert.match(r.stdout, /installed .*tern-relay/);
    assert.notEqual(fs.statSync(installed).ino, before.ino, 'renamed over, not rewritten in place');
    assert.match(fs.readlinkSync(`/proc/${relay.pid}/exe`), /\(deleted\)$/, 'the running relay still runs the old file');
    const res = await fetch(`${url}/`);
    assert.equal(res.status, 200, 'the running relay still serves the page');
    assert.match(await res.text(), /<title>/);
  } finally {
    relay.kill('SIGTERM');
    await exited;
  }
});

test('--systemd writes the unit and a 0600 token file; a second run keeps the token', { skip: noDist }, async (t) => {
  const flags = ['--listen', '127.0.0.1:7499', '--paste-dir', path.join(tmp, 'pastes with space/%x$y')];
  const r = await installOk(['--systemd', '--', ...flags]);
  const unit = fs.readFileSync(unitPath, 'utf8');
  const execStart = unit.match(/^ExecStart=(.*)$/m)?.[1];
  assert.ok(execStart, unit);
  assert.equal(execStart.split(' ')[0], installed, 'ExecStart runs the installed binary');
  assert.ok(execStart.includes(` --token-file ${tokenPath} --listen 127.0.0.1:7499 `), execStart);
  // systemd quoting: % and $ doubled, the argument with a space in double quotes.
  assert.ok(execStart.endsWith(` "${path.join(tmp, 'pastes with space/%%x$$y')}"`), execStart);
  assert.match(unit, /^Restart=on-failure$/m);
  assert.match(unit, /^KillMode=process$/m);
  assert.match(unit, /^WantedBy=default\.target$/m);
  assert.equal(mode(tokenPath), 0o600);
  assert.equal(mode(path.dirname(tokenPath)), 0o700);
  const first = fs.readFileSync(tokenPath, 'utf8').trim();
  assert.match(first, /^[A-Za-z0-9_-]{43}$/, 'base64url of 32 random bytes, as the relay makes them');
  assert.match(r.stdout, /systemctl --user daemon-reload && systemctl --user enable --now tern-relay/);
  assert.match(r.stdout, /loginctl enable-linger/);
  assert.ok(r.stdout.includes(`http://127.0.0.1:7499/#token=${first}`), r.stdout);

  const verify = spawnSync('systemd-analyze', ['verify', unitPath], { encoding: 'utf8', timeout: 20_000 });
  if (verify.error?.code === 'ENOENT') {
    t.diagnostic('systemd-analyze not found: the unit was not verified');
  } else {
    assert.equal(verify.status, 0, `systemd-analyze verify: ${verify.stdout}${verify.stderr}`);
  }

  // Second run: other flags, a loosened token file; the token stays, the mode is put back.
  fs.chmodSync(tokenPath, 0o644);
  const again = await installOk(['--systemd', '--', '--listen', '127.0.0.1:7500']);
  assert.match(again.stdout, /kept the token/);
  assert.equal(fs.readFileSync(tokenPath, 'utf8').trim(), first, 'token kept');
  assert.equal(mode(tokenPath), 0o600);
  assert.match(fs.readFileSync(unitPath, 'utf8'),
    new RegExp(`^ExecStart=${installed} --token-file ${tokenPath} --listen 127\\.0\\.0\\.1:7500$`, 'm'));
  assert.deepEqual(fs.readdirSync(path.dirname(unitPath)), ['tern-relay.service']);

  // Without --systemd the unit stays as it is, and the script says to restart it.
  const plain = await installOk([]);
  assert.match(plain.stdout, /systemctl --user restart tern-relay/);
  assert.match(fs.readFileSync(unitPath, 'utf8'), /--listen 127\.0\.0\.1:7500$/m);
});

test('a token from an earlier from-source install (the env file) is kept', { skip: noDist }, async () => {
  const h = path.join(tmp, 'home-old');
  const cfg = path.join(h, '.config');
  fs.mkdirSync(path.join(cfg, 'tern-relay'), { recursive: true, mode: 0o700 });
  const old = 'old-token-from-env-file-0123456789abcdef';
  fs.writeFileSync(path.join(cfg, 'tern-relay/env'), `# comment\nTERN_RELAY_TOKEN=${old}\nTERN_RELAY_HISTORY_LINES=5\n`, { mode: 0o600 });
  const r = await installOk(['--systemd'], { HOME: h, XDG_CONFIG_HOME: cfg, XDG_DATA_HOME: path.join(h, '.local/share') });
  assert.equal(fs.readFileSync(path.join(cfg, 'tern-relay/token'), 'utf8').trim(), old);
  // The env file keeps its other settings but no longer the token (the unit passes --token-file).
  assert.equal(fs.readFileSync(path.join(cfg, 'tern-relay/env'), 'utf8'), '# comment\nTERN_RELAY_HISTORY_LINES=5\n');
  assert.ok(r.stdout.includes(`#token=${old}`), r.stdout);
});

test('--uninstall removes everything it added and names what the relay left', { skip: noDist }, async () => {
  // What the relay itself makes while it runs: state and pastes (the person's data, kept), and
  // the `tern` link for its sessions in ~/.local/bin (removed: it points at the gone binary).
  fs.mkdirSync(path.join(home, '.local/state/tern-relay'), { recursive: true });
  const r = await installOk(['--uninstall']);
  assert.match(r.stdout, /removed .*\.local\/bin\/tern-relay/);
  assert.match(r.stdout, /removed .*tern-relay\.service/);
  assert.match(r.stdout, /removed .*tern-relay\/token/);
  assert.match(r.stdout, /left in place, made by the relay while it ran: .*\.local\/state\/tern-relay/);
  assert.deepEqual(filesUnder(home), [], 'no file of Tern left in HOME');
  // The directories it made are gone too; what is left is the relay's state, which it named.
  const entries = [];
  const walk = (d) => { for (const e of fs.readdirSync(d)) { entries.push(path.relative(home, path.join(d, e))); if (fs.statSync(path.join(d, e)).isDirectory()) walk(path.join(d, e)); } };
  walk(home);
  assert.deepEqual(entries.sort(), ['.local', '.local/state', '.local/state/tern-relay']);
  // Twice is fine.
  const again = await installOk(['--uninstall']);
  assert.match(again.stdout, /uninstalled/);
});
