//! Walk: a small, deterministic game for the runtime's own tests (feature `game`).
//!
//! The runtime (`tickforge-server`) knows no game; its tests need *a* game to host. Walk is
//! the least one that exercises everything the runtime drives through
//! [`tickforge_api::Game`]:
//!
//! - **Entities**: one per seat (seat `s` is entity `s`), starting at `(100·s, 0)` on an
//!   integer grid and moved each tick by its seat's input, clamped to `±arena`. Only
//!   entities that moved are written (all of them in the first step, none in
//!   [`Game::new`]: one write per entity a tick). A seat whose client left stands still.
//! - **Input**: three bytes ([`WalkInput`]): `dx: i8`, `dy: i8`, `flags: u8`. Bit 0
//!   ([`WalkInput::MARK`]) asks for a [`WalkEvent::Mark`] carrying the input's `seq`, to
//!   that seat only: how a test checks that per-seat verdicts reach the right client.
//!   Any other length or flag bit is refused.
//! - **Events** ([`WalkEvent`], a kind byte and little-endian fields): a
//!   [`WalkEvent::Beat`] to all every `every` ticks (tick 0 included), a
//!   [`WalkEvent::Joined`] to a seat that sits down, a [`WalkEvent::Mark`] per marked input,
//!   and [`WalkEvent::Over`] to all in the last tick.
//! - **End**: after `ticks` ticks. The result body is
//!   `ticks=T seats=N marks=M` then `seat=S,X,Y` per seat (coordinates offset by
//!   [`COORD_BIAS`] so they stay unsigned decimals), readable with [`WalkResult::parse`].
//! - **Recording** (when [`MatchSetup::record`]): every applied input, join and leave, in order
//!   ([`replay`] plays it back to the same final positions).
//! - **Rounds** (when `round_ticks` is set): round `1 + t / round_ticks` for tick `t`
//!   ([`Game::round`]); none by default.
//! - **Settings** (`[game]` table, all optional integers): `ticks` (1 to 10 000 000,
//!   default 3840), `every` (1 to 65 535, default 64), `arena` (1 to 1 000 000, default
//!   5000), `round_ticks` (0 to 10 000 000, default 0: no rounds).
//!
//! The tick path ([`Game::step`], [`Game::apply_input`], [`Game::decode_input`],
//! [`Game::view`]) allocates nothing unless the match is recorded.

use std::fmt::Write as _;

use serde::Deserialize;
use tickforge_api::{
    Category, Coding, ConfigError, ConfigTable, Entities, EntityId, Events, Field, Game, InputInfo,
    Lanes, MatchEnd, MatchSetup, Position, Quantum, ReadTable, Schema, Seat, StepContext, Target,
    View, Viewer,
};

/// The most seats a Walk match takes ([`Game::MAX_SEATS`]): not the runtime's own bound,
/// so tests can tell the game's cap from the runtime's.
pub const MAX_SEATS: u16 = 100;

/// Added to coordinates in the result line, so that they are unsigned.
pub const COORD_BIAS: i64 = 1 << 32;

static SCHEMA: Schema =
    match Schema::new(&[Field::new("position xy", Coding::Pair, Quantum::Whole)]) {
        Ok(s) => s,
        Err(_) => panic!("the walk schema is a valid table"),
    };

/// Walk's settings ([`Game::configure`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkConfig {
    /// Ticks a match lasts.
    pub ticks: u32,
    /// A [`WalkEvent::Beat`] goes to all every this many ticks.
    pub every: u32,
    /// Positions are clamped to `-arena..=arena` on both axes.
    pub arena: i32,
    /// Ticks a round lasts; 0: the game has no rounds.
    pub round_ticks: u32,
}

