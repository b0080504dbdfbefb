//! What the server knows about one connection: which entities it tracks and their
//! priority, the baseline each entity is encoded against, and the packets in flight.
//!
//! Acknowledgement: the caller reports `on_ack(tick)` when the transport learns that the
//! packet carrying snapshot `tick` arrived. Every entity whose state that packet carried
//! takes `tick` as its baseline, if newer; every gone record it carried is done.
//!
//! Loss: a packet still unacknowledged when an ack arrives for a tick [`LOSS_ACK_GAP`] or
//! more newer is judged lost (the transport's acks arrive in order unless reordered by
//! more than that), and the entities whose state it carried get a priority bump. A late
//! ack still counts as an ack: judging a packet lost only speeds its correction up.

use crate::bits::BitIter;

use crate::priority::TokenBucket;
use crate::state::NetId;

/// A packet is judged lost once an ack arrives for a tick this many newer.
pub const LOSS_ACK_GAP: u32 = 3;

/// No acknowledged state to encode against.
pub(crate) const NO_BASELINE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Not relevant, and the client holds no copy we must take back.
    Absent,
    /// Relevant: its state competes for room in every snapshot.
    Relevant,
    /// No longer relevant: a gone record goes in every snapshot until one is acked.
    Gone,
}

/// One (connection, entity) pair; its baseline lives apart, in [`Conn::baselines`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct PerEntity {
    pub priority: f32,
    /// Tick the state was last sent, or the entity became relevant.
    pub last_sent: u32,
    /// Last tick the entity counts as in range (hysteresis included).
    pub in_range_until: u32,
    pub status: Status,
    /// A state was sent since the client last dropped it: leaving needs a gone record.
    pub known: bool,
    /// In `Conn::tracked`.
    pub in_list: bool,
}

impl PerEntity {
    const NEW: PerEntity = PerEntity {
        priority: 0.0,
        last_sent: 0,
        in_range_until: 0,
        status: Status::Absent,
        known: false,
        in_list: false,
    };
}

/// Bits of a ring slot's head word above the tick (bits 0..32).
const WRITTEN: u64 = 1 << 32;
const ACKED: u64 = 1 << 33;
const JUDGED_LOST: u64 = 1 << 34;

/// One connection. The fields an ack reads come first and share a cache line (the
/// `repr`): a worker hosting many matches finds them cold when the acks arrive, and an ack
/// then costs that line, its slot's record and the baselines, rather than a line per table.
#[repr(C, align(64))]
pub(crate) struct Conn {
    /// Per ring slot, `1 + 2 × words` words: a head word (the tick, and whether the packet
    /// was written, acked, judged lost), then `words` words of the entities whose state the
    /// packet carried, then `words` words of those it carried a gone record for.
    slots: Box<[u64]>,
    /// Per entity: the newest acked tick whose packet carried its state; [`NO_BASELINE`]
    /// if none.
    pub baselines: Box<[u32]>,
    pub newest_acked: Option<u32>,
    /// Packets before this tick have been judged.
    judged_through: u32,
    ring: u32,
    words: u32,
    pub active: bool,
    pub own: Option<NetId>,
    pub ents: Box<[PerEntity]>,
    /// Entities Relevant or Gone (and Absent ones until the next write compacts them).
    pub tracked: Vec<u16>,
    pub bucket: TokenBucket,
}

const _: () = assert!(
    std::mem::offset_of!(Conn, active) < 64,
    "what an ack reads fits the first cache line"
);

impl Conn {
    pub fn new(max_entities: usize, ring_ticks: u32) -> Conn {
        let words = max_entities.div_ceil(64);
        Conn {
            slots: vec![0; ring_ticks as usize * (1 + 2 * words)].into_boxed_slice(),
            baselines: vec![NO_BASELINE; max_entities].into_boxed_slice(),
            newest_acked: None,
            judged_through: 0,
            ring: ring_ticks,
            words: words as u32,
            active: false,
            own: None,
            ents: vec![PerEntity::NEW; max_entities].into_boxed_slice(),
            tracked: Vec::with_capacity(max_entities),
            bucket: TokenBucket::default(),
        }
    }

    /// Forgets everything about the previous client in this slot.
    pub fn reset(&mut self, own: Option<NetId>, active: bool) {
        self.active = active;
        self.own = own;
        self.ents.fill(PerEntity::NEW);
        self.baselines.fill(NO_BASELINE);
        self.tracked.clear();
        self.slots.fill(0);
        self.newest_acked = None;
        self.judged_through = 0;
        self.bucket = TokenBucket::default();
    }

    /// Where the record of ring slot `tick % ring` starts in `slots`.
    fn slot_at(&self, tick: u32) -> usize {
        (tick % self.ring) as usize * (1 + 2 * self.words as usize)
    }

    /// Records the packet written for `tick`: the entities whose state and whose gone
    /// record it carried.
    pub fn record_packet(&mut self, tick: u32, states: &[u64], gone: &[u64]) {
        let at = self.slot_at(tick);
        let words = self.words as usize;
        let record = &mut self.slots[at..at + 1 + 2 * words];
        record[0] = u64::from(tick) | WRITTEN;
        record[1..1 + words].copy_from_slice(states);
        record[1 + words..].copy_from_slice(gone);
    }

