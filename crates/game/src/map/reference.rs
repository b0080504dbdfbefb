//! Test builds only: the hull trace done the plain way — no cell lists, no neighbourhoods,
//! every box looked at, the narrow phase as Quake III writes it — and the tests that hold the
//! fast paths to it bit for bit.
//!
//! Three things of the original trace decide results, and the reference keeps them:
//!
//! - Order. Two faces met at the same fraction (a player pressed into a corner meets both at
//!   fraction 0) go to the box tested first, and the normal and box reported differ. The grid
//!   decides that order: large boxes by index, then the others in row-major order of the
//!   first cell they share with the query, by index within a cell.
//! - Reach. A box whose cells the query's cells do not meet is never tested, even where a
//!   rounding error would let the sweep touch it.
//! - The early reject of a grown box beyond the swept points, which matters only when a
//!   coordinate is NaN (the swept points ignore it; the faces' distances do not).
//!
//! [`Map::trace_hull`], [`Near::trace_hull`](super::Near::trace_hull) and
//! [`Map::hull_overlaps`] check themselves against this module on every call in test builds,
//! so every unit test that moves a player, here and in `movement`, tests the fast paths too.

use super::grid::LARGE_BOX_CELLS;
use super::{Aabb, BuiltinMap, Hull, HullTrace, Map, SKIN_M};
use crate::math::Vec3;

/// The boxes of `map` whose cells meet those of a query spanning `min` to `max` in x and y,
/// and every large box, in the order the grid reports them.
fn boxes_in_grid_order(map: &Map, min: Vec3, max: Vec3) -> Vec<usize> {
    let q = map.grid.range(min, max);
    let mut keyed: Vec<(u32, u32, u32, usize)> = map
        .boxes
        .iter()
        .enumerate()
        .filter_map(|(index, b)| {
            let r = map.grid.range(b.min, b.max);
            let large = (r[1] - r[0] + 1) * (r[3] - r[2] + 1) > LARGE_BOX_CELLS;
            let reached = r[0] <= q[1] && q[0] <= r[1] && r[2] <= q[3] && q[2] <= r[3];
            if large {
                Some((0, 0, 0, index))
            } else if reached {
                Some((1, r[2].max(q[2]), r[0].max(q[0]), index))
            } else {
                None
            }
        })
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|k| k.3).collect()
}

/// [`Map::trace_hull`], the plain way.
pub(super) fn trace_hull(map: &Map, start: Vec3, end: Vec3, hull: Hull) -> HullTrace {
    let grow_lo = Vec3::new(hull.half_width, hull.half_width, hull.height);
    let grow_hi = Vec3::new(hull.half_width, hull.half_width, 0.0);
    let skin = Vec3::new(SKIN_M, SKIN_M, SKIN_M);
    let (lo, hi) = (start.min(end) - skin, start.max(end) + skin);
    // The box grown by the hull, unless it lies beyond the swept points.
    let grown = |b: &Aabb| {
        let g = Aabb {
            min: b.min - grow_lo,
            max: b.max + grow_hi,
        };
        let beyond = hi.x < g.min.x
            || lo.x > g.max.x
            || hi.y < g.min.y
            || lo.y > g.max.y
            || hi.z < g.min.z
            || lo.z > g.max.z;
        (!beyond).then_some(g)
    };
    let mut trace = HullTrace::unstopped(end);
    for index in boxes_in_grid_order(map, lo - grow_hi, hi + grow_hi) {
        if let Some(g) = grown(&map.boxes[index]) {
            if clip(start, end, &g, &mut trace) {
                trace.box_index = Some(index);
            }
        }
    }
    if map.barriers_raised {
        for (index, b) in map.barriers.iter().enumerate() {
            if let Some(g) = grown(b) {
                if clip(start, end, &g, &mut trace) {
                    trace.box_index = None;
                    trace.barrier_index = Some(index);
                }
            }
        }
    }
    if trace.fraction < 1.0 {
        trace.end = start + (end - start) * trace.fraction;
    }
    trace
}

/// [`Map::hull_overlaps`], the plain way.
pub(super) fn hull_overlaps(map: &Map, hull: Hull, origin: Vec3) -> bool {
    let body = hull.at(origin);
    let barriers: &[Aabb] = if map.barriers_raised {
        &map.barriers
    } else {
        &[]
    };
    map.boxes.iter().chain(barriers).any(|b| b.overlaps(&body))
}

