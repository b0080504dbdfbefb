//! What is replicated of one entity, and its quantized form.
//!
//! Quanta: position 1/256 m (3.9 mm), velocity 1/256 m/s, yaw and pitch 1/4096 turn (0.088°), flags,
//! health and weapon whole bytes. The game's angles are 1/65536 turn; the low 4 bits are
//! rounded off on the wire because they cost a byte per changing angle and are below what a
//! client can draw (0.088° is 1.5 cm at 10 m).

use tickforge_game::{PlayerState, Vec3};

/// An entity's network id, `0..max_entities` of the match (at most [`MAX_ENTITIES`]).
///
/// Distinct from the server's own entity handles: the game maps its entities to these
/// small ids, and may reuse an id once the entity is gone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetId(pub u16);

impl NetId {
    /// The id as an index into per-entity tables.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// Largest `max_entities` a replicator or replica may be configured with.
pub const MAX_ENTITIES: usize = 1024;

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

/// Everything a client is sent about one entity: a plain value the game fills in.
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
        QState::from_state(self).to_state()
    }
}

/// Lanes of a [`QState`]: the quantized scalars, in the order the field table uses them.
pub(crate) mod lane {
    pub const VX: usize = 0;
    pub const VY: usize = 1;
    pub const PX: usize = 2;
    pub const PY: usize = 3;
    pub const YAW: usize = 4;
    pub const PITCH: usize = 5;
    pub const VZ: usize = 6;
    pub const PZ: usize = 7;
    pub const FLAGS: usize = 8;
    pub const HEALTH: usize = 9;
    pub const WEAPON: usize = 10;
    pub const COUNT: usize = 11;
}

/// Wire units per metre: the position quantum is 1/256 m (3.9 mm), the velocity quantum
/// 1/256 m/s. A power of two, so the game's own 1/256 m skin above a floor is exact; finer
/// than a centimetre because a client judging its own shots (hit registration) disagrees
/// with the server about every shot that grazes a hitbox within a quantum.
const UNITS_PER_M: f32 = 256.0;
/// The game's angle units (1/65536 turn) per wire angle unit (1/4096 turn).
const ANGLE_SHIFT: u32 = 4;
/// Wire angles are 12 bits.
pub(crate) const ANGLE_MASK: i32 = 0xfff;

/// One entity's state at one tick, kept as a baseline (server ring, client history).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stored {
    /// The tick the state is of.
    pub tick: u32,
    /// The slot holds a state (false: never written or forgotten).
    pub filled: bool,
    /// The state, in wire units.
    pub q: QState,
}

/// An entity state in wire units: what the server stores as baselines, what deltas are
/// taken between, and what the client stores to decode against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QState(pub [i32; lane::COUNT]);

impl QState {
    /// The all-zero state full updates are encoded against.
    pub const ZERO: QState = QState([0; lane::COUNT]);

    pub fn from_state(s: &EntityState) -> QState {
        let mut q = [0i32; lane::COUNT];
        q[lane::PX] = to_units(s.position.x);
        q[lane::PY] = to_units(s.position.y);
        q[lane::PZ] = to_units(s.position.z);
        q[lane::VX] = to_units(s.velocity.x);
        q[lane::VY] = to_units(s.velocity.y);
        q[lane::VZ] = to_units(s.velocity.z);
        // Round to the nearest 1/4096 turn; 65535 rounds up to a whole turn, which wraps to 0.
        q[lane::YAW] = ((i32::from(s.yaw) + 8) >> ANGLE_SHIFT) & ANGLE_MASK;
        q[lane::PITCH] = (i32::from(s.pitch) + 8) >> ANGLE_SHIFT;
        q[lane::FLAGS] = i32::from(s.flags);
        q[lane::HEALTH] = i32::from(s.health);
        q[lane::WEAPON] = i32::from(s.weapon);
        QState(q)
    }

    /// Dequantizes. Every lane value is accepted, since a decoded state may carry anything
    /// a hostile sender chose: out-of-range values saturate rather than wrap.
    pub fn to_state(self) -> EntityState {
        let q = &self.0;
        let byte = |v: i32| v.clamp(0, 255) as u8;
        EntityState {
            position: Vec3::new(
                from_units(q[lane::PX]),
                from_units(q[lane::PY]),
                from_units(q[lane::PZ]),
            ),
            velocity: Vec3::new(
                from_units(q[lane::VX]),
                from_units(q[lane::VY]),
                from_units(q[lane::VZ]),
            ),
            yaw: ((q[lane::YAW] & ANGLE_MASK) << ANGLE_SHIFT) as u16,
            pitch: (q[lane::PITCH].clamp(-2048, 2047) << ANGLE_SHIFT) as i16,
            flags: byte(q[lane::FLAGS]),
            health: byte(q[lane::HEALTH]),
            weapon: byte(q[lane::WEAPON]),
        }
    }
}

fn to_units(m: f32) -> i32 {
    // `as` saturates and maps NaN to 0: a wild float cannot wrap.
    (m * UNITS_PER_M).round() as i32
}

fn from_units(units: i32) -> f32 {
    units as f32 / UNITS_PER_M
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
