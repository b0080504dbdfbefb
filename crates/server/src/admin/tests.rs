//! The admin server over real TCP on 127.0.0.1, with fake workers answering its commands.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread::JoinHandle;
use std::time::Instant;

use tickforge_proto::netcode::token::{private_key_cipher, PrivateToken};
use tickforge_testkit::http::{read_response, request_with, Response};

use super::*;

const KEY: [u8; 32] = [7; 32];
const PROTOCOL_ID: u64 = 0x1234;
const TOKEN: &str = "test-admin-token-0123456789";
const BEARER: (&str, &str) = ("Authorization", "Bearer test-admin-token-0123456789");
const JSON_TYPE: (&str, &str) = ("Content-Type", "application/json");
/// The most a `/healthz` probe may take, whatever else the server is handling.
const PROBE_BOUND: Duration = Duration::from_millis(100);
/// How long a test waits for something that must happen before it fails instead of hangs.
const BOUND: Duration = Duration::from_secs(5);

fn config() -> AdminConfig {
    crate::testing::register_walk();
    let mut c = AdminConfig::new("127.0.0.1:0".parse().unwrap(), PROTOCOL_ID, PrivateKey(KEY));
    c.first_match_id = 100;
    c.reply_timeout = Duration::from_millis(200);
    c.token = Some(AdminToken::new(TOKEN).unwrap());
    c
}

/// What a fake worker does with a create request.
#[derive(Clone)]
enum Behaviour {
    Accept,
    Refuse(CreateError),
    /// Keeps the request and never answers.
    Silent,
}

/// A worker thread that answers commands until the admin side closes the channel, and
/// returns the ids it accepted.
fn fake_worker(link: WorkerLink, behaviour: Behaviour) -> JoinHandle<Vec<MatchId>> {
    std::thread::spawn(move || {
        let mut accepted = Vec::new();
        let mut unanswered = Vec::new();
        // A real worker polls; blocking here keeps the fake simple and the test free of sleeps.
        while let Ok(AdminCommand::CreateMatch(req)) = link.commands.recv() {
            match &behaviour {
                Behaviour::Accept => {
                    accepted.push(req.match_id);
                    assert!(req.answer(Ok(())));
                }
                Behaviour::Refuse(e) => {
                    req.answer(Err(e.clone()));
                }
                Behaviour::Silent => unanswered.push(req),
            }
        }
        accepted
    })
}

struct Host {
    server: AdminServer,
    workers: Vec<JoinHandle<Vec<MatchId>>>,
}

impl Host {
    fn start(behaviours: &[Behaviour], fill: impl Fn(usize, &mut WorkerStatus)) -> Host {
        Host::start_with(config(), behaviours, fill)
    }

    fn start_with(
        config: AdminConfig,
        behaviours: &[Behaviour],
        fill: impl Fn(usize, &mut WorkerStatus),
    ) -> Host {
        let mut handles = Vec::new();
        let mut workers = Vec::new();
        for (i, b) in behaviours.iter().enumerate() {
            let (admin, link) = worker_link(game_addr(i));
            assert!(link.publish(|s| fill(i, s)));
            handles.push(admin);
            workers.push(fake_worker(link, b.clone()));
        }
        let server = AdminServer::start(config, handles).unwrap();
        Host { server, workers }
    }

    fn request(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        http(self.server.local_addr(), method, path, body)
    }

    /// Stops the server and returns what each fake worker accepted.
    fn stop(self) -> Vec<Vec<MatchId>> {
        self.server.shutdown().unwrap();
        self.workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .collect()
    }
}

/// One HTTP/1.1 request with the admin token (and a JSON content type for a body);
/// returns the status and the body.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let headers: &[(&str, &str)] = if body.is_empty() {
        &[BEARER]
    } else {
        &[BEARER, JSON_TYPE]
    };
    let r = request_with(addr, method, path, headers, body);
    (r.status, r.body)
}

/// One `GET /healthz` on a new connection, which must answer 200 within [`PROBE_BOUND`];
/// returns how long it took.
fn probe(addr: SocketAddr) -> Duration {
    let t0 = Instant::now();
    let (status, body) = tickforge_testkit::http::request(addr, "GET", "/healthz", "");
    let took = t0.elapsed();
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    assert!(took < PROBE_BOUND, "/healthz took {took:?}");
    took
}

