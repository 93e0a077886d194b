// Keys that belong to the shell, and the extra-keys bar of touch devices.
//
// - Shift+Enter sends ESC CR: what Claude Code, Codex and Gemini CLI read as "a new line in the
//   prompt" (xterm.js would send a plain CR). Alt+key sends ESC key (xterm.js does that itself;
//   on macOS only when "Option as Meta" is set, since Option types characters there).
// - On a touch device a bar above the on-screen keyboard: Esc, Tab, sticky Ctrl and Alt, the
//   arrows and the characters soft keyboards hide (| ~ / -). A sticky modifier applies to the next
//   key, from the bar or the keyboard, then lets go. The terminal fits the visual viewport, so the
//   on-screen keyboard never covers the prompt.
// - A finger on the terminal (wireTouch): dragged up or down it scrolls the scrollback, or, while
//   the program asked for mouse wheel reports, scrolls the program as the wheel would; held still
//   for half a second it offers "Paste" at that point. A tap stays a tap (focus, keyboard).

const ESC = '\x1b';
const ARROWS = { up: 'A', down: 'B', right: 'C', left: 'D' };
const NAMED = { esc: ESC, tab: '\t' };

/// The byte a Ctrl+key makes (Ctrl+C → 0x03, Ctrl+[ → ESC, Ctrl+Space → NUL); null for other keys.
export function ctrlByte(key) {
  if (key.length !== 1) return null;
  const c = key.toUpperCase().charCodeAt(0);
  if (c >= 0x40 && c <= 0x5f) return String.fromCharCode(c - 0x40);
  if (key === ' ') return '\0';
  if (key === '?') return '\x7f';
  return null;
}

export function wireKeys({ term, $, touch, onLayout }) {
  const sticky = { ctrl: false, alt: false };
  const bar = $('extra-keys');
  const release = () => {
    sticky.ctrl = false;
    sticky.alt = false;
    for (const b of bar.querySelectorAll('[data-sticky]')) b.setAttribute('aria-pressed', 'false');
  };
  /// Input as if typed (xterm.js hands it to the client's onData).
  const send = (text) => term.input(text, true);
  const withModifiers = (text) => {
    let out = text;
    if (sticky.ctrl) out = ctrlByte(text) ?? text;
    if (sticky.alt) out = ESC + out;
    release();
    return out;
  };

  wireTouch(term);

  if (touch) {
    bar.hidden = false;
    document.body.classList.add('touch');
    bar.addEventListener('pointerdown', (e) => e.preventDefault()); // keep the keyboard open
    bar.addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b) return;
      const mod = b.dataset.sticky;
      if (mod) {
        sticky[mod] = !sticky[mod];
        b.setAttribute('aria-pressed', String(sticky[mod]));
      } else if (b.dataset.arrow) {
        // Cursor keys as ESC O x (the page keeps xterm.js in DECCKM, as mosh-client does).
        const seq = `${ESC}O${ARROWS[b.dataset.arrow]}`;
        send(sticky.alt ? ESC + seq : seq);
        release();
      } else {
        send(withModifiers(b.dataset.send ?? NAMED[b.dataset.key]));
      }
      term.focus();
    });
    // The on-screen keyboard shrinks the visual viewport, not the layout one.
    const vv = window.visualViewport;
    if (vv) {
      const fitView = () => {
        document.documentElement.style.setProperty('--view-height', `${vv.height}px`);
        onLayout();
      };
      vv.addEventListener('resize', fitView);
      fitView();
    }
  }

  // xterm.js's custom key handler: `true` when the key was taken here.
  return (e) => {
    if (e.type !== 'keydown') return false;
    if (e.key === 'Enter' && e.shiftKey && !e.ctrlKey && !e.altKey && !e.metaKey) {
      send(`${ESC}\r`);
      e.preventDefault();
      return true;
    }
    if ((sticky.ctrl || sticky.alt) && e.key.length === 1 && !e.ctrlKey && !e.metaKey) {
      send(withModifiers(e.key));
      e.preventDefault();
      return true;
    }
    return false;
  };
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
