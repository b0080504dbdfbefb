//! Ten players on the arena, steered by a script that reads their state: two runs from the
//! same start give bit-identical states at every tick.

use std::time::Instant;

use tickforge_game::{buttons, rad_to_angle16, PlayerSlot, UserCmd, Vec3, World, WorldConfig};
use tickforge_telemetry::Scopes;

/// Places the script sends players to in turn: the doorways, the platforms, a crate top,
/// the stairs and the centre pillar.
const WAYPOINTS: [Vec3; 7] = [
    Vec3::new(-20.0, 0.0, 0.0),
    Vec3::new(0.0, -10.0, 0.0),
    Vec3::new(-11.4, -4.4, 0.0),
    Vec3::new(-14.0, 17.0, 0.0),
    Vec3::new(0.0, 0.0, 0.0),
    Vec3::new(0.0, 10.0, 0.0),
    Vec3::new(20.0, 0.0, 0.0),
];

/// Each player runs at its current waypoint, strafing a little and jumping now and then;
/// every two seconds it moves on to the next.
fn script(world: &World, tick: u32, slot: u16) -> UserCmd {
    let p = world.players()[usize::from(slot)].state;
    let leg = (tick / 256 + u32::from(slot)) as usize % WAYPOINTS.len();
    let to = WAYPOINTS[leg] - p.origin;
    let jitter = (tick / 32 + u32::from(slot)) % 3;
    UserCmd {
        forward: 127,
        side: [-40, 0, 40][jitter as usize],
        buttons: if (tick + u32::from(slot) * 13).is_multiple_of(90) {
            buttons::JUMP
        } else {
            0
        },
        yaw: rad_to_angle16(to.y.atan2(to.x)),
        pitch: 0,
    }
}

/// Runs `ticks` ticks and returns every tick's state hash, the highest floor any player stood
/// on, and the final states.
fn run(ticks: u32) -> (Vec<u64>, f32, World) {
    let scopes = Scopes::new(Instant::now);
    let mut world = World::new(WorldConfig::default());
    let mut hashes = Vec::new();
    let mut highest_floor: f32 = 0.0;
    for tick in 0..ticks {
        for slot in 0..world.config().players {
            let cmd = script(&world, tick, slot);
            world.set_cmd(PlayerSlot(slot), cmd);
        }
        world.step(&scopes);
        hashes.push(world.state_hash());
        for p in world.players() {
            if p.state.on_ground {
                highest_floor = highest_floor.max(p.state.origin.z);
            }
        }
    }
    (hashes, highest_floor, world)
}

#[test]
fn a_scripted_10_player_run_replays_bit_identically() {
    let (a, a_floor, a_world) = run(128 * 20);
    let (b, _, b_world) = run(128 * 20);
    assert_eq!(a, b);
    for (pa, pb) in a_world.players().iter().zip(b_world.players()) {
        assert_eq!(pa.state.origin.to_bits(), pb.state.origin.to_bits());
        assert_eq!(pa.state.velocity.to_bits(), pb.state.velocity.to_bits());
        assert_eq!(pa.state.on_ground, pb.state.on_ground);
    }
    // The run exercised collision: players climbed onto boxes and got out of their rooms.
    assert!(a_floor > 0.3, "highest floor {a_floor}");
    let out_of_rooms = a_world
        .players()
        .iter()
        .filter(|p| p.state.origin.x.abs() < 22.0)
        .count();
    assert!(out_of_rooms >= 5, "{out_of_rooms}");
}
