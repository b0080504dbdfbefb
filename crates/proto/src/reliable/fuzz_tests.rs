//! Property tests feeding [`Endpoint::read_packet`] bytes off a hostile network: raw
//! arbitrary bytes, and valid packets (fragments, messages, an unreliable part) with bytes
//! corrupted. Nothing may panic, and nothing may make a packet exceed its limit.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::section::SectionHead;
use super::{Endpoint, ReliableConfig, Seq16};
use crate::wire::Writer;
use crate::MAX_PACKET_BYTES;

const TICK: Duration = Duration::from_nanos(7_812_500);

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_read_packet(
        packets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1300), 1..20)
    ) {
        let t0 = Instant::now();
        let mut e = Endpoint::new(ReliableConfig::default(), t0);
        let mut out = Vec::new();
        for p in &packets {
            let _ = e.read_packet(t0, p);
            while e.poll_reliable(&mut out) {}
            while e.poll_acked_tag().is_some() {}
            e.write_packet(t0, None, &mut out);
            prop_assert!(out.len() <= MAX_PACKET_BYTES);
        }
    }

    #[test]
    fn corrupted_packets_never_panic_read_packet(
        flips in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..40),
    ) {
        // Valid packets full of fragments and messages, each read after one byte changed.
        let t0 = Instant::now();
        let config = ReliableConfig::default();
        let (mut a, mut b) = (Endpoint::new(config, t0), Endpoint::new(config, t0));
        a.send_reliable(&[7; 3000]).unwrap();
        for i in 0..20u8 {
            a.send_reliable(&[i; 20]).unwrap();
        }
        let mut buf = Vec::new();
        let mut out = Vec::new();
        for (k, (at, byte)) in flips.iter().enumerate() {
            let now = t0 + TICK * k as u32;
            a.write_packet(now, Some((k as u32, &[1, 2, 3])), &mut buf);
            let i = usize::from(*at) % buf.len();
            buf[i] ^= byte | 1;
            let _ = b.read_packet(now, &buf);
            while b.poll_reliable(&mut out) {}
            b.write_packet(now, None, &mut buf);
            let _ = a.read_packet(now, &buf);
            prop_assert!(buf.len() <= MAX_PACKET_BYTES);
        }
    }

    #[test]
    fn well_formed_hostile_sections_never_panic_or_overflow(
        packets in proptest::collection::vec(
            (any::<u16>(), proptest::collection::vec((0u8..3, 0u16..12, 0u16..6, 0u16..6, 0u16..10, 0u16..12), 0..8)),
            1..30,
        )
    ) {
        // Sections that parse, with ids, indexes, counts and lengths near every limit of a
        // small configuration, in packets with arbitrary sequences.
        let t0 = Instant::now();
        let config = ReliableConfig {
            fragment_bytes: 8,
            reliable_reserved_bytes: 19,
            max_message_bytes: 30,
            send_queue_bytes: 64,
            receive_window_messages: 4,
            reassembly_bytes: 64,
            ..ReliableConfig::default()
        };
        let mut e = Endpoint::new(config, t0);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        for (sequence, sections) in &packets {
            buf.clear();
            let mut w = Writer::new(&mut buf);
            w.u16(*sequence);
            w.u16(0);
            w.u32(0);
            for &(kind, id, index, count, cell, len) in sections {
                let head = match kind {
                    0 => SectionHead::Message { id: Seq16(id), len },
                    1 => SectionHead::Fragment { id: Seq16(id), index, count, cell, len },
                    _ => SectionHead::Unreliable { tag: u32::from(id), len },
                };
                head.write(&mut w);
                w.zeros(usize::from(len));
            }
            let _ = e.read_packet(t0, &buf);
            while e.poll_reliable(&mut out) {
                prop_assert!(out.len() <= config.max_message_bytes);
            }
            e.write_packet(t0, None, &mut buf);
            prop_assert!(buf.len() <= config.max_packet_bytes);
        }
    }
}
