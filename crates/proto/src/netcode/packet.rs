//! netcode.io 1.02 packets: the connection request in the clear, everything else sealed.
//!
//! ```text
//! connection request (exactly 1078 bytes, not encrypted):
//!   0x00 | version_info[13] | protocol_id u64 | expire_timestamp u64 | nonce[24] | private_token[1024]
//!
//! every other packet:
//!   prefix u8 = (sequence_bytes << 4) | type      type 1..=6, sequence_bytes 1..=8
//!   sequence  = sequence_bytes bytes, least significant first, minimal (0 takes 1 byte)
//!   body      = ChaCha20-Poly1305 (IETF) ciphertext of the plaintext body | tag[16]
//!     AD    = version_info[13] | protocol_id u64 | prefix u8
//!     nonce = [0, 0, 0, 0] | sequence u64
//!
//! plaintext bodies by type:
//!   1 denied      (empty)
//!   2 challenge   challenge_sequence u64 | challenge_token[300]
//!   3 response    challenge_sequence u64 | challenge_token[300]
//!   4 keep-alive  client_index u32 | max_clients u32
//!   5 payload     1..=1200 bytes
//!   6 disconnect  (empty)
//! ```
//!
//! [`open`] applies the checks of the standard in its mandated order; a packet that fails
//! any of them is dropped with the reason, never a panic.

use super::aead::PacketKey;

use super::replay::ReplayWindow;
use super::{
    CHALLENGE_TOKEN_BYTES, CONNECTION_REQUEST_BYTES, KEY_BYTES, MAC_BYTES, MAX_PAYLOAD_BYTES,
    VERSION_INFO,
};

/// Smallest encrypted packet: prefix, one sequence byte, an empty body and its tag.
pub const MIN_ENCRYPTED_BYTES: usize = 1 + 1 + MAC_BYTES;
/// Largest valid packet: prefix, eight sequence bytes, a full payload and its tag (1225).
pub const MAX_ENCRYPTED_BYTES: usize = 1 + 8 + MAX_PAYLOAD_BYTES + MAC_BYTES;
/// Plaintext size of a challenge or response body.
pub const CHALLENGE_BODY_BYTES: usize = 8 + CHALLENGE_TOKEN_BYTES;
/// Plaintext size of a keep-alive body.
pub const KEEPALIVE_BODY_BYTES: usize = 8;

/// The packet types of netcode.io 1.02.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PacketType {
    /// Client asks to connect, carrying its connect token's private part.
    Request = 0,
    /// Server refuses (full).
    Denied = 1,
    /// Server answers a request with a challenge token.
    Challenge = 2,
    /// Client returns the challenge token.
    Response = 3,
    /// Either side, to keep the connection alive; the server's first one confirms it.
    KeepAlive = 4,
    /// Application data.
    Payload = 5,
    /// Either side ends the connection.
    Disconnect = 6,
}

impl PacketType {
    fn from_u8(b: u8) -> Option<PacketType> {
        Some(match b {
            0 => PacketType::Request,
            1 => PacketType::Denied,
            2 => PacketType::Challenge,
            3 => PacketType::Response,
            4 => PacketType::KeepAlive,
            5 => PacketType::Payload,
            6 => PacketType::Disconnect,
            _ => return None,
        })
    }

    /// The plaintext body sizes this type accepts.
    fn body_ok(self, len: usize) -> bool {
        match self {
            PacketType::Denied | PacketType::Disconnect => len == 0,
            PacketType::Challenge | PacketType::Response => len == CHALLENGE_BODY_BYTES,
            PacketType::KeepAlive => len == KEEPALIVE_BODY_BYTES,
            PacketType::Payload => (1..=MAX_PAYLOAD_BYTES).contains(&len),
            PacketType::Request => false,
        }
    }

