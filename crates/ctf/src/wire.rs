//! The game's bytes: the input format, the replicated schema and its entity states, and
//! the reliable events. The crate documentation gives the layouts.

use tickforge_api::{Coding, Field, Lanes, Quantum, Schema};

/// One of the two teams; a seat's team is its parity (even: A, odd: B).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Team {
    /// Even seats; base on the low-x side.
    #[default]
    A,
    /// Odd seats; base on the high-x side.
    B,
}

impl Team {
    /// The team of seat `seat`: its parity.
    pub fn of(seat: u16) -> Team {
        if seat & 1 == 0 {
            Team::A
        } else {
            Team::B
        }
    }

    /// 0 for A, 1 for B: an index into per-team tables, and the team's wire byte.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The other team.
    pub fn other(self) -> Team {
        match self {
            Team::A => Team::B,
            Team::B => Team::A,
        }
    }

    /// `a` or `b`, as the results line writes it.
    pub fn letter(self) -> char {
        match self {
            Team::A => 'a',
            Team::B => 'b',
        }
    }

    fn from_byte(b: u8) -> Option<Team> {
        match b {
            0 => Some(Team::A),
            1 => Some(Team::B),
            _ => None,
        }
    }
}

/// Input buttons: bits of [`Input::buttons`]; any other bit set makes the input malformed.
pub mod buttons {
    /// Drop the carried flag where you stand (a pass); you cannot pick a flag up for a
    /// second after.
    pub const DROP: u8 = 1;
    /// Every bit an input may set.
    pub const KNOWN: u8 = DROP;
}

/// Bytes of one input on the wire.
pub const INPUT_BYTES: usize = 3;

/// One seat's input for a tick: a move stick and buttons. Wire form: `[move_x as i8,
/// move_y as i8, buttons]`, exactly [`INPUT_BYTES`] bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Input {
    /// Stick x, −127..=127 full left to full right (−128 reads as −127).
    pub move_x: i8,
    /// Stick y, −127..=127.
    pub move_y: i8,
    /// [`buttons`] bits.
    pub buttons: u8,
}

impl Input {
    /// The input's wire bytes.
    pub fn to_bytes(self) -> [u8; INPUT_BYTES] {
        [self.move_x as u8, self.move_y as u8, self.buttons]
    }

    /// The input in `bytes`: `None` for any length but [`INPUT_BYTES`] or an unknown
    /// button bit. Never panics.
    pub fn from_bytes(bytes: &[u8]) -> Option<Input> {
        let &[x, y, b] = bytes else { return None };
        (b & !buttons::KNOWN == 0).then_some(Input {
            move_x: x as i8,
            move_y: y as i8,
            buttons: b,
        })
    }

    /// The stick as a vector of length at most 1.
    pub fn direction(self) -> [f32; 2] {
        let x = f32::from(self.move_x.max(-127)) / 127.0;
        let y = f32::from(self.move_y.max(-127)) / 127.0;
        let len = (x * x + y * y).sqrt();
        if len > 1.0 {
            [x / len, y / len]
        } else {
            [x, y]
        }
    }
}

/// Position and velocity go as 1/64 m and 1/64 m/s.
const METRES: Quantum = Quantum::PerUnit(64.0);

static SCHEMA: Schema = match Schema::new(&[
    Field::new("velocity xy", Coding::Pair, METRES),
    Field::new("position xy", Coding::Pair, METRES).predicted_from("velocity xy"),
    Field::new("state", Coding::Byte, Quantum::Whole),
]) {
    Ok(s) => s,
    Err(_) => panic!("the ctf schema is a valid table"),
};

/// The replicated fields of every entity, players and flags alike.
pub fn schema() -> &'static Schema {
    &SCHEMA
}

/// The lanes of [`schema`], in table order.
pub mod lane {
    /// Velocity x, 1/64 m/s.
    pub const VX: usize = 0;
    /// Velocity y, 1/64 m/s.
    pub const VY: usize = 1;
    /// Position x, 1/64 m.
    pub const PX: usize = 2;
    /// Position y, 1/64 m.
    pub const PY: usize = 3;
    /// The [`state`](super::state) bits.
    pub const STATE: usize = 4;
}

