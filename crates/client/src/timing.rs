//! The server-tick estimate (clock sync) and the adaptive interpolation delay.
//!
//! # Method
//!
//! Time is counted in ticks of the match's rate from the session's creation: the *local
//! tick* `x(now) = (now − origin) · tick_hz`, a continuous value.
//!
//! Each snapshot of server tick `T` that arrives at `a` is one sample of the *arrival
//! offset* `s = T − x(a)`: the server tick a snapshot arriving now is of, minus the local
//! tick. A packet held up by jitter or reordering gives a smaller `s`, a lost one none, a
//! duplicate is not sampled (the replica recognises it). The offset is filtered:
//!
//! - the first sample is taken as is; the next [`WARM_SAMPLES`] are averaged (gain `1/n`);
//!   after that an exponential average with gain [`GAIN`] (1/32);
//! - each sample's residual `r = s − offset` is first clamped to ± max(3 ticks, 4 ×
//!   jitter), so one packet late by a reorder moves the estimate by at most a few
//!   hundredths of a tick;
//! - when [`RESYNC_RUN`] samples in a row fall beyond that bound on the same side (the
//!   server stalled, or the route changed), the offset is taken from the newest sample;
//! - the arrival jitter is the mean absolute residual (RFC 3550's interarrival jitter,
//!   gain 1/16), in ticks.
//!
//! The server's current tick is the arrival clock plus the one-way trip, taken as half the
//! reliable link's smoothed round trip: `server_tick(now) = x(now) + offset + rtt/2`.
//!
//! The render clock trails the arrival clock by the interpolation delay:
//! `render_tick(now) = x(now) + offset − delay(now)`, that is, `server_tick(now) − rtt/2 −
//! delay(now)`. The delay's target is `2 + 3 · jitter + 8 · gap_loss` ticks, bounded to
//! [`MIN_DELAY`]..=[`MAX_DELAY`], where `gap_loss` is the smoothed share of ticks skipped
//! between successive newest snapshots (loss or reordering). The delay follows its target
//! continuously in `now`: it grows by at most [`GROW`] and shrinks by at most [`SHRINK`]
//! of elapsed time, so the render clock runs between 0.9× and 1.02× real time while it
//! adapts, and never jumps because of the delay.
//!
//! A new run of the match (its epoch) restarts the ticks at 0: the offset and the gap
//! tracking are reset; the jitter and the delay, properties of the network, are kept.

use std::time::{Duration, Instant};

/// Samples averaged with gain `1/n` before the exponential average takes over.
pub const WARM_SAMPLES: u32 = 16;
/// Gain of the offset's exponential average once warm.
pub const GAIN: f64 = 1.0 / 32.0;
/// Gain of the jitter's and the gap loss's averages.
const JITTER_GAIN: f64 = 1.0 / 16.0;
const LOSS_GAIN: f64 = 1.0 / 32.0;
/// Consecutive out-of-bound samples on one side that resynchronise the offset.
pub const RESYNC_RUN: i32 = 8;
/// Bounds of the interpolation delay, ticks.
pub const MIN_DELAY: f64 = 1.0;
/// Upper bound of the interpolation delay, ticks (the interpolation ring holds
/// [`crate::INTERP_FRAMES`] ticks).
pub const MAX_DELAY: f64 = 24.0;
/// Fastest growth of the delay, per tick of elapsed time.
pub const GROW: f64 = 0.1;
/// Fastest shrinking of the delay, per tick of elapsed time.
pub const SHRINK: f64 = 0.02;
/// The largest jitter tracked, ticks (a minute at 128 Hz): past it the delay is at its
/// bound long since, and a hostile server's ticks cannot grow it further.
const MAX_JITTER: f64 = 8192.0;
/// The jitter assumed before any is measured, ticks.
const INITIAL_JITTER: f64 = 0.5;

/// The clock sync and the adaptive delay of one session.
#[derive(Clone, Debug)]
pub(crate) struct Clock {
    origin: Instant,
    /// The delay's floor, ticks: [`MIN_DELAY`] or the session's own, if more.
    min_delay: f64,
    hz: f64,
    offset: f64,
    samples: u32,
    jitter: f64,
    outliers: i32,
    /// Newest snapshot tick sampled in this run.
    newest: Option<u32>,
    gap_loss: f64,
    /// The delay was `delay0` at local tick `delay_at`, heading for `target`.
    delay0: f64,
    delay_at: f64,
    target: f64,
    delay_set: bool,
}

