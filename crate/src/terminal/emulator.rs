//! The terminal emulator: mosh's meaning for every action the parser reports.
//!
//! It reproduces mosh's own emulator (`src/terminal/terminal.cc`, `terminalfunctions.cc`,
//! MOSH-PROTOCOL.md 8.3), because the server's diffs are relative to what *that* emulator makes of
//! the previous diffs. It never answers queries (the client must not: MOSH-PROTOCOL.md 8.2), and
//! ignores anything it does not know.
//!
//! Backspace from the pending-wrap position lands on column `width - 2`, as in mosh-client and
//! xterm (MOSH-PROTOCOL.md 8.4): we chose to match what the stock mosh-client shows, so screens
//! compare equal with it, rather than mosh-server's own cursor model.

use std::sync::Arc;

use super::cell::{Attrs, Cell, Color, Renditions};
use super::framebuffer::{Framebuffer, MouseEncoding, MouseReporting, Row, Size};
use super::mosh_sgr;
use super::parser::{MAX_OSC_CHARS, Params, Parser, Perform, or_default};
use super::width::print_width;

/// A framebuffer plus the parser state that feeds it.
#[derive(Clone, Debug)]
pub struct Emulator {
    fb: Framebuffer,
    parser: Parser,
}

/// Titles keep their first 256 characters, counted with the `0;` prefix (mosh's dispatcher).
const MAX_TITLE_CHARS: usize = 256;

impl Emulator {
    pub fn new(size: Size) -> Emulator {
        Emulator::with_framebuffer(Framebuffer::new(size))
    }
    /// An emulator that continues from `fb` with a fresh parser.
    pub fn with_framebuffer(fb: Framebuffer) -> Emulator {
        Emulator { fb, parser: Parser::new() }
    }
    pub fn framebuffer(&self) -> &Framebuffer {
        &self.fb
    }
    pub fn into_framebuffer(self) -> Framebuffer {
        self.fb
    }
    /// Interprets terminal output (peer data: anything is accepted).
    pub fn feed(&mut self, bytes: &[u8]) {
        let Emulator { fb, parser } = self;
        let mut dispatch = Dispatch { fb, open: None };
        parser.advance(&mut dispatch, bytes);
        dispatch.close();
    }
    /// mosh's Resize instruction (MOSH-PROTOCOL.md 8.3).
    pub fn resize(&mut self, size: Size) {
        self.fb.resize(size);
    }
    /// Keep the rows that scroll off the top of the main screen (for [`take_scrolled_off`]
    /// (Self::take_scrolled_off)), as a terminal's scrollback would.
    pub fn keep_scrolled_off(&mut self, keep: bool) {
        self.fb.keep_scrolled_off = keep;
        if !keep {
            self.fb.scrolled_off.clear();
        }
    }
    /// The rows that scrolled off the top of the main screen since the last call, oldest first.
    pub fn take_scrolled_off(&mut self) -> Vec<Arc<Row>> {
        std::mem::take(&mut self.fb.scrolled_off)
    }
    /// Whether an application switched to the alternate screen (its scrolling is not history).
    pub fn in_alternate_screen(&self) -> bool {
        self.fb.alternate_screen
    }
}

/// The verbs: one parser action applied to the framebuffer.
struct Dispatch<'a> {
    fb: &'a mut Framebuffer,
    /// The cells of the row being printed on, taken out of the framebuffer for a run of prints
    /// (a repaint prints a row's cells one by one, a pen change between each): a row is copied
    /// on write behind an `Arc`, and making it unique costs an atomic operation, so it is done
    /// once per run instead of once per character. While it is out the framebuffer's row is
    /// empty: every action but a plain print and an SGR (which sets only the pen) puts it back
    /// first ([`close`](Self::close)), and so does the end of [`Emulator::feed`].
    open: Option<OpenRow>,
}

struct OpenRow {
    row: usize,
    cells: Vec<Cell>,
}

fn clear_line(fb: &mut Framebuffer, row: usize, start: usize, end_inclusive: usize) {
    let bg = fb.bg();
    let r = fb.row_mut(row);
    for col in start..=end_inclusive {
        r.reset_cell(col, bg);
    }
}

