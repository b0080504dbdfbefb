//! Recorded matches replay to the end states they were checked in with: a change that alters
//! the simulation (movement, collision, weapons, damage, rounds, lag compensation) fails
//! here, in CI, rather than in a player's replay.
//!
//! `tests/actions/` holds action files (`tickforge serve --record-dir`, and one scripted
//! duel, see [`record_the_scripted_duel`]) and `expected.txt`, one line per file: the end
//! tick, the inputs, the world's state hash and a fingerprint of the whole end state (the
//! state hash, every player's full quantized state, health, weapon, stats, the round and
//! score, and the result line). Each file is replayed twice; both must reach the line.
//!
//! When the simulation changes on purpose, bless the new end states:
//! `TICKFORGE_BLESS_ACTIONS=1 cargo test -p tickforge-shooter --test actions` rewrites each
//! file's recorded end hash (and its check) and `expected.txt`; commit both, and say in the
//! commit why the simulation changed. `tests/actions/README.md` says how to record new ones.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tickforge_game::replay::{checksum, ActionFile, Recorder};
use tickforge_game::rules::RulesConfig;
use tickforge_game::{buttons, rad_to_angle16, PlayerSlot, UserCmd, ViewTime, World, WorldConfig};
use tickforge_shooter::SnapshotWriter;
use tickforge_telemetry::Scopes;

const BLESS: &str = "TICKFORGE_BLESS_ACTIONS";

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/actions")
        .canonicalize()
        .expect("tests/actions")
}

fn blessing() -> bool {
    std::env::var(BLESS).as_deref() == Ok("1")
}

/// Everything of the end state a replay must reproduce, as text: the state hash, each
/// player's full quantized state (the snapshot every client is sent), health, weapon and
/// stats, the round, its phase and the score, and the result line when the match ended.
fn end_state(world: &World) -> String {
    let mut text = format!(
        "tick {} state_hash {:016x}\n",
        world.tick().0,
        world.state_hash()
    );
    let full = SnapshotWriter::with_capacity(world.players().len())
        .write(world)
        .to_vec();
    let _ = writeln!(text, "full_state {}", hex(&full));
    let rules = world.rules();
    for slot in (0..world.players().len()).map(|s| PlayerSlot(s as u16)) {
        let stats = rules.stats(slot).unwrap_or_default();
        let _ = writeln!(
            text,
            "player {} team {:?} health {} alive {} ammo {:?} kills {} deaths {} damage {}",
            slot.0,
            rules.team(slot),
            rules.health_hp(slot),
            rules.is_alive(slot),
            rules.weapon(slot).map(|w| w.ammo()),
            stats.kills,
            stats.deaths,
            stats.damage_dealt_hp,
        );
    }
    let round = rules.round_state();
    let score = round.score();
    let _ = writeln!(
        text,
        "round {} phase {:?} score {}-{}",
        round.round(),
        rules.phase(),
        score.attackers,
        score.defenders
    );
    let mut result = String::new();
    if let Some(r) = world.result() {
        r.encode_body(&mut result);
    }
    let _ = writeln!(text, "result {result}");
    text
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One line of `expected.txt`.
fn line(name: &str, file: &ActionFile, world: &World) -> String {
    let state = end_state(world);
    let kills: u32 = (0..world.players().len())
        .filter_map(|s| world.rules().stats(PlayerSlot(s as u16)))
        .map(|s| s.kills)
        .sum();
    format!(
        "{name} end_tick={} inputs={} state_hash={:016x} end_state={:016x} kills={kills} over={}",
        world.tick().0,
        file.inputs(),
        world.state_hash(),
        checksum(state.as_bytes()),
        world.result().is_some(),
    )
}

/// `bytes` with the recorded end hash set to `hash` and the check made again.
fn with_end_hash(bytes: &[u8], hash: u64) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let n = out.len();
    // The footer ends `state_hash u64 | check u64` (crates/game/src/replay.rs).
    out[n - 16..n - 8].copy_from_slice(&hash.to_le_bytes());
    let check = checksum(&out[..n - 8]);
    out[n - 8..].copy_from_slice(&check.to_le_bytes());
    out
}

