//! `tickforge capacity`: cores and hosts for N concurrent players, from a measured
//! many-matches sweep (`bench --scenario many-matches --sweep --json FILE`), and `--check`:
//! a held run at a match count between the sweep's steps, its measured CPU against the
//! prediction (VALORANT predicted its hardware within 1%).
//!
//! The model is in [`model`]: a straight line through the CPU of the steps that held. This
//! module reads the sweep, asks the model, runs the check through `tickforge bench` (the
//! same machinery, a child process, so the held run measures exactly what a step measured)
//! and prints the answer.
//!
//! It does not run a sweep itself: a plan should rest on a sweep measured on the hardware
//! planned for, with nothing else running, and kept; one run quietly on whatever machine
//! typed the command would give a plan nobody can trace or repeat.

mod model;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};
use tickforge_telemetry::report::Report;

use model::{Ask, Fit, Plan, Steps};

/// Held runs a check makes: the median is quoted, with the spread.
const DEFAULT_CHECK_RUNS: u32 = 3;

/// The command that makes a sweep to plan from.
const SWEEP_HOWTO: &str =
    "tickforge bench --scenario many-matches --sweep --json sweep.json (on the hardware planned for, idle)";

/// Flags of `capacity`.
#[derive(Args, Debug)]
pub struct CapacityArgs {
    /// Concurrent players to host.
    #[arg(long, value_name = "N", required_unless_present = "check")]
    pub players: Option<u64>,
    /// A many-matches sweep: `tickforge bench --scenario many-matches --sweep --json FILE`.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Players in a match [default: the sweep's]. A different size needs its own sweep
    /// (`bench --players P --sweep`): the cost of a match does not scale simply with it.
    #[arg(long, value_name = "P")]
    pub players_per_match: Option<u32>,
    /// Tick rate to plan for [default: the sweep's]. Another rate scales every match's CPU
    /// (and the idle core's) by the ratio: an extrapolation, and the summary says so.
    #[arg(long, value_name = "HZ")]
    pub tick_hz: Option<u32>,
    /// Share of each worker core kept free: a fraction below 1 (0.2) or a percentage (20%).
    // 20%: room for a busy round, a noisy neighbour and the OS beside what the sweep saw.
    #[arg(long, value_name = "SHARE", default_value = "20%", value_parser = parse_headroom,
          allow_hyphen_values = true)]
    pub headroom: f64,
    /// Cores of one host [default: the cores this process may run on].
    #[arg(long, value_name = "N")]
    pub host_cores: Option<u32>,
    /// Cores of each host kept for the OS and other work; no worker is planned on them. The
    /// sweep's CPU includes the worker's own socket calls, so none is needed for them.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub reserved_cores: u32,
    /// Run held runs at --matches (between the sweep's steps) and report the measured CPU
    /// against the fit's prediction: predicted ÷ measured.
    #[arg(long)]
    pub check: bool,
    /// Matches of the check's held run [default: halfway between the sweep's two largest
    /// steps that held].
    #[arg(long, value_name = "M", requires = "check")]
    pub matches: Option<u32>,
    /// Held runs the check makes; the median ratio is quoted with the spread.
    #[arg(long, value_name = "K", default_value_t = DEFAULT_CHECK_RUNS, requires = "check",
          value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,
    /// Seconds each held run measures [default: the sweep's].
    #[arg(long, value_name = "S", requires = "check")]
    pub duration_s: Option<f64>,
    /// Seconds each held run warms up first [default: the sweep's].
    #[arg(long, value_name = "S", requires = "check")]
    pub warmup_s: Option<f64>,
    /// Write the full result (sweep, fit, plan, check) to FILE as JSON; `-` for stdout,
    /// which then carries the JSON alone.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No progress lines during a check.
    #[arg(long)]
    pub quiet: bool,
}

