//! mosh-server's SGR, read in one pass straight from the input.
//!
//! mosh-server writes every change of pen as one absolute SGR in a fixed layout
//! ([`Renditions::write_sgr`], MOSH-PROTOCOL.md 8.2 step 7): `0`, the attributes (`1`, `3`, `4`,
//! `5`, `7`, `8`), the foreground (`3N` for palette 0-7, `38;5;N`, `38;2;R;G;B`), the background
//! (`4N`, `48;5;N`, `48;2;R;G;B`), `m`. A colourful repaint is one of these for nearly every cell,
//! so the client reads that layout part by part, a word at a time, and builds the pen directly:
//! no scan for the end of the parameters first, no field list, no general SGR loop. Anything
//! else (another order, other numbers, long fields, the end of the input too near) is left to
//! the parser and the general reading, which give the same pen where both answer (the tests).

use super::cell::{Attrs, Color, Renditions};
use super::parser::{MAX_PARAM_TEXT, short_field};

/// The pen an SGR in mosh-server's layout sets, and how many bytes it takes after `ESC [`
/// (through its `m`); `None` for anything else. `bytes` starts after `ESC [`; every part is read
/// as an eight-byte word, so at least eight bytes must follow the start of each.
#[inline]
pub(crate) fn read(bytes: &[u8]) -> Option<(Renditions, usize)> {
    let (pen, len) = read_layout(bytes)?;
    // mosh keeps only the first 100 characters of parameter text: a longer one (mosh-server
    // never writes one, but attributes can repeat) means what its first 100 say.
    (len - 1 <= MAX_PARAM_TEXT).then_some((pen, len))
}

#[inline(always)]
fn read_layout(bytes: &[u8]) -> Option<(Renditions, usize)> {
    let mut r = Reader { bytes, at: 0, done: false };
    let mut pen = Renditions::DEFAULT;
    // The reset every one of them starts with.
    let mut w = r.word()?;
    if w as u8 != b'0' {
        return None;
    }
    if r.end_of_field(w, 1)? {
        return Some((pen, r.at));
    }
    w = r.word()?;
    while let Some(attr) = attribute(w) {
        pen.attrs.set(attr, true);
        if r.end_of_field(w, 1)? {
            return Some((pen, r.at));
        }
        w = r.word()?;
    }
    if w as u8 == b'3' {
        pen.fg = r.color(w)?;
        if r.done {
            return Some((pen, r.at));
        }
        w = r.word()?;
    }
    if w as u8 == b'4' {
        pen.bg = r.color(w)?;
        if r.done {
            return Some((pen, r.at));
        }
    }
    // More after the background, or something else in its place: not mosh-server's layout.
    None
}

/// A single-digit field that is an attribute mosh keeps (`1;` or `1m` at the start of `w`), by
/// the attribute table mosh-server's SGR is written from.
#[inline]
fn attribute(w: u64) -> Option<Attrs> {
    if !matches!((w >> 8) as u8, b';' | b'm') {
        return None;
    }
    let digit = w as u8;
    Attrs::SGR_ORDER.iter().find(|(_, code)| code[1] == digit).map(|&(attr, _)| attr)
}

struct Reader<'a> {
    bytes: &'a [u8],
    /// Where the next field starts.
    at: usize,
    /// The `m` was read.
    done: bool,
}

