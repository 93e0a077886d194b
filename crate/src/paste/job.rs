//! One paste's upload across as many streams as it takes: the upload-stream client, sans-IO.
//!
//! ```text
//!  WaitingForLink ──link up──▶ (driver opens a stream, writes header()) ──▶ Asking
//!  Asking ──Have{path}──▶ Done          Asking ──Have{have}──▶ Sending(Upload from `have`)
//!  the first stream, eager: header() ──▶ Sending(Upload from 0) at once, before `have`;
//!      Have{have: 0} ──▶ Sending on    Have{have: N > 0} ──▶ Retrying now (resume from N)
//!  Sending ──Ack──▶ Sending (more chunks)       ──Path──▶ Done       ──Error──▶ Failed
//!  any stream phase ──stream ended / stalled──▶ Retrying(at +RETRY_PAUSE) ──▶ WaitingForLink
//!  no progress for GIVE_UP (link down or streams failing) ──▶ Failed
//! ```
//!
//! The driver owns the stream and the bytes; this type decides what to do next. Each resume
//! starts from what the relay says it holds, never from what the page thinks it sent.

use std::ops::Range;
use std::time::Duration;

use crate::relay_proto::{UploadHeader, UploadReply};
use crate::time::Instant;
use crate::transfer::{
    AckInfo, ContentHash, FailReason, LinkEstimate, Upload, UploadConfig, UploadState,
};

use super::progress::PasteState;

/// An interrupted upload gives up after this long without any progress (link down, or streams
/// that keep failing before a byte is acknowledged).
pub const GIVE_UP: Duration = Duration::from_secs(120);
/// Pause between attempts on a link that is up (the stream failed, the pacer stalled).
pub const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// What a job waits for.
#[derive(Debug)]
enum Phase {
    /// No stream: the next one opens when a link is up.
    WaitingForLink {
        interrupted: bool,
    },
    /// A stream is open and the header sent; waiting for the relay's `have`.
    Asking,
    /// Sending paced chunks.
    Sending(Box<Upload>),
    /// The stream broke; try again at this time.
    Retrying {
        at: Instant,
    },
    Done(String),
    Failed(String),
    Cancelled,
}

/// How one job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    /// Published at this path on the relay's machine.
    Done(String),
    /// Given up; the reason is for the person.
    Failed(String),
    Cancelled,
}

/// The stream's first answer, `have`, is still to come (an eager stream sends before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Awaited,
    Received,
}

/// One paste's upload. See the module documentation for the calling contract.
#[derive(Debug)]
pub struct UploadJob {
    /// Tells this job from a later one of the same content (a stream task checks it is still
    /// serving the active job).
    pub serial: u32,
    hash: ContentHash,
    total: u64,
    mime: String,
    phase: Phase,
    /// The most the relay ever said it held, and when that last grew (give-up clock).
    progress_mark: u64,
    last_progress: Instant,
    /// Streams opened for this job.
    pub streams: u32,
    /// Content bytes handed to streams (a resumed stream resends nothing the relay held).
    pub bytes_sent: u64,
    /// Bytes the relay already had when a stream started (resumed or repeat).
    pub bytes_skipped: u64,
    /// When the job was made (its file read and hashed), its first stream opened, the first
    /// content byte went out, and the last answer came.
    pub created_at: Instant,
    pub opened_at: Option<Instant>,
    pub first_byte_at: Option<Instant>,
    pub finished_at: Option<Instant>,
    /// Send the first stream's content right after its header, without waiting a round trip
    /// for `have` (`PasteQueue::eager`).
    pub eager: bool,
    /// Whether the open stream's `have` came.
    answer: Answer,
    /// The pacer's standing-queue target, when not `transfer::QUEUE_TARGET`
    /// (`PasteQueue::queue_target`).
    pub queue_target: Option<Duration>,
    /// The link's round trip as the session measured it, if it has: the pacer spreads its first
    /// window over it (`transfer::Upload::rtt_hint`).
    pub rtt_hint: Option<Duration>,
    /// What earlier pastes on this link learned of it: the pacer starts there instead of probing
    /// (`transfer::Upload::remembered`, the page's `transfer::LinkMemory`).
    pub link_seed: Option<LinkEstimate>,
}

impl UploadJob {
    pub fn new(hash: ContentHash, total: u64, mime: impl Into<String>, now: Instant) -> Self {
        UploadJob {
            serial: 0,
            hash,
            total,
            mime: mime.into(),
            phase: Phase::WaitingForLink { interrupted: false },
            progress_mark: 0,
            last_progress: now,
            streams: 0,
            bytes_sent: 0,
            bytes_skipped: 0,
            created_at: now,
            opened_at: None,
            first_byte_at: None,
            finished_at: None,
            eager: false,
            answer: Answer::Awaited,
            queue_target: None,
            rtt_hint: None,
            link_seed: None,
        }
    }

