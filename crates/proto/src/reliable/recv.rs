//! The receiving half of the reliable-ordered channel: a reorder window and a reassembly
//! ring, both sized at construction.
//!
//! Two ids matter. `next_deliver` is the next message the caller polls; `next_expected` the
//! first not yet received whole, so every id before it is complete. A sender that keeps to
//! the protocol never sends an id `receive_window_messages` or more past `next_expected`:
//! one that does is broken or hostile, and gets [`ReliableError::MessageOutOfWindow`].
//!
//! Whole messages live in the window's slots. Fragments live in the reassembly ring, in the
//! cells the sender chose; a message owns its cells from its first fragment until it is
//! polled. The sender keeps every fragmented message the receiver may still hold within one
//! turn of the ring, so an honest sender's cells are free when its fragments arrive.
//!
//! Acks are per packet, so a packet is either accepted whole or not at all. Each packet is
//! first checked ([`ReceiveWindow::check`]) and only then stored ([`ReceiveWindow::store`]).
//! When the caller has not polled and a section has no room yet, the packet is dropped
//! unacknowledged ([`Verdict::Backpressure`]) and the sender resends it later.

use super::config::ReliableConfig;
use super::section::SectionHead;
use super::seq::Seq16;
use super::ReliableError;

/// What to do with one reliable section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// New: store it.
    Store,
    /// Received before: ignore it.
    Duplicate,
    /// No room until the caller polls: drop the whole packet without acknowledging it.
    Backpressure,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Empty,
    /// A whole message, its body in this slot's stretch of `slot_bytes`.
    Whole {
        id: Seq16,
        len: u16,
    },
    /// A fragmented message, its body in `count` ring cells from `cell`; the fragments
    /// received are marked in this slot's stretch of `have`.
    Fragmented {
        id: Seq16,
        count: u16,
        cell: u16,
        received: u16,
        last_len: u16,
    },
}

/// Word and bit of each index in `start..start + count`, wrapping, of a bitset of `size` bits.
fn ring_bits(size: usize, start: usize, count: usize) -> impl Iterator<Item = (usize, u64)> {
    (0..count).map(move |k| {
        let i = (start + k) % size;
        (i / 64, 1u64 << (i % 64))
    })
}

/// Reliable messages received and not yet polled, with all memory reserved up front.
pub(crate) struct ReceiveWindow {
    window: usize,
    fragment_bytes: usize,
    max_fragments: usize,
    max_message_bytes: usize,
    slots: Box<[Slot]>,
    slot_bytes: Box<[u8]>,
    /// Fragments received, `words_per_slot` words for each slot.
    have: Box<[u64]>,
    words_per_slot: usize,
    next_deliver: Seq16,
    next_expected: Seq16,
    cells: usize,
    ring: Box<[u8]>,
    /// Cells owned by a fragmented message not yet polled.
    owned: Box<[u64]>,
}

impl ReceiveWindow {
    pub(crate) fn new(config: &ReliableConfig) -> Self {
        let w = config.receive_window_messages;
        let max_fragments = config.max_fragments();
        let words_per_slot = max_fragments.div_ceil(64);
        let cells = config.reassembly_cells();
        ReceiveWindow {
            window: w,
            fragment_bytes: config.fragment_bytes,
            max_fragments,
            max_message_bytes: config.max_message_bytes,
            slots: vec![Slot::Empty; w].into_boxed_slice(),
            slot_bytes: vec![0; w * config.fragment_bytes].into_boxed_slice(),
            have: vec![0; w * words_per_slot].into_boxed_slice(),
            words_per_slot,
            next_deliver: Seq16::ZERO,
            next_expected: Seq16::ZERO,
            cells,
            ring: vec![0; cells * config.fragment_bytes].into_boxed_slice(),
            owned: vec![0; cells.div_ceil(64)].into_boxed_slice(),
        }
    }

    /// As [`ReceiveWindow::new`] made it, keeping its memory. Message bytes are only read
    /// where a slot or an owned cell says a message lies, so they are left as they are.
    pub(crate) fn reset(&mut self) {
        self.slots.fill(Slot::Empty);
        self.have.fill(0);
        self.owned.fill(0);
        self.next_deliver = Seq16::ZERO;
        self.next_expected = Seq16::ZERO;
    }