    /// Types covered by replay protection.
    fn is_replay_protected(self) -> bool {
        matches!(
            self,
            PacketType::KeepAlive | PacketType::Payload | PacketType::Disconnect
        )
    }
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Drop {
    /// Shorter than the smallest packet of its kind.
    Short,
    /// Longer than the largest valid packet.
    TooLong,
    /// Type 7 or above.
    UnknownType,
    /// A type this side never receives.
    WrongDirection,
    /// A sequence length outside 1..=8.
    BadSequenceBytes,
    /// Already received, or older than the replay window.
    Replayed,
    /// Authentication failed: forged, corrupted, or sealed with another key.
    Decrypt,
    /// The plaintext has the wrong size for its type.
    BadBodySize,
}

impl Drop {
    /// The report name of the reason.
    pub fn name(self) -> &'static str {
        match self {
            Drop::Short => "short",
            Drop::TooLong => "too_long",
            Drop::UnknownType => "unknown_type",
            Drop::WrongDirection => "wrong_direction",
            Drop::BadSequenceBytes => "bad_sequence_bytes",
            Drop::Replayed => "replayed",
            Drop::Decrypt => "decrypt",
            Drop::BadBodySize => "bad_body_size",
        }
    }
}

/// Reads the type of a datagram from its first byte, before anything else: a connection
/// request is a zero byte; every other packet has its type in the low nibble.
pub fn peek_type(data: &[u8]) -> Result<PacketType, Drop> {
    let &prefix = data.first().ok_or(Drop::Short)?;
    if prefix == 0 {
        return Ok(PacketType::Request);
    }
    PacketType::from_u8(prefix & 0x0f).ok_or(Drop::UnknownType)
}

/// An opened packet: its type and sequence, and the plaintext body (decrypted in place).
#[derive(Debug, PartialEq, Eq)]
pub struct Opened<'a> {
    /// The packet type.
    pub packet_type: PacketType,
    /// The packet's sequence number.
    pub sequence: u64,
    /// The plaintext body, borrowed from the datagram buffer.
    pub body: &'a [u8],
}

/// A little-endian sequence number of 1 to 8 bytes.
fn read_sequence(bytes: &[u8]) -> u64 {
    let mut sequence = 0u64;
    for (i, &b) in bytes.iter().enumerate() {
        sequence |= u64::from(b) << (8 * i);
    }
    sequence
}

/// Checks and decrypts an encrypted packet in place, in the order netcode.io 1.02 mandates.
///
/// `accept` tells which types this side receives. `replay` is the connection's window, or
/// `None` before a connection exists (the window then plays no part). The window advances
/// only after a successful open, and only for keep-alive, payload and disconnect.
pub fn open<'a>(
    data: &'a mut [u8],
    protocol_id: u64,
    key: &PacketKey,
    accept: impl Fn(PacketType) -> bool,
    replay: Option<&mut ReplayWindow>,
) -> Result<Opened<'a>, Drop> {
    // 1. Length.
    if data.len() < MIN_ENCRYPTED_BYTES {
        return Err(Drop::Short);
    }
    if data.len() > MAX_ENCRYPTED_BYTES {
        return Err(Drop::TooLong);
    }
    let prefix = data[0];
    // 2. Type.
    let packet_type = match PacketType::from_u8(prefix & 0x0f) {
        Some(PacketType::Request) | None => return Err(Drop::UnknownType),
        Some(t) => t,
    };
    // 3. Direction.
    if !accept(packet_type) {
        return Err(Drop::WrongDirection);
    }
    // 4. Sequence length, checked before it indexes anything.
    let sequence_bytes = usize::from(prefix >> 4);
    if !(1..=8).contains(&sequence_bytes) {
        return Err(Drop::BadSequenceBytes);
    }
    // 5. Room for the sequence and the tag.
    let header = 1 + sequence_bytes;
    if data.len() < header + MAC_BYTES {
        return Err(Drop::Short);
    }
    let sequence = read_sequence(&data[1..header]);
    // 6. Replay, before spending a decryption on it.
    if packet_type.is_replay_protected() {
        if let Some(window) = replay.as_deref() {
            if window.already_received(sequence) {
                return Err(Drop::Replayed);
            }
        }
    }
    // 7. Authenticate and decrypt.
    let ad = associated_data(protocol_id, prefix);
    let (_, rest) = data.split_at_mut(header);
    let (body, tag) = rest.split_at_mut(rest.len() - MAC_BYTES);
    let tag = tag.try_into().expect("split at the tag's length");
    key.open(sequence, &ad, body, tag)
        .map_err(|_| Drop::Decrypt)?;
    // 8. Only now does the window move.
    if packet_type.is_replay_protected() {
        if let Some(window) = replay {
            window.advance(sequence);
        }
    }
    // 9. Body size for the type.
    if !packet_type.body_ok(body.len()) {
        return Err(Drop::BadBodySize);
    }
    Ok(Opened {
        packet_type,
        sequence,
        body,
    })
}

