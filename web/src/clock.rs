//! The page's monotonic clock, in the core's terms.

use std::time::Duration;

use tern::time::Instant;

/// Milliseconds on the page's monotonic clock (`performance.now()`, 0.1 ms resolution unless
/// the page is cross-origin isolated).
pub fn now_ms() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map_or(0.0, |p| p.now())
}

/// The core's clock: microseconds on the same timeline as [`now_ms`].
pub fn now() -> Instant {
    Instant::from_micros((now_ms() * 1000.0) as u64)
}

/// Milliseconds for a browser timer.
pub fn ms(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}
