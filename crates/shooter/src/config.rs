//! The shooter's settings: the `[game]` table of a server running it, and the `game` object
//! of `POST /matches`.
//!
//! ```toml
//! [game]
//! map = "arena"        # a built-in map: "arena" (5-v-5) or "flat2km" (the crowd)
//! buy_s = 15.0         # the buy phase, players held at their spawns
//! round_s = 100.0      # the combat phase
//! round_end_s = 5.0    # the pause after a round
//! rounds = 5           # rounds in a match (first to a majority)
//! max_health_hp = 100  # each player's health at the start of a round
//! pose_every = 4       # pose players every Nth tick and lerp between (1: every tick)
//! fow_every = 4        # the fog of war traces each enemy pair every Nth tick
//! max_rewind_ms = 200  # lag compensation rewinds at most this far (cap 1000)
//! ```
//!
//! Every key is optional; a bad one is refused with the key and the form it takes.

use std::num::{NonZeroU16, NonZeroU8};
use std::time::Duration;

use serde::Deserialize;
use tickforge_api::{ConfigError, ConfigTable, ReadTable};
use tickforge_game::history::{HistoryConfig, MAX_REWIND_CAP};
use tickforge_game::rules::RulesConfig;
use tickforge_game::{BuiltinMap, WorldConfig};

/// What `map` takes.
const MAP_FORM: &str = "a built-in map: \"arena\" or \"flat2km\"";

/// The shooter's settings, checked: what every match of this configuration plays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShooterConfig {
    /// The map.
    pub map: BuiltinMap,
    /// Rounds, their phases, health and weapons (the tick rate comes from the match).
    pub rules: RulesConfig,
    /// Players are posed every this many ticks and lerped between when a shot rewinds.
    pub pose_every: NonZeroU8,
    /// The fog of war traces each pair of enemies every this many ticks.
    pub fow_every: NonZeroU8,
    /// How far back lag compensation rewinds at most.
    pub max_rewind: Duration,
}

impl Default for ShooterConfig {
    fn default() -> Self {
        let world = WorldConfig::default();
        ShooterConfig {
            map: world.map,
            rules: world.rules,
            pose_every: world.history.pose_every,
            fow_every: world.fow.trace_every_ticks,
            max_rewind: world.history.max_rewind,
        }
    }
}

impl ShooterConfig {
    /// The world a match of `seats` players at `tick_hz` plays under these settings.
    pub fn world(&self, seats: u8, tick_hz: u32) -> WorldConfig {
        let d = WorldConfig::default();
        WorldConfig {
            players: seats,
            tick_hz,
            map: self.map,
            rules: self.rules,
            history: HistoryConfig {
                pose_every: self.pose_every,
                max_rewind: self.max_rewind,
                ..d.history
            },
            fow: tickforge_game::fow::FowConfig {
                trace_every_ticks: self.fow_every,
                ..d.fow
            },
            ..d
        }
    }

    /// The settings and match setup that play `world` (for tests and tools that start
    /// from a world configuration): its map, rules and history, its players as seats.
    pub fn from_world(world: &WorldConfig) -> (ShooterConfig, tickforge_api::MatchSetup) {
        let config = ShooterConfig {
            map: world.map,
            rules: world.rules,
            pose_every: world.history.pose_every,
            fow_every: world.fow.trace_every_ticks,
            max_rewind: world.history.max_rewind,
        };
        let setup = tickforge_api::MatchSetup {
            seats: u16::from(world.players),
            tick_hz: world.tick_hz,
            record: false,
        };
        (config, setup)
    }

    /// Reads the `[game]` table; see the module doc for the keys.
    pub fn from_table(table: &ConfigTable) -> Result<ShooterConfig, ConfigError> {
        let t: Table = table.read()?;
        let d = ShooterConfig::default();
        let map = match t.map {
            None => d.map,
            Some(name) => BuiltinMap::from_name(&name)
                .ok_or_else(|| ConfigError::new("map", MAP_FORM, format!("{name:?}")))?,
        };
        let round = seconds("round_s", t.round_s, d.rules.round)?;
        if round.is_zero() {
            return Err(ConfigError::new(
                "round_s",
                "seconds, more than 0 and at most 86400",
                "0",
            ));
        }
        let rules = RulesConfig {
            buy: seconds("buy_s", t.buy_s, d.rules.buy)?,
            round,
            round_end: seconds("round_end_s", t.round_end_s, d.rules.round_end)?,
            rounds: nonzero(
                t.rounds,
                d.rules.rounds,
                "rounds",
                "an integer from 1 to 255",
            )?,
            max_health_hp: match t.max_health_hp {
                None => d.rules.max_health_hp,
                Some(hp) => NonZeroU16::new(hp).ok_or_else(|| {
                    ConfigError::new("max_health_hp", "an integer from 1 to 65535", hp)
                })?,
            },
            ..d.rules
        };
        let pose_every = nonzero(
            t.pose_every
                .filter(|&n| n <= 32)
                .or(t.pose_every.map(|_| 0)),
            d.pose_every,
            "pose_every",
            "an integer from 1 to 32 (ticks)",
        )
        .map_err(|e| with_got(e, t.pose_every))?;
        let fow_every = nonzero(
            t.fow_every.filter(|&n| n <= 16).or(t.fow_every.map(|_| 0)),
            d.fow_every,
            "fow_every",
            "an integer from 1 to 16 (ticks)",
        )
        .map_err(|e| with_got(e, t.fow_every))?;
        let max_rewind = match t.max_rewind_ms {
            None => d.max_rewind,
            Some(ms) if u128::from(ms) <= MAX_REWIND_CAP.as_millis() => {
                Duration::from_millis(u64::from(ms))
            }
            Some(ms) => {
                return Err(ConfigError::new(
                    "max_rewind_ms",
                    "milliseconds from 0 to 1000",
                    ms,
                ))
            }
        };
        Ok(ShooterConfig {
            map,
            rules,
            pose_every,
            fow_every,
            max_rewind,
        })
    }
}

