//! The action-file reader (`tickforge replay`): raw bytes never panic, and neither do the
//! same bytes sealed with a valid check, which reach every bound past the checksum. What
//! the reader accepts replays without panic, in time bounded by the file (here only small
//! replays run, so the fuzzer keeps its pace: the bound itself is the reader's).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickforge_game::replay::{checksum, ActionFile, MAX_END_TICK};
use tickforge_telemetry::Scopes;

/// The most player-ticks a case replays.
const REPLAY_BUDGET: u64 = 20_000;

fn read(bytes: &[u8]) {
    let Ok(file) = ActionFile::parse(bytes) else {
        return;
    };
    assert!(file.end_tick().0 <= MAX_END_TICK);
    let cost = u64::from(file.end_tick().0) * u64::from(file.config().players.max(1));
    if cost <= REPLAY_BUDGET {
        let outcome = file.replay(&Scopes::new(std::time::Instant::now));
        assert_eq!(outcome.end_tick, file.end_tick());
        assert_eq!(outcome.inputs, file.inputs());
    }
}

fuzz_target!(|data: &[u8]| {
    read(data);
    let mut sealed = data.to_vec();
    let check = checksum(&sealed);
    sealed.extend_from_slice(&check.to_le_bytes());
    read(&sealed);
});
