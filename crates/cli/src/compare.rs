//! `tickforge compare BEFORE AFTER`: each key figure of two bench reports, after ÷ before,
//! judged against the noise of the runs, and an exit code a team's CI can gate on.
//!
//! # The noise model
//!
//! A figure's value on each side is the median of its runs (`bench --repeat N`), or the one
//! value of a single run. The change is the ratio of the medians, after ÷ before. The band
//! it is judged against has two parts, and is the wider of them at each edge:
//!
//! - **The runs' own spread.** The upper edge is before's max ÷ its median times after's
//!   median ÷ its min, the lower edge before's min ÷ its median times after's median ÷ its
//!   max. A ratio beyond the upper edge is exactly "every after run is above every before
//!   run": the two ranges no longer overlap. With three runs a side that is Mann–Whitney's
//!   U = 0, which two sets of runs of one build give by chance once in 20 per figure and
//!   direction (one ordering of C(6, 3) = 20); with two a side, once in 6. Ranges and
//!   medians rather than means and deviations: a handful of runs gives no useful standard
//!   deviation, and one run slowed by a neighbour must not move the centre.
//! - **The tolerance** (`--tolerance`, 5% unless told): after ÷ before within
//!   `[1 − t, 1 + t]` is never a change. It is the whole band for single runs, and a floor
//!   under the runs' spread: three runs' range underestimates the spread, a figure that
//!   did not vary at all (100% of ticks on time in every run) would otherwise flag any
//!   change, and a table of many figures would flag one in a few same-build comparisons.
//!   `--tolerance 0` judges on the runs alone.
//!
//! What the runs' spread cannot see is the host changing between the two sets: runs taken
//! back to back share their conditions, so two sets of one build taken minutes apart on a
//! busy host differ by more than either set varies (on a 2-core machine shared with
//! compilers, the match frame mean of same-build sets of three moved by 8–15%). Gate on a
//! quiet host, or take before and after in turns, or set `--tolerance` to what two
//! same-build sets on that host give.
//!
//! A change beyond the band is "better" or "worse" by the figure's direction (lower is
//! better for frame times, response times, bytes and CPU; higher for games per core,
//! response rate, ticks on time and hit-registration agreement); a figure with no better
//! direction (the bots' own CPU) is only "changed". A figure either report lacks is "n/a"
//! and never gates. The telemetry categories (fog of war, replication, …) say where a
//! frame's change comes from; they gate only when `--fail-on` names them.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use clap::Args;
use serde_json::{json, Value};
use tickforge_telemetry::report::Report;

/// The exit code of a comparison that found a gating figure worse beyond the noise.
pub const REGRESSION_EXIT: i32 = 3;

/// Flags of `compare`.
#[derive(Args, Debug)]
#[command(after_help = "\
Exit status: 0 when no gating figure is worse beyond the noise; 3 when one is (a \
regression); 2 for bad flags or a file that is not a report.")]
pub struct CompareArgs {
    /// The report taken as the reference (`bench --json`, with `--repeat N` for its noise).
    #[arg(value_name = "BEFORE")]
    pub before: PathBuf,
    /// The report compared with it.
    #[arg(value_name = "AFTER")]
    pub after: PathBuf,
    /// The least change that counts, either way: the whole noise band for single runs,
    /// and a floor under the band of repeated runs. `5%`, `5` and `0` are read as percent.
    #[arg(long, value_name = "PCT", default_value = "5%", value_parser = parse_percent)]
    pub tolerance: f64,
    /// Gate on these figures only (keys as in `--json`, comma-separated; the telemetry
    /// categories, `category_fow_us` and the like, gate only when named here)
    /// [default: every figure above the categories but the bots' CPU].
    #[arg(long, value_name = "KEYS", value_delimiter = ',')]
    pub fail_on: Vec<String>,
    /// Write the comparison as JSON to FILE (`-`: to stdout, instead of the table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `5%`, `5` or `0.5` as a fraction (0.05, 0.05, 0.005), from 0 up to 100%.
fn parse_percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%');
    match number.parse::<f64>() {
        Ok(p) if (0.0..100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(format!(
            "{text:?}: a percentage from 0 up to 100, such as 5%"
        )),
    }
}

/// Which way a figure gets better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// Costs: frame times, response times, bytes, CPU.
    Lower,
    /// Capacity and quality: games per core, rates, ticks on time, agreement.
    Higher,
    /// Neither: a figure shown for context that never gates.
    Neither,
}

impl Better {
    fn name(self) -> &'static str {
        match self {
            Better::Lower => "lower",
            Better::Higher => "higher",
            Better::Neither => "neither",
        }
    }
}

