//! Capture the flag, top-down: tickforge's second game, written only against the public
//! game boundary (`tickforge-api`).
//!
//! # The game
//!
//! A flat rectangular arena, `arena_w` × `arena_h` metres, origin at a corner. Two teams
//! by seat parity: even seats are team A, whose base is 4 m in from the low-x wall at
//! mid-height; odd seats team B, mirrored on the high-x side. A's half is `x < arena_w / 2`.
//! Each team has a flag, an entity of its own, that starts on its base.
//!
//! - Moving: the stick sets a wanted velocity (6 m/s at full stick, 5.4 m/s carrying a
//!   flag); the velocity turns toward it at 30 m/s² per second, fixed-step at the tick
//!   rate. Walls stop a player; players pass through each other.
//! - Pickup: a player touching (within 1 m) the enemy flag, at home or dropped, carries
//!   it; the flag's position is its carrier's.
//! - Tag: a player touching (within 1 m) an enemy carrier in the player's own half tags
//!   it: the carrier goes back to its spawn and drops the flag where it was tagged. A
//!   tagger can tag again after 3 s.
//! - Return: a player touching its own dropped flag returns it home; a flag away from
//!   home (carried or dropped) for `flag_return_s` returns by itself, which ends
//!   stand-offs where both flags are carried.
//! - Capture: a carrier within 2 m of its own base while its own flag is home scores one;
//!   the flag goes home.
//! - End: at `captures` captures by a team, or `time_limit_s`; more captures wins, equal
//!   is a draw.
//! - Only seats with a client play. Every player starts idle: its entity stands at its
//!   spawn (sent, with the idle bit set), it ignores its stick and touches nothing (no
//!   pickup, return or tag; a carrier passes right through it). [`Game::join`] brings a
//!   seat into play; one whose client left ([`Game::leave`]) is idle again, stands still
//!   and drops what it carried. The runtime joins each seated client when it sits down
//!   and again when the match starts over.
//!
//! Seats `0..seats` are entities `0..seats` (spawned first, in seat order); A's flag is
//! entity `seats`, B's `seats + 1`.
//!
//! # Input
//!
//! Three bytes ([`Input`]): `move_x: i8`, `move_y: i8` (the stick, ±127 full), `buttons:
//! u8` (bit 0 [`buttons::DROP`]: drop the carried flag). Any other length or button bit is
//! refused by [`Game::decode_input`].
//!
//! # Schema
//!
//! [`schema`]: `velocity xy` (pair, 1/64 m/s), `position xy` (pair, 1/64 m, predicted from
//! the velocity), `state` (byte: [`state`] bits — flag, team B, carrying, dropped, idle).
//! A carried flag has its carrier's velocity and position. [`encode_state`] and
//! [`decode_state`] convert an [`EntityState`] to and from its lanes.
//!
//! # Events
//!
//! [`Event`]: a kind byte and fixed fields, seats as `u16` little-endian — pickup, drop,
//! return, tag, capture and the end of the match go to all; the score goes to a joiner;
//! an emote is relayed to all.
//!
//! # Messages
//!
//! A client may send `[1, emote]`, emote `0..16`: relayed to all as [`Event::Emote`], at
//! most one a second per seat (one sent sooner is accepted and not relayed). Anything
//! else is [`Refused`].
//!
//! # Result line
//!
//! `ticks=T captures_a=A captures_b=B winner=a|b|draw end=captures|time players=N`, then
//! one `player=SEAT,TEAM,CAPTURES,TAGS` per seat in seat order (TEAM `a` or `b`).
//!
//! # Settings
//!
//! `[game]` keys, all optional integers: `captures` (1–255, default 3), `time_limit_s`
//! (1–3600, default 300), `arena_w` (20–200 m, default 48), `arena_h` (10–200 m, default
//! 24), `flag_return_s` (1–600, default 30).

pub mod bot;
mod wire;

use std::fmt::Write as _;

use serde::Deserialize;
use tickforge_api::{
    Category, ConfigError, ConfigTable, Entities, EntityId, Events, Game, InputInfo, Lanes,
    MatchEnd, MatchSetup, Position, ReadTable, Refused, Schema, Seat, StepContext, Target, View,
    Viewer,
};

pub use wire::{
    buttons, decode_state, encode_state, lane, schema, state, EntityState, Event, Input, Kind,
    Team, INPUT_BYTES, MAX_EVENT_BYTES,
};

