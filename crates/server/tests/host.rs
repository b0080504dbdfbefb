//! The host on real loopback sockets: several workers each serving their own matches,
//! and the admin port creating matches whose tokens connect, up to the per-worker cap;
//! matches nobody joins reclaimed; a drain that no stalled admin client holds up.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use tickforge_proto::netcode::token::ConnectToken;
use tickforge_proto::MatchId;
use tickforge_server::admin::AdminToken;
use tickforge_server::{DrainEvent, Host, HostError, ServerConfig, Shutdown};

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
    common::register_games();
    let cores = tickforge_io::cpu::allowed_cores();
    if cores.len() < 2 {
        // Straight to standard error: libtest shows a passing test's `eprintln!` only under
        // --nocapture, and a skip must show in every run.
        let _ = writeln!(
            std::io::stderr(),
            "skipped: two_workers_each_serve_their_own_match_over_udp: this process may use \
             only {cores:?}"
        );
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

const ADMIN_TOKEN: &str = "host-test-admin-token-42";

fn admin_token() -> Option<AdminToken> {
    Some(AdminToken::new(ADMIN_TOKEN).unwrap())
}

/// One HTTP/1.1 request with the admin token (and a JSON content type for a body);
/// returns the status and the body.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let mut headers = vec![("Authorization", bearer.as_str())];
    if !body.is_empty() {
        headers.push(("Content-Type", "application/json"));
    }
    let r = tickforge_testkit::http::request_with(addr, method, path, &headers, body);
    (r.status, r.body)
}

#[test]
fn post_matches_creates_matches_whose_tokens_connect_until_the_worker_is_full() {
    common::register_games();
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        matches: 1,
        players_per_match: 2,
        max_matches_per_worker: 2,
        admin_bind: Some("127.0.0.1:0".parse().unwrap()),
        admin_token: admin_token(),
        ..ServerConfig::default()
    };
    let shutdown = Shutdown::new();
    let host = Host::start(&config, shutdown.clone(), None, no_status()).unwrap();
    let admin = host.admin_addr().unwrap();

    // The token is required: without it nothing is created.
    let r = tickforge_testkit::http::request_with(admin, "POST", "/matches", &[], "");
    assert_eq!(r.status, 401, "{r:?}");
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
    // What replication did reaches it too: the snapshots the player read, the states in
    // them, and what was relevant (nothing left out: two players, an open packet).
    let metrics = metrics_when(admin, "5 snapshots counted", |text| {
        sample_value(text, "tickforge_replication_snapshots_total ").is_some_and(|n| n >= 5)
    });
    let states = sample_value(
        &metrics,
        "tickforge_replication_records_total{kind=\"state\"} ",
    );
    let relevant = sample_value(&metrics, "tickforge_replication_relevant_total ");
    assert!(states.is_some_and(|n| n >= 5), "{metrics}");
    assert!(relevant >= states, "{metrics}");
    assert_eq!(
        sample_value(
            &metrics,
            "tickforge_replication_left_out_total{reason=\"room\"} "
        ),
        Some(0),
        "{metrics}"
    );
    assert!(
        sample_value(&metrics, "tickforge_replication_max_staleness_ticks ").is_some(),
        "{metrics}"
    );
    let (status, list) = http(admin, "GET", "/matches", "");
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");

    shutdown.stop_now();
    host.wait().unwrap();
}

/// Polls `/metrics` until `line` is one of its lines, up to [`BOUND`].
fn metrics_until(admin: SocketAddr, line: &str) -> String {
    metrics_when(admin, line, |text| text.lines().any(|l| l == line))
}

