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
//! rate_halves_every_m = 50.0   # a player this much further away is sent half as often
//! rate_slowest_every_ticks = 1 # down to one tick in this many (1, 2, 4, 8, 16; 1: off)
//! ```
//!
//! Every key is optional; a bad one is refused with the key and the form it takes.

use std::num::{NonZeroU16, NonZeroU8};
use std::time::Duration;

use serde::Deserialize;
use tickforge_api::{ConfigError, ConfigTable, RateByDistance, ReadTable};
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
    /// How often a player is sent to a client by its distance (off by default: a crowd of
    /// a thousand turns it on, the 10-player arena has no use for it).
    pub rate_by_distance: RateByDistance,
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
            rate_by_distance: RateByDistance::EVERY_TICK,
        }
    }
}

impl ShooterConfig {
    /// The world a match of `seats` players at `tick_hz` plays under these settings.
    pub fn world(&self, seats: u16, tick_hz: u32) -> WorldConfig {
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
            rate_by_distance: RateByDistance::EVERY_TICK,
        };
        let setup = tickforge_api::MatchSetup {
            seats: world.players,
            tick_hz: world.tick_hz,
            record: false,
            stagger: world.fow.phase,
        };
        (config, setup)
    }

    /// Reads the `[game]` table; see the module doc for the keys.
    pub fn from_table(table: &ConfigTable) -> Result<ShooterConfig, ConfigError> {
        let t: Table = table.read().map_err(|mut e| {
            // A value of the wrong type (`rounds = "five"`, `map = 3`): the key's own form,
            // not serde's name of the Rust type it is read as.
            if let Some((_, form)) = FORMS.iter().find(|(key, _)| *key == e.key) {
                e.expected = (*form).to_string();
            }
            e
        })?;
        let d = ShooterConfig::default();
        let map = match t.map {
            None => d.map,
            Some(name) => BuiltinMap::from_name(&name)
                .ok_or_else(|| ConfigError::new("map", MAP_FORM, format!("{name:?}")))?,
        };
        let round = seconds("round_s", t.round_s, d.rules.round)?;
        if round.is_zero() {
            return Err(ConfigError::new("round_s", ROUND_FORM, "0"));
        }
        let rules = RulesConfig {
            buy: seconds("buy_s", t.buy_s, d.rules.buy)?,
            round,
            round_end: seconds("round_end_s", t.round_end_s, d.rules.round_end)?,
            rounds: match ranged("rounds", t.rounds, 1, 255)? {
                None => d.rules.rounds,
                Some(n) => NonZeroU8::new(n as u8).expect("checked from 1"),
            },
            max_health_hp: match ranged("max_health_hp", t.max_health_hp, 1, 65_535)? {
                None => d.rules.max_health_hp,
                Some(hp) => NonZeroU16::new(hp as u16).expect("checked from 1"),
            },
            ..d.rules
        };
        let pose_every = match ranged("pose_every", t.pose_every, 1, 32)? {
            None => d.pose_every,
            Some(n) => NonZeroU8::new(n as u8).expect("checked from 1"),
        };
        let fow_every = match ranged("fow_every", t.fow_every, 1, 16)? {
            None => d.fow_every,
            Some(n) => NonZeroU8::new(n as u8).expect("checked from 1"),
        };
        let cap_ms = MAX_REWIND_CAP.as_millis() as i64;
        let max_rewind = match ranged("max_rewind_ms", t.max_rewind_ms, 0, cap_ms)? {
            None => d.max_rewind,
            Some(ms) => Duration::from_millis(ms as u64),
        };
        let rate_by_distance = RateByDistance {
            halve_every_m: match t.rate_halves_every_m {
                None => d.rate_by_distance.halve_every_m,
                Some(m) if m <= 10_000.0 && RateByDistance::halve_every_m_ok(m as f32) => m as f32,
                Some(m) => {
                    return Err(ConfigError::new(
                        "rate_halves_every_m",
                        form("rate_halves_every_m"),
                        m,
                    ))
                }
            },
            slowest_every_ticks: match t.rate_slowest_every_ticks {
                None => d.rate_by_distance.slowest_every_ticks,
                Some(n) if u32::try_from(n).is_ok_and(RateByDistance::slowest_every_ticks_ok) => {
                    n as u32
                }
                Some(n) => {
                    let key = "rate_slowest_every_ticks";
                    return Err(ConfigError::new(key, form(key), n));
                }
            },
        };
        debug_assert!(rate_by_distance.is_valid());
        Ok(ShooterConfig {
            map,
            rules,
            pose_every,
            fow_every,
            max_rewind,
            rate_by_distance,
        })
    }
}