impl Default for WalkConfig {
    fn default() -> Self {
        WalkConfig {
            ticks: 3840,
            every: 64,
            arena: 5000,
            round_ticks: 0,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    ticks: Option<i64>,
    every: Option<i64>,
    arena: Option<i64>,
    round_ticks: Option<i64>,
}

fn ranged(key: &str, v: Option<i64>, lo: i64, hi: i64, default: i64) -> Result<i64, ConfigError> {
    match v {
        None => Ok(default),
        Some(v) if (lo..=hi).contains(&v) => Ok(v),
        Some(v) => Err(ConfigError::new(key, format!("{lo} to {hi}"), v)),
    }
}

/// One seat's input: a step and flags. Wire form `[dx as u8, dy as u8, flags]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkInput {
    /// Step along x per tick.
    pub dx: i8,
    /// Step along y per tick.
    pub dy: i8,
    /// [`WalkInput::MARK`] or nothing.
    pub flags: u8,
}

impl WalkInput {
    /// Flag: answer this input with a [`WalkEvent::Mark`] carrying its `seq`, to its seat.
    pub const MARK: u8 = 1;
    /// Bytes of an input on the wire.
    pub const BYTES: usize = 3;

    /// The input's wire form.
    pub fn to_bytes(self) -> [u8; 3] {
        [self.dx as u8, self.dy as u8, self.flags]
    }

    /// The input in `bytes`; `None` for another length or an unknown flag.
    pub fn from_bytes(bytes: &[u8]) -> Option<WalkInput> {
        match *bytes {
            [dx, dy, flags] if flags & !Self::MARK == 0 => Some(WalkInput {
                dx: dx as i8,
                dy: dy as i8,
                flags,
            }),
            _ => None,
        }
    }
}

/// A reliable event of Walk, as the game's bytes inside the runtime's game event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkEvent {
    /// To all, every `every` ticks: the tick it was sent in.
    Beat {
        /// The tick.
        tick: u32,
    },
    /// To a seat that sat down: its seat and the ticks stepped so far.
    Joined {
        /// The seat.
        seat: u16,
        /// Ticks stepped before it joined.
        ticks: u32,
    },
    /// To one seat: the verdict on its marked input `seq`, judged in tick `tick`.
    Mark {
        /// The input's sequence number.
        seq: u32,
        /// The tick that judged it.
        tick: u32,
    },
    /// To all, in the last tick: ticks stepped.
    Over {
        /// Ticks the match lasted.
        ticks: u32,
    },
}

impl WalkEvent {
    /// The most bytes an event takes.
    pub const MAX_BYTES: usize = 9;

    /// Appends the event's bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            WalkEvent::Beat { tick } => {
                out.push(1);
                out.extend_from_slice(&tick.to_le_bytes());
            }
            WalkEvent::Joined { seat, ticks } => {
                out.push(2);
                out.extend_from_slice(&seat.to_le_bytes());
                out.extend_from_slice(&ticks.to_le_bytes());
            }
            WalkEvent::Mark { seq, tick } => {
                out.push(3);
                out.extend_from_slice(&seq.to_le_bytes());
                out.extend_from_slice(&tick.to_le_bytes());
            }
            WalkEvent::Over { ticks } => {
                out.push(4);
                out.extend_from_slice(&ticks.to_le_bytes());
            }
        }
    }

    /// The event in `bytes`; `None` for anything not exactly one event.
    pub fn decode(bytes: &[u8]) -> Option<WalkEvent> {
        let u32_at = |i: usize| Some(u32::from_le_bytes(bytes.get(i..i + 4)?.try_into().ok()?));
        let (event, len) = match *bytes.first()? {
            1 => (WalkEvent::Beat { tick: u32_at(1)? }, 5),
            2 => {
                let seat = u16::from_le_bytes(bytes.get(1..3)?.try_into().ok()?);
                (
                    WalkEvent::Joined {
                        seat,
                        ticks: u32_at(3)?,
                    },
                    7,
                )
            }
            3 => (
                WalkEvent::Mark {
                    seq: u32_at(1)?,
                    tick: u32_at(5)?,
                },
                9,
            ),
            4 => (WalkEvent::Over { ticks: u32_at(1)? }, 5),
            _ => return None,
        };
        (bytes.len() == len).then_some(event)
    }
}

#[derive(Clone, Copy, Debug)]
struct Walker {
    id: EntityId,
    at: [i32; 2],
    input: WalkInput,
    idle: bool,
    /// A marked input's seq, answered in the next step.
    mark: Option<u32>,
    moved: bool,
}

/// One match of Walk.
#[derive(Debug)]
pub struct Walk {
    config: WalkConfig,
    ticks: u32,
    marks: u64,
    walkers: Vec<Walker>,
    recording: Option<Vec<u8>>,
}

