// The chaos run, short: tests/browser/chaos/chaos.mjs for about 75 s with a fixed seed, which
// injects every kind of event at least once (relay SIGKILL and SIGTERM, a network drop, a switch to
// the WebSocket fallback and back, a reload, the page hidden for a while, a paste, a download) while
// its typist types. It runs
// as a child process because it re-runs itself in a network namespace of its own. The long run and
// what it checks: docs/CHAOS.md.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../lib/helpers.mjs';

const SECONDS = Number(process.env.TERN_CHAOS_SECONDS || 75);
const SEED = Number(process.env.TERN_CHAOS_SEED || 16);

test(`chaos for ${SECONDS} s (seed ${SEED}): every byte once and in order, transfers identical, no nonce reused`, { timeout: (SECONDS + 600) * 1000 }, async () => {
  const child = spawn(process.execPath, [join(ROOT, 'tests/browser/chaos/chaos.mjs'), '--seconds', String(SECONDS), '--seed', String(SEED)],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const code = await new Promise((r) => child.once('exit', (c, signal) => r(c ?? signal)));
  const line = out.match(/^chaos totals (\{.*\})$/m);
  assert.ok(line, `no totals printed (exit ${code}):\n${out}`);
  const totals = JSON.parse(line[1]);
  console.log(`# chaos totals ${line[1]}`);
  assert.equal(code, 0, `chaos.mjs failed:\n${out}`);
  // What chaos.mjs checked, as numbers (a run that injected or typed nothing cannot pass).
  for (const kind of ['relay_sigkill', 'relay_sigterm', 'network_drop', 'to_websocket', 'reload', 'hide', 'paste', 'download']) {
    assert.ok(totals.events[kind] >= 1, `no ${kind} event: ${line[1]}`);
  }
  // While hidden the typist typed on and the shell echoed: the relay held those datagrams.
  assert.ok(totals.held_batches >= 1, `nothing held while the page was hidden: ${line[1]}`);
  assert.ok(totals.events_during_transfers >= 1, `no restart or drop during a transfer: ${line[1]}`);
  assert.ok(totals.bytes_typed > 100, `typed ${totals.bytes_typed} bytes`);
  assert.equal(totals.bytes_verified, totals.bytes_typed);
  assert.equal(totals.losses, 0);
  assert.equal(totals.duplicates, 0);
  assert.equal(totals.seq_repeats, 0);
  assert.equal(totals.uploads_verified, totals.uploads);
  assert.equal(totals.downloads_verified, totals.downloads);
  assert.equal(totals.panics, 0);
  assert.equal(totals.outages_with_bar >= totals.outages_noticed, true, line[1]);
});
