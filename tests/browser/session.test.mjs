// End to end: the page, the real tern-relay (spawn mode), the real mosh-server and a shell.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  ARTIFACTS, freePort, startRelay, stopRelay, launchBrowser, until, screen, stats,
  waitForPrompt, typeLine, tempDir, sleep,
} from './helpers.mjs';

const token = 'test-token-' + Math.random().toString(36).slice(2);
let port, stateDir, relay, browser, page;

before(async () => {
  port = await freePort();
  stateDir = tempDir('tern-relay-state-');
  relay = await startRelay({ port, token, stateDir });
  browser = await launchBrowser();
  page = browser.page;
});

after(async () => {
  await browser?.close();
  await stopRelay(relay);
  if (process.exitCode) console.log(browser?.consoleLog.join('\n'));
});

test('a prompt shows and a command runs', async () => {
  await page.goto(relay.url);
  await waitForPrompt(page);
  assert.equal(new URL(page.url()).hash, '', 'the token is taken out of the address bar');
  await typeLine(page, 'echo tern-$((6*7))');
  await until(async () => /^tern-42$/m.test(await screen(page)), { what: 'tern-42' });
  await page.screenshot({ path: join(ARTIFACTS, 'browser-session.png') });
});