/// A recorded leave: a seat's entry whose flags byte is this.
const LEFT: u8 = 0xff;
/// A recorded join.
const JOINED: u8 = 0xfe;

impl Walk {
    /// The match's settings.
    pub fn config(&self) -> &WalkConfig {
        &self.config
    }

    /// Ticks stepped: 0 for a new match.
    pub fn ticks(&self) -> u32 {
        self.ticks
    }

    /// Where `seat`'s entity is, as replicated (lanes 0 and 1).
    pub fn position(&self, seat: Seat) -> Option<[i32; 2]> {
        self.walkers.get(seat.index()).map(|w| w.at)
    }

    /// The last input applied to `seat` (a left seat's is the default).
    pub fn input(&self, seat: Seat) -> Option<WalkInput> {
        self.walkers.get(seat.index()).map(|w| w.input)
    }

    /// Marked inputs answered so far.
    pub fn marks(&self) -> u64 {
        self.marks
    }

    /// The lanes of an entity at `at`.
    pub fn lanes(at: [i32; 2]) -> Lanes {
        let mut l = Lanes::ZERO;
        l.0[0] = at[0];
        l.0[1] = at[1];
        l
    }

    fn record(&mut self, seat: Seat, input: WalkInput, flags: u8) {
        if let Some(r) = &mut self.recording {
            r.extend_from_slice(&self.ticks.to_le_bytes());
            r.extend_from_slice(&seat.0.to_le_bytes());
            r.extend_from_slice(&[input.dx as u8, input.dy as u8, flags]);
        }
    }
}

fn send(events: &mut Events, to: Target, e: WalkEvent) {
    events.write(to, |out| e.encode(out));
}

fn place(at: [i32; 2]) -> Position {
    Position::new(at[0] as f32 / 100.0, at[1] as f32 / 100.0, 0.0)
}

impl Game for Walk {
    type Config = WalkConfig;
    type Input = WalkInput;
    const NAME: &'static str = "walk";
    const ABOUT: &'static str = "A test game: each seat walks by its input";
    const MAX_SEATS: u16 = MAX_SEATS;

