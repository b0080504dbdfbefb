//! Buy-phase barriers through the public API: the map format's `barrier` lines, players held
//! in their spawn rooms while barriers are raised and let out once lowered, and rays (shots,
//! line of sight) that pass through barriers either way.

use proptest::prelude::*;
use tickforge_game::map::{Aabb, MapError, MAX_BARRIERS, SKIN_M};
use tickforge_game::movement::pmove;
use tickforge_game::rules::Team;
use tickforge_game::{buttons, BuiltinMap, Map, MovementParams, PlayerState, UserCmd, Vec3};

const DT: f32 = 1.0 / 128.0;

/// One floor box and one spawn, plus `extra`.
fn minimal(extra: &str) -> String {
    format!("box -10 -10 -1 10 10 0\nspawn attackers 0 0 0 0\n{extra}")
}

/// The arena's inner face of each spawn room's doorway wall, along x: attackers inside
/// x < -23, defenders inside x > 23.
fn doorway_x(team: Team) -> f32 {
    match team {
        Team::Attackers => -23.0,
        Team::Defenders => 23.0,
    }
}

/// How far `feet` are inside `team`'s spawn room from its doorway wall's inner face, metres;
/// negative outside.
fn depth_in_room(team: Team, feet: Vec3) -> f32 {
    let inner = doorway_x(team);
    (feet.x - inner) * inner.signum()
}

/// A player standing at `team`'s `n`th spawn point, facing as it spawns.
fn spawned(map: &Map, team: Team, n: usize) -> PlayerState {
    let spawn = map.spawn_point(team, n);
    PlayerState {
        origin: spawn.origin + Vec3::new(0.0, 0.0, SKIN_M),
        yaw: spawn.yaw,
        on_ground: true,
        ..Default::default()
    }
}

/// Runs at the doorway from the middle spawn for three seconds.
fn run_at_the_doorway(map: &Map, team: Team) -> PlayerState {
    let mut s = spawned(map, team, 2);
    assert_eq!(s.origin.y, 0.0, "the middle spawn faces the doorway");
    let cmd = UserCmd {
        forward: 127,
        yaw: s.yaw,
        ..Default::default()
    };
    for _ in 0..384 {
        pmove(&mut s, &cmd, &MovementParams::default(), map, DT);
    }
    s
}

#[test]
fn barrier_lines_parse_apart_from_the_boxes_and_start_lowered() {
    let map = Map::parse(&minimal(
        "barrier 1 -1 0 2 1 3 # a doorway\nbox 5 5 0 6 6 1\nbarrier\t-2 -1 0 -1 1 3",
    ))
    .unwrap();
    assert_eq!(map.boxes().len(), 2);
    assert_eq!(
        map.barriers(),
        &[
            Aabb {
                min: Vec3::new(1.0, -1.0, 0.0),
                max: Vec3::new(2.0, 1.0, 3.0),
            },
            Aabb {
                min: Vec3::new(-2.0, -1.0, 0.0),
                max: Vec3::new(-1.0, 1.0, 3.0),
            },
        ]
    );
    assert!(!map.barriers_raised());
    let raised = map.with_barriers(true);
    assert!(raised.barriers_raised());
    assert_eq!(raised.barriers(), map.barriers());
    assert_eq!(raised.boxes(), map.boxes());
    assert!(!raised.with_barriers(false).barriers_raised());
    // Barriers do not widen the bounds the grid covers.
    assert_eq!(
        map.bounds(),
        Map::parse(&minimal("box 5 5 0 6 6 1")).unwrap().bounds()
    );
}

#[test]
fn bad_barrier_lines_are_errors_naming_the_barrier_form() {
    let e = Map::parse(&minimal("barrier 0 0 0 1 1")).unwrap_err();
    assert!(
        matches!(
            e,
            MapError::FieldCount {
                line: 3,
                directive: "barrier",
                found: 5,
                ..
            }
        ),
        "{e}"
    );
    assert!(e
        .to_string()
        .contains("`barrier MIN_X MIN_Y MIN_Z MAX_X MAX_Y MAX_Z`"));
    let e = Map::parse(&minimal("barrier 0 0 0 1 1 NaN")).unwrap_err();
    assert!(
        matches!(e, MapError::BadValue { field: "MAX_Z", .. }),
        "{e}"
    );
    let e = Map::parse(&minimal("barrier 0 2 0 1 1 1")).unwrap_err();
    assert!(matches!(e, MapError::EmptyBox { axis: 'y', .. }), "{e}");
    let many = "barrier 0 0 0 1 1 1\n".repeat(MAX_BARRIERS + 1);
    let e = Map::parse(&minimal(&many)).unwrap_err();
    assert!(
        matches!(
            e,
            MapError::TooMany {
                what: "barriers",
                limit: MAX_BARRIERS,
                ..
            }
        ),
        "{e}"
    );
    // A map of barriers alone has no floor.
    assert!(matches!(
        Map::parse("barrier 0 0 0 1 1 1\nspawn attackers 0 0 0 0"),
        Err(MapError::NoBoxes)
    ));
}

