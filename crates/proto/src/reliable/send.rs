//! The sending half of the reliable-ordered channel.
//!
//! Queued messages are cut into chunks (a whole message, or one fragment of a long one) and
//! kept until the peer acknowledges a packet that carried them. Memory is two rings sized
//! at construction: the message bytes and the chunk records. Chunks leave from the front
//! only, so a message the peer never acknowledges holds everything queued after it; the
//! queue then fills and [`ReliableError::SendQueueFull`] tells the caller to disconnect
//! rather than buffer without limit.
//!
//! What goes out is limited by what the receiver can hold. Message ids in flight stay
//! within `receive_window_messages` of the oldest unacknowledged message (the front).
//! Fragmented messages are laid end to end on a stream of reassembly cells, and message `m`
//! sits in the receiver's ring at its stream position modulo the ring's cells. Fragments of
//! `m` go out only while `m` ends within one turn of the ring from the first fragmented
//! message at or after the front. Every fragmented message before that one has been
//! received whole and, with everything before it, handed to the caller, so its cells are
//! free again; those still held fit in the one turn without overlapping.

use std::time::{Duration, Instant};

use super::config::ReliableConfig;
use super::section::{SectionHead, MESSAGE_HEADER_BYTES};
use super::seq::Seq16;
use super::ReliableError;
use crate::wire::Writer;

/// A whole message or one fragment, waiting for its ack.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    id: Seq16,
    /// Fragment index; 0 for a whole message.
    index: u16,
    /// Fragments of the message; 1 for a whole message.
    count: u16,
    /// For a fragmented message: its first cell on the reassembly stream (a position that
    /// only grows); it takes `count` cells from there.
    stream_start: u64,
    /// Where the body starts in the byte ring (a position that only grows).
    offset: u64,
    len: u16,
    last_sent: Option<Instant>,
    acked: bool,
}

impl Chunk {
    /// A slot no message uses.
    const EMPTY: Chunk = Chunk {
        id: Seq16::ZERO,
        index: 0,
        count: 1,
        stream_start: 0,
        offset: 0,
        len: 0,
        last_sent: None,
        acked: false,
    };

    fn head(&self, ring_cells: u64) -> SectionHead {
        if self.count == 1 {
            SectionHead::Message {
                id: self.id,
                len: self.len,
            }
        } else {
            SectionHead::Fragment {
                id: self.id,
                index: self.index,
                count: self.count,
                // validate() keeps the ring within 65535 cells.
                cell: (self.stream_start % ring_cells) as u16,
                len: self.len,
            }
        }
    }
}

/// Which chunks each sent packet carried, as chunk serials in a ring.
///
/// A packet's record is lost once newer packets have written more serials than the ring
/// holds; an ack for it then acknowledges nothing and its chunks are simply sent again.
pub(crate) struct ChunkRefs {
    serials: Box<[u64]>,
    written: u64,
}

impl ChunkRefs {
    /// A ring holding `capacity` serials.
    pub(crate) fn new(capacity: usize) -> Self {
        ChunkRefs {
            serials: vec![0; capacity].into_boxed_slice(),
            written: 0,
        }
    }

    /// As [`ChunkRefs::new`] made it, keeping its memory.
    pub(crate) fn reset(&mut self) {
        self.serials.fill(0);
        self.written = 0;
    }

    /// Serials written so far; a packet's record starts at this position.
    pub(crate) fn position(&self) -> u64 {
        self.written
    }

    fn push(&mut self, serial: u64) {
        let i = (self.written % self.serials.len() as u64) as usize;
        self.serials[i] = serial;
        self.written += 1;
    }

    /// The serials recorded from `start`, `count` of them, unless overwritten since.
    pub(crate) fn get(&self, start: u64, count: u16) -> Option<impl Iterator<Item = u64> + '_> {
        let cap = self.serials.len() as u64;
        let end = start.checked_add(u64::from(count))?;
        if end > self.written || self.written - start > cap {
            return None;
        }
        Some((start..end).map(move |p| self.serials[(p % cap) as usize]))
    }
}

