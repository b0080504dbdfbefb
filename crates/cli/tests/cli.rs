//! The binary end to end: the smoke scenario over real UDP on 127.0.0.1, and bad input.
//!
//! The tests compile for Windows too (CI checks it); those about signals and file modes
//! are Unix's alone and marked `#[cfg(unix)]`.

use std::process::Command;

use tickforge_telemetry::report::Report;

fn tickforge() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickforge"))
}

/// Says that `test` skipped, and why, straight to standard error: libtest shows a passing
/// test's `eprintln!` only under --nocapture, and a skip must show in every run.
fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {why}");
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tickforge-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Runs `bench` as the tests do. With `--checks report`: how fast this host ran is the
/// bench's to judge (`tickforge bench` exits 3 when a check fails), not the tests'. The
/// tests read the checks' list for its shape and its agreement with the report, never for
/// a pass.
///
/// Runs `bench --warmup-s 1 --quiet --checks report` with `flags` and `extra`; returns
/// its summary and its JSON report, `checks` included.
fn bench(name: &str, flags: &[&str], extra: &[&str]) -> (String, serde_json::Value) {
    let json = scratch(name);
    let out = tickforge()
        .arg("bench")
        .args(flags)
        .args(["--warmup-s", "1", "--quiet", "--checks", "report"])
        .args(extra)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (String::from_utf8_lossy(&out.stdout).into_owned(), report)
}

