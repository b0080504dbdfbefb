//! A sweep step's verdict, robust on a noisy host: the step's measured run is judged in
//! [`WINDOWS`] windows, each on the server's own account (late ticks the workers
//! attributed to a stall excused: the host's, preempted or stolen, and the unexplained
//! wake-ups late while the worker was idle) and strictly (every late tick counted); a step holds
//! when most windows hold. A step that fails runs once more before the sweep stops, and
//! the sweep says why it stopped: "server", "bots" or "host". Pure functions over the
//! steps' figures, so the rules are tested without running a bench.

use tickforge_telemetry::report::{
    FrameSecond, LateCauses, SaturatedBy, StepVerdict, WindowVerdict,
};

use super::sweep::ON_TIME;

/// Windows a step's run is split into; it holds when more than half of them hold.
pub const WINDOWS: usize = 3;
/// Share of a step's ticks the host may make late before the server's own account can no
/// longer be read from it (ten times the misses [`ON_TIME`] allows): past it the step's
/// outcome is "host", and a sweep that sees it twice stops there.
pub const HOST_LIMIT: f64 = 0.05;
/// The bots count as saturated only when their flag is up and their process used at least
/// this share of its core. Their flag leaves out the deadlines their thread's run-queue
/// delay explains (preempted, throttled), but it still trips when the host stalls them
/// unseen (a VM's steal) at 40–60% of a core, which is the host, not the bots' limit.
pub const BOTS_BUSY: f64 = 0.75;

/// What a step's run gives its verdict.
#[derive(Clone, Debug, Default)]
pub struct StepRun<'a> {
    /// The server's per-second series (`frame_seconds`).
    pub seconds: &'a [FrameSecond],
    /// Ticks never run.
    pub skipped: u64,
    /// The bots' own saturation flag, and the share of their core they used.
    pub bots_flag: bool,
    pub bots_cpu_util: Option<f64>,
    /// The step's late ticks by cause.
    pub late_causes: LateCauses,
    /// Ticks run in the step.
    pub ticks: u64,
}

/// Whether the bots were the limit ([`BOTS_BUSY`]).
pub fn bots_saturated(flag: bool, cpu_util: Option<f64>) -> bool {
    flag && cpu_util.is_none_or(|u| u >= BOTS_BUSY)
}

/// The per-second series cut into `n` windows of whole seconds (fewer when it has fewer
/// seconds), each with its on-time rates.
pub fn windows(seconds: &[FrameSecond], n: usize) -> Vec<WindowVerdict> {
    let Some(last) = seconds.iter().map(|s| s.s).max() else {
        return Vec::new();
    };
    let span = last + 1;
    let n = (n as u32).clamp(1, span);
    (0..n)
        .map(|k| {
            let (from_s, to_s) = (k * span / n, (k + 1) * span / n);
            let mut w = WindowVerdict {
                from_s,
                to_s,
                ..WindowVerdict::default()
            };
            for s in seconds.iter().filter(|s| s.s >= from_s && s.s < to_s) {
                w.ticks += u64::from(s.frames);
                w.late += u64::from(s.late);
                w.late_host += u64::from(s.late_host.min(s.late));
            }
            let rate = |late: u64| {
                if w.ticks == 0 {
                    0.0
                } else {
                    w.ticks.saturating_sub(late) as f64 / w.ticks as f64
                }
            };
            w.on_time_rate = rate(w.late - w.late_host);
            w.on_time_rate_strict = rate(w.late);
            w
        })
        .collect()
}

/// More than half of `windows` have a rate of at least [`ON_TIME`].
fn most_hold(windows: &[WindowVerdict], rate: impl Fn(&WindowVerdict) -> f64) -> bool {
    let held = windows.iter().filter(|w| rate(w) >= ON_TIME).count();
    !windows.is_empty() && held * 2 > windows.len()
}

