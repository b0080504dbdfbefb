//! Admin HTTP: a small HTTP/1.1 server on its own thread, apart from the game port, for
//! operators and the matchmaker.
//!
//! | request | answer |
//! |---|---|
//! | `GET /metrics` | the workers' metrics summed, and each match's ticks, late ticks and hitches, as OpenMetrics text (`tickforge_telemetry::prometheus`) |
//! | `GET /healthz` | 200 `ok` while serving, 503 `draining` while draining |
//! | `GET /matches` | JSON list: `id`, `worker`, `players_connected`, `tick`, `state` |
//! | `POST /matches` | JSON body, every field optional: `map`, `players`, `rounds`, `tick_hz` (default: a 10-player match). 201 with `match_id` and one base64 connect token per player; 400 for a bad body, 422 when no worker can host it, 503 when full, draining or a worker does not answer within [`AdminConfig::reply_timeout`] |
//!
//! The admin thread never blocks a worker. They share plain data only ([`worker_link`]):
//! a command channel the worker polls with `try_recv`, and a status slot the worker
//! publishes into with `try_lock` about once a second. The admin thread waits for a
//! worker's answer, never the reverse; it picks the id of each new match itself (unique in
//! the process, so workers need not coordinate), and mints the tokens once the worker has
//! accepted.
//!
//! Built on `tiny_http`: a synchronous HTTP/1.1 server made for exactly this, with no async
//! runtime to host beside the workers.

mod link;
mod spec;

use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine;
use serde::Serialize;
use tickforge_io::entropy;
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::PrivateKey;
use tickforge_proto::user_data::{UserData, ANY};
use tickforge_proto::MatchId;
use tickforge_telemetry::prometheus::{self, MetricsSnapshot};
use tiny_http::{Header, Method, Request, Response};

pub use link::{
    worker_link, AdminCommand, AdminHandle, CreateError, CreateMatch, MatchState, MatchStatus,
    WorkerLink, WorkerStatus,
};
pub use spec::{MatchSpec, SpecError, MAX_PLAYERS, MAX_TICK_HZ};

/// Largest `POST /matches` body read; a spec is a few dozen bytes.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// How the admin server runs and mints tokens.
#[derive(Clone, Debug)]
pub struct AdminConfig {
    /// Where to listen (`--admin-bind`), apart from the game port.
    pub bind: SocketAddr,
    /// The protocol id tokens carry; must match the game server's.
    pub protocol_id: u64,
    /// The key tokens are sealed with; the game server's.
    pub private_key: PrivateKey,
    /// The id of the first match created here; later ones count up. Start past the ids of
    /// matches the server made from its configuration.
    pub first_match_id: u32,
    /// How long to wait for a worker to accept a match before answering 503.
    pub reply_timeout: Duration,
    /// Seconds a minted token stays valid.
    pub token_expire_s: i64,
    /// Seconds of silence before a connection made with a minted token times out.
    pub token_timeout_s: i32,
}

impl AdminConfig {
    /// A configuration with the defaults below for everything but the address and keys.
    pub fn new(bind: SocketAddr, protocol_id: u64, private_key: PrivateKey) -> AdminConfig {
        AdminConfig {
            bind,
            protocol_id,
            private_key,
            first_match_id: 1,
            // Many ticks for a worker that polls once per wake-up; short for a matchmaker.
            reply_timeout: Duration::from_secs(1),
            // Long enough for a matchmaker to hand tokens to ten clients that then connect.
            token_expire_s: 60,
            token_timeout_s: 5, // as `tickforge token` and the bots
        }
    }
}

/// Why the admin server could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The address could not be bound.
    #[error("--admin-bind {addr}: {reason}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the OS said.
        reason: String,
    },
    /// The thread could not be started.
    #[error("starting the admin thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// The admin thread panicked.
    #[error("the admin thread panicked")]
    Panicked,
}