/// Full-stick speed, m/s.
pub const SPEED: f32 = 6.0;
/// A carrier's speed, as a share of [`SPEED`].
pub const CARRY_SPEED: f32 = 0.9;
/// How fast velocity turns toward the stick's, m/s².
pub const ACCEL: f32 = 30.0;
/// Touch distance for pickups, returns and tags, m.
pub const TOUCH: f32 = 1.0;
/// A carrier this close to its base captures, m.
pub const BASE_RADIUS: f32 = 2.0;
/// A base's distance from its wall, m.
pub const BASE_INSET: f32 = 4.0;
const TAG_COOLDOWN_S: u32 = 3;

/// The game's settings ([`Game::configure`]); the crate documentation lists the keys.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CtfConfig {
    /// Captures that win.
    pub captures: u8,
    /// Seconds the match lasts at most.
    pub time_limit_s: u32,
    /// Arena size along x, m.
    pub arena_w: f32,
    /// Arena size along y, m.
    pub arena_h: f32,
    /// Seconds a flag stays away from home before it returns by itself.
    pub flag_return_s: u32,
}

impl Default for CtfConfig {
    fn default() -> Self {
        CtfConfig {
            captures: 3,
            time_limit_s: 300,
            arena_w: 48.0,
            arena_h: 24.0,
            flag_return_s: 30,
        }
    }
}

impl CtfConfig {
    /// Where `team`'s base (and flag's home) is.
    pub fn base(&self, team: Team) -> [f32; 2] {
        let x = match team {
            Team::A => BASE_INSET,
            Team::B => self.arena_w - BASE_INSET,
        };
        [x, self.arena_h / 2.0]
    }

    /// True when `position` is in `team`'s half.
    pub fn in_half(&self, team: Team, position: [f32; 2]) -> bool {
        (position[0] < self.arena_w / 2.0) == (team == Team::A)
    }