/// Bits of the `state` byte.
pub mod state {
    /// The entity is a flag (clear: a player).
    pub const FLAG: i32 = 1;
    /// It belongs to team B (clear: A).
    pub const TEAM_B: i32 = 2;
    /// A player carrying the enemy flag, or a flag being carried.
    pub const CARRY: i32 = 4;
    /// A flag lying away from its base.
    pub const DROPPED: i32 = 8;
    /// A player whose client is gone: it stands still and touches nothing.
    pub const IDLE: i32 = 16;
}

/// What an entity is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// A seat's player.
    #[default]
    Player,
    /// A team's flag.
    Flag,
}

/// One entity as a client is told of it: [`encode_state`] makes its lanes and
/// [`decode_state`] reads them back, quantized to 1/64 m.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EntityState {
    /// Player or flag.
    pub kind: Kind,
    /// Its team (a flag's: the team that defends it).
    pub team: Team,
    /// Metres, from the arena's corner.
    pub position: [f32; 2],
    /// Metres a second.
    pub velocity: [f32; 2],
    /// A player carrying the enemy flag, or a flag being carried.
    pub carrying: bool,
    /// A flag lying away from its base.
    pub dropped: bool,
    /// A player without a client.
    pub idle: bool,
}

/// The lanes of `s` in [`schema`]'s units.
pub fn encode_state(s: &EntityState) -> Lanes {
    let mut l = Lanes::ZERO;
    l.0[lane::VX] = METRES.to_lane(s.velocity[0]);
    l.0[lane::VY] = METRES.to_lane(s.velocity[1]);
    l.0[lane::PX] = METRES.to_lane(s.position[0]);
    l.0[lane::PY] = METRES.to_lane(s.position[1]);
    let bits = [
        (s.kind == Kind::Flag, state::FLAG),
        (s.team == Team::B, state::TEAM_B),
        (s.carrying, state::CARRY),
        (s.dropped, state::DROPPED),
        (s.idle, state::IDLE),
    ];
    l.0[lane::STATE] = bits.iter().filter(|b| b.0).map(|b| b.1).sum();
    l
}

/// The entity state in `lanes` (as a client's replica holds them).
pub fn decode_state(lanes: &Lanes) -> EntityState {
    let l = &lanes.0;
    let bits = l[lane::STATE];
    EntityState {
        kind: if bits & state::FLAG != 0 {
            Kind::Flag
        } else {
            Kind::Player
        },
        team: if bits & state::TEAM_B != 0 {
            Team::B
        } else {
            Team::A
        },
        position: [METRES.from_lane(l[lane::PX]), METRES.from_lane(l[lane::PY])],
        velocity: [METRES.from_lane(l[lane::VX]), METRES.from_lane(l[lane::VY])],
        carrying: bits & state::CARRY != 0,
        dropped: bits & state::DROPPED != 0,
        idle: bits & state::IDLE != 0,
    }
}

/// A reliable game event. Wire form: a kind byte, then its fields; seats are `u16`
/// little-endian, teams a byte (0 A, 1 B).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `[1, flag team, seat]`: `seat` picked up `flag`'s flag.
    Pickup {
        /// The flag's team.
        flag: Team,
        /// Who took it.
        seat: u16,
    },
    /// `[2, flag team, seat]`: `seat` dropped the flag (tagged, passed, or gone).
    Drop {
        /// The flag's team.
        flag: Team,
        /// Who carried it.
        seat: u16,
    },
    /// `[3, flag team, seat]`: the flag is home again, touched by `seat` of its team, or
    /// (seat `0xFFFF`, `None`) after its time away ran out.
    Return {
        /// The flag's team.
        flag: Team,
        /// Who returned it; `None`: the timeout.
        seat: Option<u16>,
    },
    /// `[4, tagger, tagged]`: `tagger` touched `tagged`, a carrier in the tagger's half,
    /// which went back to its spawn.
    Tag {
        /// The defender.
        tagger: u16,
        /// The carrier.
        tagged: u16,
    },
    /// `[5, team, seat, captures_a, captures_b]`: `seat` of `team` captured; the score
    /// after it.
    Capture {
        /// The scoring team.
        team: Team,
        /// The carrier.
        seat: u16,
        /// Team A's captures.
        captures_a: u8,
        /// Team B's captures.
        captures_b: u8,
    },
    /// `[6, captures_a, captures_b, target, ticks_left u32 LE]`: the score, sent to a
    /// joining seat.
    Score {
        /// Team A's captures.
        captures_a: u8,
        /// Team B's captures.
        captures_b: u8,
        /// Captures that win.
        target: u8,
        /// Ticks until the time limit.
        ticks_left: u32,
    },
    /// `[7, seat, emote]`: `seat` sent emote `emote` (a client message, relayed to all).
    Emote {
        /// The sender.
        seat: u16,
        /// `0..16`, the client's meaning.
        emote: u8,
    },
    /// `[8, winner, captures_a, captures_b]`: the match is over; winner 0 A, 1 B, 2 a
    /// draw.
    Over {
        /// `None`: a draw.
        winner: Option<Team>,
        /// Team A's captures.
        captures_a: u8,
        /// Team B's captures.
        captures_b: u8,
    },
}

