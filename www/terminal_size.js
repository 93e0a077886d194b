// The terminal's size before xterm.js has opened it, so the hello (which carries the size) can
// leave before the ~20-50 ms of `term.open()` and the page's wiring: those run while the hello is
// on its way (docs/BENCHMARKS.md, "The hello before xterm.js opens").
//
// It is what xterm.js 6 and its fit addon will compute once the terminal is open, from the same
// inputs: the cell measured as xterm.js's CharSizeService measures it (an OffscreenCanvas's
// `measureText('W')`, its width and font bounding box), the DOM renderer's rounding to device
// pixels (DomRenderer._updateDimensions), and FitAddon.proposeDimensions's available space
// (the parent's size less the `.xterm` element's padding and the scroll bar). Where it is wrong
// (a browser without these font metrics, a font still loading) nothing is lost: the page fits
// the opened terminal through its resize path, which tells the session the real size.
// tests/browser/tests/first-prompt.test.mjs checks it against the fitted size in a few windows.

// xterm.js's fit addon: the scroll bar's width when there is a scrollback and no overview ruler,
// and the smallest size it proposes.
const SCROLL_BAR_WIDTH = 14;
const MIN_COLS = 2;
const MIN_ROWS = 1;
// xterm.js's default size, the one the renderer's first dimensions are computed for.
const DEFAULT_COLS = 80;
const DEFAULT_ROWS = 24;

// `{ cols, rows }` for a terminal with these options opened in `parent`, or null when the font's
// metrics or the parent's size are not known yet.
export function estimateTerminalSize(parent, { fontFamily, fontSize, lineHeight = 1, letterSpacing = 0, scrollback }) {
  const cell = measureCell(fontFamily, fontSize);
  if (!cell) return null;
  const space = availableSpace(parent, scrollback);
  if (!space) return null;
  const dpr = window.devicePixelRatio || 1;
  const deviceCellWidth = cell.width * dpr + Math.round(letterSpacing);
  const deviceCellHeight = Math.floor(Math.ceil(cell.height * dpr) * lineHeight);
  // The renderer rounds the whole canvas to CSS pixels for the terminal's current size, so the
  // cell the fit divides by depends (by a hair) on that size: the fit of a terminal just opened
  // at `cols` x `rows`. Computed from xterm.js's default, then again from the answer, until it
  // proposes the size it was computed for (the fit after open then changes nothing).
  let size = { cols: DEFAULT_COLS, rows: DEFAULT_ROWS };
  for (let i = 0; i < 4; i++) {
    const cssCellWidth = Math.round((deviceCellWidth * size.cols) / dpr) / size.cols;
    const cssCellHeight = Math.round((deviceCellHeight * size.rows) / dpr) / size.rows;
    const next = {
      cols: Math.max(MIN_COLS, Math.floor(space.width / cssCellWidth)),
      rows: Math.max(MIN_ROWS, Math.floor(space.height / cssCellHeight)),
    };
    if (next.cols === size.cols && next.rows === size.rows) break;
    size = next;
  }
  return size;
}

function measureCell(fontFamily, fontSize) {
  try {
    const ctx = new OffscreenCanvas(100, 100).getContext('2d');
    ctx.font = `${fontSize}px ${fontFamily}`;
    const m = ctx.measureText('W');
    const height = m.fontBoundingBoxAscent + m.fontBoundingBoxDescent;
    if (!(m.width > 0 && height > 0)) return null;
    return { width: m.width, height };
  } catch {
    // No OffscreenCanvas or no font bounding box: xterm.js measures with a DOM element there.
    return null;
  }
}

// The parent's content size less what the fit addon takes off: the `.xterm` element's padding (a
// stand-in element with its class, as the page's style sheets give it) and the scroll bar.
function availableSpace(parent, scrollback) {
  const style = getComputedStyle(parent);
  const height = parseInt(style.getPropertyValue('height'));
  const width = Math.max(0, parseInt(style.getPropertyValue('width')));
  if (!(height > 0 && width > 0)) return null;
  const probe = document.createElement('div');
  probe.className = 'xterm';
  parent.appendChild(probe);
  const padding = getComputedStyle(probe);
  const px = (side) => parseInt(padding.getPropertyValue(`padding-${side}`)) || 0;
  const vertical = px('top') + px('bottom');
  const horizontal = px('left') + px('right');
  probe.remove();
  const scrollBar = scrollback === 0 ? 0 : SCROLL_BAR_WIDTH;
  return { width: width - horizontal - scrollBar, height: height - vertical };
}
