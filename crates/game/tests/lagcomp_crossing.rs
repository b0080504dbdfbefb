//! Rewind correctness on synthetic cases, tick by tick: a target crosses the crosshair at
//! known ticks and is hit exactly when the rewind lands on them; the rewind is clamped to
//! the max rewind and to the history held; walls occlude; the head wins a tie with the body.

use std::num::NonZeroU8;
use std::time::{Duration, Instant};

use tickforge_game::history::{History, HistoryConfig, PlayerSample, Posing};
use tickforge_game::hitscan::{fire, fire_with_stats, Shot, ShotStats};
use tickforge_game::pose::{Pose, PoseParams, Stance, SAME_DISTANCE_M};
use tickforge_game::rules::BodyPart;
use tickforge_game::{Map, PlayerSlot, PlayerState, Tick, Vec3};
use tickforge_telemetry::Scopes;

/// The tick at which the target's head centre is 5 cm past the crosshair line.
const CROSSING: u32 = 30;
/// The target's sideways speed: 10 cm a tick, 12.8 m/s at 128 Hz.
const STEP_M: f32 = 0.1;
/// The shot's height: the middle of the standing head capsule's cylinder, clear of the bob.
const HEAD_Z: f32 = 1.55;
const TARGET_X: f32 = 10.0;
const ALIVE: [bool; 2] = [true, true];

fn flat() -> Map {
    Map::parse("box -100 -100 -1 100 100 0\nspawn attackers 0 0 0 0\n").unwrap()
}

fn history(pose_every: u8, max_rewind_ms: u64) -> History {
    History::new(HistoryConfig {
        players: 2,
        pose_every: NonZeroU8::new(pose_every).unwrap(),
        max_rewind: Duration::from_millis(max_rewind_ms),
        ..HistoryConfig::default()
    })
    .unwrap()
}

/// Slot 0 stands at the origin looking along +x; slot 1 strafes along +y at `TARGET_X`,
/// facing the shooter, its head centre at y = 0.1 (t − 30) + 0.05: within the head's 12 cm
/// radius of the line y = 0 on ticks 29 and 30 only (5 cm off), 15 cm off on 28 and 31.
fn samples(tick: u32) -> [PlayerSample; 2] {
    let y = STEP_M * (tick as f32 - CROSSING as f32) + 0.05;
    let shooter = PlayerSample {
        state: PlayerState {
            on_ground: true,
            ..Default::default()
        },
        stance: Stance::Standing,
        alive: true,
    };
    let target = PlayerSample {
        state: PlayerState {
            origin: Vec3::new(TARGET_X, y, 0.0),
            velocity: Vec3::new(0.0, STEP_M * 128.0, 0.0),
            yaw: 32768,
            pitch: 0,
            on_ground: true,
            crouched: false,
        },
        stance: Stance::Standing,
        alive: true,
    };
    [shooter, target]
}

fn shot(command_tick: u32, interp_delay_ticks: f32) -> Shot {
    Shot {
        shooter: PlayerSlot(0),
        command_tick: Tick(command_tick),
        interp_delay_ticks,
        origin: Vec3::new(0.0, 0.0, HEAD_Z),
        direction: Vec3::new(1.0, 0.0, 0.0),
        max_range_m: 100.0,
    }
}

/// Records ticks 0..=`last`, firing at each newest tick with every delay in `delays`, and
/// returns (newest tick, delay, rewound tick and fraction, hit part) for every shot.
fn sweep(pose_every: u8, last: u32, delays: &[f32]) -> Vec<(u32, f32, u32, f32, Option<BodyPart>)> {
    let scopes = Scopes::new(Instant::now);
    let map = flat();
    let mut h = history(pose_every, 200);
    let mut out = Vec::new();
    for tick in 0..=last {
        h.record(Tick(tick), samples(tick), Posing::Animated, &scopes);
        for &delay in delays {
            let mut stats = ShotStats::default();
            let hit = fire_with_stats(&shot(tick, delay), &map, &h, &ALIVE, &scopes, &mut stats);
            let at = stats.rewound_to.unwrap();
            if let Some(hit) = hit {
                assert_eq!(hit.victim, PlayerSlot(1));
                assert!((hit.point.z - HEAD_Z).abs() < 1e-5);
            }
            out.push((tick, delay, at.tick.0, at.frac, hit.map(|h| h.part)));
        }
    }
    out
}

