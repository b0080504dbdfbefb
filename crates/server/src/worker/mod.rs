//! A worker: one thread, one socket, its matches, and the frame that drives them.
//!
//! ```text
//! wake at the earliest match deadline        (sleep, then spin)
//! Worker::frame, which allocates nothing:
//!   receive every waiting datagram           → transport → route by client → match
//!   for each match whose tick is due:        Match::run_tick leaves a payload per seat in
//!                                            its outbox; the worker seals each into the
//!                                            send batch (seal.rs)
//!   send the batch
//! Worker::after_frame, before the next wake-up:
//!   charge the frames their share of the send, record them (metrics, the match's
//!                                            history by round, budget violations)
//!   each match that ended: its result queued (its frame history in it), and it starts
//!                                            over on its shared map (its first tick
//!                                            waits until the result is on disk, at most
//!                                            RESULT_HOLD) or is removed
//!   hand queued results to the persister     → its thread writes and fsyncs them
//!   take the admin's commands                → create matches between ticks
//! about once a second: publish status and metrics, roll the cost window
//! ```
//!
//! Timing: every match has absolute deadlines on its own grid (`grid + tick × period`),
//! and a worker's startup matches are phase-spread: match `k` of `M` starts `k/M` of a
//! period after the first, so they do not all wake the worker together.
//!
//! Catch-up: a due match runs one tick per wake-up, never more. A late worker wakes again
//! at once while any deadline has passed, so a backlog of `B` ticks clears in `B`
//! wake-ups, each of which also gives every other due match its tick: one slow match
//! cannot take more than its share. Ticks are never skipped; every tick that starts more
//! than 1 ms late counts as late, and one more than a period late as a hitch.
//!
//! Measurement: a tick counts in the measured window when it started inside it on the wall
//! clock, whatever its deadline. A worker whose ticks cost more than a period falls ever
//! further behind its grid; its ticks still count, all late, and the report says the tick
//! rate it achieved and how far behind it was when the window closed (`schedule`).

mod admission;
mod fair;
#[cfg(test)]
mod history_tests;
mod persist;
mod preempt;
mod report;
mod results;
mod routing;
#[cfg(test)]
mod schedule_tests;
mod seal;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickforge_api::{MatchSetup, Seat};
use tickforge_io::udp::{IoStats, RecvBatch, SendBatch, SocketOptions, UdpSocket};
use tickforge_io::{entropy, time};
use tickforge_proto::netcode::{self, Server as Transport};
use tickforge_proto::{MatchId, MAX_PACKET_BYTES};
use tickforge_telemetry::prometheus::MetricsSnapshot;
use tickforge_telemetry::rounds::{Budgets, MatchHistory, FRAME_SLOT};
use tickforge_telemetry::{match_budget_ms, FrameRecord, Scopes};

use crate::admin::WorkerLink;
use crate::config::ServerConfig;
use crate::game_match::HostedMatch;
use crate::games::{GameError, MatchMaker};
use crate::RunId;

pub use admission::{matches_that_fit, remaining_capacity, ADMISSION_BUDGET_SHARE};
pub use report::WorkerFigures;
pub use seal::tick_match;

use report::{Drops, Measure, Retired, Window};

/// A tick that starts later than this after its deadline is late (DESIGN.md).
const LATE_AFTER: Duration = Duration::from_millis(1);

/// Client slots a worker reserves beyond its startup matches' seats: more than one core
/// serves (a thousand clients at 30 Hz fill it). The transport reserves handshakes and
/// control packets for several times its slots, spread over tables a join touches at
/// random; sized for 120 matches of a thousand players (65,535 slots), they came to a
/// gigabyte, faulted in on huge pages as the crowd's players joined: the worker stalled
/// five seconds and its socket dropped 26,000 handshake packets.
const MAX_EXTRA_CLIENT_SLOTS: usize = 4096;

/// The transport's client slots for a worker: every seat of its `startup` matches, and room
/// for the seats of the `room` matches admission may let in, up to
/// [`MAX_EXTRA_CLIENT_SLOTS`] in all. Admission refuses a match whose seats do not fit.
fn client_slots(startup: usize, room: usize, players_per_match: u16) -> u16 {
    let players = usize::from(players_per_match);
    let slots = (startup * players).max((room * players).min(MAX_EXTRA_CLIENT_SLOTS));
    slots.clamp(1, usize::from(u16::MAX)) as u16
}

/// Datagrams read per receive batch.
const RECV_BATCH: usize = 256;
/// While a match waits for its predecessor's result to be durable and its deadline has
/// passed, the worker looks again this often (its tick then starts at most this late).
const RESULT_POLL: Duration = Duration::from_micros(500);
/// The longest a match waits for its predecessor's result to be durable: a disk that hangs
/// (a hard NFS mount, a dead device) instead of failing must not hold it back for ever.
/// After this it ticks, and the result stays counted pending until the disk takes it.
const RESULT_HOLD: Duration = Duration::from_secs(1);

