// Benchmark row: time from a clean Debian root with mosh to the printed URL through install.sh
// from a local mirror (target ≤ 10 s).
//
//   node tests/dist/install-bench.mjs [--runs N] [--json]     (as root; `npm run dist` first)
//
// Prepare (not timed; its time is printed and reported as prepare_ms): a fresh Debian 12 minbase
// root from the cached debootstrap tar (./debian-root.mjs), `apt-get update` and `apt-get install
// -y mosh curl ca-certificates` in it (the person already has mosh and curl), and a user bob
// (`useradd -m -s /bin/bash bob`). That prepared root is saved as a tar in a temporary directory.
//
// The mirror: a node HTTP server in this process on 127.0.0.1 serving dist/ (install.sh,
// SHA256SUMS, the tarballs) as a release host would. The root shares the host's network
// namespace, so curl in it reaches the server.
//
// Each run (N, default 3) starts from a fresh extraction of the prepared tar (a new root directory,
// a new mount+PID namespace; the extraction, about a second, is not timed): nothing of an earlier
// run (bob's home, the installed binary, the relay's state, a warm /tmp) can help a later one.
// Only the page cache is shared, as it would be on a machine that just installed mosh. Timed, as
// bob in the root, with HOME=/home/bob, PATH=/usr/local/bin:/usr/bin:/bin and LANG=C.UTF-8 only:
//
//   sh -c 'curl -fsSL http://127.0.0.1:PORT/install.sh | sh -s -- --from http://127.0.0.1:PORT &&
//          ~/.local/bin/tern-relay --listen 127.0.0.1:0'
//
// from spawning it until the relay's `Open http://...` line arrives on its stdout (total_ms).
// Every stdout line is timestamped as it arrives: install_ms is the last line before the Open line
// (install.sh's output ends with its "Next:" lines, printed just before it exits), relay_start_ms
// is total_ms - install_ms (the relay's start to its URL). The printed URL's `/` is then fetched
// from the host and must be the real page (it names app.js): a run whose page fails is an error,
// not a number.
//
// Output: human lines; with --json, a single JSON object as the last stdout line:
//   {"runs":[{"total_ms":..,"install_ms":..,"relay_start_ms":..}],"median_total_ms":..,
//    "prepare_ms":..,"tarball_bytes":..,"deb_bytes":..}
// Exit status: 0, 1 on a failed run, 2 when it cannot run here (not root, no debootstrap,
// unshare, nsenter; no dist/). Everything it made (processes, namespaces, the server, temporary
// directories) is removed on the way out, also on failure or Ctrl-C.
//
// Environment: as ./debian-root.mjs (TERN_DEBIAN_ROOT_CACHE, TERN_DEBIAN_MIRROR).
import { createServer } from 'node:http';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, createReadStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname, basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import {
  CACHE_TAR, debianRootSkipReason, ensureCache, freshRoot, run, hostMountsUnder,
} from './debian-root.mjs';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DIST = join(REPO, 'dist');
const TARGET = 'x86_64-unknown-linux-musl';
const TARBALL = `tern-relay-${TARGET}.tar.gz`;
const USER = 'bob';
const URL_TIMEOUT_MS = 60000;

function usage() {
  return 'usage: node tests/dist/install-bench.mjs [--runs N] [--json]';
}