/// `--headroom`: `0.2` or `20%`, at least 0 and below 1.
fn parse_headroom(s: &str) -> Result<f64, String> {
    let expected = "expected a share of each core kept free, from 0 to below 1 (0.2) or a \
                    percentage from 0 to below 100 (20%)";
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("{expected}, got {s:?}"))?;
    if !(v.is_finite() && (0.0..1.0).contains(&v)) {
        return Err(format!("{expected}, got {s:?}"));
    }
    Ok(v)
}

/// The sweep read from a report, with what the summary says of where it came from.
struct Source {
    path: PathBuf,
    report: Report,
    /// When the sweep started, UTC: the report's own start time, or for a report written
    /// before reports recorded one, when the file was last written.
    written: Option<String>,
    steps: Steps,
    fit: Fit,
}

fn load(path: &Path) -> Result<Source> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--from {}: cannot read it", path.display()))?;
    let report: Report = serde_json::from_str(&text).with_context(|| {
        format!(
            "--from {}: not a tickforge bench report (expected the JSON of {SWEEP_HOWTO})",
            path.display()
        )
    })?;
    let Some(sweep) = &report.sweep else {
        bail!(
            "--from {}: a bench report with no sweep; expected one from {SWEEP_HOWTO}",
            path.display()
        );
    };
    if sweep.by != "matches" {
        bail!(
            "--from {}: a sweep over {} in one match (saturation); capacity needs matches on a \
             core: {SWEEP_HOWTO}",
            path.display(),
            sweep.by
        );
    }
    let steps = model::steps_of(sweep);
    let fit = Fit::new(&steps.used).with_context(|| {
        format!(
            "--from {}: cannot plan from this sweep; make one whose steps run further: \
             {SWEEP_HOWTO}",
            path.display()
        )
    })?;
    let written = match &report.run {
        Some(run) => Some(crate::summary::utc(run.started_unix_s)),
        None => std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| crate::summary::utc(d.as_secs())),
    };
    Ok(Source {
        path: path.to_path_buf(),
        report,
        written,
        steps,
        fit,
    })
}

/// What one held run of a check measured.
struct HeldRun {
    /// The server's CPU, share of one core: the figure each step of the sweep measured.
    cpu: f64,
    /// Share of ticks started on time.
    on_time_rate: Option<f64>,
    /// Why its CPU cannot be set against the line, by the rule that picks the fitted
    /// steps; `None`: it can.
    excluded: Option<&'static str>,
    /// The host's 1-minute load average when the run ended: how busy the other cores were
    /// (a busy host costs each tick more CPU, through shared caches and memory).
    load_avg: Option<f64>,
}

/// The first figure of `/proc/loadavg`; `None` where there is none.
fn load_avg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// What the held runs of a check measured.
struct Check {
    matches: u32,
    predicted: f64,
    runs: Vec<HeldRun>,
    notes: Vec<String>,
}

impl Check {
    /// Predicted ÷ measured of each run.
    fn ratio(&self, run: &HeldRun) -> f64 {
        self.predicted / run.cpu
    }

    /// The ratios of the runs whose CPU counts.
    fn ratios(&self) -> Vec<f64> {
        self.runs
            .iter()
            .filter(|r| r.excluded.is_none())
            .map(|r| self.ratio(r))
            .collect()
    }
}

