//! The frame of a results line: what the runtime writes around a game's result of one
//! finished match, so that one results file holds the lines of several games.
//!
//! One match is one line, so a results file is appended a line at a time and a torn write
//! (a crash mid-append) damages only its own, unterminated line. The runtime writes the
//! frame; the game writes the body, its own space-separated `key=value` tokens. Tokens are
//! separated by one space, in this order and no other:
//!
//! ```text
//! tickforge-result/3 game=shooter match=7 run=3f2a9c0d11e4b5a6 at=2026-11-25T06:31:23Z
//!   <body> check=<16 hex digits>\n
//! ```
//! (shown on two lines; it is one.)
//!
//! | token | meaning |
//! |---|---|
//! | `tickforge-result/3` | [`RESULT_TAG`], then the format version ([`VERSION`]) |
//! | `game` | the game's name: lowercase ASCII letters, digits and `-` ([`is_game_name`]) |
//! | `match` | the match's id, as the server's API returned it ([`ResultOrigin::match_id`]) |
//! | `run` | the run id of the server process that hosted it, 16 lowercase hex digits |
//! | `at` | when the match ended, UTC, RFC 3339 to the second (`YYYY-MM-DDTHH:MM:SSZ`) |
//! | body | the game's tokens, none or more ([`is_body`]); an empty body adds no token |
//! | `check` | FNV-1a 64 of every byte before ` check=`, 16 lowercase hex digits |
//!
//! Numbers are unsigned decimal. The check catches a torn last line (whose truncated number
//! would otherwise still parse) and bit rot; [`decode`] rejects either.
//!
//! Version 4 ([`COST_VERSION`], written by [`encode_with_cost`]) is version 3 with one more
//! token of the runtime's between `at` and the body: `cost=<value>`, what the match's
//! frames cost (per round and for the whole match; the server's telemetry writes and reads
//! the value: `tickforge_telemetry::rounds`). The value is non-empty and holds no space.
//!
//! ```text
//! tickforge-result/4 game=shooter match=7 run=3f2a9c0d11e4b5a6 at=2026-11-25T06:31:23Z
//!   cost=m:1280:2:95000:… <body> check=<16 hex digits>\n
//! ```
//!
//! Older lines still decode. They were all the reference shooter's ([`LEGACY_GAME`]):
//! version 2 is version 3 without `game`; version 1 is version 2 without `match`, `run` and
//! `at`, and so has no [`ResultOrigin`].

use std::fmt::{self, Write as _};
use std::str::FromStr;

/// The first token of a results line; the format version follows after a `/`.
pub const RESULT_TAG: &str = "tickforge-result";

/// The format version [`encode`] writes; [`decode`] reads it, version 4, version 2 and
/// version 1.
pub const VERSION: u32 = 3;
/// The format version [`encode_with_cost`] writes: version 3 with a `cost` token.
pub const COST_VERSION: u32 = 4;
/// Version 3 without the `game` token.
const VERSION_2: u32 = 2;
/// Version 2 without the `match`, `run` and `at` tokens.
const VERSION_1: u32 = 1;

/// The game of every version 1 and version 2 line, which name none: the reference shooter,
/// the only game that wrote them.
pub const LEGACY_GAME: &str = "shooter";

const CHECK_SEPARATOR: &str = " check=";
const CHECK_HEX_DIGITS: usize = 16;
const RUN_HEX_DIGITS: usize = 16;

/// Which match a result is of, and which server run made it and when: what the runtime adds
/// to the game's body on each line, so that a line is traced to the match the API created
/// and a restarted server's lines are told from the last run's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ResultOrigin {
    /// The match's id, as the server's API returned it.
    pub match_id: u32,
    /// The run id of the server process that hosted the match (random, one per process).
    pub run_id: u64,
    /// When the match ended, in seconds since the Unix epoch (UTC); written as RFC 3339.
    /// Times past the year 9999 are written as its last second.
    pub ended_at_unix_s: u64,
}

/// A results line whose frame [`decode`] read: its check holds and its header parses; the
/// body is the game's to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Framed<'a> {
    /// The format version the line was written in: 1, 2, 3 or 4.
    pub version: u32,
    /// The game whose result the body is; [`LEGACY_GAME`] for versions 1 and 2.
    pub game: &'a str,
    /// Which match, run and time; `None` for a version 1 line.
    pub origin: Option<ResultOrigin>,
    /// The value of the runtime's `cost` token (version 4), without `cost=`; `None` for
    /// older versions.
    pub cost: Option<&'a str>,
    /// The game's tokens, without the frame's: empty, or [`is_body`] holds.
    pub body: &'a str,
}

