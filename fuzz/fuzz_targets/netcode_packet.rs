//! netcode packets: raw bytes into the opener, and sealed packets corrupted then opened.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickforge_proto::netcode::packet::{self, PacketType};
use tickforge_proto::netcode::replay::ReplayWindow;

const PROTOCOL_ID: u64 = 0x7469_636b;

fuzz_target!(|data: &[u8]| {
    let key = packet::cipher(&[7; 32]);
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode & 1 == 0 {
        // Raw: anything at all, with and without a replay window, both directions.
        let mut window = ReplayWindow::new();
        let _ = packet::peek_type(rest);
        let _ = packet::open(&mut rest.to_vec(), PROTOCOL_ID, &key, |_| true, Some(&mut window));
        let _ = packet::open(&mut rest.to_vec(), PROTOCOL_ID, &key, |t| t == PacketType::Payload, None);
        let _ = packet::parse_request(&mut rest.to_vec());
        return;
    }
    // Build, seal, corrupt, open: an untouched packet opens to what was sealed; a
    // corrupted one never opens to anything else.
    if rest.len() < 10 {
        return;
    }
    let sequence = u64::from_le_bytes(rest[..8].try_into().unwrap());
    let flips = rest[8] as usize % 4;
    let body = &rest[9..];
    let body = &body[..body.len().clamp(1, 1200)];
    if body.is_empty() {
        return;
    }
    let mut sealed = Vec::new();
    packet::seal(&mut sealed, PacketType::Payload, sequence, PROTOCOL_ID, &key, |b| b.extend_from_slice(body));
    let original = sealed.clone();
    for i in 0..flips {
        let at = (body[i % body.len()] as usize * 31 + i * 7) % sealed.len();
        sealed[at] ^= 1 << (i % 8);
    }
    let changed = sealed != original;
    match packet::open(&mut sealed, PROTOCOL_ID, &key, |_| true, None) {
        Ok(opened) => {
            assert!(!changed, "a corrupted packet opened");
            assert_eq!(opened.body, body);
            assert_eq!(opened.sequence, sequence);
        }
        Err(_) => assert!(changed, "an untouched packet failed to open"),
    }
});
