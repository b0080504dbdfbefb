//! Messages a match exchanges inside transport payloads.
//!
//! ```text
//! client → server                       server → client
//!   1 Input  seq u32 | cmd bytes          1 Snapshot  tick u32 | input_ack u32 | body
//!   2 Ping   id u32 | echo u64            2 Pong      id u32 | echo u64
//! ```
//!
//! `seq` numbers a client's inputs from 1; `input_ack` is the newest input sequence the
//! server had applied for that client when it built the snapshot, so the client can time
//! each input from sending to the first snapshot that reflects it (the Quake paper's
//! response time). Bodies (the command and the snapshot) are opaque here: the
//! `replication` crate encodes them.

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
        /// The encoded command.
        cmd: &'a [u8],
    },
    /// Asks for an immediate [`ServerMsg::Pong`].
    Ping {
        /// Chosen by the client.
        id: u32,
        /// Echoed back unchanged (the client's send time).
        echo: u64,
    },
}

const INPUT: u8 = 1;
const PING: u8 = 2;
const SNAPSHOT: u8 = 1;
const PONG: u8 = 2;

impl<'a> ClientMsg<'a> {
    /// Decodes a client payload.
    pub fn decode(payload: &'a [u8]) -> Result<Self, MsgError> {
        let mut r = Reader::new(payload);
        match r.u8()? {
            INPUT => Ok(ClientMsg::Input {
                seq: r.u32()?,
                cmd: r.rest(),
            }),
            PING => Ok(ClientMsg::Ping {
                id: r.u32()?,
                echo: r.u64()?,
            }),
            k => Err(MsgError::UnknownKind(k)),
        }
    }

    /// Appends the encoded message to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        match *self {
            ClientMsg::Input { seq, cmd } => {
                w.u8(INPUT);
                w.u32(seq);
                w.bytes(cmd);
            }
            ClientMsg::Ping { id, echo } => {
                w.u8(PING);
                w.u32(id);
                w.u64(echo);
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
    /// Answer to a ping.
    Pong {
        /// The ping's id.
        id: u32,
        /// The ping's echo value.
        echo: u64,
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
            PONG => Ok(ServerMsg::Pong {
                id: r.u32()?,
                echo: r.u64()?,
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
            ServerMsg::Pong { id, echo } => {
                w.u8(PONG);
                w.u32(id);
                w.u64(echo);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_message_round_trips() {
        let client = [
            ClientMsg::Input {
                seq: 77,
                cmd: &[1, 2, 3],
            },
            ClientMsg::Ping {
                id: 5,
                echo: u64::MAX,
            },
        ];
        for m in client {
            let mut buf = Vec::new();
            m.encode(&mut buf);
            assert_eq!(ClientMsg::decode(&buf), Ok(m));
        }
        let server = [
            ServerMsg::Snapshot {
                tick: 9,
                input_ack: 8,
                body: &[4; 10],
            },
            ServerMsg::Pong { id: 5, echo: 1 },
        ];
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
    fn bad_kinds_and_short_bodies_are_errors() {
        assert_eq!(ClientMsg::decode(&[]), Err(MsgError::Truncated));
        assert_eq!(ClientMsg::decode(&[9]), Err(MsgError::UnknownKind(9)));
        assert_eq!(ClientMsg::decode(&[PING, 1, 2]), Err(MsgError::Truncated));
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
        }
    }
}
