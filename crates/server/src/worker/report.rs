//! What a worker measures, and the report the host makes of all its workers' figures.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tickforge_io::cpu;
use tickforge_io::udp::IoStats;
use tickforge_replication::ReplicationStats;
use tickforge_telemetry::report::{
    merge_frame_seconds, Datagrams, FrameSecond, LateCauses, Preemption, Replication, Schedule,
    ServerReport, Ticks, MAX_FRAME_SECONDS,
};
use tickforge_telemetry::rounds::{slot_name, Budgets, BUDGET_SLOTS};
use tickforge_telemetry::{
    match_budget_ms, projected_games_per_core, Category, DurationHistogram, FrameStats, Phase,
    SlowestFrames,
};

use super::preempt::merge_preemption;
use super::{nanos, Worker, LATE_AFTER};
use crate::game_match::HostedMatch;

/// The measured window: from the end of the warm-up for the configured duration.
///
/// Ticks and wake-ups belong to it by when they happened on the wall clock, not by their
/// deadline: a worker behind its schedule runs ticks whose deadlines lag ever further
/// behind, may never reach a window that starts late in the run, and are still its frames.
#[derive(Clone, Copy, Debug)]
pub(super) struct Window {
    pub(super) start: Instant,
    pub(super) end: Option<Instant>,
}

impl Window {
    pub(super) fn new(start: Instant, warmup: Duration, duration: Option<Duration>) -> Window {
        let start = start + warmup;
        Window {
            start,
            end: duration.map(|d| start + d),
        }
    }

    pub(super) fn contains(&self, t: Instant) -> bool {
        t >= self.start && self.end.is_none_or(|e| t < e)
    }
}

/// Datagrams the worker dropped after the transport accepted them.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Drops {
    /// Clients disconnected for breaking the reliability protocol.
    pub(super) misbehaved: u64,
    /// Clients disconnected for sending far more than one packet a tick.
    pub(super) flooding: u64,
    /// Clients disconnected because the game refused one of their reliable messages.
    pub(super) refused_messages: u64,
    /// Clients disconnected because their link could not take a reliable message.
    pub(super) stalled: u64,
    /// Clients the transport ended after hearing nothing from them for their timeout.
    pub(super) timed_out: u64,
    /// Connections refused: the token names a match this worker does not host.
    pub(super) no_such_match: u64,
    /// Connections refused: no free slot in the match.
    pub(super) match_full: u64,
    pub(super) oversize: u64,
    pub(super) bad_message: u64,
    pub(super) bad_cmd: u64,
}

/// Figures of the measured window.
#[derive(Clone, Default)]
pub(super) struct Measure {
    frames: FrameStats,
    pub(super) worker_frames: DurationHistogram,
    wake_late: DurationHistogram,
    /// How late each match tick started: its wait behind the wake-up's receive and the
    /// matches run before it, on top of the wake-up's own lateness.
    tick_late: DurationHistogram,
    pub(super) ticks: Ticks,
    /// How late the last tick started in the window was after its deadline: how far
    /// behind its schedule the worker was when the window closed.
    lag: Option<Duration>,
    /// The match frames second by second.
    seconds: FrameSeconds,
    /// The slowest match frames, with where their time went.
    slowest: SlowestFrames,
    /// Match ticks over budget, by budget slot.
    pub(super) violations: [u64; BUDGET_SLOTS],
    cpu_start: Option<Duration>,
    cpu_end: Option<Duration>,
}

/// The match frames of the measured window second by second: one histogram for the second
/// being filled, reset as the next begins, and the closed seconds in a vector reserved for
/// [`MAX_FRAME_SECONDS`] at creation, so recording never allocates. Seconds past the last
/// one held are not recorded.
#[derive(Clone)]
struct FrameSeconds {
    /// The second being filled, from the window's start.
    open: Option<u32>,
    hist: DurationHistogram,
    late: u32,
    hitches: u32,
    late_host: u32,
    closed: Vec<FrameSecond>,
}

impl Default for FrameSeconds {
    fn default() -> Self {
        FrameSeconds {
            open: None,
            hist: DurationHistogram::new(),
            late: 0,
            hitches: 0,
            late_host: 0,
            closed: Vec::with_capacity(MAX_FRAME_SECONDS),
        }
    }
}