function parseArgs(argv) {
  const opts = { runs: 3, json: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') opts.json = true;
    else if (a === '--runs' || a.startsWith('--runs=')) {
      const v = a === '--runs' ? argv[++i] : a.slice('--runs='.length);
      if (!/^[1-9]\d*$/.test(v ?? '')) { console.error(`--runs needs a positive whole number\n${usage()}`); process.exit(2); }
      opts.runs = Number(v);
    } else if (a === '-h' || a === '--help') { console.log(usage()); process.exit(0); }
    else { console.error(`unknown argument ${a}\n${usage()}`); process.exit(2); }
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const log = (line) => console.log(line);
const secs = (ms) => `${(ms / 1000).toFixed(2)} s`;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// --- can it run here --------------------------------------------------------------------------
function cannotRun() {
  const reason = debianRootSkipReason();
  if (reason) return reason;
  const missing = ['install.sh', 'SHA256SUMS', TARBALL].filter((f) => !existsSync(join(DIST, f)));
  if (missing.length) return `dist/ lacks ${missing.join(', ')}: run npm run dist (bash scripts/dist.sh) first`;
  return null;
}
const reason = cannotRun();
if (reason) {
  console.error(`install-bench: cannot run: ${reason}`);
  process.exit(2);
}

// --- clean-up, whatever happens ---------------------------------------------------------------
const cleanups = []; // async functions, run last-in first-out
let cleaning = null;
function cleanup() {
  cleaning ??= (async () => {
    const errors = [];
    while (cleanups.length) {
      try { await cleanups.pop()(); } catch (e) { errors.push(e); }
    }
    return errors;
  })();
  return cleaning;
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(sig, async () => {
    console.error(`install-bench: ${sig}, cleaning up`);
    for (const e of await cleanup()) console.error(`install-bench: clean-up: ${e.message}`);
    process.exit(128 + ({ SIGINT: 2, SIGTERM: 15, SIGHUP: 1 })[sig]);
  });
}
/// A fresh root whose destroy() is registered for clean-up (and dropped from it once done).
function trackedRoot(prefix) {
  const droot = freshRoot(prefix);
  const destroy = () => droot.destroy();
  cleanups.push(destroy);
  return {
    droot,
    async destroy() {
      const i = cleanups.indexOf(destroy);
      if (i >= 0) cleanups.splice(i, 1);
      await droot.destroy();
    },
  };
}

// --- the mirror -------------------------------------------------------------------------------
/// dist/ over HTTP on 127.0.0.1; `requests` lists what was asked for (path and status).
async function startMirror() {
  const files = new Set(readdirSync(DIST).filter((f) => statSync(join(DIST, f)).isFile()));
  const requests = [];
  const server = createServer((req, res) => {
    const name = decodeURIComponent(req.url.split('?')[0]).replace(/^\/+/, '');
    if (req.method !== 'GET' || !files.has(name)) {
      requests.push(`${req.method} ${req.url} 404`);
      res.writeHead(404).end('not found\n');
      return;
    }
    requests.push(`GET /${name} 200`);
    res.writeHead(200, {
      'content-type': name.endsWith('.sh') ? 'text/x-shellscript' : 'application/octet-stream',
      'content-length': statSync(join(DIST, name)).size,
    });
    createReadStream(join(DIST, name)).pipe(res);
  });
  await new Promise((r, j) => { server.once('error', j); server.listen(0, '127.0.0.1', r); });
  cleanups.push(() => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }));
  return { url: `http://127.0.0.1:${server.address().port}`, requests };
}

// --- prepare ----------------------------------------------------------------------------------
/// The prepared root (mosh, curl, ca-certificates, bob) as a tar in a temporary directory.
async function prepare() {
  let t = performance.now();
  await ensureCache();
  log(`root cache ${CACHE_TAR} ready: ${secs(performance.now() - t)}`);

  const snapDir = mkdtempSync(join(tmpdir(), 'tern-install-bench-snap-'));
  cleanups.push(async () => rmSync(snapDir, { recursive: true, force: true }));
  const snapshot = join(snapDir, 'prepared.tar');

  const prep = trackedRoot('tern-install-bench-prep-');
  try {
    t = performance.now();
    await prep.droot.extract();
    log(`prepare: root extraction ${secs(performance.now() - t)}`);
    const ns = await prep.droot.start();
    const apt = { env: { DEBIAN_FRONTEND: 'noninteractive' }, timeout: 10 * 60000 };
    const t0 = performance.now();
    await ns.run(['apt-get', '-q', 'update'], apt);
    const updateMs = performance.now() - t0;
    t = performance.now();
    const install = await ns.run(['apt-get', 'install', '-y', 'mosh', 'curl', 'ca-certificates'], apt);
    const installMs = performance.now() - t;
    const prepareMs = performance.now() - t0;
    const newPackages = install.out.match(/The following NEW packages will be installed:\n((?: .*\n)+)/)?.[1]
      .trim().split(/\s+/) ?? [];
    log(`prepare: apt-get update ${secs(updateMs)}, apt-get install -y mosh curl ca-certificates ` +
      `${secs(installMs)} (${newPackages.length} packages); together ${secs(prepareMs)} (prepare_ms, not in the runs)`);
    for (const cmd of ['mosh-server', 'curl']) {
      if (!existsSync(join(prep.droot.root, 'usr/bin', cmd))) throw new Error(`no /usr/bin/${cmd} in the root after apt-get install`);
    }
    await ns.run(['apt-get', 'clean']);
    await ns.run(['useradd', '-m', '-s', '/bin/bash', USER]);
    await ns.stop();

    t = performance.now();
    await run('tar', ['--numeric-owner', '--xattrs', '-C', prep.droot.root, '-cpf', snapshot, '.']);
    log(`prepare: saved the prepared root as ${snapshot} (${(statSync(snapshot).size / 2 ** 20).toFixed(0)} MiB, ` +
      `${secs(performance.now() - t)})`);
    return { snapshot, prepareMs };
  } finally {
    await prep.destroy();
  }
}

