//! Connections over UDP: a plain handshake, keep-alives, timeouts and payload framing.
//!
//! This is the walking skeleton's transport. It authenticates nothing and encrypts
//! nothing; netcode.io 1.02 replaces it behind the same shape ([`Server`] and [`Client`]
//! with `handle_datagram`, `handle_timeout`, `poll_transmit`, `send_payload`).
//!
//! ```text
//! every packet: kind u8 | body (little-endian)
//!   1 ConnectRequest  protocol_id u64 | match_id u32 | salt u64 | zeros to 64 bytes
//!   2 ConnectAccept   salt u64 | client_index u16
//!   3 ConnectDenied   salt u64 | reason u8
//!   4 KeepAlive       salt u64
//!   5 Payload         salt u64 | payload (1..=MAX_PAYLOAD_BYTES)
//!   6 Disconnect      salt u64 | reason u8
//! ```
//!
//! The request is padded to [`REQUEST_BYTES`], more than any answer to it, so the server
//! never sends an address more bytes than it received from it. The salt, picked at random
//! by the client, tells a reconnecting client from a stale packet of its previous session.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::wire::{Reader, Truncated, Writer};
pub use crate::DisconnectReason;
use crate::{ClientIndex, MatchId, MAX_PACKET_BYTES};

/// Exact size of a connect request, padding included.
pub const REQUEST_BYTES: usize = 64;
/// Bytes of a payload packet before its payload: kind and salt.
pub const PAYLOAD_HEADER_BYTES: usize = 1 + 8;
/// Largest payload one packet carries.
pub const MAX_PAYLOAD_BYTES: usize = MAX_PACKET_BYTES - PAYLOAD_HEADER_BYTES;
/// Copies of a disconnect packet sent, so that one lost datagram does not leave the peer
/// waiting for a timeout (netcode.io sends 10).
pub const REDUNDANT_DISCONNECTS: u8 = 3;
/// Control packets the server holds for sending before it drops new ones.
const CONTROL_QUEUE_CAP: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    ConnectRequest = 1,
    ConnectAccept = 2,
    ConnectDenied = 3,
    KeepAlive = 4,
    Payload = 5,
    Disconnect = 6,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::ConnectRequest,
            2 => Kind::ConnectAccept,
            3 => Kind::ConnectDenied,
            4 => Kind::KeepAlive,
            5 => Kind::Payload,
            6 => Kind::Disconnect,
            _ => return None,
        })
    }
}

fn reason_to_u8(reason: DisconnectReason) -> u8 {
    {
        match reason {
            DisconnectReason::TimedOut => 1,
            DisconnectReason::ConnectTimedOut => 2,
            DisconnectReason::ServerFull => 3,
            DisconnectReason::Refused => 4,
            DisconnectReason::ServerClosed => 5,
            DisconnectReason::ClientClosed => 6,
            DisconnectReason::Replaced => 7,
            _ => 5,
        }
    }
}

fn reason_from_u8(b: u8) -> DisconnectReason {
    {
        match b {
            1 => DisconnectReason::TimedOut,
            2 => DisconnectReason::ConnectTimedOut,
            3 => DisconnectReason::ServerFull,
            4 => DisconnectReason::Refused,
            6 => DisconnectReason::ClientClosed,
            7 => DisconnectReason::Replaced,
            _ => DisconnectReason::ServerClosed,
        }
    }
}

/// Timing and identity shared by both sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransportConfig {
    /// Identifies the game and its version; requests with another id are ignored.
    pub protocol_id: u64,
    /// A connection with nothing heard for this long is closed.
    pub timeout: Duration,
    /// Send a keep-alive when nothing else was sent for this long (netcode.io: 10 Hz).
    pub keepalive_every: Duration,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            protocol_id: 0x7469_636b_666f_7267, // "tickforg"
            timeout: Duration::from_secs(5),    // netcode.io's default token timeout
            keepalive_every: Duration::from_millis(100),
        }
    }
}

