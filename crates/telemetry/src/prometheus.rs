//! Metrics for Prometheus: a plain-data snapshot a worker fills, and its text rendering.
//!
//! A worker keeps one [`MetricsSnapshot`] as its running totals: [`MetricsSnapshot::record_frame`]
//! after each match frame, `+=` on the counters as datagrams come and go. The snapshot is
//! `Copy` and fixed-size, so none of this allocates, and publishing it about once a second
//! is a copy. Whoever serves `/metrics` sums the workers' copies with
//! [`MetricsSnapshot::merge`] and calls [`render`].
//!
//! Rendering uses the `prometheus-client` crate, through a collector that hands its
//! encoder our precomputed bucket counts (no sample is observed twice). That crate writes
//! the OpenMetrics 1.0 text format, the successor of Prometheus's text format 0.0.4 that
//! Prometheus negotiates by the [`CONTENT_TYPE`] header; it differs from 0.0.4 in three
//! visible ways: a counter's `# TYPE` line names the family without its `_total` suffix,
//! the text ends with `# EOF`, and histogram `_sum` and `_count` come before the buckets.
//!
//! Families:
//!
//! | name | type | labels |
//! |---|---|---|
//! | `tickforge_match_frame_seconds` | histogram | — |
//! | `tickforge_frame_seconds` | histogram | `category` (one of [`Category::name`]) |
//! | `tickforge_round_frame_seconds` | histogram | `category` (each [`Category::name`], and `frame` for the whole frame): one observation per finished round, its mean per tick |
//! | `tickforge_budget_violations_total` | counter | `category` (each [`Category::name`], and `frame`): match ticks over the configured budget |
//! | `tickforge_ticks_total`, `tickforge_late_ticks_total`, `tickforge_skipped_ticks_total`, `tickforge_hitches_total` | counter | — |
//! | `tickforge_ticks_late_total` | counter | `cause` (`own`, `others`, `host_preempted`, `host_steal`, `unexplained`: [`crate::report::LateCauses`]) |
//! | `tickforge_bytes_total`, `tickforge_packets_total` | counter | `direction` (`in`, `out`) |
//! | `tickforge_players_connected`, `tickforge_matches` | gauge | — |
//! | `tickforge_datagrams_dropped_total`, `tickforge_connections_refused_total`, `tickforge_connections_kicked_total` | counter | `reason` |
//! | `tickforge_results_written_total`, `tickforge_results_failed_total` | counter | — |
//! | `tickforge_results_pending` | gauge | — |
//! | `tickforge_matches_reclaimed_total` | counter | — |
//! | `tickforge_replication_snapshots_total`, `tickforge_replication_relevant_total`, `tickforge_replication_packets_lost_total` | counter | — |
//! | `tickforge_replication_records_total` | counter | `kind` (`state`, `gone`) |
//! | `tickforge_replication_left_out_total` | counter | `reason` (`room`: no room in the packet; `distance`: waiting for its distance's tick) |
//! | `tickforge_replication_encodings_total` | counter | `source` (`shared`: another client's this tick; `computed`) |
//! | `tickforge_replication_max_staleness_ticks` | gauge | — |
//! | `tickforge_admin_requests_total` | counter | `code` (only with [`render_with_matches`]) |
//! | `tickforge_admin_connections_closed_total` | counter | `reason` (only with [`render_with_matches`]) |
//! | `tickforge_match_ticks_total`, `tickforge_match_late_ticks_total`, `tickforge_match_hitches_total` | counter | `match` (the match id; only with [`render_with_matches`]) |
//! | `tickforge_agones_calls_total`, `tickforge_agones_errors_total` | counter | `call` (`ready`, `health`, `counter`, `annotation`, `gameserver`, `watch`, `shutdown`; only with [`render_with_matches`] and Agones on) |
//! | `tickforge_agones_ready` | gauge | — (1 once the sidecar acknowledged Ready) |

use std::borrow::Cow;
use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::rounds::{slot_name, RoundSummary, BUDGET_SLOTS};
use crate::{Category, FrameRecord};

/// The `Content-Type` of the text [`render`] writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds of the frame-time buckets, in nanoseconds, ascending; a last `+Inf` bucket
/// follows. They bracket the 117 µs budget of a match frame at 60 games per core and reach
/// one (7.8125 ms) and two ticks at 128 Hz, where a frame is a hitch.
pub const FRAME_BUCKET_BOUNDS_NS: [u64; 12] = [
    5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000,
    7_812_500, 15_625_000,
];

/// Number of buckets including the last, unbounded one.
pub const FRAME_BUCKETS: usize = FRAME_BUCKET_BOUNDS_NS.len() + 1;

/// A histogram of durations over [`FRAME_BUCKET_BOUNDS_NS`]: per-bucket counts (not
/// cumulative) and the exact sum. Recording is a search of twelve bounds; it never allocates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameBuckets {
    counts: [u64; FRAME_BUCKETS],
    sum_ns: u64,
}

impl FrameBuckets {
    /// Counts one duration of `ns` nanoseconds in the first bucket whose bound is `>= ns`.
    pub fn record_ns(&mut self, ns: u64) {
        let i = FRAME_BUCKET_BOUNDS_NS.partition_point(|&bound| bound < ns);
        self.counts[i] += 1;
        self.sum_ns = self.sum_ns.saturating_add(ns);
    }

    /// Values per bucket (not cumulative); the last is above every bound.
    pub fn counts(&self) -> &[u64; FRAME_BUCKETS] {
        &self.counts
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Sum of the values recorded, in nanoseconds (saturating).
    pub fn sum_ns(&self) -> u64 {
        self.sum_ns
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &FrameBuckets) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
    }
}