#[test]
fn every_recorded_match_replays_to_its_checked_in_end_state() {
    let dir = dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".actions"))
        .collect();
    names.sort();
    assert!(
        names.len() >= 4,
        "recordings in {}: {names:?}",
        dir.display()
    );
    let expected_path = dir.join("expected.txt");
    let expected_text = std::fs::read_to_string(&expected_path).unwrap_or_default();
    let expected: Vec<&str> = expected_text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    let scopes = Scopes::new(Instant::now);

    let mut lines = Vec::new();
    let mut wrong = Vec::new();
    for name in &names {
        let path = dir.join(name);
        let mut bytes = std::fs::read(&path).unwrap();
        let file = ActionFile::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (outcome, world) = file.replay_world(&scopes);
        // The same inputs, the same end: within one process, bit for bit.
        let (again, world_again) = file.replay_world(&scopes);
        assert_eq!(outcome, again, "{name}: two replays differ");
        assert_eq!(
            end_state(&world),
            end_state(&world_again),
            "{name}: two replays differ"
        );
        let got = line(name, &file, &world);
        let want = expected.iter().find(|l| l.split(' ').next() == Some(name));
        if blessing() {
            if !outcome.is_identical() {
                bytes = with_end_hash(&bytes, outcome.replayed_hash);
                std::fs::write(&path, &bytes).unwrap();
            }
        } else {
            if !outcome.is_identical() {
                wrong.push(format!(
                    "{name}: the replay ended at state hash {:016x}, the recording at {:016x}",
                    outcome.replayed_hash, outcome.recorded_hash
                ));
            }
            match want {
                Some(want) if *want == got => {}
                Some(want) => wrong.push(format!("{name}:\n  expected {want}\n  replayed {got}")),
                None => wrong.push(format!("{name}: no line in expected.txt; replayed {got}")),
            }
        }
        lines.push(got);
    }
    for l in &expected {
        let name = l.split(' ').next().unwrap_or_default();
        if !blessing() && !names.iter().any(|n| n == name) {
            wrong.push(format!("{name}: in expected.txt, not in {}", dir.display()));
        }
    }
    if blessing() {
        let mut text = String::from(
            "# The end state each recorded match replays to (crates/shooter/tests/actions.rs).\n",
        );
        for l in &lines {
            text.push_str(l);
            text.push('\n');
        }
        std::fs::write(&expected_path, text).unwrap();
        eprintln!(
            "blessed {} recordings: {}",
            lines.len(),
            expected_path.display()
        );
        return;
    }
    assert!(
        wrong.is_empty(),
        "recorded matches no longer replay to their end states:\n{}\n\nIf the simulation \
         changed on purpose, bless the new end states with\n  {BLESS}=1 cargo test -p \
         tickforge-shooter --test actions\nand commit tests/actions/ with a word on why \
         (tests/actions/README.md).",
        wrong.join("\n")
    );
}

/// Every action file checked in keeps to the format's limits and names a real end: an
/// end tick reached, and inputs in it.
#[test]
fn the_recordings_have_inputs_and_the_duel_has_kills() {
    let dir = dir();
    let scopes = Scopes::new(Instant::now);
    let mut kills_seen = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "actions") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let file = ActionFile::parse(&bytes).unwrap();
        assert!(file.inputs() > 100, "{}", path.display());
        let (outcome, world) = file.replay_world(&scopes);
        assert!(
            outcome.result.is_some(),
            "{}: a finished match",
            path.display()
        );
        kills_seen += (0..world.players().len())
            .filter_map(|s| world.rules().stats(PlayerSlot(s as u16)))
            .map(|s| s.kills)
            .sum::<u32>();
    }
    assert!(kills_seen > 0, "no recording has a kill: hits are untested");
}

