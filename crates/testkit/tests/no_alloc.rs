//! Steady-state sending and receiving allocate nothing: every buffer of a
//! `reliable::Endpoint` is reserved when it is made, and the caller's buffers are reused.
//!
//! A counting global allocator sees every allocation of this test binary; only those made
//! inside endpoint calls on this thread are counted.

use std::net::SocketAddr;
use std::time::Duration;

use tickforge_proto::reliable::{Endpoint, ReliableConfig};
use tickforge_proto::MAX_PACKET_BYTES;
use tickforge_testkit::alloc::{allocations_in, Counting};
use tickforge_testkit::{LinkConditions, NetSim, SimRng, VirtualClock};

#[global_allocator]
static GLOBAL: Counting = Counting;

const TICK: Duration = Duration::from_nanos(7_812_500);

#[test]
fn steady_state_send_and_receive_allocate_nothing() {
    let (a_addr, b_addr) = (
        SocketAddr::from(([10, 0, 0, 1], 1)),
        SocketAddr::from(([10, 0, 0, 2], 2)),
    );
    let link = LinkConditions {
        latency: Duration::from_millis(25),
        jitter: Duration::from_millis(5),
        loss_probability: 0.1,
        duplicate_probability: 0.05,
        reorder_probability: 0.05,
        reorder_delay: Duration::from_millis(20),
    };
    let mut sim = NetSim::new(51, link);
    let mut clock = VirtualClock::default();
    let config = ReliableConfig::default();
    let mut a = Endpoint::new(config, clock.now());
    let mut b = Endpoint::new(config, clock.now());
    // With the caller's buffers reserved at their working size, not even the first tick
    // allocates.
    let mut packet = Vec::with_capacity(MAX_PACKET_BYTES);
    let mut message = Vec::with_capacity(config.max_message_bytes);
    let events = vec![3u8; 5000];
    let snapshot = vec![4u8; 900];
    let mut rng = SimRng::new(52);
    let (mut counted, mut delivered, mut acked_tags) = (0u64, 0u64, 0u64);

    for tick in 0..1200u32 {
        let now = clock.now();
        let mut allocations = 0;
        for d in sim.take_due(now) {
            let to = if d.to == a_addr { &mut a } else { &mut b };
            let (result, n) = allocations_in(|| to.read_packet(now, &d.bytes).map(|u| u.is_some()));
            result.expect("a well-behaved peer");
            allocations += n;
        }
        for endpoint in [&mut a, &mut b] {
            let (got, n) = allocations_in(|| {
                let mut got = 0;
                while endpoint.poll_reliable(&mut message) {
                    got += 1;
                }
                while endpoint.poll_acked_tag().is_some() {
                    acked_tags += 1;
                }
                got
            });
            delivered += got;
            allocations += n;
        }
        // Events from a few bytes to several fragments, and a snapshot every tick.
        let len = match rng.below(10) {
            0 => rng.below(events.len() as u64) as usize,
            _ => rng.below(100) as usize,
        };
        let (sent, n) = allocations_in(|| a.send_reliable(&events[..len]));
        sent.unwrap();
        allocations += n;
        let snapshot_len = rng.below(snapshot.len() as u64) as usize;
        for (endpoint, from, to) in [(&mut a, a_addr, b_addr), (&mut b, b_addr, a_addr)] {
            let (_, n) = allocations_in(|| {
                endpoint.write_packet(now, Some((tick, &snapshot[..snapshot_len])), &mut packet)
            });
            allocations += n;
            sim.send(now, from, to, &packet);
        }
        counted += allocations;
        clock.advance(TICK);
    }
    assert!(delivered > 1000, "{delivered}");
    assert!(acked_tags > 1500, "{acked_tags}");
    assert_eq!(
        counted, 0,
        "allocations inside endpoint calls in the steady state"
    );

    // The counter does see allocations: this one, for instance.
    let (v, n) = allocations_in(|| vec![0u8; 16]);
    assert_eq!((v.len(), n), (16, 1));
}
