//! `tickforge capacity`: plans from a sweep report written by serializing the real
//! `Report` type (so the fixture follows the report's keys), and refuses bad input by flag.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;
use tickforge_telemetry::report::{Report, Sweep, SweepStep};

fn tickforge() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickforge"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tickforge-capacity-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn step(matches: u32, cpu: f64) -> SweepStep {
    SweepStep {
        matches,
        players: 10,
        worker_util: Some(cpu),
        on_time_rate: Some(1.0),
        ..SweepStep::default()
    }
}

/// A many-matches report at 128 Hz whose sweep ran `steps`, each on the line
/// `0.05 + 0.01 × m` of a core, and held up to `held`.
fn sweep_report(name: &str, steps: &[u32], held: Option<u32>) -> PathBuf {
    let report = Report {
        scenario: "many-matches".into(),
        tick_hz: 128,
        matches: held.unwrap_or(1),
        players_per_match: 10,
        game: "shooter".into(),
        map: "arena".into(),
        duration_s: 10.0,
        warmup_s: 2.0,
        sweep: Some(Sweep {
            steps: steps
                .iter()
                .map(|&m| step(m, 0.05 + 0.01 * f64::from(m)))
                .collect(),
            measured_games_per_core: held,
            limited_by: "steps".into(),
            by: "matches".into(),
            ..Sweep::default()
        }),
        ..Report::default()
    };
    let path = scratch(name);
    std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    path
}

fn capacity(args: &[&str], from: Option<&PathBuf>) -> Output {
    let mut cmd = tickforge();
    cmd.arg("capacity").args(args);
    if let Some(f) = from {
        cmd.arg("--from").arg(f);
    }
    cmd.output().unwrap()
}

