//! `serve --profile-s N`: a real server on 127.0.0.1 samples itself and writes a flame graph
//! of its workers; bad flags are refused before it starts.

#![cfg(all(unix, feature = "profile"))]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tickforge-profile-test-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `serve` in `dir` with 16 busy matches for 2 s and `extra`; it exits by itself.
fn serve(dir: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tickforge"))
        .current_dir(dir)
        .env("TICKFORGE_PRIVATE_KEY", "33".repeat(32))
        .args(["serve", "--bind", "127.0.0.1:0", "--matches", "16"])
        .args(["--duration-s", "2", "--results-file", "none", "--quiet"])
        .args(extra)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The file is a flame graph of the workers: an SVG whose frames include the worker's loop.
fn assert_worker_flame_graph(svg: &Path) {
    let text = std::fs::read_to_string(svg).unwrap();
    assert!(
        text.starts_with("<?xml"),
        "{}",
        &text[..text.len().min(200)]
    );
    assert!(text.contains("<svg") && text.trim_end().ends_with("</svg>"));
    // The root is the workers' samples; the worker's loop is under it (debug symbols).
    assert!(
        text.contains("tickforge workers"),
        "no worker root in {}",
        svg.display()
    );
    assert!(
        text.contains("tickforge_server::worker::Worker::run"),
        "no worker frame in {}",
        svg.display()
    );
    // The sampler's own frames are cut at the signal.
    assert!(
        !text.contains("pprof::"),
        "sampler frames in {}",
        svg.display()
    );
}

#[test]
fn serve_writes_a_flame_graph_of_its_workers_and_keeps_serving() {
    let dir = scratch("out");
    let svg = dir.join("workers.svg");
    let out = serve(&dir, &["--profile-s", "1", "--profile-out", "workers.svg"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let said = err
        .lines()
        .find(|l| l.starts_with("tickforge serve: profile of the workers, "))
        .unwrap_or_else(|| panic!("no profile line in {err}"));
    assert!(said.contains(": workers.svg ("), "{said}");
    assert_worker_flame_graph(&svg);
    // It went on serving after the profile: the whole window was measured and reported.
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("2.0 s measured"), "{summary}");
    // Nothing else is left beside it (the temporary file became it).
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_default_file_is_named_after_the_run() {
    let dir = scratch("default");
    let out = serve(&dir, &["--profile-s", "1"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let run = err
        .lines()
        .find_map(|l| l.trim().strip_prefix("run ")?.split(':').next())
        .unwrap_or_else(|| panic!("no run id in {err}"));
    let name = format!("tickforge-profile-{run}.svg");
    assert!(err.contains(&format!(": {name} (")), "{err}");
    assert_worker_flame_graph(&dir.join(name));
    std::fs::remove_dir_all(&dir).ok();
}

/// Refused at startup, naming the flag: it exits 2 before it listens.
fn assert_refused(extra: &[&str], want: &str) {
    let dir = scratch("bad");
    let out = serve(&dir, extra);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
    assert!(err.contains(want), "{extra:?}: {err}");
    assert!(out.stdout.is_empty(), "{extra:?} listened");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "{extra:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_profile_flags_are_refused_before_serving() {
    for seconds in ["0", "-1", "nan", "inf"] {
        assert_refused(
            &["--profile-s", seconds],
            "tickforge: --profile-s: expected seconds greater than 0",
        );
    }
    assert_refused(
        &["--profile-s", "1", "--profile-out", "no-such-dir/p.svg"],
        "tickforge: --profile-out: cannot write in no-such-dir",
    );
    assert_refused(
        &["--profile-s", "1", "--profile-out", "."],
        "tickforge: --profile-out: . is a directory",
    );
    assert_refused(
        &["--profile-out", "p.svg"],
        "tickforge: --profile-out: given without --profile-s",
    );
}
