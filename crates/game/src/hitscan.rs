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
        // `slot` < players ≤ u16::MAX.
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
    use crate::history::{HistoryConfig, PlayerSample, Posing};
    use crate::movement::PlayerState;
    use crate::pose::Stance;
    use proptest::prelude::*;
    use std::num::NonZeroU32;
    use std::time::{Duration, Instant};

    const EYE_M: f32 = 1.6;

    /// A 2 km floor, and `walls` as boxes `(x, y, w, d)` 3 m high.
    fn floor_map(walls: &[(f32, f32, f32, f32)]) -> Map {
        let mut text = String::from("box -1000 -1000 -1 1000 1000 0\nspawn attackers 0 0 0 0\n");
        for (x, y, w, d) in walls {
            text += &format!("box {x} {y} 0 {} {} 3\n", x + w, y + d);
        }
        Map::parse(&text).unwrap()
    }

    /// A history of `players` slots at `tick_hz`, with the grid or without.
    fn history(players: u16, tick_hz: u32, grid: bool) -> History {
        History::with_grid(
            HistoryConfig {
                players,
                tick_hz: NonZeroU32::new(tick_hz).unwrap(),
                max_rewind: Duration::from_millis(200),
                ..HistoryConfig::default()
            },
            grid,
        )
    }

    fn sample(origin: Vec3, yaw: u16, crouch: bool, alive: bool) -> PlayerSample {
        PlayerSample {
            state: PlayerState {
                origin,
                yaw,
                crouched: crouch,
                on_ground: true,
                ..PlayerState::default()
            },
            stance: if crouch {
                Stance::Crouching
            } else {
                Stance::Standing
            },
            alive,
        }
    }

    /// Fires `shot` through the grid and at every player, asserts both found the same and
    /// tested the same, and returns what the grid found and its stats.
    fn fire_both(
        shot: &Shot,
        map: &Map,
        h: &History,
        alive: &[bool],
    ) -> (Option<HitResult>, ShotStats) {
        let scopes = Scopes::new(Instant::now);
        let (mut grid, mut every) = (ShotStats::default(), ShotStats::default());
        let got = fire_on(shot, map, h, alive, &scopes, &mut grid, true);
        let want = fire_on(shot, map, h, alive, &scopes, &mut every, false);
        // Bit for bit: a hit at an infinite distance has a NaN point.
        let bits = |r: Option<HitResult>| {
            r.map(|r| {
                let p = r.point.to_array().map(f32::to_bits);
                (r.victim, r.part, r.distance_m.to_bits(), p)
            })
        };
        assert_eq!(bits(got), bits(want), "{shot:?}");
        let same = |s: &ShotStats| {
            (
                s.rewound_to,
                s.wall_m,
                s.narrow_players,
                s.capsule_tests,
                s.poses_on_demand,
            )
        };
        assert_eq!(same(&grid), same(&every), "{shot:?}");
        assert!(grid.broad_tests <= every.broad_tests);
        (got, grid)
    }

    /// How one player moves over the ticks recorded.
    #[derive(Clone, Debug)]
    struct Plan {
        start: (f32, f32, f32),
        /// m/s along x and y.
        velocity: (f32, f32),
        /// On this tick, jump to this x-y.
        teleport: Option<(u8, f32, f32)>,
        /// Dead on the ticks from the first to the second.
        dead: Option<(u8, u8)>,
        crouch_every: u8,
        yaw: u16,
        alive_now: bool,
    }

    fn plan() -> impl Strategy<Value = Plan> {
        (
            (-25.0f32..25.0, -25.0f32..25.0, 0.0f32..3.0),
            (-8.0f32..8.0, -8.0f32..8.0),
            prop::option::weighted(0.1, (0u8..40, -400.0f32..400.0, -400.0f32..400.0)),
            prop::option::weighted(0.1, (0u8..40, 0u8..40)),
            1u8..12,
            any::<u16>(),
            prop::bool::weighted(0.9),
        )
            .prop_map(
                |(start, velocity, teleport, dead, crouch_every, yaw, alive_now)| Plan {
                    start,
                    velocity,
                    teleport,
                    dead,
                    crouch_every,
                    yaw,
                    alive_now,
                },
            )
    }

    /// Where a shot starts: by a player, anywhere near, far outside, or far beyond.
    #[derive(Clone, Debug)]
    enum From {
        Player(usize),
        Near(f32, f32, f32),
        Outside(f32, f32),
        Beyond(f32, f32),
    }

    fn shot_plan() -> impl Strategy<Value = (From, (u16, i16, u8), f32, f32, usize)> {
        let from = prop_oneof![
            4 => (0usize..100).prop_map(From::Player),
            2 => (-40.0f32..40.0, -40.0f32..40.0, -1.0f32..5.0)
                .prop_map(|(x, y, z)| From::Near(x, y, z)),
            1 => (-900.0f32..900.0, -900.0f32..900.0).prop_map(|(x, y)| From::Outside(x, y)),
            1 => (3000.0f32..9000.0, -9000.0f32..9000.0).prop_map(|(x, y)| From::Beyond(x, y)),
        ];
        // Yaw and pitch, or along an axis (`kind` above 0).
        let aim = (any::<u16>(), -12000i16..12000, 0u8..12);
        let range = prop_oneof![Just(f32::INFINITY), 0.0f32..80.0];
        (from, aim, 0.0f32..12.0, range, 0usize..100)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Players running, crouching, dying and teleporting over more ticks than the
        /// history holds; shots from anywhere, any way, at any rewind: the grid finds
        /// exactly what testing every player finds.
        #[test]
        fn the_grid_hits_what_testing_every_player_hits(
            plans in prop::collection::vec(plan(), 0..70),
            tick_hz in prop_oneof![Just(30u32), Just(128)],
            ticks in 1u8..40,
            walls in prop::collection::vec(
                (-30.0f32..30.0, -30.0f32..30.0, 0.2f32..8.0, 0.2f32..8.0), 0..4),
            shots in prop::collection::vec(shot_plan(), 1..24),
        ) {
            let map = floor_map(&walls);
            let players = plans.len() as u16;
            let mut h = history(players, tick_hz, true);
            let scopes = Scopes::new(Instant::now);
            let dt = 1.0 / tick_hz as f32;
            let mut feet: Vec<Vec3> =
                plans.iter().map(|p| Vec3::new(p.start.0, p.start.1, p.start.2)).collect();
            for tick in 0..ticks {
                let samples: Vec<PlayerSample> = plans
                    .iter()
                    .zip(&mut feet)
                    .map(|(p, f)| {
                        *f += Vec3::new(p.velocity.0, p.velocity.1, 0.0) * dt;
                        if let Some((at, x, y)) = p.teleport {
                            if at == tick {
                                *f = Vec3::new(x, y, f.z);
                            }
                        }
                        let dead = p.dead.is_some_and(|(a, b)| (a..=b).contains(&tick));
                        let crouch = (tick / p.crouch_every) % 2 == 1;
                        let yaw = p.yaw.wrapping_add(u16::from(tick) * 700);
                        sample(*f, yaw, crouch, !dead)
                    })
                    .collect();
                let posing = if tick % 13 < 2 { Posing::Idle } else { Posing::Animated };
                h.record(Tick(1000 + u32::from(tick)), samples, posing, &scopes);
            }
            let alive: Vec<bool> = plans.iter().map(|p| p.alive_now).collect();
            let newest = h.newest().unwrap();
            for (from, (yaw, pitch, kind), delay, range, shooter) in shots {
                let origin = match from {
                    From::Player(i) if !feet.is_empty() => {
                        feet[i % feet.len()] + Vec3::new(0.0, 0.0, EYE_M)
                    }
                    From::Player(_) => Vec3::new(0.0, 0.0, EYE_M),
                    From::Near(x, y, z) => Vec3::new(x, y, z),
                    From::Outside(x, y) | From::Beyond(x, y) => Vec3::new(x, y, EYE_M),
                };
                let direction = match kind {
                    1 => Vec3::new(1.0, 0.0, 0.0),
                    2 => Vec3::new(0.0, -1.0, 0.0),
                    3 => Vec3::new(0.0, 0.0, -1.0),
                    // Toward the centre, where the crowd is.
                    4 | 5 => Vec3::new(-origin.x, -origin.y, 1.0 - origin.z),
                    _ => aim_direction(yaw, pitch),
                };
                let shot = Shot {
                    shooter: PlayerSlot((shooter % plans.len().max(1)) as u16),
                    command_tick: newest,
                    interp_delay_ticks: delay,
                    origin,
                    direction,
                    max_range_m: range,
                };
                fire_both(&shot, &map, &h, &alive);
            }
        }
    }

    /// Players standing in a line along `x`, 2 m apart from `y0`, recorded for `ticks`.
    fn line_history(x: f32, y0: f32, players: u16, ticks: u32) -> History {
        let scopes = Scopes::new(Instant::now);
        let mut h = history(players, 128, true);
        for tick in 0..ticks {
            let samples = (0..players)
                .map(|i| sample(Vec3::new(x, y0 + 2.0 * f32::from(i), 0.0), 0, false, true));
            h.record(Tick(tick), samples, Posing::Animated, &scopes);
        }
        h
    }

    /// 40 players on a grid of 8 columns 3 m apart (the second column at `x1`) and rows 2 m
    /// apart, and one more off to the side to widen the grid.
    fn columns(x1: f32) -> History {
        let scopes = Scopes::new(Instant::now);
        let mut h = history(41, 128, true);
        for tick in 0..30 {
            let samples = (0..41u16).map(|i| {
                let at = match (i, i % 8) {
                    (40, _) => Vec3::new(20.0, 0.0, 0.0),
                    (_, 1) => Vec3::new(x1, 2.0 * f32::from(i / 8), 0.0),
                    (_, col) => Vec3::new(3.0 * f32::from(col), 2.0 * f32::from(i / 8), 0.0),
                };
                sample(at, 0, false, true)
            });
            h.record(Tick(tick), samples, Posing::Animated, &scopes);
        }
        h
    }

    #[test]
    fn a_shot_along_a_cell_border_finds_the_players_on_it() {
        let map = floor_map(&[]);
        let h = columns(3.0);
        let (min, cells, cell_m) = h.broad_phase().unwrap().geometry();
        assert!(cells[0] > 2 && cells[1] > 2, "{cells:?}");
        let alive = [true; 41];
        let newest = h.newest().unwrap();
        let mut hits = 0;
        // Along every inner column and row border, both ways, at body height; and through
        // cell corners diagonally.
        for k in 1..cells[0].max(cells[1]) {
            let x = (min[0] + f64::from(k.min(cells[0] - 1)) * cell_m) as f32;
            let y = (min[1] + f64::from(k.min(cells[1] - 1)) * cell_m) as f32;
            let corner = Vec3::new(min[0] as f32, min[1] as f32, 1.2);
            for (origin, direction) in [
                (Vec3::new(x, -50.0, 1.2), Vec3::new(0.0, 1.0, 0.0)),
                (Vec3::new(x, 80.0, 1.2), Vec3::new(0.0, -1.0, 0.0)),
                (Vec3::new(-50.0, y, 1.2), Vec3::new(1.0, 0.0, 0.0)),
                (Vec3::new(80.0, y, 1.2), Vec3::new(-1.0, 0.0, 0.0)),
                (corner, Vec3::new(1.0, 1.0, 0.0)),
                (Vec3::new(x, y, 1.2), Vec3::new(-1.0, -1.0, 0.0)),
            ] {
                for delay in [0.0, 3.5, 30.0] {
                    let shot = Shot {
                        shooter: PlayerSlot(40),
                        command_tick: newest,
                        interp_delay_ticks: delay,
                        origin,
                        direction,
                        max_range_m: 500.0,
                    };
                    let (hit, stats) = fire_both(&shot, &map, &h, &alive);
                    hits += usize::from(hit.is_some());
                    assert!(stats.cells_walked > 0, "{shot:?}");
                }
            }
        }
        assert!(hits > 0);

        // The second column moved onto the first border: the grid is the same, and a shot
        // along the border, or a hair either side of it, hits its first player.
        let border = (min[0] + cell_m) as f32;
        let h = columns(border);
        assert_eq!(h.broad_phase().unwrap().geometry(), (min, cells, cell_m));
        for x in [border - 1e-4, border, border + 1e-4] {
            let shot = Shot {
                shooter: PlayerSlot(40),
                command_tick: newest,
                interp_delay_ticks: 0.0,
                origin: Vec3::new(x, -5.0, 1.2),
                direction: Vec3::new(0.0, 1.0, 0.0),
                max_range_m: 500.0,
            };
            let (hit, _) = fire_both(&shot, &map, &h, &alive);
            assert_eq!(hit.map(|h| h.victim), Some(PlayerSlot(1)), "{x}");
        }
    }

    #[test]
    fn a_shot_from_outside_the_grid_walks_in_and_one_from_far_beyond_tests_everyone() {
        let map = floor_map(&[]);
        let h = line_history(0.0, 0.0, 40, 10);
        let alive = [true; 40];
        let newest = h.newest().unwrap();
        let from = |x: f32| Shot {
            shooter: PlayerSlot(0),
            command_tick: newest,
            interp_delay_ticks: 0.0,
            origin: Vec3::new(x, 10.0, 1.2),
            direction: Vec3::new(-x.signum(), 0.0, 0.0),
            max_range_m: f32::INFINITY,
        };
        // 500 m out: the segment is clipped to the grid and walks it.
        let (hit, stats) = fire_both(&from(-500.0), &map, &h, &alive);
        assert_eq!(hit.map(|h| h.victim), Some(PlayerSlot(5)));
        assert!(
            stats.cells_walked > 0 && stats.broad_tests < 39,
            "{stats:?}"
        );
        // Pointing away from the grid: nothing walked, nothing tested.
        let away = Shot {
            direction: Vec3::new(-1.0, 0.0, 0.0),
            ..from(-500.0)
        };
        let (hit, stats) = fire_both(&away, &map, &h, &alive);
        assert_eq!((hit, stats.cells_walked, stats.broad_tests), (None, 0, 0));
        // 5 km out: too far to trust the grid's pad; every player is tested.
        let (hit, stats) = fire_both(&from(5000.0), &map, &h, &alive);
        assert_eq!(hit.map(|h| h.victim), Some(PlayerSlot(5)));
        assert_eq!((stats.cells_walked, stats.broad_tests), (0, 39));
    }

    #[test]
    fn no_players_or_none_alive_is_a_miss() {
        let map = floor_map(&[]);
        let scopes = Scopes::new(Instant::now);
        let shot = |newest| Shot {
            shooter: PlayerSlot(0),
            command_tick: newest,
            interp_delay_ticks: 0.0,
            origin: Vec3::new(-10.0, 0.0, 1.2),
            direction: Vec3::new(1.0, 0.0, 0.0),
            max_range_m: f32::INFINITY,
        };
        let mut empty = history(0, 128, true);
        empty.record(Tick(0), [], Posing::Animated, &scopes);
        let (hit, stats) = fire_both(&shot(Tick(0)), &map, &empty, &[]);
        assert_eq!((hit, stats.broad_tests), (None, 0));

        let mut dead = history(40, 128, true);
        for tick in 0..5 {
            let samples = (0..40).map(|_| sample(Vec3::ZERO, 0, false, false));
            dead.record(Tick(tick), samples, Posing::Animated, &scopes);
        }
        assert_eq!(dead.broad_phase().unwrap().geometry().1, [0, 0]);
        let (hit, stats) = fire_both(&shot(Tick(4)), &map, &dead, &[true; 40]);
        assert_eq!((hit, stats.broad_tests, stats.cells_walked), (None, 0, 0));
    }

    #[test]
    fn a_teleported_player_is_tested_by_every_shot_until_its_jump_leaves_the_history() {
        let map = floor_map(&[]);
        let scopes = Scopes::new(Instant::now);
        let mut h = history(40, 128, true);
        let at = |tick: u32, i: u16| {
            if i == 7 && tick >= 20 {
                Vec3::new(300.0, 300.0, 0.0)
            } else {
                Vec3::new(0.0, 2.0 * f32::from(i), 0.0)
            }
        };
        let record = |h: &mut History, tick: u32| {
            let samples = (0..40u16).map(|i| sample(at(tick, i), 0, false, true));
            h.record(Tick(tick), samples, Posing::Animated, &scopes);
        };
        for tick in 0..30 {
            record(&mut h, tick);
        }
        assert_eq!(h.broad_phase().unwrap().always(), &[7]);
        let alive = [true; 40];
        let newest = h.newest().unwrap();
        let shot = |origin: Vec3, delay: f32| Shot {
            shooter: PlayerSlot(0),
            command_tick: newest,
            interp_delay_ticks: delay,
            origin,
            direction: Vec3::new(-1.0, 0.0, 0.0),
            max_range_m: f32::INFINITY,
        };
        // Seen before the jump, where it stood among the others; after it, far off.
        let before = shot(Vec3::new(20.0, 14.0, 1.2), 15.0);
        let (hit, _) = fire_both(&before, &map, &h, &alive);
        assert_eq!(hit.map(|h| h.victim), Some(PlayerSlot(7)));
        let after = shot(Vec3::new(320.0, 300.0, 1.2), 0.0);
        let (hit, stats) = fire_both(&after, &map, &h, &alive);
        assert_eq!(hit.map(|h| h.victim), Some(PlayerSlot(7)));
        assert_eq!(stats.broad_tests, 1, "{stats:?}");
        // Once the ticks before the jump are gone, it is listed in the grid again.
        for tick in 30..60 {
            record(&mut h, tick);
        }
        assert!(h.broad_phase().unwrap().always().is_empty());
        let newest = h.newest().unwrap();
        let (hit, _) = fire_both(
            &Shot {
                command_tick: newest,
                ..after
            },
            &map,
            &h,
            &alive,
        );
        assert_eq!(hit.map(|h| h.victim), Some(PlayerSlot(7)));
    }

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
