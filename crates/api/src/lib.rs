//! The game boundary: what a game gives tickforge's runtime, and what the runtime gives it.
//!
//! Quake III drew this line as `gameExport_t`: the engine calls the game, and the game
//! never touches a socket. Here it is the [`Game`] trait. The runtime (transport, workers,
//! admission, reliability, replication, telemetry, admin, drain) is written against it; the
//! reference shooter (`tickforge-shooter`) and every studio's game implement it.
//!
//! ```text
//! runtime, per match                         the game
//! ─────────────────────────────────────────  ──────────────────────────────────────────
//! POST /matches {"game": {..}} or [game]  →  Game::configure   (keys checked, named)
//! match made, or started over             →  Game::new         (spawns its entities)
//! client seated / gone                    →  Game::join / Game::leave
//! input bytes from a client               →  Game::decode_input (None: dropped, counted)
//! reliable bytes from a client            →  Game::message      (Err: client dropped)
//! each tick: newest input per seat        →  Game::apply_input
//!            one step                     →  Game::step(StepContext)   (lent: the grid of
//!                                                where entities stood after the last tick)
//!                                                writes entity states  → Entities
//!                                                queues reliable bytes → Events
//!            per seat: what it sees from  →  Game::view          (centre, own entity, fog)
//!            which round it is            →  Game::round        (None: no rounds)
//! when Game::is_over                      →  Game::finish       (the results line, a recording)
//! ```
//!
//! What the runtime owns and lends: entity ids ([`Entities`]: generational, each mapped to
//! a `u16` network id; up to [`MAX_ENTITIES`] a match), reliable events to one seat or all
//! ([`Events`]), frame scopes ([`StepContext::scopes`]), where the entities stood at the end
//! of the last tick ([`StepContext::grid`]: replication's spatial grid), and the
//! lag-compensation history (`tickforge_sim::lagcomp`, through [`sim`]). What the game owns: its state, its input
//! format, its [`Schema`] (the replicated fields: name, type, quantum, predictor), its rules
//! and its result.
//!
//! In order of importance: nothing here does I/O; nothing here allocates per tick (the
//! buffers are made with the match and reused); a hostile client's bytes reach the game only
//! through [`Game::decode_input`] and [`Game::message`], which must accept any bytes.

use std::fmt;

pub use serde_json::{Map, Value};
pub use tickforge_replication::{
    Coding, Field, Lanes, NetId, Position, Quantum, RateByDistance, Schema, SchemaError, Viewer,
    MAX_ENTITIES,
};
pub use tickforge_sim as sim;
pub use tickforge_sim::spatial::Grid;
pub use tickforge_sim::{Tick, ViewTime};
pub use tickforge_telemetry::{Category, Scopes};

mod config;
mod entities;
mod events;

pub use config::{ConfigError, ConfigTable, ReadTable};
pub use entities::{Entities, EntityChange, EntityId, REUSE_AFTER_TICKS};
pub use events::{Events, Target};

/// Reliable messages one seat's client may send a match between two ticks; more
/// disconnect it, so one client cannot fill the others' reliable queues with what the game
/// relays.
pub const MAX_MESSAGES_PER_TICK: u32 = 16;

/// A seat in a match: where one client plays, `0..seats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Seat(pub u16);

impl Seat {
    /// The seat as an index into per-seat tables.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// What the runtime tells a game about the match it is making.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatchSetup {
    /// Seats in the match: clients are seated in `0..seats`.
    pub seats: u16,
    /// Ticks per second.
    pub tick_hz: u32,
    /// The match is recorded: the game keeps what [`MatchEnd::recording`] needs (the
    /// shooter: an action file of every input).
    pub record: bool,
    /// An offset for work the game does once every few ticks. The matches a worker steps
    /// in the same wake-up get 0, 1, 2 …, so a game whose heavy tick is the one where
    /// `tick + stagger` is a multiple of N spreads that work over the worker's N ticks
    /// rather than stacking every match's on one (the shooter: its fog of war's traces).
    pub stagger: u32,
}

/// What the runtime knows of an input besides its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InputInfo {
    /// The client's sequence number of the input (from 1, one per client tick): a game
    /// may echo it in an event so the client matches a verdict with the input it judged.
    pub seq: u32,
    /// The moment of the world the client was showing when it made the input: where lag
    /// compensation rewinds its shots to.
    pub view: ViewTime,
}

