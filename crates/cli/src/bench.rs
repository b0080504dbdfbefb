//! `tickforge bench`: a server and its bots as separate processes on 127.0.0.1, pinned to
//! different cores where the host has them, merged into one report.
//!
//! `--game` picks what the matches play. The shooter (the default) runs every scenario.
//! Capture the flag (`ctf`) runs `smoke` and `many-matches` (with `--sweep` too), 10
//! players a match unless `--players` says otherwise: its server gets `--game ctf` and
//! settings that keep a match going for the whole run (see [`CTF_SETTINGS`]), its bots
//! `--game ctf`, and neither gets the shooter's flags (map, round, health, posing, fog of
//! war, lag compensation). `crowd` and `saturation` are the shooter's (a crowd on a 2 km
//! map) and are refused for ctf, as are the shooter-only flags `--pose-every`,
//! `--fow-every` and `--max-rewind-ms`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use tickforge_bots::behaviour::BotMix;
use tickforge_game::BuiltinMap;
use tickforge_server::io_floor::FloorRun;
use tickforge_telemetry::match_budget_ms;
use tickforge_telemetry::report::{BotsReport, GamesPerCore, Host, Report, ServerReport};

use crate::summary;

/// The `[game]` settings a ctf bench's server gets, as `--game-set KEY=VALUE`: the longest
/// time limit and the most captures the game takes, so a match lasts the run (up to an
/// hour of warm-up and measuring) instead of ending, and starting over, every few minutes.
pub const CTF_SETTINGS: [&str; 2] = ["time_limit_s=3600", "captures=255"];

/// The games `bench` knows how to drive: what differs on the server's and the bots'
/// command lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BenchGame {
    /// The reference shooter: maps, rounds, posing, fog of war, lag compensation.
    Shooter,
    /// Capture the flag (`tickforge-ctf`).
    Ctf,
}

impl BenchGame {
    /// The game `--game` names; refuses the scenarios and flags bench cannot run it with.
    fn of(args: &BenchArgs) -> Result<BenchGame> {
        let game = match args.game.as_str() {
            "shooter" => BenchGame::Shooter,
            "ctf" => BenchGame::Ctf,
            other => bail!("--game {other}: bench drives the shooter and ctf only"),
        };
        if game == BenchGame::Ctf {
            if matches!(
                args.scenario,
                Scenario::Crowd | Scenario::Saturation | Scenario::Replay
            ) {
                bail!(
                    "--scenario {}: the shooter's (a crowd on its 2 km map); --game ctf runs \
                     smoke and many-matches (with --sweep for the games-per-core curve)",
                    args.scenario.name()
                );
            }
            for (flag, given) in [
                ("--pose-every", args.pose_every.is_some()),
                ("--fow-every", args.fow_every.is_some()),
                ("--rate-halves-every-m", args.rate_halves_every_m.is_some()),
                (
                    "--rate-slowest-every-ticks",
                    args.rate_slowest_every_ticks.is_some(),
                ),
                ("--max-rewind-ms", args.max_rewind_ms.is_some()),
                ("--replay", args.replay.is_some()),
            ] {
                if given {
                    bail!("{flag}: a setting of the shooter; --game ctf has none");
                }
            }
        }
        Ok(game)
    }
}

/// The bench scenarios (DESIGN.md, "Scenarios").
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// 1 match × 10 bots for a few seconds.
    Smoke,
    /// M matches × 10 bots on one worker core (set M with --matches; default 10).
    ManyMatches,
    /// The Iris stress test: 1 match × 100 bots on flat2km, spawned on an 800 m circle, run
    /// to the centre (about 100 s) and fight there; 110 s measured after 2 s of warm-up
    /// (shorten with --duration-s). The shooter only.
    Crowd,
    /// The Quake paper's saturation curve: one match on flat2km with 1, 2, 4 … 128 bots
    /// (set the steps with --sweep-steps), 5 s measured each; response rate and response
    /// time at the clients against players. The shooter only.
    Saturation,
    /// The Quake paper's action-file bots: 1 match × 10 bots on arena, each replaying a
    /// recorded player's inputs (`--replay DIR`, default `tests/actions` in the current
    /// directory). The shooter only.
    Replay,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Smoke => "smoke",
            Scenario::ManyMatches => "many-matches",
            Scenario::Crowd => "crowd",
            Scenario::Saturation => "saturation",
            Scenario::Replay => "replay",
        }
    }

    /// The map the matches are played on.
    fn map(self) -> BuiltinMap {
        match self {
            Scenario::Smoke | Scenario::ManyMatches | Scenario::Replay => BuiltinMap::Arena,
            Scenario::Crowd | Scenario::Saturation => BuiltinMap::Flat2km,
        }
    }

    /// What the bots do.
    fn mix(self) -> BotMix {
        match self {
            Scenario::Smoke | Scenario::ManyMatches | Scenario::Replay => BotMix::Arena,
            Scenario::Crowd | Scenario::Saturation => BotMix::Crowd,
        }
    }

    /// Seconds of each round's combat phase, where the server's default will not do.
    fn round_s(self) -> Option<f64> {
        match self {
            Scenario::Smoke | Scenario::ManyMatches | Scenario::Replay => None,
            // The run-in alone takes ~100 s, the server's default round; a round that
            // timed out would put everyone back on the ring mid-fight.
            Scenario::Crowd | Scenario::Saturation => Some(600.0),
        }
    }

    /// Players' health, where the server's default will not do.
    fn max_health_hp(self) -> Option<u16> {
        match self {
            Scenario::Smoke | Scenario::ManyMatches | Scenario::Replay => None,
            // 100 times the default: the crowd meets in the centre and keeps fighting, all
            // in view (the Iris test), instead of wiping out in seconds and running in
            // again from the ring.
            Scenario::Crowd | Scenario::Saturation => Some(10_000),
        }
    }

    /// Matches, players per match, warm-up and measured seconds.
    fn defaults(self) -> (u32, u32, f64, f64) {
        match self {
            Scenario::Smoke | Scenario::Replay => (1, 10, 1.0, 5.0),
            Scenario::ManyMatches => (10, 10, 2.0, 10.0),
            // 800 m at 8.13 m/s is ~98 s of running, then a fight at the centre.
            Scenario::Crowd => (1, 100, 2.0, 110.0),
            // Players are the sweep's steps; 128 is the last.
            Scenario::Saturation => (1, 128, 2.0, 5.0),
        }
    }
}

