//! `bench --flood N`: hostile datagrams at the server during the measured window.
//!
//! Loopback only, bounded in count and time. A third are random bytes of random length, a
//! third are shaped like connection requests (1078 bytes, the right version and protocol
//! id, an expiry in the future: they pass the cheap checks and reach the rate limit and the
//! token decryption), a third are shaped like encrypted packets (a valid prefix).

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tickforge_io::entropy;
use tickforge_proto::netcode::VERSION_INFO;
use tickforge_telemetry::report::Flood;

/// Waits `delay`, then sends `n` datagrams to `server`, evenly over `over`.
pub fn run(server: SocketAddr, n: u64, delay: Duration, over: Duration) -> Result<Flood> {
    anyhow::ensure!(
        server.ip().is_loopback(),
        "--flood only targets loopback addresses"
    );
    // Its own loopback source, apart from the bots' 127.1.x.y: one hostile host.
    let socket = UdpSocket::bind("127.2.0.1:0").context("binding the flood socket")?;
    let mut rng = u64::from_le_bytes(entropy::random_bytes()) | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let start = Instant::now() + delay;
    let mut flood = Flood::default();
    let mut buf = vec![0u8; 1400];
    for i in 0..n {
        // Pace: datagram i goes out at start + i/n of the window.
        let due = start + over.mul_f64(i as f64 / n as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let len = match i % 3 {
            0 => {
                let len = (next() % 1300) as usize;
                buf[..len].iter_mut().for_each(|b| *b = next() as u8);
                len
            }
            1 => {
                buf[..1078].iter_mut().for_each(|b| *b = next() as u8);
                buf[0] = 0;
                buf[1..14].copy_from_slice(VERSION_INFO);
                buf[14..22]
                    .copy_from_slice(&tickforge_server::config::DEFAULT_PROTOCOL_ID.to_le_bytes());
                buf[22..30].copy_from_slice(&(entropy::unix_now() + 60).to_le_bytes());
                flood.request_shaped += 1;
                1078
            }
            _ => {
                let len = 18 + (next() % 300) as usize;
                buf[..len].iter_mut().for_each(|b| *b = next() as u8);
                buf[0] = ((1 + next() % 8) as u8) << 4 | (1 + next() % 6) as u8;
                flood.packet_shaped += 1;
                len
            }
        };
        // A refused send (full buffer) is simply not counted as sent.
        if socket.send_to(&buf[..len], server).is_ok() {
            flood.sent += 1;
        }
    }
    Ok(flood)
}
