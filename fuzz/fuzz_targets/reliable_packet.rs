//! The reliability layer's packet reader, `Endpoint::read_packet`, three ways, chosen by the
//! first byte:
//!
//! - raw: arbitrary bytes, with `link_config()` and the default configuration, between
//!   packets the endpoint writes;
//! - built, corrupted, read: a real sender's packets (long messages in fragments, an
//!   unreliable tagged message) dropped, delayed, duplicated, rewritten harmlessly or
//!   corrupted (bytes flipped, cut short, section fields set near every limit) on the way
//!   to the receiver;
//! - hostile sections: well-formed packets whose message and fragment fields (id, index,
//!   count, cell, len) sit on and around every limit. Sections are parsed only inside
//!   `read_packet`, so this is the fragment target.
//!
//! Every receiving endpoint under test has a shadow that reads only the packets it
//! accepted: the two must agree in every packet, message, tag and counter, so a packet
//! refused with an error changed nothing. Nothing panics, no packet written exceeds
//! `max_packet_bytes`, no tag is acknowledged twice.
//!
//! Built: an intact packet is never refused; the messages delivered are those sent, whole,
//! in order and once, and the unreliable messages read are those written; every tag the
//! sender sees acknowledged was read. A corruption the receiver cannot detect (a flipped
//! body byte) counts as a loss: the receiver is rebuilt from its log without it, as
//! netcode's MAC would have dropped it. After the fuzzed exchanges a clean ending must
//! deliver and acknowledge everything.
//!
//! Hostile: bodies are cut from noise chosen by the section's id, index, count and cell,
//! so every message delivered (in id order from 0) must be one whole section or
//! fragments 0..count of one id, count and cell.
#![no_main]

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use tickforge_proto::msg::link_config;
use tickforge_proto::reliable::{Endpoint, ReliableConfig, ReliableError, HEADER_BYTES};
use tickforge_proto::wire::Writer;
use tickforge_proto::MAX_PACKET_BYTES;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let input = Input(rest);
    match mode % 3 {
        0 => raw(input),
        1 => built(input),
        _ => hostile(input),
    }
});

/// Fragments of 8 bytes, messages of up to 8 fragments, 12 reassembly cells, 4 message ids
/// in flight: every limit is a few sections away.
fn tiny_config(max_packet_bytes: usize) -> ReliableConfig {
    ReliableConfig {
        max_packet_bytes,
        reliable_reserved_bytes: 19,
        fragment_bytes: 8,
        max_message_bytes: 60,
        reassembly_bytes: 100,
        send_queue_messages: 16,
        send_queue_bytes: 128,
        receive_window_messages: 4,
        packet_history: 64,
        ..ReliableConfig::default()
    }
}

/// Bytes off the front of the fuzz input; zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn u8(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        head
    }
}

/// Noise that bodies are cut from; its length is prime, so bodies cut from different
/// offsets differ however they are split into fragments.
const NOISE: [u8; 509] = {
    let mut t = [0u8; 509];
    let mut x: u32 = 0x9e37_79b9;
    let mut i = 0;
    while i < t.len() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        t[i] = (x >> 24) as u8;
        i += 1;
    }
    t
};

/// `len` bytes of noise from an offset chosen by `key`.
fn noise(key: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut at = (key % NOISE.len() as u64) as usize;
    while out.len() < len {
        let take = (len - out.len()).min(NOISE.len() - at);
        out.extend_from_slice(&NOISE[at..at + take]);
        at = 0;
    }
    out
}

const WHOLE: u16 = 0xffff;
const UNRELIABLE: u16 = 0xfffe;

/// The body of a whole message (`index` [`WHOLE`]), a fragment, or an unreliable message
/// (`index` [`UNRELIABLE`], `id` its tag): the fields pick the noise, so a body read back
/// names the section it came from.
fn body(id: u16, index: u16, count: u16, cell: u16, len: usize) -> Vec<u8> {
    let mut h = u64::from(id) | u64::from(index) << 16 | u64::from(count) << 32 | u64::from(cell) << 48;
    h = (h ^ h >> 30).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ h >> 27).wrapping_mul(0x94d0_49bb_1331_11eb);
    noise(h ^ h >> 31, len)
}

