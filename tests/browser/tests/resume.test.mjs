// The session survives a reload and a change of browser: the page, the real tern-relay
// (spawn mode), the real mosh-server. The tab saves a ResumePoint in sessionStorage (when it goes
// away, and every 2 s); the reloaded page draws that screen before it asks the relay anything,
// then takes the session over; keys typed up to the reload arrive once, in order. A browser with
// nothing saved is offered the running sessions and resumes from the relay's copy; the page that
// had it is told it moved and can take it back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ARTIFACTS, launchBrowser, until, screen, stats, waitForPrompt, typeLine, screenshotsOfState, pageDetail,
} from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';

// Every client datagram's sequence number, as the relay forwarded it (see the last test).
const fx = browserFixture({ relay: { env: { RUST_LOG: 'info,tern_relay::seqs=trace' } } });

/// What xterm.js shows (what the person sees), not the core's model.
const shown = (p) => p.evaluate(() => {
  const b = window.tern.term.buffer.active;
  const rows = [];
  for (let y = 0; y < window.tern.term.rows; y++) rows.push(b.getLine(b.viewportY + y)?.translateToString(true) ?? '');
  return rows.join('\n');
});

const pidAfter = (text, label) => text.match(new RegExp(`^${label}-(\\d+)$`, 'm'))?.[1];

/// pids of the mosh-servers the relay recorded.
const recordedPids = () => readdirSync(join(fx.stateDir, 'sessions')).filter((f) => f.endsWith('.json'))
  .map((f) => JSON.parse(readFileSync(join(fx.stateDir, 'sessions', f), 'utf8')).pid);
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };

/// The page's session, opened from the URL as tern-relay printed it, `marker-PID` printed: the
/// shell every test until `exit` continues. Its pid.
const markerSession = fx.step('a session with its marker printed', async () => {
  const { page } = fx;
  await page.goto(fx.url);
  await waitForPrompt(page);
  await typeLine(page, 'echo marker-$$');
  return until(async () => pidAfter(await screen(page), 'marker'), { what: 'marker-PID' });
});

/// Each test is also a step: the last test checks the relay's log of all of them, and runs
/// them first when it runs alone.
const scenarios = [];
function scenario(name, fn) {
  const run = fx.step(name, fn);
  scenarios.push(run);
  test(name, () => run());
}

scenario('a reload shows the old screen at once and continues the same shell', async () => {
  const pid = await markerSession();
  const { page } = fx;
  const before = await stats(page);
  assert.equal(before.restoredMs, null, 'a first load restores nothing');

  // Keys typed up to the moment of the reload (no wait for their echo).
  await page.keyboard.type('echo again-', { delay: 0 });
  await page.reload();

  // Before anything is typed: the old screen, drawn into xterm.js before the relay answered.
  await until(async () => (await stats(page))?.restoredMs != null, { what: 'the restored screen' });
  const restored = await stats(page);
  assert.ok(restored.firstReadyMs === null || restored.restoredMs < restored.firstReadyMs,
    `drawn before the relay's ready (${restored.restoredMs} < ${restored.firstReadyMs})`);
  assert.match(await shown(page), new RegExp(`^marker-${pid}$`, 'm'), 'the old screen in xterm.js');
  assert.ok(restored.restoredMs < 1500, `old screen ${restored.restoredMs} ms after navigation`);
  await page.screenshot({ path: join(ARTIFACTS, 'resume-after-reload.png') });

  // The same shell, and `echo again-` typed before the reload arrived once, in order.
  await until(async () => (await stats(page)).phase === 'live', { what: 'the session live again' });
  await page.keyboard.type('$$');
  await page.keyboard.press('Enter');
  const again = await until(async () => pidAfter(await screen(page), 'again'), { what: 'again-PID' });
  assert.equal(again, pid, 'the same shell after the reload');
  assert.doesNotMatch(await screen(page), /again-again-|echo again-echo/, 'nothing doubled');
  const s = await stats(page);
  assert.equal(s.session, before.session, 'the same relay session');
  assert.equal(s.core.droppedUnknownBase + s.core.applyFailures + s.core.authFailures, 0, JSON.stringify(s.core));
  assert.equal(recordedPids().length, 1, 'no second mosh-server was started');
});

