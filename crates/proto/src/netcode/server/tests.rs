//! The server and client state machines, driven against each other on virtual time.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::*;
use crate::netcode::client::{Client, ClientEvent, ClientState};
use crate::netcode::token::{ConnectToken, TokenParams};
use crate::netcode::MAX_PAYLOAD_BYTES;

const PRIVATE_KEY: [u8; 32] = [7; 32];
const PROTOCOL_ID: u64 = 0x7469_636b;
const UNIX_NOW: u64 = 1_700_000_000;

fn server_addr() -> SocketAddr {
    "127.0.0.1:40000".parse().unwrap()
}

fn client_addr(n: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 2], 50000 + n))
}

fn server(max_clients: u16, now: Instant) -> Server {
    Server::new(
        ServerConfig {
            protocol_id: PROTOCOL_ID,
            private_key: PRIVATE_KEY,
            public_addresses: vec![server_addr()],
            max_clients,
            requests_per_second_per_ip: 10,
        },
        now,
        UNIX_NOW,
        [3; 32],
    )
}

fn token_with(
    client_id: u64,
    key: &[u8; 32],
    protocol_id: u64,
    addrs: Vec<SocketAddr>,
    expire_seconds: i64,
) -> ConnectToken {
    let params = TokenParams {
        protocol_id,
        create_timestamp: UNIX_NOW,
        expire_seconds,
        timeout_seconds: 5,
        server_addresses: addrs,
    };
    let random: [u8; 88] = std::array::from_fn(|i| (i as u8) ^ (client_id as u8).wrapping_mul(31));
    ConnectToken::mint(&params, client_id, &[client_id as u8; 256], key, &random)
}

fn token(client_id: u64) -> ConnectToken {
    token_with(
        client_id,
        &PRIVATE_KEY,
        PROTOCOL_ID,
        vec![server_addr()],
        30,
    )
}

/// Moves every packet both ways until neither side has anything more to say at `now`.
/// Returns the events of both sides, as text.
fn exchange(
    server: &mut Server,
    client: &mut Client,
    from: SocketAddr,
    now: Instant,
) -> Vec<String> {
    let mut log = Vec::new();
    let mut buf = Vec::new();
    for _ in 0..8 {
        let mut moved = false;
        while let Some(to) = client.poll_transmit(now, &mut buf) {
            assert_eq!(to, server_addr());
            moved = true;
            if let Some(e) = server.handle_datagram(now, from, &mut buf) {
                log.push(format!("server: {e:?}").chars().take(60).collect());
            }
        }
        while let Some(to) = server.poll_transmit(&mut buf) {
            assert_eq!(to, from);
            moved = true;
            if let Some(e) = client.handle_datagram(now, server_addr(), &mut buf) {
                log.push(format!("client: {e:?}"));
            }
        }
        if !moved {
            break;
        }
    }
    log
}

/// Connects a client, advancing virtual time by the 10 Hz send interval as it would.
fn connect(
    server: &mut Server,
    client: &mut Client,
    from: SocketAddr,
    mut now: Instant,
) -> Instant {
    for _ in 0..5 {
        exchange(server, client, from, now);
        if client.is_connected() {
            return now;
        }
        now += PACKET_SEND_INTERVAL;
    }
    panic!("not connected: {:?}", client.state());
}

#[test]
fn connect_exchange_disconnect() {
    let t0 = Instant::now();
    let mut s = server(4, t0);
    let mut c = Client::new(token(11), t0);
    // Request → challenge → response (sent at once on the challenge) → keep-alive.
    let t1 = t0;
    let log = exchange(&mut s, &mut c, client_addr(1), t1);
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(
        log[0].starts_with("server: Connected { client: ClientIndex(0), client_id: 11"),
        "{log:?}"
    );
    assert_eq!(log[1], "client: Connected(ClientIndex(0))");
    assert_eq!(
        c.state(),
        ClientState::Connected {
            client: ClientIndex(0),
            max_clients: 4
        }
    );

    // Payloads both ways.
    let mut out = Vec::new();
    assert_eq!(c.send_payload(t1, b"input", &mut out), Some(server_addr()));
    assert_eq!(
        s.handle_datagram(t1, client_addr(1), &mut out),
        Some(ServerEvent::Payload {
            client: ClientIndex(0),
            data: b"input"
        })
    );
    let tx = s
        .send_payload(t1, ClientIndex(0), b"snapshot", &mut out)
        .unwrap();
    assert_eq!(
        (tx.to, tx.keepalive_bytes),
        (client_addr(1), 0),
        "confirmed by the payload"
    );
    assert_eq!(
        c.handle_datagram(t1, server_addr(), &mut out),
        Some(ClientEvent::Payload(b"snapshot"))
    );

    // The client leaves: ten disconnect packets, the first one frees the slot.
    c.disconnect();
    let mut sent = 0;
    let mut events = Vec::new();
    while c.poll_transmit(t1, &mut out).is_some() {
        sent += 1;
        if let Some(e) = s.handle_datagram(t1, client_addr(1), &mut out) {
            events.push(e.into_owned_text());
        }
    }
    assert_eq!(sent, 10);
    assert_eq!(events, ["Disconnected(ClientIndex(0), ClientClosed)"]);
    assert_eq!(s.connected(), 0);
}

