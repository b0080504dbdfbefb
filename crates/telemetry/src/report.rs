//! The report every bench writes, and the server and bot sections it is merged from.
//!
//! Keys here are relied on by other tools (DESIGN.md, "The report every bench writes"):
//! add freely, rename none. A figure that does not exist yet is `null`, never a made-up
//! number.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Category, Phase};

/// Distribution of a duration, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest value seen.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

/// Mean milliseconds per match tick for each category; `null` where no code ran in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct CategoryMs {
    pub replication: Option<f64>,
    pub fow: Option<f64>,
    pub network: Option<f64>,
    pub animation: Option<f64>,
    pub gameplay: Option<f64>,
    pub movement: Option<f64>,
    pub equippable: Option<f64>,
    pub character: Option<f64>,
    pub physics: Option<f64>,
    pub other: Option<f64>,
}

impl CategoryMs {
    /// Builds the table by asking `f` for each category.
    pub fn from_fn(mut f: impl FnMut(Category) -> Option<f64>) -> Self {
        CategoryMs {
            replication: f(Category::Replication),
            fow: f(Category::Fow),
            network: f(Category::Network),
            animation: f(Category::Animation),
            gameplay: f(Category::Gameplay),
            movement: f(Category::Movement),
            equippable: f(Category::Equippable),
            character: f(Category::Character),
            physics: f(Category::Physics),
            other: f(Category::Other),
        }
    }

    /// The value of one category.
    pub fn get(&self, c: Category) -> Option<f64> {
        match c {
            Category::Replication => self.replication,
            Category::Fow => self.fow,
            Category::Network => self.network,
            Category::Animation => self.animation,
            Category::Gameplay => self.gameplay,
            Category::Movement => self.movement,
            Category::Equippable => self.equippable,
            Category::Character => self.character,
            Category::Physics => self.physics,
            Category::Other => self.other,
        }
    }

    /// Sum of the categories that have a value.
    pub fn sum(&self) -> f64 {
        Category::ALL.iter().filter_map(|&c| self.get(c)).sum()
    }
}

/// Mean milliseconds per match tick for each phase of the Iris split.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct PhaseMs {
    pub receive: Option<f64>,
    pub simulate: Option<f64>,
    pub replicate: Option<f64>,
    pub send: Option<f64>,
}

impl PhaseMs {
    /// Builds the table by asking `f` for each phase.
    pub fn from_fn(mut f: impl FnMut(Phase) -> Option<f64>) -> Self {
        PhaseMs {
            receive: f(Phase::Receive),
            simulate: f(Phase::Simulate),
            replicate: f(Phase::Replicate),
            send: f(Phase::Send),
        }
    }
}

/// How the ticks of the measured window went, summed over matches.
///
/// A tick belongs to the window by when it started on the wall clock, not by its
/// deadline: a server that falls behind runs ticks whose deadlines never reach the window,
/// and they are still its frames. Whether a tick was on time is judged by its deadline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ticks {
    /// Ticks whose deadline fell inside the measured window: what the schedule asked for.
    pub expected: u64,
    /// Ticks started in the window within 1 ms of their deadline.
    pub on_time: u64,
    /// Ticks started in the window more than 1 ms after their deadline.
    pub late: u64,
    /// Ticks due in the window less those started in it. tickforge runs late ticks
    /// instead of skipping them, so this is 0 on a server that keeps its schedule, and on
    /// one that fell behind the backlog it added over the window.
    pub skipped: u64,
    /// Ticks that started more than one tick late, or frames over twice the budget.
    pub hitches: u64,
}

/// A server fell behind its schedule when the last tick of the window started more than
/// this many ticks after its deadline, and the window is short of more than this many
/// ticks and of [`BEHIND_AFTER_SHARE`] of them: one late tick is a hitch, a lag past two is
/// a backlog the server did not work off.
pub const BEHIND_AFTER_TICKS: f64 = 2.0;
/// The share of the window's due ticks not started in it past which a lag is a backlog, not
/// a stall at the window's edge (which moves a tick or two out of it on a noisy host).
pub const BEHIND_AFTER_SHARE: f64 = 0.01;

/// How far the server kept to its tick schedule over the measured window.
///
/// A server whose ticks cost more than their period runs fewer ticks a second than the
/// tick rate and falls ever further behind its deadlines; these say by how much.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Schedule {
    /// Ticks each match ran per wall-clock second of the window, in Hz: `tick_hz` when
    /// the server kept its schedule, less when it fell behind. The tick rate times the
    /// ticks started in the window over the ticks due in it; `None` when none was due.
    pub achieved_tick_hz: Option<f64>,
    /// How late the last tick started in the window was after its deadline, in
    /// milliseconds, the worst worker's: how far behind its schedule the server was when
    /// the window closed. `None` when no tick started in the window.
    pub lag_ms: Option<f64>,
    /// `lag_ms` is more than [`BEHIND_AFTER_TICKS`] ticks, and the window is short of
    /// more than that many ticks and [`BEHIND_AFTER_SHARE`] of them: the server fell behind.
    pub fell_behind: bool,
}

impl Schedule {
    /// The schedule figures of a window at `tick_hz` whose ticks went as `ticks`, the last
    /// one started `lag_ms` after its deadline.
    pub fn new(tick_hz: u32, ticks: &Ticks, lag_ms: Option<f64>) -> Schedule {
        let run = ticks.on_time + ticks.late;
        let short = ticks.expected.saturating_sub(run);
        let tick_ms = 1e3 / f64::from(tick_hz.max(1));
        Schedule {
            achieved_tick_hz: (ticks.expected > 0)
                .then(|| f64::from(tick_hz) * run as f64 / ticks.expected as f64),
            lag_ms,
            fell_behind: lag_ms.is_some_and(|lag| lag > BEHIND_AFTER_TICKS * tick_ms)
                && short as f64
                    > BEHIND_AFTER_TICKS.max(BEHIND_AFTER_SHARE * ticks.expected as f64),
        }
    }
}

/// Games per core, as DESIGN.md defines them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GamesPerCore {
    /// Most matches one worker core held with 99.5% of ticks on time (needs a sweep).
    pub measured: Option<f64>,
    /// 0.9 × tick ÷ mean match frame cost.
    pub projected: Option<f64>,
    /// Most matches one worker core held with every late tick counted, the host's
    /// (preempted, stolen) included: the strict reading of `measured`, which excuses the
    /// misses attributed to the host (needs a sweep).
    #[serde(default)]
    pub measured_strict: Option<f64>,
}

/// Response time at the clients, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct ResponseTimeMs {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

/// Server delay (response time less ping RTT), in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct ServerDelayMs {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