/// The verdict of one run of a step (`runs` counts this one).
pub fn judge(run: &StepRun<'_>, runs: u32) -> StepVerdict {
    let windows = windows(run.seconds, WINDOWS);
    let none_skipped = run.skipped == 0;
    let held = none_skipped && most_hold(&windows, |w| w.on_time_rate);
    let held_strict = none_skipped && most_hold(&windows, |w| w.on_time_rate_strict);
    let host_late_share = if run.ticks == 0 {
        0.0
    } else {
        run.late_causes.stalled() as f64 / run.ticks as f64
    };
    let outcome = if bots_saturated(run.bots_flag, run.bots_cpu_util) {
        "bots"
    } else if held_strict {
        "held"
    } else if host_late_share > HOST_LIMIT {
        "host"
    } else if held {
        // Held on the server's own account; strictly, the host's misses failed it.
        "held-host"
    } else {
        "server"
    };
    StepVerdict {
        windows,
        held,
        held_strict,
        runs,
        outcome: outcome.to_string(),
        host_late_share,
    }
}

/// What the sweep does after a step's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The step held (strictly, or on the server's own account): on to the next.
    Continue,
    /// The step failed its first run: run it once more.
    RunAgain,
    /// The step failed twice: stop, for this reason ("server", "bots", "host").
    Stop(&'static str),
}

/// The sweep's rule: a held step goes on; a failed step runs once more; a step failed
/// twice stops the sweep for the re-run's reason.
pub fn next(v: &StepVerdict) -> Next {
    let Some(reason) = failure(v) else {
        return Next::Continue;
    };
    if v.runs < 2 {
        Next::RunAgain
    } else {
        Next::Stop(reason)
    }
}

/// Why a step failed ("server", "bots", "host"); `None`: it held (strictly, or on the
/// server's own account).
pub fn failure(v: &StepVerdict) -> Option<&'static str> {
    match v.outcome.as_str() {
        "held" | "held-host" => None,
        "bots" => Some("bots"),
        "host" => Some("host"),
        _ => Some("server"),
    }
}

/// The sweep's figures from its judged steps (match count and verdict), in order:
/// `measured` is the last step that held on the server's own account before the sweep
/// stopped; `measured_strict` the last of the steps from the first on that all held
/// strictly.
pub fn measured(steps: &[(u32, &StepVerdict)]) -> (Option<u32>, Option<u32>) {
    let mut measured = None;
    let mut strict = None;
    let mut strict_open = true;
    for &(n, v) in steps {
        if next(v) != Next::Continue {
            break;
        }
        measured = Some(n);
        strict_open &= v.held_strict;
        if strict_open {
            strict = Some(n);
        }
    }
    (measured, strict)
}