/// Datagrams the server dropped, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Empty datagrams, or shorter than their kind needs.
    pub short: u64,
    /// First byte names no packet kind the server accepts.
    pub unknown_kind: u64,
    /// A connect request of any size other than [`REQUEST_BYTES`].
    pub bad_request_size: u64,
    /// A connect request for another protocol id.
    pub wrong_protocol: u64,
    /// A packet from an address with no connection.
    pub unknown_source: u64,
    /// A packet whose salt is not its connection's (stale or forged).
    pub bad_salt: u64,
    /// A payload larger than [`MAX_PAYLOAD_BYTES`] or empty.
    pub bad_payload_size: u64,
    /// Control answers not queued because the queue was full.
    pub control_queue_full: u64,
}

impl ServerStats {
    /// Every counter with its report name.
    pub fn dropped(&self) -> [(&'static str, u64); 8] {
        [
            ("short", self.short),
            ("unknown_kind", self.unknown_kind),
            ("bad_request_size", self.bad_request_size),
            ("wrong_protocol", self.wrong_protocol),
            ("unknown_source", self.unknown_source),
            ("bad_salt", self.bad_salt),
            ("bad_payload_size", self.bad_payload_size),
            ("control_queue_full", self.control_queue_full),
        ]
    }
}

/// What the server learnt from a datagram or a timeout.
#[derive(Debug, PartialEq, Eq)]
pub enum ServerEvent<'a> {
    /// A client connected and asked for a match; the caller may refuse it with
    /// [`Server::disconnect`].
    Connected {
        /// Its slot.
        client: ClientIndex,
        /// The match it asked for.
        match_id: MatchId,
    },
    /// A payload from a connected client.
    Payload {
        /// Who sent it.
        client: ClientIndex,
        /// The bytes, borrowed from the datagram.
        data: &'a [u8],
    },
    /// A connection ended.
    Disconnected {
        /// Its former slot.
        client: ClientIndex,
        /// Why.
        reason: DisconnectReason,
    },
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    addr: SocketAddr,
    salt: u64,
    last_recv: Instant,
    last_send: Instant,
}

#[derive(Clone, Copy, Debug)]
enum Control {
    Accept { salt: u64, client: ClientIndex },
    Deny { salt: u64, reason: DisconnectReason },
    KeepAlive { salt: u64 },
    Disconnect { salt: u64, reason: DisconnectReason },
}

/// Server side of the transport for one socket. Performs no I/O and reads no clock.
///
/// Feed datagrams to [`Server::handle_datagram`], advance time with
/// [`Server::handle_timeout`] (which may end connections: drain them with
/// [`Server::poll_disconnect`]), and drain control packets with [`Server::poll_transmit`].
pub struct Server {
    config: TransportConfig,
    slots: Vec<Option<Slot>>,
    free: Vec<u16>,
    by_addr: HashMap<SocketAddr, ClientIndex>,
    control: VecDeque<(SocketAddr, Control)>,
    ended: VecDeque<(ClientIndex, DisconnectReason)>,
    stats: ServerStats,
}

impl Server {
    /// A server with room for `max_clients` connections, all memory reserved up front.
    pub fn new(config: TransportConfig, max_clients: u16) -> Self {
        Server {
            config,
            slots: vec![None; usize::from(max_clients)],
            free: (0..max_clients).rev().collect(),
            by_addr: HashMap::with_capacity(usize::from(max_clients)),
            control: VecDeque::with_capacity(CONTROL_QUEUE_CAP),
            ended: VecDeque::with_capacity(usize::from(max_clients)),
            stats: ServerStats::default(),
        }
    }

    /// Dropped-datagram counters.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Connected clients.
    pub fn connected(&self) -> usize {
        self.by_addr.len()
    }

    /// The address of a connected client.
    pub fn addr_of(&self, client: ClientIndex) -> Option<SocketAddr> {
        self.slots.get(client.as_usize())?.map(|s| s.addr)
    }

