//! The host under Agones, against testkit's fake SDK sidecar on loopback: Ready once the
//! workers run, health pings, the `rooms` counter following the hosted matches, an
//! allocation arriving mid-run becoming a match a player joins, bad settings refused in an
//! annotation, Shutdown after the drain; and sidecars that start late, answer errors or
//! never answer, none of which stops the server serving or draining.
//!
//! Every wait is bounded and waits on something observable: the fake's recorded calls (a
//! condition variable), or the host's call counts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickforge_proto::netcode::token::ConnectToken;
use tickforge_server::admin::{worker_link, MatchCreator, MatchState, MatchStatus, SpecDefaults};
use tickforge_server::agones::{Agones, AgonesConfig, Call, CallCounts};
use tickforge_server::{Host, ServerConfig, Shutdown};
use tickforge_testkit::agones::{Counter, FakeSdk, State};

mod common;
use common::{token_for, Player};

/// How long any one expected thing may take before the test fails rather than hangs.
const BOUND: Duration = Duration::from_secs(10);

/// Fast timers, so that retries and pings show within a test's patience.
fn agones_config(sdk: SocketAddr) -> AgonesConfig {
    AgonesConfig {
        health_period: Duration::from_millis(100),
        call_timeout: Duration::from_millis(500),
        retry_first: Duration::from_millis(20),
        retry_max: Duration::from_millis(200),
        shutdown_within: Duration::from_secs(1),
        ..AgonesConfig::new(sdk.port())
    }
}

fn host_config(sdk: SocketAddr, matches: u32) -> ServerConfig {
    common::register_games();
    ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        matches,
        players_per_match: 1,
        max_matches_per_worker: 4,
        admin_bind: Some("127.0.0.1:0".parse().unwrap()),
        agones: Some(agones_config(sdk)),
        ..ServerConfig::default()
    }
}

fn start(config: &ServerConfig) -> (Host, Shutdown) {
    let shutdown = Shutdown::new();
    let status = Arc::new(|_: &tickforge_server::WorkerStatus| {});
    let host = Host::start(config, shutdown.clone(), None, status).unwrap();
    (host, shutdown)
}

/// Polls `done` every 10 ms for at most [`BOUND`]; for state the fake does not see.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < BOUND, "not within {BOUND:?}: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait(sdk: &FakeSdk, what: &str, done: impl FnMut(&State) -> bool) {
    if !sdk.wait_for(BOUND, done) {
        panic!(
            "not within {BOUND:?}: {what}; calls: {:?}",
            sdk.with_state(|s| s.calls.clone())
        );
    }
}

fn rooms(s: &State) -> Counter {
    s.counters["rooms"]
}

/// Plays match `m` at `server` until `snapshots` snapshots arrived.
fn play(server: SocketAddr, config: &ServerConfig, m: u32, snapshots: usize) {
    let token: ConnectToken = token_for(server, &config.private_key, config.protocol_id, m);
    let mut player = Player::new(token);
    let t0 = Instant::now();
    while player.ticks.len() < snapshots {
        assert!(
            t0.elapsed() < BOUND,
            "only {} snapshots",
            player.ticks.len()
        );
        player.step();
    }
}

#[test]
fn ready_once_the_workers_run_then_health_the_counter_and_shutdown_after_the_drain() {
    let sdk = FakeSdk::start();
    let config = host_config(sdk.addr(), 1);
    let (host, shutdown) = start(&config);
    wait(&sdk, "Ready", |s| {
        s.count("POST", "/ready") == 1 && s.state == "Ready"
    });
    wait(&sdk, "health pings", |s| s.count("POST", "/health") >= 3);
    // One startup match; the cap of four leaves room for three more.
    wait(&sdk, "the rooms counter", |s| {
        rooms(s)
            == Counter {
                count: 1,
                capacity: 4,
            }
    });
    assert_eq!(sdk.with_state(|s| s.count("POST", "/shutdown")), 0);
    shutdown.drain();
    host.wait().unwrap();
    // Shutdown is the host's last word, after every worker stopped.
    sdk.with_state(|s| {
        assert_eq!(s.count("POST", "/shutdown"), 1);
        assert_eq!(s.state, "Shutdown");
        let last = s.calls.iter().rposition(|c| c.path == "/shutdown").unwrap();
        assert!(
            s.calls[last + 1..].iter().all(|c| c.path != "/ready"),
            "{:?}",
            s.calls
        );
    });
}

