//! Fog-of-war cost: one [`Fow::update`] for 10 players on the arena and 100 on the 2 km map,
//! at their spawns and in play, with pairs traced every tick and every 4th (the server's
//! setting).

use std::hint::black_box;
use std::num::NonZeroU8;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use tickforge_game::fow::{Fow, FowConfig};
use tickforge_game::map::SKIN_M;
use tickforge_game::movement::pmove;
use tickforge_game::rules::Team;
use tickforge_game::{buttons, BuiltinMap, Map, PlayerState, Tick, UserCmd, Vec3};
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
                    f.update(&states, &teams, &alive, &map, Tick(tick), &scopes);
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
                    f.update(states, &teams, &alive, &map, Tick(tick), &scopes);
                    black_box(f.row(tickforge_game::PlayerSlot(0))[0])
                })
            },
        );
        // What a pass over the recording does, on average.
        let (mut pairs, mut traced, mut visible, mut rays, mut segments) = (0, 0, 0, 0, 0);
        let (mut unchanged, mut swept, mut walled) = (0, 0, 0);
        for (t, states) in play.iter().enumerate() {
            f.update(states, &teams, &alive, &map, Tick(t as u32), &scopes);
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

criterion_group!(benches, fow);
criterion_main!(benches);
