//! The verdicts at the top of the report: each key figure against the number DESIGN.md
//! measures it by ("Numbers that everything is measured against").

use tickforge_telemetry::report::Report;
use tickforge_telemetry::TARGET_GAMES_PER_CORE;

// The cards hold a run to the bench's own checks' numbers: one place says what holds.
use crate::bench::checks::{ON_TIME, RESPONSE_RATE_TOLERANCE};

/// Share of the tick rate a client must receive snapshots at: one snapshot a tick, less
/// the checks' tolerance.
const RESPONSE_RATE: f64 = 1.0 - RESPONSE_RATE_TOLERANCE;

/// What a card concludes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Within its bound.
    Pass,
    /// Outside it.
    Fail,
    /// Within it, but worth a look (hitches, saturated bots, drops).
    Warn,
    /// A figure with no bound, shown for reading.
    Info,
    /// The run did not measure it.
    NotMeasured,
}

impl Verdict {
    /// The card's CSS class and its word.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Warn => "warn",
            Verdict::Info => "info",
            Verdict::NotMeasured => "not measured",
        }
    }
}

/// One card: a figure, its verdict, and what it was held against.
#[derive(Clone, Debug)]
pub struct Card {
    pub name: &'static str,
    pub verdict: Verdict,
    pub value: String,
    pub detail: String,
}

fn card(name: &'static str, verdict: Verdict, value: String, detail: String) -> Card {
    Card {
        name,
        verdict,
        value,
        detail,
    }
}

fn missing(name: &'static str, detail: &str) -> Card {
    card(name, Verdict::NotMeasured, "n/a".into(), detail.into())
}

/// What the ticks card adds when the server fell behind its schedule: the tick rate it
/// achieved and how late its last tick started.
fn behind(r: &Report) -> String {
    let s = &r.schedule;
    match (s.fell_behind, s.achieved_tick_hz, s.lag_ms) {
        (true, Some(hz), Some(lag_ms)) => format!(
            "; fell behind: {hz:.1} ticks/s of {} Hz, last tick {:.1} s late",
            r.tick_hz,
            lag_ms / 1e3
        ),
        (true, ..) => "; fell behind".into(),
        _ => String::new(),
    }
}

