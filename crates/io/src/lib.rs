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
//! Two paths, chosen at compile time by the build script: the Linux path (`recvmmsg` and
//! `sendmmsg`, kernel receive timestamps, pinning, `SCHED_FIFO`, timer slack, NUMA memory
//! policy), which the production server runs; and the portable path (std and socket2
//! sockets, plain sleeps, no pinning or real-time class) for every other OS, and for Linux
//! with the `portable-io` feature, so that tests run it too. Both have one API; what the
//! portable path cannot do returns an `Unsupported` error or a neutral answer, as each
//! function says. [`LINUX_PATH`] says which one this build took.
//!
//! In order of importance: a per-datagram error is never fatal; waking on time; no
//! allocation per call.

/// True when this build took the Linux path (production), false on the portable path
/// (development mode: Windows, macOS, iOS, Android, or Linux with `portable-io`).
pub const LINUX_PATH: bool = cfg!(linux_io);

mod arrival;
pub mod cpu;
pub mod entropy;
pub mod host;
pub mod numa;
pub mod stamped;
pub mod time;
pub mod udp;
