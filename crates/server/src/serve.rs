//! `serve`: host matches until stopped. The `tickforge` binary's `serve` command, and the
//! whole of a studio's own server binary ([`crate::run`]).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::{config, ConfigFile, Host, Shutdown, WorkerStatus};
use anyhow::{Context, Result};
use clap::Args;
use tickforge_telemetry::summary;

/// Flags of `serve`. Each has the same key in the TOML config file (with `_` for `-`);
/// a flag given on the command line wins over the file.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// TOML config file with any of the keys below.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address of the game socket [default: 127.0.0.1:40000]; port 0 picks a free one.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Matches hosted from the start, with ids 1..=N; under Agones 0 unless set, as its
    /// matches come from allocations [default: 1].
    #[arg(long, value_name = "N")]
    pub matches: Option<u32>,
    /// Player slots per match [default: 10].
    #[arg(long, value_name = "N")]
    pub players_per_match: Option<u32>,
    /// Ticks per second of every match [default: 128].
    #[arg(long, value_name = "HZ")]
    pub tick_hz: Option<u32>,
    /// The game every match plays (the `[game]` table's `name`) [default: shooter].
    #[arg(long, value_name = "NAME", value_parser = crate::games::parser())]
    pub game: Option<String>,
    /// A setting of the game, as in the `[game]` table: KEY=VALUE, VALUE read as JSON when
    /// it parses (3, 0.5, true, "x"), else as a string; repeatable.
    #[arg(long = "game-set", value_name = "KEY=VALUE", value_parser = crate::games::parse_setting)]
    pub game_set: Vec<(String, serde_json::Value)>,
    /// Most microseconds before a deadline the worker stops sleeping and spins; it spins
    /// only as long as its recent wake-ups overslept, plus 10 µs [default: 100].
    #[arg(long, value_name = "US")]
    pub spin_us: Option<u64>,
    /// Seconds after start excluded from the figures [default: 0].
    #[arg(long, value_name = "S")]
    pub warmup_s: Option<f64>,
    /// Seconds measured after the warm-up [default: until stopped].
    #[arg(long, value_name = "S")]
    pub duration_s: Option<f64>,
    /// One worker pinned to this CPU: the same as --cores CPU [default: one worker, not
    /// pinned].
    #[arg(long, value_name = "CPU", conflicts_with_all = ["cores", "workers"])]
    pub core: Option<usize>,
    /// CPUs to run workers on, one pinned worker thread each with its own game socket
    /// (worker i binds the --bind port + i), e.g. 0,1 [default: one worker, not pinned].
    #[arg(
        long,
        value_name = "CPU,…",
        value_delimiter = ',',
        conflicts_with = "workers"
    )]
    pub cores: Option<Vec<usize>>,
    /// Number of workers, pinned to the first CPUs this process may use [default: one
    /// worker, not pinned].
    #[arg(long, value_name = "N")]
    pub workers: Option<u32>,
    /// Most matches one worker hosts, whatever its measured frame cost allows; POST
    /// /matches is refused past it [default: 120].
    #[arg(long, value_name = "N")]
    pub max_matches_per_worker: Option<u32>,
    /// Run the workers in the real-time FIFO class at this priority (1–99) where the host
    /// permits (root or CAP_SYS_NICE): a deadline is met when it comes, not after whatever
    /// else the scheduler picked; 0: normal scheduling [default: 0].
    #[arg(long, value_name = "P")]
    pub rt_priority: Option<u32>,
    /// A worker's matches start their ticks in this many groups spread evenly over the
    /// tick (1: all together, the most batching) [default: 4].
    #[arg(long, value_name = "N")]
    pub phase_groups: Option<u32>,
    /// Seconds a draining server (after SIGTERM or SIGINT) lets its matches with connected
    /// players finish before it exits (matches nobody plays stop at once); it says on
    /// stderr what it waits for; a second signal stops it at once, non-zero, and a third
    /// exits the process outright [default: 30].
    #[arg(long, value_name = "S")]
    pub drain_timeout_s: Option<f64>,
    /// Address of the admin HTTP server: /metrics, /healthz, /matches, POST /matches
    /// [default: off]. Off loopback it needs an admin token.
    #[arg(long, value_name = "ADDR")]
    pub admin_bind: Option<String>,
    /// File holding the admin API's bearer token (16 to 1024 visible ASCII characters):
    /// every route but /healthz and /metrics then needs `Authorization: Bearer <token>`
    /// [default: the TICKFORGE_ADMIN_TOKEN environment variable; neither: no check, on a
    /// loopback --admin-bind only]. Never logged.
    #[arg(long, value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// /healthz and /metrics need the admin token too (for probes and scrapers that send
    /// it).
    #[arg(long)]
    pub admin_auth_probes: bool,
    /// Seconds after which a match created with POST /matches that no player has joined
    /// is removed, without a result [default: 60].
    #[arg(long, value_name = "S")]
    pub unjoined_match_ttl_s: Option<f64>,
    /// Protocol id, decimal or hex with 0x (0x7469636b666f7267); clients with another are
    /// ignored [default: 8388345093885489767].
    #[arg(long, value_name = "ID", value_parser = crate::config::parse_protocol_id)]
    pub protocol_id: Option<u64>,
    /// Address clients reach this server at, as connect tokens name it [default: the bound
    /// address].
    #[arg(long, value_name = "ADDR")]
    pub public_addr: Option<String>,
    /// File holding the private key that connect tokens are sealed with, 64 hex digits
    /// [default: the TICKFORGE_PRIVATE_KEY environment variable]. Never logged.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Connection requests per second one IP may make before they are dropped unopened
    /// [default: 20].
    #[arg(long, value_name = "N")]
    pub requests_per_second_per_ip: Option<u32>,
    /// File each finished match's result line is appended to and fsynced; `none`: no
    /// results file [default: tickforge-results.log].
    #[arg(long, value_name = "FILE")]
    pub results_file: Option<PathBuf>,
    /// Directory where every finished match's action file (all its inputs) is written,
    /// for `tickforge replay` [default: not recorded].
    #[arg(long, value_name = "DIR")]
    pub record_dir: Option<PathBuf>,
    /// Talk to the Agones SDK sidecar over its REST gateway (127.0.0.1:AGONES_SDK_HTTP_PORT,
    /// default 9358): Ready once every worker runs, health pings while every worker's loop
    /// advances, the `rooms` counter kept to the matches hosted and the capacity left,
    /// allocations taken as matches, Shutdown after the drain; see docs/agones.md
    /// [default: on when AGONES_SDK_HTTP_PORT or AGONES_SDK_GRPC_PORT is set, unless the
    /// config file says `agones = false`].
    #[arg(long)]
    pub agones: bool,
    /// Seconds between Agones health pings (at most the GameServer's
    /// spec.health.periodSeconds) [default: 5].
    #[arg(long, value_name = "S")]
    pub agones_health_period_s: Option<f64>,
    /// A budget in milliseconds per match tick for a telemetry category (or `frame`, the
    /// whole frame), as the `[budgets]` table's `CATEGORY_ms`; a tick over it counts a
    /// violation for its match and category; repeatable [default: none; frame: the match
    /// budget].
    #[arg(long, value_name = "CATEGORY=MS", value_parser = crate::config::parse_budget_flag)]
    pub budget: Vec<(String, f64)>,
    /// With --duration-s: keep serving this many seconds after the window, then exit
    /// [default: 0]. SIGINT or SIGTERM drains the server at any time (see
    /// --drain-timeout-s).
    #[arg(long, value_name = "S", default_value_t = 0.0)]
    pub linger_s: f64,
    /// Write the report of the measured window to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Print the report as JSON on standard output instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// No status lines while running.
    #[arg(long)]
    pub quiet: bool,
    /// After the warm-up, sample the process for this many seconds and write a flame graph
    /// SVG of the workers; the server goes on serving [default: no profile].
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub profile_s: Option<f64>,
    /// The flame graph's file, with --profile-s [default:
    /// tickforge-profile-<run id>.svg in the current directory].
    #[arg(long, value_name = "FILE")]
    pub profile_out: Option<PathBuf>,
}

