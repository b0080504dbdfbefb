//! What a bot does with its controls: seeded, so a run can be repeated.

use tickforge_game::{buttons, BuiltinMap, PlayerState, UserCmd, Vec3};

use crate::hitreg::Sight;

/// xorshift64*: a small, fast, seeded generator; bots need variety, not cryptography.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value, zero included).
    pub fn new(seed: u64) -> Self {
        Rng((seed ^ 0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `0..n` (n > 0).
    pub fn below(&mut self, n: u32) -> u32 {
        (((self.next_u64() >> 32) * u64::from(n)) >> 32) as u32
    }
}

/// Runs about, turning toward a new heading every second or two, jumping now and then and
/// firing in bursts: enough to keep every field of every player changing.
#[derive(Clone, Debug)]
pub struct Wander {
    rng: Rng,
    yaw: u16,
    target_yaw: u16,
    forward: i8,
    side: i8,
    ticks_left: u32,
    firing_left: u32,
}

impl Wander {
    /// A wanderer seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let yaw = rng.below(65536) as u16;
        Wander {
            rng,
            yaw,
            target_yaw: yaw,
            forward: 127,
            side: 0,
            ticks_left: 0,
            firing_left: 0,
        }
    }

    /// The command for the next tick, at `tick_hz` ticks a second.
    pub fn next_cmd(&mut self, tick_hz: u32) -> UserCmd {
        if self.ticks_left == 0 {
            self.ticks_left = tick_hz / 2 + self.rng.below(tick_hz * 3 / 2);
            self.target_yaw = self.rng.below(65536) as u16;
            self.forward = [127, 127, 64, 0, -64][self.rng.below(5) as usize];
            self.side = [0, 0, 127, -127][self.rng.below(4) as usize];
        }
        self.ticks_left -= 1;
        // Turn toward the target at most 1/256 of a turn per tick.
        let diff = self.target_yaw.wrapping_sub(self.yaw) as i16;
        self.yaw = self.yaw.wrapping_add(diff.clamp(-256, 256) as u16);
        let mut b = 0;
        if self.rng.below(200) == 0 {
            b |= buttons::JUMP;
        }
        if self.firing_left == 0 && self.rng.below(256) == 0 {
            self.firing_left = tick_hz / 4;
        }
        if self.firing_left > 0 {
            self.firing_left -= 1;
            b |= buttons::FIRE;
        }
        UserCmd {
            forward: self.forward,
            side: self.side,
            buttons: b,
            yaw: self.yaw,
            pitch: 0,
        }
    }
}

/// Aim error, 1/65536 turn either way: about 1.1° in yaw and 0.7° in pitch, a few tens of
/// centimetres at arena ranges, so that shots land near the edges of the hitboxes.
const AIM_ERROR_YAW: u32 = 200;
const AIM_ERROR_PITCH: u32 = 120;
/// Ticks an aim error holds before another is drawn: a hand drifts, it does not shake at
/// 128 Hz (a view that jumps every tick would also jump the head, whose pose the server
/// lerps between posing ticks).
const AIM_ERROR_TICKS: u32 = 16;

/// Wanders until an enemy is in sight, then stops, turns to it (with some aim error, so
/// there are near misses) and fires once standing still: a shooter whose shots start where
/// the server starts them, aimed at moving targets.
#[derive(Clone, Debug)]
pub struct Aimer {
    wander: Wander,
    rng: Rng,
    /// The current aim error, yaw and pitch, 1/65536 turn.
    error: (i32, i32),
    error_ticks_left: u32,
}

impl Aimer {
    /// An aimer seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Aimer {
            wander: Wander::new(seed),
            rng: Rng::new(seed ^ 0x5eed),
            error: (0, 0),
            error_ticks_left: 0,
        }
    }

    /// The command for the next tick, at `tick_hz` ticks a second, with `sight` the nearest
    /// enemy this bot sees (if any).
    pub fn next_cmd(&mut self, tick_hz: u32, sight: Option<Sight>) -> UserCmd {
        let Some(sight) = sight else {
            return self.wander.next_cmd(tick_hz);
        };
        let d: Vec3 = sight.aim - sight.eye;
        let yaw = turns(d.y.atan2(d.x));
        let pitch = turns(d.z.atan2(d.horizontal_length()));
        if self.error_ticks_left == 0 {
            let jitter = |rng: &mut Rng, e: u32| rng.below(2 * e + 1) as i32 - e as i32;
            self.error = (
                jitter(&mut self.rng, AIM_ERROR_YAW),
                jitter(&mut self.rng, AIM_ERROR_PITCH),
            );
            self.error_ticks_left = AIM_ERROR_TICKS;
        }
        self.error_ticks_left -= 1;
        let yaw = yaw + self.error.0;
        let pitch = pitch + self.error.1;
        UserCmd {
            forward: 0,
            side: 0,
            buttons: if sight.still { buttons::FIRE } else { 0 },
            yaw: yaw as u16,
            pitch: pitch.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16,
        }
    }
}

