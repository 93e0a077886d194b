// Keys that belong to the shell, and the extra-keys bar of touch devices.
//
// - Shift+Enter sends ESC CR: what Claude Code, Codex and Gemini CLI read as "a new line in the
//   prompt" (xterm.js would send a plain CR). Alt+key sends ESC key (xterm.js does that itself;
//   on macOS only when "Option as Meta" is set, since Option types characters there).
// - On a touch device a bar above the on-screen keyboard (wireBar): two rows of keys soft
//   keyboards lack, chosen in the settings (BAR_KEYS names them). Ctrl and Alt are sticky: they
//   apply to the next key, from the bar or the keyboard, then let go; a long press holds one down
//   until it is tapped again. A long press on another key sends its variant (VARIANTS). The
//   terminal fits the visual viewport (viewport.js), so the on-screen keyboard never covers the
//   prompt.
// - A finger on the terminal (wireTouch): dragged up or down it scrolls the scrollback, or, while
//   the program asked for mouse wheel reports, scrolls the program as the wheel would; held still
//   for half a second it offers "Paste" at that point. A tap stays a tap (focus, keyboard).

const ESC = '\x1b';
const CSI = `${ESC}[`;

/// The byte a Ctrl+key makes (Ctrl+C → 0x03, Ctrl+[ → ESC, Ctrl+Space → NUL); null for other keys.
export function ctrlByte(key) {
  if (key.length !== 1) return null;
  const c = key.toUpperCase().charCodeAt(0);
  if (c >= 0x40 && c <= 0x5f) return String.fromCharCode(c - 0x40);
  if (key === ' ') return '\0';
  if (key === '?') return '\x7f';
  return null;
}

// The bar's keys by name. `cursor`: a cursor-pad key, ESC O x unmodified (the page keeps xterm.js
// in DECCKM, as mosh-client does) and CSI 1;m x with modifiers, as xterm sends them; `tilde`: CSI
// n ~ (CSI n;m ~ modified). `variant`: the key a long press sends instead.
const NAMED = {
  esc: { label: 'Esc', text: ESC },
  tab: { label: 'Tab', text: '\t', variant: 'backtab' },
  backtab: { label: '⇤', aria: 'Shift+Tab', seq: `${CSI}Z` },
  enter: { label: '⏎', aria: 'Enter', text: '\r' },
  space: { label: '␣', aria: 'Space', text: ' ' },
  ctrl: { label: 'Ctrl', sticky: 'ctrl' },
  alt: { label: 'Alt', sticky: 'alt' },
  up: { label: '↑', aria: 'Up', cursor: 'A', variant: 'pgup' },
  down: { label: '↓', aria: 'Down', cursor: 'B', variant: 'pgdn' },
  right: { label: '→', aria: 'Right', cursor: 'C', variant: 'end' },
  left: { label: '←', aria: 'Left', cursor: 'D', variant: 'home' },
  home: { label: 'Home', cursor: 'H' },
  end: { label: 'End', cursor: 'F' },
  pgup: { label: 'PgUp', aria: 'Page Up', tilde: 5 },
  pgdn: { label: 'PgDn', aria: 'Page Down', tilde: 6 },
};
/// Names the bar's settings may use (besides any single character, which types itself).
const BAR_KEYS = Object.keys(NAMED).filter((n) => n !== 'backtab');

/// A long press on a character key types its partner: the shifted or paired character a soft
/// keyboard hides on another page.
const VARIANTS = {
  '-': '_', '/': '\\', '|': '&', '~': '`', '.': ',', ';': ':', "'": '"', '<': '>', '(': ')',
  '[': ']', '{': '}', '=': '+', '*': '^', '!': '?', '$': '#', '@': '%',
};
const VARIANT_LABEL = { backtab: '⇤', pgup: 'PgUp', pgdn: 'PgDn', home: 'Home', end: 'End' };

const MAX_ROWS = 2;
const MAX_PER_ROW = 10;
// A key's smallest width when the rows go side by side, and the bar's gap (style.css).
const KEY_MIN_PX = 44;
const KEY_GAP_PX = 3;

