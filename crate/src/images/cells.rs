//! An image's size in cells and the cursor moves that stand in for it.
//!
//! The page draws images with xterm.js's image addon, so the layout follows it: an image takes
//! ceil(width / cell width) columns and ceil(height / cell height) rows from the cursor, with a
//! line feed between its rows (scrolling at the bottom); after a SIXEL image the cursor is on the
//! image's last row at the column it started in (as a VT340); after an iTerm2 or kitty image it is
//! on the last row just right of the image (kitty's C=1 leaves it where it was).

/// A cell's width in pixels when the pty's winsize says none (ws_xpixel 0).
pub const DEFAULT_CELL_WIDTH: u16 = 10;
/// A cell's height in pixels when the pty's winsize says none (ws_ypixel 0).
pub const DEFAULT_CELL_HEIGHT: u16 = 20;

/// The terminal's size in cells and a cell's in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub cols: u16,
    pub rows: u16,
    pub cell_width: u16,
    pub cell_height: u16,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry {
            cols: 80,
            rows: 24,
            cell_width: DEFAULT_CELL_WIDTH,
            cell_height: DEFAULT_CELL_HEIGHT,
        }
    }
}

impl Geometry {
    /// From a pty's winsize: cells from ws_col × ws_row, the cell's pixels from ws_xpixel ×
    /// ws_ypixel when set, else the defaults.
    pub fn from_winsize(cols: u16, rows: u16, xpixel: u16, ypixel: u16) -> Geometry {
        let (cols, rows) = (cols.max(1), rows.max(1));
        let per = |px: u16, n: u16, default: u16| match px / n {
            0 => default,
            c => c,
        };
        Geometry {
            cols,
            rows,
            cell_width: per(xpixel, cols, DEFAULT_CELL_WIDTH),
            cell_height: per(ypixel, rows, DEFAULT_CELL_HEIGHT),
        }
    }

    /// Cells that `width` × `height` pixels take: (cols, rows), at least 1 each, at most u16.
    pub fn cells_of(&self, width: u32, height: u32) -> (u16, u16) {
        (ceil_cells(width, self.cell_width), ceil_cells(height, self.cell_height))
    }
}

fn ceil_cells(px: u32, cell: u16) -> u16 {
    let n = px.div_ceil(u32::from(cell.max(1))).max(1);
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// Where the cursor is after the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorAfter {
    /// On the image's last row, in the column it started in (SIXEL).
    BelowLeft,
    /// On the image's last row, right of its last column (iTerm2, kitty).
    BelowRight,
    /// Where it was (kitty C=1, a transmission without placement).
    Stay,
}

/// The bytes that move the cursor as the image does: a line feed per row after the first (they
/// scroll at the bottom as the image does), then for [`CursorAfter::BelowRight`] a move right by
/// its width (CUF stops at the right margin).
pub fn layout_bytes(rows: u16, cols: u16, cursor: CursorAfter) -> Vec<u8> {
    let mut out = Vec::new();
    if cursor == CursorAfter::Stay {
        return out;
    }
    out.resize(usize::from(rows.saturating_sub(1)), b'\n');
    if cursor == CursorAfter::BelowRight && cols > 0 {
        out.extend_from_slice(format!("\x1b[{cols}C").as_bytes());
    }
    out
}

/// iTerm2's width= / height= : `N` cells, `Npx` pixels, `N%` of the terminal, `auto` (None).
/// Returns pixels.
pub fn iterm_dimension(spec: &str, total_px: u32, cell_px: u16) -> Option<u32> {
    let spec = spec.trim();
    let num = |s: &str| s.trim().parse::<u32>().ok();
    if spec.is_empty() || spec == "auto" {
        None
    } else if let Some(p) = spec.strip_suffix('%') {
        num(p).map(|p| (u64::from(p.min(10_000)) * u64::from(total_px) / 100) as u32)
    } else if let Some(p) = spec.strip_suffix("px") {
        num(p)
    } else {
        num(spec).map(|n| n.saturating_mul(u32::from(cell_px)))
    }
}

