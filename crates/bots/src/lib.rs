//! Headless clients that play a match and measure the server from outside, as the Quake
//! paper's benchmark did: many bots multiplexed in one process, one input per tick each,
//! response rate and response time measured where a player would feel them.
//!
//! What it does: connects K bots to each of M matches over real UDP, drives them from one
//! thread ([`run`]), and reports what they measured ([`BotsReport`]). Each bot's connection
//! is a [`tickforge_client::Session`] (netcode, the reliable link, the replica of the game's
//! schema, the match epoch); this crate owns the sockets, the clock, the network
//! conditioner and what each bot does, per game ([`BotGame`]): the reference shooter's
//! wanderers, aimers and runners, or capture the flag's [`tickforge_ctf::bot::Bot`] reading
//! the entities its replica holds.
//!
//! For the shooter it also measures hit registration ([`hitreg`]): half the bots aim at
//! enemies they see, shown as their session interpolates them at its render tick, judge
//! each shot against those same players, and compare with the server's verdict (the
//! server rewinds to the render tick their input names). Every shooter bot predicts its
//! own movement and reconciles it with the server's snapshots ([`predict`]), and reports
//! how far the server's word corrected it. With [`BotsConfig::replay`], shooter bots play
//! recorded matches instead ([`replay`]): each sends a recorded player's inputs, open loop,
//! as the Quake paper's bots did. A simple
//! network conditioner ([`BotsConfig::rtt`], [`BotsConfig::jitter`]) delays every datagram
//! each way, so this can be measured at a given latency.
//!
//! What it does not do: decide the server's figures. It reports its own CPU use and
//! whether it kept its own tick, so a report can say when the bots were the bottleneck.

pub mod behaviour;
pub mod hitreg;
pub mod predict;
pub mod replay;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tickforge_api::Game;
use tickforge_client::{
    compact_link_config, view_time, Ended, Session, SessionConfig, SessionEvent, Welcome,
};
use tickforge_game::{buttons, BuiltinMap, Map, PlayerState, Tick, UserCmd, ViewTime};
use tickforge_io::stamped;
use tickforge_io::udp::{IoStats, RecvBatch, SendBatch, SocketOptions, UdpSocket, SLOT_BYTES};
use tickforge_io::{cpu, entropy, time};
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::PrivateKey;
use tickforge_proto::user_data::{UserData, ANY, ANY_SEAT};
use tickforge_proto::MatchId;
use tickforge_replication::{NetId, Replica, Schema, MAX_ENTITIES};
use tickforge_shooter::{cmd, flags, EntityState, ShooterEvent, NO_SLOT};
use tickforge_sim::hint::prefetch;
use tickforge_telemetry::report::{
    BotsCost, BotsReport, Clients, CorrectionM, Hitreg, Memory, ResponseTimeMs, SaturatedBy,
    ServerDelayMs,
};
use tickforge_telemetry::DurationHistogram;

use behaviour::{Aimer, Rng, Role, Runner, Wander};
use hitreg::{verdict_of, AimView, HitregCounts};
use predict::{Outcome, PredictCounts, Predictor};
use replay::{ReplaySet, Replayer};

/// The game the bots play: it decides their schema, their inputs and what they do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BotGame {
    /// The reference shooter (`tickforge_shooter`): wanderers, aimers and runners, with
    /// hit registration measured.
    #[default]
    Shooter,
    /// Capture the flag (`tickforge_ctf`): each bot's input from
    /// [`tickforge_ctf::bot::Bot::think`] over the entities its replica holds.
    Ctf,
}

impl BotGame {
    /// Every game, in `--game`'s order.
    pub const ALL: [BotGame; 2] = [BotGame::Shooter, BotGame::Ctf];

    /// The game's name, as `serve --game` names it.
    pub fn name(self) -> &'static str {
        match self {
            BotGame::Shooter => "shooter",
            BotGame::Ctf => "ctf",
        }
    }

    /// The game named `name`.
    pub fn from_name(name: &str) -> Option<BotGame> {
        BotGame::ALL.into_iter().find(|g| g.name() == name)
    }

    /// The network ids a match of this game with `seats` seats has (its welcome says so),
    /// with capture the flag's settings `ctf`.
    pub fn entities(self, seats: u16, ctf: &tickforge_ctf::CtfConfig) -> u16 {
        match self {
            // The shooter's own settings do not change its entities.
            BotGame::Shooter => tickforge_shooter::Shooter::max_entities(
                &tickforge_shooter::ShooterConfig::default(),
                seats,
            ),
            BotGame::Ctf => tickforge_ctf::Ctf::max_entities(ctf, seats),
        }
    }

    /// The game's replicated fields: a match of another game is refused at its welcome.
    pub fn schema(self) -> &'static Schema {
        match self {
            BotGame::Shooter => tickforge_shooter::schema(),
            BotGame::Ctf => tickforge_ctf::schema(),
        }
    }
}

/// How the bots run.
#[derive(Clone, Debug)]
pub struct BotsConfig {
    /// The game the matches play.
    pub game: BotGame,
    /// Capture the flag's settings, as the server's `[game]` table has them: the bots
    /// steer by its arena. Unused by the shooter.
    pub ctf: tickforge_ctf::CtfConfig,
    /// The server's game addresses, one per worker: match `m` (from 1) is reached at
    /// `servers[(m - 1) % servers.len()]`, where `tickforge serve` places its startup
    /// matches on a one-node host. Never empty.
    pub servers: Vec<SocketAddr>,
    /// Matches to join, ids 1..=matches.
    pub matches: u32,
    /// Bots per match.
    pub bots_per_match: u32,
    /// Inputs per second per bot; the server's tick rate.
    pub tick_hz: u32,
    /// Time before the measured window.
    pub warmup: Duration,
    /// Length of the measured window; the bots stop after it.
    pub duration: Duration,
    /// Core to pin the bot thread to.
    pub core: Option<usize>,
    /// Run the bot thread in the real-time FIFO class at this priority (1–99) where the
    /// host permits; `None`: normal scheduling.
    pub rt_priority: Option<u8>,
    /// Seeds the bots' behaviour.
    pub seed: u64,
    /// The game's protocol id.
    pub protocol_id: u64,
    /// The key to mint each bot's connect token with: the bots act as their own
    /// matchmaker, as a load test must.
    pub private_key: PrivateKey,
    /// The map the shooter's matches are played on: aimers trace their line of sight and
    /// judge their shots on it.
    pub map: BuiltinMap,
    /// Which behaviour each shooter bot gets: [`behaviour::BotMix::for_map`] gives the mix
    /// each map is made for.
    pub behaviour: behaviour::BotMix,
    /// Round trip the network conditioner adds: each datagram, either way, is held for
    /// half of it.
    pub rtt: Duration,
    /// Each held datagram's delay varies by up to this either way (uniformly); datagrams
    /// are delivered in order of arrival, so jitter reorders them.
    pub jitter: Duration,
    /// The server's posing interval, ticks: aimers pose the players they show as the
    /// server does.
    pub pose_every: std::num::NonZeroU8,
    /// Recorded inputs to replay instead of [`BotsConfig::behaviour`] (the shooter only):
    /// bot `k` replays the `k mod pairs`-th recorded seat ([`replay`]). `None`: the bots
    /// think for themselves.
    pub replay: Option<Arc<ReplaySet>>,
}

impl Default for BotsConfig {
    fn default() -> Self {
        BotsConfig {
            game: BotGame::Shooter,
            ctf: tickforge_ctf::CtfConfig::default(),
            servers: vec![SocketAddr::from(([127, 0, 0, 1], 40000))],
            matches: 1,
            bots_per_match: 10,
            tick_hz: 128,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(5),
            core: None,
            rt_priority: None,
            seed: 1,
            protocol_id: 0x7469_636b_666f_7267,
            private_key: PrivateKey([0; 32]),
            map: BuiltinMap::Arena,
            behaviour: behaviour::BotMix::Arena,
            rtt: Duration::ZERO,
            jitter: Duration::ZERO,
            pose_every: tickforge_game::history::HistoryConfig::default().pose_every,
            replay: None,
        }
    }
}

/// 35 ms: four and a half ticks at 128 Hz. What the bench budgets the server's max rewind
/// for, beside the round trip: the bots' sessions show the world about that far behind
/// their newest snapshot with 10 ms of jitter, less on a clean link (their delay adapts;
/// the report gives the figure measured).
pub const DEFAULT_INTERP_DELAY: Duration = Duration::from_micros(35_156);

/// The session settings of a bot: the compact replica and link (within 128 KiB for a
/// match of ten, `tickforge-client`'s `tests/memory.rs`); a bot that shows other players
/// (an aimer or a runner: `aims`) shows them at least `pose_every` + 1 ticks behind, so that the server's next posing tick after the moment
/// shown has arrived and players are posed as the server's rewind poses them.
pub fn session_config(aims: bool, pose_every: std::num::NonZeroU8) -> SessionConfig {
    SessionConfig {
        min_delay_ticks: if aims {
            pose_every.get().saturating_add(1)
        } else {
            1
        },
        ..SessionConfig::COMPACT
    }
}

