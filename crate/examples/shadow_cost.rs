//! What the relay's copy of a session costs (`tern::session::Shadow`, spawn mode), side by side
//! with what the page's client does with the same datagrams.
//!
//! A Rust SSP server (`Transport` with a `Complete` screen) sends two workloads to a
//! `ClientSession` and a `Shadow` in one process: a full-screen 200x60 colour repaint per frame
//! (the worst case) and one typed character echoed per frame (the usual case). Each server
//! datagram is handed to both, timed separately, and the client's acknowledgements go back to the
//! server through the shadow, as they pass through the relay. Prints medians; asserts nothing.
//!
//! `cargo run --release -p tern-mosh --example shadow_cost`

// A benchmark is a driver, not core (crate/clippy.toml): it reads the wall clock.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::Write;
use std::time::Duration;

use tern::session::{ClientSession, SessionConfig, Shadow};
use tern::terminal::Complete;
use tern::time::Instant;
use tern::transport::{Transport, TransportConfig, UserStream};
use tern::wire::Key;

const COLS: u16 = 200;
const ROWS: u16 = 60;
const FRAMES: usize = 150;

/// A full repaint: every cell its own 256-colour foreground, different text each frame.
fn repaint(seed: usize) -> Vec<u8> {
    let mut out = b"\x1b[H".to_vec();
    for y in 0..usize::from(ROWS) {
        let _ = write!(out, "\x1b[{};1H", y + 1);
        for x in 0..usize::from(COLS) {
            let v = (x * 7 + y * 13 + seed * 31) % 251;
            let _ = write!(out, "\x1b[38;5;{v}m{}", char::from(b'!' + (v % 90) as u8));
        }
    }
    out.extend_from_slice(b"\x1b[0m");
    out
}

/// Runs [`FRAMES`] server states made by `frame` and returns the µs per frame (every datagram of
/// it: fragments, the apply at the last) for the client and for the shadow, and how many datagrams
/// that was.
fn run(frame: impl Fn(usize) -> Vec<u8>) -> (f64, f64, usize) {
    let key: Key = "PWSoCIVurTVBGXAj873xNg".parse().expect("key");
    let mut now = Instant::from_millis(1_000);
    let mut server = Transport::new(
        &TransportConfig::server(1252, 1),
        &key,
        Complete::new(COLS, ROWS),
        UserStream::default(),
        now,
    );
    let mut client =
        ClientSession::<Complete>::new(SessionConfig::new(key.clone(), COLS, ROWS), now);
    let mut shadow = Shadow::new(&key, now);
    let (mut client_us, mut shadow_us) = (Vec::new(), Vec::new());
    for i in 0..FRAMES {
        server.update_local(now, |screen| screen.feed_host_bytes(&frame(i)));
        for _ in 0..4 {
            now = now + Duration::from_millis(10);
            server.handle_timeout(now);
            while let Some(d) = server.poll_transmit() {
                let t = std::time::Instant::now();
                client.handle_datagram(now, &d);
                client_us.push(t.elapsed().as_secs_f64() * 1e6);
                let t = std::time::Instant::now();
                shadow.server_datagram(now, &d);
                shadow_us.push(t.elapsed().as_secs_f64() * 1e6);
            }
            client.handle_timeout(now);
            while let Some(d) = client.poll_transmit() {
                shadow.client_datagram(now, &d);
                server.handle_datagram(now, &d);
            }
        }
    }
    assert_eq!(shadow.unreadable, 0, "the shadow read every datagram");
    let n = client_us.len();
    let per_frame = |v: Vec<f64>| v.iter().sum::<f64>() / FRAMES as f64;
    (per_frame(client_us), per_frame(shadow_us), n)
}

fn main() {
    println!("µs per server frame (client | relay's copy), {COLS}x{ROWS}, {FRAMES} frames");
    let (c, s, n) = run(repaint);
    println!("full-screen colour repaint: {c:>8.1} | {s:>8.1}   ({n} datagrams)");
    let (c, s, n) = run(|i| vec![b'a' + (i % 26) as u8]);
    println!("one typed character echoed: {c:>8.1} | {s:>8.1}   ({n} datagrams)");
}
