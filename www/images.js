// Images the recorder lifted out of the shell's output (docs/IMAGES.md): the page draws
// mosh-server's screen, which has no images, so the recorder left an invisible marker in each
// image's top-left cells; the core finds the markers in its screen (Client.imageMarkers), and
// this module draws each image over its cells with an xterm.js decoration: it scrolls with the
// text and stays in the scrollback; it goes when the cells are overwritten or the line is trimmed.
// Decoded images are bounded: one far above the viewport lets its picture go and fetches it again
// when it is drawn once more. A click opens it full size (Save, Close/Escape).
// The page also waits for the next picture the shell prints (Client.nextImage): the relay sends
// it as soon as the recorder stores it, while its marker is still on its way through mosh, so no
// round trip is left between the marker on the screen and the picture drawn.

// Pictures kept decoded at most (the rest are fetched again when scrolled back to).
const MAX_LOADED = 48;
// Fetches of one image tried before giving up (backing off from 1 s).
const RETRIES = 5;
// A new picture's marker that came before the relay said which picture is on its way as the next
// one (the two race: the marker through mosh, the header on its stream) waits this long for it
// before asking on its own (a second transfer of the same bytes would halve the rate of both).
const HEADER_WAIT_MS = 300;

export function wireImages({ client, term, $ }) {
  const placed = new Map(); // id -> { marker, decoration, col, els: Set<HTMLElement> }
  const loaded = new Map(); // id -> Promise<{ info, url }>, oldest first (LRU)
  // Fetches that failed (the link not up yet after a reload, say): tried again a few times, later.
  const failed = new Map(); // id -> { count, at }
  let queued = false;
  const via = new Map(); // id -> 'stream' | 'http': how its bytes came last (tests)
  const cameNext = new Set(); // ids whose bytes came as the next picture (tests, benchmark)
  const everPlaced = new Set(); // ids whose marker the page placed at least once (tests)

  // The next picture: `coming` is the one whose bytes are on their way ({ id, p, adopted }). Not
  // asked for a while after a failure (no link yet, the link lost), nor when the benchmark's A/B
  // turned it off for this browser (`tern.nextImage` = `off` in localStorage, read once: a request
  // already waiting could not be taken back).
  // `newest`: the highest id of a marker seen on the screen (-1 before the first look: the pictures
  // a page finds when it opens are old ones); `told` settles when the relay says which is coming.
  // `got`: the id of the last picture that came as the next one. The page asks again only once a
  // marker at least that new has been on its screen: a shell printing pictures faster than they
  // are seen (a loop of `tern show` scrolling past between two frames) costs at most one picture
  // fetched ahead of what the page shows, not every picture printed.
  const next = { on: nextImageOn(), asking: false, coming: null, retryAt: 0, newest: -1, told: null, got: -1 };
  const askNext = () => {
    if (!next.on || next.asking || performance.now() < next.retryAt) return;
    if (next.got > next.newest) return;
    next.asking = true;
    let header;
    const got = new Promise((resolve) => { header = resolve; });
    const coming = { id: null, p: got, adopted: false };
    let told;
    next.told = new Promise((resolve) => { told = resolve; });
    const p = client.nextImage((id) => { coming.id = id; next.coming = coming; told(); }).then((info) => {
      via.set(info.id, info.via);
      if (cameNext.size > 1000) cameNext.clear();
      cameNext.add(info.id);
      return { info, url: URL.createObjectURL(info.blob) };
    });
    p.then((found) => {
      header(found);
      const { id } = found.info;
      next.got = Math.max(next.got, id);
      // Adopted by its marker meanwhile (load): kept there already. Fetched on its own by its
      // marker (it came before the header): that copy is kept, this one let go.
      if (!coming.adopted) {
        if (!loaded.has(id)) keep(id, Promise.resolve(found));
        else URL.revokeObjectURL(found.url);
      }
      next.asking = false;
      next.coming = null;
      askNext();
    }, () => {
      header(Promise.reject(new Error('the next picture did not come')));
      told();
      next.asking = false;
      next.coming = null;
      // No link yet (a page that just opened), or it was lost: asked again on a write after this.
      next.retryAt = performance.now() + 1000;
    });
  };
  const keep = (id, p) => {
    loaded.set(id, p);
    while (loaded.size > MAX_LOADED) release(loaded.keys().next().value);
  };

  // The image's header and an object URL of its bytes, fetched once while kept.
  const load = (id) => {
    let p = loaded.get(id);
    if (p) {
      loaded.delete(id); // most recent last
      loaded.set(id, p);
      return p;
    }
    // On its way as the next picture: that answer, not a second transfer.
    const adopt = () => {
      if (next.coming?.id !== id) return fetchImage(id);
      next.coming.adopted = true;
      return next.coming.p.catch(() => fetchImage(id));
    };
    if (next.coming?.id === id) {
      p = adopt();
    } else if (next.asking && !next.coming && next.newest >= 0 && id > next.newest) {
      // A new picture, and the next one's header not here yet: probably this one.
      const wait = new Promise((resolve) => setTimeout(resolve, HEADER_WAIT_MS));
      p = Promise.race([next.told, wait]).then(adopt);
    } else {
      p = fetchImage(id);
    }
    p.catch(() => loaded.delete(id));
    keep(id, p);
    return p;
  };
  const fetchImage = (id) => client.image(id).then((info) => {
    via.set(id, info.via);
    return { info, url: URL.createObjectURL(info.blob) };
  });
  const release = (id) => {
    const p = loaded.get(id);
    loaded.delete(id);
    p?.then(({ url }) => URL.revokeObjectURL(url), () => {});
    for (const el of placed.get(id)?.els ?? []) el.replaceChildren();
  };

  const drop = (id) => {
    const p = placed.get(id);
    if (!p) return;
    placed.delete(id);
    p.decoration?.dispose();
    p.marker.dispose();
  };

  // A fetch of `id` failed: tried again later (backing off), a few times.
  const failedOnce = (id) => {
    const f = failed.get(id) ?? { count: 0, at: 0 };
    f.count += 1;
    f.at = performance.now() + 500 * 2 ** f.count;
    failed.set(id, f);
    if (f.count < RETRIES) {
      setTimeout(() => { queue(); term.refresh(0, term.rows - 1); }, 500 * 2 ** f.count + 10);
    }
  };
  const waiting = (id) => {
    const f = failed.get(id);
    return f && (f.count >= RETRIES || performance.now() < f.at);
  };

  // Draws image `id` into a decoration's element (again after a release, or a failed fetch: the
  // element then says why until the next try).
  const fill = (id, el) => {
    if (el.querySelector('img') || waiting(id)) return;
    load(id).then(({ info, url }) => {
      failed.delete(id);
      if (el.querySelector('img') || !loaded.has(id)) return;
      const img = new Image();
      img.src = url;
      img.alt = info.name ?? `image ${id}`;
      img.draggable = false;
      el.replaceChildren(img);
      if (info.name?.startsWith('[')) {
        const note = document.createElement('span');
        note.textContent = info.name;
        el.append(note);
      }
    }, (e) => {
      failedOnce(id);
      el.replaceChildren(Object.assign(document.createElement('span'), { textContent: `[image ${id}: ${e}]` }));
    });
  };

  const place = (id, line, col) => {
    const buf = term.buffer.active;
    const marker = term.registerMarker(line - (buf.baseY + buf.cursorY));
    if (!marker) return;
    const entry = { marker, decoration: null, col, cols: 0, rows: 0, clip: 0, els: new Set() };
    placed.set(id, entry);
    everPlaced.add(id);
    marker.onDispose(() => { if (placed.get(id) === entry) drop(id); });
    load(id).then(({ info }) => {
      failed.delete(id);
      if (placed.get(id) !== entry || marker.isDisposed) return;
      const cols = Math.max(1, Math.min(info.cols, term.cols - col));
      [entry.cols, entry.rows] = [cols, Math.max(1, info.rows)];
      const decoration = term.registerDecoration({ marker, x: col, width: cols, height: entry.rows, layer: 'top' });
      if (!decoration) return;
      entry.decoration = decoration;
      decoration.onRender((el) => {
        if (!entry.els.has(el)) {
          entry.els.add(el);
          el.classList.add('tern-image');
          el.dataset.image = String(id);
          el.addEventListener('click', () => openFull(id));
        }
        fill(id, el);
        clipText(entry, el);
      });
    }, () => {
      // Placed again by a later scan, after a while (an image the relay no longer has: given up).
      if (placed.get(id) === entry) drop(id);
      failedOnce(id);
    });
  };

  // Text printed over an image's cells (after a SIXEL image the cursor is on its last row, so the
  // next line is written there) shows through: the image is cut above the first row holding
  // text below its marker, as a terminal's image addon erases the image cells text lands on.
  const clipText = (entry, el) => {
    const rows = entry.rows - textRows(entry);
    el.style.clipPath = rows < entry.rows ? `inset(0 0 ${((entry.rows - rows) * 100) / entry.rows}% 0)` : '';
  };
  const textRows = (entry) => {
    const buf = term.buffer.active;
    for (let r = 1; r < entry.rows; r++) {
      const line = buf.getLine(entry.marker.line + r);
      if (line?.translateToString(true, entry.col, entry.col + entry.cols).trim()) return entry.rows - r;
    }
    return 0;
  };

  // Markers in the core's screen against the decorations placed: new ones placed, moved ones
  // placed again, ones whose cells on the screen no longer hold their marker dropped.
  const scan = () => {
    queued = false;
    askNext();
    const m = client.imageMarkers();
    const buf = term.buffer.active;
    const seen = new Set();
    for (let i = 0; i + 2 < m.length; i += 3) {
      const [row, col, id] = [m[i], m[i + 1], m[i + 2]];
      const line = buf.baseY + row;
      seen.add(id);
      const p = placed.get(id);
      if (p && !p.marker.isDisposed && p.marker.line === line && p.col === col) continue;
      if (waiting(id)) continue;
      drop(id);
      place(id, line, col);
    }
    next.newest = Math.max(next.newest, 0, ...seen);
    askNext();
    for (const [id, p] of placed) {
      if (!seen.has(id) && (p.marker.isDisposed || p.marker.line >= buf.baseY)) drop(id);
      else if (p.rows && p.marker.line >= buf.baseY) for (const el of p.els) clipText(p, el);
    }
    // Far above the viewport: let the pictures go (fetched again when drawn).
    const far = buf.viewportY - 3 * term.rows;
    for (const [id, p] of placed) {
      if (p.marker.line < far && loaded.has(id)) release(id);
    }
  };
  const queue = () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(scan);
  };
  term.onWriteParsed(queue);
  term.onScroll(queue);
  // The screen may hold pictures already: a tab's restored screen is written before the page
  // wires this (app.js opens the terminal after the hello).
  queue();

  // The full-size view: the picture at its pixel size, fitted into the window.
  const view = $('image-view');
  const viewImg = $('image-view-img');
  let viewing = null;
  const closeFull = () => {
    view.hidden = true;
    viewing = null;
    viewImg.removeAttribute('src');
    term.focus();
  };
  const openFull = (id) => {
    load(id).then(({ info, url }) => {
      viewing = { id, info, url };
      viewImg.src = url;
      viewImg.style.maxWidth = `min(${info.width}px, 100%)`;
      $('image-view-name').textContent = info.name ?? `image ${id}`;
      $('image-view-size').textContent = `${info.width} × ${info.height}`;
      view.hidden = false;
      $('image-view-close').focus();
    }, () => {});
  };
  $('image-view-close').onclick = closeFull;
  view.addEventListener('click', (e) => { if (e.target === view) closeFull(); });
  view.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') { e.stopPropagation(); closeFull(); }
  });
  $('image-view-save').onclick = () => {
    if (!viewing) return;
    const { id, info, url } = viewing;
    const ext = info.blob.type.split('/')[1] ?? 'png';
    const name = info.name && !info.name.startsWith('[') ? info.name : `image-${id}.${ext}`;
    const a = Object.assign(document.createElement('a'), { href: url, download: name, rel: 'noopener' });
    document.body.append(a);
    a.click();
    a.remove();
  };

  // A picture in the history view (history.js): `el` placed at its marker's line and column;
  // sized here to its cells (`lh` the view's line height; a column is 1ch of its font).
  const fillHistory = (el, id, lh) => {
    el.addEventListener('click', () => openFull(id));
    load(id).then(({ info, url }) => {
      if (!el.isConnected) return;
      el.style.width = `${info.cols}ch`;
      el.style.height = `${info.rows * lh}px`;
      const img = new Image();
      img.src = url;
      img.alt = info.name ?? `image ${id}`;
      img.draggable = false;
      el.replaceChildren(img);
    }, () => {});
  };

  return {
    fillHistory,
    // Tests: the ids drawn, with their decorations' elements.
    placed: () => [...placed.entries()].map(([id, p]) => ({ id, via: via.get(id), next: cameNext.has(id), line: p.marker.line, col: p.col, drawn: [...p.els].some((e) => e.isConnected && e.querySelector('img')) })),
    // Tests: pictures that came as the next one and whose marker the page never placed.
    fetchedUnseen: () => [...cameNext].filter((id) => !everPlaced.has(id)),
    placedEver: () => everPlaced.size,
    // Pictures held decoded now (bounded by MAX_LOADED).
    loadedCount: () => loaded.size,
    // Tests: the markers in the core's screen (`[row, col, id, ...]`), and a picture asked for by
    // id as the page asks (a viewer without the pictures is refused: the attack test).
    markers: () => [...client.imageMarkers()],
    fetch: (id) => client.image(id).then((i) => ({ width: i.width, height: i.height, via: i.via })),
    // Whether the page waits for the next picture now (asked, nothing on its way yet).
    waitingNext: () => { askNext(); return next.asking && !next.coming; },
    open: openFull,
    close: closeFull,
  };
}

function nextImageOn() {
  try {
    return localStorage.getItem('tern.nextImage') !== 'off';
  } catch {
    return true;
  }
}
