//! Helpers shared by the replication tests: a seeded RNG, moving entities, and reading a
//! snapshot's records back.

#![allow(dead_code)]

use tickforge_game::Vec3;
use tickforge_replication::{
    flags, EntityState, NetId, Replica, ReplicationConfig, Replicator, Viewer,
};

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
    let got: Vec<(NetId, EntityState)> = replica.entities().collect();
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
    Replicator::new(config)
}
