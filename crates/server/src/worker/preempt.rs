//! Why a tick was late: the match's own cost, the worker's other work, or the host.
//!
//! Each wake-up the worker reads its thread's scheduler counters once (involuntary context
//! switches from `getrusage(RUSAGE_THREAD)`, about 0.2 µs; run-queue delay from
//! `/proc/thread-self/schedstat`, about 0.5 µs, through a file opened once: `tickforge_io`'s
//! `cpu::ThreadProbe`, which the bots read too) and judges the wake-up ([`judge_wake`]):
//!
//! - the worker *slept* if it went to sleep before the deadline it woke for; a wake-up
//!   later than [`HOST_SLACK`] past `max(deadline, went to sleep)` is more than the
//!   sleeper's spin explains (the spin wakes it within tens of microseconds);
//! - run-queue delay since the last wake-up (the thread runnable, not running) explains a
//!   lateness of up to that much, whether the worker slept or was at work;
//! - such a *stall* is the host's: `host_preempted` when the thread was switched out
//!   involuntarily or waited on the run queue for at least half the stall,
//!   `host_steal` when the host's steal time rose since its last sample (a VM's vCPU was
//!   not running: invisible from inside the guest's scheduler), else `unexplained`.
//!
//! A stall leaves a *debt*: the ticks it delayed run late until the worker catches up (a
//! wake-up it slept into, within the slack of its deadline, clears it). Each late tick is
//! then attributed ([`tick_cause`]): to the host when it would have started within 1 ms
//! of its deadline without the debt; otherwise to its own previous tick (the part of the
//! backlog its own mean cost explains) or to the worker's other work (the receive, the
//! matches run before it, their backlog), whichever explains more.
//!
//! Steal time is sampled from `/proc/stat` about once a second off the tick, and once more
//! at a stall (a file read of tens of microseconds, only then).

use std::fs::File;
use std::io::Read;
use std::time::{Duration, Instant};

use tickforge_io::cpu::{ThreadProbe, ThreadSched as Sched};
use tickforge_telemetry::report::{LateCauses, Preemption};

use super::LATE_AFTER;

/// A wake-up later than this past its deadline, while the worker slept, is more than the
/// sleeper's spin explains: a stall. Half the 1 ms that makes a tick late.
pub(crate) const HOST_SLACK: Duration = Duration::from_micros(500);

/// Why a late tick was late; the index is its place in [`LateCauses::NAMES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    Own = 0,
    Others = 1,
    HostPreempted = 2,
    HostSteal = 3,
    Unexplained = 4,
}

impl Cause {
    /// A stall's: the worker was not running while the tick was due (the host's,
    /// confirmed or unexplained), not the server's own cost.
    pub(crate) fn is_stall(self) -> bool {
        matches!(
            self,
            Cause::HostPreempted | Cause::HostSteal | Cause::Unexplained
        )
    }
}

/// What the worker knows of one wake-up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wake {
    /// The deadline it slept for (the earliest match deadline).
    pub(crate) deadline: Instant,
    /// When it went to sleep (the end of the previous wake-up's work).
    pub(crate) slept_at: Instant,
    /// When it woke.
    pub(crate) woke: Instant,
    /// The counters' change since the previous wake-up.
    pub(crate) sched: Sched,
    /// The host's steal time rose since its last sample.
    pub(crate) steal_rose: bool,
}

/// A host stall: how much lateness it explains, and whose it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stall {
    pub(crate) delay: Duration,
    pub(crate) cause: Cause,
}

/// The stall of a wake-up, if any ([`HOST_SLACK`]; module docs).
pub(crate) fn judge_wake(w: &Wake) -> Option<Stall> {
    let late = w.woke.saturating_duration_since(w.deadline);
    let sleep_late = w.woke.saturating_duration_since(w.deadline.max(w.slept_at));
    let queued = Duration::from_nanos(w.sched.run_delay_ns).min(late);
    let delay = sleep_late.max(queued);
    if delay <= HOST_SLACK {
        return None;
    }
    let cause = if w.sched.nivcsw > 0 || queued * 2 >= delay {
        Cause::HostPreempted
    } else if w.steal_rose {
        Cause::HostSteal
    } else {
        Cause::Unexplained
    };
    Some(Stall { delay, cause })
}

