//! Movement allocates nothing: a world step of ten players on the arena and of a hundred on
//! the 2 km map, and ray traces across both.
//!
//! A counting global allocator sees every allocation of this test binary; only those made
//! inside the measured closure on this thread are counted.

use std::time::Instant;

use tickforge_game::{buttons, BuiltinMap, PlayerSlot, UserCmd, Vec3, World, WorldConfig};
use tickforge_telemetry::Scopes;
use tickforge_testkit::alloc::{allocations_in, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_movement_tick_allocates_nothing() {
    let scopes = Scopes::new(Instant::now);
    for (map, players) in [(BuiltinMap::Arena, 10), (BuiltinMap::Flat2km, 100)] {
        let mut world = World::new(WorldConfig {
            players,
            map,
            ..WorldConfig::default()
        });
        let mut total = 0;
        for tick in 0..1024u32 {
            for slot in 0..players {
                let x = tick.wrapping_mul(31).wrapping_add(u32::from(slot) * 7);
                world.set_cmd(
                    PlayerSlot(slot),
                    UserCmd {
                        forward: 127,
                        side: (x % 3) as i8 - 1,
                        buttons: if x.is_multiple_of(61) {
                            buttons::JUMP
                        } else {
                            0
                        },
                        yaw: (x / 128 * 9000) as u16,
                        pitch: 0,
                    },
                );
            }
            let ((), n) = allocations_in(|| world.step(&scopes));
            total += n;
        }
        assert_eq!(total, 0, "{}", map.name());

        let ((), n) = allocations_in(|| {
            for i in 0..64 {
                let a = i as f32 * 0.1;
                let hit = world.map().trace_ray(
                    Vec3::new(5.0, 3.0, 1.6),
                    Vec3::new(a.cos(), a.sin(), -0.01),
                    f32::INFINITY,
                );
                assert!(hit.is_some());
            }
        });
        assert_eq!(n, 0, "{}", map.name());
    }
}
