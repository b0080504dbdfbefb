//! Short human summaries of reports.

use std::fmt::Write;

use tickforge_telemetry::report::{
    BotsCost, BotsReport, Clients, FrameSecond, Hitreg, Memory, ReplaySource, Report, SaturatedBy,
    ServerReport,
};
pub use tickforge_telemetry::summary::game_label;
use tickforge_telemetry::summary::{
    budgets_line, categories_line, frame_line, ms, pct, slowest_line, ticks_line,
};
use tickforge_telemetry::REFERENCE_PLAYERS;

/// True for the shooter's reports, whose bots judge shots and whose server rewinds them.
fn shoots(game: &str) -> bool {
    game.is_empty() || game == "shooter"
}

fn clients_line(out: &mut String, c: &Clients) {
    let _ = writeln!(
        out,
        "  clients       {}/{} connected, {} snapshots/s each (min {}), response time p50 {} p99 {}",
        c.connected,
        c.bots,
        c.response_rate_hz.map_or("n/a".into(), |r| format!("{r:.1}")),
        c.min_response_rate_hz.map_or("n/a".into(), |r| format!("{r:.1}")),
        ms(c.response_time_ms.p50),
        ms(c.response_time_ms.p99),
    );
    let _ = writeln!(
        out,
        "  bandwidth     {:.0} B/s down, {:.0} B/s up per client; ping p50 {}",
        c.down_bytes_per_s.unwrap_or(0.0),
        c.up_bytes_per_s.unwrap_or(0.0),
        ms(c.ping_rtt_ms.p50),
    );
}

fn hitreg_line(out: &mut String, h: &Hitreg) {
    let _ = writeln!(
        out,
        "  hitreg        {} shots judged ({} server hits, {} on the already dead), {} agree at {:.0} ms rtt ± {:.0} ms, shown {:.1} ms behind, posed every {} ticks ({} bot-only hits, {} server-only hits of which {} on players not in the bot's view, {} other victim)",
        h.shots,
        h.server_hits,
        h.victim_dead_at_fire,
        h.agree_rate
            .map_or("n/a".into(), |r| format!("{:.2}%", r * 100.0)),
        h.rtt_ms,
        h.jitter_ms,
        h.interp_delay_ms,
        h.pose_every,
        h.bot_hit_server_miss,
        h.bot_miss_server_hit,
        h.server_hit_unseen,
        h.other_victim,
    );
}

