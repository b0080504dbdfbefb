//! The games this process can host, and the settings each match of one is made with.
//!
//! A binary registers its games once at start ([`register`]): the `tickforge` binary the
//! built-in ones, a studio's binary its own ([`crate::run`] does it). After that, a game is
//! named by its [`Game::NAME`] in the server's `[game]` table (`name = "..."`), in
//! `serve --game`, and in a `POST /matches` body's `game` object; the rest of that table or
//! object is the game's own settings, which the game checks ([`Game::configure`]) before
//! anything starts. A name the binary does not have is refused with the list of those it
//! has.

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use tickforge_api::{ConfigTable, Game, MatchSetup};
use tickforge_proto::MatchId;

use crate::game_match::{HostedMatch, Match};

/// A game this binary can host, with its type erased.
pub trait GameKind: Send + Sync {
    /// [`Game::NAME`].
    fn name(&self) -> &'static str;
    /// [`Game::ABOUT`].
    fn about(&self) -> &'static str;
    /// [`Game::MAX_SEATS`].
    fn max_seats(&self) -> u16;
    /// Checks `table` with [`Game::configure`] and returns what makes matches with it.
    fn configure(&self, table: &ConfigTable) -> Result<Arc<dyn MatchMaker>, GameError>;
}

/// Makes the matches of one game with one checked configuration.
pub trait MatchMaker: Send + Sync + fmt::Debug {
    /// The game's name.
    fn game(&self) -> &'static str;
    /// The most seats a match may have.
    fn max_seats(&self) -> u16;
    /// A new match whose tick 0 is due at `start`.
    fn make(&self, id: MatchId, setup: MatchSetup, start: Instant) -> Box<dyn HostedMatch>;
    /// The settings the matches play with, every key filled ([`Game::settings`]).
    fn settings(&self) -> ConfigTable;
    /// How often replication sends an entity by its distance ([`Game::rate_by_distance`]).
    fn rate_by_distance(&self) -> tickforge_api::RateByDistance;
}

struct Kind<G>(PhantomData<fn() -> G>);

struct Maker<G: Game> {
    config: Arc<G::Config>,
}

impl<G: Game> fmt::Debug for Maker<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MatchMaker")
            .field("game", &G::NAME)
            .field("config", &self.config)
            .finish()
    }
}

impl<G: Game> GameKind for Kind<G> {
    fn name(&self) -> &'static str {
        G::NAME
    }

    fn about(&self) -> &'static str {
        G::ABOUT
    }

    fn max_seats(&self) -> u16 {
        G::MAX_SEATS
    }

    fn configure(&self, table: &ConfigTable) -> Result<Arc<dyn MatchMaker>, GameError> {
        let config = G::configure(table).map_err(|error| GameError::Config {
            game: G::NAME,
            error,
        })?;
        let rate = G::rate_by_distance(&config);
        if !rate.is_valid() {
            let error = tickforge_api::ConfigError::new(
                "rate_by_distance",
                "halve_every_m finite and above 0, slowest_every_ticks 1, 2, 4, 8 or 16",
                format!("{rate:?}"),
            );
            return Err(GameError::Config {
                game: G::NAME,
                error,
            });
        }
        Ok(Arc::new(Maker::<G> {
            config: Arc::new(config),
        }))
    }
}

impl<G: Game> MatchMaker for Maker<G> {
    fn game(&self) -> &'static str {
        G::NAME
    }

    /// [`Game::MAX_SEATS`], or fewer when the game's entities for that many seats would
    /// not fit replication's [`MAX_ENTITIES`](tickforge_api::MAX_ENTITIES) network ids.
    fn max_seats(&self) -> u16 {
        most_seats(G::MAX_SEATS, |seats| {
            usize::from(G::max_entities(&self.config, seats)) <= tickforge_api::MAX_ENTITIES
        })
    }

    fn make(&self, id: MatchId, setup: MatchSetup, start: Instant) -> Box<dyn HostedMatch> {
        Box::new(Match::<G>::new(id, self.config.clone(), setup, start))
    }

    fn settings(&self) -> ConfigTable {
        G::settings(&self.config)
    }

    fn rate_by_distance(&self) -> tickforge_api::RateByDistance {
        G::rate_by_distance(&self.config)
    }
}

