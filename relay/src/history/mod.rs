//! A session's history (the scrollback and search of everything a session printed): the lines a
//! program printed on the main screen, appended by the session's recorder ([`record`]), read and
//! searched by the relay for a page that scrolls back.
//!
//! Two files in the state directory, `<id>.history` (current) and `<id>.history.1` (previous),
//! one line each (a line is text with SGR escapes, `tern::terminal::HistoryLines`; it never holds
//! a newline, and is at most `tern::terminal::MAX_HISTORY_LINE_BYTES` plus its cut mark). When
//! the current file has `max_lines` lines, or the next line would take it past `max_bytes`, it
//! becomes the previous one (renamed over it) and a new current starts: the history always holds
//! at least the newest `max_lines` lines (unless they would take more than `max_bytes`), and at
//! most twice as many lines and bytes, with one rename and no copying. Lines are numbered from
//! the session's first (0); `<id>.history.base` holds the number of the previous file's first
//! line, written before each rotation, so numbers stay put while lines are dropped. Files are
//! 0600 (they are the session's output). A reader may catch the writer mid-line: a last line
//! without its newline is not read yet.
//!
//! The relay reads the files as streams, one line at a time, never a whole file: a page or a
//! search holds the lines it returns and one line more (each capped at [`MAX_READ_LINE`], even in
//! a file an older recorder wrote without a cap).

pub mod cast;
pub mod follow;
pub mod images;
pub mod record;

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::ops::Range;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use tern::relay_proto::{HistoryPage, HistorySearchResult, SearchHit};
use tern::terminal::{MAX_HISTORY_LINE_BYTES, SearchQuery, cut_mark, plain};

/// Bytes per history file by default: the history stays under twice this on disk.
pub const DEFAULT_MAX_BYTES: u64 = 32 * 1024 * 1024;

/// Longest line a reader returns: a recorded line with its cut mark fits; a longer one (from a
/// file written before lines were capped) is cut when read.
pub const MAX_READ_LINE: usize = MAX_HISTORY_LINE_BYTES + 64;

/// The files of session `id`'s history in `dir`.
struct Paths {
    current: PathBuf,
    previous: PathBuf,
    base: PathBuf,
}

fn paths(dir: &Path, id: &str) -> Paths {
    Paths {
        current: dir.join(format!("{id}.history")),
        previous: dir.join(format!("{id}.history.1")),
        base: dir.join(format!("{id}.history.base")),
    }
}

/// Whether `file_name` is one of a history's files, and whose (for pruning leftovers).
pub fn owner_of(file_name: &str) -> Option<&str> {
    [
        ".history",
        ".history.1",
        ".history.base",
        ".history.base.tmp",
        images::DIR_SUFFIX,
        cast::SUFFIX,
    ]
    .iter()
    .find_map(|suffix| file_name.strip_suffix(suffix))
}

/// Appends lines (the recorder's side).
#[derive(Debug)]
pub struct HistoryWriter {
    current: PathBuf,
    previous: PathBuf,
    base: PathBuf,
    file: File,
    /// Lines in the current file.
    lines: usize,
    /// Bytes in the current file.
    bytes: u64,
    /// Lines per file: the history's limit (at least 1).
    per_file: usize,
    /// Bytes per file.
    bytes_per_file: u64,
    /// The number the next line appended gets (lines are numbered from the session's first).
    next_line: u64,
}

impl HistoryWriter {
    /// Opens (creating, 0600) session `id`'s history, keeping at most `max_lines` lines and
    /// `max_bytes` bytes per file.
    pub fn open(
        dir: &Path,
        id: &str,
        max_lines: usize,
        max_bytes: u64,
    ) -> io::Result<HistoryWriter> {
        let Paths { current, previous, base } = paths(dir, id);
        let file = open_append(&current)?;
        let bytes = file.metadata()?.len();
        let lines = count_lines(&current)?;
        let next_line = read_base(&base) + count_lines(&previous)? as u64 + lines as u64;
        Ok(HistoryWriter {
            current,
            previous,
            base,
            file,
            lines,
            bytes,
            per_file: max_lines.max(1),
            bytes_per_file: max_bytes.max(1),
            next_line,
        })
    }

    /// The number the next line appended gets: the lines written so far, the dropped included.
    pub fn next_line(&self) -> u64 {
        self.next_line
    }

    /// Appends `lines`, starting a new file whenever the current one is full.
    pub fn append(&mut self, lines: &[String]) -> io::Result<()> {
        let mut buf = Vec::new();
        for line in lines {
            let size = line.len() as u64 + 1;
            let full = self.lines >= self.per_file
                || (self.lines > 0 && self.bytes + size > self.bytes_per_file);
            if full {
                self.file.write_all(&buf)?;
                buf.clear();
                self.rotate()?;
            }
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
            self.lines += 1;
            self.bytes += size;
            self.next_line += 1;
        }
        self.file.write_all(&buf)
    }