/// One key figure: its stable key, its label, its direction, and how it is read off a
/// report.
pub struct Figure {
    /// The stable name in `repeats` and in `compare --json` (`match_frame_p99_ms`).
    pub key: &'static str,
    /// The label in tables.
    pub label: &'static str,
    /// Which way it gets better.
    pub better: Better,
    /// Whether it gates when `--fail-on` names no figures.
    pub gates: bool,
    /// Its value in one run's report; `None` where the run did not measure it.
    pub read: fn(&Report) -> Option<f64>,
}

/// The figure of one telemetry category's mean per match tick, in microseconds.
macro_rules! category {
    ($field:ident) => {
        Figure {
            key: concat!("category_", stringify!($field), "_us"),
            label: concat!("  ", stringify!($field), " (µs)"),
            better: Better::Lower,
            gates: false,
            read: |r| r.categories_ms.$field.map(|ms| 1e3 * ms),
        }
    };
}

/// The figures `compare` judges and `bench --repeat` spreads, in table order.
pub static FIGURES: [Figure; 26] = [
    Figure {
        key: "match_frame_p50_ms",
        label: "match frame p50 (ms)",
        better: Better::Lower,
        gates: true,
        read: |r| r.match_frame_ms.map(|p| p.p50),
    },
    Figure {
        key: "match_frame_p99_ms",
        label: "match frame p99 (ms)",
        better: Better::Lower,
        gates: true,
        read: |r| r.match_frame_ms.map(|p| p.p99),
    },
    Figure {
        key: "match_frame_mean_ms",
        label: "match frame mean (ms)",
        better: Better::Lower,
        gates: true,
        read: |r| r.match_frame_ms.map(|p| p.mean),
    },
    Figure {
        key: "games_per_core_projected",
        label: "games/core projected",
        better: Better::Higher,
        gates: true,
        read: |r| r.games_per_core.projected,
    },
    Figure {
        key: "games_per_core_measured",
        label: "games/core measured",
        better: Better::Higher,
        gates: true,
        read: |r| r.games_per_core.measured,
    },
    // Shares near 100% are judged by what they miss, not as ratios of themselves: 99.8%
    // falling to 95% is ×0.95, inside a 5% tolerance, but its late ticks grew 25-fold.
    // What a run may miss and still hold (0.5% of ticks late, 1% of shots disagreeing) is
    // the floor, so noise below it is no change.
    Figure {
        key: "ticks_on_time_pct",
        label: "ticks on time (%)",
        better: Better::Higher,
        gates: false,
        read: |r| {
            let t = &r.ticks;
            (t.expected > 0).then(|| 100.0 * t.on_time as f64 / t.expected as f64)
        },
    },
    Figure {
        key: "ticks_late_pct",
        label: "ticks late (%, ≥ 0.5)",
        better: Better::Lower,
        gates: true,
        read: |r| {
            let t = &r.ticks;
            (t.expected > 0).then(|| {
                let late = 100.0 * (1.0 - t.on_time as f64 / t.expected as f64);
                late.max(100.0 * (1.0 - crate::bench::checks::ON_TIME))
            })
        },
    },
    Figure {
        key: "frame_to_io_floor",
        label: "frame ÷ I/O floor",
        better: Better::Lower,
        gates: true,
        read: |r| r.frame_to_io_floor,
    },
    Figure {
        key: "response_rate_hz",
        label: "response rate (Hz)",
        better: Better::Higher,
        gates: true,
        read: |r| r.clients.response_rate_hz,
    },
    Figure {
        key: "response_p50_ms",
        label: "response p50 (ms)",
        better: Better::Lower,
        gates: true,
        read: |r| r.clients.response_time_ms.p50,
    },
    Figure {
        key: "response_p99_ms",
        label: "response p99 (ms)",
        better: Better::Lower,
        gates: true,
        read: |r| r.clients.response_time_ms.p99,
    },
    Figure {
        key: "down_bytes_per_s",
        label: "down B/s per client",
        better: Better::Lower,
        gates: true,
        read: |r| r.clients.down_bytes_per_s,
    },
    Figure {
        key: "hitreg_agree_pct",
        label: "hitreg agree (%)",
        better: Better::Higher,
        gates: false,
        read: |r| r.hitreg.agree_rate.map(|x| 100.0 * x),
    },
    Figure {
        key: "hitreg_disagree_pct",
        label: "hitreg disagree (%, ≥ 1)",
        better: Better::Lower,
        gates: true,
        read: |r| r.hitreg.agree_rate.map(|x| (100.0 * (1.0 - x)).max(1.0)),
    },
    Figure {
        key: "server_cpu_pct",
        label: "server cpu (%)",
        better: Better::Lower,
        gates: true,
        read: |r| r.server_cpu_util.map(|x| 100.0 * x),
    },
    // The load generator's cost: context for the rest, not the server's doing.
    Figure {
        key: "bots_cpu_pct",
        label: "bots cpu (%)",
        better: Better::Neither,
        gates: false,
        read: |r| r.bots_cpu_util.map(|x| 100.0 * x),
    },
    // Where a frame's change comes from (VALORANT's per-category lines): shown, and gating
    // only when `--fail-on` names them, since a few microseconds are noisier than the frame.
    category!(replication),
    category!(fow),
    category!(network),
    category!(animation),
    category!(gameplay),
    category!(movement),
    category!(equippable),
    category!(character),
    category!(physics),
    category!(other),
];