/// The settings' text for the bar (one line per row, names and single characters between spaces)
/// checked: `{ text, rows }` with the text tidied (lower case, single spaces), or `{ error }`.
export function parseBarLayout(input) {
  const lines = String(input ?? '').split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  if (!lines.length) return { error: 'The bar needs at least one key.' };
  if (lines.length > MAX_ROWS) return { error: `At most ${MAX_ROWS} rows (lines).` };
  const rows = [];
  for (const line of lines) {
    const row = [];
    for (const word of line.split(/\s+/)) {
      const name = word.length > 1 ? word.toLowerCase() : word;
      const ok = name.length === 1 ? /^[\x21-\x7e]$/.test(name) : BAR_KEYS.includes(name);
      if (!ok) {
        return { error: `“${word}” is not a key: a name (${BAR_KEYS.join(' ')}) or one character.` };
      }
      row.push(name);
    }
    if (row.length > MAX_PER_ROW) return { error: `At most ${MAX_PER_ROW} keys in a row (a row has ${row.length}).` };
    rows.push(row);
  }
  return { text: rows.map((r) => r.join(' ')).join('\n'), rows };
}

/// The modifier parameter of xterm's CSI sequences: 1 + Shift 1 + Alt 2 + Ctrl 4.
const modParam = ({ ctrl, alt }) => 1 + (alt ? 2 : 0) + (ctrl ? 4 : 0);

/// What the key called `name` sends with the modifiers `mods` ({ ctrl, alt }).
function bytesOf(name, mods) {
  const k = NAMED[name];
  const m = modParam(mods);
  if (k?.cursor) return m > 1 ? `${CSI}1;${m}${k.cursor}` : `${ESC}O${k.cursor}`;
  if (k?.tilde) return m > 1 ? `${CSI}${k.tilde};${m}~` : `${CSI}${k.tilde}~`;
  if (k?.seq) return (mods.alt ? ESC : '') + k.seq;
  const text = k ? k.text : name;
  return (mods.alt ? ESC : '') + ((mods.ctrl && ctrlByte(text)) || text);
}

export function wireKeys({ term, $, touch }) {
  // Each modifier: false, 'once' (the next key) or 'locked' (until tapped again).
  const sticky = { ctrl: false, alt: false };
  const bar = $('extra-keys');
  const sync = () => {
    for (const b of bar.querySelectorAll('[data-sticky]')) {
      const state = sticky[b.dataset.sticky];
      b.setAttribute('aria-pressed', String(Boolean(state)));
      b.classList.toggle('locked', state === 'locked');
    }
  };
  const release = () => {
    for (const mod of ['ctrl', 'alt']) if (sticky[mod] === 'once') sticky[mod] = false;
    sync();
  };
  const held = () => ({ ctrl: Boolean(sticky.ctrl), alt: Boolean(sticky.alt) });
  /// Input as if typed (xterm.js hands it to the client's onData).
  const send = (text) => term.input(text, true);
  /// A key's bytes under the sticky modifiers, which then let go (unless locked).
  const press = (name) => {
    send(bytesOf(name, held()));
    release();
  };
  const anySticky = () => Boolean(sticky.ctrl || sticky.alt);

  wireTouch(term);

  const setLayout = (text) => {
    const parsed = parseBarLayout(text);
    if (parsed.error) return;
    sticky.ctrl = false;
    sticky.alt = false;
    bar.replaceChildren(...parsed.rows.map((names) => {
      const row = document.createElement('div');
      row.className = 'row';
      row.style.setProperty('--keys', String(names.length));
      row.append(...names.map(keyButton));
      return row;
    }));
    arrange();
  };
  // The rows side by side, in one line, where the bar is wide enough for every key at
  // KEY_MIN_PX (a phone on its side, a tablet): the terminal keeps 47 px more of a short screen.
  const arrange = () => {
    const rows = bar.children.length;
    const keys = bar.querySelectorAll('button').length;
    const oneLine = rows > 1 && bar.clientWidth >= keys * KEY_MIN_PX + (keys + 1) * KEY_GAP_PX;
    bar.classList.toggle('one-line', oneLine);
    document.documentElement.style.setProperty('--bar-rows', String(oneLine ? 1 : rows));
  };

  if (touch) {
    bar.hidden = false;
    document.body.classList.add('touch');
    wireBar({ bar, term, sticky, sync, press });
    new ResizeObserver(arrange).observe(bar);
    // Soft keyboards that type through the input event, with no keydown for the key (Android's
    // keyboards send keyCode 229): the sticky modifiers apply there too. Capture on xterm.js's
    // element, before its textarea's own listener turns the text into input.
    term.element.addEventListener('input', (e) => {
      if (!anySticky() || e.inputType !== 'insertText' || !e.data || e.isComposing) return;
      e.stopPropagation();
      e.preventDefault();
      if (term.textarea) term.textarea.value = '';
      const [first, ...rest] = [...e.data];
      press(first);
      if (rest.length) send(rest.join(''));
    }, true);
    // Keyboards that compose (Gboard: the letter underlined until committed): xterm.js reads the
    // committed text from its textarea a moment after `compositionend`. Emptied here, it sends
    // nothing (its own composition state still ends as usual), and the text goes out with the
    // modifier.
    term.element.addEventListener('compositionend', (e) => {
      if (!anySticky() || !e.data) return;
      if (term.textarea) term.textarea.value = '';
      const [first, ...rest] = [...e.data];
      press(first);
      if (rest.length) send(rest.join(''));
    }, true);
  }

  // Text a keyboard commits inside its keyCode 229 keydown (Gboard's space or a punctuation key,
  // any IME's): xterm.js ignores an `input` while a keydown is down and reads the textarea's
  // change one timer after the keydown instead, so text that lands after that timer (the
  // keyboard's commit in a later task) was dropped. Sent here, and the textarea put back as it
  // was, so that xterm.js's timer, whenever it runs, finds no change and sends nothing twice.
  // The sticky modifiers' listener above takes such text while Ctrl or Alt is on.
  let keyDown229 = false;
  let beforeInput = null;
  term.element.addEventListener('keydown', (e) => { keyDown229 = e.keyCode === 229; }, true);
  term.element.addEventListener('keyup', () => { keyDown229 = false; }, true);
  term.element.addEventListener('beforeinput', () => { beforeInput = term.textarea?.value ?? null; }, true);
  term.element.addEventListener('input', (e) => {
    const before = beforeInput;
    beforeInput = null;
    if (!keyDown229 || anySticky() || e.inputType !== 'insertText' || !e.data || e.isComposing || before === null) return;
    e.stopPropagation();
    term.textarea.value = before;
    send(e.data);
  }, true);

  // xterm.js's custom key handler: `true` when the key was taken here.
  const key = (e) => {
    if (e.type !== 'keydown') return false;
    if (e.key === 'Enter' && e.shiftKey && !e.ctrlKey && !e.altKey && !e.metaKey) {
      send(`${ESC}\r`);
      e.preventDefault();
      return true;
    }
    if (anySticky() && e.key.length === 1 && !e.ctrlKey && !e.metaKey) {
      press(e.key);
      e.preventDefault();
      return true;
    }
    return false;
  };
  return { key, setLayout };
}

