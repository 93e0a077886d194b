// Bridge mode and the session's survival: the relay forwards to mosh-servers started
// by hand (`mosh-server new`), so only the page knows the key and the session's state. A reload
// continues from the tab's storage; a browser with nothing saved says the session cannot be
// resumed from there and connects to a new mosh-server when given its MOSH CONNECT line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  launchBrowser, until, screen, stats, waitForPrompt, typeLine, screenshotsOfState,
  moshServerNew as startMoshServer,
} from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';
import { makePng, pasteFile } from '../lib/paste.mjs';

const fx = browserFixture({ relay: { args: ['--bridge', '--allow', '127.0.0.1:60400-60999'] } });
const servers = [];
// The mosh-servers started here (they outlive their clients by design).
fx.defer(() => {
  for (const s of servers) {
    try { if (s.pid > 1) process.kill(s.pid, 'SIGTERM'); } catch { /* gone */ }
  }
});

/// One more mosh-server for bridge mode, ended after the tests.
function moshServerNew() {
  const server = startMoshServer();
  servers.push(server);
  return server;
}

const pidOf = (text, label) => text.match(new RegExp(`^${label}-(\\d+)$`, 'm'))?.[1];

const bridgeUrl = (s) => `http://127.0.0.1:${fx.port}/#token=${fx.token}&host=127.0.0.1&port=${s.port}&key=${encodeURIComponent(s.key)}`;

/// The first tab's shell on a mosh-server of its own, `marker-PID` printed: `{ server, pid }`.
const firstTab = fx.step('a bridged shell in the first tab, its marker printed', async () => {
  const server = moshServerNew();
  const { page } = fx;
  await page.goto(bridgeUrl(server));
  await waitForPrompt(page);
  await typeLine(page, 'echo marker-$$');
  const pid = await until(async () => pidOf(await screen(page), 'marker'), { what: 'marker-PID' });
  return { server, pid };
});

test('a reload in bridge mode continues the shell from the tab', async () => {
  const { pid } = await firstTab();
  const { page } = fx;
  await page.keyboard.type('echo again-', { delay: 0 });
  await page.reload();
  await until(async () => (await stats(page))?.restoredMs != null, { what: 'the restored screen' });
  assert.match(await screen(page), new RegExp(`^marker-${pid}$`, 'm'));
  await until(async () => (await stats(page)).phase === 'live', { what: 'live again' });
  await page.keyboard.type('$$');
  await page.keyboard.press('Enter');
  assert.equal(await until(async () => pidOf(await screen(page), 'again'), { what: 'again-PID' }), pid);
});

// The page's hello may leave before /api/info is in (its early link's relay proved the token with
// the challenge it pushed), asking for a new spawned session; a bridge relay refuses that, and
// the page must still say what the info says: which mode the relay runs and what to add.
test('a page without a mosh-server on a bridge relay says to add its address, whichever came first, the refusal or the info', async () => {
  const other = await launchBrowser();
  try {
    const { page } = other;
    await page.goto(`http://127.0.0.1:${fx.port}/#token=${fx.token}`);
    await page.waitForSelector('#notice:not([hidden])', { timeout: 15000 });
    assert.match(await page.textContent('#notice'), /runs in bridge mode: add &host=/);
    await screenshotsOfState(page, 'bridge-needs-target');
    const s = await stats(page);
    console.log(`# the hello went before the info: ${s.pushedChallenges === 1} (${s.pushedChallenges} pushed challenges)`);
  } finally {
    await other.close();
  }
});

test('with nothing saved, the page says it cannot resume and connects to a new mosh-server', async () => {
  const { server: first } = await firstTab();
  const other = await launchBrowser();
  try {
    const { page } = other;
    await page.goto(bridgeUrl(first));
    await page.waitForSelector('#notice:not([hidden]) #connect-form:not([hidden])');
    assert.match(await page.textContent('#notice'), /cannot be resumed/);
    assert.equal((await stats(page)).phase, 'cannot_resume');
    await screenshotsOfState(page, 'bridge-cannot-resume');
    // Something that is not a MOSH CONNECT line: said so, nothing happens.
    await page.fill('#connect-line', 'hello');
    await page.click('#connect-form button[type=submit]');
    assert.match(await page.textContent('#connect-error'), /not a MOSH CONNECT line/);
    // A new mosh-server's line, pasted as mosh-server printed it.
    const fresh = moshServerNew();
    await page.fill('#connect-line', `\r\n${fresh.line}\r\n`);
    await page.click('#connect-form button[type=submit]');
    await waitForPrompt(page);
    await typeLine(page, 'echo two-$$');
    const pid = await until(async () => pidOf(await screen(page), 'two'), { what: 'two-PID' });
    assert.notEqual(pid, pidOf(await screen(fx.page), 'marker'), 'a shell of its own');
    // The first tab still drives the first server.
    await typeLine(fx.page, 'echo still-$$');
    await until(async () => pidOf(await screen(fx.page), 'still'), { what: 'still-PID' });
  } finally {
    await other.close();
  }
});

