//! Amortized posing: poses kept every 4th tick and lerped in between stay close to poses
//! computed every tick; the buy phase poses nobody; the ring wraps and keeps exactly the max
//! rewind.

use std::num::NonZeroU8;
use std::time::{Duration, Instant};

use tickforge_game::history::{History, HistoryConfig, PlayerSample, Posing, RewindTime};
use tickforge_game::hitscan::{fire_with_stats, Shot, ShotStats};
use tickforge_game::movement::pmove;
use tickforge_game::pose::{pose_of, Gait, Hitboxes, Pose, PoseParams, Stance};
use tickforge_game::{
    angle16_to_rad, buttons, BuiltinMap, MovementParams, PlayerSlot, PlayerState, Tick, UserCmd,
    Vec3, World, WorldConfig,
};
use tickforge_telemetry::Scopes;

const DT: f32 = 1.0 / 128.0;

fn history(players: u8, pose_every: u8, max_rewind: Duration) -> History {
    History::new(HistoryConfig {
        players: u16::from(players),
        pose_every: NonZeroU8::new(pose_every).unwrap(),
        max_rewind,
        ..HistoryConfig::default()
    })
    .unwrap()
}

/// The largest distance between matching capsule ends, per capsule.
fn gaps(a: &Hitboxes, b: &Hitboxes) -> [f32; 4] {
    std::array::from_fn(|i| {
        let (p, q) = (a.capsules[i], b.capsules[i]);
        (p.a - q.a).length().max((p.b - q.b).length())
    })
}

fn at(tick: u32, frac: f32) -> RewindTime {
    RewindTime {
        tick: Tick(tick),
        frac,
    }
}

/// The hitboxes of `state` posed directly, with the gait the history keeps.
fn direct(state: &PlayerState, gait: &Gait, params: &PoseParams) -> Hitboxes {
    pose_of(state, Stance::Standing, gait, params)
        .hitboxes(params)
        .placed(state.origin, angle16_to_rad(state.yaw))
}

/// One player moving at `velocity` from the origin, aim sweeping up at `pitch_per_tick`
/// units a tick, recorded for `ticks` with posing every 4th tick; returns the worst
/// head, body and leg gaps between the history's rewind and the direct pose at every
/// recorded tick it still holds, checking that kept ticks match exactly.
fn linear_motion_gaps(velocity: Vec3, pitch_per_tick: i16, ticks: u32) -> [f32; 3] {
    let scopes = Scopes::new(Instant::now);
    let params = PoseParams::default();
    let mut h = history(1, 4, Duration::from_secs(1));
    let mut states = Vec::new();
    let mut gait = Gait::default();
    for tick in 0..ticks {
        let state = PlayerState {
            origin: velocity * (tick as f32 * DT),
            velocity,
            yaw: 5000,
            pitch: -6000 + pitch_per_tick * (tick % 100) as i16,
            on_ground: true,
            crouched: false,
        };
        gait = gait.advance(velocity, &params, DT);
        states.push((state, gait));
        let sample = PlayerSample {
            state,
            stance: Stance::Standing,
            alive: true,
        };
        h.record(Tick(tick), [sample], Posing::Animated, &scopes);
    }
    let mut worst = [0.0_f32; 3];
    let oldest = h.oldest().unwrap().0;
    for tick in oldest..ticks {
        // Past the pitch sweep's wrap the motion is not linear.
        if tick % 100 >= 96 || tick % 100 < 4 {
            continue;
        }
        let (state, gait) = &states[tick as usize];
        let rewound = h.hitboxes_at(PlayerSlot(0), at(tick, 0.0)).unwrap();
        let g = gaps(&rewound, &direct(state, gait, &params));
        if tick % 4 == 0 {
            assert_eq!(g, [0.0; 4], "a kept pose is used as kept, tick {tick}");
        }
        worst[0] = worst[0].max(g[0]);
        worst[1] = worst[1].max(g[1]);
        worst[2] = worst[2].max(g[2]).max(g[3]);
    }
    worst
}

