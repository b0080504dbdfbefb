//! An honest pair of endpoints under loss, duplication and reordering, for long enough that
//! message ids wrap: the receiver never refuses the sender's packets, and every message
//! arrives once, in order. Messages of every size a match sends (a word, a tick's events,
//! a burst in fragments).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::Endpoint;
use crate::msg::link_config;

/// A tick of the 1,000-player fight.
const TICK: Duration = Duration::from_nanos(33_333_333);

/// A packet on the way, and when it arrives.
struct InFlight {
    at: u32,
    to_client: bool,
    bytes: Vec<u8>,
}

/// xorshift64*: the test's own random stream, from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A message's bytes: its number, then filler derived from it, `len` long (at least 4).
fn message(n: u32, len: usize) -> Vec<u8> {
    let mut m: Vec<u8> = (0..len).map(|i| (n as usize * 31 + i) as u8).collect();
    m[..4].copy_from_slice(&n.to_le_bytes());
    m
}

/// Runs `ticks` ticks of a server sending `per_tick` messages a tick on average to a client
/// (with `bursts`, one in 20 is long enough to go in fragments) over a network losing 1
/// packet in `loss`, duplicating 1 in 50 and delaying each by up to `jitter` ticks;
/// returns the messages delivered.
fn run(
    seed: u64,
    ticks: u32,
    per_tick: u64,
    bursts: bool,
    loss: u64,
    jitter: u64,
    max_stall: u64,
) -> u32 {
    let t0 = Instant::now();
    let mut rng = Rng(seed | 1);
    let (mut server, mut client) = (
        Endpoint::new(link_config(), t0),
        Endpoint::new(link_config(), t0),
    );
    let mut net: VecDeque<InFlight> = VecDeque::new();
    let (mut sent, mut delivered) = (0u32, 0u32);
    let mut out = Vec::new();
    let mut packet = Vec::new();
    let snapshot = vec![0x5a; 560];
    let mut stall_until = 0u32;
    for t in 0..ticks {
        let now = t0 + TICK * t;
        // The tick's messages, while the queue takes them (an honest server that found it
        // full would disconnect the client; here it waits).
        let n = rng.below(2 * per_tick + 1);
        for _ in 0..n {
            let len = match rng.below(20) {
                0 if bursts => 241 + rng.below(6_000) as usize, // fragments
                1..=4 => 40 + rng.below(200) as usize,
                _ => 4 + rng.below(12) as usize,
            };
            if server.send_reliable(&message(sent, len)).is_ok() {
                sent += 1;
            }
        }
        // A server catching up writes several packets at once; a client may write none
        // (it stalled) or several.
        let mut sends: Vec<(bool, Vec<u8>)> = Vec::new();
        let stalled = stall_until > t;
        if !stalled && rng.below(300) == 0 {
            stall_until = t + 1 + rng.below(max_stall + 1) as u32;
        }
        for _ in 0..(if rng.below(10) == 0 {
            1 + rng.below(3)
        } else {
            1
        }) {
            server.write_packet(now, Some((t, &snapshot)), &mut packet);
            sends.push((true, packet.clone()));
        }
        if !stalled {
            for _ in 0..(if rng.below(10) == 0 { rng.below(3) } else { 1 }) {
                client.write_packet(now, None, &mut out);
                sends.push((false, out.clone()));
            }
        }
        for (to_client, bytes) in &sends {
            let to_client = *to_client;
            if rng.below(loss) == 0 {
                continue;
            }
            let copies = if rng.below(50) == 0 { 2 } else { 1 };
            for _ in 0..copies {
                net.push_back(InFlight {
                    at: t + 1 + rng.below(jitter + 1) as u32,
                    to_client,
                    bytes: bytes.clone(),
                });
            }
        }
        // What arrives by the next tick, in the order it arrives.
        let mut due: Vec<InFlight> = Vec::new();
        let mut i = 0;
        while i < net.len() {
            if net[i].at <= t + 1 && !(net[i].to_client && stall_until > t) {
                due.push(net.remove(i).expect("in range"));
            } else {
                i += 1;
            }
        }
        let now = t0 + TICK * (t + 1);
        for p in due {
            if p.to_client {
                if let Err(e) = client.read_packet(now, &p.bytes) {
                    panic!("tick {t}: the client refused an honest packet: {e} (message {delivered} of {sent})");
                }
                while client.poll_reliable(&mut out) {
                    let n = u32::from_le_bytes(out[..4].try_into().unwrap());
                    assert_eq!(n, delivered, "tick {t}: in order, once");
                    assert_eq!(out, message(n, out.len()), "message {n} intact");
                    delivered += 1;
                }
            } else {
                server
                    .read_packet(now, &p.bytes)
                    .expect("the server takes the client's packets");
                while server.poll_acked_tag().is_some() {}
            }
        }
    }
    delivered
}

#[test]
fn message_ids_wrap_without_a_refusal_under_loss_and_reordering() {
    // ~12 short messages a tick for 10,000 ticks: past id 65,535.
    let delivered = run(7, 10_000, 12, false, 20, 3, 30);
    assert!(delivered > 70_000, "{delivered} delivered");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn an_honest_sender_is_never_refused(seed in any::<u64>(), per_tick in 1u64..16, loss in 3u64..40, jitter in 0u64..4) {
        let delivered = run(seed, 1_500, per_tick, true, loss, jitter, 60);
        prop_assert!(delivered > 0);
    }
}
