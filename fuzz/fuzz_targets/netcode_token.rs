//! Connect tokens: raw bytes into the parser and the private-part opener, and minted
//! tokens corrupted then read back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickforge_proto::netcode::token::{private_key_cipher as xkey, ConnectToken, PrivateToken, TokenParams};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let key = [9u8; 32];
    if mode & 1 == 0 {
        let mut token = [0u8; 2048];
        let n = rest.len().min(2048);
        token[..n].copy_from_slice(&rest[..n]);
        if let Ok(t) = ConnectToken::from_bytes(&token) {
            assert_eq!(t.to_bytes(), token.to_vec(), "a parsed token re-encodes to its bytes");
            let mut private = t.private;
            let _ = PrivateToken::open(&mut private, t.protocol_id, t.expire_timestamp, &t.nonce, &xkey(&key));
        }
        let _ = ConnectToken::from_bytes(rest);
        return;
    }
    // Mint from fuzzed fields, flip one byte, read back.
    if rest.len() < 12 {
        return;
    }
    let n_addrs = 1 + rest[0] as usize % 32;
    let addrs = (0..n_addrs)
        .map(|i| {
            let b = rest[(i + 1) % rest.len()];
            if b & 1 == 0 {
                std::net::SocketAddr::from(([b, 1, 2, 3], u16::from(b) * 7))
            } else {
                std::net::SocketAddr::from(([0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(b)], 9000))
            }
        })
        .collect();
    let params = TokenParams {
        protocol_id: u64::from(rest[1]),
        create_timestamp: 1_000,
        expire_seconds: i64::from(rest[2]) - 10,
        timeout_seconds: i32::from(rest[3]) - 10,
        server_addresses: addrs,
    };
    let user_data: [u8; 256] = std::array::from_fn(|i| rest[i % rest.len()]);
    let random: [u8; 88] = std::array::from_fn(|i| rest[(i * 3) % rest.len()]);
    let t = ConnectToken::mint(&params, u64::from(rest[4]), &user_data, &key, &random);
    let mut bytes = t.to_bytes();
    let back = ConnectToken::from_bytes(&bytes).expect("a minted token parses");
    assert_eq!(back, t);
    let at = (usize::from(rest[5]) << 8 | usize::from(rest[6])) % bytes.len();
    bytes[at] ^= 1 << (rest[7] % 8);
    if let Ok(t2) = ConnectToken::from_bytes(&bytes) {
        let mut private = t2.private;
        let opened = PrivateToken::open(&mut private, t2.protocol_id, t2.expire_timestamp, &t2.nonce, &xkey(&key));
        // The private part authenticates the protocol id, the expiry, the nonce and
        // itself: it only opens if the flip hit the creation time or the public tail.
        if opened.is_ok() {
            assert!((21..29).contains(&at) || at >= 61 + 1024, "a flipped byte at {at} still opened");
        }
    }
});