    fn slot_index(&self, id: Seq16) -> usize {
        // The window is a power of two dividing 65536, so ids keep their slots across the wrap.
        usize::from(id.0) & (self.window - 1)
    }

    /// Where a message id stands against the window.
    fn classify(&self, id: Seq16) -> Result<Verdict, ReliableError> {
        if !(id == self.next_expected || id.is_newer_than(self.next_expected)) {
            return Ok(Verdict::Duplicate); // everything before next_expected is complete
        }
        if usize::from(id.distance_from(self.next_expected)) >= self.window {
            return Err(ReliableError::MessageOutOfWindow {
                id,
                next_expected: self.next_expected,
            });
        }
        if usize::from(id.distance_from(self.next_deliver)) >= self.window {
            return Ok(Verdict::Backpressure); // its slot still holds an unpolled message
        }
        Ok(match self.slots[self.slot_index(id)] {
            Slot::Empty => Verdict::Store,
            Slot::Whole { id: held, .. } if held == id => Verdict::Duplicate,
            // Fragments are told apart by index when stored.
            Slot::Fragmented {
                id: held,
                count,
                received,
                ..
            } if held == id => {
                if received == count {
                    Verdict::Duplicate
                } else {
                    Verdict::Store
                }
            }
            Slot::Whole { .. } | Slot::Fragmented { .. } => {
                debug_assert!(false, "a slot in the window holds its own id or nothing");
                Verdict::Duplicate
            }
        })
    }

    /// Where a whole message stands: as [`Self::classify`], and a duplicate when the same
    /// id is already arriving in fragments (only a broken sender does both).
    fn classify_whole(&self, id: Seq16) -> Result<Verdict, ReliableError> {
        let verdict = self.classify(id)?;
        if verdict == Verdict::Store && self.slots[self.slot_index(id)] != Slot::Empty {
            return Ok(Verdict::Duplicate);
        }
        Ok(verdict)
    }

    fn cells_free(&self, cell: u16, count: u16) -> bool {
        ring_bits(self.cells, usize::from(cell), usize::from(count))
            .all(|(word, bit)| self.owned[word] & bit == 0)
    }

    /// Checks one reliable section of a packet without storing it.
    pub(crate) fn check(&self, head: &SectionHead) -> Result<Verdict, ReliableError> {
        match *head {
            SectionHead::Message { id, len } => {
                if usize::from(len) > self.fragment_bytes {
                    return Err(ReliableError::WholeMessageTooLong {
                        id,
                        bytes: usize::from(len),
                    });
                }
                self.classify_whole(id)
            }
            SectionHead::Fragment {
                id, count, cell, ..
            } => {
                self.check_fragment_shape(head)?;
                let verdict = self.classify(id)?;
                if verdict != Verdict::Store {
                    return Ok(verdict);
                }
                match self.slots[self.slot_index(id)] {
                    Slot::Fragmented {
                        count: c, cell: s, ..
                    } if c != count || s != cell => Err(ReliableError::FragmentMismatch { id }),
                    Slot::Empty if !self.cells_free(cell, count) => {
                        // Cells still held by a message the caller has not polled.
                        Ok(Verdict::Backpressure)
                    }
                    _ => Ok(Verdict::Store),
                }
            }
            SectionHead::Unreliable { .. } => Ok(Verdict::Store),
        }
    }

    fn check_fragment_shape(&self, head: &SectionHead) -> Result<(), ReliableError> {
        let SectionHead::Fragment {
            id,
            index,
            count,
            cell,
            len,
        } = *head
        else {
            return Ok(());
        };
        let bad = ReliableError::BadFragment {
            id,
            index,
            count,
            bytes: usize::from(len),
        };
        let (index, count, len) = (usize::from(index), usize::from(count), usize::from(len));
        if count < 2 || count > self.max_fragments || index >= count {
            return Err(bad);
        }
        if usize::from(cell) >= self.cells {
            return Err(bad);
        }
        if index + 1 < count {
            if len != self.fragment_bytes {
                return Err(bad);
            }
        } else {
            // count <= max_fragments keeps this product small.
            let total = (count - 1) * self.fragment_bytes + len;
            if len == 0 || len > self.fragment_bytes || total > self.max_message_bytes {
                return Err(bad);
            }
        }
        Ok(())
    }

