//! Fog of war decides what a wallhack could draw: walls hide, the open shows, teammates always
//! show, the movement margin shows an enemy about to come round a corner before it does (and
//! not one deep behind cover), the verdict is symmetric and is exactly the line of sight
//! between the sample points, and the arena's spawn rooms do not see each other.

use std::num::NonZeroU8;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use tickforge_game::fow::{Fow, FowConfig, POINTS_PER_PLAYER};
use tickforge_game::map::SKIN_M;
use tickforge_game::movement::pmove;
use tickforge_game::rules::Team;
use tickforge_game::{BuiltinMap, Map, PlayerSlot, PlayerState, Tick, UserCmd, Vec3};
use tickforge_telemetry::{Category, Scopes};

const A: Team = Team::Attackers;
const D: Team = Team::Defenders;
const DT: f32 = 1.0 / 128.0;
const WEST: u16 = 32768;

fn scopes() -> Scopes {
    Scopes::new(Instant::now)
}

/// A sealed 100 × 100 m hall with a 12 m roof, plus the `box` lines in `extra`.
fn hall(extra: &str) -> Map {
    let text = format!(
        "box -51 -51 -1 51 51 0\n\
         box -51 -51 12 51 51 13\n\
         box -51 -51 0 -50 51 12\n\
         box 50 -51 0 51 51 12\n\
         box -50 -51 0 50 -50 12\n\
         box -50 50 0 50 51 12\n\
         spawn attackers 0 0 0 0\n\
         {extra}"
    );
    Map::parse(&text).unwrap()
}

fn standing(x: f32, y: f32) -> PlayerState {
    PlayerState {
        origin: Vec3::new(x, y, SKIN_M),
        on_ground: true,
        ..Default::default()
    }
}

/// Line of sight only: no lookahead.
fn plain() -> FowConfig {
    FowConfig {
        lookahead: Duration::ZERO,
        ..FowConfig::default()
    }
}

/// The fog after one update with every player alive.
fn fog(config: FowConfig, map: &Map, players: &[PlayerState], teams: &[Team]) -> Fow {
    let mut fow = Fow::new(config, players.len());
    let alive = vec![true; players.len()];
    fow.update(players, teams, &alive, None, map, Tick(0), &scopes());
    fow
}

fn sees(fow: &Fow, viewer: u8, target: u8) -> bool {
    fow.is_visible(PlayerSlot(u16::from(viewer)), PlayerSlot(u16::from(target)))
}

/// Either sees the other; asserts the verdict is the same both ways.
fn mutual(fow: &Fow, a: u8, b: u8) -> bool {
    assert_eq!(sees(fow, a, b), sees(fow, b, a), "{a} and {b}");
    sees(fow, a, b)
}

/// What brute force says: some segment from a point of `a` to a point of `b` meets no box,
/// all their sample points swept afresh.
fn brute_los(map: &Map, fow: &Fow, a: &PlayerState, b: &PlayerState) -> bool {
    let (a, b) = (fow.sample_points(a, map), fow.sample_points(b, map));
    a.iter().any(|&from| {
        b.iter().any(|&to| {
            let d = to - from;
            map.trace_ray(from, d, d.length()).is_none()
        })
    })
}

#[test]
fn a_wall_between_two_players_hides_them_from_each_other() {
    let open = hall("");
    let walled = hall("box -0.5 -20 0 0.5 20 4");
    let players = [standing(-5.0, 0.0), standing(5.0, 0.0)];
    for config in [plain(), FowConfig::default()] {
        assert!(mutual(&fog(config, &open, &players, &[A, D]), 0, 1));
        assert!(!mutual(&fog(config, &walled, &players, &[A, D]), 0, 1));
    }
    // Each hugging its side of the wall: the margin sweeps stop at it and do not leak.
    let hugging = [standing(-0.9 - SKIN_M, 0.0), standing(0.9 + SKIN_M, 0.0)];
    let fow = fog(FowConfig::default(), &walled, &hugging, &[A, D]);
    assert!(!mutual(&fow, 0, 1));
    assert_eq!(fow.stats().pairs_walled_off, 1, "{:?}", fow.stats());
}