/// What [`SendQueue::write_due`] put in the packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Written {
    /// Section bytes appended.
    pub(crate) bytes: usize,
    /// Sections appended.
    pub(crate) sections: u16,
    /// Sections among them that had been sent before.
    pub(crate) resent: u16,
}

/// Reliable messages waiting for acks, with all memory reserved up front.
pub(crate) struct SendQueue {
    bytes: Box<[u8]>,
    /// Ring positions of the message bytes held: `bytes_head..bytes_tail`.
    bytes_head: u64,
    bytes_tail: u64,
    chunks: Box<[Chunk]>,
    /// Serials of the chunks held: `chunks_head..chunks_tail`; serial `s` lives at
    /// `s % chunks.len()`.
    chunks_head: u64,
    chunks_tail: u64,
    messages: usize,
    next_id: Seq16,
    max_messages: usize,
    max_message_bytes: usize,
    fragment_bytes: usize,
    window_messages: u16,
    /// Cells of the receiver's reassembly ring.
    ring_cells: u64,
    /// Where the next fragmented message starts on the reassembly stream.
    stream_tail: u64,
}

impl SendQueue {
    pub(crate) fn new(config: &ReliableConfig) -> Self {
        // Every message needs one chunk and every full fragment_bytes of it one more at most.
        let max_chunks =
            config.send_queue_messages + config.send_queue_bytes / config.fragment_bytes;
        let empty = Chunk::EMPTY;
        SendQueue {
            bytes: vec![0; config.send_queue_bytes].into_boxed_slice(),
            bytes_head: 0,
            bytes_tail: 0,
            chunks: vec![empty; max_chunks].into_boxed_slice(),
            chunks_head: 0,
            chunks_tail: 0,
            messages: 0,
            next_id: Seq16::ZERO,
            max_messages: config.send_queue_messages,
            max_message_bytes: config.max_message_bytes,
            fragment_bytes: config.fragment_bytes,
            // validate() caps the window at MAX_WINDOW, which fits.
            window_messages: u16::try_from(config.receive_window_messages).unwrap_or(u16::MAX),
            ring_cells: config.reassembly_cells() as u64,
            stream_tail: 0,
        }
    }

    /// As [`SendQueue::new`] made it, keeping its memory (the message bytes are only ever
    /// read where a chunk points, so they are left as they are).
    pub(crate) fn reset(&mut self) {
        self.chunks.fill(Chunk::EMPTY);
        self.bytes_head = 0;
        self.bytes_tail = 0;
        self.chunks_head = 0;
        self.chunks_tail = 0;
        self.messages = 0;
        self.next_id = Seq16::ZERO;
        self.stream_tail = 0;
    }

    /// Messages held, acknowledged or not, until they leave the front of the queue.
    pub(crate) fn queued_messages(&self) -> usize {
        self.messages
    }

    /// Message bytes held.
    pub(crate) fn queued_bytes(&self) -> usize {
        (self.bytes_tail - self.bytes_head) as usize
    }

    /// Copies `message` in and cuts it into chunks; its id is the next in sequence.
    pub(crate) fn push(&mut self, message: &[u8]) -> Result<Seq16, ReliableError> {
        let len = message.len();
        if len > self.max_message_bytes {
            return Err(ReliableError::MessageTooLarge {
                bytes: len,
                max_bytes: self.max_message_bytes,
            });
        }
        let count = if len <= self.fragment_bytes {
            1
        } else {
            len.div_ceil(self.fragment_bytes)
        };
        let chunks_free = self.chunks.len() as u64 - (self.chunks_tail - self.chunks_head);
        let bytes_free = self.bytes.len() - self.queued_bytes();
        if self.messages >= self.max_messages || (count as u64) > chunks_free || len > bytes_free {
            return Err(ReliableError::SendQueueFull {
                messages: self.messages,
                bytes: self.queued_bytes(),
            });
        }
        // Both fit in u16: count by validate() (<= 65535 fragments), len by fragment_bytes
        // being smaller than a packet.
        let count16 = count as u16;
        let id = self.next_id;
        for index in 0..count16 {
            let start = usize::from(index) * self.fragment_bytes;
            let piece = &message[start..len.min(start + self.fragment_bytes)];
            let offset = self.bytes_tail;
            self.copy_in(piece);
            let slot = (self.chunks_tail % self.chunks.len() as u64) as usize;
            self.chunks[slot] = Chunk {
                id,
                index,
                count: count16,
                stream_start: self.stream_tail,
                offset,
                len: piece.len() as u16,
                last_sent: None,
                acked: false,
            };
            self.chunks_tail += 1;
        }
        if count > 1 {
            self.stream_tail += count as u64;
        }
        self.messages += 1;
        self.next_id = id.next();
        Ok(id)
    }