/// One key of the bar: its label, and its long-press variant in the corner.
function keyButton(name) {
  const k = NAMED[name];
  const b = document.createElement('button');
  b.type = 'button';
  b.dataset.key = name;
  b.textContent = k ? k.label : name;
  if (k?.aria) b.setAttribute('aria-label', k.aria);
  if (k?.sticky) {
    b.dataset.sticky = k.sticky;
    b.setAttribute('aria-pressed', 'false');
  }
  const variant = k ? k.variant : VARIANTS[name];
  if (variant) {
    b.dataset.variant = variant;
    b.dataset.hint = VARIANT_LABEL[variant] ?? variant;
  }
  return b;
}

/// The bar's taps and long presses. A tap (a click: also what a screen reader's activation is)
/// sends the key; a press held LONG_PRESS_MS sends the variant at that moment (the finger learns
/// it worked without lifting), or holds Ctrl/Alt down. The click that may follow a long press is
/// not a tap. Pressing never moves the focus: an open on-screen keyboard stays open, and a closed
/// one stays closed (PgUp through a pager with the whole screen in view).
function wireBar({ bar, term, sticky, sync, press }) {
  let down = null; // { button, timer, long, typing }
  bar.addEventListener('pointerdown', (e) => {
    e.preventDefault();
    clearTimeout(down?.timer);
    const b = e.target.closest('button');
    if (!b) return;
    const mine = { button: b, long: false, typing: document.activeElement === term.textarea };
    down = mine;
    mine.timer = setTimeout(() => {
      mine.long = true;
      const mod = b.dataset.sticky;
      if (mod) {
        sticky[mod] = 'locked';
        sync();
      } else if (b.dataset.variant) {
        press(b.dataset.variant);
      } else {
        press(b.dataset.key);
      }
      navigator.vibrate?.(12);
      b.classList.add('fired');
      setTimeout(() => b.classList.remove('fired'), 200);
    }, LONG_PRESS_MS);
  });
  const lift = () => clearTimeout(down?.timer);
  bar.addEventListener('pointerup', lift);
  bar.addEventListener('pointercancel', lift);
  // The browser's long-press menu (and iOS's callout) on a key.
  bar.addEventListener('contextmenu', (e) => e.preventDefault());
  bar.addEventListener('click', (e) => {
    const b = e.target.closest('button');
    if (!b) return;
    const was = down;
    down = null;
    clearTimeout(was?.timer);
    if (!(was?.long && was.button === b)) {
      const mod = b.dataset.sticky;
      if (mod) {
        sticky[mod] = sticky[mod] ? false : 'once';
        sync();
      } else {
        press(b.dataset.key);
      }
    }
    // A click with no finger or mouse before it (a screen reader, the keyboard) focused the
    // button: the terminal takes the focus back.
    if (!was || was.typing) term.focus();
  });
}

