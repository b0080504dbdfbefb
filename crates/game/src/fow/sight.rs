//! Line of sight between two players' sample points, and the remembered blockers that let
//! most segments of a hidden pair go without a trace (the module docs of [`crate::fow`] list
//! the shortcuts).

use crate::map::{Aabb, Map};
use crate::math::Vec3;

use super::points::NEAR_POINTS;
use super::{FowConfig, FowStats, Samples, POINTS_PER_PLAYER, SHORTCUT_SLACK_M};

/// Segments between two players' points.
const SEGMENTS_PER_PAIR: usize = POINTS_PER_PLAYER * POINTS_PER_PLAYER;
/// Boxes remembered as blockers while one viewer's pairs are traced.
const OCCLUDER_CACHE: usize = 8;

/// True when some segment from a point of `a` to a point of `b` (`a` the lower slot) meets
/// no box. Tries the segment `witness` first and leaves there the clear segment found; sweeps
/// a player's reach corners only when a segment or a bound needs them.
///
/// The shortcuts only ever skip segments that a remembered box blocks (in the conservative
/// test of [`Span::crosses`]); every clear verdict is a [`Map::trace_ray`] that met nothing,
/// so the answer is the trace's over the full sample points, swept or not.
#[allow(clippy::too_many_arguments)]
pub(super) fn line_of_sight(
    samples: &mut Samples,
    a: usize,
    b: usize,
    config: &FowConfig,
    map: &Map,
    witness: &mut u16,
    occluders: &mut Occluders,
    stats: &mut FowStats,
) -> bool {
    let first = usize::from(*witness) % SEGMENTS_PER_PAIR;
    let (fa, fb) = (first / POINTS_PER_PLAYER, first % POINTS_PER_PLAYER);
    // A witness on a reach corner not yet swept: the regions may settle the pair first.
    let witness_needs_sweep =
        (fa >= NEAR_POINTS && !samples.swept[a]) || (fb >= NEAR_POINTS && !samples.swept[b]);
    if witness_needs_sweep && walled_off(samples, a, b, occluders) {
        stats.pairs_walled_off += 1;
        return false;
    }
    if fa >= NEAR_POINTS {
        samples.sweep(a, config, map, stats);
    }
    if fb >= NEAR_POINTS {
        samples.sweep(b, config, map, stats);
    }
    if is_clear(samples, a, b, first, map, occluders, stats) {
        return true;
    }
    let unswept = !samples.swept[a] || !samples.swept[b];
    if !witness_needs_sweep && unswept && walled_off(samples, a, b, occluders) {
        stats.pairs_walled_off += 1;
        return false;
    }
    samples.sweep(a, config, map, stats);
    samples.sweep(b, config, map, stats);
    let b_corners = corners(&samples.bounds[b]);
    if occluders.hide_box(&corners(&samples.bounds[a]), &b_corners) {
        stats.pairs_walled_off += 1;
        return false;
    }
    for i in 0..POINTS_PER_PLAYER {
        let from = samples.points[a * POINTS_PER_PLAYER + i];
        if occluders.hide_box(&[from], &b_corners) {
            continue;
        }
        for j in 0..POINTS_PER_PLAYER {
            let s = i * POINTS_PER_PLAYER + j;
            if s != first && is_clear(samples, a, b, s, map, occluders, stats) {
                // Below SEGMENTS_PER_PAIR, which fits a u16.
                *witness = s as u16;
                return true;
            }
        }
    }
    false
}

/// True when one remembered box hides the region `b` could be in from the region `a` could
/// be in ([`Samples::region`]): every segment between their points, swept or not, is blocked.
fn walled_off(samples: &Samples, a: usize, b: usize, occluders: &Occluders) -> bool {
    occluders.len > 0
        && occluders.hide_box(&corners(&samples.region[a]), &corners(&samples.region[b]))
}

/// True when segment `s` (point `s / POINTS_PER_PLAYER` of `a` to point
/// `s % POINTS_PER_PLAYER` of `b`) meets no box; a box it meets is remembered. Both points
/// must be sampled.
fn is_clear(
    samples: &Samples,
    a: usize,
    b: usize,
    s: usize,
    map: &Map,
    occluders: &mut Occluders,
    stats: &mut FowStats,
) -> bool {
    let from = samples.points[a * POINTS_PER_PLAYER + s / POINTS_PER_PLAYER];
    let to = samples.points[b * POINTS_PER_PLAYER + s % POINTS_PER_PLAYER];
    stats.segments += 1;
    if occluders.block(&Span::new(from, to)) {
        return false;
    }
    stats.rays += 1;
    let d = to - from;
    match map.trace_ray(from, d, d.length()) {
        Some(hit) => {
            occluders.remember(hit.box_index, &map.boxes()[hit.box_index]);
            false
        }
        None => true,
    }
}

