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

use crate::bits::{prefetch, BitIter};
use tickforge_sim::hint::prefetch_lines;

use crate::priority::TokenBucket;
use crate::state::NetId;

/// A packet is judged lost once an ack arrives for a tick this many newer.
pub const LOSS_ACK_GAP: u32 = 3;

/// Entities of a word of 64 an acked packet carries from which the ack walks the whole word
/// rather than its set bits.
const DENSE_ACK: u32 = 16;

/// No acknowledged state to encode against.
pub(crate) const NO_BASELINE: u32 = u32::MAX;

/// Bits of a ring slot's head word above the tick (bits 0..32).
const WRITTEN: u64 = 1 << 32;
const ACKED: u64 = 1 << 33;
const JUDGED_LOST: u64 = 1 << 34;

/// One connection. The fields an ack reads come first and share a cache line (the
/// `repr`): a worker hosting many matches finds them cold when the acks arrive, and an ack
/// then costs that line, its slot's record and the baselines, rather than a line per table.
#[repr(C, align(64))]
pub(crate) struct Conn {
    /// Acked ticks whose per-entity changes wait for the next write, in the order they
    /// came ([`Conn::on_ack`]); room for the ring, made once.
    pending: Vec<u32>,
    ring: u32,
    pub active: bool,
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
    words: u32,
    pub own: Option<NetId>,
    /// Per entity, what it has accumulated towards being sent; reset when it is.
    pub priority: Box<[f32]>,
    /// Per entity, the tick its state was last sent, or it became relevant.
    pub last_sent: Box<[u32]>,
    /// Per entity, the last tick it counts as in range (hysteresis included); written when
    /// it leaves the range, read for entities relevant or gone and out of range only.
    pub in_range_until: Box<[u32]>,
    /// Bit row of the entities in range at the last write, and that write's tick: an
    /// entity's `in_range_until` is written once, when it leaves, not every tick it stays.
    pub near: Box<[u64]>,
    pub near_tick: u32,
    /// Bit rows, one bit per entity. `relevant`: its state competes for room in every
    /// snapshot. `gone`: no longer relevant, and a gone record goes in every snapshot until
    /// one is acked. `known`: a state was sent since the client last dropped it, so leaving
    /// needs a gone record (`gone` is within `known`; `relevant` and `gone` are apart).
    /// Per-entity state lives in dense arrays and bit rows, not a struct per entity, so a
    /// write walks them in id order: a crowd's connection touches each cache line once,
    /// and a line at a time in order, where a struct per entity visited in the grid's
    /// order missed the cache on most entities.
    pub relevant: Box<[u64]>,
    pub gone: Box<[u64]>,
    pub known: Box<[u64]>,
    pub bucket: TokenBucket,
    /// States the last write sent: how many the next one sorts first.
    pub last_states: u16,
    /// The last write left a relevant entity out.
    pub crowded: bool,
    /// What the write of tick `plan_for` takes from, in place of weighing every relevant
    /// entity again: the candidate keys (priority, id) of the highest the write before it
    /// left out, `plan_len` of them in no order (the planned write orders them).
    pub plan: Box<[u64]>,
    pub plan_len: u16,
    /// The tick [`Conn::plan`] is for; [`NO_PLAN`] when there is none.
    pub plan_for: u32,
}

/// [`Conn::plan_for`] when no plan is made.
pub const NO_PLAN: u32 = u32::MAX;

/// Most entities a plan holds: about what a crowd's packet carries, with room to spare.
pub const PLAN_CAP: usize = 256;

const _: () = assert!(
    std::mem::offset_of!(Conn, pending) + std::mem::size_of::<Vec<u32>>() <= 64
        && std::mem::offset_of!(Conn, ring) + 4 <= 64
        && std::mem::offset_of!(Conn, active) < 64,
    "what an ack reads fits the first cache line"
);

impl Conn {
    pub fn new(max_entities: usize, ring_ticks: u32) -> Conn {
        let words = max_entities.div_ceil(64);
        Conn {
            slots: vec![0; ring_ticks as usize * (1 + 2 * words)].into_boxed_slice(),
            baselines: vec![NO_BASELINE; max_entities].into_boxed_slice(),
            newest_acked: None,
            pending: Vec::with_capacity(ring_ticks as usize),
            judged_through: 0,
            ring: ring_ticks,
            words: words as u32,
            active: false,
            own: None,
            // Whole words, as a write weighs 64 entities at a time.
            priority: vec![0.0; words * 64].into_boxed_slice(),
            last_sent: vec![0; max_entities].into_boxed_slice(),
            in_range_until: vec![0; max_entities].into_boxed_slice(),
            near: vec![0; words].into_boxed_slice(),
            near_tick: 0,
            relevant: vec![0; words].into_boxed_slice(),
            gone: vec![0; words].into_boxed_slice(),
            known: vec![0; words].into_boxed_slice(),
            bucket: TokenBucket::default(),
            last_states: 0,
            crowded: false,
            plan: vec![0; max_entities.min(PLAN_CAP)].into_boxed_slice(),
            plan_len: 0,
            plan_for: NO_PLAN,
        }
    }

