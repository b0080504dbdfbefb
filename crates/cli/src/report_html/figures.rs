//! The report's charts, each built from its figures alone, or the reason there is none:
//! a figure the run did not measure is said to be missing, never drawn as an empty chart.

use tickforge_telemetry::report::{CategoryMs, Percentiles, Report, Sweep, SweepStep};
use tickforge_telemetry::{Category, Phase};

use super::chart::{Band, Bar, BarChart, LineChart, Point, Rule, Segment, Series, XLabel};

/// A chart, or why the run has none.
pub enum Figure {
    /// An inline `<svg>`.
    Chart(String),
    /// What the run lacks, for a person.
    Missing(String),
}

const P50: &str = "#1f5fbf";
const P99: &str = "#e08a00";
const MAX: &str = "#8a8a8a";
const BUDGET: &str = "#c00";
const LATE: &str = "#f0a000";
const HITCH: &str = "#d00000";

/// Colours of the categories, in [`Category::ALL`]'s order, and of the phases.
const CATEGORY_COLOURS: [&str; Category::COUNT] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];
const PHASE_COLOURS: [&str; Phase::COUNT] = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759"];

fn ms3(v: f64) -> String {
    format!("{v:.3} ms")
}

/// The match frame second by second: p50, p99 and max with the budget, seconds with late
/// ticks shaded, seconds with hitches shaded red.
pub fn frame_time(r: &Report) -> Figure {
    let seconds = &r.server.frame_seconds;
    if seconds.is_empty() {
        return Figure::Missing(
            "not measured in this run (the report has no per-second frame times)".into(),
        );
    }
    let mut c = LineChart::new(
        "frame-time",
        format!(
            "match frame, second by second over the measured window, {} Hz",
            r.tick_hz
        ),
        "seconds into the measured window",
        "match frame (ms)",
    );
    (c.width, c.height) = (1180.0, 400.0);
    let dots = seconds.len() <= 60;
    let tip = |s: &tickforge_telemetry::report::FrameSecond| {
        format!(
            "second {}: {} frames, p50 {}, p99 {}, max {}, {} late, {} hitches",
            s.s,
            s.frames,
            ms3(s.p50),
            ms3(s.p99),
            ms3(s.max),
            s.late,
            s.hitches
        )
    };
    for (name, colour, get) in [
        (
            "max",
            MAX,
            (|s| s.max) as fn(&tickforge_telemetry::report::FrameSecond) -> f64,
        ),
        ("p99", P99, |s| s.p99),
        ("p50", P50, |s| s.p50),
    ] {
        c.series.push(Series {
            name: name.into(),
            colour,
            points: seconds
                .iter()
                .map(|s| Point {
                    x: f64::from(s.s) + 0.5,
                    y: get(s),
                    tip: tip(s),
                })
                .collect(),
            dots,
        });
    }
    c.rules.push(Rule {
        y: r.budget_ms,
        label: format!("budget {:.3} ms", r.budget_ms),
        colour: BUDGET,
    });
    for s in seconds {
        let (x0, x1) = (f64::from(s.s), f64::from(s.s) + 1.0);
        if s.hitches > 0 {
            c.bands.push(Band {
                x0,
                x1,
                class: "hitch",
                colour: HITCH,
                tip: tip(s),
            });
        } else if s.late > 0 {
            c.bands.push(Band {
                x0,
                x1,
                class: "late",
                colour: LATE,
                tip: tip(s),
            });
        }
    }
    // A spike as tall as many p99s would flatten the rest: above twice the larger of the
    // highest p99 and the budget, values are drawn at the top and the note says so.
    let top = seconds.iter().map(|s| s.p99).fold(r.budget_ms, f64::max) * 2.0;
    let highest = seconds.iter().map(|s| s.max).fold(0.0, f64::max);
    let late: u32 = seconds.iter().map(|s| s.late).sum();
    let hitches: u32 = seconds.iter().map(|s| s.hitches).sum();
    let mut note = format!("shaded: {late} late ticks (orange), {hitches} hitches (red)");
    if highest > top {
        c.y_limit = Some(top);
        note.push_str(&format!(
            "; max clipped at the top, highest {}",
            ms3(highest)
        ));
    }
    c.note = Some(note);
    Figure::Chart(c.svg(false))
}

/// The segments of a stacked bar in microseconds: one for each part measured.
fn segments(parts: Vec<(&'static str, Option<f64>, &'static str)>) -> Vec<Segment> {
    parts
        .into_iter()
        .filter_map(|(n, v, colour)| {
            v.map(|ms| Segment {
                name: n.into(),
                value: ms * 1000.0,
                colour,
            })
        })
        .collect()
}

