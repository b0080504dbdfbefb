//! Server configuration: a TOML file and command-line flags with the same keys, checked once
//! at start. A bad value stops startup with the key and the form it expects.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use tickforge_api::ConfigTable;
use tickforge_proto::netcode::{KeyError, PrivateKey};
use tickforge_telemetry::rounds::{slot_by_name, slot_name, Budgets, BUDGET_SLOTS};

use crate::admin::{AdminToken, TOKEN_ENV};
use crate::agones::{AgonesConfig, DEFAULT_HTTP_PORT, GRPC_PORT_ENV, HTTP_PORT_ENV};

/// The environment variable that may hold the private key (64 hex digits).
pub const KEY_ENV: &str = "TICKFORGE_PRIVATE_KEY";

/// The configuration of a server, checked and typed.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    /// Address of the game socket.
    pub bind: SocketAddr,
    /// Matches hosted, with ids 1..=matches.
    pub matches: u32,
    /// Seats per match.
    pub players_per_match: u16,
    /// Ticks per second of every match.
    pub tick_hz: u32,
    /// The game every match plays unless `POST /matches` names another, and its
    /// settings: the `[game]` table.
    pub game: GameChoice,
    /// The most a worker spins before a deadline instead of sleeping: it spins as long as
    /// its recent kernel sleeps overslept, plus a margin, up to this (`io::time::Sleeper`).
    pub spin: Duration,
    /// Workers run in the real-time FIFO class at this priority (1–99) where the host
    /// allows it; 0: the normal class.
    pub rt_priority: u8,
    /// Time after start excluded from the figures.
    pub warmup: Duration,
    /// Length of the measured window; `None`: until the server stops.
    pub duration: Option<Duration>,
    /// The CPUs of the workers, ascending: one worker thread pinned to each. `None`: one
    /// worker, not pinned.
    pub cores: Option<Vec<usize>>,
    /// Most matches one worker hosts, whatever its measured cost allows.
    pub max_matches_per_worker: u32,
    /// A worker's matches start their ticks in this many groups spread evenly over the
    /// tick: fewer wake-ups together than one per match, more datagrams per batched call.
    pub phase_groups: u32,
    /// How long a draining server (SIGTERM, SIGINT) waits for its running matches to
    /// finish before it exits anyway.
    pub drain_timeout: Duration,
    /// Where the admin HTTP server listens; `None`: off.
    pub admin_bind: Option<SocketAddr>,
    /// The bearer token the admin API asks for (`admin_token_file`, or
    /// `TICKFORGE_ADMIN_TOKEN`); `None`: no check, allowed on a loopback `admin_bind` only.
    pub admin_token: Option<AdminToken>,
    /// `/healthz` and `/metrics` need the admin token too.
    pub admin_auth_probes: bool,
    /// A match created through the admin API that no player has joined after this long is
    /// removed, without a result.
    pub unjoined_match_ttl: Duration,
    /// The game's protocol id; clients with another are ignored.
    pub protocol_id: u64,
    /// The address clients reach this server at, as connect tokens name it; `None`: the
    /// address the socket is bound to.
    pub public_addr: Option<SocketAddr>,
    /// The key connect tokens are sealed with (never logged: its `Debug` is redacted).
    pub private_key: PrivateKey,
    /// Connection requests per second one IP may make before they are dropped unopened.
    pub requests_per_second_per_ip: u32,
    /// Where each finished match's result line is appended and fsynced; `None`: nowhere.
    pub results_file: Option<PathBuf>,
    /// Where each finished match's action file (every input) is written; `None`: not
    /// recorded.
    pub record_dir: Option<PathBuf>,
    /// How to talk to the Agones SDK sidecar; `None`: Agones is off.
    pub agones: Option<AgonesConfig>,
    /// Budgets per category and for the whole frame (the `[budgets]` table): a match tick
    /// over one counts a violation for its match and category. The whole frame's, when
    /// not set, is the match budget at its players (`tickforge_telemetry::match_budget_ms`).
    pub budgets: Budgets,
}

/// The results file `serve` writes when the configuration names none.
pub const DEFAULT_RESULTS_FILE: &str = "tickforge-results.log";

/// The `results_file` value that turns the results file off (`--results-file none`).
pub const RESULTS_FILE_OFF: &str = "none";

/// tickforge's protocol id: "tickforg" in ASCII.
pub const DEFAULT_PROTOCOL_ID: u64 = 0x7469_636b_666f_7267;

/// The game a server's matches play by default, and its settings as written (checked by
/// the game when the configuration is resolved, and again for each match it makes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GameChoice {
    /// The game's name; `None`: the binary's first game.
    pub name: Option<String>,
    /// The game's own keys (the `[game]` table without `name`).
    pub table: ConfigTable,
}

impl GameChoice {
    /// The choice a `[game]` table (or a `POST /matches` `game` object) makes: its `name`
    /// key names the game, the other keys are the game's.
    pub fn from_table(mut table: ConfigTable) -> GameChoice {
        let name = match table.remove("name") {
            Some(serde_json::Value::String(name)) => Some(name),
            // A name that is no string names no game: the registry refuses it by its text.
            Some(other) => Some(other.to_string()),
            None => None,
        };
        GameChoice { name, table }
    }

    /// What makes this choice's matches: the game, configured. Fails when the binary has
    /// no such game or the game refuses a key.
    pub fn maker(
        &self,
    ) -> Result<std::sync::Arc<dyn crate::games::MatchMaker>, crate::games::GameError> {
        crate::games::configure(self.name.as_deref(), &self.table)
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 40000)),
            matches: 1,
            players_per_match: 10, // 5-v-5
            tick_hz: 128,          // VALORANT's tick: 7.8125 ms
            game: GameChoice::default(),
            spin: Duration::from_micros(100),
            rt_priority: 0,
            warmup: Duration::ZERO,
            duration: None,
            cores: None,
            // Twice the 60 games per core we aim for: the measured cost is the real bound,
            // this one only stops a burst of creations before their cost shows.
            max_matches_per_worker: 120,
            phase_groups: DEFAULT_PHASE_GROUPS,
            // As Kubernetes' default termination grace period.
            drain_timeout: Duration::from_secs(30),
            admin_bind: None,
            admin_token: None,
            admin_auth_probes: false,
            // Long enough for a matchmaker to hand out the tokens and the players to connect
            // (the tokens' own default expiry).
            unjoined_match_ttl: Duration::from_secs(60),
            protocol_id: DEFAULT_PROTOCOL_ID,
            public_addr: None,
            // A programmatic default gets a fresh random key: nobody else can mint tokens
            // for it until it is told the real one.
            private_key: PrivateKey(tickforge_io::entropy::random_bytes()),
            // A netcode client resends requests at 10 Hz; twice that leaves room for a
            // few players behind one NAT.
            requests_per_second_per_ip: 20,
            results_file: None,
            record_dir: None,
            agones: None,
            // DESIGN.md gives the whole frame a budget, no category one.
            budgets: Budgets::default(),
        }
    }
}

