// End to end: the page, the real tern-relay (spawn mode), the real mosh-server and a shell.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ARTIFACTS, until, screen, stats, typeLine, sleep } from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';

const fx = browserFixture();
/// The session every test types into, opened by the first test that runs.
const opened = fx.step('a new session at its prompt', () => fx.openSession());

test('a prompt shows and a command runs', async () => {
  await opened();
  const { page } = fx;
  assert.equal(new URL(page.url()).hash, '', 'the token is taken out of the address bar');
  // The hello left before xterm.js opened the terminal, sized by www/terminal_size.js's estimate:
  // this browser's font metrics give the size the opened terminal fits (no refit), and the shell
  // has it.
  assert.equal(await page.evaluate(() => performance.getEntriesByName('tern:refit').length), 0,
    'the estimated size was the fitted one');
  const grid = await page.evaluate(() => `${window.tern.term.rows} ${window.tern.term.cols}`);
  await typeLine(page, 'echo size=$(stty size)');
  await until(async () => (await screen(page)).includes(`size=${grid}`), { what: `stty size ${grid}` });
  await typeLine(page, 'echo tern-$((6*7))');
  await until(async () => /^tern-42$/m.test(await screen(page)), { what: 'tern-42' });
  // Something with colour for the screenshot.
  await typeLine(page, 'ls --color=always -F /usr/bin | head -n 12 | column -c 90; echo shot-ready');
  await until(async () => /^shot-ready$/m.test(await screen(page)), { what: 'ls output' });
  await page.screenshot({ path: join(ARTIFACTS, 'browser-session.png') });
});

test('cursor keys reach the shell (history recall with the up arrow)', async () => {
  await opened();
  const { page } = fx;
  await typeLine(page, 'clear');
  await typeLine(page, 'echo arrow-$((40+2))');
  await until(async () => /^arrow-42$/m.test(await screen(page)), { what: 'first run' });
  await page.keyboard.press('ArrowUp');
  await page.keyboard.press('Enter');
  await until(async () => ((await screen(page)).match(/^arrow-42$/gm) ?? []).length === 2,
    { what: 'the recalled command to run again' });
});

test('Unicode input and a bracketed paste', async () => {
  await opened();
  const { page } = fx;
  await typeLine(page, 'clear; echo ünï-世界-$((1+1))');
  await until(async () => /^ünï-世界-2$/m.test(await screen(page)), { what: 'the Unicode echo' });
  // bash turns bracketed paste on; the core's renderer passes the mode to xterm.js, which then
  // wraps the paste (bash would otherwise run each pasted line as typed).
  // bash turns the mode on with its next prompt, which may come a frame after the echo.
  await until(() => page.evaluate(() => window.tern.term.modes.bracketedPasteMode),
    { what: 'bracketed paste mode from the server' });
  await page.evaluate(() => window.tern.term.paste('echo pasted-$((1+2))'));
  await page.keyboard.press('Enter');
  await until(async () => /^pasted-3$/m.test(await screen(page)), { what: 'the pasted command' });
});

test('vi opens full screen and quits cleanly', async () => {
  await opened();
  const { page } = fx;
  await typeLine(page, 'clear; vi');
  // vi marks the lines past the end of an empty buffer with `~`, down to the last row.
  await until(async () => (await screen(page)).split('\n').filter((l) => l.startsWith('~')).length > 10,
    { what: 'vi full screen' });
  await page.screenshot({ path: join(ARTIFACTS, 'browser-vi.png') });
  await page.keyboard.type(':q!', { delay: 5 });
  await page.keyboard.press('Enter');
  // mosh keeps no alternate screen, so vi's last screen stays. Wait for the shell's prompt
  // before typing on: an exiting vi swallows whatever it read ahead.
  await until(async () => /[$#] ?$/.test((await screen(page)).trimEnd()), { what: 'the prompt after vi' });
  await sleep(200);
  await typeLine(page, 'echo vi-status-$?');
  await until(async () => /^vi-status-0$/m.test(await screen(page)), { what: 'vi to exit with 0' })
    .catch(async (e) => { throw new Error(`${e.message}; screen:\n${await screen(page)}`); });
});

test('resizing the viewport changes what stty size prints remotely', async () => {
  await opened();
  const { page } = fx;
  const sttySize = async (tag) => {
    await typeLine(page, `clear; echo ${tag}-$(stty size | tr ' ' x)`);
    const m = await until(async () => (await screen(page)).match(new RegExp(`^${tag}-(\\d+)x(\\d+)$`, 'm')),
      { what: `stty output ${tag}` });
    return [Number(m[1]), Number(m[2])];
  };
  const grid = () => page.evaluate(() => [window.tern.term.rows, window.tern.term.cols]);
  const before = await sttySize('size1');
  assert.deepEqual(before, await grid());
  await page.setViewportSize({ width: 700, height: 420 });
  await until(async () => (await grid())[1] < before[1], { what: 'xterm.js to refit' });
  const after = await sttySize('size2');
  assert.deepEqual(after, await grid());
  assert.ok(after[0] < before[0] && after[1] < before[1], `${before} -> ${after}`);
  await page.setViewportSize({ width: 1100, height: 700 });
  await until(async () => (await grid())[1] === before[1], { what: 'xterm.js to refit back' });
});

test('the session survives a relay restart and nothing typed meanwhile is lost', async () => {
  await opened();
  const { page } = fx;
  await typeLine(page, 'clear; echo pid-$$');
  const pid = (await until(async () => (await screen(page)).match(/^pid-(\d+)$/m), { what: 'pid' }))[1];
  const session = (await stats(page)).session;
  // SIGKILL: no goodbye on the control stream; the page notices by its missing pongs.
  await fx.relay.stop('SIGKILL');
  await until(async () => (await stats(page)).phase === 'reconnecting', { timeout: 15000, what: 'the page to notice' });
  await typeLine(page, 'echo typed-while-down-$$');
  await sleep(500);
  await page.screenshot({ path: join(ARTIFACTS, 'browser-reconnecting.png') });
  await fx.relay.start();
  await until(async () => (await screen(page)).includes(`\ntyped-while-down-${pid}`),
    { timeout: 30000, what: 'the line typed while the relay was down' });
  const s = await stats(page);
  assert.equal(s.phase, 'live');
  assert.equal(s.session, session, 'the same relay session was resumed');
  assert.ok(s.readies >= 2);
  await typeLine(page, 'echo again-$$');
  await until(async () => (await screen(page)).includes(`\nagain-${pid}`), { what: 'the same shell' });
  assert.equal(s.core.droppedUnknownBase, 0);
});

test('exiting the shell ends the session: said on the page, no reconnect', async () => {
  await opened();
  const { page } = fx;
  await typeLine(page, 'exit');
  const notice = page.locator('#notice');
  await notice.waitFor({ state: 'visible', timeout: 15000 });
  assert.match(await notice.innerText(), /session ended/i);
  await page.screenshot({ path: join(ARTIFACTS, 'browser-ended.png') });
  const s = await stats(page);
  assert.equal(s.phase, 'ended');
  await sleep(3000);
  assert.equal((await stats(page)).connects, s.connects, 'no reconnect after the end');
});
