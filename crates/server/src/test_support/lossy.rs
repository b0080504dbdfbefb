//! A match under loss: a match's clients on a seeded simulated network that loses,
//! duplicates and reorders datagrams until it clears, sending random inputs until then
//! and standing still after ([`converge`]). Checks that every client ends up current and
//! holding what the server replicated, and that every event sent to all reached every
//! client once each and in order; what the game's own events must show is the caller's.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tickforge_api::{Game, Seat};
use tickforge_proto::msg::{self, ClientMsg, ServerMsg};
use tickforge_proto::reliable::Endpoint;
use tickforge_proto::ClientIndex;
use tickforge_replication::{Lanes, NetId, Replica, ReplicaConfig};
use tickforge_telemetry::Scopes;
use tickforge_testkit::{LinkConditions, NetSim, SimRng};

use super::{received, Received};
use crate::{HostedMatch, Match};

/// Ticks a [`converge`] runs.
pub const TICKS: u32 = 1200;
/// The tick the network clears at; the clients stand still from then on.
pub const CLEARS_AT: u32 = 900;

/// What a match under loss does that is its game's.
pub trait Lossy<G: Game> {
    /// The game's events, as a client decodes them.
    type Event: Copy + fmt::Debug + PartialEq;
    /// An entity's state as replicated (quantized): what a client must end up with.
    type State: Copy + fmt::Debug + PartialEq;
    /// Decodes one of the game's events; anything else fails the test.
    fn event(bytes: &[u8]) -> Self::Event;
    /// True for an event sent to one seat only (the welcome, a join, a verdict), false for
    /// one sent to all.
    fn own(event: &Received<Self::Event>) -> bool;
    /// Writes a client's command for this tick into `cmd` (empty): random ones drawing on
    /// `rng` while `moving`, standing still after.
    fn command(rng: &mut SimRng, moving: bool, cmd: &mut Vec<u8>);
    /// `seat`'s entity's state in the match, after a tick.
    fn state(m: &Match<G>, seat: Seat) -> Self::State;
    /// The same, as a client's replica holds it.
    fn replicated(lanes: &Lanes) -> Self::State;
    /// Whether `client`'s seat is sent entity `id` (what a game's fog of war hides from a
    /// seat is what the seat must not hold).
    fn relevant(m: &Match<G>, client: usize, id: NetId) -> bool;
}

/// One client of a [`converge`]: its end of the link, what it rebuilt, the events every
/// client is sent and those for its seat only, in the order received.
pub struct LossyClient<E> {
    pub addr: SocketAddr,
    pub link: Endpoint,
    pub replica: Replica,
    pub shared_events: Vec<Received<E>>,
    pub own_events: Vec<Received<E>>,
    pub seq: u32,
    pub bad_snapshots: u32,
}

