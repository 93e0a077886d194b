// The clipboard, as terminals do it: copy on select (a setting), Ctrl+Shift+C / Ctrl+Shift+V
// (Cmd+C / Cmd+V on macOS: the browser's own copy and paste events, which xterm.js takes),
// middle-click and
// right-click paste (right-click copies instead when there is a selection), and OSC 52 from the
// remote. A browser refuses a clipboard write that no gesture of the person's started (an OSC 52
// from a program running in the background): then a small "Copy" button offers it, rather than a
// silent failure. Pastes go through xterm.js (`term.paste`), which brackets them when the remote
// asked for bracketed paste.

const MAC = /Mac|iPhone|iPad/.test(navigator.platform);

export function wireClipboard({ term, $, settings }) {
  const offer = $('copy-offer');
  let offered = '';
  const hideOffer = () => {
    offer.hidden = true;
    offered = '';
  };
  const write = async (text, { fromRemote = false } = {}) => {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      if (fromRemote) {
        offered = text;
        $('copy-offer-text').textContent = `The program copied ${text.length} character${text.length === 1 ? '' : 's'}.`;
        offer.hidden = false;
      }
      return false;
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
    remoteCopy: (text) => write(text, { fromRemote: true }),
    paste,
  };
}
