// Drops the comment-only lines (`//` and `/* */`), blank lines and leading indentation of a JavaScript file, for the
// page's own scripts as they are shipped (scripts/bundle-page.mjs): the sources in www/ keep every
// comment, the browser gets none of them. A third of app.js's bytes were comments: 10 KB of brotli
// on a first visit (docs/BENCHMARKS.md, "Bytes on the wire").
//
// Only whole lines go: a line is dropped or unindented only when it starts outside any string,
// template literal, regular expression or block comment, which a small scanner tracks (it knows
// strings, templates with `${}` nesting, comments, and tells a regular expression from a division
// by the token before it). Code on a line is never touched, so a scanner mistake can only keep a
// line it could have dropped, or drop a `//` line inside a template literal: the scanner must end
// where it began (outside everything, no open `${`), else this throws and the build fails.
export function stripComments(source, what = 'script') {
  const lines = source.split('\n');
  const out = [];
  const state = { mode: 'code', stack: [], prev: '' };
  for (const line of lines) {
    const start = state.mode;
    const code = scanLine(line, state, what);
    // Inside a string or template literal the line is the string's: kept as it is.
    if (start !== 'code' && start !== 'block') out.push(line);
    else if (code) out.push(start === 'code' ? line.trimStart() : line);
  }
  if (state.mode !== 'code' || state.stack.length) throw new Error(`${what}: the comment scanner ended inside ${state.mode} (${state.stack.length} open \${}): not stripped`);
  return out.join('\n');
}

// Words after which a `/` starts a regular expression (else it divides).
const REGEX_AFTER_WORD = new Set(['return', 'typeof', 'case', 'do', 'else', 'in', 'of', 'new', 'delete', 'void', 'throw', 'instanceof', 'yield', 'await']);

/// Moves `state` across one line (plus its newline); whether the line holds anything but comments
/// and white space.
function scanLine(line, state, what) {
  let code = false;
  let i = 0;
  const n = line.length;
  while (i < n) {
    const c = line[i];
    switch (state.mode) {
      case 'block':
        if (c === '*' && line[i + 1] === '/') { state.mode = 'code'; i += 2; continue; }
        i++;
        continue;
      case 'code': break;
      default: code = true;
    }
    switch (state.mode) {
      case 'single':
      case 'double': {
        const q = state.mode === 'single' ? "'" : '"';
        if (c === '\\') { i += 2; continue; }
        if (c === q) { state.mode = 'code'; state.prev = 'value'; }
        i++;
        continue;
      }
      case 'template':
        if (c === '\\') { i += 2; continue; }
        if (c === '`') { state.mode = 'code'; state.prev = 'value'; i++; continue; }
        if (c === '$' && line[i + 1] === '{') { state.stack.push('template'); state.mode = 'code'; state.prev = '('; i += 2; continue; }
        i++;
        continue;
      case 'regex': {
        if (c === '\\') { i += 2; continue; }
        if (c === '[') state.inClass = true;
        else if (c === ']') state.inClass = false;
        else if (c === '/' && !state.inClass) { state.mode = 'code'; state.prev = 'value'; }
        i++;
        continue;
      }
      default: break;
    }
    // Code.
    if (c === ' ' || c === '\t' || c === '\r') { i++; continue; }
    if (c === '/' && line[i + 1] === '/') return code; // the rest of the line is a comment
    if (c === '/' && line[i + 1] === '*') { state.mode = 'block'; i += 2; continue; }
    code = true;
    if (c === "'") { state.mode = 'single'; i++; continue; }
    if (c === '"') { state.mode = 'double'; i++; continue; }
    if (c === '`') { state.mode = 'template'; i++; continue; }
    if (c === '{') { state.stack.push('code'); state.prev = '('; i++; continue; }
    if (c === '}') {
      const was = state.stack.pop();
      if (was === undefined) throw new Error(`${what}: unbalanced } in ${JSON.stringify(line)}`);
      if (was === 'template') state.mode = 'template';
      else state.prev = '}';
      i++;
      continue;
    }
    if (c === '/') {
      // A regular expression where a value cannot end: at the start, after an operator or an
      // opening bracket, after a keyword like `return`; a division after a value.
      const regex = state.prev === '' || state.prev === '(' || state.prev === 'op' || state.prev === '}' ||
        (state.prev.startsWith('word:') && REGEX_AFTER_WORD.has(state.prev.slice(5)));
      if (regex) { state.mode = 'regex'; state.inClass = false; i++; continue; }
      state.prev = 'op';
      i++;
      continue;
    }
    if (/[A-Za-z_$0-9]/.test(c)) {
      let j = i;
      while (j < n && /[A-Za-z_$0-9]/.test(line[j])) j++;
      const word = line.slice(i, j);
      state.prev = /^[0-9]/.test(word) ? 'value' : `word:${word}`;
      i = j;
      continue;
    }
    if (c === ')' || c === ']') { state.prev = 'value'; i++; continue; }
    if (c === '(' || c === '[') { state.prev = '('; i++; continue; }
    if (c === '.' && /[A-Za-z_$]/.test(line[i + 1] ?? '')) { state.prev = 'op'; i++; continue; }
    // `x++ / y` is rare enough; any other punctuation is an operator.
    state.prev = 'op';
    i++;
  }
  return code;
}
