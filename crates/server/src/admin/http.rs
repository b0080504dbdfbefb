//! The admin server's HTTP/1.1 transport: hyper's server connections on a tokio
//! current-thread runtime, all on the one admin thread.
//!
//! Why hyper: it is the most used and most scrutinised HTTP implementation in Rust, and it
//! has, per connection, the controls this port needs against a client that misbehaves: a
//! cap on header bytes (`max_header_size`, answered with 431) and header count
//! (`max_headers`), keep-alive, graceful shutdown, and a read timeout. On one
//! current-thread runtime a stalled connection is a parked task, not a thread: thousands
//! cost memory, not threads, and none can hold up another. What hyper leaves to its user is
//! done here:
//!
//! - deadlines: a request's head must arrive within `header_timeout` of its first byte,
//!   and its body within `body_timeout` (in the handler); an idle keep-alive connection
//!   is closed after `idle_timeout` (hyper's own header timer runs from the end of the
//!   previous response, so it is only a backstop, and both bounds are enforced here, by
//!   watching the bytes read and the responses flushed);
//! - a response must be taken by the client within `header_timeout` of being handed to
//!   hyper (a client that never reads its answers is closed, not left to the idle bound);
//!   the connection counts as idle only once its response is flushed (one limit: the
//!   start of a pipelined head that hyper already holds in its buffer is not seen here,
//!   so until more of it arrives that connection counts as idle: bounded by the idle
//!   timeout, and the first closed at the cap);
//! - a cap on open connections: at the cap, a new connection closes the one idle the
//!   longest (then the one slowest to send its head or take its response, then the oldest
//!   request), so a probe is always served;
//! - counts of the connections closed by the server rather than the client
//!   ([`CLOSE_REASONS`], `tickforge_admin_connections_closed_total{reason}` in
//!   `/metrics`), so an alert can see a flood;
//! - shutdown: stop accepting, close every connection between requests, cut short the
//!   bodies still arriving (503), let the answers in hand go out for at most
//!   [`SHUTDOWN_GRACE`], then drop whatever is left.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::Admin;

/// How long requests in hand may take to finish once the server is told to stop; anything
/// still open after it (a client stalled mid-request, an idle keep-alive) is dropped.
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(250);

/// How long to wait before accepting again after `accept` failed (out of file
/// descriptors: the oldest idle connection is closed first to free one).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// Why the server closed a connection itself, as `/metrics` labels it: a head past its
/// deadline, a client not taking its response within the same deadline, a keep-alive
/// connection idle past its bound, a head hyper refused (over the header caps: 431; or
/// malformed: 400), and a connection closed to make room at the cap.
pub const CLOSE_REASONS: [&str; 5] = [
    "header_timeout",
    "response_timeout",
    "idle_timeout",
    "rejected",
    "evicted",
];

/// Where a connection is between requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Phase {
    /// Waiting for the first byte of a request (since the previous response was flushed,
    /// or accept).
    Idle,
    /// A request's head has started to arrive and is not complete.
    Head,
    /// Inside the handler: reading the body, waiting for a worker, answering.
    Request,
    /// The answer is handed to hyper and not yet flushed to the socket.
    Response,
}

/// One open connection, as the registry and the connection's own task see it.
struct Slot {
    state: Mutex<(Phase, Instant)>,
    /// Told when the connection must close now (evicted, or past a deadline).
    close: Notify,
}

impl Slot {
    fn new(now: Instant) -> Slot {
        Slot {
            state: Mutex::new((Phase::Idle, now)),
            close: Notify::new(),
        }
    }

    fn get(&self) -> (Phase, Instant) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, phase: Phase) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = (phase, Instant::now());
    }

    /// Bytes arrived: an idle connection has started a request's head.
    fn bytes_read(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.0 == Phase::Idle {
            *s = (Phase::Head, Instant::now());
        }
    }

    /// hyper flushed everything it had to write: a response handed to it is on its way.
    fn flushed(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.0 == Phase::Response {
            *s = (Phase::Idle, Instant::now());
        }
    }
}

/// The connection limits, from [`super::AdminConfig`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// A head must be complete this long after its first byte.
    pub header_timeout: Duration,
    /// A connection between requests is closed after this long.
    pub idle_timeout: Duration,
    /// Most bytes of a request's head (431 past it).
    pub max_header_bytes: usize,
    /// Most header fields of a request (431 past it).
    pub max_headers: usize,
    /// Most connections open at once.
    pub max_connections: usize,
}

