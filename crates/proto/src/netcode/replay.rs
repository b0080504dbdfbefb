//! Replay protection: each side remembers the last 256 sequence numbers it accepted.

use tickforge_sim::hint::prefetch;

/// How many sequence numbers the window remembers.
pub const REPLAY_WINDOW: usize = 256;

const EMPTY: u64 = u64::MAX;

/// The 256-entry replay window of one connection and direction.
#[derive(Clone, Debug)]
pub struct ReplayWindow {
    most_recent: u64,
    received: [u64; REPLAY_WINDOW],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplayWindow {
    /// An empty window.
    pub fn new() -> Self {
        ReplayWindow {
            most_recent: 0,
            received: [EMPTY; REPLAY_WINDOW],
        }
    }

    /// True when `sequence` was accepted before or is too old to tell.
    ///
    /// The age test subtracts from the most recent sequence instead of adding to the
    /// packet's: `sequence + 256` overflows for a sequence near `u64::MAX` (a debug-build
    /// panic any peer can trigger before decryption, as in renetcode and netcode-rs).
    pub fn already_received(&self, sequence: u64) -> bool {
        if self.most_recent >= REPLAY_WINDOW as u64
            && sequence <= self.most_recent - REPLAY_WINDOW as u64
        {
            return true;
        }
        let entry = self.received[(sequence % REPLAY_WINDOW as u64) as usize];
        entry != EMPTY && entry >= sequence
    }

    /// Starts loading what [`ReplayWindow::already_received`] and
    /// [`ReplayWindow::advance`] read for `sequence`: a hint, which changes nothing.
    pub fn prefetch(&self, sequence: u64) {
        prefetch(&self.most_recent);
        prefetch(&self.received[(sequence % REPLAY_WINDOW as u64) as usize]);
    }

    /// [`ReplayWindow::prefetch`] for the sequence after the newest accepted, the next a
    /// peer that sends in order uses: give it once the window's first line is loaded.
    pub fn prefetch_next(&self) {
        self.prefetch(self.most_recent.wrapping_add(1));
    }

    /// Records `sequence` as accepted. Call only after the packet authenticated.
    pub fn advance(&mut self, sequence: u64) {
        self.most_recent = self.most_recent.max(sequence);
        self.received[(sequence % REPLAY_WINDOW as u64) as usize] = sequence;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
        // u64::MAX is the empty marker; it is never reported as received by itself.
        assert!(!w.already_received(u64::MAX));
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

    proptest! {
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
