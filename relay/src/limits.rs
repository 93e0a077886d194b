//! Per-session rate limiting: a token bucket for datagrams from the browser.

use std::time::Instant;

/// A token bucket: `rate` tokens per second, at most `burst` saved up. Time is passed in.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub fn new(rate: u32, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket { rate: f64::from(rate), burst, tokens: burst, last: now }
    }

    /// Takes one token if there is one.
    pub fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn burst_then_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(100, 10, t0);
        assert_eq!((0..20).filter(|_| b.take(t0)).count(), 10);
        // 100/s: 50 ms refills 5.
        let t1 = t0 + Duration::from_millis(50);
        assert_eq!((0..20).filter(|_| b.take(t1)).count(), 5);
        // Never more than the burst, however long the pause.
        let t2 = t1 + Duration::from_secs(3600);
        assert_eq!((0..100).filter(|_| b.take(t2)).count(), 10);
    }
}
