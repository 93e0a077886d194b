//! The framebuffer: rows of cells shared between snapshots, cursor, pen and terminal modes.
//!
//! This is mosh's `Terminal::Framebuffer` (cells plus `DrawState`). Snapshots of the server's
//! state are cloned on every received state, so rows are `Arc<Row>` (`Arc`: a relay keeps a
//! session's screen in a multi-threaded server) and copied on write
//! (`Arc::make_mut`), as mosh shares row pointers: a clone costs one pointer copy per row.

use std::fmt;
use std::sync::Arc;

use super::cell::{Cell, Color, Renditions};

/// A terminal size in character cells. Named fields, so columns and rows cannot be swapped.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Size {
    pub cols: u16,
    pub rows: u16,
}

/// A cell position, 0-based. Named fields, so columns and rows cannot be swapped.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pos {
    pub row: u16,
    pub col: u16,
}

/// One row of cells and its soft-wrap flag.
///
/// mosh keeps the flag on the row's last cell, so everything that resets or replaces the last
/// cell (erase, print, insert/delete cells) clears it; [`Row`] keeps it beside the cells and the
/// framebuffer clears it at the same moments.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Row {
    cells: Vec<Cell>,
    wrap: bool,
}

impl Row {
    pub fn new(width: usize, bg: Color) -> Row {
        Row { cells: vec![Cell::blank(bg); width], wrap: false }
    }
    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }
    /// True when printing ran off this row's end onto the next (a soft-wrapped line).
    pub fn is_wrapped(&self) -> bool {
        self.wrap
    }
    pub(crate) fn cells_mut(&mut self) -> &mut [Cell] {
        &mut self.cells
    }
    /// Takes the cells out, leaving the row empty until [`put_cells`](Self::put_cells) returns
    /// them (the emulator's run of prints on one row).
    pub(crate) fn take_cells(&mut self) -> Vec<Cell> {
        std::mem::take(&mut self.cells)
    }
    pub(crate) fn put_cells(&mut self, cells: Vec<Cell>) {
        self.cells = cells;
    }
    pub(crate) fn set_wrap(&mut self, wrap: bool) {
        self.wrap = wrap;
    }
    /// Resets cell `col` to a blank, clearing the wrap flag when it is the last cell.
    pub(crate) fn reset_cell(&mut self, col: usize, bg: Color) {
        if let Some(cell) = self.cells.get_mut(col) {
            cell.reset(bg);
            if col + 1 == self.cells.len() {
                self.wrap = false;
            }
        }
    }
    /// mosh's `Row::insert_cell`: a blank enters at `col`, the last cell (and its wrap flag) falls
    /// off.
    pub(crate) fn insert_cells(&mut self, col: usize, count: usize, bg: Color) {
        let width = self.cells.len();
        if col >= width || count == 0 {
            return;
        }
        let count = count.min(width - col);
        self.cells.truncate(width - count);
        self.cells.splice(col..col, std::iter::repeat_n(Cell::blank(bg), count));
        self.wrap = false;
    }
    /// mosh's `Row::delete_cell`: cells after `col` move left, blanks (without wrap flag) enter at
    /// the end.
    pub(crate) fn delete_cells(&mut self, col: usize, count: usize, bg: Color) {
        let width = self.cells.len();
        if col >= width || count == 0 {
            return;
        }
        let count = count.min(width - col);
        self.cells.drain(col..col + count);
        self.cells.extend(std::iter::repeat_n(Cell::blank(bg), count));
        self.wrap = false;
    }
    pub(crate) fn resize(&mut self, width: usize, bg: Color) {
        self.wrap = false;
        self.cells.resize(width, Cell::blank(bg));
    }
    /// True when every cell is an empty default-coloured cell and the row is not wrapped.
    pub fn is_default_blank(&self) -> bool {
        !self.wrap && self.cells.iter().all(|c| c.is_empty() && c.renditions == Renditions::DEFAULT)
    }
}

impl fmt::Debug for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: String =
            self.cells.iter().map(|c| if c.is_empty() { " " } else { c.text() }).collect();
        write!(f, "{:?}{}", text.trim_end(), if self.wrap { " (wrapped)" } else { "" })
    }
}

