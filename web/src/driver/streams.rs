//! The streams the client asks for: a paste's upload, a `tern send` download, and the check
//! of a download's bytes. Each is opened on the current link and read here; every line or
//! chunk goes to the client, which says what to write and when to stop.

use std::rc::Rc;

use tern::download::FileOffer;

use super::{Driver, OpenStream};
use crate::clock::now;
use crate::js::describe;
use crate::paste::read_file;

impl Driver {
    /// A file was pasted or dropped: it takes its place in the input order now; read, hashed
    /// and handed to the client when ready.
    pub fn paste(self: &Rc<Self>, blob: web_sys::Blob) {
        let (id, wanted) = self.call(|c, now| (c.paste(now), c.paste_wanted()));
        if !wanted {
            return;
        }
        let driver = Rc::clone(self);
        wasm_bindgen_futures::spawn_local(async move {
            let read = read_file(blob).await;
            driver.call(|c, now| c.paste_read(now, id, read));
        });
    }

    pub(super) fn open_upload(self: &Rc<Self>, serial: u32) {
        let Some(link) = self.link.borrow().as_ref().map(|(_, l)| Rc::clone(l)) else {
            return self.call(|c, now| {
                c.upload_opened(now, serial, false);
            });
        };
        let driver = Rc::clone(self);
        wasm_bindgen_futures::spawn_local(async move {
            let opened = link.open_stream().await;
            let lines = match opened {
                Ok((writer, lines)) => {
                    let lines = Rc::new(lines);
                    let stream = OpenStream { writer, lines: Rc::clone(&lines) };
                    driver.uploads.borrow_mut().insert(serial, stream);
                    Some(lines)
                }
                Err(_) => None,
            };
            let read = driver.call(|c, now| c.upload_opened(now, serial, lines.is_some()));
            let Some(lines) = lines.filter(|_| read) else { return };
            while let Some(line) = lines.next_line().await {
                if !driver.call(|c, now| c.upload_line(now, serial, &line)) {
                    break;
                }
            }
            driver.call(|c, now| c.upload_ended(now, serial));
        });
    }

    pub(super) fn open_download(self: &Rc<Self>, serial: u32, request: Vec<u8>) {
        let Some(link) = self.link.borrow().as_ref().map(|(_, l)| Rc::clone(l)) else {
            return self.call(|c, now| {
                c.download_started(now, serial, None);
            });
        };
        let driver = Rc::clone(self);
        wasm_bindgen_futures::spawn_local(async move {
            let (writer, lines) = match link.open_stream().await {
                Ok(stream) => stream,
                Err(_) => {
                    driver.call(|c, now| c.download_started(now, serial, None));
                    return;
                }
            };
            writer.write(&request);
            let lines = Rc::new(lines);
            let stream = OpenStream { writer, lines: Rc::clone(&lines) };
            driver.downloads.borrow_mut().insert(serial, stream);
            let first = lines.next_line().await;
            if !driver.call(|c, now| c.download_started(now, serial, first.as_deref())) {
                return;
            }
            while let Some(chunk) = lines.next_js_chunk().await {
                let n = u64::from(chunk.length());
                let verdict = driver.client.borrow_mut().download_chunk(now(), serial, n);
                // Kept before the client's effects are done: the check of a complete file
                // reads every chunk.
                if verdict.keep {
                    driver.download_chunks.borrow().push(&chunk);
                    driver.download_hash.borrow_mut().update(&chunk.to_vec());
                }
                driver.drain();
                if !verdict.read_on {
                    return;
                }
            }
            driver.call(|c, now| c.download_ended(now, serial));
        });
    }

    /// Hashes the download's bytes; saves the file when it is the one offered.
    pub(super) async fn verify_download(self: Rc<Self>, offer: FileOffer) {
        let chunks = std::mem::take(&mut *self.download_chunks.borrow_mut());
        // Hashed as it arrived (`open_download`): no second pass over the file here.
        let digest = self.download_hash.take().finish();
        let checked = web_sys::Blob::new_with_u8_array_sequence(&chunks)
            .map(|blob| (blob, digest))
            .map_err(|e| describe(&e));
        let matches = match checked {
            Ok((blob, digest)) => {
                let matches = offer.sha256.parse() == Ok(digest);
                if matches {
                    self.hooks.save_file(&offer.name, &blob);
                }
                matches
            }
            Err(why) => {
                web_sys::console::warn_1(&format!("checking the download failed: {why}").into());
                false
            }
        };
        self.call(|c, now| c.download_verified(now, &offer.id, matches));
    }
}
