//! Sessions against a real match ([`tickforge_server::Match`] of capture the flag) served by
//! a netcode server, joined by the testkit's network simulator, on virtual time: no
//! sockets, no sleeps, the same run every time for a seed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickforge_api::{MatchSetup, Seat};
use tickforge_ctf::{Ctf, CtfConfig, Input, Kind};
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::{self, ServerEvent};
use tickforge_proto::user_data::{UserData, ANY, ANY_SEAT};
use tickforge_proto::MatchId;
use tickforge_replication::{Coding, Field, NetId, Quantum};
use tickforge_server::{HostedMatch, Match, ReceiveError};
use tickforge_sim::Tick;
use tickforge_telemetry::Scopes;
use tickforge_testkit::alloc::{allocations_in, Counting};
use tickforge_testkit::{LinkConditions, NetSim};

use super::*;

#[global_allocator]
static GLOBAL: Counting = Counting;

const PROTOCOL: u64 = 0x7469_636b;
const KEY: [u8; 32] = [7; 32];
const UNIX: u64 = 1_700_000_000;
const PERIOD: Duration = Duration::from_nanos(1_000_000_000 / 128);

fn server_addr() -> SocketAddr {
    "10.0.0.1:40000".parse().unwrap()
}

fn client_addr(n: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 1, n as u8 + 1], 50000))
}

fn token(n: usize) -> ConnectToken {
    let params = TokenParams {
        protocol_id: PROTOCOL,
        create_timestamp: UNIX,
        expire_seconds: 60,
        timeout_seconds: 5,
        server_addresses: vec![server_addr()],
    };
    let user_data = UserData {
        match_id: MatchId(1),
        team: ANY,
        seat: ANY_SEAT,
    }
    .encode();
    ConnectToken::mint(
        &params,
        n as u64 + 1,
        &user_data,
        &KEY,
        &[n as u8 + 3; 24 + 64],
    )
}

/// What one client saw, besides its session's counters.
#[derive(Default, Debug)]
struct Seen {
    welcome: Option<Welcome>,
    epochs: Vec<u32>,
    game_events: u64,
    snapshot_events: u64,
    newest_ack: u32,
    ended: Option<Ended>,
    /// Tick of the first snapshot event after the welcome, and the server tick the welcome
    /// arrived at.
    first_snapshot: Option<u32>,
    welcomed_at: Option<u32>,
    /// The emotes relayed to it, `(seat, emote)`, with room reserved so that recording
    /// them allocates nothing.
    emotes: Vec<(u16, u8)>,
    /// Snapshot events since the last look.
    recent_snapshots: u64,
}

impl Seen {
    fn new() -> Seen {
        Seen {
            emotes: Vec::with_capacity(256),
            ..Seen::default()
        }
    }
}

/// A capture-the-flag match of `seats` seats served at [`server_addr`], its clients
/// [`Session`]s, all on one simulated network.
struct World {
    net: NetSim,
    server: netcode::Server,
    m: Match<Ctf>,
    seats: Vec<Option<Seat>>,
    sessions: Vec<Session>,
    seen: Vec<Seen>,
    scopes: Scopes,
    start: Instant,
    t: u32,
    frame: Vec<u8>,
    recv: Vec<u8>,
    /// Server-to-client payload datagrams to drop, by count, from the first.
    drop_first_payloads: usize,
    /// Allocations the sessions made in ticks from `measure_from` on.
    measure_from: u32,
    allocations: u64,
    /// Allocations the match made in `receive` and `run_tick` in ticks from
    /// `measure_server_from` on (not in `finish_if_over`: a start over allocates).
    measure_server_from: u32,
    server_allocations: u64,
    /// The ticks, and the call, where the match allocated while measured.
    server_allocating: Vec<(u32, &'static str, u64)>,
    /// Packets the match refused, and the seat: as the worker does, the host
    /// disconnects the client and unseats it.
    refusals: Vec<(u32, Seat, ReceiveError)>,
}

impl World {
    fn new(seed: u64, conditions: LinkConditions, clients: usize, config: CtfConfig) -> World {
        let start = Instant::now();
        let server = netcode::Server::new(
            netcode::ServerConfig {
                protocol_id: PROTOCOL,
                private_key: KEY,
                public_addresses: vec![server_addr()],
                max_clients: 8,
                requests_per_second_per_ip: 10,
            },
            start,
            UNIX,
            [9; 32],
        );
        let setup = MatchSetup {
            seats: 4,
            tick_hz: 128,
            record: false,
            stagger: 0,
        };
        let m = Match::new(MatchId(1), Arc::new(config), setup, start);
        World {
            net: NetSim::new(seed, conditions),
            server,
            m,
            seats: vec![None; 8],
            sessions: (0..clients)
                .map(|n| Session::new(token(n), tickforge_ctf::schema(), Default::default(), start))
                .collect(),
            seen: (0..clients).map(|_| Seen::new()).collect(),
            scopes: Scopes::new(Instant::now),
            start,
            t: 0,
            frame: Vec::with_capacity(MAX_PACKET_BYTES),
            recv: vec![0; 2048],
            drop_first_payloads: 0,
            measure_from: u32::MAX,
            allocations: 0,
            measure_server_from: u32::MAX,
            server_allocations: 0,
            server_allocating: Vec::with_capacity(64),
            refusals: Vec::new(),
        }
    }