/// Records a bot's replica makes room for in each of its slots before the schedule starts:
/// a snapshot carries no more entities than its match has, and in the fight of a thousand
/// about 120, rarely over 256 (the server's budgets).
const RESERVED_RECORDS: usize = 256;

/// A replica for one of the bots, sized as their matches' welcomes will size it and its
/// memory written ([`Replica::reserve`]), for its session's welcome to take
/// ([`Session::prepare`]). The bots make them before their schedule starts: at a thousand,
/// the kernel zeroing their replicas' pages as their first snapshots came in put their
/// schedule over a second behind. `None` for a match no replica can hold (the welcome
/// then refuses it).
fn prepared_replica(config: &BotsConfig) -> Option<Replica> {
    let seats = u16::try_from(config.bots_per_match).ok()?;
    let entities = config.game.entities(seats, &config.ctf);
    let tick_hz = u16::try_from(config.tick_hz).ok().filter(|&hz| hz > 0)?;
    if !(1..=MAX_ENTITIES).contains(&usize::from(entities)) {
        return None;
    }
    // The delay floor aside, every bot's session keeps the same history.
    let session = session_config(false, config.pose_every);
    let mut replica = Replica::new(
        session.replica_config(entities, tick_hz),
        config.game.schema(),
    );
    replica.reserve(RESERVED_RECORDS);
    Some(replica)
}

/// Once a second while running: what the bots see so far.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Seconds since start.
    pub elapsed_s: f64,
    /// Seconds the run takes in all.
    pub total_s: f64,
    /// Bots connected now.
    pub connected: usize,
    /// Bots in all.
    pub bots: usize,
    /// Snapshots per second per bot over the last second.
    pub rate_hz: f64,
}

/// Bots send in this many groups spread evenly over each tick, as real clients are not in
/// step with the server or with each other: bot `i` sends at `i mod PHASE_GROUPS` eighths of
/// a tick. Response time then shows the server's wait for its next tick as players feel
/// it, not one arbitrary phase between two processes.
const PHASE_GROUPS: u64 = 8;
/// Datagrams one bot reads per call: a tick's snapshot and whatever the conditioner's
/// delay or a late wake-up piled up behind it.
const RECV_BATCH: usize = 8;
/// Datagrams a phase group's bots queue before they go out in one `sendmmsg`: 16 bots'
/// ticks are 0.1-0.2 ms, the wait an input may have, against a system call saved 15 times.
const SEND_BATCH: usize = 16;
/// SO_RCVBUF a bot's socket asks for (a shared socket: this for each bot of its group).
const BOT_RECV_BUFFER: usize = 256 << 10;

/// Why the bots could not keep their tick, if they could not: over 90% of their core in
/// the window, more than 1% of the window's send deadlines met over a tick late by their
/// own doing ([`HostDebt`]: the host's holds excused), or their
/// schedule over [`SaturatedBy::WARMUP_BEHIND_LIMIT`] behind in the warm-up.
fn saturated_by(
    cpu_util: Option<f64>,
    late_ticks: u64,
    window_ticks: u64,
    warm_max_behind: Duration,
) -> Option<SaturatedBy> {
    if cpu_util.is_some_and(|u| u > 0.9) {
        Some(SaturatedBy::Cpu)
    } else if late_ticks * 100 > window_ticks {
        Some(SaturatedBy::Late)
    } else if warm_max_behind > SaturatedBy::WARMUP_BEHIND_LIMIT {
        Some(SaturatedBy::LateWarmup)
    } else {
        None
    }
}

/// How far the bots' schedule is behind because the host held their thread off its core
/// (its run-queue delay: preempted, or, as a real-time thread over its share of a second,
/// throttled for the rest of it). The server's worker keeps such a debt too
/// (`worker/preempt.rs`), judged per wake-up with a slack for its spin; the bots wake per
/// send deadline and need only how much of their lateness the delay explains.
#[derive(Clone, Copy, Debug, Default)]
struct HostDebt {
    debt: Duration,
}

/// How a send deadline was met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Met {
    /// Within a tick of its time.
    OnTime,
    /// Over a tick late by the bots' own doing.
    Late,
    /// Over a tick late, and within a tick but for what the host held the thread.
    LateHost,
}

impl HostDebt {
    /// A send deadline met `behind` its time, the host having held the thread `held` since
    /// the last one, with ticks of `period`. The host's holds explain no more than the
    /// bots are behind, so the debt is paid as they catch up.
    fn met(&mut self, behind: Duration, held: Duration, period: Duration) -> Met {
        self.debt = (self.debt + held).min(behind);
        if behind <= period {
            Met::OnTime
        } else if behind - self.debt > period {
            Met::Late
        } else {
            Met::LateHost
        }
    }
}

/// Inputs sent, remembered until a snapshot reflects them: a power of two, enough for
/// two seconds at 128 Hz.
const SENT_RING: usize = 256;

#[derive(Default)]
struct BotMetrics {
    snapshots: u64,
    bytes_down: u64,
    bytes_up: u64,
    /// Welcomes received over the reliable channel (one per connection; the shot results
    /// and deaths that also come that way are counted in `hitreg`).
    events: u64,
    /// Datagrams received and sent in the window.
    packets_down: u64,
    packets_up: u64,
    /// The bot's shot verdicts against the server's.
    hitreg: HitregCounts,
    /// Its own movement's prediction, in the window.
    predict: PredictCounts,
    /// Ticks between the newest snapshot and the moment shown, summed over the ticks of
    /// the window that showed one, and those ticks.
    shown_behind_ticks: f64,
    shown: u64,
}

/// What a bot does with its controls.
enum Behaviour {
    Wander(Wander),
    Aim(Aimer),
    Run(Runner),
    Ctf(CtfPlayer),
    /// A recorded seat's commands, from the first input after the bot's first snapshot
    /// (of each match) on.
    Replay {
        replayer: Replayer,
        started: bool,
    },
}

/// A capture-the-flag bot: its brain, made with the welcome (it needs the seat), and the
/// entities it thinks over, refilled from the replica each tick.
struct CtfPlayer {
    config: tickforge_ctf::CtfConfig,
    brain: Option<tickforge_ctf::bot::Bot>,
    world: Vec<Option<tickforge_ctf::EntityState>>,
}

impl CtfPlayer {
    /// Seated: the brain for the seat, and room for every entity of the match.
    fn welcomed(&mut self, w: &Welcome) {
        self.brain = Some(tickforge_ctf::bot::Bot::new(w.seat, w.seats, &self.config));
        self.world.clear();
        self.world.resize(usize::from(w.entities), None);
    }

    /// This tick's input, thought over what `session`'s replica holds now.
    fn next_input(&mut self, session: &Session) -> tickforge_ctf::Input {
        let (Some(brain), Some(replica)) = (self.brain.as_ref(), session.replica()) else {
            return tickforge_ctf::Input::default();
        };
        self.world.fill(None);
        for (id, lanes) in replica.entities() {
            if let Some(e) = self.world.get_mut(id.index()) {
                *e = Some(tickforge_ctf::decode_state(&lanes));
            }
        }
        brain.think(Tick(session.newest_tick()), &self.world)
    }
}

/// A datagram the network conditioner holds until `at`.
struct Held {
    at: Instant,
    addr: SocketAddr,
    bytes: Vec<u8>,
}

/// Delays datagrams by half a round trip plus or minus the jitter, each way. Does nothing
/// (holds nothing) with both at zero.
struct Conditioner {
    half_rtt: Duration,
    jitter: Duration,
    rng: Rng,
    /// Outgoing, sent when due.
    out: Vec<Held>,
    /// Incoming, read when due, in order of arrival.
    inbound: Vec<Held>,
    /// Buffers of delivered datagrams, reused.
    pool: Vec<Vec<u8>>,
}

impl Conditioner {
    fn new(config: &BotsConfig, seed: u64) -> Self {
        let half_rtt = config.rtt / 2;
        // Datagrams held at once, each way: one a tick over the longest delay, and two to
        // spare (the tick in progress, a read that comes late). Their buffers are made
        // here, each large enough for any datagram, so that holding one allocates only in a
        // burst beyond that.
        let period_ns = 1_000_000_000 / u64::from(config.tick_hz.max(1));
        let held = match (half_rtt + config.jitter).as_nanos() as u64 {
            0 => 0,
            delay_ns => delay_ns.div_ceil(period_ns) as usize + 2,
        };
        Conditioner {
            half_rtt,
            jitter: config.jitter,
            rng: Rng::new(seed),
            out: Vec::with_capacity(held),
            inbound: Vec::with_capacity(held),
            pool: (0..2 * held)
                .map(|_| Vec::with_capacity(SLOT_BYTES))
                .collect(),
        }
    }

    fn is_active(&self) -> bool {
        !self.half_rtt.is_zero() || !self.jitter.is_zero()
    }