impl Dispatch<'_> {
    /// Puts the open row's cells back.
    #[inline]
    fn close(&mut self) {
        if let Some(OpenRow { row, cells }) = self.open.take() {
            self.fb.row_mut(row).put_cells(cells);
        }
    }

    /// A print of a character `w` (1 or 2) columns wide that needs no wrap, no insertion and
    /// does not reach the last column: the cell (and a wide character's right half) is set in
    /// the open row, exactly as the general path of [`Perform::print`] sets them.
    #[inline]
    fn print_in_row(&mut self, ch: char, w: usize) {
        let (row, col) = (self.fb.cursor_row, self.fb.cursor_col);
        if self.open.as_ref().is_none_or(|open| open.row != row) {
            self.close();
            self.open = Some(OpenRow { row, cells: self.fb.row_mut(row).take_cells() });
        }
        let (pen, bg) = (self.fb.pen, self.fb.bg());
        if let Some(open) = &mut self.open {
            if let Some(cell) = open.cells.get_mut(col) {
                cell.set_printed(ch, pen, w == 2);
            }
            if w == 2 {
                if let Some(cell) = open.cells.get_mut(col + 1) {
                    cell.reset(bg);
                }
            }
        }
        // `move_col(w, true, true)` from a column where `w` more stay inside the row, outside
        // origin mode (the cursor's row is then always on screen): the printed cell is the one
        // a combining mark joins, no wrap is pending, nothing needs clamping.
        let fb = &mut *self.fb;
        if fb.modes.origin {
            fb.move_col(w as i64, true, true);
        } else {
            fb.combining = Some((row, col));
            fb.cursor_col = col + w;
            fb.next_print_will_wrap = false;
        }
    }

    /// [`print`](Perform::print) where the character wraps, is inserted, reaches the last column,
    /// is a combining mark or is unprintable.
    fn print_general(&mut self, ch: char, width: i8) {
        self.close();
        let fb = &mut *self.fb;
        match width {
            1 | 2 => {
                let w = width as usize;
                if fb.modes.autowrap && fb.next_print_will_wrap {
                    let row = fb.cursor_row;
                    fb.row_mut(row).set_wrap(true);
                    fb.move_col(0, false, false);
                    fb.move_rows_autoscroll(1);
                } else if fb.modes.autowrap && w == 2 && fb.cursor_col == fb.width - 1 {
                    // A wide character does not fit in the last column: wrap early, unmarked.
                    let row = fb.cursor_row;
                    fb.reset_cell(row, fb.cursor_col);
                    fb.row_mut(row).set_wrap(false);
                    fb.move_col(0, false, false);
                    fb.move_rows_autoscroll(1);
                }
                let (row, col) = (fb.cursor_row, fb.cursor_col);
                let bg = fb.bg();
                let pen = fb.pen;
                let last = col + 1 == fb.width;
                if fb.modes.insert {
                    fb.row_mut(row).insert_cells(col, w, bg);
                }
                let r = fb.row_mut(row);
                let cells = r.cells_mut();
                cells[col].set_printed(ch, pen, w == 2);
                if w == 2 && col + 1 < cells.len() {
                    cells[col + 1].reset(bg);
                }
                if last || (w == 2 && col + 2 == cells.len()) {
                    r.set_wrap(false);
                }
                fb.move_col(w as i64, true, true);
            }
            0 => {
                // Combining: joins the last printed cell (or the cell a move landed on).
                let Some((row, col)) = fb.combining else {
                    return;
                };
                if row >= fb.height || col >= fb.width {
                    return;
                }
                let empty = fb.rows[row].cells()[col].is_empty();
                let cell = &mut fb.row_mut(row).cells_mut()[col];
                if empty {
                    // A mark with no base: a "fallback" cell, drawn after U+00A0; the cursor
                    // advances.
                    cell.set_fallback(true);
                }
                if !cell.is_full() {
                    cell.push(ch);
                }
                if empty {
                    fb.move_col(1, true, true);
                }
            }
            _ => {}
        }
    }

    fn clear_wrap(&mut self) {
        self.fb.next_print_will_wrap = false;
    }

    /// C0/C1 controls by code point (mosh's CONTROL functions); unknown ones only clear the wrap.
    fn control(&mut self, c: u32) {
        if c == 0x09 {
            // HT keeps (but does not set) the pending wrap.
            tab(self.fb, 1);
            return;
        }
        let fb = &mut *self.fb;
        fb.next_print_will_wrap = false;
        match c {
            0x0a | 0x0b | 0x0c | 0x84 => fb.move_rows_autoscroll(1),
            0x0d => fb.move_col(0, false, false),
            0x08 => fb.move_col(-1, true, false),
            0x8d => fb.move_rows_autoscroll(-1),
            0x85 => {
                fb.move_col(0, false, false);
                fb.move_rows_autoscroll(1);
            }
            0x88 => fb.set_tab(),
            0x07 => fb.bell_count = fb.bell_count.wrapping_add(1),
            _ => {}
        }
    }
}

