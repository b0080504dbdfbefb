//! Hitscan shots with lag compensation: a shot is tested against the world as its shooter
//! saw it.
//!
//! [`fire`] takes the shooter's command tick minus its interpolation delay (fractions of a
//! tick lerp between ticks), clamped to the max rewind and to the ticks the [`History`]
//! holds. It traces the map first: the first box on the ray bounds the shot. Then a broad
//! phase keeps only the players whose rewound bounding box ([`History::reach`] around their
//! feet) the shot's segment enters, nearest hit so far included; only those players'
//! hitboxes are rewound and tested. The nearest hitbox on the ray wins, the head before the
//! body at the same distance ([`crate::pose::SAME_DISTANCE_M`]).
//!
//! In a match of many players the history keeps a grid over where each player stood in the
//! ticks it holds ([`crate::history::broad`]): the shot walks the cells its segment crosses
//! and tests only the players listed there, first against their box over those ticks and
//! then, rewound, against their bounding box. Candidates are tested in slot order, as every
//! player is without the grid, so the grid changes what a shot costs and never what it
//! hits: a player it leaves out is one whose rewound bounding box the segment misses.
//!
//! Nothing is written: the map and the history are borrowed, the live world is not passed
//! in at all, and the result is plain data for [`crate::rules::Rules::apply_hit`].
//!
//! The ray and box work is charged to [`Category::Physics`]; a pose a rewind has to compute
//! (see [`crate::history`]) to [`Category::Animation`].

use tickforge_telemetry::{Category, Scopes};

use crate::history::{History, RewindTime};
use crate::map::Map;
use crate::math::Vec3;
use crate::pose::{beats, HITBOX_COUNT, SAME_DISTANCE_M};
use crate::rules::BodyPart;
use crate::{angle16_to_rad, PlayerSlot, Tick};

/// One hitscan shot, as the server received it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shot {
    /// Who fired; its own hitboxes are never hit.
    pub shooter: PlayerSlot,
    /// The tick of the command that fired.
    pub command_tick: Tick,
    /// How far behind the command tick the shooter's view was rendered, ticks; fractions
    /// lerp between ticks.
    pub interp_delay_ticks: f32,
    /// Where the shot starts (the shooter's eye), metres.
    pub origin: Vec3,
    /// Where it goes; any length above zero.
    pub direction: Vec3,
    /// Farthest it reaches, metres; infinity for no limit.
    pub max_range_m: f32,
}

/// Who a shot hit, where, and how far away.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HitResult {
    /// The player hit.
    pub victim: PlayerSlot,
    /// The hitbox hit.
    pub part: BodyPart,
    /// From the shot's origin to the hit, metres.
    pub distance_m: f32,
    /// Where the shot entered the hitbox, metres.
    pub point: Vec3,
}

/// What one shot cost and where it looked: for tests, benches and the hit-registration
/// report.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShotStats {
    /// The time the shot was tested at, after clamping; `None` when nothing was tested.
    pub rewound_to: Option<RewindTime>,
    /// Distance to the first map box on the ray within range, metres.
    pub wall_m: Option<f32>,
    /// Grid cells the shot's segment crossed; 0 when the history keeps no grid (few
    /// players) or the shot starts too far from it.
    pub cells_walked: u32,
    /// Candidates the broad phase tested (alive now, not the shooter): those listed in the
    /// cells walked and those every shot tests, or every player when the grid is not used.
    pub broad_tests: u32,
    /// Players whose hitboxes were rewound and tested: those the broad phase kept.
    pub narrow_players: u32,
    /// Capsules tested against the ray.
    pub capsule_tests: u32,
    /// Poses computed for the rewind (ticks with no later posed tick to lerp toward).
    pub poses_on_demand: u32,
}

/// The unit direction of a view: `yaw` and `pitch` in 1/65536 turn, yaw 0 along +x and a
/// quarter turn along +y, positive pitch up.
pub fn aim_direction(yaw: u16, pitch: i16) -> Vec3 {
    let (sin_yaw, cos_yaw) = angle16_to_rad(yaw).sin_cos();
    let (sin_pitch, cos_pitch) = (f32::from(pitch) * (std::f32::consts::TAU / 65536.0)).sin_cos();
    Vec3::new(cos_pitch * cos_yaw, cos_pitch * sin_yaw, sin_pitch)
}

/// Tests `shot` against the players of `history` as the shooter saw them, with `map`
/// occluding. `players_alive[slot]` says who may be hit now (a player dead now is not hit
/// in the past); clear a teammate's entry to let shots pass through teammates. `None` for
/// a miss, for a zero or non-finite direction or origin, for a range that is not ≥ 0, and
/// before anything is recorded.
pub fn fire(
    shot: &Shot,
    map: &Map,
    history: &History,
    players_alive: &[bool],
    scopes: &Scopes,
) -> Option<HitResult> {
    fire_with_stats(
        shot,
        map,
        history,
        players_alive,
        scopes,
        &mut ShotStats::default(),
    )
}

/// [`fire`], also filling `stats` (reset first) with what the shot tested.
pub fn fire_with_stats(
    shot: &Shot,
    map: &Map,
    history: &History,
    players_alive: &[bool],
    scopes: &Scopes,
    stats: &mut ShotStats,
) -> Option<HitResult> {
    fire_on(shot, map, history, players_alive, scopes, stats, true)
}

