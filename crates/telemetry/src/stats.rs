//! Aggregation of frame records: histograms and per-category means.

use hdrhistogram::Histogram;

use crate::report::{CategoryMs, Percentiles, PhaseMs, SlowFrame};
use crate::{Category, FrameRecord, Phase};

/// Highest value a duration histogram tracks without clamping: 60 s in nanoseconds.
const MAX_TRACKED_NS: u64 = 60_000_000_000;

/// A histogram of durations in nanoseconds, 3 significant digits, reported in milliseconds.
///
/// Its buckets are allocated once at creation; recording never allocates.
#[derive(Clone)]
pub struct DurationHistogram {
    hist: Histogram<u64>,
    sum_ns: u128,
}

impl Default for DurationHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl DurationHistogram {
    /// An empty histogram covering 1 ns to 60 s.
    pub fn new() -> Self {
        let hist = Histogram::new_with_bounds(1, MAX_TRACKED_NS, 3)
            .expect("constant histogram bounds are valid");
        DurationHistogram { hist, sum_ns: 0 }
    }

    /// Records one duration; values beyond 60 s are clamped.
    pub fn record_ns(&mut self, ns: u64) {
        self.hist.saturating_record(ns.clamp(1, MAX_TRACKED_NS));
        self.sum_ns += u128::from(ns);
    }

    /// Forgets every value recorded; keeps the buckets (never allocates).
    pub fn reset(&mut self) {
        self.hist.reset();
        self.sum_ns = 0;
    }

    /// Number of values recorded.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Exact mean of what was recorded, in milliseconds (not bucketed).
    pub fn mean_ms(&self) -> Option<f64> {
        (!self.is_empty()).then(|| self.sum_ns as f64 / self.len() as f64 / 1e6)
    }

    /// Value at quantile `q` (0..=1), in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        (!self.is_empty()).then(|| self.hist.value_at_quantile(q) as f64 / 1e6)
    }

    /// p50, p90, p99, max and mean in milliseconds, or `None` when empty.
    pub fn percentiles(&self) -> Option<Percentiles> {
        Some(Percentiles {
            p50: self.quantile_ms(0.50)?,
            p90: self.quantile_ms(0.90)?,
            p99: self.quantile_ms(0.99)?,
            max: self.hist.max() as f64 / 1e6,
            mean: self.mean_ms()?,
        })
    }

    /// Adds every value of `other` to this histogram.
    pub fn merge(&mut self, other: &DurationHistogram) {
        // Both cover the same fixed range, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
        self.sum_ns += other.sum_ns;
    }
}

/// Match frame records aggregated over a run.
#[derive(Clone, Default)]
pub struct FrameStats {
    frames: DurationHistogram,
    category_sum_ns: [u128; Category::COUNT],
    phase_sum_ns: [u128; Phase::COUNT],
    entered: u16,
}

impl FrameStats {
    /// Empty statistics.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one frame.
    pub fn record(&mut self, frame: &FrameRecord) {
        self.frames.record_ns(frame.total_ns);
        for (sum, ns) in self.category_sum_ns.iter_mut().zip(frame.category_ns) {
            *sum += u128::from(ns);
        }
        for (sum, ns) in self.phase_sum_ns.iter_mut().zip(frame.phase_ns) {
            *sum += u128::from(ns);
        }
        self.entered |= frame.entered;
    }

    /// Adds every frame of `other`.
    pub fn merge(&mut self, other: &FrameStats) {
        self.frames.merge(&other.frames);
        for (a, b) in self.category_sum_ns.iter_mut().zip(other.category_sum_ns) {
            *a += b;
        }
        for (a, b) in self.phase_sum_ns.iter_mut().zip(other.phase_sum_ns) {
            *a += b;
        }
        self.entered |= other.entered;
    }

    /// The histogram of whole-frame costs.
    pub fn frames(&self) -> &DurationHistogram {
        &self.frames
    }

    /// Mean milliseconds per frame for each category; `None` for a category no code has
    /// entered (not instrumented, or no such work exists yet), never a made-up zero.
    pub fn category_means_ms(&self) -> CategoryMs {
        let n = self.frames.len();
        CategoryMs::from_fn(|c| {
            let entered = self.entered & (1 << c.index()) != 0;
            (entered && n > 0).then(|| self.category_sum_ns[c.index()] as f64 / n as f64 / 1e6)
        })
    }

    /// Mean milliseconds per frame for each phase.
    pub fn phase_means_ms(&self) -> PhaseMs {
        let n = self.frames.len();
        PhaseMs::from_fn(|p| (n > 0).then(|| self.phase_sum_ns[p.index()] as f64 / n as f64 / 1e6))
    }
}