/// What the clients measured (the Quake paper's metrics), averaged per client.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Clients {
    /// Snapshots a client receives per second, mean over clients.
    pub response_rate_hz: Option<f64>,
    /// From sending the input for tick T to the first snapshot that reflects it.
    pub response_time_ms: ResponseTimeMs,
    /// Response time less the client's ping RTT at that moment.
    pub server_delay_ms: ServerDelayMs,
    /// UDP payload bytes a client receives per second, mean over clients.
    pub down_bytes_per_s: Option<f64>,
    /// UDP payload bytes a client sends per second, mean over clients.
    pub up_bytes_per_s: Option<f64>,
    /// The connection's round trip as its acks measure it (send to ack, which includes the
    /// server's wait for its next tick).
    pub ping_rtt_ms: ResponseTimeMs,
    /// Bots that took part.
    pub bots: u64,
    /// Bots connected at the end of the window.
    pub connected: u64,
    /// Lowest response rate of any one client.
    pub min_response_rate_hz: Option<f64>,
    /// Reliable events the clients received, over the whole run.
    pub reliable_events: u64,
    /// Packets the clients' reliability layer refused as broken.
    pub link_errors: u64,
    /// Clients whose session had ended before the run's end, by why (`timed_out`: the
    /// server went silent for the token's timeout; `server_closed`: the server disconnected
    /// it; `wrong_schema`, `bad_welcome`: it refused the match).
    #[serde(default)]
    pub ended: BTreeMap<String, u64>,
    /// Datagrams received per client per second in the window.
    #[serde(default)]
    pub down_packets_per_s: Option<f64>,
    /// Datagrams sent per client per second in the window.
    #[serde(default)]
    pub up_packets_per_s: Option<f64>,
    /// Snapshots the clients could not decode (a missing baseline or hostile bytes), over
    /// the whole run.
    #[serde(default)]
    pub bad_snapshots: u64,
    /// The shooter bots' own-movement prediction: how far each snapshot's state moved the
    /// client's prediction of it (after modelling the server's repeats and skips).
    #[serde(default)]
    pub correction_m: CorrectionM,
}

/// Client-side prediction corrections, metres: the distance between the state a client
/// predicted for the input a snapshot acknowledges and the server's (quantized) state in
/// that snapshot. `None` with no sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CorrectionM {
    /// Mean correction.
    pub mean: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// Corrections measured.
    pub samples: u64,
    /// Snapshots not measured: across a death, revival, round start, the buy phase's
    /// barriers dropping, a new epoch, or a gap too long to model.
    pub skipped: u64,
    /// Snapshots not measured because the client's player was dead.
    pub dead: u64,
    /// Snapshots that disagreed with the prediction beyond the wire's quantum, so the
    /// prediction was replayed from the server's state.
    pub reconciled: u64,
}

/// Datagram counters of the server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Datagrams {
    /// Datagrams read from the socket.
    pub received: u64,
    /// Datagrams handed to the kernel.
    pub sent: u64,
    /// Sends the kernel refused (counted as loss).
    pub send_errors: u64,
    /// Bytes read.
    pub bytes_in: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Receive system calls (one `recvmmsg` each, empty ones included).
    pub recv_calls: u64,
    /// Send system calls (one `sendmmsg` each).
    pub send_calls: u64,
    /// Datagrams received per receive call.
    pub per_recv_call: Option<f64>,
    /// Datagrams sent per send call.
    pub per_send_call: Option<f64>,
    /// Datagrams dropped, by reason.
    pub dropped: BTreeMap<String, u64>,
}

/// Drop reasons a well-behaved client causes too: the repeats of a disconnect packet that
/// reach the server after the first closed the connection (the netcode server's
/// `ServerDrop::EXPECTED`).
pub const EXPECTED_DROPS: [&str; 1] = ["disconnect_repeat"];

impl Datagrams {
    /// Every datagram dropped, whatever the reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }

    /// Datagrams dropped for a reason a well-behaved client does not cause
    /// ([`EXPECTED_DROPS`] left out).
    pub fn dropped_unexpected(&self) -> u64 {
        (self.dropped.iter())
            .filter(|(reason, _)| !EXPECTED_DROPS.contains(&reason.as_str()))
            .map(|(_, n)| n)
            .sum()
    }
}

/// Random datagrams a bench sent at the server during the run (`--flood N`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Flood {
    /// Datagrams sent.
    pub sent: u64,
    /// Of which shaped like connection requests (1078 bytes, right version).
    pub request_shaped: u64,
    /// Of which shaped like encrypted packets (valid prefix).
    pub packet_shaped: u64,
}

/// What `tickforge serve --report` writes: the server's half of a bench report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    /// Tick rate in Hz.
    pub tick_hz: u32,
    /// The game every match played (`shooter`, `ctf`).
    #[serde(default)]
    pub game: String,
    /// The map every match was played on, by name (`arena`, `flat2km`), when the game's
    /// settings name one.
    #[serde(default)]
    pub map: String,
    /// Matches hosted.
    pub matches: u32,
    /// Player slots per match.
    pub players_per_match: u32,
    /// Worker threads.
    #[serde(default)]
    pub workers: u32,
    /// Of them, workers that ran in the real-time FIFO class.
    #[serde(default)]
    pub realtime_workers: u32,
    /// Their SCHED_FIFO priority; `None`: none ran real-time.
    #[serde(default)]
    pub rt_priority: Option<u32>,
    /// Length of the measured window, seconds.
    pub duration_s: f64,
    /// Time before the window, excluded from all figures, seconds.
    pub warmup_s: f64,
    /// CPU cost of one match tick, its share of the socket calls included.
    pub match_frame_ms: Option<Percentiles>,
    /// One worker wake-up.
    pub worker_frame_ms: Option<Percentiles>,
    /// Mean per match tick by category.
    pub categories_ms: CategoryMs,
    /// Mean per match tick by phase.
    pub phases_ms: PhaseMs,
    /// Tick timing.
    pub ticks: Ticks,
    /// The tick rate achieved and how far behind its schedule the server fell.
    #[serde(default)]
    pub schedule: Schedule,
    /// How late the worker woke for its earliest deadline.
    pub wake_late_ms: Option<Percentiles>,
    /// How late each match tick started after its deadline (a tick is late past 1 ms).
    #[serde(default)]
    pub tick_start_late_ms: Option<Percentiles>,
    /// Projected games per core from the mean match frame.
    pub projected_games_per_core: Option<f64>,
    /// Matches that ended (their results appended to the results file).
    #[serde(default)]
    pub matches_finished: u64,
    /// Attempts to write or sync a result line or an action file that failed (each is
    /// retried until the disk takes it, or the server stops).
    #[serde(default)]
    pub results_failed: u64,
    /// Result lines written and synced.
    #[serde(default)]
    pub results_written: u64,
    /// Result lines that were not on disk when the server stopped: the disk refused them
    /// until the end (they were printed to stderr). `tickforge serve` exits 1 when any.
    #[serde(default)]
    pub results_unwritten: u64,
    /// Shots fired over the whole run.
    #[serde(default)]
    pub shots_fired: u64,
    /// Of them, shots whose shooter's view was older than the max rewind, tested at the
    /// oldest tick held instead (lag compensation clamped).
    #[serde(default)]
    pub shots_rewind_clamped: u64,
    /// The max rewind of lag compensation, milliseconds.
    #[serde(default)]
    pub max_rewind_ms: f64,
    /// What replication sent, over the whole run.
    #[serde(default)]
    pub replication: Replication,
    /// Share of one core the server process used in the window.
    pub cpu_util: Option<f64>,
    /// The server process's memory as its run ended; `None` where not read.
    #[serde(default)]
    pub memory: Option<Memory>,
    /// Datagram counters over the whole run.
    pub datagrams: Datagrams,
    /// Clients the server disconnected over the whole run, by reason (as /metrics'
    /// `tickforge_connections_kicked_total`): `misbehaved` (a reliability packet that broke
    /// the protocol), `flooding` (packets far faster than one a tick), `stalled` (its
    /// reliable send queue full: it stopped acknowledging), `refused_message` (the game
    /// refused one of its messages), `timed_out` (nothing heard from it for its token's
    /// timeout). An honest client on a sound network is never kicked.
    #[serde(default)]
    pub kicked: BTreeMap<String, u64>,
    /// The match frame second by second over the measured window, fewest seconds first;
    /// seconds without a frame are left out. At most [`MAX_FRAME_SECONDS`] seconds.
    #[serde(default)]
    pub frame_seconds: Vec<FrameSecond>,
    /// The slowest match frames of the measured window (at most [`crate::SLOWEST_FRAMES`]),
    /// slowest first, each with where its time went: what the tail of `match_frame_ms` is
    /// made of.
    #[serde(default)]
    pub slowest_frames: Vec<SlowFrame>,
    /// The budgets match ticks were held to, in milliseconds per match tick, by category
    /// name (`frame`: the whole frame): those configured, and the whole frame's (the
    /// configured one, else the match budget at `players_per_match`).
    #[serde(default)]
    pub budgets_ms: BTreeMap<String, f64>,
    /// Match ticks of the measured window over budget, by the same keys as `budgets_ms`.
    #[serde(default)]
    pub budget_violations: BTreeMap<String, u64>,
    /// The late ticks of the window by cause (they add up to `ticks.late`).
    #[serde(default)]
    pub late_causes: LateCauses,
    /// What the workers saw of the host taking their core while a tick was due.
    #[serde(default)]
    pub preemption: Preemption,
}

