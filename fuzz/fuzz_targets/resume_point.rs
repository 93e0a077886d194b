//! Resume points: what a page keeps in sessionStorage and what a relay hands a page in `ready`
//! (`point`), both outside the page's control. Decoded, the screen rebuilt, and resumed into a
//! client session.
//!
//! Input: the encoded point (its `TRP1` magic first).
//!
//! Invariants: no panic; a point that decodes encodes to the same bytes; its screen, when it
//! rebuilds, is whole; a resumed session takes input and keeps a timer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern::relay_client::{decode_point, encode_point};
use tern::session::{ClientSession, ResumePoint, SessionConfig};
use tern::terminal::Complete;
use tern::time::Instant;
use tern_fuzz::{check_framebuffer, key};

fuzz_target!(|data: &[u8]| {
    let Ok(point) = ResumePoint::decode(data) else { return };
    assert_eq!(point.encode(), data, "decode then encode");
    let text = encode_point(&point).to_string();
    assert!(decode_point(&text) == Some(point.clone()), "base64 round trip");
    let Ok(screen) = point.server_state() else { return };
    check_framebuffer(screen.framebuffer());
    let now = Instant::from_millis(5_000);
    let config = SessionConfig::new(key(), point.screen_cols, point.screen_rows);
    if let Ok(mut session) = ClientSession::<Complete>::resume(config, &point, now) {
        session.handle_input(now, b"x");
        while session.poll_transmit().is_some() {}
        assert!(session.poll_timeout().is_some() || session.is_closed());
    }
});
