//! Rounds as in a tactical shooter: [`Phase::Buy`] → [`Phase::Combat`] → [`Phase::RoundEnd`]
//! → the next round's buy, until a team wins `rounds / 2 + 1` rounds or `rounds` have been
//! played ([`Phase::MatchOver`]).
//!
//! ```text
//!  start                                   one team out, or the timer: the round is decided
//!    │   buy ticks         ≤ round ticks   │   round-end ticks
//!    ▼ ┌───────────┐     ┌──────────────┐  ▼ ┌─────────────┐
//!      │    Buy    │ ──▶ │    Combat    │ ──▶ │  RoundEnd   │ ──▶ Buy (round + 1)
//!      └───────────┘     └──────────────┘     └─────────────┘
//!                                  └── majority reached or last round ──▶ MatchOver
//! ```
//!
//! [`RoundState`] is the phase machine alone: it knows ticks, rounds and the score, and
//! learns who is eliminated from its caller.

use super::{tick_after, RulesConfig, RulesEvent, Score, Team};
use crate::Tick;

/// Where a match is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Players are held at their spawns; nothing fires and nothing is hurt.
    Buy,
    /// Players move, fire and are hurt, until a team is eliminated or the timer runs out.
    Combat,
    /// The round is decided; a pause before the next buy phase. Nothing fires.
    RoundEnd,
    /// The match is over.
    MatchOver,
}

/// How a round was won.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RoundEndReason {
    /// Every player of the losing team is dead. When both teams die on the same tick, the
    /// defenders win, as on a time-out: the attackers did not take the site.
    Elimination,
    /// The round timer ran out with both teams standing: the defenders win.
    TimeOut,
}

/// Which teams have no player left alive, as the caller counts them for this tick. A team
/// with no players at all is never eliminated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Eliminated {
    /// Every attacker is dead.
    pub attackers: bool,
    /// Every defender is dead.
    pub defenders: bool,
}

/// The round and phase machine of one match, on ticks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundState {
    phase: Phase,
    /// The current round, from 1; after the match, the last round played.
    round: u8,
    score: Score,
    /// First tick of the next phase; meaningless in [`Phase::MatchOver`].
    phase_until: Tick,
    buy_ticks: u32,
    combat_ticks: u32,
    round_end_ticks: u32,
    rounds: u8,
    majority: u8,
    match_start: Tick,
    match_end: Option<Tick>,
}

impl RoundState {
    /// Round 1's buy phase from tick `start`, announced with a [`RulesEvent::RoundStarted`]
    /// pushed to `events`.
    pub fn new(config: &RulesConfig, start: Tick, events: &mut Vec<RulesEvent>) -> Self {
        let buy_ticks = config.ticks(config.buy).max(1);
        let state = RoundState {
            phase: Phase::Buy,
            round: 1,
            score: Score::default(),
            phase_until: tick_after(start, buy_ticks),
            buy_ticks,
            combat_ticks: config.ticks(config.round).max(1),
            round_end_ticks: config.ticks(config.round_end).max(1),
            rounds: config.rounds.get(),
            majority: config.majority(),
            match_start: start,
            match_end: None,
        };
        events.push(RulesEvent::RoundStarted {
            tick: start,
            round: 1,
            score: state.score,
        });
        state
    }

    /// The phase of the current tick.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The current round, from 1; after the match, the number of rounds played.
    pub fn round(&self) -> u8 {
        self.round
    }

    /// Rounds won so far.
    pub fn score(&self) -> Score {
        self.score
    }

    /// The first tick of the next phase, or `None` after the match. In combat this is the
    /// time-out; elimination can come sooner.
    pub fn phase_until(&self) -> Option<Tick> {
        (self.phase != Phase::MatchOver).then_some(self.phase_until)
    }

    /// The first tick of the match.
    pub fn match_start(&self) -> Tick {
        self.match_start
    }

    /// The tick after the last one of the match, once it is over.
    pub fn match_end(&self) -> Option<Tick> {
        self.match_end
    }

    /// Ends tick `tick`: decides the round on `eliminated` or on the timer, and moves to the
    /// phase of tick `tick + 1`, pushing what changed to `events`. Returns the phase entered,
    /// if it changed.
    ///
    /// Call once per tick, after the tick's hits, with increasing ticks.
    pub fn end_tick(
        &mut self,
        tick: Tick,
        eliminated: Eliminated,
        events: &mut Vec<RulesEvent>,
    ) -> Option<Phase> {
        let next = tick_after(tick, 1);
        match self.phase {
            Phase::Buy if next >= self.phase_until => {
                self.phase = Phase::Combat;
                self.phase_until = tick_after(next, self.combat_ticks);
                events.push(RulesEvent::CombatStarted {
                    tick: next,
                    round: self.round,
                    score: self.score,
                });
                Some(Phase::Combat)
            }
            Phase::Combat => {
                let (winner, reason) = match (eliminated.attackers, eliminated.defenders) {
                    (false, true) => (Team::Attackers, RoundEndReason::Elimination),
                    (true, _) => (Team::Defenders, RoundEndReason::Elimination),
                    (false, false) if next >= self.phase_until => {
                        (Team::Defenders, RoundEndReason::TimeOut)
                    }
                    (false, false) => return None,
                };
                Some(self.end_round(next, winner, reason, events))
            }
            Phase::RoundEnd if next >= self.phase_until => {
                self.round += 1;
                self.phase = Phase::Buy;
                self.phase_until = tick_after(next, self.buy_ticks);
                events.push(RulesEvent::RoundStarted {
                    tick: next,
                    round: self.round,
                    score: self.score,
                });
                Some(Phase::Buy)
            }
            Phase::Buy | Phase::RoundEnd | Phase::MatchOver => None,
        }
    }

