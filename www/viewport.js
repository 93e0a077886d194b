// The terminal on a phone fits the part of the page the on-screen keyboard leaves visible.
//
// A soft keyboard shrinks the visual viewport, not the layout one (iOS always; Android Chrome
// since 108, `interactive-widget=resizes-visual`), so neither `resize` on the window nor the
// terminal's ResizeObserver sees it. Every size the terminal takes is a resize message to
// mosh-server and a SIGWINCH (a redraw) for the program, so the rule is one size per keyboard
// opening and one per closing:
// - `--vv-height`: the visible height now, at every visualViewport `resize` (the extra-keys bar
//   rides on top of the keyboard while it slides in);
// - `--view-height`: the height the terminal is fit to, taken only once the visible height has
//   not changed for SETTLE_MS (a keyboard's slide fires a `resize` per frame on Android);
// - heights are `height × scale`, the visible height in unzoomed CSS pixels: a pinch zoom changes
//   `visualViewport.height` but not what fits, and scrolling (`offsetTop`) changes neither;
// - iOS scrolls the layout viewport to bring the focused textarea above its keyboard, which would
//   push the page's top (mosh's notification bar, the first rows) out of sight: the page is pinned
//   at the top (the document has nothing to scroll; the terminal scrolls itself).

export const SETTLE_MS = 150;

export function wireVisualViewport({ onLayout, root = document.documentElement }) {
  const vv = window.visualViewport;
  if (!vv) return;
  const visible = () => Math.round(vv.height * vv.scale);
  let fitted = null;
  let timer;
  const fit = () => {
    timer = undefined;
    const h = visible();
    if (h === fitted) return;
    fitted = h;
    root.style.setProperty('--view-height', `${h}px`);
    onLayout();
  };
  const pin = () => {
    if (window.scrollY !== 0 || window.scrollX !== 0) window.scrollTo(0, 0);
  };
  vv.addEventListener('resize', () => {
    root.style.setProperty('--vv-height', `${visible()}px`);
    pin();
    clearTimeout(timer);
    timer = setTimeout(fit, SETTLE_MS);
  });
  vv.addEventListener('scroll', pin);
  window.addEventListener('scroll', pin);
  root.style.setProperty('--vv-height', `${visible()}px`);
  fit();
}