/// `/metrics` once `ready` holds of it; fails the test (naming `what`) if it does not
/// within [`BOUND`].
fn metrics_when(admin: SocketAddr, what: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + BOUND;
    loop {
        let (status, text) = http(admin, "GET", "/metrics", "");
        assert_eq!(status, 200);
        if ready(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "never got {what}:\n{text}");
        // A bounded poll of a condition the worker publishes once a second.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of the first sample of `metrics` whose line starts with `series`.
fn sample_value(metrics: &str, series: &str) -> Option<u64> {
    let line = metrics.lines().find(|l| l.starts_with(series))?;
    line.rsplit_once(' ')?.1.parse().ok()
}

/// The ids `/matches` lists, ascending.
fn listed(admin: SocketAddr) -> Vec<u64> {
    let (status, list) = http(admin, "GET", "/matches", "");
    assert_eq!(status, 200, "{list}");
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let mut ids: Vec<u64> = (list.as_array().unwrap().iter())
        .map(|m| m["id"].as_u64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn unjoined_admin_matches_are_reclaimed_after_the_ttl_without_a_result() {
    common::register_games();
    let results =
        std::env::temp_dir().join(format!("tickforge-reclaim-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&results);
    let ttl = Duration::from_millis(500);
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        matches: 1,
        players_per_match: 2,
        max_matches_per_worker: 3,
        admin_bind: Some("127.0.0.1:0".parse().unwrap()),
        admin_token: admin_token(),
        unjoined_match_ttl: ttl,
        results_file: Some(results.clone()),
        ..ServerConfig::default()
    };
    let shutdown = Shutdown::new();
    let host = Host::start(&config, shutdown.clone(), None, no_status()).unwrap();
    let admin = host.admin_addr().unwrap();

    // Match 2 is joined; match 3 is not. With startup match 1 the worker is full.
    let (status, body) = http(admin, "POST", "/matches", r#"{"players": 2}"#);
    assert_eq!(status, 201, "{body}");
    let created: serde_json::Value = serde_json::from_str(&body).unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(created["tokens"][0]["token"].as_str().unwrap())
        .unwrap();
    assert!(play(ConnectToken::from_bytes(&bytes).unwrap(), 5).len() >= 5);
    let (status, body) = http(admin, "POST", "/matches", r#"{"players": 2}"#);
    assert_eq!(status, 201, "{body}");
    let unjoined_at = Instant::now();
    let (status, body) = http(admin, "POST", "/matches", "{}");
    assert_eq!(status, 503, "full: {body}");

    // Only the unjoined one is reclaimed, and not before its time.
    metrics_until(admin, "tickforge_matches_reclaimed_total 1");
    let after = unjoined_at.elapsed();
    // Created at most a tick before its 201 arrived: allow that much.
    assert!(
        after + Duration::from_millis(10) >= ttl,
        "reclaimed after {after:?}"
    );
    // The same publish that counted it no longer lists it; the joined match stays.
    assert_eq!(listed(admin), vec![1, 2]);
    let (status, body) = http(admin, "POST", "/matches", r#"{"players": 2}"#);
    assert_eq!(status, 201, "room again: {body}");
    // That one is not joined either, and goes the same way.
    metrics_until(admin, "tickforge_matches_reclaimed_total 2");
    assert_eq!(listed(admin), vec![1, 2]);

    shutdown.stop_now();
    host.wait().unwrap();
    let written = std::fs::read_to_string(&results).unwrap_or_default();
    assert_eq!(written, "", "a reclaimed match writes no result");
    let _ = std::fs::remove_file(&results);
}

/// A player connected to `addr`'s match `m`, stepping on its own thread until the
/// returned flag is set; returns once the player has had a snapshot.
fn connected_player(
    addr: SocketAddr,
    config: &ServerConfig,
    m: u32,
) -> (
    Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<()>,
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let token = token_for(addr, &config.private_key, config.protocol_id, m);
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let flag = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        let mut player = Player::new(token);
        let t0 = Instant::now();
        let mut told = false;
        while !flag.load(Ordering::Acquire) {
            player.step();
            if !told && !player.ticks.is_empty() {
                tx.send(()).unwrap();
                told = true;
            }
            if !told && t0.elapsed() > BOUND {
                return;
            }
        }
    });
    rx.recv_timeout(BOUND)
        .expect("the player never got a snapshot");
    (stop, thread)
}

#[test]
fn a_drain_finishes_within_its_timeout_while_an_admin_client_stalls() {
    common::register_games();
    let drain_timeout = Duration::from_secs(1);
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        matches: 1,
        drain_timeout,
        admin_bind: Some("127.0.0.1:0".parse().unwrap()),
        admin_token: admin_token(),
        ..ServerConfig::default()
    };
    let shutdown = Shutdown::new();
    let host = Host::start(&config, shutdown.clone(), None, no_status()).unwrap();
    let admin = host.admin_addr().unwrap();
    // A player in the startup match (100 s rounds): the drain waits for it until the
    // drain timeout.
    let (stop_player, player) = connected_player(host.addrs()[0], &config, 1);
    // A body that never comes: the admin's own deadline for it is 5 s.
    let mut stalled = std::net::TcpStream::connect(admin).unwrap();
    stalled.set_read_timeout(Some(BOUND)).unwrap();
    write!(
        stalled,
        "POST /matches HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"
    )
    .unwrap();
    let (status, _) = http(admin, "GET", "/healthz", "");
    assert_eq!(status, 200);

    let t0 = Instant::now();
    shutdown.drain();
    let mut events = Vec::new();
    host.wait_with(&mut |e| events.push(*e)).unwrap();
    let took = t0.elapsed();
    stop_player.store(true, std::sync::atomic::Ordering::Release);
    player.join().unwrap();
    // The match with its player holds the drain for its whole timeout; the stalled client
    // adds nothing beyond the workers' last wake-up and the admin's shutdown.
    assert!(
        matches!(
            events.first(),
            Some(DrainEvent::Started {
                matches: 1,
                players: 1,
                ..
            })
        ),
        "{events:?}"
    );
    assert!(
        matches!(
            events.last(),
            Some(DrainEvent::Ended {
                matches: 1,
                players: 1,
                ..
            })
        ),
        "cut off by the timeout: {events:?}"
    );
    assert!(
        took >= drain_timeout && took < drain_timeout + Duration::from_millis(300),
        "drain took {took:?}"
    );
    // And the stalled client was let go.
    let mut rest = Vec::new();
    let _ = stalled.read_to_end(&mut rest);
}

#[test]
fn a_fast_second_signal_counts_what_the_workers_report_as_they_stop() {
    common::register_games();
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        matches: 1,
        ..ServerConfig::default()
    };
    let shutdown = Shutdown::new();
    let host = Host::start(&config, shutdown.clone(), None, no_status()).unwrap();
    let (stop_player, player) = connected_player(host.addrs()[0], &config, 1);
    // Both signals before the worker's next wake-up, as a fast double Ctrl-C: the worker
    // reports its match and player as it stops, and the host counts them.
    assert_eq!(shutdown.signal(), 1);
    assert_eq!(shutdown.signal(), 2);
    let err = host.wait().unwrap_err();
    stop_player.store(true, std::sync::atomic::Ordering::Release);
    player.join().unwrap();
    assert!(
        matches!(
            err,
            HostError::Abandoned {
                matches: 1,
                players: 1,
                results_unwritten: 0,
                unreported: 0,
                workers: 1
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "a second signal stopped the drain: abandoned 1 match with 1 player still playing"
    );
}
