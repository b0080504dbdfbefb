//! What a bot does with its controls: seeded, so a run can be repeated.

use tickforge_game::{buttons, UserCmd, Vec3};

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
        let turn = 65536.0 / std::f32::consts::TAU;
        let yaw = (d.y.atan2(d.x) * turn).round() as i32;
        let pitch = (d.z.atan2(d.horizontal_length()) * turn).round() as i32;
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
