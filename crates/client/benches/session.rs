//! Client CPU per received snapshot: the reference shooter at ten players.
//!
//! A `Match<Shooter>` of ten sessions runs on virtual time (an ideal 20 ms network); every
//! datagram client 0 received is recorded. Each measured batch is a fresh session fed the
//! first two seconds of them untimed (handshake, welcome, warm history), then the next
//! snapshots timed: `handle_datagram` (decryption, the link, the message) and
//! `poll_event` until `None` (the replica's read, the clock sample, the interpolation
//! frame). A second benchmark adds what a renderer asks each snapshot: the render tick and
//! all ten players interpolated at it.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tickforge_client::Session;
use tickforge_replication::NetId;

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

criterion_group!(benches, snapshot);
criterion_main!(benches);