trait OwnedText {
    fn into_owned_text(self) -> String;
}

impl OwnedText for ServerEvent<'_> {
    fn into_owned_text(self) -> String {
        match self {
            ServerEvent::Disconnected { client, reason } => {
                format!("Disconnected({client:?}, {reason:?})")
            }
            other => format!("{other:?}"),
        }
    }
}

#[test]
fn payloads_to_an_unconfirmed_client_follow_a_keepalive() {
    let t0 = Instant::now();
    let mut s = server(4, t0);
    let mut c = Client::new(token(12), t0);
    let t1 = connect(&mut s, &mut c, client_addr(2), t0);
    // The client has sent nothing since connecting: still unconfirmed.
    let mut out = Vec::new();
    let tx = s
        .send_payload(t1, ClientIndex(0), b"early", &mut out)
        .unwrap();
    assert!(tx.keepalive_bytes > 0);
    let (keepalive, payload) = out.split_at_mut(tx.keepalive_bytes);
    assert_eq!(c.handle_datagram(t1, server_addr(), keepalive), None);
    assert_eq!(
        c.handle_datagram(t1, server_addr(), payload),
        Some(ClientEvent::Payload(b"early"))
    );
    // Once the client speaks, no more keep-alives in front.
    assert!(c.send_payload(t1, b"x", &mut out).is_some());
    assert!(s.handle_datagram(t1, client_addr(2), &mut out).is_some());
    assert_eq!(
        s.send_payload(t1, ClientIndex(0), b"later", &mut out)
            .unwrap()
            .keepalive_bytes,
        0
    );
}

#[test]
fn the_largest_payload_is_sealed_in_the_room_made_for_it() {
    let t0 = Instant::now();
    let mut s = server(4, t0);
    let mut c = Client::new(token(13), t0);
    let t1 = connect(&mut s, &mut c, client_addr(3), t0);
    let mut out = Vec::with_capacity(MAX_TRANSMIT_BYTES);
    let room = (s.scratch.capacity(), out.capacity(), out.as_ptr());
    // Unconfirmed: a keep-alive first, then the payload.
    let largest = [7u8; MAX_PAYLOAD_BYTES];
    let tx = s
        .send_payload(t1, ClientIndex(0), &largest, &mut out)
        .unwrap();
    assert!(tx.keepalive_bytes > 0);
    assert!(out.len() > MAX_PAYLOAD_BYTES && out.len() <= MAX_TRANSMIT_BYTES);
    // Neither the transport's sealing room nor `out` grew (which a frame would pay for).
    assert_eq!((s.scratch.capacity(), out.capacity(), out.as_ptr()), room);
    let (keepalive, payload) = out.split_at_mut(tx.keepalive_bytes);
    assert_eq!(c.handle_datagram(t1, server_addr(), keepalive), None);
    assert_eq!(
        c.handle_datagram(t1, server_addr(), payload),
        Some(ClientEvent::Payload(&largest[..]))
    );
}

#[test]
fn the_server_global_sequence_starts_at_two_to_the_63() {
    let t0 = Instant::now();
    let mut s = server(4, t0);
    let t = token(13);
    let mut c = Client::new(t.clone(), t0);
    let mut buf = Vec::new();
    c.poll_transmit(t0, &mut buf).unwrap();
    assert_eq!(buf.len(), 1078);
    assert!(s.handle_datagram(t0, client_addr(3), &mut buf).is_none());
    s.poll_transmit(&mut buf).unwrap();
    // A challenge with an 8-byte sequence: 333 bytes, and it opens at sequence 2^63.
    assert_eq!(buf.len(), 333);
    let key = packet::cipher(&t.server_to_client_key);
    let opened = packet::open(&mut buf, PROTOCOL_ID, &key, |_| true, None).unwrap();
    assert_eq!(opened.sequence, GLOBAL_SEQUENCE_START);
    assert_eq!(opened.packet_type, PacketType::Challenge);
}

