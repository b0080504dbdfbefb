//! Fair shares: the order a wake-up runs its due matches in, so that one slow match cannot
//! take more than its share of the tick from the others.
//!
//! A match's share is the budget a worker fills with match frames (0.9 of a tick) over the
//! matches it hosts. Each match's frame cost is followed as a moving average; a wake-up runs
//! the due matches within their share first, earliest deadline first, then those over it.
//! Every due match still runs one tick: a match over its share ticks late when the worker
//! is short of time, never skipped, and the matches it would have delayed start on time.
//!
//! Pure: deadlines and costs are parameters, so the tests need no clock.

use std::time::Instant;

use super::admission::ADMISSION_BUDGET_SHARE;

/// A match frame cost followed over the last few dozen ticks: an exponential moving
/// average with weight 1/8, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct FrameCost {
    mean_ns: u64,
}

impl FrameCost {
    /// Weight of each new frame is 1/2^SHIFT.
    const SHIFT: u32 = 3;

    pub(super) fn add(&mut self, ns: u64) {
        let old = self.mean_ns;
        self.mean_ns = if ns >= old {
            old + ((ns - old) >> Self::SHIFT)
        } else {
            old - ((old - ns) >> Self::SHIFT)
        };
    }

    pub(super) fn mean_ns(self) -> u64 {
        self.mean_ns
    }
}

/// One match's share of a tick of `period_ns` among `matches` hosted, in nanoseconds.
pub(super) fn share_ns(period_ns: u64, matches: usize) -> u64 {
    (ADMISSION_BUDGET_SHARE * period_ns as f64 / matches.max(1) as f64) as u64
}

/// A match due in this wake-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Due {
    /// The match's index in the worker.
    pub(super) index: usize,
    pub(super) deadline: Instant,
    /// Its recent mean frame cost.
    pub(super) cost_ns: u64,
}

/// Puts `due` in the order to run: within `share_ns` first, then over it; earliest deadline
/// first within each, by index on ties. In place, allocating nothing.
pub(super) fn order(due: &mut [Due], share_ns: u64) {
    due.sort_unstable_by_key(|d| (d.cost_ns > share_ns, d.deadline, d.index));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    const PERIOD_NS: u64 = 7_812_500;

    #[test]
    fn the_share_is_the_budget_over_the_matches() {
        assert_eq!(share_ns(PERIOD_NS, 1), 7_031_250);
        assert_eq!(share_ns(PERIOD_NS, 60), 117_187);
        // No match hosted: one match's share, not a division by zero.
        assert_eq!(share_ns(PERIOD_NS, 0), share_ns(PERIOD_NS, 1));
    }

    #[test]
    fn the_moving_average_follows_the_cost_and_forgets_a_spike() {
        let mut c = FrameCost::default();
        for _ in 0..100 {
            c.add(100_000);
        }
        assert!(c.mean_ns().abs_diff(100_000) <= 8, "{}", c.mean_ns());
        c.add(5_000_000);
        let after_spike = c.mean_ns();
        assert!(after_spike > 700_000, "{after_spike}");
        for _ in 0..60 {
            c.add(100_000);
        }
        assert!(c.mean_ns() < 101_000, "{}", c.mean_ns());
    }

    /// The case the ordering is for: a 100-player match (1.4 ms a frame) due first among
    /// ten 10-player ones (0.1 ms) runs after them, so their ticks start on time.
    #[test]
    fn a_slow_match_due_first_runs_after_the_others() {
        let t0 = Instant::now();
        let share = share_ns(PERIOD_NS, 11);
        let mut due: Vec<Due> = (0..11)
            .map(|i| Due {
                index: i,
                deadline: t0 + Duration::from_micros(10 * i as u64),
                cost_ns: if i == 0 { 1_400_000 } else { 100_000 },
            })
            .collect();
        order(&mut due, share);
        let indices: Vec<usize> = due.iter().map(|d| d.index).collect();
        assert_eq!(indices, vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0]);
        // With fewer matches the same cost is within the share, and it runs first again.
        let mut two = [
            Due {
                index: 0,
                deadline: t0,
                cost_ns: 1_400_000,
            },
            Due {
                index: 1,
                deadline: t0 + Duration::from_micros(5),
                cost_ns: 100_000,
            },
        ];
        order(&mut two, share_ns(PERIOD_NS, 2));
        assert_eq!(two.map(|d| d.index), [0, 1]);
    }

    proptest! {
        /// Every due match runs (none skipped, none twice); no match over its share runs
        /// before one within it; within each, deadlines never go backwards.
        #[test]
        fn every_due_match_runs_once_within_their_share_first(
            matches in proptest::collection::vec((0u64..20_000, 0u64..2_000_000), 1..64),
            hosted_extra in 0usize..64,
        ) {
            let t0 = Instant::now();
            let mut due: Vec<Due> = matches
                .iter()
                .enumerate()
                .map(|(index, &(late_us, cost_ns))| Due {
                    index,
                    deadline: t0 + Duration::from_micros(late_us),
                    cost_ns,
                })
                .collect();
            let share = share_ns(PERIOD_NS, due.len() + hosted_extra);
            order(&mut due, share);
            let mut seen: Vec<usize> = due.iter().map(|d| d.index).collect();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..matches.len()).collect::<Vec<_>>());
            for pair in due.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                let (a_over, b_over) = (a.cost_ns > share, b.cost_ns > share);
                prop_assert!(!a_over || b_over, "over its share before within: {a:?} {b:?}");
                if a_over == b_over {
                    prop_assert!(a.deadline <= b.deadline);
                }
            }
        }
    }
}
