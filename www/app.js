// Tern's page: owns the DOM (terminal element, status pill, notice card) and hands the rest to
// the wasm client (web/src/), which owns the connection and what is drawn; the decisions are the
// core's (crate/src/).
import { Terminal } from './xterm/xterm.mjs';
import { FitAddon } from './xterm/addon-fit.mjs';
import { WebLinksAddon } from './xterm/addon-web-links.mjs';
import init, { Client } from './pkg/tern.js';
import { wireHistory } from './history.js';
import { FONTS, loadSettings, wireSettings } from './settings.js';
import { wireClipboard } from './clipboard.js';
import { wireProgramNotifications } from './notify.js';
import { wireLinks } from './links.js';
import { ctrlByte, parseBarLayout, wireFullscreen, wireKeys } from './keys.js';
import { wireHardwareKeys } from './hardware_keys.js';
import { wireVisualViewport } from './viewport.js';
import { wireBell } from './bell.js';
import { wireOffers } from './offers.js';
import { wireImages } from './images.js';
import { wireShare, wireViewer } from './share.js';
import { wireServiceWorker } from './service_worker.js';
import { estimateTerminalSize } from './terminal_size.js';

// When the page's script started (its modules loaded): the resume benchmark times the restored
// screen from here.
performance.mark('tern:script');

const $ = (id) => document.getElementById(id);

// The token rides in the URL fragment (never sent to a server). Keep it for this tab only
// and take it out of the address bar, history and screenshots.
function takeParams() {
  // Not URLSearchParams: it turns the `+` of a mosh key into a space (the core keeps it).
  const frag = new Map(Client.fragmentParams(location.hash.slice(1)));
  // wt_port: test-only, WebTransport through a link emulator in front of the relay (docs/BROWSER.md).
  // view: a share link's session (#view=ID), watched read-only; kept for this tab's reloads.
  for (const name of ['token', 'view', 'host', 'port', 'key', 'wt_port', 'predict', 'predict_overwrite', 'renderer', 'early_info', 'early_greet']) {
    const v = frag.get(name);
    if (v) sessionStorage.setItem(`tern.${name}`, v);
  }
  if (location.hash) history.replaceState(null, '', location.pathname + location.search);
  const get = (name) => sessionStorage.getItem(`tern.${name}`);
  const bridge = get('host') && get('port') && get('key')
    ? { host: get('host'), port: Number(get('port')), key: get('key') }
    : undefined;
  // Predictive echo: #predict=adaptive|always|never|experimental, #predict_overwrite=1.
  // Unset: the settings panel's choice.
  const prediction = get('predict')
    ? { mode: get('predict'), overwrite: get('predict_overwrite') === '1' }
    : undefined;
  // #session=new starts a new session without offering the running ones; #session=ID resumes that
  // one. Taken once: a reload of this tab continues what it chose (its saved session).
  const session = frag.get('session') || sessionStorage.getItem('tern.choice') || undefined;
  sessionStorage.removeItem('tern.choice');
  // #renderer=webgl|dom|auto: xterm.js's renderer (auto: see chooseRenderer).
  const renderer = get('renderer') || 'auto';
  return { token: get('token'), view: get('view') || undefined, bridge, wtPort: Number(get('wt_port')) || undefined, prediction, session, renderer };
}

// The paste box over the terminal: the core's progress text (PasteProgress::text) and a cancel
// button (Escape also cancels).
function pasteBox(client, progress) {
  const box = $('paste');
  box.hidden = !progress;
  if (progress) $('paste-text').textContent = progress.text;
  $('paste-cancel').hidden = !progress?.active;
  $('paste-cancel').onclick = () => { client.cancelPaste(); window.tern?.term.focus(); };
}

// Where files cannot reach the shell (bridge mode without a paste directory), say so up front, for a
// while after connecting and whenever a file is dragged over the terminal, not after a paste.
let pasteOffTimer;
function pasteOffNote() {
  const why = client?.pasteUnavailable();
  document.body.dataset.paste = why ? 'off' : 'on';
  // A viewer's bar says it already.
  if (!why || client.viewing()) return;
  pill(why[0].toUpperCase() + why.slice(1), 'quiet paste-off');
  clearTimeout(pasteOffTimer);
  pasteOffTimer = setTimeout(() => { if ($('pill').classList.contains('paste-off')) pill(''); }, 8000);
}