// --- one run ----------------------------------------------------------------------------------
async function oneRun(i, snapshot, mirror) {
  const r = trackedRoot('tern-install-bench-');
  let child;
  try {
    let t = performance.now();
    await r.droot.extract(snapshot);
    const ns = await r.droot.start();
    const bob = ns.user(USER);
    if (existsSync(join(r.droot.root, 'home', USER, '.local'))) throw new Error(`/home/${USER} is not fresh`);
    const extractMs = performance.now() - t;

    const base = mirror.url;
    const script = `curl -fsSL ${base}/install.sh | sh -s -- --from ${base} && ~/.local/bin/tern-relay --listen 127.0.0.1:0 --print-url`;
    const firstRequest = mirror.requests.length;
    const lines = []; // { t (ms since the start), line }
    let out = '';
    let err = '';
    let pending = '';
    const t0 = performance.now();
    child = ns.spawn(['sh', '-c', script], {
      user: bob.spec,
      env: { HOME: `/home/${USER}`, PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8' },
    });
    const found = new Promise((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`no Open line within ${URL_TIMEOUT_MS / 1000} s`)), URL_TIMEOUT_MS);
      child.stdout.on('data', (d) => {
        const now = performance.now() - t0;
        out += d;
        pending += d;
        const parts = pending.split('\n');
        pending = parts.pop();
        for (const line of parts) {
          lines.push({ t: now, line });
          if (/^Open http:\/\//.test(line)) { clearTimeout(timer); res(now); }
        }
      });
      child.stderr.on('data', (d) => { err += d; });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        rej(new Error(`the command ended (${signal ?? `exit ${code}`}) before the relay printed its URL`));
      });
      child.once('error', (e) => { clearTimeout(timer); rej(e); });
    });
    const totalMs = await found.catch((e) => {
      throw new Error(`run ${i}: ${e.message}\n--- stdout ---\n${out}${pending}\n--- stderr ---\n${err}`);
    });

    const openAt = lines.findIndex((l) => /^Open http:\/\//.test(l.line));
    const url = lines[openAt].line.match(/^Open (\S+)/)[1];
    const before = lines.slice(0, openAt);
    if (!before.some((l) => l.line === 'Next:')) {
      throw new Error(`run ${i}: install.sh printed no "Next:" before the relay's URL:\n${out}`);
    }
    const installMs = before[before.length - 1].t;
    const relayStartMs = totalMs - installMs;
    const fetched = mirror.requests.slice(firstRequest);
    for (const f of ['/install.sh', '/SHA256SUMS', `/${TARBALL}`]) {
      if (!fetched.includes(`GET ${f} 200`)) throw new Error(`run ${i}: the mirror never served ${f}: ${fetched.join(', ')}`);
    }
    if (!existsSync(join(r.droot.root, 'home', USER, '.local/bin/tern-relay'))) {
      throw new Error(`run ${i}: no /home/${USER}/.local/bin/tern-relay after install.sh`);
    }
    const relayProc = ns.processes().find((p) => p.comm === 'tern-relay');
    if (!relayProc || relayProc.uid !== bob.uid) {
      throw new Error(`run ${i}: no tern-relay of ${USER} in the root: ${JSON.stringify(ns.processes())}`);
    }

    // The page, from the host.
    const pageUrl = new URL('/', url).href;
    let body;
    try {
      const res = await fetch(pageUrl, { signal: AbortSignal.timeout(10000) });
      body = await res.text();
      if (res.status !== 200) throw new Error(`status ${res.status}`);
    } catch (e) {
      throw new Error(`run ${i}: fetching ${pageUrl} from the host failed: ${e.message}\n${out}${err}`);
    }
    if (!/app\.[0-9a-f]{8}\.js/.test(body)) {
      throw new Error(`run ${i}: ${pageUrl} is not Tern's page (no app.js in it): ${body.slice(0, 300)}`);
    }

    log(`run ${i}: ${secs(totalMs)} to the URL (install.sh ${secs(installMs)}, relay start to URL ` +
      `${secs(relayStartMs)}); page ok (${body.length} bytes, ${pageUrl}); ` +
      `fresh root extracted in ${secs(extractMs)} (not timed); mirror served ${fetched.join(', ')}`);
    // Rounded so that install_ms + relay_start_ms = total_ms.
    return { total_ms: Math.round(totalMs), install_ms: Math.round(installMs), relay_start_ms: Math.round(totalMs) - Math.round(installMs) };
  } finally {
    // Ending the namespace ends the relay and everything else of the run; nsenter goes with them.
    try {
      await r.destroy();
    } finally {
      if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }
}

