//! Per-round and per-match frame history, and budgets per category.
//!
//! VALORANT's 128-tick article tracks "average server frame time per round" and gives each
//! subsystem a budget. [`MatchHistory`] does both for one match: every match frame is
//! charged to the round the game says it is in ([`MatchHistory::record`]); when the round
//! changes, the round's summary ([`RoundSummary`]: ticks, late ticks, mean and p99 frame,
//! the mean of each category, budget violations) joins a bounded history, and the whole
//! match keeps one summary of its own. A game without rounds has the match summary only.
//!
//! [`Budgets`] hold a budget per category and one for the whole frame (the
//! [`BUDGET_SLOTS`]); a frame whose cost in a slot exceeds the slot's budget counts one
//! violation for that slot.
//!
//! In order of importance: recording a frame never allocates (fixed arrays, and a history
//! reserved for [`MAX_ROUNDS`] when it is made); the numbers are exact sums (means are
//! sums over ticks), and p99 comes from a small log-scale histogram (an over-estimate of at
//! most 25%, never above the round's maximum).
//!
//! The history has a text form, one token of a results line ([`MatchHistory::write_cost`],
//! read back by [`Cost::parse`]):
//!
//! ```text
//! cost=m:T:L:MEAN:P99:C0,C1,…,C9:V0,V1,…,V10;rR:T:L:MEAN:P99:C0,…,C9:V0,…,V10;…
//! ```
//!
//! The first span (`m`) is the whole match, then one span per round kept (`r` and the
//! round number), oldest first. `T` ticks, `L` late ticks, `MEAN` and `P99` the frame in
//! nanoseconds, `C0..C9` the mean nanoseconds per tick of each category in
//! [`Category::ALL`] order, `V0..V10` the budget violations of each category in that order
//! and then of the whole frame. Every number is an unsigned decimal.

use std::collections::VecDeque;
use std::fmt::{self, Write as _};

use crate::{Category, FrameRecord};

/// Budget slots: one per category ([`Category::index`]), then the whole frame
/// ([`FRAME_SLOT`]).
pub const BUDGET_SLOTS: usize = Category::COUNT + 1;

/// The slot of the whole frame's budget.
pub const FRAME_SLOT: usize = Category::COUNT;

/// Rounds a match's history holds: a 13-round-win match plays at most 24 rounds and its
/// overtime a few more, so 64 holds any real match. Past it the oldest round is dropped
/// (the match's own summary still counts every tick), so the history never grows.
pub const MAX_ROUNDS: usize = 64;

/// The name of budget slot `slot`: the category's ([`Category::name`]), or `frame`.
pub fn slot_name(slot: usize) -> &'static str {
    Category::ALL.get(slot).map_or("frame", |c| c.name())
}

/// The slot named `name` ([`slot_name`]).
pub fn slot_by_name(name: &str) -> Option<usize> {
    (0..BUDGET_SLOTS).find(|&s| slot_name(s) == name)
}

/// A budget per category and for the whole frame, in nanoseconds per match tick; `None`:
/// no budget in that slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budgets {
    /// By slot: [`Category::index`], then [`FRAME_SLOT`].
    pub ns: [Option<u64>; BUDGET_SLOTS],
}

impl Budgets {
    /// The slots `frame` is over budget in, as bit `slot`.
    pub fn over(&self, frame: &FrameRecord) -> u16 {
        let mut over = 0;
        for (slot, budget) in self.ns.iter().enumerate() {
            let cost = match Category::ALL.get(slot) {
                Some(c) => frame.category_ns[c.index()],
                None => frame.total_ns,
            };
            if budget.is_some_and(|b| cost > b) {
                over |= 1 << slot;
            }
        }
        over
    }

    /// True when no slot has a budget.
    pub fn is_empty(&self) -> bool {
        self.ns.iter().all(Option::is_none)
    }
}

/// Buckets of [`Span`]'s frame histogram: four per power of two from 1 ns to 2^40 ns
/// (about 18 minutes): four linear slices of each power of two, so a bucket reads at most
/// 25% above a value in it (the slice from 4k to 5k reads 5k − 1).
const BUCKETS: usize = 41 * 4;