// What this session lacks and why (a session on an ssh host without the recorder: no history,
// pictures or signals), said once per session: the sentence is remembered for the tab, so a
// reload or a reconnect of the same session does not say it again.
let featuresOffTimer;
function featuresOffNote() {
  const why = client?.featuresOff();
  if (!why || sessionStorage.getItem('tern.featuresOffSaid') === why) return;
  sessionStorage.setItem('tern.featuresOffSaid', why);
  pill(why, 'quiet features-off');
  clearTimeout(featuresOffTimer);
  featuresOffTimer = setTimeout(() => { if ($('pill').classList.contains('features-off')) pill(''); }, 15000);
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
    if (document.body.dataset.paste === 'off' && !$('pill').classList.contains('paste-off')) pasteOffNote();
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

// The card over the terminal for what stops the session: a title, a text, up to two actions
// (`{ label, run }`), optionally the bridge-mode connect form.
function notice(kind, title, text, action, second, { form = false } = {}) {
  const box = $('notice');
  box.className = kind;
  $('notice-title').textContent = title;
  $('notice-text').textContent = text;
  for (const [button, a] of [[$('notice-action'), action], [$('notice-second'), second]]) {
    button.hidden = !a;
    if (a) {
      button.textContent = a.label;
      button.onclick = a.run;
    }
  }
  $('connect-form').hidden = !form;
  box.hidden = false;
  $('pill').hidden = true;
  (form ? $('connect-line') : $('notice-action')).focus();
}

function hideNotice() {
  $('notice').hidden = true;
  window.tern?.term.focus();
}

// Starts over in this tab with a new session (not the chooser).
function startNew() {
  sessionStorage.setItem('tern.choice', 'new');
  location.reload();
}

function pill(text, kind = '') {
  const p = $('pill');
  p.textContent = text;
  p.className = kind;
  p.hidden = !text;
}

const newSession = { label: 'Start a new session', run: startNew };
let client;

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
      document.body.classList.add('live');
      pasteOffNote();
      featuresOffNote();
      settle();
      break;
    case 'reconnecting':
      pill('Reconnecting…');
      break;
    case 'ended':
      document.body.classList.remove('live');
      // A viewer cannot start one: nothing to offer.
      notice('ended', 'Session ended', message, client?.viewing() ? undefined : newSession);
      break;
    case 'moved':
      document.body.classList.remove('live');
      notice('moved', 'Session moved to another window', message,
        { label: 'Take it back', run: () => { hideNotice(); client.takeBack(); } });
      break;
    case 'cannot_resume':
      document.body.classList.remove('live');
      notice('moved', 'This session cannot be resumed here', message, undefined, undefined, { form: true });
      break;
    case 'bad_token':
      // A viewer whose share ended or expired: the relay's words say which.
      if (client?.viewing()) notice('ended', 'Sharing ended', message);
      else notice('error', 'Wrong or missing token', message);
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
      if (code === 'relay_not_verified') {
        // Something answered on the relay's address without knowing the token (another program
        // on its port while tern-relay was down): nothing was sent to it. The session is kept.
        notice('error', 'The relay could not be verified', message, { label: 'Try again', run: () => location.reload() });
        break;
      }
      if (code === 'not_your_session') {
        // Someone else started it: the relay's owner token may open any session, others only
        // their own. A new one of this person's own is what is left to offer.
        notice('error', 'Not your session', message, newSession);
        break;
      }
      if (code === 'spawn_failed') {
        // mosh-server did not start (here, or on an ssh host: the message says why). A reload
        // offers the choice again, since nothing was saved.
        notice('error', 'Cannot start the session', message, { label: 'Try again', run: () => location.reload() });
        break;
      }
      notice('error', 'Cannot connect', message || code || kind, { label: 'Try again', run: () => location.reload() });
  }
}

