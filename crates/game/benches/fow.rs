//! Fog-of-war cost: one [`Fow::update`] for 10 players on the arena and 100 on the 2 km map,
//! at their spawns and in play, with pairs traced every tick and every 4th (the server's
//! setting).
//!
//! `spread`: 1,000 players scattered over a 3 km square, each running round a circle at 5 m/s,
//! so only a few percent of the enemy pairs are within view distance of each other: on open
//! ground, and with one pillar inside the crowd's bounds (no longer the open field: pairs in
//! range are traced, every 4th tick). What this measures is the cost of finding the pairs in
//! range (issue 16), not of tracing them: each scene without a grid (every pair's distance
//! tested) and with one filled a tick late, as the server lends replication's.

use std::hint::black_box;
use std::num::NonZeroU8;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use tickforge_game::fow::Neighbours;
use tickforge_game::fow::{Fow, FowConfig};
use tickforge_game::map::SKIN_M;
use tickforge_game::movement::pmove;
use tickforge_game::rules::Team;
use tickforge_game::{buttons, BuiltinMap, Map, PlayerState, Tick, UserCmd, Vec3};
use tickforge_sim::spatial::Grid;
use tickforge_telemetry::Scopes;

/// Ticks of recorded play each bench cycles through.
const RECORDED_TICKS: usize = 512;

/// Commands that keep players running, strafing, turning and jumping into the cover.
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

/// Slot 2k is the attackers' kth player, slot 2k + 1 the defenders'; each on its spawn.
fn spawned(map: &Map, players: usize) -> (Vec<PlayerState>, Vec<Team>) {
    let teams: Vec<Team> = (0..players).map(|i| Team::BOTH[i % 2]).collect();
    let states = teams
        .iter()
        .enumerate()
        .map(|(i, &team)| PlayerState {
            origin: map.spawn_point(team, i / 2).origin + Vec3::new(0.0, 0.0, SKIN_M),
            on_ground: true,
            ..Default::default()
        })
        .collect();
    (states, teams)
}

/// `RECORDED_TICKS` of play after `warm_up` ticks of it, every player's state each tick.
fn recorded(map: &Map, mut states: Vec<PlayerState>, warm_up: u32) -> Vec<Vec<PlayerState>> {
    let params = FowConfig::default().movement;
    let dt = 1.0 / 128.0;
    let mut ticks = Vec::with_capacity(RECORDED_TICKS);
    for tick in 0..warm_up + RECORDED_TICKS as u32 {
        for (slot, s) in states.iter_mut().enumerate() {
            pmove(s, &cmd(tick, slot as u32), &params, map, dt);
        }
        if tick >= warm_up {
            ticks.push(states.clone());
        }
    }
    ticks
}

fn fow(c: &mut Criterion) {
    let scopes = Scopes::new(Instant::now);
    let mut group = c.benchmark_group("fow");
    group
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let every_4th = FowConfig {
        trace_every_ticks: NonZeroU8::new(4).unwrap(),
        ..FowConfig::default()
    };
    let cases = [
        (BuiltinMap::Arena, 10, "default", FowConfig::default()),
        (BuiltinMap::Arena, 10, "every 4th tick", every_4th),
        (BuiltinMap::Flat2km, 100, "default", FowConfig::default()),
        (BuiltinMap::Flat2km, 100, "every 4th tick", every_4th),
    ];
    for (builtin, players, label, config) in cases {
        let map = builtin.load();
        let (states, teams) = spawned(&map, players);
        let alive = vec![true; players];
        // Half a minute of play first, so players are spread over the map and in its cover.
        let play = recorded(&map, states.clone(), 128 * 30);
        let name = builtin.name();
        let mut f = Fow::new(config, players);
        let mut tick = 0u32;
        group.bench_function(
            format!("{players} players on {name} at spawn, {label}"),
            |b| {
                b.iter(|| {
                    tick = tick.wrapping_add(1);
                    f.update(&states, &teams, &alive, None, &map, Tick(tick), &scopes);
                    black_box(f.row(tickforge_game::PlayerSlot(0))[0])
                })
            },
        );
        let stats = f.stats();
        println!("  at spawn: {stats:?}");
        group.bench_function(
            format!("{players} players on {name} in play, {label}"),
            |b| {
                b.iter(|| {
                    tick = tick.wrapping_add(1);
                    let states = &play[tick as usize % RECORDED_TICKS];
                    f.update(states, &teams, &alive, None, &map, Tick(tick), &scopes);
                    black_box(f.row(tickforge_game::PlayerSlot(0))[0])
                })
            },
        );
        // What a pass over the recording does, on average.
        let (mut pairs, mut traced, mut visible, mut rays, mut segments) = (0, 0, 0, 0, 0);
        let (mut unchanged, mut swept, mut walled) = (0, 0, 0);
        for (t, states) in play.iter().enumerate() {
            f.update(states, &teams, &alive, None, &map, Tick(t as u32), &scopes);
            let s = f.stats();
            pairs += s.pairs_in_range;
            traced += s.pairs_traced;
            visible += s.pairs_visible;
            rays += s.rays;
            segments += s.segments;
            unchanged += s.pairs_unchanged;
            swept += s.players_swept;
            walled += s.pairs_walled_off;
        }
        let per = |v: u32| f64::from(v) / RECORDED_TICKS as f64;
        println!(
            "  in play, per tick: {:.1} pairs in range, {:.1} traced ({:.1} unchanged, {:.1} walled \
             off), {:.1} visible, {:.1} players swept, {:.1} segments, {:.1} rays",
            per(pairs),
            per(traced),
            per(unchanged),
            per(walled),
            per(visible),
            per(swept),
            per(segments),
            per(rays)
        );
    }
    group.finish();
}

