//! The sample points of one player (the module docs of [`crate::fow`] draw them): the eye and
//! the hull's corners where it stands, which cost a few additions, and the hull's corners at
//! the edge of its reach, which cost nine hull sweeps and are taken only when a trace needs
//! them.

use crate::map::{Aabb, Map};
use crate::math::Vec3;
use crate::movement::{MovementParams, PlayerState};

use super::{FowConfig, POINTS_PER_PLAYER, SHORTCUT_SLACK_M};

/// Points that need no sweep: the eye and the eight corners of the hull where it stands.
pub(super) const NEAR_POINTS: usize = 9;
/// The four horizontal corner directions, in the order their points are stored.
const CORNERS: [(f32, f32); 4] = [(-1.0, -1.0), (1.0, -1.0), (-1.0, 1.0), (1.0, 1.0)];
/// Height of the lower sample points above the hull's bottom, metres: a sole's thickness, so
/// that segments to them do not skim the floor the player stands on.
pub(super) const SOLE_M: f32 = 0.1;
pub(super) const UP: Vec3 = Vec3::new(0.0, 0.0, 1.0);

/// How far a player could get within a horizon ([`super::Fow::reach`]), metres.
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

/// Fills `out` with the eye of `state` and its hull's corners where it stands.
pub(super) fn near_points(state: &PlayerState, config: &FowConfig, out: &mut [Vec3]) {
    debug_assert_eq!(out.len(), NEAR_POINTS);
    let hull = config.movement.hull();
    let feet = state.origin;
    let (top, sole) = (UP * hull.height, UP * SOLE_M);
    out[0] = feet + UP * config.eye_height_m;
    for (k, &(sx, sy)) in CORNERS.iter().enumerate() {
        let corner = Vec3::new(sx * hull.half_width, sy * hull.half_width, 0.0);
        out[1 + 2 * k] = feet + corner + top;
        out[2 + 2 * k] = feet + corner + sole;
    }
}

/// Fills `out` with the hull's corners of `state` at the four corners of the square it could
/// reach: swept from the lifted feet, stopped by walls, then dropped.
pub(super) fn reach_points(
    state: &PlayerState,
    reach: Reach,
    config: &FowConfig,
    map: &Map,
    out: &mut [Vec3],
) {
    debug_assert_eq!(out.len(), POINTS_PER_PLAYER - NEAR_POINTS);
    let hull = config.movement.hull();
    let feet = state.origin;
    let (top, sole) = (UP * hull.height, UP * SOLE_M);
    let (r, w) = (reach.horizontal_m, hull.half_width);
    // The boxes near the sweeps are found once for the nine, where each sweep through the
    // map's grid found its own.
    let near = map.near(sweeps_region(state, reach), hull);
    let lifted = near.trace_hull(feet, feet + UP * reach.rise_m).end;
    let fall_m = (lifted.z - feet.z) + reach.drop_m;
    for (k, &(sx, sy)) in CORNERS.iter().enumerate() {
        // The hull's outer corner towards (sx, sy): a skin off any wall a sweep stopped at.
        let corner = Vec3::new(sx * w, sy * w, 0.0);
        let side = near
            .trace_hull(lifted, lifted + Vec3::new(sx * r, sy * r, 0.0))
            .end;
        let landed = near.trace_hull(side, side - UP * fall_m).end;
        out[2 * k] = side + corner + top;
        out[1 + 2 * k] = landed + corner + sole;
    }
}

/// Where the feet of [`reach_points`]'s sweeps stay: up to the rise, across to the square's
/// corners, down to the drop, padded by [`SHORTCUT_SLACK_M`] for rounding (a sweep that
/// leaves it anyway goes through the map's grid, as [`Map::near`]'s do).
fn sweeps_region(state: &PlayerState, reach: Reach) -> Aabb {
    let (feet, r) = (state.origin, reach.horizontal_m);
    let pad = Vec3::new(SHORTCUT_SLACK_M, SHORTCUT_SLACK_M, SHORTCUT_SLACK_M);
    Aabb {
        min: feet - Vec3::new(r, r, reach.drop_m) - pad,
        max: feet + Vec3::new(r, r, reach.rise_m) + pad,
    }
}

/// A box holding every sample point `state` can have with `reach`, known without a sweep:
/// sweeps only shorten a move, so the reach corners lie within the reach plus the hull's
/// half width across, between the drop and the rise plus the hull's height up and down.
/// Padded by [`SHORTCUT_SLACK_M`] for the rounding of the sweeps.
pub(super) fn region(state: &PlayerState, reach: Reach, config: &FowConfig) -> Aabb {
    let hull = config.movement.hull();
    let feet = state.origin;
    let across = reach.horizontal_m + hull.half_width + SHORTCUT_SLACK_M;
    let below = reach.drop_m - SOLE_M + SHORTCUT_SLACK_M;
    let above = config.eye_height_m.max(reach.rise_m + hull.height) + SHORTCUT_SLACK_M;
    Aabb {
        min: Vec3::new(feet.x - across, feet.y - across, feet.z - below),
        max: Vec3::new(feet.x + across, feet.y + across, feet.z + above),
    }
}

