//! Interop with an independent netcode.io 1.02 implementation, the `netcode-rs` 1.4.0
//! crate, over real UDP on 127.0.0.1: its client against our server, our client against its
//! server, payloads both ways. Within its known limits (the protocol notes): IPv4 only,
//! payloads up to 1150 bytes.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::{Client, ClientEvent, Server, ServerConfig, ServerEvent};
use tickforge_proto::ClientIndex;

const PROTOCOL_ID: u64 = 0x1122_3344_5566_7788;
const KEY: [u8; 32] = [0x42; 32];
/// Bounds every loop here: a run that has not finished by then has failed.
const DEADLINE: Duration = Duration::from_secs(10);

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn payload(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}

/// Every payload one side sends, in order: one of each size, seeded from `seed`.
fn all_payloads(seed: u8) -> Vec<Vec<u8>> {
    SIZES
        .iter()
        .enumerate()
        .map(|(i, &n)| payload(n, seed + i as u8))
        .collect()
}

/// Payload sizes exchanged: small, typical, and the largest netcode-rs reads whole.
const SIZES: [usize; 4] = [1, 64, 600, 1150];

#[test]
fn netcode_rs_client_connects_to_our_server_and_exchanges_payloads() {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(2)))
        .unwrap();
    let server_addr = socket.local_addr().unwrap();
    let t0 = Instant::now();
    let mut server = Server::new(
        ServerConfig {
            protocol_id: PROTOCOL_ID,
            private_key: KEY,
            public_addresses: vec![server_addr],
            max_clients: 4,
            requests_per_second_per_ip: 100,
        },
        t0,
        unix_now(),
        [9; 32],
    );
    let params = TokenParams {
        protocol_id: PROTOCOL_ID,
        create_timestamp: unix_now(),
        expire_seconds: 30,
        timeout_seconds: 5,
        server_addresses: vec![server_addr],
    };
    let random: [u8; 88] = std::array::from_fn(|i| i as u8);
    let token = ConnectToken::mint(&params, 77, &[0; 256], &KEY, &random).to_bytes();
    let mut client = netcode::Client::new(&token).unwrap();
    client.connect();

    let mut buf = [0u8; 1500];
    let mut out = Vec::new();
    let mut connected: Option<ClientIndex> = None;
    let mut from_client: Vec<Vec<u8>> = Vec::new();
    let mut from_server: Vec<Vec<u8>> = Vec::new();
    let mut sent_to_client = false;
    while t0.elapsed() < DEADLINE
        && (from_client.len() < SIZES.len() || from_server.len() < SIZES.len())
    {
        client.update(t0.elapsed().as_secs_f64());
        if client.is_connected() && from_client.is_empty() {
            for (i, &n) in SIZES.iter().enumerate() {
                client.send(&payload(n, i as u8)).unwrap();
            }
        }
        while let Some(p) = client.recv() {
            from_server.push(p);
        }
        if let Ok((len, from)) = socket.recv_from(&mut buf) {
            match server.handle_datagram(Instant::now(), from, &mut buf[..len]) {
                Some(ServerEvent::Connected {
                    client, client_id, ..
                }) => {
                    assert_eq!(client_id, 77);
                    connected = Some(client);
                }
                Some(ServerEvent::Payload { data, .. }) => from_client.push(data.to_vec()),
                _ => {}
            }
        }
        server.handle_timeout(Instant::now());
        while let Some(to) = server.poll_transmit(&mut out) {
            socket.send_to(&out, to).unwrap();
        }
        if let (Some(c), false, true) = (connected, sent_to_client, client.is_connected()) {
            for (i, &n) in SIZES.iter().enumerate() {
                let tx = server
                    .send_payload(Instant::now(), c, &payload(n, 100 + i as u8), &mut out)
                    .unwrap();
                if tx.keepalive_bytes > 0 {
                    socket.send_to(&out[..tx.keepalive_bytes], tx.to).unwrap();
                }
                socket.send_to(&out[tx.keepalive_bytes..], tx.to).unwrap();
            }
            sent_to_client = true;
        }
    }
    assert!(
        client.is_connected(),
        "netcode-rs client state {:?}",
        client.state()
    );
    assert_eq!(from_client, all_payloads(0));
    assert_eq!(from_server, all_payloads(100));
}

#[test]
fn our_client_connects_to_a_netcode_rs_server_and_exchanges_payloads() {
    let mut server = netcode::Server::new("127.0.0.1:0", PROTOCOL_ID, KEY).unwrap();
    let server_addr: SocketAddr = server.addr();
    let token_bytes = server
        .token(88)
        .expire_seconds(30)
        .timeout_seconds(5)
        .generate()
        .unwrap()
        .try_into_bytes()
        .unwrap();
    let token = ConnectToken::from_bytes(&token_bytes).unwrap();
    assert_eq!(token.server_addresses, vec![server_addr]);

    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(2)))
        .unwrap();
    let t0 = Instant::now();
    let mut client = Client::new(token, t0);
    let mut buf = [0u8; 1500];
    let mut out = Vec::new();
    let mut from_client: Vec<Vec<u8>> = Vec::new();
    let mut from_server: Vec<Vec<u8>> = Vec::new();
    let mut their_client = None;
    let mut sent = false;
    while t0.elapsed() < DEADLINE
        && (from_client.len() < SIZES.len() || from_server.len() < SIZES.len())
    {
        server.update(t0.elapsed().as_secs_f64());
        while let Some((p, idx)) = server.recv() {
            from_client.push(p);
            their_client = Some(idx);
        }
        let now = Instant::now();
        while let Some(to) = client.poll_transmit(now, &mut out) {
            socket.send_to(&out, to).unwrap();
        }
        if let Ok((len, from)) = socket.recv_from(&mut buf) {
            if let Some(ClientEvent::Payload(p)) =
                client.handle_datagram(Instant::now(), from, &mut buf[..len])
            {
                from_server.push(p.to_vec());
            }
        }
        let _ = client.handle_timeout(Instant::now());
        if client.is_connected() && !sent {
            for (i, &n) in SIZES.iter().enumerate() {
                let to = client
                    .send_payload(Instant::now(), &payload(n, i as u8), &mut out)
                    .unwrap();
                socket.send_to(&out, to).unwrap();
            }
            sent = true;
        }
        if let (Some(idx), true) = (their_client, from_server.is_empty()) {
            if from_client.len() == SIZES.len() {
                for (i, &n) in SIZES.iter().enumerate() {
                    server.send(&payload(n, 100 + i as u8), idx).unwrap();
                }
                // Sent once: mark by pushing nothing; the loop ends when ours arrive.
                their_client = None;
            }
        }
    }
    assert!(
        client.is_connected(),
        "our client state {:?}",
        client.state()
    );
    assert_eq!(from_client, all_payloads(0));
    assert_eq!(from_server, all_payloads(100));
}
