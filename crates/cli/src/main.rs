//! `tickforge`: host 128-tick matches, drive bots against them, and measure both.

mod bench;
mod bots_cmd;
mod capacity_cmd;
mod compare;
mod doctor;
mod flood;
mod games;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod huge_pages;
mod replay_cmd;
mod report_cmd;
mod report_html;
mod summary;
mod token_cmd;

use clap::{Parser, Subcommand};

/// Host many 128-tick shooter matches per core, load-test them with bots, and measure it.
#[derive(Parser)]
#[command(name = "tickforge", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start and matched right away: the size of the largest variant costs
// nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Host matches of a game (the reference shooter by default) on a UDP port.
    #[command(after_help = SERVE_PLATFORM_HELP)]
    Serve(games::ServeCmd),
    /// Connect bots to a running server and measure it from the client side.
    Bots(bots_cmd::BotsArgs),
    /// Run a scenario: a server and its bots as separate processes on 127.0.0.1.
    #[command(after_help = bench::checks::EXIT_STATUS_HELP)]
    Bench(bench::BenchArgs),
    /// Mint a connect token for a match, or make a new private key.
    Token(token_cmd::TokenArgs),
    /// Play a recorded match's inputs offline to its end state and result.
    Replay(replay_cmd::ReplayArgs),
    /// Check whether this host can hold many 128 Hz matches per core, and say what to fix.
    Doctor(doctor::DoctorArgs),
    /// Print a saved bench report (`bench --json`) again; draw its sweep as an SVG chart, or
    /// the whole report as one HTML page.
    Report(report_cmd::ReportArgs),
    /// Compare two bench reports: each key figure's ratio against the noise of their runs
    /// (`bench --repeat N`); exits 3 on a regression beyond it.
    Compare(compare::CompareArgs),
    /// Cores and hosts for N players from a measured sweep; `--check` it against a held run.
    Capacity(capacity_cmd::CapacityArgs),
}

/// `serve --help`'s last paragraph: which path this build takes, and that production is
/// Linux's.
const SERVE_PLATFORM_HELP: &str = if tickforge_io::LINUX_PATH {
    "Platforms: the production path is Linux (this build): batched recvmmsg/sendmmsg, \
     kernel receive timestamps, workers pinned to cores in the real-time class. Windows and \
     macOS builds are development servers (see the README's Platforms)."
} else {
    "Platforms: this is a development build (the portable I/O path: std sockets, one call \
     per datagram, plain sleeps, no pinning or real-time class), for running a local server \
     while developing a game. The production path is Linux: build there without the \
     `portable-io` feature (see the README's Platforms)."
};

fn main() {
    games::register();
    let cli = Cli::parse();
    // glibc's heap on transparent huge pages (`huge_pages`); other C libraries have no
    // such tunable.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if matches!(
        cli.command,
        Command::Serve(_) | Command::Bots(_) | Command::Bench(_) | Command::Capacity(_)
    ) {
        huge_pages::restart_with_huge_pages();
    }
    if matches!(
        cli.command,
        Command::Replay(_) | Command::Doctor(_) | Command::Report(_) | Command::Compare(_)
    ) {
        end_quietly_on_a_closed_pipe();
    }
    let result = match cli.command {
        Command::Serve(cmd) => tickforge_server::serve::run(cmd.into_args()),
        Command::Bots(args) => bots_cmd::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Token(args) => token_cmd::run(args),
        Command::Replay(args) => replay_cmd::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Report(args) => report_cmd::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Capacity(args) => capacity_cmd::run(args),
    };
    if let Err(e) = result {
        eprintln!("tickforge: {e:#}");
        if e.is::<bench::checks::ChecksFailed>() {
            std::process::exit(bench::checks::EXIT_CHECK_FAILED);
        }
        std::process::exit(2);
    }
}

/// For the commands that only print: a reader that goes away (`tickforge doctor | head`)
/// ends the process as it ends any Unix tool, by SIGPIPE, instead of a panic in `println!`
/// (Rust ignores SIGPIPE, so every write would fail with EPIPE). Not for `serve`, `bots` and
/// `bench`: their sockets must see EPIPE as an error, never die of it.
fn end_quietly_on_a_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: restoring the default action of a signal at start, before any thread exists;
    // no handler is installed.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
