//! Scrollback lines from rows that left the top of the screen: what a terminal with scrollback
//! keeps, as text with its colours, the rows a long line wrapped over joined into one line.
//!
//! The rows come from [`Emulator::take_scrolled_off`](super::Emulator::take_scrolled_off) (every
//! row the program scrolled off the main screen, however fast it printed; the alternate screen of
//! a full-screen program is not history). A line is UTF-8 text with SGR sequences where its
//! colours and attributes change, ending in the default pen: ready for a terminal (xterm.js) to
//! print, or to search once the escapes are stripped ([`plain`]).

use std::sync::Arc;

use super::cell::Renditions;
use super::framebuffer::Row;

/// Longest line kept, in bytes (text and escapes): output with no newline (a minified file, a
/// hostile download, `head -c 4G /dev/zero | tr '\0' a`) must not grow the recorder without
/// bound. A longer line keeps its start and ends with [`cut_mark`].
pub const MAX_HISTORY_LINE_BYTES: usize = 64 * 1024;

/// What ends a line that was cut: it says how many bytes were dropped.
pub fn cut_mark(cut: u64) -> String {
    format!(" \u{2026} [{cut} bytes cut]")
}

/// Joins scrolled-off rows into lines (a line soft-wrapped over several rows waits for its last).
#[derive(Debug)]
pub struct HistoryLines {
    /// The start of a wrapped line whose last row has not scrolled off yet.
    partial: Vec<u8>,
    /// The pen at the end of `partial`.
    pen: Renditions,
    /// Most bytes `partial` may hold.
    max_line: usize,
    /// Bytes of the current line dropped past `max_line`.
    cut: u64,
}

impl Default for HistoryLines {
    fn default() -> Self {
        HistoryLines::with_max_line(MAX_HISTORY_LINE_BYTES)
    }
}

impl HistoryLines {
    /// Lines of at most [`MAX_HISTORY_LINE_BYTES`].
    pub fn new() -> Self {
        HistoryLines::default()
    }

    /// Lines of at most `max_line` bytes before their cut mark.
    pub fn with_max_line(max_line: usize) -> Self {
        HistoryLines { partial: Vec::new(), pen: Renditions::DEFAULT, max_line, cut: 0 }
    }

    /// Takes rows in the order they left the screen; returns the lines they completed.
    pub fn push_rows(&mut self, rows: &[Arc<Row>]) -> Vec<String> {
        let mut lines = Vec::new();
        for row in rows {
            self.append_row(row);
            if !row.is_wrapped() {
                lines.push(self.finish_line());
            }
        }
        lines
    }

    fn append_row(&mut self, row: &Row) {
        let cells = row.cells();
        // A row that does not wrap ends at its last cell that is not a default blank.
        let end = if row.is_wrapped() {
            cells.len()
        } else {
            cells
                .iter()
                .rposition(|c| !(c.is_empty() && c.renditions == Renditions::DEFAULT))
                .map_or(0, |i| i + 1)
        };
        let mut x = 0;
        let mut cell_bytes = Vec::new();
        while x < end {
            let cell = &cells[x];
            x += cell.width().max(1);
            if self.cut > 0 {
                // Past the cap: only counted, until the line ends.
                self.cut += cell.text().len().max(1) as u64;
                continue;
            }
            cell_bytes.clear();
            let pen = cell.renditions;
            if pen != self.pen {
                pen.write_sgr(&mut cell_bytes);
            }
            if cell.is_empty() {
                cell_bytes.push(b' ');
            } else {
                cell_bytes.extend_from_slice(cell.text().as_bytes());
            }
            if self.partial.len() + cell_bytes.len() > self.max_line {
                self.cut += cell.text().len().max(1) as u64;
                continue;
            }
            self.partial.extend_from_slice(&cell_bytes);
            self.pen = pen;
        }
    }

    fn finish_line(&mut self) -> String {
        if self.pen != Renditions::DEFAULT {
            self.partial.extend_from_slice(b"\x1b[0m");
            self.pen = Renditions::DEFAULT;
        }
        if self.cut > 0 {
            self.partial.extend_from_slice(cut_mark(self.cut).as_bytes());
            self.cut = 0;
        }
        // Cells hold whole UTF-8 graphemes and SGR is ASCII: always valid.
        String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned()
    }
}

