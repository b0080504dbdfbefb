//! Which entities are near a point: a spatial hash of square cells on the ground plane.
//!
//! One grid serves a match: replication keeps it (relevancy: which entities are near each
//! viewer), placing every entity as the game pushes its state, and lends it read-only to
//! the game's step, where the fog of war finds the enemy pairs near enough to matter in it.
//! During a step the grid holds where each entity was pushed at the end of the last tick.
//!
//! Positions are placed as they change ([`Grid::place`] is O(1): a doubly linked list per
//! bucket), and a query visits only the cells that overlap the range asked for, so the cost
//! of finding candidates follows how many entities are near, not how many exist. Buckets
//! are a fixed table hashed from cell coordinates, so the map needs no bounds. Everything is
//! allocated by [`Grid::new`].

/// No entity: the end of a bucket's list.
const NONE: u16 = u16::MAX;

/// Entities by cell: ids `0..capacity`, each in at most one cell.
#[derive(Clone, Debug)]
pub struct Grid {
    inv_cell_m: f32,
    bucket_mask: usize,
    heads: Vec<u16>,
    next: Vec<u16>,
    prev: Vec<u16>,
    cell: Vec<(i32, i32)>,
    placed: Vec<bool>,
    /// Entities in the grid.
    count: usize,
}

impl Grid {
    /// A grid of `cell_size_m` cells for ids `0..max_entities`.
    pub fn new(max_entities: usize, cell_size_m: f32) -> Grid {
        // Twice as many buckets as entities keeps chains short whatever the spread.
        let buckets = (2 * max_entities).next_power_of_two().max(64);
        Grid {
            inv_cell_m: 1.0 / cell_size_m,
            bucket_mask: buckets - 1,
            heads: vec![NONE; buckets],
            next: vec![NONE; max_entities],
            prev: vec![NONE; max_entities],
            cell: vec![(0, 0); max_entities],
            placed: vec![false; max_entities],
            count: 0,
        }
    }

    /// Side of a cell, metres.
    pub fn cell_size_m(&self) -> f32 {
        1.0 / self.inv_cell_m
    }

    /// Ids the grid has room for: `0..capacity`.
    pub fn capacity(&self) -> usize {
        self.placed.len()
    }

    /// Entities in the grid.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no entity is in the grid.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The cell entity `e` is in, `None` when it is not in the grid (or past its ids).
    pub fn cell(&self, e: usize) -> Option<(i32, i32)> {
        self.placed.get(e).copied()?.then(|| self.cell[e])
    }

    /// How far (`x`, `y`) lies outside `cell` along x or y, whichever is more, metres; 0
    /// inside it. A query of half-side `radius_m` round a point visits `cell` whenever
    /// that point is within `radius_m` less this of (`x`, `y`) on both axes (up to f32
    /// rounding: see [`Grid::query`]). NaN for a coordinate that is not finite.
    pub fn distance_outside_m(&self, cell: (i32, i32), x: f32, y: f32) -> f32 {
        let off = |c: i32, v: f32| {
            let u = v * self.inv_cell_m;
            (c as f32 - u).max(u - (c as f32 + 1.0)).max(0.0)
        };
        if !(x.is_finite() && y.is_finite()) {
            return f32::NAN;
        }
        off(cell.0, x).max(off(cell.1, y)) / self.inv_cell_m
    }

    /// The cell of (`x`, `y`) metres.
    pub fn cell_at(&self, x: f32, y: f32) -> (i32, i32) {
        // `as` saturates and maps NaN to 0: a wild position lands in some cell.
        (
            (x * self.inv_cell_m).floor() as i32,
            (y * self.inv_cell_m).floor() as i32,
        )
    }

    fn bucket(&self, (cx, cy): (i32, i32)) -> usize {
        let h = (cx as u32).wrapping_mul(0x9e37_79b1) ^ (cy as u32).wrapping_mul(0x85eb_ca77);
        (h ^ h >> 15) as usize & self.bucket_mask
    }

