//! One character cell: its grapheme, its width and its renditions (pen attributes and colours).

use std::fmt;

/// A colour of the foreground or background, as mosh stores it (MOSH-PROTOCOL.md 8.2, 8.3).
///
/// `SGR 30..37` and `38;5;0..7` are the same palette entries; `SGR 90..97` and `100..107` are
/// palette 8..15, re-emitted as `38;5;N` / `48;5;N` exactly as mosh-server does.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Color {
    #[default]
    Default,
    Palette(u8),
    Rgb(u8, u8, u8),
}

/// The text attributes mosh 1.4.0 keeps (faint/dim is not among them: `SGR 2` is ignored).
#[derive(Copy, Clone, Default, PartialEq, Eq, Hash)]
pub struct Attrs(u8);

impl Attrs {
    pub const BOLD: Attrs = Attrs(1);
    pub const ITALIC: Attrs = Attrs(1 << 1);
    pub const UNDERLINE: Attrs = Attrs(1 << 2);
    pub const BLINK: Attrs = Attrs(1 << 3);
    pub const INVERSE: Attrs = Attrs(1 << 4);
    pub const INVISIBLE: Attrs = Attrs(1 << 5);
    pub const NONE: Attrs = Attrs(0);

    /// In the order the SGR string lists them, with their SGR numbers.
    pub(crate) const SGR_ORDER: [(Attrs, &'static [u8; 2]); 6] = [
        (Attrs::BOLD, b";1"),
        (Attrs::ITALIC, b";3"),
        (Attrs::UNDERLINE, b";4"),
        (Attrs::BLINK, b";5"),
        (Attrs::INVERSE, b";7"),
        (Attrs::INVISIBLE, b";8"),
    ];

    /// The SGR that turns one attribute off, with its leading `;`. Bold's is 22 (21 is double
    /// underline in xterm); the others are 20 plus their own number.
    fn off_code(attr: Attrs) -> &'static [u8; 3] {
        match attr {
            Attrs::BOLD => b";22",
            Attrs::ITALIC => b";23",
            Attrs::UNDERLINE => b";24",
            Attrs::BLINK => b";25",
            Attrs::INVERSE => b";27",
            _ => b";28",
        }
    }

    pub fn contains(self, other: Attrs) -> bool {
        self.0 & other.0 == other.0
    }
    pub fn set(&mut self, other: Attrs, on: bool) {
        if on {
            self.0 |= other.0;
        } else {
            self.0 &= !other.0;
        }
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Builds attributes from the low six bits (tests and generators).
    pub fn from_bits_truncate(bits: u8) -> Attrs {
        Attrs(bits & 0x3f)
    }
}

impl std::ops::BitOr for Attrs {
    type Output = Attrs;
    fn bitor(self, rhs: Attrs) -> Attrs {
        Attrs(self.0 | rhs.0)
    }
}

impl fmt::Debug for Attrs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = ["bold", "italic", "underline", "blink", "inverse", "invisible"];
        let mut list = f.debug_set();
        for (i, name) in names.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                list.entry(name);
            }
        }
        list.finish()
    }
}

/// The pen: attributes plus foreground and background colour.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Renditions {
    pub attrs: Attrs,
    pub fg: Color,
    pub bg: Color,
}

impl Renditions {
    pub const DEFAULT: Renditions =
        Renditions { attrs: Attrs::NONE, fg: Color::Default, bg: Color::Default };

    /// What erasing leaves behind: only the background colour of the pen survives
    /// (mosh's `Cell(background_color)`, MOSH-PROTOCOL.md 8.3).
    pub fn background_only(bg: Color) -> Renditions {
        Renditions { attrs: Attrs::NONE, fg: Color::Default, bg }
    }

    /// Appends the absolute SGR string mosh-server emits for this pen (MOSH-PROTOCOL.md 8.2 step
    /// 7): `ESC [ 0`, attributes, foreground, background, `m`.
    pub fn write_sgr(&self, out: &mut Vec<u8>) {
        let mut seq = Seq::new(false);
        self.absolute_into(&mut seq);
        seq.append_to(out);
    }