/// What `round_s` takes.
const ROUND_FORM: &str = "seconds, more than 0 and at most 86400";
/// What the other seconds keys take.
const SECONDS_FORM: &str = "seconds from 0 to 86400";

/// Each key and the form it takes, as a refusal states it.
const FORMS: [(&str, &str); 11] = [
    ("map", MAP_FORM),
    ("buy_s", SECONDS_FORM),
    ("round_s", ROUND_FORM),
    ("round_end_s", SECONDS_FORM),
    ("rounds", "an integer from 1 to 255"),
    ("max_health_hp", "an integer from 1 to 65535"),
    ("pose_every", "an integer from 1 to 32 (ticks)"),
    ("fow_every", "an integer from 1 to 16 (ticks)"),
    ("max_rewind_ms", "milliseconds from 0 to 1000"),
    (
        "rate_halves_every_m",
        "metres, more than 0 and at most 10000",
    ),
    (
        "rate_slowest_every_ticks",
        "1, 2, 4, 8 or 16 (ticks; 1: every tick)",
    ),
];

/// The form `key` takes, from [`FORMS`].
fn form(key: &str) -> &'static str {
    FORMS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or("the form the module documentation gives", |(_, f)| f)
}

/// The table as written: every key optional, no other key allowed. Integers are read as
/// `i64` whatever their range, so a value out of range is refused with the key's form
/// ([`FORMS`]) rather than serde's "expected u8".
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    map: Option<String>,
    buy_s: Option<f64>,
    round_s: Option<f64>,
    round_end_s: Option<f64>,
    rounds: Option<i64>,
    max_health_hp: Option<i64>,
    pose_every: Option<i64>,
    fow_every: Option<i64>,
    max_rewind_ms: Option<i64>,
    rate_halves_every_m: Option<f64>,
    rate_slowest_every_ticks: Option<i64>,
}

fn seconds(key: &str, value: Option<f64>, default: Duration) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Ok(Duration::from_secs_f64(v)),
        Some(v) => Err(ConfigError::new(key, SECONDS_FORM, v)),
    }
}

