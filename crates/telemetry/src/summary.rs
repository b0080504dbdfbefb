//! Short human summaries of a server's report: what `serve` prints when it stops, and the
//! lines `bench` and `report` share with it.

use std::fmt::Write;

use crate::report::{Percentiles, ServerReport};
use crate::Category;

/// Milliseconds to three places, or "n/a".
pub fn ms(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.3} ms"))
}

/// A share as a whole percentage, or "n/a".
pub fn pct(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{:.0}%", v * 100.0))
}

/// One line of frame-time percentiles.
pub fn frame_line(out: &mut String, name: &str, p: &Option<Percentiles>) {
    match p {
        Some(p) => writeln!(
            out,
            "  {name:<13} p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms  mean {:.3} ms",
            p.p50, p.p99, p.max, p.mean
        ),
        None => writeln!(out, "  {name:<13} n/a (no ticks in the window)"),
    }
    .expect("writing to a String");
}

/// Ticks on time, late, skipped and hitches, and the lateness percentiles.
pub fn ticks_line(out: &mut String, r: &ServerReport) {
    let t = &r.ticks;
    let _ = writeln!(
        out,
        "  ticks         {}/{} on time, {} late, {} skipped, {} hitches",
        t.on_time, t.expected, t.late, t.skipped, t.hitches
    );
    let late = |p: &Option<Percentiles>| match p {
        Some(p) => format!(
            "p50 {} p99 {} max {}",
            ms(Some(p.p50)),
            ms(Some(p.p99)),
            ms(Some(p.max))
        ),
        None => "n/a".into(),
    };
    let _ = writeln!(
        out,
        "  lateness      wake-up {}; tick start {}",
        late(&r.wake_late_ms),
        late(&r.tick_start_late_ms)
    );
    behind_line(out, r);
}

/// The tick rate achieved and the lag, only when the server fell behind its schedule: a
/// server that kept it has nothing to say here.
pub fn behind_line(out: &mut String, r: &ServerReport) {
    let s = &r.schedule;
    if !s.fell_behind {
        return;
    }
    let rate = match s.achieved_tick_hz {
        Some(hz) => format!(
            "{hz:.1} ticks/s of {} ({:.0}%)",
            r.tick_hz,
            100.0 * hz / f64::from(r.tick_hz.max(1))
        ),
        None => format!("n/a ticks/s of {}", r.tick_hz),
    };
    let lag = match s.lag_ms {
        Some(ms) if ms >= 1000.0 => format!("{:.1} s", ms / 1000.0),
        Some(ms) => format!("{ms:.1} ms"),
        None => "n/a".into(),
    };
    let _ = writeln!(out, "  fell behind   {rate}, last tick {lag} late");
}

/// The cost per category and per phase of a match frame.
pub fn categories_line(out: &mut String, r: &ServerReport) {
    let mut parts: Vec<String> = Category::ALL
        .iter()
        .filter_map(|&c| r.categories_ms.get(c).map(|v| (c, v)))
        .map(|(c, v)| format!("{} {:.1} µs", c.name(), v * 1000.0))
        .collect();
    if parts.is_empty() {
        parts.push("n/a".into());
    }
    let _ = writeln!(out, "  categories    {}", parts.join(", "));
    let p = &r.phases_ms;
    let us = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{:.1} µs", v * 1000.0));
    let _ = writeln!(
        out,
        "  phases        receive {}, simulate {}, replicate {}, send {}",
        us(p.receive),
        us(p.simulate),
        us(p.replicate),
        us(p.send)
    );
}

/// Ticks over each budget (`[budgets]`, and the whole frame's), when the report has any.
pub fn budgets_line(out: &mut String, r: &ServerReport) {
    if r.budget_violations.is_empty() {
        return;
    }
    let parts: Vec<String> = (r.budget_violations.iter())
        .map(|(name, n)| match r.budgets_ms.get(name) {
            Some(ms) => format!("{name} {n} (budget {ms:.3} ms)"),
            None => format!("{name} {n}"),
        })
        .collect();
    let _ = writeln!(out, "  over budget   {} ticks", parts.join(", "));
}

/// The slowest frames' line (`server.slowest_frames`): how many, their range against the
/// mean frame, and the categories that cost them most above those categories' means (the
/// three largest, on average over the frames kept). Nothing without kept frames or a mean.
pub fn slowest_line(out: &mut String, r: &ServerReport) {
    let slow = &r.slowest_frames;
    let (Some(fastest), Some(slowest), Some(frame)) = (slow.last(), slow.first(), r.match_frame_ms)
    else {
        return;
    };
    let mut above: Vec<(&str, f64)> = Category::ALL
        .iter()
        .filter_map(|&c| {
            let kept: f64 = slow.iter().filter_map(|f| f.categories_ms.get(c)).sum();
            let excess = kept / slow.len() as f64 - r.categories_ms.get(c).unwrap_or(0.0);
            (excess >= 0.0005).then_some((c.name(), excess))
        })
        .collect();
    above.sort_by(|a, b| b.1.total_cmp(&a.1));
    let parts: Vec<String> = above
        .iter()
        .take(3)
        .map(|(name, ms)| format!("{name} +{ms:.3}"))
        .collect();
    let _ = writeln!(
        out,
        "  slowest {:<5} {:.3}–{:.3} ms against a mean of {:.3} ms; above their means: {} ms; {} started late",
        slow.len(),
        fastest.frame_ms,
        slowest.frame_ms,
        frame.mean,
        if parts.is_empty() { "none".to_string() } else { parts.join(", ") },
        slow.iter().filter(|f| f.late).count(),
    );
}

