//! Fog of war: which players each client may be told about, so that a wallhack has nothing to
//! draw.
//!
//! What it does: once per tick, [`Fow::update`] decides for every pair of enemies whether they
//! could see each other within the next [`FowConfig::lookahead`], and keeps the answer as one
//! bit row per viewer ([`Fow::row`]). The replication layer reads the rows and does not send a
//! player to a client whose bit is clear. Teammates, and the viewer itself, are always
//! visible. Dead players are not traced: a dead viewer sees what its living teammates see (it
//! spectates them), and a dead player is visible to enemies only when
//! [`FowConfig::dead_visible_to_enemies`] says so.
//!
//! What it does not do: view cones (a flick turns a client round within a tick, so only
//! walls hide), smoke, sound, or partial updates of a player; and it reads no clock. The
//! caller says what the tick is.
//!
//! In order of importance: an enemy that may come into sight before the next packets arrive
//! is already sent (no pop-in at 150 ms of latency); an enemy behind solid cover is not sent;
//! the same inputs give the same rows; a tick allocates nothing; the cost grows with the
//! enemy pairs near each other, not with the map.
//!
//! # The margin
//!
//! Each living player gets [`POINTS_PER_PLAYER`] sample points ([`Fow::points`]): its eye,
//! the eight corners of its hull where it stands, and the eight corners of its hull at the
//! four corners of the square it could reach within the horizon `H` = lookahead + the ticks
//! between two traces of a pair:
//!
//! ```text
//!   reach r = max(max_speed, horizontal speed) × H          the square's half side, metres
//!   lift    = highest the feet get within H by a jump         ballistic, stopped by a ceiling
//!             (or by the current upward speed)
//!   corner  = hull swept from the lifted feet towards          stops at walls, so the margin
//!             (±r, ±r), then dropped as far as a fall          does not leak through them
//!             within H would take it
//!   points  = eye; per corner where it stands: the hull's outer top and bottom corners
//!             (the bottom a sole's 10 cm up, off the floor); per reach corner: the outer top
//!             corner at the lifted height and the outer bottom corner where it lands
//! ```
//!
//! Two enemies see each other when some segment from a point of one to a point of the other
//! meets no box ([`Map::trace_ray`]). The points where a player stands are among its points
//! at any horizon, so the margin only ever shows more than plain line of sight (a longer
//! lookahead is not a superset of a shorter one: its reach corners lie elsewhere). The same
//! points stand for the
//! eye of the viewer (whose predicted view leads the server by its round trip) and for the
//! body of the target, so the verdict is symmetric: it is computed once per pair, tracing
//! from the lower slot's points to the higher slot's. With zero lookahead the reach corners
//! are the corners where the player stands: plain line of sight from the eye and the hull.
//!
//! The sweep is straight: a player who would have to turn a corner inside the horizon to be
//! seen is covered only as far as the straight sweeps reach. At 200 ms that is 1.6 m of
//! running, about half a doorway.
//!
//! # Cost
//!
//! Pairs whose feet are farther apart than [`FowConfig::max_view_distance_m`] (plus both
//! reaches) are never traced. A traced pair tries first the segment found clear at its last
//! trace, so a visible pair usually costs one ray. The boxes a viewer's traces hit are
//! remembered (the last eight) while its pairs are traced, and settle a hidden pair with as
//! few traces as they can:
//!
//! 1. one remembered box that blocks the segments between the corners of the boxes bounding
//!    the two players' points blocks every segment between them (what a box hides from a
//!    point is a convex set), and settles the pair;
//! 2. likewise one viewer point at a time against the target's bounding box;
//! 3. a remaining segment that a remembered box blocks is skipped; the rest are traced
//!    through the map's grid.
//!
//! The shortcuts test boxes shrunk by 1 cm, so they only skip segments the trace would find
//! blocked: the verdict is exactly [`Map::trace_ray`]'s over the sample points, which the
//! tests check against brute force.
//!
//! [`FowConfig::trace_every_ticks`] = K above one traces each pair every K ticks in a fixed
//! rotation, and grows the horizon by K − 1 ticks so the reach covers the gap; a pair is
//! traced at once when it comes into range and when either player respawns, teleports or
//! changes team. A staggered verdict is not a superset of plain sight, though: the points of
//! an earlier tick do not include the hull's corners now, so a pair may stay hidden for up to
//! K − 1 ticks after it comes into plain sight (24 of 152,000 visible enemy pair-ticks in two
//! minutes of scripted arena play at K = 4, each under 24 ms). The default is every tick.

use std::num::NonZeroU8;
use std::time::Duration;

use tickforge_telemetry::{Category, Scopes};

use crate::map::{Aabb, Map};
use crate::math::Vec3;
use crate::movement::{MovementParams, PlayerState};
use crate::rules::Team;
use crate::{PlayerSlot, Tick};