#[test]
fn a_crossing_target_is_hit_on_its_ticks_and_missed_one_tick_either_side() {
    for pose_every in [1, 4] {
        let delays = [0.0, 1.0, 2.0, 3.0, 7.0, 26.0];
        let mut hits = 0;
        for (tick, delay, at, frac, part) in sweep(pose_every, 70, &delays) {
            let wanted = tick as f32 - delay;
            if wanted < 0.0 {
                continue; // clamped to tick 0; covered below
            }
            assert_eq!(
                (at, frac),
                (wanted as u32, 0.0),
                "tick {tick} delay {delay}"
            );
            let expected = (at == CROSSING - 1 || at == CROSSING).then_some(BodyPart::Head);
            assert_eq!(
                part, expected,
                "pose_every {pose_every}: rewound to {at} (fired at {tick}, delay {delay})"
            );
            hits += usize::from(part.is_some());
        }
        // Two ticks for each delay.
        assert_eq!(hits, 2 * delays.len());
    }
}

#[test]
fn a_fractional_delay_lerps_between_ticks() {
    // Half a tick back from the crossing ticks the head is 0, 10 and 10 cm off (hit); 1.5
    // ticks past them it is 20 cm off either way (miss).
    for pose_every in [1, 4] {
        for (tick, delay, at, frac, part) in sweep(pose_every, 70, &[0.5, 2.5, 9.5]) {
            if (tick as f32) < delay {
                continue;
            }
            assert!((frac - 0.5).abs() < 1e-6, "{frac}");
            let between = at as f32 + 0.5;
            let expected = [
                CROSSING as f32 - 1.5,
                CROSSING as f32 - 0.5,
                CROSSING as f32 + 0.5,
            ]
            .contains(&between)
            .then_some(BodyPart::Head);
            assert_eq!(
                part, expected,
                "at {between} (fired at {tick}, delay {delay})"
            );
        }
    }
}

#[test]
fn the_rewind_is_clamped_to_the_max_rewind() {
    let scopes = Scopes::new(Instant::now);
    let map = flat();
    // 200 ms at 128 Hz is 26 ticks.
    let mut short = history(4, 200);
    let mut long = history(4, 300);
    assert_eq!(
        (short.max_rewind_ticks(), long.max_rewind_ticks()),
        (26, 39)
    );
    let mut stats = ShotStats::default();
    let mut newest = 0;
    for tick in 0..=CROSSING + 26 {
        short.record(Tick(tick), samples(tick), Posing::Animated, &scopes);
        long.record(Tick(tick), samples(tick), Posing::Animated, &scopes);
        newest = tick;
    }
    // Exactly the max rewind: the crossing tick is the oldest held, and is hit.
    let hit = fire_with_stats(
        &shot(newest, 26.0),
        &map,
        &short,
        &ALIVE,
        &scopes,
        &mut stats,
    );
    assert_eq!(stats.rewound_to.unwrap().tick, Tick(CROSSING));
    assert_eq!(hit.map(|h| h.part), Some(BodyPart::Head));

    // One tick later the same view is 27 ticks back: clamped to 26, a tick past the
    // crossing, where the head is 15 cm off the line.
    newest += 1;
    short.record(Tick(newest), samples(newest), Posing::Animated, &scopes);
    long.record(Tick(newest), samples(newest), Posing::Animated, &scopes);
    assert_eq!(short.oldest(), Some(Tick(newest - 26)));
    for delay in [27.0, 28.0, 100.0] {
        let miss = fire_with_stats(
            &shot(newest, delay),
            &map,
            &short,
            &ALIVE,
            &scopes,
            &mut stats,
        );
        assert_eq!(
            stats.rewound_to.unwrap().tick,
            Tick(CROSSING + 1),
            "{delay}"
        );
        assert_eq!(miss, None);
    }
    // A 300 ms history still reaches the crossing.
    let hit = fire_with_stats(
        &shot(newest, 27.0),
        &map,
        &long,
        &ALIVE,
        &scopes,
        &mut stats,
    );
    assert_eq!(stats.rewound_to.unwrap().tick, Tick(CROSSING));
    assert_eq!(hit.map(|h| h.part), Some(BodyPart::Head));
}

