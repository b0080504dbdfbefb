//! Connect tokens and challenge tokens.
//!
//! ```text
//! private token (1024 bytes; bytes 0..1008 sealed with XChaCha20-Poly1305, tag in 1008..1024)
//!   client_id u64 | timeout_seconds i32 | num_server_addresses u32 (1..=32)
//!   address × n: type u8 (1: IPv4 a b c d u8, port u16 | 2: IPv6 8 × u16, port u16)
//!   client_to_server_key[32] | server_to_client_key[32] | user_data[256] | zeros
//!   AD = version_info[13] | protocol_id u64 | expire_timestamp u64;  key = the private key
//!
//! connect token (2048 bytes, what a matchmaker hands a client)
//!   version_info[13] | protocol_id u64 | create_timestamp u64 | expire_timestamp u64
//!   nonce[24] | private token[1024] | timeout_seconds i32 | num_server_addresses u32
//!   address × n | client_to_server_key[32] | server_to_client_key[32] | zeros
//!
//! challenge token (300 bytes; bytes 0..284 sealed with ChaCha20-Poly1305 IETF, no AD)
//!   client_id u64 | user_data[256] | zeros;  nonce = [0; 4] | challenge_sequence u64
//! ```
//!
//! IPv6 groups are each little-endian, so `::1` ends in `01 00`.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};

use super::aead::PacketKey;

use crate::wire::{Reader, Truncated, Writer};

use super::{
    CHALLENGE_TOKEN_BYTES, CONNECT_TOKEN_BYTES, KEY_BYTES, MAC_BYTES, MAX_SERVERS_PER_TOKEN,
    PRIVATE_TOKEN_BYTES, USER_DATA_BYTES, VERSION_INFO,
};

/// Bytes of the XChaCha nonce of a connect token.
pub const TOKEN_NONCE_BYTES: usize = 24;

/// A connect token's contents that the server sees once it opens the private part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrivateToken {
    /// The client's id, unique among the server's connected clients.
    pub client_id: u64,
    /// Seconds of silence before the connection times out; negative: never (development).
    pub timeout_seconds: i32,
    /// The servers this token is good for (1..=32).
    pub server_addresses: Vec<SocketAddr>,
    /// Key of packets from client to server.
    pub client_to_server_key: [u8; KEY_BYTES],
    /// Key of packets from server to client.
    pub server_to_client_key: [u8; KEY_BYTES],
    /// Opaque to netcode: tickforge puts the match here.
    pub user_data: [u8; USER_DATA_BYTES],
}

/// A connect token as the client holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectToken {
    /// Identifies the game and its version.
    pub protocol_id: u64,
    /// Unix seconds when the token was made.
    pub create_timestamp: u64,
    /// Unix seconds after which servers refuse it.
    pub expire_timestamp: u64,
    /// The XChaCha nonce the private part was sealed with.
    pub nonce: [u8; TOKEN_NONCE_BYTES],
    /// The sealed private part, opaque to the client.
    pub private: [u8; PRIVATE_TOKEN_BYTES],
    /// Seconds of silence before the connection times out.
    pub timeout_seconds: i32,
    /// Servers to try, in order.
    pub server_addresses: Vec<SocketAddr>,
    /// Key of packets from client to server.
    pub client_to_server_key: [u8; KEY_BYTES],
    /// Key of packets from server to client.
    pub server_to_client_key: [u8; KEY_BYTES],
}

/// A token or its parts that cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not the length the standard fixes.
    #[error("token has the wrong length")]
    Length,
    /// Not `NETCODE 1.02`.
    #[error("token is not netcode 1.02")]
    Version,
    /// The private part did not authenticate: wrong key, protocol id or expiry, or forged.
    #[error("token does not authenticate")]
    Decrypt,
    /// No server addresses, more than 32, or an address type other than 1 or 2.
    #[error("token has a bad server address list")]
    Addresses,
    /// Created after it expires.
    #[error("token expires before it was created")]
    Timestamps,
}

