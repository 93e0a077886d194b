// The clipboard, as terminals do it: copy on select (a setting), Ctrl+Shift+C / Ctrl+Shift+V
// (Cmd+C / Cmd+V on macOS: the browser's own copy and paste events, which xterm.js takes),
// middle-click and
// right-click paste (right-click copies instead when there is a selection), and OSC 52 from the
// remote. A program's OSC 52 goes by the setting "Programs may set the clipboard" (off / ask /
// on), decided in the core (`tern::page::remote_copy`): a notice says what a program did or
// asks, every time; the clipboard is written only on "on" or on the person's Copy. A browser
// refuses a clipboard write that no gesture of the person's started (a program in the
// background): then the notice's Copy button offers it, rather than a silent failure. Pastes go
// through xterm.js (`term.paste`), which brackets them when the remote asked for bracketed paste.

const MAC = /Mac|iPhone|iPad/.test(navigator.platform);

export function wireClipboard({ term, $, settings }) {
  const offer = $('copy-offer');
  let offered = '';
  let hideTimer = 0;
  const hideOffer = () => {
    offer.hidden = true;
    offered = '';
    clearTimeout(hideTimer);
  };
  // The notice: a sentence, the start of the text when asking (as text: never markup), Copy
  // when there is something to copy. One that only tells goes after a while; one that asks stays.
  const notice = ({ kind, message, preview = '', text = '' }) => {
    clearTimeout(hideTimer);
    offered = text;
    offer.dataset.kind = kind;
    $('copy-offer-text').textContent = message;
    const shown = $('copy-offer-preview');
    shown.textContent = preview;
    shown.hidden = !preview;
    $('copy-offer-button').hidden = !text;
    offer.hidden = false;
    if (!text) hideTimer = setTimeout(hideOffer, 10000);
  };
  const write = async (text) => {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      return false;
    }
  };
  // OSC 52 from a program, decided by the core: `write`, `ask` or `refused`.
  const remoteCopy = async ({ action, text, chars, message, preview }) => {
    if (action === 'write') {
      if (await write(text)) notice({ kind: 'told', message });
      else notice({ kind: 'ask', message: `The program copied ${chars} character${chars === 1 ? '' : 's'}; the browser wants a click to take them:`, text });
    } else if (action === 'ask') {
      notice({ kind: 'ask', message, preview, text });
    } else {
      notice({ kind: 'told', message });
    }
  };
  const paste = async () => {
    try {
      const text = await navigator.clipboard.readText();
      if (text) term.paste(text);
    } catch {
      // Refused (no permission): the browser's own paste (Ctrl+V, the context menu) still works.
    }
  };

  $('copy-offer-button').addEventListener('click', async () => {
    if (await write(offered)) hideOffer();
    term.focus();
  });
  $('copy-offer-close').addEventListener('click', () => {
    hideOffer();
    term.focus();
  });

  term.onSelectionChange(() => {
    if (settings().copyOnSelect && term.hasSelection()) write(term.getSelection());
  });

  // Middle click pastes (X11's habit); right click copies a selection, or pastes.
  term.element.addEventListener('auxclick', (e) => {
    if (e.button !== 1) return;
    e.preventDefault();
    paste();
  });
  term.element.addEventListener('mousedown', (e) => {
    // Chromium on Linux would otherwise start an autoscroll on a middle press.
    if (e.button === 1) e.preventDefault();
  });
  term.element.addEventListener('contextmenu', (e) => {
    if (e.shiftKey) return; // Shift+right click: the browser's menu.
    e.preventDefault();
    if (term.hasSelection()) {
      write(term.getSelection());
      term.clearSelection();
    } else {
      paste();
    }
  });

  return {
    // Ctrl+Shift+C / Ctrl+Shift+V (Linux, Windows); `true` when the key was taken.
    key(e) {
      if (e.type !== 'keydown' || MAC || !e.ctrlKey || !e.shiftKey || e.altKey || e.metaKey) return false;
      if (e.code === 'KeyC') {
        if (term.hasSelection()) write(term.getSelection());
        return true;
      }
      // The browser's own paste (Ctrl+Shift+V is "paste as plain text" in Chromium and Firefox)
      // follows the key: xterm.js takes its text, the page a pasted picture.
      if (e.code === 'KeyV') return true;
      return false;
    },
    // OSC 52 from the remote program.
    remoteCopy,
    // A sentence in the same note, for what is not the clipboard's (a read-only link's keys).
    tell: (message) => notice({ kind: 'told', message }),
    paste,
  };
}
