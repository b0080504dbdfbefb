//! The private key shared by a matchmaker and its servers.

use super::KEY_BYTES;

/// The 32-byte key connect tokens are sealed with. Its `Debug` form never shows the bytes,
/// so a logged configuration cannot leak it.
#[derive(Clone, PartialEq, Eq)]
pub struct PrivateKey(pub [u8; KEY_BYTES]);

/// Text that is not a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not 64 hexadecimal digits (surrounding white space is ignored).
    #[error("expected 64 hexadecimal digits (32 bytes), got {0} characters")]
    Length(usize),
    /// A character that is not a hexadecimal digit.
    #[error("expected hexadecimal digits only")]
    NotHex,
}

impl PrivateKey {
    /// Parses 64 hexadecimal digits, ignoring surrounding white space.
    pub fn from_hex(text: &str) -> Result<PrivateKey, KeyError> {
        let t = text.trim();
        if t.len() != 2 * KEY_BYTES {
            return Err(KeyError::Length(t.chars().count()));
        }
        let mut key = [0u8; KEY_BYTES];
        for (i, byte) in key.iter_mut().enumerate() {
            let pair = t.get(2 * i..2 * i + 2).ok_or(KeyError::NotHex)?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| KeyError::NotHex)?;
        }
        Ok(PrivateKey(key))
    }

    /// The 64-digit lower-case hexadecimal form.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrivateKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_debug_hides_the_key() {
        let k = PrivateKey(std::array::from_fn(|i| i as u8 * 7));
        assert_eq!(
            PrivateKey::from_hex(&format!("  {}\n", k.to_hex())),
            Ok(k.clone())
        );
        assert_eq!(format!("{k:?}"), "PrivateKey(<redacted>)");
    }

    #[test]
    fn bad_text_is_refused() {
        assert_eq!(PrivateKey::from_hex("abcd"), Err(KeyError::Length(4)));
        assert_eq!(
            PrivateKey::from_hex(&"zz".repeat(32)),
            Err(KeyError::NotHex)
        );
        // Multi-byte characters of the right byte length are not hex either.
        assert!(PrivateKey::from_hex(&"é".repeat(32)).is_err());
    }
}
