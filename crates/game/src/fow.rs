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
//! reaches) are never traced. Without a spatial grid, finding the pairs in range tests the
//! distance of every living enemy pair: n²/4 at n players, 250,000 at 1,000. Given one
//! ([`Neighbours`]: the runtime lends replication's relevancy grid, where every player stood
//! at the end of the last tick), each player asks the grid for the enemies in the cells
//! within view distance, both reaches and the most any player has moved since; only those
//! are tested, so the count grows with the pairs near each other. A query visits every cell
//! of its square, though, and a cell costs about two distance tests: at the default 300 m
//! and relevancy's 32 m cells a query covers some 400 cells, more than scanning costs below
//! about 3,000 players. The update takes the cheaper of the two, by that estimate, each
//! tick ([`Neighbours::always`] forces the grid). A player the grid does not
//! place within [`STRAY_M`] of where it stands (the first tick, a respawn, a player not in
//! it) is tested against every enemy instead. The grid only prunes: the distance test is the
//! same, on the same positions, so the rows are those of the full scan, which the tests
//! check. A pair whose two players have not changed since its last
//! trace (same origin, velocity and ground contact, same map) keeps its verdict without a
//! ray: the verdict is a function of the points, and the points of the state. A traced pair
//! tries first the segment found clear at its last trace, so a visible pair usually costs one
//! ray. The boxes a viewer's traces hit are remembered (the last eight) while its pairs are
//! traced, seeded with the box that last blocked the pair, and settle a hidden pair with as
//! few traces as they can:
//!
//! 1. one remembered box that blocks the segments between the corners of the boxes bounding
//!    the two players' points blocks every segment between them (what a box hides from a
//!    point is a convex set), and settles the pair;
//! 2. likewise one viewer point at a time against the target's bounding box;
//! 3. a remaining segment that a remembered box blocks is skipped; the rest are traced
//!    through the map's grid.
//!
//! The eye and the hull's corners where a player stands cost a few additions; its reach
//! corners cost nine hull sweeps, so they are swept only when a segment or a bound of a
//! traced pair needs them, once a tick, and kept while the player's state does not change.
//! Before sweeping, step 1 is tried on boxes known without a sweep: the reach square plus the
//! hull, from the drop to the rise plus the hull's height, padded by a centimetre. A visible
//! pair whose clear segment joins near points, and a pair hidden by one wall, sweep nothing.
//!
//! The shortcuts test boxes shrunk by 1 cm, so they only skip segments the trace would find
//! blocked: the verdict is exactly [`Map::trace_ray`]'s over the sample points, which the
//! tests check against brute force.
//!
//! **The open field.** When no box stands in the box bounding every living player's region
//! (ground under all of them aside), every segment between their points is clear: each
//! pair in range is visible, and the update costs a distance and a bit a pair, every tick,
//! with no ray and no memo touched (a crowd of 1,000 fighting on open ground: 250,000 enemy
//! pairs). The update after one in the open traces every pair in range.
//!
//! [`FowConfig::trace_every_ticks`] = K above one traces each pair every K ticks in a fixed
//! rotation, and grows the horizon by K − 1 ticks so the reach covers the gap; a pair is
//! traced at once when it comes into range and when either player respawns, teleports or
//! changes team. A staggered verdict is not a superset of plain sight, though: the points of
//! an earlier tick do not include the hull's corners now, so a pair may stay hidden for up to
//! K − 1 ticks after it comes into plain sight (24 of 152,000 visible enemy pair-ticks in two
//! minutes of scripted arena play at K = 4, each under 24 ms, measured when the rotation
//! spread a match's pairs one by one). The default is every tick.
//!
//! The rotation goes by blocks of [`VIEWERS_PER_BLOCK`] lower slots: the pairs of the
//! viewers in one block are traced on the same tick. A player's reach corners are swept once
//! a tick for every pair that needs them, so a match of up to 16 traces all its pairs on one
//! tick in K and sweeps each player once in K ticks: 2.5 players a tick at 10 on the arena,
//! where spreading the 25 pairs one by one over the ticks swept 6.6, for 28% less time
//! (benches/fow.rs, `10 players on arena in play, every 4th tick`: 7.2 µs to 5.2 µs). A
//! larger match's blocks take turns round the K ticks, so its traces stay spread, if less
//! evenly than pair by pair (100 players behind cover: the busiest tick has about 1.5 times
//! the mean's pairs, the lower blocks holding more pairs above them). A small match's
//! traces come in a burst, one tick in K; [`FowConfig::phase`] shifts it, so that the
//! matches a server runs together burst on different ticks.

use std::num::NonZeroU8;
use std::time::Duration;

use tickforge_sim::spatial::Grid;
use tickforge_telemetry::{Category, Scopes};

mod points;
mod sight;

use crate::map::{Aabb, Map};
use crate::math::{BitIter, Vec3};
use crate::movement::{MovementParams, PlayerState};
use crate::rules::Team;
use crate::{PlayerSlot, Tick};

