//! The host on real loopback sockets: several workers each serving their own matches,
//! and the admin port creating matches whose tokens connect, up to the per-worker cap.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use tickforge_proto::netcode::token::ConnectToken;
use tickforge_proto::MatchId;
use tickforge_server::{Host, ServerConfig, Shutdown};

mod common;
use common::{token_for, Player};

/// How long any one exchange may take before the test fails rather than hangs.
const BOUND: Duration = Duration::from_secs(10);

/// Connects with `token` and sends inputs until `snapshots` snapshots arrived; returns the
/// ticks they carried. Panics after [`BOUND`].
fn play(token: ConnectToken, snapshots: usize) -> Vec<u32> {
    let t0 = Instant::now();
    let mut player = Player::new(token);
    while player.ticks.len() < snapshots {
        assert!(
            t0.elapsed() < BOUND,
            "only {} snapshots in {BOUND:?}",
            player.ticks.len()
        );
        player.step();
    }
    player.ticks
}

fn no_status() -> Arc<dyn Fn(&tickforge_server::WorkerStatus) + Send + Sync> {
    Arc::new(|_| {})
}

#[test]
fn two_workers_each_serve_their_own_match_over_udp() {
    let cores = tickforge_io::cpu::allowed_cores();
    if cores.len() < 2 {
        eprintln!("skipped: this process may use only {cores:?}");
        return;
    }
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        matches: 2,
        players_per_match: 2,
        cores: Some(cores[..2].to_vec()),
        ..ServerConfig::default()
    };
    let shutdown = Shutdown::new();
    let host = Host::start(&config, shutdown.clone(), None, no_status()).unwrap();
    let addrs = host.addrs().to_vec();
    assert_eq!(addrs.len(), 2);
    assert_ne!(addrs[0], addrs[1], "each worker has its own socket");
    // Round robin on one node: match 1 on worker 0, match 2 on worker 1.
    let plan = host.plan();
    assert_eq!(plan.workers[0].matches, vec![MatchId(1)]);
    assert_eq!(plan.workers[1].matches, vec![MatchId(2)]);

    let (key, id) = (config.private_key.clone(), config.protocol_id);
    let seen: Vec<Vec<u32>> = std::thread::scope(|s| {
        let players: Vec<_> = [(addrs[0], 1), (addrs[1], 2)]
            .into_iter()
            .map(|(addr, m)| {
                let token = token_for(addr, &key, id, m);
                s.spawn(move || play(token, 20))
            })
            .collect();
        players.into_iter().map(|p| p.join().unwrap()).collect()
    });
    shutdown.stop_now();
    let report = host.wait().unwrap();
    for ticks in &seen {
        assert!(ticks.windows(2).all(|w| w[0] <= w[1]), "{ticks:?}");
    }
    assert_eq!(report.matches, 2);
    assert!(
        report.ticks.on_time + report.ticks.late >= 40,
        "{:?}",
        report.ticks
    );
    assert_eq!(report.datagrams.dropped["refused"], 0);
}

/// One HTTP/1.1 request; returns the status and the body.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    tickforge_testkit::http::request(addr, method, path, body)
}

#[test]
fn post_matches_creates_matches_whose_tokens_connect_until_the_worker_is_full() {
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        matches: 1,
        players_per_match: 2,
        max_matches_per_worker: 2,
        admin_bind: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    };
    let shutdown = Shutdown::new();
    let host = Host::start(&config, shutdown.clone(), None, no_status()).unwrap();
    let admin = host.admin_addr().unwrap();

    let (status, body) = http(admin, "POST", "/matches", r#"{"players": 2}"#);
    assert_eq!(status, 201, "{body}");
    let created: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(created["match_id"], 2, "after the startup match: {body}");
    assert_eq!(created["server"], host.addrs()[0].to_string());
    let tokens = created["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 2);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(tokens[0]["token"].as_str().unwrap())
        .unwrap();
    let token = ConnectToken::from_bytes(&bytes).unwrap();
    assert!(play(token, 5).len() >= 5);

    // One startup match and one created: the cap of two is reached.
    let (status, body) = http(admin, "POST", "/matches", "{}");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("no room for another match: 2 of 2 matches"),
        "{body}"
    );

    // Each match's late ticks reach /metrics with the worker's next publish (once a second).
    let deadline = Instant::now() + BOUND;
    let metrics = loop {
        let (status, text) = http(admin, "GET", "/metrics", "");
        assert_eq!(status, 200);
        if text.contains("tickforge_match_late_ticks_total{match=\"2\"}") {
            break text;
        }
        assert!(Instant::now() < deadline, "no per-match series:\n{text}");
        std::thread::yield_now();
    };
    for family in ["tickforge_match_late_ticks", "tickforge_match_hitches"] {
        for m in [1, 2] {
            let series = format!("{family}_total{{match=\"{m}\"}} ");
            assert!(metrics.contains(&series), "{series} missing:\n{metrics}");
        }
    }
    let (status, list) = http(admin, "GET", "/matches", "");
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");

    shutdown.stop_now();
    host.wait().unwrap();
}
