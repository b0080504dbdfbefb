//! The interpolation buffer: the world as of each of the last [`INTERP_FRAMES`] ticks,
//! and entity states between two of them.
//!
//! The replica keeps every decoded state per entity and tick, but only for baselines: it
//! shows the newest. This ring keeps whole frames, so that an entity's state at a render
//! tick between two snapshots comes from the two snapshots around it. A frame is the
//! replica's newest-wins view copied after a snapshot that was the newest yet (entities it
//! did not carry keep their last state, as the server meant); a late snapshot that fills
//! a gap is the frame before it with its own records applied. Slot `tick % INTERP_FRAMES`
//! holds tick `tick`; lanes are stored packed (the schema's lane count per entity).
//! Allocated with the welcome, never after.

use tickforge_replication::{Coding, Lanes, NetId, Replica, Schema};

/// Ticks of frames kept: a quarter second at 128 Hz, more than the largest delay.
pub const INTERP_FRAMES: usize = 32;

pub(crate) struct Frames {
    schema: &'static Schema,
    lanes: usize,
    entities: usize,
    ticks: [Option<u32>; INTERP_FRAMES],
    newest: Option<u32>,
    present: Vec<bool>,
    state: Vec<i32>,
}

impl Frames {
    pub(crate) fn new(schema: &'static Schema, entities: usize) -> Frames {
        let lanes = schema.lane_count();
        Frames {
            schema,
            lanes,
            entities,
            ticks: [None; INTERP_FRAMES],
            newest: None,
            present: vec![false; INTERP_FRAMES * entities],
            state: vec![0; INTERP_FRAMES * entities * lanes],
        }
    }

    pub(crate) fn entities(&self) -> usize {
        self.entities
    }

    pub(crate) fn reset(&mut self) {
        self.ticks = [None; INTERP_FRAMES];
        self.newest = None;
    }

    /// The newest tick held.
    pub(crate) fn newest(&self) -> Option<u32> {
        self.newest
    }

    fn slot(tick: u32) -> usize {
        tick as usize % INTERP_FRAMES
    }

    fn holds(&self, tick: u32) -> bool {
        self.ticks[Self::slot(tick)] == Some(tick)
    }

    fn put(&mut self, slot: usize, id: usize, lanes: Option<&Lanes>) {
        let at = slot * self.entities + id;
        self.present[at] = lanes.is_some();
        if let Some(l) = lanes {
            let from = at * self.lanes;
            self.state[from..from + self.lanes].copy_from_slice(&l.0[..self.lanes]);
        }
    }

    fn get(&self, slot: usize, id: usize) -> Option<Lanes> {
        let at = slot * self.entities + id;
        if !self.present[at] {
            return None;
        }
        let mut out = Lanes::ZERO;
        let from = at * self.lanes;
        out.0[..self.lanes].copy_from_slice(&self.state[from..from + self.lanes]);
        Some(out)
    }

    /// Records the replica after it read snapshot `tick` successfully (not a duplicate).
    pub(crate) fn record(&mut self, tick: u32, replica: &Replica) {
        let slot = Self::slot(tick);
        match self.newest {
            Some(n) if tick < n => {
                // A late snapshot: it fills a gap when the frame before it is held.
                if n - tick >= INTERP_FRAMES as u32 || self.holds(tick) {
                    return;
                }
                let Some(base) = (1..INTERP_FRAMES as u32)
                    .filter_map(|back| tick.checked_sub(back))
                    .find(|&t| self.holds(t))
                else {
                    return;
                };
                let from = Self::slot(base);
                let (e, l) = (self.entities, self.lanes);
                self.present.copy_within(from * e..(from + 1) * e, slot * e);
                self.state
                    .copy_within(from * e * l..(from + 1) * e * l, slot * e * l);
                for (id, lanes) in replica.last_read() {
                    if id.index() < self.entities {
                        self.put(slot, id.index(), lanes.as_ref());
                    }
                }
                self.ticks[slot] = Some(tick);
            }
            _ => {
                let e = self.entities;
                self.present[slot * e..(slot + 1) * e].fill(false);
                for (id, lanes) in replica.entities() {
                    if id.index() < self.entities {
                        self.put(slot, id.index(), Some(&lanes));
                    }
                }
                self.ticks[slot] = Some(tick);
                self.newest = Some(tick);
            }
        }
    }

