//! The server side of netcode.io 1.02.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use chacha20poly1305::aead::KeyInit;
use chacha20poly1305::XChaCha20Poly1305;
use tickforge_sim::hint::{prefetch, prefetch_item};

use super::aead::PacketKey;

use super::packet::{self, Drop, PacketType, CHALLENGE_BODY_BYTES};
use super::replay::ReplayWindow;
use super::token::{self, PrivateToken};
use super::{
    CHALLENGE_TOKEN_BYTES, KEY_BYTES, MAC_BYTES, PACKET_SEND_INTERVAL, PRIVATE_TOKEN_BYTES,
    REDUNDANT_DISCONNECTS, USER_DATA_BYTES,
};
use crate::ClientIndex;
use crate::DisconnectReason;

/// The first global sequence number. Denied and challenge packets are sealed with the
/// client's server-to-client key under this counter, and that key also seals the
/// connection's own packets, whose sequence starts at 0. Starting the global counter at
/// 2^63 keeps the two nonce ranges apart, so no nonce is used twice under one key, however
/// often the server restarts (IMPLEMENTERS.md #3).
pub const GLOBAL_SEQUENCE_START: u64 = 1 << 63;

/// Largest control packet: a challenge with an 8-byte sequence (333 bytes).
const CONTROL_BYTES: usize = 1 + 8 + CHALLENGE_BODY_BYTES + MAC_BYTES;
/// The most [`Server::send_payload`] writes: the largest payload sealed, after the
/// keep-alive an unconfirmed client is sent first. An `out` of this capacity never grows.
pub const MAX_TRANSMIT_BYTES: usize =
    packet::MAX_ENCRYPTED_BYTES + 1 + 8 + packet::KEEPALIVE_BODY_BYTES + MAC_BYTES;
/// Buckets of the per-source request limiter; sources that hash alike share one.
const RATE_BUCKETS: usize = 4096;
/// Requests one source may send in a burst before the rate applies.
const RATE_BURST: u32 = 8;

/// How a server identifies itself and how many clients it holds.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The game's protocol id; requests for another are ignored.
    pub protocol_id: u64,
    /// The key tokens are sealed with, shared with the backend that mints them.
    pub private_key: [u8; KEY_BYTES],
    /// This server's addresses as tokens name them (its public address, IPv4 and/or IPv6).
    pub public_addresses: Vec<SocketAddr>,
    /// Connection slots.
    pub max_clients: u16,
    /// Connection requests per second one IP may make before they are dropped unopened.
    pub requests_per_second_per_ip: u32,
}

/// Why the server dropped a datagram. Counted in [`ServerStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum ServerDrop {
    Short,
    TooLong,
    UnknownType,
    WrongDirection,
    BadSequenceBytes,
    Replayed,
    Decrypt,
    BadBodySize,
    /// An encrypted packet from an address with no connection or pending connection.
    UnknownAddress,
    /// A disconnect packet from an address with no connection: the repeats a netcode.io
    /// client sends after the first one closed its connection (10 in all, by the
    /// standard), or a late copy. Expected, so counted apart from [`ServerDrop::UnknownAddress`].
    DisconnectRepeat,
    /// A connection request that is not exactly 1078 bytes.
    RequestSize,
    /// A request for another netcode version.
    RequestVersion,
    /// A request for another protocol id.
    RequestProtocol,
    /// A request whose token has expired.
    TokenExpired,
    /// A request whose private token does not open or parse.
    TokenInvalid,
    /// A token that does not name this server.
    TokenWrongServer,
    /// A token already used from another address.
    TokenReused,
    /// Too many requests from one IP.
    RateLimited,
    /// A request or response from an address or client id already connected.
    AlreadyConnected,
    /// No room for another pending connection.
    PendingFull,
    /// A response whose challenge token does not open.
    ChallengeInvalid,
    /// Control answers not queued because the queue was full.
    ControlQueueFull,
}

impl ServerDrop {
    /// Reasons a well-behaved client causes: a disconnect's repeats.
    pub const EXPECTED: [ServerDrop; 1] = [ServerDrop::DisconnectRepeat];