/// What `serve` prints when it stops.
pub fn server(r: &ServerReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "tickforge serve: {} match(es) of {} × {} at {} Hz, {:.1} s measured",
        r.matches,
        game_label(&r.game, &r.map),
        r.players_per_match,
        r.tick_hz,
        r.duration_s
    );
    frame_line(&mut out, "match frame", &r.match_frame_ms);
    slowest_line(&mut out, r);
    categories_line(&mut out, r);
    budgets_line(&mut out, r);
    ticks_line(&mut out, r);
    let _ = writeln!(
        out,
        "  games/core    {} projected; cpu {}",
        r.projected_games_per_core
            .map_or("n/a".into(), |g| format!("{g:.0}")),
        pct(r.cpu_util)
    );
    out
}

/// The game and its map when it has one: `shooter on arena`, `ctf`. A report without a
/// game was written before the runtime hosted more than the shooter, so it is the
/// shooter's.
pub fn game_label(game: &str, map: &str) -> String {
    let game = if game.is_empty() { "shooter" } else { game };
    if map.is_empty() {
        game.to_string()
    } else {
        format!("{game} on {map}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowest_frames_line_names_what_cost_them_above_its_mean() {
        use crate::report::{CategoryMs, SlowFrame};
        let mut r = ServerReport {
            match_frame_ms: Some(Percentiles {
                p50: 16.7,
                p90: 18.0,
                p99: 22.9,
                max: 25.1,
                mean: 17.0,
            }),
            categories_ms: CategoryMs {
                replication: Some(10.3),
                network: Some(5.7),
                physics: Some(0.3),
                fow: Some(0.4),
                ..CategoryMs::default()
            },
            ..ServerReport::default()
        };
        // Two kept: replication 3 and 1 ms above its mean, network 0.5 above and 0.5 under,
        // physics 0.2 above both times, fog under; the second started late.
        let frame = |ms: f64, replication: f64, network: f64, late: bool| SlowFrame {
            frame_ms: ms,
            late,
            categories_ms: CategoryMs {
                replication: Some(replication),
                network: Some(network),
                physics: Some(0.5),
                fow: Some(0.1),
                ..CategoryMs::default()
            },
            ..SlowFrame::default()
        };
        r.slowest_frames = vec![frame(25.1, 13.3, 6.2, false), frame(21.2, 11.3, 5.2, true)];
        let mut text = String::new();
        slowest_line(&mut text, &r);
        assert!(
            text.contains(
                "  slowest 2     21.200–25.100 ms against a mean of 17.000 ms; above their \
                 means: replication +2.000, physics +0.200 ms; 1 started late\n"
            ),
            "{text}"
        );
        assert!(server(&r).contains(&text), "serve's summary has it too");
        r.slowest_frames.clear();
        let mut none = String::new();
        slowest_line(&mut none, &r);
        assert_eq!(none, "", "none kept, no line");
    }

    #[test]
    fn a_server_that_fell_behind_says_so_with_its_rate_and_lag() {
        let mut r = ServerReport {
            tick_hz: 30,
            ..ServerReport::default()
        };
        r.schedule = crate::report::Schedule {
            achieved_tick_hz: Some(15.2),
            lag_ms: Some(74_300.0),
            fell_behind: true,
        };
        let mut out = String::new();
        behind_line(&mut out, &r);
        assert_eq!(
            out,
            "  fell behind   15.2 ticks/s of 30 (51%), last tick 74.3 s late\n"
        );
        let mut ticks = String::new();
        ticks_line(&mut ticks, &r);
        assert!(ticks.ends_with(&out), "{ticks}");
    }

    #[test]
    fn a_server_on_schedule_prints_no_behind_line() {
        let mut r = ServerReport {
            tick_hz: 128,
            ..ServerReport::default()
        };
        r.schedule = crate::report::Schedule {
            achieved_tick_hz: Some(128.0),
            lag_ms: Some(0.3),
            fell_behind: false,
        };
        let mut out = String::new();
        ticks_line(&mut out, &r);
        assert!(!out.contains("behind"), "{out}");
        assert_eq!(out.lines().count(), 2, "the ticks and lateness lines only");
    }

    #[test]
    fn the_budget_line_names_each_category_its_ticks_and_budget_and_only_when_any() {
        let mut r = ServerReport::default();
        let mut out = String::new();
        budgets_line(&mut out, &r);
        assert_eq!(out, "", "no budget, no line");
        r.budgets_ms.insert("frame".into(), 0.1171875);
        r.budgets_ms.insert("gameplay".into(), 0.05);
        r.budget_violations.insert("frame".into(), 3);
        r.budget_violations.insert("gameplay".into(), 12);
        budgets_line(&mut out, &r);
        assert_eq!(
            out,
            "  over budget   frame 3 (budget 0.117 ms), gameplay 12 (budget 0.050 ms) ticks\n"
        );
    }
}
