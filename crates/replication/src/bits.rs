//! Bit rows: one bit per entity, 64 to a word.

use crate::state::NetId;

/// The indices of the set bits of a word, lowest first.
#[derive(Clone, Debug, Default)]
pub(crate) struct BitIter(pub u64);

impl Iterator for BitIter {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let b = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(b)
    }
}

/// The set bits of a row of words, as entity ids, lowest first: a loop a caller's `extend`
/// or `filter` inlines whole (a `flat_map` over the words ran each step as a call). The
/// default is empty.
#[derive(Clone, Debug, Default)]
pub struct Ids<'a> {
    words: &'a [u64],
    /// The word `bits` is left of, and its bits not yet given.
    at: usize,
    bits: BitIter,
}

impl<'a> Ids<'a> {
    pub(crate) fn new(words: &'a [u64]) -> Ids<'a> {
        Ids {
            words,
            at: 0,
            bits: BitIter(words.first().copied().unwrap_or(0)),
        }
    }
}

impl Iterator for Ids<'_> {
    type Item = NetId;

    #[inline]
    fn next(&mut self) -> Option<NetId> {
        loop {
            if let Some(b) = self.bits.next() {
                return Some(NetId((self.at * 64 + b) as u16));
            }
            self.at += 1;
            self.bits = BitIter(*self.words.get(self.at)?);
        }
    }
}

/// Words of a [`BitRow`] kept inline: 256 bits.
const INLINE_WORDS: usize = 4;

/// A row of bits that grows as bits are set past it, its first 256 inline in whatever holds
/// it (no line of its own for the usual row), the rest in an allocation kept once grown.
#[derive(Debug, Default)]
pub(crate) struct BitRow {
    inline: [u64; INLINE_WORDS],
    more: Vec<u64>,
}

impl BitRow {
    /// Bit `i`'s word: inline, or past those (a reader sets and clears a bit a record, so
    /// this is inlined and the growing kept apart).
    #[inline(always)]
    fn word(&mut self, i: usize) -> &mut u64 {
        let w = i / 64;
        match w.checked_sub(INLINE_WORDS) {
            None => &mut self.inline[w],
            Some(m) => self.more_word(m),
        }
    }

    #[cold]
    #[inline(never)]
    fn more_word(&mut self, m: usize) -> &mut u64 {
        if m >= self.more.len() {
            self.more.resize(m + 1, 0);
        }
        &mut self.more[m]
    }

    /// Sets bit `i` when `on` (leaves it otherwise).
    #[inline]
    pub(crate) fn set(&mut self, i: usize, on: bool) {
        *self.word(i) |= u64::from(on) << (i % 64);
    }

    #[inline]
    pub(crate) fn clear(&mut self, i: usize) {
        *self.word(i) &= !(1 << (i % 64));
    }

    /// The set bits, lowest first.
    pub(crate) fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        (self.inline.iter().chain(&self.more).enumerate())
            .flat_map(|(w, &word)| BitIter(word).map(move |b| w * 64 + b))
    }

    /// Every bit clear, the allocation kept.
    pub(crate) fn reset(&mut self) {
        self.inline = [0; INLINE_WORDS];
        self.more.clear();
    }
}

/// The word whose bit `i` is `lanes[i]`, each lane 0 or 1: eight lanes to a multiply,
/// which moves each lane's low bit to its place among the top eight (the partial products
/// that would collide fall below them or past the word), where a loop of shifts would
/// take an instruction or two a lane.
#[inline(always)]
pub(crate) fn pack(lanes: &[u8; 64]) -> u64 {
    const GATHER: u64 = 0x0102_0408_1020_4080;
    let mut bits = 0;
    for (k, eight) in lanes.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(eight.try_into().expect("8 lanes"));
        debug_assert_eq!(x & !0x0101_0101_0101_0101, 0, "lanes are 0 or 1");
        bits |= (x.wrapping_mul(GATHER) >> 56) << (8 * k);
    }
    bits
}

pub(crate) use tickforge_sim::hint::prefetch;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bit_row_holds_its_bits_inline_and_past_them() {
        let mut bits = BitRow::default();
        for i in 0..600 {
            bits.set(i, i % 7 == 0 || i == 255 || i == 256);
        }
        bits.clear(7);
        bits.clear(511);
        let want: Vec<usize> = (0..600)
            .filter(|&i| (i % 7 == 0 || i == 255 || i == 256) && i != 7 && i != 511)
            .collect();
        assert_eq!(bits.ones().collect::<Vec<_>>(), want);
        bits.reset();
        assert_eq!(bits.ones().count(), 0);
        bits.set(300, true);
        assert_eq!(bits.ones().collect::<Vec<_>>(), [300]);
    }

    #[test]
    fn ids_are_the_set_bits_of_every_word_lowest_first() {
        let words = [0, 1 << 3 | 1 << 63, 0, 0, 1, u64::MAX << 62];
        let want: Vec<usize> = (0..words.len() * 64)
            .filter(|&i| words[i / 64] >> (i % 64) & 1 != 0)
            .collect();
        assert_eq!(want, [67, 127, 256, 382, 383]);
        let ids: Vec<usize> = Ids::new(&words).map(|id| usize::from(id.0)).collect();
        assert_eq!(ids, want);
        assert_eq!(Ids::new(&[0, 0]).count(), 0);
        assert_eq!(Ids::new(&[]).count(), 0);
        assert_eq!(Ids::default().count(), 0);
    }

    #[test]
    fn set_bits_lowest_first() {
        assert_eq!(BitIter(0).count(), 0);
        let v: Vec<usize> = BitIter(1 | 1 << 5 | 1 << 63).collect();
        assert_eq!(v, vec![0, 5, 63]);
    }

    proptest::proptest! {
        #[test]
        fn packed_lanes_are_the_bits(word: u64) {
            let lanes: [u8; 64] = std::array::from_fn(|i| (word >> i & 1) as u8);
            proptest::prop_assert_eq!(pack(&lanes), word);
        }
    }
}
