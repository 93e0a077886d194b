// Hyperlinks programs print (OSC 8: `ls --hyperlink`, compilers, coding agents): mosh-server drops
// them, so their text reaches the page plain. The recorder reads each link's text and column off
// its own screen and the relay sends them here (docs/IMAGES.md, "Hyperlinks"); this module makes
// every place a row shows that text at that column a link (xterm.js's link provider), with its URL
// shown on hover. Only http, https and mailto URLs ever come (checked by the recorder and again
// by the page's core); a click opens them in a new tab that cannot reach this one (noopener).

/// Links kept (newest first when two match the same cells).
const MAX_LINKS = 500;

export function wireLinks({ term }) {
  const links = []; // { url, text, col }, oldest first
  const tip = document.createElement('div');
  tip.id = 'link-hover';
  tip.setAttribute('role', 'tooltip');
  tip.hidden = true;
  document.body.append(tip);

  // The cells of `line` from `col` spell `text`: the cell after the last one, else -1. A wide
  // character takes two cells (the second is empty, width 0); an unwritten cell reads as a space.
  const spells = (line, col, text) => {
    let at = 0;
    let x = col;
    const cell = term.buffer.active.getNullCell();
    while (at < text.length) {
      if (!line.getCell(x, cell)) return -1;
      const w = cell.getWidth();
      if (w === 0) { x += 1; continue; }
      const chars = cell.getChars() || ' ';
      if (!text.startsWith(chars, at)) return -1;
      at += chars.length;
      x += w;
    }
    return x;
  };

  const show = (event, url) => {
    tip.textContent = url;
    tip.hidden = false;
    // Below and right of the pointer, kept inside the window.
    const { innerWidth: w, innerHeight: h } = window;
    const box = tip.getBoundingClientRect();
    tip.style.left = `${Math.max(4, Math.min(event.clientX + 12, w - box.width - 4))}px`;
    tip.style.top = `${event.clientY + 18 + box.height > h ? event.clientY - box.height - 8 : event.clientY + 18}px`;
  };
  const hide = () => { tip.hidden = true; };

  term.registerLinkProvider({
    provideLinks(y, callback) {
      const line = term.buffer.active.getLine(y - 1);
      if (!line || links.length === 0) return callback(undefined);
      const found = [];
      const taken = new Set();
      for (let i = links.length - 1; i >= 0; i--) {
        const { url, text, col } = links[i];
        if (col >= term.cols || taken.has(col)) continue;
        const end = spells(line, col, text);
        if (end < 0) continue;
        taken.add(col);
        found.push({
          range: { start: { x: col + 1, y }, end: { x: end, y } },
          text,
          decorations: { pointerCursor: true, underline: true },
          activate: () => window.open(url, '_blank', 'noopener,noreferrer'),
          hover: (event) => show(event, url),
          leave: hide,
        });
      }
      callback(found.length ? found : undefined);
    },
  });

  return {
    /// A program printed `text` at column `col` as a link to `url` (the relay's `link`).
    add(url, text, col) {
      if (links.some((l) => l.url === url && l.text === text && l.col === col)) return;
      links.push({ url, text, col });
      if (links.length > MAX_LINKS) links.shift();
    },
    /// For tests: how many are kept.
    count: () => links.length,
  };
}