/// Panics saying where `got` and `want` first differ, rather than printing both.
fn same(got: &[u8], want: &[u8], what: std::fmt::Arguments<'_>) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        let at = at.unwrap_or(got.len().min(want.len()));
        panic!("{what}: {} bytes, {} wanted, first difference at byte {at}", got.len(), want.len());
    }
}

/// An endpoint and its shadow, which reads only the packets the endpoint accepted.
struct Pair {
    config: ReliableConfig,
    subject: Endpoint,
    shadow: Endpoint,
    out: Vec<u8>,
    shadow_out: Vec<u8>,
    acked: HashSet<u32>,
}

type Read = Result<Option<(u32, Vec<u8>)>, ReliableError>;

impl Pair {
    fn new(config: ReliableConfig, now: Instant) -> Self {
        Pair {
            config,
            subject: Endpoint::new(config, now),
            shadow: Endpoint::new(config, now),
            out: Vec::new(),
            shadow_out: Vec::new(),
            acked: HashSet::new(),
        }
    }

    fn send_reliable(&mut self, message: &[u8]) {
        let got = self.subject.send_reliable(message);
        assert_eq!(got, self.shadow.send_reliable(message));
    }

    /// Reads `packet` on the subject, and on the shadow too when the subject accepts it.
    fn read(&mut self, now: Instant, packet: &[u8]) -> Read {
        let got = self.subject.read_packet(now, packet);
        if let Ok(unreliable) = got {
            if let Some((_, body)) = unreliable {
                assert!(HEADER_BYTES + 7 + body.len() <= packet.len());
            }
            assert_eq!(self.shadow.read_packet(now, packet), got);
        }
        got.map(|u| u.map(|(tag, body)| (tag, body.to_vec())))
    }

    /// Drains the reliable messages and acknowledged tags of both, which must agree.
    fn poll(&mut self, mut message: impl FnMut(&[u8]), mut tag: impl FnMut(u32)) {
        loop {
            let got = self.subject.poll_reliable(&mut self.out);
            assert_eq!(got, self.shadow.poll_reliable(&mut self.shadow_out));
            if !got {
                break;
            }
            same(&self.out, &self.shadow_out, format_args!("the shadow's message"));
            assert!(self.out.len() <= self.config.max_message_bytes);
            message(&self.out);
        }
        loop {
            let got = self.subject.poll_acked_tag();
            assert_eq!(got, self.shadow.poll_acked_tag());
            let Some(t) = got else { break };
            assert!(self.acked.insert(t), "tag {t} acked twice");
            tag(t);
        }
        assert_eq!(self.subject.stats(), self.shadow.stats());
    }

    /// Writes a packet on both; returns the subject's.
    fn write(&mut self, now: Instant, unreliable: Option<(u32, &[u8])>) -> &[u8] {
        let w = self.subject.write_packet(now, unreliable, &mut self.out);
        assert_eq!(w, self.shadow.write_packet(now, unreliable, &mut self.shadow_out));
        same(&self.out, &self.shadow_out, format_args!("the shadow's packet"));
        assert_eq!(w.bytes, self.out.len());
        assert!(self.out.len() <= self.config.max_packet_bytes, "wrote {} bytes", self.out.len());
        assert_eq!(self.subject.stats(), self.shadow.stats());
        &self.out
    }
}

fn raw(mut input: Input<'_>) {
    let t0 = Instant::now();
    let mut pairs = [Pair::new(link_config(), t0), Pair::new(ReliableConfig::default(), t0)];
    // Something in flight, so that acks from the bytes free real messages and fragments.
    for p in &mut pairs {
        p.send_reliable(b"event");
        p.send_reliable(&[0x5a; 600]);
    }
    let mut now = t0;
    let mut n = 0u32;
    while !input.is_empty() {
        let control = input.u8();
        let len = usize::from(input.u16()) % (MAX_PACKET_BYTES + 16);
        let packet = input.bytes(len);
        now += Duration::from_millis(u64::from(control >> 2));
        for p in &mut pairs {
            if control & 1 != 0 {
                p.write(now, None);
            }
            let _ = p.read(now, packet);
            p.poll(|_| {}, |t| assert!(t < n, "tag {t} never written"));
            let unreliable = [control; 40];
            p.write(now, Some((n, &unreliable[..usize::from(control % 41)])));
        }
        n += 1;
    }
}