/// Which recorded inputs the bots replayed (`bots --replay`), and the rule that gave each
/// bot its seat.
fn replay_line(out: &mut String, r: &ReplaySource) {
    let files: Vec<String> = r
        .files
        .iter()
        .map(|f| {
            format!(
                "{} ({} B, check {}, {} seats, {} ticks)",
                f.name,
                f.bytes,
                f.check,
                f.seats.len(),
                f.ticks
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "  replay        {} bots on {} recorded seats, bot k replays seat k mod {} file by file, open loop: {}{}",
        r.bots,
        r.pairs,
        r.pairs,
        files.join(", "),
        if r.skipped.is_empty() {
            String::new()
        } else {
            format!("; left out: {}", r.skipped.join("; "))
        }
    );
}

fn prediction_line(out: &mut String, c: &Clients) {
    let p = &c.correction_m;
    let cm = |m: Option<f64>| m.map_or("n/a".into(), |m| format!("{:.2} cm", m * 100.0));
    let _ = writeln!(
        out,
        "  prediction    correction mean {} p99 {} max {} over {} snapshots ({} reconciled; {} skipped across deaths, revivals, rounds or epochs, {} while dead)",
        cm(p.mean),
        cm(p.p99),
        cm(p.max),
        p.samples,
        p.reconciled,
        p.skipped,
        p.dead,
    );
}

/// What `bots` prints when it ends.
pub fn bots(r: &BotsReport) -> String {
    let mut out = String::from("tickforge bots:\n");
    clients_line(&mut out, &r.clients);
    if let Some(replay) = &r.replay {
        replay_line(&mut out, replay);
    }
    hitreg_line(&mut out, &r.hitreg);
    if r.clients.correction_m.samples > 0 {
        prediction_line(&mut out, &r.clients);
    }
    let _ = writeln!(
        out,
        "  bots          cpu {}{}{}",
        pct(r.cpu_util),
        host_held(r).map_or(String::new(), |held| format!(", {held}")),
        saturation(r).map_or(String::new(), |why| format!(
            ", {why}: the figures speak of the bots, not the server"
        ))
    );
    if let Some(c) = &r.cost {
        let _ = writeln!(out, "  bots cost     {}", cost(c, r.clients.bots));
    }
    let _ = writeln!(out, "  memory        {}", memory(r.memory.as_ref()));
    if let Some(p) = r.rt_priority {
        let _ = writeln!(out, "  scheduling    SCHED_FIFO {p}");
    }
    out
}

/// Why the bots could not keep their tick, when they could not: their core full
/// (`SATURATED`), or, on less of it, woken late (`LATE`: a busy host, or bursts of their
/// own), which says as much of the client figures but not that the bots need a core more.
fn saturation(r: &BotsReport) -> Option<String> {
    if !r.saturated {
        return None;
    }
    // Seconds behind read better as seconds.
    let behind = match r.max_behind_ms {
        Some(v) if v >= 10_000.0 => format!("fell behind up to {:.1} s", v / 1e3),
        v => format!("fell behind up to {}", ms(v)),
    };
    let word = saturation_word(r.saturated_by);
    Some(match r.saturated_by {
        Some(SaturatedBy::Late) => format!(
            "{word} ({} of their send deadlines over a tick late at {} of their core: woken \
             late, by a busy host or bursts of their own; {behind})",
            r.late_deadline_rate
                .map_or("n/a".into(), |v| format!("{:.1}%", v * 100.0)),
            pct(r.cpu_util)
        ),
        Some(SaturatedBy::LateWarmup) => format!(
            "{word} (over {} s behind there{}; {behind})",
            SaturatedBy::WARMUP_BEHIND_LIMIT.as_secs_f64(),
            r.warm_max_behind_at_s.map_or(String::new(), |at| format!(
                ", furthest {at:.1} s into the run"
            ))
        ),
        Some(SaturatedBy::Cpu) | None => format!("{word} ({behind})"),
    })
}

/// What the host held the bots' thread off its core, when that made deadlines late:
/// `held off their core 151.980 ms by the host (2.1% of their send deadlines late for it alone,
/// excused)`.
fn host_held(r: &BotsReport) -> Option<String> {
    let rate = r.late_host_rate.filter(|&v| v > 0.0)?;
    Some(format!(
        "held off their core {} by the host ({:.1}% of their send deadlines late for it alone, excused)",
        ms(r.host_held_ms),
        rate * 100.0
    ))
}

/// The word for bots that could not keep their tick: `SATURATED` (their core full; also
/// for reports from before the reason was kept), `LATE` or `LATE in the warm-up`.
fn saturation_word(by: Option<SaturatedBy>) -> &'static str {
    match by {
        Some(SaturatedBy::Late) => "LATE",
        Some(SaturatedBy::LateWarmup) => "LATE in the warm-up",
        Some(SaturatedBy::Cpu) | None => "SATURATED",
    }
}

/// `9.1 µs a datagram read, 12.0 µs a tick: 1.82 cores would keep the 1000 bots on
/// schedule`.
fn cost(c: &BotsCost, bots: u64) -> String {
    format!(
        "{:.1} µs a datagram read, {:.1} µs a tick: {:.2} cores would keep the {bots} bots on schedule",
        c.receive_us_per_datagram, c.tick_us, c.cores_to_keep_up
    )
}

/// `1.6 GiB resident (99% on huge pages)`, or `n/a` when not read.
fn memory(m: Option<&Memory>) -> String {
    let Some(m) = m else {
        return "n/a".into();
    };
    let huge = 100.0 * m.huge_bytes as f64 / (m.resident_bytes as f64).max(1.0);
    format!(
        "{} resident ({huge:.0}% on huge pages)",
        crate::doctor::bytes(m.resident_bytes)
    )
}

/// Which side ran real-time: `SCHED_FIFO 10: server 1/1 workers, bots` or `normal`.
fn scheduling(server: &ServerReport, bots: &BotsReport) -> String {
    let Some(p) = server.rt_priority.or(bots.rt_priority) else {
        return "normal (no SCHED_FIFO: --rt-priority 0, or the host refused it)".into();
    };
    format!(
        "SCHED_FIFO {p}: server {}/{} workers, bots {}",
        server.realtime_workers,
        server.workers,
        if bots.rt_priority.is_some() {
            "yes"
        } else {
            "no"
        }
    )
}

/// One step of a sweep: matches, frame, ticks on time, utilisation, response time.
pub fn sweep_step(s: &tickforge_telemetry::report::SweepStep) -> String {
    let ms = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.3} ms"));
    format!(
        "  {:>3} × {:<3}  frame p50 {} p99 {}  on time {} (start p99 {})  worker {}  response {} Hz p50 {}  bots {}{}",
        s.matches,
        s.players,
        ms(s.match_frame_ms.map(|p| p.p50)),
        ms(s.match_frame_ms.map(|p| p.p99)),
        s.on_time_rate
            .map_or("n/a".into(), |r| format!("{:.2}%", r * 100.0)),
        ms(s.tick_start_late_ms.map(|p| p.p99)),
        s.worker_util
            .map_or("n/a".into(), |u| format!("{:.0}%", u * 100.0)),
        s.response_rate_hz
            .map_or("n/a".into(), |r| format!("{r:.1}")),
        ms(s.response_time_ms.p50),
        s.bots_cpu_util
            .map_or("n/a".into(), |u| format!("{:.0}%", u * 100.0))
            + &s.bots_cores_to_keep_up
                .map_or(String::new(), |c| format!(" (to keep up {c:.2} cores)")),
        if s.bots_saturated {
            format!(" {}", saturation_word(s.bots_saturated_by))
        } else {
            String::new()
        },
    ) + &step_behind(s)
        + &step_verdict(s)
}

