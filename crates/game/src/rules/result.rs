//! The result of a match, and its stable one-line text encoding.
//!
//! One match is one line, so a results file is appended a line at a time and a torn write
//! (a crash mid-append) damages only its own, unterminated line. Tokens are separated by one
//! space, in this order and no other:
//!
//! ```text
//! tickforge-result/2 match=7 run=3f2a9c0d11e4b5a6 at=2026-11-25T06:31:23Z tick_hz=128
//!   duration_ticks=41216 rounds_played=5 attackers=3 defenders=2 players=2
//!   player=0,attackers,4,1,512 player=1,defenders,1,4,300 check=0d3e52620190440f\n
//! ```
//! (shown on three lines; it is one.)
//!
//! | token | meaning |
//! |---|---|
//! | `tickforge-result/2` | [`RESULT_TAG`], then the format version |
//! | `match` | the match's id, as the server's API returned it ([`ResultOrigin::match_id`]) |
//! | `run` | the run id of the server process that hosted it, 16 lowercase hex digits |
//! | `at` | when the match ended, UTC, RFC 3339 to the second (`YYYY-MM-DDTHH:MM:SSZ`) |
//! | `tick_hz` | ticks per second of the match, > 0 |
//! | `duration_ticks` | ticks from the first buy phase to the match end |
//! | `rounds_played` | rounds played |
//! | `attackers`, `defenders` | rounds won by each team |
//! | `players` | how many `player=` tokens follow |
//! | `player=slot,team,kills,deaths,damage_hp` | one per player, slots `0..players` in order |
//! | `check` | FNV-1a 64 of every byte before ` check=`, 16 lowercase hex digits |
//!
//! Numbers are unsigned decimal. The check catches a torn last line (whose truncated number
//! would otherwise still parse) and bit rot; [`MatchResult::decode`] rejects either.
//! Version 1 lines (the same without `match`, `run` and `at`) still decode, with no
//! [`ResultOrigin`].

use std::fmt::{self, Write as _};
use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use super::{PlayerStats, Score, Team};
use crate::PlayerSlot;

/// The first token of an encoded result; the format version follows after a `/`.
pub const RESULT_TAG: &str = "tickforge-result";

/// The version this code writes; it reads this one and [`VERSION_1`].
const VERSION: u32 = 2;
/// The first version: no `match`, `run` or `at` tokens.
const VERSION_1: u32 = 1;

const CHECK_SEPARATOR: &str = " check=";
const CHECK_HEX_DIGITS: usize = 16;

/// Which match a result is of, and which server run made it and when: what the server adds to
/// the game's [`MatchResult`] on each line, so that a line is traced to the match the API
/// created and a restarted server's lines are told from the last run's.
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

/// One player's line of a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PlayerResult {
    /// The player's slot in the match.
    pub slot: PlayerSlot,
    /// The player's team.
    pub team: Team,
    /// Kills, deaths and damage dealt.
    pub stats: PlayerStats,
}

/// How a match ended: what the server appends to its results file when the match is over.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MatchResult {
    /// Ticks per second of the match.
    pub tick_hz: NonZeroU32,
    /// Ticks from the first buy phase to the end of the match.
    pub duration_ticks: u32,
    /// Rounds played.
    pub rounds_played: u8,
    /// Rounds won by each team.
    pub score: Score,
    /// Every player, by slot.
    pub players: Vec<PlayerResult>,
}

/// Why [`MatchResult::decode`] refused a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecodeError {
    /// The line has no well-formed `check=` token at its end: a torn write or not a result.
    Unterminated,
    /// The check does not match the line: a torn write or corruption.
    Checksum,
    /// The line does not start with [`RESULT_TAG`] and a version this code reads.
    Version,
    /// The named field is missing, out of order, or its value does not parse.
    Field(&'static str),
    /// Tokens follow the last player.
    TrailingTokens,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Unterminated => f.write_str("result line has no check token"),
            DecodeError::Checksum => f.write_str("result line fails its check"),
            DecodeError::Version => f.write_str("not a result line of a known version"),
            DecodeError::Field(name) => write!(f, "result field `{name}` is missing or invalid"),
            DecodeError::TrailingTokens => f.write_str("result line has tokens after its players"),
        }
    }
}

impl std::error::Error for DecodeError {}

impl MatchResult {
    /// The team with more rounds, or `None` for a draw.
    pub fn winner(&self) -> Option<Team> {
        self.score.leader()
    }