/// Sample points per living player: the eye, the hull's corners where it stands and at the
/// edge of its reach ([`Fow::points`]).
pub const POINTS_PER_PLAYER: usize = 17;
/// Segments between two players' points.
const SEGMENTS_PER_PAIR: usize = POINTS_PER_PLAYER * POINTS_PER_PLAYER;
/// Most players a [`Fow`] tracks: a [`PlayerSlot`] is a `u8`.
pub const MAX_PLAYERS: usize = 256;

/// Boxes remembered as blockers while one viewer's pairs are traced.
const OCCLUDER_CACHE: usize = 8;
/// A player who moved farther than its speed allows in this many ticks since the last update
/// was moved by the game (a respawn), not by running: its pairs are traced at once.
const TELEPORT_TICKS: f32 = 2.0;
/// Slack on the teleport test for rounding and step-ups, metres.
const TELEPORT_SLACK_M: f32 = 0.5;
/// How far a box is shrunk for the shortcut tests that skip traces, metres: ten times f32's
/// step at the largest map coordinate (1 mm at 10 km), so rounding never decides; a segment
/// that only grazes a box within this of its faces is traced instead.
const SHORTCUT_SLACK_M: f32 = 0.01;
/// The four horizontal corner directions, in the order their points are stored.
const CORNERS: [(f32, f32); 4] = [(-1.0, -1.0), (1.0, -1.0), (-1.0, 1.0), (1.0, 1.0)];
/// Height of the lower sample points above the hull's bottom, metres: a sole's thickness, so
/// that segments to them do not skim the floor the player stands on.
const SOLE_M: f32 = 0.1;
const UP: Vec3 = Vec3::new(0.0, 0.0, 1.0);

/// Fog-of-war tuning; fixed for the life of a [`Fow`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FowConfig {
    /// Enemies whose feet are farther apart than this, plus both reaches, are never visible,
    /// metres.
    pub max_view_distance_m: f32,
    /// Eye height above the feet, metres.
    pub eye_height_m: f32,
    /// How far ahead a verdict must hold: an enemy that may come into sight within this time
    /// is visible now.
    pub lookahead: Duration,
    /// Each enemy pair is traced every this many ticks; the horizon grows by one tick less to
    /// cover the gap.
    pub trace_every_ticks: NonZeroU8,
    /// Dead players are visible to enemies too; otherwise only to their team. Dead players
    /// are never traced.
    pub dead_visible_to_enemies: bool,
    /// Ticks per second, to turn ticks into time.
    pub tick_hz: u32,
    /// Speeds, jump, gravity and the hull the sample points are taken on.
    pub movement: MovementParams,
}

impl Default for FowConfig {
    fn default() -> Self {
        FowConfig {
            // A 0.8 m player 300 m away spans 0.15°, under 3 pixels of a 1080p screen at
            // VALORANT's 103° field of view: nothing to aim at.
            max_view_distance_m: 300.0,
            // Quake III's DEFAULT_VIEWHEIGHT: 50 of the player box's 56 units above the feet,
            // scaled to our 1.8 m box.
            eye_height_m: 1.6,
            // A client's predicted view leads the server by its round trip (150 ms, the most
            // the hit-registration target plans for); 50 ms more covers the client's
            // interpolation buffer and jitter.
            lookahead: Duration::from_millis(200),
            // Every tick: about 50 µs for 10 players on the arena, all hidden at their spawns
            // (2% of VALORANT's 2.34 ms frame budget), and the verdict always holds plain
            // sight; 4 costs a third of that and may lag plain sight by up to 3 ticks.
            trace_every_ticks: NonZeroU8::MIN,
            // A dead player's spot is no longer play; its death reaches clients as an event.
            dead_visible_to_enemies: false,
            tick_hz: 128, // VALORANT's tick: 7.8125 ms
            movement: MovementParams::default(),
        }
    }
}

/// How far a player could get within a horizon ([`Fow::reach`]), metres.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reach {
    /// Half the side of the square the feet could reach, centred on them.
    pub horizontal_m: f32,
    /// How high the feet could rise (a jump, or the current upward speed).
    pub rise_m: f32,
    /// How far the feet could fall (walking off a ledge, or the current fall).
    pub drop_m: f32,
}

impl Reach {
    /// Where `state` could get within `horizon_s` seconds under `params`, in free space.
    pub fn of(state: &PlayerState, params: &MovementParams, horizon_s: f32) -> Reach {
        let t = horizon_s.max(0.0);
        let g = params.gravity;
        let speed = params.max_speed.max(state.velocity.horizontal_length());
        // The highest point of v·t − g·t²/2 for t in 0..=H, jumping when on the ground.
        let up = if state.on_ground {
            params.jump_speed.max(state.velocity.z)
        } else {
            state.velocity.z
        };
        let rise_m = if up <= 0.0 {
            0.0
        } else if g > 0.0 {
            let apex_t = (up / g).min(t);
            up * apex_t - 0.5 * g * apex_t * apex_t
        } else {
            up * t
        };
        // The lowest point is at an end of the parabola; on the ground, a step off a ledge.
        let down = if state.on_ground {
            0.0
        } else {
            state.velocity.z
        };
        let drop_m = (-(down * t - 0.5 * g * t * t)).max(0.0);
        Reach {
            horizontal_m: speed * t,
            rise_m,
            drop_m,
        }
    }
}

