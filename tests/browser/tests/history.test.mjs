// Scrollback and search, in the real page against the real tern-relay and mosh-server.
// Spawn mode: the shell runs under the relay's recorder, so every line is in the history, even the
// ones mosh never sent; the page reads it page by page and searches it on the relay. Bridge mode:
// the rows the page saw scroll off go into xterm.js's own scrollback.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  until, screen, stats, waitForPrompt, typeLine, screenshotsOfState, launchBrowser,
  moshServerNew as startMoshServer, pageDetail,
} from '../lib/helpers.mjs';
import { browserFixture } from '../lib/fixture.mjs';

const fx = browserFixture({ open: true });
const servers = [];
fx.defer(() => {
  for (const s of servers) {
    try { if (s.pid > 1) process.kill(s.pid, 'SIGTERM'); } catch { /* gone */ }
  }
});

/// Runs `command` and waits for `marker` (printed by the command itself) on the screen.
async function run(command, marker, timeout = 20000) {
  await typeLine(fx.page, command);
  await until(async () => (await screen(fx.page)).includes(marker), { timeout, what: marker });
}

/// `seq 1 100000` printed in the session: what the search and the restart find in the history.
const hundredThousand = fx.step('seq 1 100000 printed', () => run('seq 1 100000; echo flood-$((40+2))', 'flood-42', 60000));

/// Every line of xterm.js's buffer (its scrollback, then the screen).
const xtermLines = (p) => p.evaluate(() => {
  const b = window.tern.term.buffer.active;
  const out = [];
  for (let y = 0; y < b.length; y++) out.push(b.getLine(y)?.translateToString(true) ?? '');
  return out;
});

test('seq 1 100000: every number is in the history, in order, once', async () => {
  await hundredThousand();
  const { page } = fx;
  assert.equal(await page.evaluate(() => window.tern.history.available()), true);
  const history = await page.evaluate(() => window.tern.history.lines());
  const all = history.concat((await screen(page)).split('\n'));
  const numbers = all.filter((l) => /^\d+$/.test(l.trim())).map(Number);
  assert.equal(numbers.length, 100000, `${numbers.length} numbers`);
  assert.ok(numbers.every((n, i) => n === i + 1), 'in order, once');
  const rows = await page.evaluate(() => window.tern.term.rows);
  assert.ok(history.length >= 100000 - rows, `${history.length} lines in the history`);
});

test('search finds a line printed 50,000 lines ago and scrolls the history to it', async () => {
  await hundredThousand();
  const { page } = fx;
  // As a person does it: Ctrl+Shift+F, the pattern, Enter.
  await page.keyboard.down('Control');
  await page.keyboard.down('Shift');
  await page.keyboard.press('KeyF');
  await page.keyboard.up('Shift');
  await page.keyboard.up('Control');
  await page.waitForSelector('#find:not([hidden])');
  await page.click('#find-regex');
  await page.fill('#find-input', '^50000$');
  await page.keyboard.press('Enter');
  const current = await until(() => page.evaluate(() => {
    const m = document.querySelector('#history:not([hidden]) mark.current');
    if (!m) return null;
    const box = document.getElementById('history-scroll').getBoundingClientRect();
    const r = m.getBoundingClientRect();
    return { text: m.textContent, visible: r.top >= box.top && r.bottom <= box.bottom };
  }), { what: 'the current match in the history view' });
  assert.deepEqual(current, { text: '50000', visible: true });
  assert.match(await page.textContent('#find-count'), /1 of 1/);
  await screenshotsOfState(page, 'history-search');

  // Case and regex options, a bad pattern, next and previous.
  const r = await page.evaluate(() => window.tern.history.find('4999', {}));
  // 4999, 14999, ..., 94999 and 49990..49999 (once each: 49999 holds it once).
  assert.equal(r.count, 20, JSON.stringify(r));
  const bad = await page.evaluate(() => window.tern.history.find('([a-', { regex: true }));
  assert.ok(bad.error, JSON.stringify(bad));
  assert.match(await page.textContent('#find-count'), /regex|regular expression|unclosed|unterminated|error/i);
  await screenshotsOfState(page, 'history-search-bad-pattern');
  await page.keyboard.press('Escape');
  assert.equal(await page.isHidden('#find'), true);
  assert.equal(await page.evaluate(() => window.tern.history.isOpen()), false);
});