scenario('a second reload right after the first continues it too, with keys typed as soon as the terminal has the focus', async () => {
  await markerSession();
  const { page, browser } = fx;
  const pid = pidAfter(await screen(page), 'marker');
  // Another page of the origin queues for the session's lock and keeps it 700 ms once the
  // reload lets go of it (as a browser that frees a closed tab's locks late does): the reloaded
  // page waits for it with its terminal already focused, and has not started its client yet.
  const { session } = await stats(page);
  const holder = await browser.context.newPage();
  await holder.goto(new URL('/icon.svg', fx.url).href);
  await holder.evaluate((name) => {
    window.lockHeld = new Promise((held) => navigator.locks.request(name, () => {
      held(Date.now());
      return new Promise((r) => setTimeout(r, 700));
    }));
  }, `tern.session.${session}`);
  await page.reload();
  // Typing from the first moment the terminal takes keys (these keys once went nowhere).
  await until(() => page.evaluate(() => !!window.tern && !!document.activeElement?.classList.contains('xterm-helper-textarea')),
    { interval: 5, what: 'the reloaded page, its terminal focused' });
  const early = await stats(page);
  await page.keyboard.type('echo third-', { delay: 0 });
  const heldAt = await holder.evaluate(() => window.lockHeld);
  await holder.close();
  assert.ok(heldAt > 0, 'the other page held the lock');
  await until(async () => (await stats(page)).phase === 'live', { what: 'live', detail: pageDetail(page) });
  await typeLine(page, '$$');
  const third = await until(async () => pidAfter(await screen(page), 'third'), { what: 'third-PID', detail: pageDetail(page) });
  assert.equal(third, pid);
  console.log(`# typed before the session was live (phase then: ${early?.phase ?? 'no client yet'})`);
});

scenario('closing the tab and opening the URL again continues the shell, its screen at once', async () => {
  await markerSession();
  const { browser } = fx;
  let { page } = fx;
  const pid = pidAfter(await screen(page), 'marker');
  await page.keyboard.type('echo closed-', { delay: 0 });
  await until(async () => (await screen(page)).includes('echo closed-'), { what: 'the keys echoed' });
  // Closed as a person closes a tab (its unload handlers run; the next tab is opened first, as the
  // browser would otherwise close with its last tab).
  const next = await browser.context.newPage();
  const closed = new Promise((resolve) => page.once('close', resolve));
  await page.close({ runBeforeUnload: true });
  await closed;
  // The printed URL in that new tab of the same browser (its storage is empty).
  fx.page = page = next;
  page.on('pageerror', (e) => browser.consoleLog.push(`pageerror: ${e.message}`));
  await page.goto(fx.url);
  await until(async () => (await stats(page))?.restoredMs != null, { what: 'the restored screen' });
  const restored = await stats(page);
  assert.ok(restored.firstReadyMs === null || restored.restoredMs < restored.firstReadyMs,
    'drawn before the relay answered');
  assert.equal(restored.sessionListRequests, 0, 'nothing to choose: the browser continues its last session');
  assert.match(await shown(page), new RegExp(`^marker-${pid}$`, 'm'));
  await until(async () => (await stats(page)).phase === 'live', { what: 'live' });
  await typeLine(page, '$$');
  assert.equal(await until(async () => pidAfter(await screen(page), 'closed'), {
    what: 'closed-PID',
    // Which point the new tab continued from, and what the relay offered (the page logs it).
    detail: async () => `${await pageDetail(page)()}\nconsole: ${JSON.stringify(browser.consoleLog.filter((l) => /tern: ready/.test(l)).slice(-4))}`,
  }), pid,
    'the same shell, the keys typed before the tab closed arrived once');
});