/// Flags of `bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// What to run.
    #[arg(long, value_enum, default_value_t = Scenario::Smoke)]
    pub scenario: Scenario,
    /// The game the matches play. ctf runs smoke and many-matches (--sweep too) and takes
    /// none of the shooter's flags (--pose-every, --fow-every, --max-rewind-ms).
    #[arg(long, value_name = "NAME", default_value = "shooter", value_parser = crate::games::parser())]
    pub game: String,
    /// Matches [default: the scenario's].
    #[arg(long, value_name = "N")]
    pub matches: Option<u32>,
    /// Players (bots) per match [default: the scenario's].
    #[arg(long, value_name = "N")]
    pub players: Option<u32>,
    /// Ticks per second.
    #[arg(long, value_name = "HZ", default_value_t = 128)]
    pub tick_hz: u32,
    /// Seconds excluded before measuring [default: the scenario's].
    #[arg(long, value_name = "S")]
    pub warmup_s: Option<f64>,
    /// Seconds measured [default: the scenario's].
    #[arg(long, value_name = "S")]
    pub duration_s: Option<f64>,
    /// Write the full report to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the report as one self-contained HTML page (charts, verdicts, the raw JSON)
    /// that opens offline.
    #[arg(long, value_name = "OUT")]
    pub html: Option<PathBuf>,
    /// Send N random datagrams at the server during the measured window (loopback only),
    /// some shaped like connection requests and packets: the clients must not notice.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub flood: u64,
    /// Round trip the bots' network conditioner adds, milliseconds (half each way).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub rtt_ms: u32,
    /// Jitter of each way's delay, milliseconds either way.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub jitter_ms: u32,
    /// Pose players every Nth tick on the server (and in the aimers' views) [default: 4].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=32))]
    pub pose_every: Option<u8>,
    /// Trace the fog of war's enemy pairs every Nth tick on the server [default: 4].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=16))]
    pub fow_every: Option<u8>,
    /// The server sends a player half as often for each further this many metres from a
    /// client, down to one tick in `--rate-slowest-every-ticks` [default: 50].
    #[arg(long, value_name = "M")]
    pub rate_halves_every_m: Option<f64>,
    /// The rate by distance's slowest, one tick in N (1, 2, 4, 8 or 16) [default: 1, off:
    /// every relevant player every tick, room allowing].
    #[arg(long, value_name = "N")]
    pub rate_slowest_every_ticks: Option<u32>,
    /// Run the server's worker and the bots in the real-time FIFO class at this priority
    /// where the host permits (root or CAP_SYS_NICE), so ticks start when due on a busy
    /// machine; 0: normal scheduling. The report says what each side got.
    #[arg(long, value_name = "P", default_value_t = 10, value_parser = clap::value_parser!(u8).range(0..=99))]
    pub rt_priority: u8,
    /// Microseconds the server's worker spins on the clock before each deadline instead of
    /// sleeping [default: the server's, 100].
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(0..=2000))]
    pub spin_us: Option<u64>,
    /// The server worker's phase groups: its matches tick in this many groups spread over
    /// the tick [default: the server's, 4].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub phase_groups: Option<u32>,
    /// Milliseconds the server's lag compensation rewinds at most [default: 200, or what
    /// the bots' round trip, jitter and view delay need when that is more].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub max_rewind_ms: Option<u32>,
    /// Raise the number of matches step by step (many-matches) until the server no
    /// longer holds its ticks or the bots saturate, then try the counts between the last
    /// that held and that one, halving the gap down to 5, and report each step: the
    /// games-per-core curve. Each step runs --warmup-s + --duration-s.
    #[arg(long)]
    pub sweep: bool,
    /// The counts a sweep tries, in order: matches with --sweep
    /// [default: 1,5,10,20,30,40,50,60,70,80,100,120], players in the one match of
    /// --scenario saturation [default: 1,2,4,8,16,32,64,128].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub sweep_steps: Vec<u32>,
    /// With --sweep: run every step of the list, even past the first that does not hold
    /// (measured games per core and what limited the sweep are still read up to that one).
    #[arg(long)]
    pub sweep_every_step: bool,
    /// Run the bench N times over and report each key figure's least, median and most
    /// over the runs (`repeats` in the JSON, whose spread `compare` judges changes
    /// against); the rest of the report is the run with the median match frame mean.
    /// Not with --sweep or --scenario saturation.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Bots replay recorded matches instead of their behaviour: an action file or a
    /// directory of `*.actions` (see `bots --replay`) [default with --scenario replay:
    /// tests/actions in the current directory].
    #[arg(long, value_name = "DIR")]
    pub replay: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Passed to the server: a flame graph of its workers over this many seconds after
    /// the warm-up, written to the current directory as tickforge-profile-<run id>.svg (one
    /// per server of a sweep) [default: no profile].
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub profile_s: Option<f64>,
    /// Passed to the server: the flame graph's file, with --profile-s.
    #[arg(long, value_name = "FILE")]
    pub profile_out: Option<PathBuf>,
    #[command(flatten)]
    pub check: checks::CheckArgs,
}

