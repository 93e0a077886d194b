// The session's history and the find bar (docs/BROWSER.md, "Scrollback and search").
//
// Two sources, one experience:
// - what this page saw is in xterm.js's own scrollback (the wasm client pushes the rows that
//   scroll off the server's screen there), so the wheel, Shift+PgUp and selection just work;
// - in spawn mode the relay keeps every line the programs printed (its recorder), which mosh
//   never sent when output was fast. Scrolling above the top of xterm.js's scrollback, or a
//   search, opens the history view over the terminal: a virtual list that fetches the lines it
//   shows from the relay, page by page, newest first, so a 100,000-line history costs nothing
//   until someone looks.
// The colours are the core's (Client.lineHtml), the history's search the relay's (the core's
// SearchQuery); this file moves lines into the DOM and searches the few the page holds itself.

const PAGE = 400; // lines per request

// Matches in the page's own lines (its screen, and in bridge mode all xterm.js holds): flat
// [lineIndex, start, end, ...] in characters, as the relay's search (the core's SearchQuery)
// reports them. The browser's own RegExp: a few thousand lines need no engine of ours, and the
// page stays small (the regex crate would add about 250 KB gzipped to the wasm). Throws a
// SyntaxError saying what is wrong with a bad pattern.
export function searchLines(lines, pattern, caseSensitive, regex) {
  if (!pattern) return [];
  const source = regex ? pattern : pattern.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const re = new RegExp(source, caseSensitive ? 'gu' : 'giu');
  const out = [];
  lines.forEach((line, i) => {
    for (const m of line.matchAll(re)) {
      if (!m[0].length) continue;
      const start = [...line.slice(0, m.index)].length;
      out.push(i, start, start + [...m[0]].length);
    }
  });
  return out;
}
const OVERSCAN = 60; // lines drawn above and below what is visible

// A key pressed while the history view has the focus, as the bytes a terminal would send, so that
// typing closes the view and reaches the shell (nothing typed is lost). `ctrlByte` is keys.js's
// (handed in by app.js: the page's bundler folds modules that import nothing themselves).
function keyData(e, ctrlByte) {
  if (e.metaKey) return null;
  if (e.ctrlKey && !e.altKey && e.key.length === 1) return ctrlByte(e.key);
  const named = { Enter: '\r', Tab: '\t', Backspace: '\x7f', Escape: null };
  if (e.key in named) return named[e.key];
  if (e.key.length === 1) return (e.altKey ? '\x1b' : '') + e.key;
  return null;
}

export class History {
  constructor({ client, term, Client, $, ctrlByte, images }) {
    this.client = client;
    // Pictures in history lines (their markers, docs/IMAGES.md), drawn by images.js.
    this.images = images;
    this.ctrlByte = ctrlByte;
    this.term = term;
    this.Client = Client;
    this.view = $('history');
    this.scroller = $('history-scroll');
    this.spacer = $('history-spacer');
    this.linesBox = $('history-lines');
    this.info = $('history-info');
    this.first = 0;
    this.end = 0;
    this.cache = new Map(); // line number → raw line (text with SGR)
    this.loading = new Set(); // `before` values asked for
    this.marks = new Map(); // line number → [start, end, ...]
    this.current = null; // { line, start, end } of the current match
    this.lineHeight = 18;
    this.drawn = '';
    this.error = null;
    this.scroller.addEventListener('scroll', () => this.draw());
    $('history-close').onclick = () => this.close();
    this.view.addEventListener('keydown', (e) => this.onKey(e));
    // Scrolling down past the newest line goes back to the terminal.
    this.scroller.addEventListener('wheel', (e) => {
      const atBottom = this.scroller.scrollTop + this.scroller.clientHeight >= this.scroller.scrollHeight - 2;
      if (e.deltaY > 0 && atBottom) this.close();
    }, { passive: true });
  }

  get isOpen() { return !this.view.hidden; }

  // Opens the view: at `line` (centred) when given, else at the newest lines.
  async open(line) {
    if (!this.client.historyAvailable()) return false;
    const wasOpen = this.isOpen;
    this.view.hidden = false;
    document.body.classList.add('history-open');
    this.measure();
    try {
      await this.refresh();
    } catch (e) {
      this.showError(e);
      return false;
    }
    if (line != null) {
      this.scrollToLine(line);
    } else if (!wasOpen) {
      this.scroller.scrollTop = this.scroller.scrollHeight;
    }
    this.draw();
    if (!wasOpen) this.scroller.focus({ preventScroll: true });
    return true;
  }

  close() {
    if (!this.isOpen) return;
    this.view.hidden = true;
    document.body.classList.remove('history-open');
    // Nothing of it stays in the DOM while closed.
    this.linesBox.replaceChildren();
    this.drawn = '';
    this.term.focus();
  }