/// Players in the `spread` benches.
const SPREAD_PLAYERS: usize = 1000;
/// Half the side of the square they are scattered over, metres.
const SPREAD_HALF_M: f32 = 1500.0;
/// Ticks a lap of a spread player's circle takes; the recording is one lap, so it loops
/// without a jump.
const SPREAD_LAP_TICKS: usize = 64;

/// A sealed 4 km floor, with a 2 m pillar at (`pillar_x`, 0) when given.
fn spread_map(pillar_x: Option<f32>) -> Map {
    let mut text = String::from(
        "box -2001 -2001 -1 2001 2001 0\n\
         box -2001 -2001 50 2001 2001 51\n\
         box -2001 -2001 0 -2000 2001 50\n\
         box 2000 -2001 0 2001 2001 50\n\
         box -2000 -2001 0 2000 -2000 50\n\
         box -2000 2000 0 2000 2001 50\n\
         spawn_ring 0 0 0 20 2\n",
    );
    if let Some(x) = pillar_x {
        text += &format!("box {} -1 0 {} 1 4\n", x - 1.0, x + 1.0);
    }
    Map::parse(&text).expect("the spread map parses")
}

/// A lap of [`SPREAD_PLAYERS`] players running round circles at 5 m/s, every tick's states,
/// at 30 Hz. Centres are scattered by a fixed LCG, so runs compare.
fn spread_lap() -> Vec<Vec<PlayerState>> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut unit = || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 40) as f32 / (1u64 << 24) as f32
    };
    let players: Vec<(Vec3, f32)> = (0..SPREAD_PLAYERS)
        .map(|_| {
            let centre = Vec3::new(
                (unit() * 2.0 - 1.0) * SPREAD_HALF_M,
                (unit() * 2.0 - 1.0) * SPREAD_HALF_M,
                SKIN_M,
            );
            (centre, unit() * std::f32::consts::TAU)
        })
        .collect();
    let speed = 5.0;
    let omega = std::f32::consts::TAU / SPREAD_LAP_TICKS as f32; // radians a tick
    let radius_m = speed / (omega * 30.0);
    (0..SPREAD_LAP_TICKS)
        .map(|t| {
            players
                .iter()
                .map(|&(centre, phase)| {
                    let a = phase + omega * t as f32;
                    PlayerState {
                        origin: centre + Vec3::new(a.cos(), a.sin(), 0.0) * radius_m,
                        velocity: Vec3::new(-a.sin(), a.cos(), 0.0) * speed,
                        on_ground: true,
                        ..Default::default()
                    }
                })
                .collect()
        })
        .collect()
}

fn spread(c: &mut Criterion) {
    let scopes = Scopes::new(Instant::now);
    let mut group = c.benchmark_group("fow");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let lap = spread_lap();
    let teams: Vec<Team> = (0..SPREAD_PLAYERS).map(|i| Team::BOTH[i % 2]).collect();
    let alive = vec![true; SPREAD_PLAYERS];
    let config = FowConfig {
        tick_hz: 30,
        trace_every_ticks: NonZeroU8::new(4).unwrap(),
        ..FowConfig::default()
    };
    // The pillar stands between two players' circles, inside the crowd's bounds.
    for (label, map) in [
        ("open ground", spread_map(None)),
        ("one pillar", spread_map(Some(SPREAD_HALF_M * 0.5 + 0.5))),
    ] {
        let mut f = Fow::new(config, SPREAD_PLAYERS);
        let mut tick = 0u32;
        group.bench_function(
            format!("{SPREAD_PLAYERS} players spread over 3 km, {label}"),
            |b| {
                b.iter(|| {
                    tick = tick.wrapping_add(1);
                    let states = &lap[tick as usize % SPREAD_LAP_TICKS];
                    f.update(states, &teams, &alive, None, &map, Tick(tick), &scopes);
                    black_box(f.row(tickforge_game::PlayerSlot(0))[0])
                })
            },
        );
        println!("  {label}: {:?}", f.stats());
        // The same with the runtime's grid: relevancy's 32 m cells, each player placed
        // after the update, so the next one reads where it stood a tick before.
        let slot_of: Vec<u16> = (0..SPREAD_PLAYERS as u16).collect();
        let mut grid = Grid::new(SPREAD_PLAYERS, 32.0);
        let mut f = Fow::new(config, SPREAD_PLAYERS);
        group.bench_function(
            format!("{SPREAD_PLAYERS} players spread over 3 km, {label}, grid"),
            |b| {
                b.iter(|| {
                    tick = tick.wrapping_add(1);
                    let states = &lap[tick as usize % SPREAD_LAP_TICKS];
                    let near = Neighbours {
                        grid: &grid,
                        slot_of: &slot_of,
                        always: true,
                    };
                    f.update(
                        states,
                        &teams,
                        &alive,
                        Some(near),
                        &map,
                        Tick(tick),
                        &scopes,
                    );
                    for (e, s) in states.iter().enumerate() {
                        grid.place(e, s.origin.x, s.origin.y);
                    }
                    black_box(f.row(tickforge_game::PlayerSlot(0))[0])
                })
            },
        );
        println!("  {label}, grid: {:?}", f.stats());
    }
    group.finish();
}

criterion_group!(benches, fow, spread);
criterion_main!(benches);