    /// When a datagram sent or received at `at` arrives at the other end.
    fn arrival(&mut self, at: Instant) -> Instant {
        let jitter_ns = self.jitter.as_nanos() as u64;
        let delay = if jitter_ns == 0 {
            self.half_rtt
        } else {
            let r = self.rng.next_u64() % (2 * jitter_ns + 1);
            (self.half_rtt + Duration::from_nanos(r)).saturating_sub(self.jitter)
        };
        at + delay
    }

    fn hold(
        queue: &mut Vec<Held>,
        pool: &mut Vec<Vec<u8>>,
        at: Instant,
        addr: SocketAddr,
        data: &[u8],
    ) {
        // A buffer is made as large as any datagram: a pooled one that held a short input
        // would otherwise grow for the snapshot it holds next.
        let mut bytes = pool.pop().unwrap_or_else(|| Vec::with_capacity(SLOT_BYTES));
        bytes.clear();
        bytes.extend_from_slice(data);
        queue.push(Held { at, addr, bytes });
    }

    /// Takes the earliest datagram of `queue` due by `now`.
    fn due(queue: &mut Vec<Held>, now: Instant) -> Option<Held> {
        let (i, h) = queue.iter().enumerate().min_by_key(|(_, h)| h.at)?;
        (h.at <= now).then(|| queue.swap_remove(i))
    }
}

/// Where a bot's datagrams leave and arrive.
enum Port {
    /// Its own socket: against a server off this host, or on IPv6 (one loopback address).
    Own(UdpSocket),
    /// Its own loopback address on its phase group's socket ([`SharedSockets`]).
    Shared { ip: Ipv4Addr, group: usize },
}

impl Port {
    /// Sends `bytes` to `to` now, or queues it on the group's batch, which goes out once
    /// [`SEND_BATCH`] wait or the group's ticks are done; false for a send the OS refused
    /// (a lost datagram). A queued datagram the OS refuses later is counted in the run's
    /// [`IoStats::send_errors`].
    fn send(&self, bytes: &[u8], to: SocketAddr, outs: &mut [SendBatch]) -> bool {
        match self {
            Port::Own(socket) => socket.send_to(bytes, to).is_ok(),
            Port::Shared { ip, group } => {
                outs[*group].push_from(*ip, to, bytes);
                true
            }
        }
    }
}

/// One socket per phase group, bound to the wildcard address, standing for every bot of
/// the group on its own loopback address (127.1.x.y, [`bot_address`]): a group's inputs
/// leave in one `sendmmsg` and its snapshots arrive in one `recvmmsg`, where a socket per
/// bot took two system calls a bot a tick. The server still sees each bot at its own
/// address. Linux only (`IP_PKTINFO`); elsewhere, and against a server off this host, each
/// bot has its own socket. `TICKFORGE_BOTS_SHARED_SOCKETS=0` asks for those anyway.
struct SharedSockets {
    sockets: Vec<UdpSocket>,
    batch: RecvBatch,
    /// (bot, datagram in `batch`) of the last receive not yet handed over, and the next.
    pending: Vec<(u32, u32)>,
    next: usize,
}

impl SharedSockets {
    /// The groups' sockets for `total` bots, or `None` when the bots keep a socket each.
    fn open(config: &BotsConfig, total: usize) -> Result<Option<SharedSockets>> {
        let on_loopback = (config.servers.iter())
            .all(|s| matches!(s, SocketAddr::V4(v4) if v4.ip().is_loopback()));
        let wanted = std::env::var("TICKFORGE_BOTS_SHARED_SOCKETS").map_or(true, |v| v != "0");
        if !on_loopback || !wanted || total == 0 {
            return Ok(None);
        }
        let groups = total.min(PHASE_GROUPS as usize);
        let per_group = total.div_ceil(groups);
        // As much room as the bots' own sockets had, up to what the kernel allows
        // (net.core.rmem_max).
        let options = SocketOptions {
            recv_buffer_bytes: Some((per_group * BOT_RECV_BUFFER).min(64 << 20)),
            send_buffer_bytes: Some(4 << 20),
        };
        // A tick's snapshot for each bot of a group, and as many again behind them.
        let batch = (2 * per_group).clamp(RECV_BATCH, 1024);
        let mut sockets = Vec::with_capacity(groups);
        for _ in 0..groups {
            let socket = UdpSocket::bind(SocketAddr::from(([0, 0, 0, 0], 0)), options)
                .context("binding a phase group's socket")?;
            if socket.enable_destinations().is_err() {
                return Ok(None);
            }
            socket
                .enable_rx_timestamps()
                .context("enabling receive timestamps")?;
            sockets.push(socket);
        }
        Ok(Some(SharedSockets {
            sockets,
            batch: RecvBatch::with_timestamps(batch),
            pending: Vec::with_capacity(batch),
            next: 0,
        }))
    }

    /// The port of bot `i`.
    fn port(&self, i: u64) -> Port {
        let SocketAddr::V4(a) = bot_address(SocketAddr::from(([127, 0, 0, 1], 0)), i) else {
            unreachable!("a loopback server gives IPv4 bot addresses");
        };
        Port::Shared {
            ip: *a.ip(),
            group: (i % PHASE_GROUPS) as usize,
        }
    }

    /// Reads what waits on `group`'s socket. Each bot takes its datagrams just before its
    /// tick ([`SharedSockets::hand_over`]), as it read its own socket then: the group's
    /// reads are not all done before its first tick. A fill that found the batch full is
    /// handed over at once, and the socket read again.
    fn receive(
        &mut self,
        group: usize,
        bots: &mut [Bot],
        clocks: (Instant, Duration),
        window: (Instant, Instant),
        s: &mut Scratch,
    ) {
        self.pending.clear();
        self.next = 0;
        let Some(socket) = self.sockets.get(group) else {
            return;
        };
        loop {
            self.batch.fill(socket, &mut s.io);
            let full = self.batch.is_full();
            for k in 0..self.batch.len() {
                // A datagram for no bot of this group (a stray one on the wildcard port) is
                // dropped.
                let Some(i) = (self.batch.destination(k).and_then(bot_index))
                    .filter(|&i| i % PHASE_GROUPS as usize == group && i < bots.len())
                else {
                    continue;
                };
                if full {
                    Self::deliver(&self.batch, k, &mut bots[i], clocks, window, s);
                } else {
                    // Bot indices fit in u32: at most 64,000 loopback addresses.
                    self.pending.push((i as u32, k as u32));
                }
            }
            if !full {
                break;
            }
        }
        // By bot, then in arrival order.
        self.pending.sort_unstable();
    }

    /// Hands bot `i` the datagrams the last [`SharedSockets::receive`] read for it. Called
    /// for a group's bots in index order.
    fn hand_over(
        &mut self,
        i: usize,
        bot: &mut Bot,
        clocks: (Instant, Duration),
        window: (Instant, Instant),
        s: &mut Scratch,
    ) {
        while let Some(&(b, k)) = self.pending.get(self.next) {
            if b as usize > i {
                break;
            }
            self.next += 1;
            if b as usize == i {
                Self::deliver(&self.batch, k as usize, bot, clocks, window, s);
            }
        }
    }

    /// Reads every group's socket and hands every bot its datagrams.
    fn drain(
        &mut self,
        bots: &mut [Bot],
        clocks: (Instant, Duration),
        window: (Instant, Instant),
        s: &mut Scratch,
    ) {
        for g in 0..self.sockets.len() {
            self.receive(g, bots, clocks, window, s);
            for i in (g..bots.len()).step_by(PHASE_GROUPS as usize) {
                self.hand_over(i, &mut bots[i], clocks, window, s);
            }
        }
    }

    /// Gives `bot` datagram `k` of `batch`.
    fn deliver(
        batch: &RecvBatch,
        k: usize,
        bot: &mut Bot,
        clocks: (Instant, Duration),
        window: (Instant, Instant),
        s: &mut Scratch,
    ) {
        let (from, len, at) = staged(batch, k, &mut s.recv, clocks);
        bot.deliver(at, from, len, window, s);
    }

    /// Sends what `group`'s bots queued once [`SEND_BATCH`] wait: the inputs leave within
    /// a few bots' ticks of their own, not after the whole group's.
    fn flush_if_full(&self, group: usize, s: &mut Scratch) {
        if s.outs.get(group).is_some_and(|out| out.len() >= SEND_BATCH) {
            self.flush(group, s);
        }
    }

    /// Sends what every group's bots queued.
    fn flush_all(&self, s: &mut Scratch) {
        for g in 0..self.sockets.len() {
            self.flush(g, s);
        }
    }

    /// Sends what `group`'s bots queued.
    fn flush(&self, group: usize, s: &mut Scratch) {
        if let (Some(socket), Some(out)) = (self.sockets.get(group), s.outs.get_mut(group)) {
            if !out.is_empty() {
                out.flush(socket, &mut s.io);
            }
        }
    }
}

