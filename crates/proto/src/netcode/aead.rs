//! The AEAD of every sealed packet and challenge token: ChaCha20-Poly1305 (IETF, RFC 8439),
//! one key per direction of a connection.
//!
//! On Linux (x86-64 and AArch64) it is `ring`'s, whose assembly seals a 16-byte input in a
//! third of the time RustCrypto's `chacha20poly1305` takes and a 500-byte snapshot in about
//! half (its Poly1305 needs no per-message set-up, and its ChaCha20 runs the one or few
//! blocks a game packet has without the wide batches of the portable code). Every other
//! target (Windows, macOS, iOS, Android: the client library and the development server)
//! keeps RustCrypto's, which builds there with no C compiler. Both compute the same
//! function, which the tests check byte for byte on the platforms that have both, so a
//! Linux server and a client on any platform interoperate.
//!
//! The connect token's XChaCha20-Poly1305 stays RustCrypto's on every platform: it is
//! opened once per connection, not per packet.

use super::{KEY_BYTES, MAC_BYTES};

/// The 96-bit IETF nonce of a sequence number: four zero bytes, then the sequence, least
/// significant byte first.
pub(crate) fn nonce_bytes(sequence: u64) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&sequence.to_le_bytes());
    n
}

/// A wrong tag: the bytes were not sealed with this key, nonce and associated data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forged;

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
use ring_backend as backend;

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
use portable as backend;

/// ring's: the backend on Linux.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod ring_backend {
    use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, CHACHA20_POLY1305};

    use super::{Forged, KEY_BYTES, MAC_BYTES};

    #[derive(Clone)]
    pub struct Key(LessSafeKey);

    impl Key {
        pub fn new(key: &[u8; KEY_BYTES]) -> Key {
            let unbound = UnboundKey::new(&CHACHA20_POLY1305, key)
                .expect("ChaCha20-Poly1305 takes any 32-byte key");
            Key(LessSafeKey::new(unbound))
        }

        pub fn seal(&self, nonce: [u8; 12], ad: &[u8], body: &mut [u8]) -> [u8; MAC_BYTES] {
            let tag = self
                .0
                .seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(ad),
                    body,
                )
                .expect("ChaCha20-Poly1305 seals any body under 256 GiB");
            let mut out = [0u8; MAC_BYTES];
            out.copy_from_slice(tag.as_ref());
            out
        }

        pub fn open(
            &self,
            nonce: [u8; 12],
            ad: &[u8],
            body: &mut [u8],
            tag: [u8; MAC_BYTES],
        ) -> Result<(), Forged> {
            self.0
                .open_in_place_separate_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(ad),
                    Tag::from(tag),
                    body,
                    0..,
                )
                .map(|_| ())
                .map_err(|_| Forged)
        }
    }
}

/// RustCrypto's: the backend elsewhere, and in the tests everywhere.
#[cfg(any(
    test,
    not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))
))]
mod portable {
    use chacha20poly1305::aead::{AeadInPlace, KeyInit};
    use chacha20poly1305::{ChaCha20Poly1305, Nonce, Tag};

    use super::{Forged, KEY_BYTES, MAC_BYTES};

    #[derive(Clone)]
    pub struct Key(ChaCha20Poly1305);

    impl Key {
        pub fn new(key: &[u8; KEY_BYTES]) -> Key {
            Key(ChaCha20Poly1305::new(key.into()))
        }

        pub fn seal(&self, nonce: [u8; 12], ad: &[u8], body: &mut [u8]) -> [u8; MAC_BYTES] {
            self.0
                .encrypt_in_place_detached(&Nonce::from(nonce), ad, body)
                .expect("ChaCha20-Poly1305 seals any body under 256 GiB")
                .into()
        }

        pub fn open(
            &self,
            nonce: [u8; 12],
            ad: &[u8],
            body: &mut [u8],
            tag: [u8; MAC_BYTES],
        ) -> Result<(), Forged> {
            self.0
                .decrypt_in_place_detached(&Nonce::from(nonce), ad, body, &Tag::from(tag))
                .map_err(|_| Forged)
        }
    }
}

/// A ChaCha20-Poly1305 key, ready to seal and open. Its `Debug` form never shows the key.
#[derive(Clone)]
pub struct PacketKey(backend::Key);

impl PacketKey {
    /// The key schedule of 32 key bytes.
    pub fn new(key: &[u8; KEY_BYTES]) -> PacketKey {
        PacketKey(backend::Key::new(key))
    }

    /// Encrypts `body` in place under the nonce of `sequence` and authenticates it with
    /// `ad`; returns the tag.
    pub fn seal(&self, sequence: u64, ad: &[u8], body: &mut [u8]) -> [u8; MAC_BYTES] {
        self.0.seal(nonce_bytes(sequence), ad, body)
    }

