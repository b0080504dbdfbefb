//! `tickforge bots`: connect bots to a server and measure it.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use tickforge_bots::behaviour::BotMix;
use tickforge_bots::replay::ReplaySet;
use tickforge_bots::{BotGame, BotsConfig, Progress};
use tickforge_game::BuiltinMap;

use crate::summary;

/// Flags of `bots`.
#[derive(Args, Debug)]
pub struct BotsArgs {
    /// The game the server's matches play: shooter (the reference shooter) or ctf
    /// (capture the flag; --map, --behaviour and the hit-registration settings do not
    /// apply). A match of another game refuses the bots at its welcome.
    #[arg(long, value_name = "NAME", default_value = "shooter", value_parser = game_parser())]
    pub game: BotGame,
    /// The server's game address; repeat it once per worker, in the order `serve` prints
    /// them: match m joins the (m - 1) % N-th.
    #[arg(
        long = "server",
        value_name = "ADDR",
        default_value = "127.0.0.1:40000"
    )]
    pub servers: Vec<SocketAddr>,
    /// Matches to join, ids 1..=N.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub matches: u32,
    /// Bots per match.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub bots_per_match: u32,
    /// Inputs per second per bot (the server's tick rate).
    #[arg(long, value_name = "HZ", default_value_t = 128)]
    pub tick_hz: u32,
    /// Seconds before the measured window.
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub warmup_s: f64,
    /// Seconds measured; the bots leave after it.
    #[arg(long, value_name = "S", default_value_t = 5.0)]
    pub duration_s: f64,
    /// CPU to pin the bot thread to [default: not pinned].
    #[arg(long, value_name = "CPU")]
    pub core: Option<usize>,
    /// Run the bot thread in the real-time FIFO class at this priority where the host
    /// permits (root or CAP_SYS_NICE) [default: normal scheduling].
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub rt_priority: Option<u8>,
    /// Seeds the bots' behaviour.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The built-in map the server plays (the bots trace their sight on it): arena or
    /// flat2km.
    #[arg(long, value_name = "NAME", default_value = "arena", value_parser = map_parser())]
    pub map: BuiltinMap,
    /// What the bots do: arena (every other bot aims at the enemies it sees, the rest
    /// wander about) or crowd (every bot runs to the map's centre, then fights)
    /// [default: the map's, crowd on flat2km and arena on arena].
    #[arg(long, value_name = "MIX", value_parser = mix_parser(), conflicts_with = "replay")]
    pub behaviour: Option<BotMix>,
    /// Replay recorded matches instead of a behaviour (the shooter): an action file
    /// (`serve --record-dir`) or a directory of `*.actions` files, sorted by name. Bot k
    /// (from 0, across matches) sends the inputs of the (k mod N)-th recorded seat, file by
    /// file, seats ascending; from its first snapshot on, one recorded tick per tick,
    /// looping at the end, starting over with each new match. Files must be recorded at
    /// --tick-hz; a directory's files of another map than --map are left out.
    #[arg(long, value_name = "PATH")]
    pub replay: Option<PathBuf>,
    /// Protocol id, decimal or hex with 0x [default: 8388345093885489767].
    #[arg(long, value_name = "ID", value_parser = tickforge_server::config::parse_protocol_id)]
    pub protocol_id: Option<u64>,
    /// The server's private key (64 hex digits), to mint each bot's connect token
    /// [default: the TICKFORGE_PRIVATE_KEY environment variable].
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Write the report to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Print the report as JSON on standard output instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Report progress as `progress …` lines on standard output instead of a bar.
    #[arg(long)]
    pub progress_lines: bool,
    /// Round trip the network conditioner adds, milliseconds: each datagram, either way,
    /// is held for half of it.
    #[arg(long, value_name = "MS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=2000))]
    pub rtt_ms: u32,
    /// Jitter of each way's delay, milliseconds either way (uniform; reorders datagrams).
    #[arg(long, value_name = "MS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub jitter_ms: u32,
    /// The server's posing interval, ticks (aimers pose their own history alike).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u8).range(1..=32))]
    pub pose_every: u8,
}

/// `--game`: one of [`BotGame::ALL`] by name.
fn game_parser() -> impl TypedValueParser<Value = BotGame> {
    PossibleValuesParser::new(BotGame::ALL.map(BotGame::name))
        .map(|name| BotGame::from_name(&name).expect("a possible value"))
}

/// `--map`: one of [`BuiltinMap::ALL`] by name.
fn map_parser() -> impl TypedValueParser<Value = BuiltinMap> {
    PossibleValuesParser::new(BuiltinMap::ALL.map(BuiltinMap::name))
        .map(|name| BuiltinMap::from_name(&name).expect("a possible value"))
}

