//! A warm tick allocates nothing: 100 moving entities, 100 connections with fog rows and
//! acks, writing a snapshot each; and a client decoding them.
//!
//! A counting global allocator sees every allocation of this test binary; only those made
//! inside the measured closure on this thread are counted.

mod common;

use common::{running, viewer_of, Push, Vec3, SCHEMA};
use tickforge_replication::{NetId, Replica, ReplicaConfig, ReplicationConfig, Replicator};
use tickforge_testkit::alloc::{allocations_in, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_warm_tick_of_100_entities_for_100_connections_allocates_nothing() {
    let s = warm_ticks_allocate_nothing(1400);
    assert!(
        s.delta_records > s.full_records && s.gone_records > 0 && s.cache_hits > 0,
        "{s:?}"
    );
}

/// Packets too small for every relevant entity: the crowd's path, its writes planned every
/// other tick.
#[test]
fn a_warm_crowded_tick_allocates_nothing() {
    let s = warm_ticks_allocate_nothing(300);
    assert!(s.deferred > 0 && s.planned > 0, "{s:?}");
}

/// Runs 200 warm ticks, then 200 more counting allocations, with packets of `budget` bytes.
fn warm_ticks_allocate_nothing(budget: usize) -> tickforge_replication::ReplicationStats {
    const N: usize = 100;
    let config = ReplicationConfig {
        max_entities: 128,
        max_connections: N,
        ..ReplicationConfig::default()
    };
    let mut r = Replicator::new(config, &SCHEMA);
    let mut replica = Replica::new(ReplicaConfig::matching(&config), &SCHEMA);
    for c in 0..N {
        r.connect(c, Some(NetId(c as u16)));
    }
    let mut outs: Vec<Vec<u8>> = (0..N).map(|_| Vec::with_capacity(1500)).collect();
    // Each connection's fog hides one other entity.
    let rows: Vec<[u64; 2]> = (0..N)
        .map(|c| {
            let mut row = [u64::MAX; 2];
            let hidden = (c * 7 + 3) % N;
            row[hidden / 64] &= !(1 << (hidden % 64));
            row
        })
        .collect();
    let centre = Vec3::new(0.0, 0.0, 0.0);
    let tick = |t: u32, r: &mut Replicator, replica: &mut Replica, outs: &mut [Vec<u8>]| {
        r.begin_tick(t);
        for i in 0..N {
            r.push(NetId(i as u16), &running(i, t, centre, 20.0 + i as f32));
        }
        // Some entities leave and come back: gone records and re-entry.
        if t % 50 == 25 {
            r.remove_entity(NetId(99));
        }
        for c in 0..N {
            if t >= 2 && !(c + t as usize).is_multiple_of(5) {
                r.on_ack(c, t - 2);
            }
            outs[c].clear();
            let viewer = viewer_of(&running(c, t, centre, 20.0 + c as f32));
            r.write(c, &viewer, Some(&rows[c]), budget, &mut outs[c]);
        }
        replica.read(&outs[0]).unwrap();
    };
    for t in 0..200 {
        tick(t, &mut r, &mut replica, &mut outs);
    }
    for t in 200..400 {
        let ((), n) = allocations_in(|| tick(t, &mut r, &mut replica, &mut outs));
        assert_eq!(n, 0, "tick {t} allocated");
    }
    r.stats()
}