impl FrameSeconds {
    /// Records one frame that started `second` seconds into the window. A frame of
    /// an earlier second than the one being filled (a worker runs due matches in one
    /// wake-up, not strictly by deadline) counts in the open second.
    fn record(&mut self, second: u32, frame_ns: u64, late: bool, hitch: bool, host: bool) {
        let second = self.open.map_or(second, |open| second.max(open));
        if self.open != Some(second) {
            self.close();
            if self.closed.len() == MAX_FRAME_SECONDS {
                return;
            }
            self.open = Some(second);
        }
        self.hist.record_ns(frame_ns);
        self.late += u32::from(late);
        self.hitches += u32::from(hitch);
        self.late_host += u32::from(late && host);
    }

    /// Closes the open second into the series.
    fn close(&mut self) {
        let Some(s) = self.open.take() else { return };
        if let Some(p) = self.hist.percentiles() {
            if self.closed.len() < MAX_FRAME_SECONDS {
                self.closed.push(FrameSecond {
                    s,
                    frames: self.hist.len() as u32,
                    p50: p.p50,
                    p99: p.p99,
                    max: p.max,
                    late: self.late,
                    hitches: self.hitches,
                    late_host: self.late_host,
                });
            }
        }
        self.hist.reset();
        (self.late, self.hitches, self.late_host) = (0, 0, 0);
    }
}

impl Measure {
    /// Records a wake-up for `deadline` at `woke`, and opens or closes the CPU clock at the
    /// window's edges.
    pub(super) fn woke(&mut self, window: &Window, deadline: Instant, woke: Instant) {
        if window.contains(woke) {
            if self.cpu_start.is_none() {
                self.cpu_start = Some(cpu::process_cpu_time());
            }
            self.wake_late
                .record_ns(nanos(woke.saturating_duration_since(deadline)));
        } else if window.end.is_some_and(|e| woke >= e) && self.cpu_end.is_none() {
            self.cpu_end = Some(cpu::process_cpu_time());
        }
    }

    /// Records the timing of a tick due at `deadline` that started at `started` inside
    /// the window: on time or late, a hitch or not, and the worker's lag behind its
    /// schedule.
    fn tick(&mut self, deadline: Instant, started: Instant, late: bool, hitch: bool) {
        let t = &mut self.ticks;
        if late {
            t.late += 1;
        } else {
            t.on_time += 1;
        }
        t.hitches += u64::from(hitch);
        self.lag = Some(started.saturating_duration_since(deadline));
    }

    /// Closes the CPU clock if the window did not end before the worker stopped.
    pub(super) fn close(&mut self, _window: &Window) {
        if self.cpu_end.is_none() {
            self.cpu_end = Some(cpu::process_cpu_time());
        }
    }
}

/// What matches that left the worker contributed, kept for the report.
#[derive(Clone, Debug, Default)]
pub(super) struct Retired {
    replication: ReplicationStats,
    snapshots: u64,
    body_bytes: u64,
    full_state_bytes: u64,
    pub(super) far_inputs: u64,
    shots_fired: u64,
    shots_clamped: u64,
    /// Each removed match's tick grid: its first deadline, and when its ticks stopped being
    /// due (its removal, or the deadline after its last tick if that is later).
    lives: Vec<(Instant, Instant)>,
    /// Matches that ended (their results handed to the persister).
    pub(super) matches_finished: u64,
    /// Attempts to write a result line or an action file that failed; the persister's own
    /// count is added when the figures are made.
    pub(super) results_failed: u64,
    /// Result lines written and synced (the persister's count, when the figures are made).
    pub(super) results_written: u64,
    /// Result lines not on disk when the figures were made (lost, or still pending).
    pub(super) results_unwritten: u64,
}

impl Retired {
    /// What the matches that left did in replication.
    pub(super) fn replication(&self) -> &ReplicationStats {
        &self.replication
    }

    /// Keeps what `m`, whose ticks were due from `grid` until before `end`, contributed.
    pub(super) fn add(&mut self, m: &dyn HostedMatch, grid: Instant, end: Instant) {
        self.replication = self.replication.merged(&m.replication_stats());
        let c = m.counters();
        self.snapshots += c.snapshots;
        self.body_bytes += c.body_bytes;
        self.full_state_bytes += c.full_state_bytes;
        self.far_inputs += c.far_inputs;
        let g = m.game_counters();
        self.shots_fired += g.rewinds;
        self.shots_clamped += g.rewinds_clamped;
        self.lives.push((grid, end));
    }
}