    /// Stores a section of a packet that [`ReceiveWindow::check`] accepted whole.
    pub(crate) fn store(&mut self, head: &SectionHead, body: &[u8]) -> Verdict {
        let verdict = match *head {
            SectionHead::Message { id, .. } => self.store_whole(id, body),
            SectionHead::Fragment {
                id,
                index,
                count,
                cell,
                ..
            } => self.store_fragment(id, index, count, cell, body),
            SectionHead::Unreliable { .. } => return Verdict::Store,
        };
        if verdict == Verdict::Store {
            self.advance();
        }
        verdict
    }

    fn store_whole(&mut self, id: Seq16, body: &[u8]) -> Verdict {
        if self.classify_whole(id) != Ok(Verdict::Store) {
            return Verdict::Duplicate;
        }
        let i = self.slot_index(id);
        let start = i * self.fragment_bytes;
        self.slot_bytes[start..start + body.len()].copy_from_slice(body);
        self.slots[i] = Slot::Whole {
            id,
            len: body.len() as u16,
        };
        Verdict::Store
    }

    /// Stores one fragment. Checking each section against the state before the packet
    /// cannot see two sections of one packet disagree; only a broken sender does that, and
    /// the later section is ignored here.
    fn store_fragment(
        &mut self,
        id: Seq16,
        index: u16,
        count: u16,
        cell: u16,
        body: &[u8],
    ) -> Verdict {
        if self.classify(id) != Ok(Verdict::Store) {
            return Verdict::Duplicate;
        }
        let i = self.slot_index(id);
        let have = i * self.words_per_slot;
        match self.slots[i] {
            Slot::Empty => {
                if !self.cells_free(cell, count) {
                    return Verdict::Duplicate;
                }
                for (word, bit) in ring_bits(self.cells, usize::from(cell), usize::from(count)) {
                    self.owned[word] |= bit;
                }
                self.have[have..have + self.words_per_slot].fill(0);
                self.slots[i] = Slot::Fragmented {
                    id,
                    count,
                    cell,
                    received: 0,
                    last_len: 0,
                };
            }
            Slot::Fragmented {
                count: c, cell: s, ..
            } if c == count && s == cell => {}
            _ => return Verdict::Duplicate,
        }
        let (word, bit) = (have + usize::from(index) / 64, 1u64 << (index % 64));
        if self.have[word] & bit != 0 {
            return Verdict::Duplicate;
        }
        self.have[word] |= bit;
        let at = (usize::from(cell) + usize::from(index)) % self.cells * self.fragment_bytes;
        self.ring[at..at + body.len()].copy_from_slice(body);
        if let Slot::Fragmented {
            received, last_len, ..
        } = &mut self.slots[i]
        {
            *received += 1;
            if index + 1 == count {
                *last_len = body.len() as u16;
            }
        }
        Verdict::Store
    }

    /// Moves `next_expected` past every message now complete.
    fn advance(&mut self) {
        while usize::from(self.next_expected.distance_from(self.next_deliver)) < self.window {
            let id = self.next_expected;
            let complete = match self.slots[self.slot_index(id)] {
                Slot::Whole { id: held, .. } => held == id,
                Slot::Fragmented {
                    id: held,
                    count,
                    received,
                    ..
                } => held == id && received == count,
                Slot::Empty => false,
            };
            if !complete {
                break;
            }
            self.next_expected = id.next();
        }
    }

