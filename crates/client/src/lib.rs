//! A tickforge client session without I/O: everything a game client (or a bot) needs
//! between its socket and its game code.
//!
//! A [`Session`] owns the netcode connection ([`Client`]), the reliable link
//! ([`Endpoint`], configured with [`msg::link_config`] as the server's is) and a
//! [`Replica`] of the match, decoded with the game's own [`Schema`]. The caller moves bytes
//! and time:
//!
//! ```text
//! socket datagram ──► Session::handle_datagram(now, from, bytes)
//!                     Session::poll_event() ──► Welcome / Epoch / Game(bytes) /
//!                                               Snapshot {tick, input_ack} / Disconnected
//! each tick       ──► Session::handle_timeout(now)
//!                     Session::send_input(now, view, game input bytes) ──► seq
//!                     Session::poll_transmit(now, buf) ──► socket
//! ```
//!
//! What it does for the caller: refuses a match whose schema fingerprint is not its own
//! (snapshots of another table would decode as nonsense); sizes the replica from the
//! welcome (the match's network ids and tick rate); resets the replica when the match
//! starts over ([`proto::msg::Event::Epoch`](tickforge_proto::msg::Event::Epoch)); keeps
//! the snapshots that arrive before the welcome and reads them once it has it (the link
//! has acknowledged them, so the server may encode against them); numbers inputs.
//!
//! Timing, for rendering: every snapshot's tick and arrival time feed a filtered estimate
//! of the server's clock ([`Session::server_tick`], method in [`timing`]); the render
//! clock ([`Session::render_tick`]) trails it by an interpolation delay that adapts to the
//! arrival jitter and the snapshots skipped ([`Session::interp_delay_ticks`]); a ring of
//! the last [`INTERP_FRAMES`] ticks of the world gives each entity between the two
//! snapshots around the render tick ([`Session::entity_at`]), held at the newest past it.
//!
//! ```text
//! each frame      ──► Session::render_tick(now) ──► r
//!                     Session::entity_at(id, r) ──► lanes (interpolated)
//! ```
//!
//! A token is checked when the session is made from it ([`Session::from_token_bytes`],
//! [`Session::try_new`]): malformed or expired is a [`CreateError`]. A server that goes
//! silent ends the session with [`Ended::Transport`]`(TimedOut)` after the token's timeout.
//!
//! What it does not do: open sockets, read clocks, know a game. Game events and messages
//! are the game's bytes, in and out.
//!
//! In order of importance: hostile bytes never panic it; a refused or broken snapshot
//! changes nothing and is counted; nothing allocates per tick once warm (buffers are made
//! with the session and the replica with the welcome).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tickforge_proto::msg::{self, ClientMsg, Event, ServerMsg};
use tickforge_proto::netcode::token::{ConnectToken, TokenError};
use tickforge_proto::netcode::{Client, ClientEvent, ClientState};
use tickforge_proto::reliable::{ConfigError, Endpoint, LinkStats, ReliableConfig, ReliableError};
use tickforge_proto::{DisconnectReason, MAX_PACKET_BYTES};
use tickforge_replication::{Lanes, NetId, ReadInfo, Replica, ReplicaConfig, Schema, MAX_ENTITIES};
use tickforge_sim::hint::{prefetch, prefetch_lines};
use tickforge_sim::ViewTime;

mod interp;
pub mod timing;

#[cfg(test)]
mod tests;

use interp::Frames;
pub use interp::{lerp, INTERP_FRAMES};
use timing::Clock;

/// Snapshots kept while the welcome has not arrived yet: half a second at 128 Hz. The
/// welcome is the link's first reliable message, resent within a few ticks if lost.
pub const EARLY_SNAPSHOTS: usize = 64;

/// A snapshot tick this far behind the newest read means the match started over without
/// announcing it (an older server): the replica is reset. Eight seconds at 128 Hz.
const TICK_JUMP: u32 = 1024;

/// The view time an input carries for a render tick ([`Session::render_tick`]): its whole
/// tick and the fraction to 1/256 of a tick, rounded down, so that the server's rewind
/// (`ViewTime::rewind_args`) lands on the moment shown or just before it. A render tick
/// that is negative or NaN is tick 0; one past the last tick is the last.
pub fn view_time(render_tick: f64) -> ViewTime {
    let t = render_tick.max(0.0).min(f64::from(u32::MAX));
    let whole = t.floor();
    ViewTime {
        tick: tickforge_sim::Tick(whole as u32),
        frac: ((t - whole) * 256.0).floor().min(255.0) as u8,
    }
}

