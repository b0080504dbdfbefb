//! The result of a match, and the body of its line in a results file.
//!
//! The runtime frames the line ([`tickforge_sim::result_line`]: tag and version, game,
//! origin, check); the shooter writes the middle. One match is one line, so a results file
//! is appended a line at a time and a torn write (a crash mid-append) damages only its own,
//! unterminated line. Tokens are separated by one space, in this order and no other:
//!
//! ```text
//! tickforge-result/3 game=shooter match=7 run=3f2a9c0d11e4b5a6 at=2026-11-25T06:31:23Z
//!   tick_hz=128 duration_ticks=41216 rounds_played=5 attackers=3 defenders=2 players=2
//!   player=0,attackers,4,1,512 player=1,defenders,1,4,300 check=96e472e7f6d252dd\n
//! ```
//! (shown on three lines; it is one.)
//!
//! | token | meaning |
//! |---|---|
//! | `tickforge-result/3` | [`RESULT_TAG`], then the format version |
//! | `game` | `shooter` ([`MatchResult::GAME`]): the game whose body follows |
//! | `match` | the match's id, as the server's API returned it ([`ResultOrigin::match_id`]) |
//! | `run` | the run id of the server process that hosted it, 16 lowercase hex digits |
//! | `at` | when the match ended, UTC, RFC 3339 to the second (`YYYY-MM-DDTHH:MM:SSZ`) |
//! | `tick_hz` | ticks per second of the match, > 0 (the body starts here) |
//! | `duration_ticks` | ticks from the first buy phase to the match end |
//! | `rounds_played` | rounds played |
//! | `attackers`, `defenders` | rounds won by each team |
//! | `players` | how many `player=` tokens follow |
//! | `player=slot,team,kills,deaths,damage_hp` | one per player, slots `0..players` in order |
//! | `check` | FNV-1a 64 of every byte before ` check=`, 16 lowercase hex digits |
//!
//! Numbers are unsigned decimal. The check catches a torn last line (whose truncated number
//! would otherwise still parse) and bit rot; [`MatchResult::decode`] rejects either.
//! Older lines still decode: version 2 (the same without `game`) and version 1 (without
//! `game`, `match`, `run` and `at`, so with no [`ResultOrigin`]). A version 3 line of
//! another game is refused with [`DecodeError::Game`].

use std::fmt::Write as _;
use std::num::NonZeroU32;
use std::time::Duration;

use tickforge_sim::result_line::{self, field, number};
pub use tickforge_sim::result_line::{DecodeError, ResultOrigin, RESULT_TAG};

use super::{PlayerStats, Score, Team};
use crate::PlayerSlot;

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

    /// The `game` of this game's result lines.
    pub const GAME: &'static str = "shooter";

    /// Appends the result of the match `origin` names to `out` as one line, newline
    /// included: the current version (3), `game=shooter` (the format is in the module docs).
    pub fn encode(&self, origin: &ResultOrigin, out: &mut String) {
        let mut body = String::new();
        self.encode_body(&mut body);
        result_line::encode(Self::GAME, origin, &body, out);
    }

    /// Appends the shooter's body of a result line to `out`: the tokens from `tick_hz` to
    /// the last `player`, separated by single spaces, with no space or newline at either end.
    pub fn encode_body(&self, out: &mut String) {
        // Writing to a String cannot fail.
        let _ = write!(out, "tick_hz={}", self.tick_hz);
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
    }

    /// Reads one line written by [`Self::encode`] (or a version 2 or 1 line), with or
    /// without its newline; the origin is dropped ([`MatchResult::decode_line`] keeps it).
    pub fn decode(line: &str) -> Result<MatchResult, DecodeError> {
        MatchResult::decode_line(line).map(|(_, result)| result)
    }

    /// Reads one line written by [`Self::encode`], with or without its newline, and its
    /// origin; a version 1 line has none. A well-framed line of another game fails with
    /// [`DecodeError::Game`].
    pub fn decode_line(line: &str) -> Result<(Option<ResultOrigin>, MatchResult), DecodeError> {
        let framed = result_line::decode(line)?;
        if framed.game != Self::GAME {
            return Err(DecodeError::Game);
        }
        Ok((framed.origin, MatchResult::decode_body(framed.body)?))
    }

    /// Reads what [`Self::encode_body`] writes, and nothing else: the body of a result
    /// line, without the frame's tokens.
    pub fn decode_body(body: &str) -> Result<MatchResult, DecodeError> {
        let mut tokens = result_line::tokens(body);
        let tick_hz = field(&mut tokens, "tick_hz")?;
        let duration_ticks = field(&mut tokens, "duration_ticks")?;
        let rounds_played = field(&mut tokens, "rounds_played")?;
        let attackers = field(&mut tokens, "attackers")?;
        let defenders = field(&mut tokens, "defenders")?;
        let count: usize = field(&mut tokens, "players")?;
        if count > usize::from(u16::MAX) + 1 {
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
        Ok(MatchResult {
            tick_hz,
            duration_ticks,
            rounds_played,
            score: Score {
                attackers,
                defenders,
            },
            players,
        })
    }
}

