// The first prompt's measurement (issue 36; docs/BENCHMARKS.md, "First prompt"): the page marks
// each stage of reaching the relay once (`tern:*` performance marks, read by load-bench.mjs for
// its time budget), and the relay serves the floor page (relay/src/floor.rs) only when the bench
// asks for it with TERN_BENCH_FLOOR=1. A page that takes a warm spare whose shell the relay
// started ahead continues from the relay's point at its own size (docs/RELAY.md, "The warm spare").
// The WebTransport link starts before the wasm is in, where the relay's document says
// (`Server-Timing: tern-link`), and is used only when /api/info names the same place: a hint
// naming another relay gets a handshake and not one byte of a stream.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Relay, browserFixture } from '../lib/fixture.mjs';
import {
  freePort, launchBrowser, newSession, screen, screenshotsOfState, sleep, startLinkemu, stats, typeLine, until,
  waitForPrompt,
} from '../lib/helpers.mjs';
import { findSpare } from '../lib/spare.mjs';

// This file's relay serves the floor; a second one (started in its test) does not.
const fx = browserFixture({ relay: { env: { TERN_BENCH_FLOOR: '1' } } });

/// The `tern:*` marks of `page` (each name's moments), and when its first /api/challenge left.
async function marks(page) {
  return page.evaluate(() => {
    const at = {};
    for (const e of performance.getEntriesByType('mark')) if (e.name.startsWith('tern:')) (at[e.name] ??= []).push(e.startTime);
    const challenge = performance.getEntriesByType('resource').find((e) => e.name.endsWith('/api/challenge'));
    return { at, challengeSent: challenge?.startTime ?? null };
  });
}

/// Records every WebTransport the page makes: when (page clock), where, how many streams it opened,
/// whether it was closed (an init script: the page's own code runs unchanged).
const recordTransports = () => {
  const Native = window.WebTransport;
  window.__transports = [];
  window.WebTransport = class extends Native {
    constructor(url, options) {
      super(url, options);
      // `written`: the text of every chunk the page wrote on the link's streams, in order.
      const t = { url, at: performance.now(), streams: 0, closed: false, written: [], writtenAt: [] };
      window.__transports.push(t);
      const open = this.createBidirectionalStream.bind(this);
      this.createBidirectionalStream = (...a) => {
        t.streams++;
        return open(...a).then((stream) => {
          const getWriter = stream.writable.getWriter.bind(stream.writable);
          stream.writable.getWriter = () => {
            const writer = getWriter();
            const write = writer.write.bind(writer);
            writer.write = (chunk) => {
              t.written.push(new TextDecoder().decode(chunk));
              t.writtenAt.push(performance.now());
              return write(chunk);
            };
            return writer;
          };
          return stream;
        });
      };
      const close = this.close.bind(this);
      this.close = (...a) => { t.closed = true; return close(...a); };
    }
  };
};

/// The transports `page` made, the moment its wasm was in and when its /api/info answered.
const transports = (page) => page.evaluate(() => ({
  made: window.__transports,
  wasm: performance.getEntriesByName('tern:wasm')[0]?.startTime,
  info: performance.getEntriesByType('resource').find((e) => e.name.endsWith('/api/info'))?.responseEnd,
}));

