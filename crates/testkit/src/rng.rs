//! A small seeded generator: SplitMix64, enough for simulated networks and test data.

use std::time::Duration;

/// SplitMix64 (Steele, Lea and Flood, 2014): a 64-bit state, one add and a mix per draw.
/// Every seed, zero included, gives a full-period stream. Not for cryptography.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    /// A generator whose whole stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        SimRng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0), by multiply-shift: bias below 2^-32 for the
    /// ranges tests use.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A number in `lo..=hi`.
    ///
    /// # Panics
    ///
    /// If `lo > hi`.
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(lo <= hi, "empty range {lo}..={hi}");
        lo + self.below(hi - lo + 1)
    }

    /// A number in `0.0..1.0` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (0.0: never; 1.0: always).
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A duration in `0..=max`, to the nanosecond.
    pub fn duration_up_to(&mut self, max: Duration) -> Duration {
        let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.below(nanos.saturating_add(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_other_seed_other_stream() {
        let a: Vec<u64> = {
            let mut r = SimRng::new(1);
            (0..8).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = SimRng::new(1);
            (0..8).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = SimRng::new(2);
            (0..8).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        // SplitMix64's published first output for seed 0.
        assert_eq!(SimRng::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn draws_stay_in_range_and_chance_follows_p() {
        let mut r = SimRng::new(42);
        let mut hits = 0;
        for _ in 0..10_000 {
            assert!(r.below(10) < 10);
            let x = r.range_inclusive(5, 7);
            assert!((5..=7).contains(&x));
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
            assert!(r.duration_up_to(Duration::from_millis(3)) <= Duration::from_millis(3));
            if r.chance(0.2) {
                hits += 1;
            }
        }
        assert!((1800..=2200).contains(&hits), "{hits}");
        assert_eq!(r.below(0), 0);
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
    }
}
