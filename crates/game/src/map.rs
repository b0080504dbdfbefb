//! Maps: axis-aligned boxes, buy-phase barriers and spawn points, a broad-phase grid over the
//! boxes, and the two traces the game needs — a swept player box for movement
//! ([`Map::trace_hull`]) and a ray for shots and line of sight ([`Map::trace_ray`]).
//!
//! # File format
//!
//! A map is UTF-8 text, one directive a line. `#` starts a comment that runs to the end of
//! the line; blank lines are ignored; fields are separated by spaces or tabs. Units are
//! metres, z is up, yaw is in degrees (0 faces +x, 90 faces +y).
//!
//! ```text
//! box MIN_X MIN_Y MIN_Z MAX_X MAX_Y MAX_Z       a solid box; each MIN below its MAX
//! barrier MIN_X MIN_Y MIN_Z MAX_X MAX_Y MAX_Z   a buy-phase barrier, a box that stops
//!                                               movement only while raised
//! spawn TEAM X Y Z YAW_DEG                      a spawn point: feet at (X, Y, Z); TEAM is
//!                                               attackers or defenders
//! spawn_ring CENTRE_X CENTRE_Y Z RADIUS COUNT   COUNT spawns evenly on a circle, each
//!                                               facing the centre; teams alternate,
//!                                               attackers first
//! ```
//!
//! The floor is a box like any other, and a playable map is sealed (walls and a roof), so no
//! speed carries a player out of it. Coordinates lie within ±[`MAX_COORD_M`]; a map holds at
//! most [`MAX_BOXES`] boxes, [`MAX_BARRIERS`] barriers and [`MAX_SPAWNS`] spawn points. A bad
//! file is a [`MapError`] naming the line and the form expected, never a panic.
//!
//! # Collision
//!
//! Traces are Quake III's `CM_TraceThroughBrush` specialised to boxes: the player box is
//! swept as a point against boxes grown by its size, the trace stops [`SKIN_M`] short of the
//! first face it would cross, and a box the trace starts inside is ignored so that a player
//! can always leave it. Candidates come from a uniform grid of box indices over the map's x-y
//! extent, built at load; a query visits each box once and allocates nothing. A player's tick
//! sweeps its hull four times or so through the same metre: [`crate::movement::pmove`] asks
//! the grid once for the boxes near the player (`Map::near`) and traces through those, to
//! the same result bit for bit (`map/hull.rs` says how ties between boxes keep it so).
//!
//! # Barriers
//!
//! In a tactical shooter's buy phase the players wait in their spawn rooms behind barriers
//! across the doorways; they may move about the room but not leave it. A barrier is a box
//! that stops movement only while raised, and never stops a ray: like VALORANT's, barriers
//! are see-through and shoot-through, so [`Map::trace_ray`] (shots, fog of war) ignores
//! them, and they are not among [`Map::boxes`]. Whether they are raised is fixed per `Map`:
//! [`Map::parse`] gives a map with them lowered, and [`Map::with_barriers`] a copy with them
//! raised, built once at load. A world keeps both and passes the raised one to
//! [`crate::movement::pmove`] while the rules say the buy phase is on, which costs nothing a
//! tick and leaves `pmove`'s signature alone. A raised map's [`Map::trace_hull`] and
//! [`Map::hull_overlaps`] test every barrier directly rather than through the grid, which is
//! why a map holds few ([`MAX_BARRIERS`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::math::Vec3;
use crate::rules::Team;

mod grid;
mod hull;
mod parse;
#[cfg(test)]
mod reference;

use std::ops::ControlFlow;

use grid::Grid;
use hull::Sweep;
use parse::quote;

pub(crate) use hull::Near;

/// Largest coordinate magnitude a map may use, metres: f32 still resolves 1 mm there.
pub const MAX_COORD_M: f32 = 10_000.0;
/// Most boxes a map may hold.
pub const MAX_BOXES: usize = 16_384;
/// Most barriers a map may hold: a raised map's hull traces test each one.
pub const MAX_BARRIERS: usize = 64;
/// Most spawn points a map may hold.
pub const MAX_SPAWNS: usize = 1_024;
/// How far a hull trace stops short of a face, metres: Quake's `SURFACE_CLIP_EPSILON`
/// (0.125 units), rounded to a power of two. A resting player floats this far above a floor.
pub const SKIN_M: f32 = 1.0 / 256.0;