/// The names of the `checks` of a JSON report; each has its fields, and the summary lists
/// it with its verdict.
fn check_names(json: &serde_json::Value, summary: &str) -> Vec<String> {
    let checks = json["checks"].as_array().expect("checks in the report");
    for c in checks {
        let (name, pass) = (c["name"].as_str().unwrap(), c["pass"].as_bool().unwrap());
        assert!(
            c["expected"].is_string() && c.get("measured").is_some(),
            "{c}"
        );
        let verdict = if pass { "pass" } else { "FAIL" };
        assert!(
            summary.contains(&format!("    {verdict} {name} ")),
            "{name} {verdict}:\n{summary}"
        );
    }
    let passed = checks.iter().filter(|c| c["pass"] == true).count();
    assert!(
        summary.contains(&format!(
            "  checks        {passed} of {} pass",
            checks.len()
        )),
        "{summary}"
    );
    checks
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

/// The check `name` of a JSON report.
fn check<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json["checks"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no check {name}: {}", json["checks"]))
}

/// What a plain run is checked for (bench/checks.rs).
const RUN_CHECKS: [&str; 8] = [
    "skipped_ticks",
    "on_time_rate",
    "response_rate_hz",
    "min_response_rate_hz",
    "connected",
    "kicked",
    "link_errors",
    "bots_saturated",
];

/// The smoke scenario end to end: its window's ticks are all accounted for, its figures add
/// up, and its checks judge what the report says. Whether this host held the tick is what
/// those checks say, not this test.
#[test]
fn smoke_bench_accounts_for_every_tick_of_its_window_and_checks_the_report() {
    let (summary, json) = bench(
        "smoke.json",
        &["--scenario", "smoke", "--duration-s", "3"],
        &[],
    );
    let r: Report = serde_json::from_value(json.clone()).unwrap();
    assert!(
        summary.starts_with("tickforge bench smoke: 1 match(es) of shooter on arena × 10 bots"),
        "{summary}"
    );
    assert_eq!((r.game.as_str(), r.map.as_str()), ("shooter", "arena"));

    assert_eq!(
        (
            r.scenario.as_str(),
            r.tick_hz,
            r.matches,
            r.players_per_match
        ),
        ("smoke", 128, 1, 10)
    );
    assert_eq!(r.clients.connected, 10);
    // Both processes say how much memory they held, and how much of it on huge pages.
    #[cfg(target_os = "linux")]
    for (side, m) in [("server", r.server.memory), ("bots", r.bots.memory)] {
        let m = m.unwrap_or_else(|| panic!("{side}: no memory read"));
        assert!(
            m.resident_bytes > 1 << 20 && m.huge_bytes <= m.resident_bytes,
            "{side}: {m:?}"
        );
    }
    assert!(summary.contains("  memory        server "), "{summary}");
    // The bots' work was timed: a datagram read and a tick each cost something, and ten
    // bots at 128 Hz need some of a core, not several.
    let cost = r.bots.cost.expect("the bots' cost, timed in the window");
    assert!(
        cost.receive_us_per_datagram > 0.0
            && cost.tick_us > 0.0
            && cost.cores_to_keep_up > 0.0
            && cost.cores_to_keep_up < 1.0,
        "{cost:?}"
    );
    assert!(summary.contains("  bots cost     "), "{summary}");
    // Every bot got its welcome over the reliable channel, once; no packet was refused.
    assert_eq!(r.clients.reliable_events, 10);
    assert_eq!(r.clients.link_errors, 0);

    // Every client got snapshots.
    assert!(r.clients.response_rate_hz.unwrap() > 0.0);
    assert!(r.clients.min_response_rate_hz.unwrap() > 0.0);

    // The window's ticks, on the match's 128 Hz grid, are each run once (on time or late)
    // or counted skipped: no tick counted twice, none lost from the count.
    let t = r.ticks;
    let grid = r.server.duration_s * 128.0;
    assert!(
        (t.expected as f64 - grid).abs() <= 1.0,
        "{t:?} in {grid} ticks"
    );
    let run = t.on_time + t.late;
    assert!(run <= t.expected + 1, "{t:?}");
    assert_eq!(t.skipped, t.expected.saturating_sub(run), "{t:?}");
    assert!(t.hitches <= run, "{t:?}");

    // The checks judge this report: a skipped tick fails one, and so on.
    assert_eq!(check_names(&json, &summary), RUN_CHECKS);
    let skipped = check(&json, "skipped_ticks");
    assert_eq!(skipped["measured"], t.skipped as f64);
    assert_eq!(skipped["pass"], t.skipped == 0);
    let connected = check(&json, "connected");
    assert_eq!(connected["measured"], 10.0);
    assert_eq!(connected["pass"], true);

    // The categories add up to the match frame within 5%.
    let frame = r.match_frame_ms.unwrap().mean;
    let sum = r.categories_ms.sum();
    assert!(
        (sum - frame).abs() <= 0.05 * frame,
        "categories {sum} vs frame {frame}"
    );
    let phases = [
        r.phases_ms.receive,
        r.phases_ms.simulate,
        r.phases_ms.replicate,
        r.phases_ms.send,
    ];
    let phase_sum: f64 = phases.iter().map(|p| p.unwrap()).sum();
    assert!(
        (phase_sum - frame).abs() <= 0.05 * frame,
        "phases {phase_sum} vs frame {frame}"
    );

    // Every client measured its response time, and what does not exist yet is null.
    assert!(r.clients.response_time_ms.p50.unwrap() > 0.0);
    assert!(r.io_floor_ms.unwrap() > 0.0);
    // The floor divided by is the mean of the one measured before the run and after it.
    let [before, after] = r.io_floor_before_after_us.unwrap();
    assert!(before > 0.0 && after > 0.0, "{before} {after}");
    let mean = (before + after) / 2.0;
    assert!((r.io_floor_per_datagram_us.unwrap() - mean).abs() < 1e-9);
    // And says how many of its match ticks came up short, each measurement's at most its
    // ticks (256 rounds and their warm-up of 25, a tick of each match a round).
    let [short_before, short_after] = r.io_floor_short_ticks.unwrap();
    let floor_ticks = 281 * r.matches as usize;
    assert!(
        short_before <= floor_ticks && short_after <= floor_ticks,
        "{short_before} {short_after} of {floor_ticks}"
    );
    // Datagrams per receive call is what it says (empty calls count): received over calls.
    let d = &r.server.datagrams;
    assert!(d.received > 0 && d.recv_calls > 0, "{d:?}");
    let per_call = d.received as f64 / d.recv_calls as f64;
    assert!((d.per_recv_call.unwrap() - per_call).abs() < 1e-9, "{d:?}");
    assert!(r.games_per_core.measured.is_none());
    assert!(r.games_per_core.projected.unwrap() > 0.0);
}

#[test]
fn crowd_bench_runs_its_bots_on_flat2km() {
    // 20 bots for 1 s + 2 s: the plumbing of the crowd scenario, not its figures.
    let json = scratch("crowd.json");
    let out = tickforge()
        .args([
            "bench",
            "--scenario",
            "crowd",
            "--players",
            "20",
            "--warmup-s",
            "1",
            "--duration-s",
            "2",
            "--quiet",
            "--checks",
            "report",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("tickforge bench crowd"), "{summary}");
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        (
            r.scenario.as_str(),
            r.map.as_str(),
            r.matches,
            r.players_per_match
        ),
        ("crowd", "flat2km", 1, 20)
    );
    assert_eq!(r.server.map, "flat2km");
    // A 20-player match is given two ten-player matches' budget (0.117 ms each at 128 Hz).
    assert!(
        (r.budget_ms - 2.0 * 0.1171875).abs() < 1e-9,
        "{}",
        r.budget_ms
    );
    assert_eq!(r.clients.connected, 20);
    assert_eq!(r.clients.link_errors, 0);
}

/// `bench --check-only`: the checks of a saved report, without running anything; a failed
/// one is exit status 3, told apart from a bench that could not run (2).
#[test]
fn bench_checks_a_saved_report_and_exits_3_when_a_check_fails() {
    let mut r = Report {
        scenario: "smoke".into(),
        tick_hz: 128,
        matches: 1,
        players_per_match: 10,
        bots_saturated: Some(false),
        ..Report::default()
    };
    r.ticks.expected = 384;
    r.ticks.on_time = 384;
    r.clients.response_rate_hz = Some(128.0);
    r.clients.min_response_rate_hz = Some(127.0);
    (r.clients.bots, r.clients.connected) = (10, 10);
    let held = scratch("held.json");
    std::fs::write(&held, serde_json::to_string(&r).unwrap()).unwrap();
    let check_only = |path: &std::path::Path, extra: &[&str]| {
        tickforge()
            .args(["bench", "--check-only"])
            .arg(path)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = check_only(&held, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("  checks        8 of 8 pass:"), "{stdout}");

    r.ticks.on_time = 380;
    r.ticks.skipped = 4;
    let broke = scratch("broke.json");
    std::fs::write(&broke, serde_json::to_string(&r).unwrap()).unwrap();
    let out = check_only(&broke, &[]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(stdout.contains("    FAIL skipped_ticks "), "{stdout}");
    assert!(stdout.contains("    FAIL on_time_rate "), "{stdout}");
    assert!(
        stderr.contains("tickforge: 2 of 8 checks failed: skipped_ticks, on_time_rate"),
        "{stderr}"
    );
    // Listed, not enforced.
    let out = check_only(&broke, &["--checks", "report"]);
    assert_eq!(out.status.code(), Some(0));
    // A report that is not there is a bench that could not run.
    let out = check_only(&scratch("no-such-report.json"), &[]);
    assert_eq!(out.status.code(), Some(2));

    let help = tickforge().args(["bench", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for line in [
        "Exit status:",
        "  2  the bench could not run",
        "  3  the run completed and a check failed",
    ] {
        assert!(help.contains(line), "{line}:\n{help}");
    }
}

/// `serve` starts itself again with glibc's huge-page tunable in its environment (its
/// heap then asks for transparent huge pages), once, and not with TICKFORGE_HUGE_PAGES=0.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn serve_asks_glibc_for_huge_pages_unless_told_not_to() {
    for (opt_out, asked) in [(None, true), (Some("0"), false)] {
        let env = [("GLIBC_TUNABLES", None), ("TICKFORGE_HUGE_PAGES", opt_out)];
        let (mut child, lines) = serve_child_env(std::path::Path::new("none"), 1, &[], &env);
        // Its first line, `listening`, comes after any restart: the same process id, the
        // environment it restarted with.
        let environ = std::fs::read(format!("/proc/{}/environ", child.id())).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(lines[0].starts_with("listening"), "{lines:?}");
        let tunables: Vec<&[u8]> = environ
            .split(|&b| b == 0)
            .filter(|v| v.starts_with(b"GLIBC_TUNABLES="))
            .collect();
        let want: &[&[u8]] = if asked {
            &[b"GLIBC_TUNABLES=glibc.malloc.hugetlb=1"]
        } else {
            &[]
        };
        assert_eq!(tunables, want, "opt-out {opt_out:?}");
    }
}

#[test]
fn unknown_flags_are_named() {
    let out = tickforge()
        .args(["serve", "--tickrate", "64"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tickrate"), "{err}");
    assert!(
        err.contains("Usage: tickforge serve"),
        "shows the expected form: {err}"
    );
}

#[test]
fn bench_help_lists_the_games_and_an_unknown_one_is_refused_with_the_list() {
    let out = tickforge().args(["bench", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let game = &help[help.find("--game <NAME>").expect("--game in help")..];
    let game = &game[..game.find("[default: shooter]").expect("its default")];
    for name in ["shooter", "ctf"] {
        assert!(
            game.contains(&format!("- {name}:")),
            "{name} missing:\n{help}"
        );
    }

    let out = tickforge()
        .args(["bench", "--game", "chess"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'chess'") && err.contains("[possible values: shooter, ctf]"),
        "{err}"
    );
}

#[test]
fn serve_help_lists_the_games_and_an_unknown_one_is_refused_with_the_list() {
    let out = tickforge().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let game = &help[help.find("--game <NAME>").expect("--game in help")..];
    for name in ["shooter", "ctf"] {
        assert!(
            game.contains(&format!("- {name}:")),
            "{name} missing:\n{help}"
        );
    }
    let out = tickforge()
        .args(["serve", "--game", "chess"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'chess'") && err.contains("[possible values: shooter, ctf]"),
        "{err}"
    );
    // A config file naming a game the binary lacks is refused with the list too.
    let path = scratch("chess.toml");
    std::fs::write(&path, "[game]\nname = \"chess\"\n").unwrap();
    let out = tickforge()
        .args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&path)
        .env("TICKFORGE_PRIVATE_KEY", "00".repeat(32))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("game `chess`: this binary has no such game; it has: shooter, ctf"),
        "{err}"
    );
}

#[test]
fn bench_refuses_the_shooters_scenarios_and_flags_for_ctf_before_starting_anything() {
    for (flags, says) in [
        (&["--scenario", "crowd"][..], "--scenario crowd"),
        (&["--scenario", "saturation"][..], "--scenario saturation"),
        (&["--max-rewind-ms", "300"][..], "--max-rewind-ms"),
    ] {
        let out = tickforge()
            .args(["bench", "--game", "ctf", "--quiet"])
            .args(flags)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with(&format!("tickforge: {says}")), "{err}");
        assert!(out.stdout.is_empty(), "nothing ran");
    }
}

/// The ctf bench end to end: a server playing ctf and bots playing it, for 1 s + 3 s.
#[test]
fn ctf_smoke_bench_plays_capture_the_flag_and_says_so() {
    let (summary, json) = bench(
        "ctf-smoke.json",
        &["--scenario", "smoke", "--duration-s", "3"],
        &["--game", "ctf"],
    );
    let r: Report = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(check_names(&json, &summary), RUN_CHECKS);
    assert!(
        summary.starts_with("tickforge bench smoke: 1 match(es) of ctf × 10 bots"),
        "{summary}"
    );
    assert!(!summary.contains("hitreg"), "{summary}");
    assert_eq!((r.game.as_str(), r.map.as_str()), ("ctf", ""));
    assert_eq!(
        (r.server.game.as_str(), r.matches, r.players_per_match),
        ("ctf", 1, 10)
    );
    assert_eq!((r.clients.bots, r.clients.connected), (10, 10));
    assert_eq!((r.clients.bad_snapshots, r.clients.link_errors), (0, 0));
    // Every bot got snapshots (at what rate is the bench's min_response_rate_hz check),
    // and no shot: ctf's bots tag, they do not shoot.
    assert!(r.clients.min_response_rate_hz.unwrap() > 0.0);
    assert_eq!(r.hitreg.shots, 0);
    assert!(r.match_frame_ms.is_some() && r.io_floor_ms.is_some());

    // The saved report prints the game again.
    let out = tickforge()
        .arg("report")
        .arg(scratch("ctf-smoke.json"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("of ctf × 10 bots"));
}

#[test]
fn bad_config_stops_startup_with_key_and_form() {
    let path = scratch("bad.toml");
    std::fs::write(&path, "tick_hz = 128\nplayers = 10\n").unwrap();
    let out = tickforge()
        .args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("players") && err.contains("players_per_match"),
        "{err}"
    );

    std::fs::write(&path, "[game]\nmap = \"dust2\"\n").unwrap();
    let out = tickforge()
        .args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&path)
        .env("TICKFORGE_PRIVATE_KEY", "00".repeat(32))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("game `shooter`: map: expected a built-in map: \"arena\" or \"flat2km\""),
        "{err}"
    );

    std::fs::write(&path, "tick_hz = 0\n").unwrap();
    let out = tickforge()
        .args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&path)
        .env("TICKFORGE_PRIVATE_KEY", "00".repeat(32))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`tick_hz`: expected an integer from 1 to 1000, got 0"),
        "{err}"
    );
}

#[test]
fn serve_refuses_an_admin_port_off_loopback_without_a_token() {
    let out = tickforge()
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--admin-bind",
            "0.0.0.0:0",
        ])
        .env("TICKFORGE_PRIVATE_KEY", "00".repeat(32))
        .env_remove("TICKFORGE_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config key `admin_bind`: expected a loopback address")
            && err.contains("admin_token_file")
            && err.contains("TICKFORGE_ADMIN_TOKEN"),
        "{err}"
    );
    // A token that is too short is refused by name, not echoed.
    let out = tickforge()
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--admin-bind",
            "127.0.0.1:0",
        ])
        .env("TICKFORGE_PRIVATE_KEY", "00".repeat(32))
        .env("TICKFORGE_ADMIN_TOKEN", "hunter2")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config key `admin_token_file`") && !err.contains("hunter2"),
        "{err}"
    );
}

