//! A session's history on disk (issue 14): the lines a program printed on the main screen, appended
//! by the session's recorder, read newest first by the relay for a page that scrolls back.
//!
//! Two files in the state directory, `<id>.history` (current) and `<id>.history.1` (previous),
//! one line each (a line is text with SGR escapes, `tern::terminal::HistoryLines`; it never holds a
//! newline). When the current file has half the limit, it becomes the previous one (renamed over
//! it) and a new current starts: the history keeps between half and all of `max_lines`, with one
//! rename and no copying. Files are 0600 (they are the session's output). A reader may catch the
//! writer mid-line: a last line without its newline is not read yet.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The two files of session `id`'s history in `dir`: (current, previous).
fn paths(dir: &Path, id: &str) -> (PathBuf, PathBuf) {
    (dir.join(format!("{id}.history")), dir.join(format!("{id}.history.1")))
}

/// Appends lines (the recorder's side).
#[derive(Debug)]
pub struct HistoryWriter {
    current: PathBuf,
    previous: PathBuf,
    file: File,
    /// Lines in the current file.
    lines: usize,
    /// Lines per file: half the history's limit (at least 1).
    half: usize,
}

impl HistoryWriter {
    /// Opens (creating, 0600) session `id`'s history, keeping at most `max_lines` lines.
    pub fn open(dir: &Path, id: &str, max_lines: usize) -> io::Result<HistoryWriter> {
        let (current, previous) = paths(dir, id);
        let file = open_append(&current)?;
        let lines = count_lines(&current)?;
        Ok(HistoryWriter { current, previous, file, lines, half: (max_lines / 2).max(1) })
    }

    /// Appends `lines`, starting a new file whenever the current one is full.
    pub fn append(&mut self, lines: &[String]) -> io::Result<()> {
        let mut buf = Vec::new();
        for line in lines {
            if self.lines >= self.half {
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

/// One page of history, newest first: up to `count` lines after skipping the `skip` newest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryPage {
    pub lines: Vec<String>,
    /// Lines in the whole history now.
    pub total: usize,
}

/// Reads a page of session `id`'s history (the relay's side).
pub fn read_page(dir: &Path, id: &str, skip: usize, count: usize) -> io::Result<HistoryPage> {
    let (current, previous) = paths(dir, id);
    // Current first: a rotation between the two reads then only loses the page's oldest lines.
    let newer = read_lines(&current)?;
    let older = read_lines(&previous)?;
    let total = older.len() + newer.len();
    let lines =
        newer.iter().rev().chain(older.iter().rev()).skip(skip).take(count).cloned().collect();
    Ok(HistoryPage { lines, total })
}

/// Removes session `id`'s history (with the session).
pub fn remove(dir: &Path, id: &str) {
    let (current, previous) = paths(dir, id);
    let _ = fs::remove_file(current);
    let _ = fs::remove_file(previous);
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
        let page = read_page(dir.path(), "abc", 0, 2).unwrap();
        assert_eq!(page, HistoryPage { lines: vec!["line 3".into(), "line 2".into()], total: 3 });
        w.append(&lines(4..=23)).unwrap();
        let all = read_page(dir.path(), "abc", 0, 100).unwrap();
        // Between half and all of the limit, the newest, in order.
        assert!((5..=10).contains(&all.total), "{}", all.total);
        let want: Vec<String> = (24 - all.total..=23).rev().map(|i| format!("line {i}")).collect();
        assert_eq!(all.lines, want);
        let page = read_page(dir.path(), "abc", 3, 2).unwrap();
        assert_eq!(page.lines, ["line 20", "line 19"]);
        for f in ["abc.history", "abc.history.1"] {
            let mode = fs::metadata(dir.path().join(f)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{f}");
        }
        remove(dir.path(), "abc");
        assert_eq!(read_page(dir.path(), "abc", 0, 10).unwrap().total, 0);
    }

    #[test]
    fn a_line_being_written_is_not_read_and_a_reopened_writer_counts_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = HistoryWriter::open(dir.path(), "s", 100).unwrap();
        w.append(&lines(1..=2)).unwrap();
        // The writer caught mid-line.
        let mut f = open_append(&dir.path().join("s.history")).unwrap();
        f.write_all(b"half a li").unwrap();
        assert_eq!(read_page(dir.path(), "s", 0, 10).unwrap().lines, ["line 2", "line 1"]);
        drop(w);
        let w = HistoryWriter::open(dir.path(), "s", 100).unwrap();
        assert_eq!(w.lines, 3, "the partial line counts as one when reopened");
    }
}