/// A sweep step that fell behind its schedule: the tick rate it achieved and its lag.
fn step_behind(s: &tickforge_telemetry::report::SweepStep) -> String {
    let b = &s.schedule;
    if !b.fell_behind {
        return String::new();
    }
    format!(
        "  FELL BEHIND {} ticks/s, last tick {} late",
        b.achieved_tick_hz
            .map_or("n/a".into(), |hz| format!("{hz:.1}")),
        b.lag_ms
            .map_or("n/a".into(), |ms| format!("{:.1} s", ms / 1e3)),
    )
}

/// A sweep step's verdict, when it was judged on windows: the outcome, the windows that
/// held on the server's own account and strictly, the runs, and its host-late ticks.
fn step_verdict(s: &tickforge_telemetry::report::SweepStep) -> String {
    let Some(v) = &s.verdict else {
        return String::new();
    };
    let held = |rate: fn(&tickforge_telemetry::report::WindowVerdict) -> f64| {
        (v.windows.iter())
            .filter(|w| rate(w) >= crate::bench::checks::ON_TIME)
            .count()
    };
    format!(
        "  [{}: {}/{n} windows held, {}/{n} strictly; run {}; late own {} others {} host {} unexplained {}]",
        v.outcome,
        held(|w| w.on_time_rate),
        held(|w| w.on_time_rate_strict),
        v.runs,
        s.late_causes.own,
        s.late_causes.others,
        s.late_causes.host(),
        s.late_causes.unexplained,
        n = v.windows.len(),
    )
}

/// Seconds of the window a summary looks at before it calls one of them slow.
const SLOW_SECOND_MIN_SECONDS: usize = 5;
/// How far above the median second's median frame a second's is called slow.
const SLOW_SECOND_RATIO: f64 = 1.10;

/// A line naming the second of the window whose median frame ran furthest above the
/// median second's, when it ran at least 10% above it; `None` for a steady window or one
/// under five seconds. A run's p99 can come from such a stretch, where every frame ran
/// slower at once, rather than from its load; whether a stall made any of its ticks late
/// is said too, as a slowdown with none is the host's clock or its neighbours on the cache,
/// which no counter here sees.
fn slowest_second(seconds: &[FrameSecond]) -> Option<String> {
    if seconds.len() < SLOW_SECOND_MIN_SECONDS {
        return None;
    }
    let mut medians: Vec<f64> = seconds.iter().map(|s| s.p50).collect();
    let typical = crate::bench::repeat::median(&mut medians)?;
    let slowest = seconds.iter().max_by(|a, b| a.p50.total_cmp(&b.p50))?;
    if !(typical > 0.0 && slowest.p50 >= SLOW_SECOND_RATIO * typical) {
        return None;
    }
    Some(format!(
        "  slowest sec.  s {}: median frame {:.3} ms, {:.0}% above the median second's {:.3} ms; {}\n",
        slowest.s,
        slowest.p50,
        100.0 * (slowest.p50 / typical - 1.0),
        typical,
        match slowest.late_host {
            0 => "no tick of it late for a stall".to_string(),
            n => format!("{n} of its ticks late for a stall"),
        }
    ))
}

