//! The reliability layer's packet header: raw bytes into the reader, headers built from
//! fuzzed fields and read back, and header-only packets with fuzzed sequences and acks read
//! by an endpoint whose acks, duplicate and stale counts and acknowledged tags are checked
//! against a model.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use tickforge_proto::msg::link_config;
use tickforge_proto::reliable::{Endpoint, PacketHeader, ReliableConfig, Seq16, ACK_BITS, HEADER_BYTES};
use tickforge_proto::wire::{Reader, Writer};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 3 {
        0 => raw(rest),
        1 => fields(rest),
        _ => sequences(mode, rest),
    }
});

/// Anything at all: reads only with 8 bytes, and what it reads re-writes to them.
fn raw(data: &[u8]) {
    let mut r = Reader::new(data);
    match PacketHeader::read(&mut r) {
        Ok(h) => {
            assert!(data.len() >= HEADER_BYTES);
            assert_eq!(r.remaining(), data.len() - HEADER_BYTES, "read more than the header");
            let mut out = Vec::new();
            h.write(&mut Writer::new(&mut out));
            assert_eq!(out, data[..HEADER_BYTES]);
            check_acks(&h);
        }
        Err(_) => assert!(data.len() < HEADER_BYTES, "a full header failed to read"),
    }
}

/// Fields first: the layout drawn in header.rs, written after whatever the buffer holds.
fn fields(data: &[u8]) {
    if data.len() < HEADER_BYTES + 1 {
        return;
    }
    let h = PacketHeader {
        sequence: Seq16(u16::from_be_bytes([data[0], data[1]])),
        ack: Seq16(u16::from_be_bytes([data[2], data[3]])),
        ack_bits: u32::from_be_bytes([data[4], data[5], data[6], data[7]]),
    };
    let prefix = &data[HEADER_BYTES + 1..][..usize::from(data[HEADER_BYTES]).min(data.len() - HEADER_BYTES - 1)];
    let mut out = prefix.to_vec();
    h.write(&mut Writer::new(&mut out));
    assert_eq!(out.len(), prefix.len() + HEADER_BYTES);
    let wire = &out[prefix.len()..];
    assert_eq!(wire[..2], h.sequence.0.to_le_bytes());
    assert_eq!(wire[2..4], h.ack.0.to_le_bytes());
    assert_eq!(wire[4..], h.ack_bits.to_le_bytes());
    let mut r = Reader::new(wire);
    assert_eq!(PacketHeader::read(&mut r), Ok(h));
    assert_eq!(r.remaining(), 0);
    check_acks(&h);
}

/// `acks()` is `ack`, then `ack - 1 - i` for every set bit `i`, lowest first.
fn check_acks(h: &PacketHeader) {
    let acked: Vec<Seq16> = h.acks().collect();
    assert_eq!(acked.len(), 1 + h.ack_bits.count_ones() as usize);
    assert_eq!(acked[0], h.ack);
    let want = (0..ACK_BITS).filter(|i| h.ack_bits & (1 << i) != 0).map(|i| h.ack.wrapping_sub(i + 1));
    assert!(acked[1..].iter().copied().eq(want));
}

/// Which of the peer's sequences an endpoint received, as a bitmap of all 65536.
struct ReceivedModel {
    newest: Option<Seq16>,
    bits: Vec<u64>,
    history: u16,
}

#[derive(Debug, PartialEq, Eq)]
enum Arrival {
    New,
    Duplicate,
    Stale,
}

impl ReceivedModel {
    fn has(&self, s: Seq16) -> bool {
        self.bits[usize::from(s.0) / 64] & 1 << (s.0 % 64) != 0
    }

    fn set(&mut self, s: Seq16, on: bool) {
        let (word, bit) = (usize::from(s.0) / 64, 1u64 << (s.0 % 64));
        if on {
            self.bits[word] |= bit;
        } else {
            self.bits[word] &= !bit;
        }
    }

    fn arrival(&self, s: Seq16) -> Arrival {
        let Some(newest) = self.newest else { return Arrival::New };
        if s.is_newer_than(newest) {
            Arrival::New
        } else if newest.distance_from(s) >= self.history {
            Arrival::Stale
        } else if self.has(s) {
            Arrival::Duplicate
        } else {
            Arrival::New
        }
    }