/// What the receiver pair of a built link applied, to rebuild it without a packet.
enum Op {
    Read(Instant, Vec<u8>),
    Write(Instant, Vec<u8>),
}

/// How a built packet reaches the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// As written.
    Intact,
    /// Rewritten without changing what it means: acks changed, a reliable section
    /// repeated, sections reordered.
    Harmless,
    /// Anything else.
    Corrupt,
}

/// A section of a packet written by an endpoint: where it starts, its kind, and the bytes
/// of its fields and of its body.
#[derive(Clone, Copy, Debug)]
struct Section {
    at: usize,
    kind: u8,
    head: usize,
    len: usize,
}

impl Section {
    fn end(&self) -> usize {
        self.at + self.head + self.len
    }
}

fn sections(packet: &[u8]) -> Vec<Section> {
    let mut out = Vec::new();
    let mut at = HEADER_BYTES;
    while at < packet.len() {
        let kind = packet[at];
        let (head, len_at) = match kind {
            1 => (5, 3),
            2 => (11, 9),
            3 => (7, 5),
            _ => panic!("an endpoint wrote section kind {kind}"),
        };
        let len = usize::from(u16::from_le_bytes([packet[at + len_at], packet[at + len_at + 1]]));
        out.push(Section { at, kind, head, len });
        at += head + len;
    }
    assert_eq!(at, packet.len());
    out
}

/// Limits of a configuration, as the wire's u16.
struct Limits {
    fragment: u16,
    fragments: u16,
    cells: u16,
    window: u16,
    message: u16,
}

impl Limits {
    fn new(c: &ReliableConfig) -> Self {
        let u = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
        Limits {
            fragment: u(c.fragment_bytes),
            fragments: u(c.max_message_bytes.div_ceil(c.fragment_bytes)),
            cells: u(c.reassembly_bytes / c.fragment_bytes),
            window: u(c.receive_window_messages),
            message: u(c.max_message_bytes),
        }
    }

    /// A value on or next to a limit, or to `v`, or `extra`.
    fn near(&self, v: u16, pick: u8, extra: u16) -> u16 {
        let table = [
            0,
            1,
            2,
            v.wrapping_sub(1),
            v.wrapping_add(1),
            self.fragment - 1,
            self.fragment,
            self.fragment + 1,
            self.fragments - 1,
            self.fragments,
            self.fragments.wrapping_add(1),
            self.cells - 1,
            self.cells,
            self.cells.wrapping_add(1),
            v.wrapping_add(self.window - 1),
            v.wrapping_add(self.window),
            v.wrapping_add(self.window + 1),
            self.message,
            0x7fff,
            0x8000,
            0xffff,
            extra,
        ];
        table[usize::from(pick) % table.len()]
    }
}

/// A sender, a receiver pair, and a receiver that reads every packet, corrupted or not,
/// and is only required not to panic.
struct Link {
    config: ReliableConfig,
    limits: Limits,
    t0: Instant,
    now: Instant,
    sender: Endpoint,
    receiver: Pair,
    tainted: Endpoint,
    log: Vec<Op>,
    rebuilds: usize,
    sent: Vec<Vec<u8>>,
    delivered: usize,
    unreliable: HashMap<u32, Vec<u8>>,
    tags_delivered: HashSet<u32>,
    tags_acked: HashSet<u32>,
    held: Vec<Vec<u8>>,
    buf: Vec<u8>,
}

/// Undetected corruptions rebuild the receiver from its log; past this many the input
/// stops exploring and only runs the clean ending.
const MAX_REBUILDS: usize = 2;

impl Link {
    fn new(config: ReliableConfig) -> Self {
        let t0 = Instant::now();
        Link {
            config,
            limits: Limits::new(&config),
            t0,
            now: t0,
            sender: Endpoint::new(config, t0),
            receiver: Pair::new(config, t0),
            tainted: Endpoint::new(config, t0),
            log: Vec::new(),
            rebuilds: 0,
            sent: Vec::new(),
            delivered: 0,
            unreliable: HashMap::new(),
            tags_delivered: HashSet::new(),
            tags_acked: HashSet::new(),
            held: Vec::new(),
            buf: Vec::new(),
        }
    }