/// What `bench` prints when it ends (and `report` again): the game, and the map when it
/// has one, in the first line; the hit registration and lag compensation lines for the
/// shooter only, the one game whose bots shoot.
pub fn bench(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "tickforge bench {}: {} match(es) of {} × {} bots at {} Hz, {:.1} s measured after {:.1} s warm-up",
        r.scenario,
        r.matches,
        game_label(&r.game, &r.map),
        r.players_per_match,
        r.tick_hz,
        r.duration_s,
        r.warmup_s
    );
    frame_line(&mut out, "match frame", &r.match_frame_ms);
    if let Some(line) = slowest_second(&r.server.frame_seconds) {
        out.push_str(&line);
    }
    slowest_line(&mut out, &r.server);
    let _ = writeln!(
        out,
        "  budget        {:.3} ms per match tick ({})",
        r.budget_ms,
        if r.players_per_match > REFERENCE_PLAYERS {
            format!(
                "60 ten-player games per core, {} players as {} of them",
                r.players_per_match,
                f64::from(r.players_per_match) / f64::from(REFERENCE_PLAYERS)
            )
        } else {
            "60 games per core".to_string()
        }
    );
    categories_line(&mut out, &r.server);
    budgets_line(&mut out, &r.server);
    ticks_line(&mut out, &r.server);
    let (c, p) = (&r.server.late_causes, &r.server.preemption);
    if c.total() > 0 || p.stalls > 0 {
        let _ = writeln!(
            out,
            "  late by cause own {} others {} host_preempted {} host_steal {} unexplained {}; {} stall(s) up to {:.2} ms, {} involuntary switches, {:.1} ms on the run queue, steal {}",
            c.own,
            c.others,
            c.host_preempted,
            c.host_steal,
            c.unexplained,
            p.stalls,
            p.stall_max_ms,
            p.involuntary_switches,
            p.run_delay_ms,
            p.steal_share.map_or("n/a".into(), |s| format!("{:.2}%", s * 100.0)),
        );
    }
    let _ = writeln!(
        out,
        "  games/core    {} projected, measured {}{}",
        r.games_per_core
            .projected
            .map_or("n/a".into(), |g| format!("{g:.0}")),
        r.games_per_core
            .measured
            .map_or("n/a (needs --sweep)".into(), |g| format!("{g:.0}")),
        r.games_per_core
            .measured_strict
            .map_or(String::new(), |g| format!(
                " ({g:.0} strictly, host misses counted)"
            )),
    );
    let d = &r.server.datagrams;
    let _ = writeln!(
        out,
        "  i/o           floor {} per match tick ({} per datagram{}{}), frame = {} floor; {} datagrams per recvmmsg, {} per sendmmsg",
        ms(r.io_floor_ms),
        r.io_floor_per_datagram_us.map_or("n/a".into(), |v| format!("{v:.2} µs")),
        r.io_floor_before_after_us.map_or(String::new(), |[b, a]| format!(
            ": {b:.2} before the run, {a:.2} after"
        )),
        match r.io_floor_short_ticks {
            Some([b, a]) if b + a > 0 => format!(
                "; LOW: {b} ticks before and {a} after found fewer inputs than players"
            ),
            _ => String::new(),
        },
        r.frame_to_io_floor.map_or("n/a".into(), |v| format!("{v:.2}×")),
        d.per_recv_call.map_or("n/a".into(), |v| format!("{v:.1}")),
        d.per_send_call.map_or("n/a".into(), |v| format!("{v:.1}")),
    );
    if let Some(f) = &r.flood {
        let mut reasons: Vec<(&String, &u64)> = d.dropped.iter().filter(|(_, &n)| n > 0).collect();
        reasons.sort_by(|a, b| b.1.cmp(a.1));
        let top: Vec<String> = reasons
            .iter()
            .take(5)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let _ = writeln!(
            out,
            "  flood         {} sent ({} request-shaped, {} packet-shaped); server dropped {}: {}",
            f.sent,
            f.request_shaped,
            f.packet_shaped,
            d.dropped_total(),
            top.join(", ")
        );
    }
    clients_line(&mut out, &r.clients);
    let named = |m: &std::collections::BTreeMap<String, u64>| -> String {
        let v: Vec<String> = (m.iter().filter(|(_, &n)| n > 0))
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let kicked: u64 = r.server.kicked.values().sum();
    if kicked > 0 || r.clients.link_errors > 0 || !r.clients.ended.is_empty() {
        let _ = writeln!(
            out,
            "  disconnects   server kicked {kicked} ({}); bots' sessions ended early: {}; {} server packets refused by the bots' links",
            named(&r.server.kicked),
            named(&r.clients.ended),
            r.clients.link_errors,
        );
    }
    if let Some(replay) = &r.bots.replay {
        replay_line(&mut out, replay);
    }
    if shoots(&r.game) {
        hitreg_line(&mut out, &r.hitreg);
        prediction_line(&mut out, &r.clients);
    }
    let rep = &r.server.replication;
    let _ = writeln!(
        out,
        "  replication   {} B per snapshot against {} B as full states ({}); max staleness {} ticks; {} of encodings shared; {} packets/s down, {} up per client",
        rep.body_bytes_per_snapshot.map_or("n/a".into(), |b| format!("{b:.1}")),
        rep.full_state_bytes_per_snapshot.map_or("n/a".into(), |b| format!("{b:.1}")),
        rep.body_to_full_state.map_or("n/a".into(), |x| format!("{:.1}%", x * 100.0)),
        rep.max_staleness_ticks,
        pct(rep.cache_hit_rate),
        r.clients.down_packets_per_s.map_or("n/a".into(), |p| format!("{p:.0}")),
        r.clients.up_packets_per_s.map_or("n/a".into(), |p| format!("{p:.0}")),
    );
    let _ = writeln!(
        out,
        "  entities      {} sent per snapshot (max {}) of {} relevant{}; what was left out had gone unsent {} ticks on average",
        rep.states_per_snapshot.map_or("n/a".into(), |x| format!("{x:.1}")),
        rep.max_states_per_snapshot,
        rep.relevant_per_snapshot.map_or("n/a".into(), |x| format!("{x:.1}")),
        waiting(rep),
        rep.deferred_staleness_ticks.map_or("n/a".into(), |x| format!("{x:.1}")),
    );
    if shoots(&r.game) {
        let _ = writeln!(
            out,
            "  lag comp.     max rewind {:.0} ms; {} of {} shots fired rewound past it",
            r.server.max_rewind_ms, r.server.shots_rewind_clamped, r.server.shots_fired
        );
    }
    if let Some(sw) = &r.sweep {
        if sw.by == "players" {
            let _ = writeln!(
                out,
                "  saturation    one match, players raised step by step (matches × players):"
            );
        } else {
            let _ = writeln!(
                out,
                "  sweep         {} games per core measured, {} strictly (limited by {}):",
                sw.measured_games_per_core
                    .map_or("n/a".into(), |g| g.to_string()),
                sw.measured_strict_games_per_core
                    .map_or("n/a".into(), |g| g.to_string()),
                sw.limited_by
            );
            if !sw.stopped_because.is_empty() {
                let _ = writeln!(out, "                stopped: {}", sw.stopped_because);
            }
        }
        for step in &sw.steps {
            let _ = writeln!(out, "  {}", sweep_step(step));
        }
    }
    let _ = writeln!(
        out,
        "  cpu           server {}, bots {}{}{}",
        pct(r.server_cpu_util),
        pct(r.bots_cpu_util),
        host_held(&r.bots).map_or(String::new(), |held| format!(" ({held})")),
        if r.bots_saturated == Some(true) {
            format!(
                " — bots {}: the client figures speak of the bots, not the server",
                saturation(&r.bots).unwrap_or_else(|| "SATURATED".into())
            )
        } else {
            String::new()
        }
    );
    if let Some(c) = &r.bots.cost {
        let _ = writeln!(out, "  bots cost     {}", cost(c, r.bots.clients.bots));
    }
    let _ = writeln!(
        out,
        "  memory        server {}, bots {}",
        memory(r.server.memory.as_ref()),
        memory(r.bots.memory.as_ref())
    );
    let _ = writeln!(out, "  scheduling    {}", scheduling(&r.server, &r.bots));
    out
}

