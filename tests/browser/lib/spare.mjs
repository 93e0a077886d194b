// The relay's warm spare as a person finds it in /proc (relay/src/session/spare.rs): the detached
// mosh-server serving a state directory that no session record names, and the shell under it
// once the relay released it (it is the spare's first client unless --no-spare-prestart).
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/// Every process's parent, command line and start time (clock ticks since boot).
function processes() {
  const out = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z' || fields[0] === 'X') continue;
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const args = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      out.set(Number(name), { ppid: Number(fields[1]), start: Number(fields[19]), comm, args });
    } catch { /* gone meanwhile */ }
  }
  return out;
}

/// `{ server, shell, shellStart }` of `stateDir`'s spare (`shell` null while its shell waits), or
/// null when there is none.
export function findSpare(stateDir) {
  const sessions = join(stateDir, 'sessions');
  const recorded = new Set();
  try {
    for (const f of readdirSync(sessions)) {
      if (!f.endsWith('.json')) continue;
      try { recorded.add(JSON.parse(readFileSync(join(sessions, f), 'utf8')).pid); } catch { /* being written */ }
    }
  } catch { /* none yet */ }
  const procs = processes();
  const servers = [...procs].filter(([, p]) => p.args[0]?.endsWith('mosh-server') && p.args.includes(sessions));
  const ids = new Set(servers.map(([pid]) => pid));
  // The daemon, not its forked child (same command line) nor the undetached `mosh-server new`.
  const daemon = servers.find(([pid, p]) => !recorded.has(pid) && !ids.has(p.ppid) && p.ppid === 1);
  if (!daemon) return null;
  const server = daemon[0];
  const under = (pid) => {
    for (let p = pid, n = 0; p > 1 && n < 8; p = procs.get(p)?.ppid ?? 0, n++) if (p === server) return true;
    return false;
  };
  const shell = [...procs].find(([pid, p]) => pid !== server && under(pid) && /^(ba|da|z|fi)?sh$/.test(p.comm));
  return { server, shell: shell?.[0] ?? null, shellStart: shell?.[1].start ?? null };
}
