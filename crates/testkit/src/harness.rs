//! [`Harness`]: one netcode [`Server`] and its [`Client`]s joined by a [`NetSim`], stepped
//! tick by tick on a [`VirtualClock`].
//!
//! The server listens at [`Harness::server_addr`]; client `n` has an address of its own
//! ([`Harness::client_addr`]) and a connect token minted for it when it is added. Every
//! [`Harness::step`] is one 128 Hz tick of the whole network:
//!
//! ```text
//! deliver every datagram due        → Server / Client::handle_datagram   (events logged)
//! run the timers                    → handle_timeout                     (disconnects logged)
//! write one packet per reliable link → Endpoint::write_packet → send_payload
//! send netcode's own packets        → poll_transmit (handshake, keep-alives, disconnects)
//! advance the clock one tick
//! ```
//!
//! Between steps a test sends payloads ([`Harness::send_to_server`],
//! [`Harness::send_to_client`]), closes a client, or changes a link; afterwards it reads
//! [`Harness::log`]. With [`HarnessConfig::reliable_links`] every connection also carries a
//! `reliable::Endpoint` on both sides ([`msg::link_config`]), made when that side sees the
//! connection open: the full stack a match runs on.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tickforge_proto::msg;
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::{
    Client, ClientEvent, Server, ServerConfig, ServerEvent, Transmit, KEY_BYTES, USER_DATA_BYTES,
};
use tickforge_proto::reliable::Endpoint;
use tickforge_proto::{ClientIndex, DisconnectReason};

use crate::{LinkConditions, NetSim, SimRng, VirtualClock};

/// One tick at 128 Hz (VALORANT's tick): 7.8125 ms.
pub const TICK: Duration = Duration::from_nanos(7_812_500);
/// The protocol id of every token and of the server.
pub const PROTOCOL_ID: u64 = 0x7469_636b_666f_7267;
/// Wall-clock seconds at the virtual clock's origin, as the server and the tokens see it.
pub const UNIX_START: u64 = 1_700_000_000;
/// The key the harness's backend seals tokens with; the server shares it.
const PRIVATE_KEY: [u8; KEY_BYTES] = [0x42; KEY_BYTES];

/// What a harness is made with.
#[derive(Clone, Copy, Debug)]
pub struct HarnessConfig {
    /// Seeds the network's impairments, the server's challenge key and every token.
    pub seed: u64,
    /// Conditions of every direction until [`Harness::set_link`] or
    /// [`Harness::sim_mut`] changes it.
    pub link: LinkConditions,
    /// The server's connection slots.
    pub max_clients: u16,
    /// Seconds of silence before either side ends a connection (written into each token).
    pub timeout_seconds: i32,
    /// Seconds a token stays valid after it is minted.
    pub expire_seconds: i64,
    /// Whether every connection carries a reliable [`Endpoint`] on both sides.
    pub reliable_links: bool,
}

impl Default for HarnessConfig {
    /// One seed, a 10 ms link that loses nothing, four slots, the 5 s timeout netcode's
    /// reference uses, 30 s tokens, raw payloads.
    fn default() -> Self {
        HarnessConfig {
            seed: 1,
            link: LinkConditions::ideal(Duration::from_millis(10)),
            max_clients: 4,
            timeout_seconds: 5,
            expire_seconds: 30,
            reliable_links: false,
        }
    }
}

/// Which end of a connection saw an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The server, about the connection of that client.
    Server,
    /// The client itself.
    Client,
}

/// What a state machine reported, owned, as the log keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed; both sides name the server slot.
    Connected(ClientIndex),
    /// A netcode payload (connections without a reliable link).
    Payload(Vec<u8>),
    /// A reliable message, handed out in order (connections with a link).
    Reliable(Vec<u8>),
    /// An unreliable message and its tag (connections with a link).
    Unreliable {
        /// The sender's tag (a tick, an input sequence).
        tag: u32,
        /// The message.
        bytes: Vec<u8>,
    },
    /// The connection ended, or never began.
    Disconnected(DisconnectReason),
}