fn bucket(ns: u64) -> usize {
    if ns < 4 {
        return ns as usize;
    }
    let e = 63 - ns.leading_zeros() as usize;
    let m = ((ns >> (e - 2)) & 3) as usize;
    (e * 4 + m).min(BUCKETS - 1)
}

/// The largest value bucket `b` holds.
fn bucket_top(b: usize) -> u64 {
    if b < 8 {
        // 0..=3 hold themselves; 4..8 are never used (4 is bucket 8).
        return b.min(3) as u64;
    }
    let (e, m) = (b / 4, (b % 4) as u64);
    ((5 + m) << (e - 2)) - 1
}

/// The frames of one round (or of the whole match) so far: sums and a histogram.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Span {
    ticks: u64,
    late: u64,
    total_ns: u64,
    max_ns: u64,
    category_ns: [u64; Category::COUNT],
    violations: [u64; BUDGET_SLOTS],
    hist: [u32; BUCKETS],
}

impl Default for Span {
    fn default() -> Self {
        Span {
            ticks: 0,
            late: 0,
            total_ns: 0,
            max_ns: 0,
            category_ns: [0; Category::COUNT],
            violations: [0; BUDGET_SLOTS],
            hist: [0; BUCKETS],
        }
    }
}

impl Span {
    fn add(&mut self, frame: &FrameRecord, late: bool, over: u16) {
        self.ticks += 1;
        self.late += u64::from(late);
        self.total_ns = self.total_ns.saturating_add(frame.total_ns);
        self.max_ns = self.max_ns.max(frame.total_ns);
        for (sum, ns) in self.category_ns.iter_mut().zip(frame.category_ns) {
            *sum = sum.saturating_add(ns);
        }
        for (slot, v) in self.violations.iter_mut().enumerate() {
            *v += u64::from(over >> slot & 1);
        }
        let b = &mut self.hist[bucket(frame.total_ns)];
        *b = b.saturating_add(1);
    }

    fn p99_ns(&self) -> u64 {
        if self.ticks == 0 {
            return 0;
        }
        // The smallest value with at least 99% of the frames at or below it.
        let need = (self.ticks * 99).div_ceil(100);
        let mut seen = 0;
        for (b, &n) in self.hist.iter().enumerate() {
            seen += u64::from(n);
            if seen >= need {
                return bucket_top(b).min(self.max_ns);
            }
        }
        self.max_ns
    }

    fn summary(&self, round: Option<u32>) -> RoundSummary {
        let mean = |sum: u64| sum.checked_div(self.ticks).unwrap_or(0);
        RoundSummary {
            round,
            ticks: self.ticks,
            late: self.late,
            mean_ns: mean(self.total_ns),
            p99_ns: self.p99_ns(),
            category_mean_ns: self.category_ns.map(mean),
            violations: self.violations,
        }
    }
}

/// What one round (or a whole match) cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundSummary {
    /// The round, from the game ([`MatchHistory::record`]); `None` for a whole match.
    pub round: Option<u32>,
    /// Match ticks run.
    pub ticks: u64,
    /// Of them, ticks that started late.
    pub late: u64,
    /// Mean frame cost per tick, nanoseconds.
    pub mean_ns: u64,
    /// 99th percentile of the frame cost, nanoseconds (the top of its histogram bucket,
    /// at most the largest frame).
    pub p99_ns: u64,
    /// Mean cost per tick of each category, nanoseconds, by [`Category::index`].
    pub category_mean_ns: [u64; Category::COUNT],
    /// Ticks over budget, by slot ([`BUDGET_SLOTS`]).
    pub violations: [u64; BUDGET_SLOTS],
}

impl RoundSummary {
    fn write(&self, out: &mut String) {
        match self.round {
            Some(r) => {
                let _ = write!(out, "r{r}");
            }
            None => out.push('m'),
        }
        let _ = write!(
            out,
            ":{}:{}:{}:{}:",
            self.ticks, self.late, self.mean_ns, self.p99_ns
        );
        write_list(out, &self.category_mean_ns);
        out.push(':');
        write_list(out, &self.violations);
    }