pub mod checks;
pub mod repeat;
mod sweep;
mod verdict;

/// The bytes of one input datagram's payload and one snapshot's of `game` with `players`
/// players: an input is the kind, sequence, view tick and fraction, and the game's input;
/// a snapshot is the full state of every entity shown (delta replication sends less, so
/// the floor errs high on the AEAD's share).
fn tick_datagram_bytes(game: BenchGame, players: usize) -> (usize, usize) {
    use tickforge_api::Game as _;
    let (input, body) = match game {
        BenchGame::Shooter => (
            tickforge_shooter::cmd::CMD_BYTES,
            tickforge_shooter::HEADER_BYTES + players * tickforge_shooter::ENTITY_BYTES,
        ),
        // Every player sees both flags too.
        BenchGame::Ctf => (
            tickforge_ctf::INPUT_BYTES,
            tickforge_ctf::Ctf::full_state_bytes(players + 2),
        ),
    };
    (
        1 + 4 + 4 + 1 + input,
        tickforge_proto::msg::SNAPSHOT_HEADER_BYTES + body,
    )
}

/// Measures the I/O floor of `plan`'s match ticks on the server's core, as a run's before
/// and after (`when`, for the spinner: its 281 rounds take 2.2 s at 128 Hz, 9.4 s at
/// 30 Hz, however many matches).
fn measure_io_floor(
    args: &BenchArgs,
    plan: &Plan,
    when: &str,
) -> Result<tickforge_server::io_floor::IoFloor> {
    let spinner = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new_spinner()
    };
    spinner.set_message(format!("measuring the I/O floor {when}"));
    spinner.enable_steady_tick(Duration::from_millis(100));
    let tick_hz = args.tick_hz;
    // The datagrams of a tick: an input from every player in, a snapshot to every player
    // out.
    let players = plan.players as usize;
    let (input_bytes, snapshot_bytes) = tick_datagram_bytes(plan.game, players);
    // Paced at the tick, as a worker is: 256 rounds, two seconds at 128 Hz.
    let period = Duration::from_nanos(1_000_000_000 / u64::from(tick_hz));
    // Shaped as the run: its matches ticked in turn on the server's core, each with its
    // own socket, and the players on the bots' core. Shaped as one match that sleeps
    // between ticks, the players sending from the server's core (as it was), it read about
    // 10% higher at 80 matches, and spread more: 1.94-2.57 against 1.73-1.96 µs a
    // datagram, six measurements each.
    let run = FloorRun {
        players,
        matches: plan.matches as usize,
        input_bytes,
        snapshot_bytes,
        rounds: 256,
        period,
        core: plan.server_core,
        players_core: plan.bots_core,
    };
    let floor = std::thread::spawn(move || tickforge_server::io_floor::measure(run))
        .join()
        .map_err(|_| anyhow::anyhow!("the I/O floor measurement panicked"))?
        .context("measuring the I/O floor");
    spinner.finish_and_clear();
    if let Ok(f) = &floor {
        if f.short_ticks > 0 {
            // The players' thread was held off its core past the wait: those ticks read
            // fewer datagrams, and the floor is that much too low.
            eprintln!(
                "warning: the I/O floor {when}: {} of its ticks found fewer inputs than players",
                f.short_ticks
            );
        }
    }
    floor
}

/// The max rewind the server is given: `--max-rewind-ms`, or else enough for the bots'
/// views (their round trip, twice the jitter, their view delay and two ticks of waiting
/// for a tick), and never under the 200 ms default or over the 1 s cap. The aimers' view
/// delay is at least the posing interval plus a tick (`SessionConfig::min_delay_ticks`):
/// at 30 Hz, posing every 4th tick, that alone is 167 ms.
fn max_rewind_ms(args: &BenchArgs) -> u32 {
    args.max_rewind_ms.unwrap_or_else(|| {
        let tick_ms = 1000.0 / f64::from(args.tick_hz.max(1));
        let pose_every = args.pose_every.unwrap_or(
            tickforge_game::history::HistoryConfig::default()
                .pose_every
                .get(),
        );
        let interp_ms = (tickforge_bots::DEFAULT_INTERP_DELAY.as_secs_f64() * 1e3)
            .max(f64::from(pose_every + 1) * tick_ms);
        let need =
            f64::from(args.rtt_ms) + 2.0 * f64::from(args.jitter_ms) + interp_ms + 2.0 * tick_ms;
        (need.ceil() as u32).clamp(200, 1000)
    })
}