fn tab(fb: &mut Framebuffer, count: i64) {
    let col = fb.next_tab(count).unwrap_or(fb.width - 1);
    let keep = fb.next_print_will_wrap;
    fb.move_col(col as i64, false, false);
    fb.next_print_will_wrap = keep;
}

fn sgr(fb: &mut Framebuffer, p: &Params) {
    fb.pen = sgr_short(fb.pen, p).unwrap_or_else(|| sgr_general(fb.pen, p));
}

/// SGR as mosh reads it (`Renditions::set_rendition` over every field), applied to `pen`.
fn sgr_general(mut pen: Renditions, p: &Params) -> Renditions {
    let mut fields = p.fields();
    while let Some(field) = fields.next() {
        let r = or_default(Some(field), 0);
        if r == 38 || r == 48 {
            // `38;5;N` / `48;5;N` (N of 0 is palette 0 here, not a reset) and `38;2;R;G;B`, each
            // only when that many fields follow; otherwise 38 and 48 alone mean nothing.
            let mut ahead = fields.clone();
            if let (Some(kind), Some(n)) = (ahead.next(), ahead.next()) {
                if kind == 5 {
                    if let Some(color) = palette(or_default(Some(n), 0)) {
                        if r == 38 { pen.fg = color } else { pen.bg = color }
                    }
                    fields = ahead;
                    continue;
                }
                if kind == 2
                    && let (Some(g), Some(b)) = (ahead.next(), ahead.next())
                {
                    let color = true_color(
                        or_default(Some(n), 0),
                        or_default(Some(g), 0),
                        or_default(Some(b), 0),
                    );
                    if r == 38 {
                        pen.fg = color
                    } else {
                        pen.bg = color
                    }
                    fields = ahead;
                    continue;
                }
            }
        }
        set_rendition(&mut pen, r);
    }
    pen
}

/// The SGRs servers write (mosh-server's `0;38;5;N;48;2;R;G;B` for every cell of a colourful
/// screen), every field of one to three digits, applied to a copy of `pen`; `None` for anything
/// else (an empty or long field, a colour without all its fields, `38` followed by neither `5`
/// nor `2`), which [`sgr`] then reads the general way. Where it answers, the pen is the one the
/// general reading gives; it only reads each field once, as one word.
#[inline]
fn sgr_short(mut pen: Renditions, p: &Params) -> Option<Renditions> {
    let mut fields = p.short_fields();
    while fields.more() {
        // mosh-server's reset and colours first, as whole words: they are most of a repaint.
        if fields.next_is_digit(0) {
            pen = Renditions::DEFAULT;
            continue;
        }
        let (n, kind) = match fields.next_color() {
            Some(intro) => intro,
            None => {
                let n = fields.next()?;
                if n != 38 && n != 48 {
                    set_rendition(&mut pen, i32::from(n));
                    continue;
                }
                if fields.next_is_digit(5) {
                    (n, 5)
                } else if fields.next_is_digit(2) {
                    (n, 2)
                } else {
                    return None;
                }
            }
        };
        let color = if kind == 5 {
            // Palette entries above 255 leave the colour as it was.
            match u8::try_from(fields.next()?) {
                Ok(entry) => Color::Palette(entry),
                Err(_) => continue,
            }
        } else {
            let (r, g, b) = (fields.next()?, fields.next()?, fields.next()?);
            true_color(i32::from(r), i32::from(g), i32::from(b))
        };
        if n == 38 { pen.fg = color } else { pen.bg = color }
    }
    Some(pen)
}

