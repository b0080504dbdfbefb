//! The HTML report in a real browser: real bench runs write their pages (`bench --html`,
//! `report FILE --html`), headless Chromium loads each from disk and runs its script, and
//! the DOM it dumps is checked: every chart the run measured is an `<svg data-chart>` with
//! marks drawn from the data, what the run did not measure says so, the embedded JSON (and
//! the script's pretty copy of it) reads back as the same report, and nothing on the page
//! points at the network.
//!
//! Needs Debian's `chromium`. Without it the tests print a skip line, or fail when
//! `TICKFORGE_REQUIRE_LANGS=1` (CI sets it).

use std::path::{Path, PathBuf};
use std::process::Command;

use tickforge_telemetry::report::Report;

fn tickforge() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickforge"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-report");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The Chromium binary, or `None` (the test skips) when none runs; with
/// `TICKFORGE_REQUIRE_LANGS=1` a missing Chromium fails the test.
fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|bin| {
        Command::new(bin)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        let required = std::env::var("TICKFORGE_REQUIRE_LANGS").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "chromium is not installed, and TICKFORGE_REQUIRE_LANGS=1 requires it \
             (apt-get install -y chromium)"
        );
        eprintln!(
            "skipped: chromium is not installed (apt-get install -y chromium; \
             TICKFORGE_REQUIRE_LANGS=1 makes this fail)"
        );
    }
    found
}

/// The DOM of `page` after its scripts ran, as headless Chromium serializes it.
fn dump_dom(chromium: &str, page: &Path) -> String {
    // Each load gets its own profile: tests run in parallel.
    let profile = page.with_extension("profile");
    let out = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8(out.stdout).unwrap();
    assert!(dom.contains("</html>"), "no page dumped: {dom}");
    dom
}

/// Runs `tickforge ARGS`; panics with its stderr on failure; returns its stdout.
fn run(args: &[&str], paths: &[&Path]) -> String {
    let out = tickforge().args(args).args(paths).output().unwrap();
    assert!(
        out.status.success(),
        "tickforge {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn load(json: &Path) -> Report {
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

/// The `<svg>` element whose `data-chart` is `name`, if the DOM has it.
fn chart<'a>(dom: &'a str, name: &str) -> Option<&'a str> {
    let at = dom.find(&format!("data-chart=\"{name}\""))?;
    let start = dom[..at].rfind("<svg")?;
    let end = at + dom[at..].find("</svg>")? + "</svg>".len();
    Some(&dom[start..end])
}

/// The value of attribute `key` on every element of `svg` that starts with `open`.
fn attrs<'a>(svg: &'a str, open: &str, key: &str) -> Vec<&'a str> {
    svg.match_indices(open)
        .filter_map(|(at, _)| {
            let tag = &svg[at..at + svg[at..].find('>')?];
            let v = tag.find(&format!(" {key}=\""))? + key.len() + 3;
            tag[v..].split('"').next()
        })
        .collect()
}

/// Points of the polyline of series `class` in `svg`.
fn polyline_points(svg: &str, class: &str) -> usize {
    attrs(svg, &format!("<polyline class=\"{class}\""), "points")
        .first()
        .map_or(0, |p| p.split_whitespace().count())
}

