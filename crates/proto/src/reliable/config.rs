//! Limits and timing of an [`Endpoint`](super::Endpoint): every bound on its memory lives here.

use std::time::Duration;

use super::header::{ACK_BITS, HEADER_BYTES};
use super::section::FRAGMENT_HEADER_BYTES;
use crate::MAX_PACKET_BYTES;

/// Largest receive window, send queue or packet history: a quarter of the sequence space,
/// so ids in flight are never ambiguous under the half-range rule.
pub const MAX_WINDOW: usize = 1 << 14;

/// Limits and timing of one [`Endpoint`](super::Endpoint).
///
/// All memory is reserved from these numbers when the endpoint is made. Both ends of a
/// connection must use the same `max_packet_bytes`, `fragment_bytes`, `max_message_bytes`,
/// `reassembly_bytes` and `receive_window_messages`: the receiver treats a peer exceeding
/// them as broken ([`ReliableError`](super::ReliableError)).
///
/// With the defaults an endpoint reserves about 440 KiB: 128 KiB of send queue, 128 KiB of
/// reassembly ring, 60 KiB of reorder slots and some 120 KiB of records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReliableConfig {
    /// Largest packet written or accepted, header included, in bytes. Protects the payload
    /// limit of the transport underneath.
    pub max_packet_bytes: usize,
    /// Bytes of every packet that reliable sections may use however large the unreliable
    /// message is. The unreliable message may always use the rest
    /// ([`Endpoint::max_unreliable_bytes`](super::Endpoint::max_unreliable_bytes)), so
    /// neither kind starves the other.
    pub reliable_reserved_bytes: usize,
    /// Body bytes of one fragment. Messages up to this size travel whole; longer ones are cut
    /// into fragments of exactly this size (the last one shorter).
    pub fragment_bytes: usize,
    /// Largest reliable message, in bytes.
    pub max_message_bytes: usize,
    /// Bytes of the receiver's reassembly ring, where fragmented messages are put back
    /// together: `reassembly_bytes / fragment_bytes` cells of one fragment, at least enough
    /// for the largest message and at most 65535. The sender keeps the fragmented messages
    /// in flight within it, so several long messages travel at once.
    pub reassembly_bytes: usize,
    /// Most messages queued and not yet acknowledged. Bounds the send queue when the peer
    /// stops acknowledging.
    pub send_queue_messages: usize,
    /// Most message bytes queued and not yet acknowledged. Bounds the send queue's bytes;
    /// at least `max_message_bytes`.
    pub send_queue_bytes: usize,
    /// Reliable message ids the receiver holds ahead of the next one it delivers (a power
    /// of two). Bounds the reorder buffer: `receive_window_messages * fragment_bytes` bytes.
    /// The sender keeps its messages in flight within it.
    pub receive_window_messages: usize,
    /// Packets remembered on each side for acks, duplicates and the loss estimate (a power
    /// of two, at least 64). Older packets arriving late are dropped as stale.
    pub packet_history: usize,
    /// Round-trip time assumed until the first ack measures one.
    pub initial_rtt: Duration,
    /// Added to the smoothed round trip (and twice its jitter) before a reliable section is
    /// sent again.
    pub resend_margin: Duration,
    /// Never resend a reliable section sooner than this after its last send.
    pub min_resend_after: Duration,
}

impl Default for ReliableConfig {
    fn default() -> Self {
        ReliableConfig {
            max_packet_bytes: MAX_PACKET_BYTES,
            // One full fragment section (11 + 240) beside the largest
            // unreliable message that always fits: 1200 - 8 - 256 - 7 = 929 bytes.
            reliable_reserved_bytes: 256,
            fragment_bytes: 240,
            // A map or loadout blob; needs at most 274 fragments.
            max_message_bytes: 64 * 1024,
            // 546 cells: two of the largest messages, or dozens of a few KiB, in flight.
            reassembly_bytes: 128 * 1024,
            send_queue_messages: 1024,
            // Two of the largest messages.
            send_queue_bytes: 128 * 1024,
            // 256 * 240 bytes = 60 KiB of reorder buffer.
            receive_window_messages: 256,
            // 2 s of packets at 128 Hz (VALORANT's tick; 7.8125 ms).
            packet_history: 256,
            // TCP's initial RTO is 1 s (RFC 6298); a game server expects far less.
            initial_rtt: Duration::from_millis(100),
            // Two 128 Hz ticks: the peer acks with its next packet, up to a tick later.
            resend_margin: Duration::from_micros(15_625),
            min_resend_after: Duration::from_millis(30),
        }
    }
}

