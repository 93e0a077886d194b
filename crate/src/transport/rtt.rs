//! Round-trip time estimation and the timers derived from it (MOSH-PROTOCOL.md 2.5).

use std::time::Duration;

/// Samples at or above this are ignored (a reply held across a long stall says nothing about RTT).
const MAX_SAMPLE: Duration = Duration::from_millis(5000);
/// Before any sample mosh assumes a slow link; the send interval then starts at its maximum.
const INITIAL_SRTT_MS: f64 = 1000.0;
const INITIAL_RTTVAR_MS: f64 = 500.0;
/// Clamp of the retransmission timeout (`MIN_RTO`, `MAX_RTO` in mosh's network.h).
const MIN_RTO: Duration = Duration::from_millis(50);
const MAX_RTO: Duration = Duration::from_millis(1000);
/// Clamp of the frame interval ceil(SRTT/2) (`SEND_INTERVAL_MIN/MAX` in transportsender.h).
pub const SEND_INTERVAL_MIN: Duration = Duration::from_millis(20);
pub const SEND_INTERVAL_MAX: Duration = Duration::from_millis(250);

/// RFC 6298-style smoothed RTT, without a clock-granularity term, as mosh computes it.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt_ms: f64,
    rttvar_ms: f64,
    has_sample: bool,
}

impl Default for RttEstimator {
    fn default() -> Self {
        RttEstimator { srtt_ms: INITIAL_SRTT_MS, rttvar_ms: INITIAL_RTTVAR_MS, has_sample: false }
    }
}

impl RttEstimator {
    /// Feeds one sample (from an in-order datagram's timestamp reply).
    pub fn on_sample(&mut self, sample: Duration) {
        if sample >= MAX_SAMPLE {
            return;
        }
        let r = sample.as_secs_f64() * 1000.0;
        if self.has_sample {
            self.rttvar_ms = 0.75 * self.rttvar_ms + 0.25 * (self.srtt_ms - r).abs();
            self.srtt_ms = 0.875 * self.srtt_ms + 0.125 * r;
        } else {
            self.srtt_ms = r;
            self.rttvar_ms = r / 2.0;
            self.has_sample = true;
        }
    }

    pub fn has_sample(&self) -> bool {
        self.has_sample
    }

    /// The smoothed round-trip time.
    pub fn srtt(&self) -> Duration {
        Duration::from_secs_f64(self.srtt_ms / 1000.0)
    }

    /// Retransmission timeout: ceil(SRTT + 4 RTTVAR) ms, clamped to [50, 1000] ms.
    pub fn rto(&self) -> Duration {
        let ms = (self.srtt_ms + 4.0 * self.rttvar_ms).ceil();
        Duration::from_millis(ms as u64).clamp(MIN_RTO, MAX_RTO)
    }

    /// Frame interval: ceil(SRTT / 2) ms, clamped to [20, 250] ms.
    pub fn send_interval(&self) -> Duration {
        let ms = (self.srtt_ms / 2.0).ceil();
        Duration::from_millis(ms as u64).clamp(SEND_INTERVAL_MIN, SEND_INTERVAL_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_slow_until_the_first_sample() {
        let rtt = RttEstimator::default();
        assert_eq!(rtt.rto(), MAX_RTO);
        assert_eq!(rtt.send_interval(), SEND_INTERVAL_MAX);
    }

    #[test]
    fn first_sample_sets_srtt_and_half_variance() {
        let mut rtt = RttEstimator::default();
        rtt.on_sample(Duration::from_millis(100));
        assert_eq!(rtt.srtt(), Duration::from_millis(100));
        // 100 + 4 * 50
        assert_eq!(rtt.rto(), Duration::from_millis(300));
        assert_eq!(rtt.send_interval(), Duration::from_millis(50));
    }

    #[test]
    fn later_samples_smooth_and_clamp() {
        let mut rtt = RttEstimator::default();
        for _ in 0..200 {
            rtt.on_sample(Duration::from_millis(2));
        }
        assert_eq!(rtt.send_interval(), SEND_INTERVAL_MIN);
        assert_eq!(rtt.rto(), MIN_RTO);
        rtt.on_sample(Duration::from_millis(6000));
        assert!(rtt.srtt() < Duration::from_millis(3), "samples of 5 s or more are ignored");
    }
}
