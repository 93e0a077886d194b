// The cost of a frame, as tests (not timings): the page draws to xterm.js at most once per
// animation frame however fast server states come, draws nothing while hidden, and shows the
// right screen at once when shown again. Real tern-relay (spawn mode), mosh-server and shell.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  until, screen, waitForPrompt, typeLine, sleep, newSession, screenshotsOfState, browserName,
  setPageHidden, pageDetail,
} from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';

const fx = browserFixture({ open: true });

/// What xterm.js shows (its active buffer's screen rows), as the person sees it.
const xtermScreen = (p) => p.evaluate(() => {
  const { term } = window.tern;
  const buf = term.buffer.active;
  const rows = [];
  for (let y = 0; y < term.rows; y++) rows.push(buf.getLine(buf.viewportY + y)?.translateToString(true) ?? '');
  return rows.join('\n').replace(/\s+$/, '');
});

/// Counts from the page: server states applied (the core), screen writes to xterm.js (the driver),
/// and xterm.js's own `write` calls, counted by wrapping it from the outside.
async function counts(p) {
  return p.evaluate(() => {
    const s = window.tern.stats();
    return {
      applied: Number(s.core.applied), writes: s.xtermWrites, xtermCalls: window.xtermCalls ?? 0,
      draws: s.draws, datagramsIn: s.linkDatagramsIn, heldBatches: s.heldBatches, heldDatagrams: s.heldDatagrams,
    };
  });
}

async function countXtermWrites(p) {
  await p.evaluate(() => {
    if (window.xtermCalls !== undefined) return;
    window.xtermCalls = 0;
    const { term } = window.tern;
    const write = term.write.bind(term);
    term.write = (data, cb) => { window.xtermCalls += 1; return write(data, cb); };
  });
}