struct Bot {
    port: Port,
    /// The connection, the reliable link and the replica of the match.
    session: Session,
    behaviour: Behaviour,
    /// The slot the welcome named.
    slot: Option<u16>,
    /// An aimer's or runner's view of the other players, as its session interpolates
    /// them, for aiming and for judging its own shots.
    aim: Option<AimView>,
    /// Aimed shots fired, and how many make one judged ([`judge_every`]).
    aimed_shots: u32,
    judge_every: u32,
    /// The newest input that moved (or jumped).
    last_move_seq: u32,
    /// The shooter bot's own movement, predicted and reconciled.
    predict: Option<Predictor>,
    net: Conditioner,
    sent_at: [(u32, Option<Instant>); SENT_RING],
    input_ack: u32,
    metrics: BotMetrics,
    snapshots_total: u64,
}

/// Per-run buffers shared by all bots (one thread drives them all).
struct Scratch {
    /// Each bot's socket is read with one `recvmmsg` per wake-up: a bot has about one
    /// snapshot waiting, which a read loop took two calls to get (the second finding the
    /// socket empty).
    batch: RecvBatch,
    /// What the bots of each phase group queued to send on its shared socket.
    outs: Vec<SendBatch>,
    io: IoStats,
    recv: Vec<u8>,
    frame: Vec<u8>,
    /// The client histograms, one for all bots: a 3-digit histogram up to 60 s is some
    /// 100 KB of counts, so one per bot would put hundreds of megabytes of cold cache
    /// lines under every snapshot (7% of the bots' time at 200 bots, measured).
    hist: ClientHistograms,
}

impl Scratch {
    /// The buffers of a run, each as large as the largest datagram it holds.
    fn new() -> Self {
        Scratch {
            batch: RecvBatch::with_timestamps(RECV_BATCH),
            outs: (0..PHASE_GROUPS)
                .map(|_| SendBatch::with_capacity(64, tickforge_proto::MAX_PACKET_BYTES))
                .collect(),
            io: IoStats::default(),
            recv: vec![0; SLOT_BYTES],
            frame: Vec::with_capacity(tickforge_proto::MAX_PACKET_BYTES),
            hist: ClientHistograms::default(),
        }
    }

    /// [`Scratch::new`] without the kernel's arrival stamps: every datagram arrives at the
    /// `now` its receive is called with. For tests on virtual time, where a stamp would
    /// measure the host's load between the send and the receive, not the virtual clock.
    #[cfg(test)]
    fn virtual_time() -> Self {
        Scratch {
            batch: RecvBatch::with_capacity(RECV_BATCH),
            ..Scratch::new()
        }
    }
}

/// Response time, server delay and ping over every bot's snapshots.
#[derive(Default)]
struct ClientHistograms {
    response: DurationHistogram,
    server_delay: DurationHistogram,
    /// The links' smoothed round trips, sampled at every snapshot.
    ping: DurationHistogram,
    /// The shooter bots' prediction corrections, micrometres in the nanosecond slots (so
    /// its "milliseconds" read as metres).
    correction: DurationHistogram,
}