/// The debt after a wake-up. A worker that went to sleep before the deadline it woke for
/// had no backlog left: the old debt is gone, and only this wake-up's own stall (if any)
/// stands. A worker still at work past the deadline carries the debt, a new stall adding
/// to it (the larger delay, the newer cause).
pub(crate) fn carry_debt(debt: Option<Stall>, w: &Wake, stall: Option<Stall>) -> Option<Stall> {
    let debt = if w.slept_at <= w.deadline { None } else { debt };
    match (debt, stall) {
        (Some(d), Some(s)) => Some(Stall {
            delay: d.delay.max(s.delay),
            ..s
        }),
        (d, s) => s.or(d),
    }
}

/// Why a tick that started `late` after its `deadline` was late, in a wake-up `wake`
/// (`None`: unknown, as when a test drives frames directly), with the host's `debt` and
/// the match's mean frame cost `own_cost`.
pub(crate) fn tick_cause(
    late: Duration,
    deadline: Instant,
    wake: Option<&Wake>,
    debt: Option<Stall>,
    own_cost: Duration,
) -> Cause {
    if let Some(d) = debt {
        if late.saturating_sub(d.delay) <= LATE_AFTER {
            return d.cause;
        }
    }
    let Some(w) = wake else {
        return Cause::Others;
    };
    // The backlog the worker woke with: work of earlier wake-ups that ran past this
    // deadline (it did not sleep before it). The match's own previous tick is part of it,
    // at most its mean cost.
    let backlog = if w.slept_at > deadline {
        w.slept_at.saturating_duration_since(deadline)
    } else {
        Duration::ZERO
    };
    let own = backlog.min(own_cost).min(late);
    if own > late - own {
        Cause::Own
    } else {
        Cause::Others
    }
}

/// The host's CPU time and steal time, in clock ticks, from the first line of `/proc/stat`
/// (`cpu  user nice system idle iowait irq softirq steal guest guest_nice`).
pub(crate) fn parse_proc_stat_steal(text: &[u8]) -> Option<(u64, u64)> {
    let text = std::str::from_utf8(text).ok()?;
    let line = text.lines().next()?;
    let mut fields = line.split_ascii_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = fields
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let steal = *v.get(7)?;
    Some((v.iter().sum(), steal))
}

/// Reads `/proc/stat`'s first line: (total, steal) ticks. Off the tick only.
pub(crate) fn read_steal() -> Option<(u64, u64)> {
    let mut f = File::open("/proc/stat").ok()?;
    let mut buf = [0u8; 256];
    let n = f.read(&mut buf).ok()?;
    parse_proc_stat_steal(&buf[..n])
}

/// A worker's attribution state and counts.
#[derive(Default)]
pub(crate) struct Preempt {
    probe: Option<ThreadProbe>,
    last: Sched,
    slept_at: Option<Instant>,
    wake: Option<Wake>,
    debt: Option<Stall>,
    /// The last steal sample and the window's first.
    steal_last: Option<(u64, u64)>,
    steal_first: Option<(u64, u64)>,
    /// Counts of the measured window.
    pub(crate) causes: [u64; 5],
    pub(crate) figures: Preemption,
    run_delay_ns: u64,
}

impl Preempt {
    /// Opens the probe on the worker's thread (at the start of its run).
    pub(crate) fn start(&mut self) {
        let probe = ThreadProbe::open();
        self.last = probe.read();
        self.probe = Some(probe);
        self.sample_steal(false);
    }

    /// The worker goes to sleep now.
    pub(crate) fn sleeping(&mut self, now: Instant) {
        self.slept_at = Some(now);
    }

    /// The worker woke at `woke` for `deadline`; `in_window`: it woke inside the measured
    /// window (the stall counts in the report).
    pub(crate) fn woke(&mut self, deadline: Instant, woke: Instant, in_window: bool) {
        let Some(probe) = &self.probe else { return };
        let now = probe.read();
        let sched = Sched {
            nivcsw: now.nivcsw.saturating_sub(self.last.nivcsw),
            run_delay_ns: now.run_delay_ns.saturating_sub(self.last.run_delay_ns),
        };
        self.last = now;
        let mut wake = Wake {
            deadline,
            slept_at: self.slept_at.unwrap_or(deadline),
            woke,
            sched,
            steal_rose: false,
        };
        let mut stall = judge_wake(&wake);
        if stall.is_some_and(|s| s.cause == Cause::Unexplained) {
            // Only at a stall: did the host steal since its last sample?
            wake.steal_rose = self.sample_steal(true);
            stall = judge_wake(&wake);
        }
        self.debt = carry_debt(self.debt, &wake, stall);
        self.wake = Some(wake);
        if in_window {
            let f = &mut self.figures;
            f.involuntary_switches += sched.nivcsw;
            self.run_delay_ns += sched.run_delay_ns;
            if let Some(s) = stall {
                f.stalls += 1;
                f.stall_max_ms = f.stall_max_ms.max(s.delay.as_secs_f64() * 1e3);
            }
        }
    }