#[test]
fn the_rewind_is_clamped_to_the_history_held() {
    let scopes = Scopes::new(Instant::now);
    let map = flat();
    let mut h = history(4, 200);
    // Nothing recorded: nothing to hit.
    assert_eq!(fire(&shot(0, 0.0), &map, &h, &ALIVE, &scopes), None);
    for tick in 20..=25 {
        h.record(Tick(tick), samples(tick), Posing::Animated, &scopes);
    }
    let mut stats = ShotStats::default();
    fire_with_stats(&shot(25, 20.0), &map, &h, &ALIVE, &scopes, &mut stats);
    assert_eq!(stats.rewound_to.unwrap().tick, Tick(20));
}

#[test]
fn a_wall_between_shooter_and_target_blocks_and_one_behind_does_not() {
    let scopes = Scopes::new(Instant::now);
    let between =
        Map::parse("box -100 -100 -1 100 100 0\nbox 5 -2 0 5.5 2 3\nspawn attackers 0 0 0 0\n")
            .unwrap();
    let behind =
        Map::parse("box -100 -100 -1 100 100 0\nbox 12 -2 0 12.5 2 3\nspawn attackers 0 0 0 0\n")
            .unwrap();
    let mut h = history(4, 200);
    for tick in 0..=CROSSING {
        h.record(Tick(tick), samples(tick), Posing::Animated, &scopes);
    }
    let mut stats = ShotStats::default();
    let blocked = fire_with_stats(
        &shot(CROSSING, 0.0),
        &between,
        &h,
        &ALIVE,
        &scopes,
        &mut stats,
    );
    assert_eq!(blocked, None);
    assert!((stats.wall_m.unwrap() - 5.0).abs() < 1e-5);
    // The wall also keeps the broad phase from looking at the target.
    assert_eq!(stats.narrow_players, 0);
    let hit = fire(&shot(CROSSING, 0.0), &behind, &h, &ALIVE, &scopes).unwrap();
    assert_eq!((hit.victim, hit.part), (PlayerSlot(1), BodyPart::Head));
    // And the range bounds the shot like a wall.
    let short = Shot {
        max_range_m: 9.5,
        ..shot(CROSSING, 0.0)
    };
    assert_eq!(fire(&short, &flat(), &h, &ALIVE, &scopes), None);
}

#[test]
fn only_players_alive_now_and_then_are_hit_and_never_the_shooter() {
    let scopes = Scopes::new(Instant::now);
    let map = flat();
    let mut h = history(4, 200);
    for tick in 0..=CROSSING + 5 {
        let mut s = samples(tick);
        // The target is dead on tick 29 (and alive again on 30, as after a respawn).
        s[1].alive = tick != CROSSING - 1;
        h.record(Tick(tick), s, Posing::Animated, &scopes);
    }
    let newest = CROSSING + 5;
    assert!(fire(&shot(newest, 5.0), &map, &h, &ALIVE, &scopes).is_some());
    assert_eq!(
        fire(&shot(newest, 5.0), &map, &h, &[true, false], &scopes),
        None
    );
    assert_eq!(fire(&shot(newest, 6.0), &map, &h, &ALIVE, &scopes), None);
    // The shot starts inside the shooter's own head and still reaches the target.
    assert_eq!(
        fire(&shot(newest, 5.0), &map, &h, &ALIVE, &scopes).map(|h| h.victim),
        Some(PlayerSlot(1))
    );
}

