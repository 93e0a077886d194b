// scripts/setup.sh's purposes, from their dry runs (which install nothing): `npm start` (run) installs
// only what running Tern needs, never a test tool; `npm test` (test) has everything.
//   node --test tests/setup.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/// The plan of a purpose: one `step NAME: WHY` line a step.
function plan(purpose) {
  const r = spawnSync('bash', ['scripts/setup.sh', purpose, '--dry-run'], { cwd: repo, encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  assert.match(r.stdout, /dry run: nothing is installed/);
  const steps = [...r.stdout.matchAll(/^\[setup\] step (.+?): (.+)$/gm)].map((m) => ({ name: m[1], why: m[2] }));
  assert.ok(steps.length > 0, r.stdout);
  for (const s of steps) assert.ok(s.why.length > 10, `step ${s.name} says why it installs: ${s.why}`);
  return steps;
}
const words = (steps) => steps.flatMap((s) => s.name.split(/\s+/));

// What only the tests use. None of it may be installed by `npm start`.
const TEST_ONLY = ['chromium', 'chromium-driver', 'firefox-esr', 'webkit2gtk-driver', 'xvfb', 'nginx', 'pebble', 'openssh-server',
  'openssh-client', 'tmux', 'libnss3-tools', 'debootstrap', 'qemu-user-static', 'nightly', 'cargo-fuzz',
  'playwright-core', 'puppeteer-core', 'ziglang', 'cargo-zigbuild'];

test('npm start runs set-up for running only', () => {
  const start = fs.readFileSync(path.join(repo, 'scripts/start.sh'), 'utf8');
  assert.match(start, /^bash scripts\/setup\.sh run$/m);
  const pkg = JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8'));
  assert.equal(pkg.scripts.start, 'bash scripts/start.sh');
  assert.match(fs.readFileSync(path.join(repo, 'scripts/test.sh'), 'utf8'), /bash scripts\/setup\.sh test/);
});

test("npm start's set-up installs mosh and the page's build, and none of the test tools", () => {
  const steps = plan('run');
  const all = words(steps).join(' ');
  for (const tool of TEST_ONLY) {
    assert.ok(!new RegExp(`(^|[\\s=])${tool.replace(/[-+]/g, '\\$&')}([\\s=]|$)`).test(all), `run installs ${tool}: ${all}`);
  }
  const names = steps.map((s) => s.name);
  assert.deepEqual(names, [
    'apt mosh',
    'rustup target wasm32-unknown-unknown',
    'cargo install wasm-bindgen-cli 0.2.130',
    'npm ci --omit=dev',
  ]);
  // --omit=dev leaves out exactly the test drivers: package.json keeps them in devDependencies.
  const pkg = JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8'));
  assert.deepEqual(Object.keys(pkg.devDependencies).sort(), ['playwright-core', 'puppeteer-core']);
  assert.ok(pkg.dependencies['@xterm/xterm'] && pkg.dependencies.binaryen, 'the page build is in dependencies');
});

test("npm test's set-up has every tool the tests use", () => {
  const all = words(plan('test'));
  for (const tool of [...TEST_ONLY.filter((t) => !['ziglang', 'cargo-zigbuild', 'playwright-core', 'puppeteer-core'].includes(t)), 'mosh']) {
    assert.ok(all.includes(tool), `test set-up lacks ${tool}: ${all.join(' ')}`);
  }
  assert.ok(all.some((w) => w.startsWith('ziglang==')) && all.some((w) => w.startsWith('cargo-zigbuild==')));
  assert.ok(all.includes('ci') && !all.includes('--omit=dev'), 'npm ci with the test drivers');
});

test('an unknown purpose is refused', () => {
  const r = spawnSync('bash', ['scripts/setup.sh', 'everything'], { cwd: repo, encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /unknown argument 'everything'/);
});
