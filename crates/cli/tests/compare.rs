//! `tickforge compare` as CI runs it: reports written by serializing the real `Report`
//! type, the exit code (0 within the noise, 3 on a regression beyond it, 2 for bad input)
//! and the JSON; and one short real `bench --repeat 2`, end to end.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tickforge_telemetry::report::{Percentiles, Repeats, Report, Spread, Ticks};

fn tickforge() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickforge"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compare");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A smoke report of three runs whose match frame p99 and mean were `p99s` and whose other
/// figures did not vary.
fn repeated(p99s: [f64; 3]) -> Report {
    let spread = |runs: [f64; 3]| {
        let mut v = runs;
        v.sort_by(f64::total_cmp);
        Spread {
            min: v[0],
            median: v[1],
            max: v[2],
            runs: runs.iter().map(|&x| Some(x)).collect(),
        }
    };
    let mut r = Report {
        scenario: "smoke".into(),
        game: "shooter".into(),
        map: "arena".into(),
        tick_hz: 128,
        matches: 1,
        players_per_match: 10,
        match_frame_ms: Some(Percentiles {
            p50: 0.05,
            p99: p99s[0],
            mean: p99s[0] / 2.0,
            ..Percentiles::default()
        }),
        ticks: Ticks {
            expected: 640,
            on_time: 640,
            ..Ticks::default()
        },
        ..Report::default()
    };
    r.clients.response_time_ms.p99 = Some(12.0);
    r.repeats = Some(Repeats {
        runs: 3,
        base_run: 0,
        figures: [
            ("match_frame_p99_ms".to_string(), spread(p99s)),
            (
                "match_frame_mean_ms".to_string(),
                spread(p99s.map(|x| x / 2.0)),
            ),
            ("ticks_on_time_pct".to_string(), spread([100.0; 3])),
            ("response_p99_ms".to_string(), spread([12.0; 3])),
        ]
        .into(),
        ..Repeats::default()
    });
    r
}

fn write(name: &str, r: &Report) -> PathBuf {
    let path = scratch(name);
    std::fs::write(&path, serde_json::to_string_pretty(r).unwrap()).unwrap();
    path
}

