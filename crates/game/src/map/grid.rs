//! The broad phase: a uniform grid of box indices over the map's x-y extent, built at load,
//! that lists the boxes near a region without allocating.

use std::ops::ControlFlow;

use super::Aabb;
use crate::math::Vec3;

/// Smallest grid cell edge, metres: a few player widths, so a tick's sweep spans few cells.
const GRID_MIN_CELL_M: f32 = 4.0;
/// Most grid cells along x or along y; big maps get bigger cells instead.
const GRID_MAX_CELLS_PER_SIDE: u32 = 128;
/// Boxes reaching more cells than this are tested by every query instead of being listed in
/// each cell: a floor would otherwise fill every cell and cost a test in every cell a ray
/// crosses. Also bounds the grid at this many entries a box.
pub(super) const LARGE_BOX_CELLS: u32 = 64;

/// 2^23: the least float whose unit in the last place is 1.
const F32_MANTISSA_ONE: f32 = 8_388_608.0;
// `Grid::cell_of` reads cell numbers from a mantissa.
const _: () = assert!(GRID_MAX_CELLS_PER_SIDE < 1 << 23);

/// A box's corners, `[min.x, min.y, min.z, 0, max.x, max.y, max.z, 0]`: two runs of four
/// lanes, in which a hull trace tests a box's three axes at once.
pub(super) type Corners = [f32; 8];

/// `b` as [`Corners`].
pub(super) fn corners(b: &Aabb) -> Corners {
    [
        b.min.x, b.min.y, b.min.z, 0.0, b.max.x, b.max.y, b.max.z, 0.0,
    ]
}

/// Where a box comes in the order [`Grid::for_each_box`] reports boxes to one query: keys
/// sort as the boxes are reported.
pub(super) type ReportOrder = [u32; 4];

/// A uniform grid over the map's x-y extent; each cell lists the boxes that reach into it,
/// except large boxes (floors, roofs, long walls), which every query tests directly.
#[derive(Clone, Debug)]
pub(super) struct Grid {
    /// The grid's lower x-y corner, metres.
    pub(super) min: [f32; 2],
    /// The grid's upper x-y corner, metres.
    pub(super) max: [f32; 2],
    /// Cell edge, metres.
    pub(super) cell_m: f32,
    /// Cells along x and along y.
    pub(super) cells: [u32; 2],
    /// The last column and the last row, as floats.
    last: [f32; 2],
    /// Where each cell's run starts in `entries`, row-major, with one more at the end.
    starts: Vec<u32>,
    /// Box indices, cell by cell, each cell's in ascending order.
    pub(super) entries: Vec<u32>,
    /// Each box's cells: `[col_lo, col_hi, row_lo, row_hi]`.
    pub(super) ranges: Vec<[u32; 4]>,
    /// Boxes reaching more than [`LARGE_BOX_CELLS`] cells, in ascending order.
    pub(super) large: Vec<u32>,
    /// Each box as [`Corners`], by index.
    pub(super) corners: Vec<Corners>,
}

