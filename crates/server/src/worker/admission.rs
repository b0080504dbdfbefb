//! A match's life in a worker: admission against the measured cost, creation between
//! ticks, and removal (its result is persisted by [`super::persist`]).
//!
//! Capacity is measured, not configured: the mean match frame cost of the last whole
//! second against the budget, 0.9 of a tick (DESIGN.md), with `max_matches_per_worker` as
//! a cap. A match is only as costly as its players make it, so a burst of creations
//! before their players arrive can overshoot the measured bound; the cap limits that.

use std::time::{Duration, Instant};

use tickforge_api::MatchSetup;
use tickforge_io::time;
use tickforge_proto::MatchId;
use tickforge_replication::ReplicationStats;
use tickforge_telemetry::prometheus::ReplicationCounts;

use super::{Hosted, Worker};
use crate::admin::{
    AdminCommand, CreateError, MatchCost, MatchSpec, MatchState, MatchStatus, WorkerLink,
};

/// Share of each tick a worker may fill with match frames; the rest is kept for the OS
/// (DESIGN.md's frame budget).
pub const ADMISSION_BUDGET_SHARE: f64 = 0.9;

/// Matches whose frames cost `mean_cost_ns` each that fit in one tick of `period_ns`:
/// ⌊0.9 × period ÷ cost⌋ (saturating; a zero cost fits any number).
pub fn matches_that_fit(mean_cost_ns: u64, period_ns: u64) -> u32 {
    if mean_cost_ns == 0 {
        return u32::MAX;
    }
    let fit = (ADMISSION_BUDGET_SHARE * period_ns as f64 / mean_cost_ns as f64).floor();
    fit.min(f64::from(u32::MAX)) as u32
}

/// How many more matches a worker hosting `hosted` may take: `max_per_worker` less those
/// hosted, and, once a mean frame cost has been measured, no more than
/// [`matches_that_fit`] less those hosted.
pub fn remaining_capacity(
    hosted: u32,
    max_per_worker: u32,
    mean_cost_ns: Option<u64>,
    period_ns: u64,
) -> u32 {
    let by_cost = mean_cost_ns.map_or(u32::MAX, |c| matches_that_fit(c, period_ns));
    max_per_worker.min(by_cost).saturating_sub(hosted)
}

/// A running mean of match frame cost over the last whole second. Call
/// [`CostWindow::add`] per match frame and [`CostWindow::roll`] once a second.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct CostWindow {
    sum_ns: u64,
    frames: u64,
    last_mean_ns: Option<u64>,
}

impl CostWindow {
    pub(super) fn add(&mut self, ns: u64) {
        self.sum_ns = self.sum_ns.saturating_add(ns);
        self.frames += 1;
    }

    /// Ends the second: its mean becomes the one admission uses; a second with no frames
    /// (no matches) leaves no measurement.
    pub(super) fn roll(&mut self) {
        self.last_mean_ns = self.sum_ns.checked_div(self.frames);
        *self = CostWindow {
            last_mean_ns: self.last_mean_ns,
            ..CostWindow::default()
        };
    }

    pub(super) fn mean_ns(&self) -> Option<u64> {
        self.last_mean_ns
    }
}

impl Worker {
    /// Takes every waiting admin command; called once per wake-up, after the frame.
    pub(super) fn take_commands(&mut self, now: Instant, draining: bool) {
        while let Some(command) = self.admin.as_ref().and_then(WorkerLink::poll_command) {
            match command {
                AdminCommand::CreateMatch(request) => {
                    let verdict = self.admit(&request.spec, draining);
                    let created = verdict.is_ok();
                    if created {
                        self.create_match(now, request.match_id, &request.spec);
                    }
                    // The admin gave up waiting, so nobody holds tokens for the match.
                    if !request.answer(verdict) && created {
                        self.remove_match(self.matches.len() - 1);
                    }
                    // The new match shows in the status at once (Agones' `rooms` count
                    // reads it), not at the next periodic publish.
                    if created {
                        self.publish();
                    }
                }
            }
        }
    }

