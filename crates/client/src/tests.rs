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
use tickforge_server::{HostedMatch, Match};
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
            seen: (0..clients).map(|_| Seen::default()).collect(),
            scopes: Scopes::new(Instant::now),
            start,
            t: 0,
            frame: Vec::with_capacity(MAX_PACKET_BYTES),
            recv: vec![0; 2048],
            drop_first_payloads: 0,
            measure_from: u32::MAX,
            allocations: 0,
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
                            self.m.receive(now, seat, data).expect("an honest client");
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
        self.m.run_tick(now, &self.scopes);
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
            assert!(tickforge_ctf::Event::decode(bytes).is_some(), "{bytes:?}");
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