pub fn run(mut args: BenchArgs) -> Result<()> {
    if let Some(path) = &args.check.check_only {
        return checks::check_only(path, args.check.checks);
    }
    let game = BenchGame::of(&args)?;
    args.replay = replay_files(&args)?;
    let (d_matches, d_players, d_warmup, d_duration) = args.scenario.defaults();
    let matches = args.matches.unwrap_or(d_matches);
    let players = args.players.unwrap_or(d_players);
    let warmup_s = args.warmup_s.unwrap_or(d_warmup);
    let duration_s = args.duration_s.unwrap_or(d_duration);
    if !(duration_s.is_finite() && duration_s > 0.0 && warmup_s.is_finite() && warmup_s >= 0.0) {
        bail!("--duration-s must be more than 0 and --warmup-s 0 or more");
    }

    if !args.sweep_steps.is_empty() && !args.sweep && args.scenario != Scenario::Saturation {
        bail!("--sweep-steps needs --sweep (or --scenario saturation, which sweeps players)");
    }
    if args.repeat > 1 && (args.sweep || args.scenario == Scenario::Saturation) {
        bail!(
            "--repeat: a sweep's steps are runs of their own; repeat smoke, many-matches or crowd"
        );
    }
    // A page that cannot be written says so now, not after the run.
    if let Some(dir) = args.html.as_deref().and_then(Path::parent) {
        if !dir.as_os_str().is_empty() && !dir.is_dir() {
            bail!(
                "--html {}: no directory {}",
                args.html.as_ref().unwrap().display(),
                dir.display()
            );
        }
    }
    if args.sweep_every_step && !args.sweep {
        bail!("--sweep-every-step needs --sweep (saturation runs every step already)");
    }
    let cores = tickforge_io::cpu::allowed_cores();
    let (server_core, bots_core) = match cores.as_slice() {
        // A development build (the portable I/O path) pins nothing.
        [a, b, ..] if tickforge_io::LINUX_PATH => (Some(*a), Some(*b)),
        _ => (None, None),
    };
    let plan = Plan {
        game,
        matches,
        players,
        warmup_s,
        duration_s,
        server_core,
        bots_core,
    };
    let dir = scratch_dir()?;
    let exe = std::env::current_exe().context("finding the tickforge binary")?;
    let run = crate::report_html::run_info::gather(&exe, &dir);
    let result = if args.scenario == Scenario::Saturation {
        sweep::run(&args, &dir, &plan, sweep::Axis::Players)
    } else if args.sweep {
        sweep::run(&args, &dir, &plan, sweep::Axis::Matches)
    } else if args.repeat > 1 {
        repeat::run(&args, &dir, &plan)
    } else {
        run_in(&args, &dir, &plan)
    };
    let _ = std::fs::remove_dir_all(&dir);
    let mut report = result?;
    report.host = Host {
        cpus: cores.len() as u32,
        server_core: server_core.map(|c| c as u32),
        bots_core: bots_core.map(|c| c as u32),
    };
    report.run = Some(run);
    let checks = (args.check.checks != checks::Mode::Off).then(|| checks::evaluate(&report));
    if let Some(path) = &args.json {
        let written = checks::written(&report, checks.as_deref())?;
        std::fs::write(path, serde_json::to_string_pretty(&written)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    print!("{}", summary::bench(&report));
    if let Some(repeats) = &report.repeats {
        print!("{}", repeat::summary(repeats));
    }
    if let Some(checks) = &checks {
        print!("{}", checks::summary(checks));
    }
    if let Some(path) = &args.html {
        crate::report_html::write(&report, path)?;
        println!("  wrote         {}", path.display());
    }
    match &checks {
        Some(checks) => checks::verdict(checks, args.check.checks),
        None => Ok(()),
    }
}

/// What a bench run does, resolved from the scenario and the flags.
struct Plan {
    game: BenchGame,
    matches: u32,
    players: u32,
    warmup_s: f64,
    duration_s: f64,
    server_core: Option<usize>,
    bots_core: Option<usize>,
}

fn run_in(args: &BenchArgs, dir: &Path, plan: &Plan) -> Result<Report> {
    let &Plan {
        game,
        matches,
        players,
        warmup_s,
        duration_s,
        server_core,
        bots_core,
    } = plan;
    let before = measure_io_floor(args, plan, "before the run")?;
    let exe = std::env::current_exe().context("finding the tickforge binary")?;
    let server_report = dir.join("server.json");
    let bots_report = dir.join("bots.json");
    let server_log = dir.join("server.log");
    let bots_log = dir.join("bots.log");
    // A fresh key per run: the bots mint their tokens with it, as a matchmaker would.
    let key = dir.join("private.key");
    crate::token_cmd::write_new_key(&key)?;

    let mut server_cmd = Command::new(&exe);
    server_cmd
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--quiet",
            "--linger-s",
            SERVER_LINGER_S,
        ])
        .args([
            "--matches",
            &matches.to_string(),
            "--players-per-match",
            &players.to_string(),
        ])
        .args(["--tick-hz", &args.tick_hz.to_string()])
        .args([
            "--warmup-s",
            &warmup_s.to_string(),
            "--duration-s",
            &duration_s.to_string(),
        ])
        .arg("--report")
        .arg(&server_report)
        .arg("--key-file")
        .arg(&key)
        .args(serve_game_args(args, game))
        .args(args.phase_groups.map(|n| format!("--phase-groups={n}")))
        .arg(format!("--rt-priority={}", rt_priority(args)))
        .args(args.spin_us.map(|us| format!("--spin-us={us}")))
        .args(args.profile_s.map(|s| format!("--profile-s={s}")))
        .args(
            args.profile_out
                .iter()
                .flat_map(|f| [std::ffi::OsStr::new("--profile-out"), f.as_os_str()]),
        )
        .arg("--results-file")
        .arg(dir.join("results.log"))
        // The bench stops the server with SIGTERM once its bots are done: no drain.
        .args(["--drain-timeout-s", "0"]);
    if let Some(c) = server_core {
        server_cmd.args(["--core", &c.to_string()]);
    }
    let mut server = Guard(
        server_cmd
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&server_log)?)
            .spawn()
            .context("starting the server")?,
    );
    let mut lines = BufReader::new(server.0.stdout.take().expect("piped stdout")).lines();
    let addrs: Vec<String> = match lines.next() {
        Some(Ok(line)) if line.starts_with("listening ") => line["listening ".len()..]
            .split_whitespace()
            .map(str::to_string)
            .collect(),
        _ => bail!("the server did not start: {}", read_log(&server_log)),
    };
    let addr = addrs.first().cloned().unwrap_or_default();
    // Where each match is: the bots of match m go to the worker the server placed it on
    // (by NUMA node on a multi-node host, so not simply round robin).
    let mut placed = vec![String::new(); matches as usize];
    for _ in 0..matches {
        let line = match lines.next() {
            Some(Ok(line)) => line,
            _ => bail!(
                "the server did not say where its matches are: {}",
                read_log(&server_log)
            ),
        };
        match parse_placement(&line) {
            Some((m, a)) if (1..=matches).contains(&m) => placed[m as usize - 1] = a.to_string(),
            _ => bail!("unexpected line from the server: {line:?}"),
        }
    }

    let mut bots_cmd = Command::new(&exe);
    bots_cmd
        .arg("bots")
        .args(placed.iter().flat_map(|a| ["--server", a.as_str()]))
        .arg("--progress-lines")
        .args([
            "--matches",
            &matches.to_string(),
            "--bots-per-match",
            &players.to_string(),
        ])
        .args(["--tick-hz", &args.tick_hz.to_string()])
        .args([
            "--warmup-s",
            &warmup_s.to_string(),
            "--duration-s",
            &duration_s.to_string(),
        ])
        .args(bots_game_args(args, game))
        .args(["--rtt-ms", &args.rtt_ms.to_string()])
        .args(["--jitter-ms", &args.jitter_ms.to_string()])
        .args((rt_priority(args) > 0).then(|| format!("--rt-priority={}", rt_priority(args))))
        .arg("--report")
        .arg(&bots_report)
        .arg("--key-file")
        .arg(&key);
    if let Some(c) = bots_core {
        bots_cmd.args(["--core", &c.to_string()]);
    }
    let flood = (args.flood > 0).then(|| {
        let server: std::net::SocketAddr = addr.parse().expect("the server printed its address");
        let (n, delay, over) = (
            args.flood,
            Duration::from_secs_f64(warmup_s),
            Duration::from_secs_f64(duration_s),
        );
        std::thread::spawn(move || crate::flood::run(server, n, delay, over))
    });
    let mut bots = Guard(
        bots_cmd
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&bots_log)?)
            .spawn()
            .context("starting the bots")?,
    );

    let total = warmup_s + duration_s;
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new((total * 10.0) as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix} {bar:30} {elapsed}/{msg}")
            .expect("constant template"),
    );
    bar.set_prefix(format!("{} {}×{}", args.scenario.name(), matches, players));
    bar.set_message(format!("{total:.0}s starting"));
    let progress = BufReader::new(bots.0.stdout.take().expect("piped stdout"));
    for line in progress.lines() {
        let line = line.context("reading bot progress")?;
        if let Some(p) = parse_progress(&line) {
            bar.set_position((p.0 * 10.0) as u64);
            bar.set_message(format!(
                "{total:.0}s  {}/{} connected  {:.1} snapshots/s each",
                p.1, p.2, p.3
            ));
        }
    }
    let status = bots.0.wait().context("waiting for the bots")?;
    bar.finish_and_clear();
    if !status.success() {
        bail!("the bots failed ({status}): {}", read_log(&bots_log));
    }
    server.terminate(Duration::from_secs(10))?;
    if !server_report.exists() {
        bail!("the server wrote no report: {}", read_log(&server_log));
    }
    let s: ServerReport = serde_json::from_str(&std::fs::read_to_string(&server_report)?)
        .context("reading the server's report")?;
    let b: BotsReport = serde_json::from_str(&std::fs::read_to_string(&bots_report)?)
        .context("reading the bots' report")?;
    // Again on the core the server has left: the floor the run divides by is the mean
    // of the two, as the host's load moves while a run lasts.
    let after = measure_io_floor(args, plan, "after the run")?;
    let mut report = merge(args.scenario.name(), s, b, warmup_s);
    let floor_ms = (before.per_tick_ms + after.per_tick_ms) / 2.0;
    report.io_floor_ms = Some(floor_ms);
    report.io_floor_per_datagram_us = Some((before.per_datagram_us + after.per_datagram_us) / 2.0);
    report.io_floor_before_after_us = Some([before.per_datagram_us, after.per_datagram_us]);
    report.io_floor_short_ticks = Some([before.short_ticks, after.short_ticks]);
    report.frame_to_io_floor = report
        .match_frame_ms
        .map(|f| f.mean / floor_ms)
        .filter(|r| r.is_finite());
    if let Some(handle) = flood {
        report.flood = Some(
            handle
                .join()
                .map_err(|_| anyhow::anyhow!("the flood thread panicked"))??,
        );
    }
    Ok(report)
}

