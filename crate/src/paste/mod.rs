//! Pasted and dropped files, sans-IO: the input order around them, their uploads, their progress.
//!
//! ```text
//!  driver: paste/drop ─▶ PasteQueue::begin ─ read + SHA-256 ─▶ PasteQueue::hashed
//!          typed keys ─▶ PasteQueue::key ─▶ Send | Held | CancelledPastes
//!          PasteQueue::start_next ─▶ UploadJob (active): open stream ─▶ header ─▶ replies ─▶
//!              handle_reply / poll_chunk (paced by `transfer::Upload`) ─▶ … ─▶ outcome
//!          PasteQueue::finish_active ─▶ PasteQueue::release ─▶ bytes to send, in order
//!          PasteQueue::progress ─▶ the page's progress box and mosh's notification bar
//! ```
//!
//! The pacer itself (chunks, rate, window) is [`crate::transfer`]; the messages on the stream are
//! [`crate::relay_proto::upload`].

mod job;
mod progress;
mod queue;

pub use job::{GIVE_UP, JobOutcome, RETRY_PAUSE, UploadJob};
pub use progress::{PasteProgress, PasteState, shell_word, size, whole_percent};
pub use queue::{KeyAction, PASTE_QUEUE_TARGET, PasteCounters, PasteId, PasteQueue, RESULT_SHOWN};
