//! Client CPU per received snapshot: the reference shooter at ten players.
//!
//! A `Match<Shooter>` of ten sessions runs on virtual time (an ideal 20 ms network); every
//! datagram client 0 received is recorded. Each measured batch is a fresh session fed the
//! first two seconds of them untimed (handshake, welcome, warm history), then the next
//! snapshots timed: `handle_datagram` (decryption, the link, the message) and
//! `poll_event` until `None` (the replica's read, the clock sample, the interpolation
//! frame). A second benchmark adds what a renderer asks each snapshot: the render tick and
//! all ten players interpolated at it. A third times one interpolation of a player.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tickforge_client::{lerp, Session};
use tickforge_replication::{Lanes, NetId};

#[path = "../tests/shooter_world/mod.rs"]
mod shooter_world;

use shooter_world::{new_session, replay, server_addr, ShooterWorld, PERIOD, PLAYERS};

const WARM_TICKS: u32 = 256;
const RECORDED_TICKS: u32 = WARM_TICKS + 1024;

fn recording() -> (Instant, Vec<(u32, Vec<u8>)>) {
    let mut w = ShooterWorld::new(Duration::from_millis(20));
    w.run(RECORDED_TICKS);
    assert!(w.snapshots > 900, "{} snapshots", w.snapshots);
    (w.start, w.recorded)
}

fn snapshot(c: &mut Criterion) {
    let (start, datagrams) = recording();
    let split = datagrams.partition_point(|(t, _)| *t < WARM_TICKS);
    let (warm, timed) = datagrams.split_at(split);
    let mut scratch = Vec::with_capacity(2048);
    let fresh = |scratch: &mut Vec<u8>| -> Session {
        let mut s = new_session(0, start);
        replay(&mut s, start, warm, scratch);
        assert!(s.welcome().is_some());
        s
    };
    // Snapshots in the timed part, for the per-snapshot figure.
    let per_batch = {
        let mut s = fresh(&mut scratch);
        replay(&mut s, start, timed, &mut scratch)
    };
    eprintln!(
        "{} datagrams per batch, {per_batch} of them snapshots read, {} bytes on average",
        timed.len(),
        timed.iter().map(|(_, d)| d.len()).sum::<usize>() / timed.len().max(1)
    );
    let mut group = c.benchmark_group("client_session_shooter_10p");
    group
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(1));
    for render in [false, true] {
        let name = if render {
            "receive_snapshot_and_render"
        } else {
            "receive_snapshot"
        };
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let mut s = fresh(&mut scratch);
                    let n = (left as usize).min(timed.len());
                    let t0 = Instant::now();
                    for (t, bytes) in &timed[..n] {
                        let now = start + PERIOD * *t;
                        scratch.clear();
                        scratch.extend_from_slice(bytes);
                        s.handle_datagram(now, server_addr(), &mut scratch);
                        while let Some(e) = s.poll_event() {
                            black_box(&e);
                        }
                        if render {
                            if let Some(r) = s.render_tick(now) {
                                for id in 0..PLAYERS as u16 {
                                    black_box(s.entity_at(NetId(id), r));
                                }
                            }
                        }
                    }
                    total += t0.elapsed();
                    left -= n as u64;
                }
                total
            })
        });
    }
    group.finish();
}

/// One interpolation of a shooter player between two states a tick apart: running,
/// turning across the wrap of its yaw, at a fraction that is not a round number.
fn interpolate(c: &mut Criterion) {
    let schema = tickforge_shooter::schema();
    let (mut a, mut b) = (Lanes::ZERO, Lanes::ZERO);
    for (l, (x, y)) in [
        (1200, 1260),
        (-800, -790),
        (51200, 51250),
        (-3000, -2990),
        (4090, 6),
        (-40, -38),
    ]
    .into_iter()
    .enumerate()
    {
        (a.0[l], b.0[l]) = (x, y);
    }
    c.bench_function("interpolate one shooter player", |bench| {
        bench.iter(|| lerp(schema, black_box(&a), black_box(&b), black_box(0.37)))
    });
}

criterion_group!(benches, snapshot, interpolate);
criterion_main!(benches);
