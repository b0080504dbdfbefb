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
