//! The driver's I/O for what the shell sends to the browser (`tern send`, `tern open`): offers
//! from the control stream, download streams, the bytes (kept as the browser's own buffers,
//! outside wasm memory), the SHA-256 check, saving, and the answers. What to ask for when, what
//! to acknowledge and what the bar says are the core's (`tern::download`).

use std::rc::Rc;

use gloo_timers::callback::Timeout;
use js_sys::{Array, Uint8Array};
use tern::download::{DownloadProgress, Downloads, FileOffer, Received};
use tern::relay_proto::offer::openable_url;
use tern::relay_proto::{
    ClientMessage, DownloadReply, Offer, OfferAnswer, Offered, decode, encode_line,
};
use wasm_bindgen_futures::JsFuture;

use super::Driver;
use crate::clock::{ms, now};
use crate::relay_link::{RelayLink, StreamWriter, describe};

/// The page's downloads and their I/O.
#[derive(Debug, Default)]
pub(super) struct DownloadsState {
    pub core: Downloads,
    /// The bytes of the download in front, as the streams delivered them.
    chunks: Array,
    /// The stream serial the chunks belong to; the writer of its acks.
    stream: Option<(u32, StreamWriter)>,
    timer: Option<Timeout>,
}

impl DownloadsState {
    /// The bar's line and `stats().download`.
    pub fn progress(&self) -> Option<DownloadProgress> {
        self.core.progress(now())
    }
}

impl Driver {
    /// An offer from the relay: a file to download, or a URL the person may open.
    pub(super) fn offer(self: &Rc<Self>, offer: Offer) {
        match offer.what {
            Offered::File { name, size, sha256 } => {
                let file = FileOffer { id: offer.id.clone(), name, size, sha256 };
                let refused = self.st.borrow_mut().downloads.core.offer(file, now());
                if let Err(answer) = refused {
                    self.answer(&offer.id, answer);
                }
                self.drive_downloads();
            }
            Offered::Url { url } => {
                // Checked again here: the page opens nothing but a web page.
                if let Err(why) = openable_url(&url) {
                    return self.answer(&offer.id, OfferAnswer::Failed { message: why.into() });
                }
                self.hooks.offer_url(&offer.id, &url);
            }
        }
    }

    /// Tells the relay what became of an offer (also the page's answer to a URL prompt).
    pub fn answer(&self, id: &str, answer: OfferAnswer) {
        let link = self.st.borrow().relay.link.clone();
        match link {
            Some(link) => link.send_control(&ClientMessage::Answer { id: id.to_owned(), answer }),
            // Unanswered offers are offered again on the next link; this answer is lost with
            // this one, and the person sees the offer again.
            None => tracing_warn(&format!("no link to answer offer {id}")),
        }
    }

    /// Opens the next download stream when one is due, and keeps the downloads' timer.
    pub(super) fn drive_downloads(self: &Rc<Self>) {
        let failures = self.st.borrow_mut().downloads.core.take_failures();
        for (id, answer) in failures {
            self.answer(&id, answer);
        }
        let link = self.st.borrow().relay.link.clone();
        if let Some(link) = link {
            let request = self.st.borrow_mut().downloads.core.next_request(now());
            if let Some((serial, request)) = request {
                if request.from == 0 {
                    // A new download (the one before is saved or given up): its bytes start here.
                    self.st.borrow_mut().downloads.chunks.set_length(0);
                }
                let driver = Rc::clone(self);
                wasm_bindgen_futures::spawn_local(async move {
                    driver.run_download(link, serial, encode_line(&request)).await;
                });
            }
        }
        self.arm_download_timer();
        self.render(false);
    }

    fn arm_download_timer(self: &Rc<Self>) {
        let mut st = self.st.borrow_mut();
        let at = st.downloads.core.poll_timeout();
        st.downloads.timer = at.map(|at| {
            let weak = Rc::downgrade(self);
            Timeout::new(ms(at.saturating_duration_since(now())).max(1), move || {
                let Some(d) = weak.upgrade() else { return };
                d.download_timer();
            })
        });
    }

    /// Acks whose coalescing ran out, retries whose pause is over, a result line that expires.
    fn download_timer(self: &Rc<Self>) {
        self.send_download_ack();
        self.drive_downloads();
    }

