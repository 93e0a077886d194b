//! The browser's half of pasting files: reading and hashing the blob, keeping its bytes while it
//! uploads, and the stream the active upload runs on. What to send when, the input order and the
//! progress are the core's (`tern::paste`).

use std::collections::HashMap;
use std::rc::Rc;

use js_sys::Uint8Array;
use tern::paste::UploadJob;
use tern::time::Instant;
use tern::upload::ContentHash;

use crate::relay_link::{StreamLines, StreamWriter, describe};

/// A read and hashed file.
#[derive(Debug)]
pub struct ReadFile {
    pub hash: ContentHash,
    pub bytes: Vec<u8>,
    pub mime: String,
}

/// Reads a pasted or dropped file and hashes it (SHA-256, `crypto.subtle`).
pub async fn read_file(blob: web_sys::Blob) -> Result<ReadFile, String> {
    let mime = blob.type_();
    let buf = wasm_bindgen_futures::JsFuture::from(blob.array_buffer())
        .await
        .map_err(|e| format!("cannot read the file: {}", describe(&e)))?;
    let data = Uint8Array::new(&buf);
    let subtle = web_sys::window().ok_or("no window")?.crypto().map_err(|e| describe(&e))?.subtle();
    let promise =
        subtle.digest_with_str_and_buffer_source("SHA-256", &data).map_err(|e| describe(&e))?;
    let digest = wasm_bindgen_futures::JsFuture::from(promise).await.map_err(|e| describe(&e))?;
    let hash: ContentHash = Uint8Array::new(&digest)
        .to_vec()
        .try_into()
        .map_err(|_| "SHA-256 is not 32 bytes".to_string())?;
    Ok(ReadFile { hash, bytes: data.to_vec(), mime })
}

/// The bytes of every paste waiting or uploading, by content.
#[derive(Debug, Default)]
pub struct PasteFiles {
    files: HashMap<ContentHash, Rc<Vec<u8>>>,
}

impl PasteFiles {
    pub fn keep(&mut self, hash: ContentHash, bytes: Vec<u8>) {
        self.files.entry(hash).or_insert_with(|| Rc::new(bytes));
    }

    pub fn get(&self, hash: &ContentHash) -> Option<Rc<Vec<u8>>> {
        self.files.get(hash).cloned()
    }

    /// Forgets every file except those still `needed`.
    pub fn retain(&mut self, needed: impl Fn(&ContentHash) -> bool) {
        self.files.retain(|h, _| needed(h));
    }
}

/// The stream the active upload runs on.
#[derive(Debug)]
pub struct UploadStream {
    /// The job it serves ([`UploadJob::serial`]).
    pub serial: u32,
    pub writer: StreamWriter,
    pub lines: Rc<StreamLines>,
}

impl UploadStream {
    pub fn new(serial: u32, writer: StreamWriter, lines: StreamLines) -> Self {
        UploadStream { serial, writer, lines: Rc::new(lines) }
    }

    pub fn write(&self, bytes: &[u8]) {
        self.writer.write(bytes);
    }

    /// Writes what the pacer releases now; returns the bytes written. Not awaited: the window
    /// bounds what is queued, and nothing (least of all a keystroke) waits on it.
    pub fn pump(&self, job: &mut UploadJob, content: &[u8], now: Instant) -> u64 {
        let mut written = 0;
        while let Some(range) = job.poll_chunk(now) {
            let (start, end) = (range.start as usize, range.end as usize);
            if let Some(chunk) = content.get(start..end) {
                self.write(chunk);
                written += range.end - range.start;
            }
        }
        if job.should_abort_stream() {
            // No ack for the stall timeout: end this stream; the job resumes on a live link.
            self.lines.cancel();
        }
        written
    }

    /// Stops the stream at once (cancel, or a broken link).
    pub fn abort(&self) {
        self.writer.abort();
        self.lines.cancel();
    }
}