/// Every open connection, by id.
#[derive(Default)]
struct Registry {
    next_id: u64,
    conns: HashMap<u64, Arc<Slot>>,
}

/// The open connections, and the counts of those the server closed, shared by the
/// accept loop, the connections' tasks and `/metrics`.
#[derive(Default)]
pub(super) struct Shared {
    registry: Mutex<Registry>,
    /// Told when the last connection closes (shutdown waits for it).
    emptied: Notify,
    /// Connections the server closed, by reason (index into [`CLOSE_REASONS`]).
    closed: [AtomicU64; CLOSE_REASONS.len()],
}

impl Shared {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a connection the server closed for `reason` (one of [`CLOSE_REASONS`]).
    fn count_closed(&self, reason: &str) {
        if let Some(i) = CLOSE_REASONS.iter().position(|r| *r == reason) {
            self.closed[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The connections the server closed, by reason, the reasons that never happened
    /// left out.
    pub(super) fn closed_counts(&self) -> Vec<(&'static str, u64)> {
        (CLOSE_REASONS.iter().zip(&self.closed))
            .map(|(reason, n)| (*reason, n.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// How many open connections are in each phase (for tests: a request is known to be
    /// inside the handler before the test goes on).
    #[cfg(test)]
    pub(super) fn phase_counts(&self) -> std::collections::BTreeMap<Phase, usize> {
        let mut counts = std::collections::BTreeMap::new();
        for slot in self.registry().conns.values() {
            *counts.entry(slot.get().0).or_insert(0) += 1;
        }
        counts
    }

    /// Closes the connection idle the longest, else the one slowest to send its head,
    /// else the request running the longest (all of them inside a request at the cap is a
    /// flood of stalled bodies, not a matchmaker); false when there is none.
    fn evict_one(&self) -> bool {
        let mut reg = self.registry();
        let victim = reg
            .conns
            .iter()
            .map(|(id, slot)| {
                let (phase, since) = slot.get();
                let rank = match phase {
                    Phase::Idle => 0,
                    Phase::Head | Phase::Response => 1,
                    Phase::Request => 2,
                };
                ((rank, since), *id)
            })
            .min()
            .map(|(_, id)| id);
        match victim.and_then(|id| reg.conns.remove(&id)) {
            Some(slot) => {
                slot.close.notify_one();
                self.count_closed("evicted");
                true
            }
            None => false,
        }
    }

    /// Closes every connection that is not inside a request or sending its answer
    /// (shutdown).
    fn close_all_but_requests(&self) {
        self.registry().conns.retain(|_, slot| {
            let keep = matches!(slot.get().0, Phase::Request | Phase::Response);
            if !keep {
                slot.close.notify_one();
            }
            keep
        });
    }

    /// Closes every connection idle past `idle_timeout`, in its head past
    /// `header_timeout`, or with its response unflushed past `header_timeout`.
    fn reap(&self, limits: &Limits, now: Instant) {
        let mut reg = self.registry();
        reg.conns.retain(|_, slot| {
            let (phase, since) = slot.get();
            let (limit, reason) = match phase {
                Phase::Idle => (limits.idle_timeout, "idle_timeout"),
                Phase::Head => (limits.header_timeout, "header_timeout"),
                Phase::Response => (limits.header_timeout, "response_timeout"),
                // Bounded in the handler (body deadline, reply timeout).
                Phase::Request => return true,
            };
            let keep = now.saturating_duration_since(since) < limit;
            if !keep {
                slot.close.notify_one();
                self.count_closed(reason);
            }
            keep
        });
    }
}

/// Removes its connection from the registry when the connection's task ends.
struct Registered {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut reg = self.shared.registry();
        reg.conns.remove(&self.id);
        if reg.conns.is_empty() {
            self.shared.emptied.notify_one();
        }
    }
}

/// A TCP stream that tells its slot when bytes arrive (the head deadline starts then).
struct Watched {
    stream: TcpStream,
    slot: Arc<Slot>,
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.slot.bytes_read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    /// hyper calls it once its write buffer is empty: a response handed over has gone.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_flush(cx);
        if matches!(polled, Poll::Ready(Ok(()))) {
            this.slot.flushed();
        }
        polled
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// Serves `listener` until `stop` turns true, then shuts down as the module docs say.
pub(super) async fn serve(
    listener: TcpListener,
    admin: Arc<Admin>,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let shared = Arc::clone(&admin.connections);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // hyper's timer runs from the end of the previous response to the end of the next
        // head. `reap` enforces the idle bound and the head's own, shorter deadline; this
        // is only a backstop, later than either, so a connection is closed (and counted)
        // once.
        .header_read_timeout(limits.idle_timeout + limits.header_timeout)
        .max_header_size(limits.max_header_bytes)
        // hyper refuses a read buffer under 8 KiB; a head over `max_header_size` gets 431
        // before the buffer fills.
        .max_buf_size(limits.max_header_bytes.max(8192))
        .max_headers(limits.max_headers)
        .keep_alive(true);
    let reap_every = (limits.header_timeout.min(limits.idle_timeout) / 5)
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut reaper = tokio::time::interval(reap_every);
    reaper.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Each connection's task gets its own copy, to hear the stop.
    let told = stop.clone();
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            now = reaper.tick() => shared.reap(&limits, now),
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    accept(stream, &shared, &admin, &builder, &limits, told.clone())
                }
                Err(_) => {
                    // Out of descriptors (or a connection reset before it was taken):
                    // free one if we can, and do not spin.
                    shared.evict_one();
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    drop(listener);
    // Connections between requests close now. Those inside one have seen `stop` too: a
    // body still arriving is cut short (503), an answer in hand is sent, then they close.
    // Wait for them, within the grace.
    shared.close_all_but_requests();
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, async {
        loop {
            let emptied = shared.emptied.notified();
            if shared.registry().conns.is_empty() {
                break;
            }
            emptied.await;
        }
    })
    .await;
    // Returning drops the runtime with every task still open: their sockets close.
}

/// Registers a new connection (closing another at the cap) and spawns its task.
fn accept(
    stream: TcpStream,
    shared: &Arc<Shared>,
    admin: &Arc<Admin>,
    builder: &http1::Builder,
    limits: &Limits,
    stop: watch::Receiver<bool>,
) {
    if shared.registry().conns.len() >= limits.max_connections {
        shared.evict_one();
    }
    let _ = stream.set_nodelay(true);
    let slot = Arc::new(Slot::new(Instant::now()));
    let id = {
        let mut reg = shared.registry();
        let id = reg.next_id;
        reg.next_id += 1;
        reg.conns.insert(id, Arc::clone(&slot));
        id
    };
    let registered = Registered {
        shared: Arc::clone(shared),
        id,
    };
    let service = {
        let (admin, slot) = (Arc::clone(admin), Arc::clone(&slot));
        service_fn(move |request| {
            let (admin, slot) = (Arc::clone(&admin), Arc::clone(&slot));
            async move {
                slot.set(Phase::Request);
                let response = admin.respond(request).await;
                // Idle once hyper has flushed it ([`Watched::poll_flush`]): a client that
                // does not take its answer is bounded like a slow head.
                slot.set(Phase::Response);
                Ok::<_, Infallible>(response)
            }
        })
    };
    let io = TokioIo::new(Watched {
        stream,
        slot: Arc::clone(&slot),
    });
    let connection = builder.serve_connection(io, service);
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let _registered = registered;
        let mut stop = stop;
        tokio::pin!(connection);
        tokio::select! {
            // Done, or the client went away: nothing to do but count what hyper refused
            // (it answered 431 or 400 and closed) and its own idle bound.
            ended = connection.as_mut() => {
                if let Err(e) = ended {
                    if e.is_parse() || e.is_parse_too_large() {
                        shared.count_closed("rejected");
                    } else if e.is_timeout() {
                        shared.count_closed("idle_timeout");
                    }
                }
                return;
            }
            // Evicted or past a deadline: dropping the connection closes it.
            _ = slot.close.notified() => return,
            _ = stop.wait_for(|s| *s) => {}
        }
        connection.as_mut().graceful_shutdown();
        tokio::select! {
            _ = connection.as_mut() => {}
            _ = slot.close.notified() => {}
        }
    });
}
