//! The wire form of a [`UserCmd`].
//!
//! ```text
//! forward i8 | side i8 | buttons u8 | yaw u16 | pitch i16      (7 bytes)
//! ```

use tickforge_game::UserCmd;
use tickforge_proto::wire::{Reader, Truncated, Writer};

/// Encoded size of one command.
pub const CMD_BYTES: usize = 7;

/// Appends `cmd` to `out`.
pub fn encode(cmd: &UserCmd, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.u8(cmd.forward as u8);
    w.u8(cmd.side as u8);
    w.u8(cmd.buttons);
    w.u16(cmd.yaw);
    w.i16(cmd.pitch);
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
            let mut buf = Vec::new();
            encode(&cmd, &mut buf);
            prop_assert_eq!(buf.len(), CMD_BYTES);
            prop_assert_eq!(decode(&buf), Ok(cmd));
        }

        #[test]
        fn wrong_lengths_are_refused(data in proptest::collection::vec(any::<u8>(), 0..20)) {
            prop_assume!(data.len() != CMD_BYTES);
            prop_assert!(decode(&data).is_err());
        }
    }
}
