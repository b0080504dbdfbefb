//! `bench --html OUT` and `report FILE --html OUT`: a bench report as one HTML file that
//! opens offline. Everything is inline: the CSS, the charts (SVG drawn here from the
//! report's numbers, see [`chart`]), a few lines of script (the raw JSON's toggle), and
//! the report itself as JSON, so the page is also the data it shows. Nothing is fetched.
//!
//! The page: verdict cards against the budgets; the match frame second by second; the
//! frame by category and phase; the games-per-core sweep (VALORANT's chart); the
//! saturation curves (the Quake paper's); bandwidth, packets and drops; hit registration
//! by round trip; the run's record (commit, host, doctor, command line); the text summary;
//! the raw JSON. A chart the run did not measure is named with the reason instead.

mod cards;
pub mod chart;
pub mod figures;
pub mod run_info;

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use tickforge_telemetry::report::{Report, RunInfo};

use chart::esc;
use figures::Figure;

/// The id of the `<script type="application/json">` element that holds the report.
pub const JSON_ID: &str = "report-json";

/// Writes the page of `report` to `path`.
pub fn write(report: &Report, path: &Path) -> Result<()> {
    std::fs::write(path, render(report)).with_context(|| format!("writing {}", path.display()))
}

/// The report as JSON that is safe inside a `<script>` element: every `<`, `>` and `&`
/// (which JSON allows only inside strings) becomes its `\u` escape, so no `</script>` or
/// `<!--` can end or change the element, and `JSON.parse` reads the same report back.
fn script_json(report: &Report) -> String {
    let json = serde_json::to_string(report).expect("a report serializes");
    let mut out = String::with_capacity(json.len() + 64);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            c => out.push(c),
        }
    }
    out
}

/// The page of `report`.
pub fn render(r: &Report) -> String {
    let title = format!(
        "tickforge bench {}: {} match(es) of {} × {} at {} Hz",
        r.scenario,
        r.matches,
        tickforge_telemetry::summary::game_label(&r.game, &r.map),
        r.players_per_match,
        r.tick_hz
    );
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n<h1>{}</h1>\n\
         <p class=\"sub\">{:.1} s measured after {:.1} s of warm-up; budget {:.3} ms per match \
         tick; {}</p>\n",
        esc(&title),
        esc(&title),
        r.duration_s,
        r.warmup_s,
        r.budget_ms,
        esc(&run_line(r.run.as_ref()))
    );
    page.push_str("<section class=\"cards\">\n");
    for c in cards::cards(r) {
        let _ = writeln!(
            page,
            "<div class=\"card {class}\" data-card=\"{name}\" data-verdict=\"{class}\">\
             <div class=\"name\">{name}</div><div class=\"value\">{}</div>\
             <div class=\"verdict\">{}</div><div class=\"detail\">{}</div></div>",
            esc(&c.value),
            c.verdict.as_str(),
            esc(&c.detail),
            class = c.verdict.as_str().replace(' ', "-"),
            name = esc(c.name),
        );
    }
    page.push_str("</section>\n");

    section(
        &mut page,
        "Frame time over the run",
        &[("frame-time", figures::frame_time(r))],
    );
    section(
        &mut page,
        "Where the frame goes",
        &[
            ("categories", figures::categories(r)),
            ("phases", figures::phases(r)),
            ("slowest-frames", figures::slowest_frames(r)),
        ],
    );
    section(
        &mut page,
        "Games per core: frame time against matches on one core (VALORANT's chart)",
        &[("sweep", figures::sweep(r))],
    );
    let mut saturation = vec![
        ("saturation-rate", figures::saturation_rate(r)),
        ("saturation-time", figures::saturation_time(r)),
    ];
    if let Some(s) = r.sweep.as_ref().filter(|s| s.by == "players") {
        let c = figures::sweep_chart(s, r.budget_ms, r.tick_hz);
        if !c.is_empty() {
            saturation.push(("saturation-frame", Figure::Chart(c.svg(false))));
        }
    }
    section(
        &mut page,
        "Saturation: response rate and time against players (the Quake paper's curves)",
        &saturation,
    );
    section(
        &mut page,
        "Network",
        &[
            ("bandwidth", figures::bandwidth(r)),
            ("packets", figures::packets(r)),
            ("drops", figures::drops(r)),
        ],
    );
    section(
        &mut page,
        "Hit registration by round trip",
        &[("hitreg", figures::hitreg(r))],
    );
    run_section(&mut page, r);
    let _ = write!(
        page,
        "<section><h2>Summary</h2>\n<pre class=\"summary\">{}</pre></section>\n\
         <section><h2>Raw JSON</h2>\n<button id=\"toggle-json\" type=\"button\">show the raw \
         JSON</button>\n<pre id=\"raw-json\" hidden></pre></section>\n</main>\n\
         <script type=\"application/json\" id=\"{JSON_ID}\">{}</script>\n\
         <script>{SCRIPT}</script>\n</body>\n</html>\n",
        esc(&crate::summary::bench(r)),
        script_json(r)
    );
    page
}

