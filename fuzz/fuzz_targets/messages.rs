//! The match messages and the snapshot and command decoders: raw bytes never panic, and
//! what decodes re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickforge_proto::msg::{ClientMsg, ServerMsg};
use tickforge_shooter::{cmd, SnapshotReader};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = ClientMsg::decode(data) {
        let mut out = Vec::new();
        m.encode(&mut out);
        assert_eq!(out, data);
    }
    if let Ok(m) = ServerMsg::decode(data) {
        let mut out = Vec::new();
        m.encode(&mut out);
        assert_eq!(out, data);
    }
    if let Ok(c) = cmd::decode(data) {
        assert_eq!(cmd::to_bytes(&c).as_slice(), data);
    }
    let mut reader = SnapshotReader::default();
    let _ = reader.read(data);
});