    fn send_download_ack(&self) {
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        let Some((serial, writer)) = &st.downloads.stream else { return };
        if let Some(ack) = st.downloads.core.ack_if_due(*serial, now()) {
            writer.write(&encode_line(&ack));
        }
    }

    /// One download stream: the request, the relay's answer, then bytes until the file is here.
    async fn run_download(self: Rc<Self>, link: Rc<RelayLink>, serial: u32, request: Vec<u8>) {
        let (writer, lines) = match link.open_stream().await {
            Ok(s) => s,
            Err(_) => return self.download_stream_over(serial),
        };
        writer.write(&request);
        let started = match lines.next_line().await.map(|l| decode::<DownloadReply>(&l)) {
            Some(Ok(reply)) => self.st.borrow_mut().downloads.core.started(serial, reply, now()),
            _ => false,
        };
        if !started {
            writer.abort();
            lines.cancel();
            return self.download_stream_over(serial);
        }
        self.st.borrow_mut().downloads.stream = Some((serial, writer.clone()));
        self.render(false);
        let mut last_redraw = now();
        while let Some(chunk) = lines.next_js_chunk().await {
            let n = u64::from(chunk.length());
            let received = {
                let mut st = self.st.borrow_mut();
                let r = st.downloads.core.received(serial, n, now());
                if r != Received::Refused {
                    st.downloads.chunks.push(&chunk);
                }
                r
            };
            self.send_download_ack();
            match received {
                Received::More => {}
                Received::Complete => {
                    writer.close();
                    lines.cancel();
                    self.st.borrow_mut().downloads.stream = None;
                    self.render(false);
                    return self.verify_and_save().await;
                }
                Received::Refused => break,
            }
            if now().saturating_duration_since(last_redraw) > super::PASTE_REDRAW {
                last_redraw = now();
                self.render(false);
            }
            self.arm_download_timer();
        }
        writer.abort();
        lines.cancel();
        self.download_stream_over(serial);
    }

    fn download_stream_over(self: &Rc<Self>, serial: u32) {
        {
            let mut st = self.st.borrow_mut();
            st.downloads.core.stream_ended(serial, now());
            if st.downloads.stream.as_ref().is_some_and(|(s, _)| *s == serial) {
                st.downloads.stream = None;
            }
        }
        self.drive_downloads();
    }

    /// Checks the whole file's SHA-256 and hands it to the browser to save.
    async fn verify_and_save(self: &Rc<Self>) {
        let Some(offer) = self.st.borrow().downloads.core.verifying().cloned() else { return };
        let chunks = std::mem::take(&mut self.st.borrow_mut().downloads.chunks);
        let result = async {
            let blob =
                web_sys::Blob::new_with_u8_array_sequence(&chunks).map_err(|e| describe(&e))?;
            let buffer = JsFuture::from(blob.array_buffer()).await.map_err(|e| describe(&e))?;
            let subtle =
                web_sys::window().ok_or("no window")?.crypto().map_err(|e| describe(&e))?.subtle();
            let digest = subtle
                .digest_with_str_and_buffer_source("SHA-256", &Uint8Array::new(&buffer))
                .map_err(|e| describe(&e))?;
            let digest = JsFuture::from(digest).await.map_err(|e| describe(&e))?;
            let hex: String =
                Uint8Array::new(&digest).to_vec().iter().map(|b| format!("{b:02x}")).collect();
            Ok::<_, String>((blob, hex))
        }
        .await;
        let answer = match result {
            Ok((blob, hex)) => {
                let matches = hex == offer.sha256;
                let answer =
                    self.st.borrow_mut().downloads.core.verified(&offer.id, matches, now());
                if matches {
                    self.hooks.save_file(&offer.name, &blob);
                }
                answer
            }
            Err(why) => {
                let answer = self.st.borrow_mut().downloads.core.verified(&offer.id, false, now());
                tracing_warn(&format!("checking the download failed: {why}"));
                answer
            }
        };
        if let Some(answer) = answer {
            self.answer(&offer.id, answer);
        }
        self.drive_downloads();
    }
}

fn tracing_warn(message: &str) {
    web_sys::console::warn_1(&message.into());
}
