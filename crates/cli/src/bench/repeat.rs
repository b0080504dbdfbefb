//! `bench --repeat N`: the same bench, server and bots started afresh, N times over, and one
//! report of them all.
//!
//! The report's figures are one whole run's, the run whose match frame mean is the median
//! (the lower middle one for an even N): a real run, so its sections still agree with each
//! other (the categories add up to its frame, its ticks to its window). The `repeats`
//! section gives every key figure ([`crate::compare::FIGURES`]) its own least, median and
//! most over the runs, and each run's value; those per-figure medians are what `compare`
//! reads, and their spread is its noise.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use tickforge_telemetry::report::{Repeats, Report, Spread};

use super::{BenchArgs, Plan};
use crate::compare::{value_text, FIGURES};

/// Runs the bench `args.repeat` times, each in its own scratch directory under `dir` (so
/// one run never reads another's files), and combines the reports.
pub(super) fn run(args: &BenchArgs, dir: &Path, plan: &Plan) -> Result<Report> {
    let n = args.repeat;
    let mut reports = Vec::with_capacity(n as usize);
    for i in 1..=n {
        if !args.quiet {
            eprintln!("run {i}/{n}");
        }
        let run_dir = dir.join(format!("run-{i}"));
        std::fs::create_dir_all(&run_dir)
            .with_context(|| format!("creating {}", run_dir.display()))?;
        let report = super::run_in(args, &run_dir, plan).with_context(|| format!("run {i}/{n}"))?;
        if !args.quiet {
            eprintln!(
                "run {i}/{n}: match frame mean {}, {} of ticks on time",
                report
                    .match_frame_ms
                    .map_or("n/a".into(), |p| format!("{:.3} ms", p.mean)),
                (crate::compare::figure("ticks_on_time_pct").read)(&report)
                    .map_or("n/a".into(), |p| format!("{p:.2}%")),
            );
        }
        reports.push(report);
    }
    // Every run is checked, not only the one whose figures the report keeps.
    let failed: Vec<String> = (reports.iter().enumerate())
        .flat_map(|(i, r)| {
            (super::checks::evaluate(r).into_iter())
                .filter(|c| !c.pass)
                .map(move |c| format!("{}@run{}", c.name, i + 1))
        })
        .collect();
    let mut report = combine(reports);
    if let Some(r) = report.repeats.as_mut() {
        r.failed_checks = failed;
    }
    Ok(report)
}

/// The middle of `values` (sorted in place); the mean of the two middle ones for an even
/// count. `None` when empty.
pub(crate) fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// One report of several runs of one bench: the median run's (by match frame mean; the
/// first when no run has a frame) with the `repeats` of every key figure.
///
/// # Panics
///
/// With no reports.
pub fn combine(mut reports: Vec<Report>) -> Report {
    assert!(!reports.is_empty(), "a repeat of no runs");
    let mut figures = BTreeMap::new();
    for f in &FIGURES {
        let runs: Vec<Option<f64>> = reports.iter().map(|r| (f.read)(r)).collect();
        let mut values: Vec<f64> = runs.iter().flatten().copied().collect();
        let Some(median) = median(&mut values) else {
            continue;
        };
        let spread = Spread {
            min: values[0],
            median,
            max: values[values.len() - 1],
            runs,
        };
        figures.insert(f.key.to_string(), spread);
    }
    let mut by_frame: Vec<(usize, f64)> = (reports.iter().enumerate())
        .filter_map(|(i, r)| Some((i, r.match_frame_ms?.mean)))
        .collect();
    by_frame.sort_by(|a, b| a.1.total_cmp(&b.1));
    let base = by_frame
        .get(by_frame.len().saturating_sub(1) / 2)
        .map_or(0, |x| x.0);
    let runs = reports.len() as u32;
    let mut report = reports.swap_remove(base);
    report.repeats = Some(Repeats {
        runs,
        base_run: base as u32,
        figures,
        failed_checks: Vec::new(),
    });
    report
}