#[test]
fn an_allocation_mid_run_becomes_a_match_a_player_joins_and_the_counter_follows_it() {
    let sdk = FakeSdk::start();
    let config = host_config(sdk.addr(), 0);
    let (host, shutdown) = start(&config);
    wait(&sdk, "Ready", |s| s.count("POST", "/ready") == 1);
    wait(&sdk, "an empty server's counter", |s| {
        rooms(s)
            == Counter {
                count: 0,
                capacity: 4,
            }
    });
    // Agones reports the port players reach this worker at (here, the real one).
    let game = host.addrs()[0];
    sdk.update(
        |s| s.ports = vec![("default".to_string(), game.port())],
        true,
    );

    sdk.allocate(&[
        ("tickforge.dev/allocation", "mm-1"),
        ("tickforge.dev/spec", r#"{"players": 1}"#),
    ]);
    wait(&sdk, "the allocation's outcome", |s| {
        s.sdk_annotation("tickforge-match-mm-1").is_some()
    });
    let outcome: serde_json::Value = sdk.with_state(|s| {
        assert_eq!(
            s.sdk_annotation("tickforge-match"),
            s.sdk_annotation("tickforge-match-mm-1")
        );
        serde_json::from_str(s.sdk_annotation("tickforge-match-mm-1").unwrap()).unwrap()
    });
    assert_eq!(outcome["allocation"], "mm-1");
    assert_eq!(outcome["server"], game.to_string());
    let match_id = outcome["match_id"].as_u64().unwrap() as u32;
    assert_eq!(
        match_id, 1,
        "the first match of a server with none at startup"
    );
    play(game, &config, match_id, 5);
    wait(&sdk, "the counter counting the match", |s| {
        rooms(s).count == 1
    });

    // A short match (256 ticks, 2 s): the count rises with it and falls when it ends.
    sdk.allocate(&[
        ("tickforge.dev/allocation", "mm-2"),
        (
            "tickforge.dev/spec",
            r#"{"players": 1, "game": {"ticks": 256}}"#,
        ),
    ]);
    wait(&sdk, "the second match counted", |s| rooms(s).count == 2);
    wait(&sdk, "the ended match uncounted", |s| rooms(s).count == 1);
    let handled = sdk.with_state(|s| s.sdk_annotation("tickforge-handled").map(str::to_string));
    let last = sdk.with_state(|s| s.annotations["agones.dev/last-allocated"].clone());
    assert_eq!(handled.as_deref(), Some(last.as_str()));
    shutdown.drain();
    host.wait().unwrap();
}

#[test]
fn an_allocation_with_bad_settings_is_refused_in_an_annotation_and_the_server_stays_ready() {
    let sdk = FakeSdk::start();
    let config = host_config(sdk.addr(), 0);
    let (host, shutdown) = start(&config);
    wait(&sdk, "Ready", |s| s.count("POST", "/ready") == 1);
    for (name, spec) in [
        ("bad-1", r#"{"players": 0}"#),
        ("bad-2", r#"{"players": 1, "game": {"ticks": -5}}"#),
        ("bad-3", "not json"),
    ] {
        sdk.allocate(&[
            ("tickforge.dev/allocation", name),
            ("tickforge.dev/spec", spec),
        ]);
        let key = format!("tickforge-match-{name}");
        wait(&sdk, "the refusal", |s| s.sdk_annotation(&key).is_some());
        let refused: serde_json::Value = sdk.with_state(|s| {
            assert_eq!(
                s.sdk_annotation("tickforge-refused"),
                s.sdk_annotation(&key)
            );
            serde_json::from_str(s.sdk_annotation(&key).unwrap()).unwrap()
        });
        let reason = refused["refused"].as_str().unwrap();
        assert!(reason.starts_with("tickforge.dev/spec: "), "{reason}");
    }
    // Still healthy, still taking allocations, never Shutdown.
    let pings = sdk.with_state(|s| s.count("POST", "/health"));
    wait(&sdk, "health pings after the refusals", |s| {
        s.count("POST", "/health") >= pings + 3
    });
    sdk.allocate(&[
        ("tickforge.dev/allocation", "good"),
        ("tickforge.dev/spec", "{}"),
    ]);
    wait(&sdk, "a good allocation after bad ones", |s| {
        s.sdk_annotation("tickforge-match-good").is_some()
    });
    sdk.with_state(|s| {
        assert_eq!(s.count("POST", "/shutdown"), 0);
        assert!(s
            .sdk_annotation("tickforge-match-good")
            .unwrap()
            .contains("match_id"));
    });
    shutdown.drain();
    host.wait().unwrap();
}

#[test]
fn a_sidecar_that_starts_late_gets_ready_after_retries_while_the_server_serves() {
    let late = FakeSdk::late();
    let config = host_config(late.addr(), 1);
    let (host, shutdown) = start(&config);
    let counts = Arc::clone(host.agones_counts().unwrap());
    eventually("Ready refused twice", || counts.failed(Call::Ready) >= 2);
    // Serving meanwhile.
    play(host.addrs()[0], &config, 1, 5);
    let sdk = late.start();
    wait(&sdk, "Ready once the sidecar listens", |s| {
        s.count("POST", "/ready") == 1
    });
    wait(&sdk, "health once it listens", |s| {
        s.count("POST", "/health") >= 1
    });
    assert!(counts.is_ready());
    shutdown.drain();
    host.wait().unwrap();
    assert_eq!(sdk.with_state(|s| s.count("POST", "/shutdown")), 1);
}

#[test]
fn an_erroring_sidecar_is_counted_in_metrics_retried_and_never_stops_serving() {
    let sdk = FakeSdk::start();
    sdk.set_failing(true);
    let config = host_config(sdk.addr(), 1);
    let (host, shutdown) = start(&config);
    let admin = host.admin_addr().unwrap();
    wait(&sdk, "Ready retried", |s| s.failed("/ready") >= 3);
    wait(&sdk, "health retried", |s| s.failed("/health") >= 2);
    play(host.addrs()[0], &config, 1, 5);
    let counts = Arc::clone(host.agones_counts().unwrap());
    eventually("the failures counted", || {
        counts.failed(Call::Ready) >= 3 && counts.failed(Call::Health) >= 2
    });
    let (status, metrics) = tickforge_testkit::http::request(admin, "GET", "/metrics", "");
    assert_eq!(status, 200);
    let value = |line_start: &str| -> u64 {
        let line = (metrics.lines())
            .find(|l| l.starts_with(line_start))
            .unwrap_or_else(|| panic!("{line_start} missing:\n{metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value("tickforge_agones_errors_total{call=\"ready\"}") >= 3);
    assert!(value("tickforge_agones_errors_total{call=\"health\"}") >= 2);
    assert_eq!(value("tickforge_agones_ready "), 0);

    sdk.set_failing(false);
    wait(&sdk, "Ready once the errors stop", |s| {
        s.count("POST", "/ready") == 1
    });
    eventually("the Ready gauge", || counts.is_ready());
    let (_, metrics) = tickforge_testkit::http::request(admin, "GET", "/metrics", "");
    assert!(
        metrics.lines().any(|l| l == "tickforge_agones_ready 1"),
        "{metrics}"
    );
    shutdown.drain();
    host.wait().unwrap();
}

#[test]
fn a_sidecar_that_never_answers_holds_neither_serving_nor_the_drain() {
    let sdk = FakeSdk::silent();
    let config = ServerConfig {
        // The player below never says goodbye: the drain would wait for its timeout.
        drain_timeout: Duration::from_millis(200),
        ..host_config(sdk.addr(), 1)
    };
    let (host, shutdown) = start(&config);
    let counts = Arc::clone(host.agones_counts().unwrap());
    eventually("Ready timed out", || counts.failed(Call::Ready) >= 1);
    play(host.addrs()[0], &config, 1, 5);
    let (status, _) =
        tickforge_testkit::http::request(host.admin_addr().unwrap(), "GET", "/healthz", "");
    assert_eq!(status, 200);
    let t0 = Instant::now();
    shutdown.drain();
    host.wait().unwrap();
    // The drain (200 ms) plus Shutdown's bound of 1 s, and no more.
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "the host took {took:?} to stop"
    );
    assert!(!counts.is_ready());
}

/// A stand-in worker's status: `hosted` matches and room for `remaining` more.
fn status(hosted: u32, remaining: u32) -> impl FnOnce(&mut tickforge_server::admin::WorkerStatus) {
    move |s| {
        s.matches.clear();
        s.matches.extend((1..=hosted).map(|id| MatchStatus {
            id: tickforge_proto::MatchId(id),
            players_connected: 0,
            tick: 0,
            state: MatchState::Waiting,
            ticks: 0,
            late_ticks: 0,
            hitches: 0,
            cost: Default::default(),
        }));
        s.remaining = remaining;
    }
}

#[test]
fn health_pings_stop_while_a_worker_is_stuck_and_the_counter_follows_its_status() {
    common::register_games();
    let sdk = FakeSdk::start();
    // The test thread is the worker: it beats when it says so.
    let (handle, link) = worker_link("127.0.0.1:7777".parse().unwrap());
    let creator = Arc::new(MatchCreator::new(vec![handle], 1, Duration::from_secs(1)));
    let config = AgonesConfig {
        worker_stall: Duration::from_millis(300),
        ..agones_config(sdk.addr())
    };
    let counts = Arc::new(CallCounts::default());
    let agones = Agones::start(
        config,
        creator,
        SpecDefaults::default(),
        Arc::clone(&counts),
    )
    .unwrap();

    // A worker that has never run: not Ready, no pings.
    assert!(!sdk.wait_for(Duration::from_millis(300), |s| {
        s.count("POST", "/ready") > 0 || s.count("POST", "/health") > 0
    }));
    let beating = |until: &dyn Fn(&State) -> bool| {
        let t0 = Instant::now();
        while !sdk.with_state(until) {
            assert!(t0.elapsed() < BOUND, "not within {BOUND:?}");
            link.beat();
            sdk.wait_for(Duration::from_millis(10), |_| false);
        }
    };
    beating(&|s| s.count("POST", "/ready") == 1 && s.count("POST", "/health") >= 2);

    // Stuck: no beat. Pings go on only until the stall shows (300 ms: three periods),
    // then none: twelve periods bring at most those three and one in flight.
    let pings = sdk.with_state(|s| s.count("POST", "/health"));
    assert!(!sdk.wait_for(Duration::from_millis(1200), |s| {
        s.count("POST", "/health") > pings + 4
    }));
    // Beating again: the pings resume.
    let pings = sdk.with_state(|s| s.count("POST", "/health"));
    beating(&|s| s.count("POST", "/health") >= pings + 3);

    // The counter follows what the worker publishes, up and down.
    assert!(link.publish(status(2, 3)));
    wait(&sdk, "count 2 of 5", |s| {
        rooms(s)
            == Counter {
                count: 2,
                capacity: 5,
            }
    });
    assert!(link.publish(status(1, 4)));
    wait(&sdk, "a match ended: count 1", |s| {
        rooms(s)
            == Counter {
                count: 1,
                capacity: 5,
            }
    });
    agones.shutdown();
    assert_eq!(sdk.with_state(|s| s.count("POST", "/shutdown")), 1);
    assert_eq!(counts.succeeded(Call::Shutdown), 1);
    drop(link);
}

/// The counts the driver set on the `rooms` counter in `calls[from..]`.
fn counts_set(s: &State, from: usize) -> Vec<i64> {
    (s.calls[from..].iter())
        .filter(|c| c.method == "PATCH" && c.path == "/v1beta1/counters/rooms")
        .filter_map(|c| {
            let body: serde_json::Value = serde_json::from_str(&c.body).ok()?;
            body["count"].as_str()?.parse().ok()
        })
        .collect()
}

#[test]
fn an_allocation_raising_the_count_is_never_patched_back_below_the_matches_hosted() {
    let sdk = FakeSdk::start();
    let config = host_config(sdk.addr(), 0);
    let (host, shutdown) = start(&config);
    wait(&sdk, "Ready", |s| s.count("POST", "/ready") == 1);
    wait(&sdk, "an empty server's counter", |s| {
        rooms(s)
            == Counter {
                count: 0,
                capacity: 4,
            }
    });
    // Agones raises the count as it allocates (a counter action), in the same update.
    let from = sdk.with_state(|s| s.calls.len());
    sdk.update(|s| s.counters.get_mut("rooms").unwrap().count += 1, false);
    sdk.allocate(&[
        ("tickforge.dev/allocation", "mm-1"),
        ("tickforge.dev/spec", r#"{"players": 1}"#),
    ]);
    wait(&sdk, "the match placed", |s| {
        s.sdk_annotation("tickforge-match-mm-1")
            .is_some_and(|o| o.contains("match_id"))
    });
    // Well past a worker's periodic publish (about a second): ten health periods and more.
    let pings = sdk.with_state(|s| s.count("POST", "/health"));
    wait(&sdk, "time for the counter to settle", |s| {
        s.count("POST", "/health") >= pings + 15
    });
    sdk.with_state(|s| {
        let set = counts_set(s, from);
        assert!(set.iter().all(|&n| n >= 1), "count set to {set:?}");
        assert_eq!(rooms(s).count, 1);
    });
    shutdown.drain();
    host.wait().unwrap();
}

#[test]
fn a_watch_that_reconnects_fetches_the_gameserver_again() {
    let sdk = FakeSdk::start();
    let config = host_config(sdk.addr(), 1);
    let (host, shutdown) = start(&config);
    wait(&sdk, "Ready, the watch and the first fetch", |s| {
        s.count("POST", "/ready") == 1
            && s.count("GET", "/watch/gameserver") >= 1
            && s.count("GET", "/gameserver") >= 1
    });
    let (watches, fetches) = sdk.with_state(|s| {
        (
            s.count("GET", "/watch/gameserver"),
            s.count("GET", "/gameserver"),
        )
    });
    sdk.drop_watches();
    wait(&sdk, "a new watch, and a fetch after it", |s| {
        s.count("GET", "/watch/gameserver") > watches && s.count("GET", "/gameserver") > fetches
    });
    shutdown.drain();
    host.wait().unwrap();
}

#[test]
fn a_worker_that_dies_stops_the_pings_and_leaves_the_counter_but_one_drained_does_not() {
    common::register_games();
    for draining in [false, true] {
        let sdk = FakeSdk::start();
        let (handle, link) = worker_link("127.0.0.1:7777".parse().unwrap());
        let creator = Arc::new(MatchCreator::new(vec![handle], 1, Duration::from_secs(1)));
        let config = AgonesConfig {
            worker_stall: Duration::from_millis(300),
            ..agones_config(sdk.addr())
        };
        let agones = Agones::start(
            config,
            Arc::clone(&creator),
            SpecDefaults::default(),
            Arc::new(CallCounts::default()),
        )
        .unwrap();
        // The worker runs, hosting two matches with room for three more (a publish that
        // meets the driver reading the status is simply made again).
        let t0 = Instant::now();
        let two_of_five = |s: &State| {
            s.count("POST", "/ready") == 1
                && rooms(s)
                    == Counter {
                        count: 2,
                        capacity: 5,
                    }
        };
        while !sdk.with_state(two_of_five) {
            assert!(
                t0.elapsed() < BOUND,
                "not Ready with 2 of 5 within {BOUND:?}"
            );
            link.beat();
            link.publish(status(2, 3));
            sdk.wait_for(Duration::from_millis(10), |_| false);
        }
        if draining {
            // The end of a drain: the loop beats no more, then ends, while results are
            // written; the pings go on.
            creator.set_draining(true);
            let pings = sdk.with_state(|s| s.count("POST", "/health"));
            wait(&sdk, "pings while draining", |s| {
                s.count("POST", "/health") >= pings + 5
            });
            drop(link);
            let pings = sdk.with_state(|s| s.count("POST", "/health"));
            wait(&sdk, "pings after the drained worker ended", |s| {
                s.count("POST", "/health") >= pings + 5
            });
        } else {
            drop(link);
            // The dead worker's matches and room are gone from the counter...
            wait(&sdk, "the counter without the dead worker", |s| {
                rooms(s)
                    == Counter {
                        count: 0,
                        capacity: 0,
                    }
            });
            // ...and the pings stop: twelve periods bring at most one in flight.
            let pings = sdk.with_state(|s| s.count("POST", "/health"));
            assert!(!sdk.wait_for(Duration::from_millis(1200), |s| {
                s.count("POST", "/health") > pings + 1
            }));
        }
        agones.shutdown();
    }
}