/// Late ticks by what made them late (the worker's attribution, `worker/preempt.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LateCauses {
    /// The match's own previous tick ran past this one's deadline.
    pub own: u64,
    /// The worker's other work in or before this wake-up (the receive, the matches run
    /// before it, a backlog of their ticks).
    pub others: u64,
    /// The worker's thread was runnable but not running: preempted or its wake-up held on
    /// the run queue (involuntary context switches, run-queue delay).
    pub host_preempted: u64,
    /// The host's steal time rose while the worker woke late (a VM's vCPU not running).
    pub host_steal: u64,
    /// The wake-up was late beyond what the spin explains with no sign of either.
    pub unexplained: u64,
}

impl LateCauses {
    /// The causes' names, as the report keys and the `cause` label of `/metrics` spell them.
    pub const NAMES: [&'static str; 5] = [
        "own",
        "others",
        "host_preempted",
        "host_steal",
        "unexplained",
    ];

    /// The counts in [`LateCauses::NAMES`] order.
    pub fn counts(&self) -> [u64; 5] {
        [
            self.own,
            self.others,
            self.host_preempted,
            self.host_steal,
            self.unexplained,
        ]
    }

    /// From counts in [`LateCauses::NAMES`] order.
    pub fn from_counts(c: [u64; 5]) -> LateCauses {
        LateCauses {
            own: c[0],
            others: c[1],
            host_preempted: c[2],
            host_steal: c[3],
            unexplained: c[4],
        }
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &LateCauses) {
        let (a, b) = (self.counts(), other.counts());
        *self = LateCauses::from_counts(std::array::from_fn(|i| a[i] + b[i]));
    }

    /// Late ticks attributed to the host, confirmed by its counters (preempted or stolen).
    pub fn host(&self) -> u64 {
        self.host_preempted + self.host_steal
    }

    /// Late ticks not on the server's own account: every tick a stall made late (a wake-up
    /// later than the spin explains while the worker was idle, or a wait on the run
    /// queue), the host's confirmed and the unexplained alike.
    pub fn stalled(&self) -> u64 {
        self.host() + self.unexplained
    }

    /// Late ticks on the server's own account: its own cost and its other matches'.
    pub fn server(&self) -> u64 {
        self.own + self.others
    }

    /// Every late tick.
    pub fn total(&self) -> u64 {
        self.counts().iter().sum()
    }
}

/// What the workers measured of the host over the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Preemption {
    /// Wake-ups later than the spin explains (a stall: more than 0.5 ms past the deadline
    /// while the worker slept, or that long on the run queue).
    pub stalls: u64,
    /// The longest stall, milliseconds.
    pub stall_max_ms: f64,
    /// Involuntary context switches of the worker threads.
    pub involuntary_switches: u64,
    /// Time the worker threads were runnable but waited for a CPU, milliseconds
    /// (`/proc/thread-self/schedstat`; 0 where the kernel does not keep it).
    pub run_delay_ms: f64,
    /// The host's steal time over the window, as a share of its CPU time (`/proc/stat`).
    pub steal_share: Option<f64>,
}

/// Seconds a [`ServerReport::frame_seconds`] series holds at most: an hour of window. The
/// workers reserve this much at start, so recording never allocates; frames after the last
/// second held are left out of the series (never of the whole-window figures).
pub const MAX_FRAME_SECONDS: usize = 3600;

/// The match frames started in one second of the measured window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FrameSecond {
    /// Whole seconds from the window's start: the second `[s, s + 1)`.
    pub s: u32,
    /// Match frames run.
    pub frames: u32,
    /// Median match frame, milliseconds.
    pub p50: f64,
    /// 99th percentile, milliseconds.
    pub p99: f64,
    /// Largest, milliseconds.
    pub max: f64,
    /// Ticks that started more than 1 ms after their deadline (as [`Ticks::late`]).
    pub late: u32,
    /// Hitches (as [`Ticks::hitches`]).
    pub hitches: u32,
    /// Of `late`, ticks a stall made late: not the server's own account
    /// ([`LateCauses::stalled`]: host preempted, host steal, unexplained).
    #[serde(default)]
    pub late_host: u32,
}

/// One of the slowest match frames of a window ([`ServerReport::slowest_frames`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlowFrame {
    /// The match it was a tick of.
    pub match_id: u32,
    /// When it started, seconds from the window's start.
    pub at_s: f64,
    /// What it cost, milliseconds.
    pub frame_ms: f64,
    /// Whether it started late.
    pub late: bool,
    /// Its milliseconds by phase.
    pub phases_ms: PhaseMs,
    /// Its milliseconds by category; `null` for one it did not enter.
    pub categories_ms: CategoryMs,
}

