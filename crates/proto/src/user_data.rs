//! tickforge's own format for the 256 bytes of user data in a connect token.
//!
//! ```text
//! marker "TKFG" | version u8 (1) | match_id u32 | team u8 | slot u8 | zeros to 256
//!   team 0xff: any team;  slot 0xff: any free slot
//! ```
//!
//! A token whose user data is not in this format (zeros, or another backend's data) is
//! still a valid netcode.io token: the server places such a client in any match with a
//! free slot, so any conforming client holding a token can play on a standalone server.

use crate::netcode::USER_DATA_BYTES;
use crate::MatchId;

/// First bytes of tickforge user data.
pub const MARKER: &[u8; 4] = b"TKFG";
/// The format version this code writes and reads.
pub const VERSION: u8 = 1;
/// "No preference" for team or slot.
pub const ANY: u8 = 0xff;

/// What a matchmaker tells the server about a token's holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserData {
    /// The match the player was placed in.
    pub match_id: MatchId,
    /// The player's team, or [`ANY`].
    pub team: u8,
    /// The player's slot in the match, or [`ANY`].
    pub slot: u8,
}

impl UserData {
    /// The 256-byte form.
    pub fn encode(&self) -> [u8; USER_DATA_BYTES] {
        let mut b = [0u8; USER_DATA_BYTES];
        b[..4].copy_from_slice(MARKER);
        b[4] = VERSION;
        b[5..9].copy_from_slice(&self.match_id.0.to_le_bytes());
        b[9] = self.team;
        b[10] = self.slot;
        b
    }

    /// Reads tickforge user data; `None` when the bytes are in another format (or a later
    /// version this build does not know), which the server treats as "any match".
    pub fn parse(bytes: &[u8; USER_DATA_BYTES]) -> Option<UserData> {
        if &bytes[..4] != MARKER || bytes[4] != VERSION {
            return None;
        }
        Some(UserData {
            match_id: MatchId(u32::from_le_bytes(bytes[5..9].try_into().expect("4 bytes"))),
            team: bytes[9],
            slot: bytes[10],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let u = UserData {
            match_id: MatchId(77),
            team: 1,
            slot: ANY,
        };
        assert_eq!(UserData::parse(&u.encode()), Some(u));
    }

    #[test]
    fn foreign_data_is_not_ours() {
        assert_eq!(UserData::parse(&[0; USER_DATA_BYTES]), None);
        let mut other = UserData {
            match_id: MatchId(1),
            team: 0,
            slot: 0,
        }
        .encode();
        other[4] = 2; // a later version
        assert_eq!(UserData::parse(&other), None);
        let reference: [u8; USER_DATA_BYTES] = std::array::from_fn(|i| 255 - i as u8);
        assert_eq!(UserData::parse(&reference), None);
    }
}