/// `--behaviour`: one of [`BotMix::ALL`] by name.
fn mix_parser() -> impl TypedValueParser<Value = BotMix> {
    PossibleValuesParser::new(BotMix::ALL.map(BotMix::name))
        .map(|name| BotMix::from_name(&name).expect("a possible value"))
}

pub fn run(args: BotsArgs) -> Result<()> {
    if !(1..=1000).contains(&args.tick_hz) {
        bail!(
            "--tick-hz: expected an integer from 1 to 1000, got {}",
            args.tick_hz
        );
    }
    if !(args.duration_s.is_finite() && args.duration_s > 0.0) {
        bail!(
            "--duration-s: expected seconds, more than 0, got {}",
            args.duration_s
        );
    }
    if !(args.warmup_s.is_finite() && args.warmup_s >= 0.0) {
        bail!(
            "--warmup-s: expected seconds, 0 or more, got {}",
            args.warmup_s
        );
    }
    if args.matches == 0 || args.bots_per_match == 0 || args.matches * args.bots_per_match > 4096 {
        bail!("--matches × --bots-per-match: expected 1 to 4096 bots in all");
    }
    let replay = match &args.replay {
        Some(_) if args.game != BotGame::Shooter => {
            bail!(
                "--replay: action files record the shooter's inputs; --game is {}",
                args.game.name()
            )
        }
        Some(path) => Some(std::sync::Arc::new(ReplaySet::load(
            path,
            args.map,
            args.tick_hz,
        )?)),
        None => None,
    };
    if let Some(set) = &replay {
        let (files, skipped) = (set.files(), set.source(0, 0).skipped);
        eprintln!(
            "tickforge bots: replaying {} seat(s) of {} file(s) ({}){}",
            set.pairs(),
            files.len(),
            files
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            if skipped.is_empty() {
                String::new()
            } else {
                format!("; left out: {}", skipped.join("; "))
            }
        );
    }
    let private_key = crate::token_cmd::load_key(args.key_file.as_deref())?;
    let config = BotsConfig {
        game: args.game,
        ctf: tickforge_ctf::CtfConfig::default(),
        servers: args.servers,
        matches: args.matches,
        bots_per_match: args.bots_per_match,
        tick_hz: args.tick_hz,
        warmup: Duration::from_secs_f64(args.warmup_s),
        duration: Duration::from_secs_f64(args.duration_s),
        core: args.core,
        rt_priority: args.rt_priority,
        seed: args.seed,
        protocol_id: args
            .protocol_id
            .unwrap_or(tickforge_server::config::DEFAULT_PROTOCOL_ID),
        private_key,
        rtt: Duration::from_millis(u64::from(args.rtt_ms)),
        jitter: Duration::from_millis(u64::from(args.jitter_ms)),
        pose_every: std::num::NonZeroU8::new(args.pose_every).expect("parsed as 1 to 32"),
        map: args.map,
        behaviour: args.behaviour.unwrap_or(BotMix::for_map(args.map)),
        replay,
    };
    let total_s = args.warmup_s + args.duration_s;
    let bar = (!args.progress_lines).then(|| {
        let bar = ProgressBar::new((total_s * 10.0) as u64);
        bar.set_style(
            ProgressStyle::with_template("{spinner} bots {bar:30} {msg}")
                .expect("constant template"),
        );
        bar
    });
    let report = tickforge_bots::run(&config, |p: Progress| {
        if let Some(bar) = &bar {
            bar.set_position((p.elapsed_s * 10.0) as u64);
            bar.set_message(format!(
                "{}/{} connected, {:.1} snapshots/s each",
                p.connected, p.bots, p.rate_hz
            ));
        } else {
            println!(
                "progress elapsed_s={:.1} total_s={:.1} connected={} bots={} rate_hz={:.1}",
                p.elapsed_s, p.total_s, p.connected, p.bots, p.rate_hz
            );
            std::io::stdout().flush().ok();
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if !args.progress_lines {
        print!("{}", summary::bots(&report));
    }
    let c = &report.clients;
    if c.response_rate_hz.unwrap_or(0.0) == 0.0 && report.saturated {
        bail!(
            "no bot received a snapshot in the {} s measured ({} of {} bots connected): the bots \
             fell behind their own schedule (up to {:.1} s) and their sessions ended ({}): one \
             bots process cannot drive this many clients on this host",
            args.duration_s,
            c.connected,
            c.bots,
            report.max_behind_ms.unwrap_or(0.0) / 1e3,
            (c.ended.iter())
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    if c.response_rate_hz.unwrap_or(0.0) == 0.0 {
        bail!(
            "no bot received a snapshot in the {} s measured ({} of {} bots connected): \
             check that a server runs at {} with this key and protocol id",
            args.duration_s,
            c.connected,
            c.bots,
            config
                .servers
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}