/// The eight corners of `b`.
pub(super) fn corners(b: &Aabb) -> [Vec3; 8] {
    std::array::from_fn(|k| {
        Vec3::new(
            if k & 1 == 0 { b.min.x } else { b.max.x },
            if k & 2 == 0 { b.min.y } else { b.max.y },
            if k & 4 == 0 { b.min.z } else { b.max.z },
        )
    })
}

/// A segment for the shortcut tests, parametrised from 0 at its start to 1 at its end.
pub(super) struct Span {
    origin: [f32; 3],
    /// 1 / (end − start) per axis; infinite along an axis the segment does not move on.
    inverse: [f32; 3],
}

impl Span {
    pub(super) fn new(from: Vec3, to: Vec3) -> Span {
        let d = to - from;
        Span {
            origin: from.to_array(),
            inverse: [1.0 / d.x, 1.0 / d.y, 1.0 / d.z],
        }
    }

    /// The slab test against a box already shrunk by [`SHORTCUT_SLACK_M`]: true when the
    /// segment passes through its interior. A segment that does so passes through the box
    /// itself, and [`Map::trace_ray`] reports a hit, whatever rounding does.
    pub(super) fn crosses(&self, shrunk: &Aabb) -> bool {
        let (lo, hi) = (shrunk.min.to_array(), shrunk.max.to_array());
        let (mut near, mut far) = (0.0_f32, 1.0_f32);
        for axis in 0..3 {
            let (o, inv) = (self.origin[axis], self.inverse[axis]);
            if inv.is_infinite() {
                // Parallel to this slab (or too nearly to tell): inside it or never.
                if o <= lo[axis] || o >= hi[axis] {
                    return false;
                }
                continue;
            }
            let t1 = (lo[axis] - o) * inv;
            let t2 = (hi[axis] - o) * inv;
            near = near.max(t1.min(t2));
            far = far.min(t1.max(t2));
        }
        near < far
    }
}

/// The eight segments from one point to the corners of a box, for [`Span::crosses`] on all
/// eight at once: lane by lane the same arithmetic, laid out for the vector unit.
struct Fan {
    origin: [f32; 3],
    /// 1 / (corner − origin), by axis then corner.
    inverse: [[f32; 8]; 3],
}

impl Fan {
    fn new(from: Vec3, to: &[Vec3; 8]) -> Fan {
        let o = from.to_array();
        let mut inverse = [[0.0; 8]; 3];
        for (l, q) in to.iter().enumerate() {
            let d = *q - from;
            for (axis, v) in d.to_array().into_iter().enumerate() {
                inverse[axis][l] = 1.0 / v;
            }
        }
        Fan { origin: o, inverse }
    }

    /// True when every segment of the fan [`Span::crosses`] `shrunk`.
    ///
    /// Without the parallel branch: along an axis a segment does not move on, its inverse is
    /// infinite, and the slab's two distances are −∞ and +∞ when the start is inside the slab
    /// (the lane's interval is unchanged, as the branch leaves it) and both +∞ or both −∞
    /// (or one NaN, which `min` and `max` pass over) when it is not, which empties the
    /// interval for good, as the branch's early false does.
    fn all_cross(&self, shrunk: &Aabb) -> bool {
        let (lo, hi) = (shrunk.min.to_array(), shrunk.max.to_array());
        let mut near = [0.0_f32; 8];
        let mut far = [1.0_f32; 8];
        for axis in 0..3 {
            let o = self.origin[axis];
            let (from_lo, from_hi) = (lo[axis] - o, hi[axis] - o);
            for l in 0..8 {
                let inv = self.inverse[axis][l];
                let t1 = from_lo * inv;
                let t2 = from_hi * inv;
                near[l] = near[l].max(t1.min(t2));
                far[l] = far[l].min(t1.max(t2));
            }
        }
        let mut crossed = 0u32;
        for l in 0..8 {
            crossed += u32::from(near[l] < far[l]);
        }
        crossed == 8
    }
}

/// Boxes that blocked recent segments of one viewer, shrunk for [`Span::crosses`]: the wall
/// that hides one corner of an enemy usually hides the rest of it, and the viewer's other
/// enemies behind it.
#[derive(Default)]
pub(super) struct Occluders {
    /// Indices in [`Map::boxes`], to remember each box once.
    index: [u32; OCCLUDER_CACHE],
    /// `None` for a box too thin to shrink.
    shrunk: [Option<Aabb>; OCCLUDER_CACHE],
    len: usize,
    /// Where the next box goes once full: the oldest is replaced.
    next: usize,
    /// The box that last blocked something, to seed the next trace of the same pair.
    recent: Option<u32>,
}

