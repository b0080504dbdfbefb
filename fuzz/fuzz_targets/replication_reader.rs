//! The replication reader, `Replica::read`, two ways, chosen by the first byte:
//!
//! - raw: arbitrary bodies, length-prefixed, read in turn; a refused body must leave the
//!   view and the newest tick unchanged;
//! - built, corrupted, read: a real replicator's snapshots of fuzzed entity states, each
//!   dropped, held back, duplicated, or corrupted (bytes flipped, cut short, header fields
//!   set near their limits) on the way. A clean replica reads only the intact ones and acks
//!   them: it must accept every one, and show each entity a snapshot carried as the
//!   server's quantized state of that tick. A tainted replica reads everything and is only
//!   required not to panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickforge_replication::{NetId, ReadError, Replica, ReplicaConfig, ReplicationConfig, Replicator};
use tickforge_shooter::{push, schema, viewer, EntityState};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let input = Input(rest);
    match mode % 2 {
        0 => raw(input),
        _ => built(input),
    }
});

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

    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        head
    }
}

/// Eight entities, a 16-tick ring: every limit is a few records away.
fn config() -> ReplicationConfig {
    ReplicationConfig { max_entities: 8, max_connections: 1, ring_ticks: 16, ..ReplicationConfig::default() }
}

fn view(r: &Replica) -> Vec<(NetId, EntityState)> {
    r.entities().map(|(id, q)| (id, EntityState::from_lanes(&q))).collect()
}

fn raw(mut input: Input<'_>) {
    let mut replica = Replica::new(ReplicaConfig::matching(&config()), schema());
    while !input.is_empty() {
        let len = usize::from(input.u8());
        let body = input.bytes(len);
        let (before, newest) = (view(&replica), replica.newest_tick());
        if replica.read(body).is_err() {
            assert_eq!(view(&replica), before, "a refused body changed the view");
            assert_eq!(replica.newest_tick(), newest);
        }
    }
}

/// An entity state from the input: small moves around the last one, or anything.
fn next_state(input: &mut Input<'_>, last: &EntityState) -> EntityState {
    let mut s = *last;
    let how = input.u8();
    let small = |b: u8| f32::from(b as i8) / 64.0;
    if how & 0x80 == 0 {
        s.position.x += small(input.u8());
        s.position.y += small(input.u8());
        s.position.z += small(input.u8()) * f32::from(how & 1);
        s.velocity.x = small(input.u8()) * 8.0;
        s.velocity.y = small(input.u8()) * 8.0;
        s.yaw = s.yaw.wrapping_add(u16::from(input.u8()) * 16);
    } else {
        let wild = |input: &mut Input<'_>| f32::from_bits(u32::from(input.u16()) << 16 | u32::from(input.u16()));
        s.position.x = wild(input);
        s.position.y = wild(input);
        s.position.z = wild(input);
        s.velocity.x = wild(input);
        s.velocity.z = wild(input);
        s.yaw = input.u16();
        s.pitch = input.u16() as i16;
    }
    if how & 0x40 != 0 {
        s.flags = input.u8();
        s.health = input.u8();
        s.weapon = input.u8();
    }
    s
}

fn corrupt(body: &mut Vec<u8>, input: &mut Input<'_>) {
    match input.u8() % 4 {
        0 => {
            let at = usize::from(input.u16()) % body.len();
            body.truncate(at);
        }
        1 => {
            // tick u32 | default_back u8 | count varint
            let at = usize::from(input.u8()) % 6.min(body.len());
            body[at] = [0, 1, 0x7f, 0x80, 0xff, 15, 16, 17][usize::from(input.u8()) % 8];
        }
        2 => body.push(input.u8()),
        _ => {
            for _ in 0..1 + input.u8() % 3 {
                let at = usize::from(input.u16()) % body.len();
                body[at] ^= input.u8().max(1);
            }
        }
    }
}