/// One worker's figures of the measured window; [`WorkerFigures::merge`] adds another
/// worker's, and [`WorkerFigures::report`] makes the report.
#[derive(Clone)]
pub struct WorkerFigures {
    tick_hz: u32,
    game: &'static str,
    map: String,
    startup_matches: u32,
    players_per_match: u32,
    workers: u32,
    realtime_workers: u32,
    rt_priority: Option<u8>,
    warmup: Duration,
    max_rewind: Duration,
    rate_by_distance: tickforge_api::RateByDistance,
    window_s: f64,
    measure: Measure,
    io: IoStats,
    dropped: BTreeMap<String, u64>,
    kicked: BTreeMap<String, u64>,
    retired: Retired,
    /// The budgets of a match of `players_per_match` (the report's `budgets_ms`).
    budgets: Budgets,
    late_causes: LateCauses,
    preemption: Preemption,
}

/// Ticks on a grid starting at `grid` with period `period_ns` whose deadlines fall in
/// `[from, to)`.
fn grid_ticks(grid: Instant, period_ns: f64, from: Instant, to: Instant) -> u64 {
    let before =
        |t: Instant| (nanos(t.saturating_duration_since(grid)) as f64 / period_ns).ceil() as u64;
    before(to).saturating_sub(before(from))
}

impl Worker {
    /// Records each frame of this wake-up, after adding its share of the send cost: in the
    /// metrics, the match's counters, the cost window and, inside the window, the measure.
    pub(super) fn charge_send_and_record(&mut self, send_ns: u64, window: &Window) {
        let queued: u64 = self.due.iter().map(|d| d.queued as u64).sum();
        let due = self.due.len() as u64;
        for d in &self.due {
            let (mi, mut record, q, late, deadline, started) =
                (d.index, d.record, d.queued, d.late, d.deadline, d.started);
            let share = (send_ns * q as u64)
                .checked_div(queued)
                .unwrap_or(send_ns / due.max(1));
            record.add(Category::Network, Phase::Send, share);
            let is_late = late > LATE_AFTER;
            let m = &self.matches[mi];
            let match_id = m.id().0;
            let budget_ns = match_budget_ms(self.config.tick_hz, m.seats() as u32) * 1e6;
            let hitch = late > m.period() || record.total_ns as f64 > 2.0 * budget_ns;
            // Why it was late (preempt.rs), judged against its cost before this frame.
            let cause = (is_late)
                .then(|| (self.preempt).cause(late, deadline, self.hosted[mi].cost.mean_ns()));
            if let Some(c) = cause {
                self.metrics.late_by_cause[c as usize] += 1;
            }
            self.hosted[mi].cost.add(record.total_ns);
            let c = &mut self.hosted[mi].counters;
            c.ticks += 1;
            c.late += u64::from(is_late);
            c.hitches += u64::from(hitch);
            self.metrics.record_frame(&record);
            self.metrics.late_ticks += u64::from(is_late);
            self.metrics.hitches += u64::from(hitch);
            let recorded = self.hosted[mi].history.record(d.round, &record, is_late);
            self.metrics.count_violations(recorded.over);
            if let Some(round) = recorded.closed {
                self.metrics.record_round(&round);
            }
            self.cost.add(record.total_ns);
            if !window.contains(started) {
                continue;
            }
            for (slot, n) in self.measure.violations.iter_mut().enumerate() {
                *n += u64::from(recorded.over >> slot & 1);
            }
            self.measure.frames.record(&record);
            let since_start = started.saturating_duration_since(window.start);
            (self.measure.slowest).record(&record, match_id, nanos(since_start), is_late);
            let second = since_start.as_secs();
            let host = cause.is_some_and(|c| c.is_stall());
            (self.measure.seconds).record(second as u32, record.total_ns, is_late, hitch, host);
            if let Some(c) = cause {
                self.preempt.causes[c as usize] += 1;
            }
            self.measure.tick_late.record_ns(nanos(late));
            self.measure.tick(deadline, started, is_late, hitch);
        }
    }

