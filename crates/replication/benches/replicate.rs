//! Replication cost: one server tick of 100 moving entities for 100 connections that all
//! see each other (begin_tick, set_entity × 100, acks, write × 100), acks two ticks late so
//! deltas flow; and a client decoding one snapshot of it.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use tickforge_game::Vec3;
use tickforge_replication::{
    EntityState, NetId, Replica, ReplicaConfig, ReplicationConfig, Replicator, Viewer,
};

const N: usize = 100;
/// Ticks of precomputed states each bench cycles through.
const TICKS: u32 = 512;
const ACK_DELAY: u32 = 2;

/// Entity `i` at `t`: running around a 40 m circle, turning, 100 entities within 80 m.
fn state(i: usize, t: u32) -> EntityState {
    let phase = i as f32 * 0.063 + t as f32 * 7.0 / 128.0 / 40.0;
    let (s, c) = phase.sin_cos();
    EntityState {
        position: Vec3::new(40.0 * c, 40.0 * s, 0.0),
        velocity: Vec3::new(-7.0 * s, 7.0 * c, 0.0),
        yaw: (phase * 65536.0 / std::f32::consts::TAU) as u32 as u16,
        pitch: (t % 200) as i16 * 4,
        flags: 5,
        health: 100,
        weapon: 30,
    }
}

struct Match {
    r: Replicator,
    states: Vec<Vec<EntityState>>,
    outs: Vec<Vec<u8>>,
    tick: u32,
}

impl Match {
    fn new() -> Match {
        let config = ReplicationConfig {
            max_entities: 128,
            max_connections: N,
            ..ReplicationConfig::default()
        };
        let mut r = Replicator::new(config);
        for c in 0..N {
            r.connect(c, Some(NetId(c as u16)));
        }
        Match {
            r,
            states: (0..TICKS)
                .map(|t| (0..N).map(|i| state(i, t)).collect())
                .collect(),
            outs: (0..N).map(|_| Vec::with_capacity(1500)).collect(),
            tick: 0,
        }
    }

    fn step(&mut self) -> usize {
        let t = self.tick;
        self.tick += 1;
        let states = &self.states[(t % TICKS) as usize];
        self.r.begin_tick(t);
        for (i, s) in states.iter().enumerate() {
            self.r.set_entity(NetId(i as u16), s);
        }
        let mut bytes = 0;
        for (c, (out, own)) in self.outs.iter_mut().zip(states).enumerate() {
            if t >= ACK_DELAY {
                self.r.on_ack(c, t - ACK_DELAY);
            }
            out.clear();
            let viewer = Viewer {
                position: own.position,
                yaw: own.yaw,
            };
            bytes += self.r.write(c, &viewer, None, 1400, out).bytes;
        }
        bytes
    }
}

fn replicate(c: &mut Criterion) {
    let mut m = Match::new();
    for _ in 0..2 * TICKS {
        m.step();
    }
    let before = m.r.stats();
    let mut bytes = 0;
    for _ in 0..TICKS {
        bytes += m.step();
    }
    let s = m.r.stats();
    eprintln!(
        "100 x 100: {} B per client per tick, cache hit rate {:.3}, {} full / {} delta records",
        bytes / (TICKS as usize * N),
        (s.cache_hits - before.cache_hits) as f64
            / ((s.cache_hits - before.cache_hits) + (s.cache_misses - before.cache_misses)) as f64,
        s.full_records - before.full_records,
        s.delta_records - before.delta_records,
    );
    c.bench_function("replicate 100 entities x 100 connections, one tick", |b| {
        b.iter(|| black_box(m.step()));
    });

    // The client: connection 0's snapshots of TICKS ticks, decoded in order.
    let mut m = Match::new();
    let bodies: Vec<Vec<u8>> = (0..TICKS)
        .map(|_| {
            m.step();
            m.outs[0].clone()
        })
        .collect();
    let config = ReplicaConfig::matching(m.r.config());
    let mut replica = Replica::new(config);
    let mut at = 0usize;
    c.bench_function("read one snapshot of 100 entities", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                if at == bodies.len() {
                    replica.reset();
                    at = 0;
                }
                let start = Instant::now();
                black_box(replica.read(&bodies[at]).unwrap());
                spent += start.elapsed();
                at += 1;
            }
            spent
        });
    });
}

criterion_group!(benches, replicate);
criterion_main!(benches);
