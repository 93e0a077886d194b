//! Where the page's time goes per frame, on its own clock (`performance.now()`): the core's
//! steps of receiving a datagram (it reports them, `ReceiveStage`; it reads no clock), the
//! display diff, and handing the bytes to xterm.js. xterm.js's parse and paint happen later, in
//! its own tasks; the benchmark (tests/browser/bench/frame-cost-bench.mjs) measures those from
//! outside.

use tern::session::ReceiveStage;

use crate::clock::now_ms;

/// Totals since the page started, in milliseconds (`stats().cost`).
#[derive(Debug, Default, Clone)]
pub struct FrameCost {
    pub datagrams: u64,
    /// Authenticate and decrypt.
    pub decrypt_ms: f64,
    /// Reassemble, inflate and decode the instruction.
    pub inflate_ms: f64,
    /// Apply the instruction's diff to the emulator.
    pub apply_ms: f64,
    /// Compose the frame (predictions, notification bar) and diff it against what xterm.js shows.
    pub diff_ms: f64,
    /// Hand the bytes to xterm.js (`write` only queues them).
    pub write_ms: f64,
    pub bytes_written: u64,
}

impl FrameCost {
    /// A stage callback for `handle_datagram_staged` that adds each step's time here.
    /// `datagrams`: how many it is handed for (a relay's held batch is several: the session's
    /// bookkeeping between one and the next then counts as the next one's decrypt).
    pub fn receive(&mut self, datagrams: usize) -> impl FnMut(ReceiveStage) + '_ {
        self.datagrams += datagrams as u64;
        let mut last = now_ms();
        move |stage| {
            let t = now_ms();
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