/// A solid axis-aligned box, metres.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Aabb {
    /// The corner with the smallest coordinates.
    pub min: Vec3,
    /// The corner with the largest coordinates.
    pub max: Vec3,
}

impl Aabb {
    /// True when the interiors of `self` and `other` overlap (touching faces do not).
    pub fn overlaps(&self, other: &Aabb) -> bool {
        self.min.x < other.max.x
            && other.min.x < self.max.x
            && self.min.y < other.max.y
            && other.min.y < self.max.y
            && self.min.z < other.max.z
            && other.min.z < self.max.z
    }
}

/// Where a player may enter the map.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpawnPoint {
    /// Feet position, metres.
    pub origin: Vec3,
    /// Facing, 1/65536 turn.
    pub yaw: u16,
    /// The team that spawns here.
    pub team: Team,
}

/// The player's collision box, centred on the feet position in x and y and rising from it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hull {
    /// Half the box's width along x and along y, metres.
    pub half_width: f32,
    /// The box's height above the feet, metres.
    pub height: f32,
}

impl Hull {
    /// The box this hull occupies with its feet at `origin`.
    pub fn at(&self, origin: Vec3) -> Aabb {
        let w = self.half_width;
        Aabb {
            min: origin - Vec3::new(w, w, 0.0),
            max: origin + Vec3::new(w, w, self.height),
        }
    }
}

/// The result of sweeping a [`Hull`] through the map ([`Map::trace_hull`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HullTrace {
    /// How much of the move was made, 0..=1.
    pub fraction: f32,
    /// Where the feet end: the move's end when nothing was hit, else [`SKIN_M`] short of the
    /// face.
    pub end: Vec3,
    /// Unit normal of the face hit (pointing out of the box), zero when nothing was hit.
    pub normal: Vec3,
    /// Index in [`Map::boxes`] of the box hit; `None` when nothing or a barrier was hit.
    pub box_index: Option<usize>,
    /// Index in [`Map::barriers`] of the raised barrier hit; `None` when nothing or a box
    /// was hit.
    pub barrier_index: Option<usize>,
    /// The trace started inside a box or a raised barrier (which it then ignored).
    pub start_solid: bool,
}

/// Where a ray first meets a box ([`Map::trace_ray`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RayHit {
    /// Distance from the ray's origin, metres; 0 when the ray starts inside the box.
    pub distance: f32,
    /// The point hit.
    pub point: Vec3,
    /// Unit normal of the face hit, pointing out of the box; zero when the ray starts inside.
    pub normal: Vec3,
    /// Index in [`Map::boxes`] of the box hit.
    pub box_index: usize,
}

/// Why a map could not be loaded. Line numbers count from 1.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// The map file could not be read.
    #[error("cannot read map file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// No built-in map has this name.
    #[error("no built-in map named `{name}`; expected `arena` or `flat2km`")]
    UnknownBuiltin {
        /// The name asked for.
        name: String,
    },
    /// A line starts with a word that is not a directive.
    #[error(
        "line {line}: unknown directive `{word}`; expected `box`, `barrier`, `spawn` or `spawn_ring`"
    )]
    UnknownDirective {
        /// The line.
        line: usize,
        /// Its first word.
        word: String,
    },
    /// A directive has too few or too many fields.
    #[error("line {line}: `{directive}` has {found} fields; expected `{usage}`")]
    FieldCount {
        /// The line.
        line: usize,
        /// The directive.
        directive: &'static str,
        /// Fields found after the directive.
        found: usize,
        /// The directive's form.
        usage: &'static str,
    },
    /// A field does not hold a value of the kind and range the directive needs.
    #[error("line {line}: {field} is `{text}`, expected {range}, in `{usage}`")]
    BadValue {
        /// The line.
        line: usize,
        /// The field's name in `usage`.
        field: &'static str,
        /// The field as written (cut short when long).
        text: String,
        /// What would have been accepted.
        range: &'static str,
        /// The directive's form.
        usage: &'static str,
    },
    /// A box has no volume: on some axis its minimum is not below its maximum.
    #[error("line {line}: box is empty along {axis} ({min} is not below {max}); expected each MIN below its MAX in `{usage}`")]
    EmptyBox {
        /// The line.
        line: usize,
        /// `x`, `y` or `z`.
        axis: char,
        /// The minimum given.
        min: f32,
        /// The maximum given.
        max: f32,
        /// The directive's form.
        usage: &'static str,
    },
    /// The map holds more of something than a map may.
    #[error("line {line}: more than {limit} {what}; expected at most {limit}")]
    TooMany {
        /// The line that went over.
        line: usize,
        /// `boxes`, `barriers` or `spawn points`.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
    /// The map has no box.
    #[error("the map has no `box` line; expected at least one (the floor)")]
    NoBoxes,
    /// The map has no spawn point.
    #[error("the map has no spawn point; expected at least one `spawn` or `spawn_ring` line")]
    NoSpawns,
}