    /// Whether this worker takes a match of `spec` now; the error says why not.
    fn admit(&self, spec: &MatchSpec, draining: bool) -> Result<(), CreateError> {
        if draining {
            return Err(CreateError::Draining);
        }
        if spec.tick_hz != self.config.tick_hz {
            return Err(CreateError::Unsupported {
                reason: format!(
                    "this server runs every match at {} Hz, not {}",
                    self.config.tick_hz, spec.tick_hz
                ),
            });
        }
        let hosted = self.matches.len() as u32;
        let max = self.config.max_matches_per_worker;
        let period_ns = self.period().as_nanos() as u64;
        let mean = self.cost.mean_ns();
        if remaining_capacity(hosted, max, mean, period_ns) == 0 {
            let reason = match mean {
                Some(ns) if matches_that_fit(ns, period_ns) < max => format!(
                    "{hosted} matches at a mean frame of {:.1} µs fill the {:.0} µs budget \
                     (0.9 of a tick)",
                    ns as f64 / 1e3,
                    ADMISSION_BUDGET_SHARE * period_ns as f64 / 1e3
                ),
                _ => format!("{hosted} of {max} matches (max_matches_per_worker)"),
            };
            return Err(CreateError::Full { reason });
        }
        let seated: usize = self.matches.iter().map(|m| m.seats()).sum();
        let slots = usize::from(self.transport.max_clients());
        if seated + usize::from(spec.players) > slots {
            return Err(CreateError::Full {
                reason: format!(
                    "{} players do not fit in the {} client slots left",
                    spec.players,
                    slots.saturating_sub(seated)
                ),
            });
        }
        Ok(())
    }

    /// Creates match `id` in the phase group with the fewest matches, its first tick due at
    /// the next instant of that phase, with the smallest stagger no match of that group
    /// has (`MatchSetup::stagger`). Allocates (a world, its buffers): between ticks only.
    fn create_match(&mut self, now: Instant, id: MatchId, spec: &MatchSpec) {
        let period_ns = self.period().as_nanos() as u64;
        let since = |t: Instant| t.saturating_duration_since(self.start).as_nanos() as u64;
        let phases: Vec<u64> = self
            .hosted
            .iter()
            .map(|h| since(h.grid) % period_ns)
            .collect();
        let groups =
            crate::config::phase_groups_for(self.config.phase_groups, self.hosted.len() + 1);
        let phase = emptiest_group(&phases, period_ns, groups);
        let group = group_of(phase, period_ns, groups);
        let stagger = free_stagger(
            (phases.iter().zip(&self.hosted))
                .filter(|&(&p, _)| group_of(p, period_ns, groups) == group)
                .map(|(_, h)| h.stagger),
        );
        let now_ns = since(now);
        let periods = now_ns.saturating_sub(phase).div_ceil(period_ns);
        let grid = self.start + Duration::from_nanos(periods * period_ns + phase);
        let setup = MatchSetup {
            seats: spec.players,
            tick_hz: spec.tick_hz,
            record: self.config.record_dir.is_some(),
            stagger,
        };
        self.matches.push(spec.maker.make(id, setup, grid));
        let budgets = super::match_budgets(&self.config.budgets, spec.tick_hz, spec.players);
        self.hosted.push(Hosted::new(grid, false, budgets, stagger));
    }

    /// Removes every match the admin API created that no player has joined within
    /// `unjoined_match_ttl` of its creation: its tokens were never used, and it would hold
    /// capacity forever. No result is written (nothing was played); each one counts in
    /// `matches_reclaimed`. Startup matches are never reclaimed. Off the tick.
    pub(super) fn reclaim_unjoined(&mut self, now: Instant) {
        let ttl = self.config.unjoined_match_ttl;
        let mut i = 0;
        while i < self.hosted.len() {
            let h = &self.hosted[i];
            let stale = !h.restarts
                && !h.joined
                && !h.over
                && now.saturating_duration_since(h.created) >= ttl;
            if stale {
                // The last match takes index i: look at i again.
                self.remove_match(i);
                self.metrics.matches_reclaimed += 1;
            } else {
                i += 1;
            }
        }
    }

    /// Removes every match marked over in this wake-up.
    pub(super) fn remove_finished(&mut self) {
        while self.finished > 0 {
            let Some(i) = self.hosted.iter().position(|h| h.over) else {
                break;
            };
            self.remove_match(i);
            self.finished -= 1;
        }
        self.finished = 0;
    }

    /// Removes match `i`: its clients are disconnected, its counters kept for the report,
    /// and the last match takes its index.
    fn remove_match(&mut self, i: usize) {
        let last = self.matches.len() - 1;
        for (client, route) in self.routes.iter_mut().enumerate() {
            match route {
                Some((mi, _)) if *mi == i => {
                    *route = None;
                    self.transport
                        .disconnect(tickforge_proto::ClientIndex(client as u16));
                }
                Some((mi, _)) if *mi == last => *mi = i,
                _ => {}
            }
        }
        let m = self.matches.swap_remove(i);
        let h = self.hosted.swap_remove(i);
        // Its ticks were due until now: a match behind its schedule has its next deadline
        // in the past, and the ticks due since are its backlog, not ticks never asked for.
        let end = m.next_deadline().max(time::now());
        self.retired.add(m.as_ref(), h.grid, end);
    }

