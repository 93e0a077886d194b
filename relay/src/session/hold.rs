//! Server datagrams held for the page and sent together, as the page asks.
//!
//! A browser's cost of a datagram is mostly its delivery (Chromium: IPC, a stream read, promises,
//! timers), not its bytes: a hidden tab during a flood spent a good part of a core taking
//! datagrams it does not draw (the measurements are in docs/BENCHMARKS.md, "The cost of a frame
//! in the browser"). So a page may ask the relay to hold the server's datagrams up to some time
//! (`ClientMessage::Hold`; the page asks while it is hidden and during a long flood) and the
//! relay sends them as one `ServerMessage::Held` line on the control stream.
//!
//! Nothing is dropped, and the order is kept: mosh-server diffs each state from one it assumes
//! the page has (a state sent within RTO + 100 ms), and a held datagram still arrives, after the
//! ones before it. The page acknowledges late, which mosh tolerates by design (it is what a slow
//! link looks like). Which timestamp of a batch the page echoes is the page's choice
//! (`DrawPacer::held_batch_echo`): the newest while it is visible, so the server's round-trip
//! estimate barely moves; the oldest while hidden, so the server paces itself to the hold. When
//! the page asks for no hold again, what is held goes at once and every datagram as it comes
//! after that.
//!
//! Sans-IO: the bridge (`forward.rs`) asks for the deadline and sends what [`Hold::take`]
//! returns.

use std::time::Duration;

use tern::relay_proto::control::MAX_HOLD_MS;
use tokio::time::Instant;

/// Longest a datagram is held, whatever the page asks.
pub(crate) const MAX_HOLD: Duration = Duration::from_millis(MAX_HOLD_MS as u64);
/// Most datagrams in one batch: a batch this full goes at once.
pub(crate) const MAX_DATAGRAMS: usize = 128;
/// Most bytes in one batch (before base64): bounds what a hidden session costs the relay's memory
/// (what a flood fills a second: docs/BENCHMARKS.md) and keeps each line far below the control
/// stream's limit.
pub(crate) const MAX_BYTES: usize = 96 * 1024;

/// What to do with a server datagram.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Send it now, as a datagram.
    Send,
    /// It is held; nothing to do now.
    Held,
    /// It is held and the batch is full: send the batch now ([`Hold::take`]).
    SendBatch,
}

/// The datagrams held for one page.
#[derive(Debug, Default)]
pub(crate) struct Hold {
    /// How long the page asked them to be held (zero: not at all).
    hold: Duration,
    held: Vec<Vec<u8>>,
    bytes: usize,
    /// When the oldest held datagram came.
    oldest: Option<Instant>,
    /// Batches sent and datagrams in them, for the session's closing log line.
    pub batches: u64,
    pub datagrams: u64,
}

impl Hold {
    pub fn new() -> Self {
        Self::default()
    }

    /// The page asks for datagrams to be held up to `ms` (capped at [`MAX_HOLD`]). What is
    /// held already is due by the new time (at once for 0: see [`Hold::deadline`]).
    pub fn set_hold(&mut self, ms: u32) {
        self.hold = Duration::from_millis(u64::from(ms)).min(MAX_HOLD);
    }

    /// A datagram from the server.
    pub fn route(&mut self, datagram: &[u8], now: Instant) -> Route {
        if self.hold.is_zero() && self.held.is_empty() {
            return Route::Send;
        }
        self.oldest.get_or_insert(now);
        self.bytes += datagram.len();
        self.held.push(datagram.to_vec());
        // Not held any more (what was held is due): it goes behind what was, at once.
        if self.hold.is_zero() || self.held.len() >= MAX_DATAGRAMS || self.bytes >= MAX_BYTES {
            Route::SendBatch
        } else {
            Route::Held
        }
    }