/// A connection that will read for at most [`BOUND`].
fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    s
}

/// Reads until the server closes `stream` (EOF or reset) and returns what it sent; fails
/// if it is still open after [`BOUND`].
fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("still open after {BOUND:?} ({e}); got {got:?}"),
        }
    }
}

/// Worker `i`'s game port, as the tokens must name it.
fn game_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 40000 + i as u16))
}

fn c_bind(l: &std::net::TcpListener) -> String {
    l.local_addr().unwrap().to_string()
}

fn no_status(_: usize, _: &mut WorkerStatus) {}

/// Connections the server closed for `reason`, as `/metrics` would count them.
fn closed(server: &AdminServer, reason: &str) -> u64 {
    (server.connections.closed_counts().into_iter())
        .find(|(r, _)| *r == reason)
        .map_or(0, |(_, n)| n)
}

/// Waits until `n` connections are in `phase` (inside the handler, say), up to [`BOUND`].
fn until_in_phase(server: &AdminServer, phase: http::Phase, n: usize) {
    let t0 = Instant::now();
    loop {
        let counts = server.connections.phase_counts();
        if counts.get(&phase).copied().unwrap_or(0) >= n {
            return;
        }
        assert!(
            t0.elapsed() < BOUND,
            "never {n} connections in {phase:?}: {counts:?}"
        );
        std::thread::yield_now();
    }
}

/// Waits until the server has closed `n` connections for `reason`, up to [`BOUND`].
fn until_closed(server: &AdminServer, reason: &str, n: u64) {
    let t0 = Instant::now();
    while closed(server, reason) < n {
        assert!(
            t0.elapsed() < BOUND,
            "{} connections closed for {reason}, not {n}: {:?}",
            closed(server, reason),
            server.connections.closed_counts()
        );
        std::thread::yield_now();
    }
}

#[test]
fn healthz_is_ok_while_serving_and_503_while_draining() {
    let host = Host::start(&[Behaviour::Accept], no_status);
    assert_eq!(
        host.request("GET", "/healthz", ""),
        (200, "ok\n".to_string())
    );
    host.server.set_draining(true);
    assert_eq!(
        host.request("GET", "/healthz", ""),
        (503, "draining\n".to_string())
    );
    // Draining also refuses new matches, before asking any worker.
    let (status, body) = host.request("POST", "/matches", "{}");
    assert_eq!(status, 503);
    assert!(body.contains("draining"), "{body}");
    host.server.set_draining(false);
    assert_eq!(host.request("GET", "/healthz", "").0, 200);
    assert_eq!(host.stop(), vec![Vec::<MatchId>::new()]);
}

#[test]
fn metrics_sum_every_workers_snapshot() {
    let host = Host::start(&[Behaviour::Accept, Behaviour::Accept], |i, s| {
        s.metrics.ticks = 1000 * (i as u64 + 1);
        s.metrics.matches = 2;
    });
    let (status, body) = host.request("GET", "/metrics", "");
    assert_eq!(status, 200);
    assert!(body.contains("\ntickforge_ticks_total 3000\n"), "{body}");
    assert!(body.contains("\ntickforge_matches 4\n"), "{body}");
    assert!(body.ends_with("# EOF\n"));
    host.stop();
}

#[test]
fn matches_lists_what_workers_published() {
    let host = Host::start(&[Behaviour::Accept, Behaviour::Accept], |i, s| {
        s.matches.push(MatchStatus {
            id: MatchId(i as u32 + 1),
            players_connected: 10,
            tick: 640,
            state: MatchState::Running,
            ticks: 640,
            late_ticks: 0,
            hitches: 0,
            cost: Default::default(),
        });
    });
    let (status, body) = host.request("GET", "/matches", "");
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2, "{body}");
    for (i, m) in list.iter().enumerate() {
        for (key, want) in [
            ("id", serde_json::json!(i + 1)),
            ("worker", serde_json::json!(i)),
            ("players_connected", serde_json::json!(10)),
            ("tick", serde_json::json!(640)),
            ("state", serde_json::json!("running")),
            ("rounds", serde_json::json!([])),
            ("current_round", serde_json::Value::Null),
        ] {
            assert_eq!(m[key], want, "{key}: {body}");
        }
    }
    host.stop();
}

