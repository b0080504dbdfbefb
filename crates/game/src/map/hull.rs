//! Hull traces: the player box swept through the map as a point through boxes grown by the
//! hull, Quake III's `CM_TraceThroughBrush` specialised to boxes. One trace at a time goes
//! through the grid ([`Map::trace_hull`]); a player's tick, which sweeps its hull several times
//! through the same metre or so, finds its boxes once and traces through them ([`Near`]).
//!
//! Both give the same result to the bit. Where a sweep enters two boxes at the same fraction
//! (pressed into a corner, it enters both at 0) the first one tested wins, and its normal is
//! the trace's: [`Map::trace_hull`] tests boxes in the order the grid reports them, and a
//! [`Near`] ranks equal entries by that order ([`Grid::report_order`]) rather than testing in
//! it.
//!
//! [`Grid::report_order`]: super::grid::Grid::report_order

use std::ops::ControlFlow;

use super::grid::{Corners, ReportOrder};
use super::{Aabb, Hull, HullTrace, Map, MAX_BARRIERS, MAX_BOXES, SKIN_M};
use crate::math::{BitIter, Vec3};

/// Most boxes a [`Near`] holds; a neighbourhood with more sends its traces to the grid. At
/// most 32, the bits of a mask.
const NEAR_MAX_BOXES: usize = 32;
// A `Near` holds box indices in 16 bits, and raised barriers as the bits of a `u64`.
const _: () = assert!(MAX_BOXES <= 1 << 16 && MAX_BARRIERS <= 64 && NEAR_MAX_BOXES <= 32);

/// One hull sweep's constants: the feet move as a point from `start` to `end` against boxes
/// grown by the hull. Each is four lanes, x, y, z and a zero, so that one box's three axes
/// are tested at once.
pub(super) struct Sweep {
    start: [f32; 4],
    end: [f32; 4],
    /// The points the feet sweep, padded by the skin: the lower corner and the upper.
    lo: [f32; 4],
    hi: [f32; 4],
    /// Added to a box's lower corner to grow it by the hull: `[-w, -w, -height, 0]`.
    grow_lo: [f32; 4],
    /// Added to a box's upper corner: `[w, w, 0, 0]`.
    grow_hi: [f32; 4],
}

/// What a sweep does to one box.
pub(super) enum Touch {
    /// Nothing: the box is beyond the swept points, or the move is wholly in front of one of
    /// its faces or moves away from it.
    Misses,
    /// Starts inside the box, which then lets it leave.
    StartsInside,
    /// Enters the box at this fraction of the move, through the face with this outward
    /// normal.
    Enters(f32, Vec3),
}

/// The six faces of [`Corners`] in the order a sweep clips against them, as (lane, normal
/// axis, outward sign): -x, +x, -y, +y, -z, +z. Between faces entered at the same fraction the
/// first wins, so the order is part of the result.
const FACES: [(usize, usize, f32); 6] = [
    (0, 0, -1.0),
    (4, 0, 1.0),
    (1, 1, -1.0),
    (5, 1, 1.0),
    (2, 2, -1.0),
    (6, 2, 1.0),
];

fn lanes(v: Vec3) -> [f32; 4] {
    [v.x, v.y, v.z, 0.0]
}

impl Sweep {
    pub(super) fn new(start: Vec3, end: Vec3, hull: Hull) -> Sweep {
        let (w, h) = (hull.half_width, hull.height);
        let skin = Vec3::new(SKIN_M, SKIN_M, SKIN_M);
        Sweep {
            start: lanes(start),
            end: lanes(end),
            lo: lanes(start.min(end) - skin),
            hi: lanes(start.max(end) + skin),
            grow_lo: [-w, -w, -h, 0.0],
            grow_hi: [w, w, 0.0, 0.0],
        }
    }

    /// The x-y region whose boxes, grown, may reach the swept points: what to ask the grid.
    pub(super) fn query(&self) -> (Vec3, Vec3) {
        let (lo, hi, w) = (&self.lo, &self.hi, &self.grow_hi);
        (
            Vec3::new(lo[0] - w[0], lo[1] - w[1], lo[2]),
            Vec3::new(hi[0] + w[0], hi[1] + w[1], hi[2]),
        )
    }

