//! Packet-level bookkeeping: which of the peer's packets arrived (to write acks and drop
//! duplicates), and which of ours were acknowledged (to free messages, time the round trip
//! and estimate loss). Both are rings of `packet_history` entries indexed by sequence.

use std::time::Instant;

use tickforge_sim::hint::{prefetch, prefetch_item};

use super::header::ACK_BITS;
use super::seq::Seq16;
use super::stats::LinkStats;

/// `sequence % history` for a power-of-two history, which divides 65536, so a sequence
/// keeps its slot across the wrap.
fn slot(sequence: Seq16, history: usize) -> usize {
    usize::from(sequence.0) & (history - 1)
}

/// How a packet from the peer relates to those before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// Not seen before.
    New,
    /// Seen before.
    Duplicate,
    /// Older than the history: whether it was seen is forgotten, so it is dropped.
    Stale,
}

/// Sequences whose arrival a [`ReceivedPackets`] keeps in its own fields rather than a
/// table of its own: the default `packet_history`, so that the line it is read from is the
/// endpoint's, not one more a connection touches every packet (a worker hosting 800
/// connections finds each one's lines cold at every tick).
const INLINE_HISTORY: usize = 256;

/// The peer's packets we received.
pub(crate) struct ReceivedPackets {
    /// One bit per slot of the history (`sequence % history`): set when the sequence that
    /// last took the slot, one of the `history` up to `newest`, arrived. A newer packet
    /// clears the slots of the sequences it skipped, so no bit outlives its sequence.
    inline: [u64; INLINE_HISTORY / 64],
    /// The bits when the history is longer than [`INLINE_HISTORY`]; empty otherwise.
    more: Box<[u64]>,
    history: usize,
    newest: Option<Seq16>,
    /// The ack bits of the next header, kept as packets arrive: bit `i` set when
    /// `newest - 1 - i` was received (one shift a packet, not 32 slot reads a header).
    bits: u32,
}

impl ReceivedPackets {
    /// `history`: a power of two of at least 64.
    pub(crate) fn new(history: usize) -> Self {
        debug_assert!(history.is_power_of_two() && history >= 64);
        let more = if history > INLINE_HISTORY {
            vec![0; history / 64].into_boxed_slice()
        } else {
            Box::default()
        };
        ReceivedPackets {
            inline: [0; INLINE_HISTORY / 64],
            more,
            history,
            newest: None,
            bits: 0,
        }
    }

    /// As [`ReceivedPackets::new`] made it, keeping its memory.
    pub(crate) fn reset(&mut self) {
        self.inline = [0; INLINE_HISTORY / 64];
        self.more.fill(0);
        self.newest = None;
        self.bits = 0;
    }

    fn words(&self) -> &[u64] {
        if self.more.is_empty() {
            &self.inline[..self.history / 64]
        } else {
            &self.more
        }
    }

    fn words_mut(&mut self) -> &mut [u64] {
        if self.more.is_empty() {
            &mut self.inline[..self.history / 64]
        } else {
            &mut self.more
        }
    }

    /// Whether the sequence that last took `sequence`'s slot arrived.
    fn received(&self, sequence: Seq16) -> bool {
        let i = slot(sequence, self.history);
        self.words()[i / 64] >> (i % 64) & 1 != 0
    }

    fn set(&mut self, sequence: Seq16, received: bool) {
        let i = slot(sequence, self.history);
        let word = &mut self.words_mut()[i / 64];
        *word = *word & !(1 << (i % 64)) | u64::from(received) << (i % 64);
    }

    pub(crate) fn arrival(&self, sequence: Seq16) -> Arrival {
        let Some(newest) = self.newest else {
            return Arrival::New;
        };
        if sequence.is_newer_than(newest) {
            return Arrival::New;
        }
        if usize::from(newest.distance_from(sequence)) >= self.history {
            return Arrival::Stale;
        }
        if self.received(sequence) {
            return Arrival::Duplicate;
        }
        Arrival::New
    }

