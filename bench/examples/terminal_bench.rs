//! Terminal model benchmark: a full-screen 200x60 colourful change, applied and rendered.
//!
//! Run with `cargo run --release -p tern-bench --example terminal_bench`. Prints time per frame for
//! emulating the application's output (server side), applying the server's diff (client side)
//! and rendering for the display (mosh's choices and the page's in-place renderer), and the byte
//! counts of each representation. Every cell changes; the pattern repeats every 41 rows, so the
//! diffs move 19 rows up by scrolling and redraw the other 41. `tern-bench --only core` reports
//! the client's part as a suite row (bench/src/core_frame.rs).

use std::time::Instant;

use tern::terminal::{Complete, Renderer};
use tern::wire::HostEvent;
use tern_bench::core_frame::{COLS, ROWS, app_frame};

const FRAMES: usize = 400;

/// The median of per-frame seconds, in ms: the machine is shared, and a median of single
/// frames shrugs off the frames another process interrupted.
fn median_ms(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    // The fastest frame too: on a busy machine it is the steadiest number to compare changes by.
    format!("{:8.3} ms/frame (fastest {:.3})", v[v.len() / 2] * 1e3, v[0] * 1e3)
}

fn main() {
    let frames: Vec<Vec<u8>> = (0..FRAMES + 1).map(app_frame).collect();
    let renderer = Renderer::new();
    let in_place = Renderer::in_place();

    let mut server = Complete::new(COLS, ROWS);
    server.feed_host_bytes(&frames[0]);
    let mut client = Complete::new(COLS, ROWS);
    client.apply_events(&server.diff_events(&Complete::new(COLS, ROWS))).expect("apply");

    let (mut t_emulate, mut t_diff, mut t_apply, mut t_render, mut t_in_place) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut app_bytes, mut diff_bytes, mut render_bytes, mut in_place_bytes) =
        (0usize, 0usize, 0usize, 0usize);
    for frame in &frames[1..] {
        let t = Instant::now();
        let mut next_server = server.clone();
        next_server.feed_host_bytes(frame);
        t_emulate.push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        let events = next_server.diff_events(&server);
        t_diff.push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        let mut next_client = client.clone();
        next_client.apply_events(&events).expect("apply");
        t_apply.push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        let shown = renderer.render(Some(client.framebuffer()), next_client.framebuffer());
        t_render.push(t.elapsed().as_secs_f64());

        let t = Instant::now();
        let drawn = in_place.render(Some(client.framebuffer()), next_client.framebuffer());
        t_in_place.push(t.elapsed().as_secs_f64());

        app_bytes += frame.len();
        diff_bytes += events
            .iter()
            .map(|e| if let HostEvent::Bytes(b) = e { b.len() } else { 0 })
            .sum::<usize>();
        render_bytes += shown.len();
        in_place_bytes += drawn.len();
        assert!(next_client.framebuffer().looks_like(next_server.framebuffer()).is_ok());
        server = next_server;
        client = next_client;
    }
    println!("{COLS}x{ROWS}, {FRAMES} frames, every cell changes each frame; medians per frame");
    println!("server: emulate app output   {}", median_ms(t_emulate));
    println!("server: diff (renderer)      {}", median_ms(t_diff));
    println!("client: apply server diff    {}", median_ms(t_apply));
    println!("client: render (mosh's)      {}", median_ms(t_render));
    println!("client: render (in place)    {}", median_ms(t_in_place));
    println!(
        "bytes/frame: application {}, server diff (HostBytes) {}, render {}, in place {}",
        app_bytes / FRAMES,
        diff_bytes / FRAMES,
        render_bytes / FRAMES,
        in_place_bytes / FRAMES
    );
}