/// Connects the bots, runs them for warm-up plus the measured window, and reports.
///
/// `progress` is called about once a second.
pub fn run(config: &BotsConfig, mut progress: impl FnMut(Progress)) -> Result<BotsReport> {
    if config.replay.is_some() && config.game != BotGame::Shooter {
        anyhow::bail!(
            "--replay: action files record the shooter's inputs, not {}'s",
            config.game.name()
        );
    }
    if let Some(core) = config.core {
        cpu::pin_current_thread(core).with_context(|| format!("pinning bots to core {core}"))?;
    }
    let realtime = config.rt_priority.filter(|&p| match cpu::set_realtime(p) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("tickforge bots: rt_priority {p} refused ({e}); normal priority");
            false
        }
    });
    time::tighten_timer_slack();
    let total = (config.matches * config.bots_per_match) as usize;
    let mut replicas: Vec<Replica> = (0..total).map_while(|_| prepared_replica(config)).collect();
    let made = time::now();
    let mut bots = Vec::with_capacity(total);
    let map = Arc::new(config.map.load());
    let mut shared = SharedSockets::open(config, total)?;
    for m in 0..config.matches {
        for b in 0..config.bots_per_match {
            let i = u64::from(m * config.bots_per_match + b);
            let role = config.behaviour.role(i);
            let mut bot = Bot::new(config, i, MatchId(m + 1), role, &map, made, shared.as_ref())?;
            if let Some(replica) = replicas.pop() {
                bot.session.prepare(replica);
            }
            bots.push(bot);
        }
    }
    let mut scratch = Scratch::new();
    // The schedule starts once the bots are made: making them is not a tick they kept late.
    let start = time::now();

    let period_ns = 1_000_000_000 / u64::from(config.tick_hz);
    let period = Duration::from_nanos(period_ns);
    let window_start = start + config.warmup;
    let window_end = window_start + config.duration;
    let total_s = (config.warmup + config.duration).as_secs_f64();
    let mut wake_late = DurationHistogram::new();
    // Late deadlines by the bots' own doing, and those the host's holds explain.
    let mut late_ticks = 0u64;
    let mut late_host_ticks = 0u64;
    // The thread's run-queue delay: what the host held it off its core.
    let probe = cpu::ThreadProbe::open();
    let mut held_last = probe.run_delay_ns();
    let mut held_in_window = Duration::ZERO;
    let mut debt = HostDebt::default();
    let mut window_ticks = 0u64;
    // Time in the window spent in the bots' receives and in their ticks, and ticks run.
    let (mut receive_time, mut tick_time, mut bot_ticks) = (Duration::ZERO, Duration::ZERO, 0u64);
    // The warm-up's too: bots that fall far behind there time out before the window opens.
    let (mut max_behind, mut warm_max_behind) = (Duration::ZERO, Duration::ZERO);
    // When the warm-up's furthest fall behind came, from the start.
    let mut warm_max_at = None;
    let mut cpu_start = None;
    let mut tick: u64 = 0;
    let mut group: u64 = 0;
    let mut next_progress = start + Duration::from_secs(1);
    let mut snapshots_at_progress = 0u64;

    loop {
        let now = time::now();
        if now >= window_end {
            break;
        }
        // Absolute deadlines, so no drift builds up: start + tick × period, plus the
        // group's share of the period.
        let deadline =
            start + Duration::from_nanos(period_ns * tick + period_ns * group / PHASE_GROUPS);
        if now < deadline {
            // Sleep, not wait on the sockets: the kernel stamps each datagram's arrival,
            // so nothing is lost by reading late, and the server's sends never pay for
            // waking this process (no real client would charge it that).
            time::sleep_until(deadline, Duration::ZERO);
            continue;
        }
        // The conditioner's held datagrams go out when due, whatever the group.
        for bot in &mut bots {
            bot.flush_out(now, &mut scratch.outs);
        }
        if let Some(shared) = &shared {
            shared.flush_all(&mut scratch);
        }
        // A send deadline: every bot of this phase group sends its input for this tick. The
        // window is the clock's, not the schedule's: bots far behind their schedule would
        // otherwise never reach the window, and report nothing of it (not even that they
        // were behind).
        let in_window = now >= window_start;
        let behind = now - deadline;
        let held_now = probe.run_delay_ns();
        let held = Duration::from_nanos(held_now.saturating_sub(held_last));
        held_last = held_now;
        let met = debt.met(behind, held, period);
        max_behind = max_behind.max(behind);
        if !in_window && behind > warm_max_behind {
            warm_max_behind = behind;
            warm_max_at = Some(now - start);
        }
        if in_window {
            if cpu_start.is_none() {
                cpu_start = Some(cpu::process_cpu_time());
            }
            window_ticks += 1;
            held_in_window += held;
            wake_late.record_ns(behind.as_nanos() as u64);
            match met {
                Met::OnTime => {}
                Met::Late => late_ticks += 1,
                Met::LateHost => late_host_ticks += 1,
            }
        }
        // One reading of both clocks dates the group's datagrams.
        let clocks = (now, stamped::realtime_now());
        if let Some(shared) = &mut shared {
            let t0 = in_window.then(time::now);
            let window = (window_start, window_end);
            shared.receive(group as usize, &mut bots, clocks, window, &mut scratch);
            if let Some(t0) = t0 {
                receive_time += time::now() - t0;
            }
        }
        let step = PHASE_GROUPS as usize;
        for i in (group as usize..bots.len()).step_by(step) {
            // The group's bot after next starts loading its own lines, the next one what
            // those point to: each turn finds its bot warm.
            if let Some(later) = bots.get(i + 2 * step) {
                later.prefetch(false);
            }
            if let Some(next) = bots.get(i + step) {
                next.prefetch(true);
            }
            let bot = &mut bots[i];
            let t0 = in_window.then(time::now);
            if let Some(shared) = &mut shared {
                shared.hand_over(i, bot, clocks, (window_start, window_end), &mut scratch);
            }
            bot.receive(now, clocks.1, window_start, window_end, &mut scratch);
            let t1 = in_window.then(time::now);
            bot.tick(now, config, in_window, &mut scratch);
            if let Some(shared) = &shared {
                shared.flush_if_full(group as usize, &mut scratch);
            }
            if let (Some(t0), Some(t1)) = (t0, t1) {
                let t2 = time::now();
                receive_time += t1 - t0;
                tick_time += t2 - t1;
                bot_ticks += 1;
            }
        }
        if let Some(shared) = &shared {
            let t0 = in_window.then(time::now);
            shared.flush(group as usize, &mut scratch);
            if let Some(t0) = t0 {
                tick_time += time::now() - t0;
            }
        }
        group += 1;
        if group == PHASE_GROUPS {
            group = 0;
            tick += 1;
        }
        if now >= next_progress {
            let snapshots: u64 = bots.iter().map(|b| b.snapshots_total).sum();
            progress(Progress {
                elapsed_s: (now - start).as_secs_f64(),
                total_s,
                connected: bots.iter().filter(|b| b.session.is_connected()).count(),
                bots: total,
                rate_hz: (snapshots - snapshots_at_progress) as f64 / total.max(1) as f64,
            });
            snapshots_at_progress = snapshots;
            next_progress += Duration::from_secs(1);
        }
    }
    // What arrived before the window closed but was not read yet still counts.
    let (now, real) = (time::now(), stamped::realtime_now());
    if let Some(shared) = &mut shared {
        shared.drain(
            &mut bots,
            (now, real),
            (window_start, window_end),
            &mut scratch,
        );
    }
    for bot in &mut bots {
        bot.receive(now, real, window_start, window_end, &mut scratch);
    }
    let cpu_end = cpu::process_cpu_time();
    let memory = Memory::of_this_process();
    let window_s = config.duration.as_secs_f64();
    let connected = bots.iter().filter(|b| b.session.is_connected()).count() as u64;
    let mut ended = std::collections::BTreeMap::new();
    for e in bots.iter().filter_map(|b| b.session.ended()) {
        *ended.entry(e.name().to_string()).or_insert(0u64) += 1;
    }
    // A match of another game refuses every bot alike: say so once.
    if let Some(ended) = bots.iter().find_map(|b| match b.session.ended() {
        Some(e @ Ended::WrongSchema { .. }) | Some(e @ Ended::BadWelcome(_)) => Some(e),
        _ => None,
    }) {
        eprintln!(
            "tickforge bots: the bots refused the match ({ended}): the server plays another game than --game {}",
            config.game.name()
        );
    }

    for bot in &mut bots {
        bot.session.disconnect();
        while let Some(to) = bot.session.poll_transmit(time::now(), &mut scratch.frame) {
            // Best effort: the server times the bot out if these are lost.
            let _ = bot.port.send(&scratch.frame, to, &mut scratch.outs);
        }
    }
    if let Some(shared) = &shared {
        shared.flush_all(&mut scratch);
    }

    let ClientHistograms {
        response,
        server_delay: delay,
        ping,
        correction,
    } = scratch.hist;
    let mut hitreg = HitregCounts::default();
    let mut predicted = PredictCounts::default();
    for b in &bots {
        hitreg.merge(&b.metrics.hitreg);
        predicted.merge(&b.metrics.predict);
    }
    let agree_rate = (hitreg.shots > 0).then(|| hitreg.agree as f64 / hitreg.shots as f64);
    let shown: u64 = bots.iter().map(|b| b.metrics.shown).sum();
    let shown_behind_ticks: f64 = bots.iter().map(|b| b.metrics.shown_behind_ticks).sum();
    let rtt_ms = config.rtt.as_millis() as u32;
    let n = bots.len().max(1) as f64;
    let rates: Vec<f64> = bots
        .iter()
        .map(|b| b.metrics.snapshots as f64 / window_s)
        .collect();
    let cpu_util = cpu_start.map(|a| (cpu_end - a).as_secs_f64() / window_s);
    let packets_down: u64 = bots.iter().map(|b| b.metrics.packets_down).sum();
    let cost = BotsCost::from_timings(
        bots.len() as u64,
        config.tick_hz,
        packets_down as f64 / n / window_s,
        (receive_time.as_secs_f64(), packets_down),
        (tick_time.as_secs_f64(), bot_ticks),
    );
    let saturated_by = saturated_by(cpu_util, late_ticks, window_ticks, warm_max_behind);
    let rate = |n: u64| (window_ticks > 0).then(|| n as f64 / window_ticks as f64);
    let late_deadline_rate = rate(late_ticks);
    // Where the OS gives no run-queue delay, nothing was excused and nothing is said.
    let probed = probe.knows_run_delay();
    let late_host_rate = rate(late_host_ticks).filter(|_| probed);
    let host_held_ms = probed.then_some(held_in_window.as_secs_f64() * 1e3);
    Ok(BotsReport {
        clients: Clients {
            response_rate_hz: Some(rates.iter().sum::<f64>() / n),
            response_time_ms: ResponseTimeMs {
                p50: response.quantile_ms(0.5),
                p99: response.quantile_ms(0.99),
                max: response.quantile_ms(1.0),
            },
            server_delay_ms: ServerDelayMs {
                p50: delay.quantile_ms(0.5),
                p99: delay.quantile_ms(0.99),
            },
            down_bytes_per_s: Some(
                bots.iter().map(|b| b.metrics.bytes_down).sum::<u64>() as f64 / n / window_s,
            ),
            up_bytes_per_s: Some(
                bots.iter().map(|b| b.metrics.bytes_up).sum::<u64>() as f64 / n / window_s,
            ),
            ping_rtt_ms: ResponseTimeMs {
                p50: ping.quantile_ms(0.5),
                p99: ping.quantile_ms(0.99),
                max: ping.quantile_ms(1.0),
            },
            bots: bots.len() as u64,
            connected,
            min_response_rate_hz: rates.iter().copied().reduce(f64::min),
            reliable_events: bots.iter().map(|b| b.metrics.events).sum(),
            link_errors: bots.iter().map(Bot::link_errors).sum(),
            ended,
            down_packets_per_s: Some(packets_down as f64 / n / window_s),
            up_packets_per_s: Some(
                bots.iter().map(|b| b.metrics.packets_up).sum::<u64>() as f64 / n / window_s,
            ),
            bad_snapshots: bots.iter().map(Bot::bad_snapshots).sum(),
            correction_m: correction_report(&correction, &predicted),
        },
        cpu_util,
        memory,
        rt_priority: realtime.map(u32::from),
        saturated: saturated_by.is_some(),
        saturated_by,
        late_deadline_rate,
        late_host_rate,
        host_held_ms,
        max_behind_ms: Some(max_behind.as_secs_f64() * 1e3),
        warm_max_behind_at_s: warm_max_at.map(|at| at.as_secs_f64()),
        cost,
        wake_late_ms: wake_late.percentiles(),
        hitreg: Hitreg {
            shots: hitreg.shots,
            server_hits: hitreg.server_hits,
            victim_dead_at_fire: hitreg.victim_dead_at_fire,
            // Measured: the mean over every bot's ticks in the window.
            interp_delay_ms: shown_behind_ticks / shown.max(1) as f64 * 1e3
                / f64::from(config.tick_hz.max(1)),
            pose_every: config.pose_every.get(),
            agree_rate,
            agree_rate_by_rtt: agree_rate
                .map(|r| BTreeMap::from([(rtt_ms, r)]))
                .unwrap_or_default(),
            rtt_ms: config.rtt.as_secs_f64() * 1e3,
            jitter_ms: config.jitter.as_secs_f64() * 1e3,
            bot_hit_server_miss: hitreg.bot_hit_server_miss,
            bot_miss_server_hit: hitreg.bot_miss_server_hit,
            server_hit_unseen: hitreg.server_hit_unseen,
            other_victim: hitreg.other_victim,
        },
        replay: config.replay.as_ref().map(|set| {
            let fewest = bots.iter().map(|b| match &b.behaviour {
                Behaviour::Replay { replayer, .. } => replayer.sent(),
                _ => 0,
            });
            set.source(bots.len() as u64, fewest.min().unwrap_or(0))
        }),
    })
}

/// The prediction corrections measured, metres (the histogram holds micrometres).
fn correction_report(hist: &DurationHistogram, counts: &PredictCounts) -> CorrectionM {
    CorrectionM {
        mean: hist.mean_ms(),
        p99: hist.quantile_ms(0.99),
        max: hist.quantile_ms(1.0),
        samples: counts.samples,
        skipped: counts.skipped,
        dead: counts.dead,
        reconciled: counts.reconciled,
    }
}

/// How long an aiming bot keeps its target before it looks at its enemies again (the
/// nearest [`CONSIDERED_ENEMIES`]): a player's reaction time. In between it reads only its
/// target each frame, so that a thousand bots in one fight do not each interpolate a
/// hundred enemies a frame.
const RETARGET: Duration = Duration::from_millis(200);

/// The enemies an aiming bot looks at when it picks a target: the nearest this many (by
/// the newest states it holds). A small match's bots look at every enemy; one of a
/// thousand in a fight does not interpolate a hundred and more to pick one.
const CONSIDERED_ENEMIES: usize = 16;

/// Players of a match up to which a bot judges every aimed shot it fires.
const JUDGE_ALL_UP_TO: u32 = 64;

