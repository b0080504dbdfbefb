//! Lag-compensation cost: one rewind and hitscan against 10 players (arena) and 100 (the
//! 2 km map); recording a tick of 10 players with posing every tick, every 4th tick and idle;
//! and posing 10 players outright.

use std::hint::black_box;
use std::num::NonZeroU8;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use tickforge_game::history::{History, HistoryConfig, PlayerSample, Posing};
use tickforge_game::hitscan::{fire, Shot};
use tickforge_game::movement::pmove;
use tickforge_game::pose::{pose_of, Gait, PoseParams, Stance};
use tickforge_game::{
    angle16_to_rad, buttons, BuiltinMap, PlayerSlot, PlayerState, Tick, UserCmd, Vec3, World,
    WorldConfig,
};
use tickforge_telemetry::Scopes;

const WARM_TICKS: u32 = 128 * 30;

/// Commands that keep players running, strafing, turning, aiming and jumping.
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
        pitch: ((x / 50 % 7) as i16 - 3) * 1500,
    }
}

/// Every player's state on each of `ticks` ticks after half a minute of play on `map`.
fn play(map: BuiltinMap, players: u8, ticks: u32) -> (World, Vec<Vec<PlayerState>>) {
    let world = World::new(WorldConfig {
        players: u16::from(players),
        map,
        ..WorldConfig::default()
    });
    let params = world.config().movement;
    let dt = 1.0 / world.config().tick_hz as f32;
    let mut states: Vec<_> = world.players().iter().map(|p| p.state).collect();
    let mut out = Vec::new();
    for tick in 0..WARM_TICKS + ticks {
        for (slot, s) in states.iter_mut().enumerate() {
            pmove(s, &cmd(tick, slot as u32), &params, world.map(), dt);
        }
        if tick >= WARM_TICKS {
            out.push(states.clone());
        }
    }
    (world, out)
}

fn samples(states: &[PlayerState]) -> impl Iterator<Item = PlayerSample> + '_ {
    states.iter().map(|&state| PlayerSample {
        state,
        stance: Stance::Standing,
        alive: true,
    })
}

fn rewind(c: &mut Criterion) {
    let scopes = Scopes::new(Instant::now);
    let mut group = c.benchmark_group("rewind + hitscan");
    group
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    for (map, players) in [(BuiltinMap::Arena, 10u8), (BuiltinMap::Flat2km, 100)] {
        let (world, ticks) = play(map, players, 64);
        let mut history = History::new(HistoryConfig {
            players: u16::from(players),
            ..HistoryConfig::default()
        })
        .unwrap();
        for (tick, states) in ticks.iter().enumerate() {
            history.record(
                Tick(tick as u32),
                samples(states),
                Posing::Animated,
                &scopes,
            );
        }
        let newest = history.newest().unwrap();
        let now = ticks.last().unwrap();
        // Each player shoots a teammate's chest (in sight on both maps) as it saw it 5.5
        // ticks ago: a fractional rewind between kept poses.
        let delay = 5.5;
        let time = history.rewind_time(newest, delay).unwrap();
        let shots: Vec<Shot> = (0..usize::from(players))
            .map(|shooter| {
                let target = (shooter + 2) % usize::from(players);
                let eye = now[shooter].origin + Vec3::new(0.0, 0.0, 1.6);
                let aim = history.origin_at(PlayerSlot(target as u16), time).unwrap();
                Shot {
                    shooter: PlayerSlot(shooter as u16),
                    command_tick: newest,
                    interp_delay_ticks: delay,
                    origin: eye,
                    direction: aim + Vec3::new(0.0, 0.0, 1.2) - eye,
                    max_range_m: 2000.0,
                }
            })
            .collect();
        let alive = vec![true; usize::from(players)];
        let hits = shots
            .iter()
            .filter(|s| fire(s, world.map(), &history, &alive, &scopes).is_some())
            .count();
        eprintln!(
            "{} players on {}: {hits} of {} shots hit",
            players,
            map.name(),
            shots.len()
        );
        let mut i = 0;
        group.bench_function(
            format!("{players} players on {}, one shot", map.name()),
            |b| {
                b.iter(|| {
                    i = (i + 1) % shots.len();
                    black_box(fire(&shots[i], world.map(), &history, &alive, &scopes))
                })
            },
        );
    }
    group.finish();
}

fn record(c: &mut Criterion) {
    let scopes = Scopes::new(Instant::now);
    let mut group = c.benchmark_group("record");
    group
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let (_, ticks) = play(BuiltinMap::Arena, 10, 1024);
    for (name, pose_every, posing) in [
        ("posing every tick", 1, Posing::Animated),
        ("posing every 4th tick", 4, Posing::Animated),
        ("idle (buy phase)", 4, Posing::Idle),
    ] {
        let mut history = History::new(HistoryConfig {
            players: 10,
            pose_every: NonZeroU8::new(pose_every).unwrap(),
            ..HistoryConfig::default()
        })
        .unwrap();
        let mut tick = 0u32;
        group.bench_function(format!("10 players, {name}, one tick"), |b| {
            b.iter(|| {
                let states = &ticks[tick as usize % ticks.len()];
                history.record(Tick(tick), samples(states), posing, &scopes);
                tick += 1;
            })
        });
    }
    group.finish();
}

fn pose(c: &mut Criterion) {
    let params = PoseParams::default();
    let (_, ticks) = play(BuiltinMap::Arena, 10, 1);
    let states = &ticks[0];
    let gaits: Vec<Gait> = states
        .iter()
        .map(|s| Gait {
            run_phase: 0.3,
            velocity: s.velocity,
        })
        .collect();
    c.bench_function("pose 10 players (pose_of, hitboxes, placed)", |b| {
        b.iter(|| {
            for (s, g) in states.iter().zip(&gaits) {
                let boxes = pose_of(s, Stance::Standing, g, &params)
                    .hitboxes(&params)
                    .placed(s.origin, angle16_to_rad(s.yaw));
                black_box(boxes);
            }
        })
    });
}

criterion_group!(benches, rewind, record, pose);
criterion_main!(benches);