/// Ctrl+C until the shell's prompt is back: bash goes on with a loop when the child it waited
/// for exited normally (a short `seq` can finish before the signal reaches it).
async function interrupt(p) {
  const prompt = async () => /\^C\n[^\n]*[$#] ?$/.test((await screen(p)).trimEnd());
  for (let i = 0; i < 5; i++) {
    await p.keyboard.press('Control+C');
    try {
      await until(prompt, { timeout: 6000, what: 'the prompt after the flood' });
      return;
    } catch { /* the loop went on: again */ }
  }
  await until(prompt, { timeout: 10000, what: 'the prompt after the flood', detail: pageDetail(p) });
}

test('a burst of server states between two frames is one xterm.js write', async () => {
  const { page } = fx;
  await countXtermWrites(page);
  // A flood that runs until interrupted, so the stall below always falls inside it.
  await typeLine(page, 'clear; i=0; while :; do i=$((i+1)); seq $((i*1000)) $((i*1000+40)); sleep 0.01; done');
  // The flood's own lines, not the echo of the typing (which applies states too).
  await until(async () => /^\d{4,}\n\d{4,}$/m.test(await screen(page)), { what: 'the flood to start', detail: pageDetail(page) });
  // Hold the page's thread for two seconds while the server goes on sending: the states queue up
  // and reach the page together, between two animation frames.
  const burst = await page.evaluate(async () => {
    const snap = () => {
      const s = window.tern.stats();
      return { applied: Number(s.core.applied), writes: s.xtermWrites, calls: window.xtermCalls };
    };
    const frame = () => new Promise((r) => requestAnimationFrame(() => r(snap())));
    await frame();
    const before = snap();
    const t = performance.now();
    while (performance.now() - t < 2000) { /* the tab is busy */ }
    // Everything that queued is handled in the tasks before the next frames.
    const frames = [before];
    for (let i = 0; i < 6; i++) frames.push(await frame());
    return frames;
  });
  const steps = burst.slice(1).map((f, i) => ({
    applied: f.applied - burst[i].applied, writes: f.writes - burst[i].writes, calls: f.calls - burst[i].calls,
  }));
  console.log(`# after a 2 s stall, per frame: ${JSON.stringify(steps)}`);
  // Chromium hands the page every queued datagram before the next frame; Firefox spreads them
  // over two or three frames. Either way, each frame interval has at most one write.
  const total = steps.reduce((n, s) => n + s.applied, 0);
  assert.ok(total >= 20, `fewer than 20 server states came after the stall: ${JSON.stringify(steps)}`);
  if (browserName() === 'chromium') {
    assert.ok(steps.some((s) => s.applied >= 20),
      `no frame interval took 20 or more server states at once: ${JSON.stringify(steps)}`);
  }
  for (const s of steps) {
    assert.ok(s.writes <= 1, `more than one screen write in one frame interval: ${JSON.stringify(steps)}`);
    assert.ok(s.calls <= 1, `xterm.js was written more than once in one frame interval: ${JSON.stringify(steps)}`);
  }
  // A flood that goes on is drawn at most 4 times a second (docs/BROWSER.md, "Drawing"), not at
  // every animation frame (60 here). Output without pauses (the loop above sleeps), measured once
  // the typed command's grace is over, and only while the pacer says the output floods: on a
  // loaded machine mosh-server's states can pause for longer than the pacer's quiet gap, which
  // ends the flood (and its pace) until the output has run on for another half second.
  await interrupt(page);
  await typeLine(page, 'while :; do seq 1 200000; done');
  await sleep(3000);
  const samples = await page.evaluate(async () => {
    const out = [];
    const t = performance.now();
    while (performance.now() - t < 6000) {
      const d = window.tern.stats().draws;
      out.push({ at: performance.now(), draws: Number(d.draws), flooding: d.flooding });
      await new Promise((r) => setTimeout(r, 50));
    }
    return out;
  });
  let floodMs = 0;
  let floodDraws = 0;
  for (let i = 1; i < samples.length; i++) {
    if (samples[i - 1].flooding && samples[i].flooding) {
      floodMs += samples[i].at - samples[i - 1].at;
      floodDraws += samples[i].draws - samples[i - 1].draws;
    }
  }
  const rate = floodDraws * 1000 / Math.max(floodMs, 1);
  const all = (samples.at(-1).draws - samples[0].draws) * 1000 / (samples.at(-1).at - samples[0].at);
  console.log(`# flood pace: ${rate.toFixed(1)} draws/s over ${(floodMs / 1000).toFixed(1)} s of flood (${all.toFixed(1)}/s over the whole 6 s)`);
  assert.ok(floodMs >= 1000, `the output flooded for only ${floodMs.toFixed(0)} ms of 6 s`);
  // A draw at each edge of a flooded stretch comes on top of 4 a second.
  assert.ok(rate <= 6, `drawn ${rate.toFixed(1)} times a second during the flood`);
  await interrupt(page);
  await typeLine(page, 'echo flood-over-$((6*7))');
  await until(async () => /^flood-over-42$/m.test(await screen(page)), { what: 'the command after the flood', detail: pageDetail(page) });
  // And the screen drawn is the server's.
  await until(async () => (await xtermScreen(page)) === (await screen(page)), { what: 'xterm.js to show the final screen' });
  const c = await counts(page);
  // For the record only: typing and the bar's clock draw too, so writes and states do not compare.
  console.log(`# the whole test: ${c.applied} states applied, ${c.writes} screen writes, draws ${JSON.stringify(c.draws)}`);
});

test('a hidden tab writes nothing to xterm.js and shows the right screen at once when shown', async () => {
  const { page } = fx;
  // Whatever the test before left running ends here.
  await page.keyboard.press('Control+C');
  await waitForPrompt(page);
  await countXtermWrites(page);
  await typeLine(page, 'clear; for i in $(seq 1 150); do echo hidden-line-$i; sleep 0.02; done; echo hidden-over-$((6*7))');
  await until(async () => /hidden-line-5$/m.test(await screen(page)), { what: 'the output to start', detail: pageDetail(page) });
  await setPageHidden(page, true);
  // What was on its way before the relay read the page's `visibility` may still come alone.
  await sleep(200);
  const hidden = await counts(page);
  assert.equal(hidden.draws.visible, false, 'the page did not take the tab as hidden');
  // A blinking cursor repaints the page: it does not blink in a hidden tab.
  assert.equal(await page.evaluate(() => window.tern.term.options.cursorBlink), false, 'the cursor blinks while hidden');
  await until(async () => /^hidden-over-42$/m.test(await screen(page)), { timeout: 30000, what: 'the output to end while hidden' });
  await sleep(300);
  const after = await counts(page);
  assert.ok(after.applied - hidden.applied >= 20, `few server states while hidden (${after.applied - hidden.applied})`);
  assert.equal(after.writes, hidden.writes, 'screen writes to xterm.js while hidden');
  assert.equal(after.xtermCalls, hidden.xtermCalls, 'xterm.js was written while hidden');
  assert.doesNotMatch(await xtermScreen(page), /hidden-over-42/, 'xterm.js shows what came while hidden');
  // The relay held the server's datagrams for the hidden page and sent them together: a browser's
  // cost is per datagram delivered.
  const batches = after.heldBatches - hidden.heldBatches;
  const held = after.heldDatagrams - hidden.heldDatagrams;
  console.log(`# hidden: ${after.applied - hidden.applied} states, ${held} datagrams in ${batches} held batches, ${after.datagramsIn - hidden.datagramsIn} alone`);
  assert.equal(after.datagramsIn, hidden.datagramsIn, 'datagrams came one by one to the hidden page');
  assert.ok(batches >= 1 && held >= 3 * batches, `the relay did not hold the datagrams (${held} in ${batches} batches)`);
  // Shown again: one write brings xterm.js to the newest screen, with no wait for the server.
  // Shown and counted in one task: a datagram arriving after the page is visible again (the
  // relay's last held batch, the prompt) is a later, legitimate write and must not count here.
  const shown = await page.evaluate(() => {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'visible' });
    Object.defineProperty(document, 'hidden', { configurable: true, get: () => false });
    document.dispatchEvent(new Event('visibilitychange'));
    return { writes: window.tern.stats().xtermWrites };
  });
  assert.equal(shown.writes - after.writes, 1, 'shown again: not exactly one screen write');
  await page.evaluate(() => new Promise((r) => window.tern.term.write('', r)));
  assert.equal(await xtermScreen(page), await screen(page), 'xterm.js does not show the server screen once shown');
  assert.match(await xtermScreen(page), /^hidden-over-42$/m);
  // Shown again, the cursor blinks again (for 10 s after the last key).
  assert.equal(await page.evaluate(() => window.tern.term.options.cursorBlink), true, 'the cursor does not blink once shown');
  await screenshotsOfState(page, 'frames-shown-again');
});