    fn schema() -> &'static Schema {
        &SCHEMA
    }

    fn configure(table: &ConfigTable) -> Result<WalkConfig, ConfigError> {
        let t: Table = table.read()?;
        let d = WalkConfig::default();
        Ok(WalkConfig {
            ticks: ranged("ticks", t.ticks, 1, 10_000_000, d.ticks.into())? as u32,
            every: ranged("every", t.every, 1, 65_535, d.every.into())? as u32,
            arena: ranged("arena", t.arena, 1, 1_000_000, d.arena.into())? as i32,
            round_ticks: ranged("round_ticks", t.round_ticks, 0, 10_000_000, 0)? as u32,
        })
    }

    fn max_entities(_: &WalkConfig, seats: u16) -> u16 {
        seats
    }

    fn new(config: &WalkConfig, setup: &MatchSetup, entities: &mut Entities) -> Walk {
        let walkers = (0..setup.seats)
            .map(|s| {
                let at = [(i32::from(s) * 100).min(config.arena), 0];
                // Its first state is written by the first step: one write per entity a
                // tick keeps the runtime's log within what it reserved.
                let id = entities.spawn().expect("max_entities is one per seat");
                Walker {
                    id,
                    at,
                    input: WalkInput::default(),
                    idle: false,
                    mark: None,
                    moved: false,
                }
            })
            .collect();
        Walk {
            config: *config,
            ticks: 0,
            marks: 0,
            walkers,
            recording: setup.record.then(|| b"walk-rec/1\n".to_vec()),
        }
    }

    fn decode_input(bytes: &[u8]) -> Option<WalkInput> {
        WalkInput::from_bytes(bytes)
    }

    fn apply_input(&mut self, seat: Seat, input: &WalkInput, info: InputInfo) {
        let Some(w) = self.walkers.get_mut(seat.index()) else {
            return;
        };
        w.input = *input;
        if input.flags & WalkInput::MARK != 0 {
            w.mark = Some(info.seq);
        }
        self.record(seat, *input, input.flags);
    }

    fn join(&mut self, seat: Seat, events: &mut Events) {
        if let Some(w) = self.walkers.get_mut(seat.index()) {
            w.idle = false;
        }
        self.record(seat, WalkInput::default(), JOINED);
        let e = WalkEvent::Joined {
            seat: seat.0,
            ticks: self.ticks,
        };
        send(events, Target::Seat(seat), e);
    }

    fn leave(&mut self, seat: Seat) {
        if let Some(w) = self.walkers.get_mut(seat.index()) {
            w.idle = true;
            w.input = WalkInput::default();
            w.mark = None;
        }
        self.record(seat, WalkInput::default(), LEFT);
    }

    fn step(&mut self, cx: &mut StepContext<'_>) {
        let _g = cx.scopes.scope(Category::Gameplay);
        if self.is_over() {
            return;
        }
        let tick = self.ticks;
        step_walkers(&mut self.walkers, self.config.arena);
        for (s, w) in self.walkers.iter_mut().enumerate() {
            if w.moved || tick == 0 {
                cx.entities.set(w.id, place(w.at), &Walk::lanes(w.at));
            }
            if let Some(seq) = w.mark.take() {
                self.marks += 1;
                let to = Target::Seat(Seat(s as u16));
                send(cx.events, to, WalkEvent::Mark { seq, tick });
            }
        }
        if tick.is_multiple_of(self.config.every) {
            send(cx.events, Target::All, WalkEvent::Beat { tick });
        }
        self.ticks += 1;
        if self.is_over() {
            let ticks = self.ticks;
            send(cx.events, Target::All, WalkEvent::Over { ticks });
        }
    }

    fn view(&self, seat: Seat) -> View<'_> {
        let Some(w) = self.walkers.get(seat.index()) else {
            return View::default();
        };
        View {
            viewer: Viewer {
                position: place(w.at),
                yaw: 0,
            },
            own: Some(w.id),
            visible: None,
        }
    }

    fn is_over(&self) -> bool {
        self.ticks >= self.config.ticks
    }

    fn round(&self) -> Option<u32> {
        let per = self.config.round_ticks;
        (per > 0).then(|| self.ticks.saturating_sub(1) / per + 1)
    }

    fn finish(&mut self) -> MatchEnd {
        let mut result = format!(
            "ticks={} seats={} marks={}",
            self.ticks,
            self.walkers.len(),
            self.marks
        );
        for (s, w) in self.walkers.iter().enumerate() {
            let [x, y] = w.at.map(|c| i64::from(c) + COORD_BIAS);
            let _ = write!(result, " seat={s},{x},{y}");
        }
        MatchEnd {
            result,
            recording: self.recording.take(),
        }
    }
}

/// Moves every walker that is not idle by its input, clamped to the arena.
fn step_walkers(walkers: &mut [Walker], arena: i32) {
    for w in walkers {
        let before = w.at;
        if !w.idle {
            let d = [w.input.dx, w.input.dy];
            for (c, d) in w.at.iter_mut().zip(d) {
                *c = (*c + i32::from(d)).clamp(-arena, arena);
            }
        }
        w.moved = w.at != before;
    }
}

/// A Walk result body, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalkResult {
    /// Ticks the match lasted.
    pub ticks: u32,
    /// Marked inputs answered.
    pub marks: u64,
    /// Each seat's final position, in seat order.
    pub positions: Vec<[i32; 2]>,
}

impl WalkResult {
    /// Reads a body as [`Game::finish`] writes it; `None` for anything else.
    pub fn parse(body: &str) -> Option<WalkResult> {
        let mut t = body.split(' ');
        let mut num = |name: &str| -> Option<u64> {
            t.next()?
                .strip_prefix(name)?
                .strip_prefix('=')?
                .parse()
                .ok()
        };
        let ticks = u32::try_from(num("ticks")?).ok()?;
        let seats = num("seats")?;
        let marks = num("marks")?;
        let positions = t
            .enumerate()
            .map(|(i, tok)| {
                let mut f = tok.strip_prefix("seat=")?.split(',');
                let s: usize = f.next()?.parse().ok()?;
                let mut coord = || -> Option<i32> {
                    let v: i64 = f.next()?.parse().ok()?;
                    i32::try_from(v - COORD_BIAS).ok()
                };
                let at = [coord()?, coord()?];
                (s == i).then_some(at)
            })
            .collect::<Option<Vec<_>>>()?;
        (positions.len() as u64 == seats).then_some(WalkResult {
            ticks,
            marks,
            positions,
        })
    }
}