    const COUNT: usize = 22;
    const ALL: [ServerDrop; ServerDrop::COUNT] = [
        ServerDrop::Short,
        ServerDrop::TooLong,
        ServerDrop::UnknownType,
        ServerDrop::WrongDirection,
        ServerDrop::BadSequenceBytes,
        ServerDrop::Replayed,
        ServerDrop::Decrypt,
        ServerDrop::BadBodySize,
        ServerDrop::UnknownAddress,
        ServerDrop::DisconnectRepeat,
        ServerDrop::RequestSize,
        ServerDrop::RequestVersion,
        ServerDrop::RequestProtocol,
        ServerDrop::TokenExpired,
        ServerDrop::TokenInvalid,
        ServerDrop::TokenWrongServer,
        ServerDrop::TokenReused,
        ServerDrop::RateLimited,
        ServerDrop::AlreadyConnected,
        ServerDrop::PendingFull,
        ServerDrop::ChallengeInvalid,
        ServerDrop::ControlQueueFull,
    ];

    /// The report name.
    pub fn name(self) -> &'static str {
        match self {
            ServerDrop::Short => "short",
            ServerDrop::TooLong => "too_long",
            ServerDrop::UnknownType => "unknown_type",
            ServerDrop::WrongDirection => "wrong_direction",
            ServerDrop::BadSequenceBytes => "bad_sequence_bytes",
            ServerDrop::Replayed => "replayed",
            ServerDrop::Decrypt => "decrypt",
            ServerDrop::BadBodySize => "bad_body_size",
            ServerDrop::UnknownAddress => "unknown_address",
            ServerDrop::DisconnectRepeat => "disconnect_repeat",
            ServerDrop::RequestSize => "request_size",
            ServerDrop::RequestVersion => "request_version",
            ServerDrop::RequestProtocol => "request_protocol",
            ServerDrop::TokenExpired => "token_expired",
            ServerDrop::TokenInvalid => "token_invalid",
            ServerDrop::TokenWrongServer => "token_wrong_server",
            ServerDrop::TokenReused => "token_reused",
            ServerDrop::RateLimited => "rate_limited",
            ServerDrop::AlreadyConnected => "already_connected",
            ServerDrop::PendingFull => "pending_full",
            ServerDrop::ChallengeInvalid => "challenge_invalid",
            ServerDrop::ControlQueueFull => "control_queue_full",
        }
    }

    fn from_packet(d: Drop) -> ServerDrop {
        match d {
            Drop::Short => ServerDrop::Short,
            Drop::TooLong => ServerDrop::TooLong,
            Drop::UnknownType => ServerDrop::UnknownType,
            Drop::WrongDirection => ServerDrop::WrongDirection,
            Drop::BadSequenceBytes => ServerDrop::BadSequenceBytes,
            Drop::Replayed => ServerDrop::Replayed,
            Drop::Decrypt => ServerDrop::Decrypt,
            Drop::BadBodySize => ServerDrop::BadBodySize,
        }
    }
}

/// Datagrams dropped, by reason, and what was answered.
#[derive(Clone, Debug, Default)]
pub struct ServerStats {
    dropped: [u64; ServerDrop::COUNT],
    /// Challenges sent.
    pub challenges: u64,
    /// Denied packets sent.
    pub denied: u64,
    /// Connections completed.
    pub connects: u64,
    /// Walks of every slot by [`Server::handle_timeout`]: one per earliest deadline
    /// reached, none for a call before it.
    pub timeout_walks: u64,
}

impl ServerStats {
    /// Count of one reason.
    pub fn dropped(&self, reason: ServerDrop) -> u64 {
        self.dropped[reason as usize]
    }

    /// Every reason with its count.
    pub fn dropped_all(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        ServerDrop::ALL
            .iter()
            .map(|&r| (r.name(), self.dropped[r as usize]))
    }

    /// Total dropped.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// Total dropped but the reasons a well-behaved client causes too
    /// ([`ServerDrop::EXPECTED`]).
    pub fn dropped_unexpected(&self) -> u64 {
        self.dropped_total()
            - (ServerDrop::EXPECTED.iter())
                .map(|&r| self.dropped[r as usize])
                .sum::<u64>()
    }
}

