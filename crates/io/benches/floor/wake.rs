//! Waking for a batch, across two threads: what a spin buys over a wait.
//!
//! With the datagrams already queued, as in the per-datagram runs, spinning cannot help: it
//! only changes how a receiver learns that datagrams have come. Here a sender thread sends
//! a batch when told to, and the receiving thread, which told it, waits for the batch and
//! drains it. Measured on the receiving thread: the time from the word to the last datagram
//! drained (the sender thread's wake-up included, alike for every mode) and the thread's
//! CPU time per datagram, which for a spin is the whole wait.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::Instant;

use tickforge_io::udp::{wait_readable, IoStats, RecvBatch, SendBatch, UdpSocket};

use crate::run::{
    median, set_blocking, set_busy_poll, thread_cpu, BATCH, DATAGRAM_BYTES, PATIENCE, RECV_SLOTS,
};
use crate::uring::{RecvMode, Submit, UringRecv};

/// Samples per mode, taken in turns with the other modes.
const ROUNDS: usize = 11;
/// Batches per sample.
const BATCHES_PER_SAMPLE: usize = 200;

/// One way of waiting, and what it measured.
struct Mode<'a> {
    name: &'static str,
    to: SocketAddr,
    /// Waits for one batch and drains it.
    wait: Box<dyn FnMut() + 'a>,
    /// Per sample: median microseconds from the word to the batch drained.
    latency_us: Vec<f64>,
    /// Per sample: the receiving thread's mean CPU nanoseconds per datagram.
    cpu_ns: Vec<f64>,
}

impl<'a> Mode<'a> {
    fn new(name: &'static str, to: SocketAddr, wait: impl FnMut() + 'a) -> Self {
        Mode {
            name,
            to,
            wait: Box::new(wait),
            latency_us: Vec::new(),
            cpu_ns: Vec::new(),
        }
    }
}

/// Spins on `fill` until a batch has come, at most [`PATIENCE`].
fn spin(socket: &UdpSocket, batch: &mut RecvBatch, stats: &mut IoStats) {
    let deadline = Instant::now() + PATIENCE;
    let mut got = 0;
    let mut calls = 0u32;
    while got < BATCH {
        got += batch.fill(socket, stats);
        calls = calls.wrapping_add(1);
        assert!(
            !calls.is_multiple_of(1024) || Instant::now() < deadline,
            "no batch in {PATIENCE:?}"
        );
    }
}

/// Measures each way of waiting for batches from `tx` to receivers from `rx_end`.
pub fn wake(name: &str, tx: &UdpSocket, rx_end: &dyn Fn() -> UdpSocket) {
    let ppoll_rx = rx_end();
    let spin_rx = rx_end();
    let busy_rx = rx_end();
    set_busy_poll(&busy_rx).expect("SO_BUSY_POLL");
    let uring_rx = rx_end();
    set_blocking(&uring_rx).expect("blocking socket");
    let mut ring = UringRecv::new(uring_rx.as_raw_fd(), Submit::Enter, RecvMode::Multishot)
        .expect("io_uring multishot");

    std::thread::scope(|s| {
        let (go, told) = mpsc::channel::<SocketAddr>();
        // Ends when `go` is dropped, on a panic too.
        s.spawn(move || {
            let mut batch = SendBatch::with_capacity(BATCH, DATAGRAM_BYTES);
            let mut stats = IoStats::default();
            while let Ok(to) = told.recv() {
                for i in 0..BATCH {
                    batch.push(to, &[i as u8; DATAGRAM_BYTES]);
                }
                assert_eq!(batch.flush(tx, &mut stats), BATCH);
            }
        });

        let addr = |s: &UdpSocket| s.local_addr().expect("bound");
        let mut modes = vec![
            Mode::new("ppoll, then recvmmsg (today)", addr(&ppoll_rx), {
                let mut batch = RecvBatch::with_capacity(RECV_SLOTS);
                let mut stats = IoStats::default();
                let rx = &ppoll_rx;
                move || {
                    let mut got = 0;
                    while got < BATCH {
                        let n = wait_readable(&[rx], PATIENCE).expect("ppoll");
                        assert_eq!(n, 1, "no batch in {PATIENCE:?}");
                        got += batch.fill(rx, &mut stats);
                    }
                }
            }),
            Mode::new("spin on recvmmsg", addr(&spin_rx), {
                let mut batch = RecvBatch::with_capacity(RECV_SLOTS);
                let mut stats = IoStats::default();
                let rx = &spin_rx;
                move || spin(rx, &mut batch, &mut stats)
            }),
            Mode::new("spin on recvmmsg, SO_BUSY_POLL 50 us", addr(&busy_rx), {
                let mut batch = RecvBatch::with_capacity(RECV_SLOTS);
                let mut stats = IoStats::default();
                let rx = &busy_rx;
                move || spin(rx, &mut batch, &mut stats)
            }),
            Mode::new("io_uring multishot, wait in enter", addr(&uring_rx), {
                let ring = &mut ring;
                move || assert_eq!(ring.recv(BATCH), BATCH)
            }),
        ];

        let mut latencies = Vec::with_capacity(BATCHES_PER_SAMPLE);
        let n = modes.len();
        for round in 0..=ROUNDS {
            for k in 0..n {
                let m = &mut modes[(round + k) % n];
                let cpu_before = thread_cpu();
                for _ in 0..BATCHES_PER_SAMPLE {
                    let start = Instant::now();
                    go.send(m.to).expect("the sender thread runs");
                    (m.wait)();
                    latencies.push(start.elapsed());
                }
                let cpu = thread_cpu() - cpu_before;
                // Round 0 warms up.
                if round > 0 {
                    latencies.sort_unstable();
                    m.latency_us
                        .push(latencies[latencies.len() / 2].as_secs_f64() * 1e6);
                    m.cpu_ns
                        .push(cpu.as_nanos() as f64 / (BATCHES_PER_SAMPLE * BATCH) as f64);
                }
                latencies.clear();
            }
        }
        drop(go);

        println!(
            "\n{name}: wait for and drain {BATCH} x {DATAGRAM_BYTES} B sent by another thread \
             (medians over {ROUNDS} samples of {BATCHES_PER_SAMPLE} batches)"
        );
        for m in &modes {
            println!(
                "  {:<42} {:>6.1} us word to drained  {:>6.0} ns receiver CPU per datagram",
                m.name,
                median(&m.latency_us),
                median(&m.cpu_ns),
            );
        }
    });
}
