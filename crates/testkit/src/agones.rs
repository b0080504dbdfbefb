//! A fake Agones SDK sidecar: the REST gateway's routes on a loopback port, a GameServer
//! the calls change, and every call recorded, for tests of a game server's Agones
//! integration without Kubernetes.
//!
//! | route | what the fake does |
//! |---|---|
//! | `POST /ready` | state `Ready` (unless Allocated) |
//! | `POST /health` | recorded |
//! | `POST /shutdown` | state `Shutdown` |
//! | `GET /gameserver` | the GameServer |
//! | `GET /watch/gameserver` | chunked `{"result": GameServer}` lines: now, and on every change |
//! | `PUT /metadata/annotation`, `PUT /metadata/label` | `{"key", "value"}` set under `agones.dev/sdk-<key>` |
//! | `GET /v1beta1/counters/{name}`, `PATCH /v1beta1/counters/{name}` | one of `count`, `capacity`, `countDiff`; 404 for an undeclared counter, 400 out of range |
//!
//! The GameServer is written as the gateway writes it: proto field names (`object_meta`)
//! and 64-bit integers as strings. Knobs make it misbehave: [`FakeSdk::late`] refuses
//! connections until started, [`FakeSdk::fail_next`] and [`FakeSdk::set_failing`] answer
//! 500, [`FakeSdk::silent`] accepts and never answers. [`FakeSdk::allocate`] is a
//! GameServerAllocation arriving. Waits are on a condition variable, bounded.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// One call as the fake received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path, as sent.
    pub path: String,
    /// The request body.
    pub body: String,
    /// The status the fake answered (0: none, it held the connection).
    pub status: u16,
}

/// A counter's value in the fake GameServer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counter {
    /// The count.
    pub count: i64,
    /// The capacity.
    pub capacity: i64,
}

/// What the fake holds; read it through [`FakeSdk::with_state`].
#[derive(Debug, Default)]
pub struct State {
    /// Every call, in arrival order.
    pub calls: Vec<Call>,
    /// `Scheduled`, `Ready`, `Allocated`, `Shutdown`.
    pub state: String,
    /// `status.address`.
    pub address: String,
    /// `status.ports`: name and port.
    pub ports: Vec<(String, u16)>,
    /// `object_meta.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `object_meta.labels`.
    pub labels: BTreeMap<String, String>,
    /// `status.counters` (declared counters only).
    pub counters: BTreeMap<String, Counter>,
    /// Answer this many more calls with 500.
    pub fail_next: u32,
    /// Answer every call with 500 while set.
    pub failing: bool,
    /// Allocations so far (makes each `agones.dev/last-allocated` distinct).
    pub allocations: u32,
}

impl State {
    /// Calls to `path` (with `method`) so far.
    pub fn count(&self, method: &str, path: &str) -> usize {
        (self.calls.iter())
            .filter(|c| c.method == method && c.path == path && c.status == 200)
            .count()
    }

    /// Calls to `path` the fake answered with an error.
    pub fn failed(&self, path: &str) -> usize {
        (self.calls.iter())
            .filter(|c| c.path == path && c.status >= 400)
            .count()
    }

    /// The annotation set through the SDK under `key` (`agones.dev/sdk-<key>`).
    pub fn sdk_annotation(&self, key: &str) -> Option<&str> {
        self.annotations
            .get(&format!("agones.dev/sdk-{key}"))
            .map(String::as_str)
    }

    /// The GameServer as the gateway writes it.
    pub fn gameserver(&self) -> Value {
        let ports: Vec<Value> = (self.ports.iter())
            .map(|(name, port)| json!({ "name": name, "port": port }))
            .collect();
        let counters: serde_json::Map<String, Value> = (self.counters.iter())
            .map(|(name, c)| {
                let v = json!({ "count": c.count.to_string(), "capacity": c.capacity.to_string() });
                (name.clone(), v)
            })
            .collect();
        json!({
            "object_meta": {
                "name": "fake-gameserver",
                "namespace": "default",
                "annotations": self.annotations,
                "labels": self.labels,
            },
            "status": {
                "state": self.state,
                "address": self.address,
                "ports": ports,
                "counters": counters,
            }
        })
    }
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// Open watch streams, written on every change.
    watchers: Mutex<Vec<TcpStream>>,
    /// Connections held open and never answered.
    held: Mutex<Vec<TcpStream>>,
    silent: AtomicBool,
    stop: AtomicBool,
}