pub use points::Reach;
use points::NEAR_POINTS;
use sight::Occluders;

/// Sample points per living player: the eye, the hull's corners where it stands and at the
/// edge of its reach ([`Fow::points`]).
pub const POINTS_PER_PLAYER: usize = 17;
/// Most players a [`Fow`] tracks. The pair memos grow with its square (16 bytes a pair:
/// 8 MB at 1,000 players, 33 MB at this bound).
pub const MAX_PLAYERS: usize = 2048;

/// A player who moved farther than its speed allows in this many ticks since the last update
/// was moved by the game (a respawn), not by running: its pairs are traced at once.
const TELEPORT_TICKS: f32 = 2.0;
/// Slack on the teleport test for rounding and step-ups, metres.
const TELEPORT_SLACK_M: f32 = 0.5;
/// A player the grid places farther than this from where it stands now (respawned,
/// teleported, or not pushed since) is a stray: tested against every enemy instead of found
/// in the grid, so that one player moved far does not widen every query. Metres: a tick's
/// running or falling is well under it, a respawn usually well over.
pub const STRAY_M: f32 = 10.0;
/// What a grid query costs for each cell its square covers, in distance tests of the scan
/// over every pair: about 8 ns a cell (a hash and a bucket's walk) against 4 ns a test,
/// measured by the `spread` scenes of benches/fow.rs.
const CELL_COST_IN_TESTS: f32 = 2.0;
/// What each grid query is padded by for f32 rounding (of the query's square, of the cells,
/// of the distance test), metres: over ten times the rounding at [`GRID_LIMIT_M`].
const GRID_SLACK_M: f32 = 1.0;
/// A player farther than this from the origin on x or y is a stray, metres: past it f32's
/// step nears [`GRID_SLACK_M`].
const GRID_LIMIT_M: f32 = 1.0e6;
/// How far a box is shrunk for the shortcut tests that skip traces, metres: ten times f32's
/// step at the largest map coordinate (1 mm at 10 km), so rounding never decides; a segment
/// that only grazes a box within this of its faces is traced instead. Also the padding of the
/// regions known without a sweep.
const SHORTCUT_SLACK_M: f32 = 0.01;

/// Lower slots whose pairs [`FowConfig::trace_every_ticks`] traces on the same tick: a
/// 5-v-5 or an 8-v-8 traces every pair on one tick in K, sweeping each player once.
pub const VIEWERS_PER_BLOCK: usize = 16;

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
    /// Shifts the rotation of [`FowConfig::trace_every_ticks`]: the pairs of viewer block
    /// `b` are due on the ticks where tick + `phase` + `b` is a multiple of it. Matches a
    /// server steps together take different phases (the runtime's
    /// `MatchSetup::stagger`), so that a small match's traces, all on one tick in K, do not
    /// fall on the same tick as its neighbours'.
    pub phase: u32,
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
            // Every tick: about 17 µs for 10 players running on the arena (benches/fow.rs),
            // under 1 µs standing at their spawns, and the verdict always holds plain sight;
            // 4 costs under a third of that in play (5.2 µs) and may lag plain sight by up
            // to 3 ticks.
            trace_every_ticks: NonZeroU8::MIN,
            phase: 0,
            // A dead player's spot is no longer play; its death reaches clients as an event.
            dead_visible_to_enemies: false,
            tick_hz: 128, // VALORANT's tick: 7.8125 ms
            movement: MovementParams::default(),
        }
    }
}

/// Where the players stood at the end of the last tick, in a spatial grid its owner keeps,
/// lent to [`Fow::update`] so that finding the enemy pairs in range costs what the pairs near
/// each other do, not what all pairs do.
///
/// The runtime lends replication's relevancy grid: each entity where the game last pushed
/// it, by entity index. The grid may lag the players, hold other entities and miss players:
/// what it places wrong is tested against every enemy, so the rows never depend on it.
#[derive(Clone, Copy, Debug)]
pub struct Neighbours<'a> {
    /// The players (and maybe other entities), by entity index.
    pub grid: &'a Grid,
    /// The player slot of each entity index in `grid`; `u16::MAX` (or past the end) for an
    /// entity that is not a player.
    pub slot_of: &'a [u16],
    /// Search the grid even where scanning every pair looks cheaper (tests, benches);
    /// otherwise the update picks the cheaper of the two. The rows are the same either way.
    pub always: bool,
}