/// What one worker (or a whole host, after [`MetricsSnapshot::merge`]) exposes to
/// Prometheus. Counters and histograms run from the worker's start; gauges are the
/// present value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// CPU time of each match frame (one match's tick).
    pub match_frame: FrameBuckets,
    /// Exclusive time per category in each match frame that entered the category,
    /// indexed by [`Category::index`].
    pub categories: [FrameBuckets; Category::COUNT],
    /// The mean per tick of each finished round: by budget slot (each category by
    /// [`Category::index`], then the whole frame at [`FRAME_SLOT`]).
    pub round_frame: [FrameBuckets; BUDGET_SLOTS],
    /// Match ticks over budget, by budget slot ([`crate::rounds::Budgets`]).
    pub budget_violations: [u64; BUDGET_SLOTS],
    /// Match ticks run.
    pub ticks: u64,
    /// Ticks that started more than 1 ms after their deadline.
    pub late_ticks: u64,
    /// Ticks skipped because the worker fell a whole tick behind.
    pub skipped_ticks: u64,
    /// Hitches: ticks more than one tick late, or frames over twice their budget.
    pub hitches: u64,
    /// UDP payload bytes received.
    pub bytes_in: u64,
    /// UDP payload bytes sent.
    pub bytes_out: u64,
    /// Datagrams received.
    pub packets_in: u64,
    /// Datagrams sent.
    pub packets_out: u64,
    /// Players connected now.
    pub players_connected: u64,
    /// Matches hosted now.
    pub matches: u64,
    /// Datagrams dropped, by reason: the transport's (garbage, replays, bad tokens, rate
    /// limits) and the worker's (oversize, a payload from no seat, bad messages).
    pub dropped: ReasonCounts,
    /// Connections refused after the handshake, by reason (`no_such_match`, `match_full`).
    pub refused: ReasonCounts,
    /// Connections the server closed on a client's misbehaviour, by reason (`misbehaved`:
    /// broke the protocol above the transport; `flooding`: far more than a packet a tick).
    pub kicked: ReasonCounts,
    /// Finished matches' result lines written and fsynced.
    pub results_written: u64,
    /// Attempts to write or fsync a result line (or an action file) that failed.
    pub results_failed: u64,
    /// Result lines not yet durable: waiting for the disk, or kept in memory after a failed
    /// write until it comes back.
    pub results_pending: u64,
    /// Matches created through the admin API and removed because nobody joined them in
    /// time (`unjoined_match_ttl_s`).
    pub matches_reclaimed: u64,
    /// Late ticks by cause, in [`crate::report::LateCauses::NAMES`] order (they add up to
    /// `late_ticks`).
    pub late_by_cause: [u64; 5],
    /// What replication did, over every match the worker hosted since it started.
    pub replication: ReplicationCounts,
}

/// What replication did: how much of what mattered to clients reached them. A crowd
/// whose packets cannot hold everything relevant shows it here first: `left_out_room`
/// grows against `relevant`, and `max_staleness_ticks` climbs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicationCounts {
    /// Snapshot bodies written.
    pub snapshots: u64,
    /// Entity states sent (full or delta).
    pub states: u64,
    /// Gone records sent.
    pub gone: u64,
    /// Relevant entities summed over snapshots: what competed for room in each.
    pub relevant: u64,
    /// Relevant entities left out of a snapshot for lack of room.
    pub left_out_room: u64,
    /// Relevant entities left out to wait for their distance's tick (the rate by distance).
    pub left_out_distance: u64,
    /// Encodings copied from another client's of the same tick.
    pub encodings_shared: u64,
    /// Encodings computed.
    pub encodings_computed: u64,
    /// Packets to clients judged lost from their acks.
    pub packets_lost: u64,
    /// The most ticks an entity relevant to some client has gone unsent, as of each
    /// match's latest tick: the worst over matches.
    pub max_staleness_ticks: u64,
}

impl ReplicationCounts {
    /// Both together: sums, and the worse staleness.
    pub fn merge(&mut self, other: &ReplicationCounts) {
        self.snapshots += other.snapshots;
        self.states += other.states;
        self.gone += other.gone;
        self.relevant += other.relevant;
        self.left_out_room += other.left_out_room;
        self.left_out_distance += other.left_out_distance;
        self.encodings_shared += other.encodings_shared;
        self.encodings_computed += other.encodings_computed;
        self.packets_lost += other.packets_lost;
        self.max_staleness_ticks = self.max_staleness_ticks.max(other.max_staleness_ticks);
    }
}

/// Entries of one [`ReasonCounts`]: distinct reasons up to one less, and `other`, which
/// takes the counts of any reason past them.
pub const MAX_REASONS: usize = 32;

/// Counts by reason, for a counter family with a `reason` label: a fixed table of
/// `(name, count)` pairs in the order reasons were first counted. `Copy` and fixed-size, so
/// counting and publishing it never allocate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasonCounts {
    entries: [(&'static str, u64); MAX_REASONS],
    len: usize,
}

impl Default for ReasonCounts {
    fn default() -> Self {
        ReasonCounts {
            entries: [("", 0); MAX_REASONS],
            len: 0,
        }
    }
}

impl ReasonCounts {
    /// The index of `reason`, taking a free entry for a new one; `None` when every entry
    /// is taken by other reasons.
    fn index(&mut self, reason: &'static str) -> Option<usize> {
        if let Some(i) = self.entries[..self.len].iter().position(|e| e.0 == reason) {
            return Some(i);
        }
        // The last entry is kept for `other`, so a named reason never changes its name.
        (self.len < MAX_REASONS - 1).then(|| {
            self.entries[self.len] = (reason, 0);
            self.len += 1;
            self.len - 1
        })
    }

    /// The catch-all entry for reasons past the table (the last one).
    fn other(&mut self) -> &mut u64 {
        if self.len < MAX_REASONS {
            self.entries[MAX_REASONS - 1] = ("other", 0);
            self.len = MAX_REASONS;
        }
        &mut self.entries[MAX_REASONS - 1].1
    }

    /// Sets the count of `reason` (for a running total kept elsewhere, set again each
    /// time it is published). A reason past the table raises `other` to at least `n`:
    /// `other` never goes back and never counts a total twice. The tables in use hold far
    /// fewer reasons than [`MAX_REASONS`].
    pub fn set(&mut self, reason: &'static str, n: u64) {
        match self.index(reason) {
            Some(i) => self.entries[i].1 = n,
            None => {
                let other = self.other();
                *other = (*other).max(n);
            }
        }
    }

    /// Adds `n` to the count of `reason` (to `other` when the table is full).
    pub fn add(&mut self, reason: &'static str, n: u64) {
        match self.index(reason) {
            Some(i) => self.entries[i].1 += n,
            None => *self.other() += n,
        }
    }

    /// The count of `reason` (0 when never counted).
    pub fn get(&self, reason: &str) -> u64 {
        self.iter().find(|e| e.0 == reason).map_or(0, |e| e.1)
    }

    /// Every reason counted, with its count, in the order first counted.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.entries[..self.len].iter().copied()
    }

    /// The sum over every reason.
    pub fn total(&self) -> u64 {
        self.iter().map(|e| e.1).sum()
    }

    /// Adds every count of `other`, reason by reason.
    pub fn merge(&mut self, other: &ReasonCounts) {
        for (reason, n) in other.iter() {
            self.add(reason, n);
        }
    }
}