  // The line height of the view: the terminal's row height, so lines look the same.
  measure() {
    const row = this.term.element?.querySelector('.xterm-rows > div');
    const h = row?.getBoundingClientRect().height;
    this.lineHeight = h > 4 ? h : Math.round(this.term.options.fontSize * this.term.options.lineHeight);
    this.view.style.setProperty('--history-line', `${this.lineHeight}px`);
    this.view.style.fontSize = `${this.term.options.fontSize}px`;
  }

  // Learns how far the history reaches now (it grows while the shell prints).
  async refresh() {
    const page = await this.client.historyPage(null, PAGE);
    this.take(page);
    this.error = null;
  }

  take(page) {
    if (page.first > this.first) {
      for (const n of this.cache.keys()) if (n < page.first) this.cache.delete(n);
    }
    this.first = page.first;
    this.end = page.end;
    page.lines.forEach((l, i) => this.cache.set(page.start + i, l));
    this.spacer.style.height = `${(this.end - this.first) * this.lineHeight}px`;
    const count = this.end - this.first;
    this.info.textContent = `History: ${count.toLocaleString()} line${count === 1 ? '' : 's'}`;
  }

  scrollToLine(line) {
    const y = (line - this.first) * this.lineHeight;
    this.scroller.scrollTop = Math.max(0, y - (this.scroller.clientHeight - this.lineHeight) / 2);
  }

  // Draws the lines in view (and a margin), asking the relay for those it does not have yet.
  draw() {
    if (!this.isOpen) return;
    const lh = this.lineHeight;
    const top = Math.floor(this.scroller.scrollTop / lh);
    const from = Math.max(this.first, this.first + top - OVERSCAN);
    const to = Math.min(this.end, this.first + top + Math.ceil(this.scroller.clientHeight / lh) + OVERSCAN);
    const missing = [];
    const parts = [];
    for (let n = from; n < to; n++) {
      const raw = this.cache.get(n);
      if (raw === undefined) {
        missing.push(n);
        continue;
      }
      const marks = this.marks.get(n) ?? [];
      let current;
      if (this.current?.line === n) {
        for (let i = 0; i < marks.length; i += 2) {
          if (marks[i] === this.current.start) current = i / 2;
        }
      }
      const html = this.Client.lineHtml(raw, Uint32Array.from(marks), current);
      parts.push(`<div class="hl" style="top:${(n - this.first) * lh}px" data-line="${n}">${html || ' '}</div>`);
      const pics = this.images ? this.Client.lineImageMarkers(raw) : [];
      for (let i = 0; i + 1 < pics.length; i += 2) {
        parts.push(`<div class="hl-image" style="top:${(n - this.first) * lh}px;left:${pics[i]}ch" data-image="${pics[i + 1]}"></div>`);
      }
    }
    const key = parts.join('');
    if (key !== this.drawn) {
      this.linesBox.innerHTML = key;
      this.drawn = key;
      for (const el of this.linesBox.querySelectorAll('.hl-image')) this.images.fillHistory(el, Number(el.dataset.image), lh);
    }
    if (missing.length) this.fetch(missing[missing.length - 1] + 1);
  }

  async fetch(before) {
    // One request per block: the page ending at `before` covers the lines just above it.
    const block = Math.min(this.end, Math.ceil((before - this.first) / PAGE) * PAGE + this.first);
    if (this.loading.has(block)) return;
    this.loading.add(block);
    try {
      this.take(await this.client.historyPage(block, PAGE));
    } catch (e) {
      this.showError(e);
      return;
    } finally {
      this.loading.delete(block);
    }
    this.draw();
  }

  showError(e) {
    this.error = String(e?.message ?? e);
    this.info.textContent = `History unavailable: ${this.error}`;
  }

  onKey(e) {
    if (e.key === 'Escape') {
      e.preventDefault();
      this.close();
      return;
    }
    if (['PageUp', 'PageDown', 'ArrowUp', 'ArrowDown', 'Home', 'End'].includes(e.key) && !e.ctrlKey) return;
    if (e.ctrlKey && e.shiftKey) return; // the page's own shortcuts (find)
    const data = keyData(e, this.ctrlByte);
    if (data == null) return;
    e.preventDefault();
    this.close();
    this.term.input(data);
  }

  // Search matches to mark (oldest first, flat [line, start, end, ...]).
  setMarks(hits, current) {
    this.marks.clear();
    for (let i = 0; i < hits.length; i += 3) {
      const list = this.marks.get(hits[i]) ?? [];
      list.push(hits[i + 1], hits[i + 2]);
      this.marks.set(hits[i], list);
    }
    this.current = current;
    this.drawn = '';
    this.draw();
  }
}