    /// Copies the next message in order into `out` (cleared first); false when it has not
    /// arrived yet.
    pub(crate) fn poll(&mut self, out: &mut Vec<u8>) -> bool {
        if self.next_deliver == self.next_expected {
            return false;
        }
        out.clear();
        let i = self.slot_index(self.next_deliver);
        match self.slots[i] {
            Slot::Whole { len, .. } => {
                let start = i * self.fragment_bytes;
                out.extend_from_slice(&self.slot_bytes[start..start + usize::from(len)]);
            }
            Slot::Fragmented {
                count,
                cell,
                last_len,
                ..
            } => {
                for index in 0..count {
                    let at = (usize::from(cell) + usize::from(index)) % self.cells;
                    let len = if index + 1 == count {
                        usize::from(last_len)
                    } else {
                        self.fragment_bytes
                    };
                    let start = at * self.fragment_bytes;
                    out.extend_from_slice(&self.ring[start..start + len]);
                }
                for (word, bit) in ring_bits(self.cells, usize::from(cell), usize::from(count)) {
                    self.owned[word] &= !bit;
                }
            }
            Slot::Empty => {
                debug_assert!(false, "ids before next_expected are complete");
                return false;
            }
        }
        self.slots[i] = Slot::Empty;
        self.next_deliver = self.next_deliver.next();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fragments of 4 bytes, messages of up to 10 (3 fragments), 4 slots, 6 ring cells.
    fn config() -> ReliableConfig {
        ReliableConfig {
            fragment_bytes: 4,
            reliable_reserved_bytes: 100,
            max_message_bytes: 10,
            send_queue_bytes: 100,
            receive_window_messages: 4,
            reassembly_bytes: 24,
            ..ReliableConfig::default()
        }
    }

    fn msg(id: u16, body: &[u8]) -> (SectionHead, Vec<u8>) {
        (
            SectionHead::Message {
                id: Seq16(id),
                len: body.len() as u16,
            },
            body.to_vec(),
        )
    }

    fn frag(id: u16, index: u16, count: u16, cell: u16, body: &[u8]) -> (SectionHead, Vec<u8>) {
        (
            SectionHead::Fragment {
                id: Seq16(id),
                index,
                count,
                cell,
                len: body.len() as u16,
            },
            body.to_vec(),
        )
    }

    /// Checks then stores one section as its own packet, like the endpoint does.
    fn offer(
        rw: &mut ReceiveWindow,
        section: &(SectionHead, Vec<u8>),
    ) -> Result<Verdict, ReliableError> {
        let verdict = rw.check(&section.0)?;
        if verdict == Verdict::Backpressure {
            return Ok(verdict);
        }
        Ok(rw.store(&section.0, &section.1))
    }

    fn drain(rw: &mut ReceiveWindow) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut got = Vec::new();
        while rw.poll(&mut out) {
            got.push(out.clone());
        }
        got
    }

    #[test]
    fn out_of_order_messages_are_delivered_in_order_once() {
        let mut rw = ReceiveWindow::new(&config());
        assert_eq!(offer(&mut rw, &msg(2, b"c")), Ok(Verdict::Store));
        assert_eq!(offer(&mut rw, &msg(1, b"b")), Ok(Verdict::Store));
        assert!(drain(&mut rw).is_empty(), "0 is missing");
        assert_eq!(offer(&mut rw, &msg(1, b"b")), Ok(Verdict::Duplicate));
        assert_eq!(offer(&mut rw, &msg(0, b"a")), Ok(Verdict::Store));
        assert_eq!(drain(&mut rw), [b"a", b"b", b"c"]);
        assert_eq!(offer(&mut rw, &msg(0, b"a")), Ok(Verdict::Duplicate));
        assert!(drain(&mut rw).is_empty());
    }