scenario('a duplicated tab does not take the session over while the original drives it', async () => {
  await markerSession();
  const { page, browser } = fx;
  const pid = pidAfter(await screen(page), 'marker');
  // What "Duplicate tab" does: a new tab with a copy of this one's sessionStorage (saved session,
  // token and nonce bounds included).
  await until(() => page.evaluate(() => !!sessionStorage.getItem('tern.session')), { what: 'the tab saved its session' });
  const copied = await page.evaluate(() => Object.fromEntries(Object.entries(sessionStorage)));
  assert.ok(copied['tern.session'], 'the tab saved its session');
  const twin = await browser.context.newPage();
  try {
    await twin.addInitScript((entries) => {
      if (sessionStorage.getItem('tern.copied')) return;
      for (const [k, v] of Object.entries(entries)) sessionStorage.setItem(k, v);
      sessionStorage.setItem('tern.copied', '1');
    }, copied);
    await twin.goto(fx.origin + '/');
    // Its copied session is driven by the original: it offers the sessions running instead.
    await twin.waitForSelector('#chooser:not([hidden]) #chooser-list li');
    const listed = await twin.locator('#chooser-list li').allTextContents();
    assert.equal(listed.length, 1, listed.join(' | '));
    assert.match(listed[0], /open in another window/);
    assert.match(listed[0], /\d+×\d+ · started just now/);
    await screenshotsOfState(twin, 'resume-chooser');
    await twin.click('#chooser-new');
    await waitForPrompt(twin);
    await typeLine(twin, 'echo twin-$$');
    const twinPid = await until(async () => pidAfter(await screen(twin), 'twin'), { what: 'twin-PID' });
    assert.notEqual(twinPid, pid, 'the duplicate got a shell of its own');
    assert.equal((await stats(twin)).restoredMs, null);
    // The original still drives its shell.
    await typeLine(page, 'echo still-$$');
    assert.equal(await until(async () => pidAfter(await screen(page), 'still'), { what: 'still-PID', detail: pageDetail(page) }), pid);
    await twin.evaluate(() => window.tern.endSession());
  } finally {
    await twin.close();
  }
});

scenario('another browser resumes the running session from the list; the first page is told it moved', async () => {
  await markerSession();
  const { page } = fx;
  const pid = pidAfter(await screen(page), 'marker');
  // Keys on their way at the moment of the switch (no Enter, no wait for the echo).
  await page.keyboard.type('echo one-', { delay: 0 });
  await until(async () => (await screen(page)).includes('echo one-'), { what: 'the keys echoed' });
  const other = await launchBrowser();
  try {
    // The URL as tern-relay printed it, in a browser with no storage of this relay at all.
    await other.page.goto(fx.url);
    await other.page.waitForSelector('#chooser:not([hidden]) #chooser-list li');
    const rows = await other.page.locator('#chooser-list li').allTextContents();
    assert.equal(rows.length, 1, rows.join(' | '));
    assert.match(rows[0], /open in another window/);
    await other.page.click('#chooser-list li button');
    // Its screen, from the relay's copy, before anything is typed here.
    await until(async () => (await shown(other.page)).includes(`marker-${pid}`), { what: "the relay's copy of the screen" });
    assert.match(await shown(other.page), /echo one-$/m, 'the keys in flight are on the screen');
    // The first page says so, and can take it back.
    await page.waitForSelector('#notice.moved:not([hidden])');
    assert.equal((await stats(page)).phase, 'moved');
    assert.match(await page.textContent('#notice'), /another window/);
    await screenshotsOfState(page, 'resume-moved');
    // What the first page types now goes nowhere; what the new one types follows the keys in flight.
    await page.keyboard.type('lost', { delay: 0 });
    await until(async () => (await stats(other.page))?.phase === 'live', { what: 'the new page live' });
    await other.page.keyboard.type('two-$$');
    await other.page.keyboard.press('Enter');
    await until(async () => pidAfter(await screen(other.page), 'one-two'), { what: 'one-two-PID' });
    assert.equal(pidAfter(await screen(other.page), 'one-two'), pid, 'the same shell; the keys arrived once, in order');
    assert.doesNotMatch(await screen(other.page), /lost|one-one-/, 'nothing from the moved page, nothing doubled');

    // Take it back: the first page continues from the relay's copy (what the other one did shows).
    await page.click('#notice-action');
    await until(async () => (await stats(page)).phase === 'live', { what: 'taken back' });
    await until(async () => /^one-two-\d+$/m.test(await shown(page)), { what: "the other page's output, here" });
    await other.page.waitForSelector('#notice.moved:not([hidden])');
    await typeLine(page, 'echo back-$$');
    assert.equal(await until(async () => pidAfter(await screen(page), 'back'), { what: 'back-PID' }), pid);
    const s = await stats(page);
    assert.equal(s.core.droppedUnknownBase + s.core.applyFailures + s.core.authFailures, 0, JSON.stringify(s.core));
    assert.equal(recordedPids().length, 1, 'no second mosh-server was started');
  } finally {
    await other.close();
  }
});