/// The full-screen button: full screen with the keyboard locked (the Keyboard Lock API, Chromium),
/// so that Ctrl+W, Ctrl+T, Ctrl+N and the like reach the shell instead of closing or opening tabs;
/// Esc held (or the button again) leaves. Where the API is missing, full screen alone.
export function wireFullscreen({ $, term }) {
  const button = $('fullscreen');
  if (!document.documentElement.requestFullscreen) {
    button.hidden = true;
    return;
  }
  // An installed app's own window (Chromium's "Install as app", display-mode standalone) keeps no
  // keys for itself: Ctrl+W, Ctrl+T and Ctrl+N reach the page, and xterm.js sends them to the
  // shell, with no full screen (docs/BROWSER.md, "Phones").
  if (matchMedia('(display-mode: standalone)').matches) {
    button.title = 'Full screen (in this app window Ctrl+W, Ctrl+T and Ctrl+N reach the shell already)';
  }
  const sync = () => button.setAttribute('aria-pressed', String(document.fullscreenElement !== null));
  document.addEventListener('fullscreenchange', sync);
  button.addEventListener('click', async () => {
    try {
      if (document.fullscreenElement) {
        await document.exitFullscreen();
      } else {
        await document.documentElement.requestFullscreen({ navigationUI: 'hide' });
        await navigator.keyboard?.lock?.();
      }
    } catch (e) {
      console.warn(`full screen: ${e}`);
    }
    term.focus();
  });
}

// How long a finger rests before the press counts as long (Android's and iOS's long press), and
// how far it may wander before it is a drag instead (CSS pixels).
export const LONG_PRESS_MS = 500;
const SLOP_PX = 10;

/// Which of xterm.js's mouse tracking modes report the wheel to the program (X10 reports
/// presses only; then the wheel scrolls the scrollback).
const WHEEL_REPORTED = new Set(['vt200', 'drag', 'any']);

