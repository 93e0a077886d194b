// The page's side of its service worker (sw.js): registers it, and reloads into a new page when
// the worker found one (a new relay) before this page's session started; after that the page goes
// on with what it has, and the next visit opens the new page. docs/BROWSER.md, "Caching and the
// service worker".

// Listens at once: the worker may tell about a new page before this one has done anything.
// Returns `registerWorker()`, called once the session has started (its install fetches the
// page's files, which would compete with the session's start), and `sessionStarted()`.
export function wireServiceWorker() {
  const sw = navigator.serviceWorker;
  let started = false;
  // No worker where the browser has none to give: a page over http from another machine (not a
  // secure context), Firefox's private windows; the page works as before, fetching its files.
  if (!sw) return { registerWorker() {}, sessionStarted() {} };
  sw.onmessage = (event) => {
    if (event.data?.type !== 'tern-page-updated') return;
    window.tern = Object.assign(window.tern || {}, { pageUpdated: true });
    if (!started) location.reload();
  };
  return {
    registerWorker() {
      // A certificate the browser does not trust refuses the worker (Chromium): the page works as
      // before, fetching its files.
      sw.register('sw.js').catch((e) => console.info(`no service worker: ${e.message}`));
    },
    sessionStarted() { started = true; },
  };
}
