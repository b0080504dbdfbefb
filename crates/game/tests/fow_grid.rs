//! The fog of war finds the same enemy pairs in range with a spatial grid as without one:
//! the grid only prunes which pairs get a distance test. It is filled one tick late, as the
//! runtime fills replication's grid after the step, and may miss players, hold them where
//! they no longer are, or hold other entities; the rows stay those of the full scan.

use std::num::NonZeroU8;
use std::time::Instant;

use proptest::prelude::*;
use tickforge_game::fow::{Fow, FowConfig, FowStats, Neighbours};
use tickforge_game::map::SKIN_M;
use tickforge_game::rules::Team;
use tickforge_game::{Map, PlayerSlot, PlayerState, Tick, Vec3};
use tickforge_sim::spatial::Grid;
use tickforge_telemetry::Scopes;

/// Not a player: an entity index the grid holds for something else.
const NO_SLOT: u16 = u16::MAX;

/// A 400 m floor with a 12 m roof; with `cover`, a few boxes among the players, so the
/// update traces instead of taking the open field.
fn arena(cover: bool) -> Map {
    let mut text = String::from(
        "box -201 -201 -1 201 201 0\n\
         box -201 -201 12 201 201 13\n\
         spawn attackers 0 0 0 0\n",
    );
    if cover {
        text += "box -2 -30 0 2 30 3\nbox 40 40 0 44 41 6\nbox -60 10 0 -59 50 12\n";
    }
    Map::parse(&text).unwrap()
}

/// What one player does between two ticks.
#[derive(Clone, Copy, Debug)]
enum Move {
    /// Runs (or is pushed) by up to 9 m a tick on x and y: less than `STRAY_M`.
    Run(f32, f32),
    /// Put anywhere on the floor, maybe in the air (a respawn, a teleport).
    Teleport(f32, f32, f32),
    /// Dies, or comes back.
    FlipAlive,
    /// Changes team.
    FlipTeam,
}

fn a_move() -> impl Strategy<Value = Move> {
    prop_oneof![
        12 => prop_oneof![-1.0f32..1.0, -9.0f32..9.0]
            .prop_flat_map(|x| (Just(x), -1.0f32..1.0))
            .prop_map(|(x, y)| Move::Run(x, y)),
        1 => (-190.0f32..190.0, -190.0f32..190.0, 0.0f32..6.0)
            .prop_map(|(x, y, z)| Move::Teleport(x, y, z)),
        1 => Just(Move::FlipAlive),
        1 => Just(Move::FlipTeam),
    ]
}

/// What the runtime's replicator does with a player after a tick.
#[derive(Clone, Copy, Debug)]
enum Push {
    /// Placed where it stands: every tick, in the runtime.
    Placed,
    /// Not pushed this tick: the grid keeps its older place.
    Kept,
    /// Taken out of the grid.
    Removed,
}

fn a_push() -> impl Strategy<Value = Push> {
    prop_oneof![
        20 => Just(Push::Placed),
        1 => Just(Push::Kept),
        1 => Just(Push::Removed),
    ]
}

/// Everything but the counters of the search itself.
fn verdicts(s: FowStats) -> FowStats {
    FowStats {
        pairs_considered: 0,
        strays: 0,
        ..s
    }
}

#[derive(Clone, Debug)]
struct Case {
    starts: Vec<(f32, f32, bool, bool)>,
    ticks: Vec<Vec<(Move, Push)>>,
    cover: bool,
    every: u8,
    dead_visible: bool,
    view_m: f32,
    cell_m: f32,
    /// Extra entity indexes before the players' (other entities in the grid).
    offset: usize,
    /// Search the grid even where the scan looks cheaper.
    always: bool,
}

fn a_case() -> impl Strategy<Value = Case> {
    (1usize..150).prop_flat_map(|n| {
        (
            proptest::collection::vec(
                (
                    -190.0f32..190.0,
                    -190.0f32..190.0,
                    any::<bool>(),
                    any::<bool>(),
                ),
                n,
            ),
            proptest::collection::vec(proptest::collection::vec((a_move(), a_push()), n), 1..7),
            any::<bool>(),
            1u8..=4,
            any::<bool>(),
            prop_oneof![Just(0.5f32), 5.0f32..80.0, Just(600.0)],
            prop_oneof![Just(1.0f32), 0.25f32..4.0, 4.0f32..64.0, Just(512.0)],
            0usize..3,
            proptest::bool::weighted(0.8),
        )
            .prop_map(
                |(starts, ticks, cover, every, dead_visible, view_m, cell_m, offset, always)| {
                    Case {
                        starts,
                        ticks,
                        cover,
                        every,
                        dead_visible,
                        view_m,
                        cell_m,
                        offset,
                        always,
                    }
                },
            )
    })
}