pub fn run(args: CapacityArgs) -> Result<()> {
    let Some(from) = &args.from else {
        bail!(
            "--from: expected a sweep to plan from; make one with {SWEEP_HOWTO}, then \
             `tickforge capacity --players N --from sweep.json`. capacity does not run one \
             itself: a plan should rest on a sweep that was measured on the hardware planned \
             for and kept"
        );
    };
    if args.players == Some(0) {
        bail!("--players: expected 1 or more concurrent players, got 0");
    }
    if args.tick_hz == Some(0) {
        bail!("--tick-hz: expected a tick rate of 1 Hz or more, got 0");
    }
    if args.host_cores == Some(0) {
        bail!("--host-cores: expected 1 or more cores, got 0");
    }
    for (flag, v) in [
        ("--duration-s", args.duration_s),
        ("--warmup-s", args.warmup_s),
    ] {
        if v.is_some_and(|s| !(s.is_finite() && s >= 0.0) || (flag == "--duration-s" && s == 0.0)) {
            bail!("{flag}: expected seconds, more than 0 (warm-up: 0 or more)");
        }
    }
    let src = load(from)?;
    let sweep_players = src.report.players_per_match;
    if let Some(p) = args.players_per_match {
        if p != sweep_players {
            bail!(
                "--players-per-match {p}: the sweep ran {sweep_players} players a match; plan \
                 {p} from a sweep of that size: tickforge bench --scenario many-matches \
                 --players {p} --sweep --json FILE"
            );
        }
    }
    let sweep_hz = src.report.tick_hz;
    if sweep_hz == 0 {
        bail!("--from {}: the report has no tick rate", from.display());
    }
    let tick_hz = args.tick_hz.unwrap_or(sweep_hz);
    let host_cores = args
        .host_cores
        .unwrap_or_else(|| tickforge_io::cpu::allowed_cores().len().max(1) as u32);
    let plan = match args.players {
        Some(players) => Some(model::plan(
            &src.fit,
            &Ask {
                players,
                players_per_match: sweep_players.max(1),
                headroom: args.headroom,
                tick_scale: f64::from(tick_hz) / f64::from(sweep_hz),
                host_cores,
                reserved_cores: args.reserved_cores,
                held: src
                    .report
                    .sweep
                    .as_ref()
                    .and_then(|s| s.measured_games_per_core),
            },
        )?),
        None => None,
    };
    let check = if args.check {
        Some(check(&args, &src)?)
    } else {
        None
    };
    let ctx = Asked {
        players: args.players,
        tick_hz,
        sweep_hz,
        headroom: args.headroom,
        host_cores,
        reserved_cores: args.reserved_cores,
        host_cores_given: args.host_cores.is_some(),
    };
    let value = to_json(&src, &ctx, plan.as_ref(), check.as_ref());
    match &args.json {
        Some(p) if p.as_os_str() == "-" => {
            println!("{}", serde_json::to_string_pretty(&value)?);
            return Ok(());
        }
        Some(p) => std::fs::write(p, serde_json::to_string_pretty(&value)?)
            .with_context(|| format!("--json {}: cannot write it", p.display()))?,
        None => {}
    }
    print!("{}", summary(&src, &ctx, plan.as_ref(), check.as_ref()));
    Ok(())
}

/// What the user asked, as the summary and the JSON report it.
struct Asked {
    players: Option<u64>,
    tick_hz: u32,
    sweep_hz: u32,
    headroom: f64,
    host_cores: u32,
    reserved_cores: u32,
    host_cores_given: bool,
}