test('xterm.js renders with the DOM where WebGL would be emulated on the CPU, and as asked', async () => {
  const { page } = fx;
  const webgl = await page.evaluate(() => {
    const gl = document.createElement('canvas').getContext('webgl2');
    if (!gl) return null;
    const info = gl.getExtension('WEBGL_debug_renderer_info');
    return String(info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER));
  });
  // The choice is made once the session is live and the page idle.
  await until(() => page.evaluate(() => window.tern.rendererChosen !== null), { what: 'the renderer choice' });
  console.log(`# WebGL2 here: ${webgl ?? 'none'}; the page chose ${await page.evaluate(() => window.tern.renderer)}`);
  const software = webgl === null || /swiftshader|llvmpipe|softpipe|software|basic render/i.test(webgl);
  assert.equal(await page.evaluate(() => window.tern.renderer), software ? 'dom' : 'webgl');
  if (webgl === null) return;
  // Asked for WebGL, the page loads it (where WebGL2 exists at all).
  const other = await fx.browser.context.newPage();
  try {
    await other.goto(newSession(fx.url).replace('#', '#renderer=webgl&'));
    await waitForPrompt(other);
    await until(() => other.evaluate(() => window.tern.renderer === 'webgl'), { what: 'the WebGL renderer' });
    await typeLine(other, 'echo webgl-$((6*7))');
    await until(async () => /^webgl-42$/m.test(await screen(other)), { what: 'output with WebGL' });
  } finally {
    await other.close();
  }
});