/// Why the sweep stopped, in words with the figures of the step that stopped it; `bots`:
/// how the bots fell short, and the cores that would have kept them on schedule.
pub fn stopped_because(
    reason: &str,
    n: u32,
    v: &StepVerdict,
    causes: &LateCauses,
    (saturated_by, bots_cores): (Option<SaturatedBy>, Option<f64>),
) -> String {
    let rates: Vec<String> = (v.windows.iter())
        .map(|w| {
            format!(
                "{:.2}% ({:.2}% strict)",
                w.on_time_rate * 100.0,
                w.on_time_rate_strict * 100.0
            )
        })
        .collect();
    let what = match reason {
        "server" => "the server's own cost: its windows missed 99.5% on time with the host's misses excused".to_string(),
        "bots" => {
            let how = match saturated_by {
                Some(SaturatedBy::Late | SaturatedBy::LateWarmup) => {
                    "the bots fell behind their schedule, woken late on a busy host"
                }
                Some(SaturatedBy::Cpu) | None => "the bots saturated their core",
            };
            let cores = bots_cores.map_or(String::new(), |c| {
                format!(" (they would have needed {c:.2} cores to keep up)")
            });
            format!("{how}{cores}: the server was not the limit")
        }
        "host" => "the host: preemption or steal made too many ticks late to read the server's own account".to_string(),
        _ => "the last step held".to_string(),
    };
    format!(
        "{n} matches, {} run(s): {what}; windows on time {}; late ticks own {} others {} host_preempted {} host_steal {} unexplained {} (host share of ticks {:.2}%)",
        v.runs,
        rates.join(", "),
        causes.own,
        causes.others,
        causes.host_preempted,
        causes.host_steal,
        causes.unexplained,
        v.host_late_share * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds of 1280 ticks (10 matches at 128 Hz) with these late and host-late counts.
    fn seconds(late: &[(u32, u32)]) -> Vec<FrameSecond> {
        (late.iter().enumerate())
            .map(|(s, &(late, late_host))| FrameSecond {
                s: s as u32,
                frames: 1280,
                late,
                late_host,
                ..FrameSecond::default()
            })
            .collect()
    }

    fn run(seconds: &[FrameSecond]) -> StepRun<'_> {
        let late: u64 = seconds.iter().map(|s| u64::from(s.late)).sum();
        let host: u64 = seconds.iter().map(|s| u64::from(s.late_host)).sum();
        StepRun {
            seconds,
            ticks: seconds.iter().map(|s| u64::from(s.frames)).sum(),
            late_causes: LateCauses {
                others: late - host,
                host_preempted: host,
                ..LateCauses::default()
            },
            ..StepRun::default()
        }
    }

    #[test]
    fn windows_cut_the_seconds_evenly_and_rate_both_accounts() {
        let s = seconds(&[
            (0, 0),
            (0, 0),
            (0, 0),
            (20, 20),
            (0, 0),
            (0, 0),
            (5, 0),
            (0, 0),
            (0, 0),
        ]);
        let w = windows(&s, 3);
        assert_eq!(w.len(), 3);
        assert_eq!((w[1].from_s, w[1].to_s, w[1].ticks), (3, 6, 3840));
        assert_eq!((w[1].late, w[1].late_host), (20, 20));
        assert_eq!(w[1].on_time_rate, 1.0);
        assert!((w[1].on_time_rate_strict - (3820.0 / 3840.0)).abs() < 1e-12);
        // Fewer seconds than windows: one window a second.
        assert_eq!(windows(&s[..2], 3).len(), 2);
        assert!(windows(&[], 3).is_empty());
    }

    #[test]
    fn a_step_holds_when_two_windows_in_three_hold() {
        // One bad window (a multi-millisecond stall the server caused itself): held.
        let one_bad = seconds(&[(0, 0), (30, 0), (0, 0), (0, 0), (0, 0), (0, 0)]);
        let v = judge(&run(&one_bad), 1);
        assert!(v.held && v.held_strict, "{v:?}");
        assert_eq!(v.outcome, "held");
        // Two bad windows: failed.
        let two_bad = seconds(&[(0, 0), (30, 0), (30, 0), (0, 0), (0, 0), (0, 0)]);
        let v = judge(&run(&two_bad), 1);
        assert!(!v.held && !v.held_strict);
        assert_eq!(v.outcome, "server");
        // Skipped ticks fail the step whatever the windows say.
        let mut r = run(&one_bad);
        r.skipped = 1;
        assert_eq!(judge(&r, 1).outcome, "server");
    }

    #[test]
    fn a_step_that_fell_behind_fails_on_the_servers_account() {
        // 15 ticks a second of 30 due, every one late (its own backlog): the windows have
        // ticks and a rate of 0, not none, and the backlog counts as skipped.
        let behind: Vec<FrameSecond> = (0..6)
            .map(|s| FrameSecond {
                s,
                frames: 15,
                late: 15,
                ..FrameSecond::default()
            })
            .collect();
        let mut r = run(&behind);
        r.skipped = 90;
        let v = judge(&r, 2);
        assert_eq!(v.windows.len(), WINDOWS);
        assert!(v
            .windows
            .iter()
            .all(|w| w.ticks == 30 && w.on_time_rate == 0.0));
        assert!(!v.held && !v.held_strict, "{v:?}");
        assert_eq!(v.outcome, "server");
        assert_eq!(next(&v), Next::Stop("server"));
    }

    #[test]
    fn misses_all_the_hosts_hold_on_the_servers_account_only() {
        let host = seconds(&[(30, 30), (0, 0), (30, 30), (0, 0), (0, 0), (0, 0)]);
        let v = judge(&run(&host), 1);
        assert!(v.held && !v.held_strict, "{v:?}");
        assert_eq!(v.outcome, "held-host");
        assert_eq!(next(&v), Next::Continue);
        // So many host misses that the server's account cannot be read: "host".
        let swamped = seconds(&[(300, 300), (300, 300), (300, 300), (300, 300)]);
        let v = judge(&run(&swamped), 1);
        assert_eq!(v.outcome, "host");
        assert!(v.host_late_share > HOST_LIMIT);
    }

    #[test]
    fn a_failed_step_runs_again_once_then_stops_with_its_reason() {
        let bad = seconds(&[(30, 0), (30, 0), (30, 0)]);
        let first = judge(&run(&bad), 1);
        assert_eq!(next(&first), Next::RunAgain);
        let again = judge(&run(&bad), 2);
        assert_eq!(next(&again), Next::Stop("server"));
        let good = seconds(&[(0, 0), (0, 0), (0, 0)]);
        assert_eq!(
            next(&judge(&run(&good), 2)),
            Next::Continue,
            "the re-run held"
        );
        let mut bots = run(&good);
        (bots.bots_flag, bots.bots_cpu_util) = (true, Some(0.95));
        assert_eq!(next(&judge(&bots, 1)), Next::RunAgain);
        assert_eq!(next(&judge(&bots, 2)), Next::Stop("bots"));
        let swamped = seconds(&[(300, 300), (300, 300), (300, 300)]);
        assert_eq!(next(&judge(&run(&swamped), 2)), Next::Stop("host"));
    }

    #[test]
    fn the_bots_flag_counts_only_on_a_busy_bots_core() {
        assert!(bots_saturated(true, Some(0.92)));
        assert!(bots_saturated(true, None), "no CPU figure: trust the flag");
        assert!(
            !bots_saturated(true, Some(0.45)),
            "late under contention, not saturated"
        );
        assert!(!bots_saturated(false, Some(0.99)));
    }

    #[test]
    fn measured_is_the_last_step_held_on_the_servers_account_and_strict_the_last_of_an_unbroken_run(
    ) {
        let v = |outcome: &str, held_strict: bool, runs: u32| StepVerdict {
            outcome: outcome.to_string(),
            held: outcome.starts_with("held"),
            held_strict,
            runs,
            ..StepVerdict::default()
        };
        let steps = [
            (1, v("held", true, 1)),
            (10, v("held", true, 1)),
            (20, v("held-host", false, 1)),
            (30, v("held", true, 2)),
            (40, v("server", false, 2)),
            (50, v("held", true, 1)),
        ];
        let refs: Vec<(u32, &StepVerdict)> = steps.iter().map(|(n, v)| (*n, v)).collect();
        assert_eq!(measured(&refs), (Some(30), Some(10)));
        assert_eq!(measured(&refs[..0]), (None, None));
        let none = (None, None);
        let text = stopped_because("server", 40, &steps[4].1, &LateCauses::default(), none);
        assert!(
            text.starts_with("40 matches, 2 run(s): the server's own cost"),
            "{text}"
        );
        let cpu = (Some(SaturatedBy::Cpu), Some(1.234));
        let bots = stopped_because("bots", 50, &steps[4].1, &LateCauses::default(), cpu);
        assert!(
            bots.starts_with("50 matches, 2 run(s): the bots saturated their core (they would have needed 1.23 cores to keep up)"),
            "{bots}"
        );
        let late = (Some(SaturatedBy::Late), Some(0.864));
        let bots = stopped_because("bots", 70, &steps[4].1, &LateCauses::default(), late);
        assert!(
            bots.starts_with("70 matches, 2 run(s): the bots fell behind their schedule, woken late on a busy host (they would have needed 0.86 cores to keep up)"),
            "{bots}"
        );
    }
}
