// The repeat visit (docs/BROWSER.md, "Caching and the service worker"): once the page's service
// worker is in, a reload or a new tab fetches no page file from the relay (the relay's own log
// says what it served), and the page still works; and a relay with a new page gets the new page
// on the next visit. Real tern-relay (spawn mode), mosh-server, shell and headless Chromium.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {
  launchBrowser, until, screen, waitForPrompt, typeLine, newSession, screenshotsOfState, freePort,
} from '../lib/helpers.mjs';
import { browserFixture, onlyChromium } from '../lib/fixture.mjs';

// Chromium: the repeat-visit numbers and the upgrade path are Chromium's here (Firefox's and
// WebKit's drivers run their own profiles, untried with service workers).
const chromiumOnly = onlyChromium('the service worker is tested in Chromium');

// `tern_relay::http=debug`: a line per page file served ("page file served", its path and status).
const fx = browserFixture({ relay: { env: { RUST_LOG: 'info,tern_relay::http=debug' } }, open: true, relayLog: true });

/// The page files the relay answered since `from` (an offset into its log): `{ path, status }`.
function served(from) {
  return fx.relay.log().slice(from).split('\n').filter((l) => l.includes('page file served')).map((l) => ({
    path: l.match(/path="?([^\s"]+)/)?.[1],
    status: Number(l.match(/status=(\d+)/)?.[1]),
  }));
}

/// Waits until the page's service worker controls `page` and has every file of the page cached.
async function workerReady(page) {
  await until(() => page.evaluate(() => !!navigator.serviceWorker?.controller), { timeout: 20000, what: 'the service worker to control the page' });
  return page.evaluate(async () => (await (await caches.open('tern-page')).keys()).map((r) => new URL(r.url).pathname));
}

/// Types a line and waits for its output: the session works.
async function works(page, word) {
  await typeLine(page, `echo ${word}-$((6*7))`);
  await until(async () => (await screen(page)).includes(`${word}-42`), { what: `${word}-42 on the screen` });
}

test('a repeat visit fetches no page file from the relay, and the page works', chromiumOnly, async () => {
  const { page } = fx;
  const cached = await workerReady(page);
  // Everything the document names is in the cache (the wasm, the scripts, the styles, the document).
  const names = await page.evaluate(() => [...document.querySelectorAll('script[src], link[href]')].map((e) => new URL(e.getAttribute('src') ?? e.getAttribute('href'), location.href).pathname));
  // Not the PNG icons: the browser fetches those itself (favicon, home screen), outside the worker.
  for (const n of names.filter((n) => /\.[0-9a-f]{8}\./.test(n) && !n.endsWith('.png'))) assert.ok(cached.includes(n), `${n} cached (${cached.join(', ')})`);
  assert.ok(cached.includes('/'), 'the document cached');

  // A reload: the session resumes, from files the worker has.
  let mark = fx.relay.log().length;
  await page.reload();
  await waitForPrompt(page);
  await works(page, 'reloaded');
  // The worker asks whether the document changed, behind it: a 304.
  await until(() => served(mark).some((s) => s.path === 'index.html' && s.status === 304), { what: "the document's revalidation (304) in the relay's log" });
  let fetched = served(mark).filter((s) => s.status === 200);
  assert.deepEqual(fetched, [], `page files the reload fetched from the relay:\n${fx.relay.log().slice(mark)}`);

  // A new tab, a new session: the same.
  mark = fx.relay.log().length;
  const tab = await fx.browser.context.newPage();
  try {
    await tab.goto(newSession(fx.url));
    await waitForPrompt(tab);
    await works(tab, 'new-tab');
    assert.equal(await tab.evaluate(() => !!navigator.serviceWorker.controller), true, 'the new tab is the worker\'s');
  } finally {
    await tab.close();
  }
  fetched = served(mark).filter((s) => s.status === 200);
  assert.deepEqual(fetched, [], `page files the new tab fetched from the relay:\n${fx.relay.log().slice(mark)}`);
  await screenshotsOfState(page, 'cache-repeat-visit');
});

