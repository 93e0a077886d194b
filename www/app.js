// Tern's page: owns the DOM (terminal element, status pill, notice card) and hands the rest to
// the wasm client (web/src/), which owns the connection and what is drawn; the decisions are the
// core's (crate/src/).
import { Terminal } from './xterm/xterm.mjs';
import { FitAddon } from './xterm/addon-fit.mjs';
import init, { Client } from './pkg/tern.js';

// When the page's script started (its modules loaded): the resume benchmark times the restored
// screen from here.
performance.mark('tern:script');

const $ = (id) => document.getElementById(id);

// The token rides in the URL fragment (never sent to a server). Keep it for this tab only
// and take it out of the address bar, history and screenshots.
function takeParams() {
  const frag = new URLSearchParams(location.hash.slice(1));
  // wt_port: test-only, WebTransport through a link emulator in front of the relay (docs/BROWSER.md).
  for (const name of ['token', 'host', 'port', 'key', 'wt_port', 'predict', 'predict_overwrite']) {
    const v = frag.get(name);
    if (v) sessionStorage.setItem(`tern.${name}`, v);
  }
  if (location.hash) history.replaceState(null, '', location.pathname + location.search);
  const get = (name) => sessionStorage.getItem(`tern.${name}`);
  const bridge = get('host') && get('port') && get('key')
    ? { host: get('host'), port: Number(get('port')), key: get('key') }
    : undefined;
  // Predictive echo: #predict=adaptive|always|never|experimental, #predict_overwrite=1.
  const prediction = { mode: get('predict') || 'adaptive', overwrite: get('predict_overwrite') === '1' };
  return { token: get('token'), bridge, wtPort: Number(get('wt_port')) || undefined, prediction };
}

