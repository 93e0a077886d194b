//! Keystroke echo latency as the person sees it: from the key to the first frame drawn after the
//! server acknowledged the state carrying it.

use std::collections::VecDeque;
use std::time::Duration;

use crate::time::Instant;
use crate::wire::StateNum;

/// Samples kept (the oldest go first).
pub const MAX_ECHO_SAMPLES: usize = 4096;

/// Measures echo latency. Sans-IO: the driver says when a key left and when a frame was drawn.
#[derive(Debug, Default, Clone)]
pub struct EchoMeter {
    /// Keystrokes waiting for their echo: (when handed to the session, client state carrying it).
    pending: VecDeque<(Instant, StateNum)>,
    samples: VecDeque<Duration>,
}

/// What [`EchoMeter::summary`] reports.
#[derive(Debug, Clone, PartialEq)]
pub struct EchoSummary {
    pub count: usize,
    /// Keys still waiting for their echo.
    pub pending: usize,
    pub min: Option<Duration>,
    pub median: Option<Duration>,
    pub p90: Option<Duration>,
    pub max: Option<Duration>,
    pub mean: Option<Duration>,
    /// Every sample kept, oldest first.
    pub samples: Vec<Duration>,
}

impl EchoMeter {
    pub fn new() -> Self {
        Self::default()
    }

    /// A key was handed to the session at `at`, carried by client state `state`.
    pub fn key_sent(&mut self, at: Instant, state: StateNum) {
        self.pending.push_back((at, state));
    }

    /// A frame with visible change was drawn at `now`, after the server acknowledged client
    /// state `acked`: every key up to that state is echoed by it.
    pub fn frame_drawn(&mut self, now: Instant, acked: StateNum) {
        while let Some(&(sent, state)) = self.pending.front() {
            if state > acked {
                break;
            }
            self.pending.pop_front();
            if self.samples.len() >= MAX_ECHO_SAMPLES {
                self.samples.pop_front();
            }
            self.samples.push_back(now.saturating_duration_since(sent));
        }
    }

    /// Percentiles of what was measured (nearest rank on the sorted samples).
    pub fn summary(&self) -> EchoSummary {
        let mut sorted: Vec<Duration> = self.samples.iter().copied().collect();
        sorted.sort();
        let pick = |q: f64| {
            let last = sorted.len().checked_sub(1)?;
            Some(sorted[((last as f64 * q).round() as usize).min(last)])
        };
        let mean = (!sorted.is_empty())
            .then(|| sorted.iter().sum::<Duration>() / u32::try_from(sorted.len()).unwrap_or(1));
        EchoSummary {
            count: sorted.len(),
            pending: self.pending.len(),
            min: pick(0.0),
            median: pick(0.5),
            p90: pick(0.9),
            max: pick(1.0),
            mean,
            samples: self.samples.iter().copied().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_echoed_by_the_first_frame_after_their_ack() {
        let mut m = EchoMeter::new();
        let t = |ms| Instant::from_millis(ms);
        m.key_sent(t(0), StateNum(1));
        m.key_sent(t(10), StateNum(2));
        m.key_sent(t(20), StateNum(3));
        m.frame_drawn(t(50), StateNum(2));
        let s = m.summary();
        assert_eq!((s.count, s.pending), (2, 1));
        assert_eq!(s.min, Some(Duration::from_millis(40)));
        assert_eq!(s.max, Some(Duration::from_millis(50)));
        assert_eq!(s.mean, Some(Duration::from_millis(45)));
        m.frame_drawn(t(100), StateNum(3));
        let s = m.summary();
        assert_eq!((s.count, s.pending), (3, 0));
        assert_eq!(s.median, Some(Duration::from_millis(50)));
        assert_eq!(s.p90, Some(Duration::from_millis(80)));
        assert_eq!(s.samples.len(), 3);
    }

    #[test]
    fn an_empty_meter_reports_nothing_and_samples_stay_bounded() {
        let mut m = EchoMeter::new();
        assert_eq!(m.summary().median, None);
        for i in 0..(MAX_ECHO_SAMPLES as u64 + 10) {
            m.key_sent(Instant::from_millis(i), StateNum(i));
            m.frame_drawn(Instant::from_millis(i + 1), StateNum(i));
        }
        assert_eq!(m.summary().count, MAX_ECHO_SAMPLES);
    }
}