    fn parse(text: &str) -> Result<RoundSummary, CostError> {
        let mut fields = text.split(':');
        let round = match fields.next().ok_or(CostError)? {
            "m" => None,
            r => Some(number(r.strip_prefix('r').ok_or(CostError)?)?),
        };
        let mut next = || fields.next().ok_or(CostError);
        let ticks = number(next()?)?;
        let late = number(next()?)?;
        let mean_ns = number(next()?)?;
        let p99_ns = number(next()?)?;
        let category_mean_ns = list(next()?)?;
        let violations = list(next()?)?;
        if fields.next().is_some() {
            return Err(CostError);
        }
        Ok(RoundSummary {
            round,
            ticks,
            late,
            mean_ns,
            p99_ns,
            category_mean_ns,
            violations,
        })
    }
}

fn write_list(out: &mut String, values: &[u64]) {
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{v}");
    }
}

fn number<T: std::str::FromStr>(s: &str) -> Result<T, CostError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CostError);
    }
    s.parse().map_err(|_| CostError)
}

fn list<const N: usize>(s: &str) -> Result<[u64; N], CostError> {
    let mut out = [0; N];
    let mut values = s.split(',');
    for v in &mut out {
        *v = number(values.next().ok_or(CostError)?)?;
    }
    match values.next() {
        None => Ok(out),
        Some(_) => Err(CostError),
    }
}

/// A `cost` token that does not read as [`MatchHistory::write_cost`] writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the cost token is not m:T:L:MEAN:P99:C0,…:V0,… spans separated by `;`")]
pub struct CostError;

/// A match's history as a results line carries it ([`MatchHistory::write_cost`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// The whole match.
    pub whole: RoundSummary,
    /// The rounds kept, oldest first.
    pub rounds: Vec<RoundSummary>,
}

impl Cost {
    /// Reads the value of a `cost` token (without `cost=`).
    pub fn parse(value: &str) -> Result<Cost, CostError> {
        let mut spans = value.split(';');
        let whole = RoundSummary::parse(spans.next().ok_or(CostError)?)?;
        if whole.round.is_some() {
            return Err(CostError);
        }
        let rounds = spans
            .map(RoundSummary::parse)
            .map(|r| r.and_then(|r| r.round.is_some().then_some(r).ok_or(CostError)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cost { whole, rounds })
    }
}

/// What [`MatchHistory::record`] did with a frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The slots the frame was over budget in, as bit `slot`.
    pub over: u16,
    /// The round the frame closed (the game had moved on to another).
    pub closed: Option<RoundSummary>,
}

/// One match's frame history: its rounds, the round being played, and the whole match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchHistory {
    budgets: Budgets,
    /// The round being played, and its frames so far.
    current: Option<u32>,
    open: Span,
    whole: Span,
    /// Finished rounds, oldest first; reserved for [`MAX_ROUNDS`].
    rounds: VecDeque<RoundSummary>,
    /// Rounds dropped from the front to keep [`MAX_ROUNDS`].
    dropped: u32,
}

impl MatchHistory {
    /// An empty history that counts violations of `budgets`; reserves its rounds now.
    pub fn new(budgets: Budgets) -> MatchHistory {
        MatchHistory {
            budgets,
            current: None,
            open: Span::default(),
            whole: Span::default(),
            rounds: VecDeque::with_capacity(MAX_ROUNDS),
            dropped: 0,
        }
    }

    /// The budgets violations are counted against.
    pub fn budgets(&self) -> &Budgets {
        &self.budgets
    }

    /// Charges one match frame to `round` (the game's round after the tick, `None` for a
    /// game without rounds) and to the whole match; `late` when the tick started late. A
    /// round other than the one being played closes that one first. Allocates nothing.
    pub fn record(&mut self, round: Option<u32>, frame: &FrameRecord, late: bool) -> Recorded {
        let closed = if round != self.current {
            let closed = self.close_round();
            self.current = round;
            closed
        } else {
            None
        };
        let over = self.budgets.over(frame);
        self.whole.add(frame, late, over);
        if self.current.is_some() {
            self.open.add(frame, late, over);
        }
        Recorded { over, closed }
    }

