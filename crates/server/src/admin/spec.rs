//! What a matchmaker may ask for in `POST /matches`, and how its JSON is checked.

use std::num::NonZeroU8;

use serde::Deserialize;
use tickforge_game::rules::RulesConfig;
use tickforge_game::BuiltinMap;

/// Most players one match takes; the same bound as `players_per_match` in the config.
pub const MAX_PLAYERS: u8 = 128;
/// Highest tick rate a match may ask for; the same bound as `tick_hz` in the config.
pub const MAX_TICK_HZ: u32 = 1000;

/// A match the matchmaker asked for, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatchSpec {
    /// The built-in map.
    pub map: BuiltinMap,
    /// Players, one connect token each (1 to [`MAX_PLAYERS`]).
    pub players: u8,
    /// Rounds in the match (first to a majority).
    pub rounds: NonZeroU8,
    /// Ticks per second (1 to [`MAX_TICK_HZ`]); a worker may refuse a rate it does not run.
    pub tick_hz: u32,
}

impl Default for MatchSpec {
    /// A 5-v-5 on `arena` with the default rules' rounds and tick rate.
    fn default() -> Self {
        let rules = RulesConfig::default();
        MatchSpec {
            map: BuiltinMap::Arena,
            players: 10, // 5-v-5
            rounds: rules.rounds,
            tick_hz: rules.tick_hz.get(),
        }
    }
}

/// Why a `POST /matches` body was refused; the text is sent back with the 400.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Not a JSON object of the known fields (the text names the first problem).
    #[error("expected a JSON object with optional map, players, rounds, tick_hz: {0}")]
    Json(String),
    /// A field's value is outside what a match can be.
    #[error("{field}: expected {expected}, got {got}")]
    OutOfRange {
        /// The JSON field.
        field: &'static str,
        /// What it may be.
        expected: &'static str,
        /// What the body said.
        got: String,
    },
}

/// The body as sent: every field optional, nothing else allowed. Numbers are read wide so
/// that a value too big for the field gets our message, not the JSON parser's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MatchRequest {
    map: Option<String>,
    players: Option<u64>,
    rounds: Option<u64>,
    tick_hz: Option<u64>,
}

impl MatchSpec {
    /// Reads a `POST /matches` body. An empty body (or `{}`) is the default match.
    pub fn from_json(body: &[u8]) -> Result<MatchSpec, SpecError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(MatchSpec::default());
        }
        let req: MatchRequest =
            serde_json::from_slice(body).map_err(|e| SpecError::Json(e.to_string()))?;
        let d = MatchSpec::default();
        let map = match req.map {
            None => d.map,
            Some(name) => BuiltinMap::from_name(&name).ok_or(SpecError::OutOfRange {
                field: "map",
                expected: "a built-in map: arena or flat2km",
                got: format!("{name:?}"),
            })?,
        };
        let players = range(
            req.players,
            d.players.into(),
            "players",
            "1 to 128",
            1,
            MAX_PLAYERS.into(),
        )?;
        let rounds = range(
            req.rounds,
            d.rounds.get().into(),
            "rounds",
            "1 to 255",
            1,
            255,
        )?;
        let tick_hz = range(
            req.tick_hz,
            d.tick_hz.into(),
            "tick_hz",
            "1 to 1000",
            1,
            1000,
        )?;
        Ok(MatchSpec {
            map,
            // The ranges above fit each field's type.
            players: players as u8,
            rounds: NonZeroU8::new(rounds as u8).unwrap_or(d.rounds),
            tick_hz: tick_hz as u32,
        })
    }
}

fn range(
    value: Option<u64>,
    default: u64,
    field: &'static str,
    expected: &'static str,
    min: u64,
    max: u64,
) -> Result<u64, SpecError> {
    match value {
        None => Ok(default),
        Some(v) if (min..=max).contains(&v) => Ok(v),
        Some(v) => Err(SpecError::OutOfRange {
            field,
            expected,
            got: v.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_body_is_a_ten_player_match() {
        for body in ["", " \n", "{}", r#"{"map": null}"#] {
            let spec = MatchSpec::from_json(body.as_bytes()).unwrap();
            assert_eq!(spec, MatchSpec::default(), "{body}");
        }
        assert_eq!(MatchSpec::default().players, 10);
        assert_eq!(MatchSpec::default().tick_hz, 128);
    }

    #[test]
    fn fields_are_read() {
        let spec = MatchSpec::from_json(
            br#"{"map": "flat2km", "players": 100, "rounds": 24, "tick_hz": 64}"#,
        )
        .unwrap();
        assert_eq!(spec.map, BuiltinMap::Flat2km);
        assert_eq!(spec.players, 100);
        assert_eq!(spec.rounds.get(), 24);
        assert_eq!(spec.tick_hz, 64);
    }

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        let cases: [(&str, &str); 9] = [
            ("{", "EOF"),
            ("[1]", "expected a JSON object"),
            (r#"{"player": 3}"#, "unknown field `player`"),
            (r#"{"players": 0}"#, "players: expected 1 to 128, got 0"),
            (r#"{"players": 129}"#, "players: expected 1 to 128, got 129"),
            (r#"{"players": -1}"#, "invalid value: integer `-1`"),
            (r#"{"rounds": 256}"#, "rounds: expected 1 to 255, got 256"),
            (r#"{"tick_hz": 0}"#, "tick_hz: expected 1 to 1000, got 0"),
            (r#"{"map": "dust2"}"#, "map: expected a built-in map"),
        ];
        for (body, reason) in cases {
            let err = MatchSpec::from_json(body.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(err.contains(reason), "{body}: {err}");
        }
    }
}
