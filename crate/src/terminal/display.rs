//! The renderer: the escape bytes that turn the frame a terminal shows into the frame wanted.
//!
//! This is mosh's `Display::new_frame` (MOSH-PROTOCOL.md 8.2), byte for byte in its choices:
//! the same order of items, cursor-move shortcuts, ECH/EL for blank runs, the scroll shortcut and
//! the soft-wrap continuation. It serves twice: as mosh-server's HostBytes (so a [`Complete`]
//! can play the server in tests) and as the output for xterm.js. The output assumes the receiving
//! terminal holds `shown` including its cursor position, visibility and pen, autowrap on, no
//! origin or insert mode and the full screen as scroll region: what every earlier output of this
//! renderer (or of mosh-server) leaves behind.
//!
//! [`Renderer::in_place`], the page's renderer for xterm.js, departs from mosh's choices where
//! xterm.js's cost grows with bytes and the meaning stays the same for xterm and for mosh's
//! emulator: it scrolls with `CSI n S` (see the field), changes only what differs in the pen when
//! that is shorter than mosh's reset-and-set SGR, and takes the shortest of CUP, CHA and CUF for
//! a move. mosh-server's choices ([`Renderer::new`]) stay as they are: tests play the server
//! with them.
//!
//! One deliberate difference: mosh's model puts the cursor at "column width + 1" after the last
//! cell of a row is written, so it may follow with backspaces that a real terminal (and mosh's own
//! emulator) count from the last column (MOSH-PROTOCOL.md 8.4). This renderer knows the cursor is
//! then on the last column with a wrap pending and moves from there only with CR/LF or CUP, so
//! its output means the same to xterm and to our emulator.
//!
//! [`Complete`]: super::Complete

use std::io::Write;
use std::sync::Arc;

use super::cell::{Cell, Renditions, push_decimal};
use super::framebuffer::{Framebuffer, Row};

/// Turns (frame shown, frame wanted) into terminal bytes. Stateless; see the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct Renderer {
    /// Scroll with `CSI n S` inside a margin instead of line feeds: an output terminal with
    /// scrollback (xterm.js) moves every row a line feed scrolls off its top into its scrollback,
    /// margins or not, and the page decides itself what goes there (`scrollback`).
    scroll_up_in_place: bool,
    /// Shorter SGRs and cursor moves (the module docs); only for a terminal that this renderer
    /// alone writes to, since a relative SGR relies on the pen being exactly the one it left.
    compact: bool,
}

/// The output terminal as the renderer tracks it while emitting.
struct FrameState {
    out: Vec<u8>,
    /// `None` when unknown (after a margin change). A column of `width` or more means: on the
    /// last column with a wrap pending, where only CR or an absolute move are safe.
    cursor: Option<(usize, usize)>,
    pen: Renditions,
    cursor_visible: bool,
    /// Scratch for `put_row`: which columns the old row hid under a wide character.
    hidden: Vec<bool>,
    compact: bool,
}

