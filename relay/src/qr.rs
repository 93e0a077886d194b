//! The page's URL as a QR code in the terminal, so a phone or tablet opens it by its camera
//! (`--qr`, or by itself when the URL names an address beyond loopback: see `main.rs`).
//!
//! Text, not an image: Unicode half blocks (`▀`, `▄`, `█` and space) put two rows of modules on
//! one line, so a version-5 code (37 modules, 45 with the quiet zone) takes 23 lines. The code is
//! drawn for a dark terminal: *light* modules and the quiet zone (4 modules, as the standard
//! asks) are the blocks, in the terminal's text colour, and dark modules are the background.
//! Phone cameras read the code inverted too, so it also scans on a light terminal.

use qrcode::{Color, EcLevel, QrCode};

/// The quiet zone around the code, in modules (ISO/IEC 18004 asks for 4).
pub const QUIET_ZONE: usize = 4;

/// The code for `text` as lines of half blocks (each line ends in `\n`), or why it cannot be
/// made (a text too long for any QR version).
pub fn render(text: &str) -> Result<String, qrcode::types::QrError> {
    // Low error correction: a screen is not a crumpled label, and a smaller code fits more
    // terminals (a URL with its 43-character token is a version 5 or 6).
    let code = QrCode::with_error_correction_level(text.as_bytes(), EcLevel::L)?;
    let colors = code.to_colors();
    let width = code.width();
    let size = width + 2 * QUIET_ZONE;
    // Light (drawn) or not, in quiet-zone coordinates; rows past the bottom are not drawn.
    let light = |x: usize, y: usize| -> bool {
        if y >= size {
            return false;
        }
        let (Some(cx), Some(cy)) = (x.checked_sub(QUIET_ZONE), y.checked_sub(QUIET_ZONE)) else {
            return true;
        };
        if cx >= width || cy >= width {
            return true;
        }
        colors[cy * width + cx] == Color::Light
    };
    let mut out = String::with_capacity((size + 1) * size.div_ceil(2) * 3);
    for y in (0..size).step_by(2) {
        for x in 0..size {
            out.push(match (light(x, y), light(x, y + 1)) {
                (true, true) => '█',
                (true, false) => '▀',
                (false, true) => '▄',
                (false, false) => ' ',
            });
        }
        out.push('\n');
    }
    Ok(out)
}

/// Reads a [`render`]ed code back: the modules drawn (light), one row of cells per half line.
/// `None` for a character `render` never writes. For tests that decode what the relay printed.
pub fn modules(text: &str) -> Option<Vec<Vec<bool>>> {
    let mut rows = Vec::new();
    for line in text.lines() {
        let cells: Option<Vec<(bool, bool)>> = line
            .chars()
            .map(|c| match c {
                '█' => Some((true, true)),
                '▀' => Some((true, false)),
                '▄' => Some((false, true)),
                ' ' => Some((false, false)),
                _ => None,
            })
            .collect();
        let (top, bottom): (Vec<bool>, Vec<bool>) = cells?.into_iter().unzip();
        rows.push(top);
        rows.push(bottom);
    }
    Some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str =
        "https://192.0.2.7:7480/#token=Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG8";

    #[test]
    fn the_code_is_square_with_its_quiet_zone() {
        let text = render(URL).unwrap();
        let mut rows = modules(&text).expect("only half blocks");
        let size = rows[0].len();
        // An odd number of rows: the last line's lower half is the terminal's background.
        assert_eq!(size % 2, 1);
        assert!(rows.last().unwrap().iter().all(|&m| !m), "padding half row");
        rows.pop();
        assert_eq!(rows.len(), size, "square");
        assert!(rows.iter().all(|r| r.len() == size));
        for (y, row) in rows.iter().enumerate() {
            for (x, &m) in row.iter().enumerate() {
                let edge = x < QUIET_ZONE
                    || y < QUIET_ZONE
                    || x >= size - QUIET_ZONE
                    || y >= size - QUIET_ZONE;
                if edge {
                    assert!(m, "quiet zone at {x},{y} is light");
                }
            }
        }
        // The finder's dark ring just inside the quiet zone, top left.
        assert!(!rows[QUIET_ZONE][QUIET_ZONE] && !rows[QUIET_ZONE + 6][QUIET_ZONE + 6]);
        // Deterministic: the same URL, the same code.
        assert_eq!(render(URL).unwrap(), text);
        assert_ne!(render("https://127.0.0.1:7480/").unwrap(), text);
    }

    #[test]
    fn a_phone_reads_the_url_back() {
        let rows = modules(&render(URL).unwrap()).expect("only half blocks");
        // Dark modules (not drawn) are black, as on a dark terminal; 4 pixels a module.
        const SCALE: usize = 4;
        let (w, h) = (rows[0].len() * SCALE, rows.len() * SCALE);
        let mut img =
            rqrr::PreparedImage::prepare_from_bitmap(w, h, |x, y| !rows[y / SCALE][x / SCALE]);
        let grids = img.detect_grids();
        assert_eq!(grids.len(), 1, "one code found");
        let (_, decoded) = grids[0].decode().unwrap();
        assert_eq!(decoded, URL);
    }

    #[test]
    fn a_text_too_long_is_an_error_not_a_panic() {
        assert!(render(&"x".repeat(8000)).is_err());
    }
}