impl From<Truncated> for TokenError {
    fn from(_: Truncated) -> Self {
        TokenError::Length
    }
}

fn write_addresses(w: &mut Writer<'_>, addrs: &[SocketAddr]) {
    w.u32(addrs.len() as u32);
    for a in addrs {
        match a {
            SocketAddr::V4(a) => {
                w.u8(1);
                w.bytes(&a.ip().octets());
                w.u16(a.port());
            }
            SocketAddr::V6(a) => {
                w.u8(2);
                for g in a.ip().segments() {
                    w.u16(g);
                }
                w.u16(a.port());
            }
        }
    }
}

fn read_addresses(r: &mut Reader<'_>) -> Result<Vec<SocketAddr>, TokenError> {
    let mut addrs = Vec::new();
    for_each_address(r, |a| addrs.push(a))?;
    Ok(addrs)
}

/// Reads a token's address list, handing each address to `f`; allocates nothing.
fn for_each_address(r: &mut Reader<'_>, mut f: impl FnMut(SocketAddr)) -> Result<(), TokenError> {
    let n = r.u32()?;
    if n == 0 || n > MAX_SERVERS_PER_TOKEN {
        return Err(TokenError::Addresses);
    }
    for _ in 0..n {
        let addr = match r.u8()? {
            1 => {
                let o = r.array::<4>()?;
                SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(o), r.u16()?))
            }
            2 => {
                let mut g = [0u16; 8];
                for x in &mut g {
                    *x = r.u16()?;
                }
                SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(g), r.u16()?, 0, 0))
            }
            _ => return Err(TokenError::Addresses),
        };
        f(addr);
    }
    Ok(())
}

/// What a server reads of a private token ([`PrivateToken::open_for`]): its fields, with,
/// instead of the address list, whether the list names one of the server's addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServerView {
    pub(crate) client_id: u64,
    pub(crate) timeout_seconds: i32,
    /// The token names one of the addresses the server was asked about.
    pub(crate) names_server: bool,
    pub(crate) client_to_server_key: [u8; KEY_BYTES],
    pub(crate) server_to_client_key: [u8; KEY_BYTES],
    pub(crate) user_data: [u8; USER_DATA_BYTES],
}

/// The key schedule of a private key, for [`PrivateToken::open`].
pub fn private_key_cipher(key: &[u8; KEY_BYTES]) -> XChaCha20Poly1305 {
    XChaCha20Poly1305::new(key.into())
}

fn private_ad(protocol_id: u64, expire_timestamp: u64) -> [u8; 29] {
    let mut ad = [0u8; 29];
    ad[..13].copy_from_slice(VERSION_INFO);
    ad[13..21].copy_from_slice(&protocol_id.to_le_bytes());
    ad[21..29].copy_from_slice(&expire_timestamp.to_le_bytes());
    ad
}

impl PrivateToken {
    /// Encodes and seals the private part with the backend's `private_key`.
    pub fn seal(
        &self,
        protocol_id: u64,
        expire_timestamp: u64,
        nonce: &[u8; TOKEN_NONCE_BYTES],
        private_key: &[u8; KEY_BYTES],
    ) -> [u8; PRIVATE_TOKEN_BYTES] {
        let mut buf = Vec::with_capacity(PRIVATE_TOKEN_BYTES);
        let mut w = Writer::new(&mut buf);
        w.u64(self.client_id);
        w.i32(self.timeout_seconds);
        write_addresses(&mut w, &self.server_addresses);
        w.bytes(&self.client_to_server_key);
        w.bytes(&self.server_to_client_key);
        w.bytes(&self.user_data);
        debug_assert!(buf.len() <= PRIVATE_TOKEN_BYTES - MAC_BYTES);
        buf.resize(PRIVATE_TOKEN_BYTES, 0);
        let mut out = [0u8; PRIVATE_TOKEN_BYTES];
        out.copy_from_slice(&buf);
        let (body, tag_out) = out.split_at_mut(PRIVATE_TOKEN_BYTES - MAC_BYTES);
        let tag = XChaCha20Poly1305::new(private_key.into())
            .encrypt_in_place_detached(
                XNonce::from_slice(nonce),
                &private_ad(protocol_id, expire_timestamp),
                body,
            )
            .expect("sealing 1008 bytes cannot fail");
        tag_out.copy_from_slice(&tag);
        out
    }