    fn absolute_into(&self, seq: &mut Seq) {
        seq.bytes(b"\x1b[0");
        let listed = if self.attrs.is_empty() { &[][..] } else { &Attrs::SGR_ORDER[..] };
        for &(attr, code) in listed {
            if self.attrs.contains(attr) {
                seq.bytes(code);
            }
        }
        seq.color(self.fg, 30);
        seq.color(self.bg, 40);
        seq.byte(b'm');
    }

    /// Appends the SGR that turns the pen `from` into this one: the absolute string of
    /// [`write_sgr`](Self::write_sgr), or only the changes (attributes off with 22..28, colours
    /// back with 39/49) when that is shorter. Both mean the same to xterm and to mosh's emulator;
    /// the renderer sends this only to the page's terminal, as mosh-server always resets.
    #[inline(always)]
    pub fn write_sgr_from(&self, from: Renditions, out: &mut Vec<u8>) {
        let (fg_changed, bg_changed) = (from.fg != self.fg, from.bg != self.bg);
        if from.attrs == self.attrs
            && (!fg_changed || self.fg != Color::Default)
            && (!bg_changed || self.bg != Color::Default)
        {
            // The same attributes and no colour changed back to the default (a repaint's pen
            // changes): the changes are always the shorter, as their colours are in the
            // absolute string too, which has `0` and the rest besides.
            let mut seq = Seq::new(true);
            seq.bytes(b"\x1b[");
            if fg_changed {
                seq.color(self.fg, 30);
            }
            if bg_changed {
                seq.color(self.bg, 40);
            }
            seq.byte(b'm');
            seq.append_to(out);
            return;
        }
        self.write_sgr_changes(from, out);
    }

    /// [`write_sgr_from`](Self::write_sgr_from) where attributes change or a colour goes back to
    /// the default (out of line: the common case above is inlined into the renderer).
    fn write_sgr_changes(&self, from: Renditions, out: &mut Vec<u8>) {
        // The first parameter goes without its `;` (`ESC [ ;` would be an empty, resetting,
        // first parameter).
        let mut seq = Seq::new(true);
        seq.bytes(b"\x1b[");
        // (Most pens have no attributes, and most changes are colours alone.)
        let changed = if from.attrs == self.attrs { &[][..] } else { &Attrs::SGR_ORDER[..] };
        for &(attr, code) in changed {
            let (was, is) = (from.attrs.contains(attr), self.attrs.contains(attr));
            if was && !is {
                seq.param(Attrs::off_code(attr));
            } else if is && !was {
                seq.param(code);
            }
        }
        for (was, is, base) in [(from.fg, self.fg, 30), (from.bg, self.bg, 40)] {
            if was == is {
                continue;
            }
            if is == Color::Default {
                seq.param(b";");
                seq.decimal(base + 9);
            } else {
                seq.color(is, base);
            }
        }
        seq.byte(b'm');
        if seq.len >= self.absolute_sgr_len() {
            seq = Seq::new(false);
            self.absolute_into(&mut seq);
        }
        seq.append_to(out);
    }

    /// The length of [`write_sgr`](Self::write_sgr)'s string, without writing it.
    fn absolute_sgr_len(&self) -> usize {
        fn digits(n: u8) -> usize {
            1 + usize::from(n >= 10) + usize::from(n >= 100)
        }
        fn color(c: Color) -> usize {
            match c {
                Color::Default => 0,
                Color::Palette(n) if n < 8 => 3,
                Color::Palette(n) => 6 + digits(n),
                Color::Rgb(r, g, b) => 8 + digits(r) + digits(g) + digits(b),
            }
        }
        4 + 2 * self.attrs.0.count_ones() as usize + color(self.fg) + color(self.bg)
    }
}