/// What the last [`Fow::update`] did: for benches and the telemetry notes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FowStats {
    /// Living enemy pairs within view distance.
    pub pairs_in_range: u32,
    /// Of those, pairs traced this tick.
    pub pairs_traced: u32,
    /// Segments between sample points looked at.
    pub segments: u32,
    /// Segments no remembered blocker stopped, traced through the map's grid.
    pub rays: u32,
    /// Hidden pairs settled by one remembered box between the two players' points, without
    /// testing their segments one by one.
    pub pairs_walled_off: u32,
    /// Of the pairs traced, those found visible.
    pub pairs_visible: u32,
}

/// What a player was at the last update, to spot respawns, teleports and team changes.
#[derive(Clone, Copy, Debug)]
struct Last {
    origin: Vec3,
    speed: f32,
    alive: bool,
    team: Team,
}

/// The visibility matrix of one match: a bit row per viewer, recomputed by [`Fow::update`]
/// each tick. Allocates at [`Fow::new`] only.
#[derive(Clone, Debug)]
pub struct Fow {
    config: FowConfig,
    players: usize,
    /// `u64` words in a row.
    words: usize,
    /// Lookahead plus the stagger gap, seconds.
    horizon_s: f32,
    /// [`POINTS_PER_PLAYER`] points a player, by slot; meaningful for living players.
    points: Vec<Vec3>,
    /// Horizontal reach of each player this tick, metres.
    reach_m: Vec<f32>,
    /// The box bounding each player's points.
    bounds: Vec<Aabb>,
    /// For each pair (row: lower slot), the segment found clear at its last trace, tried
    /// first next time: index `a * POINTS_PER_PLAYER + b`.
    witness: Vec<u16>,
    /// Enemy line of sight, symmetric: bit j of row i.
    los: Vec<u64>,
    /// Enemy pairs within view distance at the last update, symmetric.
    in_range: Vec<u64>,
    /// The output: bit j of row i is set when i may be sent j.
    visible: Vec<u64>,
    /// Members of each team, attackers first.
    team_rows: Vec<u64>,
    /// Living players.
    alive_row: Vec<u64>,
    /// Players whose pairs are traced this tick whatever the rotation says.
    dirty_row: Vec<u64>,
    last: Vec<Last>,
    primed: bool,
    stats: FowStats,
}

