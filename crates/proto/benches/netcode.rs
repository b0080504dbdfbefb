//! AEAD cost per datagram size: sealing and opening netcode payload packets.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tickforge_proto::netcode::packet::{self, PacketType};

const PROTOCOL_ID: u64 = 0x7469_636b;

fn aead(c: &mut Criterion) {
    let key = packet::cipher(&[5; 32]);
    let mut group = c.benchmark_group("netcode_payload");
    group
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    for size in [16usize, 64, 256, 600, 1200] {
        let payload = vec![0xabu8; size];
        group.throughput(Throughput::Bytes(size as u64));
        let mut out = Vec::with_capacity(1300);
        group.bench_with_input(BenchmarkId::new("seal", size), &size, |b, _| {
            let mut seq = 0u64;
            b.iter(|| {
                seq += 1;
                packet::seal(
                    &mut out,
                    PacketType::Payload,
                    seq,
                    PROTOCOL_ID,
                    &key,
                    |buf| buf.extend_from_slice(&payload),
                );
                black_box(out.len())
            })
        });
        let mut sealed = Vec::new();
        packet::seal(
            &mut sealed,
            PacketType::Payload,
            1_000_000,
            PROTOCOL_ID,
            &key,
            |buf| buf.extend_from_slice(&payload),
        );
        let mut work = sealed.clone();
        group.bench_with_input(BenchmarkId::new("open", size), &size, |b, _| {
            b.iter(|| {
                work.copy_from_slice(&sealed);
                let opened = packet::open(&mut work, PROTOCOL_ID, &key, |_| true, None).unwrap();
                black_box(opened.body.len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, aead);
criterion_main!(benches);