impl ServeArgs {
    fn flags(&self) -> ConfigFile {
        ConfigFile {
            bind: self.bind.clone(),
            matches: self.matches,
            players_per_match: self.players_per_match,
            tick_hz: self.tick_hz,
            spin_us: self.spin_us,
            rt_priority: self.rt_priority,
            warmup_s: self.warmup_s,
            duration_s: self.duration_s,
            core: self.core,
            cores: self.cores.clone(),
            workers: self.workers,
            max_matches_per_worker: self.max_matches_per_worker,
            phase_groups: self.phase_groups,
            drain_timeout_s: self.drain_timeout_s,
            admin_bind: self.admin_bind.clone(),
            admin_token_file: self.admin_token_file.clone(),
            admin_auth_probes: self.admin_auth_probes.then_some(true),
            unjoined_match_ttl_s: self.unjoined_match_ttl_s,
            protocol_id: self.protocol_id,
            public_addr: self.public_addr.clone(),
            key_file: self.key_file.clone(),
            requests_per_second_per_ip: self.requests_per_second_per_ip,
            results_file: self.results_file.clone(),
            record_dir: self.record_dir.clone(),
            agones: self.agones.then_some(true),
            agones_health_period_s: self.agones_health_period_s,
            game: self.game_table(),
            budgets: (!self.budget.is_empty()).then(|| self.budget.iter().cloned().collect()),
        }
    }

