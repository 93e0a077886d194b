//! The client's part of `tern-bench --only core` (issue 17) on saved diffs, for instruction
//! counts: the server's side (emulating the application, rendering mosh-server's diffs) runs
//! once and is saved, so a profile of the replay holds only what the client does per frame.
//!
//! ```text
//! cargo run --release -p tern-bench --example core_frame_replay -- save /tmp/diffs.bin 40
//! valgrind --tool=callgrind target/release/examples/core_frame_replay replay /tmp/diffs.bin 40
//! valgrind --tool=callgrind target/release/examples/core_frame_replay replay /tmp/diffs.bin 20
//! ```
//!
//! The difference of the two counts over 20 is the cost of one frame without the setup; `apply`
//! after the frame count leaves the render out, `sum` adds a checksum of the page's bytes (so two
//! builds can be checked to write the same bytes; not with callgrind, it counts too).

use std::time::Instant;

use tern::terminal::{Complete, Renderer};
use tern::wire::HostEvent;
use tern_bench::core_frame::{COLS, ROWS, app_frame};

/// Each frame's HostBytes, length-prefixed (u32, little endian); frame 0 is the first paint.
fn save(path: &str, frames: usize) -> std::io::Result<()> {
    let mut server = Complete::new(COLS, ROWS);
    let mut data = Vec::new();
    for seed in 0..=frames {
        let mut next = server.clone();
        next.feed_host_bytes(&app_frame(seed));
        for event in next.diff_events(&server) {
            if let HostEvent::Bytes(bytes) = event {
                data.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                data.extend_from_slice(&bytes);
            }
        }
        server = next;
    }
    std::fs::write(path, data)
}

fn load(path: &str, frames: usize) -> std::io::Result<Vec<[HostEvent; 1]>> {
    let data = std::fs::read(path)?;
    let mut diffs = Vec::new();
    let mut at = 0;
    while diffs.len() <= frames {
        let Some(len) = data.get(at..at + 4) else { break };
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let Some(bytes) = data.get(at + 4..at + 4 + len) else { break };
        diffs.push([HostEvent::Bytes(bytes.to_vec())]);
        at += 4 + len;
    }
    Ok(diffs)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn replay(diffs: &[[HostEvent; 1]], render: bool, sum: bool) {
    let in_place = Renderer::in_place();
    let mut client = Complete::new(COLS, ROWS);
    let _ = client.apply_events(&diffs[0]);
    let (mut apply_ms, mut render_ms) = (Vec::new(), Vec::new());
    let mut checksum = 0u64;
    for events in &diffs[1..] {
        let t = Instant::now();
        let mut next = client.clone();
        let _ = next.apply_events(events);
        apply_ms.push(t.elapsed().as_secs_f64() * 1e3);
        if render {
            let t = Instant::now();
            let bytes = in_place.render(Some(client.framebuffer()), next.framebuffer());
            render_ms.push(t.elapsed().as_secs_f64() * 1e3);
            if sum {
                checksum = bytes
                    .iter()
                    .fold(checksum, |c, &b| c.wrapping_mul(31).wrapping_add(u64::from(b)));
            }
        }
        client = next;
    }
    println!(
        "{} frames: apply {:.3} ms, render {:.3} ms (medians); page bytes checksum {checksum:016x}",
        diffs.len() - 1,
        median(apply_ms),
        median(render_ms),
    );
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: core_frame_replay save FILE FRAMES | replay FILE FRAMES [apply|sum]";
    let (Some(mode), Some(path)) = (args.get(1), args.get(2)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let frames: usize = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(40);
    match mode.as_str() {
        "save" => save(path, frames),
        "replay" => {
            let diffs = load(path, frames)?;
            if diffs.len() < 2 {
                eprintln!("{path}: fewer than two frames saved");
                std::process::exit(2);
            }
            let last = args.get(4).map(String::as_str);
            replay(&diffs, last != Some("apply"), last == Some("sum"));
            Ok(())
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
