//! The client side of netcode.io 1.02.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tickforge_sim::hint::{prefetch, prefetch_item};

use super::aead::PacketKey;

use super::packet::{self, PacketType};
use super::replay::ReplayWindow;
use super::token::ConnectToken;
use super::{
    CHALLENGE_TOKEN_BYTES, MAX_PAYLOAD_BYTES, PACKET_SEND_INTERVAL, REDUNDANT_DISCONNECTS,
};
use crate::{ClientIndex, DisconnectReason};

/// Where a client is in its connection's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientState {
    /// Sending connection requests at 10 Hz.
    SendingRequest,
    /// Sending challenge responses at 10 Hz.
    SendingResponse,
    /// Connected, with this slot among the server's `max_clients`.
    Connected {
        /// The slot.
        client: ClientIndex,
        /// The server's slot count.
        max_clients: u32,
    },
    /// Not connected, and why.
    Disconnected(DisconnectReason),
}

/// What the client learnt from a datagram or a timeout.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientEvent<'a> {
    /// The server confirmed the connection.
    Connected(ClientIndex),
    /// A payload from the server, decrypted in place.
    Payload(&'a [u8]),
    /// The connection ended (or never began).
    Disconnected(DisconnectReason),
}

/// Client side of netcode.io 1.02. Performs no I/O and reads no clock.
///
/// Send what [`Client::poll_transmit`] writes to the address it returns; feed the server's
/// datagrams to [`Client::handle_datagram`]; call [`Client::handle_timeout`] every tick.
pub struct Client {
    token: ConnectToken,
    server: usize,
    c2s: PacketKey,
    s2c: PacketKey,
    sequence: u64,
    replay: ReplayWindow,
    state: ClientState,
    started: Instant,
    last_send: Option<Instant>,
    last_recv: Instant,
    challenge: Option<(u64, [u8; CHALLENGE_TOKEN_BYTES])>,
    disconnects_to_send: u32,
    /// Datagrams dropped: malformed, forged, replayed, from elsewhere, or unexpected.
    pub dropped: u64,
}

impl Client {
    /// Starts connecting with `token` at `now`, to the token's first server.
    pub fn new(token: ConnectToken, now: Instant) -> Self {
        let state = if token.server_addresses.is_empty() {
            ClientState::Disconnected(DisconnectReason::InvalidToken)
        } else {
            ClientState::SendingRequest
        };
        Client {
            c2s: packet::cipher(&token.client_to_server_key),
            s2c: packet::cipher(&token.server_to_client_key),
            token,
            server: 0,
            sequence: 0,
            replay: ReplayWindow::new(),
            state,
            started: now,
            last_send: None,
            last_recv: now,
            challenge: None,
            disconnects_to_send: 0,
            dropped: 0,
        }
    }

    /// Current state.
    pub fn state(&self) -> ClientState {
        self.state
    }

    /// True once the server confirmed, until the connection ends.
    pub fn is_connected(&self) -> bool {
        matches!(self.state, ClientState::Connected { .. })
    }

    /// Starts loading what [`Client::handle_datagram`] reads for the server's next packet:
    /// a hint, which changes nothing. `deep` false, the connection's own fields (its keys,
    /// state, times, the replay window); `deep` true, given once those have arrived, what
    /// they point to (the server's address). A process that runs hundreds of clients finds
    /// each one's lines cold.
    pub fn prefetch(&self, deep: bool) {
        if deep {
            if let Some(addr) = self.token.server_addresses.get(self.server_index()) {
                prefetch(addr);
            }
            return;
        }
        prefetch(&self.server);
        prefetch(&self.token.server_addresses);
        prefetch_item(&self.s2c);
        prefetch(&self.state);
        prefetch(&self.last_recv);
        self.replay.prefetch();
    }

    /// The server address in use.
    pub fn server_addr(&self) -> SocketAddr {
        self.token.server_addresses[self.server_index()]
    }

    /// Where the server address in use is in the token's list: the last once past it.
    fn server_index(&self) -> usize {
        (self.server).min(self.token.server_addresses.len().saturating_sub(1))
    }

    fn timeout(&self) -> Option<Duration> {
        (self.token.timeout_seconds >= 0)
            .then(|| Duration::from_secs(self.token.timeout_seconds as u64))
    }