/// Most bytes an event takes.
pub const MAX_EVENT_BYTES: usize = 8;

impl Event {
    /// Appends the event's bytes to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        let (bytes, n) = self.to_bytes();
        out.extend_from_slice(&bytes[..n]);
    }

    /// The event's bytes: the first `n` of the array.
    pub fn to_bytes(&self) -> ([u8; MAX_EVENT_BYTES], usize) {
        let mut b = [0u8; MAX_EVENT_BYTES];
        let s = |seat: u16| seat.to_le_bytes();
        let n = match *self {
            Event::Pickup { flag, seat } | Event::Drop { flag, seat } => {
                b[0] = if matches!(self, Event::Pickup { .. }) {
                    1
                } else {
                    2
                };
                b[1] = flag as u8;
                b[2..4].copy_from_slice(&s(seat));
                4
            }
            Event::Return { flag, seat } => {
                b[..2].copy_from_slice(&[3, flag as u8]);
                b[2..4].copy_from_slice(&s(seat.unwrap_or(u16::MAX)));
                4
            }
            Event::Tag { tagger, tagged } => {
                b[0] = 4;
                b[1..3].copy_from_slice(&s(tagger));
                b[3..5].copy_from_slice(&s(tagged));
                5
            }
            Event::Capture {
                team,
                seat,
                captures_a,
                captures_b,
            } => {
                b[..2].copy_from_slice(&[5, team as u8]);
                b[2..4].copy_from_slice(&s(seat));
                b[4..6].copy_from_slice(&[captures_a, captures_b]);
                6
            }
            Event::Score {
                captures_a,
                captures_b,
                target,
                ticks_left,
            } => {
                b[..4].copy_from_slice(&[6, captures_a, captures_b, target]);
                b[4..8].copy_from_slice(&ticks_left.to_le_bytes());
                8
            }
            Event::Emote { seat, emote } => {
                b[0] = 7;
                b[1..3].copy_from_slice(&s(seat));
                b[3] = emote;
                4
            }
            Event::Over {
                winner,
                captures_a,
                captures_b,
            } => {
                let w = winner.map_or(2, |t| t as u8);
                b[..4].copy_from_slice(&[8, w, captures_a, captures_b]);
                4
            }
        };
        (b, n)
    }

    /// The event in `bytes`; `None` for anything [`Event::write`] does not make.
    pub fn decode(bytes: &[u8]) -> Option<Event> {
        let seat = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
        let (&kind, _) = bytes.split_first()?;
        let len = match kind {
            1..=3 | 7 | 8 => 4,
            4 => 5,
            5 => 6,
            6 => 8,
            _ => return None,
        };
        if bytes.len() != len {
            return None;
        }
        Some(match kind {
            1 => Event::Pickup {
                flag: Team::from_byte(bytes[1])?,
                seat: seat(2),
            },
            2 => Event::Drop {
                flag: Team::from_byte(bytes[1])?,
                seat: seat(2),
            },
            3 => Event::Return {
                flag: Team::from_byte(bytes[1])?,
                seat: Some(seat(2)).filter(|&s| s != u16::MAX),
            },
            4 => Event::Tag {
                tagger: seat(1),
                tagged: seat(3),
            },
            5 => Event::Capture {
                team: Team::from_byte(bytes[1])?,
                seat: seat(2),
                captures_a: bytes[4],
                captures_b: bytes[5],
            },
            6 => Event::Score {
                captures_a: bytes[1],
                captures_b: bytes[2],
                target: bytes[3],
                ticks_left: u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
            },
            7 => Event::Emote {
                seat: seat(1),
                emote: bytes[3],
            },
            _ => Event::Over {
                winner: match bytes[1] {
                    2 => None,
                    b => Some(Team::from_byte(b)?),
                },
                captures_a: bytes[2],
                captures_b: bytes[3],
            },
        })
    }
}