/// The figure whose key is `key`.
///
/// # Panics
///
/// When no figure has that key: keys are constants of this module.
pub fn figure(key: &str) -> &'static Figure {
    (FIGURES.iter().find(|f| f.key == key)).unwrap_or_else(|| panic!("no figure {key}"))
}

/// A figure on one side: the median of its runs, their range, and how many there were.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// The median of the runs, or the one run's value.
    pub median: f64,
    /// The least run.
    pub min: f64,
    /// The most.
    pub max: f64,
    /// Runs that measured the figure.
    pub runs: usize,
}

impl Sample {
    /// One run's value.
    pub fn single(value: f64) -> Sample {
        Sample {
            median: value,
            min: value,
            max: value,
            runs: 1,
        }
    }

    /// Figure `f` of `report`: from its `repeats` when it has them, else its one value.
    pub fn of(report: &Report, f: &Figure) -> Option<Sample> {
        match report.repeats.as_ref().and_then(|r| r.figures.get(f.key)) {
            Some(s) => Some(Sample {
                median: s.median,
                min: s.min,
                max: s.max,
                runs: s.runs.iter().flatten().count(),
            }),
            None => (f.read)(report).map(Sample::single),
        }
    }
}

/// What a figure did, after against before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Beyond the band, the good way.
    Better,
    /// Beyond the band, the bad way: a regression when the figure gates.
    Worse,
    /// Inside the band.
    WithinNoise,
    /// Beyond the band, for a figure with no better direction.
    Changed,
    /// A side lacks the figure, or before is 0 and after is not.
    NotAvailable,
    /// Measured before and not after (no sweep step held, no client connected): the
    /// worst change a figure can make, a regression when it gates.
    Lost,
}

impl Verdict {
    /// The word in tables and in `--json`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::WithinNoise => "within noise",
            Verdict::Changed => "changed",
            Verdict::NotAvailable => "n/a",
            Verdict::Lost => "lost",
        }
    }
}

/// The range of after ÷ before taken as noise, and what set it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Band {
    /// Ratios below this are a change down.
    pub lo: f64,
    /// Ratios above this are a change up.
    pub hi: f64,
    /// True when the runs' spread, not the tolerance, set an edge.
    pub from_repeats: bool,
}

/// One figure judged: the ratio of the medians, the band, and the verdict.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Judged {
    /// After ÷ before; `None` with a side missing or before 0 (and after not).
    pub ratio: Option<f64>,
    /// `None` where there is no ratio.
    pub band: Option<Band>,
    /// What the figure did.
    pub verdict: Verdict,
}

/// `num ÷ den` for the spread factors, where a zero median or extreme must not give NaN:
/// 0 ÷ 0 is no spread, x ÷ 0 an unbounded one.
fn factor(num: f64, den: f64) -> f64 {
    if den > 0.0 {
        num / den
    } else if num > 0.0 {
        f64::INFINITY
    } else {
        1.0
    }
}

