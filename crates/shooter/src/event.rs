//! The shooter's reliable events: the bytes inside the runtime's game-event message.
//!
//! ```text
//!   2 ShotResult  seq u32 | tick u32 | victim u16 | part u8 | landed u8
//!                                            victim 0xffff, part 0xff: none
//!   3 Alive       slot u16 | alive u8                              0 or 1
//!   4 Kill        killer u16 | victim u16 | part u8
//!   5 Round       round u8 | phase u8 | attackers u8 | defenders u8   phase: 0 buy,
//!                                                         1 combat, 2 ended, 3 match over
//! ```
//!
//! The kinds are the ones the runtime's stream carried before the game boundary. Slots are
//! `u16` since a match may seat more than 256 players (the crowd of a thousand); they were
//! `u8` before, and an event of the old width is refused as truncated. Integers are
//! little-endian. A ShotResult goes to its shooter only; the others to every client, and a
//! joiner is sent the round and who is dead when it sits down.

use tickforge_proto::msg::MsgError;
use tickforge_proto::wire::{Reader, Writer};

const SHOT_RESULT: u8 = 2;
const ALIVE: u8 = 3;
const KILL: u8 = 4;
const ROUND: u8 = 5;

/// [`ShooterEvent::ShotResult`]'s `part` when the shot hit nobody.
pub const NONE: u8 = 0xff;
/// [`ShooterEvent::ShotResult`]'s `victim` when the shot hit nobody.
pub const NO_SLOT: u16 = 0xffff;

/// One event of the shooter, sent reliably and in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShooterEvent {
    /// The server's verdict on one shot of this client, sent to the shooter the tick it
    /// fired: what the hit-registration measurement compares with the client's own view.
    ShotResult {
        /// The input sequence whose command fired (a held command may fire again under the
        /// same sequence).
        seq: u32,
        /// The server tick the shot was fired in.
        tick: u32,
        /// The player slot hit, [`NO_SLOT`] for a miss.
        victim: u16,
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
        slot: u16,
        /// Whether it is alive now.
        alive: bool,
    },
    /// A player killed another: sent to every client (the kill feed).
    Kill {
        /// Who fired the killing shot.
        killer: u16,
        /// Who died.
        victim: u16,
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
}

/// A flag byte: 0 or 1, nothing else, so each event has one encoding.
fn flag(b: u8) -> Result<bool, MsgError> {
    match b {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(MsgError::BadValue),
    }
}

impl ShooterEvent {
    /// Decodes an event; trailing bytes are an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, MsgError> {
        let mut r = Reader::new(bytes);
        let e = match r.u8()? {
            SHOT_RESULT => ShooterEvent::ShotResult {
                seq: r.u32()?,
                tick: r.u32()?,
                victim: r.u16()?,
                part: r.u8()?,
                landed: flag(r.u8()?)?,
            },
            ALIVE => ShooterEvent::Alive {
                slot: r.u16()?,
                alive: flag(r.u8()?)?,
            },
            KILL => ShooterEvent::Kill {
                killer: r.u16()?,
                victim: r.u16()?,
                part: r.u8()?,
            },
            ROUND => ShooterEvent::Round {
                round: r.u8()?,
                phase: r.u8()?,
                attackers: r.u8()?,
                defenders: r.u8()?,
            },
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
            ShooterEvent::ShotResult {
                seq,
                tick,
                victim,
                part,
                landed,
            } => {
                w.u8(SHOT_RESULT);
                w.u32(seq);
                w.u32(tick);
                w.u16(victim);
                w.u8(part);
                w.u8(u8::from(landed));
            }
            ShooterEvent::Alive { slot, alive } => {
                w.u8(ALIVE);
                w.u16(slot);
                w.u8(u8::from(alive));
            }
            ShooterEvent::Kill {
                killer,
                victim,
                part,
            } => {
                w.u8(KILL);
                w.u16(killer);
                w.u16(victim);
                w.u8(part);
            }
            ShooterEvent::Round {
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_event_round_trips_and_refuses_trailing_and_missing_bytes() {
        let events = [
            ShooterEvent::ShotResult {
                seq: 1234,
                tick: 99,
                victim: 7,
                part: 0,
                landed: true,
            },
            ShooterEvent::ShotResult {
                seq: 1,
                tick: 0,
                victim: NO_SLOT,
                part: NONE,
                landed: false,
            },
            ShooterEvent::Kill {
                killer: 1,
                victim: 2,
                part: 0,
            },
            ShooterEvent::Round {
                round: 3,
                phase: 1,
                attackers: 2,
                defenders: 0,
            },
            ShooterEvent::Alive {
                slot: 9,
                alive: true,
            },
            // A slot past 255: the crowd's.
            ShooterEvent::Kill {
                killer: 999,
                victim: 300,
                part: 1,
            },
        ];
        for e in events {
            let mut buf = Vec::new();
            e.encode(&mut buf);
            assert_eq!(ShooterEvent::decode(&buf), Ok(e));
            buf.push(0);
            assert_eq!(ShooterEvent::decode(&buf), Err(MsgError::TrailingBytes));
            buf.truncate(buf.len() - 2);
            assert_eq!(ShooterEvent::decode(&buf), Err(MsgError::Truncated));
        }
        assert_eq!(ShooterEvent::decode(&[6]), Err(MsgError::UnknownKind(6)));
        assert_eq!(
            ShooterEvent::decode(&[3, 4, 0, 2]),
            Err(MsgError::BadValue),
            "alive 2"
        );
    }

    proptest! {
        #[test]
        fn the_decoder_never_panics(data in proptest::collection::vec(any::<u8>(), 0..32)) {
            let _ = ShooterEvent::decode(&data);
        }
    }
}
