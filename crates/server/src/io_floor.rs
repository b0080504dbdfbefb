//! The I/O floor: what a match tick's datagrams cost on this host with no game work.
//!
//! Per tick, as a match does it: receive one input datagram from each player with one
//! batched call, open each (ChaCha20-Poly1305), seal one snapshot-sized payload for each,
//! and send them with one batched call, each player at its own socket and loopback
//! address. Shaped as a run ([`FloorRun`]): its matches, each with a socket of its own,
//! ticked in turn at the run's tick rate, and the players on a thread of their own (on the
//! bots' core), so the kernel's paths are as warm, and the datagrams cross cores, as in
//! the run. Only the server side is timed. The figure a match frame is compared with: game
//! and replication cost what the frame costs above it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tickforge_io::udp::{wait_readable, IoStats, RecvBatch, SendBatch, SocketOptions, UdpSocket};
use tickforge_io::{cpu, time};
use tickforge_proto::netcode::packet::{self, PacketType};
use tickforge_telemetry::DurationHistogram;

/// What [`measure`] found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IoFloor {
    /// Median cost of one tick's receive + open + seal + send, milliseconds.
    pub per_tick_ms: f64,
    /// That cost per datagram handled (in or out), microseconds.
    pub per_datagram_us: f64,
    /// Players per tick measured.
    pub players: usize,
    /// Ticks measured.
    pub ticks: usize,
    /// Ticks (warm-up included) whose server side found fewer inputs than players: a
    /// floor that read nothing would be cheap and wrong.
    pub short_ticks: usize,
}

/// What [`measure`] runs: the shape of the ticks whose datagrams it times, and where.
#[derive(Clone, Copy, Debug)]
pub struct FloorRun {
    /// Players per match: an input from each in, a snapshot to each out, per tick.
    pub players: usize,
    /// Matches, each with its own socket, ticked in turn as a worker ticks them: match
    /// `m` of round `r` at `r + m / matches` periods.
    pub matches: usize,
    /// The players' input datagram's payload.
    pub input_bytes: usize,
    /// The snapshot datagram's payload.
    pub snapshot_bytes: usize,
    /// Rounds measured (each match ticked once per round), after a tenth as many more
    /// that warm caches.
    pub rounds: usize,
    /// A round: the tick period (zero: back to back).
    pub period: Duration,
    /// The core the server side is pinned to, if any.
    pub core: Option<usize>,
    /// The core the players' thread is pinned to, if any: the bots' core, so the datagrams
    /// the server sends are allocated on its core and freed on the other, and each socket's
    /// queue is written on one core and read on the other, as in a run. (With the players
    /// on the measuring thread, their sending warmed the server's receive for it.)
    pub players_core: Option<usize>,
}

