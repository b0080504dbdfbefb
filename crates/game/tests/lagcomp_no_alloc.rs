//! Lag compensation allocates nothing per tick: recording (posing or idle) and firing, for
//! ten players on the arena and a hundred on the 2 km map. The history allocates once, when
//! made.
//!
//! A counting global allocator sees every allocation of this test binary; only those made
//! inside the measured closure on this thread are counted.

use std::time::Instant;

use tickforge_game::history::{History, HistoryConfig, PlayerSample, Posing};
use tickforge_game::hitscan::{aim_direction, fire_with_stats, Shot, ShotStats};
use tickforge_game::pose::Stance;
use tickforge_game::{BuiltinMap, PlayerSlot, Tick, UserCmd, Vec3, World, WorldConfig};
use tickforge_telemetry::Scopes;
use tickforge_testkit::alloc::{allocations_in, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn recording_and_firing_allocate_nothing() {
    let scopes = Scopes::new(Instant::now);
    for (map, players) in [(BuiltinMap::Arena, 10u8), (BuiltinMap::Flat2km, 100)] {
        let mut world = World::new(WorldConfig {
            players: u16::from(players),
            map,
            ..WorldConfig::default()
        });
        let (history, made) = allocations_in(|| {
            History::new(HistoryConfig {
                players: u16::from(players),
                ..HistoryConfig::default()
            })
        });
        let mut history = history.unwrap();
        assert!(made > 0, "the history allocates when made");
        let alive = vec![true; usize::from(players)];
        let (mut total, mut hits) = (0, 0);
        for tick in 0..1024u32 {
            for slot in 0..players {
                let x = tick.wrapping_mul(31).wrapping_add(u32::from(slot) * 7);
                world.set_cmd(
                    PlayerSlot(u16::from(slot)),
                    UserCmd {
                        forward: 127,
                        side: (x / 64 % 3) as i8 - 1,
                        yaw: (x / 128 * 9000) as u16,
                        ..Default::default()
                    },
                );
            }
            world.step(&scopes);
            let stepped = Tick(tick);
            // A buy phase for the first 200 ticks, then combat.
            let posing = if tick < 200 {
                Posing::Idle
            } else {
                Posing::Animated
            };
            let players_now = world.players();
            let ((), n) = allocations_in(|| {
                let samples = players_now.iter().map(|p| PlayerSample {
                    state: p.state,
                    stance: Stance::Standing,
                    alive: true,
                });
                history.record(stepped, samples, posing, &scopes);
            });
            total += n;
            // Every player shoots its team's next player (in the same spawn room on the
            // arena), as it saw it 2.5 ticks ago.
            for (shooter, me) in players_now.iter().enumerate() {
                let target = (shooter + 2) % usize::from(players);
                let time = history.rewind_time(stepped, 2.5).unwrap();
                let aim = history
                    .origin_at(PlayerSlot(target as u16), time)
                    .unwrap_or_default();
                let eye = me.state.origin + Vec3::new(0.0, 0.0, 1.6);
                let look = aim + Vec3::new(0.0, 0.0, 1.2) - eye;
                let shot = Shot {
                    shooter: PlayerSlot(shooter as u16),
                    command_tick: stepped,
                    interp_delay_ticks: 2.5,
                    origin: eye,
                    direction: if shooter % 5 == 0 {
                        aim_direction(me.state.yaw, 0)
                    } else {
                        look
                    },
                    max_range_m: 2000.0,
                };
                let mut stats = ShotStats::default();
                let (hit, n) = allocations_in(|| {
                    fire_with_stats(&shot, world.map(), &history, &alive, &scopes, &mut stats)
                });
                total += n;
                hits += usize::from(hit.is_some());
            }
        }
        assert_eq!(total, 0, "{}", map.name());
        println!("{}: {hits} hits", map.name());
        assert!(hits > 1000, "{}: {hits} hits", map.name());
    }
}