/// One tick's context, lent to [`Game::step`].
pub struct StepContext<'a> {
    /// The tick being stepped: the first step of a match is tick 0.
    pub tick: Tick,
    /// Frame scopes: a game charges its work to categories
    /// (`let _g = cx.scopes.scope(Category::Gameplay)`).
    pub scopes: &'a Scopes,
    /// Spawn, update and destroy the replicated entities.
    pub entities: &'a mut Entities,
    /// Reliable events to one seat or to all; sent with this tick's snapshot.
    pub events: &'a mut Events,
    /// Where every entity stood at the end of the last tick, by entity index: replication's
    /// relevancy grid, lent read-only, so a game that looks for entities near each other
    /// (the shooter's fog of war) shares the one spatial index the match keeps. It holds
    /// the positions of the states written before this step (none at a match's first), and
    /// not this step's writes. `None` where no replication runs (tests, tools).
    pub grid: Option<&'a Grid>,
}

/// What one seat's client is sent from, for one tick ([`Game::view`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct View<'a> {
    /// The centre of its relevancy and priority.
    pub viewer: Viewer,
    /// The seat's own entity (its player), sent to it every tick at top priority.
    pub own: Option<EntityId>,
    /// Fog of war: bit `i % 64` of word `i / 64` set when the entity with network id `i`
    /// may be sent to this seat; `None`: everything relevant may be.
    pub visible: Option<&'a [u64]>,
}

/// How a match ended, as [`Game::finish`] gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatchEnd {
    /// The game's part of the results line: `key=value` tokens separated by single spaces,
    /// no newline (the runtime adds the game, match, run, time and a checksum around it).
    pub result: String,
    /// What the game recorded of the match when [`MatchSetup::record`] was set (the
    /// shooter: its action file), written next to the results.
    pub recording: Option<Vec<u8>>,
}

/// Counters a game keeps that the runtime reports: lag compensation's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GameCounters {
    /// Rewinds asked for (the shooter: one per shot).
    pub rewinds: u64,
    /// Of them, those whose view time was older than the history holds: tested at the
    /// oldest tick it has instead.
    pub rewinds_clamped: u64,
}

