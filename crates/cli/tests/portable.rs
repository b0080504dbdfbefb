//! The binary built with the portable I/O path (`--features portable-io`), as Windows and
//! macOS builds run it, end to end on Linux: so that path is exercised, not just compiled.
//!
//! `cargo test -p tickforge --features portable-io --test portable`. Without the feature
//! this file holds no test: the binary would take the Linux path.
#![cfg(feature = "portable-io")]

use std::process::Command;

use tickforge_telemetry::report::Report;

fn tickforge() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickforge"))
}

/// The binary says what it is: `serve --help` names the development build, and the
/// production path beside it.
#[test]
fn serve_help_says_this_is_a_development_build_and_production_is_linux() {
    let out = tickforge().args(["serve", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("this is a development build"), "{help}");
    assert!(help.contains("The production path is Linux"), "{help}");
}

/// The smoke scenario over the portable path: every one of its ten clients gets the 128 Hz
/// tick (the bench's own bounds: the mean within 5% of 128 Hz, the slowest client at 90%
/// or more), and the server made one send call per datagram, as only the portable path
/// does (the Linux path sends a tick's ten snapshots in one `sendmmsg`).
#[test]
fn smoke_bench_on_the_portable_path_reaches_every_client_at_128_hz() {
    let dir = std::env::temp_dir().join(format!("tickforge-portable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("smoke.json");
    let out = tickforge()
        .args(["bench", "--scenario", "smoke", "--warmup-s", "1"])
        .args([
            "--duration-s",
            "3",
            "--quiet",
            "--checks",
            "report",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r: Report = serde_json::from_value(value.clone()).unwrap();
    assert_eq!((r.tick_hz, r.matches, r.players_per_match), (128, 1, 10));
    assert_eq!(r.clients.connected, 10, "{stdout}");
    assert_eq!(r.clients.link_errors, 0, "{stdout}");
    for name in ["response_rate_hz", "min_response_rate_hz"] {
        let check = value["checks"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["name"] == name))
            .unwrap_or_else(|| panic!("no check {name}"));
        assert_eq!(check["pass"], true, "{check}\n{stdout}");
    }
    let rate = r.clients.min_response_rate_hz.unwrap();
    assert!(rate >= 0.9 * 128.0, "slowest client {rate} Hz\n{stdout}");

    let d = &r.server.datagrams;
    assert!(d.sent > 0 && d.received > 0, "{d:?}");
    assert_eq!(
        d.send_calls,
        d.sent + d.send_errors,
        "one call per datagram: {d:?}"
    );
    assert!(
        d.recv_calls > d.received,
        "one call per datagram, and the empty ones: {d:?}"
    );
    // The frame a development build pays, for the README's comparison with Linux's.
    let frame = r.match_frame_ms.unwrap();
    assert!(frame.mean > 0.0, "{frame:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `doctor` in a development build on Linux: the host checks run, and those of what the
/// portable path never uses (the real-time class, timer slack) say they do not apply,
/// as information, never as something to fix.
#[test]
fn doctor_says_which_checks_do_not_apply_to_a_development_build() {
    let dir = std::env::temp_dir().join(format!("tickforge-portable-dr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("doctor.json");
    let out = tickforge()
        .args(["doctor", "--quick", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("a development build (the portable I/O path)"),
        "{stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let checks = v["checks"].as_array().unwrap();
    for name in ["realtime", "timer_slack", "wakeup_fifo"] {
        let c = checks
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no check {name}: {stdout}"));
        assert_eq!(c["verdict"], "info", "{c}");
        assert_eq!(c["data"]["applies"], false, "{c}");
    }
    // The Linux host's own checks still run in a development build.
    let cores = checks.iter().find(|c| c["name"] == "cores").unwrap();
    assert!(cores["data"]["applies"].is_null(), "{cores}");
    let _ = std::fs::remove_dir_all(&dir);
}