    fn rotate(&mut self) -> io::Result<()> {
        // The current file's first line becomes the previous file's: its number is the old base
        // plus the lines of the previous file now dropped.
        let dropped = count_lines(&self.previous)? as u64;
        let base = read_base(&self.base) + dropped;
        let tmp = self.base.with_extension("base.tmp");
        let mut f =
            OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        f.write_all(base.to_string().as_bytes())?;
        fs::rename(&tmp, &self.base)?;
        fs::rename(&self.current, &self.previous)?;
        self.file = open_append(&self.current)?;
        self.lines = 0;
        self.bytes = 0;
        Ok(())
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).mode(0o600).open(path)
}

/// Opens a history file for reading (`None` when it does not exist).
fn open_read(path: &Path) -> io::Result<Option<BufReader<File>>> {
    match File::open(path) {
        Ok(f) => Ok(Some(BufReader::with_capacity(64 * 1024, f))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Lines in a file, a last one without its newline included (the writer's count).
fn count_lines(path: &Path) -> io::Result<usize> {
    let Some(mut r) = open_read(path)? else { return Ok(0) };
    let (mut lines, mut open_line) = (0, false);
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(lines + usize::from(open_line));
        }
        let n = buf.len();
        lines += buf.iter().filter(|&&b| b == b'\n').count();
        open_line = buf[n - 1] != b'\n';
        r.consume(n);
    }
}

/// Complete lines in a file (a last line without its newline is still being written).
fn count_complete_lines(path: &Path) -> io::Result<u64> {
    let Some(mut r) = open_read(path)? else { return Ok(0) };
    let mut lines = 0u64;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(lines);
        }
        let n = buf.len();
        lines += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        r.consume(n);
    }
}

/// Reads one line into `out` (without its newline), keeping at most `cap` bytes of it and
/// skipping the rest; returns the bytes skipped, or `None` at the end of the file or before a
/// line that has no newline yet.
fn read_capped_line(
    r: &mut impl BufRead,
    cap: usize,
    out: &mut Vec<u8>,
) -> io::Result<Option<u64>> {
    out.clear();
    let mut skipped = 0u64;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(None);
        }
        let (chunk, found) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        let room = cap.saturating_sub(out.len()).min(chunk.len());
        out.extend_from_slice(&chunk[..room]);
        skipped += (chunk.len() - room) as u64;
        let used = chunk.len() + usize::from(found);
        r.consume(used);
        if found {
            return Ok(Some(skipped));
        }
    }
}

/// Calls `each(n, line)` for lines `range` of a file (numbered from 0), one at a time.
fn for_each_line(
    path: &Path,
    range: Range<u64>,
    mut each: impl FnMut(u64, String),
) -> io::Result<()> {
    if range.is_empty() {
        return Ok(());
    }
    let Some(mut r) = open_read(path)? else { return Ok(()) };
    let mut buf = Vec::new();
    let mut n = 0u64;
    while n < range.end {
        let keep = if n < range.start { 0 } else { MAX_READ_LINE };
        let Some(skipped) = read_capped_line(&mut r, keep, &mut buf)? else { break };
        if n >= range.start {
            let mut line = String::from_utf8_lossy(&buf).into_owned();
            if skipped > 0 {
                line.push_str(&cut_mark(skipped));
            }
            each(n, line);
        }
        n += 1;
    }
    Ok(())
}

/// The number of the previous file's first line (0 before the first rotation).
fn read_base(path: &Path) -> u64 {
    fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// Where a history's lines are: lines `first..first + previous` in the previous file, then
/// `current` lines in the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    first: u64,
    previous: u64,
    current: u64,
}

impl Layout {
    fn end(&self) -> u64 {
        self.first + self.previous + self.current
    }
}