const darkTheme = {
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

// For a system in light mode (the settings panel of a later change lets the person choose).
const lightTheme = {
  background: '#fafafa',
  foreground: '#2b2f36',
  cursor: '#2f6fbf',
  cursorAccent: '#fafafa',
  selectionBackground: '#cfd8e6',
  black: '#2b2f36', red: '#c4363f', green: '#3d8a2f', yellow: '#9a6b00',
  blue: '#2f6fbf', magenta: '#9a3fb5', cyan: '#16808c', white: '#8a909b',
  brightBlack: '#6b717c', brightRed: '#d9434c', brightGreen: '#4a9c3a', brightYellow: '#b07d00',
  brightBlue: '#3d82d6', brightMagenta: '#ad52c8', brightCyan: '#1c94a1', brightWhite: '#c5c9d1',
};

const lightScheme = window.matchMedia?.('(prefers-color-scheme: light)');
// 'dark', 'light' or 'system' (the settings panel) → xterm.js's theme.
const themeFor = (choice) => ((choice === 'system' ? lightScheme?.matches : choice === 'light') ? lightTheme : darkTheme);

// The page's colours (CSS, light-dark()) and the terminal's follow the choice; 'system' also
// follows the system when it switches.
let themeChoice = 'system';
function applyTheme(term, choice) {
  themeChoice = choice;
  if (choice === 'system') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = choice;
  term.options.theme = themeFor(choice);
  paletteVars(themeFor(choice));
}
function followSystemTheme(term) {
  lightScheme?.addEventListener('change', () => { if (themeChoice === 'system') applyTheme(term, 'system'); });
}

// The history view draws with the terminal's colours: its palette as CSS variables.
const PALETTE = ['black', 'red', 'green', 'yellow', 'blue', 'magenta', 'cyan', 'white'];
function paletteVars(t) {
  const root = document.documentElement.style;
  PALETTE.forEach((name, i) => {
    root.setProperty(`--c${i}`, t[name]);
    root.setProperty(`--c${i + 8}`, t[`bright${name[0].toUpperCase()}${name.slice(1)}`]);
  });
  root.setProperty('--term-fg', t.foreground);
  root.setProperty('--term-bg', t.background);
  root.setProperty('--term-selection', t.selectionBackground);
}

// Relative times for the session list ("5 min ago").
function ago(unixSeconds) {
  const s = Math.max(0, Date.now() / 1000 - unixSeconds);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

// A page with nothing saved, on a relay with sessions running or ssh hosts to start one on:
// offer them (Resume) and a new one, here or on each host. Resolves to a session id, 'new', or
// 'host:NAME'.
async function chooseSession({ sessions: list, sshHosts }) {
  const box = $('chooser');
  const rows = $('chooser-list');
  rows.replaceChildren();
  pill('');
  $('chooser-title').textContent = list.length ? 'Sessions running on this server' : 'Start a session';
  $('chooser-text').textContent = list.length
    ? 'Resume one here (a window that has it open hands it over), or start a new one.'
    : 'On this server, or on one of its hosts over ssh.';
  return new Promise((resolve) => {
    const done = (choice) => { box.hidden = true; resolve(choice); };
    for (const s of [...list].reverse()) {
      const row = document.createElement('li');
      const text = document.createElement('div');
      const name = document.createElement('div');
      name.className = 'name';
      name.textContent = s.title || 'Shell';
      const meta = document.createElement('div');
      meta.className = 'meta';
      const size = s.cols ? `${s.cols}×${s.rows} · ` : '';
      const where = s.host ? `on ${s.host} · ` : '';
      meta.textContent = `${where}${size}started ${ago(s.created)} · active ${ago(s.lastActive)}`;
      text.append(name, meta);
      if (s.attached) {
        const badge = document.createElement('span');
        badge.className = 'badge';
        badge.textContent = 'open in another window';
        name.append(' ', badge);
      }
      const resume = document.createElement('button');
      resume.type = 'button';
      resume.textContent = 'Resume';
      resume.setAttribute('aria-label', `Resume ${s.title || 'shell'} (started ${ago(s.created)})`);
      resume.onclick = () => done(s.id);
      row.append(text, resume);
      rows.append(row);
    }
    $('chooser-new').onclick = () => done('new');
    $('chooser-new').textContent = sshHosts.length ? 'New session on this server' : 'New session';
    const hosts = $('chooser-hosts');
    hosts.replaceChildren();
    for (const name of sshHosts) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'host';
      b.dataset.host = name;
      b.textContent = `New session on ${name}`;
      b.onclick = () => done(`host:${name}`);
      hosts.append(b);
    }
    box.hidden = false;
    box.querySelector('button')?.focus();
  });
}

// Bridge mode, nothing to continue: the person pastes a new mosh-server's MOSH CONNECT line.
function wireConnectForm() {
  $('connect-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const parsed = Client.parseMoshConnect($('connect-line').value);
    if (!parsed) {
      $('connect-error').textContent = 'That is not a MOSH CONNECT line (it reads MOSH CONNECT <port> <key>).';
      return;
    }
    sessionStorage.setItem('tern.port', String(parsed.port));
    sessionStorage.setItem('tern.key', parsed.key);
    startNew();
  });
}

// The End session button: asks first (leaving the page keeps the shell; this stops it).
function wireEndButton() {
  $('end').onclick = () => notice('confirm', 'End this session?',
    'The shell and everything running in it get a hangup. Closing or reloading the page keeps it running; this does not.',
    { label: 'End session', run: () => { hideNotice(); client.endSession(); } },
    { label: 'Cancel', run: hideNotice });
}

// Before anything else: the service worker may say at once that this page is an old one.
const worker = wireServiceWorker();

// Whether the relay answers this page's API without a token: it trusts the proxy in front of it
// to name the person (the browser sends the proxy's login along, as to any page of the site).
async function behindFrontDoor() {
  try {
    const r = await fetch('api/info', { cache: 'no-store' });
    return r.ok;
  } catch {
    return false;
  }
}