impl Fow {
    /// The fog for a match of `players` slots; every player sees only itself until the first
    /// [`Fow::update`].
    ///
    /// # Panics
    /// If `players` is above [`MAX_PLAYERS`].
    pub fn new(config: FowConfig, players: usize) -> Fow {
        assert!(players <= MAX_PLAYERS, "more players than slots");
        let words = players.div_ceil(64);
        let gap_ticks = f32::from(config.trace_every_ticks.get() - 1);
        let horizon_s = config.lookahead.as_secs_f32() + gap_ticks / config.tick_hz.max(1) as f32;
        let mut visible = vec![0; players * words];
        for i in 0..players {
            set_bit(&mut visible[i * words..(i + 1) * words], i);
        }
        Fow {
            config,
            players,
            words,
            horizon_s,
            points: vec![Vec3::ZERO; players * POINTS_PER_PLAYER],
            reach_m: vec![0.0; players],
            bounds: vec![
                Aabb {
                    min: Vec3::ZERO,
                    max: Vec3::ZERO,
                };
                players
            ],
            witness: vec![0; players * players],
            los: vec![0; players * words],
            in_range: vec![0; players * words],
            visible,
            team_rows: vec![0; 2 * words],
            alive_row: vec![0; words],
            dirty_row: vec![0; words],
            last: vec![
                Last {
                    origin: Vec3::ZERO,
                    speed: 0.0,
                    alive: false,
                    team: Team::Attackers,
                };
                players
            ],
            primed: false,
            stats: FowStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &FowConfig {
        &self.config
    }

    /// Player slots tracked.
    pub fn player_count(&self) -> usize {
        self.players
    }

    /// How far ahead the verdicts hold: the lookahead plus the ticks between two traces of a
    /// pair, seconds.
    pub fn horizon_s(&self) -> f32 {
        self.horizon_s
    }

    /// How far `state` could get within [`Fow::horizon_s`], in free space.
    pub fn reach(&self, state: &PlayerState) -> Reach {
        Reach::of(state, &self.config.movement, self.horizon_s)
    }

    /// Recomputes the matrix for tick `tick` from each slot's movement state, team and
    /// liveness, charged to [`Category::Fow`]. Call once per tick after movement, before
    /// replication reads the rows; ticks need only increase for the rotation of
    /// [`FowConfig::trace_every_ticks`] to stay even. Allocates nothing.
    ///
    /// # Panics
    /// If `players`, `teams` or `alive` does not hold [`Fow::player_count`] entries.
    pub fn update(
        &mut self,
        players: &[PlayerState],
        teams: &[Team],
        alive: &[bool],
        map: &Map,
        tick: Tick,
        scopes: &Scopes,
    ) {
        let n = self.players;
        assert!(
            players.len() == n && teams.len() == n && alive.len() == n,
            "fow tracks {n} players; given {}, {} teams, {} liveness",
            players.len(),
            teams.len(),
            alive.len()
        );
        let _fow = scopes.scope(Category::Fow);
        self.stats = FowStats::default();
        self.sample_players(players, teams, alive, map);
        self.trace_pairs(players, teams, alive, map, tick);
        self.build_rows(teams, alive);
        self.primed = true;
    }

    /// True when `viewer` may be sent `target` after the last update. False for slots out of
    /// range.
    pub fn is_visible(&self, viewer: PlayerSlot, target: PlayerSlot) -> bool {
        let (i, j) = (usize::from(viewer.0), usize::from(target.0));
        i < self.players && j < self.players && get_bit(self.row_of(&self.visible, i), j)
    }

    /// The row of `viewer`: bit `j % 64` of word `j / 64` is set when `viewer` may be sent
    /// slot `j`. Bits past the last slot are clear; empty for a slot out of range.
    pub fn row(&self, viewer: PlayerSlot) -> &[u64] {
        let i = usize::from(viewer.0);
        if i < self.players {
            self.row_of(&self.visible, i)
        } else {
            &[]
        }
    }

    /// The slots `viewer` may be sent, in ascending order.
    pub fn visible_to(&self, viewer: PlayerSlot) -> impl Iterator<Item = PlayerSlot> + '_ {
        self.row(viewer)
            .iter()
            .enumerate()
            // At most MAX_PLAYERS slots: an index fits a u8.
            .flat_map(|(w, &word)| BitIter(word).map(move |b| PlayerSlot((w * 64 + b) as u8)))
    }

    /// The sample points of `slot` at the last update, eye first: the segments between two
    /// players' points are what [`Fow::update`] traced. Empty for a dead player or a slot out
    /// of range.
    pub fn points(&self, slot: PlayerSlot) -> &[Vec3] {
        let i = usize::from(slot.0);
        if i < self.players && get_bit(&self.alive_row, i) {
            &self.points[i * POINTS_PER_PLAYER..(i + 1) * POINTS_PER_PLAYER]
        } else {
            &[]
        }
    }

    /// What the last update did.
    pub fn stats(&self) -> FowStats {
        self.stats
    }

    fn row_of<'a>(&self, m: &'a [u64], i: usize) -> &'a [u64] {
        &m[i * self.words..(i + 1) * self.words]
    }

    /// Team and liveness rows, the players to retrace at once, and each living player's
    /// reach and sample points.
    fn sample_players(
        &mut self,
        players: &[PlayerState],
        teams: &[Team],
        alive: &[bool],
        map: &Map,
    ) {
        self.team_rows.fill(0);
        self.alive_row.fill(0);
        self.dirty_row.fill(0);
        let dt = 1.0 / self.config.tick_hz.max(1) as f32;
        let params = self.config.movement;
        for (i, state) in players.iter().enumerate() {
            let team_row = team_index(teams[i]) * self.words;
            set_bit(&mut self.team_rows[team_row..team_row + self.words], i);
            let speed = state.velocity.length();
            let last = self.last[i];
            let ran_m = params.max_speed.max(speed).max(last.speed) * dt * TELEPORT_TICKS;
            let moved_m = (state.origin - last.origin).length();
            let jumped = moved_m.is_nan() || moved_m > ran_m + TELEPORT_SLACK_M;
            if !self.primed || last.alive != alive[i] || last.team != teams[i] || jumped {
                set_bit(&mut self.dirty_row, i);
            }
            self.last[i] = Last {
                origin: state.origin,
                speed,
                alive: alive[i],
                team: teams[i],
            };
            if !alive[i] {
                continue;
            }
            set_bit(&mut self.alive_row, i);
            let reach = Reach::of(state, &params, self.horizon_s);
            self.reach_m[i] = reach.horizontal_m;
            let out = &mut self.points[i * POINTS_PER_PLAYER..(i + 1) * POINTS_PER_PLAYER];
            sample_points(state, reach, &self.config, map, out);
            self.bounds[i] = out.iter().fold(
                Aabb {
                    min: out[0],
                    max: out[0],
                },
                |b, &p| Aabb {
                    min: b.min.min(p),
                    max: b.max.max(p),
                },
            );
        }
    }

    /// Decides line of sight for the living enemy pairs in range that are due this tick.
    fn trace_pairs(
        &mut self,
        players: &[PlayerState],
        teams: &[Team],
        alive: &[bool],
        map: &Map,
        tick: Tick,
    ) {
        let n = self.players;
        let every = u32::from(self.config.trace_every_ticks.get());
        let max_view_m = self.config.max_view_distance_m;
        // Ordinal of each enemy pair in a fixed order, whatever their range or liveness: the
        // rotation spreads pairs evenly over the K ticks. (Slot parity would not: with
        // attackers on even slots every enemy pair has an odd slot sum.)
        let mut ordinal = 0u32;
        for i in 0..n {
            let mut occluders = Occluders::default();
            for j in i + 1..n {
                if teams[i] == teams[j] {
                    continue;
                }
                let rotation = ordinal;
                ordinal = ordinal.wrapping_add(1);
                let range_m = max_view_m + self.reach_m[i] + self.reach_m[j];
                let gap = players[j].origin - players[i].origin;
                let in_range = alive[i] && alive[j] && gap.dot(gap) <= range_m * range_m;
                let was_in_range = get_bit(self.row_of(&self.in_range, i), j);
                self.set_pair(Matrix::InRange, i, j, in_range);
                if !in_range {
                    self.set_pair(Matrix::Los, i, j, false);
                    continue;
                }
                self.stats.pairs_in_range += 1;
                let due = !was_in_range
                    || get_bit(&self.dirty_row, i)
                    || get_bit(&self.dirty_row, j)
                    || tick.0.wrapping_add(rotation).is_multiple_of(every);
                if !due {
                    continue;
                }
                self.stats.pairs_traced += 1;
                let pair = Pair {
                    a: &self.points[i * POINTS_PER_PLAYER..(i + 1) * POINTS_PER_PLAYER],
                    b: &self.points[j * POINTS_PER_PLAYER..(j + 1) * POINTS_PER_PLAYER],
                    a_bounds: &self.bounds[i],
                    b_bounds: &self.bounds[j],
                };
                let witness = &mut self.witness[i * n + j];
                let seen = pair.line_of_sight(map, witness, &mut occluders, &mut self.stats);
                self.stats.pairs_visible += u32::from(seen);
                self.set_pair(Matrix::Los, i, j, seen);
            }
        }
    }

    /// Builds each viewer's row: its team, the enemies it sees, and dead enemies if the
    /// config sends them. A dead viewer spectates: it sees what its living teammates see, and
    /// nothing more.
    fn build_rows(&mut self, teams: &[Team], alive: &[bool]) {
        let w = self.words;
        for i in 0..self.players {
            let own = team_index(teams[i]) * w;
            let other = team_index(teams[i].other()) * w;
            for k in 0..w {
                let mut word = self.team_rows[own + k];
                if self.config.dead_visible_to_enemies {
                    word |= self.team_rows[other + k] & !self.alive_row[k];
                }
                if alive[i] {
                    word |= self.los[i * w + k];
                }
                self.visible[i * w + k] = word;
            }
            if alive[i] {
                continue;
            }
            for mw in 0..w {
                for b in BitIter(self.team_rows[own + mw] & self.alive_row[mw]) {
                    let mate = mw * 64 + b;
                    for k in 0..w {
                        self.visible[i * w + k] |= self.los[mate * w + k];
                    }
                }
            }
        }
    }

    fn set_pair(&mut self, which: Matrix, i: usize, j: usize, on: bool) {
        let w = self.words;
        let m = match which {
            Matrix::Los => &mut self.los,
            Matrix::InRange => &mut self.in_range,
        };
        put_bit(&mut m[i * w..(i + 1) * w], j, on);
        put_bit(&mut m[j * w..(j + 1) * w], i, on);
    }
}