fn set_mode(fb: &mut Framebuffer, p: &Params, on: bool) {
    for field in p.fields() {
        let n = or_default(Some(field), 0);
        if let Some(mode) = MouseReporting::from_mode_number(n) {
            fb.modes.mouse_reporting = if on { mode } else { MouseReporting::None };
            continue;
        }
        if let Some(enc) = MouseEncoding::from_mode_number(n) {
            fb.modes.mouse_encoding = if on { enc } else { MouseEncoding::Default };
            continue;
        }
        match n {
            1 => fb.modes.application_cursor_keys = on,
            3 => {
                // 80/132 columns: not done, but the screen is cleared and the cursor homed.
                fb.move_row(0, false);
                fb.move_col(0, false, false);
                for y in 0..fb.height {
                    fb.reset_row(y);
                }
            }
            5 => fb.modes.reverse_video = on,
            6 => {
                fb.move_row(0, false);
                fb.move_col(0, false, false);
                fb.modes.origin = on;
            }
            7 => fb.modes.autowrap = on,
            25 => fb.modes.cursor_visible = on,
            1004 => fb.modes.mouse_focus_events = on,
            1007 => fb.modes.mouse_alternate_scroll = on,
            // mosh ignores the alternate screen (one screen for both); a recorder keeps both.
            47 | 1047 | 1049 => fb.switch_screen(n, on),
            2004 => fb.modes.bracketed_paste = on,
            _ => {}
        }
    }
}

/// `collected` as a dispatch key: 0 for none, the character when there is one (they are ASCII),
/// and 0xFF (no key of mosh's) for more. Matching the string itself called `memcmp` for every
/// sequence.
fn collected_key(collected: &str) -> u8 {
    match collected.as_bytes() {
        [] => 0,
        &[c] => c,
        _ => 0xff,
    }
}

fn csi(fb: &mut Framebuffer, p: &Params, collected: u8, final_char: char) {
    let (row, col) = (fb.cursor_row, fb.cursor_col);
    let width = fb.width;
    match (collected, final_char) {
        (0, 'K') => match p.get(0, 0) {
            0 => clear_line(fb, row, col, width - 1),
            1 => clear_line(fb, row, 0, col),
            2 => fb.reset_row(row),
            _ => {}
        },
        (0, 'J') => match p.get(0, 0) {
            0 => {
                clear_line(fb, row, col, width - 1);
                for y in row + 1..fb.height {
                    fb.reset_row(y);
                }
            }
            1 => {
                for y in 0..row {
                    fb.reset_row(y);
                }
                clear_line(fb, row, 0, col);
            }
            2 => {
                for y in 0..fb.height {
                    fb.reset_row(y);
                }
            }
            _ => {}
        },
        (0, 'A') => fb.move_row(-i64::from(p.get(0, 1)), true),
        (0, 'B') => fb.move_row(i64::from(p.get(0, 1)), true),
        (0, 'C') => fb.move_col(i64::from(p.get(0, 1)), true, false),
        (0, 'D') => fb.move_col(-i64::from(p.get(0, 1)), true, false),
        (0, 'H') | (0, 'f') => {
            fb.move_row(i64::from(p.get(0, 1)) - 1, false);
            fb.move_col(i64::from(p.get(1, 1)) - 1, false, false);
        }
        (0, 'I') => tab(fb, i64::from(p.get(0, 1))),
        (0, 'Z') => tab(fb, -i64::from(p.get(0, 1))),
        (0, 'g') => match p.get(0, 0) {
            0 => fb.clear_tab(col),
            3 => {
                fb.default_tabs = false;
                Arc::make_mut(&mut fb.tabs).iter_mut().for_each(|t| *t = false);
            }
            _ => {}
        },
        (b'?', 'h') => set_mode(fb, p, true),
        (b'?', 'l') => set_mode(fb, p, false),
        (0, 'h') | (0, 'l') => {
            for field in p.fields() {
                if field == 4 {
                    fb.modes.insert = final_char == 'h';
                }
            }
        }
        (0, 'r') => {
            let top = p.get(0, 1) as usize;
            let bottom = p.get(1, fb.height as i32) as usize;
            // Invalid regions are ignored, as xterm does.
            if bottom <= top || top > fb.height {
                return;
            }
            fb.set_scrolling_region(top - 1, bottom - 1);
            fb.move_row(0, false);
            fb.move_col(0, false, false);
        }
        (0, 'm') => sgr(fb, p),
        (0, 'L') => {
            fb.insert_lines(row, p.get(0, 1) as usize);
            fb.move_col(0, false, false);
        }
        (0, 'M') => {
            fb.delete_lines(row, p.get(0, 1) as usize);
            fb.move_col(0, false, false);
        }
        (0, '@') => {
            let bg = fb.bg();
            fb.row_mut(row).insert_cells(col, p.get(0, 1) as usize, bg);
        }
        (0, 'P') => {
            let bg = fb.bg();
            fb.row_mut(row).delete_cells(col, p.get(0, 1) as usize, bg);
        }
        (0, 'd') => fb.move_row(i64::from(p.get(0, 1)) - 1, false),
        (0, 'G') | (0, '`') => fb.move_col(i64::from(p.get(0, 1)) - 1, false, false),
        (0, 'X') => {
            let last = (col + p.get(0, 1) as usize - 1).min(width - 1);
            clear_line(fb, row, col, last);
        }
        (b'!', 'p') => fb.soft_reset(),
        // mosh names these SD and SU but scrolls like SU (`S`, text up) and SD (`T`, down).
        (0, 'S') => fb.scroll(i64::from(p.get(0, 1))),
        (0, 'T') => fb.scroll(-i64::from(p.get(0, 1))),
        // Queries (DA, DSR, ...) and everything else: no answer, nothing to do.
        _ => {}
    }
}