#[test]
fn matches_show_each_rounds_means_the_current_round_and_violations() {
    use tickforge_telemetry::rounds::{Budgets, MatchHistory, FRAME_SLOT};
    use tickforge_telemetry::{Category, FrameRecord};
    let mut budgets = Budgets::default();
    budgets.ns[Category::Gameplay.index()] = Some(50_000);
    budgets.ns[FRAME_SLOT] = Some(117_188);
    let mut history = MatchHistory::new(budgets);
    let frame = |gameplay_ns: u64| {
        let mut r = FrameRecord::default();
        r.category_ns[Category::Gameplay.index()] = gameplay_ns;
        r.category_ns[Category::Network.index()] = 40_000;
        r.total_ns = gameplay_ns + 40_000;
        r
    };
    // Round 1: 4 ticks of 60 µs gameplay (over its 50 µs), round 2 so far: 2 of 20 µs.
    for _ in 0..4 {
        history.record(Some(1), &frame(60_000), false);
    }
    history.record(Some(2), &frame(20_000), true);
    history.record(Some(2), &frame(20_000), false);
    let mut cost = MatchCost::default();
    cost.fill(&history);
    let host = Host::start(&[Behaviour::Accept], move |_, s| {
        s.matches.push(MatchStatus {
            id: MatchId(9),
            players_connected: 2,
            tick: 6,
            state: MatchState::Running,
            ticks: 6,
            late_ticks: 1,
            hitches: 0,
            cost: cost.clone(),
        });
    });
    let (status, body) = host.request("GET", "/matches", "");
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let m = &list[0];
    assert_eq!(m["rounds"].as_array().unwrap().len(), 1, "{body}");
    let r1 = &m["rounds"][0];
    assert_eq!(r1["round"], 1);
    assert_eq!(r1["ticks"], 4);
    assert_eq!(r1["frame_ms"]["mean"], 0.1);
    assert_eq!(r1["categories_ms"]["gameplay"], 0.06);
    assert_eq!(r1["categories_ms"]["network"], 0.04);
    assert_eq!(
        r1["budget_violations"],
        serde_json::json!({"gameplay": 4, "frame": 0})
    );
    let now = &m["current_round"];
    assert_eq!(
        (now["round"].clone(), now["ticks"].clone()),
        (2.into(), 2.into())
    );
    assert_eq!(now["late_ticks"], 1);
    assert_eq!(now["frame_ms"]["mean"], 0.06);
    assert_eq!(m["frame"]["ticks"], 6);
    assert!(m["frame"].get("round").is_none(), "{body}");
    assert_eq!(m["frame"]["budget_violations"]["gameplay"], 4);
    assert_eq!(
        m["budgets_ms"],
        serde_json::json!({"gameplay": 0.05, "frame": 0.117188})
    );
    host.stop();
}

#[test]
fn post_creates_a_match_and_returns_its_tokens() {
    let host = Host::start(&[Behaviour::Accept], no_status);
    let (status, body) = host.request("POST", "/matches", "");
    assert_eq!(status, 201, "{body}");
    let created: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(created["match_id"], 100);
    assert_eq!(created["game"], "walk");
    assert_eq!(created["server"], "127.0.0.1:40000");
    let tokens = created["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 10);
    // Each token is a valid netcode token whose sealed user data names the match and slot.
    for (slot, t) in tokens.iter().enumerate() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(t["token"].as_str().unwrap())
            .unwrap();
        let mut token = ConnectToken::from_bytes(&bytes).unwrap();
        assert_eq!(token.protocol_id, PROTOCOL_ID);
        let private: PrivateToken = PrivateToken::open(
            &mut token.private,
            token.protocol_id,
            token.expire_timestamp,
            &token.nonce,
            &private_key_cipher(&KEY),
        )
        .unwrap();
        assert_eq!(private.client_id, t["client_id"].as_u64().unwrap());
        let user = UserData::parse(&private.user_data).unwrap();
        assert_eq!(user.match_id, MatchId(100));
        assert_eq!(usize::from(user.seat), slot);
    }
    let (status, body) = host.request(
        "POST",
        "/matches",
        r#"{"players": 2, "game": {"ticks": 500}}"#,
    );
    assert_eq!(status, 201, "{body}");
    let created: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(created["match_id"], 101);
    assert_eq!(created["tokens"].as_array().unwrap().len(), 2);
    assert_eq!(host.stop(), vec![vec![MatchId(100), MatchId(101)]]);
}