/// Bars of `svg` drawn wider than nothing.
fn bars(svg: &str) -> usize {
    attrs(svg, "<rect class=\"bar\"", "width")
        .iter()
        .filter(|w| w.parse::<f64>().unwrap() > 0.0)
        .count()
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// What every page must be: its script ran (it counts the charts with marks: all of them),
/// the embedded JSON and the script's pretty copy of it read back as `report`, and nothing
/// is loaded from anywhere (no `src`, `href`, `url(` or `@import` at all).
fn check_page(dom: &str, report: &Report) {
    let charts = dom.matches("<svg data-chart=").count();
    assert!(charts > 0);
    assert!(
        dom.contains(&format!("data-charts-drawn=\"{charts}\"")),
        "the script counted another number of drawn charts than the {charts} on the page"
    );
    let open = "<script type=\"application/json\" id=\"report-json\">";
    let start = dom.find(open).expect("the embedded report") + open.len();
    let json = &dom[start..start + dom[start..].find("</script>").unwrap()];
    assert_eq!(&serde_json::from_str::<Report>(json).unwrap(), report);
    let open = "<pre id=\"raw-json\" hidden=\"\">";
    let start = dom.find(open).expect("the raw JSON's place") + open.len();
    let pretty = unescape(&dom[start..start + dom[start..].find("</pre>").unwrap()]);
    assert!(pretty.contains("\n  \"scenario\""), "the script filled it");
    assert_eq!(&serde_json::from_str::<Report>(&pretty).unwrap(), report);
    for reference in [
        " src=", " href=", "url(", "@import", "<link", "<img", "<iframe",
    ] {
        assert!(!dom.contains(reference), "the page holds {reference}");
    }
}

#[test]
fn a_smoke_bench_page_draws_its_charts_in_chromium_and_names_what_it_did_not_measure() {
    let Some(chromium) = chromium() else { return };
    let (json, html) = (scratch("smoke.json"), scratch("smoke.html"));
    let stdout = run(
        &[
            "bench",
            "--scenario",
            "smoke",
            "--warmup-s",
            "1",
            "--duration-s",
            "2",
            "--quiet",
            // The page is under test here, not the host: a late tick must not stop it.
            "--checks",
            "report",
            "--json",
        ],
        &[&json, Path::new("--html"), &html],
    );
    assert!(
        stdout.contains(&format!("wrote         {}", html.display())),
        "{stdout}"
    );
    let report = load(&json);
    let dom = dump_dom(chromium, &html);
    check_page(&dom, &report);

    // Frame time over the run: a point a second for each series, and the budget line.
    let seconds = report.server.frame_seconds.len();
    assert!(
        seconds >= 1,
        "the server recorded its frames second by second"
    );
    let frame = chart(&dom, "frame-time").expect("the frame-time chart");
    for series in ["p50", "p99", "max"] {
        assert_eq!(polyline_points(frame, series), seconds, "{series}");
    }
    assert!(frame.contains(&format!("budget {:.3} ms", report.budget_ms)));
    // Categories and phases: a bar part for each one measured.
    let measured = tickforge_telemetry::Category::ALL
        .iter()
        .filter(|&&c| report.categories_ms.get(c).is_some_and(|v| v > 0.0))
        .count();
    assert!(measured >= 2, "{:?}", report.categories_ms);
    assert_eq!(bars(chart(&dom, "categories").unwrap()), measured);
    let p = &report.phases_ms;
    let phases = [p.receive, p.simulate, p.replicate, p.send];
    let phases = phases.iter().filter(|v| v.is_some_and(|v| v > 0.0)).count();
    assert!(phases >= 2, "{p:?}");
    assert_eq!(bars(chart(&dom, "phases").unwrap()), phases);
    // The slowest frames (two seconds at 128 Hz hold more than it keeps), a bar each under
    // the mean's, a part for each category each entered.
    let slow = &report.server.slowest_frames;
    assert_eq!(slow.len(), tickforge_telemetry::SLOWEST_FRAMES);
    let entered = |c: &tickforge_telemetry::report::CategoryMs| {
        (tickforge_telemetry::Category::ALL.iter())
            .filter(|&&k| c.get(k).is_some())
            .count()
    };
    let parts = entered(&report.categories_ms)
        + slow
            .iter()
            .map(|f| entered(&f.categories_ms))
            .sum::<usize>();
    assert_eq!(bars(chart(&dom, "slowest-frames").unwrap()), parts);
    // Bandwidth and packets: down and up per client.
    assert_eq!(bars(chart(&dom, "bandwidth").unwrap()), 2);
    assert_eq!(bars(chart(&dom, "packets").unwrap()), 2);
    // Drops: a bar for each reason that dropped any, or the words that none did.
    let reasons = (report.server.datagrams.dropped.values())
        .filter(|&&n| n > 0)
        .count();
    match chart(&dom, "drops") {
        Some(svg) => assert_eq!(bars(svg), reasons),
        None => assert!(reasons == 0 && dom.contains("no datagram dropped")),
    }
    // A smoke run has no sweep: no chart, the reason instead.
    for missing in ["sweep", "saturation-rate", "saturation-time"] {
        assert!(chart(&dom, missing).is_none(), "{missing}");
        assert!(
            dom.contains(&format!("data-missing=\"{missing}\"")),
            "{missing}"
        );
    }
    assert!(dom.contains("not measured in this run"));
    // Pass/fail cards, and the run's record with the doctor's checks.
    for card in [
        "match frame",
        "ticks on time",
        "response rate",
        "games per core",
    ] {
        assert!(dom.contains(&format!("data-card=\"{card}\"")), "{card}");
    }
    let run = report.run.as_ref().expect("the bench recorded its run");
    assert!(run.doctor.as_ref().is_some_and(|d| !d.checks.is_empty()));
    assert!(dom.contains("doctor --quick:"));
    if let Some(commit) = &run.commit {
        assert!(dom.contains(commit.as_str()));
    }
}

#[test]
fn saved_sweeps_draw_the_quake_curves_and_the_valorant_chart_in_chromium() {
    let Some(chromium) = chromium() else { return };
    // The saturation run: players raised in one match (the Quake paper's curves).
    let (json, html) = (scratch("saturation.json"), scratch("saturation.html"));
    run(
        &[
            "bench",
            "--scenario",
            "saturation",
            "--sweep-steps",
            "1,2",
            "--warmup-s",
            "1",
            "--duration-s",
            "1",
            "--quiet",
            // The page is under test here, not the host: a late tick must not stop it.
            "--checks",
            "report",
            "--json",
        ],
        &[&json],
    );
    let stdout = run(&["report"], &[&json, Path::new("--html"), &html]);
    assert!(stdout.contains("wrote"), "{stdout}");
    let report = load(&json);
    let dom = dump_dom(chromium, &html);
    check_page(&dom, &report);
    let steps = report.sweep.as_ref().unwrap().steps.len();
    assert_eq!(steps, 2);
    for name in ["saturation-rate", "saturation-frame"] {
        let svg = chart(&dom, name).unwrap_or_else(|| panic!("{name}"));
        assert!(svg.matches("<circle").count() >= steps, "{name}: {svg}");
    }
    let time = chart(&dom, "saturation-time").unwrap();
    assert_eq!(polyline_points(time, "p50"), steps);
    assert!(chart(&dom, "sweep").is_none() && dom.contains("data-missing=\"sweep\""));

    // A games-per-core sweep: matches raised on one core (VALORANT's chart).
    let (json, html) = (scratch("sweep.json"), scratch("sweep.html"));
    run(
        &[
            "bench",
            "--scenario",
            "many-matches",
            "--sweep",
            "--sweep-every-step",
            "--sweep-steps",
            "1,2",
            "--warmup-s",
            "1",
            "--duration-s",
            "1",
            "--quiet",
            // The page is under test here, not the host: a late tick must not stop it.
            "--checks",
            "report",
            "--json",
        ],
        &[&json],
    );
    run(&["report"], &[&json, Path::new("--html"), &html]);
    let report = load(&json);
    let dom = dump_dom(chromium, &html);
    check_page(&dom, &report);
    let steps = report.sweep.as_ref().unwrap().steps.len();
    let svg = chart(&dom, "sweep").expect("the sweep chart");
    assert_eq!(svg.matches("<circle class=\"p50\"").count(), steps);
    assert_eq!(polyline_points(svg, "p99"), steps);
    assert!(svg.contains(&format!("budget {:.3} ms", report.budget_ms)));
    assert!(dom.contains("data-missing=\"saturation-rate\""));
}
