//! The reference shooter: a deterministic fixed-step world, with no clock and no I/O.
//!
//! What it does: maps of solid boxes with the traces movement and shots need ([`Map`], loaded
//! from `maps/` or built in), player movement against them ([`movement::pmove`], shared by
//! the server and the bots), the world a match steps once per tick ([`World`]), and the
//! commands players send ([`UserCmd`]).
//!
//! What it does not do: networking, timing, or anything that reads the OS. A tick is a
//! number; the caller decides when it runs.
//!
//! In order of importance: the same commands from the same start give bit-identical state;
//! movement is a pure function of what is passed in; a tick allocates nothing.

pub mod fow;
pub mod history;
pub mod hitscan;
pub mod map;
pub mod math;
pub mod movement;
pub mod pose;
pub mod replay;
pub mod rules;
mod world;

pub use map::{BuiltinMap, Map, MapError, RayHit, SpawnPoint};
pub use math::Vec3;
pub use movement::{MovementParams, PlayerState};
pub use world::{Player, ShotRecord, World, WorldConfig};

/// A simulation step number; tick 0 is the match's first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tick(pub u32);

impl Tick {
    /// The tick after this one.
    pub fn next(self) -> Tick {
        Tick(self.0.wrapping_add(1))
    }
}

/// The moment of the world a client was showing when it made a command: a tick and
/// `frac`/256 of the way to the next one (clients render between snapshots).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ViewTime {
    /// The snapshot tick at or before the moment shown.
    pub tick: Tick,
    /// How far toward `tick + 1`, in 1/256 of a tick.
    pub frac: u8,
}

impl ViewTime {
    /// Exactly at `tick`.
    pub fn at(tick: Tick) -> ViewTime {
        ViewTime { tick, frac: 0 }
    }

    /// The view time `delay_ticks` before `newest`, rounded to 1/256 tick; a delay that is
    /// negative or NaN counts as 0.
    pub fn behind(newest: Tick, delay_ticks: f32) -> ViewTime {
        let q = if delay_ticks > 0.0 {
            (delay_ticks * 256.0).round().min(u32::MAX as f32) as u32
        } else {
            0
        };
        let (whole, part) = (q / 256, q % 256);
        if part == 0 {
            ViewTime::at(Tick(newest.0.wrapping_sub(whole)))
        } else {
            ViewTime {
                tick: Tick(newest.0.wrapping_sub(whole + 1)),
                frac: (256 - part) as u8,
            }
        }
    }

    /// The shot's rewind arguments for this view: a command tick and the interpolation
    /// delay before it, in ticks, as [`history::History::rewind_time`] takes them.
    pub fn rewind_args(self) -> (Tick, f32) {
        if self.frac == 0 {
            (self.tick, 0.0)
        } else {
            (self.tick.next(), 1.0 - f32::from(self.frac) / 256.0)
        }
    }
}

/// Index of a player in its match, 0..players.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlayerSlot(pub u8);

/// Buttons of a [`UserCmd`], one bit each.
pub mod buttons {
    /// Jump when on the ground.
    pub const JUMP: u8 = 1 << 0;
    /// Fire the held weapon.
    pub const FIRE: u8 = 1 << 1;
    /// Crouch while held: a shorter, slower player ([`crate::movement::pmove`]); released,
    /// it stands up as soon as there is headroom.
    pub const CROUCH: u8 = 1 << 2;
}

/// What a player asks for in one tick. The server simulates; clients only ask.
///
/// Angles travel as 16-bit fractions of a turn so that client and server compute movement
/// from the same bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct UserCmd {
    /// Forward (+) or back (−) intent, −127..=127.
    pub forward: i8,
    /// Right (+) or left (−) intent, −127..=127.
    pub side: i8,
    /// [`buttons`] bits.
    pub buttons: u8,
    /// View yaw in 1/65536 of a turn.
    pub yaw: u16,
    /// View pitch in 1/65536 of a turn, clamped to ±89° when applied.
    pub pitch: i16,
}

impl UserCmd {
    /// Bytes of a command's fixed little-endian form, on the wire and in action files:
    /// `forward i8 | side i8 | buttons u8 | yaw u16 | pitch i16`.
    pub const BYTES: usize = 7;

    /// The command's fixed form ([`UserCmd::BYTES`]).
    pub fn to_bytes(&self) -> [u8; UserCmd::BYTES] {
        let [y0, y1] = self.yaw.to_le_bytes();
        let [p0, p1] = self.pitch.to_le_bytes();
        [
            self.forward as u8,
            self.side as u8,
            self.buttons,
            y0,
            y1,
            p0,
            p1,
        ]
    }

    /// Reads the fixed form [`UserCmd::to_bytes`] writes; every byte string is a command.
    pub fn from_bytes(b: [u8; UserCmd::BYTES]) -> UserCmd {
        UserCmd {
            forward: b[0] as i8,
            side: b[1] as i8,
            buttons: b[2],
            yaw: u16::from_le_bytes([b[3], b[4]]),
            pitch: i16::from_le_bytes([b[5], b[6]]),
        }
    }

    /// True when `button` is held.
    pub fn has(&self, button: u8) -> bool {
        self.buttons & button != 0
    }
}

/// Converts a 16-bit fraction of a turn to radians.
pub fn angle16_to_rad(a: u16) -> f32 {
    f32::from(a) * (std::f32::consts::TAU / 65536.0)
}

/// Converts radians to the nearest 16-bit fraction of a turn (wrapping).
pub fn rad_to_angle16(r: f32) -> u16 {
    let turns = r / std::f32::consts::TAU;
    let frac = turns - turns.floor();
    ((frac * 65536.0).round() as u32 & 0xffff) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_behind_the_newest_tick_rewinds_by_that_much() {
        let v = ViewTime::behind(Tick(100), 4.5);
        assert_eq!(
            v,
            ViewTime {
                tick: Tick(95),
                frac: 128
            }
        );
        let (command, delay) = v.rewind_args();
        assert_eq!(command, Tick(96));
        assert_eq!(command.0 as f32 - delay, 95.5);
        assert_eq!(ViewTime::behind(Tick(100), 3.0), ViewTime::at(Tick(97)));
        assert_eq!(ViewTime::at(Tick(97)).rewind_args(), (Tick(97), 0.0));
        assert_eq!(ViewTime::behind(Tick(5), -1.0), ViewTime::at(Tick(5)));
        assert_eq!(ViewTime::behind(Tick(5), f32::NAN), ViewTime::at(Tick(5)));
    }

    #[test]
    fn angle_conversion_round_trips() {
        for a in [0u16, 1, 16384, 32768, 65535] {
            assert_eq!(rad_to_angle16(angle16_to_rad(a)), a);
        }
        assert_eq!(rad_to_angle16(-std::f32::consts::FRAC_PI_2), 49152);
    }
}
