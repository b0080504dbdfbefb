//! The portable path of [`crate::udp`]: std and socket2 calls, one datagram per call, on
//! every OS (Windows, macOS, iOS, Android, and Linux with the `portable-io` feature). The
//! batches' API and counters are the Linux path's; only the number of system calls
//! differs, and no datagram carries a kernel arrival stamp.

use std::io;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use socket2::{MaybeUninitSlice, SockRef, Socket};

use super::{recv_failed, IoStats, Received, RecvBatch, SendBatch, UdpSocket, SLOT_BYTES};

/// Datagrams one call takes: one, whatever a batch asks for.
pub(super) const MAX_MSGS_PER_CALL: usize = 1;

/// How often [`wait_readable`] looks at its sockets.
const CHECK_EVERY: Duration = Duration::from_micros(250);

/// No don't-fragment bit here: the option has a different name and meaning on each OS
/// (`IP_DONTFRAG`, `IP_DONTFRAGMENT`), and it is the Linux path's saving (no IP id drawn
/// per datagram), not a matter of correctness: game datagrams are sized to fit any path.
pub(super) fn dont_fragment(_socket: &Socket) -> io::Result<()> {
    Ok(())
}

/// [`super::wait_readable`] without a poll call common to every OS: a one-byte peek at
/// each socket, then a sleep of [`CHECK_EVERY`], until one is ready or time is up.
pub(super) fn wait_readable(sockets: &[&UdpSocket], timeout: Duration) -> io::Result<usize> {
    if sockets.len() > 64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "wait_readable takes at most 64 sockets",
        ));
    }
    // No deadline this far out: wait until a socket is ready.
    let deadline = Instant::now().checked_add(timeout);
    loop {
        let ready = sockets.iter().filter(|s| is_readable(s)).count();
        let now = Instant::now();
        let left = deadline.map(|d| d.saturating_duration_since(now));
        if ready > 0 || left.is_some_and(|l| l.is_zero()) {
            return Ok(ready);
        }
        std::thread::sleep(left.map_or(CHECK_EVERY, |l| l.min(CHECK_EVERY)));
    }
}

/// Whether a receive would return at once: a datagram waits, or an error the next receive
/// reports (Windows reports a datagram longer than the peek as an error, too).
fn is_readable(socket: &UdpSocket) -> bool {
    let mut byte = [0u8; 1];
    match socket.inner.peek_from(&mut byte) {
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
        ),
    }
}

/// A [`RecvBatch`] keeps nothing more on this path.
pub(super) struct RecvState;

impl RecvState {
    pub(super) fn new(_capacity: usize, _per_call: usize) -> Self {
        RecvState
    }

    /// No kernel stamps on this path: every arrival stays `None`.
    pub(super) fn take_timestamps(&mut self, _capacity: usize) {}
}

/// A [`SendBatch`] keeps nothing more on this path.
pub(super) struct SendState;

impl SendState {
    pub(super) fn new(_per_call: usize) -> Self {
        SendState
    }
}

impl RecvBatch {
    /// Receives until the socket is empty or the batch is full; returns how many.
    ///
    /// One receive call per datagram, plus the one that finds the socket empty; call again
    /// while [`RecvBatch::is_full`]. Failed calls are counted in [`IoStats::recv_errors`]
    /// and retried a few times.
    pub fn fill(&mut self, socket: &UdpSocket, stats: &mut IoStats) -> usize {
        self.received.clear();
        self.slots_used = 0;
        let sock = SockRef::from(&socket.inner);
        let mut failed_calls = 0;
        while self.slots_used < self.capacity {
            let slot = self.slots_used;
            let buf = &mut self.data[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES];
            // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have one layout, and the receive below
            // only writes bytes the kernel copied (initialized) into it, so the slot stays
            // initialized for the `&mut [u8]` it came from.
            let uninit = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
            let mut bufs = [MaybeUninitSlice::new(uninit)];
            stats.recv_calls += 1;
            match sock.recv_from_vectored(&mut bufs) {
                Ok((n, flags, addr)) => {
                    self.slots_used += 1;
                    let Some(from) = addr.as_socket() else {
                        stats.recv_errors += 1;
                        continue;
                    };
                    let len = n.min(SLOT_BYTES);
                    let truncated = flags.is_truncated();
                    stats.received += 1;
                    stats.bytes_in += len as u64;
                    stats.truncated += u64::from(truncated);
                    self.received.push(Received {
                        from,
                        to: None,
                        slot,
                        len,
                        truncated,
                        stamp: None,
                    });
                }
                Err(e) => {
                    if recv_failed(&e, &mut failed_calls, stats) {
                        break;
                    }
                }
            }
        }
        self.received.len()
    }
}

impl SendBatch {
    /// Sends everything queued and empties the batch; returns datagrams sent.
    ///
    /// One send call per datagram. A datagram the OS refuses is counted in
    /// [`IoStats::send_errors`] and skipped; when the socket's send buffer is full
    /// (`WouldBlock`) everything still queued is counted as loss, since an immediate retry
    /// would meet the same full buffer.
    pub fn flush(&mut self, socket: &UdpSocket, stats: &mut IoStats) -> usize {
        let mut sent = 0;
        for (i, q) in self.queued.iter().enumerate() {
            if q.from.is_some() {
                // No portable way to choose the source address.
                stats.send_errors += 1;
                continue;
            }
            stats.send_calls += 1;
            match socket
                .inner
                .send_to(&self.data[q.start..q.start + q.len], q.to)
            {
                Ok(_) => {
                    stats.sent += 1;
                    stats.bytes_out += q.len as u64;
                    sent += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    stats.send_errors += (self.queued.len() - i) as u64;
                    break;
                }
                Err(_) => stats.send_errors += 1,
            }
        }
        self.data.clear();
        self.queued.clear();
        sent
    }
}
