//! Admin HTTP: a small HTTP/1.1 server on its own thread, apart from the game port, for
//! operators and the matchmaker.
//!
//! | request | answer |
//! |---|---|
//! | `GET /metrics` | the workers' metrics summed, each match's ticks, late ticks and hitches, and this server's requests by status code and the connections it closed by reason, as OpenMetrics text (`tickforge_telemetry::prometheus`) |
//! | `GET /healthz` | 200 `ok` while serving; 200 `degraded: N result(s) not yet written` while a worker holds finished matches' results it could not yet write (alive, so a liveness probe does not kill it); 503 `draining` while draining |
//! | `GET /matches` | JSON list: `id`, `worker`, `players_connected`, `tick`, `state`, and what its frames cost since it (re)started: `frame` (the whole match), `rounds` (each finished round, oldest first, at most 64; `rounds_dropped` before them), `current_round` (its running means; `null` for a game without rounds), each as `round`, `ticks`, `late_ticks`, `frame_ms` `{mean, p99}`, `categories_ms` (mean per tick) and `budget_violations` (ticks over budget by category with one); and `budgets_ms` |
//! | `POST /matches` | JSON body (`Content-Type: application/json`; an empty body needs none), every field optional: `map`, `players`, `rounds`, `tick_hz` (default: a 10-player match). 201 with `match_id` and one base64 connect token per player; 400 for a bad body, 408 when it does not arrive within [`AdminConfig::body_timeout`], 413 over [`MAX_BODY_BYTES`], 415 for another content type, 422 when no worker can host it, 503 when full, draining or a worker does not answer within [`AdminConfig::reply_timeout`] |
//!
//! **Access.** With a token ([`AdminConfig::token`]: `admin_token_file` or
//! `TICKFORGE_ADMIN_TOKEN`), every route but `/healthz` and `/metrics` needs
//! `Authorization: Bearer <token>` (compared in constant time), and those two as well with
//! [`AdminConfig::auth_probes`]; a request without it gets 401 with `WWW-Authenticate:
//! Bearer`. Without a token the server only starts on a loopback address. A match created
//! here that nobody joins is removed by its worker after `unjoined_match_ttl_s`, so tokens
//! handed out and never used do not hold capacity.
//!
//! **Connections.** No client can hold up another or the server's shutdown: each
//! connection has a head deadline, a body deadline, an idle timeout and caps on header
//! bytes and count, the open connections are capped (the idlest closed first), and all of
//! them are tasks on one thread, not a thread each (see [`http`] for the stack and why).
//!
//! The admin thread never blocks a worker. They share plain data only ([`worker_link`]):
//! a command channel the worker polls with `try_recv`, and a status slot the worker
//! publishes into with `try_lock` about once a second. The admin thread awaits a worker's
//! answer (without blocking other requests), never the reverse; it picks the id of each
//! new match itself (unique in the process, so workers need not coordinate), and mints the
//! tokens once the worker has accepted. That creation path is [`MatchCreator`], which the
//! Agones thread shares for its allocations ([`crate::agones`]): one id sequence, one
//! least-loaded choice, one draining flag.

mod auth;
mod create;
pub mod http;
mod link;
mod spec;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::{header, Method, Request, Response};
use serde::Serialize;
use tickforge_io::entropy;
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::PrivateKey;
use tickforge_proto::user_data::{UserData, ANY};
use tickforge_proto::MatchId;
use tickforge_telemetry::prometheus::{self, MetricsSnapshot};
use tickforge_telemetry::rounds::{slot_name, Budgets, RoundSummary, BUDGET_SLOTS};
use tickforge_telemetry::Category;
use tokio::sync::watch;

