//! The page's own scrollback: rows that left the top of the server's screen between two frames
//! the page drew, pushed into the output terminal's scrollback (xterm.js) in order, so the wheel,
//! Shift+PgUp and selection work on what the page saw.
//!
//! mosh synchronizes screens, not output: a frame shows where the screen scrolled only by its
//! rows, so [`rows_scrolled_off`] finds the shift the way mosh's display diff finds its scroll
//! shortcut (old rows reappearing higher up), on the server's own frames: the notification bar
//! and predicted keystrokes are drawn over a frame and never enter the scrollback. Lines printed
//! faster than frames are not on the wire at all; spawn mode's recorder keeps those (history).
//!
//! A frame whose bottom row stays put while most rows above it move up is a full-screen program
//! scrolling under its status line (less, vim, line by line): not scrollback. This is a guess
//! from pictures; it misses a pager paging by half screens. mosh has no alternate screen,
//! so the last screen of such a program stays on the screen after it quits and later output
//! scrolls it off like any other rows; only a recorder that sees the program's own output can
//! leave it out.

use std::io::Write;
use std::sync::Arc;

use super::display::Renderer;
use super::framebuffer::{Framebuffer, Row};

/// A row that proves the screen scrolled: the same or an equal row that is not blank (blank rows
/// are often one shared row, and prove nothing).
fn proves(a: &Arc<Row>, b: &Arc<Row>) -> bool {
    !a.is_default_blank() && (Arc::ptr_eq(a, b) || a == b)
}

