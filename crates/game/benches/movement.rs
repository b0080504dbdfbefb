//! Movement cost: `pmove` for 10 players, one tick; and the ray trace shots and line of sight
//! use.
//!
//! Timings on a shared machine are noisy; instruction counts are not. `--test` runs each
//! selected benchmark once, so this counts the instructions of 38,410 `pmove` calls on the
//! arena (half a minute of play for 10 players, then one tick):
//!
//! ```text
//! cargo bench -p tickforge-game --bench movement --no-run
//! valgrind --tool=callgrind --toggle-collect='tickforge_game::movement::pmove' \
//!     target/release/deps/movement-HASH --test 'pmove/10 players on arena'
//! ```

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use tickforge_game::movement::pmove;
use tickforge_game::{buttons, BuiltinMap, Map, UserCmd, Vec3, World, WorldConfig};

/// Commands that keep ten players running, strafing, turning and jumping into the cover.
fn cmd(tick: u32, slot: u32) -> UserCmd {
    let x = tick.wrapping_mul(31).wrapping_add(slot * 7);
    UserCmd {
        forward: 127,
        side: ((x / 64 % 3) as i8 - 1) * 127,
        buttons: if x.is_multiple_of(97) {
            buttons::JUMP
        } else {
            0
        },
        yaw: (slot * 6553 + tick * 40) as u16,
        pitch: 0,
    }
}

fn movement(c: &mut Criterion) {
    let mut group = c.benchmark_group("pmove");
    group
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    for map in BuiltinMap::ALL {
        let world = World::new(WorldConfig {
            map,
            ..WorldConfig::default()
        });
        let params = world.config().movement;
        let dt = 1.0 / world.config().tick_hz as f32;
        // Set up on the first call only, and only for a benchmark the filter selects: with
        // `--test` and a filter, the run is a fixed workload that
        // `valgrind --tool=callgrind` counts the instructions of (see the module docs).
        let mut warmed = None;
        let mut tick = 0u32;
        group.bench_function(format!("10 players on {}, one tick", map.name()), |b| {
            let states = warmed.get_or_insert_with(|| {
                let mut states: Vec<_> = world.players().iter().map(|p| p.state).collect();
                // Half a minute of play first, so players are spread over the map and in its
                // cover.
                for tick in 0..128 * 30 {
                    for (slot, s) in states.iter_mut().enumerate() {
                        pmove(s, &cmd(tick, slot as u32), &params, world.map(), dt);
                    }
                }
                states
            });
            b.iter(|| {
                tick = tick.wrapping_add(1);
                for (slot, s) in states.iter_mut().enumerate() {
                    pmove(s, &cmd(tick, slot as u32), &params, world.map(), dt);
                }
                black_box(&*states);
            })
        });
    }
    group.finish();
}

/// Rays from head height between spread points of the map, as line-of-sight checks are.
fn rays(c: &mut Criterion) {
    let mut group = c.benchmark_group("trace_ray");
    group
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    for (builtin, reach) in [(BuiltinMap::Arena, 28.0), (BuiltinMap::Flat2km, 900.0)] {
        let map = builtin.load();
        let eye = |i: u32| {
            let a = i as f32 * 2.4;
            Vec3::new(a.cos() * reach, a.sin() * reach * 0.6, 1.6)
        };
        group.bench_function(format!("64 rays on {}", builtin.name()), |b| {
            b.iter(|| {
                let mut hits = 0;
                for i in 0..64 {
                    let (from, to) = (eye(i), eye(i + 7));
                    hits += usize::from(ray(&map, from, to));
                }
                black_box(hits)
            })
        });
    }
    group.finish();
}

fn ray(map: &Map, from: Vec3, to: Vec3) -> bool {
    let d = to - from;
    map.trace_ray(from, d, d.length()).is_some()
}

criterion_group!(benches, movement, rays);
criterion_main!(benches);
