//! Two `reliable::Endpoint`s through the seeded simulator, tick by tick at 128 Hz on
//! virtual time: no sleeps, no sockets.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{addr, message, Side, TICK};
use tickforge_proto::reliable::{ReliableConfig, ReliableError};
use tickforge_proto::MAX_PACKET_BYTES;
use tickforge_testkit::{LinkConditions, NetSim, SimRng, VirtualClock};

/// 20% loss each way, with jitter, duplicates and hold-backs.
fn rough_link() -> LinkConditions {
    LinkConditions {
        latency: Duration::from_millis(30),
        jitter: Duration::from_millis(10),
        loss_probability: 0.2,
        duplicate_probability: 0.05,
        reorder_probability: 0.05,
        reorder_delay: Duration::from_millis(30),
    }
}

/// A stream of reliable messages from one side, checked on the other.
struct Stream {
    messages: Vec<Vec<u8>>,
    sent_at_tick: Vec<u32>,
    delivered: usize,
    worst_delay_ticks: u32,
}

impl Stream {
    fn new(seed: u64, count: usize) -> Self {
        let mut rng = SimRng::new(seed);
        Stream {
            messages: (0..count).map(|i| message(&mut rng, i)).collect(),
            sent_at_tick: Vec::with_capacity(count),
            delivered: 0,
            worst_delay_ticks: 0,
        }
    }

    fn send_next(&mut self, side: &mut Side, tick: u32) {
        let next = self.sent_at_tick.len();
        if next < self.messages.len() {
            side.endpoint
                .send_reliable(&self.messages[next])
                .expect("the send queue holds a healthy backlog");
            self.sent_at_tick.push(tick);
        }
    }

    fn receive(&mut self, side: &mut Side, tick: u32) {
        side.poll_messages(|m| {
            let i = self.delivered;
            assert!(
                i < self.sent_at_tick.len(),
                "message {i} came before it was sent"
            );
            assert_eq!(
                m,
                &self.messages[i][..],
                "message {i} out of order or corrupted"
            );
            self.worst_delay_ticks = self.worst_delay_ticks.max(tick - self.sent_at_tick[i]);
            self.delivered += 1;
        });
    }

    fn done(&self) -> bool {
        self.delivered == self.messages.len()
    }
}

#[test]
fn lossy_link_delivers_every_reliable_message_once_in_order() {
    let mut sim = NetSim::new(0x5eed, rough_link());
    let mut clock = VirtualClock::default();
    let config = ReliableConfig::default();
    let mut a = Side::new(addr(1), addr(2), config, clock.now());
    let mut b = Side::new(addr(2), addr(1), config, clock.now());
    let mut a_to_b = Stream::new(1, 1200);
    let mut b_to_a = Stream::new(2, 300);
    let longer_than_a_packet = a_to_b
        .messages
        .iter()
        .filter(|m| m.len() > MAX_PACKET_BYTES)
        .count();
    assert!(longer_than_a_packet > 50, "{longer_than_a_packet}");
    let snapshot = vec![0xab; 800];
    let mut sizes = SimRng::new(3);
    let mut tick = 0u32;
    while !(a_to_b.done() && b_to_a.done()) {
        assert!(
            tick < 3000,
            "stalled: {} and {} delivered",
            a_to_b.delivered,
            b_to_a.delivered
        );
        let now = clock.now();
        let due = sim.take_due(now);
        a.read(now, &due, |_, _| {});
        b.read(now, &due, |_, _| {});
        a_to_b.receive(&mut b, tick);
        b_to_a.receive(&mut a, tick);
        while a.endpoint.poll_acked_tag().is_some() {}
        while b.endpoint.poll_acked_tag().is_some() {}
        a_to_b.send_next(&mut a, tick);
        if tick.is_multiple_of(4) {
            b_to_a.send_next(&mut b, tick);
        }
        let len = sizes.below(snapshot.len() as u64) as usize;
        a.write(now, &mut sim, Some((tick, &snapshot[..len])));
        b.write(now, &mut sim, Some((tick, &snapshot[..len])));
        clock.advance(TICK);
        tick += 1;
    }
    // Exactly once: the streams checked order and content; nothing more comes after.
    for _ in 0..200 {
        let now = clock.now();
        let due = sim.take_due(now);
        a.read(now, &due, |_, _| {});
        b.read(now, &due, |_, _| {});
        b.poll_messages(|_| panic!("a message delivered twice"));
        a.poll_messages(|_| panic!("a message delivered twice"));
        a.write(now, &mut sim, None);
        b.write(now, &mut sim, None);
        clock.advance(TICK);
    }
    let (sa, sb) = (a.endpoint.stats(), b.endpoint.stats());
    assert_eq!(sb.messages_delivered, 1200);
    assert_eq!(sa.messages_delivered, 300);
    assert_eq!(
        sa.messages_acked, 1200,
        "everything acknowledged in the end"
    );
    assert_eq!(a.endpoint.queued_reliable_bytes(), 0);
    assert!(sim.stats().duplicated > 0 && sim.stats().reordered > 0);
    assert!(sb.packets_duplicate > 0, "duplicates reached the endpoint");
    assert!(sa.sections_resent > 0);
    // Within a bounded time once sent: a second at 128 Hz (about 80 ticks seen).
    assert!(
        a_to_b.worst_delay_ticks <= 128,
        "{}",
        a_to_b.worst_delay_ticks
    );
    assert!(
        b_to_a.worst_delay_ticks <= 128,
        "{}",
        b_to_a.worst_delay_ticks
    );
    assert!((0.1..0.3).contains(&sa.loss), "loss estimate {}", sa.loss);
    assert!((0.1..0.3).contains(&sb.loss), "loss estimate {}", sb.loss);
}