#[test]
fn help_documents_every_serve_option_with_its_default() {
    let out = tickforge().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let d = tickforge_server::ServerConfig::default();
    for (flag, default) in [
        ("--bind", d.bind.to_string()),
        ("--matches", d.matches.to_string()),
        ("--players-per-match", d.players_per_match.to_string()),
        ("--tick-hz", d.tick_hz.to_string()),
        ("--map", "arena".to_string()),
        ("--game", "shooter".to_string()),
        ("--spin-us", d.spin.as_micros().to_string()),
        (
            "--max-matches-per-worker",
            d.max_matches_per_worker.to_string(),
        ),
        ("--drain-timeout-s", d.drain_timeout.as_secs().to_string()),
        (
            "--unjoined-match-ttl-s",
            d.unjoined_match_ttl.as_secs().to_string(),
        ),
        ("--protocol-id", d.protocol_id.to_string()),
        (
            "--requests-per-second-per-ip",
            d.requests_per_second_per_ip.to_string(),
        ),
    ] {
        assert!(help.contains(flag), "{flag} missing from help");
        assert!(
            help.contains(&format!("[default: {default}]")),
            "{flag}'s default {default} missing:\n{help}"
        );
    }
}

#[test]
fn serve_without_a_key_says_how_to_give_one() {
    let out = tickforge()
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env_remove("TICKFORGE_PRIVATE_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`key_file`") && err.contains("--generate-key"),
        "{err}"
    );
}

