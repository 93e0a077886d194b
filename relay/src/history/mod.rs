//! A session's history (the scrollback and search of everything a session printed): the lines a
//! program printed on the main screen, appended by the session's recorder ([`record`]), read and
//! searched by the relay for a page that scrolls back.
//!
//! Two files in the state directory, `<id>.history` (current) and `<id>.history.1` (previous),
//! one line each (a line is text with SGR escapes, `tern::terminal::HistoryLines`; it never holds
//! a newline). When the current file has `max_lines`, it becomes the previous one (renamed over
//! it) and a new current starts: the history always holds at least the newest `max_lines` lines
//! (and at most twice as many), with one rename and no copying. Lines are numbered from the
//! session's first (0); `<id>.history.base` holds the number of the previous file's first line,
//! written before each rotation, so numbers stay put while lines are dropped. Files are 0600
//! (they are the session's output). A reader may catch the writer mid-line: a last line without
//! its newline is not read yet.

pub mod record;

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use tern::relay_proto::{HistoryPage, HistorySearchResult, SearchHit};
use tern::terminal::SearchQuery;
use tern::terminal::plain;

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
    [".history", ".history.1", ".history.base", ".history.base.tmp"]
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
    /// Lines per file: the history's limit (at least 1).
    per_file: usize,
}

impl HistoryWriter {
    /// Opens (creating, 0600) session `id`'s history, keeping at most `max_lines` lines.
    pub fn open(dir: &Path, id: &str, max_lines: usize) -> io::Result<HistoryWriter> {
        let Paths { current, previous, base } = paths(dir, id);
        let file = open_append(&current)?;
        let lines = count_lines(&current)?;
        Ok(HistoryWriter { current, previous, base, file, lines, per_file: max_lines.max(1) })
    }

    /// Appends `lines`, starting a new file whenever the current one is full.
    pub fn append(&mut self, lines: &[String]) -> io::Result<()> {
        let mut buf = Vec::new();
        for line in lines {
            if self.lines >= self.per_file {
                self.file.write_all(&buf)?;
                buf.clear();
                self.rotate()?;
            }
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
            self.lines += 1;
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
        Ok(())
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).mode(0o600).open(path)
}

fn count_lines(path: &Path) -> io::Result<usize> {
    match File::open(path) {
        Ok(f) => Ok(BufReader::new(f).split(b'\n').count()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// The number of the previous file's first line (0 before the first rotation).
fn read_base(path: &Path) -> u64 {
    fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// The complete lines of a file, oldest first (none when it does not exist).
fn read_lines(path: &Path) -> io::Result<Vec<String>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    // Up to the last newline: what comes after it is a line still being written.
    let Some(last) = bytes.iter().rposition(|&b| b == b'\n') else { return Ok(Vec::new()) };
    Ok(bytes[..last]
        .split(|&b| b == b'\n')
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect())
}

/// The whole history as it is now: lines `first..first + lines.len()`, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub first: u64,
    pub lines: Vec<String>,
}

impl Snapshot {
    /// One past the newest line's number.
    pub fn end(&self) -> u64 {
        self.first + self.lines.len() as u64
    }
}

/// Reads session `id`'s history (the relay's side).
pub fn read(dir: &Path, id: &str) -> io::Result<Snapshot> {
    let p = paths(dir, id);
    // A rotation between the reads would shift the numbers: read again when the base moved.
    for _ in 0..3 {
        let base = read_base(&p.base);
        let newer = read_lines(&p.current)?;
        let mut lines = read_lines(&p.previous)?;
        if read_base(&p.base) != base {
            continue;
        }
        lines.extend(newer);
        return Ok(Snapshot { first: base, lines });
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
    let snap = read(dir, id)?;
    let (first, end) = (snap.first, snap.end());
    let stop = before.unwrap_or(end).clamp(first, end);
    let start = stop.saturating_sub(count as u64).max(first);
    let lines = snap.lines[(start - first) as usize..(stop - first) as usize].to_vec();
    Ok(HistoryPage { first, end, start, lines })
}

/// Every match of `query` in session `id`'s history: the newest `max_hits`, oldest first.
pub fn search(
    dir: &Path,
    id: &str,
    query: &SearchQuery,
    max_hits: usize,
) -> io::Result<HistorySearchResult> {
    let snap = read(dir, id)?;
    let mut hits = std::collections::VecDeque::new();
    let mut total_hits = 0u64;
    for (i, line) in snap.lines.iter().enumerate() {
        let text = plain(line);
        for (start, end) in query.find(&text) {
            total_hits += 1;
            if hits.len() == max_hits {
                hits.pop_front();
            }
            hits.push_back(SearchHit {
                line: snap.first + i as u64,
                start: start as u32,
                end: end as u32,
            });
        }
    }
    Ok(HistorySearchResult {
        first: snap.first,
        end: snap.end(),
        truncated: total_hits > hits.len() as u64,
        hits: hits.into(),
        total_hits,
    })
}

/// Removes session `id`'s history (with the session).
pub fn remove(dir: &Path, id: &str) {
    let p = paths(dir, id);
    for f in [p.current, p.previous, p.base] {
        let _ = fs::remove_file(f);
    }
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
        let mut w = HistoryWriter::open(dir.path(), "abc", 10).unwrap();
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
        let mut w = HistoryWriter::open(dir.path(), "s", 100).unwrap();
        w.append(&lines(1..=2)).unwrap();
        // The writer caught mid-line.
        let mut f = open_append(&dir.path().join("s.history")).unwrap();
        f.write_all(b"half a li").unwrap();
        assert_eq!(read_page(dir.path(), "s", None, 10).unwrap().lines, lines(1..=2));
        drop(w);
        let w = HistoryWriter::open(dir.path(), "s", 100).unwrap();
        assert_eq!(w.lines, 3, "the partial line counts as one when reopened");
    }

    #[test]
    fn a_search_numbers_its_matches_and_keeps_the_newest_when_there_are_too_many() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = HistoryWriter::open(dir.path(), "s", 1000).unwrap();
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
    fn leftover_files_name_their_session() {
        assert_eq!(owner_of("ab12.history"), Some("ab12"));
        assert_eq!(owner_of("ab12.history.1"), Some("ab12"));
        assert_eq!(owner_of("ab12.history.base"), Some("ab12"));
        assert_eq!(owner_of("ab12.shadow"), None);
    }
}