fn osc_dispatch(fb: &mut Framebuffer, osc: &str) {
    if let Some(payload) = osc.strip_prefix("52;c;") {
        fb.clipboard = Arc::from(payload);
        return;
    }
    let mut chars = osc.chars();
    let (cmd, offset) = match (chars.next(), chars.next()) {
        (Some(';'), _) => (Some('0'), 1),
        (Some(c), Some(';')) => (Some(c), 2),
        _ => (None, 0),
    };
    let (set_icon, set_title) = match cmd {
        Some('0') => (true, true),
        Some('1') => (true, false),
        Some('2') => (false, true),
        _ => (false, false),
    };
    if !(set_icon || set_title) {
        return;
    }
    fb.title_initialized = true;
    let title: String = osc.chars().take(MAX_TITLE_CHARS).skip(offset).collect();
    let title: Arc<str> = Arc::from(title);
    if set_icon {
        fb.icon_name = title.clone();
    }
    if set_title {
        fb.title = title;
    }
}

/// `38;5;N`: palette entries 0-255; other values leave the colour unchanged.
fn palette(n: i32) -> Option<Color> {
    u8::try_from(n).ok().map(Color::Palette)
}

/// `38;2;R;G;B` as mosh packs it: `R << 16 | G << 8 | B` in 24 bits, so components above 255
/// spill into their neighbours exactly as they do in mosh.
fn true_color(r: i32, g: i32, b: i32) -> Color {
    let v = ((r as u32) << 16) | ((g as u32) << 8) | (b as u32);
    Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8)
}

/// One SGR number (mosh's `Renditions::set_rendition`).
fn set_rendition(pen: &mut Renditions, n: i32) {
    match n {
        0 => *pen = Renditions::DEFAULT,
        39 => pen.fg = Color::Default,
        49 => pen.bg = Color::Default,
        30..=37 => pen.fg = Color::Palette((n - 30) as u8),
        40..=47 => pen.bg = Color::Palette((n - 40) as u8),
        90..=97 => pen.fg = Color::Palette((n - 90 + 8) as u8),
        100..=107 => pen.bg = Color::Palette((n - 100 + 8) as u8),
        1 | 22 => pen.attrs.set(Attrs::BOLD, n < 9),
        3 | 23 => pen.attrs.set(Attrs::ITALIC, n < 9),
        4 | 24 => pen.attrs.set(Attrs::UNDERLINE, n < 9),
        5 | 25 => pen.attrs.set(Attrs::BLINK, n < 9),
        7 | 27 => pen.attrs.set(Attrs::INVERSE, n < 9),
        8 | 28 => pen.attrs.set(Attrs::INVISIBLE, n < 9),
        _ => {}
    }
}