/// Why a results line was refused: by [`decode`] (its frame) or by a game's body reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecodeError {
    /// The line has no well-formed `check=` token at its end: a torn write or not a result.
    Unterminated,
    /// The check does not match the line: a torn write or corruption.
    Checksum,
    /// The line does not start with [`RESULT_TAG`] and a version this code reads.
    Version,
    /// A well-framed line of another game than the one reading it. [`decode`] never returns
    /// it; a game's reader does, given a line whose `game` is not its own.
    Game,
    /// The named field is missing, out of order, or its value does not parse. The frame's
    /// fields are `game`, `match`, `run`, `at` and `body` (a body with an empty token).
    Field(&'static str),
    /// Tokens follow the body's last field.
    TrailingTokens,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Unterminated => f.write_str("result line has no check token"),
            DecodeError::Checksum => f.write_str("result line fails its check"),
            DecodeError::Version => f.write_str("not a result line of a known version"),
            DecodeError::Game => f.write_str("result line is of another game"),
            DecodeError::Field(name) => write!(f, "result field `{name}` is missing or invalid"),
            DecodeError::TrailingTokens => f.write_str("result line has tokens after its players"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Whether `name` can be a line's `game`: non-empty, lowercase ASCII letters, digits and
/// `-` only.
pub fn is_game_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
}

/// Whether `body` can be a line's body: no newline, and one or more non-empty tokens
/// separated by single spaces (no space at either end). The empty body is allowed too.
pub fn is_body(body: &str) -> bool {
    body.is_empty() || (!body.contains('\n') && body.split(' ').all(|t| !t.is_empty()))
}

/// Appends one line to `out`, newline included: `game`'s result `body` for the match
/// `origin` names, framed and checked in the current version (the format is in the module
/// docs).
///
/// # Panics
///
/// If `game` is not a game name ([`is_game_name`]) or `body` is not a body ([`is_body`]):
/// the line would not decode.
pub fn encode(game: &str, origin: &ResultOrigin, body: &str, out: &mut String) {
    write_line(game, origin, None, body, out);
}

/// Like [`encode`], in version 4: with the runtime's `cost` token (its value without
/// `cost=`) before the body.
///
/// # Panics
///
/// As [`encode`], and if `cost` is not a cost value ([`is_cost`]).
pub fn encode_with_cost(
    game: &str,
    origin: &ResultOrigin,
    cost: &str,
    body: &str,
    out: &mut String,
) {
    assert!(is_cost(cost), "not a cost value: {cost:?}");
    write_line(game, origin, Some(cost), body, out);
}

/// Whether `value` can be a `cost` token's value: non-empty, no space and no newline.
pub fn is_cost(value: &str) -> bool {
    !value.is_empty() && !value.contains([' ', '\n'])
}

fn write_line(game: &str, origin: &ResultOrigin, cost: Option<&str>, body: &str, out: &mut String) {
    assert!(is_game_name(game), "not a game name: {game:?}");
    assert!(is_body(body), "not a results line body: {body:?}");
    let start = out.len();
    let version = if cost.is_some() {
        COST_VERSION
    } else {
        VERSION
    };
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        "{RESULT_TAG}/{version} game={game} match={} run={:016x} at=",
        origin.match_id, origin.run_id
    );
    write_utc(out, origin.ended_at_unix_s);
    if let Some(cost) = cost {
        out.push_str(" cost=");
        out.push_str(cost);
    }
    if !body.is_empty() {
        out.push(' ');
        out.push_str(body);
    }
    let check = fnv1a64(&out.as_bytes()[start..]);
    let _ = writeln!(out, "{CHECK_SEPARATOR}{check:016x}");
}