/// Mouse reporting mode (DECSET 9, 1000-1003); synchronized by mosh (MOSH-PROTOCOL.md 8.2 step 12).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum MouseReporting {
    #[default]
    None,
    X10,
    Normal,
    Highlight,
    ButtonEvent,
    AnyEvent,
}

impl MouseReporting {
    /// The DECSET number, `None` for no reporting.
    pub fn mode_number(self) -> Option<u16> {
        match self {
            MouseReporting::None => None,
            MouseReporting::X10 => Some(9),
            MouseReporting::Normal => Some(1000),
            MouseReporting::Highlight => Some(1001),
            MouseReporting::ButtonEvent => Some(1002),
            MouseReporting::AnyEvent => Some(1003),
        }
    }
    pub(crate) fn from_mode_number(n: i32) -> Option<MouseReporting> {
        Some(match n {
            9 => MouseReporting::X10,
            1000 => MouseReporting::Normal,
            1001 => MouseReporting::Highlight,
            1002 => MouseReporting::ButtonEvent,
            1003 => MouseReporting::AnyEvent,
            _ => return None,
        })
    }
}

/// Mouse report encoding (DECSET 1005, 1006, 1015); synchronized by mosh (MOSH-PROTOCOL.md 8.2 step
/// 14).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum MouseEncoding {
    #[default]
    Default,
    Utf8,
    Sgr,
    Urxvt,
}

impl MouseEncoding {
    pub fn mode_number(self) -> Option<u16> {
        match self {
            MouseEncoding::Default => None,
            MouseEncoding::Utf8 => Some(1005),
            MouseEncoding::Sgr => Some(1006),
            MouseEncoding::Urxvt => Some(1015),
        }
    }
    pub(crate) fn from_mode_number(n: i32) -> Option<MouseEncoding> {
        Some(match n {
            1005 => MouseEncoding::Utf8,
            1006 => MouseEncoding::Sgr,
            1015 => MouseEncoding::Urxvt,
            _ => return None,
        })
    }
}

/// Modes as mosh's `DrawState` keeps them. The first group travels in the display diff; the
/// second only steers the emulator and never leaves it (MOSH-PROTOCOL.md 8.2, "Never emitted").
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Modes {
    pub cursor_visible: bool,
    pub reverse_video: bool,
    pub bracketed_paste: bool,
    pub mouse_reporting: MouseReporting,
    pub mouse_focus_events: bool,
    pub mouse_encoding: MouseEncoding,
    /// DECSET 1007: compared by mosh but never transmitted.
    pub mouse_alternate_scroll: bool,
    pub autowrap: bool,
    pub origin: bool,
    pub insert: bool,
    /// DECCKM: tracked, not synchronized (clients always send `ESC O A..D`, MOSH-PROTOCOL.md 7.1).
    pub application_cursor_keys: bool,
}

impl Default for Modes {
    fn default() -> Self {
        Modes {
            cursor_visible: true,
            reverse_video: false,
            bracketed_paste: false,
            mouse_reporting: MouseReporting::None,
            mouse_focus_events: false,
            mouse_encoding: MouseEncoding::Default,
            mouse_alternate_scroll: false,
            autowrap: true,
            origin: false,
            insert: false,
            application_cursor_keys: false,
        }
    }
}

/// What DECSC saves (mosh's `SavedCursor`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct SavedCursor {
    pub row: usize,
    pub col: usize,
    pub pen: Renditions,
    pub autowrap: bool,
    pub origin: bool,
}

impl Default for SavedCursor {
    fn default() -> Self {
        SavedCursor { row: 0, col: 0, pen: Renditions::DEFAULT, autowrap: true, origin: false }
    }
}