#[test]
fn the_lerp_between_kept_poses_matches_the_direct_pose_when_the_motion_is_linear() {
    // Standing, aim sweeping at 70°/s: the head tilts 0.6 rad per radian of pitch, 0.023
    // rad every 4 ticks, and the crown 0.68 m from the pelvis moves on an arc whose chord
    // sags 0.68 · 0.023² / 8 = 45 µm at most.
    let still = linear_motion_gaps(Vec3::ZERO, 100, 400);
    assert!(still.iter().all(|&g| g < 1e-4), "{still:?}");

    // Running straight at full speed, aim sweeping: the run cycle advances 0.091 cycles
    // every 4 ticks. Legs swing ±0.5 rad on 0.82 m, so a foot moves on a sine of amplitude
    // 0.39 m whose chord over 0.091 cycles sags at most 0.39 (1 − cos(π · 0.091)) = 1.6 cm;
    // the bob (±3 cm, twice a cycle) sags at most 0.03 (1 − cos(2π · 0.091)) = 4.7 mm.
    let run = Vec3::new(8.13 * 0.6, 8.13 * 0.8, 0.0);
    let running = linear_motion_gaps(run, 100, 400);
    assert!(running[0] < 0.005 && running[1] < 0.005, "{running:?}");
    assert!(running[2] < 0.016, "{running:?}");
    // It is a lerp, not the direct pose: the legs do differ between kept ticks.
    assert!(running[2] > 0.003, "{running:?}");
}

/// Commands that keep players running, strafing, turning, aiming up and down and jumping.
fn cmd(tick: u32, slot: u32) -> UserCmd {
    let x = tick.wrapping_mul(31).wrapping_add(slot * 7);
    UserCmd {
        forward: [127, 127, 0, -127][(x / 90 % 4) as usize],
        side: ((x / 64 % 3) as i8 - 1) * 127,
        buttons: if x.is_multiple_of(97) {
            buttons::JUMP
        } else {
            0
        },
        yaw: (slot * 6553 + tick * 60) as u16,
        pitch: ((tick as f32 * 0.02 + slot as f32).sin() * 12000.0) as i16,
    }
}

#[test]
fn posing_every_4th_tick_stays_within_a_bound_of_posing_every_tick() {
    let scopes = Scopes::new(Instant::now);
    let params = PoseParams::default();
    let map = BuiltinMap::Arena.load();
    let world = World::new(WorldConfig::default());
    let movement = MovementParams::default();
    let mut states: Vec<PlayerState> = world.players().iter().map(|p| p.state).collect();
    let players = states.len() as u8;
    let mut every = history(players, 1, Duration::from_millis(200));
    let mut fourth = history(players, 4, Duration::from_millis(200));
    let mut gaits = vec![Gait::default(); states.len()];
    let mut worst = [0.0_f32; 4];
    for tick in 0..3000u32 {
        for (slot, s) in states.iter_mut().enumerate() {
            pmove(s, &cmd(tick, slot as u32), &movement, &map, DT);
            gaits[slot] = gaits[slot].advance(s.velocity, &params, DT);
        }
        let samples = states.iter().map(|&state| PlayerSample {
            state,
            stance: if tick / 200 % 2 == 1 {
                Stance::Crouching
            } else {
                Stance::Standing
            },
            alive: true,
        });
        every.record(Tick(tick), samples.clone(), Posing::Animated, &scopes);
        fourth.record(Tick(tick), samples, Posing::Animated, &scopes);
        if tick < 30 {
            continue;
        }
        for slot in 0..players {
            let slot = PlayerSlot(u16::from(slot));
            // Posing every tick is the direct pose.
            let newest = every.hitboxes_at(slot, at(tick, 0.0)).unwrap();
            let s = &states[usize::from(slot.0)];
            let mut straight = pose_of(s, Stance::Standing, &gaits[usize::from(slot.0)], &params);
            if tick / 200 % 2 == 1 {
                straight.stance = Stance::Crouching;
            }
            let straight = straight
                .hitboxes(&params)
                .placed(s.origin, angle16_to_rad(s.yaw));
            assert_eq!(newest, straight);
            for back in [0.0, 0.5, 1.0, 3.0, 6.25, 13.5, 26.0] {
                let time = every.rewind_time(Tick(tick), back).unwrap();
                let a = every.hitboxes_at(slot, time).unwrap();
                let b = fourth.hitboxes_at(slot, time).unwrap();
                for (w, g) in worst.iter_mut().zip(gaps(&a, &b)) {
                    *w = w.max(g);
                }
            }
        }
    }
    // The run cycle's chords bound the lerp when running straight (4.7 mm of bob, 1.6 cm
    // for a foot, see above). The gait turning and changing speed within 4 ticks bends the
    // legs' path a little more: 1.9 cm here. Stance changes are posed, not lerped.
    let [head, body, left, right] = worst;
    println!("every tick vs every 4th, metres: head {head} body {body} legs {left} {right}");
    assert!(head < 0.005 && body < 0.005, "{worst:?}");
    assert!(left < 0.025 && right < 0.025, "{worst:?}");
    assert!(
        head > 0.001 && left > 0.01,
        "the two should differ: {worst:?}"
    );
}

