//! The example `ctf_server` is a whole server binary made by one call,
//! `tickforge_server::run::<Ctf>()`: it serves capture the flag, with its own settings
//! checked by the game, and reports as `tickforge serve` does.

use std::path::PathBuf;
use std::process::Command;

/// `target/<profile>/examples/ctf_server`, which `cargo test` builds before the tests.
fn example() -> PathBuf {
    let mut dir = std::env::current_exe().unwrap();
    dir.pop(); // the test binary
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir.join("examples").join("ctf_server");
    assert!(
        path.exists(),
        "{} is missing: `cargo test -p tickforge-ctf` builds it (a `--test` filter does not)",
        path.display()
    );
    path
}

fn server() -> Command {
    let mut c = Command::new(example());
    c.env("TICKFORGE_PRIVATE_KEY", "11".repeat(32));
    c
}

#[test]
fn the_example_is_a_server_of_capture_the_flag() {
    let out = server()
        .args([
            "--bind",
            "127.0.0.1:0",
            "--matches",
            "2",
            "--duration-s",
            "1",
        ])
        .args(["--results-file", "none", "--json", "--quiet"])
        .args(["--game-set", "captures=5"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["game"], "ctf", "{report}");
    assert_eq!(report["matches"], 2);
    let on_time = report["ticks"]["on_time"].as_u64().unwrap();
    // Two matches at 128 Hz for a second, minus what a shared machine makes late.
    assert!(on_time > 200, "{}", report["ticks"]);
}

#[test]
fn the_game_checks_its_keys_and_the_help_names_the_game() {
    let out = server()
        .args(["--bind", "127.0.0.1:0", "--game-set", "captures=0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("game `ctf`: captures: expected"), "{err}");

    let out = server().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("Host matches of ctf"), "{help}");
    assert!(
        help.contains("--admin-bind") && help.contains("--game-set"),
        "{help}"
    );
}