test('a fresh load knocks on WebTransport as its document is parsed, where the document says, and the session uses that link', async () => {
  const page = await fx.browser.context.newPage();
  try {
    await page.addInitScript(recordTransports);
    // What the Content-Security-Policy blocks: the inline script that opens the link must not be.
    await page.addInitScript(() => {
      window.__blocked = [];
      document.addEventListener('securitypolicyviolation', (e) => window.__blocked.push(`${e.violatedDirective} ${e.blockedURI}`));
    });
    const response = await fx.openSession(page);
    const hint = /^tern-link;desc="(.*)"$/.exec(response.headers()['server-timing'] ?? '')?.[1];
    assert.ok(hint, `the document's hint: ${JSON.stringify(response.headers())}`);
    const { made, wasm } = await transports(page);
    assert.equal(made.length, 1, `one WebTransport: ${JSON.stringify(made)}`);
    const [port, path] = hint.split(' ');
    // Its CONNECT carries the nonce the relay pushes its challenge to (tern::relay_proto::proof).
    assert.match(made[0].url, new RegExp(`^https://127\\.0\\.0\\.1:${port}${path}\\?greet=[0-9a-f]{64}$`));
    assert.equal(String(fx.port), port, "the relay's own port");
    // Made by index.html's inline script as the document was parsed: before app.js ran, so
    // before the wasm was in and /api/info was asked. The handshake's round trips run beside the
    // page's files, not after them.
    const { at, challengeSent } = await marks(page);
    assert.ok(made[0].at < at['tern:script'][0] && made[0].at < wasm && made[0].at < challengeSent,
      `made at ${made[0].at}, app.js ${at['tern:script'][0]}, wasm ${wasm}, info's challenge ${challengeSent}`);
    assert.deepEqual(await page.evaluate(() => window.__blocked), [], 'nothing blocked by the policy');
    assert.ok(made[0].streams >= 1 && !made[0].closed, `it carries the session: ${JSON.stringify(made)}`);
    const stats = await page.evaluate(() => window.tern.stats());
    assert.equal(stats.phase, 'live', JSON.stringify(stats));
    assert.equal(stats.pushedChallenges, 1, `the relay's challenge came pushed with the link: ${JSON.stringify(stats)}`);
    await page.keyboard.type('exit\n');
  } finally {
    await page.close();
  }
});

// The relay sends its HTTP/3 SETTINGS with its handshake flight (third_party/wtransport/PATCH.md).
// A first version of that change took the connection before the client's ClientHello was whole:
// Chromium's spans two Initial packets, and when the second came after the relay's first try to
// open the SETTINGS stream, that stream waited forever and the page went over to the WebSocket
// (every load of the load bench at 50 ms). Here the link paces packets at 1 Mbit/s with 25 ms
// each way, so the two Initial packets arrive 10 ms apart, for a first connection and one in the
// same browser after it (a resumed TLS session). Without the fix: `first: the session is on
// WebTransport` failed (the transport was the WebSocket).
test('behind a 50 ms, 1 Mbit/s link the WebTransport comes up and carries the session, first and again', async () => {
  const emuPort = await freePort();
  const emu = await startLinkemu({ listenPort: emuPort, targetPort: fx.port, link: 'delay=25ms,rate=1mbit' });
  const page = await fx.browser.context.newPage();
  try {
    await page.addInitScript(recordTransports);
    for (const visit of ['first', 'again']) {
      await fx.openSession(page, newSession(fx.url.replace('#token=', `#wt_port=${emuPort}&token=`)));
      const s = await stats(page);
      const { made } = await transports(page);
      assert.equal(s.transport, 'webtransport', `${visit}: the session is on WebTransport: ${JSON.stringify(s)}`);
      assert.ok(made.length >= 1 && made.every((t) => t.url.includes(`:${emuPort}/`)), `${visit}: ${JSON.stringify(made)}`);
      await typeLine(page, 'exit');
    }
  } finally {
    await page.close();
    await emu.stop();
  }
});