#[test]
fn a_player_in_the_open_is_visible_for_the_price_of_one_ray() {
    // Chest-high cover between them hides neither head.
    let map = hall("box -1 -30 0 1 30 1.4");
    let players = [standing(-20.0, 5.0), standing(25.0, -10.0)];
    for config in [plain(), FowConfig::default()] {
        let fow = fog(config, &map, &players, &[A, D]);
        assert!(mutual(&fow, 0, 1));
        let stats = fow.stats();
        assert_eq!((stats.pairs_traced, stats.pairs_visible), (1, 1));
        assert_eq!(stats.rays, 1, "eye to eye first: {stats:?}");
    }
}

#[test]
fn teammates_and_the_viewer_itself_are_always_visible() {
    let map = hall("box -0.5 -50 0 0.5 50 12");
    // Two attackers either side of a full wall, and two defenders beyond view distance of
    // each other on the 2 km map.
    let players = [standing(-5.0, 0.0), standing(5.0, 0.0)];
    let fow = fog(FowConfig::default(), &map, &players, &[A, A]);
    for (i, j) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
        assert!(sees(&fow, i, j));
    }
    let flat = BuiltinMap::Flat2km.load();
    let far = [
        standing(-600.0, 0.0),
        standing(600.0, 0.0),
        standing(0.0, 600.0),
    ];
    let fow = fog(FowConfig::default(), &flat, &far, &[D, D, A]);
    assert!(sees(&fow, 0, 1) && sees(&fow, 1, 0));
    // The attacker is in the open but 850 m away: past view distance, never traced.
    assert!(!mutual(&fow, 0, 2) && !mutual(&fow, 1, 2));
    assert_eq!(fow.stats().pairs_in_range, 0);
    assert_eq!(fow.row(PlayerSlot(0)), &[0b011]);
    assert_eq!(
        fow.visible_to(PlayerSlot(2)).collect::<Vec<_>>(),
        [PlayerSlot(2)]
    );
}

/// A 10 m wall along x with its west end at x = 0; the viewer stands south of its middle.
fn corner() -> Map {
    hall("box 0 0 0 10 1 3")
}

#[test]
fn the_margin_reveals_an_enemy_just_round_a_corner_but_not_one_deep_behind_cover() {
    let map = corner();
    let viewer = standing(5.0, -5.0);
    // Half a metre behind the wall's end: hidden now, out in one step.
    let just_behind = [viewer, standing(0.5, 2.5)];
    assert!(!mutual(&fog(plain(), &map, &just_behind, &[A, D]), 0, 1));
    assert!(mutual(
        &fog(FowConfig::default(), &map, &just_behind, &[A, D]),
        0,
        1
    ));
    // Seven metres in: hidden, margin or not.
    let deep = [viewer, standing(7.0, 2.5)];
    for config in [plain(), FowConfig::default()] {
        assert!(!mutual(&fog(config, &map, &deep, &[A, D]), 0, 1));
    }
    // A longer lookahead reaches farther: at a second, seven metres is within a run.
    let long = FowConfig {
        lookahead: Duration::from_secs(1),
        ..FowConfig::default()
    };
    assert!(mutual(&fog(long, &map, &deep, &[A, D]), 0, 1));
}

/// Runs `runner` west at full speed for up to `ticks`, the other player standing, and
/// returns the first tick each fog shows them to each other.
fn first_seen(
    map: &Map,
    mut players: [PlayerState; 2],
    runner: usize,
    ticks: u32,
    configs: [FowConfig; 2],
) -> [Option<u32>; 2] {
    let s = scopes();
    let params = FowConfig::default().movement;
    let mut fows = configs.map(|c| Fow::new(c, 2));
    let mut first = [None; 2];
    for tick in 0..ticks {
        for (fow, first) in fows.iter_mut().zip(&mut first) {
            fow.update(&players, &[A, D], &[true, true], None, map, Tick(tick), &s);
            if first.is_none() && mutual(fow, 0, 1) {
                *first = Some(tick);
            }
        }
        let cmd = UserCmd {
            forward: 127,
            yaw: WEST,
            ..Default::default()
        };
        pmove(&mut players[runner], &cmd, &params, map, DT);
    }
    first
}

