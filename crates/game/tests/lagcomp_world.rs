//! Lag compensation against a stepped world: rewinds never reach the live players, the broad
//! phase looks at few players yet finds the same hits as testing every player, and the work
//! lands in the animation and physics categories.

use std::time::Instant;

use tickforge_game::history::{History, HistoryConfig, PlayerSample, Posing, RewindTime};
use tickforge_game::hitscan::{fire, fire_with_stats, Shot, ShotStats};
use tickforge_game::movement::pmove;
use tickforge_game::pose::{Stance, HITBOX_COUNT};
use tickforge_game::rules::BodyPart;
use tickforge_game::{
    BuiltinMap, Map, MovementParams, PlayerSlot, PlayerState, Tick, UserCmd, Vec3, World,
    WorldConfig,
};
use tickforge_telemetry::{Category, Scopes};

const DT: f32 = 1.0 / 128.0;
const EYE_M: f32 = 1.6;

fn samples(states: impl Iterator<Item = PlayerState>) -> impl Iterator<Item = PlayerSample> {
    states.map(|state| PlayerSample {
        state,
        stance: Stance::Standing,
        alive: true,
    })
}

/// The middle of `slot`'s head capsule at `time`.
fn head_at(h: &History, slot: u8, time: RewindTime) -> Vec3 {
    let head = h
        .hitboxes_at(PlayerSlot(u16::from(slot)), time)
        .unwrap()
        .capsules[0];
    (head.a + head.b) * 0.5
}

#[test]
fn rewinds_never_reach_the_live_players() {
    let scopes = Scopes::new(Instant::now);
    let mut world = World::new(WorldConfig {
        players: 2,
        map: BuiltinMap::Flat2km,
        ..WorldConfig::default()
    });
    let mut h = History::new(HistoryConfig {
        players: 2,
        ..HistoryConfig::default()
    })
    .unwrap();
    // Slot 1 faces slot 0, 50 m away, and strafes back and forth across its view.
    let to_0 = world.players()[0].state.origin - world.players()[1].state.origin;
    let facing_slot_0 = tickforge_game::rad_to_angle16(to_0.y.atan2(to_0.x));
    let mut hits = 0;
    let mut misses_at_live = 0;
    for tick in 0..600u32 {
        let side = if tick / 100 % 2 == 0 { 127 } else { -127 };
        world.set_cmd(
            PlayerSlot(1),
            UserCmd {
                side,
                yaw: facing_slot_0,
                ..Default::default()
            },
        );
        world.step(&scopes);
        let stepped = Tick(world.tick().0 - 1);
        h.record(
            stepped,
            samples(world.players().iter().map(|p| p.state)),
            Posing::Animated,
            &scopes,
        );
        if tick < 100 {
            continue;
        }
        let live: Vec<_> = world.players().to_vec();
        let hash = world.state_hash();
        let (poses, held) = (h.poses_computed(), h.held_ticks());
        let eye = live[0].state.origin + Vec3::new(0.0, 0.0, EYE_M);
        let delay = 20.0;
        let then = h.rewind_time(stepped, delay).unwrap();
        let seen = head_at(&h, 1, then);
        let shot = Shot {
            shooter: PlayerSlot(0),
            command_tick: stepped,
            interp_delay_ticks: delay,
            origin: eye,
            direction: seen - eye,
            max_range_m: 100.0,
        };
        let hit = fire(&shot, world.map(), &h, &[true, true], &scopes).unwrap();
        assert_eq!((hit.victim, hit.part), (PlayerSlot(1), BodyPart::Head));
        hits += 1;
        // Aimed where the target is now, the same shot misses: it was tested in the past.
        let was = h.origin_at(PlayerSlot(1), then).unwrap();
        let now = live[1].state.origin;
        if (now - was).length() > 0.5 {
            let at_live = Shot {
                direction: seen + (now - was) - eye,
                ..shot
            };
            assert_eq!(
                fire(&at_live, world.map(), &h, &[true, true], &scopes),
                None
            );
            misses_at_live += 1;
        }
        // Nothing was written: not the live players, not the history.
        assert_eq!(world.players(), &live[..]);
        assert_eq!(world.state_hash(), hash);
        assert_eq!((h.poses_computed(), h.held_ticks()), (poses, held));
        assert_eq!(head_at(&h, 1, then), seen);
    }
    assert_eq!(hits, 500);
    assert!(misses_at_live > 250, "the target moved: {misses_at_live}");
}