impl Grid {
    pub(super) fn build(bounds: &Aabb, boxes: &[Aabb]) -> Grid {
        let extent = (bounds.max.x - bounds.min.x).max(bounds.max.y - bounds.min.y);
        let cell_m = GRID_MIN_CELL_M.max(extent / GRID_MAX_CELLS_PER_SIDE as f32);
        let count = |span: f32| ((span / cell_m).ceil() as u32).clamp(1, GRID_MAX_CELLS_PER_SIDE);
        let cells = [
            count(bounds.max.x - bounds.min.x),
            count(bounds.max.y - bounds.min.y),
        ];
        let mut grid = Grid {
            min: [bounds.min.x, bounds.min.y],
            max: [bounds.max.x, bounds.max.y],
            cell_m,
            cells,
            last: [(cells[0] - 1) as f32, (cells[1] - 1) as f32],
            starts: Vec::new(),
            entries: Vec::new(),
            ranges: Vec::with_capacity(boxes.len()),
            large: Vec::new(),
            corners: boxes.iter().map(corners).collect(),
        };
        // Counting sort of (cell, box) pairs; at most LARGE_BOX_CELLS pairs a box.
        let mut starts = vec![0u32; (grid.cells[0] * grid.cells[1]) as usize + 1];
        for (index, b) in boxes.iter().enumerate() {
            let r = grid.range(b.min, b.max);
            grid.ranges.push(r);
            if is_large(r) {
                grid.large.push(index as u32);
                continue;
            }
            for row in r[2]..=r[3] {
                for col in r[0]..=r[1] {
                    starts[(row * grid.cells[0] + col) as usize + 1] += 1;
                }
            }
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut fill = starts.clone();
        grid.entries = vec![0; starts[starts.len() - 1] as usize];
        for (index, &r) in grid.ranges.iter().enumerate() {
            if is_large(r) {
                continue;
            }
            for row in r[2]..=r[3] {
                for col in r[0]..=r[1] {
                    let cell = (row * grid.cells[0] + col) as usize;
                    grid.entries[fill[cell] as usize] = index as u32;
                    fill[cell] += 1;
                }
            }
        }
        grid.starts = starts;
        grid
    }

    /// The cell column (`axis` 0) or row (`axis` 1) holding coordinate `v`, clamped to the
    /// grid.
    pub(super) fn cell_of(&self, axis: usize, v: f32) -> u32 {
        let c = ((v - self.min[axis]) / self.cell_m).floor();
        // `max` sends NaN to 0: any input lands in a valid cell.
        let c = c.max(0.0).min(self.last[axis]);
        // A whole number below 2^23 added to 2^23 is the low bits of the sum's mantissa: `as
        // u32`, without the checks for values out of range that `as` compiles to.
        (c + F32_MANTISSA_ONE).to_bits() - F32_MANTISSA_ONE.to_bits()
    }

    /// The columns and rows `[col_lo, col_hi, row_lo, row_hi]` that the x-y extent of the box
    /// from `min` to `max` reaches.
    pub(super) fn range(&self, min: Vec3, max: Vec3) -> [u32; 4] {
        [
            self.cell_of(0, min.x),
            self.cell_of(0, max.x),
            self.cell_of(1, min.y),
            self.cell_of(1, max.y),
        ]
    }

    pub(super) fn cell(&self, col: u32, row: u32) -> &[u32] {
        let cell = (row * self.cells[0] + col) as usize;
        &self.entries[self.starts[cell] as usize..self.starts[cell + 1] as usize]
    }

    /// Calls `f` once with each box whose cells meet the x-y extent from `min` to `max`, and
    /// with each large box: a superset of the boxes overlapping it, until `f` breaks. The
    /// large boxes come first, by index; then the others in row-major order of the first cell
    /// that both the box and the query reach, by index within a cell ([`Grid::report_order`]).
    pub(super) fn for_each_box(
        &self,
        min: Vec3,
        max: Vec3,
        mut f: impl FnMut(u32) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        for &index in &self.large {
            f(index)?;
        }
        let Some(q) = self.query_cells(min, max) else {
            return ControlFlow::Continue(());
        };
        for row in q[2]..=q[3] {
            for col in q[0]..=q[1] {
                for &index in self.cell(col, row) {
                    if self.reports_in(index, col, row, q) {
                        f(index)?;
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// The cells whose boxes [`Grid::for_each_box`] reports for the x-y extent from `min` to
    /// `max`, as a [`Grid::range`]; `None` when no box is listed in a cell.
    pub(super) fn query_cells(&self, min: Vec3, max: Vec3) -> Option<[u32; 4]> {
        (!self.entries.is_empty()).then(|| self.range(min, max))
    }

    /// True when box `index`, listed in the cell at `col` and `row`, is reported from that
    /// cell to a query reaching cells `q`: from the first cell both reach.
    #[inline]
    pub(super) fn reports_in(&self, index: u32, col: u32, row: u32, q: [u32; 4]) -> bool {
        let r = self.ranges[index as usize];
        r[0].max(q[0]) == col && r[2].max(q[2]) == row
    }

    /// Where [`Grid::for_each_box`] reports box `index` to a query from `min` to `max`: large
    /// boxes first, then by first shared cell, then by index. `None` when it does not report
    /// the box to that query. `cells` caches the query's [`Grid::range`] between calls.
    pub(super) fn report_order(
        &self,
        index: u32,
        (min, max): (Vec3, Vec3),
        cells: &mut Option<[u32; 4]>,
    ) -> Option<ReportOrder> {
        let r = self.ranges[index as usize];
        if is_large(r) {
            return Some([0, 0, 0, index]);
        }
        let q = *cells.get_or_insert_with(|| self.range(min, max));
        let meets = r[0] <= q[1] && q[0] <= r[1] && r[2] <= q[3] && q[2] <= r[3];
        meets.then_some([1, r[2].max(q[2]), r[0].max(q[0]), index])
    }
}

/// True for a box reaching cells `r` that every query tests rather than finds in cells.
fn is_large(r: [u32; 4]) -> bool {
    (r[1] - r[0] + 1) * (r[3] - r[2] + 1) > LARGE_BOX_CELLS
}