/// One line of [`Harness::log`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    /// The tick it happened on (the steps taken before it).
    pub tick: u32,
    /// The harness's number of the client concerned.
    pub client: usize,
    /// Which end reported it.
    pub side: Side,
    /// What happened.
    pub event: Event,
}

/// One side's reliable link on a connection.
pub struct Link {
    /// The endpoint: queue events with `send_reliable`, poll acked tags here.
    pub endpoint: Endpoint,
    /// The unreliable message `(tag, bytes)` for this side's next packet; taken by the
    /// next [`Harness::step`].
    pub next_unreliable: Option<(u32, Vec<u8>)>,
}

impl Link {
    fn new(now: Instant) -> Self {
        Link {
            endpoint: Endpoint::new(msg::link_config(), now),
            next_unreliable: None,
        }
    }

    /// Reads one payload from the peer; returns its unreliable message and every reliable
    /// message it completed, in order.
    fn read(&mut self, now: Instant, payload: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        match self.endpoint.read_packet(now, payload) {
            Ok(Some((tag, bytes))) => events.push(Event::Unreliable {
                tag,
                bytes: bytes.to_vec(),
            }),
            Ok(None) => {}
            // Both ends run this code: a refused packet is a bug, not an attack.
            Err(e) => panic!("a reliable link refused its peer's packet: {e}"),
        }
        let mut message = Vec::new();
        while self.endpoint.poll_reliable(&mut message) {
            events.push(Event::Reliable(message.clone()));
        }
        events
    }

    /// Writes this tick's packet into `out`.
    fn write(&mut self, now: Instant, out: &mut Vec<u8>) {
        let unreliable = self.next_unreliable.take();
        let unreliable = unreliable.as_ref().map(|(tag, bytes)| (*tag, &bytes[..]));
        self.endpoint.write_packet(now, unreliable, out);
    }
}

/// A client as the harness holds it.
struct SimClient {
    addr: SocketAddr,
    client_id: u64,
    netcode: Client,
    link: Option<Link>,
}

/// A server slot as the harness holds it: whose connection it is, and its link.
struct Seat {
    client: usize,
    link: Option<Link>,
}

/// One netcode server and `n` clients on a seeded simulated network, on virtual time.
///
/// It holds the server to what its events say as it goes: a connection opens for the
/// client id its token names, in a free slot, and the server's count of connected clients
/// is always the connections its events opened and have not closed.
pub struct Harness {
    config: HarnessConfig,
    clock: VirtualClock,
    tick: u32,
    sim: NetSim,
    rng: SimRng,
    server: Server,
    seats: Vec<Option<Seat>>,
    clients: Vec<SimClient>,
    log: Vec<Logged>,
    packet: Vec<u8>,
    datagram: Vec<u8>,
}

impl Harness {
    /// A server with `config.max_clients` free slots and no clients yet.
    pub fn new(config: HarnessConfig) -> Self {
        let clock = VirtualClock::default();
        let mut rng = SimRng::new(config.seed);
        let challenge_key = random_bytes(&mut rng);
        let server = Server::new(
            ServerConfig {
                protocol_id: PROTOCOL_ID,
                private_key: PRIVATE_KEY,
                public_addresses: vec![Harness::server_addr()],
                max_clients: config.max_clients,
                // The server crate's default; each client has an IP of its own.
                requests_per_second_per_ip: 20,
            },
            clock.now(),
            UNIX_START,
            challenge_key,
        );
        Harness {
            sim: NetSim::new(config.seed, config.link),
            seats: (0..config.max_clients).map(|_| None).collect(),
            config,
            clock,
            tick: 0,
            rng,
            server,
            clients: Vec::new(),
            log: Vec::new(),
            packet: Vec::new(),
            datagram: Vec::new(),
        }
    }

