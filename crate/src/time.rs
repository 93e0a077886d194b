//! The core's notion of time: a monotonic instant supplied by the driver.
//!
//! The core never reads a clock (it also runs in the browser, where `std::time::Instant` panics).
//! Drivers pass `now` into every call; this type is that value.

use std::ops::{Add, Sub};
use std::time::Duration;

/// A point on the driver's monotonic clock, in microseconds since an origin the driver chooses.
///
/// Only differences between instants of one driver mean anything.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The driver clock's origin.
    pub const ZERO: Instant = Instant(0);

    pub const fn from_micros(micros: u64) -> Self {
        Instant(micros)
    }

    pub const fn from_millis(millis: u64) -> Self {
        Instant(millis.saturating_mul(1000))
    }

    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Whole milliseconds since the origin (what mosh's 16-bit timestamps are cut from).
    pub const fn as_millis(self) -> u64 {
        self.0 / 1000
    }

    /// Time from `earlier` to `self`, or zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        let micros = u64::try_from(rhs.as_micros()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(micros))
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        let micros = u64::try_from(rhs.as_micros()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_sub(micros))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: an instant before `rhs` gives zero.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_millis(5);
        assert_eq!(t + Duration::from_millis(3), Instant::from_millis(8));
        assert_eq!(t - Duration::from_millis(10), Instant::ZERO);
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
        assert_eq!(t - Instant::from_millis(2), Duration::from_millis(3));
        assert_eq!(t.as_millis(), 5);
    }
}