/// Every byte's decimal digits (padded to three) and their count: a colourful screen's SGRs are
/// mostly numbers below 256.
static DECIMAL: [[u8; 4]; 256] = decimal_table();

const fn decimal_table() -> [[u8; 4]; 256] {
    let mut table = [[0; 4]; 256];
    let mut n = 0;
    while n < 256 {
        let (a, b, c) = ((n / 100) as u8, (n / 10 % 10) as u8, (n % 10) as u8);
        table[n] = if n >= 100 {
            [b'0' + a, b'0' + b, b'0' + c, 3]
        } else if n >= 10 {
            [b'0' + b, b'0' + c, 0, 2]
        } else {
            [b'0' + c, 0, 0, 1]
        };
        n += 1;
    }
    table
}

/// The longest SGR either form writes: `ESC [`, six attributes of three characters, two colours
/// of up to 17 (`;38;2;255;255;255`), `m`.
const MAX_SGR: usize = 2 + 6 * 3 + 2 * 17 + 1;

/// Builds an escape sequence in a buffer on the stack, copied out in one piece: the renderer
/// writes one per cell of a colourful screen, and a growth check per byte of a `Vec` (or a copy
/// call per tiny piece) costs more than the bytes.
struct Seq {
    /// Two bytes more than the longest sequence: a number is written as three bytes, of which
    /// only its digits count.
    buf: [u8; MAX_SGR + 2],
    len: usize,
    /// No parameter written yet: the next one goes without its `;`.
    first: bool,
}

impl Seq {
    #[inline]
    fn new(first: bool) -> Seq {
        Seq { buf: [0; MAX_SGR + 2], len: 0, first }
    }
    /// Appends the sequence to `out`: the whole buffer, then cut to the sequence. A copy of a
    /// fixed size is a few moves; one of the sequence's own length is a call to `memcpy`.
    #[inline]
    fn append_to(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.buf);
        out.truncate(start + self.len.min(self.buf.len()));
    }
    #[inline]
    fn byte(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }
    /// (Pieces of a size known when compiling: a copy of a length only known at run time is a
    /// call to `memcpy`.)
    #[inline]
    fn bytes<const N: usize>(&mut self, bytes: &[u8; N]) {
        // Never cut: MAX_SGR holds the longest sequence.
        if let Some(slots) = self.buf.get_mut(self.len..self.len + N) {
            slots.copy_from_slice(bytes);
            self.len += N;
        }
    }
    /// A parameter given with its leading `;` (as `SGR_ORDER` and `off_code` hold them). The
    /// first one goes without it: written over the `[` before it, with a `[` in its place.
    #[inline]
    fn param<const N: usize>(&mut self, with_separator: &[u8; N]) {
        let mut piece = *with_separator;
        if std::mem::take(&mut self.first) && self.len > 0 {
            piece[0] = b'[';
            self.len -= 1;
        }
        self.bytes(&piece);
    }
    #[inline]
    fn decimal(&mut self, n: u8) {
        let [a, b, c, len] = DECIMAL[usize::from(n)];
        if let Some(slots) = self.buf.get_mut(self.len..self.len + 3) {
            slots.copy_from_slice(&[a, b, c]);
            self.len += usize::from(len);
        }
    }
    /// `;` and the colour's parameters, as mosh writes them (`base` 30 for the foreground, 40
    /// for the background).
    #[inline(always)]
    fn color(&mut self, color: Color, base: u8) {
        match color {
            Color::Default => {}
            Color::Palette(n) if n < 8 => {
                self.param(b";");
                self.decimal(base + n);
            }
            Color::Palette(n) => {
                self.param(if base == 30 { b";38;5;" } else { b";48;5;" });
                self.decimal(n);
            }
            Color::Rgb(r, g, b) => {
                self.param(if base == 30 { b";38;2;" } else { b";48;2;" });
                self.decimal(r);
                self.byte(b';');
                self.decimal(g);
                self.byte(b';');
                self.decimal(b);
            }
        }
    }
}