    /// Where the server listens.
    pub fn server_addr() -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], 40_000))
    }

    /// Where client `n` sends from: an IP of its own, so the server's per-IP request
    /// limit applies to each alone.
    pub fn client_addr(n: usize) -> SocketAddr {
        let n = u16::try_from(n).expect("fewer than 65536 clients");
        let [hi, lo] = n.to_be_bytes();
        SocketAddr::from(([10, 1, hi, lo], 50_000))
    }

    /// Adds client `n` and starts connecting it now with a token of its own (id `n + 1`,
    /// user data filled with `n`'s low byte). Returns `n`.
    pub fn add_client(&mut self) -> usize {
        let n = self.clients.len();
        let client_id = n as u64 + 1;
        let netcode = Client::new(self.mint(n, client_id), self.clock.now());
        self.clients.push(SimClient {
            addr: Harness::client_addr(n),
            client_id,
            netcode,
            link: None,
        });
        n
    }

    /// Restarts client `n` from the same address with a fresh token for the same client
    /// id, as a game client restarting on a fixed port would: its old session is dropped
    /// without a word to the server, and it starts connecting now.
    pub fn restart_client(&mut self, n: usize) {
        let token = self.mint(n, self.clients[n].client_id);
        let c = &mut self.clients[n];
        c.netcode = Client::new(token, self.clock.now());
        c.link = None;
    }

    /// Mints a token for client `n` and hands it over as the 2048 bytes a matchmaker
    /// sends.
    fn mint(&mut self, n: usize, client_id: u64) -> ConnectToken {
        let params = TokenParams {
            protocol_id: PROTOCOL_ID,
            create_timestamp: UNIX_START + self.clock.elapsed().as_secs(),
            expire_seconds: self.config.expire_seconds,
            timeout_seconds: self.config.timeout_seconds,
            server_addresses: vec![Harness::server_addr()],
        };
        let user_data = [n as u8; USER_DATA_BYTES];
        let random = random_bytes(&mut self.rng);
        let token = ConnectToken::mint(&params, client_id, &user_data, &PRIVATE_KEY, &random);
        ConnectToken::from_bytes(&token.to_bytes()).expect("a minted token parses")
    }

    /// Runs one tick: delivers what is due, runs timers, sends what both sides have to
    /// send, and advances the clock by [`TICK`].
    pub fn step(&mut self) {
        let now = self.clock.now();
        while let Some(mut d) = self.sim.poll_due(now) {
            if d.to == Harness::server_addr() {
                self.server_receive(now, d.from, &mut d.bytes);
            } else if let Some(n) = self.client_at(d.to) {
                self.client_receive(now, n, d.from, &mut d.bytes);
            }
        }

        self.server.handle_timeout(now);
        while let Some((slot, reason)) = self.server.poll_disconnect() {
            let seat = self.seats[slot.as_usize()].take().expect("a seated client");
            self.record(Side::Server, seat.client, Event::Disconnected(reason));
        }
        for n in 0..self.clients.len() {
            if let Some(reason) = self.clients[n].netcode.handle_timeout(now) {
                self.clients[n].link = None;
                self.record(Side::Client, n, Event::Disconnected(reason));
            }
        }

        self.write_links(now);

        while let Some(to) = self.server.poll_transmit(&mut self.datagram) {
            self.sim
                .send(now, Harness::server_addr(), to, &self.datagram);
        }
        for c in &mut self.clients {
            while let Some(to) = c.netcode.poll_transmit(now, &mut self.datagram) {
                self.sim.send(now, c.addr, to, &self.datagram);
            }
        }

        let seated = self.seats.iter().flatten().count();
        assert_eq!(
            self.server.connected(),
            seated,
            "tick {}: the server holds connections its events did not open",
            self.tick
        );
        self.clock.advance(TICK);
        self.tick += 1;
    }

    /// Runs `ticks` steps.
    pub fn run(&mut self, ticks: u32) {
        for _ in 0..ticks {
            self.step();
        }
    }

    /// Steps until `done` holds, at most `max_ticks` times; returns the steps taken, or
    /// `None` if `done` never held.
    pub fn run_until(
        &mut self,
        max_ticks: u32,
        mut done: impl FnMut(&Harness) -> bool,
    ) -> Option<u32> {
        for taken in 0..=max_ticks {
            if done(self) {
                return Some(taken);
            }
            if taken < max_ticks {
                self.step();
            }
        }
        None
    }

    /// Seals `payload` on client `n` and sends it now; false when `n` is not connected.
    pub fn send_to_server(&mut self, n: usize, payload: &[u8]) -> bool {
        let now = self.clock.now();
        let c = &mut self.clients[n];
        let Some(to) = c.netcode.send_payload(now, payload, &mut self.datagram) else {
            return false;
        };
        self.sim.send(now, c.addr, to, &self.datagram);
        true
    }

    /// Seals `payload` on the server for client `n` and sends it now; false when the server
    /// holds no connection for `n`.
    pub fn send_to_client(&mut self, n: usize, payload: &[u8]) -> bool {
        let Some(slot) = self.slot_of(n) else {
            return false;
        };
        let now = self.clock.now();
        match self
            .server
            .send_payload(now, slot, payload, &mut self.datagram)
        {
            Some(tx) => {
                send_transmit(&mut self.sim, now, tx, &self.datagram);
                true
            }
            None => false,
        }
    }

    /// Client `n` leaves: its disconnect packets go out on the next step.
    pub fn disconnect(&mut self, n: usize) {
        self.clients[n].netcode.disconnect();
        self.clients[n].link = None;
    }

    /// Sets the conditions of both directions between client `n` and the server, from
    /// the next datagram sent. Datagrams already in flight still arrive.
    pub fn set_link(&mut self, n: usize, conditions: LinkConditions) {
        let (client, server) = (self.clients[n].addr, Harness::server_addr());
        self.sim.set_link(client, server, conditions);
        self.sim.set_link(server, client, conditions);
    }

    /// The reliable link of client `n` on `side`, once that side has seen it connect.
    pub fn link(&mut self, side: Side, n: usize) -> Option<&mut Link> {
        match side {
            Side::Client => self.clients[n].link.as_mut(),
            Side::Server => self
                .seats
                .iter_mut()
                .flatten()
                .find(|s| s.client == n)?
                .link
                .as_mut(),
        }
    }

    /// The server slot holding client `n`'s connection, as the server's events tell it.
    pub fn slot_of(&self, n: usize) -> Option<ClientIndex> {
        let i = self
            .seats
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.client == n))?;
        Some(ClientIndex(i as u16))
    }

    /// Every event so far, in the order it happened.
    pub fn log(&self) -> &[Logged] {
        &self.log
    }

    /// The events of client `n` on `side`, in order, with their ticks.
    pub fn events(&self, side: Side, n: usize) -> impl Iterator<Item = (u32, &Event)> + '_ {
        self.log
            .iter()
            .filter(move |l| l.side == side && l.client == n)
            .map(|l| (l.tick, &l.event))
    }

    /// The server.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Client `n`'s netcode state machine.
    pub fn client(&self, n: usize) -> &Client {
        &self.clients[n].netcode
    }

    /// Clients added so far.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// The simulated network.
    pub fn sim(&self) -> &NetSim {
        &self.sim
    }

    /// The simulated network, to change one direction of a link
    /// ([`NetSim::set_link`] with [`Harness::server_addr`] and [`Harness::client_addr`]).
    pub fn sim_mut(&mut self) -> &mut NetSim {
        &mut self.sim
    }

    /// Steps taken so far: the tick the next step runs.
    pub fn tick(&self) -> u32 {
        self.tick
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    fn client_at(&self, addr: SocketAddr) -> Option<usize> {
        self.clients.iter().position(|c| c.addr == addr)
    }

    fn record(&mut self, side: Side, client: usize, event: Event) {
        self.log.push(Logged {
            tick: self.tick,
            client,
            side,
            event,
        });
    }

    fn server_receive(&mut self, now: Instant, from: SocketAddr, data: &mut [u8]) {
        let Some(event) = self.server.handle_datagram(now, from, data) else {
            return;
        };
        match event {
            ServerEvent::Connected {
                client: slot,
                client_id,
                ..
            } => {
                let n = self
                    .client_at(from)
                    .expect("only harness clients hold tokens");
                assert_eq!(
                    client_id, self.clients[n].client_id,
                    "{from} connected as another client"
                );
                let seat = &mut self.seats[slot.as_usize()];
                assert!(seat.is_none(), "slot {slot:?} reused before it was freed");
                let link = self.config.reliable_links.then(|| Link::new(now));
                *seat = Some(Seat { client: n, link });
                self.record(Side::Server, n, Event::Connected(slot));
            }
            ServerEvent::Payload { client: slot, data } => {
                let seat = self.seats[slot.as_usize()]
                    .as_mut()
                    .expect("a seated client");
                let events = match &mut seat.link {
                    Some(link) => link.read(now, data),
                    None => vec![Event::Payload(data.to_vec())],
                };
                let n = seat.client;
                for event in events {
                    self.record(Side::Server, n, event);
                }
            }
            ServerEvent::Disconnected {
                client: slot,
                reason,
            } => {
                let seat = self.seats[slot.as_usize()].take().expect("a seated client");
                self.record(Side::Server, seat.client, Event::Disconnected(reason));
            }
        }
    }

    fn client_receive(&mut self, now: Instant, n: usize, from: SocketAddr, data: &mut [u8]) {
        let c = &mut self.clients[n];
        let Some(event) = c.netcode.handle_datagram(now, from, data) else {
            return;
        };
        let events = match event {
            ClientEvent::Connected(slot) => {
                c.link = self.config.reliable_links.then(|| Link::new(now));
                vec![Event::Connected(slot)]
            }
            ClientEvent::Payload(payload) => match &mut c.link {
                Some(link) => link.read(now, payload),
                None => vec![Event::Payload(payload.to_vec())],
            },
            ClientEvent::Disconnected(reason) => {
                c.link = None;
                vec![Event::Disconnected(reason)]
            }
        };
        for event in events {
            self.record(Side::Client, n, event);
        }
    }

    /// One packet per tick on every link, each way, as a match sends them.
    fn write_links(&mut self, now: Instant) {
        for (i, seat) in self.seats.iter_mut().enumerate() {
            let Some(link) = seat.as_mut().and_then(|s| s.link.as_mut()) else {
                continue;
            };
            link.write(now, &mut self.packet);
            let slot = ClientIndex(i as u16);
            if let Some(tx) = self
                .server
                .send_payload(now, slot, &self.packet, &mut self.datagram)
            {
                send_transmit(&mut self.sim, now, tx, &self.datagram);
            }
        }
        for c in &mut self.clients {
            let Some(link) = &mut c.link else { continue };
            link.write(now, &mut self.packet);
            if let Some(to) = c
                .netcode
                .send_payload(now, &self.packet, &mut self.datagram)
            {
                self.sim.send(now, c.addr, to, &self.datagram);
            }
        }
    }
}

/// Sends what [`Server::send_payload`] wrote: the keep-alive in front, if any, then the
/// payload, as two datagrams.
fn send_transmit(sim: &mut NetSim, now: Instant, tx: Transmit, datagram: &[u8]) {
    let (keepalive, payload) = datagram.split_at(tx.keepalive_bytes);
    if !keepalive.is_empty() {
        sim.send(now, Harness::server_addr(), tx.to, keepalive);
    }
    sim.send(now, Harness::server_addr(), tx.to, payload);
}

/// `N` bytes from the seeded generator: keys and nonces that are the same on every run.
fn random_bytes<const N: usize>(rng: &mut SimRng) -> [u8; N] {
    std::array::from_fn(|_| rng.next_u64() as u8)
}
