//! tickforge's network protocol, with no I/O and no clock.
//!
//! What it does, bottom up:
//! - [`wire`]: byte-exact encoding with checked reads;
//! - [`netcode`]: netcode.io 1.02 connections, both sides: connect tokens, the encrypted
//!   handshake, replay protection, keep-alives, timeouts;
//! - [`reliable`]: inside each netcode payload, packet acks, round-trip and loss
//!   estimates, a reliable-ordered channel with fragmentation for events, and one tagged
//!   unreliable message per packet for snapshots and inputs;
//! - [`msg`]: the messages a match exchanges over that, and [`user_data`]: what a
//!   tickforge connect token says about its holder.
//!
//! Time comes in as a parameter (`now: Instant`) and datagrams go in and out as bytes, so
//! every state machine is tested tick by tick without sockets or sleeps (see the
//! `testkit` crate's simulator).
//!
//! What it does not do: open sockets, read the OS clock or its random source, or know the
//! game. The `io` crate drives it; the `server` and `bots` crates decide what a payload
//! means.
//!
//! In order of importance: no datagram off the network can make it panic or allocate
//! without bound; no packet exceeds [`MAX_PACKET_BYTES`] of payload; the hot path
//! allocates nothing.

pub mod msg;
pub mod netcode;
pub mod reliable;
pub mod user_data;
pub mod wire;

/// Largest UDP payload tickforge ever sends or accepts (netcode.io's limit).
pub const MAX_PACKET_BYTES: usize = 1200;

/// Identifies a match on a server; carried in the connect request (later: the token).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MatchId(pub u32);

/// A connection slot on one transport server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientIndex(pub u16);

impl ClientIndex {
    /// The slot as an index into per-client arrays.
    pub fn as_usize(self) -> usize {
        usize::from(self.0)
    }
}

impl std::fmt::Display for MatchId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DisconnectReason {
    /// Nothing heard from the peer for the connection timeout.
    TimedOut,
    /// The server never answered the connection request.
    ConnectTimedOut,
    /// The server sent a challenge but never confirmed the response.
    ResponseTimedOut,
    /// The connect token expired before the connection was made.
    TokenExpired,
    /// The connect token does not parse.
    InvalidToken,
    /// The server had no free connection slot.
    ServerFull,
    /// The server refused this client (for example: no such match, or the match is full).
    Refused,
    /// The server ended the connection (shutdown, match over, kicked).
    ServerClosed,
    /// The client ended the connection.
    ClientClosed,
    /// The same address connected again with a new session.
    Replaced,
    /// The peer broke the protocol above the transport (bounds, floods, garbage).
    Misbehaved,
}

impl DisconnectReason {
    /// The reason as a report key: `timed_out`, `server_closed`, …
    pub fn name(self) -> &'static str {
        match self {
            DisconnectReason::TimedOut => "timed_out",
            DisconnectReason::ConnectTimedOut => "connect_timed_out",
            DisconnectReason::ResponseTimedOut => "response_timed_out",
            DisconnectReason::TokenExpired => "token_expired",
            DisconnectReason::InvalidToken => "invalid_token",
            DisconnectReason::ServerFull => "server_full",
            DisconnectReason::Refused => "refused",
            DisconnectReason::ServerClosed => "server_closed",
            DisconnectReason::ClientClosed => "client_closed",
            DisconnectReason::Replaced => "replaced",
            DisconnectReason::Misbehaved => "misbehaved",
        }
    }
}