/// A proxy in front of the relay that passes everything through, except that once `version` is
/// set the document it serves carries `<meta name="tern-test-page" content=VERSION>` (with its own
/// ETag): what a relay with a new page serves. Its files are the same (a real new page would
/// name new hashed files too, which the worker does not have and fetches).
function pageChangingProxy(target) {
  const proxy = { version: null, documents: 0 };
  proxy.server = http.createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    const isDocument = /\/(index\.html)?$/.test(path) && proxy.version;
    const headers = { ...req.headers };
    if (isDocument) {
      proxy.documents++;
      const tag = `"test-page-${proxy.version}"`;
      if (req.headers['if-none-match'] === tag) {
        res.writeHead(304, { etag: tag, 'cache-control': 'no-store' });
        res.end();
        return;
      }
      delete headers['if-none-match'];
      headers['accept-encoding'] = 'identity';
    }
    const up = http.request({ host: '127.0.0.1', port: target, path: req.url, method: req.method, headers }, (r) => {
      if (!isDocument || r.statusCode !== 200) {
        res.writeHead(r.statusCode, r.headers);
        r.pipe(res);
        return;
      }
      const chunks = [];
      r.on('data', (c) => chunks.push(c));
      r.on('end', () => {
        const html = Buffer.concat(chunks).toString('utf8').replace('<head>', `<head>\n<meta name="tern-test-page" content="${proxy.version}">`);
        const h = { ...r.headers, etag: `"test-page-${proxy.version}"` };
        delete h['content-length'];
        delete h['content-encoding'];
        res.writeHead(200, h);
        res.end(html);
      });
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  return proxy;
}

test('a relay with a new page: the next visit runs the new page', chromiumOnly, async () => {
  const proxy = pageChangingProxy(fx.port);
  const port = await freePort();
  await new Promise((r) => proxy.server.listen(port, '127.0.0.1', r));
  const browser = await launchBrowser();
  try {
    const { page } = browser;
    const url = fx.url.replace(`:${fx.port}/`, `:${port}/`);
    await page.goto(newSession(url));
    await waitForPrompt(page);
    await workerReady(page);
    const version = () => page.evaluate(() => document.querySelector('meta[name=tern-test-page]')?.content ?? null);
    assert.equal(await version(), null);

    // The relay now has a new page. The next visit opens the cached one, whose worker learns of
    // the new one and, the session not started yet, reloads into it; or, when the session had
    // started first, the visit after.
    proxy.version = '2';
    await page.reload();
    await waitForPrompt(page);
    let visits = 1;
    await until(async () => (await version()) === '2', { timeout: 5000, what: 'the new page' }).catch(async () => {
      visits = 2;
      await page.reload();
      await waitForPrompt(page);
    });
    assert.equal(await version(), '2', 'the new page runs');
    console.log(`# the new page ran on visit ${visits} after the change`);
    assert.ok(proxy.documents >= 1, 'the new document came from the relay');
    await works(page, 'upgraded');
    // And it is the cached page from then on.
    await page.reload();
    await waitForPrompt(page);
    assert.equal(await version(), '2');
    await works(page, 'upgraded-again');
  } finally {
    await browser.close();
    proxy.server.closeAllConnections?.();
    await new Promise((r) => proxy.server.close(r));
  }
});

test('under --base-path the worker is scoped to the base and a reload fetches no page file', chromiumOnly, async () => {
  const relay = await fx.addRelay({ args: ['--base-path', '/tern/'], env: { RUST_LOG: 'info,tern_relay::http=debug' } });
  const tab = await fx.browser.context.newPage();
  try {
    await tab.goto(newSession(relay.url));
    await waitForPrompt(tab);
    await workerReady(tab);
    const scope = await tab.evaluate(async () => (await navigator.serviceWorker.getRegistration()).scope);
    assert.equal(new URL(scope).pathname, '/tern/', 'the worker covers the base only');
    const mark = relay.log().length;
    await tab.reload();
    await waitForPrompt(tab);
    await works(tab, 'based');
    const fetched = relay.log().slice(mark).split('\n').filter((l) => l.includes('page file served') && l.includes('status=200'));
    assert.deepEqual(fetched, [], 'page files the reload fetched');
  } finally {
    await tab.close();
  }
});

test('the WebGL addon is fetched only by a page that chooses WebGL, and is cached then', chromiumOnly, async () => {
  const { page } = fx;
  const cached = await workerReady(page);
  const addon = (p) => /^\/?xterm\/addon-webgl\.[0-9a-f]{8}\.mjs$/.test(p);
  // The fixture's page chose its renderer itself: headless Chromium's WebGL is SwiftShader, so the
  // DOM renderer, and neither the page nor the worker's install asked for the addon.
  const chosen = await page.evaluate(() => window.tern.rendererChosen);
  if (chosen === 'dom') {
    assert.deepEqual(served(0).filter((s) => addon(s.path)), [], 'the addon was fetched by a page on the DOM renderer');
    assert.ok(!cached.some(addon), `the addon is not in the worker's cache (${cached.join(', ')})`);
  } else {
    console.log(`# skipped the DOM half: this browser's WebGL is hardware (the page chose ${chosen})`);
  }

  const webgl = await page.evaluate(() => !!document.createElement('canvas').getContext('webgl2'));
  if (!webgl) {
    console.log('# skipped the WebGL half: no WebGL2 in this browser');
    return;
  }
  // A page that asks for WebGL loads the addon after its first draw, and draws with it.
  const mark = fx.relay.log().length;
  const tab = await fx.browser.context.newPage();
  try {
    await tab.goto(newSession(fx.url).replace('#', '#renderer=webgl&'));
    await waitForPrompt(tab);
    await until(() => tab.evaluate(() => window.tern.renderer === 'webgl'), { what: 'the WebGL renderer' });
    await works(tab, 'webgl');
    assert.equal(await tab.evaluate(() => !!document.querySelector('#terminal canvas')), true, 'xterm.js draws on a canvas');
    assert.equal(served(mark).filter((s) => addon(s.path) && s.status === 200).length, 1, 'the addon fetched once, from the relay');
    // Kept by the worker once fetched: the next page that wants it gets it from the cache.
    await until(async () => (await workerReady(tab)).some(addon), { what: "the addon in the worker's cache" });
    await screenshotsOfState(tab, 'webgl-on-demand');
    const again = fx.relay.log().length;
    await tab.reload();
    await waitForPrompt(tab);
    await until(() => tab.evaluate(() => window.tern.renderer === 'webgl'), { what: 'the WebGL renderer after a reload' });
    assert.deepEqual(served(again).filter((s) => s.status === 200), [], 'page files the reload fetched');
  } finally {
    await tab.close();
  }
});