    /// One tick of the whole network: deliveries, the clients' inputs, the server's frame.
    fn step(&mut self) {
        let now = self.start + PERIOD * self.t;
        while let Some(d) = self.net.poll_due(now) {
            if d.to == server_addr() {
                let mut bytes = d.bytes;
                match self.server.handle_datagram(now, d.from, &mut bytes) {
                    Some(ServerEvent::Connected { client, .. }) => {
                        self.seats[client.as_usize()] = self.m.seat(now, client, None);
                    }
                    Some(ServerEvent::Payload { client, data }) => {
                        if let Some(seat) = self.seats[client.as_usize()] {
                            let m = &mut self.m;
                            let (received, allocs) = allocations_in(|| m.receive(now, seat, data));
                            self.count_server(allocs, "receive");
                            if let Err(e) = received {
                                // What the worker does with a refused client.
                                self.refusals.push((self.t, seat, e));
                                self.server.disconnect(client);
                                self.seats[client.as_usize()] = None;
                                self.m.unseat(seat);
                            }
                        }
                    }
                    Some(ServerEvent::Disconnected { client, .. }) => {
                        if let Some(seat) = self.seats[client.as_usize()].take() {
                            self.m.unseat(seat);
                        }
                    }
                    None => {}
                }
                continue;
            }
            let n = (0..self.sessions.len())
                .find(|&n| client_addr(n) == d.to)
                .expect("a client's address");
            if self.drop_first_payloads > 0 && d.bytes[0] & 0x0f == 5 {
                self.drop_first_payloads -= 1;
                continue;
            }
            let len = d.bytes.len();
            self.recv[..len].copy_from_slice(&d.bytes);
            let measured = self.t >= self.measure_from;
            let (session, seen, recv, t) = (
                &mut self.sessions[n],
                &mut self.seen[n],
                &mut self.recv[..len],
                self.t,
            );
            let ((), allocs) = allocations_in(|| {
                session.handle_datagram(now, d.from, recv);
                while let Some(e) = session.poll_event() {
                    record(seen, e, t);
                }
            });
            if measured {
                self.allocations += allocs;
            }
        }
        for n in 0..self.sessions.len() {
            let session = &mut self.sessions[n];
            let measured = self.t >= self.measure_from;
            let frame = &mut self.frame;
            let net = &mut self.net;
            let seen = &mut self.seen[n];
            let t = self.t;
            let ((), allocs) = allocations_in(|| {
                session.handle_timeout(now);
                while let Some(e) = session.poll_event() {
                    record(seen, e, t);
                }
                // What a renderer does each frame: the render tick, every entity at it.
                if let Some(r) = session.render_tick(now) {
                    let n = session.welcome().map_or(0, |w| w.entities);
                    for id in 0..n {
                        std::hint::black_box(session.entity_at(NetId(id), r));
                    }
                    std::hint::black_box(session.server_tick(now));
                }
                let view = ViewTime::behind(Tick(session.newest_tick()), 4.5);
                let input = Input {
                    move_x: 64,
                    move_y: -20,
                    buttons: 0,
                };
                session.send_input(now, view, &input.to_bytes());
            });
            if measured {
                self.allocations += allocs;
            }
            loop {
                let (to, allocs) = allocations_in(|| session.poll_transmit(now, frame));
                if measured {
                    self.allocations += allocs;
                }
                let Some(to) = to else { break };
                net.send(now, client_addr(n), to, frame);
            }
        }
        self.server.handle_timeout(now);
        while let Some((client, _)) = self.server.poll_disconnect() {
            if let Some(seat) = self.seats[client.as_usize()].take() {
                self.m.unseat(seat);
            }
        }
        while let Some(to) = self.server.poll_transmit(&mut self.frame) {
            self.net.send(now, server_addr(), to, &self.frame);
        }
        let (m, scopes) = (&mut self.m, &self.scopes);
        let (_, allocs) = allocations_in(|| m.run_tick(now, scopes));
        self.count_server(allocs, "run_tick");
        for (client, payload) in self.m.outbox().iter() {
            if let Some(tx) = self
                .server
                .send_payload(now, client, payload, &mut self.frame)
            {
                if tx.keepalive_bytes > 0 {
                    let keepalive = self.frame[..tx.keepalive_bytes].to_vec();
                    self.net.send(now, server_addr(), tx.to, &keepalive);
                }
                let body = self.frame[tx.keepalive_bytes..].to_vec();
                self.net.send(now, server_addr(), tx.to, &body);
            }
        }
        let _ = self.m.finish_if_over();
        self.t += 1;
    }

    /// Counts what the match allocated in one call, when the server is measured.
    fn count_server(&mut self, allocations: u64, call: &'static str) {
        if self.t >= self.measure_server_from && allocations > 0 {
            self.server_allocations += allocations;
            if self.server_allocating.len() < self.server_allocating.capacity() {
                self.server_allocating.push((self.t, call, allocations));
            }
        }
    }

