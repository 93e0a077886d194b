//! Screens as plain text: what tests, the probe and the tmux comparison print and compare.

use std::fmt;

use super::framebuffer::{Framebuffer, Pos};

/// A screen as text lines (trailing blanks trimmed, a wide character once) and the cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScreenText {
    pub rows: Vec<String>,
    pub cursor: Pos,
}

/// The text a terminal would show for `fb`: empty cells as spaces, fallback cells after U+00A0
/// (as mosh draws them), the cell hidden under a wide character skipped.
pub fn screen_text(fb: &Framebuffer) -> ScreenText {
    let rows = fb
        .rows()
        .iter()
        .map(|row| {
            let mut line = String::new();
            let cells = row.cells();
            let mut x = 0;
            while x < cells.len() {
                let cell = &cells[x];
                if cell.is_empty() {
                    line.push(' ');
                } else {
                    if cell.is_fallback() {
                        line.push('\u{a0}');
                    }
                    line.push_str(cell.text());
                }
                x += cell.width();
            }
            line.truncate(line.trim_end_matches(' ').len());
            line
        })
        .collect();
    ScreenText { rows, cursor: fb.cursor() }
}

impl ScreenText {
    /// The text with trailing empty lines dropped, one line per row.
    pub fn trimmed(&self) -> String {
        let end = self.rows.iter().rposition(|r| !r.is_empty()).map_or(0, |i| i + 1);
        self.rows[..end].join("\n")
    }
}

impl fmt::Display for ScreenText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for row in &self.rows {
            writeln!(f, "{row}")?;
        }
        write!(f, "cursor {} {}", self.cursor.row, self.cursor.col)
    }
}