/// Plays a recording back: the final positions of a match of `config` and `seats` seats
/// whose inputs and leaves were `recording` ([`MatchSetup::record`]), stepped `ticks`
/// ticks. `None` for bytes that are not a recording.
pub fn replay(
    config: &WalkConfig,
    seats: u16,
    recording: &[u8],
    ticks: u32,
) -> Option<Vec<[i32; 2]>> {
    let body = recording.strip_prefix(b"walk-rec/1\n")?;
    if !body.len().is_multiple_of(9) {
        return None;
    }
    let mut walkers: Vec<Walker> = (0..seats)
        .map(|s| Walker {
            id: EntityId {
                index: s,
                generation: 0,
            },
            at: [(i32::from(s) * 100).min(config.arena), 0],
            input: WalkInput::default(),
            idle: false,
            mark: None,
            moved: false,
        })
        .collect();
    let mut entries = body.chunks_exact(9).peekable();
    for tick in 0..ticks {
        while let Some(e) =
            entries.next_if(|e| u32::from_le_bytes([e[0], e[1], e[2], e[3]]) == tick)
        {
            let w = walkers.get_mut(usize::from(u16::from_le_bytes([e[4], e[5]])))?;
            match e[8] {
                LEFT => {
                    w.idle = true;
                    w.input = WalkInput::default();
                }
                JOINED => w.idle = false,
                _ => w.input = WalkInput::from_bytes(&e[6..9])?,
            }
        }
        step_walkers(&mut walkers, config.arena);
    }
    entries
        .next()
        .is_none()
        .then(|| walkers.iter().map(|w| w.at).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickforge_api::{EntityChange, Scopes};

    fn setup(seats: u16, record: bool) -> MatchSetup {
        MatchSetup {
            seats,
            tick_hz: 128,
            record,
            stagger: 0,
        }
    }

    fn step(g: &mut Walk, entities: &mut Entities, events: &mut Events) {
        let scopes = Scopes::new(std::time::Instant::now);
        let tick = tickforge_api::Tick(g.ticks());
        g.step(&mut StepContext {
            tick,
            scopes: &scopes,
            entities,
            events,
            grid: None,
        });
    }

    #[test]
    fn settings_are_checked_and_named() {
        let table = |json: &str| -> ConfigTable { serde_json::from_str(json).unwrap() };
        assert_eq!(
            Walk::configure(&table("{}")).unwrap(),
            WalkConfig::default()
        );
        let e = Walk::configure(&table(r#"{"ticks": 0}"#)).unwrap_err();
        assert_eq!(e.to_string(), "ticks: expected 1 to 10000000, got 0");
        let e = Walk::configure(&table(r#"{"tick": 5}"#)).unwrap_err();
        assert_eq!((e.key.as_str(), e.got.as_str()), ("tick", "an unknown key"));
        let e = Walk::configure(&table(r#"{"round_ticks": -1}"#)).unwrap_err();
        assert_eq!(e.to_string(), "round_ticks: expected 0 to 10000000, got -1");
    }

    #[test]
    fn rounds_last_round_ticks_and_none_without_them() {
        let config = Walk::configure(&serde_json::from_str(r#"{"round_ticks": 3}"#).unwrap());
        let config = config.unwrap();
        let mut entities = Entities::new(2);
        let mut events = Events::default();
        let mut g = Walk::new(&config, &setup(2, false), &mut entities);
        assert_eq!(g.round(), Some(1));
        let mut rounds = Vec::new();
        for _ in 0..7 {
            step(&mut g, &mut entities, &mut events);
            rounds.push(g.round().unwrap());
        }
        assert_eq!(rounds, [1, 1, 1, 2, 2, 2, 3]);
        let plain = Walk::new(
            &WalkConfig::default(),
            &setup(2, false),
            &mut Entities::new(2),
        );
        assert_eq!(plain.round(), None);
    }

    #[test]
    fn inputs_and_events_round_trip_and_refuse_anything_else() {
        let i = WalkInput {
            dx: -3,
            dy: 127,
            flags: WalkInput::MARK,
        };
        assert_eq!(WalkInput::from_bytes(&i.to_bytes()), Some(i));
        assert_eq!(WalkInput::from_bytes(&[0, 0, 2]), None);
        assert_eq!(WalkInput::from_bytes(&[0, 0]), None);
        for e in [
            WalkEvent::Beat { tick: 7 },
            WalkEvent::Joined { seat: 3, ticks: 9 },
            WalkEvent::Mark { seq: 5, tick: 1 },
            WalkEvent::Over { ticks: 2 },
        ] {
            let mut b = Vec::new();
            e.encode(&mut b);
            assert!(b.len() <= WalkEvent::MAX_BYTES);
            assert_eq!(WalkEvent::decode(&b), Some(e));
            b.push(0);
            assert_eq!(WalkEvent::decode(&b), None, "{e:?} with a byte too many");
        }
        assert_eq!(WalkEvent::decode(&[9, 0, 0, 0, 0]), None);
    }

    #[test]
    fn a_match_walks_marks_beats_ends_and_replays() {
        let config = WalkConfig {
            ticks: 10,
            every: 4,
            arena: 50,
            round_ticks: 0,
        };
        let mut entities = Entities::new(2);
        let mut events = Events::default();
        let mut g = Walk::new(&config, &setup(2, true), &mut entities);
        assert_eq!(
            entities.drain().count(),
            0,
            "spawned, written by the first step"
        );
        let go = WalkInput {
            dx: 20,
            dy: -1,
            flags: WalkInput::MARK,
        };
        g.apply_input(
            Seat(0),
            &go,
            InputInfo {
                seq: 42,
                ..Default::default()
            },
        );
        step(&mut g, &mut entities, &mut events);
        let got: Vec<_> = events
            .iter()
            .map(|(t, b)| (t, WalkEvent::decode(b).unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                (Target::Seat(Seat(0)), WalkEvent::Mark { seq: 42, tick: 0 }),
                (Target::All, WalkEvent::Beat { tick: 0 }),
            ]
        );
        let changes: Vec<_> = entities.drain().collect();
        assert!(
            matches!(changes[..], [EntityChange::Set { id: a, lanes, .. }, EntityChange::Set { id: b, .. }]
                if (a.0, b.0) == (0, 1) && lanes.0[..2] == [20, -1]),
            "{changes:?}"
        );
        step(&mut g, &mut entities, &mut events);
        let changes: Vec<_> = entities.drain().collect();
        assert!(
            matches!(changes[..], [EntityChange::Set { id, lanes, .. }] if id.0 == 0 && lanes.0[..2] == [40, -2]),
            "only what moved: {changes:?}"
        );
        events.clear();
        for _ in 2..5 {
            step(&mut g, &mut entities, &mut events);
        }
        g.leave(Seat(0));
        while !g.is_over() {
            step(&mut g, &mut entities, &mut events);
        }
        let beats = events
            .iter()
            .filter(|(_, b)| matches!(WalkEvent::decode(b), Some(WalkEvent::Beat { .. })))
            .count();
        assert_eq!(beats, 2, "ticks 4 and 8");
        assert_eq!(
            events.iter().last().map(|(t, b)| (t, WalkEvent::decode(b))),
            Some((Target::All, Some(WalkEvent::Over { ticks: 10 })))
        );
        assert_eq!(
            g.position(Seat(0)),
            Some([50, -5]),
            "clamped, then stopped by the leave"
        );
        let end = g.finish();
        let result = WalkResult::parse(&end.result).unwrap();
        assert_eq!(result.ticks, 10);
        assert_eq!(result.marks, 1);
        // Seat 1 starts at x = 100, inside the arena: 50.
        assert_eq!(result.positions, [[50, -5], [50, 0]]);
        let recording = end.recording.unwrap();
        assert_eq!(
            replay(&config, 2, &recording, 10),
            Some(result.positions.clone())
        );
        assert_ne!(
            replay(&config, 2, &recording, 3),
            Some(result.positions),
            "fewer ticks"
        );
    }
}
