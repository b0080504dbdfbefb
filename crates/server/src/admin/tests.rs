//! The admin server over real TCP on 127.0.0.1, with fake workers answering its commands.

use std::thread::JoinHandle;

use tickforge_proto::netcode::token::{private_key_cipher, PrivateToken};

use super::*;

const KEY: [u8; 32] = [7; 32];
const PROTOCOL_ID: u64 = 0x1234;

fn config() -> AdminConfig {
    let mut c = AdminConfig::new("127.0.0.1:0".parse().unwrap(), PROTOCOL_ID, PrivateKey(KEY));
    c.first_match_id = 100;
    c.reply_timeout = Duration::from_millis(200);
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
        let mut handles = Vec::new();
        let mut workers = Vec::new();
        for (i, b) in behaviours.iter().enumerate() {
            let (admin, link) = worker_link(game_addr(i));
            assert!(link.publish(|s| fill(i, s)));
            handles.push(admin);
            workers.push(fake_worker(link, b.clone()));
        }
        let server = AdminServer::start(config(), handles).unwrap();
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

/// One HTTP/1.1 request; returns the status and the body.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    tickforge_testkit::http::request(addr, method, path, body)
}

/// Worker `i`'s game port, as the tokens must name it.
fn game_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 40000 + i as u16))
}

fn c_bind(l: &std::net::TcpListener) -> String {
    l.local_addr().unwrap().to_string()
}

fn no_status(_: usize, _: &mut WorkerStatus) {}

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
        });
    });
    let (status, body) = host.request("GET", "/matches", "");
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        list,
        serde_json::json!([
            {"id": 1, "worker": 0, "players_connected": 10, "tick": 640, "state": "running"},
            {"id": 2, "worker": 1, "players_connected": 10, "tick": 640, "state": "running"},
        ])
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
    assert_eq!(created["map"], "arena");
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
        assert_eq!(usize::from(user.slot), slot);
    }
    let (status, body) = host.request("POST", "/matches", r#"{"players": 2, "map": "flat2km"}"#);
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
        (r#"{"players": 500}"#, "players: expected 1 to 128, got 500"),
        (r#"{"tick_hz": 0}"#, "tick_hz: expected 1 to 1000, got 0"),
    ] {
        let (status, text) = host.request("POST", "/matches", body);
        assert_eq!(status, 400, "{body}: {text}");
        let error: serde_json::Value = serde_json::from_str(&text).unwrap();
        let error = error["error"].as_str().unwrap();
        assert!(error.contains(reason), "{body}: {error}");
    }
    let huge = format!(r#"{{"map": "{}"}}"#, "a".repeat(MAX_BODY_BYTES));
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