/// Every key a config file (or the flags) may set; all optional.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `bind = "127.0.0.1:40000"`
    pub bind: Option<String>,
    /// `matches = 1`
    pub matches: Option<u32>,
    /// `players_per_match = 10`
    pub players_per_match: Option<u32>,
    /// `tick_hz = 128`
    pub tick_hz: Option<u32>,
    /// `spin_us = 100`
    pub spin_us: Option<u64>,
    /// `rt_priority = 0`: workers run SCHED_FIFO at this priority (1–99) where permitted
    pub rt_priority: Option<u32>,
    /// `warmup_s = 0.0`
    pub warmup_s: Option<f64>,
    /// `duration_s = 60.0`
    pub duration_s: Option<f64>,
    /// `core = 0`: one worker pinned to this CPU (the same as `cores = [0]`)
    pub core: Option<usize>,
    /// `cores = [0, 1]`: one worker pinned to each CPU
    pub cores: Option<Vec<usize>>,
    /// `workers = 2`: that many workers, pinned to the first allowed CPUs
    pub workers: Option<u32>,
    /// `max_matches_per_worker = 120`
    pub max_matches_per_worker: Option<u32>,
    /// `phase_groups = 4`: a worker's matches tick in this many groups spread over the tick
    pub phase_groups: Option<u32>,
    /// `drain_timeout_s = 30.0`
    pub drain_timeout_s: Option<f64>,
    /// `admin_bind = "127.0.0.1:40080"` (off when absent)
    pub admin_bind: Option<String>,
    /// `admin_token_file = "/etc/tickforge/admin.token"`: the admin API's bearer token
    pub admin_token_file: Option<PathBuf>,
    /// `admin_auth_probes = false`: `/healthz` and `/metrics` need the token too
    pub admin_auth_probes: Option<bool>,
    /// `unjoined_match_ttl_s = 60.0`: an admin-made match nobody joins is removed after it
    pub unjoined_match_ttl_s: Option<f64>,
    /// `protocol_id = 8388345093885489767`, or in hex: `0x7469636b666f7267` (a TOML
    /// integer) or `"0x7469636b666f7267"` (a string, for ids past 2^63)
    #[serde(default, deserialize_with = "de_protocol_id")]
    pub protocol_id: Option<u64>,
    /// `public_addr = "203.0.113.7:40000"`
    pub public_addr: Option<String>,
    /// `key_file = "/etc/tickforge/private.key"` (64 hex digits)
    pub key_file: Option<PathBuf>,
    /// `requests_per_second_per_ip = 20`
    pub requests_per_second_per_ip: Option<u32>,
    /// `results_file = "tickforge-results.log"`; `"none"`: no results file
    pub results_file: Option<PathBuf>,
    /// `record_dir = "actions"`: write every match's inputs there (off when absent)
    pub record_dir: Option<PathBuf>,
    /// `agones = true`: talk to the Agones SDK sidecar (absent: on when
    /// `AGONES_SDK_HTTP_PORT` or `AGONES_SDK_GRPC_PORT` is set; `false`: off regardless)
    pub agones: Option<bool>,
    /// `agones_health_period_s = 2.5`: seconds between Agones health pings (default 2.5; keep
    /// it at or under half the GameServer's `health.periodSeconds`)
    pub agones_health_period_s: Option<f64>,
    /// `[game]`: `name = "shooter"` (the game; absent: the binary's first), and the game's
    /// own keys (`tickforge serve --game NAME --help` lists them)
    #[serde(default, deserialize_with = "de_game_table")]
    pub game: Option<ConfigTable>,
    /// `[budgets]`: milliseconds per match tick by category, `replication_ms = 0.03`, and
    /// for the whole frame, `frame_ms = 0.117` (keys: [`BUDGET_KEYS_FORM`])
    pub budgets: Option<BTreeMap<String, f64>>,
}

/// The keys of the `[budgets]` table, as an error names them.
pub const BUDGET_KEYS_FORM: &str = "replication_ms, fow_ms, network_ms, animation_ms, \
     gameplay_ms, movement_ms, equippable_ms, character_ms, physics_ms, other_ms or frame_ms";

/// The values of the `[budgets]` table, as an error names them.
pub const BUDGET_VALUE_FORM: &str = "milliseconds per match tick, more than 0 and at most 1000";

/// Reads a `--budget CATEGORY=MS` flag: the `[budgets]` key (`CATEGORY_ms`) and its value.
pub fn parse_budget_flag(text: &str) -> Result<(String, f64), String> {
    let form = || {
        format!(
            "expected CATEGORY=MS, CATEGORY one of {}, MS {BUDGET_VALUE_FORM}",
            (0..BUDGET_SLOTS)
                .map(slot_name)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let (category, ms) = text.split_once('=').ok_or_else(form)?;
    let ms: f64 = ms.trim().parse().map_err(|_| form())?;
    if slot_by_name(category.trim()).is_none() || !budget_ok(ms) {
        return Err(form());
    }
    Ok((format!("{}_ms", category.trim()), ms))
}

fn budget_ok(ms: f64) -> bool {
    ms.is_finite() && ms > 0.0 && ms <= 1000.0
}

/// The `[budgets]` table, checked: each key a slot's `_ms`, each value in range.
fn resolve_budgets(table: Option<BTreeMap<String, f64>>) -> Result<Budgets, ConfigError> {
    let mut budgets = Budgets::default();
    for (key, ms) in table.unwrap_or_default() {
        let slot = key.strip_suffix("_ms").and_then(slot_by_name);
        let Some(slot) = slot else {
            return Err(ConfigError::Budget {
                key,
                expected: BUDGET_KEYS_FORM,
                got: "an unknown key".into(),
            });
        };
        if !budget_ok(ms) {
            return Err(ConfigError::Budget {
                key,
                expected: BUDGET_VALUE_FORM,
                got: ms.to_string(),
            });
        }
        budgets.ns[slot] = Some((ms * 1e6).round() as u64);
    }
    Ok(budgets)
}

/// 4 groups: a quarter of a worker's matches wake together (2 ms apart at 128 Hz), so
/// wake-ups and batched calls are shared four ways fewer than with every match at once,
/// while no more than a quarter of the matches wait on each other. More matches get more
/// groups: see [`MAX_MATCHES_PER_PHASE`].
pub const DEFAULT_PHASE_GROUPS: u32 = 4;

/// Most matches that tick in one phase group: a group's matches run one after the other,
/// so the last starts about this many match frames after its deadline (4 × 0.13 ms),
/// well inside the 1 ms that counts a tick late.
pub const MAX_MATCHES_PER_PHASE: u32 = 4;

/// The phase groups of a worker hosting `matches`: at least `configured`, enough that no
/// group holds more than [`MAX_MATCHES_PER_PHASE`], and no more than one per match.
pub fn phase_groups_for(configured: u32, matches: usize) -> u32 {
    let matches = u32::try_from(matches).unwrap_or(u32::MAX).max(1);
    configured
        .max(matches.div_ceil(MAX_MATCHES_PER_PHASE))
        .min(matches)
        .max(1)
}

/// A configuration value that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not TOML, has an unknown key, or a value of the wrong type.
    #[error("config file {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message, which names the key.
        message: String,
    },
    /// The key file cannot be read or does not hold a key.
    #[error(
        "key file {path} (--key-file, config key `key_file`): {problem}; expected {KEY_FILE_FORM}"
    )]
    KeyFile {
        /// The file.
        path: String,
        /// What is wrong with it (an OS error appears here, once).
        problem: String,
    },
    /// The admin token file cannot be read or does not hold a usable token.
    #[error(
        "admin token file {path} (--admin-token-file, config key `admin_token_file`): \
         {problem}; expected {ADMIN_TOKEN_FILE_FORM}"
    )]
    TokenFile {
        /// The file.
        path: String,
        /// What is wrong with it (an OS error appears here, once); never the token.
        problem: String,
    },
    /// The record dir cannot be created, is not a directory, or cannot be written in.
    #[error("--record-dir {path}: {problem}")]
    RecordDir {
        /// The directory.
        path: String,
        /// What is wrong with it (an OS error appears here, once).
        problem: String,
    },
    /// The game is not in this binary, or refused one of its keys (the text names it).
    #[error("config table [game]: {0}")]
    Game(String),
    /// More seats than the game takes.
    #[error("config key `players_per_match`: expected an integer from 1 to {max} (the most game `{game}` takes), got {got}")]
    Seats {
        /// The game.
        game: &'static str,
        /// Its most seats.
        max: u32,
        /// What was asked for.
        got: u32,
    },
    /// A key of the `[budgets]` table is not a budget, or its value is out of range.
    #[error("config key `budgets.{key}`: expected {expected}, got {got}")]
    Budget {
        /// The key within the table.
        key: String,
        /// The form it accepts.
        expected: &'static str,
        /// What it was given.
        got: String,
    },
    /// A key has a value outside what it accepts.
    #[error("config key `{key}`: expected {expected}, got {got}")]
    Invalid {
        /// The key.
        key: &'static str,
        /// The form it accepts.
        expected: &'static str,
        /// What it was given.
        got: String,
    },
}

