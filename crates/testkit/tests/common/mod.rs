//! Two reliable endpoints joined by the simulator, one packet per side per tick.

#![allow(dead_code)] // each test binary uses its own part of the harness

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tickforge_proto::reliable::{Endpoint, PacketWritten, ReliableConfig};
use tickforge_proto::MAX_PACKET_BYTES;
use tickforge_testkit::{Datagram, NetSim, SimRng};

/// One 128 Hz tick (VALORANT's rate): 7.8125 ms.
pub const TICK: Duration = Duration::from_nanos(7_812_500);

/// A loopback-looking address for side `n`.
pub fn addr(n: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 40_000 + n))
}

/// One side of a connection: its endpoint and reused buffers.
pub struct Side {
    pub addr: SocketAddr,
    pub peer: SocketAddr,
    pub endpoint: Endpoint,
    packet: Vec<u8>,
    message: Vec<u8>,
    /// Largest packet this side has written, in bytes.
    pub largest_packet: usize,
}

impl Side {
    pub fn new(addr: SocketAddr, peer: SocketAddr, config: ReliableConfig, now: Instant) -> Self {
        Side {
            addr,
            peer,
            endpoint: Endpoint::new(config, now),
            packet: Vec::with_capacity(MAX_PACKET_BYTES),
            message: Vec::with_capacity(config.max_message_bytes),
            largest_packet: 0,
        }
    }

    /// Reads every datagram addressed to this side, handing each unreliable message read
    /// to `on_unreliable`. A peer running the same code never sends an invalid packet.
    pub fn read(
        &mut self,
        now: Instant,
        due: &[Datagram],
        mut on_unreliable: impl FnMut(u32, &[u8]),
    ) {
        for d in due.iter().filter(|d| d.to == self.addr) {
            match self.endpoint.read_packet(now, &d.bytes) {
                Ok(Some((tag, body))) => on_unreliable(tag, body),
                Ok(None) => {}
                Err(e) => panic!("{} refused a packet from {}: {e}", self.addr, d.from),
            }
        }
    }

    /// Hands every reliable message now in order to `on_message`.
    pub fn poll_messages(&mut self, mut on_message: impl FnMut(&[u8])) {
        while self.endpoint.poll_reliable(&mut self.message) {
            on_message(&self.message);
        }
    }

    /// Writes this tick's packet and sends it to the peer through `sim`.
    pub fn write(
        &mut self,
        now: Instant,
        sim: &mut NetSim,
        unreliable: Option<(u32, &[u8])>,
    ) -> PacketWritten {
        let written = self
            .endpoint
            .write_packet(now, unreliable, &mut self.packet);
        assert_eq!(written.bytes, self.packet.len());
        assert!(
            self.packet.len() <= MAX_PACKET_BYTES,
            "{} wrote a {}-byte packet",
            self.addr,
            self.packet.len()
        );
        self.largest_packet = self.largest_packet.max(self.packet.len());
        sim.send(now, self.addr, self.peer, &self.packet);
        written
    }
}

/// Message `index` of a stream: its length drawn from `rng` (mostly small events, some
/// mid-sized, some longer than a packet), its bytes a function of the index.
pub fn message(rng: &mut SimRng, index: usize) -> Vec<u8> {
    let len = match rng.below(100) {
        0..=79 => rng.range_inclusive(0, 64),
        80..=91 => rng.range_inclusive(65, 1000),
        _ => rng.range_inclusive(MAX_PACKET_BYTES as u64 + 1, 6000),
    };
    (0..len as usize)
        .map(|j| ((index * 131 + j * 7) % 251) as u8)
        .collect()
}
