//! `bench --sweep`: the games-per-core curve. Runs the scenario at rising match counts on
//! one worker core, one full bench run per step, and stops at the first step the server
//! no longer holds (ticks late or skipped) or the bots saturate (then the bots, not the
//! server, were the limit, and the report says so).
//!
//! Over matches, each step is judged on windows of its run and a failed step runs once
//! more before the sweep stops (`verdict.rs`): on a shared host one preemption must not
//! move the figure.

use std::path::Path;

use anyhow::Result;
use tickforge_telemetry::report::{Report, Sweep, SweepStep};

use super::verdict::{self, Next};
use super::{run_in, BenchArgs, Plan};

/// Ticks a step must start on time to hold: DESIGN.md's measured games per core.
pub const ON_TIME: f64 = 0.995;
/// Match counts tried, in order; the sweep ends at the first that does not hold.
const STEPS: [u32; 12] = [1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 100, 120];
/// Players in the one match of `saturation`, in order (the Quake paper's 1 … 128+).
const PLAYER_STEPS: [u32; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// What a sweep raises from step to step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Axis {
    /// Matches on the worker core (`many-matches --sweep`): ends at the first step the
    /// server does not hold.
    Matches,
    /// Players in one match (`saturation`): runs every step, since what happens past the
    /// server's limit is the curve's point; ends early only if the bots saturate.
    Players,
}

/// Runs the steps and returns the report of the last step that held (or the first, when
/// none did), with the whole curve in [`Report::sweep`]. `--sweep-every-step` runs the
/// steps past the one that ended the sweep too, for the curve alone.
pub(super) fn run(args: &BenchArgs, dir: &Path, plan: &Plan, axis: Axis) -> Result<Report> {
    let mut steps = Vec::new();
    let mut held: Option<Report> = None;
    let mut first: Option<Report> = None;
    let mut last: Option<Report> = None;
    let mut limited_by = "steps";
    let mut stopped_because = String::new();
    let mut ended = false;
    let defaults: &[u32] = match axis {
        Axis::Matches => &STEPS,
        Axis::Players => &PLAYER_STEPS,
    };
    let steps_tried = if args.sweep_steps.is_empty() {
        defaults
    } else {
        &args.sweep_steps
    };
    for &n in steps_tried {
        if n == 0 {
            anyhow::bail!("--sweep-steps: expected counts of 1 or more, got 0");
        }
        let (step_plan, name) = match axis {
            Axis::Matches => (
                Plan {
                    matches: n,
                    ..*plan
                },
                format!("{n} match(es)"),
            ),
            Axis::Players => (
                Plan {
                    players: n,
                    ..*plan
                },
                format!("{n} player(s)"),
            ),
        };
        if !args.quiet {
            eprintln!("sweep: {name}…");
        }
        // Each step writes its own key, logs and reports.
        let step_dir = dir.join(format!("step-{n}"));
        std::fs::create_dir_all(&step_dir)?;
        let mut report = run_in(args, &step_dir, &step_plan)?;
        let mut step = step_of(&report, 1);
        if !args.quiet {
            eprintln!("{}", crate::summary::sweep_step(&step));
        }
        // A step that failed its first run runs once more: the second run's verdict stands.
        let failed_once = step.verdict.as_ref().map(verdict::next) == Some(Next::RunAgain);
        if axis == Axis::Matches && !ended && failed_once {
            if !args.quiet {
                eprintln!("sweep: {name} again (the first run did not hold)…");
            }
            let again_dir = dir.join(format!("step-{n}-again"));
            std::fs::create_dir_all(&again_dir)?;
            report = run_in(args, &again_dir, &step_plan)?;
            step = step_of(&report, 2);
            if !args.quiet {
                eprintln!("{}", crate::summary::sweep_step(&step));
            }
        }
        let holds = step.on_time_rate.is_some_and(|r| r >= ON_TIME) && step.skipped == 0;
        steps.push(step.clone());
        first.get_or_insert_with(|| report.clone());
        last = Some(report.clone());
        // With --sweep-every-step the steps past the end still run and join the curve, but
        // the sweep's figures stay those of the steps up to it.
        if ended {
            continue;
        }
        if axis == Axis::Matches {
            let v = step.verdict.as_ref().expect("a matches step is judged");
            // Not held: this was its second run (the first run of a failed step runs again
            // above), so the sweep stops here.
            let Some(reason) = verdict::failure(v) else {
                held = Some(report);
                continue;
            };
            limited_by = reason;
            stopped_because = verdict::stopped_because(
                reason,
                n,
                v,
                &step.late_causes,
                (step.bots_saturated_by, step.bots_cores_to_keep_up),
            );
            if !args.sweep_every_step {
                break;
            }
            ended = true;
            continue;
        }
        if step.bots_saturated {
            limited_by = "bots";
        } else if !holds && axis == Axis::Matches {
            limited_by = "server";
        } else {
            if holds {
                held = Some(report);
            }
            continue;
        }
        if !args.sweep_every_step {
            break;
        }
        ended = true;
    }
    let judged: Vec<(u32, &_)> = (steps.iter())
        .filter_map(|s: &SweepStep| s.verdict.as_ref().map(|v| (s.matches, v)))
        .collect();
    let (measured, measured_strict) = match axis {
        Axis::Matches => verdict::measured(&judged),
        Axis::Players => (None, None),
    };
    if axis == Axis::Matches && limited_by == "steps" {
        stopped_because = format!(
            "every step held: {} matches, the last tried",
            steps.last().map_or(0, |s| s.matches)
        );
    }
    let mut report = match axis {
        Axis::Matches => held.or(first),
        // The curve's last step: the most players the bots drove.
        Axis::Players => last,
    }
    .ok_or_else(|| anyhow::anyhow!("--sweep-steps: no step to run"))?;
    if axis == Axis::Matches {
        report.games_per_core.measured = measured.map(f64::from);
        report.games_per_core.measured_strict = measured_strict.map(f64::from);
    }
    report.sweep = Some(Sweep {
        steps,
        measured_games_per_core: measured,
        measured_strict_games_per_core: measured_strict,
        stopped_because,
        limited_by: limited_by.to_string(),
        by: match axis {
            Axis::Matches => "matches",
            Axis::Players => "players",
        }
        .to_string(),
    });
    Ok(report)
}