    pub fn hash(&self) -> ContentHash {
        self.hash
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether the driver should open a stream now (a link is up and nothing is open). When
    /// it does, it calls [`stream_opened`](Self::stream_opened) and writes the header.
    pub fn wants_stream(&self, now: Instant, link_up: bool) -> bool {
        link_up
            && match self.phase {
                Phase::WaitingForLink { .. } => true,
                Phase::Retrying { at } => now >= at,
                _ => false,
            }
    }

    /// A stream was opened: returns the header line's message to write first. On an eager
    /// stream, drain [`poll_chunk`](Self::poll_chunk) right after writing it.
    ///
    /// Only the first stream of a job is eager: a later one resumes, and where from is the
    /// relay's word. The first may still meet a part (a reload, another tab): the relay then
    /// answers `have` N > 0 and ignores this stream's bytes, and the job resumes on a new one.
    pub fn stream_opened(&mut self, now: Instant) -> UploadHeader {
        let eager = self.eager && self.streams == 0;
        self.streams += 1;
        self.opened_at.get_or_insert(now);
        self.answer = Answer::Awaited;
        self.phase = Phase::Asking;
        if eager {
            match Upload::new(UploadConfig::new(self.total, 0), now) {
                Ok(u) => self.phase = Phase::Sending(Box::new(self.tuned(u))),
                Err(e) => self.fail(now, format!("cannot upload this file: {e}")),
            }
        }
        UploadHeader {
            hash: crate::relay_proto::Sha256(self.hash).to_string(),
            size: self.total,
            mime: (!self.mime.is_empty()).then(|| self.mime.clone()),
            eager: matches!(self.phase, Phase::Sending(_)),
        }
    }

    /// One reply line from the relay. Afterwards drain [`poll_chunk`](Self::poll_chunk).
    pub fn handle_reply(&mut self, now: Instant, reply: UploadReply) {
        if self.outcome().is_some() {
            return;
        }
        let first_answer = std::mem::replace(&mut self.answer, Answer::Received) == Answer::Awaited;
        match reply {
            // An eager stream's bytes are already on their way from 0: the relay held none.
            UploadReply::Have { have: 0, path: None }
                if first_answer && matches!(self.phase, Phase::Sending(_)) => {}
            // It holds a part: it reads nothing more here; resume from its count on a new
            // stream, at once (nothing failed).
            UploadReply::Have { path: None, .. }
                if first_answer && matches!(self.phase, Phase::Sending(_)) =>
            {
                self.note_progress(now, have_of(&reply));
                self.phase = Phase::Retrying { at: now };
            }
            UploadReply::Have { have, path: Some(path) } => {
                self.bytes_skipped += have;
                self.finish(now, Phase::Done(path));
            }
            UploadReply::Have { have, path: None } => {
                self.bytes_skipped += have.min(self.total);
                self.note_progress(now, have);
                match Upload::new(UploadConfig::new(self.total, have), now) {
                    Ok(u) => self.phase = Phase::Sending(Box::new(self.tuned(u))),
                    Err(e) => self.fail(now, format!("the relay's answer makes no sense: {e}")),
                }
            }
            UploadReply::Ack { acked, relay_time_us } => {
                let Phase::Sending(u) = &mut self.phase else { return };
                let ack = AckInfo {
                    acked_bytes: acked,
                    relay_time: Duration::from_micros(relay_time_us),
                };
                if let Err(e) = u.handle_ack(now, ack) {
                    self.fail(now, format!("the relay sent a bad acknowledgement: {e}"));
                } else {
                    self.note_progress(now, acked);
                }
            }
            UploadReply::Path { path } => self.finish(now, Phase::Done(path)),
            UploadReply::Error { message, .. } => self.fail(now, message),
        }
    }

    /// The next range of content bytes to write on the stream, if the pacer releases one.
    pub fn poll_chunk(&mut self, now: Instant) -> Option<Range<u64>> {
        let Phase::Sending(u) = &mut self.phase else { return None };
        let range = u.poll_chunk(now)?;
        self.bytes_sent += range.end - range.start;
        self.first_byte_at.get_or_insert(now);
        Some(range)
    }

    /// The stream ended without a final answer (relay restart, network change, a read error,
    /// or the driver aborted it because [`should_abort_stream`](Self::should_abort_stream)).
    pub fn stream_ended(&mut self, now: Instant) {
        if self.outcome().is_some() || !self.stream_open() {
            // Over, or already moved on from this stream (a retry is set).
            return;
        }
        if self.given_up(now) {
            return;
        }
        self.phase = Phase::Retrying { at: now + RETRY_PAUSE };
    }

    /// The link is gone: no stream can be open any more.
    pub fn link_lost(&mut self, now: Instant) {
        if matches!(self.phase, Phase::Asking | Phase::Sending(_)) {
            self.stream_ended(now);
        }
    }

    /// The pacer saw no ack for its stall timeout: the driver should abort the stream (the job
    /// then resumes on a live link).
    pub fn should_abort_stream(&self) -> bool {
        matches!(&self.phase, Phase::Sending(u)
            if matches!(u.state(), UploadState::Failed { reason: FailReason::Stalled { .. } }))
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Sending(u) => u.poll_timeout(),
            Phase::Retrying { at } => Some(*at),
            Phase::WaitingForLink { .. } => Some(self.last_progress + GIVE_UP),
            _ => None,
        }
    }