/// Reads lines `range` (clamped to the history) of session `id`, oldest first, calling
/// `each(number, line)` for each; returns the history's layout. Memory: one line at a time.
fn read_lines(
    dir: &Path,
    id: &str,
    range: impl Fn(Layout) -> Range<u64>,
    mut each: impl FnMut(u64, String),
) -> io::Result<Layout> {
    let p = paths(dir, id);
    // A rotation while reading would shift the numbers: read again when the base moved.
    for _ in 0..3 {
        let first = read_base(&p.base);
        let layout = Layout {
            first,
            previous: count_complete_lines(&p.previous)?,
            current: count_complete_lines(&p.current)?,
        };
        if read_base(&p.base) != first {
            continue;
        }
        let want = range(layout);
        let want = want.start.max(first)..want.end.min(layout.end());
        let split = first + layout.previous;
        let mut got = Vec::new();
        let mut keep = |n: u64, line: String| got.push((n, line));
        let in_previous = want.start.min(split) - first..want.end.min(split) - first;
        for_each_line(&p.previous, in_previous, |n, l| keep(first + n, l))?;
        let in_current = want.start.max(split) - split..want.end.max(split) - split;
        for_each_line(&p.current, in_current, |n, l| keep(split + n, l))?;
        if read_base(&p.base) != first {
            continue;
        }
        for (n, line) in got {
            each(n, line);
        }
        return Ok(layout);
    }
    Err(io::Error::other("the history kept rotating while being read"))
}

/// Up to `count` lines before line `before` (the newest when `None`).
pub fn read_page(
    dir: &Path,
    id: &str,
    before: Option<u64>,
    count: usize,
) -> io::Result<HistoryPage> {
    let range = |l: Layout| {
        let stop = before.unwrap_or(l.end()).clamp(l.first, l.end());
        stop.saturating_sub(count as u64).max(l.first)..stop
    };
    let mut lines = Vec::new();
    let mut start = None;
    let layout = read_lines(dir, id, range, |n, line| {
        start.get_or_insert(n);
        lines.push(line);
    })?;
    let (first, end) = (layout.first, layout.end());
    let start = start.unwrap_or_else(|| range(layout).end);
    Ok(HistoryPage { first, end, start, lines })
}

/// Every match of `query` in session `id`'s history: the newest `max_hits`, oldest first.
pub fn search(
    dir: &Path,
    id: &str,
    query: &SearchQuery,
    max_hits: usize,
) -> io::Result<HistorySearchResult> {
    let p = paths(dir, id);
    // A rotation while reading would shift the numbers: search again when the base moved.
    for _ in 0..3 {
        let mut hits = std::collections::VecDeque::new();
        let mut total_hits = 0u64;
        let first = read_base(&p.base);
        let layout = Layout {
            first,
            previous: count_complete_lines(&p.previous)?,
            current: count_complete_lines(&p.current)?,
        };
        let split = first + layout.previous;
        let mut look = |n: u64, line: String| {
            let text = plain(&line);
            for (start, end) in query.find(&text) {
                total_hits += 1;
                if hits.len() == max_hits {
                    hits.pop_front();
                }
                hits.push_back(SearchHit { line: n, start: start as u32, end: end as u32 });
            }
        };
        for_each_line(&p.previous, 0..layout.previous, |n, l| look(first + n, l))?;
        for_each_line(&p.current, 0..layout.current, |n, l| look(split + n, l))?;
        if read_base(&p.base) != first {
            continue;
        }
        return Ok(HistorySearchResult {
            first,
            end: layout.end(),
            truncated: total_hits > hits.len() as u64,
            hits: hits.into(),
            total_hits,
        });
    }
    Err(io::Error::other("the history kept rotating while being searched"))
}