/// A game tickforge can host. One value is one match's state; the runtime makes one per
/// match with [`Game::new`] and drops it when the match ends or starts over.
///
/// Every method runs on a worker thread between or inside ticks, so none may block or do
/// I/O. [`Game::step`], [`Game::apply_input`], [`Game::decode_input`] and [`Game::view`] run
/// on the tick path: they should not allocate (the no-allocation tests hold the shooter to
/// it).
pub trait Game: Sized + Send + 'static {
    /// The game's settings: the `[game]` table of the server's TOML, the `game` object of
    /// `POST /matches`, read by [`Game::configure`].
    type Config: Clone + fmt::Debug + Send + Sync + 'static;
    /// One decoded input: what a seat asks for in a tick.
    type Input: Copy + Default + fmt::Debug + Send + 'static;

    /// The game's name: `serve --game NAME`, `"game": {"name": NAME}`, and the results line.
    /// Lowercase ASCII letters, digits and `-`.
    const NAME: &'static str;
    /// One line for `--help`.
    const ABOUT: &'static str;
    /// The most seats a match of this game may have; the runtime refuses more.
    const MAX_SEATS: u16 = 1024;

    /// The replicated fields of every entity, the same on server and clients.
    fn schema() -> &'static Schema;

    /// Reads the game's settings from `table` (empty: the defaults). Unknown keys and bad
    /// values are refused with the key and the form expected ([`ConfigError`]); the
    /// runtime prefixes where the table came from.
    fn configure(table: &ConfigTable) -> Result<Self::Config, ConfigError>;

    /// The most entities a match of `config` with `seats` seats holds at once: the
    /// runtime reserves that many network ids and replication slots.
    fn max_entities(config: &Self::Config, seats: u16) -> u16;

    /// How often the runtime may send each entity to a client by its distance from the
    /// client's [`Viewer`]: every tick within `halve_every_m`, then half as often with each
    /// further step, down to one tick in `slowest_every_ticks` ([`RateByDistance`]). A
    /// crowd's far players then cost a packet less room and a client less reading. The
    /// runtime refuses a configuration whose rate is out of range. Default: every relevant
    /// entity may go every tick.
    fn rate_by_distance(config: &Self::Config) -> RateByDistance {
        let _ = config;
        RateByDistance::EVERY_TICK
    }

    /// A new match at tick 0, every seat empty. Spawn the entities that exist from the
    /// start here (the shooter: one per seat, in seat order, so a seat's entity has the
    /// seat's number); their first states may be written here too, or in the first step.
    /// Allocates whatever the match's ticks use; the runtime calls it off the tick path,
    /// when the match is made and each time it starts over, and then [`Game::join`] for
    /// each seat that has a client (after a start over, every client still seated).
    fn new(config: &Self::Config, setup: &MatchSetup, entities: &mut Entities) -> Self;

    /// Decodes one input from a client's bytes. Any bytes may arrive: `None` drops them
    /// (counted as a bad input), never a panic.
    fn decode_input(bytes: &[u8]) -> Option<Self::Input>;

    /// The newest input of `seat`, applied before the next [`Game::step`] (only when a new
    /// one arrived: a seat keeps its last input until then). Inputs are state, not events:
    /// of several that arrive between two ticks only the newest is applied, so a press a
    /// game must not miss is held in the input until the client sees it acknowledged, or
    /// sent as a reliable message.
    fn apply_input(&mut self, seat: Seat, input: &Self::Input, info: InputInfo);

    /// A client sits in `seat`: when it connects, and again after each start over (to the
    /// new game value). Send it what a late joiner needs to make sense of the snapshots
    /// that follow (the score, who is dead): [`Target::Seat`] events.
    fn join(&mut self, seat: Seat, events: &mut Events) {
        let _ = (seat, events);
    }

    /// The client of `seat` is gone: its player stops (the runtime stops applying its
    /// input; the game decides what its entity does).
    fn leave(&mut self, seat: Seat) {
        let _ = seat;
    }

    /// A reliable message from `seat`'s client (chat, a vote, a buy): any bytes may
    /// arrive, in order, between ticks; at most [`MAX_MESSAGES_PER_TICK`] a seat per tick
    /// (a client that sends more is disconnected by the runtime). `Err` disconnects the
    /// client; nobody else notices. The default ignores messages.
    fn message(&mut self, seat: Seat, bytes: &[u8], events: &mut Events) -> Result<(), Refused> {
        let _ = (seat, bytes, events);
        Ok(())
    }

    /// One tick: the inputs applied, the world stepped, every entity that changed written
    /// to [`StepContext::entities`], this tick's events queued.
    fn step(&mut self, cx: &mut StepContext<'_>);

    /// Where `seat`'s client sees from after the last step, its own entity and its fog of
    /// war row.
    fn view(&self, seat: Seat) -> View<'_>;

    /// True once the match is over; the runtime then calls [`Game::finish`] after the
    /// tick and starts a new match or removes it.
    fn is_over(&self) -> bool;

    /// The result of a match that [`Game::is_over`]; called once.
    fn finish(&mut self) -> MatchEnd;

    /// Bytes the snapshot's shown entities would cost as full states (every field, every
    /// tick): the baseline the report compares delta replication with. The default
    /// counts a 4-byte tick, and a 2-byte id and 4 bytes a lane for each entity.
    fn full_state_bytes(shown: usize) -> usize {
        4 + shown * (2 + 4 * Self::schema().lane_count())
    }

    /// The settings `config` plays with, every key filled (the defaults too): what the
    /// report and the `POST /matches` answer show (`map`, and `max_rewind_ms` for a game
    /// that rewinds, are read from it). The default shows none.
    fn settings(config: &Self::Config) -> ConfigTable {
        let _ = config;
        ConfigTable::new()
    }

    /// The game's lag-compensation counters, summed over the match.
    fn counters(&self) -> GameCounters {
        GameCounters::default()
    }

    /// The round the match is in after the last [`Game::step`] (from 1), for a game that
    /// plays rounds; `None` (the default) for one that does not. The runtime reads it
    /// after every step: a tick's frame counts in the round it returns, and a change of
    /// number ends the round before in the frame history (the mean frame time per round
    /// in the results line, `/matches` and `/metrics`). A game without rounds gets that
    /// history for the whole match only. Called on the tick path: it must not allocate.
    fn round(&self) -> Option<u32> {
        None
    }
}

/// A client message the game refuses: the runtime disconnects its sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the game refused a client message: {0}")]
pub struct Refused(pub &'static str);