    /// Handles one datagram from `from`. Malformed datagrams are dropped and counted.
    pub fn handle_datagram<'a>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &'a [u8],
    ) -> Option<ServerEvent<'a>> {
        let Some((&kind, body)) = data.split_first() else {
            self.stats.short += 1;
            return None;
        };
        let Some(kind) = Kind::from_u8(kind) else {
            self.stats.unknown_kind += 1;
            return None;
        };
        if kind == Kind::ConnectRequest {
            return self.handle_request(now, from, data);
        }
        let Some(&client) = self.by_addr.get(&from) else {
            self.stats.unknown_source += 1;
            return None;
        };
        let mut r = Reader::new(body);
        let Ok(salt) = r.u64() else {
            self.stats.short += 1;
            return None;
        };
        let slot = self.slots[client.as_usize()]
            .as_mut()
            .expect("by_addr names live slots");
        if salt != slot.salt {
            self.stats.bad_salt += 1;
            return None;
        }
        match kind {
            Kind::KeepAlive => {
                slot.last_recv = now;
                None
            }
            Kind::Payload => {
                let data = r.rest();
                if data.is_empty() || data.len() > MAX_PAYLOAD_BYTES {
                    self.stats.bad_payload_size += 1;
                    return None;
                }
                slot.last_recv = now;
                Some(ServerEvent::Payload { client, data })
            }
            Kind::Disconnect => {
                self.free_slot(client);
                Some(ServerEvent::Disconnected {
                    client,
                    reason: DisconnectReason::ClientClosed,
                })
            }
            // Server-to-client kinds never arrive at a server.
            Kind::ConnectAccept | Kind::ConnectDenied | Kind::ConnectRequest => {
                self.stats.unknown_kind += 1;
                None
            }
        }
    }

    fn handle_request<'a>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &[u8],
    ) -> Option<ServerEvent<'a>> {
        if data.len() != REQUEST_BYTES {
            self.stats.bad_request_size += 1;
            return None;
        }
        let mut r = Reader::new(&data[1..]);
        let (protocol_id, match_id, salt) = match read_request(&mut r) {
            Ok(v) => v,
            Err(Truncated) => {
                self.stats.short += 1;
                return None;
            }
        };
        if protocol_id != self.config.protocol_id {
            self.stats.wrong_protocol += 1;
            return None;
        }
        if let Some(&client) = self.by_addr.get(&from) {
            let slot = self.slots[client.as_usize()]
                .as_mut()
                .expect("by_addr names live slots");
            if slot.salt == salt {
                // A resent request: the accept was lost. Answer again, change nothing.
                slot.last_recv = now;
                self.queue(from, Control::Accept { salt, client });
                return None;
            }
            // A new session from the same address replaces the old one.
            self.free_slot(client);
            self.ended.push_back((client, DisconnectReason::Replaced));
        }
        let Some(index) = self.free.pop() else {
            self.queue(
                from,
                Control::Deny {
                    salt,
                    reason: DisconnectReason::ServerFull,
                },
            );
            return None;
        };
        let client = ClientIndex(index);
        self.slots[client.as_usize()] = Some(Slot {
            addr: from,
            salt,
            last_recv: now,
            last_send: now,
        });
        self.by_addr.insert(from, client);
        self.queue(from, Control::Accept { salt, client });
        Some(ServerEvent::Connected { client, match_id })
    }

    /// Times out silent connections and schedules keep-alives. Call once per wake-up.
    pub fn handle_timeout(&mut self, now: Instant) {
        for i in 0..self.slots.len() {
            let Some(slot) = self.slots[i] else { continue };
            let client = ClientIndex(i as u16);
            if now.saturating_duration_since(slot.last_recv) >= self.config.timeout {
                self.free_slot(client);
                self.ended.push_back((client, DisconnectReason::TimedOut));
            } else if now.saturating_duration_since(slot.last_send) >= self.config.keepalive_every {
                self.queue(slot.addr, Control::KeepAlive { salt: slot.salt });
                if let Some(s) = self.slots[i].as_mut() {
                    s.last_send = now;
                }
            }
        }
    }

    /// Next connection ended by a timeout or a replacement, if any.
    pub fn poll_disconnect(&mut self) -> Option<(ClientIndex, DisconnectReason)> {
        self.ended.pop_front()
    }

    /// Ends a connection, telling the client why with redundant disconnect packets.
    pub fn disconnect(&mut self, client: ClientIndex, reason: DisconnectReason) {
        let Some(slot) = self.slots.get(client.as_usize()).copied().flatten() else {
            return;
        };
        for _ in 0..REDUNDANT_DISCONNECTS {
            self.queue(
                slot.addr,
                Control::Disconnect {
                    salt: slot.salt,
                    reason,
                },
            );
        }
        self.free_slot(client);
    }

    /// Writes the next control packet into `buf` (cleared first) and returns where it goes.
    #[must_use]
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> Option<SocketAddr> {
        let (addr, control) = self.control.pop_front()?;
        buf.clear();
        let mut w = Writer::new(buf);
        match control {
            Control::Accept { salt, client } => {
                w.u8(Kind::ConnectAccept as u8);
                w.u64(salt);
                w.u16(client.0);
            }
            Control::Deny { salt, reason } => {
                w.u8(Kind::ConnectDenied as u8);
                w.u64(salt);
                w.u8(reason_to_u8(reason));
            }
            Control::KeepAlive { salt } => {
                w.u8(Kind::KeepAlive as u8);
                w.u64(salt);
            }
            Control::Disconnect { salt, reason } => {
                w.u8(Kind::Disconnect as u8);
                w.u64(salt);
                w.u8(reason_to_u8(reason));
            }
        }
        Some(addr)
    }

    /// Frames `payload` for `client` into `out` (cleared first) and returns where it goes;
    /// `None` when the client is not connected or the payload does not fit one packet.
    pub fn send_payload(
        &mut self,
        now: Instant,
        client: ClientIndex,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Option<SocketAddr> {
        debug_assert!(
            payload.len() <= MAX_PAYLOAD_BYTES,
            "payload over one packet"
        );
        if payload.is_empty() || payload.len() > MAX_PAYLOAD_BYTES {
            return None;
        }
        let slot = self.slots.get_mut(client.as_usize())?.as_mut()?;
        slot.last_send = now;
        out.clear();
        let mut w = Writer::new(out);
        w.u8(Kind::Payload as u8);
        w.u64(slot.salt);
        w.bytes(payload);
        Some(slot.addr)
    }

    fn queue(&mut self, addr: SocketAddr, control: Control) {
        if self.control.len() >= CONTROL_QUEUE_CAP {
            self.stats.control_queue_full += 1;
            return;
        }
        self.control.push_back((addr, control));
    }

    fn free_slot(&mut self, client: ClientIndex) {
        if let Some(slot) = self.slots[client.as_usize()].take() {
            self.by_addr.remove(&slot.addr);
            self.free.push(client.0);
        }
    }
}