#[test]
fn malformed_bodies_get_400_with_the_reason() {
    let host = Host::start(&[Behaviour::Accept], no_status);
    for (body, reason) in [
        ("{players: 3}", "key must be a string"),
        (r#"{"players": 3, "bots": 1}"#, "unknown field `bots`"),
        (
            r#"{"players": 500}"#,
            "players: expected 1 to 100 (the most game `walk` takes), got 500",
        ),
        (r#"{"tick_hz": 0}"#, "tick_hz: expected 1 to 1000, got 0"),
    ] {
        let (status, text) = host.request("POST", "/matches", body);
        assert_eq!(status, 400, "{body}: {text}");
        let error: serde_json::Value = serde_json::from_str(&text).unwrap();
        let error = error["error"].as_str().unwrap();
        assert!(error.contains(reason), "{body}: {error}");
    }
    let huge = format!(r#"{{"game": {{"map": "{}"}}}}"#, "a".repeat(MAX_BODY_BYTES));
    assert_eq!(host.request("POST", "/matches", &huge).0, 413);
    // No malformed body reached the worker.
    assert_eq!(host.stop(), vec![Vec::<MatchId>::new()]);
}

#[test]
fn a_full_worker_passes_the_match_to_the_next() {
    let full = CreateError::Full {
        reason: "60 of 60 matches".to_string(),
    };
    // Worker 0 publishes fewer matches, so it is asked first.
    let host = Host::start(&[Behaviour::Refuse(full), Behaviour::Accept], |i, s| {
        s.matches.resize(
            i + 1,
            MatchStatus {
                id: MatchId(0),
                players_connected: 0,
                tick: 0,
                state: MatchState::Waiting,
                ticks: 0,
                late_ticks: 0,
                hitches: 0,
                cost: Default::default(),
            },
        );
    });
    let (status, body) = host.request("POST", "/matches", "{}");
    assert_eq!(status, 201, "{body}");
    // The tokens send players to the worker that took the match.
    let created: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(created["server"], "127.0.0.1:40001");
    let token = base64::engine::general_purpose::STANDARD
        .decode(created["tokens"][0]["token"].as_str().unwrap())
        .unwrap();
    let token = ConnectToken::from_bytes(&token).unwrap();
    assert_eq!(token.server_addresses, vec![game_addr(1)]);
    assert_eq!(host.stop(), vec![vec![], vec![MatchId(100)]]);
}

#[test]
fn refusals_and_silence_get_503_with_the_reason() {
    let full = CreateError::Full {
        reason: "60 of 60 matches".to_string(),
    };
    let host = Host::start(&[Behaviour::Refuse(full)], no_status);
    let (status, body) = host.request("POST", "/matches", "{}");
    assert_eq!(status, 503);
    assert!(body.contains("60 of 60 matches"), "{body}");
    host.stop();

    let unsupported = CreateError::Unsupported {
        reason: "this worker runs 128 Hz".to_string(),
    };
    let host = Host::start(&[Behaviour::Refuse(unsupported)], no_status);
    let (status, body) = host.request("POST", "/matches", r#"{"tick_hz": 64}"#);
    assert_eq!(status, 422);
    assert!(body.contains("128 Hz"), "{body}");
    host.stop();

    // The reply timeout is the behaviour under test here, not a synchronization.
    let host = Host::start(&[Behaviour::Silent], no_status);
    let (status, body) = host.request("POST", "/matches", "{}");
    assert_eq!(status, 503);
    assert!(body.contains("did not answer within 200 ms"), "{body}");
    host.stop();
}

#[test]
fn unknown_paths_get_404_and_wrong_methods_405() {
    let host = Host::start(&[Behaviour::Accept], no_status);
    assert_eq!(host.request("GET", "/nope", "").0, 404);
    assert_eq!(host.request("DELETE", "/matches", "").0, 405);
    assert_eq!(host.request("POST", "/healthz", "").0, 405);
    assert_eq!(host.request("GET", "/healthz?verbose=1", "").0, 200);
    host.stop();
}

#[test]
fn shutdown_joins_the_thread_and_closes_the_links() {
    let (admin, link) = worker_link(game_addr(0));
    let server = AdminServer::start(config(), vec![admin]).unwrap();
    let addr = server.local_addr();
    assert_eq!(http(addr, "GET", "/healthz", "").0, 200);
    server.shutdown().unwrap();
    // The admin side of the link is gone with the thread: polling finds nothing, and a
    // blocking receive would end.
    assert!(link.poll_command().is_none());
    assert!(link.commands.recv().is_err());
    // An address in use is a typed error naming it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = config();
    c.bind = taken.local_addr().unwrap();
    let err = AdminServer::start(c, Vec::new()).err().unwrap();
    assert!(matches!(err, AdminError::Bind { .. }), "{err}");
    assert!(err.to_string().contains(&c_bind(&taken)), "{err}");
}

#[test]
fn routes_but_the_probes_need_the_bearer_token() {
    let host = Host::start(&[Behaviour::Accept], no_status);
    let addr = host.server.local_addr();
    let send = |method: &str, path: &str, headers: &[(&str, &str)]| -> Response {
        request_with(addr, method, path, headers, "")
    };
    let wrong = ("Authorization", "Bearer test-admin-token-0123456788");
    let basic = ("Authorization", "Basic dGVzdA==");
    for (method, path) in [("GET", "/matches"), ("POST", "/matches"), ("GET", "/nope")] {
        for headers in [&[][..], &[wrong], &[basic]] {
            let r = send(method, path, headers);
            assert_eq!(r.status, 401, "{method} {path} {headers:?}: {r:?}");
            assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{r:?}");
            assert!(r.body.contains("Authorization: Bearer"), "{r:?}");
        }
    }
    // Probes and scrapers need none by default.
    assert_eq!(send("GET", "/healthz", &[]).status, 200);
    assert_eq!(send("GET", "/metrics", &[]).status, 200);
    assert_eq!(send("GET", "/matches", &[BEARER]).status, 200);
    assert_eq!(send("GET", "/nope", &[BEARER]).status, 404);
    // No unauthorized POST reached the worker.
    assert_eq!(host.stop(), vec![Vec::<MatchId>::new()]);

    // Locked down, the probes need it too.
    let mut c = config();
    c.auth_probes = true;
    let host = Host::start_with(c, &[Behaviour::Accept], no_status);
    let addr = host.server.local_addr();
    for path in ["/healthz", "/metrics"] {
        let r = request_with(addr, "GET", path, &[], "");
        assert_eq!(r.status, 401, "{path}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        assert_eq!(request_with(addr, "GET", path, &[BEARER], "").status, 200);
    }
    host.stop();
}

#[test]
fn without_a_token_the_server_only_starts_on_loopback() {
    let mut c = config();
    c.token = None;
    c.bind = "0.0.0.0:0".parse().unwrap();
    let err = AdminServer::start(c.clone(), Vec::new()).err().unwrap();
    assert!(matches!(err, AdminError::Unprotected { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("admin_token_file") && text.contains("TICKFORGE_ADMIN_TOKEN"),
        "{text}"
    );
    // On loopback it runs, and every route is open.
    c.bind = "127.0.0.1:0".parse().unwrap();
    let server = AdminServer::start(c, Vec::new()).unwrap();
    let r = request_with(server.local_addr(), "GET", "/matches", &[], "");
    assert_eq!((r.status, r.body.as_str()), (200, "[]"));
    server.shutdown().unwrap();
}

#[test]
fn post_takes_json_only_and_an_array_is_a_400() {
    let host = Host::start(&[Behaviour::Accept], no_status);
    let addr = host.server.local_addr();
    for headers in [
        &[BEARER, ("Content-Type", "text/plain")][..],
        &[
            BEARER,
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &[BEARER],
    ] {
        let r = request_with(addr, "POST", "/matches", headers, "{}");
        assert_eq!(r.status, 415, "{headers:?}: {r:?}");
        assert!(r.body.contains("application/json"), "{r:?}");
    }
    let r = request_with(addr, "POST", "/matches", &[BEARER, JSON_TYPE], "[1]");
    assert_eq!(r.status, 400, "{r:?}");
    let error: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .starts_with("expected a JSON object with optional players, tick_hz, game"),
        "{error}"
    );
    // A type with parameters is still JSON; an empty body needs no type at all.
    let charset = ("Content-Type", "Application/JSON; charset=utf-8");
    let r = request_with(addr, "POST", "/matches", &[BEARER, charset], "{}");
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(
        request_with(addr, "POST", "/matches", &[BEARER], "").status,
        201
    );
    assert_eq!(host.stop(), vec![vec![MatchId(100), MatchId(101)]]);
}

#[test]
fn healthz_says_degraded_while_results_are_pending() {
    let host = Host::start(&[Behaviour::Accept, Behaviour::Accept], |i, s| {
        s.metrics.results_pending = i as u64 * 2;
    });
    let r = request_with(host.server.local_addr(), "GET", "/healthz", &[], "");
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "degraded: 2 result(s) not yet written\n")
    );
    host.server.set_draining(true);
    assert_eq!(
        host.request("GET", "/healthz", ""),
        (503, "draining\n".to_string())
    );
    host.stop();
}

#[test]
fn admin_requests_are_counted_by_status() {
    let host = Host::start(&[Behaviour::Accept], no_status);
    let addr = host.server.local_addr();
    let (status, first) = host.request("GET", "/metrics", "");
    assert_eq!(status, 200);
    assert!(
        !first.contains("tickforge_admin_requests"),
        "none yet:\n{first}"
    );
    assert_eq!(host.request("GET", "/healthz", "").0, 200);
    assert_eq!(host.request("GET", "/nope", "").0, 404);
    assert_eq!(host.request("GET", "/nope", "").0, 404);
    assert_eq!(request_with(addr, "GET", "/matches", &[], "").status, 401);
    let (_, text) = host.request("GET", "/metrics", "");
    for line in [
        "tickforge_admin_requests_total{code=\"200\"} 2",
        "tickforge_admin_requests_total{code=\"401\"} 1",
        "tickforge_admin_requests_total{code=\"404\"} 2",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    }
    host.stop();
}

#[test]
fn a_stalled_body_blocks_nobody_and_gets_408_at_its_deadline() {
    let mut c = config();
    c.body_timeout = Duration::from_millis(800);
    let host = Host::start_with(c, &[Behaviour::Accept], no_status);
    let addr = host.server.local_addr();
    let mut stalled = connect(addr);
    let sent = Instant::now();
    write!(
        stalled,
        "POST /matches HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 2000\r\n\r\n{{\"players\": "
    )
    .unwrap();
    // Probes until the stalled request is answered: every one is served meanwhile.
    let mut probes = 0;
    stalled.set_nonblocking(true).unwrap();
    let mut peek = [0; 1];
    while matches!(stalled.peek(&mut peek), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock)
    {
        probe(addr);
        probes += 1;
        assert!(sent.elapsed() < BOUND, "no answer to the stalled body");
    }
    stalled.set_nonblocking(false).unwrap();
    let waited = sent.elapsed();
    let r = read_response(&stalled);
    assert_eq!(r.status, 408, "{r:?}");
    assert!(r.body.contains("within 800 ms"), "{r:?}");
    assert_eq!(r.header("connection"), Some("close"));
    assert!(
        waited >= Duration::from_millis(800),
        "answered early: {waited:?}"
    );
    assert!(probes >= 5, "only {probes} probes in {waited:?}");
    assert_eq!(host.stop(), vec![Vec::<MatchId>::new()]);
}

#[test]
fn a_stalled_head_is_closed_at_the_header_deadline() {
    let mut c = config();
    c.header_timeout = Duration::from_millis(300);
    let host = Host::start_with(c, &[Behaviour::Accept], no_status);
    let addr = host.server.local_addr();
    let mut stalled = connect(addr);
    let sent = Instant::now();
    stalled
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        .unwrap();
    probe(addr);
    let got = read_until_closed(&mut stalled);
    let closed = sent.elapsed();
    assert!(got.is_empty(), "{got:?}");
    assert!(
        closed >= Duration::from_millis(300),
        "closed early: {closed:?}"
    );
    // The reaper looks every 60 ms here: well inside a second of the deadline.
    assert!(closed < Duration::from_secs(1), "closed late: {closed:?}");
    probe(addr);
    assert_eq!(
        host.server.connections.closed_counts(),
        vec![("header_timeout", 1)]
    );
    host.stop();
}

#[test]
fn a_megabyte_header_gets_431_and_blocks_nobody() {
    let host = Host::start(&[Behaviour::Accept], no_status);
    let addr = host.server.local_addr();
    let mut big = connect(addr);
    big.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: ")
        .unwrap();
    let writer = {
        let mut big = big.try_clone().unwrap();
        std::thread::spawn(move || {
            // The server stops reading long before the end: the write fails, as it should.
            let header = vec![b'a'; 1 << 20];
            let _ = big
                .write_all(&header)
                .and_then(|()| big.write_all(b"\r\n\r\n"));
        })
    };
    for _ in 0..10 {
        probe(addr);
    }
    let got = read_until_closed(&mut big);
    writer.join().unwrap();
    // hyper answers 431 and closes with most of the megabyte unread, so the kernel resets
    // the connection, which may discard the 431 before it is read: what is certain is
    // that hyper refused the head (and not, say, a timeout).
    let text = String::from_utf8_lossy(&got);
    assert!(got.is_empty() || text.starts_with("HTTP/1.1 431"), "{text}");
    until_closed(&host.server, "rejected", 1);
    // A head that reaches the cap and stops there leaves nothing unread: its 431 always
    // arrives, then the close.
    let mut capped = connect(addr);
    let mut head = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: ".to_vec();
    head.resize(8 * 1024, b'a');
    capped.write_all(&head).unwrap();
    let got = read_until_closed(&mut capped);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 431 "), "{text}");
    until_closed(&host.server, "rejected", 2);
    // 65 header fields (64 allowed) get 431 the same way.
    let mut many = connect(addr);
    let mut head = String::from("GET /healthz HTTP/1.1\r\nHost: t\r\n");
    for i in 0..65 {
        head.push_str(&format!("X-{i}: 1\r\n"));
    }
    head.push_str("\r\n");
    many.write_all(head.as_bytes()).unwrap();
    let got = read_until_closed(&mut many);
    assert!(
        String::from_utf8_lossy(&got).starts_with("HTTP/1.1 431"),
        "{got:?}"
    );
    until_closed(&host.server, "rejected", 3);
    probe(addr);
    // An alert sees them in /metrics.
    let (_, text) = host.request("GET", "/metrics", "");
    let line = "tickforge_admin_connections_closed_total{reason=\"rejected\"} 3";
    assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    host.stop();
}

#[test]
fn idle_connections_over_the_cap_close_the_idlest_first() {
    let mut c = config();
    c.max_connections = 8;
    let host = Host::start_with(c, &[Behaviour::Accept], no_status);
    let addr = host.server.local_addr();
    let mut idle: Vec<TcpStream> = (0..8).map(|_| connect(addr)).collect();
    // The ninth connection (this probe) closes the first, the longest idle.
    probe(addr);
    assert!(read_until_closed(&mut idle[0]).is_empty());
    assert_eq!(
        host.server.connections.closed_counts(),
        vec![("evicted", 1)]
    );
    // The others are still open: nothing to read, no EOF.
    for s in &idle[1..] {
        s.set_nonblocking(true).unwrap();
        let mut b = [0; 1];
        let e = s.peek(&mut b).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }
    host.stop();
}

#[test]
fn stalled_bodies_filling_the_cap_do_not_lock_out_a_probe() {
    let mut c = config();
    c.max_connections = 4;
    let host = Host::start_with(c, &[Behaviour::Accept], no_status);
    let addr = host.server.local_addr();
    let mut stalled: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = connect(addr);
            write!(
                s,
                "POST /matches HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
                 Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
            )
            .unwrap();
            s
        })
        .collect();
    // All four are inside the handler, waiting for their bodies, before the probe comes.
    until_in_phase(&host.server, http::Phase::Request, 4);
    probe(addr);
    // One of them made room for it: the oldest.
    let t0 = Instant::now();
    loop {
        let gone = stalled.iter().position(|s| {
            s.set_nonblocking(true).unwrap();
            !matches!(s.peek(&mut [0; 1]), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock)
        });
        if let Some(i) = gone {
            stalled[i].set_nonblocking(false).unwrap();
            read_until_closed(&mut stalled[i]);
            break;
        }
        assert!(
            t0.elapsed() < BOUND,
            "none of the stalled connections was closed"
        );
        std::thread::yield_now();
    }
    assert_eq!(closed(&host.server, "evicted"), 1);
    host.stop();
}

#[test]
fn a_client_that_never_reads_its_answers_is_closed_at_the_header_deadline() {
    let mut c = config();
    c.header_timeout = Duration::from_millis(300);
    // Big answers: a few fill the socket buffers of a client that does not read them.
    let host = Host::start_with(c, &[Behaviour::Accept], |_, s| {
        s.matches = (0..4000)
            .map(|id| MatchStatus {
                id: MatchId(id),
                players_connected: 10,
                tick: 640,
                state: MatchState::Running,
                ticks: 640,
                late_ticks: 0,
                hitches: 0,
                cost: Default::default(),
            })
            .collect();
    });
    let addr = host.server.local_addr();
    let deaf = connect(addr);
    let request =
        format!("GET /matches HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
    let writer = {
        let mut deaf = deaf.try_clone().unwrap();
        std::thread::spawn(move || {
            // Pipelined, never read: the server blocks writing an answer, stops reading,
            // and this write blocks until the server closes the connection.
            for _ in 0..1000 {
                if deaf.write_all(request.as_bytes()).is_err() {
                    return;
                }
            }
        })
    };
    // Not the 60 s idle bound: the header deadline, once an answer stops going out.
    let t0 = Instant::now();
    until_closed(&host.server, "response_timeout", 1);
    assert!(t0.elapsed() < BOUND);
    probe(addr);
    // Closed by the server already (reset, as it left requests unread): this only frees
    // the writer if it is still blocked.
    let _ = deaf.shutdown(std::net::Shutdown::Both);
    writer.join().unwrap();
    host.stop();
}

#[test]
fn keep_alive_serves_many_requests_then_closes_when_idle() {
    let mut c = config();
    c.idle_timeout = Duration::from_millis(300);
    let host = Host::start_with(c, &[Behaviour::Accept], no_status);
    let mut conn = connect(host.server.local_addr());
    // The idle time runs from when the server flushed the last response, which is after
    // this instant whenever the client thread gets to read it.
    let mut last = Instant::now();
    for _ in 0..3 {
        last = Instant::now();
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let r = read_response(&conn);
        assert_eq!((r.status, r.body.as_str()), (200, "ok\n"));
    }
    assert!(read_until_closed(&mut conn).is_empty());
    let idle = last.elapsed();
    assert!(idle >= Duration::from_millis(300), "closed early: {idle:?}");
    assert!(idle < Duration::from_secs(1), "closed late: {idle:?}");
    until_closed(&host.server, "idle_timeout", 1);
    host.stop();
}

#[test]
fn waiting_for_a_worker_blocks_no_other_request() {
    let (admin, link) = worker_link(game_addr(0));
    let mut c = config();
    c.reply_timeout = BOUND;
    let server = AdminServer::start(c, vec![admin]).unwrap();
    let addr = server.local_addr();
    let post = std::thread::spawn(move || http(addr, "POST", "/matches", "{}"));
    // The worker has the request: the admin thread is now waiting for its answer.
    let AdminCommand::CreateMatch(request) = link.commands.recv_timeout(BOUND).unwrap();
    for _ in 0..10 {
        probe(addr);
    }
    assert_eq!(http(addr, "GET", "/matches", "").0, 200);
    assert!(request.answer(Ok(())));
    let (status, body) = post.join().unwrap();
    assert_eq!(status, 201, "{body}");
    server.shutdown().unwrap();
}

#[test]
fn shutdown_does_not_wait_for_a_stalled_client() {
    // The defaults: a stalled body would hold its connection for 5 s.
    let host = Host::start(&[Behaviour::Accept], no_status);
    let addr = host.server.local_addr();
    let mut stalled = connect(addr);
    write!(
        stalled,
        "POST /matches HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    )
    .unwrap();
    let mut idle = connect(addr);
    // The stalled one is inside the handler, waiting for its body; the idle one is
    // registered once a request after it has been answered.
    until_in_phase(&host.server, http::Phase::Request, 1);
    probe(addr);
    let t0 = Instant::now();
    host.stop();
    let took = t0.elapsed();
    // Nothing was left to wait for: the idle connection closed at once, and the body still
    // arriving was cut short with a 503 (closing when unread bytes remain may reset it
    // before it is read).
    assert!(took < http::SHUTDOWN_GRACE, "shutdown took {took:?}");
    let got = read_until_closed(&mut stalled);
    let text = String::from_utf8_lossy(&got);
    assert!(got.is_empty() || text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(read_until_closed(&mut idle).is_empty());
}