#[test]
fn every_acked_tag_was_really_received_by_the_peer() {
    let mut sim = NetSim::new(11, rough_link());
    let mut clock = VirtualClock::default();
    let config = ReliableConfig::default();
    let mut a = Side::new(addr(1), addr(2), config, clock.now());
    let mut b = Side::new(addr(2), addr(1), config, clock.now());
    let (mut a_read, mut b_read) = (HashSet::new(), HashSet::new());
    let (mut a_acked, mut b_acked) = (HashSet::new(), HashSet::new());
    let mut sizes = SimRng::new(12);
    let snapshot = vec![1; MAX_PACKET_BYTES];
    let mut sent_by_a = 0;
    for tick in 0..1000u32 {
        let now = clock.now();
        let due = sim.take_due(now);
        a.read(now, &due, |tag, _| {
            assert!(a_read.insert(tag), "tag {tag} read twice")
        });
        b.read(now, &due, |tag, body| {
            assert_eq!(body.len(), (tag as usize * 7) % 1100);
            assert!(b_read.insert(tag), "tag {tag} read twice");
        });
        while let Some(tag) = a.endpoint.poll_acked_tag() {
            assert!(b_read.contains(&tag), "{tag} acked but never read by b");
            assert!(a_acked.insert(tag), "{tag} acked twice");
        }
        while let Some(tag) = b.endpoint.poll_acked_tag() {
            assert!(a_read.contains(&tag), "{tag} acked but never read by a");
            assert!(b_acked.insert(tag), "{tag} acked twice");
        }
        if tick.is_multiple_of(3) {
            a.endpoint.send_reliable(&[7; 300]).unwrap();
        }
        // Some snapshots too large to fit beside the reliable data: not sent, never acked.
        let len = (tick as usize * 7) % 1100;
        if a.write(now, &mut sim, Some((tick, &snapshot[..len])))
            .unreliable_included
        {
            sent_by_a += 1;
        }
        let b_len = sizes.below(600) as usize;
        b.write(now, &mut sim, Some((tick, &snapshot[..b_len])));
        a.poll_messages(|_| {});
        b.poll_messages(|_| {});
        clock.advance(TICK);
    }
    assert!(sent_by_a > 800 && sent_by_a < 1000, "{sent_by_a}");
    // About 80% arrive, and nearly all of those are acknowledged in time.
    assert!(
        a_acked.len() * 10 > sent_by_a * 7,
        "{} of {sent_by_a}",
        a_acked.len()
    );
    assert!(b_acked.len() > 700, "{}", b_acked.len());
    assert!(a_acked.len() <= b_read.len() && b_acked.len() <= a_read.len());
}

#[test]
fn rtt_estimate_converges_near_the_simulated_round_trip() {
    for (jitter_ms, seed) in [(0, 21), (6, 22)] {
        let one_way = Duration::from_millis(40);
        let link = LinkConditions {
            jitter: Duration::from_millis(jitter_ms),
            ..LinkConditions::ideal(one_way)
        };
        let mut sim = NetSim::new(seed, link);
        let mut clock = VirtualClock::default();
        let config = ReliableConfig::default();
        let mut a = Side::new(addr(1), addr(2), config, clock.now());
        let mut b = Side::new(addr(2), addr(1), config, clock.now());
        for _ in 0..256 {
            let now = clock.now();
            let due = sim.take_due(now);
            a.read(now, &due, |_, _| {});
            b.read(now, &due, |_, _| {});
            a.write(now, &mut sim, None);
            b.write(now, &mut sim, None);
            clock.advance(TICK);
        }
        // The round trip seen includes waiting for the peer's next tick and for our own
        // next read: up to two ticks on top of the wire, plus the jitter both ways.
        let wire = one_way * 2;
        let most = wire + TICK * 2 + Duration::from_millis(jitter_ms) * 2;
        for side in [&a, &b] {
            let s = side.endpoint.stats();
            assert!(s.rtt >= wire && s.rtt <= most, "rtt {:?}", s.rtt);
            assert!(
                s.jitter <= Duration::from_millis(jitter_ms) + TICK,
                "{:?}",
                s.jitter
            );
            assert_eq!(s.loss, 0.0);
            assert!(side.endpoint.resend_after() < Duration::from_millis(150));
        }
    }
}