// The relay pushes its challenge as it accepts the early link (to the nonce in its CONNECT): the
// page's first words on the link are its hello, with the proof, and since what answers there
// proved the token, the hello does not wait for /api/info. Its `ready` carries the relay's info,
// so the session does not wait for /api/info either. Before the push, the page greeted first,
// and the hello waited for the info and then a round trip for the challenge; before the info
// rode in `ready`, the session waited for /api/info's answer.
test('the early link has its challenge pushed: the hello is the first thing said, and the session is served, before /api/info answers', async () => {
  const page = await fx.browser.context.newPage();
  try {
    await page.addInitScript(recordTransports);
    // The info held back 1 s on its way out: neither the hello nor the session waits for it.
    let infoAnswered = 0;
    await page.route((url) => url.pathname.endsWith('/api/info'), async (route) => {
      await sleep(1000);
      await route.continue();
      infoAnswered++;
    });
    await fx.openSession(page);
    assert.equal(infoAnswered, 0, 'the session was served before /api/info answered');
    const { made } = await transports(page);
    assert.equal(made.length, 1, JSON.stringify(made));
    const [link] = made;
    const said = link.written.map((chunk) => JSON.parse(chunk.split('\n')[0]).type);
    assert.equal(said[0], 'hello', `no greet, the hello first: ${JSON.stringify(link.written)}`);
    const { at } = await marks(page);
    assert.ok(at['tern:challenge'][0] <= link.writtenAt[0], `the challenge at ${at['tern:challenge'][0]}, the hello at ${link.writtenAt[0]}`);
    // The info the page checked is the one `ready` brought: marked as the answer was read.
    assert.ok(at['tern:info'][0] >= at['tern:ready'][0], `the info with ready: ${JSON.stringify(at)}`);
    const s = await page.evaluate(() => window.tern.stats());
    assert.equal(s.phase, 'live');
    assert.equal(s.pushedChallenges, 1, JSON.stringify(s));
    // What the info tells the page is in: the settings panel names the relay's build.
    await page.evaluate(() => window.tern.settings.open());
    assert.match(await page.evaluate(() => document.getElementById('settings-relay').textContent), /^tern-relay \d/);
    await page.evaluate(() => window.tern.settings.close());
    await page.keyboard.type('exit\n');
  } finally {
    await page.close();
  }
});

// The early link is made for the first second: a page that shows the list of sessions first and
// is answered later must not leave it open and silent until the relay gives up on its hello
// (--handshake-timeout, 10 s), which the relay counts as a failed attempt of the address (and
// the page then connected only on its retry).
test('a page that waits on its session list longer than the relay waits for a hello leaves no silent link behind', async () => {
  // A session on the relay, so that a page without one of its own lists it and waits.
  const kept = await fx.browser.context.newPage();
  await fx.openSession(kept);
  const other = await launchBrowser();
  try {
    const { page } = other;
    await page.goto(fx.url);
    await page.waitForSelector('#chooser:not([hidden]) #chooser-list li');
    await sleep(11_000);
    await page.click('#chooser-new');
    await waitForPrompt(page);
    assert.doesNotMatch(fx.relay.log(), /no hello within/, 'the relay waited for a hello that never came');
    const s = await stats(page);
    assert.equal(s.connects, 1, `connected at once, no retry: ${JSON.stringify(s)}`);
    await page.keyboard.type('exit\n');
  } finally {
    await other.close();
    await kept.keyboard.type('exit\n');
    await kept.close();
  }
});

test('#early_link=0 (the bench\'s "before"): WebTransport waits for /api/info', async () => {
  const page = await fx.browser.context.newPage();
  try {
    await page.addInitScript(recordTransports);
    await fx.openSession(page, fx.url.replace('#', '#session=new&early_link=0&'));
    const { made, info } = await transports(page);
    assert.equal(made.length, 1, JSON.stringify(made));
    assert.ok(made[0].at >= info, `made at ${made[0].at}, info answered at ${info}`);
    await page.keyboard.type('exit\n');
  } finally {
    await page.close();
  }
});

