//! The I/O floor per datagram, questioned: today's `recvmmsg`/`sendmmsg` against io_uring
//! and busy polling, over loopback and over a veth pair between two network namespaces.
//!
//! `cargo bench -p tickforge-io --bench floor` runs loopback only; as root,
//! `TICKFORGE_BENCH_VETH=1 cargo bench -p tickforge-io --bench floor` adds the veth runs.
//! They make the namespaces `tickforge-floor-a` and `-b` joined by the pair `tf-floor-a`/`-b`
//! (10.213.0.1/30 and .2/30), send only between those two addresses, and delete both
//! namespaces at the end, on a panic too (a run killed by a signal leaves them to the next
//! run, which deletes them first).
//!
//! Every figure is per datagram of a batch of 10 × 300 B, the server's pattern: one thread
//! that drains its socket and sends a batch of snapshots. Only one side of each batch is
//! timed; the other end feeds or drains it outside the clock. The paths take turns (a
//! sample of 500 batches each, each round starting one path later), and a figure is the
//! median over 21 samples of each sample's median batch, so that batches a busy neighbour
//! preempts do not count. Not criterion: criterion measures one function after another and
//! cannot interleave them, which on a shared host measures the neighbours.
//!
//! The paths (details in `uring.rs`):
//! - `sendmmsg` / `recvmmsg`: today's `SendBatch::flush` and `RecvBatch::fill`.
//! - io_uring `SENDMSG` / `RECVMSG`, one entry per datagram, a batch submitted and completed
//!   in one `io_uring_enter` (`DEFER_TASKRUN`, `SINGLE_ISSUER`). The receive asks for exactly
//!   the 10 that wait, which a server cannot know: a lower bound for io_uring.
//! - registered buffers: `SEND_ZC` from a registered (fixed) buffer; on receive, a multishot
//!   `RECVMSG` armed once, picking buffers from a provided-buffer ring. `RECVMSG` takes no
//!   fixed buffer and `READ_FIXED` is for files.
//! - SQPOLL: a kernel thread submits; the caller still waits in `io_uring_enter`, since
//!   spinning on the completion queue beside the polling thread would take both cores.
//! - busy polling: SO_BUSY_POLL 50 µs with SO_PREFER_BUSY_POLL on the receiving socket.
//!   It polls a device's NAPI context; loopback has none, and neither has a veth without
//!   XDP or GRO, so it changes nothing here, as the figures show.
//! - a spin: in `wake.rs`, where another thread sends, since with datagrams already queued
//!   there is nothing to spin for.
//!
//! Figures on the 2-core development host (kernel 6.18, a shared machine at load 6 to 11
//! while they ran), ns per datagram:
//!
//! | path                                  | loopback | veth  |
//! |---------------------------------------|---------:|------:|
//! | send: `sendmmsg` (today)              |  3,551   | 4,410 |
//! | send: io_uring `SENDMSG`              |  3,976   | 4,723 |
//! | send: io_uring `SEND_ZC`, fixed buffer|  4,364   | 4,949 |
//! | send: io_uring `SENDMSG`, SQPOLL      |  5,018   | 5,758 |
//! | receive: `recvmmsg` (today)           |    977   |   962 |
//! | receive: `recvmmsg`, SO_BUSY_POLL     |    983   |   970 |
//! | receive: io_uring `RECVMSG` ×10       |  1,215   | 1,247 |
//! | receive: io_uring multishot, buf ring |  1,023   | 1,051 |
//! | receive: io_uring `RECVMSG`, SQPOLL   |  2,027   | 2,103 |
//!
//! Over loopback and veth the sending thread also runs delivery into the receiving socket,
//! so the send figures include the receiver's kernel work.
//!
//! Waking for a batch another thread sends (µs from the word to the batch drained, and the
//! receiving thread's CPU ns per datagram): loopback `ppoll` then `recvmmsg` 89.5 µs,
//! 4,188 ns; a spin on `recvmmsg` 66.2 µs, 7,807 ns; a spin with SO_BUSY_POLL 55.9 µs,
//! 7,213 ns; io_uring multishot 104.1 µs, 4,856 ns. Over veth: 130.6 µs, 5,573 ns; 81.1 µs,
//! 8,585 ns; 80.4 µs, 8,232 ns; 142.1 µs, 6,104 ns.
//!
//! A second run in the same session kept every ordering: against today, io_uring `SENDMSG`
//! +8% and +12%, `SEND_ZC` +17% and +19%, SQPOLL sends +30%; receives `RECVMSG` +28% and
//! +27%, multishot +4% and +5%, SQPOLL +122% and +118%, SO_BUSY_POLL 0% (loopback, veth).
//!
//! So nothing is cheaper per datagram than today's path, let alone the 15% that would pay
//! for a second path: io_uring costs 5–30% more (one entry, one completion and one
//! operation set-up per datagram, where `sendmmsg`/`recvmmsg` loop inside one call), its
//! zero-copy send more again (a second completion per datagram, and a 300-byte datagram is
//! copied anyway), and SQPOLL adds a polling kernel thread that shares two cores with the
//! worker. A spin wakes sooner, by a quarter to a half, but costs the receiving thread
//! 40–90% more CPU per datagram, and a worker that drains once per tick does not wait per
//! datagram. Nothing is adopted; this bench is the evidence.
//!
//! Steering the loopback's receive processing to the other core (RPS, `rps_cpus` of `lo`)
//! was measured in the server's own bench instead, since it moves work between cores and
//! this bench times one side: the server's send no longer runs its clients' delivery, so
//! the run's I/O floor falls a fifth and the worker's network a tenth, while the bots' core,
//! which now receives for both, needs a fifth to a third more. Work moved, not saved: not
//! adopted (the measurement log, 2026-12-01).

#[cfg(target_os = "linux")]
mod netns;
#[cfg(target_os = "linux")]
mod run;
#[cfg(target_os = "linux")]
mod uring;
#[cfg(target_os = "linux")]
mod wake;

fn main() {
    #[cfg(target_os = "linux")]
    run::main();
    #[cfg(not(target_os = "linux"))]
    println!("skipped: the I/O floor bench compares Linux I/O paths");
}