    /// The figures of `window`, closed at `stopped_at` if the worker stopped first.
    pub(super) fn figures(&self, window: &Window, stopped_at: Instant) -> WorkerFigures {
        let close = window.end.map_or(stopped_at, |e| e.min(stopped_at));
        let period_ns = 1e9 / f64::from(self.config.tick_hz);
        // Expected: every tick whose deadline lies in the window, on every match's grid
        // while the worker hosted it.
        let live = self.hosted.iter().map(|h| (h.grid, close));
        let expected = live
            .chain(self.retired.lives.iter().copied())
            .map(|(grid, end)| grid_ticks(grid, period_ns, window.start, end.min(close)))
            .sum();
        let mut measure = self.measure.clone();
        measure.ticks.expected = expected;
        measure.seconds.close();
        let mut retired = self.retired.clone();
        if let Some(p) = &self.persister {
            retired.results_failed += p.failed();
            retired.results_written += p.written();
            retired.results_unwritten += p.unwritten();
        }
        for m in &self.matches {
            retired.add(m.as_ref(), close, close);
        }
        let mut dropped = BTreeMap::new();
        for (name, n) in self.transport.stats().dropped_all() {
            dropped.insert(name.to_string(), n);
        }
        dropped.insert(
            "refused".into(),
            self.drops.no_such_match + self.drops.match_full,
        );
        let kicked = BTreeMap::from([
            ("misbehaved".to_string(), self.drops.misbehaved),
            ("flooding".to_string(), self.drops.flooding),
            ("stalled".to_string(), self.drops.stalled),
            ("refused_message".to_string(), self.drops.refused_messages),
            ("timed_out".to_string(), self.drops.timed_out),
        ]);
        dropped.insert("far_inputs".into(), retired.far_inputs);
        dropped.insert("oversize".into(), self.drops.oversize);
        dropped.insert("bad_message".into(), self.drops.bad_message);
        dropped.insert("bad_cmd".into(), self.drops.bad_cmd);
        let (late_causes, preemption) = self.preempt.report();
        WorkerFigures {
            tick_hz: self.config.tick_hz,
            game: self.maker.game(),
            map: (self.maker.settings().get("map").and_then(|m| m.as_str()))
                .unwrap_or_default()
                .to_string(),
            startup_matches: self.startup_matches,
            players_per_match: u32::from(self.config.players_per_match),
            workers: 1,
            realtime_workers: u32::from(self.realtime.is_some()),
            rt_priority: self.realtime,
            warmup: self.config.warmup,
            // The game's lag-compensation bound, when its settings have one (the shooter's
            // `max_rewind_ms`).
            max_rewind: Duration::from_millis(
                (self.maker.settings().get("max_rewind_ms"))
                    .and_then(|v| v.as_u64())
                    .unwrap_or(0),
            ),
            rate_by_distance: self.maker.rate_by_distance(),
            window_s: close.saturating_duration_since(window.start).as_secs_f64(),
            measure,
            io: self.io,
            dropped,
            kicked,
            retired,
            budgets: super::match_budgets(
                &self.config.budgets,
                self.config.tick_hz,
                self.config.players_per_match,
            ),
            late_causes,
            preemption,
        }
    }
}

impl WorkerFigures {
    /// Adds another worker's figures of the same window.
    pub fn merge(&mut self, other: &WorkerFigures) {
        let (a, b) = (&mut self.measure, &other.measure);
        a.frames.merge(&b.frames);
        a.worker_frames.merge(&b.worker_frames);
        a.wake_late.merge(&b.wake_late);
        a.tick_late.merge(&b.tick_late);
        merge_frame_seconds(&mut a.seconds.closed, &b.seconds.closed);
        a.slowest.merge(&b.slowest);
        let (t, u) = (&mut a.ticks, &b.ticks);
        t.expected += u.expected;
        t.on_time += u.on_time;
        t.late += u.late;
        t.hitches += u.hitches;
        // The worst worker's lag: the server is as far behind as its most behind worker.
        a.lag = a.lag.max(b.lag);
        for (v, w) in a.violations.iter_mut().zip(b.violations) {
            *v += w;
        }
        // One process clock: the window opens at the earliest reading, closes at the latest.
        a.cpu_start = a.cpu_start.into_iter().chain(b.cpu_start).min();
        a.cpu_end = a.cpu_end.into_iter().chain(b.cpu_end).max();
        self.startup_matches += other.startup_matches;
        self.workers += other.workers;
        self.realtime_workers += other.realtime_workers;
        self.rt_priority = self.rt_priority.or(other.rt_priority);
        self.window_s = self.window_s.max(other.window_s);
        let (i, j) = (&mut self.io, &other.io);
        i.received += j.received;
        i.bytes_in += j.bytes_in;
        i.truncated += j.truncated;
        i.recv_errors += j.recv_errors;
        i.sent += j.sent;
        i.bytes_out += j.bytes_out;
        i.send_errors += j.send_errors;
        i.recv_calls += j.recv_calls;
        i.send_calls += j.send_calls;
        for (name, n) in &other.dropped {
            *self.dropped.entry(name.clone()).or_default() += n;
        }
        for (name, n) in &other.kicked {
            *self.kicked.entry(name.clone()).or_default() += n;
        }
        let (r, s) = (&mut self.retired, &other.retired);
        r.replication = r.replication.merged(&s.replication);
        r.snapshots += s.snapshots;
        r.body_bytes += s.body_bytes;
        r.full_state_bytes += s.full_state_bytes;
        r.far_inputs += s.far_inputs;
        r.shots_fired += s.shots_fired;
        r.shots_clamped += s.shots_clamped;
        r.matches_finished += s.matches_finished;
        r.results_failed += s.results_failed;
        r.results_written += s.results_written;
        r.results_unwritten += s.results_unwritten;
        self.late_causes.add(&other.late_causes);
        merge_preemption(&mut self.preemption, &other.preemption);
    }