/// Adds the series `other` (another worker's, of the same window) into `into`, second by
/// second. Counts add and `max` is exact. `p50` and `p99` become the larger of the two: an
/// upper bound of the merged percentile (no more than 1% of the merged frames lie above
/// the larger p99, since no more than 1% of either side's do), exact with one worker.
/// Both series must be ordered by second; the result is too.
pub fn merge_frame_seconds(into: &mut Vec<FrameSecond>, other: &[FrameSecond]) {
    let mut merged = Vec::with_capacity(into.len().max(other.len()));
    let (mut a, mut b) = (into.iter().peekable(), other.iter().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x.s == y.s => {
                let (x, y) = (a.next().unwrap(), b.next().unwrap());
                FrameSecond {
                    s: x.s,
                    frames: x.frames + y.frames,
                    p50: x.p50.max(y.p50),
                    p99: x.p99.max(y.p99),
                    max: x.max.max(y.max),
                    late: x.late + y.late,
                    hitches: x.hitches + y.hitches,
                    late_host: x.late_host + y.late_host,
                }
            }
            (Some(x), Some(y)) if x.s < y.s => *a.next().unwrap(),
            (Some(_), Some(_)) | (None, Some(_)) => *b.next().unwrap(),
            (Some(_), None) => *a.next().unwrap(),
            (None, None) => break,
        };
        merged.push(next);
    }
    merged.truncate(MAX_FRAME_SECONDS);
    *into = merged;
}

/// What replication sent: snapshot bodies against the same snapshots as full states.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Replication {
    /// Snapshots written, one per connected client per tick.
    pub snapshots: u64,
    /// Mean snapshot body, bytes per client per tick (delta-encoded, relevant entities).
    pub body_bytes_per_snapshot: Option<f64>,
    /// The same snapshots as full quantized states (every entity they may show, every
    /// field: the replication crate's `ENTITY_BYTES` each), bytes per client per tick.
    pub full_state_bytes_per_snapshot: Option<f64>,
    /// `body_bytes_per_snapshot / full_state_bytes_per_snapshot`.
    pub body_to_full_state: Option<f64>,
    /// The most ticks an entity relevant to a client went unsent, at any tick of the run.
    pub max_staleness_ticks: u32,
    /// Share of entity encodings reused from another connection, 0..=1.
    pub cache_hit_rate: Option<f64>,
    /// Entity records sent as full states (join, old or lost baselines) and as deltas.
    pub full_records: u64,
    /// Entity records sent as deltas.
    pub delta_records: u64,
    /// Entities that lost the priority auction for a packet's budget, summed over writes.
    pub deferred: u64,
    /// Entity states each client was sent per snapshot, on average.
    #[serde(default)]
    pub states_per_snapshot: Option<f64>,
    /// Most entity states one snapshot carried.
    #[serde(default)]
    pub max_states_per_snapshot: u32,
    /// Entities relevant to a client per snapshot, on average: what competed for its room.
    #[serde(default)]
    pub relevant_per_snapshot: Option<f64>,
    /// How many ticks a relevant entity left out of a snapshot had gone unsent, on average
    /// over the deferrals (`max_staleness_ticks` is the most).
    #[serde(default)]
    pub deferred_staleness_ticks: Option<f64>,
    /// Relevant entities per snapshot not sent because they waited for their distance's
    /// tick (the rate by distance; 0 when it is off), on average: not in `deferred`.
    #[serde(default)]
    pub waiting_per_snapshot: Option<f64>,
    /// The rate by distance; `None`: off, every relevant entity may go every tick.
    #[serde(default)]
    pub rate_by_distance: Option<RateByDistance>,
}

/// The rate by distance a run's matches replicated with: an entity `halve_every_m`
/// further from a client is sent half as often, down to one tick in
/// `slowest_every_ticks`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RateByDistance {
    /// Metres per step of distance: within one step, every tick.
    pub halve_every_m: f64,
    /// The slowest: one tick in this many (2, 4, 8 or 16).
    pub slowest_every_ticks: u32,
}

/// A process's memory (`/proc/self/smaps_rollup`): how much is resident, and how much of
/// that is on transparent huge pages, which `serve`, `bots` and `bench` ask glibc's heap
/// for (a bots process's replicas read across thousands of pages a tick).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub resident_bytes: u64,
    pub huge_bytes: u64,
}

impl Memory {
    /// This process's memory now; `None` where there is no `/proc/self/smaps_rollup`
    /// (not Linux, or a kernel without it).
    pub fn of_this_process() -> Option<Memory> {
        Memory::from_smaps_rollup(&std::fs::read_to_string("/proc/self/smaps_rollup").ok()?)
    }

    /// `Rss:` and `AnonHugePages:` of an `smaps_rollup`, in bytes (the file says kB);
    /// `None` without an `Rss:` line.
    pub fn from_smaps_rollup(text: &str) -> Option<Memory> {
        let kb = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().strip_suffix("kB"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|k| k * 1024)
        };
        Some(Memory {
            resident_bytes: kb("Rss:")?,
            huge_bytes: kb("AnonHugePages:").unwrap_or(0),
        })
    }
}

/// Why bots could not keep their tick ([`BotsReport::saturated_by`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SaturatedBy {
    /// Over 90% of their core in the window: they need a core more.
    Cpu,
    /// More than 1% of their send deadlines in the window met over a tick late, on less of
    /// their core: woken late, by a busy host or a burst of their own.
    Late,
    /// Their schedule over [`SaturatedBy::WARMUP_BEHIND_LIMIT`] behind in the warm-up,
    /// where sessions near the token's timeout.
    LateWarmup,
}

impl SaturatedBy {
    /// How far the bots' schedule may fall behind in the warm-up before they count as
    /// saturated there: a fifth of the token's timeout (5 s), past which their reads come
    /// so late that their sessions may end before the window opens. Not a share of late
    /// deadlines, as in the window: the warm-up starts with every bot connecting, a burst
    /// tens of milliseconds long that says nothing of the window.
    pub const WARMUP_BEHIND_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);
}

/// What the bots' work costs, timed (by the monotonic clock, on the bots' one busy
/// thread) around each bot's receive and tick in the window; the loop's sleeps, progress
/// and flushes are left out, so `cores_to_keep_up` is a floor.
/// Saturated bots read every datagram the server sends but run fewer ticks than their
/// schedule: these unit costs say what keeping up would take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BotsCost {
    /// Time on the bots' thread per datagram read, µs: the socket call's share,
    /// decryption, the link, the replica's read, the events.
    pub receive_us_per_datagram: f64,
    /// Time on the bots' thread per tick of a bot's own, µs: what it shows and aims at,
    /// its input, prediction, and the send.
    pub tick_us: f64,
    /// Cores that would run every bot on schedule: bots × (receive per datagram × the
    /// datagrams a bot read a second, at least one a tick + tick × tick rate).
    pub cores_to_keep_up: f64,
}