/// How the process asks its workers to stop. Cheap to clone: every clone shares the flags.
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    draining: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    /// SIGTERMs and SIGINTs received ([`Shutdown::signal`]).
    signals: Arc<AtomicUsize>,
    /// What the draining workers still wait for, summed over them.
    waiting: Arc<Waiting>,
}

/// The matches with a connected player and those players, summed over the workers that
/// have seen the drain start: each adds the change since what it last published.
#[derive(Debug, Default)]
struct Waiting {
    matches: AtomicUsize,
    players: AtomicUsize,
    results_pending: AtomicUsize,
    workers: AtomicUsize,
}

/// What a draining server still waits for ([`Shutdown::drain_progress`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrainProgress {
    /// Matches with at least one connected player (a draining worker stops the others at
    /// once: they have nothing to lose).
    pub matches: usize,
    /// Players connected to them.
    pub players: usize,
    /// Result lines handed to the workers' persisters and not yet on disk (nor given up
    /// on): a stop now would lose them.
    pub results_pending: usize,
    /// Workers that have seen the drain start and published what they wait for.
    pub workers: usize,
}

impl Shutdown {
    /// Neither draining nor stopped.
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// The flag that starts draining when set: hand it to a signal handler
    /// (`signal_hook::flag::register`). Draining workers take no new matches, do not
    /// restart finished ones, stop at once the matches nobody plays, and exit once they
    /// host none or the drain timeout passes.
    pub fn drain_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.draining)
    }

    /// Starts draining (see [`Shutdown::drain_flag`]).
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// True once draining has started.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Stops every worker at its next wake-up, whatever its matches are doing.
    pub fn stop_now(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// True once [`Shutdown::stop_now`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Counts a SIGTERM or SIGINT: the first starts draining, a second stops every worker
    /// at once ([`Shutdown::is_abandoned`]). Returns how many have come, this one
    /// included (`serve` exits the process outright at the third). Atomic operations
    /// only, so it may run in a signal handler.
    pub fn signal(&self) -> usize {
        let before = self.signals.fetch_add(1, Ordering::AcqRel);
        if before == 0 {
            self.drain();
        } else {
            self.stop_now();
        }
        before + 1
    }

    /// True once a second signal abandoned the drain ([`Shutdown::signal`]).
    pub fn is_abandoned(&self) -> bool {
        self.signals.load(Ordering::Acquire) >= 2
    }

    /// What the draining workers still wait for: as each last published it.
    pub fn drain_progress(&self) -> DrainProgress {
        let workers = self.waiting.workers.load(Ordering::Acquire);
        DrainProgress {
            matches: self.waiting.matches.load(Ordering::Acquire),
            players: self.waiting.players.load(Ordering::Acquire),
            results_pending: self.waiting.results_pending.load(Ordering::Acquire),
            workers,
        }
    }

    /// A draining worker's share of [`Shutdown::drain_progress`]: `now` (matches, players,
    /// result lines pending) replaces what it `published` before (`None`: nothing yet; it
    /// then counts as a worker that has seen the drain).
    fn publish_waiting(
        &self,
        published: &mut Option<(usize, usize, usize)>,
        now: (usize, usize, usize),
    ) {
        let before = published.unwrap_or((0, 0, 0));
        if *published == Some(now) {
            return;
        }
        let w = &self.waiting;
        w.matches.fetch_add(now.0, Ordering::AcqRel);
        w.matches.fetch_sub(before.0, Ordering::AcqRel);
        w.players.fetch_add(now.1, Ordering::AcqRel);
        w.players.fetch_sub(before.1, Ordering::AcqRel);
        w.results_pending.fetch_add(now.2, Ordering::AcqRel);
        w.results_pending.fetch_sub(before.2, Ordering::AcqRel);
        if published.is_none() {
            w.workers.fetch_add(1, Ordering::AcqRel);
        }
        *published = Some(now);
    }
}

/// What a running worker reports about once a second.
#[derive(Clone, Copy, Debug)]
pub struct WorkerStatus {
    /// The worker's index in the host.
    pub worker: usize,
    /// Time since the worker started.
    pub elapsed: Duration,
    /// Connected players over all matches.
    pub connected: usize,
    /// Matches hosted now.
    pub matches: usize,
    /// Match ticks run since start.
    pub ticks_run: u64,
    /// Late ticks in the measured window so far.
    pub late: u64,
}

