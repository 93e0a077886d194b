//! Tapping the emulator: every datagram with its fate and timestamps, for benchmarks that decode
//! the traffic (mosh's with the session key) and time protocol events on both sides of the link.
//!
//! A record's `arrived` is when the emulator received the datagram from its sender (the sender's
//! side of the link); `Fate::Forwarded::released` is when the emulator handed it to the receiver's
//! socket (the receiver's side). So for the up direction `arrived` is the client's wire time and
//! `released` the server's; for the down direction the other way round.

use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use super::Dir;

/// What became of one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Sent on at `released`, just before the send call (on loopback the datagram is in the
    /// receiver's socket buffer microseconds later; an answer to it cannot arrive before this).
    Forwarded { released: Instant },
    /// Dropped by the random loss draw.
    DroppedLoss,
    /// Dropped at the tail of the bottleneck queue.
    DroppedQueue,
    /// The OS refused the send.
    SendError,
}

/// One datagram (or one copy of a duplicated datagram) seen by the emulator.
#[derive(Debug, Clone)]
pub struct TapRecord {
    pub dir: Dir,
    /// When the emulator received it.
    pub arrived: Instant,
    pub fate: Fate,
    /// The datagram as received, untouched (the UDP proxy's payload); for the TUN link, the IP
    /// packet as written back into the kernel, its addresses already swapped.
    pub data: Arc<[u8]>,
}

impl TapRecord {
    /// The release time, if it was forwarded.
    pub fn released(&self) -> Option<Instant> {
        match self.fate {
            Fate::Forwarded { released } => Some(released),
            _ => None,
        }
    }
}

/// Receives every [`TapRecord`]. Called on the emulator's own threads (receive threads for drops,
/// release threads for forwarded datagrams), so it must return quickly: store, do not decode.
pub trait Tap: Send + Sync {
    fn record(&self, record: TapRecord);
}

impl<F: Fn(TapRecord) + Send + Sync> Tap for F {
    fn record(&self, record: TapRecord) {
        self(record)
    }
}

/// A tap that keeps every record in memory, in the order the emulator produced them.
#[derive(Debug, Default)]
pub struct TapLog {
    records: std::sync::Mutex<Vec<TapRecord>>,
}

impl TapLog {
    pub fn new() -> Arc<TapLog> {
        Arc::new(TapLog::default())
    }

    /// Takes the records so far, leaving the log empty.
    pub fn take(&self) -> Vec<TapRecord> {
        std::mem::take(&mut *self.records.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Tap for TapLog {
    fn record(&self, record: TapRecord) {
        self.records.lock().unwrap_or_else(|e| e.into_inner()).push(record);
    }
}

/// The emulator's slot for one tap (none by default).
#[derive(Default)]
pub(super) struct TapSlot(RwLock<Option<Arc<dyn Tap>>>);

impl TapSlot {
    pub(super) fn set(&self, tap: Option<Arc<dyn Tap>>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = tap;
    }

    /// Builds and hands over a record only when a tap is set, so an untapped link pays one read
    /// lock per datagram and nothing else.
    pub(super) fn emit(&self, make: impl FnOnce() -> TapRecord) {
        let guard = self.0.read().unwrap_or_else(|e| e.into_inner());
        if let Some(tap) = guard.as_ref() {
            tap.record(make());
        }
    }
}

impl fmt::Debug for TapSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = self.0.read().map(|t| t.is_some()).unwrap_or(false);
        f.debug_struct("TapSlot").field("set", &set).finish()
    }
}
