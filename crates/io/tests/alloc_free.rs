//! A wake-up's socket I/O allocates nothing once the batches exist.
//!
//! This lives in its own test binary because it installs a counting global allocator.
//! Counts are per thread, so the test harness's other threads do not disturb them.

use std::time::{Duration, Instant};

use tickforge_io::udp::{wait_readable, IoStats, RecvBatch, SendBatch, SocketOptions, UdpSocket};
use tickforge_testkit::alloc::{allocations_in, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Datagrams per wake-up in the test.
const DATAGRAMS: usize = 20;
/// Bytes per datagram.
const DATAGRAM_BYTES: usize = 300;

/// One wake-up of a worker: queue and send a batch (one datagram refused), then wait for
/// and receive all that arrive. Returns the datagrams received.
fn wake_up(
    a: &UdpSocket,
    b: &UdpSocket,
    out: &mut SendBatch,
    inbox: &mut RecvBatch,
    stats: &mut IoStats,
) -> usize {
    let to = b.local_addr().unwrap();
    let refused = "127.0.0.1:0".parse().unwrap();
    for i in 0..DATAGRAMS {
        out.push(
            if i == 3 { refused } else { to },
            &[i as u8; DATAGRAM_BYTES],
        );
    }
    out.flush(a, stats);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut received = 0;
    while received < DATAGRAMS - 1 && Instant::now() < deadline {
        wait_readable(&[b], Duration::from_millis(100)).unwrap();
        loop {
            received += inbox.fill(b, stats);
            if !inbox.is_full() {
                break;
            }
        }
    }
    received
}

#[test]
fn send_and_receive_allocate_nothing_in_steady_state() {
    let options = SocketOptions::default();
    let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), options).unwrap();
    let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), options).unwrap();
    // Fewer slots than datagrams, so a wake-up takes several fills.
    let mut inbox = RecvBatch::with_capacity(8);
    let mut out = SendBatch::with_capacity(DATAGRAMS, DATAGRAM_BYTES);
    let mut stats = IoStats::default();

    let (_, probe) = allocations_in(|| drop(std::hint::black_box(Vec::<u8>::with_capacity(16))));
    assert_eq!(probe, 1, "the counting allocator is installed");

    let ((), n) = allocations_in(|| {
        for _ in 0..10 {
            assert_eq!(
                wake_up(&a, &b, &mut out, &mut inbox, &mut stats),
                DATAGRAMS - 1
            );
        }
    });
    assert_eq!(n, 0, "allocations in 10 wake-ups");
    assert_eq!(stats.send_errors, 10);
    assert_eq!(stats.received, 10 * (DATAGRAMS as u64 - 1));
}
