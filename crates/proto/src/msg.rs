//! Messages a match exchanges inside a connection's reliability packets.
//!
//! ```text
//! unreliable, one per packet (the reliable layer's tag in brackets):
//!   client → server   1 Input     seq u32 | view_tick u32 | view_frac u8 | cmd bytes   [tag = seq]
//!   server → client   1 Snapshot  tick u32 | input_ack u32 | body        [tag = tick]
//! reliable, ordered, server → client:
//!   1 Welcome     match_id u32 | slot u8 | tick_hz u16 | players u8 | epoch u32
//!   2 ShotResult  seq u32 | tick u32 | victim u8 | part u8 | landed u8   0xff: none
//!   3 Alive       slot u8 | alive u8                               0 or 1
//!   4 Kill        killer u8 | victim u8 | part u8
//!   5 Round       round u8 | phase u8 | attackers u8 | defenders u8   phase: 0 buy,
//!                                                         1 combat, 2 ended, 3 match over
//!   6 Epoch       epoch u32
//! ```
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
//! response time). Bodies (the command and the snapshot) are opaque here: the
//! `replication` crate encodes them. [`link_config`] is the reliability setting both ends
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
        /// The encoded command.
        cmd: &'a [u8],
    },
}

const INPUT: u8 = 1;
const SNAPSHOT: u8 = 1;
const WELCOME: u8 = 1;
const SHOT_RESULT: u8 = 2;
const ALIVE: u8 = 3;
const KILL: u8 = 4;
const ROUND: u8 = 5;
const EPOCH: u8 = 6;

/// [`Event::ShotResult`]'s `victim` and `part` when the shot hit nobody.
pub const NONE: u8 = 0xff;

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
pub enum Event {
    /// Sent once when a client is seated: where it is and how fast the match ticks.
    Welcome {
        /// The match.
        match_id: u32,
        /// The client's player slot.
        slot: u8,
        /// The match's tick rate.
        tick_hz: u16,
        /// The match's seats: every entity id its snapshots carry is below this.
        players: u8,
        /// How many times the match has started over since it was made (0: its first run).
        epoch: u32,
    },
    /// The server's verdict on one shot of this client, sent to the shooter the tick it
    /// fired: what the hit-registration measurement compares with the client's own view.
    ShotResult {
        /// The input sequence whose command fired (a held command may fire again under the
        /// same sequence).
        seq: u32,
        /// The server tick the shot was fired in.
        tick: u32,
        /// The player slot hit, [`NONE`] for a miss.
        victim: u8,
        /// The hitbox hit (0 head, 1 body, 2 legs), [`NONE`] for a miss.
        part: u8,
        /// The hit did damage; false for a miss and for a victim that was hit as the
        /// shooter saw it but had died at the server before the shot arrived.
        landed: bool,
    },
    /// A player died or came back (a new round): sent to every client when it changes, so
    /// that a client knows who can be hit. Every player starts alive.
    Alive {
        /// The player slot.
        slot: u8,
        /// Whether it is alive now.
        alive: bool,
    },
    /// A player killed another: sent to every client (the kill feed).
    Kill {
        /// Who fired the killing shot.
        killer: u8,
        /// Who died.
        victim: u8,
        /// Where the killing shot landed (0 head, 1 body, 2 legs).
        part: u8,
    },
    /// The round's phase changed: sent to every client, and to a client that joins, so it
    /// knows where the match stands.
    Round {
        /// The round, from 1.
        round: u8,
        /// 0 buy, 1 combat, 2 ended, 3 match over.
        phase: u8,
        /// Rounds the attackers have won.
        attackers: u8,
        /// Rounds the defenders have won.
        defenders: u8,
    },
    /// The match ended and started over: a new world whose ticks count from 0 again, with
    /// replication afresh. Sent to every seated client, before any snapshot of the new
    /// match; the client drops its snapshot baselines and its view of the old match.
    Epoch {
        /// The new run's epoch, one more than the last (see [`Event::Welcome`]).
        epoch: u32,
    },
}

impl Event {
    /// Decodes an event; trailing bytes are an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, MsgError> {
        let mut r = Reader::new(bytes);
        let e = match r.u8()? {
            WELCOME => Event::Welcome {
                match_id: r.u32()?,
                slot: r.u8()?,
                tick_hz: r.u16()?,
                players: r.u8()?,
                epoch: r.u32()?,
            },
            SHOT_RESULT => Event::ShotResult {
                seq: r.u32()?,
                tick: r.u32()?,
                victim: r.u8()?,
                part: r.u8()?,
                landed: r.u8()? != 0,
            },
            ALIVE => Event::Alive {
                slot: r.u8()?,
                alive: r.u8()? != 0,
            },
            KILL => Event::Kill {
                killer: r.u8()?,
                victim: r.u8()?,
                part: r.u8()?,
            },
            ROUND => Event::Round {
                round: r.u8()?,
                phase: r.u8()?,
                attackers: r.u8()?,
                defenders: r.u8()?,
            },
            EPOCH => Event::Epoch { epoch: r.u32()? },
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
                slot,
                tick_hz,
                players,
                epoch,
            } => {
                w.u8(WELCOME);
                w.u32(match_id);
                w.u8(slot);
                w.u16(tick_hz);
                w.u8(players);
                w.u32(epoch);
            }
            Event::ShotResult {
                seq,
                tick,
                victim,
                part,
                landed,
            } => {
                w.u8(SHOT_RESULT);
                w.u32(seq);
                w.u32(tick);
                w.u8(victim);
                w.u8(part);
                w.u8(u8::from(landed));
            }
            Event::Alive { slot, alive } => {
                w.u8(ALIVE);
                w.u8(slot);
                w.u8(u8::from(alive));
            }
            Event::Kill {
                killer,
                victim,
                part,
            } => {
                w.u8(KILL);
                w.u8(killer);
                w.u8(victim);
                w.u8(part);
            }
            Event::Round {
                round,
                phase,
                attackers,
                defenders,
            } => {
                w.u8(ROUND);
                w.u8(round);
                w.u8(phase);
                w.u8(attackers);
                w.u8(defenders);
            }
            Event::Epoch { epoch } => {
                w.u8(EPOCH);
                w.u32(epoch);
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
        let events = [
            Event::Welcome {
                match_id: 3,
                slot: 4,
                tick_hz: 128,
                players: 10,
                epoch: 0,
            },
            Event::Welcome {
                match_id: 3,
                slot: 4,
                tick_hz: 128,
                players: 10,
                epoch: 0x0102_0304,
            },
            Event::Epoch { epoch: 1 },
            Event::Epoch { epoch: u32::MAX },
            Event::ShotResult {
                seq: 1234,
                tick: 99,
                victim: 7,
                part: 0,
                landed: true,
            },
            Event::ShotResult {
                seq: 1,
                tick: 0,
                victim: NONE,
                part: NONE,
                landed: false,
            },
            Event::Kill {
                killer: 1,
                victim: 2,
                part: 0,
            },
            Event::Round {
                round: 3,
                phase: 1,
                attackers: 2,
                defenders: 0,
            },
            Event::Alive {
                slot: 2,
                alive: false,
            },
            Event::Alive {
                slot: 9,
                alive: true,
            },
        ];
        for e in events {
            let mut buf = Vec::new();
            e.encode(&mut buf);
            assert_eq!(Event::decode(&buf), Ok(e));
            buf.push(0);
            assert_eq!(Event::decode(&buf), Err(MsgError::TrailingBytes));
            buf.truncate(buf.len() - 2);
            assert_eq!(Event::decode(&buf), Err(MsgError::Truncated));
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