/// The screen state mosh synchronizes, plus the emulator's local state (tabs, margins, saved
/// cursor).
///
/// Equality (`==`) compares what mosh's display diff carries: cells and wrap flags, cursor,
/// pen, visible modes, titles, clipboard and bell count; not tab stops, margins, saved cursor,
/// origin/insert/autowrap or DECCKM.
#[derive(Clone)]
pub struct Framebuffer {
    pub(crate) width: usize,
    pub(crate) height: usize,
    pub(crate) rows: Vec<Arc<Row>>,
    pub(crate) cursor_row: usize,
    pub(crate) cursor_col: usize,
    /// The cell a following combining character joins; `None` after a resize moved it off screen.
    pub(crate) combining: Option<(usize, usize)>,
    pub(crate) next_print_will_wrap: bool,
    pub(crate) scroll_top: usize,
    pub(crate) scroll_bottom: usize,
    pub(crate) pen: Renditions,
    pub(crate) saved: SavedCursor,
    pub(crate) default_tabs: bool,
    pub(crate) tabs: Arc<Vec<bool>>,
    pub(crate) modes: Modes,
    pub(crate) title: Arc<str>,
    pub(crate) icon_name: Arc<str>,
    pub(crate) title_initialized: bool,
    pub(crate) clipboard: Arc<str>,
    pub(crate) bell_count: u32,
    /// An application switched to the alternate screen (DECSET 47, 1047, 1049). mosh draws both
    /// screens in one and so does this emulator; the flag only keeps the alternate screen's
    /// scrolling out of a history. Not compared, not carried by a diff.
    pub(crate) alternate_screen: bool,
    /// Rows that left the top of the main screen by scrolling, in order, kept only while
    /// `keep_scrolled_off` is set (a history recorder takes them; a client's states keep none, so
    /// cloning them costs nothing). Not compared, not carried by a diff.
    pub(crate) scrolled_off: Vec<Arc<Row>>,
    pub(crate) keep_scrolled_off: bool,
    /// A recorder's main screen while the alternate one is shown (see [`switch_screen`]).
    ///
    /// [`switch_screen`]: Framebuffer::switch_screen
    pub(crate) main_screen: Option<Vec<Arc<Row>>>,
}

impl Framebuffer {
    /// mosh's initial blank framebuffer: empty cells, cursor (0, 0) visible, default pen and modes.
    ///
    /// Sizes of 0 are raised to 1 (mosh asserts on them).
    pub fn new(size: Size) -> Framebuffer {
        let width = usize::from(size.cols.max(1));
        let height = usize::from(size.rows.max(1));
        let blank = Arc::new(Row::new(width, Color::Default));
        Framebuffer {
            width,
            height,
            rows: vec![blank; height],
            cursor_row: 0,
            cursor_col: 0,
            combining: Some((0, 0)),
            next_print_will_wrap: false,
            scroll_top: 0,
            scroll_bottom: height - 1,
            pen: Renditions::DEFAULT,
            saved: SavedCursor::default(),
            default_tabs: true,
            tabs: Arc::new(default_tabs(0, width, Vec::new())),
            modes: Modes::default(),
            title: Arc::from(""),
            icon_name: Arc::from(""),
            title_initialized: false,
            clipboard: Arc::from(""),
            bell_count: 0,
            alternate_screen: false,
            scrolled_off: Vec::new(),
            keep_scrolled_off: false,
            main_screen: None,
        }
    }

    pub fn size(&self) -> Size {
        // Sizes come from u16 and never grow past them.
        Size { cols: self.width as u16, rows: self.height as u16 }
    }
    pub fn width(&self) -> usize {
        self.width
    }
    pub fn height(&self) -> usize {
        self.height
    }
    pub fn cursor(&self) -> Pos {
        Pos { row: self.cursor_row as u16, col: self.cursor_col as u16 }
    }
    pub fn rows(&self) -> &[Arc<Row>] {
        &self.rows
    }
    pub fn row(&self, row: usize) -> Option<&Row> {
        self.rows.get(row).map(|r| &**r)
    }
    pub fn cell(&self, pos: Pos) -> Option<&Cell> {
        self.rows.get(usize::from(pos.row))?.cells.get(usize::from(pos.col))
    }
    pub fn modes(&self) -> &Modes {
        &self.modes
    }
    /// The current pen (what the next printed character gets).
    pub fn pen(&self) -> Renditions {
        self.pen
    }
    pub fn cursor_visible(&self) -> bool {
        self.modes.cursor_visible
    }
    /// Whether a printed character would first wrap to the next row (cursor "in column width+1").
    pub fn wrap_pending(&self) -> bool {
        self.next_print_will_wrap
    }
    pub fn reverse_video(&self) -> bool {
        self.modes.reverse_video
    }
    /// Wrap pastes in `ESC[200~ .. ESC[201~` only while this is on (MOSH-PROTOCOL.md 7.1).
    pub fn bracketed_paste(&self) -> bool {
        self.modes.bracketed_paste
    }
    pub fn mouse_reporting(&self) -> MouseReporting {
        self.modes.mouse_reporting
    }
    pub fn mouse_encoding(&self) -> MouseEncoding {
        self.modes.mouse_encoding
    }
    pub fn focus_events(&self) -> bool {
        self.modes.mouse_focus_events
    }
    pub fn title(&self) -> &str {
        &self.title
    }
    pub fn icon_name(&self) -> &str {
        &self.icon_name
    }
    /// False until the application set a title or icon name with an OSC.
    pub fn title_initialized(&self) -> bool {
        self.title_initialized
    }
    /// The last OSC 52 payload (what followed `52;c;`, normally base64).
    pub fn clipboard(&self) -> &str {
        &self.clipboard
    }
    /// How often the bell rang; a front end rings when it grows.
    pub fn bell_count(&self) -> u32 {
        self.bell_count
    }
    /// The scroll region, inclusive rows.
    pub fn scroll_region(&self) -> (usize, usize) {
        (self.scroll_top, self.scroll_bottom)
    }