    #[test]
    fn fragment_reassembly_in_any_order_with_duplicates() {
        let mut rw = ReceiveWindow::new(&config());
        assert_eq!(offer(&mut rw, &frag(0, 2, 3, 0, b"ij")), Ok(Verdict::Store));
        assert_eq!(
            offer(&mut rw, &frag(0, 0, 3, 0, b"abcd")),
            Ok(Verdict::Store)
        );
        assert_eq!(
            offer(&mut rw, &frag(0, 0, 3, 0, b"abcd")),
            Ok(Verdict::Duplicate)
        );
        assert!(drain(&mut rw).is_empty());
        assert_eq!(
            offer(&mut rw, &frag(0, 1, 3, 0, b"efgh")),
            Ok(Verdict::Store)
        );
        assert_eq!(drain(&mut rw), [b"abcdefghij".to_vec()]);
        assert_eq!(
            offer(&mut rw, &frag(0, 1, 3, 0, b"efgh")),
            Ok(Verdict::Duplicate)
        );
        // The next long message may reuse the cells, and may wrap round the ring's end.
        assert_eq!(offer(&mut rw, &frag(1, 1, 2, 5, b"z")), Ok(Verdict::Store));
        assert_eq!(
            offer(&mut rw, &frag(1, 0, 2, 5, b"wxyz")),
            Ok(Verdict::Store)
        );
        assert_eq!(drain(&mut rw), [b"wxyzz".to_vec()]);
    }

    #[test]
    fn long_messages_in_disjoint_cells_reassemble_interleaved() {
        let mut rw = ReceiveWindow::new(&config());
        assert_eq!(
            offer(&mut rw, &frag(2, 0, 2, 2, b"efgh")),
            Ok(Verdict::Store)
        );
        assert_eq!(offer(&mut rw, &frag(1, 1, 2, 0, b"B")), Ok(Verdict::Store));
        assert_eq!(offer(&mut rw, &frag(2, 1, 2, 2, b"C")), Ok(Verdict::Store));
        assert_eq!(
            offer(&mut rw, &frag(1, 0, 2, 0, b"abcd")),
            Ok(Verdict::Store)
        );
        assert!(drain(&mut rw).is_empty(), "message 0 is missing");
        assert_eq!(offer(&mut rw, &msg(0, b"A")), Ok(Verdict::Store));
        assert_eq!(
            drain(&mut rw),
            [b"A".to_vec(), b"abcdB".to_vec(), b"efghC".to_vec()]
        );
    }

    #[test]
    fn cells_of_an_unpolled_message_push_back() {
        let mut rw = ReceiveWindow::new(&config());
        assert_eq!(
            offer(&mut rw, &frag(0, 0, 2, 4, b"abcd")),
            Ok(Verdict::Store)
        );
        assert_eq!(offer(&mut rw, &frag(0, 1, 2, 4, b"e")), Ok(Verdict::Store));
        // Cells 4 and 5 are held until message 0 is polled; 0..4 are free.
        assert_eq!(
            offer(&mut rw, &frag(1, 0, 3, 3, b"ijkl")),
            Ok(Verdict::Backpressure)
        );
        assert_eq!(
            offer(&mut rw, &frag(1, 0, 2, 5, b"ijkl")),
            Ok(Verdict::Backpressure)
        );
        assert_eq!(
            offer(&mut rw, &frag(2, 0, 3, 0, b"mnop")),
            Ok(Verdict::Store)
        );
        assert_eq!(drain(&mut rw), [b"abcde".to_vec()]);
        assert_eq!(
            offer(&mut rw, &frag(1, 0, 2, 4, b"ijkl")),
            Ok(Verdict::Store)
        );
    }

    #[test]
    fn overlapping_new_messages_in_one_packet_keep_the_first() {
        // Both pass the check against the state before the packet; a broken sender's
        // second one is ignored when stored rather than overwrite the first.
        let mut rw = ReceiveWindow::new(&config());
        let (a, b) = (frag(0, 0, 2, 0, b"abcd"), frag(1, 0, 2, 1, b"wxyz"));
        assert_eq!(rw.check(&a.0), Ok(Verdict::Store));
        assert_eq!(rw.check(&b.0), Ok(Verdict::Store));
        assert_eq!(rw.store(&a.0, &a.1), Verdict::Store);
        assert_eq!(rw.store(&b.0, &b.1), Verdict::Duplicate);
        assert_eq!(offer(&mut rw, &frag(0, 1, 2, 0, b"e")), Ok(Verdict::Store));
        assert_eq!(drain(&mut rw), [b"abcde".to_vec()]);
    }

