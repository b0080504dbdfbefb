//! [`Endpoint`]: one side of one connection, from packet sequences and acks up to the
//! reliable and unreliable messages they carry.

use std::time::{Duration, Instant};

use super::acks::{Arrival, ReceivedPackets, SentPacket, SentPackets, TagQueue};
use super::config::ReliableConfig;
use super::header::PacketHeader;
use super::recv::{ReceiveWindow, Verdict};
use super::section::{SectionHead, UNRELIABLE_HEADER_BYTES};
use super::send::{ChunkRefs, SendQueue};
use super::seq::Seq16;
use super::stats::LinkStats;
use super::ReliableError;
use crate::wire::{Reader, Writer};

/// Reliable sections remembered per packet of history, on average; a packet whose record
/// was overwritten before its ack came has its sections sent again.
const CHUNK_REFS_PER_PACKET: usize = 8;

/// What [`Endpoint::write_packet`] put in a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketWritten {
    /// The packet's sequence.
    pub sequence: Seq16,
    /// Whether the unreliable message went in; false too when none was given.
    pub unreliable_included: bool,
    /// Reliable sections written (whole messages and fragments, new and resent).
    pub reliable_sections: u16,
    /// Length of the packet, header included, in bytes.
    pub bytes: usize,
}

/// One side of one connection's reliability layer. Performs no I/O and reads no clock.
///
/// Call [`Endpoint::read_packet`] for every payload received, drain
/// [`Endpoint::poll_reliable`] and [`Endpoint::poll_acked_tag`], queue reliable messages
/// with [`Endpoint::send_reliable`], and write one packet per tick with
/// [`Endpoint::write_packet`]. All memory is reserved here, in [`Endpoint::new`].
pub struct Endpoint {
    config: ReliableConfig,
    sent: SentPackets,
    refs: ChunkRefs,
    received: ReceivedPackets,
    send: SendQueue,
    recv: ReceiveWindow,
    acked_tags: TagQueue,
    rtt_sampled: bool,
    stats: LinkStats,
}

impl Endpoint {
    /// An endpoint with every buffer reserved from `config`; `now` is when it starts.
    ///
    /// # Panics
    ///
    /// If `config` fails [`ReliableConfig::validate`]; check it where it is parsed.
    pub fn new(config: ReliableConfig, now: Instant) -> Self {
        if let Err(e) = config.validate() {
            panic!("invalid ReliableConfig: {e}");
        }
        let history = config.packet_history;
        Endpoint {
            sent: SentPackets::new(history, now),
            refs: ChunkRefs::new(history * CHUNK_REFS_PER_PACKET),
            received: ReceivedPackets::new(history),
            send: SendQueue::new(&config),
            recv: ReceiveWindow::new(&config),
            acked_tags: TagQueue::new(history),
            rtt_sampled: false,
            stats: LinkStats::new(config.initial_rtt),
            config,
        }
    }

    /// Makes the endpoint as [`Endpoint::new`] made it, started at `now`, for a new
    /// connection: nothing sent, received or queued, statistics cleared. Keeps its memory:
    /// allocates nothing.
    pub fn reset(&mut self, now: Instant) {
        self.sent.reset(now);
        self.refs.reset();
        self.received.reset();
        self.send.reset();
        self.recv.reset();
        self.acked_tags.reset();
        self.rtt_sampled = false;
        self.stats = LinkStats::new(self.config.initial_rtt);
    }

    /// The configuration this endpoint was made with.
    pub fn config(&self) -> &ReliableConfig {
        &self.config
    }

    /// Round trip, jitter, loss and counters.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// How long a reliable section waits for its ack before it is sent again: the smoothed
    /// round trip plus twice its jitter plus `resend_margin`, at least `min_resend_after`.
    pub fn resend_after(&self) -> Duration {
        let wait = self.stats.rtt + self.stats.jitter * 2 + self.config.resend_margin;
        wait.max(self.config.min_resend_after)
    }

