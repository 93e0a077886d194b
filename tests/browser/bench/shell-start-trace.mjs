// Where a new session's "first frame -> prompt" goes (issue 36): a relay in spawn mode with its
// warm spare, the spare's mosh-server traced with strace (its process tree: the recorder, the
// shell), and a new tab (headless Chromium, fresh profile, `#session=new`) that takes the spare.
// Everything on one wall-clock time line (strace's -tt times, the page's timeOrigin + marks):
//
//   first client datagram read by mosh-server -> `tern-relay record` exec -> the shell's exec ->
//   the shell's first write to the pty (its prompt) -> mosh-server's first datagram after it ->
//   the page's first frame and its prompt on the screen.
//
// With the relay's pre-start (the default) the shell's stages come before the page's first
// datagram (negative offsets from it). strace slows what it traces (each traced syscall stops the
// process): the shell's own time is an upper bound. Prints one table per load; asserts nothing.
//
//   node tests/browser/bench/shell-start-trace.mjs [--loads 3] [--relay-args "--no-spare-prestart"]
import { spawn, execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  startRelay, stopRelay, launchBrowser, newSession, tempDir, cleanupState, cliArg, freePort, sleep, until, stats,
} from '../lib/helpers.mjs';

const LOADS = Number(cliArg('loads', 3));
const RELAY_ARGS = cliArg('relay-args', '').split(' ').filter(Boolean);

/// The spare: the detached mosh-server of `stateDir` that no session record names.
function spareOf(stateDir) {
  const needle = join(stateDir, 'sessions');
  const recorded = new Set();
  try {
    for (const f of readdirSync(needle)) {
      if (!f.endsWith('.json')) continue;
      try { recorded.add(JSON.parse(readFileSync(join(needle, f), 'utf8')).pid); } catch { /* being written */ }
    }
  } catch { /* none yet */ }
  const parent = new Map();
  const servers = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      const args = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      if (args[0].endsWith('mosh-server') && args.includes(needle)) servers.push(Number(name));
    } catch { /* gone */ }
  }
  return servers.find((p) => !recorded.has(p) && !servers.includes(parent.get(p)) && parent.get(p) === 1) ?? null;
}

/// strace's `HH:MM:SS.uuuuuu` today as epoch ms.
function epochOf(hms) {
  const [h, m, s] = hms.split(':');
  const d = new Date();
  d.setUTCHours(Number(h), Number(m), 0, 0);
  return d.getTime() + Number(s) * 1000;
}

