//! The page's monotonic clock, in the core's terms.

use std::time::Duration;

use tern::time::Instant;

thread_local! {
    /// The page's `performance`, looked up once: the clock is read several times per datagram,
    /// and each `window()` and `performance` lookup is a call into JavaScript.
    static PERFORMANCE: Option<web_sys::Performance> =
        web_sys::window().and_then(|w| w.performance());
}

/// Milliseconds on the page's monotonic clock (`performance.now()`, 0.1 ms resolution unless
/// the page is cross-origin isolated).
pub fn now_ms() -> f64 {
    PERFORMANCE.with(|p| p.as_ref().map_or(0.0, web_sys::Performance::now))
}

/// The core's clock: microseconds on the same timeline as [`now_ms`].
pub fn now() -> Instant {
    Instant::from_micros((now_ms() * 1000.0) as u64)
}

/// Milliseconds for a browser timer.
pub fn ms(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}
