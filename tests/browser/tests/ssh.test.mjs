// Sessions on other hosts over ssh, against a real sshd on loopback
// (tests/ssh-fixture.sh) and the real mosh-server: the page lists the relay's ssh hosts, starts a
// session on one (saying which features are off there and why), a pasted PNG lands on the host
// with its path there typed, and each usual ssh failure is said in the page, at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ROOT, freePort, launchBrowser, until, screen, waitForPrompt, typeLine, tempDir, screenshotsOfState,
} from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';
import { makePng, sha256, pasteFile } from '../lib/paste.mjs';

const sshFixture = join(ROOT, 'tests/ssh-fixture.sh');
const sshDir = tempDir('tern-sshd-');
let sshPort;

const fx = browserFixture({
  // sshd on loopback first: the relay's --ssh-config names its ports.
  async prepare() {
    sshPort = await freePort();
    const ports = [sshPort, await freePort(), await freePort()].map(String);
    const run = spawnSync('bash', [sshFixture, 'start', sshDir, ...ports], { encoding: 'utf8' });
    assert.equal(run.status, 0, `tests/ssh-fixture.sh failed (sshd is needed): ${run.stderr}`);
  },
  relay: {
    args: [
      '--ssh-host', 'good,needs-password,wrong-key,down,other-arch', '--ssh-config', join(sshDir, 'ssh_config'),
      '--ssh-paste-dir', join(sshDir, 'host-pastes'), '--paste-dir', join(sshDir, 'relay-pastes'),
      // The recorder's copy and files on the "host" in the test's directory; other-arch's uname
      // says aarch64 through this wrapper of ssh (tests/ssh-fixture.sh).
      '--ssh-recorder-dir', join(sshDir, 'host-tern'), '--ssh-program', join(sshDir, 'ssh-other-arch'),
    ],
  },
  relayLog: true,
});
fx.defer(() => spawnSync('bash', [sshFixture, 'stop', sshDir]));

const url = () => `http://127.0.0.1:${fx.port}/#token=${fx.token}`;
const chooseHost = (page, name) => page.click(`#chooser-hosts button[data-host="${name}"]`);

/// The page's session on the host `good`, started from the chooser, at its prompt.
const onGood = fx.step('a session on the ssh host good', async () => {
  const { page } = fx;
  await page.goto(url());
  await page.waitForSelector('#chooser:not([hidden])');
  const offered = await page.locator('#chooser-hosts button').allTextContents();
  assert.deepEqual(offered, ['New session on down', 'New session on good', 'New session on needs-password', 'New session on other-arch', 'New session on wrong-key']);
  await screenshotsOfState(page, 'ssh-chooser');
  await chooseHost(page, 'good');
  await waitForPrompt(page, 30000);
});

test('the page lists the ssh hosts, starts a session on one, and a pasted PNG lands there', async () => {
  await onGood();
  const { page } = fx;
  await typeLine(page, 'echo "via-ssh[$SSH_CONNECTION]"');
  const over = new RegExp(`^via-ssh\\[127\\.0\\.0\\.1 \\d+ 127\\.0\\.0\\.1 ${sshPort}\\]$`, 'm');
  await until(async () => over.test(await screen(page)), { what: 'SSH_CONNECTION of the ssh login' });

  const png = makePng(200_000, 18);
  const hostPath = join(sshDir, 'host-pastes', `${sha256(png)}.png`);
  await page.keyboard.type('wc -c < ', { delay: 5 });
  await pasteFile(page, png);
  // The path is longer than a row: the screen's rows joined.
  await until(async () => (await screen(page)).replaceAll('\n', '').includes(`wc -c < ${hostPath}`),
    { what: "the host's path typed", timeout: 30000 });
  await page.keyboard.press('Enter');
  await until(async () => new RegExp(`^${png.length}$`, 'm').test(await screen(page)), { what: 'the size of the file on the host' });
  assert.ok(readFileSync(hostPath).equals(png), "the host's copy is byte-identical");
  await screenshotsOfState(page, 'ssh-session');
});

test("a session on the host has the recorder: lines printed there are in the page's history view", async () => {
  await onGood();
  const { page } = fx;
  assert.equal(await page.evaluate(() => document.querySelector('#pill.features-off:not([hidden])')), null,
    'nothing is off on a host of the relay\'s machine');
  await typeLine(page, "seq -f 'on-host-%g' 1 120");
  await until(async () => /^on-host-120$/m.test(await screen(page)), { what: 'the lines printed on the host' });
  // The relay's copy of the host's history (followed back over ssh) has the lines that scrolled
  // off the screen.
  const first = await until(() => page.evaluate(async () => {
    const p = await window.tern.history.page(null, 500);
    return p.lines.includes('on-host-1') && p;
  }), { what: 'on-host-1 in the history', timeout: 30000 });
  assert.ok(first.lines.includes('on-host-60'));
  await page.evaluate(() => window.tern.term.scrollToTop());
  await page.mouse.move(400, 300);
  await page.mouse.wheel(0, -300);
  await page.waitForSelector('#history:not([hidden]) .hl');
  await until(() => page.evaluate(() => [...document.querySelectorAll('#history .hl')]
    .some((l) => l.textContent === 'on-host-60')), { what: 'a line of the host in the history view' });
  await screenshotsOfState(page, 'ssh-history-view');
  await page.keyboard.press('Escape');
});

test('a host of another machine: the page says once which features are off there and why', async () => {
  const other = await launchBrowser();
  try {
    const { page } = other;
    await page.goto(url());
    await page.waitForSelector('#chooser:not([hidden])');
    await chooseHost(page, 'other-arch');
    await page.waitForSelector('#pill.features-off:not([hidden])', { timeout: 30000 });
    assert.match(await page.textContent('#pill'),
      /^History, pictures and signals are off on other-arch: its machine is linux aarch64, this relay is linux \w+\.$/);
    await screenshotsOfState(page, 'ssh-features-off');
    await waitForPrompt(page, 30000);
    // Said once: a reload of the same session does not say it again.
    await page.reload();
    await waitForPrompt(page, 30000);
    assert.equal(await page.evaluate(() => document.querySelector('#pill.features-off')), null);
  } finally {
    await other.close();
  }
});

test('a host that wants a password, a changed host key and a host that is down each say so at once', async () => {
  // The session on good is offered in the chooser too.
  await onGood();
  const other = await launchBrowser();
  try {
    const { page } = other;
    for (const [host, says] of [
      ['needs-password', /wants a password or a key.*BatchMode/s],
      ['wrong-key', /host key of wrong-key has changed/],
      ['down', /down cannot be reached over ssh: .*Connection refused/],
    ]) {
      await page.goto(url());
      await page.waitForSelector('#chooser:not([hidden])');
      if (host === 'needs-password') {
        // The session the first test started is offered too, saying where it runs.
        assert.match(await page.textContent('#chooser-list'), /on good · /);
        await screenshotsOfState(page, 'ssh-chooser-running');
      }
      const started = Date.now();
      await chooseHost(page, host);
      await page.waitForSelector('#notice:not([hidden])', { timeout: 20000 });
      assert.equal(await page.textContent('#notice-title'), 'Cannot start the session');
      assert.match(await page.textContent('#notice-text'), says);
      assert.ok(Date.now() - started < 15000, `${host} took ${Date.now() - started} ms`);
      if (host === 'needs-password') await screenshotsOfState(page, 'ssh-needs-password');
      // Try again offers the choice again (nothing was saved).
      await page.click('#notice-action');
      await page.waitForSelector('#chooser:not([hidden])');
    }
  } finally {
    await other.close();
  }
});