/// What the last [`Fow::update`] did: for benches and the telemetry notes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FowStats {
    /// Living enemy pairs whose distance was tested, to find those in range: every pair
    /// without a grid, or where scanning them was the cheaper; else the pairs the grid found
    /// near each other and those of its strays (an enemy it shows twice may be tested twice). None when the open field's
    /// players all stand within view distance of each other.
    pub pairs_considered: u32,
    /// Living players the grid did not place within [`STRAY_M`] of where they stand:
    /// tested against every enemy. 0 when the update scanned every pair instead.
    pub strays: u32,
    /// Living enemy pairs within view distance.
    pub pairs_in_range: u32,
    /// Of those, pairs whose verdict was decided this tick (traced, or kept unchanged).
    pub pairs_traced: u32,
    /// Of the pairs traced, those whose two players had not changed since their last trace:
    /// the verdict was kept without looking at a segment.
    pub pairs_unchanged: u32,
    /// Players whose reach corners were swept this tick.
    pub players_swept: u32,
    /// Segments between sample points looked at.
    pub segments: u32,
    /// Segments no remembered blocker stopped, traced through the map's grid.
    pub rays: u32,
    /// Hidden pairs settled by one remembered box between the two players' points, without
    /// testing their segments one by one.
    pub pairs_walled_off: u32,
    /// Of the pairs traced, those found visible.
    pub pairs_visible: u32,
    /// Of the pairs traced, those settled by the open field: no box stands anywhere near
    /// the living players, so every pair in range sees the other without a segment looked at.
    pub pairs_open: u32,
}

/// What a player was at the last update, to spot respawns, teleports and team changes.
#[derive(Clone, Copy, Debug)]
struct Last {
    origin: Vec3,
    speed: f32,
    alive: bool,
    team: Team,
}

/// Each living player's sample points and what they were taken from, kept across ticks
/// while the player does not change.
#[derive(Clone, Debug)]
struct Samples {
    /// The state the points are of (origin, velocity and ground contact matter).
    state: Vec<PlayerState>,
    /// The update at which each player last changed: state, liveness, team or map.
    changed_at: Vec<u64>,
    reach: Vec<Reach>,
    /// A box holding every point the player's state can give, known without a sweep.
    region: Vec<Aabb>,
    /// [`POINTS_PER_PLAYER`] points a player, by slot: the near points always, the reach
    /// corners once swept.
    points: Vec<Vec3>,
    /// The box bounding each swept player's points.
    bounds: Vec<Aabb>,
    /// The reach corners and bounds are those of `state`.
    swept: Vec<bool>,
    horizon_s: f32,
}

impl Samples {
    /// Sweeps the reach corners of player `i`, unless they are those of its state already.
    fn sweep(&mut self, i: usize, config: &FowConfig, map: &Map, stats: &mut FowStats) {
        if self.swept[i] {
            return;
        }
        stats.players_swept += 1;
        let out = &mut self.points[i * POINTS_PER_PLAYER..(i + 1) * POINTS_PER_PLAYER];
        points::reach_points(
            &self.state[i],
            self.reach[i],
            config,
            map,
            &mut out[NEAR_POINTS..],
        );
        self.bounds[i] = points::bounding(out);
        let r = &self.region[i];
        debug_assert!(
            !out.iter().all(|p| p.is_finite())
                || out.iter().all(|p| {
                    r.min.x <= p.x
                        && p.x <= r.max.x
                        && r.min.y <= p.y
                        && p.y <= r.max.y
                        && r.min.z <= p.z
                        && p.z <= r.max.z
                }),
            "sample points outside their region {r:?}: {out:?}"
        );
        self.swept[i] = true;
    }
}

/// What the last trace of an enemy pair found; kept for the lower slot's row.
#[derive(Clone, Copy, Debug, Default)]
struct PairMemo {
    /// The update of the last trace; 0 for never.
    traced_at: u64,
    /// The segment found clear at the last trace, tried first next time: index
    /// `a * POINTS_PER_PLAYER + b`.
    witness: u16,
    /// The verdict of the last trace.
    seen: bool,
    /// One more than the index in [`Map::boxes`] of the box that last blocked a segment of
    /// the pair; 0 for none. Remembered first when the pair is traced again.
    blocker: u32,
}

/// What identifies the map across updates: the same map object with the same boxes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct MapKey {
    map: usize,
    boxes: usize,
    len: usize,
    barriers_raised: bool,
}

impl MapKey {
    fn of(map: &Map) -> MapKey {
        MapKey {
            map: std::ptr::from_ref(map) as usize,
            boxes: map.boxes().as_ptr() as usize,
            len: map.boxes().len(),
            barriers_raised: map.barriers_raised(),
        }
    }
}