/// The game's flags of `serve`: for the shooter the map and rounds of the scenario, its
/// posing, fog of war and lag compensation; for ctf the game and [`CTF_SETTINGS`] alone
/// (its `[game]` table refuses the shooter's keys).
fn serve_game_args(args: &BenchArgs, game: BenchGame) -> Vec<String> {
    match game {
        BenchGame::Shooter => {
            let s = args.scenario;
            // A short buy phase, over within the warm-up: the window measures combat,
            // where players move and fire, not players held at their spawns.
            let mut v = vec![
                "--buy-s=0.5".to_string(),
                format!("--map={}", s.map().name()),
            ];
            v.extend(s.round_s().map(|s| format!("--round-s={s}")));
            v.extend(s.max_health_hp().map(|hp| format!("--max-health-hp={hp}")));
            v.extend(args.pose_every.map(|n| format!("--pose-every={n}")));
            v.extend(args.fow_every.map(|n| format!("--fow-every={n}")));
            v.extend(
                args.rate_halves_every_m
                    .map(|m| format!("--rate-halves-every-m={m}")),
            );
            v.extend(
                args.rate_slowest_every_ticks
                    .map(|n| format!("--rate-slowest-every-ticks={n}")),
            );
            v.push(format!("--max-rewind-ms={}", max_rewind_ms(args)));
            v
        }
        BenchGame::Ctf => {
            let mut v = vec!["--game=ctf".to_string()];
            v.extend(CTF_SETTINGS.iter().map(|kv| format!("--game-set={kv}")));
            v
        }
    }
}

