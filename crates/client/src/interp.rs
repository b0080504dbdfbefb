//! The interpolation buffer: which of the last [`INTERP_FRAMES`] ticks have a snapshot,
//! and entity states between two of them.
//!
//! The replica shows the newest state of each entity; an entity's state at a render tick
//! between two snapshots comes from its state as of each of the two snapshots around it
//! ([`Replica::entity_as_of`]: its newest record at or before that tick, so an entity a
//! snapshot did not carry keeps its last state, as the server meant). A late snapshot that
//! fills a gap becomes a frame too. Slot `tick % INTERP_FRAMES` holds tick `tick`. The
//! states themselves stay in the replica, kept per record sent: nothing here grows with
//! the world.

use tickforge_replication::{Coding, Lanes, NetId, Replica, Schema};

/// Ticks of frames kept: a quarter second at 128 Hz, more than the largest delay.
pub const INTERP_FRAMES: usize = 32;

pub(crate) struct Frames {
    schema: &'static Schema,
    ticks: [Option<u32>; INTERP_FRAMES],
    newest: Option<u32>,
}

impl Frames {
    pub(crate) fn new(schema: &'static Schema) -> Frames {
        Frames {
            schema,
            ticks: [None; INTERP_FRAMES],
            newest: None,
        }
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

    /// Records that the replica read snapshot `tick` successfully (not a duplicate).
    pub(crate) fn record(&mut self, tick: u32) {
        match self.newest {
            // A late snapshot fills a gap within the ring.
            Some(n) if tick < n => {
                if n - tick < INTERP_FRAMES as u32 {
                    self.ticks[Self::slot(tick)] = Some(tick);
                }
            }
            _ => {
                self.ticks[Self::slot(tick)] = Some(tick);
                self.newest = Some(tick);
            }
        }
    }

    /// The frames `render_tick` reads: the newest when it is at or past it (no
    /// extrapolation), the oldest kept when before it, else the two around it and how far
    /// from the first to the second. `None` before any frame.
    fn around(&self, render_tick: f64) -> Option<Around> {
        let newest = self.newest?;
        if render_tick.is_nan() || render_tick >= f64::from(newest) {
            return Some(Around::One(newest));
        }
        let r = render_tick.max(0.0);
        // r < newest, so floor(r) < newest. Every search below spans at most the ring.
        let floor = r.floor() as u32;
        let oldest = newest.saturating_sub(INTERP_FRAMES as u32 - 1);
        let before = (oldest..=floor).rev().find(|&t| self.holds(t));
        let Some(before) = before else {
            // Before the oldest frame kept: the oldest.
            let first = (oldest..=newest).find(|&t| self.holds(t)).unwrap_or(newest);
            return Some(Around::One(first));
        };
        let after = (floor + 1..=newest)
            .find(|&t| self.holds(t))
            .unwrap_or(newest);
        let f = (r - f64::from(before)) / f64::from(after - before);
        Some(Around::Two(before, after, f))
    }

    /// Entity `id` of `replica` at `render_tick`: interpolated between the frames around
    /// it, held at the newest past it (no extrapolation), the oldest before it.
    pub(crate) fn entity_at(
        &self,
        replica: &Replica,
        id: NetId,
        render_tick: f64,
    ) -> Option<Lanes> {
        match self.around(render_tick)? {
            Around::One(tick) => replica.entity_as_of(id, tick),
            Around::Two(before, after, f) => {
                let a = replica.entity_as_of(id, before)?;
                let Some(b) = replica.entity_as_of(id, after) else {
                    return Some(a);
                };
                Some(lerp(self.schema, &a, &b, f))
            }
        }
    }

    /// Starts loading the states [`Frames::entity_at`] reads (a hint).
    pub(crate) fn prefetch_at(&self, replica: &Replica, id: NetId, render_tick: f64) {
        match self.around(render_tick) {
            None => {}
            Some(Around::One(tick)) => replica.prefetch_as_of(id, tick),
            Some(Around::Two(before, after, _)) => {
                replica.prefetch_as_of(id, before);
                replica.prefetch_as_of(id, after);
            }
        }
    }
}

/// The frames a render tick reads ([`Frames::entity_at`]).
enum Around {
    One(u32),
    Two(u32, u32, f64),
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
    use tickforge_replication::{Position, ReplicaConfig, ReplicationConfig, Replicator, Viewer};

    /// Found by the fuzz target: a hostile snapshot of a huge tick, then a render tick
    /// near 0, searched every tick in between (seconds per call). Searches span the ring.
    #[test]
    fn a_render_tick_far_behind_the_newest_frame_costs_a_ring_not_the_distance() {
        let schema = tickforge_shooter::schema();
        let config = ReplicationConfig {
            max_entities: 4,
            max_connections: 1,
            ..ReplicationConfig::default()
        };
        let mut w = Replicator::new(config, schema);
        w.connect(0, None);
        let newest = u32::MAX - 3;
        w.begin_tick(newest);
        w.set_entity(NetId(1), Position::default(), &Lanes::ZERO);
        let mut body = Vec::new();
        w.write(0, &Viewer::default(), None, 1400, &mut body);
        let mut replica = Replica::new(ReplicaConfig::matching(&config), schema);
        replica.read(&body).unwrap();
        let mut f = Frames::new(schema);
        f.record(newest);
        let t0 = std::time::Instant::now();
        for r in [0.0, 1.5, f64::from(newest) - 40.0, f64::from(newest) - 0.5] {
            assert_eq!(f.entity_at(&replica, NetId(1), r), Some(Lanes::ZERO), "{r}");
            assert_eq!(f.entity_at(&replica, NetId(0), r), None, "{r}");
        }
        assert!(t0.elapsed() < std::time::Duration::from_millis(100));
    }
}