/// The box bounding `points`.
pub(super) fn bounding(points: &[Vec3]) -> Aabb {
    points.iter().fold(
        Aabb {
            min: points[0],
            max: points[0],
        },
        |b, &p| Aabb {
            min: b.min.min(p),
            max: b.max.max(p),
        },
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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

    fn all_points(state: &PlayerState, reach: Reach, config: &FowConfig, map: &Map) -> [Vec3; 17] {
        let mut out = [Vec3::ZERO; POINTS_PER_PLAYER];
        near_points(state, config, &mut out[..NEAR_POINTS]);
        reach_points(state, reach, config, map, &mut out[NEAR_POINTS..]);
        out
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
        let out = all_points(&state, Reach::default(), &config, &map);
        assert_eq!(out[0], state.origin + UP * 1.6);
        let body = config.movement.hull().at(state.origin);
        for p in &out[1..] {
            assert!(p.x == body.min.x || p.x == body.max.x, "{p:?}");
            assert!(p.y == body.min.y || p.y == body.max.y, "{p:?}");
            assert!(p.z == body.min.z + SOLE_M || p.z == body.max.z, "{p:?}");
        }
    }

    /// A player anywhere on the arena, at any speed, on the ground or not, and a horizon
    /// up to a second.
    fn arena_player() -> impl Strategy<Value = (PlayerState, f32)> {
        (
            (-35.0f32..35.0, -25.0f32..25.0, -1.0f32..13.0),
            (-15.0f32..15.0, -15.0f32..15.0, -10.0f32..10.0),
            any::<bool>(),
            0.0f32..1.0,
        )
            .prop_map(|((x, y, z), (vx, vy, vz), on_ground, horizon_s)| {
                let state = PlayerState {
                    origin: Vec3::new(x, y, z),
                    velocity: Vec3::new(vx, vy, vz),
                    on_ground,
                    ..Default::default()
                };
                (state, horizon_s)
            })
    }

    proptest! {
        /// The reach points are those of the nine sweeps through the map's grid, and every
        /// sweep stays within the region whose boxes are found once for them (none falls
        /// back to the grid).
        #[test]
        fn the_reach_sweeps_stay_within_their_region_and_find_what_the_grid_does(
            (state, horizon_s) in arena_player(),
        ) {
            let map = BuiltinMap::Arena.load();
            let config = FowConfig::default();
            let hull = config.movement.hull();
            let reach = Reach::of(&state, &config.movement, horizon_s);
            let mut got = [Vec3::ZERO; POINTS_PER_PLAYER - NEAR_POINTS];
            reach_points(&state, reach, &config, &map, &mut got);
            // The same sweeps, each through the grid, checking each is within the region.
            let near = map.near(sweeps_region(&state, reach), hull);
            let sweep = |a: Vec3, b: Vec3| {
                assert!(near.covers(a, b), "{a:?} to {b:?} leaves the region");
                map.trace_hull(a, b, hull).end
            };
            let feet = state.origin;
            let lifted = sweep(feet, feet + UP * reach.rise_m);
            let fall_m = (lifted.z - feet.z) + reach.drop_m;
            let (r, w) = (reach.horizontal_m, hull.half_width);
            for (k, &(sx, sy)) in CORNERS.iter().enumerate() {
                let corner = Vec3::new(sx * w, sy * w, 0.0);
                let side = sweep(lifted, lifted + Vec3::new(sx * r, sy * r, 0.0));
                let landed = sweep(side, side - UP * fall_m);
                prop_assert_eq!(got[2 * k], side + corner + UP * hull.height);
                prop_assert_eq!(got[1 + 2 * k], landed + corner + UP * SOLE_M);
            }
        }

        /// The region known without sweeping holds every point the sweeps give: the
        /// shortcut that settles a pair on the regions alone relies on it.
        #[test]
        fn the_region_holds_every_sample_point((state, horizon_s) in arena_player()) {
            let map = BuiltinMap::Arena.load();
            let config = FowConfig::default();
            let reach = Reach::of(&state, &config.movement, horizon_s);
            let b = region(&state, reach, &config);
            for p in all_points(&state, reach, &config, &map) {
                prop_assert!(
                    b.min.x <= p.x && p.x <= b.max.x
                        && b.min.y <= p.y && p.y <= b.max.y
                        && b.min.z <= p.z && p.z <= b.max.z,
                    "{:?} outside {:?}", p, b
                );
            }
        }
    }
}