/// A [`ReliableConfig`] whose numbers cannot work together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `max_packet_bytes` is above [`MAX_PACKET_BYTES`].
    #[error("max_packet_bytes {0} is above the {MAX_PACKET_BYTES}-byte packet limit")]
    PacketTooLarge(usize),
    /// `fragment_bytes` is zero.
    #[error("fragment_bytes must be at least 1")]
    FragmentEmpty,
    /// `reliable_reserved_bytes` cannot hold one full fragment, or exceeds the packet.
    #[error("reliable_reserved_bytes {reserved} must fit a fragment section ({FRAGMENT_HEADER_BYTES} + fragment_bytes) and fit in the packet after its {HEADER_BYTES}-byte header")]
    ReservedBytes {
        /// The configured value.
        reserved: usize,
    },
    /// `max_message_bytes` needs more than 65535 fragments.
    #[error("max_message_bytes needs more than 65535 fragments")]
    TooManyFragments,
    /// `reassembly_bytes` holds fewer cells than the largest message has fragments, or
    /// more than 65535.
    #[error(
        "reassembly_bytes must hold max_message_bytes in whole fragments, in at most 65535 cells"
    )]
    ReassemblyBytes,
    /// `send_queue_bytes` is below `max_message_bytes`.
    #[error("send_queue_bytes must hold at least one message of max_message_bytes")]
    SendQueueBytes,
    /// `send_queue_messages` is zero or above [`MAX_WINDOW`].
    #[error("send_queue_messages must be in 1..={MAX_WINDOW}")]
    SendQueueMessages,
    /// `receive_window_messages` is not a power of two in 1..=[`MAX_WINDOW`].
    #[error("receive_window_messages must be a power of two in 1..={MAX_WINDOW}")]
    ReceiveWindow,
    /// `packet_history` is not a power of two in 64..=[`MAX_WINDOW`].
    #[error("packet_history must be a power of two in 64..={MAX_WINDOW}")]
    PacketHistory,
}

impl ReliableConfig {
    /// Checks that the limits work together; [`Endpoint::new`](super::Endpoint::new)
    /// requires it. Call it where the configuration is parsed.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_packet_bytes > MAX_PACKET_BYTES {
            return Err(ConfigError::PacketTooLarge(self.max_packet_bytes));
        }
        if self.fragment_bytes == 0 {
            return Err(ConfigError::FragmentEmpty);
        }
        let budget = self.max_packet_bytes.saturating_sub(HEADER_BYTES);
        let fragment_section = FRAGMENT_HEADER_BYTES.saturating_add(self.fragment_bytes);
        if self.reliable_reserved_bytes < fragment_section || self.reliable_reserved_bytes > budget
        {
            return Err(ConfigError::ReservedBytes {
                reserved: self.reliable_reserved_bytes,
            });
        }
        if self.max_fragments() > usize::from(u16::MAX) {
            return Err(ConfigError::TooManyFragments);
        }
        let cells = self.reassembly_cells();
        if cells < self.max_fragments() || cells > usize::from(u16::MAX) {
            return Err(ConfigError::ReassemblyBytes);
        }
        if self.send_queue_bytes < self.max_message_bytes {
            return Err(ConfigError::SendQueueBytes);
        }
        if self.send_queue_messages == 0 || self.send_queue_messages > MAX_WINDOW {
            return Err(ConfigError::SendQueueMessages);
        }
        let w = self.receive_window_messages;
        if !w.is_power_of_two() || w > MAX_WINDOW {
            return Err(ConfigError::ReceiveWindow);
        }
        let h = self.packet_history;
        if !h.is_power_of_two() || h < 2 * usize::from(ACK_BITS) || h > MAX_WINDOW {
            return Err(ConfigError::PacketHistory);
        }
        Ok(())
    }

    /// Bytes after the packet header that sections may use.
    pub(crate) fn budget_bytes(&self) -> usize {
        self.max_packet_bytes - HEADER_BYTES
    }

    /// Fragments of the largest message.
    pub(crate) fn max_fragments(&self) -> usize {
        self.max_message_bytes.div_ceil(self.fragment_bytes)
    }

    /// Cells of one fragment in the reassembly ring.
    pub(crate) fn reassembly_cells(&self) -> usize {
        self.reassembly_bytes / self.fragment_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_fits_a_packet() {
        let c = ReliableConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.max_packet_bytes, MAX_PACKET_BYTES);
        assert_eq!(c.max_fragments(), 274);
    }

    #[test]
    fn each_broken_limit_is_reported() {
        let ok = ReliableConfig::default();
        let cases = [
            (
                ReliableConfig {
                    max_packet_bytes: MAX_PACKET_BYTES + 1,
                    ..ok
                },
                ConfigError::PacketTooLarge(MAX_PACKET_BYTES + 1),
            ),
            (
                ReliableConfig {
                    fragment_bytes: 0,
                    ..ok
                },
                ConfigError::FragmentEmpty,
            ),
            (
                ReliableConfig {
                    fragment_bytes: 246,
                    ..ok
                },
                ConfigError::ReservedBytes { reserved: 256 },
            ),
            (
                ReliableConfig {
                    max_packet_bytes: 200,
                    ..ok
                },
                ConfigError::ReservedBytes { reserved: 256 },
            ),
            (
                ReliableConfig {
                    fragment_bytes: 1,
                    reliable_reserved_bytes: 12,
                    max_message_bytes: 70_000,
                    send_queue_bytes: 70_000,
                    reassembly_bytes: 70_000,
                    ..ok
                },
                ConfigError::TooManyFragments,
            ),
            (
                ReliableConfig {
                    reassembly_bytes: 64 * 1024,
                    ..ok
                },
                ConfigError::ReassemblyBytes,
            ),
            (
                ReliableConfig {
                    send_queue_bytes: 1000,
                    ..ok
                },
                ConfigError::SendQueueBytes,
            ),
            (
                ReliableConfig {
                    send_queue_messages: 0,
                    ..ok
                },
                ConfigError::SendQueueMessages,
            ),
            (
                ReliableConfig {
                    receive_window_messages: 100,
                    ..ok
                },
                ConfigError::ReceiveWindow,
            ),
            (
                ReliableConfig {
                    packet_history: 32,
                    ..ok
                },
                ConfigError::PacketHistory,
            ),
        ];
        for (config, want) in cases {
            assert_eq!(config.validate(), Err(want), "{config:?}");
        }
    }
}
