//! What a matchmaker may ask for in `POST /matches`, and how its JSON is checked.
//!
//! ```json
//! {"players": 10, "tick_hz": 128, "game": {"name": "shooter", "map": "arena", "rounds": 3}}
//! ```
//!
//! Every field is optional. `game` names the game (absent: the server's) and carries the
//! game's own settings; for the server's game they are laid over its `[game]` table, for
//! another game they stand alone. The game checks them before any worker is asked, so a bad
//! key is a 400 that names it.

use std::sync::Arc;

use serde::Deserialize;
use tickforge_api::ConfigTable;

use crate::config::GameChoice;
use crate::games::{GameError, MatchMaker};

/// Most seats one match takes whatever the game; a game may allow fewer.
pub const MAX_PLAYERS: u16 = tickforge_api::MAX_ENTITIES as u16;
/// Highest tick rate a match may ask for; the same bound as `tick_hz` in the config.
pub const MAX_TICK_HZ: u32 = 1000;

/// A match the matchmaker asked for, checked.
#[derive(Clone, Debug)]
pub struct MatchSpec {
    /// Seats, one connect token each (1 to the game's most).
    pub players: u16,
    /// Ticks per second (1 to [`MAX_TICK_HZ`]); a worker may refuse a rate it does not run.
    pub tick_hz: u32,
    /// The game and its settings, as asked for (for the reply).
    pub game: GameChoice,
    /// What makes the match: the game, configured and checked.
    pub maker: Arc<dyn MatchMaker>,
}

/// What a server's matches are unless a body says otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecDefaults {
    /// Seats per match (`players_per_match`).
    pub players: u16,
    /// The tick rate.
    pub tick_hz: u32,
    /// The server's game and its `[game]` table.
    pub game: GameChoice,
}

impl Default for SpecDefaults {
    /// Ten seats at 128 Hz of the binary's first game with its defaults.
    fn default() -> Self {
        SpecDefaults {
            players: 10,
            tick_hz: 128,
            game: GameChoice::default(),
        }
    }
}

#[cfg(test)]
impl MatchSpec {
    /// The default match of the test game, for tests.
    pub(crate) fn walk_default() -> MatchSpec {
        crate::testing::register_walk();
        MatchSpec::from_json(b"", &SpecDefaults::default()).expect("the test game's defaults")
    }
}

/// Why a `POST /matches` body was refused; the text is sent back with the 400.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Not a JSON object of the known fields (the text names the first problem).
    #[error("expected a JSON object with optional players, tick_hz, game: {0}")]
    Json(String),
    /// A field's value is outside what a match can be.
    #[error("{field}: expected {expected}, got {got}")]
    OutOfRange {
        /// The JSON field.
        field: &'static str,
        /// What it may be.
        expected: String,
        /// What the body said.
        got: String,
    },
    /// The game is not in this binary, or refused one of its settings.
    #[error("{0}")]
    Game(GameError),
}

/// The body as sent: every field optional, nothing else allowed. Numbers are read wide so
/// that a value too big for the field gets our message, not the JSON parser's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MatchRequest {
    players: Option<u64>,
    tick_hz: Option<u64>,
    game: Option<ConfigTable>,
}

impl MatchSpec {
    /// Reads a `POST /matches` body. An empty body (or `{}`) is the server's default match.
    pub fn from_json(body: &[u8], defaults: &SpecDefaults) -> Result<MatchSpec, SpecError> {
        let req = if body.iter().all(u8::is_ascii_whitespace) {
            MatchRequest {
                players: None,
                tick_hz: None,
                game: None,
            }
        } else {
            serde_json::from_slice(body).map_err(|e| {
                let text = e.to_string();
                // The shooter's keys lived at the top level before games had their own.
                if text.contains("unknown field `map`") || text.contains("unknown field `rounds`") {
                    SpecError::Json(format!(
                        "{text} (a game's settings go in the `game` object)"
                    ))
                } else {
                    SpecError::Json(text)
                }
            })?
        };
        let asked = GameChoice::from_table(req.game.unwrap_or_default());
        // The server's game by its name, when its table names none: the binary's first.
        let server_game = (defaults.game.name.clone())
            .or_else(|| crate::games::find(None).ok().map(|g| g.name().to_string()));
        let same_game = asked.name.is_none() || asked.name == server_game;
        let game = if same_game {
            let mut table = defaults.game.table.clone();
            table.extend(asked.table);
            GameChoice {
                name: asked.name.or(defaults.game.name.clone()),
                table,
            }
        } else {
            asked
        };
        let maker = game.maker().map_err(SpecError::Game)?;
        let max = maker.max_seats().min(MAX_PLAYERS);
        let players = range(
            req.players,
            defaults.players.into(),
            "players",
            format!("1 to {max} (the most game `{}` takes)", maker.game()),
            1,
            max.into(),
        )?;
        let tick_hz = range(
            req.tick_hz,
            defaults.tick_hz.into(),
            "tick_hz",
            format!("1 to {MAX_TICK_HZ}"),
            1,
            MAX_TICK_HZ.into(),
        )?;
        Ok(MatchSpec {
            // The ranges above fit each field's type.
            players: players as u16,
            tick_hz: tick_hz as u32,
            game,
            maker,
        })
    }
}

fn range(
    value: Option<u64>,
    default: u64,
    field: &'static str,
    expected: String,
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

    fn spec(body: &str) -> Result<MatchSpec, SpecError> {
        crate::testing::register_walk();
        MatchSpec::from_json(body.as_bytes(), &SpecDefaults::default())
    }

    #[test]
    fn an_empty_body_is_the_servers_default_match() {
        for body in ["", " \n", "{}", r#"{"game": {}}"#] {
            let s = spec(body).unwrap();
            assert_eq!(
                (s.players, s.tick_hz, s.maker.game()),
                (10, 128, "walk"),
                "{body}"
            );
        }
    }

    #[test]
    fn the_game_object_is_checked_by_the_game_over_the_servers_table() {
        let defaults = SpecDefaults {
            game: GameChoice::from_table(
                serde_json::json!({"ticks": 500, "every": 8})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
            ..SpecDefaults::default()
        };
        crate::testing::register_walk();
        let s = MatchSpec::from_json(
            br#"{"players": 100, "tick_hz": 64, "game": {"every": 16}}"#,
            &defaults,
        )
        .unwrap();
        assert_eq!((s.players, s.tick_hz), (100, 64));
        assert_eq!(s.game.table["ticks"], 500, "the server's key kept");
        assert_eq!(s.game.table["every"], 16, "the body's key wins");
    }

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        let cases: [(&str, &str); 9] = [
            ("{", "EOF"),
            ("[1]", "expected a JSON object"),
            (r#"{"player": 3}"#, "unknown field `player`"),
            (
                r#"{"players": 0}"#,
                "players: expected 1 to 100 (the most game `walk` takes), got 0",
            ),
            (r#"{"players": 101}"#, "players: expected 1 to 100"),
            (r#"{"tick_hz": 0}"#, "tick_hz: expected 1 to 1000, got 0"),
            (
                r#"{"map": "arena"}"#,
                "a game's settings go in the `game` object",
            ),
            (
                r#"{"game": {"every": 0}}"#,
                "game `walk`: every: expected 1 to 65535, got 0",
            ),
            (
                r#"{"game": {"name": "chess"}}"#,
                "game `chess`: this binary has no such game; it has: walk",
            ),
        ];
        for (body, reason) in cases {
            let err = spec(body).unwrap_err().to_string();
            assert!(err.contains(reason), "{body}: {err}");
        }
    }
}