    /// The `[game]` keys the flags set: the name, the shooter's flags, and `--game-set`.
    fn game_table(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        use serde_json::Value;
        let mut t = serde_json::Map::new();
        let mut put = |key: &str, v: Option<Value>| {
            if let Some(v) = v {
                t.insert(key.to_string(), v);
            }
        };
        put("name", self.game.clone().map(Value::from));
        for (k, v) in &self.game_set {
            t.insert(k.clone(), v.clone());
        }
        (!t.is_empty()).then_some(t)
    }
}

/// The game and its map, if its settings name one: `shooter on arena`.
fn game_label(game: &config::GameChoice) -> String {
    let name = crate::games::find(game.name.as_deref()).map_or("?", |g| g.name());
    match game.table.get("map").and_then(|m| m.as_str()) {
        Some(map) => format!("{name} on {map}"),
        None => name.to_string(),
    }
}

/// Runs `serve` with `args` until the server stops: checks the configuration, starts the
/// workers and the admin API, drains on SIGTERM or SIGINT, and prints the report. The games
/// it may host must have been registered ([`crate::games::register`]).
pub fn run(args: ServeArgs) -> Result<()> {
    let file = match &args.config {
        Some(path) => ConfigFile::load(path)?,
        None => ConfigFile::default(),
    };
    let file = file.overlay(args.flags());
    if let Some(warning) = (file.key_file.as_deref()).and_then(config::key_file_warning) {
        eprintln!("tickforge serve: warning: {warning}");
    }
    if let Some(warning) = (file.admin_token_file.as_deref()).and_then(config::token_file_warning) {
        eprintln!("tickforge serve: warning: {warning}");
    }
    let config = file.resolve()?;
    if !(args.linger_s.is_finite() && (0.0..=1e6).contains(&args.linger_s)) {
        anyhow::bail!(
            "--linger-s: expected seconds from 0 to 1000000, got {}",
            args.linger_s
        );
    }
    let profile = crate::profile::prepare(args.profile_s, args.profile_out.as_deref())?;
    let shutdown = Shutdown::new();
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The first signal drains; a second stops the workers at once, and `wait_with`
        // returns what it abandoned within a second; a third exits the process outright,
        // whatever it is waiting for.
        let shutdown = shutdown.clone();
        let handler = move || {
            if shutdown.signal() >= 3 {
                const LINE: &[u8] = b"tickforge serve: a third signal: exiting now\n";
                // SAFETY: write(2) and _exit(2) are async-signal-safe; LINE outlives the
                // call.
                #[cfg(unix)]
                unsafe {
                    libc::write(2, LINE.as_ptr().cast(), LINE.len());
                    libc::_exit(1);
                }
                // Windows runs a console handler on a thread of its own, not inside
                // another's code, so plain std calls are safe there.
                #[cfg(not(unix))]
                {
                    use std::io::Write as _;
                    let _ = std::io::stderr().write_all(LINE);
                    std::process::exit(1);
                }
            }
        };
        // SAFETY: the handler does only atomic operations, write(2) and _exit(2), which
        // are async-signal-safe.
        unsafe { signal_hook::low_level::register(signal, handler) }
            .context("installing signal handlers")?;
    }
    let quiet = args.quiet;
    let linger = config
        .duration
        .map(|_| Duration::from_secs_f64(args.linger_s));
    let status = Arc::new(move |s: &WorkerStatus| {
        if !quiet && s.elapsed.as_secs().is_multiple_of(5) {
            eprintln!(
                "  {:>5.0} s  worker {}  {} matches  {} connected  {} ticks run  {} late",
                s.elapsed.as_secs_f64(),
                s.worker,
                s.matches,
                s.connected,
                s.ticks_run,
                s.late
            );
        }
    });
    let host = Host::start(&config, shutdown, linger, status)?;
    // The first line on standard output is the workers' addresses (`bench` reads it), then
    // where each startup match is and the admin address; with --json, standard output
    // carries the report alone, so these lines go to stderr.
    let addrs: Vec<String> = host.addrs().iter().map(|a| a.to_string()).collect();
    let mut lines = vec![format!("listening {}", addrs.join(" "))];
    let mut placed: Vec<(u32, usize)> = (host.plan().workers.iter().enumerate())
        .flat_map(|(w, worker)| worker.matches.iter().map(move |m| (m.0, w)))
        .collect();
    placed.sort_unstable();
    for (m, w) in placed {
        lines.push(format!("placement match={m} worker={w} addr={}", addrs[w]));
    }
    if let Some(admin) = host.admin_addr() {
        lines.push(format!("admin {admin}"));
    }
    if let Some(agones) = &config.agones {
        lines.push(format!("agones {}", agones.sdk));
    }
    for line in &lines {
        if args.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    std::io::stdout().flush().ok();
    let plan = host.plan();
    eprintln!(
        "tickforge serve: {} match(es) of {} × {} players at {} Hz; cores {}; {} NUMA node(s)",
        config.matches,
        game_label(&config.game),
        config.players_per_match,
        config.tick_hz,
        config.cores.as_ref().map_or("unpinned".to_string(), |c| {
            c.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        }),
        plan.nodes,
    );
    eprintln!(
        "  run {}: on every result line and action file name",
        host.run_id()
    );
    for (w, worker) in plan.workers.iter().enumerate() {
        let ids: Vec<String> = worker.matches.iter().map(|m| m.to_string()).collect();
        eprintln!(
            "  worker {w} on {} (node {}) at {}: matches {}",
            worker
                .core
                .map_or("any CPU".to_string(), |c| format!("CPU {c}")),
            worker.node,
            addrs[w],
            if ids.is_empty() {
                "none".to_string()
            } else {
                ids.join(",")
            },
        );
    }
    let profile = match profile {
        Some(p) => Some(p.start(config.warmup, host.run_id())?),
        None => None,
    };
    let report = host.wait_with(&mut |event| eprintln!("tickforge serve: {event}"));
    if let Some(profile) = profile {
        profile.finish();
    }
    let report = report?;
    if let Some(path) = &args.report {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", summary::server(&report));
    }
    if report.results_unwritten > 0 {
        // The lines themselves were printed to stderr when the workers gave up on them,
        // except those held by the writer of a disk that hung (it said so, with the count).
        std::io::stdout().flush().ok();
        eprintln!(
            "tickforge serve: {} result line(s) could not be written to {}",
            report.results_unwritten,
            config
                .results_file
                .as_ref()
                .map_or_else(|| "the results file".into(), |p| p.display().to_string())
        );
        std::process::exit(1);
    }
    Ok(())
}