/// Sends one request for `t` from `from` and returns the bytes the server answered with.
fn answer_to(s: &mut Server, t: &ConnectToken, from: SocketAddr, now: Instant) -> usize {
    let mut c = Client::new(t.clone(), now);
    let mut buf = Vec::new();
    c.poll_transmit(now, &mut buf).unwrap();
    assert!(s.handle_datagram(now, from, &mut buf).is_none());
    let mut answered = 0;
    while s.poll_transmit(&mut buf).is_some() {
        answered += buf.len();
    }
    answered
}

#[test]
fn bad_tokens_get_no_answer() {
    let t0 = Instant::now();
    let mut s = server(4, t0);
    let wrong_key = token_with(20, &[8; 32], PROTOCOL_ID, vec![server_addr()], 30);
    let wrong_protocol = token_with(21, &PRIVATE_KEY, PROTOCOL_ID + 1, vec![server_addr()], 30);
    let wrong_server = token_with(
        22,
        &PRIVATE_KEY,
        PROTOCOL_ID,
        vec!["127.0.0.1:40001".parse().unwrap()],
        30,
    );
    let expired = token_with(23, &PRIVATE_KEY, PROTOCOL_ID, vec![server_addr()], 0);
    for (i, t) in [wrong_key, wrong_protocol, wrong_server, expired]
        .iter()
        .enumerate()
    {
        assert_eq!(
            answer_to(&mut s, t, client_addr(10 + i as u16), t0),
            0,
            "token {i}"
        );
    }
    assert_eq!(s.stats().dropped(ServerDrop::TokenInvalid), 1);
    assert_eq!(s.stats().dropped(ServerDrop::RequestProtocol), 1);
    assert_eq!(s.stats().dropped(ServerDrop::TokenWrongServer), 1);
    assert_eq!(s.stats().dropped(ServerDrop::TokenExpired), 1);
    // A good token from the same machine is answered.
    assert!(answer_to(&mut s, &token(24), client_addr(20), t0) > 0);
}

#[test]
fn requests_of_any_other_size_are_ignored() {
    let t0 = Instant::now();
    let mut s = server(4, t0);
    let mut c = Client::new(token(30), t0);
    let mut good = Vec::new();
    c.poll_transmit(t0, &mut good).unwrap();
    for len in [1usize, 100, 1077, 1079, 1200] {
        let mut data = good.clone();
        data.resize(len, 0);
        assert!(s.handle_datagram(t0, client_addr(30), &mut data).is_none());
        assert!(
            s.poll_transmit(&mut Vec::new()).is_none(),
            "answered a {len}-byte request"
        );
    }
    assert_eq!(s.stats().dropped(ServerDrop::RequestSize), 5);
}

#[test]
fn a_token_works_from_one_address_only() {
    let t0 = Instant::now();
    let mut s = server(4, t0);
    let t = token(40);
    assert!(answer_to(&mut s, &t, client_addr(40), t0) > 0);
    // The same token again from the same address is answered (a retransmission)...
    assert!(answer_to(&mut s, &t, client_addr(40), t0) > 0);
    // ...from another, it is not.
    assert_eq!(answer_to(&mut s, &t, client_addr(41), t0), 0);
    assert_eq!(s.stats().dropped(ServerDrop::TokenReused), 1);
}

#[test]
fn requests_from_one_source_are_rate_limited_before_the_token_is_opened() {
    let t0 = Instant::now();
    let mut s = server(64, t0);
    let mut answered = 0;
    for i in 0..100u64 {
        // Distinct tokens and ports, one IP.
        if answer_to(&mut s, &token(1000 + i), client_addr(100 + i as u16), t0) > 0 {
            answered += 1;
        }
    }
    assert_eq!(answered, RATE_BURST as usize);
    assert_eq!(
        s.stats().dropped(ServerDrop::RateLimited),
        100 - u64::from(RATE_BURST)
    );
    assert_eq!(s.stats().dropped(ServerDrop::TokenInvalid), 0);
    // A second later the source has earned its rate back.
    let t1 = t0 + Duration::from_secs(1);
    assert!(answer_to(&mut s, &token(2000), client_addr(300), t1) > 0);
    // Another IP was never limited.
    let other: SocketAddr = "127.0.0.9:1".parse().unwrap();
    assert!(answer_to(&mut s, &token(2001), other, t0) > 0);
}

