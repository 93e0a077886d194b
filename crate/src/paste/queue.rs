//! The input order while pastes are under way: paths and typed keys leave in the order they came.
//!
//! ```text
//!  paste ─▶ begin(): its place in the queue (hash not known yet)
//!  hashed(): RecentUploads says Uploaded(path) (ready at once), InProgress (wait for that
//!            upload) or New (a job is queued: UploadJob, one at a time)
//!  keys typed meanwhile ─▶ key(): held behind the unfinished paste, in order
//!  release(): from the front, type each ready path (bracketed when the remote wants it) and the
//!             keys behind it; stop at the first paste still under way
//!  Escape (or cancel()): every paste under way stops, its place is dropped, held keys go out
//! ```
//!
//! Sans-IO: the driver reads and hashes the file, runs the active job's stream, and sends what
//! `release` returns. Nothing typed is ever dropped: a key is either sent at once, held, or
//! returned by a later `release`.

use std::collections::VecDeque;
use std::time::Duration;

use crate::time::Instant;
use crate::transfer::{ContentHash, Recall, RecentUploads};

use super::job::{JobOutcome, UploadJob};
use super::progress::{PasteProgress, PasteState, shell_word};

/// Hashes remembered for repeat pastes (one question to the relay when forgotten).
const RECENT: usize = 64;
/// How long the result ("failed: …", "cancelled") stays in the notification bar.
pub const RESULT_SHOWN: Duration = Duration::from_secs(8);
/// The standing queue a paste's pacer holds (the transfer default is 5 ms): a keystroke typed
/// during an upload waits behind it. 2 ms: in simulation the median wait drops by 3-4 ms at the
/// same time with and without ack clumps (`a_shorter_queue_target_shortens_the_keystroke_wait_
/// by_the_difference`); in the browser bench echo − idle +8.4 against +11.7 ms (medians of 15 and
/// 22 runs), the ratio within the shared machine's noise (docs/BENCHMARKS.md, "Paste: eager start
/// and the queue target"). The counter that would clear it is the link's idle time (first second
/// and middle of the upload), which the bench prints.
pub const PASTE_QUEUE_TARGET: Duration = Duration::from_millis(2);
/// The byte Escape sends: it cancels pastes under way instead of reaching the shell.
const ESCAPE: &[u8] = b"\x1b";

/// A paste's place in the queue, from [`PasteQueue::begin`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PasteId(u32);

/// One entry of the ordered input queue.
#[derive(Debug)]
enum Held {
    /// Keys typed after an unfinished paste.
    Keys(Vec<u8>),
    /// A paste: its hash once known; `dropped` after failure or cancel.
    Paste { id: PasteId, hash: Option<ContentHash>, dropped: bool },
}

/// An upload waiting for its turn.
#[derive(Debug)]
struct Waiting {
    hash: ContentHash,
    total: u64,
    mime: String,
}

/// What to do with typed bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum KeyAction {
    /// Send them now.
    Send,
    /// Held behind an unfinished paste; a later [`PasteQueue::release`] returns them.
    Held,
    /// Escape during a paste: the pastes were cancelled (abort the active stream, then
    /// `release`).
    CancelledPastes,
}

/// Counters for `stats().paste` (docs/BROWSER.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PasteCounters {
    pub pastes: u32,
    /// Jobs that asked the relay (a repeat paste the page remembers asks nothing).
    pub uploads: u32,
    /// Upload streams opened (more than `uploads` when resumed).
    pub streams: u32,
    /// Content bytes written on upload streams.
    pub bytes_sent: u64,
    /// Bytes the relay already had when a stream started (resumed or repeat).
    pub bytes_skipped: u64,
    pub completed: u32,
    pub failed: u32,
    pub cancelled: u32,
    pub paths_typed: u32,
    pub held_keys: u64,
}

/// The paste queue and its one active upload. See the module documentation.
#[derive(Debug)]
pub struct PasteQueue {
    recent: RecentUploads,
    queue: VecDeque<Held>,
    waiting: VecDeque<Waiting>,
    active: Option<UploadJob>,
    next_id: u32,
    counters: PasteCounters,
    /// The last result to show, and until when.
    result: Option<(PasteProgress, Instant)>,
    pub last_error: Option<String>,
    pub last_path: Option<String>,
    /// First byte to last ack of the last completed upload.
    pub last_upload_time: Option<Duration>,
    /// The last completed upload's wait for its first byte: from its job (the file read and
    /// hashed) to the first content byte written. An eager start saves the round trip to
    /// `have` here.
    pub last_first_byte_wait: Option<Duration>,
    /// The last pasted file's read and SHA-256 in the driver: paste event to its hash (the
    /// page client times it; before its job exists).
    pub last_read_time: Option<Duration>,
    /// Upload jobs start eager: content right after the header, one round trip sooner (up to
    /// the pacer's first window, 64 KiB, of link time). Off by default: a page that forgot a
    /// paste the relay has (a reload, another tab) would send up to that window for nothing,
    /// where now it sends 0 bytes (docs/UPLOAD.md, "Eager start").
    pub eager: bool,
    /// The upload pacer's standing-queue target ([`PASTE_QUEUE_TARGET`]; `None`: the transfer
    /// default, 5 ms). The benchmark's echo-against-idle trade-off.
    pub queue_target: Option<Duration>,
    /// Hold typed keys behind an unfinished paste (the default; the benchmark turns it off to
    /// measure the datagram path under an upload).
    pub hold_keys: bool,
}

