//! The reference shooter on the wire: what its matches replicate and how.
//!
//! What it does:
//! - [`schema`]: the shooter's replicated fields, the table `tickforge-replication`
//!   encodes, decodes and measures with (the server's `Replicator` and the bots'
//!   `Replica` take the same one).
//! - [`EntityState`]: one player as a client is told of it, quantized to the schema's
//!   lanes with [`EntityState::lanes`] and read back with [`EntityState::from_lanes`];
//!   [`entity_state`] builds it from the game's `World`, and [`flags`] says what its flag
//!   bits mean.
//! - [`cmd`]: the player command format; [`SnapshotWriter`] / [`SnapshotReader`]: the
//!   full-state format (every player every tick), kept as the baseline delta replication
//!   is measured against.
//!
//! What it does not do: replication itself (relevancy, priority, baselines, the codec),
//! which knows no game, nor the game's simulation (`tickforge-game`), which knows no
//! networking. This crate is where the two meet: the shooter's side of the game boundary.
//!
//! In order of importance: the bytes on the wire stay what the pinned fixture
//! (`tests/wire_fixture.rs`) says; quantization is exact and documented once, here.

pub mod cmd;
mod config;
pub mod event;
mod game;
mod snapshot;

use tickforge_game::history::Posing;
use tickforge_game::{PlayerSlot, PlayerState, Vec3, World};
use tickforge_replication::{
    Coding, Field, Lanes, NetId, Position, Quantum, Replicator, Schema, Viewer,
};

pub use config::ShooterConfig;
pub use event::{ShooterEvent, NONE, NO_SLOT};
pub use game::{body_part_code, Shooter};
pub use snapshot::{
    EntityView, SnapshotError, SnapshotReader, SnapshotWriter, ENTITY_BYTES, HEADER_BYTES,
};

/// Wire units per metre: the position quantum is 1/256 m (3.9 mm), the velocity quantum
/// 1/256 m/s. A power of two, so the game's own 1/256 m skin above a floor is exact; finer
/// than a centimetre because a client judging its own shots (hit registration) disagrees
/// with the server about every shot that grazes a hitbox within a quantum.
const METRES: Quantum = Quantum::PerUnit(256.0);
/// Yaw and pitch go as 1/4096 turn (0.088°): the game's angles are 1/65536 turn, and the
/// low 4 bits are rounded off on the wire because they cost a byte per changing angle and
/// are below what a client can draw (0.088° is 1.5 cm at 10 m).
const TURN_BITS: u8 = 12;
const ANGLE: Quantum = Quantum::Turn { bits: TURN_BITS };
const ANGLE_MASK: i32 = (1 << TURN_BITS) - 1;
/// Pitch in wire units stays within ±half a turn of 12 bits.
const PITCH_MIN: i32 = -(1 << (TURN_BITS - 1));
const PITCH_MAX: i32 = (1 << (TURN_BITS - 1)) - 1;

/// The shooter's replicated fields, ordered by how often they change so that a running,
/// jumping, looking-around player's record head is one byte (mask bits 0..6 share it).
static SCHEMA: Schema = match Schema::new(&[
    Field::new("velocity xy", Coding::Pair, METRES),
    Field::new("position xy", Coding::Pair, METRES).predicted_from("velocity xy"),
    Field::new("view", Coding::AnglePair { bits: TURN_BITS }, ANGLE),
    Field::new("velocity z", Coding::Scalar, METRES),
    Field::new("position z", Coding::Scalar, METRES).predicted_from("velocity z"),
    Field::new("flags", Coding::Byte, Quantum::Whole),
    Field::new("health", Coding::Byte, Quantum::Whole),
    Field::new("weapon", Coding::Byte, Quantum::Whole),
]) {
    Ok(s) => s,
    Err(_) => panic!("the shooter's schema is a valid table"),
};

/// The shooter's schema: give it to the server's `Replicator` and every client's `Replica`.
pub fn schema() -> &'static Schema {
    &SCHEMA
}

/// The lanes of [`schema`], in its table order.
pub mod lane {
    /// Velocity, 1/256 m/s.
    pub const VX: usize = 0;
    /// Velocity, 1/256 m/s.
    pub const VY: usize = 1;
    /// Position, 1/256 m.
    pub const PX: usize = 2;
    /// Position, 1/256 m.
    pub const PY: usize = 3;
    /// View yaw, 1/4096 turn, 0..4096.
    pub const YAW: usize = 4;
    /// View pitch, 1/4096 turn, signed.
    pub const PITCH: usize = 5;
    /// Velocity, 1/256 m/s.
    pub const VZ: usize = 6;
    /// Position, 1/256 m.
    pub const PZ: usize = 7;
    /// [`flags`](super::flags) bits.
    pub const FLAGS: usize = 8;
    /// Health points.
    pub const HEALTH: usize = 9;
    /// Weapon state.
    pub const WEAPON: usize = 10;
    /// Lanes the schema takes.
    pub const COUNT: usize = 11;
}

