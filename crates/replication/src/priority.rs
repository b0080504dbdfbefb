//! How urgently each relevant entity wants a place in a connection's next snapshot, and
//! how many bytes a connection may be sent.
//!
//! Every tick, every relevant entity's accumulator grows by a weight: more when close, more
//! when in front of the viewer. A write sends the highest accumulators that fit and resets
//! them to zero, so an entity left out keeps growing until it wins: nothing starves. An
//! entity in a packet that was lost gets a bump, so its correction goes out first.

use crate::bits::{pack, BitIter};
use crate::state::Position;

/// Where a connection's player looks from: the centre of its relevancy and priority.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Viewer {
    /// Eye or feet position, metres (only x and y are used).
    pub position: Position,
    /// View yaw, 1/65536 turn.
    pub yaw: u16,
}

/// Weights added to a (connection, entity) accumulator, per tick unless said otherwise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PriorityConfig {
    /// Every relevant entity, however far or behind.
    pub base: f32,
    /// Added in full at distance 0, fading to nothing at the relevancy radius.
    pub near: f32,
    /// Added in full straight ahead of the viewer, nothing straight behind.
    pub facing: f32,
    /// The viewer's own entity, instead of the weights above: its client reconciles its
    /// prediction against it.
    pub own: f32,
    /// Once, when a packet carrying the entity is found lost.
    pub lost_bump: f32,
    /// Once, when the entity becomes relevant, so a newcomer appears within a tick or two.
    pub enter_bump: f32,
}

impl Default for PriorityConfig {
    fn default() -> Self {
        // Near and in front weigh up to 4× a far entity behind: with a packet that fits a
        // third of the entities, the farthest still goes out every few ticks.
        PriorityConfig {
            base: 1.0,
            near: 2.0,
            facing: 1.0,
            own: 8.0,
            lost_bump: 8.0,
            enter_bump: 8.0,
        }
    }
}

/// A viewer, prepared once per write.
pub(crate) struct ViewerFrame {
    pub x: f32,
    pub y: f32,
    forward: (f32, f32),
    inv_radius: f32,
}

impl ViewerFrame {
    pub fn new(v: &Viewer, radius_m: f32) -> Self {
        let a = f32::from(v.yaw) * (std::f32::consts::TAU / 65536.0);
        ViewerFrame {
            x: v.position.x,
            y: v.position.y,
            forward: (a.cos(), a.sin()),
            inv_radius: 1.0 / radius_m,
        }
    }

    /// Squared distance on the ground plane, m².
    pub fn distance2(&self, x: f32, y: f32) -> f32 {
        let (dx, dy) = (x - self.x, y - self.y);
        dx * dx + dy * dy
    }

    /// The per-tick weight of an entity at (`x`, `y`) on the ground plane, as
    /// [`ViewerFrame::weigh`] adds it: for the tests.
    #[cfg(test)]
    pub fn weight(&self, c: &PriorityConfig, x: f32, y: f32) -> f32 {
        let (dx, dy) = (x - self.x, y - self.y);
        self.weight_at(c, dx, dy, (dx * dx + dy * dy).sqrt())
    }

    /// The per-tick weight of an entity at (`dx`, `dy`) from the viewer, `d` metres away.
    /// Written with selects, not branches, so that [`ViewerFrame::weigh`]'s loop is
    /// vectorized.
    #[inline(always)]
    fn weight_at(&self, c: &PriorityConfig, dx: f32, dy: f32, d: f32) -> f32 {
        let near = (1.0 - d * self.inv_radius).max(0.0);
        let ahead = (dx * self.forward.0 + dy * self.forward.1) / d;
        let facing = if d > 1e-3 { ahead } else { 1.0 };
        let w = c.base + c.near * near + c.facing * 0.5 * (facing + 1.0);
        // A NaN position must not poison the accumulator it is added to.
        if w.is_finite() {
            w
        } else {
            c.base
        }
    }

    /// Bit `i` set when (`xs[i]`, `ys[i]`) is within `radius2` (squared metres) on the
    /// ground plane: 64 entities at a time, several to an instruction. NaN is never within.
    pub fn within(&self, xs: &[f32; 64], ys: &[f32; 64], radius2: f32) -> u64 {
        let mut bits = 0u64;
        for i in 0..64 {
            bits |= u64::from(self.distance2(xs[i], ys[i]) <= radius2) << i;
        }
        bits
    }

