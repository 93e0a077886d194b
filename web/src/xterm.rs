//! The few calls of `@xterm/xterm` 6 the shell needs, bound by hand (xterm.js is the dumb screen).

use js_sys::Uint8Array;
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// An xterm.js `Terminal`, created and opened by the page.
    #[derive(Debug, Clone)]
    pub type Terminal;

    /// Queues bytes for parsing. xterm.js keeps the buffer until it parses it later, so the
    /// bytes must be a copy, never a view into wasm memory.
    #[wasm_bindgen(method)]
    pub fn write(this: &Terminal, data: &Uint8Array);

    #[wasm_bindgen(method, getter)]
    pub fn cols(this: &Terminal) -> u16;

    #[wasm_bindgen(method, getter)]
    pub fn rows(this: &Terminal) -> u16;

    /// Typed text, pastes (already bracketed when the screen asked for it) and UTF-8 mouse reports.
    #[wasm_bindgen(method, js_name = onData)]
    pub fn on_data(this: &Terminal, callback: &Closure<dyn FnMut(String)>) -> JsValue;

    /// Mouse reports in the X10 encoding: one char per byte (0..=255), not UTF-8.
    #[wasm_bindgen(method, js_name = onBinary)]
    pub fn on_binary(this: &Terminal, callback: &Closure<dyn FnMut(String)>) -> JsValue;

    /// Fires after the terminal's grid changed size (the page fits it to the window).
    #[wasm_bindgen(method, js_name = onResize)]
    pub fn on_resize(this: &Terminal, callback: &Closure<dyn FnMut(JsValue)>) -> JsValue;
}
