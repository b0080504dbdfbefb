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

pub use tickforge_sim::{Tick, ViewTime};

/// Index of a player in its match, 0..players.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlayerSlot(pub u16);

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
    fn angle_conversion_round_trips() {
        for a in [0u16, 1, 16384, 32768, 65535] {
            assert_eq!(rad_to_angle16(angle16_to_rad(a)), a);
        }
        assert_eq!(rad_to_angle16(-std::f32::consts::FRAC_PI_2), 49152);
    }
}