impl BotsCost {
    /// The cost of `bots` bots at `tick_hz` from what was timed: `receive` over
    /// `datagrams` read, `tick` over `ticks` run, and each bot read `down_pps` datagrams a
    /// second. `None` when nothing was read or run.
    pub fn from_timings(
        bots: u64,
        tick_hz: u32,
        down_pps: f64,
        (receive_s, datagrams): (f64, u64),
        (tick_s, ticks): (f64, u64),
    ) -> Option<BotsCost> {
        if datagrams == 0 || ticks == 0 {
            return None;
        }
        let receive_us_per_datagram = receive_s * 1e6 / datagrams as f64;
        let tick_us = tick_s * 1e6 / ticks as f64;
        let hz = f64::from(tick_hz);
        let per_bot_us = receive_us_per_datagram * down_pps.max(hz) + tick_us * hz;
        Some(BotsCost {
            receive_us_per_datagram,
            tick_us,
            cores_to_keep_up: bots as f64 * per_bot_us / 1e6,
        })
    }
}

/// What `tickforge bots --report` writes: the clients' half of a bench report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BotsReport {
    /// Client-side measurements.
    pub clients: Clients,
    /// Share of one core the bot process used in the window.
    pub cpu_util: Option<f64>,
    /// The bots process's memory as the window closed (every bot's replica held);
    /// `None` where not read.
    #[serde(default)]
    pub memory: Option<Memory>,
    /// True when the bots could not keep their own tick (so the figures speak of the bots):
    /// over 90% of their core in the window, more than 1% of their send deadlines in it
    /// over a tick late, or their schedule over 1 s behind in the warm-up.
    pub saturated: bool,
    /// Why `saturated`, when it is: `cpu`, `late` or `late_warmup` ([`SaturatedBy`]).
    #[serde(default)]
    pub saturated_by: Option<SaturatedBy>,
    /// Share of the bots' send deadlines in the window they met over a tick late by their
    /// own doing: late ones the host's holds explain (`late_host_rate`) left out.
    #[serde(default)]
    pub late_deadline_rate: Option<f64>,
    /// Share of the bots' send deadlines in the window that were over a tick late only
    /// because the host held their thread off its core: less the run-queue delay it had
    /// waited since it was last on schedule, each would have been met within a tick.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_host_rate: Option<f64>,
    /// Milliseconds the host held the bots' thread runnable but off its core in the
    /// window (its run-queue delay: preempted, or, as a real-time thread over its share of
    /// a second, throttled for the rest of it); `None` where the OS does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_held_ms: Option<f64>,
    /// The furthest the bots' schedule fell behind, warm-up included: a bot reads its
    /// datagrams that much after they arrived, and past the token's timeout (5 s) its
    /// session ends as if the server had gone silent.
    #[serde(default)]
    pub max_behind_ms: Option<f64>,
    /// When, in seconds from the bots' start, their schedule was furthest behind in the
    /// warm-up (`None` when it never fell behind there): tells a connection transient (a
    /// thousand bots connecting and reading their first full snapshots, seconds in) from
    /// a fall behind that grows through the warm-up.
    #[serde(default)]
    pub warm_max_behind_at_s: Option<f64>,
    /// What the bots' work cost in the window, per datagram read and per tick of their
    /// own, and the cores that would keep every bot on schedule; `None` with nothing
    /// measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<BotsCost>,
    /// The SCHED_FIFO priority the bot thread ran at; `None`: normal scheduling.
    #[serde(default)]
    pub rt_priority: Option<u32>,
    /// How late the bot process woke for its send deadlines.
    pub wake_late_ms: Option<Percentiles>,
    /// Hit registration: the bots' own verdicts on their shots against the server's.
    #[serde(default)]
    pub hitreg: Hitreg,
    /// Action-file bots (`bots --replay`): the files whose inputs they sent and how the
    /// bots were given their seats; `None` for bots with a behaviour of their own.
    #[serde(default)]
    pub replay: Option<ReplaySource>,
}

/// The recorded inputs action-file bots replayed: bot `k` (from 0, across matches) replays
/// pair `k mod pairs` of the `(file, seat)` pairs, taken file by file in `files`' order,
/// each file's seats ascending.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReplaySource {
    /// The files, sorted by name.
    pub files: Vec<ReplayFile>,
    /// `(file, seat)` pairs in all: the sum of the files' `seats`.
    pub pairs: u64,
    /// Bots that replayed a pair.
    pub bots: u64,
    /// Recorded commands sent by the bot that sent the fewest, over the whole run (warm-up
    /// included): 0 when some bot never got to replay.
    pub min_inputs_per_bot: u64,
    /// Files of the directory left out, each with why (recorded on another map).
    pub skipped: Vec<String>,
}

/// One action file the bots replayed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReplayFile {
    /// Its file name.
    pub name: String,
    /// Its size, bytes.
    pub bytes: u64,
    /// The check it ends with (FNV-1a 64 of every byte before it), hex.
    pub check: String,
    /// The map it was recorded on.
    pub map: String,
    /// Ticks one pass over it takes, at the file's tick rate (the bots loop it).
    pub ticks: u32,
    /// The seats replayed: those with at least one input recorded, ascending.
    pub seats: Vec<u16>,
}

/// Hit-registration agreement: each aiming bot judges its shots against its own view of
/// the match and compares the server's verdict (same victim, or both a miss).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Hitreg {
    /// Shots compared in the measured window.
    pub shots: u64,
    /// Of those, the server's hits.
    pub server_hits: u64,
    /// Share of them on which bot and server agreed; `None` with no shots.
    pub agree_rate: Option<f64>,
    /// `agree_rate` by the round trip the bots' network conditioner added, milliseconds
    /// (one run covers one round trip).
    pub agree_rate_by_rtt: std::collections::BTreeMap<u32, f64>,
    /// The round trip the conditioner added, milliseconds.
    pub rtt_ms: f64,
    /// The conditioner's jitter either way, milliseconds.
    pub jitter_ms: f64,
    /// The bot saw a hit, the server a miss.
    pub bot_hit_server_miss: u64,
    /// The bot saw a miss, the server a hit.
    pub bot_miss_server_hit: u64,
    /// Of `bot_miss_server_hit`: the victim was not in the bot's view at that moment
    /// (never sent, or hidden by the fog of war).
    #[serde(default)]
    pub server_hit_unseen: u64,
    /// Both saw a hit, on different players.
    pub other_victim: u64,
    /// Of the server's hits: the victim, alive as the shooter saw it, had been killed by
    /// someone else before the shot arrived, so the hit did no damage (no lag compensation
    /// revives the dead).
    pub victim_dead_at_fire: u64,
    /// How far behind the newest snapshot the bots showed the world, milliseconds, on
    /// average: their sessions' adaptive interpolation delay, and where their shots were
    /// tested.
    pub interp_delay_ms: f64,
    /// The server's posing interval, ticks (poses lerped in between).
    pub pose_every: u8,
}