    fn mark(&mut self, s: Seq16) {
        match self.newest {
            Some(newest) if !s.is_newer_than(newest) => {}
            Some(newest) => {
                // Every sequence jumped over was not received this time round.
                let mut k = newest.next();
                while k != s {
                    if k.0 % 64 == 0 && s.distance_from(k) >= 64 {
                        self.bits[usize::from(k.0) / 64] = 0;
                        k = k.wrapping_add(64);
                    } else {
                        self.set(k, false);
                        k = k.next();
                    }
                }
                self.newest = Some(s);
            }
            None => self.newest = Some(s),
        }
        self.set(s, true);
    }

    fn acks(&self) -> (Seq16, u32) {
        let Some(newest) = self.newest else { return (Seq16(u16::MAX), 0) };
        let bits = (0..ACK_BITS).filter(|&i| self.has(newest.wrapping_sub(i + 1))).fold(0, |b, i| b | 1 << i);
        (newest, bits)
    }
}

/// Records of `[control, header (8 bytes)]`: the endpoint writes a packet when the control
/// says so (tagged with its sequence), then reads the header as a packet of its own.
fn sequences(mode: u8, data: &[u8]) {
    let config = if mode & 0x80 == 0 { link_config() } else { ReliableConfig::default() };
    let history = config.packet_history;
    let t0 = Instant::now();
    let mut e = Endpoint::new(config, t0);
    let mut model = ReceivedModel { newest: None, bits: vec![0; 1024], history: u16::try_from(history).unwrap() };
    let mut sent: u16 = 0;
    let mut acked = vec![false; 1 << 16];
    let (mut duplicate, mut stale, mut received, mut packets_acked) = (0u64, 0u64, 0u64, 0u64);
    let mut buf = Vec::new();
    let mut now = t0;
    for record in data.chunks_exact(1 + HEADER_BYTES) {
        let control = record[0];
        now += Duration::from_millis(u64::from(control >> 2));
        if control & 1 != 0 && usize::from(sent) < (1 << 16) - 1 {
            let w = e.write_packet(now, Some((u32::from(sent), &[control])), &mut buf);
            assert_eq!(w.sequence, Seq16(sent));
            assert!(w.unreliable_included);
            let h = PacketHeader::read(&mut Reader::new(&buf)).unwrap();
            assert_eq!((h.ack, h.ack_bits), model.acks(), "the acks written");
            sent += 1;
        }
        let packet = &record[1..];
        let h = PacketHeader::read(&mut Reader::new(packet)).unwrap();
        assert_eq!(e.read_packet(now, packet), Ok(None), "a header-only packet");
        let mut want_tags = Vec::new();
        match model.arrival(h.sequence) {
            Arrival::Duplicate => duplicate += 1,
            Arrival::Stale => stale += 1,
            Arrival::New => {
                received += 1;
                model.mark(h.sequence);
                for s in h.acks() {
                    // Our packets from the last `history` written match their slot.
                    let ours = s.0 < sent && usize::from(sent - s.0) <= history;
                    if ours && !acked[usize::from(s.0)] {
                        acked[usize::from(s.0)] = true;
                        packets_acked += 1;
                        want_tags.push(u32::from(s.0));
                    }
                }
            }
        }
        let tags: Vec<u32> = std::iter::from_fn(|| e.poll_acked_tag()).collect();
        assert_eq!(tags, want_tags, "acked tags after {h:?}");
        let stats = e.stats();
        assert_eq!(stats.packets_duplicate, duplicate);
        assert_eq!(stats.packets_stale, stale);
        assert_eq!(stats.packets_received, received);
        assert_eq!(stats.packets_acked, packets_acked);
        assert!(!e.poll_reliable(&mut buf));
    }
    let w = e.write_packet(now, None, &mut buf);
    assert_eq!(w.bytes, HEADER_BYTES);
    let h = PacketHeader::read(&mut Reader::new(&buf)).unwrap();
    assert_eq!((h.ack, h.ack_bits), model.acks(), "the acks written");
}