/// The action files the bots replay: `--replay`, or with `--scenario replay` the checked-in
/// `tests/actions` of the current directory; loaded here once, so a bad file is named
/// before anything starts.
fn replay_files(args: &BenchArgs) -> Result<Option<PathBuf>> {
    let dir = match (&args.replay, args.scenario) {
        (Some(dir), _) => dir.clone(),
        (None, Scenario::Replay) => {
            let dir = PathBuf::from("tests/actions");
            if !dir.is_dir() {
                bail!(
                    "--scenario replay: give --replay DIR (no tests/actions in the current \
                     directory; run from the workspace for the checked-in recordings)"
                );
            }
            dir
        }
        (None, _) => return Ok(None),
    };
    tickforge_bots::replay::ReplaySet::load(&dir, args.scenario.map(), args.tick_hz)?;
    Ok(Some(dir))
}

/// The game's flags of `bots`: for the shooter the map (the aimers trace sight on it),
/// the scenario's behaviour (or the recordings replayed instead) and the posing interval;
/// for ctf the game alone.
fn bots_game_args(args: &BenchArgs, game: BenchGame) -> Vec<String> {
    match game {
        BenchGame::Shooter => {
            let s = args.scenario;
            let mut v = vec![
                format!("--map={}", s.map().name()),
                match &args.replay {
                    Some(dir) => format!("--replay={}", dir.display()),
                    None => format!("--behaviour={}", s.mix().name()),
                },
            ];
            v.extend(args.pose_every.map(|n| format!("--pose-every={n}")));
            v
        }
        BenchGame::Ctf => vec!["--game=ctf".to_string()],
    }
}

/// The bench report from the two halves.
fn merge(scenario: &str, s: ServerReport, b: BotsReport, warmup_s: f64) -> Report {
    Report {
        scenario: scenario.to_string(),
        tick_hz: s.tick_hz,
        matches: s.matches,
        players_per_match: s.players_per_match,
        game: s.game.clone(),
        map: s.map.clone(),
        duration_s: s.duration_s,
        warmup_s,
        budget_ms: match_budget_ms(s.tick_hz, s.players_per_match),
        match_frame_ms: s.match_frame_ms,
        worker_frame_ms: s.worker_frame_ms,
        categories_ms: s.categories_ms,
        phases_ms: s.phases_ms,
        ticks: s.ticks,
        schedule: s.schedule,
        // Measured games per core needs a sweep over match counts (many-matches --sweep).
        games_per_core: GamesPerCore {
            measured: None,
            projected: s.projected_games_per_core,
            measured_strict: None,
        },
        io_floor_ms: None,
        io_floor_before_after_us: None,
        io_floor_short_ticks: None,
        io_floor_per_datagram_us: None,
        frame_to_io_floor: None,
        flood: None,
        clients: b.clients.clone(),
        server_cpu_util: s.cpu_util,
        bots_cpu_util: b.cpu_util,
        bots_saturated: Some(b.saturated),
        hitreg: b.hitreg.clone(),
        server: s,
        bots: b,
        host: Host::default(),
        sweep: None,
        run: None,
        repeats: None,
    }
}