/// `2026-11-25 12:10:25 UTC` from seconds since the Unix epoch: how reports and summaries
/// date a run. Past what a date can hold, the largest date.
pub fn utc(unix_s: u64) -> String {
    let t = i64::try_from(unix_s)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// With the rate by distance on, how many relevant entities a snapshot left waiting and
/// the rate; nothing when it is off.
fn waiting(rep: &tickforge_telemetry::report::Replication) -> String {
    let Some(rate) = rep.rate_by_distance else {
        return String::new();
    };
    format!(
        ", {} waiting for their distance's tick (rate halves every {:.0} m, to 1 tick in {})",
        rep.waiting_per_snapshot
            .map_or("n/a".into(), |x| format!("{x:.1}")),
        rate.halve_every_m,
        rate.slowest_every_ticks
    )
}

#[cfg(test)]
mod tests {
    use tickforge_telemetry::report::Memory;

    #[test]
    fn entities_waiting_for_their_tick_are_named_only_with_the_rate_on() {
        use tickforge_telemetry::report::{RateByDistance, Replication};
        let off = Replication {
            waiting_per_snapshot: Some(0.0),
            ..Replication::default()
        };
        assert_eq!(super::waiting(&off), "");
        let on = Replication {
            waiting_per_snapshot: Some(140.56),
            rate_by_distance: Some(RateByDistance {
                halve_every_m: 40.0,
                slowest_every_ticks: 8,
            }),
            ..Replication::default()
        };
        assert_eq!(
            super::waiting(&on),
            ", 140.6 waiting for their distance's tick (rate halves every 40 m, to 1 tick in 8)"
        );
    }

    #[test]
    fn bots_that_could_not_keep_their_tick_say_whether_their_core_was_full() {
        use tickforge_telemetry::report::{BotsReport, SaturatedBy};
        let r = |by: Option<SaturatedBy>, cpu| BotsReport {
            saturated: by.is_some(),
            saturated_by: by,
            cpu_util: Some(cpu),
            late_deadline_rate: Some(0.021),
            max_behind_ms: Some(43.8),
            ..BotsReport::default()
        };
        assert_eq!(super::saturation(&r(None, 0.5)), None);
        let far = BotsReport {
            max_behind_ms: Some(89_191.057),
            ..r(Some(SaturatedBy::Cpu), 0.96)
        };
        assert_eq!(
            super::saturation(&far).unwrap(),
            "SATURATED (fell behind up to 89.2 s)"
        );
        let full = super::saturation(&r(Some(SaturatedBy::Cpu), 0.96)).unwrap();
        assert!(
            full.starts_with("SATURATED (fell behind up to 43.8"),
            "{full}"
        );
        let late = super::saturation(&r(Some(SaturatedBy::Late), 0.59)).unwrap();
        assert!(
            late.starts_with("LATE (2.1% of their send deadlines over a tick late at 59%"),
            "{late}"
        );
        let warm = super::saturation(&r(Some(SaturatedBy::LateWarmup), 0.59)).unwrap();
        assert!(warm.starts_with("LATE in the warm-up"), "{warm}");
        assert!(!warm.contains("into the run"), "{warm}");
        // When it came tells a transient at connection from a growing fall behind.
        let dated = BotsReport {
            warm_max_behind_at_s: Some(2.44),
            ..r(Some(SaturatedBy::LateWarmup), 0.59)
        };
        let dated = super::saturation(&dated).unwrap();
        assert!(
            dated.starts_with("LATE in the warm-up (over 1 s behind there, furthest 2.4 s into the run; fell behind up to 43.8"),
            "{dated}"
        );
        // A report from before the reason was kept.
        let old = BotsReport {
            saturated_by: None,
            ..r(Some(SaturatedBy::Cpu), 0.96)
        };
        assert!(super::saturation(&old).unwrap().starts_with("SATURATED"));
        assert!(super::bots(&r(Some(SaturatedBy::Late), 0.59)).contains(", LATE (2.1%"));
        // Deadlines late only for the host's holds are said, and excused.
        let held = BotsReport {
            late_host_rate: Some(0.034),
            host_held_ms: Some(151.98),
            ..r(None, 0.83)
        };
        let line = super::bots(&held);
        assert!(
            line.contains("cpu 83%, held off their core 151.980 ms by the host (3.4% of their send deadlines late for it alone, excused)\n"),
            "{line}"
        );
        let unheld = BotsReport {
            late_host_rate: Some(0.0),
            host_held_ms: Some(0.3),
            ..r(None, 0.83)
        };
        assert!(!super::bots(&unheld).contains("held off"));
    }

    #[test]
    fn memory_reads_as_its_size_and_its_share_on_huge_pages() {
        let m = |resident_bytes, huge_bytes| Memory {
            resident_bytes,
            huge_bytes,
        };
        assert_eq!(
            super::memory(Some(&m(1_770_000_000, 1_752_300_000))),
            "1.6 GiB resident (99% on huge pages)"
        );
        assert_eq!(
            super::memory(Some(&m(123_200_000, 0))),
            "117.5 MiB resident (0% on huge pages)"
        );
        assert_eq!(super::memory(None), "n/a");
    }

    #[test]
    fn runs_are_dated_in_utc_to_the_second() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc(951_827_696), "2000-02-29 12:34:56 UTC");
        assert_eq!(super::utc(1_795_609_825), "2026-11-25 12:30:25 UTC");
        assert!(
            super::utc(u64::MAX).starts_with("9999-12-"),
            "{}",
            super::utc(u64::MAX)
        );
    }

    use super::*;

    fn report(game: &str, map: &str) -> Report {
        let mut r = Report {
            scenario: "smoke".into(),
            matches: 1,
            players_per_match: 10,
            tick_hz: 128,
            game: game.into(),
            map: map.into(),
            ..Report::default()
        };
        r.server.game = game.into();
        r.server.map = map.into();
        r.server.matches = 1;
        r.server.players_per_match = 10;
        r.server.tick_hz = 128;
        r
    }

    #[test]
    fn a_second_well_above_the_others_is_named_and_a_steady_window_is_not() {
        let second = |s: u32, p50: f64| FrameSecond {
            s,
            frames: 30,
            p50,
            p99: p50 * 1.1,
            max: p50 * 1.2,
            ..FrameSecond::default()
        };
        // The crowd of 1,000's run: one second of twenty at 19.2 ms, the rest about 16.4.
        let mut seconds: Vec<FrameSecond> = (0..20).map(|s| second(s, 16.4)).collect();
        seconds[2].p50 = 19.2;
        let mut r = report("shooter", "arena");
        r.server.frame_seconds = seconds.clone();
        let text = bench(&r);
        assert!(
            text.contains(
                "  slowest sec.  s 2: median frame 19.200 ms, 17% above the median second's \
                 16.400 ms; no tick of it late for a stall\n"
            ),
            "{text}"
        );
        seconds[2].late_host = 3;
        assert!(slowest_second(&seconds)
            .unwrap()
            .ends_with("; 3 of its ticks late for a stall\n"));
        // Under 10% above: steady.
        seconds[2].p50 = 17.9;
        assert_eq!(slowest_second(&seconds), None);
        // Too few seconds to tell.
        let short: Vec<FrameSecond> = vec![second(0, 16.4), second(1, 30.0), second(2, 16.4)];
        assert_eq!(slowest_second(&short), None);
        r.server.frame_seconds = Vec::new();
        assert!(!bench(&r).contains("slowest sec."));
    }

    #[test]
    fn a_floor_whose_ticks_came_up_short_is_flagged_low_and_a_whole_one_is_not() {
        let mut r = report("many-matches", "arena");
        r.io_floor_ms = Some(0.0394);
        r.io_floor_per_datagram_us = Some(1.97);
        r.io_floor_before_after_us = Some([1.94, 2.0]);
        r.io_floor_short_ticks = Some([0, 0]);
        let floor_line = |r: &Report| {
            bench(r)
                .lines()
                .find(|l| l.trim_start().starts_with("i/o"))
                .expect("an i/o line")
                .to_string()
        };
        let whole = floor_line(&r);
        assert!(!whole.contains("LOW"), "{whole}");
        assert!(
            whole.contains("1.94 before the run, 2.00 after)"),
            "{whole}"
        );
        r.io_floor_short_ticks = Some([0, 7]);
        let short = floor_line(&r);
        assert!(
            short.contains(
                "2.00 after; LOW: 0 ticks before and 7 after found fewer inputs than players)"
            ),
            "{short}"
        );
        // A report from before the key was written reads as nothing to flag.
        r.io_floor_short_ticks = None;
        assert_eq!(floor_line(&r), whole);
    }

    #[test]
    fn a_bench_that_fell_behind_says_so_and_one_on_schedule_does_not() {
        let mut r = report("shooter", "arena");
        r.server.schedule = tickforge_telemetry::report::Schedule {
            achieved_tick_hz: Some(128.0),
            lag_ms: Some(0.4),
            fell_behind: false,
        };
        assert!(!bench(&r).contains("fell behind"));
        r.server.schedule = tickforge_telemetry::report::Schedule {
            achieved_tick_hz: Some(64.0),
            lag_ms: Some(12_500.0),
            fell_behind: true,
        };
        let text = bench(&r);
        assert!(
            text.contains("  fell behind   64.0 ticks/s of 128 (50%), last tick 12.5 s late\n"),
            "{text}"
        );
        let step = tickforge_telemetry::report::SweepStep {
            matches: 40,
            schedule: r.server.schedule,
            ..Default::default()
        };
        assert!(
            sweep_step(&step).contains("FELL BEHIND 64.0 ticks/s, last tick 12.5 s late"),
            "{}",
            sweep_step(&step)
        );
        let step = tickforge_telemetry::report::SweepStep::default();
        assert!(!sweep_step(&step).contains("BEHIND"));
    }

    #[test]
    fn the_bots_cost_says_what_would_keep_them_on_schedule() {
        let mut r = report("shooter", "flat2km");
        assert!(!bench(&r).contains("bots cost"), "none measured");
        r.bots.clients.bots = 1000;
        r.bots.cost = Some(BotsCost {
            receive_us_per_datagram: 9.14,
            tick_us: 12.0,
            cores_to_keep_up: 1.824,
        });
        let want = "  bots cost     9.1 µs a datagram read, 12.0 µs a tick: 1.82 cores would keep the 1000 bots on schedule\n";
        assert!(bench(&r).contains(want), "{}", bench(&r));
        assert!(bots(&r.bots).contains(want), "{}", bots(&r.bots));
    }

    #[test]
    fn a_sweep_step_says_whether_its_bots_were_saturated_or_woken_late() {
        let line = |saturated, by| {
            sweep_step(&tickforge_telemetry::report::SweepStep {
                matches: 50,
                bots_saturated: saturated,
                bots_saturated_by: by,
                ..Default::default()
            })
        };
        assert!(!line(false, None).contains("SATURATED") && !line(false, None).contains("LATE"));
        assert!(line(true, Some(SaturatedBy::Cpu)).ends_with(" SATURATED"));
        // A report from before the reason was kept.
        assert!(line(true, None).ends_with(" SATURATED"));
        let late = line(true, Some(SaturatedBy::Late));
        assert!(
            late.ends_with(" LATE") && !late.contains("SATURATED"),
            "{late}"
        );
        assert!(line(true, Some(SaturatedBy::LateWarmup)).ends_with(" LATE in the warm-up"));
        let costed = sweep_step(&tickforge_telemetry::report::SweepStep {
            bots_cpu_util: Some(0.95),
            bots_cores_to_keep_up: Some(1.234),
            ..Default::default()
        });
        assert!(
            costed.contains("bots 95% (to keep up 1.23 cores)"),
            "{costed}"
        );
    }

    #[test]
    fn the_game_is_named_with_its_map_only_when_it_has_one() {
        assert_eq!(game_label("shooter", "arena"), "shooter on arena");
        assert_eq!(game_label("ctf", ""), "ctf");
        assert_eq!(game_label("", "flat2km"), "shooter on flat2km");
    }

    #[test]
    fn a_ctf_bench_names_its_game_and_leaves_out_the_shooters_lines() {
        let text = bench(&report("ctf", ""));
        let first = text.lines().next().unwrap();
        assert!(
            first.starts_with("tickforge bench smoke: 1 match(es) of ctf × 10 bots at 128 Hz"),
            "{first}"
        );
        assert!(
            !text.contains("hitreg") && !text.contains("lag comp."),
            "{text}"
        );
        assert!(text.contains("clients") && text.contains("replication"));
    }

    #[test]
    fn a_shooter_bench_names_game_and_map_and_keeps_hitreg() {
        for game in ["shooter", ""] {
            let text = bench(&report(game, "arena"));
            assert!(
                text.starts_with("tickforge bench smoke: 1 match(es) of shooter on arena × 10"),
                "{text}"
            );
            assert!(
                text.contains("hitreg") && text.contains("lag comp."),
                "{text}"
            );
        }
    }

    #[test]
    fn the_servers_summary_names_the_game() {
        let r = report("ctf", "");
        assert!(
            tickforge_telemetry::summary::server(&r.server)
                .starts_with("tickforge serve: 1 match(es) of ctf × 10 at 128 Hz"),
            "{}",
            tickforge_telemetry::summary::server(&r.server)
        );
    }
}
