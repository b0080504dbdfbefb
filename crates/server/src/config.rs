//! Server configuration: a TOML file and command-line flags with the same keys, checked once
//! at start. A bad value stops startup with the key and the form it expects.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use tickforge_proto::transport::TransportConfig;

/// The configuration of a server, checked and typed.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    /// Address of the game socket.
    pub bind: SocketAddr,
    /// Matches hosted, with ids 1..=matches.
    pub matches: u32,
    /// Player slots per match.
    pub players_per_match: u8,
    /// Ticks per second of every match.
    pub tick_hz: u32,
    /// How long before a deadline the worker stops sleeping and spins.
    pub spin: Duration,
    /// Time after start excluded from the figures.
    pub warmup: Duration,
    /// Length of the measured window; `None`: until the server stops.
    pub duration: Option<Duration>,
    /// Core the worker is pinned to; `None`: not pinned.
    pub core: Option<usize>,
    /// Transport identity and timing.
    pub transport: TransportConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 40000)),
            matches: 1,
            players_per_match: 10, // 5-v-5
            tick_hz: 128,          // VALORANT's tick: 7.8125 ms
            spin: Duration::from_micros(100),
            warmup: Duration::ZERO,
            duration: None,
            core: None,
            transport: TransportConfig::default(),
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
    /// `warmup_s = 0.0`
    pub warmup_s: Option<f64>,
    /// `duration_s = 60.0`
    pub duration_s: Option<f64>,
    /// `core = 0`
    pub core: Option<usize>,
    /// `protocol_id = 8388345093885489767`
    pub protocol_id: Option<u64>,
    /// `timeout_ms = 5000`
    pub timeout_ms: Option<u64>,
}

/// A configuration value that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
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
        ConfigFile {
            bind: over.bind.or(self.bind),
            matches: over.matches.or(self.matches),
            players_per_match: over.players_per_match.or(self.players_per_match),
            tick_hz: over.tick_hz.or(self.tick_hz),
            spin_us: over.spin_us.or(self.spin_us),
            warmup_s: over.warmup_s.or(self.warmup_s),
            duration_s: over.duration_s.or(self.duration_s),
            core: over.core.or(self.core),
            protocol_id: over.protocol_id.or(self.protocol_id),
            timeout_ms: over.timeout_ms.or(self.timeout_ms),
        }
    }

    /// Checks every key and fills the defaults.
    pub fn resolve(self) -> Result<ServerConfig, ConfigError> {
        let d = ServerConfig::default();
        let bind = match self.bind {
            None => d.bind,
            Some(s) => s.parse().map_err(|_| ConfigError::Invalid {
                key: "bind",
                expected: "an IP address and port such as 127.0.0.1:40000 or [::1]:40000",
                got: format!("{s:?}"),
            })?,
        };
        let matches = check(
            self.matches,
            d.matches,
            "matches",
            "an integer from 1 to 4096",
            |v| (1..=4096).contains(v),
        )?;
        let players = check(
            self.players_per_match,
            u32::from(d.players_per_match),
            "players_per_match",
            "an integer from 1 to 128",
            |v| (1..=128).contains(v),
        )?;
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
        let warmup_s = check(self.warmup_s, 0.0, "warmup_s", "seconds, 0 or more", |v| {
            v.is_finite() && *v >= 0.0
        })?;
        let duration = match self.duration_s {
            None => None,
            Some(v) if v.is_finite() && v > 0.0 && v <= 1e6 => Some(Duration::from_secs_f64(v)),
            Some(v) => {
                return Err(ConfigError::Invalid {
                    key: "duration_s",
                    expected: "seconds, more than 0",
                    got: v.to_string(),
                })
            }
        };
        let timeout_ms = check(
            self.timeout_ms,
            d.transport.timeout.as_millis() as u64,
            "timeout_ms",
            "milliseconds from 100 to 600000",
            |v| (100..=600_000).contains(v),
        )?;
        if let Some(core) = self.core {
            let allowed = tickforge_io::cpu::allowed_cores();
            if !allowed.contains(&core) {
                return Err(ConfigError::Invalid {
                    key: "core",
                    expected: "a CPU this process may run on",
                    got: format!("{core} (allowed: {allowed:?})"),
                });
            }
        }
        Ok(ServerConfig {
            bind,
            matches,
            players_per_match: players as u8,
            tick_hz,
            spin: Duration::from_micros(spin_us),
            warmup: Duration::from_secs_f64(warmup_s),
            duration,
            core: self.core,
            transport: TransportConfig {
                protocol_id: self.protocol_id.unwrap_or(d.transport.protocol_id),
                timeout: Duration::from_millis(timeout_ms),
                ..d.transport
            },
        })
    }
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

    fn parse(s: &str) -> Result<ConfigFile, String> {
        toml::from_str(s).map_err(|e| e.to_string())
    }

    #[test]
    fn empty_config_gives_the_defaults() {
        assert_eq!(
            ConfigFile::default().resolve().unwrap(),
            ServerConfig::default()
        );
    }

    #[test]
    fn flags_override_the_file() {
        let file = parse("tick_hz = 64\nmatches = 3").unwrap();
        let flags = ConfigFile {
            tick_hz: Some(30),
            ..Default::default()
        };
        let c = file.overlay(flags).resolve().unwrap();
        assert_eq!(c.tick_hz, 30);
        assert_eq!(c.matches, 3);
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = parse("tick_rate = 128").unwrap_err();
        assert!(err.contains("tick_rate"), "{err}");
        assert!(err.contains("tick_hz"), "lists the accepted keys: {err}");
    }

    #[test]
    fn bad_values_name_the_key_and_the_form() {
        let err = ConfigFile {
            tick_hz: Some(0),
            ..Default::default()
        }
        .resolve()
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "config key `tick_hz`: expected an integer from 1 to 1000, got 0"
        );
        let err = ConfigFile {
            bind: Some("localhost".into()),
            ..Default::default()
        }
        .resolve()
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("config key `bind`: expected an IP address"),
            "{err}"
        );
        let err = ConfigFile {
            core: Some(100_000),
            ..Default::default()
        }
        .resolve()
        .unwrap_err();
        assert!(err.to_string().starts_with("config key `core`"), "{err}");
        let err = parse("matches = \"two\"").unwrap_err();
        assert!(err.contains("matches"), "{err}");
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