pub use auth::{AdminToken, MAX_TOKEN_CHARS, MIN_TOKEN_CHARS, TOKEN_ENV};
pub use create::{MatchCreator, Placed, Refusal};
pub use link::{
    worker_link, AdminCommand, AdminHandle, CreateError, CreateMatch, MatchCost, MatchState,
    MatchStatus, WorkerLink, WorkerStatus,
};
pub use spec::{MatchSpec, SpecDefaults, SpecError, MAX_PLAYERS, MAX_TICK_HZ};

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
    /// The bearer token every route but the probes needs; `None`: no check, which
    /// [`AdminServer::start`] allows on a loopback address only.
    pub token: Option<AdminToken>,
    /// `/healthz` and `/metrics` need the token too.
    pub auth_probes: bool,
    /// A request's head (request line and headers) must arrive within this of its first
    /// byte, or the connection is closed.
    pub header_timeout: Duration,
    /// A request's body must arrive within this of its head, or it gets 408 and the
    /// connection is closed.
    pub body_timeout: Duration,
    /// A keep-alive connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// Most bytes of a request's head; more gets 431 (at least 8 KiB is read regardless).
    pub max_header_bytes: usize,
    /// Most header fields in a request; more gets 431.
    pub max_headers: usize,
    /// Most connections open at once; at the cap a new one closes the one idle the
    /// longest.
    pub max_connections: usize,
    /// What a `POST /matches` gets for what it leaves out: the server's seats, tick rate,
    /// game and `[game]` table.
    pub defaults: SpecDefaults,
    /// The Agones thread's call counts, for `/metrics`; `None`: Agones is off.
    pub agones: Option<Arc<crate::agones::CallCounts>>,
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
            token: None,
            auth_probes: false,
            // A real client sends its head and a few dozen bytes of body in one packet.
            header_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(5),
            // Longer than Prometheus' usual 15-30 s scrape interval: a scraper keeps its
            // connection.
            idle_timeout: Duration::from_secs(60),
            max_header_bytes: 8 * 1024,
            max_headers: 64,
            // A matchmaker, a scraper and a few operators need a handful.
            max_connections: 256,
            defaults: SpecDefaults {
                players: 10,
                tick_hz: 128,
                game: crate::config::GameChoice::default(),
            },
            agones: None,
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
    /// A non-loopback address without a token: anyone who reaches it could mint tokens.
    #[error(
        "--admin-bind {addr} is not a loopback address and no admin token is set: set \
         admin_token_file (--admin-token-file) or TICKFORGE_ADMIN_TOKEN"
    )]
    Unprotected {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The thread or its runtime could not be started.
    #[error("starting the admin thread")]
    Spawn(#[source] std::io::Error),
    /// The admin thread panicked.
    #[error("the admin thread panicked")]
    Panicked,
}

/// The running admin server. Stop it with [`AdminServer::shutdown`]; dropping it also
/// stops it.
pub struct AdminServer {
    stop: watch::Sender<bool>,
    creator: Arc<MatchCreator>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
    /// The open connections (tests look at their phases).
    #[cfg_attr(not(test), allow(dead_code))]
    connections: Arc<http::Shared>,
}

impl AdminServer {
    /// Binds `config.bind` and serves on a new thread, talking to one worker per handle.
    pub fn start(
        config: AdminConfig,
        workers: Vec<AdminHandle>,
    ) -> Result<AdminServer, AdminError> {
        let creator = MatchCreator::new(workers, config.first_match_id, config.reply_timeout);
        AdminServer::start_shared(config, Arc::new(creator))
    }

    /// [`AdminServer::start`] creating matches through `creator`, which another thread
    /// (Agones) may share; `config.first_match_id` and `reply_timeout` are the creator's.
    pub fn start_shared(
        config: AdminConfig,
        creator: Arc<MatchCreator>,
    ) -> Result<AdminServer, AdminError> {
        let addr = config.bind;
        if config.token.is_none() && !addr.ip().is_loopback() {
            return Err(AdminError::Unprotected { addr });
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(AdminError::Spawn)?;
        let bind_error = |e: std::io::Error| AdminError::Bind {
            addr,
            reason: e.to_string(),
        };
        let listener = {
            // Registers the socket with this runtime's reactor.
            let _entered = runtime.enter();
            let socket = match addr {
                SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
                SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
            }
            .map_err(bind_error)?;
            socket.set_reuseaddr(true).map_err(bind_error)?;
            socket.bind(addr).map_err(bind_error)?;
            // Room for a burst of connections while the thread is busy.
            socket.listen(1024).map_err(bind_error)?
        };
        let local = listener.local_addr().map_err(bind_error)?;
        let (stop, stopped) = watch::channel(false);
        let limits = http::Limits {
            header_timeout: config.header_timeout,
            idle_timeout: config.idle_timeout,
            max_header_bytes: config.max_header_bytes,
            max_headers: config.max_headers,
            max_connections: config.max_connections.max(1),
        };
        let connections = Arc::new(http::Shared::default());
        let admin = Arc::new(Admin {
            config,
            creator: Arc::clone(&creator),
            stop: stopped.clone(),
            requests: Mutex::new(BTreeMap::new()),
            connections: Arc::clone(&connections),
        });
        let thread = std::thread::Builder::new()
            .name("tickforge-admin".to_string())
            .spawn(move || runtime.block_on(http::serve(listener, admin, limits, stopped)))
            .map_err(AdminError::Spawn)?;
        Ok(AdminServer {
            stop,
            creator,
            thread: Some(thread),
            addr: local,
            connections,
        })
    }

    /// The address the server listens on (the real port when `bind` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts or ends draining: `/healthz` answers 503 and `POST /matches` is refused.
    pub fn set_draining(&self, draining: bool) {
        self.creator.set_draining(draining);
    }

    /// Stops serving and joins the thread: requests in hand get at most
    /// [`http::SHUTDOWN_GRACE`] to finish, and every connection still open then (a stalled
    /// client) is closed. The workers' links see their command channels close.
    pub fn shutdown(mut self) -> Result<(), AdminError> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), AdminError> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        self.stop.send_replace(true);
        thread.join().map_err(|_| AdminError::Panicked)
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

/// The admin thread's state, shared by its connections' tasks.
struct Admin {
    config: AdminConfig,
    /// The workers, and the one way matches are created.
    creator: Arc<MatchCreator>,
    /// Turns true when the server stops: a body still arriving is not waited for.
    stop: watch::Receiver<bool>,
    /// Requests answered, by status code, for `/metrics`.
    requests: Mutex<BTreeMap<u16, u64>>,
    /// The open connections, and those the server closed by reason (for `/metrics`).
    connections: Arc<http::Shared>,
}

/// An answer before it becomes an HTTP response.
struct Reply {
    status: u16,
    content_type: &'static str,
    body: String,
    allow: Option<&'static str>,
    /// Adds `WWW-Authenticate: Bearer` (a 401).
    www_authenticate: bool,
    /// Adds `Connection: close`: the request's body was not (all) read.
    close: bool,
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
            www_authenticate: false,
            close: false,
        }
    }

    fn json(status: u16, value: &impl Serialize) -> Reply {
        Reply {
            status,
            content_type: JSON,
            // Our own plain structs always serialize.
            body: serde_json::to_string(value).unwrap_or_default(),
            allow: None,
            www_authenticate: false,
            close: false,
        }
    }

    fn error(status: u16, reason: impl std::fmt::Display) -> Reply {
        Reply::json(status, &serde_json::json!({ "error": reason.to_string() }))
    }

    fn closing(self) -> Reply {
        Reply {
            close: true,
            ..self
        }
    }

    fn into_response(self) -> Response<Full<Bytes>> {
        let mut response = Response::builder()
            .status(self.status)
            .header(header::CONTENT_TYPE, self.content_type);
        if let Some(allow) = self.allow {
            response = response.header(header::ALLOW, allow);
        }
        if self.www_authenticate {
            response = response.header(header::WWW_AUTHENTICATE, "Bearer");
        }
        if self.close {
            response = response.header(header::CONNECTION, "close");
        }
        let body = Full::new(Bytes::from(self.body));
        // Our own status codes and ASCII header values: the builder cannot fail on them.
        response
            .body(body)
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
    }
}