impl FrameState {
    fn append(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }
    fn append_n(&mut self, byte: u8, n: usize) {
        self.out.extend(std::iter::repeat_n(byte, n));
    }
    /// Moves for drawing: hides the cursor first so it does not flicker across the screen.
    #[inline]
    fn silent_move(&mut self, y: usize, x: usize, width: usize) {
        if self.cursor == Some((y, x)) {
            return;
        }
        if self.cursor_visible {
            self.append(b"\x1b[?25l");
            self.cursor_visible = false;
        }
        self.append_move(y, x, width);
    }
    /// mosh's `append_move`: CR/LF for column 0 up to 4 rows down, 1-4 BS on the same row,
    /// otherwise CUP.
    fn append_move(&mut self, y: usize, x: usize, width: usize) {
        let last = self.cursor;
        self.cursor = Some((y, x));
        if let Some((ly, lx)) = last {
            if x == 0 && y >= ly && y - ly < 5 {
                if lx != 0 {
                    self.append(b"\r");
                }
                self.append_n(b'\n', y - ly);
                return;
            }
            // Backspace counts from the real column, so never from a pending wrap.
            if y == ly && x < lx && lx - x < 5 && lx < width {
                self.append_n(b'\x08', lx - x);
                return;
            }
        }
        if self.compact {
            self.append_short_move(last, y, x, width);
            return;
        }
        self.append(b"\x1b[");
        push_decimal(&mut self.out, y + 1);
        self.out.push(b';');
        push_decimal(&mut self.out, x + 1);
        self.out.push(b'H');
    }
    /// The shortest of CUP (with its defaults left out), CHA on the same row and CUF forward on
    /// it. Relative moves only from a known column that has no wrap pending; CHA is absolute in
    /// the column and keeps the row, so it is safe from a pending wrap too.
    fn append_short_move(
        &mut self,
        last: Option<(usize, usize)>,
        y: usize,
        x: usize,
        width: usize,
    ) {
        // Two numbers below 65537 and four more bytes fit easily.
        let mut best = [0u8; 24];
        let mut best_len = usize::MAX;
        let mut consider = |parts: &[usize], end: u8| {
            let mut seq = [0u8; 24];
            seq[..2].copy_from_slice(b"\x1b[");
            let mut len = 2;
            for (i, &n) in parts.iter().enumerate() {
                if i > 0 {
                    seq[len] = b';';
                    len += 1;
                }
                len += write_decimal(&mut seq[len..], n);
            }
            seq[len] = end;
            len += 1;
            if len < best_len {
                best = seq;
                best_len = len;
            }
        };
        match (y, x) {
            (0, 0) => consider(&[], b'H'),
            (_, 0) => consider(&[y + 1], b'H'),
            _ => consider(&[y + 1, x + 1], b'H'),
        }
        if let Some((ly, lx)) = last
            && ly == y
        {
            if x == 0 {
                consider(&[], b'G');
            } else {
                consider(&[x + 1], b'G');
            }
            if lx < width && x > lx {
                if x - lx == 1 {
                    consider(&[], b'C');
                } else {
                    consider(&[x - lx], b'C');
                }
            }
        }
        self.append(&best[..best_len]);
    }
    #[inline(always)]
    fn update_rendition(&mut self, r: Renditions, force: bool) {
        if self.compact && !force && self.pen != r {
            r.write_sgr_from(self.pen, &mut self.out);
            self.pen = r;
        } else if force || self.pen != r {
            r.write_sgr(&mut self.out);
            self.pen = r;
        }
    }
    #[inline]
    fn advance(&mut self, n: usize) {
        if let Some((_, x)) = &mut self.cursor {
            *x += n;
        }
    }
}

/// Writes `n` in decimal at the start of `out`, returning the length.
fn write_decimal(out: &mut [u8], mut n: usize) -> usize {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = (digits.len() - at).min(out.len());
    out[..len].copy_from_slice(&digits[at..at + len]);
    len
}

/// A row that proves the screen scrolled: the same row object, or equal and not blank (equal
/// blank rows prove nothing; mosh tells them apart by a generation counter).
fn same_row(a: &Arc<Row>, b: &Arc<Row>) -> bool {
    Arc::ptr_eq(a, b) || (a == b && !a.is_default_blank())
}

impl Renderer {
    pub fn new() -> Renderer {
        Renderer::default()
    }

    /// The page's renderer: its scrolling never feeds the output terminal's scrollback, and it
    /// writes fewer bytes than mosh where the meaning is the same (the module docs).
    pub fn in_place() -> Renderer {
        Renderer { scroll_up_in_place: true, compact: true }
    }

    /// The bytes that make a terminal showing `shown` show `wanted`. `None` means the terminal's
    /// contents are unknown (start, or after the terminal was resized): a full paint with a clear,
    /// re-sending title and modes but not bell or clipboard.
    pub fn render(&self, shown: Option<&Framebuffer>, wanted: &Framebuffer) -> Vec<u8> {
        match shown {
            Some(last) => new_frame(true, last, wanted, *self),
            None => {
                let mut blank = Framebuffer::new(wanted.size());
                blank.bell_count = wanted.bell_count;
                blank.clipboard = wanted.clipboard.clone();
                new_frame(false, &blank, wanted, *self)
            }
        }
    }
}