fn run(case: &Case) -> Result<(), TestCaseError> {
    let scopes = Scopes::new(Instant::now);
    let n = case.starts.len();
    let map = arena(case.cover);
    let config = FowConfig {
        max_view_distance_m: case.view_m,
        trace_every_ticks: NonZeroU8::new(case.every).unwrap(),
        dead_visible_to_enemies: case.dead_visible,
        tick_hz: 30,
        ..FowConfig::default()
    };
    let mut states: Vec<PlayerState> = case
        .starts
        .iter()
        .map(|&(x, y, _, _)| PlayerState {
            origin: Vec3::new(x, y, SKIN_M),
            on_ground: true,
            ..Default::default()
        })
        .collect();
    let mut teams: Vec<Team> = case
        .starts
        .iter()
        .map(|s| Team::BOTH[usize::from(s.2)])
        .collect();
    let mut alive: Vec<bool> = case.starts.iter().map(|s| s.3).collect();
    // Players from entity index `offset`, in reverse slot order, among other entities.
    let entities = n + 2 * case.offset;
    let mut slot_of = vec![NO_SLOT; entities];
    let entity_of = |slot: usize| case.offset + (n - 1 - slot);
    for slot in 0..n {
        slot_of[entity_of(slot)] = slot as u16;
    }
    let mut grid = Grid::new(entities, case.cell_m);
    for e in (0..case.offset).chain(entities - case.offset..entities) {
        grid.place(e, e as f32, -(e as f32));
    }
    let mut plain = Fow::new(config, n);
    let mut pruned = Fow::new(config, n);
    for (t, moves) in case.ticks.iter().enumerate() {
        for (i, &(m, _)) in moves.iter().enumerate() {
            let s = &mut states[i];
            match m {
                Move::Run(dx, dy) => {
                    s.velocity = Vec3::new(dx, dy, 0.0) * 30.0;
                    s.origin += Vec3::new(dx, dy, 0.0);
                }
                Move::Teleport(x, y, z) => {
                    s.origin = Vec3::new(x, y, SKIN_M + z);
                    s.velocity = Vec3::ZERO;
                    s.on_ground = z == 0.0;
                }
                Move::FlipAlive => alive[i] = !alive[i],
                Move::FlipTeam => teams[i] = teams[i].other(),
            }
        }
        let tick = Tick(t as u32);
        plain.update(&states, &teams, &alive, None, &map, tick, &scopes);
        let near = Neighbours {
            grid: &grid,
            slot_of: &slot_of,
            always: case.always,
        };
        pruned.update(&states, &teams, &alive, Some(near), &map, tick, &scopes);
        let (a, b) = (plain.stats(), pruned.stats());
        prop_assert_eq!(verdicts(a), verdicts(b), "tick {}", t);
        prop_assert!(b.pairs_considered <= a.pairs_considered, "{:?} {:?}", a, b);
        for i in 0..n {
            let slot = PlayerSlot(i as u16);
            prop_assert_eq!(plain.row(slot), pruned.row(slot), "tick {} row {}", t, i);
        }
        // After the step, the runtime pushes what the game wrote into replication's grid.
        for (i, &(_, push)) in moves.iter().enumerate() {
            let e = entity_of(i);
            match push {
                Push::Placed => grid.place(e, states[i].origin.x, states[i].origin.y),
                Push::Kept => {}
                Push::Removed => grid.remove(e),
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_grid_finds_the_same_pairs_as_the_full_scan(case in a_case()) {
        run(&case)?;
    }
}

/// Spread out, the grid tests a small share of the pairs the full scan does, for the same
/// rows: 400 players over 400 m with 40 m of view.
#[test]
fn spread_out_the_grid_tests_few_pairs() {
    let scopes = Scopes::new(Instant::now);
    let n = 400;
    let map = arena(false);
    let config = FowConfig {
        max_view_distance_m: 40.0,
        ..FowConfig::default()
    };
    let mut seed = 7u32;
    let mut unit = || {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (seed >> 8) as f32 / (1 << 24) as f32
    };
    let states: Vec<PlayerState> = (0..n)
        .map(|_| PlayerState {
            origin: Vec3::new(unit() * 380.0 - 190.0, unit() * 380.0 - 190.0, SKIN_M),
            on_ground: true,
            ..Default::default()
        })
        .collect();
    let teams: Vec<Team> = (0..n).map(|i| Team::BOTH[i % 2]).collect();
    let alive = vec![true; n];
    let slot_of: Vec<u16> = (0..n as u16).collect();
    let mut grid = Grid::new(n, 32.0);
    let (mut plain, mut pruned) = (Fow::new(config, n), Fow::new(config, n));
    for t in 0..3 {
        let near = Neighbours {
            grid: &grid,
            slot_of: &slot_of,
            always: true,
        };
        plain.update(&states, &teams, &alive, None, &map, Tick(t), &scopes);
        pruned.update(&states, &teams, &alive, Some(near), &map, Tick(t), &scopes);
        for (e, s) in states.iter().enumerate() {
            grid.place(e, s.origin.x, s.origin.y);
        }
    }
    let (a, b) = (plain.stats(), pruned.stats());
    assert_eq!(verdicts(a), verdicts(b));
    assert!(a.pairs_in_range > 100, "{a:?}");
    assert_eq!(
        a.pairs_considered,
        200 * 200,
        "every enemy pair without the grid"
    );
    assert_eq!(b.strays, 0);
    assert!(
        b.pairs_considered * 5 < a.pairs_considered,
        "the grid tested {} pairs of {}",
        b.pairs_considered,
        a.pairs_considered
    );
    for i in 0..n {
        let slot = PlayerSlot(i as u16);
        assert_eq!(plain.row(slot), pruned.row(slot), "row {i}");
    }
}
