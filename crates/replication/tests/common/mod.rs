//! Helpers shared by the replication tests and bench: a seeded RNG, a shooter-like entity
//! state and its schema, moving entities, and reading a snapshot's records back.
//!
//! The state and schema copy the reference shooter's (`crates/shooter`), so these tests
//! exercise the table shape the server runs without replication depending on any game;
//! `crates/shooter/tests/wire_fixture.rs` pins the real schema's bytes.

#![allow(dead_code)]

use tickforge_replication::{
    Coding, Field, Lanes, NetId, Position, Quantum, Replica, ReplicationConfig, Replicator, Schema,
    Viewer,
};

/// A point, metres: replication's own.
pub type Vec3 = Position;

const METRES: Quantum = Quantum::PerUnit(256.0);
const ANGLE: Quantum = Quantum::Turn { bits: 12 };

/// The shooter's table, field for field.
pub static SCHEMA: Schema = match Schema::new(&[
    Field::new("velocity xy", Coding::Pair, METRES),
    Field::new("position xy", Coding::Pair, METRES).predicted_from("velocity xy"),
    Field::new("view", Coding::AnglePair { bits: 12 }, ANGLE),
    Field::new("velocity z", Coding::Scalar, METRES),
    Field::new("position z", Coding::Scalar, METRES).predicted_from("velocity z"),
    Field::new("flags", Coding::Byte, Quantum::Whole),
    Field::new("health", Coding::Byte, Quantum::Whole),
    Field::new("weapon", Coding::Byte, Quantum::Whole),
]) {
    Ok(s) => s,
    Err(_) => panic!("a valid table"),
};

/// Bits of [`EntityState::flags`], as the shooter's.
pub mod flags {
    pub const ON_GROUND: u8 = 1 << 0;
    pub const CROUCHED: u8 = 1 << 1;
    pub const ALIVE: u8 = 1 << 2;
    pub const POSED: u8 = 1 << 3;
}

/// A shooter player's replicated state, in game units.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EntityState {
    pub position: Vec3,
    pub velocity: Vec3,
    pub yaw: u16,
    pub pitch: i16,
    pub flags: u8,
    pub health: u8,
    pub weapon: u8,
}

impl EntityState {
    /// In [`SCHEMA`]'s lanes, quantized as the shooter does.
    pub fn lanes(&self) -> Lanes {
        let mut q = Lanes::ZERO;
        q.0[..11].copy_from_slice(&[
            METRES.to_lane(self.velocity.x),
            METRES.to_lane(self.velocity.y),
            METRES.to_lane(self.position.x),
            METRES.to_lane(self.position.y),
            ANGLE.angle_to_lane(i32::from(self.yaw)) & 0xfff,
            ANGLE.angle_to_lane(i32::from(self.pitch)),
            METRES.to_lane(self.velocity.z),
            METRES.to_lane(self.position.z),
            i32::from(self.flags),
            i32::from(self.health),
            i32::from(self.weapon),
        ]);
        q
    }

    pub fn from_lanes(q: &Lanes) -> EntityState {
        let q = &q.0;
        let byte = |v: i32| v.clamp(0, 255) as u8;
        EntityState {
            position: Vec3::new(
                METRES.from_lane(q[2]),
                METRES.from_lane(q[3]),
                METRES.from_lane(q[7]),
            ),
            velocity: Vec3::new(
                METRES.from_lane(q[0]),
                METRES.from_lane(q[1]),
                METRES.from_lane(q[6]),
            ),
            yaw: ANGLE.lane_to_angle(q[4] & 0xfff) as u16,
            pitch: ANGLE.lane_to_angle(q[5].clamp(-2048, 2047)) as i16,
            flags: byte(q[8]),
            health: byte(q[9]),
            weapon: byte(q[10]),
        }
    }

    /// As a client sees it after the wire's quanta.
    pub fn quantized(&self) -> EntityState {
        EntityState::from_lanes(&self.lanes())
    }
}

/// Pushing a shooter-like state: its position and lanes.
pub trait Push {
    fn push(&mut self, id: NetId, s: &EntityState);
}

impl Push for Replicator {
    fn push(&mut self, id: NetId, s: &EntityState) {
        self.set_entity(id, s.position, &s.lanes());
    }
}

/// A replica's view as shooter-like states.
pub trait Shown {
    fn states(&self) -> Vec<(NetId, EntityState)>;
    fn state(&self, id: NetId) -> Option<EntityState>;
}

impl Shown for Replica {
    fn states(&self) -> Vec<(NetId, EntityState)> {
        self.entities()
            .map(|(id, q)| (id, EntityState::from_lanes(&q)))
            .collect()
    }

    fn state(&self, id: NetId) -> Option<EntityState> {
        self.entity(id).map(|q| EntityState::from_lanes(&q))
    }
}

/// splitmix64: a tiny seeded generator, so runs repeat exactly.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ z >> 30).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ z >> 27).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ z >> 31
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Entity `i` at `tick`: running around a circle of `radius_m` about `centre`, turning,
/// now and then jumping, its health dropping.
pub fn running(i: usize, tick: u32, centre: Vec3, radius_m: f32) -> EntityState {
    let speed = 6.0 + (i % 3) as f32;
    let phase = i as f32 * 0.7 + tick as f32 * speed / 128.0 / radius_m;
    let (s, c) = phase.sin_cos();
    let jump = (tick + i as u32 * 13) % 200;
    let (z, vz) = if jump < 40 {
        let t = jump as f32 / 128.0;
        (6.86 * t - 10.16 * t * t, 6.86 - 20.32 * t)
    } else {
        (0.0, 0.0)
    };
    EntityState {
        position: Vec3::new(centre.x + radius_m * c, centre.y + radius_m * s, z),
        velocity: Vec3::new(-speed * s, speed * c, vz),
        yaw: (phase * 65536.0 / std::f32::consts::TAU) as u32 as u16,
        pitch: ((tick as i32 * 7 + i as i32 * 100) % 2000 - 1000) as i16,
        flags: flags::ALIVE | if jump < 40 { 0 } else { flags::ON_GROUND },
        health: 100 - (tick / 50 % 100) as u8,
        weapon: 30 - (tick / 20 % 30) as u8,
    }
}

/// A viewer at an entity's position, looking its way.
pub fn viewer_of(s: &EntityState) -> Viewer {
    Viewer {
        position: s.position,
        yaw: s.yaw,
    }
}

/// Asserts that `replica` shows exactly `expected` (id, server state), quantized.
pub fn assert_view(replica: &Replica, expected: &[(NetId, EntityState)], what: &str) {
    let got: Vec<(NetId, EntityState)> = replica.states();
    let want: Vec<(NetId, EntityState)> = expected
        .iter()
        .map(|&(id, s)| (id, s.quantized()))
        .collect();
    assert_eq!(got, want, "{what}");
}

/// A replicator with `config` and a matching replica per connection.
pub fn config_small() -> ReplicationConfig {
    ReplicationConfig {
        max_entities: 64,
        max_connections: 8,
        ..ReplicationConfig::default()
    }
}

pub fn new_replicator(config: ReplicationConfig) -> Replicator {
    Replicator::new(config, &SCHEMA)
}
