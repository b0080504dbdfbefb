//! `/metrics` covers faults an alert can fire on: garbage datagrams by reason, connections
//! refused by reason, and the counters of results.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickforge_io::udp::{SocketOptions, UdpSocket};
use tickforge_server::{Host, ServerConfig, Shutdown};

mod common;
use common::{token_for, Player};

/// How long the test may take before it fails rather than hangs.
const BOUND: Duration = Duration::from_secs(10);

/// The value of the sample `series` (name and labels, as written) in `text`.
fn sample(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn metrics_count_garbage_and_refusals_by_reason() {
    common::register_games();
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        players_per_match: 1,
        admin_bind: Some("127.0.0.1:0".parse().unwrap()),
        results_file: None,
        ..ServerConfig::default()
    };
    let shutdown = Shutdown::new();
    let host = Host::start(&config, shutdown.clone(), None, Arc::new(|_| {})).unwrap();
    let (server, admin) = (host.addrs()[0], host.admin_addr().unwrap());
    let (key, id) = (config.private_key.clone(), config.protocol_id);

    // Five connection requests of the wrong size (a request is exactly 1078 bytes): dropped
    // unopened, under a reason nothing else here triggers (the refused player's own late
    // packets count as `unknown_address`). A token for a match that does not exist: refused
    // after the handshake.
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let attacker = UdpSocket::bind(any, SocketOptions::default()).unwrap();
    for _ in 0..5 {
        attacker.send_to(&[0; 10], server).unwrap();
    }
    let mut players = [
        Player::new(token_for(server, &key, id, 1)),
        Player::new(token_for(server, &key, id, 77)),
    ];
    let deadline = Instant::now() + BOUND;
    let text = loop {
        for p in &mut players {
            p.step();
        }
        let (status, text) = tickforge_testkit::http::request(admin, "GET", "/metrics", "");
        assert_eq!(status, 200);
        let short = sample(
            &text,
            "tickforge_datagrams_dropped_total{reason=\"request_size\"}",
        );
        let refused = sample(
            &text,
            "tickforge_connections_refused_total{reason=\"no_such_match\"}",
        );
        if short == Some(5) && refused == Some(1) {
            break text;
        }
        assert!(Instant::now() < deadline, "faults not counted:\n{text}");
    };
    for series in [
        "tickforge_connections_refused_total{reason=\"match_full\"} 0",
        "tickforge_connections_kicked_total{reason=\"misbehaved\"} 0",
        "tickforge_connections_kicked_total{reason=\"flooding\"} 0",
        "tickforge_results_written_total 0",
        "tickforge_results_failed_total 0",
    ] {
        assert!(text.lines().any(|l| l == series), "{series}:\n{text}");
    }
    assert!(!players[0].ticks.is_empty(), "the seated player plays on");
    assert!(
        players[1].ticks.is_empty(),
        "the refused one never gets a tick"
    );
    shutdown.stop_now();
    host.wait().unwrap();
}
