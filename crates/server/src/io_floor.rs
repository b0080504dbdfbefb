//! The I/O floor: what one match tick's datagrams cost on this host with no game work.
//!
//! Per tick, as a match does it: receive one input datagram from each player with one
//! batched call, open each (ChaCha20-Poly1305), seal one snapshot-sized payload for each,
//! and send them with one batched call, each player at its own socket and loopback
//! address. Ticks are paced as a worker paces them (it sleeps between ticks, so it works
//! from cold caches as a real worker does). Only the server side is timed; the players'
//! sending and draining happen outside the measurement. The figure a match frame is
//! compared with: game and replication cost what the frame costs above it.

use std::net::SocketAddr;
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
}

/// Measures the I/O floor of a `players`-player tick with `snapshot_bytes` payloads and
/// `input_bytes` inputs, over `ticks` ticks on loopback, one every `period` (zero: back to
/// back), pinned to `core` if given.
pub fn measure(
    players: usize,
    input_bytes: usize,
    snapshot_bytes: usize,
    ticks: usize,
    period: Duration,
    core: Option<usize>,
) -> std::io::Result<IoFloor> {
    if let Some(c) = core {
        cpu::pin_current_thread(c)?;
    }
    let loopback: SocketAddr = "127.0.0.1:0".parse().expect("constant address");
    let server = UdpSocket::bind(loopback, SocketOptions::default())?;
    let server_addr = server.local_addr()?;
    let small = SocketOptions {
        recv_buffer_bytes: Some(64 << 10),
        send_buffer_bytes: None,
    };
    let peers = (0..players)
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
    const PROTOCOL_ID: u64 = 1;

    // The players' inputs, sealed once: the floor counts the server's opening, not theirs.
    let mut inputs = SendBatch::with_capacity(players, 1300);
    let mut sealed = Vec::with_capacity(1300);
    let input = vec![0x11u8; input_bytes.clamp(1, 1200)];
    let snapshot = vec![0x22u8; snapshot_bytes.clamp(1, 1200)];
    let mut recv = RecvBatch::with_capacity(players.max(1) * 2);
    let mut send = SendBatch::with_capacity(players, 1300);
    let mut drain = RecvBatch::with_capacity(4);
    let mut stats = IoStats::default();
    let mut peer_stats = IoStats::default();
    let mut hist = DurationHistogram::new();
    let mut sequence = 0u64;

    let start = time::now();
    for tick in 0..ticks + ticks / 10 {
        if !period.is_zero() {
            time::sleep_until(start + period * tick as u32, Duration::ZERO);
        }
        for peer in &peers {
            sequence += 1;
            packet::seal(
                &mut sealed,
                PacketType::Payload,
                sequence,
                PROTOCOL_ID,
                &key,
                |b| b.extend_from_slice(&input),
            );
            inputs.push(server_addr, &sealed);
            inputs.flush(peer, &mut peer_stats);
        }
        // Loopback delivers during the send call; wait anyway, bounded, in case it did not.
        wait_readable(&[&server], Duration::from_millis(50))?;

        let began = time::now();
        let mut got = 0;
        while got < players {
            let n = recv.fill(&server, &mut stats);
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
        for &to in &peer_addrs {
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
        send.flush(&server, &mut stats);
        let elapsed = time::now() - began;

        // The first tenth warms caches and is not counted.
        if tick >= ticks / 10 {
            hist.record_ns(elapsed.as_nanos() as u64);
        }
        for peer in &peers {
            while drain.fill(peer, &mut peer_stats) == drain.capacity() {}
        }
    }
    let per_tick_ms = hist.quantile_ms(0.5).unwrap_or(0.0);
    Ok(IoFloor {
        per_tick_ms,
        per_datagram_us: per_tick_ms * 1000.0 / (2 * players.max(1)) as f64,
        players,
        ticks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_positive_cost_that_grows_with_players() {
        let small = measure(2, 40, 200, 200, Duration::ZERO, None).unwrap();
        let large = measure(40, 40, 200, 200, Duration::ZERO, None).unwrap();
        assert!(small.per_tick_ms > 0.0);
        // Twenty times the datagrams cannot cost less than twice as much.
        assert!(
            large.per_tick_ms > 2.0 * small.per_tick_ms,
            "{small:?} {large:?}"
        );
    }
}