/// A history line without its escape sequences: what a search looks at.
pub fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ parameters final byte (0x40..=0x7e).
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('\x40'..='\x7e').contains(&c) {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::{Emulator, Size, screen_text};

    fn recorder(cols: u16, rows: u16) -> Emulator {
        let mut e = Emulator::new(Size { cols, rows });
        e.keep_scrolled_off(true);
        e
    }

    fn history(e: &mut Emulator, h: &mut HistoryLines) -> Vec<String> {
        h.push_rows(&e.take_scrolled_off())
    }

    #[test]
    fn every_line_scrolled_off_is_kept_in_order_however_fast_it_came() {
        let mut e = recorder(20, 5);
        let mut h = HistoryLines::new();
        let out: String = (1..=1000).map(|i| format!("{i}\r\n")).collect();
        e.feed(out.as_bytes());
        let lines: Vec<String> = history(&mut e, &mut h).iter().map(|l| plain(l)).collect();
        // 5 rows: the last four numbers and the empty cursor row are still on the screen.
        let want: Vec<String> = (1..=996).map(|i| i.to_string()).collect();
        assert_eq!(lines, want);
    }

    #[test]
    fn a_wrapped_line_comes_back_as_one_line_with_its_colours() {
        let mut e = recorder(10, 3);
        let mut h = HistoryLines::new();
        e.feed(b"\x1b[31mred\x1b[0m plain text that wraps over three rows\r\nnext\r\n\r\n\r\n\r\n");
        let lines = history(&mut e, &mut h);
        assert_eq!(plain(&lines[0]), "red plain text that wraps over three rows");
        assert!(lines[0].starts_with("\x1b[0;31mred\x1b[0m "), "{:?}", lines[0]);
        assert_eq!(plain(&lines[1]), "next");
    }

    #[test]
    fn the_alternate_screen_and_scroll_regions_below_the_top_are_not_history() {
        let mut e = recorder(20, 4);
        let mut h = HistoryLines::new();
        e.feed(b"before-1\r\nbefore-2\r\nbefore-3\r\nbefore-4\r\n");
        // A full-screen program: alternate screen, its own scrolling.
        e.feed(b"\x1b[?1049h\x1b[H\x1b[2J");
        for i in 0..20 {
            e.feed(format!("vi-{i}\r\n").as_bytes());
        }
        e.feed(b"\x1b[?1049l");
        // A status line kept at the top: the region below it scrolls, nothing leaves the screen.
        e.feed(b"\x1b[2;4r\x1b[4;1H");
        for i in 0..10 {
            e.feed(format!("region-{i}\r\n").as_bytes());
        }
        e.feed(b"\x1b[r");
        let lines: Vec<String> = history(&mut e, &mut h).iter().map(|l| plain(l)).collect();
        assert_eq!(lines, ["before-1"], "only the main screen's own scroll");
        assert!(!e.in_alternate_screen());
    }

    #[test]
    fn the_lines_a_full_screen_program_covered_come_back_after_it_and_its_screen_does_not() {
        let mut e = recorder(20, 4);
        let mut h = HistoryLines::new();
        e.feed(b"kept-1\r\nkept-2\r\n$ less");
        // less without -X: the alternate screen, cleared, its own text, then back.
        e.feed(b"\x1b[?1049h\x1b[H\x1b[2Jin-less-1\r\nin-less-2\r\nin-less-3\r\n:");
        e.feed(b"\x1b[?1049l\r\n$ ");
        assert_eq!(plain(&screen_text(e.framebuffer()).rows[0]), "kept-1");
        e.feed(b"\r\n\r\n\r\n\r\n");
        let lines: Vec<String> = history(&mut e, &mut h).iter().map(|l| plain(l)).collect();
        assert_eq!(lines, ["kept-1", "kept-2", "$ less", "$ "]);
        // A client's emulator keeps mosh's one screen: the program's last screen stays.
        let mut client = Emulator::new(Size { cols: 20, rows: 4 });
        client.feed(b"kept-1\r\n\x1b[?1049h\x1b[H\x1b[2Jin-less-1\x1b[?1049l");
        assert_eq!(screen_text(client.framebuffer()).rows[0], "in-less-1");
    }

    #[test]
    fn nothing_is_kept_unless_asked() {
        let mut e = Emulator::new(Size { cols: 10, rows: 2 });
        e.feed(b"1\r\n2\r\n3\r\n");
        assert!(e.take_scrolled_off().is_empty());
        let mut e = recorder(10, 2);
        e.feed(b"1\r\n2\r\n3\r\n\x1bc4\r\n5\r\n6\r\n");
        assert_eq!(e.take_scrolled_off().len(), 4, "kept across a reset (RIS)");
    }

    #[test]
    fn a_line_longer_than_the_cap_keeps_its_start_and_says_how_much_was_cut() {
        let mut e = recorder(10, 3);
        let mut h = HistoryLines::with_max_line(25);
        // 100 characters with no newline, a colour change after the cap, then a short line.
        e.feed(&[b'a'; 60]);
        e.feed(b"\x1b[31m");
        e.feed(&[b'b'; 40]);
        e.feed(b"\x1b[0m\r\nnext\r\n\r\n\r\n");
        let lines = history(&mut e, &mut h);
        assert_eq!(lines[0], format!("{}{}", "a".repeat(25), cut_mark(75)));
        assert_eq!(plain(&lines[1]), "next", "the next line is whole again");
        // The default cap holds a long line in bounded memory whatever its length.
        let mut e = recorder(80, 3);
        let mut h = HistoryLines::new();
        let mut longest = 0;
        for _ in 0..100 {
            e.feed(&[b'x'; 8000]);
            assert!(history(&mut e, &mut h).is_empty(), "the line has not ended");
            longest = longest.max(h.partial.capacity());
        }
        assert!(longest <= 2 * MAX_HISTORY_LINE_BYTES, "{longest}");
        e.feed(b"\r\n\r\n\r\n\r\n");
        let lines = history(&mut e, &mut h);
        assert_eq!(lines[0].len(), MAX_HISTORY_LINE_BYTES + cut_mark(800_000 - 65_536).len());
        assert!(lines[0].ends_with(&cut_mark(800_000 - MAX_HISTORY_LINE_BYTES as u64)));
    }

    #[test]
    fn plain_strips_sgr_and_keeps_text() {
        assert_eq!(plain("\x1b[0;1;38;5;200mhi\x1b[0m there"), "hi there");
        assert_eq!(plain("é wide 中"), "é wide 中");
    }
}
