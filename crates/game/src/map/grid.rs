//! The broad phase: a uniform grid of box indices over the map's x-y extent, built at load,
//! that lists the boxes near a region without allocating.

use super::Aabb;
use crate::math::Vec3;

/// Smallest grid cell edge, metres: a few player widths, so a tick's sweep spans few cells.
const GRID_MIN_CELL_M: f32 = 4.0;
/// Most grid cells along x or along y; big maps get bigger cells instead.
const GRID_MAX_CELLS_PER_SIDE: u32 = 128;
/// Boxes reaching more cells than this are tested by every query instead of being listed in
/// each cell: a floor would otherwise fill every cell and cost a test in every cell a ray
/// crosses. Also bounds the grid at this many entries a box.
const LARGE_BOX_CELLS: u32 = 64;

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
    /// Where each cell's run starts in `entries`, row-major, with one more at the end.
    starts: Vec<u32>,
    /// Box indices, cell by cell, each cell's in ascending order.
    pub(super) entries: Vec<u32>,
    /// Each box's cells: `[col_lo, col_hi, row_lo, row_hi]`.
    pub(super) ranges: Vec<[u32; 4]>,
    /// Boxes reaching more than [`LARGE_BOX_CELLS`] cells, in ascending order.
    pub(super) large: Vec<u32>,
}

impl Grid {
    pub(super) fn build(bounds: &Aabb, boxes: &[Aabb]) -> Grid {
        let extent = (bounds.max.x - bounds.min.x).max(bounds.max.y - bounds.min.y);
        let cell_m = GRID_MIN_CELL_M.max(extent / GRID_MAX_CELLS_PER_SIDE as f32);
        let count = |span: f32| ((span / cell_m).ceil() as u32).clamp(1, GRID_MAX_CELLS_PER_SIDE);
        let mut grid = Grid {
            min: [bounds.min.x, bounds.min.y],
            max: [bounds.max.x, bounds.max.y],
            cell_m,
            cells: [
                count(bounds.max.x - bounds.min.x),
                count(bounds.max.y - bounds.min.y),
            ],
            starts: Vec::new(),
            entries: Vec::new(),
            ranges: Vec::with_capacity(boxes.len()),
            large: Vec::new(),
        };
        // Counting sort of (cell, box) pairs; at most LARGE_BOX_CELLS pairs a box.
        let mut starts = vec![0u32; (grid.cells[0] * grid.cells[1]) as usize + 1];
        for (index, b) in boxes.iter().enumerate() {
            let r = grid.range(b.min, b.max);
            grid.ranges.push(r);
            if (r[1] - r[0] + 1) * (r[3] - r[2] + 1) > LARGE_BOX_CELLS {
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
        for (index, r) in grid.ranges.iter().enumerate() {
            if grid.large.binary_search(&(index as u32)).is_ok() {
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
        // `as` saturates and sends NaN to 0: any input lands in a valid cell.
        (c as i64).clamp(0, i64::from(self.cells[axis]) - 1) as u32
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
    /// with each large box: a superset of the boxes overlapping it. A box spanning many cells
    /// is reported only from the lowest cell that both it and the query reach.
    pub(super) fn for_each_box(&self, min: Vec3, max: Vec3, mut f: impl FnMut(usize)) {
        for &index in &self.large {
            f(index as usize);
        }
        if self.entries.is_empty() {
            return;
        }
        let q = self.range(min, max);
        for row in q[2]..=q[3] {
            for col in q[0]..=q[1] {
                for &index in self.cell(col, row) {
                    let r = self.ranges[index as usize];
                    if r[0].max(q[0]) == col && r[2].max(q[2]) == row {
                        f(index as usize);
                    }
                }
            }
        }
    }
}