/// The table as written: every key optional, no other key allowed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    map: Option<String>,
    buy_s: Option<f64>,
    round_s: Option<f64>,
    round_end_s: Option<f64>,
    rounds: Option<u8>,
    max_health_hp: Option<u16>,
    pose_every: Option<u8>,
    fow_every: Option<u8>,
    max_rewind_ms: Option<u32>,
}

fn seconds(key: &str, value: Option<f64>, default: Duration) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Ok(Duration::from_secs_f64(v)),
        Some(v) => Err(ConfigError::new(key, "seconds from 0 to 86400", v)),
    }
}

fn nonzero(
    value: Option<u8>,
    default: NonZeroU8,
    key: &str,
    expected: &str,
) -> Result<NonZeroU8, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) => NonZeroU8::new(v).ok_or_else(|| ConfigError::new(key, expected, v)),
    }
}

/// `e` naming the value the table held rather than the 0 a range check mapped it to.
fn with_got(mut e: ConfigError, held: Option<u8>) -> ConfigError {
    if let Some(v) = held {
        e.got = v.to_string();
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<ShooterConfig, ConfigError> {
        ShooterConfig::from_table(&serde_json::from_str(json).unwrap())
    }

    #[test]
    fn an_empty_table_is_the_default_match() {
        assert_eq!(read("{}").unwrap(), ShooterConfig::default());
    }

    #[test]
    fn keys_are_read() {
        let c = read(
            r#"{"map": "flat2km", "rounds": 24, "buy_s": 0.5, "round_s": 3, "pose_every": 1,
                "fow_every": 8, "max_rewind_ms": 300, "max_health_hp": 150}"#,
        )
        .unwrap();
        assert_eq!(c.map, BuiltinMap::Flat2km);
        assert_eq!(c.rules.rounds.get(), 24);
        assert_eq!(c.rules.buy, Duration::from_millis(500));
        assert_eq!(c.rules.round, Duration::from_secs(3));
        assert_eq!((c.pose_every.get(), c.fow_every.get()), (1, 8));
        assert_eq!(c.max_rewind, Duration::from_millis(300));
        assert_eq!(c.rules.max_health_hp.get(), 150);
        let w = c.world(10, 64);
        assert_eq!((w.players, w.tick_hz, w.map), (10, 64, BuiltinMap::Flat2km));
    }

    #[test]
    fn bad_keys_are_named_with_the_form_they_take() {
        for (json, says) in [
            (r#"{"map": "dust2"}"#, "map: expected a built-in map"),
            (
                r#"{"rounds": 0}"#,
                "rounds: expected an integer from 1 to 255, got 0",
            ),
            (r#"{"rounds": 256}"#, "rounds: expected"),
            (
                r#"{"round_s": 0}"#,
                "round_s: expected seconds, more than 0",
            ),
            (
                r#"{"buy_s": -1}"#,
                "buy_s: expected seconds from 0 to 86400, got -1",
            ),
            (
                r#"{"pose_every": 33}"#,
                "pose_every: expected an integer from 1 to 32 (ticks), got 33",
            ),
            (
                r#"{"fow_every": 0}"#,
                "fow_every: expected an integer from 1 to 16 (ticks), got 0",
            ),
            (
                r#"{"max_rewind_ms": 1001}"#,
                "max_rewind_ms: expected milliseconds from 0 to 1000",
            ),
            (
                r#"{"max_health_hp": 0}"#,
                "max_health_hp: expected an integer from 1 to 65535",
            ),
            (
                r#"{"players": 3}"#,
                "players: expected one of `map`, `buy_s`",
            ),
        ] {
            let e = read(json).unwrap_err().to_string();
            assert!(e.starts_with(says), "{json}: {e}");
        }
    }
}