/// An angle in radians as 1/65536 turns, the unit of [`UserCmd::yaw`] and
/// [`UserCmd::pitch`] (not wrapped: the caller casts).
fn turns(radians: f32) -> i32 {
    (radians * (65536.0 / std::f32::consts::TAU)).round() as i32
}

/// Within this distance of the map's centre, metres, a runner has arrived and fights (or,
/// seeing nobody, wanders about there until it does).
pub const ARRIVED_M: f32 = 40.0;
/// On the way in, a runner stops to fight an enemy it sees within this distance, metres,
/// if the enemy is ahead of it: within 60° of the way to the centre.
pub const ENGAGE_M: f32 = 60.0;
/// "Ahead", as the cosine of 60°. The spawn ring alternates teams 50 m apart, so every
/// runner starts with enemies beside it, within [`ENGAGE_M`]; were those fought, the crowd
/// would fight where it spawns and never run in.
const AHEAD_COS: f32 = 0.5;
/// A runner jumps on about one tick in this many, as [`Wander`] does, so that every field
/// of a running player changes now and then.
const JUMP_ONE_IN: u32 = 400;

/// Runs to the map's centre (0, 0), weaving by strafing left and right with its view on
/// the centre, then fights there: the crowd of the Iris stress test, everyone converging on
/// one spot in view of everyone else.
///
/// It fights, as an [`Aimer`] does (stops, turns to the nearest enemy it sees, fires once
/// standing still), once within [`ARRIVED_M`] of the centre, or on the way in when an enemy
/// it sees is within [`ENGAGE_M`] and ahead of it. Seeing nobody near the centre, it
/// wanders about there; wandered out past [`ARRIVED_M`], it runs back in.
#[derive(Clone, Debug)]
pub struct Runner {
    aimer: Aimer,
    rng: Rng,
    /// The strafe at the crest of a weave, of 127 (48 to 111: up to 41° off the line).
    weave_side: f32,
    /// Seconds of one weave, left and back (2 to 5).
    weave_period_s: f32,
    /// Where in its weave the runner is, radians.
    weave_phase: f32,
    /// The view yaw it last sent, 1/65536 turn.
    yaw: u16,
}

impl Runner {
    /// A runner seeded with `seed`: the seed draws its weave and, through its [`Aimer`],
    /// how it fights.
    pub fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed ^ 0x7275_6e6e_6572);
        let weave_side = (48 + rng.below(64)) as f32;
        let weave_period_s = 2.0 + rng.below(3001) as f32 / 1000.0;
        let weave_phase = rng.below(65536) as f32 * (std::f32::consts::TAU / 65536.0);
        Runner {
            aimer: Aimer::new(seed),
            rng,
            weave_side,
            weave_period_s,
            weave_phase,
            yaw: 0,
        }
    }

    /// The command for the next tick, at `tick_hz` ticks a second (more than 0).
    ///
    /// `own` is this bot's state on its newest snapshot (`None` before the first: the
    /// runner then stands still), `sight` the nearest enemy it sees, as for
    /// [`Aimer::next_cmd`].
    pub fn next_cmd(
        &mut self,
        tick_hz: u32,
        own: Option<&PlayerState>,
        sight: Option<Sight>,
    ) -> UserCmd {
        let Some(own) = own else {
            return UserCmd {
                forward: 0,
                side: 0,
                buttons: 0,
                yaw: self.yaw,
                pitch: 0,
            };
        };
        let to_centre = Vec3::new(-own.origin.x, -own.origin.y, 0.0);
        let from_centre_m = to_centre.horizontal_length();
        if from_centre_m <= ARRIVED_M || sight.is_some_and(|s| engages(s, to_centre)) {
            let c = self.aimer.next_cmd(tick_hz, sight);
            self.yaw = c.yaw;
            return c;
        }
        let step = std::f32::consts::TAU / (self.weave_period_s * tick_hz.max(1) as f32);
        self.weave_phase = (self.weave_phase + step) % std::f32::consts::TAU;
        self.yaw = turns(to_centre.y.atan2(to_centre.x)) as u16;
        let jump = self.rng.below(JUMP_ONE_IN) == 0;
        UserCmd {
            forward: 127,
            side: (self.weave_side * self.weave_phase.sin()).round() as i8,
            buttons: if jump { buttons::JUMP } else { 0 },
            yaw: self.yaw,
            pitch: 0,
        }
    }
}