    /// Forgets everything about the previous client in this slot.
    pub fn reset(&mut self, own: Option<NetId>, active: bool) {
        self.active = active;
        self.own = own;
        self.priority.fill(0.0);
        self.last_sent.fill(0);
        self.in_range_until.fill(0);
        self.near.fill(0);
        self.near_tick = 0;
        self.relevant.fill(0);
        self.gone.fill(0);
        self.known.fill(0);
        self.baselines.fill(NO_BASELINE);
        self.slots.fill(0);
        self.newest_acked = None;
        self.pending.clear();
        self.judged_through = 0;
        self.bucket = TokenBucket::default();
        self.last_states = 0;
        self.crowded = false;
        self.plan_len = 0;
        self.plan_for = NO_PLAN;
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

    /// Starts loading what [`Conn::on_ack`] reads for the ack of the packet of `last`, the
    /// newest written, as most acks are: `deep` false, the connection's own lines (the
    /// ring's head fields, its tables' addresses); `deep` true, once those have arrived,
    /// the ring slots of that packet and of the one its ack judges, and the end of the
    /// queue it joins. A hint, which changes nothing.
    ///
    /// For a small match (one word of entities: a ten-player match's tables each fit their
    /// first line, which is what is started) `deep` also starts the tables the next write
    /// reads and the ring slot it records into: a worker hosting many such matches reads
    /// each connection's ack shortly before its write, and the write found every table
    /// cold (80 other matches' ticks since).
    pub fn prefetch_ack(&self, last: u32, deep: bool) {
        if !deep {
            prefetch_lines(self);
            return;
        }
        prefetch(&self.slots[self.slot_at(last)]);
        prefetch(&self.slots[self.slot_at(last.wrapping_sub(LOSS_ACK_GAP))]);
        prefetch(self.pending.as_ptr().wrapping_add(self.pending.len()));
        if self.words == 1 {
            prefetch(&self.slots[self.slot_at(last.wrapping_add(1))]);
            prefetch(self.priority.as_ptr());
            prefetch(self.baselines.as_ptr());
            prefetch(self.last_sent.as_ptr());
            prefetch(self.in_range_until.as_ptr());
            prefetch(self.near.as_ptr());
            prefetch(self.relevant.as_ptr());
            prefetch(self.gone.as_ptr());
            prefetch(self.known.as_ptr());
        }
    }

    /// The packet for `tick` arrived. `now` is the current tick; acks for packets no
    /// longer in the ring, or never written, or acked already change nothing. Returns the
    /// packets this ack shows lost.
    ///
    /// What the ack changes per entity (the baselines of the states it carried, the gone
    /// records it confirmed) is applied at the connection's next write
    /// ([`Conn::apply_acks`]), which loads the same lines of those tables anyway, rather
    /// than now, when they are cold: a worker reads a crowd's acks between its writes,
    /// each ack a hundred baselines spread over the table. Nothing but a write reads
    /// those tables or changes what applying them reads, so the write sees what it would
    /// have. The packet's own flags, the newest ack and the losses it shows are settled
    /// now, as before.
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
        // A slot is acked once per packet written in it, and only a write (which applies
        // the queue first) writes one: the queue never holds more than the ring, the room
        // it was made with, so this never allocates.
        debug_assert!(self.pending.len() < self.ring as usize, "one ack a slot");
        self.pending.push(tick);
        if self.newest_acked.is_some_and(|n| n >= tick) {
            return 0;
        }
        self.newest_acked = Some(tick);
        self.judge_losses(tick, lost_bump)
    }

    /// Applies what the acks since the last write change per entity, in the order they
    /// came ([`Conn::on_ack`]).
    pub fn apply_acks(&mut self) {
        for k in 0..self.pending.len() {
            self.apply_ack(self.pending[k]);
        }
        self.pending.clear();
    }