/// Removes session `id`'s history and recording (with the session).
pub fn remove(dir: &Path, id: &str) {
    let p = paths(dir, id);
    for f in [p.current, p.previous, p.base, cast::path_of(dir, id)] {
        let _ = fs::remove_file(f);
    }
    let _ = fs::remove_dir_all(images::dir_of(dir, id));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn lines(range: std::ops::RangeInclusive<usize>) -> Vec<String> {
        range.map(|i| format!("line {i}")).collect()
    }

    #[test]
    fn pages_come_newest_first_and_the_history_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = HistoryWriter::open(dir.path(), "abc", 10, DEFAULT_MAX_BYTES).unwrap();
        w.append(&lines(1..=3)).unwrap();
        let page = read_page(dir.path(), "abc", None, 2).unwrap();
        let want = HistoryPage { first: 0, end: 3, start: 1, lines: lines(2..=3) };
        assert_eq!(page, want);
        w.append(&lines(4..=23)).unwrap();
        let all = read_page(dir.path(), "abc", None, 100).unwrap();
        // At least the limit and at most twice it, the newest, in order, numbered from the first
        // ever (line N has number N - 1).
        assert_eq!(all.end, 23);
        assert!((10..=20).contains(&(all.end - all.first)), "{all:?}");
        assert_eq!(all.start, all.first);
        assert_eq!(all.lines, lines(all.first as usize + 1..=23));
        let page = read_page(dir.path(), "abc", Some(20), 2).unwrap();
        assert_eq!((page.start, page.lines), (18, lines(19..=20)));
        // Asking before the first kept line gives nothing, not an error.
        assert!(read_page(dir.path(), "abc", Some(1), 5).unwrap().lines.is_empty());
        for f in ["abc.history", "abc.history.1", "abc.history.base"] {
            let mode = fs::metadata(dir.path().join(f)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{f}");
        }
        remove(dir.path(), "abc");
        assert_eq!(read_page(dir.path(), "abc", None, 10).unwrap().end, 0);
        assert!(fs::read_dir(dir.path()).unwrap().next().is_none(), "every file removed");
    }

    #[test]
    fn a_line_being_written_is_not_read_and_a_reopened_writer_counts_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = HistoryWriter::open(dir.path(), "s", 100, DEFAULT_MAX_BYTES).unwrap();
        w.append(&lines(1..=2)).unwrap();
        // The writer caught mid-line.
        let mut f = open_append(&dir.path().join("s.history")).unwrap();
        f.write_all(b"half a li").unwrap();
        assert_eq!(read_page(dir.path(), "s", None, 10).unwrap().lines, lines(1..=2));
        drop(w);
        let w = HistoryWriter::open(dir.path(), "s", 100, DEFAULT_MAX_BYTES).unwrap();
        assert_eq!(w.lines, 3, "the partial line counts as one when reopened");
    }

    #[test]
    fn a_search_numbers_its_matches_and_keeps_the_newest_when_there_are_too_many() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = HistoryWriter::open(dir.path(), "s", 1000, DEFAULT_MAX_BYTES).unwrap();
        w.append(&lines(1..=300)).unwrap();
        w.append(&["\x1b[0;31mred\x1b[0m Line 7".to_string()]).unwrap();
        let q = SearchQuery::new("line 7", false, false).unwrap();
        let r = search(dir.path(), "s", &q, 100).unwrap();
        // "line 7", "line 70".."line 79", "line 700"-less: 1 + 10 + the coloured one.
        assert_eq!(r.total_hits, 12);
        assert!(!r.truncated);
        assert_eq!(r.hits[0], SearchHit { line: 6, start: 0, end: 6 });
        assert_eq!(r.hits[11], SearchHit { line: 300, start: 4, end: 10 }, "offsets skip escapes");
        let few = search(dir.path(), "s", &q, 2).unwrap();
        assert!(few.truncated);
        assert_eq!(few.hits.iter().map(|h| h.line).collect::<Vec<_>>(), [78, 300]);
    }

    #[test]
    fn files_rotate_on_bytes_too_and_long_lines_are_cut_when_read() {
        let dir = tempfile::tempdir().unwrap();
        // 1000 bytes per file, lines of 100 bytes (with the newline): 10 lines a file.
        let mut w = HistoryWriter::open(dir.path(), "s", 1_000_000, 1000).unwrap();
        let line = |i: usize| format!("{i:>99}");
        w.append(&(0..35).map(line).collect::<Vec<_>>()).unwrap();
        let size = |f: &str| fs::metadata(dir.path().join(f)).unwrap().len();
        assert!(size("s.history") <= 1000 && size("s.history.1") <= 1000);
        let all = read_page(dir.path(), "s", None, 100).unwrap();
        assert_eq!((all.first, all.end, all.start), (20, 35, 20));
        assert_eq!(all.lines, (20..35).map(line).collect::<Vec<_>>());
        let page = read_page(dir.path(), "s", Some(32), 5).unwrap();
        assert_eq!((page.start, page.lines), (27, (27..32).map(line).collect::<Vec<_>>()));

        // A file from a recorder without the line cap: a huge line is cut when read, and a
        // page or a search around it still works.
        let mut f = open_append(&dir.path().join("s.history")).unwrap();
        f.write_all(&vec![b'z'; 3 * MAX_READ_LINE]).unwrap();
        f.write_all(b"\nafter\n").unwrap();
        let page = read_page(dir.path(), "s", None, 2).unwrap();
        let cut = 3 * MAX_READ_LINE - MAX_READ_LINE;
        assert_eq!(page.lines[0], format!("{}{}", "z".repeat(MAX_READ_LINE), cut_mark(cut as u64)));
        assert_eq!(page.lines[1], "after");
        let q = SearchQuery::new("after", false, false).unwrap();
        assert_eq!(search(dir.path(), "s", &q, 10).unwrap().hits[0].line, 36);
    }

    #[test]
    fn leftover_files_name_their_session() {
        assert_eq!(owner_of("ab12.history"), Some("ab12"));
        assert_eq!(owner_of("ab12.history.1"), Some("ab12"));
        assert_eq!(owner_of("ab12.history.base"), Some("ab12"));
        assert_eq!(owner_of("ab12.cast"), Some("ab12"));
        assert_eq!(owner_of("ab12.shadow"), None);
    }
}
