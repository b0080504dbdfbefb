//! Action-file bots through the binary: `bots --replay` against a real `serve` on 127.0.0.1,
//! `bench --scenario replay`, and the files and flags they refuse.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn tickforge() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickforge"))
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tickforge-replay-bots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn key() -> String {
    "33".repeat(32)
}

/// The checked-in recordings of arena, by name, as the bots take them.
const ARENA_FILES: [&str; 3] = [
    "arena-10p.actions",
    "arena-4p-2-rounds.actions",
    "duel-arena-2p.actions",
];

/// `(name, seats)` of the report's files.
fn files(replay: &serde_json::Value) -> Vec<(String, usize)> {
    replay["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            assert!(f["bytes"].as_u64().unwrap() > 0, "{f}");
            assert_eq!(f["check"].as_str().unwrap().len(), 16, "{f}");
            (
                f["name"].as_str().unwrap().to_string(),
                f["seats"].as_array().unwrap().len(),
            )
        })
        .collect()
}

#[test]
fn replaying_bots_play_a_real_server_and_the_report_names_the_files() {
    let results = scratch("results.log");
    let mut server = tickforge()
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--quiet",
            "--matches",
            "1",
        ])
        .args([
            "--players-per-match",
            "12",
            "--warmup-s",
            "0",
            "--duration-s",
            "60",
        ])
        .arg("--results-file")
        .arg(&results)
        .env("TICKFORGE_PRIVATE_KEY", key())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let listening = lines.next().unwrap().unwrap();
    let addr = listening
        .strip_prefix("listening ")
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{listening}"))
        .to_string();
    std::thread::spawn(move || lines.for_each(drop));

    let report = scratch("bots.json");
    // Twelve bots on sixteen recorded seats: bots 0–9 take arena-10p's seats, 10 and 11
    // the first two of arena-4p-2-rounds.
    let out = tickforge()
        .current_dir(workspace())
        .args([
            "bots",
            "--server",
            &addr,
            "--matches",
            "1",
            "--bots-per-match",
            "12",
        ])
        .args([
            "--replay",
            "tests/actions",
            "--warmup-s",
            "0.5",
            "--duration-s",
            "2",
        ])
        .args(["--progress-lines", "--report"])
        .arg(&report)
        .env("TICKFORGE_PRIVATE_KEY", key())
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "replaying 16 seat(s) of 3 file(s) (arena-10p.actions, arena-4p-2-rounds.actions, \
             duel-arena-2p.actions); left out: flat2km-6p-crowd.actions: recorded on flat2km"
        ),
        "{stderr}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let replay = &r["replay"];
    assert_eq!(
        files(replay),
        ARENA_FILES
            .iter()
            .zip([10, 4, 2])
            .map(|(n, s)| (n.to_string(), s))
            .collect::<Vec<_>>()
    );
    assert_eq!(replay["pairs"], 16);
    assert_eq!(replay["bots"], 12);
    // Every bot connected, got snapshots and replayed recorded commands.
    let c = &r["clients"];
    assert_eq!(c["connected"], 12, "{c}");
    assert!(c["min_response_rate_hz"].as_f64().unwrap() > 0.0, "{c}");
    assert!(
        replay["min_inputs_per_bot"].as_u64().unwrap() > 0,
        "{replay}"
    );
    // Nothing is judged of shots aimed at no one.
    assert_eq!(r["hitreg"]["shots"], 0);
}

#[test]
fn replay_refuses_a_damaged_file_by_name_and_ctf_before_connecting() {
    let src = workspace().join("tests/actions/duel-arena-2p.actions");
    let mut bytes = std::fs::read(src).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x04;
    let dir = scratch("damaged");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("b-damaged.actions"), &bytes).unwrap();
    std::fs::copy(
        workspace().join("tests/actions/arena-10p.actions"),
        dir.join("a-good.actions"),
    )
    .unwrap();
    let bots = |extra: &[&str]| {
        let out = tickforge()
            .args(["bots", "--duration-s", "1", "--replay"])
            .arg(&dir)
            .args(extra)
            .env("TICKFORGE_PRIVATE_KEY", key())
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = bots(&[]);
    assert!(
        err.contains("b-damaged.actions: the action file is damaged or truncated"),
        "{err}"
    );
    let err = bots(&["--game", "ctf"]);
    assert!(
        err.contains("--replay: action files record the shooter's inputs"),
        "{err}"
    );
    let err = bots(&["--tick-hz", "64"]);
    assert!(err.contains("a-good.actions: recorded at 128 Hz"), "{err}");
}

#[test]
fn bench_replay_scenario_replays_the_checked_in_recordings_and_says_which() {
    let json = scratch("bench.json");
    let out = tickforge()
        .current_dir(workspace())
        .args([
            "bench",
            "--scenario",
            "replay",
            "--warmup-s",
            "1",
            "--duration-s",
            "2",
        ])
        .args(["--quiet", "--checks", "report", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("replay "))
        .unwrap_or_else(|| panic!("no replay line: {stdout}"));
    for name in ARENA_FILES {
        assert!(line.contains(name), "{line}");
    }
    assert!(line.contains("10 bots on 16 recorded seats"), "{line}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["scenario"], "replay");
    assert_eq!(files(&r["bots"]["replay"]).len(), 3);
    assert_eq!(r["clients"]["connected"], 10);
}

#[test]
fn bench_replay_without_recordings_here_says_to_give_a_directory() {
    let empty = scratch("empty-cwd");
    std::fs::create_dir_all(&empty).unwrap();
    let out = tickforge()
        .current_dir(&empty)
        .args([
            "bench",
            "--scenario",
            "replay",
            "--quiet",
            "--checks",
            "report",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--scenario replay: give --replay DIR"),
        "{err}"
    );
}
