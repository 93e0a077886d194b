// A clean Debian 12 root for the dist tests and benchmarks (tests/dist/deb.test.mjs,
// tests/dist/install-bench.mjs): made once with Debian's debootstrap and cached as a tar,
// extracted fresh for each use, its processes kept in a mount and PID namespace of their own, and
// removed at the end with nothing left mounted or running.
//
// The cache: `debootstrap --variant=minbase bookworm` from http://deb.debian.org/debian, after
// `apt-get update` in it, kept as a tar in ${TERN_DEBIAN_ROOT_CACHE:-/var/cache/tern-tests}/
// bookworm-minbase-amd64.tar (made once, a few minutes, under a flock; delete it to make a new
// one). TERN_DEBIAN_MIRROR names another Debian mirror.
//
// Isolation: the root's processes run in a mount and PID namespace of their own (`unshare --mount
// --pid --fork --propagation private --mount-proc=ROOT/proc`), whose PID 1 is a small shell that
// binds /dev and mounts a devpts instance of its own in the root (mosh-server needs ptys); commands
// enter it with `nsenter --mount --pid` and `chroot ROOT`. The network namespace is the host's, so
// the host reaches servers in the root on 127.0.0.1 and the root reaches the host's. Nothing is
// mounted in the host's namespace; killing that PID 1 ends every process of the root and, with
// them, its mounts. The PID 1 shell also exits when its stdin (this node process) goes away, and
// unshare runs with --kill-child, so a crashed caller leaves no process behind either (only the
// temporary directory).
//
// Usage:
//   const reason = debianRootSkipReason();           // null, or why it cannot run here
//   await ensureCache();
//   const droot = freshRoot('tern-something-');       // a temporary dir; droot.root is the root
//   await droot.extract();                            // the cached tar into it (+ resolv.conf)
//   const ns = await droot.start();                   // the namespace; ns.run([...]), ns.spawn([...])
//   ...
//   await droot.destroy();                            // always (finally): kill, unmount, remove
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  existsSync, readdirSync, readFileSync, readlinkSync, copyFileSync, rmSync, mkdtempSync, mkdirSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep, until } from '../until.mjs';

export const CACHE_DIR = process.env.TERN_DEBIAN_ROOT_CACHE || '/var/cache/tern-tests';
export const CACHE_TAR = join(CACHE_DIR, 'bookworm-minbase-amd64.tar');
export const MIRROR = process.env.TERN_DEBIAN_MIRROR || 'http://deb.debian.org/debian';
/// PATH for commands run in the root (as root).
export const ROOT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';


/// Resolves when `promise` does or after `ms`, whichever is first (no timer left behind).
export function within(promise, ms) {
  let timer;
  return Promise.race([promise, new Promise((r) => { timer = setTimeout(r, ms); })]).finally(() => clearTimeout(timer));
}


export function onPath(cmd) {
  return (process.env.PATH || '/usr/sbin:/usr/bin:/sbin:/bin').split(':').some((d) => d && existsSync(join(d, cmd)));
}

/// Why a clean root cannot be made and entered here (null when it can).
export function debianRootSkipReason() {
  if (process.platform !== 'linux' || process.arch !== 'x64') return 'needs Linux on amd64 (the root is amd64)';
  if (process.getuid() !== 0) return 'needs root (debootstrap, unshare --mount --pid, chroot)';
  for (const cmd of ['debootstrap', 'unshare', 'nsenter', 'chroot', 'flock', 'tar']) {
    if (!onPath(cmd)) return `needs ${cmd} on PATH${cmd === 'debootstrap' ? ' (apt-get install debootstrap)' : ''}`;
  }
  return null;
}

/// Runs a command to its end; resolves { code, out, err } (rejects on a nonzero status unless
/// `ok: true`, with the output in the message). `echo` streams its output to stdout, indented.
export function run(cmd, args, { ok = false, echo = false, timeout = 300000 } = {}) {
  return new Promise((res, rej) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; if (echo) process.stdout.write(String(d).replace(/^(?=.)/gm, '  ')); });
    child.stderr.on('data', (d) => { err += d; if (echo) process.stdout.write(String(d).replace(/^(?=.)/gm, '  ')); });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
    child.once('error', (e) => { clearTimeout(timer); rej(e); });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0 || ok) return res({ code, out, err });
      const tail = (s) => s.split('\n').slice(-60).join('\n');
      rej(new Error(`${cmd} ${args.join(' ')}: ${signal ? `killed by ${signal}` : `exit ${code}`}\n` +
        `--- stdout ---\n${tail(out)}\n--- stderr ---\n${tail(err)}`));
    });
  });
}