    pub(crate) fn mark(&mut self, sequence: Seq16) {
        match self.newest {
            Some(newest) if !sequence.is_newer_than(newest) => {
                // An older packet: its bit, if the header reaches back to it.
                let back = u32::from(newest.distance_from(sequence));
                if (1..=u32::from(ACK_BITS)).contains(&back) {
                    self.bits |= 1 << (back - 1);
                }
            }
            Some(newest) => {
                // Forget the sequences skipped: their slots still hold packets a history ago.
                let skipped = usize::from(sequence.distance_from(newest));
                if skipped >= self.history {
                    self.words_mut().fill(0);
                } else {
                    for k in 1..skipped {
                        self.set(newest.wrapping_add(k as u16), false);
                    }
                }
                // The old newest and its bits move `ahead` places back.
                let ahead = u32::from(sequence.distance_from(newest));
                let moved = ((u64::from(self.bits) << 1) | 1)
                    .checked_shl(ahead - 1)
                    .unwrap_or(0);
                self.bits = moved as u32;
                self.newest = Some(sequence);
            }
            None => {
                self.newest = Some(sequence);
                self.bits = 0;
            }
        }
        self.set(sequence, true);
    }

    /// `ack` and `ack_bits` for the next header. Before anything arrived: 65535 and none,
    /// which acknowledges nothing since the peer starts at 0.
    pub(crate) fn acks(&self) -> (Seq16, u32) {
        match self.newest {
            Some(newest) => (newest, self.bits),
            None => (Seq16(u16::MAX), 0),
        }
    }

    /// `acks` as the slots say it, read one by one: what the kept bits must equal.
    #[cfg(test)]
    fn acks_from_slots(&self) -> (Seq16, u32) {
        let Some(newest) = self.newest else {
            return (Seq16(u16::MAX), 0);
        };
        let mut bits = 0;
        for i in 0..ACK_BITS {
            if self.received(newest.wrapping_sub(i + 1)) {
                bits |= 1 << i;
            }
        }
        (newest, bits)
    }
}

/// One of our packets, remembered until `packet_history` newer ones replace it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SentPacket {
    /// `None` until the slot is first used.
    pub(crate) sequence: Option<Seq16>,
    pub(crate) sent_at: Instant,
    pub(crate) acked: bool,
    /// Tag of the unreliable message it carried.
    pub(crate) tag: Option<u32>,
    /// Where its reliable sections are recorded in the chunk refs.
    pub(crate) refs_start: u64,
    pub(crate) refs_count: u16,
}

impl SentPacket {
    /// A slot not used yet; `now` fills its time.
    fn unused(now: Instant) -> SentPacket {
        SentPacket {
            sequence: None,
            sent_at: now,
            acked: false,
            tag: None,
            refs_start: 0,
            refs_count: 0,
        }
    }
}

/// Our packets, until acknowledged or replaced.
pub(crate) struct SentPackets {
    slots: Box<[SentPacket]>,
    /// What the peer's headers have acknowledged so far: the newest ack and, in bit `k`,
    /// whether `newest - k` was acknowledged too (64 packets back).
    reported: Option<(Seq16, u64)>,
    next: Seq16,
    newest_acked: Option<Seq16>,
    /// Oldest packet not yet judged acked or lost.
    next_to_judge: Seq16,
}

impl SentPackets {
    /// `now` only fills the unused slots.
    pub(crate) fn new(history: usize, now: Instant) -> Self {
        SentPackets {
            slots: vec![SentPacket::unused(now); history].into_boxed_slice(),
            reported: None,
            next: Seq16::ZERO,
            newest_acked: None,
            next_to_judge: Seq16::ZERO,
        }
    }

    /// As [`SentPackets::new`] made it at `now`, keeping its memory.
    pub(crate) fn reset(&mut self, now: Instant) {
        self.slots.fill(SentPacket::unused(now));
        self.reported = None;
        self.next = Seq16::ZERO;
        self.newest_acked = None;
        self.next_to_judge = Seq16::ZERO;
    }

    /// Sequence of the next packet.
    pub(crate) fn next_sequence(&self) -> Seq16 {
        self.next
    }

    /// Starts loading the slot the next [`SentPackets::record`] replaces: a hint, which
    /// changes nothing. A server writes each of its connections a packet in turn and finds
    /// that slot cold (hundreds of connections' histories since).
    pub(crate) fn prefetch_next(&self) {
        prefetch_item(&self.slots[slot(self.next, self.slots.len())]);
    }

