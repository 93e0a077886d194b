//! The page's downloads (`tern send FILE` in the shell): which offer to fetch, from where, when
//! to ask again after a lost link, what to acknowledge, and what the person sees.
//!
//! ```text
//!  offer (control stream) -> Downloads::offer
//!  Downloads::next_request(now) -> open a stream, write the DownloadRequest line
//!  the relay's DownloadStart line -> started;  bytes -> received;  ack_if_due -> DownloadAck lines
//!  complete -> the driver checks the SHA-256 -> verified -> the answer for the relay
//!  stream or link lost -> stream_ended: asked again from what is held (after a pause if nothing
//!  came since the last try), given up after MAX_FRUITLESS_TRIES
//! ```
//!
//! The bytes themselves stay in the driver (in the browser, outside wasm memory, which never
//! shrinks); this module counts them. No I/O, no clock: `now` comes with every call.

use std::collections::VecDeque;
use std::time::Duration;

use crate::paste::size;
use crate::relay_proto::upload::AckPolicy;
use crate::relay_proto::{DownloadAck, DownloadReply, DownloadRequest, OfferAnswer};
use crate::time::Instant;

/// The largest file the page takes: it holds the whole file in memory until it is checked and
/// saved (the relay's `--send-limit` is usually lower).
pub const PAGE_LIMIT: u64 = 2 << 30;
/// Tries in a row that bring no byte before a download is given up.
pub const MAX_FRUITLESS_TRIES: u32 = 8;
/// The pause before asking again after a try that brought nothing, doubled per such try...
const RETRY_BASE: Duration = Duration::from_millis(500);
/// ...up to this.
const RETRY_MAX: Duration = Duration::from_secs(8);
/// A finished download's last line stays this long in the bar.
pub const SHOW_RESULT_FOR: Duration = Duration::from_secs(6);
/// The rate shown is measured over about this long.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// One file offered by the relay, as the page knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOffer {
    pub id: String,
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

/// Where a download stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownloadState {
    /// Waiting for a stream (the first, or the next after a lost one).
    Waiting,
    /// A stream is open and its request sent; no answer yet.
    Requesting,
    /// Bytes are coming.
    Receiving,
    /// Everything is here; the driver is checking the SHA-256.
    Verifying,
    /// Checked and handed to the browser to save.
    Saved,
    /// Given up; the reason is for the person and the shell.
    Failed(String),
}

impl DownloadState {
    pub fn as_str(&self) -> &'static str {
        match self {
            DownloadState::Waiting => "waiting",
            DownloadState::Requesting => "requesting",
            DownloadState::Receiving => "receiving",
            DownloadState::Verifying => "verifying",
            DownloadState::Saved => "saved",
            DownloadState::Failed(_) => "failed",
        }
    }

    fn is_over(&self) -> bool {
        matches!(self, DownloadState::Saved | DownloadState::Failed(_))
    }
}

/// What the driver does with the bytes that just came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Keep them; more are coming.
    More,
    /// Keep them; that was the last: check the SHA-256 and call [`Downloads::verified`].
    Complete,
    /// Not for the current stream (an old one, or more than the file holds): drop them and
    /// close that stream.
    Refused,
}

/// The download in front, for the bar and `stats()`.
#[derive(Debug, Clone, PartialEq)]
pub struct DownloadProgress {
    pub name: String,
    pub state: DownloadState,
    pub bytes_done: u64,
    pub total: u64,
    /// Bytes per second over about the last second, once measured.
    pub rate: Option<u64>,
    /// Downloads waiting behind this one.
    pub queued: usize,
}

impl DownloadProgress {
    pub fn percent(&self) -> f64 {
        if self.total == 0 { 100.0 } else { self.bytes_done as f64 * 100.0 / self.total as f64 }
    }

    /// [`percent`](Self::percent) rounded down, in integers (no float formatting in the wasm).
    fn whole_percent(&self) -> u64 {
        if self.total == 0 { 100 } else { crate::paste::whole_percent(self.bytes_done, self.total) }
    }

