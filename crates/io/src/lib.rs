//! Everything tickforge asks of the operating system, in one crate.
//!
//! What it does: UDP sockets ([`udp`]), the monotonic clock and precise sleeping
//! ([`time`]), pinning threads to cores, real-time scheduling and CPU time ([`cpu`]), the
//! NUMA topology and match placement ([`numa`]), receive timestamps ([`stamped`]), and
//! what the host's kernel offers (GSO, GRO, timer slack: [`host`], for `doctor`).
//!
//! What it does not do: protocol or game logic. The pure crates take time as a parameter
//! and bytes as slices; this crate supplies both.
//!
//! In order of importance: a per-datagram error is never fatal; waking on time; no
//! allocation per call.

mod arrival;
pub mod cpu;
pub mod entropy;
pub mod host;
pub mod numa;
pub mod stamped;
pub mod time;
pub mod udp;