impl MetricsSnapshot {
    /// Counts one match frame: one tick, its cost, and each category it entered. Call
    /// once per match tick with the record [`crate::Scopes::end_frame`] returned.
    pub fn record_frame(&mut self, frame: &FrameRecord) {
        self.ticks += 1;
        self.match_frame.record_ns(frame.total_ns);
        for c in Category::ALL {
            if frame.entered & (1 << c.index()) != 0 {
                self.categories[c.index()].record_ns(frame.category_ns[c.index()]);
            }
        }
    }

    /// Counts one finished round: its mean frame and the mean of each category.
    pub fn record_round(&mut self, round: &RoundSummary) {
        for (slot, buckets) in self.round_frame.iter_mut().enumerate() {
            let mean = match round.category_mean_ns.get(slot) {
                Some(&ns) => ns,
                None => round.mean_ns,
            };
            buckets.record_ns(mean);
        }
    }

    /// Counts one match tick's budget violations: bit `slot` of `over` set for each slot
    /// it was over budget in ([`crate::rounds::Budgets::over`]).
    pub fn count_violations(&mut self, over: u16) {
        for (slot, n) in self.budget_violations.iter_mut().enumerate() {
            *n += u64::from(over >> slot & 1);
        }
    }

    /// Adds `other` into this snapshot: counters, histograms and gauges all add, which
    /// turns per-worker snapshots into the host's.
    pub fn merge(&mut self, other: &MetricsSnapshot) {
        self.match_frame.merge(&other.match_frame);
        for (a, b) in self.categories.iter_mut().zip(&other.categories) {
            a.merge(b);
        }
        for (a, b) in self.round_frame.iter_mut().zip(&other.round_frame) {
            a.merge(b);
        }
        for (a, b) in self
            .budget_violations
            .iter_mut()
            .zip(other.budget_violations)
        {
            *a += b;
        }
        self.ticks += other.ticks;
        self.late_ticks += other.late_ticks;
        self.skipped_ticks += other.skipped_ticks;
        self.hitches += other.hitches;
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
        self.packets_in += other.packets_in;
        self.packets_out += other.packets_out;
        self.players_connected += other.players_connected;
        self.matches += other.matches;
        self.dropped.merge(&other.dropped);
        self.refused.merge(&other.refused);
        self.kicked.merge(&other.kicked);
        self.results_written += other.results_written;
        self.results_failed += other.results_failed;
        self.results_pending += other.results_pending;
        self.matches_reclaimed += other.matches_reclaimed;
        for (a, b) in self.late_by_cause.iter_mut().zip(&other.late_by_cause) {
            *a += b;
        }
        self.replication.merge(&other.replication);
    }
}

/// One match's tick counters since it was created, for the per-match families of
/// [`render_with_matches`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatchTicks {
    /// The match id (the `match` label).
    pub match_id: u32,
    /// Ticks run.
    pub ticks: u64,
    /// Ticks that started more than 1 ms after their deadline.
    pub late_ticks: u64,
    /// Ticks more than one tick late, or frames over twice their budget.
    pub hitches: u64,
}

/// A label name that Prometheus would reject.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// Not `[a-zA-Z_][a-zA-Z0-9_]*`, or starting with the reserved `__`.
    #[error("`{0}` is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)")]
    BadName(String),
}

/// Appends `snapshot` to `out` as OpenMetrics text, ending with `# EOF`. Call when
/// `/metrics` is scraped, never in a frame: it allocates.
pub fn render(snapshot: &MetricsSnapshot, out: &mut String) {
    render_with_matches(snapshot, &[], &AdminCounts::default(), out);
}

/// Like [`render`], with one series per match in each of the per-match families (late
/// ticks and hitches by match), and the admin server's requests by status code
/// (`tickforge_admin_requests_total{code}`, left out when empty). Call when `/metrics` is
/// scraped, never in a frame.
pub fn render_with_matches(
    snapshot: &MetricsSnapshot,
    matches: &[MatchTicks],
    admin: &AdminCounts,
    out: &mut String,
) {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(SnapshotCollector(
        *snapshot,
        matches.to_vec(),
        admin.clone(),
    )));
    // Writing to a String cannot fail, and the collector fails only when its writer does.
    let _ = prometheus_client::encoding::text::encode(out, &registry);
}

/// Like [`render`], with `labels` (for example the host's name) added to every sample.
/// Label values may hold any text; they are escaped.
pub fn render_with_labels(
    snapshot: &MetricsSnapshot,
    labels: &[(&str, &str)],
    out: &mut String,
) -> Result<(), LabelError> {
    for (name, _) in labels {
        if !is_label_name(name) {
            return Err(LabelError::BadName((*name).to_string()));
        }
    }
    let mut registry = Registry::with_labels(
        labels
            .iter()
            .map(|(k, v)| (Cow::Owned(k.to_string()), Cow::Owned(v.to_string()))),
    );
    registry.register_collector(Box::new(SnapshotCollector(
        *snapshot,
        Vec::new(),
        AdminCounts::default(),
    )));
    // Writing to a String cannot fail, and the collector fails only when its writer does.
    let _ = prometheus_client::encoding::text::encode(out, &registry);
    Ok(())
}

