//! Non-blocking UDP sockets and batches of datagrams.
//!
//! A worker receives into a [`RecvBatch`] and sends from a [`SendBatch`]; both own their
//! buffers, sized once, so a wake-up allocates nothing. Per-datagram errors are counted,
//! never fatal: `WouldBlock` ends a receive, a refused send counts as loss.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

/// Bytes of one receive slot: an Ethernet MTU, so an oversized datagram is read whole and
/// can be counted as oversized rather than silently truncated to a plausible size.
pub const SLOT_BYTES: usize = 1500;

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
        socket.bind(&addr.into())?;
        Ok(UdpSocket {
            inner: socket.into(),
        })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Receives one datagram; `Ok(None)` when none is waiting.
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

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

/// Waits until one of `fds` is readable or `timeout` passes; returns how many are ready.
pub fn wait_readable(fds: &mut Vec<libc::pollfd>, timeout: Duration) -> io::Result<usize> {
    for p in fds.iter_mut() {
        p.events = libc::POLLIN;
        p.revents = 0;
    }
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `fds` is a valid slice of pollfd for the length passed; `ts` outlives the
    // call; a null signal mask leaves the mask unchanged. ppoll, unlike poll, takes
    // nanoseconds, so a wait for a tick deadline is not rounded up to a millisecond.
    let n = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(e)
        };
    }
    Ok(n as usize)
}

/// Counters of a socket's traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Datagrams received.
    pub received: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Receive calls that failed with something other than `WouldBlock`.
    pub recv_errors: u64,
    /// Datagrams sent.
    pub sent: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Datagrams the kernel refused (counted as loss).
    pub send_errors: u64,
    /// Receive system calls made.
    pub recv_calls: u64,
    /// Send system calls made.
    pub send_calls: u64,
}

/// Datagrams received in one wake-up, in buffers owned by the batch.
pub struct RecvBatch {
    data: Vec<u8>,
    meta: Vec<(SocketAddr, usize)>,
    capacity: usize,
}

impl RecvBatch {
    /// A batch of up to `capacity` datagrams of [`SLOT_BYTES`] each.
    pub fn with_capacity(capacity: usize) -> Self {
        RecvBatch {
            data: vec![0; capacity * SLOT_BYTES],
            meta: Vec::with_capacity(capacity),
            capacity,
        }
    }

    /// Receives until the socket is empty or the batch is full; returns how many.
    pub fn fill(&mut self, socket: &UdpSocket, stats: &mut IoStats) -> usize {
        self.meta.clear();
        while self.meta.len() < self.capacity {
            let slot = self.meta.len();
            let buf = &mut self.data[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES];
            stats.recv_calls += 1;
            match socket.recv_from(buf) {
                Ok(Some((len, from))) => {
                    stats.received += 1;
                    stats.bytes_in += len as u64;
                    self.meta.push((from, len));
                }
                Ok(None) => break,
                // ICMP errors and the like concern one earlier datagram, not the socket.
                Err(_) => stats.recv_errors += 1,
            }
        }
        self.meta.len()
    }

    /// True when the last fill stopped because the batch was full.
    pub fn is_full(&self) -> bool {
        self.meta.len() == self.capacity
    }

    /// Datagrams of the last fill.
    pub fn len(&self) -> usize {
        self.meta.len()
    }

    /// True when the last fill received nothing.
    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }

    /// Datagram `i` of the last fill: its source and bytes.
    pub fn get(&self, i: usize) -> (SocketAddr, &[u8]) {
        let (from, len) = self.meta[i];
        (from, &self.data[i * SLOT_BYTES..i * SLOT_BYTES + len])
    }
}

/// Datagrams queued for sending at the end of a wake-up.
pub struct SendBatch {
    data: Vec<u8>,
    meta: Vec<(SocketAddr, usize, usize)>,
}

impl SendBatch {
    /// A batch that holds `datagrams` of up to `max_bytes` each without reallocating.
    pub fn with_capacity(datagrams: usize, max_bytes: usize) -> Self {
        SendBatch {
            data: Vec::with_capacity(datagrams * max_bytes),
            meta: Vec::with_capacity(datagrams),
        }
    }

    /// Queues one datagram.
    pub fn push(&mut self, to: SocketAddr, bytes: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(bytes);
        self.meta.push((to, start, bytes.len()));
    }

    /// Datagrams queued.
    pub fn len(&self) -> usize {
        self.meta.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }

    /// Sends everything queued and empties the batch; returns datagrams sent.
    pub fn flush(&mut self, socket: &UdpSocket, stats: &mut IoStats) -> usize {
        let mut sent = 0;
        for &(to, start, len) in &self.meta {
            stats.send_calls += 1;
            match socket.send_to(&self.data[start..start + len], to) {
                Ok(_) => {
                    sent += 1;
                    stats.sent += 1;
                    stats.bytes_out += len as u64;
                }
                Err(_) => stats.send_errors += 1,
            }
        }
        self.data.clear();
        self.meta.clear();
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn loopback() -> UdpSocket {
        UdpSocket::bind("127.0.0.1:0".parse().unwrap(), SocketOptions::default()).unwrap()
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

        let mut fds = vec![libc::pollfd {
            fd: b.as_raw_fd(),
            events: 0,
            revents: 0,
        }];
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut batch = RecvBatch::with_capacity(4);
        let mut got = Vec::new();
        while got.len() < 5 && Instant::now() < deadline {
            wait_readable(&mut fds, Duration::from_millis(100)).unwrap();
            batch.fill(&b, &mut stats);
            for i in 0..batch.len() {
                let (from, bytes) = batch.get(i);
                assert_eq!(from, a.local_addr().unwrap());
                got.push(bytes.to_vec());
            }
        }
        assert_eq!(got, (0..5u8).map(|i| vec![i; 10]).collect::<Vec<_>>());
        assert_eq!(stats.sent, 5);
        assert_eq!(stats.received, 5);
        assert_eq!(stats.bytes_in, 50);
    }

    #[test]
    fn empty_socket_reads_nothing_without_error() {
        let a = loopback();
        let mut batch = RecvBatch::with_capacity(4);
        let mut stats = IoStats::default();
        assert_eq!(batch.fill(&a, &mut stats), 0);
        assert_eq!(stats.recv_errors, 0);
    }
}