    /// The line in mosh's notification bar.
    pub fn line(&self) -> String {
        let more =
            if self.queued > 0 { format!(" (+{} queued)", self.queued) } else { String::new() };
        let what = format!("Downloading {} ({})", self.name, size(self.total));
        match &self.state {
            DownloadState::Waiting if self.bytes_done > 0 => {
                let percent = self.whole_percent();
                format!("{what}: interrupted at {percent}%; waiting for the relay…{more}")
            }
            DownloadState::Waiting | DownloadState::Requesting => format!("{what}: asking…{more}"),
            DownloadState::Receiving => {
                let rate = self.rate.map_or("measuring".to_string(), |r| format!("{}/s", size(r)));
                let percent = self.whole_percent();
                format!("{what}: {percent}%, {rate}{more}")
            }
            DownloadState::Verifying => format!("{what}: checking SHA-256…{more}"),
            DownloadState::Saved => {
                format!("Downloaded {} ({}), SHA-256 checked.{more}", self.name, size(self.total))
            }
            DownloadState::Failed(why) => format!("Download of {} failed: {why}{more}", self.name),
        }
    }
}

#[derive(Debug)]
struct Job {
    offer: FileOffer,
    state: DownloadState,
    /// Bytes held, from offset 0.
    have: u64,
    /// The stream attempt the bytes belong to; bytes of any other are refused.
    serial: u32,
    acks: AckPolicy,
    /// When the read that brought byte `have` happened (the acks' `page_time_us`).
    last_read: Instant,
    /// `have` at the start of the current try: a try that ends without growing it is fruitless.
    have_at_try: u64,
    fruitless: u32,
    retry_at: Instant,
    /// (when, have) samples for the shown rate.
    samples: VecDeque<(Instant, u64)>,
    finished_at: Option<Instant>,
}

impl Job {
    fn new(offer: FileOffer, now: Instant) -> Self {
        Job {
            offer,
            state: DownloadState::Waiting,
            have: 0,
            serial: 0,
            acks: AckPolicy::new(0),
            last_read: now,
            have_at_try: 0,
            fruitless: 0,
            retry_at: now,
            samples: VecDeque::new(),
            finished_at: None,
        }
    }

    fn fail(&mut self, why: impl Into<String>, now: Instant) {
        self.state = DownloadState::Failed(why.into());
        self.finished_at = Some(now);
    }

    /// The current try is over without the file: ask again, or give up.
    fn try_over(&mut self, now: Instant, why: &str) {
        if self.have > self.have_at_try {
            self.fruitless = 0;
        } else {
            self.fruitless += 1;
        }
        if self.fruitless >= MAX_FRUITLESS_TRIES {
            return self.fail(format!("{why} ({MAX_FRUITLESS_TRIES} tries brought nothing)"), now);
        }
        let pause = if self.fruitless == 0 {
            Duration::ZERO
        } else {
            (RETRY_BASE * 2u32.pow(self.fruitless - 1)).min(RETRY_MAX)
        };
        self.state = DownloadState::Waiting;
        self.retry_at = now + pause;
        self.samples.clear();
    }

    fn rate(&self) -> Option<u64> {
        let (&(t0, b0), &(t1, b1)) = (self.samples.front()?, self.samples.back()?);
        let span = t1.saturating_duration_since(t0);
        (span >= Duration::from_millis(200)).then(|| ((b1 - b0) as f64 / span.as_secs_f64()) as u64)
    }
}

/// Every download of this page, the one in front first (one at a time: each gets the whole link).
#[derive(Debug, Default)]
pub struct Downloads {
    jobs: VecDeque<Job>,
    /// Offers seen (a relay offers again to every page that attaches): never fetched twice.
    seen: Vec<String>,
}

impl Downloads {
    pub fn new() -> Self {
        Downloads::default()
    }

    /// A file offered by the relay. `Err`: refused at once (the answer for the relay); `Ok(false)`:
    /// known already (offered again after a reconnect).
    pub fn offer(&mut self, offer: FileOffer, now: Instant) -> Result<bool, OfferAnswer> {
        if self.seen.contains(&offer.id) {
            return Ok(false);
        }
        self.seen.push(offer.id.clone());
        if offer.size > PAGE_LIMIT {
            return Err(OfferAnswer::Failed {
                message: format!(
                    "{} is {}; the browser takes at most {}",
                    offer.name,
                    size(offer.size),
                    size(PAGE_LIMIT)
                ),
            });
        }
        self.jobs.push_back(Job::new(offer, now));
        Ok(true)
    }

    fn front(&mut self) -> Option<&mut Job> {
        self.jobs.front_mut().filter(|j| !j.state.is_over())
    }

    fn current(&mut self, serial: u32) -> Option<&mut Job> {
        self.front().filter(|j| j.serial == serial)
    }

