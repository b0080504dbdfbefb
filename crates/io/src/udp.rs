//! Non-blocking UDP sockets and batches of datagrams.
//!
//! A worker receives into a [`RecvBatch`] and sends from a [`SendBatch`]; both own their
//! buffers, sized once, so a wake-up allocates nothing. On Linux a batch crosses into the
//! kernel in as few system calls as it can: `recvmmsg(2)` reads every waiting datagram, up
//! to the batch's capacity, in one call; `sendmmsg(2)` writes a whole batch in one call.
//! On the portable path (every other OS, or the `portable-io` feature) the same batches
//! make one std/socket2 call per datagram: the same results, more system calls. The path is
//! chosen at compile time, so the Linux path pays nothing for the other's existence.
//!
//! Per-datagram errors are counted, never fatal: `WouldBlock` ends a receive, a refused send
//! counts as loss, and a datagram longer than a receive slot is flagged as truncated rather
//! than passed on as a plausible shorter one.
//!
//! No UDP GSO (`UDP_SEGMENT`) and no GRO. GSO hands the kernel one buffer that it cuts into
//! equal-sized datagrams for one destination. A tick sends one snapshot to each of many
//! clients, so a batch holds runs of length one to each destination and GSO would save
//! nothing; supporting it would still cost a grouping pass, a control message per call, and
//! a fallback for devices that refuse it (`EIO`). GRO is the same trade on receive: each
//! client sends one input per tick, so there is nothing to coalesce.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::arrival::ArrivalTime;

#[cfg(linux_io)]
mod linux;
#[cfg(linux_io)]
use linux as sys;
#[cfg(linux_io)]
pub(crate) use linux::read_sockaddr;
#[cfg(not(linux_io))]
mod portable;
#[cfg(not(linux_io))]
use portable as sys;

/// Bytes of one receive slot: an Ethernet MTU. The kernel cuts a longer datagram to this
/// length; [`RecvBatch`] flags it ([`RecvBatch::is_truncated`]) and counts it
/// ([`IoStats::truncated`]) so the caller drops it as oversized.
pub const SLOT_BYTES: usize = 1500;

/// Failed receive calls one fill tolerates before leaving the rest to the next wake-up.
/// A reported error (ECONNREFUSED after an ICMP message) is cleared by the call that reports
/// it, so a retry normally gets data or `WouldBlock`; the bound keeps a socket that keeps
/// failing from turning a fill into a spin.
const MAX_FAILED_RECV_CALLS: u32 = 8;

/// What a receive call that failed with `e` means for the batch, on either path: `true`
/// when the batch stops (nothing waits, or [`MAX_FAILED_RECV_CALLS`] calls have failed).
/// An error other than "would block" or an interrupt concerns one earlier datagram (an
/// ICMP error; Windows reports a port unreachable as a reset), not the socket, and the
/// call that reports it clears it: counted, and the batch goes on.
fn recv_failed(e: &io::Error, failed_calls: &mut u32, stats: &mut IoStats) -> bool {
    match e.kind() {
        io::ErrorKind::WouldBlock => return true,
        io::ErrorKind::Interrupted => {}
        _ => stats.recv_errors += 1,
    }
    *failed_calls += 1;
    *failed_calls == MAX_FAILED_RECV_CALLS
}

/// Kernel buffer sizes for a socket.
#[derive(Clone, Copy, Debug)]
pub struct SocketOptions {
    /// SO_RCVBUF in bytes; `None` keeps the OS default.
    pub recv_buffer_bytes: Option<usize>,
    /// SO_SNDBUF in bytes; `None` keeps the OS default.
    pub send_buffer_bytes: Option<usize>,
}

impl Default for SocketOptions {
    fn default() -> Self {
        // 4 MiB: a burst of a whole worker's clients (the AWS tuning paper raises
        // rmem/wmem for the same reason). The kernel caps it at net.core.rmem_max.
        SocketOptions {
            recv_buffer_bytes: Some(4 << 20),
            send_buffer_bytes: Some(4 << 20),
        }
    }
}

/// A non-blocking UDP socket.
pub struct UdpSocket {
    inner: std::net::UdpSocket,
}

