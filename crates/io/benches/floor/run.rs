//! The runs: each path moves batches on the same sockets, and the paths take turns, so that
//! a noisy neighbour slows them all alike.

use std::hint::black_box;
use std::io;
use std::mem::size_of;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use tickforge_io::udp::{wait_readable, IoStats, RecvBatch, SendBatch, SocketOptions, UdpSocket};

use crate::netns::{Side, Veth};
use crate::uring::{RecvMode, SendMode, Submit, UringRecv, UringSend};
use crate::wake;

/// Datagrams per batch: about one tick's snapshots for a small match.
pub const BATCH: usize = 10;
/// Bytes per datagram: a mid-sized snapshot.
pub const DATAGRAM_BYTES: usize = 300;
/// Slots of a draining receive batch: more than a batch, so one call empties the socket.
pub const RECV_SLOTS: usize = 64;
/// Samples per path, taken in turns with the other paths.
const ROUNDS: usize = 21;
/// Batches per sample: 5,000 datagrams, some tens of milliseconds.
const BATCHES_PER_SAMPLE: usize = 500;
/// How long an untimed drain waits for a batch before the bench gives up.
pub const PATIENCE: Duration = Duration::from_secs(5);
/// SO_BUSY_POLL, microseconds: the value the kernel's documentation suggests for sockets.
pub const BUSY_POLL_US: libc::c_int = 50;
/// The environment variable that asks for the veth runs (root only).
const VETH_VAR: &str = "TICKFORGE_BENCH_VETH";

pub fn main() {
    let loopback = || {
        UdpSocket::bind(
            "127.0.0.1:0".parse().expect("constant"),
            SocketOptions::default(),
        )
        .expect("bind 127.0.0.1")
    };
    floor("loopback", &loopback, &loopback);
    wake::wake("loopback", &loopback(), &loopback);

    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if std::env::var_os(VETH_VAR).is_none_or(|v| v != "1") {
        println!("\nskipped: veth (set {VETH_VAR}=1 and run as root)");
        return;
    }
    if !root {
        println!("\nskipped: veth (needs root to make namespaces)");
        return;
    }
    let veth = Veth::up().expect("veth pair between two namespaces");
    let a = || veth.bind(Side::A).expect("bind in namespace a");
    let b = || veth.bind(Side::B).expect("bind in namespace b");
    floor("veth", &a, &b);
    wake::wake("veth", &a(), &b);
    drop(veth);
}