/// A target standing still at (10, 0), facing the shooter, every tick.
fn still_target(h: &mut History, scopes: &Scopes, ticks: u32) {
    for tick in 0..ticks {
        let mut s = samples(CROSSING);
        s[1].state.origin = Vec3::new(TARGET_X, 0.0, 0.0);
        s[1].state.velocity = Vec3::ZERO;
        h.record(Tick(tick), s, Posing::Animated, scopes);
    }
}

#[test]
fn the_head_wins_a_tie_with_the_body_and_the_nearest_hitbox_wins_otherwise() {
    let scopes = Scopes::new(Instant::now);
    let map = flat();
    let mut h = history(4, 200);
    still_target(&mut h, &scopes, 10);
    let part_at_yz = |y: f32, z: f32| {
        let s = Shot {
            origin: Vec3::new(0.0, y, z),
            ..shot(9, 0.0)
        };
        fire(&s, &map, &h, &ALIVE, &scopes).map(|h| h.part)
    };
    let part_at = |z: f32| part_at_yz(0.0, z);
    assert_eq!(part_at(1.65), Some(BodyPart::Head));
    assert_eq!(part_at(1.2), Some(BodyPart::Body));
    // Down a leg's axis (the legs stand 10 cm either side of the middle).
    assert_eq!(part_at_yz(0.1, 0.4), Some(BodyPart::Legs));
    assert_eq!(part_at_yz(-0.1, 0.4), Some(BodyPart::Legs));
    assert_eq!(part_at(1.9), None);
    // At the chin's height the head sphere (r 12 cm, at 1.50 m) and the body's top sphere
    // (r 20 cm, at 1.34 m) have the same 12 cm cross-section. 0.4 mm lower the body is
    // entered about 0.5 mm before the head: nearer, but within the tie, which the head wins.
    let params = PoseParams::default();
    let local = Pose::IDLE.hitboxes(&params);
    let (head, body) = (local.capsules[0], local.capsules[1]);
    let tie_z = head.a.z - 0.0004;
    let o = Vec3::new(-10.0, 0.0, tie_z);
    let x = Vec3::new(1.0, 0.0, 0.0);
    let (th, tb) = (
        head.ray_entry(o, x, 100.0).unwrap(),
        body.ray_entry(o, x, 100.0).unwrap(),
    );
    assert!(tb < th && th - tb < SAME_DISTANCE_M, "head {th} body {tb}");
    assert_eq!(part_at(tie_z), Some(BodyPart::Head));
    // A centimetre lower the body is nearer by more than the tie; a centimetre higher the
    // body is not hit in front of the head at all.
    assert_eq!(part_at(tie_z - 0.01), Some(BodyPart::Body));
    assert_eq!(part_at(tie_z + 0.01), Some(BodyPart::Head));
}

#[test]
fn the_nearer_player_wins_over_a_head_behind_it() {
    let scopes = Scopes::new(Instant::now);
    let map = flat();
    let mut h = History::new(HistoryConfig {
        players: 3,
        ..HistoryConfig::default()
    })
    .unwrap();
    for tick in 0..8 {
        let [shooter, mut far] = samples(CROSSING);
        far.state.origin = Vec3::new(20.0, 0.0, 0.0);
        far.state.velocity = Vec3::ZERO;
        let mut near = far;
        near.state.origin = Vec3::new(10.0, 0.0, 0.0);
        // Crouching: the shot at the far player's chest height meets the near one's head.
        near.stance = Stance::Crouching;
        h.record(Tick(tick), [shooter, far, near], Posing::Animated, &scopes);
    }
    let s = Shot {
        origin: Vec3::new(0.0, 0.0, 1.2),
        ..shot(7, 0.0)
    };
    let hit = fire(&s, &map, &h, &[true; 3], &scopes).unwrap();
    assert_eq!(hit.victim, PlayerSlot(2));
    assert!(hit.distance_m < 10.0);
    // Without the near player the far one is hit.
    let hit = fire(&s, &map, &h, &[true, true, false], &scopes).unwrap();
    assert_eq!(hit.victim, PlayerSlot(1));
    assert!(hit.distance_m > 19.0);
}