impl UdpSocket {
    /// Binds a non-blocking socket to `addr` (port 0 picks a free port).
    pub fn bind(addr: SocketAddr, options: SocketOptions) -> io::Result<Self> {
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        if let Some(n) = options.recv_buffer_bytes {
            // Best effort: an unprivileged process may get less than it asks for.
            let _ = socket.set_recv_buffer_size(n);
        }
        if let Some(n) = options.send_buffer_bytes {
            let _ = socket.set_send_buffer_size(n);
        }
        socket.set_nonblocking(true)?;
        if addr.is_ipv4() {
            sys::dont_fragment(&socket)?;
        }
        socket.bind(&addr.into())?;
        Ok(UdpSocket {
            inner: socket.into(),
        })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Receives one datagram; `Ok(None)` when none is waiting. A datagram longer than `buf`
    /// is cut to its length without notice: use a [`RecvBatch`] where that matters.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        match self.inner.recv_from(buf) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends one datagram.
    pub fn send_to(&self, buf: &[u8], addr: SocketAddr) -> io::Result<usize> {
        self.inner.send_to(buf, addr)
    }
}

#[cfg(unix)]
impl std::os::fd::AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.inner.as_raw_fd()
    }
}

#[cfg(windows)]
impl std::os::windows::io::AsRawSocket for UdpSocket {
    fn as_raw_socket(&self) -> std::os::windows::io::RawSocket {
        self.inner.as_raw_socket()
    }
}

/// Waits until one of `sockets` is readable (a datagram or a pending error waits) or
/// `timeout` passes; returns how many are ready. At most 64 sockets.
///
/// On Linux one `ppoll(2)` call, to the nanosecond. On the portable path a check of each
/// socket (a one-byte peek) every quarter millisecond: a development server's waits are
/// that much coarser, and nothing on a worker's tick waits here.
pub fn wait_readable(sockets: &[&UdpSocket], timeout: Duration) -> io::Result<usize> {
    sys::wait_readable(sockets, timeout)
}

/// Counters of a socket's traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Datagrams received, truncated ones included.
    pub received: u64,
    /// Bytes received, as read: a truncated datagram counts [`SLOT_BYTES`].
    pub bytes_in: u64,
    /// Received datagrams longer than [`SLOT_BYTES`], read cut to that length.
    pub truncated: u64,
    /// Receive calls that failed with something other than `WouldBlock` (or `Interrupted`),
    /// and datagrams whose source address could not be read.
    pub recv_errors: u64,
    /// Datagrams sent.
    pub sent: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Datagrams the kernel refused (counted as loss).
    pub send_errors: u64,
    /// Receive system calls made: one per `recvmmsg`, including those that found nothing.
    pub recv_calls: u64,
    /// Send system calls made: one per `sendmmsg`, including those that failed.
    pub send_calls: u64,
}

impl IoStats {
    /// Datagrams received per receive system call, 0 before the first call. Above 1 when
    /// batching pays; a worker that wakes for one datagram at a time stays near 1.
    pub fn datagrams_per_recv_call(&self) -> f64 {
        per_call(self.received, self.recv_calls)
    }

    /// Datagrams sent per send system call, 0 before the first call.
    pub fn datagrams_per_send_call(&self) -> f64 {
        per_call(self.sent, self.send_calls)
    }
}

fn per_call(datagrams: u64, calls: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        datagrams as f64 / calls as f64
    }
}

/// One datagram of the last fill.
#[derive(Clone, Copy, Debug)]
struct Received {
    from: SocketAddr,
    /// The IPv4 address it was sent to, on a socket with [`UdpSocket::enable_destinations`].
    to: Option<std::net::Ipv4Addr>,
    slot: usize,
    len: usize,
    truncated: bool,
    stamp: Option<ArrivalTime>,
}

/// Datagrams received in one wake-up, in buffers owned by the batch.
pub struct RecvBatch {
    /// One slot of [`SLOT_BYTES`] per datagram.
    data: Vec<u8>,
    /// Slots in `data`.
    capacity: usize,
    /// What this I/O path keeps for its receive calls (nothing on the portable path).
    #[cfg_attr(not(linux_io), allow(dead_code))]
    sys: sys::RecvState,
    received: Vec<Received>,
    /// Slots the last fill used; a slot whose source could not be read holds no datagram.
    slots_used: usize,
}

