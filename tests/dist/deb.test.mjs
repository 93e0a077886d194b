// The .deb on a clean Debian 12 (issue: "a test that installs the .deb on a clean Debian 12 root made
// with Debian's debootstrap"): dist/tern-relay_*_amd64.deb is installed with apt into a fresh
// bookworm minbase root, which pulls mosh in from the registry as the package's Recommends; the
// relay starts there as a user of that root, headless Chromium on the host opens its URL, and the
// shell it gives is the root's (a marker file only the root has is `cat`-able); `apt-get purge`
// then leaves nothing of Tern behind.
//
//   node --test tests/dist/deb.test.mjs         (as root; `npm run dist` first)
//
// The root (./debian-root.mjs, shared with install-bench.mjs): `debootstrap --variant=minbase
// bookworm`, cached as a tar in ${TERN_DEBIAN_ROOT_CACHE:-/var/cache/tern-tests}/
// bookworm-minbase-amd64.tar (made once, a few minutes; delete it to make a new one). Each run
// extracts it into a fresh temporary directory, refreshes its package lists (the cached ones go
// stale at Debian's point releases) and removes the directory at the end. mosh is not in the cache
// on purpose: installing the .deb is what brings it in.
//
// Isolation: the root's processes run in a mount and PID namespace of their own whose PID 1 binds
// /dev and mounts a devpts instance of its own in the root (mosh-server needs ptys); commands enter
// it with nsenter and chroot. The network namespace is the host's, so the host's Chromium reaches
// the relay on 127.0.0.1. Nothing is mounted in the host's namespace; killing that PID 1 ends every
// process of the root and, with them, its mounts.
//
// Environment: TERN_DEBIAN_ROOT_CACHE (where the root's tar lives), TERN_DEB (a .deb other than
// dist/tern-relay_*_amd64.deb), TERN_DEBIAN_MIRROR (default http://deb.debian.org/debian).
// Skips (with the reason) when not root, without debootstrap, unshare, nsenter or Debian's Chromium,
// or without the .deb.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  existsSync, readdirSync, readFileSync, readlinkSync, copyFileSync, writeFileSync, rmSync,
  lstatSync, statSync,
} from 'node:fs';
import { join, resolve, dirname, basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import {
  CACHE_TAR, debianRootSkipReason, ensureCache, freshRoot, run, within,
} from './debian-root.mjs';
import {
  freePort, launchBrowser, waitForPrompt, typeLine, screen, until, screenshotsOfState,
  pageDetail,
} from '../browser/lib/helpers.mjs';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const USER = 'alice';

const log = (line) => console.log(line);
const seconds = (t0) => `${((Date.now() - t0) / 1000).toFixed(1)} s`;

function findDeb() {
  if (process.env.TERN_DEB) return existsSync(process.env.TERN_DEB) ? resolve(process.env.TERN_DEB) : null;
  let names = [];
  try { names = readdirSync(join(REPO, 'dist')); } catch { /* no dist/ */ }
  const deb = names.filter((n) => /^tern-relay_.*_amd64\.deb$/.test(n)).sort().pop();
  return deb ? join(REPO, 'dist', deb) : null;
}

function skipReason() {
  const rootReason = debianRootSkipReason();
  if (rootReason) return rootReason;
  if (!existsSync('/usr/bin/chromium')) return "needs Debian's Chromium at /usr/bin/chromium (apt-get install chromium)";
  if (process.env.TERN_DEB && !findDeb()) return `TERN_DEB=${process.env.TERN_DEB} does not exist`;
  if (!findDeb()) return 'no dist/tern-relay_*_amd64.deb: run npm run dist first';
  return null;
}

/// Sockets bound to `port` on this network namespace (TCP listening, or UDP), from /proc/net.
function socketsOnPort(port) {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  const found = [];
  for (const f of ['tcp', 'tcp6', 'udp', 'udp6']) {
    let lines = [];
    try { lines = readFileSync(`/proc/net/${f}`, 'utf8').trim().split('\n').slice(1); } catch { continue; }
    for (const l of lines) {
      const cols = l.trim().split(/\s+/);
      const localPort = cols[1].split(':')[1];
      if (localPort === hex && (f.startsWith('udp') || cols[3] === '0A')) found.push(`${f} ${cols[1]}`);
    }
  }
  return found;
}

test('the .deb on a clean Debian 12: apt pulls in mosh, the relay gives the root\'s shell in Chromium, purge leaves nothing', {
  timeout: 15 * 60000,
}, async (t) => {
  const reason = skipReason();
  if (reason) { t.skip(reason); return; }
  const deb = findDeb();
  const t0 = Date.now();

  let tc = Date.now();
  await ensureCache();
  log(`root cache ${CACHE_TAR} ready: ${seconds(tc)}`);

  const droot = freshRoot('tern-deb-test-');
  const { root } = droot;
  let relay;
  let browser;
  try {
    tc = Date.now();
    await droot.extract();
    log(`root extraction: ${seconds(tc)} (${root})`);
    const debInRoot = `/tmp/${basename(deb)}`;
    copyFileSync(deb, join(root, debInRoot));

    // The package's paths the clean root already has (/usr, /usr/bin, the /lib link, ...): they
    // stay after the purge.
    const debPaths = (await run('dpkg-deb', ['-c', deb])).out.split('\n')
      .map((l) => l.match(/ \.(\/\S*?)\/?(?: -> \S+)?$/)?.[1]).filter(Boolean);
    const hadBefore = new Set(debPaths.filter((p) => lstatSync(join(root, p), { throwIfNoEntry: false })));

    const ns = await droot.start();
    // Fresh package lists: the cached ones go stale when Debian publishes a point release.
    tc = Date.now();
    await ns.run(['apt-get', '-q', 'update'], { env: { DEBIAN_FRONTEND: 'noninteractive' } });
    log(`apt-get update: ${seconds(tc)}`);
    assert.ok(!existsSync(join(root, 'usr/bin/mosh-server')), 'the clean root has no mosh-server before the install');

    tc = Date.now();
    const install = await ns.run(['apt-get', 'install', '-y', debInRoot], {
      env: { DEBIAN_FRONTEND: 'noninteractive' }, timeout: 10 * 60000,
    });
    log(`apt-get install -y ${debInRoot}: ${seconds(tc)}`);
    const newPackages = install.out.match(/The following NEW packages will be installed:\n((?: .*\n)+)/)?.[1]
      .trim().split(/\s+/) ?? [];
    log(`apt installed: ${newPackages.join(' ')}`);
    assert.ok(newPackages.includes('mosh'), `apt installs mosh (the Recommends) with tern-relay:\n${install.out}`);
    const status = await ns.run(['dpkg-query', '-W', '-f', '${Package} ${Status}\\n', 'tern-relay', 'mosh']);
    assert.match(status.out, /^tern-relay install ok installed$/m);
    assert.match(status.out, /^mosh install ok installed$/m);
    assert.ok(existsSync(join(root, 'usr/bin/mosh-server')), 'mosh-server is in the root after the install');
    assert.ok(lstatSync(join(root, 'usr/bin/tern')).isSymbolicLink(), '/usr/bin/tern is a link');
    assert.equal(readlinkSync(join(root, 'usr/bin/tern')), 'tern-relay');
    rmSync(join(root, debInRoot));

    // Installing started nothing and opened no port: the namespace holds only its PID 1 (and the
    // processes of that shell), and nothing listens on the relay's default port.
    const afterInstall = ns.processes();
    assert.deepEqual(afterInstall.filter((p) => /tern|mosh/.test(p.comm)), [],
      `no tern-relay or mosh-server runs after the install: ${JSON.stringify(afterInstall)}`);
    assert.deepEqual(afterInstall.filter((p) => p.pid !== ns.init), [],
      `the install left no process behind: ${JSON.stringify(afterInstall)}`);
    assert.deepEqual(socketsOnPort(7480), [], 'nothing listens on 7480 after the install');

    // A user of the root and a file only the root has.
    await ns.run(['useradd', '-m', '-s', '/bin/bash', USER]);
    const { uid, spec } = ns.user(USER);
    const marker = `tern-chroot-marker-${randomBytes(12).toString('hex')}`;
    assert.ok(!existsSync('/etc/tern-chroot-marker'), 'the host has no /etc/tern-chroot-marker');
    writeFileSync(join(root, 'etc/tern-chroot-marker'), `${marker}\n`, { mode: 0o644 });
    const skel = new Set(readdirSync(join(root, 'home', USER)));

    // The relay, as alice, on a free port.
    const port = await freePort();
    const token = `deb-test-${randomBytes(16).toString('hex')}`;
    tc = Date.now();
    const child = ns.spawn(['/usr/bin/tern-relay', '--listen', `127.0.0.1:${port}`, '--print-url'], {
      user: spec,
      env: { HOME: `/home/${USER}`, USER, LOGNAME: USER, PATH: '/usr/local/bin:/usr/bin:/bin', TERN_RELAY_TOKEN: token },
    });
    let relayLog = '';
    let relayOut = '';
    child.stdout.on('data', (d) => { relayOut += d; });
    child.stderr.on('data', (d) => { relayLog += d; });
    relay = { child, log: () => `${relayOut}${relayLog}` };
    const url = await until(() => {
      if (child.exitCode !== null) throw new Error(`tern-relay exited ${child.exitCode}:\n${relay.log()}`);
      return relayOut.match(/^Open (\S+)/m)?.[1];
    }, { timeout: 30000, what: "tern-relay's Open line", detail: relay.log }).catch((e) => {
      if (child.exitCode !== null) throw new Error(`tern-relay exited ${child.exitCode}:\n${relay.log()}`);
      throw e;
    });
    log(`relay start to URL: ${seconds(tc)}`);
    assert.match(relayOut.split('\n')[0], /^Open http:\/\/127\.0\.0\.1:\d+\/#token=/, 'the first stdout line is the URL');
    assert.equal(url, `http://127.0.0.1:${port}/#token=${token}`);
    const relayProc = ns.processes().find((p) => p.comm === 'tern-relay');
    assert.ok(relayProc, 'the relay runs inside the namespace');
    assert.equal(relayProc.uid, uid, `the relay runs as ${USER}`);

    // Chromium on the host: the shell is the root's, as alice.
    tc = Date.now();
    browser = await launchBrowser({ browser: 'chromium' });
    const { page } = browser;
    await page.goto(url);
    await waitForPrompt(page, 60000).catch(async (e) => {
      throw new Error(`${e.message}\n${await pageDetail(page)().catch(() => '')}\nrelay log:\n${relay.log()}\nconsole:\n${browser.consoleLog.join('\n')}`);
    });
    log(`page open to prompt: ${seconds(tc)}`);
    await typeLine(page, 'cat /etc/tern-chroot-marker');
    await until(async () => (await screen(page)).includes(marker), {
      timeout: 20000, what: 'the marker on the screen', detail: pageDetail(page),
    });
    await typeLine(page, 'echo "user=$(id -un) uid=$(id -u)"');
    await until(async () => (await screen(page)).includes(`user=${USER} uid=${uid}`), {
      timeout: 20000, what: `user=${USER} on the screen`, detail: pageDetail(page),
    });
    const shells = ns.processes().filter((p) => p.uid === uid);
    log(`alice's processes in the root: ${shells.map((p) => `${p.comm}(${p.pid})`).join(' ')}`);
    assert.ok(shells.some((p) => p.comm === 'mosh-server'), 'mosh-server runs in the root as alice');
    assert.ok(shells.some((p) => p.comm === 'bash'), "alice's bash runs in the root");
    await screenshotsOfState(page, 'deb-chroot-shell');
    log('screenshots: test-artifacts/deb-chroot-shell-{dark,light}-{desktop,phone}.png');
    await browser.close();
    browser = null;

    // Stop the relay (SIGTERM: nsenter passes no signal on, so the relay's own PID), then end the
    // shells it left running (mosh-servers outlive the relay by design).
    const exited = new Promise((r) => child.once('exit', r));
    process.kill(relayProc.pid, 'SIGTERM');
    await within(exited, 10000);
    assert.ok(child.exitCode !== null || child.signalCode !== null, `tern-relay ended on SIGTERM:\n${relay.log()}`);
    await ns.killUser(uid);

    // Purge; every file the package had is gone, and so is every directory no other package uses.
    const listed = (await ns.run(['dpkg', '-L', 'tern-relay'])).out.trim().split('\n').filter((p) => p && p !== '/.');
    const kinds = new Map(listed.map((p) => {
      // A directory may be a link to one in the root (merged /usr: /lib -> usr/lib).
      const st = lstatSync(join(root, p), { throwIfNoEntry: false });
      const isDir = statSync(join(root, p), { throwIfNoEntry: false })?.isDirectory();
      return [p, !st ? 'missing' : isDir ? 'dir' : st.isSymbolicLink() ? 'link' : 'file'];
    }));
    assert.ok(listed.includes('/usr/bin/tern-relay') && listed.includes('/usr/bin/tern'), `dpkg -L lists the binaries: ${listed}`);
    log(`dpkg -L tern-relay: ${listed.join(' ')}`);
    log(`of these, the clean root had: ${[...hadBefore].join(' ')}`);
    tc = Date.now();
    await ns.run(['apt-get', 'purge', '-y', 'tern-relay'], { env: { DEBIAN_FRONTEND: 'noninteractive' } });
    log(`apt-get purge -y tern-relay: ${seconds(tc)}`);
    const left = [];
    for (const p of listed) {
      if (!lstatSync(join(root, p), { throwIfNoEntry: false })) continue;
      const isDir = statSync(join(root, p), { throwIfNoEntry: false })?.isDirectory();
      if (kinds.get(p) !== 'dir' || !isDir) { left.push(`${p} (${kinds.get(p)})`); continue; }
      // A directory stays when the root had it before or another package owns it (/usr, ...).
      if (hadBefore.has(p)) continue;
      const owner = await ns.run(['dpkg-query', '-S', p], { ok: true });
      if (owner.code !== 0) left.push(`${p}/ (a directory no package owns: ${readdirSync(join(root, p)).join(' ') || 'empty'})`);
    }
    assert.deepEqual(left, [], 'purging tern-relay removes every file and directory of its own');
    const purged = await ns.run(['dpkg-query', '-W', '-f', '${Status}', 'tern-relay'], { ok: true });
    assert.ok(purged.code !== 0 || /not-installed/.test(purged.out), `dpkg forgot tern-relay: ${purged.out}${purged.err}`);

    // Nothing named after Tern anywhere in the root outside the user's home. What the relay made as
    // alice in /home/alice is hers (her data, as any program's files in a home are): its state
    // dir ~/.local/state/tern-relay (sessions, token-less records), pastes, a ~/.local/bin/tern
    // link; the test lists them and leaves them be.
    const found = await run('find', [root, '-xdev', '(', '-name', '*tern-relay*', '-o', '-name', 'tern', ')',
      '-not', '-path', '*/home/*', '-not', '-path', '*/proc/*']);
    assert.equal(found.out.trim(), '', 'no file named tern-relay or tern remains outside /home');
    const home = join(root, 'home', USER);
    const mine = (await run('find', [home, '-mindepth', '1'])).out.trim().split('\n').filter(Boolean)
      .map((p) => p.slice(home.length + 1)).filter((p) => !skel.has(p.split('/')[0]))
      .map((p) => {
        // The relay's `tern` links point at /usr/bin/tern-relay: dangling once the package is gone.
        const st = lstatSync(join(home, p));
        if (!st.isSymbolicLink()) return st.isDirectory() ? `${p}/` : p;
        const target = readlinkSync(join(home, p));
        const dangling = !existsSync(join(root, target.startsWith('/') ? target : join(dirname(`/home/${USER}/${p}`), target)));
        return `${p} -> ${target}${dangling ? ' (dangling)' : ''}`;
      });
    log(`left in /home/${USER} (the user's data, not the package's):${mine.map((m) => `\n  ${m}`).join('') || ' nothing'}`);
    log(`total: ${seconds(t0)}`);
  } finally {
    await browser?.close().catch(() => {});
    if (relay && relay.child.exitCode === null) relay.child.kill('SIGKILL');
    // The root's mounts lived in the namespace only: destroy() throws (keeping the directory) if
    // any leaked onto the host.
    await droot.destroy();
  }
});