    /// Puts entity `e` at (`x`, `y`) metres, moving it between cells when needed.
    pub fn place(&mut self, e: usize, x: f32, y: f32) {
        let c = self.cell_at(x, y);
        if self.placed[e] {
            if self.cell[e] == c {
                return;
            }
            self.remove(e);
        }
        let b = self.bucket(c);
        let head = self.heads[b];
        self.next[e] = head;
        self.prev[e] = NONE;
        if head != NONE {
            self.prev[usize::from(head)] = e as u16;
        }
        self.heads[b] = e as u16;
        self.cell[e] = c;
        self.placed[e] = true;
        self.count += 1;
    }

    /// Takes entity `e` out of the grid; nothing when it is not in it.
    pub fn remove(&mut self, e: usize) {
        if !self.placed[e] {
            return;
        }
        let (p, n) = (self.prev[e], self.next[e]);
        if p == NONE {
            let b = self.bucket(self.cell[e]);
            self.heads[b] = n;
        } else {
            self.next[usize::from(p)] = n;
        }
        if n != NONE {
            self.prev[usize::from(n)] = p;
        }
        self.placed[e] = false;
        self.count -= 1;
    }

    /// The corner cells of the square of half-side `radius_m` round (`x`, `y`), and how
    /// many cells it spans (saturating: a wild radius spans every i32 cell, 2^64 of them).
    fn square(&self, x: f32, y: f32, radius_m: f32) -> ((i32, i32), (i32, i32), i64) {
        let (x0, y0) = self.cell_at(x - radius_m, y - radius_m);
        let (x1, y1) = self.cell_at(x + radius_m, y + radius_m);
        let cells =
            (i64::from(x1) - i64::from(x0) + 1).saturating_mul(i64::from(y1) - i64::from(y0) + 1);
        ((x0, y0), (x1, y1), cells)
    }

    /// What a [`Grid::query`] of half-side `radius_m` round (`x`, `y`) walks: its square's
    /// cells, or the entities when they are fewer. A caller weighs it against a scan of its
    /// own when choosing between them.
    pub fn query_cells(&self, x: f32, y: f32, radius_m: f32) -> u64 {
        let (_, _, cells) = self.square(x, y, radius_m);
        cells.clamp(0, self.count as i64) as u64
    }