// --- main -------------------------------------------------------------------------------------
async function main() {
  const tarballBytes = statSync(join(DIST, TARBALL)).size;
  const deb = readdirSync(DIST).filter((n) => /^tern-relay_.*_amd64\.deb$/.test(n)).sort().pop();
  const debBytes = deb ? statSync(join(DIST, deb)).size : null;
  log(`install.sh from a local mirror of dist/ into a clean Debian 12 root with mosh, ${opts.runs} run(s), ` +
    `each in a fresh extraction of the prepared root`);
  log(`dist/${TARBALL}: ${tarballBytes} bytes; ${deb ? `dist/${deb}: ${debBytes} bytes` : 'no amd64 .deb in dist/'}`);

  const { snapshot, prepareMs } = await prepare();
  const mirror = await startMirror();
  log(`mirror: ${mirror.url} (dist/)`);

  const runs = [];
  for (let i = 1; i <= opts.runs; i++) runs.push(await oneRun(i, snapshot, mirror));
  const med = median(runs.map((r) => r.total_ms));
  log(`median: ${secs(med)} from a clean root with mosh to the printed URL (target ≤ 10 s: ${med <= 10000 ? 'met' : 'NOT met'}); ` +
    `install.sh ${secs(median(runs.map((r) => r.install_ms)))}, relay start ${secs(median(runs.map((r) => r.relay_start_ms)))} (medians)`);
  return {
    runs, median_total_ms: med, prepare_ms: Math.round(prepareMs), tarball_bytes: tarballBytes, deb_bytes: debBytes,
  };
}

let result;
let failed = null;
try {
  result = await main();
} catch (e) {
  failed = e;
}
const cleanupErrors = await cleanup();
for (const e of cleanupErrors) console.error(`install-bench: clean-up: ${e.message}`);
const leftMounts = hostMountsUnder(tmpdir()).filter((m) => basename(m).startsWith('tern-install-bench') || m.includes('/tern-install-bench'));
if (leftMounts.length) console.error(`install-bench: mounts left: ${leftMounts.join(' ')}`);
if (failed) {
  console.error(`install-bench: failed: ${failed.stack || failed.message}`);
  process.exit(1);
}
if (cleanupErrors.length || leftMounts.length) process.exit(1);
if (opts.json) console.log(JSON.stringify(result));
