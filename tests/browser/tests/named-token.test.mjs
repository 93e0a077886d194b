// Named tokens in the browser (issue 35): the URL `tern-relay token add` prints opens a shell
// (the page names the token's id in its greet and proves under the token's verifier; it never
// sends the token), and a read-only token's page cannot type: what it types never runs, and the
// relay logs and audits the refusal.
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

test("a read-only token's page cannot type: nothing it types runs", async () => {
  const { page } = fx;
  const { url } = addToken('watcher', ['--read-only']);
  const marker = join(fx.stateDir, 'typed-by-a-read-only-page');
  // Another document first: a change of the fragment alone would not load the page again.
  await page.goto('about:blank');
  await page.goto(newSession(url));
  // The relay admits the link; it refuses its input (and its first resize), so the page has
  // no screen to show: wait until the relay has refused something, then type.
  await until(async () => fx.relay.log().includes("read-only link's request refused"),
    { what: 'the relay refusing the read-only page', timeout: 20000 });
  await typeLine(page, `touch ${marker}`);
  // The page took the keys and sent them: they stay unacknowledged, as the relay never passed
  // them on (a page that had not got them would make this test pass for nothing).
  await until(async () => Number((await stats(page))?.core?.unackedInput ?? 0) >= 'touch '.length,
    { what: "the typed keys in the page's unacknowledged input" });
  // The person is told why the keys do nothing (the relay's `refused` line, in the page's note).
  await until(() => page.evaluate(() => !document.getElementById('copy-offer').hidden
    && /read-only/.test(document.getElementById('copy-offer-text').textContent)),
  { what: 'the page saying the link is read-only' });
  await sleep(3000); // no condition to wait for: the point is that nothing happens
  assert.ok(!existsSync(marker), "the read-only page's typing ran in the shell");
  const audit = readFileSync(join(fx.stateDir, 'audit.log'), 'utf8');
  assert.match(audit, /"event":"refused"[^\n]*"kind":"input"|"kind":"input"[^\n]*"event":"refused"/, audit);
  assert.match(audit, /"who":"watcher"/, audit);
  await screenshotsOfState(page, 'named-token-read-only');
});
