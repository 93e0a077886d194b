//! Small seams to JavaScript used across the client: an exception as text, the browser's
//! SHA-256 (`crypto.subtle.digest`) and its random source (`crypto.getRandomValues`).

use js_sys::Uint8Array;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// A JavaScript exception as text.
pub fn describe(e: &JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return String::from(err.message());
    }
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
}

/// SHA-256 of `data`, by the browser (native code, off the wasm heap's hot path).
pub async fn sha256(data: &Uint8Array) -> Result<[u8; 32], String> {
    let subtle = web_sys::window().ok_or("no window")?.crypto().map_err(|e| describe(&e))?.subtle();
    let promise =
        subtle.digest_with_str_and_buffer_source("SHA-256", data).map_err(|e| describe(&e))?;
    let digest = JsFuture::from(promise).await.map_err(|e| describe(&e))?;
    Uint8Array::new(&digest).to_vec().try_into().map_err(|_| "SHA-256 is not 32 bytes".to_string())
}

/// `N` bytes from the browser's cryptographic random source (challenge nonces, storage seals).
pub fn random<const N: usize>() -> Result<[u8; N], String> {
    let crypto = web_sys::window().ok_or("no window")?.crypto().map_err(|e| describe(&e))?;
    let mut bytes = [0u8; N];
    crypto.get_random_values_with_u8_array(&mut bytes).map_err(|e| describe(&e))?;
    Ok(bytes)
}