/// Frames [`SlowestFrames`] keeps.
pub const SLOWEST_FRAMES: usize = 16;

/// One match frame and where it ran, as [`SlowestFrames`] keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct TaggedFrame {
    /// What it cost, by category and phase.
    record: FrameRecord,
    /// The match it was a tick of.
    match_id: u32,
    /// When it started, from the measured window's start, nanoseconds.
    at_ns: u64,
    /// Whether it started late.
    late: bool,
}

/// The slowest match frames of a run with where each one's time went: what makes a p99
/// what it is, where the means only say what a frame usually costs. A fixed array:
/// recording never allocates, and a frame no slower than the fastest kept costs one
/// comparison.
#[derive(Clone, Copy, Debug)]
pub struct SlowestFrames {
    kept: [TaggedFrame; SLOWEST_FRAMES],
    len: usize,
    /// Of `kept`, once full, the fastest: the one the next slower frame replaces.
    fastest: usize,
}

impl Default for SlowestFrames {
    fn default() -> Self {
        SlowestFrames {
            kept: [TaggedFrame::default(); SLOWEST_FRAMES],
            len: 0,
            fastest: 0,
        }
    }
}

/// How a frame ranks for [`SlowestFrames`]: the slower higher, and of equal ones the one
/// that started first.
fn rank(total_ns: u64, at_ns: u64) -> (u64, std::cmp::Reverse<u64>) {
    (total_ns, std::cmp::Reverse(at_ns))
}

impl TaggedFrame {
    fn rank(&self) -> (u64, std::cmp::Reverse<u64>) {
        rank(self.record.total_ns, self.at_ns)
    }
}

impl SlowestFrames {
    /// Keeps the frame `record` of match `match_id`, started `at_ns` into the window, if it
    /// is among the [`SLOWEST_FRAMES`] slowest so far (of equal ones, the earliest). Only a
    /// frame kept is copied.
    pub fn record(&mut self, record: &FrameRecord, match_id: u32, at_ns: u64, late: bool) {
        let full = self.len == SLOWEST_FRAMES;
        if full && rank(record.total_ns, at_ns) <= self.kept[self.fastest].rank() {
            return;
        }
        self.keep(TaggedFrame {
            record: *record,
            match_id,
            at_ns,
            late,
        });
    }

    /// Puts `frame` in place of the fastest kept, or beside them while there is room.
    fn keep(&mut self, frame: TaggedFrame) {
        if self.len < SLOWEST_FRAMES {
            self.kept[self.len] = frame;
            self.len += 1;
        } else if frame.rank() > self.kept[self.fastest].rank() {
            self.kept[self.fastest] = frame;
        } else {
            return;
        }
        if self.len == SLOWEST_FRAMES {
            self.fastest = (0..SLOWEST_FRAMES)
                .min_by_key(|&i| self.kept[i].rank())
                .expect("not empty");
        }
    }

    /// Keeps the slowest of both, of equal ones the earliest: another worker's frames of
    /// the same window.
    pub fn merge(&mut self, other: &SlowestFrames) {
        for f in other.frames() {
            self.keep(*f);
        }
    }

    /// The frames kept, in no order.
    fn frames(&self) -> &[TaggedFrame] {
        &self.kept[..self.len]
    }