impl Default for PasteQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl PasteQueue {
    pub fn new() -> Self {
        PasteQueue {
            recent: RecentUploads::new(RECENT),
            queue: VecDeque::new(),
            waiting: VecDeque::new(),
            active: None,
            next_id: 0,
            counters: PasteCounters::default(),
            result: None,
            last_error: None,
            last_path: None,
            last_upload_time: None,
            last_first_byte_wait: None,
            last_read_time: None,
            eager: false,
            queue_target: Some(PASTE_QUEUE_TARGET),
            hold_keys: true,
        }
    }

    /// A file was pasted or dropped: it takes its place in the input order now, before it is
    /// read, so keys typed while it is hashed wait behind it.
    pub fn begin(&mut self) -> PasteId {
        self.counters.pastes += 1;
        self.next_id += 1;
        let id = PasteId(self.next_id);
        self.queue.push_back(Held::Paste { id, hash: None, dropped: false });
        id
    }

    /// The file of `id` was read and hashed. A new content queues an upload job.
    pub fn hashed(&mut self, id: PasteId, hash: ContentHash, total: u64, mime: &str) {
        let Some(slot) = self.queue.iter_mut().find_map(|h| match h {
            Held::Paste { id: i, hash, dropped: false } if *i == id => Some(hash),
            _ => None,
        }) else {
            return; // cancelled meanwhile
        };
        *slot = Some(hash);
        if let Recall::New = self.recent.begin(hash) {
            self.waiting.push_back(Waiting { hash, total, mime: mime.to_string() });
        }
    }

    /// The file of `id` could not be read: its place is dropped.
    pub fn read_failed(&mut self, now: Instant, id: PasteId, why: &str) {
        for h in self.queue.iter_mut() {
            if let Held::Paste { id: i, dropped, .. } = h {
                if *i == id {
                    *dropped = true;
                }
            }
        }
        self.record_failure(now, why);
    }

    /// Typed bytes: send, hold, or (Escape during a paste) cancel.
    pub fn key(&mut self, now: Instant, bytes: &[u8]) -> KeyAction {
        if bytes == ESCAPE && self.busy() {
            self.cancel(now);
            return KeyAction::CancelledPastes;
        }
        if self.hold_keys && self.holding() {
            self.counters.held_keys += bytes.len() as u64;
            match self.queue.back_mut() {
                Some(Held::Keys(k)) => k.extend_from_slice(bytes),
                _ => self.queue.push_back(Held::Keys(bytes.to_vec())),
            }
            return KeyAction::Held;
        }
        KeyAction::Send
    }