/// How a session is set up, besides its token and schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionConfig {
    /// Ticks of decoded states the replica keeps per entity: at least the server's ring of
    /// baselines (`ReplicationConfig::ring_ticks`) plus the ticks a snapshot may arrive
    /// late by.
    pub history_ticks: u32,
    /// The least interpolation delay, whole ticks (the delay still adapts above it, up to
    /// [`timing::MAX_DELAY`]). A client whose server poses players for hit tests only
    /// every Nth tick and lerps between (the shooter's `pose_every`) wants N + 1: the
    /// posing tick after the moment shown has then arrived, so it can pose players as
    /// the server's rewind will. Default 1, the adaptive delay's own floor.
    pub min_delay_ticks: u8,
}

impl SessionConfig {
    /// The smallest replica that still works with a server of the default replication
    /// settings: its ring of 64 baselines plus 8 ticks (62 ms at 128 Hz) of lateness,
    /// rather than the default's second ring. With [`compact_link_config`] a session of the
    /// reference shooter at ten players fits in 128 KiB (`tests/memory.rs`); a snapshot
    /// that arrives later than that behind the newest may miss its baseline, and is
    /// refused (counted in [`SessionStats::bad_snapshots`]).
    pub const COMPACT: SessionConfig = SessionConfig {
        history_ticks: 72,
        min_delay_ticks: 1,
    };
}

/// The reliable link of [`msg::link_config`] with the client's side made small: a send
/// queue of one largest message (16 KiB) and 64 messages, reassembly room for one largest
/// message from the server, a receive window of 32 messages and a packet history of 64
/// (half a second at 128 Hz). Message sizes are the protocol's; a server that has more
/// than 32 reliable messages in flight to one client, or two large ones at once, has some
/// wait for a resend. About 56 KiB rather than 127 KiB.
pub fn compact_link_config() -> ReliableConfig {
    let base = msg::link_config();
    let cells = base.max_message_bytes.div_ceil(base.fragment_bytes);
    ReliableConfig {
        send_queue_bytes: base.max_message_bytes,
        send_queue_messages: 64,
        reassembly_bytes: cells * base.fragment_bytes,
        receive_window_messages: 32,
        packet_history: 64,
        ..base
    }
}

impl SessionConfig {
    /// A session's replica in a match of `entities` network ids at `tick_hz`: what the
    /// welcome of that match makes it ([`Session::prepare`]).
    pub fn replica_config(&self, entities: u16, tick_hz: u16) -> ReplicaConfig {
        ReplicaConfig {
            max_entities: usize::from(entities),
            history_ticks: self.history_ticks.max(1),
            tick_hz: u32::from(tick_hz),
        }
    }
}

impl Default for SessionConfig {
    /// Matches a server with the default replication settings.
    fn default() -> Self {
        SessionConfig {
            history_ticks: ReplicaConfig::default().history_ticks,
            min_delay_ticks: 1,
        }
    }
}

/// What the server's welcome said: where this client sits and what the match is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Welcome {
    /// The match.
    pub match_id: u32,
    /// This client's seat.
    pub seat: u16,
    /// The match's tick rate.
    pub tick_hz: u16,
    /// Seats in the match.
    pub seats: u16,
    /// Network ids the match's snapshots may carry (`0..entities`): the replica's size.
    pub entities: u16,
    /// The match's run when the client was seated (0: its first).
    pub epoch: u32,
}

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Ended {
    /// The connection ended (timed out, closed by either side, refused by the server).
    #[error("connection ended: {0:?}")]
    Transport(DisconnectReason),
    /// The match replicates another game's fields: its snapshots would decode as
    /// nonsense, so the session disconnected.
    #[error("the match's schema fingerprint {theirs:#010x} is not this client's {ours:#010x}")]
    WrongSchema {
        /// The fingerprint of the schema this session decodes with.
        ours: u32,
        /// The fingerprint the welcome named.
        theirs: u32,
    },
    /// The welcome named a match this client cannot hold (no entities, too many, or a
    /// tick rate of 0): the session disconnected.
    #[error("the welcome is unusable: {0}")]
    BadWelcome(&'static str),
}

impl Ended {
    /// Why, as a report key: the transport's reason (`timed_out`, `server_closed`, …),
    /// `wrong_schema` or `bad_welcome`.
    pub fn name(&self) -> &'static str {
        match self {
            Ended::Transport(r) => r.name(),
            Ended::WrongSchema { .. } => "wrong_schema",
            Ended::BadWelcome(_) => "bad_welcome",
        }
    }
}