fn new_frame(
    mut initialized: bool,
    last: &Framebuffer,
    f: &Framebuffer,
    mode: Renderer,
) -> Vec<u8> {
    let Renderer { scroll_up_in_place, compact } = mode;
    let mut frame = FrameState {
        out: Vec::new(),
        cursor: None,
        pen: Renditions::DEFAULT,
        cursor_visible: last.modes.cursor_visible,
        hidden: Vec::new(),
        compact,
    };
    let width = f.width;
    let height = f.height;

    if f.bell_count != last.bell_count {
        frame.append(b"\x07");
    }
    // mosh leaves out a title that was set but is empty; we send it, so that the receiver also
    // knows a title was set (title_initialized is part of the state).
    let title_changed =
        f.icon_name != last.icon_name || f.title != last.title || !last.title_initialized;
    if f.title_initialized && (!initialized || title_changed) {
        if f.icon_name == f.title {
            let _ = write!(frame.out, "\x1b]0;{}\x07", f.title);
        } else {
            let _ = write!(frame.out, "\x1b]1;{}\x07\x1b]2;{}\x07", f.icon_name, f.title);
        }
    }
    if f.clipboard != last.clipboard {
        let _ = write!(frame.out, "\x1b]52;c;{}\x07", f.clipboard);
    }
    if !initialized || f.modes.reverse_video != last.modes.reverse_video {
        frame.append(if f.modes.reverse_video { b"\x1b[?5h" } else { b"\x1b[?5l" });
    }

    if !initialized || f.size() != last.size() {
        frame.append(b"\x1b[r\x1b[0m\x1b[H\x1b[2J");
        initialized = false;
        frame.cursor = Some((0, 0));
        frame.pen = Renditions::DEFAULT;
    } else {
        let x = if last.next_print_will_wrap { width } else { last.cursor_col };
        frame.cursor = Some((last.cursor_row, x));
        frame.pen = last.pen;
    }
    if !initialized {
        frame.cursor_visible = false;
        frame.append(b"\x1b[?25l");
    }

    // What the output terminal holds, row by row (only consulted when `initialized`).
    let mut old_rows: Vec<Arc<Row>> = if initialized { last.rows.clone() } else { Vec::new() };
    let mut frame_y = 0;

    if initialized {
        let mut lines_scrolled = 0;
        let mut scroll_height = 0;
        for row in 0..height {
            if !same_row(&f.rows[0], &old_rows[row]) {
                continue;
            }
            if row == 0 {
                break;
            }
            lines_scrolled = row;
            scroll_height = 1;
            let mut region_height = 1;
            while lines_scrolled + region_height < height {
                if same_row(&f.rows[region_height], &old_rows[lines_scrolled + region_height]) {
                    scroll_height = region_height + 1;
                } else {
                    break;
                }
                region_height += 1;
            }
            break;
        }
        if scroll_height > 0 {
            frame_y = scroll_height;
            // A scroll fills new rows with the pen's background: it must be the default (mosh
            // resends it regardless; the page's renderer knows the pen).
            frame.update_rendition(Renditions::DEFAULT, !compact);
            let bottom = lines_scrolled + scroll_height - 1;
            let on_last_row = matches!(frame.cursor, Some((y, _)) if y + 1 == height);
            if scroll_up_in_place {
                // SU scrolls the margins without moving the cursor, and feeds no scrollback.
                let _ = write!(frame.out, "\x1b[1;{}r\x1b[{}S\x1b[r", bottom + 1, lines_scrolled);
                frame.cursor = None;
            } else if scroll_height + lines_scrolled == height && on_last_row {
                frame.append(b"\r");
                frame.append_n(b'\n', lines_scrolled);
                frame.cursor = Some((height - 1, 0));
            } else {
                let _ = write!(frame.out, "\x1b[1;{}r", bottom + 1);
                // DECSTBM homes the cursor; be explicit.
                frame.cursor = None;
                frame.silent_move(bottom, 0, width);
                frame.append_n(b'\n', lines_scrolled);
                frame.append(b"\x1b[r");
                frame.cursor = None;
            }
            let blank = Arc::new(Row::new(width, Default::default()));
            for i in 0..=bottom {
                old_rows[i] = if i + lines_scrolled <= bottom {
                    old_rows[i + lines_scrolled].clone()
                } else {
                    blank.clone()
                };
            }
            // No output sets the last row's wrap flag (that takes printing past its end, which
            // scrolls), so the terminal's last row is unwrapped whatever `last` says; once
            // scrolled up, that flag shows, and the row is compared (and drawn) again. mosh
            // keeps the flag it believes (its choices byte for byte).
            let from_last = (height - 1).checked_sub(lines_scrolled);
            if let Some(row) = from_last.filter(|&r| compact && bottom == height - 1 && r <= bottom)
                && old_rows[row].is_wrapped()
            {
                Arc::make_mut(&mut old_rows[row]).set_wrap(false);
                frame_y = frame_y.min(row);
            }
        }
    }

    let mut wrap = false;
    for y in frame_y..height {
        let old = old_rows.get(y).map(|r| &**r);
        wrap = put_row(&mut frame, f, y, old, wrap);
    }

    if !initialized || frame.cursor != Some((f.cursor_row, f.cursor_col)) {
        frame.append_move(f.cursor_row, f.cursor_col, width);
    }
    if !initialized || f.modes.cursor_visible != frame.cursor_visible {
        frame.append(if f.modes.cursor_visible { b"\x1b[?25h" } else { b"\x1b[?25l" });
    }
    frame.update_rendition(f.pen, !initialized);

    let (m, lm) = (&f.modes, &last.modes);
    if !initialized || m.bracketed_paste != lm.bracketed_paste {
        frame.append(if m.bracketed_paste { b"\x1b[?2004h" } else { b"\x1b[?2004l" });
    }
    if !initialized || m.mouse_reporting != lm.mouse_reporting {
        match m.mouse_reporting.mode_number() {
            None => frame.append(b"\x1b[?1003l\x1b[?1002l\x1b[?1001l\x1b[?1000l"),
            Some(new) => {
                if let Some(old) = lm.mouse_reporting.mode_number() {
                    let _ = write!(frame.out, "\x1b[?{old}l");
                }
                let _ = write!(frame.out, "\x1b[?{new}h");
            }
        }
    }
    if !initialized || m.mouse_focus_events != lm.mouse_focus_events {
        frame.append(if m.mouse_focus_events { b"\x1b[?1004h" } else { b"\x1b[?1004l" });
    }
    if !initialized || m.mouse_encoding != lm.mouse_encoding {
        match m.mouse_encoding.mode_number() {
            None => frame.append(b"\x1b[?1015l\x1b[?1006l\x1b[?1005l"),
            Some(new) => {
                if let Some(old) = lm.mouse_encoding.mode_number() {
                    let _ = write!(frame.out, "\x1b[?{old}l");
                }
                let _ = write!(frame.out, "\x1b[?{new}h");
            }
        }
    }
    frame.out
}