/// What the server learnt from a datagram.
#[derive(Debug, PartialEq, Eq)]
// Connected carries the 256 bytes of user data in place: a connection is made in the frame,
// which allocates nothing.
#[allow(clippy::large_enum_variant)]
pub enum ServerEvent<'a> {
    /// A client completed the handshake. Its token's user data says what it is for; the
    /// caller may refuse it with [`Server::disconnect`].
    Connected {
        /// Its slot.
        client: ClientIndex,
        /// The id the backend gave it.
        client_id: u64,
        /// The token's user data (in place: a box would allocate per connection inside the
        /// frame).
        user_data: [u8; USER_DATA_BYTES],
    },
    /// A payload from a connected client, decrypted in place in the datagram buffer.
    Payload {
        /// Who sent it.
        client: ClientIndex,
        /// The plaintext.
        data: &'a [u8],
    },
    /// A connected client sent a disconnect.
    Disconnected {
        /// Its former slot.
        client: ClientIndex,
        /// Why.
        reason: DisconnectReason,
    },
}

/// Where [`Server::send_payload`] wrote its packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The client's address.
    pub to: SocketAddr,
    /// When nonzero, `out[..keepalive_bytes]` is a keep-alive that must be sent before the
    /// payload packet `out[keepalive_bytes..]`: a client not yet confirmed only becomes
    /// connected on a keep-alive, so every payload to it is preceded by one.
    pub keepalive_bytes: usize,
}

struct Slot {
    addr: SocketAddr,
    client_id: u64,
    c2s: PacketKey,
    s2c: PacketKey,
    sequence: u64,
    replay: ReplayWindow,
    last_recv: Instant,
    last_send: Instant,
    timeout: Option<Duration>,
    confirmed: bool,
}

impl Slot {
    /// When [`Server::handle_timeout`] next has work for this connection: its keep-alive or
    /// its timeout, whichever comes first.
    fn deadline(&self) -> Option<Instant> {
        let keepalive = self.last_send.checked_add(PACKET_SEND_INTERVAL);
        let timeout = self.timeout.and_then(|t| self.last_recv.checked_add(t));
        earliest(keepalive, timeout)
    }
}

struct Pending {
    /// The token's keys as bytes, scheduled when a packet needs them: a schedule is 544
    /// bytes, two made a handshake 1.2 KB, and the table reserves four handshakes a
    /// client, which joins touch at random (each faulting in the page it falls on).
    c2s: [u8; KEY_BYTES],
    s2c: [u8; KEY_BYTES],
    created: Instant,
    last_recv: Instant,
    /// How long the handshake may take.
    timeout: Duration,
    /// The connection's timeout once established (`None`: never, from a negative token
    /// timeout, for development).
    connection_timeout: Option<Duration>,
}

impl Pending {
    /// When the handshake times out.
    fn deadline(&self) -> Option<Instant> {
        self.created.min(self.last_recv).checked_add(self.timeout)
    }
}

#[derive(Clone, Copy)]
struct Bucket {
    allowance: u32,
    last: Option<Instant>,
}

/// Server side of netcode.io 1.02 for one socket. Performs no I/O and reads no clock.
///
/// Feed datagrams to [`Server::handle_datagram`], advance time with
/// [`Server::handle_timeout`] (drain ended connections with [`Server::poll_disconnect`]),
/// drain handshake and keep-alive packets with [`Server::poll_transmit`], and seal payloads
/// with [`Server::send_payload`]. [`Server::poll_timeout`] says when the timers next have
/// work; calling `handle_timeout` on every wake-up anyway costs O(1) until then.
pub struct Server {
    config: ServerConfig,
    private_key: XChaCha20Poly1305,
    challenge_key: PacketKey,
    challenge_sequence: u64,
    global_sequence: u64,
    /// Unix seconds at `epoch`, to check token expiry from the monotonic `now`.
    unix_at_epoch: u64,
    epoch: Instant,
    slots: Vec<Option<Slot>>,
    by_addr: HashMap<SocketAddr, ClientIndex>,
    by_client_id: HashMap<u64, ClientIndex>,
    pending: HashMap<SocketAddr, Pending>,
    /// Token tags seen, with the address that used them: a token works from one address.
    token_history: HashMap<[u8; MAC_BYTES], SocketAddr>,
    token_order: VecDeque<[u8; MAC_BYTES]>,
    buckets: Vec<Bucket>,
    bucket_salt: u64,
    control: VecDeque<(SocketAddr, usize, [u8; CONTROL_BYTES])>,
    control_cap: usize,
    ended: VecDeque<(ClientIndex, DisconnectReason)>,
    /// No slot or handshake has a keep-alive or timeout due before this; `None`: none has
    /// one at all. Never later than the true earliest deadline: a deadline that moves later
    /// (a packet received or sent) leaves it early, which costs one walk that finds
    /// nothing; a deadline that starts earlier (a new connection or handshake) lowers it.
    next_timeout: Option<Instant>,
    scratch: Vec<u8>,
    stats: ServerStats,
}

