// Folds the page's own modules (www/settings.js, keys.js, ...) into app.js for relay/page, so that
// a first visit fetches one script of ours instead of nine: on two loaded cores every request
// costs the browser CPU the shell's start waits behind (docs/BENCHMARKS.md, "Page load").
//
//   node scripts/bundle-page.mjs DIST
//
// The modules stay separate in www/ (one job each). What this relies on, checked here: only
// app.js imports them; they import nothing themselves; they export with `export function`,
// `export async function`, `export class` or `export const` at the start of a line. Each module
// becomes a function scope (its top-level names stay its own) whose exports app.js destructures
// where its `import { ... } from './x.js'` line was. xterm.js and the wasm glue stay modules of
// their own (fetched in parallel, cached separately). index.html loses the folded modules'
// modulepreload links. The shipped app.js, pkg/tern.js and sw.js lose their comment lines
// (scripts/strip-comments.mjs), app.js and pkg/tern.js are minified (terser), index.html and
// style.css lose their comments. Anything unexpected fails the build, loudly.
import { readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { minify } from 'terser';
import { stripComments } from './strip-comments.mjs';

const dist = process.argv[2];
if (!dist) throw new Error('usage: node scripts/bundle-page.mjs DIST');
const fail = (why) => { console.error(`[bundle-page] ERROR: ${why}`); process.exit(1); };

const appPath = join(dist, 'app.js');
let app = readFileSync(appPath, 'utf8');
const importLine = /^import \{([^}]*)\} from '\.\/([a-z_-]+\.js)';\n/gm;
const folded = [];
app = app.replace(importLine, (_, names, file) => {
  const source = readFileSync(join(dist, file), 'utf8');
  if (/^\s*import\b/m.test(source) || /\bimport\(/.test(source)) fail(`${file} imports something: fold it by hand or keep it a module`);
  const exported = [];
  const body = source.replace(/^export (async function|function|class|const) ([A-Za-z_$][\w$]*)/gm, (m, kind, name) => {
    exported.push(name);
    return `${kind} ${name}`;
  });
  if (/^export\b/m.test(body)) fail(`${file} exports in a form this script does not fold`);
  const wanted = names.split(',').map((n) => n.trim()).filter(Boolean);
  for (const n of wanted) {
    if (!exported.includes(n)) fail(`app.js imports ${n} from ${file}, which does not export it`);
  }
  folded.push(file);
  const scope = `__${file.replace(/\W/g, '_')}`;
  return `// ${file}, folded in by scripts/bundle-page.mjs\n` +
    `const ${scope} = (() => {\n${body}\nreturn { ${exported.join(', ')} };\n})();\n` +
    `const { ${wanted.join(', ')} } = ${scope};\n`;
});
if (!folded.length) fail('app.js imports none of the page modules: nothing to fold (did its imports change form?)');
// The shipped scripts without their comments (the sources keep them): a third of app.js's bytes.
const strip = (file, source) => {
  try {
    return stripComments(source, file);
  } catch (e) {
    fail(e.message);
  }
};
// app.js and the wasm glue minified besides (terser: names inside their module scopes shortened,
// whitespace gone; property names, strings and exports kept, so `window.tern`, the wasm's imports
// and the file names scripts/hash-page.mjs rewrites stay as they are): 10 KB less brotli on a
// first visit (docs/BENCHMARKS.md, "The early greet"). sw.js stays readable: hash-page.mjs fills
// its lists by their lines.
const minified = async (file, source) => {
  const out = await minify(source, { module: true, ecma: 2020, compress: { passes: 2 }, mangle: true, format: { comments: false } })
    .catch((e) => fail(`${file}: terser: ${e.message}`));
  if (!out?.code) fail(`${file}: terser returned nothing`);
  return out.code;
};
writeFileSync(appPath, await minified('app.js', strip('app.js', app)));
writeFileSync(join(dist, 'pkg/tern.js'), await minified('pkg/tern.js', strip('pkg/tern.js', readFileSync(join(dist, 'pkg/tern.js'), 'utf8'))));
writeFileSync(join(dist, 'sw.js'), strip('sw.js', readFileSync(join(dist, 'sw.js'), 'utf8')));
for (const f of folded) rmSync(join(dist, f));

const indexPath = join(dist, 'index.html');
let index = readFileSync(indexPath, 'utf8');
for (const f of folded) index = index.replace(new RegExp(`<link rel="modulepreload" href="${f.replace('.', '\\.')}">\\n`), '');
// The shipped document without its comments (www/index.html keeps them): a first visit fetches it
// twice (the page, the worker's install), and the bytes pay for the early WebTransport link
// (issue 36). Whole comments only, each with the line break after it; one left open fails.
index = index.replace(/^[ \t]*<!--[\s\S]*?-->[ \t]*\n/gm, '');
if (index.includes('<!--')) fail('index.html: a comment that is not on lines of its own (or is never closed)');
// The inline script (the early link's) minified as a classic script; the relay allows it by the
// SHA-256 of what ships (relay/src/assets.rs inline_script_hashes), so any rewrite here is fine.
const inline = [...index.matchAll(/<script>\n([\s\S]*?)<\/script>/g)];
if (inline.length !== 1) fail(`index.html: ${inline.length} inline scripts, expected the early link's alone`);
for (const [whole, source] of inline) {
  const out = await minify(source, { module: false, ecma: 2020, compress: { passes: 2 }, mangle: true, format: { comments: false } })
    .catch((e) => fail(`index.html's inline script: terser: ${e.message}`));
  if (!out?.code) fail("index.html's inline script: terser returned nothing");
  index = index.replace(whole, () => `<script>${out.code}</script>`);
}
writeFileSync(indexPath, index);
// The shipped stylesheet without its comments (www/style.css keeps them): a third of its brotli
// bytes (6.2 KB -> 4.2 KB). No string in it holds `/*` (checked: one left after fails).
const stylePath = join(dist, 'style.css');
const style = readFileSync(stylePath, 'utf8').replace(/\/\*[\s\S]*?\*\/[ \t]*\n?/g, '');
if (style.includes('/*') || style.includes('*/')) fail('style.css: a comment left after stripping (one in a string?)');
writeFileSync(stylePath, style);
console.log(`[bundle-page] folded ${folded.join(', ')} into app.js`);