    /// Opens a sealed private part in place and parses it.
    pub fn open(
        sealed: &mut [u8; PRIVATE_TOKEN_BYTES],
        protocol_id: u64,
        expire_timestamp: u64,
        nonce: &[u8; TOKEN_NONCE_BYTES],
        private_key: &XChaCha20Poly1305,
    ) -> Result<PrivateToken, TokenError> {
        let body = decrypt(sealed, protocol_id, expire_timestamp, nonce, private_key)?;
        let mut r = Reader::new(body);
        Ok(PrivateToken {
            client_id: r.u64()?,
            timeout_seconds: r.i32()?,
            server_addresses: read_addresses(&mut r)?,
            client_to_server_key: r.array()?,
            server_to_client_key: r.array()?,
            user_data: r.array()?,
        })
    }

    /// [`PrivateToken::open`] as a server needs it, allocating nothing: the addresses are
    /// only checked against `servers`.
    pub(crate) fn open_for(
        sealed: &mut [u8; PRIVATE_TOKEN_BYTES],
        protocol_id: u64,
        expire_timestamp: u64,
        nonce: &[u8; TOKEN_NONCE_BYTES],
        private_key: &XChaCha20Poly1305,
        servers: &[SocketAddr],
    ) -> Result<ServerView, TokenError> {
        let body = decrypt(sealed, protocol_id, expire_timestamp, nonce, private_key)?;
        let mut r = Reader::new(body);
        let client_id = r.u64()?;
        let timeout_seconds = r.i32()?;
        let mut names_server = false;
        for_each_address(&mut r, |a| names_server |= servers.contains(&a))?;
        Ok(ServerView {
            client_id,
            timeout_seconds,
            names_server,
            client_to_server_key: r.array()?,
            server_to_client_key: r.array()?,
            user_data: r.array()?,
        })
    }
}

/// Opens a sealed private part in place; returns its plaintext body.
fn decrypt<'a>(
    sealed: &'a mut [u8; PRIVATE_TOKEN_BYTES],
    protocol_id: u64,
    expire_timestamp: u64,
    nonce: &[u8; TOKEN_NONCE_BYTES],
    private_key: &XChaCha20Poly1305,
) -> Result<&'a [u8], TokenError> {
    let (body, tag) = sealed.split_at_mut(PRIVATE_TOKEN_BYTES - MAC_BYTES);
    let tag = Tag::clone_from_slice(tag);
    private_key
        .decrypt_in_place_detached(
            XNonce::from_slice(nonce),
            &private_ad(protocol_id, expire_timestamp),
            body,
            &tag,
        )
        .map_err(|_| TokenError::Decrypt)?;
    Ok(body)
}

/// What a backend needs to mint connect tokens.
#[derive(Clone, Debug)]
pub struct TokenParams {
    /// The game's protocol id.
    pub protocol_id: u64,
    /// Unix seconds now.
    pub create_timestamp: u64,
    /// Seconds the token stays valid; negative: never expires.
    pub expire_seconds: i64,
    /// Seconds of silence before the connection times out.
    pub timeout_seconds: i32,
    /// Servers the token is good for, as the client should reach them.
    pub server_addresses: Vec<SocketAddr>,
}