impl Server {
    /// A server with all memory reserved for `config.max_clients`.
    ///
    /// `unix_now` is the wall-clock time in seconds at `now` (tokens expire in wall-clock
    /// time); `challenge_key` must be random and new at every start.
    pub fn new(
        config: ServerConfig,
        now: Instant,
        unix_now: u64,
        challenge_key: [u8; KEY_BYTES],
    ) -> Self {
        let n = usize::from(config.max_clients);
        Server {
            private_key: XChaCha20Poly1305::new((&config.private_key).into()),
            challenge_key: PacketKey::new(&challenge_key),
            challenge_sequence: 0,
            global_sequence: GLOBAL_SEQUENCE_START,
            unix_at_epoch: unix_now,
            epoch: now,
            slots: (0..n).map(|_| None).collect(),
            by_addr: HashMap::with_capacity(n),
            by_client_id: HashMap::with_capacity(n),
            pending: HashMap::with_capacity(4 * n),
            token_history: HashMap::with_capacity(8 * n),
            token_order: VecDeque::with_capacity(8 * n),
            buckets: vec![
                Bucket {
                    allowance: RATE_BURST,
                    last: None
                };
                RATE_BUCKETS
            ],
            bucket_salt: u64::from_le_bytes(challenge_key[..8].try_into().expect("8 bytes")),
            // Room for a challenge per pending connection and a kick (ten disconnects)
            // for every client at once.
            control: VecDeque::with_capacity(4 * n + 10 * n + 64),
            control_cap: 4 * n + 10 * n + 64,
            ended: VecDeque::with_capacity(n),
            next_timeout: None,
            // The largest packet it seals: a payload's, once one is that large, would
            // otherwise grow it in the middle of a frame.
            scratch: Vec::with_capacity(CONTROL_BYTES.max(packet::MAX_ENCRYPTED_BYTES)),
            stats: ServerStats::default(),
            config,
        }
    }

    /// Counters.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Connected clients.
    pub fn connected(&self) -> usize {
        self.by_addr.len()
    }

    /// Slots in all.
    pub fn max_clients(&self) -> u16 {
        self.config.max_clients
    }

    /// Address of a connected client.
    pub fn addr_of(&self, client: ClientIndex) -> Option<SocketAddr> {
        self.slots.get(client.as_usize())?.as_ref().map(|s| s.addr)
    }

    fn drop(&mut self, reason: ServerDrop) {
        self.stats.dropped[reason as usize] += 1;
    }

    /// The connected client a datagram from `from` would be handled for, with what
    /// [`Server::handle_datagram`] reads of its connection started loading (its keys, times
    /// and replay window): a hint, which changes nothing. A worker reads batches of
    /// datagrams from hundreds of connections and finds each one's state cold; hinted a few
    /// datagrams ahead, their misses overlap.
    pub fn prefetch_connection(&self, from: SocketAddr) -> Option<ClientIndex> {
        let &client = self.by_addr.get(&from)?;
        if let Some(slot) = self.slots.get(client.as_usize()).and_then(Option::as_ref) {
            prefetch(&slot.addr);
            prefetch_item(&slot.c2s);
            prefetch(&slot.last_recv);
            prefetch(&slot.confirmed);
            slot.replay.prefetch();
        }
        Some(client)
    }