/// `value` when it is in `lo..=hi`; out of range, a refusal of `key` with its form.
fn ranged(key: &str, value: Option<i64>, lo: i64, hi: i64) -> Result<Option<i64>, ConfigError> {
    match value {
        Some(v) if !(lo..=hi).contains(&v) => Err(ConfigError::new(key, form(key), v)),
        v => Ok(v),
    }
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
        assert_eq!(
            c.rate_by_distance,
            RateByDistance::EVERY_TICK,
            "off unless set"
        );
        let w = c.world(10, 64);
        assert_eq!((w.players, w.tick_hz, w.map), (10, 64, BuiltinMap::Flat2km));
        let r = read(r#"{"rate_halves_every_m": 40, "rate_slowest_every_ticks": 8}"#).unwrap();
        let want = RateByDistance {
            halve_every_m: 40.0,
            slowest_every_ticks: 8,
        };
        assert_eq!(r.rate_by_distance, want);
    }

    #[test]
    fn bad_keys_are_named_with_the_form_they_take() {
        for (json, says) in [
            (
                r#"{"map": "dust2"}"#,
                r#"map: expected a built-in map: "arena" or "flat2km", got "dust2""#,
            ),
            (
                r#"{"map": 3}"#,
                r#"map: expected a built-in map: "arena" or "flat2km", got integer `3`"#,
            ),
            (
                r#"{"rounds": 0}"#,
                "rounds: expected an integer from 1 to 255, got 0",
            ),
            (
                r#"{"rate_slowest_every_ticks": 3}"#,
                "rate_slowest_every_ticks: expected 1, 2, 4, 8 or 16 (ticks; 1: every tick), got 3",
            ),
            (
                r#"{"rate_halves_every_m": 0}"#,
                "rate_halves_every_m: expected metres, more than 0 and at most 10000, got 0",
            ),
            (
                r#"{"rate_halves_every_m": "far"}"#,
                r#"rate_halves_every_m: expected metres, more than 0 and at most 10000, got string "far""#,
            ),
            (
                r#"{"rounds": 256}"#,
                "rounds: expected an integer from 1 to 255, got 256",
            ),
            (
                r#"{"rounds": 300}"#,
                "rounds: expected an integer from 1 to 255, got 300",
            ),
            (
                r#"{"rounds": -3}"#,
                "rounds: expected an integer from 1 to 255, got -3",
            ),
            (
                r#"{"rounds": 2.5}"#,
                "rounds: expected an integer from 1 to 255, got floating point `2.5`",
            ),
            (
                r#"{"rounds": "five"}"#,
                r#"rounds: expected an integer from 1 to 255, got string "five""#,
            ),
            (
                r#"{"round_s": 0}"#,
                "round_s: expected seconds, more than 0 and at most 86400, got 0",
            ),
            (
                r#"{"round_s": "long"}"#,
                r#"round_s: expected seconds, more than 0 and at most 86400, got string "long""#,
            ),
            (
                r#"{"buy_s": -1}"#,
                "buy_s: expected seconds from 0 to 86400, got -1",
            ),
            (
                r#"{"round_end_s": true}"#,
                "round_end_s: expected seconds from 0 to 86400, got boolean `true`",
            ),
            (
                r#"{"pose_every": 33}"#,
                "pose_every: expected an integer from 1 to 32 (ticks), got 33",
            ),
            (
                r#"{"pose_every": 300}"#,
                "pose_every: expected an integer from 1 to 32 (ticks), got 300",
            ),
            (
                r#"{"fow_every": 0}"#,
                "fow_every: expected an integer from 1 to 16 (ticks), got 0",
            ),
            (
                r#"{"fow_every": 256}"#,
                "fow_every: expected an integer from 1 to 16 (ticks), got 256",
            ),
            (
                r#"{"max_rewind_ms": 1001}"#,
                "max_rewind_ms: expected milliseconds from 0 to 1000, got 1001",
            ),
            (
                r#"{"max_rewind_ms": -1}"#,
                "max_rewind_ms: expected milliseconds from 0 to 1000, got -1",
            ),
            (
                r#"{"max_health_hp": 0}"#,
                "max_health_hp: expected an integer from 1 to 65535, got 0",
            ),
            (
                r#"{"max_health_hp": 70000}"#,
                "max_health_hp: expected an integer from 1 to 65535, got 70000",
            ),
        ] {
            assert_eq!(read(json).unwrap_err().to_string(), says, "{json}");
        }
        let e = read(r#"{"players": 3}"#).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.got.as_str()),
            ("players", "an unknown key")
        );
        assert!(
            e.expected.starts_with("one of `map`, `buy_s`")
                && e.expected.contains("`max_rewind_ms`"),
            "{e}"
        );
    }

    #[test]
    fn the_ends_of_each_range_are_taken() {
        let c = read(
            r#"{"rounds": 255, "pose_every": 32, "fow_every": 16, "max_rewind_ms": 1000,
                "max_health_hp": 65535}"#,
        )
        .unwrap();
        assert_eq!(c.rules.rounds.get(), 255);
        assert_eq!((c.pose_every.get(), c.fow_every.get()), (32, 16));
        assert_eq!(c.max_rewind, Duration::from_millis(1000));
        assert_eq!(c.rules.max_health_hp.get(), 65535);
        let c = read(
            r#"{"rounds": 1, "pose_every": 1, "fow_every": 1, "max_rewind_ms": 0,
                "max_health_hp": 1}"#,
        )
        .unwrap();
        assert_eq!(c.rules.rounds.get(), 1);
        assert_eq!(c.max_rewind, Duration::ZERO);
        assert_eq!(c.rules.max_health_hp.get(), 1);
    }
}
