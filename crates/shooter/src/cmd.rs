//! The wire form of a [`UserCmd`].
//!
//! ```text
//! forward i8 | side i8 | buttons u8 | yaw u16 | pitch i16      (7 bytes)
//! ```

use tickforge_game::UserCmd;
use tickforge_proto::wire::Truncated;

/// Encoded size of one command.
pub const CMD_BYTES: usize = UserCmd::BYTES;

/// The encoded command.
pub fn to_bytes(cmd: &UserCmd) -> [u8; CMD_BYTES] {
    cmd.to_bytes()
}

/// Decodes a command; the bytes must be exactly [`CMD_BYTES`] long.
pub fn decode(bytes: &[u8]) -> Result<UserCmd, Truncated> {
    let bytes: [u8; CMD_BYTES] = bytes.try_into().map_err(|_| Truncated)?;
    Ok(UserCmd::from_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(forward: i8, side: i8, buttons: u8, yaw: u16, pitch: i16) {
            let cmd = UserCmd { forward, side, buttons, yaw, pitch };
            prop_assert_eq!(decode(&to_bytes(&cmd)), Ok(cmd));
        }

        #[test]
        fn wrong_lengths_are_refused(data in proptest::collection::vec(any::<u8>(), 0..20)) {
            prop_assume!(data.len() != CMD_BYTES);
            prop_assert!(decode(&data).is_err());
        }
    }
}