fn is_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    let first_ok = matches!(bytes.next(), Some(b'a'..=b'z' | b'A'..=b'Z' | b'_'));
    first_ok && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_') && !name.starts_with("__")
}

/// What the admin server counts of its own, for [`render_with_matches`]; empty lists are
/// left out of the text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdminCounts {
    /// Requests answered, by status code.
    pub requests: Vec<(u16, u64)>,
    /// Connections the admin server closed itself (not the client), by reason.
    pub connections_closed: Vec<(&'static str, u64)>,
    /// The Agones SDK calls, when Agones is on.
    pub agones: Option<AgonesCounts>,
}

/// What the Agones thread counts of its SDK calls, for [`render_with_matches`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgonesCounts {
    /// Calls the sidecar answered with a 2xx, by call.
    pub calls: Vec<(&'static str, u64)>,
    /// Calls that failed (no connection, a timeout, a non-2xx answer, a bad body), by call;
    /// every failure is retried.
    pub errors: Vec<(&'static str, u64)>,
    /// The sidecar has acknowledged Ready.
    pub ready: bool,
}

/// Hands a snapshot's numbers, each match's and the admin server's to the encoder on each
/// scrape.
#[derive(Debug)]
struct SnapshotCollector(MetricsSnapshot, Vec<MatchTicks>, AdminCounts);

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> fmt::Result {
        let s = &self.0;
        {
            let mut m = enc.encode_descriptor(
                "tickforge_match_frame_seconds",
                "CPU time of one match tick, its share of the batched socket calls included.",
                None,
                MetricType::Histogram,
            )?;
            histogram(&mut m, &s.match_frame)?;
        }
        {
            let mut m = enc.encode_descriptor(
                "tickforge_frame_seconds",
                "Exclusive time per telemetry category in each match tick that entered it.",
                None,
                MetricType::Histogram,
            )?;
            for c in Category::ALL {
                let labels = [("category", c.name())];
                histogram(&mut m.encode_family(&labels)?, &s.categories[c.index()])?;
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "tickforge_round_frame_seconds",
                "Mean time per match tick of each finished round, by telemetry category \
                 (frame: the whole frame).",
                None,
                MetricType::Histogram,
            )?;
            for (slot, buckets) in s.round_frame.iter().enumerate() {
                let labels = [("category", slot_name(slot))];
                histogram(&mut m.encode_family(&labels)?, buckets)?;
            }
        }
        {
            // Counter family names leave out `_total`: the encoder appends it to each sample.
            let mut m = enc.encode_descriptor(
                "tickforge_budget_violations",
                "Match ticks whose cost in a category (frame: the whole frame) exceeded its \
                 configured budget.",
                None,
                MetricType::Counter,
            )?;
            for (slot, n) in s.budget_violations.iter().enumerate() {
                let labels = [("category", slot_name(slot))];
                m.encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, u64>(n, None)?;
            }
        }
        counter(&mut enc, "tickforge_ticks", "Match ticks run.", s.ticks)?;
        counter(
            &mut enc,
            "tickforge_late_ticks",
            "Ticks that started more than 1 ms after their deadline.",
            s.late_ticks,
        )?;
        labelled(
            &mut enc,
            "tickforge_ticks_late",
            "Late ticks by what made them late: the match's own cost, the worker's other \
             matches, or the host (preempted, stolen), or unexplained.",
            "cause",
            crate::report::LateCauses::NAMES
                .into_iter()
                .zip(s.late_by_cause),
        )?;
        counter(
            &mut enc,
            "tickforge_skipped_ticks",
            "Ticks skipped because a worker fell a whole tick behind.",
            s.skipped_ticks,
        )?;
        counter(
            &mut enc,
            "tickforge_hitches",
            "Ticks more than one tick late, or frames over twice their budget.",
            s.hitches,
        )?;
        labelled(
            &mut enc,
            "tickforge_bytes",
            "UDP payload bytes received (in) and sent (out).",
            "direction",
            [("in", s.bytes_in), ("out", s.bytes_out)],
        )?;
        labelled(
            &mut enc,
            "tickforge_packets",
            "Datagrams received (in) and sent (out).",
            "direction",
            [("in", s.packets_in), ("out", s.packets_out)],
        )?;
        gauge(
            &mut enc,
            "tickforge_players_connected",
            "Players connected now.",
            s.players_connected,
        )?;
        gauge(
            &mut enc,
            "tickforge_matches",
            "Matches hosted now.",
            s.matches,
        )?;
        labelled(
            &mut enc,
            "tickforge_datagrams_dropped",
            "Datagrams dropped, by reason.",
            "reason",
            s.dropped.iter(),
        )?;
        labelled(
            &mut enc,
            "tickforge_connections_refused",
            "Connections refused after the handshake, by reason.",
            "reason",
            s.refused.iter(),
        )?;
        labelled(
            &mut enc,
            "tickforge_connections_kicked",
            "Connections closed for the client's misbehaviour, by reason.",
            "reason",
            s.kicked.iter(),
        )?;
        counter(
            &mut enc,
            "tickforge_results_written",
            "Result lines written and fsynced.",
            s.results_written,
        )?;
        counter(
            &mut enc,
            "tickforge_results_failed",
            "Writes or fsyncs of a result line or action file that failed.",
            s.results_failed,
        )?;
        gauge(
            &mut enc,
            "tickforge_results_pending",
            "Result lines not yet durable (waiting for the disk, or kept after a failure).",
            s.results_pending,
        )?;
        counter(
            &mut enc,
            "tickforge_matches_reclaimed",
            "Admin-made matches removed because nobody joined them in time.",
            s.matches_reclaimed,
        )?;
        replication(&mut enc, &s.replication)?;
        if !self.2.requests.is_empty() {
            let mut m = enc.encode_descriptor(
                "tickforge_admin_requests",
                "Admin HTTP requests answered, by status code.",
                None,
                MetricType::Counter,
            )?;
            for (status, n) in &self.2.requests {
                let code = status.to_string();
                let labels = [("code", code.as_str())];
                m.encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, u64>(n, None)?;
            }
        }
        if !self.2.connections_closed.is_empty() {
            let mut m = enc.encode_descriptor(
                "tickforge_admin_connections_closed",
                "Admin HTTP connections the server closed itself, by reason: header_timeout, \
                 response_timeout, idle_timeout, rejected (431 or 400), evicted (at the cap).",
                None,
                MetricType::Counter,
            )?;
            for (reason, n) in &self.2.connections_closed {
                let labels = [("reason", *reason)];
                m.encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, u64>(n, None)?;
            }
        }
        if let Some(agones) = &self.2.agones {
            by_call(
                &mut enc,
                "tickforge_agones_calls",
                "Agones SDK calls the sidecar answered with success, by call.",
                &agones.calls,
            )?;
            by_call(
                &mut enc,
                "tickforge_agones_errors",
                "Agones SDK calls that failed (refused, timed out, an error status or a bad \
                 body) and were retried, by call.",
                &agones.errors,
            )?;
            let mut m = enc.encode_descriptor(
                "tickforge_agones_ready",
                "1 once the Agones sidecar has acknowledged Ready.",
                None,
                MetricType::Gauge,
            )?;
            m.encode_gauge(&u64::from(agones.ready))?;
        }
        if self.1.is_empty() {
            return Ok(());
        }
        per_match(
            &mut enc,
            "tickforge_match_ticks",
            "Ticks run, by match.",
            &self.1,
            |m| m.ticks,
        )?;
        per_match(
            &mut enc,
            "tickforge_match_late_ticks",
            "Ticks that started more than 1 ms after their deadline, by match.",
            &self.1,
            |m| m.late_ticks,
        )?;
        per_match(
            &mut enc,
            "tickforge_match_hitches",
            "Ticks more than one tick late, or frames over twice their budget, by match.",
            &self.1,
            |m| m.hitches,
        )
    }
}