    /// The match's length.
    pub fn duration(&self) -> Duration {
        const NANOS_PER_SEC: u64 = 1_000_000_000;
        let nanos = u128::from(self.duration_ticks) * u128::from(NANOS_PER_SEC)
            / u128::from(self.tick_hz.get());
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Appends the result of the match `origin` names to `out` as one line, newline
    /// included (the format is in the module docs).
    pub fn encode(&self, origin: &ResultOrigin, out: &mut String) {
        let start = out.len();
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "{RESULT_TAG}/{VERSION} match={} run={:016x} at=",
            origin.match_id, origin.run_id
        );
        write_utc(out, origin.ended_at_unix_s);
        let _ = write!(out, " tick_hz={}", self.tick_hz);
        let _ = write!(out, " duration_ticks={}", self.duration_ticks);
        let _ = write!(out, " rounds_played={}", self.rounds_played);
        let _ = write!(out, " attackers={}", self.score.attackers);
        let _ = write!(out, " defenders={}", self.score.defenders);
        let _ = write!(out, " players={}", self.players.len());
        for p in &self.players {
            let _ = write!(
                out,
                " player={},{},{},{},{}",
                p.slot.0,
                p.team.as_str(),
                p.stats.kills,
                p.stats.deaths,
                p.stats.damage_dealt_hp,
            );
        }
        let check = fnv1a64(&out.as_bytes()[start..]);
        let _ = writeln!(out, "{CHECK_SEPARATOR}{check:016x}");
    }

    /// Reads one line written by [`Self::encode`] (or a version 1 line), with or without
    /// its newline; the origin is dropped ([`MatchResult::decode_line`] keeps it).
    pub fn decode(line: &str) -> Result<MatchResult, DecodeError> {
        MatchResult::decode_line(line).map(|(_, result)| result)
    }

    /// Reads one line written by [`Self::encode`], with or without its newline, and its
    /// origin; a version 1 line has none.
    pub fn decode_line(line: &str) -> Result<(Option<ResultOrigin>, MatchResult), DecodeError> {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let (body, check) = line
            .rsplit_once(CHECK_SEPARATOR)
            .ok_or(DecodeError::Unterminated)?;
        if check.len() != CHECK_HEX_DIGITS
            || !check
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(DecodeError::Unterminated);
        }
        let check = u64::from_str_radix(check, 16).map_err(|_| DecodeError::Unterminated)?;
        if check != fnv1a64(body.as_bytes()) {
            return Err(DecodeError::Checksum);
        }

        let mut tokens = body.split(' ');
        let version = tokens
            .next()
            .and_then(|t| t.strip_prefix(RESULT_TAG))
            .and_then(|t| t.strip_prefix('/'))
            .and_then(number::<u32>);
        let origin = match version {
            Some(VERSION) => Some(ResultOrigin {
                match_id: field(&mut tokens, "match")?,
                run_id: tokens
                    .next()
                    .and_then(|t| t.strip_prefix("run="))
                    .filter(|t| t.len() == 16 && t.bytes().all(|b| b.is_ascii_hexdigit()))
                    .filter(|t| !t.bytes().any(|b| b.is_ascii_uppercase()))
                    .and_then(|t| u64::from_str_radix(t, 16).ok())
                    .ok_or(DecodeError::Field("run"))?,
                ended_at_unix_s: tokens
                    .next()
                    .and_then(|t| t.strip_prefix("at="))
                    .and_then(parse_utc)
                    .ok_or(DecodeError::Field("at"))?,
            }),
            Some(VERSION_1) => None,
            _ => return Err(DecodeError::Version),
        };
        let tick_hz = field(&mut tokens, "tick_hz")?;
        let duration_ticks = field(&mut tokens, "duration_ticks")?;
        let rounds_played = field(&mut tokens, "rounds_played")?;
        let attackers = field(&mut tokens, "attackers")?;
        let defenders = field(&mut tokens, "defenders")?;
        let count: usize = field(&mut tokens, "players")?;
        if count > usize::from(u8::MAX) + 1 {
            return Err(DecodeError::Field("players"));
        }
        let mut players = Vec::with_capacity(count);
        for index in 0..count {
            let value = tokens
                .next()
                .and_then(|t| t.strip_prefix("player="))
                .ok_or(DecodeError::Field("player"))?;
            players.push(player(value, index).ok_or(DecodeError::Field("player"))?);
        }
        if tokens.next().is_some() {
            return Err(DecodeError::TrailingTokens);
        }
        let result = MatchResult {
            tick_hz,
            duration_ticks,
            rounds_played,
            score: Score {
                attackers,
                defenders,
            },
            players,
        };
        Ok((origin, result))
    }
}

/// The next token as `name=value`, with `value` parsed.
fn field<'a, T: FromStr>(
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