/// Quake III's `CM_TraceThroughBrush` for one grown box, face by face.
pub(super) fn clip(start: Vec3, end: Vec3, grown: &Aabb, trace: &mut HullTrace) -> bool {
    let (s, e) = (start.to_array(), end.to_array());
    let (lo, hi) = (grown.min.to_array(), grown.max.to_array());
    let mut enter = -1.0_f32;
    let mut leave = 1.0_f32;
    let mut normal = Vec3::ZERO;
    let mut starts_out = false;
    for axis in 0..3 {
        for outward in [-1.0_f32, 1.0] {
            let (d1, d2) = if outward > 0.0 {
                (s[axis] - hi[axis], e[axis] - hi[axis])
            } else {
                (lo[axis] - s[axis], lo[axis] - e[axis])
            };
            if d1 > 0.0 {
                starts_out = true;
            }
            if d1 > 0.0 && (d2 >= SKIN_M || d2 >= d1) {
                return false;
            }
            if d1 <= 0.0 && d2 <= 0.0 {
                continue;
            }
            if d1 > d2 {
                let f = ((d1 - SKIN_M) / (d1 - d2)).max(0.0);
                if f > enter {
                    enter = f;
                    let mut n = [0.0; 3];
                    n[axis] = outward;
                    normal = Vec3::from_array(n);
                }
            } else {
                let f = ((d1 + SKIN_M) / (d1 - d2)).min(1.0);
                leave = leave.min(f);
            }
        }
    }
    if !starts_out {
        trace.start_solid = true;
        return false;
    }
    if enter < leave && enter > -1.0 && enter < trace.fraction {
        trace.fraction = enter;
        trace.normal = normal;
        return true;
    }
    false
}

/// A trace as exact bits: `-0.0` is not `0.0` here, and a NaN equals the same NaN.
type TraceBits = ([u32; 7], Option<usize>, Option<usize>, bool);

fn bits(t: &HullTrace) -> TraceBits {
    let [ex, ey, ez] = t.end.to_bits();
    let [nx, ny, nz] = t.normal.to_bits();
    (
        [t.fraction.to_bits(), ex, ey, ez, nx, ny, nz],
        t.box_index,
        t.barrier_index,
        t.start_solid,
    )
}

/// Panics unless `got` is, bit for bit, what the reference gives for the same trace.
pub(super) fn assert_same_trace(map: &Map, start: Vec3, end: Vec3, hull: Hull, got: &HullTrace) {
    let want = trace_hull(map, start, end, hull);
    assert_eq!(
        bits(got),
        bits(&want),
        "trace_hull({start:?}, {end:?}, {hull:?}) is {got:?}; the reference gives {want:?}"
    );
}

mod tests {
    use super::*;
    use proptest::prelude::*;
    use tickforge_testkit::SimRng;

    const STANDING: Hull = Hull {
        half_width: 0.4,
        height: 1.8,
    };
    const CROUCHED: Hull = Hull {
        half_width: 0.4,
        height: 1.4,
    };

    /// A float in `lo..hi`.
    fn uniform(rng: &mut SimRng, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * rng.unit() as f32
    }

    /// A point where traces get interesting: anywhere in the bounds, on a cell boundary, or
    /// against a face of some box (touching it, a skin or half a skin off it, or just inside)
    /// as a player resting on a floor or pressed into a wall is.
    fn point(rng: &mut SimRng, map: &Map, hull: Hull) -> Vec3 {
        let b = map.bounds();
        let mut p = Vec3::new(
            uniform(rng, b.min.x - 1.0, b.max.x + 1.0),
            uniform(rng, b.min.y - 1.0, b.max.y + 1.0),
            uniform(rng, b.min.z - 1.0, b.max.z + 1.0),
        );
        match rng.below(4) {
            0 => p,
            1 => {
                // On a grid line.
                let g = &map.grid;
                let col = rng.below(u64::from(g.cells[0]) + 1) as f32;
                let row = rng.below(u64::from(g.cells[1]) + 1) as f32;
                p.x = g.min[0] + col * g.cell_m;
                p.y = g.min[1] + row * g.cell_m;
                p
            }
            _ => {
                let boxes = &map.boxes;
                let target = boxes[rng.below(boxes.len() as u64) as usize];
                let grown = Aabb {
                    min: target.min - Vec3::new(hull.half_width, hull.half_width, hull.height),
                    max: target.max + Vec3::new(hull.half_width, hull.half_width, 0.0),
                };
                let (lo, hi) = (grown.min.to_array(), grown.max.to_array());
                let mut a = [0.0; 3];
                for (axis, v) in a.iter_mut().enumerate() {
                    *v = uniform(rng, lo[axis], hi[axis]);
                }
                let axis = rng.below(3) as usize;
                let off = [0.0, SKIN_M, 0.5 * SKIN_M, 2.0 * SKIN_M, -SKIN_M][rng.below(5) as usize];
                a[axis] = if rng.chance(0.5) {
                    hi[axis] + off
                } else {
                    lo[axis] - off
                };
                Vec3::from_array(a)
            }
        }
    }