/// How many aimed shots make one that a bot judges in a match of `players`: every one up
/// to [`JUDGE_ALL_UP_TO`] players, then one in ⌈players / 64⌉ (2 at 100, 4 at 200, 16 at
/// 1,000). Judging reads every player in view, and a crowd's bots fire in proportion to
/// their number, so judging every shot would cost the bots' core the square of it; one in
/// N, counted along each bot's own shots, samples the agreement without bias, and a
/// crowd's bots fire tens of thousands of shots a minute (about 3,500 judged in 20 s of a
/// thousand's fight).
fn judge_every(players: u32) -> u32 {
    players.div_ceil(JUDGE_ALL_UP_TO).max(1)
}

/// [`RETARGET`] in frames (ticks) at `tick_hz`, at least 1.
fn retarget_frames(tick_hz: u32) -> u32 {
    ((RETARGET.as_secs_f64() * f64::from(tick_hz)).round() as u32).max(1)
}

/// The players as a bot's session shows them: interpolated at a render tick, `None` when
/// not in view; read ahead from its replica.
struct ShownBy<'a>(&'a Session);

impl hitreg::Players for ShownBy<'_> {
    fn at(&mut self, slot: u16, r: f64) -> Option<EntityState> {
        (self.0)
            .entity_at(NetId(slot), r)
            .map(|q| EntityState::from_lanes(&q))
    }

    fn prefetch(&mut self, slot: u16, r: f64, far: bool) {
        if far {
            self.0.prefetch_entity(NetId(slot));
        } else {
            self.0.prefetch_entity_at(NetId(slot), r);
        }
    }

    fn newest(&mut self, slot: u16) -> Option<EntityState> {
        (self.0.replica()?)
            .entity(NetId(slot))
            .map(|q| EntityState::from_lanes(&q))
    }

    fn prefetch_newest(&mut self, slot: u16) {
        if let Some(r) = self.0.replica() {
            r.prefetch_newest(NetId(slot));
        }
    }
}

/// The player slots `session`'s replica lists (all that may be in view), lowest first;
/// none before its welcome.
fn listed_slots(session: &Session) -> impl Iterator<Item = u16> + Clone + '_ {
    (session.replica().map(Replica::listed).unwrap_or_default()).map(|id| id.0)
}

/// Where bot `i` sends from. Against a loopback server each bot gets its own loopback
/// address (127.1.x.y: all of 127/8 is this host), so the bots look like the separate hosts
/// they stand for, and the server's per-source limits see one player per source, as in a
/// real match. Otherwise the OS picks the address.
fn bot_address(server: SocketAddr, i: u64) -> SocketAddr {
    match server {
        SocketAddr::V4(v4) if v4.ip().is_loopback() => {
            SocketAddr::from(([127, 1, (i / 250) as u8, (i % 250) as u8 + 1], 0))
        }
        SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        // IPv6 has one loopback address, not a range.
        SocketAddr::V6(v6) if v6.ip().is_loopback() => "[::1]:0".parse().expect("constant address"),
        SocketAddr::V6(_) => "[::]:0".parse().expect("constant address"),
    }
}

/// Copies datagram `k` of `batch` into `recv`; its source, length and arrival, dated by the
/// kernel's stamp with `clocks` (one reading of the monotonic and the realtime clock), or
/// at the monotonic reading without one.
fn staged(
    batch: &RecvBatch,
    k: usize,
    recv: &mut [u8],
    (now, realtime_now): (Instant, Duration),
) -> (SocketAddr, usize, Instant) {
    let (from, bytes) = batch.get(k);
    recv[..bytes.len()].copy_from_slice(bytes);
    let at = (batch.arrival(k)).map_or(now, |t| t.to_instant(now, realtime_now));
    (from, bytes.len(), at)
}

/// The bot whose loopback address [`bot_address`] gave `ip` (127.1.x.y: bot 250x + y − 1);
/// `None` for any other address.
fn bot_index(ip: Ipv4Addr) -> Option<usize> {
    match ip.octets() {
        [127, 1, x, y @ 1..=250] => Some(usize::from(x) * 250 + usize::from(y) - 1),
        _ => None,
    }
}

/// The address of the worker hosting `match_id` (see [`BotsConfig::servers`]).
fn server_of(config: &BotsConfig, match_id: MatchId) -> SocketAddr {
    let n = config.servers.len().max(1);
    config.servers[(match_id.0.saturating_sub(1) as usize) % n]
}

/// A connect token for one bot in `match_id`, any slot, with a random client id, naming
/// the worker that hosts the match.
fn mint_token(config: &BotsConfig, match_id: MatchId) -> ConnectToken {
    let params = TokenParams {
        protocol_id: config.protocol_id,
        create_timestamp: entropy::unix_now(),
        expire_seconds: 60,
        timeout_seconds: 5,
        server_addresses: vec![server_of(config, match_id)],
    };
    let user_data = UserData {
        match_id,
        team: ANY,
        seat: ANY_SEAT,
    }
    .encode();
    let client_id = u64::from_le_bytes(entropy::random_bytes());
    ConnectToken::mint(
        &params,
        client_id,
        &user_data,
        &config.private_key.0,
        &entropy::random_bytes(),
    )
}

impl Bot {
    /// Starts loading what this bot's next turn (its datagrams read, its tick) finds cold:
    /// a hint, which changes nothing. `deep` false, its own lines and its session's;
    /// `deep` true, given once those have arrived (a bot later in the group), what they
    /// point to. A thousand bots' state spans gigabytes, and each turn came after every
    /// other bot's.
    fn prefetch(&self, deep: bool) {
        self.session.prefetch(deep);
        if deep {
            prefetch(&self.sent_at[(self.input_ack as usize + 1) % SENT_RING]);
            return;
        }
        prefetch(&self.net);
        prefetch(&self.metrics);
        prefetch(&self.input_ack);
        prefetch(&self.predict);
        prefetch(&self.aim);
    }

    /// Bot `i` of the run (counted from 0 across every match), playing `role` in
    /// `match_id`, on its own socket, with a token it minted; it starts connecting at
    /// `start`.
    fn new(
        config: &BotsConfig,
        i: u64,
        match_id: MatchId,
        role: Role,
        map: &Arc<Map>,
        start: Instant,
        shared: Option<&SharedSockets>,
    ) -> Result<Bot> {
        let port = match shared {
            Some(shared) => shared.port(i),
            None => {
                let options = SocketOptions {
                    recv_buffer_bytes: Some(BOT_RECV_BUFFER),
                    send_buffer_bytes: None,
                };
                let bind = bot_address(server_of(config, match_id), i);
                let socket = UdpSocket::bind(bind, options)
                    .with_context(|| format!("binding a bot socket to {bind}"))?;
                socket
                    .enable_rx_timestamps()
                    .context("enabling receive timestamps")?;
                Port::Own(socket)
            }
        };
        let token = mint_token(config, match_id);
        let seed = config.seed.wrapping_mul(1_000_003).wrapping_add(i);
        // Only a bot that shows other players sets its delay floor by the posing interval;
        // a replaying bot shows no one (its aim was recorded).
        let replays = config.game == BotGame::Shooter && config.replay.is_some();
        let aims =
            config.game == BotGame::Shooter && !replays && matches!(role, Role::Aim | Role::Run);
        let session = Session::with_link_config(
            token,
            config.game.schema(),
            session_config(aims, config.pose_every),
            compact_link_config(),
            start,
        )
        .context("the bots' session settings")?;
        let players = config.bots_per_match.min(u32::from(u16::MAX)) as u16;
        Ok(Bot {
            port,
            session,
            behaviour: match (config.game, role, &config.replay) {
                (BotGame::Shooter, _, Some(set)) => Behaviour::Replay {
                    replayer: Replayer::new(set.clone(), i),
                    started: false,
                },
                (BotGame::Ctf, _, _) => Behaviour::Ctf(CtfPlayer {
                    config: config.ctf,
                    brain: None,
                    world: Vec::new(),
                }),
                (BotGame::Shooter, Role::Wander, None) => Behaviour::Wander(Wander::new(seed)),
                (BotGame::Shooter, Role::Aim, None) => Behaviour::Aim(Aimer::new(seed)),
                (BotGame::Shooter, Role::Run, None) => Behaviour::Run(Runner::new(seed)),
            },
            slot: None,
            aim: aims.then(|| {
                AimView::new(map.clone(), players, config.pose_every)
                    .refreshing_every(retarget_frames(config.tick_hz))
                    .considering(CONSIDERED_ENEMIES)
            }),
            aimed_shots: 0,
            judge_every: judge_every(config.bots_per_match),
            last_move_seq: 0,
            predict: (config.game == BotGame::Shooter)
                .then(|| Predictor::new(config.map, config.tick_hz)),
            net: Conditioner::new(config, config.seed ^ i.wrapping_mul(0x9e37_79b9)),
            sent_at: [(0, None); SENT_RING],
            input_ack: 0,
            metrics: BotMetrics::default(),
            snapshots_total: 0,
        })
    }

    /// Packets the link refused, and reliable messages that were no event.
    fn link_errors(&self) -> u64 {
        let s = self.session.stats();
        s.link_errors + s.bad_events
    }