impl ConnectToken {
    /// Mints a token for `client_id`. `random` supplies the nonce and the two session
    /// keys (56 bytes); it must come from a cryptographic source.
    ///
    /// # Panics
    /// When the address list is empty or longer than 32: a caller bug.
    pub fn mint(
        params: &TokenParams,
        client_id: u64,
        user_data: &[u8; USER_DATA_BYTES],
        private_key: &[u8; KEY_BYTES],
        random: &[u8; TOKEN_NONCE_BYTES + 2 * KEY_BYTES],
    ) -> ConnectToken {
        assert!(
            (1..=MAX_SERVERS_PER_TOKEN as usize).contains(&params.server_addresses.len()),
            "a token names 1 to 32 servers"
        );
        let expire_timestamp = if params.expire_seconds < 0 {
            u64::MAX
        } else {
            params
                .create_timestamp
                .saturating_add(params.expire_seconds as u64)
        };
        let mut nonce = [0u8; TOKEN_NONCE_BYTES];
        nonce.copy_from_slice(&random[..24]);
        let mut c2s = [0u8; KEY_BYTES];
        c2s.copy_from_slice(&random[24..56]);
        let mut s2c = [0u8; KEY_BYTES];
        s2c.copy_from_slice(&random[56..88]);
        let private = PrivateToken {
            client_id,
            timeout_seconds: params.timeout_seconds,
            server_addresses: params.server_addresses.clone(),
            client_to_server_key: c2s,
            server_to_client_key: s2c,
            user_data: *user_data,
        }
        .seal(params.protocol_id, expire_timestamp, &nonce, private_key);
        ConnectToken {
            protocol_id: params.protocol_id,
            create_timestamp: params.create_timestamp,
            expire_timestamp,
            nonce,
            private,
            timeout_seconds: params.timeout_seconds,
            server_addresses: params.server_addresses.clone(),
            client_to_server_key: c2s,
            server_to_client_key: s2c,
        }
    }

    /// The 2048-byte wire form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(CONNECT_TOKEN_BYTES);
        let mut w = Writer::new(&mut buf);
        w.bytes(VERSION_INFO);
        w.u64(self.protocol_id);
        w.u64(self.create_timestamp);
        w.u64(self.expire_timestamp);
        w.bytes(&self.nonce);
        w.bytes(&self.private);
        w.i32(self.timeout_seconds);
        write_addresses(&mut w, &self.server_addresses);
        w.bytes(&self.client_to_server_key);
        w.bytes(&self.server_to_client_key);
        buf.resize(CONNECT_TOKEN_BYTES, 0);
        buf
    }

    /// Parses and validates a 2048-byte token as a client must before connecting.
    pub fn from_bytes(bytes: &[u8]) -> Result<ConnectToken, TokenError> {
        if bytes.len() != CONNECT_TOKEN_BYTES {
            return Err(TokenError::Length);
        }
        let mut r = Reader::new(bytes);
        if r.bytes(13)? != VERSION_INFO {
            return Err(TokenError::Version);
        }
        let token = ConnectToken {
            protocol_id: r.u64()?,
            create_timestamp: r.u64()?,
            expire_timestamp: r.u64()?,
            nonce: r.array()?,
            private: r.array()?,
            timeout_seconds: r.i32()?,
            server_addresses: read_addresses(&mut r)?,
            client_to_server_key: r.array()?,
            server_to_client_key: r.array()?,
        };
        if token.create_timestamp > token.expire_timestamp {
            return Err(TokenError::Timestamps);
        }
        Ok(token)
    }
}

/// Seals a challenge token for `client_id` and its user data into `out`.
pub fn seal_challenge(
    out: &mut [u8; CHALLENGE_TOKEN_BYTES],
    client_id: u64,
    user_data: &[u8; USER_DATA_BYTES],
    challenge_sequence: u64,
    key: &PacketKey,
) {
    out.fill(0);
    out[..8].copy_from_slice(&client_id.to_le_bytes());
    out[8..8 + USER_DATA_BYTES].copy_from_slice(user_data);
    let (body, tag_out) = out.split_at_mut(CHALLENGE_TOKEN_BYTES - MAC_BYTES);
    let tag = key.seal(challenge_sequence, &[], body);
    tag_out.copy_from_slice(&tag);
}