    /// Largest unreliable message, in bytes, that [`Endpoint::write_packet`] always
    /// includes whatever reliable data is waiting. Larger ones go in only when reliable
    /// data leaves room.
    pub fn max_unreliable_bytes(&self) -> usize {
        self.config.budget_bytes() - self.config.reliable_reserved_bytes - UNRELIABLE_HEADER_BYTES
    }

    /// Reliable messages held in the send queue until acknowledged.
    pub fn queued_reliable_messages(&self) -> usize {
        self.send.queued_messages()
    }

    /// Reliable message bytes held in the send queue until acknowledged.
    pub fn queued_reliable_bytes(&self) -> usize {
        self.send.queued_bytes()
    }

    /// Queues a reliable-ordered message (an event); one longer than `fragment_bytes` is
    /// sent in fragments. The bytes are copied.
    ///
    /// Fails with [`ReliableError::MessageTooLarge`] over `max_message_bytes`, and with
    /// [`ReliableError::SendQueueFull`] when the peer has left too much unacknowledged:
    /// disconnect it then.
    pub fn send_reliable(&mut self, message: &[u8]) -> Result<(), ReliableError> {
        self.send.push(message)?;
        self.stats.messages_queued += 1;
        Ok(())
    }

    /// Starts loading what [`Endpoint::write_packet`] finds cold when a server writes to
    /// many connections in turn (the history slot its packet replaces): a hint, which
    /// changes nothing, given a while before the write (a server gives it before the
    /// connection's snapshot is built).
    pub fn prefetch_write(&self) {
        self.sent.prefetch_next();
    }

    /// Starts loading what [`Endpoint::read_packet`] usually finds cold when a server reads
    /// from many connections in turn: the history slots the peer's acks name and the slot
    /// of the tag queue they fill. A hint, which changes nothing; it reads the endpoint's
    /// own fields, so give it once those are loaded (after a
    /// [`tickforge_sim::hint::prefetch_lines`] of the endpoint, a few datagrams later).
    pub fn prefetch_read(&self) {
        self.sent.prefetch_acks();
        self.acked_tags.prefetch_push();
    }

    /// Writes the next packet into `out` (cleared first): the header with our acks, the
    /// reliable sections due (new ones, and unacknowledged ones past
    /// [`Endpoint::resend_after`]), oldest first, and the unreliable message `(tag, bytes)`
    /// if it fits. Call once per tick, and send what it writes even when it carries only
    /// acks; `out` stops allocating once it has grown to `max_packet_bytes`.
    ///
    /// Reliable sections may use `reliable_reserved_bytes` whatever the unreliable message
    /// is; the unreliable message fits whenever it is at most
    /// [`Endpoint::max_unreliable_bytes`], and otherwise when reliable data leaves room.
    pub fn write_packet(
        &mut self,
        now: Instant,
        unreliable: Option<(u32, &[u8])>,
        out: &mut Vec<u8>,
    ) -> PacketWritten {
        out.clear();
        out.reserve(self.config.max_packet_bytes);
        let sequence = self.sent.next_sequence();
        let (ack, ack_bits) = self.received.acks();
        let header = PacketHeader {
            sequence,
            ack,
            ack_bits,
        };
        header.write(&mut Writer::new(out));

        let budget = self.config.budget_bytes();
        let resend_after = self.resend_after();
        let refs_start = self.refs.position();
        // Drop the unreliable message now if it could never fit.
        let unreliable = unreliable.and_then(|(tag, body)| {
            let len = u16::try_from(body.len()).ok()?;
            let head = SectionHead::Unreliable { tag, len };
            (head.encoded_bytes() <= budget).then_some((head, tag, body))
        });
        let first_cap = match unreliable {
            Some((head, ..)) => {
                (budget - head.encoded_bytes()).max(self.config.reliable_reserved_bytes)
            }
            None => budget,
        };
        let mut reliable = self
            .send
            .write_due(now, resend_after, first_cap, out, &mut self.refs);
        let mut tag_included = None;
        if let Some((head, tag, body)) = unreliable {
            if reliable.bytes + head.encoded_bytes() <= budget {
                let mut w = Writer::new(out);
                head.write(&mut w);
                w.bytes(body);
                tag_included = Some(tag);
            } else {
                // It did not fit beside the reliable data; let reliable data have the rest.
                let more = self.send.write_due(
                    now,
                    resend_after,
                    budget - reliable.bytes,
                    out,
                    &mut self.refs,
                );
                reliable.bytes += more.bytes;
                reliable.sections += more.sections;
                reliable.resent += more.resent;
            }
        }
        debug_assert!(out.len() <= self.config.max_packet_bytes);

        let record = SentPacket {
            sequence: None,
            sent_at: now,
            acked: false,
            tag: tag_included,
            refs_start,
            refs_count: reliable.sections,
        };
        self.sent.record(record, &mut self.stats);
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += out.len() as u64;
        self.stats.sections_resent += u64::from(reliable.resent);
        PacketWritten {
            sequence,
            unreliable_included: tag_included.is_some(),
            reliable_sections: reliable.sections,
            bytes: out.len(),
        }
    }