    /// True when this sweep's points lie within `outer`'s (NaN lies nowhere).
    fn within(&self, outer: &Sweep) -> bool {
        let mut inside = true;
        for axis in 0..4 {
            inside &= (self.lo[axis] >= outer.lo[axis]) & (self.hi[axis] <= outer.hi[axis]);
        }
        inside
    }

    /// True when the box with `corners`, grown by the hull, lies beyond the swept points on
    /// some axis.
    #[inline(always)]
    fn is_far(&self, corners: &Corners) -> bool {
        let mut far = false;
        for axis in 0..4 {
            let lo = corners[axis] + self.grow_lo[axis];
            let hi = corners[axis + 4] + self.grow_hi[axis];
            far |= (lo > self.hi[axis]) | (self.lo[axis] > hi);
        }
        far
    }

    /// True when this sweep misses the box with `corners`, grown by the hull: the box lies
    /// beyond the swept points, or the move is wholly in front of one of its faces or moves
    /// away from it. Most boxes asked about are missed, so every face is tested alike and
    /// without branching.
    #[inline(always)]
    fn misses(&self, corners: &Corners) -> bool {
        let (s, e) = (&self.start, &self.end);
        // Wholly in front of a face whose distances in front of it are `d1` at the start and
        // `d2` at the end, or moving away from it.
        let in_front = |d1: f32, d2: f32| (d1 > 0.0) & ((d2 >= SKIN_M) | (d2 >= d1));
        let mut missed = false;
        for axis in 0..4 {
            let lo = corners[axis] + self.grow_lo[axis];
            let hi = corners[axis + 4] + self.grow_hi[axis];
            missed |= (lo > self.hi[axis]) | (self.lo[axis] > hi);
            missed |= in_front(lo - s[axis], lo - e[axis]);
            missed |= in_front(s[axis] - hi, e[axis] - hi);
        }
        missed
    }

    /// What this sweep does to the box with `corners`, grown by the hull.
    pub(super) fn touch(&self, corners: &Corners) -> Touch {
        if self.misses(corners) {
            Touch::Misses
        } else {
            self.touch_unmissed(corners)
        }
    }

    /// [`Sweep::touch`] for a box that [`Sweep::misses`] has not ruled out.
    // Out of line: few boxes get this far, and the loops over boxes stay small.
    #[inline(never)]
    fn touch_unmissed(&self, corners: &Corners) -> Touch {
        // Signed distances in front of each face at the start (`d1`) and the end (`d2`),
        // lanes as in `Corners`.
        let (s, e) = (&self.start, &self.end);
        let mut d1 = [0.0_f32; 8];
        let mut d2 = [0.0_f32; 8];
        for axis in 0..3 {
            let lo = corners[axis] + self.grow_lo[axis];
            let hi = corners[axis + 4] + self.grow_hi[axis];
            d1[axis] = lo - s[axis];
            d2[axis] = lo - e[axis];
            d1[axis + 4] = s[axis] - hi;
            d2[axis + 4] = e[axis] - hi;
        }
        if d1.iter().any(|&d| d > 0.0) {
            entry(&d1, &d2)
        } else {
            Touch::StartsInside
        }
    }
}