fn read_request(r: &mut Reader<'_>) -> Result<(u64, MatchId, u64), Truncated> {
    Ok((r.u64()?, MatchId(r.u32()?), r.u64()?))
}

/// Where a client is in its connection's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientState {
    /// Sending connect requests until the server answers.
    SendingRequest,
    /// Connected, with this slot on the server.
    Connected(ClientIndex),
    /// Not connected, and why.
    Disconnected(DisconnectReason),
}

/// What the client learnt from a datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientEvent<'a> {
    /// The server accepted the connection.
    Connected(ClientIndex),
    /// A payload from the server.
    Payload(&'a [u8]),
    /// The connection ended.
    Disconnected(DisconnectReason),
}

/// Client side of the transport. Performs no I/O and reads no clock.
pub struct Client {
    config: TransportConfig,
    match_id: MatchId,
    salt: u64,
    state: ClientState,
    started: Instant,
    last_send: Option<Instant>,
    last_recv: Instant,
    disconnects_to_send: u8,
    /// Packets from the server that were malformed or stale, dropped.
    pub dropped: u64,
}

impl Client {
    /// Starts connecting to `match_id` at `now`. `salt` must be random per session.
    pub fn new(config: TransportConfig, match_id: MatchId, salt: u64, now: Instant) -> Self {
        Client {
            config,
            match_id,
            salt,
            state: ClientState::SendingRequest,
            started: now,
            last_send: None,
            last_recv: now,
            disconnects_to_send: 0,
            dropped: 0,
        }
    }

    /// Current state.
    pub fn state(&self) -> ClientState {
        self.state
    }

    /// True once the server accepted and until the connection ends.
    pub fn is_connected(&self) -> bool {
        matches!(self.state, ClientState::Connected(_))
    }

