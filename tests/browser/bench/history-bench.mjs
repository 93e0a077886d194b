// Scrollback and search, for the benchmark suite (tern-bench's `history` rows):
//
//   node tests/browser/bench/history-bench.mjs [--lines 100000] [--repeat 5] [--json]
//
// Headless Chromium, the real tern-relay in spawn mode on loopback (the shell under its recorder).
// `seq 1 LINES` is printed, then:
//   completeness: the numbers found in the history plus the screen, in order, once (percent);
//   firstPageMs:  a wheel turn up at the top of xterm.js's scrollback → the history view's first
//                 lines drawn (the relay read and sent a page), per opening;
//   searchMs:     a search of the whole history for one line (`^N/2$`) → its match shown;
//   diskBytes:    the history's files; recorderRssKb and relayRssKb: resident memory of the
//                 recorder and of the relay after the searches.
// Prints a summary, and with --json one JSON object on the last line.
import { readdirSync, statSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import {
  freePort, startRelay, stopRelay, launchBrowser, until, screen, waitForPrompt, typeLine,
  tempDir, cleanupState, cliArg, newSession,
} from '../lib/helpers.mjs';

const LINES = Number(cliArg('lines', 100000));
const REPEAT = Number(cliArg('repeat', 5));
const JSON_OUT = process.argv.includes('--json');

const rssKb = (pid) => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)?.[1] ?? NaN);

const token = 'history-bench-' + Math.random().toString(36).slice(2);
const stateDir = tempDir('tern-history-bench-state-');
let relay, browser;
try {
  relay = await startRelay({ port: await freePort(), token, stateDir });
  browser = await launchBrowser();
  const page = browser.page;
  await page.goto(newSession(relay.url));
  await waitForPrompt(page, 30000);
  await typeLine(page, `seq 1 ${LINES}; echo bench-$((6*7))`);
  await until(async () => (await screen(page)).includes('bench-42'), { timeout: 120000, what: 'the flood' });

  const history = await page.evaluate(() => window.tern.history.lines());
  const numbers = history.concat((await screen(page)).split('\n'))
    .filter((l) => /^\d+$/.test(l.trim())).map(Number);
  let inOrder = 0;
  for (const n of numbers) if (n === inOrder + 1) inOrder++;
  const completeness = (100 * inOrder) / LINES;

  const firstPageMs = [];
  for (let i = 0; i < REPEAT; i++) {
    await page.evaluate(() => { window.tern.history.close(); window.tern.term.scrollToTop(); });
    await page.mouse.move(400, 300);
    const t = await page.evaluate(() => new Promise((resolve) => {
      const start = performance.now();
      const view = document.getElementById('history-lines');
      const seen = () => view.querySelector('.hl') && !document.getElementById('history').hidden;
      const obs = new MutationObserver(() => { if (seen()) { obs.disconnect(); resolve(performance.now() - start); } });
      obs.observe(view, { childList: true });
      window.tern.term.element.dispatchEvent(new WheelEvent('wheel', { deltaY: -120, bubbles: true }));
    }));
    firstPageMs.push(t);
  }
  await page.evaluate(() => window.tern.history.close());

  const searchMs = [];
  const target = Math.floor(LINES / 2);
  for (let i = 0; i < REPEAT; i++) {
    const t = await page.evaluate(async (pattern) => {
      const start = performance.now();
      const r = await window.tern.history.find(pattern, { regex: true });
      if (r.count !== 1) throw new Error(`search found ${JSON.stringify(r)}`);
      // Until the match is on the screen: the lines around it may still be on their way.
      while (!document.querySelector('#history mark.current')) {
        if (performance.now() - start > 10000) throw new Error('the match is not shown');
        await new Promise((res) => requestAnimationFrame(res));
      }
      return performance.now() - start;
    }, `^${target}$`);
    searchMs.push(t);
    await page.keyboard.press('Escape');
  }

  const dir = join(stateDir, 'sessions');
  const diskBytes = readdirSync(dir).filter((f) => f.includes('.history'))
    .reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);
  const recorderPid = Number(execFileSync('pgrep', ['-n', '-f', `tern-relay record --history-dir ${dir}`], { encoding: 'utf8' }).trim());
  const result = {
    lines: LINES,
    historyLines: history.length,
    completeness,
    firstPageMs,
    searchMs,
    diskBytes,
    recorderRssKb: rssKb(recorderPid),
    relayRssKb: rssKb(relay.child.pid),
  };
  const med = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
  console.log(`history of ${LINES} lines: ${completeness.toFixed(3)} % complete, ${history.length} lines kept`);
  console.log(`first page after scrolling up: median ${med(firstPageMs).toFixed(1)} ms; search: median ${med(searchMs).toFixed(1)} ms`);
  console.log(`disk ${(diskBytes / 1e6).toFixed(2)} MB; recorder RSS ${result.recorderRssKb} kB; relay RSS ${result.relayRssKb} kB`);
  if (JSON_OUT) console.log(JSON.stringify(result));
} finally {
  await browser?.close();
  await stopRelay(relay);
  cleanupState(stateDir);
}