/// Ten players running the commands of [`cmd`] about the arena.
struct Sim {
    map: tickforge_game::Map,
    movement: MovementParams,
    states: Vec<PlayerState>,
    /// Every player's state after each tick.
    seen: Vec<Vec<PlayerState>>,
}

impl Sim {
    fn new() -> Sim {
        let world = World::new(WorldConfig::default());
        Sim {
            map: BuiltinMap::Arena.load(),
            movement: MovementParams::default(),
            states: world.players().iter().map(|p| p.state).collect(),
            seen: Vec::new(),
        }
    }

    fn step(&mut self, h: &mut History, tick: u32, posing: Posing, scopes: &Scopes) {
        for (slot, s) in self.states.iter_mut().enumerate() {
            pmove(s, &cmd(tick, slot as u32), &self.movement, &self.map, DT);
        }
        let samples = self.states.iter().map(|&state| PlayerSample {
            state,
            stance: Stance::Standing,
            alive: true,
        });
        h.record(Tick(tick), samples, posing, scopes);
        self.seen.push(self.states.clone());
    }
}

#[test]
fn the_buy_phase_poses_nobody_and_stands_everyone_idle() {
    let scopes = Scopes::new(Instant::now);
    let params = PoseParams::default();
    let mut sim = Sim::new();
    let players = sim.states.len() as u8;
    let mut h = history(players, 4, Duration::from_millis(200));
    let alive = vec![true; sim.states.len()];
    let idle = Pose::IDLE.hitboxes(&params);
    let is_idle = |h: &History, seen: &[Vec<PlayerState>], tick: u32| {
        seen[tick as usize].iter().enumerate().all(|(slot, s)| {
            h.hitboxes_at(PlayerSlot(slot as u16), at(tick, 0.0))
                == Some(idle.placed(s.origin, angle16_to_rad(s.yaw)))
        })
    };
    for tick in 0..301 {
        sim.step(&mut h, tick, Posing::Idle, &scopes);
        // Players run about (a test world, unlike the buy phase), yet stand idle.
        assert!(is_idle(&h, &sim.seen, tick));
        let mut stats = ShotStats::default();
        let s = sim.seen[tick as usize][0];
        let shot = Shot {
            shooter: PlayerSlot(1),
            command_tick: Tick(tick),
            interp_delay_ticks: 2.5,
            origin: s.origin + Vec3::new(-5.0, 0.0, 1.2),
            direction: Vec3::new(1.0, 0.0, 0.0),
            max_range_m: 50.0,
        };
        fire_with_stats(&shot, &sim.map, &h, &alive, &scopes, &mut stats);
        assert_eq!(stats.poses_on_demand, 0);
    }
    assert_eq!(h.poses_computed(), 0);
    // Combat starts on tick 301, not a posing tick: everyone is posed at once ...
    sim.step(&mut h, 301, Posing::Animated, &scopes);
    assert_eq!(h.poses_computed(), u64::from(players));
    // ... and then every 4th tick: 304 and 308.
    for tick in 302..=309 {
        sim.step(&mut h, tick, Posing::Animated, &scopes);
    }
    assert_eq!(h.poses_computed(), 3 * u64::from(players));
    // Back in the buy phase: no more posing; the animated ticks keep their poses.
    for tick in 310..320 {
        sim.step(&mut h, tick, Posing::Idle, &scopes);
    }
    assert_eq!(h.poses_computed(), 3 * u64::from(players));
    assert!(is_idle(&h, &sim.seen, 315));
    assert!(!is_idle(&h, &sim.seen, 304));
}