#[test]
fn an_enemy_running_round_a_corner_is_sent_a_lookahead_before_it_shows() {
    let map = corner();
    let lookahead_ticks = 25; // 200 ms at 128 Hz, rounded down
                              // The enemy runs out from behind the wall; then the viewer runs out to peek a still
                              // enemy. Staggered traces must keep the lead too.
    let staggered = FowConfig {
        trace_every_ticks: NonZeroU8::new(4).unwrap(),
        ..FowConfig::default()
    };
    for margin in [FowConfig::default(), staggered] {
        for (players, runner) in [
            ([standing(5.0, -5.0), standing(7.0, 2.5)], 1),
            ([standing(8.0, -5.0), standing(4.0, 2.5)], 0),
        ] {
            let [shown, sent] = first_seen(&map, players, runner, 400, [plain(), margin]);
            let (shown, sent) = (shown.expect("comes into sight"), sent.expect("is sent"));
            assert!(sent > 0, "hidden at first");
            assert!(
                shown >= sent + lookahead_ticks,
                "sent at tick {sent}, in sight at {shown}"
            );
        }
    }
}

#[test]
fn the_arena_spawn_rooms_do_not_see_each_other() {
    let map = BuiltinMap::Arena.load();
    // A skin above the floor, where movement keeps a standing player.
    let spawn = |team, k| map.spawn_point(team, k).origin + Vec3::new(0.0, 0.0, SKIN_M);
    let mut players = Vec::new();
    let mut teams = Vec::new();
    for k in 0..5 {
        for team in [A, D] {
            players.push(PlayerState {
                origin: spawn(team, k),
                on_ground: true,
                ..Default::default()
            });
            teams.push(team);
        }
    }
    let fow = fog(FowConfig::default(), &map, &players, &teams);
    // Attackers are the even slots, defenders the odd: each sees exactly its own team.
    let attackers = 0b01_0101_0101;
    for i in 0..10u8 {
        let team = if i % 2 == 0 {
            attackers
        } else {
            attackers << 1
        };
        assert_eq!(fow.row(PlayerSlot(u16::from(i))), &[team], "slot {i}");
    }
    let stats = fow.stats();
    assert_eq!((stats.pairs_in_range, stats.pairs_visible), (25, 0));

    // Out in the arena: the open north lane shows; the tall west wall hides.
    let lane = [standing(-10.0, 17.0), standing(10.0, 17.0)];
    assert!(mutual(
        &fog(FowConfig::default(), &map, &lane, &[A, D]),
        0,
        1
    ));
    let behind_wall = [standing(-17.5, 9.0), standing(-12.5, 9.0)];
    assert!(!mutual(
        &fog(FowConfig::default(), &map, &behind_wall, &[A, D]),
        0,
        1
    ));
}

#[test]
fn dead_players_are_hidden_from_enemies_and_spectate_through_their_team() {
    // A full wall splits the hall: slots 0 and 1 west, 2 and 3 east.
    let map = hall("box -0.5 -50 0 0.5 50 12");
    let players = [
        standing(-10.0, 0.0),
        standing(-10.0, 10.0),
        standing(10.0, 0.0),
        standing(10.0, 10.0),
    ];
    let teams = [A, D, A, D];
    let s = scopes();
    for dead_visible_to_enemies in [false, true] {
        let config = FowConfig {
            dead_visible_to_enemies,
            ..FowConfig::default()
        };
        let mut fow = Fow::new(config, 4);
        fow.update(&players, &teams, &[true; 4], None, &map, Tick(0), &s);
        assert!(sees(&fow, 0, 1) && sees(&fow, 2, 3));
        assert!(!sees(&fow, 0, 3) && !sees(&fow, 2, 1));
        // Slot 2 dies beside slot 3.
        fow.update(
            &players,
            &teams,
            &[true, true, false, true],
            None,
            &map,
            Tick(1),
            &s,
        );
        assert!(fow.points(PlayerSlot(2)).is_empty());
        assert_eq!(sees(&fow, 3, 2), dead_visible_to_enemies);
        assert_eq!(sees(&fow, 1, 2), dead_visible_to_enemies);
        assert!(sees(&fow, 0, 2), "teammates see the dead");
        // The dead attacker sees what its living teammate sees: slot 1, not slot 3.
        assert_eq!(
            fow.visible_to(PlayerSlot(2)).collect::<Vec<_>>(),
            [PlayerSlot(0), PlayerSlot(1), PlayerSlot(2)]
        );
        // Alive again: its pairs are traced at once.
        fow.update(&players, &teams, &[true; 4], None, &map, Tick(2), &s);
        assert!(sees(&fow, 2, 3) && !sees(&fow, 2, 1));
    }
}