    /// Why a tick that started `late` after `deadline` was late.
    pub(crate) fn cause(&self, late: Duration, deadline: Instant, own_cost_ns: u64) -> Cause {
        tick_cause(
            late,
            deadline,
            self.wake.as_ref(),
            self.debt,
            Duration::from_nanos(own_cost_ns),
        )
    }

    /// Samples the host's steal time (about once a second, and at a stall); true when it
    /// rose since the last sample.
    pub(crate) fn sample_steal(&mut self, window_open: bool) -> bool {
        let Some(now) = read_steal() else {
            return false;
        };
        let rose = self.steal_last.is_some_and(|(_, s)| now.1 > s);
        self.steal_last = Some(now);
        if window_open && self.steal_first.is_none() {
            self.steal_first = Some(now);
        }
        rose
    }

    /// The window's figures, its steal share read now.
    pub(crate) fn report(&self) -> (LateCauses, Preemption) {
        let mut f = self.figures;
        f.run_delay_ms = self.run_delay_ns as f64 / 1e6;
        f.steal_share = match (self.steal_first, self.steal_last) {
            (Some((t0, s0)), Some((t1, s1))) if t1 > t0 => {
                Some(s1.saturating_sub(s0) as f64 / (t1 - t0) as f64)
            }
            _ => None,
        };
        (LateCauses::from_counts(self.causes), f)
    }
}