/// Seats a client in every seat of `m` (client `i` in seat `i`), its replica configured
/// with `replica_config`, and runs [`TICKS`] ticks of the match on a network that loses a
/// fifth of the datagrams, duplicates and reorders some, until [`CLEARS_AT`]; client 0's
/// link never loses anything, the reference. Checks that the link was lossy, and that
/// every client decoded every snapshot, is current, holds every entity relevant to it at
/// the server's state of a recent tick (and none other), and received the events sent to
/// all as client 0 did. Returns the clients.
pub fn converge<G: Game, L: Lossy<G>>(
    m: &mut Match<G>,
    t0: Instant,
    replica_config: ReplicaConfig,
) -> Vec<LossyClient<L::Event>> {
    let scopes = Scopes::new(Instant::now);
    let players = u16::try_from(m.seats()).unwrap();
    let server: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let mut clients: Vec<LossyClient<L::Event>> = (0..players)
        .map(|i| {
            let seat = Seat(i);
            assert_eq!(m.seat(t0, ClientIndex(i), Some(seat)), Some(seat));
            LossyClient {
                addr: format!("127.0.0.1:{}", 50_000 + i).parse().unwrap(),
                link: Endpoint::new(msg::link_config(), t0),
                replica: Replica::new(replica_config, G::schema()),
                shared_events: Vec::new(),
                own_events: Vec::new(),
                seq: 0,
                bad_snapshots: 0,
            }
        })
        .collect();
    let lossy = LinkConditions {
        latency: Duration::from_millis(20),
        jitter: Duration::from_millis(10),
        loss_probability: 0.2,
        duplicate_probability: 0.1,
        reorder_probability: 0.1,
        reorder_delay: Duration::from_millis(30),
    };
    let clear = LinkConditions::ideal(Duration::from_millis(20));
    let mut sim = NetSim::new(7, lossy);
    // Client 0 is the reference: its link never loses anything.
    sim.set_link(clients[0].addr, server, clear);
    sim.set_link(server, clients[0].addr, clear);
    let mut rng = SimRng::new(11);
    // What the server replicated at each tick, quantized: what a client must end up with.
    let mut sent: HashMap<u32, Vec<L::State>> = HashMap::new();
    let (mut up, mut input, mut cmd) = (Vec::new(), Vec::new(), Vec::new());
    let mut event = Vec::new();
    let (ticks, clears_at) = (TICKS, CLEARS_AT);
    for t in 0..ticks {
        let now = t0 + m.period() * t;
        if t == clears_at {
            for c in &clients {
                sim.set_link(c.addr, server, clear);
                sim.set_link(server, c.addr, clear);
            }
        }
        for d in sim.take_due(now) {
            if d.to == server {
                let i = clients.iter().position(|c| c.addr == d.from).unwrap();
                m.receive(now, Seat(i as u16), &d.bytes)
                    .expect("an honest client's packet");
                continue;
            }
            let c = clients.iter_mut().find(|c| c.addr == d.to).unwrap();
            if let Some((_, body)) = c.link.read_packet(now, &d.bytes).unwrap() {
                let ServerMsg::Snapshot { body, .. } = ServerMsg::decode(body).unwrap();
                c.bad_snapshots += u32::from(c.replica.read(body).is_err());
            }
            while c.link.poll_reliable(&mut event) {
                for e in received(&event, L::event) {
                    if L::own(&e) {
                        c.own_events.push(e);
                    } else {
                        c.shared_events.push(e);
                    }
                }
            }
        }
        for c in &mut clients {
            cmd.clear();
            L::command(&mut rng, t < clears_at, &mut cmd);
            c.seq += 1;
            input.clear();
            ClientMsg::Input {
                seq: c.seq,
                view_tick: t.saturating_sub(8),
                view_frac: 0,
                cmd: &cmd,
            }
            .encode(&mut input);
            c.link.write_packet(now, Some((c.seq, &input)), &mut up);
            sim.send(now, c.addr, server, &up);
        }
        m.run_tick(now, &scopes);
        let states = (0..players).map(|s| L::state(m, Seat(s))).collect();
        sent.insert(t, states);
        for (client, payload) in m.outbox().iter() {
            let to = clients[usize::from(client.0)].addr;
            sim.send(now, server, to, payload);
        }
    }
    assert!(
        sim.stats().lost > 500,
        "the link was lossy: {:?}",
        sim.stats()
    );
    let last = ticks - 1;
    for (i, c) in clients.iter().enumerate() {
        assert_eq!(c.bad_snapshots, 0, "client {i}: every snapshot decoded");
        let newest = c.replica.newest_tick().expect("snapshots arrived");
        assert!(
            last - newest <= 4,
            "client {i} is current: {newest} of {last}"
        );
        for s in 0..players {
            let id = NetId(s);
            if !L::relevant(m, i, id) {
                assert_eq!(c.replica.entity(id), None, "client {i} dropped hidden {s}");
                continue;
            }
            // Within a bounded number of ticks of the newest, at the server's state then.
            let at = c
                .replica
                .entity_tick(id)
                .expect("a relevant entity was sent");
            assert!(
                newest - at <= 8,
                "client {i}, entity {s}: tick {at} of {newest}"
            );
            assert_eq!(
                c.replica.entity(id).map(|q| L::replicated(&q)),
                Some(sent[&at][usize::from(s)])
            );
        }
        // Every event every client is sent, once each and in order, as the client whose
        // link never lost anything got them.
        assert_eq!(c.shared_events, clients[0].shared_events, "client {i}");
    }
    clients
}
