// The settings panel (the gear, top right; Ctrl+, or the gear's keyboard focus and Enter): font
// size and family, theme, cursor, copy on select, programs setting the clipboard, prediction, scrollback, Option as Meta, bell
// notifications, the extra-keys bar of touch devices. Saved in localStorage (every tab of this
// origin), applied at once and at load.
// Ctrl+= / Ctrl+- / Ctrl+0 change the terminal's font size (not the page zoom).

const KEY = 'tern.settings';

export const FONTS = {
  default: '"JetBrains Mono", "Cascadia Mono", "Fira Code", "SF Mono", Menlo, Consolas, "DejaVu Sans Mono", "Liberation Mono", monospace',
  'DejaVu Sans Mono': '"DejaVu Sans Mono", monospace',
  'Liberation Mono': '"Liberation Mono", monospace',
  'Courier New': '"Courier New", Courier, monospace',
  monospace: 'monospace',
};

export const DEFAULTS = Object.freeze({
  fontSize: 15,
  fontFamily: 'default',
  theme: 'system', // 'dark', 'light', 'system'
  cursorStyle: 'block', // 'block', 'bar', 'underline'
  cursorBlink: true,
  copyOnSelect: true,
  remoteCopy: 'ask', // OSC 52 from a program: 'off', 'ask', 'on'
  predict: 'adaptive', // 'adaptive', 'always', 'never', 'experimental'
  predictOverwrite: false,
  scrollback: 2000,
  macOptionIsMeta: false,
  notifications: false,
  programNotify: 'off', // OSC 9 / 777 from a program: 'off', 'hidden' (when the tab is hidden)
  confirmClose: true,
  // The extra-keys bar (touch devices): one line per row, key names or single characters
  // (keys.js, parseBarLayout).
  extraKeys: 'esc / - | home up end pgup\ntab ctrl alt ~ left down right pgdn',
});

const FONT_SIZE = { min: 8, max: 32 };
const SCROLLBACK = { min: 0, max: 100000 };

const clamp = (v, { min, max }, dflt) => (Number.isFinite(v) ? Math.min(max, Math.max(min, Math.round(v))) : dflt);
const oneOf = (v, options, dflt) => (options.includes(v) ? v : dflt);

/// What was saved, each value checked (a hand-edited or older entry never breaks the page).
/// `checks.extraKeys(text)` answers `{ text }` (tidied) or `{ error }` (keys.js's parseBarLayout:
/// this module imports nothing).
export function loadSettings(checks = {}) {
  let saved = {};
  try {
    saved = JSON.parse(localStorage.getItem(KEY) ?? '{}') ?? {};
  } catch {
    saved = {};
  }
  return {
    fontSize: clamp(Number(saved.fontSize), FONT_SIZE, DEFAULTS.fontSize),
    fontFamily: oneOf(saved.fontFamily, Object.keys(FONTS), DEFAULTS.fontFamily),
    theme: oneOf(saved.theme, ['dark', 'light', 'system'], DEFAULTS.theme),
    cursorStyle: oneOf(saved.cursorStyle, ['block', 'bar', 'underline'], DEFAULTS.cursorStyle),
    cursorBlink: typeof saved.cursorBlink === 'boolean' ? saved.cursorBlink : DEFAULTS.cursorBlink,
    copyOnSelect: typeof saved.copyOnSelect === 'boolean' ? saved.copyOnSelect : DEFAULTS.copyOnSelect,
    remoteCopy: oneOf(saved.remoteCopy, ['off', 'ask', 'on'], DEFAULTS.remoteCopy),
    predict: oneOf(saved.predict, ['adaptive', 'always', 'never', 'experimental'], DEFAULTS.predict),
    predictOverwrite: saved.predictOverwrite === true,
    scrollback: clamp(Number(saved.scrollback), SCROLLBACK, DEFAULTS.scrollback),
    macOptionIsMeta: saved.macOptionIsMeta === true,
    notifications: saved.notifications === true,
    programNotify: oneOf(saved.programNotify, ['off', 'hidden'], DEFAULTS.programNotify),
    confirmClose: typeof saved.confirmClose === 'boolean' ? saved.confirmClose : DEFAULTS.confirmClose,
    extraKeys: (typeof saved.extraKeys === 'string' && checks.extraKeys?.(saved.extraKeys).text) || DEFAULTS.extraKeys,
  };
}

function save(settings) {
  try {
    localStorage.setItem(KEY, JSON.stringify(settings));
  } catch {
    // Storage full or refused: the settings hold for this page.
  }
}