fn by_call(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    counts: &[(&'static str, u64)],
) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (call, n) in counts {
        let labels = [("call", *call)];
        m.encode_family(&labels)?
            .encode_counter::<NoLabelSet, _, u64>(n, None)?;
    }
    Ok(())
}

fn per_match(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    matches: &[MatchTicks],
    value: impl Fn(&MatchTicks) -> u64,
) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for t in matches {
        let id = t.match_id.to_string();
        let labels = [("match", id.as_str())];
        m.encode_family(&labels)?
            .encode_counter::<NoLabelSet, _, u64>(&value(t), None)?;
    }
    Ok(())
}

type MetricEncoder<'a> = prometheus_client::encoding::MetricEncoder<'a>;

fn histogram(m: &mut MetricEncoder<'_>, h: &FrameBuckets) -> fmt::Result {
    // The encoder takes per-bucket counts and writes them cumulatively.
    let mut buckets = [(f64::INFINITY, 0u64); FRAME_BUCKETS];
    for (i, (bound, count)) in buckets.iter_mut().enumerate() {
        if let Some(ns) = FRAME_BUCKET_BOUNDS_NS.get(i) {
            *bound = *ns as f64 / 1e9;
        }
        *count = h.counts[i];
    }
    m.encode_histogram::<NoLabelSet>(h.sum_ns as f64 / 1e9, h.count(), &buckets, None)
}

fn counter(enc: &mut DescriptorEncoder<'_>, name: &str, help: &str, v: u64) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    m.encode_counter::<NoLabelSet, _, u64>(&v, None)
}

/// A counter family with one label, `label`, a sample per `(value, count)`.
fn labelled<'a>(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    label: &str,
    samples: impl IntoIterator<Item = (&'a str, u64)>,
) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (value, n) in samples {
        let labels = [(label, value)];
        m.encode_family(&labels)?
            .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
    }
    Ok(())
}

/// The replication families.
fn replication(enc: &mut DescriptorEncoder<'_>, r: &ReplicationCounts) -> fmt::Result {
    counter(
        enc,
        "tickforge_replication_snapshots",
        "Snapshot bodies written to clients.",
        r.snapshots,
    )?;
    labelled(
        enc,
        "tickforge_replication_records",
        "Entity records sent: states (full or delta) and gone records.",
        "kind",
        [("state", r.states), ("gone", r.gone)],
    )?;
    counter(
        enc,
        "tickforge_replication_relevant",
        "Relevant entities summed over snapshots: what competed for room in each.",
        r.relevant,
    )?;
    labelled(
        enc,
        "tickforge_replication_left_out",
        "Relevant entities left out of a snapshot: for lack of room in the packet (room), \
         or waiting for their distance's tick (distance).",
        "reason",
        [("room", r.left_out_room), ("distance", r.left_out_distance)],
    )?;
    labelled(
        enc,
        "tickforge_replication_encodings",
        "Entity encodings copied from another client's of the same tick (shared), or \
         computed.",
        "source",
        [
            ("shared", r.encodings_shared),
            ("computed", r.encodings_computed),
        ],
    )?;
    counter(
        enc,
        "tickforge_replication_packets_lost",
        "Packets to clients judged lost from their acks.",
        r.packets_lost,
    )?;
    gauge(
        enc,
        "tickforge_replication_max_staleness_ticks",
        "The most ticks an entity relevant to some client has gone unsent, as of each \
         match's latest tick: the worst over matches.",
        r.max_staleness_ticks,
    )
}