#[derive(Clone, Copy)]
enum Matrix {
    Los,
    InRange,
}

/// The set bits of a word, lowest first.
struct BitIter(u64);

impl Iterator for BitIter {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let b = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(b)
    }
}

fn team_index(team: Team) -> usize {
    match team {
        Team::Attackers => 0,
        Team::Defenders => 1,
    }
}

fn get_bit(row: &[u64], j: usize) -> bool {
    row[j / 64] & (1 << (j % 64)) != 0
}

fn set_bit(row: &mut [u64], j: usize) {
    row[j / 64] |= 1 << (j % 64);
}

fn put_bit(row: &mut [u64], j: usize, on: bool) {
    if on {
        row[j / 64] |= 1 << (j % 64);
    } else {
        row[j / 64] &= !(1 << (j % 64));
    }
}

/// Fills `out` with the eye of `state`, its hull's corners, and its hull's corners at the
/// four corners of the square it could reach (the module docs draw the model).
fn sample_points(
    state: &PlayerState,
    reach: Reach,
    config: &FowConfig,
    map: &Map,
    out: &mut [Vec3],
) {
    debug_assert_eq!(out.len(), POINTS_PER_PLAYER);
    let hull = config.movement.hull();
    let feet = state.origin;
    let top = UP * hull.height;
    let sole = UP * SOLE_M;
    out[0] = feet + UP * config.eye_height_m;
    let lifted = map.trace_hull(feet, feet + UP * reach.rise_m, hull).end;
    let fall_m = (lifted.z - feet.z) + reach.drop_m;
    let (r, w) = (reach.horizontal_m, hull.half_width);
    for (k, &(sx, sy)) in CORNERS.iter().enumerate() {
        // The hull's outer corner towards (sx, sy): a skin off any wall a sweep stopped at.
        let corner = Vec3::new(sx * w, sy * w, 0.0);
        out[1 + 2 * k] = feet + corner + top;
        out[2 + 2 * k] = feet + corner + sole;
        let side = map
            .trace_hull(lifted, lifted + Vec3::new(sx * r, sy * r, 0.0), hull)
            .end;
        let landed = map.trace_hull(side, side - UP * fall_m, hull).end;
        out[9 + 2 * k] = side + corner + top;
        out[10 + 2 * k] = landed + corner + sole;
    }
}