// xterm.js's terminal, made while the wasm compiles (streaming, off the main thread; see
// startWasm) but not opened: it is sized by estimateTerminalSize, so the client can start, and its
// hello leave, before the terminal's DOM, its first measure and the page's wiring (openTerminal,
// 20-50 ms of main thread here) run while the hello is on its way. It stays hidden until the page
// knows it will run (without a token only the notice shows).
function newTerminal(initial) {
  const options = {
    fontFamily: FONTS[initial.fontFamily],
    fontSize: initial.fontSize,
    lineHeight: 1.1,
    scrollback: initial.scrollback,
  };
  const term = new Terminal({
    ...options,
    ...(estimateTerminalSize($('terminal'), options) ?? {}),
    cursorBlink: initial.cursorBlink,
    cursorStyle: initial.cursorStyle,
    macOptionIsMeta: initial.macOptionIsMeta,
    // Decorations (find highlights every match on the screen) are still "proposed" in xterm.js 6.
    allowProposedApi: true,
    theme: themeFor(initial.theme),
  });
  applyTheme(term, initial.theme);
  followSystemTheme(term);
  const fit = new FitAddon();
  term.loadAddon(fit);
  // URLs in the output open in a new tab, with no way back to this page (noopener).
  term.loadAddon(new WebLinksAddon((event, uri) => {
    if (/^https?:\/\//i.test(uri)) window.open(uri, '_blank', 'noopener,noreferrer');
  }));
  $('terminal').style.visibility = 'hidden';
  performance.mark('tern:term');
  return { term, fit };
}

// The wasm's streaming compile, started before the main thread is busy building xterm.js: the
// glue calls WebAssembly.instantiateStreaming only once its fetch has answered, and that answer
// waits for a free main thread. So the page fetches the file itself (the one index.html preloads;
// the same request, so the preload's bytes), waits for the answer, hands it to the glue, and
// lets the glue's microtasks run (a task's turn) before it returns. `wasm`: the glue's promise.
async function startWasm() {
  const href = document.querySelector('link[rel="preload"][as="fetch"][type="application/wasm"]')?.href;
  if (!href) return { wasm: init() };
  const response = fetch(href);
  await response.catch(() => {});
  const wasm = init({ module_or_path: response });
  await delay(0);
  return { wasm };
}

// The longest the terminal waits for the hello before it is opened and shown anyway.
const OPEN_AFTER_START_MS = 250;

const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const { wasm } = await startWasm();
  const initial = loadSettings({ extraKeys: parseBarLayout });
  const { term, fit } = newTerminal(initial);
  await wasm;
  // index.html's inline script: how a WebTransport is opened (the wasm asks for every link it
  // opens through it), and the early link it opened as the document was parsed.
  Client.webTransportOpener(self.ternOpenWebTransport);
  if (self.ternEarlyLink) Client.keepEarlyLink(...self.ternEarlyLink);
  performance.mark('tern:wasm');
  const params = takeParams();
  const { bridge, wtPort, prediction, session, renderer, view } = params;
  // No token: perhaps a trusted front door (a reverse proxy that logged the person in and names
  // them to the relay, --identity-header) stands before the relay. Then the relay answers the
  // API without one, and the page runs with the empty token (web/src/relay_link.rs front_door).
  const token = params.token || (await behindFrontDoor() ? '' : null);
  if (token === null) {
    notice('error', 'No token', 'Open the exact URL tern-relay printed: it ends in #token=…');
    return;
  }
  document.body.dataset.frontDoor = token === '' ? '1' : '0';
  if (!window.isSecureContext) {
    notice('error', 'This page needs a secure address',
      'Open http://127.0.0.1:… or http://localhost:… (as printed), or https: the browser keeps its cryptography from other pages.');
    return;
  }
  // The relay's /api/info (and its challenge) travel while the page wires itself up, not after:
  // the first connect takes the answer unless the early link's `ready` brings the info first,
  // and the early link greets meanwhile. #early_info=0 (the load bench's "before") asks it later;
  // #early_greet=0 greets only once the info is in.
  if (sessionStorage.getItem('tern.early_info') !== '0') {
    Client.prefetchInfo(token, sessionStorage.getItem('tern.early_greet') !== '0');
    // The wasm's futures run as microtasks: let the request leave before the synchronous wiring
    // below would hold it back.
    await null;
  }
  pill('Connecting…', 'info');

  let settings = initial;
  const bell = wireBell({ settings: () => settings });
  const programNotes = wireProgramNotifications({ settings: () => settings });
  const programLinks = wireLinks({ term });
  const offers = wireOffers({ $, client: () => client, term });
  // What is wired with the opened terminal (openTerminal, after the hello has left): the hooks
  // that reach it wait for it. A restored screen's effects come during client.start().
  let clipboard = null;
  let blink = null;
  let wired = false;
  const afterOpen = [];
  const whenOpen = (fn) => (wired ? fn() : void afterOpen.push(fn));
  // A share link's page watches (share.js); the owner's page may share.
  let viewer = null;
  let share = null;
  if (bridge) {
    $('settings-send').textContent = 'tern send and tern open are not available in bridge mode: this relay did not start the shell, so it has no way to hear from it.';
  }

  client = new Client(term, {
    token,
    bridge,
    wtPort,
    hooks: {
      paste: (progress) => pasteBox(client, progress),
      status: onStatus,
      // WebTransport, or the WebSocket over TCP: a fallback (UDP blocked) when the relay offers
      // WebTransport, the only way when it has none (a Unix socket behind ssh -L).
      link: (kind, fallback) => {
        document.body.dataset.link = kind;
        // Behind a front door the WebSocket is the way by design (WebTransport does not pass the
        // proxy): nothing to point out.
        if (kind === 'websocket' && fallback && token !== '') pill('TCP fallback', 'quiet');
      },
      // A viewer drives nothing: it holds no session against the owner's tabs.
      session: (id) => { if (!view) holdSession(id); },
      title: (t) => { bell.title(t); viewer?.title(t); },
      bell: () => bell.bell(),
      // The output floods (drawn a few times a second): no cursor blink meanwhile.
      flooding: (on) => whenOpen(() => blink.pause(on)),
      // OSC 52 from a program: written, offered or refused as the setting says, with a notice.
      clipboard: (notice) => whenOpen(() => clipboard.remoteCopy(notice)),
      // The relay refused what this link asked (a read-only token's keys): said in the same note.
      refused: (message) => whenOpen(() => clipboard.tell(message)),
      // OSC 9 / 777 from a program (through the recorder): a notification while hidden.
      notify: (title, body) => programNotes.notify(title, body),
      // OSC 8 from a program (through the recorder): its text becomes a link.
      linkText: (url, text, col) => programLinks.add(url, text, col),
      // `tern open URL` (asks the person first) and `tern send FILE` (checked, then saved).
      offerUrl: (id, url) => offers.offerUrl(id, url),
      saveFile: (name, blob) => offers.saveFile(name, blob),
      // A viewer's link: the session's size (and a reset) before the relay's bytes.
      viewerScreen: (cols, rows, full) => viewer?.screen(cols, rows, full),
      viewerOf: (owner) => viewer?.owner(owner),
      // The owner's link: how many watch.
      viewers: (n) => share?.viewers(n),
    },
  });
  if (view) viewer = wireViewer({ $, term });
  else share = wireShare({ $, client });
  // Test and benchmark hooks (docs/BROWSER.md); openTerminal adds the rest.
  window.tern = {
    // xterm.js's renderer: 'dom' until the WebGL addon is loaded (if it is); rendererChosen is
    // the choice once made (after the session went live).
    renderer: 'dom',
    rendererChosen: null,
    screenText: () => client.screenText(),
    stats: () => client.stats(),
    term,
    // The benchmark measures echo during an upload: keys must not wait for the path there.
    holdKeysDuringPaste: (hold) => client.setHoldKeysDuringPaste(hold),
    eagerPaste: (eager) => client.setEagerPaste(eager),
    pasteQueueTarget: (ms) => client.setPasteQueueTarget(ms),
    // The benchmark measures a hidden tab and a flood with and without the relay holding datagrams.
    relayHold: (allowed) => client.setRelayHold(allowed),
    cancelPaste: () => client.cancelPaste(),
    setPrediction: (mode, overwrite = false) => client.setPrediction(mode, overwrite),
    endSession: () => client.endSession(),
    takeBack: () => client.takeBack(),
    // Notifications programs asked for (OSC 9 / 777): { received, shown }.
    programNotes: programNotes.count,
    programLinks,
  };

  let pending = false;
  const refit = () => {
    // A viewer's terminal keeps the session's size, scaled to the window.
    if (viewer) return viewer.fit();
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      const size = fit.proposeDimensions();
      if (!size || (size.cols === term.cols && size.rows === term.rows)) return;
      // xterm.js moves screen rows into its scrollback when it shrinks and back out when it grows;
      // the client clears the screen and holds drawing until the resize is done, so the scrollback
      // keeps only the rows that scrolled off, once each.
      client.beginResize();
      term.write('', () => {
        fit.fit();
        client.endResize();
      });
    });
  };

  // The terminal's DOM and everything wired to it: once, before it is first shown (a list of
  // sessions to offer, a refusal) or once the hello has left.
  let opened = false;
  const openTerminal = () => {
    if (opened) return;
    opened = true;
    term.open($('terminal'));
    // One custom key handler for xterm.js (it takes one): each of these may take a key.
    const keyHandlers = [];
    const addKeyHandler = (h) => keyHandlers.push(h);
    term.attachCustomKeyEventHandler((e) => !keyHandlers.some((h) => h(e)));
    clipboard = wireClipboard({ term, $, settings: () => settings });
    addKeyHandler(clipboard.key);
    // Images from the shell (docs/IMAGES.md): on the terminal and in the history view.
    const images = wireImages({ client, term, $ });
    Object.assign(window.tern, {
      history: wireHistory({ client, term, Client, $, addKeyHandler, ctrlByte, images }),
      // `placed()` for the tests.
      images,
    });
    wirePaste(client);
    window.addEventListener('resize', refit);
    new ResizeObserver(refit).observe($('terminal'));
    // A touch device: the extra-keys bar, and the terminal fit to what the on-screen keyboard leaves.
    const touch = matchMedia('(pointer: coarse)').matches;
    const keys = wireKeys({ term, $, touch });
    addKeyHandler(keys.key);
    if (touch) wireVisualViewport({ onLayout: refit });
    // iPad and iPhone keyboards: Ctrl+C, Esc, arrows as WebKit hands them over (hardware_keys.js).
    addKeyHandler(wireHardwareKeys({ term, ctrlByte }));
    wireFullscreen({ $, term });
    blink = wireCursorBlink(term);
    wireSettingsPanel(keys);
    wireConnectForm();
    wireEndButton();
    // The estimate was right unless the opened terminal fits another size; then the session hears
    // of it through the resize path, like any later change (a viewer's keeps the session's size).
    const fitted = fit.proposeDimensions();
    if (fitted && (fitted.cols !== term.cols || fitted.rows !== term.rows)) {
      performance.mark('tern:refit');
      refit();
    }
    wired = true;
    for (const fn of afterOpen.splice(0)) fn();
    performance.mark('tern:open');
  };

  // The terminal is shown (and focused: a style change and a layout, ~20 ms on a small machine)
  // once the hello has left, or before a list of sessions is offered.
  let shown = false;
  const showTerminal = () => {
    if (shown) return;
    shown = true;
    openTerminal();
    $('terminal').style.visibility = '';
    term.focus();
  };

  const setPrediction = ({ mode, overwrite }) => {
    try {
      client.setPrediction(mode, overwrite);
    } catch (e) {
      console.warn(`${e}; predicting adaptively`);
    }
  };
  // The client's own settings before it starts (the panel, wired with the opened terminal,
  // applies them again): a restored screen's OSC 52 meets the person's remote-copy choice.
  client.setRemoteCopy(initial.remoteCopy);
  setPrediction(prediction ?? { mode: initial.predict, overwrite: initial.predictOverwrite });
  // Ctrl+W closes the tab in a browser (outside full screen, where the keyboard is not locked): while
  // a session is live the browser asks first. The shell would survive (a reload or another tab
  // continues it), but the person's place would not.
  window.addEventListener('beforeunload', (e) => {
    if (!settings.confirmClose || !document.body.classList.contains('live') || document.fullscreenElement) return;
    e.preventDefault();
    e.returnValue = '';
  });

  // The settings panel: each change applies at once (a font change refits, so the shell sees its
  // new size); the address's #predict= wins over the saved prediction mode.
  const wireSettingsPanel = (keys) => {
    window.tern.settings = wireSettings({
      $,
      initial,
      relay: () => client.relayBuild(),
      checks: { extraKeys: parseBarLayout },
      apply(next, changed) {
        settings = next;
        const has = (k) => changed.includes(k);
        if (has('fontSize')) term.options.fontSize = next.fontSize;
        if (has('fontFamily')) term.options.fontFamily = FONTS[next.fontFamily];
        if (has('cursorStyle')) term.options.cursorStyle = next.cursorStyle;
        if (has('cursorBlink')) blink.allow(next.cursorBlink);
        if (has('scrollback')) term.options.scrollback = next.scrollback;
        if (has('macOptionIsMeta')) term.options.macOptionIsMeta = next.macOptionIsMeta;
        if (has('theme')) applyTheme(term, next.theme);
        if (has('extraKeys')) keys.setLayout(next.extraKeys);
        if (has('remoteCopy')) client.setRemoteCopy(next.remoteCopy);
        if (has('predict') || has('predictOverwrite')) {
          setPrediction(prediction ?? { mode: next.predict, overwrite: next.predictOverwrite });
        }
        // xterm.js measures the new cell size when it next renders: fit after that.
        if (has('fontSize') || has('fontFamily')) {
          const once = term.onRender(() => { once.dispose(); refit(); });
          term.refresh(0, term.rows - 1);
        }
      },
    });
  };
  // Leaving the page does not end the shell: the tab saves where the session stands, and a
  // reload continues it (`exit`, or tern.endSession(), ends it).
  window.addEventListener('pagehide', () => {
    client.leave();
    releaseSessions();
  });
  window.addEventListener('pageshow', (e) => {
    const id = e.persisted && client.stats()?.session;
    if (id) holdSession(id);
  });

  // A share link watches its session: nothing saved is continued, no session is chosen.
  if (view) client.watchSession(view);
  // An address that names what to do (#session=new or an id) overrides the browser's last session.
  else if (session && !client.savedSessionIsTabs()) client.forgetSavedSession();
  // The saved session (this tab's, or the browser's last) is continued only when no other page
  // drives it: a duplicated tab copies sessionStorage while the original still drives it, another
  // tab may have the browser's last. The page being unloaded (a reload), or a tab just closed
  // (Firefox releases its locks a moment after), gets a moment to let go.
  const saved = view ? null : client.savedSessionId();
  if (saved && !(await acquireSession(saved, SESSION_LOCK_WAIT_MS))) client.forgetSavedSession();
  if (!view && !client.savedSessionId()) {
    // Nothing of its own to continue: the address may name a session, or the relay may have some
    // running (another browser's, a closed tab's) to offer.
    let choice = session;
    if (!choice && !bridge) {
      const list = await client.listSessions();
      // null: the relay refused (a wrong token, say); the status hook has said why.
      if (list === null) return showTerminal();
      const offered = list.sessions.length || list.sshHosts.length;
      if (offered) showTerminal();
      choice = offered ? await chooseSession(list) : 'new';
      pill(choice.startsWith('host:') ? `Connecting to ${choice.slice(5)} over ssh…` : 'Connecting…', 'info');
      term.focus();
    }
    if (choice?.startsWith('host:')) client.startOnHost(choice.slice(5));
    else if (choice && choice !== 'new') client.resumeSession(choice);
  }
  worker.sessionStarted();
  performance.mark('tern:start');
  // A session this tab continues has its saved screen to show at once (client.start() draws it).
  const restoring = !view && Boolean(client.savedSessionId());
  client.start();
  // Otherwise the terminal is opened, wired and shown once the hello has left, while it travels:
  // the link's challenge is read on this main thread, and opening first (20-50 ms) would hold the
  // hello back by as much. At the latest OPEN_AFTER_START_MS after the start (a link still being
  // made, a relay that does not answer): the page then shows what it says about that.
  await (restoring ? delay(0) : Promise.race([Client.helloSent(), delay(OPEN_AFTER_START_MS)]));
  showTerminal();
  // What the page needs only once it works waits until the session is live and the browser idle:
  // probing WebGL starts the GPU process (with software WebGL, a few hundred ms of CPU on a small
  // machine, which the shell's start would wait behind), the manifest brings its icons.
  whenSettled(() => {
    const choice = chooseRenderer(renderer);
    window.tern.rendererChosen = choice;
    if (choice === 'webgl') loadWebgl(term);
    linkManifest();
    worker.registerWorker();
  });
}

