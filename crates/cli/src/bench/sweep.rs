//! `bench --sweep`: the games-per-core curve. Runs the scenario at rising match counts on
//! one worker core, one full bench run per step, and stops at the first step the server
//! no longer holds (ticks late or skipped) or the bots saturate (then the bots, not the
//! server, were the limit, and the report says so). Then it tries the counts between the
//! last step that held and that one, halving the gap down to [`RESOLUTION`].
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
/// Past the steps, the match counts between the last step that held and the first that
/// did not are tried, halving the gap, until they are this close: the steps are 10 apart
/// past 20, and the figure should not be a multiple of 10 for want of trying.
const RESOLUTION: u32 = 5;
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
    run_with(args, plan, axis, |step_plan, n, name, again| {
        run_step(args, dir, step_plan, n, name, axis, again)
    })
}

/// [`run`], each step run by `run_step(plan, n, name, again)` (`again`: a step over
/// matches that fails its first run may run once more).
fn run_with(
    args: &BenchArgs,
    plan: &Plan,
    axis: Axis,
    mut run_step: impl FnMut(&Plan, u32, &str, bool) -> Result<(Report, SweepStep)>,
) -> Result<Report> {
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
        let (report, step) = run_step(&step_plan, n, &name, !ended)?;
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
            // Not held: this was its second run (the first run of a failed step runs again
            // above), so the sweep stops here.
            let Some((reason, why)) = failure(&step) else {
                held = Some(report);
                continue;
            };
            (limited_by, stopped_because) = (reason, why);
        } else if step.bots_saturated {
            // Players: the curve runs on whatever the server does, until the bots cannot.
            limited_by = "bots";
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
    // Between the last step that held and the one that stopped the sweep.
    let refine = axis == Axis::Matches && args.sweep_steps.is_empty() && !args.sweep_every_step;
    if let (true, Some(mut below), Some(mut above)) = (
        refine,
        held.as_ref().map(|r| r.matches),
        (limited_by != "steps")
            .then(|| steps.last().map(|s: &SweepStep| s.matches))
            .flatten(),
    ) {
        while let Some(n) = between(below, above) {
            let step_plan = Plan {
                matches: n,
                ..*plan
            };
            let name = format!("{n} match(es), between {below} and {above}");
            let (report, step) = run_step(&step_plan, n, &name, true)?;
            match failure(&step) {
                None => {
                    below = n;
                    held = Some(report);
                }
                Some((reason, why)) => {
                    above = n;
                    (limited_by, stopped_because) = (reason, why);
                }
            }
            steps.push(step);
        }
        // The curve, and the figures read from it, in order of match count.
        steps.sort_by_key(|s| s.matches);
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

/// Why a step over matches did not hold, and the sentence saying so with its figures;
/// `None` when it held.
fn failure(step: &SweepStep) -> Option<(&'static str, String)> {
    let v = step.verdict.as_ref().expect("a matches step is judged");
    let reason = verdict::failure(v)?;
    let why = verdict::stopped_because(
        reason,
        step.matches,
        v,
        &step.late_causes,
        (step.bots_saturated_by, step.bots_cores_to_keep_up),
    );
    Some((reason, why))
}

/// The match count halfway between `held`, the most that held, and `failed`, the fewest
/// that did not; `None` once they are within [`RESOLUTION`].
fn between(held: u32, failed: u32) -> Option<u32> {
    (failed > held.saturating_add(RESOLUTION)).then(|| held + (failed - held) / 2)
}

/// Runs step `n` (`plan`) in its own directory and judges it; a step over matches that
/// failed its first run runs once more when `again`, and the second run's verdict stands.
fn run_step(
    args: &BenchArgs,
    dir: &Path,
    plan: &Plan,
    n: u32,
    name: &str,
    axis: Axis,
    again: bool,
) -> Result<(Report, SweepStep)> {
    if !args.quiet {
        eprintln!("sweep: {name}…");
    }
    // Each step writes its own key, logs and reports.
    let step_dir = dir.join(format!("step-{n}"));
    std::fs::create_dir_all(&step_dir)?;
    let mut report = run_in(args, &step_dir, plan)?;
    let mut step = step_of(&report, 1);
    if !args.quiet {
        eprintln!("{}", crate::summary::sweep_step(&step));
    }
    let failed_once = step.verdict.as_ref().map(verdict::next) == Some(Next::RunAgain);
    if axis == Axis::Matches && again && failed_once {
        if !args.quiet {
            eprintln!("sweep: {name} again (the first run did not hold)…");
        }
        let again_dir = dir.join(format!("step-{n}-again"));
        std::fs::create_dir_all(&again_dir)?;
        report = run_in(args, &again_dir, plan)?;
        step = step_of(&report, 2);
        if !args.quiet {
            eprintln!("{}", crate::summary::sweep_step(&step));
        }
    }
    Ok((report, step))
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
    fn between_a_held_step_and_a_failed_one_the_gap_halves_down_to_five() {
        assert_eq!(between(60, 70), Some(65));
        assert_eq!(between(60, 65), None);
        assert_eq!(between(65, 70), None);
        assert_eq!(between(20, 30), Some(25));
        assert_eq!(between(100, 120), Some(110));
        assert_eq!(between(110, 120), Some(115));
        assert_eq!(between(1, 5), None);
        assert_eq!(between(5, 10), None);
        // Never outside the two, whatever they are.
        for held in 0..130 {
            for failed in held + 1..140 {
                if let Some(n) = between(held, failed) {
                    assert!(held < n && n < failed, "{held} {failed} -> {n}");
                }
            }
        }
    }

    /// A sweep over matches whose step `n` holds while `holds(n)`, each step's verdict as
    /// after its second run: the match counts run, in order, and the report.
    fn sweep(flags: &[&str], holds: impl Fn(u32) -> bool) -> (Vec<u32>, Report) {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            bench: BenchArgs,
        }
        crate::games::register();
        let args = Cli::try_parse_from(
            ["bench", "--scenario", "many-matches", "--sweep", "--quiet"]
                .into_iter()
                .chain(flags.iter().copied()),
        )
        .expect("valid flags")
        .bench;
        let plan = Plan {
            game: super::super::BenchGame::of(&args).expect("the shooter"),
            matches: 10,
            players: 10,
            warmup_s: 1.0,
            duration_s: 1.0,
            server_core: None,
            bots_core: None,
        };
        let mut ran = Vec::new();
        let report = run_with(&args, &plan, Axis::Matches, |p, n, _, _| {
            assert_eq!(p.matches, n);
            ran.push(n);
            let outcome = if holds(n) { "held" } else { "server" };
            let step = SweepStep {
                matches: n,
                verdict: Some(tickforge_telemetry::report::StepVerdict {
                    held: holds(n),
                    held_strict: holds(n),
                    runs: 2,
                    outcome: outcome.into(),
                    ..Default::default()
                }),
                ..SweepStep::default()
            };
            let report = Report {
                matches: n,
                ..Report::default()
            };
            Ok((report, step))
        })
        .expect("the sweep runs");
        (ran, report)
    }

    #[test]
    fn past_the_steps_the_sweep_tries_between_the_last_held_and_the_first_failed() {
        // 60 holds, 70 does not: 65 is tried, and holds.
        let (ran, r) = sweep(&[], |n| n <= 67);
        assert_eq!(ran, [1, 5, 10, 20, 30, 40, 50, 60, 70, 65]);
        let s = r.sweep.as_ref().unwrap();
        let curve: Vec<u32> = s.steps.iter().map(|s| s.matches).collect();
        assert_eq!(curve, [1, 5, 10, 20, 30, 40, 50, 60, 65, 70], "in order");
        assert_eq!(s.measured_games_per_core, Some(65));
        assert_eq!(r.matches, 65, "the report is the last step that held");
        assert!(
            s.stopped_because.starts_with("70 matches"),
            "{}",
            s.stopped_because
        );
        // 65 fails too: measured stays 60, and 65 is why it stopped.
        let (ran, r) = sweep(&[], |n| n <= 62);
        assert_eq!(ran, [1, 5, 10, 20, 30, 40, 50, 60, 70, 65]);
        let s = r.sweep.as_ref().unwrap();
        assert_eq!(s.measured_games_per_core, Some(60));
        assert!(
            s.stopped_because.starts_with("65 matches"),
            "{}",
            s.stopped_because
        );
        // Two halvings: 80 holds, 100 does not; 90 does not, 85 does.
        let (ran, r) = sweep(&[], |n| n <= 87);
        assert_eq!(&ran[ran.len() - 3..], [100, 90, 85]);
        assert_eq!(r.sweep.unwrap().measured_games_per_core, Some(85));
        // Every step held, or the first failed: nothing to try between.
        let (ran, _) = sweep(&[], |_| true);
        assert_eq!(ran, STEPS);
        let (ran, r) = sweep(&[], |_| false);
        assert_eq!(ran, [1]);
        assert_eq!(r.sweep.unwrap().measured_games_per_core, None);
        // Steps chosen by hand are run as chosen.
        let (ran, _) = sweep(&["--sweep-steps", "10,40"], |n| n < 40);
        assert_eq!(ran, [10, 40]);
    }

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