    /// The report of the measured window. Ticks due in the window and not started in it
    /// count as skipped: the workers never skip one, so these are the backlog they added
    /// over the window.
    pub fn report(&self) -> ServerReport {
        let m = &self.measure;
        let mut ticks = m.ticks;
        ticks.skipped = ticks.expected.saturating_sub(ticks.on_time + ticks.late);
        let lag_ms = m.lag.map(|l| l.as_secs_f64() * 1e3);
        let schedule = Schedule::new(self.tick_hz, &ticks, lag_ms);
        // A stall at the window's edges moves a tick or two across it (ticks join it by
        // when they started, and are due by their deadlines): only a backlog is skipped.
        if !schedule.fell_behind {
            ticks.skipped = 0;
        }
        let cpu_util = match (m.cpu_start, m.cpu_end) {
            (Some(a), Some(b)) if self.window_s > 0.0 => {
                Some(b.saturating_sub(a).as_secs_f64() / self.window_s)
            }
            _ => None,
        };
        let frames = m.frames.frames();
        let io = &self.io;
        ServerReport {
            tick_hz: self.tick_hz,
            game: self.game.to_string(),
            map: self.map.clone(),
            matches: self.startup_matches,
            players_per_match: self.players_per_match,
            workers: self.workers,
            realtime_workers: self.realtime_workers,
            rt_priority: self.rt_priority.map(u32::from),
            duration_s: self.window_s,
            warmup_s: self.warmup.as_secs_f64(),
            match_frame_ms: frames.percentiles(),
            worker_frame_ms: m.worker_frames.percentiles(),
            categories_ms: m.frames.category_means_ms(),
            phases_ms: m.frames.phase_means_ms(),
            ticks,
            schedule,
            wake_late_ms: m.wake_late.percentiles(),
            tick_start_late_ms: m.tick_late.percentiles(),
            matches_finished: self.retired.matches_finished,
            shots_fired: self.retired.shots_fired,
            shots_rewind_clamped: self.retired.shots_clamped,
            max_rewind_ms: self.max_rewind.as_secs_f64() * 1e3,
            replication: self.replication(),
            results_failed: self.retired.results_failed,
            results_written: self.retired.results_written,
            results_unwritten: self.retired.results_unwritten,
            projected_games_per_core: frames
                .mean_ms()
                .and_then(|ms| projected_games_per_core(self.tick_hz, ms)),
            cpu_util,
            memory: None,
            datagrams: Datagrams {
                received: io.received,
                sent: io.sent,
                send_errors: io.send_errors,
                bytes_in: io.bytes_in,
                bytes_out: io.bytes_out,
                recv_calls: io.recv_calls,
                send_calls: io.send_calls,
                per_recv_call: (io.recv_calls > 0).then(|| io.datagrams_per_recv_call()),
                per_send_call: (io.send_calls > 0).then(|| io.datagrams_per_send_call()),
                dropped: self.dropped.clone(),
            },
            kicked: self.kicked.clone(),
            frame_seconds: m.seconds.closed.clone(),
            slowest_frames: m.slowest.report(),
            budgets_ms: (0..BUDGET_SLOTS)
                .filter_map(|s| Some((slot_name(s).to_string(), self.budgets.ns[s]? as f64 / 1e6)))
                .collect(),
            budget_violations: (0..BUDGET_SLOTS)
                .filter(|&s| self.budgets.ns[s].is_some() || m.violations[s] > 0)
                .map(|s| (slot_name(s).to_string(), m.violations[s]))
                .collect(),
            late_causes: self.late_causes,
            preemption: self.preemption,
        }
    }

