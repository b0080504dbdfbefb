//! The match host: a worker thread that owns a socket and its matches, and runs their
//! frames on time.
//!
//! What it does: reads the configuration ([`config`]), runs the frame ([`Worker`]) that
//! receives, ticks every due match ([`Match`]) and sends, and measures all of it into a
//! [`tickforge_telemetry::report::ServerReport`]; serves operators and the matchmaker over
//! HTTP ([`admin`]).
//!
//! What it does not do: game rules (the `game` crate), protocol state (`proto`), or
//! syscalls of its own (`io`).

pub mod admin;
pub mod config;
mod game_match;
pub mod io_floor;
mod worker;

#[cfg(test)]
mod testing;

pub use config::{ConfigError, ConfigFile, ServerConfig};
pub use game_match::Match;
pub use worker::{Worker, WorkerError, WorkerStatus};
