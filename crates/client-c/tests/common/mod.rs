//! The host the tests connect to: a real tickforge host in this process, on loopback,
//! with the shooter registered; and connect tokens for its matches.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::PrivateKey;
use tickforge_proto::user_data::{UserData, ANY, ANY_SEAT};
use tickforge_proto::MatchId;
use tickforge_server::{Host, ServerConfig, Shutdown};

/// Matches the host serves (ids 1..=MATCHES), two seats each: a test per match.
pub const MATCHES: u32 = 4;

/// The host every test of a test binary connects to: one worker, a match per test.
pub struct Server {
    /// Its game socket.
    pub addr: SocketAddr,
    key: PrivateKey,
    protocol_id: u64,
}

/// The host, started on first use; it serves until the test process exits.
pub fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        tickforge_server::games::register::<tickforge_shooter::Shooter>();
        let cores = tickforge_io::cpu::allowed_cores();
        let config = ServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            matches: MATCHES,
            players_per_match: 2,
            cores: Some(cores[..1].to_vec()),
            unjoined_match_ttl: Duration::from_secs(600),
            ..ServerConfig::default()
        };
        let host = Host::start(&config, Shutdown::new(), None, std::sync::Arc::new(|_| {}))
            .expect("the host starts");
        let addr = host.addrs()[0];
        // It serves until the test process exits.
        std::mem::forget(host);
        Server {
            addr,
            key: config.private_key.clone(),
            protocol_id: config.protocol_id,
        }
    })
}

/// A connect token for a seat in match `m`, good for two minutes.
pub fn token(m: u32) -> ConnectToken {
    let s = server();
    let params = TokenParams {
        protocol_id: s.protocol_id,
        create_timestamp: tickforge_io::entropy::unix_now(),
        expire_seconds: 120,
        timeout_seconds: 5,
        server_addresses: vec![s.addr],
    };
    let user_data = UserData {
        match_id: MatchId(m),
        team: ANY,
        seat: ANY_SEAT,
    }
    .encode();
    ConnectToken::mint(
        &params,
        u64::from_le_bytes(tickforge_io::entropy::random_bytes()),
        &user_data,
        &s.key.0,
        &tickforge_io::entropy::random_bytes(),
    )
}