// Runs `fn` once, when the session has started: live, and the terminal quiet for a moment (the
// shell has drawn its prompt), or at the latest SETTLE_LATEST_MS after going live (a program
// that never stops printing). A shell's start is CPU-bound on a small machine, and it is what the
// person waits for, so nothing optional runs beside it.
const SETTLE_QUIET_MS = 1000;
const SETTLE_LATEST_MS = 5000;
let settledQueue = [];
function whenSettled(fn) {
  if (settledQueue === null) return void fn();
  settledQueue.push(fn);
}
function settle() {
  if (settledQueue === null || settle.waiting) return;
  settle.waiting = true;
  let quiet;
  const writes = window.tern?.term.onWriteParsed(() => {
    clearTimeout(quiet);
    quiet = setTimeout(run, SETTLE_QUIET_MS);
  });
  const latest = setTimeout(run, SETTLE_LATEST_MS);
  quiet = setTimeout(run, SETTLE_QUIET_MS);
  function run() {
    clearTimeout(quiet);
    clearTimeout(latest);
    writes?.dispose();
    if (settledQueue === null) return;
    const queue = settledQueue;
    settledQueue = null;
    const go = () => queue.forEach((fn) => fn());
    if (window.requestIdleCallback) requestIdleCallback(go, { timeout: 2000 });
    else go();
  }
}

