//! [`Rules`]: the referee of one match. It owns each player's health, weapon and stats, runs
//! the [`RoundState`], and records every change as a [`RulesEvent`].

use std::vec::Drain;

use super::{
    BodyPart, Eliminated, MatchResult, Phase, PlayerResult, PlayerStats, RoundState, RulesConfig,
    RulesEvent, Team, WeaponPhase, WeaponSpec, WeaponState,
};
use crate::{buttons, PlayerSlot, Tick, UserCmd};

/// Largest number of players: slots are `u16`.
const MAX_PLAYERS: usize = 1 << 16;

/// Events one busy tick may push (every player fires, hits and kills); the buffer starts
/// with room for this many per player so that a match does not grow it.
const EVENTS_PER_PLAYER: usize = 8;

/// Why [`Rules::apply_hit`] did nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HitRejected {
    /// Not in the combat phase: nothing is hurt in the buy phase, after a round, or after
    /// the match.
    NotInCombat,
    /// A slot is not a player of this match.
    UnknownSlot,
    /// The shooter and the victim are the same player.
    SelfHit,
    /// The shooter died on an earlier tick.
    ShooterDead,
    /// The victim is already dead.
    VictimDead,
    /// Same team, and friendly fire is off.
    FriendlyFire,
}

/// What [`Rules::apply_hit`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HitOutcome {
    /// The victim lost `damage_hp` and lives on with `health_after_hp`.
    Damaged {
        /// Health removed, in hit points.
        damage_hp: u16,
        /// The victim's health now, in hit points; above 0.
        health_after_hp: u16,
    },
    /// The victim lost its last `damage_hp` and died.
    Killed {
        /// Health removed, in hit points.
        damage_hp: u16,
    },
    /// Nothing happened.
    Rejected(HitRejected),
}

/// Why [`Rules::equip`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EquipError {
    /// Weapons change only in the buy phase.
    NotBuyPhase,
    /// The slot is not a player of this match.
    UnknownSlot,
}

/// One player's part of the rules.
#[derive(Clone, Copy, Debug, PartialEq)]
struct PlayerRules {
    team: Team,
    health_hp: u16,
    /// The tick this player died on, while dead.
    died_at: Option<Tick>,
    weapon: WeaponState,
    stats: PlayerStats,
}

impl PlayerRules {
    fn is_alive(&self) -> bool {
        self.health_hp > 0
    }

    /// Alive, or killed on `tick` itself: a player still acts on the tick it dies.
    fn acts_on(&self, tick: Tick) -> bool {
        self.is_alive() || self.died_at == Some(tick)
    }
}

/// The rules of one match, driven once per tick by its world. Performs no I/O, reads no
/// clock and draws no random numbers: the same calls give the same events and result.
///
/// Each tick: [`Rules::try_fire`] for every player, [`Rules::apply_hit`] for every hit the
/// world traced, [`Rules::end_tick`], then [`Rules::drain_events`].
#[derive(Clone, Debug)]
pub struct Rules {
    config: RulesConfig,
    round: RoundState,
    players: Vec<PlayerRules>,
    /// Players per team, attackers first; an empty team is never eliminated.
    team_sizes: [usize; 2],
    events: Vec<RulesEvent>,
}