/// The visibility matrix of one match: a bit row per viewer, recomputed by [`Fow::update`]
/// each tick. Allocates at [`Fow::new`] only.
#[derive(Clone, Debug)]
pub struct Fow {
    config: FowConfig,
    players: usize,
    /// `u64` words in a row.
    words: usize,
    samples: Samples,
    /// One per enemy pair `i < j`, at [`Fow::pair_index`].
    pairs: Vec<PairMemo>,
    /// Enemy line of sight, symmetric: bit j of row i.
    los: Vec<u64>,
    /// Enemy pairs within view distance at the last update: bit j of row i for i < j only.
    in_range: Vec<u64>,
    /// Scratch of [`Fow::find_near`]: the living enemy pairs within view distance this
    /// update, bit j of row i for i < j only.
    near: Vec<u64>,
    /// Scratch of [`Fow::find_near`] with a grid: living players it places too far from
    /// where they stand; the players it holds; each team's living players it places
    /// well (attackers first); and the cell it holds each player in.
    stray_row: Vec<u64>,
    placed_row: Vec<u64>,
    findable_rows: Vec<u64>,
    cell_of_slot: Vec<(i32, i32)>,
    /// The output: bit j of row i is set when i may be sent j.
    visible: Vec<u64>,
    /// Members of each team, attackers first.
    team_rows: Vec<u64>,
    /// Living players.
    alive_row: Vec<u64>,
    /// Per team, the enemies its living players see (a dead player's view), rebuilt each
    /// update.
    team_sight: Vec<u64>,
    /// Players whose pairs are traced this tick whatever the rotation says.
    dirty_row: Vec<u64>,
    last: Vec<Last>,
    map: MapKey,
    /// Updates so far, counting this one once it starts.
    updates: u64,
    stats: FowStats,
    /// The last update found the players in the open field ([`Fow::open_field`]): its
    /// verdicts were not traces, so the next traced update decides every pair.
    was_open: bool,
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
        let empty = Aabb {
            min: Vec3::ZERO,
            max: Vec3::ZERO,
        };
        Fow {
            config,
            players,
            words,
            samples: Samples {
                state: vec![PlayerState::default(); players],
                changed_at: vec![0; players],
                reach: vec![Reach::default(); players],
                region: vec![empty; players],
                points: vec![Vec3::ZERO; players * POINTS_PER_PLAYER],
                bounds: vec![empty; players],
                swept: vec![false; players],
                horizon_s,
            },
            pairs: vec![PairMemo::default(); players * players.saturating_sub(1) / 2],
            los: vec![0; players * words],
            in_range: vec![0; players * words],
            near: vec![0; players * words],
            stray_row: vec![0; words],
            placed_row: vec![0; words],
            findable_rows: vec![0; 2 * words],
            cell_of_slot: vec![(0, 0); players],
            visible,
            team_rows: vec![0; 2 * words],
            alive_row: vec![0; words],
            team_sight: vec![0; 2 * words],
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
            map: MapKey::default(),
            updates: 0,
            stats: FowStats::default(),
            was_open: false,
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
        self.samples.horizon_s
    }

    /// How far `state` could get within [`Fow::horizon_s`], in free space.
    pub fn reach(&self, state: &PlayerState) -> Reach {
        Reach::of(state, &self.config.movement, self.samples.horizon_s)
    }

    /// All [`POINTS_PER_PLAYER`] sample points of `state` on `map` at this fog's horizon, eye
    /// first, in the order of [`Fow::points`]: what a verdict is the line of sight between.
    /// Sweeps the hull; for tests and tools, not the tick.
    pub fn sample_points(&self, state: &PlayerState, map: &Map) -> [Vec3; POINTS_PER_PLAYER] {
        let mut out = [Vec3::ZERO; POINTS_PER_PLAYER];
        points::near_points(state, &self.config, &mut out[..NEAR_POINTS]);
        let reach = self.reach(state);
        points::reach_points(state, reach, &self.config, map, &mut out[NEAR_POINTS..]);
        out
    }