    /// Equal as drawn (mosh's `Complete::compare`): cells compared with [`Cell::looks_like`],
    /// only cells that are not hidden under a wide cell, wrap flags of all rows but the last
    /// (no diff can convey that one), and everything else `==` compares but the bell count (a
    /// diff rings once however often the bell rang). Returns the first difference found.
    pub fn looks_like(&self, other: &Framebuffer) -> Result<(), String> {
        if self.size() != other.size() {
            return Err(format!("size {:?} vs {:?}", self.size(), other.size()));
        }
        for (y, (a, b)) in self.rows.iter().zip(&other.rows).enumerate() {
            let mut x = 0;
            while x < self.width {
                let (ca, cb) = (&a.cells[x], &b.cells[x]);
                if !ca.looks_like(cb) {
                    return Err(format!("cell ({y}, {x}): {ca:?} vs {cb:?}"));
                }
                x += ca.width();
            }
            if y + 1 < self.height && a.wrap != b.wrap {
                return Err(format!("wrap flag of row {y}: {} vs {}", a.wrap, b.wrap));
            }
        }
        if !self.same_state(other, false) {
            return Err(format!(
                "state differs:\n{:?}\nvs\n{:?}",
                self.state_summary(),
                other.state_summary()
            ));
        }
        Ok(())
    }

    /// [`looks_like`](Self::looks_like) with the rows' wrap flags left out: the rows where only
    /// the flag differs, or the first difference of another kind. mosh's renderer keeps the flag
    /// it believes for a last row scrolled up (the terminal's own last row cannot have it set),
    /// so its output can differ from the frame there, as mosh-client's screen does.
    pub fn wrap_flags_differing(&self, other: &Framebuffer) -> Result<Vec<usize>, String> {
        let mut same_flags = self.clone();
        let mut rows = Vec::new();
        for (y, (mine, theirs)) in same_flags.rows.iter_mut().zip(&other.rows).enumerate() {
            if mine.wrap != theirs.wrap {
                Arc::make_mut(mine).wrap = theirs.wrap;
                rows.push(y);
            }
        }
        same_flags.looks_like(other).map(|()| rows)
    }

    /// `exact_bell`: compare bell counts exactly; otherwise not at all (a diff rings the bell once
    /// however often it rang, so a receiver only learns that it rang).
    fn same_state(&self, other: &Framebuffer, exact_bell: bool) -> bool {
        self.cursor() == other.cursor()
            && self.pen == other.pen
            && self.modes.cursor_visible == other.modes.cursor_visible
            && self.modes.reverse_video == other.modes.reverse_video
            && self.modes.bracketed_paste == other.modes.bracketed_paste
            && self.modes.mouse_reporting == other.modes.mouse_reporting
            && self.modes.mouse_focus_events == other.modes.mouse_focus_events
            && self.modes.mouse_encoding == other.modes.mouse_encoding
            && self.title_initialized == other.title_initialized
            && (!self.title_initialized
                || (self.title == other.title && self.icon_name == other.icon_name))
            && self.clipboard == other.clipboard
            && (!exact_bell || self.bell_count == other.bell_count)
    }