    /// Reads one packet from the peer: applies its acks, stores its reliable sections, and
    /// returns its unreliable message `(tag, bytes)`, borrowed from `packet`.
    ///
    /// Duplicates, packets older than the packet history, and packets that cannot be stored
    /// until the caller polls return `Ok(None)` and change nothing but counters. An `Err`
    /// means the peer is broken or hostile: nothing of the packet was applied, and the
    /// caller should disconnect it with the error as the reason.
    pub fn read_packet<'a>(
        &mut self,
        now: Instant,
        packet: &'a [u8],
    ) -> Result<Option<(u32, &'a [u8])>, ReliableError> {
        if packet.len() > self.config.max_packet_bytes {
            return Err(ReliableError::PacketTooLarge(packet.len()));
        }
        let mut r = Reader::new(packet);
        let header = PacketHeader::read(&mut r)?;
        let sequence = header.sequence;
        match self.received.arrival(sequence) {
            Arrival::New => {}
            Arrival::Duplicate => {
                self.stats.packets_duplicate += 1;
                return Ok(None);
            }
            Arrival::Stale => {
                self.stats.packets_stale += 1;
                return Ok(None);
            }
        }
        let sections = r.rest();

        // Check every section before changing anything: the ack we send for this packet
        // will promise the peer that all of it was taken.
        let mut unreliable = None;
        let mut r = Reader::new(sections);
        while r.remaining() > 0 {
            let (head, body) = SectionHead::read(&mut r)?;
            if let SectionHead::Unreliable { tag, .. } = head {
                if unreliable.replace((tag, body)).is_some() {
                    return Err(ReliableError::TwoUnreliable);
                }
            } else if self.recv.check(&head)? == Verdict::Backpressure {
                self.stats.packets_backpressure += 1;
                return Ok(None);
            }
        }

        self.received.mark(sequence);
        self.apply_acks(now, &header);
        let mut r = Reader::new(sections);
        while let Ok((head, body)) = SectionHead::read(&mut r) {
            self.recv.store(&head, body);
        }
        self.stats.packets_received += 1;
        self.stats.bytes_received += packet.len() as u64;
        Ok(unreliable)
    }

    /// Copies the next reliable message into `out` (cleared first) and returns true; false
    /// when the next one in order has not arrived. Each message comes out exactly once, in
    /// the order the peer queued it. Drain it after every read: unpolled messages hold
    /// receive-window room, and the peer's packets are refused until there is some.
    pub fn poll_reliable(&mut self, out: &mut Vec<u8>) -> bool {
        let got = self.recv.poll(out);
        if got {
            self.stats.messages_delivered += 1;
        }
        got
    }

    /// The tag of an unreliable message whose packet the peer acknowledged, oldest ack
    /// first. The peer holds that message: for snapshots, the baseline to delta against.
    /// Up to `packet_history` tags wait here; older ones are discarded and counted.
    pub fn poll_acked_tag(&mut self) -> Option<u32> {
        self.acked_tags.pop()
    }

    fn apply_acks(&mut self, now: Instant, header: &PacketHeader) {
        let mut new = self.sent.newly_reported(header.ack, header.ack_bits);
        let newest = if new & 1 != 0 {
            self.ack_packet(header.ack)
        } else {
            None
        };
        new &= !1;
        while new != 0 {
            let k = new.trailing_zeros();
            new &= new - 1;
            self.ack_packet(header.ack.wrapping_sub(k as u16));
        }
        if let Some(packet) = newest {
            // Only the newest ack times a round trip: an older packet acknowledged late, in
            // the bits, would count the lost acks before it too.
            let first = !self.rtt_sampled;
            self.rtt_sampled = true;
            self.stats
                .sample_rtt(now.saturating_duration_since(packet.sent_at), first);
        }
        self.sent.ack_window_moved(header.ack, &mut self.stats);
    }

    /// Applies the ack of one of our packets; returns the packet if the ack is new.
    fn ack_packet(&mut self, sequence: Seq16) -> Option<SentPacket> {
        let packet = self.sent.ack(sequence)?;
        self.stats.packets_acked += 1;
        if let Some(tag) = packet.tag {
            if !self.acked_tags.push(tag) {
                self.stats.acked_tags_dropped += 1;
            }
        }
        if let Some(serials) = self.refs.get(packet.refs_start, packet.refs_count) {
            for serial in serials {
                self.stats.messages_acked += self.send.ack(serial) as u64;
            }
        }
        Some(packet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reliable::HEADER_BYTES;
    use crate::MAX_PACKET_BYTES;

    const TICK: Duration = Duration::from_nanos(7_812_500);

    /// Writes a packet on `from` and reads it on `to`; returns the unreliable part read.
    fn hop(
        from: &mut Endpoint,
        to: &mut Endpoint,
        now: Instant,
        unreliable: Option<(u32, &[u8])>,
    ) -> Option<(u32, Vec<u8>)> {
        let mut buf = Vec::new();
        from.write_packet(now, unreliable, &mut buf);
        assert!(buf.len() <= from.config().max_packet_bytes);
        to.read_packet(now, &buf)
            .unwrap()
            .map(|(t, b)| (t, b.to_vec()))
    }

    fn drain(e: &mut Endpoint) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut got = Vec::new();
        while e.poll_reliable(&mut out) {
            got.push(out.clone());
        }
        got
    }

    #[test]
    fn a_message_larger_than_one_packet_arrives_whole() {
        let t0 = Instant::now();
        let (mut a, mut b) = (
            Endpoint::new(ReliableConfig::default(), t0),
            Endpoint::new(ReliableConfig::default(), t0),
        );
        let big: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        a.send_reliable(b"before").unwrap();
        a.send_reliable(&big).unwrap();
        a.send_reliable(b"after").unwrap();
        let mut got = Vec::new();
        let mut now = t0;
        for _ in 0..20 {
            hop(&mut a, &mut b, now, None);
            got.extend(drain(&mut b));
            hop(&mut b, &mut a, now, None);
            now += TICK;
        }
        assert_eq!(got, [b"before".to_vec(), big, b"after".to_vec()]);
        assert_eq!(a.queued_reliable_messages(), 0, "all acknowledged");
        assert_eq!(a.stats().messages_acked, 3);
        assert_eq!(b.stats().messages_delivered, 3);
    }

    #[test]
    fn rtt_estimate_measures_the_round_trip() {
        let t0 = Instant::now();
        let (mut a, mut b) = (
            Endpoint::new(ReliableConfig::default(), t0),
            Endpoint::new(ReliableConfig::default(), t0),
        );
        let one_way = Duration::from_millis(20);
        let mut buf = Vec::new();
        let mut now = t0;
        for round in 0..50 {
            a.write_packet(now, None, &mut buf);
            b.read_packet(now + one_way, &buf).unwrap();
            b.write_packet(now + one_way, None, &mut buf);
            a.read_packet(now + one_way * 2, &buf).unwrap();
            if round == 0 {
                assert_eq!(
                    a.stats().rtt,
                    one_way * 2,
                    "the first sample is taken whole"
                );
            }
            now += TICK;
        }
        assert_eq!(a.stats().rtt, one_way * 2);
        assert!(a.stats().jitter < Duration::from_millis(1));
        assert_eq!(
            a.resend_after(),
            (one_way * 2 + a.stats().jitter * 2 + a.config().resend_margin)
                .max(a.config().min_resend_after)
        );
        assert_eq!(a.stats().packets_acked, 50);
    }

    #[test]
    fn acks_reach_exactly_the_packets_received_and_report_their_tags() {
        let t0 = Instant::now();
        let (mut a, mut b) = (
            Endpoint::new(ReliableConfig::default(), t0),
            Endpoint::new(ReliableConfig::default(), t0),
        );
        let mut packets = Vec::new();
        for tag in 0..4u32 {
            let mut buf = Vec::new();
            let w = a.write_packet(t0, Some((tag, b"snapshot")), &mut buf);
            assert!(w.unreliable_included);
            assert_eq!(w.sequence, Seq16(tag as u16));
            packets.push(buf);
        }
        for i in [0, 1, 3] {
            let got = b.read_packet(t0, &packets[i]).unwrap();
            assert_eq!(got, Some((i as u32, &b"snapshot"[..])));
        }
        hop(&mut b, &mut a, t0, None);
        let mut tags: Vec<u32> = std::iter::from_fn(|| a.poll_acked_tag()).collect();
        tags.sort_unstable();
        assert_eq!(
            tags,
            [0, 1, 3],
            "packet 2 was lost: its tag is never reported"
        );
        assert_eq!(a.stats().packets_acked, 3);
        hop(&mut b, &mut a, t0, None);
        assert_eq!(a.poll_acked_tag(), None, "each tag once");
    }

    #[test]
    fn duplicated_and_reordered_packets_deliver_each_message_once_in_order() {
        let t0 = Instant::now();
        let (mut a, mut b) = (
            Endpoint::new(ReliableConfig::default(), t0),
            Endpoint::new(ReliableConfig::default(), t0),
        );
        let mut packets = Vec::new();
        for i in 0..3u8 {
            a.send_reliable(&[i; 3]).unwrap();
            let mut buf = Vec::new();
            a.write_packet(t0, Some((u32::from(i), &[i])), &mut buf);
            packets.push(buf);
        }
        let mut unreliable = Vec::new();
        for i in [2, 0, 2, 1, 0, 1] {
            if let Some((tag, _)) = b.read_packet(t0, &packets[i]).unwrap() {
                unreliable.push(tag);
            }
        }
        assert_eq!(unreliable, [2, 0, 1], "duplicates return nothing");
        assert_eq!(b.stats().packets_duplicate, 3);
        assert_eq!(drain(&mut b), [[0u8; 3], [1; 3], [2; 3]]);
        assert!(drain(&mut b).is_empty());
    }

    #[test]
    fn send_queue_bound_gives_the_error_when_the_peer_never_acks() {
        let t0 = Instant::now();
        let config = ReliableConfig {
            send_queue_messages: 16,
            ..ReliableConfig::default()
        };
        let mut a = Endpoint::new(config, t0);
        let mut buf = Vec::new();
        let mut now = t0;
        let mut queued = 0;
        let err = loop {
            match a.send_reliable(&[1; 100]) {
                Ok(()) => queued += 1,
                Err(e) => break e,
            }
            a.write_packet(now, None, &mut buf);
            now += TICK;
            assert!(queued <= 16);
        };
        assert_eq!(
            err,
            ReliableError::SendQueueFull {
                messages: 16,
                bytes: 1600
            }
        );
        // It stays full, and does not grow, while the peer stays silent.
        for _ in 0..300 {
            a.write_packet(now, None, &mut buf);
            now += TICK;
        }
        assert!(a.send_reliable(b"x").is_err());
        assert_eq!(a.queued_reliable_bytes(), 1600);
        assert!(a.stats().sections_resent > 0);
        assert!(a.stats().loss > 0.5, "{}", a.stats().loss);
    }

    #[test]
    fn no_packet_exceeds_max_packet_bytes() {
        let t0 = Instant::now();
        for config in [
            ReliableConfig::default(),
            ReliableConfig {
                max_packet_bytes: 300,
                fragment_bytes: 100,
                reliable_reserved_bytes: 112,
                ..ReliableConfig::default()
            },
        ] {
            let (mut a, mut b) = (Endpoint::new(config, t0), Endpoint::new(config, t0));
            let snapshot = vec![9; 2000];
            let mut buf = Vec::new();
            let mut now = t0;
            for i in 0..300usize {
                if i.is_multiple_of(3) {
                    a.send_reliable(&vec![i as u8; (i * 37) % 3000]).unwrap();
                }
                let len = (i * 53) % snapshot.len();
                let w = a.write_packet(now, Some((i as u32, &snapshot[..len])), &mut buf);
                assert_eq!(w.bytes, buf.len());
                assert!(
                    buf.len() <= config.max_packet_bytes,
                    "{} > {}",
                    buf.len(),
                    config.max_packet_bytes
                );
                assert!(buf.len() <= MAX_PACKET_BYTES);
                if len <= a.max_unreliable_bytes() {
                    assert!(w.unreliable_included, "len {len}");
                }
                b.read_packet(now, &buf).unwrap();
                drain(&mut b);
                hop(&mut b, &mut a, now, None);
                now += TICK;
            }
            assert_eq!(b.stats().messages_delivered, a.stats().messages_acked);
            // 300-byte packets carry one fragment a tick beside the snapshot: 40-odd messages.
            assert!(b.stats().messages_delivered > 30);
        }
    }

    #[test]
    fn reliable_and_unreliable_data_cannot_starve_each_other() {
        let t0 = Instant::now();
        let config = ReliableConfig::default();
        let mut a = Endpoint::new(config, t0);
        for _ in 0..200 {
            a.send_reliable(&[3; 200]).unwrap();
        }
        let snapshot = vec![5; a.max_unreliable_bytes()];
        let mut buf = Vec::new();
        let w = a.write_packet(t0, Some((1, &snapshot)), &mut buf);
        assert!(
            w.unreliable_included,
            "the largest guaranteed snapshot goes in"
        );
        assert_eq!(w.reliable_sections, 1, "and one 205-byte event beside it");
        // A larger one goes in only when the reliable backlog leaves room.
        let whole_packet = vec![5; config.max_packet_bytes - HEADER_BYTES - 7];
        let w = a.write_packet(t0, Some((2, &whole_packet)), &mut buf);
        assert!(!w.unreliable_included);
        assert_eq!(
            w.reliable_sections, 5,
            "reliable data took the whole packet instead"
        );
        assert!(w.bytes > config.max_packet_bytes - 205);
        let too_big = vec![5; a.max_unreliable_bytes() + 1];
        let mut idle = Endpoint::new(config, t0);
        let w = idle.write_packet(t0, Some((3, &whole_packet)), &mut buf);
        assert!(w.unreliable_included);
        assert_eq!(w.bytes, config.max_packet_bytes);
        let w = a.write_packet(t0, Some((3, &too_big)), &mut buf);
        assert!(
            w.unreliable_included,
            "one event (205 bytes) leaves room for 930"
        );
        let w = idle.write_packet(t0, Some((4, &vec![0; MAX_PACKET_BYTES])), &mut buf);
        assert!(!w.unreliable_included, "never fits");
        assert_eq!(w.bytes, HEADER_BYTES);
    }

    #[test]
    fn unpolled_messages_push_back_and_nothing_is_lost() {
        let t0 = Instant::now();
        let config = ReliableConfig {
            receive_window_messages: 4,
            ..ReliableConfig::default()
        };
        let (mut a, mut b) = (Endpoint::new(config, t0), Endpoint::new(config, t0));
        for i in 0..10u8 {
            a.send_reliable(&[i]).unwrap();
        }
        let mut now = t0;
        for _ in 0..20 {
            hop(&mut a, &mut b, now, None);
            hop(&mut b, &mut a, now, None);
            now += TICK;
        }
        assert_eq!(b.stats().messages_delivered, 0);
        assert!(b.stats().packets_backpressure > 0);
        let mut got = Vec::new();
        for _ in 0..200 {
            got.extend(drain(&mut b));
            hop(&mut a, &mut b, now, None);
            hop(&mut b, &mut a, now, None);
            now += TICK;
        }
        let want: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i]).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn malformed_packets_are_errors_and_apply_nothing() {
        let t0 = Instant::now();
        let (mut a, mut b) = (
            Endpoint::new(ReliableConfig::default(), t0),
            Endpoint::new(ReliableConfig::default(), t0),
        );
        a.send_reliable(b"event").unwrap();
        let mut good = Vec::new();
        a.write_packet(t0, Some((1, b"snap")), &mut good);
        let mut two = good.clone();
        two.extend_from_slice(&good[HEADER_BYTES..]);
        let mut unknown = good.clone();
        unknown.push(0xee);
        let cases = [
            (
                vec![0; MAX_PACKET_BYTES + 1],
                ReliableError::PacketTooLarge(MAX_PACKET_BYTES + 1),
            ),
            (good[..HEADER_BYTES - 1].to_vec(), ReliableError::Truncated),
            (good[..good.len() - 1].to_vec(), ReliableError::Truncated),
            (two, ReliableError::TwoUnreliable),
            (unknown, ReliableError::UnknownSection(0xee)),
        ];
        for (packet, want) in cases {
            assert_eq!(b.read_packet(t0, &packet), Err(want));
        }
        assert_eq!(b.stats().packets_received, 0);
        assert_eq!(b.read_packet(t0, &good), Ok(Some((1, &b"snap"[..]))));
        assert_eq!(drain(&mut b), [b"event"]);
    }

    /// Every packet both sides write over `ticks` ticks of an exchange starting at `t`: `a`
    /// sends a fragmented message, small ones and a tagged unreliable message a tick, `b`
    /// answers with acks and messages of its own; every fourth packet of `a`'s is lost.
    fn exchange(a: &mut Endpoint, b: &mut Endpoint, t: Instant, ticks: u32) -> Vec<Vec<u8>> {
        let big: Vec<u8> = (0..3000u32).map(|i| (i * 13 % 251) as u8).collect();
        a.send_reliable(&big).unwrap();
        let mut wire = Vec::new();
        let mut buf = Vec::new();
        for k in 0..ticks {
            let now = t + TICK * k;
            a.send_reliable(&k.to_le_bytes()).unwrap();
            a.write_packet(now, Some((k, b"snapshot")), &mut buf);
            wire.push(buf.clone());
            if k % 4 != 3 {
                b.read_packet(now, &buf).unwrap();
            }
            wire.extend(drain(b));
            b.send_reliable(&[k as u8]).unwrap();
            b.write_packet(now, None, &mut buf);
            wire.push(buf.clone());
            a.read_packet(now, &buf).unwrap();
            wire.extend(drain(a));
            while let Some(tag) = a.poll_acked_tag() {
                wire.push(tag.to_le_bytes().to_vec());
            }
        }
        wire
    }

    #[test]
    fn a_reset_endpoint_behaves_as_a_new_one() {
        let t0 = Instant::now();
        let config = ReliableConfig::default();
        let mut used = Endpoint::new(config, t0);
        let mut peer = Endpoint::new(config, t0);
        // A connection that got somewhere: sequences, acks, queues, fragments, statistics.
        exchange(&mut used, &mut peer, t0, 40);
        used.send_reliable(b"left unacknowledged").unwrap();
        assert!(used.stats().packets_sent > 0 && used.queued_reliable_messages() > 0);

        let t1 = t0 + Duration::from_secs(3);
        used.reset(t1);
        assert_eq!(used.queued_reliable_messages(), 0);
        assert_eq!(*used.stats(), LinkStats::new(config.initial_rtt));
        let mut new = Endpoint::new(config, t1);
        // The same exchange with a new peer writes the same bytes from both.
        let from_reset = exchange(&mut used, &mut Endpoint::new(config, t1), t1, 40);
        let from_new = exchange(&mut new, &mut Endpoint::new(config, t1), t1, 40);
        assert_eq!(from_reset, from_new);
        assert_eq!(used.stats(), new.stats());
    }
}
