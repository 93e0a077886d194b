//! Where an image is: the cursor of the emulator that follows the stream (the recorder's), as a
//! line of the history and a column.

use crate::terminal::Emulator;

/// An image's position when it came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    /// The history line (numbered from the session's first, as the history files are) that the
    /// cursor's row is part of, once it scrolls off: `completed` plus the screen's rows above the
    /// cursor's that end a line (a soft-wrapped row continues its line).
    pub line: u64,
    /// The cursor's row on the screen (0 at the top) and column.
    pub row: u16,
    pub col: u16,
    /// On the alternate screen (a full-screen program): not part of the history.
    pub alternate: bool,
}

/// The anchor of an image at `emulator`'s cursor, when `completed` history lines have been
/// written (the next line written gets number `completed`).
pub fn anchor(emulator: &Emulator, completed: u64) -> Anchor {
    let fb = emulator.framebuffer();
    let cursor = fb.cursor();
    let above =
        fb.rows().iter().take(usize::from(cursor.row)).filter(|r| !r.is_wrapped()).count() as u64;
    Anchor {
        line: completed + above,
        row: cursor.row,
        col: cursor.col,
        alternate: emulator.in_alternate_screen(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::Size;

    #[test]
    fn a_soft_wrapped_row_counts_with_its_line() {
        let mut e = Emulator::new(Size { cols: 10, rows: 5 });
        // Line 3 ("a"), line 4 (15 characters: two rows), then the cursor on line 5.
        e.feed(b"a\r\n0123456789abcde\r\n");
        let at = anchor(&e, 3);
        assert_eq!((at.line, at.row, at.col, at.alternate), (5, 3, 0, false));
        e.feed(b"xy\x1b[?1049h");
        let at = anchor(&e, 3);
        assert!(at.alternate);
    }
}