/// The lines `bench --repeat` (and `report` of its file) print under the summary: each key
/// figure's min / median / max over the runs.
pub fn summary(r: &Repeats) -> String {
    let mut out = format!(
        "  repeats       {} runs; the figures above are run {}'s (the median match frame mean); over the runs, min / median / max:\n",
        r.runs,
        r.base_run + 1
    );
    for f in &FIGURES {
        let Some(s) = r.figures.get(f.key) else {
            continue;
        };
        let spread = if s.median > 0.0 {
            format!(
                "  (-{:.1}% / +{:.1}%)",
                100.0 * (1.0 - s.min / s.median),
                100.0 * (s.max / s.median - 1.0)
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "    {:<24} {:>8} / {:>8} / {:>8}{spread}",
            f.label,
            value_text(s.min),
            value_text(s.median),
            value_text(s.max)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickforge_telemetry::report::{Percentiles, Ticks};

    fn run(mean_ms: f64, p99_ms: f64, on_time: u64) -> Report {
        Report {
            match_frame_ms: Some(Percentiles {
                p50: mean_ms,
                p99: p99_ms,
                mean: mean_ms,
                ..Percentiles::default()
            }),
            ticks: Ticks {
                expected: 1000,
                on_time,
                ..Ticks::default()
            },
            ..Report::default()
        }
    }

    #[test]
    fn the_median_is_the_middle_or_the_mean_of_the_two_middle_values() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn three_runs_give_each_figure_its_own_spread_and_the_median_run_as_the_base() {
        // The second run (index 1) has the median mean; the first the median p99.
        let r = combine(vec![
            run(0.30, 0.50, 990),
            run(0.20, 0.90, 1000),
            run(0.10, 0.40, 995),
        ]);
        let rep = r.repeats.as_ref().unwrap();
        assert_eq!((rep.runs, rep.base_run), (3, 1));
        assert_eq!(
            r.match_frame_ms.unwrap().p99,
            0.90,
            "the base is a whole run, not a mix of medians"
        );
        let mean = &rep.figures["match_frame_mean_ms"];
        assert_eq!((mean.min, mean.median, mean.max), (0.10, 0.20, 0.30));
        assert_eq!(mean.runs, [Some(0.30), Some(0.20), Some(0.10)]);
        let p99 = &rep.figures["match_frame_p99_ms"];
        assert_eq!((p99.min, p99.median, p99.max), (0.40, 0.50, 0.90));
        let on_time = &rep.figures["ticks_on_time_pct"];
        assert_eq!(
            (on_time.min, on_time.median, on_time.max),
            (99.0, 99.5, 100.0)
        );
        // No run measured it: left out, not a made-up zero.
        assert!(!rep.figures.contains_key("games_per_core_measured"));
    }

    #[test]
    fn the_base_is_the_run_with_the_median_frame_mean() {
        let r = combine(vec![
            run(0.30, 0.5, 1000),
            run(0.10, 0.5, 1000),
            run(0.20, 0.5, 1000),
        ]);
        assert_eq!(r.repeats.unwrap().base_run, 2);
        // Even N: the lower middle run.
        let r = combine(vec![run(0.30, 0.5, 1000), run(0.10, 0.5, 1000)]);
        assert_eq!(r.repeats.as_ref().unwrap().base_run, 1);
        let mean = &r.repeats.unwrap().figures["match_frame_mean_ms"];
        assert!((mean.median - 0.20).abs() < 1e-12);
    }

    #[test]
    fn a_run_that_lacks_a_figure_is_recorded_as_such_and_left_out_of_its_spread() {
        let mut a = run(0.1, 0.2, 1000);
        a.clients.response_rate_hz = Some(128.0);
        let b = run(0.1, 0.2, 1000);
        let mut c = run(0.1, 0.2, 1000);
        c.clients.response_rate_hz = Some(126.0);
        let r = combine(vec![a, b, c]);
        let rate = &r.repeats.unwrap().figures["response_rate_hz"];
        assert_eq!(rate.runs, [Some(128.0), None, Some(126.0)]);
        assert_eq!((rate.min, rate.median, rate.max), (126.0, 127.0, 128.0));
    }

    #[test]
    fn the_summary_gives_min_median_max_per_figure() {
        let r = combine(vec![
            run(0.1, 0.2, 1000),
            run(0.2, 0.3, 1000),
            run(0.3, 0.4, 1000),
        ]);
        let text = summary(r.repeats.as_ref().unwrap());
        assert!(
            text.starts_with("  repeats       3 runs; the figures above are run 2's"),
            "{text}"
        );
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("match frame mean"))
            .unwrap();
        assert!(
            line.contains("0.100 /    0.200 /    0.300  (-50.0% / +50.0%)"),
            "{line}"
        );
    }
}