/// The points of two players, the lower slot's first, and the boxes bounding them.
struct Pair<'a> {
    a: &'a [Vec3],
    b: &'a [Vec3],
    a_bounds: &'a Aabb,
    b_bounds: &'a Aabb,
}

impl Pair<'_> {
    /// True when some segment from a point of `a` to a point of `b` meets no box. Tries the
    /// segment `witness` first and leaves there the clear segment found.
    ///
    /// The shortcuts only ever skip segments that a remembered box blocks (in the
    /// conservative test of [`Span::crosses`]); every clear verdict is a [`Map::trace_ray`]
    /// that met nothing, so the answer is the trace's.
    fn line_of_sight(
        &self,
        map: &Map,
        witness: &mut u16,
        occluders: &mut Occluders,
        stats: &mut FowStats,
    ) -> bool {
        let first = usize::from(*witness) % SEGMENTS_PER_PAIR;
        if self.is_clear(map, first, occluders, stats) {
            return true;
        }
        let b_corners = corners(self.b_bounds);
        if occluders.hide_box(&corners(self.a_bounds), &b_corners) {
            stats.pairs_walled_off += 1;
            return false;
        }
        for (i, &from) in self.a.iter().enumerate() {
            if occluders.hide_box(&[from], &b_corners) {
                continue;
            }
            for j in 0..POINTS_PER_PLAYER {
                let s = i * POINTS_PER_PLAYER + j;
                if s != first && self.is_clear(map, s, occluders, stats) {
                    // Below SEGMENTS_PER_PAIR, which fits a u16.
                    *witness = s as u16;
                    return true;
                }
            }
        }
        false
    }

    /// True when segment `s` (point `s / POINTS_PER_PLAYER` of `a` to point
    /// `s % POINTS_PER_PLAYER` of `b`) meets no box; a box it meets is remembered.
    fn is_clear(
        &self,
        map: &Map,
        s: usize,
        occluders: &mut Occluders,
        stats: &mut FowStats,
    ) -> bool {
        let (from, to) = (self.a[s / POINTS_PER_PLAYER], self.b[s % POINTS_PER_PLAYER]);
        stats.segments += 1;
        if occluders.block(&Span::new(from, to)) {
            return false;
        }
        stats.rays += 1;
        let d = to - from;
        match map.trace_ray(from, d, d.length()) {
            Some(hit) => {
                occluders.remember(hit.box_index, &map.boxes()[hit.box_index]);
                false
            }
            None => true,
        }
    }
}

/// The eight corners of `b`.
fn corners(b: &Aabb) -> [Vec3; 8] {
    std::array::from_fn(|k| {
        Vec3::new(
            if k & 1 == 0 { b.min.x } else { b.max.x },
            if k & 2 == 0 { b.min.y } else { b.max.y },
            if k & 4 == 0 { b.min.z } else { b.max.z },
        )
    })
}

/// A segment for the shortcut tests, parametrised from 0 at its start to 1 at its end.
struct Span {
    origin: [f32; 3],
    /// 1 / (end − start) per axis; infinite along an axis the segment does not move on.
    inverse: [f32; 3],
}

impl Span {
    fn new(from: Vec3, to: Vec3) -> Span {
        let d = to - from;
        Span {
            origin: from.to_array(),
            inverse: [1.0 / d.x, 1.0 / d.y, 1.0 / d.z],
        }
    }

    /// The slab test against a box already shrunk by [`SHORTCUT_SLACK_M`]: true when the
    /// segment passes through its interior. A segment that does so passes through the box
    /// itself, and [`Map::trace_ray`] reports a hit, whatever rounding does.
    fn crosses(&self, shrunk: &Aabb) -> bool {
        let (lo, hi) = (shrunk.min.to_array(), shrunk.max.to_array());
        let (mut near, mut far) = (0.0_f32, 1.0_f32);
        for axis in 0..3 {
            let (o, inv) = (self.origin[axis], self.inverse[axis]);
            if inv.is_infinite() {
                // Parallel to this slab (or too nearly to tell): inside it or never.
                if o <= lo[axis] || o >= hi[axis] {
                    return false;
                }
                continue;
            }
            let t1 = (lo[axis] - o) * inv;
            let t2 = (hi[axis] - o) * inv;
            near = near.max(t1.min(t2));
            far = far.min(t1.max(t2));
        }
        near < far
    }
}