    fn run(&mut self, ticks: u32) {
        for _ in 0..ticks {
            self.step();
        }
    }
}

fn record(seen: &mut Seen, e: SessionEvent<'_>, t: u32) {
    match e {
        SessionEvent::Welcome(w) => {
            seen.welcome = Some(w);
            seen.welcomed_at = Some(t);
        }
        SessionEvent::Epoch { epoch } => seen.epochs.push(epoch),
        SessionEvent::Game(bytes) => {
            let event = tickforge_ctf::Event::decode(bytes);
            assert!(event.is_some(), "{bytes:?}");
            if let Some(tickforge_ctf::Event::Emote { seat, emote }) = event {
                seen.emotes.push((seat, emote));
            }
            seen.game_events += 1;
        }
        SessionEvent::Snapshot {
            tick, input_ack, ..
        } => {
            assert!(
                seen.welcome.is_some(),
                "a snapshot event before the welcome"
            );
            seen.first_snapshot.get_or_insert(tick);
            seen.snapshot_events += 1;
            seen.recent_snapshots += 1;
            seen.newest_ack = seen.newest_ack.max(input_ack);
        }
        SessionEvent::Disconnected(ended) => seen.ended = Some(ended),
    }
}

/// The player entity of `session`'s seat, as its replica has it.
fn own_player(session: &Session) -> Option<tickforge_ctf::EntityState> {
    let seat = session.welcome()?.seat;
    let lanes = session.replica()?.entity(NetId(seat))?;
    Some(tickforge_ctf::decode_state(&lanes))
}

fn assert_played(w: &World, ticks: u32, min_share: f64) {
    assert!(w.refusals.is_empty(), "{:?}", w.refusals);
    for (n, (s, seen)) in w.sessions.iter().zip(&w.seen).enumerate() {
        let stats = s.stats();
        let welcome = seen
            .welcome
            .unwrap_or_else(|| panic!("client {n}: no welcome"));
        assert_eq!(welcome.tick_hz, 128);
        assert_eq!(welcome.seats, 4);
        assert!(welcome.entities >= 4, "{welcome:?}");
        assert_eq!(stats.bad_snapshots, 0, "client {n}: {stats:?}");
        assert_eq!(stats.link_errors, 0, "client {n}: {stats:?}");
        assert_eq!(seen.ended, None, "client {n}");
        assert_eq!(stats.snapshots, seen.snapshot_events, "client {n}");
        assert!(
            seen.snapshot_events as f64 >= ticks as f64 * min_share,
            "client {n}: {} snapshots in {ticks} ticks: {stats:?}",
            seen.snapshot_events
        );
        // The server applied inputs of this session, numbered from 1.
        assert!(
            seen.newest_ack > 0 && seen.newest_ack <= s.seq(),
            "client {n}"
        );
        assert!(s.seq() + 10 >= ticks - 64, "client {n}: {} inputs", s.seq());
        let me = own_player(s).unwrap_or_else(|| panic!("client {n}: own entity not in view"));
        assert_eq!(me.kind, Kind::Player);
        assert!(!me.idle, "client {n}: a connected player is not idle");
        let flags = s
            .replica()
            .unwrap()
            .entities()
            .filter(|(_, l)| tickforge_ctf::decode_state(l).kind == Kind::Flag)
            .count();
        assert_eq!(flags, 2, "client {n}: both flags in view");
    }
    let seats: std::collections::HashSet<u16> =
        w.seen.iter().map(|s| s.welcome.unwrap().seat).collect();
    assert_eq!(
        seats.len(),
        w.sessions.len(),
        "every client has its own seat"
    );
}

#[test]
fn sessions_play_a_match_on_a_clean_link() {
    let mut w = World::new(
        1,
        LinkConditions::ideal(Duration::from_millis(15)),
        2,
        CtfConfig::default(),
    );
    w.run(3 * 128);
    assert_played(&w, 3 * 128, 0.8);
    for s in &w.sessions {
        // Inputs the server acknowledged are at most a round trip behind the newest.
        let rtt = s.link_stats().rtt;
        assert!(
            rtt >= Duration::from_millis(30) && rtt < Duration::from_millis(80),
            "{rtt:?}"
        );
        assert!(s.stats().bytes_received > 0 && s.stats().bytes_sent > 0);
        assert_eq!(s.stats().inputs, u64::from(s.seq()));
    }
    // A player moving +x, -y from its spawn has moved that way.
    let me = own_player(&w.sessions[0]).unwrap();
    assert!(me.velocity[0] > 1.0 && me.velocity[1] < 0.0, "{me:?}");
}

#[test]
fn an_empty_snapshot_body_is_normal_traffic_not_a_bad_snapshot() {
    let mut w = World::new(
        1,
        LinkConditions::ideal(Duration::from_millis(15)),
        1,
        CtfConfig::default(),
    );
    w.run(128);
    let s = &mut w.sessions[0];
    let (snapshots, bad) = (s.stats().snapshots, s.stats().bad_snapshots);
    let tick = s.newest_tick() + 1;
    // What the server sends when its budget left nothing to write: a body of no bytes.
    assert!(s.read(tick, Instant::now(), &[]).is_none());
    assert_eq!(s.stats().empty_snapshots, 1);
    assert_eq!(
        (s.stats().snapshots, s.stats().bad_snapshots),
        (snapshots, bad)
    );
    // A broken body still counts as bad.
    assert!(s.read(tick, Instant::now(), &[0xff]).is_none());
    assert_eq!(s.stats().bad_snapshots, bad + 1);
}

#[test]
fn sessions_play_through_loss_duplication_and_reordering() {
    let conditions = LinkConditions {
        latency: Duration::from_millis(20),
        jitter: Duration::from_millis(5),
        loss_probability: 0.1,
        duplicate_probability: 0.05,
        reorder_probability: 0.1,
        reorder_delay: Duration::from_millis(15),
    };
    let mut w = World::new(3, conditions, 3, CtfConfig::default());
    w.run(4 * 128);
    // A tenth lost, and some left behind by reordering: most snapshots still read.
    assert_played(&w, 4 * 128, 0.7);
    assert!(w.net.stats().lost > 0 && w.net.stats().duplicated > 0 && w.net.stats().reordered > 0);
}

#[test]
fn snapshots_before_a_lost_welcome_are_read_once_it_comes() {
    let mut w = World::new(
        5,
        LinkConditions::ideal(Duration::from_millis(10)),
        1,
        CtfConfig::default(),
    );
    // The first payloads carry the welcome and the first snapshots: lose them, so that
    // snapshots arrive before the welcome's resend.
    w.drop_first_payloads = 1;
    w.run(2 * 128);
    let seen = &w.seen[0];
    let (first, welcomed_at) = (seen.first_snapshot.unwrap(), seen.welcomed_at.unwrap());
    let s = w.sessions[0].stats();
    assert_eq!(s.bad_snapshots, 0, "{s:?}");
    assert_eq!(s.early_dropped, 0, "{s:?}");
    // Snapshots of ticks well before the welcome arrived were read after it.
    assert!(
        first + 4 < welcomed_at,
        "first {first}, welcomed at {welcomed_at}"
    );
    assert_played(&w, 2 * 128, 0.8);
}

#[test]
fn a_match_that_starts_over_resets_the_replica_and_snapshots_go_on() {
    let config = CtfConfig {
        time_limit_s: 1,
        ..CtfConfig::default()
    };
    let mut w = World::new(
        7,
        LinkConditions::ideal(Duration::from_millis(10)),
        2,
        config,
    );
    w.run(128 * 5 / 2);
    assert_eq!(w.m.epoch(), 2, "two matches ended");
    for (n, (s, seen)) in w.sessions.iter().zip(&w.seen).enumerate() {
        assert_eq!(seen.epochs, [1, 2], "client {n}");
        assert_eq!(s.epoch(), 2);
        // The replica holds the new run only: its newest tick is the new run's.
        assert!(s.newest_tick() < 128, "client {n}: {}", s.newest_tick());
    }
    assert_played(&w, 128 * 5 / 2, 0.8);
}

#[test]
fn a_match_of_another_schema_is_refused_with_the_reason() {
    static OTHER: Schema = match Schema::new(&[Field::new("x", Coding::Scalar, Quantum::Whole)]) {
        Ok(s) => s,
        Err(_) => panic!("a valid table"),
    };
    let mut w = World::new(
        9,
        LinkConditions::ideal(Duration::from_millis(10)),
        1,
        CtfConfig::default(),
    );
    w.sessions[0] = Session::new(token(0), &OTHER, SessionConfig::default(), w.start);
    w.run(128);
    let s = &w.sessions[0];
    let seen = &w.seen[0];
    assert_eq!(
        seen.ended,
        Some(Ended::WrongSchema {
            ours: OTHER.fingerprint(),
            theirs: tickforge_ctf::schema().fingerprint(),
        })
    );
    assert!(seen.welcome.is_none() && s.replica().is_none());
    assert_eq!((seen.snapshot_events, s.stats().snapshots), (0, 0));
    assert!(!s.is_connected());
    // The server was told: the seat is free again.
    assert!(w.seats.iter().all(Option::is_none), "{:?}", w.seats);
}

#[test]
fn a_warm_session_allocates_nothing() {
    let mut w = World::new(
        11,
        LinkConditions {
            latency: Duration::from_millis(20),
            jitter: Duration::from_millis(5),
            loss_probability: 0.05,
            duplicate_probability: 0.02,
            reorder_probability: 0.05,
            reorder_delay: Duration::from_millis(10),
        },
        2,
        CtfConfig::default(),
    );
    w.measure_from = 256;
    w.run(256 + 3 * 128);
    assert_eq!(w.allocations, 0);
    assert_played(&w, 256 + 3 * 128, 0.7);
}

#[test]
fn hostile_datagrams_change_nothing() {
    let mut s = Session::new(
        token(0),
        tickforge_ctf::schema(),
        Default::default(),
        Instant::now(),
    );
    let now = Instant::now();
    for len in [0, 1, 13, 200, 1300] {
        let mut bytes = vec![5u8; len];
        s.handle_datagram(now, server_addr(), &mut bytes);
        s.handle_datagram(now, client_addr(3), &mut bytes);
        assert!(s.poll_event().is_none());
    }
    assert_eq!(s.stats().snapshots + s.stats().bad_snapshots, 0);
}

#[test]
fn a_welcome_takes_the_replica_prepared_for_its_match_and_only_that() {
    let welcome = Welcome {
        match_id: 1,
        seat: 0,
        tick_hz: 30,
        seats: 100,
        entities: 100,
        epoch: 0,
    };
    let schema = tickforge_ctf::schema();
    let session = || Session::new(token(0), schema, SessionConfig::COMPACT, Instant::now());
    let prepared = |entities: u16, tick_hz: u16| {
        let mut r = Replica::new(
            SessionConfig::COMPACT.replica_config(entities, tick_hz),
            schema,
        );
        r.reserve(100);
        r
    };
    // Made with the welcome: room for 64 records a slot.
    let mut plain = session();
    plain.welcomed(welcome, schema.fingerprint()).unwrap();
    let made = plain.replica().unwrap().room();
    assert_eq!(made, 64 * 72);
    // Prepared for this match: the welcome takes it, room and all.
    let mut s = session();
    let r = prepared(100, 30);
    assert_eq!(r.room(), 100 * 72);
    s.prepare(r);
    s.welcomed(welcome, schema.fingerprint()).unwrap();
    assert_eq!(s.replica().unwrap().room(), 100 * 72);
    assert_eq!(
        *s.replica().unwrap().config(),
        SessionConfig::COMPACT.replica_config(100, 30)
    );
    // Prepared for another size, or another rate: the welcome makes its own.
    for (entities, tick_hz) in [(99, 30), (100, 60)] {
        let mut s = session();
        let r = prepared(entities, tick_hz);
        s.prepare(r);
        s.welcomed(welcome, schema.fingerprint()).unwrap();
        assert_eq!(
            s.replica().unwrap().room(),
            made,
            "{entities} at {tick_hz} Hz"
        );
        assert!(s.prepared.is_none(), "the unfit replica is dropped");
    }
    // Prepared for this match, but decoding another game's fields: not taken either.
    static OTHER: Schema = match Schema::new(&[Field::new("x", Coding::Scalar, Quantum::Whole)]) {
        Ok(s) => s,
        Err(_) => panic!("a valid table"),
    };
    let mut s = session();
    let mut r = Replica::new(SessionConfig::COMPACT.replica_config(100, 30), &OTHER);
    r.reserve(100);
    s.prepare(r);
    s.welcomed(welcome, schema.fingerprint()).unwrap();
    assert_eq!(s.replica().unwrap().room(), made);
    assert_eq!(
        s.replica().unwrap().schema().fingerprint(),
        schema.fingerprint()
    );
}

/// Runs `w` until every session is welcomed (at most two seconds).
fn run_until_welcomed(w: &mut World) {
    for _ in 0..256 {
        if w.seen.iter().all(|s| s.welcome.is_some()) {
            return;
        }
        w.step();
    }
    panic!("not every client was welcomed: {:?}", w.seen);
}

#[test]
fn a_message_reaches_the_game_and_its_emote_every_seated_client() {
    let mut w = World::new(
        13,
        LinkConditions::ideal(Duration::from_millis(15)),
        3,
        CtfConfig::default(),
    );
    run_until_welcomed(&mut w);
    w.run(64);
    assert!(w.seen.iter().all(|s| s.emotes.is_empty()));
    let sender = w.seen[0].welcome.unwrap().seat;
    w.sessions[0]
        .send_message(&[1, 3])
        .expect("the link takes a message");
    w.run(64);
    // Relayed to all, once: the others, and the sender too.
    for (n, seen) in w.seen.iter().enumerate() {
        assert_eq!(seen.emotes, [(sender, 3)], "client {n}");
    }
    assert!(w.refusals.is_empty(), "{:?}", w.refusals);
    // A second emote within the second is accepted, not relayed; one after it is.
    w.sessions[1].send_message(&[1, 5]).unwrap();
    w.sessions[1].send_message(&[1, 6]).unwrap();
    w.run(160);
    w.sessions[1].send_message(&[1, 7]).unwrap();
    w.run(128);
    let other = w.seen[1].welcome.unwrap().seat;
    for (n, seen) in w.seen.iter().enumerate() {
        assert_eq!(
            seen.emotes,
            [(sender, 3), (other, 5), (other, 7)],
            "client {n}"
        );
    }
    assert_played(&w, w.t - w.seen[0].welcomed_at.unwrap(), 0.8);
}

#[test]
fn a_tick_s_game_events_come_in_one_message_and_out_one_at_a_time() {
    let mut w = World::new(
        19,
        LinkConditions::ideal(Duration::from_millis(15)),
        3,
        CtfConfig::default(),
    );
    run_until_welcomed(&mut w);
    w.run(64);
    let before: Vec<(u64, u64)> = (0..3)
        .map(|n| (w.sessions[n].stats().events, w.seen[n].game_events))
        .collect();
    // The three emote in the same tick: the server relays the three to each in one tick.
    for n in 0..3 {
        w.sessions[n].send_message(&[1, 2 + n as u8]).unwrap();
    }
    w.run(64);
    let mut want: Vec<(u16, u8)> = (w.seen.iter().zip(2u8..))
        .map(|(seen, emote)| (seen.welcome.unwrap().seat, emote))
        .collect();
    want.sort_unstable();
    for (n, ((seen, session), (events_before, game_before))) in
        (w.seen.iter().zip(&w.sessions).zip(&before)).enumerate()
    {
        let mut got = seen.emotes.clone();
        got.sort_unstable();
        assert_eq!(got, want, "client {n}: each emote, once");
        let messages = session.stats().events - events_before;
        let events = seen.game_events - game_before;
        assert!(
            messages < events,
            "client {n}: {events} game events came in {messages} messages"
        );
    }
}

#[test]
fn a_message_the_game_refuses_is_a_receive_error_and_the_others_play_on() {
    let mut w = World::new(
        17,
        LinkConditions::ideal(Duration::from_millis(15)),
        2,
        CtfConfig::default(),
    );
    run_until_welcomed(&mut w);
    w.run(64);
    let refused_seat = Seat(w.seen[1].welcome.unwrap().seat);
    w.sessions[1].send_message(&[9]).unwrap();
    let sent_at = w.t;
    w.run(32);
    assert_eq!(w.refusals.len(), 1, "{:?}", w.refusals);
    let (at, seat, e) = &w.refusals[0];
    assert_eq!(*seat, refused_seat);
    assert!(
        matches!(e, ReceiveError::Refused(tickforge_api::Refused(why)) if why.contains("ctf")),
        "{e:?}"
    );
    // One way across the link, and the next packet of the client.
    assert!(
        (sent_at..sent_at + 8).contains(at),
        "sent {sent_at}, refused {at}"
    );
    // The host disconnected it, as the worker does: its session ends.
    w.run(64);
    assert!(
        matches!(w.seen[1].ended, Some(Ended::Transport(_))),
        "{:?}",
        w.seen[1].ended
    );
    assert!(!w.sessions[1].is_connected());
    assert_eq!(w.m.connected(), 1);
    // The other client goes on: snapshots every tick, its inputs applied.
    w.seen[0].recent_snapshots = 0;
    let ack = w.seen[0].newest_ack;
    w.run(128);
    let seen = &w.seen[0];
    assert!(seen.recent_snapshots >= 120, "{}", seen.recent_snapshots);
    assert!(seen.newest_ack > ack);
    assert_eq!(seen.ended, None);
    assert_eq!(w.sessions[0].stats().bad_snapshots, 0);
    assert!(
        seen.emotes.is_empty(),
        "nothing was relayed of the refused message"
    );
    assert_eq!(w.refusals.len(), 1);
}

#[test]
fn a_match_with_messages_and_start_overs_receives_and_ticks_without_allocating() {
    let config = CtfConfig {
        captures: 1,
        time_limit_s: 1,
        ..CtfConfig::default()
    };
    let mut w = World::new(
        19,
        LinkConditions::ideal(Duration::from_millis(10)),
        4,
        config,
    );
    run_until_welcomed(&mut w);
    // Warm: a start over and emotes already seen once.
    let emote = |w: &mut World, k: u32| {
        for (n, s) in w.sessions.iter_mut().enumerate() {
            s.send_message(&[1, ((k as usize + n) % 16) as u8]).unwrap();
        }
    };
    for k in 0..256 {
        if k % 48 == 0 {
            emote(&mut w, k);
        }
        w.step();
    }
    assert!(w.m.epoch() >= 1, "warm-up saw a start over");
    let (epoch, emotes, acks) = (
        w.m.epoch(),
        w.seen[0].emotes.len(),
        w.seen.iter().map(|s| s.newest_ack).collect::<Vec<_>>(),
    );
    w.seen.iter_mut().for_each(|s| s.recent_snapshots = 0);
    let ticks = 5 * 128;
    w.measure_server_from = w.t;
    for k in 0..ticks {
        if k % 48 == 0 {
            emote(&mut w, k);
        }
        w.step();
    }
    assert_eq!(
        (w.server_allocations, &w.server_allocating[..]),
        (0, &[][..]),
        "(tick, call, allocations)"
    );
    // What was measured: start overs, relayed emotes, inputs and snapshots.
    assert!(w.m.epoch() >= epoch + 4, "{} → {}", epoch, w.m.epoch());
    assert!(
        w.seen[0].emotes.len() >= emotes + 8,
        "{:?}",
        w.seen[0].emotes
    );
    for (n, seen) in w.seen.iter().enumerate() {
        assert!(seen.newest_ack > acks[n], "client {n}");
        assert!(
            seen.recent_snapshots >= u64::from(ticks) * 9 / 10,
            "client {n}: {}",
            seen.recent_snapshots
        );
        assert_eq!(seen.ended, None, "client {n}");
        assert!(seen.epochs.len() >= 5, "client {n}: {:?}", seen.epochs);
    }
    assert!(w.refusals.is_empty(), "{:?}", w.refusals);
}

/// The time of the step just run, and the server tick due then (the truth the estimate
/// is measured against): the match ran that tick in the step.
fn just_run(w: &World) -> (Instant, f64) {
    (w.start + PERIOD * (w.t - 1), f64::from(w.m.tick().0) - 1.0)
}

#[test]
fn the_server_tick_estimate_is_within_a_fraction_of_a_tick_under_150ms_rtt() {
    let conditions = LinkConditions {
        latency: Duration::from_millis(70),
        jitter: Duration::from_millis(10),
        loss_probability: 0.05,
        duplicate_probability: 0.05,
        reorder_probability: 0.05,
        reorder_delay: Duration::from_millis(15),
    };
    let mut w = World::new(21, conditions, 2, CtfConfig::default());
    run_until_welcomed(&mut w);
    // Warm-up: two seconds.
    w.run(256);
    let (mut worst, mut sum, mut n) = (0.0f64, 0.0f64, 0u32);
    for _ in 0..3 * 128 {
        w.step();
        let (now, truth) = just_run(&w);
        for s in &w.sessions {
            let est = s.server_tick(now).expect("synced");
            let err = est - truth;
            worst = worst.max(err.abs());
            sum += err.abs();
            n += 1;
        }
    }
    let mean = sum / f64::from(n);
    eprintln!("server tick error: mean {mean:.3} ticks, worst {worst:.3} ticks");
    for s in &w.sessions {
        eprintln!("{:?}", s.stats());
        let rtt = s.stats().rtt;
        assert!(
            rtt > Duration::from_millis(140) && rtt < Duration::from_millis(190),
            "{rtt:?}"
        );
    }
    assert!(mean < 0.25, "mean error {mean} ticks");
    assert!(worst < 0.6, "worst error {worst} ticks");
    assert!(w.net.stats().lost > 0 && w.net.stats().duplicated > 0 && w.net.stats().reordered > 0);
}

#[test]
fn the_interpolation_delay_grows_with_jitter_and_shrinks_back_when_it_calms() {
    let calm = LinkConditions::ideal(Duration::from_millis(40));
    let rough = LinkConditions {
        jitter: Duration::from_millis(40),
        ..calm
    };
    let mut w = World::new(23, calm, 1, CtfConfig::default());
    run_until_welcomed(&mut w);
    w.run(3 * 128);
    let calm_delay = w.sessions[0].interp_delay_ticks();
    assert!((1.9..3.0).contains(&calm_delay), "{calm_delay}");
    w.net.set_link(server_addr(), client_addr(0), rough);
    // The render clock never jumps: it advances about a tick per tick while the delay
    // adapts, and holds (render tick past the newest snapshot) are rare once adapted.
    let (now, _) = just_run(&w);
    let mut last = w.sessions[0].render_tick(now).unwrap();
    let (mut steps, mut holds, mut max_step, mut min_step) = (0u32, 0u32, 0.0f64, f64::MAX);
    let mut peak = calm_delay;
    let mut observe = |w: &mut World, adapted: bool| {
        w.step();
        let (now, _) = just_run(w);
        let s = &w.sessions[0];
        let r = s.render_tick(now).unwrap();
        max_step = max_step.max(r - last);
        min_step = min_step.min(r - last);
        last = r;
        peak = peak.max(s.interp_delay_ticks());
        if adapted {
            steps += 1;
            holds += u32::from(r > f64::from(s.interp_newest_tick().unwrap()));
        }
    };
    for k in 0..6 * 128 {
        observe(&mut w, k >= 3 * 128);
    }
    let rough_delay = w.sessions[0].interp_delay_ticks();
    assert!(
        rough_delay > calm_delay + 2.0,
        "{calm_delay} → {rough_delay}"
    );
    w.net.set_link(server_addr(), client_addr(0), calm);
    for _ in 0..8 * 128 {
        observe(&mut w, false);
    }
    let hold_share = f64::from(holds) / f64::from(steps);
    let calmed = w.sessions[0].interp_delay_ticks();
    eprintln!(
        "delay: calm {calm_delay:.2}, rough {rough_delay:.2} (peak {peak:.2}), calm again \
         {calmed:.2} ticks; holds {hold_share:.3}; render steps {min_step:.3}..{max_step:.3}"
    );
    assert!(calmed < calm_delay + 0.5, "{calmed}");
    assert!(hold_share < 0.05, "{hold_share}");
    assert!(min_step > 0.5 && max_step < 1.5, "{min_step}..{max_step}");
}

#[test]
fn entities_are_interpolated_between_the_snapshots_around_the_render_tick() {
    let mut w = World::new(
        25,
        LinkConditions::ideal(Duration::from_millis(20)),
        1,
        CtfConfig::default(),
    );
    run_until_welcomed(&mut w);
    w.run(128);
    let s = &w.sessions[0];
    let me = NetId(s.welcome().unwrap().seat);
    let (now, _) = just_run(&w);
    let r = s.render_tick(now).unwrap();
    let newest = s.interp_newest_tick().unwrap();
    assert!(r < f64::from(newest), "render {r}, newest {newest}");
    assert!(f64::from(newest) - r < 6.0, "render {r}, newest {newest}");
    // Every tick is held on a clean link: halfway between two ticks is halfway between
    // their states (the player moves at a constant velocity).
    let t = newest - 3;
    let a = s.entity_at(me, f64::from(t)).unwrap();
    let b = s.entity_at(me, f64::from(t + 1)).unwrap();
    let mid = s.entity_at(me, f64::from(t) + 0.5).unwrap();
    assert_ne!(a.0[2..4], b.0[2..4], "the player moves");
    for lane in 0..4 {
        let (lo, hi) = (a.0[lane].min(b.0[lane]), a.0[lane].max(b.0[lane]));
        assert!(
            (lo..=hi).contains(&mid.0[lane]),
            "lane {lane}: {a:?} {mid:?} {b:?}"
        );
        assert!(
            (i64::from(mid.0[lane]) * 2 - i64::from(a.0[lane]) - i64::from(b.0[lane])).abs() <= 1
        );
    }
    // The byte field comes from the earlier snapshot.
    assert_eq!(mid.0[4], a.0[4]);
    // Past the newest: held at the newest, not extrapolated.
    let newest_state = s.entity_at(me, f64::from(newest)).unwrap();
    assert_eq!(s.entity_at(me, f64::from(newest) + 7.5), Some(newest_state));
    assert_eq!(Some(newest_state), s.replica().unwrap().entity(me));
    // An id past the match's, or before the welcome: nothing.
    assert_eq!(s.entity_at(NetId(1000), r), None);
}

#[test]
fn angles_interpolate_the_short_way_round_and_bytes_from_the_earlier_state() {
    static SCHEMA: Schema = match Schema::new(&[
        Field::new("x", Coding::Scalar, Quantum::Whole),
        Field::new("yaw", Coding::Angle { bits: 8 }, Quantum::Turn { bits: 8 }),
        Field::new(
            "view",
            Coding::AnglePair { bits: 16 },
            Quantum::Turn { bits: 16 },
        ),
        Field::new("flags", Coding::Byte, Quantum::Whole),
        Field::new("v", Coding::Pair, Quantum::Whole),
    ]) {
        Ok(s) => s,
        Err(_) => panic!("a valid table"),
    };
    let mut a = Lanes::ZERO;
    let mut b = Lanes::ZERO;
    a.0[..7].copy_from_slice(&[-100, 250, 65000, -300, 3, 10, -10]);
    b.0[..7].copy_from_slice(&[100, 6, 1000, 300, 9, 20, 10]);
    let mid = lerp(&SCHEMA, &a, &b, 0.5);
    // 250 → 6 is 12 units forward across the wrap: halfway is 256 ≡ 0.
    assert_eq!(mid.0[..7], [0, 0, (65000 + 768) % 65536, 0, 3, 15, 0]);
    let quarter = lerp(&SCHEMA, &a, &b, 0.25);
    assert_eq!(quarter.0[1], 253);
    // And backwards across the wrap.
    assert_eq!(lerp(&SCHEMA, &b, &a, 0.75).0[1], 253);
    assert_eq!(lerp(&SCHEMA, &a, &b, 0.0), a);
    assert_eq!(lerp(&SCHEMA, &a, &b, 1.0).0[..4], b.0[..4]);
    assert_eq!(
        lerp(&SCHEMA, &a, &b, 1.0).0[4],
        a.0[4],
        "bytes from the earlier"
    );
    assert_eq!(lerp(&SCHEMA, &a, &b, f64::NAN), a);
}

#[test]
fn a_start_over_resets_the_server_tick_estimate_and_the_frames() {
    let config = CtfConfig {
        time_limit_s: 1,
        ..CtfConfig::default()
    };
    let mut w = World::new(
        27,
        LinkConditions::ideal(Duration::from_millis(30)),
        1,
        config,
    );
    run_until_welcomed(&mut w);
    while w.seen[0].epochs.is_empty() {
        w.step();
    }
    // The new run's first snapshots are read: the estimate is of the new run's ticks.
    w.run(32);
    let (now, truth) = just_run(&w);
    let s = &w.sessions[0];
    assert!(truth < 64.0, "{truth}");
    let est = s.server_tick(now).unwrap();
    assert!((est - truth).abs() < 1.0, "estimate {est}, truth {truth}");
    assert!(s.interp_newest_tick().unwrap() < 64);
    let r = s.render_tick(now).unwrap();
    assert!(r < truth, "{r}");
    let me = NetId(s.welcome().unwrap().seat);
    assert!(s.entity_at(me, r).is_some());
}

#[test]
fn a_server_that_vanishes_is_a_timeout_within_the_tokens_timeout() {
    let mut w = World::new(
        29,
        LinkConditions::ideal(Duration::from_millis(20)),
        1,
        CtfConfig::default(),
    );
    run_until_welcomed(&mut w);
    w.run(64);
    let cut = w.t;
    w.net
        .set_link(server_addr(), client_addr(0), LinkConditions::dead());
    while w.seen[0].ended.is_none() && w.t < cut + 10 * 128 {
        w.step();
    }
    assert_eq!(
        w.seen[0].ended,
        Some(Ended::Transport(DisconnectReason::TimedOut))
    );
    // The token's timeout is 5 s: the last packet was in flight for 20 ms after the cut.
    let waited = PERIOD * (w.t - cut);
    assert!(
        waited <= Duration::from_secs(5) + Duration::from_millis(40),
        "{waited:?}"
    );
    assert!(waited >= Duration::from_secs(5), "{waited:?}");
    assert!(!w.sessions[0].is_connected());
}

#[test]
fn a_malformed_or_expired_token_is_an_error_at_create_time() {
    let schema = tickforge_ctf::schema();
    let now = Instant::now();
    let bytes = token(0).to_bytes();
    assert!(Session::from_token_bytes(&bytes, UNIX + 1, schema, Default::default(), now).is_ok());
    assert_eq!(
        Session::from_token_bytes(&bytes[..100], UNIX, schema, Default::default(), now).err(),
        Some(CreateError::Malformed(TokenError::Length))
    );
    let mut bad = bytes.clone();
    bad[0] ^= 1;
    assert_eq!(
        Session::from_token_bytes(&bad, UNIX, schema, Default::default(), now).err(),
        Some(CreateError::Malformed(TokenError::Version))
    );
    assert_eq!(
        Session::from_token_bytes(&bytes, UNIX + 60, schema, Default::default(), now).err(),
        Some(CreateError::Expired {
            expire_timestamp: UNIX + 60,
            unix_now: UNIX + 60
        })
    );
    let mut nowhere = token(0);
    nowhere.server_addresses.clear();
    assert_eq!(
        Session::try_new(nowhere, UNIX, schema, Default::default(), now).err(),
        Some(CreateError::NoServer)
    );
}

#[test]
fn compact_sessions_play_through_loss_duplication_and_reordering() {
    let conditions = LinkConditions {
        latency: Duration::from_millis(20),
        jitter: Duration::from_millis(5),
        loss_probability: 0.1,
        duplicate_probability: 0.05,
        reorder_probability: 0.1,
        reorder_delay: Duration::from_millis(15),
    };
    let mut w = World::new(31, conditions, 3, CtfConfig::default());
    for n in 0..3 {
        w.sessions[n] = Session::with_link_config(
            token(n),
            tickforge_ctf::schema(),
            SessionConfig::COMPACT,
            compact_link_config(),
            w.start,
        )
        .unwrap();
    }
    w.run(4 * 128);
    assert_played(&w, 4 * 128, 0.7);
    let bad = tickforge_proto::reliable::ReliableConfig {
        packet_history: 3,
        ..compact_link_config()
    };
    assert!(matches!(
        Session::with_link_config(
            token(0),
            tickforge_ctf::schema(),
            SessionConfig::COMPACT,
            bad,
            w.start
        ),
        Err(CreateError::LinkConfig(_))
    ));
}

#[test]
fn render_ticks_become_view_times_rounded_down_to_a_256th() {
    use tickforge_sim::{Tick, ViewTime};
    assert_eq!(
        crate::view_time(1200.5),
        ViewTime {
            tick: Tick(1200),
            frac: 128
        }
    );
    assert_eq!(crate::view_time(7.999).frac, 255);
    assert_eq!(crate::view_time(-3.0), ViewTime::at(Tick(0)));
    assert_eq!(crate::view_time(f64::NAN), ViewTime::at(Tick(0)));
    assert_eq!(crate::view_time(7.0), ViewTime::at(Tick(7)));
    assert_eq!(crate::view_time(1e12).tick, Tick(u32::MAX));
}