test('a document naming another relay: the page knocks there, says nothing but its greet, and links to its own relay', async () => {
  // Another real relay (another token, its own certificate): what a hint from anyone but this
  // relay could name. That relay pushes a challenge under its own token, which does not prove the
  // page's; the page then greets on its early link before the info is in (a nonce, no proof:
  // web/src/relay_link.rs challenge_on), and says nothing more there: no hello, no proof. Only the info of the page's own relay, asked after that relay proved the token,
  // decides which link is used.
  const other = new Relay();
  await other.start();
  // A browser of this test's own: the document is rewritten on its way in (page.route), and
  // Chromium counts a fulfilled answer as another address space, whose page may not reach
  // 127.0.0.1 (Local Network Access); what is tested here is not that check.
  const browser = await launchBrowser({ args: ['--disable-features=LocalNetworkAccessChecks'] });
  try {
    const wrong = /^tern-link;desc="(.*)"$/.exec((await fetch(`${other.origin}/`)).headers.get('server-timing'))[1];
    assert.notEqual(wrong.split(' ')[0], String(fx.port));
    const { page } = browser;
    await page.addInitScript(recordTransports);
    await page.route((url) => url.port === String(fx.port) && url.pathname === '/', async (route) => {
      const response = await route.fetch();
      await route.fulfill({ response, headers: { ...response.headers(), 'server-timing': `tern-link;desc="${wrong}"` } });
    });
    await page.goto(newSession(fx.url));
    await waitForPrompt(page);
    const { made } = await transports(page);
    const served = await page.evaluate(() => performance.getEntriesByType('navigation')[0].serverTiming.map((t) => t.description));
    assert.deepEqual(served, [wrong], "the page was served the other relay's hint");
    const [wrongPort] = wrong.split(' ');
    const early = made.filter((t) => t.url.includes(`:${wrongPort}/`));
    const own = made.filter((t) => t.url.includes(`:${fx.port}/`));
    assert.equal(early.length, 1, `the page knocked where the document said: ${JSON.stringify(made)}`);
    assert.ok(early[0].streams <= 1, `at most the greet's stream on the other relay's link: ${JSON.stringify(made)}`);
    const said = early[0].written.join('').split('\n').filter(Boolean).map((line) => JSON.parse(line));
    assert.ok(said.length <= 1 && said.every((m) => m.type === 'greet' && /^[0-9a-f]{64}$/.test(m.nonce)),
      `nothing but a greet on the other relay's link: ${JSON.stringify(said)}`);
    assert.ok(!said.some((m) => 'proof' in m || 'token' in m), `no proof, no token there: ${JSON.stringify(said)}`);
    // And the page's own link: its challenge pushed (no greet), then the hello with its proof.
    const ownSaid = own[0].written.join('').split('\n').filter(Boolean).map((line) => JSON.parse(line).type);
    assert.equal(ownSaid[0], 'hello', JSON.stringify(ownSaid));
    assert.ok(early[0].closed, 'and it was closed');
    assert.equal(own.length, 1, JSON.stringify(made));
    assert.ok(own[0].streams >= 1, `the session on its own relay: ${JSON.stringify(made)}`);
    assert.equal((await page.evaluate(() => window.tern.stats())).phase, 'live');
    // The other relay saw no hello (a proof over its challenge would have been one).
    assert.doesNotMatch(other.log(), /hello|proof/i, other.log());
    await page.keyboard.type('exit\n');
  } finally {
    await browser.close();
    await other.close();
  }
});

test('the page marks every stage of its first prompt once, in order; the terminal is made while the wasm compiles and opened after the hello', async () => {
  const { page } = fx;
  await fx.openSession(page);
  await until(() => page.evaluate(() => performance.getEntriesByName('tern:datagram').length === 1), { what: 'the first datagram mark' });
  const { at, challengeSent } = await marks(page);
  const seen = JSON.stringify(at);
  const names = ['tern:script', 'tern:wasm', 'tern:term', 'tern:start', 'tern:open', 'tern:info', 'tern:link',
    'tern:challenge', 'tern:ready', 'tern:datagram'];
  for (const name of names) assert.equal(at[name]?.length, 1, `${name} marked once: ${seen}`);
  const t = Object.fromEntries(names.map((n) => [n, at[n][0]]));
  // xterm.js's terminal is made while the wasm compiles, then the client starts, and the terminal
  // is opened (its DOM, the page's wiring) once the hello has left. Two chains meet before
  // the session is served: the client and the link (whose relay proved the token with its
  // pushed challenge: the hello need not wait for the info), and the relay's info (from
  // /api/info, or from `ready`, whichever came first).
  for (const [a, b] of [['tern:script', 'tern:term'], ['tern:term', 'tern:wasm'], ['tern:wasm', 'tern:start'], ['tern:start', 'tern:open'],
    ['tern:wasm', 'tern:info'], ['tern:start', 'tern:link'], ['tern:info', 'tern:datagram'], ['tern:link', 'tern:challenge'],
    ['tern:challenge', 'tern:ready'], ['tern:ready', 'tern:datagram']]) {
    assert.ok(t[a] <= t[b], `${a} before ${b}: ${seen}`);
  }
  // The challenge of /api/info left before the client started (the page's wiring), and only one
  // info was asked.
  assert.ok(challengeSent !== null && challengeSent < t['tern:start'], `challenge sent at ${challengeSent}: ${seen}`);
  const stats = await page.evaluate(() => window.tern.stats());
  assert.equal(stats.infoRequests, 1);
  // The relay's answer (the core's milestone) is the mark's moment, not before: within the core
  // clock's microsecond (web/src/clock.rs rounds performance.now() to it).
  assert.ok(stats.firstReadyMs >= t['tern:ready'] - 0.001, `firstReadyMs ${stats.firstReadyMs}, mark ${t['tern:ready']}`);
  await page.keyboard.type('exit\n');
});

