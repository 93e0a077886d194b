//! The core's cost of one frame on the client (the suite's `core` part, the terminal side of the
//! cost of a frame): a full-screen 200x60 colourful change every frame, applied from the server's
//! diff and rendered for the page's terminal, timed in-process with no link and no browser.
//!
//! The application repaints every cell with its own 256-colour foreground and a truecolour
//! background every 8 cells, a wide character now and then (the workload of
//! `bench/examples/terminal_bench.rs`). The server side (emulating that output, rendering the
//! diff mosh-server would send) runs untimed beforehand; the timed part is what the client does
//! per frame: clone the newest state, apply the diff (`Complete::apply_events`), and render the
//! difference to the frame the page shows (`Renderer::in_place`). Each frame is timed alone
//! and the median taken, so frames another process interrupted on a shared machine do not count.

use std::time::Instant;

use tern::terminal::{Complete, Renderer};
use tern::wire::HostEvent;

use crate::report::Report;
use crate::stats::{median, p95};
use crate::{Options, progress};

/// The terminal's size.
pub const COLS: u16 = 200;
pub const ROWS: u16 = 60;

/// The target: apply + display diff of a full frame.
pub const TARGET_MS: f64 = 0.5;

/// What an application writes to repaint the screen in colour: every cell its own 256-colour
/// foreground, a truecolour background every 8 cells, a wide character now and then (frame
/// `seed`; the example `terminal_bench` plays the same frames).
pub fn app_frame(seed: usize) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::new();
    out.extend_from_slice(b"\x1b[H");
    for y in 0..usize::from(ROWS) {
        let _ = write!(out, "\x1b[{};1H", y + 1);
        let mut x = 0;
        while x < usize::from(COLS) {
            let v = (x * 7 + y * 13 + seed * 31) % 251;
            let _ = write!(out, "\x1b[38;5;{v}m");
            if x % 8 == 0 {
                let _ = write!(out, "\x1b[48;2;{};{};{}m", v, 255 - v, (v * 3) % 256);
            }
            if v % 17 == 0 && x + 2 <= usize::from(COLS) {
                out.extend_from_slice("日".as_bytes());
                x += 2;
            } else {
                out.push(b'!' + (v % 90) as u8);
                x += 1;
            }
        }
    }
    out.extend_from_slice(b"\x1b[0m");
    out
}

/// Per-frame samples of one run, ms, and the bytes per frame of each representation.
#[derive(Debug, Clone, Default)]
pub struct CoreRun {
    pub apply_ms: Vec<f64>,
    pub render_ms: Vec<f64>,
    /// Apply and render of the same frame, added (the row's value is their median).
    pub total_ms: Vec<f64>,
    pub frames: usize,
    /// The server's HostBytes, what the client applies.
    pub diff_bytes: usize,
    /// The page's renderer, and mosh's choices (`Renderer::new`, what the page sent before
    /// `in_place` learned relative SGRs and short moves) for the same frames.
    pub in_place_bytes: usize,
    pub mosh_bytes: usize,
    /// Frames whose client screen differed from the server's (must be 0).
    pub mismatches: usize,
}

/// Plays `frames` frames `repeats` times, timing the client's part of each.
pub fn run(frames: usize, repeats: usize) -> CoreRun {
    let apps: Vec<Vec<u8>> = (0..=frames).map(app_frame).collect();
    // The server's side, untimed: the states and the diffs between them.
    let mut states = vec![Complete::new(COLS, ROWS)];
    let mut diffs = Vec::new();
    for app in &apps {
        let Some(last) = states.last() else { break };
        let mut next = last.clone();
        next.feed_host_bytes(app);
        diffs.push(next.diff_events(last));
        states.push(next);
    }
    let mut run = CoreRun { frames: frames * repeats, ..CoreRun::default() };
    let (in_place, mosh) = (Renderer::in_place(), Renderer::new());
    for _ in 0..repeats {
        // Frame 0 (the first paint) is not timed; every later frame changes every cell.
        let mut client = Complete::new(COLS, ROWS);
        let _ = client.apply_events(&diffs[0]);
        for (i, events) in diffs.iter().enumerate().skip(1) {
            let t = Instant::now();
            let mut next = client.clone();
            let _ = next.apply_events(events);
            let applied = t.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            let bytes = in_place.render(Some(client.framebuffer()), next.framebuffer());
            let rendered = t.elapsed().as_secs_f64() * 1e3;
            run.apply_ms.push(applied);
            run.render_ms.push(rendered);
            run.total_ms.push(applied + rendered);
            run.in_place_bytes += bytes.len();
            run.mosh_bytes += mosh.render(Some(client.framebuffer()), next.framebuffer()).len();
            run.diff_bytes += events
                .iter()
                .map(|e| if let HostEvent::Bytes(b) = e { b.len() } else { 0 })
                .sum::<usize>();
            if next.framebuffer().looks_like(states[i + 1].framebuffer()).is_err() {
                run.mismatches += 1;
            }
            client = next;
        }
    }
    run
}

/// The suite's `core` part: the core's client cost of a full-screen frame (apply the server's
/// diff and render the page's display diff, in-process), rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    let (frames, repeats) = if options.quick { (20, 1) } else { (200, 5) };
    progress(&format!("core: {frames} full 200x60 frames, {repeats} times"));
    let run = run(frames, repeats);
    if run.mismatches > 0 {
        report.problems.push(format!(
            "core: {} of {} frames applied to a screen other than the server's",
            run.mismatches, run.frames
        ));
    }
    let target = TARGET_MS;
    if let Some(m) = median(&run.total_ms) {
        report.row(
            "core: apply + display diff, full 200x60 frame",
            m,
            "ms",
            format!("≤ {target} ms"),
            m <= target,
        );
    }
    let group = "core, full 200x60 frame";
    // The fastest frame: on a shared machine the steadiest figure to compare changes by.
    if let Some(fastest) = run.total_ms.iter().copied().reduce(f64::min) {
        report.detail(group, "client: apply + display diff, fastest frame", fastest, "ms");
    }
    for (what, v) in [
        ("client: apply the server's diff", &run.apply_ms),
        ("client: render for the page (Renderer::in_place)", &run.render_ms),
    ] {
        if let (Some(m), Some(p)) = (median(v), p95(v)) {
            report.detail(group, format!("{what}, median"), m, "ms");
            report.detail(group, format!("{what}, p95"), p, "ms");
        }
    }
    let per_frame = |total: usize| total as f64 / run.frames.max(1) as f64;
    report.detail(group, "server's diff (HostBytes) per frame", per_frame(run.diff_bytes), "B");
    report.detail(
        group,
        "page's render per frame (Renderer::in_place)",
        per_frame(run.in_place_bytes),
        "B",
    );
    report.detail(
        group,
        "the same frames with mosh's choices (Renderer::new: the page's bytes before)",
        per_frame(run.mosh_bytes),
        "B",
    );
    report.detail(group, "frames timed", run.frames as f64, "");
}