/// Judges one figure (the module's noise model): `tolerance` is a fraction (0.05 for 5%).
pub fn judge(
    before: Option<Sample>,
    after: Option<Sample>,
    better: Better,
    tolerance: f64,
) -> Judged {
    let na = Judged {
        ratio: None,
        band: None,
        verdict: Verdict::NotAvailable,
    };
    let (b, a) = match (before, after) {
        (Some(b), Some(a)) => (b, a),
        (Some(_), None) if better != Better::Neither => {
            return Judged {
                verdict: Verdict::Lost,
                ..na
            }
        }
        _ => return na,
    };
    let ratio = if b.median > 0.0 {
        a.median / b.median
    } else if a.median == 0.0 {
        1.0
    } else {
        return na;
    };
    // Every after run above every before run ⇔ ratio > hi (and below ⇔ ratio < lo).
    let spread_hi = factor(b.max, b.median) * factor(a.median, a.min);
    let spread_lo = factor(b.min, b.median) / factor(a.max, a.median);
    let (tol_lo, tol_hi) = (1.0 - tolerance, 1.0 + tolerance);
    let repeated = b.runs > 1 || a.runs > 1;
    let band = Band {
        lo: if repeated {
            spread_lo.min(tol_lo)
        } else {
            tol_lo
        },
        hi: if repeated {
            spread_hi.max(tol_hi)
        } else {
            tol_hi
        },
        from_repeats: repeated && (spread_lo < tol_lo || spread_hi > tol_hi),
    };
    let up = ratio > band.hi;
    let down = ratio < band.lo;
    let verdict = match (better, up, down) {
        (_, false, false) => Verdict::WithinNoise,
        (Better::Neither, ..) => Verdict::Changed,
        (Better::Lower, true, _) | (Better::Higher, _, true) => Verdict::Worse,
        _ => Verdict::Better,
    };
    Judged {
        ratio: Some(ratio),
        band: Some(band),
        verdict,
    }
}

/// One row of a comparison.
struct Row {
    figure: &'static Figure,
    before: Option<Sample>,
    after: Option<Sample>,
    judged: Judged,
    gates: bool,
}

/// Two reports compared, figure by figure.
struct Comparison {
    rows: Vec<Row>,
    tolerance: f64,
}

impl Comparison {
    /// `gate`: the keys that gate; empty for the figures that gate by default.
    fn new(before: &Report, after: &Report, tolerance: f64, gate: &[String]) -> Comparison {
        let rows = FIGURES
            .iter()
            .map(|f| {
                let (b, a) = (Sample::of(before, f), Sample::of(after, f));
                Row {
                    figure: f,
                    before: b,
                    after: a,
                    judged: judge(b, a, f.better, tolerance),
                    gates: if gate.is_empty() {
                        f.gates
                    } else {
                        f.better != Better::Neither && gate.iter().any(|k| k == f.key)
                    },
                }
            })
            .collect();
        Comparison { rows, tolerance }
    }

    /// The gating rows that got worse beyond the noise.
    fn regressions(&self) -> impl Iterator<Item = &Row> {
        (self.rows.iter())
            .filter(|r| r.gates && matches!(r.judged.verdict, Verdict::Worse | Verdict::Lost))
    }
}

