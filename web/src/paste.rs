//! A pasted or dropped file, read and hashed for the page client (`tern::page`).

use js_sys::Uint8Array;
use tern::page::PastedFile;

use crate::js::{describe, sha256};

/// Reads `blob` and hashes it (SHA-256, by the browser).
pub async fn read_file(blob: web_sys::Blob) -> Result<PastedFile, String> {
    let mime = blob.type_();
    let buf = wasm_bindgen_futures::JsFuture::from(blob.array_buffer())
        .await
        .map_err(|e| format!("cannot read the file: {}", describe(&e)))?;
    let data = Uint8Array::new(&buf);
    let hash = sha256(&data).await?;
    Ok(PastedFile { hash, bytes: data.to_vec(), mime })
}