    /// Bytes to send now, in order: each ready path (as a shell word and a space, bracketed when
    /// `bracketed`) and the keys held behind it, up to the first paste still under way.
    pub fn release(&mut self, bracketed: bool) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some(front) = self.queue.front() {
            match front {
                Held::Keys(_) => {
                    if let Some(Held::Keys(k)) = self.queue.pop_front() {
                        out.extend_from_slice(&k);
                    }
                }
                Held::Paste { dropped: true, .. } => {
                    self.queue.pop_front();
                }
                Held::Paste { hash: None, .. } => break,
                Held::Paste { hash: Some(h), .. } => match self.recent.recall(h) {
                    Recall::InProgress => break,
                    // Failed or cancelled since: its place is dropped.
                    Recall::New => {
                        self.queue.pop_front();
                    }
                    Recall::Uploaded(path) => {
                        self.queue.pop_front();
                        self.counters.paths_typed += 1;
                        let word = shell_word(&path);
                        self.last_path = Some(path);
                        // A trailing space separates it from whatever is typed next.
                        if bracketed {
                            out.extend_from_slice(format!("\x1b[200~{word}\x1b[201~ ").as_bytes());
                        } else {
                            out.extend_from_slice(format!("{word} ").as_bytes());
                        }
                    }
                },
            }
        }
        out
    }

    /// Escape or the page's button: every paste under way stops; held keys come out of the next
    /// [`release`](Self::release). Returns whether anything was cancelled.
    pub fn cancel(&mut self, now: Instant) -> bool {
        if !self.busy() {
            return false;
        }
        let mut hashes: Vec<ContentHash> = self.waiting.drain(..).map(|w| w.hash).collect();
        if let Some(mut job) = self.active.take() {
            job.cancel(now);
            self.count_job(&job);
            hashes.push(job.hash());
        }
        for h in &hashes {
            self.recent.abandon(h);
        }
        for h in self.queue.iter_mut() {
            if let Held::Paste { dropped, .. } = h {
                *dropped = true;
            }
        }
        self.counters.cancelled += 1;
        self.show_result(now, PasteState::Cancelled, None);
        true
    }

    /// The upload on the wire, if any. The driver runs its stream.
    pub fn active(&mut self) -> Option<&mut UploadJob> {
        self.active.as_mut()
    }

    /// The upload on the wire, read-only.
    pub fn active_job(&self) -> Option<&UploadJob> {
        self.active.as_ref()
    }

    /// Makes the next waiting upload active when none is; returns its hash (the driver looks up
    /// the bytes it read for it).
    pub fn start_next(&mut self, now: Instant) -> Option<ContentHash> {
        if self.active.is_some() {
            return None;
        }
        let w = self.waiting.pop_front()?;
        self.counters.uploads += 1;
        let mut job = UploadJob::new(w.hash, w.total, w.mime, now);
        job.serial = self.counters.uploads;
        job.eager = self.eager;
        job.queue_target = self.queue_target;
        self.active = Some(job);
        Some(w.hash)
    }

    /// Takes the active job off when it is over and records its outcome; returns it. Call
    /// after anything that may have finished it, then [`release`](Self::release).
    pub fn finish_active(&mut self, now: Instant) -> Option<JobOutcome> {
        let outcome = self.active.as_ref()?.outcome()?;
        let job = self.active.take()?;
        self.count_job(&job);
        match &outcome {
            JobOutcome::Done(path) => {
                self.recent.finish(job.hash(), path.clone());
                self.counters.completed += 1;
                if let (Some(a), Some(b)) = (job.first_byte_at, job.finished_at) {
                    self.last_upload_time = Some(b.saturating_duration_since(a));
                    self.last_first_byte_wait = Some(a.saturating_duration_since(job.created_at));
                }
                self.result = None;
            }
            JobOutcome::Failed(why) => {
                self.recent.abandon(&job.hash());
                self.record_failure(now, why);
            }
            JobOutcome::Cancelled => {}
        }
        Some(outcome)
    }

    /// The session is over: every paste fails, held keys stay held (there is nowhere to send
    /// them).
    pub fn abandon(&mut self, now: Instant) {
        if let Some(job) = self.active.as_mut() {
            job.abandon(now);
        }
        self.finish_active(now);
    }

    /// Whether the content `hash` is still to be uploaded (waiting or on the wire): the driver
    /// keeps its bytes until then.
    pub fn needs_bytes(&self, hash: &ContentHash) -> bool {
        self.active.as_ref().is_some_and(|j| j.hash() == *hash)
            || self.waiting.iter().any(|w| w.hash == *hash)
    }

    /// Typed input goes into the queue instead of out while this is true.
    pub fn holding(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Anything under way: a paste being read, waiting, or uploading.
    pub fn busy(&self) -> bool {
        self.holding() || self.active.is_some() || !self.waiting.is_empty()
    }

    /// The progress of the paste in front, or the last result for a few seconds.
    pub fn progress(&self, now: Instant) -> Option<PasteProgress> {
        let queued = self.waiting.len();
        if let Some(job) = &self.active {
            let (bytes_done, rate, time_left) = job.upload().map_or((0, None, None), |u| {
                let p = u.progress(now);
                (p.acked, p.rate, p.time_left)
            });
            return Some(PasteProgress {
                state: job.state(),
                bytes_done,
                total: job.total(),
                rate,
                time_left,
                queued,
                error: None,
            });
        }
        if self.holding()
            && self.queue.iter().any(|h| matches!(h, Held::Paste { dropped: false, .. }))
        {
            return Some(PasteProgress {
                state: PasteState::Reading,
                bytes_done: 0,
                total: 0,
                rate: None,
                time_left: None,
                queued,
                error: None,
            });
        }
        let (shown, until) = self.result.as_ref()?;
        (now < *until).then(|| shown.clone())
    }

    /// The notification bar's paste line, if any.
    pub fn line(&self, now: Instant) -> Option<String> {
        self.progress(now).map(|p| p.line())
    }

    pub fn counters(&self) -> PasteCounters {
        let mut c = self.counters.clone();
        if let Some(job) = &self.active {
            c.streams += job.streams;
            c.bytes_sent += job.bytes_sent;
            c.bytes_skipped += job.bytes_skipped;
        }
        c
    }

    /// When a shown result expires (the driver redraws then).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let result = self.result.as_ref().map(|(_, until)| *until);
        let job = self.active.as_ref().and_then(UploadJob::poll_timeout);
        match (result, job) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn count_job(&mut self, job: &UploadJob) {
        self.counters.streams += job.streams;
        self.counters.bytes_sent += job.bytes_sent;
        self.counters.bytes_skipped += job.bytes_skipped;
    }

    fn record_failure(&mut self, now: Instant, why: &str) {
        self.counters.failed += 1;
        self.last_error = Some(why.to_string());
        self.show_result(now, PasteState::Failed, Some(why.to_string()));
    }

    fn show_result(&mut self, now: Instant, state: PasteState, error: Option<String>) {
        let shown = PasteProgress {
            state,
            bytes_done: 0,
            total: 0,
            rate: None,
            time_left: None,
            queued: 0,
            error,
        };
        self.result = Some((shown, now + RESULT_SHOWN));
    }
}