/// What the host gives a worker besides the configuration.
#[derive(Debug)]
pub struct WorkerSetup {
    /// The worker's index in the host (its place in the `listening` line).
    pub index: usize,
    /// The real-time FIFO priority the worker's thread runs at; `None`: normal class.
    pub realtime: Option<u8>,
    /// The CPUs the worker's helper thread (the persister) runs on, in the normal class:
    /// the process's own, read before any worker was pinned. Empty: where it starts.
    pub helper_cores: Vec<usize>,
    /// The startup matches this worker hosts (placed by the host); they restart when they
    /// finish, until the server drains.
    pub matches: Vec<MatchId>,
    /// The host's start: the measured window and the first match's tick 0 count from it.
    pub start: Instant,
    /// Where players reach this worker, as its connect tokens name it.
    pub public_addr: SocketAddr,
    /// The link to the admin and Agones threads, when either runs.
    pub admin: Option<WorkerLink>,
    /// The process's run id: on every result line and action file name the worker writes.
    pub run_id: RunId,
}

/// What one [`Worker::frame`] did.
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    /// Match ticks run.
    pub ticks: usize,
    /// When the last tick ended and the send began.
    pub ticked: Instant,
    /// When the send batch had gone.
    pub sent: Instant,
}

/// Per-match figures since the match was created, kept beside its match ([`HostedMatch`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatchCounters {
    /// Ticks run.
    pub ticks: u64,
    /// Ticks that started more than 1 ms after their deadline.
    pub late: u64,
    /// Ticks more than one period late, or frames over twice the budget.
    pub hitches: u64,
}

/// What the worker keeps about a match beside the match itself (index for index).
struct Hosted {
    /// Deadline of the match's first tick: every later deadline is on this grid.
    grid: Instant,
    /// A startup match starts over when it finishes (until the server drains); a match
    /// the admin created is removed instead.
    restarts: bool,
    /// Finished, to be removed after this wake-up's frames are recorded.
    over: bool,
    /// When the match was created: its first tick's deadline, within a tick of it (an
    /// admin-made match nobody joins is reclaimed `unjoined_match_ttl` after it).
    created: Instant,
    /// A player has been seated in it at least once.
    joined: bool,
    /// The persister ticket of the previous match's result, and when the match stops
    /// waiting for it: this match does not tick until it is durable, or until then.
    awaiting_result: Option<(u64, Instant)>,
    counters: MatchCounters,
    /// Its recent frame cost, against its fair share of the tick.
    cost: fair::FrameCost,
    /// The stagger its game was made with (`MatchSetup::stagger`): a new match of its
    /// phase group takes one no other match of the group has.
    stagger: u32,
    /// Its frames by round and budget violations since it (re)started: reserved with the
    /// match, cleared when it starts over.
    history: MatchHistory,
}

impl Hosted {
    /// Holds the match back until the result with `ticket` is durable, or for
    /// [`RESULT_HOLD`] from `now`, whichever comes first; `None`: nothing to wait for.
    fn await_result(&mut self, ticket: Option<u64>, now: Instant) {
        self.awaiting_result = ticket.map(|t| (t, now + RESULT_HOLD));
    }

    fn new(grid: Instant, restarts: bool, budgets: Budgets, stagger: u32) -> Hosted {
        Hosted {
            stagger,
            grid,
            restarts,
            over: false,
            created: grid,
            joined: false,
            awaiting_result: None,
            counters: MatchCounters::default(),
            cost: fair::FrameCost::default(),
            history: MatchHistory::new(budgets),
        }
    }
}

/// The budgets a match of `seats` seats at `tick_hz` is held to: the configured ones, and
/// for the whole frame the configured one or else the match budget
/// ([`match_budget_ms`]: DESIGN.md's frame budget, grown past ten players).
pub(crate) fn match_budgets(configured: &Budgets, tick_hz: u32, seats: u16) -> Budgets {
    let mut budgets = *configured;
    let frame_ns = match_budget_ms(tick_hz, u32::from(seats)) * 1e6;
    budgets.ns[FRAME_SLOT] = budgets.ns[FRAME_SLOT].or(Some(frame_ns.round() as u64));
    budgets
}

/// One match tick of a wake-up, waiting for its share of the send cost.
#[derive(Clone, Copy, Debug)]
struct DueFrame {
    /// The match's index.
    index: usize,
    record: FrameRecord,
    /// Datagrams it queued.
    queued: usize,
    /// How late the tick started.
    late: Duration,
    deadline: Instant,
    /// When it started on the wall clock: what places it in the measured window.
    started: Instant,
    /// The game's round after the tick ([`HostedMatch::round`]).
    round: Option<u32>,
}

