//! The marker that says where an image is in a screen that has no images: mosh-server's.
//!
//! The page draws mosh-server's screen (frames), not the byte stream, so it cannot count lines as
//! the recorder does. The recorder therefore also writes, in the image's top-left cells, two
//! spaces that mosh-server keeps like any cell: the first with the foreground truecolour
//! [`MAGIC`], the second with the image's id as its foreground's 24 bits. Spaces draw nothing
//! whatever their foreground, so the text screen is unchanged (mosh-client shows the same), and
//! the image drawn over its cells covers them. Then the SGR that restores the program's pen, and
//! the cursor back to the image's first column (CHA: after the second space at the last column
//! the cursor waits to wrap, where a relative move would land one column off).
//!
//! Any screen (the page's, a history line's cells) is searched with [`find`].

use crate::terminal::{Cell, Color, Framebuffer, Renditions};

/// The first marker cell's foreground: unlikely on a space in any program's output (and a false
/// find only names an id the relay does not have).
pub const MAGIC: (u8, u8, u8) = (0x54, 0x72, 0x6e);

/// Largest image id a marker carries (24 bits).
pub const MAX_ID: u64 = 0xff_ffff;

/// The bytes that put the marker for image `id` at the cursor (`col`, 0-based, of a screen
/// `width` columns wide, with the program's `pen`), leaving the cursor and pen as they were.
/// Empty when the marker does not fit (fewer than two columns left) or the id is too large.
pub fn marker_bytes(id: u64, pen: Renditions, col: u16, width: u16) -> Vec<u8> {
    if id == 0 || id > MAX_ID || u32::from(col) + 2 > u32::from(width) {
        return Vec::new();
    }
    let (r, g, b) = ((id >> 16) as u8, (id >> 8) as u8, id as u8);
    let mut out = Vec::with_capacity(64);
    // The background stays the pen's, so the cells look as the row around them until the image
    // covers them; no attributes (inverse would show the foreground).
    let cell = |fg: Color, out: &mut Vec<u8>| {
        Renditions { fg, ..Renditions::background_only(pen.bg) }.write_sgr(out);
        out.push(b' ');
    };
    cell(Color::Rgb(MAGIC.0, MAGIC.1, MAGIC.2), &mut out);
    cell(Color::Rgb(r, g, b), &mut out);
    pen.write_sgr(&mut out);
    out.extend_from_slice(format!("\x1b[{}G", u32::from(col) + 1).as_bytes());
    out
}

/// The markers in one row's cells: (column, image id), left to right.
pub fn find(cells: &[Cell]) -> Vec<(u16, u64)> {
    let mut found = Vec::new();
    for (col, pair) in cells.windows(2).enumerate() {
        if let (Color::Rgb(r, g, b), Color::Rgb(i, j, k)) =
            (pair[0].renditions.fg, pair[1].renditions.fg)
            && (r, g, b) == MAGIC
            && pair[0].is_blank()
            && pair[1].is_blank()
        {
            let id = u64::from(i) << 16 | u64::from(j) << 8 | u64::from(k);
            if id != 0 {
                found.push((u16::try_from(col).unwrap_or(u16::MAX), id));
            }
        }
    }
    found
}

