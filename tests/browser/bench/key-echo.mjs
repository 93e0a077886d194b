// Keystroke echo measured on the screen, for the benchmarks that time typing while something big
// moves (paste-bench.mjs, download-bench.mjs, show-bench.mjs): a key goes to xterm.js's input
// (as typing does) and the page polls the core's screen until the tty's echo of it shows, keys
// 150 ms apart. The shell must run `cat >/dev/null` (it echoes every key); a line is ended after
// 30 keys. (The shell's own echo statistic attributes a key to the last state sent when it was
// typed, which reads early when the core batches keys; the screen cannot.)
import { sleep } from '../lib/helpers.mjs';

/// The `q` quantile of `xs` (nearest rank), null for none.
export const pct = (xs, q) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.round((s.length - 1) * q))];
};
export const summary = (xs) => ({ n: xs.length, median: pct(xs, 0.5), p90: pct(xs, 0.9), max: pct(xs, 1) });
export const fmt = (x) => (x == null ? '-' : x.toFixed(1));

/// A typist for `page`: `type(n)` times `n` keys, `type(0, whileFn)` times keys for as long as
/// `await whileFn()` is true; each returns the echo times in ms (a key whose echo never showed
/// within 5 s is left out). `newLine()` is for after the line was ended by other means (the
/// next key starts a fresh line of 30).
export function keyEcho(page) {
  let typed = 0;
  const type = async (n, whileFn) => {
    const samples = [];
    while (whileFn ? await whileFn() : samples.length < n) {
      const ms = await page.evaluate(async (i) => {
        const ch = String.fromCharCode(97 + (i % 26));
        const want = Array.from({ length: (i % 30) + 1 }, (_, k) => String.fromCharCode(97 + ((i - (i % 30) + k) % 26))).join('');
        const lastLine = () => window.tern.screenText().trimEnd().split('\n').at(-1);
        const t0 = performance.now();
        window.tern.term.input(ch, true);
        for (;;) {
          if (lastLine().endsWith(want)) return performance.now() - t0;
          if (performance.now() - t0 > 5000) return null;
          await new Promise((r) => setTimeout(r, 1));
        }
      }, typed);
      typed++;
      if (ms != null) samples.push(ms);
      if (typed % 30 === 0) {
        await page.evaluate(() => window.tern.term.input('\r', true));
        await sleep(300);
      }
      await sleep(150);
    }
    return samples;
  };
  const newLine = () => { typed = Math.ceil(typed / 30) * 30; };
  return { type, newLine };
}
