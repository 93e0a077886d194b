// The release binaries alone: each static tern-relay from dist/ in an otherwise empty root (no libc,
// no /usr, no loader), chrooted, answers --version and serves the real page. The aarch64 one runs
// there under qemu-aarch64-static (Debian's qemu-user-static), the emulator copied into the root.
//   node --test tests/dist/static-binary.test.mjs
// Needs root (chroot), dist/ (npm run dist); skips, saying why, without them.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dist = path.join(repo, 'dist');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tern-static-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const isRoot = process.getuid?.() === 0;
const qemu = '/usr/bin/qemu-aarch64-static';

/// Unpacks dist/tern-relay-TARGET.tar.gz and puts its tern-relay alone in a new empty directory.
function emptyRootWith(target) {
  const unpack = path.join(tmp, `unpack-${target}`);
  fs.mkdirSync(unpack);
  const tar = spawnSync('tar', ['-xzf', path.join(dist, `tern-relay-${target}.tar.gz`), '-C', unpack], { encoding: 'utf8' });
  assert.equal(tar.status, 0, tar.stderr);
  const [top] = fs.readdirSync(unpack);
  // What the tarball holds, besides the binary.
  assert.deepEqual(fs.readdirSync(path.join(unpack, top)).sort(),
    ['LICENSE-APACHE', 'LICENSE-MIT', 'README.md', 'THIRD-PARTY.md', 'tern-relay', 'tern-relay.service', 'tern-relay@.service']);
  const root = path.join(tmp, `root-${target}`);
  fs.mkdirSync(root);
  fs.copyFileSync(path.join(unpack, top, 'tern-relay'), path.join(root, 'tern-relay'));
  fs.chmodSync(path.join(root, 'tern-relay'), 0o755);
  const kind = spawnSync('file', ['-b', path.join(root, 'tern-relay')], { encoding: 'utf8' }).stdout;
  assert.match(kind, /statically linked/, kind);
  return { root, kind };
}

/// Starts the chrooted relay in bridge mode (no mosh-server in an empty root) and fetches its page.
async function servesThePage(root, prefix) {
  const relay = spawn('chroot', [root, ...prefix, '/tern-relay', '--listen', '127.0.0.1:0', '--bridge', '--allow', '127.0.0.1:60001', '--print-url'], {
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', TERN_RELAY_TOKEN: 'static-binary-test-token-0123456789', RUST_LOG: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((resolve) => relay.once('exit', resolve));
  try {
    const base = await new Promise((resolve, reject) => {
      let out = '', err = '';
      const timer = setTimeout(() => reject(new Error(`no URL in 60 s:\n${out}\n${err}`)), 60_000);
      relay.stderr.on('data', (d) => (err += d));
      relay.stdout.on('data', (d) => {
        out += d;
        const m = out.match(/^Open (http:\/\/127\.0\.0\.1:\d+)\/#token=/m);
        if (m) { clearTimeout(timer); resolve(m[1]); }
      });
      relay.once('exit', (code) => { clearTimeout(timer); reject(new Error(`relay exited (${code}):\n${err}`)); });
    });
    const page = await fetch(`${base}/`);
    assert.equal(page.status, 200);
    const html = await page.text();
    // The real page (not the "built without its page" document): the terminal's scripts.
    assert.match(html, /<script[^>]*src="[^"]*app\.[0-9a-f]{8}\.js"/, html.slice(0, 500));
    assert.doesNotMatch(html, /built without its page/);
    // The wasm under its content-hashed name, as the document preloads it (scripts/hash-page.mjs).
    const wasmName = html.match(/href="(pkg\/tern_bg\.[0-9a-f]{8}\.wasm)"/)?.[1];
    assert.ok(wasmName, 'the document names the wasm');
    const wasm = await fetch(`${base}/${wasmName}`);
    assert.equal(wasm.status, 200);
    assert.equal(wasm.headers.get('content-type'), 'application/wasm');
    const bytes = Buffer.from(await wasm.arrayBuffer());
    assert.deepEqual([...bytes.subarray(0, 4)], [0x00, 0x61, 0x73, 0x6d], 'a wasm module');
    // The API behind the token works too.
    const info = await fetch(`${base}/api/info`, { headers: { authorization: 'Bearer static-binary-test-token-0123456789' } });
    assert.equal(info.status, 200);
    assert.equal((await info.json()).mode, 'bridge');
  } finally {
    relay.kill('SIGTERM');
    await exited;
  }
}

for (const [target, arch] of [['x86_64-unknown-linux-musl', 'x64'], ['aarch64-unknown-linux-musl', 'arm64']]) {
  const tarball = path.join(dist, `tern-relay-${target}.tar.gz`);
  const native = process.arch === arch;
  const skip = !isRoot ? 'needs root (chroot)'
    : !fs.existsSync(tarball) ? `dist/tern-relay-${target}.tar.gz missing: run npm run dist first`
    : !native && !fs.existsSync(qemu) ? `${qemu} missing (apt install qemu-user-static)`
    : false;
  test(`${target}: alone in an empty root, it answers --version and serves the page${native ? '' : ' (under qemu-aarch64-static)'}`,
    { skip, timeout: 180_000 }, async (t) => {
      const { root, kind } = emptyRootWith(target);
      const prefix = [];
      if (!native) {
        fs.copyFileSync(qemu, path.join(root, 'qemu-aarch64-static'));
        fs.chmodSync(path.join(root, 'qemu-aarch64-static'), 0o755);
        prefix.push('/qemu-aarch64-static');
      }
      assert.deepEqual(fs.readdirSync(root).sort(), native ? ['tern-relay'] : ['qemu-aarch64-static', 'tern-relay'],
        'nothing else in the root: no libc, no loader, no /usr');
      const v = spawnSync('chroot', [root, ...prefix, '/tern-relay', '--version'], { encoding: 'utf8', env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }, timeout: 60_000 });
      assert.equal(v.status, 0, `${v.stdout}${v.stderr}`);
      assert.match(v.stdout, /^tern-relay \d+\.\d+\.\d+/);
      t.diagnostic(`${v.stdout.trim()}; ${kind.trim()}; ${fs.statSync(path.join(root, 'tern-relay')).size} bytes`);
      await servesThePage(root, prefix);
    });
}