    fn queue(&mut self, len: usize) {
        let n = self.sent.len();
        // Messages start at different offsets: one delivered in another's place shows.
        let message = noise(n as u64 * 97, len);
        match self.sender.send_reliable(&message) {
            Ok(()) => self.sent.push(message),
            Err(ReliableError::SendQueueFull { .. }) => {}
            Err(e) => panic!("queueing {len} bytes: {e}"),
        }
    }

    /// Writes the sender's next packet, with the unreliable message `tag` of `len` bytes.
    fn send(&mut self, unreliable: Option<(u32, usize)>) -> Vec<u8> {
        let message = unreliable.map(|(tag, len)| (tag, body(tag as u16, UNRELIABLE, 0, 0, len)));
        let w = self.sender.write_packet(self.now, message.as_ref().map(|(t, b)| (*t, &b[..])), &mut self.buf);
        assert_eq!(w.bytes, self.buf.len());
        assert!(self.buf.len() <= self.config.max_packet_bytes, "wrote {} bytes", self.buf.len());
        if let Some((tag, body)) = message {
            if body.len() <= self.sender.max_unreliable_bytes() {
                assert!(w.unreliable_included, "{} bytes fit always", body.len());
            }
            if w.unreliable_included {
                self.unreliable.insert(tag, body);
            }
        }
        self.buf.clone()
    }

    fn deliver(&mut self, packet: &[u8], fate: Fate) {
        let now = self.now;
        let _ = self.tainted.read_packet(now, packet);
        while self.tainted.poll_reliable(&mut self.buf) {
            assert!(self.buf.len() <= self.config.max_message_bytes);
        }
        while self.tainted.poll_acked_tag().is_some() {}

        if fate == Fate::Corrupt {
            // The shadow never sees it: refused, it must have changed nothing.
            if self.receiver.subject.read_packet(now, packet).is_ok() {
                self.rebuild();
                return;
            }
        } else {
            match self.receiver.read(now, packet) {
                Err(e) => assert!(fate != Fate::Intact, "an intact packet was refused: {e}"),
                Ok(unreliable) => {
                    self.log.push(Op::Read(now, packet.to_vec()));
                    if let Some((tag, body)) = unreliable {
                        let sent = self.unreliable.get(&tag).expect("an unreliable tag never sent");
                        same(&body, sent, format_args!("unreliable message {tag}"));
                        assert!(self.tags_delivered.insert(tag), "unreliable message {tag} read twice");
                    }
                }
            }
        }
        let (sent, delivered) = (&self.sent, &mut self.delivered);
        self.receiver.poll(
            |m| {
                assert!(*delivered < sent.len(), "message {} was never sent", *delivered);
                same(m, &sent[*delivered], format_args!("message {}", *delivered));
                *delivered += 1;
            },
            |t| panic!("the receiver sent no tag, yet {t} was acked"),
        );
    }

    /// The receiver pair again, from its log: as if the last packet had never arrived.
    fn rebuild(&mut self) {
        let mut pair = Pair::new(self.config, self.t0);
        for op in &self.log {
            match op {
                Op::Read(now, packet) => {
                    pair.read(*now, packet).expect("a packet read before reads again");
                    pair.poll(|_| {}, |_| {});
                }
                Op::Write(now, packet) => {
                    assert_eq!(pair.write(*now, None), &packet[..], "a packet written before");
                }
            }
        }
        self.receiver = pair;
        self.rebuilds += 1;
    }

    /// The receiver's packet of acks, read by the sender unless lost.
    fn reply(&mut self, lost: bool) {
        let now = self.now;
        let packet = self.receiver.write(now, None).to_vec();
        self.log.push(Op::Write(now, packet.clone()));
        if lost {
            return;
        }
        assert_eq!(self.sender.read_packet(now, &packet), Ok(None));
        while let Some(tag) = self.sender.poll_acked_tag() {
            assert!(self.tags_delivered.contains(&tag), "tag {tag} acked but never read");
            assert!(self.tags_acked.insert(tag), "tag {tag} acked twice");
        }
        assert!(!self.sender.poll_reliable(&mut self.buf));
    }

