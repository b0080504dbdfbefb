//! Reliability and channels inside netcode payloads: packet acks, round-trip and loss
//! estimates, a reliable-ordered channel with fragmentation, and one unreliable tagged
//! message per packet.
//!
//! One [`Endpoint`] per connection and side. It performs no I/O and reads no clock: time
//! comes in as `now`, packets go out as bytes in a caller-owned buffer. Each tick the caller
//!
//! 1. hands every payload received to [`Endpoint::read_packet`], which returns the
//!    unreliable message it carried, if any;
//! 2. drains [`Endpoint::poll_reliable`] (reliable messages, exactly once, in send order)
//!    and [`Endpoint::poll_acked_tag`] (tags of unreliable messages the peer received: the
//!    server's delta-compression baselines);
//! 3. queues events with [`Endpoint::send_reliable`];
//! 4. writes one packet with [`Endpoint::write_packet`] and sends it as one payload.
//!
//! A packet is a [`PacketHeader`] (its sequence and acks, drawn in `header.rs`) followed by
//! sections (drawn in `section.rs`): whole reliable messages, fragments of long ones, and at
//! most one unreliable message. There are no per-message acks: a packet's ack acknowledges
//! everything in it, which is why a packet is accepted whole or dropped whole.
//!
//! What it does not do: encrypt or authenticate (netcode does, underneath), time out a
//! connection (the transport does), or pace sending (one packet per tick is the caller's).
//!
//! In order of importance: no packet off the network panics it or makes it allocate; every
//! byte of memory is reserved by [`Endpoint::new`] from a [`ReliableConfig`], and a peer
//! that would need more gets a [`ReliableError`] to disconnect it with; no packet exceeds
//! [`ReliableConfig::max_packet_bytes`]; steady-state sending and receiving allocate nothing.

mod acks;
mod config;
mod endpoint;
#[cfg(test)]
mod fuzz_tests;
mod header;
#[cfg(test)]
mod honest_tests;
mod recv;
mod section;
mod send;
mod seq;
mod stats;

pub use config::{ConfigError, ReliableConfig, MAX_WINDOW};
pub use endpoint::{Endpoint, PacketWritten};
pub use header::{PacketHeader, ACK_BITS, HEADER_BYTES};
pub use seq::Seq16;
pub use stats::LinkStats;

use crate::wire::Truncated;

/// Why a message could not be queued, or why a packet from the peer was refused.
///
/// The variants from [`Endpoint::read_packet`] mean the peer is broken or hostile; the
/// caller disconnects it with the error as the reason. [`ReliableError::SendQueueFull`]
/// means the peer stopped acknowledging; that too ends the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReliableError {
    /// A message to send is longer than `max_message_bytes`.
    #[error("message of {bytes} bytes exceeds the {max_bytes}-byte limit")]
    MessageTooLarge {
        /// Its length.
        bytes: usize,
        /// The configured limit.
        max_bytes: usize,
    },
    /// The send queue is full because the peer has not acknowledged what was sent.
    #[error("send queue full: {messages} messages, {bytes} bytes not acknowledged by the peer")]
    SendQueueFull {
        /// Messages held.
        messages: usize,
        /// Bytes held.
        bytes: usize,
    },
    /// A packet longer than `max_packet_bytes`.
    #[error("packet of {0} bytes exceeds the packet limit")]
    PacketTooLarge(usize),
    /// A packet ended inside a field it announced.
    #[error("packet truncated")]
    Truncated,
    /// A section kind this version does not know.
    #[error("unknown section kind {0}")]
    UnknownSection(u8),
    /// Two unreliable messages in one packet.
    #[error("two unreliable sections in one packet")]
    TwoUnreliable,
    /// A whole message longer than `fragment_bytes`: it should have come in fragments.
    #[error("whole message {id} of {bytes} bytes is longer than a fragment")]
    WholeMessageTooLong {
        /// Its id.
        id: Seq16,
        /// Its length.
        bytes: usize,
    },
    /// A message id a whole receive window or more past the first one still missing.
    #[error("message id {id} is outside the receive window starting at {next_expected}")]
    MessageOutOfWindow {
        /// The id received.
        id: Seq16,
        /// The first id not yet received.
        next_expected: Seq16,
    },
    /// A fragment whose index, count or length breaks the limits.
    #[error("fragment {index}/{count} of message {id} with {bytes} bytes breaks the limits")]
    BadFragment {
        /// Its message id.
        id: Seq16,
        /// Its index.
        index: u16,
        /// The fragment count it announced.
        count: u16,
        /// Its body length.
        bytes: usize,
    },
    /// A fragment announcing another count or cell than earlier fragments of its message.
    #[error("fragments of message {id} disagree on their count or cell")]
    FragmentMismatch {
        /// The message id.
        id: Seq16,
    },
}

impl From<Truncated> for ReliableError {
    fn from(_: Truncated) -> Self {
        ReliableError::Truncated
    }
}