    /// The report's list: slowest first (of equal frames, the earlier first), each
    /// category `None` where the frame did not enter it.
    pub fn report(&self) -> Vec<SlowFrame> {
        let mut frames = self.frames().to_vec();
        frames.sort_by_key(|f| std::cmp::Reverse(f.rank()));
        frames
            .iter()
            .map(|f| {
                let r = &f.record;
                let ms = |ns: u64| ns as f64 / 1e6;
                SlowFrame {
                    match_id: f.match_id,
                    at_s: f.at_ns as f64 / 1e9,
                    frame_ms: ms(r.total_ns),
                    late: f.late,
                    phases_ms: PhaseMs::from_fn(|p| Some(ms(r.phase_ns[p.index()]))),
                    categories_ms: CategoryMs::from_fn(|c| {
                        (r.entered & (1 << c.index()) != 0).then(|| ms(r.category_ns[c.index()]))
                    }),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_values() {
        let mut h = DurationHistogram::new();
        for ms in 1..=100u64 {
            h.record_ns(ms * 1_000_000);
        }
        let p = h.percentiles().unwrap();
        assert!((p.p50 - 50.0).abs() < 0.1, "{p:?}");
        assert!((p.p99 - 99.0).abs() < 0.1, "{p:?}");
        assert!((p.max - 100.0).abs() < 0.1, "{p:?}");
        assert!((p.mean - 50.5).abs() < 1e-9, "{p:?}");
        assert!(DurationHistogram::new().percentiles().is_none());
    }

    #[test]
    fn category_means_are_null_when_never_entered() {
        let mut stats = FrameStats::new();
        let mut r = FrameRecord::default();
        r.add(Category::Network, Phase::Receive, 2_000_000);
        r.add(Category::Movement, Phase::Simulate, 1_000_000);
        stats.record(&r);
        stats.record(&r);
        let c = stats.category_means_ms();
        assert_eq!(c.network, Some(2.0));
        assert_eq!(c.movement, Some(1.0));
        assert_eq!(c.fow, None);
        let p = stats.phase_means_ms();
        assert_eq!(p.receive, Some(2.0));
        assert_eq!(p.replicate, Some(0.0));
    }

    /// A frame of `total_ns`, all of it replication.
    fn frame(total_ns: u64) -> FrameRecord {
        let mut record = FrameRecord::default();
        record.add(Category::Replication, Phase::Replicate, total_ns);
        record
    }

    #[test]
    fn the_slowest_frames_are_kept_whatever_order_they_come_in() {
        // 1,000 frames of 1..=1000 µs in a scrambled order: the 16 slowest are 985..=1000.
        let mut kept = SlowestFrames::default();
        for i in 0..1000u64 {
            let us = (i * 337) % 1000 + 1;
            kept.record(&frame(us * 1000), 7, i, false);
        }
        let report = kept.report();
        let got: Vec<f64> = report.iter().map(|f| f.frame_ms).collect();
        let want: Vec<f64> = (985..=1000).rev().map(|us| us as f64 / 1000.0).collect();
        assert_eq!(got, want);
        // Each with where its time went, and nothing made up for what it did not enter.
        assert_eq!(report[0].categories_ms.replication, Some(1.0));
        assert_eq!(report[0].categories_ms.fow, None);
        assert_eq!(report[0].phases_ms.replicate, Some(1.0));
        assert_eq!(report[0].phases_ms.send, Some(0.0));
        assert_eq!(report[0].match_id, 7);
    }

    #[test]
    fn merged_slowest_frames_are_the_slowest_of_both_and_ties_keep_the_earlier() {
        let (mut a, mut b) = (SlowestFrames::default(), SlowestFrames::default());
        for i in 0..20u64 {
            a.record(&frame(i * 10), 7, i, false);
            b.record(&frame(i * 10 + 5), 7, 100 + i, false);
        }
        a.merge(&b);
        let got: Vec<u64> = a
            .report()
            .iter()
            .map(|f| (f.frame_ms * 1e6).round() as u64)
            .collect();
        let want: Vec<u64> = (0..16).map(|k| 195 - 5 * k).collect();
        assert_eq!(got, want);
        // Ties across workers: of two frames as slow as the fastest kept, the earlier stays,
        // whichever worker had it.
        let (mut a, mut b) = (SlowestFrames::default(), SlowestFrames::default());
        for i in 0..16u64 {
            a.record(&frame(100 + i), 7, 50 + i, false);
        }
        b.record(&frame(100), 7, 10, false);
        a.merge(&b);
        let fastest = a.report().last().map(|f| (f.frame_ms * 1e6).round() as u64);
        assert_eq!(fastest, Some(100));
        let start_ns = |f: &SlowestFrames| f.report().last().map(|f| (f.at_s * 1e9).round() as u64);
        assert_eq!(start_ns(&a), Some(10));
        // And within one worker: a later frame as slow as the fastest kept is not kept.
        a.record(&frame(100), 7, 900, false);
        assert_eq!(start_ns(&a), Some(10));
        // Fewer frames than it holds: all of them, slowest first, equal ones earliest first.
        let mut few = SlowestFrames::default();
        few.record(&frame(3), 7, 2, false);
        few.record(&frame(5), 7, 1, false);
        few.record(&frame(3), 7, 0, false);
        let order: Vec<f64> = few.report().iter().map(|f| f.at_s * 1e9).collect();
        assert_eq!(order, vec![1.0, 0.0, 2.0]);
    }

    #[test]
    fn merge_adds_counts_and_sums() {
        let mut a = FrameStats::new();
        let mut b = FrameStats::new();
        let mut r = FrameRecord::default();
        r.add(Category::Gameplay, Phase::Simulate, 4_000);
        a.record(&r);
        b.record(&r);
        b.record(&r);
        a.merge(&b);
        assert_eq!(a.frames().len(), 3);
        assert_eq!(a.category_means_ms().gameplay, Some(0.004));
    }
}