/// A fake SDK sidecar on `127.0.0.1`. Dropping it closes its port and every connection.
pub struct FakeSdk {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// A port reserved for a sidecar that is not listening yet: connections to it are refused
/// until [`LateSdk::start`].
pub struct LateSdk {
    addr: SocketAddr,
    state: State,
}

impl LateSdk {
    /// Starts listening on the reserved port.
    ///
    /// # Panics
    /// When the port was taken meanwhile: it is for tests.
    pub fn start(self) -> FakeSdk {
        let listener = TcpListener::bind(self.addr).expect("the reserved port is free");
        FakeSdk::serve(listener, self.state)
    }

    /// The reserved address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl FakeSdk {
    /// A sidecar listening now, with a GameServer `Scheduled` at `127.0.0.1`, one port
    /// named `default` (7777), and a declared `rooms` counter at 0 of 0.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub fn start() -> FakeSdk {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        FakeSdk::serve(listener, FakeSdk::initial())
    }

    /// A sidecar that starts late: its port is reserved, and refuses connections until
    /// [`LateSdk::start`].
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub fn late() -> LateSdk {
        let addr = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a loopback port");
        LateSdk {
            addr,
            state: FakeSdk::initial(),
        }
    }

    /// A sidecar that accepts every connection and never answers (nor closes it).
    pub fn silent() -> FakeSdk {
        let sdk = FakeSdk::start();
        sdk.shared.silent.store(true, Ordering::Release);
        sdk
    }

    fn initial() -> State {
        State {
            state: "Scheduled".to_string(),
            address: "127.0.0.1".to_string(),
            ports: vec![("default".to_string(), 7777)],
            counters: BTreeMap::from([("rooms".to_string(), Counter::default())]),
            ..State::default()
        }
    }