    /// Adds this tick's weight to `priority[i]` for each bit `i` set in `mask`, the
    /// entities at (`xs[i]`, `ys[i]`), and returns the bits of those due by `tiers` on a
    /// tick whose phase with entity `i` is `phase + i` ([`RateTiers::due`]). `dense`: all
    /// 64 at a time, several to an instruction (a crowd's word of entities is mostly
    /// relevant, and a lane computed for a clear bit costs less than the branch that would
    /// skip it), and the due bits of all 64 returned; else one set bit at a time, for a
    /// word with only a few. `TIERS` false: every entity is due (the rate by distance is
    /// off), and no lane works it out.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn weigh<const TIERS: bool>(
        &self,
        c: &PriorityConfig,
        tiers: &RateTiers,
        xs: &[f32; 64],
        ys: &[f32; 64],
        priority: &mut [f32; 64],
        mask: u64,
        phase: u32,
        dense: bool,
    ) -> u64 {
        if !dense {
            let mut due = if TIERS { 0 } else { u64::MAX };
            for i in BitIter(mask) {
                let (dx, dy) = (xs[i] - self.x, ys[i] - self.y);
                let d = (dx * dx + dy * dy).sqrt();
                priority[i] += self.weight_at(c, dx, dy, d);
                if TIERS {
                    due |= u64::from(tiers.due(d, phase.wrapping_add(i as u32))) << i;
                }
            }
            return due;
        }
        let mut due = [1u8; 64];
        for i in 0..64 {
            let (dx, dy) = (xs[i] - self.x, ys[i] - self.y);
            let d = (dx * dx + dy * dy).sqrt();
            let w = self.weight_at(c, dx, dy, d);
            priority[i] += if mask >> i & 1 != 0 { w } else { 0.0 };
            if TIERS {
                due[i] = u8::from(tiers.due(d, phase.wrapping_add(i as u32)));
            }
        }
        if TIERS {
            pack(&due)
        } else {
            u64::MAX
        }
    }
}

/// How often an entity may be sent to a client by its distance from the client's viewer
/// (what Unreal's replication graph calls spatial frequency): within `halve_every_m`
/// every tick, within twice that every 2nd tick, thrice every 4th, and so on, down to one
/// tick in `slowest_every_ticks`. An entity waits for its tick even when the packet has
/// room; the ones a client has not been sent yet, and its own, never wait. The ticks are
/// fixed by the entity's id, so every client that far sends it on the same ticks and
/// shares its encodings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateByDistance {
    /// Metres, finite and positive.
    pub halve_every_m: f32,
    /// 1, 2, 4, 8 or 16; 1: every relevant entity may go every tick (the rate is off).
    pub slowest_every_ticks: u32,
}

impl RateByDistance {
    /// Every relevant entity may go every tick.
    pub const EVERY_TICK: RateByDistance = RateByDistance {
        halve_every_m: 50.0,
        slowest_every_ticks: 1,
    };
    /// The most `slowest_every_ticks` may be.
    pub const MAX_EVERY: u32 = 16;

    /// Every relevant entity may go every tick: the rate changes nothing.
    pub fn is_off(&self) -> bool {
        self.slowest_every_ticks <= 1
    }

    /// Whether the fields are in range.
    pub fn is_valid(&self) -> bool {
        Self::halve_every_m_ok(self.halve_every_m)
            && Self::slowest_every_ticks_ok(self.slowest_every_ticks)
    }

    /// `halve_every_m` is finite and positive.
    pub fn halve_every_m_ok(m: f32) -> bool {
        m.is_finite() && m > 0.0
    }

    /// `slowest_every_ticks` is 1, 2, 4, 8 or 16.
    pub fn slowest_every_ticks_ok(n: u32) -> bool {
        n.is_power_of_two() && n <= Self::MAX_EVERY
    }
}

impl Default for RateByDistance {
    fn default() -> Self {
        Self::EVERY_TICK
    }
}

/// [`RateByDistance`] prepared once per write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RateTiers {
    /// Distances past which the wait doubles: 1, 2, 3 and 4 steps, metres.
    limits: [f32; 4],
    /// `slowest_every_ticks - 1`: the most low bits of a tick that must be clear.
    slowest_mask: u32,
}