impl Rules {
    /// A match whose players are `roster[slot]`'s teams, starting its first buy phase on
    /// tick `start`. Everyone spawns at full health with `config.weapon`.
    ///
    /// # Panics
    ///
    /// If `roster` has more than 65,536 players, the most a [`PlayerSlot`] can name.
    pub fn new(config: RulesConfig, roster: &[Team], start: Tick) -> Self {
        assert!(roster.len() <= MAX_PLAYERS, "more players than slots");
        let players: Vec<PlayerRules> = roster
            .iter()
            .map(|&team| PlayerRules {
                team,
                health_hp: config.max_health_hp.get(),
                died_at: None,
                weapon: WeaponState::new(config.weapon, config.tick_hz),
                stats: PlayerStats::default(),
            })
            .collect();
        let team_sizes = Team::BOTH.map(|t| roster.iter().filter(|&&r| r == t).count());
        let mut events = Vec::with_capacity(EVENTS_PER_PLAYER * roster.len().max(1));
        let round = RoundState::new(&config, start, &mut events);
        Rules {
            config,
            round,
            players,
            team_sizes,
            events,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RulesConfig {
        &self.config
    }

    /// The round machine: phase, round number, score and timers.
    pub fn round_state(&self) -> &RoundState {
        &self.round
    }

    /// The phase of the current tick.
    pub fn phase(&self) -> Phase {
        self.round.phase()
    }

    /// Number of players; slots are `0..player_count()`.
    pub fn player_count(&self) -> usize {
        self.players.len()
    }

    /// `slot`'s team, if it is a player.
    pub fn team(&self, slot: PlayerSlot) -> Option<Team> {
        self.player(slot).map(|p| p.team)
    }

    /// `slot`'s health in hit points; 0 when dead or not a player.
    pub fn health_hp(&self, slot: PlayerSlot) -> u16 {
        self.player(slot).map_or(0, |p| p.health_hp)
    }

    /// True when `slot` is a living player.
    pub fn is_alive(&self, slot: PlayerSlot) -> bool {
        self.player(slot).is_some_and(PlayerRules::is_alive)
    }

    /// `slot`'s kills, deaths and damage so far.
    pub fn stats(&self, slot: PlayerSlot) -> Option<PlayerStats> {
        self.player(slot).map(|p| p.stats)
    }

    /// `slot`'s weapon.
    pub fn weapon(&self, slot: PlayerSlot) -> Option<&WeaponState> {
        self.player(slot).map(|p| &p.weapon)
    }

    /// True when the world must hold every player still: the buy phase (players wait behind
    /// the barriers at their spawns) and after the match.
    pub fn is_frozen(&self) -> bool {
        matches!(self.phase(), Phase::Buy | Phase::MatchOver)
    }

    /// True when the world may move `slot` this tick: a living player outside the buy phase.
    pub fn movement_allowed(&self, slot: PlayerSlot) -> bool {
        !self.is_frozen() && self.is_alive(slot)
    }

    /// Gives `slot` a ready `spec` with a full magazine. Only in the buy phase; the weapon
    /// is kept from round to round.
    pub fn equip(&mut self, slot: PlayerSlot, spec: WeaponSpec) -> Result<(), EquipError> {
        if self.phase() != Phase::Buy {
            return Err(EquipError::NotBuyPhase);
        }
        let tick_hz = self.config.tick_hz;
        let p = self.player_mut(slot).ok_or(EquipError::UnknownSlot)?;
        p.weapon = WeaponState::new(spec, tick_hz);
        Ok(())
    }

    /// Decides whether `slot` fires on `tick`, from its command's FIRE button; pushes a
    /// [`RulesEvent::ShotFired`] (and a [`RulesEvent::ReloadStarted`] when that emptied the
    /// magazine) if it did. The world traces the shot when this returns true.
    ///
    /// Call once per tick for every player, FIRE held or not. Only living players in combat
    /// fire, at most once per fire interval however FIRE is held or tapped; a FIRE held
    /// through the buy phase fires on combat's first tick.
    #[must_use]
    pub fn try_fire(&mut self, slot: PlayerSlot, cmd: &UserCmd, tick: Tick) -> bool {
        let in_combat = self.phase() == Phase::Combat;
        let Some(p) = self.players.get_mut(usize::from(slot.0)) else {
            return false;
        };
        let fire_held = cmd.has(buttons::FIRE) && in_combat && p.acts_on(tick);
        let Some(fired) = p.weapon.update(fire_held, tick) else {
            return false;
        };
        let weapon = p.weapon.spec().id;
        self.events.push(RulesEvent::ShotFired {
            tick,
            shooter: slot,
            weapon,
            ammo_left: fired.ammo_left,
        });
        if let (0, WeaponPhase::Reloading { until }) = (fired.ammo_left, p.weapon.phase()) {
            self.events.push(RulesEvent::ReloadStarted {
                tick,
                slot,
                weapon,
                ready: until,
            });
        }
        true
    }

    /// Starts reloading `slot`'s weapon on `tick` (a reload button), unless it is full,
    /// already reloading, or its player is dead. Returns true and pushes a
    /// [`RulesEvent::ReloadStarted`] if it started.
    pub fn request_reload(&mut self, slot: PlayerSlot, tick: Tick) -> bool {
        let Some(p) = self.players.get_mut(usize::from(slot.0)) else {
            return false;
        };
        if !p.is_alive() {
            return false;
        }
        let Some(ready) = p.weapon.start_reload(tick) else {
            return false;
        };
        self.events.push(RulesEvent::ReloadStarted {
            tick,
            slot,
            weapon: p.weapon.spec().id,
            ready,
        });
        true
    }

    /// Applies a hit the world traced on `tick`: `shooter`'s weapon hit `victim`'s
    /// `part` at `distance_m` metres. Prices it with the weapon's falloff and body-part
    /// multiplier, takes it from the victim's health (a kill at 0), credits the shooter's
    /// damage and kill, and pushes [`RulesEvent::Hit`] and [`RulesEvent::Kill`].
    ///
    /// Only in combat. A shooter killed on this same tick still lands its hits (a trade);
    /// the dead take no damage; teammates take none unless friendly fire is on, and then
    /// earn the shooter no kill and no damage credit.
    pub fn apply_hit(
        &mut self,
        shooter: PlayerSlot,
        victim: PlayerSlot,
        part: BodyPart,
        distance_m: f32,
        tick: Tick,
    ) -> HitOutcome {
        use HitOutcome::Rejected;
        if self.phase() != Phase::Combat {
            return Rejected(HitRejected::NotInCombat);
        }
        let (Some(s), Some(v)) = (self.player(shooter), self.player(victim)) else {
            return Rejected(HitRejected::UnknownSlot);
        };
        if shooter == victim {
            return Rejected(HitRejected::SelfHit);
        }
        if !s.acts_on(tick) {
            return Rejected(HitRejected::ShooterDead);
        }
        if !v.is_alive() {
            return Rejected(HitRejected::VictimDead);
        }
        let enemy = s.team != v.team;
        if !enemy && !self.config.friendly_fire {
            return Rejected(HitRejected::FriendlyFire);
        }
        let weapon = *s.weapon.spec();
        let damage_hp = weapon.damage_hp(part, distance_m).min(v.health_hp);
        let health_after_hp = v.health_hp - damage_hp;

        let v = &mut self.players[usize::from(victim.0)];
        v.health_hp = health_after_hp;
        let killed = health_after_hp == 0;
        if killed {
            v.died_at = Some(tick);
            v.stats.deaths += 1;
        }
        let s = &mut self.players[usize::from(shooter.0)];
        if enemy {
            s.stats.damage_dealt_hp += u32::from(damage_hp);
            s.stats.kills += u32::from(killed);
        }
        self.events.push(RulesEvent::Hit {
            tick,
            shooter,
            victim,
            part,
            damage_hp,
            health_after_hp,
        });
        if !killed {
            return HitOutcome::Damaged {
                damage_hp,
                health_after_hp,
            };
        }
        self.events.push(RulesEvent::Kill {
            tick,
            killer: shooter,
            victim,
            weapon: weapon.id,
            part,
        });
        HitOutcome::Killed { damage_hp }
    }

    /// Ends tick `tick`, after its shots and hits: decides the round on elimination or the
    /// timer and moves to the phase of tick `tick + 1`. When a new round starts, every
    /// player is alive again at full health with a full magazine (the world moves them to
    /// their spawns on [`RulesEvent::RoundStarted`]).
    ///
    /// Call once per tick, with increasing ticks.
    pub fn end_tick(&mut self, tick: Tick) {
        let eliminated = self.eliminated();
        if self.round.end_tick(tick, eliminated, &mut self.events) == Some(Phase::Buy) {
            let max_health_hp = self.config.max_health_hp.get();
            for p in &mut self.players {
                p.health_hp = max_health_hp;
                p.died_at = None;
                p.weapon.refill();
            }
        }
    }

    /// Hands out the events of the ticks since the last drain, oldest first. The buffer
    /// keeps its capacity, so draining every tick allocates nothing.
    pub fn drain_events(&mut self) -> Drain<'_, RulesEvent> {
        self.events.drain(..)
    }

    /// The events not yet drained, oldest first.
    pub fn events(&self) -> &[RulesEvent] {
        &self.events
    }

    /// The result, once the match is over ([`Phase::MatchOver`]); `None` before.
    pub fn result(&self) -> Option<MatchResult> {
        let end = self.round.match_end()?;
        let players = self
            .players
            .iter()
            .enumerate()
            .map(|(slot, p)| PlayerResult {
                // `new` keeps slots within u8.
                slot: PlayerSlot(slot as u16),
                team: p.team,
                stats: p.stats,
            })
            .collect();
        Some(MatchResult {
            tick_hz: self.config.tick_hz,
            duration_ticks: end.0.saturating_sub(self.round.match_start().0),
            rounds_played: self.round.round(),
            score: self.round.score(),
            players,
        })
    }

    fn player(&self, slot: PlayerSlot) -> Option<&PlayerRules> {
        self.players.get(usize::from(slot.0))
    }

    fn player_mut(&mut self, slot: PlayerSlot) -> Option<&mut PlayerRules> {
        self.players.get_mut(usize::from(slot.0))
    }

    fn eliminated(&self) -> Eliminated {
        let mut alive = [0usize; 2];
        for p in self.players.iter().filter(|p| p.is_alive()) {
            alive[p.team as usize] += 1;
        }
        Eliminated {
            attackers: self.team_sizes[0] > 0 && alive[0] == 0,
            defenders: self.team_sizes[1] > 0 && alive[1] == 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{RoundEndReason, Score, WeaponId, WeaponPhase, PISTOL, RIFLE};
    use std::num::NonZeroU8;
    use std::time::Duration;

    const A: Team = Team::Attackers;
    const D: Team = Team::Defenders;
    const FIRE: UserCmd = UserCmd {
        forward: 0,
        side: 0,
        buttons: buttons::FIRE,
        yaw: 0,
        pitch: 0,
    };

    /// 128 Hz with short phases: buy 5 ticks, combat 64, round end 3.
    fn short(rounds: u8) -> RulesConfig {
        RulesConfig {
            buy: Duration::from_nanos(5 * 7_812_500),
            round: Duration::from_millis(500),
            round_end: Duration::from_nanos(3 * 7_812_500),
            rounds: NonZeroU8::new(rounds).unwrap(),
            ..RulesConfig::default()
        }
    }

    fn slot(n: u16) -> PlayerSlot {
        PlayerSlot(n)
    }

    /// A match driven tick by tick, as a world would.
    struct Match {
        rules: Rules,
        tick: Tick,
        log: Vec<RulesEvent>,
    }

    impl Match {
        fn new(config: RulesConfig, roster: &[Team]) -> Self {
            let rules = Rules::new(config, roster, Tick(0));
            Match {
                rules,
                tick: Tick(0),
                log: Vec::new(),
            }
        }

        /// Ends the current tick and moves to the next, draining events into the log.
        fn end(&mut self) {
            self.rules.end_tick(self.tick);
            self.log.extend(self.rules.drain_events());
            self.tick = self.tick.next();
        }

        /// Ends ticks until `phase` is the current one.
        fn run_to(&mut self, phase: Phase) {
            for _ in 0..100_000 {
                if self.rules.phase() == phase {
                    return;
                }
                self.end();
            }
            panic!("never reached {phase:?}");
        }

        /// `shooter` fires on this tick and, if the shot goes off, hits `victim`.
        fn shoot(
            &mut self,
            shooter: u8,
            victim: u8,
            part: BodyPart,
            distance_m: f32,
        ) -> HitOutcome {
            assert!(
                self.rules
                    .try_fire(slot(u16::from(shooter)), &FIRE, self.tick),
                "did not fire"
            );
            self.hit(shooter, victim, part, distance_m)
        }

        fn hit(&mut self, shooter: u8, victim: u8, part: BodyPart, distance_m: f32) -> HitOutcome {
            self.rules.apply_hit(
                slot(u16::from(shooter)),
                slot(u16::from(victim)),
                part,
                distance_m,
                self.tick,
            )
        }

        /// Kills `victim` with `shooter`'s headshots, one a fire interval.
        fn kill(&mut self, shooter: u8, victim: u8) {
            while self.rules.is_alive(slot(u16::from(victim))) {
                if self
                    .rules
                    .try_fire(slot(u16::from(shooter)), &FIRE, self.tick)
                {
                    self.hit(shooter, victim, BodyPart::Head, 1.0);
                }
                self.end();
            }
        }
    }

    #[test]
    fn nothing_fires_or_hurts_in_the_buy_phase() {
        let mut m = Match::new(short(3), &[A, D]);
        assert_eq!(m.rules.phase(), Phase::Buy);
        assert!(!m.rules.try_fire(slot(0), &FIRE, m.tick));
        assert_eq!(
            m.hit(0, 1, BodyPart::Head, 1.0),
            HitOutcome::Rejected(HitRejected::NotInCombat)
        );
        assert_eq!(m.rules.health_hp(slot(1)), 100);
        assert_eq!(m.rules.weapon(slot(0)).unwrap().ammo(), 30);
        assert!(m.rules.is_frozen());
        assert!(!m.rules.movement_allowed(slot(0)));
        // The only event is round 1's start.
        assert_eq!(m.rules.events().len(), 1);
    }

    #[test]
    fn damage_with_falloff_and_body_part_reaches_health_and_stats() {
        let mut m = Match::new(short(3), &[A, D]);
        m.run_to(Phase::Combat);
        assert!(!m.rules.is_frozen() && m.rules.movement_allowed(slot(0)));
        // A leg hit at 30 m: 34 × 90 % = 30.6 → 31.
        let outcome = m.shoot(0, 1, BodyPart::Legs, 30.0);
        assert_eq!(
            outcome,
            HitOutcome::Damaged {
                damage_hp: 31,
                health_after_hp: 69
            }
        );
        assert_eq!(m.rules.health_hp(slot(1)), 69);
        let stats = m.rules.stats(slot(0)).unwrap();
        assert_eq!(
            (stats.kills, stats.deaths, stats.damage_dealt_hp),
            (0, 0, 31)
        );
    }

    #[test]
    fn death_at_zero_health_credits_the_kill_the_death_and_the_damage_taken() {
        let mut m = Match::new(short(3), &[A, A, D, D]);
        m.run_to(Phase::Combat);
        // Body shots, 40 each: 100 → 60 → 20 → dead, the last one counting 20.
        let mut outcomes = Vec::new();
        for _ in 0..3 {
            while !m.rules.try_fire(slot(0), &FIRE, m.tick) {
                m.end();
            }
            outcomes.push(m.hit(0, 2, BodyPart::Body, 5.0));
            m.end();
        }
        assert_eq!(
            outcomes,
            vec![
                HitOutcome::Damaged {
                    damage_hp: 40,
                    health_after_hp: 60
                },
                HitOutcome::Damaged {
                    damage_hp: 40,
                    health_after_hp: 20
                },
                HitOutcome::Killed { damage_hp: 20 },
            ]
        );
        assert!(!m.rules.is_alive(slot(2)));
        assert!(!m.rules.movement_allowed(slot(2)));
        let (killer, victim) = (
            m.rules.stats(slot(0)).unwrap(),
            m.rules.stats(slot(2)).unwrap(),
        );
        assert_eq!(
            (killer.kills, killer.deaths, killer.damage_dealt_hp),
            (1, 0, 100)
        );
        assert_eq!(
            (victim.kills, victim.deaths, victim.damage_dealt_hp),
            (0, 1, 0)
        );
        // One defender stands: the round goes on.
        assert_eq!(m.rules.phase(), Phase::Combat);
    }

    #[test]
    fn the_dead_take_no_damage_and_do_not_fire() {
        let mut m = Match::new(short(3), &[A, A, D, D]);
        m.run_to(Phase::Combat);
        m.kill(0, 2);
        assert_eq!(
            m.shoot(1, 2, BodyPart::Head, 1.0),
            HitOutcome::Rejected(HitRejected::VictimDead)
        );
        // Dead since an earlier tick: no shots and no hits.
        m.end();
        assert!(!m.rules.try_fire(slot(2), &FIRE, m.tick));
        assert_eq!(
            m.hit(2, 0, BodyPart::Head, 1.0),
            HitOutcome::Rejected(HitRejected::ShooterDead)
        );
        assert_eq!(m.rules.health_hp(slot(0)), 100);
        assert_eq!(m.rules.stats(slot(1)).unwrap().damage_dealt_hp, 0);
    }

    #[test]
    fn teammates_take_no_damage_by_default() {
        let mut m = Match::new(short(3), &[A, A, D]);
        m.run_to(Phase::Combat);
        assert_eq!(
            m.shoot(0, 1, BodyPart::Head, 1.0),
            HitOutcome::Rejected(HitRejected::FriendlyFire)
        );
        assert_eq!(
            m.hit(0, 0, BodyPart::Head, 1.0),
            HitOutcome::Rejected(HitRejected::SelfHit)
        );
        assert_eq!(
            m.hit(0, 9, BodyPart::Head, 1.0),
            HitOutcome::Rejected(HitRejected::UnknownSlot)
        );
        assert_eq!(m.rules.health_hp(slot(1)), 100);
    }

    #[test]
    fn friendly_fire_hurts_and_kills_but_earns_no_credit() {
        let config = RulesConfig {
            friendly_fire: true,
            ..short(3)
        };
        let mut m = Match::new(config, &[A, A, D]);
        m.run_to(Phase::Combat);
        assert_eq!(
            m.shoot(0, 1, BodyPart::Head, 1.0),
            HitOutcome::Killed { damage_hp: 100 }
        );
        let (shooter, victim) = (
            m.rules.stats(slot(0)).unwrap(),
            m.rules.stats(slot(1)).unwrap(),
        );
        assert_eq!((shooter.kills, shooter.damage_dealt_hp), (0, 0));
        assert_eq!(victim.deaths, 1);
        assert!(matches!(
            m.rules.events().last(),
            Some(RulesEvent::Kill {
                killer: PlayerSlot(0),
                victim: PlayerSlot(1),
                ..
            })
        ));
    }

    #[test]
    fn players_who_shoot_each_other_on_one_tick_trade() {
        // In either slot order, both shots land: the killed player still fires and hits on
        // the tick it dies. Both teams out on one tick: the defenders take the round.
        for first in [0u8, 1] {
            let mut m = Match::new(short(3), &[A, D]);
            m.run_to(Phase::Combat);
            for (s, v) in [(0, 1), (1, 0), (0, 1), (1, 0)] {
                m.hit(s, v, BodyPart::Body, 1.0);
            }
            m.end();
            assert_eq!(
                (m.rules.health_hp(slot(0)), m.rules.health_hp(slot(1))),
                (20, 20)
            );
            let (a, b) = (first, 1 - first);
            assert_eq!(
                m.shoot(a, b, BodyPart::Body, 1.0),
                HitOutcome::Killed { damage_hp: 20 }
            );
            assert_eq!(
                m.shoot(b, a, BodyPart::Body, 1.0),
                HitOutcome::Killed { damage_hp: 20 }
            );
            m.end();
            assert_eq!(m.rules.phase(), Phase::RoundEnd);
            assert!(matches!(
                m.log.last(),
                Some(RulesEvent::RoundEnded {
                    winner: Team::Defenders,
                    reason: RoundEndReason::Elimination,
                    ..
                })
            ));
            // On the next tick the dead are dead.
            assert_eq!(
                m.hit(a, b, BodyPart::Body, 1.0),
                HitOutcome::Rejected(HitRejected::NotInCombat)
            );
        }
    }

    #[test]
    fn the_round_ends_on_elimination_and_everyone_respawns_for_the_next() {
        let mut m = Match::new(short(3), &[A, A, D, D]);
        m.run_to(Phase::Combat);
        m.kill(0, 2);
        m.shoot(1, 0, BodyPart::Legs, 1.0); // friendly fire is off: no effect
        m.kill(1, 3);
        // The tick of the last kill ended the round.
        assert_eq!(m.rules.phase(), Phase::RoundEnd);
        assert_eq!(
            m.rules.round_state().score(),
            Score {
                attackers: 1,
                defenders: 0
            }
        );
        assert!(m.rules.is_alive(slot(0)) && !m.rules.is_alive(slot(3)));
        // The dead stay down and nothing fires in the pause.
        assert!(!m.rules.try_fire(slot(0), &FIRE, m.tick));
        assert!(!m.rules.movement_allowed(slot(2)));
        m.run_to(Phase::Buy);
        assert_eq!(m.rules.round_state().round(), 2);
        for s in 0..4 {
            assert_eq!(m.rules.health_hp(slot(s)), 100);
            assert_eq!(m.rules.weapon(slot(s)).unwrap().ammo(), 30);
            assert_eq!(m.rules.weapon(slot(s)).unwrap().phase(), WeaponPhase::Ready);
        }
        // Stats carry over.
        assert_eq!(m.rules.stats(slot(1)).unwrap().kills, 1);
        assert_eq!(m.rules.stats(slot(2)).unwrap().deaths, 1);
    }

    #[test]
    fn the_round_times_out_for_the_defenders() {
        let mut m = Match::new(short(3), &[A, D]);
        m.run_to(Phase::Combat);
        let combat_start = m.tick;
        m.shoot(0, 1, BodyPart::Body, 1.0);
        m.run_to(Phase::RoundEnd);
        // 500 ms of combat at 128 Hz: 64 ticks.
        assert_eq!(m.tick.0 - combat_start.0, 64);
        assert_eq!(
            m.rules.round_state().score(),
            Score {
                attackers: 0,
                defenders: 1
            }
        );
        assert!(matches!(
            m.log.last(),
            Some(RulesEvent::RoundEnded {
                round: 1,
                winner: Team::Defenders,
                reason: RoundEndReason::TimeOut,
                ..
            })
        ));
    }

    #[test]
    fn the_match_ends_at_the_majority_with_its_result() {
        let mut m = Match::new(short(5), &[A, D]);
        for round in 1..=3 {
            m.run_to(Phase::Combat);
            assert_eq!(m.rules.round_state().round(), round);
            assert!(m.rules.result().is_none());
            m.kill(0, 1);
        }
        assert_eq!(m.rules.phase(), Phase::MatchOver);
        assert!(m.rules.is_frozen());
        let result = m.rules.result().unwrap();
        assert_eq!(result.rounds_played, 3);
        assert_eq!(
            result.score,
            Score {
                attackers: 3,
                defenders: 0
            }
        );
        assert_eq!(result.winner(), Some(Team::Attackers));
        assert_eq!(result.duration_ticks, m.tick.0);
        assert_eq!(
            result.players,
            vec![
                PlayerResult {
                    slot: slot(0),
                    team: A,
                    stats: PlayerStats {
                        kills: 3,
                        deaths: 0,
                        damage_dealt_hp: 300
                    }
                },
                PlayerResult {
                    slot: slot(1),
                    team: D,
                    stats: PlayerStats {
                        kills: 0,
                        deaths: 3,
                        damage_dealt_hp: 0
                    }
                },
            ]
        );
        assert!(matches!(
            m.log.last(),
            Some(RulesEvent::MatchEnded {
                rounds_played: 3,
                winner: Some(Team::Attackers),
                ..
            })
        ));
        // After the match nothing fires or hurts, and no more events come.
        let len = m.log.len();
        for _ in 0..200 {
            assert!(!m.rules.try_fire(slot(0), &FIRE, m.tick));
            m.end();
        }
        assert_eq!(m.log.len(), len);
    }

    #[test]
    fn the_match_ends_after_its_rounds() {
        // Three rounds: the attackers win one, the defenders two on time-outs.
        let mut m = Match::new(short(3), &[A, D]);
        m.run_to(Phase::Combat);
        m.kill(0, 1);
        m.run_to(Phase::Combat);
        m.run_to(Phase::RoundEnd);
        m.run_to(Phase::Combat);
        assert_eq!(m.rules.round_state().round(), 3);
        m.run_to(Phase::MatchOver);
        let result = m.rules.result().unwrap();
        assert_eq!(
            (result.rounds_played, result.score),
            (
                3,
                Score {
                    attackers: 1,
                    defenders: 2
                }
            )
        );
        assert_eq!(result.winner(), Some(Team::Defenders));

        // Two rounds, one each: a draw after N rounds.
        let mut m = Match::new(short(2), &[A, D]);
        m.run_to(Phase::Combat);
        m.kill(0, 1);
        m.run_to(Phase::Combat);
        m.run_to(Phase::MatchOver);
        let result = m.rules.result().unwrap();
        assert_eq!((result.rounds_played, result.winner()), (2, None));
    }

    #[test]
    fn weapons_change_only_in_the_buy_phase() {
        let mut m = Match::new(short(3), &[A, D]);
        assert_eq!(m.rules.equip(slot(0), PISTOL), Ok(()));
        assert_eq!(m.rules.equip(slot(5), PISTOL), Err(EquipError::UnknownSlot));
        m.run_to(Phase::Combat);
        assert_eq!(m.rules.equip(slot(1), PISTOL), Err(EquipError::NotBuyPhase));
        assert_eq!(
            m.shoot(0, 1, BodyPart::Head, 1.0),
            HitOutcome::Damaged {
                damage_hp: 78,
                health_after_hp: 22
            }
        );
        assert!(matches!(
            m.rules.events().last(),
            Some(RulesEvent::Hit { .. })
        ));
        assert_eq!(m.rules.weapon(slot(0)).unwrap().spec().id, WeaponId(0));
        assert_eq!(m.rules.weapon(slot(1)).unwrap().spec().id, RIFLE.id);
    }

    #[test]
    fn reloads_are_announced() {
        let config = RulesConfig {
            round: Duration::from_secs(10),
            ..short(3)
        };
        let mut m = Match::new(config, &[A, D]);
        m.run_to(Phase::Combat);
        assert!(!m.rules.request_reload(slot(0), m.tick)); // full magazine
        m.shoot(0, 1, BodyPart::Legs, 100.0);
        assert!(m.rules.request_reload(slot(0), m.tick));
        let ready = Tick(m.tick.0 + 320);
        assert_eq!(
            m.rules.events().last(),
            Some(&RulesEvent::ReloadStarted {
                tick: m.tick,
                slot: slot(0),
                weapon: RIFLE.id,
                ready
            })
        );
        // No shot until the reload is done.
        while m.tick < ready {
            assert!(!m.rules.try_fire(slot(0), &FIRE, m.tick));
            m.end();
        }
        assert!(m.rules.try_fire(slot(0), &FIRE, m.tick));
        assert_eq!(m.rules.weapon(slot(0)).unwrap().ammo(), 29);
    }

    #[test]
    fn events_come_in_order() {
        let config = RulesConfig {
            weapon: WeaponSpec {
                magazine_rounds: std::num::NonZeroU16::new(1).unwrap(),
                reload: Duration::from_nanos(7_812_500),
                ..RIFLE
            },
            ..short(1)
        };
        let mut m = Match::new(config, &[A, D]);
        m.run_to(Phase::Combat);
        let t = m.tick;
        // A head shot at 22.5 m: 160 × 95 % = 152, more than the 100 left.
        m.shoot(0, 1, BodyPart::Head, 22.5);
        m.end();
        let score = Score {
            attackers: 1,
            defenders: 0,
        };
        let zero = Score::default();
        assert_eq!(
            m.log,
            vec![
                RulesEvent::RoundStarted {
                    tick: Tick(0),
                    round: 1,
                    score: zero
                },
                RulesEvent::CombatStarted {
                    tick: Tick(5),
                    round: 1,
                    score: zero
                },
                RulesEvent::ShotFired {
                    tick: t,
                    shooter: slot(0),
                    weapon: RIFLE.id,
                    ammo_left: 0
                },
                RulesEvent::ReloadStarted {
                    tick: t,
                    slot: slot(0),
                    weapon: RIFLE.id,
                    ready: Tick(t.0 + 1)
                },
                RulesEvent::Hit {
                    tick: t,
                    shooter: slot(0),
                    victim: slot(1),
                    part: BodyPart::Head,
                    damage_hp: 100,
                    health_after_hp: 0
                },
                RulesEvent::Kill {
                    tick: t,
                    killer: slot(0),
                    victim: slot(1),
                    weapon: RIFLE.id,
                    part: BodyPart::Head
                },
                RulesEvent::RoundEnded {
                    tick: Tick(t.0 + 1),
                    round: 1,
                    winner: A,
                    reason: RoundEndReason::Elimination,
                    score
                },
                RulesEvent::MatchEnded {
                    tick: Tick(t.0 + 1),
                    rounds_played: 1,
                    score,
                    winner: Some(A)
                },
            ]
        );
    }
}
