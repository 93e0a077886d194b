// The first prompt's measurement (issue 36; docs/BENCHMARKS.md, "First prompt"): the page marks
// each stage of reaching the relay once (`tern:*` performance marks, read by load-bench.mjs for
// its time budget), and the relay serves the floor page (relay/src/floor.rs) only when the bench
// asks for it with TERN_BENCH_FLOOR=1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Relay, browserFixture } from '../lib/fixture.mjs';
import { screenshotsOfState, until } from '../lib/helpers.mjs';

// This file's relay serves the floor; a second one (started in its test) does not.
const fx = browserFixture({ relay: { env: { TERN_BENCH_FLOOR: '1' } } });

test('the page marks every stage of its first prompt once, in order', async () => {
  const { page } = fx;
  await fx.openSession(page);
  const stages = ['tern:script', 'tern:wasm', 'tern:term', 'tern:start', 'tern:info', 'tern:link',
    'tern:challenge', 'tern:ready', 'tern:datagram'];
  await until(() => page.evaluate(() => performance.getEntriesByName('tern:datagram').length === 1), { what: 'the first datagram mark' });
  const marks = await page.evaluate((names) => names.map((n) => performance.getEntriesByName(n).map((e) => e.startTime)), stages);
  for (const [i, name] of stages.entries()) {
    assert.equal(marks[i].length, 1, `${name} marked once: ${JSON.stringify(marks)}`);
    if (i) assert.ok(marks[i][0] >= marks[i - 1][0], `${name} after ${stages[i - 1]}: ${JSON.stringify(marks)}`);
  }
  // The relay's answer (the core's milestone) is the mark's moment, not before.
  const ready = await page.evaluate(() => window.tern.stats().firstReadyMs);
  assert.ok(ready >= marks[stages.indexOf('tern:ready')][0], `firstReadyMs ${ready}`);
});

test('the floor: the same xterm.js draws a fixed prompt, no wasm, no session; only with TERN_BENCH_FLOOR=1', async () => {
  const { page } = fx;
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(`${fx.origin}/floor.html`);
  await until(() => page.evaluate(() => {
    const b = window.tern?.term?.buffer.active;
    return b?.getLine(b.cursorY)?.translateToString(true).trimEnd() === 'floor@tern:~$';
  }), { what: 'the floor prompt' });
  const fetched = await page.evaluate(() => performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname));
  assert.ok(fetched.includes('/xterm/xterm.mjs'), `the page's xterm.js: ${fetched}`);
  assert.ok(!fetched.some((p) => p.endsWith('.wasm') || p.startsWith('/api/')), `no wasm, no API: ${fetched}`);
  assert.deepEqual(errors, [], 'nothing refused by the Content-Security-Policy');
  await screenshotsOfState(page, 'floor');

  // A relay started without the variable: no floor (404 as any unknown path).
  const plain = new Relay();
  await plain.start();
  try {
    for (const path of ['/floor.html', '/floor.js']) {
      const r = await fetch(`${plain.origin}${path}`);
      assert.equal(r.status, 404, path);
    }
    assert.equal((await fetch(`${fx.origin}/floor.js`)).status, 200, 'the bench relay serves it');
  } finally {
    await plain.close();
  }
});