/// Runs `capacity` expecting it to refuse; returns its stderr.
fn refused(args: &[&str], from: Option<&PathBuf>) -> String {
    let out = capacity(args, from);
    assert!(!out.status.success(), "accepted: {args:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(args: &[&str], from: &PathBuf) -> Value {
    let out = capacity(&[args, &["--json", "-"]].concat(), Some(from));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the JSON alone on stdout")
}

#[test]
fn without_a_sweep_it_refuses_and_says_how_to_make_one() {
    let err = refused(&["--players", "1000"], None);
    assert!(
        err.contains("--from")
            && err.contains("tickforge bench --scenario many-matches --sweep --json"),
        "{err}"
    );
}

#[test]
fn bad_input_is_refused_naming_the_flag_and_the_form_expected() {
    let good = sweep_report("good.json", &[1, 10, 20, 40], Some(40));
    let missing = scratch("no-such-file.json");
    let err = refused(&["--players", "10"], Some(&missing));
    assert!(
        err.contains("--from") && err.contains("cannot read"),
        "{err}"
    );

    let no_sweep = scratch("no-sweep.json");
    std::fs::write(
        &no_sweep,
        serde_json::to_string(&Report::default()).unwrap(),
    )
    .unwrap();
    let err = refused(&["--players", "10"], Some(&no_sweep));
    assert!(err.contains("no sweep") && err.contains("--sweep"), "{err}");

    let garbage = scratch("garbage.json");
    std::fs::write(&garbage, "{\"not\": \"a report\"}").unwrap();
    let err = refused(&["--players", "10"], Some(&garbage));
    assert!(err.contains("not a tickforge bench report"), "{err}");

    let one_step = sweep_report("one-step.json", &[10], Some(10));
    let err = refused(&["--players", "10"], Some(&one_step));
    assert!(err.contains("at least 2"), "{err}");

    let err = refused(&["--players", "0"], Some(&good));
    assert!(
        err.contains("--players") && err.contains("1 or more"),
        "{err}"
    );
    for h in ["1", "1.5", "100%", "-5%", "lots"] {
        let err = refused(&["--players", "10", "--headroom", h], Some(&good));
        assert!(
            err.contains("--headroom") && err.contains("(20%)"),
            "{h}: {err}"
        );
    }
    let err = refused(
        &["--players", "10", "--players-per-match", "5"],
        Some(&good),
    );
    assert!(
        err.contains("--players-per-match 5") && err.contains("--players 5 --sweep"),
        "{err}"
    );
    let err = refused(
        &[
            "--players",
            "10",
            "--host-cores",
            "4",
            "--reserved-cores",
            "4",
        ],
        Some(&good),
    );
    assert!(err.contains("--reserved-cores 4"), "{err}");
    let err = refused(&["--players", "10", "--tick-hz", "0"], Some(&good));
    assert!(err.contains("--tick-hz"), "{err}");
    let err = refused(&["--players", "10", "--matches", "5"], Some(&good));
    assert!(err.contains("--check"), "--matches without --check: {err}");
}

#[test]
fn a_saturation_sweep_is_refused_for_capacity() {
    let path = scratch("saturation.json");
    let report = Report {
        tick_hz: 128,
        players_per_match: 10,
        sweep: Some(Sweep {
            steps: vec![step(1, 0.1), step(1, 0.2)],
            by: "players".into(),
            ..Sweep::default()
        }),
        ..Report::default()
    };
    std::fs::write(&path, serde_json::to_string(&report).unwrap()).unwrap();
    let err = refused(&["--players", "10"], Some(&path));
    assert!(
        err.contains("saturation") && err.contains("--sweep"),
        "{err}"
    );
}

#[test]
fn the_json_plan_is_bounded_by_the_held_step_or_the_cpu_after_headroom() {
    let from = sweep_report("plan.json", &[1, 10, 20, 40], Some(40));
    // 1000 players → 100 matches. The CPU allows 75 a core at 20% headroom (0.05 + 0.01 m
    // ≤ 0.8), but no step held more than 40: 3 cores, one 8-core host.
    let v = json(&["--players", "1000", "--host-cores", "8"], &from);
    for key in ["sweep", "fit", "assumed", "plan", "check", "warnings"] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    let plan = &v["plan"];
    assert_eq!(plan["matches"], 100);
    assert_eq!(plan["matches_per_core_by_cpu"], 75);
    assert_eq!(plan["matches_per_core"], 40);
    assert_eq!(plan["bound"], "held");
    assert_eq!(
        (plan["cores"].as_u64(), plan["hosts"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(plan["matches_per_host"], 320);
    assert_eq!(plan["players_per_host"], 3200);
    assert!(v["check"].is_null());
    let fit = &v["fit"];
    assert!((fit["per_match_cpu_util"].as_f64().unwrap() - 0.01).abs() < 1e-9);
    assert!((fit["intercept_cpu_util"].as_f64().unwrap() - 0.05).abs() < 1e-9);
    assert_eq!(v["sweep"]["steps_used"].as_array().unwrap().len(), 4);
    // The inner steps, each predicted exactly by the line through the others.
    let loo = fit["leave_one_out"].as_array().unwrap();
    assert_eq!(loo.len(), 2, "{fit}");
    for l in loo {
        assert!((l["predicted_over_measured"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    }
    assert_eq!(v["assumed"]["headroom"], 0.2);
    assert_eq!(v["assumed"]["host_cores_from"], "--host-cores");
    assert_eq!(v["warnings"].as_array().unwrap().len(), 0, "{v}");

    // 70% headroom: 0.05 + 0.01 m ≤ 0.3 → 25 a core, by the CPU; 4 cores; with 2 of 4
    // cores reserved, 2 hosts.
    let v = json(
        &[
            "--players",
            "1000",
            "--headroom",
            "70%",
            "--host-cores",
            "4",
            "--reserved-cores",
            "2",
        ],
        &from,
    );
    let plan = &v["plan"];
    assert_eq!(
        (plan["matches_per_core"].as_u64(), plan["bound"].as_str()),
        (Some(25), Some("cpu"))
    );
    assert_eq!(
        (plan["cores"].as_u64(), plan["hosts"].as_u64()),
        (Some(4), Some(2))
    );
}

#[test]
fn another_tick_rate_is_scaled_and_called_an_extrapolation() {
    let from = sweep_report("tick.json", &[1, 10, 20, 40], Some(40));
    // At 256 Hz: 0.1 + 0.02 m ≤ 0.8 → 35 a core by the CPU; the 40 held at 128 Hz count
    // as 20.
    let v = json(&["--players", "1000", "--tick-hz", "256"], &from);
    assert_eq!(v["plan"]["matches_per_core_by_cpu"], 35);
    assert_eq!(v["plan"]["matches_per_core_held"], 20);
    assert_eq!(v["plan"]["matches_per_core"], 20);
    assert_eq!(v["assumed"]["tick_scale"], 2.0);
    let w = v["warnings"].to_string();
    assert!(w.contains("256 Hz") && w.contains("extrapolation"), "{w}");
}

#[test]
fn the_summary_says_what_it_assumed() {
    let from = sweep_report("summary.json", &[1, 10, 20], Some(20));
    let out = capacity(&["--players", "500", "--host-cores", "16"], Some(&from));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.starts_with("tickforge capacity: 500 players → 50 match(es) of 10 → 3 worker core(s) on 1 host(s) of 16 core(s)"),
        "{s}"
    );
    for needle in [
        "summary.json",
        "written 20",
        "server cpu = 5.00% + 1.000% × matches",
        "per core      20 matches (bounded by the sweep",
        "after 20% headroom",
        "per host      320 matches, 3200 players",
    ] {
        assert!(s.contains(needle), "missing {needle:?} in\n{s}");
    }
}

#[test]
fn a_sweep_none_of_whose_steps_held_plans_on_the_cpu_alone_and_says_so() {
    let from = sweep_report("none-held.json", &[1, 10, 20], None);
    let v = json(&["--players", "1000"], &from);
    assert_eq!(v["plan"]["bound"], "cpu");
    assert_eq!(v["plan"]["matches_per_core"], 75);
    assert!(v["plan"]["matches_per_core_held"].is_null());
    assert!(
        v["warnings"]
            .to_string()
            .contains("no step of the sweep held"),
        "{v}"
    );
}

#[test]
fn a_noisy_sweep_plans_but_warns() {
    let path = scratch("noisy.json");
    let report = Report {
        tick_hz: 128,
        players_per_match: 10,
        sweep: Some(Sweep {
            // Off the line 0.05 + 0.01 m by +20%, −15%, +10%, −20%.
            steps: vec![
                step(1, 0.072),
                step(10, 0.1275),
                step(20, 0.275),
                step(40, 0.36),
            ],
            measured_games_per_core: Some(40),
            limited_by: "steps".into(),
            by: "matches".into(),
            ..Sweep::default()
        }),
        ..Report::default()
    };
    std::fs::write(&path, serde_json::to_string(&report).unwrap()).unwrap();
    let v = json(&["--players", "100"], &path);
    assert_eq!(v["fit"]["noisy"], true);
    assert!(!v["warnings"].to_string().contains("no step"), "{v}");
    assert!(v["warnings"].to_string().contains("noisy sweep"), "{v}");
    assert!(v["plan"]["matches_per_core"].as_u64().unwrap() >= 1);
}

/// A real held run, one short one: the check's figure is the prediction over what the
/// server measured, and both are in the JSON.
#[test]
fn a_check_runs_a_held_run_and_reports_predicted_over_measured() {
    let from = sweep_report("check.json", &[1, 3], Some(3));
    let v = json(
        &[
            "--check",
            "--matches",
            "2",
            "--runs",
            "1",
            "--warmup-s",
            "0.5",
            "--duration-s",
            "1",
            "--quiet",
        ],
        &from,
    );
    assert!(v["plan"].is_null(), "no --players, no plan");
    let check = &v["check"];
    assert_eq!(check["matches"], 2);
    let predicted = check["predicted_cpu_util"].as_f64().unwrap();
    assert!((predicted - 0.07).abs() < 1e-9, "{check}");
    let runs = check["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let measured = runs[0]["measured_cpu_util"].as_f64().unwrap();
    assert!(measured > 0.0, "{check}");
    let ratio = runs[0]["predicted_over_measured"].as_f64().unwrap();
    assert!((ratio - predicted / measured).abs() < 1e-9, "{check}");
    // A run whose CPU is not the matches' (ticks skipped, bots saturated) is shown, not
    // counted.
    if runs[0]["left_out"].is_null() {
        assert_eq!(
            check["predicted_over_measured_median"].as_f64(),
            Some(ratio)
        );
    } else {
        assert!(check["predicted_over_measured_median"].is_null(), "{check}");
    }
}
