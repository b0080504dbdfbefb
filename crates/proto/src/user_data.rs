//! tickforge's own format for the 256 bytes of user data in a connect token.
//!
//! ```text
//! marker "TKFG" | version u8 (2) | match_id u32 | team u8 | seat u16 | zeros to 256
//!   team 0xff: any team;  seat 0xffff: any free seat
//! ```
//!
//! Version 1 (a `slot u8` where the seat is, 0xff: any) is still read, so tokens minted by
//! an older matchmaker keep working.
//!
//! A token whose user data is not in this format (zeros, or another backend's data) is
//! still a valid netcode.io token: the server places such a client in any match with a
//! free slot, so any conforming client holding a token can play on a standalone server.

use crate::netcode::USER_DATA_BYTES;
use crate::MatchId;

/// First bytes of tickforge user data.
pub const MARKER: &[u8; 4] = b"TKFG";
/// The format version this code writes; it reads this one and version 1.
pub const VERSION: u8 = 2;
/// The first version: a one-byte slot.
const VERSION_1: u8 = 1;
/// "No preference" for the team.
pub const ANY: u8 = 0xff;
/// "No preference" for the seat: any free one.
pub const ANY_SEAT: u16 = 0xffff;

/// What a matchmaker tells the server about a token's holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserData {
    /// The match the player was placed in.
    pub match_id: MatchId,
    /// The player's team, or [`ANY`].
    pub team: u8,
    /// The player's seat in the match, or [`ANY_SEAT`].
    pub seat: u16,
}

impl UserData {
    /// The 256-byte form.
    pub fn encode(&self) -> [u8; USER_DATA_BYTES] {
        let mut b = [0u8; USER_DATA_BYTES];
        b[..4].copy_from_slice(MARKER);
        b[4] = VERSION;
        b[5..9].copy_from_slice(&self.match_id.0.to_le_bytes());
        b[9] = self.team;
        b[10..12].copy_from_slice(&self.seat.to_le_bytes());
        b
    }

    /// Reads tickforge user data; `None` when the bytes are in another format (or a later
    /// version this build does not know), which the server treats as "any match".
    pub fn parse(bytes: &[u8; USER_DATA_BYTES]) -> Option<UserData> {
        if &bytes[..4] != MARKER {
            return None;
        }
        let seat = match bytes[4] {
            VERSION => u16::from_le_bytes([bytes[10], bytes[11]]),
            VERSION_1 if bytes[10] == ANY => ANY_SEAT,
            VERSION_1 => u16::from(bytes[10]),
            _ => return None,
        };
        Some(UserData {
            match_id: MatchId(u32::from_le_bytes(bytes[5..9].try_into().expect("4 bytes"))),
            team: bytes[9],
            seat,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for seat in [ANY_SEAT, 0, 255, 999] {
            let u = UserData {
                match_id: MatchId(77),
                team: 1,
                seat,
            };
            assert_eq!(UserData::parse(&u.encode()), Some(u));
        }
    }

    #[test]
    fn version_1_is_still_read() {
        let mut b = UserData {
            match_id: MatchId(5),
            team: 0,
            seat: 0,
        }
        .encode();
        b[4] = VERSION_1;
        for (slot, seat) in [(3, 3), (ANY, ANY_SEAT)] {
            b[10] = slot;
            b[11] = 0;
            assert_eq!(UserData::parse(&b).map(|u| u.seat), Some(seat));
        }
    }

    #[test]
    fn foreign_data_is_not_ours() {
        assert_eq!(UserData::parse(&[0; USER_DATA_BYTES]), None);
        let mut other = UserData {
            match_id: MatchId(1),
            team: 0,
            seat: 0,
        }
        .encode();
        other[4] = 3; // a later version
        assert_eq!(UserData::parse(&other), None);
        let reference: [u8; USER_DATA_BYTES] = std::array::from_fn(|i| 255 - i as u8);
        assert_eq!(UserData::parse(&reference), None);
    }
}