/// The rest of `CM_TraceThroughBrush`, for a move that starts outside a box and is not
/// wholly in front of any face: where it enters and leaves the box, face by face.
fn entry(d1: &Corners, d2: &Corners) -> Touch {
    let mut enter = -1.0_f32;
    let mut leave = 1.0_f32;
    let mut normal = Vec3::ZERO;
    for &(lane, axis, outward) in &FACES {
        let (d1, d2) = (d1[lane], d2[lane]);
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
    if enter < leave && enter > -1.0 {
        Touch::Enters(enter, normal)
    } else {
        Touch::Misses
    }
}

impl HullTrace {
    /// A move to `end` that nothing has stopped yet.
    pub(super) fn unstopped(end: Vec3) -> HullTrace {
        HullTrace {
            fraction: 1.0,
            end,
            normal: Vec3::ZERO,
            box_index: None,
            barrier_index: None,
            start_solid: false,
        }
    }

    /// Takes an entry at `fraction` if it comes before every one so far: true when it did.
    #[inline(always)]
    fn enters_first(&mut self, fraction: f32, normal: Vec3) -> bool {
        let first = fraction < self.fraction;
        if first {
            self.fraction = fraction;
            self.normal = normal;
        }
        first
    }

    /// Clips against box `index` of the map, whose turn it is: the first box entered at the
    /// least fraction wins.
    #[inline(always)]
    pub(super) fn clip_box(&mut self, sweep: &Sweep, corners: &Corners, index: u32) {
        if sweep.misses(corners) {
            return;
        }
        match sweep.touch_unmissed(corners) {
            Touch::Misses => {}
            Touch::StartsInside => self.start_solid = true,
            Touch::Enters(fraction, normal) => {
                if self.enters_first(fraction, normal) {
                    self.box_index = Some(index as usize);
                }
            }
        }
    }

    /// Clips against raised barrier `index`, which comes after every box.
    #[inline]
    pub(super) fn clip_barrier(&mut self, sweep: &Sweep, barrier: &Aabb, index: usize) {
        match sweep.touch(&super::grid::corners(barrier)) {
            Touch::Misses => {}
            Touch::StartsInside => self.start_solid = true,
            Touch::Enters(fraction, normal) => {
                if self.enters_first(fraction, normal) {
                    self.box_index = None;
                    self.barrier_index = Some(index);
                }
            }
        }
    }

    /// The trace of the move from `start`, once every box and barrier has been clipped
    /// against: where it ends.
    pub(super) fn finish(self, start: Vec3) -> HullTrace {
        let HullTrace {
            fraction,
            end,
            normal,
            box_index,
            barrier_index,
            start_solid,
        } = self;
        // Built anew rather than updated in place: the caller's copy of a struct whose last
        // fields were just written one by one would wait on those writes.
        HullTrace {
            fraction,
            end: if fraction < 1.0 {
                start + (end - start) * fraction
            } else {
                end
            },
            normal,
            box_index,
            barrier_index,
            start_solid,
        }
    }
}

/// The boxes and raised barriers that can stop one hull's sweeps within a region, found once
/// through the grid ([`Map::near`]). Traces within the region test only them; a trace that
/// leaves it goes through the grid instead. Either way [`Near::trace_hull`] gives what
/// [`Map::trace_hull`] gives, to the bit.
pub(crate) struct Near<'a> {
    map: &'a Map,
    hull: Hull,
    /// The region as a sweep from its lower corner to its upper: the points a trace sweeps
    /// must lie within the points this one does.
    region: Sweep,
    /// How many boxes are held; more than [`NEAR_MAX_BOXES`] when they did not fit.
    len: usize,
    /// The indices of the boxes held.
    index: [u16; NEAR_MAX_BOXES],
    /// The raised barriers that may stop a sweep in the region, one bit each.
    barriers: u64,
}

impl Map {
    /// The boxes and raised barriers that may stop sweeps of `hull` whose points stay within
    /// `region`: call once a tick per player, and trace through the result. Allocates
    /// nothing.
    // Inline: built where the caller keeps it, not copied there.
    #[inline]
    pub(crate) fn near(&self, region: Aabb, hull: Hull) -> Near<'_> {
        let mut near = Near {
            map: self,
            hull,
            region: Sweep::new(region.min, region.max, hull),
            len: 0,
            index: [0; NEAR_MAX_BOXES],
            barriers: 0,
        };
        let (min, max) = near.region.query();
        let _ = self.grid.for_each_box(min, max, |index| {
            if near.len == NEAR_MAX_BOXES {
                near.len += 1;
                return ControlFlow::Break(());
            }
            near.index[near.len] = index as u16;
            near.len += 1;
            ControlFlow::Continue(())
        });
        if near.len <= NEAR_MAX_BOXES {
            // Beyond the region is beyond every sweep within it.
            let corners = &self.grid.corners;
            let mut kept = 0;
            for i in 0..near.len {
                let index = near.index[i];
                if !near.region.is_far(&corners[usize::from(index)]) {
                    near.index[kept] = index;
                    kept += 1;
                }
            }
            near.len = kept;
        }
        for (index, b) in self.raised_barriers().iter().enumerate() {
            if !near.region.is_far(&super::grid::corners(b)) {
                near.barriers |= 1 << index;
            }
        }
        near
    }
}