/// Whether a runner on its way in, `to_centre` (horizontal, metres) from the centre,
/// stops to fight the enemy in `sight`: near enough and ahead.
fn engages(sight: Sight, to_centre: Vec3) -> bool {
    let d = sight.aim - sight.eye;
    let d = Vec3::new(d.x, d.y, 0.0);
    let dist_m = d.horizontal_length();
    dist_m <= ENGAGE_M && d.dot(to_centre) >= AHEAD_COS * dist_m * to_centre.horizontal_length()
}

/// Which behaviour each bot of a run gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BotMix {
    /// For the arena: every other bot an [`Aimer`], the rest [`Wander`]ers, its targets.
    #[default]
    Arena,
    /// For the crowd on `flat2km`: every bot a [`Runner`].
    Crowd,
}

/// One bot's behaviour, as [`BotMix::role`] assigns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A [`Wander`]er.
    Wander,
    /// An [`Aimer`].
    Aim,
    /// A [`Runner`].
    Run,
}

impl BotMix {
    /// Every mix.
    pub const ALL: [BotMix; 2] = [BotMix::Arena, BotMix::Crowd];

    /// The mix's name, as `tickforge bots --behaviour` takes it.
    pub fn name(self) -> &'static str {
        match self {
            BotMix::Arena => "arena",
            BotMix::Crowd => "crowd",
        }
    }

    /// The mix called `name`, if any.
    pub fn from_name(name: &str) -> Option<BotMix> {
        BotMix::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The mix a map is made for: the crowd on `flat2km`, the arena mix elsewhere.
    pub fn for_map(map: BuiltinMap) -> BotMix {
        match map {
            BuiltinMap::Arena => BotMix::Arena,
            BuiltinMap::Flat2km => BotMix::Crowd,
        }
    }

    /// What bot `index` (counted from 0 across every match of the run) does.
    pub fn role(self, index: u64) -> Role {
        match self {
            BotMix::Arena if index % 2 == 1 => Role::Aim,
            BotMix::Arena => Role::Wander,
            BotMix::Crowd => Role::Run,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_commands() {
        let mut a = Wander::new(7);
        let mut b = Wander::new(7);
        let mut c = Wander::new(8);
        let ca: Vec<_> = (0..1000).map(|_| a.next_cmd(128)).collect();
        let cb: Vec<_> = (0..1000).map(|_| b.next_cmd(128)).collect();
        let cc: Vec<_> = (0..1000).map(|_| c.next_cmd(128)).collect();
        assert_eq!(ca, cb);
        assert_ne!(ca, cc);
    }

    #[test]
    fn an_aimer_stops_turns_to_its_target_and_fires_only_standing_still() {
        let mut a = Aimer::new(3);
        let sight = Sight {
            eye: Vec3::new(0.0, 0.0, 1.6),
            aim: Vec3::new(0.0, 10.0, 1.2),
            still: false,
        };
        let c = a.next_cmd(128, Some(sight));
        assert_eq!((c.forward, c.side, c.buttons & buttons::FIRE), (0, 0, 0));
        assert!((i32::from(c.yaw) - 16384).abs() <= AIM_ERROR_YAW as i32);
        assert!(c.pitch < 0);
        let c = a.next_cmd(
            128,
            Some(Sight {
                still: true,
                ..sight
            }),
        );
        assert_ne!(c.buttons & buttons::FIRE, 0);
    }

    /// A player standing at `(x, y)` on the floor.
    fn at(x: f32, y: f32) -> PlayerState {
        PlayerState {
            origin: Vec3::new(x, y, 0.0),
            on_ground: true,
            ..PlayerState::default()
        }
    }

    /// The nearest enemy stands at `(x, y)`, seen from a player at `me`.
    fn sight_of(me: &PlayerState, x: f32, y: f32, still: bool) -> Sight {
        Sight {
            eye: me.origin + Vec3::new(0.0, 0.0, 1.6),
            aim: Vec3::new(x, y, 1.2),
            still,
        }
    }

    /// `a - b` in degrees, wrapped to ±180.
    fn yaw_off_deg(a: u16, b: f32) -> f32 {
        let d = f32::from(a) * 360.0 / 65536.0 - b;
        (d + 540.0).rem_euclid(360.0) - 180.0
    }

    #[test]
    fn a_runner_far_out_heads_to_the_centre_weaving() {
        // On the 800 m ring at 135°: the centre lies at -45°.
        let r = 800.0 / std::f32::consts::SQRT_2;
        let me = at(-r, r);
        let mut runner = Runner::new(5);
        let mut sides = Vec::new();
        for _ in 0..5 * 128 {
            let c = runner.next_cmd(128, Some(&me), None);
            assert_eq!((c.forward, c.pitch, c.buttons & buttons::FIRE), (127, 0, 0));
            assert!(yaw_off_deg(c.yaw, -45.0).abs() < 0.1, "{c:?}");
            sides.push(c.side);
        }
        // It weaves: strafes both ways, not in a straight line.
        let (min, max) = (sides.iter().min().unwrap(), sides.iter().max().unwrap());
        assert!(*min < -40 && *max > 40, "{min}..{max}");
    }

    #[test]
    fn a_runner_passes_enemies_beside_it_and_fights_those_ahead() {
        let me = at(800.0, 0.0);
        let mut runner = Runner::new(9);
        // The ring's next spawn, an enemy 50 m away, beside the way in.
        let beside = sight_of(&me, 799.0, 50.0, true);
        let c = runner.next_cmd(128, Some(&me), Some(beside));
        assert_eq!((c.forward, c.buttons & buttons::FIRE), (127, 0));
        // One 50 m ahead: it stops and turns to it (facing the centre already, about 180°).
        let ahead = sight_of(&me, 750.0, 5.0, false);
        let c = runner.next_cmd(128, Some(&me), Some(ahead));
        assert_eq!((c.forward, c.side), (0, 0));
        assert!(yaw_off_deg(c.yaw, 174.3).abs() < 2.0, "{c:?}");
        // One ahead but 100 m away: it runs on.
        let far = sight_of(&me, 700.0, 0.0, true);
        let c = runner.next_cmd(128, Some(&me), Some(far));
        assert_eq!(c.forward, 127);
    }

    #[test]
    fn a_runner_near_the_centre_turns_to_an_enemy_and_fires_standing_still() {
        let me = at(10.0, 0.0);
        let mut runner = Runner::new(3);
        // Even one behind it, 20 m off: at the centre everyone is fair game.
        let enemy = sight_of(&me, 10.0, 20.0, false);
        let c = runner.next_cmd(128, Some(&me), Some(enemy));
        assert_eq!((c.forward, c.side, c.buttons & buttons::FIRE), (0, 0, 0));
        assert!(yaw_off_deg(c.yaw, 90.0).abs() < 2.0, "{c:?}");
        let c = runner.next_cmd(
            128,
            Some(&me),
            Some(Sight {
                still: true,
                ..enemy
            }),
        );
        assert_ne!(c.buttons & buttons::FIRE, 0);
        // Nobody in sight there: it wanders about as its aimer would, not back to the ring.
        let c = runner.next_cmd(128, Some(&me), None);
        assert_eq!(c, Wander::new(3).next_cmd(128));
    }

    #[test]
    fn a_runner_without_a_snapshot_stands_still() {
        let mut runner = Runner::new(1);
        let c = runner.next_cmd(128, None, None);
        assert_eq!((c.forward, c.side, c.buttons), (0, 0, 0));
    }

    #[test]
    fn runners_are_deterministic_per_seed() {
        let me = at(300.0, -400.0);
        let near = at(5.0, 5.0);
        let enemy = sight_of(&near, 0.0, -10.0, true);
        let run = |seed: u64| -> Vec<UserCmd> {
            let mut r = Runner::new(seed);
            (0..2000)
                .map(|t| match t % 3 {
                    0 => r.next_cmd(128, Some(&near), Some(enemy)),
                    1 => r.next_cmd(128, Some(&near), None),
                    _ => r.next_cmd(128, Some(&me), None),
                })
                .collect()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn the_arena_mix_alternates_wanderers_and_aimers_and_the_crowd_runs() {
        let roles = |mix: BotMix| (0..4).map(|i| mix.role(i)).collect::<Vec<_>>();
        assert_eq!(
            roles(BotMix::Arena),
            [Role::Wander, Role::Aim, Role::Wander, Role::Aim]
        );
        assert_eq!(roles(BotMix::Crowd), [Role::Run; 4]);
        for mix in BotMix::ALL {
            assert_eq!(BotMix::from_name(mix.name()), Some(mix));
        }
        assert_eq!(BotMix::for_map(BuiltinMap::Flat2km), BotMix::Crowd);
        assert_eq!(BotMix::for_map(BuiltinMap::Arena), BotMix::Arena);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = Rng::new(0);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let v = r.below(10);
            assert!(v < 10);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