impl Perform for Dispatch<'_> {
    /// mosh's `Emulator::print` (MOSH-PROTOCOL.md 8.3). The common print (inside the row, no
    /// wrap, no insertion) is inlined into the parser's loop; the rest is
    /// [`print_general`](Dispatch::print_general).
    #[inline(always)]
    fn print(&mut self, ch: char) {
        let width = print_width(ch);
        let fb = &*self.fb;
        if (width == 1 || width == 2)
            && !fb.next_print_will_wrap
            && !fb.modes.insert
            && fb.cursor_col + (width as usize) < fb.width
        {
            return self.print_in_row(ch, width as usize);
        }
        self.print_general(ch, width);
    }
    fn execute(&mut self, c: char) {
        self.close();
        self.control(u32::from(c));
    }

    fn esc_dispatch(&mut self, collected: &str, final_char: char) {
        self.close();
        let f = u32::from(final_char);
        // 7-bit forms of C1 controls (ESC D = IND, ESC E = NEL, ESC H = HTS, ESC M = RI, ...).
        if collected.is_empty() && (0x40..=0x5f).contains(&f) {
            self.control(f + 0x40);
            return;
        }
        self.clear_wrap();
        match (collected, final_char) {
            ("#", '8') => {
                // DECALN: every cell an 'E' in the background-only renditions; the cursor stays.
                let fb = &mut *self.fb;
                let bg = fb.bg();
                for y in 0..fb.height {
                    let r = fb.row_mut(y);
                    for col in 0..r.cells().len() {
                        r.reset_cell(col, bg);
                        r.cells_mut()[col].push('E');
                    }
                }
            }
            ("", '7') => self.fb.save_cursor(),
            ("", '8') => self.fb.restore_cursor(),
            ("", 'c') => self.fb.reset(),
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &Params, collected: &str, final_char: char) {
        if !(collected.is_empty() && final_char == 'm') {
            self.close();
        }
        // mosh's dispatch key is the collected characters and the final one, at most 8, Latin-1
        // only. Every key it knows is one or two characters with an ASCII final one, so a key
        // that dropped its final character (8 collected, or beyond Latin-1) matches nothing; the
        // pair is matched as it stands instead of building the string.
        let final_char =
            if collected.len() < 8 && u32::from(final_char) <= 0xff { final_char } else { '\0' };
        // SGR, DECSET/DECRST, CHT, CBT and TBC keep the pending wrap; everything else clears it.
        let collected = collected_key(collected);
        if !matches!((collected, final_char), (0, 'm' | 'I' | 'Z' | 'g') | (b'?', 'h' | 'l')) {
            self.clear_wrap();
        }
        csi(self.fb, params, collected, final_char);
    }

    /// mosh-server's SGRs (nearly one per cell of a colourful repaint), read in one pass: only
    /// the pen changes (no row is put back, the pending wrap stays), as for any SGR.
    #[inline]
    fn csi_from_input(&mut self, after_bracket: &[u8]) -> Option<usize> {
        let (pen, len) = mosh_sgr::read(after_bracket)?;
        self.fb.pen = pen;
        Some(len)
    }

    fn osc_dispatch(&mut self, osc: &str) {
        self.close();
        debug_assert!(osc.chars().count() <= MAX_OSC_CHARS);
        osc_dispatch(self.fb, osc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A pen with something in every part, so that a reset or a kept colour shows.
    fn any_pen() -> impl Strategy<Value = Renditions> {
        let color = prop_oneof![
            Just(Color::Default),
            any::<u8>().prop_map(Color::Palette),
            any::<(u8, u8, u8)>().prop_map(|(r, g, b)| Color::Rgb(r, g, b)),
        ];
        (0u8..64, color.clone(), color).prop_map(|(attrs, fg, bg)| Renditions {
            attrs: Attrs::from_bits_truncate(attrs),
            fg,
            bg,
        })
    }

    proptest! {
        /// Where the short reading answers, it gives the pen the general one does: fields from
        /// SGR numbers, colour introductions and their parts, out-of-range and odd values,
        /// empty and long fields.
        #[test]
        fn short_sgr_reading_agrees_with_the_general_one(
            pen in any_pen(),
            fields in prop::collection::vec(prop_oneof![
                prop::sample::select(vec![
                    "0", "1", "22", "39", "49", "97", "107", "", "05", "38", "48", "5", "2",
                    "38;5", "48;2;1;2", "38;7;1", "38;05;1", "48;;1",
                ]).prop_map(str::to_string),
                (0u16..1000).prop_map(|n| n.to_string()),
                (1000u32..100_000).prop_map(|n| n.to_string()),
                (prop::bool::ANY, 0u16..1000)
                    .prop_map(|(fg, n)| format!("{};5;{n}", if fg { 38 } else { 48 })),
                (prop::bool::ANY, 0u16..1000, 0u16..1000, 0u16..1000).prop_map(|(fg, r, g, b)| {
                    format!("{};2;{r};{g};{b}", if fg { 38 } else { 48 })
                }),
            ], 0..10),
        ) {
            let text = fields.join(";");
            let text = &text.as_bytes()[..text.len().min(100)];
            let params = Params::new(text);
            let general = sgr_general(pen, &params);
            if let Some(short) = sgr_short(pen, &params) {
                prop_assert_eq!(short, general, "{:?}", std::str::from_utf8(text));
            }
        }
    }

    proptest! {
        /// An SGR fed whole (where it is in mosh-server's layout, read in one pass by
        /// `mosh_sgr`) and fed a byte at a time (through the state machine and the general
        /// reading) leaves the same pen and screen: mosh-server's own SGR for any pen, and
        /// odd parameter texts next to it.
        #[test]
        fn sgr_fed_whole_or_byte_by_byte_leaves_the_same_screen(
            before in any_pen(),
            pen in any_pen(),
            odd in prop::collection::vec(prop_oneof![
                prop::sample::select(vec![
                    "0", "1", "2", "3", "22", "31", "39", "49", "97", "107", "", "05", "38",
                    "48", "5", "256", "38;5", "48;2;1;2", "38;7;1", "38;05;1", "48;;1", "1000",
                ]).prop_map(str::to_string),
                (0u16..300).prop_map(|n| n.to_string()),
            ], 0..8),
            tail in "[0-9;mA]{0,12}",
        ) {
            let mut input = Vec::new();
            before.write_sgr(&mut input);
            input.push(b'A');
            pen.write_sgr(&mut input);
            input.push(b'B');
            input.extend_from_slice(format!("\x1b[0;{}m", odd.join(";")).as_bytes());
            input.push(b'C');
            pen.write_sgr(&mut input);
            input.extend_from_slice(tail.as_bytes());
            let mut whole = Emulator::new(Size { cols: 10, rows: 2 });
            whole.feed(&input);
            let mut by_byte = Emulator::new(Size { cols: 10, rows: 2 });
            for b in &input {
                by_byte.feed(std::slice::from_ref(b));
            }
            prop_assert!(whole.framebuffer() == by_byte.framebuffer(), "{:?}", String::from_utf8_lossy(&input));
            prop_assert_eq!(whole.framebuffer().pen, by_byte.framebuffer().pen);
        }
    }

    /// Around mosh's 100 characters of parameter text, whole and byte by byte agree: at 101 the
    /// `4` of the last field is cut off, leaving an empty field, which resets the pen.
    #[test]
    fn an_sgr_past_the_parameter_cap_means_what_its_first_100_characters_say() {
        for n in [47, 48, 49, 50] {
            let input = format!("\x1b[0{};4mA", ";1".repeat(n)) + "12345678";
            let mut whole = Emulator::new(Size { cols: 20, rows: 2 });
            whole.feed(input.as_bytes());
            let mut by_byte = Emulator::new(Size { cols: 20, rows: 2 });
            for b in input.as_bytes() {
                by_byte.feed(std::slice::from_ref(b));
            }
            assert!(whole.framebuffer() == by_byte.framebuffer(), "{n} attributes");
            let underlined = whole.framebuffer().rows[0].cells()[0].renditions.attrs;
            assert_eq!(underlined.contains(Attrs::UNDERLINE), n <= 48, "{n} attributes");
        }
    }

    /// mosh-server's per-cell SGR is read the short way (the point of it).
    #[test]
    fn mosh_servers_sgr_takes_the_short_reading() {
        let params = Params::new(b"0;38;5;58;48;2;58;197;174");
        let pen = Renditions { attrs: Attrs::BOLD, fg: Color::Default, bg: Color::Palette(3) };
        let want =
            Renditions { attrs: Attrs::NONE, fg: Color::Palette(58), bg: Color::Rgb(58, 197, 174) };
        assert_eq!(sgr_short(pen, &params), Some(want));
        assert_eq!(sgr_general(pen, &params), want);
    }
}