/// The cached root's tar, made under a lock if it is not there yet: debootstrap runs in a mount
/// namespace of its own, so whatever it mounts in the root goes away with it.
export async function ensureCache({ echo = true } = {}) {
  const script = `
set -euo pipefail
cache_dir=$1 tar=$2 mirror=$3
mkdir -p "$cache_dir"
exec 9>"$tar.lock"
flock 9
if [ -s "$tar" ]; then exit 0; fi
echo "making $tar: debootstrap --variant=minbase bookworm from $mirror (a few minutes, once)"
work=$(mktemp -d "$cache_dir/build.XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
unshare --mount --propagation private -- bash -euo pipefail -c '
  root=$1 mirror=$2
  debootstrap --variant=minbase --arch=amd64 bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
    { tail -n 40 "$root.debootstrap.log"; exit 1; }
  security=\${mirror%/debian}/debian-security
  printf "%s\\n" "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \\
    "deb $security bookworm-security main" >"$root/etc/apt/sources.list"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  mount -t proc proc "$root/proc"
  chroot "$root" env -i PATH=${ROOT_PATH} DEBIAN_FRONTEND=noninteractive apt-get -q update
  chroot "$root" apt-get clean
  umount "$root/proc"
' _ "$work/root" "$mirror"
tar --numeric-owner --xattrs -C "$work/root" -cpf "$tar.partial" .
mv "$tar.partial" "$tar"
echo "made $tar ($(du -h "$tar" | cut -f1))"
`;
  await run('bash', ['-c', script, '_', CACHE_DIR, CACHE_TAR, MIRROR], { echo, timeout: 20 * 60000 });
}

/// Mounts (in the host's namespace) at or below `dir`.
export function hostMountsUnder(dir) {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
    .map((l) => l.split(' ')[4]).filter((m) => m && (m === dir || m.startsWith(`${dir}/`)));
}

