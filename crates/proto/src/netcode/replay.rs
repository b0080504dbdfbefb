//! Replay protection: each side remembers which of the last 256 sequence numbers it
//! accepted.

use tickforge_sim::hint::prefetch;

/// How many sequence numbers the window remembers.
pub const REPLAY_WINDOW: usize = 256;

const WORDS: usize = REPLAY_WINDOW / 64;

/// The 256-sequence replay window of one connection and direction: the newest sequence
/// accepted, and a bit for each of the 256 up to it, set when that one was accepted.
///
/// netcode.io's reference keeps the 256 sequences themselves (2 KiB a window, two thirds of
/// a server's connection slot); the bits answer the same for any sequence (the tests hold
/// them to that reference) in 40 bytes, aligned to be one cache line: a connection's
/// packet finds one line of it cold, never two.
#[derive(Clone, Debug, Default)]
#[repr(align(64))]
pub struct ReplayWindow {
    most_recent: u64,
    /// Bit `s % 256` is set when sequence `s`, one of `most_recent - 255..=most_recent`, was
    /// accepted.
    accepted: [u64; WORDS],
}

impl ReplayWindow {
    /// An empty window.
    pub fn new() -> Self {
        ReplayWindow::default()
    }

    /// True when `sequence` was accepted before or is too old to tell.
    pub fn already_received(&self, sequence: u64) -> bool {
        self.too_old(sequence) || (sequence <= self.most_recent && self.bit(sequence))
    }

    /// `sequence` is 256 or more behind the newest accepted: out of the window.
    ///
    /// Subtracts from the most recent sequence instead of adding to the packet's:
    /// `sequence + 256` overflows for a sequence near `u64::MAX` (a debug-build panic any
    /// peer can trigger before decryption, as in renetcode and netcode-rs).
    fn too_old(&self, sequence: u64) -> bool {
        self.most_recent >= REPLAY_WINDOW as u64
            && sequence <= self.most_recent - REPLAY_WINDOW as u64
    }

    /// Starts loading what [`ReplayWindow::already_received`] and
    /// [`ReplayWindow::advance`] read, for any sequence: the window's one line. A hint,
    /// which changes nothing.
    pub fn prefetch(&self) {
        prefetch(self);
    }

    /// Records `sequence` as accepted. Call only after the packet authenticated, and
    /// [`ReplayWindow::already_received`] said no: a sequence too old to tell changes
    /// nothing.
    pub fn advance(&mut self, sequence: u64) {
        if sequence > self.most_recent {
            let ahead = sequence - self.most_recent;
            if ahead >= REPLAY_WINDOW as u64 {
                self.accepted = [0; WORDS];
            } else {
                // The sequences skipped over leave the window's far end: their bits now
                // stand for these, not yet accepted.
                for s in self.most_recent + 1..sequence {
                    self.clear(s);
                }
            }
            self.most_recent = sequence;
        } else if self.too_old(sequence) {
            return;
        }
        let (w, b) = Self::at(sequence);
        self.accepted[w] |= 1 << b;
    }

    fn at(sequence: u64) -> (usize, u32) {
        let i = (sequence % REPLAY_WINDOW as u64) as usize;
        (i / 64, (i % 64) as u32)
    }

    fn bit(&self, sequence: u64) -> bool {
        let (w, b) = Self::at(sequence);
        self.accepted[w] >> b & 1 != 0
    }

    fn clear(&mut self, sequence: u64) {
        let (w, b) = Self::at(sequence);
        self.accepted[w] &= !(1 << b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A sequence next to the last one: `By` that far from it, or `To` this one.
    #[derive(Clone, Copy, Debug)]
    enum Step {
        By(i64),
        To(u64),
    }

    #[test]
    fn accepts_once_and_rejects_the_old() {
        let mut w = ReplayWindow::new();
        assert!(!w.already_received(0));
        w.advance(0);
        assert!(w.already_received(0));
        for s in 1..1000 {
            assert!(!w.already_received(s));
            w.advance(s);
        }
        // Out of the window behind 999.
        assert!(w.already_received(999 - 256));
        // Inside the window and seen.
        assert!(w.already_received(999 - 255));
    }

    #[test]
    fn sequences_near_the_top_never_overflow() {
        let mut w = ReplayWindow::new();
        for s in [u64::MAX - 1, u64::MAX - 300, 0] {
            let _ = w.already_received(s);
        }
        w.advance(u64::MAX - 1);
        assert!(w.already_received(u64::MAX - 1));
        assert!(w.already_received(u64::MAX - 400));
        // Newer than the newest: not received.
        assert!(!w.already_received(u64::MAX));
    }

    #[test]
    fn the_window_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<ReplayWindow>(), 64);
        assert_eq!(std::mem::align_of::<ReplayWindow>(), 64);
    }