/// The running admin server. Stop it with [`AdminServer::shutdown`]; dropping it also
/// stops it.
pub struct AdminServer {
    http: Arc<tiny_http::Server>,
    stop: Arc<AtomicBool>,
    draining: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl AdminServer {
    /// Binds `config.bind` and serves on a new thread, talking to one worker per handle.
    pub fn start(
        config: AdminConfig,
        workers: Vec<AdminHandle>,
    ) -> Result<AdminServer, AdminError> {
        let bind_error = |reason: String| AdminError::Bind {
            addr: config.bind,
            reason,
        };
        let http = tiny_http::Server::http(config.bind).map_err(|e| bind_error(e.to_string()))?;
        let addr = http
            .server_addr()
            .to_ip()
            .ok_or_else(|| bind_error("not an IP address".to_string()))?;
        let http = Arc::new(http);
        let stop = Arc::new(AtomicBool::new(false));
        let draining = Arc::new(AtomicBool::new(false));
        let mut admin = Admin {
            next_id: config.first_match_id.max(1),
            config,
            workers,
            draining: Arc::clone(&draining),
        };
        let thread = {
            let (http, stop) = (Arc::clone(&http), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("tickforge-admin".to_string())
                .spawn(move || loop {
                    match http.recv() {
                        Ok(mut request) => {
                            let reply = admin.handle(&mut request);
                            // The client may be gone; nothing to do about it.
                            let _ = request.respond(reply.into_response());
                        }
                        Err(_) if stop.load(Ordering::Acquire) => break,
                        Err(_) => continue,
                    }
                })
                .map_err(AdminError::Spawn)?
        };
        Ok(AdminServer {
            http,
            stop,
            draining,
            thread: Some(thread),
            addr,
        })
    }

    /// The address the server listens on (the real port when `bind` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts or ends draining: `/healthz` answers 503 and `POST /matches` is refused.
    pub fn set_draining(&self, draining: bool) {
        self.draining.store(draining, Ordering::Release);
    }

    /// Stops serving and joins the thread, after the request in hand (at most
    /// [`AdminConfig::reply_timeout`] when it waits on a worker). The workers' links see
    /// their command channels close.
    pub fn shutdown(mut self) -> Result<(), AdminError> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), AdminError> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        self.stop.store(true, Ordering::Release);
        self.http.unblock();
        thread.join().map_err(|_| AdminError::Panicked)
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

/// The admin thread's state.
struct Admin {
    config: AdminConfig,
    workers: Vec<AdminHandle>,
    draining: Arc<AtomicBool>,
    next_id: u32,
}

/// An answer before it becomes a `tiny_http` response.
struct Reply {
    status: u16,
    content_type: &'static str,
    body: String,
    allow: Option<&'static str>,
}

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

impl Reply {
    fn text(status: u16, body: &str) -> Reply {
        Reply {
            status,
            content_type: TEXT,
            body: format!("{body}\n"),
            allow: None,
        }
    }

    fn json(status: u16, value: &impl Serialize) -> Reply {
        Reply {
            status,
            content_type: JSON,
            // Our own plain structs always serialize.
            body: serde_json::to_string(value).unwrap_or_default(),
            allow: None,
        }
    }

    fn error(status: u16, reason: impl std::fmt::Display) -> Reply {
        Reply::json(status, &serde_json::json!({ "error": reason.to_string() }))
    }

    fn into_response(self) -> Response<std::io::Cursor<Vec<u8>>> {
        let mut response = Response::from_string(self.body).with_status_code(self.status);
        if let Ok(h) = Header::from_bytes("Content-Type", self.content_type) {
            response = response.with_header(h);
        }
        if let Some(allow) = self.allow {
            if let Ok(h) = Header::from_bytes("Allow", allow) {
                response = response.with_header(h);
            }
        }
        response
    }
}

#[derive(Serialize)]
struct MatchJson {
    id: u32,
    worker: usize,
    players_connected: u32,
    tick: u32,
    state: MatchState,
}

#[derive(Serialize)]
struct TokenJson {
    slot: u8,
    client_id: u64,
    token: String,
}

#[derive(Serialize)]
struct CreatedJson {
    match_id: u32,
    map: &'static str,
    players: u8,
    rounds: u8,
    tick_hz: u32,
    server: SocketAddr,
    expire_s: i64,
    tokens: Vec<TokenJson>,
}

impl Admin {
    fn handle(&mut self, request: &mut Request) -> Reply {
        let path = request.url().split('?').next().unwrap_or_default();
        match (request.method(), path) {
            (Method::Get, "/metrics") => self.metrics(),
            (Method::Get, "/healthz") => {
                if self.draining.load(Ordering::Acquire) {
                    Reply::text(503, "draining")
                } else {
                    Reply::text(200, "ok")
                }
            }
            (Method::Get, "/matches") => self.list(),
            (Method::Post, "/matches") => {
                let mut body = Vec::new();
                let limit = MAX_BODY_BYTES as u64 + 1;
                if let Err(e) = request.as_reader().take(limit).read_to_end(&mut body) {
                    return Reply::error(400, format!("reading the body: {e}"));
                }
                if body.len() > MAX_BODY_BYTES {
                    return Reply::error(413, format!("body over {MAX_BODY_BYTES} bytes"));
                }
                self.create(&body)
            }
            (_, "/metrics" | "/healthz") => Reply {
                allow: Some("GET"),
                ..Reply::text(405, "method not allowed")
            },
            (_, "/matches") => Reply {
                allow: Some("GET, POST"),
                ..Reply::text(405, "method not allowed")
            },
            _ => Reply::text(404, "not found: try /metrics, /healthz or /matches"),
        }
    }

    fn metrics(&self) -> Reply {
        let mut total = MetricsSnapshot::default();
        let mut matches = Vec::new();
        for w in &self.workers {
            w.with_status(|s| {
                total.merge(&s.metrics);
                matches.extend(s.matches.iter().map(|m| prometheus::MatchTicks {
                    match_id: m.id.0,
                    ticks: m.ticks,
                    late_ticks: m.late_ticks,
                    hitches: m.hitches,
                }));
            });
        }
        let mut body = String::new();
        prometheus::render_with_matches(&total, &matches, &[], &mut body);
        Reply {
            status: 200,
            content_type: prometheus::CONTENT_TYPE,
            body,
            allow: None,
        }
    }

    fn list(&self) -> Reply {
        let mut list = Vec::new();
        for (worker, w) in self.workers.iter().enumerate() {
            w.with_status(|s| {
                list.extend(s.matches.iter().map(|m| MatchJson {
                    id: m.id.0,
                    worker,
                    players_connected: m.players_connected,
                    tick: m.tick,
                    state: m.state,
                }))
            });
        }
        Reply::json(200, &list)
    }

    fn create(&mut self, body: &[u8]) -> Reply {
        let spec = match MatchSpec::from_json(body) {
            Ok(spec) => spec,
            Err(e) => return Reply::error(400, e),
        };
        if self.draining.load(Ordering::Acquire) {
            return Reply::error(503, CreateError::Draining);
        }
        let match_id = self.allocate_id();
        // Least loaded first; a full worker passes the match on to the next.
        let mut order: Vec<(usize, usize)> = self
            .workers
            .iter()
            .enumerate()
            .map(|(i, w)| (w.with_status(|s| s.matches.len()), i))
            .collect();
        order.sort_unstable();
        let mut refusal = String::from("no workers");
        for (_, i) in order {
            let (reply, answer) = mpsc::sync_channel(1);
            let command = AdminCommand::CreateMatch(CreateMatch {
                match_id,
                spec,
                reply,
            });
            if self.workers[i].commands.send(command).is_err() {
                refusal = format!("worker {i} has stopped");
                continue;
            }
            match answer.recv_timeout(self.config.reply_timeout) {
                Ok(Ok(())) => return self.created(match_id, spec, self.workers[i].public_addr),
                Ok(Err(e @ CreateError::Full { .. })) => refusal = e.to_string(),
                Ok(Err(e @ CreateError::Unsupported { .. })) => return Reply::error(422, e),
                Ok(Err(e @ CreateError::Draining)) => return Reply::error(503, e),
                Err(RecvTimeoutError::Timeout) => {
                    return Reply::error(
                        503,
                        format!(
                            "worker {i} did not answer within {} ms",
                            self.config.reply_timeout.as_millis()
                        ),
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    refusal = format!("worker {i} dropped the request")
                }
            }
        }
        Reply::error(503, refusal)
    }

    /// The next match id: counts up from `first_match_id`, skipping 0 when it wraps.
    fn allocate_id(&mut self) -> MatchId {
        let id = self.next_id;
        self.next_id = self.next_id.checked_add(1).unwrap_or(1);
        MatchId(id)
    }

    fn created(&self, match_id: MatchId, spec: MatchSpec, server: SocketAddr) -> Reply {
        let c = &self.config;
        let params = TokenParams {
            protocol_id: c.protocol_id,
            create_timestamp: entropy::unix_now(),
            expire_seconds: c.token_expire_s,
            timeout_seconds: c.token_timeout_s,
            server_addresses: vec![server],
        };
        let tokens = (0..spec.players)
            .map(|slot| {
                let user_data = UserData {
                    match_id,
                    team: ANY,
                    slot,
                };
                let client_id = u64::from_le_bytes(entropy::random_bytes());
                let token = ConnectToken::mint(
                    &params,
                    client_id,
                    &user_data.encode(),
                    &c.private_key.0,
                    &entropy::random_bytes(),
                );
                TokenJson {
                    slot,
                    client_id,
                    token: base64::engine::general_purpose::STANDARD.encode(token.to_bytes()),
                }
            })
            .collect();
        Reply::json(
            201,
            &CreatedJson {
                match_id: match_id.0,
                map: spec.map.name(),
                players: spec.players,
                rounds: spec.rounds.get(),
                tick_hz: spec.tick_hz,
                server,
                expire_s: c.token_expire_s,
                tokens,
            },
        )
    }
}

#[cfg(test)]
mod tests;
