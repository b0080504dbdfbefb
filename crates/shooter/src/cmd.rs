//! The wire form of a [`UserCmd`].
//!
//! ```text
//! forward i8 | side i8 | buttons u8 | yaw u16 | pitch i16      (7 bytes)
//! ```

use tickforge_game::UserCmd;
use tickforge_proto::wire::{Reader, Truncated};

/// Encoded size of one command.
pub const CMD_BYTES: usize = 7;

/// The encoded command.
pub fn to_bytes(cmd: &UserCmd) -> [u8; CMD_BYTES] {
    let [y0, y1] = cmd.yaw.to_le_bytes();
    let [p0, p1] = cmd.pitch.to_le_bytes();
    [
        cmd.forward as u8,
        cmd.side as u8,
        cmd.buttons,
        y0,
        y1,
        p0,
        p1,
    ]
}

/// Decodes a command; the bytes must be exactly [`CMD_BYTES`] long.
pub fn decode(bytes: &[u8]) -> Result<UserCmd, Truncated> {
    if bytes.len() != CMD_BYTES {
        return Err(Truncated);
    }
    let mut r = Reader::new(bytes);
    Ok(UserCmd {
        forward: r.u8()? as i8,
        side: r.u8()? as i8,
        buttons: r.u8()?,
        yaw: r.u16()?,
        pitch: r.i16()?,
    })
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
