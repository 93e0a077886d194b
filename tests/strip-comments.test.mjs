// scripts/strip-comments.mjs: the shipped scripts lose their comment lines, never a line of a string
// or template literal, and the page's own modules still parse once stripped.
//   node --test tests/strip-comments.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { execFileSync } from 'node:child_process';
import { stripComments } from '../scripts/strip-comments.mjs';

test('comment lines, block comments, blank lines and indentation go; code stays', () => {
  const src = [
    '// a comment',
    '/**',
    ' * JSDoc',
    ' */',
    'export function f(a, b) {',
    '',
    '    // inside',
    '    return a / b; // kept: code before it',
    '}',
    '/* one line */',
    'const x = /* inline */ 1;',
  ].join('\n');
  assert.equal(stripComments(src), [
    'export function f(a, b) {',
    'return a / b; // kept: code before it',
    '}',
    'const x = /* inline */ 1;',
  ].join('\n'));
});

test('a template literal keeps its lines as they are, its comment-like lines and blanks too', () => {
  const src = [
    'const t = `first',
    '  // not a comment: text',
    '',
    '  ${a ? `nested ${b}` : "x"} // still text',
    '`;',
    '  // a comment again',
    'go(t);',
  ].join('\n');
  assert.equal(stripComments(src), [
    'const t = `first',
    '  // not a comment: text',
    '',
    '  ${a ? `nested ${b}` : "x"} // still text',
    '`;',
    'go(t);',
  ].join('\n'));
});

test('strings and regular expressions that hold comment marks or quotes do not confuse it', () => {
  const src = [
    "const url = 'http://example'; const q = \"'\";",
    'const re = /[\'"`]\\/\\//g; const half = n / 2 / 1;',
    'if (ok) return /x\\/*y/.test(s);',
    "const tick = { '~': '`' };",
    '// dropped',
    'const t = `a`;',
  ].join('\n');
  const out = stripComments(src).split('\n');
  assert.equal(out.length, 5, out.join('\n'));
  assert.ok(!out.includes('// dropped'));
});

test('a scanner lost inside a string or template fails loudly instead of guessing', () => {
  assert.throws(() => stripComments('const t = `open\n// line\n', 'x.js'), /x\.js: the comment scanner ended inside template/);
  assert.throws(() => stripComments('f(() => {\n', 'y.js'), /ended inside code \(1 open/);
});

test("the page's own modules parse once stripped, and are smaller", () => {
  const dir = mkdtempSync(join(tmpdir(), 'tern-strip-'));
  try {
    const www = new URL('../www/', import.meta.url).pathname;
    for (const f of readdirSync(www).filter((f) => f.endsWith('.js'))) {
      const src = readFileSync(join(www, f), 'utf8');
      const out = stripComments(src, f);
      assert.ok(out.length < src.length * 0.9, `${f}: ${src.length} → ${out.length}`);
      // Every line shipped is a line of the source (unindented), in order.
      const lines = src.split('\n').map((l) => l.trimStart());
      let at = 0;
      for (const l of out.split('\n')) {
        const i = lines.indexOf(l, at);
        assert.ok(i >= 0, `${f}: ${JSON.stringify(l)} is no line of the source`);
        at = i + 1;
      }
      const file = join(dir, f.replace(/\.js$/, '.mjs'));
      writeFileSync(file, out);
      execFileSync(process.execPath, ['--check', file]);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