    /// Recomputes the matrix for tick `tick` from each slot's movement state, team and
    /// liveness, charged to [`Category::Fow`]. Call once per tick after movement, before
    /// replication reads the rows; ticks need only increase for the rotation of
    /// [`FowConfig::trace_every_ticks`] to stay even. Pass the match's one map each time:
    /// what was sampled is kept while the same map object is passed. `near`, when given,
    /// finds the pairs in range with fewer distance tests; the rows are the same without
    /// it. Allocates nothing.
    ///
    /// # Panics
    /// If `players`, `teams` or `alive` does not hold [`Fow::player_count`] entries.
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &mut self,
        players: &[PlayerState],
        teams: &[Team],
        alive: &[bool],
        near: Option<Neighbours<'_>>,
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
        self.updates += 1;
        self.note_players(players, teams, alive, map);
        self.trace_pairs(teams, alive, near, map, tick);
        self.build_rows(teams, alive);
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
            .flat_map(|(w, &word)| BitIter(word).map(move |b| PlayerSlot((w * 64 + b) as u16)))
    }

    /// The sample points of `slot` as of the last update, eye first: all
    /// [`POINTS_PER_PLAYER`] once its reach corners have been swept for its present state,
    /// else only the eye and the hull's corners where it stands (a pair traced without them
    /// was visible between near points, or hidden by a wall whatever its reach corners are:
    /// [`Fow::sample_points`] gives them all). Empty for a dead player or a slot out of
    /// range.
    pub fn points(&self, slot: PlayerSlot) -> &[Vec3] {
        let i = usize::from(slot.0);
        if i >= self.players || !get_bit(&self.alive_row, i) {
            return &[];
        }
        let count = if self.samples.swept[i] {
            POINTS_PER_PLAYER
        } else {
            NEAR_POINTS
        };
        &self.samples.points[i * POINTS_PER_PLAYER..i * POINTS_PER_PLAYER + count]
    }

    /// What the last update did.
    pub fn stats(&self) -> FowStats {
        self.stats
    }

    fn row_of<'a>(&self, m: &'a [u64], i: usize) -> &'a [u64] {
        &m[i * self.words..(i + 1) * self.words]
    }

    /// Where the pair of slots `i < j` is kept in `pairs`: the upper triangle, row by row.
    fn pair_index(&self, i: usize, j: usize) -> usize {
        debug_assert!(i < j && j < self.players);
        i * (2 * self.players - i - 1) / 2 + (j - i - 1)
    }

    /// Team and liveness rows, the players to retrace at once, and for each living player
    /// that changed, its reach, region and near points; its reach corners wait until a
    /// trace needs them.
    fn note_players(&mut self, players: &[PlayerState], teams: &[Team], alive: &[bool], map: &Map) {
        self.team_rows.fill(0);
        self.alive_row.fill(0);
        self.dirty_row.fill(0);
        let primed = self.updates > 1;
        let map_key = MapKey::of(map);
        let map_changed = map_key != self.map;
        self.map = map_key;
        let dt = 1.0 / self.config.tick_hz.max(1) as f32;
        let params = self.config.movement;
        let now = self.updates;
        let s = &mut self.samples;
        for (i, state) in players.iter().enumerate() {
            let team_row = team_index(teams[i]) * self.words;
            set_bit(&mut self.team_rows[team_row..team_row + self.words], i);
            let speed = state.velocity.length();
            let last = self.last[i];
            let ran_m = params.max_speed.max(speed).max(last.speed) * dt * TELEPORT_TICKS;
            let moved_m = (state.origin - last.origin).length();
            let jumped = moved_m.is_nan() || moved_m > ran_m + TELEPORT_SLACK_M;
            let flipped = last.alive != alive[i] || last.team != teams[i];
            if !primed || flipped || jumped {
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
            if primed && !flipped && !map_changed && same_inputs(&s.state[i], state) {
                continue;
            }
            s.state[i] = *state;
            s.changed_at[i] = now;
            s.swept[i] = false;
            let reach = Reach::of(state, &params, s.horizon_s);
            s.reach[i] = reach;
            s.region[i] = points::region(state, reach, &self.config);
            let out = &mut s.points[i * POINTS_PER_PLAYER..i * POINTS_PER_PLAYER + NEAR_POINTS];
            points::near_points(state, &self.config, out);
        }
    }

    /// Decides line of sight for the living enemy pairs in range that are due this tick.
    fn trace_pairs(
        &mut self,
        teams: &[Team],
        alive: &[bool],
        neighbours: Option<Neighbours<'_>>,
        map: &Map,
        tick: Tick,
    ) {
        let w = self.words;
        let every = u32::from(self.config.trace_every_ticks.get());
        let now = self.updates;
        if let Some(bound) = self.open_field(alive, map) {
            self.open_pairs(teams, alive, neighbours, &bound);
            self.was_open = true;
            return;
        }
        // Leaving the open field: what it decided was no trace, so every pair is due now.
        let after_open = std::mem::take(&mut self.was_open);
        self.find_near(teams, alive, neighbours, Range::Traced);
        for i in 0..teams.len() {
            let mut occluders = Occluders::default();
            let block = (i / VIEWERS_PER_BLOCK) as u32;
            let due_block = (tick.0)
                .wrapping_add(self.config.phase)
                .wrapping_add(block)
                .is_multiple_of(every);
            for k in i / 64..w {
                // The enemies above i in this word that are alive and in range.
                let near = self.near[i * w + k];
                let was = self.in_range[i * w + k];
                self.in_range[i * w + k] = near;
                for b in BitIter(was & !near) {
                    self.set_los(i, k * 64 + b, false);
                }
                for b in BitIter(near) {
                    let j = k * 64 + b;
                    self.stats.pairs_in_range += 1;
                    let due = after_open
                        || was & (1 << b) == 0
                        || get_bit(&self.dirty_row, i)
                        || get_bit(&self.dirty_row, j)
                        || due_block;
                    if !due {
                        continue;
                    }
                    self.stats.pairs_traced += 1;
                    let p = self.pair_index(i, j);
                    let memo = &mut self.pairs[p];
                    let s = &mut self.samples;
                    let seen = if memo.traced_at > 0
                        && memo.traced_at >= s.changed_at[i].max(s.changed_at[j])
                    {
                        self.stats.pairs_unchanged += 1;
                        memo.seen
                    } else {
                        if let Some(b) = map.boxes().get(memo.blocker.wrapping_sub(1) as usize) {
                            occluders.remember(memo.blocker as usize - 1, b);
                        }
                        occluders.take_recent();
                        let seen = sight::line_of_sight(
                            s,
                            i,
                            j,
                            &self.config,
                            map,
                            &mut memo.witness,
                            &mut occluders,
                            &mut self.stats,
                        );
                        if let Some(b) = occluders.take_recent() {
                            memo.blocker = b + 1;
                        }
                        memo.traced_at = now;
                        memo.seen = seen;
                        seen
                    };
                    self.stats.pairs_visible += u32::from(seen);
                    self.set_los(i, j, seen);
                }
            }
        }
    }

    /// The open field's verdicts ([`Fow::open_field`]): every living enemy within range is
    /// visible, every tick (no rotation: a pair costs a distance and a bit). Each row is
    /// made whole, from the distances alone; the pair memos are left as they are, and are
    /// good again once the players they describe have not changed.
    fn open_pairs(
        &mut self,
        teams: &[Team],
        alive: &[bool],
        neighbours: Option<Neighbours<'_>>,
        bound: &Aabb,
    ) {
        let (n, w) = (self.players, self.words);
        let max_view_m = self.config.max_view_distance_m;
        // Every origin lies in the bound: within view distance of each other when its
        // diagonal is, and then a row is its living enemies, a word at a time.
        let span = bound.max - bound.min;
        if span.dot(span) <= max_view_m * max_view_m {
            for i in 0..n {
                let row = i * w;
                if !alive[i] {
                    self.los[row..row + w].fill(0);
                    self.in_range[row..row + w].fill(0);
                    continue;
                }
                let enemy_team = team_index(teams[i].other()) * w;
                for k in 0..w {
                    let near = self.team_rows[enemy_team + k] & self.alive_row[k];
                    self.los[row + k] = near;
                    // Pairs are counted, and kept in range, for the lower slot's row only.
                    let above = match k.cmp(&(i / 64)) {
                        std::cmp::Ordering::Less => 0,
                        std::cmp::Ordering::Equal => (!0u64 << (i % 64)) << 1,
                        std::cmp::Ordering::Greater => !0,
                    };
                    self.in_range[row + k] = near & above;
                    self.count_open((near & above).count_ones());
                }
            }
            return;
        }
        self.find_near(teams, alive, neighbours, Range::Symmetric);
        self.los.fill(0);
        for i in 0..n {
            for k in 0..w {
                let near = self.near[i * w + k];
                self.in_range[i * w + k] = near;
                self.count_open(near.count_ones());
                for b in BitIter(near) {
                    self.set_los(i, k * 64 + b, true);
                }
            }
        }
    }

    /// Counts `pairs` settled by the open field: in range, traced and visible at once.
    fn count_open(&mut self, pairs: u32) {
        self.stats.pairs_in_range += pairs;
        self.stats.pairs_traced += pairs;
        self.stats.pairs_visible += pairs;
        self.stats.pairs_open += pairs;
    }

    /// Fills `near` by testing every living enemy pair: [`Fow::find_near`] without a grid.
    fn scan_near(&mut self, teams: &[Team], alive: &[bool], range: Range) {
        let (n, w) = (self.players, self.words);
        let max_view_m = self.config.max_view_distance_m;
        let mut tested = 0u32;
        for i in 0..n {
            let enemy_team = team_index(teams[i].other()) * w;
            for k in 0..w {
                let above = match k.cmp(&(i / 64)) {
                    std::cmp::Ordering::Less => 0,
                    std::cmp::Ordering::Equal => (!0u64 << (i % 64)) << 1,
                    std::cmp::Ordering::Greater => !0,
                };
                let live = if alive[i] {
                    self.team_rows[enemy_team + k] & self.alive_row[k] & above
                } else {
                    0
                };
                let mut near = 0u64;
                for b in BitIter(live) {
                    tested += 1;
                    let j = k * 64 + b;
                    near |= u64::from(pair_in_range(&self.samples, max_view_m, range, i, j)) << b;
                }
                self.near[i * w + k] = near;
            }
        }
        self.stats.pairs_considered += tested;
    }

    /// Fills `near` with the living enemy pairs within range of each other, bit j of row i
    /// for i < j, by the distance test `range` names. Without a grid, every such pair is
    /// tested. With one, the pairs of two players the grid places well are tested when one
    /// query finds the other; a stray's pairs are all tested.
    ///
    /// Why a query finds every pair in range: a query round `i` visits every cell within
    /// its radius of `i` on x and y. A target `j` in range stands within view distance plus
    /// both reaches of `i`, and lies at most `lag` outside the cell the grid holds it in
    /// (`lag`: the most any well-placed player does, at most [`STRAY_M`]); so a radius of
    /// view distance, `i`'s reach, the largest reach, `lag` and [`GRID_SLACK_M`] for rounding
    /// reaches that cell. Only the distance on the ground plane matters to the grid, and it
    /// is at most the distance tested.
    fn find_near(
        &mut self,
        teams: &[Team],
        alive: &[bool],
        neighbours: Option<Neighbours<'_>>,
        range: Range,
    ) {
        let Some(Neighbours {
            grid,
            slot_of,
            always,
        }) = neighbours
        else {
            self.scan_near(teams, alive, range);
            return;
        };
        let (n, w) = (self.players, self.words);
        let max_view_m = self.config.max_view_distance_m;
        let s = &self.samples;
        let in_range = |i: usize, j: usize| pair_in_range(s, max_view_m, range, i, j);
        let mut tested = 0u32;

        // Where the grid holds each player, if anywhere.
        self.placed_row.fill(0);
        for (e, &slot) in slot_of.iter().enumerate() {
            let j = usize::from(slot);
            if j >= n {
                continue;
            }
            if let Some(cell) = grid.cell(e) {
                // A slot shown twice is kept at the last: a query finds it there.
                self.cell_of_slot[j] = cell;
                set_bit(&mut self.placed_row, j);
            }
        }
        // Strays, and how far from their cells and how far-reaching the others are.
        let (mut lag_m, mut reach_m) = (0.0f32, 0.0f32);
        for k in 0..w {
            let mut stray = self.alive_row[k] & !self.placed_row[k];
            for b in BitIter(self.alive_row[k] & self.placed_row[k]) {
                let j = k * 64 + b;
                let o = s.state[j].origin;
                let r = s.reach[j].horizontal_m;
                let out = grid.distance_outside_m(self.cell_of_slot[j], o.x, o.y);
                let tame = o.x.abs() < GRID_LIMIT_M && o.y.abs() < GRID_LIMIT_M && r.is_finite();
                if tame && out <= STRAY_M {
                    lag_m = lag_m.max(out);
                    reach_m = reach_m.max(r);
                } else {
                    stray |= 1 << b;
                }
            }
            self.stray_row[k] = stray;
        }
        let pad_m = max_view_m + reach_m + lag_m + GRID_SLACK_M;
        if !always {
            // Each query covers a square of about this many cells; each stray tests every
            // enemy. Where scanning every pair costs less, scan.
            let side = 2.0 * (pad_m + reach_m) / grid.cell_size_m() + 2.0;
            let count = |row: &[u64]| row.iter().map(|w| w.count_ones()).sum::<u32>() as f32;
            let strays = count(&self.stray_row);
            let queries = count(&self.alive_row) - strays;
            // Living players of each team: the scan tests each pair of them.
            let mut alive_in = [0f32; 2];
            for (t, alive_t) in alive_in.iter_mut().enumerate() {
                *alive_t = (0..w)
                    .map(|k| (self.team_rows[t * w + k] & self.alive_row[k]).count_ones())
                    .sum::<u32>() as f32;
            }
            let scan = alive_in[0] * alive_in[1];
            let search =
                queries * side * side * CELL_COST_IN_TESTS + strays * alive_in[0].max(alive_in[1]);
            if search >= scan {
                self.scan_near(teams, alive, range);
                return;
            }
        }
        self.stats.strays += self.stray_row.iter().map(|w| w.count_ones()).sum::<u32>();
        for t in 0..2 {
            for k in 0..w {
                self.findable_rows[t * w + k] =
                    self.team_rows[t * w + k] & self.alive_row[k] & !self.stray_row[k];
            }
        }
        self.near.fill(0);
        for k in 0..w {
            for b in BitIter(self.alive_row[k] & !self.stray_row[k]) {
                let i = k * 64 + b;
                let enemy_team = team_index(teams[i].other()) * w;
                let findable = &self.findable_rows[enemy_team..enemy_team + w];
                let row = &mut self.near[i * w..(i + 1) * w];
                let o = s.state[i].origin;
                grid.query(o.x, o.y, pad_m + s.reach[i].horizontal_m, |e| {
                    let j = slot_of.get(e).map_or(usize::MAX, |&slot| usize::from(slot));
                    if j <= i || j >= n || !get_bit(findable, j) || get_bit(row, j) {
                        return;
                    }
                    tested += 1;
                    put_bit(row, j, in_range(i, j));
                });
            }
        }
        // A stray against every living enemy; a pair of strays once, from the lower slot.
        for k in 0..w {
            for b in BitIter(self.stray_row[k]) {
                let u = k * 64 + b;
                let enemy_team = team_index(teams[u].other()) * w;
                for m in 0..w {
                    let lower_strays = match m.cmp(&k) {
                        std::cmp::Ordering::Less => self.stray_row[m],
                        std::cmp::Ordering::Equal => self.stray_row[m] & ((1u64 << b) - 1),
                        std::cmp::Ordering::Greater => 0,
                    };
                    let live = self.team_rows[enemy_team + m] & self.alive_row[m] & !lower_strays;
                    for c in BitIter(live) {
                        let j = m * 64 + c;
                        let (lo, hi) = (u.min(j), u.max(j));
                        tested += 1;
                        if in_range(lo, hi) {
                            set_bit(&mut self.near[lo * w..(lo + 1) * w], hi);
                        }
                    }
                }
            }
        }
        self.stats.pairs_considered += tested;
    }

    /// The box bounding the living players' regions when they stand in the open: no box, shrunk by
    /// [`SHORTCUT_SLACK_M`], meets the box bounding all their regions (every sample point
    /// their states can give), except ground under all of them: a box that spans the
    /// regions' whole x-y extent with its top at or below every living player's feet. No
    /// point goes below such ground (the reach corners' drops are hull sweeps, which stop on
    /// it), so no segment between two points meets it, and every segment between two points
    /// lies in the bounding box (it is convex): every pair sees the other, and
    /// [`Map::trace_ray`] would say so for each. A crowd fighting on open ground costs a bit
    /// a pair instead of a ray. Costs a pass over the players and the grid's boxes near them.
    fn open_field(&self, alive: &[bool], map: &Map) -> Option<Aabb> {
        let s = &self.samples;
        let mut bound: Option<Aabb> = None;
        let mut lowest_feet = f32::INFINITY;
        for (i, _) in alive.iter().enumerate().filter(|(_, &a)| a) {
            let r = s.region[i];
            bound = Some(match bound {
                None => r,
                Some(b) => Aabb {
                    min: b.min.min(r.min),
                    max: b.max.max(r.max),
                },
            });
            lowest_feet = lowest_feet.min(s.state[i].origin.z);
        }
        let bound = bound.filter(|b| b.min.is_finite() && b.max.is_finite())?;
        let blocked = map.for_each_box_near(&bound, |b| {
            let shrunk = Aabb {
                min: b.min + Vec3::new(SHORTCUT_SLACK_M, SHORTCUT_SLACK_M, SHORTCUT_SLACK_M),
                max: b.max - Vec3::new(SHORTCUT_SLACK_M, SHORTCUT_SLACK_M, SHORTCUT_SLACK_M),
            };
            let ground = b.min.x <= bound.min.x
                && b.min.y <= bound.min.y
                && b.max.x >= bound.max.x
                && b.max.y >= bound.max.y
                && b.max.z <= lowest_feet;
            if shrunk.overlaps(&bound) && !ground {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        });
        blocked.is_continue().then_some(bound)
    }

    /// Builds each viewer's row: its team, the enemies it sees, and dead enemies if the
    /// config sends them. A dead viewer spectates: it sees what its living teammates see, and
    /// nothing more.
    fn build_rows(&mut self, teams: &[Team], alive: &[bool]) {
        let w = self.words;
        // What each team's living players see, once: every dead teammate spectates it.
        self.team_sight.fill(0);
        for t in 0..2 {
            for mw in 0..w {
                for b in BitIter(self.team_rows[t * w + mw] & self.alive_row[mw]) {
                    let mate = mw * 64 + b;
                    for k in 0..w {
                        self.team_sight[t * w + k] |= self.los[mate * w + k];
                    }
                }
            }
        }
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
            for k in 0..w {
                self.visible[i * w + k] |= self.team_sight[own + k];
            }
        }
    }

    fn set_los(&mut self, i: usize, j: usize, on: bool) {
        let w = self.words;
        put_bit(&mut self.los[i * w..(i + 1) * w], j, on);
        put_bit(&mut self.los[j * w..(j + 1) * w], i, on);
    }
}

