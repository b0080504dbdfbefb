//! Full-state snapshots, quantized once per tick and shared by every connection.
//!
//! ```text
//! body: posing u8 | count u8 | count × entity
//! posing: 1 when the tick was posed (combat), 0 when players were held idle (buy phase)
//! entity (24 bytes):
//!   slot u8 | x i32 | y i32 | z i32          position, centimetres
//!   vx i16 | vy i16 | vz i16                 velocity, centimetres per second
//!   yaw u16 | pitch i16                      1/65536 turn
//!   flags u8                                 bit 0: on the ground, bit 1: alive
//! ```

use tickforge_game::history::Posing;
use tickforge_game::{PlayerState, Vec3, World};
use tickforge_proto::wire::{Reader, Truncated, Writer};

/// Encoded size of one entity.
pub const ENTITY_BYTES: usize = 1 + 12 + 6 + 4 + 1;

/// Encoded size of the body's header: posing and count.
pub const HEADER_BYTES: usize = 2;

/// Centimetres per metre: position quantum is 1 cm.
const POS_SCALE: f32 = 100.0;
/// Velocity quantum is 1 cm/s.
const VEL_SCALE: f32 = 100.0;

/// Encodes the world once per tick into a body every connection's snapshot reuses.
#[derive(Default)]
pub struct SnapshotWriter {
    body: Vec<u8>,
}

impl SnapshotWriter {
    /// A writer with room for `players` entities, so writing never allocates.
    pub fn with_capacity(players: usize) -> Self {
        SnapshotWriter {
            body: Vec::with_capacity(HEADER_BYTES + players * ENTITY_BYTES),
        }
    }

    /// Quantizes the players of `world` into the shared body and returns it: the first 255
    /// slots at most, as the format's one-byte count and slot allow (a bandwidth baseline
    /// for tests, not the wire the server sends).
    pub fn write(&mut self, world: &World) -> &[u8] {
        self.body.clear();
        let players = world.players();
        let count = players.len().min(usize::from(u8::MAX));
        let mut w = Writer::new(&mut self.body);
        w.u8(u8::from(world.posing() == Posing::Animated));
        w.u8(count as u8);
        for (slot, p) in players.iter().take(count).enumerate() {
            let s = &p.state;
            let alive = world
                .rules()
                .is_alive(tickforge_game::PlayerSlot(slot as u16));
            w.u8(slot as u8);
            w.i32(quantize_i32(s.origin.x, POS_SCALE));
            w.i32(quantize_i32(s.origin.y, POS_SCALE));
            w.i32(quantize_i32(s.origin.z, POS_SCALE));
            w.i16(quantize_i16(s.velocity.x, VEL_SCALE));
            w.i16(quantize_i16(s.velocity.y, VEL_SCALE));
            w.i16(quantize_i16(s.velocity.z, VEL_SCALE));
            w.u16(s.yaw);
            w.i16(s.pitch);
            w.u8(u8::from(s.on_ground) | u8::from(alive) << 1);
        }
        &self.body
    }

    /// The body written last.
    pub fn body(&self) -> &[u8] {
        &self.body
    }
}

fn quantize_i32(v: f32, scale: f32) -> i32 {
    // `as` saturates and maps NaN to 0: hostile floats cannot wrap.
    (v * scale).round() as i32
}

fn quantize_i16(v: f32, scale: f32) -> i16 {
    (v * scale).round() as i16
}

/// One player as a client sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EntityView {
    /// Player slot in the match.
    pub slot: u8,
    /// Position, velocity and view, dequantized.
    pub state: PlayerState,
    /// Alive at the snapshot's tick.
    pub alive: bool,
}

/// A snapshot body that does not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Shorter than its count says.
    #[error("snapshot truncated")]
    Truncated,
    /// Bytes left over after the last entity.
    #[error("snapshot has trailing bytes")]
    TrailingBytes,
}

impl From<Truncated> for SnapshotError {
    fn from(_: Truncated) -> Self {
        SnapshotError::Truncated
    }
}

/// Client-side view of the match, rebuilt from each snapshot into reused storage.
pub struct SnapshotReader {
    entities: Vec<EntityView>,
    posing: Posing,
}

impl Default for SnapshotReader {
    fn default() -> Self {
        SnapshotReader::with_capacity(0)
    }
}

impl SnapshotReader {
    /// A reader with room for `players` entities.
    pub fn with_capacity(players: usize) -> Self {
        SnapshotReader {
            entities: Vec::with_capacity(players),
            posing: Posing::Idle,
        }
    }