/// Parses `progress elapsed_s=.. total_s=.. connected=.. bots=.. rate_hz=..`.
fn parse_progress(line: &str) -> Option<(f64, u64, u64, f64)> {
    let rest = line.strip_prefix("progress ")?;
    let mut elapsed = None;
    let mut connected = None;
    let mut bots = None;
    let mut rate = None;
    for kv in rest.split_whitespace() {
        let (k, v) = kv.split_once('=')?;
        match k {
            "elapsed_s" => elapsed = v.parse().ok(),
            "connected" => connected = v.parse().ok(),
            "bots" => bots = v.parse().ok(),
            "rate_hz" => rate = v.parse().ok(),
            _ => {}
        }
    }
    Some((elapsed?, connected?, bots?, rate?))
}

fn scratch_dir() -> Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!("tickforge-bench-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The real-time priority the server and bots ask for: none in a development build (the
/// portable I/O path has no real-time class; asking would only print refusals).
fn rt_priority(args: &BenchArgs) -> u8 {
    if tickforge_io::LINUX_PATH {
        args.rt_priority
    } else {
        0
    }
}

/// Seconds the server keeps serving after its window, so that the bots (started a little
/// later) finish theirs. On Unix the bench ends the linger with SIGTERM once the bots are
/// done; on Windows the server ends it itself, so it is short.
const SERVER_LINGER_S: &str = if cfg!(unix) { "30" } else { "5" };

/// A child process that is killed if the bench leaves early.
struct Guard(Child);

impl Guard {
    /// Asks the child to stop (SIGTERM) and waits up to `grace` before killing it.
    /// Windows has no SIGTERM: there the server exits by itself at the end of its linger
    /// ([`SERVER_LINGER_S`]), and this only waits for it.
    fn terminate(&mut self, grace: Duration) -> Result<()> {
        // SAFETY: kill with a pid we spawned and still own (not yet reaped).
        #[cfg(unix)]
        unsafe {
            libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM)
        };
        let deadline = Instant::now() + grace;
        loop {
            if let Some(status) = self.0.try_wait()? {
                if !status.success() {
                    bail!("the server exited with {status}");
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = self.0.kill();
                bail!("the server did not stop within {grace:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `placement match=M worker=W addr=A` (what `serve` prints per startup match): `(M, A)`.
fn parse_placement(line: &str) -> Option<(u32, &str)> {
    let mut words = line.strip_prefix("placement ")?.split_whitespace();
    let m = words.next()?.strip_prefix("match=")?.parse().ok()?;
    words.next()?.strip_prefix("worker=")?;
    let addr = words.next()?.strip_prefix("addr=")?;
    Some((m, addr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn bench_args(flags: &[&str]) -> BenchArgs {
        crate::games::register();
        Cli::try_parse_from(std::iter::once("bench").chain(flags.iter().copied()))
            .expect("valid flags")
            .bench
    }

    /// The flag names in `args` (`--map=arena` → `--map`).
    fn names(args: &[String]) -> Vec<&str> {
        args.iter()
            .map(|a| a.split_once('=').map_or(a.as_str(), |(k, _)| k))
            .collect()
    }

    const SHOOTER_ONLY: [&str; 11] = [
        "--map",
        "--buy-s",
        "--round-s",
        "--max-health-hp",
        "--pose-every",
        "--fow-every",
        "--max-rewind-ms",
        "--rate-halves-every-m",
        "--rate-slowest-every-ticks",
        "--behaviour",
        "--game-set",
    ];

    #[test]
    fn the_max_rewind_covers_the_aimers_delay_floor_at_a_low_tick_rate() {
        // 30 Hz, posing every 4th tick: 5 ticks shown behind plus 2 of waiting, 233 ms.
        let args = bench_args(&["--scenario", "crowd", "--tick-hz", "30"]);
        assert_eq!(max_rewind_ms(&args), 234);
        let args = bench_args(&[
            "--scenario",
            "crowd",
            "--tick-hz",
            "30",
            "--pose-every",
            "1",
        ]);
        assert_eq!(max_rewind_ms(&args), 200);
        let args = bench_args(&["--max-rewind-ms", "300", "--tick-hz", "30"]);
        assert_eq!(max_rewind_ms(&args), 300);
    }

    #[test]
    fn the_shooter_is_the_default_and_keeps_its_flags() {
        let args = bench_args(&["--scenario", "crowd", "--pose-every", "2"]);
        assert_eq!(args.game, "shooter");
        let game = BenchGame::of(&args).unwrap();
        assert_eq!(game, BenchGame::Shooter);
        let serve = serve_game_args(&args, game);
        assert_eq!(
            serve,
            [
                "--buy-s=0.5",
                "--map=flat2km",
                "--round-s=600",
                "--max-health-hp=10000",
                "--pose-every=2",
                "--max-rewind-ms=200"
            ]
        );
        assert!(!names(&serve).contains(&"--game"));
        let bots = bots_game_args(&args, game);
        assert_eq!(
            bots,
            ["--map=flat2km", "--behaviour=crowd", "--pose-every=2"]
        );
    }

    #[test]
    fn ctf_gets_its_game_and_settings_and_none_of_the_shooters_flags() {
        for scenario in ["smoke", "many-matches"] {
            let args = bench_args(&["--game", "ctf", "--scenario", scenario, "--rtt-ms", "50"]);
            let game = BenchGame::of(&args).unwrap();
            assert_eq!(game, BenchGame::Ctf);
            let serve = serve_game_args(&args, game);
            assert_eq!(
                serve,
                [
                    "--game=ctf",
                    "--game-set=time_limit_s=3600",
                    "--game-set=captures=255"
                ]
            );
            assert_eq!(bots_game_args(&args, game), ["--game=ctf"]);
            for flag in SHOOTER_ONLY {
                assert!(
                    !names(&bots_game_args(&args, game)).contains(&flag),
                    "{flag}"
                );
            }
            assert!(!names(&serve).iter().any(|f| SHOOTER_ONLY[..8].contains(f)));
        }
    }

    #[test]
    fn ctfs_bench_settings_are_ones_the_game_takes() {
        use tickforge_api::Game as _;
        let table: tickforge_api::ConfigTable = CTF_SETTINGS
            .iter()
            .map(|kv| tickforge_server::games::parse_setting(kv).unwrap())
            .collect();
        let config = tickforge_ctf::Ctf::configure(&table).expect("accepted");
        assert_eq!((config.time_limit_s, config.captures), (3600, 255));
    }

    #[test]
    fn ctf_refuses_the_shooters_scenarios_and_flags() {
        for scenario in ["crowd", "saturation"] {
            let err = BenchGame::of(&bench_args(&["--game", "ctf", "--scenario", scenario]))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(scenario) && err.contains("smoke and many-matches"),
                "{err}"
            );
        }
        for flag in ["--pose-every", "--fow-every", "--max-rewind-ms"] {
            let err = BenchGame::of(&bench_args(&["--game", "ctf", flag, "2"]))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(flag) && err.contains("shooter"), "{err}");
        }
        assert!(BenchGame::of(&bench_args(&["--game", "ctf", "--sweep"])).is_ok());
    }

    #[test]
    fn replay_passes_the_recordings_to_the_bots_instead_of_a_behaviour() {
        let args = bench_args(&["--scenario", "many-matches", "--replay", "rec"]);
        let game = BenchGame::of(&args).unwrap();
        assert_eq!(bots_game_args(&args, game), ["--map=arena", "--replay=rec"]);
        let replay = bench_args(&["--scenario", "replay"]);
        assert_eq!(replay.scenario.map(), BuiltinMap::Arena);
        assert_eq!(replay.scenario.defaults(), Scenario::Smoke.defaults());
        for flags in [
            &["--game", "ctf", "--scenario", "replay"][..],
            &["--game", "ctf", "--replay", "rec"],
        ] {
            let err = BenchGame::of(&bench_args(flags)).unwrap_err().to_string();
            assert!(err.contains("replay"), "{err}");
        }
    }

    #[test]
    fn the_io_floor_is_sized_by_the_game() {
        let (shooter_in, shooter_out) = tick_datagram_bytes(BenchGame::Shooter, 10);
        assert_eq!(
            shooter_in,
            10 + tickforge_shooter::cmd::CMD_BYTES,
            "as before the games"
        );
        assert_eq!(
            shooter_out,
            tickforge_proto::msg::SNAPSHOT_HEADER_BYTES
                + tickforge_shooter::HEADER_BYTES
                + 10 * tickforge_shooter::ENTITY_BYTES
        );
        let (ctf_in, ctf_out) = tick_datagram_bytes(BenchGame::Ctf, 10);
        assert_eq!(ctf_in, 10 + tickforge_ctf::INPUT_BYTES);
        // Every player's entity and the two flags.
        use tickforge_api::Game as _;
        assert_eq!(
            ctf_out,
            tickforge_proto::msg::SNAPSHOT_HEADER_BYTES + tickforge_ctf::Ctf::full_state_bytes(12)
        );
    }

    #[test]
    fn progress_lines_parse() {
        let p =
            parse_progress("progress elapsed_s=2.0 total_s=6.0 connected=9 bots=10 rate_hz=127.5");
        assert_eq!(p, Some((2.0, 9, 10, 127.5)));
        assert_eq!(parse_progress("listening 127.0.0.1:1"), None);
        assert_eq!(parse_progress("progress elapsed_s=x"), None);
    }

    #[test]
    fn placement_lines_parse() {
        assert_eq!(
            parse_placement("placement match=12 worker=1 addr=127.0.0.1:40001"),
            Some((12, "127.0.0.1:40001"))
        );
        assert_eq!(parse_placement("placement match=x worker=1 addr=a"), None);
        assert_eq!(parse_placement("admin 127.0.0.1:9000"), None);
        assert_eq!(parse_placement("placement match=1 addr=a"), None);
    }
}