impl RecvBatch {
    /// A batch of up to `capacity` datagrams of [`SLOT_BYTES`] each, allocated here once.
    ///
    /// # Panics
    /// If `capacity` is zero: such a batch would always be full.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_calls_of(capacity, sys::MAX_MSGS_PER_CALL)
    }

    /// A batch that asks the kernel for at most `per_call` datagrams per call; tests make
    /// it small to take the several-calls path with few datagrams.
    fn with_calls_of(capacity: usize, per_call: usize) -> Self {
        assert!(capacity > 0, "a receive batch needs at least one slot");
        RecvBatch {
            data: vec![0; capacity * SLOT_BYTES],
            capacity,
            sys: sys::RecvState::new(capacity, per_call),
            received: Vec::with_capacity(capacity),
            slots_used: 0,
        }
    }

    /// A batch like [`RecvBatch::with_capacity`] that also reads each datagram's arrival
    /// stamp ([`RecvBatch::arrival`]), for sockets with [`UdpSocket::enable_rx_timestamps`]
    /// on: one `recvmmsg` then gives what a `recv_stamped` loop took a call per datagram,
    /// plus one more to find the socket empty, for. The portable path has no kernel stamps:
    /// there every arrival is `None`. The same room holds each datagram's destination, for
    /// a socket with [`UdpSocket::enable_destinations`] on ([`RecvBatch::destination`]).
    pub fn with_timestamps(capacity: usize) -> Self {
        let mut batch = Self::with_capacity(capacity);
        batch.sys.take_timestamps(capacity);
        batch
    }

    /// True when the last fill stopped because the batch was full.
    pub fn is_full(&self) -> bool {
        self.slots_used == self.capacity
    }

    /// Datagrams the batch holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Datagrams of the last fill.
    pub fn len(&self) -> usize {
        self.received.len()
    }

    /// True when the last fill received nothing.
    pub fn is_empty(&self) -> bool {
        self.received.is_empty()
    }

    /// Datagram `i` of the last fill: its source and bytes. A truncated datagram
    /// ([`RecvBatch::is_truncated`]) gives its first [`SLOT_BYTES`] bytes, which are not a
    /// valid datagram.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn get(&self, i: usize) -> (SocketAddr, &[u8]) {
        let r = &self.received[i];
        let start = r.slot * SLOT_BYTES;
        (r.from, &self.data[start..start + r.len])
    }

    /// Datagram `i` of the last fill, mutable, so that it can be decrypted in place.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn get_mut(&mut self, i: usize) -> (SocketAddr, &mut [u8]) {
        let r = &self.received[i];
        let start = r.slot * SLOT_BYTES;
        (r.from, &mut self.data[start..start + r.len])
    }

    /// When datagram `i` of the last fill arrived, as the kernel stamped it: `None` unless
    /// the batch was made [`RecvBatch::with_timestamps`] and the socket stamps.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn arrival(&self, i: usize) -> Option<ArrivalTime> {
        self.received[i].stamp
    }

    /// The IPv4 address datagram `i` of the last fill was sent to: `Some` for a socket
    /// with [`UdpSocket::enable_destinations`] on and a batch made
    /// [`RecvBatch::with_timestamps`] (which gives each slot room for what the kernel says
    /// of a datagram besides its bytes), `None` otherwise. One socket bound to the wildcard
    /// address then serves many local addresses, and this says which one a datagram is for.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn destination(&self, i: usize) -> Option<std::net::Ipv4Addr> {
        self.received[i].to
    }

    /// True when datagram `i` of the last fill was longer than [`SLOT_BYTES`] and was cut.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn is_truncated(&self, i: usize) -> bool {
        self.received[i].truncated
    }
}

/// One queued datagram: its destination and where its bytes sit in the batch's buffer.
#[derive(Clone, Copy, Debug)]
struct Queued {
    to: SocketAddr,
    /// The source address it is sent from ([`SendBatch::push_from`]); `None`: the socket's.
    from: Option<std::net::Ipv4Addr>,
    start: usize,
    len: usize,
}

/// Datagrams queued for sending at the end of a wake-up.
pub struct SendBatch {
    data: Vec<u8>,
    queued: Vec<Queued>,
    /// What this I/O path keeps for its send calls (nothing on the portable path).
    #[cfg_attr(not(linux_io), allow(dead_code))]
    sys: sys::SendState,
}

impl SendBatch {
    /// A batch that holds `datagrams` of up to `max_bytes` each without reallocating.
    /// Queueing more grows it once; the larger buffers are kept.
    pub fn with_capacity(datagrams: usize, max_bytes: usize) -> Self {
        Self::with_calls_of(datagrams, max_bytes, sys::MAX_MSGS_PER_CALL)
    }