    /// Closes the round being played, if it ran a tick, into the history and returns its
    /// summary: when the match ends. Allocates nothing.
    pub fn close_round(&mut self) -> Option<RoundSummary> {
        let round = self.current.take()?;
        if self.open.ticks == 0 {
            return None;
        }
        let summary = self.open.summary(Some(round));
        self.open = Span::default();
        if self.rounds.len() == MAX_ROUNDS {
            self.rounds.pop_front();
            self.dropped += 1;
        }
        self.rounds.push_back(summary);
        Some(summary)
    }

    /// Forgets every frame, keeping the budgets and the memory: a new match.
    pub fn clear(&mut self) {
        self.current = None;
        self.open = Span::default();
        self.whole = Span::default();
        self.rounds.clear();
        self.dropped = 0;
    }

    /// The finished rounds kept, oldest first.
    pub fn rounds(&self) -> impl ExactSizeIterator<Item = &RoundSummary> + '_ {
        self.rounds.iter()
    }

    /// Finished rounds dropped to keep [`MAX_ROUNDS`].
    pub fn dropped(&self) -> u32 {
        self.dropped
    }

    /// The round being played so far (its running means); `None` for a game without
    /// rounds, or before its first tick.
    pub fn current(&self) -> Option<RoundSummary> {
        let round = self.current?;
        Some(self.open.summary(Some(round)))
    }

    /// The whole match so far.
    pub fn whole(&self) -> RoundSummary {
        self.whole.summary(None)
    }

    /// Appends the history as a `cost` token's value (module docs): the whole match, then
    /// each finished round. Close the last round first ([`MatchHistory::close_round`]).
    pub fn write_cost(&self, out: &mut String) {
        self.whole().write(out);
        for r in &self.rounds {
            out.push(';');
            r.write(out);
        }
    }
}