/// Measures the I/O floor of `run` on loopback: per tick of a match, the server side's
/// receive, open, seal and send, timed; the players' side is not.
pub fn measure(run: FloorRun) -> std::io::Result<IoFloor> {
    let FloorRun {
        players,
        matches,
        period,
        ..
    } = run;
    let matches = matches.max(1);
    if let Some(c) = run.core {
        cpu::pin_current_thread(c)?;
    }
    // A socket per match and per player, and some to spare for the process's own.
    let sockets = (matches * (players + 1)) as u64;
    let limit = tickforge_io::host::raise_open_files(sockets + 64)?;
    if limit < sockets + 16 {
        return Err(std::io::Error::other(format!(
            "the I/O floor opens {sockets} sockets and the open-files limit is {limit}: \
             raise it (ulimit -n)"
        )));
    }
    let loopback: SocketAddr = "127.0.0.1:0".parse().expect("constant address");
    let servers = (0..matches)
        .map(|_| UdpSocket::bind(loopback, SocketOptions::default()))
        .collect::<std::io::Result<Vec<_>>>()?;
    let server_addrs = servers
        .iter()
        .map(UdpSocket::local_addr)
        .collect::<std::io::Result<Vec<_>>>()?;
    let small = SocketOptions {
        recv_buffer_bytes: Some(64 << 10),
        send_buffer_bytes: None,
    };
    // Match m's players are peers m * players .. (m + 1) * players.
    let peers = (0..matches * players)
        .map(|i| {
            let addr = SocketAddr::from(([127, 3, (i / 250) as u8, (i % 250) as u8 + 1], 0));
            UdpSocket::bind(addr, small)
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    let peer_addrs = peers
        .iter()
        .map(UdpSocket::local_addr)
        .collect::<std::io::Result<Vec<_>>>()?;
    let key = packet::cipher(&[0x5a; 32]);
    let players_side = Players {
        peers,
        players,
        server_addrs,
        key: key.clone(),
        input: vec![0x11u8; run.input_bytes.clamp(1, 1200)],
        inputs: SendBatch::with_capacity(1, 1300),
        sealed: Vec::with_capacity(1300),
        drain: RecvBatch::with_capacity(4),
        stats: IoStats::default(),
        sequence: 0,
    };
    let snapshot = vec![0x22u8; run.snapshot_bytes.clamp(1, 1200)];
    let mut recv = RecvBatch::with_capacity(players.max(1) * 2);
    let mut send = SendBatch::with_capacity(players, 1300);
    let mut sealed = Vec::with_capacity(1300);
    let mut stats = IoStats::default();
    let mut hist = DurationHistogram::new();
    let mut sequence = 1 << 40;
    let mut short_ticks = 0;
    let warm_steps = run.rounds / 10 * matches;
    let steps = warm_steps + run.rounds * matches;
    let step_at = |start: std::time::Instant, s: usize| {
        start + period * (s / matches) as u32 + period / matches as u32 * (s % matches) as u32
    };

    let start = time::now();
    // On their own thread, in lockstep, the players drain a match's last snapshots and
    // send its inputs at its step, and count it sent; the server side starts half a step
    // later, once the count says the inputs went (loopback delivers during the send), and
    // counts the step done. Either side that stops early sets its count to `GONE`, and the
    // other stops at its next step rather than wait out every step left.
    let (sent, done) = (AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|scope| -> std::io::Result<()> {
        let mut side = players_side;
        let (sent_by_players, done_for_players) = (&sent, &done);
        let players_thread = scope.spawn(move || -> std::io::Result<()> {
            let (sent, done) = (sent_by_players, done_for_players);
            if let Some(c) = run.players_core {
                if let Err(e) = cpu::pin_current_thread(c) {
                    sent.store(GONE, Ordering::Release);
                    return Err(e);
                }
            }
            for s in 0..steps {
                if !period.is_zero() {
                    time::sleep_until(step_at(start, s), Duration::ZERO);
                }
                // Never ahead of the server side: a match's next inputs wait until its last
                // tick was read.
                wait_for(done, s);
                if done.load(Ordering::Acquire) == GONE {
                    break;
                }
                side.drain(s % matches);
                side.send_inputs(s % matches);
                sent.store(s + 1, Ordering::Release);
            }
            Ok(())
        });
        let mut result = Ok(());
        for s in 0..steps {
            let m = s % matches;
            if !period.is_zero() {
                let half = period / (2 * matches as u32);
                time::sleep_until(step_at(start, s) + half, Duration::ZERO);
            }
            wait_for(&sent, s + 1);
            if sent.load(Ordering::Acquire) == GONE {
                break;
            }
            // Loopback delivers during the send call; wait anyway, bounded, in case it did
            // not.
            if let Err(e) = wait_readable(&[&servers[m]], Duration::from_millis(50)) {
                result = Err(e);
                break;
            }

            let began = time::now();
            let mut got = 0;
            while got < players {
                let n = recv.fill(&servers[m], &mut stats);
                if n == 0 {
                    break;
                }
                for i in 0..n {
                    let (_, data) = recv.get_mut(i);
                    if packet::open(data, PROTOCOL_ID, &key, |_| true, None).is_ok() {
                        got += 1;
                    }
                }
            }
            for &to in &peer_addrs[m * players..(m + 1) * players] {
                sequence += 1;
                packet::seal(
                    &mut sealed,
                    PacketType::Payload,
                    sequence,
                    PROTOCOL_ID,
                    &key,
                    |b| b.extend_from_slice(&snapshot),
                );
                send.push(to, &sealed);
            }
            send.flush(&servers[m], &mut stats);
            let elapsed = time::now() - began;

            if s >= warm_steps {
                hist.record_ns(elapsed.as_nanos() as u64);
            }
            short_ticks += usize::from(got < players);
            done.store(s + 1, Ordering::Release);
        }
        done.store(GONE, Ordering::Release);
        match players_thread.join() {
            Ok(Err(e)) => result.and(Err(e)),
            Err(_) => result.and(Err(std::io::Error::other("the players' thread panicked"))),
            Ok(Ok(())) => result,
        }
    })?;
    let per_tick_ms = hist.quantile_ms(0.5).unwrap_or(0.0);
    Ok(IoFloor {
        per_tick_ms,
        per_datagram_us: per_tick_ms * 1000.0 / (2 * players.max(1)) as f64,
        players,
        ticks: run.rounds * matches,
        short_ticks,
    })
}

const PROTOCOL_ID: u64 = 1;

/// The count a side of the floor sets when it stops early.
const GONE: usize = usize::MAX;

/// Waits until `count` reaches `at`, or a second has passed: the other side may be held
/// off its core by the host, and a step it missed is then counted short, not waited for.
fn wait_for(count: &AtomicUsize, at: usize) {
    let give_up = time::now() + Duration::from_secs(1);
    while count.load(Ordering::Acquire) < at && time::now() < give_up {
        std::thread::yield_now();
    }
}

/// The players' side of the floor: their sockets, and each tick's sealed inputs.
struct Players {
    /// Match m's players are `peers[m * players..][..players]`.
    peers: Vec<UdpSocket>,
    players: usize,
    server_addrs: Vec<SocketAddr>,
    key: tickforge_proto::netcode::aead::PacketKey,
    input: Vec<u8>,
    inputs: SendBatch,
    sealed: Vec<u8>,
    drain: RecvBatch,
    stats: IoStats,
    sequence: u64,
}

impl Players {
    /// One input from each player of match `m`, each from its own socket.
    fn send_inputs(&mut self, m: usize) {
        for peer in &self.peers[m * self.players..(m + 1) * self.players] {
            self.sequence += 1;
            packet::seal(
                &mut self.sealed,
                PacketType::Payload,
                self.sequence,
                PROTOCOL_ID,
                &self.key,
                |b| b.extend_from_slice(&self.input),
            );
            self.inputs.push(self.server_addrs[m], &self.sealed);
            self.inputs.flush(peer, &mut self.stats);
        }
    }

    /// Reads what the server sent match `m`'s players, so no queue fills.
    fn drain(&mut self, m: usize) {
        for peer in &self.peers[m * self.players..(m + 1) * self.players] {
            while self.drain.fill(peer, &mut self.stats) == self.drain.capacity() {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(players: usize, matches: usize) -> FloorRun {
        FloorRun {
            players,
            matches,
            input_bytes: 40,
            snapshot_bytes: 200,
            rounds: 200 / matches,
            period: Duration::ZERO,
            core: None,
            players_core: None,
        }
    }

    #[test]
    fn measures_a_positive_cost_that_grows_with_players() {
        let small = measure(run(2, 1)).unwrap();
        let large = measure(run(40, 1)).unwrap();
        assert!(small.per_tick_ms > 0.0);
        // Twenty times the datagrams cannot cost less than twice as much.
        assert!(
            large.per_tick_ms > 2.0 * small.per_tick_ms,
            "{small:?} {large:?}"
        );
        assert_eq!((small.short_ticks, large.short_ticks), (0, 0));
    }

    #[test]
    fn matches_in_turn_with_the_players_on_their_own_thread_each_get_their_inputs() {
        // Every match's socket gets its own players' inputs, every tick, the two threads in
        // lockstep.
        let floor = measure(FloorRun {
            rounds: 40,
            ..run(5, 3)
        })
        .unwrap();
        assert_eq!(floor.ticks, 120);
        assert_eq!(floor.short_ticks, 0, "{floor:?}");
        assert!(floor.per_tick_ms > 0.0);
    }

    #[test]
    fn a_players_thread_that_cannot_start_fails_the_measurement_without_waiting_it_out() {
        // No host has this core (and the portable path pins none): the players' thread
        // fails at once, and so does the measurement, rather than wait a second a step.
        let began = std::time::Instant::now();
        let result = measure(FloorRun {
            players_core: Some(usize::MAX),
            ..run(2, 3)
        });
        assert!(result.is_err(), "{result:?}");
        // Not a speed target: waiting it out takes a second for each of its 216 steps.
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "{:?}",
            began.elapsed()
        );
    }
}