    /// Snapshots the session could not read into its replica.
    fn bad_snapshots(&self) -> u64 {
        self.session.stats().bad_snapshots
    }

    /// Reads every datagram waiting on this bot's socket, each at the instant the kernel
    /// stamped it (`now` and `realtime_now` are one reading of both clocks), or, with the
    /// conditioner on, half a round trip later: then only those arrived by `now` are read,
    /// in order of arrival, and the rest wait.
    fn receive(
        &mut self,
        now: Instant,
        realtime_now: Duration,
        window_start: Instant,
        window_end: Instant,
        s: &mut Scratch,
    ) {
        let window = (window_start, window_end);
        // A full batch leaves the rest for the next wake-up, a few milliseconds on: their
        // stamps still date them. A bot on a shared socket was handed its datagrams
        // already ([`SharedSockets::receive`]).
        if let Port::Own(socket) = &self.port {
            s.batch.fill(socket, &mut s.io);
            for i in 0..s.batch.len() {
                let (from, len, at) = staged(&s.batch, i, &mut s.recv, (now, realtime_now));
                self.deliver(at, from, len, window, s);
            }
        }
        while let Some(held) = Conditioner::due(&mut self.net.inbound, now) {
            let len = held.bytes.len();
            s.recv[..len].copy_from_slice(&held.bytes);
            self.net.pool.push(held.bytes);
            self.handle(held.at, held.addr, len, window, s);
        }
    }

    /// One tick of this bot as the tests drive it: its held datagrams out, its socket read
    /// (`realtime_now` read with `now`), its tick.
    #[cfg(test)]
    fn step(
        &mut self,
        (now, realtime_now): (Instant, Duration),
        (window_start, window_end): (Instant, Instant),
        config: &BotsConfig,
        in_window: bool,
        s: &mut Scratch,
    ) {
        self.flush_out(now, &mut s.outs);
        self.receive(now, realtime_now, window_start, window_end, s);
        self.tick(now, config, in_window, s);
    }

    /// Takes one datagram, `s.recv[..len]`, arrived at `at`: now, or, with the conditioner
    /// on, when half a round trip has passed.
    fn deliver(
        &mut self,
        at: Instant,
        from: SocketAddr,
        len: usize,
        window: (Instant, Instant),
        s: &mut Scratch,
    ) {
        if self.net.is_active() {
            let arrival = self.net.arrival(at);
            Conditioner::hold(
                &mut self.net.inbound,
                &mut self.net.pool,
                arrival,
                from,
                &s.recv[..len],
            );
        } else {
            self.handle(at, from, len, window, s);
        }
    }

    /// One of the shooter's own events (inside the runtime's game event).
    fn shooter_event(&mut self, event: ShooterEvent, in_window: bool) {
        match event {
            // Who is alive is shown by the snapshots' flags, at the moment shown.
            ShooterEvent::Alive { .. } => {}
            // A new round teleports everyone to the spawns; the match's end holds them.
            ShooterEvent::Round { phase, .. } => {
                if let Some(p) = self.predict.as_mut() {
                    p.round_phase(phase);
                }
            }
            // The kill feed: nothing for a bot to act on.
            ShooterEvent::Kill { .. } => {}
            ShooterEvent::ShotResult {
                seq,
                victim,
                part,
                landed,
                ..
            } => {
                let Some(view) = self.aim.as_ref() else {
                    return;
                };
                if let (true, Some(mine)) = (in_window, view.verdict(seq)) {
                    // A hit that did no damage: the victim had died at the server
                    // before the shot arrived.
                    let dead = victim != NO_SLOT && !landed;
                    self.metrics
                        .hitreg
                        .compare(mine, verdict_of(victim, part), dead);
                    let server_only = mine.is_none() && victim != NO_SLOT;
                    if server_only && view.was_shown(seq, victim) == Some(false) {
                        self.metrics.hitreg.server_hit_unseen += 1;
                    }
                }
            }
        }
    }

    /// Takes one datagram, `s.recv[..len]`, arrived at `now`, and acts on what the
    /// session makes of it.
    fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        len: usize,
        (window_start, window_end): (Instant, Instant),
        s: &mut Scratch,
    ) {
        let in_window = now >= window_start && now < window_end;
        if in_window {
            self.metrics.bytes_down += len as u64;
            self.metrics.packets_down += 1;
        }
        self.session.handle_datagram(now, from, &mut s.recv[..len]);
        while let Some(event) = self.session.poll_event() {
            match event {
                SessionEvent::Welcome(w) => {
                    self.metrics.events += 1;
                    self.welcomed(&w);
                }
                SessionEvent::Game(bytes) => {
                    // Capture the flag's events (pickups, captures) change nothing a bot
                    // does: it reads the flags from the replica.
                    if !matches!(self.behaviour, Behaviour::Ctf(_)) {
                        if let Ok(event) = ShooterEvent::decode(bytes) {
                            self.shooter_event(event, in_window);
                        }
                    }
                }
                // The match ended and started over: a new world, ticks from 0, and the
                // server's replication afresh (the session reset the replica, its clock
                // and its frames). Nothing of the old match's view holds.
                SessionEvent::Epoch { .. } => {
                    if let Behaviour::Replay { replayer, started } = &mut self.behaviour {
                        replayer.restart();
                        *started = false;
                    }
                    if let Some(p) = self.predict.as_mut() {
                        p.discontinuity();
                    }
                    if let Some(view) = self.aim.as_mut() {
                        view.start_over();
                    }
                }
                SessionEvent::Snapshot {
                    tick, input_ack, ..
                } => self.snapshot(now, tick, input_ack, in_window, s),
                // Counted where it matters: the bot is no longer connected.
                SessionEvent::Disconnected(_) => {}
            }
        }
    }

    /// The welcome: a shooter bot's slot and its view's size, a CTF bot's brain.
    fn welcomed(&mut self, w: &Welcome) {
        match &mut self.behaviour {
            Behaviour::Ctf(player) => player.welcomed(w),
            _ => {
                let (slot, players) = (w.seat, w.entities);
                self.slot = Some(slot);
                // The match may hold more seats than this process fills (other clients,
                // other bot processes): its snapshots name them all.
                if let Some(view) = self
                    .aim
                    .as_mut()
                    .filter(|v| v.players() != usize::from(players))
                {
                    view.resize(players);
                }
            }
        }
    }

    /// A snapshot of `tick` the session read into its replica: the bot's own movement is
    /// reconciled with it, and the inputs it is the first to reflect are timed.
    fn snapshot(
        &mut self,
        now: Instant,
        tick: u32,
        input_ack: u32,
        in_window: bool,
        s: &mut Scratch,
    ) {
        self.snapshots_total += 1;
        if let Behaviour::Replay { started, .. } = &mut self.behaviour {
            *started = true;
        }
        if let (Some(p), Some(slot), Some(replica)) =
            (self.predict.as_mut(), self.slot, self.session.replica())
        {
            let own = replica
                .entity(NetId(slot))
                .map(|q| EntityState::from_lanes(&q));
            let before = p.counts;
            let outcome = p.snapshot(tick, input_ack, own.as_ref());
            if in_window {
                let m = &mut self.metrics.predict;
                m.samples += p.counts.samples - before.samples;
                m.skipped += p.counts.skipped - before.skipped;
                m.dead += p.counts.dead - before.dead;
                m.reconciled += p.counts.reconciled - before.reconciled;
                if let Outcome::Corrected(d) = outcome {
                    s.hist
                        .correction
                        .record_ns((f64::from(d) * 1e6).round() as u64);
                }
            }
        }
        if !in_window {
            self.input_ack = self.input_ack.max(input_ack);
            return;
        }
        self.metrics.snapshots += 1;
        let rtt = self.session.link_stats().rtt;
        s.hist.ping.record_ns(rtt.as_nanos() as u64);
        // Every input this snapshot is the first to reflect.
        while self.input_ack < input_ack {
            self.input_ack += 1;
            let (seq, at) = self.sent_at[self.input_ack as usize % SENT_RING];
            if let (true, Some(at)) = (seq == self.input_ack, at) {
                let rt = now - at;
                s.hist.response.record_ns(rt.as_nanos() as u64);
                s.hist
                    .server_delay
                    .record_ns(rt.saturating_sub(rtt).as_nanos() as u64);
            }
        }
    }

    /// This bot's own player on its newest snapshot, and whether it is alive.
    fn own(&self) -> Option<(PlayerState, bool)> {
        let q = self.session.replica()?.entity(NetId(self.slot?))?;
        let e = EntityState::from_lanes(&q);
        Some((e.to_player(), e.flags & flags::ALIVE != 0))
    }

    /// The command for this tick; an aimer's shot is judged against the players it shows.
    fn next_cmd(&mut self, tick_hz: u32) -> UserCmd {
        let (true, Behaviour::Aim(_) | Behaviour::Run(_)) = (self.aim.is_some(), &self.behaviour)
        else {
            return match &mut self.behaviour {
                Behaviour::Wander(w) => w.next_cmd(tick_hz),
                Behaviour::Replay {
                    replayer,
                    started: true,
                } => replayer.next_cmd(),
                _ => UserCmd::default(),
            };
        };
        let own = self.own();
        let view = self.aim.as_mut().expect("checked above");
        let sight = match own {
            Some((state, alive)) => view.sight(&state, alive).map(|mut s| {
                // Still on the snapshot and no move since the input it reflects: the
                // server has the shooter where the snapshot shows it.
                s.still &= self.last_move_seq < self.input_ack;
                s
            }),
            _ => None,
        };
        let c = match &mut self.behaviour {
            Behaviour::Run(r) => r.next_cmd(tick_hz, own.as_ref().map(|(s, _)| s), sight),
            Behaviour::Aim(a) => a.next_cmd(tick_hz, sight),
            Behaviour::Wander(w) => w.next_cmd(tick_hz),
            Behaviour::Ctf(_) | Behaviour::Replay { .. } => UserCmd::default(),
        };
        if c.forward != 0 || c.side != 0 || c.buttons & buttons::JUMP != 0 {
            self.last_move_seq = self.session.seq() + 1;
        }
        // Only an aimed shot, fired standing still, is judged: the bot knows where such a
        // shot starts. One fired on the move (wandering) starts where the server has the
        // bot by then.
        let aimed = sight.filter(|s| s.still);
        if let (Some(me), Some(view), Some(sight), true) = (
            self.slot,
            self.aim.as_mut(),
            aimed,
            c.buttons & buttons::FIRE != 0,
        ) {
            self.aimed_shots = self.aimed_shots.wrapping_add(1);
            if !self.aimed_shots.is_multiple_of(self.judge_every) {
                return c;
            }
            let shown = ShownBy(&self.session);
            let listed = listed_slots(&self.session);
            view.judge_input(self.session.seq() + 1, me, sight.eye, &c, listed, shown);
        }
        c
    }

    /// This tick's input, sent with the moment this bot shows (the session's render tick,
    /// where the server rewinds its shots to), and whatever else the session has to send.
    fn tick(&mut self, now: Instant, config: &BotsConfig, in_window: bool, s: &mut Scratch) {
        self.session.handle_timeout(now);
        // Only the end can come out of a timeout; the bot stops sending, and is counted
        // as not connected.
        while self.session.poll_event().is_some() {}
        if self.session.is_connected() {
            let shown = self.session.render_tick(now).map(view_time);
            if let (true, Some(v)) = (in_window, shown) {
                self.metrics.shown += 1;
                self.metrics.shown_behind_ticks +=
                    f64::from(self.session.newest_tick()) - hitreg::render_tick(v);
            }
            // Before the first snapshot of a run there is nothing to show: the newest tick.
            let view = shown.unwrap_or_else(|| ViewTime::at(Tick(self.session.newest_tick())));
            let sent = if let Behaviour::Ctf(player) = &mut self.behaviour {
                let input = player.next_input(&self.session);
                self.session.send_input(now, view, &input.to_bytes())
            } else {
                if let (Some(aim), Some(v), Some(me)) = (self.aim.as_mut(), shown, self.slot) {
                    let session = &self.session;
                    aim.show(v, me, listed_slots(session), ShownBy(session));
                }
                let c = self.next_cmd(config.tick_hz);
                let seq = self.session.send_input(now, view, &cmd::to_bytes(&c));
                if let (Some(p), Some(seq)) = (self.predict.as_mut(), seq) {
                    p.sent(seq, &c);
                }
                seq
            };
            if let Some(seq) = sent {
                self.sent_at[seq as usize % SENT_RING] = (seq, Some(now));
            }
        }
        while let Some(to) = self.session.poll_transmit(now, &mut s.frame) {
            self.send(now, &s.frame, to, in_window, &mut s.outs);
        }
    }

    /// Sends now, or, with the conditioner on, holds the datagram for half a round trip.
    fn send(
        &mut self,
        now: Instant,
        bytes: &[u8],
        to: SocketAddr,
        in_window: bool,
        outs: &mut [SendBatch],
    ) {
        let sent = if self.net.is_active() {
            let at = self.net.arrival(now);
            Conditioner::hold(&mut self.net.out, &mut self.net.pool, at, to, bytes);
            true
        } else {
            // A refused send is a lost datagram; the protocol copes with loss.
            self.port.send(bytes, to, outs)
        };
        if sent && in_window {
            self.metrics.bytes_up += bytes.len() as u64;
            self.metrics.packets_up += 1;
        }
    }

    /// Sends the held datagrams due by `now`, in order.
    fn flush_out(&mut self, now: Instant, outs: &mut [SendBatch]) {
        while let Some(held) = Conditioner::due(&mut self.net.out, now) {
            let _ = self.port.send(&held.bytes, held.addr, outs);
            self.net.pool.push(held.bytes);
        }
    }
}