/// Reads the frame of one line written by [`encode`] (or in version 2 or 1), with or
/// without its newline. A torn line fails with [`DecodeError::Unterminated`] or
/// [`DecodeError::Checksum`]; the body is not read.
pub fn decode(line: &str) -> Result<Framed<'_>, DecodeError> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let (signed, check) = line
        .rsplit_once(CHECK_SEPARATOR)
        .ok_or(DecodeError::Unterminated)?;
    if check.len() != CHECK_HEX_DIGITS || !is_lower_hex(check) {
        return Err(DecodeError::Unterminated);
    }
    let check = u64::from_str_radix(check, 16).map_err(|_| DecodeError::Unterminated)?;
    if check != fnv1a64(signed.as_bytes()) {
        return Err(DecodeError::Checksum);
    }

    let mut tokens = Header { rest: Some(signed) };
    let version = tokens
        .next()
        .and_then(|t| t.strip_prefix(RESULT_TAG))
        .and_then(|t| t.strip_prefix('/'))
        .and_then(number::<u32>)
        .ok_or(DecodeError::Version)?;
    let (game, origin) = match version {
        VERSION | COST_VERSION => {
            let game = tokens
                .next()
                .and_then(|t| t.strip_prefix("game="))
                .filter(|t| is_game_name(t))
                .ok_or(DecodeError::Field("game"))?;
            (game, Some(origin(&mut tokens)?))
        }
        VERSION_2 => (LEGACY_GAME, Some(origin(&mut tokens)?)),
        VERSION_1 => (LEGACY_GAME, None),
        _ => return Err(DecodeError::Version),
    };
    let cost = match version {
        COST_VERSION => Some(
            tokens
                .next()
                .and_then(|t| t.strip_prefix("cost="))
                .filter(|t| is_cost(t))
                .ok_or(DecodeError::Field("cost"))?,
        ),
        _ => None,
    };
    let body = match tokens.rest {
        None => "",
        Some(body) if !body.is_empty() && is_body(body) => body,
        Some(_) => return Err(DecodeError::Field("body")),
    };
    Ok(Framed {
        version,
        game,
        origin,
        cost,
        body,
    })
}

/// The tokens of a body, in order; none for the empty body.
pub fn tokens(body: &str) -> impl Iterator<Item = &str> {
    (!body.is_empty())
        .then(|| body.split(' '))
        .into_iter()
        .flatten()
}

/// The next token as `name=value`, with `value` an unsigned decimal ([`number`]); else
/// [`DecodeError::Field`] naming `name`.
pub fn field<'a, T: FromStr>(
    tokens: &mut impl Iterator<Item = &'a str>,
    name: &'static str,
) -> Result<T, DecodeError> {
    tokens
        .next()
        .and_then(|t| t.strip_prefix(name))
        .and_then(|t| t.strip_prefix('='))
        .and_then(number)
        .ok_or(DecodeError::Field(name))
}

/// `s` as an unsigned decimal: ASCII digits only, at least one (`str::parse` would also take
/// a leading `+`); `None` if it does not fit `T`.
pub fn number<T: FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// FNV-1a, 64-bit: the hash the `check` token holds.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The frame's tokens, one at a time; what is left after them is the body.
struct Header<'a> {
    /// The text after the last token taken, `None` once there is no space left.
    rest: Option<&'a str>,
}

impl<'a> Iterator for Header<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = self.rest?;
        let (token, after) = match rest.split_once(' ') {
            Some((token, after)) => (token, Some(after)),
            None => (rest, None),
        };
        self.rest = after;
        Some(token)
    }
}

/// `match=`, `run=` and `at=`.
fn origin<'a>(tokens: &mut impl Iterator<Item = &'a str>) -> Result<ResultOrigin, DecodeError> {
    Ok(ResultOrigin {
        match_id: field(tokens, "match")?,
        run_id: tokens
            .next()
            .and_then(|t| t.strip_prefix("run="))
            .filter(|t| t.len() == RUN_HEX_DIGITS && is_lower_hex(t))
            .and_then(|t| u64::from_str_radix(t, 16).ok())
            .ok_or(DecodeError::Field("run"))?,
        ended_at_unix_s: tokens
            .next()
            .and_then(|t| t.strip_prefix("at="))
            .and_then(parse_utc)
            .ok_or(DecodeError::Field("at"))?,
    })
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The last second of the year 9999: the latest time RFC 3339's four-digit year holds.
const MAX_UTC_S: u64 = 253_402_300_799;
const SECONDS_PER_DAY: u64 = 86_400;

/// Writes `unix_s` as RFC 3339 UTC to the second: `2026-11-25T06:31:23Z`.
fn write_utc(out: &mut String, unix_s: u64) {
    let s = unix_s.min(MAX_UTC_S);
    let (year, month, day) = civil_from_days(s / SECONDS_PER_DAY);
    let secs = s % SECONDS_PER_DAY;
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
}

/// Reads what [`write_utc`] writes, and nothing else: `YYYY-MM-DDTHH:MM:SSZ`, a real date
/// from 1970 on.
fn parse_utc(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    if b[16] != b':' || b[19] != b'Z' {
        return None;
    }
    let digits = |from: usize, to: usize| number::<u64>(&s[from..to]);
    let (year, month, day) = (digits(0, 4)?, digits(5, 7)?, digits(8, 10)?);
    let (hour, minute, second) = (digits(11, 13)?, digits(14, 16)?, digits(17, 19)?);
    if year < 1970 || !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day)?;
    Some(days * SECONDS_PER_DAY + hour * 3600 + minute * 60 + second)
}