impl ConfigFile {
    /// Reads a TOML file; unknown keys are errors.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.display().to_string(),
            message: e.to_string().trim().replace('\n', " "),
        })
    }

    /// Keys set in `over` replace those here.
    pub fn overlay(self, over: ConfigFile) -> ConfigFile {
        // `core`, `cores` and `workers` say one thing three ways: any of them in `over`
        // replaces all three here.
        let workers_given = over.core.is_some() || over.cores.is_some() || over.workers.is_some();
        let (core, cores, workers) = if workers_given {
            (over.core, over.cores, over.workers)
        } else {
            (self.core, self.cores, self.workers)
        };
        ConfigFile {
            bind: over.bind.or(self.bind),
            matches: over.matches.or(self.matches),
            players_per_match: over.players_per_match.or(self.players_per_match),
            tick_hz: over.tick_hz.or(self.tick_hz),
            spin_us: over.spin_us.or(self.spin_us),
            rt_priority: over.rt_priority.or(self.rt_priority),
            warmup_s: over.warmup_s.or(self.warmup_s),
            duration_s: over.duration_s.or(self.duration_s),
            core,
            cores,
            workers,
            max_matches_per_worker: over.max_matches_per_worker.or(self.max_matches_per_worker),
            phase_groups: over.phase_groups.or(self.phase_groups),
            drain_timeout_s: over.drain_timeout_s.or(self.drain_timeout_s),
            admin_bind: over.admin_bind.or(self.admin_bind),
            admin_token_file: over.admin_token_file.or(self.admin_token_file),
            admin_auth_probes: over.admin_auth_probes.or(self.admin_auth_probes),
            unjoined_match_ttl_s: over.unjoined_match_ttl_s.or(self.unjoined_match_ttl_s),
            protocol_id: over.protocol_id.or(self.protocol_id),
            public_addr: over.public_addr.or(self.public_addr),
            key_file: over.key_file.or(self.key_file),
            requests_per_second_per_ip: over
                .requests_per_second_per_ip
                .or(self.requests_per_second_per_ip),
            results_file: over.results_file.or(self.results_file),
            record_dir: over.record_dir.or(self.record_dir),
            agones: over.agones.or(self.agones),
            agones_health_period_s: over.agones_health_period_s.or(self.agones_health_period_s),
            // The game's keys merge one by one: a flag replaces its key only. A flag that
            // names another game than the file's starts from an empty table: the file's
            // keys are the other game's.
            game: match (self.game, over.game) {
                (None, over) => over,
                (base, None) => base,
                (Some(mut base), Some(over)) => {
                    let other_game = over
                        .get("name")
                        .is_some_and(|n| Some(n) != base.get("name"));
                    if other_game {
                        Some(over)
                    } else {
                        base.extend(over);
                        Some(base)
                    }
                }
            },
            // Budgets merge key by key: a flag replaces its category's only.
            budgets: match (self.budgets, over.budgets) {
                (Some(mut base), Some(over)) => {
                    base.extend(over);
                    Some(base)
                }
                (base, over) => over.or(base),
            },
        }
    }

    /// Checks every key and fills the defaults; the private key comes from `key_file`, or
    /// else from the environment variable [`KEY_ENV`], the admin token from
    /// `admin_token_file`, or else [`TOKEN_ENV`], and the Agones sidecar's port from
    /// `AGONES_SDK_HTTP_PORT` (whose presence, or `AGONES_SDK_GRPC_PORT`'s, turns Agones
    /// on unless `agones = false`).
    pub fn resolve(self) -> Result<ServerConfig, ConfigError> {
        let env = std::env::var(KEY_ENV).ok();
        let admin_token_env = std::env::var(TOKEN_ENV).ok();
        let agones_env = AgonesEnv {
            http_port: std::env::var(HTTP_PORT_ENV).ok(),
            grpc_port: std::env::var(GRPC_PORT_ENV).ok(),
        };
        self.resolve_with_all_envs(env, admin_token_env, agones_env)
    }

    /// [`ConfigFile::resolve`] with the environment's key passed in, and no admin token
    /// from the environment.
    pub fn resolve_with_env(self, key_env: Option<String>) -> Result<ServerConfig, ConfigError> {
        self.resolve_with_envs(key_env, None)
    }

    /// [`ConfigFile::resolve`] with the environment's key and admin token passed in, and no
    /// Agones variables.
    pub fn resolve_with_envs(
        self,
        key_env: Option<String>,
        admin_token_env: Option<String>,
    ) -> Result<ServerConfig, ConfigError> {
        self.resolve_with_all_envs(key_env, admin_token_env, AgonesEnv::default())
    }

    /// [`ConfigFile::resolve`] with every environment variable it reads passed in.
    pub fn resolve_with_all_envs(
        self,
        key_env: Option<String>,
        admin_token_env: Option<String>,
        agones_env: AgonesEnv,
    ) -> Result<ServerConfig, ConfigError> {
        let d = ServerConfig::default();
        let agones = resolve_agones(self.agones, self.agones_health_period_s, agones_env)?;
        let bind = parse_addr("bind", self.bind)?.unwrap_or(d.bind);
        let public_addr = parse_addr("public_addr", self.public_addr)?;
        let private_key = match (&self.key_file, key_env) {
            (Some(path), _) => read_key_file(path)?,
            (None, Some(text)) => {
                PrivateKey::from_hex(&text).map_err(|e| ConfigError::Invalid {
                    key: "key_file",
                    expected: KEY_FORM,
                    got: format!("{KEY_ENV}: {e}"),
                })?
            }
            (None, None) => {
                return Err(ConfigError::Invalid {
                    key: "key_file",
                    expected: KEY_FORM,
                    got: format!("nothing (no key_file, and {KEY_ENV} is not set)"),
                })
            }
        };
        let requests_per_second_per_ip = check(
            self.requests_per_second_per_ip,
            d.requests_per_second_per_ip,
            "requests_per_second_per_ip",
            "an integer from 1 to 10000",
            |v| (1..=10_000).contains(v),
        )?;
        // Under Agones the matches come from allocations: none at startup unless asked.
        let matches = if agones.is_some() {
            check(
                self.matches,
                0,
                "matches",
                "an integer from 0 to 4096 (0 with agones)",
                |v| *v <= 4096,
            )?
        } else {
            check(
                self.matches,
                d.matches,
                "matches",
                "an integer from 1 to 4096 (0 with agones)",
                |v| (1..=4096).contains(v),
            )?
        };
        let game = GameChoice::from_table(self.game.unwrap_or_default());
        let maker = crate::games::configure(game.name.as_deref(), &game.table)
            .map_err(|e| ConfigError::Game(e.to_string()))?;
        let max_seats = u32::from(maker.max_seats());
        let players = self
            .players_per_match
            .unwrap_or(u32::from(d.players_per_match));
        if !(1..=max_seats).contains(&players) {
            return Err(ConfigError::Seats {
                game: maker.game(),
                max: max_seats,
                got: players,
            });
        }
        let tick_hz = check(
            self.tick_hz,
            d.tick_hz,
            "tick_hz",
            "an integer from 1 to 1000",
            |v| (1..=1000).contains(v),
        )?;
        let spin_us = check(
            self.spin_us,
            100,
            "spin_us",
            "microseconds from 0 to 2000",
            |v| *v <= 2000,
        )?;
        let rt_priority = check(
            self.rt_priority,
            u32::from(d.rt_priority),
            "rt_priority",
            "0 (normal scheduling) or a SCHED_FIFO priority from 1 to 99",
            |v| *v <= 99,
        )?;
        let warmup_s = check(
            self.warmup_s,
            0.0,
            "warmup_s",
            "seconds from 0 to 1000000",
            |v| v.is_finite() && (0.0..=1e6).contains(v),
        )?;
        let duration = match self.duration_s {
            None => None,
            Some(v) if v.is_finite() && v > 0.0 && v <= 1e6 => Some(Duration::from_secs_f64(v)),
            Some(v) => {
                return Err(ConfigError::Invalid {
                    key: "duration_s",
                    expected: "seconds, more than 0 and at most 1000000",
                    got: v.to_string(),
                })
            }
        };
        let cores = resolve_cores(self.core, self.cores, self.workers)?;
        let budgets = resolve_budgets(self.budgets)?;
        let max_matches_per_worker = check(
            self.max_matches_per_worker,
            d.max_matches_per_worker,
            "max_matches_per_worker",
            "an integer from 1 to 4096",
            |v| (1..=4096).contains(v),
        )?;
        let phase_groups = check(
            self.phase_groups,
            d.phase_groups,
            "phase_groups",
            "an integer from 1 to 64",
            |v| (1..=64).contains(v),
        )?;
        let drain_timeout = match self.drain_timeout_s {
            None => d.drain_timeout,
            Some(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Duration::from_secs_f64(v),
            Some(v) => {
                return Err(ConfigError::Invalid {
                    key: "drain_timeout_s",
                    expected: "seconds from 0 to 86400",
                    got: v.to_string(),
                })
            }
        };
        let admin_bind = parse_addr("admin_bind", self.admin_bind)?;
        let admin_token = resolve_admin_token(self.admin_token_file, admin_token_env)?;
        let admin_auth_probes = self.admin_auth_probes.unwrap_or(false);
        if let (Some(bind), None) = (admin_bind, &admin_token) {
            if !bind.ip().is_loopback() {
                return Err(ConfigError::Invalid {
                    key: "admin_bind",
                    expected: "a loopback address (127.0.0.1, [::1]) unless an admin token \
                               is set with admin_token_file or TICKFORGE_ADMIN_TOKEN",
                    got: bind.to_string(),
                });
            }
        }
        if admin_auth_probes && admin_token.is_none() {
            return Err(ConfigError::Invalid {
                key: "admin_auth_probes",
                expected: "false unless an admin token is set with admin_token_file or \
                           TICKFORGE_ADMIN_TOKEN",
                got: "true".to_string(),
            });
        }
        let unjoined_match_ttl = match self.unjoined_match_ttl_s {
            None => d.unjoined_match_ttl,
            Some(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Duration::from_secs_f64(v),
            Some(v) => {
                return Err(ConfigError::Invalid {
                    key: "unjoined_match_ttl_s",
                    expected: "seconds, more than 0 and at most 86400",
                    got: v.to_string(),
                })
            }
        };
        Ok(ServerConfig {
            bind,
            matches,
            players_per_match: players as u16,
            tick_hz,
            game,
            spin: Duration::from_micros(spin_us),
            rt_priority: rt_priority as u8,
            warmup: Duration::from_secs_f64(warmup_s),
            duration,
            cores,
            max_matches_per_worker,
            phase_groups,
            drain_timeout,
            admin_bind,
            admin_token,
            admin_auth_probes,
            unjoined_match_ttl,
            protocol_id: self.protocol_id.unwrap_or(d.protocol_id),
            public_addr,
            private_key,
            requests_per_second_per_ip,
            results_file: match self.results_file {
                None => Some(PathBuf::from(DEFAULT_RESULTS_FILE)),
                // Off: no result line is written (a file named so: `./none`).
                Some(path) if path.as_os_str() == RESULTS_FILE_OFF => None,
                Some(path) => Some(path),
            },
            record_dir: match self.record_dir {
                None => None,
                Some(dir) => {
                    check_record_dir(&dir)?;
                    Some(dir)
                }
            },
            agones,
            budgets,
        })
    }
}

/// The Agones environment variables as the process found them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgonesEnv {
    /// `AGONES_SDK_HTTP_PORT`: the REST gateway's port.
    pub http_port: Option<String>,
    /// `AGONES_SDK_GRPC_PORT`: present under Agones (its value is not used).
    pub grpc_port: Option<String>,
}