/// 100 players on a 10 × 10 grid 3 m apart, running about in the open.
struct Crowd {
    map: Map,
    states: Vec<PlayerState>,
    history: History,
}

impl Crowd {
    fn new(ticks: u32) -> Crowd {
        let scopes = Scopes::new(Instant::now);
        let map = Map::parse("box -200 -200 -1 200 200 0\nspawn attackers 0 0 0 0\n").unwrap();
        let mut states: Vec<PlayerState> = (0..100)
            .map(|i| PlayerState {
                origin: Vec3::new((i % 10) as f32 * 3.0, (i / 10) as f32 * 3.0, 0.0),
                on_ground: true,
                ..Default::default()
            })
            .collect();
        let mut history = History::new(HistoryConfig {
            players: 100,
            ..HistoryConfig::default()
        })
        .unwrap();
        let params = MovementParams::default();
        for tick in 0..ticks {
            for (slot, s) in states.iter_mut().enumerate() {
                let x = (tick / 40 + slot as u32 * 7) as u16;
                let cmd = UserCmd {
                    forward: [127, 0, -127][usize::from(x % 3)],
                    side: [0, 127, -127, 0][usize::from(x % 4)],
                    yaw: x.wrapping_mul(9000),
                    ..Default::default()
                };
                pmove(s, &cmd, &params, &map, DT);
            }
            history.record(
                Tick(tick),
                samples(states.iter().copied()),
                Posing::Animated,
                &scopes,
            );
        }
        Crowd {
            map,
            states,
            history,
        }
    }
}

#[test]
fn the_broad_phase_skips_far_players() {
    let scopes = Scopes::new(Instant::now);
    let crowd = Crowd::new(1);
    let h = &crowd.history;
    let alive = [true; 100];
    // From slot 0 at one corner straight up the grid's first column: players 10, 20, ...
    // stand on the line, the rest at least 3 m off it.
    let eye = crowd.states[0].origin + Vec3::new(0.0, 0.0, EYE_M);
    let mut stats = ShotStats::default();
    let shot = Shot {
        shooter: PlayerSlot(0),
        command_tick: Tick(0),
        interp_delay_ticks: 0.0,
        origin: eye,
        direction: Vec3::new(0.0, 1.0, -0.1),
        max_range_m: 200.0,
    };
    let hit = fire_with_stats(&shot, &crowd.map, h, &alive, &scopes, &mut stats).unwrap();
    assert_eq!(hit.victim, PlayerSlot(10));
    // The history's grid offers the players near the first 16 m of the column, not all 99.
    assert!(stats.cells_walked > 0, "{stats:?}");
    assert!(stats.broad_tests < 20, "{stats:?}");
    // Player 10 is hit; the ray, dropping 10 cm a metre, passes player 20's knees and the
    // floor bounds it at 16 m, short of the rest.
    assert!(stats.narrow_players <= 2, "{stats:?}");
    assert_eq!(
        stats.capsule_tests,
        stats.narrow_players * HITBOX_COUNT as u32
    );
    // Between the first two columns, level: nobody is near enough to rewind.
    let between = Shot {
        origin: Vec3::new(1.5, -5.0, EYE_M),
        direction: Vec3::new(0.0, 1.0, 0.0),
        ..shot
    };
    assert_eq!(
        fire_with_stats(&between, &crowd.map, h, &alive, &scopes, &mut stats),
        None
    );
    assert_eq!(stats.narrow_players, 0);
    // At most the two columns either side of the line.
    assert!(stats.broad_tests <= 20, "{stats:?}");
}

/// The nearest hit over every player's rewound hitboxes, with no broad phase.
fn brute_force(crowd: &Crowd, shot: &Shot) -> Option<(PlayerSlot, BodyPart, f32)> {
    let h = &crowd.history;
    let time = h
        .rewind_time(shot.command_tick, shot.interp_delay_ticks)
        .unwrap();
    let dir = shot.direction * (1.0 / shot.direction.length());
    let limit = crowd
        .map
        .trace_ray(shot.origin, dir, shot.max_range_m)
        .map_or(shot.max_range_m, |w| w.distance);
    let mut best: Option<(PlayerSlot, BodyPart, f32)> = None;
    for slot in 0..100u16 {
        if slot == shot.shooter.0 {
            continue;
        }
        let boxes = h.hitboxes_at(PlayerSlot(slot), time).unwrap();
        if let Some((part, t)) = boxes.first_hit(shot.origin, dir, limit) {
            if best.is_none_or(|b| t < b.2) {
                best = Some((PlayerSlot(slot), part, t));
            }
        }
    }
    best
}