/// Appends `n` in decimal. The renderer writes numbers for nearly every cell of a colourful
/// screen, and `write!` through `fmt` costs several times what the digits do.
pub(crate) fn push_decimal(out: &mut Vec<u8>, mut n: usize) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[at..]);
}

/// The most bytes a cell's text can reach: mosh stops appending once a cell holds 32 bytes, so
/// the last mark appended may take a cell from 31 to 35.
const CAPACITY: usize = MAX_GRAPHEME_BYTES + 3;

/// The text of one cell: a base character plus combining marks, UTF-8, empty for a blank cell
/// (drawn as a space). Always inline and `Copy`, so a row of cells is one allocation that
/// copies, clones and resets like plain bytes (rows are copied on write for every frame).
///
/// The bytes past `len` are always zero (only `push` writes, and only below `len`).
#[derive(Clone, Copy, Eq)]
pub struct Grapheme {
    len: u8,
    buf: [u8; CAPACITY],
}

impl std::hash::Hash for Grapheme {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for Grapheme {
    fn eq(&self, other: &Grapheme) -> bool {
        // Nearly every cell holds one character: four bytes compare as one word, and the zero
        // bytes after them are equal anyway.
        self.len == other.len
            && self.buf[..4] == other.buf[..4]
            && (self.len <= 4 || self.buf[4..] == other.buf[4..])
    }
}

impl Default for Grapheme {
    fn default() -> Self {
        Grapheme { len: 0, buf: [0; CAPACITY] }
    }
}

impl Grapheme {
    pub fn as_str(&self) -> &str {
        // The bytes are always whole UTF-8 characters (only `push` writes them).
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
    fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn clear(&mut self) {
        *self = Grapheme::default();
    }
    /// Appends `c`; a character that does not fit (only a text longer than any mosh cell, from
    /// `From<&str>`) is dropped.
    pub fn push(&mut self, c: char) {
        let at = usize::from(self.len);
        if let Some(slot) = self.buf.get_mut(at..at + c.len_utf8()) {
            c.encode_utf8(slot);
            self.len += c.len_utf8() as u8;
        }
    }
}

impl From<&str> for Grapheme {
    fn from(s: &str) -> Self {
        let mut g = Grapheme::default();
        for c in s.chars() {
            g.push(c);
        }
        g
    }
}

impl fmt::Debug for Grapheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// mosh stops appending combining characters once a cell holds 32 bytes (MOSH-PROTOCOL.md 8.3).
pub const MAX_GRAPHEME_BYTES: usize = 32;

/// One character cell.
#[derive(Clone, Copy, Default, Eq)]
pub struct Cell {
    grapheme: Grapheme,
    pub renditions: Renditions,
    wide: bool,
    /// The contents start with a combining character (drawn after U+00A0).
    fallback: bool,
}

impl Cell {
    /// A blank cell as erasing leaves it: no text, only a background colour.
    pub fn blank(bg: Color) -> Cell {
        Cell { renditions: Renditions::background_only(bg), ..Cell::default() }
    }
    /// A cell holding `text` (test and overlay helper; `wide` as the width table says).
    pub fn new(text: &str, renditions: Renditions, wide: bool) -> Cell {
        Cell { grapheme: Grapheme::from(text), renditions, wide, fallback: false }
    }
    /// Makes this cell what printing `c` with `renditions` leaves, writing only the bytes that
    /// change: a cell built whole on the stack and copied in costs a stall per printed character
    /// (its bytes written one by one, read back as words).
    #[inline]
    pub(crate) fn set_printed(&mut self, c: char, renditions: Renditions, wide: bool) {
        let g = &mut self.grapheme;
        if g.len > 4 {
            // Keep the bytes past `len` zero.
            g.buf = [0; CAPACITY];
        }
        let mut four = [0u8; 4];
        g.len = c.encode_utf8(&mut four).len() as u8;
        g.buf[..4].copy_from_slice(&four);
        self.renditions = renditions;
        self.wide = wide;
        self.fallback = false;
    }
    pub fn grapheme(&self) -> &Grapheme {
        &self.grapheme
    }
    pub fn text(&self) -> &str {
        self.grapheme.as_str()
    }
    pub fn is_empty(&self) -> bool {
        self.grapheme.is_empty()
    }
    pub fn is_wide(&self) -> bool {
        self.wide
    }
    /// Columns this cell covers: 1 or 2.
    #[inline]
    pub fn width(&self) -> usize {
        if self.wide { 2 } else { 1 }
    }
    pub fn is_fallback(&self) -> bool {
        self.fallback
    }
    /// Blank in the sense of mosh's `Cell::is_blank`: empty, a space or a no-break space.
    pub fn is_blank(&self) -> bool {
        matches!(self.text(), "" | " " | "\u{a0}")
    }