#[test]
fn a_full_server_sends_denied_and_the_client_learns_it() {
    let t0 = Instant::now();
    let mut s = server(1, t0);
    let mut a = Client::new(token(50), t0);
    connect(&mut s, &mut a, client_addr(50), t0);
    let mut b = Client::new(token(51), t0);
    let log = exchange(&mut s, &mut b, client_addr(51), t0);
    assert_eq!(log, ["client: Disconnected(ServerFull)"]);
    assert_eq!(s.stats().denied, 1);
}

#[test]
fn silent_clients_time_out_and_keepalives_flow_before_that() {
    let t0 = Instant::now();
    let mut s = server(2, t0);
    let mut c = Client::new(token(60), t0);
    let t1 = connect(&mut s, &mut c, client_addr(60), t0);
    let mut buf = Vec::new();
    // 100 ms of silence from the server's side: it sends a keep-alive.
    s.handle_timeout(t1 + PACKET_SEND_INTERVAL);
    assert_eq!(s.poll_transmit(&mut buf), Some(client_addr(60)));
    assert_eq!(
        c.handle_datagram(t1 + PACKET_SEND_INTERVAL, server_addr(), &mut buf),
        None
    );
    assert_eq!(c.dropped, 0);
    // Five seconds without a word from the client: gone.
    s.handle_timeout(t1 + Duration::from_secs(5));
    assert_eq!(
        s.poll_disconnect(),
        Some((ClientIndex(0), DisconnectReason::TimedOut))
    );
    assert_eq!(s.connected(), 0);
    // The client heard the keep-alive, so it times out 100 ms later than the server.
    assert_eq!(c.handle_timeout(t1 + Duration::from_secs(5)), None);
    assert_eq!(
        c.handle_timeout(t1 + Duration::from_secs(5) + PACKET_SEND_INTERVAL),
        Some(DisconnectReason::TimedOut)
    );
}

#[test]
fn a_silent_client_times_out_exactly_at_its_deadline_and_not_before() {
    let t0 = Instant::now();
    let mut s = server(2, t0);
    let mut c = Client::new(token(61), t0);
    let t1 = connect(&mut s, &mut c, client_addr(61), t0);
    let timeout = Duration::from_secs(5);
    let walks = s.stats().timeout_walks;
    let mut buf = Vec::new();
    let mut keepalives = 0;
    // Wake every 10 ms up to the last instant before the deadline, as a worker would.
    let mut now = t1;
    while now < t1 + timeout {
        s.handle_timeout(now);
        while s.poll_transmit(&mut buf).is_some() {
            keepalives += 1;
        }
        now += Duration::from_millis(10);
    }
    s.handle_timeout(t1 + timeout - Duration::from_nanos(1));
    assert_eq!(s.poll_disconnect(), None, "1 ns before the deadline");
    assert_eq!(s.connected(), 1);
    // Keep-alives went out every 100 ms, and each took the one walk its deadline cost.
    assert_eq!(keepalives, 49);
    assert_eq!(s.stats().timeout_walks - walks, 49);
    assert_eq!(s.poll_timeout(), Some(t1 + timeout));
    s.handle_timeout(t1 + timeout);
    assert_eq!(
        s.poll_disconnect(),
        Some((ClientIndex(0), DisconnectReason::TimedOut))
    );
    assert_eq!(s.connected(), 0);
    assert_eq!(s.poll_timeout(), None, "nothing left to time out");
}