/// The date `days` after 1970-01-01 (proleptic Gregorian; Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shifted to 0000-03-01, so that a leap day ends its year of 400-year eras.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Days from 1970-01-01 to a date from 1970 on; `None` for a day its month does not have.
fn days_from_civil(year: u64, month: u64, day: u64) -> Option<u64> {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y % 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day.checked_sub(1)?;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    (civil_from_days(days) == (year, month, day)).then_some(days)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ORIGIN: ResultOrigin = ResultOrigin {
        match_id: 7,
        run_id: 0x3f2a_9c0d_11e4_b5a6,
        // 2026-11-25T06:31:23Z
        ended_at_unix_s: 1_795_588_283,
    };
    const BODY: &str = "score=3 players=2 player=0,a player=1,b";

    fn encoded(game: &str, body: &str) -> String {
        let mut s = String::new();
        encode(game, &ORIGIN, body, &mut s);
        s
    }

    fn with_check(signed: &str) -> String {
        format!("{signed} check={:016x}", fnv1a64(signed.as_bytes()))
    }

    #[test]
    fn the_encoding_is_pinned() {
        // The format is stable: a change here breaks every results file already written.
        let head = "tickforge-result/3 game=chess match=7 run=3f2a9c0d11e4b5a6 \
                    at=2026-11-25T06:31:23Z";
        assert_eq!(
            encoded("chess", ""),
            format!("{head} check=97fa9e4663a16770\n")
        );
        assert_eq!(
            encoded("chess", BODY),
            format!("{head} {BODY} check=32db3acc3ec51cdb\n")
        );
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_line_round_trips_with_and_without_a_body() {
        for body in ["", "x=1", BODY] {
            let line = encoded("chess-960", body);
            assert_eq!(line.matches('\n').count(), 1);
            let framed = Framed {
                version: 3,
                game: "chess-960",
                origin: Some(ORIGIN),
                cost: None,
                body,
            };
            assert_eq!(decode(&line), Ok(framed), "{body:?}");
            assert_eq!(decode(line.trim_end()), Ok(framed), "{body:?}");
        }
    }

    #[test]
    fn a_version_4_line_carries_the_cost_before_the_body_and_is_checked() {
        let cost = "m:2:0:10:12:0,0,0,0,0,0,0,0,0,0:0,0,0,0,0,0,0,0,0,0,0;r1:2:0:10:12:0,0,0,0,0,0,0,0,0,0:0,0,0,0,0,0,0,0,0,0,0";
        for body in ["", BODY] {
            let mut line = String::new();
            encode_with_cost("chess", &ORIGIN, cost, body, &mut line);
            assert!(
                line.starts_with("tickforge-result/4 game=chess match=7 "),
                "{line}"
            );
            assert!(line.contains(&format!("Z cost={cost}")), "{line}");
            let framed = Framed {
                version: COST_VERSION,
                game: "chess",
                origin: Some(ORIGIN),
                cost: Some(cost),
                body,
            };
            assert_eq!(decode(&line), Ok(framed));
            // A torn or altered cost fails the check like any other byte.
            let torn = line.replacen("r1:2", "r1:3", 1);
            assert_eq!(decode(&torn), Err(DecodeError::Checksum));
        }
        // A version 4 line without its cost token is refused, naming it.
        let missing = with_check(
            "tickforge-result/4 game=chess match=7 run=3f2a9c0d11e4b5a6 at=2026-11-25T06:31:23Z x=1",
        );
        assert_eq!(decode(&missing), Err(DecodeError::Field("cost")));
        assert!(!is_cost("") && !is_cost("a b") && is_cost("m:1"));
    }

    #[test]
    fn older_versions_are_the_shooters() {
        let v2 = with_check(
            "tickforge-result/2 match=7 run=3f2a9c0d11e4b5a6 at=2026-11-25T06:31:23Z x=1",
        );
        assert_eq!(
            decode(&v2),
            Ok(Framed {
                version: 2,
                game: LEGACY_GAME,
                origin: Some(ORIGIN),
                cost: None,
                body: "x=1",
            })
        );
        let v1 = with_check("tickforge-result/1 x=1 y=2");
        assert_eq!(
            decode(&v1),
            Ok(Framed {
                version: 1,
                game: LEGACY_GAME,
                origin: None,
                cost: None,
                body: "x=1 y=2",
            })
        );
        assert_eq!(
            decode(&with_check("tickforge-result/1")).map(|f| f.body),
            Ok("")
        );
    }

    #[test]
    fn encoding_appends_to_the_buffer() {
        let mut file = String::from("previous line\n");
        encode("chess", &ORIGIN, BODY, &mut file);
        encode("go", &ORIGIN, "", &mut file);
        let lines: Vec<&str> = file.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            decode(lines[1]).map(|f| (f.game, f.body)),
            Ok(("chess", BODY))
        );
        assert_eq!(decode(lines[2]).map(|f| (f.game, f.body)), Ok(("go", "")));
        assert_eq!(decode(lines[0]), Err(DecodeError::Unterminated));
    }

    #[test]
    fn a_torn_line_never_decodes() {
        for body in ["", BODY] {
            let line = encoded("chess", body);
            let line = line.trim_end();
            for cut in 0..line.len() {
                assert!(decode(&line[..cut]).is_err(), "{:?}", &line[..cut]);
            }
        }
    }

    #[test]
    fn a_changed_byte_fails_the_check() {
        let line = encoded("chess", BODY);
        for i in 0..line.len() - 1 {
            let mut bytes = line.clone().into_bytes();
            bytes[i] ^= 0x01;
            let Ok(changed) = String::from_utf8(bytes) else {
                continue;
            };
            assert!(decode(&changed).is_err(), "byte {i}");
        }
    }

    #[test]
    fn game_names_are_lowercase_letters_digits_and_dashes() {
        for good in ["shooter", "chess-960", "a", "9", "-"] {
            assert!(is_game_name(good), "{good}");
        }
        for bad in [
            "",
            "Shooter",
            "chess_960",
            "chess 960",
            "chess=1",
            "échecs",
            "go\n",
        ] {
            assert!(!is_game_name(bad), "{bad:?}");
            let line = with_check(&format!(
                "tickforge-result/3 game={bad} match=7 run=3f2a9c0d11e4b5a6 \
                 at=2026-11-25T06:31:23Z"
            ));
            assert!(decode(&line).is_err(), "{bad:?}");
        }
        let no_game =
            with_check("tickforge-result/3 match=7 run=3f2a9c0d11e4b5a6 at=2026-11-25T06:31:23Z");
        assert_eq!(decode(&no_game), Err(DecodeError::Field("game")));
        let upper = with_check(
            "tickforge-result/3 game=Chess match=7 run=3f2a9c0d11e4b5a6 at=2026-11-25T06:31:23Z",
        );
        assert_eq!(decode(&upper), Err(DecodeError::Field("game")));
    }

    #[test]
    #[should_panic(expected = "not a game name")]
    fn encoding_a_bad_game_name_panics() {
        encoded("Chess", "");
    }

    #[test]
    #[should_panic(expected = "not a results line body")]
    fn encoding_a_bad_body_panics() {
        encoded("chess", "x=1  y=2");
    }

    #[test]
    fn well_checked_but_malformed_frames_are_refused() {
        let cases = [
            ("tickforge-result/5 game=chess", DecodeError::Version),
            ("tickforge-result/0", DecodeError::Version),
            ("tickforge-result/+3", DecodeError::Version),
            ("other/3 game=chess", DecodeError::Version),
            ("", DecodeError::Version),
            ("tickforge-result/3 game=chess", DecodeError::Field("match")),
            (
                "tickforge-result/2 run=3f2a9c0d11e4b5a6 at=2026-11-25T06:31:23Z",
                DecodeError::Field("match"),
            ),
            (
                "tickforge-result/3 game=chess match=7 run=3F2A9C0D11E4B5A6 \
                 at=2026-11-25T06:31:23Z",
                DecodeError::Field("run"),
            ),
            (
                "tickforge-result/3 game=chess match=7 run=3f2a at=2026-11-25T06:31:23Z",
                DecodeError::Field("run"),
            ),
            (
                "tickforge-result/3 game=chess match=7 run=3f2a9c0d11e4b5a6 at=2026-11-25",
                DecodeError::Field("at"),
            ),
            (
                "tickforge-result/3 game=chess match=7 run=3f2a9c0d11e4b5a6 \
                 at=2026-11-25T06:31:23Z ",
                DecodeError::Field("body"),
            ),
            (
                "tickforge-result/3 game=chess match=7 run=3f2a9c0d11e4b5a6 \
                 at=2026-11-25T06:31:23Z x=1  y=2",
                DecodeError::Field("body"),
            ),
            ("tickforge-result/1 x=1 ", DecodeError::Field("body")),
        ];
        for (signed, error) in cases {
            assert_eq!(decode(&with_check(signed)), Err(error), "{signed:?}");
        }
        assert_eq!(
            decode("tickforge-result/3 check=00"),
            Err(DecodeError::Unterminated)
        );
    }

    #[test]
    fn body_helpers_read_unsigned_decimals_in_order() {
        assert_eq!(tokens("").count(), 0);
        assert_eq!(tokens("a=1 b=2").collect::<Vec<_>>(), ["a=1", "b=2"]);
        let mut t = tokens("a=1 b=+2 c=300");
        assert_eq!(field::<u8>(&mut t, "a"), Ok(1));
        assert_eq!(field::<u8>(&mut t, "b"), Err(DecodeError::Field("b")));
        assert_eq!(field::<u8>(&mut t, "c"), Err(DecodeError::Field("c")));
        assert_eq!(field::<u8>(&mut t, "d"), Err(DecodeError::Field("d")));
        assert_eq!(number::<u32>("0042"), Some(42));
        assert_eq!(number::<u32>(""), None);
        assert_eq!(number::<u32>("-1"), None);
        assert_eq!(number::<u32>("1 "), None);
    }

    #[test]
    fn times_are_rfc_3339_utc_and_read_back() {
        let text = |s: u64| {
            let mut out = String::new();
            write_utc(&mut out, s);
            out
        };
        for (s, expected) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_795_588_283, "2026-11-25T06:31:23Z"),
            (4_107_542_399, "2100-02-28T23:59:59Z"),
            (MAX_UTC_S, "9999-12-31T23:59:59Z"),
        ] {
            assert_eq!(text(s), expected);
            assert_eq!(parse_utc(expected), Some(s), "{expected}");
        }
        assert_eq!(text(u64::MAX), "9999-12-31T23:59:59Z", "clamped");
        for bad in [
            "2026-02-29T00:00:00Z",
            "2100-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-01-00T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:60:00Z",
            "1969-12-31T23:59:59Z",
            "2026-01-01 00:00:00Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00+00:00",
            "+026-01-01T00:00:00Z",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
        // Every day of four centuries reads back as itself.
        for day in (0..146_097 * 2).step_by(1) {
            let s = day * SECONDS_PER_DAY + 86_399;
            assert_eq!(parse_utc(&text(s)), Some(s));
        }
    }

    proptest! {
        #[test]
        fn any_line_round_trips(
            game in "[a-z0-9-]{1,24}",
            match_id: u32,
            run_id: u64,
            ended_at_unix_s in 0..=MAX_UTC_S,
            body in proptest::collection::vec("[a-z_]{1,8}=[0-9a-z,=]{0,12}", 0..8),
        ) {
            let body = body.join(" ");
            let origin = ResultOrigin { match_id, run_id, ended_at_unix_s };
            let mut line = String::new();
            encode(&game, &origin, &body, &mut line);
            prop_assert_eq!(
                decode(&line),
                Ok(Framed { version: VERSION, game: &game, origin: Some(origin), cost: None, body: &body })
            );
        }
    }
}