/// What happened on the session, in the order it happened; from [`Session::poll_event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionEvent<'a> {
    /// The client was seated in a match whose schema is this session's; the replica is
    /// sized for it. Once per connection.
    Welcome(Welcome),
    /// The match ended and started over under `epoch`: ticks count from 0 again. The
    /// replica has been reset; drop whatever else was kept of the old run.
    Epoch {
        /// The new run.
        epoch: u32,
    },
    /// One of the game's reliable events, in the game's own format: borrowed from the
    /// session until the next call.
    Game(&'a [u8]),
    /// A snapshot was read into the replica ([`Session::replica`]).
    Snapshot {
        /// Its server tick.
        tick: u32,
        /// The newest input sequence the server had applied for this client.
        input_ack: u32,
        /// What the replica did with it (states carried, stale, duplicate).
        read: ReadInfo,
    },
    /// The session ended; nothing more comes.
    Disconnected(Ended),
}

/// Counters since the session was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Snapshots read into the replica (each a [`SessionEvent::Snapshot`]).
    pub snapshots: u64,
    /// Snapshots refused: the replica could not decode them (a missing baseline, broken
    /// bytes) or they were not a snapshot message.
    pub bad_snapshots: u64,
    /// Snapshots with an empty body: the server had nothing it could send that tick (its
    /// budget was spent). Normal traffic, neither read nor refused.
    pub empty_snapshots: u64,
    /// Snapshots that came before the welcome past [`EARLY_SNAPSHOTS`], dropped.
    pub early_dropped: u64,
    /// Reliable messages from the server (the welcome, epochs, game events).
    pub events: u64,
    /// Reliable messages that were no event of this protocol, skipped.
    pub bad_events: u64,
    /// Packets the reliable link refused as broken.
    pub link_errors: u64,
    /// Events dropped because the caller handled another datagram before polling them.
    pub unpolled: u64,
    /// Datagrams handed in.
    pub packets_received: u64,
    /// Bytes of the datagrams handed in.
    pub bytes_received: u64,
    /// Datagrams given out by [`Session::poll_transmit`].
    pub packets_sent: u64,
    /// Bytes of the datagrams given out.
    pub bytes_sent: u64,
    /// Inputs sent.
    pub inputs: u64,
    /// The reliable link's smoothed round trip ([`LinkStats::rtt`]).
    pub rtt: Duration,
    /// The reliable link's round-trip deviation ([`LinkStats::jitter`]).
    pub rtt_jitter: Duration,
    /// Share of this client's packets the link judged lost, parts per million
    /// ([`LinkStats::loss`]: the way up).
    pub loss_ppm: u32,
    /// Jitter of snapshot arrivals: the mean deviation from the filtered arrival clock
    /// (see [`timing`]).
    pub snapshot_jitter: Duration,
    /// Smoothed share of ticks skipped between successive newest snapshots, parts per
    /// million: the way down's loss (and reordering).
    pub snapshot_gap_ppm: u32,
    /// The interpolation delay as of the newest snapshot ([`Session::interp_delay_ticks`]).
    pub interp_delay: Duration,
}

/// Why a session could not be made from a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CreateError {
    /// The token's bytes are not a connect token (length, version, addresses,
    /// timestamps).
    #[error("malformed connect token: {0}")]
    Malformed(TokenError),
    /// The token expired at `expire_timestamp` (Unix seconds), at or before `unix_now`.
    #[error("connect token expired at {expire_timestamp}, now is {unix_now}")]
    Expired {
        /// When it expired.
        expire_timestamp: u64,
        /// The caller's Unix time.
        unix_now: u64,
    },
    /// The token names no server to connect to.
    #[error("connect token names no server")]
    NoServer,
    /// The reliable link's configuration is unusable.
    #[error("link configuration: {0}")]
    LinkConfig(ConfigError),
}

/// A snapshot body waiting to be read: its tick, its input ack, and its bytes.
struct Held {
    tick: u32,
    input_ack: u32,
    /// When its datagram arrived.
    at: Instant,
    body: Vec<u8>,
}

