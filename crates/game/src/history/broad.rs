//! The shots' broad phase: a uniform grid over where each player stood during the ticks the
//! history holds, so that a shot looks at the players near its segment rather than at all.
//!
//! As [`History::record`] goes, each player's feet are kept as one box per block of a few
//! ticks (a quarter of the ticks held): cheap to add to, and a handful of blocks cover the
//! held ticks. Every tick [`BroadPhase::rebuild`] joins the blocks holding the held ticks
//! into the player's window, grown by [`History::reach`] and padded against rounding: a
//! rewind to any held time puts the player's reach box inside it. A window whose x-y
//! extent is over [`LARGE_M`] (a teleport, a respawn without [`History::clear`]) or is not
//! finite goes to a short list that every shot tests; the others are listed in each grid
//! cell they reach. A shot walks the cells its segment crosses in x-y
//! ([`BroadPhase::for_each_candidate`], Amanatides–Woo in `f64`) and gathers the players
//! listed there into a set, each once, so that [`crate::hitscan`] tests them in slot order
//! as it would test every player.
//!
//! The padding is what makes the grid safe to trust: [`crate::hitscan::segment_enters`] is
//! `f32` and may let a segment that misses a box by a rounding error enter it. That error is
//! at most a few units in the last place of the distances involved; the pad is 2^-14 of
//! the largest coordinate in play, some thirty times more, plus a centimetre. A shot from
//! farther than [`FAR_M`] outside the windows would need more, and tests every player.
//!
//! Kept only for matches of [`GRID_MIN_PLAYERS`] or more: below that, testing every player
//! costs less than keeping the grid.
//!
//! [`History::record`]: crate::history::History::record
//! [`History::reach`]: crate::history::History::reach
//! [`History::clear`]: crate::history::History::clear

use crate::map::Aabb;
use crate::math::Vec3;

/// Fewest player slots for which a history keeps a grid. Measured per 128 Hz tick, one shot
/// per eight players, players packed on the crowd bench's ring: at 32 players the grid
/// costs 5.5 µs against 3.8 µs for testing everyone, at 64 the two are within noise
/// (12 µs), at 100 the grid costs 20 µs against 24 µs and at 128, 33 µs against 60 µs or
/// more.
pub(crate) const GRID_MIN_PLAYERS: usize = 64;
/// Smallest cell edge, metres: about a player's box over 200 ms of running, so a box is
/// listed in four cells or so.
const CELL_M: f64 = 3.0;
/// Most cells along x or along y; players spread wider get bigger cells instead.
const MAX_CELLS_PER_SIDE: u32 = 128;
/// Boxes wider or deeper than this, metres, are tested by every shot instead of being
/// listed in the cells they reach: nobody runs this far within a max rewind (at most a
/// second), so it is a teleport. Also bounds the cells a box is listed in.
pub(crate) const LARGE_M: f32 = 16.0;
/// Cells a box no wider than [`LARGE_M`], pad included, may be listed in at the smallest
/// cell: the bound on the grid's entries.
const MAX_CELLS_PER_BOX: usize = {
    let side = (LARGE_M as usize).div_ceil(CELL_M as usize) + 2;
    side * side
};
/// How far outside the grid's boxes, metres, a shot may start and still walk the grid.
const FAR_M: f32 = 1024.0;
/// The pad: this much, metres, plus [`PAD_PER_M`] of the largest coordinate in play.
const PAD_M: f32 = 0.01;
/// 2^-14: some thirty times the rounding of a segment test at that scale.
const PAD_PER_M: f32 = 1.0 / 16384.0;
/// Words of the [`SlotSet`] for up to 4,096 players (512 bytes to clear a shot).
const SMALL_SET_WORDS: usize = 64;
/// Words of the [`SlotSet`] for every slot a history can have (8 KiB).
const FULL_SET_WORDS: usize = (u16::MAX as usize + 1) / 64;

/// A player's box over the held ticks, padded; `min` above `max` when it was dead all
/// along.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub(crate) min: Vec3,
    pub(crate) max: Vec3,
}

impl Window {
    const EMPTY: Window = Window {
        min: Vec3::new(f32::INFINITY, f32::INFINITY, f32::INFINITY),
        max: Vec3::new(f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY),
    };
    /// Contains everything: what a shot tests a player of the always-tested list against.
    const EVERYWHERE: Window = Window {
        min: Vec3::new(f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY),
        max: Vec3::new(f32::INFINITY, f32::INFINITY, f32::INFINITY),
    };
}