// The web app manifest (an installable app): linked once the session has started, so that its
// fetch, its icons' and the browser's installability check are not in the shell's way.
function linkManifest() {
  if (document.querySelector('link[rel=manifest]')) return;
  const link = document.createElement('link');
  link.rel = 'manifest';
  link.href = 'manifest.webmanifest';
  document.head.append(link);
}

// A blinking cursor costs the tab a repaint at every blink, and in xterm.js's DOM renderer a CSS
// animation that restyles the page at every animation frame: about 5 % of a core on an idle page
// here (docs/BENCHMARKS.md, "The cost of a frame"). So it blinks while the person types and for a
// while after, as GTK's terminals do (gtk-cursor-blink-timeout), never while the tab is hidden, and
// not while output floods (the cursor moves with every draw anyway, and the blink's restyling at
// every frame came on top of the flood's draws: 2 % of a core of the flood's 11 % here).
// A key blinks it again.
const CURSOR_BLINK_MS = 10000;
function wireCursorBlink(term) {
  let timer;
  let allowed = term.options.cursorBlink;
  const wake = () => {
    clearTimeout(timer);
    if (!allowed || document.visibilityState !== 'visible') {
      term.options.cursorBlink = false;
      return;
    }
    if (!term.options.cursorBlink) term.options.cursorBlink = true;
    timer = setTimeout(() => { term.options.cursorBlink = false; }, CURSOR_BLINK_MS);
  };
  term.onData(wake);
  term.textarea?.addEventListener('focus', wake);
  document.addEventListener('visibilitychange', wake);
  wake();
  return {
    // The settings panel's "blinking cursor".
    allow(on) { allowed = on; wake(); },
    pause(on) {
      if (!on) return;
      clearTimeout(timer);
      term.options.cursorBlink = false;
    },
  };
}