    /// Starts loading what reading the peer's next header usually touches: the slots of
    /// our newest two packets (what it acknowledges, as a peer that sends a packet a tick
    /// has received one or two since its last) and of the oldest not yet judged (what the
    /// ack's window moving past it judges). A hint, which changes nothing.
    pub(crate) fn prefetch_acks(&self) {
        let len = self.slots.len();
        prefetch_item(&self.slots[slot(self.next.wrapping_sub(1), len)]);
        prefetch_item(&self.slots[slot(self.next.wrapping_sub(2), len)]);
        prefetch_item(&self.slots[slot(self.next_to_judge, len)]);
    }

    /// Records the packet just written under the next sequence, replacing the packet a
    /// history ago (judged now if no ack judged it).
    pub(crate) fn record(&mut self, mut packet: SentPacket, stats: &mut LinkStats) {
        let sequence = self.next;
        let i = slot(sequence, self.slots.len());
        if let Some(old) = self.slots[i].sequence {
            self.judge_up_to(old, stats);
        }
        packet.sequence = Some(sequence);
        self.slots[i] = packet;
        self.next = sequence.next();
    }

    /// The acks of a header that no earlier header reported, as a mask: bit `k` stands for
    /// sequence `ack - k` (bit 0 for `ack` itself). Each header repeats the 32 acks before
    /// its newest, so without this every packet read would look up 33 of our packets
    /// (cold cache lines, one worker holds hundreds of connections) to find the one new.
    /// Only what the mask holds needs [`SentPackets::ack`]; what it leaves out was
    /// acknowledged already and would change nothing.
    ///
    /// Acks of sequences not sent yet (a confused or hostile peer) are left out before
    /// anything is recorded: were they remembered, the real ack of that sequence, once
    /// sent, would look reported already and never be applied.
    pub(crate) fn newly_reported(&mut self, ack: Seq16, ack_bits: u32) -> u64 {
        let mut header = 1 | (u64::from(ack_bits) << 1);
        if !self.next.is_newer_than(ack) {
            // `ack - k` for k in 0..=unsent is `next` or later.
            let unsent = u32::from(ack.distance_from(self.next));
            header &= u64::MAX.checked_shl(unsent + 1).unwrap_or(0);
            if header == 0 {
                return 0;
            }
        }
        let Some((newest, known)) = self.reported else {
            self.reported = Some((ack, header));
            return header;
        };
        if ack == newest || ack.is_newer_than(newest) {
            let d = u32::from(ack.distance_from(newest));
            let known = known.checked_shl(d).unwrap_or(0);
            self.reported = Some((ack, known | header));
            header & !known
        } else {
            // An older header, reordered: compare it where the two windows overlap.
            let d = u32::from(newest.distance_from(ack));
            let known_here = known.checked_shr(d).unwrap_or(0);
            let new = header & !known_here;
            self.reported = Some((newest, known | new.checked_shl(d).unwrap_or(0)));
            new
        }
    }

    /// Marks a packet acknowledged; returns it if the ack is new. Sequences not among the
    /// last `packet_history` sent match no slot and acknowledge nothing.
    pub(crate) fn ack(&mut self, sequence: Seq16) -> Option<SentPacket> {
        let packet = &mut self.slots[slot(sequence, self.slots.len())];
        if packet.sequence != Some(sequence) || packet.acked {
            return None;
        }
        packet.acked = true;
        Some(*packet)
    }

    /// After the acks of a header are applied: when `ack` is the newest acknowledgement
    /// yet, judges every packet no later header can acknowledge any more.
    pub(crate) fn ack_window_moved(&mut self, ack: Seq16, stats: &mut LinkStats) {
        let was_sent = self.slots[slot(ack, self.slots.len())].sequence == Some(ack);
        if was_sent && self.newest_acked.is_none_or(|n| ack.is_newer_than(n)) {
            self.newest_acked = Some(ack);
            self.judge_up_to(ack.wrapping_sub(ACK_BITS + 1), stats);
        }
    }

