//! A game's settings as the runtime hands them over, and the error that names a bad key.
//!
//! The server reads the `[game]` table of its TOML file and the `game` object of a
//! `POST /matches` body into one form, a JSON object ([`ConfigTable`]), and gives it to
//! [`Game::configure`](crate::Game::configure). [`ConfigTable::read`] turns it into a serde
//! type and says which key was wrong and what it expected.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// A game's settings: key to value, as a JSON object (a TOML table is converted).
pub type ConfigTable = Map<String, Value>;

/// A setting a game refuses: the key, the form it expects, and what it was given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: expected {expected}, got {got}")]
pub struct ConfigError {
    /// The key, as written in the table (`rules.rounds` for a nested one).
    pub key: String,
    /// The form it takes: "1 to 255", "a built-in map: arena or flat2km".
    pub expected: String,
    /// What the table held, or "an unknown key".
    pub got: String,
}

impl ConfigError {
    /// A refusal of `key`.
    pub fn new(
        key: impl Into<String>,
        expected: impl Into<String>,
        got: impl std::fmt::Display,
    ) -> ConfigError {
        ConfigError {
            key: key.into(),
            expected: expected.into(),
            got: got.to_string(),
        }
    }
}

/// Reading a table into a game's settings type.
pub trait ReadTable {
    /// Deserializes the table into `T` (a `#[serde(deny_unknown_fields)]` struct of
    /// optional fields, typically); an unknown key or a value of the wrong type is a
    /// [`ConfigError`] naming the key.
    fn read<T: DeserializeOwned>(&self) -> Result<T, ConfigError>;
}

impl ReadTable for ConfigTable {
    fn read<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        let value = Value::Object(self.clone());
        serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            // serde's unknown-field message names the field and the ones it knows.
            if let Some(rest) = inner.strip_prefix("unknown field `") {
                let (field, known) = rest.split_once('`').unwrap_or((rest, ""));
                let known = known.trim_start_matches(", ");
                let known = known.strip_prefix("expected ").unwrap_or(known);
                // The path already ends at the unknown field.
                let key = if path == "." || path.is_empty() {
                    field.to_string()
                } else {
                    path
                };
                return ConfigError::new(key, known.to_string(), "an unknown key");
            }
            match type_or_value(&inner) {
                Some((got, expected)) => ConfigError::new(path, expected, got),
                None => ConfigError::new(path, "the form its documentation gives", inner),
            }
        })
    }
}

/// Splits serde's "invalid type: A, expected B" and "invalid value: A, expected B" into
/// `(A, B)`: what the table held and the form the field takes.
///
/// The split is at the last ", expected ": A may be a string the table held (quoted,
/// and free to contain the words), while B comes from the settings type.
fn type_or_value(message: &str) -> Option<(&str, &str)> {
    let rest = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))?;
    let (got, expected) = rest.rsplit_once(", expected ")?;
    (!got.is_empty() && !expected.is_empty()).then_some((got, expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Settings {
        rounds: Option<u8>,
        map: Option<String>,
    }

    fn table(json: &str) -> ConfigTable {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn an_unknown_key_is_named_with_the_known_ones() {
        let e = table(r#"{"rouns": 3}"#).read::<Settings>().unwrap_err();
        assert_eq!(e.key, "rouns");
        assert!(
            e.expected.contains("`rounds`") && e.expected.contains("`map`"),
            "{e}"
        );
        assert_eq!(e.got, "an unknown key");
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Nested {
        rules: Option<Settings>,
    }

    #[test]
    fn a_value_out_of_range_gives_the_form_and_what_was_held() {
        let e = table(r#"{"rounds": 300}"#).read::<Settings>().unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.expected.as_str(), e.got.as_str()),
            ("rounds", "u8", "integer `300`")
        );
        assert_eq!(e.to_string(), "rounds: expected u8, got integer `300`");
        let e = table(r#"{"rounds": -1}"#).read::<Settings>().unwrap_err();
        assert_eq!(e.to_string(), "rounds: expected u8, got integer `-1`");
    }

    #[test]
    fn a_value_of_the_wrong_type_gives_the_form_and_what_was_held() {
        let e = table(r#"{"map": 1}"#).read::<Settings>().unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.expected.as_str(), e.got.as_str()),
            ("map", "a string", "integer `1`")
        );
        let e = table(r#"{"rounds": "three"}"#)
            .read::<Settings>()
            .unwrap_err();
        assert_eq!(e.to_string(), r#"rounds: expected u8, got string "three""#);
        let e = table(r#"{"rounds": 2.5}"#).read::<Settings>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "rounds: expected u8, got floating point `2.5`"
        );
    }

    #[test]
    fn a_nested_key_is_named_by_its_path() {
        let e = table(r#"{"rules": {"map": false}}"#)
            .read::<Nested>()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "rules.map: expected a string, got boolean `false`"
        );
        let e = table(r#"{"rules": 3}"#).read::<Nested>().unwrap_err();
        assert_eq!(e.key, "rules");
        assert_eq!(e.got, "integer `3`");
        assert!(e.expected.contains("Settings"), "{e}");
    }

    #[test]
    fn serde_messages_split_at_the_last_expected() {
        assert_eq!(
            type_or_value("invalid type: integer `1`, expected a string"),
            Some(("integer `1`", "a string"))
        );
        assert_eq!(
            type_or_value(r#"invalid value: string "a, expected b", expected c"#),
            Some((r#"string "a, expected b""#, "c"))
        );
        assert_eq!(type_or_value("missing field `map`"), None);
        assert_eq!(type_or_value("invalid type: integer `1`"), None);
        assert_eq!(type_or_value("invalid length 3, expected 2"), None);
    }

    #[test]
    fn another_serde_message_is_kept_whole() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Needs {
            map: String,
        }
        let e = table("{}").read::<Needs>().unwrap_err();
        assert_eq!(e.expected, "the form its documentation gives");
        assert!(e.got.contains("missing field `map`"), "{e}");
    }

    #[test]
    fn an_empty_table_reads_as_the_defaults() {
        let s = table("{}").read::<Settings>().unwrap();
        assert!(s.rounds.is_none() && s.map.is_none());
    }
}