/// One worker thread's state: it lives as long as the thread.
pub struct Worker {
    config: ServerConfig,
    index: usize,
    /// The process's run id ([`WorkerSetup::run_id`]).
    run_id: RunId,
    /// The real-time FIFO priority this worker's thread runs at; `None`: normal class.
    realtime: Option<u8>,
    /// Sleeps to each wake-up, spinning at most `spin_us` before it.
    sleeper: time::Sleeper,
    socket: UdpSocket,
    transport: Transport,
    matches: Vec<Box<dyn HostedMatch>>,
    /// Makes the matches of the server's own game (`[game]`); an admin request may bring
    /// its own.
    maker: Arc<dyn MatchMaker>,
    hosted: Vec<Hosted>,
    /// Where each connection sits: match index and slot, by client index.
    routes: Vec<Option<(usize, Seat)>>,
    recv: RecvBatch,
    send: SendBatch,
    frame_buf: Vec<u8>,
    /// Datagrams routed to each match in this wake-up, to share the receive cost.
    routed: Vec<u32>,
    /// Frames of this wake-up waiting for their share of the send cost.
    due: Vec<DueFrame>,
    /// The matches due in this wake-up, in the order they run ([`fair::order`]).
    order: Vec<fair::Due>,
    /// Matches finished in this wake-up and not restarted.
    finished: usize,
    /// Writes finished matches' results and action files off the frame; `None`: neither
    /// is configured.
    persister: Option<persist::Persister>,
    admin: Option<WorkerLink>,
    /// Running totals for `/metrics`.
    metrics: MetricsSnapshot,
    /// Mean match frame cost over the last whole second, for admission.
    cost: admission::CostWindow,
    scopes: Scopes,
    io: IoStats,
    drops: Drops,
    retired: Retired,
    start: Instant,
    /// The measured window: warm-up after the start, then the configured duration.
    window: Window,
    measure: Measure,
    /// The startup matches it was given (a drain may remove them before the report).
    startup_matches: u32,
    /// Why its ticks were late: its own work or the host's (preempt.rs).
    preempt: preempt::Preempt,
}