/// A new mosh-server whose key holds `char` (`+` or `/`: about 30 % of keys hold each); the others
/// are ended.
function serverWithInKey(char) {
  for (let i = 0; i < 40; i++) {
    const s = startMoshServer();
    if (s.key.includes(char)) {
      servers.push(s);
      return s;
    }
    process.kill(s.pid, 'SIGTERM');
  }
  throw new Error(`no key with a ${char} in 40 mosh-servers`);
}

test('keys with + and / work in the address raw, as MOSH CONNECT prints them, and percent-encoded', async () => {
  for (const char of ['+', '/']) {
    for (const how of ['raw', 'encoded']) {
      const server = serverWithInKey(char);
      const key = how === 'raw' ? server.key : encodeURIComponent(server.key);
      const other = await launchBrowser();
      try {
        const { page } = other;
        await page.goto(`http://127.0.0.1:${fx.port}/#token=${fx.token}&host=127.0.0.1&port=${server.port}&key=${key}`);
        await waitForPrompt(page);
        const tag = `${how}-${char === '+' ? 'plus' : 'slash'}`;
        await typeLine(page, `echo ${tag}-$((6*7))`);
        await until(async () => (await screen(page)).includes(`${tag}-42`), { what: `a command with the ${how} key holding ${char}` });
      } finally {
        await other.close();
      }
    }
  }
});

test('a target off the allowlist, and one that does not answer, are each said clearly', async () => {
  const other = await launchBrowser();
  try {
    const { page } = other;
    const key = moshServerNew().key;
    await page.goto(`http://127.0.0.1:${fx.port}/#token=${fx.token}&host=127.0.0.1&port=60399&key=${encodeURIComponent(key)}`);
    await page.waitForSelector('#notice:not([hidden])', { timeout: 15000 });
    assert.match(await page.textContent('#notice-text'), /127\.0\.0\.1:60399 is not on this relay's --allow list/);
    // An allowed port where no mosh-server answers: the bar says so (never "last contact").
    const quiet = await other.context.newPage();
    await quiet.goto(`http://127.0.0.1:${fx.port}/#token=${fx.token}&host=127.0.0.1&port=60998&key=${encodeURIComponent(key)}`);
    const bar = () => quiet.evaluate(() => window.tern.term.buffer.active.getLine(0).translateToString(true));
    await until(async () => /^tern: Nothing from the mosh-server in \d+ seconds: is it running/.test(await bar()),
      { what: 'the bar saying nothing came from the server', timeout: 20000 });
    await screenshotsOfState(quiet, 'bridge-no-answer');
  } finally {
    await other.close();
  }
});

test('bridge mode without a paste directory says up front that pasting files is off, and uploads nothing', async () => {
  const server = moshServerNew();
  const other = await launchBrowser();
  try {
    const { page } = other;
    await page.goto(bridgeUrl(server));
    await waitForPrompt(page);
    // Said when the session starts, before anyone pastes.
    await until(async () => /Pasting files is off here: .*bridge mode/.test(await page.textContent('#pill')),
      { what: 'the paste-off note' });
    assert.equal(await page.evaluate(() => document.body.dataset.paste), 'off');
    await screenshotsOfState(page, 'bridge-paste-off');
    // A paste then fails at once with that reason, and no upload stream is opened.
    await pasteFile(page, makePng(20_000, 3));
    await until(async () => /Paste failed: pasting files is off here/.test(await page.textContent('#paste-text')),
      { what: 'the paste failing at once' });
    const s = await stats(page);
    assert.equal(s.paste.uploadsStarted, 0, JSON.stringify(s.paste));
    // Typing still works.
    await typeLine(page, 'echo after-$((6*7))');
    await until(async () => (await screen(page)).includes('after-42'), { what: 'typing after the refused paste' });
  } finally {
    await other.close();
  }
});

test('bridge mode says that tern send and tern open are not available', async () => {
  const server = moshServerNew();
  const other = await launchBrowser();
  try {
    const { page } = other;
    await page.goto(bridgeUrl(server));
    await waitForPrompt(page);
    await page.click('#gear');
    await until(() => page.evaluate(() => !document.getElementById('settings').hidden), { what: 'the settings panel' });
    assert.match(await page.textContent('#settings-send'), /tern send and tern open are not available in bridge mode/);
    await screenshotsOfState(page, 'bridge-no-tern-send');
  } finally {
    await other.close();
  }
});