/// Measures every path with senders from `tx_end` and receivers from `rx_end`.
fn floor(name: &str, tx_end: &dyn Fn() -> UdpSocket, rx_end: &dyn Fn() -> UdpSocket) {
    let tx = tx_end();
    let rx = rx_end();
    let to = rx.local_addr().expect("bound");
    let payload = [0xa5u8; DATAGRAM_BYTES];

    let mut sends = vec![Path::new("sendmmsg (today)", {
        let mut batch = SendBatch::with_capacity(BATCH, DATAGRAM_BYTES);
        let mut stats = IoStats::default();
        let mut sink = Sink::new();
        let (tx, rx) = (&tx, &rx);
        move |times: &mut Vec<Duration>| {
            for _ in 0..BATCHES_PER_SAMPLE {
                let start = Instant::now();
                for _ in 0..BATCH {
                    batch.push(to, black_box(&payload));
                }
                let sent = batch.flush(tx, &mut stats);
                times.push(start.elapsed());
                assert_eq!(sent, BATCH);
                sink.drain(rx, BATCH);
            }
        }
    })];
    for (label, submit, mode) in [
        ("io_uring sendmsg", Submit::Enter, SendMode::SendMsg),
        (
            "io_uring send_zc, registered buffer",
            Submit::Enter,
            SendMode::ZcFixed,
        ),
        (
            "io_uring sendmsg, SQPOLL",
            Submit::Sqpoll,
            SendMode::SendMsg,
        ),
    ] {
        let mut ring = UringSend::new(tx.as_raw_fd(), submit, mode).expect(label);
        let mut sink = Sink::new();
        let rx = &rx;
        sends.push(Path::new(label, move |times: &mut Vec<Duration>| {
            for _ in 0..BATCHES_PER_SAMPLE {
                let start = Instant::now();
                let sent = ring.send(to, black_box(&payload));
                times.push(start.elapsed());
                assert_eq!(sent, BATCH);
                sink.drain(rx, BATCH);
            }
        }));
    }
    alternate(&mut sends);
    report(
        &format!("{name}: send {BATCH} x {DATAGRAM_BYTES} B"),
        &sends,
    );
    drop(sends);

    // Each receive path has a socket of its own: a multishot receive, once armed, would
    // take datagrams meant for the others.
    let mut recvs = Vec::new();
    for (label, busy_poll) in [
        ("recvmmsg (today)", false),
        ("recvmmsg, SO_BUSY_POLL 50 us", true),
    ] {
        let rx = rx_end();
        if busy_poll {
            set_busy_poll(&rx).expect("SO_BUSY_POLL");
        }
        let to = rx.local_addr().expect("bound");
        let mut feed = Feed::new();
        let mut batch = RecvBatch::with_capacity(RECV_SLOTS);
        let mut stats = IoStats::default();
        let tx = &tx;
        recvs.push(Path::new(label, move |times: &mut Vec<Duration>| {
            for _ in 0..BATCHES_PER_SAMPLE {
                feed.send(tx, to);
                let start = Instant::now();
                let mut got = 0;
                while got < BATCH {
                    got += batch.fill(&rx, &mut stats);
                    black_box(&batch);
                }
                times.push(start.elapsed());
            }
        }));
    }
    for (label, submit, mode) in [
        ("io_uring recvmsg x10", Submit::Enter, RecvMode::RecvMsg),
        (
            "io_uring recvmsg multishot, buffer ring",
            Submit::Enter,
            RecvMode::Multishot,
        ),
        (
            "io_uring recvmsg x10, SQPOLL",
            Submit::Sqpoll,
            RecvMode::RecvMsg,
        ),
    ] {
        let rx = rx_end();
        // A blocking socket: io_uring polls it when nothing waits, rather than failing
        // the entry with EAGAIN.
        set_blocking(&rx).expect("blocking socket");
        let to = rx.local_addr().expect("bound");
        let mut ring = UringRecv::new(rx.as_raw_fd(), submit, mode).expect(label);
        let mut feed = Feed::new();
        let tx = &tx;
        recvs.push(Path::new(label, move |times: &mut Vec<Duration>| {
            let _rx = &rx;
            for _ in 0..BATCHES_PER_SAMPLE {
                feed.send(tx, to);
                let start = Instant::now();
                let got = ring.recv(BATCH);
                times.push(start.elapsed());
                assert_eq!(got, BATCH);
            }
        }));
    }
    alternate(&mut recvs);
    report(
        &format!("{name}: receive {BATCH} x {DATAGRAM_BYTES} B"),
        &recvs,
    );
}

/// Moves [`BATCHES_PER_SAMPLE`] batches, pushing the time of each one's measured side.
type RunSample<'a> = Box<dyn FnMut(&mut Vec<Duration>) + 'a>;

/// One path's runs and what they measured.
struct Path<'a> {
    name: &'static str,
    run: RunSample<'a>,
    /// Per sample: the median batch's nanoseconds per datagram. A median, not a mean, so
    /// that the batches a busy neighbour preempts do not count.
    ns_per_datagram: Vec<f64>,
    /// Per sample: CPU time of the process's other threads (an SQPOLL kernel thread, the
    /// only other thread while a sample runs) over wall time: the share of a core they use.
    others_cpu_per_wall: Vec<f64>,
}

impl<'a> Path<'a> {
    fn new(name: &'static str, run: impl FnMut(&mut Vec<Duration>) + 'a) -> Self {
        Path {
            name,
            run: Box::new(run),
            ns_per_datagram: Vec::new(),
            others_cpu_per_wall: Vec::new(),
        }
    }
}

