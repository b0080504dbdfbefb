//! Messages a match exchanges inside a connection's reliability packets.
//!
//! ```text
//! unreliable, one per packet (the reliable layer's tag in brackets):
//!   client → server   1 Input     seq u32 | view_tick u32 | view_frac u8 | input bytes [tag = seq]
//!   server → client   1 Snapshot  tick u32 | input_ack u32 | body        [tag = tick]
//! reliable, ordered, server → client:
//!   1 Welcome     match_id u32 | seat u16 | tick_hz u16 | seats u16 | entities u16
//!                 | schema u32 | epoch u32
//!   6 Epoch       epoch u32
//!   7 Game        the game's own event bytes, to the end
//! reliable, ordered, client → server:
//!   the game's own message bytes, as they are (the runtime hands them to the game)
//! ```
//!
//! Kinds 2 to 5 were the reference shooter's events before the game boundary; they now
//! travel inside `Game` in the shooter's own format (`tickforge_shooter::event`), and the
//! kinds stay unused here so an old client fails loudly rather than misreading.
//!
//! `schema` in the welcome is the fingerprint of the game's replicated-field table
//! (`Schema::fingerprint`): a client built with another table refuses the match rather than
//! decoding its snapshots as nonsense. `entities` is how many network ids the match's
//! snapshots may carry (`0..entities`).
//!
//! A match that ends starts over (a new world, ticks from 0, replication afresh) under the
//! next `epoch`: every seated client is sent [`Event::Epoch`] first, and its snapshots of the
//! new match only once the server has the event acknowledged (with everything queued
//! before it), so a client that resets its snapshot decoder on the event never applies a
//! new match's snapshot to the old match's baselines, whatever its tick.
//!
//! `seq` numbers a client's inputs from 1; `input_ack` is the newest input sequence the
//! server had applied for that client when it built the snapshot, so the client can time
//! each input from sending to the first snapshot that reflects it (the Quake paper's
//! response time). Bodies (the input and the snapshot) are opaque here: the game decodes
//! its input, and the `replication` crate encodes snapshots. [`link_config`] is the reliability setting both ends
//! of a tickforge connection use.

use std::time::Duration;

use crate::reliable::ReliableConfig;
use crate::wire::{Reader, Truncated, Writer};

/// A payload that is not a message this side accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MsgError {
    /// Shorter than its kind needs.
    #[error("message truncated")]
    Truncated,
    /// First byte names no message of this direction.
    #[error("unknown message kind {0}")]
    UnknownKind(u8),
    /// Bytes after the end of a fixed-size message.
    #[error("message has trailing bytes")]
    TrailingBytes,
    /// A field holds a value its type does not take (a flag byte other than 0 or 1), so
    /// every message has exactly one encoding.
    #[error("message field out of range")]
    BadValue,
}

impl From<Truncated> for MsgError {
    fn from(_: Truncated) -> Self {
        MsgError::Truncated
    }
}

/// A message from a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientMsg<'a> {
    /// The player's command for its next tick.
    Input {
        /// Numbers inputs from 1, one per client tick.
        seq: u32,
        /// The server tick of the world the player was looking at when it made this
        /// command: where a shot in it is tested (lag compensation).
        view_tick: u32,
        /// How far past `view_tick` toward the next tick the player's view was, in 1/256
        /// of a tick (clients interpolate between snapshots).
        view_frac: u8,
        /// The game's encoded input.
        cmd: &'a [u8],
    },
}

const INPUT: u8 = 1;
const SNAPSHOT: u8 = 1;
const WELCOME: u8 = 1;
const EPOCH: u8 = 6;
const GAME: u8 = 7;

impl<'a> ClientMsg<'a> {
    /// Decodes a client payload.
    pub fn decode(payload: &'a [u8]) -> Result<Self, MsgError> {
        let mut r = Reader::new(payload);
        match r.u8()? {
            INPUT => Ok(ClientMsg::Input {
                seq: r.u32()?,
                view_tick: r.u32()?,
                view_frac: r.u8()?,
                cmd: r.rest(),
            }),
            k => Err(MsgError::UnknownKind(k)),
        }
    }