/// xterm.js's grid, `[rows, cols]`.
const termGrid = (page) => page.evaluate(() => [window.tern.term.rows, window.tern.term.cols]);

/// The shell's own idea of its size (`stty size`), `[rows, cols]`.
async function shellGrid(page) {
  await typeLine(page, 'echo size-$(stty size | tr " " x)');
  const m = await until(async () => (await screen(page)).match(/^size-(\d+)x(\d+)$/m), { what: "the shell's size" });
  return [Number(m[1]), Number(m[2])];
}

// The hello leaves before xterm.js has opened the terminal (www/terminal_size.js estimates the
// size it will fit): the estimate must be what the opened terminal fits, or the session starts
// at one size and is resized at once. Checked where it counts, in the shell.
test('the client starts before xterm.js opens, at the size the opened terminal fits: a desktop, a phone and an odd window', async () => {
  for (const viewport of [{ width: 1100, height: 700 }, { width: 390, height: 700 }, { width: 913, height: 517 }]) {
    const page = await fx.browser.context.newPage();
    try {
      await page.setViewportSize(viewport);
      await page.goto(newSession(fx.url));
      await waitForPrompt(page);
      const { at } = await marks(page);
      const where = `${viewport.width}x${viewport.height}: ${JSON.stringify(at)}`;
      assert.ok(at['tern:start'][0] < at['tern:open'][0], `the client started before the terminal opened: ${where}`);
      assert.equal(at['tern:refit'], undefined, `the estimate was the fitted size: ${where}`);
      assert.deepEqual(await shellGrid(page), await termGrid(page), `stty size is the terminal's: ${where}`);
      await page.keyboard.type('exit\n');
    } finally {
      await page.close();
    }
  }
});

test('a browser the size cannot be estimated in (no OffscreenCanvas): the opened terminal is fitted, and the shell has its size', async () => {
  const page = await fx.browser.context.newPage();
  try {
    await page.addInitScript(() => { delete window.OffscreenCanvas; });
    await page.setViewportSize({ width: 1000, height: 600 });
    await page.goto(newSession(fx.url));
    await waitForPrompt(page);
    const { at } = await marks(page);
    assert.equal(at['tern:refit']?.length, 1, `the opened terminal was fitted: ${JSON.stringify(at)}`);
    const grid = await termGrid(page);
    assert.notDeepEqual(grid, [24, 80], "the window's size, not xterm.js's default");
    assert.deepEqual(await shellGrid(page), grid, "stty size is the fitted terminal's");
    await page.keyboard.type('exit\n');
  } finally {
    await page.close();
  }
});

test('#early_info=0 (the bench\'s "before"): /api/info is asked once the client starts', async () => {
  const page = await fx.browser.context.newPage();
  try {
    await fx.openSession(page, fx.url.replace('#', '#session=new&early_info=0&'));
    const { at, challengeSent } = await marks(page);
    assert.ok(challengeSent >= at['tern:start'][0], `challenge at ${challengeSent}, start at ${at['tern:start'][0]}`);
    assert.ok(at['tern:info'][0] >= at['tern:start'][0]);
    assert.equal((await page.evaluate(() => window.tern.stats())).infoRequests, 1);
    await page.keyboard.type('exit\n');
  } finally {
    await page.close();
  }
});

