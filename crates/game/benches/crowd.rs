//! The crowd's fight, stage by stage, at 100, 300 and 1,000 players: how each part of the
//! shooter's simulation grows with the players in one place (issue 16's "nothing quadratic
//! in the frame").
//!
//! Every player starts on a 20 m ring at the centre of a flat 2 km floor, so all of them
//! are within each other's relevancy and view distance from the first tick: the fight the
//! crowd scenario's runners reach after their run-in, without the run-in. They strafe
//! round the centre, turn, jump now and then and fire one tick in eight (10,000 HP each,
//! so nobody dies and the fight stays the same size). 30 Hz, the crowd target's rate.
//!
//! - `world step`: one [`World::step_near`]: movement, the rules, every shot's
//!   lag-compensated trace, the history's posing and the fog of war (every 4th tick per
//!   pair, the server's default), as the server runs it: with a grid of where the players
//!   stood a tick before (replication's, in the server), filled after each step.
//! - `fow`: the fog of war's update alone, over states recorded from the same fight, with
//!   such a grid.
//!
//! After the benches it prints each stage's growth as an exponent: `t(n) ∝ n^k`, `k` from
//! the medians at 100 and 1,000 players (1 is linear, 2 quadratic).

use std::hint::black_box;
use std::num::{NonZeroU16, NonZeroU8};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use tickforge_game::fow::{Fow, FowConfig, Neighbours};
use tickforge_game::rules::{RulesConfig, Team};
use tickforge_game::{buttons, Map, PlayerSlot, Tick, UserCmd, Vec3, World, WorldConfig};
use tickforge_sim::spatial::Grid;
use tickforge_telemetry::Scopes;

const SIZES: [u16; 3] = [100, 300, 1000];
const TICK_HZ: u32 = 30;
/// Ticks of the fight played before measuring, so players are spread and moving.
const WARM_TICKS: u32 = 60;
/// Ticks of recorded states the fog-of-war bench cycles through.
const RECORDED_TICKS: usize = 64;

/// A sealed 2 km floor with `players` spawn points on a 20 m ring at the centre.
fn fight_map(players: u16) -> Map {
    let text = format!(
        "box -1001 -1001 -1 1001 1001 0\n\
         box -1001 -1001 50 1001 1001 51\n\
         box -1001 -1001 0 -1000 1001 50\n\
         box 1000 -1001 0 1001 1001 50\n\
         box -1000 -1001 0 1000 -1000 50\n\
         box -1000 1000 0 1000 1001 50\n\
         spawn_ring 0 0 0 20 {players}\n"
    );
    Map::parse(&text).expect("the fight map parses")
}

fn config(players: u16) -> WorldConfig {
    let d = WorldConfig::default();
    WorldConfig {
        players,
        tick_hz: TICK_HZ,
        rules: RulesConfig {
            buy: Duration::ZERO,
            round: Duration::from_secs(3600),
            max_health_hp: NonZeroU16::new(10_000).unwrap(),
            ..d.rules
        },
        ..d
    }
}

/// Strafe round the centre, turning; jump one tick in 97, fire one in 8.
fn cmd(tick: u32, slot: u32) -> UserCmd {
    let x = tick.wrapping_mul(31).wrapping_add(slot * 7);
    let mut b = 0;
    if x.is_multiple_of(97) {
        b |= buttons::JUMP;
    }
    if (tick + slot).is_multiple_of(8) {
        b |= buttons::FIRE;
    }
    UserCmd {
        forward: ((x / 16 % 3) as i8 - 1) * 90,
        side: 127,
        buttons: b,
        yaw: (slot.wrapping_mul(6553) + tick * 300) as u16,
        pitch: 0,
    }
}

/// Where the server's replication holds the players: relevancy's 32 m cells, by slot.
struct Placed {
    grid: Grid,
    slot_of: Vec<u16>,
}

impl Placed {
    fn new(players: u16) -> Placed {
        Placed {
            grid: Grid::new(usize::from(players), 32.0),
            slot_of: (0..players).collect(),
        }
    }