// Bytes for people (decimal units, as network rates are).
function size(n) {
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${Math.round(n / 1e3)} kB`;
  return `${n} B`;
}

function duration(s) {
  const t = Math.ceil(s);
  return t < 60 ? `${t} s` : `${Math.floor(t / 60)}:${String(t % 60).padStart(2, '0')}`;
}

// The text of the paste box from the client's structured progress (crate/src/paste/progress.rs).
function pasteText(p) {
  const queued = p.queued ? ` (+${p.queued} queued)` : '';
  switch (p.state) {
    case 'reading': return 'Reading the file…';
    case 'asking': return `Pasting ${size(p.total)}: asking the relay…${queued}`;
    case 'waiting_for_relay': return `Pasting ${size(p.total)}: interrupted; waiting for the relay…${queued}`;
    case 'resuming': return `Pasting ${size(p.total)}: interrupted; resuming…${queued}`;
    case 'sending': {
      const rate = p.rate ? `${size(p.rate)}/s` : 'measuring';
      const left = p.secondsLeft != null ? `, ${duration(p.secondsLeft)} left` : '';
      return `Pasting: ${Math.floor(p.percent)}% of ${size(p.total)}, ${rate}${left}${queued}`;
    }
    case 'done': return 'Pasted.';
    case 'cancelled': return 'Paste cancelled.';
    case 'failed': return `Paste failed: ${p.error ?? 'unknown error'}`;
    default: return p.line;
  }
}

// The paste box over the terminal: the progress and a cancel button (Escape also cancels).
function pasteBox(client, progress) {
  const box = $('paste');
  box.hidden = !progress;
  if (progress) $('paste-text').textContent = pasteText(progress);
  $('paste-cancel').hidden = !progress?.active;
  $('paste-cancel').onclick = () => { client.cancelPaste(); window.tern?.term.focus(); };
}

// Files pasted (a screenshot) or dropped on the terminal go to the relay's paste directory and
// their path is typed; text pastes stay xterm.js's. Capture phase: before xterm.js's textarea.
function wirePaste(client) {
  document.addEventListener('paste', (e) => {
    const files = [...(e.clipboardData?.files ?? [])];
    if (!files.length) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    for (const f of files) client.paste(f);
  }, true);
  const hasFiles = (e) => [...(e.dataTransfer?.types ?? [])].includes('Files');
  const target = $('terminal');
  target.addEventListener('dragover', (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = 'copy';
    document.body.classList.add('dropping');
  });
  target.addEventListener('dragleave', () => document.body.classList.remove('dropping'));
  target.addEventListener('drop', (e) => {
    document.body.classList.remove('dropping');
    if (!hasFiles(e)) return;
    e.preventDefault();
    for (const f of e.dataTransfer.files) client.paste(f);
    window.tern?.term.focus();
  });
}

function notice(kind, title, text, action) {
  const box = $('notice');
  box.className = kind;
  $('notice-title').textContent = title;
  $('notice-text').textContent = text;
  const button = $('notice-action');
  button.hidden = !action;
  if (action) {
    button.textContent = action.label;
    button.onclick = action.run;
  }
  box.hidden = false;
  $('pill').hidden = true;
}

function pill(text, kind = '') {
  const p = $('pill');
  p.textContent = text;
  p.className = kind;
  p.hidden = !text;
}

const newSession = { label: 'Start a new session', run: () => location.reload() };

// One place for every status the client reports: `kind` is the client's StatusKind
// (web/src/hooks.rs), `code` says which failure when kind is 'failed'.
function onStatus(kind, message, code) {
  switch (kind) {
    case 'connecting':
      pill('Connecting…', 'info');
      break;
    case 'connected':
    case 'resumed':
      pill('');
      $('notice').hidden = true;
      break;
    case 'reconnecting':
      pill('Reconnecting…');
      break;
    case 'ended':
      notice('ended', 'Session ended', message, newSession);
      break;
    case 'bad_token':
      notice('error', 'Wrong or missing token', message);
      break;
    case 'rate_limited':
      notice('error', 'Too many attempts', message);
      break;
    case 'no_webtransport':
      notice('error', 'This browser cannot connect', message);
      break;
    case 'version_mismatch':
      notice('error', 'Tern was updated', message, { label: 'Reload', run: () => location.reload() });
      break;
    default:
      notice('error', 'Cannot connect', message || code || kind, { label: 'Try again', run: () => location.reload() });
  }
}

const theme = {
  background: '#16181d',
  foreground: '#d7dae0',
  cursor: '#61afef',
  cursorAccent: '#16181d',
  selectionBackground: '#3e4451',
  // Blue is dark enough for white text: mosh's notification bar is white on blue.
  black: '#1e2127', red: '#e06c75', green: '#98c379', yellow: '#e5c07b',
  blue: '#3d7fcb', magenta: '#c678dd', cyan: '#56b6c2', white: '#abb2bf',
  brightBlack: '#5c6370', brightRed: '#ef8189', brightGreen: '#a9d48a', brightYellow: '#f0d08e',
  brightBlue: '#6cb6ff', brightMagenta: '#d495e6', brightCyan: '#6fcbd6', brightWhite: '#e6e9ef',
};

async function main() {
  const { token, bridge, wtPort, prediction } = takeParams();
  if (!token) {
    notice('error', 'No token', 'Open the exact URL tern-relay printed: it ends in #token=…');
    return;
  }
  if (!window.isSecureContext) {
    notice('error', 'This page needs a secure address',
      'Open http://127.0.0.1:… or http://localhost:… (as printed), or https: the browser keeps its cryptography from other pages.');
    return;
  }
  pill('Connecting…', 'info');

  const term = new Terminal({
    fontFamily: '"JetBrains Mono", "Cascadia Mono", "Fira Code", "SF Mono", Menlo, Consolas, "DejaVu Sans Mono", "Liberation Mono", monospace',
    fontSize: 15,
    lineHeight: 1.1,
    cursorBlink: true,
    cursorStyle: 'block',
    scrollback: 2000,
    allowProposedApi: false,
    theme,
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open($('terminal'));
  fit.fit();
  term.focus();

  await init();
  let client;
  client = new Client(term, {
    token,
    bridge,
    wtPort,
    hooks: {
      paste: (progress) => pasteBox(client, progress),
      status: onStatus,
      // WebTransport, or the WebSocket fallback over TCP (an ssh tunnel, UDP blocked).
      link: (kind) => {
        document.body.dataset.link = kind;
        if (kind === 'websocket') pill('TCP fallback', 'quiet');
      },
      session: holdSession,
      title: (t) => { document.title = t ? `${t} — tern` : 'tern'; },
      bell: () => {
        document.body.classList.remove('bell');
        void document.body.offsetWidth; // restart the animation
        document.body.classList.add('bell');
      },
      // OSC 52 from the remote: copy where the browser lets us (it needs focus).
      clipboard: (text) => navigator.clipboard?.writeText(text).catch(() => {}),
    },
  });

  // Test and benchmark hooks (docs/BROWSER.md).
  window.tern = {
    screenText: () => client.screenText(),
    stats: () => client.stats(),
    term,
    // The benchmark measures echo during an upload: keys must not wait for the path there.
    holdKeysDuringPaste: (hold) => client.setHoldKeysDuringPaste(hold),
    cancelPaste: () => client.cancelPaste(),
    setPrediction: (mode, overwrite = false) => client.setPrediction(mode, overwrite),
    endSession: () => client.endSession(),
  };
  wirePaste(client);
  try {
    client.setPrediction(prediction.mode, prediction.overwrite);
  } catch (e) {
    console.warn(`${e}; predicting adaptively`);
  }

  let pending = false;
  const refit = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; fit.fit(); });
  };
  window.addEventListener('resize', refit);
  new ResizeObserver(refit).observe($('terminal'));
  // Leaving the page does not end the shell: the tab saves where the session stands, and a
  // reload continues it (`exit`, or tern.endSession(), ends it).
  window.addEventListener('pagehide', () => client.leave());

  // A duplicated tab copies sessionStorage, saved session included, while the original tab still
  // drives it: continue it only when no other tab holds its lock (a reload's old page releases
  // it as it unloads).
  const saved = client.savedSessionId();
  if (saved && !(await acquireSession(saved, SESSION_LOCK_WAIT_MS))) client.forgetSavedSession();
  client.start();
  // The GPU renderer where there is WebGL2 (the DOM renderer otherwise), loaded after the first
  // draw: its module is one more round trip, which a reloaded page's saved screen need not wait.
  loadWebgl(term);
}

async function loadWebgl(term) {
  try {
    const { WebglAddon } = await import('./xterm/addon-webgl.mjs');
    const webgl = new WebglAddon();
    webgl.onContextLoss(() => webgl.dispose());
    term.loadAddon(webgl);
  } catch {
    // No WebGL (or no addon): xterm.js keeps its DOM renderer.
  }
}

// One page drives a relay session: it holds a Web Lock named after the session for its life.
const SESSION_LOCK_WAIT_MS = 1000;
const heldSessions = new Set();
const lockName = (id) => `tern.session.${id}`;

function holdSession(id) {
  if (!navigator.locks || heldSessions.has(id)) return;
  heldSessions.add(id);
  navigator.locks.request(lockName(id), () => new Promise(() => {}));
}

// Resolves true once this page holds the session's lock, false if another page keeps it longer
// than `ms` (or true where the browser has no Web Locks: nothing to check against).
function acquireSession(id, ms) {
  if (!navigator.locks) return Promise.resolve(true);
  return new Promise((resolve) => {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), ms);
    navigator.locks.request(lockName(id), { signal: abort.signal }, () => {
      clearTimeout(timer);
      heldSessions.add(id);
      resolve(true);
      return new Promise(() => {});
    }).catch(() => resolve(false));
  });
}

main().catch((e) => notice('error', 'Tern failed to start', String(e && e.message || e)));