#[test]
fn the_ring_wraps_and_keeps_exactly_the_max_rewind() {
    let scopes = Scopes::new(Instant::now);
    let params = PoseParams::default();
    let mut h = history(2, 4, Duration::from_millis(200));
    let max = h.max_rewind_ticks();
    assert_eq!(max, 26);
    let state_at = |tick: u32, slot: u32| PlayerState {
        origin: Vec3::new(tick as f32, slot as f32 * 100.0, 0.0),
        velocity: Vec3::ZERO,
        yaw: (tick * 300) as u16,
        pitch: (tick % 50) as i16 * 40,
        on_ground: true,
        crouched: false,
    };
    for tick in 0..1000u32 {
        let samples = (0..2).map(|slot| PlayerSample {
            state: state_at(tick, slot),
            stance: Stance::Standing,
            alive: true,
        });
        h.record(Tick(tick), samples, Posing::Animated, &scopes);
        let held = (tick + 1).min(max + 1);
        assert_eq!(h.held_ticks(), held);
        assert_eq!(h.oldest(), Some(Tick(tick + 1 - held)));
        if tick < 3 * (max + 1) && tick % 7 != 0 {
            continue;
        }
        for back in 0..held {
            let t = tick - back;
            for slot in 0..2u32 {
                let origin = h.origin_at(PlayerSlot(slot as u16), at(t, 0.0)).unwrap();
                assert_eq!(origin, state_at(t, slot).origin, "tick {tick} back {back}");
                if t % 4 == 0 {
                    let kept = h.hitboxes_at(PlayerSlot(slot as u16), at(t, 0.0)).unwrap();
                    assert_eq!(kept, direct(&state_at(t, slot), &Gait::default(), &params));
                }
            }
        }
        // One tick older than the max rewind is gone, and a rewind there is clamped.
        if tick > max {
            let gone = tick - max - 1;
            assert_eq!(h.origin_at(PlayerSlot(0), at(gone, 0.0)), None);
            assert_eq!(h.hitboxes_at(PlayerSlot(0), at(gone, 0.0)), None);
            assert_eq!(
                h.rewind_time(Tick(tick), (max + 1) as f32).unwrap().tick,
                Tick(tick - max)
            );
        }
    }
}

#[test]
fn the_newest_ticks_and_players_dead_at_a_kept_tick_are_posed_on_demand() {
    let scopes = Scopes::new(Instant::now);
    let params = PoseParams::default();
    let map =
        tickforge_game::Map::parse("box -50 -50 -1 50 50 0\nspawn attackers 0 0 0 0\n").unwrap();
    let mut h = history(2, 4, Duration::from_millis(200));
    let target = |tick: u32| PlayerState {
        origin: Vec3::new(10.0, 0.0, 0.0),
        velocity: Vec3::new(0.0, 3.0, 0.0),
        yaw: 32768,
        pitch: (tick * 37 % 3000) as i16,
        on_ground: true,
        crouched: false,
    };
    let mut gaits = Vec::new();
    let mut gait = Gait::default();
    for tick in 0..=10u32 {
        gait = gait.advance(target(tick).velocity, &params, DT);
        gaits.push(gait);
        let samples = [
            PlayerSample {
                alive: true,
                ..Default::default()
            },
            PlayerSample {
                state: target(tick),
                stance: Stance::Standing,
                // Dead on the kept tick 4 only.
                alive: tick != 4,
            },
        ];
        h.record(Tick(tick), samples, Posing::Animated, &scopes);
    }
    let shoot = |delay: f32| {
        let mut stats = ShotStats::default();
        let shot = Shot {
            shooter: PlayerSlot(0),
            command_tick: Tick(10),
            interp_delay_ticks: delay,
            origin: Vec3::new(0.0, 0.0, 1.2),
            direction: Vec3::new(1.0, 0.0, 0.0),
            max_range_m: 50.0,
        };
        let hit = fire_with_stats(&shot, &map, &h, &[true, true], &scopes, &mut stats);
        (hit.is_some(), stats.poses_on_demand)
    };
    // Tick 10 is past the last kept tick (8): posed from its sample. Tick 8 is kept.
    assert_eq!(shoot(0.0), (true, 1));
    assert_eq!(shoot(2.0), (true, 0));
    // Between 9 and 10: both posed on demand.
    assert_eq!(shoot(0.5), (true, 2));
    // Ticks 5..7 lie between kept tick 4, where the target was dead, and 8.
    assert_eq!(shoot(4.0), (true, 1));
    for tick in [5, 9, 10] {
        let got = h.hitboxes_at(PlayerSlot(1), at(tick, 0.0)).unwrap();
        assert_eq!(got, direct(&target(tick), &gaits[tick as usize], &params));
    }
    // Dead at tick 4 itself: nothing to hit.
    assert_eq!(shoot(6.0), (false, 0));
}