/// The namespace the root's processes live in: `init` is the host PID of its PID 1.
export async function startNamespace(root) {
  const script = `
set -eu
root=$1
mount --rbind /dev "$root/dev"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts "$root/dev/pts"
mount --bind "$root/dev/pts/ptmx" "$root/dev/ptmx"
echo ready
# PID 1 of the namespace until the caller ends it, or its stdin (the caller) goes away. bash reaps
# the orphans the namespace hands it (mosh-server detaches from the relay).
while :; do rc=0; read -r -t 1 _ || rc=$?; if [ "$rc" -ne 0 ] && [ "$rc" -le 128 ]; then exit 0; fi; done
`;
  const child = spawn('unshare', [
    '--mount', '--pid', '--fork', '--kill-child', '--propagation', 'private', `--mount-proc=${root}/proc`,
    'bash', '-c', script, '_', root,
  ], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const stopChild = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL'); // --kill-child: its child (the PID 1) goes with it
    await within(exited, 10000);
  };
  let init;
  let pidns;
  try {
    await until(() => out.includes('ready') || child.exitCode !== null, { timeout: 20000, what: 'the namespace' });
    if (!out.includes('ready')) throw new Error(`the namespace did not start: ${out}`);
    const children = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/).map(Number);
    assert.equal(children.length, 1, `unshare has one child (the namespace's PID 1): ${children}`);
    init = children[0];
    pidns = readlinkSync(`/proc/${init}/ns/pid`);
    assert.notEqual(pidns, readlinkSync('/proc/self/ns/pid'), 'the root has a PID namespace of its own');
    assert.notEqual(readlinkSync(`/proc/${init}/ns/mnt`), readlinkSync('/proc/self/ns/mnt'), 'and a mount namespace');
    assert.equal(readlinkSync(`/proc/${init}/ns/net`), readlinkSync('/proc/self/ns/net'), "and the host's network");
  } catch (e) {
    await stopChild();
    throw e;
  }
  return {
    child, init, pidns, root,
    /// nsenter's argv for `args` run in the root (as root, or as `user`: "UID:GID") with a clean
    /// environment: PATH (root's), LANG=C.UTF-8, HOME=/root, then `env`.
    argv(args, { user, env = {} } = {}) {
      const envv = Object.entries({ PATH: ROOT_PATH, LANG: 'C.UTF-8', HOME: '/root', ...env }).map(([k, v]) => `${k}=${v}`);
      return ['--target', String(init), '--mount', '--pid', '--', 'chroot',
        ...(user ? [`--userspec=${user}`] : []), root, 'env', '-i', ...envv, ...args];
    },
    /// Runs `args` in the root to its end (see `run` for the options, `argv` for user and env).
    run(args, opts = {}) { return run('nsenter', this.argv(args, opts), opts); },
    /// Starts `args` in the root; the child is nsenter (which passes no signal on: kill a process
    /// of the root by its own PID, found with `processes()`).
    spawn(args, { user, env, stdio = ['ignore', 'pipe', 'pipe'] } = {}) {
      return spawn('nsenter', this.argv(args, { user, env }), { stdio });
    },
    /// { uid, gid, spec: "UID:GID", home } of a user of the root, from its /etc/passwd.
    user(name) {
      const pw = readFileSync(join(root, 'etc/passwd'), 'utf8').split('\n').find((l) => l.startsWith(`${name}:`));
      if (!pw) throw new Error(`no user ${name} in ${root}/etc/passwd`);
      const f = pw.split(':');
      return { uid: Number(f[2]), gid: Number(f[3]), spec: `${f[2]}:${f[3]}`, home: f[5] };
    },
    /// The namespace's processes, seen from the host: { pid (host), comm, uid, state, cmdline }.
    processes() {
      const procs = [];
      for (const name of readdirSync('/proc')) {
        if (!/^\d+$/.test(name)) continue;
        try {
          if (readlinkSync(`/proc/${name}/ns/pid`) !== pidns) continue;
          const status = readFileSync(`/proc/${name}/status`, 'utf8');
          procs.push({
            pid: Number(name),
            comm: readFileSync(`/proc/${name}/comm`, 'utf8').trim(),
            uid: Number(status.match(/^Uid:\s+(\d+)/m)[1]),
            state: status.match(/^State:\s+(\S)/m)[1],
            cmdline: readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ').trim(),
          });
        } catch { /* gone meanwhile */ }
      }
      return procs;
    },
    /// Sends `signal` to the namespace's processes that `filter` picks (never its PID 1); resolves
    /// the ones it signalled.
    kill(filter, signal = 'SIGKILL') {
      const hit = this.processes().filter((p) => p.pid !== init && filter(p));
      for (const p of hit) {
        try { process.kill(p.pid, signal); } catch { /* gone */ }
      }
      return hit;
    },
    /// Kills every process of `uid` in the root and waits until none is left (zombies aside).
    async killUser(uid, { timeout = 10000 } = {}) {
      this.kill((p) => p.uid === uid);
      await until(() => this.processes().filter((p) => p.uid === uid && p.state !== 'Z').length === 0 ||
        (this.kill((p) => p.uid === uid), false), {
        timeout, what: `uid ${uid}'s processes to end`, detail: () => JSON.stringify(this.processes()),
      });
    },
    /// Ends the namespace: kills its PID 1, and with it every process of the root and its mounts.
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      try { process.kill(init, 'SIGKILL'); } catch { /* gone */ }
      await within(exited, 10000);
      if (child.exitCode === null && child.signalCode === null) await stopChild();
    },
  };
}

/// A fresh root in a new temporary directory (`work`, from mkdtemp with `prefix`; the root is
/// `work/root`). Call `destroy()` in a finally whatever happened.
export function freshRoot(prefix = 'tern-debian-root-') {
  const work = mkdtempSync(join(tmpdir(), prefix));
  const root = join(work, 'root');
  return {
    work, root, ns: null,
    /// Extracts `tar` (default the cache) into the root and copies the host's resolv.conf in.
    async extract(tar = CACHE_TAR) {
      mkdirSync(root);
      await run('tar', ['--numeric-owner', '--xattrs', '-C', root, '-xpf', tar]);
      copyFileSync('/etc/resolv.conf', join(root, 'etc/resolv.conf'));
    },
    /// The namespace (see startNamespace), kept as `ns` for destroy().
    async start() {
      this.ns = await startNamespace(root);
      return this.ns;
    },
    /// Ends the namespace, then removes the directory, unless something is still mounted under it
    /// on the host (never remove a tree with anything mounted): then it throws, keeping it.
    async destroy() {
      await this.ns?.stop();
      const mounted = await until(() => hostMountsUnder(work).length === 0 || null, { timeout: 5000, what: 'no mounts' })
        .then(() => [], () => hostMountsUnder(work));
      if (mounted.length) throw new Error(`mounts leaked onto the host, ${work} kept: ${mounted.join(' ')}`);
      rmSync(work, { recursive: true, force: true });
    },
  };
}