/// A finger on the terminal. xterm.js 6 handles no touch gesture itself (its VS Code scroll
/// element reads only the wheel, xtermjs/xterm.js#5489), so the page does:
/// - a vertical drag scrolls a line per cell height moved, the text following the finger: through
///   the scrollback (`term.scrollLines`), or, while the program takes wheel reports (vim with
///   `mouse=a`, less with `--mouse`), as wheel events xterm.js turns into reports, one per line,
///   as for a turn of the wheel; dragged on at the top of the scrollback, one wheel turn up, which
///   opens the relay's whole history as the wheel does there (history.js). No momentum.
/// - a press held LONG_PRESS_MS without moving shows a "Paste" button at that point; tapping it
///   pastes the clipboard through xterm.js (bracketed when the program asked for it). A tap
///   elsewhere or Escape dismisses it. The browser's own long-press menu (a `contextmenu` event,
///   which clipboard.js would take as a right click and paste at once) is held back while a finger
///   is down on the terminal.
/// A tap (down and up within the time, without moving) is never touched: the browser's click
/// focuses xterm.js and opens the on-screen keyboard.
export function wireTouch(term) {
  const el = term.element;
  const screenEl = el.querySelector('.xterm-screen') ?? el;
  const offer = document.createElement('div');
  offer.id = 'paste-offer';
  offer.hidden = true;
  const button = document.createElement('button');
  button.type = 'button';
  button.textContent = 'Paste';
  offer.append(button);
  document.body.append(offer);

  const hide = () => {
    const was = !offer.hidden;
    offer.hidden = true;
    return was;
  };
  const show = (x, y) => {
    offer.hidden = false;
    // Centred over the press and above the finger (which covers the point), inside the window.
    const { width, height } = offer.getBoundingClientRect();
    const margin = 6;
    const left = Math.min(Math.max(margin, x - width / 2), window.innerWidth - width - margin);
    let top = y - height - 28;
    if (top < margin) top = y + 28;
    offer.style.left = `${Math.round(left)}px`;
    offer.style.top = `${Math.round(Math.min(top, window.innerHeight - height - margin))}px`;
  };
  // The button must not take the focus from xterm.js's textarea (the keyboard would close).
  button.addEventListener('pointerdown', (e) => e.preventDefault());
  button.addEventListener('click', async () => {
    hide();
    try {
      const text = await navigator.clipboard.readText();
      if (text) term.paste(text);
    } catch (e) {
      console.warn(`paste: the browser refused the clipboard (${e})`);
    }
    term.focus();
  });
  document.addEventListener('pointerdown', (e) => {
    if (!offer.hidden && !offer.contains(e.target)) hide();
  }, true);
  // Escape dismisses it and goes no further (capture: before xterm.js's textarea sends it).
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && hide()) {
      e.preventDefault();
      e.stopPropagation();
    }
  }, true);

  const cellHeight = () => screenEl.getBoundingClientRect().height / term.rows || 16;
  const wheel = (lines, x, y) => {
    el.dispatchEvent(new WheelEvent('wheel', {
      deltaY: lines, deltaMode: WheelEvent.DOM_DELTA_LINE, clientX: x, clientY: y, bubbles: true, cancelable: true,
    }));
  };
  /// Scrolls by `lines` (negative: towards older lines), from the finger at (x, y).
  const scroll = (lines, x, y) => {
    if (WHEEL_REPORTED.has(term.modes.mouseTrackingMode)) {
      for (let i = 0; i < Math.abs(lines); i++) wheel(Math.sign(lines), x, y);
    } else if (lines < 0 && term.buffer.active.viewportY === 0) {
      wheel(-1, x, y);
    } else {
      term.scrollLines(lines);
    }
  };

  // One finger's gesture: `pending` (maybe a tap, maybe a long press), `scroll`, `held` (the
  // offer showed), `other` (sideways, or a second finger: the browser's).
  let g = null;
  const settle = () => {
    if (g) clearTimeout(g.timer);
  };
  const ours = (e) => g && [...e.changedTouches].find((t) => t.identifier === g.id);
  el.addEventListener('touchstart', (e) => {
    settle();
    if (e.touches.length !== 1) {
      g = g && { ...g, mode: 'other' };
      return;
    }
    const t = e.changedTouches[0];
    g = { id: t.identifier, x0: t.clientX, y0: t.clientY, lastY: t.clientY, rest: 0, mode: 'pending' };
    const mine = g;
    g.timer = setTimeout(() => {
      if (g !== mine || g.mode !== 'pending') return;
      g.mode = 'held';
      show(g.x0, g.y0);
    }, LONG_PRESS_MS);
  }, { passive: true });
  el.addEventListener('touchmove', (e) => {
    const t = ours(e);
    if (!t || g.mode === 'other') return;
    if (e.touches.length !== 1) {
      settle();
      g.mode = 'other';
      return;
    }
    if (g.mode === 'pending') {
      const dx = t.clientX - g.x0;
      const dy = t.clientY - g.y0;
      if (Math.hypot(dx, dy) < SLOP_PX) return;
      settle();
      g.mode = Math.abs(dy) >= Math.abs(dx) ? 'scroll' : 'other';
    }
    if (g.mode === 'held') {
      e.preventDefault();
      return;
    }
    if (g.mode !== 'scroll') return;
    // The page neither scrolls nor pulls to refresh.
    if (e.cancelable) e.preventDefault();
    const cell = cellHeight();
    g.rest += t.clientY - g.lastY;
    g.lastY = t.clientY;
    const lines = Math.trunc(g.rest / cell);
    if (lines) {
      g.rest -= lines * cell;
      // The finger moved down: the text follows it, older lines come into view.
      scroll(-lines, t.clientX, t.clientY);
    }
  }, { passive: false });
  const end = (e) => {
    if (!ours(e)) return;
    settle();
    // After a long press the lifted finger is no click (nothing for a mouse-mode program).
    if (g.mode === 'held' && e.cancelable) e.preventDefault();
    g = null;
  };
  el.addEventListener('touchend', end, { passive: false });
  el.addEventListener('touchcancel', end);
  // The browser's long-press menu: held back while a finger rests on the terminal (capture on the
  // window, before clipboard.js's right-click paste on the terminal); the offer is the menu.
  window.addEventListener('contextmenu', (e) => {
    if (!g || !el.contains(e.target)) return;
    e.preventDefault();
    e.stopPropagation();
    if (g.mode === 'pending') {
      settle();
      g.mode = 'held';
      show(g.x0, g.y0);
    }
  }, true);

}
