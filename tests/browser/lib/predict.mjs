// Helpers for predict.test.mjs: its fixture, with a relay whose shell runs in a fixed environment
// and linkemu in front of it, and a probe in the page that reads xterm.js's buffer after every
// parsed write.
import { writeFileSync, existsSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { freePort, startLinkemu, tempDir, until, screen, sleep, newSession } from './helpers.mjs';
import { browserFixture, randomToken } from './fixture.mjs';

/// A secret made of characters nothing else in the session shows (no command, prompt or output
/// of the tests holds an upper-case Q, Z, X, J or these digits).
export const SECRET = 'QZXJ4679';
export const SECRET_CHARS = [...new Set(SECRET)].join('');
/// The same behind the first letters of the `Password:` prompt (PREDICTION.md §9b).
export const SECRET_PROMPT_PREFIX = 'Pass' + SECRET;

const sha1 = (s) => createHash('sha1').update(s).digest('hex');

/// The shell's start-up file: a plain `$ ` prompt, no history, and short commands for the tests
/// (so what is typed on screen stays free of the secret's characters and of temporary paths).
function rcFile(dir) {
  // Either secret is accepted.
  const hashes = [sha1(SECRET), sha1(SECRET_PROMPT_PREFIX)];
  writeFileSync(join(dir, 'askpass.py'), [
    'import getpass, hashlib, os, sys',
    "open(os.path.join(os.environ['HOME'], 'ready-' + sys.argv[1]), 'w').close()",
    'p = getpass.getpass()',
    `ok = hashlib.sha1(p.encode()).hexdigest() in ('${hashes[0]}', '${hashes[1]}')`,
    "print(sys.argv[1] + (': secret-ok' if ok else ': secret-bad'))",
    '',
  ].join('\n'));
  // Raw mode; every key echoed upper-cased (letters mispredicted, digits predicted right);
  // Enter ends it.
  writeFileSync(join(dir, 'upper.py'), [
    'import os, sys, termios, tty',
    'old = termios.tcgetattr(0)',
    'tty.setraw(0)',
    "os.write(1, b'upper-ready\\r\\n')",
    'try:',
    '    while True:',
    '        c = os.read(0, 1)',
    "        if c in (b'\\r', b'\\x03', b''):",
    '            break',
    '        os.write(1, c.upper())',
    'finally:',
    '    termios.tcsetattr(0, termios.TCSADRAIN, old)',
    "print('\\r\\nupper-done')",
    '',
  ].join('\n'));
  const rc = join(dir, 'rc');
  writeFileSync(rc, [
    "PS1='$ '",
    'unset HISTFILE PROMPT_COMMAND',
    // chk VALUE TAG: says whether VALUE is the secret without ever printing it.
    `chk() { case "$(printf %s "$1" | sha1sum | cut -d' ' -f1)" in ${hashes.join('|')}) echo "$2: secret-ok";; *) echo "$2: secret-bad";; esac; }`,
    `gp() { /usr/bin/python3 ${join(dir, 'askpass.py')} "$1"; }`,
    `up() { /usr/bin/python3 ${join(dir, 'upper.py')}; }`,
    // A right prompt as zsh's RPROMPT looks: `[rp]` at the right end of the prompt's row.
    `rp() { PROMPT_COMMAND='printf "%*s\\r" "$COLUMNS" "[rp]"'; }`,
    'norp() { unset PROMPT_COMMAND; }',
    // ready TAG: tells the test (a file in $HOME) that the command has started on the host.
    'ready() { : > "$HOME/ready-$1"; }',
    '',
  ].join('\n'));
  return rc;
}

/// The file's fixture (helpers in ./fixture.mjs) with tern-relay (spawn mode) whose mosh-server
/// runs bash with a fixed environment, and linkemu with `delay=RTT/2` each way between the page's
/// WebTransport and the relay, started in `before` after the relay. Returns the fixture as `fx`
/// and the rig; the page is left for the test file to open (`rig.url()`).
export function predictFixture({ rtt }) {
  const home = tempDir('tern-predict-home-');
  const rc = rcFile(home);
  const shell = [
    '--', '/usr/bin/env', '-i', `HOME=${home}`, 'TERM=xterm-256color', 'LANG=C.UTF-8',
    'PATH=/usr/bin:/bin', '/usr/bin/bash', '--noprofile', '--rcfile', rc, '-i',
  ];
  const fx = browserFixture({ relay: { token: randomToken('predict-'), args: shell }, relayLog: true });
  let emu, emuPort;
  fx.before(async () => {
    emuPort = await freePort();
    emu = await startLinkemu({ listenPort: emuPort, targetPort: fx.port, link: `delay=${rtt / 2}ms` });
  });
  fx.defer(async () => {
    emu?.child.kill('SIGCONT');
    await emu?.stop();
    rmSync(home, { recursive: true, force: true });
  });
  const rig = {
    rtt, home,
    /// Waits for `ready TAG` (or askpass.py) to have run in the shell.
    ready: (tag) => until(() => existsSync(join(home, `ready-${tag}`)),
      { interval: 2, timeout: 10000, what: `ready-${tag}` }),
    /// The page's address: WebTransport through linkemu, with the prediction settings.
    url: ({ mode = 'adaptive', overwrite = false } = {}) => newSession(fx.url.replace('#token=',
      `#wt_port=${emuPort}&predict=${mode}${overwrite ? '&predict_overwrite=1' : ''}&token=`)),
    /// Freezes the link (linkemu stopped with SIGSTOP: nothing moves either way) and thaws it.
    freeze: () => emu.child.kill('SIGSTOP'),
    thaw: () => emu.child.kill('SIGCONT'),
  };
  return { fx, rig };
}

/// Installs `window.__probe` in a page whose terminal is up: listeners run after every parsed
/// xterm.js write; helpers read the visible buffer.
export async function installProbe(page) {
  await page.evaluate(() => {
    if (window.__probe) return;
    const term = window.tern.term;
    const probe = {
      parsed: new Set(),
      written: new Set(),
      /// The visible rows of xterm.js's buffer, trailing blanks trimmed (written spaces too, as
      /// screenText() trims them).
      lines() {
        const b = term.buffer.active;
        const out = [];
        for (let y = 0; y < term.rows; y++) out.push((b.getLine(b.baseY + y)?.translateToString(true) ?? '').trimEnd());
        return out;
      },
      /// Cells drawn underlined, as [row, col, char].
      underlined() {
        const b = term.buffer.active;
        const out = [];
        for (let y = 0; y < term.rows; y++) {
          const line = b.getLine(b.baseY + y);
          if (!line) continue;
          for (let x = 0; x < term.cols; x++) {
            const c = line.getCell(x);
            if (c && c.isUnderline()) out.push([y, x, c.getChars()]);
          }
        }
        return out;
      },
      /// The cell at a visible row and column: [chars, underlined].
      cell(y, x) {
        const b = term.buffer.active;
        const c = b.getLine(b.baseY + y)?.getCell(x);
        return c ? [c.getChars(), c.isUnderline() === 1] : ['', false];
      },
      cursor() {
        const b = term.buffer.active;
        return [b.cursorY, b.cursorX];
      },
    };
    term.onWriteParsed(() => { for (const f of probe.parsed) f(); });
    // Every chunk handed to xterm.js (before it is parsed).
    const write = term.write;
    term.write = function (data, ...rest) {
      for (const f of probe.written) f(data);
      return write.call(this, data, ...rest);
    };
    window.__probe = probe;
  });
}

/// xterm.js's visible buffer and the core's server screen, both without trailing empty rows.
export async function compareScreens(page) {
  return page.evaluate(() => {
    const trim = (s) => s.replace(/\n+$/, '');
    return {
      xterm: trim(window.__probe.lines().join('\n')),
      server: trim(window.tern.screenText()),
      underlined: window.__probe.underlined(),
    };
  });
}

/// Waits until the server's screen has not changed for `quietMs` (every key judged by then: a
/// round trip, the 50 ms echo ack and a frame), then returns both screens (compareScreens) for the
/// caller to assert that nothing predicted is left.
export async function settledScreens(page, { quietMs = 600, timeout = 15000, what = 'the screen' } = {}) {
  let last = null;
  let since = Date.now();
  const end = Date.now() + timeout;
  for (;;) {
    const s = await screen(page);
    if (s !== last) { last = s; since = Date.now(); }
    if (Date.now() - since >= quietMs) break;
    if (Date.now() > end) throw new Error(`${what} never settled:\n${s}`);
    await sleep(50);
  }
  return compareScreens(page);
}

/// Types `text` into xterm.js as one input event (as onData would hand over a burst).
export const inputEvent = (page, text) => page.evaluate((t) => window.tern.term.input(t, true), text);

/// The last non-empty row of the server's screen.
export async function lastRow(page) {
  const rows = (await screen(page)).split('\n').filter((l) => l.trim() !== '');
  return rows[rows.length - 1] ?? '';
}

/// After `clear`: the first row is the bare prompt (keys typed while clear runs would be echoed by
/// the tty and confuse readline's redisplay).
export const cleared = (page) => until(async () => (await screen(page)).trimEnd() === '$',
  { what: 'a clean prompt' });

/// Arms the secret detector in a page: after every parsed write the whole visible buffer is
/// scanned for the secret's characters; every chunk written is scanned too (escape sequences
/// removed), and the core's server screen (to tell a server echo, a broken set-up, from a drawn
/// prediction). `tag` names the scenario the hits belong to.
export async function armDetector(page, chars) {
  await page.evaluate((chars) => {
    const probe = window.__probe;
    const set = new Set(chars);
    const has = (s) => [...s].some((c) => set.has(c));
    // The notification bar's durations ("tern: Last contact 7 seconds ago.", "… in 9 seconds",
    // "(5 s without reply.)" on a loaded machine) are not the secret's digits.
    const BAR_DURATION = /(Last (contact|reply) |in |\()\d+(:\d\d){0,2}( seconds| minutes| s)?/g;
    const hasOffBar = (s) => has(s.startsWith('tern: ') ? s.replace(BAR_DURATION, '') : s);
    // spans: [tag, from, to] for each stretch of writes that showed a secret character.
    // keys: per tag, when each key went down; promptAt: per tag, the first write after which the
    // bottom non-empty row of xterm.js ended in the prompt (`det.prompt`).
    const det = { tag: '', prompt: '', hits: [], rawHits: [], serverHits: [], spans: [], writes: 0, keys: {}, promptAt: {} };
    let open = null;
    window.addEventListener('keydown', () => { (det.keys[det.tag] ??= []).push(performance.now()); }, true);
    probe.detector = det;
    const decoder = new TextDecoder();
    probe.written.add((data) => {
      const text = typeof data === 'string' ? data : decoder.decode(data);
      // CSI, OSC and two-byte escapes out; what remains is printed.
      const printed = text
        .replace(/\x1b\[[0-?]*[ -/]*[@-~]/g, '')
        .replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, '')
        .replace(/\x1b[ -/]*[0-~]/g, '');
      if (has(printed.replace(BAR_DURATION, ''))) det.rawHits.push({ tag: det.tag, t: performance.now(), printed });
    });
    probe.parsed.add(() => {
      det.writes++;
      const lines = probe.lines();
      const row = lines.findIndex(hasOffBar);
      const now = performance.now();
      if (det.prompt && det.promptAt[det.tag] == null
          && (lines.findLast((l) => l.trim() !== '') ?? '').trimEnd().endsWith(det.prompt)) {
        det.promptAt[det.tag] = now;
      }
      if (row >= 0) {
        det.hits.push({ tag: det.tag, t: now, row, line: lines[row], underlined: probe.underlined().length });
        if (!open) det.spans.push(open = [det.tag, now, null]);
      } else if (open) {
        open[2] = now;
        open = null;
      }
      if (has(window.tern.screenText())) det.serverHits.push({ tag: det.tag, t: performance.now() });
    });
  }, chars);
}

/// Names the scenario that follows, and the prompt it waits for.
export const setTag = (page, tag, prompt = '') => page.evaluate(([t, p]) => {
  Object.assign(window.__probe.detector, { tag: t, prompt: p });
}, [tag, prompt]);
export const detector = (page) => page.evaluate(() => window.__probe.detector);

export function median(xs) {
  const v = xs.filter((x) => x != null).sort((a, b) => a - b);
  if (!v.length) return NaN;
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

export { sha1 };