    fn state_summary(&self) -> String {
        format!(
            "cursor {:?} pen {:?} modes {:?} title {:?}/{:?} ({}) clipboard {:?} bell {}",
            self.cursor(),
            self.pen,
            self.modes,
            self.title,
            self.icon_name,
            self.title_initialized,
            self.clipboard,
            self.bell_count
        )
    }

    // ---- operations of mosh's Framebuffer / DrawState, used by the emulator ----

    pub(crate) fn bg(&self) -> Color {
        self.pen.bg
    }
    pub(crate) fn new_row(&self) -> Arc<Row> {
        Arc::new(Row::new(self.width, self.bg()))
    }
    #[inline]
    pub(crate) fn row_mut(&mut self, row: usize) -> &mut Row {
        Arc::make_mut(&mut self.rows[row])
    }
    pub(crate) fn reset_cell(&mut self, row: usize, col: usize) {
        let bg = self.bg();
        self.row_mut(row).reset_cell(col, bg);
    }
    pub(crate) fn reset_row(&mut self, row: usize) {
        let bg = self.bg();
        let width = self.width;
        let r = self.row_mut(row);
        *r = Row::new(width, bg);
    }
    pub(crate) fn limit_top(&self) -> usize {
        if self.modes.origin { self.scroll_top } else { 0 }
    }
    pub(crate) fn limit_bottom(&self) -> usize {
        if self.modes.origin { self.scroll_bottom } else { self.height - 1 }
    }
    fn new_grapheme(&mut self) {
        self.combining = Some((self.cursor_row, self.cursor_col));
    }
    /// Clamps a signed position into the screen (mosh's `snap_cursor_to_border`).
    #[inline]
    fn snap(&mut self, row: i64, col: i64) {
        let row = row.clamp(self.limit_top() as i64, self.limit_bottom() as i64);
        let col = col.clamp(0, self.width as i64 - 1);
        self.cursor_row = row as usize;
        self.cursor_col = col as usize;
    }
    /// mosh's `DrawState::move_row`: absolute rows count from the top margin in origin mode.
    pub(crate) fn move_row(&mut self, n: i64, relative: bool) {
        let row = if relative { self.cursor_row as i64 + n } else { n + self.limit_top() as i64 };
        self.snap(row, self.cursor_col as i64);
        self.new_grapheme();
        self.next_print_will_wrap = false;
    }
    /// mosh's `DrawState::move_col`. An `implicit` move is the advance after printing: it
    /// remembers the printed cell for combining characters and sets the pending wrap when it
    /// runs past the last column (the cursor itself stays on the last column).
    #[inline]
    pub(crate) fn move_col(&mut self, n: i64, relative: bool, implicit: bool) {
        if implicit {
            self.new_grapheme();
        }
        let col = if relative { self.cursor_col as i64 + n } else { n };
        if implicit {
            self.next_print_will_wrap = col >= self.width as i64;
        }
        self.snap(self.cursor_row as i64, col);
        if !implicit {
            self.new_grapheme();
            self.next_print_will_wrap = false;
        }
    }
    /// Scrolls the region up (`n` > 0) or down (`n` < 0), mosh's `Framebuffer::scroll`.
    pub(crate) fn scroll(&mut self, n: i64) {
        if n > 0 && self.keep_scrolled_off && self.scroll_top == 0 && !self.alternate_screen {
            // What a terminal with scrollback keeps: rows scrolled off the top of the screen.
            let leaving = (n as usize).min(self.scroll_bottom + 1);
            self.scrolled_off.extend(self.rows[..leaving].iter().cloned());
        }
        if n >= 0 {
            self.delete_lines(self.scroll_top, n as usize);
        } else {
            self.insert_lines(self.scroll_top, n.unsigned_abs() as usize);
        }
    }
    /// Moves down (or up) `rows`, scrolling the region when crossing its edge from inside.
    pub(crate) fn move_rows_autoscroll(&mut self, rows: i64) {
        let cur = self.cursor_row as i64;
        let (top, bottom) = (self.scroll_top as i64, self.scroll_bottom as i64);
        // Outside the scroll region nothing scrolls (mosh).
        if cur < top || cur > bottom {
            self.move_row(rows, true);
            return;
        }
        if cur + rows > bottom {
            let n = cur + rows - bottom;
            self.scroll(n);
            self.move_row(-n, true);
        } else if cur + rows < top {
            let n = cur + rows - top;
            self.scroll(n);
            self.move_row(-n, true);
        }
        self.move_row(rows, true);
    }
    pub(crate) fn insert_lines(&mut self, before_row: usize, count: usize) {
        if before_row < self.scroll_top || before_row > self.scroll_bottom + 1 {
            return;
        }
        let n = (self.scroll_bottom + 1 - before_row).min(count);
        if n == 0 {
            return;
        }
        let end = self.scroll_bottom + 1;
        self.rows.drain(end - n..end);
        let blank = self.new_row();
        self.rows.splice(before_row..before_row, std::iter::repeat_n(blank, n));
    }
    pub(crate) fn delete_lines(&mut self, row: usize, count: usize) {
        if row < self.scroll_top || row > self.scroll_bottom {
            return;
        }
        let n = (self.scroll_bottom + 1 - row).min(count);
        if n == 0 {
            return;
        }
        self.rows.drain(row..row + n);
        let blank = self.new_row();
        let at = self.scroll_bottom + 1 - n;
        self.rows.splice(at..at, std::iter::repeat_n(blank, n));
    }
    pub(crate) fn set_scrolling_region(&mut self, top: usize, bottom: usize) {
        self.scroll_top = top;
        self.scroll_bottom = bottom.min(self.height - 1).max(self.scroll_top);
        if self.modes.origin {
            self.snap(self.cursor_row as i64, self.cursor_col as i64);
            self.new_grapheme();
        }
    }
    pub(crate) fn set_tab(&mut self) {
        let col = self.cursor_col;
        if let Some(t) = Arc::make_mut(&mut self.tabs).get_mut(col) {
            *t = true;
        }
    }
    pub(crate) fn clear_tab(&mut self, col: usize) {
        if let Some(t) = Arc::make_mut(&mut self.tabs).get_mut(col) {
            *t = false;
        }
    }
    /// The `count`-th tab stop right (count > 0) or left (count < 0) of the cursor.
    /// Right: `None` when there is none (the caller goes to the last column). Left: column 0.
    pub(crate) fn next_tab(&self, count: i64) -> Option<usize> {
        if count >= 0 {
            let mut count = count;
            for i in self.cursor_col + 1..self.width {
                if self.tabs[i] {
                    count -= 1;
                    if count == 0 {
                        return Some(i);
                    }
                }
            }
            return None;
        }
        let mut count = count;
        for i in (1..self.cursor_col).rev() {
            if self.tabs[i] {
                count += 1;
                if count == 0 {
                    return Some(i);
                }
            }
        }
        Some(0)
    }
    pub(crate) fn save_cursor(&mut self) {
        self.saved = SavedCursor {
            row: self.cursor_row,
            col: self.cursor_col,
            pen: self.pen,
            autowrap: self.modes.autowrap,
            origin: self.modes.origin,
        };
    }
    pub(crate) fn restore_cursor(&mut self) {
        let s = self.saved;
        self.pen = s.pen;
        self.modes.autowrap = s.autowrap;
        self.modes.origin = s.origin;
        // The saved position may be off screen after a resize.
        self.snap(s.row as i64, s.col as i64);
        self.new_grapheme();
    }
    /// RIS (mosh's `Framebuffer::reset`): everything but the bell count and the icon name.
    pub(crate) fn reset(&mut self) {
        let fresh = Framebuffer::new(self.size());
        let keep_icon = std::mem::take(&mut self.icon_name);
        let keep_init = self.title_initialized;
        let bell = self.bell_count;
        let scrolled_off = std::mem::take(&mut self.scrolled_off);
        let keep_scrolled_off = self.keep_scrolled_off;
        *self = fresh;
        self.icon_name = keep_icon;
        self.title_initialized = keep_init;
        self.bell_count = bell;
        // A history recorder's, not the terminal's: a reset does not take it back.
        self.scrolled_off = scrolled_off;
        self.keep_scrolled_off = keep_scrolled_off;
    }
    /// DECSET/DECRST 47, 1047, 1049: the alternate screen. mosh ignores it (both screens are one
    /// and a full-screen program's last screen stays after it quits), and so does a client's
    /// emulator, which must draw what mosh-server draws. A history recorder (`keep_scrolled_off`)
    /// does what xterm does instead: the main screen is put aside while the program runs and
    /// comes back when it quits, so the program's screens never scroll into the history and the
    /// lines it covered are not lost.
    pub(crate) fn switch_screen(&mut self, mode: i32, on: bool) {
        if !self.keep_scrolled_off {
            self.alternate_screen = on;
            return;
        }
        if on && !self.alternate_screen {
            if mode == 1049 {
                self.save_cursor();
            }
            let blank = Arc::new(Row::new(self.width, Color::Default));
            self.main_screen = Some(std::mem::replace(&mut self.rows, vec![blank; self.height]));
        } else if !on && self.alternate_screen {
            // A main screen of another size (resized meanwhile) is not worth reflowing here.
            if let Some(rows) = self.main_screen.take().filter(|r| {
                r.len() == self.height && r.iter().all(|row| row.cells().len() == self.width)
            }) {
                self.rows = rows;
            }
            if mode == 1049 {
                self.restore_cursor();
            }
        }
        self.alternate_screen = on;
    }
    /// DECSTR (mosh's `soft_reset`).
    pub(crate) fn soft_reset(&mut self) {
        self.modes.insert = false;
        self.modes.origin = false;
        self.modes.cursor_visible = true;
        self.modes.application_cursor_keys = false;
        self.set_scrolling_region(0, self.height - 1);
        self.pen = Renditions::DEFAULT;
        self.saved = SavedCursor::default();
    }
    /// mosh's `Framebuffer::resize`: keep what fits, add blank rows and cells (in the pen's
    /// background), clear wrap flags when the width changes, reset the scroll region, clamp the
    /// cursor. This screen as a terminal of `size` shows it: cut or padded as mosh resizes a screen
    /// (rows kept from the top, columns from the left, the cursor brought inside). A page draws the
    /// server's screen into its terminal at once after a resize, before the server's screen has
    /// the new size; drawn whole, the rows below the terminal's bottom would scroll it.
    pub fn fitted(&self, size: Size) -> Framebuffer {
        let mut fb = self.clone();
        if fb.size() != size {
            fb.resize(size);
        }
        fb
    }