/// The full bench report (`tickforge bench --json PATH`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Report {
    pub scenario: String,
    pub tick_hz: u32,
    pub matches: u32,
    pub players_per_match: u32,
    /// The game every match played (`shooter`, `ctf`); empty in reports written before
    /// the runtime hosted more than the shooter.
    #[serde(default)]
    pub game: String,
    /// The map the matches were played on, by name; empty when the game has no map.
    #[serde(default)]
    pub map: String,
    pub duration_s: f64,
    pub warmup_s: f64,
    /// Frame budget per match tick at the target games per core.
    pub budget_ms: f64,
    pub match_frame_ms: Option<Percentiles>,
    pub worker_frame_ms: Option<Percentiles>,
    pub categories_ms: CategoryMs,
    pub phases_ms: PhaseMs,
    pub ticks: Ticks,
    /// The tick rate achieved and how far behind its schedule the server fell (the
    /// server's `schedule`).
    #[serde(default)]
    pub schedule: Schedule,
    pub games_per_core: GamesPerCore,
    /// Cost of one match tick's datagrams (batched receive and send, AEAD) with no game
    /// work, measured on this host before the run and again after it: the mean of the two.
    pub io_floor_ms: Option<f64>,
    /// The I/O floor per datagram in or out, microseconds.
    pub io_floor_per_datagram_us: Option<f64>,
    /// The I/O floor per datagram measured before the run and after it, microseconds: a
    /// shared host's load moves while a run lasts, and either alone may be a quarter off
    /// the floor the run had.
    #[serde(default)]
    pub io_floor_before_after_us: Option<[f64; 2]>,
    /// The I/O floor's ticks (its warm-up included) whose server side found fewer inputs
    /// than players, before the run and after it: the players' thread was held off its core
    /// past the wait, so those ticks read fewer datagrams and the floor reads that much low
    /// (and the frame that much higher against it). Zero both is a floor to trust.
    #[serde(default)]
    pub io_floor_short_ticks: Option<[usize; 2]>,
    /// Mean match frame ÷ I/O floor: what game and replication add on top of the I/O.
    pub frame_to_io_floor: Option<f64>,
    /// The flood sent during the run, if any.
    pub flood: Option<Flood>,
    pub clients: Clients,
    pub server_cpu_util: Option<f64>,
    pub bots_cpu_util: Option<f64>,
    pub bots_saturated: Option<bool>,
    /// Hit-registration agreement between the bots and the server.
    #[serde(default)]
    pub hitreg: Hitreg,
    /// The server's own section, for what the top level does not carry.
    pub server: ServerReport,
    /// The bots' own section.
    pub bots: BotsReport,
    /// Host facts: cores, and which cores server and bots were pinned to.
    pub host: Host,
    /// The games-per-core curve (`bench --sweep`): one step per match count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<Sweep>,
    /// What built and ran the bench, and on what host; `None` in reports written before
    /// benches recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunInfo>,
    /// The key figures of every run of `bench --repeat N`; `None` for a single run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<Repeats>,
}

/// The same bench run N times (`bench --repeat N`): each key figure's spread over the runs.
/// The rest of the report is one whole run's, the one [`Repeats::base_run`] names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Repeats {
    /// Runs made.
    pub runs: u32,
    /// The run (0-based, in the order run) whose report the rest of this one is.
    pub base_run: u32,
    /// Each key figure by its stable name (`match_frame_p99_ms`); a figure no run measured
    /// is left out.
    pub figures: BTreeMap<String, Spread>,
    /// The bench checks each run failed, as `NAME@runK` (K from 1): the checks of the
    /// combined report judge the base run, these every other.
    #[serde(default)]
    pub failed_checks: Vec<String>,
}

/// One figure over the runs of a [`Repeats`]: the least, the median and the most of the
/// runs that measured it, and every run's value in the order run (`None`: not measured).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Spread {
    pub min: f64,
    /// The middle value; with an even count the mean of the two middle ones.
    pub median: f64,
    pub max: f64,
    pub runs: Vec<Option<f64>>,
}

/// What built a bench and where it ran: the record a report carries for whoever reads it
/// later.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunInfo {
    /// The tickforge version.
    pub version: String,
    /// The git commit the binary was built from; `None` when built outside a checkout.
    pub commit: Option<String>,
    /// When the bench started, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// The host's name.
    pub hostname: String,
    /// The kernel's release.
    pub kernel: String,
    /// The CPU's model name.
    pub cpu_model: String,
    /// The bench's command line, the program first.
    pub command: Vec<String>,
    /// `tickforge doctor --quick` on the host before the run; `None` when it did not run.
    pub doctor: Option<DoctorSummary>,
}

/// The host checks of `tickforge doctor --quick` (the timed wake-up checks skipped).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DoctorSummary {
    /// Checks as a host for many matches per core wants them.
    pub ok: u32,
    /// Checks that cost ticks or datagrams, each with its fix.
    pub warn: u32,
    /// Checks worth knowing, or that could not be read.
    pub info: u32,
    /// Every check, in the doctor's order.
    pub checks: Vec<DoctorCheck>,
}

/// One check of the doctor.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DoctorCheck {
    /// The check's stable name (`clocksource`, `rmem_max`).
    pub name: String,
    /// `ok`, `warn` or `info`.
    pub verdict: String,
    /// What was read or measured.
    pub reading: String,
    /// What to change, for a warning.
    pub fix: Option<String>,
}

/// A sweep over match counts on one worker core (VALORANT's chart: frame time against
/// instance count).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// The steps, fewest matches first.
    pub steps: Vec<SweepStep>,
    /// Most matches a step held counting every late tick, the host's too.
    #[serde(default)]
    pub measured_strict_games_per_core: Option<u32>,
    /// Why the sweep stopped, in words with the figures (the step, its on-time rates, the
    /// late ticks by cause).
    #[serde(default)]
    pub stopped_because: String,
    /// Most matches a step held with at least 99.5% of ticks on time, none skipped, and
    /// the bots not saturated; `None` when even the first step did not.
    pub measured_games_per_core: Option<u32>,
    /// What ended the sweep: "server" (ticks late or skipped on the server's own
    /// account), "bots" (the bots' core saturated first: the server was not the limit),
    /// "host" (the host made so many ticks late, preempting or stealing the worker's
    /// core, that the server's own account could not be read), or "steps" (the last step
    /// still held).
    pub limited_by: String,
    /// What the steps raise: "matches" (`many-matches --sweep`, the default) or "players"
    /// in one match (`saturation`, the Quake paper's curve).
    #[serde(default = "matches_axis")]
    pub by: String,
}

fn matches_axis() -> String {
    "matches".into()
}

