//! Files from the shell (`tern send`) on their way to the browser, and URLs it offers
//! (`tern open`): which offer, the download stream, acks, retries, the check at the end.

use super::{Effect, PageClient, StreamStep, Timer};
use crate::download::{Downloads, FileOffer, Received};
use crate::relay_proto::offer::openable_url;
use crate::relay_proto::{
    ClientMessage, DownloadReply, Offer, OfferAnswer, Offered, decode, encode_line,
};
use crate::time::Instant;

use super::pastes::progress_redraw_due;

#[derive(Debug, Default)]
pub(super) struct DownloadState {
    pub core: Downloads,
    /// The download stream being read (its serial).
    stream: Option<u32>,
    last_redraw: Option<Instant>,
}

/// What the driver does with a chunk of a download stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkVerdict {
    /// Keep the chunk's bytes (they belong to the file).
    pub keep: bool,
    /// Read on.
    pub read_on: bool,
}

impl PageClient {
    /// The shell offers a file or a URL.
    pub(super) fn offer(&mut self, now: Instant, offer: Offer) {
        match offer.what {
            Offered::File { name, size, sha256 } => {
                let file = FileOffer { id: offer.id.clone(), name, size, sha256 };
                if let Err(answer) = self.downloads.core.offer(file, now) {
                    self.answer(&offer.id, answer);
                }
                self.drive_downloads(now);
            }
            Offered::Url { url } => {
                if let Err(why) = openable_url(&url) {
                    return self.answer(&offer.id, OfferAnswer::Failed { message: why.into() });
                }
                self.push(Effect::OfferUrl { id: offer.id, url });
            }
        }
    }

    /// Answers offer `id` (the person opened a URL or not; a download's result).
    pub fn answer(&mut self, id: &str, answer: OfferAnswer) {
        if self.link.current.is_some() {
            self.push(Effect::Control(ClientMessage::Answer { id: id.to_owned(), answer }));
        } else {
            self.push(Effect::Log(format!("no link to answer offer {id}")));
        }
    }

    pub(super) fn drive_downloads(&mut self, now: Instant) {
        for (id, answer) in self.downloads.core.take_failures() {
            self.answer(&id, answer);
        }
        if self.link.current.is_some() {
            if let Some((serial, request)) = self.downloads.core.next_request(now) {
                self.downloads.last_redraw = None;
                self.push(Effect::OpenDownload {
                    serial,
                    request: encode_line(&request),
                    from_start: request.from == 0,
                });
            }
        }
        let at = self.downloads.core.poll_timeout();
        self.timers.put(Timer::Download, at);
        self.render(now, false);
    }

    pub(super) fn download_timeout(&mut self, now: Instant) {
        self.send_download_ack(now);
        self.drive_downloads(now);
    }

    fn send_download_ack(&mut self, now: Instant) {
        let Some(serial) = self.downloads.stream else { return };
        if let Some(ack) = self.downloads.core.ack_if_due(serial, now) {
            self.push(Effect::Download { serial, step: StreamStep::Write(encode_line(&ack)) });
        }
    }

    /// The first line of download stream `serial` (`None`: the stream could not be opened or
    /// ended first). Returns whether to read its bytes (then
    /// [`download_chunk`](Self::download_chunk)).
    pub fn download_started(&mut self, now: Instant, serial: u32, line: Option<&[u8]>) -> bool {
        let started = match line.map(decode::<DownloadReply>) {
            Some(Ok(reply)) => self.downloads.core.started(serial, reply, now),
            _ => false,
        };
        if !started {
            self.push(Effect::Download { serial, step: StreamStep::Abort });
            self.download_stream_over(now, serial);
            return false;
        }
        self.downloads.stream = Some(serial);
        self.downloads.last_redraw = Some(now);
        self.render(now, false);
        true
    }

    /// `n` bytes came on download stream `serial`.
    pub fn download_chunk(&mut self, now: Instant, serial: u32, n: u64) -> ChunkVerdict {
        let received = self.downloads.core.received(serial, n, now);
        let keep = received != Received::Refused;
        self.send_download_ack(now);
        match received {
            Received::More => {
                if progress_redraw_due(&mut self.downloads.last_redraw, now) {
                    self.render(now, false);
                }
                let at = self.downloads.core.poll_timeout();
                self.timers.put(Timer::Download, at);
                ChunkVerdict { keep, read_on: true }
            }
            Received::Complete => {
                self.push(Effect::Download { serial, step: StreamStep::Close });
                self.downloads.stream = None;
                self.render(now, false);
                if let Some(offer) = self.downloads.core.verifying().cloned() {
                    self.push(Effect::VerifyDownload(offer));
                }
                ChunkVerdict { keep, read_on: false }
            }
            Received::Refused => {
                self.download_ended(now, serial);
                ChunkVerdict { keep, read_on: false }
            }
        }
    }

    /// Download stream `serial` ended before the file was complete.
    pub fn download_ended(&mut self, now: Instant, serial: u32) {
        self.push(Effect::Download { serial, step: StreamStep::Abort });
        self.download_stream_over(now, serial);
    }

    fn download_stream_over(&mut self, now: Instant, serial: u32) {
        self.downloads.core.stream_ended(serial, now);
        if self.downloads.stream == Some(serial) {
            self.downloads.stream = None;
        }
        self.drive_downloads(now);
    }

    /// The driver hashed the download `id`: `matches` when it is the offered file (and then
    /// the driver saved it).
    pub fn download_verified(&mut self, now: Instant, id: &str, matches: bool) {
        if let Some(answer) = self.downloads.core.verified(id, matches, now) {
            self.answer(id, answer);
        }
        self.drive_downloads(now);
    }
}