/// Blanks every marker in `fb` (its two cells keep their background and lose their colours), so
/// a screen rendered from it names no image: what the relay sends a viewer whose share does not
/// include the session's pictures (docs/IMAGES.md). The text screen is unchanged (they are
/// spaces); rows without a marker are not copied. How many markers it blanked.
pub fn hide(fb: &mut Framebuffer) -> usize {
    let mut hidden = 0;
    for row in 0..fb.height() {
        let found = find(fb.rows()[row].cells());
        if found.is_empty() {
            continue;
        }
        let cells = fb.row_mut(row).cells_mut();
        for (col, _) in &found {
            for cell in &mut cells[usize::from(*col)..usize::from(*col) + 2] {
                cell.renditions.fg = Color::Default;
            }
        }
        hidden += found.len();
    }
    hidden
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::{Attrs, Emulator, Size};
    use std::sync::Arc;

    fn screen(bytes: &[u8]) -> Emulator {
        let mut e = Emulator::new(Size { cols: 20, rows: 4 });
        e.feed(bytes);
        e
    }

    #[test]
    fn a_marker_is_found_where_it_was_written_and_leaves_cursor_pen_and_text() {
        let pen = Renditions { attrs: Attrs::BOLD, fg: Color::Palette(2), bg: Color::Rgb(1, 2, 3) };
        let mut bytes = b"ab\x1b[1;32;48;2;1;2;3m".to_vec();
        bytes.extend(marker_bytes(0x01_02_03, pen, 2, 20));
        let e = screen(&bytes);
        let fb = e.framebuffer();
        assert_eq!(fb.cursor().col, 2);
        assert_eq!(fb.pen(), pen);
        assert_eq!(find(fb.row(0).unwrap().cells()), vec![(2, 0x01_02_03)]);
        assert_eq!(fb.row(0).unwrap().cells()[2].renditions.bg, Color::Rgb(1, 2, 3));
        // Text after it overwrites the marker: gone.
        let mut e = e;
        e.feed(b"x");
        assert!(find(e.framebuffer().row(0).unwrap().cells()).is_empty());
    }

    #[test]
    fn at_the_last_two_columns_the_cursor_comes_back_exactly() {
        let bytes =
            [b"\x1b[1;19H".as_slice(), &marker_bytes(7, Renditions::DEFAULT, 18, 20)].concat();
        let e = screen(&bytes);
        assert_eq!(e.framebuffer().cursor().col, 18);
        assert_eq!(find(e.framebuffer().row(0).unwrap().cells()), vec![(18, 7)]);
        // One column left, an id of 0 or over 24 bits: no marker.
        assert!(marker_bytes(7, Renditions::DEFAULT, 19, 20).is_empty());
        assert!(marker_bytes(0, Renditions::DEFAULT, 0, 20).is_empty());
        assert!(marker_bytes(MAX_ID + 1, Renditions::DEFAULT, 0, 20).is_empty());
    }

    #[test]
    fn letters_in_the_magic_colour_are_no_marker() {
        let e = screen(b"\x1b[38;2;84;114;110mA\x1b[38;2;0;0;9mB \x1b[0m");
        assert!(find(e.framebuffer().row(0).unwrap().cells()).is_empty());
        let e = screen(b"\x1b[38;2;84;114;110m \x1b[38;2;0;0;9m \x1b[0m");
        assert_eq!(find(e.framebuffer().row(0).unwrap().cells()), vec![(0, 9)]);
    }

    #[test]
    fn hidden_markers_are_gone_and_the_text_and_backgrounds_stay() {
        let pen = Renditions { bg: Color::Rgb(1, 2, 3), ..Renditions::DEFAULT };
        let mut bytes = b"ab\x1b[48;2;1;2;3m".to_vec();
        bytes.extend(marker_bytes(5, pen, 2, 20));
        bytes.extend(b"\x1b[0m\r\n\r\ncd");
        bytes.extend(marker_bytes(6, Renditions::DEFAULT, 2, 20));
        let mut e = screen(&bytes);
        let text = |fb: &Framebuffer| -> Vec<String> {
            fb.rows()
                .iter()
                .map(|r| r.cells().iter().map(|c| c.text().to_string()).collect())
                .collect()
        };
        let before = text(e.framebuffer());
        let untouched = Arc::clone(&e.framebuffer().rows()[1]);
        let mut fb = e.framebuffer().clone();
        assert_eq!(hide(&mut fb), 2);
        assert!(fb.rows().iter().all(|r| find(r.cells()).is_empty()), "no marker left");
        assert_eq!(text(&fb), before, "the text is the same");
        assert_eq!(fb.row(0).unwrap().cells()[2].renditions.bg, Color::Rgb(1, 2, 3));
        assert!(Arc::ptr_eq(&fb.rows()[1], &untouched), "a row without a marker is not copied");
        assert_eq!(hide(&mut fb), 0);
        e.feed(b"x");
        assert_eq!(find(e.framebuffer().row(0).unwrap().cells()), vec![(2, 5)], "the copy only");
    }
}