/// Bits of [`EntityState::flags`].
pub mod flags {
    /// Standing on a floor or a box top (the game's `PlayerState::on_ground`).
    pub const ON_GROUND: u8 = 1 << 0;
    /// Crouched.
    pub const CROUCHED: u8 = 1 << 1;
    /// Alive: clear for a dead player whose body is still shown.
    pub const ALIVE: u8 = 1 << 2;
    /// The server posed this tick (combat); clear while the buy phase holds everyone idle.
    /// Clients that judge their own shots pose their history alike.
    pub const POSED: u8 = 1 << 3;
}

/// Everything a client is sent about one player: a plain value the server fills in.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EntityState {
    /// Feet position, metres; sent to 1/256 m.
    pub position: Vec3,
    /// Velocity, m/s; sent to 1/256 m/s.
    pub velocity: Vec3,
    /// View yaw, 1/65536 turn; sent to 1/4096 turn.
    pub yaw: u16,
    /// View pitch, 1/65536 turn; sent to 1/4096 turn.
    pub pitch: i16,
    /// [`flags`] bits.
    pub flags: u8,
    /// Health points, 0..=255.
    pub health: u8,
    /// Weapon state: the game's choice (ammo, or weapon id and state packed).
    pub weapon: u8,
}

impl EntityState {
    /// A player's movement state with the fields movement does not own. `flags` are
    /// [`flags`] bits other than [`flags::ON_GROUND`] and [`flags::CROUCHED`], which are
    /// taken from `player`.
    pub fn from_player(player: &PlayerState, health: u8, weapon: u8, flags: u8) -> Self {
        let ground = if player.on_ground {
            flags::ON_GROUND
        } else {
            0
        };
        let crouched = if player.crouched { flags::CROUCHED } else { 0 };
        EntityState {
            position: player.origin,
            velocity: player.velocity,
            yaw: player.yaw,
            pitch: player.pitch,
            flags: (flags & !(flags::ON_GROUND | flags::CROUCHED)) | ground | crouched,
            health,
            weapon,
        }
    }

    /// The movement part, as the game's movement code takes it (a client predicting or
    /// extrapolating a remote player).
    pub fn to_player(&self) -> PlayerState {
        PlayerState {
            origin: self.position,
            velocity: self.velocity,
            yaw: self.yaw,
            pitch: self.pitch,
            on_ground: self.flags & flags::ON_GROUND != 0,
            crouched: self.flags & flags::CROUCHED != 0,
        }
    }

    /// This state as a client sees it after the trip through the wire's quanta.
    pub fn quantized(&self) -> EntityState {
        EntityState::from_lanes(&self.lanes())
    }

    /// Where relevancy and priority place this player.
    pub fn position(&self) -> Position {
        position(self.position)
    }

    /// The state in [`schema`]'s wire units: what the server pushes, once per change.
    pub fn lanes(&self) -> Lanes {
        let mut q = Lanes::ZERO;
        let l = &mut q.0;
        l[lane::PX] = METRES.to_lane(self.position.x);
        l[lane::PY] = METRES.to_lane(self.position.y);
        l[lane::PZ] = METRES.to_lane(self.position.z);
        l[lane::VX] = METRES.to_lane(self.velocity.x);
        l[lane::VY] = METRES.to_lane(self.velocity.y);
        l[lane::VZ] = METRES.to_lane(self.velocity.z);
        // Round to the nearest 1/4096 turn; 65535 rounds up to a whole turn, which wraps to 0.
        l[lane::YAW] = ANGLE.angle_to_lane(i32::from(self.yaw)) & ANGLE_MASK;
        l[lane::PITCH] = ANGLE.angle_to_lane(i32::from(self.pitch));
        l[lane::FLAGS] = i32::from(self.flags);
        l[lane::HEALTH] = i32::from(self.health);
        l[lane::WEAPON] = i32::from(self.weapon);
        q
    }

    /// Dequantizes lanes of [`schema`]. Every lane value is accepted, since decoded lanes
    /// may carry anything a hostile sender chose: out-of-range values saturate rather
    /// than wrap.
    pub fn from_lanes(lanes: &Lanes) -> EntityState {
        let q = &lanes.0;
        let byte = |v: i32| v.clamp(0, 255) as u8;
        EntityState {
            position: Vec3::new(
                METRES.from_lane(q[lane::PX]),
                METRES.from_lane(q[lane::PY]),
                METRES.from_lane(q[lane::PZ]),
            ),
            velocity: Vec3::new(
                METRES.from_lane(q[lane::VX]),
                METRES.from_lane(q[lane::VY]),
                METRES.from_lane(q[lane::VZ]),
            ),
            yaw: ANGLE.lane_to_angle(q[lane::YAW] & ANGLE_MASK) as u16,
            pitch: ANGLE.lane_to_angle(q[lane::PITCH].clamp(PITCH_MIN, PITCH_MAX)) as i16,
            flags: byte(q[lane::FLAGS]),
            health: byte(q[lane::HEALTH]),
            weapon: byte(q[lane::WEAPON]),
        }
    }
}