/// Every card of `r`, in the order they show.
pub fn cards(r: &Report) -> Vec<Card> {
    let mut out = Vec::new();
    out.push(match r.match_frame_ms {
        Some(f) => card(
            "match frame",
            if f.mean <= r.budget_ms {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            format!("{:.3} ms mean", f.mean),
            format!(
                "budget {:.3} ms a match tick; p50 {:.3} p99 {:.3} max {:.3} ms",
                r.budget_ms, f.p50, f.p99, f.max
            ),
        ),
        None => missing("match frame", "no match tick in the window"),
    });
    let t = &r.ticks;
    out.push(if t.expected == 0 {
        missing("ticks on time", "no tick was due in the window")
    } else {
        let rate = t.on_time as f64 / t.expected as f64;
        card(
            "ticks on time",
            if rate >= ON_TIME && t.skipped == 0 {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            format!("{:.2}%", 100.0 * rate),
            format!(
                "at least {:.1}% and none skipped; {} of {}, {} late, {} skipped{}",
                100.0 * ON_TIME,
                t.on_time,
                t.expected,
                t.late,
                t.skipped,
                behind(r)
            ),
        )
    });
    out.push(card(
        "hitches",
        if t.hitches == 0 {
            Verdict::Pass
        } else {
            Verdict::Warn
        },
        t.hitches.to_string(),
        "ticks started over a tick late, or frames over twice the budget".into(),
    ));
    let g = &r.games_per_core;
    // A sweep the bots' core ended did not find the server's limit.
    let bots_ended = r.sweep.as_ref().is_some_and(|s| s.limited_by == "bots");
    out.push(match (g.measured, g.projected) {
        (Some(v), _) | (None, Some(v)) => card(
            "games per core",
            if v >= f64::from(TARGET_GAMES_PER_CORE) {
                Verdict::Pass
            } else if g.measured.is_some() && bots_ended {
                Verdict::Warn
            } else {
                Verdict::Fail
            },
            format!(
                "{v:.0} {}",
                if g.measured.is_some() {
                    "measured"
                } else {
                    "projected"
                }
            ),
            format!(
                "target {TARGET_GAMES_PER_CORE}; {}",
                if g.measured.is_some() && bots_ended {
                    "the most a core held before the bots' core saturated: not the server's limit"
                } else if g.measured.is_some() {
                    "the most matches a core held (sweep)"
                } else {
                    "0.9 × tick ÷ mean match frame (a sweep measures it)"
                }
            ),
        ),
        (None, None) => missing("games per core", "no match frame to project from"),
    });
    out.push(match r.clients.response_rate_hz {
        Some(hz) => {
            let want = RESPONSE_RATE * f64::from(r.tick_hz);
            card(
                "response rate",
                if hz >= want {
                    Verdict::Pass
                } else {
                    Verdict::Fail
                },
                format!("{hz:.1} Hz"),
                format!(
                    "at least {want:.1} Hz (a snapshot a tick); slowest client {}",
                    r.clients
                        .min_response_rate_hz
                        .map_or("n/a".into(), |m| format!("{m:.1} Hz"))
                ),
            )
        }
        None => missing("response rate", "no client measured it"),
    });
    out.push(match r.clients.response_time_ms.p99 {
        Some(p99) => card(
            "response time",
            Verdict::Info,
            format!("{p99:.2} ms p99"),
            format!(
                "input sent to the first snapshot showing it; p50 {}",
                r.clients
                    .response_time_ms
                    .p50
                    .map_or("n/a".into(), |v| format!("{v:.2} ms"))
            ),
        ),
        None => missing("response time", "no client measured it"),
    });
    out.push(match r.bots_saturated {
        Some(saturated) => card(
            "bots",
            if saturated {
                Verdict::Warn
            } else {
                Verdict::Pass
            },
            if saturated { "saturated" } else { "kept up" }.into(),
            if saturated {
                "the client figures speak of the bots, not the server".into()
            } else {
                format!(
                    "their core at {}",
                    r.bots_cpu_util
                        .map_or("n/a".into(), |u| format!("{:.0}%", 100.0 * u))
                )
            },
        ),
        None => missing("bots", "the report does not say"),
    });
    let d = &r.server.datagrams;
    let (dropped, expected) = (
        d.dropped_unexpected(),
        d.dropped_total() - d.dropped_unexpected(),
    );
    out.push(card(
        "datagrams dropped",
        match (r.flood.is_some(), dropped) {
            (true, _) => Verdict::Info,
            (false, 0) => Verdict::Pass,
            (false, _) => Verdict::Warn,
        },
        dropped.to_string(),
        match &r.flood {
            Some(f) => format!("a flood of {} hostile datagrams was sent", f.sent),
            None if expected > 0 => format!(
                "none expected without a flood; {expected} more were a disconnect's repeats"
            ),
            None => "none expected without a flood".into(),
        },
    ));
    if r.game.is_empty() || r.game == "shooter" {
        let h = &r.hitreg;
        out.push(match h.agree_rate {
            Some(rate) => card(
                "hit registration",
                Verdict::Info,
                format!("{:.2}% agree", 100.0 * rate),
                format!("{} shots judged at {:.0} ms round trip", h.shots, h.rtt_ms),
            ),
            None => missing("hit registration", "no shot judged in the window"),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickforge_telemetry::report::{Percentiles, Ticks};

    fn verdict(cards: &[Card], name: &str) -> Verdict {
        cards.iter().find(|c| c.name == name).unwrap().verdict
    }

    #[test]
    fn each_card_holds_its_figure_to_its_bound() {
        let mut r = Report {
            tick_hz: 128,
            budget_ms: 0.117,
            match_frame_ms: Some(Percentiles {
                mean: 0.1,
                ..Percentiles::default()
            }),
            ticks: Ticks {
                expected: 1000,
                on_time: 995,
                late: 5,
                skipped: 0,
                hitches: 0,
            },
            bots_saturated: Some(false),
            ..Report::default()
        };
        r.games_per_core.projected = Some(70.0);
        r.clients.response_rate_hz = Some(127.0);
        // A disconnect's repeats are what every well-behaved client sends.
        (r.server.datagrams.dropped).insert("disconnect_repeat".into(), 9);
        let c = cards(&r);
        for name in [
            "match frame",
            "ticks on time",
            "hitches",
            "games per core",
            "response rate",
            "bots",
            "datagrams dropped",
        ] {
            assert_eq!(verdict(&c, name), Verdict::Pass, "{name}");
        }
        assert_eq!(verdict(&c, "hit registration"), Verdict::NotMeasured);
        assert_eq!(verdict(&c, "response time"), Verdict::NotMeasured);

        r.match_frame_ms.as_mut().unwrap().mean = 0.12;
        r.ticks.on_time = 994;
        r.ticks.hitches = 1;
        r.games_per_core.measured = Some(50.0);
        r.clients.response_rate_hz = Some(121.0);
        r.bots_saturated = Some(true);
        r.server.datagrams.dropped.insert("short".into(), 3);
        let c = cards(&r);
        for name in [
            "match frame",
            "ticks on time",
            "games per core",
            "response rate",
        ] {
            assert_eq!(verdict(&c, name), Verdict::Fail, "{name}");
        }
        for name in ["hitches", "bots", "datagrams dropped"] {
            assert_eq!(verdict(&c, name), Verdict::Warn, "{name}");
        }
        assert!(c.iter().any(|c| c.value == "50 measured"));
        // A sweep that the bots ended says so instead of failing the server.
        r.sweep = Some(tickforge_telemetry::report::Sweep {
            limited_by: "bots".into(),
            ..Default::default()
        });
        assert_eq!(verdict(&cards(&r), "games per core"), Verdict::Warn);
        r.sweep = None;

        // A skipped tick fails the run whatever the rate; ctf has no hit registration.
        r.ticks.on_time = 1000;
        r.ticks.skipped = 1;
        r.game = "ctf".into();
        let c = cards(&r);
        assert_eq!(verdict(&c, "ticks on time"), Verdict::Fail);
        assert!(!c.iter().any(|c| c.name == "hit registration"));
        let ticks = |c: &[Card]| {
            c.iter()
                .find(|c| c.name == "ticks on time")
                .unwrap()
                .clone()
        };
        assert!(!ticks(&c).detail.contains("fell behind"));

        // A server that fell behind: its ticks fail, and the card says by how much.
        r.ticks = Ticks {
            expected: 1280,
            late: 640,
            skipped: 640,
            ..Ticks::default()
        };
        r.schedule = tickforge_telemetry::report::Schedule::new(128, &r.ticks, Some(5_000.0));
        let t = ticks(&cards(&r));
        assert_eq!(t.verdict, Verdict::Fail);
        assert_eq!(t.value, "0.00%");
        assert!(
            t.detail
                .ends_with("; fell behind: 64.0 ticks/s of 128 Hz, last tick 5.0 s late"),
            "{}",
            t.detail
        );
    }
}