impl Clock {
    pub(crate) fn new(origin: Instant, min_delay_ticks: u8) -> Clock {
        Clock {
            origin,
            min_delay: f64::from(min_delay_ticks).clamp(MIN_DELAY, MAX_DELAY),
            hz: 0.0,
            offset: 0.0,
            samples: 0,
            jitter: INITIAL_JITTER,
            outliers: 0,
            newest: None,
            gap_loss: 0.0,
            delay0: 0.0,
            delay_at: 0.0,
            target: 0.0,
            delay_set: false,
        }
    }

    /// Sets the tick rate (from the welcome); a new rate forgets everything.
    pub(crate) fn set_rate(&mut self, tick_hz: u16) {
        let hz = f64::from(tick_hz.max(1));
        if hz != self.hz {
            *self = Clock {
                min_delay: self.min_delay,
                ..Clock::new(self.origin, 0)
            };
            self.hz = hz;
        }
    }

    /// A new run: ticks count from 0 again.
    pub(crate) fn reset_run(&mut self) {
        self.samples = 0;
        self.outliers = 0;
        self.newest = None;
    }

    fn local(&self, now: Instant) -> f64 {
        now.saturating_duration_since(self.origin).as_secs_f64() * self.hz
    }

    fn bound(&self) -> f64 {
        (4.0 * self.jitter).max(3.0)
    }

    /// One snapshot of tick `tick` that arrived at `at` (not a duplicate).
    pub(crate) fn sample(&mut self, tick: u32, at: Instant) {
        if self.hz == 0.0 {
            return;
        }
        let x = self.local(at);
        let s = f64::from(tick) - x;
        if self.samples == 0 {
            self.offset = s;
            self.samples = 1;
        } else {
            let r = s - self.offset;
            let bound = self.bound();
            if r.abs() > bound {
                let side = if r > 0.0 { 1 } else { -1 };
                self.outliers = if self.outliers.signum() == side {
                    self.outliers + side
                } else {
                    side
                };
            } else {
                self.outliers = 0;
            }
            if self.outliers.abs() >= RESYNC_RUN {
                self.offset = s;
                self.outliers = 0;
                self.samples = 1;
            } else {
                let rc = r.clamp(-bound, bound);
                self.samples = self.samples.saturating_add(1);
                let gain = if self.samples <= WARM_SAMPLES {
                    1.0 / f64::from(self.samples)
                } else {
                    GAIN
                };
                self.offset += gain * rc;
                // Bounded: residuals at the bound would grow it without end.
                self.jitter =
                    (self.jitter + JITTER_GAIN * (rc.abs() - self.jitter)).min(MAX_JITTER);
            }
        }
        match self.newest {
            Some(n) if tick > n => {
                let missing = f64::from((tick - n - 1).min(16));
                self.gap_loss += LOSS_GAIN * (missing / (missing + 1.0) - self.gap_loss);
                self.newest = Some(tick);
            }
            Some(_) => {}
            None => self.newest = Some(tick),
        }
        // The delay heads for its new target from where it is now.
        let target =
            (2.0 + 3.0 * self.jitter + 8.0 * self.gap_loss).clamp(self.min_delay, MAX_DELAY);
        if self.delay_set {
            self.delay0 = self.delay_at_local(x);
        } else {
            self.delay0 = target;
            self.delay_set = true;
        }
        self.delay_at = x;
        self.target = target;
    }

    fn delay_at_local(&self, x: f64) -> f64 {
        let dt = (x - self.delay_at).max(0.0);
        let d = self.target - self.delay0;
        self.delay0 + d.clamp(-SHRINK * dt, GROW * dt)
    }

    /// True once a snapshot of this run was sampled.
    pub(crate) fn synced(&self) -> bool {
        self.samples > 0 && self.hz > 0.0
    }

    /// The server tick a snapshot arriving at `now` is of (the arrival clock).
    pub(crate) fn arrival_tick(&self, now: Instant) -> Option<f64> {
        self.synced().then(|| self.local(now) + self.offset)
    }