    /// Counts our packets up to `last` (inclusive) as acked or lost, each once.
    fn judge_up_to(&mut self, last: Seq16, stats: &mut LinkStats) {
        for _ in 0..self.slots.len() {
            let s = self.next_to_judge;
            if !(s == last || last.is_newer_than(s)) {
                break;
            }
            let packet = self.slots[slot(s, self.slots.len())];
            if packet.sequence == Some(s) {
                stats.judge(!packet.acked);
            }
            self.next_to_judge = s.next();
        }
    }
}

/// Tags of acknowledged unreliable messages, waiting for the caller.
pub(crate) struct TagQueue {
    tags: Box<[u32]>,
    head: usize,
    len: usize,
}

impl TagQueue {
    pub(crate) fn new(capacity: usize) -> Self {
        TagQueue {
            tags: vec![0; capacity].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }

    /// Empty, keeping its memory.
    pub(crate) fn reset(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// Where the next [`TagQueue::push`] writes: over the oldest, `head`, when full.
    fn tail(&self) -> usize {
        (self.head + self.len) % self.tags.len()
    }

    /// Starts loading the slot the next [`TagQueue::push`] writes: a hint.
    pub(crate) fn prefetch_push(&self) {
        if !self.tags.is_empty() {
            prefetch(&self.tags[self.tail()]);
        }
    }

    /// Appends `tag`, discarding the oldest when full; false when it discarded one.
    pub(crate) fn push(&mut self, tag: u32) -> bool {
        let cap = self.tags.len();
        let at = self.tail();
        self.tags[at] = tag;
        if self.len == cap {
            self.head = (self.head + 1) % cap;
            return false;
        }
        self.len += 1;
        true
    }

    pub(crate) fn pop(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let tag = self.tags[self.head];
        self.head = (self.head + 1) % self.tags.len();
        self.len -= 1;
        Some(tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;
    use std::time::Duration;

    /// The sequences a header acknowledges.
    fn header_set(ack: Seq16, bits: u32) -> Vec<Seq16> {
        let mut v = vec![ack];
        v.extend(
            (0..32)
                .filter(|i| bits & (1 << i) != 0)
                .map(|i| ack.wrapping_sub(i + 1)),
        );
        v
    }

    fn unmask(ack: Seq16, mut mask: u64) -> Vec<Seq16> {
        let mut v = Vec::new();
        while mask != 0 {
            v.push(ack.wrapping_sub(mask.trailing_zeros() as u16));
            mask &= mask - 1;
        }
        v
    }

    proptest! {
        /// The ack bits kept as packets arrive are the ones the slots hold, whatever
        /// arrives: gaps, reordering, duplicates, jumps past the history, the wrap.
        #[test]
        fn kept_ack_bits_match_the_slots(
            start in any::<u16>(),
            steps in proptest::collection::vec(-40i32..80, 1..200),
        ) {
            let mut r = ReceivedPackets::new(64);
            let mut s = Seq16(start);
            for step in steps {
                s = if step >= 0 { s.wrapping_add(step as u16) } else { s.wrapping_sub((-step) as u16) };
                if r.arrival(s) == Arrival::New {
                    r.mark(s);
                }
                prop_assert_eq!(r.acks(), r.acks_from_slots());
            }
        }

        /// New, duplicate or stale as a set of every sequence received says, for a history
        /// held in the endpoint's fields (64, 256) and one held apart (1,024): gaps,
        /// reordering, duplicates, jumps past the history, the wrap.
        #[test]
        fn arrivals_are_what_the_set_of_received_sequences_says(
            start in any::<u16>(),
            history in prop_oneof![Just(64usize), Just(256), Just(1024)],
            steps in proptest::collection::vec(-300i32..1200, 1..300),
        ) {
            // The model counts sequences without the wrap: positions from `start`.
            let mut r = ReceivedPackets::new(history);
            let mut received = std::collections::HashSet::new();
            let mut newest: Option<i64> = None;
            let mut at = 0i64;
            for step in steps {
                at += i64::from(step);
                let s = Seq16(start.wrapping_add(at as u16));
                let want = match newest {
                    Some(n) if at <= n => {
                        // Within half the sequence space, where "newer" is defined.
                        prop_assume!(n - at < 30_000);
                        if (n - at) as usize >= history {
                            Arrival::Stale
                        } else if received.contains(&at) {
                            Arrival::Duplicate
                        } else {
                            Arrival::New
                        }
                    }
                    _ => Arrival::New,
                };
                prop_assert_eq!(r.arrival(s), want);
                if want == Arrival::New {
                    r.mark(s);
                    received.insert(at);
                    newest = Some(newest.map_or(at, |n| n.max(at)));
                }
                prop_assert_eq!(r.acks(), r.acks_from_slots());
            }
        }

        /// Whatever order headers come in, every sequence any of them acknowledges is
        /// reported new at least once (no ack is lost); in order, exactly once.
        #[test]
        fn every_ack_is_reported_and_in_order_only_once(
            base in any::<u16>(),
            headers in proptest::collection::vec((0u16..50, any::<u32>()), 1..40),
            in_order in any::<bool>(),
        ) {
            let mut headers = headers;
            if in_order {
                headers.sort_by_key(|h| h.0);
            }
            let mut sent = SentPackets::new(64, Instant::now());
            // Every sequence the headers name was sent (the acks of unsent ones are
            // another test's).
            sent.next = Seq16(base).wrapping_add(50);
            let mut all = BTreeSet::new();
            let mut reported = Vec::new();
            for &(offset, bits) in &headers {
                let ack = Seq16(base).wrapping_add(offset);
                all.extend(header_set(ack, bits).into_iter().map(|s| s.0));
                reported.extend(unmask(ack, sent.newly_reported(ack, bits)).into_iter().map(|s| s.0));
            }
            let once: BTreeSet<u16> = reported.iter().copied().collect();
            prop_assert_eq!(&once, &all);
            if in_order {
                prop_assert_eq!(once.len(), reported.len());
            }
        }
    }

    /// Found by the `reliable_header` fuzz target: a header acknowledging a sequence we had
    /// not sent yet made its real ack, later, look reported already.
    #[test]
    fn an_ack_ahead_of_what_was_sent_does_not_hide_the_real_one() {
        let mut sent = SentPackets::new(64, Instant::now());
        let mut stats = LinkStats::default();
        let packet = |sent_at| SentPacket {
            sequence: None,
            sent_at,
            acked: false,
            tag: None,
            refs_start: 0,
            refs_count: 0,
        };
        // Nothing sent: acks of 0 and of 40 (bits reach down to 8) are all ahead of us.
        assert_eq!(sent.newly_reported(Seq16(0), 0), 0);
        assert_eq!(sent.newly_reported(Seq16(40), u32::MAX), 0);
        for _ in 0..3 {
            sent.record(packet(Instant::now()), &mut stats);
        }
        // 0, 1 and 2 are sent now; a header acking 4 with every bit names 3 and 4 too.
        // (Its bits below 0 name 65535 and older: old sequences, matching no slot.)
        let mask = sent.newly_reported(Seq16(4), u32::MAX);
        let named: Vec<Seq16> = unmask(Seq16(4), mask)
            .into_iter()
            .filter(|s| s.0 < 100)
            .collect();
        assert_eq!(named, vec![Seq16(2), Seq16(1), Seq16(0)]);
        assert!(sent.ack(Seq16(0)).is_some());
        // Once sent, 3 and 4 are new when acknowledged.
        sent.record(packet(Instant::now()), &mut stats);
        sent.record(packet(Instant::now()), &mut stats);
        assert_eq!(
            unmask(Seq16(4), sent.newly_reported(Seq16(4), 1)),
            vec![Seq16(4), Seq16(3)]
        );
    }

    #[test]
    fn ack_bitfield_marks_the_right_packets() {
        let mut r = ReceivedPackets::new(64);
        assert_eq!(r.acks(), (Seq16(u16::MAX), 0));
        for s in [0, 1, 3, 5, 34] {
            r.mark(Seq16(s));
        }
        let (ack, bits) = r.acks();
        assert_eq!(ack, Seq16(34));
        // bit i is packet 34 - 1 - i: 5 is bit 28, 3 bit 30, 1 bit 32 (out of range), 0 none.
        assert_eq!(bits, 1 << 28 | 1 << 30);
        // A late packet fills its bit.
        r.mark(Seq16(33));
        assert_eq!(r.acks(), (Seq16(34), 1 | 1 << 28 | 1 << 30));
    }

    #[test]
    fn duplicates_and_stale_packets_are_told_apart_across_the_wrap() {
        let mut r = ReceivedPackets::new(64);
        r.mark(Seq16(65530));
        assert_eq!(r.arrival(Seq16(65530)), Arrival::Duplicate);
        assert_eq!(r.arrival(Seq16(65531)), Arrival::New);
        r.mark(Seq16(10));
        assert_eq!(r.arrival(Seq16(65530)), Arrival::Duplicate);
        assert_eq!(
            r.arrival(Seq16(65529)),
            Arrival::New,
            "late but within history"
        );
        assert_eq!(r.arrival(Seq16(10u16.wrapping_sub(64))), Arrival::Stale);
        // A gap within the history clears the slots it skipped: 64 takes 0's slot, and did
        // not arrive.
        let mut gap = ReceivedPackets::new(64);
        for s in [0, 28, 65] {
            gap.mark(Seq16(s));
        }
        assert_eq!(gap.arrival(Seq16(64)), Arrival::New);
        assert_eq!(gap.arrival(Seq16(28)), Arrival::Duplicate);
        // Jumping a full history ahead forgets everything before.
        r.mark(Seq16(200));
        assert_eq!(r.arrival(Seq16(200 - 63)), Arrival::New);
        assert_eq!(r.arrival(Seq16(10)), Arrival::Stale);
        let (_, bits) = r.acks();
        assert_eq!(bits, 0);
    }

    fn packet(now: Instant, tag: Option<u32>) -> SentPacket {
        SentPacket {
            sequence: None,
            sent_at: now,
            acked: false,
            tag,
            refs_start: 0,
            refs_count: 0,
        }
    }

    #[test]
    fn each_packet_is_acked_once_and_only_if_sent() {
        let t0 = Instant::now();
        let mut stats = LinkStats::new(Duration::from_millis(100));
        let mut s = SentPackets::new(64, t0);
        assert!(s.ack(Seq16(0)).is_none(), "nothing sent yet");
        s.record(packet(t0, Some(7)), &mut stats);
        assert!(s.ack(Seq16(1)).is_none(), "not sent yet");
        assert_eq!(s.ack(Seq16(0)).map(|p| p.tag), Some(Some(7)));
        assert!(s.ack(Seq16(0)).is_none(), "acknowledged before");
        assert!(s.ack(Seq16(u16::MAX)).is_none());
    }

    #[test]
    fn packets_out_of_ack_range_are_judged_lost_once() {
        let t0 = Instant::now();
        let mut stats = LinkStats::new(Duration::from_millis(100));
        let mut s = SentPackets::new(64, t0);
        for _ in 0..40 {
            s.record(packet(t0, None), &mut stats);
        }
        // Every packet but 2 and 3 acknowledged, newest 39.
        for q in (0..40u16).filter(|q| *q != 2 && *q != 3) {
            s.ack(Seq16(q));
        }
        s.ack_window_moved(Seq16(39), &mut stats);
        // 39 - 33 = 6: packets 0..=6 judged, two of them lost.
        assert_eq!(stats.packets_lost, 2);
        s.ack_window_moved(Seq16(39), &mut stats);
        assert_eq!(stats.packets_lost, 2, "judged once");
        assert!(stats.loss > 0.0);
    }

    #[test]
    fn unacked_packets_replaced_by_newer_ones_count_as_lost() {
        let t0 = Instant::now();
        let mut stats = LinkStats::new(Duration::from_millis(100));
        let mut s = SentPackets::new(64, t0);
        for _ in 0..64 + 10 {
            s.record(packet(t0, None), &mut stats);
        }
        assert_eq!(stats.packets_lost, 10);
    }

    #[test]
    fn tag_queue_keeps_the_newest_when_full() {
        let mut q = TagQueue::new(3);
        assert!(q.push(1) && q.push(2) && q.push(3));
        assert!(!q.push(4), "1 discarded");
        let got: Vec<u32> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(got, [2, 3, 4]);
        assert_eq!(q.pop(), None);
    }
}