/// The same row (blank ones included).
fn same(a: &Arc<Row>, b: &Arc<Row>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// How many rows left the top of the screen from `prev` to `next` (0 when it did not scroll, a
/// full-screen program scrolled under a fixed bottom line, or the size changed).
pub fn rows_scrolled_off(prev: &Framebuffer, next: &Framebuffer) -> usize {
    if prev.size() != next.size() {
        return 0;
    }
    let height = next.rows.len();
    // The first row that can prove a shift: blank rows at the top (an image's rows, docs/IMAGES.md,
    // or blank lines printed) prove nothing, but they must have moved with it.
    let Some(first) = (0..height).find(|&j| !next.rows[j].is_default_blank()) else {
        return 0;
    };
    let Some(shift) = (first + 1..height)
        .find(|&k| proves(&next.rows[first], &prev.rows[k]))
        .map(|k| k - first)
        .filter(|&shift| (0..first).all(|i| same(&next.rows[i], &prev.rows[shift + i])))
    else {
        return 0;
    };
    let matched =
        (0..height - shift).take_while(|&i| same(&next.rows[i], &prev.rows[shift + i])).count();
    // A pager or editor moving its text under a fixed status line: every row above the bottom
    // one moved, and more of them moved than came in. (A shell's output can look the same when
    // its prompt repeats at the bottom; it then scrolls in more rows than stayed.)
    let bottom = height - 1;
    let bottom_fixed = proves(&next.rows[bottom], &prev.rows[bottom]);
    if bottom_fixed && shift + matched == bottom && shift < matched {
        return 0;
    }
    shift
}

/// The bytes that push `rows` into the output terminal's scrollback, oldest first, as if they
/// had scrolled off the top of `shown` (what it shows); `shown` becomes what it then shows: its
/// rows moved up by as many, blank rows below, the cursor on the last row.
///
/// The rows are drawn over the top of the screen and scrolled off with line feeds on the last
/// row (the whole screen as margins): a terminal keeps what a line feed scrolls off its top.
pub fn push_rows(shown: &mut Framebuffer, rows: &[Arc<Row>]) -> Vec<u8> {
    let height = shown.rows.len();
    let mut out = Vec::new();
    for chunk in rows.chunks(height) {
        let mut drawn = shown.clone();
        for (i, row) in chunk.iter().enumerate() {
            drawn.rows[i] = row.clone();
        }
        out.extend(Renderer::in_place().render(Some(shown), &drawn));
        // The default pen: a line feed fills the new bottom row with the current background.
        let _ = write!(out, "\x1b[r\x1b[0m\x1b[{height};1H");
        out.extend(std::iter::repeat_n(b'\n', chunk.len()));
        let blank = Arc::new(Row::new(drawn.width, Default::default()));
        drawn.rows.drain(..chunk.len());
        drawn.rows.resize(height, blank);
        drawn.cursor_row = height - 1;
        drawn.cursor_col = 0;
        drawn.next_print_will_wrap = false;
        drawn.pen = Default::default();
        *shown = drawn;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::{Emulator, HistoryLines, Size, plain, screen_text};

    fn screen(text: &[u8]) -> Emulator {
        let mut e = Emulator::new(Size { cols: 20, rows: 5 });
        e.feed(text);
        e
    }

    #[test]
    fn shell_output_scrolls_off_and_is_counted() {
        let mut e = screen(b"1\r\n2\r\n3\r\n4\r\n$ ");
        let before = e.framebuffer().clone();
        e.feed(b"seq 2\r\n1\r\n2\r\n$ ");
        assert_eq!(rows_scrolled_off(&before, e.framebuffer()), 3);
        // Nothing moved: nothing left.
        let same = e.framebuffer().clone();
        e.feed(b"x");
        assert_eq!(rows_scrolled_off(&same, e.framebuffer()), 0);
        // An empty command line at the bottom: the prompt row repeats, still a scroll.
        let before = e.framebuffer().clone();
        e.feed(b"\r\n$ ");
        assert_eq!(rows_scrolled_off(&before, e.framebuffer()), 1);
    }

    #[test]
    fn blank_rows_at_the_top_scroll_with_the_text_below_them() {
        // An image's blank rows (docs/IMAGES.md) or blank lines printed: the new top row is blank.
        let mut e = screen(b"a\r\n\r\n\r\nb\r\n$ ");
        let before = e.framebuffer().clone();
        e.feed(b"\r\n");
        assert_eq!(rows_scrolled_off(&before, e.framebuffer()), 1);
        // Only blank rows: nothing proves a scroll.
        let before = screen(b"").framebuffer().clone();
        assert_eq!(rows_scrolled_off(&before, screen(b"\r\n").framebuffer()), 0);
    }

    #[test]
    fn a_shared_blank_row_at_the_bottom_proves_nothing() {
        let mut e = screen(b"1\r\n2\r\n3\r\n4\r\n");
        let mut before = e.framebuffer().clone();
        e.feed(b"5\r\n");
        let mut after = e.framebuffer().clone();
        // One blank row object in both frames' last row, as a client's states share it.
        let blank = Arc::new(Row::new(20, Default::default()));
        before.rows[4] = blank.clone();
        after.rows[4] = blank;
        assert_eq!(rows_scrolled_off(&before, &after), 1);
    }

    #[test]
    fn a_pager_scrolling_under_its_status_line_is_not_scrollback() {
        let mut e = screen(b"");
        let page = |e: &mut Emulator, first: usize| {
            e.feed(b"\x1b[H\x1b[2J");
            for i in first..first + 4 {
                e.feed(format!("line {i}\r\n").as_bytes());
            }
            e.feed(b":");
        };
        page(&mut e, 1);
        let before = e.framebuffer().clone();
        page(&mut e, 2);
        assert_eq!(rows_scrolled_off(&before, e.framebuffer()), 0);
        // Without the status line it is output scrolling.
        let mut e = screen(b"line 1\r\nline 2\r\nline 3\r\nline 4\r\nline 5");
        let before = e.framebuffer().clone();
        e.feed(b"\r\nline 6");
        assert_eq!(rows_scrolled_off(&before, e.framebuffer()), 1);
    }

    /// Feeds `bytes` to an emulator that keeps what scrolls off its top, as xterm.js does.
    fn scrollback_after(shown_bytes: &[u8], bytes: &[u8]) -> Vec<String> {
        let mut out = Emulator::new(Size { cols: 20, rows: 5 });
        out.keep_scrolled_off(true);
        out.feed(shown_bytes);
        out.take_scrolled_off();
        out.feed(bytes);
        HistoryLines::new().push_rows(&out.take_scrolled_off()).iter().map(|l| plain(l)).collect()
    }

    #[test]
    fn pushed_rows_land_in_the_output_terminals_scrollback_in_order_with_the_screen_moved_up() {
        let shown_bytes = b"a\r\nb\r\nNOTICE BAR\r\nd\r\ne";
        let mut shown = screen(shown_bytes).framebuffer().clone();
        let server = screen(b"\x1b[31mred one\x1b[0m\r\ntwo\r\nx\r\ny\r\nz");
        let rows = server.framebuffer().rows[..2].to_vec();
        let bytes = push_rows(&mut shown, &rows);
        assert_eq!(scrollback_after(shown_bytes, &bytes), ["red one", "two"]);
        // The output terminal shows what `shown` now says.
        let mut out = screen(shown_bytes);
        out.feed(&bytes);
        assert_eq!(screen_text(out.framebuffer()).rows, screen_text(&shown).rows);
        assert_eq!(screen_text(&shown).rows[..3], ["NOTICE BAR", "d", "e"]);
        // And the renderer takes it from there to any frame.
        let wanted = screen(b"q\r\nr\r\ns\r\nt\r\nu");
        out.feed(&Renderer::in_place().render(Some(&shown), wanted.framebuffer()));
        assert_eq!(screen_text(out.framebuffer()).rows, screen_text(wanted.framebuffer()).rows);
    }

    #[test]
    fn a_frame_taller_than_the_terminal_is_drawn_fitted_without_scrolling_it() {
        // The terminal shrank to 5 rows; the server still sends its 7-row screen.
        let mut server = Emulator::new(Size { cols: 20, rows: 7 });
        server.feed(b"1\r\n2\r\n3\r\n4\r\n5\r\n6\r\n7");
        let mut out = Emulator::new(Size { cols: 20, rows: 5 });
        out.keep_scrolled_off(true);
        let fitted = server.framebuffer().fitted(Size { cols: 20, rows: 5 });
        out.feed(&Renderer::in_place().render(None, &fitted));
        assert!(out.take_scrolled_off().is_empty(), "nothing scrolled into the scrollback");
        assert_eq!(screen_text(out.framebuffer()).rows, ["1", "2", "3", "4", "5"]);
    }

    #[test]
    fn an_in_place_renderer_scrolls_without_feeding_the_scrollback() {
        let mut e = screen(b"1\r\n2\r\n3\r\n4\r\n5");
        let before = e.framebuffer().clone();
        e.feed(b"\r\n6\r\n7");
        let bytes = Renderer::in_place().render(Some(&before), e.framebuffer());
        assert!(bytes.windows(2).any(|w| w == b"2S"), "{:?}", String::from_utf8_lossy(&bytes));
        let mut out = screen(b"1\r\n2\r\n3\r\n4\r\n5");
        out.feed(&bytes);
        assert_eq!(screen_text(out.framebuffer()).rows, screen_text(e.framebuffer()).rows);
    }
}
