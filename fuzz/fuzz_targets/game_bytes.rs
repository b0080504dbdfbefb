//! The bytes a game boundary passes through untouched, decoded by their owner: the
//! runtime's reliable events (a client reads them), the shooter's game events, and capture
//! the flag's inputs (the server decodes every client's) and events. Raw bytes never panic,
//! and what decodes re-encodes to the same bytes (a tick's game events also when rebuilt
//! one event at a time).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickforge_proto::msg::{push_game_event, Event};
use tickforge_shooter::ShooterEvent;

fuzz_target!(|data: &[u8]| {
    if let Ok(e) = Event::decode(data) {
        let mut out = Vec::new();
        e.encode(&mut out);
        assert_eq!(out, data);
        // A tick's game events have one encoding: rebuilt from its events, the same bytes.
        if matches!(e, Event::Game(_) | Event::Games(_)) {
            let mut again = Vec::new();
            for event in e.game_events() {
                push_game_event(&mut again, event);
            }
            assert_eq!(again, data);
        }
    }
    if let Ok(e) = ShooterEvent::decode(data) {
        let mut out = Vec::new();
        e.encode(&mut out);
        assert_eq!(out, data);
    }
    if let Some(i) = tickforge_ctf::Input::from_bytes(data) {
        assert_eq!(i.to_bytes().as_slice(), data);
    }
    if let Some(e) = tickforge_ctf::Event::decode(data) {
        let mut out = Vec::new();
        e.write(&mut out);
        assert_eq!(out, data);
    }
});