    /// When the held datagrams must go: the oldest's arrival plus the hold (in the past once
    /// the hold was shortened or ended); `None` while nothing is held.
    pub fn deadline(&self) -> Option<Instant> {
        self.oldest.map(|t| t + self.hold)
    }

    /// What is held, oldest first; the hold starts afresh.
    pub fn take(&mut self) -> Vec<Vec<u8>> {
        self.oldest = None;
        self.bytes = 0;
        let batch = std::mem::take(&mut self.held);
        if !batch.is_empty() {
            self.batches += 1;
            self.datagrams += batch.len() as u64;
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_no_hold_asked_every_datagram_goes_as_it_comes() {
        let mut hold = Hold::new();
        let t = Instant::now();
        assert_eq!(hold.route(b"a", t), Route::Send);
        assert_eq!(hold.deadline(), None);
        hold.set_hold(0);
        assert_eq!(hold.route(b"b", t), Route::Send);
        assert!(hold.take().is_empty());
        assert_eq!(hold.batches, 0);
    }

    #[test]
    fn held_datagrams_go_in_order_once_the_oldest_was_held_long_enough() {
        let mut hold = Hold::new();
        let t = Instant::now();
        hold.set_hold(1000);
        assert_eq!(hold.route(b"one", t), Route::Held);
        assert_eq!(hold.route(b"two", t + Duration::from_millis(300)), Route::Held);
        // The deadline counts from the oldest, so no datagram waits longer than asked.
        assert_eq!(hold.deadline(), Some(t + Duration::from_secs(1)));
        assert_eq!(hold.take(), vec![b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(hold.deadline(), None);
        let later = t + Duration::from_secs(5);
        assert_eq!(hold.route(b"three", later), Route::Held);
        assert_eq!(hold.deadline(), Some(later + Duration::from_secs(1)));
        assert_eq!((hold.batches, hold.datagrams), (1, 2));
    }

    #[test]
    fn a_page_cannot_have_datagrams_held_longer_than_the_cap() {
        let mut hold = Hold::new();
        let t = Instant::now();
        hold.set_hold(u32::MAX);
        hold.route(b"x", t);
        assert_eq!(hold.deadline(), Some(t + MAX_HOLD));
    }

    #[test]
    fn when_the_hold_ends_what_is_held_is_due_at_once_and_nothing_overtakes_it() {
        let mut hold = Hold::new();
        let t = Instant::now();
        hold.set_hold(1000);
        hold.route(b"held", t);
        hold.set_hold(0);
        assert!(hold.deadline().is_some_and(|d| d <= t), "what is held is due now");
        // A datagram that comes before the batch went joins it, behind what was held.
        assert_eq!(hold.route(b"next", t), Route::SendBatch);
        assert_eq!(hold.take(), vec![b"held".to_vec(), b"next".to_vec()]);
        assert_eq!(hold.route(b"after", t), Route::Send);
        assert_eq!(hold.deadline(), None);
        // A shorter hold makes what is held due sooner.
        hold.set_hold(1000);
        hold.route(b"a", t);
        hold.set_hold(100);
        assert_eq!(hold.deadline(), Some(t + Duration::from_millis(100)));
    }

    #[test]
    fn a_full_batch_goes_before_its_time() {
        let t = Instant::now();
        let mut by_count = Hold::new();
        by_count.set_hold(1000);
        for _ in 1..MAX_DATAGRAMS {
            assert_eq!(by_count.route(b"x", t), Route::Held);
        }
        assert_eq!(by_count.route(b"x", t), Route::SendBatch);
        assert_eq!(by_count.take().len(), MAX_DATAGRAMS);

        let mut by_size = Hold::new();
        by_size.set_hold(1000);
        let big = vec![0u8; 1252];
        let mut n = 1;
        while by_size.route(&big, t) == Route::Held {
            n += 1;
        }
        assert_eq!(n, MAX_BYTES.div_ceil(big.len()));
        assert_eq!(by_size.take().len(), n);
    }
}