/// The stages from strace's output (`-f -tt`, lines `PID HH:MM:SS.uuuuuu syscall...`).
function stagesOf(trace, serverPid) {
  // `[pid N] HH:MM:SS.uuuuuu call` (or without the prefix: the first traced process).
  const lines = trace.split('\n').map((l) => /^(?:\[pid\s+(\d+)\]\s+)?(\d\d:\d\d:\d\d\.\d+)\s+(.*)$/.exec(l)).filter(Boolean)
    .map(([, pid, t, call]) => ({ pid: pid ? Number(pid) : serverPid, at: epochOf(t), call }));
  const first = (pred) => lines.find(pred)?.at ?? NaN;
  const recorderPid = lines.find((l) => l.call.startsWith('execve(') && /tern-relay/.test(l.call) && / = 0$/.test(l.call))?.pid;
  // The shell: the first successful exec of a program named like one (not setsid running it).
  const shellExec = lines.find((l) => /^execve\("[^"]*\/(ba|da|z|fi)?sh"/.test(l.call) && / = 0$/.test(l.call));
  const datagramIn = first((l) => l.pid === serverPid && /^recv(from|msg)\(/.test(l.call) && !/= -1/.test(l.call));
  const recorder = first((l) => l.pid === recorderPid && l.call.startsWith('execve('));
  const shell = shellExec?.at ?? NaN;
  const promptWrite = first((l) => shellExec && l.pid === shellExec.pid && l.at >= shell && /^write\(\d+, ".*[$#] ",/.test(l.call));
  const frameOut = first((l) => l.pid === serverPid && l.at >= promptWrite && /^send(to|msg)\(/.test(l.call));
  return { datagramIn, recorder, shell, promptWrite, frameOut };
}

const stateDir = tempDir('tern-shell-trace-');
const token = `shell-trace-${Math.random().toString(36).slice(2)}`;
const relay = await startRelay({ port: await freePort(), token, stateDir, args: RELAY_ARGS });
try {
  // Demand (as a page makes it), then one untimed load: the OS's caches warm.
  await fetch(`${new URL(relay.url).origin}/api/info`, { headers: { authorization: `Bearer ${token}` } });
  for (let n = 0; n <= LOADS; n++) {
    await until(() => spareOf(stateDir) !== null, { timeout: 20000, what: 'a spare' });
    const pid = spareOf(stateDir);
    // The pre-start releases the shell at once: trace from the spare's start is too late for it,
    // so with it on the stages before the page come from /proc (the shell's start time) only.
    // mosh-server and the child it forked at its start (it waits to run the command).
    const children = readdirSync('/proc').filter((n) => /^\d+$/.test(n)).filter((n) => {
      try { const st = readFileSync(`/proc/${n}/stat`, 'utf8'); return Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]) === pid; } catch { return false; }
    });
    const strace = spawn('strace', ['-f', '--seccomp-bpf', '-tt', '-s', '64', '-e',
      'trace=execve,recvfrom,recvmsg,sendto,sendmsg,write', '-p', String(pid), ...children.flatMap((c) => ['-p', c])],
    { stdio: ['ignore', 'ignore', 'pipe'] });
    let trace = '';
    strace.stderr.on('data', (d) => { trace += d; });
    await until(() => trace.includes('attached') || trace.includes('Process'), { timeout: 5000, what: 'strace attached' });
    await sleep(200);
    const browser = await launchBrowser({ viewport: { width: 1000, height: 640 } });
    let page;
    try {
      page = browser.page;
      await page.goto(newSession(relay.url));
      const promptAt = await page.evaluate(() => new Promise((resolve) => {
        const look = () => {
          if (/[$#] ?$/m.test(window.tern?.screenText?.() ?? '')) resolve(performance.timeOrigin + performance.now());
          else setTimeout(look, 2);
        };
        look();
      }));
      const s = await stats(page);
      const origin = await page.evaluate(() => performance.timeOrigin);
      await sleep(300);
      strace.kill('SIGINT');
      await new Promise((r) => strace.once('exit', r));
      const st = stagesOf(trace, pid);
      if (process.env.TRACE_DUMP) console.log(trace);
      const ready = origin + s.firstReadyMs;
      const frame = origin + s.firstFrameMs;
      const row = [
        ['page: ready', ready],
        ['mosh-server: first client datagram read', st.datagramIn],
        ['recorder exec (tern-relay record)', st.recorder],
        ['shell exec', st.shell],
        ['shell: first prompt write', st.promptWrite],
        ['mosh-server: next datagram sent', st.frameOut],
        ['page: first frame', frame],
        ['page: prompt on screen', promptAt],
      ];
      if (n === 0) continue;
      const base = st.datagramIn;
      console.log(`load ${n} (${RELAY_ARGS.join(' ') || 'default'}), ms from mosh-server's first client datagram:`);
      for (const [name, at] of row) console.log(`  ${name.padEnd(44)} ${Number.isFinite(at) ? (at - base).toFixed(1).padStart(8) : '     n/a'}`);
    } finally {
      if (strace.exitCode === null) strace.kill('SIGKILL');
      await browser.close();
    }
  }
  console.log(`uptime: ${execFileSync('uptime').toString().trim()}`);
} finally {
  await stopRelay(relay, 'SIGTERM');
  cleanupState(stateDir);
}