/// Agones' settings: on with `agones = true`, or when Agones' variables are set and
/// `agones` is absent; the REST port from `AGONES_SDK_HTTP_PORT` (default 9358).
fn resolve_agones(
    on: Option<bool>,
    health_period_s: Option<f64>,
    env: AgonesEnv,
) -> Result<Option<AgonesConfig>, ConfigError> {
    let health_period = match health_period_s {
        None => None,
        Some(v) if v.is_finite() && v > 0.0 && v <= 3600.0 => Some(Duration::from_secs_f64(v)),
        Some(v) => {
            return Err(ConfigError::Invalid {
                key: "agones_health_period_s",
                expected: "seconds, more than 0 and at most 3600",
                got: v.to_string(),
            })
        }
    };
    let on = on.unwrap_or(env.http_port.is_some() || env.grpc_port.is_some());
    if !on {
        return Ok(None);
    }
    let port = match env.http_port {
        None => DEFAULT_HTTP_PORT,
        Some(text) => match text.trim().parse::<u16>() {
            Ok(port) if port > 0 => port,
            _ => {
                return Err(ConfigError::Invalid {
                    key: "agones",
                    expected: "AGONES_SDK_HTTP_PORT to be a port from 1 to 65535",
                    got: format!("{text:?}"),
                })
            }
        },
    };
    let mut config = AgonesConfig::new(port);
    if let Some(period) = health_period {
        config.health_period = period;
    }
    if config.health_period > Duration::from_secs(5) {
        eprintln!(
            "tickforge: warning: agones_health_period_s = {} is over 5 s: keep it at or under \
             half the GameServer's health.periodSeconds (Agones' default 5), or a ping \
             delayed by a slow SDK call may miss a period",
            config.health_period.as_secs_f64()
        );
    }
    Ok(Some(config))
}

/// What a key file holds.
const KEY_FILE_FORM: &str = "the 32-byte private key as 64 hex digits (make one with \
`tickforge token --generate-key FILE`)";

/// Reads the private key from a key file (`key_file`, `--key-file`): 64 hex digits,
/// surrounding white space ignored. The error names the file, what is wrong and the form.
pub fn read_key_file(path: &Path) -> Result<PrivateKey, ConfigError> {
    let bad = |problem: String| ConfigError::KeyFile {
        path: path.display().to_string(),
        problem,
    };
    let bytes = std::fs::read(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| bad(format!("it holds {} bytes of binary data", bytes.len())))?;
    PrivateKey::from_hex(text).map_err(|e| {
        bad(match e {
            KeyError::Length(n) => format!("it holds {n} characters"),
            KeyError::NotHex => "it holds characters that are not hex digits".to_string(),
        })
    })
}

/// A warning for a key file that its group or others may read or write (Unix mode
/// `& 0o077` set): it names the file and the fix. `None`: only its owner may, or the mode
/// cannot be read (reading the key then says why).
pub fn key_file_warning(path: &Path) -> Option<String> {
    secret_file_warning("key file", "its key lets anyone mint connect tokens", path)
}

/// A warning for an admin token file that its group or others may read or write, as
/// [`key_file_warning`] gives for the key file.
pub fn token_file_warning(path: &Path) -> Option<String> {
    secret_file_warning(
        "admin token file",
        "its token lets anyone create matches through the admin API",
        path,
    )
}

/// A warning for a file holding a secret (`what`, e.g. "key file") that its group or
/// others may read or write (Unix mode `& 0o077` set), saying `why` that matters and the
/// fix. `None`: only its owner may, or the mode cannot be read (reading the file then
/// says why).
#[cfg(not(unix))]
fn secret_file_warning(_what: &str, _why: &str, _path: &Path) -> Option<String> {
    // Windows files carry ACLs, not a mode to read here: no warning either way.
    None
}

#[cfg(unix)]
fn secret_file_warning(what: &str, why: &str, path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "{what} {0} is open to group or others (mode {mode:03o}), and {why}: run \
             `chmod 600 {0}`",
            path.display()
        )
    })
}