/// The keys `--fail-on` takes, or an error naming the ones it does not.
fn check_gate(keys: &[String]) -> Result<()> {
    for key in keys {
        match FIGURES.iter().find(|f| f.key == key) {
            Some(f) if f.better == Better::Neither => {
                bail!("--fail-on {key}: a figure with no better direction never gates")
            }
            Some(_) => {}
            None => bail!(
                "--fail-on {key}: no such figure; the figures are {}",
                FIGURES
                    .iter()
                    .filter(|f| f.better != Better::Neither)
                    .map(|f| f.key)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
    Ok(())
}

/// Runs `compare`: prints the table (or the JSON), and ends the process with
/// [`REGRESSION_EXIT`] when a gating figure got worse beyond the noise.
pub fn run(args: CompareArgs) -> Result<()> {
    check_gate(&args.fail_on)?;
    let load = crate::report_cmd::load;
    let (before, after) = (load(&args.before)?, load(&args.after)?);
    let c = Comparison::new(&before, &after, args.tolerance, &args.fail_on);
    let to_stdout = args.json.as_deref() == Some(Path::new("-"));
    if let Some(path) = args.json.as_deref().filter(|_| !to_stdout) {
        let text = serde_json::to_string_pretty(&to_json(&c, &args, &before, &after))?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    if to_stdout {
        let text = serde_json::to_string_pretty(&to_json(&c, &args, &before, &after))?;
        writeln!(out, "{text}")?;
    } else {
        write!(out, "{}", table(&c, &before, &after))?;
    }
    out.flush()?;
    if c.regressions().next().is_some() {
        std::process::exit(REGRESSION_EXIT);
    }
    Ok(())
}

/// `smoke of shooter on arena (1 × 10), 3 runs`.
fn setup(r: &Report) -> String {
    let runs = r.repeats.as_ref().map_or(1, |x| x.runs);
    format!(
        "{} of {} ({} × {}), {} run{}",
        r.scenario,
        crate::summary::game_label(&r.game, &r.map),
        r.matches,
        r.players_per_match,
        runs,
        if runs == 1 { "" } else { "s" }
    )
}

/// A figure's value to four or so significant digits: `0.052`, `97.66`, `9350`.
pub fn value_text(x: f64) -> String {
    match x.abs() {
        a if a >= 1000.0 => format!("{x:.0}"),
        a if a >= 10.0 => format!("{x:.2}"),
        _ => format!("{x:.3}"),
    }
}

/// `0.052` for a single run, `0.052 [0.050–0.055]` for repeats.
fn cell(s: Option<Sample>) -> String {
    match s {
        None => "n/a".into(),
        Some(s) if s.runs > 1 => format!(
            "{} [{}–{}]",
            value_text(s.median),
            value_text(s.min),
            value_text(s.max)
        ),
        Some(s) => value_text(s.median),
    }
}

fn ratio_text(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "∞".into()
    }
}

/// The comparison as a table, then notes on setups that differ, then the verdict.
fn table(c: &Comparison, before: &Report, after: &Report) -> String {
    let mut out = format!(
        "tickforge compare: {} against {}\n",
        setup(after),
        setup(before)
    );
    let _ = writeln!(
        out,
        "  {:<24} {:>25} {:>25} {:>7}  {:<13} verdict",
        "", "before", "after", "ratio", "band"
    );
    // A figure neither run measured is left out of the table (never of the JSON).
    for row in c
        .rows
        .iter()
        .filter(|r| r.before.is_some() || r.after.is_some())
    {
        let j = &row.judged;
        let band = j.band.map_or("".into(), |b| {
            format!(
                "{}–{}{}",
                ratio_text(b.lo),
                ratio_text(b.hi),
                if b.from_repeats { "" } else { "*" }
            )
        });
        let verdict = match (j.verdict, row.gates) {
            (Verdict::Worse | Verdict::Better | Verdict::Lost, false) => {
                format!("{} (not gating)", j.verdict.name())
            }
            (v, _) => v.name().to_string(),
        };
        let _ = writeln!(
            out,
            "  {:<24} {:>25} {:>25} {:>7}  {band:<13} {verdict}",
            row.figure.label,
            cell(row.before),
            cell(row.after),
            j.ratio.map_or("n/a".into(), ratio_text),
        );
    }
    let _ = writeln!(
        out,
        "  band: after ÷ before taken as noise: the runs' spread, never inside ±{:.1}% \
         (* the tolerance alone)",
        100.0 * c.tolerance
    );
    let differ = (before.scenario != after.scenario)
        || (before.game != after.game)
        || (before.map != after.map)
        || (before.matches, before.players_per_match, before.tick_hz)
            != (after.matches, after.players_per_match, after.tick_hz);
    if differ {
        let _ = writeln!(
            out,
            "  note: the two ran different setups; the ratios compare more than the build"
        );
    }
    for (side, r) in [("BEFORE", before), ("AFTER", after)] {
        if r.bots_saturated == Some(true) {
            let _ = writeln!(
                out,
                "  note: the bots saturated in {side}: its figures speak of the bots"
            );
        }
    }
    let worse: Vec<String> = c
        .regressions()
        .map(|r| match r.judged.verdict {
            Verdict::Lost => format!("{} lost (measured before, not after)", r.figure.label),
            _ => format!(
                "{} ×{} (band {}–{})",
                r.figure.label,
                r.judged.ratio.map_or("n/a".into(), ratio_text),
                r.judged.band.map_or("n/a".into(), |b| ratio_text(b.lo)),
                r.judged.band.map_or("n/a".into(), |b| ratio_text(b.hi)),
            ),
        })
        .collect();
    if worse.is_empty() {
        let better = (c.rows.iter())
            .filter(|r| r.judged.verdict == Verdict::Better)
            .count();
        let _ = writeln!(
            out,
            "  verdict: no gating figure worse beyond the noise ({better} better)"
        );
    } else {
        let _ = writeln!(
            out,
            "  verdict: REGRESSION: {} worse beyond the noise: {}",
            worse.len(),
            worse.join(", ")
        );
    }
    out
}

fn sample_json(s: Option<Sample>) -> Value {
    s.map_or(
        Value::Null,
        |s| json!({ "median": s.median, "min": s.min, "max": s.max, "runs": s.runs }),
    )
}

/// JSON numbers cannot be infinite: an unbounded band edge is `null`.
fn finite(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

/// The comparison for CI: every figure with both sides, ratio, band and verdict.
fn to_json(c: &Comparison, args: &CompareArgs, before: &Report, after: &Report) -> Value {
    let figures: Vec<Value> = (c.rows.iter())
        .map(|r| {
            let j = &r.judged;
            json!({
                "key": r.figure.key,
                "label": r.figure.label,
                "better": r.figure.better.name(),
                "before": sample_json(r.before),
                "after": sample_json(r.after),
                "ratio": j.ratio.map_or(Value::Null, finite),
                "band": j.band.map_or(Value::Null, |b| json!({
                    "lo": finite(b.lo),
                    "hi": finite(b.hi),
                    "from": if b.from_repeats { "repeats" } else { "tolerance" },
                })),
                "verdict": j.verdict.name(),
                "gates": r.gates,
            })
        })
        .collect();
    let regressions: Vec<&str> = c.regressions().map(|r| r.figure.key).collect();
    json!({
        "before": { "file": args.before.display().to_string(), "setup": setup(before) },
        "after": { "file": args.after.display().to_string(), "setup": setup(after) },
        "tolerance": c.tolerance,
        "figures": figures,
        "regressions": regressions,
        "regression": !regressions.is_empty(),
        "exit_code": if regressions.is_empty() { 0 } else { REGRESSION_EXIT },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickforge_telemetry::report::{Percentiles, Repeats, Spread};

    fn runs(values: &[f64]) -> Option<Sample> {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Sample {
            median,
            min: v[0],
            max: v[n - 1],
            runs: n,
        })
    }

    const FIVE: f64 = 0.05;

    #[test]
    fn single_runs_are_judged_on_the_tolerance_alone_and_by_direction() {
        let one = |x| Some(Sample::single(x));
        let j = judge(one(1.0), one(1.04), Better::Lower, FIVE);
        assert_eq!(j.verdict, Verdict::WithinNoise);
        let band = j.band.unwrap();
        assert!((band.lo - 0.95).abs() < 1e-12 && (band.hi - 1.05).abs() < 1e-12);
        assert!(!band.from_repeats);
        assert_eq!(
            judge(one(1.0), one(1.06), Better::Lower, FIVE).verdict,
            Verdict::Worse
        );
        assert_eq!(
            judge(one(1.0), one(1.06), Better::Higher, FIVE).verdict,
            Verdict::Better
        );
        assert_eq!(
            judge(one(1.0), one(0.94), Better::Lower, FIVE).verdict,
            Verdict::Better
        );
        assert_eq!(
            judge(one(1.0), one(0.94), Better::Higher, FIVE).verdict,
            Verdict::Worse
        );
        assert_eq!(
            judge(one(1.0), one(1.5), Better::Neither, FIVE).verdict,
            Verdict::Changed
        );
        // A tighter tolerance sees what a looser one calls noise.
        assert_eq!(
            judge(one(1.0), one(1.04), Better::Lower, 0.02).verdict,
            Verdict::Worse
        );
        assert!(
            (judge(one(2.0), one(1.0), Better::Lower, FIVE)
                .ratio
                .unwrap()
                - 0.5)
                .abs()
                < 1e-12
        );
    }

    #[test]
    fn overlapping_runs_are_noise_and_runs_apart_are_a_change() {
        // Before 0.9–1.1, after 1.05–1.25: ranges overlap, the medians 15% apart.
        let before = runs(&[0.9, 1.0, 1.1]);
        let overlap = judge(before, runs(&[1.05, 1.15, 1.25]), Better::Lower, FIVE);
        assert!((overlap.ratio.unwrap() - 1.15).abs() < 1e-12);
        assert_eq!(overlap.verdict, Verdict::WithinNoise);
        let band = overlap.band.unwrap();
        assert!(band.from_repeats);
        // hi = (1.1 / 1.0) × (1.15 / 1.05): the ratio at which every after run clears
        // every before run.
        assert!((band.hi - 1.1 * 1.15 / 1.05).abs() < 1e-12, "{band:?}");
        // The same 15% with every after run above every before run: a regression.
        let apart = judge(before, runs(&[1.12, 1.15, 1.18]), Better::Lower, FIVE);
        assert_eq!(apart.verdict, Verdict::Worse);
        assert_eq!(
            judge(before, runs(&[1.12, 1.15, 1.18]), Better::Higher, FIVE).verdict,
            Verdict::Better
        );
        // And all below: better for a cost.
        assert_eq!(
            judge(before, runs(&[0.80, 0.82, 0.85]), Better::Lower, FIVE).verdict,
            Verdict::Better
        );
    }

    #[test]
    fn the_tolerance_is_a_floor_under_runs_that_did_not_vary() {
        // 100% of ticks on time in every run: no spread; 99% is inside the 5% floor.
        let before = runs(&[100.0, 100.0, 100.0]);
        let j = judge(before, runs(&[99.0, 99.0, 99.0]), Better::Higher, FIVE);
        assert_eq!(j.verdict, Verdict::WithinNoise);
        assert!(
            !j.band.unwrap().from_repeats,
            "the tolerance set both edges"
        );
        // With the floor off the runs alone decide.
        let j = judge(before, runs(&[99.0, 99.0, 99.0]), Better::Higher, 0.0);
        assert_eq!(j.verdict, Verdict::Worse);
    }

    #[test]
    fn one_side_repeated_judges_the_single_run_against_the_others_range() {
        let before = runs(&[0.9, 1.0, 1.2]);
        let one = |x| Some(Sample::single(x));
        assert_eq!(
            judge(before, one(1.19), Better::Lower, 0.0).verdict,
            Verdict::WithinNoise
        );
        assert_eq!(
            judge(before, one(1.21), Better::Lower, 0.0).verdict,
            Verdict::Worse
        );
        assert_eq!(
            judge(one(1.0), runs(&[1.1, 1.2, 1.3]), Better::Lower, 0.0).verdict,
            Verdict::Worse
        );
        assert_eq!(
            judge(one(1.2), runs(&[1.1, 1.2, 1.3]), Better::Lower, 0.0).verdict,
            Verdict::WithinNoise
        );
    }

    #[test]
    fn a_missing_side_or_a_zero_before_is_n_a_and_zeros_never_give_nan() {
        let one = |x| Some(Sample::single(x));
        for j in [
            judge(None, one(1.0), Better::Lower, FIVE),
            judge(one(1.0), None, Better::Neither, FIVE),
            judge(one(0.0), one(1.0), Better::Lower, FIVE),
        ] {
            assert_eq!(j.verdict, Verdict::NotAvailable);
            assert_eq!((j.ratio, j.band), (None, None));
        }
        // Measured before and not after (no sweep step held): lost, whichever way is better.
        for better in [Better::Lower, Better::Higher] {
            let j = judge(one(1.0), None, better, FIVE);
            assert_eq!(j.verdict, Verdict::Lost);
            assert_eq!((j.ratio, j.band), (None, None));
        }
        assert_eq!(
            judge(one(0.0), one(0.0), Better::Lower, FIVE).verdict,
            Verdict::WithinNoise
        );
        // After's runs include a zero: its median ÷ min is unbounded, so no regression.
        let j = judge(runs(&[1.0, 1.0]), runs(&[0.0, 4.0]), Better::Lower, 0.0);
        assert_eq!(j.verdict, Verdict::WithinNoise);
        assert!(j.band.unwrap().hi.is_infinite());
        // Everything at zero after a nonzero before: down, beyond any noise.
        let j = judge(runs(&[1.0, 1.0]), runs(&[0.0, 0.0]), Better::Higher, FIVE);
        assert_eq!(j.verdict, Verdict::Worse);
        assert!(!j.band.unwrap().lo.is_nan());
    }

    fn report(p99s: &[f64]) -> Report {
        let mut r = Report {
            scenario: "smoke".into(),
            game: "shooter".into(),
            map: "arena".into(),
            matches: 1,
            players_per_match: 10,
            match_frame_ms: Some(Percentiles {
                p99: p99s[0],
                ..Percentiles::default()
            }),
            ..Report::default()
        };
        if p99s.len() > 1 {
            let mut v = p99s.to_vec();
            let spread = Spread {
                runs: v.iter().map(|&x| Some(x)).collect(),
                median: runs(&v).unwrap().median,
                min: {
                    v.sort_by(f64::total_cmp);
                    v[0]
                },
                max: v[v.len() - 1],
            };
            r.repeats = Some(Repeats {
                runs: p99s.len() as u32,
                base_run: 0,
                figures: [("match_frame_p99_ms".to_string(), spread)].into(),
                ..Repeats::default()
            });
        }
        r
    }

    #[test]
    fn a_report_with_repeats_is_read_by_its_medians_and_without_by_its_value() {
        let f = figure("match_frame_p99_ms");
        let s = Sample::of(&report(&[0.5, 0.3, 0.4]), f).unwrap();
        assert_eq!((s.median, s.min, s.max, s.runs), (0.4, 0.3, 0.5, 3));
        assert_eq!(Sample::of(&report(&[0.5]), f), Some(Sample::single(0.5)));
        assert_eq!(Sample::of(&report(&[0.5]), figure("response_p99_ms")), None);
    }

    #[test]
    fn only_the_gating_figures_make_a_regression() {
        let (before, mut after) = (report(&[0.30, 0.31, 0.32]), report(&[0.40, 0.41, 0.42]));
        after.clients.response_time_ms.p99 = Some(100.0);
        // A category gates only when named.
        after.categories_ms.fow = Some(0.02);
        let mut before = before;
        before.categories_ms.fow = Some(0.01);
        let all = Comparison::new(&before, &after, FIVE, &[]);
        let worse: Vec<&str> = all.regressions().map(|r| r.figure.key).collect();
        assert_eq!(worse, ["match_frame_p99_ms"]);
        let other = Comparison::new(&before, &after, FIVE, &["response_p99_ms".into()]);
        assert_eq!(other.regressions().count(), 0);
        let text = table(&other, &before, &after);
        assert!(text.contains("worse (not gating)"), "{text}");
        assert!(text.contains("verdict: no gating figure worse"), "{text}");
        let text = table(&all, &before, &after);
        let row = text
            .lines()
            .find(|l| l.contains("match frame p99"))
            .unwrap();
        assert!(
            row.contains("0.310 [0.300–0.320]") && row.ends_with(" worse"),
            "{row}"
        );
        assert!(
            text.contains(
                "verdict: REGRESSION: 1 worse beyond the noise: match frame p99 (ms) ×1.323"
            ),
            "{text}"
        );
        // A figure only one side has is n/a, never a regression; one neither has is not
        // shown.
        let row = text.lines().find(|l| l.contains("response p99")).unwrap();
        assert!(row.trim_end().ends_with("n/a"), "{row}");
        assert!(!text.contains("games/core measured"), "{text}");
        let row = text.lines().find(|l| l.contains("fow (µs)")).unwrap();
        assert!(row.ends_with("worse (not gating)"), "{row}");
        let fow = Comparison::new(&before, &after, FIVE, &["category_fow_us".into()]);
        let worse: Vec<&str> = fow.regressions().map(|r| r.figure.key).collect();
        assert_eq!(worse, ["category_fow_us"]);
        // A gating figure measured before and not after is a regression.
        let (mut held, mut none) = (before.clone(), before.clone());
        held.games_per_core.measured = Some(60.0);
        none.games_per_core.measured = None;
        let lost = Comparison::new(&held, &none, FIVE, &[]);
        let worse: Vec<&str> = lost.regressions().map(|r| r.figure.key).collect();
        assert_eq!(worse, ["games_per_core_measured"]);
        assert!(table(&lost, &held, &none).contains("games/core measured lost"));
    }

    #[test]
    fn fail_on_takes_the_directional_keys_only() {
        assert!(check_gate(&[
            "match_frame_p99_ms".into(),
            "ticks_on_time_pct".into(),
            "category_replication_us".into()
        ])
        .is_ok());
        let err = check_gate(&["frame_p99".into()]).unwrap_err().to_string();
        assert!(
            err.contains("no such figure") && err.contains("match_frame_p99_ms"),
            "{err}"
        );
        assert!(!err.contains("bots_cpu_pct"), "{err}");
        assert!(check_gate(&["bots_cpu_pct".into()]).is_err());
    }

    #[test]
    fn tolerances_read_as_percent() {
        assert_eq!(parse_percent("5%"), Ok(0.05));
        assert_eq!(parse_percent("5"), Ok(0.05));
        assert_eq!(parse_percent("0"), Ok(0.0));
        assert!(parse_percent("100%").is_err());
        assert!(parse_percent("-1").is_err());
        assert!(parse_percent("five").is_err());
    }

    #[test]
    fn every_figure_has_a_distinct_key() {
        let mut keys: Vec<&str> = FIGURES.iter().map(|f| f.key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), FIGURES.len());
    }

    #[test]
    fn shares_near_all_are_judged_by_what_they_miss_above_what_may_be_missed() {
        let at = |on_time: u64, agree: f64| {
            let mut r = Report::default();
            r.ticks.expected = 10_000;
            r.ticks.on_time = on_time;
            r.hitreg.agree_rate = Some(agree);
            r
        };
        let verdict = |key: &str, b: &Report, a: &Report| {
            let f = figure(key);
            let one = |r: &Report| (f.read)(r).map(Sample::single);
            judge(one(b), one(a), f.better, FIVE).verdict
        };
        // 99.8% → 95% on time: ×0.95 as a share, ×10 in late ticks above the 0.5% floor.
        let (good, bad) = (at(9_980, 0.998), at(9_500, 0.95));
        assert_eq!(
            verdict("ticks_on_time_pct", &good, &bad),
            Verdict::WithinNoise
        );
        assert_eq!(verdict("ticks_late_pct", &good, &bad), Verdict::Worse);
        assert_eq!(verdict("hitreg_disagree_pct", &good, &bad), Verdict::Worse);
        // Below what a run may miss and still hold, a doubling is no change.
        let (a, b) = (at(9_990, 0.999), at(9_980, 0.995));
        assert_eq!(verdict("ticks_late_pct", &a, &b), Verdict::WithinNoise);
        assert_eq!(verdict("hitreg_disagree_pct", &a, &b), Verdict::WithinNoise);
        assert!(figure("ticks_late_pct").gates && !figure("ticks_on_time_pct").gates);
    }
}
