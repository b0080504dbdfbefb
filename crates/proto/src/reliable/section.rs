//! Sections: what follows the packet header, one after another to the end of the packet.
//!
//! ```text
//! section := kind u8 | fields (little-endian) | body
//!   1 Message     id u16 | len u16 | body[len]                           5 + len bytes
//!   2 Fragment    id u16 | index u16 | count u16 | cell u16 | len u16 | body[len]
//!                                                                        11 + len bytes
//!   3 Unreliable  tag u32 | len u16 | body[len]                          7 + len bytes
//! ```
//!
//! `Message` is a whole reliable message of at most `fragment_bytes`. A longer one travels as
//! `count` (2..) `Fragment`s with the same `id`: fragment `index` holds body bytes from
//! `index * fragment_bytes`, every fragment but the last holds exactly `fragment_bytes`, and
//! the last holds the remaining 1..=`fragment_bytes`. The sender places each fragmented
//! message in the receiver's reassembly ring, `reassembly_bytes / fragment_bytes` cells of
//! `fragment_bytes`: fragment `index` goes to cell `(cell + index) % cells`. `Unreliable`
//! appears at most once per packet; its `tag` is the caller's (a snapshot's tick).

use super::seq::Seq16;
use super::ReliableError;
use crate::wire::{Reader, Writer};

/// Bytes before the body of a [`SectionHead::Message`].
pub(crate) const MESSAGE_HEADER_BYTES: usize = 5;
/// Bytes before the body of a [`SectionHead::Fragment`].
pub(crate) const FRAGMENT_HEADER_BYTES: usize = 11;
/// Bytes before the body of a [`SectionHead::Unreliable`].
pub(crate) const UNRELIABLE_HEADER_BYTES: usize = 7;

const KIND_MESSAGE: u8 = 1;
const KIND_FRAGMENT: u8 = 2;
const KIND_UNRELIABLE: u8 = 3;

/// A section's kind and fields; the body follows it on the wire.
///
/// Reading, writing and measuring go through this one type so that they cannot disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SectionHead {
    /// A whole reliable message.
    Message { id: Seq16, len: u16 },
    /// One piece of a reliable message longer than a fragment.
    Fragment {
        id: Seq16,
        index: u16,
        count: u16,
        cell: u16,
        len: u16,
    },
    /// The packet's unreliable message.
    Unreliable { tag: u32, len: u16 },
}

impl SectionHead {
    /// Bytes before the body.
    pub(crate) fn header_bytes(&self) -> usize {
        match self {
            SectionHead::Message { .. } => MESSAGE_HEADER_BYTES,
            SectionHead::Fragment { .. } => FRAGMENT_HEADER_BYTES,
            SectionHead::Unreliable { .. } => UNRELIABLE_HEADER_BYTES,
        }
    }

    /// Body bytes.
    pub(crate) fn body_bytes(&self) -> usize {
        let (SectionHead::Message { len, .. }
        | SectionHead::Fragment { len, .. }
        | SectionHead::Unreliable { len, .. }) = *self;
        usize::from(len)
    }

    /// Bytes of the whole section on the wire, body included.
    pub(crate) fn encoded_bytes(&self) -> usize {
        self.header_bytes() + self.body_bytes()
    }

    /// Appends the kind and fields; the caller appends the body right after.
    pub(crate) fn write(&self, w: &mut Writer<'_>) {
        match *self {
            SectionHead::Message { id, len } => {
                w.u8(KIND_MESSAGE);
                w.u16(id.0);
                w.u16(len);
            }
            SectionHead::Fragment {
                id,
                index,
                count,
                cell,
                len,
            } => {
                w.u8(KIND_FRAGMENT);
                w.u16(id.0);
                w.u16(index);
                w.u16(count);
                w.u16(cell);
                w.u16(len);
            }
            SectionHead::Unreliable { tag, len } => {
                w.u8(KIND_UNRELIABLE);
                w.u32(tag);
                w.u16(len);
            }
        }
    }

    /// Reads one section and its body. Checks only that the bytes are there; the limits
    /// (fragment size, window) are the receiver's to check.
    pub(crate) fn read<'a>(r: &mut Reader<'a>) -> Result<(SectionHead, &'a [u8]), ReliableError> {
        let head = match r.u8()? {
            KIND_MESSAGE => SectionHead::Message {
                id: Seq16(r.u16()?),
                len: r.u16()?,
            },
            KIND_FRAGMENT => SectionHead::Fragment {
                id: Seq16(r.u16()?),
                index: r.u16()?,
                count: r.u16()?,
                cell: r.u16()?,
                len: r.u16()?,
            },
            KIND_UNRELIABLE => SectionHead::Unreliable {
                tag: r.u32()?,
                len: r.u16()?,
            },
            kind => return Err(ReliableError::UnknownSection(kind)),
        };
        let body = r.bytes(head.body_bytes())?;
        Ok((head, body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all_kinds() -> [(SectionHead, Vec<u8>); 4] {
        [
            (
                SectionHead::Message {
                    id: Seq16(65535),
                    len: 3,
                },
                b"abc".to_vec(),
            ),
            (
                SectionHead::Message {
                    id: Seq16(0),
                    len: 0,
                },
                Vec::new(),
            ),
            (
                SectionHead::Fragment {
                    id: Seq16(9),
                    index: 2,
                    count: 3,
                    cell: 500,
                    len: 4,
                },
                b"wxyz".to_vec(),
            ),
            (
                SectionHead::Unreliable {
                    tag: 0xdead_beef,
                    len: 2,
                },
                b"hi".to_vec(),
            ),
        ]
    }

    #[test]
    fn every_kind_round_trips_and_measured_size_equals_written_size() {
        for (head, body) in all_kinds() {
            let mut buf = Vec::new();
            let mut w = Writer::new(&mut buf);
            head.write(&mut w);
            assert_eq!(w.len(), head.header_bytes(), "{head:?}");
            w.bytes(&body);
            assert_eq!(buf.len(), head.encoded_bytes(), "{head:?}");
            let mut r = Reader::new(&buf);
            let (read, read_body) = SectionHead::read(&mut r).unwrap();
            assert_eq!(read, head);
            assert_eq!(read_body, &body[..]);
            assert_eq!(r.remaining(), 0);
        }
    }

    #[test]
    fn every_prefix_of_a_section_is_truncated() {
        for (head, body) in all_kinds() {
            let mut buf = Vec::new();
            let mut w = Writer::new(&mut buf);
            head.write(&mut w);
            w.bytes(&body);
            for n in 0..buf.len() {
                assert_eq!(
                    SectionHead::read(&mut Reader::new(&buf[..n])),
                    Err(ReliableError::Truncated),
                    "{head:?} cut at {n}"
                );
            }
        }
    }

    #[test]
    fn unknown_kind_is_an_error() {
        assert_eq!(
            SectionHead::read(&mut Reader::new(&[0, 1, 2, 3])),
            Err(ReliableError::UnknownSection(0))
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_read_past_the_end(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut r = Reader::new(&data);
            while r.remaining() > 0 {
                let before = r.remaining();
                match SectionHead::read(&mut r) {
                    Ok((head, body)) => {
                        prop_assert_eq!(body.len(), head.body_bytes());
                        prop_assert_eq!(before - r.remaining(), head.encoded_bytes());
                    }
                    Err(_) => break,
                }
            }
        }
    }
}
