//! netcode.io 1.02: connect-token-secured, encrypted UDP connections, both sides, sans-IO.
//!
//! Only holders of a connect token minted with the server's private key can connect; every
//! packet after the request is sealed with ChaCha20-Poly1305 under per-connection keys from
//! the token; replayed packets are dropped; the server never answers an address with more
//! bytes than it received from it. `../shared/protocol/netcode-1.02.md` is the summary of
//! the standard this module follows, with the reference's test vectors.
//!
//! - [`token`]: connect tokens (minting, parsing, sealing) and challenge tokens.
//! - [`packet`]: packet layout, sealing, and opening in the mandated order.
//! - [`replay`]: the overflow-safe replay window.
//! - [`Server`] and [`Client`]: the state machines. Neither reads a clock nor opens a
//!   socket: time comes in as `now`, datagrams go in and out as bytes.

pub mod aead;
pub mod client;
pub mod key;
pub mod packet;
pub mod replay;
pub mod server;
pub mod token;

pub use client::{Client, ClientEvent, ClientState};
pub use key::{KeyError, PrivateKey};
pub use server::{
    Server, ServerConfig, ServerDrop, ServerEvent, ServerStats, Transmit, MAX_TRANSMIT_BYTES,
};

/// `"NETCODE 1.02"` and its terminating zero.
pub const VERSION_INFO: &[u8; 13] = b"NETCODE 1.02\0";
/// Bytes of every key.
pub const KEY_BYTES: usize = 32;
/// Bytes of every authentication tag.
pub const MAC_BYTES: usize = 16;
/// Bytes of a connect token.
pub const CONNECT_TOKEN_BYTES: usize = 2048;
/// Bytes of a connect token's private part, tag included.
pub const PRIVATE_TOKEN_BYTES: usize = 1024;
/// Bytes of a challenge token, tag included.
pub const CHALLENGE_TOKEN_BYTES: usize = 300;
/// Bytes of user data in a token.
pub const USER_DATA_BYTES: usize = 256;
/// Most servers one token names.
pub const MAX_SERVERS_PER_TOKEN: u32 = 32;
/// Largest payload of one packet.
pub const MAX_PAYLOAD_BYTES: usize = crate::MAX_PACKET_BYTES;
/// Exact size of a connection request.
pub const CONNECTION_REQUEST_BYTES: usize = 1078;
/// Requests, responses and keep-alives go out at 10 Hz.
pub const PACKET_SEND_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);
/// Disconnect packets sent when a side closes a connection.
pub const REDUNDANT_DISCONNECTS: u32 = 10;
