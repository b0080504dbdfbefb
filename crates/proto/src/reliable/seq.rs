//! Wrapping 16-bit sequence numbers for packets and messages.

use std::fmt;

/// Half the sequence space: the most one number can lead another and still count as newer.
const HALF_RANGE: u16 = 1 << 15;

/// A 16-bit sequence number that wraps from 65535 to 0 (packet sequences, message ids).
///
/// Compare with [`Seq16::is_newer_than`], never with `>`: after the wrap, 0 is newer than
/// 65535. `Seq16` deliberately has no `Ord`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Seq16(pub u16);

impl Seq16 {
    /// The first sequence number either side uses.
    pub const ZERO: Seq16 = Seq16(0);

    /// The number after this one (65535 is followed by 0).
    #[must_use]
    pub fn next(self) -> Seq16 {
        Seq16(self.0.wrapping_add(1))
    }

    /// The number `steps` after this one, wrapping.
    #[must_use]
    pub fn wrapping_add(self, steps: u16) -> Seq16 {
        Seq16(self.0.wrapping_add(steps))
    }

    /// The number `steps` before this one, wrapping.
    #[must_use]
    pub fn wrapping_sub(self, steps: u16) -> Seq16 {
        Seq16(self.0.wrapping_sub(steps))
    }

    /// Steps forward from `earlier` to `self`, wrapping: `earlier.wrapping_add(d) == self`.
    ///
    /// Meaningful when `earlier` is not newer than `self`; otherwise it is the long way round.
    #[must_use]
    pub fn distance_from(self, earlier: Seq16) -> u16 {
        self.0.wrapping_sub(earlier.0)
    }

    /// Signed steps from `base` to `self`: positive when `self` is newer, in `-32768..=32767`.
    #[must_use]
    pub fn delta_from(self, base: Seq16) -> i16 {
        // Two's complement reinterpretation is the whole point: 1 step past 65535 is +1.
        self.distance_from(base) as i16
    }

    /// True when `self` comes after `other` by less than half the sequence space.
    ///
    /// Numbers exactly half the space apart (32768) are ambiguous: neither is newer than the
    /// other, so the relation stays antisymmetric.
    #[must_use]
    pub fn is_newer_than(self, other: Seq16) -> bool {
        let d = self.distance_from(other);
        d != 0 && d < HALF_RANGE
    }
}

impl fmt::Display for Seq16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_from_65535_to_0() {
        let last = Seq16(u16::MAX);
        assert_eq!(last.next(), Seq16(0));
        assert!(Seq16(0).is_newer_than(last));
        assert!(!last.is_newer_than(Seq16(0)));
        assert_eq!(Seq16(0).distance_from(last), 1);
        assert_eq!(Seq16(0).delta_from(last), 1);
        assert_eq!(last.delta_from(Seq16(0)), -1);
        assert_eq!(Seq16(3).wrapping_sub(5), Seq16(65534));
        assert_eq!(Seq16(65534).wrapping_add(5), Seq16(3));
    }

    #[test]
    fn half_range_is_neither_newer_nor_older() {
        let a = Seq16(10);
        let b = a.wrapping_add(HALF_RANGE);
        assert!(!a.is_newer_than(b));
        assert!(!b.is_newer_than(a));
        assert!(a.wrapping_add(HALF_RANGE - 1).is_newer_than(a));
        assert!(a.is_newer_than(a.wrapping_add(HALF_RANGE + 1)));
    }

    proptest! {
        #[test]
        fn newer_is_antisymmetric_and_irreflexive(a in any::<u16>(), b in any::<u16>()) {
            let (a, b) = (Seq16(a), Seq16(b));
            prop_assert!(!(a.is_newer_than(b) && b.is_newer_than(a)));
            prop_assert!(!a.is_newer_than(a));
            // Exactly one of: equal, a newer, b newer, half the space apart.
            let cases = [a == b, a.is_newer_than(b), b.is_newer_than(a), a.distance_from(b) == HALF_RANGE];
            prop_assert_eq!(cases.iter().filter(|c| **c).count(), 1);
        }

        #[test]
        fn newer_agrees_with_signed_delta(a in any::<u16>(), b in any::<u16>()) {
            let (a, b) = (Seq16(a), Seq16(b));
            prop_assert_eq!(a.is_newer_than(b), a.delta_from(b) > 0);
            prop_assert_eq!(b.wrapping_add(a.distance_from(b)), a);
        }

        #[test]
        fn newer_is_transitive_within_half_range(
            a in any::<u16>(), step1 in 1u16..16384, step2 in 1u16..16384,
        ) {
            // a < b < c along the circle, c less than half the space past a.
            let a = Seq16(a);
            let b = a.wrapping_add(step1);
            let c = b.wrapping_add(step2);
            prop_assert!(b.is_newer_than(a));
            prop_assert!(c.is_newer_than(b));
            prop_assert!(c.is_newer_than(a));
            prop_assert_eq!(c.distance_from(a), step1 + step2);
        }

        #[test]
        fn next_is_always_newer_even_across_the_wrap(a in any::<u16>()) {
            let a = Seq16(a);
            prop_assert!(a.next().is_newer_than(a));
            prop_assert_eq!(a.next().distance_from(a), 1);
            prop_assert_eq!(a.next().delta_from(a), 1);
        }
    }
}