/// Adds the preemption figures of another worker.
pub(crate) fn merge_preemption(a: &mut Preemption, b: &Preemption) {
    a.stalls += b.stalls;
    a.stall_max_ms = a.stall_max_ms.max(b.stall_max_ms);
    a.involuntary_switches += b.involuntary_switches;
    a.run_delay_ms += b.run_delay_ms;
    a.steal_share = match (a.steal_share, b.steal_share) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// A wake-up for a deadline at t0 + 10 ms.
    fn wake(t0: Instant, slept_at_us: u64, woke_us: u64, nivcsw: u64, run_delay_us: u64) -> Wake {
        Wake {
            deadline: t0 + us(10_000),
            slept_at: t0 + us(slept_at_us),
            woke: t0 + us(woke_us),
            sched: Sched {
                nivcsw,
                run_delay_ns: run_delay_us * 1000,
            },
            steal_rose: false,
        }
    }

    #[test]
    fn a_wake_up_within_the_spin_is_no_stall() {
        let t0 = Instant::now();
        // Slept at 5 ms, woke 40 µs after the 10 ms deadline: the spin's jitter.
        assert_eq!(judge_wake(&wake(t0, 5_000, 10_040, 0, 0)), None);
        // Busy past the deadline (no sleep), woke at once: the work's lateness, no stall.
        assert_eq!(judge_wake(&wake(t0, 13_000, 13_010, 0, 0)), None);
    }

    #[test]
    fn a_late_wake_up_is_the_hosts_with_a_switch_or_run_queue_delay_or_steal() {
        let t0 = Instant::now();
        let preempted = judge_wake(&wake(t0, 5_000, 14_500, 1, 0)).unwrap();
        assert_eq!(preempted.cause, Cause::HostPreempted);
        assert_eq!(preempted.delay, us(4_500));
        // No switch counted, but 4 ms on the run queue: held from running when it woke.
        let queued = judge_wake(&wake(t0, 5_000, 14_500, 0, 4_000)).unwrap();
        assert_eq!(queued.cause, Cause::HostPreempted);
        let mut w = wake(t0, 5_000, 14_500, 0, 0);
        assert_eq!(judge_wake(&w).unwrap().cause, Cause::Unexplained);
        w.steal_rose = true;
        assert_eq!(judge_wake(&w).unwrap().cause, Cause::HostSteal);
        // Busy past the deadline, but 2 ms of that on the run queue while it worked.
        let at_work = judge_wake(&wake(t0, 12_500, 12_510, 0, 2_000)).unwrap();
        assert_eq!(
            (at_work.cause, at_work.delay),
            (Cause::HostPreempted, us(2_000))
        );
    }

    #[test]
    fn a_stall_leaves_a_debt_until_the_worker_sleeps_into_a_deadline_on_time() {
        let t0 = Instant::now();
        let stalled = wake(t0, 5_000, 14_500, 1, 0);
        let debt = carry_debt(None, &stalled, judge_wake(&stalled));
        assert_eq!(debt.map(|d| d.delay), Some(us(4_500)));
        // Catching up: busy past the next deadline, woke at once: the debt stands.
        let busy = wake(t0, 11_000, 11_010, 0, 0);
        assert_eq!(carry_debt(debt, &busy, judge_wake(&busy)), debt);
        // Slept into a deadline and woke on time: caught up.
        let on_time = wake(t0, 9_000, 10_020, 0, 0);
        assert_eq!(carry_debt(debt, &on_time, judge_wake(&on_time)), None);
        // Slept into it and woke 0.3 ms late: within the slack, caught up too.
        let a_little = wake(t0, 9_000, 10_300, 0, 0);
        assert_eq!(carry_debt(debt, &a_little, judge_wake(&a_little)), None);
        // Slept into it and stalled again: only the new stall stands.
        let again = wake(t0, 9_000, 11_000, 1, 0);
        let new = carry_debt(debt, &again, judge_wake(&again));
        assert_eq!(new.map(|d| d.delay), Some(us(1_000)));
        // A stall while still catching up: the larger delay, the newer cause.
        let mut stolen = wake(t0, 11_000, 12_000, 0, 0);
        stolen.steal_rose = true;
        let both = carry_debt(debt, &stolen, judge_wake(&stolen)).unwrap();
        assert_eq!((both.delay, both.cause), (us(4_500), Cause::HostSteal));
    }

    #[test]
    fn late_ticks_go_to_the_host_own_cost_or_the_other_matches() {
        let t0 = Instant::now();
        let deadline = t0 + us(10_000);
        let stalled = wake(t0, 5_000, 14_500, 1, 0);
        let debt = carry_debt(None, &stalled, judge_wake(&stalled));
        // 4.5 ms late at the wake-up, this tick started 5.2 ms late: without the 4.5 ms
        // stall it would have been 0.7 ms late, on time. The host's.
        let c = tick_cause(us(5_200), deadline, Some(&stalled), debt, us(60));
        assert_eq!(c, Cause::HostPreempted);
        // Behind 6 ms of the other matches' work besides the stall: theirs.
        let c = tick_cause(us(10_500), deadline, Some(&stalled), debt, us(60));
        assert_eq!(c, Cause::Others);
        // No stall; the worker slept, woke on time, and the matches before it took 1.5 ms.
        let slept = wake(t0, 5_000, 10_020, 0, 0);
        assert_eq!(
            tick_cause(us(1_500), deadline, Some(&slept), None, us(60)),
            Cause::Others
        );
        // One match costing 9 ms a tick: its previous tick ran 2 ms past this deadline.
        let overran = wake(t0, 12_000, 12_005, 0, 0);
        assert_eq!(
            tick_cause(us(2_100), deadline, Some(&overran), None, us(9_000)),
            Cause::Own
        );
        // Many cheap matches made the same backlog: the others'.
        assert_eq!(
            tick_cause(us(2_100), deadline, Some(&overran), None, us(60)),
            Cause::Others
        );
        // Frames driven without a wake-up (tests): the worker's own work.
        assert_eq!(
            tick_cause(us(2_000), deadline, None, None, us(60)),
            Cause::Others
        );
    }

    #[test]
    fn proc_stat_parses_to_the_total_and_the_steal() {
        let stat = b"cpu  1952525 12142 346253 3309995 47499 0 22483 1067 0 0\ncpu0 1 2 3\n";
        let (total, steal) = parse_proc_stat_steal(stat).unwrap();
        assert_eq!(steal, 1067);
        assert_eq!(
            total,
            1952525 + 12142 + 346253 + 3309995 + 47499 + 22483 + 1067
        );
        assert_eq!(parse_proc_stat_steal(b"cpu0 1 2 3 4 5 6 7 8\n"), None);
        // Kernels before 2.6.11 had no steal field.
        assert_eq!(parse_proc_stat_steal(b"cpu  1 2 3 4 5 6 7\n"), None);
    }

    #[test]
    fn the_hosts_steal_reads_within_its_total() {
        if let Some((total, steal)) = read_steal() {
            assert!(total >= steal && total > 0);
        }
    }
}
