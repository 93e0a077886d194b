// Keys that belong to the shell, and the extra-keys bar of touch devices.
//
// - Shift+Enter sends ESC CR: what Claude Code, Codex and Gemini CLI read as "a new line in the
//   prompt" (xterm.js would send a plain CR). Alt+key sends ESC key (xterm.js does that itself;
//   on macOS only when "Option as Meta" is set, since Option types characters there).
// - On a touch device a bar above the on-screen keyboard: Esc, Tab, sticky Ctrl and Alt, the
//   arrows and the characters soft keyboards hide (| ~ / -). A sticky modifier applies to the next
//   key, from the bar or the keyboard, then lets go. The terminal fits the visual viewport, so the
//   on-screen keyboard never covers the prompt.

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