#[cfg(test)]
mod boundary_tests;
#[cfg(test)]
mod ctf_tests;
#[cfg(test)]
mod no_alloc_tests;
#[cfg(test)]
mod predict_tests;
#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod test_host;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bots_are_saturated_by_a_full_core_late_deadlines_or_a_warm_up_far_behind() {
        let ms = Duration::from_millis;
        assert_eq!(
            saturated_by(Some(0.95), 0, 1000, ms(0)),
            Some(SaturatedBy::Cpu)
        );
        assert_eq!(
            saturated_by(Some(0.55), 11, 1000, ms(0)),
            Some(SaturatedBy::Late)
        );
        assert_eq!(saturated_by(Some(0.55), 10, 1000, ms(0)), None);
        // Connecting every bot at once: tens of milliseconds behind, not saturated.
        assert_eq!(saturated_by(Some(0.55), 0, 1000, ms(44)), None);
        assert_eq!(
            saturated_by(Some(0.55), 0, 1000, ms(1001)),
            Some(SaturatedBy::LateWarmup)
        );
        assert_eq!(saturated_by(None, 0, 0, ms(0)), None);
    }

    #[test]
    fn deadlines_late_for_the_hosts_hold_are_the_hosts_until_the_bots_catch_up() {
        let us = Duration::from_micros;
        let period = us(7_812);
        let mut d = HostDebt::default();
        assert_eq!(d.met(us(20), us(3), period), Met::OnTime);
        // Throttled as a real-time thread for the rest of a second: 50 ms off the core.
        assert_eq!(d.met(us(50_020), us(50_000), period), Met::LateHost);
        // Catching up, a group's deadline every quarter tick: still the host's.
        let mut behind = 50_020;
        while behind > 7_812 {
            assert_eq!(d.met(us(behind), us(0), period), Met::LateHost, "{behind}");
            behind -= 1_500;
        }
        assert_eq!(d.met(us(behind), us(0), period), Met::OnTime);
        assert_eq!(d.met(us(15), us(0), period), Met::OnTime);
        // Caught up, the debt is paid: a burst of the bots' own is theirs.
        assert_eq!(d.met(us(20_000), us(0), period), Met::Late);
        assert_eq!(d.met(us(12), us(0), period), Met::OnTime);
        // A hold that explains only part of how far behind they are does not excuse it.
        assert_eq!(d.met(us(20_000), us(5_000), period), Met::Late);
        assert_eq!(d.met(us(12), us(0), period), Met::OnTime);
        // Holds add up while the bots are behind.
        assert_eq!(d.met(us(14_000), us(4_000), period), Met::Late);
        assert_eq!(d.met(us(16_000), us(8_000), period), Met::LateHost);
    }

    #[test]
    fn a_crowd_s_bots_judge_a_sample_of_their_shots_and_a_match_s_every_one() {
        let every: Vec<u32> = [1, 10, 64, 65, 100, 200, 1000, 4096]
            .map(judge_every)
            .to_vec();
        assert_eq!(every, [1, 1, 1, 2, 2, 4, 16, 64]);
        // 200 ms of frames: 6 at 30 Hz, 26 at 128 Hz, never 0.
        assert_eq!([30, 128, 1].map(retarget_frames), [6, 26, 1]);
    }

    #[test]
    fn a_bot_is_found_by_its_loopback_address() {
        let server: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        for i in [0u64, 1, 249, 250, 251, 999, 12_345, 63_999] {
            let SocketAddr::V4(a) = bot_address(server, i) else {
                panic!("IPv4 server, IPv4 bot");
            };
            assert_eq!(bot_index(*a.ip()), Some(i as usize), "bot {i} at {a}");
        }
        for other in [
            [127, 0, 0, 1],
            [127, 1, 0, 0],
            [127, 1, 3, 251],
            [10, 1, 0, 1],
        ] {
            assert_eq!(bot_index(other.into()), None, "{other:?}");
        }
    }

    #[test]
    fn bots_get_distinct_loopback_sources_against_a_loopback_server() {
        let server: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let addrs: std::collections::HashSet<_> =
            (0..4096).map(|i| bot_address(server, i).ip()).collect();
        assert_eq!(addrs.len(), 4096);
        assert!(addrs.iter().all(|a| a.is_loopback()));
        let v6: SocketAddr = "[::1]:40000".parse().unwrap();
        assert!(bot_address(v6, 3).ip().is_loopback());
    }
}
