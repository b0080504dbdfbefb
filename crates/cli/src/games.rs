//! The games this binary hosts, and the flags that name them.

use clap::builder::PossibleValuesParser;

/// Registers the built-in games with the server runtime; the first is the default.
pub fn register() {
    tickforge_server::games::register::<tickforge_shooter::Shooter>();
    tickforge_server::games::register::<tickforge_ctf::Ctf>();
}

/// `--game`'s parser: the registered games' names, so `--help` lists them and a name the
/// binary lacks is refused with the list.
pub fn parser() -> PossibleValuesParser {
    register();
    let values: Vec<clap::builder::PossibleValue> = tickforge_server::games::all()
        .into_iter()
        .map(|g| clap::builder::PossibleValue::new(g.name()).help(g.about()))
        .collect();
    PossibleValuesParser::new(values)
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