    /// Appends the encoded message to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        match *self {
            ClientMsg::Input {
                seq,
                view_tick,
                view_frac,
                cmd,
            } => {
                w.u8(INPUT);
                w.u32(seq);
                w.u32(view_tick);
                w.u8(view_frac);
                w.bytes(cmd);
            }
        }
    }
}

/// A message from the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerMsg<'a> {
    /// The state of the match after `tick`.
    Snapshot {
        /// The server tick this snapshot follows.
        tick: u32,
        /// Newest input sequence of this client applied by then (0: none yet).
        input_ack: u32,
        /// The encoded state.
        body: &'a [u8],
    },
}

/// Bytes of a snapshot message before its body.
pub const SNAPSHOT_HEADER_BYTES: usize = 1 + 4 + 4;

impl<'a> ServerMsg<'a> {
    /// Decodes a server payload.
    pub fn decode(payload: &'a [u8]) -> Result<Self, MsgError> {
        let mut r = Reader::new(payload);
        match r.u8()? {
            SNAPSHOT => Ok(ServerMsg::Snapshot {
                tick: r.u32()?,
                input_ack: r.u32()?,
                body: r.rest(),
            }),
            k => Err(MsgError::UnknownKind(k)),
        }
    }

    /// Appends the encoded message to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        match *self {
            ServerMsg::Snapshot {
                tick,
                input_ack,
                body,
            } => {
                w.u8(SNAPSHOT);
                w.u32(tick);
                w.u32(input_ack);
                w.bytes(body);
            }
        }
    }
}

/// A reliable, ordered message from the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Sent once when a client is seated: where it is, how fast the match ticks, and what
    /// its snapshots carry.
    Welcome {
        /// The match.
        match_id: u32,
        /// The client's seat.
        seat: u16,
        /// The match's tick rate.
        tick_hz: u16,
        /// The match's seats.
        seats: u16,
        /// Network ids the match's snapshots may carry: every id is below this.
        entities: u16,
        /// Fingerprint of the game's replicated-field table (`Schema::fingerprint`).
        schema: u32,
        /// How many times the match has started over since it was made (0: its first run).
        epoch: u32,
    },
    /// The match ended and started over: a new game whose ticks count from 0 again, with
    /// replication afresh. Sent to every seated client, before any snapshot of the new
    /// match; the client drops its snapshot baselines and its view of the old match.
    Epoch {
        /// The new run's epoch, one more than the last (see [`Event::Welcome`]).
        epoch: u32,
    },
    /// An event of the game, in the game's own format.
    Game(&'a [u8]),
}

impl<'a> Event<'a> {
    /// Decodes an event; trailing bytes after a fixed-size event are an error.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, MsgError> {
        let mut r = Reader::new(bytes);
        let e = match r.u8()? {
            WELCOME => Event::Welcome {
                match_id: r.u32()?,
                seat: r.u16()?,
                tick_hz: r.u16()?,
                seats: r.u16()?,
                entities: r.u16()?,
                schema: r.u32()?,
                epoch: r.u32()?,
            },
            EPOCH => Event::Epoch { epoch: r.u32()? },
            GAME => Event::Game(r.rest()),
            k => return Err(MsgError::UnknownKind(k)),
        };
        if r.remaining() != 0 {
            return Err(MsgError::TrailingBytes);
        }
        Ok(e)
    }

    /// Appends the encoded event to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        match *self {
            Event::Welcome {
                match_id,
                seat,
                tick_hz,
                seats,
                entities,
                schema,
                epoch,
            } => {
                w.u8(WELCOME);
                w.u32(match_id);
                w.u16(seat);
                w.u16(tick_hz);
                w.u16(seats);
                w.u16(entities);
                w.u32(schema);
                w.u32(epoch);
            }
            Event::Epoch { epoch } => {
                w.u8(EPOCH);
                w.u32(epoch);
            }
            Event::Game(bytes) => {
                w.u8(GAME);
                w.bytes(bytes);
            }
        }
    }
}