    /// The server's current tick at `now`, given the link's round trip.
    pub(crate) fn server_tick(&self, now: Instant, rtt: Duration) -> Option<f64> {
        Some(self.arrival_tick(now)? + rtt.as_secs_f64() * self.hz / 2.0)
    }

    /// The tick to show at `now`.
    pub(crate) fn render_tick(&self, now: Instant) -> Option<f64> {
        let x = self.local(now);
        Some((self.arrival_tick(now)? - self.delay_at_local(x)).max(0.0))
    }

    /// The interpolation delay at `now`, ticks.
    pub(crate) fn delay_at(&self, now: Instant) -> f64 {
        if !self.delay_set {
            return self.initial_delay();
        }
        self.delay_at_local(self.local(now))
    }

    /// The delay as of the newest sample, ticks.
    pub(crate) fn delay(&self) -> f64 {
        if !self.delay_set {
            return self.initial_delay();
        }
        self.delay0
    }

    /// The delay before any snapshot was sampled, ticks.
    fn initial_delay(&self) -> f64 {
        (2.0 + 3.0 * INITIAL_JITTER).max(self.min_delay)
    }

    /// The delay's current target, ticks.
    pub(crate) fn delay_target(&self) -> f64 {
        if !self.delay_set {
            return self.delay();
        }
        self.target
    }

    /// Arrival jitter, ticks.
    pub(crate) fn jitter(&self) -> f64 {
        self.jitter
    }

    /// Smoothed share of ticks skipped between successive newest snapshots.
    pub(crate) fn gap_loss(&self) -> f64 {
        self.gap_loss
    }

    /// Ticks to a duration.
    pub(crate) fn duration(&self, ticks: f64) -> Duration {
        if self.hz == 0.0 || !ticks.is_finite() || ticks <= 0.0 {
            return Duration::ZERO;
        }
        Duration::try_from_secs_f64(ticks / self.hz).unwrap_or(Duration::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks from a hostile server, far apart each time: nothing overflows, the delay
    /// stays in its bounds and the figures stay finite.
    #[test]
    fn wild_ticks_keep_the_clock_finite_and_the_delay_bounded() {
        let t0 = Instant::now();
        let mut c = Clock::new(t0, 1);
        c.set_rate(128);
        for k in 0..10_000u32 {
            let tick = if k % 2 == 0 { u32::MAX - k } else { k };
            let at = t0 + Duration::from_micros(u64::from(k) * 100);
            c.sample(tick, at);
            let now = at + Duration::from_millis(1);
            assert!(c
                .server_tick(now, Duration::from_millis(50))
                .unwrap()
                .is_finite());
            let r = c.render_tick(now).unwrap();
            assert!(r.is_finite() && r >= 0.0);
            assert!((MIN_DELAY..=MAX_DELAY).contains(&c.delay_at(now)));
        }
        assert!(c.jitter() <= MAX_JITTER);
        let _ = c.duration(c.jitter());
        assert_eq!(c.duration(f64::INFINITY), Duration::ZERO);
        assert_eq!(c.duration(1e300), Duration::MAX);
    }

    /// Snapshots on time, every tick: the delay settles at its floor, the adaptive 2 ticks
    /// or the session's own minimum when that is more, and never under it; a rate change
    /// keeps the floor.
    #[test]
    fn a_clean_link_settles_at_the_sessions_least_delay() {
        let t0 = Instant::now();
        for (min, settles) in [(1u8, 2.0), (5, 5.0), (200, MAX_DELAY)] {
            let mut c = Clock::new(t0, min);
            c.set_rate(128);
            let tick = Duration::from_nanos(7_812_500);
            for k in 0..4096u32 {
                let at = t0 + tick * k;
                c.sample(k, at);
                assert!(
                    c.delay_at(at) >= f64::from(min).min(MAX_DELAY) - 1e-9,
                    "{min}"
                );
            }
            assert!((c.delay() - settles).abs() < 0.05, "{min}: {}", c.delay());
            c.set_rate(64);
            assert!(c.delay_at(t0) >= f64::from(min).min(MAX_DELAY), "{min}");
        }
    }
}