// The find bar: Ctrl+Shift+F (Cmd+F on macOS), Enter / Shift+Enter for the next / previous match,
// case and regular expression toggles, a match count. Matches come from the relay's history (spawn
// mode) and from what xterm.js holds (the screen, and in bridge mode the scrollback it saw).
export class Finder {
  constructor({ client, term, Client, history, $ }) {
    Object.assign(this, { client, term, Client, history });
    this.bar = $('find');
    this.input = $('find-input');
    this.caseButton = $('find-case');
    this.regexButton = $('find-regex');
    this.count = $('find-count');
    this.matches = []; // { where: 'history' | 'buffer', line, start, end }, oldest first
    this.index = -1;
    this.totalHits = 0;
    this.timer = null;
    this.generation = 0;
    this.decorations = []; // xterm.js markers and decorations of the matches it holds
    this.input.addEventListener('input', () => this.schedule());
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') {
        e.preventDefault();
        this.step(e.shiftKey ? -1 : 1);
      } else if (e.key === 'Escape') {
        e.preventDefault();
        this.close();
      }
    });
    for (const b of [this.caseButton, this.regexButton]) {
      b.onclick = () => {
        b.setAttribute('aria-pressed', String(b.getAttribute('aria-pressed') !== 'true'));
        this.search();
        this.input.focus();
      };
    }
    $('find-prev').onclick = () => this.step(-1);
    $('find-next').onclick = () => this.step(1);
    $('find-close').onclick = () => this.close();
  }

  get options() {
    return {
      caseSensitive: this.caseButton.getAttribute('aria-pressed') === 'true',
      regex: this.regexButton.getAttribute('aria-pressed') === 'true',
    };
  }

  open() {
    this.bar.hidden = false;
    this.input.focus();
    this.input.select();
    if (this.input.value) this.search();
  }

  close() {
    this.bar.hidden = true;
    this.generation++;
    this.matches = [];
    this.history.setMarks([], null);
    this.undecorate();
    this.term.clearSelection();
    if (this.history.isOpen) this.history.close();
    else this.term.focus();
  }

  schedule() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.search(), 120);
  }

  // xterm.js's lines as text: the whole buffer (bridge mode: all this page has), or only the
  // screen when the relay's history holds everything above it.
  bufferLines(screenOnly) {
    const buf = this.term.buffer.active;
    const from = screenOnly ? buf.baseY : 0;
    const lines = [];
    for (let y = from; y < buf.length; y++) lines.push(buf.getLine(y)?.translateToString(true) ?? '');
    return { from, lines };
  }

  // Runs the search; resolves to { count, total } once the matches are known.
  async search() {
    clearTimeout(this.timer);
    const pattern = this.input.value;
    const generation = ++this.generation;
    const { caseSensitive, regex } = this.options;
    this.bar.classList.remove('bad');
    if (!pattern) {
      this.show([], 0, '');
      return { count: 0, total: 0 };
    }
    const relay = this.client.historyAvailable();
    const matches = [];
    let total = 0;
    let note = '';
    try {
      if (relay) {
        this.count.textContent = 'Searching…';
        const found = await this.client.searchHistory(pattern, caseSensitive, regex);
        if (generation !== this.generation) return null;
        for (let i = 0; i < found.hits.length; i += 3) {
          matches.push({ where: 'history', line: found.hits[i], start: found.hits[i + 1], end: found.hits[i + 2] });
        }
        total += found.totalHits;
        if (found.truncated) note = ` (newest ${found.hits.length.toLocaleString()} shown)`;
      }
      const { from, lines } = this.bufferLines(relay);
      const hits = searchLines(lines, pattern, caseSensitive, regex);
      for (let i = 0; i < hits.length; i += 3) {
        matches.push({ where: 'buffer', line: from + hits[i], start: hits[i + 1], end: hits[i + 2] });
      }
      total += hits.length / 3;
    } catch (e) {
      if (generation !== this.generation) return null;
      this.bar.classList.add('bad');
      this.show([], 0, String(e?.message ?? e));
      return { count: 0, total: 0, error: String(e?.message ?? e) };
    }
    this.show(matches, total, note);
    // The newest match first, as a terminal's find does (Shift+Enter goes back in time).
    if (matches.length) await this.select(matches.length - 1);
    return { count: matches.length, total };
  }

  // Every match xterm.js holds gets a background (the newest 1000); the current one is selected.
  decorate(matches) {
    this.undecorate();
    const buf = this.term.buffer.active;
    const cursor = buf.baseY + buf.cursorY;
    const color = cssColorHex('--find-match') ?? '#6b5a2e';
    for (const m of matches.filter((x) => x.where === 'buffer').slice(-1000)) {
      const marker = this.term.registerMarker(m.line - cursor);
      if (!marker) continue;
      this.decorations.push(marker);
      try {
        const d = this.term.registerDecoration({
          marker, x: m.start, width: Math.max(1, m.end - m.start), backgroundColor: color, layer: 'bottom',
        });
        if (d) this.decorations.push(d);
      } catch (e) {
        // Only a highlight: the search itself stands.
        console.warn(`find: no highlight (${e.message})`);
        return;
      }
    }
  }

  undecorate() {
    for (const d of this.decorations) d.dispose();
    this.decorations = [];
  }

  show(matches, total, note) {
    this.matches = matches;
    this.decorate(matches);
    this.totalHits = total;
    this.index = -1;
    const flat = [];
    for (const m of matches) if (m.where === 'history') flat.push(m.line, m.start, m.end);
    this.history.setMarks(flat, null);
    this.count.textContent = note && !matches.length ? note : matches.length ? `${matches.length.toLocaleString()} matches${note}` : 'No matches';
    this.count.title = this.count.textContent;
  }

  async step(delta) {
    if (!this.matches.length) return this.search();
    const n = this.matches.length;
    await this.select((this.index + delta + n) % n);
  }

  async select(i) {
    this.index = i;
    const m = this.matches[i];
    this.count.textContent = `${(i + 1).toLocaleString()} of ${this.matches.length.toLocaleString()}`;
    if (m.where === 'history') {
      this.history.current = m;
      await this.history.open(m.line);
      this.history.setMarks(flatten(this.matches), m);
      this.input.focus();
    } else {
      this.history.current = null;
      if (this.history.isOpen) this.history.close();
      const rows = this.term.rows;
      this.term.scrollToLine(Math.max(0, m.line - Math.floor(rows / 2)));
      this.term.select(m.start, m.line, Math.max(1, m.end - m.start));
      this.input.focus();
    }
  }
}

