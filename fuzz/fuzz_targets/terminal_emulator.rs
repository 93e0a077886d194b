//! The terminal emulator: bytes in, invariants on the framebuffer out.
//!
//! Input: `cols rows chunk resize rcols rrows` then the byte stream. The stream is fed whole to
//! one emulator and in chunks of `chunk % 61 + 1` bytes to another; with `resize & 1` both are
//! then resized to `rcols x rrows` and fed the stream again.
//!
//! Invariants: no panic; the screen whole (rows, widths, cursor, scroll region, wide cells);
//! chunking changes nothing (screen, modes, scroll region, rows scrolled off).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern::terminal::{Emulator, Size};
use tern_fuzz::{Reader, check_framebuffer, size};

fn feed_chunked(e: &mut Emulator, bytes: &[u8], chunk: usize) {
    for piece in bytes.chunks(chunk) {
        e.feed(piece);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut r = Reader(data);
    let (cols, rows) = size(r.u8(), r.u8());
    let chunk = usize::from(r.u8() % 61) + 1;
    let resize = r.u8() & 1 != 0;
    let (rcols, rrows) = size(r.u8(), r.u8());
    let stream = r.rest();

    let mut whole = Emulator::new(Size { cols, rows });
    let mut pieces = Emulator::new(Size { cols, rows });
    whole.keep_scrolled_off(true);
    pieces.keep_scrolled_off(true);
    let mut rounds = vec![None];
    if resize {
        rounds.push(Some(Size { cols: rcols, rows: rrows }));
    }
    for round in rounds {
        if let Some(size) = round {
            whole.resize(size);
            pieces.resize(size);
        }
        whole.feed(stream);
        feed_chunked(&mut pieces, stream, chunk);
        let (a, b) = (whole.framebuffer(), pieces.framebuffer());
        check_framebuffer(a);
        assert!(a == b, "chunks of {chunk} changed the screen:\n{a:?}\nvs\n{b:?}");
        assert_eq!(a.modes(), b.modes());
        assert_eq!(a.scroll_region(), b.scroll_region());
        assert_eq!(whole.in_alternate_screen(), pieces.in_alternate_screen());
        let (off_a, off_b) = (whole.take_scrolled_off(), pieces.take_scrolled_off());
        assert_eq!(off_a.len(), off_b.len(), "rows scrolled off");
        for (x, y) in off_a.iter().zip(&off_b) {
            assert!(x == y, "a scrolled-off row differs");
        }
    }
});