    #[test]
    fn ids_far_ahead_are_an_error_and_old_ones_duplicates() {
        let mut rw = ReceiveWindow::new(&config());
        assert_eq!(
            offer(&mut rw, &msg(4, b"x")),
            Err(ReliableError::MessageOutOfWindow {
                id: Seq16(4),
                next_expected: Seq16(0)
            })
        );
        assert_eq!(offer(&mut rw, &msg(3, b"x")), Ok(Verdict::Store));
        // 65535 is "before" 0 under the half-range rule: a stale duplicate.
        assert_eq!(offer(&mut rw, &msg(65535, b"x")), Ok(Verdict::Duplicate));
    }

    #[test]
    fn unpolled_messages_push_back_instead_of_overflowing() {
        let mut rw = ReceiveWindow::new(&config());
        for id in 0..4 {
            assert_eq!(offer(&mut rw, &msg(id, &[id as u8])), Ok(Verdict::Store));
        }
        // Complete up to 4, but nothing polled: 4 has no slot yet.
        assert_eq!(offer(&mut rw, &msg(4, b"e")), Ok(Verdict::Backpressure));
        let mut out = Vec::new();
        assert!(rw.poll(&mut out));
        assert_eq!(out, [0]);
        assert_eq!(offer(&mut rw, &msg(4, b"e")), Ok(Verdict::Store));
        assert_eq!(drain(&mut rw).len(), 4);
    }

    #[test]
    fn malformed_fragments_are_errors() {
        let mut rw = ReceiveWindow::new(&config());
        let cases = [
            frag(0, 0, 1, 0, b"abcd"),  // a single fragment should be a whole message
            frag(0, 3, 3, 0, b"ab"),    // index past count
            frag(0, 0, 4, 0, b"abcd"),  // 4 fragments > max_fragments (3)
            frag(0, 0, 3, 0, b"abc"),   // a middle fragment shorter than fragment_bytes
            frag(0, 2, 3, 0, b""),      // an empty last fragment
            frag(0, 2, 3, 0, b"abcde"), // a last fragment longer than fragment_bytes
            frag(0, 2, 3, 0, b"abc"),   // 4 + 4 + 3 > max_message_bytes (10)
            frag(0, 0, 2, 6, b"abcd"),  // cell 6 of a 6-cell ring
        ];
        for (head, body) in &cases {
            assert!(
                matches!(
                    offer(&mut rw, &(*head, body.clone())),
                    Err(ReliableError::BadFragment { .. })
                ),
                "{head:?}"
            );
        }
        assert_eq!(
            offer(&mut rw, &msg(0, b"abcde")),
            Err(ReliableError::WholeMessageTooLong {
                id: Seq16(0),
                bytes: 5
            })
        );
        assert_eq!(
            offer(&mut rw, &frag(0, 0, 2, 0, b"abcd")),
            Ok(Verdict::Store)
        );
        for other in [frag(0, 1, 3, 0, b"abcd"), frag(0, 1, 2, 1, b"e")] {
            assert_eq!(
                offer(&mut rw, &other),
                Err(ReliableError::FragmentMismatch { id: Seq16(0) })
            );
        }
    }

    #[test]
    fn window_slots_survive_the_id_wrap() {
        let mut rw = ReceiveWindow::new(&config());
        let mut out = Vec::new();
        let mut id = Seq16::ZERO;
        for n in 0..70_000u32 {
            let body = n.to_le_bytes();
            let section = if n.is_multiple_of(3) {
                frag(
                    id.0,
                    0,
                    2,
                    (n % 6) as u16,
                    &[body[0], body[1], body[2], body[3]],
                )
            } else {
                msg(id.0, &body)
            };
            assert_eq!(offer(&mut rw, &section), Ok(Verdict::Store));
            if n.is_multiple_of(3) {
                let last = frag(id.0, 1, 2, (n % 6) as u16, b"!");
                assert_eq!(offer(&mut rw, &last), Ok(Verdict::Store));
            }
            assert!(rw.poll(&mut out));
            assert_eq!(&out[..4], body);
            id = id.next();
        }
    }
}