/// Reads an intact snapshot on the clean replica: it must be accepted, and show what the
/// server had at its tick. Queues its ack to arrive at `ack_at`, if any.
///
/// The one exception is a snapshot held back past what the replica's history promises: its
/// baselines are up to a ring older than it, and kept for two rings after them, so once the
/// replica has read a tick more than a ring newer they may be gone. Such a snapshot may be
/// refused for a missing baseline (and nothing else); `late_refused` counts them.
fn deliver(
    clean: &mut Replica,
    sent: &[(u32, [EntityState; 8])],
    body: &[u8],
    ack_at: Option<u32>,
    acks: &mut Vec<(u32, u32)>,
    late_refused: &mut u64,
) {
    let tick = u32::from_le_bytes(body[..4].try_into().expect("a tick"));
    let late = clean.newest_tick().is_some_and(|n| n > tick + config().ring_ticks);
    let info = match clean.read(body) {
        Ok(info) => info,
        Err(ReadError::MissingBaseline) if late => {
            *late_refused += 1;
            return;
        }
        Err(e) => panic!("an intact snapshot refused: {e}"),
    };
    let (_, at_tick) = sent.iter().find(|(st, _)| *st == info.tick).expect("a tick written");
    for (i, s) in at_tick.iter().enumerate() {
        let id = NetId(i as u16);
        if clean.entity_tick(id) == Some(info.tick) {
            if let Some(seen) = clean.entity(id).map(|q| EntityState::from_lanes(&q)) {
                assert_eq!(seen, s.quantized(), "entity {i} at tick {}", info.tick);
            }
        }
    }
    if let Some(at) = ack_at {
        acks.push((at, info.tick));
    }
}

fn built(mut input: Input<'_>) {
    let config = config();
    let mut r = Replicator::new(config, schema());
    let mut clean = Replica::new(ReplicaConfig::matching(&config), schema());
    let mut tainted = Replica::new(ReplicaConfig::matching(&config), schema());
    r.connect(0, Some(NetId(0)));
    let mut states = [EntityState::default(); 8];
    let mut sent: Vec<(u32, [EntityState; 8])> = Vec::new();
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut acks: Vec<(u32, u32)> = Vec::new();
    let mut late_refused = 0u64;
    let mut t = 0u32;
    while !input.is_empty() && t < 300 {
        r.begin_tick(t);
        let which = input.u8();
        for (i, s) in states.iter_mut().enumerate() {
            if which >> i & 1 != 0 {
                *s = next_state(&mut input, s);
                push(&mut r, NetId(i as u16), s);
            }
        }
        if which == 0xff && input.u8() & 1 == 0 {
            r.remove_entity(NetId(1 + u16::from(input.u8() % 7)));
        }
        acks.retain(|&(at, tick)| {
            if at <= t {
                r.on_ack(0, tick);
            }
            at > t
        });
        let mut body = Vec::new();
        let budget = if input.u8() & 0xc0 == 0 { usize::from(input.u8()) } else { 1400 };
        r.write(0, &viewer(&states[0].to_player()), None, budget, &mut body);
        sent.push((t, states));
        let fate = input.u8();
        let ack_at = (fate & 0x20 == 0).then_some(t + 1 + u32::from(fate >> 6));
        let mut arrive = |body: &[u8], tainted: &mut Replica, acks: &mut Vec<(u32, u32)>| {
            let _ = tainted.read(body);
            deliver(&mut clean, &sent, body, ack_at, acks, &mut late_refused);
        };
        if !body.is_empty() {
            match fate % 8 {
                0 => {}
                1..=3 => arrive(&body, &mut tainted, &mut acks),
                4 => held.push(body),
                5 => {
                    arrive(&body, &mut tainted, &mut acks);
                    arrive(&body, &mut tainted, &mut acks);
                }
                _ => {
                    let mut bad = body.clone();
                    corrupt(&mut bad, &mut input);
                    if bad != body {
                        let _ = tainted.read(&bad);
                    }
                    if fate & 0x08 != 0 {
                        arrive(&body, &mut tainted, &mut acks);
                    }
                }
            }
            if fate & 0x10 != 0 {
                for b in std::mem::take(&mut held) {
                    arrive(&b, &mut tainted, &mut acks);
                }
            }
        }
        t += 1;
    }
    assert_eq!(clean.stats().missing_baseline, late_refused);
    assert_eq!(clean.stats().malformed, 0);
}