#[test]
fn the_broad_phase_finds_what_testing_every_player_finds() {
    let scopes = Scopes::new(Instant::now);
    let crowd = Crowd::new(400);
    let newest = crowd.history.newest().unwrap();
    let alive = [true; 100];
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng >> 40) as f32 / (1u64 << 24) as f32
    };
    let (mut hits, mut narrow) = (0, 0);
    let shots = 2000;
    for _ in 0..shots {
        let shooter = (next() * 100.0) as usize % 100;
        let target = (next() * 100.0) as usize % 100;
        let delay = next() * 30.0;
        let time = crowd.history.rewind_time(newest, delay).unwrap();
        let Some(aim) = crowd.history.origin_at(PlayerSlot(target as u16), time) else {
            continue;
        };
        let eye = crowd.states[shooter].origin + Vec3::new(0.0, 0.0, EYE_M);
        let jitter = Vec3::new((next() - 0.5) * 0.5, (next() - 0.5) * 0.5, next() * 1.8);
        let shot = Shot {
            shooter: PlayerSlot(shooter as u16),
            command_tick: newest,
            interp_delay_ticks: delay,
            origin: eye,
            direction: aim + jitter - eye,
            max_range_m: 100.0,
        };
        let mut stats = ShotStats::default();
        let got = fire_with_stats(
            &shot,
            &crowd.map,
            &crowd.history,
            &alive,
            &scopes,
            &mut stats,
        );
        let want = brute_force(&crowd, &shot);
        assert_eq!(
            got.map(|g| (g.victim, g.part, g.distance_m)),
            want,
            "{shot:?}"
        );
        hits += usize::from(got.is_some());
        narrow += stats.narrow_players;
    }
    // The jitter spreads shots up to 12.5 cm either side of the target's feet, so about
    // seven in ten land; the broad phase keeps a few players of 99 per shot.
    assert!(hits > shots / 2, "{hits}");
    let mean = narrow as f32 / shots as f32;
    println!("{hits} of {shots} shots hit; {mean} players rewound a shot");
    assert!(mean < 5.0, "{mean}");
}

#[test]
fn posing_is_charged_to_animation_and_the_shot_to_physics() {
    let scopes = Scopes::new(Instant::now);
    let map = Map::parse("box -50 -50 -1 50 50 0\nspawn attackers 0 0 0 0\n").unwrap();
    let mut h = History::new(HistoryConfig {
        players: 2,
        ..HistoryConfig::default()
    })
    .unwrap();
    let states = [
        PlayerState::default(),
        PlayerState {
            origin: Vec3::new(10.0, 0.0, 0.0),
            ..Default::default()
        },
    ];
    scopes.begin_frame();
    for tick in 0..=5 {
        h.record(
            Tick(tick),
            samples(states.iter().copied()),
            Posing::Animated,
            &scopes,
        );
    }
    let frame = scopes.end_frame();
    assert_eq!(
        frame.entered,
        1 << Category::Animation.index() | 1 << Category::Other.index()
    );

    let shot = Shot {
        shooter: PlayerSlot(0),
        command_tick: Tick(5),
        interp_delay_ticks: 0.0,
        origin: Vec3::new(0.0, 0.0, 1.2),
        direction: Vec3::new(1.0, 0.0, 0.0),
        max_range_m: 50.0,
    };
    // Tick 4 is kept: the shot is all physics.
    scopes.begin_frame();
    let hit = fire(
        &Shot {
            interp_delay_ticks: 1.0,
            ..shot
        },
        &map,
        &h,
        &[true; 2],
        &scopes,
    );
    let frame = scopes.end_frame();
    assert!(hit.is_some());
    assert_eq!(
        frame.entered,
        1 << Category::Physics.index() | 1 << Category::Other.index()
    );
    // Tick 5 is past the last kept tick: posed on demand, under animation.
    scopes.begin_frame();
    assert!(fire(&shot, &map, &h, &[true; 2], &scopes).is_some());
    let frame = scopes.end_frame();
    assert!(frame.entered & 1 << Category::Animation.index() != 0);
    assert!(frame.entered & 1 << Category::Physics.index() != 0);
}