/// The grid and what it is built from; allocated by [`BroadPhase::new`] and never again.
#[derive(Clone, Debug)]
pub(crate) struct BroadPhase {
    players: usize,
    /// Consecutive ticks whose feet are kept as one box: a quarter of the ticks held when
    /// full, rounded up.
    block_ticks: usize,
    /// Blocks in the ring: enough for every tick held and the block being filled.
    block_count: usize,
    /// Per block (a ring of them) and player, `block * players + slot`: the box of the feet
    /// over the block's ticks recorded so far. Empty when dead all along; an infinite `max`
    /// when alive somewhere not finite.
    blocks: Vec<Window>,
    /// Ticks recorded since the grid was made or cleared.
    recorded: usize,
    /// Per player: its box over the blocks holding the held ticks, grown by the reach and
    /// padded, as the last rebuild left it.
    windows: Vec<Window>,
    /// Players every shot tests: boxes over [`LARGE_M`] or not finite, in slot order.
    always: Vec<u16>,
    /// The grid's lower x-y corner, metres.
    min: [f64; 2],
    /// Cell edge, metres.
    cell_m: f64,
    /// Cells along x and along y; zero when no box is listed.
    cells: [u32; 2],
    /// Where each cell's run starts in `entries`, row-major, with one more at the end.
    starts: Vec<u32>,
    /// Player slots, cell by cell.
    entries: Vec<u16>,
    /// Each player's cells `[col_lo, col_hi, row_lo, row_hi]`; `None` when not listed.
    ranges: Vec<Option<[u32; 4]>>,
    /// A shot from farther out than this on any axis, metres, tests every player.
    reach_m: f32,
}

impl BroadPhase {
    /// An empty grid for `players` slots over `capacity` ticks.
    pub(crate) fn new(players: usize, capacity: usize) -> BroadPhase {
        let side = MAX_CELLS_PER_SIDE as usize;
        let block_ticks = capacity.div_ceil(4).max(1);
        let block_count = capacity.div_ceil(block_ticks) + 1;
        BroadPhase {
            players,
            block_ticks,
            block_count,
            blocks: vec![Window::EMPTY; players * block_count],
            recorded: 0,
            windows: vec![Window::EMPTY; players],
            always: Vec::with_capacity(players),
            min: [0.0; 2],
            cell_m: CELL_M,
            cells: [0; 2],
            starts: vec![0; side * side + 1],
            entries: vec![0; players * MAX_CELLS_PER_BOX],
            ranges: vec![None; players],
            reach_m: 0.0,
        }
    }

    /// Forgets every tick recorded, as the history does.
    pub(crate) fn clear(&mut self) {
        self.recorded = 0;
    }

    /// Starts recording the next tick; [`BroadPhase::add_feet`] adds each player's feet.
    pub(crate) fn begin_tick(&mut self) {
        let tick = self.recorded;
        self.recorded += 1;
        if tick.is_multiple_of(self.block_ticks) {
            let block = tick / self.block_ticks % self.block_count;
            self.blocks[block * self.players..(block + 1) * self.players].fill(Window::EMPTY);
        }
    }

    /// Adds `slot`'s feet this tick to its box over the block's ticks.
    pub(crate) fn add_feet(&mut self, slot: usize, feet: Vec3) {
        let block = (self.recorded - 1) / self.block_ticks % self.block_count;
        let b = &mut self.blocks[block * self.players + slot];
        if feet.is_finite() {
            b.min = b.min.min(feet);
            b.max = b.max.max(feet);
        } else {
            // A box with an infinite corner is too large: every shot tests it.
            b.max = Window::EVERYWHERE.max;
        }
    }

