//! Batched against one-at-a-time UDP over loopback: a batch of 10 datagrams of 300 bytes,
//! about one tick's snapshots for a small match.
//!
//! Every figure is per datagram: an iteration moves one batch and reports a tenth of its
//! time. Both sides of each pair do the same work: the send pair puts all 10 on the socket
//! (`sendmmsg` includes queueing the bytes into the batch, as the server does); the receive
//! pair drains the socket (`recvmmsg` in one call, `recv_from` until `WouldBlock`). Only
//! the measured side is timed: the other end is fed or drained outside the clock.
//!
//! Over loopback the sending thread also runs delivery into the receiving socket, so the
//! send figures include the receiver's kernel work; through a NIC a send costs less and the
//! system call saved by batching weighs more.

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tickforge_io::udp::{IoStats, RecvBatch, SendBatch, SocketOptions, UdpSocket, SLOT_BYTES};

/// Datagrams per batch.
const BATCH: usize = 10;
/// Bytes per datagram: a mid-sized snapshot.
const DATAGRAM_BYTES: usize = 300;
/// Slots of the draining receive batch: more than a batch, so one call empties the socket.
const RECV_SLOTS: usize = 64;

fn loopback() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0".parse().unwrap(), SocketOptions::default()).unwrap()
}

/// Reads whatever is waiting, untimed, so the receiver's buffer never fills.
fn drain(socket: &UdpSocket, batch: &mut RecvBatch, stats: &mut IoStats) {
    while batch.fill(socket, stats) > 0 {}
}

/// Queues and sends one batch to `to`, untimed.
fn feed(socket: &UdpSocket, to: SocketAddr, batch: &mut SendBatch, stats: &mut IoStats) {
    for i in 0..BATCH {
        batch.push(to, &[i as u8; DATAGRAM_BYTES]);
    }
    assert_eq!(batch.flush(socket, stats), BATCH);
}

fn per_datagram(batches: Duration) -> Duration {
    batches / BATCH as u32
}

fn send(c: &mut Criterion) {
    let sender = loopback();
    let receiver = loopback();
    let to = receiver.local_addr().unwrap();
    let payload = [0xa5u8; DATAGRAM_BYTES];
    let mut sink = RecvBatch::with_capacity(RECV_SLOTS);
    let mut sink_stats = IoStats::default();

    let mut group = c.benchmark_group("send 10 x 300 B, per datagram");
    group.throughput(Throughput::Elements(1));

    let mut mmsg = IoStats::default();
    group.bench_function("sendmmsg", |b| {
        let mut batch = SendBatch::with_capacity(BATCH, DATAGRAM_BYTES);
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                for _ in 0..BATCH {
                    batch.push(to, black_box(&payload));
                }
                let sent = batch.flush(&sender, &mut mmsg);
                timed += start.elapsed();
                assert_eq!(sent, BATCH);
                drain(&receiver, &mut sink, &mut sink_stats);
            }
            per_datagram(timed)
        })
    });

    let mut one_by_one = IoStats::default();
    group.bench_function("sendto", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                for _ in 0..BATCH {
                    sender.send_to(black_box(&payload), to).unwrap();
                }
                timed += start.elapsed();
                one_by_one.sent += BATCH as u64;
                one_by_one.send_calls += BATCH as u64;
                drain(&receiver, &mut sink, &mut sink_stats);
            }
            per_datagram(timed)
        })
    });
    group.finish();
    println!(
        "send: sendmmsg {:.1} datagrams per call, sendto {:.1}",
        mmsg.datagrams_per_send_call(),
        one_by_one.datagrams_per_send_call()
    );
}

fn recv(c: &mut Criterion) {
    let sender = loopback();
    let receiver = loopback();
    let to = receiver.local_addr().unwrap();
    let mut source = SendBatch::with_capacity(BATCH, DATAGRAM_BYTES);
    let mut source_stats = IoStats::default();

    let mut group = c.benchmark_group("receive 10 x 300 B, per datagram");
    group.throughput(Throughput::Elements(1));

    let mut mmsg = IoStats::default();
    group.bench_function("recvmmsg", |b| {
        let mut batch = RecvBatch::with_capacity(RECV_SLOTS);
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                feed(&sender, to, &mut source, &mut source_stats);
                let start = Instant::now();
                let mut got = 0;
                while got < BATCH {
                    got += batch.fill(&receiver, &mut mmsg);
                    black_box(&batch);
                }
                timed += start.elapsed();
            }
            per_datagram(timed)
        })
    });

    let mut one_by_one = IoStats::default();
    group.bench_function("recv_from", |b| {
        let mut buf = [0u8; SLOT_BYTES];
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                feed(&sender, to, &mut source, &mut source_stats);
                let start = Instant::now();
                let mut got = 0;
                loop {
                    one_by_one.recv_calls += 1;
                    match receiver.recv_from(&mut buf) {
                        Ok(Some(datagram)) => {
                            black_box(datagram);
                            got += 1;
                        }
                        Ok(None) if got >= BATCH => break,
                        Ok(None) | Err(_) => {}
                    }
                }
                timed += start.elapsed();
                one_by_one.received += got as u64;
            }
            per_datagram(timed)
        })
    });
    group.finish();
    println!(
        "receive: recvmmsg {:.1} datagrams per call, recv_from {:.1}",
        mmsg.datagrams_per_recv_call(),
        one_by_one.datagrams_per_recv_call()
    );
}

criterion_group! {
    name = benches;
    // Quick: about 2 s of measurement per function.
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = send, recv
}
criterion_main!(benches);
