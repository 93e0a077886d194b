//! What the fuzz targets share: the input formats (a byte reader and length-prefixed records, so
//! the seed generator can write inputs the targets read back), the fixed key, and the
//! framebuffer invariants every target that emulates checks.

use tern::terminal::Framebuffer;
use tern::wire::Key;

/// The key of the golden capture `real-session.jsonl` (and of the core's tests): its captured
/// server datagrams authenticate under it, so they seed the decryption path.
pub fn key() -> Key {
    "WLThFE98+opDlEMyexqWsA".parse().expect("valid key")
}

/// Reads an input front to back; past the end every number is 0 and every slice empty, so any
/// input is a valid (if short) program.
#[derive(Debug)]
pub struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// Up to `n` bytes (fewer at the end).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        head
    }

    /// A slice whose length is the next byte.
    pub fn short(&mut self) -> &'a [u8] {
        let n = self.u8();
        self.take(n.into())
    }

    /// A slice whose length is the next two bytes (little-endian): one record.
    pub fn record(&mut self) -> &'a [u8] {
        let n = self.u16();
        self.take(n.into())
    }

    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.0)
    }
}

/// Splits an input into the records [`write_records`] joined.
pub fn records(data: &[u8]) -> Vec<&[u8]> {
    let mut r = Reader(data);
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(r.record());
    }
    out
}

/// Joins records (each at most 65535 bytes) the way [`records`] splits them.
pub fn write_records<'a>(records: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for record in records {
        let len = u16::try_from(record.len()).expect("record of at most 65535 bytes");
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(record);
    }
    out
}

/// What every framebuffer must be, whatever bytes made it: as many rows as its height, each
/// as wide as its width, the cursor on the screen and the scroll region inside it.
///
/// A wide character may sit on the last column (its right half off the screen): mosh's
/// emulator puts it there when autowrap is off or the screen is one column wide, and so does
/// ours (the first crash this target found, which is mosh's behaviour, not a bug).
pub fn check_framebuffer(fb: &Framebuffer) {
    let (width, height) = (fb.width(), fb.height());
    assert!(width > 0 && height > 0, "empty screen {width}x{height}");
    assert_eq!(fb.rows().len(), height, "row count");
    for (y, row) in fb.rows().iter().enumerate() {
        assert_eq!(row.cells().len(), width, "width of row {y}");
    }
    let cursor = fb.cursor();
    assert!(
        usize::from(cursor.row) < height && usize::from(cursor.col) < width,
        "cursor {cursor:?} outside {width}x{height}"
    );
    let (top, bottom) = fb.scroll_region();
    assert!(top <= bottom && bottom < height, "scroll region {top}..={bottom} of {height} rows");
}

/// A screen size from two bytes, small enough to keep executions fast.
pub fn size(cols: u8, rows: u8) -> (u16, u16) {
    (u16::from(cols % 120) + 1, u16::from(rows % 40) + 1)
}