/// Which distance test finds the pairs in range: the sums the traced update and the open
/// field have always made, which may round differently.
#[derive(Clone, Copy, Debug)]
enum Range {
    /// View distance plus the lower slot's reach, plus the higher slot's.
    Traced,
    /// View distance plus the sum of both reaches: the same whichever slot looks.
    Symmetric,
}

/// True when slots `i < j` stand within range of each other by the test `range` names: the
/// same sums, in the same order, as the scan over every pair has always made.
fn pair_in_range(s: &Samples, max_view_m: f32, range: Range, i: usize, j: usize) -> bool {
    let (r_i, r_j) = (s.reach[i].horizontal_m, s.reach[j].horizontal_m);
    let range_m = match range {
        Range::Traced => max_view_m + r_i + r_j,
        Range::Symmetric => max_view_m + (r_i + r_j),
    };
    let gap = s.state[j].origin - s.state[i].origin;
    gap.dot(gap) <= range_m * range_m
}

/// True when `a` and `b` give the same sample points: the same origin, velocity and ground
/// contact, bit for bit.
fn same_inputs(a: &PlayerState, b: &PlayerState) -> bool {
    let bits = |s: &PlayerState| {
        (
            s.origin.to_array().map(f32::to_bits),
            s.velocity.to_array().map(f32::to_bits),
            s.on_ground,
        )
    };
    bits(a) == bits(b)
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
