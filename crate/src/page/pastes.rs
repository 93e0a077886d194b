//! Pasted files: their place in the input order (`PasteQueue`), their bytes until uploaded,
//! and the upload stream of the active one.

use std::collections::HashMap;
use std::time::Duration;

use super::{Effect, PageClient, StreamStep, Timer};
use crate::paste::{JobOutcome, PasteId, PasteProgress, PasteQueue};
use crate::relay_proto::{UploadReply, decode};
use crate::time::Instant;
use crate::transfer::{ContentHash, LinkMemory, Upload};

/// Transfer progress (an upload's, a download's) redraws at most this often: acks and chunks
/// come every few milliseconds.
pub const PASTE_REDRAW: Duration = Duration::from_millis(100);

/// Whether progress last drawn at `last` is due again at `now` (and then it is drawn now).
pub(super) fn progress_redraw_due(last: &mut Option<Instant>, now: Instant) -> bool {
    let due = last.is_none_or(|at| now.saturating_duration_since(at) > PASTE_REDRAW);
    if due {
        *last = Some(now);
    }
    due
}

/// A pasted file as the driver read it.
#[derive(Debug)]
pub struct PastedFile {
    /// SHA-256 of the bytes.
    pub hash: ContentHash,
    pub bytes: Vec<u8>,
    pub mime: String,
}

/// The paste queue and what the client keeps for it.
#[derive(Debug, Default)]
pub(super) struct Pastes {
    pub queue: PasteQueue,
    /// The bytes of files still to upload, by hash.
    files: HashMap<ContentHash, Vec<u8>>,
    /// The active upload's stream (its job's serial), once open.
    stream: Option<u32>,
    /// A stream is being opened.
    opening: bool,
    /// What the page was last told.
    pub reported: Option<PasteProgress>,
    /// When each paste still being read came (its read time goes to the stats).
    reading: Vec<(PasteId, Instant)>,
    last_redraw: Option<Instant>,
    /// What the pastes on the current link learned of it (its rate, its round trip): the next
    /// paste starts there instead of probing (docs/UPLOAD.md "The remembered start"). One paste
    /// uploads at a time, so it is recalled, never begun and ended.
    memory: LinkMemory,
    /// The link `memory` is about; a new link forgets it (it may take another path).
    memory_link: Option<super::LinkId>,
}

impl PageClient {
    /// A file was pasted or dropped: it takes its place in the input order now. The driver
    /// reads and hashes it, then calls [`paste_read`](Self::paste_read).
    pub fn paste(&mut self, now: Instant) -> PasteId {
        let id = self.pastes.queue.begin();
        if let Some(why) = self.paste_unavailable.clone() {
            self.pastes.queue.read_failed(now, id, &why);
            self.drive_pastes(now);
        } else {
            // The driver reads it and calls `paste_read`.
            self.pastes.reading.push((id, now));
            self.render(now, false);
        }
        id
    }

    /// Whether the driver should read paste `id` at all (no: it already failed).
    pub fn paste_wanted(&self) -> bool {
        self.paste_unavailable.is_none()
    }

    /// The pasted file `id` was read (or could not be).
    pub fn paste_read(&mut self, now: Instant, id: PasteId, read: Result<PastedFile, String>) {
        if let Some(i) = self.pastes.reading.iter().position(|(p, _)| *p == id) {
            let (_, at) = self.pastes.reading.swap_remove(i);
            self.pastes.queue.last_read_time = Some(now.saturating_duration_since(at));
        }
        match read {
            Ok(f) => {
                self.pastes.queue.hashed(id, f.hash, f.bytes.len() as u64, &f.mime);
                if self.pastes.queue.needs_bytes(&f.hash) {
                    self.pastes.files.entry(f.hash).or_insert(f.bytes);
                }
            }
            Err(why) => self.pastes.queue.read_failed(now, id, &why),
        }
        self.drive_pastes(now);
    }

    /// Escape or the page's button: stop every paste under way, release the held keys.
    pub fn cancel_pastes(&mut self, now: Instant) {
        if self.pastes.queue.cancel(now) {
            self.pastes_cancelled(now);
        }
    }

    pub(super) fn pastes_cancelled(&mut self, now: Instant) {
        if let Some(serial) = self.pastes.stream.take() {
            self.push(Effect::Upload { serial, step: StreamStep::Abort });
        }
        self.drive_pastes(now);
    }

