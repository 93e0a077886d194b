// Hardware keyboards on iPads and iPhones: keys that Safari (and every iOS browser: they are all
// WebKit) hands over in a shape xterm.js 6.0.0 cannot read, and the bytes they stand for.
//
// xterm.js decodes a keydown by its deprecated `keyCode` (src/common/input/Keyboard.ts). WebKit on
// iOS, iPadOS and visionOS, with a paired or attached keyboard, gets some of those wrong while
// `key` and the modifier flags are right:
// - Ctrl+C arrives with keyCode 13 (Enter), `key: 'c'`, `ctrlKey: true`: xterm.js sends CR, the
//   shell starts a new line and `sleep 60` goes on (xtermjs/xterm.js#5721, #3248; VS Code, ttyd,
//   paseo #1049 saw the same). Other Ctrl+letters and Ctrl+[ come with keyCodes as odd (0, 13),
//   and are then lost or become CR (paseo #4289: Esc, arrows and Ctrl+[ do nothing in a TUI).
// - Esc, the arrows and PageUp/PageDown arrive with keyCode 0 and UIKit's names in `key`:
//   'UIKeyInputEscape', 'UIKeyInputUpArrow' (Down, Left, Right), 'UIKeyInputPageUp' (Down), and
//   since iOS 13.4 'UIKeyInputHome' and 'UIKeyInputEnd': UIKit's UIKeyInput* constants
//   (xtermjs/xterm.js#1064 reported the arrows so). xterm.js 6.0.0 knows the four arrow names
//   only; Esc and the rest are dropped. A standard name ('Escape', 'ArrowUp') with keyCode 0 is as
//   lost.
// So: a keydown whose `key` says what it is while its keyCode says something else is turned into
// the bytes xterm.js would have sent for that key here; everything else is left to xterm.js.
// Keys under an IME composition (keyCode 229, `isComposing`) are the IME's, never taken here.
//
// xterm.js fixed Ctrl+C after 6.0.0 (xtermjs/xterm.js#5742, in its 6.1.0 betas); this module can go
// once the page's xterm.js carries #5742 and decodes Esc and Ctrl+[ by `key` as well (check
// tests/browser/tests/keyboard.test.mjs without it first).

const ESC = '\x1b';

// UIKit's key names (UIKeyInput*) → the standard `key` values.
const UIKIT_NAMES = {
  UIKeyInputEscape: 'Escape',
  UIKeyInputUpArrow: 'ArrowUp',
  UIKeyInputDownArrow: 'ArrowDown',
  UIKeyInputLeftArrow: 'ArrowLeft',
  UIKeyInputRightArrow: 'ArrowRight',
  UIKeyInputPageUp: 'PageUp',
  UIKeyInputPageDown: 'PageDown',
  UIKeyInputHome: 'Home',
  UIKeyInputEnd: 'End',
};

// Each named key: the keyCode a well-formed event carries (xterm.js reads it right then), and its
// final byte: cursor keys `ESC [ x` / `ESC O x` (DECCKM) / `ESC [ 1 ; m x` with modifiers;
// PageUp/PageDown `ESC [ n ~` / `ESC [ n ; m ~`.
const NAMED = {
  Escape: { keyCode: 27 },
  ArrowUp: { keyCode: 38, cursor: 'A' },
  ArrowDown: { keyCode: 40, cursor: 'B' },
  ArrowRight: { keyCode: 39, cursor: 'C' },
  ArrowLeft: { keyCode: 37, cursor: 'D' },
  Home: { keyCode: 36, cursor: 'H' },
  End: { keyCode: 35, cursor: 'F' },
  PageUp: { keyCode: 33, tilde: 5 },
  PageDown: { keyCode: 34, tilde: 6 },
};

// The keyCode under which xterm.js 6.0.0 turns Ctrl+key into its control byte (US layout codes);
// undefined for keys it finds by `key` or not at all.
function ctrlKeyCode(key) {
  if (/^[a-z]$/i.test(key)) return key.toUpperCase().charCodeAt(0);
  return { '[': 219, '\\': 220, ']': 221, ' ': 32 }[key];
}

/// The bytes for a keydown that xterm.js would misread, or null (xterm.js's own). `appCursor`:
/// xterm.js's cursor-key mode (DECCKM; the page keeps it on, as mosh-client does); `ctrlByte`:
/// keys.js's (Ctrl+key → its control byte).
function bytesFor(e, appCursor, ctrlByte) {
  if (e.isComposing || e.keyCode === 229 || e.metaKey) return null;
  const name = UIKIT_NAMES[e.key] ?? e.key;
  const named = NAMED[name];
  if (named) {
    if (name === e.key && e.keyCode === named.keyCode) return null;
    // xterm.js's modifier parameter: 1 + Shift 1, Alt 2, Ctrl 4.
    const mods = (e.shiftKey ? 1 : 0) | (e.altKey ? 2 : 0) | (e.ctrlKey ? 4 : 0);
    if (name === 'Escape') return e.altKey ? ESC + ESC : ESC;
    if (named.tilde) return `${ESC}[${named.tilde}${mods ? `;${mods + 1}` : ''}~`;
    if (mods) return `${ESC}[1;${mods + 1}${named.cursor}`;
    return `${ESC}${appCursor ? 'O' : '['}${named.cursor}`;
  }
  if (!e.ctrlKey || e.altKey || e.key.length !== 1) return null;
  // Ctrl+Shift+letter is another key (the clipboard's Ctrl+Shift+C/V, say), not a control byte.
  if (e.shiftKey && /^[a-z]$/i.test(e.key)) return null;
  const byte = ctrlByte(e.key);
  if (byte === null) return null;
  const expected = ctrlKeyCode(e.key);
  // Where xterm.js reads this key right (its keyCode is the key's), it is xterm.js's.
  if (expected !== undefined ? e.keyCode === expected : e.keyCode !== 0 && e.keyCode !== 13) return null;
  return byte;
}

/// A handler for app.js's key handler chain: `true` when the key was taken here. `ctrlByte` is
/// keys.js's, passed in (the page's modules import nothing: scripts/bundle-page.mjs).
export function wireHardwareKeys({ term, ctrlByte }) {
  return (e) => {
    if (e.type !== 'keydown') return false;
    const bytes = bytesFor(e, term.modes.applicationCursorKeysMode, ctrlByte);
    if (bytes === null) return false;
    // No keypress or input follows (the key typed nothing else).
    e.preventDefault();
    // Shift+PageUp/PageDown scroll the scrollback, as xterm.js does for them.
    const name = UIKIT_NAMES[e.key] ?? e.key;
    if (e.shiftKey && !e.altKey && !e.ctrlKey && (name === 'PageUp' || name === 'PageDown')) {
      term.scrollLines((name === 'PageUp' ? -1 : 1) * (term.rows - 1));
      return true;
    }
    // As typed: xterm.js hands it to the client's onData (and scrolls to the bottom).
    term.input(bytes, true);
    return true;
  };
}
