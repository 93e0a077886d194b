// `cargo install tern-relay` with no Node: the crates as `cargo package` makes them (tern-mosh, the
// core; tern-native; tern-relay, which carries the built page in page/), unpacked outside the
// checkout and built from those packages alone, serve the real page.
//   node --test tests/dist/crate-package.test.mjs
// The build goes to TERN_PACKAGE_BUILD_DIR (npm test keeps it outside the checkout, so registry
// crates compile once a machine), else target/package-build; the page must have been built
// (scripts/build-wasm.sh, which the dist stage runs first).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const targetDir = path.resolve(repo, process.env.CARGO_TARGET_DIR || 'target');
const buildDir = process.env.TERN_PACKAGE_BUILD_DIR || path.join(targetDir, 'package-build');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tern-crate-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));
const CRATES = ['tern-mosh', 'tern-native', 'tern-relay'];
const noPage = fs.existsSync(path.join(repo, 'relay/page/index.html'))
  ? false : 'relay/page/ not built: run scripts/build-wasm.sh first';

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
  return r;
}

test('the crates package cleanly, and tern-relay built from its package serves the real page', { skip: noPage, timeout: 1_200_000 }, async (t) => {
  // Every crate it depends on packages (--no-verify: the build below is the verification, from
  // the unpacked packages, outside the workspace).
  run('cargo', ['package', '--allow-dirty', '--no-verify', ...CRATES.flatMap((c) => ['-p', c])], { cwd: repo });
  const version = fs.readFileSync(path.join(repo, 'Cargo.toml'), 'utf8').match(/^version = "(.+)"$/m)[1];
  for (const c of CRATES) {
    run('tar', ['-xzf', path.join(targetDir, 'package', `${c}-${version}.crate`), '-C', tmp]);
  }
  const relaySrc = path.join(tmp, `tern-relay-${version}`);
  const listing = run('tar', ['-tzf', path.join(targetDir, 'package', `tern-relay-${version}.crate`)]).stdout;
  assert.match(listing, /\/page\/index\.html$/m, 'the page is in the package');
  assert.match(listing, /\/page\/pkg\/tern_bg\.[0-9a-f]{8}\.wasm$/m);
  // The packaged manifest names its dependencies by version, as crates.io will resolve them; the
  // packages made here stand in for crates.io's copies.
  const manifest = fs.readFileSync(path.join(relaySrc, 'Cargo.toml'), 'utf8');
  assert.match(manifest, /\[dependencies\.tern\]\nversion = "[^"]+"\npackage = "tern-mosh"\n/);
  const patches = ['tern-mosh', 'tern-native'].flatMap((c) => [
    '--config', `patch.crates-io.${c}.path=${JSON.stringify(path.join(tmp, `${c}-${version}`))}`,
  ]);
  const started = Date.now();
  run('cargo', ['build', '-q', ...patches, '--bin', 'tern-relay'], {
    cwd: relaySrc,
    env: { ...process.env, CARGO_TARGET_DIR: buildDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.diagnostic(`built from the package in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  const bin = path.join(buildDir, 'debug/tern-relay');

  const relay = spawn(bin, ['--listen', '127.0.0.1:0', '--bridge', '--allow', '127.0.0.1:60001', '--print-url'], {
    env: { ...process.env, TERN_RELAY_TOKEN: 'crate-package-test-token-0123456789' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((resolve) => relay.once('exit', resolve));
  try {
    const base = await new Promise((resolve, reject) => {
      let out = '', err = '';
      const timer = setTimeout(() => reject(new Error(`no URL:\n${err}`)), 20_000);
      relay.stderr.on('data', (d) => (err += d));
      relay.stdout.on('data', (d) => {
        out += d;
        const m = out.match(/^Open (http:\/\/127\.0\.0\.1:\d+)\//m);
        if (m) { clearTimeout(timer); resolve(m[1]); }
      });
      relay.once('exit', (code) => { clearTimeout(timer); reject(new Error(`relay exited (${code}):\n${err}`)); });
    });
    const html = await (await fetch(`${base}/`)).text();
    assert.match(html, /<script[^>]*src="[^"]*app\.[0-9a-f]{8}\.js"/);
    assert.doesNotMatch(html, /built without its page/);
    // The wasm under its content-hashed name, as the document preloads it (scripts/hash-page.mjs).
    const wasmName = html.match(/href="(pkg\/tern_bg\.[0-9a-f]{8}\.wasm)"/)?.[1];
    assert.ok(wasmName, 'the document names the wasm');
    const wasm = await fetch(`${base}/${wasmName}`);
    assert.equal(wasm.status, 200);
    assert.equal(wasm.headers.get('content-type'), 'application/wasm');
  } finally {
    relay.kill('SIGTERM');
    await exited;
  }
  // --version names the commit the package was made from (.cargo_vcs_info.json), not "unknown".
  const v = run(bin, ['--version']).stdout;
  assert.match(v, /^tern-relay \d+\.\d+\.\d+ \(commit [0-9a-f]{12}\)$/m, v);
});