    /// What the ack of the packet of `tick`, still in its slot, changes per entity.
    fn apply_ack(&mut self, tick: u32) {
        let at = self.slot_at(tick);
        debug_assert_eq!(
            self.slots[at] as u32, tick,
            "a write applies its acks first"
        );
        let words = self.words as usize;
        let (states, gone) = self.slots[at + 1..at + 1 + 2 * words].split_at(words);
        for (chunk, &bits) in self.baselines.chunks_mut(64).zip(states) {
            // NO_BASELINE wraps to 0: any acked tick is newer than none.
            if bits.count_ones() >= DENSE_ACK {
                // Every entity of the word, branch-free: a small match's packet carries
                // most of them, and the loop runs several at a time.
                for (i, baseline) in chunk.iter_mut().enumerate() {
                    if bits >> i & 1 != 0 && baseline.wrapping_add(1) <= tick {
                        *baseline = tick;
                    }
                }
            } else {
                // A crowd's packet carries a few of each word.
                for i in BitIter(bits) {
                    if chunk[i].wrapping_add(1) <= tick {
                        chunk[i] = tick;
                    }
                }
            }
        }
        for (w, &bits) in gone.iter().enumerate() {
            // Relevant again since: the state it now gets puts it back in the view.
            let done = bits & self.gone[w];
            self.gone[w] &= !done;
            self.known[w] &= !done;
        }
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
                for e in BitIter(bits & self.relevant[w]).map(|b| w * 64 + b) {
                    self.priority[e] += lost_bump;
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
        c.relevant.fill(!0);
        c
    }

    #[test]
    fn an_ack_sets_newer_baselines_only() {
        let mut c = conn();
        c.record_packet(10, &bits(&[1, 70]), &bits(&[]));
        c.record_packet(11, &bits(&[1]), &bits(&[]));
        assert_eq!(c.on_ack(11, 12, 1.0), 0);
        assert_eq!(c.on_ack(10, 12, 1.0), 0, "a late ack");
        assert_eq!(c.baselines[1], NO_BASELINE, "applied at the next write");
        c.apply_acks();
        assert_eq!((c.baselines[1], c.baselines[70]), (11, 10));
        assert_eq!(c.on_ack(10, 12, 1.0), 0, "a duplicate");
        assert_eq!(c.baselines[2], NO_BASELINE);
    }

    proptest::proptest! {
        /// Acks whose per-entity changes wait for the next write leave a connection, once
        /// applied, as acks applied whole when they came ([`Conn::on_ack`] before the
        /// queue): in any order, with duplicates, acks of ticks never written or past the
        /// ring, and lost packets judged on the way.
        #[test]
        fn acks_applied_at_the_next_write_leave_what_acks_applied_at_once_did(
            writes in proptest::collection::vec(
                (proptest::array::uniform2(proptest::prelude::any::<u64>()),
                 proptest::array::uniform2(proptest::prelude::any::<u64>()),
                 proptest::collection::vec(0u32..40, 0..12)),
                1..30,
            ),
        ) {
            let (mut at_once, mut deferred) = (conn(), conn());
            let (mut lost_at_once, mut lost_deferred) = (0, 0);
            // Entities 0..100: a write never carries a bit past them.
            let within = [u64::MAX, (1 << 36) - 1];
            for (now, (states, gone, acks)) in writes.iter().enumerate() {
                let now = now as u32 + 1;
                let states = [states[0] & within[0], states[1] & within[1]];
                let gone = [gone[0] & within[0], gone[1] & within[1]];
                // A write starts with the acks since the last.
                deferred.apply_acks();
                for c in [&mut at_once, &mut deferred] {
                    // What the write sends, it knows; gone records go to entities known.
                    for w in 0..2 {
                        c.known[w] |= states[w] | gone[w];
                        c.gone[w] |= gone[w];
                    }
                    c.record_packet(now, &states, &gone);
                }
                // Acks come between writes, of this tick or older ones (or none).
                for &back in acks {
                    let tick = now.saturating_sub(back);
                    lost_at_once += at_once.on_ack(tick, now, 1.0);
                    at_once.apply_acks();
                    lost_deferred += deferred.on_ack(tick, now, 1.0);
                }
                proptest::prop_assert_eq!(lost_at_once, lost_deferred);
            }
            deferred.apply_acks();
            proptest::prop_assert_eq!(&at_once.baselines, &deferred.baselines);
            proptest::prop_assert_eq!(&at_once.gone, &deferred.gone);
            proptest::prop_assert_eq!(&at_once.known, &deferred.known);
            proptest::prop_assert_eq!(&at_once.priority, &deferred.priority);
            proptest::prop_assert_eq!(&at_once.slots, &deferred.slots);
            proptest::prop_assert_eq!(at_once.newest_acked, deferred.newest_acked);
        }
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
        assert_eq!(c.priority[10], 5.0);
        assert_eq!(c.priority[11], 0.0);
        assert_eq!(c.on_ack(14, 15, 5.0), 1, "11 now");
        assert_eq!(c.on_ack(11, 15, 5.0), 0, "judged lost, then acked late");
        c.apply_acks();
        assert_eq!(c.baselines[11], 11);
        assert_eq!(c.priority[10], 5.0, "judged once");
    }

    #[test]
    fn an_acked_gone_record_forgets_the_entity() {
        let mut c = conn();
        let (five, six) = (bits(&[5]), bits(&[6]));
        c.relevant[0] &= !(five[0] | six[0]);
        c.gone[0] |= five[0] | six[0];
        c.known[0] |= five[0] | six[0];
        c.record_packet(3, &bits(&[]), &bits(&[5, 6]));
        // 6 is relevant again before the ack arrives.
        c.gone[0] &= !six[0];
        c.relevant[0] |= six[0];
        c.on_ack(3, 4, 1.0);
        c.apply_acks();
        let has = |row: &[u64], e: usize| row[e / 64] >> (e % 64) & 1 != 0;
        assert!(!has(&c.gone, 5) && !has(&c.known, 5), "5 forgotten");
        assert!(has(&c.relevant, 6) && has(&c.known, 6), "6 kept");
    }
}