    /// Reclaims the admin-made matches nobody joined within `unjoined_match_ttl` (see
    /// [`Worker::reclaim_unjoined`]), then publishes the matches and metrics to the admin
    /// thread, if it is not reading them right now. About once a second, off the tick;
    /// reuses the status's memory.
    pub(super) fn publish(&mut self) {
        if self.admin.is_none() {
            return;
        }
        self.reclaim_unjoined(time::now());
        self.metrics.bytes_in = self.io.bytes_in;
        self.metrics.bytes_out = self.io.bytes_out;
        self.metrics.packets_in = self.io.received;
        self.metrics.packets_out = self.io.sent;
        self.metrics.players_connected = self.matches.iter().map(|m| m.connected() as u64).sum();
        self.metrics.matches = self.matches.len() as u64;
        self.metrics.replication = replication_counts(
            self.retired.replication(),
            self.matches.iter().map(|m| m.replication_stats()),
        );
        self.count_faults();
        let remaining = remaining_capacity(
            self.matches.len() as u32,
            self.config.max_matches_per_worker,
            self.cost.mean_ns(),
            self.period().as_nanos() as u64,
        );
        let Some(link) = &self.admin else { return };
        let (matches, hosted, metrics) = (&self.matches, &self.hosted, &self.metrics);
        link.publish(|status| {
            status.metrics = *metrics;
            status.remaining = remaining;
            // Each match's entry is overwritten in place, its round list's memory reused.
            status.matches.truncate(matches.len());
            for (k, (m, h)) in matches.iter().zip(hosted).enumerate() {
                let now = MatchStatus {
                    id: m.id(),
                    players_connected: m.connected() as u32,
                    tick: m.tick().0,
                    state: if m.connected() > 0 {
                        MatchState::Running
                    } else {
                        MatchState::Waiting
                    },
                    ticks: h.counters.ticks,
                    late_ticks: h.counters.late,
                    hitches: h.counters.hitches,
                    cost: MatchCost::default(),
                };
                let entry = match status.matches.get_mut(k) {
                    Some(entry) => {
                        let cost = std::mem::take(&mut entry.cost);
                        *entry = MatchStatus { cost, ..now };
                        entry
                    }
                    None => {
                        status.matches.push(now);
                        &mut status.matches[k]
                    }
                };
                entry.cost.fill(&h.history);
            }
        });
    }
}

impl Worker {
    /// Copies the running fault counts into the metrics: datagrams dropped, connections
    /// refused and kicked, by reason. Off the tick; allocates nothing.
    pub(super) fn count_faults(&mut self) {
        let m = &mut self.metrics;
        for (reason, n) in self.transport.stats().dropped_all() {
            m.dropped.set(reason, n);
        }
        let d = &self.drops;
        let far_inputs = self.retired.far_inputs
            + self
                .matches
                .iter()
                .map(|m| m.counters().far_inputs)
                .sum::<u64>();
        for (reason, n) in [
            ("oversize", d.oversize),
            ("bad_message", d.bad_message),
            ("bad_cmd", d.bad_cmd),
            ("far_inputs", far_inputs),
        ] {
            m.dropped.set(reason, n);
        }
        m.refused.set("no_such_match", d.no_such_match);
        m.refused.set("match_full", d.match_full);
        m.kicked.set("misbehaved", d.misbehaved);
        m.kicked.set("flooding", d.flooding);
        m.kicked.set("refused_message", d.refused_messages);
        m.kicked.set("stalled", d.stalled);
        m.kicked.set("timed_out", d.timed_out);
        if let Some(p) = &self.persister {
            m.results_written = p.written();
            m.results_failed = p.failed();
            m.results_pending = p.pending();
        }
    }
}

/// `/metrics`' replication counters: what the matches that left did (`retired`) and what
/// the hosted ones have done (`live`); the staleness is the live matches' alone.
pub fn replication_counts(
    retired: &ReplicationStats,
    live: impl IntoIterator<Item = ReplicationStats>,
) -> ReplicationCounts {
    let mut all = *retired;
    let mut stalest = 0;
    for m in live {
        stalest = stalest.max(m.max_staleness_ticks);
        all = all.merged(&m);
    }
    ReplicationCounts {
        snapshots: all.snapshots,
        states: all.full_records + all.delta_records,
        gone: all.gone_records,
        relevant: all.relevant,
        left_out_room: all.deferred,
        left_out_distance: all.waiting,
        encodings_shared: all.cache_hits,
        encodings_computed: all.cache_misses,
        packets_lost: all.packets_lost,
        max_staleness_ticks: u64::from(stalest),
    }
}