impl Reader<'_> {
    /// The eight bytes from the next field on, little endian.
    #[inline(always)]
    fn word(&self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes.get(self.at..self.at + 8)?.try_into().ok()?))
    }

    /// After a field of `len` bytes at the start of `w` (at most 7): a `;` goes on to the next
    /// field (`Some(false)`), a `m` ends the sequence (`Some(true)`), anything else is `None`.
    #[inline(always)]
    fn end_of_field(&mut self, w: u64, len: usize) -> Option<bool> {
        let done = match (w >> (8 * len)) as u8 {
            b';' => false,
            b'm' => true,
            _ => return None,
        };
        self.at += len + 1;
        self.done = done;
        Some(done)
    }

    /// A field of one to three digits, and what ends it.
    #[inline(always)]
    fn number(&mut self) -> Option<u8> {
        let w = self.word()?;
        let (value, len) = short_field(w as u32)?;
        // Empty (-1), or above 255, where mosh's meaning differs by colour form: left to the
        // general reading.
        let value = u8::try_from(value).ok()?;
        self.end_of_field(w, len)?;
        Some(value)
    }

    /// A [`number`](Self::number) that another field must follow (not the `m`).
    #[inline(always)]
    fn number_before_more(&mut self) -> Option<u8> {
        let n = self.number()?;
        (!self.done).then_some(n)
    }

    /// The colour whose first field starts `w` (`3` or `4` already seen): `N` of palette 0-7,
    /// `8;5;N` or `8;2;R;G;B`; the reader is left after it.
    #[inline(always)]
    fn color(&mut self, w: u64) -> Option<Color> {
        match (w >> 8) as u8 {
            d @ b'0'..=b'7' => {
                self.end_of_field(w, 2)?;
                Some(Color::Palette(d - b'0'))
            }
            b'8' => {
                // `;5;` or `;2;`: bytes 2 to 4.
                let kind = (w >> 16) & 0xff_ffff;
                self.at += 5;
                if kind == u64::from(u32::from_le_bytes(*b";5;\0")) {
                    Some(Color::Palette(self.number()?))
                } else if kind == u64::from(u32::from_le_bytes(*b";2;\0")) {
                    let (r, g) = (self.number_before_more()?, self.number_before_more()?);
                    Some(Color::Rgb(r, g, self.number()?))
                } else {
                    None
                }
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(pen: Renditions) -> Vec<u8> {
        let mut out = Vec::new();
        pen.write_sgr(&mut out);
        out
    }

    #[test]
    fn reads_the_layout_mosh_server_writes() {
        let pens = [
            Renditions::DEFAULT,
            Renditions { attrs: Attrs::BOLD | Attrs::INVISIBLE, ..Renditions::DEFAULT },
            Renditions { attrs: Attrs::NONE, fg: Color::Palette(3), bg: Color::Palette(7) },
            Renditions { attrs: Attrs::ITALIC, fg: Color::Palette(58), bg: Color::Rgb(0, 9, 255) },
            Renditions { attrs: Attrs::NONE, fg: Color::Default, bg: Color::Palette(200) },
            Renditions { attrs: Attrs::UNDERLINE, fg: Color::Rgb(10, 100, 1), bg: Color::Default },
        ];
        for pen in pens {
            let sgr = written(pen);
            let after_bracket = [&sgr[2..], b"12345678"].concat();
            assert_eq!(read(&after_bracket), Some((pen, sgr.len() - 2)), "{sgr:?}");
        }
    }

    #[test]
    fn leaves_anything_else_to_the_general_reading() {
        for text in [
            &b"m"[..],
            b"1;0m",
            b"0;2m",
            b"0;39m",
            b"0;38;5;256m",
            b"0;38;5m",
            b"0;38;2;1;2m",
            b"0;48;5;1;38;5;2m",
            b"0;31;41;1m",
            b"0;38;5;0001m",
            b"0;38;5;;m",
            b"0;1H",
        ] {
            let input = [text, b"12345678"].concat();
            assert_eq!(read(&input), None, "{:?}", std::str::from_utf8(text));
        }
        // Too near the end of the input to read a word.
        assert_eq!(read(b"0;38;5;1m"), None);
        // Past mosh's 100 characters of parameter text (its parser drops the rest): 50
        // attributes, then an underline at characters 102-103.
        let long = format!("0{};4m12345678", ";1".repeat(50));
        assert_eq!(read(long.as_bytes()), None);
        // 48 of them: the underline ends at character 99, and is read.
        let just = format!("0{};4m12345678", ";1".repeat(48));
        let pen = Renditions { attrs: Attrs::BOLD | Attrs::UNDERLINE, ..Renditions::DEFAULT };
        assert_eq!(read(just.as_bytes()), Some((pen, 100)));
    }
}