    fn copy_in(&mut self, piece: &[u8]) {
        if piece.is_empty() {
            return; // also keeps a zero-byte ring from dividing by zero
        }
        let cap = self.bytes.len();
        let start = (self.bytes_tail % cap as u64) as usize;
        let first = piece.len().min(cap - start);
        self.bytes[start..start + first].copy_from_slice(&piece[..first]);
        self.bytes[..piece.len() - first].copy_from_slice(&piece[first..]);
        self.bytes_tail += piece.len() as u64;
    }

    fn copy_out(bytes: &[u8], offset: u64, len: usize, w: &mut Writer<'_>) {
        if len == 0 {
            return;
        }
        let cap = bytes.len();
        let start = (offset % cap as u64) as usize;
        let first = len.min(cap - start);
        w.bytes(&bytes[start..start + first]);
        w.bytes(&bytes[..len - first]);
    }

    /// Appends chunks that are due (never sent, or unacknowledged for `resend_after`), oldest
    /// first, as long as each fits in what is left of `budget_bytes`; records their serials.
    pub(crate) fn write_due(
        &mut self,
        now: Instant,
        resend_after: Duration,
        budget_bytes: usize,
        out: &mut Vec<u8>,
        refs: &mut ChunkRefs,
    ) -> Written {
        let mut written = Written::default();
        if self.chunks_head == self.chunks_tail {
            return written;
        }
        let cap = self.chunks.len() as u64;
        let front_id = self.chunks[(self.chunks_head % cap) as usize].id;
        let mut w = Writer::new(out);
        let mut serial = self.chunks_head;
        // Start of the first fragmented message at or after the front, once met.
        let mut held_start = None;
        while serial < self.chunks_tail {
            let left = budget_bytes - written.bytes;
            if left < MESSAGE_HEADER_BYTES {
                break;
            }
            let chunk = &mut self.chunks[(serial % cap) as usize];
            if chunk.id.distance_from(front_id) >= self.window_messages {
                break; // the receiver could not hold it; neither could it anything after
            }
            if chunk.count > 1 {
                let start = *held_start.get_or_insert(chunk.stream_start);
                let end = chunk.stream_start + u64::from(chunk.count);
                if end - start > self.ring_cells {
                    // Its cells may still be held at the receiver; so may those of every
                    // later fragmented message.
                    serial += u64::from(chunk.count - chunk.index);
                    continue;
                }
            }
            serial += 1;
            if chunk.acked
                || chunk
                    .last_sent
                    .is_some_and(|t| now.saturating_duration_since(t) < resend_after)
            {
                continue;
            }
            let head = chunk.head(self.ring_cells);
            let size = head.encoded_bytes();
            if size > left {
                continue;
            }
            head.write(&mut w);
            Self::copy_out(&self.bytes, chunk.offset, usize::from(chunk.len), &mut w);
            if chunk.last_sent.is_some() {
                written.resent += 1;
            }
            chunk.last_sent = Some(now);
            refs.push(serial - 1);
            written.bytes += size;
            written.sections += 1;
        }
        written
    }

