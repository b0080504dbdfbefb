//! Test helpers: a netcode server and a client connected to it, on virtual time.

use std::net::SocketAddr;
use std::time::Instant;

use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::{self, Client, ServerConfig};
use tickforge_proto::ClientIndex;
pub(crate) use tickforge_testkit::game::{Walk, WalkConfig, WalkEvent, WalkInput};

/// A server and a client that completed the handshake at `now`, without sockets.
pub(crate) fn connected_pair(now: Instant) -> (netcode::Server, Client, ClientIndex, SocketAddr) {
    let server_addr: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let client_addr: SocketAddr = "127.0.0.1:50000".parse().unwrap();
    let key = [1u8; 32];
    let mut server = netcode::Server::new(
        ServerConfig {
            protocol_id: 1,
            private_key: key,
            public_addresses: vec![server_addr],
            max_clients: 4,
            requests_per_second_per_ip: 10,
        },
        now,
        1_700_000_000,
        [2; 32],
    );
    let params = TokenParams {
        protocol_id: 1,
        create_timestamp: 1_700_000_000,
        expire_seconds: 30,
        timeout_seconds: 5,
        server_addresses: vec![server_addr],
    };
    let token = ConnectToken::mint(&params, 1, &[0; 256], &key, &[3; 88]);
    let mut client = Client::new(token, now);
    let mut buf = Vec::new();
    let mut index = None;
    for _ in 0..4 {
        while client.poll_transmit(now, &mut buf).is_some() {
            if let Some(netcode::ServerEvent::Connected { client, .. }) =
                server.handle_datagram(now, client_addr, &mut buf)
            {
                index = Some(client);
            }
        }
        while server.poll_transmit(&mut buf).is_some() {
            let _ = client.handle_datagram(now, server_addr, &mut buf);
        }
    }
    assert!(client.is_connected());
    (server, client, index.expect("connected"), server_addr)
}

/// Makes Walk, the test kit's small game, this process's game (the server's tests host it;
/// the library itself knows no game).
pub(crate) fn register_walk() {
    crate::games::register::<Walk>();
}

/// A Walk match of `seats` seats and `config`, at 128 Hz, its tick 0 due at `start`.
pub(crate) fn walk_match(
    id: tickforge_proto::MatchId,
    seats: u16,
    config: WalkConfig,
    start: Instant,
) -> crate::Match<Walk> {
    let setup = tickforge_api::MatchSetup {
        seats,
        tick_hz: 128,
        record: false,
        stagger: 0,
    };
    crate::Match::new(id, std::sync::Arc::new(config), setup, start)
}
