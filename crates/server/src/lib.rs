//! The match host: worker threads, one per core, each owning a socket and its matches and
//! running their frames on time.
//!
//! What it does: reads the configuration ([`config`]), places matches over pinned workers
//! and drains on request ([`host`]), runs the frame ([`Worker`]) that receives, ticks every
//! due match ([`Match`]) and sends, admits new matches against the measured frame cost,
//! and measures all of it into a [`tickforge_telemetry::report::ServerReport`]; serves
//! operators and the matchmaker over HTTP ([`admin`]).
//!
//! What it does not do: game rules (the `game` crate), protocol state (`proto`), or
//! syscalls of its own (`io`).

pub mod admin;
pub mod config;
mod game_match;
pub mod games;
pub mod host;
pub mod io_floor;
mod run_id;
mod worker;

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
