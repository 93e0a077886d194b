//! Benchmark: the image lifter's throughput on text (what the recorder feeds it nearly always)
//! against a plain copy of the same bytes, side by side in one run, and on a stream of SIXEL
//! images. Prints MB/s (medians of rounds); asserts nothing.
//!
//! `cargo run --release -p tern-mosh --example lift_throughput [MB]` (8 MB of each by default).

// A benchmark, not the core: it reads the wall clock.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::Instant;

use tern::images::{Lifter, LifterConfig, Piece};

const ROUNDS: usize = 9;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// MB/s of `f` over `input` fed in 16 KiB reads (the recorder's), median of [`ROUNDS`].
fn rate(input: &[u8], mut f: impl FnMut(&[u8], &mut Vec<u8>)) -> f64 {
    let mut out = Vec::with_capacity(32 * 1024);
    let mut rates = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for read in input.chunks(16 * 1024) {
            out.clear();
            f(read, &mut out);
            std::hint::black_box(&out);
        }
        rates.push(input.len() as f64 / 1e6 / t.elapsed().as_secs_f64());
    }
    median(rates)
}

fn lifted(lifter: &mut Lifter, read: &[u8], out: &mut Vec<u8>) {
    lifter.feed(read, &mut |p| {
        if let Piece::Text(t) = p {
            out.extend_from_slice(t);
        }
    });
}

fn main() {
    let mb: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(8);
    // Text as programs print it: lines with colours (escape sequences the lifter must look at).
    let line =
        "\x1b[32mok\x1b[0m  src/terminal/emulator.rs: 746 lines, caf\u{e9} \u{2500}\u{2500}\r\n";
    let text: Vec<u8> = line.as_bytes().iter().copied().cycle().take(mb << 20).collect();
    let sixel: Vec<u8> = {
        let one = b"\x1bPq\"1;1;600;60#0;2;0;0;0#1;2;100;0;0#1!600~-#0!600~-#1!600~\x1b\\\r\n";
        one.iter().copied().cycle().take(mb << 20).collect()
    };
    let copy = rate(&text, |r, out| out.extend_from_slice(r));
    let mut lifter = Lifter::new(LifterConfig::default());
    let lift_text = rate(&text, |r, out| lifted(&mut lifter, r, out));
    let mut lifter = Lifter::new(LifterConfig::default());
    let lift_sixel = rate(&sixel, |r, out| lifted(&mut lifter, r, out));
    println!("{mb} MB each, 16 KiB reads, median of {ROUNDS} rounds (MB/s)");
    println!("{:<40}{:>10.0}", "plain copy, text", copy);
    println!("{:<40}{:>10.0}", "lifter, text (no images)", lift_text);
    println!("{:<40}{:>10.0}", "lifter, SIXEL images (600x18 each)", lift_sixel);
    println!("{:<40}{:>10.2}", "lifter / copy on text", lift_text / copy);
}
