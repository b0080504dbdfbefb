//! The reference shooter at ten players on virtual time: a `Match<Shooter>` behind a
//! netcode server, ten [`Session`]s, an ideal simulated network. Records every datagram
//! delivered to client 0, with the tick it arrived at, so that a fresh session can be fed
//! the same bytes again (the benchmark's input). Shared by `tests/memory.rs` and
//! `benches/session.rs`.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickforge_api::{MatchSetup, Seat};
use tickforge_client::{Session, SessionConfig};
use tickforge_game::UserCmd;
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::{self, ServerEvent};
use tickforge_proto::user_data::{UserData, ANY, ANY_SEAT};
use tickforge_proto::MatchId;
use tickforge_server::{HostedMatch, Match};
use tickforge_shooter::{Shooter, ShooterConfig};
use tickforge_sim::{Tick, ViewTime};
use tickforge_telemetry::Scopes;
use tickforge_testkit::{LinkConditions, NetSim};

pub const PROTOCOL: u64 = 0x7469_636b;
pub const KEY: [u8; 32] = [7; 32];
pub const UNIX: u64 = 1_700_000_000;
pub const PERIOD: Duration = Duration::from_nanos(1_000_000_000 / 128);
pub const PLAYERS: usize = 10;

pub fn server_addr() -> SocketAddr {
    "10.0.0.1:40000".parse().unwrap()
}

pub fn client_addr(n: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 1, n as u8 + 1], 50000))
}

pub fn token(n: usize) -> ConnectToken {
    let params = TokenParams {
        protocol_id: PROTOCOL,
        create_timestamp: UNIX,
        expire_seconds: 600,
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

pub fn new_session(n: usize, start: Instant) -> Session {
    Session::new(
        token(n),
        tickforge_shooter::schema(),
        SessionConfig::default(),
        start,
    )
}

pub struct ShooterWorld {
    pub net: NetSim,
    pub server: netcode::Server,
    pub m: Match<Shooter>,
    seats: Vec<Option<Seat>>,
    pub sessions: Vec<Session>,
    pub start: Instant,
    pub t: u32,
    frame: Vec<u8>,
    buf: Vec<u8>,
    /// Datagrams delivered to client 0: the tick they arrived at, their bytes.
    pub recorded: Vec<(u32, Vec<u8>)>,
    pub record: bool,
    /// Snapshot events of client 0.
    pub snapshots: u64,
}

impl ShooterWorld {
    pub fn new(latency: Duration) -> ShooterWorld {
        let start = Instant::now();
        let server = netcode::Server::new(
            netcode::ServerConfig {
                protocol_id: PROTOCOL,
                private_key: KEY,
                public_addresses: vec![server_addr()],
                max_clients: PLAYERS as u16,
                requests_per_second_per_ip: 10,
            },
            start,
            UNIX,
            [9; 32],
        );
        let setup = MatchSetup {
            seats: PLAYERS as u16,
            tick_hz: 128,
            record: false,
            stagger: 0,
        };
        let m = Match::new(MatchId(1), Arc::new(ShooterConfig::default()), setup, start);
        ShooterWorld {
            net: NetSim::new(1, LinkConditions::ideal(latency)),
            server,
            m,
            seats: vec![None; PLAYERS],
            sessions: (0..PLAYERS).map(|n| new_session(n, start)).collect(),
            start,
            t: 0,
            frame: Vec::with_capacity(2048),
            buf: Vec::with_capacity(2048),
            recorded: Vec::new(),
            record: true,
            snapshots: 0,
        }
    }

    pub fn now(&self) -> Instant {
        self.start + PERIOD * self.t
    }

    /// One tick: deliveries, the clients' commands, the server's frame.
    pub fn step(&mut self) {
        self.step_measuring(usize::MAX, &mut |f| f());
    }

    /// As [`ShooterWorld::step`], with every call to session `measured` run inside
    /// `measure`.
    pub fn step_measuring(&mut self, measured: usize, measure: &mut dyn FnMut(&mut dyn FnMut())) {
        let now = self.now();
        while let Some(d) = self.net.poll_due(now) {
            let mut bytes = d.bytes;
            if d.to == server_addr() {
                match self.server.handle_datagram(now, d.from, &mut bytes) {
                    Some(ServerEvent::Connected { client, .. }) => {
                        self.seats[client.as_usize()] = self.m.seat(now, client, None);
                    }
                    Some(ServerEvent::Payload { client, data }) => {
                        if let Some(seat) = self.seats[client.as_usize()] {
                            let _ = self.m.receive(now, seat, data);
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
            let n = (0..PLAYERS)
                .find(|&n| client_addr(n) == d.to)
                .expect("a client");
            if n == 0 && self.record {
                self.recorded.push((self.t, bytes.clone()));
            }
            let s = &mut self.sessions[n];
            let snapshots = &mut self.snapshots;
            let mut call = || {
                s.handle_datagram(now, d.from, &mut bytes);
                while let Some(e) = s.poll_event() {
                    if n == 0 && matches!(e, tickforge_client::SessionEvent::Snapshot { .. }) {
                        *snapshots += 1;
                    }
                }
            };
            if n == measured {
                measure(&mut call);
            } else {
                call();
            }
        }
        for n in 0..PLAYERS {
            let s = &mut self.sessions[n];
            let mut call = || {
                s.handle_timeout(now);
                while s.poll_event().is_some() {}
            };
            if n == measured {
                measure(&mut call);
            } else {
                call();
            }
            // Players run in circles, each its own way, and fire now and then.
            let cmd = UserCmd {
                forward: 100,
                side: if n % 2 == 0 { 40 } else { -40 },
                buttons: u8::from(self.t % 64 == n as u32),
                yaw: (self.t.wrapping_mul(97 + n as u32 * 13) & 0xffff) as u16,
                pitch: 0,
            };
            let view = ViewTime::behind(Tick(s.newest_tick()), 2.0);
            let mut call = || {
                s.send_input(now, view, &cmd.to_bytes());
            };
            if n == measured {
                measure(&mut call);
            } else {
                call();
            }
            loop {
                let (mut to, buf) = (None, &mut self.buf);
                let mut call = || to = s.poll_transmit(now, buf);
                if n == measured {
                    measure(&mut call);
                } else {
                    call();
                }
                let Some(to) = to else { break };
                self.net.send(now, client_addr(n), to, &self.buf);
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
        let scopes = Scopes::new(Instant::now);
        self.m.run_tick(now, &scopes);
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

    pub fn run(&mut self, ticks: u32) {
        for _ in 0..ticks {
            self.step();
        }
    }
}

/// Feeds `datagrams` (recorded by [`ShooterWorld`]) to `session` as if they arrived at
/// their ticks after `start`; returns the snapshot events.
pub fn replay(
    session: &mut Session,
    start: Instant,
    datagrams: &[(u32, Vec<u8>)],
    scratch: &mut Vec<u8>,
) -> u64 {
    let mut snapshots = 0;
    for (t, bytes) in datagrams {
        let now = start + PERIOD * *t;
        scratch.clear();
        scratch.extend_from_slice(bytes);
        session.handle_datagram(now, server_addr(), scratch);
        while let Some(e) = session.poll_event() {
            snapshots += u64::from(matches!(e, tickforge_client::SessionEvent::Snapshot { .. }));
        }
    }
    snapshots
}