    pub(crate) fn resize(&mut self, size: Size) {
        let (width, height) = (usize::from(size.cols.max(1)), usize::from(size.rows.max(1)));
        let (old_width, old_height) = (self.width, self.height);
        if width != old_width || height != old_height {
            self.scroll_top = 0;
            self.scroll_bottom = height - 1;
        }
        let tabs = Arc::make_mut(&mut self.tabs);
        if self.default_tabs {
            let old = std::mem::take(tabs);
            *tabs = default_tabs(old_width.min(width), width, old);
        } else {
            tabs.resize(width, false);
        }
        self.width = width;
        self.height = height;
        self.snap(self.cursor_row as i64, self.cursor_col as i64);
        if matches!(self.combining, Some((r, c)) if c >= width || r >= height) {
            self.combining = None;
        }
        if old_height != height {
            let blank = self.new_row();
            self.rows.resize(height, blank);
        }
        if old_width != width {
            let bg = self.bg();
            for row in self.rows.iter_mut().take(old_height.min(height)) {
                Arc::make_mut(row).resize(width, bg);
            }
        }
    }
}

/// Tab stops every 8 columns from `from` on, keeping `old` below it.
fn default_tabs(from: usize, width: usize, mut old: Vec<bool>) -> Vec<bool> {
    old.resize(width, false);
    for (i, t) in old.iter_mut().enumerate().skip(from) {
        *t = i % 8 == 0;
    }
    old
}

impl PartialEq for Framebuffer {
    fn eq(&self, other: &Framebuffer) -> bool {
        self.width == other.width
            && self.height == other.height
            && self.rows.iter().zip(&other.rows).all(|(a, b)| Arc::ptr_eq(a, b) || a == b)
            && self.same_state(other, true)
    }
}

impl Eq for Framebuffer {}

impl fmt::Debug for Framebuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Framebuffer {}x{} {}", self.width, self.height, self.state_summary())?;
        for (y, row) in self.rows.iter().enumerate() {
            if !row.is_default_blank() {
                writeln!(f, "  {y:3}: {row:?}")?;
            }
        }
        Ok(())
    }
}