/// Warms every path up, then takes [`ROUNDS`] samples of each, the paths in turns and each
/// round starting one path later.
fn alternate(paths: &mut [Path<'_>]) {
    let mut times = Vec::with_capacity(BATCHES_PER_SAMPLE);
    for p in paths.iter_mut() {
        (p.run)(&mut times);
        times.clear();
    }
    let n = paths.len();
    for round in 0..ROUNDS {
        for k in 0..n {
            let p = &mut paths[(round + k) % n];
            let (process, thread, wall) = (process_cpu(), thread_cpu(), Instant::now());
            (p.run)(&mut times);
            let wall = wall.elapsed();
            let others = (process_cpu() - process).saturating_sub(thread_cpu() - thread);
            times.sort_unstable();
            let batch = times[times.len() / 2];
            p.ns_per_datagram
                .push(batch.as_nanos() as f64 / BATCH as f64);
            p.others_cpu_per_wall
                .push(others.as_secs_f64() / wall.as_secs_f64());
            times.clear();
        }
    }
}

pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn report(title: &str, paths: &[Path<'_>]) {
    println!(
        "\n{title}, ns per datagram: median over {ROUNDS} samples of each sample's median \
         batch [quartiles of the samples], and the share of a core used by other threads"
    );
    let today = median(&paths[0].ns_per_datagram);
    for p in paths {
        let mut v = p.ns_per_datagram.clone();
        v.sort_by(f64::total_cmp);
        let m = median(&v);
        println!(
            "  {:<42} {:>6.0} ns  [{:>5.0} {:>5.0}]  {:>+4.0}% vs today  others {:.2} core",
            p.name,
            m,
            v[v.len() / 4],
            v[v.len() * 3 / 4],
            (m / today - 1.0) * 100.0,
            median(&p.others_cpu_per_wall),
        );
    }
}

/// The receiving end's untimed drain for send paths.
struct Sink {
    batch: RecvBatch,
    stats: IoStats,
}

impl Sink {
    fn new() -> Self {
        Sink {
            batch: RecvBatch::with_capacity(RECV_SLOTS),
            stats: IoStats::default(),
        }
    }

    /// Receives exactly `want` datagrams, waiting for late ones at most [`PATIENCE`].
    fn drain(&mut self, socket: &UdpSocket, want: usize) {
        let deadline = Instant::now() + PATIENCE;
        let mut got = self.batch.fill(socket, &mut self.stats);
        while got < want {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{got} of {want} datagrams arrived");
            wait_readable(&[socket], left).expect("ppoll");
            got += self.batch.fill(socket, &mut self.stats);
        }
        assert_eq!(got, want, "no stray datagrams");
    }
}

/// The sending end's untimed feed for receive paths.
struct Feed {
    batch: SendBatch,
    stats: IoStats,
}

impl Feed {
    fn new() -> Self {
        Feed {
            batch: SendBatch::with_capacity(BATCH, DATAGRAM_BYTES),
            stats: IoStats::default(),
        }
    }

    fn send(&mut self, socket: &UdpSocket, to: SocketAddr) {
        for i in 0..BATCH {
            self.batch.push(to, &[i as u8; DATAGRAM_BYTES]);
        }
        assert_eq!(self.batch.flush(socket, &mut self.stats), BATCH);
    }
}

/// CPU time of the whole process: every thread, io_uring's kernel threads included.
fn process_cpu() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time of the calling thread.
pub fn thread_cpu() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "{}", io::Error::last_os_error());
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// SO_BUSY_POLL (and SO_PREFER_BUSY_POLL) on `socket`: a receive that finds the queue
/// empty first polls the device's NAPI context for [`BUSY_POLL_US`]. Values above
/// net.core.busy_read need CAP_NET_ADMIN.
pub fn set_busy_poll(socket: &UdpSocket) -> io::Result<()> {
    setsockopt(socket, libc::SO_BUSY_POLL, BUSY_POLL_US)?;
    setsockopt(socket, libc::SO_PREFER_BUSY_POLL, 1)
}

fn setsockopt(socket: &UdpSocket, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: setsockopt reads one c_int we own, with its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Clears O_NONBLOCK on `socket`.
pub fn set_blocking(socket: &UdpSocket) -> io::Result<()> {
    let fd = socket.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, reading and then writing its flags.
    let rc = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