fn gauge(enc: &mut DescriptorEncoder<'_>, name: &str, help: &str, v: u64) -> fmt::Result {
    enc.encode_descriptor(name, help, None, MetricType::Gauge)?
        .encode_gauge(&v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Phase;

    fn sample() -> MetricsSnapshot {
        let mut s = MetricsSnapshot::default();
        for us in [3u64, 40, 90, 120, 20_000] {
            let mut r = FrameRecord::default();
            r.add(Category::Network, Phase::Receive, us * 1000 / 2);
            r.add(Category::Movement, Phase::Simulate, us * 1000 / 2);
            s.record_frame(&r);
        }
        s.late_ticks = 2;
        s.late_by_cause = [0, 1, 1, 0, 0];
        s.hitches = 1;
        s.bytes_in = 1200;
        s.bytes_out = 34_000;
        s.packets_in = 10;
        s.packets_out = 20;
        s.players_connected = 9;
        s.matches = 1;
        s.dropped.add("decrypt", 5);
        s.dropped.add("oversize", 1);
        s.refused.add("no_such_match", 2);
        s.kicked.add("flooding", 1);
        s.results_written = 4;
        s.results_failed = 3;
        s.results_pending = 1;
        s.matches_reclaimed = 6;
        s.replication = ReplicationCounts {
            snapshots: 40,
            states: 300,
            gone: 2,
            relevant: 420,
            left_out_room: 90,
            left_out_distance: 30,
            encodings_shared: 250,
            encodings_computed: 50,
            packets_lost: 1,
            max_staleness_ticks: 7,
        };
        let mut round = RoundSummary {
            round: Some(1),
            ticks: 128,
            mean_ns: 80_000,
            ..RoundSummary::default()
        };
        round.category_mean_ns[Category::Network.index()] = 30_000;
        round.category_mean_ns[Category::Movement.index()] = 50_000;
        s.record_round(&round);
        s.count_violations(1 << Category::Movement.index());
        s.count_violations(1 << Category::Movement.index() | 1 << crate::rounds::FRAME_SLOT);
        s
    }

    /// One sample line: name, labels as written, value.
    fn parse_sample(line: &str) -> (&str, &str, &str) {
        let (head, value) = line.rsplit_once(' ').expect("a sample has a value");
        match head.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}').expect("labels close"), value),
            None => (head, "", value),
        }
    }

    #[test]
    fn replication_counts_add_up_and_keep_the_worse_staleness() {
        let mut a = sample();
        let b = sample();
        let mut c = sample();
        c.replication.max_staleness_ticks = 30;
        a.merge(&b);
        assert_eq!(a.replication.states, 600);
        assert_eq!(a.replication.left_out_room, 180);
        assert_eq!(a.replication.max_staleness_ticks, 7);
        a.merge(&c);
        assert_eq!(a.replication.snapshots, 120);
        assert_eq!(a.replication.max_staleness_ticks, 30);
    }

    #[test]
    fn buckets_hold_values_at_their_bound() {
        let mut b = FrameBuckets::default();
        b.record_ns(5_000); // le 5 µs
        b.record_ns(5_001); // le 10 µs
        b.record_ns(u64::MAX); // +Inf
        assert_eq!(b.counts()[0], 1);
        assert_eq!(b.counts()[1], 1);
        assert_eq!(b.counts()[FRAME_BUCKETS - 1], 1);
        assert_eq!(b.count(), 3);
        assert_eq!(b.sum_ns(), u64::MAX);
    }

    #[test]
    fn every_family_has_help_and_type_lines() {
        let mut out = String::new();
        render(&sample(), &mut out);
        for (family, kind) in [
            ("tickforge_match_frame_seconds", "histogram"),
            ("tickforge_frame_seconds", "histogram"),
            ("tickforge_ticks", "counter"),
            ("tickforge_late_ticks", "counter"),
            ("tickforge_ticks_late", "counter"),
            ("tickforge_skipped_ticks", "counter"),
            ("tickforge_hitches", "counter"),
            ("tickforge_bytes", "counter"),
            ("tickforge_packets", "counter"),
            ("tickforge_players_connected", "gauge"),
            ("tickforge_matches", "gauge"),
            ("tickforge_replication_snapshots", "counter"),
            ("tickforge_replication_records", "counter"),
            ("tickforge_replication_relevant", "counter"),
            ("tickforge_replication_left_out", "counter"),
            ("tickforge_replication_encodings", "counter"),
            ("tickforge_replication_packets_lost", "counter"),
            ("tickforge_replication_max_staleness_ticks", "gauge"),
        ] {
            assert!(
                out.contains(&format!("# HELP {family} ")),
                "{family}\n{out}"
            );
            assert!(
                out.contains(&format!("# TYPE {family} {kind}\n")),
                "{family}\n{out}"
            );
        }
        assert!(out.contains("\ntickforge_ticks_total 5\n"), "{out}");
        assert!(
            out.contains("\ntickforge_bytes_total{direction=\"out\"} 34000\n"),
            "{out}"
        );
        assert!(out.contains("\ntickforge_players_connected 9\n"), "{out}");
        for line in [
            "tickforge_replication_snapshots_total 40",
            "tickforge_replication_records_total{kind=\"state\"} 300",
            "tickforge_replication_records_total{kind=\"gone\"} 2",
            "tickforge_replication_relevant_total 420",
            "tickforge_replication_left_out_total{reason=\"room\"} 90",
            "tickforge_replication_left_out_total{reason=\"distance\"} 30",
            "tickforge_replication_encodings_total{source=\"shared\"} 250",
            "tickforge_replication_encodings_total{source=\"computed\"} 50",
            "tickforge_replication_packets_lost_total 1",
            "tickforge_replication_max_staleness_ticks 7",
            "tickforge_ticks_late_total{cause=\"own\"} 0",
            "tickforge_ticks_late_total{cause=\"others\"} 1",
            "tickforge_ticks_late_total{cause=\"host_preempted\"} 1",
            "tickforge_ticks_late_total{cause=\"unexplained\"} 0",
            "tickforge_packets_total{direction=\"in\"} 10",
        ] {
            assert!(out.contains(&format!("\n{line}\n")), "{line}\n{out}");
        }
        assert!(out.ends_with("# EOF\n"), "{out}");
    }

    /// `a="x",b="y"` as pairs, escapes kept as written.
    fn parse_labels(labels: &str) -> Vec<(String, String)> {
        let mut pairs = Vec::new();
        let mut rest = labels;
        while let Some((name, after)) = rest.split_once("=\"") {
            let mut end = 0;
            let bytes = after.as_bytes();
            while bytes[end] != b'"' {
                end += if bytes[end] == b'\\' { 2 } else { 1 };
            }
            pairs.push((name.to_string(), after[..end].to_string()));
            rest = after[end + 1..].trim_start_matches(',');
        }
        pairs
    }

    #[test]
    fn buckets_are_cumulative_and_inf_equals_count() {
        let mut out = String::new();
        render_with_labels(&sample(), &[("host", "h")], &mut out).unwrap();
        // Per histogram series (family, labels without `le`): `(le, value)` in order.
        type Series = (String, Vec<(String, String)>, Vec<(String, u64)>);
        let mut series: Vec<Series> = Vec::new();
        let mut counts = Vec::new();
        for line in out.lines().filter(|l| !l.starts_with('#')) {
            let (name, labels, value) = parse_sample(line);
            let mut labels = parse_labels(labels);
            if let Some(family) = name.strip_suffix("_bucket") {
                let at = labels.iter().position(|(k, _)| k == "le").expect("le");
                let (_, le) = labels.remove(at);
                let v = value.parse().unwrap();
                match series
                    .iter_mut()
                    .find(|(f, l, _)| f == family && *l == labels)
                {
                    Some((_, _, buckets)) => buckets.push((le, v)),
                    None => series.push((family.to_string(), labels, vec![(le, v)])),
                }
            } else if let Some(family) = name.strip_suffix("_count") {
                counts.push((family.to_string(), labels, value.parse::<u64>().unwrap()));
            }
        }
        // The match frame, each category, and each round slot.
        assert_eq!(
            series.len(),
            1 + Category::COUNT + crate::rounds::BUDGET_SLOTS
        );
        for (family, labels, buckets) in &series {
            assert_eq!(buckets.len(), FRAME_BUCKETS, "{family} {labels:?}");
            assert!(
                buckets.windows(2).all(|w| w[0].1 <= w[1].1),
                "not cumulative: {buckets:?}"
            );
            let bounds: Vec<f64> = buckets[..FRAME_BUCKETS - 1]
                .iter()
                .map(|(le, _)| le.parse().unwrap())
                .collect();
            assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{bounds:?}");
            let (le, inf) = buckets.last().unwrap();
            assert_eq!(le, "+Inf");
            let count = counts
                .iter()
                .find(|(f, l, _)| f == family && l == labels)
                .expect("a _count for every histogram");
            assert_eq!(*inf, count.2, "{family} {labels:?}");
        }
        assert!(out.contains("tickforge_frame_seconds_count{host=\"h\",category=\"network\"} 5\n"));
        // Never entered: a zero histogram, still present so rates work from the start.
        assert!(out.contains("tickforge_frame_seconds_count{host=\"h\",category=\"fow\"} 0\n"));
        assert!(
            out.contains("tickforge_match_frame_seconds_bucket{host=\"h\",le=\"0.000005\"} 1\n")
        );
        assert!(out.contains("tickforge_match_frame_seconds_bucket{host=\"h\",le=\"0.0001\"} 3\n"));
    }

    #[test]
    fn every_line_parses() {
        let mut out = String::new();
        render_with_labels(&sample(), &[("host", "gs-7")], &mut out).unwrap();
        for line in out.lines() {
            if let Some(meta) = line.strip_prefix("# ") {
                let word = meta.split(' ').next().unwrap();
                assert!(matches!(word, "HELP" | "TYPE" | "EOF"), "{line}");
                continue;
            }
            let (name, labels, value) = parse_sample(line);
            assert!(name.starts_with("tickforge_"), "{line}");
            assert!(
                name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                "{line}"
            );
            assert!(labels.starts_with("host=\"gs-7\""), "{line}");
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }

    #[test]
    fn label_values_are_escaped_and_names_checked() {
        let mut out = String::new();
        render_with_labels(
            &MetricsSnapshot::default(),
            &[("host", "a\\b\"c\nd")],
            &mut out,
        )
        .unwrap();
        assert!(
            out.contains("tickforge_matches{host=\"a\\\\b\\\"c\\nd\"} 0\n"),
            "{out}"
        );
        assert!(
            !out.lines().any(|l| l == "d\"} 0"),
            "a raw newline split a sample"
        );
        for bad in ["", "1x", "a-b", "__x"] {
            let mut out = String::new();
            let err = render_with_labels(&MetricsSnapshot::default(), &[(bad, "v")], &mut out);
            assert_eq!(err, Err(LabelError::BadName(bad.to_string())));
            assert!(out.is_empty());
        }
    }

    #[test]
    fn rounds_and_budget_violations_are_by_category_and_frame() {
        let mut out = String::new();
        render(&sample(), &mut out);
        for line in [
            "# TYPE tickforge_round_frame_seconds histogram",
            "tickforge_round_frame_seconds_count{category=\"movement\"} 1",
            "tickforge_round_frame_seconds_sum{category=\"movement\"} 0.00005",
            "tickforge_round_frame_seconds_sum{category=\"frame\"} 0.00008",
            "tickforge_round_frame_seconds_count{category=\"fow\"} 1",
            "# TYPE tickforge_budget_violations counter",
            "tickforge_budget_violations_total{category=\"movement\"} 2",
            "tickforge_budget_violations_total{category=\"frame\"} 1",
            "tickforge_budget_violations_total{category=\"network\"} 0",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} missing:\n{out}");
        }
        // Eleven series each, never one per match.
        let violations = out
            .lines()
            .filter(|l| l.starts_with("tickforge_budget_violations_total{"))
            .count();
        assert_eq!(violations, crate::rounds::BUDGET_SLOTS);
        let mut twice = sample();
        twice.merge(&sample());
        assert_eq!(twice.budget_violations[Category::Movement.index()], 4);
        assert_eq!(twice.round_frame[crate::rounds::FRAME_SLOT].count(), 2);
    }

    #[test]
    fn per_match_families_have_one_series_per_match() {
        let mut out = String::new();
        let matches = [
            MatchTicks {
                match_id: 3,
                ticks: 100,
                late_ticks: 4,
                hitches: 1,
            },
            MatchTicks {
                match_id: 11,
                ticks: 90,
                late_ticks: 0,
                hitches: 0,
            },
        ];
        let admin = AdminCounts {
            requests: vec![(200, 7), (401, 2)],
            connections_closed: vec![("header_timeout", 3), ("evicted", 1)],
            agones: None,
        };
        render_with_matches(&sample(), &matches, &admin, &mut out);
        for line in [
            "tickforge_admin_requests_total{code=\"200\"} 7",
            "tickforge_admin_requests_total{code=\"401\"} 2",
            "# TYPE tickforge_admin_connections_closed counter",
            "tickforge_admin_connections_closed_total{reason=\"header_timeout\"} 3",
            "tickforge_admin_connections_closed_total{reason=\"evicted\"} 1",
            "# TYPE tickforge_match_late_ticks counter",
            "tickforge_match_late_ticks_total{match=\"3\"} 4",
            "tickforge_match_late_ticks_total{match=\"11\"} 0",
            "tickforge_match_hitches_total{match=\"3\"} 1",
            "tickforge_match_ticks_total{match=\"11\"} 90",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} missing:\n{out}");
        }
        assert!(out.ends_with("# EOF\n"), "{out}");
        // Without matches the families are left out, not written empty.
        let mut out = String::new();
        render(&sample(), &mut out);
        assert!(!out.contains("tickforge_match_late_ticks"), "{out}");
        assert!(!out.contains("tickforge_admin_requests"), "{out}");
        assert!(!out.contains("tickforge_admin_connections"), "{out}");
    }

    #[test]
    fn agones_calls_and_errors_are_counted_by_call_only_when_agones_is_on() {
        let agones = AgonesCounts {
            calls: vec![("ready", 1), ("health", 12)],
            errors: vec![("ready", 3), ("health", 0)],
            ready: true,
        };
        let admin = AdminCounts {
            agones: Some(agones),
            ..AdminCounts::default()
        };
        let mut out = String::new();
        render_with_matches(&sample(), &[], &admin, &mut out);
        for line in [
            "# TYPE tickforge_agones_errors counter",
            "tickforge_agones_errors_total{call=\"ready\"} 3",
            "tickforge_agones_errors_total{call=\"health\"} 0",
            "tickforge_agones_calls_total{call=\"health\"} 12",
            "# TYPE tickforge_agones_ready gauge",
            "tickforge_agones_ready 1",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} missing:\n{out}");
        }
        let mut out = String::new();
        render_with_matches(&sample(), &[], &AdminCounts::default(), &mut out);
        assert!(!out.contains("tickforge_agones"), "{out}");
    }

    #[test]
    fn faults_are_counted_by_reason() {
        let mut out = String::new();
        render(&sample(), &mut out);
        for line in [
            "tickforge_datagrams_dropped_total{reason=\"decrypt\"} 5",
            "tickforge_datagrams_dropped_total{reason=\"oversize\"} 1",
            "tickforge_connections_refused_total{reason=\"no_such_match\"} 2",
            "tickforge_connections_kicked_total{reason=\"flooding\"} 1",
            "tickforge_results_written_total 4",
            "tickforge_results_failed_total 3",
            "tickforge_results_pending 1",
            "tickforge_matches_reclaimed_total 6",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} missing:\n{out}");
        }
    }

    #[test]
    fn reason_counts_keep_order_merge_by_name_and_overflow_into_other() {
        let mut a = ReasonCounts::default();
        a.add("b", 1);
        a.add("a", 2);
        a.add("b", 3);
        let mut b = ReasonCounts::default();
        b.set("a", 10);
        b.set("c", 1);
        a.merge(&b);
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            [("b", 4), ("a", 12), ("c", 1)]
        );
        assert_eq!(a.total(), 17);
        assert_eq!(a.get("z"), 0);
        const NAMES: [&str; MAX_REASONS + 3] = [
            "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "r13",
            "r14", "r15", "r16", "r17", "r18", "r19", "r20", "r21", "r22", "r23", "r24", "r25",
            "r26", "r27", "r28", "r29", "r30", "r31", "r32", "r33", "r34",
        ];
        let mut full = ReasonCounts::default();
        for name in NAMES {
            full.add(name, 1);
        }
        assert_eq!(full.iter().count(), MAX_REASONS);
        assert_eq!(full.total(), NAMES.len() as u64, "nothing is lost");
        assert_eq!(full.get("other"), 4);
        assert_eq!(full.get("r30"), 1, "a named reason keeps its name");
        // Set again, as a worker does each second: the named ones hold, `other` only grows.
        for name in NAMES {
            full.set(name, 1);
        }
        assert_eq!(full.get("r30"), 1);
        assert_eq!(full.get("other"), 4, "never back, never counted twice");
    }

    #[test]
    fn merge_adds_workers() {
        let mut host = MetricsSnapshot::default();
        host.merge(&sample());
        host.merge(&sample());
        assert_eq!(host.ticks, 10);
        assert_eq!(host.match_frame.count(), 10);
        assert_eq!(host.categories[Category::Network.index()].count(), 10);
        assert_eq!(host.players_connected, 18);
        assert_eq!(host.bytes_out, 68_000);
        assert_eq!(host.dropped.get("decrypt"), 10);
        assert_eq!(host.results_pending, 2);
    }
}