/// `slot,team,kills,deaths,damage_hp`, whose slot must be `index`.
fn player(value: &str, index: usize) -> Option<PlayerResult> {
    let mut parts = value.split(',');
    let slot: u16 = number(parts.next()?)?;
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
        let body = "tickforge-result/3 game=shooter match=7 run=3f2a9c0d11e4b5a6 \
                    at=2026-11-25T06:31:23Z tick_hz=128 duration_ticks=41216 rounds_played=5 \
                    attackers=3 defenders=2 players=2 player=0,attackers,4,1,512 \
                    player=1,defenders,1,4,300";
        assert_eq!(line, format!("{body} check=96e472e7f6d252dd\n"));
    }

    #[test]
    fn the_body_is_the_middle_of_the_line() {
        let mut body = String::new();
        sample().encode_body(&mut body);
        assert_eq!(
            body,
            "tick_hz=128 duration_ticks=41216 rounds_played=5 attackers=3 defenders=2 \
             players=2 player=0,attackers,4,1,512 player=1,defenders,1,4,300"
        );
        assert!(encoded(&sample()).contains(&format!(" {body} check=")));
        assert_eq!(MatchResult::decode_body(&body), Ok(sample()));
        assert_eq!(
            MatchResult::decode_body(""),
            Err(DecodeError::Field("tick_hz"))
        );
        assert_eq!(
            MatchResult::decode_body(&format!("{body} ")),
            Err(DecodeError::TrailingTokens)
        );
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
    fn version_2_lines_still_decode_with_their_origin() {
        // A line the previous build wrote.
        let v2 = "tickforge-result/2 match=7 run=3f2a9c0d11e4b5a6 at=2026-11-25T06:31:23Z \
                  tick_hz=128 duration_ticks=41216 rounds_played=5 attackers=3 defenders=2 \
                  players=2 player=0,attackers,4,1,512 player=1,defenders,1,4,300 \
                  check=0d3e52620190440f\n";
        assert_eq!(MatchResult::decode_line(v2), Ok((Some(ORIGIN), sample())));
        let torn = &v2[..v2.len() - 3];
        assert!(MatchResult::decode(torn).is_err());
    }

    #[test]
    fn another_games_line_is_refused() {
        let mut line = String::new();
        let mut body = String::new();
        sample().encode_body(&mut body);
        // Even with the shooter's body: the line says it is another game's.
        result_line::encode("chess", &ORIGIN, &body, &mut line);
        assert_eq!(MatchResult::decode(&line), Err(DecodeError::Game));
        assert_eq!(
            result_line::decode(&line).map(|f| f.body),
            Ok(body.as_str())
        );
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
        let body_len = line.rfind(" check=").unwrap();
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
        let with_check = |body: &str| {
            let check = result_line::fnv1a64(body.as_bytes());
            format!("{body} check={check:016x}")
        };
        let cases = [
            // A version past every one this build reads.
            ("tickforge-result/5 tick_hz=128", DecodeError::Version),
            ("tickforge-result/3 tick_hz=128", DecodeError::Field("game")),
            ("tickforge-result/4 tick_hz=128", DecodeError::Field("game")),
            (
                "tickforge-result/3 game=shooter tick_hz=128 duration_ticks=1 rounds_played=1 \
                 attackers=1 defenders=0 players=0",
                DecodeError::Field("match"),
            ),
            (
                "tickforge-result/3 game=Shooter match=1 run=3f2a9c0d11e4b5a6 \
                 at=2026-11-25T06:31:23Z tick_hz=128 duration_ticks=1 rounds_played=1 \
                 attackers=1 defenders=0 players=0",
                DecodeError::Field("game"),
            ),
            (
                "tickforge-result/3 game=chess match=1 run=3f2a9c0d11e4b5a6 \
                 at=2026-11-25T06:31:23Z tick_hz=128 duration_ticks=1 rounds_played=1 \
                 attackers=1 defenders=0 players=0",
                DecodeError::Game,
            ),
            (
                "tickforge-result/3 game=shooter match=1 run=3f2a9c0d11e4b5a6 \
                 at=2026-11-25T06:31:23Z tick_hz=128 duration_ticks=1 rounds_played=1 \
                 attackers=1 defenders=0 players=0 extra=1",
                DecodeError::TrailingTokens,
            ),
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
            // Up to the last second of the year 9999, the latest the line can hold.
            ended_at_unix_s in 0..=253_402_300_799u64,
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
                        slot: PlayerSlot(i as u16),
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
