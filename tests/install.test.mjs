// scripts/install.sh (npm run install-relay), run with HOME, the XDG directories and --prefix in a
// temporary directory, never touching the real user's files or systemd:
//   node --test tests/install.test.mjs
// The slow part of the script (set-up, page build, release build) is skipped with
// TERN_INSTALL_BINARY: it installs an already built tern-relay, by default
// ${CARGO_TARGET_DIR:-target}/release/tern-relay, else .../debug/tern-relay (`cargo test` builds it);
// without one the tests skip and say so. TERN_INSTALL_SYSTEMCTL=0 and an empty XDG_RUNTIME_DIR keep
// systemctl out of it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const script = path.join(repo, 'scripts/install.sh');
const targetDir = path.resolve(repo, process.env.CARGO_TARGET_DIR || 'target');

function findBinary() {
  const candidates = [
    process.env.TERN_INSTALL_BINARY,
    path.join(targetDir, 'release/tern-relay'),
    path.join(targetDir, 'debug/tern-relay'),
  ].filter(Boolean);
  return candidates.find((p) => {
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return fs.statSync(p).isFile();
    } catch {
      return false;
    }
  });
}
const binary = findBinary();
const noBinary = binary
  ? false
  : `no built tern-relay in ${targetDir}/{release,debug}: run cargo build -p tern-relay or set TERN_INSTALL_BINARY`;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tern-install-'));
const home = path.join(tmp, 'home');
const prefix = path.join(tmp, 'prefix');
const installed = path.join(prefix, 'bin/tern-relay');
const configHome = path.join(home, '.config');
const unitPath = path.join(configHome, 'systemd/user/tern-relay.service');
const envPath = path.join(configHome, 'tern-relay/env');
fs.mkdirSync(path.join(tmp, 'run'), { recursive: true, mode: 0o700 });
fs.mkdirSync(home, { recursive: true });

const env = { ...process.env };
delete env.DBUS_SESSION_BUS_ADDRESS;
Object.assign(env, {
  HOME: home,
  XDG_CONFIG_HOME: configHome,
  XDG_STATE_HOME: path.join(home, '.local/state'),
  XDG_CACHE_HOME: path.join(home, '.cache'),
  XDG_DATA_HOME: path.join(home, '.local/share'),
  XDG_RUNTIME_DIR: path.join(tmp, 'run'),
  TERN_INSTALL_SYSTEMCTL: '0',
  TERN_INSTALL_BINARY: binary || '',
});