    fn end_round(
        &mut self,
        next: Tick,
        winner: Team,
        reason: RoundEndReason,
        events: &mut Vec<RulesEvent>,
    ) -> Phase {
        self.score.add_round(winner);
        events.push(RulesEvent::RoundEnded {
            tick: next,
            round: self.round,
            winner,
            reason,
            score: self.score,
        });
        if self.score.of(winner) >= self.majority || self.round >= self.rounds {
            self.phase = Phase::MatchOver;
            self.match_end = Some(next);
            events.push(RulesEvent::MatchEnded {
                tick: next,
                rounds_played: self.round,
                score: self.score,
                winner: self.score.leader(),
            });
        } else {
            self.phase = Phase::RoundEnd;
            self.phase_until = tick_after(next, self.round_end_ticks);
        }
        self.phase
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::{NonZeroU32, NonZeroU8};
    use std::time::Duration;

    const NONE_OUT: Eliminated = Eliminated {
        attackers: false,
        defenders: false,
    };
    const DEFENDERS_OUT: Eliminated = Eliminated {
        attackers: false,
        defenders: true,
    };

    /// 100 Hz, so that 10 ms is a tick: buy 5 ticks, combat 20, round end 3.
    fn short(rounds: u8) -> RulesConfig {
        RulesConfig {
            tick_hz: NonZeroU32::new(100).unwrap(),
            buy: Duration::from_millis(50),
            round: Duration::from_millis(200),
            round_end: Duration::from_millis(30),
            rounds: NonZeroU8::new(rounds).unwrap(),
            ..RulesConfig::default()
        }
    }

    /// Ends ticks from `*tick` until the phase is `phase`, returning the first tick in it.
    fn until_phase(
        r: &mut RoundState,
        tick: &mut u32,
        phase: Phase,
        out: Eliminated,
        ev: &mut Vec<RulesEvent>,
    ) -> u32 {
        for _ in 0..1000 {
            if r.phase() == phase {
                return *tick;
            }
            r.end_tick(Tick(*tick), out, ev);
            *tick += 1;
        }
        panic!("never reached {phase:?}");
    }

    #[test]
    fn phases_last_their_ticks() {
        let mut ev = Vec::new();
        let mut r = RoundState::new(&short(3), Tick(100), &mut ev);
        assert_eq!(
            (r.phase(), r.round(), r.phase_until()),
            (Phase::Buy, 1, Some(Tick(105)))
        );
        // Ticks 100..=104 are the buy phase; ending tick 104 starts combat on 105.
        for t in 100..104 {
            assert_eq!(r.end_tick(Tick(t), NONE_OUT, &mut ev), None);
        }
        assert_eq!(
            r.end_tick(Tick(104), NONE_OUT, &mut ev),
            Some(Phase::Combat)
        );
        assert_eq!(r.phase_until(), Some(Tick(125)));
        // 20 ticks of combat, 105..=124, then a time-out.
        for t in 105..124 {
            assert_eq!(r.end_tick(Tick(t), NONE_OUT, &mut ev), None);
        }
        assert_eq!(
            r.end_tick(Tick(124), NONE_OUT, &mut ev),
            Some(Phase::RoundEnd)
        );
        // 3 ticks of pause, 125..=127, then round 2's buy from 128.
        for t in 125..127 {
            assert_eq!(r.end_tick(Tick(t), NONE_OUT, &mut ev), None);
        }
        assert_eq!(r.end_tick(Tick(127), NONE_OUT, &mut ev), Some(Phase::Buy));
        assert_eq!((r.round(), r.phase_until()), (2, Some(Tick(133))));
        let defenders_1 = Score {
            attackers: 0,
            defenders: 1,
        };
        assert_eq!(
            ev,
            vec![
                RulesEvent::RoundStarted {
                    tick: Tick(100),
                    round: 1,
                    score: Score::default()
                },
                RulesEvent::CombatStarted {
                    tick: Tick(105),
                    round: 1,
                    score: Score::default()
                },
                RulesEvent::RoundEnded {
                    tick: Tick(125),
                    round: 1,
                    winner: Team::Defenders,
                    reason: RoundEndReason::TimeOut,
                    score: defenders_1,
                },
                RulesEvent::RoundStarted {
                    tick: Tick(128),
                    round: 2,
                    score: defenders_1
                },
            ]
        );
    }

    #[test]
    fn elimination_decides_the_round_for_the_survivors() {
        let cases = [
            (DEFENDERS_OUT, Team::Attackers),
            (
                Eliminated {
                    attackers: true,
                    defenders: false,
                },
                Team::Defenders,
            ),
            // Both out on one tick: the defenders.
            (
                Eliminated {
                    attackers: true,
                    defenders: true,
                },
                Team::Defenders,
            ),
        ];
        for (out, winner) in cases {
            let mut ev = Vec::new();
            let mut r = RoundState::new(&short(3), Tick(0), &mut ev);
            let mut t = 0;
            let combat = until_phase(&mut r, &mut t, Phase::Combat, NONE_OUT, &mut ev);
            assert_eq!(combat, 5);
            // Elimination on the combat's third tick ends it; the pause starts on the next.
            r.end_tick(Tick(5), NONE_OUT, &mut ev);
            r.end_tick(Tick(6), NONE_OUT, &mut ev);
            assert_eq!(r.end_tick(Tick(7), out, &mut ev), Some(Phase::RoundEnd));
            assert_eq!(r.score().of(winner), 1);
            assert_eq!(r.score().of(winner.other()), 0);
            assert_eq!(
                ev.last(),
                Some(&RulesEvent::RoundEnded {
                    tick: Tick(8),
                    round: 1,
                    winner,
                    reason: RoundEndReason::Elimination,
                    score: r.score(),
                })
            );
        }
    }

    #[test]
    fn elimination_outside_combat_decides_nothing() {
        let mut ev = Vec::new();
        let mut r = RoundState::new(&short(3), Tick(0), &mut ev);
        assert_eq!(r.end_tick(Tick(0), DEFENDERS_OUT, &mut ev), None);
        assert_eq!(r.phase(), Phase::Buy);
        assert_eq!(r.score(), Score::default());
    }

    #[test]
    fn the_match_ends_when_a_team_reaches_the_majority() {
        let mut ev = Vec::new();
        let mut r = RoundState::new(&short(5), Tick(0), &mut ev);
        let mut t = 0;
        for round in 1..=3 {
            until_phase(&mut r, &mut t, Phase::Combat, NONE_OUT, &mut ev);
            assert_eq!(r.round(), round);
            r.end_tick(Tick(t), DEFENDERS_OUT, &mut ev);
            t += 1;
        }
        // 3 of 5: over after round 3, on the tick after the deciding one.
        assert_eq!(r.phase(), Phase::MatchOver);
        assert_eq!(r.phase_until(), None);
        assert_eq!(r.match_end(), Some(Tick(t)));
        let three_nil = Score {
            attackers: 3,
            defenders: 0,
        };
        assert_eq!(
            &ev[ev.len() - 2..],
            &[
                RulesEvent::RoundEnded {
                    tick: Tick(t),
                    round: 3,
                    winner: Team::Attackers,
                    reason: RoundEndReason::Elimination,
                    score: three_nil,
                },
                RulesEvent::MatchEnded {
                    tick: Tick(t),
                    rounds_played: 3,
                    score: three_nil,
                    winner: Some(Team::Attackers),
                },
            ]
        );
        // Nothing happens after the match.
        let len = ev.len();
        for t in t..t + 100 {
            assert_eq!(r.end_tick(Tick(t), DEFENDERS_OUT, &mut ev), None);
        }
        assert_eq!((ev.len(), r.phase()), (len, Phase::MatchOver));
    }

    #[test]
    fn the_match_ends_after_its_rounds_even_in_a_draw() {
        let mut ev = Vec::new();
        let mut r = RoundState::new(&short(2), Tick(0), &mut ev);
        let mut t = 0;
        // Round 1: the attackers eliminate the defenders. Round 2: the timer runs out.
        until_phase(&mut r, &mut t, Phase::Combat, NONE_OUT, &mut ev);
        r.end_tick(Tick(t), DEFENDERS_OUT, &mut ev);
        t += 1;
        until_phase(&mut r, &mut t, Phase::Combat, NONE_OUT, &mut ev);
        let end = until_phase(&mut r, &mut t, Phase::MatchOver, NONE_OUT, &mut ev);
        assert_eq!(r.round(), 2);
        // 5 + 1 (round 1) + 3, then 5 + 20 (round 2).
        assert_eq!(end, 34);
        assert_eq!(
            ev.last(),
            Some(&RulesEvent::MatchEnded {
                tick: Tick(34),
                rounds_played: 2,
                score: Score {
                    attackers: 1,
                    defenders: 1
                },
                winner: None,
            })
        );
    }

    #[test]
    fn a_zero_length_phase_still_lasts_a_tick() {
        let config = RulesConfig {
            buy: Duration::ZERO,
            ..short(1)
        };
        let mut ev = Vec::new();
        let mut r = RoundState::new(&config, Tick(0), &mut ev);
        assert_eq!(r.phase(), Phase::Buy);
        assert_eq!(r.end_tick(Tick(0), NONE_OUT, &mut ev), Some(Phase::Combat));
    }
}