#[test]
fn token_mints_a_netcode_token_for_the_match_from_a_new_key() {
    let key = scratch("token.key");
    let _ = std::fs::remove_file(&key);
    let out = tickforge()
        .args(["token", "--generate-key"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Readable by its owner alone (Unix modes; Windows has none to check).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    // Never overwrites a key.
    let again = tickforge()
        .args(["token", "--generate-key"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(!again.status.success());

    let file = scratch("token.bin");
    let out = tickforge()
        .args([
            "token",
            "--server",
            "127.0.0.1:40000",
            "--match",
            "7",
            "--slot",
            "3",
            "--client-id",
            "99",
            "--key-file",
        ])
        .arg(&key)
        .arg("--out")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&file).unwrap();
    let token = tickforge_proto::netcode::token::ConnectToken::from_bytes(&bytes).unwrap();
    assert_eq!(
        token.server_addresses,
        vec!["127.0.0.1:40000".parse().unwrap()]
    );
    assert_eq!(token.expire_timestamp - token.create_timestamp, 30);

    // The private part opens with the key and names the match and slot.
    let hex = std::fs::read_to_string(&key).unwrap();
    let k = tickforge_proto::netcode::PrivateKey::from_hex(&hex).unwrap();
    let mut private = token.private;
    use chacha20poly1305::KeyInit;
    let p = tickforge_proto::netcode::token::PrivateToken::open(
        &mut private,
        token.protocol_id,
        token.expire_timestamp,
        &token.nonce,
        &chacha20poly1305::XChaCha20Poly1305::new((&k.0).into()),
    )
    .unwrap();
    assert_eq!(p.client_id, 99);
    let ud = tickforge_proto::user_data::UserData::parse(&p.user_data).unwrap();
    assert_eq!((ud.match_id.0, ud.seat), (7, 3));

    // Printed as base64 without --out.
    let out = tickforge()
        .args(["token", "--server", "127.0.0.1:40000", "--key-file"])
        .arg(&key)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim().len(), 2732);
}

/// A flood during the window: what reaches the server is dropped and counted, and every
/// client stays. That every flood datagram reached the server and that the clients kept
/// their rate are the bench's checks (`flood_dropped`, `response_rate_hz`): a host too busy
/// to read its socket in time loses datagrams in the kernel, uncounted.
#[test]
fn a_flood_of_hostile_datagrams_is_dropped_and_counted_and_clients_do_not_notice() {
    let (summary, json) = bench(
        "flood.json",
        &["--scenario", "smoke", "--duration-s", "3"],
        &["--flood", "6000"],
    );
    let r: Report = serde_json::from_value(json.clone()).unwrap();
    let flood = r.flood.expect("flood section");
    assert_eq!(flood.sent, 6000);
    assert!(flood.request_shaped > 0 && flood.packet_shaped > 0);
    // Drops are of datagrams the server read, and the flood's are among them.
    let d = &r.server.datagrams;
    assert!(d.dropped_total() > 0, "{:?}", d.dropped);
    assert!(d.dropped_total() <= d.received, "{d:?}");
    assert_eq!(r.clients.connected, 10);
    assert_eq!((r.clients.link_errors, r.clients.bad_snapshots), (0, 0));

    let mut names = RUN_CHECKS.map(String::from).to_vec();
    names.push("flood_dropped".into());
    assert_eq!(check_names(&json, &summary), names);
    let dropped = check(&json, "flood_dropped");
    assert_eq!(dropped["measured"], d.dropped_total() as f64);
    assert_eq!(dropped["pass"], d.dropped_total() >= 6000);
}

#[test]
fn a_finished_match_result_survives_a_kill_right_after_the_end() {
    let results = scratch("results.log");
    let _ = std::fs::remove_file(&results);
    let mut child = tickforge()
        .args(["serve", "--bind", "127.0.0.1:0", "--quiet"])
        .args([
            "--buy-s",
            "0.05",
            "--round-s",
            "0.2",
            "--round-end-s",
            "0.05",
            "--rounds",
            "1",
        ])
        .arg("--results-file")
        .arg(&results)
        .env("TICKFORGE_PRIVATE_KEY", "11".repeat(32))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // A one-round match with nobody in it ends on the round timer after ~0.3 s. Watch for
    // the line (bounded), then kill -9 at once: the line must already be on disk.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut text = String::new();
    while std::time::Instant::now() < deadline {
        text = std::fs::read_to_string(&results).unwrap_or_default();
        if text.ends_with('\n') {
            break;
        }
        std::thread::yield_now();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let line = text
        .lines()
        .next()
        .expect("a result line before the deadline");
    let result = tickforge_game::rules::MatchResult::decode(line).unwrap();
    assert_eq!(result.rounds_played, 1);
    assert_eq!(
        result.winner(),
        Some(tickforge_game::rules::Team::Defenders),
        "time-out: defenders"
    );
}

/// Starts `serve` on ephemeral ports with `matches` startup matches and `extra` flags;
/// returns the child and its first lines: `listening` and one `placement` per match.
fn serve_child(
    results: &std::path::Path,
    matches: usize,
    extra: &[&str],
) -> (std::process::Child, Vec<String>) {
    serve_child_env(results, matches, extra, &[])
}

/// [`serve_child`] with environment variables set (`Some`) or removed (`None`).
fn serve_child_env(
    results: &std::path::Path,
    matches: usize,
    extra: &[&str],
    env: &[(&str, Option<&str>)],
) -> (std::process::Child, Vec<String>) {
    use std::io::BufRead;
    let mut cmd = tickforge();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--quiet"])
        .args(["--matches", &matches.to_string()])
        .args(extra)
        .arg("--results-file")
        .arg(results)
        .env("TICKFORGE_PRIVATE_KEY", "22".repeat(32))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    for &(key, value) in env {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let lines = stdout
        .by_ref()
        .take(1 + matches)
        .map(Result::unwrap)
        .collect();
    // Keep reading, so the summary at exit finds the pipe open.
    std::thread::spawn(move || stdout.for_each(drop));
    (child, lines)
}

/// The bound on a server that stops "at once": well under the 30 s drain timeout it would
/// otherwise wait out, so it tells the two apart on a host of any speed, however busy.
#[cfg(unix)]
const AT_ONCE: std::time::Duration = std::time::Duration::from_secs(20);

/// Waits for `child` to exit, up to `bound`; kills it and panics past that.
fn exit_within(
    child: &mut std::process::Child,
    bound: std::time::Duration,
) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("still running {bound:?} after SIGTERM");
        }
        std::thread::yield_now();
    }
}

const SHORT_MATCH: [&str; 8] = [
    "--buy-s",
    "0.05",
    "--round-s",
    "0.3",
    "--round-end-s",
    "0.05",
    "--rounds",
    "1",
];

#[test]
fn workers_print_their_addresses_and_the_round_robin_placement() {
    if tickforge_io::cpu::allowed_cores().len() < 2 {
        skip(
            "workers_print_their_addresses_and_the_round_robin_placement",
            "fewer than 2 CPUs allowed",
        );
        return;
    }
    let results = scratch("placement-results.log");
    let (mut child, lines) = serve_child(&results, 3, &["--workers", "2"]);
    child.kill().unwrap();
    child.wait().unwrap();
    let addrs: Vec<&str> = lines[0]["listening ".len()..].split(' ').collect();
    assert_eq!(addrs.len(), 2, "{lines:?}");
    assert_ne!(addrs[0], addrs[1]);
    assert_eq!(
        lines[1..],
        [
            format!("placement match=1 worker=0 addr={}", addrs[0]),
            format!("placement match=2 worker=1 addr={}", addrs[1]),
            format!("placement match=3 worker=0 addr={}", addrs[0]),
        ]
    );
}

/// Standard error of a child, collected by a thread as it comes.
#[cfg(unix)]
type Log = std::sync::Arc<std::sync::Mutex<String>>;

/// Starts `serve` with `matches` startup matches, the admin server and `extra` flags, its
/// standard error collected; returns the child, its game address, its admin address and
/// the log.
#[cfg(unix)]
fn serve_logged(
    results: &std::path::Path,
    matches: usize,
    extra: &[&str],
) -> (std::process::Child, String, std::net::SocketAddr, Log) {
    use std::io::{BufRead, Read};
    let _ = std::fs::remove_file(results);
    let mut child = tickforge()
        .args(["serve", "--bind", "127.0.0.1:0", "--quiet", "--matches"])
        .arg(matches.to_string())
        .args(["--admin-bind", "127.0.0.1:0"])
        .args(extra)
        .arg("--results-file")
        .arg(results)
        .env("TICKFORGE_PRIVATE_KEY", "22".repeat(32))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let log = Log::default();
    let mut stderr = child.stderr.take().unwrap();
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok(n @ 1..) = stderr.read(&mut buf) {
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let lines: Vec<String> = stdout
        .by_ref()
        .take(2 + matches)
        .map(Result::unwrap)
        .collect();
    std::thread::spawn(move || stdout.for_each(drop));
    let game = lines[0].strip_prefix("listening ").unwrap().to_string();
    let admin = lines[1 + matches]
        .strip_prefix("admin ")
        .unwrap()
        .parse()
        .unwrap();
    (child, game, admin, log)
}

/// Waits until `log` holds `needle`, up to `bound`; returns the log.
#[cfg(unix)]
fn log_until(log: &Log, needle: &str, bound: std::time::Duration) -> String {
    let deadline = std::time::Instant::now() + bound;
    loop {
        let text = log.lock().unwrap().clone();
        if text.contains(needle) {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {needle:?} in stderr after {bound:?}:\n{text}"
        );
        std::thread::yield_now();
    }
}

/// SIGTERM to a server whose one match has two bots playing, then waits (up to 5 s) for
/// the drain to say it waits for them.
#[cfg(unix)]
fn start_draining(server: &std::process::Child, log: &Log) {
    send(server, libc::SIGTERM);
    log_until(
        log,
        "draining: waiting for 1 match with 2 players",
        std::time::Duration::from_secs(5),
    );
}

/// Sends `signal` to `child`.
#[cfg(unix)]
fn send(child: &std::process::Child, signal: libc::c_int) {
    // SAFETY: kill with the pid of a child we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
}

/// A server with `players` bots connected to its match 1 (the bots play for a minute).
#[cfg(unix)]
fn serve_with_bots(
    name: &str,
    players: u32,
    extra: &[&str],
) -> (
    std::process::Child,
    std::process::Child,
    Log,
    std::path::PathBuf,
) {
    let results = scratch(&format!("{name}-results.log"));
    let (server, game, admin, log) = serve_logged(&results, 1, extra);
    let bots = bots_child(&game, players, 60, &scratch(&format!("{name}-bots.json")));
    match_one_until(admin, std::time::Duration::from_secs(10), |m| {
        m["players_connected"] == players
    });
    (server, bots, log, results)
}

#[test]
#[cfg(unix)]
fn sigterm_without_players_exits_at_once_and_says_so() {
    let results = scratch("idle-results.log");
    // Matches that would run for minutes (100 s rounds), and the default 30 s timeout.
    let (mut child, _, _, log) = serve_logged(&results, 3, &[]);
    send(&child, libc::SIGTERM);
    let status = exit_within(&mut child, AT_ONCE);
    assert!(status.success(), "{status}");
    let err = log_until(&log, "drained in", AT_ONCE);
    assert!(
        err.contains("tickforge serve: draining: no match has a connected player; stopping now"),
        "{err}"
    );
    let text = std::fs::read_to_string(&results).unwrap_or_default();
    assert!(text.is_empty(), "no match finished: {text}");
}

#[test]
#[cfg(unix)]
fn sigterm_waits_for_a_match_with_players_to_finish_and_persists_it() {
    let (mut server, mut bots, log, results) = serve_with_bots("drain", 2, &SHORT_MATCH);
    let before = std::fs::read_to_string(&results)
        .unwrap_or_default()
        .lines()
        .count();
    send(&server, libc::SIGTERM);
    // The one-round match ends on its timer (or a kill) within ~0.4 s and is not restarted;
    // the drain would wait 30 s for it.
    let status = exit_within(&mut server, AT_ONCE);
    bots.kill().unwrap();
    bots.wait().unwrap();
    assert!(status.success(), "{status}");
    let err = log.lock().unwrap().clone();
    assert!(
        err.contains("draining: waiting for 1 match with 2 players, up to 30 s (a second signal exits at once)"),
        "{err}"
    );
    assert!(err.contains("drained in "), "{err}");
    let text = std::fs::read_to_string(&results).unwrap();
    assert!(
        text.lines().count() > before,
        "the drained match's result: {text}"
    );
    for line in text.lines() {
        tickforge_game::rules::MatchResult::decode(line).unwrap();
    }
}

#[test]
#[cfg(unix)]
fn the_drain_timeout_stops_a_match_with_players_and_names_it() {
    let (mut server, mut bots, log, _) =
        serve_with_bots("drain-timeout", 2, &["--drain-timeout-s", "0.5"]);
    send(&server, libc::SIGTERM);
    // The match's round runs 100 s: only the 0.5 s timeout stops it this soon.
    let status = exit_within(&mut server, AT_ONCE);
    bots.kill().unwrap();
    bots.wait().unwrap();
    assert!(status.success(), "{status}");
    let err = log.lock().unwrap().clone();
    assert!(
        err.contains("waiting for 1 match with 2 players, up to 0.5 s"),
        "{err}"
    );
    assert!(
        err.contains("drain timeout after ")
            && err.contains("stopped 1 match with 2 players still playing"),
        "{err}"
    );
}

#[test]
#[cfg(unix)]
fn a_second_signal_exits_at_once_naming_what_it_abandoned() {
    let (mut server, mut bots, log, _) = serve_with_bots("abandon", 2, &[]);
    start_draining(&server, &log);
    // Still draining: the match plays on for its 100 s round, up to 30 s.
    assert!(
        server.try_wait().unwrap().is_none(),
        "{}",
        log.lock().unwrap()
    );
    send(&server, libc::SIGINT);
    let status = exit_within(&mut server, AT_ONCE);
    bots.kill().unwrap();
    bots.wait().unwrap();
    assert!(!status.success(), "{status}");
    let err = log.lock().unwrap().clone();
    assert!(
        err.contains(
            "a second signal stopped the drain: abandoned 1 match with 2 players still playing"
        ),
        "{err}"
    );
}

#[test]
#[cfg(unix)]
fn a_third_signal_exits_the_process_outright() {
    let (mut server, mut bots, log, _) = serve_with_bots("third-signal", 2, &[]);
    start_draining(&server, &log);
    // Stopped, the child takes the second and third signals together when it resumes
    // (two different signals, so neither merges into the other): the third comes before
    // the second's orderly exit (status 2, naming what it abandoned) could.
    send(&server, libc::SIGSTOP);
    send(&server, libc::SIGINT);
    send(&server, libc::SIGTERM);
    send(&server, libc::SIGCONT);
    let status = exit_within(&mut server, AT_ONCE);
    bots.kill().unwrap();
    bots.wait().unwrap();
    let err = log.lock().unwrap().clone();
    assert_eq!(status.code(), Some(1), "{status}: {err}");
    assert!(
        err.contains("tickforge serve: a third signal: exiting now"),
        "{err}"
    );
    assert!(!err.contains("a second signal stopped the drain"), "{err}");
}

/// A sweep that ran one step tests nothing about a sweep: `--sweep-every-step` runs both
/// steps whatever the first one measured, and the curve has one point per step run. What
/// the sweep concludes is read from those points, the same way whatever they say.
#[test]
fn a_sweep_runs_each_step_and_reports_the_curve() {
    let (stdout, json) = bench(
        "sweep.json",
        &["--scenario", "smoke", "--duration-s", "2"],
        &["--sweep", "--sweep-steps", "1,2", "--sweep-every-step"],
    );
    let report: Report = serde_json::from_value(json.clone()).unwrap();
    let sweep = report.sweep.expect("a sweep in the report");
    assert_eq!(sweep.by, "matches");
    let counts: Vec<u32> = sweep.steps.iter().map(|s| s.matches).collect();
    assert_eq!(counts, [1, 2], "{sweep:?}");
    for step in &sweep.steps {
        assert_eq!(step.players, 10);
        assert!(step.match_frame_ms.is_some() && step.on_time_rate.is_some());
        assert!(step.response_rate_hz.is_some(), "{step:?}");
    }
    // The sweep's end and its measured games per core, from the steps' verdicts: the steps
    // that held (strictly, or on the server's own account: "held", "held-host") up to the
    // first that did not; the strict figure, the steps up to the first not held strictly.
    let verdict = |s: &tickforge_telemetry::report::SweepStep| {
        s.verdict
            .clone()
            .expect("every step of a sweep over matches is judged")
    };
    let held_ok = |s: &tickforge_telemetry::report::SweepStep| {
        matches!(verdict(s).outcome.as_str(), "held" | "held-host")
    };
    for step in &sweep.steps {
        let v = verdict(step);
        assert!(!v.windows.is_empty() && (1..=2).contains(&v.runs), "{v:?}");
    }
    let end = sweep.steps.iter().position(|s| !held_ok(s));
    let held = &sweep.steps[..end.unwrap_or(sweep.steps.len())];
    let measured = held.last().map(|s| s.matches);
    assert_eq!(sweep.measured_games_per_core, measured, "{sweep:?}");
    assert_eq!(report.games_per_core.measured, measured.map(f64::from));
    let strict_end = held.iter().position(|s| !verdict(s).held_strict);
    let strict = held[..strict_end.unwrap_or(held.len())]
        .last()
        .map(|s| s.matches);
    assert_eq!(sweep.measured_strict_games_per_core, strict, "{sweep:?}");
    assert_eq!(report.games_per_core.measured_strict, strict.map(f64::from));
    let limited_by = end.map_or("steps".to_string(), |i| verdict(&sweep.steps[i]).outcome);
    assert_eq!(sweep.limited_by, limited_by, "{sweep:?}");
    assert!(!sweep.stopped_because.is_empty(), "{sweep:?}");
    // The report is the last step that held, or the first when none did.
    assert_eq!(report.matches, measured.unwrap_or(1));
    // Both steps in the summary, and the checks of the step reported.
    assert!(stdout.contains("sweep"), "{stdout}");
    assert!(
        stdout.contains("    1 × 10 ") && stdout.contains("    2 × 10 "),
        "{stdout}"
    );
    // A sweep's reported step is judged by its verdict, whether a step held or none did.
    let mut sweep_checks = RUN_CHECKS;
    sweep_checks[1] = "step_held";
    assert_eq!(check_names(&json, &stdout), sweep_checks);
}

#[test]
fn saturation_raises_the_players_of_one_match_and_charts_them() {
    let (stdout, value) = bench(
        "saturation.json",
        &["--scenario", "saturation", "--duration-s", "2"],
        &["--sweep-steps", "1,4"],
    );
    let json = scratch("saturation.json");
    let report: Report = serde_json::from_value(value.clone()).unwrap();
    let sweep = report.sweep.expect("the curve in the report");
    assert_eq!(sweep.by, "players");
    let steps: Vec<(u32, u32)> = sweep.steps.iter().map(|s| (s.matches, s.players)).collect();
    assert_eq!(steps, [(1, 1), (1, 4)], "{sweep:?}");
    for step in &sweep.steps {
        // Every client got snapshots; at what rate is the bench's check of the step.
        let rate = step.response_rate_hz.expect("a response rate");
        assert!(rate > 0.0, "{rate} Hz at {} players", step.players);
    }
    // Each step of up to ten players is checked on its own.
    let names = check_names(&value, &stdout);
    let want: Vec<String> = ["1p", "4p"]
        .iter()
        .flat_map(|p| {
            [
                "skipped_ticks",
                "on_time_rate",
                "response_rate_hz",
                "bots_saturated",
            ]
            .map(|c| format!("{c}@{p}"))
        })
        .collect();
    assert_eq!(names, want);
    for step in &sweep.steps {
        let rate = check(&value, &format!("response_rate_hz@{}p", step.players));
        assert_eq!(rate["measured"], step.response_rate_hz.unwrap());
    }
    assert_eq!(report.players_per_match, 4, "the report is the last step");
    assert_eq!(sweep.measured_games_per_core, None);

    // The saved report prints again and draws as a chart with a point per step.
    let svg = json.with_extension("svg");
    let out = tickforge()
        .arg("report")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("saturation"));
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(chart.matches("<circle class=\"p50\"").count(), 2);
    assert!(chart.contains("players in the match"));
}

/// `bots` for match 1 with `n` bots, measuring `duration_s` after 1 s, reporting to `report`.
#[cfg(unix)]
fn bots_child(
    server: &str,
    n: u32,
    duration_s: u32,
    report: &std::path::Path,
) -> std::process::Child {
    tickforge()
        .args([
            "bots",
            "--server",
            server,
            "--matches",
            "1",
            "--bots-per-match",
        ])
        .arg(n.to_string())
        .args(["--warmup-s", "1", "--duration-s"])
        .arg(duration_s.to_string())
        .arg("--report")
        .arg(report)
        .env("TICKFORGE_PRIVATE_KEY", "22".repeat(32))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Polls the admin server's `/matches` until `ok` holds for match 1, up to `bound`;
/// returns its entry.
#[cfg(unix)]
fn match_one_until(
    admin: std::net::SocketAddr,
    bound: std::time::Duration,
    ok: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + bound;
    loop {
        let (status, body) = tickforge_testkit::http::request(admin, "GET", "/matches", "");
        assert_eq!(status, 200, "{body}");
        let list: serde_json::Value = serde_json::from_str(&body).unwrap();
        let one = list
            .as_array()
            .and_then(|l| l.iter().find(|m| m["id"] == 1))
            .cloned()
            .unwrap_or_default();
        if ok(&one) {
            return one;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "match 1 never got there: {one}"
        );
        // A poll of a condition, bounded above: not a sleep standing in for one.
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
#[cfg(unix)]
fn killing_a_bot_process_mid_match_leaves_the_match_running_for_the_rest() {
    use std::io::BufRead;
    let results = scratch("killed-bots-results.log");
    let mut server = tickforge()
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--quiet",
            "--matches",
            "1",
        ])
        .args(["--admin-bind", "127.0.0.1:0", "--drain-timeout-s", "0"])
        .arg("--results-file")
        .arg(&results)
        .env("TICKFORGE_PRIVATE_KEY", "22".repeat(32))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let lines: Vec<String> = stdout.by_ref().take(3).map(Result::unwrap).collect();
    std::thread::spawn(move || stdout.for_each(drop));
    let game = lines[0].strip_prefix("listening ").unwrap().to_string();
    let admin: std::net::SocketAddr = lines[2].strip_prefix("admin ").unwrap().parse().unwrap();

    // Two bot processes share the match; the second is killed while it plays.
    let (stays, goes) = (scratch("stays.json"), scratch("goes.json"));
    let mut staying = bots_child(&game, 5, 6, &stays);
    let mut going = bots_child(&game, 5, 60, &goes);
    match_one_until(admin, std::time::Duration::from_secs(10), |m| {
        m["players_connected"] == 10
    });
    going.kill().unwrap(); // SIGKILL: no disconnect packet, the sockets just go quiet.
    going.wait().unwrap();

    // The others play on while the dead connections time out…
    assert!(staying.wait().unwrap().success());
    let report: tickforge_telemetry::report::BotsReport =
        serde_json::from_str(&std::fs::read_to_string(&stays).unwrap()).unwrap();
    let c = &report.clients;
    assert_eq!((c.bots, c.connected), (5, 5), "{c:?}");
    // Every client kept getting snapshots (at what rate is the bench's to judge).
    assert!(c.min_response_rate_hz.unwrap() > 0.0, "{c:?}");
    assert_eq!(c.bad_snapshots, 0, "{c:?}");
    assert_eq!(c.link_errors, 0);
    // … and cleanly (the tokens' 5 s timeout): the match keeps ticking without them.
    let before = match_one_until(admin, std::time::Duration::from_secs(15), |m| {
        m["players_connected"] == 0
    });
    let after = match_one_until(admin, std::time::Duration::from_secs(5), |m| {
        m["tick"].as_u64() > before["tick"].as_u64()
    });
    assert_eq!(after["state"], before["state"], "{before} {after}");
    // SAFETY: kill with the pid of a child we spawned and have not reaped.
    assert_eq!(
        unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let status = exit_within(&mut server, std::time::Duration::from_secs(10));
    assert!(status.success(), "{status}");
}

/// Runs `serve` with short matches for `duration_s` (then it exits on its own, no signal)
/// and `extra` flags; returns its exit status and standard error.
fn serve_for(duration_s: &str, extra: &[&str]) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    let mut child = tickforge()
        .args(["serve", "--bind", "127.0.0.1:0", "--quiet"])
        .args(["--duration-s", duration_s])
        .args(SHORT_MATCH)
        .args(extra)
        .env("TICKFORGE_PRIVATE_KEY", "33".repeat(32))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let status = exit_within(&mut child, std::time::Duration::from_secs(30));
    (status, reader.join().unwrap())
}

#[test]
fn serve_with_the_results_file_off_exits_0() {
    // /dev/null, the natural "off", used to fail every fsync (EINVAL) and exit 1.
    for off in ["/dev/null", "none"] {
        let (status, stderr) = serve_for("1", &["--results-file", off]);
        assert!(status.success(), "{off}: {stderr}");
        assert!(!stderr.contains("cannot write"), "{off}: {stderr}");
    }
    // `none` names no file: none is created where serve ran.
    assert!(!std::path::Path::new("none").exists());
}

#[test]
fn serve_exits_1_naming_the_results_file_when_results_stay_unwritten() {
    // /dev/full refuses every write with ENOSPC: a disk that stays full.
    let (status, stderr) = serve_for("1", &["--results-file", "/dev/full"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write /dev/full"), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(last.contains("could not be written to /dev/full"), "{last}");
    let count: u64 = last
        .strip_prefix("tickforge serve: ")
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{last}"));
    assert!(count >= 1, "{last}");
    // The lines it gave up on are on stderr, whole: nothing is lost silently.
    let printed = stderr
        .lines()
        .filter(|l| tickforge_game::rules::MatchResult::decode(l).is_ok())
        .count() as u64;
    assert_eq!(printed, count, "{stderr}");
    // One message for the failure episode, not one per retry.
    assert_eq!(
        stderr.matches("cannot write /dev/full").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn replay_plays_a_recording_and_refuses_it_damaged() {
    let dir = scratch("replay-actions");
    let _ = std::fs::remove_dir_all(&dir);
    let results = scratch("replay-results.log");
    let _ = std::fs::remove_file(&results);
    let (status, stderr) = serve_for(
        "1",
        &[
            "--record-dir",
            dir.to_str().unwrap(),
            "--results-file",
            results.to_str().unwrap(),
        ],
    );
    assert!(status.success(), "{stderr}");
    let run = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("run "))
        .and_then(|l| l.split(':').next())
        .unwrap_or_else(|| panic!("no run id printed: {stderr}"));
    assert_eq!(run.len(), 16, "{run}");
    let file = dir.join(format!("match-1-{run}-1.actions"));
    let replay = |path: &std::path::Path| tickforge().arg("replay").arg(path).output().unwrap();
    let out = replay(&file);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("identical"));
    // Its result line names the match and the run.
    let text = std::fs::read_to_string(&results).unwrap();
    let (origin, _) =
        tickforge_game::rules::MatchResult::decode_line(text.lines().next().unwrap()).unwrap();
    let origin = origin.unwrap();
    assert_eq!(format!("{:016x}", origin.run_id), run);
    assert_eq!(origin.match_id, 1);

    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    let damaged = scratch("damaged.actions");
    std::fs::write(&damaged, &bytes).unwrap();
    let out = replay(&damaged);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("checksum does not match"), "{stderr}");
}

/// The checked-in recordings (tests/actions/) replay through the binary as in the shooter's
/// test of them: identical, each with its result.
#[test]
fn replay_plays_the_checked_in_recordings_to_their_recorded_end() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/actions");
    let expected = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
    let mut replayed = 0;
    for line in expected.lines().filter(|l| !l.starts_with('#')) {
        let mut words = line.split(' ');
        let name = words.next().unwrap();
        let hash = words
            .find_map(|w| w.strip_prefix("state_hash="))
            .unwrap_or_else(|| panic!("{line}"));
        let out = tickforge()
            .arg("replay")
            .arg(dir.join(name))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {stdout}{out:?}");
        assert!(
            stdout.contains(&format!("end state identical (hash {hash})")),
            "{name}: {stdout}"
        );
        assert!(stdout.contains("  result: "), "{name}: {stdout}");
        replayed += 1;
    }
    assert!(replayed >= 4, "{expected}");
}

/// Runs `serve` on a free port with the test key and `args`, expecting it to stop at
/// startup; returns its standard error.
fn serve_refused(args: &[&std::ffi::OsStr]) -> String {
    let out = tickforge()
        .args(["serve", "--bind", "127.0.0.1:0", "--quiet"])
        .args(args)
        .env("TICKFORGE_PRIVATE_KEY", "22".repeat(32))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    err
}

#[test]
fn a_bind_error_names_the_address_and_the_os_error_once() {
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = tickforge()
        .args(["serve", "--quiet", "--bind", &addr])
        .env("TICKFORGE_PRIVATE_KEY", "22".repeat(32))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let os = std::io::Error::from_raw_os_error(libc::EADDRINUSE).to_string();
    assert!(
        err.contains(&format!("tickforge: worker 0: cannot bind {addr}: {os}\n")),
        "{err}"
    );
    assert_eq!(err.matches(&os).count(), 1, "{err}");

    let missing = std::io::Error::from_raw_os_error(libc::ENOENT).to_string();
    let dir = scratch("no-such-dir");
    let _ = std::fs::remove_dir_all(&dir);
    let results = dir.join("results.log");
    let err = serve_refused(&["--results-file".as_ref(), results.as_os_str()]);
    assert!(
        err.contains(&format!(
            "cannot open results file {}: {missing}\n",
            results.display()
        )),
        "{err}"
    );
    assert_eq!(err.matches(&missing).count(), 1, "{err}");
    let config = dir.join("serve.toml");
    let err = serve_refused(&["--config".as_ref(), config.as_os_str()]);
    assert!(
        err.contains(&format!(
            "cannot read config file {}: {missing}\n",
            config.display()
        )),
        "{err}"
    );
    assert_eq!(err.matches(&missing).count(), 1, "{err}");
}

#[test]
#[cfg(unix)]
fn a_garbled_key_file_is_called_the_key_file_and_an_open_one_gets_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let key = scratch("garbled.key");
    std::fs::write(&key, [0x8a, 0xff, 0x00, 0x13, 0xc3, 0x28]).unwrap();
    let err = serve_refused(&["--key-file".as_ref(), key.as_os_str()]);
    assert!(
        err.contains(&format!(
            "tickforge: key file {} (--key-file, config key `key_file`): it holds 6 bytes of \
             binary data; expected the 32-byte private key as 64 hex digits",
            key.display()
        )),
        "{err}"
    );
    assert!(!err.contains("config file"), "{err}");

    // A good key, readable by all: a warning, then the server runs (stopped here by a
    // degenerate rule, refused with its key and range).
    std::fs::write(&key, "33".repeat(32)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = serve_refused(&[
        "--key-file".as_ref(),
        key.as_os_str(),
        "--round-s".as_ref(),
        "0".as_ref(),
    ]);
    assert!(
        err.contains(&format!(
            "tickforge serve: warning: key file {0} is open to group or others (mode 644)",
            key.display()
        )) && err.contains(&format!("run `chmod 600 {}`", key.display())),
        "{err}"
    );
    assert!(
        err.contains(
            "config table [game]: game `shooter`: round_s: expected seconds, more than 0 and at \
             most 86400, got 0"
        ),
        "{err}"
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = serve_refused(&[
        "--key-file".as_ref(),
        key.as_os_str(),
        "--rounds".as_ref(),
        "0".as_ref(),
    ]);
    assert!(!err.contains("warning"), "{err}");
    assert!(
        err.contains("game `shooter`: rounds: expected an integer from 1 to 255"),
        "{err}"
    );
}

#[test]
#[cfg(unix)]
fn a_bad_admin_token_file_is_called_the_token_file_and_an_open_one_gets_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let token = scratch("admin.token");
    let _ = std::fs::remove_file(&token);
    let missing = std::io::Error::from_raw_os_error(libc::ENOENT).to_string();
    let err = serve_refused(&["--admin-token-file".as_ref(), token.as_os_str()]);
    assert!(
        err.contains(&format!(
            "tickforge: admin token file {} (--admin-token-file, config key \
             `admin_token_file`): cannot read it: {missing}; expected the admin API's bearer \
             token",
            token.display()
        )),
        "{err}"
    );
    assert!(!err.contains("config file"), "{err}");
    assert_eq!(err.matches(&missing).count(), 1, "{err}");

    std::fs::write(&token, [0x8a, 0xff, 0x00, 0x13, 0xc3, 0x28]).unwrap();
    let err = serve_refused(&["--admin-token-file".as_ref(), token.as_os_str()]);
    assert!(
        err.contains(&format!(
            "tickforge: admin token file {} (--admin-token-file, config key \
             `admin_token_file`): it holds 6 bytes of binary data; expected",
            token.display()
        )),
        "{err}"
    );
    assert!(!err.contains("config file"), "{err}");

    // A good token, readable by all: a warning, then the server runs (stopped here by a
    // degenerate rule).
    std::fs::write(&token, "0123456789abcdef0123\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = serve_refused(&[
        "--admin-token-file".as_ref(),
        token.as_os_str(),
        "--round-s".as_ref(),
        "0".as_ref(),
    ]);
    assert!(
        err.contains(&format!(
            "tickforge serve: warning: admin token file {0} is open to group or others (mode \
             644)",
            token.display()
        )) && err.contains(&format!("run `chmod 600 {}`", token.display())),
        "{err}"
    );
    assert!(
        !err.contains("0123456789abcdef0123"),
        "never the token: {err}"
    );
    assert!(err.contains("game `shooter`: round_s: expected"), "{err}");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = serve_refused(&[
        "--admin-token-file".as_ref(),
        token.as_os_str(),
        "--rounds".as_ref(),
        "0".as_ref(),
    ]);
    assert!(!err.contains("warning"), "{err}");
    assert!(err.contains("game `shooter`: rounds: expected"), "{err}");
}

#[test]
fn record_dir_errors_name_the_record_dir() {
    let file = scratch("record-dir-is-a-file");
    std::fs::write(&file, "").unwrap();
    let err = serve_refused(&["--record-dir".as_ref(), file.as_os_str()]);
    assert!(
        err.contains(&format!(
            "tickforge: --record-dir {}: not a directory\n",
            file.display()
        )),
        "{err}"
    );
    let under = file.join("actions");
    let os = std::io::Error::from_raw_os_error(libc::ENOTDIR).to_string();
    let err = serve_refused(&["--record-dir".as_ref(), under.as_os_str()]);
    assert!(
        err.contains(&format!(
            "tickforge: --record-dir {}: cannot create: {os}\n",
            under.display()
        )),
        "{err}"
    );
    assert_eq!(err.matches(&os).count(), 1, "{err}");
}

#[test]
fn the_protocol_id_is_taken_in_hex_or_decimal() {
    let out = tickforge()
        .args(["serve", "--protocol-id", "0x11zz"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--protocol-id")
            && err.contains("decimal (8388345093885489767)")
            && err.contains("hex with 0x (0x7469636b666f7267)"),
        "{err}"
    );
    // A token minted for a hex id carries it.
    for id in ["0x1122334455667788", "1234605616436508552"] {
        let file = scratch("hex-id.token");
        let out = tickforge()
            .args(["token", "--server", "127.0.0.1:40000", "--protocol-id", id])
            .arg("--out")
            .arg(&file)
            .env("TICKFORGE_PRIVATE_KEY", "22".repeat(32))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = tickforge_proto::netcode::token::ConnectToken::from_bytes(
            &std::fs::read(&file).unwrap(),
        )
        .unwrap();
        assert_eq!(token.protocol_id, 0x1122_3344_5566_7788, "{id}");
    }
}

#[test]
fn bots_that_receive_no_snapshot_exit_non_zero_and_say_so() {
    // A socket that reads nothing and answers nothing: no server there.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let out = tickforge()
        .args(["bots", "--server", &addr, "--bots-per-match", "2"])
        .args(["--warmup-s", "0", "--duration-s", "0.5", "--progress-lines"])
        .env("TICKFORGE_PRIVATE_KEY", "22".repeat(32))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "tickforge: no bot received a snapshot in the 0.5 s measured (0 of 2 bots \
             connected): check that a server runs at {addr} with this key and protocol id"
        )),
        "{err}"
    );
}