impl RateTiers {
    pub fn new(rate: &RateByDistance) -> RateTiers {
        RateTiers {
            limits: std::array::from_fn(|k| (k + 1) as f32 * rate.halve_every_m),
            slowest_mask: rate.slowest_every_ticks.saturating_sub(1),
        }
    }

    /// Every entity may go every tick ([`RateByDistance::is_off`]).
    pub fn off(&self) -> bool {
        self.slowest_mask == 0
    }

    /// Whether an entity `d` metres away may go on a tick whose phase (the tick plus the
    /// entity's id) is `phase`: within one step always, within `k + 1` steps when `phase`
    /// is a multiple of `2^k`, up to the slowest. NaN is due every tick.
    #[inline(always)]
    pub fn due(&self, d: f32, phase: u32) -> bool {
        let [a, b, c, e] = self.limits;
        let wait = u32::from(d > a)
            | u32::from(d > b) << 1
            | u32::from(d > c) << 2
            | u32::from(d > e) << 3;
        phase & wait & self.slowest_mask == 0
    }
}

/// A per-connection byte allowance: refilled every tick, spent by what is written.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TokenBucket {
    tokens: f64,
    last_tick: Option<u32>,
}

impl TokenBucket {
    /// Adds `per_tick` bytes for every tick since the last refill, up to `capacity`; a new
    /// bucket starts full. Returns the bytes available.
    pub fn refill(&mut self, tick: u32, per_tick: f64, capacity: f64) -> usize {
        let ticks = match self.last_tick {
            None => {
                self.tokens = capacity;
                0
            }
            Some(t) => tick.saturating_sub(t),
        };
        self.last_tick = Some(tick);
        self.tokens = (self.tokens + per_tick * f64::from(ticks)).min(capacity);
        self.tokens as usize
    }