/// Which of `groups` phase groups, evenly spread over a period of `period_ns`, a match
/// `phase` nanoseconds into the period belongs to.
fn group_of(phase: u64, period_ns: u64, groups: u32) -> u64 {
    let groups = u64::from(groups.max(1));
    (phase / (period_ns / groups).max(1)).min(groups - 1)
}

/// The start of the phase group (one of `groups` evenly spread over a period of
/// `period_ns`) holding the fewest of `phases` (nanoseconds into the period); the earliest
/// such group on a tie.
fn emptiest_group(phases: &[u64], period_ns: u64, groups: u32) -> u64 {
    let width = (period_ns / u64::from(groups.max(1))).max(1);
    (0..u64::from(groups.max(1)))
        .min_by_key(|&g| {
            (phases.iter())
                .filter(|&&p| group_of(p, period_ns, groups) == g)
                .count()
        })
        .map_or(0, |g| g * width)
}

/// The smallest stagger not in `used`: a match that joins a group whose matches have
/// staggers 0 and 2 (the one with 1 ended) takes 1, so that its periodic work falls on a
/// tick of its own.
fn free_stagger(used: impl Iterator<Item = u32>) -> u32 {
    let used: Vec<u32> = used.collect();
    let mut stagger = 0;
    while used.contains(&stagger) {
        stagger += 1;
    }
    stagger
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 128 Hz.
    const PERIOD_NS: u64 = 7_812_500;

    #[test]
    fn replication_counters_add_the_retired_to_the_live_and_staleness_is_the_live_worst() {
        let stats = |snapshots, deferred, waiting, stale| ReplicationStats {
            snapshots,
            full_records: snapshots,
            delta_records: 3 * snapshots,
            deferred,
            waiting,
            relevant: 10 * snapshots,
            cache_hits: 2 * snapshots,
            cache_misses: snapshots,
            max_staleness_ticks: stale,
            ..ReplicationStats::default()
        };
        let retired = stats(100, 7, 1, 90);
        let c = replication_counts(&retired, [stats(10, 2, 0, 4), stats(20, 0, 5, 12)]);
        assert_eq!(c.snapshots, 130);
        assert_eq!(c.states, 4 * 130);
        assert_eq!(c.relevant, 1300);
        assert_eq!((c.left_out_room, c.left_out_distance), (9, 6));
        assert_eq!((c.encodings_shared, c.encodings_computed), (260, 130));
        assert_eq!(
            c.max_staleness_ticks, 12,
            "a match that left is not stale now"
        );
        assert_eq!(replication_counts(&retired, []).max_staleness_ticks, 0);
    }

    #[test]
    fn capacity_is_the_budget_over_the_measured_cost() {
        // 0.9 × 7.8125 ms = 7.03 ms: 60 matches of 117 µs, 70 of 100 µs.
        assert_eq!(matches_that_fit(117_000, PERIOD_NS), 60);
        assert_eq!(matches_that_fit(100_000, PERIOD_NS), 70);
        assert_eq!(matches_that_fit(0, PERIOD_NS), u32::MAX);
        assert_eq!(remaining_capacity(50, 120, Some(117_000), PERIOD_NS), 10);
        assert_eq!(remaining_capacity(60, 120, Some(117_000), PERIOD_NS), 0);
        // Oversubscribed: none left, never a wrap-around.
        assert_eq!(remaining_capacity(90, 120, Some(117_000), PERIOD_NS), 0);
    }

    #[test]
    fn the_cap_bounds_capacity_with_or_without_a_measurement() {
        assert_eq!(remaining_capacity(0, 4, None, PERIOD_NS), 4);
        assert_eq!(remaining_capacity(3, 4, None, PERIOD_NS), 1);
        assert_eq!(remaining_capacity(4, 4, Some(1_000), PERIOD_NS), 0);
        assert_eq!(remaining_capacity(2, 4, Some(1_000), PERIOD_NS), 2);
    }

    #[test]
    fn the_cost_window_means_the_last_whole_second() {
        let mut w = CostWindow::default();
        assert_eq!(w.mean_ns(), None);
        w.add(100);
        w.add(300);
        assert_eq!(w.mean_ns(), None, "no second has ended yet");
        w.roll();
        assert_eq!(w.mean_ns(), Some(200));
        w.add(1000);
        w.roll();
        assert_eq!(w.mean_ns(), Some(1000), "only the last second counts");
        w.roll();
        assert_eq!(
            w.mean_ns(),
            None,
            "a second without frames measures nothing"
        );
    }

    /// A worker of the walking test game on loopback with one startup match, `config`
    /// changing the rest.
    fn walk_worker(config: crate::config::ServerConfig) -> Worker {
        crate::testing::register_walk();
        Worker::new(crate::config::ServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            matches: 1,
            ..config
        })
        .unwrap()
    }

    #[test]
    fn only_admin_made_matches_nobody_joined_are_reclaimed_after_the_ttl() {
        let mut w = walk_worker(crate::config::ServerConfig {
            unjoined_match_ttl: Duration::from_secs(60),
            ..Default::default()
        });
        let now = time::now();
        let spec = MatchSpec::walk_default();
        w.create_match(now, MatchId(2), &spec);
        w.create_match(now, MatchId(3), &spec);
        w.create_match(now, MatchId(4), &spec);
        let index = |w: &Worker, id: u32| w.matches.iter().position(|m| m.id() == MatchId(id));
        let joined = index(&w, 3).unwrap();
        w.hosted[joined].joined = true;
        let ids = |w: &Worker| {
            let mut ids: Vec<u32> = w.matches.iter().map(|m| m.id().0).collect();
            ids.sort_unstable();
            ids
        };

        // Before the TTL (counted from each match's first deadline) nothing goes.
        w.reclaim_unjoined(now + Duration::from_secs(59));
        assert_eq!(ids(&w), vec![1, 2, 3, 4]);
        assert_eq!(w.metrics.matches_reclaimed, 0);
        // After it, the two nobody joined go; the startup match and the joined one stay.
        w.reclaim_unjoined(now + Duration::from_secs(61));
        assert_eq!(ids(&w), vec![1, 3]);
        assert_eq!(w.metrics.matches_reclaimed, 2);
        assert_eq!(w.matches.len(), w.hosted.len());
        assert!(
            w.hosted[index(&w, 3).unwrap()].joined,
            "kept beside its match"
        );
        w.reclaim_unjoined(now + Duration::from_secs(3600));
        assert_eq!(ids(&w), vec![1, 3]);
    }

    #[test]
    fn a_new_match_joins_the_emptiest_phase_group() {
        assert_eq!(emptiest_group(&[], 100, 4), 0);
        assert_eq!(emptiest_group(&[0], 100, 4), 25);
        assert_eq!(emptiest_group(&[0, 25, 50], 100, 4), 75);
        assert_eq!(
            emptiest_group(&[0, 25, 50, 75], 100, 4),
            0,
            "a tie takes the first"
        );
        assert_eq!(emptiest_group(&[0, 10, 30], 100, 2), 50);
        assert_eq!(
            emptiest_group(&[5, 99], 100, 1),
            0,
            "one group: all together"
        );
        assert_eq!((group_of(0, 100, 4), group_of(74, 100, 4)), (0, 2));
        assert_eq!(
            group_of(99, 100, 3),
            2,
            "the remainder joins the last group"
        );
    }

    #[test]
    fn matches_made_into_one_phase_group_take_turns_with_their_staggers() {
        let mut w = walk_worker(crate::config::ServerConfig {
            phase_groups: 1,
            ..Default::default()
        });
        let now = time::now();
        let spec = MatchSpec::walk_default();
        for id in 2..=4 {
            w.create_match(now, MatchId(id), &spec);
        }
        let staggers = |w: &Worker| -> Vec<(u32, u32)> {
            let mut s: Vec<_> = (w.matches.iter().zip(&w.hosted))
                .map(|(m, h)| (m.id().0, h.stagger))
                .collect();
            s.sort_unstable();
            s
        };
        assert_eq!(staggers(&w), vec![(1, 0), (2, 1), (3, 2), (4, 3)]);
        // Match 2 leaves; the next takes its stagger, not a fifth.
        let two = w.matches.iter().position(|m| m.id() == MatchId(2)).unwrap();
        w.remove_match(two);
        w.create_match(now, MatchId(5), &spec);
        assert_eq!(staggers(&w), vec![(1, 0), (3, 2), (4, 3), (5, 1)]);
    }

    #[test]
    fn a_new_match_takes_the_smallest_stagger_its_group_does_not_use() {
        assert_eq!(free_stagger([].into_iter()), 0);
        assert_eq!(free_stagger([0, 1, 2].into_iter()), 3);
        assert_eq!(free_stagger([0, 2].into_iter()), 1, "the gap a match left");
        assert_eq!(free_stagger([3, 1].into_iter()), 0);
    }
}