#[derive(Serialize)]
struct MatchJson {
    id: u32,
    worker: usize,
    players_connected: u32,
    tick: u32,
    state: MatchState,
    /// Every frame since the match (re)started.
    frame: SpanJson,
    /// The finished rounds kept, oldest first (empty for a game without rounds).
    rounds: Vec<SpanJson>,
    /// Finished rounds dropped from the front of `rounds` to keep it bounded.
    rounds_dropped: u32,
    /// The round being played, its running means; `null` for a game without rounds.
    current_round: Option<SpanJson>,
    /// The budgets the violations count against, ms per match tick, by category
    /// (`frame`: the whole frame).
    budgets_ms: BTreeMap<&'static str, f64>,
}

/// What a round (or a whole match) cost, as `/matches` shows it.
#[derive(Serialize)]
struct SpanJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    round: Option<u32>,
    ticks: u64,
    late_ticks: u64,
    /// The frame: mean and 99th percentile, ms.
    frame_ms: FrameMsJson,
    /// Mean per tick of each category, ms.
    categories_ms: BTreeMap<&'static str, f64>,
    /// Ticks over budget, by category with a budget (`frame`: the whole frame).
    budget_violations: BTreeMap<&'static str, u64>,
}

#[derive(Serialize)]
struct FrameMsJson {
    mean: f64,
    p99: f64,
}