/// A section of figures: each chart, or the reason it is missing.
fn section(page: &mut String, title: &str, figures: &[(&str, Figure)]) {
    let _ = writeln!(page, "<section><h2>{}</h2>", esc(title));
    for (name, figure) in figures {
        match figure {
            Figure::Chart(svg) => {
                // A series over the run's seconds takes the page's width.
                let wide = if *name == "frame-time" { " wide" } else { "" };
                let _ = writeln!(page, "<figure class=\"chart{wide}\">{svg}</figure>");
            }
            Figure::Missing(why) => {
                let _ = writeln!(
                    page,
                    "<p class=\"missing\" data-missing=\"{}\">{}: {}</p>",
                    esc(name),
                    esc(name),
                    esc(why)
                );
            }
        }
    }
    page.push_str("</section>\n");
}

/// The subtitle's part about the run: commit and host, when recorded.
fn run_line(run: Option<&RunInfo>) -> String {
    match run {
        Some(i) => format!(
            "tickforge {} at {} on {} ({}), {}",
            i.version,
            i.commit
                .as_deref()
                .map_or("an unknown commit", |c| &c[..c.len().min(12)]),
            if i.hostname.is_empty() {
                "an unnamed host"
            } else {
                &i.hostname
            },
            i.kernel,
            crate::summary::utc(i.started_unix_s)
        ),
        None => "the report does not record its commit or host".into(),
    }
}