    /// Marks a chunk acknowledged and frees the front of the queue as far as it is all
    /// acknowledged. Returns how many messages left the queue.
    pub(crate) fn ack(&mut self, serial: u64) -> usize {
        if serial < self.chunks_head || serial >= self.chunks_tail {
            return 0; // freed already, or never written by us
        }
        let cap = self.chunks.len() as u64;
        self.chunks[(serial % cap) as usize].acked = true;
        let mut freed = 0;
        while self.chunks_head < self.chunks_tail {
            let front = self.chunks[(self.chunks_head % cap) as usize];
            if !front.acked {
                break;
            }
            self.chunks_head += 1;
            self.bytes_head = front.offset + u64::from(front.len);
            if front.index + 1 == front.count {
                self.messages -= 1;
                freed += 1;
            }
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Reader;

    fn config() -> ReliableConfig {
        ReliableConfig {
            fragment_bytes: 100,
            reliable_reserved_bytes: 200,
            max_message_bytes: 1000,
            send_queue_bytes: 2000,
            send_queue_messages: 8,
            receive_window_messages: 4,
            reassembly_bytes: 1000,
            ..ReliableConfig::default()
        }
    }

    /// Reads back what write_due wrote.
    fn sections(buf: &[u8]) -> Vec<(SectionHead, Vec<u8>)> {
        let mut r = Reader::new(buf);
        let mut out = Vec::new();
        while r.remaining() > 0 {
            let (head, body) = SectionHead::read(&mut r).unwrap();
            out.push((head, body.to_vec()));
        }
        out
    }

    #[test]
    fn long_message_is_cut_into_full_fragments_and_a_short_last_one() {
        let mut q = SendQueue::new(&config());
        let msg: Vec<u8> = (0..250u8).collect();
        assert_eq!(q.push(&msg), Ok(Seq16(0)));
        let mut out = Vec::new();
        let mut refs = ChunkRefs::new(64);
        let t0 = Instant::now();
        let w = q.write_due(t0, Duration::from_millis(50), 1000, &mut out, &mut refs);
        assert_eq!(w.sections, 3);
        assert_eq!(w.bytes, out.len());
        let got = sections(&out);
        let lens: Vec<usize> = got.iter().map(|(h, _)| h.body_bytes()).collect();
        assert_eq!(lens, [100, 100, 50]);
        let joined: Vec<u8> = got.into_iter().flat_map(|(_, b)| b).collect();
        assert_eq!(joined, msg);
    }

    #[test]
    fn nothing_is_resent_before_resend_after_and_acked_chunks_never() {
        let mut q = SendQueue::new(&config());
        q.push(b"one").unwrap();
        q.push(b"two").unwrap();
        let mut out = Vec::new();
        let mut refs = ChunkRefs::new(64);
        let t0 = Instant::now();
        let resend = Duration::from_millis(50);
        assert_eq!(
            q.write_due(t0, resend, 1000, &mut out, &mut refs).sections,
            2
        );
        out.clear();
        let t1 = t0 + Duration::from_millis(49);
        assert_eq!(
            q.write_due(t1, resend, 1000, &mut out, &mut refs).sections,
            0
        );
        assert_eq!(q.ack(1), 0, "the front is still unacknowledged");
        assert_eq!(q.queued_messages(), 2);
        let t2 = t0 + resend;
        let w = q.write_due(t2, resend, 1000, &mut out, &mut refs);
        assert_eq!((w.sections, w.resent), (1, 1));
        assert_eq!(sections(&out)[0].1, b"one");
        assert_eq!(q.ack(0), 2);
        assert_eq!((q.queued_messages(), q.queued_bytes()), (0, 0));
    }

    #[test]
    fn send_queue_bound_gives_the_error() {
        let mut q = SendQueue::new(&config());
        for _ in 0..8 {
            q.push(b"x").unwrap();
        }
        assert_eq!(
            q.push(b"x"),
            Err(ReliableError::SendQueueFull {
                messages: 8,
                bytes: 8
            })
        );
        let mut q = SendQueue::new(&config());
        q.push(&[1; 1000]).unwrap();
        q.push(&[2; 1000]).unwrap();
        assert_eq!(
            q.push(&[3; 1]),
            Err(ReliableError::SendQueueFull {
                messages: 2,
                bytes: 2000
            })
        );
        assert_eq!(
            q.push(&[0; 1001]),
            Err(ReliableError::MessageTooLarge {
                bytes: 1001,
                max_bytes: 1000
            })
        );
    }

    #[test]
    fn bytes_wrap_around_the_ring_intact() {
        let mut q = SendQueue::new(&config());
        let mut refs = ChunkRefs::new(64);
        let mut out = Vec::new();
        let t0 = Instant::now();
        let mut serial = 0;
        for round in 0..10u8 {
            let msg = [round; 90];
            q.push(&msg).unwrap();
            q.push(&[round ^ 0xff; 700]).unwrap();
            out.clear();
            let w = q.write_due(t0, Duration::ZERO, 2000, &mut out, &mut refs);
            assert!(w.sections >= 1);
            let got = sections(&out);
            assert_eq!(got[0].1, msg, "round {round}");
            // Acknowledge everything: whole message, then the long one in a later write.
            while q.queued_messages() > 0 {
                q.ack(serial);
                serial += 1;
                out.clear();
                q.write_due(t0, Duration::ZERO, 2000, &mut out, &mut refs);
            }
            assert!(q.bytes_tail > (round as u64) * 790);
        }
        assert!(q.bytes_tail > 2000, "the ring wrapped");
    }

    #[test]
    fn window_and_reassembly_buffers_limit_what_goes_out() {
        let mut q = SendQueue::new(&config());
        for i in 0..6u8 {
            q.push(&[i]).unwrap();
        }
        let mut out = Vec::new();
        let mut refs = ChunkRefs::new(64);
        let t0 = Instant::now();
        let w = q.write_due(t0, Duration::ZERO, 1000, &mut out, &mut refs);
        assert_eq!(w.sections, 4, "ids 0..4 only: the receive window is 4");

        // A 10-cell reassembly ring: the second long message waits until the first, and
        // everything before it, is acknowledged, because together they need 11 cells.
        let mut q = SendQueue::new(&config());
        q.push(b"a").unwrap(); // chunk 0
        q.push(&[7; 150]).unwrap(); // chunks 1, 2: stream cells 0..2
        q.push(b"b").unwrap(); // chunk 3
        q.push(&[8; 900]).unwrap(); // chunks 4..13: stream cells 2..11
        out.clear();
        q.write_due(t0, Duration::ZERO, 1000, &mut out, &mut refs);
        let heads: Vec<(u16, u16, u16)> = sections(&out)
            .into_iter()
            .map(|(h, _)| match h {
                SectionHead::Message { id, .. } => (id.0, 0, 0),
                SectionHead::Fragment {
                    id, index, cell, ..
                } => (id.0, index, cell),
                SectionHead::Unreliable { .. } => unreachable!(),
            })
            .collect();
        assert_eq!(heads, [(0, 0, 0), (1, 0, 0), (1, 1, 0), (2, 0, 0)]);
        let resend = Duration::from_secs(1);
        q.ack(1);
        q.ack(2);
        out.clear();
        assert_eq!(
            q.write_due(t0, resend, 2000, &mut out, &mut refs).sections,
            0,
            "message 0 still holds message 1 at the receiver"
        );
        q.ack(0);
        let w = q.write_due(t0, resend, 2000, &mut out, &mut refs);
        assert_eq!(w.sections, 9, "all fragments of message 3");
        let cells: Vec<u16> = sections(&out)
            .into_iter()
            .map(|(h, _)| match h {
                SectionHead::Fragment { cell, .. } => cell,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(cells, [2; 9], "its first cell, 2, in every fragment");
    }

    #[test]
    fn chunks_that_do_not_fit_wait_and_smaller_ones_pass() {
        let mut q = SendQueue::new(&config());
        q.push(&[1; 90]).unwrap();
        q.push(&[2; 5]).unwrap();
        let mut out = Vec::new();
        let mut refs = ChunkRefs::new(64);
        let w = q.write_due(Instant::now(), Duration::ZERO, 50, &mut out, &mut refs);
        assert_eq!((w.sections, w.bytes), (1, 10));
        assert!(w.bytes <= 50);
    }

    #[test]
    fn overwritten_refs_are_not_returned() {
        let mut refs = ChunkRefs::new(4);
        for s in 0..3 {
            refs.push(s);
        }
        assert_eq!(refs.get(0, 3).unwrap().collect::<Vec<_>>(), [0, 1, 2]);
        refs.push(3);
        refs.push(4);
        assert!(refs.get(0, 3).is_none(), "serial 0 was overwritten");
        assert_eq!(refs.get(1, 4).unwrap().collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert!(refs.get(4, 2).is_none(), "past what was written");
    }
}