impl SpanJson {
    fn new(s: &RoundSummary, budgets: &Budgets) -> SpanJson {
        let ms = |ns: u64| ns as f64 / 1e6;
        SpanJson {
            round: s.round,
            ticks: s.ticks,
            late_ticks: s.late,
            frame_ms: FrameMsJson {
                mean: ms(s.mean_ns),
                p99: ms(s.p99_ns),
            },
            categories_ms: (Category::ALL.iter())
                .map(|c| (c.name(), ms(s.category_mean_ns[c.index()])))
                .collect(),
            budget_violations: (0..BUDGET_SLOTS)
                .filter(|&slot| budgets.ns[slot].is_some())
                .map(|slot| (slot_name(slot), s.violations[slot]))
                .collect(),
        }
    }
}

impl MatchJson {
    fn new(worker: usize, m: &MatchStatus) -> MatchJson {
        let c = &m.cost;
        let span = |s: &RoundSummary| SpanJson::new(s, &c.budgets);
        MatchJson {
            id: m.id.0,
            worker,
            players_connected: m.players_connected,
            tick: m.tick,
            state: m.state,
            frame: span(&c.whole),
            rounds: c.rounds.iter().map(span).collect(),
            rounds_dropped: c.rounds_dropped,
            current_round: c.current.as_ref().map(span),
            budgets_ms: (0..BUDGET_SLOTS)
                .filter_map(|slot| Some((slot_name(slot), c.budgets.ns[slot]? as f64 / 1e6)))
                .collect(),
        }
    }
}

#[derive(Serialize)]
struct TokenJson {
    seat: u16,
    client_id: u64,
    token: String,
}

#[derive(Serialize)]
struct CreatedJson<'a> {
    match_id: u32,
    game: &'static str,
    /// The settings the match plays with, every key filled (the game's defaults too).
    settings: &'a tickforge_api::ConfigTable,
    players: u16,
    tick_hz: u32,
    server: SocketAddr,
    expire_s: i64,
    tokens: Vec<TokenJson>,
}

impl Admin {
    /// Answers one request and counts its status.
    async fn respond(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let reply = self.handle(request).await;
        *self
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(reply.status)
            .or_insert(0) += 1;
        reply.into_response()
    }