    /// Handles one datagram from `from`, decrypting in place. Anything malformed, forged,
    /// replayed or unexpected is dropped and counted, never answered with more bytes than
    /// it carried.
    pub fn handle_datagram<'a>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &'a mut [u8],
    ) -> Option<ServerEvent<'a>> {
        match packet::peek_type(data) {
            Err(d) => {
                self.drop(ServerDrop::from_packet(d));
                None
            }
            Ok(PacketType::Request) => {
                self.handle_request(now, from, data);
                None
            }
            Ok(kind) => {
                if let Some(&client) = self.by_addr.get(&from) {
                    self.handle_connected(now, client, data)
                } else if self.pending.contains_key(&from) {
                    self.handle_response(now, from, data)
                } else {
                    // No key for this address: drop before any cryptography. The type is
                    // the prefix byte's, unauthenticated: it only sorts the count.
                    self.drop(match kind {
                        PacketType::Disconnect => ServerDrop::DisconnectRepeat,
                        _ => ServerDrop::UnknownAddress,
                    });
                    None
                }
            }
        }
    }

    fn handle_connected<'a>(
        &mut self,
        now: Instant,
        client: ClientIndex,
        data: &'a mut [u8],
    ) -> Option<ServerEvent<'a>> {
        let protocol_id = self.config.protocol_id;
        let slot = self.slots[client.as_usize()]
            .as_mut()
            .expect("by_addr names live slots");
        let accept = |t| {
            matches!(
                t,
                PacketType::Response
                    | PacketType::KeepAlive
                    | PacketType::Payload
                    | PacketType::Disconnect
            )
        };
        let opened =
            match packet::open(data, protocol_id, &slot.c2s, accept, Some(&mut slot.replay)) {
                Ok(o) => o,
                Err(d) => {
                    self.drop(ServerDrop::from_packet(d));
                    return None;
                }
            };
        match opened.packet_type {
            PacketType::Response => {
                self.drop(ServerDrop::AlreadyConnected);
                None
            }
            PacketType::KeepAlive => {
                slot.last_recv = now;
                slot.confirmed = true;
                None
            }
            PacketType::Payload => {
                slot.last_recv = now;
                slot.confirmed = true;
                Some(ServerEvent::Payload {
                    client,
                    data: opened.body,
                })
            }
            PacketType::Disconnect => {
                self.free_slot(client);
                Some(ServerEvent::Disconnected {
                    client,
                    reason: DisconnectReason::ClientClosed,
                })
            }
            _ => unreachable!("open accepts only the types above"),
        }
    }

    fn handle_request(&mut self, now: Instant, from: SocketAddr, data: &mut [u8]) {
        // Cheap checks first: size, version, protocol, expiry, and the per-source rate,
        // all before the 1.5 µs it costs to open a token.
        let request = match packet::parse_request(data) {
            Ok(r) => r,
            Err(packet::RequestDrop::Size) => return self.drop(ServerDrop::RequestSize),
            Err(packet::RequestDrop::Version) => return self.drop(ServerDrop::RequestVersion),
        };
        if request.protocol_id != self.config.protocol_id {
            return self.drop(ServerDrop::RequestProtocol);
        }
        if request.expire_timestamp <= self.unix_now(now) {
            return self.drop(ServerDrop::TokenExpired);
        }
        if !self.allow_request(now, from.ip()) {
            return self.drop(ServerDrop::RateLimited);
        }
        let (expire, nonce) = (request.expire_timestamp, *request.nonce);
        let sealed: &mut [u8; PRIVATE_TOKEN_BYTES] = request.private_token;
        let tag: [u8; MAC_BYTES] = sealed[PRIVATE_TOKEN_BYTES - MAC_BYTES..]
            .try_into()
            .expect("16 bytes");
        let token = match PrivateToken::open_for(
            sealed,
            self.config.protocol_id,
            expire,
            &nonce,
            &self.private_key,
            &self.config.public_addresses,
        ) {
            Ok(t) => t,
            Err(_) => return self.drop(ServerDrop::TokenInvalid),
        };
        if !token.names_server {
            return self.drop(ServerDrop::TokenWrongServer);
        }
        if self.by_addr.contains_key(&from) || self.by_client_id.contains_key(&token.client_id) {
            return self.drop(ServerDrop::AlreadyConnected);
        }
        match self.token_history.get(&tag) {
            Some(&addr) if addr != from => return self.drop(ServerDrop::TokenReused),
            Some(_) => {}
            None => {
                if self.token_order.len() == 8 * usize::from(self.config.max_clients).max(1) {
                    if let Some(old) = self.token_order.pop_front() {
                        self.token_history.remove(&old);
                    }
                }
                self.token_history.insert(tag, from);
                self.token_order.push_back(tag);
            }
        }
        let s2c = PacketKey::new(&token.server_to_client_key);
        if self.by_addr.len() >= usize::from(self.config.max_clients) {
            self.queue_global(from, PacketType::Denied, &s2c, |_| {});
            self.stats.denied += 1;
            return;
        }
        if !self.pending.contains_key(&from)
            && self.pending.len() >= 4 * usize::from(self.config.max_clients)
        {
            return self.drop(ServerDrop::PendingFull);
        }
        let connection_timeout = timeout_of(token.timeout_seconds);
        // Every accepted request sets the address's keys anew, as the reference's
        // encryption manager does: a client that restarts from the same address with a new
        // token must have its response opened with the new token's key, not the old one's.
        let pending = Pending {
            c2s: token.client_to_server_key,
            s2c: token.server_to_client_key,
            created: now,
            last_recv: now,
            timeout: connection_timeout.unwrap_or(Duration::from_secs(5)),
            connection_timeout,
        };
        self.schedule(pending.deadline());
        self.pending.insert(from, pending);
        let mut challenge = [0u8; CHALLENGE_TOKEN_BYTES];
        let challenge_sequence = self.challenge_sequence;
        self.challenge_sequence += 1;
        token::seal_challenge(
            &mut challenge,
            token.client_id,
            &token.user_data,
            challenge_sequence,
            &self.challenge_key,
        );
        self.queue_global(from, PacketType::Challenge, &s2c, |b| {
            b.extend_from_slice(&challenge_sequence.to_le_bytes());
            b.extend_from_slice(&challenge);
        });
        self.stats.challenges += 1;
    }

    fn handle_response<'a>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &'a mut [u8],
    ) -> Option<ServerEvent<'a>> {
        let protocol_id = self.config.protocol_id;
        let pending = self.pending.get_mut(&from).expect("checked by the caller");
        let opened = match packet::open(
            data,
            protocol_id,
            &PacketKey::new(&pending.c2s),
            |t| t == PacketType::Response,
            None,
        ) {
            Ok(o) => o,
            Err(d) => {
                self.drop(ServerDrop::from_packet(d));
                return None;
            }
        };
        pending.last_recv = now;
        let challenge_sequence = u64::from_le_bytes(opened.body[..8].try_into().expect("8 bytes"));
        let mut challenge: [u8; CHALLENGE_TOKEN_BYTES] =
            opened.body[8..].try_into().expect("300 bytes");
        let Some((client_id, user_data)) =
            token::open_challenge(&mut challenge, challenge_sequence, &self.challenge_key)
        else {
            self.drop(ServerDrop::ChallengeInvalid);
            return None;
        };
        if self.by_client_id.contains_key(&client_id) {
            self.drop(ServerDrop::AlreadyConnected);
            return None;
        }
        let Some(index) = self.slots.iter().position(Option::is_none) else {
            let s2c = PacketKey::new(&pending.s2c);
            self.queue_global(from, PacketType::Denied, &s2c, |_| {});
            self.stats.denied += 1;
            return None;
        };
        let pending = self.pending.remove(&from).expect("present above");
        let client = ClientIndex(index as u16);
        let slot = Slot {
            addr: from,
            client_id,
            c2s: PacketKey::new(&pending.c2s),
            s2c: PacketKey::new(&pending.s2c),
            sequence: 0,
            replay: ReplayWindow::new(),
            last_recv: now,
            last_send: now,
            timeout: pending.connection_timeout,
            confirmed: false,
        };
        self.schedule(slot.deadline());
        self.slots[index] = Some(slot);
        self.by_addr.insert(from, client);
        self.by_client_id.insert(client_id, client);
        self.queue_keepalive(client);
        self.stats.connects += 1;
        Some(ServerEvent::Connected {
            client,
            client_id,
            user_data,
        })
    }

    /// Times out silent connections and pending handshakes, and schedules keep-alives for
    /// connections with nothing sent for 100 ms. Call once per wake-up, with a `now` that
    /// never goes backwards.
    ///
    /// Costs O(1) before [`Server::poll_timeout`]'s instant; from it on, one walk over the
    /// slots that finds what is due and the next such instant.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.next_timeout.is_none_or(|t| now < t) {
            return;
        }
        self.stats.timeout_walks += 1;
        let mut next = None;
        for i in 0..self.slots.len() {
            let Some(slot) = &self.slots[i] else { continue };
            let client = ClientIndex(i as u16);
            let silent = now.saturating_duration_since(slot.last_recv);
            if slot.timeout.is_some_and(|t| silent >= t) {
                self.free_slot(client);
                self.ended.push_back((client, DisconnectReason::TimedOut));
                continue;
            }
            if now.saturating_duration_since(slot.last_send) >= PACKET_SEND_INTERVAL {
                self.queue_keepalive(client);
                if let Some(s) = self.slots[i].as_mut() {
                    s.last_send = now;
                }
            }
            next = earliest(next, self.slots[i].as_ref().and_then(Slot::deadline));
        }
        self.pending.retain(|_, p| {
            let alive = now.saturating_duration_since(p.last_recv) < p.timeout
                && now.saturating_duration_since(p.created) < p.timeout;
            if alive {
                next = earliest(next, p.deadline());
            }
            alive
        });
        self.next_timeout = next;
    }

    /// The earliest instant at which [`Server::handle_timeout`] has anything to do (a
    /// keep-alive or a timeout due); `None` while no connection or handshake is open. May
    /// be early by what packets since the last walk moved, never late.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_timeout
    }

    /// Next connection ended by a timeout, if any.
    pub fn poll_disconnect(&mut self) -> Option<(ClientIndex, DisconnectReason)> {
        self.ended.pop_front()
    }

    /// Ends a connection: ten disconnect packets tell the client, then the slot is free.
    pub fn disconnect(&mut self, client: ClientIndex) {
        if self
            .slots
            .get(client.as_usize())
            .is_none_or(Option::is_none)
        {
            return;
        }
        for _ in 0..REDUNDANT_DISCONNECTS {
            self.queue_connection(client, PacketType::Disconnect, |_| {});
        }
        self.free_slot(client);
    }

    /// Writes the next handshake, keep-alive or disconnect packet into `buf` (cleared
    /// first) and returns where it goes.
    #[must_use]
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> Option<SocketAddr> {
        let (to, len, bytes) = self.control.pop_front()?;
        buf.clear();
        buf.extend_from_slice(&bytes[..len]);
        Some(to)
    }

    /// Seals `payload` (1..=1200 bytes) for `client` into `out` (cleared first). `None` when
    /// the client is not connected or the payload has no valid size.
    pub fn send_payload(
        &mut self,
        now: Instant,
        client: ClientIndex,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Option<Transmit> {
        if payload.is_empty() || payload.len() > super::MAX_PAYLOAD_BYTES {
            return None;
        }
        let protocol_id = self.config.protocol_id;
        let max_clients = self.config.max_clients;
        let slot = self.slots.get_mut(client.as_usize())?.as_mut()?;
        out.clear();
        let mut keepalive_bytes = 0;
        if !slot.confirmed {
            seal_keepalive(&mut self.scratch, slot, protocol_id, client, max_clients);
            out.extend_from_slice(&self.scratch);
            keepalive_bytes = out.len();
        }
        packet::seal(
            &mut self.scratch,
            PacketType::Payload,
            slot.sequence,
            protocol_id,
            &slot.s2c,
            |b| b.extend_from_slice(payload),
        );
        slot.sequence += 1;
        slot.last_send = now;
        out.extend_from_slice(&self.scratch);
        Some(Transmit {
            to: slot.addr,
            keepalive_bytes,
        })
    }

    fn unix_now(&self, now: Instant) -> u64 {
        self.unix_at_epoch + now.saturating_duration_since(self.epoch).as_secs()
    }

    /// Token bucket per source IP (hashed into a fixed table, so a flood of sources costs
    /// no memory): `RATE_BURST` requests at once, then `requests_per_second_per_ip`.
    fn allow_request(&mut self, now: Instant, ip: IpAddr) -> bool {
        let rate = self.config.requests_per_second_per_ip;
        let b = &mut self.buckets[bucket_of(ip, self.bucket_salt)];
        if let Some(last) = b.last {
            let earned = now.saturating_duration_since(last).as_secs_f64() * f64::from(rate);
            if earned >= 1.0 {
                b.allowance = (b.allowance + earned as u32).min(RATE_BURST);
                b.last = Some(now);
            }
        } else {
            b.last = Some(now);
        }
        if b.allowance == 0 {
            return false;
        }
        b.allowance -= 1;
        true
    }

    fn queue_global(
        &mut self,
        to: SocketAddr,
        packet_type: PacketType,
        key: &PacketKey,
        body: impl FnOnce(&mut Vec<u8>),
    ) {
        let sequence = self.global_sequence;
        self.global_sequence += 1;
        packet::seal(
            &mut self.scratch,
            packet_type,
            sequence,
            self.config.protocol_id,
            key,
            body,
        );
        self.push_control(to);
    }

    fn queue_keepalive(&mut self, client: ClientIndex) {
        let (protocol_id, max_clients) = (self.config.protocol_id, self.config.max_clients);
        let Some(slot) = self.slots[client.as_usize()].as_mut() else {
            return;
        };
        seal_keepalive(&mut self.scratch, slot, protocol_id, client, max_clients);
        let to = slot.addr;
        self.push_control(to);
    }

    fn queue_connection(
        &mut self,
        client: ClientIndex,
        packet_type: PacketType,
        body: impl FnOnce(&mut Vec<u8>),
    ) {
        let protocol_id = self.config.protocol_id;
        let Some(slot) = self.slots[client.as_usize()].as_mut() else {
            return;
        };
        packet::seal(
            &mut self.scratch,
            packet_type,
            slot.sequence,
            protocol_id,
            &slot.s2c,
            body,
        );
        slot.sequence += 1;
        let to = slot.addr;
        self.push_control(to);
    }

    fn push_control(&mut self, to: SocketAddr) {
        if self.control.len() >= self.control_cap {
            self.drop(ServerDrop::ControlQueueFull);
            return;
        }
        let mut bytes = [0u8; CONTROL_BYTES];
        bytes[..self.scratch.len()].copy_from_slice(&self.scratch);
        self.control.push_back((to, self.scratch.len(), bytes));
    }

    /// Lowers the next walk to `deadline` if it comes first.
    fn schedule(&mut self, deadline: Option<Instant>) {
        self.next_timeout = earliest(self.next_timeout, deadline);
    }

    fn free_slot(&mut self, client: ClientIndex) {
        if let Some(slot) = self.slots[client.as_usize()].take() {
            self.by_addr.remove(&slot.addr);
            self.by_client_id.remove(&slot.client_id);
        }
    }
}