#[test]
fn the_arena_has_a_barrier_filling_each_spawn_doorway() {
    let map = BuiltinMap::Arena.load();
    let doorway = |x0: f32| Aabb {
        min: Vec3::new(x0, -1.5, 0.0),
        max: Vec3::new(x0 + 1.0, 1.5, 4.0),
    };
    assert_eq!(map.barriers(), &[doorway(-23.0), doorway(22.0)]);
    // Each meets the doorway wall on both sides and is as tall as it, so the room is shut.
    for b in map.barriers() {
        for side in [-1.0f32, 1.0] {
            let wall = map.boxes().iter().any(|w| {
                w.min.x == b.min.x
                    && w.max.x == b.max.x
                    && w.max.z == b.max.z
                    && if side < 0.0 {
                        w.max.y == b.min.y
                    } else {
                        w.min.y == b.max.y
                    }
            });
            assert!(wall, "{b:?} side {side}");
        }
    }
}

#[test]
fn the_2km_map_has_no_barriers() {
    // Its teams' spawns alternate round one open circle: no spawn area to fence (the map
    // file says why).
    assert!(BuiltinMap::Flat2km.load().barriers().is_empty());
}

#[test]
fn a_raised_barrier_stops_a_player_running_out_and_a_lowered_one_lets_it_through() {
    let lowered = BuiltinMap::Arena.load();
    let raised = lowered.with_barriers(true);
    let half = MovementParams::default().hull_half_width;
    for team in [Team::Attackers, Team::Defenders] {
        let held = run_at_the_doorway(&raised, team);
        // Stopped a skin short of the barrier's face, in the doorway's middle.
        let gap = depth_in_room(team, held.origin) - half;
        assert!(gap > 0.0 && gap < 0.01, "{team:?}: {held:?}");
        assert!(held.origin.y.abs() < 1e-3 && held.on_ground, "{held:?}");
        assert!(held.velocity.horizontal_length() < 0.1, "{held:?}");

        let free = run_at_the_doorway(&lowered, team);
        assert!(free.origin.x.abs() < 15.0, "{team:?}: {free:?}");
    }
}

#[test]
fn a_hull_trace_names_the_raised_barrier_it_hits() {
    let lowered = BuiltinMap::Arena.load();
    let raised = lowered.with_barriers(true);
    let hull = MovementParams::default().hull();
    let (from, to) = (Vec3::new(-26.0, 0.0, 0.5), Vec3::new(-19.0, 0.0, 0.5));
    let t = raised.trace_hull(from, to, hull);
    assert_eq!((t.barrier_index, t.box_index), (Some(0), None));
    assert_eq!(t.normal, Vec3::new(-1.0, 0.0, 0.0));
    assert!(
        (t.end.x - (-23.0 - hull.half_width - SKIN_M)).abs() < 1e-4,
        "{t:?}"
    );
    let t = lowered.trace_hull(from, to, hull);
    assert_eq!(
        (t.fraction, t.barrier_index, t.box_index),
        (1.0, None, None)
    );
    assert_eq!(t.end, to);
    // Standing in the doorway: inside the raised barrier, clear of the lowered one.
    let doorway = Vec3::new(-22.5, 0.0, SKIN_M);
    assert!(raised.hull_overlaps(hull, doorway));
    assert!(!lowered.hull_overlaps(hull, doorway));
    // A player the barrier went up on may still walk out of it, as out of any box.
    let t = raised.trace_hull(doorway, doorway + Vec3::new(-3.0, 0.0, 0.0), hull);
    assert!(t.start_solid && t.fraction == 1.0, "{t:?}");
}

#[test]
fn rays_pass_through_barriers_raised_or_not() {
    let lowered = BuiltinMap::Arena.load();
    let raised = lowered.with_barriers(true);
    // From the attackers' middle spawn at eye height, east through the doorway: the first
    // thing met is the centre pillar's west face, 26 m away.
    let eye = Vec3::new(-27.5, 0.0, 1.6);
    let east = Vec3::new(1.0, 0.0, 0.0);
    let pillar = lowered
        .boxes()
        .iter()
        .position(|b| b.min == Vec3::new(-1.5, -1.5, 0.0))
        .unwrap();
    for map in [&lowered, &raised] {
        let hit = map.trace_ray(eye, east, f32::INFINITY).unwrap();
        assert_eq!((hit.box_index, hit.distance), (pillar, 26.0));
        // A ray that ends inside the barrier meets nothing.
        assert!(map.trace_ray(eye, east, 5.0).is_none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// From any spawn, under any commands (running, jumping, crouching) for four seconds,
    /// a player behind raised barriers never leaves its team's spawn room.
    #[test]
    fn raised_barriers_hold_every_player_in_its_spawn_room(
        spawn in 0usize..10,
        cmds in proptest::collection::vec(
            (any::<i8>(), any::<i8>(), 0u8..8, any::<u16>(), 1usize..64),
            1..40,
        ),
    ) {
        let raised = BuiltinMap::Arena.load().with_barriers(true);
        let team = [Team::Attackers, Team::Defenders][spawn % 2];
        let params = MovementParams::default();
        let mut s = spawned(&raised, team, spawn / 2);
        let mut ticks = 0;
        for (forward, side, bits, yaw, hold) in cmds {
            let cmd = UserCmd {
                forward,
                side,
                buttons: bits & (buttons::JUMP | buttons::CROUCH),
                yaw,
                pitch: 0,
            };
            for _ in 0..hold {
                pmove(&mut s, &cmd, &params, &raised, DT);
                let depth = depth_in_room(team, s.origin);
                prop_assert!(depth > params.hull_half_width, "{:?} {:?}", team, s);
                prop_assert!(!raised.hull_overlaps(params.hull_for(s.crouched), s.origin));
                ticks += 1;
            }
            if ticks > 512 {
                break;
            }
        }
    }
}