/// Boxes that blocked recent segments of one viewer, shrunk for [`Span::crosses`]: the wall
/// that hides one corner of an enemy usually hides the rest of it, and the viewer's other
/// enemies behind it.
#[derive(Default)]
struct Occluders {
    /// Indices in [`Map::boxes`], to remember each box once.
    index: [u32; OCCLUDER_CACHE],
    shrunk: [Option<Aabb>; OCCLUDER_CACHE],
    len: usize,
    /// Where the next box goes once full: the oldest is replaced.
    next: usize,
}

impl Occluders {
    /// True when a remembered box blocks `span`; that box moves one place forward, so the
    /// walls that hide most are tried first.
    fn block(&mut self, span: &Span) -> bool {
        let Some(k) = self.shrunk[..self.len]
            .iter()
            .position(|b| b.as_ref().is_some_and(|b| span.crosses(b)))
        else {
            return false;
        };
        if k > 0 {
            self.shrunk.swap(k - 1, k);
            self.index.swap(k - 1, k);
        }
        true
    }

    /// True when one remembered box blocks every segment from the box with corners `from`
    /// (or from a single point) to the box with corners `to`. The points behind a box as
    /// seen from a point form a convex set, so blocking the segments between corners blocks
    /// all segments between the two boxes.
    fn hide_box(&self, from: &[Vec3], to: &[Vec3; 8]) -> bool {
        self.shrunk[..self.len].iter().flatten().any(|b| {
            from.iter()
                .all(|&p| to.iter().all(|&q| Span::new(p, q).crosses(b)))
        })
    }