fn compare(before: &Path, after: &Path, flags: &[&str]) -> Output {
    tickforge()
        .arg("compare")
        .args([before, after])
        .args(flags)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_change_within_the_runs_spread_exits_0() {
    let before = write("noise-before.json", &repeated([0.20, 0.24, 0.22]));
    // 9% up in the median, but the ranges overlap.
    let after = write("noise-after.json", &repeated([0.23, 0.24, 0.25]));
    let out = compare(&before, &after, &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let row = text
        .lines()
        .find(|l| l.contains("match frame p99"))
        .unwrap();
    assert!(
        row.contains("0.220 [0.200–0.240]") && row.ends_with("within noise"),
        "{row}"
    );
    assert!(
        text.contains("verdict: no gating figure worse beyond the noise"),
        "{text}"
    );
}

#[test]
fn a_regression_beyond_the_noise_exits_3_and_names_the_figure() {
    let before = write("regress-before.json", &repeated([0.20, 0.24, 0.22]));
    let after = write("regress-after.json", &repeated([0.30, 0.29, 0.31]));
    let out = compare(&before, &after, &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("REGRESSION: 2 worse beyond the noise: match frame p99 (ms) ×1.364"),
        "{text}"
    );
    // The same change, gated on a figure that held: exit 0, the change still shown.
    let out = compare(&before, &after, &["--fail-on", "ticks_on_time_pct"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("worse (not gating)"));
    // Swapped, the same change is an improvement.
    let out = compare(&after, &before, &[]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let row = text
        .lines()
        .find(|l| l.contains("match frame p99"))
        .unwrap();
    assert!(row.ends_with(" better"), "{row}");
}

#[test]
fn single_runs_are_judged_on_the_tolerance() {
    let mut before = repeated([0.20; 3]);
    before.repeats = None;
    let mut after = before.clone();
    // 4% up.
    after.match_frame_ms.as_mut().unwrap().p99 = 0.208;
    let (b, a) = (
        write("single-before.json", &before),
        write("single-after.json", &after),
    );
    assert_eq!(compare(&b, &a, &[]).status.code(), Some(0), "5% by default");
    let out = compare(&b, &a, &["--tolerance", "2%"]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    let text = stdout(&out);
    let row = text
        .lines()
        .find(|l| l.contains("match frame p99"))
        .unwrap();
    assert!(
        row.contains("1.040  0.980–1.020*") && row.ends_with(" worse"),
        "{row}"
    );
}

#[test]
fn the_json_has_every_figure_with_its_ratio_band_and_verdict() {
    let before = write("json-before.json", &repeated([0.20, 0.24, 0.22]));
    let after = write("json-after.json", &repeated([0.30, 0.29, 0.31]));
    let out = compare(&before, &after, &["--json", "-"]);
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON alone on stdout");
    assert_eq!(v["regression"], true);
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["tolerance"], 0.05);
    assert_eq!(
        v["regressions"],
        serde_json::json!(["match_frame_p99_ms", "match_frame_mean_ms"])
    );
    let figures = v["figures"].as_array().unwrap();
    let p99 = figures
        .iter()
        .find(|f| f["key"] == "match_frame_p99_ms")
        .unwrap();
    for key in [
        "label", "better", "before", "after", "ratio", "band", "verdict", "gates",
    ] {
        assert!(p99.get(key).is_some(), "missing {key}: {p99}");
    }
    assert_eq!(p99["better"], "lower");
    assert_eq!(p99["verdict"], "worse");
    assert_eq!(p99["before"]["runs"], 3);
    assert_eq!(p99["band"]["from"], "repeats");
    assert!(p99["band"]["hi"].as_f64().unwrap() < p99["ratio"].as_f64().unwrap());
    let absent = figures
        .iter()
        .find(|f| f["key"] == "games_per_core_measured")
        .unwrap();
    assert_eq!(absent["verdict"], "n/a");
    assert!(absent["ratio"].is_null() && absent["before"].is_null());
    // To a file, with the table still on stdout.
    let file = scratch("json-out.json");
    let out = compare(&before, &after, &["--json", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(stdout(&out).starts_with("tickforge compare: "));
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(saved, v);
}

#[test]
fn bad_input_exits_2() {
    let good = write("usage-good.json", &repeated([0.2; 3]));
    let bad = scratch("usage-bad.json");
    std::fs::write(&bad, "{\"scenario\": 3}").unwrap();
    let out = compare(&good, &bad, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a tickforge bench report"));
    let out = compare(&good, &good, &["--fail-on", "nonsense"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such figure"));
    let out = compare(&good, &good, &["--tolerance", "lots"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
}

/// The loop end to end: two real runs recorded, each figure's min ≤ median ≤ max, the
/// summary and `report` print them, and a report compared with itself is within noise.
#[test]
fn bench_repeat_records_every_run_and_compares_within_noise_with_itself() {
    let json = scratch("repeat2.json");
    let out = tickforge()
        .args([
            "bench",
            "--repeat",
            "2",
            "--duration-s",
            "1",
            "--warmup-s",
            "0.5",
            // The repeat loop is under test, not the host.
            "--checks",
            "report",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let (text, progress) = (
        stdout(&out),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "bench failed: {progress}");
    assert!(
        progress.contains("run 1/2") && progress.contains("run 2/2: match frame mean"),
        "{progress}"
    );
    assert!(text.contains("  repeats       2 runs;"), "{text}");
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rep = r.repeats.as_ref().expect("a repeats section");
    assert_eq!(rep.runs, 2);
    assert!(rep.base_run < 2);
    for key in [
        "match_frame_p99_ms",
        "match_frame_mean_ms",
        "ticks_on_time_pct",
        "response_p50_ms",
    ] {
        let s = rep
            .figures
            .get(key)
            .unwrap_or_else(|| panic!("no {key}: {rep:?}"));
        assert_eq!(s.runs.len(), 2, "{key}");
        assert!(s.runs.iter().all(Option::is_some), "{key}: {s:?}");
        assert!(s.min <= s.median && s.median <= s.max, "{key}: {s:?}");
    }
    // The base is one of the runs, whole.
    let mean = &rep.figures["match_frame_mean_ms"];
    assert_eq!(
        mean.runs[rep.base_run as usize],
        r.match_frame_ms.map(|p| p.mean)
    );

    let out = tickforge().arg("report").arg(&json).output().unwrap();
    assert!(stdout(&out).contains("  repeats       2 runs;"));
    let out = compare(&json, &json, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("2 runs against smoke of shooter on arena (1 × 10), 2 runs"));
}