/// The figures of one step, judged on its windows (`runs`: this is the step's first run
/// or its second).
fn step_of(r: &Report, runs: u32) -> SweepStep {
    let t = &r.ticks;
    let run = verdict::StepRun {
        seconds: &r.server.frame_seconds,
        skipped: t.skipped,
        bots_flag: r.bots_saturated == Some(true),
        bots_cpu_util: r.bots_cpu_util,
        late_causes: r.server.late_causes,
        ticks: t.on_time + t.late,
    };
    SweepStep {
        matches: r.matches,
        players: r.players_per_match,
        response_rate_hz: r.clients.response_rate_hz,
        match_frame_ms: r.match_frame_ms,
        worker_util: r.server_cpu_util,
        on_time_rate: (t.expected > 0).then(|| t.on_time as f64 / t.expected as f64),
        wake_late_ms: r.server.wake_late_ms,
        tick_start_late_ms: r.server.tick_start_late_ms,
        skipped: t.skipped,
        schedule: r.schedule,
        response_time_ms: r.clients.response_time_ms,
        bots_cpu_util: r.bots_cpu_util,
        bots_saturated: r.bots_saturated == Some(true),
        bots_saturated_by: r.bots.saturated_by,
        bots_cores_to_keep_up: r.bots.cost.map(|c| c.cores_to_keep_up),
        projected_games_per_core: r.games_per_core.projected,
        frame_to_io_floor: r.frame_to_io_floor,
        late_causes: r.server.late_causes,
        verdict: Some(verdict::judge(&run, runs)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickforge_telemetry::report::{Percentiles, Ticks};

    #[test]
    fn a_step_reads_its_rates_from_the_report() {
        let mut r = Report {
            matches: 20,
            ticks: Ticks {
                expected: 1000,
                on_time: 996,
                late: 4,
                skipped: 0,
                hitches: 1,
            },
            bots_saturated: Some(false),
            match_frame_ms: Some(Percentiles {
                p50: 0.1,
                p90: 0.12,
                p99: 0.2,
                max: 0.5,
                mean: 0.11,
            }),
            ..Report::default()
        };
        r.server.wake_late_ms = Some(Percentiles {
            p50: 0.02,
            p90: 0.03,
            p99: 0.06,
            max: 2.5,
            mean: 0.025,
        });
        r.server.tick_start_late_ms = Some(Percentiles {
            p50: 0.1,
            p90: 0.2,
            p99: 1.25,
            max: 3.0,
            mean: 0.15,
        });
        let s = step_of(&r, 1);
        assert_eq!(s.matches, 20);
        assert_eq!(s.on_time_rate, Some(0.996));
        assert_eq!(s.tick_start_late_ms.map(|p| p.p99), Some(1.25));
        assert_eq!(s.wake_late_ms.map(|p| p.max), Some(2.5));
        assert!(!s.bots_saturated);
        let line = crate::summary::sweep_step(&s);
        assert!(
            line.contains("99.60%") && line.contains("start p99 1.250 ms"),
            "{line}"
        );
        r.bots_saturated = Some(true);
        r.ticks.expected = 0;
        let s = step_of(&r, 1);
        assert!(s.bots_saturated && s.on_time_rate.is_none());
        assert!(crate::summary::sweep_step(&s).contains("SATURATED"));
    }
}