    /// Handles one datagram from the server.
    pub fn handle_datagram<'a>(&mut self, now: Instant, data: &'a [u8]) -> Option<ClientEvent<'a>> {
        let mut r = Reader::new(data);
        let (Ok(kind), Ok(salt)) = (r.u8(), r.u64()) else {
            self.dropped += 1;
            return None;
        };
        if salt != self.salt || matches!(self.state, ClientState::Disconnected(_)) {
            self.dropped += 1;
            return None;
        }
        match (Kind::from_u8(kind), self.state) {
            (Some(Kind::ConnectAccept), ClientState::SendingRequest) => {
                let Ok(index) = r.u16() else {
                    self.dropped += 1;
                    return None;
                };
                self.last_recv = now;
                self.state = ClientState::Connected(ClientIndex(index));
                Some(ClientEvent::Connected(ClientIndex(index)))
            }
            (Some(Kind::ConnectDenied), ClientState::SendingRequest)
            | (Some(Kind::Disconnect), ClientState::Connected(_)) => {
                let reason = r
                    .u8()
                    .map(reason_from_u8)
                    .unwrap_or(DisconnectReason::Refused);
                self.state = ClientState::Disconnected(reason);
                Some(ClientEvent::Disconnected(reason))
            }
            (Some(Kind::KeepAlive), ClientState::Connected(_))
            | (Some(Kind::ConnectAccept), ClientState::Connected(_)) => {
                self.last_recv = now;
                None
            }
            (Some(Kind::Payload), ClientState::Connected(_)) => {
                let payload = r.rest();
                if payload.is_empty() {
                    self.dropped += 1;
                    return None;
                }
                self.last_recv = now;
                Some(ClientEvent::Payload(payload))
            }
            _ => {
                self.dropped += 1;
                None
            }
        }
    }

    /// Ends the connection when the server has gone silent; returns the event if it did.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<DisconnectReason> {
        let reason = match self.state {
            ClientState::SendingRequest
                if now.saturating_duration_since(self.started) >= self.config.timeout =>
            {
                DisconnectReason::ConnectTimedOut
            }
            ClientState::Connected(_)
                if now.saturating_duration_since(self.last_recv) >= self.config.timeout =>
            {
                DisconnectReason::TimedOut
            }
            _ => return None,
        };
        self.state = ClientState::Disconnected(reason);
        Some(reason)
    }

    /// Writes the next control packet due at `now` into `buf` (cleared first): a connect
    /// request (resent every keep-alive interval), a keep-alive, or a disconnect.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> bool {
        buf.clear();
        let mut w = Writer::new(buf);
        if self.disconnects_to_send > 0 {
            self.disconnects_to_send -= 1;
            w.u8(Kind::Disconnect as u8);
            w.u64(self.salt);
            w.u8(reason_to_u8(DisconnectReason::ClientClosed));
            return true;
        }
        let due = self
            .last_send
            .is_none_or(|t| now.saturating_duration_since(t) >= self.config.keepalive_every);
        if !due {
            return false;
        }
        match self.state {
            ClientState::SendingRequest => {
                w.u8(Kind::ConnectRequest as u8);
                w.u64(self.config.protocol_id);
                w.u32(self.match_id.0);
                w.u64(self.salt);
                let pad = REQUEST_BYTES - w.len();
                w.zeros(pad);
            }
            ClientState::Connected(_) => {
                w.u8(Kind::KeepAlive as u8);
                w.u64(self.salt);
            }
            ClientState::Disconnected(_) => return false,
        }
        self.last_send = Some(now);
        true
    }

    /// Frames `payload` into `out` (cleared first); false when not connected or too large.
    pub fn send_payload(&mut self, now: Instant, payload: &[u8], out: &mut Vec<u8>) -> bool {
        if !self.is_connected() || payload.is_empty() || payload.len() > MAX_PAYLOAD_BYTES {
            return false;
        }
        out.clear();
        let mut w = Writer::new(out);
        w.u8(Kind::Payload as u8);
        w.u64(self.salt);
        w.bytes(payload);
        self.last_send = Some(now);
        true
    }

    /// Closes the connection; the next polls send redundant disconnect packets.
    pub fn disconnect(&mut self) {
        if self.is_connected() {
            self.disconnects_to_send = REDUNDANT_DISCONNECTS;
        }
        self.state = ClientState::Disconnected(DisconnectReason::ClientClosed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// Runs the client until it has nothing more to send, delivering to the server.
    fn pump(
        client: &mut Client,
        server: &mut Server,
        now: Instant,
        from: SocketAddr,
    ) -> Vec<String> {
        let mut log = Vec::new();
        let mut buf = Vec::new();
        let mut reply = Vec::new();
        while client.poll_transmit(now, &mut buf) {
            if let Some(ev) = server.handle_datagram(now, from, &buf) {
                log.push(format!("server: {ev:?}"));
            }
        }
        while let Some(to) = server.poll_transmit(&mut reply) {
            assert_eq!(to, from);
            if let Some(ev) = client.handle_datagram(now, &reply) {
                log.push(format!("client: {ev:?}"));
            }
        }
        log
    }

    #[test]
    fn connect_exchange_disconnect() {
        let t0 = Instant::now();
        let cfg = TransportConfig::default();
        let mut server = Server::new(cfg, 4);
        let mut client = Client::new(cfg, MatchId(7), 42, t0);
        let log = pump(&mut client, &mut server, t0, addr(1000));
        assert_eq!(
            log,
            [
                "server: Connected { client: ClientIndex(0), match_id: MatchId(7) }",
                "client: Connected(ClientIndex(0))"
            ]
        );
        assert!(client.is_connected());

        let mut out = Vec::new();
        assert!(client.send_payload(t0, b"hello", &mut out));
        assert_eq!(
            server.handle_datagram(t0, addr(1000), &out),
            Some(ServerEvent::Payload {
                client: ClientIndex(0),
                data: b"hello"
            })
        );
        let to = server
            .send_payload(t0, ClientIndex(0), b"world", &mut out)
            .unwrap();
        assert_eq!(to, addr(1000));
        assert_eq!(
            client.handle_datagram(t0, &out),
            Some(ClientEvent::Payload(b"world"))
        );

        client.disconnect();
        let mut buf = Vec::new();
        assert!(client.poll_transmit(t0, &mut buf));
        assert_eq!(
            server.handle_datagram(t0, addr(1000), &buf),
            Some(ServerEvent::Disconnected {
                client: ClientIndex(0),
                reason: DisconnectReason::ClientClosed
            })
        );
        assert_eq!(server.connected(), 0);
        // The redundant copies reach a server that no longer knows the address.
        assert!(client.poll_transmit(t0, &mut buf));
        assert_eq!(server.handle_datagram(t0, addr(1000), &buf), None);
        assert_eq!(server.stats().unknown_source, 1);
    }

    #[test]
    fn lost_accept_is_answered_again_without_a_second_slot() {
        let t0 = Instant::now();
        let cfg = TransportConfig::default();
        let mut server = Server::new(cfg, 4);
        let mut client = Client::new(cfg, MatchId(1), 9, t0);
        let mut buf = Vec::new();
        assert!(client.poll_transmit(t0, &mut buf));
        assert!(server.handle_datagram(t0, addr(1), &buf).is_some());
        let mut lost = Vec::new();
        let _ = server.poll_transmit(&mut lost); // the accept is lost
                                                 // Nothing is resent before the interval.
        assert!(!client.poll_transmit(t0 + Duration::from_millis(50), &mut buf));
        let t1 = t0 + cfg.keepalive_every;
        assert!(client.poll_transmit(t1, &mut buf));
        assert_eq!(server.handle_datagram(t1, addr(1), &buf), None);
        assert_eq!(server.connected(), 1);
        let mut reply = Vec::new();
        assert!(server.poll_transmit(&mut reply).is_some());
        assert_eq!(
            client.handle_datagram(t1, &reply),
            Some(ClientEvent::Connected(ClientIndex(0)))
        );
    }

    #[test]
    fn full_server_denies_and_client_learns_why() {
        let t0 = Instant::now();
        let cfg = TransportConfig::default();
        let mut server = Server::new(cfg, 1);
        let mut a = Client::new(cfg, MatchId(1), 1, t0);
        let mut b = Client::new(cfg, MatchId(1), 2, t0);
        pump(&mut a, &mut server, t0, addr(1));
        let log = pump(&mut b, &mut server, t0, addr(2));
        assert_eq!(log, ["client: Disconnected(ServerFull)"]);
        assert_eq!(
            b.state(),
            ClientState::Disconnected(DisconnectReason::ServerFull)
        );
        assert!(a.is_connected());
    }

    #[test]
    fn silent_client_times_out_and_keepalives_flow_before_that() {
        let t0 = Instant::now();
        let cfg = TransportConfig::default();
        let mut server = Server::new(cfg, 2);
        let mut client = Client::new(cfg, MatchId(1), 5, t0);
        pump(&mut client, &mut server, t0, addr(3));
        let mut buf = Vec::new();
        server.handle_timeout(t0 + cfg.keepalive_every);
        let to = server.poll_transmit(&mut buf);
        assert_eq!(to, Some(addr(3)));
        assert_eq!(client.handle_datagram(t0 + cfg.keepalive_every, &buf), None);
        assert_eq!(client.dropped, 0);
        server.handle_timeout(t0 + cfg.timeout);
        assert_eq!(
            server.poll_disconnect(),
            Some((ClientIndex(0), DisconnectReason::TimedOut))
        );
        assert_eq!(server.connected(), 0);
        // The client hears keep-alives until then, so it times out later than the server.
        assert_eq!(client.handle_timeout(t0 + cfg.timeout), None);
        assert_eq!(
            client.handle_timeout(t0 + cfg.keepalive_every + cfg.timeout),
            Some(DisconnectReason::TimedOut)
        );
    }

    #[test]
    fn reconnect_with_new_salt_replaces_old_session() {
        let t0 = Instant::now();
        let cfg = TransportConfig::default();
        let mut server = Server::new(cfg, 2);
        let mut first = Client::new(cfg, MatchId(1), 100, t0);
        pump(&mut first, &mut server, t0, addr(4));
        let mut second = Client::new(cfg, MatchId(1), 200, t0);
        let log = pump(&mut second, &mut server, t0, addr(4));
        assert_eq!(log.len(), 2, "{log:?}");
        assert_eq!(
            server.poll_disconnect(),
            Some((ClientIndex(0), DisconnectReason::Replaced))
        );
        // A stale payload of the first session is dropped.
        let mut out = Vec::new();
        assert!(first.send_payload(t0, b"old", &mut out));
        assert_eq!(server.handle_datagram(t0, addr(4), &out), None);
        assert_eq!(server.stats().bad_salt, 1);
    }

    #[test]
    fn requests_of_wrong_size_or_protocol_are_ignored_silently() {
        let t0 = Instant::now();
        let cfg = TransportConfig::default();
        let mut server = Server::new(cfg, 2);
        let mut client = Client::new(cfg, MatchId(1), 1, t0);
        let mut buf = Vec::new();
        assert!(client.poll_transmit(t0, &mut buf));
        let mut short = buf.clone();
        short.pop();
        assert_eq!(server.handle_datagram(t0, addr(5), &short), None);
        let mut other = Client::new(
            TransportConfig {
                protocol_id: 1,
                ..cfg
            },
            MatchId(1),
            1,
            t0,
        );
        let mut wrong = Vec::new();
        assert!(other.poll_transmit(t0, &mut wrong));
        assert_eq!(server.handle_datagram(t0, addr(5), &wrong), None);
        assert_eq!(server.stats().bad_request_size, 1);
        assert_eq!(server.stats().wrong_protocol, 1);
        assert!(
            server.poll_transmit(&mut Vec::new()).is_none(),
            "no answer to either"
        );
    }

    proptest! {
        #[test]
        fn arbitrary_datagrams_never_panic_and_never_amplify(
            packets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 1..40)
        ) {
            let t0 = Instant::now();
            let mut server = Server::new(TransportConfig::default(), 4);
            let mut received = 0usize;
            let mut sent = 0usize;
            let mut buf = Vec::new();
            for p in &packets {
                let _ = server.handle_datagram(t0, addr(9), p);
                received += p.len();
                while server.poll_transmit(&mut buf).is_some() {
                    sent += buf.len();
                }
            }
            prop_assert!(sent <= received);
        }

        #[test]
        fn arbitrary_datagrams_never_panic_the_client(
            packets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..40)
        ) {
            let t0 = Instant::now();
            let mut client = Client::new(TransportConfig::default(), MatchId(1), 0, t0);
            for p in &packets {
                let _ = client.handle_datagram(t0, p);
            }
        }
    }
}