    /// The packet rewritten without changing what it means, or corrupted, as `input` says.
    fn transform(&self, packet: &[u8], input: &mut Input<'_>) -> (Vec<u8>, Fate) {
        let mut p = packet.to_vec();
        let secs = sections(packet);
        let how = input.u8();
        let pick = input.u8();
        let section = (!secs.is_empty()).then(|| secs[usize::from(pick) % secs.len()]);
        match (how % 9, section) {
            // Harmless.
            (0, _) => {
                let ack = input.bytes(6);
                p[2..2 + ack.len()].copy_from_slice(ack);
                (p, Fate::Harmless)
            }
            (1, Some(s)) if s.kind != 3 => {
                let copy = p[s.at..s.end()].to_vec();
                let to = secs[usize::from(how >> 4) % secs.len()].end();
                p.splice(to..to, copy);
                (p, Fate::Harmless)
            }
            (2, Some(s)) => {
                let moved: Vec<u8> = p.drain(s.at..s.end()).collect();
                p.extend_from_slice(&moved);
                (p, Fate::Harmless)
            }
            // Corrupt.
            (3, Some(s)) => {
                // A field of the section set on or near a limit.
                let fields: &[usize] = match s.kind {
                    1 => &[1, 3],
                    2 => &[1, 3, 5, 7, 9],
                    _ => &[1, 3, 5],
                };
                let at = s.at + fields[usize::from(how >> 4) % fields.len()];
                let v = u16::from_le_bytes([p[at], p[at + 1]]);
                let new = self.limits.near(v, input.u8(), input.u16());
                p[at..at + 2].copy_from_slice(&new.to_le_bytes());
                (p, Fate::Corrupt)
            }
            (4, Some(s)) => {
                p.truncate(s.at + usize::from(input.u16()) % (s.head + s.len));
                (p, Fate::Corrupt)
            }
            (5, Some(s)) => {
                p[s.at] = [0, 1, 2, 3, 4, 0xff][usize::from(how >> 4) % 6];
                (p, Fate::Corrupt)
            }
            (6, _) => {
                let sequence = u16::from_le_bytes([p[0], p[1]]);
                let new = self.limits.near(sequence, input.u8(), input.u16());
                p[..2].copy_from_slice(&new.to_le_bytes());
                (p, Fate::Corrupt)
            }
            (7, _) => {
                p.truncate(usize::from(input.u16()) % p.len());
                (p, Fate::Corrupt)
            }
            _ => {
                for _ in 0..1 + how % 3 {
                    let at = usize::from(input.u16()) % p.len();
                    p[at] ^= input.u8().max(1);
                }
                (p, Fate::Corrupt)
            }
        }
    }
}

/// Messages of fuzzed lengths queued among fuzzed exchanges, then a clean ending that must
/// deliver them all.
fn built(mut input: Input<'_>) {
    let config = match input.u8() % 3 {
        0 => link_config(),
        1 => ReliableConfig::default(),
        _ => tiny_config(48),
    };
    let mut link = Link::new(config);
    let (fb, max) = (config.fragment_bytes, config.max_message_bytes);
    let mut tag = 0u32;
    while !input.is_empty() && tag < 48 && link.rebuilds < MAX_REBUILDS {
        let op = input.u8();
        if op % 4 == 0 {
            if link.sent.len() < 32 {
                let b = input.u8();
                // Mostly whole messages and a few fragments; the longest now and then.
                let len = match op >> 2 & 7 {
                    0..=2 => usize::from(b) % (fb + 1),
                    3 | 4 => (fb * (1 + usize::from(b) % 3) + usize::from(b >> 2) % 3).saturating_sub(1),
                    5 => usize::from(input.u16()) % (8 * fb + 1),
                    6 => usize::from(input.u16()) % (max + 1),
                    _ => max - usize::from(b).min(max),
                };
                link.queue(len.min(max));
            }
            continue;
        }
        link.now += Duration::from_millis(u64::from(op >> 2) * 2);
        let u = input.u8();
        let unreliable_len = match u % 4 {
            0 => usize::from(u >> 2),
            1 => link.sender.max_unreliable_bytes(),
            2 => link.sender.max_unreliable_bytes() + 1 + usize::from(u >> 2),
            _ => config.max_packet_bytes - HEADER_BYTES - 7 - usize::from(u >> 2 & 7),
        };
        let packet = link.send((u & 0x80 == 0).then_some((tag, unreliable_len)));
        tag += 1;
        let fate = input.u8();
        match fate % 8 {
            0 => {}
            1..=3 => link.deliver(&packet, Fate::Intact),
            4 => link.held.push(packet.clone()),
            5 | 6 => {
                let (changed, how) = link.transform(&packet, &mut input);
                let how = if changed == packet { Fate::Intact } else { how };
                link.deliver(&changed, how);
                if fate & 0x08 != 0 {
                    link.deliver(&packet, Fate::Intact);
                }
            }
            _ => {
                link.deliver(&packet, Fate::Intact);
                link.deliver(&packet, Fate::Intact);
            }
        }
        if fate & 0x10 != 0 {
            for p in std::mem::take(&mut link.held) {
                link.deliver(&p, Fate::Intact);
            }
        }
        link.reply(fate & 0x20 != 0);
    }

    for p in std::mem::take(&mut link.held) {
        link.deliver(&p, Fate::Intact);
    }
    for _ in 0..4096 {
        if link.delivered == link.sent.len() && link.sender.queued_reliable_messages() == 0 {
            break;
        }
        link.now += link.sender.resend_after() + Duration::from_millis(1);
        let packet = link.send(None);
        link.deliver(&packet, Fate::Intact);
        link.reply(false);
    }
    assert_eq!(link.delivered, link.sent.len(), "messages delivered by the end");
    assert_eq!(link.sender.queued_reliable_messages(), 0, "messages acked by the end");
}

