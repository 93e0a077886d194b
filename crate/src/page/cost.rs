//! Where the page's time goes per frame, on the page's own clock: the session's steps of
//! receiving a datagram (it reports them, `ReceiveStage`), the display diff, and handing the
//! bytes to the terminal. The terminal's parse and paint happen later, in its own tasks; the
//! frame-cost benchmark measures those from outside.
//!
//! The core reads no clock: the driver lends a stopwatch ([`PageCost::set_stopwatch`]) whose
//! readings only ever land in these totals, never in a decision.

use crate::session::ReceiveStage;

/// Milliseconds on the page's clock (`performance.now()`); zero without one.
#[derive(Clone, Copy)]
pub struct Stopwatch(pub fn() -> f64);

impl std::fmt::Debug for Stopwatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stopwatch")
    }
}

impl Default for Stopwatch {
    fn default() -> Self {
        Stopwatch(|| 0.0)
    }
}

/// Totals since the page started, in milliseconds (`stats().cost`).
#[derive(Debug, Default, Clone)]
pub struct PageCost {
    pub datagrams: u64,
    /// Authenticate and decrypt.
    pub decrypt_ms: f64,
    /// Reassemble, inflate and decode the instruction.
    pub inflate_ms: f64,
    /// Apply the instruction's diff to the emulator.
    pub apply_ms: f64,
    /// Compose the frame (predictions, notification bar) and diff it against what the
    /// terminal shows.
    pub diff_ms: f64,
    /// Hand the bytes to the terminal (its `write` only queues them); the driver adds these.
    pub write_ms: f64,
    pub bytes_written: u64,
    stopwatch: Stopwatch,
}

impl PageCost {
    pub fn set_stopwatch(&mut self, stopwatch: Stopwatch) {
        self.stopwatch = stopwatch;
    }

    pub(super) fn read(&self) -> f64 {
        (self.stopwatch.0)()
    }

    /// A stage callback for `handle_datagram_staged` that adds each step's time here.
    /// `datagrams`: how many it is handed for (a relay's held batch is several: the session's
    /// bookkeeping between one and the next then counts as the next one's decrypt).
    pub(super) fn receive(&mut self, datagrams: usize) -> impl FnMut(ReceiveStage) + '_ {
        self.datagrams += datagrams as u64;
        let clock = self.stopwatch.0;
        let mut last = clock();
        move |stage| {
            let t = clock();
            let spent = t - last;
            last = t;
            match stage {
                ReceiveStage::Opened => self.decrypt_ms += spent,
                ReceiveStage::Assembled => self.inflate_ms += spent,
                ReceiveStage::Applied => self.apply_ms += spent,
            }
        }
    }
}