impl Occluders {
    /// True when a remembered box blocks `span`; that box moves one place forward, so the
    /// walls that hide most are tried first.
    fn block(&mut self, span: &Span) -> bool {
        let Some(k) = self.shrunk[..self.len]
            .iter()
            .position(|b| b.as_ref().is_some_and(|b| span.crosses(b)))
        else {
            return false;
        };
        self.recent = Some(self.index[k]);
        if k > 0 {
            self.shrunk.swap(k - 1, k);
            self.index.swap(k - 1, k);
        }
        true
    }

    /// True when one remembered box blocks every segment from the box with corners `from`
    /// (or from a single point) to the box with corners `to`. The points behind a box as
    /// seen from a point form a convex set, so blocking the segments between corners blocks
    /// all segments between the two boxes.
    ///
    /// The eight segments from each point of `from` are tested together against the boxes
    /// that blocked all segments before them; the first point no box hides ends the test.
    pub(super) fn hide_box(&self, from: &[Vec3], to: &[Vec3; 8]) -> bool {
        let mut live: u32 = 0;
        for (k, b) in self.shrunk[..self.len].iter().enumerate() {
            live |= u32::from(b.is_some()) << k;
        }
        for &p in from {
            if live == 0 {
                return false;
            }
            let fan = Fan::new(p, to);
            let mut rest = live;
            while rest != 0 {
                let k = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                if !self.shrunk[k].as_ref().is_some_and(|b| fan.all_cross(b)) {
                    live &= !(1 << k);
                }
            }
        }
        live != 0
    }

    /// Remembers box `index` of the map, `b`, as a blocker.
    pub(super) fn remember(&mut self, index: usize, b: &Aabb) {
        // Box indices are below the map's limit, far inside u32.
        let index = index as u32;
        self.recent = Some(index);
        if self.index[..self.len].contains(&index) {
            return;
        }
        let slack = Vec3::new(SHORTCUT_SLACK_M, SHORTCUT_SLACK_M, SHORTCUT_SLACK_M);
        let (min, max) = (b.min + slack, b.max - slack);
        // Too thin to shrink: remembered, so not traced again for it, but never a shortcut.
        let shrunk = (min.x < max.x && min.y < max.y && min.z < max.z).then_some(Aabb { min, max });
        let k = if self.len < OCCLUDER_CACHE {
            self.len += 1;
            self.len - 1
        } else {
            let k = self.next;
            self.next = (self.next + 1) % OCCLUDER_CACHE;
            k
        };
        self.index[k] = index;
        self.shrunk[k] = shrunk;
    }