/// A category table's parts, in [`Category::ALL`]'s order with their colours.
fn category_parts(c: &CategoryMs) -> Vec<(&'static str, Option<f64>, &'static str)> {
    Category::ALL
        .iter()
        .map(|&k| (k.name(), c.get(k), CATEGORY_COLOURS[k.index()]))
        .collect()
}

/// The budget's line, in microseconds.
fn budget_rule(budget_ms: f64) -> Rule {
    Rule {
        y: budget_ms * 1000.0,
        label: format!("budget {:.1} µs", budget_ms * 1000.0),
        colour: BUDGET,
    }
}

/// A category table or the phase table as one stacked bar, in microseconds, with the
/// budget.
fn split(
    name: &str,
    title: &str,
    parts: Vec<(&'static str, Option<f64>, &'static str)>,
    budget_ms: f64,
) -> Figure {
    let segments = segments(parts);
    if segments.is_empty() {
        return Figure::Missing("not measured in this run (no match frame in the window)".into());
    }
    let mut c = BarChart::new(name, title.into(), "µs", 1);
    c.bars.push(Bar {
        label: "mean per match tick".into(),
        segments,
    });
    c.rule = Some(budget_rule(budget_ms));
    Figure::Chart(c.svg())
}

/// Mean microseconds per match tick by category, stacked, with the budget.
pub fn categories(r: &Report) -> Figure {
    split(
        "categories",
        "where the match frame goes, by category (VALORANT's)",
        category_parts(&r.categories_ms),
        r.budget_ms,
    )
}

/// The window's slowest match frames by category, each a stacked bar under the mean
/// frame's: a tail one stage makes shows as that stage's segment grown, a tail the host
/// makes as every segment grown at once.
pub fn slowest_frames(r: &Report) -> Figure {
    let slow = &r.server.slowest_frames;
    if slow.is_empty() {
        return Figure::Missing(
            "not measured in this run (the report keeps no slowest frames)".into(),
        );
    }
    let mut c = BarChart::new(
        "slowest-frames",
        format!(
            "the {} slowest match frames by category, under the mean frame",
            slow.len()
        ),
        "µs",
        1,
    );
    c.bars.push(Bar {
        label: "mean per match tick".into(),
        segments: segments(category_parts(&r.categories_ms)),
    });
    for f in slow {
        let late = if f.late { ", late" } else { "" };
        c.bars.push(Bar {
            label: format!("{:.2} s, match {}{late}", f.at_s, f.match_id),
            segments: segments(category_parts(&f.categories_ms)),
        });
    }
    c.rule = Some(budget_rule(r.budget_ms));
    Figure::Chart(c.svg())
}

/// Mean microseconds per match tick by phase, stacked, with the budget.
pub fn phases(r: &Report) -> Figure {
    let p = &r.phases_ms;
    let parts = [p.receive, p.simulate, p.replicate, p.send];
    let parts = Phase::ALL
        .iter()
        .map(|&ph| (ph.name(), parts[ph.index()], PHASE_COLOURS[ph.index()]))
        .collect();
    split(
        "phases",
        "the match frame by phase (Iris's receive, simulate, replicate, send)",
        parts,
        r.budget_ms,
    )
}