// WebGL where a GPU draws it; xterm.js's DOM renderer where WebGL would be emulated on the CPU
// (SwiftShader, llvmpipe): there the DOM renderer costs the tab far less per frame (measured in
// docs/BENCHMARKS.md, "The cost of a frame").
// The probe's answer is kept per browser (localStorage, with the user agent), so later visits
// create no WebGL context just to ask.
const RENDERER_PROBE = 'tern.rendererProbe';
function chooseRenderer(asked) {
  if (asked === 'webgl' || asked === 'dom') return asked;
  try {
    const kept = JSON.parse(localStorage.getItem(RENDERER_PROBE) ?? 'null');
    if (kept?.ua === navigator.userAgent && (kept.choice === 'dom' || kept.choice === 'webgl')) return kept.choice;
  } catch { /* unreadable: probe again */ }
  const choice = probeRenderer();
  try { localStorage.setItem(RENDERER_PROBE, JSON.stringify({ ua: navigator.userAgent, choice })); } catch { /* private mode */ }
  return choice;
}
function probeRenderer() {
  const gl = document.createElement('canvas').getContext('webgl2');
  if (!gl) return 'dom';
  const info = gl.getExtension('WEBGL_debug_renderer_info');
  const name = String(info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER));
  gl.getExtension('WEBGL_lose_context')?.loseContext();
  return /swiftshader|llvmpipe|softpipe|software|basic render/i.test(name) ? 'dom' : 'webgl';
}