    /// The request for a new stream, when the download in front needs one now (the driver has a
    /// link). Returns the stream's serial and its first line.
    pub fn next_request(&mut self, now: Instant) -> Option<(u32, DownloadRequest)> {
        self.forget_finished(now);
        let job = self.front()?;
        if job.state != DownloadState::Waiting || job.retry_at > now {
            return None;
        }
        job.serial += 1;
        job.state = DownloadState::Requesting;
        job.have_at_try = job.have;
        job.acks = AckPolicy::new(job.have);
        Some((job.serial, DownloadRequest { download: job.offer.id.clone(), from: job.have }))
    }

    /// The relay's answer line on stream `serial`: true when the bytes follow; false: close the
    /// stream (a final failure's answer for the relay is [`Downloads::take_failures`]'s).
    pub fn started(&mut self, serial: u32, reply: DownloadReply, now: Instant) -> bool {
        let Some(job) = self.current(serial) else { return false };
        match reply {
            DownloadReply::Start { size, from } if size == job.offer.size && from == job.have => {
                job.state = DownloadState::Receiving;
                job.samples.push_back((now, job.have));
                true
            }
            DownloadReply::Start { size, .. } if size != job.offer.size => {
                let why = format!("the file is {} now, {} when offered", size, job.offer.size);
                job.fail(why, now);
                false
            }
            DownloadReply::Start { .. } => {
                job.try_over(now, "the relay started from the wrong place");
                false
            }
            DownloadReply::Error { message, gone: true } => {
                job.fail(message, now);
                false
            }
            DownloadReply::Error { message, gone: false } => {
                job.try_over(now, &message);
                false
            }
        }
    }

    /// `n` bytes came on stream `serial`.
    pub fn received(&mut self, serial: u32, n: u64, now: Instant) -> Received {
        let Some(job) = self.current(serial) else { return Received::Refused };
        if job.state != DownloadState::Receiving || job.have + n > job.offer.size {
            job.try_over(now, "the relay sent more than the file holds");
            return Received::Refused;
        }
        job.have += n;
        job.last_read = now;
        job.samples.push_back((now, job.have));
        while job.samples.len() > 2 && job.samples[1].0 + RATE_WINDOW < now {
            job.samples.pop_front();
        }
        if job.have == job.offer.size {
            job.state = DownloadState::Verifying;
            Received::Complete
        } else {
            Received::More
        }
    }

    /// The ack to write on stream `serial` now, if one is due (also the last one, at completion).
    pub fn ack_if_due(&mut self, serial: u32, now: Instant) -> Option<DownloadAck> {
        let job = self.jobs.front_mut().filter(|j| j.serial == serial)?;
        let receiving = matches!(job.state, DownloadState::Receiving | DownloadState::Verifying);
        let due = if job.state == DownloadState::Verifying {
            job.acks.pending(job.have)
        } else {
            job.acks.ack_now(now, job.have)
        };
        if !receiving || !due {
            return None;
        }
        job.acks.sent(now, job.have);
        Some(DownloadAck { acked: job.have, page_time_us: job.last_read.as_micros() })
    }

    /// Stream `serial` ended or failed (or the link went): ask again from what is held.
    pub fn stream_ended(&mut self, serial: u32, now: Instant) {
        if let Some(job) = self.current(serial) {
            if matches!(job.state, DownloadState::Requesting | DownloadState::Receiving) {
                job.try_over(now, "the connection to the relay broke");
            }
        }
    }

    /// The SHA-256 check of download `id`; returns the answer for the relay.
    pub fn verified(&mut self, id: &str, matches: bool, now: Instant) -> Option<OfferAnswer> {
        let job = self.jobs.iter_mut().find(|j| j.offer.id == id)?;
        if job.state != DownloadState::Verifying {
            return None;
        }
        if matches {
            job.state = DownloadState::Saved;
            job.finished_at = Some(now);
            Some(OfferAnswer::Saved)
        } else {
            let message = "the SHA-256 of what arrived differs from the file's".to_string();
            job.fail(message.clone(), now);
            // Answered here: not one of [`Downloads::take_failures`]'s.
            job.serial = u32::MAX;
            Some(OfferAnswer::Failed { message })
        }
    }