/// One client's connection to a match, without I/O (see the crate documentation).
pub struct Session {
    schema: &'static Schema,
    config: SessionConfig,
    transport: Client,
    link: Endpoint,
    /// Made with the welcome, sized by it.
    replica: Option<Replica>,
    /// A replica made ahead of the welcome ([`Session::prepare`]), for the welcome to take.
    prepared: Option<Replica>,
    welcome: Option<Welcome>,
    epoch: u32,
    /// The last input's sequence number (0: none sent yet).
    seq: u32,
    /// The reason the session ended, once it has; `reported` once polled.
    ended: Option<Ended>,
    reported: bool,
    /// The snapshot of the last datagram, read at the next poll after its events when
    /// `pending_ready`.
    pending: Held,
    pending_ready: bool,
    /// Snapshots read before the welcome, replayed after it from `early_next`.
    early: Vec<Held>,
    early_next: usize,
    /// The reliable message being yielded.
    event: Vec<u8>,
    /// Where the next game event of a `Games` message in `event` starts; 0 when none is
    /// left to hand out.
    batch_at: usize,
    /// The encoded input, the link's packet, and the sealed datagram waiting for
    /// [`Session::poll_transmit`].
    payload: Vec<u8>,
    packet: Vec<u8>,
    sealed: Vec<u8>,
    sealed_to: Option<SocketAddr>,
    stats: SessionStats,
    /// The server-tick estimate and the interpolation delay.
    clock: Clock,
    /// The interpolation ring: which recent ticks had a snapshot (the states stay in the
    /// replica).
    frames: Frames,
}

impl Session {
    /// A session connecting with `token`, decoding snapshots with `schema` (the game's,
    /// as the server has it); it starts sending connection requests at `now`.
    pub fn new(
        token: ConnectToken,
        schema: &'static Schema,
        config: SessionConfig,
        now: Instant,
    ) -> Session {
        Session::build(token, schema, config, msg::link_config(), now)
    }

    /// As [`Session::new`] with the reliable link configured by `link` rather than
    /// [`msg::link_config`] (for instance [`compact_link_config`]): the limits of the
    /// client's side; the protocol's message sizes must be kept.
    pub fn with_link_config(
        token: ConnectToken,
        schema: &'static Schema,
        config: SessionConfig,
        link: ReliableConfig,
        now: Instant,
    ) -> Result<Session, CreateError> {
        link.validate().map_err(CreateError::LinkConfig)?;
        Ok(Session::build(token, schema, config, link, now))
    }

    fn build(
        token: ConnectToken,
        schema: &'static Schema,
        config: SessionConfig,
        link: ReliableConfig,
        now: Instant,
    ) -> Session {
        Session {
            schema,
            config,
            transport: Client::new(token, now),
            link: Endpoint::new(link, now),
            replica: None,
            prepared: None,
            welcome: None,
            epoch: 0,
            seq: 0,
            ended: None,
            reported: false,
            pending: Held {
                tick: 0,
                input_ack: 0,
                at: now,
                body: Vec::with_capacity(MAX_PACKET_BYTES),
            },
            pending_ready: false,
            early: Vec::new(),
            early_next: 0,
            event: Vec::with_capacity(MAX_PACKET_BYTES),
            batch_at: 0,
            payload: Vec::with_capacity(MAX_PACKET_BYTES),
            packet: Vec::with_capacity(MAX_PACKET_BYTES),
            sealed: Vec::with_capacity(MAX_PACKET_BYTES),
            sealed_to: None,
            stats: SessionStats::default(),
            clock: Clock::new(now, config.min_delay_ticks),
            frames: Frames::new(schema),
        }
    }

    /// A session from a parsed token, checked first: an expired token (by the caller's
    /// `unix_now`, Unix seconds) or one naming no server is an error, not a session that
    /// fails later. Otherwise as [`Session::new`].
    pub fn try_new(
        token: ConnectToken,
        unix_now: u64,
        schema: &'static Schema,
        config: SessionConfig,
        now: Instant,
    ) -> Result<Session, CreateError> {
        if token.server_addresses.is_empty() {
            return Err(CreateError::NoServer);
        }
        if token.expire_timestamp <= unix_now {
            return Err(CreateError::Expired {
                expire_timestamp: token.expire_timestamp,
                unix_now,
            });
        }
        Ok(Session::new(token, schema, config, now))
    }

    /// A session from a connect token's 2048-byte wire form: a malformed or expired token
    /// is an error (see [`Session::try_new`]).
    pub fn from_token_bytes(
        token: &[u8],
        unix_now: u64,
        schema: &'static Schema,
        config: SessionConfig,
        now: Instant,
    ) -> Result<Session, CreateError> {
        let token = ConnectToken::from_bytes(token).map_err(CreateError::Malformed)?;
        Session::try_new(token, unix_now, schema, config, now)
    }