fn seal_keepalive(
    out: &mut Vec<u8>,
    slot: &mut Slot,
    protocol_id: u64,
    client: ClientIndex,
    max_clients: u16,
) {
    packet::seal(
        out,
        PacketType::KeepAlive,
        slot.sequence,
        protocol_id,
        &slot.s2c,
        |b| {
            b.extend_from_slice(&u32::from(client.0).to_le_bytes());
            b.extend_from_slice(&u32::from(max_clients).to_le_bytes());
        },
    );
    slot.sequence += 1;
}

/// The earlier of two optional instants; `None` stands for never.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn timeout_of(seconds: i32) -> Option<Duration> {
    (seconds >= 0).then(|| Duration::from_secs(seconds as u64))
}

fn bucket_of(ip: IpAddr, salt: u64) -> usize {
    // FNV-1a over the address bytes, keyed with a per-start salt so that nobody can pick
    // addresses that all land in one victim's bucket.
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ salt;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    match ip {
        IpAddr::V4(v4) => v4.octets().into_iter().for_each(&mut eat),
        // An IPv6 host usually owns a /64: limit the prefix, not each address in it.
        IpAddr::V6(v6) => v6.octets()[..8].iter().copied().for_each(&mut eat),
    }
    (h as usize) % RATE_BUCKETS
}

#[cfg(test)]
mod tests;