    /// Calls `f` with every entity in a cell that overlaps the square of half-side
    /// `radius_m` around (`x`, `y`): a superset of those within `radius_m`. Visits the
    /// square's cells, or the entities when there are fewer of them than cells (a small
    /// map inside a wide radius), whichever is less work. Inlined, and `f` with it: the
    /// caller's test runs for every entity visited.
    ///
    /// The square's corners are rounded to f32 (`x - radius_m`), so a caller that must not
    /// miss an entity pads `radius_m` by more than a few f32 steps of its coordinates.
    #[inline(always)]
    pub fn query(&self, x: f32, y: f32, radius_m: f32, mut f: impl FnMut(usize)) {
        let ((x0, y0), (x1, y1), cells) = self.square(x, y, radius_m);
        if cells > self.count as i64 {
            for (e, &(cx, cy)) in self.cell.iter().enumerate() {
                if self.placed[e] && (x0..=x1).contains(&cx) && (y0..=y1).contains(&cy) {
                    f(e);
                }
            }
            return;
        }
        for cx in x0..=x1 {
            for cy in y0..=y1 {
                let mut e = self.heads[self.bucket((cx, cy))];
                while e != NONE {
                    let i = usize::from(e);
                    // Another cell may share the bucket.
                    if self.cell[i] == (cx, cy) {
                        f(i);
                    }
                    e = self.next[i];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn found(g: &Grid, x: f32, y: f32, r: f32) -> Vec<usize> {
        let mut v = Vec::new();
        g.query(x, y, r, |e| v.push(e));
        v.sort_unstable();
        v
    }

    #[test]
    fn queries_see_nearby_cells_only() {
        let mut g = Grid::new(8, 32.0);
        g.place(0, 1.0, 1.0);
        g.place(1, 40.0, -5.0);
        g.place(2, 500.0, 500.0);
        g.place(3, -31.0, 0.5);
        assert_eq!(found(&g, 0.0, 0.0, 10.0), vec![0, 3]);
        assert_eq!(found(&g, 0.0, 0.0, 40.0), vec![0, 1, 3]);
        assert_eq!(found(&g, 490.0, 490.0, 20.0), vec![2]);
        g.place(2, 2.0, 2.0);
        g.remove(3);
        g.remove(3);
        assert_eq!(found(&g, 0.0, 0.0, 10.0), vec![0, 2]);
        assert_eq!(found(&g, 490.0, 490.0, 20.0), Vec::<usize>::new());
    }

    #[test]
    fn a_shared_bucket_keeps_its_cells_apart() {
        // 64 buckets for 2 entities: some of these cells collide.
        let mut g = Grid::new(2, 1.0);
        let mut seen = 0;
        for i in 0..200 {
            g.place(0, 0.5, 0.5);
            g.place(1, i as f32 + 0.5, 77.5);
            let f = found(&g, 0.5, 0.5, 0.4);
            assert_eq!(f, vec![0]);
            seen += f.len();
        }
        assert_eq!(seen, 200);
        g.place(0, f32::NAN, f32::INFINITY);
        let _ = found(&g, f32::MAX, f32::NAN, 3.0);
    }

    #[test]
    fn cells_and_how_far_a_point_lies_outside_them() {
        let mut g = Grid::new(2, 8.0);
        assert_eq!((g.cell(0), g.cell(7), g.len()), (None, None, 0));
        g.place(0, 12.0, -5.0);
        assert_eq!((g.cell(0), g.len(), g.capacity()), (Some((1, -1)), 1, 2));
        assert_eq!(g.distance_outside_m((1, -1), 9.0, -1.0), 0.0);
        assert_eq!(g.distance_outside_m((1, -1), 19.0, -3.0), 3.0);
        assert_eq!(g.distance_outside_m((1, -1), 10.0, -13.0), 5.0);
        assert!(g.distance_outside_m((1, -1), f32::NAN, 0.0).is_nan());
        assert!(g.distance_outside_m((1, -1), 0.0, f32::INFINITY).is_nan());
        g.remove(0);
        assert_eq!((g.cell(0), g.is_empty()), (None, true));
        // A wild radius spans every cell: the count of cells saturates, the query still runs.
        g.place(1, 3.0, 3.0);
        assert_eq!(found(&g, 0.0, 0.0, f32::MAX), vec![1]);
    }

    proptest! {
        /// An entity placed at one point and now at another is visited by a query round any
        /// point within `r` of where it is now, when the query pads `r` by how far it lies
        /// outside the cell it was placed in (and a centimetre for rounding): what the fog
        /// of war relies on to prune with positions a tick old.
        #[test]
        fn a_padded_query_finds_an_entity_that_moved(
            placed in (-5000.0f32..5000.0, -5000.0f32..5000.0),
            moved in (-20.0f32..20.0, -20.0f32..20.0),
            r in 0.0f32..400.0,
            towards in (-1.0f32..1.0, -1.0f32..1.0),
        ) {
            let mut g = Grid::new(4, 32.0);
            g.place(2, placed.0, placed.1);
            g.place(0, -placed.0, 9000.0);
            let now = (placed.0 + moved.0, placed.1 + moved.1);
            let from = (now.0 + towards.0 * r, now.1 + towards.1 * r);
            let outside = g.distance_outside_m(g.cell(2).unwrap(), now.0, now.1);
            prop_assert!(outside <= moved.0.abs().max(moved.1.abs()) + 0.001);
            let f = found(&g, from.0, from.1, r + outside + 0.01);
            prop_assert!(f.contains(&2), "{f:?}");
        }
    }
}
