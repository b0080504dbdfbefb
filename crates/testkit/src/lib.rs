//! Dev-only test kit: a seeded network simulator on virtual time, and a client-server
//! harness on top of it; with feature `game`, `game::Walk`, a small deterministic game
//! for the runtime's own tests; and [`agones::FakeSdk`], a fake Agones SDK sidecar on
//! loopback for tests of the server's Agones integration.
//!
//! What it does: [`VirtualClock`] stands in for the OS clock (an `Instant` origin plus an
//! offset the test advances), and [`NetSim`] carries datagrams between `SocketAddr`s with
//! latency, jitter, loss, duplication and reordering drawn from a seeded [`SimRng`]. Tests
//! drive the protocol's sans-IO state machines tick by tick through it: no sleeps, no
//! sockets, and the same seed always gives the same run. [`Harness`] does that for one
//! netcode server and its clients, optionally with a reliable link on every connection;
//! `tests/netcode_sim.rs` starts with its connect-exchange-disconnect example.
//!
//! What it does not do: model bandwidth, queueing or MTU, or run anything on its own; the
//! test decides when time passes and when datagrams are taken.
//!
//! In order of importance: deterministic (no hash-order iteration, no OS randomness, ties
//! broken by send order); simple enough to trust; fast in debug builds. It allocates
//! freely: it is test code.

pub mod agones;
pub mod alloc;
mod clock;
#[cfg(feature = "game")]
pub mod game;
pub mod harness;
pub mod http;
mod rng;
mod sim;

pub use clock::VirtualClock;
pub use harness::{Event, Harness, HarnessConfig, Link, Logged, Side, TICK};
pub use rng::SimRng;
pub use sim::{Datagram, LinkConditions, NetSim, SimStats};