    fn near(&self) -> Neighbours<'_> {
        Neighbours {
            grid: &self.grid,
            slot_of: &self.slot_of,
            always: false,
        }
    }

    /// Places every player where it stands, as the server does after each step.
    fn place(&mut self, states: impl Iterator<Item = Vec3>) {
        for (e, origin) in states.enumerate() {
            self.grid.place(e, origin.x, origin.y);
        }
    }
}

fn play(world: &mut World, placed: &mut Placed, scopes: &Scopes) {
    let t = world.tick().0;
    for slot in 0..world.players().len() {
        world.set_cmd(PlayerSlot(slot as u16), cmd(t, slot as u32));
    }
    world.step_near(scopes, Some(placed.near()));
    placed.place(world.players().iter().map(|p| p.state.origin));
}

/// The median of `f`'s time over `runs` calls.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn exponent(small: Duration, large: Duration, ratio: f64) -> f64 {
    (large.as_secs_f64() / small.as_secs_f64()).ln() / ratio.ln()
}

fn crowd(c: &mut Criterion) {
    let scopes = Scopes::new(Instant::now);
    let mut group = c.benchmark_group("crowd");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let mut medians = Vec::new();
    for players in SIZES {
        let map = Arc::new(fight_map(players));
        let mut world = World::with_map(config(players), map.clone());
        let mut placed = Placed::new(players);
        for _ in 0..WARM_TICKS {
            play(&mut world, &mut placed, &scopes);
        }
        group.bench_function(format!("world step, {players} players in the fight"), |b| {
            b.iter(|| {
                play(&mut world, &mut placed, &scopes);
                black_box(world.tick())
            })
        });
        let step = median(15, || play(&mut world, &mut placed, &scopes));

        // The fog alone, over recorded states of the same fight.
        let recorded: Vec<Vec<_>> = (0..RECORDED_TICKS)
            .map(|_| {
                play(&mut world, &mut placed, &scopes);
                world.players().iter().map(|p| p.state).collect()
            })
            .collect();
        let teams: Vec<Team> = (0..players)
            .map(|s| World::team_of(PlayerSlot(s)))
            .collect();
        let alive = vec![true; usize::from(players)];
        let fow_config = FowConfig {
            tick_hz: TICK_HZ,
            trace_every_ticks: NonZeroU8::new(4).unwrap(),
            ..FowConfig::default()
        };
        let mut fow = Fow::new(fow_config, usize::from(players));
        let mut tick = 0u32;
        let mut placed = Placed::new(players);
        let mut update = |fow: &mut Fow| {
            tick += 1;
            let states = &recorded[tick as usize % RECORDED_TICKS];
            let near = Some(placed.near());
            fow.update(states, &teams, &alive, near, &map, Tick(tick), &scopes);
            placed.place(states.iter().map(|s| s.origin));
        };
        group.bench_function(format!("fow, {players} players in the fight"), |b| {
            b.iter(|| {
                update(&mut fow);
                black_box(fow.row(PlayerSlot(0))[0])
            })
        });
        let fog = median(15, || update(&mut fow));
        let s = fow.stats();
        println!(
            "  {players} players: {} pairs considered, {} in range, {} traced, {} visible, {} rays",
            s.pairs_considered, s.pairs_in_range, s.pairs_traced, s.pairs_visible, s.rays
        );
        medians.push((players, step, fog));
    }
    group.finish();
    if let (Some(&(n0, step0, fog0)), Some(&(n1, step1, fog1))) = (medians.first(), medians.last())
    {
        let ratio = f64::from(n1) / f64::from(n0);
        println!(
            "growth from {n0} to {n1} players (t ∝ n^k): world step k = {:.2} ({:?} → {:?}), \
             fow k = {:.2} ({:?} → {:?})",
            exponent(step0, step1, ratio),
            step0,
            step1,
            exponent(fog0, fog1, ratio),
            fog0,
            fog1
        );
    }
}

criterion_group!(benches, crowd);
criterion_main!(benches);
