//! The match host: worker threads, one per core, each owning a socket and its matches and
//! running their frames on time.
//!
//! What it does: reads the configuration ([`config`]), places matches over pinned workers
//! and drains on request ([`host`]), runs the frame ([`Worker`]) that receives, ticks every
//! due match ([`Match`]) and sends, admits new matches against the measured frame cost,
//! and measures all of it into a [`tickforge_telemetry::report::ServerReport`]; serves
//! operators and the matchmaker over HTTP ([`admin`]); and, under Kubernetes, tells Agones
//! its lifecycle and capacity and takes its allocations as matches ([`agones`]).
//!
//! What it does not do: game rules (the `game` crate), protocol state (`proto`), or
//! syscalls of its own (`io`).

pub mod admin;
pub mod agones;
pub mod config;
mod game_match;
pub mod games;
pub mod host;
pub mod io_floor;
pub mod profile;
mod run_id;
pub mod serve;
mod worker;

#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
#[cfg(test)]
mod testing;

pub use config::{ConfigError, ConfigFile, ServerConfig};
pub use game_match::{HostedMatch, Match, Outbox, ReceiveError, TrafficCounters};
pub use host::{DrainEvent, Host, HostError, Plan, WorkerPlan};
pub use run_id::RunId;
pub use worker::DrainProgress;
pub use worker::{
    bind_game_socket, matches_that_fit, remaining_capacity, tick_match, Frame, MatchCounters,
    Shutdown, Worker, WorkerError, WorkerFigures, WorkerSetup, WorkerStatus,
    ADMISSION_BUDGET_SHARE,
};

/// A studio's own server binary, whole: registers game `G`, reads the command line (the
/// flags of `tickforge serve`, and a TOML file with `--config`), and serves until stopped,
/// with the admin API, `/metrics` and the drain on SIGTERM. Exits 0 when the server stopped
/// cleanly, 1 when a result could not be written, 2 on a configuration error.
///
/// ```no_run
/// # struct MyGame;
/// # /*
/// fn main() {
///     tickforge_server::run::<MyGame>();
/// }
/// # */
/// ```
pub fn run<G: tickforge_api::Game>() -> ! {
    use clap::{Args, FromArgMatches};
    games::register::<G>();
    let name = std::env::args()
        .next()
        .and_then(|a| {
            let file = std::path::Path::new(&a).file_name()?.to_str()?.to_string();
            Some(file)
        })
        .unwrap_or_else(|| G::NAME.to_string());
    // Once per process: clap keeps a command's name for the program's life.
    let command_name: &'static str = Box::leak(name.clone().into_boxed_str());
    let mut command = serve::ServeArgs::augment_args(
        clap::Command::new(command_name).version(env!("CARGO_PKG_VERSION")),
    )
    .about(format!("Host matches of {}: {}", G::NAME, G::ABOUT))
    .long_about(None);
    // One game: nothing to choose.
    command = command.mut_arg("game", |a| a.hide(true));
    let args =
        serve::ServeArgs::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit());
    match serve::run(args) {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("{name}: {e:#}");
            std::process::exit(2)
        }
    }
}
