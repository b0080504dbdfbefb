//! The clock and precise sleeping.
//!
//! A tick deadline is met by sleeping to just before it, then spinning: the kernel's wake-up
//! latency (timer slack, scheduler) is tens of microseconds, a spin on the clock is tens of
//! nanoseconds.

use std::time::{Duration, Instant};

/// The monotonic clock every tickforge component reads (CLOCK_MONOTONIC on Linux).
pub fn now() -> Instant {
    Instant::now()
}

/// Asks the kernel to wake this thread as close to its timers as it can (default slack is
/// 50 µs). Returns false where the OS refuses.
#[cfg(linux_io)]
pub fn tighten_timer_slack() -> bool {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory of ours.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) == 0 }
}

/// False: the portable path has no timer slack to set (`prctl` is Linux's).
#[cfg(not(linux_io))]
pub fn tighten_timer_slack() -> bool {
    false
}

/// Sleeps until `deadline`: a kernel sleep to `spin` before it, then a spin on the clock.
/// Returns the instant it woke, never before `deadline`.
pub fn sleep_until(deadline: Instant, spin: Duration) -> Instant {
    let now = Instant::now();
    if let Some(sleep) = deadline
        .checked_duration_since(now)
        .and_then(|d| d.checked_sub(spin))
    {
        if !sleep.is_zero() {
            std::thread::sleep(sleep);
        }
    }
    loop {
        let now = Instant::now();
        if now >= deadline {
            return now;
        }
        std::hint::spin_loop();
    }
}

/// Sleeps to deadlines, spinning only as long before each as the kernel has recently
/// overslept: a fixed spin long enough for a busy normal-priority thread wastes most of
/// itself on a real-time one, whose wake-ups come within tens of microseconds.
///
/// The estimate is a decaying maximum of the oversleeps seen (each kernel sleep's wake-up
/// against the instant asked for): it jumps to a new worst at once and forgets it by 1/256
/// a sleep, so one rare stall costs about a second of longer spins (at 1,000+ wake-ups a
/// second), not all of them.
/// The spin is that estimate plus [`Sleeper::MARGIN`], within `0..=max_spin`.
#[derive(Clone, Debug)]
pub struct Sleeper {
    max_spin: Duration,
    oversleep_ns: f64,
}

impl Sleeper {
    /// Spin this much beyond the oversleep estimate.
    pub const MARGIN: Duration = Duration::from_micros(10);

    /// A sleeper that never spins longer than `max_spin`; it starts at `max_spin`, until
    /// sleeps show what the kernel does.
    pub fn new(max_spin: Duration) -> Sleeper {
        Sleeper {
            max_spin,
            oversleep_ns: max_spin.as_nanos() as f64,
        }
    }

    /// How long before a deadline the next sleep stops and spins.
    pub fn spin(&self) -> Duration {
        let ns = self.oversleep_ns + Self::MARGIN.as_nanos() as f64;
        Duration::from_nanos(ns as u64).min(self.max_spin)
    }

    /// Takes one kernel sleep's oversleep into the estimate.
    pub fn observe(&mut self, oversleep: Duration) {
        let ns = oversleep.as_nanos() as f64;
        self.oversleep_ns = ns.max(self.oversleep_ns * (1.0 - 1.0 / 256.0));
    }

    /// Sleeps until `deadline` as [`sleep_until`] does, with the current spin, and learns
    /// from the kernel sleep if there was one. Returns the instant it woke.
    pub fn sleep_until(&mut self, deadline: Instant) -> Instant {
        let spin = self.spin();
        let now = Instant::now();
        if let Some(sleep) = deadline
            .checked_duration_since(now)
            .and_then(|d| d.checked_sub(spin))
            .filter(|d| !d.is_zero())
        {
            std::thread::sleep(sleep);
            self.observe(Instant::now().saturating_duration_since(now + sleep));
        }
        sleep_until(deadline, Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_wakes_before_the_deadline() {
        tighten_timer_slack();
        for spin_us in [0, 50, 200] {
            let deadline = Instant::now() + Duration::from_millis(2);
            let woke = sleep_until(deadline, Duration::from_micros(spin_us));
            assert!(woke >= deadline);
        }
        // A deadline in the past returns at once.
        let past = Instant::now();
        assert!(sleep_until(past, Duration::ZERO) >= past);
    }

    #[test]
    fn the_spin_follows_the_worst_recent_oversleep_within_its_bounds() {
        let us = Duration::from_micros;
        let mut s = Sleeper::new(us(100));
        assert_eq!(s.spin(), us(100), "no sleep seen yet: the most");
        // Real-time wake-ups: the spin shrinks towards their oversleep plus the margin.
        for _ in 0..1000 {
            s.observe(us(20));
        }
        assert_eq!(s.spin(), us(30));
        // One stall: the spin takes it at once (up to the bound) …
        s.observe(us(70));
        assert_eq!(s.spin(), us(80));
        s.observe(us(5000));
        assert_eq!(s.spin(), us(100));
        // … and forgets it over some 1,500 sleeps.
        for _ in 0..1500 {
            s.observe(us(20));
        }
        assert!(s.spin() < us(40), "{:?}", s.spin());
        // Never past the bound, never below the margin.
        let mut z = Sleeper::new(Duration::ZERO);
        z.observe(us(500));
        assert_eq!(z.spin(), Duration::ZERO);
        let mut m = Sleeper::new(us(100));
        for _ in 0..6000 {
            m.observe(Duration::ZERO);
        }
        assert_eq!(m.spin(), Sleeper::MARGIN);
    }

    #[test]
    fn a_sleeper_never_wakes_before_the_deadline() {
        tighten_timer_slack();
        let mut s = Sleeper::new(Duration::from_micros(200));
        for _ in 0..20 {
            let deadline = Instant::now() + Duration::from_millis(1);
            assert!(s.sleep_until(deadline) >= deadline);
        }
        let past = Instant::now();
        assert!(s.sleep_until(past) >= past);
    }
}
