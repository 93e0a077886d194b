// The browser tests' fixture: the real tern-relay, a headless browser (Chromium, or Firefox under
// TERN_BROWSER=firefox) and its page for one test file, started in node:test's `before` and ended
// in its `after`; and setup steps, which give a test that needs what an earlier test left (a
// session at its prompt, a file pasted, lines in the history) that state when it runs alone:
//
//   const fx = browserFixture({ relay: { args: ['--paste-dir', dir] }, open: true });
//   const pasted = fx.step('a picture pasted', async () => { ... });
//   test('...', async () => { await pasted(); const { page } = fx; ... });
//
//   node --test --test-name-pattern 'pasting the same picture' tests/browser/tests/paste.test.mjs
//
// In a run of the whole file each step runs once, in the first test that asks for it, where the
// file's earlier tests already built that state; alone, the test's own call builds it.
import { before, after } from 'node:test';
import {
  freePort, startRelay, stopRelay, launchBrowser, waitForPrompt, tempDir, cleanupState, newSession,
  browserName,
} from './helpers.mjs';

/// A random token with `prefix` (each file its own: a relay's rate limiter counts per address).
// 32 random hex digits after the prefix: the relay refuses tokens under 16 characters.
export const randomToken = (prefix = 'test-token-') => prefix + globalThis.crypto.randomUUID().replaceAll('-', '');

/// One tern-relay: a free port (or `port`), `token`, a temporary state dir (or `stateDir`), `args`;
/// `env` is added to the relay's environment (e.g. `RUST_LOG`). Stopped and restarted on the same port, token and state
/// dir, as a person restarts it; `url`, `child` and `log()` are the running process's.
export class Relay {
  constructor({ port, token = randomToken(), stateDir, args = [], env = {}, host } = {}) {
    Object.assign(this, { port, token, stateDir, args, env, host });
    this.ownState = !stateDir;
    this.running = null;
  }

  async start() {
    this.port ??= await freePort();
    this.stateDir ??= tempDir('tern-relay-state-');
    const { port, token, stateDir, args, env, host } = this;
    this.running = await startRelay({ port, token, stateDir, args, env, host });
    return this;
  }

  /// Ends the process (`SIGKILL`: no goodbye to the page, as a crash); the state dir stays.
  async stop(signal = 'SIGTERM') {
    await stopRelay(this.running, signal);
  }

  async restart({ signal = 'SIGTERM' } = {}) {
    await this.stop(signal);
    return this.start();
  }

  get url() { return this.running?.url; }
  get child() { return this.running?.child; }
  get origin() { return new URL(this.url).origin; }
  log() { return this.running?.log() ?? ''; }

  /// Stops it, ends the mosh-servers it started and removes its state dir (when it made it).
  async close() {
    await this.stop();
    if (this.ownState) cleanupState(this.stateDir);
  }
}

/// Registers the file's set-up (`before`) and teardown (`after`) with node:test and returns the
/// fixture, whose fields are set once `before` ran:
///   relay    the file's Relay (options: `relay: { token, args, env, port }`; `relay: false`: none)
///   browser  launchBrowser()'s `{ name, context, page, consoleLog, close() }` (options:
///            `browser: { viewport, mobile, args, env }`; `browser: false` for none)
///   page     browser.page, at its prompt in a new session when `open: true`; a test that swaps it
///            (closes it, opens another) assigns the new one here
///   token, url, origin, port, stateDir   the relay's
/// `grant`: Chromium permissions on the relay's origin (`['clipboard-read', ...]`; other browsers'
/// drivers cannot grant them). `relayLog`: print the relay's log too when a test failed (the
/// browser's console is always printed then, or with TERN_SHOW_CONSOLE=1). `prepare`: an async
/// function run before the relay starts (what its arguments name: an sshd and its config).
/// A file's own set-up after the fixture's goes in `fx.before(fn)`, not node:test's `before`.
export function browserFixture(opts = {}) {
  const fx = new Fixture(opts);
  before(() => fx.queued(() => fx.start()));
  after(() => fx.close());
  return fx;
}

class Fixture {
  constructor({ relay = {}, browser = {}, open = false, grant = [], relayLog = false, prepare } = {}) {
    this.opts = { relay, browser, open, grant, relayLog, prepare };
    this.relay = relay === false ? null : new Relay(relay);
    this.browser = null;
    this.page = null;
    this.cleanups = [];
    this.extraRelays = [];
    this.queue = Promise.resolve();
  }

  /// Runs `fn` after everything queued before it (and not at all when that failed). Node 20 runs a
  /// file's top-level `before` hooks at once, side by side, as they are registered; the fixture's
  /// own set-up and the file's (fx.before) go through this queue so they run in order.
  queued(fn) {
    this.queue = this.queue.then(fn);
    return this.queue;
  }

  /// A file's own set-up that needs the fixture's (a forwarder to the relay's port, linkemu, a
  /// page opened its own way): a `before` hook run once the fixture is up, in the order registered.
  before(fn) {
    before(() => this.queued(fn));
  }

  get token() { return this.relay?.token; }
  get url() { return this.relay?.url; }
  get origin() { return this.relay?.origin; }
  get port() { return this.relay?.port; }
  get stateDir() { return this.relay?.stateDir; }

  async start() {
    await this.opts.prepare?.();
    await this.relay?.start();
    if (this.opts.browser !== false) {
      this.browser = await launchBrowser(this.opts.browser);
      this.page = this.browser.page;
      if (this.opts.grant.length && this.browser.name === 'chromium') {
        await this.browser.context.grantPermissions(this.opts.grant, { origin: this.origin });
      }
      if (this.opts.open) await this.openSession();
    }
  }

  /// Opens `url` (a new session on the file's relay) in `page` and waits for the shell's prompt.
  async openSession(page = this.page, url = newSession(this.url)) {
    const response = await page.goto(url);
    await waitForPrompt(page);
    return response;
  }

  /// A setup step: `fn` runs once, in the first test that calls the returned function; later
  /// calls return its result (or throw its error) at once. A test calls the steps whose state it
  /// needs, so it runs alone as in the whole file. `what` is printed when the step runs.
  step(what, fn) {
    let done;
    return () => {
      done ??= (async () => {
        console.log(`# step: ${what}`);
        return fn();
      })();
      return done;
    };
  }

  /// Runs `fn` in the teardown (the last deferred first), once the browser and relays are gone:
  /// what the test started besides them (mosh-servers, linkemu, sshd, a forwarder).
  defer(fn) {
    this.cleanups.push(fn);
  }

  /// Another relay (bridge mode beside spawn mode, another deployment shape), started now and
  /// closed in the teardown. The file's token unless `token` is given.
  async addRelay(opts = {}) {
    const relay = new Relay({ token: this.token, ...opts });
    this.extraRelays.push(relay);
    return relay.start();
  }

  async close() {
    const failed = process.exitCode || process.env.TERN_SHOW_CONSOLE;
    await this.browser?.close();
    for (const relay of this.extraRelays) await relay.close();
    await this.relay?.close();
    for (const fn of this.cleanups.reverse()) {
      try { await fn(); } catch (e) { console.log(`# cleanup: ${e.message}`); }
    }
    if (failed && this.browser) console.log(this.browser.consoleLog.join('\n'));
    if (failed && this.opts.relayLog && this.relay) console.log(this.relay.log());
  }
}

/// `{ skip }` for a test that needs what only Chromium's driver does (node:test's options), `{}` in
/// Chromium.
export const onlyChromium = (why = "needs Chromium's driver") =>
  (browserName() === 'chromium' ? {} : { skip: `${why} (${browserName()})` });
