// Gives the page's files content-hashed names and compressed variants, in relay/page, after
// scripts/bundle-page.mjs:
//
//   node scripts/hash-page.mjs DIST
//
// Names: every file but the stable ones below becomes `name.<8 hex of its sha-256>.ext`
// (`app.3f9a1c2b.js`, `pkg/tern_bg.0c1d2e3f.wasm`), and each reference to it in another file
// (`'./xterm/xterm.mjs'`, `new URL('tern_bg.wasm', …)`, `href="style.css"`) is rewritten. A file is
// hashed after the files it names, so its hash covers its references: a new wasm gives tern.js,
// app.js and index.html new contents. The relay serves a hashed name as immutable (a year,
// `immutable`, relay/src/assets.rs), so a repeat visit never asks for it again.
// Stable names: index.html (the document: its URL is the page's) and sw.js (a service worker's URL
// is its identity); they revalidate with an ETag. The manifest and the icons are hashed too (the
// page links the manifest, which names the icons; an installed app is known by its start_url):
// the browser fetches its favicon and the manifest itself, not through the service worker, and an
// immutable file it does not ask for again.
//
// Variants: each compressible file gets `FILE.br` (brotli, quality 11) and `FILE.gz` (gzip -9)
// beside it when smaller; the relay picks one by Accept-Encoding. PNGs are compressed already.
// Both variants are decompressed here and compared with the file: a wrong one fails the build.
import { readFileSync, writeFileSync, renameSync, readdirSync, statSync } from 'node:fs';
import { join, dirname, relative, posix } from 'node:path';
import { createHash } from 'node:crypto';
import zlib from 'node:zlib';

const dist = process.argv[2];
if (!dist) throw new Error('usage: node scripts/hash-page.mjs DIST');
const fail = (why) => { console.error(`[hash-page] ERROR: ${why}`); process.exit(1); };

const STABLE = new Set(['index.html', 'sw.js']);
const COMPRESSIBLE = /\.(html|js|mjs|css|wasm|svg|webmanifest|json)$/;
// What may name another file: text. A wasm module names nothing.
const TEXT = /\.(html|js|mjs|css|webmanifest|json)$/;

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? walk(p) : [relative(dist, p).split('\\').join('/')];
  });
}

const files = walk(dist);
if (files.some((f) => /\.(br|gz)$/.test(f))) fail(`${dist} has compressed files already: run on a fresh build`);
const hashed = files.filter((f) => !STABLE.has(f));
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
// A reference as the files write one: quoted, or in url(), with or without `./`.
const refPattern = (rel) => new RegExp(`(['"(])(\\./)?${escape(rel)}(['")])`, 'g');
const relFrom = (from, to) => posix.relative(posix.dirname(from), to);

const contents = new Map(files.map((f) => [f, readFileSync(join(dist, f))]));
const dependsOn = (f, g) => TEXT.test(f) && f !== g && refPattern(relFrom(f, g)).test(contents.get(f).toString('utf8'));

// Depth-first: a file's references are named before its own hash is taken.
const newName = new Map();
const visiting = new Set();
function settle(f) {
  if (newName.has(f)) return;
  if (visiting.has(f)) fail(`files name each other in a cycle through ${f}`);
  visiting.add(f);
  const deps = hashed.filter((g) => dependsOn(f, g));
  deps.forEach(settle);
  if (deps.length) {
    let text = contents.get(f).toString('utf8');
    for (const g of deps) {
      text = text.replace(refPattern(relFrom(f, g)), (_, open, dot = '', close) => `${open}${dot}${relFrom(f, newName.get(g))}${close}`);
    }
    contents.set(f, Buffer.from(text));
  }
  visiting.delete(f);
  if (STABLE.has(f)) { newName.set(f, f); return; }
  const hash = createHash('sha256').update(contents.get(f)).digest('hex').slice(0, 8);
  const dot = f.lastIndexOf('.');
  newName.set(f, `${f.slice(0, dot)}.${hash}${f.slice(dot)}`);
}
files.forEach(settle);

for (const f of files) {
  writeFileSync(join(dist, f), contents.get(f));
  if (newName.get(f) !== f) renameSync(join(dist, f), join(dist, newName.get(f)));
}

// The service worker's lists, written into sw.js (so a new page is a new worker too). PRECACHE:
// what every visit needs, fetched at install (from the HTTP cache: the page just loaded them).
// ON_DEMAND: what only some browsers fetch, kept once fetched and never fetched for the cache:
// the WebGL addon (31 KB), which a page on the DOM renderer (software WebGL: SwiftShader,
// llvmpipe) never loads. The PNGs are in neither: only an installing browser asks for them, itself.
const ON_DEMAND = /^xterm\/addon-webgl\./;
const listed = hashed.map((f) => newName.get(f)).filter((f) => !f.endsWith('.png')).sort();
const precache = listed.filter((f) => !ON_DEMAND.test(f));
const onDemand = listed.filter((f) => ON_DEMAND.test(f));
const swPath = join(dist, 'sw.js');
let sw = readFileSync(swPath, 'utf8');
for (const [line, list] of [['const PRECACHE = [];', precache], ['const ON_DEMAND = [];', onDemand]]) {
  if (!sw.includes(line)) fail(`sw.js has no \`${line}\` line to fill`);
  sw = sw.replace(line, line.replace('[]', JSON.stringify(list)));
}
writeFileSync(swPath, sw);

// The document names only files that exist.
const index = readFileSync(join(dist, 'index.html'), 'utf8');
for (const [, ref] of index.matchAll(/(?:href|src)="([^"#:]+)"/g)) {
  if (!contents.has(ref) && ![...newName.values()].includes(ref)) fail(`index.html names ${ref}, which is not in ${dist}`);
  if (hashed.includes(ref)) fail(`index.html still names ${ref} by its unhashed name`);
}

let raw = 0, br = 0, gz = 0;
for (const f of walk(dist)) {
  const bytes = readFileSync(join(dist, f));
  raw += bytes.length;
  if (!COMPRESSIBLE.test(f)) { br += bytes.length; gz += bytes.length; continue; }
  const b = zlib.brotliCompressSync(bytes, {
    params: {
      [zlib.constants.BROTLI_PARAM_QUALITY]: 11,
      [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length,
      [zlib.constants.BROTLI_PARAM_MODE]: f.endsWith('.wasm') ? zlib.constants.BROTLI_MODE_GENERIC : zlib.constants.BROTLI_MODE_TEXT,
    },
  });
  const g = zlib.gzipSync(bytes, { level: 9 });
  if (!zlib.brotliDecompressSync(b).equals(bytes) || !zlib.gunzipSync(g).equals(bytes)) fail(`${f}: a variant does not decompress to the file`);
  // A variant no smaller is not worth a header.
  if (b.length < bytes.length) writeFileSync(join(dist, `${f}.br`), b);
  if (g.length < bytes.length) writeFileSync(join(dist, `${f}.gz`), g);
  br += Math.min(b.length, bytes.length);
  gz += Math.min(g.length, bytes.length);
}
const kb = (n) => `${(n / 1024).toFixed(0)} KB`;
console.log(`[hash-page] ${listed.length} hashed names; whole page ${kb(raw)}, brotli ${kb(br)}, gzip ${kb(gz)}`);