impl fmt::Display for RoundSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write(&mut s);
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame of `total` ns, `gameplay` of it in gameplay and the rest in network.
    fn frame(total: u64, gameplay: u64) -> FrameRecord {
        let mut r = FrameRecord::default();
        r.category_ns[Category::Gameplay.index()] = gameplay;
        r.category_ns[Category::Network.index()] = total - gameplay;
        r.total_ns = total;
        r
    }

    #[test]
    fn buckets_hold_their_values_within_a_fifth() {
        for ns in [0, 1, 3, 4, 5, 7, 8, 100, 1_000, 117_187, 7_812_500, 1 << 40] {
            let b = bucket(ns);
            assert!(b < BUCKETS - 1 && bucket_top(b) >= ns, "{ns} in bucket {b}");
            if b > 0 {
                assert!(bucket_top(b - 1) < ns, "{ns} in bucket {b}");
                assert!(bucket_top(b) as f64 <= ns as f64 * 1.25 + 1.0, "{ns}");
            }
        }
        assert_eq!(
            bucket(u64::MAX),
            BUCKETS - 1,
            "the last bucket takes the rest"
        );
    }

    #[test]
    fn rounds_cut_where_the_round_changes_with_their_own_means() {
        let mut h = MatchHistory::new(Budgets::default());
        for _ in 0..3 {
            assert_eq!(h.record(Some(1), &frame(1_000, 400), false).closed, None);
        }
        let closed = h
            .record(Some(2), &frame(3_000, 3_000), true)
            .closed
            .unwrap();
        assert_eq!(closed.round, Some(1));
        assert_eq!((closed.ticks, closed.late, closed.mean_ns), (3, 0, 1_000));
        assert_eq!(closed.category_mean_ns[Category::Gameplay.index()], 400);
        assert_eq!(closed.category_mean_ns[Category::Network.index()], 600);
        h.record(Some(2), &frame(1_000, 0), false);
        let current = h.current().unwrap();
        assert_eq!(
            (current.round, current.ticks, current.late),
            (Some(2), 2, 1)
        );
        assert_eq!(current.mean_ns, 2_000);
        assert_eq!(current.p99_ns, 3_000, "never above the largest frame");
        let last = h.close_round().unwrap();
        assert_eq!(last.round, Some(2));
        assert_eq!(h.rounds().len(), 2);
        let whole = h.whole();
        assert_eq!((whole.round, whole.ticks, whole.late), (None, 5, 1));
        assert_eq!(whole.mean_ns, 7_000 / 5);
        assert_eq!(h.current(), None);
    }

    #[test]
    fn a_game_without_rounds_has_the_match_only() {
        let mut h = MatchHistory::new(Budgets::default());
        for _ in 0..10 {
            h.record(None, &frame(500, 100), false);
        }
        assert_eq!(h.close_round(), None);
        assert_eq!(h.rounds().len(), 0);
        assert_eq!(h.whole().ticks, 10);
        let mut token = String::new();
        h.write_cost(&mut token);
        assert_eq!(Cost::parse(&token).unwrap().rounds, []);
    }

    #[test]
    fn violations_count_each_tick_over_each_budget_exactly() {
        let mut budgets = Budgets::default();
        budgets.ns[Category::Gameplay.index()] = Some(500);
        budgets.ns[FRAME_SLOT] = Some(2_000);
        let mut h = MatchHistory::new(budgets);
        // Gameplay 500 is at the budget, not over it.
        let costs = [(1_000, 500), (1_000, 501), (2_001, 0), (3_000, 2_000)];
        let overs: Vec<u16> = costs
            .iter()
            .map(|&(t, g)| h.record(Some(1), &frame(t, g), false).over)
            .collect();
        let g = 1 << Category::Gameplay.index();
        let f = 1 << FRAME_SLOT;
        assert_eq!(overs, [0, g, f, g | f]);
        let r = h.close_round().unwrap();
        assert_eq!(r.violations[Category::Gameplay.index()], 2);
        assert_eq!(r.violations[FRAME_SLOT], 2);
        assert_eq!(r.violations.iter().sum::<u64>(), 4);
        assert_eq!(h.whole().violations, r.violations);
    }

    #[test]
    fn the_history_keeps_the_newest_rounds_without_growing() {
        let mut h = MatchHistory::new(Budgets::default());
        let reserved = h.rounds.capacity();
        for round in 1..=(MAX_ROUNDS as u32 + 6) {
            h.record(Some(round), &frame(1_000, 0), false);
        }
        h.close_round();
        assert_eq!(h.rounds().len(), MAX_ROUNDS);
        assert_eq!(h.dropped(), 6);
        assert_eq!(h.rounds().next().unwrap().round, Some(7));
        assert_eq!(h.rounds.capacity(), reserved, "never reallocated");
        assert_eq!(h.whole().ticks, MAX_ROUNDS as u64 + 6);
        h.clear();
        assert_eq!((h.rounds().len(), h.whole().ticks), (0, 0));
    }

    #[test]
    fn the_cost_token_reads_back() {
        let mut budgets = Budgets::default();
        budgets.ns[Category::Network.index()] = Some(100);
        let mut h = MatchHistory::new(budgets);
        h.record(Some(1), &frame(1_000, 10), false);
        h.record(Some(3), &frame(2_000, 20), true);
        h.close_round();
        let mut token = String::new();
        h.write_cost(&mut token);
        assert!(token.starts_with("m:2:1:1500:"), "{token}");
        assert!(!token.contains(' '));
        let cost = Cost::parse(&token).unwrap();
        assert_eq!(cost.whole, h.whole());
        assert_eq!(cost.rounds, h.rounds().copied().collect::<Vec<_>>());
        for bad in [
            "",
            "r1:1:0:1:1:0,0,0,0,0,0,0,0,0,0:0,0,0,0,0,0,0,0,0,0,0",
            "m:1",
        ] {
            assert_eq!(Cost::parse(bad), Err(CostError), "{bad:?}");
        }
        let extra = format!("{token}:7");
        assert_eq!(Cost::parse(&extra), Err(CostError));
    }
}