    /// Rebuilds the windows and the grid over the newest `held` ticks (at most those
    /// recorded since the grid was made or cleared), with `reach` around the feet.
    pub(crate) fn rebuild(&mut self, held: usize, reach: Aabb) {
        let players = self.players;
        debug_assert!(held <= self.recorded, "more ticks held than recorded");
        let held = held.clamp(1, self.recorded.max(1));
        // The blocks holding the held ticks; the oldest may hold a few older ticks too.
        let newest = self.recorded.saturating_sub(1);
        let blocks = (newest + 1 - held) / self.block_ticks..=newest / self.block_ticks;
        self.windows.fill(Window::EMPTY);
        for block in blocks {
            let block = block % self.block_count;
            let row = &self.blocks[block * players..(block + 1) * players];
            for (w, b) in self.windows.iter_mut().zip(row) {
                w.min = w.min.min(b.min);
                w.max = w.max.max(b.max);
            }
        }

        // Grow by the reach, and find the largest coordinate in play: the pad's scale.
        let mut scale = 0.0_f32;
        for w in &mut self.windows {
            if w.min.x > w.max.x {
                // Dead all along: never a candidate.
                continue;
            }
            w.min += reach.min;
            w.max += reach.max;
            for v in w.min.to_array().into_iter().chain(w.max.to_array()) {
                if v.is_finite() {
                    scale = scale.max(v.abs());
                }
            }
        }
        self.reach_m = scale + FAR_M;
        let pad = PAD_M + self.reach_m * PAD_PER_M;
        let pad = Vec3::new(pad, pad, pad);

        // Pad; sort out the large boxes; find the bounds of the others.
        self.always.clear();
        let mut bounds = Window::EMPTY;
        for (slot, w) in self.windows.iter_mut().enumerate() {
            self.ranges[slot] = None;
            if w.min.x > w.max.x {
                continue;
            }
            w.min = w.min - pad;
            w.max += pad;
            let extent = (w.max.x - w.min.x).max(w.max.y - w.min.y);
            // A NaN extent (infinite corners) is not small.
            let small = extent <= LARGE_M && w.min.is_finite() && w.max.is_finite();
            if !small {
                // `slot` < players ≤ 65,535.
                self.always.push(slot as u16);
                *w = Window::EVERYWHERE;
                continue;
            }
            bounds.min = bounds.min.min(w.min);
            bounds.max = bounds.max.max(w.max);
        }

        if bounds.min.x > bounds.max.x {
            self.cells = [0, 0];
            return;
        }
        let (lo, hi) = (bounds.min, bounds.max);
        let span = [f64::from(hi.x - lo.x), f64::from(hi.y - lo.y)];
        self.min = [f64::from(lo.x), f64::from(lo.y)];
        self.cell_m = CELL_M.max(span[0].max(span[1]) / f64::from(MAX_CELLS_PER_SIDE));
        let count = |span: f64| ((span / self.cell_m).ceil() as u32).clamp(1, MAX_CELLS_PER_SIDE);
        self.cells = [count(span[0]), count(span[1])];

        // Counting sort of (cell, slot) pairs, slots ascending within a cell.
        let cells = (self.cells[0] * self.cells[1]) as usize;
        self.starts[..=cells].fill(0);
        for slot in 0..players {
            let w = self.windows[slot];
            // Neither dead all along nor always tested.
            if !w.min.x.is_finite() {
                continue;
            }
            let r = [
                self.cell_of(0, f64::from(w.min.x)),
                self.cell_of(0, f64::from(w.max.x)),
                self.cell_of(1, f64::from(w.min.y)),
                self.cell_of(1, f64::from(w.max.y)),
            ];
            self.ranges[slot] = Some(r);
            for row in r[2]..=r[3] {
                for col in r[0]..=r[1] {
                    self.starts[(row * self.cells[0] + col) as usize + 1] += 1;
                }
            }
        }
        // Now `starts[cell + 1]` is the cell's end and `starts[cell]` its start; the fill
        // moves each start to the end, one place up from where it belongs.
        for i in 1..=cells {
            self.starts[i] += self.starts[i - 1];
        }
        debug_assert!(self.starts[cells] as usize <= self.entries.len());
        for slot in 0..players {
            let Some(r) = self.ranges[slot] else {
                continue;
            };
            for row in r[2]..=r[3] {
                for col in r[0]..=r[1] {
                    let next = &mut self.starts[(row * self.cells[0] + col) as usize];
                    // `slot` < players ≤ 65,535.
                    self.entries[*next as usize] = slot as u16;
                    *next += 1;
                }
            }
        }
        self.starts.copy_within(0..cells, 1);
        self.starts[0] = 0;
    }

    /// `slot`'s box over the held ticks: a rewind to any held time puts its reach box
    /// inside. Every shot tests the players of the always-tested list, whose box is
    /// everywhere.
    pub(crate) fn window(&self, slot: usize) -> &Window {
        &self.windows[slot]
    }

    /// Calls `f` in ascending order with each player a segment from `origin` along unit
    /// `dir` for `length` metres may enter the box of ([`BroadPhase::collect`]), counting
    /// the cells walked in `walked`. False, with no call, when `origin` is too far from the
    /// grid to trust it: test every player.
    pub(crate) fn for_each_candidate(
        &self,
        origin: Vec3,
        dir: Vec3,
        length: f32,
        walked: &mut u32,
        f: impl FnMut(usize),
    ) -> bool {
        if self.players <= SMALL_SET_WORDS * 64 {
            self.walk::<SMALL_SET_WORDS>(origin, dir, length, walked, f)
        } else {
            self.walk::<FULL_SET_WORDS>(origin, dir, length, walked, f)
        }
    }

    fn walk<const WORDS: usize>(
        &self,
        origin: Vec3,
        dir: Vec3,
        length: f32,
        walked: &mut u32,
        f: impl FnMut(usize),
    ) -> bool {
        let mut set = SlotSet::<WORDS>::new();
        let trusted = self.collect(origin, dir, length, &mut set, walked);
        if trusted {
            set.for_each(f);
        }
        trusted
    }