    pub fn spend(&mut self, bytes: usize) {
        self.tokens -= bytes as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closer_and_in_front_weigh_more() {
        let c = PriorityConfig::default();
        let v = ViewerFrame::new(
            &Viewer {
                position: Position::new(0.0, 0.0, 0.0),
                yaw: 0,
            },
            100.0,
        );
        let ahead_near = v.weight(&c, 10.0, 0.0);
        let ahead_far = v.weight(&c, 90.0, 0.0);
        let behind_near = v.weight(&c, -10.0, 0.0);
        let behind_out = v.weight(&c, -200.0, 0.0);
        assert!(ahead_near > ahead_far && ahead_near > behind_near);
        assert!(behind_near > behind_out);
        assert!((behind_out - c.base).abs() < 1e-6);
        assert!((ahead_near - 3.8).abs() < 1e-4, "{ahead_near}");
        // Yaw 16384 is a quarter turn: +y is ahead.
        let v = ViewerFrame::new(
            &Viewer {
                position: Position::default(),
                yaw: 16384,
            },
            100.0,
        );
        assert!(v.weight(&c, 0.0, 50.0) > v.weight(&c, 50.0, 0.0));
        assert!(v.weight(&c, f32::NAN, 0.0).is_finite());
    }

    #[test]
    fn a_word_accumulates_what_each_weight_adds_for_set_bits_only() {
        let c = PriorityConfig::default();
        let v = ViewerFrame::new(
            &Viewer {
                position: Position::new(3.0, -2.0, 0.0),
                yaw: 9000,
            },
            150.0,
        );
        let mut xs: [f32; 64] = std::array::from_fn(|i| i as f32 * 7.3 - 200.0);
        let mut ys: [f32; 64] = std::array::from_fn(|i| (i as f32 * 1.7).sin() * 90.0);
        ys[5] = f32::NAN;
        (xs[9], ys[9]) = (3.0, -2.0);
        let before: [f32; 64] = std::array::from_fn(|i| i as f32 * 0.25);
        let mask = 0xf0f0_0000_ffff_0a2bu64 | 1 << 5 | 1 << 9;
        let tiers = RateTiers::new(&RateByDistance {
            halve_every_m: 30.0,
            slowest_every_ticks: 8,
        });
        for dense in [true, false] {
            let mut after = before;
            let due = v.weigh::<true>(&c, &tiers, &xs, &ys, &mut after, mask, 1000, dense);
            let mut off = before;
            let every = v.weigh::<false>(&c, &tiers, &xs, &ys, &mut off, mask, 1000, dense);
            assert_eq!(
                every & mask,
                mask,
                "dense {dense}: with the rate off, all due"
            );
            for i in 0..64 {
                let want = if mask >> i & 1 != 0 {
                    before[i] + v.weight(&c, xs[i], ys[i])
                } else {
                    before[i]
                };
                assert_eq!(
                    after[i].to_bits(),
                    want.to_bits(),
                    "dense {dense}: entity {i}"
                );
                assert_eq!(
                    off[i].to_bits(),
                    want.to_bits(),
                    "dense {dense}: entity {i}"
                );
                if mask >> i & 1 != 0 {
                    let d = v.distance2(xs[i], ys[i]).sqrt();
                    let want = tiers.due(d, 1000 + i as u32);
                    assert_eq!(due >> i & 1 != 0, want, "dense {dense}: entity {i} due");
                }
            }
            assert!(after[5].is_finite(), "a NaN position adds a finite weight");
            assert_eq!(
                after[9],
                before[9] + 3.0 + 1.0,
                "at the viewer: near and ahead in full"
            );
            assert!(due & mask != mask && due & mask != 0, "{due:x}: some wait");
        }
    }

    #[test]
    fn the_rate_halves_with_each_step_of_distance_down_to_the_slowest() {
        let tiers = |slowest| {
            RateTiers::new(&RateByDistance {
                halve_every_m: 10.0,
                slowest_every_ticks: slowest,
            })
        };
        let due_ticks = |t: &RateTiers, d: f32| -> Vec<u32> {
            (0..32).filter(|&phase| t.due(d, phase)).collect()
        };
        let every = |n: usize| -> Vec<u32> { (0..32).step_by(n).collect() };
        let four = tiers(4);
        assert_eq!(due_ticks(&four, 0.0), every(1));
        assert_eq!(due_ticks(&four, 10.0), every(1), "one step out, every tick");
        assert_eq!(due_ticks(&four, 10.5), every(2));
        assert_eq!(due_ticks(&four, 25.0), every(4));
        assert_eq!(
            due_ticks(&four, 45.0),
            every(4),
            "no slower than the slowest"
        );
        assert_eq!(due_ticks(&four, f32::NAN), every(1));
        let sixteen = tiers(16);
        assert_eq!(due_ticks(&sixteen, 35.0), every(8));
        assert_eq!(due_ticks(&sixteen, 45.0), every(16));
        assert_eq!(due_ticks(&sixteen, 1e9), every(16));
        assert_eq!(due_ticks(&tiers(1), 1e9), every(1), "off: every tick");
        for slowest in [1, 2, 4, 8, 16] {
            let rate = RateByDistance {
                halve_every_m: 10.0,
                slowest_every_ticks: slowest,
            };
            assert_eq!(rate.is_off(), RateTiers::new(&rate).off(), "{slowest}");
        }
    }

    #[test]
    fn a_rate_by_distance_out_of_range_is_refused() {
        let ok = |halve_every_m, slowest_every_ticks| {
            RateByDistance {
                halve_every_m,
                slowest_every_ticks,
            }
            .is_valid()
        };
        assert!(RateByDistance::EVERY_TICK.is_valid());
        for every in [1, 2, 4, 8, 16] {
            assert!(ok(40.0, every), "{every}");
        }
        for every in [0, 3, 6, 32] {
            assert!(!ok(40.0, every), "{every}");
        }
        for m in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            assert!(!ok(m, 4), "{m}");
        }
        let bad = crate::ReplicationConfig {
            rate_by_distance: RateByDistance {
                halve_every_m: 40.0,
                slowest_every_ticks: 3,
            },
            ..crate::ReplicationConfig::default()
        };
        assert_eq!(bad.validate(), Err(crate::ConfigError::RateByDistance));
    }

    #[test]
    fn a_bucket_refills_per_tick_up_to_its_capacity() {
        let mut b = TokenBucket::default();
        assert_eq!(b.refill(10, 100.0, 400.0), 400);
        b.spend(350);
        assert_eq!(b.refill(11, 100.0, 400.0), 150);
        assert_eq!(b.refill(11, 100.0, 400.0), 150, "no refill twice in a tick");
        assert_eq!(b.refill(20, 100.0, 400.0), 400);
    }
}
