//! The recorder's image lifter (`tern::images::Lifter`) on hostile pty output.
//!
//! Input: `cap split` (two bytes: the per-image cap, 1..=4096 bytes; the read size, 1..=256),
//! then the byte stream.
//!
//! Invariants: no panic; the stream fed in reads of `split` bytes gives exactly what it gives fed
//! whole (text, images and drops, in order); a stream without ESC or C2 (nothing that can begin a
//! sequence) comes out as it went in; every image kept is within the cap, has a size in pixels
//! and cells, and its layout bytes are only line feeds and one cursor-right.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern::images::{Lifter, LifterConfig, Piece};
use tern_fuzz::Reader;

#[derive(Debug, PartialEq)]
enum Out {
    Text(Vec<u8>),
    Other(String),
}

fn lift(config: LifterConfig, reads: &mut dyn Iterator<Item = &[u8]>) -> Vec<Out> {
    let mut lifter = Lifter::new(config);
    let mut outs: Vec<Out> = Vec::new();
    let cap = config.max_image_bytes;
    let mut push = |p: Piece<'_>| match p {
        Piece::Text(t) => match outs.last_mut() {
            Some(Out::Text(v)) => v.extend_from_slice(t),
            _ => outs.push(Out::Text(t.to_vec())),
        },
        Piece::Image(i) => {
            assert!(i.width > 0 && i.height > 0 && i.cols > 0 && i.rows > 0, "{i:?}");
            // Decoded and SIXEL data stay near the cap (kitty's zlib: four times it).
            assert!(i.data.len() <= cap.saturating_mul(4) + 4, "{} > cap {cap}", i.data.len());
            let layout = i.layout_bytes();
            let lf = layout.iter().take_while(|&&b| b == b'\n').count();
            let rest = &layout[lf..];
            assert!(rest.is_empty() || (rest.starts_with(b"\x1b[") && rest.ends_with(b"C")));
            outs.push(Out::Other(format!(
                "{:?} {}x{} {}",
                i.format,
                i.width,
                i.height,
                i.data.len()
            )));
        }
        Piece::Dropped(d) => outs.push(Out::Other(format!("{d:?}"))),
        Piece::Signal(x) => outs.push(Out::Other(format!("{x:?}"))),
    };
    for read in reads {
        lifter.feed(read, &mut push);
    }
    lifter.finish(&mut push);
    outs
}

fuzz_target!(|data: &[u8]| {
    let mut r = Reader(data);
    let cap = usize::from(r.u8()) * 16 + 1;
    let split = usize::from(r.u8()) + 1;
    let stream = r.rest();
    let config = LifterConfig { max_image_bytes: cap, ..LifterConfig::default() };
    let whole = lift(config, &mut std::iter::once(stream));
    assert_eq!(lift(config, &mut stream.chunks(split)), whole, "split into reads of {split}");
    if !stream.iter().any(|&b| b == 0x1b || b == 0xc2) {
        let want = if stream.is_empty() { vec![] } else { vec![Out::Text(stream.to_vec())] };
        assert_eq!(whole, want);
    }
});