/// The maps shipped inside the binary, so the server runs from any working directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BuiltinMap {
    /// `maps/arena.map`: 60 × 40 m, walls, cover and two spawn rooms for 5-v-5.
    #[default]
    Arena,
    /// `maps/flat2km.map`: 2 × 2 km of flat floor in walls, 100 spawns on an 800 m circle.
    Flat2km,
}

impl BuiltinMap {
    /// Every built-in map.
    pub const ALL: [BuiltinMap; 2] = [BuiltinMap::Arena, BuiltinMap::Flat2km];

    /// The map's name, which is its file's stem under `maps/`.
    pub fn name(self) -> &'static str {
        match self {
            BuiltinMap::Arena => "arena",
            BuiltinMap::Flat2km => "flat2km",
        }
    }

    /// The built-in map called `name`, if any.
    pub fn from_name(name: &str) -> Option<BuiltinMap> {
        BuiltinMap::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The map file's text, embedded at build time.
    pub fn source(self) -> &'static str {
        match self {
            BuiltinMap::Arena => include_str!("../../../maps/arena.map"),
            BuiltinMap::Flat2km => include_str!("../../../maps/flat2km.map"),
        }
    }

    /// Parses the embedded file.
    ///
    /// # Panics
    /// If the embedded file is malformed; `every_builtin_map_loads` rules that out.
    pub fn load(self) -> Map {
        match Map::parse(self.source()) {
            Ok(map) => map,
            Err(e) => panic!("built-in map {} is malformed: {e}", self.name()),
        }
    }

    /// The map and the same map with its barriers raised (what the buy phase holds players
    /// in), parsed once per process and shared by every world that plays it: a match that
    /// starts, or starts over, copies no map.
    ///
    /// # Panics
    /// As [`BuiltinMap::load`].
    pub fn shared(self) -> SharedMap {
        // One immutable value per built-in map, made on first use: a lazily parsed
        // constant, not mutable state.
        static LOADED: [OnceLock<SharedMap>; BuiltinMap::ALL.len()] =
            [const { OnceLock::new() }; BuiltinMap::ALL.len()];
        let index = BuiltinMap::ALL.iter().position(|&m| m == self).unwrap_or(0);
        LOADED[index]
            .get_or_init(|| {
                let map = self.load();
                SharedMap {
                    with_barriers: Arc::new(map.with_barriers(true)),
                    map: Arc::new(map),
                }
            })
            .clone()
    }
}

/// A map as worlds share it: the map, and the same map with its barriers raised.
#[derive(Clone, Debug)]
pub struct SharedMap {
    /// The map with its barriers lowered.
    pub map: Arc<Map>,
    /// The map with its barriers raised.
    pub with_barriers: Arc<Map>,
}

/// A map: solid boxes, barriers, spawn points and the grid that finds boxes near a point.
/// Immutable once loaded; share it between matches behind an `Arc`.
#[derive(Clone, Debug)]
pub struct Map {
    boxes: Vec<Aabb>,
    /// Buy-phase barriers, outside the grid; they stop hull traces only when raised.
    barriers: Vec<Aabb>,
    barriers_raised: bool,
    spawns: Vec<SpawnPoint>,
    /// The boxes' bounds; barriers are not included.
    bounds: Aabb,
    grid: Grid,
}

impl Map {
    /// Parses a map from the text of a map file (the format is in the module docs). Its
    /// barriers are lowered: see [`Map::with_barriers`].
    pub fn parse(text: &str) -> Result<Map, MapError> {
        let parse::Parsed {
            boxes,
            barriers,
            spawns,
        } = parse::parse(text)?;
        let bounds = boxes.iter().skip(1).fold(boxes[0], |b, x| Aabb {
            min: b.min.min(x.min),
            max: b.max.max(x.max),
        });
        let grid = Grid::build(&bounds, &boxes);
        Ok(Map {
            boxes,
            barriers,
            barriers_raised: false,
            spawns,
            bounds,
            grid,
        })
    }

