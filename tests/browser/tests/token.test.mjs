// A wrong token: a clear message and no retry storm. The relay proves it knows the token first,
// and under a wrong one its proof does not hold for the page: the page says the relay could not
// be verified, and sends nothing more (no proof, no session state). Own relay.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stats, sleep } from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';

const fx = browserFixture({ relay: { token: 'right-token-0123456789' } });

test('a wrong token gets a clear message, no retries, and the relay gets nothing but a nonce', async () => {
  const { page, relay } = fx;
  const url = new URL(relay.url);
  url.hash = 'token=wrong-token';
  await page.goto(url.href);
  const notice = page.locator('#notice');
  await notice.waitFor({ state: 'visible', timeout: 10000 });
  assert.match(await notice.innerText(), /could not be verified/i);
  assert.match(await notice.innerText(), /out of date/i);
  // Give a retry loop every chance to show itself.
  await sleep(4000);
  const s = await stats(page);
  assert.equal(s.phase, 'failed');
  // One request in all: the session list (a page with nothing saved asks for it first).
  assert.equal(s.infoRequests + s.sessionListRequests, 1, 'exactly one attempt');
  assert.equal(s.connects, 0, 'no WebTransport attempt without a valid token');
  // The page never presented a credential, so the relay never refused one.
  const refusals = relay.log().match(/wrong (token|credential)/g) ?? [];
  assert.equal(refusals.length, 0, relay.log());
});