    /// After anything that may move the pastes on: finish the active job, start the next,
    /// open its stream when a link is up, type what is ready, set the paste timer.
    pub(super) fn drive_pastes(&mut self, now: Instant) {
        while let Some(outcome) = self.pastes.queue.finish_active(now) {
            if let Some(serial) = self.pastes.stream.take() {
                let step = match outcome {
                    JobOutcome::Done(_) => StreamStep::Close,
                    _ => StreamStep::Abort,
                };
                self.push(Effect::Upload { serial, step });
            }
        }
        self.pastes.queue.start_next(now);
        let rtt = self.session.as_ref().and_then(|s| s.measured_rtt());
        if self.link.current.is_some() && self.link.current != self.pastes.memory_link {
            self.pastes.memory = LinkMemory::default();
            self.pastes.memory_link = self.link.current;
        }
        let seed = self.pastes.memory.recall(now);
        if let Some(job) = self.pastes.queue.active() {
            job.rtt_hint = rtt;
            job.link_seed = seed;
        }
        let queue = &self.pastes.queue;
        self.pastes.files.retain(|h, _| queue.needs_bytes(h));
        let link_up = self.link.current.is_some() && !self.is_over();
        let (opening, has_stream) = (self.pastes.opening, self.pastes.stream.is_some());
        if let Some(job) = self.pastes.queue.active() {
            if link_up && !opening && !has_stream && job.wants_stream(now, true) {
                let serial = job.serial;
                self.pastes.opening = true;
                self.push(Effect::OpenUpload { serial });
            }
        }
        self.release(now);
        self.arm_paste_timer();
    }

    /// Types every ready path from the front of the queue and the keys behind it.
    fn release(&mut self, now: Instant) {
        let bracketed =
            self.session.as_ref().is_some_and(|s| s.server_state().framebuffer().bracketed_paste());
        let bytes = self.pastes.queue.release(bracketed);
        self.send_input(now, &bytes);
        self.render(now, false);
    }

    /// The upload stream for job `serial` is open (`true`) or could not be opened.
    /// Returns whether to read its replies (then [`upload_line`](Self::upload_line)).
    pub fn upload_opened(&mut self, now: Instant, serial: u32, opened: bool) -> bool {
        self.pastes.opening = false;
        let mut streaming = false;
        match (self.pastes.queue.active().filter(|j| j.serial == serial), opened) {
            // Cancelled meanwhile.
            (None, true) => self.push(Effect::Upload { serial, step: StreamStep::Abort }),
            (None, false) => {}
            (Some(job), false) => job.stream_ended(now),
            (Some(job), true) => {
                let header = job.stream_opened(now).to_line();
                self.pastes.stream = Some(serial);
                self.push(Effect::Upload { serial, step: StreamStep::Write(header) });
                // An eager stream's first chunks go right behind the header.
                self.pump(now);
                streaming = true;
            }
        }
        // A stream that is read on ends in `upload_ended`, which moves the pastes on.
        if !streaming {
            self.drive_pastes(now);
        }
        streaming
    }

    /// A reply line on upload stream `serial`. Returns whether to keep reading it; when not
    /// (or when its lines end), the driver calls [`upload_ended`](Self::upload_ended).
    pub fn upload_line(&mut self, now: Instant, serial: u32, line: &[u8]) -> bool {
        // A line this page cannot read is skipped (a newer relay's addition).
        let Ok(reply) = decode::<UploadReply>(line) else { return true };
        let Some(job) = self.pastes.queue.active().filter(|j| j.serial == serial) else {
            return false;
        };
        job.handle_reply(now, reply);
        let learned = job.upload().and_then(Upload::link_estimate);
        self.pastes.memory.learn(now, learned);
        // Over, or moved on to a new stream (an eager one met a part on the relay).
        if job.outcome().is_some() || !job.stream_open() {
            return false;
        }
        self.pump(now);
        true
    }

    /// Upload stream `serial` stopped being read (its job is over, or the stream broke).
    pub fn upload_ended(&mut self, now: Instant, serial: u32) {
        if let Some(job) = self.pastes.queue.active().filter(|j| j.serial == serial) {
            job.stream_ended(now);
            if job.outcome().is_none() && self.pastes.stream == Some(serial) {
                // Broken: the next attempt opens a stream of its own.
                self.pastes.stream = None;
                self.push(Effect::Upload { serial, step: StreamStep::Abort });
            }
        }
        self.drive_pastes(now);
    }

    /// Writes what the upload pacer releases, sets the paste timer, redraws the progress now
    /// and then.
    fn pump(&mut self, now: Instant) {
        let Some(serial) = self.pastes.stream else { return };
        let Some(job) = self.pastes.queue.active().filter(|j| j.serial == serial) else {
            return;
        };
        if let Some(content) = self.pastes.files.get(&job.hash()) {
            while let Some(range) = job.poll_chunk(now) {
                let (start, end) = (range.start as usize, range.end as usize);
                if let Some(chunk) = content.get(start..end) {
                    let step = StreamStep::Write(chunk.to_vec());
                    self.effects.push_back(Effect::Upload { serial, step });
                }
            }
            if job.should_abort_stream() {
                self.effects.push_back(Effect::Upload { serial, step: StreamStep::StopReading });
            }
        }
        let due = progress_redraw_due(&mut self.pastes.last_redraw, now);
        self.arm_paste_timer();
        if due {
            self.render(now, false);
        }
    }

    fn arm_paste_timer(&mut self) {
        let at = self.pastes.queue.poll_timeout();
        self.timers.put(Timer::Paste, at);
    }

    pub(super) fn paste_timeout(&mut self, now: Instant) {
        if let Some(job) = self.pastes.queue.active() {
            job.handle_timeout(now);
        }
        self.pump(now);
        self.drive_pastes(now);
    }
}