    /// The packet for `tick` arrived. `now` is the current tick; acks for packets no
    /// longer in the ring, or never written, change nothing. Returns the packets this ack
    /// shows lost.
    pub fn on_ack(&mut self, tick: u32, now: u32, lost_bump: f32) -> u32 {
        if tick > now || now - tick >= self.ring {
            return 0;
        }
        let at = self.slot_at(tick);
        let head = self.slots[at];
        if head & WRITTEN == 0 || head as u32 != tick || head & ACKED != 0 {
            return 0;
        }
        self.slots[at] = head | ACKED;
        let words = self.words as usize;
        let (states, gone) = self.slots[at + 1..at + 1 + 2 * words].split_at(words);
        for (chunk, &bits) in self.baselines.chunks_mut(64).zip(states) {
            if bits == 0 {
                continue;
            }
            // Every entity of the word, branch-free: a packet carries most of them, and the
            // loop runs several at a time.
            for (i, baseline) in chunk.iter_mut().enumerate() {
                // NO_BASELINE wraps to 0: any acked tick is newer than none.
                if bits >> i & 1 != 0 && baseline.wrapping_add(1) <= tick {
                    *baseline = tick;
                }
            }
        }
        for (w, &bits) in gone.iter().enumerate() {
            for e in BitIter(bits).map(|b| w * 64 + b) {
                let pe = &mut self.ents[e];
                // Relevant again since: the state it now gets puts it back in the view.
                if pe.status == Status::Gone {
                    pe.status = Status::Absent;
                    pe.known = false;
                }
            }
        }
        if self.newest_acked.is_some_and(|n| n >= tick) {
            return 0;
        }
        self.newest_acked = Some(tick);
        self.judge_losses(tick, lost_bump)
    }

    /// Judges lost every unacked packet at least [`LOSS_ACK_GAP`] older than `newest`.
    fn judge_losses(&mut self, newest: u32, lost_bump: f32) -> u32 {
        let Some(last) = newest.checked_sub(LOSS_ACK_GAP) else {
            return 0;
        };
        let first = self
            .judged_through
            .max(newest.saturating_sub(self.ring - 1));
        let words = self.words as usize;
        let mut lost = 0;
        for t in first..=last {
            let at = self.slot_at(t);
            let head = self.slots[at];
            if head & WRITTEN == 0 || head as u32 != t || head & (ACKED | JUDGED_LOST) != 0 {
                continue;
            }
            self.slots[at] = head | JUDGED_LOST;
            lost += 1;
            for (w, &bits) in self.slots[at + 1..at + 1 + words].iter().enumerate() {
                for e in BitIter(bits).map(|b| w * 64 + b) {
                    let pe = &mut self.ents[e];
                    if pe.status == Status::Relevant {
                        pe.priority += lost_bump;
                    }
                }
            }
        }
        self.judged_through = self.judged_through.max(last + 1);
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(ids: &[usize]) -> [u64; 2] {
        let mut w = [0u64; 2];
        for &i in ids {
            w[i / 64] |= 1 << (i % 64);
        }
        w
    }

    fn conn() -> Conn {
        let mut c = Conn::new(100, 8);
        c.reset(None, true);
        for e in &mut c.ents {
            e.status = Status::Relevant;
        }
        c
    }

    #[test]
    fn an_ack_sets_newer_baselines_only() {
        let mut c = conn();
        c.record_packet(10, &bits(&[1, 70]), &bits(&[]));
        c.record_packet(11, &bits(&[1]), &bits(&[]));
        assert_eq!(c.on_ack(11, 12, 1.0), 0);
        assert_eq!(c.on_ack(10, 12, 1.0), 0, "a late ack");
        assert_eq!((c.baselines[1], c.baselines[70]), (11, 10));
        assert_eq!(c.on_ack(10, 12, 1.0), 0, "a duplicate");
        assert_eq!(c.baselines[2], NO_BASELINE);
    }

    #[test]
    fn acks_outside_the_ring_or_never_written_are_ignored() {
        let mut c = conn();
        c.record_packet(10, &bits(&[1]), &bits(&[]));
        c.on_ack(10, 18, 1.0);
        assert_eq!(c.baselines[1], NO_BASELINE, "8 ticks old in a ring of 8");
        c.on_ack(12, 13, 1.0);
        c.on_ack(30, 13, 1.0);
        assert_eq!(c.newest_acked, None);
    }

    #[test]
    fn a_packet_three_ticks_behind_the_newest_ack_is_lost() {
        let mut c = conn();
        for t in 10..=14 {
            c.record_packet(t, &bits(&[t as usize]), &bits(&[]));
        }
        assert_eq!(c.on_ack(12, 15, 5.0), 0, "10 is only 2 behind");
        assert_eq!(c.on_ack(13, 15, 5.0), 1);
        assert_eq!(c.ents[10].priority, 5.0);
        assert_eq!(c.ents[11].priority, 0.0);
        assert_eq!(c.on_ack(14, 15, 5.0), 1, "11 now");
        assert_eq!(c.on_ack(11, 15, 5.0), 0, "judged lost, then acked late");
        assert_eq!(c.baselines[11], 11);
        assert_eq!(c.ents[10].priority, 5.0, "judged once");
    }

    #[test]
    fn an_acked_gone_record_forgets_the_entity() {
        let mut c = conn();
        c.ents[5].status = Status::Gone;
        c.ents[5].known = true;
        c.ents[6].status = Status::Gone;
        c.ents[6].known = true;
        c.record_packet(3, &bits(&[]), &bits(&[5, 6]));
        c.ents[6].status = Status::Relevant;
        c.on_ack(3, 4, 1.0);
        assert_eq!((c.ents[5].status, c.ents[5].known), (Status::Absent, false));
        assert_eq!(
            (c.ents[6].status, c.ents[6].known),
            (Status::Relevant, true)
        );
    }
}