/// Runs the check's held runs through `tickforge bench`, as the sweep ran its steps.
fn check(args: &CapacityArgs, src: &Source) -> Result<Check> {
    let r = &src.report;
    let matches = args
        .matches
        .unwrap_or_else(|| model::check_matches(&src.fit));
    if matches == 0 {
        bail!("--matches: expected 1 or more matches, got 0");
    }
    let mut notes = Vec::new();
    let counts: Vec<u32> = src.fit.points.iter().map(|p| p.matches).collect();
    let (lo, hi) = (
        counts.iter().copied().min().unwrap_or(0),
        counts.iter().copied().max().unwrap_or(0),
    );
    if counts.contains(&matches) {
        notes.push(format!(
            "{matches} matches is a step of the sweep: the check tests a fitted point, not the line between them"
        ));
    } else if !(lo..=hi).contains(&matches) {
        notes.push(format!(
            "{matches} matches is outside the fitted steps ({lo}–{hi}): the check tests an extrapolation"
        ));
    }
    let duration_s = args.duration_s.unwrap_or(r.duration_s);
    let warmup_s = args.warmup_s.unwrap_or(r.warmup_s);
    let game = if r.game.is_empty() {
        "shooter"
    } else {
        &r.game
    };
    let exe = std::env::current_exe().context("finding the tickforge binary")?;
    let dir = std::env::temp_dir().join(format!("tickforge-capacity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut runs = Vec::new();
    for k in 1..=args.runs {
        if !args.quiet {
            eprintln!(
                "check: held run {k}/{} at {matches} match(es) of {game} × {} at {} Hz, {warmup_s} s + {duration_s} s…",
                args.runs, r.players_per_match, r.tick_hz
            );
        }
        let json = dir.join(format!("run-{k}.json"));
        let mut cmd = Command::new(&exe);
        cmd.args(["bench", "--scenario", "many-matches", "--game", game])
            .args(["--matches", &matches.to_string()])
            .args(["--players", &r.players_per_match.to_string()])
            .args(["--tick-hz", &r.tick_hz.to_string()])
            .args(["--warmup-s", &warmup_s.to_string()])
            .args(["--duration-s", &duration_s.to_string()])
            // As the sweep's server ran: real-time where it got it, else normal.
            .args([
                "--rt-priority",
                &r.server.rt_priority.unwrap_or(0).to_string(),
            ])
            // This check judges the runs itself (a run with skipped ticks or saturated
            // bots is shown, not counted); the bench's own checks would stop it instead.
            .args(["--checks", "report"])
            .arg("--json")
            .arg(&json)
            .stdout(Stdio::null());
        if args.quiet {
            cmd.arg("--quiet");
        }
        let out = cmd
            .stderr(if args.quiet {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .output()
            .context("starting tickforge bench")?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            bail!(
                "--check: held run {k} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let held: Report = serde_json::from_str(&std::fs::read_to_string(&json)?)
            .context("reading the held run's report")?;
        let Some(cpu) = held.server_cpu_util.filter(|c| *c > 0.0) else {
            bail!("--check: held run {k} measured no server CPU");
        };
        let t = &held.ticks;
        let on_time_rate = (t.expected > 0).then(|| t.on_time as f64 / t.expected as f64);
        let run = HeldRun {
            cpu,
            on_time_rate,
            excluded: model::why_excluded(&tickforge_telemetry::report::SweepStep {
                matches,
                worker_util: Some(cpu),
                on_time_rate,
                skipped: t.skipped,
                bots_saturated: held.bots_saturated == Some(true),
                ..Default::default()
            }),
            load_avg: load_avg(),
        };
        if !args.quiet {
            eprintln!(
                "check: run {k}: server cpu {:.1}% of a core, predicted {:.1}%: predicted ÷ measured {:.3}, {} of ticks on time, load average {}{}",
                cpu * 100.0,
                src.fit.cpu(matches) * 100.0,
                src.fit.cpu(matches) / cpu,
                on_time_rate.map_or("n/a".into(), |r| format!("{:.2}%", r * 100.0)),
                run.load_avg.map_or("n/a".into(), |l| format!("{l:.2}")),
                run.excluded.map_or(String::new(), |why| format!(" (left out: {why})"))
            );
        }
        runs.push(run);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let late = runs
        .iter()
        .filter(|r| r.excluded.is_none() && !r.on_time_rate.is_some_and(|x| x >= model::ON_TIME))
        .count();
    if late > 0 {
        notes.push(format!(
            "{late} run(s) started under 99.5% of ticks on time (a busy host): counted, since \
             a tick costs the same CPU whenever it starts, as the sweep's steps are"
        ));
    }
    let left_out = runs.iter().filter(|r| r.excluded.is_some()).count();
    if left_out > 0 {
        notes.push(format!(
            "{left_out} run(s) left out of the ratio: their CPU is not the matches' cost (ticks \
             skipped, the core full, or the bots saturated)"
        ));
    }
    Ok(Check {
        matches,
        predicted: src.fit.cpu(matches),
        runs,
        notes,
    })
}

/// Warnings about what the plan rests on.
fn warnings(src: &Source, ctx: &Asked, plan: Option<&Plan>) -> Vec<String> {
    let mut w = Vec::new();
    if ctx.tick_hz != ctx.sweep_hz {
        w.push(format!(
            "planned at {} Hz from a sweep at {} Hz: every CPU figure scaled by {:.3}, an \
             extrapolation; sweep at {} Hz to measure it",
            ctx.tick_hz,
            ctx.sweep_hz,
            f64::from(ctx.tick_hz) / f64::from(ctx.sweep_hz),
            ctx.tick_hz
        ));
    }
    if src.fit.is_noisy() {
        w.push(format!(
            "noisy sweep: a step lies {:.1}% of a core off the fitted line (over {:.0}%); sweep \
             again on an idle host",
            src.fit.max_residual * 100.0,
            model::NOISY_RESIDUAL * 100.0
        ));
    }
    if src.fit.points.len() < 3 {
        w.push(format!(
            "the fit rests on {} steps: nothing checks that the cost is a straight line",
            src.fit.points.len()
        ));
    }
    if let Some(p) = plan {
        if p.per_core > src.fit.max_matches() {
            w.push(format!(
                "{} matches a core is past the largest step fitted ({}): an extrapolation",
                p.per_core,
                src.fit.max_matches()
            ));
        }
    }
    if let Some(s) = &src.report.sweep {
        if s.measured_games_per_core.is_none() {
            w.push(
                "no step of the sweep held its ticks (99.5% on time, none skipped): nothing \
                 caps the plan but the CPU line"
                    .into(),
            );
        }
        if s.limited_by == "bots" {
            w.push(
                "the sweep ended when the bots saturated, not the server: the server's limit \
                 was not reached"
                    .into(),
            );
        }
    }
    w
}

fn to_json(src: &Source, ctx: &Asked, plan: Option<&Plan>, check: Option<&Check>) -> Value {
    let r = &src.report;
    let sweep = r.sweep.as_ref();
    let fit = &src.fit;
    json!({
        "sweep": {
            "file": src.path.display().to_string(),
            "written": src.written,
            "commit": r.run.as_ref().and_then(|run| run.commit.clone()),
            "scenario": r.scenario,
            "game": r.game,
            "map": r.map,
            "tick_hz": r.tick_hz,
            "players_per_match": r.players_per_match,
            "warmup_s": r.warmup_s,
            "duration_s": r.duration_s,
            "host_cpus": r.host.cpus,
            "server_core": r.host.server_core,
            "bots_core": r.host.bots_core,
            "rt_priority": r.server.rt_priority,
            "measured_games_per_core": sweep.and_then(|s| s.measured_games_per_core),
            "limited_by": sweep.map(|s| s.limited_by.clone()),
            "steps_used": fit.points.iter().map(|p| json!({
                "matches": p.matches,
                "cpu_util": p.cpu,
                "predicted_cpu_util": fit.cpu(p.matches),
                "relative_residual": fit.relative_residual(*p),
            })).collect::<Vec<_>>(),
            "steps_excluded": src.steps.excluded.iter().map(|(m, why)| json!({
                "matches": m,
                "why": why,
            })).collect::<Vec<_>>(),
        },
        "fit": {
            "model": "cpu_util(m) = intercept + per_match * m, least squares over the steps that held",
            "intercept_cpu_util": fit.intercept,
            "per_match_cpu_util": fit.per_match,
            "r_squared": fit.r_squared,
            "max_residual_cpu_util": fit.max_residual,
            "max_relative_residual": fit.max_relative_residual,
            "noisy": fit.is_noisy(),
            "leave_one_out": model::leave_one_out(&fit.points).iter().map(|(m, q)| json!({
                "matches": m,
                "predicted_over_measured": q,
            })).collect::<Vec<_>>(),
        },
        "assumed": {
            "players": ctx.players,
            "players_per_match": r.players_per_match,
            "tick_hz": ctx.tick_hz,
            "sweep_tick_hz": ctx.sweep_hz,
            "tick_scale": f64::from(ctx.tick_hz) / f64::from(ctx.sweep_hz),
            "headroom": ctx.headroom,
            "host_cores": ctx.host_cores,
            "host_cores_from": if ctx.host_cores_given { "--host-cores" } else { "this machine" },
            "reserved_cores": ctx.reserved_cores,
        },
        "plan": plan.map(|p| json!({
            "matches": p.matches,
            "budget_cpu_util": p.budget,
            "matches_per_core_by_cpu": p.per_core_by_cpu,
            "matches_per_core_held": p.per_core_held,
            "matches_per_core": p.per_core,
            "bound": p.bound.name(),
            "cpu_util_at_matches_per_core": p.cpu_at_per_core,
            "cores": p.cores,
            "usable_cores_per_host": p.usable_cores_per_host,
            "hosts": p.hosts,
            "matches_per_host": p.matches_per_host,
            "players_per_host": p.players_per_host,
        })),
        "check": check.map(|c| {
            let ratios = c.ratios();
            json!({
                "matches": c.matches,
                "predicted_cpu_util": c.predicted,
                "runs": c.runs.iter().map(|r| json!({
                    "measured_cpu_util": r.cpu,
                    "on_time_rate": r.on_time_rate,
                    "predicted_over_measured": c.ratio(r),
                    "left_out": r.excluded,
                    "load_avg_1m": r.load_avg,
                })).collect::<Vec<_>>(),
                "predicted_over_measured_median": model::median(&ratios),
                "predicted_over_measured_min": ratios.iter().copied().reduce(f64::min),
                "predicted_over_measured_max": ratios.iter().copied().reduce(f64::max),
                "notes": c.notes,
            })
        }),
        "warnings": warnings(src, ctx, plan),
    })
}

fn summary(src: &Source, ctx: &Asked, plan: Option<&Plan>, check: Option<&Check>) -> String {
    let r = &src.report;
    let fit = &src.fit;
    let mut out = String::new();
    let _ = match (ctx.players, plan) {
        (Some(n), Some(p)) => writeln!(
            out,
            "tickforge capacity: {n} players → {} match(es) of {} → {} worker core(s) on {} host(s) of {} core(s)",
            p.matches, r.players_per_match, p.cores, p.hosts, ctx.host_cores
        ),
        _ => writeln!(out, "tickforge capacity --check"),
    };
    let _ = writeln!(
        out,
        "  sweep         {}{}: {} of {} × {} at {} Hz, {} step(s), held up to {}, ended by {}; host {} cpu(s), server on core {}; {}",
        src.path.display(),
        src.written
            .as_ref()
            .map_or(String::new(), |w| format!(" (written {w})")),
        r.scenario,
        crate::summary::game_label(&r.game, &r.map),
        r.players_per_match,
        r.tick_hz,
        r.sweep.as_ref().map_or(0, |s| s.steps.len()),
        r.sweep
            .as_ref()
            .and_then(|s| s.measured_games_per_core)
            .map_or("none".into(), |m| format!("{m} matches")),
        r.sweep.as_ref().map_or("?", |s| s.limited_by.as_str()),
        r.host.cpus,
        r.host
            .server_core
            .map_or("(not pinned)".into(), |c| c.to_string()),
        match r.run.as_ref().and_then(|run| run.commit.as_deref()) {
            Some(commit) => format!("commit {}", commit.chars().take(12).collect::<String>()),
            None => "no commit recorded".into(),
        },
    );
    let _ = writeln!(
        out,
        "  fit           server cpu = {:.2}% + {:.3}% × matches of a core, over {} step(s) ({}); r² {:.4}, worst step {:.1}% of a core off{}",
        fit.intercept * 100.0,
        fit.per_match * 100.0,
        fit.points.len(),
        fit.points
            .iter()
            .map(|p| p.matches.to_string())
            .collect::<Vec<_>>()
            .join(","),
        fit.r_squared,
        fit.max_residual * 100.0,
        if src.steps.excluded.is_empty() {
            String::new()
        } else {
            format!(
                "; left out {}",
                src.steps
                    .excluded
                    .iter()
                    .map(|(m, why)| format!("{m} ({why})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    let loo = model::leave_one_out(&fit.points);
    if let Some(median) = model::median(&loo.iter().map(|l| l.1).collect::<Vec<_>>()) {
        let _ = writeln!(
            out,
            "  self-check    each inner step predicted from the others: predicted ÷ measured {}; median {median:.3}",
            loo.iter()
                .map(|(m, q)| format!("{m}: {q:.3}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(p) = plan {
        let _ = writeln!(
            out,
            "  per core      {} matches ({}): predicted {:.1}% of a core, within {:.0}% after {:.0}% headroom{}",
            p.per_core,
            match p.bound {
                model::Bound::Cpu => "bounded by the CPU".to_string(),
                model::Bound::Held => format!(
                    "bounded by the sweep: no step held more; the CPU alone would allow {}",
                    p.per_core_by_cpu
                ),
            },
            p.cpu_at_per_core * 100.0,
            p.budget * 100.0,
            ctx.headroom * 100.0,
            if ctx.tick_hz != ctx.sweep_hz {
                format!(" at {} Hz", ctx.tick_hz)
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            out,
            "  per host      {} matches, {} players: {} worker core(s) of {} ({} reserved; cores from {})",
            p.matches_per_host,
            p.players_per_host,
            p.usable_cores_per_host,
            ctx.host_cores,
            ctx.reserved_cores,
            if ctx.host_cores_given {
                "--host-cores"
            } else {
                "this machine"
            }
        );
    }
    if let Some(c) = check {
        let ratios = c.ratios();
        let figure = match model::median(&ratios) {
            Some(median) => format!(
                "predicted ÷ measured {median:.3} median ({:.3}–{:.3}), {:+.1}%",
                ratios.iter().copied().fold(f64::INFINITY, f64::min),
                ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                (median - 1.0) * 100.0
            ),
            None => "predicted ÷ measured n/a: no run's CPU counted".into(),
        };
        let measured: Vec<String> = c
            .runs
            .iter()
            .map(|r| format!("{:.1}%", r.cpu * 100.0))
            .collect();
        let _ = writeln!(
            out,
            "  check         {} matches: predicted {:.1}% of a core, measured {} ({} of {} run(s) counted): {figure}",
            c.matches,
            c.predicted * 100.0,
            measured.join(", "),
            ratios.len(),
            c.runs.len(),
        );
        let loads: Vec<f64> = c.runs.iter().filter_map(|r| r.load_avg).collect();
        if let (Some(lo), Some(hi)) = (
            loads.iter().copied().reduce(f64::min),
            loads.iter().copied().reduce(f64::max),
        ) {
            let _ = writeln!(
                out,
                "  load          1-minute load average {lo:.2}–{hi:.2} as the runs ended, on {} cpu(s): other work shares the caches and slows each tick",
                tickforge_io::cpu::allowed_cores().len()
            );
        }
        for n in &c.notes {
            let _ = writeln!(out, "  note          {n}");
        }
    }
    for w in warnings(src, ctx, plan) {
        let _ = writeln!(out, "  warning       {w}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_takes_a_fraction_or_a_percentage_below_one() {
        assert_eq!(parse_headroom("0.2"), Ok(0.2));
        assert_eq!(parse_headroom("20%"), Ok(0.2));
        assert_eq!(parse_headroom("0"), Ok(0.0));
        assert_eq!(parse_headroom("0%"), Ok(0.0));
        for bad in ["1", "100%", "-0.1", "120%", "x", "", "NaN", "inf"] {
            let e = parse_headroom(bad).unwrap_err();
            assert!(
                e.contains("from 0 to below 1") && e.contains("got"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn the_checks_figure_is_the_median_of_the_runs_whose_cpu_counts() {
        let run = |cpu, excluded| HeldRun {
            cpu,
            on_time_rate: Some(1.0),
            excluded,
            load_avg: None,
        };
        let c = Check {
            matches: 45,
            predicted: 0.45,
            runs: vec![
                run(0.4, None),
                run(1.0, Some("the core was full")),
                run(0.5, None),
            ],
            notes: Vec::new(),
        };
        assert_eq!(c.ratios(), [1.125, 0.9]);
        assert_eq!(model::median(&c.ratios()), Some(1.0125));
        assert!((c.ratio(&c.runs[1]) - 0.45).abs() < 1e-12);
    }
}
