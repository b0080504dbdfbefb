//! The arena's cover plays as its file says: platforms are stepped onto, crates jumped onto,
//! chest-high walls not, and the stairs climb to their ledge.

use tickforge_game::map::SKIN_M;
use tickforge_game::movement::pmove;
use tickforge_game::{buttons, BuiltinMap, Map, MovementParams, PlayerState, UserCmd, Vec3};

const DT: f32 = 1.0 / 128.0;
const EAST: u16 = 0;
const SOUTH: u16 = 49152;

/// Runs east or south from `from` for `ticks`, jumping once when `jump_at` says so, and
/// returns the highest floor stood on and the final state.
fn run(
    map: &Map,
    from: Vec3,
    yaw: u16,
    ticks: usize,
    jump_at: impl Fn(&PlayerState) -> bool,
) -> (f32, PlayerState) {
    let params = MovementParams::default();
    let mut s = PlayerState {
        origin: from + Vec3::new(0.0, 0.0, SKIN_M),
        on_ground: true,
        ..Default::default()
    };
    let mut jumped = false;
    let mut highest: f32 = 0.0;
    for _ in 0..ticks {
        let jump = !jumped && s.on_ground && jump_at(&s);
        jumped |= jump;
        let cmd = UserCmd {
            forward: 127,
            yaw,
            buttons: if jump { buttons::JUMP } else { 0 },
            ..Default::default()
        };
        pmove(&mut s, &cmd, &params, map, DT);
        if s.on_ground {
            highest = highest.max(s.origin.z);
        }
    }
    (highest, s)
}

fn near(a: f32, b: f32) -> bool {
    (a - b).abs() < 1e-4
}

#[test]
fn the_low_platform_is_walked_onto() {
    let map = BuiltinMap::Arena.load();
    // The platform spans y -12..-8 at 0.4 m.
    let (highest, end) = run(&map, Vec3::new(0.0, -5.0, 0.0), SOUTH, 200, |_| false);
    assert!(near(highest, 0.4 + SKIN_M), "{highest}");
    assert!(end.origin.y < -12.0, "{end:?}");
}

#[test]
fn a_crate_is_jumped_onto_but_not_walked_onto() {
    let map = BuiltinMap::Arena.load();
    // The crate's west face is at x = -12, 1 m tall, along y = -4.4.
    let from = Vec3::new(-20.0, -4.4, 0.0);
    let (highest, end) = run(&map, from, EAST, 256, |_| false);
    assert!(near(highest, SKIN_M), "{highest}");
    assert!(end.origin.x < -12.4, "{end:?}");
    let (highest, _) = run(&map, from, EAST, 256, |s| s.origin.x >= -14.9);
    assert!(near(highest, 1.0 + SKIN_M), "{highest}");
}

#[test]
fn a_chest_high_wall_is_not_jumped_onto() {
    let map = BuiltinMap::Arena.load();
    // The wall's west face is at x = -16, 1.4 m tall, along y = -16..-10.
    let from = Vec3::new(-22.0, -13.0, 0.0);
    for jump_x in [-19.5, -19.0, -18.5, -18.0, -17.5, -17.0] {
        let (highest, end) = run(&map, from, EAST, 384, |s| s.origin.x >= jump_x);
        assert!(near(highest, SKIN_M), "{jump_x}: {highest}");
        assert!(end.origin.x < -16.4, "{jump_x}: {end:?}");
    }
}

#[test]
fn the_stairs_climb_to_their_ledge() {
    let map = BuiltinMap::Arena.load();
    // Steps of 0.4 m from x = -20, up to the 1.2 m ledge at x -16..-12, along y = 17.
    let (highest, _) = run(&map, Vec3::new(-24.0, 17.0, 0.0), EAST, 128, |_| false);
    assert!(near(highest, 1.2 + SKIN_M), "{highest}");
}