    /// Failures the relay has not heard of (a download given up on the page's side), once each.
    pub fn take_failures(&mut self) -> Vec<(String, OfferAnswer)> {
        let mut out = Vec::new();
        for job in &mut self.jobs {
            if let (DownloadState::Failed(why), Some(_)) = (&job.state, job.finished_at) {
                if job.serial != u32::MAX {
                    out.push((job.offer.id.clone(), OfferAnswer::Failed { message: why.clone() }));
                    // Reported: no stream of this job is current any more.
                    job.serial = u32::MAX;
                }
            }
        }
        out
    }

    /// When the driver should call again: a retry's pause, an ack's coalescing, a result's expiry.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let job = self.jobs.front()?;
        match job.state {
            DownloadState::Waiting => Some(job.retry_at),
            DownloadState::Receiving if job.acks.pending(job.have) => {
                Some(job.acks.due(job.have).unwrap_or(job.last_read))
            }
            DownloadState::Saved | DownloadState::Failed(_) => {
                job.finished_at.map(|t| t + SHOW_RESULT_FOR)
            }
            _ => None,
        }
    }

    /// Whether the job at `i` is done with: over, reported, and its result line expired or a
    /// later download waiting.
    fn finished(&self, i: usize, now: Instant) -> bool {
        let job = &self.jobs[i];
        let expired = job.finished_at.is_some_and(|t| t + SHOW_RESULT_FOR <= now);
        let reported = !matches!(job.state, DownloadState::Failed(_)) || job.serial == u32::MAX;
        job.state.is_over() && reported && (expired || i + 1 < self.jobs.len())
    }

    fn forget_finished(&mut self, now: Instant) {
        while !self.jobs.is_empty() && self.finished(0, now) {
            self.jobs.pop_front();
        }
    }

    /// The id and name of the download being verified (what the driver hashes).
    pub fn verifying(&self) -> Option<&FileOffer> {
        self.jobs.iter().find(|j| j.state == DownloadState::Verifying).map(|j| &j.offer)
    }

    /// What the person sees: the download in front, or the last result for a few seconds.
    pub fn progress(&self, now: Instant) -> Option<DownloadProgress> {
        let first = (0..self.jobs.len()).find(|&i| !self.finished(i, now))?;
        let queued = self.jobs.len() - first - 1;
        let job = &self.jobs[first];
        Some(DownloadProgress {
            name: job.offer.name.clone(),
            state: job.state.clone(),
            bytes_done: job.have,
            total: job.offer.size,
            rate: job.rate(),
            queued,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(id: &str, size: u64) -> FileOffer {
        FileOffer { id: id.into(), name: format!("{id}.bin"), size, sha256: "00".repeat(32) }
    }

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    fn start(d: &mut Downloads, now: Instant) -> u32 {
        let (serial, req) = d.next_request(now).expect("a request");
        let size = d.jobs.front().unwrap().offer.size;
        assert!(d.started(serial, DownloadReply::Start { size, from: req.from }, now));
        serial
    }

    #[test]
    fn a_download_asks_from_zero_acks_what_came_and_completes() {
        let mut d = Downloads::new();
        assert_eq!(d.offer(offer("a", 100), at(0)), Ok(true));
        assert_eq!(d.offer(offer("a", 100), at(1)), Ok(false), "offered again: known");
        let (serial, req) = d.next_request(at(0)).unwrap();
        assert_eq!(req, DownloadRequest { download: "a".into(), from: 0 });
        assert!(d.next_request(at(0)).is_none(), "one stream at a time");
        assert!(d.started(serial, DownloadReply::Start { size: 100, from: 0 }, at(0)));
        assert_eq!(d.received(serial, 40, at(10)), Received::More);
        assert_eq!(
            d.ack_if_due(serial, at(10)),
            Some(DownloadAck { acked: 40, page_time_us: 10_000 })
        );
        assert_eq!(d.received(serial, 10, at(11)), Received::More);
        assert_eq!(d.ack_if_due(serial, at(12)), None, "coalesced");
        assert_eq!(d.poll_timeout(), Some(at(15)));
        assert_eq!(d.ack_if_due(serial, at(15)).unwrap().acked, 50);
        assert_eq!(d.received(serial, 50, at(20)), Received::Complete);
        assert_eq!(d.ack_if_due(serial, at(20)).unwrap().acked, 100, "the last ack at once");
        assert_eq!(d.verifying().unwrap().id, "a");
        assert_eq!(d.verified("a", true, at(21)), Some(OfferAnswer::Saved));
        let p = d.progress(at(22)).unwrap();
        assert_eq!(p.state, DownloadState::Saved);
        assert!(p.line().contains("SHA-256 checked"), "{}", p.line());
        assert!(d.progress(at(21) + SHOW_RESULT_FOR).is_none(), "the result line expires");
    }

    #[test]
    fn a_lost_stream_resumes_from_what_is_held_and_old_bytes_are_refused() {
        let mut d = Downloads::new();
        d.offer(offer("a", 100), at(0)).unwrap();
        let s1 = start(&mut d, at(0));
        d.received(s1, 30, at(5));
        d.stream_ended(s1, at(6));
        assert!(d.progress(at(6)).unwrap().line().contains("interrupted at 30%"));
        let (s2, req) = d.next_request(at(6)).expect("at once: the try brought bytes");
        assert_eq!(req.from, 30);
        assert_eq!(d.received(s1, 5, at(7)), Received::Refused, "the old stream's bytes");
        assert!(!d.started(s2, DownloadReply::Start { size: 100, from: 0 }, at(7)));
        assert!(d.next_request(at(7)).is_none(), "a try that brought nothing: a pause first");
        let (s3, req) = d.next_request(at(507)).expect("asked again");
        assert_eq!(req.from, 30);
        assert!(d.started(s3, DownloadReply::Start { size: 100, from: 30 }, at(508)));
        assert_eq!(d.received(s3, 71, at(509)), Received::Refused, "more than the file holds");
    }

    #[test]
    fn tries_that_bring_nothing_back_off_and_then_give_up_once() {
        let mut d = Downloads::new();
        d.offer(offer("a", 100), at(0)).unwrap();
        let mut now = at(0);
        let mut pauses = Vec::new();
        for _ in 0..MAX_FRUITLESS_TRIES {
            let (serial, _) = d.next_request(now).expect("a try");
            d.stream_ended(serial, now);
            match d.poll_timeout() {
                Some(t) if d.progress(now).unwrap().state == DownloadState::Waiting => {
                    pauses.push(t.saturating_duration_since(now).as_millis());
                    assert!(d.next_request(now).is_none(), "not before the pause");
                    now = t;
                }
                _ => break,
            }
        }
        assert_eq!(pauses[..3], [500, 1000, 2000]);
        assert!(matches!(d.progress(now).unwrap().state, DownloadState::Failed(_)));
        let failures = d.take_failures();
        assert_eq!(failures.len(), 1);
        assert!(d.take_failures().is_empty(), "reported once");
    }

    #[test]
    fn a_file_that_changed_or_is_gone_fails_and_a_bad_hash_is_said() {
        let mut d = Downloads::new();
        d.offer(offer("a", 100), at(0)).unwrap();
        d.offer(offer("b", 10), at(0)).unwrap();
        d.offer(offer("c", 10), at(0)).unwrap();
        let (s, _) = d.next_request(at(0)).unwrap();
        assert!(!d.started(s, DownloadReply::Start { size: 99, from: 0 }, at(1)));
        assert!(d.progress(at(1)).unwrap().line().contains("99"), "says the size changed");
        assert_eq!(d.take_failures().len(), 1);
        let (s, req) = d.next_request(at(2)).unwrap();
        assert_eq!(req.download, "b", "the next one goes at once");
        let gone = DownloadReply::Error { message: "the offer is gone".into(), gone: true };
        assert!(!d.started(s, gone, at(2)));
        d.take_failures();
        let s = start(&mut d, at(3));
        assert_eq!(d.received(s, 10, at(4)), Received::Complete);
        assert!(matches!(d.verified("c", false, at(5)), Some(OfferAnswer::Failed { .. })));
        assert!(d.progress(at(5)).unwrap().line().contains("SHA-256"));
    }

    #[test]
    fn a_file_over_the_page_limit_is_refused_at_once() {
        let mut d = Downloads::new();
        assert!(matches!(
            d.offer(offer("big", PAGE_LIMIT + 1), at(0)),
            Err(OfferAnswer::Failed { .. })
        ));
        assert!(d.next_request(at(0)).is_none());
    }

    #[test]
    fn the_bar_shows_the_rate_once_measured() {
        let mut d = Downloads::new();
        d.offer(offer("a", 10_000_000), at(0)).unwrap();
        let s = start(&mut d, at(0));
        for i in 1..=10 {
            d.received(s, 100_000, at(i * 100));
        }
        let p = d.progress(at(1000)).unwrap();
        assert_eq!(p.rate, Some(1_000_000));
        assert_eq!(p.line(), "Downloading a.bin (10.0 MB): 10%, 1.0 MB/s");
    }
}