    fn remember(&mut self, index: usize, b: &Aabb) {
        // Box indices are below the map's limit, far inside u32.
        let index = index as u32;
        if self.index[..self.len].contains(&index) {
            return;
        }
        let slack = Vec3::new(SHORTCUT_SLACK_M, SHORTCUT_SLACK_M, SHORTCUT_SLACK_M);
        let (min, max) = (b.min + slack, b.max - slack);
        // Too thin to shrink: remembered, so not traced again for it, but never a shortcut.
        let shrunk = (min.x < max.x && min.y < max.y && min.z < max.z).then_some(Aabb { min, max });
        let k = if self.len < OCCLUDER_CACHE {
            self.len += 1;
            self.len - 1
        } else {
            let k = self.next;
            self.next = (self.next + 1) % OCCLUDER_CACHE;
            k
        };
        self.index[k] = index;
        self.shrunk[k] = shrunk;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BuiltinMap;
    use proptest::prelude::*;

    #[test]
    fn a_standing_player_reaches_a_run_and_a_jump() {
        let p = MovementParams::default();
        let standing = PlayerState {
            on_ground: true,
            ..Default::default()
        };
        let r = Reach::of(&standing, &p, 0.2);
        assert!((r.horizontal_m - p.max_speed * 0.2).abs() < 1e-6);
        // v·t − g·t²/2 at 0.2 s, before the apex at 0.34 s.
        let want = p.jump_speed * 0.2 - 0.5 * p.gravity * 0.04;
        assert!((r.rise_m - want).abs() < 1e-5, "{r:?}");
        // Or a step off a ledge: a fall from rest.
        assert!((r.drop_m - 0.5 * p.gravity * 0.04).abs() < 1e-5, "{r:?}");
        // A long horizon stops at the apex: v²/2g.
        let apex = p.jump_speed * p.jump_speed / (2.0 * p.gravity);
        assert!((Reach::of(&standing, &p, 2.0).rise_m - apex).abs() < 1e-4);
        // No horizon, no reach.
        assert_eq!(Reach::of(&standing, &p, 0.0), Reach::default());
    }

    #[test]
    fn a_falling_player_reaches_down_and_a_fast_one_farther() {
        let p = MovementParams::default();
        let falling = PlayerState {
            velocity: Vec3::new(12.0, 0.0, -3.0),
            ..Default::default()
        };
        let r = Reach::of(&falling, &p, 0.1);
        assert_eq!(r.rise_m, 0.0);
        assert!(
            (r.drop_m - (0.3 + 0.5 * p.gravity * 0.01)).abs() < 1e-5,
            "{r:?}"
        );
        assert!((r.horizontal_m - 1.2).abs() < 1e-5);
    }

    #[test]
    fn with_no_lookahead_the_points_are_the_eye_and_the_hull_corners_a_sole_up() {
        let map = BuiltinMap::Arena.load();
        let config = FowConfig {
            lookahead: Duration::ZERO,
            ..FowConfig::default()
        };
        let state = PlayerState {
            origin: Vec3::new(5.0, 3.0, crate::map::SKIN_M),
            on_ground: true,
            ..Default::default()
        };
        let mut out = [Vec3::ZERO; POINTS_PER_PLAYER];
        sample_points(&state, Reach::default(), &config, &map, &mut out);
        assert_eq!(out[0], state.origin + UP * 1.6);
        let body = config.movement.hull().at(state.origin);
        for p in &out[1..] {
            assert!(p.x == body.min.x || p.x == body.max.x, "{p:?}");
            assert!(p.y == body.min.y || p.y == body.max.y, "{p:?}");
            assert!(p.z == body.min.z + SOLE_M || p.z == body.max.z, "{p:?}");
        }
    }

    #[test]
    fn occluders_keep_the_newest_boxes_and_never_shrink_a_thin_one() {
        let mut o = Occluders::default();
        let unit = |i: usize| Aabb {
            min: Vec3::new(i as f32, 0.0, 0.0),
            max: Vec3::new(i as f32 + 0.5, 1.0, 1.0),
        };
        for i in 0..OCCLUDER_CACHE + 3 {
            o.remember(i, &unit(i));
            o.remember(i, &unit(i));
        }
        assert_eq!(o.len, OCCLUDER_CACHE);
        assert!(o.index.contains(&(OCCLUDER_CACHE as u32 + 2)));
        assert!(!o.index.contains(&0));
        let sheet = Aabb {
            min: Vec3::ZERO,
            max: Vec3::new(5.0, 0.015, 5.0),
        };
        o.remember(100, &sheet);
        assert!(o.index.contains(&100));
        assert!(o.shrunk.iter().any(Option::is_none));
    }

    fn shrunk(b: &Aabb) -> Aabb {
        let slack = Vec3::new(SHORTCUT_SLACK_M, SHORTCUT_SLACK_M, SHORTCUT_SLACK_M);
        Aabb {
            min: b.min + slack,
            max: b.max - slack,
        }
    }

    fn arena_point() -> impl Strategy<Value = Vec3> {
        (-35.0f32..35.0, -25.0f32..25.0, -1.0f32..13.0).prop_map(|(x, y, z)| Vec3::new(x, y, z))
    }

    proptest! {
        /// The shortcut test says "blocked" only where the trace hits: a segment through a
        /// shrunk box is never clear.
        #[test]
        fn a_span_through_a_shrunk_box_is_a_trace_that_hits(
            from in arena_point(),
            to in prop_oneof![
                arena_point(),
                // Along an axis, where the shortcut takes its parallel branch.
                (arena_point(), 0..3usize).prop_map(|(p, axis)| {
                    let mut a = p.to_array();
                    a[axis] = 0.0;
                    Vec3::from_array(a)
                }),
            ],
        ) {
            let map = BuiltinMap::Arena.load();
            let span = Span::new(from, to);
            let d = to - from;
            let traced = map.trace_ray(from, d, d.length());
            for b in map.boxes() {
                if span.crosses(&shrunk(b)) {
                    prop_assert!(traced.is_some(), "{:?} crosses {:?}", (from, to), b);
                }
            }
        }

        /// Blocking the segments between the corners of two boxes blocks the segments
        /// between any of their points.
        #[test]
        fn a_box_that_hides_the_corners_hides_the_inside(
            a in arena_point(),
            a_size in (0.0f32..3.0, 0.0f32..3.0, 0.0f32..3.0),
            b in arena_point(),
            b_size in (0.0f32..3.0, 0.0f32..3.0, 0.0f32..3.0),
            s in (0.0f32..1.0, 0.0f32..1.0, 0.0f32..1.0),
            t in (0.0f32..1.0, 0.0f32..1.0, 0.0f32..1.0),
        ) {
            let map = BuiltinMap::Arena.load();
            let cloud = |p: Vec3, size: (f32, f32, f32)| Aabb {
                min: p,
                max: p + Vec3::new(size.0, size.1, size.2),
            };
            let (ca, cb) = (cloud(a, a_size), cloud(b, b_size));
            let inside = |c: &Aabb, f: (f32, f32, f32)| {
                c.min + Vec3::new(
                    (c.max.x - c.min.x) * f.0,
                    (c.max.y - c.min.y) * f.1,
                    (c.max.z - c.min.z) * f.2,
                )
            };
            let (p, q) = (inside(&ca, s), inside(&cb, t));
            let mut o = Occluders::default();
            for (i, bx) in map.boxes().iter().enumerate() {
                o.len = 0;
                o.remember(i, bx);
                if o.hide_box(&corners(&ca), &corners(&cb)) {
                    prop_assert!(o.hide_box(&[p], &corners(&cb)));
                    let d = q - p;
                    prop_assert!(map.trace_ray(p, d, d.length()).is_some());
                }
            }
        }
    }
}