#[test]
fn a_wake_up_before_the_earliest_deadline_does_no_walk() {
    let t0 = Instant::now();
    let mut s = server(4, t0);
    assert_eq!(s.poll_timeout(), None);
    s.handle_timeout(t0 + Duration::from_secs(60));
    assert_eq!(s.stats().timeout_walks, 0, "no connection: nothing to walk");
    let mut c = Client::new(token(62), t0);
    let t1 = connect(&mut s, &mut c, client_addr(62), t0);
    let walks = s.stats().timeout_walks;
    let mut buf = Vec::new();
    // The first deadline is the keep-alive, 100 ms after the connection's last send.
    assert_eq!(s.poll_timeout(), Some(t1 + PACKET_SEND_INTERVAL));
    s.handle_timeout(t1 + Duration::from_millis(99));
    assert_eq!(s.stats().timeout_walks, walks);
    assert_eq!(
        s.poll_transmit(&mut buf),
        None,
        "no keep-alive before it is due"
    );
    s.handle_timeout(t1 + PACKET_SEND_INTERVAL);
    assert_eq!(s.stats().timeout_walks, walks + 1);
    assert_eq!(s.poll_transmit(&mut buf), Some(client_addr(62)));
    // A payload at 150 ms moves the keep-alive to 250 ms; the walk at 200 ms finds nothing
    // due and learns the new deadline.
    let mut out = Vec::new();
    let sent = t1 + Duration::from_millis(150);
    assert!(s
        .send_payload(sent, ClientIndex(0), b"snapshot", &mut out)
        .is_some());
    s.handle_timeout(t1 + Duration::from_millis(200));
    assert_eq!(s.stats().timeout_walks, walks + 2);
    assert_eq!(s.poll_transmit(&mut buf), None);
    assert_eq!(s.poll_timeout(), Some(sent + PACKET_SEND_INTERVAL));
    s.handle_timeout(sent + PACKET_SEND_INTERVAL - Duration::from_nanos(1));
    assert_eq!(s.stats().timeout_walks, walks + 2);
    s.handle_timeout(sent + PACKET_SEND_INTERVAL);
    assert_eq!(s.poll_transmit(&mut buf), Some(client_addr(62)));
}

#[test]
fn a_new_handshake_brings_the_next_walk_forward() {
    let t0 = Instant::now();
    let mut s = server(4, t0);
    let mut c = Client::new(token(63), t0);
    let t1 = connect(&mut s, &mut c, client_addr(63), t0);
    // Keep-alives: the next walk is at most 100 ms away.
    s.handle_timeout(t1 + PACKET_SEND_INTERVAL);
    assert_eq!(s.poll_timeout(), Some(t1 + 2 * PACKET_SEND_INTERVAL));
    // A request at 150 ms opens a handshake that times out at 5.15 s: later, so the next
    // walk stays; once the connection is gone, the handshake's deadline is the next.
    let t2 = t1 + Duration::from_millis(150);
    assert!(answer_to(&mut s, &token(64), client_addr(64), t2) > 0);
    assert_eq!(s.poll_timeout(), Some(t1 + 2 * PACKET_SEND_INTERVAL));
    s.disconnect(ClientIndex(0));
    s.handle_timeout(t1 + 2 * PACKET_SEND_INTERVAL);
    assert_eq!(s.poll_timeout(), Some(t2 + Duration::from_secs(5)));
    s.handle_timeout(t2 + Duration::from_secs(5) - Duration::from_nanos(1));
    assert!(s.poll_timeout().is_some(), "the handshake is still open");
    s.handle_timeout(t2 + Duration::from_secs(5));
    assert_eq!(s.poll_timeout(), None, "the handshake timed out");

    // On a server with nothing open, a request sets the first deadline.
    let mut s = server(4, t0);
    assert!(answer_to(&mut s, &token(65), client_addr(65), t0) > 0);
    assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(5)));
}

#[test]
fn a_kicked_client_hears_why() {
    let t0 = Instant::now();
    let mut s = server(2, t0);
    let mut c = Client::new(token(70), t0);
    let t1 = connect(&mut s, &mut c, client_addr(70), t0);
    s.disconnect(ClientIndex(0));
    let mut buf = Vec::new();
    let mut copies = 0;
    let mut events = Vec::new();
    while s.poll_transmit(&mut buf).is_some() {
        copies += 1;
        if let Some(e) = c.handle_datagram(t1, server_addr(), &mut buf) {
            events.push(format!("{e:?}"));
        }
    }
    assert_eq!(copies, 10);
    assert_eq!(events, ["Disconnected(ServerClosed)"]);
    assert_eq!(
        c.dropped, 9,
        "the redundant copies arrive after the connection ended"
    );
}

#[test]
fn replayed_payloads_are_dropped() {
    let t0 = Instant::now();
    let mut s = server(2, t0);
    let mut c = Client::new(token(80), t0);
    let t1 = connect(&mut s, &mut c, client_addr(80), t0);
    let mut out = Vec::new();
    c.send_payload(t1, b"once", &mut out).unwrap();
    let copy = out.clone();
    assert!(s.handle_datagram(t1, client_addr(80), &mut out).is_some());
    assert!(s
        .handle_datagram(t1, client_addr(80), &mut copy.clone())
        .is_none());
    assert_eq!(s.stats().dropped(ServerDrop::Replayed), 1);
}