// A colour variable of the page's CSS as #rrggbb (xterm.js's decorations take nothing else). The
// variable holds light-dark(...), which only a property that uses it resolves.
function cssColorHex(variable) {
  const probe = document.createElement('span');
  probe.style.color = `var(${variable})`;
  probe.hidden = true;
  document.body.append(probe);
  const rgb = getComputedStyle(probe).color.match(/\d+/g);
  probe.remove();
  if (!rgb || rgb.length < 3) return null;
  return '#' + rgb.slice(0, 3).map((v) => Number(v).toString(16).padStart(2, '0')).join('');
}

function flatten(matches) {
  const flat = [];
  for (const m of matches) if (m.where === 'history') flat.push(m.line, m.start, m.end);
  return flat;
}

// Wires the view, the bar and their keys; returns the test hooks (window.tern.history).
export function wireHistory({ client, term, Client, $, addKeyHandler, ctrlByte, images }) {
  const history = new History({ client, term, Client, $, ctrlByte, images });
  const finder = new Finder({ client, term, Client, history, $ });
  const isFind = (e) => (e.ctrlKey && e.shiftKey && e.code === 'KeyF') ||
    (e.metaKey && !e.ctrlKey && e.code === 'KeyF' && /Mac|iPhone|iPad/.test(navigator.platform));
  // Capture phase: before xterm.js's textarea turns the key into input.
  document.addEventListener('keydown', (e) => {
    if (!isFind(e)) return;
    e.preventDefault();
    e.stopPropagation();
    finder.open();
  }, true);
  // Shift+PgUp at the top of what the page saw, or the wheel past it: the relay's history.
  const atTop = () => term.buffer.active.viewportY === 0;
  addKeyHandler((e) => {
    if (e.type === 'keydown' && e.shiftKey && e.key === 'PageUp' && atTop() && client.historyAvailable()) {
      history.open();
      return true;
    }
    return false;
  });
  term.element.addEventListener('wheel', (e) => {
    if (e.deltaY < 0 && atTop() && client.historyAvailable() && !history.isOpen) history.open();
  }, { passive: true });
  return {
    available: () => client.historyAvailable(),
    page: (before, count) => client.historyPage(before ?? null, count),
    // Every line of the history, oldest first, without colours (tests).
    async lines() {
      let { first, start, lines } = await client.historyPage(null, 2000);
      let all = lines;
      while (start > first) {
        const page = await client.historyPage(start, 2000);
        all = page.lines.concat(all);
        ({ first, start } = page);
      }
      return all.map((l) => l.replace(/\x1b\[[0-9;]*m/g, ''));
    },
    open: (line) => history.open(line),
    close: () => history.close(),
    isOpen: () => history.isOpen,
    find: async (pattern, { caseSensitive = false, regex = false } = {}) => {
      finder.open();
      finder.input.value = pattern;
      finder.caseButton.setAttribute('aria-pressed', String(caseSensitive));
      finder.regexButton.setAttribute('aria-pressed', String(regex));
      return finder.search();
    },
    step: (delta) => finder.step(delta),
    // Matches highlighted in xterm.js (tests).
    highlighted: () => finder.decorations.filter((d) => 'marker' in d).length,
  };
}
