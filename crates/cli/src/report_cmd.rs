//! `tickforge report FILE`: a saved bench report again, in words, its games-per-core
//! curve as the VALORANT chart (`--svg`), and the whole report as one HTML page (`--html`).
//! (`tickforge compare A B` is [`crate::compare`].)

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use tickforge_telemetry::report::{Report, Sweep};

/// Flags of `report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A report written by `bench --json`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Draw the sweep (`bench --sweep`) as an SVG chart: match frame time against matches
    /// on one core, with the budget, as in VALORANT's article.
    #[arg(long, value_name = "OUT")]
    pub svg: Option<PathBuf>,
    /// Write the report as one self-contained HTML page (charts, verdicts, the raw JSON)
    /// that opens offline.
    #[arg(long, value_name = "OUT")]
    pub html: Option<PathBuf>,
}

/// Reads a report written by `bench --json`.
pub(crate) fn load(path: &Path) -> Result<Report> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{}: not a tickforge bench report", path.display()))
}

pub fn run(args: ReportArgs) -> Result<()> {
    let report = load(&args.file)?;
    print!("{}", crate::summary::bench(&report));
    if let Some(repeats) = &report.repeats {
        print!("{}", crate::bench::repeat::summary(repeats));
    }
    if let Some(out) = &args.svg {
        let Some(sweep) = &report.sweep else {
            bail!(
                "{} holds no sweep: run `tickforge bench --scenario many-matches --sweep --json FILE`",
                args.file.display()
            );
        };
        std::fs::write(out, sweep_svg(sweep, report.budget_ms, report.tick_hz))
            .with_context(|| format!("writing {}", out.display()))?;
        println!("  chart         {}", out.display());
    }
    if let Some(out) = &args.html {
        crate::report_html::write(&report, out)?;
        println!("  wrote         {}", out.display());
    }
    Ok(())
}

/// The games-per-core curve as an SVG file: match frame p50 and p99 (ms) against
/// matches on the worker core, the budget as a dashed line, and each step's ticks on time
/// under its point (the HTML report's chart, standalone).
pub fn sweep_svg(sweep: &Sweep, budget_ms: f64, tick_hz: u32) -> String {
    crate::report_html::figures::sweep_chart(sweep, budget_ms, tick_hz).svg(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickforge_telemetry::report::{Percentiles, SweepStep};

    fn step(matches: u32, p50: f64, p99: f64, saturated: bool) -> SweepStep {
        SweepStep {
            matches,
            match_frame_ms: Some(Percentiles {
                p50,
                p99,
                max: p99,
                mean: p50,
                p90: p99,
            }),
            on_time_rate: Some(0.998),
            bots_saturated: saturated,
            ..SweepStep::default()
        }
    }

    #[test]
    fn the_chart_has_a_point_per_step_and_series_and_rises_with_frame_time() {
        let sweep = Sweep {
            steps: vec![
                step(1, 0.2, 0.3, false),
                step(10, 0.12, 0.2, false),
                step(40, 0.11, 0.19, true),
            ],
            measured_games_per_core: Some(10),
            ..Sweep::default()
        };
        let svg = sweep_svg(&sweep, 0.117, 128);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<circle class=\"p50\"").count(), 3);
        assert_eq!(svg.matches("<circle class=\"p99\"").count(), 3);
        assert!(svg.contains("budget 0.117 ms"));
        assert!(svg.contains("10 games per core held"));
        assert!(svg.contains("99.80%*"), "the saturated step is marked");
        // SVG's y grows downward: the slower first step sits above (smaller y) the others.
        let ys: Vec<f64> = svg
            .lines()
            .filter(|l| l.starts_with("<circle class=\"p50\""))
            .map(|l| {
                let at = l.find("cy=\"").unwrap() + 4;
                l[at..].split('"').next().unwrap().parse().unwrap()
            })
            .collect();
        assert!(ys[0] < ys[1] && ys[1] < ys[2], "{ys:?}");
    }

    #[test]
    fn a_file_that_is_not_a_report_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("tickforge-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "{\"scenario\": 3}").unwrap();
        let err = format!("{:#}", load(&bad).unwrap_err());
        assert!(err.contains("not a tickforge bench report"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