/// Checks a record dir at startup: it exists or can be created, is a directory, and a
/// file can be created in it.
pub fn check_record_dir(path: &Path) -> Result<(), ConfigError> {
    let bad = |problem: String| ConfigError::RecordDir {
        path: path.display().to_string(),
        problem,
    };
    match std::fs::metadata(path) {
        Ok(m) if !m.is_dir() => return Err(bad("not a directory".to_string())),
        Ok(_) => {}
        Err(_) => std::fs::create_dir_all(path).map_err(|e| bad(format!("cannot create: {e}")))?,
    }
    let probe = path.join(format!(".tickforge-write-check-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .map_err(|e| bad(format!("cannot write in it: {e}")))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// What `protocol_id` and `--protocol-id` take.
pub const PROTOCOL_ID_FORM: &str = "a 64-bit protocol id, decimal (8388345093885489767) or \
hex with 0x (0x7469636b666f7267)";

/// Parses a protocol id: decimal, or hex after `0x` (the form netcode.io's documents use).
pub fn parse_protocol_id(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) if !hex.starts_with('+') => u64::from_str_radix(hex, 16).ok(),
        Some(_) => None,
        None => t.parse().ok(),
    };
    parsed.ok_or_else(|| format!("expected {PROTOCOL_ID_FORM}, got {text:?}"))
}

/// `protocol_id` from a TOML integer or string ([`parse_protocol_id`]).
/// Reads the `[game]` table as TOML and hands it on as JSON, refusing what JSON cannot
/// hold (a NaN or infinite number would silently become `null`, an absent key) and TOML
/// dates, so the game sees every value the file wrote.
fn de_game_table<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<ConfigTable>, D::Error> {
    use serde::de::Error;
    fn convert(key: &str, v: toml::Value) -> Result<serde_json::Value, String> {
        Ok(match v {
            toml::Value::String(s) => s.into(),
            toml::Value::Integer(i) => i.into(),
            toml::Value::Float(f) if f.is_finite() => f.into(),
            toml::Value::Float(f) => {
                return Err(format!("[game] {key}: expected a finite number, got {f}"))
            }
            toml::Value::Boolean(b) => b.into(),
            toml::Value::Datetime(t) => {
                return Err(format!("[game] {key}: expected a number, string, boolean, array or table, got the date {t}"))
            }
            toml::Value::Array(a) => (a.into_iter().map(|v| convert(key, v)))
                .collect::<Result<Vec<_>, _>>()?
                .into(),
            toml::Value::Table(t) => serde_json::Value::Object(
                t.into_iter()
                    .map(|(k, v)| convert(&format!("{key}.{k}"), v).map(|v| (k, v)))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }
    let table = Option::<toml::Table>::deserialize(d)?;
    table
        .map(|t| {
            t.into_iter()
                .map(|(k, v)| convert(&k, v).map(|v| (k, v)))
                .collect::<Result<ConfigTable, _>>()
                .map_err(D::Error::custom)
        })
        .transpose()
}

fn de_protocol_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct Id;
    impl serde::de::Visitor<'_> for Id {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(
                f,
                "protocol_id: {PROTOCOL_ID_FORM}, as a TOML integer or string"
            )
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<u64, E> {
            parse_protocol_id(v).map_err(|e| E::custom(format!("protocol_id: {e}")))
        }
    }
    d.deserialize_any(Id).map(Some)
}

const KEY_FORM: &str = "a file holding the 32-byte private key as 64 hex digits (make one with \
`tickforge token --generate-key FILE`), or the same digits in TICKFORGE_PRIVATE_KEY";

const ADMIN_TOKEN_FORM: &str = "a file holding the admin API's bearer token: 16 to 1024 \
visible ASCII characters (for example `openssl rand -hex 32`), or the same in \
TICKFORGE_ADMIN_TOKEN";

/// What an admin token file holds.
const ADMIN_TOKEN_FILE_FORM: &str = "the admin API's bearer token: 16 to 1024 visible ASCII \
characters (for example `openssl rand -hex 32`)";

/// The admin token from `admin_token_file`, or else the environment's; `None`: neither.
/// Errors name the file or the variable, never the token.
fn resolve_admin_token(
    file: Option<PathBuf>,
    env: Option<String>,
) -> Result<Option<AdminToken>, ConfigError> {
    let text = match (file, env) {
        (Some(path), _) => return read_token_file(&path).map(Some),
        (None, Some(text)) => text,
        (None, None) => return Ok(None),
    };
    AdminToken::new(&text)
        .map(Some)
        .map_err(|reason| ConfigError::Invalid {
            key: "admin_token_file",
            expected: ADMIN_TOKEN_FORM,
            got: format!("{TOKEN_ENV}: {reason}"),
        })
}

/// Reads the admin token from a token file (`admin_token_file`, `--admin-token-file`).
/// The error names the file, what is wrong and the form, never the token.
pub fn read_token_file(path: &Path) -> Result<AdminToken, ConfigError> {
    let bad = |problem: String| ConfigError::TokenFile {
        path: path.display().to_string(),
        problem,
    };
    let bytes = std::fs::read(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| bad(format!("it holds {} bytes of binary data", bytes.len())))?;
    AdminToken::new(text).map_err(|reason| bad(format!("it is {reason}")))
}

/// The workers' CPUs from `core`, `cores` or `workers` (at most one of them): ascending,
/// each one this process may run on. `None`: one unpinned worker.
fn resolve_cores(
    core: Option<usize>,
    cores: Option<Vec<usize>>,
    workers: Option<u32>,
) -> Result<Option<Vec<usize>>, ConfigError> {
    let allowed = tickforge_io::cpu::allowed_cores();
    let given = [core.is_some(), cores.is_some(), workers.is_some()];
    if given.iter().filter(|g| **g).count() > 1 {
        return Err(ConfigError::Invalid {
            key: "cores",
            expected: "only one of core, cores and workers",
            got: format!("core {core:?}, cores {cores:?}, workers {workers:?}"),
        });
    }
    let (key, mut list) = match (core, cores, workers) {
        (Some(c), _, _) => ("core", vec![c]),
        (_, Some(list), _) => ("cores", list),
        (_, _, Some(n)) => {
            if n == 0 || n as usize > allowed.len() {
                return Err(ConfigError::Invalid {
                    key: "workers",
                    expected: "an integer from 1 to the number of CPUs this process may run on",
                    got: format!("{n} (allowed CPUs: {allowed:?})"),
                });
            }
            ("workers", allowed[..n as usize].to_vec())
        }
        (None, None, None) => return Ok(None),
    };
    list.sort_unstable();
    list.dedup();
    if list.is_empty() {
        return Err(ConfigError::Invalid {
            key,
            expected: "a list of CPUs such as 0,1",
            got: "an empty list".to_string(),
        });
    }
    if let Some(bad) = list.iter().find(|c| !allowed.contains(c)) {
        return Err(ConfigError::Invalid {
            key,
            expected: "CPUs this process may run on",
            got: format!("{bad} (allowed: {allowed:?})"),
        });
    }
    Ok(Some(list))
}

fn parse_addr(key: &'static str, value: Option<String>) -> Result<Option<SocketAddr>, ConfigError> {
    value
        .map(|s| {
            s.parse().map_err(|_| ConfigError::Invalid {
                key,
                expected: "an IP address and port such as 127.0.0.1:40000 or [::1]:40000",
                got: format!("{s:?}"),
            })
        })
        .transpose()
}

fn check<T: Copy + std::fmt::Display>(
    value: Option<T>,
    default: T,
    key: &'static str,
    expected: &'static str,
    ok: impl Fn(&T) -> bool,
) -> Result<T, ConfigError> {
    let v = value.unwrap_or(default);
    if ok(&v) {
        Ok(v)
    } else {
        Err(ConfigError::Invalid {
            key,
            expected,
            got: v.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_groups_grow_with_the_matches_and_never_outnumber_them() {
        assert_eq!(phase_groups_for(4, 1), 1);
        assert_eq!(phase_groups_for(4, 10), 4);
        assert_eq!(phase_groups_for(4, 20), 5);
        assert_eq!(phase_groups_for(4, 41), 11);
        assert_eq!(phase_groups_for(1, 3), 1);
        assert_eq!(phase_groups_for(16, 5), 5);
        assert_eq!(phase_groups_for(4, 0), 1);
    }

    const HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    fn parse(s: &str) -> Result<ConfigFile, String> {
        toml::from_str(s).map_err(|e| e.to_string())
    }

    fn resolve(c: ConfigFile) -> Result<ServerConfig, ConfigError> {
        crate::testing::register_walk();
        c.resolve_with_env(Some(HEX.into()))
    }

    #[test]
    fn empty_config_gives_the_defaults() {
        let c = resolve(ConfigFile::default()).unwrap();
        let d = ServerConfig::default();
        assert_eq!(
            (c.bind, c.matches, c.tick_hz, c.players_per_match),
            (d.bind, d.matches, d.tick_hz, d.players_per_match)
        );
        assert_eq!(
            (c.spin, c.protocol_id, c.public_addr),
            (d.spin, d.protocol_id, None)
        );
        assert_eq!(c.private_key, PrivateKey::from_hex(HEX).unwrap());
    }

    #[test]
    fn flags_override_the_file() {
        let file = parse("tick_hz = 64\nmatches = 3").unwrap();
        let flags = ConfigFile {
            tick_hz: Some(30),
            ..Default::default()
        };
        let c = resolve(file.overlay(flags)).unwrap();
        assert_eq!(c.tick_hz, 30);
        assert_eq!(c.matches, 3);
    }

    #[test]
    fn game_flags_merge_key_by_key_unless_they_name_another_game() {
        let table =
            |json: &str| -> Option<ConfigTable> { Some(serde_json::from_str(json).unwrap()) };
        let file = ConfigFile {
            game: table(r#"{"name": "a", "x": 1, "y": 2}"#),
            ..Default::default()
        };
        let same = ConfigFile {
            game: table(r#"{"y": 3}"#),
            ..Default::default()
        };
        assert_eq!(
            file.clone().overlay(same).game,
            table(r#"{"name": "a", "x": 1, "y": 3}"#)
        );
        let other = ConfigFile {
            game: table(r#"{"name": "b", "z": 4}"#),
            ..Default::default()
        };
        assert_eq!(file.overlay(other).game, table(r#"{"name": "b", "z": 4}"#));
    }

    #[test]
    fn budgets_are_read_by_category_and_bad_ones_named_with_the_form() {
        use tickforge_telemetry::{rounds::FRAME_SLOT, Category};
        let c = resolve(parse("[budgets]\nreplication_ms = 0.03\nframe_ms = 1").unwrap()).unwrap();
        assert_eq!(c.budgets.ns[Category::Replication.index()], Some(30_000));
        assert_eq!(c.budgets.ns[FRAME_SLOT], Some(1_000_000));
        assert_eq!(c.budgets.ns[Category::Fow.index()], None);
        assert_eq!(
            resolve(ConfigFile::default()).unwrap().budgets,
            Budgets::default()
        );
        let err = resolve(parse("[budgets]\nnetwork = 0.1").unwrap()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "config key `budgets.network`: expected {BUDGET_KEYS_FORM}, got an unknown key"
            )
        );
        for (toml, got) in [
            ("fow_ms = 0", "0"),
            ("fow_ms = -1.5", "-1.5"),
            ("fow_ms = 2000", "2000"),
        ] {
            let err = resolve(parse(&format!("[budgets]\n{toml}")).unwrap()).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("config key `budgets.fow_ms`: expected {BUDGET_VALUE_FORM}, got {got}")
            );
        }
        let err = parse("[budgets]\nfow_ms = \"fast\"").unwrap_err();
        assert!(err.contains("fow_ms"), "{err}");
        // A flag replaces its own category's budget and keeps the file's others.
        let file = parse("[budgets]\nfow_ms = 0.5\nphysics_ms = 0.2").unwrap();
        let (key, ms) = parse_budget_flag("fow=0.25").unwrap();
        let flags = ConfigFile {
            budgets: Some(BTreeMap::from([(key, ms)])),
            ..Default::default()
        };
        let c = resolve(file.overlay(flags)).unwrap();
        assert_eq!(c.budgets.ns[Category::Fow.index()], Some(250_000));
        assert_eq!(c.budgets.ns[Category::Physics.index()], Some(200_000));
        for bad in ["fow", "fog=1", "fow=x", "fow=0", "frame=-1"] {
            let err = parse_budget_flag(bad).unwrap_err();
            assert!(
                err.starts_with("expected CATEGORY=MS, CATEGORY one of replication,"),
                "{err}"
            );
            assert!(err.contains("frame, MS milliseconds"), "{err}");
        }
        assert_eq!(
            parse_budget_flag("frame=0.117"),
            Ok(("frame_ms".into(), 0.117))
        );
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = parse("tick_rate = 128").unwrap_err();
        assert!(err.contains("tick_rate"), "{err}");
        assert!(err.contains("tick_hz"), "lists the accepted keys: {err}");
    }

    #[test]
    fn bad_values_name_the_key_and_the_form() {
        let err = resolve(ConfigFile {
            tick_hz: Some(0),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "config key `tick_hz`: expected an integer from 1 to 1000, got 0"
        );
        let err = resolve(ConfigFile {
            bind: Some("localhost".into()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("config key `bind`: expected an IP address"),
            "{err}"
        );
        let err = resolve(ConfigFile {
            public_addr: Some("x".into()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            err.to_string().starts_with("config key `public_addr`"),
            "{err}"
        );
        let err = resolve(ConfigFile {
            core: Some(100_000),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.to_string().starts_with("config key `core`"), "{err}");
        let err = parse("matches = \"two\"").unwrap_err();
        assert!(err.contains("matches"), "{err}");
    }

    #[test]
    fn core_cores_and_workers_are_one_setting() {
        let allowed = tickforge_io::cpu::allowed_cores();
        let c = resolve(parse("core = 0").unwrap().overlay(ConfigFile {
            cores: Some(vec![allowed[0]]),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(
            c.cores,
            Some(vec![allowed[0]]),
            "the flag replaces the file's core"
        );
        let c = resolve(parse("workers = 1").unwrap()).unwrap();
        assert_eq!(c.cores, Some(vec![allowed[0]]), "the first allowed CPU");
        let err = resolve(parse("workers = 1\ncore = 0").unwrap()).unwrap_err();
        assert!(
            err.to_string()
                .contains("expected only one of core, cores and workers"),
            "{err}"
        );
        let err = resolve(parse("workers = 100000").unwrap()).unwrap_err();
        assert!(err.to_string().starts_with("config key `workers`"), "{err}");
        let err = resolve(parse("cores = [100000]").unwrap()).unwrap_err();
        assert!(err.to_string().starts_with("config key `cores`"), "{err}");
        let err = resolve(parse("drain_timeout_s = -1.0").unwrap()).unwrap_err();
        assert!(
            err.to_string().starts_with("config key `drain_timeout_s`"),
            "{err}"
        );
        let err = resolve(parse("max_matches_per_worker = 0").unwrap()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("config key `max_matches_per_worker`"),
            "{err}"
        );
        let err = resolve(parse("admin_bind = \"x\"").unwrap()).unwrap_err();
        assert!(
            err.to_string().starts_with("config key `admin_bind`"),
            "{err}"
        );
    }

    #[test]
    fn the_admin_api_needs_a_token_off_loopback_and_reclaims_unjoined_matches() {
        let c = resolve(parse("admin_bind = \"127.0.0.1:40080\"").unwrap()).unwrap();
        assert_eq!(c.admin_token, None, "loopback without a token is allowed");
        assert!(!c.admin_auth_probes);
        assert_eq!(c.unjoined_match_ttl, Duration::from_secs(60));
        let err = resolve(parse("admin_bind = \"0.0.0.0:40080\"").unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("config key `admin_bind`: expected a loopback address")
                && err.contains("admin_token_file")
                && err.contains("TICKFORGE_ADMIN_TOKEN")
                && err.ends_with("got 0.0.0.0:40080"),
            "{err}"
        );
        let token = "0123456789abcdef0123";
        let open = parse("admin_bind = \"0.0.0.0:40080\"\nadmin_auth_probes = true").unwrap();
        let c = open
            .clone()
            .resolve_with_envs(Some(HEX.into()), Some(format!("{token}\n")))
            .unwrap();
        assert_eq!(c.admin_token, Some(AdminToken::new(token).unwrap()));
        assert!(c.admin_auth_probes);
        let err = resolve(parse("admin_auth_probes = true").unwrap()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("config key `admin_auth_probes`"),
            "{err}"
        );
        let err = open
            .resolve_with_envs(Some(HEX.into()), Some("short".into()))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "config key `admin_token_file`: expected {ADMIN_TOKEN_FORM}, got \
                 TICKFORGE_ADMIN_TOKEN: shorter than 16 characters"
            )
        );

        let dir = std::env::temp_dir().join(format!("tickforge-admin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("admin.token");
        std::fs::write(&path, "with a space in it, long enough").unwrap();
        let err = resolve(ConfigFile {
            admin_token_file: Some(path.clone()),
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            format!(
                "admin token file {} (--admin-token-file, config key `admin_token_file`): it \
                 is not all visible ASCII (no spaces or control characters); expected \
                 {ADMIN_TOKEN_FILE_FORM}",
                path.display()
            )
        );
        assert!(
            !err.contains("with a space"),
            "never shows the token: {err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();

        let c = resolve(parse("unjoined_match_ttl_s = 0.25").unwrap()).unwrap();
        assert_eq!(c.unjoined_match_ttl, Duration::from_millis(250));
        for bad in ["0.0", "-1.0", "1e9", "nan"] {
            let err = resolve(parse(&format!("unjoined_match_ttl_s = {bad}")).unwrap())
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("config key `unjoined_match_ttl_s`: expected seconds, more than 0"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn the_game_table_names_the_game_and_the_game_checks_its_keys() {
        let c = resolve(ConfigFile::default()).unwrap();
        assert_eq!(c.game, GameChoice::default());
        let c = resolve(parse("[game]\nname = \"walk\"\nticks = 500").unwrap()).unwrap();
        assert_eq!(c.game.name.as_deref(), Some("walk"));
        assert_eq!(c.game.table["ticks"], 500);
        let err = resolve(parse("[game]\nticks = 0").unwrap()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "config table [game]: game `walk`: ticks: expected 1 to 10000000, got 0"
        );
        let err = resolve(parse("[game]\nname = \"chess\"").unwrap()).unwrap_err();
        assert!(
            err.to_string().contains("no such game; it has: walk"),
            "{err}"
        );
        // A game's keys live in its table; at the top level they are unknown.
        let err = parse("ticks = 500").unwrap_err();
        assert!(err.contains("unknown field `ticks`"), "{err}");
    }

    #[test]
    fn the_key_comes_from_a_file_or_the_environment_and_is_required() {
        let err = ConfigFile::default()
            .resolve_with_env(None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`key_file`") && err.contains("TICKFORGE_PRIVATE_KEY"),
            "{err}"
        );
        let err = ConfigFile::default()
            .resolve_with_env(Some("1234".into()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("64 hexadecimal digits"), "{err}");
        // Never in the debug form of a configuration.
        let c = resolve(ConfigFile::default()).unwrap();
        assert!(!format!("{c:?}").contains("0102030405"));

        let dir = std::env::temp_dir().join(format!("tickforge-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("key");
        let other = "ff".repeat(32);
        std::fs::write(&path, format!("{other}\n")).unwrap();
        // The file wins over the environment.
        let c = resolve(ConfigFile {
            key_file: Some(path.clone()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.private_key, PrivateKey([0xff; 32]));
        std::fs::write(&path, "not a key").unwrap();
        let err = resolve(ConfigFile {
            key_file: Some(path.clone()),
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            format!(
                "key file {} (--key-file, config key `key_file`): it holds 9 characters; \
                 expected the 32-byte private key as 64 hex digits (make one with \
                 `tickforge token --generate-key FILE`)",
                path.display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A scratch directory of its own for `name`, empty.
    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tickforge-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_key_file_that_holds_no_key_is_called_the_key_file() {
        let dir = scratch_dir("badkey");
        let binary = dir.join("binary.key");
        std::fs::write(&binary, [0xff, 0xfe, 0x00, 0x80, 0x12]).unwrap();
        let missing = dir.join("missing.key");
        for (path, problem) in [
            (&binary, "it holds 5 bytes of binary data".to_string()),
            (
                &missing,
                format!(
                    "cannot read it: {}",
                    std::io::Error::from_raw_os_error(libc::ENOENT)
                ),
            ),
            (&dir, "cannot read it: ".to_string()),
        ] {
            let err = resolve(ConfigFile {
                key_file: Some(path.clone()),
                ..Default::default()
            })
            .unwrap_err()
            .to_string();
            let head = format!(
                "key file {} (--key-file, config key `key_file`): {problem}",
                path.display()
            );
            assert!(err.starts_with(&head), "{err}");
            assert!(err.contains("64 hex digits"), "{err}");
            assert!(!err.contains("config file"), "{err}");
            assert_eq!(
                err.matches("(os error").count(),
                usize::from(path != &binary),
                "{err}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn an_unreadable_or_binary_token_file_is_called_the_admin_token_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch_dir("tokenfile");
        let path = dir.join("admin.token");
        let resolve_file = |path: &Path| {
            resolve(ConfigFile {
                admin_token_file: Some(path.to_path_buf()),
                ..Default::default()
            })
            .unwrap_err()
            .to_string()
        };
        let prefix = format!(
            "admin token file {} (--admin-token-file, config key `admin_token_file`): ",
            path.display()
        );
        let suffix = format!("; expected {ADMIN_TOKEN_FILE_FORM}");
        let missing = std::io::Error::from_raw_os_error(libc::ENOENT).to_string();
        let err = resolve_file(&path);
        assert_eq!(err, format!("{prefix}cannot read it: {missing}{suffix}"));
        assert!(!err.contains("config file"), "{err}");

        std::fs::write(&path, [0x8a, 0xff, 0x00, 0x13, 0xc3, 0x28]).unwrap();
        let err = resolve_file(&path);
        assert_eq!(
            err,
            format!("{prefix}it holds 6 bytes of binary data{suffix}")
        );

        std::fs::write(&path, "0123456789abcdef0123\n").unwrap();
        let chmod = |mode| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode));
        chmod(0o600).unwrap();
        assert_eq!(token_file_warning(&path), None);
        let c = resolve(ConfigFile {
            admin_token_file: Some(path.clone()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            c.admin_token,
            Some(AdminToken::new("0123456789abcdef0123").unwrap())
        );
        for mode in [0o644, 0o640, 0o604, 0o620] {
            chmod(mode).unwrap();
            let warning = token_file_warning(&path).expect("a warning");
            assert!(
                warning.starts_with(&format!(
                    "admin token file {} is open to group or others (mode {mode:03o})",
                    path.display()
                )) && warning.contains(&format!("chmod 600 {}", path.display())),
                "{warning}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_open_to_group_or_others_gets_a_warning_with_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch_dir("keymode");
        let path = dir.join("k");
        std::fs::write(&path, HEX).unwrap();
        let chmod = |mode| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode));
        chmod(0o600).unwrap();
        assert_eq!(key_file_warning(&path), None);
        chmod(0o400).unwrap();
        assert_eq!(key_file_warning(&path), None);
        for mode in [0o644, 0o640, 0o604, 0o620] {
            chmod(mode).unwrap();
            let warning = key_file_warning(&path).expect("a warning");
            assert!(
                warning.contains(&path.display().to_string())
                    && warning.contains(&format!("mode {mode:03o}"))
                    && warning.contains(&format!("chmod 600 {}", path.display())),
                "{warning}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_record_dir_is_created_and_checked_at_startup() {
        let dir = scratch_dir("recorddir");
        let fresh = dir.join("a/b");
        let c = resolve(ConfigFile {
            record_dir: Some(fresh.clone()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.record_dir.as_deref(), Some(fresh.as_path()));
        assert!(fresh.is_dir(), "created");
        assert_eq!(
            std::fs::read_dir(&fresh).unwrap().count(),
            0,
            "no probe left"
        );

        let file = dir.join("file");
        std::fs::write(&file, "").unwrap();
        let under = file.join("sub");
        for (path, problem) in [
            (&file, "not a directory".to_string()),
            (
                &under,
                format!(
                    "cannot create: {}",
                    std::io::Error::from_raw_os_error(libc::ENOTDIR)
                ),
            ),
        ] {
            let err = resolve(ConfigFile {
                record_dir: Some(path.clone()),
                ..Default::default()
            })
            .unwrap_err()
            .to_string();
            assert_eq!(err, format!("--record-dir {}: {problem}", path.display()));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_protocol_id_is_decimal_or_hex_in_flags_and_toml() {
        let id = 0x1122_3344_5566_7788u64;
        for text in [
            "0x1122334455667788",
            "0X1122334455667788",
            "1234605616436508552",
        ] {
            assert_eq!(parse_protocol_id(text), Ok(id), "{text}");
        }
        assert_eq!(parse_protocol_id("0xffffffffffffffff"), Ok(u64::MAX));
        for bad in [
            "",
            "0x",
            "zz",
            "-1",
            "0x+1",
            "0x1_0",
            "18446744073709551616",
            "1.5",
        ] {
            let err = parse_protocol_id(bad).unwrap_err();
            assert!(
                err.contains("decimal (8388345093885489767)")
                    && err.contains("hex with 0x (0x7469636b666f7267)"),
                "{bad}: {err}"
            );
        }
        for toml in [
            "protocol_id = 0x1122334455667788",
            "protocol_id = 1234605616436508552",
            "protocol_id = \"0x1122334455667788\"",
            "protocol_id = \"1234605616436508552\"",
        ] {
            let c = resolve(parse(toml).unwrap()).unwrap();
            assert_eq!(c.protocol_id, id, "{toml}");
        }
        let c = resolve(parse("protocol_id = \"0xffffffffffffffff\"").unwrap()).unwrap();
        assert_eq!(c.protocol_id, u64::MAX, "past i64, as a string");
        assert_eq!(
            resolve(parse("").unwrap()).unwrap().protocol_id,
            DEFAULT_PROTOCOL_ID
        );
        for bad in [
            "protocol_id = \"zz\"",
            "protocol_id = -1",
            "protocol_id = 1.5",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(
                err.contains("protocol_id") && err.contains("decimal") && err.contains("0x"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn degenerate_rule_values_are_refused_with_the_key_and_the_range() {
        for (toml, key, range) in [
            ("tick_hz = 0", "tick_hz", "from 1 to 1000"),
            ("tick_hz = 1001", "tick_hz", "from 1 to 1000"),
            ("warmup_s = 1e30", "warmup_s", "from 0 to 1000000"),
            ("duration_s = 1e30", "duration_s", "at most 1000000"),
            (
                "drain_timeout_s = inf",
                "drain_timeout_s",
                "from 0 to 86400",
            ),
        ] {
            let err = resolve(parse(toml).unwrap()).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("config key `{key}`: expected ")) && err.contains(range),
                "{toml}: {err}"
            );
        }
        for players in [0, 1000] {
            let toml = format!("players_per_match = {players}");
            let err = resolve(parse(&toml).unwrap()).unwrap_err().to_string();
            assert!(
                err.starts_with("config key `players_per_match`: expected an integer from 1 to 100 (the most game `walk` takes)"),
                "{toml}: {err}"
            );
        }
        // The game's own keys: the game names the key and its range.
        for (toml, key, range) in [
            ("ticks = 0", "ticks", "1 to 10000000, got 0"),
            ("ticks = 20000000", "ticks", "1 to 10000000, got 20000000"),
            ("ticks = 1.5", "ticks", "i64, got floating point `1.5`"),
            ("every = 0", "every", "1 to 65535, got 0"),
            ("every = \"often\"", "every", "\"often\""),
            ("arena = -1", "arena", "1 to 1000000, got -1"),
            (
                "arenas = 1",
                "arenas",
                "`ticks`, `every`, `arena`, `round_ticks`, got an unknown key",
            ),
        ] {
            let toml = format!("[game]\n{toml}");
            let err = resolve(parse(&toml).unwrap()).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!(
                    "config table [game]: game `walk`: {key}: expected "
                )) && err.contains(range),
                "{toml}: {err}"
            );
        }
        // The smallest sound values pass.
        resolve(parse("[game]\nticks = 1\nevery = 1\narena = 1").unwrap()).unwrap();
    }

    #[test]
    fn agones_is_on_by_its_key_or_its_environment_and_off_by_the_key_alone() {
        crate::testing::register_walk();
        let with = |toml: &str, http: Option<&str>, grpc: Option<&str>| {
            let env = AgonesEnv {
                http_port: http.map(str::to_string),
                grpc_port: grpc.map(str::to_string),
            };
            (parse(toml).unwrap()).resolve_with_all_envs(Some(HEX.into()), None, env)
        };
        assert_eq!(with("", None, None).unwrap().agones, None);
        let on = with("agones = true", None, None).unwrap().agones.unwrap();
        assert_eq!(on, AgonesConfig::new(DEFAULT_HTTP_PORT));
        assert_eq!(on.sdk.to_string(), "127.0.0.1:9358");
        assert_eq!(on.health_period, Duration::from_millis(2500));
        // Either variable turns it on; the HTTP one names the port.
        let env = with("", Some("9400"), None).unwrap().agones.unwrap();
        assert_eq!(env.sdk.port(), 9400);
        assert!(with("", None, Some("9357")).unwrap().agones.is_some());
        assert_eq!(
            with("agones = false", Some("9400"), None).unwrap().agones,
            None
        );
        let c = with("agones = true\nagones_health_period_s = 0.5", None, None).unwrap();
        assert_eq!(c.agones.unwrap().health_period, Duration::from_millis(500));
        // Under Agones a server starts with no match unless asked: they come from
        // allocations.
        assert_eq!(with("agones = true", None, None).unwrap().matches, 0);
        assert_eq!(
            with("agones = true\nmatches = 2", None, None)
                .unwrap()
                .matches,
            2
        );
        assert_eq!(with("", None, None).unwrap().matches, 1);
        let err = with("matches = 0", None, None).unwrap_err().to_string();
        assert!(
            err.contains("`matches`: expected an integer from 1 to 4096 (0 with agones)"),
            "{err}"
        );
    }

    #[test]
    fn bad_agones_values_stop_startup_with_the_key_and_the_form() {
        crate::testing::register_walk();
        for (toml, http, want) in [
            ("agones_health_period_s = 0.0", None, "config key `agones_health_period_s`: expected seconds, more than 0 and at most 3600, got 0"),
            ("agones_health_period_s = inf", None, "config key `agones_health_period_s`: expected seconds"),
            ("agones = true", Some("0"), "config key `agones`: expected AGONES_SDK_HTTP_PORT to be a port from 1 to 65535, got \"0\""),
            ("", Some("http"), "AGONES_SDK_HTTP_PORT to be a port from 1 to 65535, got \"http\""),
            ("", Some("70000"), "got \"70000\""),
        ] {
            let env = AgonesEnv {
                http_port: http.map(str::to_string),
                grpc_port: None,
            };
            let err = (parse(toml).unwrap())
                .resolve_with_all_envs(Some(HEX.into()), None, env)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{toml} {http:?}: {err}");
        }
        assert!(parse("agones = \"yes\"").unwrap_err().contains("agones"));
    }

    #[test]
    fn load_reports_the_file() {
        let dir = std::env::temp_dir().join(format!("tickforge-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.toml");
        std::fs::write(&path, "players = 10\n").unwrap();
        let err = ConfigFile::load(&path).unwrap_err().to_string();
        assert!(err.contains("bad.toml") && err.contains("players"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