/// One step of a [`Sweep`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepStep {
    /// Matches hosted on the worker core.
    pub matches: u32,
    /// Players (bots) in each match.
    #[serde(default)]
    pub players: u32,
    /// Snapshots each client received per second (the Quake paper's response rate).
    #[serde(default)]
    pub response_rate_hz: Option<f64>,
    /// CPU cost of one match tick, milliseconds.
    pub match_frame_ms: Option<Percentiles>,
    /// Share of the worker's core in use (0..=1).
    pub worker_util: Option<f64>,
    /// Share of ticks started within 1 ms of their deadline.
    pub on_time_rate: Option<f64>,
    /// How late the worker woke for its earliest deadline, milliseconds.
    #[serde(default)]
    pub wake_late_ms: Option<Percentiles>,
    /// How late each match tick started after its deadline, milliseconds: what decides
    /// `on_time_rate`.
    #[serde(default)]
    pub tick_start_late_ms: Option<Percentiles>,
    /// Ticks never run.
    pub skipped: u64,
    /// The tick rate achieved and how far behind its schedule the server fell.
    #[serde(default)]
    pub schedule: Schedule,
    /// Response time at the clients, milliseconds.
    pub response_time_ms: ResponseTimeMs,
    /// Share of the bots' core in use, and whether it saturated.
    pub bots_cpu_util: Option<f64>,
    /// The bots' core was the bottleneck in this step.
    pub bots_saturated: bool,
    /// Why, when they were ([`BotsReport::saturated_by`]); `None` in reports written
    /// before the step kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bots_saturated_by: Option<SaturatedBy>,
    /// The cores that would have kept this step's bots on schedule
    /// ([`BotsCost::cores_to_keep_up`]); `None` where not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bots_cores_to_keep_up: Option<f64>,
    /// 0.9 × tick ÷ mean match frame at this step.
    pub projected_games_per_core: Option<f64>,
    /// Mean match frame ÷ the I/O floor.
    pub frame_to_io_floor: Option<f64>,
    /// The step's late ticks by cause.
    #[serde(default)]
    pub late_causes: LateCauses,
    /// The step judged on windows of its measured run ([`StepVerdict`]); `None` in
    /// reports written before the sweep judged windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<StepVerdict>,
}

/// How a sweep judged a step: its measured run split into windows, each judged on the
/// server's own account (late ticks attributed to the host excused) and strictly.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StepVerdict {
    /// The windows of the run the verdict stands on (the re-run's, when there was one).
    pub windows: Vec<WindowVerdict>,
    /// At least two windows in three held on the server's own account, nothing skipped.
    pub held: bool,
    /// The same, every late tick counted.
    pub held_strict: bool,
    /// Runs of the step: 2 when the first failed and it was run again.
    pub runs: u32,
    /// "held", "host" (held only with the host's misses excused), "server", "bots".
    pub outcome: String,
    /// Share of the step's ticks made late by stalls (the host's, confirmed or
    /// unexplained).
    pub host_late_share: f64,
}

/// One window of a step's run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WindowVerdict {
    /// Seconds of the measured run, `[from_s, to_s)`.
    pub from_s: u32,
    /// End of the window, seconds.
    pub to_s: u32,
    /// Ticks run in the window.
    pub ticks: u64,
    /// Of them late, every cause.
    pub late: u64,
    /// Of the late, those a stall made late (the host's, confirmed or unexplained).
    pub late_host: u64,
    /// Share on time, the stalls' misses excused (the server's own account).
    pub on_time_rate: f64,
    /// Share on time, every miss counted.
    pub on_time_rate_strict: f64,
}