/// Opens a challenge token in place; returns the client id and user data.
pub fn open_challenge(
    token: &mut [u8; CHALLENGE_TOKEN_BYTES],
    challenge_sequence: u64,
    key: &PacketKey,
) -> Option<(u64, [u8; USER_DATA_BYTES])> {
    let (body, tag) = token.split_at_mut(CHALLENGE_TOKEN_BYTES - MAC_BYTES);
    let tag = (&*tag).try_into().expect("split at the tag's length");
    key.open(challenge_sequence, &[], body, tag).ok()?;
    let client_id = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
    let mut user_data = [0u8; USER_DATA_BYTES];
    user_data.copy_from_slice(&body[8..8 + USER_DATA_BYTES]);
    Some((client_id, user_data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netcode::packet::tests::hex;

    const KEY: [u8; 32] = {
        let mut k = [0u8; 32];
        let mut i = 0;
        while i < 32 {
            k[i] = i as u8;
            i += 1;
        }
        k
    };

    fn reference_token() -> Vec<u8> {
        let text = include_str!("../../../../../shared/protocol/vectors/c_token_vector.txt");
        let line = text.lines().find(|l| l.starts_with("TOKEN")).unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        let bytes = hex(f[2]);
        assert_eq!(bytes.len(), f[1].parse::<usize>().unwrap());
        bytes
    }

    #[test]
    fn a_server_reads_the_reference_token_as_open_does_and_checks_its_addresses() {
        let t = ConnectToken::from_bytes(&reference_token()).unwrap();
        let key = XChaCha20Poly1305::new((&KEY).into());
        let open = |servers: &[SocketAddr]| {
            let mut private = t.private;
            PrivateToken::open_for(
                &mut private,
                t.protocol_id,
                t.expire_timestamp,
                &t.nonce,
                &key,
                servers,
            )
            .unwrap()
        };
        let mut private = t.private;
        let full = PrivateToken::open(
            &mut private,
            t.protocol_id,
            t.expire_timestamp,
            &t.nonce,
            &key,
        )
        .unwrap();
        let ours: SocketAddr = "[::1]:40001".parse().unwrap();
        let other: SocketAddr = "127.0.0.1:40001".parse().unwrap();
        let view = open(&[other, ours]);
        assert_eq!(
            view,
            ServerView {
                client_id: full.client_id,
                timeout_seconds: full.timeout_seconds,
                names_server: true,
                client_to_server_key: full.client_to_server_key,
                server_to_client_key: full.server_to_client_key,
                user_data: full.user_data,
            }
        );
        assert!(!open(&[other]).names_server);
    }

    #[test]
    fn decodes_the_reference_token_and_opens_its_private_part() {
        let bytes = reference_token();
        let t = ConnectToken::from_bytes(&bytes).unwrap();
        assert_eq!(t.protocol_id, 0x1234_5678_90ab_cdef);
        assert_eq!(t.expire_timestamp - t.create_timestamp, 45);
        assert_eq!(t.timeout_seconds, 17);
        let v4: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let v6: SocketAddr = "[::1]:40001".parse().unwrap();
        assert_eq!(t.server_addresses, vec![v4, v6]);
        // ::1 is eight little-endian groups: its last group reads 01 00.
        let v6_at = 13 + 8 + 8 + 8 + 24 + 1024 + 4 + 4 + 7 + 1;
        assert_eq!(&bytes[v6_at + 14..v6_at + 16], &[1, 0]);
        // Re-encoding gives the same 2048 bytes.
        assert_eq!(t.to_bytes(), bytes);

        let mut private = t.private;
        let p = PrivateToken::open(
            &mut private,
            t.protocol_id,
            t.expire_timestamp,
            &t.nonce,
            &XChaCha20Poly1305::new((&KEY).into()),
        )
        .unwrap();
        assert_eq!(p.client_id, 0x1122_3344_5566_7788);
        assert_eq!(p.timeout_seconds, 17);
        assert_eq!(p.server_addresses, vec![v4, v6]);
        assert_eq!(p.client_to_server_key, t.client_to_server_key);
        assert_eq!(p.server_to_client_key, t.server_to_client_key);
        let want: Vec<u8> = (0..256).map(|i| 255 - i as u8).collect();
        assert_eq!(&p.user_data[..], &want[..]);
    }

    #[test]
    fn private_part_does_not_open_with_another_key_protocol_or_expiry() {
        let t = ConnectToken::from_bytes(&reference_token()).unwrap();
        let good = XChaCha20Poly1305::new((&KEY).into());
        let mut other_key = [0u8; 32];
        other_key[0] = 1;
        let cases = [
            (
                t.protocol_id,
                t.expire_timestamp,
                XChaCha20Poly1305::new((&other_key).into()),
            ),
            (t.protocol_id ^ 1, t.expire_timestamp, good.clone()),
            (t.protocol_id, t.expire_timestamp + 1, good),
        ];
        for (protocol_id, expire, key) in cases {
            let mut p = t.private;
            assert_eq!(
                PrivateToken::open(&mut p, protocol_id, expire, &t.nonce, &key),
                Err(TokenError::Decrypt)
            );
        }
    }

    #[test]
    fn minted_tokens_round_trip_with_ipv4_and_ipv6() {
        let params = TokenParams {
            protocol_id: 77,
            create_timestamp: 1_000,
            expire_seconds: 30,
            timeout_seconds: 5,
            server_addresses: vec![
                "10.1.2.3:5000".parse().unwrap(),
                "[2001:db8::7]:6000".parse().unwrap(),
            ],
        };
        let user_data = [42u8; USER_DATA_BYTES];
        let random: [u8; 88] = std::array::from_fn(|i| (i as u8).wrapping_mul(3));
        let t = ConnectToken::mint(&params, 9, &user_data, &KEY, &random);
        let bytes = t.to_bytes();
        assert_eq!(bytes.len(), CONNECT_TOKEN_BYTES);
        let back = ConnectToken::from_bytes(&bytes).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.expire_timestamp, 1_030);
        let mut private = back.private;
        let p = PrivateToken::open(
            &mut private,
            77,
            1_030,
            &back.nonce,
            &XChaCha20Poly1305::new((&KEY).into()),
        )
        .unwrap();
        assert_eq!(p.server_addresses, params.server_addresses);
        assert_eq!(p.user_data, user_data);
        assert_eq!(p.client_id, 9);
    }

    #[test]
    fn bad_tokens_are_refused() {
        let mut bytes = reference_token();
        assert_eq!(
            ConnectToken::from_bytes(&bytes[..2047]),
            Err(TokenError::Length)
        );
        bytes[0] = b'X';
        assert_eq!(ConnectToken::from_bytes(&bytes), Err(TokenError::Version));
        let mut bytes = reference_token();
        // Address count 0.
        let count_at = 13 + 8 + 8 + 8 + 24 + 1024 + 4;
        bytes[count_at..count_at + 4].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(ConnectToken::from_bytes(&bytes), Err(TokenError::Addresses));
        bytes[count_at..count_at + 4].copy_from_slice(&33u32.to_le_bytes());
        assert_eq!(ConnectToken::from_bytes(&bytes), Err(TokenError::Addresses));
        let mut bytes = reference_token();
        bytes[count_at + 4] = 3; // address type 3
        assert_eq!(ConnectToken::from_bytes(&bytes), Err(TokenError::Addresses));
    }

    #[test]
    fn challenge_tokens_round_trip_and_bind_their_sequence() {
        let key = PacketKey::new(&KEY);
        let mut t = [0u8; CHALLENGE_TOKEN_BYTES];
        let ud = [7u8; USER_DATA_BYTES];
        seal_challenge(&mut t, 99, &ud, 5, &key);
        let mut wrong = t;
        assert_eq!(open_challenge(&mut wrong, 6, &key), None);
        assert_eq!(open_challenge(&mut t, 5, &key), Some((99, ud)));
    }
}