#[test]
fn the_connection_hinted_for_a_datagram_is_the_one_it_is_handled_for() {
    let t0 = Instant::now();
    let mut s = server(4, t0);
    let (mut a, mut b) = (Client::new(token(21), t0), Client::new(token(22), t0));
    connect(&mut s, &mut a, client_addr(21), t0);
    let t1 = connect(&mut s, &mut b, client_addr(22), t0);
    let mut out = Vec::new();
    for (c, from) in [(&mut a, client_addr(21)), (&mut b, client_addr(22))] {
        c.send_payload(t1, b"input", &mut out).unwrap();
        let hinted = s.prefetch_connection(from);
        let Some(ServerEvent::Payload { client, .. }) = s.handle_datagram(t1, from, &mut out)
        else {
            panic!("a payload from {from}");
        };
        assert_eq!(hinted, Some(client));
        // From an address with no connection: none.
        assert_eq!(s.prefetch_connection(client_addr(99)), None);
    }
    assert_ne!(
        s.prefetch_connection(client_addr(21)),
        s.prefetch_connection(client_addr(22))
    );
}

#[test]
fn a_client_moves_to_the_next_server_then_times_out() {
    let t0 = Instant::now();
    let second: SocketAddr = "127.0.0.1:40002".parse().unwrap();
    let t = token_with(
        90,
        &PRIVATE_KEY,
        PROTOCOL_ID,
        vec![server_addr(), second],
        30,
    );
    let mut c = Client::new(t, t0);
    let mut buf = Vec::new();
    assert_eq!(c.poll_transmit(t0, &mut buf), Some(server_addr()));
    assert_eq!(c.handle_timeout(t0 + Duration::from_secs(5)), None);
    assert_eq!(
        c.poll_transmit(t0 + Duration::from_secs(5), &mut buf),
        Some(second)
    );
    assert_eq!(
        c.handle_timeout(t0 + Duration::from_secs(10)),
        Some(DisconnectReason::ConnectTimedOut)
    );
}

#[test]
fn packets_from_elsewhere_are_ignored_by_the_client() {
    let t0 = Instant::now();
    let mut s = server(2, t0);
    let mut c = Client::new(token(95), t0);
    let t1 = connect(&mut s, &mut c, client_addr(95), t0);
    let mut out = Vec::new();
    s.send_payload(t1, ClientIndex(0), b"hi", &mut out).unwrap();
    let spoofed: SocketAddr = "127.0.0.1:9".parse().unwrap();
    assert_eq!(c.handle_datagram(t1, spoofed, &mut out), None);
    assert_eq!(c.dropped, 1);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever arrives, valid requests among garbage, the server never sends an
        /// address that has no connection more bytes than it received from it.
        #[test]
        fn never_amplifies(
            garbage in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1300), 1..30),
            valid_at in proptest::collection::vec(0usize..30, 0..5),
        ) {
            let t0 = Instant::now();
            let mut s = server(4, t0);
            let mut received = std::collections::HashMap::<SocketAddr, usize>::new();
            let mut sent = std::collections::HashMap::<SocketAddr, usize>::new();
            let mut buf = Vec::new();
            for (i, g) in garbage.iter().enumerate() {
                let from = client_addr((i % 3) as u16);
                let mut data = g.clone();
                if valid_at.contains(&i) {
                    let mut c = Client::new(token(500 + i as u64), t0);
                    c.poll_transmit(t0, &mut data).unwrap();
                }
                *received.entry(from).or_default() += data.len();
                let _ = s.handle_datagram(t0, from, &mut data);
                while let Some(to) = s.poll_transmit(&mut buf) {
                    *sent.entry(to).or_default() += buf.len();
                }
            }
            for (addr, n) in sent {
                prop_assert!(n <= received[&addr], "{addr}: sent {n}, received {}", received[&addr]);
            }
        }

        #[test]
        fn arbitrary_datagrams_never_panic_either_side(
            packets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1400), 1..30)
        ) {
            let t0 = Instant::now();
            let mut s = server(4, t0);
            let mut c = Client::new(token(600), t0);
            let _ = connect(&mut s, &mut c, client_addr(7), t0);
            for p in &packets {
                let _ = s.handle_datagram(t0, client_addr(7), &mut p.clone());
                let _ = s.handle_datagram(t0, client_addr(8), &mut p.clone());
                let _ = c.handle_datagram(t0, server_addr(), &mut p.clone());
            }
        }
    }
}