test('the floor: the same xterm.js draws a fixed prompt, no wasm, no session; only with TERN_BENCH_FLOOR=1', async () => {
  const { page } = fx;
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(`${fx.origin}/floor.html`);
  await until(() => page.evaluate(() => {
    const b = window.tern?.term?.buffer.active;
    return b?.getLine(b.cursorY)?.translateToString(true).trimEnd() === 'floor@tern:~$';
  }), { what: 'the floor prompt' });
  const fetched = await page.evaluate(() => performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname));
  // The page's own xterm.js, under its content-hashed name (scripts/hash-page.mjs).
  assert.ok(fetched.some((p) => /^\/xterm\/xterm\.[0-9a-f]{8}\.mjs$/.test(p)), `the page's xterm.js: ${fetched}`);
  assert.ok(!fetched.some((p) => p.endsWith('.wasm') || p.startsWith('/api/')), `no wasm, no API: ${fetched}`);
  assert.deepEqual(errors, [], 'nothing refused by the Content-Security-Policy');
  await screenshotsOfState(page, 'floor');

  // A relay started without the variable: no floor (404 as any unknown path).
  const plain = new Relay();
  await plain.start();
  try {
    for (const path of ['/floor.html', '/floor.js']) {
      const r = await fetch(`${plain.origin}${path}`);
      assert.equal(r.status, 404, path);
    }
    assert.equal((await fetch(`${fx.origin}/floor.js`)).status, 200, 'the bench relay serves it');
  } finally {
    await plain.close();
  }
});

test('a page that takes a pre-started spare shows its prompt, at its own size at once, from the shell started ahead', async () => {
  // Demand (as a page's /api/info makes it), then the spare's shell runs before any page asks.
  const info = await fetch(`${fx.origin}/api/info`, { headers: { authorization: `Bearer ${fx.token}` } });
  assert.equal(info.status, 200);
  const spare = await until(() => { const s = findSpare(fx.stateDir); return s?.shell ? s : null; },
    { timeout: 20000, what: "the spare's shell, released by the relay" });
  const page = await fx.browser.context.newPage();
  const logged = [];
  page.on('console', (m) => logged.push(m.text()));
  try {
    // Not 80x24 and not the earlier pages' size (the relay releases a spare's shell at the last
    // page's size, else 80x24): the page's own size must reach the shell in its first state.
    await page.setViewportSize({ width: 760, height: 430 });
    await page.goto(newSession(fx.url));
    await waitForPrompt(page);
    const grid = await page.evaluate(() => [window.tern.term.rows, window.tern.term.cols]);
    assert.notDeepEqual(grid, [24, 80], 'a size the relay did not use');
    // The page continued from the relay's point, as a resume does (not a fresh client whose
    // first state would reach mosh-server as a duplicate of the relay's and lose its size).
    assert.ok(logged.some((l) => l.includes("continuing from the relay's point")), logged.join('\n'));
    await screenshotsOfState(page, 'prestart-first-prompt');
    await page.setViewportSize({ width: 760, height: 430 });
    await until(async () => (await page.evaluate(() => [window.tern.term.rows, window.tern.term.cols]))[1] === grid[1],
      { what: 'xterm.js back at its size' });
    // The first command: the shell is the spare's, started before the page came; its size is the
    // page's from the start (nothing resized it since the page's first state).
    await typeLine(page, 'echo shell-$$-$(stty size | tr " " x)');
    const m = await until(async () => (await screen(page)).match(/^shell-(\d+)-(\d+)x(\d+)$/m), { what: 'the report' });
    assert.equal(Number(m[1]), spare.shell, "the page's shell is the one the relay started ahead");
    assert.deepEqual([Number(m[2]), Number(m[3])], grid, 'stty size is the page\'s');
    const stats = await page.evaluate(() => window.tern.stats());
    assert.equal(stats.phase, 'live', JSON.stringify(stats));
    assert.equal(stats.readies, 1, 'one ready: a new session, no reconnect');
    await page.keyboard.type('exit\n');
  } finally {
    await page.close();
  }
});