/// Where each of the duel's players walks, in turn, from its spawn room: out of the door,
/// then to a stand five metres either side of the south line through the centre, in sight
/// of the other.
const DUEL_LEGS: [[(f32, f32); 3]; 2] = [
    [(-26.0, 0.0), (-19.0, 0.0), (-5.0, -6.0)],
    [(26.0, 0.0), (19.0, 0.0), (5.0, -6.0)],
];

/// Two players on the arena walk out of their spawn rooms to their stands, then turn to the
/// other and fire every eighth tick with a drifting aim, each looking four ticks into the
/// past (lag compensation rewinds the target): three rounds at most. Deterministic: the same script, the
/// same file.
fn duel() -> Vec<u8> {
    let config = WorldConfig {
        players: 2,
        rules: RulesConfig {
            buy: std::time::Duration::from_millis(250),
            round: std::time::Duration::from_secs(8),
            round_end: std::time::Duration::from_millis(250),
            rounds: std::num::NonZeroU8::new(3).unwrap(),
            ..RulesConfig::default()
        },
        ..WorldConfig::default()
    };
    let mut world = World::new(config);
    let mut recorder = Recorder::new(world.config(), 64 * 1024);
    let scopes = Scopes::new(Instant::now);
    let mut legs = [0usize; 2];
    let mut round = world.rules().round_state().round();
    while world.result().is_none() {
        let tick = world.tick();
        if world.rules().round_state().round() != round {
            round = world.rules().round_state().round();
            legs = [0; 2];
        }
        for me in 0..2u8 {
            let i = usize::from(me);
            let a = world.players()[i].state;
            let b = world.players()[1 - i].state;
            let to = |x: f32, y: f32| (x - a.origin.x, y - a.origin.y);
            let mut leg = DUEL_LEGS[i].get(legs[i]).copied();
            if let Some((x, y)) = leg {
                let (dx, dy) = to(x, y);
                if (dx * dx + dy * dy).sqrt() < 0.75 {
                    legs[i] += 1;
                    leg = DUEL_LEGS[i].get(legs[i]).copied();
                }
            }
            let cmd = match leg {
                Some((x, y)) => {
                    let (dx, dy) = to(x, y);
                    UserCmd {
                        forward: 127,
                        yaw: rad_to_angle16(dy.atan2(dx)),
                        ..UserCmd::default()
                    }
                }
                None => {
                    // A hand that drifts: up to a degree either way, and down to the
                    // legs, so some shots miss and some hit the body.
                    let (dx, dy) = to(b.origin.x, b.origin.y);
                    let drift = (tick.0 / 8 * 37 + u32::from(me) * 11) % 7;
                    UserCmd {
                        buttons: if tick.0 % 8 == u32::from(me) * 4 {
                            buttons::FIRE
                        } else {
                            0
                        },
                        yaw: rad_to_angle16(dy.atan2(dx))
                            .wrapping_add((drift as u16) * 60)
                            .wrapping_sub(180),
                        pitch: (tick.0 / 8 % 5) as i16 * 300,
                        ..UserCmd::default()
                    }
                }
            };
            let view = ViewTime {
                tick: tickforge_game::Tick(tick.0.saturating_sub(4)),
                frac: 0,
            };
            world.set_cmd(PlayerSlot(u16::from(me)), cmd);
            world.set_view_time(PlayerSlot(u16::from(me)), view);
            recorder.input(tick, PlayerSlot(u16::from(me)), &cmd, view);
        }
        world.step(&scopes);
    }
    recorder.finish(&world)
}

/// Writes `tests/actions/duel-arena-2p.actions` again: `cargo test -p tickforge-shooter
/// --test actions -- --ignored record_the_scripted_duel`, then bless.
#[test]
#[ignore = "writes a recording; run by hand to record the duel again"]
fn record_the_scripted_duel() {
    let bytes = duel();
    let file = ActionFile::parse(&bytes).unwrap();
    let (outcome, world) = file.replay_world(&Scopes::new(Instant::now));
    assert!(outcome.is_identical());
    eprintln!("{}", end_state(&world));
    std::fs::write(dir().join("duel-arena-2p.actions"), bytes).unwrap();
}