    async fn handle(&self, request: Request<Incoming>) -> Reply {
        let path = request.uri().path().to_owned();
        // The probes are open unless `auth_probes`; every other route needs the token.
        let open = matches!(path.as_str(), "/healthz" | "/metrics") && !self.config.auth_probes;
        if !open && !self.authorized(&request) {
            return Reply {
                www_authenticate: true,
                ..Reply::error(
                    401,
                    "this route needs `Authorization: Bearer <token>` with the admin token \
                     (admin_token_file or TICKFORGE_ADMIN_TOKEN)",
                )
            };
        }
        match (request.method().clone(), path.as_str()) {
            (Method::GET, "/metrics") => self.metrics(),
            (Method::GET, "/healthz") => self.health(),
            (Method::GET, "/matches") => self.list(),
            (Method::POST, "/matches") => match self.body(request).await {
                Ok(body) => self.create(&body).await,
                Err(reply) => reply,
            },
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

    /// True when no token is configured, or the request carries it.
    fn authorized(&self, request: &Request<Incoming>) -> bool {
        let Some(token) = &self.config.token else {
            return true;
        };
        request
            .headers()
            .get(header::AUTHORIZATION)
            .is_some_and(|value| token.accepts(value.as_bytes()))
    }

    /// `/healthz`: 503 while draining; 200 `degraded` while a worker holds results not yet
    /// on disk (alive: restarting it would lose them); 200 `ok` otherwise.
    fn health(&self) -> Reply {
        if self.creator.is_draining() {
            return Reply::text(503, "draining");
        }
        let pending: u64 = (self.creator.workers().iter())
            .map(|w| w.with_status(|s| s.metrics.results_pending))
            .sum();
        if pending > 0 {
            Reply::text(
                200,
                &format!("degraded: {pending} result(s) not yet written"),
            )
        } else {
            Reply::text(200, "ok")
        }
    }

    /// The body of a `POST /matches`: JSON (or empty), at most [`MAX_BODY_BYTES`], all of
    /// it within [`AdminConfig::body_timeout`]. The error is the reply to send.
    async fn body(&self, request: Request<Incoming>) -> Result<Bytes, Reply> {
        let headers = request.headers();
        let length = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if length.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            return Err(Reply::error(413, format!("body over {MAX_BODY_BYTES} bytes")).closing());
        }
        let json = headers.get(header::CONTENT_TYPE).map(|v| {
            let essence = v
                .as_bytes()
                .split(|&b| b == b';')
                .next()
                .unwrap_or_default();
            essence.trim_ascii().eq_ignore_ascii_case(JSON.as_bytes())
        });
        // An empty body (the default match) needs no type; any other must say JSON.
        let empty = length == Some(0) && !headers.contains_key(header::TRANSFER_ENCODING);
        if json == Some(false) || (json.is_none() && !empty) {
            return Err(
                Reply::error(415, "POST /matches takes Content-Type: application/json").closing(),
            );
        }
        let timeout = self.config.body_timeout;
        let limited = Limited::new(request.into_body(), MAX_BODY_BYTES);
        let mut stop = self.stop.clone();
        let collected = tokio::select! {
            collected = tokio::time::timeout(timeout, limited.collect()) => collected,
            _ = stop.wait_for(|s| *s) => {
                return Err(Reply::error(503, "the admin server is stopping").closing())
            }
        };
        match collected {
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(e)) if e.is::<LengthLimitError>() => {
                Err(Reply::error(413, format!("body over {MAX_BODY_BYTES} bytes")).closing())
            }
            Ok(Err(e)) => Err(Reply::error(400, format!("reading the body: {e}")).closing()),
            Err(_) => Err(Reply::error(
                408,
                format!("the body did not arrive within {} ms", timeout.as_millis()),
            )
            .closing()),
        }
    }

    fn metrics(&self) -> Reply {
        let mut total = MetricsSnapshot::default();
        let mut matches = Vec::new();
        for w in self.creator.workers() {
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
        let requests: Vec<(u16, u64)> = (self.requests.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(&code, &n)| (code, n))
            .collect();
        let admin = prometheus::AdminCounts {
            requests,
            connections_closed: self.connections.closed_counts(),
            agones: self.config.agones.as_ref().map(|a| a.snapshot()),
        };
        let mut body = String::new();
        prometheus::render_with_matches(&total, &matches, &admin, &mut body);
        Reply {
            content_type: prometheus::CONTENT_TYPE,
            body,
            ..Reply::text(200, "")
        }
    }

    fn list(&self) -> Reply {
        let mut list = Vec::new();
        for (worker, w) in self.creator.workers().iter().enumerate() {
            w.with_status(|s| list.extend(s.matches.iter().map(|m| MatchJson::new(worker, m))));
        }
        Reply::json(200, &list)
    }

    async fn create(&self, body: &[u8]) -> Reply {
        let spec = match MatchSpec::from_json(body, &self.config.defaults) {
            Ok(spec) => spec,
            Err(e) => return Reply::error(400, e),
        };
        match self.creator.create(&spec).await {
            Ok(placed) => self.created(placed.match_id, spec, placed.server),
            Err(refusal) => Reply::error(refusal.status, refusal.reason),
        }
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
            .map(|seat| {
                let user_data = UserData {
                    match_id,
                    team: ANY,
                    seat,
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
                    seat,
                    client_id,
                    token: base64::engine::general_purpose::STANDARD.encode(token.to_bytes()),
                }
            })
            .collect();
        Reply::json(
            201,
            &CreatedJson {
                match_id: match_id.0,
                game: spec.maker.game(),
                settings: &spec.maker.settings(),
                players: spec.players,
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