impl Near<'_> {
    /// Sweeps the hull with its feet from `start` to `end`: [`Map::trace_hull`] with this
    /// neighbourhood's map and hull.
    pub(crate) fn trace_hull(&self, start: Vec3, end: Vec3) -> HullTrace {
        let sweep = Sweep::new(start, end, self.hull);
        if self.len > NEAR_MAX_BOXES || !sweep.within(&self.region) {
            return self.map.trace_hull(start, end, self.hull);
        }
        let touched = self.touched(&sweep);
        let trace = if touched == 0 && self.barriers == 0 {
            // Most sweeps: nothing in the way.
            HullTrace::unstopped(end)
        } else {
            self.clip_touched(&sweep, touched, start, end)
        };
        #[cfg(test)]
        super::reference::assert_same_trace(self.map, start, end, self.hull, &trace);
        trace
    }

    /// True when every box near the region fitted, so that sweeps within it use them.
    #[cfg(test)]
    pub(super) fn holds_every_box(&self) -> bool {
        self.len <= NEAR_MAX_BOXES
    }

    /// True when a sweep from `start` to `end` stays within the region.
    #[cfg(test)]
    pub(crate) fn covers(&self, start: Vec3, end: Vec3) -> bool {
        Sweep::new(start, end, self.hull).within(&self.region)
    }

    /// One bit for each box held that `sweep` does not miss outright.
    // Inline, where `sweep` is still in registers: out of line, it would be read back from
    // memory moments after being written field by field, and the reads would wait.
    #[inline(always)]
    fn touched(&self, sweep: &Sweep) -> u32 {
        let corners = &self.map.grid.corners;
        let mut touched = 0;
        for (bit, &index) in self.index.iter().enumerate().take(self.len) {
            if !sweep.misses(&corners[usize::from(index)]) {
                touched |= 1 << bit;
            }
        }
        touched
    }

    /// The trace of the sweep from `start` to `end` against the boxes `touched` names and the
    /// raised barriers near. The boxes are not tested in the grid's order, so an entry at the
    /// same fraction as the one kept wins when the grid reports its box first, as
    /// [`Map::trace_hull`]'s would; and only boxes the grid reports to this sweep count.
    // Out of line: most sweeps touch nothing.
    #[inline(never)]
    fn clip_touched(&self, sweep: &Sweep, touched: u32, start: Vec3, end: Vec3) -> HullTrace {
        let grid = &self.map.grid;
        let query = sweep.query();
        let mut cells = None;
        let mut trace = HullTrace::unstopped(end);
        let mut best: Option<ReportOrder> = None;
        for bit in BitIter(u64::from(touched)) {
            let index = u32::from(self.index[bit]);
            let Some(order) = grid.report_order(index, query, &mut cells) else {
                continue;
            };
            match sweep.touch_unmissed(&grid.corners[index as usize]) {
                Touch::Misses => {}
                Touch::StartsInside => trace.start_solid = true,
                Touch::Enters(fraction, normal) => {
                    let first = fraction < trace.fraction
                        || (fraction == trace.fraction && best.is_some_and(|b| order < b));
                    if first {
                        trace.fraction = fraction;
                        trace.normal = normal;
                        trace.box_index = Some(index as usize);
                        best = Some(order);
                    }
                }
            }
        }
        let barriers = self.map.raised_barriers();
        for index in BitIter(self.barriers) {
            trace.clip_barrier(sweep, &barriers[index], index);
        }
        trace.finish(start)
    }
}