/// The most seats up to `max` that `fits`, assuming (as any sane game) that more seats never
/// need fewer entities: a binary search, so a game's `max_entities` is asked 16 times.
fn most_seats(max: u16, fits: impl Fn(u16) -> bool) -> u16 {
    let (mut lo, mut hi) = (0u16, max);
    while lo < hi {
        let mid = hi - (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Why a game could not be chosen or configured.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GameError {
    /// The binary has no game of that name.
    #[error("game `{name}`: this binary has no such game; it has: {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names it has, comma-separated.
        known: String,
    },
    /// The binary has no game at all (a library user forgot [`register`]).
    #[error("no game is registered in this binary")]
    None,
    /// The game refused a setting.
    #[error("game `{game}`: {error}")]
    Config {
        /// The game.
        game: &'static str,
        /// What it refused: the key, the form it takes, what it got.
        error: tickforge_api::ConfigError,
    },
}

fn registry() -> &'static RwLock<Vec<&'static dyn GameKind>> {
    static GAMES: OnceLock<RwLock<Vec<&'static dyn GameKind>>> = OnceLock::new();
    GAMES.get_or_init(|| RwLock::new(Vec::new()))
}

/// Makes game `G` available to this process. Registering a game twice is harmless; the
/// first game registered is the default when a configuration names none.
///
/// # Panics
/// If [`Game::NAME`] is not lowercase ASCII letters, digits and `-` (the name goes on every
/// results line and in flags): a mistake in the binary, caught before it serves.
pub fn register<G: Game>() {
    assert!(
        tickforge_api::sim::result_line::is_game_name(G::NAME),
        "game name {:?}: expected lowercase ASCII letters, digits and '-'",
        G::NAME
    );
    let mut games = registry().write().unwrap_or_else(|e| e.into_inner());
    if games.iter().any(|g| g.name() == G::NAME) {
        return;
    }
    games.push(Box::leak(Box::new(Kind::<G>(PhantomData))));
}

/// The registered games, in the order registered.
pub fn all() -> Vec<&'static dyn GameKind> {
    registry().read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The registered game named `name`, or the default (the first registered) for `None`.
pub fn find(name: Option<&str>) -> Result<&'static dyn GameKind, GameError> {
    let games = all();
    match name {
        None => games.first().copied().ok_or(GameError::None),
        Some(name) => games
            .iter()
            .copied()
            .find(|g| g.name() == name)
            .ok_or_else(|| GameError::Unknown {
                name: name.to_string(),
                known: names(),
            }),
    }
}

/// The registered games' names, comma-separated: what an error lists.
pub fn names() -> String {
    let games = all();
    if games.is_empty() {
        return "none".to_string();
    }
    games
        .iter()
        .map(|g| g.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a game choice: the game `name` names (the default for `None`) configured with
/// `table`.
pub fn configure(
    name: Option<&str>,
    table: &ConfigTable,
) -> Result<Arc<dyn MatchMaker>, GameError> {
    find(name)?.configure(table)
}

/// `--game`'s parser: the registered games' names, so `--help` lists them (with each one's
/// [`Game::ABOUT`]) and a name the binary lacks is refused with the list. Register the
/// games before the command line is parsed.
pub fn parser() -> clap::builder::PossibleValuesParser {
    let values: Vec<clap::builder::PossibleValue> = all()
        .into_iter()
        .map(|g| clap::builder::PossibleValue::new(g.name()).help(g.about()))
        .collect();
    clap::builder::PossibleValuesParser::new(values)
}

/// Reads a `--game-set KEY=VALUE`: the value as JSON when it parses, else as a string.
pub fn parse_setting(text: &str) -> Result<(String, serde_json::Value), String> {
    let (key, value) = text
        .split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("expected KEY=VALUE, got {text:?}"))?;
    let value = serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::from(value));
    Ok((key.to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_games_seats_stop_where_its_entities_would_not_fit() {
        let limit = tickforge_api::MAX_ENTITIES;
        let bound = limit as u16;
        // Two flags beside the players (ctf): two seats fewer than the ids.
        let flags = |s: u16| usize::from(s) + 2 <= limit;
        assert_eq!(usize::from(most_seats(bound, flags)), limit - 2);
        // Within the game's own bound, the bound.
        assert_eq!(most_seats(128, flags), 128);
        // A projectile pool of eight a player.
        assert_eq!(
            usize::from(most_seats(bound, |s| usize::from(s) * 9 <= limit)),
            limit / 9
        );
        assert_eq!(most_seats(bound, |_| false), 0);
    }

    /// A game whose rate by distance is its setting, and which plays nothing.
    struct Rated;

    static RATED_SCHEMA: tickforge_api::Schema =
        match tickforge_api::Schema::new(&[tickforge_api::Field::new(
            "n",
            tickforge_api::Coding::Scalar,
            tickforge_api::Quantum::Whole,
        )]) {
            Ok(s) => s,
            Err(_) => panic!("a valid table"),
        };

    impl Game for Rated {
        type Config = tickforge_api::RateByDistance;
        type Input = ();
        const NAME: &'static str = "rated";
        const ABOUT: &'static str = "a rate by distance and nothing else";

        fn schema() -> &'static tickforge_api::Schema {
            &RATED_SCHEMA
        }
        fn configure(table: &ConfigTable) -> Result<Self::Config, tickforge_api::ConfigError> {
            let number = |key: &str, default: f64| {
                table.get(key).and_then(|v| v.as_f64()).unwrap_or(default)
            };
            Ok(tickforge_api::RateByDistance {
                halve_every_m: number("halve_every_m", 50.0) as f32,
                slowest_every_ticks: number("slowest_every_ticks", 1.0) as u32,
            })
        }
        fn rate_by_distance(config: &Self::Config) -> tickforge_api::RateByDistance {
            *config
        }
        fn max_entities(_: &Self::Config, _: u16) -> u16 {
            1
        }
        fn new(_: &Self::Config, _: &MatchSetup, _: &mut tickforge_api::Entities) -> Rated {
            Rated
        }
        fn decode_input(_: &[u8]) -> Option<()> {
            Some(())
        }
        fn apply_input(&mut self, _: tickforge_api::Seat, _: &(), _: tickforge_api::InputInfo) {}
        fn step(&mut self, _: &mut tickforge_api::StepContext<'_>) {}
        fn view(&self, _: tickforge_api::Seat) -> tickforge_api::View<'_> {
            tickforge_api::View::default()
        }
        fn is_over(&self) -> bool {
            false
        }
        fn finish(&mut self) -> tickforge_api::MatchEnd {
            tickforge_api::MatchEnd::default()
        }
    }

    #[test]
    fn a_games_rate_by_distance_out_of_range_stops_it_before_any_match() {
        let kind = Kind::<Rated>(PhantomData);
        let table = |pairs: &[(&str, f64)]| -> ConfigTable {
            (pairs.iter())
                .map(|&(k, v)| (k.to_string(), serde_json::Value::from(v)))
                .collect()
        };
        // In range: configured, and its matches get that rate.
        let maker = kind
            .configure(&table(&[
                ("halve_every_m", 40.0),
                ("slowest_every_ticks", 8.0),
            ]))
            .expect("a valid rate");
        assert_eq!(maker.rate_by_distance().slowest_every_ticks, 8);
        assert_eq!(maker.rate_by_distance().halve_every_m, 40.0);
        // Out of range, either field: refused, naming the game and the key.
        for bad in [
            table(&[("slowest_every_ticks", 3.0)]),
            table(&[("slowest_every_ticks", 32.0)]),
            table(&[("halve_every_m", 0.0), ("slowest_every_ticks", 4.0)]),
            table(&[("halve_every_m", -5.0), ("slowest_every_ticks", 2.0)]),
        ] {
            match kind.configure(&bad) {
                Err(GameError::Config { game, error }) => {
                    assert_eq!(game, "rated");
                    assert_eq!(error.key, "rate_by_distance", "{error}");
                }
                other => panic!("{bad:?} was not refused: {other:?}"),
            }
        }
    }

    #[test]
    fn settings_read_json_or_fall_back_to_a_string() {
        assert_eq!(parse_setting("rounds=3"), Ok(("rounds".into(), 3.into())));
        assert_eq!(
            parse_setting("map=arena"),
            Ok(("map".into(), "arena".into()))
        );
        assert_eq!(parse_setting("x=\"1\""), Ok(("x".into(), "1".into())));
        assert!(parse_setting("=3").is_err() && parse_setting("rounds").is_err());
    }
}