/// Where the bench ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// Logical CPUs available to the bench.
    pub cpus: u32,
    /// Core the server was pinned to, if any.
    pub server_core: Option<u32>,
    /// Core the bots were pinned to, if any.
    pub bots_core: Option<u32>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_bots_cost_adds_what_each_bot_reads_and_runs_a_second() {
        use super::BotsCost;
        // 1,000 bots at 30 Hz, sent 32 datagrams a second each: 20 µs a datagram read and
        // 10 µs a tick cost 1,000 × (640 + 300) µs a second.
        let c = BotsCost::from_timings(1000, 30, 32.0, (2.0, 100_000), (0.5, 50_000)).unwrap();
        assert!((c.receive_us_per_datagram - 20.0).abs() < 1e-9);
        assert!((c.tick_us - 10.0).abs() < 1e-9);
        assert!((c.cores_to_keep_up - 0.94).abs() < 1e-9, "{c:?}");
        // Bots that read less than a datagram a tick (behind, or dropped by their socket)
        // are costed at one a tick: what the server sends each.
        let behind = BotsCost::from_timings(1000, 30, 3.0, (2.0, 100_000), (0.5, 50_000));
        assert!((behind.unwrap().cores_to_keep_up - 0.9).abs() < 1e-9);
        assert_eq!(
            BotsCost::from_timings(10, 30, 30.0, (0.0, 0), (1.0, 10)),
            None
        );
        assert_eq!(
            BotsCost::from_timings(10, 30, 30.0, (1.0, 10), (0.0, 0)),
            None
        );
    }

    #[test]
    fn smaps_rollup_gives_resident_and_huge_bytes() {
        use super::Memory;
        let text = "55a4c0de0000-7ffd1e5f7000 ---p 00000000 00:00 0 [rollup]\n\
                    Rss:              946040 kB\n\
                    Pss:              945000 kB\n\
                    AnonHugePages:    935936 kB\n";
        assert_eq!(
            Memory::from_smaps_rollup(text),
            Some(Memory {
                resident_bytes: 946_040 * 1024,
                huge_bytes: 935_936 * 1024,
            })
        );
        // A kernel without the huge line: none on them.
        assert_eq!(
            Memory::from_smaps_rollup("Rss: 12 kB\n").map(|m| m.huge_bytes),
            Some(0)
        );
        assert_eq!(Memory::from_smaps_rollup("Pss: 12 kB\n"), None);
        assert_eq!(Memory::from_smaps_rollup("Rss: many kB\n"), None);
        #[cfg(target_os = "linux")]
        {
            let m = Memory::of_this_process().expect("smaps_rollup on Linux");
            assert!(
                m.resident_bytes > 0 && m.huge_bytes <= m.resident_bytes,
                "{m:?}"
            );
        }
    }

    #[test]
    fn a_saturation_reason_is_written_in_snake_case() {
        use super::SaturatedBy;
        assert_eq!(
            serde_json::to_string(&SaturatedBy::LateWarmup).unwrap(),
            "\"late_warmup\""
        );
        assert_eq!(
            serde_json::from_str::<SaturatedBy>("\"cpu\"").unwrap(),
            SaturatedBy::Cpu
        );
    }

    use super::*;

    #[test]
    fn report_has_the_design_keys() {
        let v = serde_json::to_value(Report::default()).unwrap();
        for key in [
            "scenario",
            "tick_hz",
            "matches",
            "players_per_match",
            "game",
            "duration_s",
            "warmup_s",
            "budget_ms",
            "match_frame_ms",
            "worker_frame_ms",
            "categories_ms",
            "phases_ms",
            "ticks",
            "games_per_core",
            "io_floor_ms",
            "clients",
            "server_cpu_util",
            "bots_cpu_util",
            "bots_saturated",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        for c in Category::ALL {
            assert!(
                v["categories_ms"].get(c.name()).is_some(),
                "missing {}",
                c.name()
            );
        }
        for p in Phase::ALL {
            assert!(
                v["phases_ms"].get(p.name()).is_some(),
                "missing {}",
                p.name()
            );
        }
        for k in ["expected", "on_time", "late", "skipped", "hitches"] {
            assert!(v["ticks"].get(k).is_some());
        }
        for k in [
            "response_rate_hz",
            "response_time_ms",
            "server_delay_ms",
            "down_bytes_per_s",
            "up_bytes_per_s",
        ] {
            assert!(v["clients"].get(k).is_some());
        }
        assert!(v["io_floor_ms"].is_null());
    }

    #[test]
    fn reports_from_before_hitreg_still_parse_and_hitreg_round_trips() {
        let mut v = serde_json::to_value(Report::default()).unwrap();
        v.as_object_mut().unwrap().remove("hitreg");
        v["bots"].as_object_mut().unwrap().remove("hitreg");
        let old: Report = serde_json::from_value(v).unwrap();
        assert_eq!(old.hitreg, Hitreg::default());
        let h = Hitreg {
            shots: 10,
            agree_rate: Some(0.9),
            agree_rate_by_rtt: [(150, 0.9)].into_iter().collect(),
            ..Hitreg::default()
        };
        let json = serde_json::to_string(&h).unwrap();
        assert!(json.contains("\"150\":0.9"), "{json}");
        assert_eq!(serde_json::from_str::<Hitreg>(&json).unwrap(), h);
    }

    #[test]
    fn reports_from_before_the_game_field_parse_with_no_game() {
        let mut v = serde_json::to_value(Report {
            game: "ctf".into(),
            ..Report::default()
        })
        .unwrap();
        assert_eq!(v["game"], "ctf");
        v.as_object_mut().unwrap().remove("game");
        let old: Report = serde_json::from_value(v).unwrap();
        assert_eq!(old.game, "");
    }

    fn second(s: u32, frames: u32, p50: f64, p99: f64, max: f64, late: u32) -> FrameSecond {
        FrameSecond {
            s,
            frames,
            p50,
            p99,
            max,
            late,
            hitches: late / 2,
            late_host: late / 3,
        }
    }

    #[test]
    fn late_causes_add_and_split_host_from_server() {
        let mut a = LateCauses {
            own: 1,
            others: 2,
            host_preempted: 3,
            host_steal: 4,
            unexplained: 5,
        };
        assert_eq!((a.host(), a.total()), (7, 15));
        a.add(&LateCauses::from_counts([1, 1, 1, 1, 1]));
        assert_eq!(a.counts(), [2, 3, 4, 5, 6]);
        let v = serde_json::to_value(a).unwrap();
        for name in LateCauses::NAMES {
            assert!(v.get(name).is_some(), "missing {name}");
        }
        // Reports written before the attribution read as no late tick by cause.
        let old: ServerReport = serde_json::from_str(
            &serde_json::to_string(&ServerReport::default())
                .unwrap()
                .replace(",\"late_causes\":{\"own\":0,\"others\":0,\"host_preempted\":0,\"host_steal\":0,\"unexplained\":0}", ""),
        )
        .unwrap();
        assert_eq!(old.late_causes, LateCauses::default());
    }

    #[test]
    fn frame_seconds_merge_by_second_adding_counts_and_bounding_percentiles() {
        let mut a = vec![
            second(0, 128, 0.1, 0.2, 0.3, 0),
            second(2, 128, 0.1, 0.5, 0.9, 4),
        ];
        let b = [
            second(0, 256, 0.2, 0.15, 0.4, 2),
            second(1, 10, 0.3, 0.3, 0.3, 0),
            second(3, 1, 1.0, 1.0, 1.0, 1),
        ];
        merge_frame_seconds(&mut a, &b);
        let seconds: Vec<u32> = a.iter().map(|x| x.s).collect();
        assert_eq!(seconds, [0, 1, 2, 3]);
        assert_eq!(a[0], second(0, 384, 0.2, 0.2, 0.4, 2));
        assert_eq!(a[1], b[1]);
        assert_eq!(a[3], b[2]);
        // An empty side leaves the other as it was.
        let before = a.clone();
        merge_frame_seconds(&mut a, &[]);
        assert_eq!(a, before);
        let mut empty = Vec::new();
        merge_frame_seconds(&mut empty, &before);
        assert_eq!(empty, before);
    }

    #[test]
    fn reports_from_before_the_frame_series_parse_with_none() {
        let mut v = serde_json::to_value(ServerReport::default()).unwrap();
        assert!(v["frame_seconds"].as_array().unwrap().is_empty());
        v.as_object_mut().unwrap().remove("frame_seconds");
        let old: ServerReport = serde_json::from_value(v).unwrap();
        assert!(old.frame_seconds.is_empty());
    }

    #[test]
    fn a_server_that_runs_half_its_ticks_achieves_half_the_rate_and_fell_behind() {
        // 30 Hz for 10 s: 300 ticks due, 150 run, the last one 5 s late.
        let ticks = Ticks {
            expected: 300,
            late: 150,
            skipped: 150,
            ..Ticks::default()
        };
        let s = Schedule::new(30, &ticks, Some(5_000.0));
        assert_eq!(s.achieved_tick_hz, Some(15.0));
        assert!(s.fell_behind, "{s:?}");
        // On schedule: every tick due ran, the last a fraction of a millisecond late.
        let ticks = Ticks {
            expected: 300,
            on_time: 300,
            ..Ticks::default()
        };
        let s = Schedule::new(30, &ticks, Some(0.2));
        assert_eq!(s.achieved_tick_hz, Some(30.0));
        assert!(!s.fell_behind, "{s:?}");
    }

    #[test]
    fn falling_behind_takes_a_lag_past_two_ticks_and_a_window_short_of_ticks() {
        // 30 Hz: a tick is 33.3 ms, two are 66.7 ms; 300 due, 290 run: 10 short, over 3.
        let mut ticks = Ticks {
            expected: 300,
            on_time: 290,
            ..Ticks::default()
        };
        assert!(!Schedule::new(30, &ticks, Some(66.0)).fell_behind);
        assert!(Schedule::new(30, &ticks, Some(67.0)).fell_behind);
        // A stall at the window's close: 3 ticks late, 3 short of 300, not past 1%.
        ticks.on_time = 297;
        assert!(!Schedule::new(30, &ticks, Some(100.0)).fell_behind);
        ticks.on_time = 296;
        assert!(Schedule::new(30, &ticks, Some(100.0)).fell_behind);
        let ticks = Ticks::default();
        assert!(!Schedule::new(30, &ticks, None).fell_behind, "no tick ran");
        assert_eq!(Schedule::new(30, &ticks, None).achieved_tick_hz, None);
    }

    #[test]
    fn reports_from_before_the_schedule_parse_as_not_behind() {
        let mut v = serde_json::to_value(Report::default()).unwrap();
        assert!(v["schedule"]["fell_behind"].is_boolean());
        assert!(v["server"]["schedule"].get("achieved_tick_hz").is_some());
        assert!(v["server"]["schedule"].get("lag_ms").is_some());
        v.as_object_mut().unwrap().remove("schedule");
        v["server"].as_object_mut().unwrap().remove("schedule");
        let old: Report = serde_json::from_value(v).unwrap();
        assert_eq!(old.schedule, Schedule::default());
        assert!(!old.server.schedule.fell_behind);
    }

    #[test]
    fn category_table_round_trips_through_json() {
        let c = CategoryMs::from_fn(|c| Some(c.index() as f64));
        let back: CategoryMs = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(c, back);
        assert_eq!(c.sum(), 45.0);
    }
}
