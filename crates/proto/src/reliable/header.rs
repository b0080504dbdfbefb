//! The header every packet starts with: its own sequence and the acks of the peer's packets.
//!
//! ```text
//!  0          2          4                      8
//!  +----------+----------+----------------------+
//!  | sequence |   ack    |       ack_bits       |   little-endian
//!  |   u16    |   u16    |         u32          |
//!  +----------+----------+----------------------+
//!  sequence  this packet's number, +1 per packet written, wrapping
//!  ack       newest packet sequence received from the peer
//!  ack_bits  bit i (bit 0 least significant) set: packet `ack - 1 - i` was received too
//! ```
//!
//! Every packet repeats the acks of the 33 newest sequences, so an ack survives the loss of
//! up to 32 packets in a row. Until a side has received anything it writes `ack` 65535 and no
//! bits; sequences start at 0, so that acknowledges nothing the peer sent.

use super::seq::Seq16;
use crate::wire::{Reader, Truncated, Writer};

/// Bytes of a [`PacketHeader`] on the wire.
pub const HEADER_BYTES: usize = 8;

/// Packets acknowledged by `ack_bits`, in addition to `ack` itself.
pub const ACK_BITS: u16 = 32;

/// Sequence and acks at the front of every packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketHeader {
    /// This packet's sequence.
    pub sequence: Seq16,
    /// Newest sequence received from the peer.
    pub ack: Seq16,
    /// Bit `i` set: sequence `ack - 1 - i` was received too.
    pub ack_bits: u32,
}

impl PacketHeader {
    /// Appends the header ([`HEADER_BYTES`] bytes).
    pub fn write(&self, w: &mut Writer<'_>) {
        w.u16(self.sequence.0);
        w.u16(self.ack.0);
        w.u32(self.ack_bits);
    }

    /// Reads a header from the front of a packet.
    pub fn read(r: &mut Reader<'_>) -> Result<PacketHeader, Truncated> {
        Ok(PacketHeader {
            sequence: Seq16(r.u16()?),
            ack: Seq16(r.u16()?),
            ack_bits: r.u32()?,
        })
    }

    /// Every sequence this header acknowledges, newest first: `ack`, then those in `ack_bits`.
    pub fn acks(&self) -> impl Iterator<Item = Seq16> + '_ {
        let bits = self.ack_bits;
        std::iter::once(self.ack).chain(
            (0..ACK_BITS)
                .filter(move |i| bits & (1 << i) != 0)
                .map(move |i| self.ack.wrapping_sub(i + 1)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_measured_size_equals_written_size() {
        let h = PacketHeader {
            sequence: Seq16(65535),
            ack: Seq16(7),
            ack_bits: 0x8000_0001,
        };
        let mut buf = Vec::new();
        h.write(&mut Writer::new(&mut buf));
        assert_eq!(buf.len(), HEADER_BYTES);
        assert_eq!(buf, [0xff, 0xff, 7, 0, 1, 0, 0, 0x80]);
        let mut r = Reader::new(&buf);
        assert_eq!(PacketHeader::read(&mut r), Ok(h));
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn short_header_is_truncated() {
        for n in 0..HEADER_BYTES {
            let buf = vec![0u8; n];
            assert_eq!(PacketHeader::read(&mut Reader::new(&buf)), Err(Truncated));
        }
    }

    #[test]
    fn ack_bits_mark_the_right_packets_across_the_wrap() {
        let h = PacketHeader {
            sequence: Seq16(0),
            ack: Seq16(1),
            // bit 0: packet 0; bit 1: packet 65535; bit 31: packet 1 - 32 = 65505.
            ack_bits: 0b11 | 1 << 31,
        };
        let acked: Vec<u16> = h.acks().map(|s| s.0).collect();
        assert_eq!(acked, [1, 0, 65535, 65505]);
    }

    proptest! {
        #[test]
        fn acks_are_exactly_ack_and_the_set_bits(ack in any::<u16>(), bits in any::<u32>()) {
            let h = PacketHeader { sequence: Seq16(0), ack: Seq16(ack), ack_bits: bits };
            let acked: Vec<Seq16> = h.acks().collect();
            prop_assert_eq!(acked.len(), 1 + bits.count_ones() as usize);
            prop_assert_eq!(acked[0], Seq16(ack));
            for s in &acked[1..] {
                let i = Seq16(ack).distance_from(*s) - 1;
                prop_assert!(i < ACK_BITS);
                prop_assert!(bits & (1 << i) != 0);
            }
        }
    }
}