    /// The entities of the last snapshot read.
    pub fn entities(&self) -> &[EntityView] {
        &self.entities
    }

    /// How the server posed the last snapshot's tick (idle in the buy phase).
    pub fn posing(&self) -> Posing {
        self.posing
    }

    /// Decodes `body`, replacing the view. On error the view is left empty.
    pub fn read(&mut self, body: &[u8]) -> Result<&[EntityView], SnapshotError> {
        self.entities.clear();
        let mut r = Reader::new(body);
        self.posing = if r.u8()? & 1 != 0 {
            Posing::Animated
        } else {
            Posing::Idle
        };
        let count = usize::from(r.u8()?);
        if r.remaining() < count * ENTITY_BYTES {
            return Err(SnapshotError::Truncated);
        }
        for _ in 0..count {
            let slot = r.u8()?;
            let origin = Vec3::new(
                r.i32()? as f32 / POS_SCALE,
                r.i32()? as f32 / POS_SCALE,
                r.i32()? as f32 / POS_SCALE,
            );
            let velocity = Vec3::new(
                f32::from(r.i16()?) / VEL_SCALE,
                f32::from(r.i16()?) / VEL_SCALE,
                f32::from(r.i16()?) / VEL_SCALE,
            );
            let yaw = r.u16()?;
            let pitch = r.i16()?;
            let flags = r.u8()?;
            self.entities.push(EntityView {
                slot,
                state: PlayerState {
                    origin,
                    velocity,
                    yaw,
                    pitch,
                    on_ground: flags & 1 != 0,
                    ..PlayerState::default()
                },
                alive: flags & 2 != 0,
            });
        }
        if r.remaining() != 0 {
            self.entities.clear();
            return Err(SnapshotError::TrailingBytes);
        }
        Ok(&self.entities)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tickforge_game::{PlayerSlot, UserCmd, WorldConfig};
    use tickforge_telemetry::Scopes;

    fn stepped_world(ticks: u32) -> World {
        let mut w = World::new(WorldConfig::default());
        let scopes = Scopes::new(std::time::Instant::now);
        for t in 0..ticks {
            for s in 0..10u8 {
                let cmd = UserCmd {
                    forward: 100,
                    side: (t as i8).wrapping_mul(3),
                    yaw: (t * 300 + u32::from(s) * 5000) as u16,
                    ..Default::default()
                };
                w.set_cmd(PlayerSlot(u16::from(s)), cmd);
            }
            w.step(&scopes);
        }
        w
    }

    #[test]
    fn round_trip_is_within_quantization() {
        let world = stepped_world(100);
        let mut writer = SnapshotWriter::with_capacity(10);
        let body = writer.write(&world).to_vec();
        assert_eq!(
            body.len(),
            HEADER_BYTES + 10 * ENTITY_BYTES,
            "measured size equals written size"
        );
        let mut reader = SnapshotReader::with_capacity(10);
        let seen = reader.read(&body).unwrap();
        assert_eq!(seen.len(), 10);
        for (view, p) in seen.iter().zip(world.players()) {
            let d = view.state.origin - p.state.origin;
            assert!(
                d.x.abs() <= 0.005 && d.y.abs() <= 0.005 && d.z.abs() <= 0.005,
                "{d:?}"
            );
            let dv = view.state.velocity - p.state.velocity;
            assert!(dv.length() <= 0.01, "{dv:?}");
            assert_eq!(view.state.yaw, p.state.yaw);
            assert_eq!(view.state.pitch, p.state.pitch);
            assert_eq!(view.state.on_ground, p.state.on_ground);
            assert_eq!(
                view.alive,
                world.rules().is_alive(PlayerSlot(u16::from(view.slot)))
            );
        }
    }

    #[test]
    fn truncated_and_padded_bodies_are_refused() {
        let world = stepped_world(3);
        let mut writer = SnapshotWriter::default();
        let body = writer.write(&world).to_vec();
        let mut reader = SnapshotReader::default();
        assert_eq!(
            reader.read(&body[..body.len() - 1]),
            Err(SnapshotError::Truncated)
        );
        let mut padded = body.clone();
        padded.push(0);
        assert_eq!(reader.read(&padded), Err(SnapshotError::TrailingBytes));
        assert!(reader.entities().is_empty());
    }

    proptest! {
        #[test]
        fn reader_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut reader = SnapshotReader::default();
            let _ = reader.read(&data);
        }
    }
}