    /// A batch that hands the kernel at most `per_call` datagrams per call; tests make it
    /// small to take the several-calls path with few datagrams.
    fn with_calls_of(datagrams: usize, max_bytes: usize, per_call: usize) -> Self {
        let per_call = datagrams.clamp(1, per_call);
        SendBatch {
            data: Vec::with_capacity(datagrams * max_bytes),
            queued: Vec::with_capacity(datagrams),
            sys: sys::SendState::new(per_call),
        }
    }

    /// Queues one datagram.
    pub fn push(&mut self, to: SocketAddr, bytes: &[u8]) {
        self.queue(None, to, bytes);
    }

    /// Queues one datagram sent from the local IPv4 address `from` (`IP_PKTINFO`), for a
    /// socket bound to the wildcard address that stands for many local addresses (a load
    /// generator's clients, each on its own loopback address). Linux only: where
    /// [`UdpSocket::enable_destinations`] fails, the flush counts such a datagram in
    /// [`IoStats::send_errors`] and does not send it.
    pub fn push_from(&mut self, from: std::net::Ipv4Addr, to: SocketAddr, bytes: &[u8]) {
        self.queue(Some(from), to, bytes);
    }

    fn queue(&mut self, from: Option<std::net::Ipv4Addr>, to: SocketAddr, bytes: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(bytes);
        self.queued.push(Queued {
            to,
            from,
            start,
            len: bytes.len(),
        });
    }