/// Wires the panel. `apply(settings, changed)` makes a setting take effect (app.js knows the
/// terminal, the client and the fit); it runs once at start with every key. `relay()` names the
/// relay serving the page (`tern-relay 0.1.0 (1a2b3c4d5e6f)`) once it is known, shown at the
/// bottom of the panel.
export function wireSettings({ $, apply, initial, relay = () => undefined, checks = {} }) {
  const settings = { ...initial };
  const panel = $('settings');
  const gear = $('gear');
  const form = $('settings-form');
  const field = (name) => form.elements.namedItem(name);

  const show = () => {
    for (const [name, value] of Object.entries(settings)) {
      const el = field(name);
      if (!el) continue;
      // Not the bar's text while it is typed in (the tidied text would move the caret, eat spaces).
      if (el.tagName === 'TEXTAREA' && el === document.activeElement) continue;
      if (el.type === 'checkbox') el.checked = value;
      else el.value = String(value);
    }
    $('settings-notify-state').textContent = notificationState();
    $('settings-relay').textContent = relay() ?? '';
  };
  const set = (changes) => {
    Object.assign(settings, changes);
    save(settings);
    apply(settings, Object.keys(changes));
    show();
  };
  const open = () => {
    $('settings-extra-keys-error').textContent = '';
    show();
    panel.hidden = false;
    gear.setAttribute('aria-expanded', 'true');
    field('fontSize').focus();
  };
  const close = ({ focusTerminal = true } = {}) => {
    panel.hidden = true;
    gear.setAttribute('aria-expanded', 'false');
    if (focusTerminal) window.tern?.term.focus();
  };

  gear.addEventListener('click', () => (panel.hidden ? open() : close()));
  $('settings-close').addEventListener('click', () => close());
  panel.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      e.preventDefault();
      close();
    }
  });
  form.addEventListener('submit', (e) => e.preventDefault());
  // The bar's keys: the bar follows the text as it is typed, as long as the text is valid; what
  // is wrong is said under it.
  const barError = $('settings-extra-keys-error');
  form.addEventListener('input', (e) => {
    if (e.target.name !== 'extraKeys') return;
    const { text, error } = checks.extraKeys?.(e.target.value) ?? { text: e.target.value };
    barError.textContent = error ?? '';
    e.target.setAttribute('aria-invalid', String(Boolean(error)));
    if (!error && text !== settings.extraKeys) set({ extraKeys: text });
  });
  $('settings-extra-keys-reset').addEventListener('click', () => {
    barError.textContent = '';
    field('extraKeys').setAttribute('aria-invalid', 'false');
    set({ extraKeys: DEFAULTS.extraKeys });
  });
  form.addEventListener('change', (e) => {
    const el = e.target;
    // The bar's text, left: shown tidied once valid (the input handler saved it).
    if (el.name === 'extraKeys' && !barError.textContent) el.value = settings.extraKeys;
    if (!el.name || !(el.name in settings) || el.name === 'extraKeys') return;
    let value = el.type === 'checkbox' ? el.checked : el.value;
    if (el.name === 'fontSize') value = clamp(Number(value), FONT_SIZE, settings.fontSize);
    if (el.name === 'scrollback') value = clamp(Number(value), SCROLLBACK, settings.scrollback);
    if (el.name === 'notifications' && value) {
      // Asked for here, from the person's click: a browser only asks from a gesture.
      askNotifications().then((granted) => set({ notifications: granted }));
      return;
    }
    if (el.name === 'programNotify' && value === 'hidden') {
      askNotifications().then((granted) => set({ programNotify: granted ? 'hidden' : 'off' }));
      return;
    }
    set({ [el.name]: value });
  });
  $('settings-reset').addEventListener('click', () => {
    barError.textContent = '';
    field('extraKeys').setAttribute('aria-invalid', 'false');
    set({ ...DEFAULTS });
  });

  // The terminal's font size, not the page zoom: capture phase, before the browser and xterm.js.
  document.addEventListener('keydown', (e) => {
    if (!(e.ctrlKey || e.metaKey) || e.altKey || (e.shiftKey && e.key !== '+')) return;
    const step = { '=': 1, '+': 1, '-': -1, _: -1 }[e.key];
    if (e.key === '0') {
      e.preventDefault();
      set({ fontSize: DEFAULTS.fontSize });
    } else if (step) {
      e.preventDefault();
      set({ fontSize: clamp(settings.fontSize + step, FONT_SIZE, settings.fontSize) });
    } else if (e.key === ',') {
      e.preventDefault();
      if (panel.hidden) open();
      else close();
    }
  }, true);

  apply(settings, Object.keys(settings));
  return {
    get: () => ({ ...settings }),
    set,
    open,
    close,
    isOpen: () => !panel.hidden,
  };
}

function notificationState() {
  if (!('Notification' in window)) return 'This browser has no notifications.';
  if (Notification.permission === 'denied') return 'Blocked in the browser\'s site settings.';
  if (Notification.permission === 'granted') return 'Allowed.';
  return '';
}

async function askNotifications() {
  if (!('Notification' in window)) return false;
  if (Notification.permission === 'granted') return true;
  try {
    return (await Notification.requestPermission()) === 'granted';
  } catch {
    return false;
  }
}