/// Well-formed packets of hostile sections.
fn hostile(mut input: Input<'_>) {
    let config = match input.u8() % 4 {
        0 => link_config(),
        1 => ReliableConfig::default(),
        _ => tiny_config(200),
    };
    let limits = Limits::new(&config);
    let (fb, max) = (limits.fragment, limits.message);
    let t0 = Instant::now();
    let mut pair = Pair::new(config, t0);
    pair.send_reliable(b"event");
    pair.send_reliable(&vec![7; config.fragment_bytes * 2 + 1]);
    let mut now = t0;
    // Message ids are delivered from 0, one after another.
    let mut next = 0u16;
    let mut offered: HashMap<(u16, u16), HashSet<u16>> = HashMap::new();
    let mut sequence = 0u16;
    let mut our_sequence = 0u16;
    let mut packet = Vec::new();
    for _ in 0..64 {
        if input.is_empty() {
            break;
        }
        let control = input.u8();
        now += Duration::from_millis(u64::from(control >> 4));
        sequence = match control % 8 {
            0 => sequence.wrapping_sub(u16::from(control >> 3)),
            1 => input.u16(),
            _ => sequence.wrapping_add(1),
        };
        packet.clear();
        let mut w = Writer::new(&mut packet);
        w.u16(sequence);
        if control & 8 != 0 {
            w.u16(our_sequence.wrapping_sub(u16::from(input.u8() % 4)));
            w.u32(input.u32());
        } else {
            w.u16(u16::MAX);
            w.u32(0);
        }
        // A body cut short by the limit ends the packet: at the packet limit it is truncated,
        // one byte past it the packet is too large.
        let limit = config.max_packet_bytes + usize::from(control & 0x40 == 0);
        for _ in 0..input.u8() % 8 {
            let kind = input.u8();
            let b = input.u8();
            let extra = input.u16();
            let id = if b & 1 == 0 {
                next.wrapping_add(u16::from(b >> 1) % (limits.window + 1))
            } else {
                limits.near(next, b >> 1, extra)
            };
            let c = input.u8();
            let count =
                if c & 1 == 0 { 2 + u16::from(c >> 1) % (limits.fragments - 1) } else { limits.near(2, c >> 1, extra) };
            let l = input.u8();
            let cell = if l & 1 == 0 { u16::from(l >> 1) % limits.cells } else { limits.near(0, l >> 1, extra) };
            let last_max = max.saturating_sub(count.saturating_sub(1).saturating_mul(fb)).min(fb);
            let last_len = if l & 2 == 0 && last_max > 0 {
                1 + u16::from(l >> 2) % last_max
            } else {
                limits.near(last_max, l >> 2, extra)
            };
            match kind % 8 {
                0 | 1 => {
                    let len =
                        if kind & 8 == 0 { u16::from(kind >> 4) % (fb + 1) } else { limits.near(fb, kind >> 4, extra) };
                    let mut head = vec![1];
                    head.extend_from_slice(&id.to_le_bytes());
                    head.extend_from_slice(&len.to_le_bytes());
                    let room = limit.saturating_sub(w.len() + head.len());
                    let bytes = body(id, WHOLE, 0, 0, usize::from(len).min(room));
                    put(&mut w, limit, &head, &bytes);
                }
                2..=4 | 5 => {
                    // One fragment, or (5) the fragments of a whole message from a fuzzed
                    // index on, one perhaps skipped.
                    let first = if kind & 8 == 0 {
                        u16::from(kind >> 4) % count.max(1)
                    } else {
                        limits.near(count, kind >> 4, extra)
                    };
                    let skip = (kind & 0x80 != 0).then_some(u16::from(c >> 3) % count.max(1));
                    let span = if kind % 8 == 5 { count.saturating_sub(first) } else { 1 };
                    offered.entry((id, count)).or_default().insert(cell);
                    for index in (0..span).map(|k| first.wrapping_add(k)) {
                        if kind % 8 == 5 && Some(index) == skip {
                            continue;
                        }
                        let len = if index.wrapping_add(1) == count {
                            last_len
                        } else if kind % 8 == 4 {
                            limits.near(fb, b >> 1, extra)
                        } else {
                            fb
                        };
                        let mut head = vec![2];
                        for v in [id, index, count, cell, len] {
                            head.extend_from_slice(&v.to_le_bytes());
                        }
                        let room = limit.saturating_sub(w.len() + head.len());
                        let bytes = body(id, index, count, cell, usize::from(len).min(room));
                        if !put(&mut w, limit, &head, &bytes) {
                            break;
                        }
                    }
                }
                6 => {
                    let tag = u32::from(extra);
                    let len = u16::from(b) * 4 + u16::from(kind >> 3);
                    let mut head = vec![3];
                    head.extend_from_slice(&tag.to_le_bytes());
                    head.extend_from_slice(&len.to_le_bytes());
                    let room = limit.saturating_sub(w.len() + head.len());
                    let bytes = body(extra, UNRELIABLE, 0, 0, usize::from(len).min(room));
                    put(&mut w, limit, &head, &bytes);
                }
                _ => {
                    // An unknown kind: garbage that parses as a section would deliver
                    // bodies that are not ours.
                    let unknown = [0, 4, 5, 0x80, 0xff][usize::from(b) % 5];
                    put(&mut w, limit, &[unknown], input.bytes(usize::from(kind >> 3) % 16));
                }
            }
        }

        if let Ok(Some((tag, bytes))) = pair.read(now, &packet) {
            same(&bytes, &body(tag as u16, UNRELIABLE, 0, 0, bytes.len()), format_args!("unreliable {tag}"));
        }
        pair.poll(
            |m| {
                let id = next;
                let fb = usize::from(fb);
                if m.len() <= fb {
                    same(m, &body(id, WHOLE, 0, 0, m.len()), format_args!("whole message {id}"));
                } else {
                    let count = m.len().div_ceil(fb) as u16;
                    let cells = offered.get(&(id, count)).expect("no fragments offered");
                    let assembled = |cell: u16| {
                        m.chunks(fb)
                            .enumerate()
                            .all(|(index, chunk)| chunk == body(id, index as u16, count, cell, chunk.len()))
                    };
                    assert!(
                        cells.iter().any(|&cell| assembled(cell)),
                        "message {id} of {count} fragments mixes sections"
                    );
                }
                next = next.wrapping_add(1);
            },
            |_| {},
        );
        // Tagged with its sequence, which the hostile acks aim at.
        our_sequence = pair.subject.stats().packets_sent as u16;
        pair.write(now, Some((u32::from(our_sequence), &[control])));
    }
}

/// Appends a section unless it would take the packet past `limit`.
fn put(w: &mut Writer<'_>, limit: usize, head: &[u8], body: &[u8]) -> bool {
    if w.len() + head.len() + body.len() > limit {
        return false;
    }
    w.bytes(head);
    w.bytes(body);
    true
}