function install(args, extraEnv = {}) {
  const r = spawnSync('bash', [script, ...args], {
    env: { ...env, ...extraEnv },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { ...r, out: `${r.stdout}${r.stderr}` };
}

function installOk(args) {
  const r = install(args);
  assert.equal(r.status, 0, `install.sh ${args.join(' ')} failed:\n${r.out}`);
  return r;
}

const token = () => {
  const m = fs.readFileSync(envPath, 'utf8').match(/^TERN_RELAY_TOKEN=(.*)$/m);
  assert.ok(m, `no TERN_RELAY_TOKEN line in ${envPath}`);
  return m[1];
};
const mode = (p) => fs.statSync(p).mode & 0o777;
const leftovers = () => fs.readdirSync(path.dirname(installed)).filter((n) => n !== 'tern-relay');

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

test('--help prints the usage; an unknown argument exits 2', () => {
  const help = install(['--help']);
  assert.equal(help.status, 0, help.out);
  assert.match(help.stdout, /--systemd/);
  assert.match(help.stdout, /TERN_INSTALL_BINARY/);
  const bad = install(['--bogus']);
  assert.equal(bad.status, 2, bad.out);
  assert.match(bad.stderr, /unknown argument/);
});

test('a TERN_INSTALL_BINARY that is not there fails and installs nothing', () => {
  const r = install(['--prefix', path.join(tmp, 'nothing')], { TERN_INSTALL_BINARY: path.join(tmp, 'missing') });
  assert.notEqual(r.status, 0, r.out);
  assert.match(r.stderr, /not an executable file/);
  assert.ok(!fs.existsSync(path.join(tmp, 'nothing/bin/tern-relay')));
});

test('installs an executable tern-relay whose --help runs, and says what to do next', { skip: noBinary }, () => {
  const r = installOk(['--prefix', prefix]);
  assert.equal(mode(installed) & 0o111, 0o111, 'installed binary is executable');
  assert.deepEqual(leftovers(), [], 'no temporary file left beside the binary');
  const help = spawnSync(installed, ['--help'], { env, encoding: 'utf8', timeout: 10_000 });
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /--listen/);
  assert.match(r.stdout, /installed .*tern-relay/);
  assert.match(r.stdout, /ssh -L 7480:127\.0\.0\.1:7480/);
  assert.ok(!fs.existsSync(unitPath), 'no unit without --systemd');
});

test('a second run replaces the binary by rename while the old one keeps running', { skip: noBinary }, async () => {
  const relay = spawn(installed, ['--listen', '127.0.0.1:0'], {
    env: { ...env, TERN_RELAY_TOKEN: 'install-test-token' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((resolve) => relay.once('exit', resolve));
  try {
    let stderr = '';
    relay.stderr.on('data', (d) => (stderr += d));
    const url = await new Promise((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`relay printed no URL in 15 s:\n${stderr}`)), 15_000);
      relay.stdout.on('data', (d) => {
        out += d;
        const m = out.match(/Open (http:\/\/127\.0\.0\.1:\d+)\//);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      relay.once('exit', (code) => reject(new Error(`relay exited (${code}):\n${stderr}`)));
    });
    const before = fs.statSync(installed).ino;
    installOk(['--prefix', prefix]);
    assert.notEqual(fs.statSync(installed).ino, before, 'new file renamed over the old one, not rewritten in place');
    assert.deepEqual(leftovers(), []);
    assert.match(fs.readlinkSync(`/proc/${relay.pid}/exe`), /\(deleted\)$/, 'the running relay still runs the old file');
    const res = await fetch(`${url}/`);
    assert.ok(res.status === 200 || res.status === 503, `running relay still answers (${res.status})`);
    assert.equal(relay.exitCode, null, 'relay still running');
  } finally {
    relay.kill('SIGTERM');
    await exited;
  }
});

test('--systemd writes the unit and a 0600 token file; a second run keeps the token', { skip: noBinary }, (t) => {
  const flags = ['--listen', '127.0.0.1:7499', '--paste-dir', path.join(tmp, 'pastes with space/%x$y')];
  const r = installOk(['--systemd', '--prefix', prefix, '--', ...flags]);
  const unit = fs.readFileSync(unitPath, 'utf8');
  const execStart = unit.match(/^ExecStart=(.*)$/m)?.[1];
  assert.ok(execStart, unit);
  assert.equal(execStart.split(' ')[0], installed, 'ExecStart runs the installed binary');
  assert.ok(execStart.includes(' --listen 127.0.0.1:7499 '), execStart);
  // systemd quoting: % and $ doubled, the argument with a space in double quotes.
  assert.ok(execStart.endsWith(` "${path.join(tmp, 'pastes with space/%%x$$y')}"`), execStart);
  assert.match(unit, /^Restart=on-failure$/m);
  assert.match(unit, /^KillMode=process$/m);
  assert.match(unit, /^WantedBy=default\.target$/m);
  assert.equal(unit.match(/^EnvironmentFile=(.*)$/m)?.[1], envPath);
  assert.equal(mode(envPath), 0o600);
  assert.equal(mode(path.dirname(envPath)), 0o700);
  const first = token();
  assert.match(first, /^[A-Za-z0-9_-]{43}$/, 'base64url of 32 random bytes');
  // No user systemd here (TERN_INSTALL_SYSTEMCTL=0): it says how to start it, and about linger.
  assert.match(r.stdout, /systemctl --user daemon-reload && systemctl --user enable --now tern-relay/);
  assert.match(r.stdout, /loginctl enable-linger/);
  assert.ok(r.stdout.includes(`http://127.0.0.1:7499/#token=${first}`), r.stdout);

  const verify = spawnSync('systemd-analyze', ['verify', unitPath], { encoding: 'utf8', timeout: 20_000 });
  if (verify.error?.code === 'ENOENT') {
    t.diagnostic('systemd-analyze not found: the unit was not verified');
  } else {
    assert.equal(verify.status, 0, `systemd-analyze verify: ${verify.stdout}${verify.stderr}`);
    assert.equal(verify.stderr.trim(), '', 'systemd-analyze verify warned');
  }

  // Second run: other flags, a loosened env file; the token stays, the mode is put back.
  fs.chmodSync(envPath, 0o644);
  const again = installOk(['--systemd', '--prefix', prefix, '--', '--listen', '127.0.0.1:7500']);
  assert.match(again.stdout, /kept the token/);
  assert.equal(token(), first, 'token kept');
  assert.equal(mode(envPath), 0o600);
  assert.match(fs.readFileSync(unitPath, 'utf8'), new RegExp(`^ExecStart=${installed} --listen 127\\.0\\.0\\.1:7500$`, 'm'));
  assert.deepEqual(leftovers(), []);
  assert.deepEqual(fs.readdirSync(path.dirname(unitPath)), ['tern-relay.service']);

  // Without --systemd the unit stays as it is, and the script says to restart it.
  const plain = installOk(['--prefix', prefix]);
  assert.match(plain.stdout, /systemctl --user restart tern-relay/);
  assert.match(fs.readFileSync(unitPath, 'utf8'), /--listen 127\.0\.0\.1:7500$/m);
});
