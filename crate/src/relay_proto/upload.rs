//! The paste upload stream: one bidirectional WebTransport stream per upload.
//!
//! ```text
//!  page ─ UploadHeader line ─▶ relay                  (at most MAX_HEADER bytes)
//!  [eager: page ─ raw bytes 0.. ─▶ relay at once, without waiting for `have`]
//!  page ◀─ Have { have: N, path: None }                (what it holds: resume from N)
//!     or ◀─ Have { have: size, path: Some(P) }          (already complete: nothing is sent)
//!  page ─ raw bytes N..size ─▶ relay
//!  page ◀─ Ack { acked, relay_time_us } …              (AckPolicy: at most one per 5 ms)
//!  page ◀─ Path { path } | Error { error, message }    (last line; the relay finishes the stream)
//! ```
//!
//! An eager header (the page's first stream of a paste) saves the round trip to `have`. The
//! relay still checks the header before it takes a byte; a refusal (`error`) discards what came
//! with it, and a relay that holds part of the content answers `have` (N > 0) and reads nothing
//! more on that stream: the page resumes from N on a new stream.

use std::time::Duration;

use super::json::{DecodeError, Fields, ObjectWriter};
use super::line::Message;
use crate::time::Instant;

/// Longest header line, newline included.
pub const MAX_HEADER: usize = 1024;
/// Longest reply line the page accepts (a path is at most a few hundred bytes).
pub const MAX_REPLY: usize = 16 * 1024;

/// The header line that opens an upload stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadHeader {
    /// SHA-256 of the whole content, lowercase hex.
    pub hash: String,
    /// Size of the whole content in bytes.
    pub size: u64,
    /// The browser's idea of the type; logged only (the extension comes from magic bytes).
    pub mime: Option<String>,
    /// The content follows the header at once, from byte 0, without waiting for `have` (saves
    /// a round trip before the first byte). A relay that holds part of it answers `have` and
    /// reads nothing more on this stream: the page resumes on a new one.
    pub eager: bool,
}

/// Relay → page lines on an upload stream. Untagged: the fields tell them apart (`error`, then
/// `have`, then `acked`, then `path`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadReply {
    /// What the relay holds: resume from `have`; with `path`, the paste is complete already.
    Have { have: u64, path: Option<String> },
    /// Bytes received so far, and when the last of them was read on the relay's clock (the
    /// page measures the rate from these timestamps, not from its own send times).
    Ack { acked: u64, relay_time_us: u64 },
    /// Published: the absolute path on the relay's machine.
    Path { path: String },
    /// Refused or failed; `message` is for the person.
    Error { error: UploadErrorCode, message: String },
}

/// Why an upload failed, stable for the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadErrorCode {
    BadRequest,
    TooLarge,
    QuotaExceeded,
    HashMismatch,
    SizeMismatch,
    /// The relay cannot store files (bridge mode without `--paste-dir`).
    PasteUnavailable,
    Io,
    Internal,
    /// A code this build does not know (a newer relay).
    Unknown,
}

impl UploadErrorCode {
    /// Every code, for tests and tables.
    pub const ALL: [UploadErrorCode; 9] = [
        UploadErrorCode::BadRequest,
        UploadErrorCode::TooLarge,
        UploadErrorCode::QuotaExceeded,
        UploadErrorCode::HashMismatch,
        UploadErrorCode::SizeMismatch,
        UploadErrorCode::PasteUnavailable,
        UploadErrorCode::Io,
        UploadErrorCode::Internal,
        UploadErrorCode::Unknown,
    ];

    /// The code of a wire name; one this build does not know is [`UploadErrorCode::Unknown`].
    pub fn parse(s: &str) -> UploadErrorCode {
        Self::ALL.into_iter().find(|c| c.as_str() == s).unwrap_or(UploadErrorCode::Unknown)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            UploadErrorCode::BadRequest => "bad_request",
            UploadErrorCode::TooLarge => "too_large",
            UploadErrorCode::QuotaExceeded => "quota_exceeded",
            UploadErrorCode::HashMismatch => "hash_mismatch",
            UploadErrorCode::SizeMismatch => "size_mismatch",
            UploadErrorCode::PasteUnavailable => "paste_unavailable",
            UploadErrorCode::Io => "io",
            UploadErrorCode::Internal => "internal",
            UploadErrorCode::Unknown => "unknown",
        }
    }
}

