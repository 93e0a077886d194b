// Named tokens in the browser (issue 35): the URL `tern-relay token add` prints opens a shell
// (the page names the token's id in its greet and proves under the token's verifier; it never
// sends the token), and a read-only token cannot start a session: its page watches one (from the
// relay's copy) and what it types never leaves; the relay refuses and audits a new session.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  relayBinary, waitForPrompt, typeLine, screen, stats, until, sleep, newSession, screenshotsOfState,
} from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';

const fx = browserFixture({ relayLog: true });

/// `tern-relay token add NAME ARGS`: the token it printed once, and the URL it printed with it.
function addToken(name, args = []) {
  const out = execFileSync(relayBinary(), ['token', 'add', name, ...args, '--state-dir', fx.stateDir],
    { encoding: 'utf8' });
  const token = out.match(/shown this once: (\S+)/)?.[1];
  assert.ok(token?.startsWith('tn.'), out);
  assert.ok(out.includes(`#token=${token}`), `the URL is printed: ${out}`);
  // The relay's own URL with the named token in its fragment.
  const url = new URL(fx.url);
  url.hash = `token=${token}`;
  return { token, url: url.href };
}

test('the URL of a named token opens a shell in the browser', async () => {
  const { page } = fx;
  const { token, url } = addToken('browser');
  await page.goto(newSession(url));
  await waitForPrompt(page);
  await typeLine(page, 'echo named-$((40+2))');
  await until(async () => (await screen(page)).includes('named-42'), { what: 'the echo' });
  const audit = readFileSync(join(fx.stateDir, 'audit.log'), 'utf8');
  assert.match(audit, /"event":"attach"[^\n]*"who":"browser"|"who":"browser"[^\n]*"event":"attach"/, audit);
  assert.ok(!audit.includes(token), 'no token in the audit trail');
  assert.ok(!fx.relay.log().includes(token.split('.')[2]), 'no token in the relay log');
});

test("a read-only token cannot start a session, and its page watches one without typing", async () => {
  const { page } = fx;
  const { url } = addToken('watcher', ['--read-only']);
  const marker = join(fx.stateDir, 'typed-by-a-read-only-page');
  // A new session: refused, and the page says why.
  await page.goto('about:blank');
  await page.goto(newSession(url));
  await until(() => page.evaluate(() => !document.getElementById('notice').hidden
    && /read-only/.test(document.getElementById('notice-text').textContent)),
  { what: 'the page saying a read-only link cannot start a session' });
  await screenshotsOfState(page, 'named-token-read-only-new-session');
  let audit = readFileSync(join(fx.stateDir, 'audit.log'), 'utf8');
  assert.match(audit, /"event":"refused"[^\n]*"kind":"new-session"/, audit);

  // The owner's session, in a page of the owner's token; the read-only page watches it.
  await page.goto('about:blank');
  await page.goto(newSession(fx.url));
  await waitForPrompt(page);
  const session = (await stats(page)).session;
  await typeLine(page, 'echo watched-$((40+2))');
  await until(async () => (await screen(page)).includes('watched-42'), { what: 'the echo' });
  const viewer = await fx.browser.context.newPage();
  await viewer.goto(`${url}&view=${session}`);
  const text = () => viewer.evaluate(() => {
    const b = window.tern?.term.buffer.active;
    const lines = [];
    for (let i = 0; b && i < b.length; i++) lines.push(b.getLine(i)?.translateToString(true) ?? '');
    return lines.join('\n');
  });
  await until(async () => (await text()).includes('watched-42'), { what: "the owner's screen on the read-only page" });
  await viewer.click('#terminal');
  await typeLine(viewer, `touch ${marker}`);
  // The person is told why the keys do nothing (the core's note; the page never sends them).
  await until(() => viewer.evaluate(() => !document.getElementById('copy-offer').hidden
    && /read-only/.test(document.getElementById('copy-offer-text').textContent)),
  { what: 'the page saying the link is read-only' });
  await sleep(3000); // no condition to wait for: the point is that nothing happens
  assert.ok(!existsSync(marker), "the read-only page's typing ran in the shell");
  audit = readFileSync(join(fx.stateDir, 'audit.log'), 'utf8');
  assert.match(audit, /"event":"viewer_joined"[^\n]*"who":"watcher"|"who":"watcher"[^\n]*"event":"viewer_joined"/, audit);
  await screenshotsOfState(viewer, 'named-token-read-only');
  await viewer.close();
});