/// [`fire_with_stats`], through the history's grid when `use_grid` and it keeps one, and
/// testing every player otherwise.
fn fire_on(
    shot: &Shot,
    map: &Map,
    history: &History,
    players_alive: &[bool],
    scopes: &Scopes,
    stats: &mut ShotStats,
    use_grid: bool,
) -> Option<HitResult> {
    let _physics = scopes.scope(Category::Physics);
    *stats = ShotStats::default();
    let length = shot.direction.length();
    let valid =
        length > 0.0 && length.is_finite() && shot.origin.is_finite() && shot.max_range_m >= 0.0;
    if !valid {
        return None;
    }
    let origin = shot.origin;
    let dir = shot.direction * (1.0 / length);
    let time = history.rewind_time(shot.command_tick, shot.interp_delay_ticks)?;
    stats.rewound_to = Some(time);
    let at = history.resolve(time)?;
    stats.wall_m = map
        .trace_ray(origin, dir, shot.max_range_m)
        .map(|h| h.distance);
    let limit = stats.wall_m.unwrap_or(shot.max_range_m);
    let reach = history.reach();

    let mut best: Option<(usize, BodyPart, f32)> = None;
    let grid = history.broad_phase().filter(|_| use_grid);
    let mut test = |slot: usize| {
        if slot == usize::from(shot.shooter.0) || !players_alive.get(slot).copied().unwrap_or(false)
        {
            return;
        }
        stats.broad_tests += 1;
        // A player entered farther than the best hit so far cannot beat it.
        let near = best.map_or(limit, |(_, _, t)| limit.min(t + SAME_DISTANCE_M));
        // Its box over the held ticks holds its rewound bounding box: a segment that misses
        // it misses that too, without the rewind.
        if let Some(w) = grid.map(|g| g.window(slot)) {
            if !segment_enters(origin, dir, near, w.min, w.max) {
                return;
            }
        }
        let Some(root) = history.root_at(slot, at) else {
            return;
        };
        if !segment_enters(
            origin,
            dir,
            near,
            root.origin + reach.min,
            root.origin + reach.max,
        ) {
            return;
        }
        stats.narrow_players += 1;
        stats.capsule_tests += HITBOX_COUNT as u32;
        let boxes = history.hitboxes_of(slot, at, &root, Some(scopes), &mut stats.poses_on_demand);
        if let Some((part, t)) = boxes.first_hit(origin, dir, limit) {
            let better = match best {
                None => true,
                Some((_, best_part, best_t)) => beats((part, t), (best_part, best_t)),
            };
            if better {
                best = Some((slot, part, t));
            }
        }
    };
    let mut walked = 0;
    let through_grid =
        grid.is_some_and(|g| g.for_each_candidate(origin, dir, limit, &mut walked, &mut test));
    if !through_grid {
        (0..history.players()).for_each(&mut test);
    }
    stats.cells_walked = walked;
    best.map(|(slot, part, t)| HitResult {
        // `slot` < players ≤ 255.
        victim: PlayerSlot(slot as u16),
        part,
        distance_m: t,
        point: origin + dir * t,
    })
}

/// True when the segment from `origin` along unit `dir` for `length` metres touches the box
/// from `min` to `max` (faces included: the broad phase may keep too much, never too little).
/// A client that judges shots as the server does uses it too.
pub fn segment_enters(origin: Vec3, dir: Vec3, length: f32, min: Vec3, max: Vec3) -> bool {
    let (o, d, lo, hi) = (
        origin.to_array(),
        dir.to_array(),
        min.to_array(),
        max.to_array(),
    );
    let (mut enter, mut leave) = (0.0_f32, length);
    for axis in 0..3 {
        if d[axis] == 0.0 {
            if o[axis] < lo[axis] || o[axis] > hi[axis] {
                return false;
            }
            continue;
        }
        let a = (lo[axis] - o[axis]) / d[axis];
        let b = (hi[axis] - o[axis]) / d[axis];
        enter = enter.max(a.min(b));
        leave = leave.min(a.max(b));
        if enter > leave {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aim_direction_follows_yaw_and_pitch() {
        let d = aim_direction(16384, 0);
        assert!(d.x.abs() < 1e-6 && (d.y - 1.0).abs() < 1e-6);
        let up = aim_direction(0, 8192); // 45° up
        assert!((up.z - up.x).abs() < 1e-6 && up.z > 0.0);
        assert!((aim_direction(12345, -5000).length() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn a_segment_enters_a_box_it_crosses_and_not_one_past_its_end() {
        let (lo, hi) = (Vec3::new(4.0, -1.0, 0.0), Vec3::new(5.0, 1.0, 2.0));
        let x = Vec3::new(1.0, 0.0, 0.0);
        let o = Vec3::new(0.0, 0.0, 1.0);
        assert!(segment_enters(o, x, 10.0, lo, hi));
        assert!(segment_enters(o, x, 4.0, lo, hi));
        assert!(!segment_enters(o, x, 3.9, lo, hi));
        assert!(!segment_enters(o, -x, 10.0, lo, hi));
        assert!(!segment_enters(
            o + Vec3::new(0.0, 1.5, 0.0),
            x,
            10.0,
            lo,
            hi
        ));
        assert!(segment_enters(o, x, f32::INFINITY, lo, hi));
    }
}
