// Viewer links (docs/BROWSER.md, "Sharing a session"): the owner's Share dialog and the count of
// those who watch, and the viewer's own page. The relay makes the link (a read-only token bound
// to this session, POST /api/share through the wasm client) and feeds each viewer from its copy
// of the screen; this module only shows things and moves clicks.

const EXPIRIES = [
  ['15 minutes', 15 * 60],
  ['1 hour', 3600],
  ['8 hours', 8 * 3600],
  ['1 day', 86400],
  ['7 days', 7 * 86400],
];

// The owner's side: the Share button opens the dialog (expiry, history, the link with Copy,
// End sharing); the count pill shows while anyone watches.
export function wireShare({ $, client }) {
  const dialog = $('share-dialog');
  const button = $('share');
  const count = $('viewers');
  const expires = $('share-expires');
  for (const [label, secs] of EXPIRIES) {
    const o = document.createElement('option');
    o.value = String(secs);
    o.textContent = label;
    if (secs === 3600) o.selected = true;
    expires.append(o);
  }
  let sharing = false;
  const setSharing = (on) => {
    sharing = on;
    $('share-end').hidden = !on;
    button.classList.toggle('on', on);
  };
  const open = (show) => {
    dialog.hidden = !show;
    button.setAttribute('aria-expanded', String(show));
    if (show) $('share-create').focus();
    else window.tern?.term.focus();
  };
  const say = (text, bad = false) => {
    const p = $('share-status');
    p.textContent = text;
    p.classList.toggle('error', bad);
  };
  button.onclick = () => open(dialog.hidden);
  count.onclick = () => open(true);
  $('share-close').onclick = () => open(false);
  dialog.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      e.preventDefault();
      open(false);
    }
  });
  $('share-create').onclick = async () => {
    say('Making a link…');
    try {
      const made = await client.share(Number(expires.value), $('share-history').checked);
      $('share-link').value = made.url;
      $('share-link-row').hidden = false;
      const until = new Date(made.expires * 1000);
      say(`Anyone with this link can watch, read-only, until ${until.toLocaleString()}. It is shown once.`);
      setSharing(true);
      $('share-copy').focus();
    } catch (e) {
      say(`Cannot share: ${e?.message ?? e}`, true);
    }
  };
  $('share-copy').onclick = async () => {
    const link = $('share-link');
    try {
      await navigator.clipboard.writeText(link.value);
      say('Link copied.');
    } catch {
      // No clipboard permission: the link is selected for Ctrl+C.
      link.select();
      say('Press Ctrl+C to copy the selected link.');
    }
  };
  $('share-end').onclick = async () => {
    try {
      const ended = await client.endSharing();
      $('share-link-row').hidden = true;
      $('share-link').value = '';
      say(ended ? 'Sharing ended: the viewers were closed.' : 'Nothing was shared.');
      setSharing(false);
    } catch (e) {
      say(`Cannot end sharing: ${e?.message ?? e}`, true);
    }
  };
  return {
    // The relay says how many watch (at once, and whenever it changes).
    viewers(n) {
      count.hidden = n === 0;
      count.textContent = `${n} watching`;
      count.title = n === 1 ? '1 person watches this session (read-only)' : `${n} people watch this session (read-only)`;
      count.setAttribute('aria-label', count.title);
      if (n > 0) setSharing(true);
    },
  };
}

// The viewer's side: a bar says what this page is; the terminal takes the session's size from
// the relay's updates and is scaled to fit the window (the session is never resized from here).
export function wireViewer({ $, term }) {
  document.body.classList.add('viewing');
  const bar = $('viewer-bar');
  bar.hidden = false;
  const box = $('terminal');
  let owner = 'a shared session';
  let title = '';
  const show = () => {
    $('viewer-title').textContent = owner;
    $('viewer-session').textContent = title ? ` “${title}”` : '';
  };
  // Scales the terminal's screen into the window, never above its natural size. Also when the
  // screen's own size changes (a web font's metrics arriving late, a new grid): a transform does
  // not change the layout size watched, so this cannot loop.
  const screenObserver = new ResizeObserver(() => fit());
  let watched = null;
  const fit = () => {
    const el = box.querySelector('.xterm-screen');
    if (!el) return;
    if (el !== watched) {
      watched = el;
      screenObserver.observe(el);
    }
    const w = el.offsetWidth;
    const h = el.offsetHeight;
    if (!w || !h) return;
    // The box's content area (its padding is breathing room), less a little for the scrollbar.
    const css = getComputedStyle(box);
    const px = (v) => parseFloat(v) || 0;
    const width = box.clientWidth - px(css.paddingLeft) - px(css.paddingRight) - 16;
    const height = box.clientHeight - px(css.paddingTop) - px(css.paddingBottom) - 4;
    const scale = Math.min(1, width / w, height / h);
    box.style.setProperty('--viewer-scale', String(scale));
  };
  window.addEventListener('resize', fit);
  new ResizeObserver(fit).observe(box);
  return {
    // Before the bytes of an update: the session's size, and a reset for a full paint.
    screen(cols, rows, full) {
      if (full) term.reset();
      if (term.cols !== cols || term.rows !== rows) {
        term.resize(cols, rows);
        requestAnimationFrame(fit);
      }
    },
    // Whose session (the relay's `ready`): a token's name, `proxy:USER`, or the relay's owner.
    owner(name) {
      owner = !name || name === 'owner' ? "the owner's session" : `${name.replace(/^proxy:/, '')}'s session`;
      show();
    },
    title(t) {
      title = t;
      show();
    },
    fit,
  };
}