/// Draws the changed cells of row `y` (mosh's `Display::put_row`). `old` is the row the output
/// terminal shows, `None` to draw everything. `wrap`: the previous row ended with a pending wrap
/// that must carry into this row's first cell. Returns whether this row leaves such a wrap.
fn put_row(
    frame: &mut FrameState,
    f: &Framebuffer,
    y: usize,
    old: Option<&Row>,
    wrap: bool,
) -> bool {
    let row = &f.rows[y];
    let cells = row.cells();
    let width = f.width;
    let mut x = 0;

    if wrap {
        let cell = &cells[0];
        frame.update_rendition(cell.renditions, false);
        cell.write_grapheme(&mut frame.out);
        x += cell.width();
        frame.cursor = Some((y, 0));
        frame.advance(cell.width());
        // That one cell filled the row (a wide character in two columns): mosh stops the wrap
        // chain here and loses the row's wrap flag; we carry it on.
        if x >= width && row.is_wrapped() && y + 1 < f.height {
            frame.cursor = Some((y + 1, 0));
            return true;
        }
    }
    if old.is_some_and(|old| std::ptr::eq(old, &**row) || *old == **row) {
        return false;
    }

    let wrap_this = row.is_wrapped();
    let wrap_changed = old.is_some_and(|o| o.is_wrapped() != wrap_this);
    // Cells the old frame hid under a wide character: the terminal holds blanks there, whatever
    // the model says, so they are redrawn when they come to light.
    // (A buffer kept across rows: one allocation per frame, not per row.)
    let mut old_hidden = std::mem::take(&mut frame.hidden);
    old_hidden.clear();
    if let Some(old) = old {
        old_hidden.resize(width, false);
        let mut i = 0;
        while i < width {
            let w = old.cells()[i].width();
            if w == 2 && i + 1 < width {
                old_hidden[i + 1] = true;
            }
            i += w;
        }
    }
    let unchanged = |x: usize, cell: &Cell| -> bool {
        let Some(old) = old else { return false };
        // The wrap flag belongs to the last cell: a changed flag redraws it.
        old.cells()[x] == *cell && !old_hidden[x] && !(wrap_changed && x + cell.width() >= width)
    };
    let mut clear_count = 0;
    let mut wrote_last_cell = false;
    let mut blank_renditions = Renditions::DEFAULT;

    while x < width {
        let cell = &cells[x];
        if clear_count == 0 && unchanged(x, cell) {
            x += cell.width();
            continue;
        }
        if cell.is_empty() {
            if clear_count == 0 {
                blank_renditions = cell.renditions;
            }
            if cell.renditions == blank_renditions {
                clear_count += 1;
                x += 1;
                continue;
            }
        }
        if clear_count > 0 {
            frame.silent_move(y, x - clear_count, width);
            frame.update_rendition(blank_renditions, false);
            if clear_count > 4 {
                frame.append(b"\x1b[");
                push_decimal(&mut frame.out, clear_count);
                frame.out.push(b'X');
            } else {
                frame.append_n(b' ', clear_count);
                frame.cursor = Some((y, x));
            }
            clear_count = 0;
            if cell.is_empty() {
                blank_renditions = cell.renditions;
                clear_count = 1;
                x += 1;
                continue;
            }
        }
        let cell_width = cell.width();
        // The last cell of a wrapping row is always positioned explicitly.
        if wrap_this && x + cell_width >= width {
            frame.cursor = None;
        }
        frame.silent_move(y, x, width);
        frame.update_rendition(cell.renditions, false);
        if x + cell_width > width {
            // A wide character in the last column (put there by autowrap off, or shifted there by
            // ICH or insert mode). With autowrap on a terminal would wrap it to the next row and
            // scroll; mosh-server sends it anyway and its client draws garbage. We switch autowrap
            // off around it, so xterm and our emulator keep it in place.
            frame.append(b"\x1b[?7l");
            cell.write_grapheme(&mut frame.out);
            frame.append(b"\x1b[?7h");
        } else {
            cell.write_grapheme(&mut frame.out);
        }
        x += cell_width;
        frame.advance(cell_width);
        if x >= width {
            wrote_last_cell = true;
        }
    }

    if clear_count > 0 {
        frame.silent_move(y, x - clear_count, width);
        frame.update_rendition(blank_renditions, false);
        if !wrap_this {
            frame.append(b"\x1b[K");
        } else {
            frame.append_n(b' ', clear_count);
            frame.cursor = Some((y, x));
            wrote_last_cell = true;
        }
    }

    frame.hidden = old_hidden;

    if !(wrote_last_cell && y + 1 < f.height) {
        return false;
    }
    if wrap_this {
        // Let the terminal wrap by itself: that recreates the row's wrap flag (for copy and paste).
        frame.cursor = Some((y + 1, 0));
        return true;
    }
    frame.append(b"\r\n");
    frame.cursor = Some((y + 1, 0));
    false
}