    /// A move as `pmove` makes them: a tick's run or fall, a ground probe, a step up or down,
    /// no move at all, or a long sweep.
    fn delta(rng: &mut SimRng) -> Vec3 {
        let dt = 1.0 / 128.0;
        match rng.below(6) {
            0 => Vec3::new(
                uniform(rng, -10.0, 10.0) * dt,
                uniform(rng, -10.0, 10.0) * dt,
                0.0,
            ),
            1 => Vec3::new(0.0, 0.0, -2.0 * SKIN_M),
            2 => Vec3::new(0.0, 0.0, uniform(rng, -0.45, 0.45)),
            3 => Vec3::ZERO,
            4 => Vec3::new(
                uniform(rng, -20.0, 20.0) * dt,
                uniform(rng, -20.0, 20.0) * dt,
                uniform(rng, -20.0, 20.0) * dt,
            ),
            _ => Vec3::new(
                uniform(rng, -30.0, 30.0),
                uniform(rng, -30.0, 30.0),
                uniform(rng, -5.0, 5.0),
            ),
        }
    }

    /// Boxes from 5 cm to 12 m on half-metre steps, so that faces fall on cell boundaries,
    /// over and around a floor: many cells hold several boxes, and many boxes span cells.
    fn crowded_map(rng: &mut SimRng) -> Map {
        let mut text = String::from(
            "spawn attackers 0 0 0 0\nbox -40 -40 -1 40 40 0\nbox -40 -40 8 40 40 9\n",
        );
        for _ in 0..300 {
            let (x, y) = (
                rng.below(160) as f32 * 0.5 - 40.0,
                rng.below(160) as f32 * 0.5 - 40.0,
            );
            let w = [0.05, 0.5, 1.0, 4.0, 12.0][rng.below(5) as usize];
            let d = [0.05, 0.5, 1.0, 4.0, 12.0][rng.below(5) as usize];
            let z = rng.below(8) as f32 * 0.5;
            let h = [0.4, 1.0, 3.0][rng.below(3) as usize];
            text += &format!("box {x} {y} {z} {} {} {}\n", x + w, y + d, z + h);
        }
        Map::parse(&text).unwrap()
    }

    fn maps() -> Vec<(&'static str, Map)> {
        let arena = BuiltinMap::Arena.load();
        vec![
            ("arena, barriers raised", arena.with_barriers(true)),
            ("arena", arena),
            ("flat2km", BuiltinMap::Flat2km.load()),
            ("crowded", crowded_map(&mut SimRng::new(7))),
        ]
    }

    #[test]
    fn seeded_hull_traces_match_the_reference_bit_for_bit() {
        let mut rng = SimRng::new(0x7ace);
        for (name, map) in maps() {
            let (mut hits, mut ties) = (0, 0);
            for _ in 0..20_000 {
                let hull = if rng.chance(0.5) { STANDING } else { CROUCHED };
                let start = point(&mut rng, &map, hull);
                let end = start + delta(&mut rng);
                let got = map.trace_hull(start, end, hull);
                assert_same_trace(&map, start, end, hull, &got);
                hits += usize::from(got.fraction < 1.0);
                ties += usize::from(got.fraction == 0.0);
                assert_eq!(
                    map.hull_overlaps(hull, start),
                    hull_overlaps(&map, hull, start),
                    "{name}: {start:?}"
                );
            }
            // The draws reach faces often, and meet them at once (where order decides) too.
            assert!(
                hits > 1_000 && ties > 200,
                "{name}: {hits} hits, {ties} at 0"
            );
        }
    }