    /// Timers: pacing, stall detection, retry pause, give-up.
    pub fn handle_timeout(&mut self, now: Instant) {
        match &mut self.phase {
            Phase::Sending(u) => u.handle_timeout(now),
            Phase::Retrying { at } if now >= *at => {
                self.phase = Phase::WaitingForLink { interrupted: true };
                self.given_up(now);
            }
            Phase::WaitingForLink { .. } => {
                self.given_up(now);
            }
            _ => {}
        }
    }

    /// The person cancelled.
    pub fn cancel(&mut self, now: Instant) {
        if self.outcome().is_none() {
            if let Phase::Sending(u) = &mut self.phase {
                u.cancel();
            }
            self.finish(now, Phase::Cancelled);
        }
    }

    /// The session ended: nothing can be uploaded any more.
    pub fn abandon(&mut self, now: Instant) {
        if self.outcome().is_none() {
            self.fail(now, "the session ended".into());
        }
    }

    /// Set once the job is over.
    pub fn outcome(&self) -> Option<JobOutcome> {
        match &self.phase {
            Phase::Done(p) => Some(JobOutcome::Done(p.clone())),
            Phase::Failed(why) => Some(JobOutcome::Failed(why.clone())),
            Phase::Cancelled => Some(JobOutcome::Cancelled),
            _ => None,
        }
    }

    /// Whether a stream is open (between `stream_opened` and its end).
    pub fn stream_open(&self) -> bool {
        matches!(self.phase, Phase::Asking | Phase::Sending(_))
    }

    /// The pacer's view, while sending.
    pub fn upload(&self) -> Option<&Upload> {
        match &self.phase {
            Phase::Sending(u) => Some(u),
            _ => None,
        }
    }

    /// What the progress line shows, and how far the relay is.
    pub fn state(&self) -> PasteState {
        match &self.phase {
            Phase::WaitingForLink { interrupted: false } | Phase::Asking => PasteState::Asking,
            Phase::WaitingForLink { interrupted: true } => PasteState::WaitingForRelay,
            Phase::Retrying { .. } => PasteState::Resuming,
            Phase::Sending(_) => PasteState::Sending,
            Phase::Done(_) => PasteState::Done,
            Phase::Failed(_) => PasteState::Failed,
            Phase::Cancelled => PasteState::Cancelled,
        }
    }

    /// The pacer with this job's settings.
    fn tuned(&self, u: Upload) -> Upload {
        let u = match self.queue_target {
            Some(d) => u.queue_target(d),
            None => u,
        };
        let u = match self.rtt_hint {
            Some(rtt) => u.rtt_hint(rtt),
            None => u,
        };
        match self.link_seed {
            Some(link) => u.remembered(link),
            None => u,
        }
    }

    fn note_progress(&mut self, now: Instant, held: u64) {
        if held > self.progress_mark {
            self.progress_mark = held;
            self.last_progress = now;
        }
    }

    /// Fails the job when nothing moved for [`GIVE_UP`]; returns whether it did.
    fn given_up(&mut self, now: Instant) -> bool {
        if now.saturating_duration_since(self.last_progress) < GIVE_UP {
            return false;
        }
        let why = if matches!(self.phase, Phase::WaitingForLink { .. }) {
            "no connection to the relay for two minutes"
        } else {
            "the upload made no progress for two minutes"
        };
        self.fail(now, why.into());
        true
    }

    fn fail(&mut self, now: Instant, why: String) {
        self.finish(now, Phase::Failed(why));
    }

    fn finish(&mut self, now: Instant, phase: Phase) {
        self.phase = phase;
        self.finished_at = Some(now);
    }
}

fn have_of(reply: &UploadReply) -> u64 {
    match reply {
        UploadReply::Have { have, .. } => *have,
        _ => 0,
    }
}