    #[test]
    fn a_sequence_too_old_to_tell_changes_nothing() {
        let mut w = ReplayWindow::new();
        w.advance(1000);
        // 740 is out of the window behind 1000, at the place of 996.
        assert!(w.already_received(740));
        w.advance(740);
        assert!(!w.already_received(996));
        assert!(w.already_received(1000));
    }

    #[test]
    fn reordered_packets_inside_the_window_are_accepted() {
        let mut w = ReplayWindow::new();
        w.advance(500);
        assert!(!w.already_received(400));
        w.advance(400);
        assert!(w.already_received(400));
        assert!(!w.already_received(401));
    }

    /// netcode.io's reference window: the last sequence accepted at each of 256 places
    /// (`u64::MAX`: none), a sequence received when its place holds it or a newer one.
    struct Reference {
        most_recent: u64,
        received: [u64; REPLAY_WINDOW],
    }

    impl Reference {
        fn already_received(&self, sequence: u64) -> bool {
            if self.most_recent >= REPLAY_WINDOW as u64
                && sequence <= self.most_recent - REPLAY_WINDOW as u64
            {
                return true;
            }
            let entry = self.received[(sequence % REPLAY_WINDOW as u64) as usize];
            entry != u64::MAX && entry >= sequence
        }

        fn advance(&mut self, sequence: u64) {
            self.most_recent = self.most_recent.max(sequence);
            self.received[(sequence % REPLAY_WINDOW as u64) as usize] = sequence;
        }
    }

    proptest! {
        /// The window's bits answer as netcode.io's reference window of sequences, for
        /// sequences in order, reordered, repeated, far ahead and near the top (but
        /// `u64::MAX`, the reference's marker of an empty place).
        #[test]
        fn answers_as_the_reference_window(
            steps in proptest::collection::vec(
                prop_oneof![
                    4 => (-300i64..300).prop_map(Step::By),
                    1 => (0u64..u64::MAX).prop_map(Step::To),
                    1 => (0u64..600).prop_map(|d| Step::To(u64::MAX - 1 - d)),
                ],
                1..500,
            ),
        ) {
            let mut w = ReplayWindow::new();
            let mut r = Reference { most_recent: 0, received: [u64::MAX; REPLAY_WINDOW] };
            let mut s = 0u64;
            for step in steps {
                s = match step {
                    Step::By(d) => s.saturating_add_signed(d).min(u64::MAX - 1),
                    Step::To(t) => t,
                };
                let rejected = w.already_received(s);
                prop_assert_eq!(rejected, r.already_received(s), "sequence {}", s);
                if !rejected {
                    w.advance(s);
                    r.advance(s);
                }
            }
        }

        /// Against a model that remembers every sequence accepted: the window never accepts
        /// a sequence twice, and accepts every new sequence within 256 of the newest.
        #[test]
        fn matches_a_model(seqs in proptest::collection::vec(0u64..2000, 1..400)) {
            let mut w = ReplayWindow::new();
            let mut seen = std::collections::BTreeSet::new();
            let mut newest: Option<u64> = None;
            for s in seqs {
                let rejected = w.already_received(s);
                if seen.contains(&s) {
                    prop_assert!(rejected, "accepted {s} twice");
                }
                let fresh_in_window = !seen.contains(&s)
                    && newest.is_none_or(|n| s + REPLAY_WINDOW as u64 > n);
                if fresh_in_window {
                    prop_assert!(!rejected, "rejected fresh {s} (newest {newest:?})");
                }
                if !rejected {
                    w.advance(s);
                    seen.insert(s);
                    newest = Some(newest.map_or(s, |n| n.max(s)));
                }
            }
        }

        #[test]
        fn arbitrary_sequences_never_panic(seqs in proptest::collection::vec(any::<u64>(), 1..100)) {
            let mut w = ReplayWindow::new();
            for s in seqs {
                if !w.already_received(s) {
                    w.advance(s);
                }
            }
        }
    }
}
