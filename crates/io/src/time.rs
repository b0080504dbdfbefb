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
pub fn tighten_timer_slack() -> bool {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory of ours.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) == 0 }
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
}