    /// The server's current tick at `now`, a continuous value: the filtered arrival clock
    /// of the snapshots plus half the link's round trip (the method is in [`timing`]).
    /// `None` before the first snapshot of the current run.
    pub fn server_tick(&self, now: Instant) -> Option<f64> {
        self.clock.server_tick(now, self.link.stats().rtt)
    }

    /// The tick to show at `now`: [`Session::server_tick`] less the one-way trip less the
    /// adaptive interpolation delay ([`Session::interp_delay_ticks`]). Changes smoothly;
    /// `None` before the first snapshot of the current run. Read entities at it with
    /// [`Session::entity_at`].
    pub fn render_tick(&self, now: Instant) -> Option<f64> {
        self.clock.render_tick(now)
    }

    /// The interpolation delay, ticks behind the arrival clock, as of the newest snapshot:
    /// `2 + 3 × jitter + 8 × gap loss`, bounded to 1..=24 and followed smoothly.
    pub fn interp_delay_ticks(&self) -> f64 {
        self.clock.delay()
    }

    /// The interpolation delay at `now` (it moves towards its target between snapshots).
    pub fn interp_delay_ticks_at(&self, now: Instant) -> f64 {
        self.clock.delay_at(now)
    }

    /// The delay the interpolation delay is heading for, ticks.
    pub fn interp_delay_target_ticks(&self) -> f64 {
        self.clock.delay_target()
    }

    /// Entity `id` at `render_tick` (normally [`Session::render_tick`]): its lanes
    /// interpolated between the two snapshots around that tick (numeric fields linearly,
    /// angles the short way round, bytes from the earlier snapshot; see [`lerp`]). Past
    /// the newest snapshot the newest state is held, never extrapolated; before the
    /// oldest kept ([`INTERP_FRAMES`] ticks) the oldest is. `None` when the entity is not
    /// in the world at that tick (or before the welcome). Allocates nothing.
    pub fn entity_at(&self, id: NetId, render_tick: f64) -> Option<Lanes> {
        (self.frames).entity_at(self.replica.as_ref()?, id, render_tick)
    }

    /// Starts loading what [`Session::entity_at`] reads first of entity `id` (a hint that
    /// changes nothing): a client reading many entities a frame (a crowd's players) gives
    /// it a few entities ahead of [`Session::prefetch_entity_at`], and that a few ahead of
    /// the one it reads, so that their misses overlap.
    pub fn prefetch_entity(&self, id: NetId) {
        if let Some(replica) = &self.replica {
            replica.prefetch_entity(id);
        }
    }

    /// Starts loading the states [`Session::entity_at`] interpolates entity `id` from at
    /// `render_tick` (a hint that changes nothing; see [`Session::prefetch_entity`]).
    pub fn prefetch_entity_at(&self, id: NetId, render_tick: f64) {
        if let Some(replica) = &self.replica {
            self.frames.prefetch_at(replica, id, render_tick);
        }
    }

    /// The newest snapshot tick held for interpolation, in this run.
    pub fn interp_newest_tick(&self) -> Option<u32> {
        self.frames.newest()
    }