    pub(crate) fn reset(&mut self, bg: Color) {
        *self = Cell::blank(bg);
    }
    pub(crate) fn set_fallback(&mut self, fallback: bool) {
        self.fallback = fallback;
    }
    pub(crate) fn is_full(&self) -> bool {
        self.grapheme.len() >= MAX_GRAPHEME_BYTES
    }
    pub(crate) fn push(&mut self, c: char) {
        self.grapheme.push(c);
    }

    /// Appends what a terminal must be sent to draw this cell: a space for an empty cell, and
    /// U+00A0 before contents that start with a combining mark (mosh's `print_grapheme`).
    #[inline]
    pub fn write_grapheme(&self, out: &mut Vec<u8>) {
        if self.grapheme.len == 1 && !self.fallback {
            // Most cells: one ASCII byte.
            out.push(self.grapheme.buf[0]);
            return;
        }
        let (prefix, text) = self.drawn();
        out.extend_from_slice(prefix);
        match text {
            // Most cells are one ASCII byte; a push is cheaper than a copy.
            [b] => out.push(*b),
            _ => out.extend_from_slice(text),
        }
    }

    /// What [`write_grapheme`](Self::write_grapheme) writes, in two parts.
    fn drawn(&self) -> (&'static [u8], &[u8]) {
        if self.is_empty() {
            (b"", b" ")
        } else if self.fallback {
            ("\u{a0}".as_bytes(), self.grapheme.as_bytes())
        } else {
            (b"", self.grapheme.as_bytes())
        }
    }

    /// Equal as drawn: the same printed grapheme (empty drawn as a space), width and renditions.
    /// This is mosh's own notion for verifying a diff (`Cell::compare`): the receiver of a diff
    /// gets a space where the sender had an empty cell, and U+00A0 plus the mark for a fallback
    /// cell.
    pub fn looks_like(&self, other: &Cell) -> bool {
        if self.wide != other.wide || self.renditions != other.renditions {
            return false;
        }
        let ((pa, ta), (pb, tb)) = (self.drawn(), other.drawn());
        pa.iter().chain(ta).eq(pb.iter().chain(tb))
    }
}

impl PartialEq for Cell {
    /// The pen first: on a repainted screen it is what differs, and it is cheaper to compare.
    #[inline(always)]
    fn eq(&self, other: &Cell) -> bool {
        self.renditions == other.renditions
            && self.wide == other.wide
            && self.fallback == other.fallback
            && self.grapheme == other.grapheme
    }
}

impl std::hash::Hash for Cell {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.renditions.hash(state);
        self.wide.hash(state);
        self.fallback.hash(state);
        self.grapheme.hash(state);
    }
}

impl fmt::Debug for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text())?;
        if self.wide {
            f.write_str("w")?;
        }
        if self.fallback {
            f.write_str("f")?;
        }
        if self.renditions != Renditions::DEFAULT {
            write!(f, "{:?}", self.renditions)?;
        }
        Ok(())
    }
}
