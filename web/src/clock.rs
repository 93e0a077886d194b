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

/// The core's clock: microseconds on the same timeline as [`now_ms`]. Rounded, not truncated:
/// `performance.now()` is a multiple of 0.1 ms that a float cannot hold exactly (142.8 is
/// 142.79999…), and truncating made the core's moment a microsecond earlier than a
/// `performance.mark` taken before it (the first-prompt test compares the two).
pub fn now() -> Instant {
    Instant::from_micros((now_ms() * 1000.0).round() as u64)
}

/// Milliseconds for a browser timer.
pub fn ms(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// A `performance.mark(name)` where the page has none yet: the first time each stage of reaching
/// the relay happened, for the benchmark's time budget of the first prompt (docs/BROWSER.md, "Test
/// hooks"). One lookup and at most one entry per name, so it costs nothing after the first link.
pub fn mark_once(name: &str) {
    PERFORMANCE.with(|p| {
        let Some(p) = p.as_ref() else { return };
        if p.get_entries_by_name(name).length() == 0 {
            let _ = performance_mark(name);
        }
    });
}

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    /// `performance.mark(name)`: web-sys binds it only with its unstable `PerformanceMark` API.
    #[wasm_bindgen(catch, js_namespace = performance, js_name = mark)]
    fn performance_mark(name: &str) -> Result<wasm_bindgen::JsValue, wasm_bindgen::JsValue>;
}