/// The sweep's frame time against its steps (VALORANT's chart against matches on one
/// core; against players in one match for `saturation`): p50 and p99, the budget (when
/// the steps add matches), and each step's ticks on time under it.
pub fn sweep_chart(sweep: &Sweep, budget_ms: f64, tick_hz: u32) -> LineChart {
    let by_players = sweep.by == "players";
    let count = |s: &SweepStep| f64::from(if by_players { s.players } else { s.matches });
    let steps: Vec<(&SweepStep, Percentiles)> = sweep
        .steps
        .iter()
        .filter_map(|s| s.match_frame_ms.map(|p| (s, p)))
        .collect();
    let (name, title, x_label) = if by_players {
        (
            "saturation-frame",
            format!("match frame against players in one match, {tick_hz} Hz"),
            "players in the match (ticks on time below)",
        )
    } else {
        (
            "sweep",
            format!(
                "match frame against matches on one core, {tick_hz} Hz: {}",
                sweep
                    .measured_games_per_core
                    .map_or("none held".to_string(), |g| format!(
                        "{g} games per core held"
                    ))
            ),
            "matches on the worker core (ticks on time below)",
        )
    };
    let mut c = LineChart::new(name, title, x_label, "match frame (ms)");
    c.x_log2 = by_players;
    let tip = |s: &SweepStep, p: &Percentiles| {
        format!(
            "{} × {}: p50 {}, p99 {}, on time {}",
            s.matches,
            s.players,
            ms3(p.p50),
            ms3(p.p99),
            s.on_time_rate
                .map_or("n/a".into(), |r| format!("{:.2}%", 100.0 * r))
        )
    };
    for (series, colour, get) in [
        ("p50", P50, (|p| p.p50) as fn(&Percentiles) -> f64),
        ("p99", P99, |p| p.p99),
    ] {
        c.series.push(Series {
            name: series.into(),
            colour,
            points: steps
                .iter()
                .map(|(s, p)| Point {
                    x: count(s),
                    y: get(p),
                    tip: tip(s, p),
                })
                .collect(),
            dots: true,
        });
    }
    // The budget per match tick: what 60 games on a core leave each; one match of many
    // players (saturation) has the whole tick instead, so it gets no line.
    if !by_players {
        c.rules.push(Rule {
            y: budget_ms,
            label: format!("budget {budget_ms:.3} ms"),
            colour: BUDGET,
        });
    }
    // Each step's count and ticks on time; a step the bots saturated is marked.
    for (s, _) in &steps {
        c.x_labels.push(XLabel {
            x: count(s),
            text: format!("{}", count(s)),
            sub: format!(
                "{}{}",
                s.on_time_rate
                    .map_or("n/a".to_string(), |r| format!("{:.2}%", 100.0 * r)),
                if s.bots_saturated { "*" } else { "" }
            ),
        });
    }
    if steps.iter().any(|(s, _)| s.bots_saturated) {
        c.note = Some("* the bots' core saturated".into());
    }
    c
}

/// VALORANT's chart: frame time against matches per core, from `bench --sweep`.
pub fn sweep(r: &Report) -> Figure {
    match &r.sweep {
        Some(s) if s.by != "players" && s.steps.iter().any(|s| s.match_frame_ms.is_some()) => {
            Figure::Chart(sweep_chart(s, r.budget_ms, r.tick_hz).svg(false))
        }
        _ => Figure::Missing(
            "not measured in this run: `tickforge bench --scenario many-matches --sweep` \
             measures it"
                .into(),
        ),
    }
}

/// The saturation run's steps, or why there are none.
fn saturation_steps(r: &Report) -> Result<&Sweep, Figure> {
    match &r.sweep {
        Some(s) if s.by == "players" && !s.steps.is_empty() => Ok(s),
        _ => Err(Figure::Missing(
            "not measured in this run: `tickforge bench --scenario saturation` measures it".into(),
        )),
    }
}

/// A log₂ axis of players labelled at each step (the steps double).
fn players_axis(c: &mut LineChart, sweep: &Sweep) {
    c.x_log2 = true;
    c.x_labels = sweep
        .steps
        .iter()
        .map(|s| XLabel {
            x: f64::from(s.players),
            text: s.players.to_string(),
            sub: String::new(),
        })
        .collect();
}

/// The Quake paper's response rate against players: snapshots a client receives per
/// second, with the tick rate it should reach.
pub fn saturation_rate(r: &Report) -> Figure {
    let sweep = match saturation_steps(r) {
        Ok(s) => s,
        Err(f) => return f,
    };
    let mut c = LineChart::new(
        "saturation-rate",
        "response rate at the clients against players (the Quake paper's)".into(),
        "players in the match",
        "snapshots per client per second",
    );
    players_axis(&mut c, sweep);
    c.series.push(Series {
        name: "response rate".into(),
        colour: P50,
        points: sweep
            .steps
            .iter()
            .filter_map(|s| {
                s.response_rate_hz.map(|hz| Point {
                    x: f64::from(s.players),
                    y: hz,
                    tip: format!("{} players: {hz:.1} snapshots/s", s.players),
                })
            })
            .collect(),
        dots: true,
    });
    if c.is_empty() {
        return Figure::Missing("not measured in this run (no step measured a rate)".into());
    }
    c.rules.push(Rule {
        y: f64::from(r.tick_hz),
        label: format!("tick rate {} Hz", r.tick_hz),
        colour: BUDGET,
    });
    Figure::Chart(c.svg(false))
}