    /// Adds to `set` the players a segment from `origin` along unit `dir` for `length`
    /// metres may enter the box of: those listed in the cells it crosses and those every
    /// shot tests. Counts the cells in `walked`. False, with nothing added, when `origin`
    /// is too far from the grid to trust it: test every player.
    fn collect<const WORDS: usize>(
        &self,
        origin: Vec3,
        dir: Vec3,
        length: f32,
        set: &mut SlotSet<WORDS>,
        walked: &mut u32,
    ) -> bool {
        let far = self.reach_m;
        if !(origin.x.abs() <= far && origin.y.abs() <= far && origin.z.abs() <= far) {
            return false;
        }
        for &slot in &self.always {
            set.insert(slot);
        }
        if self.cells[0] == 0 {
            return true;
        }
        let o = [f64::from(origin.x), f64::from(origin.y)];
        let d = [f64::from(dir.x), f64::from(dir.y)];
        let max = [
            self.min[0] + f64::from(self.cells[0]) * self.cell_m,
            self.min[1] + f64::from(self.cells[1]) * self.cell_m,
        ];
        // Clip the segment to the grid's x-y rectangle: outside it nobody is listed.
        let (mut t_in, mut t_out) = (0.0_f64, f64::from(length));
        for axis in 0..2 {
            if d[axis] == 0.0 {
                if o[axis] < self.min[axis] || o[axis] > max[axis] {
                    return true;
                }
            } else {
                let a = (self.min[axis] - o[axis]) / d[axis];
                let b = (max[axis] - o[axis]) / d[axis];
                t_in = t_in.max(a.min(b));
                t_out = t_out.min(a.max(b));
            }
        }
        if t_in > t_out {
            return true;
        }
        let mut cell = [
            self.cell_of(0, o[0] + d[0] * t_in),
            self.cell_of(1, o[1] + d[1] * t_in),
        ];
        // Distance along the segment to the far boundary of the current cell on `axis`.
        let boundary_t = |axis: usize, cell: [u32; 2]| -> f64 {
            if d[axis] == 0.0 {
                return f64::INFINITY;
            }
            let edge = cell[axis] + u32::from(d[axis] > 0.0);
            (self.min[axis] + f64::from(edge) * self.cell_m - o[axis]) / d[axis]
        };
        for _ in 0..self.cells[0] + self.cells[1] {
            *walked += 1;
            let at = (cell[1] * self.cells[0] + cell[0]) as usize;
            for &slot in &self.entries[self.starts[at] as usize..self.starts[at + 1] as usize] {
                set.insert(slot);
            }
            let (tx, ty) = (boundary_t(0, cell), boundary_t(1, cell));
            // A segment ending on a boundary touches the cell past it: walk on.
            if tx.min(ty) > t_out {
                break;
            }
            let axis = usize::from(ty < tx);
            let next = if d[axis] > 0.0 {
                cell[axis].checked_add(1)
            } else {
                cell[axis].checked_sub(1)
            };
            match next {
                Some(next) if next < self.cells[axis] => cell[axis] = next,
                _ => break,
            }
        }
        true
    }

    /// The cell column (`axis` 0) or row (`axis` 1) holding coordinate `v`, clamped to the
    /// grid.
    fn cell_of(&self, axis: usize, v: f64) -> u32 {
        let c = ((v - self.min[axis]) / self.cell_m).floor();
        // `max` sends NaN to 0.
        c.max(0.0).min(f64::from(self.cells[axis] - 1)) as u32
    }

    /// Cells along x and along y, and the cell edge in metres: for tests.
    #[cfg(test)]
    pub(crate) fn geometry(&self) -> ([f64; 2], [u32; 2], f64) {
        (self.min, self.cells, self.cell_m)
    }

    /// The players every shot tests: for tests.
    #[cfg(test)]
    pub(crate) fn always(&self) -> &[u16] {
        &self.always
    }
}

/// A set of player slots below `WORDS * 64`, iterated in ascending order: what one shot's
/// broad phase gathers. Lives on the stack; only the words between the lowest and the
/// highest slot inserted are read back.
struct SlotSet<const WORDS: usize> {
    words: [u64; WORDS],
    lo: usize,
    hi: usize,
}

impl<const WORDS: usize> SlotSet<WORDS> {
    /// An empty set.
    fn new() -> Self {
        SlotSet {
            words: [0; WORDS],
            lo: WORDS,
            hi: 0,
        }
    }

    /// Adds `slot`.
    fn insert(&mut self, slot: u16) {
        let word = usize::from(slot) / 64;
        self.words[word] |= 1 << (slot % 64);
        self.lo = self.lo.min(word);
        self.hi = self.hi.max(word);
    }

    /// Calls `f` with each slot in the set, ascending.
    fn for_each(&self, mut f: impl FnMut(usize)) {
        for word in self.lo..=self.hi.min(WORDS - 1) {
            let mut bits = self.words[word];
            while bits != 0 {
                f(word * 64 + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
    }
}