#[test]
fn staggered_traces_take_a_small_matchs_pairs_on_one_tick_in_four_and_retrace_a_teleport_at_once() {
    // A sealed closet in the north-east corner, and a knee-high crate among the players that
    // hides nobody but makes theirs no open field: their pairs are traced in rotation.
    let map = hall(
        "box 27 27 0 33 28 12\n\
         box 27 32 0 33 33 12\n\
         box 27 28 0 28 32 12\n\
         box 32 28 0 33 32 12\n\
         box 0 -1.5 0 1 -1 0.3",
    );
    // Five against five in the open, all in view.
    let players: Vec<_> = (0..10)
        .map(|i| standing(i as f32 * 3.0 - 15.0, (i % 3) as f32 * 4.0))
        .collect();
    let teams: Vec<_> = (0..10).map(|i| if i % 2 == 0 { A } else { D }).collect();
    let config = FowConfig {
        trace_every_ticks: NonZeroU8::new(4).unwrap(),
        ..FowConfig::default()
    };
    let mut fow = Fow::new(config, 10);
    let s = scopes();
    fow.update(&players, &teams, &[true; 10], None, &map, Tick(0), &s);
    assert_eq!(
        fow.stats().pairs_traced,
        25,
        "all pairs on the first update"
    );
    assert_eq!(fow.stats().pairs_visible, 25);
    // Ten players are one block of viewers: every pair on the tick that is a multiple of
    // four, none on the others, and each player swept on that tick alone.
    for tick in 1..=8 {
        fow.update(&players, &teams, &[true; 10], None, &map, Tick(tick), &s);
        let (traced, swept) = (fow.stats().pairs_traced, fow.stats().players_swept);
        if tick % 4 == 0 {
            assert_eq!(traced, 25, "tick {tick}");
            assert!(swept <= 10, "tick {tick}: {swept} swept");
        } else {
            assert_eq!((traced, swept), (0, 0), "tick {tick}");
        }
    }
    // Slot 3 is moved into the closet: hidden from every enemy on this very tick, though
    // most of its pairs are not due.
    let mut moved = players.clone();
    moved[3].origin = Vec3::new(30.0, 30.0, SKIN_M);
    fow.update(&moved, &teams, &[true; 10], None, &map, Tick(5), &s);
    for enemy in [0, 2, 4, 6, 8] {
        assert!(!mutual(&fow, 3, enemy), "{enemy}");
    }
    // And back out: seen at once again.
    fow.update(&players, &teams, &[true; 10], None, &map, Tick(6), &s);
    for enemy in [0, 2, 4, 6, 8] {
        assert!(mutual(&fow, 3, enemy), "{enemy}");
    }
}

#[test]
fn staggered_blocks_of_viewers_take_turns_and_the_phase_shifts_them() {
    // Forty players in the open hall, with a crate that makes it no open field: blocks of
    // 16 viewers (slots 0..16, 16..32, 32..40) each trace their pairs with every enemy above
    // them on the ticks where tick + phase + block is a multiple of the rotation.
    let map = hall("box 0 -1.5 0 1 -1 0.3");
    let players: Vec<_> = (0..40)
        .map(|i| standing((i % 8) as f32 * 4.0 - 15.0, (i / 8) as f32 * 4.0 - 10.0))
        .collect();
    let teams: Vec<_> = (0..40).map(|i| if i % 2 == 0 { A } else { D }).collect();
    let alive = [true; 40];
    let s = scopes();
    // Enemy pairs (i, j > i) whose lower slot is in each block: 20 × 20 pairs in all.
    let mut per_block = [0u32; 3];
    for i in 0..40 {
        per_block[i / 16] += (i + 1..40).filter(|j| (i + j) % 2 == 1).count() as u32;
    }
    assert_eq!(per_block.iter().sum::<u32>(), 400);
    for phase in [0, 1, 6] {
        let config = FowConfig {
            trace_every_ticks: NonZeroU8::new(4).unwrap(),
            phase,
            ..FowConfig::default()
        };
        let mut fow = Fow::new(config, 40);
        fow.update(&players, &teams, &alive, None, &map, Tick(0), &s);
        assert_eq!(
            fow.stats().pairs_traced,
            400,
            "all pairs on the first update"
        );
        let mut total = 0;
        for tick in 1..=4u32 {
            fow.update(&players, &teams, &alive, None, &map, Tick(tick), &s);
            let want: u32 = (0..3)
                .filter(|&b| (tick + phase + b) % 4 == 0)
                .map(|b| per_block[b as usize])
                .sum();
            assert_eq!(fow.stats().pairs_traced, want, "phase {phase} tick {tick}");
            total += want;
            // What the fog shows does not depend on when it traced: all in view.
            for j in (1..40).step_by(2) {
                assert!(mutual(&fow, 0, j), "phase {phase} tick {tick}: 0 and {j}");
            }
        }
        assert_eq!(total, 400, "phase {phase}: each pair once in four ticks");
    }
}