    fn serve(listener: TcpListener, state: State) -> FakeSdk {
        let addr = listener.local_addr().expect("a bound listener");
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            changed: Condvar::new(),
            watchers: Mutex::new(Vec::new()),
            held: Mutex::new(Vec::new()),
            silent: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let accept = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if shared.stop.load(Ordering::Acquire) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    if shared.silent.load(Ordering::Acquire) {
                        lock(&shared.held).push(stream);
                        continue;
                    }
                    let shared = Arc::clone(&shared);
                    std::thread::spawn(move || handle(&shared, stream));
                }
            })
        };
        FakeSdk {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// The sidecar's address: `AGONES_SDK_HTTP_PORT` is its port.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Reads the state.
    pub fn with_state<T>(&self, read: impl FnOnce(&State) -> T) -> T {
        read(&lock(&self.shared.state))
    }

    /// Changes the state, and tells open watch streams when `push` is set.
    pub fn update(&self, change: impl FnOnce(&mut State), push: bool) {
        let gs = {
            let mut state = lock(&self.shared.state);
            change(&mut state);
            state.gameserver()
        };
        self.shared.changed.notify_all();
        if push {
            broadcast(&self.shared, &gs);
        }
    }

    /// Ends every open watch stream, as a sidecar restarting would; the calls made while
    /// none is open are not pushed anywhere.
    pub fn drop_watches(&self) {
        for s in lock(&self.shared.watchers).drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Answers the next `n` calls with 500.
    pub fn fail_next(&self, n: u32) {
        self.update(|s| s.fail_next = n, false);
    }

    /// Answers every call with 500 while `failing`.
    pub fn set_failing(&self, failing: bool) {
        self.update(|s| s.failing = failing, false);
    }

    /// A GameServerAllocation arrives: the state becomes `Allocated`, `annotations` are
    /// applied with a new `agones.dev/last-allocated`, and every watch stream is told.
    pub fn allocate(&self, annotations: &[(&str, &str)]) {
        self.update(
            |s| {
                s.allocations += 1;
                s.state = "Allocated".to_string();
                for (k, v) in annotations {
                    s.annotations.insert(k.to_string(), v.to_string());
                }
                let at = format!(
                    "2026-01-01T00:00:{:02}.{:09}Z",
                    s.allocations % 60,
                    s.allocations
                );
                s.annotations
                    .insert("agones.dev/last-allocated".to_string(), at);
            },
            true,
        );
    }

    /// Waits until `done` holds for the state, for at most `bound`; returns whether it did.
    /// Woken by every call and change, not by polling.
    pub fn wait_for(&self, bound: Duration, mut done: impl FnMut(&State) -> bool) -> bool {
        let deadline = Instant::now() + bound;
        let mut state = lock(&self.shared.state);
        loop {
            if done(&state) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = (self.shared.changed)
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for FakeSdk {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // Wakes the accept loop.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        for s in lock(&self.shared.watchers).drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        for s in lock(&self.shared.held).drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes `gs` to every open watch stream as one chunk; a stream that fails is dropped.
fn broadcast(shared: &Shared, gs: &Value) {
    let line = format!("{}\n", json!({ "result": gs }));
    let chunk = format!("{:x}\r\n{line}\r\n", line.len());
    lock(&shared.watchers).retain_mut(|s| s.write_all(chunk.as_bytes()).is_ok());
}

/// One request on `stream`: read, recorded, answered.
fn handle(shared: &Shared, stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let Some((method, path, body)) = read_request(&stream) else {
        return;
    };
    let mut stream = stream;
    let (status, answer, push) = {
        let mut state = lock(&shared.state);
        let fail = state.failing || state.fail_next > 0;
        state.fail_next = state.fail_next.saturating_sub(1);
        let (status, answer, push) = if fail {
            (
                500,
                json!({ "code": 13, "message": "injected failure" }),
                false,
            )
        } else {
            route(&mut state, &method, &path, &body)
        };
        state.calls.push(Call {
            method: method.clone(),
            path: path.clone(),
            body,
            status,
        });
        (status, answer, push.then(|| state.gameserver()))
    };
    shared.changed.notify_all();
    if status == 200 && method == "GET" && path == "/watch/gameserver" {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                    Transfer-Encoding: chunked\r\n\r\n";
        let line = format!("{}\n", json!({ "result": answer }));
        let chunk = format!("{head}{:x}\r\n{line}\r\n", line.len());
        if stream.write_all(chunk.as_bytes()).is_ok() {
            lock(&shared.watchers).push(stream);
        }
        return;
    }
    let text = answer.to_string();
    let reason = if status == 200 { "OK" } else { "Error" };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    if let Some(gs) = push {
        broadcast(shared, &gs);
    }
}

fn read_request(stream: &TcpStream) -> Option<(String, String, String)> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut length = 0usize;
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        if line.trim_end().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length.min(1 << 20)];
    reader.read_exact(&mut body).ok()?;
    Some((method, path, String::from_utf8_lossy(&body).into_owned()))
}

/// A 64-bit integer field of a request, as a string or a number.
fn int64(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_str()?.parse().ok())
}

/// Answers one call: status, body, and whether the GameServer changed (watchers are told).
fn route(state: &mut State, method: &str, path: &str, body: &str) -> (u16, Value, bool) {
    let ok = || json!({});
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    match (method, path) {
        ("POST", "/ready") => {
            if state.state != "Allocated" {
                state.state = "Ready".to_string();
            }
            (200, ok(), true)
        }
        ("POST", "/health") => (200, ok(), false),
        ("POST", "/shutdown") => {
            state.state = "Shutdown".to_string();
            (200, ok(), true)
        }
        ("GET", "/gameserver") | ("GET", "/watch/gameserver") => (200, state.gameserver(), false),
        ("PUT", "/metadata/annotation") | ("PUT", "/metadata/label") => {
            let kv = parsed.as_ref().and_then(|v| {
                Some((
                    v.get("key")?.as_str()?.to_string(),
                    v.get("value")?.as_str()?.to_string(),
                ))
            });
            let Some((key, value)) = kv else {
                return (400, json!({ "message": "expected {key, value}" }), false);
            };
            let map = if path.ends_with("annotation") {
                &mut state.annotations
            } else {
                &mut state.labels
            };
            map.insert(format!("agones.dev/sdk-{key}"), value);
            (200, ok(), true)
        }
        (_, p) if p.starts_with("/v1beta1/counters/") => {
            let name = &p["/v1beta1/counters/".len()..];
            let Some(counter) = state.counters.get_mut(name) else {
                return (
                    404,
                    json!({ "message": format!("counter not found: {name}") }),
                    false,
                );
            };
            if method == "GET" {
                let c = *counter;
                return (200, counter_json(name, c), false);
            }
            if method != "PATCH" {
                return (405, json!({}), false);
            }
            let field = |k: &str| parsed.as_ref().and_then(|v| v.get(k)).and_then(int64);
            let (count, capacity, diff) = (field("count"), field("capacity"), field("countDiff"));
            let fields = [
                count.is_some(),
                capacity.is_some(),
                diff.is_some_and(|d| d != 0),
            ];
            if fields.iter().filter(|f| **f).count() != 1 {
                return (
                    400,
                    json!({ "message": "one of count, capacity, countDiff" }),
                    false,
                );
            }
            let mut next = *counter;
            if let Some(c) = capacity {
                next.capacity = c;
            }
            if let Some(c) = count {
                next.count = c;
            }
            next.count += diff.unwrap_or(0);
            if next.capacity < 0 || !(0..=next.capacity).contains(&next.count) {
                return (400, json!({ "message": "out of range" }), false);
            }
            *counter = next;
            (200, counter_json(name, next), true)
        }
        _ => (404, json!({ "message": "no such route" }), false),
    }
}

fn counter_json(name: &str, c: Counter) -> Value {
    json!({ "name": name, "count": c.count.to_string(), "capacity": c.capacity.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request;

    #[test]
    fn calls_change_the_gameserver_and_are_recorded() {
        let sdk = FakeSdk::start();
        assert_eq!(request(sdk.addr(), "POST", "/ready", "{}").0, 200);
        let (status, body) = request(
            sdk.addr(),
            "PATCH",
            "/v1beta1/counters/rooms",
            r#"{"capacity":"4"}"#,
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            request(
                sdk.addr(),
                "PATCH",
                "/v1beta1/counters/rooms",
                r#"{"count":5}"#
            )
            .0,
            400
        );
        assert_eq!(
            request(
                sdk.addr(),
                "PATCH",
                "/v1beta1/counters/nope",
                r#"{"count":1}"#
            )
            .0,
            404
        );
        let kv = r#"{"key":"k","value":"v"}"#;
        assert_eq!(
            request(sdk.addr(), "PUT", "/metadata/annotation", kv).0,
            200
        );
        sdk.fail_next(1);
        assert_eq!(request(sdk.addr(), "POST", "/health", "{}").0, 500);
        assert_eq!(request(sdk.addr(), "POST", "/health", "{}").0, 200);
        let (_, gs) = request(sdk.addr(), "GET", "/gameserver", "");
        let gs: Value = serde_json::from_str(&gs).unwrap();
        assert_eq!(gs["status"]["state"], "Ready");
        assert_eq!(gs["status"]["counters"]["rooms"]["capacity"], "4");
        assert_eq!(gs["object_meta"]["annotations"]["agones.dev/sdk-k"], "v");
        sdk.with_state(|s| {
            assert_eq!(s.count("POST", "/health"), 1);
            assert_eq!(s.failed("/health"), 1);
            assert_eq!(s.sdk_annotation("k"), Some("v"));
        });
    }
}