    /// What replication sent, summed over every match the workers hosted.
    fn replication(&self) -> Replication {
        let r = &self.retired;
        let s = &r.replication;
        let per = |bytes: u64| (r.snapshots > 0).then(|| bytes as f64 / r.snapshots as f64);
        let (hits, misses) = (s.cache_hits, s.cache_misses);
        Replication {
            snapshots: r.snapshots,
            body_bytes_per_snapshot: per(r.body_bytes),
            full_state_bytes_per_snapshot: per(r.full_state_bytes),
            body_to_full_state: (r.full_state_bytes > 0)
                .then(|| r.body_bytes as f64 / r.full_state_bytes as f64),
            max_staleness_ticks: s.worst_staleness_ticks,
            cache_hit_rate: (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64),
            full_records: s.full_records,
            delta_records: s.delta_records,
            deferred: s.deferred,
            states_per_snapshot: (s.snapshots > 0)
                .then(|| (s.full_records + s.delta_records) as f64 / s.snapshots as f64),
            max_states_per_snapshot: s.max_states_per_snapshot,
            relevant_per_snapshot: (s.snapshots > 0)
                .then(|| s.relevant as f64 / s.snapshots as f64),
            deferred_staleness_ticks: (s.deferred > 0)
                .then(|| s.deferred_staleness_ticks as f64 / s.deferred as f64),
            waiting_per_snapshot: (s.snapshots > 0).then(|| s.waiting as f64 / s.snapshots as f64),
            rate_by_distance: (!self.rate_by_distance.is_off()).then_some(
                tickforge_telemetry::report::RateByDistance {
                    halve_every_m: f64::from(self.rate_by_distance.halve_every_m),
                    slowest_every_ticks: self.rate_by_distance.slowest_every_ticks,
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_seconds_close_each_second_with_its_percentiles_and_counts() {
        let mut f = FrameSeconds::default();
        for i in 1..=100u64 {
            f.record(0, i * 1000, i == 100, false, false);
        }
        f.record(2, 5_000_000, true, true, true);
        // A straggler of second 0 recorded while second 2 is open counts in second 2.
        f.record(0, 1_000, false, false, false);
        f.close();
        assert_eq!(f.closed.len(), 2, "second 1 had no frame: {:?}", f.closed);
        let (a, b) = (f.closed[0], f.closed[1]);
        assert_eq!((a.s, a.frames, a.late, a.hitches), (0, 100, 1, 0));
        assert!(
            (a.p50 - 0.050).abs() < 1e-3 && (a.p99 - 0.099).abs() < 1e-3,
            "{a:?}"
        );
        assert!((a.max - 0.100).abs() < 1e-3, "{a:?}");
        assert_eq!((b.s, b.frames, b.late, b.hitches), (2, 2, 1, 1));
        assert_eq!((a.late_host, b.late_host), (0, 1), "the host's late tick");
        assert!((b.max - 5.0).abs() < 0.01, "{b:?}");
    }

    #[test]
    fn frame_seconds_stop_at_the_cap_without_growing() {
        let mut f = FrameSeconds::default();
        let reserved = f.closed.capacity();
        assert!(reserved >= MAX_FRAME_SECONDS);
        for s in 0..(MAX_FRAME_SECONDS as u32 + 10) {
            f.record(s, 1_000, false, false, false);
        }
        f.close();
        assert_eq!(f.closed.len(), MAX_FRAME_SECONDS);
        assert_eq!(f.closed.capacity(), reserved, "never reallocated");
        assert_eq!(f.closed.last().unwrap().s, MAX_FRAME_SECONDS as u32 - 1);
    }

    #[test]
    fn expected_ticks_count_the_grid_inside_the_window() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // A 1 ms grid from t0: deadlines t0, t0+1ms, ...; [t0+2ms, t0+5ms) holds 2, 3, 4.
        assert_eq!(grid_ticks(t0, 1e6, t0 + ms(2), t0 + ms(5)), 3);
        // A grid that starts inside the window counts from its start.
        assert_eq!(grid_ticks(t0 + ms(3), 1e6, t0, t0 + ms(5)), 2);
        // Phase-spread: half a period later, still one tick per period.
        let half = Duration::from_micros(500);
        assert_eq!(grid_ticks(t0 + half, 1e6, t0 + ms(2), t0 + ms(5)), 3);
        // An empty or reversed window holds none.
        assert_eq!(grid_ticks(t0, 1e6, t0 + ms(5), t0 + ms(2)), 0);
    }
}