    /// The schema this session decodes with.
    pub fn schema(&self) -> &'static Schema {
        self.schema
    }

    /// The welcome, once it came.
    pub fn welcome(&self) -> Option<&Welcome> {
        self.welcome.as_ref()
    }

    /// The match's current run: the welcome's epoch, or the last [`SessionEvent::Epoch`].
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Hands the session a replica made ahead of its welcome, of its schema and sized by
    /// [`SessionConfig::replica_config`] for the match the client expects (and perhaps
    /// [`Replica::reserve`]d). A welcome that names that match's size and rate takes it
    /// rather than making its own: a client that knows its match can allocate and touch
    /// that memory before its frames are timed (the bots make theirs before their schedule
    /// starts). A welcome it does not fit makes its own, as without it.
    pub fn prepare(&mut self, replica: Replica) {
        self.prepared = Some(replica);
    }

    /// The replica of the match, once the welcome sized it.
    pub fn replica(&self) -> Option<&Replica> {
        self.replica.as_ref()
    }

    /// The newest snapshot tick the replica has read in this run (0 before any).
    pub fn newest_tick(&self) -> u32 {
        self.replica
            .as_ref()
            .and_then(Replica::newest_tick)
            .unwrap_or(0)
    }

    /// True while the netcode connection is up (the session may still await its welcome).
    pub fn is_connected(&self) -> bool {
        self.ended.is_none() && self.transport.is_connected()
    }

    /// The netcode connection's state.
    pub fn state(&self) -> ClientState {
        self.transport.state()
    }

    /// Why the session ended, once it has.
    pub fn ended(&self) -> Option<Ended> {
        self.ended
    }

    /// The sequence number of the last input sent (0: none yet).
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// The reliable link's round trip, loss and counters.
    pub fn link_stats(&self) -> &LinkStats {
        self.link.stats()
    }

    /// The session's counters.
    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    /// The server's address.
    pub fn server_addr(&self) -> SocketAddr {
        self.transport.server_addr()
    }

    /// Starts loading what [`Session::handle_datagram`] reads of this session for the
    /// server's next packet: a hint, which changes nothing. `deep` false, the session's own
    /// lines (its connection's keys and times, its link, its counters and buffers' heads);
    /// `deep` true, given once those have arrived (a bot later), what they point to (the
    /// link's packet histories, the replay window's word). A process running hundreds of
    /// sessions in turn (a bots process) finds each one cold. The deep hint includes the
    /// link's slot for the next input sent and the replica's next slot
    /// ([`Replica::prefetch_next`]).
    pub fn prefetch(&self, deep: bool) {
        self.transport.prefetch(deep);
        if deep {
            self.link.prefetch_read();
            // The history slot the input sent this turn replaces.
            self.link.prefetch_write();
            if let Some(replica) = &self.replica {
                replica.prefetch_next();
            }
            return;
        }
        prefetch_lines(&self.link);
        prefetch(&self.stats);
        prefetch(&self.ended);
        prefetch(&self.pending);
        prefetch(&self.event);
        prefetch(&self.clock);
        prefetch(&self.frames);
        prefetch_lines(&self.replica);
        prefetch(&self.welcome);
    }

    /// Takes one datagram from `from`, received at `now` (decrypted in place). Its events
    /// come out of [`Session::poll_event`]: poll until `None` before handing in the next
    /// datagram (events left unpolled are applied to the replica and counted in
    /// [`SessionStats::unpolled`]).
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, bytes: &mut [u8]) {
        while self.poll_event().is_some() {
            self.stats.unpolled += 1;
        }
        if self.ended.is_some() {
            return;
        }
        self.stats.packets_received += 1;
        self.stats.bytes_received += bytes.len() as u64;
        let payload = match self.transport.handle_datagram(now, from, bytes) {
            Some(ClientEvent::Payload(p)) => p,
            Some(ClientEvent::Disconnected(reason)) => {
                self.end(Ended::Transport(reason));
                return;
            }
            Some(ClientEvent::Connected(_)) | None => return,
        };
        let body = match self.link.read_packet(now, payload) {
            Ok(Some((_tag, body))) => body,
            Ok(None) => {
                Self::copy_link_stats(&mut self.stats, self.link.stats());
                return;
            }
            Err(_) => {
                self.stats.link_errors += 1;
                return;
            }
        };
        Self::copy_link_stats(&mut self.stats, self.link.stats());
        match ServerMsg::decode(body) {
            Ok(ServerMsg::Snapshot {
                tick,
                input_ack,
                body,
            }) => {
                let held = &mut self.pending;
                held.tick = tick;
                held.input_ack = input_ack;
                held.at = now;
                held.body.clear();
                held.body.extend_from_slice(body);
                self.pending_ready = true;
            }
            Err(_) => self.stats.bad_snapshots += 1,
        }
    }

    /// Ends the connection when the server went silent or the token expired; the reason
    /// comes out of [`Session::poll_event`]. Call once a tick.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.ended.is_some() {
            return;
        }
        if let Some(reason) = self.transport.handle_timeout(now) {
            self.end(Ended::Transport(reason));
        }
    }

    /// The next event of the datagrams handed in, in order: the reliable messages of a
    /// packet before its snapshot. `None` when there is nothing more.
    pub fn poll_event(&mut self) -> Option<SessionEvent<'_>> {
        loop {
            if let Some(ended) = self.ended {
                if self.reported {
                    return None;
                }
                self.reported = true;
                return Some(SessionEvent::Disconnected(ended));
            }
            // The rest of a tick's game events, one at a time.
            if self.batch_at != 0 {
                match msg::game_event_range(&self.event, self.batch_at) {
                    Some(r) => {
                        self.batch_at = r.end;
                        return Some(SessionEvent::Game(&self.event[r]));
                    }
                    None => self.batch_at = 0,
                }
            }
            if self.link.poll_reliable(&mut self.event) {
                self.stats.events += 1;
                match Event::decode(&self.event) {
                    Ok(Event::Welcome {
                        match_id,
                        seat,
                        tick_hz,
                        seats,
                        entities,
                        schema,
                        epoch,
                    }) => {
                        let welcome = Welcome {
                            match_id,
                            seat,
                            tick_hz,
                            seats,
                            entities,
                            epoch,
                        };
                        if let Err(ended) = self.welcomed(welcome, schema) {
                            self.end(ended);
                            continue;
                        }
                        return Some(SessionEvent::Welcome(welcome));
                    }
                    Ok(Event::Epoch { epoch }) => {
                        self.epoch = epoch;
                        if let Some(r) = self.replica.as_mut() {
                            r.reset();
                        }
                        self.reset_run();
                        // Nothing of the old run is read after its end.
                        self.early.clear();
                        self.early_next = 0;
                        return Some(SessionEvent::Epoch { epoch });
                    }
                    // Game events before the welcome cannot come (it is the link's first
                    // message); the caller is told of them all the same.
                    Ok(Event::Game(_)) => return Some(SessionEvent::Game(&self.event[1..])),
                    Ok(Event::Games(_)) => {
                        self.batch_at = 1;
                        continue;
                    }
                    Err(_) => {
                        self.stats.bad_events += 1;
                        continue;
                    }
                }
            }
            // The snapshots that came before the welcome, in order of arrival.
            if self.replica.is_some() && self.early_next < self.early.len() {
                let i = self.early_next;
                self.early_next += 1;
                let (tick, input_ack, at) = (
                    self.early[i].tick,
                    self.early[i].input_ack,
                    self.early[i].at,
                );
                let body = std::mem::take(&mut self.early[i].body);
                let read = self.read(tick, at, &body);
                self.early[i].body = body;
                if self.early_next == self.early.len() {
                    self.early.clear();
                    self.early_next = 0;
                }
                match read {
                    Some(read) => {
                        return Some(SessionEvent::Snapshot {
                            tick,
                            input_ack,
                            read,
                        })
                    }
                    None => continue,
                }
            }
            if !self.pending_ready {
                return None;
            }
            self.pending_ready = false;
            let (tick, input_ack, at) =
                (self.pending.tick, self.pending.input_ack, self.pending.at);
            if self.replica.is_none() {
                // The link has acknowledged it: the server may encode against it later.
                if self.early.len() < EARLY_SNAPSHOTS {
                    let body = self.pending.body.clone();
                    self.early.push(Held {
                        tick,
                        input_ack,
                        at,
                        body,
                    });
                } else {
                    self.stats.early_dropped += 1;
                }
                continue;
            }
            let body = std::mem::take(&mut self.pending.body);
            let read = self.read(tick, at, &body);
            self.pending.body = body;
            if let Some(read) = read {
                return Some(SessionEvent::Snapshot {
                    tick,
                    input_ack,
                    read,
                });
            }
        }
    }

    /// Forgets the timing and the frames of the run that ended.
    fn reset_run(&mut self) {
        self.clock.reset_run();
        self.frames.reset();
    }

    fn copy_link_stats(stats: &mut SessionStats, link: &LinkStats) {
        stats.rtt = link.rtt;
        stats.rtt_jitter = link.jitter;
        stats.loss_ppm = (f64::from(link.loss.clamp(0.0, 1.0)) * 1e6) as u32;
    }

    /// Reads one snapshot body, which arrived at `at`, into the replica, the clock and
    /// the interpolation frames; `None` when refused (counted).
    fn read(&mut self, tick: u32, at: Instant, body: &[u8]) -> Option<ReadInfo> {
        let replica = self.replica.as_mut()?;
        if body.is_empty() {
            // The server had nothing it could send this tick (its byte budget or rate was
            // spent): normal traffic, nothing to read (PROTOCOL.md, "The snapshot body").
            self.stats.empty_snapshots += 1;
            return None;
        }
        if replica
            .newest_tick()
            .is_some_and(|newest| newest > tick && newest - tick > TICK_JUMP)
        {
            replica.reset();
            self.clock.reset_run();
            self.frames.reset();
        }
        match replica.read(body) {
            Ok(read) => {
                self.stats.snapshots += 1;
                if !read.duplicate {
                    self.clock.sample(read.tick, at);
                    self.frames.record(read.tick);
                    let clock = &self.clock;
                    self.stats.snapshot_jitter = clock.duration(clock.jitter());
                    self.stats.snapshot_gap_ppm = (clock.gap_loss() * 1e6) as u32;
                    self.stats.interp_delay = clock.duration(clock.delay());
                }
                Some(read)
            }
            Err(_) => {
                self.stats.bad_snapshots += 1;
                None
            }
        }
    }

    /// Checks a welcome and sizes the replica for it.
    fn welcomed(&mut self, welcome: Welcome, schema: u32) -> Result<(), Ended> {
        let ours = self.schema.fingerprint();
        if schema != ours {
            return Err(Ended::WrongSchema {
                ours,
                theirs: schema,
            });
        }
        if welcome.entities == 0 || usize::from(welcome.entities) > MAX_ENTITIES {
            return Err(Ended::BadWelcome("entities must be 1 to 4096"));
        }
        if welcome.tick_hz == 0 {
            return Err(Ended::BadWelcome("a tick rate of 0"));
        }
        let config = self
            .config
            .replica_config(welcome.entities, welcome.tick_hz);
        let fits = |r: &Replica| {
            *r.config() == config && r.schema().fingerprint() == self.schema.fingerprint()
        };
        match self.replica.as_mut() {
            Some(r) if fits(r) => r.reset(),
            _ => {
                let made = self.prepared.take().filter(|r| fits(r));
                self.replica = Some(made.unwrap_or_else(|| Replica::new(config, self.schema)));
            }
        }
        // A replica of the match made ahead, not taken, is not kept.
        self.prepared = None;
        self.frames.reset();
        self.clock.set_rate(welcome.tick_hz);
        self.clock.reset_run();
        self.welcome = Some(welcome);
        self.epoch = welcome.epoch;
        Ok(())
    }

    /// Ends the session with `ended`: the server is told (when connected), and the event
    /// comes out of the next poll.
    fn end(&mut self, ended: Ended) {
        if self.ended.is_none() {
            self.ended = Some(ended);
            self.transport.disconnect();
        }
    }

    /// Sends this tick's input: the game's `bytes`, made while the player was shown
    /// `view`, with the link's acks and any reliable messages due. Returns the input's
    /// sequence number (from 1), or `None` when not connected (nothing is sent).
    pub fn send_input(&mut self, now: Instant, view: ViewTime, bytes: &[u8]) -> Option<u32> {
        if !self.is_connected() {
            return None;
        }
        let seq = self.seq.wrapping_add(1);
        self.payload.clear();
        ClientMsg::Input {
            seq,
            view_tick: view.tick.0,
            view_frac: view.frac,
            cmd: bytes,
        }
        .encode(&mut self.payload);
        self.link
            .write_packet(now, Some((seq, &self.payload)), &mut self.packet);
        self.sealed_to = self
            .transport
            .send_payload(now, &self.packet, &mut self.sealed);
        self.sealed_to?;
        self.seq = seq;
        self.stats.inputs += 1;
        Some(seq)
    }

    /// Sends a packet without an input: the link's acks and any reliable messages due.
    /// For a client that has no input this tick; returns false when not connected.
    pub fn send_packet(&mut self, now: Instant) -> bool {
        if !self.is_connected() {
            return false;
        }
        self.link.write_packet(now, None, &mut self.packet);
        self.sealed_to = self
            .transport
            .send_payload(now, &self.packet, &mut self.sealed);
        self.sealed_to.is_some()
    }

    /// Queues a reliable message for the game (chat, a vote, a buy): it goes out with the
    /// next [`Session::send_input`] or [`Session::send_packet`], and is resent until
    /// acknowledged. Fails when too large or when the server left too much unacknowledged.
    pub fn send_message(&mut self, bytes: &[u8]) -> Result<(), ReliableError> {
        self.link.send_reliable(bytes)
    }

    /// Writes the next datagram to send into `buf` (cleared first) and returns where it
    /// goes: the last sealed input or packet first, then the transport's own (connection
    /// requests, keep-alives, disconnects). Call until `None` after each send and tick.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<SocketAddr> {
        let to = match self.sealed_to.take() {
            Some(to) => {
                buf.clear();
                buf.extend_from_slice(&self.sealed);
                Some(to)
            }
            None => self.transport.poll_transmit(now, buf),
        }?;
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += buf.len() as u64;
        Some(to)
    }

    /// Closes the connection: the next polls of [`Session::poll_transmit`] give the
    /// disconnect packets, and [`Session::poll_event`] reports
    /// [`Ended::Transport`]`(ClientClosed)`.
    pub fn disconnect(&mut self) {
        self.sealed_to = None;
        self.end(Ended::Transport(DisconnectReason::ClientClosed));
    }
}