/// `slot,team,kills,deaths,damage_hp`, whose slot must be `index`.
fn player(value: &str, index: usize) -> Option<PlayerResult> {
    let mut parts = value.split(',');
    let slot: u8 = number(parts.next()?)?;
    if usize::from(slot) != index {
        return None;
    }
    let team = match parts.next()? {
        "attackers" => Team::Attackers,
        "defenders" => Team::Defenders,
        _ => return None,
    };
    let stats = PlayerStats {
        kills: number(parts.next()?)?,
        deaths: number(parts.next()?)?,
        damage_dealt_hp: number(parts.next()?)?,
    };
    if parts.next().is_some() {
        return None;
    }
    Some(PlayerResult {
        slot: PlayerSlot(slot),
        team,
        stats,
    })
}

/// An unsigned decimal: digits only (`str::parse` would also take a leading `+`).
fn number<T: FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
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

/// FNV-1a, 64-bit.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> MatchResult {
        MatchResult {
            tick_hz: NonZeroU32::new(128).unwrap(),
            duration_ticks: 41_216,
            rounds_played: 5,
            score: Score {
                attackers: 3,
                defenders: 2,
            },
            players: vec![
                PlayerResult {
                    slot: PlayerSlot(0),
                    team: Team::Attackers,
                    stats: PlayerStats {
                        kills: 4,
                        deaths: 1,
                        damage_dealt_hp: 512,
                    },
                },
                PlayerResult {
                    slot: PlayerSlot(1),
                    team: Team::Defenders,
                    stats: PlayerStats {
                        kills: 1,
                        deaths: 4,
                        damage_dealt_hp: 300,
                    },
                },
            ],
        }
    }

    const ORIGIN: ResultOrigin = ResultOrigin {
        match_id: 7,
        run_id: 0x3f2a_9c0d_11e4_b5a6,
        // 2026-11-25T06:31:23Z
        ended_at_unix_s: 1_795_588_283,
    };

    fn encoded(r: &MatchResult) -> String {
        let mut s = String::new();
        r.encode(&ORIGIN, &mut s);
        s
    }

    #[test]
    fn the_encoding_is_pinned() {
        // The format is stable: a change here breaks every results file already written.
        let line = encoded(&sample());
        let body = "tickforge-result/2 match=7 run=3f2a9c0d11e4b5a6 at=2026-11-25T06:31:23Z \
                    tick_hz=128 duration_ticks=41216 rounds_played=5 attackers=3 defenders=2 \
                    players=2 player=0,attackers,4,1,512 player=1,defenders,1,4,300";
        assert_eq!(line, format!("{body} check=0d3e52620190440f\n"));
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_result_round_trips() {
        let r = sample();
        let line = encoded(&r);
        assert_eq!(line.matches('\n').count(), 1);
        assert_eq!(MatchResult::decode(&line), Ok(r.clone()));
        assert_eq!(MatchResult::decode(line.trim_end()), Ok(r.clone()));
        assert_eq!(
            MatchResult::decode_line(&line),
            Ok((Some(ORIGIN), r.clone()))
        );
        assert_eq!(r.winner(), Some(Team::Attackers));
        assert_eq!(r.duration(), Duration::from_secs(322));

        let empty = MatchResult {
            players: Vec::new(),
            ..r
        };
        assert_eq!(MatchResult::decode(&encoded(&empty)), Ok(empty));
    }

    #[test]
    fn version_1_lines_still_decode_without_an_origin() {
        // A line the previous build wrote.
        let v1 = "tickforge-result/1 tick_hz=128 duration_ticks=41216 rounds_played=5 \
                  attackers=3 defenders=2 players=2 player=0,attackers,4,1,512 \
                  player=1,defenders,1,4,300 check=c871951e6186be30\n";
        assert_eq!(MatchResult::decode_line(v1), Ok((None, sample())));
        let torn = &v1[..v1.len() - 3];
        assert!(MatchResult::decode(torn).is_err());
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

    #[test]
    fn encoding_appends_to_the_buffer() {
        let mut file = String::from("previous line\n");
        sample().encode(&ORIGIN, &mut file);
        sample().encode(&ORIGIN, &mut file);
        let lines: Vec<&str> = file.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(MatchResult::decode(lines[2]), Ok(sample()));
        assert_eq!(
            MatchResult::decode(lines[0]),
            Err(DecodeError::Unterminated)
        );
    }

    #[test]
    fn a_torn_line_never_decodes() {
        let line = encoded(&sample());
        let line = line.trim_end();
        for cut in 0..line.len() {
            assert!(
                MatchResult::decode(&line[..cut]).is_err(),
                "{:?}",
                &line[..cut]
            );
        }
    }

    #[test]
    fn a_changed_byte_fails_the_check() {
        let line = encoded(&sample());
        let body_len = line.find(CHECK_SEPARATOR).unwrap();
        for i in 0..body_len {
            let mut bytes = line.clone().into_bytes();
            bytes[i] ^= 0x01;
            let Ok(changed) = String::from_utf8(bytes) else {
                continue;
            };
            assert!(MatchResult::decode(&changed).is_err(), "byte {i}");
        }
    }

    #[test]
    fn well_checked_but_malformed_lines_are_refused() {
        let with_check = |body: &str| format!("{body} check={:016x}", fnv1a64(body.as_bytes()));
        let cases = [
            ("tickforge-result/3 tick_hz=128", DecodeError::Version),
            (
                "tickforge-result/2 tick_hz=128 duration_ticks=1 rounds_played=1 attackers=1 \
                 defenders=0 players=0",
                DecodeError::Field("match"),
            ),
            (
                "tickforge-result/2 match=1 run=3F2A9C0D11E4B5A6 at=2026-11-25T06:31:23Z \
                 tick_hz=128 duration_ticks=1 rounds_played=1 attackers=1 defenders=0 players=0",
                DecodeError::Field("run"),
            ),
            (
                "tickforge-result/2 match=1 run=3f2a at=2026-11-25T06:31:23Z tick_hz=128 \
                 duration_ticks=1 rounds_played=1 attackers=1 defenders=0 players=0",
                DecodeError::Field("run"),
            ),
            (
                "tickforge-result/2 match=1 run=3f2a9c0d11e4b5a6 at=2026-11-25 tick_hz=128 \
                 duration_ticks=1 rounds_played=1 attackers=1 defenders=0 players=0",
                DecodeError::Field("at"),
            ),
            ("other/1 tick_hz=128", DecodeError::Version),
            (
                "tickforge-result/1 tick_hz=0 duration_ticks=1 rounds_played=1 attackers=1 \
                 defenders=0 players=0",
                DecodeError::Field("tick_hz"),
            ),
            (
                "tickforge-result/1 tick_hz=128 duration_ticks=+1 rounds_played=1 attackers=1 \
                 defenders=0 players=0",
                DecodeError::Field("duration_ticks"),
            ),
            (
                "tickforge-result/1 tick_hz=128 rounds_played=1 duration_ticks=1 attackers=1 \
                 defenders=0 players=0",
                DecodeError::Field("duration_ticks"),
            ),
            (
                "tickforge-result/1 tick_hz=128 duration_ticks=1 rounds_played=1 attackers=1 \
                 defenders=0 players=1 player=1,attackers,0,0,0",
                DecodeError::Field("player"),
            ),
            (
                "tickforge-result/1 tick_hz=128 duration_ticks=1 rounds_played=1 attackers=1 \
                 defenders=0 players=1 player=0,spectators,0,0,0",
                DecodeError::Field("player"),
            ),
            (
                "tickforge-result/1 tick_hz=128 duration_ticks=1 rounds_played=1 attackers=1 \
                 defenders=0 players=0 extra=1",
                DecodeError::TrailingTokens,
            ),
        ];
        for (body, error) in cases {
            assert_eq!(MatchResult::decode(&with_check(body)), Err(error), "{body}");
        }
        assert_eq!(
            MatchResult::decode("tickforge-result/1 check=00"),
            Err(DecodeError::Unterminated)
        );
    }

    proptest! {
        #[test]
        fn any_result_round_trips(
            tick_hz in 1u32..,
            match_id: u32,
            run_id: u64,
            ended_at_unix_s in 0..=MAX_UTC_S,
            duration_ticks: u32,
            rounds_played: u8,
            attackers: u8,
            defenders: u8,
            players in proptest::collection::vec(any::<(bool, u32, u32, u32)>(), 0..=256),
        ) {
            let r = MatchResult {
                tick_hz: NonZeroU32::new(tick_hz).unwrap(),
                duration_ticks,
                rounds_played,
                score: Score { attackers, defenders },
                players: players
                    .iter()
                    .enumerate()
                    .map(|(i, &(attacker, kills, deaths, damage_dealt_hp))| PlayerResult {
                        slot: PlayerSlot(i as u8),
                        team: if attacker { Team::Attackers } else { Team::Defenders },
                        stats: PlayerStats { kills, deaths, damage_dealt_hp },
                    })
                    .collect(),
            };
            let origin = ResultOrigin { match_id, run_id, ended_at_unix_s };
            let mut line = String::new();
            r.encode(&origin, &mut line);
            prop_assert_eq!(MatchResult::decode_line(&line), Ok((Some(origin), r)));
        }
    }
}