    /// Reads and parses the map file at `path`. Its barriers are lowered.
    pub fn load(path: impl AsRef<Path>) -> Result<Map, MapError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| MapError::Io {
            path: path.to_owned(),
            source,
        })?;
        Map::parse(&text)
    }

    /// The built-in map called `name` (`arena` or `flat2km`), embedded in the binary, with
    /// its barriers lowered.
    pub fn builtin(name: &str) -> Result<Map, MapError> {
        BuiltinMap::from_name(name)
            .map(BuiltinMap::load)
            .ok_or_else(|| MapError::UnknownBuiltin { name: quote(name) })
    }

    /// The solid boxes, in file order; [`HullTrace::box_index`] and [`RayHit::box_index`]
    /// index this. Barriers are not among them.
    pub fn boxes(&self) -> &[Aabb] {
        &self.boxes
    }

    /// The buy-phase barriers, in file order, raised or not; [`HullTrace::barrier_index`]
    /// indexes this.
    pub fn barriers(&self) -> &[Aabb] {
        &self.barriers
    }

    /// True when this map's hull traces collide with its barriers.
    pub fn barriers_raised(&self) -> bool {
        self.barriers_raised
    }

    /// A copy of this map whose barriers are `raised` (they stop [`Map::trace_hull`] and
    /// count in [`Map::hull_overlaps`]) or lowered (they stop nothing). Rays ignore barriers
    /// either way. Copies the boxes and the grid: call it once at load, not every tick, and
    /// move players against the raised copy while the buy phase holds them.
    #[must_use]
    pub fn with_barriers(&self, raised: bool) -> Map {
        Map {
            barriers_raised: raised,
            ..self.clone()
        }
    }

    /// The spawn points, in file order.
    pub fn spawns(&self) -> &[SpawnPoint] {
        &self.spawns
    }

    /// The smallest box holding every box of the map.
    pub fn bounds(&self) -> Aabb {
        self.bounds
    }

    /// The `n`th spawn point of `team`, counting round when `n` passes the team's last; any
    /// team's when `team` has none. Allocates nothing, so respawns may call it in a tick.
    pub fn spawn_point(&self, team: Team, n: usize) -> &SpawnPoint {
        let of_team = self.spawns.iter().filter(|s| s.team == team).count();
        if of_team == 0 {
            return &self.spawns[n % self.spawns.len()];
        }
        let nth = n % of_team;
        self.spawns
            .iter()
            .filter(|s| s.team == team)
            .nth(nth)
            .unwrap_or(&self.spawns[0])
    }

    /// Calls `f` with each box that may overlap `region` (a superset: the grid's boxes of its
    /// x-y extent and the large ones), until `f` breaks; says whether it did.
    pub(crate) fn for_each_box_near(
        &self,
        region: &Aabb,
        mut f: impl FnMut(&Aabb) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.grid.for_each_box(region.min, region.max, |index| {
            f(&self.boxes[index as usize])
        })
    }

    /// True when `hull` with its feet at `origin` overlaps the interior of some box, or of
    /// some barrier when they are raised.
    pub fn hull_overlaps(&self, hull: Hull, origin: Vec3) -> bool {
        let body = hull.at(origin);
        let in_box = self.grid.for_each_box(body.min, body.max, |index| {
            if self.boxes[index as usize].overlaps(&body) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        let hit = in_box.is_break() || self.raised_barriers().iter().any(|b| b.overlaps(&body));
        #[cfg(test)]
        assert_eq!(hit, reference::hull_overlaps(self, hull, origin));
        hit
    }

    /// The barriers hull traces test: all of them when raised, none when lowered.
    fn raised_barriers(&self) -> &[Aabb] {
        if self.barriers_raised {
            &self.barriers
        } else {
            &[]
        }
    }

    /// Sweeps `hull` with its feet from `start` to `end` and reports the first box face it
    /// would cross, or raised barrier face. The end stops [`SKIN_M`] short of that face, so a
    /// following move starts outside every box. Boxes and barriers the hull starts inside are
    /// ignored.
    pub fn trace_hull(&self, start: Vec3, end: Vec3, hull: Hull) -> HullTrace {
        let sweep = Sweep::new(start, end, hull);
        let mut trace = HullTrace::unstopped(end);
        // The boxes `Grid::for_each_box` reports, in its order, for the first box entered at
        // the least fraction wins. Walked here rather than through its callback, which the
        // compiler leaves out of line: this loop is the hot one.
        let g = &self.grid;
        for &index in &g.large {
            trace.clip_box(&sweep, &g.corners[index as usize], index);
        }
        let (min, max) = sweep.query();
        if let Some(q) = g.query_cells(min, max) {
            for row in q[2]..=q[3] {
                for col in q[0]..=q[1] {
                    for &index in g.cell(col, row) {
                        if g.reports_in(index, col, row, q) {
                            trace.clip_box(&sweep, &g.corners[index as usize], index);
                        }
                    }
                }
            }
        }
        for (index, b) in self.raised_barriers().iter().enumerate() {
            trace.clip_barrier(&sweep, b, index);
        }
        let trace = trace.finish(start);
        #[cfg(test)]
        reference::assert_same_trace(self, start, end, hull, &trace);
        trace
    }

    /// The first box a ray from `origin` along `dir` meets within `max_distance` metres.
    /// Barriers, raised or not, are see-through and shoot-through: rays ignore them.
    ///
    /// `dir` need not be unit length. A ray starting inside a box hits it at distance 0 with
    /// a zero normal; a ray that only grazes a face or an edge does not hit. Tests the large
    /// boxes, then walks the grid's cells in ray order and stops at the first cell whose boxes
    /// hold a hit, so a ray costs the cells it crosses up to its hit. `None` for a zero or
    /// non-finite `dir` or `origin`, and for a `max_distance` that is not ≥ 0.
    pub fn trace_ray(&self, origin: Vec3, dir: Vec3, max_distance: f32) -> Option<RayHit> {
        let len = dir.length();
        if !(len > 0.0 && len.is_finite() && origin.is_finite() && max_distance >= 0.0) {
            return None;
        }
        let d = dir * (1.0 / len);
        let (o, da) = (origin.to_array(), d.to_array());
        let g = &self.grid;
        let mut best = None;
        for &index in &g.large {
            self.ray_test(o, da, index as usize, max_distance, &mut best);
        }
        if !g.entries.is_empty() {
            self.ray_walk(o, da, max_distance, &mut best);
        }
        best.map(|(distance, normal, box_index)| RayHit {
            distance,
            point: origin + d * distance,
            normal,
            box_index,
        })
    }

    /// Tests box `index` against the ray and keeps it in `best` (distance, normal, index) when
    /// it is nearer.
    fn ray_test(
        &self,
        o: [f32; 3],
        d: [f32; 3],
        index: usize,
        max_t: f32,
        best: &mut Option<(f32, Vec3, usize)>,
    ) {
        if let Some((t, normal)) = ray_box(o, d, &self.boxes[index], max_t) {
            if !matches!(*best, Some((b, _, _)) if b <= t) {
                *best = Some((t, normal, index));
            }
        }
    }

    /// Walks the grid's cells along the ray (Amanatides–Woo) testing the boxes listed in them,
    /// and stops once past the nearest hit so far.
    fn ray_walk(
        &self,
        o: [f32; 3],
        d: [f32; 3],
        max_t: f32,
        best: &mut Option<(f32, Vec3, usize)>,
    ) {
        let g = &self.grid;
        // Clip the ray to the grid's x-y rectangle: outside it there are no boxes.
        let (mut t_in, mut t_out) = (0.0_f32, max_t);
        for axis in 0..2 {
            if d[axis] == 0.0 {
                if o[axis] < g.min[axis] || o[axis] > g.max[axis] {
                    return;
                }
            } else {
                let a = (g.min[axis] - o[axis]) / d[axis];
                let b = (g.max[axis] - o[axis]) / d[axis];
                t_in = t_in.max(a.min(b));
                t_out = t_out.min(a.max(b));
            }
        }
        if t_in > t_out {
            return;
        }
        let mut cell = [
            g.cell_of(0, o[0] + d[0] * t_in),
            g.cell_of(1, o[1] + d[1] * t_in),
        ];
        let step = [step_of(d[0]), step_of(d[1])];
        // Distance along the ray to the far boundary of the current cell on `axis`.
        let boundary_t = |axis: usize, cell: [u32; 2]| -> f32 {
            if step[axis] == 0 {
                return f32::INFINITY;
            }
            let edge = cell[axis] + u32::from(step[axis] > 0);
            (g.min[axis] + edge as f32 * g.cell_m - o[axis]) / d[axis]
        };
        let mut previous: Option<[u32; 2]> = None;
        for _ in 0..g.cells[0] + g.cells[1] {
            for &index in g.cell(cell[0], cell[1]) {
                // The ray's cells inside a box's cell rectangle come one after another: a
                // box also listed in the previous cell has been tested.
                let r = g.ranges[index as usize];
                let tested = previous
                    .is_some_and(|[c, w]| (r[0]..=r[1]).contains(&c) && (r[2]..=r[3]).contains(&w));
                if !tested {
                    self.ray_test(o, d, index as usize, max_t, best);
                }
            }
            let (tx, ty) = (boundary_t(0, cell), boundary_t(1, cell));
            let cell_exit = tx.min(ty);
            // A box outside the cells walked so far is met no sooner than the ray leaves
            // this one.
            if matches!(*best, Some((b, _, _)) if b <= cell_exit) || cell_exit >= t_out {
                return;
            }
            previous = Some(cell);
            let axis = usize::from(ty < tx);
            match cell[axis].checked_add_signed(step[axis]) {
                Some(next) if next < g.cells[axis] => cell[axis] = next,
                _ => return,
            }
        }
    }
}

fn step_of(d: f32) -> i32 {
    if d > 0.0 {
        1
    } else if d < 0.0 {
        -1
    } else {
        0
    }
}

/// The slab test of a ray (unit `d`) against one box: the distance and face normal of the
/// entry, within `max_t`.
fn ray_box(o: [f32; 3], d: [f32; 3], b: &Aabb, max_t: f32) -> Option<(f32, Vec3)> {
    let (lo, hi) = (b.min.to_array(), b.max.to_array());
    let mut near = f32::NEG_INFINITY;
    let mut far = f32::INFINITY;
    let mut near_axis = 0;
    for axis in 0..3 {
        if d[axis] == 0.0 {
            // Parallel to this slab: inside it or never; on its face is a graze.
            if o[axis] <= lo[axis] || o[axis] >= hi[axis] {
                return None;
            }
            continue;
        }
        let t1 = (lo[axis] - o[axis]) / d[axis];
        let t2 = (hi[axis] - o[axis]) / d[axis];
        let (t_near, t_far) = if t1 < t2 { (t1, t2) } else { (t2, t1) };
        if t_near > near {
            near = t_near;
            near_axis = axis;
        }
        far = far.min(t_far);
    }
    if near >= far || far <= 0.0 || near > max_t {
        return None;
    }
    if near < 0.0 {
        return Some((0.0, Vec3::ZERO));
    }
    let mut n = [0.0; 3];
    n[near_axis] = -d[near_axis].signum();
    Some((near, Vec3::from_array(n)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HULL: Hull = Hull {
        half_width: 0.4,
        height: 1.8,
    };

    /// Every box, no grid: what the grid must agree with.
    fn brute_ray(map: &Map, o: Vec3, dir: Vec3, max: f32) -> Option<(f32, usize)> {
        let d = dir * (1.0 / dir.length());
        let mut best: Option<(f32, usize)> = None;
        for (i, b) in map.boxes().iter().enumerate() {
            if let Some((t, _)) = ray_box(o.to_array(), d.to_array(), b, max) {
                if !matches!(best, Some((bt, _)) if bt <= t) {
                    best = Some((t, i));
                }
            }
        }
        best
    }

    fn brute_hull(map: &Map, start: Vec3, end: Vec3) -> HullTrace {
        let mut t = HullTrace::unstopped(end);
        let lo = Vec3::new(HULL.half_width, HULL.half_width, HULL.height);
        let hi = Vec3::new(HULL.half_width, HULL.half_width, 0.0);
        for (i, b) in map.boxes().iter().enumerate() {
            let grown = Aabb {
                min: b.min - lo,
                max: b.max + hi,
            };
            if reference::clip(start, end, &grown, &mut t) {
                t.box_index = Some(i);
            }
        }
        if t.fraction < 1.0 {
            t.end = start + (end - start) * t.fraction;
        }
        t
    }

    fn arena_point() -> impl Strategy<Value = Vec3> {
        (-35.0f32..35.0, -25.0f32..25.0, -2.0f32..14.0).prop_map(|(x, y, z)| Vec3::new(x, y, z))
    }

    /// A map of up to 60 boxes, from pebbles to ones larger than the grid's large-box limit,
    /// scattered over 300 m.
    fn scattered_map() -> impl Strategy<Value = Map> {
        proptest::collection::vec(
            (
                -150.0f32..150.0,
                -150.0f32..150.0,
                -5.0f32..5.0,
                0.1f32..60.0,
                0.1f32..60.0,
                0.1f32..4.0,
            ),
            1..60,
        )
        .prop_map(|boxes| {
            let mut text = String::from("spawn attackers 0 0 0 0\n");
            for (x, y, z, w, d, h) in boxes {
                text += &format!("box {x} {y} {z} {} {} {}\n", x + w, y + d, z + h);
            }
            Map::parse(&text).unwrap()
        })
    }

    fn scattered_point() -> impl Strategy<Value = Vec3> {
        (-200.0f32..200.0, -200.0f32..200.0, -6.0f32..10.0).prop_map(|(x, y, z)| Vec3::new(x, y, z))
    }

    proptest! {
        #[test]
        fn on_scattered_maps_the_grid_agrees_with_every_box(
            map in scattered_map(),
            a in scattered_point(),
            b in scattered_point(),
            short in 0.0f32..1.0,
        ) {
            let dir = b - a;
            prop_assume!(dir.length() > 1e-3);
            let max = dir.length() * short * 2.0;
            let got = map.trace_ray(a, dir, max).map(|h| h.distance);
            prop_assert_eq!(got, brute_ray(&map, a, dir, max).map(|w| w.0));
            // A short sweep, as a tick's move is, and a long one.
            let near = a + dir * (0.05 * short);
            for end in [near, b] {
                let got = map.trace_hull(a, end, HULL);
                let want = brute_hull(&map, a, end);
                prop_assert_eq!(got.fraction, want.fraction);
                prop_assert_eq!(got.start_solid, want.start_solid);
            }
        }

        #[test]
        fn the_grid_ray_agrees_with_every_box(
            o in arena_point(),
            d in (-1.0f32..1.0, -1.0f32..1.0, -1.0f32..1.0),
            max in prop_oneof![Just(f32::INFINITY), 0.0f32..80.0],
        ) {
            let map = BuiltinMap::Arena.load();
            let dir = Vec3::new(d.0, d.1, d.2);
            prop_assume!(dir.length() > 1e-3);
            let got = map.trace_ray(o, dir, max).map(|h| (h.distance, h.box_index));
            let want = brute_ray(&map, o, dir, max);
            // Equal distances may name different boxes; the distance must match exactly.
            prop_assert_eq!(got.map(|g| g.0), want.map(|w| w.0));
        }

        #[test]
        fn the_grid_hull_trace_agrees_with_every_box(a in arena_point(), b in arena_point()) {
            let map = BuiltinMap::Arena.load();
            let got = map.trace_hull(a, b, HULL);
            let want = brute_hull(&map, a, b);
            prop_assert_eq!(got.fraction, want.fraction);
            prop_assert_eq!(got.end, want.end);
            prop_assert_eq!(got.start_solid, want.start_solid);
        }

        #[test]
        fn the_grid_visits_each_nearby_box_once(a in arena_point(), b in arena_point()) {
            let map = BuiltinMap::Arena.load();
            let (lo, hi) = (a.min(b), a.max(b));
            let mut seen = vec![0u32; map.boxes().len()];
            let _ = map.grid.for_each_box(lo, hi, |i| {
                seen[i as usize] += 1;
                ControlFlow::Continue(())
            });
            for (i, bx) in map.boxes().iter().enumerate() {
                prop_assert!(seen[i] <= 1);
                let reaches = bx.min.x <= hi.x && bx.max.x >= lo.x && bx.min.y <= hi.y && bx.max.y >= lo.y;
                if reaches {
                    prop_assert_eq!(seen[i], 1, "box {} missed", i);
                }
            }
        }
    }
}