/// A game position as replication's.
pub fn position(v: Vec3) -> Position {
    Position::new(v.x, v.y, v.z)
}

/// The viewer of a player at `state`: where relevancy and priority centre on.
pub fn viewer(state: &PlayerState) -> Viewer {
    Viewer {
        position: position(state.origin),
        yaw: state.yaw,
    }
}

/// Pushes `state` as entity `id`: quantized to [`schema`]'s lanes once, placed at its
/// position. The replicator must have been made with [`schema`].
pub fn push(replicator: &mut Replicator, id: NetId, state: &EntityState) {
    debug_assert!(
        std::ptr::eq(replicator.schema(), schema()),
        "the shooter's schema"
    );
    replicator.set_entity(id, state.position(), &state.lanes());
}

/// What a client is told of `slot` of `world`.
pub fn entity_state(world: &World, slot: PlayerSlot) -> EntityState {
    let rules = world.rules();
    let p = &world.players()[usize::from(slot.0)];
    let mut bits = 0;
    if rules.is_alive(slot) {
        bits |= flags::ALIVE;
    }
    if world.posing() == Posing::Animated {
        bits |= flags::POSED;
    }
    let ammo = rules.weapon(slot).map_or(0, |w| w.ammo().min(255) as u8);
    EntityState::from_player(&p.state, rules.health_hp(slot).min(255) as u8, ammo, bits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_schema_takes_the_lanes_named_here() {
        let s = schema();
        assert_eq!(s.lane_count(), lane::COUNT);
        for (name, l) in [
            ("velocity xy", lane::VX),
            ("position xy", lane::PX),
            ("view", lane::YAW),
            ("velocity z", lane::VZ),
            ("position z", lane::PZ),
            ("flags", lane::FLAGS),
            ("health", lane::HEALTH),
            ("weapon", lane::WEAPON),
        ] {
            assert_eq!(s.lane_of(name), Some(l), "{name}");
        }
        assert_eq!(s.max_body_bytes(), 10 + 10 + 10 + 5 + 5 + 1 + 1 + 1);
    }

    #[test]
    fn quantized_is_a_fixed_point() {
        let s = EntityState {
            position: Vec3::new(123.456, -0.004, 1.2345),
            velocity: Vec3::new(8.13, -3.333, 0.0),
            yaw: 65535,
            pitch: -16000,
            flags: flags::ALIVE | flags::ON_GROUND,
            health: 100,
            weapon: 30,
        };
        let q = s.quantized();
        assert_eq!(q.quantized(), q);
        assert_eq!(q.yaw, 0, "65535 is nearer a whole turn than 65520");
        assert_eq!(q.position.x * 256.0, (123.456_f32 * 256.0).round());
        assert_eq!(q.pitch, -16000);
    }

    #[test]
    fn player_round_trip_keeps_the_ground_flag() {
        let p = PlayerState {
            origin: Vec3::new(1.0, 2.0, 3.0),
            velocity: Vec3::new(0.5, 0.0, -1.0),
            yaw: 4096,
            pitch: 32,
            on_ground: true,
            crouched: true,
        };
        let s = EntityState::from_player(&p, 90, 7, flags::ALIVE);
        assert_eq!(s.flags, flags::ALIVE | flags::ON_GROUND | flags::CROUCHED);
        assert_eq!(s.to_player(), p);
        let s = EntityState::from_player(
            &PlayerState::default(),
            0,
            0,
            flags::ON_GROUND | flags::CROUCHED,
        );
        assert_eq!(
            s.flags, 0,
            "stance comes from the player, not the extra flags"
        );
    }

    #[test]
    fn hostile_lanes_saturate() {
        let mut q = Lanes::ZERO;
        q.0[lane::PITCH] = i32::MAX;
        q.0[lane::YAW] = -1;
        q.0[lane::HEALTH] = 300;
        q.0[lane::FLAGS] = -5;
        let s = EntityState::from_lanes(&q);
        assert_eq!(
            (s.pitch, s.yaw, s.health, s.flags),
            (2047 << 4, 4095 << 4, 255, 0)
        );
    }

    proptest! {
        #[test]
        fn quantization_error_is_within_the_quanta(
            x in -20_000.0f32..20_000.0, v in -100.0f32..100.0, yaw: u16, pitch in -16200i16..16200,
        ) {
            let s = EntityState {
                position: Vec3::new(x, -x, x / 3.0),
                velocity: Vec3::new(v, -v, v / 2.0),
                yaw,
                pitch,
                ..Default::default()
            };
            let q = s.quantized();
            prop_assert!((q.position.x - x).abs() <= 0.5 / 256.0 + x.abs() * 1e-6);
            prop_assert!((q.velocity.x - v).abs() <= 0.5 / 256.0 + v.abs() * 1e-6);
            let dyaw = q.yaw.wrapping_sub(yaw) as i16;
            prop_assert!(dyaw.abs() <= 8, "yaw off by {dyaw}");
            prop_assert!((i32::from(q.pitch) - i32::from(pitch)).abs() <= 8);
            prop_assert_eq!(q.quantized(), q);
        }
    }
}