scenario('exit ends the shell; a reload then starts a new one', async () => {
  await markerSession();
  const { page } = fx;
  const oldPid = Number(pidAfter(await screen(page), 'marker'));
  const [server] = recordedPids().filter(alive);
  await typeLine(page, 'exit');
  await until(async () => (await stats(page)).phase === 'ended', { what: 'the session to end' });
  await until(() => !alive(server), { what: 'mosh-server to exit', timeout: 20000 });
  await page.reload();
  await waitForPrompt(page);
  assert.equal((await stats(page)).restoredMs, null, 'nothing saved to restore');
  await typeLine(page, 'echo fresh-$$');
  const fresh = await until(async () => pidAfter(await screen(page), 'fresh'), { what: 'fresh-PID' });
  assert.notEqual(Number(fresh), oldPid, 'a new shell');
});

scenario('End session asks first, then ends the shell at once', async () => {
  await markerSession();
  const { page } = fx;
  const pids = recordedPids().filter(alive);
  assert.equal(pids.length, 1);
  await page.waitForSelector('#end', { state: 'visible' });
  await screenshotsOfState(page, 'resume-live-end-button');
  await page.click('#end');
  await page.waitForSelector('#notice.confirm:not([hidden])');
  await screenshotsOfState(page, 'resume-end-confirm');
  // Cancel keeps it.
  await page.click('#notice-second');
  assert.equal(await page.isHidden('#notice'), true);
  assert.equal((await stats(page)).phase, 'live');
  await page.click('#end');
  await page.click('#notice-action');
  await until(async () => (await stats(page)).phase === 'ended', { what: 'the session to end' });
  await until(() => !alive(pids[0]), { what: 'mosh-server to exit', timeout: 20000 });
  await page.waitForSelector('#notice.ended:not([hidden])');
  await screenshotsOfState(page, 'resume-ended');
});

test('no sequence number repeats under a session key, across the reloads and tabs above', async () => {
  // The scenarios above (each a step: alone, this test runs them first).
  for (const run of scenarios) await run();
  const seen = new Map();
  let count = 0;
  for (const line of fx.relay.log().split('\n')) {
    const m = line.match(/tern_relay::seqs:.*session=(\S+) seq=(\d+)/) ?? line.match(/session=(\S+).*seq=(\d+).*client datagram/);
    if (!m) continue;
    count++;
    const [, session, seq] = m;
    if (!seen.has(session)) seen.set(session, new Set());
    const seqs = seen.get(session);
    assert.ok(!seqs.has(seq), `session ${session} reused sequence number ${seq}`);
    seqs.add(seq);
  }
  assert.ok(count > 100, `the relay logged the sequence numbers (${count})`);
  assert.ok(seen.size >= 3, `sessions seen: ${seen.size}`);
});
