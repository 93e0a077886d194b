// Viewer links in the browser (issue 35): the owner shares from the page (the Share dialog), a
// second browser opens the link and watches the owner's typing from the relay's copy of the
// screen; its keys, pastes and resizes change nothing on the owner's screen or the session's size;
// the owner's page counts who watches, and End sharing closes the viewer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  launchBrowser, typeLine, stats, until, sleep, screenshotsOfState,
} from '../lib/helpers.mjs';
import { browserFixture, onlyChromium } from '../lib/fixture.mjs';

const fx = browserFixture({ open: true, relayLog: true });

/// What xterm.js shows (a viewer has no session of its own: the core's screen is empty).
const termText = (page) => page.evaluate(() => {
  const b = window.tern?.term.buffer.active;
  if (!b) return '';
  const lines = [];
  for (let i = 0; i < b.length; i++) lines.push(b.getLine(i)?.translateToString(true) ?? '');
  return lines.join('\n');
});
const termSize = (page) => page.evaluate(() => [window.tern.term.cols, window.tern.term.rows]);

test('the owner shares from the page; a viewer watches, cannot type, and is closed when sharing ends', onlyChromium('a second Chromium profile'), async () => {
  const owner = fx.page;
  const session = (await stats(owner)).session;
  assert.ok(session, 'the owner has a session');

  // The Share dialog: expiry, history, Create link; the link with Copy, End sharing.
  await owner.click('#share');
  await until(() => owner.evaluate(() => !document.getElementById('share-dialog').hidden), { what: 'the share dialog' });
  await screenshotsOfState(owner, 'share-dialog');
  await owner.click('#share-create');
  await until(() => owner.evaluate(() => document.getElementById('share-link').value.includes('#token=')),
    { what: 'the viewer link' });
  const link = await owner.evaluate(() => document.getElementById('share-link').value);
  assert.ok(link.endsWith(`&view=${session}`), link);
  await screenshotsOfState(owner, 'share-dialog-link');
  await owner.click('#share-close');

  // A second browser (its own profile) opens the link: it watches, read-only.
  const other = await launchBrowser();
  fx.defer(() => other.close());
  const viewer = other.page;
  await viewer.goto(link);
  await until(() => viewer.evaluate(() => document.body.classList.contains('viewing')
    && !document.getElementById('viewer-bar').hidden), { what: 'the viewer bar' });
  await until(async () => /[$#] ?$/m.test(await termText(viewer)), { what: "the owner's prompt on the viewer", timeout: 20000 });
  assert.match(await viewer.evaluate(() => document.getElementById('viewer-bar').textContent),
    /Viewing the owner's session.*read-only/, 'the bar says whose session, read-only');
  await until(() => owner.evaluate(() => document.getElementById('viewers').textContent.includes('1')),
    { what: "the owner's count of viewers" });
  assert.deepEqual(await termSize(viewer), await termSize(owner), "the viewer's terminal has the session's size");

  // The owner types: the viewer sees it. From the Enter key: when the output is on the owner's
  // screen and when on the viewer's (printed, not asserted).
  await owner.keyboard.type('echo shared-$((6*7))', { delay: 5 });
  await until(async () => (await termText(viewer)).includes('echo shared-$((6*7))'), { what: "the owner's typing on the viewer" });
  const t0 = Date.now();
  await owner.keyboard.press('Enter');
  let ownerSaw = 0;
  let viewerSaw = 0;
  await until(async () => {
    const [o, v] = await Promise.all([termText(owner), termText(viewer)]);
    if (!ownerSaw && /^shared-42/m.test(o)) ownerSaw = Date.now() - t0;
    if (!viewerSaw && /^shared-42/m.test(v)) viewerSaw = Date.now() - t0;
    return ownerSaw && viewerSaw;
  }, { what: "the command's output on both pages", interval: 2 });
  console.log(`# after Enter: the owner's page showed the output in ${ownerSaw} ms, the viewer's in ${viewerSaw} ms (viewer lag ${viewerSaw - ownerSaw} ms; polled every 2 ms)`);

  // What scrolls off while watching lands in the viewer's scrollback, as in the owner's: lines
  // printed a frame apart (mosh sends screens, not output: lines printed faster than frames are
  // in no one's scrollback but the history's).
  const rows = (await termSize(owner))[1];
  await typeLine(owner, `for i in $(seq 1 ${rows + 10}); do echo scrolled-$i; sleep 0.06; done`);
  await until(async () => (await termText(viewer)).includes(`scrolled-${rows + 10}`), { what: 'the last line on the viewer', timeout: 30000 });
  const scrollback = await viewer.evaluate(() => window.tern.term.buffer.active.baseY);
  assert.ok(scrollback > 0, 'the viewer has scrollback');
  assert.match(await termText(viewer), /^scrolled-1$/m, "the first line, scrolled off, is in the viewer's scrollback");

  // The viewer's keys, paste and resize change nothing; the page says why once.
  const marker = join(fx.stateDir, 'typed-by-a-viewer');
  const ownerSize = await termSize(owner);
  await viewer.click('#terminal');
  await typeLine(viewer, `touch ${marker}`);
  await viewer.evaluate(() => {
    const data = new DataTransfer();
    data.setData('text/plain', 'pasted-by-viewer');
    document.querySelector('#terminal textarea')?.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true }));
  });
  await viewer.setViewportSize({ width: 600, height: 380 });
  await until(() => viewer.evaluate(() => !document.getElementById('copy-offer').hidden
    && /read-only/.test(document.getElementById('copy-offer-text').textContent)),
  { what: 'the viewer told its keys are not sent' });
  await screenshotsOfState(viewer, 'viewer-page-told');
  await viewer.click('#copy-offer-close');
  await screenshotsOfState(viewer, 'viewer-page');
  await sleep(2000); // nothing to wait for: the point is that nothing happens
  assert.ok(!existsSync(marker), "the viewer's typing ran in the shell");
  assert.ok(!(await termText(owner)).includes('pasted-by-viewer'), "the viewer's paste reached the shell");
  assert.deepEqual(await termSize(owner), ownerSize, "the viewer's resize changed the owner's terminal");
  assert.deepEqual(await termSize(viewer), ownerSize, "the viewer's terminal keeps the session's size");
  const info = await owner.evaluate(() => window.tern.stats());
  assert.ok(info, 'owner stats');
  await screenshotsOfState(owner, 'share-viewer-count');

  // End sharing: the viewer is closed and says so.
  await owner.click('#viewers');
  await until(() => owner.evaluate(() => !document.getElementById('share-end').hidden), { what: 'End sharing' });
  const t1 = Date.now();
  await owner.click('#share-end');
  await until(() => viewer.evaluate(() => !document.getElementById('notice').hidden
    && /Sharing ended/.test(document.getElementById('notice-title').textContent)), { what: 'the viewer closed' });
  console.log(`# viewer closed ${Date.now() - t1} ms after End sharing was clicked`);
  await until(() => owner.evaluate(() => document.getElementById('viewers').hidden), { what: 'the count gone' });
  await screenshotsOfState(viewer, 'viewer-sharing-ended');

  const audit = readFileSync(join(fx.stateDir, 'audit.log'), 'utf8');
  for (const event of ['share_created', 'share_ended', 'viewer_joined', 'viewer_left']) {
    assert.match(audit, new RegExp(`"event":"${event}"`), audit);
  }
  const token = new URL(link).hash.match(/token=([^&]+)/)[1];
  assert.ok(!audit.includes(token), 'no token in the audit trail');
  assert.ok(!audit.includes('shared-42'), 'no screen content in the audit trail');
});