/// The Quake paper's response time against players: p50, p99 and max at the clients.
pub fn saturation_time(r: &Report) -> Figure {
    let sweep = match saturation_steps(r) {
        Ok(s) => s,
        Err(f) => return f,
    };
    let mut c = LineChart::new(
        "saturation-time",
        "response time at the clients against players (the Quake paper's)".into(),
        "players in the match",
        "response time (ms)",
    );
    players_axis(&mut c, sweep);
    for (name, colour, get) in [
        (
            "max",
            MAX,
            (|s| s.response_time_ms.max) as fn(&SweepStep) -> Option<f64>,
        ),
        ("p99", P99, |s| s.response_time_ms.p99),
        ("p50", P50, |s| s.response_time_ms.p50),
    ] {
        c.series.push(Series {
            name: name.into(),
            colour,
            points: sweep
                .steps
                .iter()
                .filter_map(|s| {
                    get(s).map(|ms| Point {
                        x: f64::from(s.players),
                        y: ms,
                        tip: format!("{} players: {name} {}", s.players, ms3(ms)),
                    })
                })
                .collect(),
            dots: true,
        });
    }
    if c.is_empty() {
        return Figure::Missing("not measured in this run (no step measured a time)".into());
    }
    Figure::Chart(c.svg(false))
}

/// Bars of down and up per client, or why there are none.
fn down_up(name: &str, title: &str, unit: &str, down: Option<f64>, up: Option<f64>) -> Figure {
    let mut c = BarChart::new(name, title.into(), unit, 0);
    for (label, v, colour) in [
        ("down (to a client)", down, P50),
        ("up (from a client)", up, P99),
    ] {
        if let Some(v) = v {
            c.bars.push(Bar {
                label: label.into(),
                segments: vec![Segment {
                    name: label.into(),
                    value: v,
                    colour,
                }],
            });
        }
    }
    if c.is_empty() {
        return Figure::Missing("not measured in this run (no client measured it)".into());
    }
    Figure::Chart(c.svg())
}

/// UDP payload bytes per second per client, each way.
pub fn bandwidth(r: &Report) -> Figure {
    down_up(
        "bandwidth",
        "bandwidth per client (UDP payload)",
        "B/s",
        r.clients.down_bytes_per_s,
        r.clients.up_bytes_per_s,
    )
}

/// Datagrams per second per client, each way.
pub fn packets(r: &Report) -> Figure {
    down_up(
        "packets",
        "packets per client",
        "per s",
        r.clients.down_packets_per_s,
        r.clients.up_packets_per_s,
    )
}

/// Datagrams the server dropped, by reason, most first; reasons that dropped none are
/// left out.
pub fn drops(r: &Report) -> Figure {
    let d = &r.server.datagrams.dropped;
    let mut reasons: Vec<(&String, u64)> =
        d.iter().map(|(k, &n)| (k, n)).filter(|x| x.1 > 0).collect();
    if reasons.is_empty() {
        return Figure::Missing(format!(
            "no datagram dropped: 0 for each of the {} reasons counted",
            d.len()
        ));
    }
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut c = BarChart::new(
        "drops",
        format!(
            "datagrams the server dropped, by reason ({} in all)",
            r.server.datagrams.dropped_total()
        ),
        "",
        0,
    );
    for (reason, n) in reasons {
        c.bars.push(Bar {
            label: reason.clone(),
            segments: vec![Segment {
                name: reason.clone(),
                value: n as f64,
                colour: HITCH,
            }],
        });
    }
    Figure::Chart(c.svg())
}

/// Hit registration: the share of shots on which bot and server agreed, by the round trip
/// the bots' conditioner added (one run covers one).
pub fn hitreg(r: &Report) -> Figure {
    let h = &r.hitreg;
    if h.agree_rate_by_rtt.is_empty() || h.shots == 0 {
        return Figure::Missing(if r.game.is_empty() || r.game == "shooter" {
            "not measured in this run (no shot judged in the window)".into()
        } else {
            format!("not measured: {}'s bots do not shoot", r.game)
        });
    }
    let mut c = BarChart::new(
        "hitreg",
        format!(
            "hit registration: bot and server agree, by round trip ({} shots, ± {:.0} ms jitter)",
            h.shots, h.jitter_ms
        ),
        "%",
        2,
    );
    c.max = Some(100.0);
    for (rtt, rate) in &h.agree_rate_by_rtt {
        c.bars.push(Bar {
            label: format!("{rtt} ms round trip"),
            segments: vec![Segment {
                name: format!("agree at {rtt} ms"),
                value: 100.0 * rate,
                colour: "#2ca02c",
            }],
        });
    }
    Figure::Chart(c.svg())
}