#[test]
fn an_update_is_charged_to_the_fow_category() {
    let map = hall("");
    let players = [standing(-5.0, 0.0), standing(5.0, 0.0)];
    let s = scopes();
    let mut fow = Fow::new(FowConfig::default(), 2);
    s.begin_frame();
    fow.update(&players, &[A, D], &[true, true], None, &map, Tick(0), &s);
    let record = s.end_frame();
    assert!(record.entered & (1 << Category::Fow.index()) != 0);
}

#[test]
fn a_crowd_in_the_open_sees_each_other_without_a_ray_and_one_box_brings_the_rays_back() {
    // Twenty players on a 10 m ring in the middle of the empty hall: the open field.
    let ring: Vec<PlayerState> = (0..20)
        .map(|i| {
            let a = i as f32 * std::f32::consts::TAU / 20.0;
            standing(10.0 * a.cos(), 10.0 * a.sin())
        })
        .collect();
    let teams: Vec<Team> = (0..20).map(|i| if i % 2 == 0 { A } else { D }).collect();
    let fow = fog(FowConfig::default(), &hall(""), &ring, &teams);
    let s = fow.stats();
    assert_eq!(
        (s.pairs_in_range, s.pairs_open, s.rays),
        (100, 100, 0),
        "{s:?}"
    );
    assert!((0..20u8).all(|i| (0..20u8).all(|j| sees(&fow, i, j))));
    // Still open, but with a view distance shorter than the ring: neighbours see each
    // other, the far side does not.
    let short = FowConfig {
        lookahead: Duration::ZERO,
        max_view_distance_m: 5.0,
        ..FowConfig::default()
    };
    let fow = fog(short, &hall(""), &ring, &teams);
    assert!(fow.stats().pairs_open > 0 && fow.stats().pairs_open < 100);
    assert!(mutual(&fow, 0, 1) && !mutual(&fow, 0, 11));
    // A wall across the ring's middle: the field is no longer open, and the wall hides the
    // pairs across it.
    let fow = fog(
        FowConfig::default(),
        &hall("box -0.5 -15 0 0.5 15 12"),
        &ring,
        &teams,
    );
    let s = fow.stats();
    assert_eq!(s.pairs_open, 0, "{s:?}");
    assert!(s.rays > 0 && s.pairs_visible < 100, "{s:?}");
    // Standing on a platform that does not span them is no open field either.
    let fow = fog(
        FowConfig::default(),
        &hall("box -5 -5 0 5 5 0.5"),
        &ring,
        &teams,
    );
    assert_eq!(fow.stats().pairs_open, 0);
}

/// A point in the empty hall's middle, on its floor or in the air, moving any way.
fn hall_player() -> impl Strategy<Value = PlayerState> {
    (
        -40f32..40.0,
        -40f32..40.0,
        prop_oneof![Just(0.0f32), 0.0f32..4.0],
        (-10.0f32..10.0, -10.0f32..10.0, -8.0f32..8.0),
        any::<bool>(),
    )
        .prop_map(|(x, y, z, (vx, vy, vz), on_ground)| PlayerState {
            origin: Vec3::new(x, y, z + SKIN_M),
            velocity: Vec3::new(vx, vy, if on_ground { 0.0 } else { vz }),
            on_ground,
            ..Default::default()
        })
}

