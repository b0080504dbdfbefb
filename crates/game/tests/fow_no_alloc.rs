//! Fog of war allocates nothing per update: ten players on the arena and a hundred on the
//! 2 km map, running through cover, dying, respawning and being moved, with pairs traced
//! every tick and every 4th.
//!
//! A counting global allocator sees every allocation of this test binary; only those made
//! inside the measured closure on this thread are counted.

use std::num::NonZeroU8;
use std::time::Instant;

use tickforge_game::fow::{Fow, FowConfig};
use tickforge_game::map::SKIN_M;
use tickforge_game::movement::pmove;
use tickforge_game::rules::Team;
use tickforge_game::{buttons, BuiltinMap, PlayerSlot, PlayerState, Tick, UserCmd, Vec3};
use tickforge_telemetry::Scopes;
use tickforge_testkit::alloc::{allocations_in, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_fog_update_allocates_nothing() {
    let scopes = Scopes::new(Instant::now);
    let every_4th = FowConfig {
        trace_every_ticks: NonZeroU8::new(4).unwrap(),
        dead_visible_to_enemies: true,
        ..FowConfig::default()
    };
    for (map, players) in [(BuiltinMap::Arena, 10), (BuiltinMap::Flat2km, 100)] {
        for config in [FowConfig::default(), every_4th] {
            let map = map.load();
            let teams: Vec<Team> = (0..players).map(|i| Team::BOTH[i % 2]).collect();
            let spawns: Vec<PlayerState> = teams
                .iter()
                .enumerate()
                .map(|(i, &team)| PlayerState {
                    origin: map.spawn_point(team, i / 2).origin + Vec3::new(0.0, 0.0, SKIN_M),
                    on_ground: true,
                    ..Default::default()
                })
                .collect();
            let mut states = spawns.clone();
            let mut alive = vec![true; players];
            let mut fow = Fow::new(config, players);
            let params = config.movement;
            let (mut total, mut seen) = (0, 0);
            for tick in 0..1024u32 {
                for (slot, s) in states.iter_mut().enumerate() {
                    let x = tick.wrapping_mul(31).wrapping_add(slot as u32 * 7);
                    let cmd = UserCmd {
                        forward: 127,
                        side: (x % 3) as i8 - 1,
                        buttons: if x.is_multiple_of(61) {
                            buttons::JUMP
                        } else {
                            0
                        },
                        yaw: (x / 128 * 9000) as u16,
                        pitch: 0,
                    };
                    pmove(s, &cmd, &params, &map, 1.0 / 128.0);
                }
                // Every so often a player dies, and comes back at its spawn.
                let victim = (tick / 64) as usize % players;
                match tick % 64 {
                    0 => alive[victim] = false,
                    32 => {
                        states[victim] = spawns[victim];
                        alive[victim] = true;
                    }
                    _ => {}
                }
                let ((), n) = allocations_in(|| {
                    fow.update(&states, &teams, &alive, None, &map, Tick(tick), &scopes)
                });
                total += n;
                let ((), n) = allocations_in(|| {
                    seen += fow.visible_to(PlayerSlot(0)).count();
                    seen += fow.row(PlayerSlot(1)).len();
                });
                total += n;
            }
            assert_eq!(total, 0, "{players} players");
            assert!(seen > 0);
        }
    }
}