/// Seals a packet of `packet_type` with `sequence` into `out` (cleared first); `body`
/// writes the plaintext body after the header.
///
/// # Panics
/// In debug builds, when the body is not a valid size for the type: a caller bug.
pub fn seal(
    out: &mut Vec<u8>,
    packet_type: PacketType,
    sequence: u64,
    protocol_id: u64,
    key: &PacketKey,
    body: impl FnOnce(&mut Vec<u8>),
) {
    debug_assert!(packet_type != PacketType::Request);
    let sequence_bytes = sequence_bytes(sequence);
    let prefix = ((sequence_bytes as u8) << 4) | packet_type as u8;
    out.clear();
    out.push(prefix);
    out.extend_from_slice(&sequence.to_le_bytes()[..sequence_bytes]);
    let header = out.len();
    body(out);
    debug_assert!(
        packet_type.body_ok(out.len() - header),
        "bad body size for {packet_type:?}"
    );
    let ad = associated_data(protocol_id, prefix);
    let tag = key.seal(sequence, &ad, &mut out[header..]);
    out.extend_from_slice(&tag);
}

/// Bytes the sequence takes on the wire: minimal, and at least one.
pub fn sequence_bytes(sequence: u64) -> usize {
    (8 - sequence.leading_zeros() as usize / 8).max(1)
}

fn associated_data(protocol_id: u64, prefix: u8) -> [u8; 22] {
    let mut ad = [0u8; 22];
    ad[..13].copy_from_slice(VERSION_INFO);
    ad[13..21].copy_from_slice(&protocol_id.to_le_bytes());
    ad[21] = prefix;
    ad
}

/// A ChaCha20-Poly1305 key schedule from 32 key bytes.
pub fn cipher(key: &[u8; KEY_BYTES]) -> PacketKey {
    PacketKey::new(key)
}

/// The fields of a connection request, borrowed from the datagram.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// The token's protocol id.
    pub protocol_id: u64,
    /// Unix seconds after which the token is void.
    pub expire_timestamp: u64,
    /// The token's XChaCha nonce.
    pub nonce: &'a [u8; 24],
    /// The sealed private token.
    pub private_token: &'a mut [u8; super::PRIVATE_TOKEN_BYTES],
}

/// Splits a connection request into its fields after the size and version checks.
pub fn parse_request(data: &mut [u8]) -> Result<Request<'_>, RequestDrop> {
    if data.len() != CONNECTION_REQUEST_BYTES {
        return Err(RequestDrop::Size);
    }
    if &data[1..14] != VERSION_INFO {
        return Err(RequestDrop::Version);
    }
    // 0x00 | version 1..14 | protocol_id 14..22 | expire 22..30 | nonce 30..54 | private 54..
    let (head, private) = data.split_at_mut(54);
    let protocol_id = u64::from_le_bytes(head[14..22].try_into().expect("8 bytes"));
    let expire_timestamp = u64::from_le_bytes(head[22..30].try_into().expect("8 bytes"));
    let nonce: &[u8; 24] = head[30..54].try_into().expect("24 bytes");
    let private_token = private
        .try_into()
        .expect("1024 bytes after a 1078-byte check");
    Ok(Request {
        protocol_id,
        expire_timestamp,
        nonce,
        private_token,
    })
}

