//! A netcode server fed a stream of datagrams from a few addresses, some of them valid
//! connection requests: it never panics and never sends an address without a connection
//! more bytes than it received from it.
#![no_main]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::{Client, Server, ServerConfig};

const KEY: [u8; 32] = [4; 32];

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let server_addr: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let mut server = Server::new(
        ServerConfig {
            protocol_id: 1,
            private_key: KEY,
            public_addresses: vec![server_addr],
            max_clients: 2,
            requests_per_second_per_ip: 5,
        },
        t0,
        1_700_000_000,
        [5; 32],
    );
    let mut received: HashMap<SocketAddr, usize> = HashMap::new();
    let mut sent: HashMap<SocketAddr, usize> = HashMap::new();
    let mut buf = Vec::new();
    let mut now = t0;
    // Chunks: [selector, len_lo, len_hi, bytes...]
    let mut rest = data;
    while rest.len() >= 3 {
        let selector = rest[0];
        let len = (usize::from(rest[1]) | usize::from(rest[2]) << 8) % 1400;
        rest = &rest[3..];
        let take = len.min(rest.len());
        let from = SocketAddr::from(([127, 0, 0, 2 + (selector & 3)], 5000));
        let mut datagram = if selector & 0x80 != 0 {
            // A real request with a valid token from this address.
            let params = TokenParams {
                protocol_id: 1,
                create_timestamp: 1_700_000_000,
                expire_seconds: 30,
                timeout_seconds: 5,
                server_addresses: vec![server_addr],
            };
            let token = ConnectToken::mint(&params, u64::from(selector), &[0; 256], &KEY, &[selector; 88]);
            let mut c = Client::new(token, now);
            let mut b = Vec::new();
            let _ = c.poll_transmit(now, &mut b);
            b
        } else {
            rest[..take].to_vec()
        };
        rest = &rest[take..];
        *received.entry(from).or_default() += datagram.len();
        let _ = server.handle_datagram(now, from, &mut datagram);
        if selector & 0x40 != 0 {
            now += Duration::from_millis(u64::from(selector & 0x3f) * 10);
            server.handle_timeout(now);
        }
        while let Some(to) = server.poll_transmit(&mut buf) {
            *sent.entry(to).or_default() += buf.len();
        }
    }
    // Keep-alives go only to connected addresses, which are authenticated; every other
    // byte sent answers a request.
    for (addr, n) in sent {
        if server.connected() == 0 {
            assert!(n <= received[&addr], "amplified {addr}: {n} > {}", received[&addr]);
        }
    }
});