/// The run's record: build, host, configuration, and the doctor's checks.
fn run_section(page: &mut String, r: &Report) {
    page.push_str("<section><h2>Run</h2>\n<table class=\"meta\">\n");
    let row = |page: &mut String, k: &str, v: &str| {
        let _ = writeln!(page, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    };
    let core = |c: Option<u32>| c.map_or("not pinned".to_string(), |c| format!("core {c}"));
    if let Some(i) = &r.run {
        row(page, "version", &i.version);
        row(page, "commit", i.commit.as_deref().unwrap_or("unknown"));
        row(page, "started", &crate::summary::utc(i.started_unix_s));
        row(page, "host", &i.hostname);
        row(page, "kernel", &i.kernel);
        row(page, "cpu", &i.cpu_model);
        row(page, "command", &i.command.join(" "));
    } else {
        row(
            page,
            "build and host",
            "not recorded (a report from before benches recorded them)",
        );
    }
    row(
        page,
        "cores",
        &format!(
            "{} available; server on {}, bots on {}",
            r.host.cpus,
            core(r.host.server_core),
            core(r.host.bots_core)
        ),
    );
    row(
        page,
        "scenario",
        &format!(
            "{} ({}), {} match(es) × {} players at {} Hz; {:.1} s warm-up, {:.1} s measured",
            r.scenario,
            tickforge_telemetry::summary::game_label(&r.game, &r.map),
            r.matches,
            r.players_per_match,
            r.tick_hz,
            r.warmup_s,
            r.duration_s
        ),
    );
    row(
        page,
        "server",
        &format!(
            "{} worker(s), {} real-time{}; max rewind {:.0} ms",
            r.server.workers,
            r.server.realtime_workers,
            r.server
                .rt_priority
                .map_or(String::new(), |p| format!(" (SCHED_FIFO {p})")),
            r.server.max_rewind_ms
        ),
    );
    row(
        page,
        "bots' conditioner",
        &format!(
            "{:.0} ms round trip ± {:.0} ms jitter; view {:.1} ms behind",
            r.hitreg.rtt_ms, r.hitreg.jitter_ms, r.hitreg.interp_delay_ms
        ),
    );
    page.push_str("</table>\n");
    match r.run.as_ref().and_then(|i| i.doctor.as_ref()) {
        Some(d) => {
            let _ = writeln!(
                page,
                "<h3>doctor --quick: {} ok, {} warn, {} info</h3>\n<table class=\"doctor\">",
                d.ok, d.warn, d.info
            );
            for c in &d.checks {
                let _ = writeln!(
                    page,
                    "<tr class=\"{}\"><th>{}</th><td>{}</td><td>{}{}</td></tr>",
                    esc(&c.verdict),
                    esc(&c.name),
                    esc(&c.verdict),
                    esc(&c.reading),
                    c.fix
                        .as_deref()
                        .map_or(String::new(), |f| format!(" — fix: {}", esc(f)))
                );
            }
            page.push_str("</table>\n");
        }
        None => page.push_str(
            "<p class=\"missing\" data-missing=\"doctor\">doctor: not recorded in this run</p>\n",
        ),
    }
    page.push_str("</section>\n");
}

const STYLE: &str = "
body { font-family: sans-serif; margin: 0; background: #f6f6f4; color: #222; }
main { max-width: 1240px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ccc; padding-bottom: 4px; }
h3 { font-size: 14px; margin: 16px 0 6px; }
.sub { color: #555; margin: 0 0 16px; font-size: 13px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); gap: 10px; }
.card { background: white; border-left: 6px solid #999; padding: 8px 12px; border-radius: 3px; }
.card .name { font-size: 12px; color: #555; text-transform: uppercase; letter-spacing: 0.04em; }
.card .value { font-size: 20px; font-weight: bold; margin: 2px 0; }
.card .verdict { font-size: 12px; font-weight: bold; text-transform: uppercase; }
.card .detail { font-size: 11px; color: #555; }
.card.pass { border-color: #2a9d3a; } .card.pass .verdict { color: #2a9d3a; }
.card.fail { border-color: #c62828; } .card.fail .verdict { color: #c62828; }
.card.warn { border-color: #e0a000; } .card.warn .verdict { color: #b07d00; }
.card.info { border-color: #1f5fbf; } .card.info .verdict { color: #1f5fbf; }
.card.not-measured { border-color: #bbb; color: #888; }
figure.chart { display: inline-block; width: calc(50% - 14px); margin: 6px 10px 6px 0;
  vertical-align: top; }
figure.chart.wide { width: calc(100% - 14px); }
figure.chart svg { width: 100%; height: auto; border: 1px solid #ddd; }
@media (max-width: 900px) { figure.chart { width: 100%; } }
.missing { color: #777; font-style: italic; }
table { border-collapse: collapse; font-size: 13px; background: white; }
th, td { text-align: left; padding: 3px 10px; border-bottom: 1px solid #eee; vertical-align: top; }
tr.warn td { color: #b07d00; } tr.ok td:nth-child(2) { color: #2a9d3a; }
pre { background: white; padding: 10px; font-size: 12px; overflow-x: auto; }
button { font-size: 13px; }
";

const SCRIPT: &str = "
(function () {
  var report = JSON.parse(document.getElementById('report-json').textContent);
  var raw = document.getElementById('raw-json');
  raw.textContent = JSON.stringify(report, null, 2);
  var toggle = document.getElementById('toggle-json');
  toggle.addEventListener('click', function () {
    raw.hidden = !raw.hidden;
    toggle.textContent = raw.hidden ? 'show the raw JSON' : 'hide the raw JSON';
  });
  var drawn = 0;
  document.querySelectorAll('svg[data-chart]').forEach(function (svg) {
    if (svg.querySelector('circle, rect.bar, polyline')) { drawn += 1; }
  });
  document.body.setAttribute('data-charts-drawn', String(drawn));
})();
";

#[cfg(test)]
mod tests {
    use super::*;
    use tickforge_telemetry::report::{FrameSecond, Percentiles, SlowFrame, Sweep, SweepStep};

    fn smoke() -> Report {
        let mut r = Report {
            scenario: "smoke".into(),
            game: "shooter".into(),
            map: "arena".into(),
            tick_hz: 128,
            matches: 1,
            players_per_match: 10,
            duration_s: 3.0,
            budget_ms: 0.117,
            match_frame_ms: Some(Percentiles {
                p50: 0.05,
                p90: 0.06,
                p99: 0.08,
                max: 0.4,
                mean: 0.055,
            }),
            ..Report::default()
        };
        r.categories_ms.network = Some(0.02);
        r.categories_ms.fow = Some(0.01);
        r.phases_ms.receive = Some(0.01);
        r.phases_ms.send = Some(0.02);
        r.clients.down_bytes_per_s = Some(20_000.0);
        r.clients.up_bytes_per_s = Some(8_000.0);
        r.server.frame_seconds = (0..3)
            .map(|s| FrameSecond {
                s,
                frames: 128,
                p50: 0.05,
                p99: 0.08,
                max: if s == 1 { 3.0 } else { 0.1 },
                late: u32::from(s == 1),
                hitches: u32::from(s == 1),
                late_host: 0,
            })
            .collect();
        r.server.slowest_frames = [(0.4, 1.25), (0.08, 2.5)]
            .into_iter()
            .map(|(ms, at_s)| SlowFrame {
                match_id: 1,
                at_s,
                frame_ms: ms,
                late: ms > 0.1,
                categories_ms: tickforge_telemetry::report::CategoryMs {
                    network: Some(ms / 2.0),
                    fow: Some(ms / 2.0),
                    ..Default::default()
                },
                ..SlowFrame::default()
            })
            .collect();
        // A reading with markup in it: it must come out as text.
        r.scenario = "smoke</script><!--".into();
        r
    }

    fn charts(page: &str) -> Vec<&str> {
        page.match_indices("data-chart=\"")
            .map(|(at, _)| page[at + 12..].split('"').next().unwrap())
            .collect()
    }

    #[test]
    fn a_smoke_run_draws_its_charts_and_names_what_it_did_not_measure() {
        let r = smoke();
        let page = render(&r);
        assert_eq!(
            charts(&page),
            [
                "frame-time",
                "categories",
                "phases",
                "slowest-frames",
                "bandwidth"
            ]
        );
        // Each slowest frame a bar under the mean's, labelled with when and which match.
        assert!(page.contains("the 2 slowest match frames by category"));
        assert!(page.contains("1.25 s, match 1, late"));
        assert!(page.contains("2.50 s, match 1<"), "not late: no mark");
        for missing in [
            "sweep",
            "saturation-rate",
            "saturation-time",
            "packets",
            "drops",
            "hitreg",
            "doctor",
        ] {
            assert!(
                page.contains(&format!("data-missing=\"{missing}\"")),
                "{missing}"
            );
        }
        assert!(page.contains(
            "not measured in this run: `tickforge bench --scenario many-matches --sweep`"
        ));
        // The hitch second is shaded, and the 3 ms max clipped with a note.
        assert_eq!(page.matches("<rect class=\"hitch\"").count(), 1);
        assert!(page.contains("max clipped at the top, highest 3.000 ms"));
        assert!(!page.contains("http://") && !page.contains("https://"));
        // A report from before the slowest frames were kept says so.
        let mut old = smoke();
        old.server.slowest_frames.clear();
        assert!(render(&old).contains("data-missing=\"slowest-frames\""));
    }

    #[test]
    fn the_embedded_json_cannot_close_its_script_and_reads_back_as_the_report() {
        let r = smoke();
        let page = render(&r);
        let open = format!("<script type=\"application/json\" id=\"{JSON_ID}\">");
        let start = page.find(&open).unwrap() + open.len();
        let len = page[start..].find("</script>").unwrap();
        let json = &page[start..start + len];
        assert!(!json.contains('<'), "{json}");
        let back: Report = serde_json::from_str(json).unwrap();
        assert_eq!(back, r);
        // Elsewhere the markup is escaped text.
        assert!(page.contains("smoke&lt;/script&gt;&lt;!--"));
    }

    #[test]
    fn a_sweep_and_a_saturation_run_get_their_charts() {
        let step = |matches, players, rate| SweepStep {
            matches,
            players,
            response_rate_hz: Some(rate),
            match_frame_ms: Some(Percentiles {
                p50: 0.05 * f64::from(players),
                p99: 0.08 * f64::from(players),
                ..Percentiles::default()
            }),
            on_time_rate: Some(1.0),
            response_time_ms: tickforge_telemetry::report::ResponseTimeMs {
                p50: Some(5.0),
                p99: Some(9.0),
                max: Some(12.0),
            },
            ..SweepStep::default()
        };
        let mut r = smoke();
        r.sweep = Some(Sweep {
            steps: vec![step(1, 10, 128.0), step(5, 10, 128.0)],
            measured_games_per_core: Some(5),
            limited_by: "steps".into(),
            by: "matches".into(),
            ..Sweep::default()
        });
        let page = render(&r);
        assert!(charts(&page).contains(&"sweep"));
        assert!(page.contains("data-missing=\"saturation-rate\""));

        r.sweep = Some(Sweep {
            steps: vec![step(1, 1, 128.0), step(1, 4, 127.0), step(1, 16, 100.0)],
            by: "players".into(),
            ..Sweep::default()
        });
        let page = render(&r);
        let c = charts(&page);
        for name in ["saturation-rate", "saturation-time", "saturation-frame"] {
            assert!(c.contains(&name), "{name} in {c:?}");
        }
        assert!(page.contains("data-missing=\"sweep\""));
        assert!(page.contains("tick rate 128 Hz"));
    }
}