impl UploadReply {
    /// One line of JSON with its newline.
    pub fn to_line(&self) -> Vec<u8> {
        super::encode_line(self)
    }
}

impl UploadHeader {
    /// One line of JSON with its newline.
    pub fn to_line(&self) -> Vec<u8> {
        super::encode_line(self)
    }
}

impl Message for UploadHeader {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.str("hash", &self.hash).u64("size", self.size).opt_str("mime", self.mime.as_deref());
        if self.eager {
            w.bool("eager", true);
        }
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        f.only(&["hash", "size", "mime", "eager"])?;
        let eager = if f.get("eager").is_some() { f.bool("eager")? } else { false };
        Ok(UploadHeader {
            hash: f.str("hash")?,
            size: f.u64("size")?,
            mime: f.opt_str("mime")?,
            eager,
        })
    }
}

impl Message for UploadReply {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        match self {
            UploadReply::Have { have, path } => {
                w.u64("have", *have).opt_str("path", path.as_deref());
            }
            UploadReply::Ack { acked, relay_time_us } => {
                w.u64("acked", *acked).u64("relay_time_us", *relay_time_us);
            }
            UploadReply::Path { path } => {
                w.str("path", path);
            }
            UploadReply::Error { error, message } => {
                w.str("error", error.as_str()).str("message", message);
            }
        }
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        if let Some(error) = f.opt_str("error")? {
            return Ok(UploadReply::Error {
                error: UploadErrorCode::parse(&error),
                message: f.str("message")?,
            });
        }
        if let Some(have) = f.opt_u64("have")? {
            return Ok(UploadReply::Have { have, path: f.opt_str("path")? });
        }
        if let Some(acked) = f.opt_u64("acked")? {
            return Ok(UploadReply::Ack { acked, relay_time_us: f.u64("relay_time_us")? });
        }
        Ok(UploadReply::Path { path: f.str("path")? })
    }
}

/// When the relay acknowledges received bytes: at most one ack per [`AckPolicy::COALESCE`],
/// and never later than that after data arrived. The page's window may be only two chunks, so
/// it must hear about the first before it could send a third; acking every read would cost a
/// line per 64 KiB for nothing.
#[derive(Debug, Clone)]
pub struct AckPolicy {
    last_ack: Option<Instant>,
    acked: u64,
}

impl AckPolicy {
    /// Acks are coalesced to at most one per this interval.
    pub const COALESCE: Duration = Duration::from_millis(5);

    /// `acked`: what the page already knows the relay holds (the `have` it was told).
    pub fn new(acked: u64) -> Self {
        AckPolicy { last_ack: None, acked }
    }

    /// Whether an ack of `received` bytes should go now.
    pub fn ack_now(&self, now: Instant, received: u64) -> bool {
        received > self.acked && self.due(received).is_none_or(|at| at <= now)
    }

    /// When an ack of `received` bytes becomes due (`None`: nothing to ack, or due at once).
    pub fn due(&self, received: u64) -> Option<Instant> {
        if received <= self.acked {
            return None;
        }
        self.last_ack.map(|t| t + Self::COALESCE)
    }

    /// Whether anything received is still unacknowledged.
    pub fn pending(&self, received: u64) -> bool {
        received > self.acked
    }

    /// Records that an ack of `received` bytes went out at `now`.
    pub fn sent(&mut self, now: Instant, received: u64) {
        self.acked = received;
        self.last_ack = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_coalesce_to_one_per_interval_and_are_never_late() {
        let t0 = Instant::from_millis(100);
        let mut p = AckPolicy::new(0);
        assert!(!p.ack_now(t0, 0), "nothing received");
        assert!(p.ack_now(t0, 10), "the first ack goes at once");
        p.sent(t0, 10);
        let t1 = t0 + Duration::from_millis(1);
        assert!(!p.ack_now(t1, 20));
        assert_eq!(p.due(20), Some(t0 + AckPolicy::COALESCE));
        assert!(p.ack_now(t0 + AckPolicy::COALESCE, 20));
        assert_eq!(p.due(10), None, "nothing new: no ack due");
    }
}
