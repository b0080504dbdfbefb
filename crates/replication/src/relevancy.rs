//! Which entities are near a viewer: a spatial hash of square cells on the ground plane.
//!
//! The game pushes positions as they change ([`Grid::place`] is O(1): a doubly linked list
//! per bucket), and a query visits only the cells that overlap the viewer's range, so the
//! cost of finding candidates follows how many entities are near, not how many exist.
//! Buckets are a fixed table hashed from cell coordinates, so the map needs no bounds.

/// No entity: the end of a bucket's list.
const NONE: u16 = u16::MAX;

/// Entities by cell.
pub(crate) struct Grid {
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

    fn cell_of(&self, x: f32, y: f32) -> (i32, i32) {
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
        let c = self.cell_of(x, y);
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

    /// Calls `f` with every entity in a cell that overlaps the square of half-side
    /// `radius_m` around (`x`, `y`): a superset of those within `radius_m`. Visits the
    /// square's cells, or the entities when there are fewer of them than cells (a small
    /// map inside a wide radius), whichever is less work. Inlined, and `f` with it: the
    /// caller's test runs for every entity visited.
    #[inline(always)]
    pub fn query(&self, x: f32, y: f32, radius_m: f32, mut f: impl FnMut(usize)) {
        let (x0, y0) = self.cell_of(x - radius_m, y - radius_m);
        let (x1, y1) = self.cell_of(x + radius_m, y + radius_m);
        let cells = (i64::from(x1) - i64::from(x0) + 1) * (i64::from(y1) - i64::from(y0) + 1);
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
}