    /// Where `seat` starts, and goes back to when tagged: 2 m from its base toward the
    /// middle, its team spread 1.5 m apart along y.
    pub fn spawn(&self, seat: u16, seats: u16) -> [f32; 2] {
        let team = Team::of(seat);
        let in_team = (u32::from(seats) + 1 - team.index() as u32) / 2;
        let k = f32::from(seat / 2) - in_team.saturating_sub(1) as f32 / 2.0;
        let [bx, by] = self.base(team);
        let x = if team == Team::A { bx + 2.0 } else { bx - 2.0 };
        [x, (by + 1.5 * k).clamp(1.0, self.arena_h - 1.0)]
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    captures: Option<i64>,
    time_limit_s: Option<i64>,
    arena_w: Option<i64>,
    arena_h: Option<i64>,
    flag_return_s: Option<i64>,
}

fn ranged(key: &str, v: Option<i64>, lo: i64, hi: i64, default: i64) -> Result<i64, ConfigError> {
    match v {
        None => Ok(default),
        Some(v) if (lo..=hi).contains(&v) => Ok(v),
        Some(v) => Err(ConfigError::new(key, format!("{lo} to {hi}"), v)),
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum FlagAt {
    Home,
    Carried(u16),
    Dropped,
}

#[derive(Clone, Copy, Debug)]
struct Flag {
    id: EntityId,
    at: FlagAt,
    position: [f32; 2],
    /// The tick it left home.
    away_since: u32,
}

#[derive(Clone, Copy, Debug)]
struct Player {
    id: EntityId,
    team: Team,
    position: [f32; 2],
    velocity: [f32; 2],
    input: Input,
    idle: bool,
    carrying: bool,
    captures: u32,
    tags: u32,
    /// First tick it may tag again.
    tag_ready: u32,
    /// First tick it may pick a flag up again.
    pickup_ready: u32,
    /// First tick an emote of its seat is relayed again.
    emote_ready: u32,
}

/// One capture-the-flag match.
#[derive(Debug)]
pub struct Ctf {
    config: CtfConfig,
    dt: f32,
    tick_hz: u32,
    ticks: u32,
    limit: u32,
    players: Vec<Player>,
    flags: [Flag; 2],
    captures: [u8; 2],
    over: bool,
    /// The lanes last written for each entity: only changes are written.
    written: Vec<Lanes>,
}

fn dist2(a: [f32; 2], b: [f32; 2]) -> f32 {
    (a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)
}

impl Ctf {
    /// The match's settings.
    pub fn config(&self) -> &CtfConfig {
        &self.config
    }

    /// Ticks stepped.
    pub fn ticks(&self) -> u32 {
        self.ticks
    }

    /// Captures of team A and B.
    pub fn captures(&self) -> [u8; 2] {
        self.captures
    }

    /// Entity `index` (a network id) as the game last wrote it.
    pub fn state(&self, index: u16) -> Option<EntityState> {
        self.written.get(usize::from(index)).map(decode_state)
    }

    fn winner(&self) -> Option<Team> {
        let [a, b] = self.captures;
        (a != b).then_some(if a > b { Team::A } else { Team::B })
    }

    fn drop_flag(&mut self, seat: u16, at: [f32; 2], events: &mut Events) {
        let p = &mut self.players[usize::from(seat)];
        p.carrying = false;
        let flag = p.team.other();
        let f = &mut self.flags[flag.index()];
        f.at = FlagAt::Dropped;
        f.position = at;
        send(events, Event::Drop { flag, seat });
    }

    fn move_players(&mut self) {
        let (w, h, dt) = (self.config.arena_w, self.config.arena_h, self.dt);
        for p in &mut self.players {
            let speed = if p.carrying {
                SPEED * CARRY_SPEED
            } else {
                SPEED
            };
            let d = if p.idle {
                [0.0; 2]
            } else {
                p.input.direction()
            };
            let dv = [d[0] * speed - p.velocity[0], d[1] * speed - p.velocity[1]];
            let len = (dv[0] * dv[0] + dv[1] * dv[1]).sqrt();
            let k = if len > ACCEL * dt {
                ACCEL * dt / len
            } else {
                1.0
            };
            for (i, size) in [w, h].into_iter().enumerate() {
                p.velocity[i] += dv[i] * k;
                p.position[i] += p.velocity[i] * dt;
                if !(0.5..=size - 0.5).contains(&p.position[i]) {
                    p.position[i] = p.position[i].clamp(0.5, size - 0.5);
                    p.velocity[i] = 0.0;
                }
            }
        }
    }

    fn tags(&mut self, events: &mut Events) {
        let seats = self.players.len() as u16;
        for c in 0..seats {
            let carrier = self.players[usize::from(c)];
            if !carrier.carrying || !self.config.in_half(carrier.team.other(), carrier.position) {
                continue;
            }
            let tagger = (0..seats).find(|&t| {
                let p = &self.players[usize::from(t)];
                p.team != carrier.team
                    && !p.idle
                    && p.tag_ready <= self.ticks
                    && dist2(p.position, carrier.position) <= TOUCH * TOUCH
            });
            if let Some(t) = tagger {
                send(
                    events,
                    Event::Tag {
                        tagger: t,
                        tagged: c,
                    },
                );
                let tp = &mut self.players[usize::from(t)];
                tp.tags += 1;
                tp.tag_ready = self.ticks + TAG_COOLDOWN_S * self.tick_hz;
                self.drop_flag(c, carrier.position, events);
                let p = &mut self.players[usize::from(c)];
                p.position = self.config.spawn(c, seats);
                p.velocity = [0.0; 2];
            }
        }
    }

    fn touches(&mut self, events: &mut Events) {
        let return_ticks = self.config.flag_return_s * self.tick_hz;
        for team in [Team::A, Team::B] {
            let f = self.flags[team.index()];
            if let FlagAt::Carried(s) = f.at {
                self.flags[team.index()].position = self.players[usize::from(s)].position;
            } else {
                let toucher = self.players.iter().position(|p| {
                    !p.idle
                        && !p.carrying
                        && dist2(p.position, f.position) <= TOUCH * TOUCH
                        && (p.team == team && f.at == FlagAt::Dropped
                            || p.team != team && p.pickup_ready <= self.ticks)
                });
                if let Some(s) = toucher {
                    let seat = s as u16;
                    if self.players[s].team == team {
                        self.go_home(team, Some(seat), events);
                    } else {
                        self.players[s].carrying = true;
                        let f = &mut self.flags[team.index()];
                        if f.at == FlagAt::Home {
                            f.away_since = self.ticks;
                        }
                        f.at = FlagAt::Carried(seat);
                        f.position = self.players[s].position;
                        send(events, Event::Pickup { flag: team, seat });
                    }
                }
            }
            let f = self.flags[team.index()];
            if f.at != FlagAt::Home && self.ticks >= f.away_since + return_ticks {
                if let FlagAt::Carried(s) = f.at {
                    self.players[usize::from(s)].carrying = false;
                }
                self.go_home(team, None, events);
            }
        }
    }

    fn go_home(&mut self, team: Team, seat: Option<u16>, events: &mut Events) {
        let f = &mut self.flags[team.index()];
        f.at = FlagAt::Home;
        f.position = self.config.base(team);
        send(events, Event::Return { flag: team, seat });
    }

    fn captures_and_end(&mut self, events: &mut Events) {
        for team in [Team::A, Team::B] {
            let FlagAt::Carried(s) = self.flags[team.other().index()].at else {
                continue;
            };
            let p = &self.players[usize::from(s)];
            let base = self.config.base(team);
            if self.flags[team.index()].at != FlagAt::Home
                || dist2(p.position, base) > BASE_RADIUS * BASE_RADIUS
            {
                continue;
            }
            let p = &mut self.players[usize::from(s)];
            p.carrying = false;
            p.captures += 1;
            let f = &mut self.flags[team.other().index()];
            f.at = FlagAt::Home;
            f.position = self.config.base(team.other());
            let n = &mut self.captures[team.index()];
            *n = n.saturating_add(1);
            let [captures_a, captures_b] = self.captures;
            send(
                events,
                Event::Capture {
                    team,
                    seat: s,
                    captures_a,
                    captures_b,
                },
            );
            self.over |= self.captures[team.index()] >= self.config.captures;
        }
        self.ticks += 1;
        self.over |= self.ticks >= self.limit;
        if self.over {
            let [captures_a, captures_b] = self.captures;
            let winner = self.winner();
            send(
                events,
                Event::Over {
                    winner,
                    captures_a,
                    captures_b,
                },
            );
        }
    }

    /// Writes every entity whose lanes changed since last written.
    fn write_states(&mut self, entities: &mut Entities) {
        let n = self.players.len();
        for i in 0..n + 2 {
            let (id, s) = if i < n {
                let p = &self.players[i];
                let s = EntityState {
                    kind: Kind::Player,
                    team: p.team,
                    position: p.position,
                    velocity: p.velocity,
                    carrying: p.carrying,
                    dropped: false,
                    idle: p.idle,
                };
                (p.id, s)
            } else {
                let team = if i == n { Team::A } else { Team::B };
                let f = &self.flags[team.index()];
                let velocity = match f.at {
                    FlagAt::Carried(s) => self.players[usize::from(s)].velocity,
                    _ => [0.0; 2],
                };
                let s = EntityState {
                    kind: Kind::Flag,
                    team,
                    position: f.position,
                    velocity,
                    carrying: matches!(f.at, FlagAt::Carried(_)),
                    dropped: f.at == FlagAt::Dropped,
                    idle: true,
                };
                (f.id, s)
            };
            let lanes = encode_state(&s);
            if lanes != self.written[i] {
                self.written[i] = lanes;
                entities.set(id, Position::new(s.position[0], s.position[1], 0.0), &lanes);
            }
        }
    }
}

fn send(events: &mut Events, e: Event) {
    let (bytes, n) = e.to_bytes();
    events.send(Target::All, &bytes[..n]);
}

impl Game for Ctf {
    type Config = CtfConfig;
    type Input = Input;
    const NAME: &'static str = "ctf";
    const ABOUT: &'static str =
        "Top-down capture the flag: two teams, two flags, tag carriers in your half";

    fn schema() -> &'static Schema {
        wire::schema()
    }

    fn configure(table: &ConfigTable) -> Result<CtfConfig, ConfigError> {
        let t: Table = table.read()?;
        let d = CtfConfig::default();
        Ok(CtfConfig {
            captures: ranged("captures", t.captures, 1, 255, d.captures.into())? as u8,
            time_limit_s: ranged(
                "time_limit_s",
                t.time_limit_s,
                1,
                3600,
                d.time_limit_s.into(),
            )? as u32,
            arena_w: ranged("arena_w", t.arena_w, 20, 200, d.arena_w as i64)? as f32,
            arena_h: ranged("arena_h", t.arena_h, 10, 200, d.arena_h as i64)? as f32,
            flag_return_s: ranged(
                "flag_return_s",
                t.flag_return_s,
                1,
                600,
                d.flag_return_s.into(),
            )? as u32,
        })
    }

    fn settings(config: &CtfConfig) -> ConfigTable {
        let mut t = ConfigTable::new();
        t.insert("captures".into(), config.captures.into());
        t.insert("time_limit_s".into(), config.time_limit_s.into());
        t.insert("arena_w".into(), (config.arena_w as i64).into());
        t.insert("arena_h".into(), (config.arena_h as i64).into());
        t.insert("flag_return_s".into(), config.flag_return_s.into());
        t
    }

    fn max_entities(_: &CtfConfig, seats: u16) -> u16 {
        seats.saturating_add(2)
    }

    fn new(config: &CtfConfig, setup: &MatchSetup, entities: &mut Entities) -> Ctf {
        let seats = setup.seats;
        let tick_hz = setup.tick_hz.max(1);
        let players = (0..seats)
            .map(|s| Player {
                id: entities
                    .spawn()
                    .expect("max_entities reserves a player per seat"),
                team: Team::of(s),
                position: config.spawn(s, seats),
                velocity: [0.0; 2],
                input: Input::default(),
                // A seat plays once its client joins.
                idle: true,
                carrying: false,
                captures: 0,
                tags: 0,
                tag_ready: 0,
                pickup_ready: 0,
                emote_ready: 0,
            })
            .collect();
        let flags = [Team::A, Team::B].map(|team| Flag {
            id: entities.spawn().expect("max_entities reserves both flags"),
            at: FlagAt::Home,
            position: config.base(team),
            away_since: 0,
        });
        // Impossible lanes (the state byte is at most 31): the first write sends all.
        let mut unwritten = Lanes::ZERO;
        unwritten.0.fill(-1);
        let mut game = Ctf {
            config: *config,
            dt: 1.0 / tick_hz as f32,
            tick_hz,
            ticks: 0,
            limit: config.time_limit_s.saturating_mul(tick_hz),
            players,
            flags,
            captures: [0; 2],
            over: false,
            written: vec![unwritten; usize::from(seats) + 2],
        };
        game.write_states(entities);
        game
    }

    fn decode_input(bytes: &[u8]) -> Option<Input> {
        Input::from_bytes(bytes)
    }

    fn apply_input(&mut self, seat: Seat, input: &Input, _info: InputInfo) {
        if let Some(p) = self.players.get_mut(seat.index()) {
            p.input = *input;
        }
    }

    fn join(&mut self, seat: Seat, events: &mut Events) {
        if let Some(p) = self.players.get_mut(seat.index()) {
            p.idle = false;
        }
        let [captures_a, captures_b] = self.captures;
        let e = Event::Score {
            captures_a,
            captures_b,
            target: self.config.captures,
            ticks_left: self.limit.saturating_sub(self.ticks),
        };
        let (bytes, n) = e.to_bytes();
        events.send(Target::Seat(seat), &bytes[..n]);
    }

    fn leave(&mut self, seat: Seat) {
        if let Some(p) = self.players.get_mut(seat.index()) {
            p.idle = true;
            p.input = Input::default();
        }
    }

    fn message(&mut self, seat: Seat, bytes: &[u8], events: &mut Events) -> Result<(), Refused> {
        match *bytes {
            [1, emote] if emote < 16 => {
                // At most one relayed a second per seat: more are accepted, not relayed.
                let Some(p) = self.players.get_mut(seat.index()) else {
                    return Ok(());
                };
                if self.ticks >= p.emote_ready {
                    p.emote_ready = self.ticks + self.tick_hz;
                    send(
                        events,
                        Event::Emote {
                            seat: seat.0,
                            emote,
                        },
                    );
                }
                Ok(())
            }
            _ => Err(Refused("ctf messages are [1, emote < 16]")),
        }
    }

    fn step(&mut self, cx: &mut StepContext<'_>) {
        let _g = cx.scopes.scope(Category::Gameplay);
        if self.over {
            return;
        }
        self.move_players();
        for s in 0..self.players.len() as u16 {
            let p = self.players[usize::from(s)];
            if p.carrying && (p.idle || p.input.buttons & buttons::DROP != 0) {
                self.drop_flag(s, p.position, cx.events);
                self.players[usize::from(s)].pickup_ready = self.ticks + self.tick_hz;
            }
        }
        self.tags(cx.events);
        self.touches(cx.events);
        self.captures_and_end(cx.events);
        self.write_states(cx.entities);
    }

    fn view(&self, seat: Seat) -> View<'_> {
        let Some(p) = self.players.get(seat.index()) else {
            return View::default();
        };
        let [vx, vy] = p.velocity;
        let turn = vy.atan2(vx) / std::f32::consts::TAU;
        View {
            viewer: Viewer {
                position: Position::new(p.position[0], p.position[1], 0.0),
                yaw: (turn.rem_euclid(1.0) * 65536.0) as u32 as u16,
            },
            own: Some(p.id),
            visible: None,
        }
    }

    fn is_over(&self) -> bool {
        self.over
    }

    fn finish(&mut self) -> MatchEnd {
        let [a, b] = self.captures;
        let winner = self
            .winner()
            .map_or("draw", |t| if t == Team::A { "a" } else { "b" });
        let end = if a.max(b) >= self.config.captures {
            "captures"
        } else {
            "time"
        };
        let mut result = format!(
            "ticks={} captures_a={a} captures_b={b} winner={winner} end={end} players={}",
            self.ticks,
            self.players.len()
        );
        for (s, p) in self.players.iter().enumerate() {
            let team = p.team.letter();
            let _ = write!(result, " player={s},{team},{},{}", p.captures, p.tags);
        }
        MatchEnd {
            result,
            recording: None,
        }
    }
}
