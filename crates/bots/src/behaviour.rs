//! What a bot does with its controls: seeded, so a run can be repeated.

use tickforge_game::{buttons, UserCmd};

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