test('scrolling up past what the page saw opens the history, with colours and whole lines', async () => {
  const { page } = fx;
  const long = 'x'.repeat(300);
  await run(`mkdir -p /tmp/tern-ls-$$/a-dir && touch /tmp/tern-ls-$$/a-file && ls --color=always /tmp/tern-ls-$$; rm -r /tmp/tern-ls-$$; echo ${long}; seq -f 'after-%g' 1 80`, 'after-80');
  const page1 = await page.evaluate(() => window.tern.history.page(null, 200));
  const dirLine = page1.lines.find((l) => l.includes('a-dir') && !l.includes('mkdir'));
  assert.ok(dirLine, 'the ls line is in the history');
  assert.match(dirLine, /\x1b\[[0-9;]*34m[^\x1b]*a-dir/, `a directory in blue: ${JSON.stringify(dirLine)}`);
  assert.equal(page1.lines.filter((l) => l === long).length, 1, 'the wrapped line comes back as one line');

  // The wheel at the top of xterm.js's scrollback opens the history view at its newest lines.
  await page.evaluate(() => window.tern.term.scrollToTop());
  await page.mouse.move(400, 300);
  await page.mouse.wheel(0, -300);
  await page.waitForSelector('#history:not([hidden]) .hl');
  const drawn = await until(() => page.evaluate(() => {
    const lines = [...document.querySelectorAll('#history .hl')];
    const dir = lines.find((l) => l.textContent.startsWith('a-dir'));
    return dir && {
      dirHtml: dir.innerHTML,
      blueDir: [...dir.querySelectorAll('span')].some((s) => /\bf4\b|\bf12\b/.test(s.className) && s.textContent === 'a-dir'),
      long: lines.some((l) => l.textContent === 'x'.repeat(300)),
      info: document.getElementById('history-info').textContent,
    };
  }), { what: 'the ls line in the history view' });
  assert.ok(drawn.blueDir, `the directory drawn blue: ${drawn.dirHtml}`);
  assert.ok(drawn.long, 'the long line drawn as one line');
  assert.match(drawn.info, /History: [\d,]+ lines/);
  await screenshotsOfState(page, 'history-view');
  // Typing goes to the shell and closes the view. (Enter waits for the typed text: an Enter
  // pressed right after the key that closed the view was lost in two CI runs, stop 37's and
  // stop 39's; left open and named in stop 39's closing note, the wait is only here.)
  await page.keyboard.type('echo typed-in-history');
  await until(async () => !(await page.evaluate(() => window.tern.history.isOpen()))
    && (await screen(page)).includes('echo typed-in-history'), { what: 'the typed text in the shell, the view closed' });
  await page.keyboard.press('Enter');
  await until(async () => (await screen(page)).includes('\ntyped-in-history'), { what: 'the typed command ran', detail: pageDetail(page) });
  assert.equal(await page.evaluate(() => window.tern.history.isOpen()), false);
});

/// Lines printed, then vi and less, then more lines (which push the first ones into the history):
/// a test, and a step of the restart's test, which looks for the lines in the history after it.
const viAndLess = fx.step('vi and less between printed lines', async () => {
  const { page } = fx;
  await run("seq -f 'before-vi-%g' 1 30", 'before-vi-30');
  await typeLine(page, "seq -f 'in-vi-%g' 1 200 > /tmp/tern-vi-$$; vi -u NONE /tmp/tern-vi-$$");
  await until(async () => (await screen(page)).includes('in-vi-1'), { what: 'vi' });
  await page.keyboard.press('G'); // to the end: vi scrolls its screen
  await until(async () => (await screen(page)).includes('in-vi-200'), { what: 'vi at the end' });
  await page.keyboard.type(':q!');
  await page.keyboard.press('Enter');
  // vi throws away what was typed after `:q!` in the same read, as in any terminal: the next
  // command waits for the shell's prompt.
  await waitForPrompt(page);
  await typeLine(page, 'less /tmp/tern-vi-$$');
  // Whole lines: vi's last screen holds in-vi-170 and the like, which contain 'in-vi-1'.
  await until(async () => /^in-vi-1$/m.test(await screen(page)), { what: 'less', detail: pageDetail(page) });
  for (let i = 0; i < 30; i++) await page.keyboard.press('j');
  await until(async () => {
    const s = await screen(page);
    return /^in-vi-31$/m.test(s) && !/^in-vi-1$/m.test(s);
  }, { what: 'less scrolled', detail: pageDetail(page) });
  await page.keyboard.press('q');
  await waitForPrompt(page);
  await run("rm /tmp/tern-vi-$$; seq -f 'after-vi-%g' 1 60", 'after-vi-60');
  const history = await page.evaluate(() => window.tern.history.lines());
  assert.deepEqual(history.filter((l) => l.startsWith('in-vi-')), [], 'no vi or less screen in the history');
  for (let i = 1; i <= 30; i++) assert.ok(history.includes(`before-vi-${i}`), `before-vi-${i} kept`);
});

test('vi and less stay out of the history; the lines before vi are still there after it quits', () => viAndLess());

test('the history survives a relay restart and a reload', async () => {
  await hundredThousand();
  await viAndLess();
  const { page } = fx;
  await fx.relay.restart();
  await page.reload();
  await until(async () => (await stats(page))?.phase === 'live', { timeout: 30000, what: 'live again' });
  const history = await page.evaluate(() => window.tern.history.lines());
  assert.ok(history.includes('before-vi-1') && history.includes('50000'), 'the old lines are there');
});

/// One more mosh-server for bridge mode, ended after the tests.
function moshServerNew() {
  const server = startMoshServer();
  servers.push(server);
  return server;
}

test('bridge mode: lines printed slowly (more than a screen) go into xterm.js scrollback, in order, once', async () => {
  const bridge = await fx.addRelay({ args: ['--bridge', '--allow', '127.0.0.1:60400-60999'] });
  const s = moshServerNew();
  const other = await launchBrowser();
  try {
    const p = other.page;
    await p.goto(`http://127.0.0.1:${bridge.port}/#token=${fx.token}&host=127.0.0.1&port=${s.port}&key=${encodeURIComponent(s.key)}`);
    await waitForPrompt(p);
    await p.keyboard.type('for i in $(seq 1 80); do echo slow-$i; sleep 0.04; done; echo done-$((6*7))');
    await p.keyboard.press('Enter');
    await until(async () => (await screen(p)).includes('done-42'), { timeout: 30000, what: 'the slow loop' });
    // The core has the last state a moment before xterm.js has it drawn and parsed.
    await until(async () => (await xtermLines(p)).includes('done-42'), { what: 'xterm.js to show the end' });
    const lines = (await xtermLines(p)).filter((l) => /^slow-\d+$/.test(l));
    assert.deepEqual(lines, Array.from({ length: 80 }, (_, i) => `slow-${i + 1}`));
    const st = await stats(p);
    assert.ok(st.scrollbackRows >= 10, `${st.scrollbackRows} rows pushed`);
    assert.equal(await p.evaluate(() => window.tern.history.available()), false);
    // The notification bar is drawn over frames: it never enters the scrollback.
    assert.ok(!(await xtermLines(p)).some((l) => /mosh: |Last contact/.test(l)));
    // Find searches what this page holds.
    const found = await p.evaluate(() => window.tern.history.find('slow-3', {}));
    // slow-3 and slow-30..slow-39 (and not the command line, which has slow-$i).
    assert.equal(found.count, 11, JSON.stringify(found));
    assert.equal(await p.evaluate(() => window.tern.history.highlighted()), 11, 'every match highlighted');
    // What is in xterm.js's scrollback (above the screen) before the screenshots resize the page.
    const scrolledOff = await p.evaluate(() => {
      const b = window.tern.term.buffer.active;
      const out = [];
      for (let y = 0; y < b.baseY; y++) out.push(b.getLine(y)?.translateToString(true) ?? '');
      return out;
    });
    await screenshotsOfState(p, 'history-bridge-find');
    // Resizing (the screenshots went to phone size and back) neither loses nor repeats a
    // scrollback line. (The screen's own rows are the server's: mosh-server keeps the top rows
    // of a screen made shorter, so rows below may go, as they do for mosh-client.)
    const after = (await xtermLines(p)).filter((l) => /^slow-\d+$/.test(l));
    const kept = scrolledOff.filter((l) => /^slow-\d+$/.test(l));
    assert.deepEqual(after.slice(0, kept.length), kept, 'the scrollback before the resizes is kept, in order');
    assert.equal(new Set(after).size, after.length, `a line repeated after the resizes: ${after.join(' ')}`);
    const numbers = after.map((l) => Number(l.slice(5)));
    assert.ok(numbers.every((n, i) => i === 0 || n > numbers[i - 1]), `out of order after the resizes: ${after.join(' ')}`);
  } finally {
    await other.close();
  }
});