    /// Checks `tag` over `body` and `ad` under the nonce of `sequence` and decrypts `body`
    /// in place. On [`Forged`], what `body` holds is unspecified.
    pub fn open(
        &self,
        sequence: u64,
        ad: &[u8],
        body: &mut [u8],
        tag: [u8; MAC_BYTES],
    ) -> Result<(), Forged> {
        self.0.open(nonce_bytes(sequence), ad, body, tag)
    }
}

impl std::fmt::Debug for PacketKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PacketKey(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 8439 §2.8.2: the AEAD test vector, sealed and opened by the backend in use and
    /// by the portable one (its nonce is not of the netcode form, so the backends are
    /// called directly).
    #[test]
    fn both_backends_seal_the_rfc_8439_vector() {
        rfc_8439_vector(backend::Key::new, backend::Key::seal, backend::Key::open);
        rfc_8439_vector(portable::Key::new, portable::Key::seal, portable::Key::open);
    }

    type Seal<K> = fn(&K, [u8; 12], &[u8], &mut [u8]) -> [u8; MAC_BYTES];
    type Open<K> = fn(&K, [u8; 12], &[u8], &mut [u8], [u8; MAC_BYTES]) -> Result<(), Forged>;

    fn rfc_8439_vector<K>(new: fn(&[u8; KEY_BYTES]) -> K, seal: Seal<K>, open: Open<K>) {
        let key: [u8; 32] = std::array::from_fn(|i| 0x80 + i as u8);
        let nonce = [
            0x07, 0, 0, 0, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47,
        ];
        let ad = [
            0x50, 0x51, 0x52, 0x53, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7,
        ];
        let plain = b"Ladies and Gentlemen of the class of '99: If I could offer you only one \
tip for the future, sunscreen would be it.";
        let mut body = plain.to_vec();
        let k = new(&key);
        let tag = seal(&k, nonce, &ad, &mut body);
        assert_eq!(
            &body[..8],
            &[0xd3, 0x1a, 0x8d, 0x34, 0x64, 0x8e, 0x60, 0xdb]
        );
        assert_eq!(
            tag,
            [
                0x1a, 0xe1, 0x0b, 0x59, 0x4f, 0x09, 0xe2, 0x6a, 0x7e, 0x90, 0x2e, 0xcb, 0xd0, 0x60,
                0x06, 0x91
            ]
        );
        assert_eq!(open(&k, nonce, &ad, &mut body, tag), Ok(()));
        assert_eq!(&body[..], &plain[..]);
        body[0] ^= 1;
        assert_eq!(open(&k, nonce, &ad, &mut body, tag), Err(Forged));
    }

    proptest! {
        /// The key seals exactly as the portable backend (RustCrypto's) does, so a Linux
        /// server on ring and a client elsewhere interoperate; each opens what the other
        /// sealed; a flipped bit anywhere in the body, the tag or the associated data, or
        /// another sequence, is refused.
        #[test]
        fn seals_as_the_portable_backend_does_and_refuses_any_flipped_bit(
            key in any::<[u8; 32]>(),
            sequence in any::<u64>(),
            ad in proptest::collection::vec(any::<u8>(), 0..32),
            plain in proptest::collection::vec(any::<u8>(), 0..1300),
            flip in any::<proptest::sample::Index>(),
        ) {
            let k = PacketKey::new(&key);
            let mut body = plain.clone();
            let tag = k.seal(sequence, &ad, &mut body);

            let portable = portable::Key::new(&key);
            let mut reference = plain.clone();
            let reference_tag = portable.seal(nonce_bytes(sequence), &ad, &mut reference);
            prop_assert_eq!(&body, &reference);
            prop_assert_eq!(tag, reference_tag);

            // What either sealed (the same bytes), each opens.
            let mut opened = body.clone();
            prop_assert_eq!(k.open(sequence, &ad, &mut opened, tag), Ok(()));
            prop_assert_eq!(&opened, &plain);
            let mut theirs = body.clone();
            prop_assert_eq!(portable.open(nonce_bytes(sequence), &ad, &mut theirs, tag), Ok(()));
            prop_assert_eq!(&theirs, &plain);

            // One flipped bit in body ‖ tag ‖ ad.
            let (mut b, mut t, mut a) = (body.clone(), tag, ad.clone());
            let bits = 8 * (b.len() + MAC_BYTES + a.len());
            let at = flip.index(bits);
            let (byte, bit) = (at / 8, 1u8 << (at % 8));
            if byte < b.len() {
                b[byte] ^= bit;
            } else if byte < b.len() + MAC_BYTES {
                t[byte - b.len()] ^= bit;
            } else {
                a[byte - b.len() - MAC_BYTES] ^= bit;
            }
            prop_assert_eq!(k.open(sequence, &a, &mut b, t), Err(Forged));
            // And under another sequence.
            let mut b = body.clone();
            prop_assert_eq!(k.open(sequence ^ 1, &ad, &mut b, tag), Err(Forged));
        }
    }
}