/// A point on the arena floor (or inside a box standing on it), a velocity and whether it is
/// on the ground.
fn arena_player() -> impl Strategy<Value = PlayerState> {
    (
        -29.5f32..29.5,
        -19.5f32..19.5,
        prop_oneof![Just(0.0f32), 0.0f32..2.0],
        (-10.0f32..10.0, -10.0f32..10.0, -8.0f32..8.0),
        any::<bool>(),
    )
        .prop_map(|(x, y, z, (vx, vy, vz), on_ground)| PlayerState {
            origin: Vec3::new(x, y, z + SKIN_M),
            velocity: Vec3::new(vx, vy, if on_ground { 0.0 } else { vz }),
            on_ground,
            ..Default::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A visible verdict always has a clear ray from a sample point to a sample point, and a
    /// hidden one has none: the shortcuts (remembered blockers, a wall between the clouds)
    /// never change the answer. The matrix is symmetric.
    #[test]
    fn the_verdict_is_the_line_of_sight_between_the_sample_points(
        players in proptest::collection::vec(arena_player(), 2..9),
        teams in proptest::collection::vec(any::<bool>(), 9),
        lookahead_ms in prop_oneof![Just(0u64), 0u64..400],
    ) {
        let map = BuiltinMap::Arena.load();
        let n = players.len();
        let teams: Vec<Team> = teams[..n].iter().map(|&t| if t { A } else { D }).collect();
        let config = FowConfig {
            lookahead: Duration::from_millis(lookahead_ms),
            ..FowConfig::default()
        };
        let fow = fog(config, &map, &players, &teams);
        for i in 0..n as u8 {
            // What the update kept of the points is theirs: the near ones at least.
            let kept = fow.points(PlayerSlot(u16::from(i)));
            let all = fow.sample_points(&players[usize::from(i)], &map);
            prop_assert!(kept.len() >= 9 && kept.len() <= POINTS_PER_PLAYER);
            prop_assert_eq!(kept, &all[..kept.len()]);
            for j in 0..n as u8 {
                let (ti, tj) = (teams[usize::from(i)], teams[usize::from(j)]);
                prop_assert_eq!(sees(&fow, i, j), sees(&fow, j, i));
                if ti == tj {
                    prop_assert!(sees(&fow, i, j));
                } else if i < j {
                    let brute = brute_los(&map, &fow, &players[usize::from(i)], &players[usize::from(j)]);
                    prop_assert_eq!(sees(&fow, i, j), brute, "{} {}", i, j);
                }
            }
        }
    }

    /// In the open field the verdict is still exactly the line of sight between the sample
    /// points, for players on the floor, jumping and falling: no point goes below the
    /// ground, whatever the margin.
    #[test]
    fn the_open_field_verdict_is_the_line_of_sight_between_the_sample_points(
        players in proptest::collection::vec(hall_player(), 2..9),
        lookahead_ms in prop_oneof![Just(0u64), 0u64..400],
    ) {
        let map = hall("");
        let n = players.len();
        let teams: Vec<Team> = (0..n).map(|i| if i % 2 == 0 { A } else { D }).collect();
        let config = FowConfig {
            lookahead: Duration::from_millis(lookahead_ms),
            ..FowConfig::default()
        };
        let fow = fog(config, &map, &players, &teams);
        let s = fow.stats();
        prop_assert_eq!(s.pairs_open, s.pairs_in_range, "{:?}", s);
        for i in 0..n as u8 {
            for j in (i + 1)..n as u8 {
                if teams[usize::from(i)] != teams[usize::from(j)] {
                    let brute = brute_los(&map, &fow, &players[usize::from(i)], &players[usize::from(j)]);
                    prop_assert_eq!(sees(&fow, i, j), brute, "{} {}", i, j);
                }
            }
        }
    }

    /// The margin never hides what plain line of sight shows: the points where a player
    /// stands are among its points at any lookahead.
    #[test]
    fn the_margin_never_hides_what_plain_sight_shows(
        players in proptest::collection::vec(arena_player(), 2..9),
        lookahead_ms in 0u64..400,
    ) {
        let map = BuiltinMap::Arena.load();
        let n = players.len();
        let teams: Vec<Team> = (0..n).map(|i| if i % 2 == 0 { A } else { D }).collect();
        let margin = FowConfig {
            lookahead: Duration::from_millis(lookahead_ms),
            ..FowConfig::default()
        };
        let seen = fog(plain(), &map, &players, &teams);
        let sent = fog(margin, &map, &players, &teams);
        for i in 0..n as u8 {
            for j in 0..n as u8 {
                prop_assert!(!sees(&seen, i, j) || sees(&sent, i, j), "{} {}", i, j);
            }
        }
    }
}