#[test]
fn a_peer_that_never_acks_fills_the_send_queue_to_its_bound() {
    let mut sim = NetSim::new(31, LinkConditions::ideal(Duration::from_millis(20)));
    sim.set_link(addr(2), addr(1), LinkConditions::dead());
    let mut clock = VirtualClock::default();
    let config = ReliableConfig::default();
    let mut a = Side::new(addr(1), addr(2), config, clock.now());
    let mut b = Side::new(addr(2), addr(1), config, clock.now());
    let mut queued = 0usize;
    let mut b_got = 0usize;
    let mut err = None;
    for _ in 0..2000 {
        let now = clock.now();
        let due = sim.take_due(now);
        a.read(now, &due, |_, _| {});
        b.read(now, &due, |_, _| {});
        b.poll_messages(|_| b_got += 1);
        match a.endpoint.send_reliable(&[9; 300]) {
            Ok(()) => queued += 1,
            Err(e) => {
                err = Some(e);
                break;
            }
        }
        assert!(a.endpoint.queued_reliable_bytes() <= config.send_queue_bytes);
        a.write(now, &mut sim, Some((0, &[0; 100])));
        b.write(now, &mut sim, None);
        clock.advance(TICK);
    }
    // 128 KiB of 300-byte messages: the bytes bound comes first.
    assert_eq!(queued, config.send_queue_bytes / 300);
    assert_eq!(
        err,
        Some(ReliableError::SendQueueFull {
            messages: queued,
            bytes: queued * 300
        })
    );
    assert!(
        b_got > 0 && b_got <= config.receive_window_messages,
        "no more than a receive window is sent without acks: {b_got}"
    );
    // Stays at the bound while the peer stays silent.
    for _ in 0..300 {
        let now = clock.now();
        a.write(now, &mut sim, None);
        clock.advance(TICK);
    }
    assert!(matches!(
        a.endpoint.send_reliable(&[9; 300]),
        Err(ReliableError::SendQueueFull { .. })
    ));
    assert_eq!(a.endpoint.queued_reliable_bytes(), queued * 300);
    assert!(a.endpoint.stats().loss > 0.9, "{}", a.endpoint.stats().loss);
}

#[test]
fn no_packet_ever_exceeds_1200_bytes() {
    // Largest messages, snapshots of every size up to past the packet, a rough link.
    let mut sim = NetSim::new(41, rough_link());
    let mut clock = VirtualClock::default();
    let config = ReliableConfig::default();
    let mut a = Side::new(addr(1), addr(2), config, clock.now());
    let mut b = Side::new(addr(2), addr(1), config, clock.now());
    let mut rng = SimRng::new(42);
    let big = vec![0x5a; config.max_message_bytes];
    let snapshot = vec![0xa5; 1300];
    let (mut delivered, mut largest_delivered) = (0, 0);
    for tick in 0..1500u32 {
        let now = clock.now();
        let due = sim.take_due(now);
        a.read(now, &due, |_, _| {});
        b.read(now, &due, |_, _| {});
        b.poll_messages(|m| {
            assert!(m == &big[..m.len()]);
            delivered += 1;
            largest_delivered += usize::from(m.len() == big.len());
        });
        while a.endpoint.poll_acked_tag().is_some() {}
        if tick.is_multiple_of(500) {
            a.endpoint.send_reliable(&big).unwrap();
        }
        for _ in 0..rng.below(3) {
            let len = rng.below(300) as usize;
            a.endpoint.send_reliable(&big[..len]).unwrap();
        }
        let len = rng.below(snapshot.len() as u64 + 1) as usize;
        a.write(now, &mut sim, Some((tick, &snapshot[..len])));
        b.write(now, &mut sim, Some((tick, &snapshot[..len])));
        clock.advance(TICK);
    }
    assert!(a.largest_packet <= MAX_PACKET_BYTES, "{}", a.largest_packet);
    assert!(b.largest_packet <= MAX_PACKET_BYTES, "{}", b.largest_packet);
    assert_eq!(
        a.largest_packet, MAX_PACKET_BYTES,
        "packets were filled to the limit"
    );
    assert!(delivered > 1000, "{delivered}");
    assert!(
        largest_delivered >= 2,
        "{largest_delivered} of the 64 KiB messages"
    );
}