/// Writes a connection request for a token's public fields into `out` (cleared first).
pub fn write_request(
    out: &mut Vec<u8>,
    protocol_id: u64,
    expire_timestamp: u64,
    nonce: &[u8; 24],
    private_token: &[u8; super::PRIVATE_TOKEN_BYTES],
) {
    out.clear();
    out.push(0);
    out.extend_from_slice(VERSION_INFO);
    out.extend_from_slice(&protocol_id.to_le_bytes());
    out.extend_from_slice(&expire_timestamp.to_le_bytes());
    out.extend_from_slice(nonce);
    out.extend_from_slice(private_token);
    debug_assert_eq!(out.len(), CONNECTION_REQUEST_BYTES);
}

/// Why a connection request was dropped before its token was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestDrop {
    /// Not exactly 1078 bytes.
    Size,
    /// Not `NETCODE 1.02`.
    Version,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const KEY: [u8; 32] = {
        let mut k = [0u8; 32];
        let mut i = 0;
        while i < 32 {
            k[i] = i as u8;
            i += 1;
        }
        k
    };
    const PROTOCOL_ID: u64 = 0x1234_5678_90ab_cdef;

    fn keepalive(out: &mut Vec<u8>, sequence: u64) {
        seal(
            out,
            PacketType::KeepAlive,
            sequence,
            PROTOCOL_ID,
            &cipher(&KEY),
            |b| {
                b.extend_from_slice(&3u32.to_le_bytes());
                b.extend_from_slice(&32u32.to_le_bytes());
            },
        );
    }

    fn accept_all(_: PacketType) -> bool {
        true
    }

    #[test]
    fn sequence_bytes_are_minimal() {
        assert_eq!(sequence_bytes(0), 1);
        assert_eq!(sequence_bytes(255), 1);
        assert_eq!(sequence_bytes(256), 2);
        assert_eq!(sequence_bytes(1 << 63), 8);
        assert_eq!(sequence_bytes(u64::MAX), 8);
    }

    #[test]
    fn reproduces_the_reference_keepalives_byte_for_byte() {
        let text = include_str!("../../../../../shared/protocol/vectors/c_pkt_vectors.txt");
        let mut checked = 0;
        let mut out = Vec::new();
        for line in text.lines().filter(|l| l.starts_with("PKT")) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let sequence: u64 = f[1].parse().unwrap();
            let len: usize = f[2].parse().unwrap();
            let want = hex(f[3]);
            assert_eq!(want.len(), len);
            keepalive(&mut out, sequence);
            assert_eq!(out, want, "sequence {sequence}");
            // And it opens to the same body.
            let mut data = want.clone();
            let opened = open(&mut data, PROTOCOL_ID, &cipher(&KEY), accept_all, None).unwrap();
            assert_eq!(opened.sequence, sequence);
            assert_eq!(opened.body, [3, 0, 0, 0, 32, 0, 0, 0]);
            checked += 1;
        }
        assert_eq!(checked, 10);
    }

    pub(crate) fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn prefix_nibbles_outside_one_to_eight_are_dropped_without_panic() {
        let mut good = Vec::new();
        keepalive(&mut good, 5);
        for nibble in [0u8, 9, 10, 11, 12, 13, 14, 15] {
            let mut data = good.clone();
            data[0] = (nibble << 4) | 4;
            let r = open(&mut data, PROTOCOL_ID, &cipher(&KEY), accept_all, None);
            assert_eq!(r, Err(Drop::BadSequenceBytes), "nibble {nibble}");
        }
    }

    #[test]
    fn the_mandated_order_decides_the_reason() {
        let key = cipher(&KEY);
        let mut good = Vec::new();
        keepalive(&mut good, 7);
        assert_eq!(
            open(
                &mut good[..10].to_vec(),
                PROTOCOL_ID,
                &key,
                accept_all,
                None
            ),
            Err(Drop::Short)
        );
        let mut t7 = good.clone();
        t7[0] = 0x17;
        assert_eq!(
            open(&mut t7, PROTOCOL_ID, &key, accept_all, None),
            Err(Drop::UnknownType)
        );
        let mut d = good.clone();
        assert_eq!(
            open(
                &mut d,
                PROTOCOL_ID,
                &key,
                |t| t != PacketType::KeepAlive,
                None
            ),
            Err(Drop::WrongDirection)
        );
        let mut wrong_protocol = good.clone();
        assert_eq!(
            open(&mut wrong_protocol, 1, &key, accept_all, None),
            Err(Drop::Decrypt)
        );
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(
            open(&mut flipped, PROTOCOL_ID, &key, accept_all, None),
            Err(Drop::Decrypt)
        );
        let mut too_long = vec![0x15u8; MAX_ENCRYPTED_BYTES + 1];
        assert_eq!(
            open(&mut too_long, PROTOCOL_ID, &key, accept_all, None),
            Err(Drop::TooLong)
        );
    }

    #[test]
    fn replayed_packets_are_dropped_and_the_window_moves_only_on_success() {
        let key = cipher(&KEY);
        let mut window = ReplayWindow::new();
        let mut p = Vec::new();
        keepalive(&mut p, 100);
        let mut forged = p.clone();
        let n = forged.len();
        forged[n - 1] ^= 0xff;
        // A forged packet does not advance the window...
        assert_eq!(
            open(
                &mut forged,
                PROTOCOL_ID,
                &key,
                accept_all,
                Some(&mut window)
            ),
            Err(Drop::Decrypt)
        );
        // ...so the real one still opens, once.
        assert!(open(
            &mut p.clone(),
            PROTOCOL_ID,
            &key,
            accept_all,
            Some(&mut window)
        )
        .is_ok());
        assert_eq!(
            open(&mut p, PROTOCOL_ID, &key, accept_all, Some(&mut window)),
            Err(Drop::Replayed)
        );
    }

    #[test]
    fn largest_valid_packet_is_1225_bytes() {
        let key = cipher(&KEY);
        let mut out = Vec::new();
        seal(
            &mut out,
            PacketType::Payload,
            u64::MAX,
            PROTOCOL_ID,
            &key,
            |b| b.resize(b.len() + 1200, 7),
        );
        assert_eq!(out.len(), 1225);
        assert_eq!(MAX_ENCRYPTED_BYTES, 1225);
        let opened = open(&mut out, PROTOCOL_ID, &key, accept_all, None).unwrap();
        assert_eq!(opened.body.len(), 1200);
    }

    #[test]
    fn request_round_trips_and_checks_size_and_version() {
        let mut out = Vec::new();
        let nonce = [9u8; 24];
        let private = [5u8; 1024];
        write_request(&mut out, PROTOCOL_ID, 1234, &nonce, &private);
        assert_eq!(out.len(), 1078);
        let r = parse_request(&mut out).unwrap();
        assert_eq!((r.protocol_id, r.expire_timestamp), (PROTOCOL_ID, 1234));
        assert_eq!(r.nonce, &nonce);
        assert_eq!(&r.private_token[..], &private[..]);
        let mut short = vec![0u8; 1077];
        assert_eq!(parse_request(&mut short).err(), Some(RequestDrop::Size));
        out[5] = b'X';
        assert_eq!(parse_request(&mut out).err(), Some(RequestDrop::Version));
    }
}