    /// Datagrams queued.
    pub fn len(&self) -> usize {
        self.queued.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// Queued datagram `i`: its destination and bytes. For tests and inspection; sending
    /// needs only [`SendBatch::flush`].
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn get(&self, i: usize) -> (SocketAddr, &[u8]) {
        let q = &self.queued[i];
        (q.to, &self.data[q.start..q.start + q.len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// How long a test waits for loopback datagrams before it fails.
    const PATIENCE: Duration = Duration::from_secs(5);

    fn bind(addr: &str) -> io::Result<UdpSocket> {
        UdpSocket::bind(addr.parse().unwrap(), SocketOptions::default())
    }

    fn loopback() -> UdpSocket {
        bind("127.0.0.1:0").unwrap()
    }

    /// Bytes that differ between datagrams and along each one.
    fn pattern(seed: usize, len: usize) -> Vec<u8> {
        (0..len).map(|j| (seed * 31 + j) as u8).collect()
    }

    /// Waits for and receives datagrams until `want` have arrived or [`PATIENCE`] runs
    /// out; returns each one's source, bytes and truncation flag, in arrival order.
    fn receive(
        socket: &UdpSocket,
        batch: &mut RecvBatch,
        stats: &mut IoStats,
        want: usize,
    ) -> Vec<(SocketAddr, Vec<u8>, bool)> {
        let deadline = Instant::now() + PATIENCE;
        let mut got = Vec::new();
        while got.len() < want {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            wait_readable(&[socket], deadline - now).unwrap();
            loop {
                batch.fill(socket, stats);
                for i in 0..batch.len() {
                    let (from, bytes) = batch.get(i);
                    got.push((from, bytes.to_vec(), batch.is_truncated(i)));
                }
                if !batch.is_full() {
                    break;
                }
            }
        }
        got
    }

    #[test]
    fn batches_carry_datagrams_both_ways() {
        let a = loopback();
        let b = loopback();
        let to = b.local_addr().unwrap();
        let mut out = SendBatch::with_capacity(8, 64);
        let mut stats = IoStats::default();
        for i in 0..5u8 {
            out.push(to, &[i; 10]);
        }
        assert_eq!(out.flush(&a, &mut stats), 5);
        assert!(out.is_empty());

        // Four slots for five datagrams: the first fill is full, the caller fills again.
        let mut batch = RecvBatch::with_capacity(4);
        let got = receive(&b, &mut batch, &mut stats, 5);
        let from = a.local_addr().unwrap();
        let want: Vec<_> = (0..5u8).map(|i| (from, vec![i; 10], false)).collect();
        assert_eq!(got, want);
        assert_eq!(stats.sent, 5);
        assert_eq!(stats.received, 5);
        assert_eq!(stats.bytes_in, 50);
    }

    #[test]
    fn varied_sizes_round_trip_in_few_calls() {
        let a = loopback();
        let b = loopback();
        let to = b.local_addr().unwrap();
        let sizes = [0, 1, 17, 300, 64, 512, 1199, 1200, 3, 1472, 900, SLOT_BYTES];
        let mut out = SendBatch::with_capacity(sizes.len(), SLOT_BYTES);
        let mut tx = IoStats::default();
        for (i, &len) in sizes.iter().enumerate() {
            out.push(to, &pattern(i, len));
        }
        assert_eq!(out.len(), sizes.len());
        assert_eq!(out.get(3), (to, &pattern(3, sizes[3])[..]));
        assert_eq!(out.flush(&a, &mut tx), sizes.len());
        // Linux: one sendmmsg; portable: one send per datagram.
        let calls = if cfg!(linux_io) { 1 } else { sizes.len() };
        assert_eq!(tx.send_calls, calls as u64);
        assert_eq!(
            tx.datagrams_per_send_call(),
            sizes.len() as f64 / calls as f64
        );
        assert_eq!(tx.bytes_out, sizes.iter().sum::<usize>() as u64);

        let mut batch = RecvBatch::with_capacity(64);
        let mut rx = IoStats::default();
        let got = receive(&b, &mut batch, &mut rx, sizes.len());
        let from = a.local_addr().unwrap();
        let want: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, &len)| (from, pattern(i, len), false))
            .collect();
        assert_eq!(got, want);
        assert_eq!(rx.bytes_in, tx.bytes_out);
        assert_eq!(rx.truncated, 0);
        // Batching pays on Linux; the portable path reads one datagram per call.
        #[cfg(linux_io)]
        assert!(
            rx.datagrams_per_recv_call() > 1.0,
            "{} datagrams took {} receive calls",
            rx.received,
            rx.recv_calls
        );
    }

    #[test]
    fn batches_longer_than_one_call_take_several() {
        let a = loopback();
        let b = loopback();
        let to = b.local_addr().unwrap();
        let mut out = SendBatch::with_calls_of(8, 16, 3);
        let mut tx = IoStats::default();
        for i in 0..8 {
            out.push(to, &pattern(i, 16));
        }
        assert_eq!(out.flush(&a, &mut tx), 8);
        // Linux: 3 + 3 + 2; portable: one call per datagram.
        assert_eq!(tx.send_calls, if cfg!(linux_io) { 3 } else { 8 });

        // Eight slots, three per call: a full fill takes three calls.
        let mut batch = RecvBatch::with_calls_of(8, 3);
        let mut rx = IoStats::default();
        let got = receive(&b, &mut batch, &mut rx, 8);
        let want: Vec<_> = (0..8)
            .map(|i| (a.local_addr().unwrap(), pattern(i, 16), false))
            .collect();
        assert_eq!(got, want);
        // Right slots across calls, or the bytes above would differ; no call over three.
        assert!(rx.recv_calls >= 3, "{rx:?}");

        // Five waiting: a call of three, then a short call of two ends the fill.
        for i in 0..5 {
            out.push(to, &pattern(i, 16));
        }
        assert_eq!(out.flush(&a, &mut tx), 5);
        let mut rx = IoStats::default();
        assert_eq!(receive(&b, &mut batch, &mut rx, 5).len(), 5);
        assert!(!batch.is_full());
    }

    #[test]
    fn oversize_datagram_is_flagged_truncated() {
        let a = loopback();
        let b = loopback();
        let to = b.local_addr().unwrap();
        let big = pattern(1, 2000);
        let small = pattern(2, 100);
        a.send_to(&big, to).unwrap();
        a.send_to(&small, to).unwrap();

        let mut batch = RecvBatch::with_capacity(8);
        let mut rx = IoStats::default();
        let got = receive(&b, &mut batch, &mut rx, 2);
        let from = a.local_addr().unwrap();
        assert_eq!(
            got,
            vec![
                (from, big[..SLOT_BYTES].to_vec(), true),
                (from, small, false)
            ]
        );
        assert_eq!(rx.truncated, 1);
        assert_eq!(rx.received, 2);
        assert_eq!(rx.recv_errors, 0);
    }

    #[test]
    fn refused_datagrams_are_counted_and_the_rest_still_go_out() {
        let a = loopback();
        let b = loopback();
        let to = b.local_addr().unwrap();
        let closed = loopback().local_addr().unwrap();
        let mut out = SendBatch::with_capacity(8, 64);
        let mut tx = IoStats::default();
        out.push(to, b"one");
        out.push("127.0.0.1:0".parse().unwrap(), b"port zero: EINVAL");
        out.push(to, b"two");
        // Accepted: an unconnected socket is not told about the ICMP reply. It is loss.
        out.push(closed, b"closed port");
        out.push("[::1]:9".parse().unwrap(), b"IPv6 on IPv4: EAFNOSUPPORT");
        out.push(to, &[0; 70_000]); // EMSGSIZE
        out.push(to, b"three");
        assert_eq!(out.flush(&a, &mut tx), 4);
        assert!(out.is_empty());
        assert_eq!(tx.sent, 4);
        assert_eq!(tx.send_errors, 3);
        // sendmmsg stops at each refusal: [one] [port zero] [two, closed port] [IPv6]
        // [70 000 bytes] [three]. The portable path sends one datagram per call.
        assert_eq!(tx.send_calls, if cfg!(linux_io) { 6 } else { 7 });
        assert_eq!(tx.bytes_out, (3 + 3 + 11 + 5) as u64);

        let mut batch = RecvBatch::with_capacity(8);
        let mut rx = IoStats::default();
        let got: Vec<_> = receive(&b, &mut batch, &mut rx, 3)
            .into_iter()
            .map(|(_, bytes, _)| bytes)
            .collect();
        assert_eq!(got, [&b"one"[..], b"two", b"three"]);
    }

    /// Linux only: IP_RECVERR, and POLLERR to see its error arrive.
    #[cfg(linux_io)]
    #[test]
    fn a_receive_error_is_counted_and_the_fill_goes_on() {
        use std::mem::size_of;
        use std::os::fd::AsRawFd;
        let a = loopback();
        let b = loopback();
        let closed = loopback().local_addr().unwrap();
        // With IP_RECVERR an unconnected socket hears the ICMP port unreachable and its
        // next receive fails with ECONNREFUSED.
        let on: libc::c_int = 1;
        // SAFETY: the option value is one c_int that outlives the call, with its size.
        let rc = unsafe {
            libc::setsockopt(
                a.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_RECVERR,
                (&on as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        a.send_to(b"nobody", closed).unwrap();
        let mut fd = libc::pollfd {
            fd: a.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let deadline = Instant::now() + PATIENCE;
        while fd.revents & libc::POLLERR == 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no ICMP error arrived");
            // SAFETY: poll reads and writes one pollfd we own.
            unsafe { libc::poll(&mut fd, 1, left.as_millis().max(1) as libc::c_int) };
        }

        let to = a.local_addr().unwrap();
        for i in 0..3 {
            b.send_to(&pattern(i, 40), to).unwrap();
        }
        let mut batch = RecvBatch::with_capacity(8);
        let mut rx = IoStats::default();
        let got = receive(&a, &mut batch, &mut rx, 3);
        assert_eq!(got.len(), 3);
        assert_eq!(rx.recv_errors, 1);
        assert_eq!(rx.received, 3);
    }

    #[test]
    fn ipv6_loopback_round_trips() {
        let (a, b) = match (bind("[::1]:0"), bind("[::1]:0")) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                // Straight to standard error: libtest shows a passing test's output only
                // under --nocapture, and a skip must show in every run.
                use std::io::Write as _;
                let _ = writeln!(
                    std::io::stderr(),
                    "skipped: ipv6_loopback_round_trips: cannot bind [::1]: {e}"
                );
                return;
            }
        };
        let to = b.local_addr().unwrap();
        let mut out = SendBatch::with_capacity(4, 400);
        let mut tx = IoStats::default();
        for i in 0..4 {
            out.push(to, &pattern(i, 300 + i));
        }
        assert_eq!(out.flush(&a, &mut tx), 4);

        let mut batch = RecvBatch::with_capacity(16);
        let mut rx = IoStats::default();
        let got = receive(&b, &mut batch, &mut rx, 4);
        let from = a.local_addr().unwrap();
        assert!(matches!(from, SocketAddr::V6(v6) if v6.ip().is_loopback()));
        let want: Vec<_> = (0..4).map(|i| (from, pattern(i, 300 + i), false)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_wait_times_out_on_an_empty_socket_and_ends_for_a_datagram() {
        let a = loopback();
        let b = loopback();
        let began = Instant::now();
        assert_eq!(
            wait_readable(&[&a, &b], Duration::from_millis(20)).unwrap(),
            0
        );
        assert!(began.elapsed() >= Duration::from_millis(20));
        a.send_to(b"wake", b.local_addr().unwrap()).unwrap();
        assert_eq!(wait_readable(&[&a, &b], PATIENCE).unwrap(), 1);
        // The wait left the datagram for the receive.
        let mut buf = [0u8; 8];
        assert_eq!(b.recv_from(&mut buf).unwrap().map(|(n, _)| n), Some(4));
        let many: Vec<&UdpSocket> = (0..65).map(|_| &a).collect();
        assert!(wait_readable(&many, Duration::ZERO).is_err());
    }

    #[test]
    fn empty_socket_reads_nothing_without_error() {
        let a = loopback();
        let mut batch = RecvBatch::with_capacity(4);
        let mut stats = IoStats::default();
        assert_eq!(batch.fill(&a, &mut stats), 0);
        assert!(batch.is_empty());
        assert!(!batch.is_full());
        assert_eq!(stats.recv_errors, 0);
        assert_eq!(stats.recv_calls, 1);
        assert_eq!(stats.datagrams_per_recv_call(), 0.0);
    }

    /// One wildcard socket stands for several loopback addresses: it sends from each
    /// (`push_from`) and says which each reply was sent to (`destination`), interleaved
    /// with a datagram from the socket's own address.
    #[cfg(linux_io)]
    #[test]
    fn one_socket_sends_from_and_receives_for_many_loopback_addresses() {
        let shared = bind("0.0.0.0:0").unwrap();
        shared.enable_destinations().unwrap();
        shared.enable_rx_timestamps().unwrap();
        let port = shared.local_addr().unwrap().port();
        let server = loopback();
        let to = server.local_addr().unwrap();
        let sources: Vec<std::net::Ipv4Addr> = (1..=3).map(|k| [127, 1, 0, k].into()).collect();
        let mut out = SendBatch::with_capacity(8, 64);
        let mut stats = IoStats::default();
        for (k, &ip) in sources.iter().enumerate() {
            out.push_from(ip, to, &[k as u8; 12]);
        }
        out.push(to, &[9; 12]);
        assert_eq!(out.flush(&shared, &mut stats), 4);
        assert_eq!(stats.send_errors, 0);
        assert_eq!(stats.send_calls, 1, "one sendmmsg for every source");

        let mut batch = RecvBatch::with_capacity(8);
        let got = receive(&server, &mut batch, &mut stats, 4);
        let mut want: Vec<_> = sources
            .iter()
            .enumerate()
            .map(|(k, &ip)| (SocketAddr::from((ip, port)), vec![k as u8; 12], false))
            .collect();
        // Unbound to an address, the socket's own datagrams leave from 127.0.0.1.
        want.push((SocketAddr::from(([127, 0, 0, 1], port)), vec![9; 12], false));
        assert_eq!(got, want);

        // The server answers each source; the shared socket tells them apart.
        for (from, bytes, _) in &got {
            server.send_to(bytes, *from).unwrap();
        }
        let mut batch = RecvBatch::with_timestamps(8);
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        while seen.len() < 4 && Instant::now() < deadline {
            wait_readable(&[&shared], deadline - Instant::now()).unwrap();
            batch.fill(&shared, &mut stats);
            for i in 0..batch.len() {
                assert!(batch.arrival(i).is_some(), "stamps still read beside it");
                seen.push((batch.destination(i), batch.get(i).1[0]));
            }
        }
        let mut want: Vec<_> = (0..3u8)
            .map(|k| (Some(sources[usize::from(k)]), k))
            .collect();
        want.push((Some([127, 0, 0, 1].into()), 9));
        assert_eq!(seen, want);

        // A batch without room for control messages gives no destination.
        let plain = loopback();
        plain
            .send_to(&[1], SocketAddr::from(([127, 0, 0, 1], port)))
            .unwrap();
        let mut bare = RecvBatch::with_capacity(2);
        let got = receive(&shared, &mut bare, &mut stats, 1);
        assert_eq!(got.len(), 1);
        assert_eq!(bare.destination(0), None);
    }

    #[test]
    fn batches_can_move_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<RecvBatch>();
        send_sync::<SendBatch>();
    }
}