#[test]
#[cfg(unix)]
fn a_printing_command_whose_reader_is_gone_ends_by_sigpipe_not_a_panic() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let mut child = tickforge()
        .args(["doctor", "--quick"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the first line: `tickforge doctor --quick | head -c 0`.
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = exit_within(&mut child, std::time::Duration::from_secs(30));
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status:?}: {stderr}");
}

/// `bots --game ctf` against `serve --game ctf`: every bot is welcomed, reads a snapshot
/// about every tick and refuses none, and no shot is judged (capture the flag has none).
#[test]
fn ctf_bots_play_a_ctf_server() {
    let results = scratch("ctf-bots-results.log");
    let (mut server, lines) =
        serve_child(&results, 1, &["--game", "ctf", "--players-per-match", "4"]);
    let addr = lines[0]["listening ".len()..].to_string();
    // Bounded: the bots stop after their warm-up and window, 3 s.
    let out = tickforge()
        .args(["bots", "--game", "ctf", "--server", &addr])
        .args(["--matches", "1", "--bots-per-match", "4"])
        .args(["--warmup-s", "1", "--duration-s", "2", "--json"])
        .env("TICKFORGE_PRIVATE_KEY", "22".repeat(32))
        .output()
        .unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &report["clients"];
    assert_eq!(c["bots"], 4, "{c}");
    assert_eq!(c["connected"], 4, "{c}");
    // One welcome each.
    assert_eq!(c["reliable_events"], 4, "{c}");
    assert_eq!(c["bad_snapshots"], 0, "{c}");
    assert_eq!(c["link_errors"], 0, "{c}");
    // Each bot read snapshots (at what rate is the bench's min_response_rate_hz check).
    assert!(c["min_response_rate_hz"].as_f64().unwrap() > 0.0, "{c}");
    assert!(c["response_time_ms"]["p50"].as_f64().unwrap() > 0.0, "{c}");
    assert!(c["down_bytes_per_s"].as_f64().unwrap() > 0.0, "{c}");
    assert_eq!(report["hitreg"]["shots"], 0, "{}", report["hitreg"]);
}

/// `bots` of the shooter against a capture-the-flag server: refused at the welcome, said
/// so, and the run fails.
#[test]
fn shooter_bots_refuse_a_ctf_match_and_say_why() {
    let results = scratch("ctf-refused-results.log");
    let (mut server, lines) = serve_child(&results, 1, &["--game", "ctf"]);
    let addr = lines[0]["listening ".len()..].to_string();
    let out = tickforge()
        .args([
            "bots",
            "--server",
            &addr,
            "--matches",
            "1",
            "--bots-per-match",
            "2",
        ])
        .args(["--warmup-s", "0.5", "--duration-s", "1", "--progress-lines"])
        .env("TICKFORGE_PRIVATE_KEY", "22".repeat(32))
        .output()
        .unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("schema fingerprint") && err.contains("another game than --game shooter"),
        "{err}"
    );
}