    /// Handles one datagram from `from`, decrypting in place.
    pub fn handle_datagram<'a>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &'a mut [u8],
    ) -> Option<ClientEvent<'a>> {
        if from != self.server_addr() || matches!(self.state, ClientState::Disconnected(_)) {
            self.dropped += 1;
            return None;
        }
        let accept = |t| {
            matches!(
                t,
                PacketType::Denied
                    | PacketType::Challenge
                    | PacketType::KeepAlive
                    | PacketType::Payload
                    | PacketType::Disconnect
            )
        };
        let opened = match packet::open(
            data,
            self.token.protocol_id,
            &self.s2c,
            accept,
            Some(&mut self.replay),
        ) {
            Ok(o) => o,
            Err(_) => {
                self.dropped += 1;
                return None;
            }
        };
        match (opened.packet_type, self.state) {
            (PacketType::Denied, ClientState::SendingRequest | ClientState::SendingResponse) => {
                self.next_server_or(DisconnectReason::ServerFull)
                    .map(ClientEvent::Disconnected)
            }
            (PacketType::Challenge, ClientState::SendingRequest) => {
                let sequence = u64::from_le_bytes(opened.body[..8].try_into().expect("8 bytes"));
                let token: [u8; CHALLENGE_TOKEN_BYTES] =
                    opened.body[8..].try_into().expect("300 bytes");
                self.challenge = Some((sequence, token));
                self.state = ClientState::SendingResponse;
                self.last_recv = now;
                self.last_send = None;
                None
            }
            (PacketType::KeepAlive, ClientState::SendingResponse) => {
                let index = u32::from_le_bytes(opened.body[..4].try_into().expect("4 bytes"));
                let max_clients =
                    u32::from_le_bytes(opened.body[4..8].try_into().expect("4 bytes"));
                let Ok(index) = u16::try_from(index) else {
                    self.dropped += 1;
                    return None;
                };
                let client = ClientIndex(index);
                self.state = ClientState::Connected {
                    client,
                    max_clients,
                };
                self.last_recv = now;
                Some(ClientEvent::Connected(client))
            }
            (PacketType::KeepAlive, ClientState::Connected { .. }) => {
                self.last_recv = now;
                None
            }
            (PacketType::Payload, ClientState::Connected { .. }) => {
                self.last_recv = now;
                Some(ClientEvent::Payload(opened.body))
            }
            (PacketType::Disconnect, ClientState::Connected { .. }) => {
                self.state = ClientState::Disconnected(DisconnectReason::ServerClosed);
                Some(ClientEvent::Disconnected(DisconnectReason::ServerClosed))
            }
            _ => {
                self.dropped += 1;
                None
            }
        }
    }

    /// On a failure while connecting, moves to the token's next server, or ends with
    /// `reason` when there is none.
    fn next_server_or(&mut self, reason: DisconnectReason) -> Option<DisconnectReason> {
        if self.server + 1 < self.token.server_addresses.len() {
            self.server += 1;
            self.state = ClientState::SendingRequest;
            self.challenge = None;
            self.last_send = None;
            self.replay = ReplayWindow::new();
            return None;
        }
        self.state = ClientState::Disconnected(reason);
        Some(reason)
    }

    /// Ends the connection when the token expired or the server went silent; returns the
    /// reason when it did.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<DisconnectReason> {
        let lifetime = self
            .token
            .expire_timestamp
            .saturating_sub(self.token.create_timestamp);
        let connecting = matches!(
            self.state,
            ClientState::SendingRequest | ClientState::SendingResponse
        );
        if connecting && now.saturating_duration_since(self.started).as_secs() >= lifetime {
            self.state = ClientState::Disconnected(DisconnectReason::TokenExpired);
            return Some(DisconnectReason::TokenExpired);
        }
        let silent = now.saturating_duration_since(self.last_recv);
        if self.timeout().is_none_or(|t| silent < t) {
            return None;
        }
        match self.state {
            ClientState::SendingRequest => {
                self.last_recv = now;
                self.next_server_or(DisconnectReason::ConnectTimedOut)
            }
            ClientState::SendingResponse => {
                self.last_recv = now;
                self.next_server_or(DisconnectReason::ResponseTimedOut)
            }
            ClientState::Connected { .. } => {
                self.state = ClientState::Disconnected(DisconnectReason::TimedOut);
                Some(DisconnectReason::TimedOut)
            }
            ClientState::Disconnected(_) => None,
        }
    }

    /// Writes the next packet due at `now` into `buf` (cleared first) and returns where it
    /// goes: a request or response (10 Hz while connecting), a keep-alive (after 100 ms
    /// without sending), or one of the disconnect packets after [`Client::disconnect`].
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<SocketAddr> {
        let protocol_id = self.token.protocol_id;
        if self.disconnects_to_send > 0 {
            self.disconnects_to_send -= 1;
            self.seal(buf, PacketType::Disconnect, |_| {});
            return Some(self.server_addr());
        }
        if self
            .last_send
            .is_some_and(|t| now.saturating_duration_since(t) < PACKET_SEND_INTERVAL)
        {
            return None;
        }
        match self.state {
            ClientState::SendingRequest => {
                let t = &self.token;
                packet::write_request(buf, protocol_id, t.expire_timestamp, &t.nonce, &t.private);
            }
            ClientState::SendingResponse => {
                let (sequence, token) =
                    self.challenge.expect("a challenge is stored in this state");
                self.seal(buf, PacketType::Response, |b| {
                    b.extend_from_slice(&sequence.to_le_bytes());
                    b.extend_from_slice(&token);
                });
            }
            ClientState::Connected { .. } => {
                self.seal(buf, PacketType::KeepAlive, |b| b.extend_from_slice(&[0; 8]));
            }
            ClientState::Disconnected(_) => return None,
        }
        self.last_send = Some(now);
        Some(self.server_addr())
    }

    /// Seals `payload` (1..=1200 bytes) into `out` (cleared first); `None` when not connected
    /// or the size is invalid.
    pub fn send_payload(
        &mut self,
        now: Instant,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Option<SocketAddr> {
        if !self.is_connected() || payload.is_empty() || payload.len() > MAX_PAYLOAD_BYTES {
            return None;
        }
        self.seal(out, PacketType::Payload, |b| b.extend_from_slice(payload));
        self.last_send = Some(now);
        Some(self.server_addr())
    }

    /// Closes the connection; the next polls send ten disconnect packets.
    pub fn disconnect(&mut self) {
        if self.is_connected() {
            self.disconnects_to_send = REDUNDANT_DISCONNECTS;
        }
        self.state = ClientState::Disconnected(DisconnectReason::ClientClosed);
    }

    fn seal(
        &mut self,
        out: &mut Vec<u8>,
        packet_type: PacketType,
        body: impl FnOnce(&mut Vec<u8>),
    ) {
        packet::seal(
            out,
            packet_type,
            self.sequence,
            self.token.protocol_id,
            &self.c2s,
            body,
        );
        self.sequence += 1;
    }
}