    /// The box that last blocked a segment or was hit, as an index in [`Map::boxes`].
    pub(super) fn take_recent(&mut self) -> Option<u32> {
        self.recent.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BuiltinMap;
    use proptest::prelude::*;

    #[test]
    fn occluders_keep_the_newest_boxes_and_never_shrink_a_thin_one() {
        let mut o = Occluders::default();
        let unit = |i: usize| Aabb {
            min: Vec3::new(i as f32, 0.0, 0.0),
            max: Vec3::new(i as f32 + 0.5, 1.0, 1.0),
        };
        for i in 0..OCCLUDER_CACHE + 3 {
            o.remember(i, &unit(i));
            o.remember(i, &unit(i));
        }
        assert_eq!(o.len, OCCLUDER_CACHE);
        assert!(o.index.contains(&(OCCLUDER_CACHE as u32 + 2)));
        assert!(!o.index.contains(&0));
        let sheet = Aabb {
            min: Vec3::ZERO,
            max: Vec3::new(5.0, 0.015, 5.0),
        };
        o.remember(100, &sheet);
        assert!(o.index.contains(&100));
        assert!(o.shrunk.iter().any(Option::is_none));
    }

    fn shrunk(b: &Aabb) -> Aabb {
        let slack = Vec3::new(SHORTCUT_SLACK_M, SHORTCUT_SLACK_M, SHORTCUT_SLACK_M);
        Aabb {
            min: b.min + slack,
            max: b.max - slack,
        }
    }

    fn arena_point() -> impl Strategy<Value = Vec3> {
        (-35.0f32..35.0, -25.0f32..25.0, -1.0f32..13.0).prop_map(|(x, y, z)| Vec3::new(x, y, z))
    }

    proptest! {
        /// The shortcut test says "blocked" only where the trace hits: a segment through a
        /// shrunk box is never clear.
        #[test]
        fn a_span_through_a_shrunk_box_is_a_trace_that_hits(
            from in arena_point(),
            to in prop_oneof![
                arena_point(),
                // Along an axis, where the shortcut takes its parallel branch.
                (arena_point(), 0..3usize).prop_map(|(p, axis)| {
                    let mut a = p.to_array();
                    a[axis] = 0.0;
                    Vec3::from_array(a)
                }),
            ],
        ) {
            let map = BuiltinMap::Arena.load();
            let span = Span::new(from, to);
            let d = to - from;
            let traced = map.trace_ray(from, d, d.length());
            for b in map.boxes() {
                if span.crosses(&shrunk(b)) {
                    prop_assert!(traced.is_some(), "{:?} crosses {:?}", (from, to), b);
                }
            }
        }

        /// Blocking the segments between the corners of two boxes blocks the segments
        /// between any of their points.
        #[test]
        fn a_box_that_hides_the_corners_hides_the_inside(
            a in arena_point(),
            a_size in (0.0f32..3.0, 0.0f32..3.0, 0.0f32..3.0),
            b in arena_point(),
            b_size in (0.0f32..3.0, 0.0f32..3.0, 0.0f32..3.0),
            s in (0.0f32..1.0, 0.0f32..1.0, 0.0f32..1.0),
            t in (0.0f32..1.0, 0.0f32..1.0, 0.0f32..1.0),
        ) {
            let map = BuiltinMap::Arena.load();
            let cloud = |p: Vec3, size: (f32, f32, f32)| Aabb {
                min: p,
                max: p + Vec3::new(size.0, size.1, size.2),
            };
            let (ca, cb) = (cloud(a, a_size), cloud(b, b_size));
            let inside = |c: &Aabb, f: (f32, f32, f32)| {
                c.min + Vec3::new(
                    (c.max.x - c.min.x) * f.0,
                    (c.max.y - c.min.y) * f.1,
                    (c.max.z - c.min.z) * f.2,
                )
            };
            let (p, q) = (inside(&ca, s), inside(&cb, t));
            let mut o = Occluders::default();
            for (i, bx) in map.boxes().iter().enumerate() {
                o.len = 0;
                o.remember(i, bx);
                if o.hide_box(&corners(&ca), &corners(&cb)) {
                    prop_assert!(o.hide_box(&[p], &corners(&cb)));
                    let d = q - p;
                    prop_assert!(map.trace_ray(p, d, d.length()).is_some());
                }
            }
        }

        /// A fan says what its eight spans say, along an axis too.
        #[test]
        fn a_fan_crosses_where_its_spans_do(
            from in arena_point(),
            to in proptest::collection::vec(prop_oneof![
                arena_point(),
                (arena_point(), 0..3usize, arena_point()).prop_map(|(p, axis, q)| {
                    let mut a = p.to_array();
                    a[axis] = q.to_array()[axis];
                    Vec3::from_array(a)
                }),
            ], 8),
            axis_of in 0..3usize,
        ) {
            let map = BuiltinMap::Arena.load();
            let mut to: [Vec3; 8] = std::array::from_fn(|k| to[k]);
            // Some corners level with the start along an axis: parallel lanes.
            let mut level = to[0].to_array();
            level[axis_of] = from.to_array()[axis_of];
            to[1] = Vec3::from_array(level);
            let fan = Fan::new(from, &to);
            for b in map.boxes() {
                let s = shrunk(b);
                let spans = to.iter().all(|&q| Span::new(from, q).crosses(&s));
                prop_assert_eq!(fan.all_cross(&s), spans, "{:?} {:?}", from, b);
            }
        }

        /// Testing the segments once against all boxes gives the answer of testing the boxes
        /// one at a time.
        #[test]
        fn hiding_is_decided_box_by_box(
            boxes in proptest::collection::vec(0..31usize, 0..OCCLUDER_CACHE + 2),
            a in arena_point(),
            b in arena_point(),
        ) {
            let map = BuiltinMap::Arena.load();
            let mut o = Occluders::default();
            for &i in &boxes {
                o.remember(i, &map.boxes()[i % map.boxes().len()]);
            }
            let (from, to) = (corners(&Aabb { min: a, max: a + Vec3::new(1.0, 1.0, 2.0) }),
                              corners(&Aabb { min: b, max: b + Vec3::new(1.0, 1.0, 2.0) }));
            let one_by_one = o.shrunk[..o.len].iter().flatten().any(|s| {
                from.iter().all(|&p| to.iter().all(|&q| Span::new(p, q).crosses(s)))
            });
            prop_assert_eq!(o.hide_box(&from, &to), one_by_one);
        }
    }
}
