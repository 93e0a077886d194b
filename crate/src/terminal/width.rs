//! Character widths exactly as mosh-server's glibc measures them.
//!
//! mosh-server decides how many columns a character takes with the C library's `wcwidth()` in
//! its locale (MOSH-PROTOCOL.md 8.3) and only repositions explicitly where it skips cells, so a
//! client whose widths disagree draws everything after such a character in the wrong column
//! (MOSH-PROTOCOL.md 8.4). The table in `width_table.rs` is generated from the real glibc 2.36
//! (Debian 12, the server platform) `wcwidth()` under `C.UTF-8` by `gen_width_table.py` in this
//! directory (`python3 crate/src/terminal/gen_width_table.py > crate/src/terminal/width_table.rs`);
//! the test `tests/terminal_width.rs` reruns the generator against this machine's libc and
//! compares every code point.

#[path = "width_table.rs"]
mod table;

/// glibc's `wcwidth()` under `C.UTF-8`: -1 (not printable), 0 (combining), 1 or 2.
pub fn wcwidth(c: char) -> i8 {
    let cp = c as u32;
    if (0x20..0x7f).contains(&cp) {
        return 1;
    }
    let ranges = table::WIDTH_RANGES;
    match ranges.binary_search_by(|&(first, last, _)| {
        if last < cp {
            std::cmp::Ordering::Less
        } else if first > cp {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    }) {
        Ok(i) => ranges[i].2,
        Err(_) => 1,
    }
}

/// The width mosh's emulator uses when printing (`Emulator::print`): NUL is unprintable, and
/// printable ISO 8859-1 (0x20-0x7E, 0xA0-0xFF) is forced to width 1 before asking `wcwidth`.
pub fn print_width(c: char) -> i8 {
    let cp = c as u32;
    if cp == 0 {
        return -1;
    }
    if (0x20..=0x7e).contains(&cp) || (0xa0..=0xff).contains(&cp) {
        return 1;
    }
    wcwidth(c)
}

/// The table's ranges (for the test that compares them with libc).
pub fn width_ranges() -> &'static [(u32, u32, i8)] {
    table::WIDTH_RANGES
}
