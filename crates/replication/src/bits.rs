//! Bit rows: one bit per entity, 64 to a word.

/// The indices of the set bits of a word, lowest first.
pub(crate) struct BitIter(pub u64);

impl Iterator for BitIter {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let b = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(b)
    }
}

/// Asks the CPU to start loading the cache line holding `p`, and returns at once: a write
/// issues these for the lines of a connection's tables it is about to touch, so that
/// their misses overlap rather than stall it one after another. Only a hint: it reads
/// nothing and cannot fault, and on targets without the instruction it does nothing.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint that never faults, whatever the address, and SSE is
    // part of every x86_64 target.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_bits_lowest_first() {
        assert_eq!(BitIter(0).count(), 0);
        let v: Vec<usize> = BitIter(1 | 1 << 5 | 1 << 63).collect();
        assert_eq!(v, vec![0, 5, 63]);
    }
}