async function loadWebgl(term) {
  try {
    const { WebglAddon } = await import('./xterm/addon-webgl.mjs');
    const webgl = new WebglAddon();
    webgl.onContextLoss(() => {
      webgl.dispose();
      window.tern.renderer = 'dom';
    });
    term.loadAddon(webgl);
    window.tern.renderer = 'webgl';
  } catch {
    // No WebGL (or no addon): xterm.js keeps its DOM renderer.
  }
}

// One page drives a relay session: it holds a Web Lock named after the session until it goes
// away. It lets go on `pagehide` itself: a browser may release a closed tab's locks only later
// (Firefox does), and the tab opened next must not wait for that. A page back from the
// back-forward cache takes its locks again.
const SESSION_LOCK_WAIT_MS = 1000;
const heldSessions = new Map(); // id → release()
const lockName = (id) => `tern.session.${id}`;

// Holds the lock until release() is called; resolves true once held, false if another page keeps
// it longer than `ms` (or true where the browser has no Web Locks: nothing to check against).
function acquireSession(id, ms = Infinity) {
  if (!navigator.locks) return Promise.resolve(true);
  if (heldSessions.has(id)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const abort = new AbortController();
    const timer = Number.isFinite(ms) ? setTimeout(() => abort.abort(), ms) : undefined;
    navigator.locks.request(lockName(id), { signal: abort.signal }, () => {
      clearTimeout(timer);
      resolve(true);
      return new Promise((release) => heldSessions.set(id, release));
    }).catch(() => resolve(false));
  });
}

function holdSession(id) {
  void acquireSession(id);
}

function releaseSessions() {
  for (const release of heldSessions.values()) release();
  heldSessions.clear();
}

main().catch((e) => notice('error', 'Tern failed to start', String(e && e.message || e)));
