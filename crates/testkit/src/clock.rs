//! Virtual time: an `Instant` origin and an offset that moves only when the test says.

use std::time::{Duration, Instant};

/// A clock that stands still until [`VirtualClock::advance`] moves it.
///
/// State machines take `now: Instant`; a test hands them [`VirtualClock::now`] and advances
/// it one tick at a time, so an hour of play runs in milliseconds and never sleeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtualClock {
    origin: Instant,
    elapsed: Duration,
}

impl VirtualClock {
    /// A clock reading `origin` until advanced.
    pub fn new(origin: Instant) -> Self {
        VirtualClock {
            origin,
            elapsed: Duration::ZERO,
        }
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.origin + self.elapsed
    }

    /// The instant the clock started at.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Virtual time since the origin.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&mut self, by: Duration) {
        self.elapsed += by;
    }
}

impl Default for VirtualClock {
    /// A clock starting at the real current time (any origin works; this one is handy).
    fn default() -> Self {
        VirtualClock::new(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stands_still_until_advanced() {
        let origin = Instant::now();
        let mut clock = VirtualClock::new(origin);
        assert_eq!(clock.now(), origin);
        assert_eq!(clock.now(), origin, "no real time leaks in");
        let tick = Duration::from_nanos(7_812_500);
        for _ in 0..128 {
            clock.advance(tick);
        }
        assert_eq!(clock.elapsed(), Duration::from_secs(1));
        assert_eq!(clock.now(), origin + Duration::from_secs(1));
        assert_eq!(clock.origin(), origin);
    }
}
