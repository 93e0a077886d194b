//! Pasted files: the paste directory ([`store`]) and the upload stream ([`stream`]), one
//! bidirectional WebTransport stream per upload.
//!
//! ```text
//!  page ─ UploadHeader line ─▶ relay                 (at most MAX_HEADER = 1024 bytes)
//!  page ◀─ {"have":N}                                 (what it holds: resume from N)
//!     or ◀─ {"have":size,"path":P}                    (already complete: nothing is sent)
//!  page ─ raw bytes N..size ─▶ relay
//!  page ◀─ {"acked":M,"relay_time_us":T} …            (AckPolicy: at most one per 5 ms)
//!  page ◀─ {"path":P} | {"error":CODE,"message":…}    (last line; the relay finishes the stream)
//! ```
//!
//! The messages are `tern::relay_proto::upload`'s, shared with the page.
//!
//! On disk: `<dir>/<sha256>.part` while incomplete (its length is the resume offset), then,
//! once the SHA-256 of the whole file matches, `<dir>/<sha256>.<ext>` with the extension from
//! the content's magic bytes (never from anything the client says). Directory 0700, files 0600.
//! Files older than the maximum age are removed; the directory's total is capped by a quota.

pub mod store;
pub mod stream;

pub use store::{Have, PasteError, PasteLimits, PasteStore, magic_extension};
pub(crate) use stream::{Onward, read_first_line, serve_upload};
pub use tern::relay_proto::upload::{MAX_HEADER, UploadErrorCode, UploadHeader, UploadReply};