/// The cells an iTerm2 image takes (as xterm.js's addon sizes it): the given width / height
/// (one given: the other keeps the aspect ratio; both and preserveAspectRatio: width rules),
/// or with neither its own size, shrunk to fit the terminal less one row.
pub fn iterm_cells(
    g: &Geometry,
    width: u32,
    height: u32,
    want_w: Option<u32>,
    want_h: Option<u32>,
    preserve: bool,
) -> (u16, u16) {
    let (w, h) = (f64::from(width.max(1)), f64::from(height.max(1)));
    let (cw, ch) = (f64::from(g.cell_width.max(1)), f64::from(g.cell_height.max(1)));
    let (tw, th) = (cw * f64::from(g.cols), ch * f64::from(g.rows));
    let (dw, dh) = match (want_w.map(f64::from), want_h.map(f64::from)) {
        (None, None) => {
            let f = (tw / w).min(((th - ch) / h).max(0.0));
            if f < 1.0 { (w * f, h * f) } else { (w, h) }
        }
        (None, Some(rh)) => (w * rh / h, rh),
        (Some(rw), None) => (rw, h * rw / w),
        (Some(rw), Some(rh)) => {
            if preserve {
                (rw, h * rw / w)
            } else {
                (rw, rh)
            }
        }
    };
    let cells = |px: f64, cell: f64| ((px / cell).ceil().clamp(1.0, f64::from(u16::MAX))) as u16;
    (cells(dw, cw), cells(dh, ch))
}

/// The cells a kitty placement takes: c= and r= as given, one given: the other from the aspect
/// ratio, neither: the image's own size.
pub fn kitty_cells(
    g: &Geometry,
    width: u32,
    height: u32,
    c: Option<u32>,
    r: Option<u32>,
) -> (u16, u16) {
    let (w, h) = (f64::from(width.max(1)), f64::from(height.max(1)));
    let (cw, ch) = (f64::from(g.cell_width.max(1)), f64::from(g.cell_height.max(1)));
    let clamp = |v: f64| (v.ceil().clamp(1.0, f64::from(u16::MAX))) as u16;
    match (c, r) {
        (Some(c), Some(r)) => (clamp(f64::from(c)), clamp(f64::from(r))),
        (Some(c), None) => (clamp(f64::from(c)), clamp(h / w * f64::from(c) * cw / ch)),
        (None, Some(r)) => (clamp(w / h * f64::from(r) * ch / cw), clamp(f64::from(r))),
        (None, None) => g.cells_of(width, height),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_round_up_and_winsize_sets_the_cell() {
        let g = Geometry::from_winsize(80, 24, 800, 480);
        assert_eq!((g.cell_width, g.cell_height), (10, 20));
        assert_eq!(g.cells_of(101, 40), (11, 2));
        assert_eq!(g.cells_of(0, 0), (1, 1));
        let g = Geometry::from_winsize(80, 24, 0, 0);
        assert_eq!((g.cell_width, g.cell_height), (DEFAULT_CELL_WIDTH, DEFAULT_CELL_HEIGHT));
    }

    #[test]
    fn layout_moves_down_rows_less_one_and_right_for_iterm() {
        assert_eq!(layout_bytes(3, 5, CursorAfter::BelowLeft), b"\n\n");
        assert_eq!(layout_bytes(1, 5, CursorAfter::BelowRight), b"\x1b[5C");
        assert_eq!(layout_bytes(3, 5, CursorAfter::Stay), b"");
    }

    #[test]
    fn iterm_sizes() {
        let g = Geometry { cols: 80, rows: 24, cell_width: 10, cell_height: 20 };
        assert_eq!(iterm_dimension("10", 800, 10), Some(100));
        assert_eq!(iterm_dimension("50%", 800, 10), Some(400));
        assert_eq!(iterm_dimension("33px", 800, 10), Some(33));
        assert_eq!(iterm_dimension("auto", 800, 10), None);
        assert_eq!(iterm_cells(&g, 100, 40, None, None, true), (10, 2));
        // Too tall: shrunk to 23 rows' height.
        assert_eq!(iterm_cells(&g, 100, 4600, None, None, true), (1, 23));
        assert_eq!(iterm_cells(&g, 100, 40, Some(200), None, true), (20, 4));
        assert_eq!(kitty_cells(&g, 100, 40, Some(5), Some(7)), (5, 7));
        assert_eq!(kitty_cells(&g, 100, 40, None, None), (10, 2));
    }
}