/// The reliability settings both ends of a tickforge connection use (they must agree).
///
/// Sized for a game connection rather than a file transfer: events of up to 16 KiB, 64
/// of them in flight, about 70 KiB reserved per connection (the defaults reserve 440 KiB,
/// too much for a worker holding hundreds of clients).
pub fn link_config() -> ReliableConfig {
    ReliableConfig {
        max_packet_bytes: crate::MAX_PACKET_BYTES,
        reliable_reserved_bytes: 256,
        fragment_bytes: 240,
        max_message_bytes: 16 << 10,
        reassembly_bytes: 32 << 10,
        send_queue_messages: 256,
        send_queue_bytes: 32 << 10,
        receive_window_messages: 64,
        packet_history: 256,
        initial_rtt: Duration::from_millis(100),
        resend_margin: Duration::from_micros(15_625), // two ticks at 128 Hz
        min_resend_after: Duration::from_millis(30),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_message_round_trips() {
        let client = [ClientMsg::Input {
            seq: 77,
            view_tick: 5,
            view_frac: 200,
            cmd: &[1, 2, 3],
        }];
        for m in client {
            let mut buf = Vec::new();
            m.encode(&mut buf);
            assert_eq!(ClientMsg::decode(&buf), Ok(m));
        }
        let server = [ServerMsg::Snapshot {
            tick: 9,
            input_ack: 8,
            body: &[4; 10],
        }];
        for m in server {
            let mut buf = Vec::new();
            m.encode(&mut buf);
            assert_eq!(ServerMsg::decode(&buf), Ok(m));
        }
        let mut buf = Vec::new();
        ServerMsg::Snapshot {
            tick: 0,
            input_ack: 0,
            body: &[],
        }
        .encode(&mut buf);
        assert_eq!(buf.len(), SNAPSHOT_HEADER_BYTES);
    }

    #[test]
    fn every_event_round_trips_and_refuses_trailing_bytes() {
        let fixed = [
            Event::Welcome {
                match_id: 3,
                seat: 4,
                tick_hz: 128,
                seats: 10,
                entities: 12,
                schema: 0xdead_beef,
                epoch: 0,
            },
            Event::Welcome {
                match_id: 3,
                seat: 999,
                tick_hz: 30,
                seats: 1000,
                entities: 1024,
                schema: 1,
                epoch: 0x0102_0304,
            },
            Event::Epoch { epoch: 1 },
            Event::Epoch { epoch: u32::MAX },
        ];
        for e in fixed {
            let mut buf = Vec::new();
            e.encode(&mut buf);
            assert_eq!(Event::decode(&buf), Ok(e));
            buf.push(0);
            assert_eq!(Event::decode(&buf), Err(MsgError::TrailingBytes));
            buf.truncate(buf.len() - 2);
            assert_eq!(Event::decode(&buf), Err(MsgError::Truncated));
        }
        for bytes in [&[][..], &[2, 0, 0, 0][..]] {
            let mut buf = Vec::new();
            Event::Game(bytes).encode(&mut buf);
            assert_eq!(buf.len(), 1 + bytes.len());
            assert_eq!(Event::decode(&buf), Ok(Event::Game(bytes)));
        }
        for old_kind in 2..=5 {
            assert_eq!(
                Event::decode(&[old_kind, 0, 0, 0]),
                Err(MsgError::UnknownKind(old_kind))
            );
        }
    }

    #[test]
    fn the_link_config_is_valid_and_small() {
        let c = link_config();
        assert_eq!(c.validate(), Ok(()));
        assert!(
            c.send_queue_bytes + c.reassembly_bytes + c.receive_window_messages * c.fragment_bytes
                < 96 << 10
        );
    }

    #[test]
    fn bad_kinds_and_short_bodies_are_errors() {
        assert_eq!(ClientMsg::decode(&[]), Err(MsgError::Truncated));
        assert_eq!(ClientMsg::decode(&[9]), Err(MsgError::UnknownKind(9)));
        assert_eq!(ClientMsg::decode(&[INPUT, 1, 2]), Err(MsgError::Truncated));
        assert_eq!(
            ServerMsg::decode(&[SNAPSHOT, 0, 0, 0, 0, 0]),
            Err(MsgError::Truncated)
        );
    }

    proptest! {
        #[test]
        fn decoders_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = ClientMsg::decode(&data);
            let _ = ServerMsg::decode(&data);
            let _ = Event::decode(&data);
        }
    }
}