    /// NaN, infinities and huge values where coordinates go: the fast paths treat them as
    /// the reference does.
    #[test]
    fn odd_values_trace_as_the_reference_does() {
        let odd = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e30,
            -1e30,
            -0.0,
        ];
        let mut rng = SimRng::new(0x0dd);
        for (name, map) in maps() {
            for _ in 0..4_000 {
                let hull = if rng.chance(0.5) { STANDING } else { CROUCHED };
                let mut start = point(&mut rng, &map, hull).to_array();
                let mut end = (Vec3::from_array(start) + delta(&mut rng)).to_array();
                let spoilt = if rng.chance(0.5) {
                    &mut start
                } else {
                    &mut end
                };
                spoilt[rng.below(3) as usize] = odd[rng.below(odd.len() as u64) as usize];
                let (start, end) = (Vec3::from_array(start), Vec3::from_array(end));
                assert_same_trace(&map, start, end, hull, &map.trace_hull(start, end, hull));
                let near = map.near(hull.at(start), hull);
                assert_same_trace(&map, start, end, hull, &near.trace_hull(start, end));
                assert_eq!(
                    map.hull_overlaps(hull, start),
                    hull_overlaps(&map, hull, start),
                    "{name}: {start:?}"
                );
            }
        }
    }

    /// Neighbourhoods from a tick's few decimetres to 80 m, and sweeps within them and beyond:
    /// within, a neighbourhood's few boxes give the grid's result; beyond, or when too many
    /// boxes are near to hold, the grid gives it.
    #[test]
    fn traces_through_a_neighbourhood_match_the_reference() {
        let mut rng = SimRng::new(0x6ea2);
        for (name, map) in maps() {
            let (mut covered, mut beyond, mut overfull) = (0, 0, 0);
            for _ in 0..2_000 {
                let hull = if rng.chance(0.5) { STANDING } else { CROUCHED };
                let centre = point(&mut rng, &map, hull);
                let reach = [0.3, 0.8, 2.0, 40.0][rng.below(4) as usize];
                let near = map.near(
                    Aabb {
                        min: centre - Vec3::new(reach, reach, reach),
                        max: centre + Vec3::new(reach, reach, reach),
                    },
                    hull,
                );
                overfull += usize::from(!near.holds_every_box());
                for _ in 0..8 {
                    let start = if rng.chance(0.8) {
                        let r = reach * 0.9;
                        centre
                            + Vec3::new(
                                uniform(&mut rng, -r, r),
                                uniform(&mut rng, -r, r),
                                uniform(&mut rng, -r, r),
                            )
                    } else {
                        point(&mut rng, &map, hull)
                    };
                    let end = start + delta(&mut rng);
                    let got = near.trace_hull(start, end);
                    assert_same_trace(&map, start, end, hull, &got);
                    if near.covers(start, end) {
                        covered += 1;
                    } else {
                        beyond += 1;
                    }
                }
            }
            assert!(
                covered > 5_000 && beyond > 1_000,
                "{name}: {covered} within, {beyond} not"
            );
            if name == "crowded" {
                assert!(overfull > 100, "{name}: {overfull} neighbourhoods too full");
            }
        }
    }

    #[test]
    fn a_query_over_the_whole_map_reaches_every_box_once() {
        let map = crowded_map(&mut SimRng::new(7));
        let b = map.bounds();
        let mut order = boxes_in_grid_order(&map, b.min, b.max);
        order.sort_unstable();
        assert_eq!(order, (0..map.boxes().len()).collect::<Vec<_>>());
    }

    /// A map of up to 40 boxes, from pebbles to ones larger than the grid's large-box limit,
    /// scattered over 100 m, some of them on grid lines.
    fn scattered_map() -> impl Strategy<Value = Map> {
        proptest::collection::vec(
            (
                -50.0f32..50.0,
                -50.0f32..50.0,
                -3.0f32..3.0,
                prop_oneof![0.05f32..40.0, Just(4.0), Just(8.0)],
                prop_oneof![0.05f32..40.0, Just(4.0), Just(8.0)],
                0.1f32..4.0,
                any::<bool>(),
            ),
            1..40,
        )
        .prop_map(|boxes| {
            let mut text = String::from("spawn attackers 0 0 0 0\n");
            for (x, y, z, w, d, h, snap) in boxes {
                let (x, y) = if snap { (x.round(), y.round()) } else { (x, y) };
                text += &format!("box {x} {y} {z} {} {} {}\n", x + w, y + d, z + h);
            }
            Map::parse(&text).unwrap()
        })
    }

    proptest! {
        #[test]
        fn on_scattered_maps_hull_traces_match_the_reference(
            map in scattered_map(),
            seed in any::<u64>(),
        ) {
            let mut rng = SimRng::new(seed);
            for _ in 0..64 {
                let hull = if rng.chance(0.5) { STANDING } else { CROUCHED };
                let start = point(&mut rng, &map, hull);
                let end = start + delta(&mut rng);
                assert_same_trace(&map, start, end, hull, &map.trace_hull(start, end, hull));
                prop_assert_eq!(map.hull_overlaps(hull, start), hull_overlaps(&map, hull, start));
            }
        }
    }
}
