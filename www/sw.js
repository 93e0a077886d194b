// The page's service worker: a repeat visit fetches nothing but the session (docs/BROWSER.md,
// "Caching and the service worker"). Registered by the page once its session has started; its
// scope is the page's directory (the relay's --base-path).
//
// - Content-hashed files (`app.3f9a1c2b.js`): from the cache, else the network. A name is its
//   content, so a cached one is never stale. The build writes their list below (PRECACHE), so a
//   new page is also a new worker, which fetches its files and drops the old ones. ON_DEMAND
//   files (the WebGL addon) are cached when the page first fetches them, not at install: a page
//   on the DOM renderer never downloads them.
// - The document (`./`, `./index.html`): from the cache at once, revalidated behind it
//   (If-None-Match: a 304 of a few hundred bytes). When the document changed (a new relay), the
//   new one is cached and the page is told ('tern-page-updated'): a page that has not started its
//   session yet reloads into the new one; a page that has goes on with the old one until the
//   next visit. So a new relay's page is used at the latest on the
//   second visit, and usually on the first (the answer comes back before the session starts).
// - Everything else (/api/*, the WebSocket, POSTs, other origins) never comes here or is passed
//   through untouched; WebTransport is no fetch at all.
const PRECACHE = [];
const ON_DEMAND = [];
const CACHE = 'tern-page';
const HASHED = /\.[0-9a-f]{8}\.[a-z]+$/;

const scope = () => new URL(self.registration.scope);
const here = (path) => new URL(path, self.registration.scope).href;

self.addEventListener('install', (event) => {
  // Most of these come from the HTTP cache (the page just loaded them, immutable).
  event.waitUntil((async () => {
    const cache = await caches.open(CACHE);
    await cache.addAll([...PRECACHE, './'].map(here));
    await self.skipWaiting();
  })());
});

self.addEventListener('activate', (event) => {
  // Keep only this page's files: an old page's hashed files would never be asked for again.
  event.waitUntil((async () => {
    const keep = new Set([...PRECACHE, ...ON_DEMAND, './'].map(here));
    const cache = await caches.open(CACHE);
    for (const req of await cache.keys()) {
      if (!keep.has(req.url)) await cache.delete(req);
    }
    await self.clients.claim();
  })());
});

self.addEventListener('fetch', (event) => {
  const req = event.request;
  if (req.method !== 'GET') return;
  const url = new URL(req.url);
  const base = scope();
  if (url.origin !== base.origin || !url.pathname.startsWith(base.pathname)) return;
  const rest = url.pathname.slice(base.pathname.length);
  if (rest === 'api' || rest.startsWith('api/') || rest === 'ws' || rest === 'sw.js') return;
  if (rest === '' || rest === 'index.html') {
    if (req.mode !== 'navigate') return;
    event.respondWith(revalidated(here('./'), event));
  } else if (HASHED.test(rest)) {
    event.respondWith(cached(req));
  }
});

async function cached(req) {
  const cache = await caches.open(CACHE);
  const hit = await cache.match(req, { ignoreSearch: true });
  if (hit) return hit;
  const resp = await fetch(req);
  if (resp.ok) await cache.put(req, resp.clone());
  return resp;
}

// The cached document at once (the network's when there is none), and a conditional request
// behind it that replaces the copy when it changed, and tells the page that opens from it.
async function revalidated(key, event) {
  const cache = await caches.open(CACHE);
  const hit = await cache.match(key);
  if (!hit) {
    const resp = await fetch(key, { cache: 'no-store' });
    if (resp.ok) await cache.put(key, resp.clone());
    return resp;
  }
  event.waitUntil((async () => {
    const etag = hit.headers.get('etag');
    const fresh = await fetch(key, { cache: 'no-store', headers: etag ? { 'if-none-match': etag } : {} }).catch(() => null);
    if (!fresh || fresh.status !== 200) return;
    await cache.put(key, fresh);
    const client = event.resultingClientId && await self.clients.get(event.resultingClientId);
    const targets = client ? [client] : await self.clients.matchAll({ type: 'window' });
    for (const c of targets) c.postMessage({ type: 'tern-page-updated' });
  })());
  return hit;
}
