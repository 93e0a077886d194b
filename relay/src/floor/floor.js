// The floor (benchmark only, served when tern-relay runs with TERN_BENCH_FLOOR=1): the page's own
// xterm.js and stylesheet drawing a fixed prompt, with no wasm and no session. The load bench
// times it beside Tern's page: what is left between the two is Tern's own (docs/BENCHMARKS.md).
import { Terminal } from './xterm/xterm.mjs';
import { FitAddon } from './xterm/addon-fit.mjs';

performance.mark('tern:script');
// The options Tern's page starts with (its defaults), so xterm.js does the same work.
const term = new Terminal({ fontSize: 14, lineHeight: 1.1, scrollback: 1000 });
const fit = new FitAddon();
term.loadAddon(fit);
term.open(document.getElementById('terminal'));
fit.fit();
term.focus();
term.write('floor@tern:~$ ');
addEventListener('resize', () => fit.fit());
// What the bench's probe reads on Tern's page too.
window.tern = { term, renderer: 'dom', stats: () => ({}) };