/// Errors that stop a worker before it runs.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The game socket could not be opened.
    #[error("cannot bind {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The results file could not be opened for appending.
    #[error("cannot open results file {path}")]
    Results {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The configured game is not in this binary, or refused its settings.
    #[error("{0}")]
    Game(#[from] GameError),
    /// The directory action files are written to could not be created.
    #[error("--record-dir {path}: cannot create")]
    RecordDir {
        /// The directory.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Opens a game socket on `addr` (port 0: a free one) and returns it with its address.
pub fn bind_game_socket(addr: SocketAddr) -> Result<(UdpSocket, SocketAddr), WorkerError> {
    let bind_error = |source| WorkerError::Bind { addr, source };
    let socket = UdpSocket::bind(addr, SocketOptions::default()).map_err(bind_error)?;
    let bound = socket.local_addr().map_err(bind_error)?;
    Ok((socket, bound))
}

impl Worker {
    /// A lone worker: binds `config.bind` and hosts matches `1..=config.matches`, with no
    /// admin link. The host ([`crate::host`]) uses [`Worker::with_socket`] instead.
    pub fn new(config: ServerConfig) -> Result<Self, WorkerError> {
        Worker::lone(config, time::now())
    }

    /// [`Worker::new`] with its first match's tick 0 due at `start`. A start in the past
    /// makes every tick due at once: a test drives [`Worker::frame`] without waiting.
    pub fn lone(config: ServerConfig, start: Instant) -> Result<Self, WorkerError> {
        let (socket, bound) = bind_game_socket(config.bind)?;
        let setup = WorkerSetup {
            index: 0,
            realtime: None,
            helper_cores: tickforge_io::cpu::allowed_cores(),
            matches: (1..=config.matches).map(MatchId).collect(),
            start,
            public_addr: config.public_addr.unwrap_or(bound),
            admin: None,
            run_id: RunId::generate(),
        };
        Worker::with_socket(config, socket, setup)
    }

    /// A worker on an open socket. Call on the worker's own thread, after pinning it: the
    /// buffers and matches allocated here are then first touched on its NUMA node.
    pub fn with_socket(
        config: ServerConfig,
        socket: UdpSocket,
        setup: WorkerSetup,
    ) -> Result<Self, WorkerError> {
        // Room for the startup matches and as many more as admission may let in.
        let room = setup
            .matches
            .len()
            .max(config.max_matches_per_worker as usize);
        let max_clients = client_slots(setup.matches.len(), room, config.players_per_match);
        let start = setup.start;
        let maker = config.game.maker()?;
        let match_setup = MatchSetup {
            seats: config.players_per_match,
            tick_hz: config.tick_hz,
            record: config.record_dir.is_some(),
            stagger: 0,
        };
        let period = Duration::from_nanos(1_000_000_000 / u64::from(config.tick_hz));
        let groups = crate::config::phase_groups_for(config.phase_groups, setup.matches.len());
        let mut matches = Vec::with_capacity(room);
        let mut hosted = Vec::with_capacity(room);
        for (k, &id) in setup.matches.iter().enumerate() {
            // Match k starts (k mod G)/G of a period after the first, and is the (k / G)th
            // of its group.
            let grid = start + period * (k as u32 % groups) / groups;
            let setup = MatchSetup {
                stagger: k as u32 / groups,
                ..match_setup
            };
            matches.push(maker.make(id, setup, grid));
            let budgets = match_budgets(&config.budgets, config.tick_hz, match_setup.seats);
            hosted.push(Hosted::new(grid, true, budgets, setup.stagger));
        }
        if let Some(dir) = &config.record_dir {
            std::fs::create_dir_all(dir).map_err(|source| WorkerError::RecordDir {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let datagrams_per_wake = usize::from(max_clients) * 2 + 64;
        // Shared with the other workers; the first open repairs a torn last line.
        let results =
            match &config.results_file {
                None => None,
                Some(path) => Some(results::ResultsLog::open(path).map_err(|source| {
                    WorkerError::Results {
                        path: path.display().to_string(),
                        source,
                    }
                })?),
            };
        let persister = (results.is_some() || config.record_dir.is_some())
            .then(|| persist::Persister::new(setup.index, results, setup.helper_cores.clone()));
        Ok(Worker {
            index: setup.index,
            run_id: setup.run_id,
            realtime: setup.realtime,
            sleeper: time::Sleeper::new(config.spin),
            persister,
            transport: Transport::new(
                netcode::ServerConfig {
                    protocol_id: config.protocol_id,
                    private_key: config.private_key.0,
                    public_addresses: vec![setup.public_addr],
                    max_clients,
                    requests_per_second_per_ip: config.requests_per_second_per_ip,
                },
                start,
                entropy::unix_now(),
                entropy::random_bytes(),
            ),
            routes: vec![None; usize::from(max_clients)],
            recv: RecvBatch::with_capacity(RECV_BATCH),
            send: SendBatch::with_capacity(datagrams_per_wake, MAX_PACKET_BYTES),
            frame_buf: Vec::with_capacity(netcode::MAX_TRANSMIT_BYTES),
            routed: Vec::with_capacity(room),
            due: Vec::with_capacity(room),
            order: Vec::with_capacity(room),
            finished: 0,
            admin: setup.admin,
            metrics: MetricsSnapshot::default(),
            cost: admission::CostWindow::default(),
            scopes: Scopes::new(time::now),
            io: IoStats::default(),
            drops: Drops::default(),
            retired: Retired::default(),
            matches,
            maker,
            hosted,
            socket,
            window: Window::new(start, config.warmup, config.duration),
            config,
            start,
            measure: Measure::default(),
            startup_matches: setup.matches.len() as u32,
            preempt: preempt::Preempt::default(),
        })
    }

    /// The address the game socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket
            .local_addr()
            .expect("a bound socket has an address")
    }

    /// Runs frames until `shutdown` stops the worker, it has drained, or the measured
    /// window and `linger` after it have passed. Calls `status` about once a second.
    /// Returns the figures of the measured window.
    pub fn run(
        &mut self,
        shutdown: &Shutdown,
        linger: Option<Duration>,
        status: &mut dyn FnMut(&WorkerStatus),
    ) -> WorkerFigures {
        time::tighten_timer_slack();
        let window = self.window;
        let exit_at = window.end.zip(linger).map(|(end, l)| end + l);
        let mut next_status = self.start + Duration::from_secs(1);
        let mut drain_until = None;
        let mut waiting = None;
        let mut ticks_run = 0u64;
        if let Some(p) = &mut self.persister {
            p.start();
        }
        self.preempt.start();
        let stopped_at = loop {
            if shutdown.is_draining() && drain_until.is_none() {
                drain_until = Some(time::now() + self.config.drain_timeout);
            }
            if drain_until.is_some() {
                // Draining: a match nobody plays has nothing to lose; stop it now.
                self.stop_unplayed();
                let pending = (self.persister.as_ref()).map_or(0, |p| p.pending() as usize);
                let now = (self.matches.len(), self.connected(), pending);
                shutdown.publish_waiting(&mut waiting, now);
            }
            // Idle (no matches): wake once a period for commands and the stop flags.
            let earliest = self.next_wake();
            let deadline = earliest.unwrap_or_else(|| time::now() + self.period());
            let drained = drain_until.is_some_and(|t| self.matches.is_empty() || deadline >= t);
            // The exit is judged on the wall clock: a worker behind its schedule has
            // deadlines in the past and would otherwise serve on past its linger.
            let exit = exit_at.is_some_and(|t| deadline.max(time::now()) >= t);
            if shutdown.is_stopped() || drained || exit {
                break time::now();
            }
            self.preempt.sleeping(time::now());
            let woke = self.sleeper.sleep_until(deadline);
            if let Some(link) = &self.admin {
                link.beat();
            }
            if earliest.is_some() {
                self.measure.woke(&window, deadline, woke);
                (self.preempt).woke(deadline, woke, window.contains(woke));
            }

            let frame = self.frame(woke);
            ticks_run += frame.ticks as u64;
            let sent = frame.sent;
            self.after_frame(&frame, shutdown.is_draining());
            if earliest.is_some() && window.contains(woke) {
                self.measure.worker_frames.record_ns(nanos(sent - woke));
            }

            if sent >= next_status {
                next_status += Duration::from_secs(1);
                self.cost.roll();
                self.preempt.sample_steal(sent >= window.start);
                self.publish();
                status(&WorkerStatus {
                    worker: self.index,
                    elapsed: sent - self.start,
                    connected: self.connected(),
                    matches: self.matches.len(),
                    ticks_run,
                    late: self.measure.ticks.late,
                });
            }
        };
        // Every result handed over is on disk (or counted failed) before the worker stops.
        if let Some(p) = &mut self.persister {
            p.finish();
        }
        self.measure.close(&window);
        self.figures(&window, stopped_at)
    }

    /// One wake-up's frame, woken at `woke`: every waiting datagram received and routed to
    /// its match, one tick of every due match with its packets sealed into the send batch,
    /// and the batch sent. Allocates nothing: what must allocate waits for
    /// [`Worker::after_frame`].
    ///
    /// [`Worker::run`] calls it once per wake-up; a test may drive it directly, calling
    /// [`Worker::after_frame`] after each (a match that ended waits there to start over).
    pub fn frame(&mut self, woke: Instant) -> Frame {
        self.frame_on(woke, None)
    }

    /// [`Worker::frame`], its ticks on `clock` when given, else on the host's clock.
    fn frame_on(&mut self, woke: Instant, clock: Option<Instant>) -> Frame {
        // Receive, and share its cost among the matches by datagrams routed to each.
        self.receive(woke);
        let received = time::now();
        self.share_receive_cost(nanos(received - woke));
        let ticks = self.run_due_ticks(clock);
        let ticked = time::now();
        self.send.flush(&self.socket, &mut self.io);
        self.scopes.mark_wakeup();
        Frame {
            ticks,
            ticked,
            sent: time::now(),
        }
    }

    /// [`Worker::frame`] at `now` of a clock the caller keeps: what is due, and the time
    /// every tick of the frame runs at (its links' resends, its transport's keep-alives),
    /// go by `now`, not by the host's clock; only the frame's costs are timed for real. A
    /// test that runs its clients a tick a frame on virtual time runs the worker on the
    /// same time, so that a lost message is sent again as many frames later on any
    /// machine, fast or slow. [`Worker::after_frame`] keeps the host's clock (a finished
    /// match's wait for its result to be durable is real time).
    pub fn frame_at(&mut self, now: Instant) -> Frame {
        self.frame_on(now, Some(now))
    }

    /// What follows a [`Worker::frame`] before the next wake-up, off the tick: the frames'
    /// costs are charged and recorded (allocating nothing), every match that ended in it
    /// hands its result to the persister and starts over or is removed (allocating its new
    /// world), the results are handed to the persister's thread, and the admin's commands
    /// are taken (a match it asks for is created here, its memory reserved).
    pub fn after_frame(&mut self, frame: &Frame, draining: bool) {
        // Recorded before a finished match's result is made: its last frame is in it.
        let window = self.window;
        self.charge_send_and_record(nanos(frame.sent - frame.ticked), &window);
        self.finish_ended(draining);
        self.disconnect_stalled();
        if let Some(p) = &mut self.persister {
            p.hand_over();
        }
        self.remove_finished();
        self.take_commands(time::now(), draining);
    }

    /// The matches this worker hosts, in no particular order.
    pub fn matches(&self) -> &[Box<dyn HostedMatch>] {
        &self.matches
    }

    /// The earliest deadline of a match that may tick; a match waiting for its
    /// predecessor's result is looked at again [`RESULT_POLL`] from now (or when its wait
    /// ends, if sooner). `None`: no match.
    fn next_wake(&self) -> Option<Instant> {
        let mut poll = None;
        let mut next = |m: &dyn HostedMatch, h: &Hosted| {
            let deadline = m.next_deadline();
            match h.awaiting_result {
                None => deadline,
                Some((_, release)) => {
                    let poll = *poll.get_or_insert_with(|| time::now() + RESULT_POLL);
                    deadline.max(poll.min(release))
                }
            }
        };
        self.matches
            .iter()
            .zip(&self.hosted)
            .map(|(m, h)| next(m.as_ref(), h))
            .min()
    }

    /// Runs one tick of every match whose deadline has passed and whose predecessor's
    /// result is durable (or was waited for [`RESULT_HOLD`]); returns the ticks run. The matches
    /// within their fair share of the tick run first ([`fair::order`]). What is due, and
    /// the time each tick runs at, go by `clock` when given ([`Worker::frame_at`]'s), else
    /// by the host's clock.
    fn run_due_ticks(&mut self, clock: Option<Instant>) -> usize {
        let tick_now = || clock.unwrap_or_else(time::now);
        self.due.clear();
        self.order.clear();
        let now = tick_now();
        for i in 0..self.matches.len() {
            let deadline = self.matches[i].next_deadline();
            if deadline > now {
                continue;
            }
            if let Some((ticket, release)) = self.hosted[i].awaiting_result {
                let durable = self.persister.as_ref().is_none_or(|p| p.is_done(ticket));
                if !durable && now < release {
                    continue;
                }
                self.hosted[i].awaiting_result = None;
            }
            self.order.push(fair::Due {
                index: i,
                deadline,
                cost_ns: self.hosted[i].cost.mean_ns(),
            });
        }
        let share = fair::share_ns(nanos(self.period()), self.matches.len());
        fair::order(&mut self.order, share);
        for k in 0..self.order.len() {
            let fair::Due {
                index: i, deadline, ..
            } = self.order[k];
            let now = tick_now();
            // Receiving this match's own datagrams in this wake-up is its frame's work,
            // not a late start: the tick is late by what came before it otherwise (the
            // worker's wake-up, other matches' datagrams and ticks).
            let own = Duration::from_nanos(self.matches[i].counters().wake_receive_ns);
            let late = (now - deadline).saturating_sub(own);
            let (record, queued) = tick_match(
                self.matches[i].as_mut(),
                now,
                &self.scopes,
                &mut self.transport,
                &mut self.frame_buf,
                &mut self.send,
            );
            self.due.push(DueFrame {
                index: i,
                record,
                queued,
                late,
                deadline,
                started: now,
                round: self.matches[i].round(),
            });
        }
        self.due.len()
    }

    /// Takes the result of every match that ended in this wake-up's ticks and queues it for
    /// the persister; the match starts over (a startup match: its first tick waits until
    /// the result is durable, at most [`RESULT_HOLD`]) or, on a draining server or for an
    /// admin-made match, is marked for removal. Allocates (the result, a new world): after
    /// the send, off the tick, so no match's tick waits for another's restart.
    fn finish_ended(&mut self, draining: bool) {
        for k in 0..self.due.len() {
            let i = self.due[k].index;
            if !self.matches[i].is_over() {
                continue;
            }
            let Some(end) = self.matches[i].finish_if_over() else {
                continue;
            };
            if let Some(round) = self.hosted[i].history.close_round() {
                self.metrics.record_round(&round);
            }
            let ticket = self.persist(i, end);
            // The match starts over (or is removed): its history starts again.
            self.hosted[i].history.clear();
            if draining || !self.hosted[i].restarts {
                self.hosted[i].over = true;
                self.finished += 1;
            } else {
                self.hosted[i].await_result(ticket, time::now());
            }
        }
    }

    /// Disconnects every client whose match could not queue a reliable message for it (its
    /// link's send queue is full: it stopped acknowledging). Its reliable stream would have
    /// a hole; the others never notice.
    fn disconnect_stalled(&mut self) {
        for i in 0..self.matches.len() {
            while let Some(client) = self.matches[i].take_kicked() {
                self.transport.disconnect(client);
                routing::unroute(&mut self.routes, &mut self.matches, client);
                self.drops.stalled += 1;
            }
        }
    }

    /// Removes every match with no connected player (a draining worker's: it waits only
    /// for the matches someone plays).
    fn stop_unplayed(&mut self) {
        for (m, h) in self.matches.iter().zip(&mut self.hosted) {
            if m.connected() == 0 && !h.over {
                h.over = true;
                self.finished += 1;
            }
        }
        self.remove_finished();
    }

    /// One tick's length at the configured rate.
    fn period(&self) -> Duration {
        Duration::from_nanos(1_000_000_000 / u64::from(self.config.tick_hz))
    }

    /// Connected players over all matches.
    pub fn connected(&self) -> usize {
        self.matches.iter().map(|m| m.connected()).sum()
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A worker whose matches were all due a second ago: no sleeping to make them due.
    fn worker_started_in_the_past(matches: u32) -> Worker {
        crate::testing::register_walk();
        let config = ServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            matches,
            ..ServerConfig::default()
        };
        Worker::lone(config, time::now() - Duration::from_secs(1)).unwrap()
    }

    #[test]
    fn a_frame_at_a_moment_ticks_what_is_due_then_whatever_the_clock_says() {
        crate::testing::register_walk();
        let config = ServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            matches: 2,
            ..ServerConfig::default()
        };
        // Started a minute from now: on the clock nothing is due yet.
        let start = time::now() + Duration::from_secs(60);
        let mut w = Worker::lone(config, start).unwrap();
        assert_eq!(w.frame(time::now()).ticks, 0, "the clock: nothing due");
        // A moment past every match's first deadline: each ticks once, and at that moment.
        let at = w.matches.iter().map(|m| m.next_deadline()).max().unwrap();
        assert_eq!(w.frame_at(at).ticks, 2);
        assert!(
            w.due.iter().all(|d| d.started == at),
            "the ticks ran at the frame's moment"
        );
    }

    #[test]
    fn a_match_over_its_share_runs_after_the_others_and_still_ticks() {
        let mut w = worker_started_in_the_past(4);
        // Match 0 is due first (its grid is the earliest) and costs 3 ms a frame: over its
        // share of a tick among 4 (1.76 ms).
        for _ in 0..64 {
            w.hosted[0].cost.add(3_000_000);
        }
        for round in 0..3 {
            assert_eq!(
                w.run_due_ticks(None),
                4,
                "round {round}: every due match ticks"
            );
            let order: Vec<usize> = w.due.iter().map(|d| d.index).collect();
            assert_eq!(order, vec![1, 2, 3, 0], "round {round}");
        }
        // Back within its share, it runs in deadline order again.
        for _ in 0..64 {
            w.hosted[0].cost.add(50_000);
        }
        w.run_due_ticks(None);
        assert_eq!(
            w.due.iter().map(|d| d.index).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
    }

    #[test]
    fn draining_stops_the_matches_nobody_plays_and_publishes_what_is_left() {
        let mut w = worker_started_in_the_past(3);
        let shutdown = Shutdown::new();
        assert_eq!(shutdown.signal(), 1);
        assert!(shutdown.is_draining() && !shutdown.is_stopped());
        w.stop_unplayed();
        assert_eq!(w.matches.len(), 0, "no match had a player");
        let mut published = None;
        shutdown.publish_waiting(&mut published, (2, 7, 4));
        shutdown.publish_waiting(&mut published, (1, 3, 2));
        assert_eq!(
            shutdown.drain_progress(),
            DrainProgress {
                matches: 1,
                players: 3,
                results_pending: 2,
                workers: 1
            }
        );
        assert_eq!(shutdown.signal(), 2);
        assert!(shutdown.is_stopped() && shutdown.is_abandoned());
        assert_eq!(shutdown.signal(), 3, "serve exits outright at the third");
    }

    #[test]
    fn client_slots_hold_every_startup_seat_and_room_for_more_up_to_4096() {
        // Ten-player matches: every match admission may let in (room: the larger of the
        // startup matches and `max_matches_per_worker`, as `with_socket` gives it).
        assert_eq!(client_slots(10, 120, 10), 1200);
        assert_eq!(client_slots(200, 200, 10), 2000);
        // A crowd: its own seats and room for a few more, not 120 crowds' worth.
        assert_eq!(client_slots(1, 120, 1000), 4096);
        assert_eq!(client_slots(6, 120, 1000), 6000);
        assert_eq!(client_slots(0, 120, 1000), 4096);
        assert_eq!(client_slots(0, 0, 10), 1);
        assert_eq!(client_slots(100, 120, u16::MAX), u16::MAX);
    }

    #[test]
    fn startup_matches_spread_over_groups_of_at_most_four() {
        crate::testing::register_walk();
        for (matches, groups) in [(1, 1), (3, 3), (10, 4), (20, 5), (40, 10)] {
            let config = ServerConfig {
                bind: "127.0.0.1:0".parse().unwrap(),
                matches,
                ..ServerConfig::default()
            };
            let w = Worker::new(config).unwrap();
            let period = w.period().as_nanos();
            let mut per_phase = BTreeMap::new();
            for h in &w.hosted {
                let phase = (h.grid - w.start).as_nanos() % period;
                *per_phase.entry(phase).or_insert(0u32) += 1;
            }
            assert_eq!(per_phase.len(), groups, "{matches} matches: {per_phase:?}");
            let most = per_phase.values().copied().max().unwrap();
            assert!(
                most <= crate::config::MAX_MATCHES_PER_PHASE,
                "{matches} matches: {per_phase:?}"
            );
        }
    }
}