    /// Entity `id` at `render_tick`: interpolated between the frames around it, held at
    /// the newest past it (no extrapolation), the oldest before it.
    pub(crate) fn entity_at(&self, id: NetId, render_tick: f64) -> Option<Lanes> {
        let id = id.index();
        let newest = self.newest?;
        if id >= self.entities {
            return None;
        }
        if render_tick.is_nan() || render_tick >= f64::from(newest) {
            return self.get(Self::slot(newest), id);
        }
        let r = render_tick.max(0.0);
        // r < newest, so floor(r) < newest. Every search below spans at most the ring.
        let floor = r.floor() as u32;
        let oldest = newest.saturating_sub(INTERP_FRAMES as u32 - 1);
        let before = (oldest..=floor).rev().find(|&t| self.holds(t));
        let Some(before) = before else {
            // Before the oldest frame kept: the oldest.
            let first = (oldest..=newest).find(|&t| self.holds(t)).unwrap_or(newest);
            return self.get(Self::slot(first), id);
        };
        let after = (floor + 1..=newest)
            .find(|&t| self.holds(t))
            .unwrap_or(newest);
        let a = self.get(Self::slot(before), id)?;
        let Some(b) = self.get(Self::slot(after), id) else {
            return Some(a);
        };
        let f = (r - f64::from(before)) / f64::from(after - before);
        Some(lerp(self.schema, &a, &b, f))
    }
}

/// `a` to `b` by `f` (0..=1), field by field as the schema codes them: numbers linearly,
/// angles the short way round, bytes from `a`.
pub fn lerp(schema: &Schema, a: &Lanes, b: &Lanes, f: f64) -> Lanes {
    let f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
    let mut out = *a;
    let mut lane = 0;
    for field in schema.fields() {
        match field.coding {
            Coding::Scalar => out.0[lane] = lerp_lane(a.0[lane], b.0[lane], f),
            Coding::Pair => {
                out.0[lane] = lerp_lane(a.0[lane], b.0[lane], f);
                out.0[lane + 1] = lerp_lane(a.0[lane + 1], b.0[lane + 1], f);
            }
            Coding::Angle { bits } => out.0[lane] = lerp_angle(a.0[lane], b.0[lane], f, bits),
            Coding::AnglePair { bits } => {
                out.0[lane] = lerp_angle(a.0[lane], b.0[lane], f, bits);
                out.0[lane + 1] = lerp_lane(a.0[lane + 1], b.0[lane + 1], f);
            }
            Coding::Byte => {}
        }
        lane += field.coding.lanes();
    }
    out
}

fn lerp_lane(a: i32, b: i32, f: f64) -> i32 {
    let d = i64::from(b) - i64::from(a);
    (i64::from(a) + (d as f64 * f).round() as i64) as i32
}

/// The angle `f` of the way from `a` to `b` along the shorter arc, in a turn of `2^bits`.
fn lerp_angle(a: i32, b: i32, f: f64, bits: u8) -> i32 {
    let turn = 1i64 << bits.clamp(1, 31);
    let mut d = (i64::from(b) - i64::from(a)).rem_euclid(turn);
    if d >= turn / 2 {
        d -= turn;
    }
    (i64::from(a) + (d as f64 * f).round() as i64).rem_euclid(turn) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fuzz target: a hostile snapshot of a huge tick, then a render tick
    /// near 0, searched every tick in between (seconds per call). Searches span the ring.
    #[test]
    fn a_render_tick_far_behind_the_newest_frame_costs_a_ring_not_the_distance() {
        let schema = tickforge_shooter::schema();
        let mut f = Frames::new(schema, 4);
        let newest = u32::MAX - 3;
        f.ticks[Frames::slot(newest)] = Some(newest);
        f.newest = Some(newest);
        f.present[Frames::slot(newest) * 4 + 1] = true;
        let t0 = std::time::Instant::now();
        for r in [0.0, 1.5, f64::from(newest) - 40.0, f64::from(newest) - 0.5] {
            assert_eq!(f.entity_at(NetId(1), r), Some(Lanes::ZERO), "{r}");
            assert_eq!(f.entity_at(NetId(0), r), None, "{r}");
        }
        assert!(t0.elapsed() < std::time::Duration::from_millis(100));
    }
}
