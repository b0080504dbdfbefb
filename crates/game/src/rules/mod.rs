//! The rules of the reference shooter: weapons, health and damage, rounds, and the result of
//! a match. Pure and deterministic: no clock, no I/O, no geometry.
//!
//! What it does: decides whether a player's FIRE fires this tick ([`WeaponState`]), prices a
//! hit by body part and distance ([`WeaponSpec::damage_hp`]), keeps health, deaths and
//! per-player stats, runs rounds as in a tactical shooter (buy, combat, round end; the match
//! ends after N rounds or at a majority: [`RoundState`]), reports every change the clients
//! must hear about as a [`RulesEvent`], and produces a [`MatchResult`] with a stable one-line
//! encoding.
//!
//! What it does not do: movement, maps, hit detection, poses or lag compensation. The world
//! traces the shot and tells [`Rules::apply_hit`] what was hit and how far away; the world
//! holds players still while [`Rules::movement_allowed`] says so and moves them to their
//! spawns when a round starts. Writing the result to disk is the server's job.
//!
//! In order of importance: the same calls give the same events and the same result; the
//! server alone decides what is fired and what it costs (a client holding or spamming FIRE
//! gets no more than the weapon's rate); a tick allocates nothing once the event buffer is
//! warm; every duration is a whole number of ticks derived once from [`RulesConfig`].
//!
//! One tick of a match, in this order:
//!
//! ```text
//! for slot in players { if rules.try_fire(slot, &cmd, tick) { world traces the shot } }
//! for h in traced      { rules.apply_hit(h.shooter, h.victim, h.part, h.distance_m, tick); }
//! rules.end_tick(tick);                  // elimination, timers, the next phase
//! for event in rules.drain_events() { replicate reliably }
//! ```
//!
//! A player killed on tick `t` still fires and lands hits on tick `t`, so two players who
//! shoot each other on the same tick trade, whatever their slot order.

mod referee;
mod result;
mod round;
mod weapon;

use std::num::{NonZeroU16, NonZeroU32, NonZeroU8};
use std::time::Duration;

use crate::{PlayerSlot, Tick};

pub use referee::{EquipError, HitOutcome, HitRejected, Rules};
pub use result::{DecodeError, MatchResult, PlayerResult, ResultOrigin, RESULT_TAG};
pub use round::{Eliminated, Phase, RoundEndReason, RoundState};
pub use weapon::{
    BodyPart, Falloff, FireMode, Fired, WeaponId, WeaponPhase, WeaponSpec, WeaponState, PISTOL,
    RIFLE,
};

/// One of the two sides of a match. Teams keep their side for the whole match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Team {
    /// Must eliminate the defenders before the round timer runs out.
    Attackers,
    /// Win a round by eliminating the attackers or by holding out until the time-out.
    Defenders,
}

impl Team {
    /// Both teams, attackers first.
    pub const BOTH: [Team; 2] = [Team::Attackers, Team::Defenders];

    /// The opposing team.
    pub fn other(self) -> Team {
        match self {
            Team::Attackers => Team::Defenders,
            Team::Defenders => Team::Attackers,
        }
    }

    /// The lowercase name used in the result encoding: `attackers` or `defenders`.
    pub fn as_str(self) -> &'static str {
        match self {
            Team::Attackers => "attackers",
            Team::Defenders => "defenders",
        }
    }
}

/// Rounds won by each team.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Score {
    /// Rounds the attackers won.
    pub attackers: u8,
    /// Rounds the defenders won.
    pub defenders: u8,
}

impl Score {
    /// Rounds won by `team`.
    pub fn of(&self, team: Team) -> u8 {
        match team {
            Team::Attackers => self.attackers,
            Team::Defenders => self.defenders,
        }
    }

    /// The team with more rounds, or `None` on a tie.
    pub fn leader(&self) -> Option<Team> {
        match self.attackers.cmp(&self.defenders) {
            std::cmp::Ordering::Greater => Some(Team::Attackers),
            std::cmp::Ordering::Less => Some(Team::Defenders),
            std::cmp::Ordering::Equal => None,
        }
    }

    fn add_round(&mut self, team: Team) {
        match team {
            Team::Attackers => self.attackers = self.attackers.saturating_add(1),
            Team::Defenders => self.defenders = self.defenders.saturating_add(1),
        }
    }
}

/// What one player did in a match; the result carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PlayerStats {
    /// Enemies this player killed. Killing a teammate (with friendly fire on) does not count.
    pub kills: u32,
    /// Times this player died, to anyone.
    pub deaths: u32,
    /// Health this player removed from enemies, in hit points: a 160 hp headshot on an enemy
    /// with 40 left counts 40, as a scoreboard's damage column does.
    pub damage_dealt_hp: u32,
}

/// The rules of a match: fixed for its life. Durations are converted to whole ticks once,
/// rounding up, and every phase lasts at least one tick.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RulesConfig {
    /// Ticks per second of the match; every duration below is counted in these ticks.
    pub tick_hz: NonZeroU32,
    /// Length of the buy phase, during which players are held still and nothing fires.
    pub buy: Duration,
    /// Length of the combat phase: when it runs out with both teams standing, the defenders
    /// win the round.
    pub round: Duration,
    /// Pause after a round is decided, before the next buy phase.
    pub round_end: Duration,
    /// Rounds in a match; a team that wins `rounds / 2 + 1` of them ends it early. An even
    /// count can end in a draw.
    pub rounds: NonZeroU8,
    /// Whether hits on teammates do damage.
    pub friendly_fire: bool,
    /// Health a player spawns with each round, in hit points.
    pub max_health_hp: NonZeroU16,
    /// The weapon every player spawns with; [`Rules::equip`] changes it during a buy phase.
    pub weapon: WeaponSpec,
}

impl Default for RulesConfig {
    /// A short match in the genre's shape, so that bots finish one in a few minutes: five
    /// rounds (first to three) of at most 15 + 100 + 5 seconds. [`RulesConfig::competitive`]
    /// has the full-length match.
    fn default() -> Self {
        RulesConfig {
            tick_hz: nonzero_u32(128),       // VALORANT's tick: 7.8125 ms
            buy: Duration::from_secs(15),    // Counter-Strike's freeze time (mp_freezetime 15)
            round: Duration::from_secs(100), // VALORANT's round timer, 1:40
            // Shorter than the genre's 7 s (mp_round_restart_delay, VALORANT's transition):
            // bots need no time to read a scoreboard.
            round_end: Duration::from_secs(5),
            rounds: nonzero_u8(5), // first to 3; short enough for bot matches and benches
            friendly_fire: false,  // VALORANT: bullets do not hurt teammates
            max_health_hp: nonzero_u16(100), // VALORANT's and Counter-Strike's health
            weapon: RIFLE,
        }
    }
}

impl RulesConfig {
    /// VALORANT's competitive match without overtime: 24 rounds (first to 13), a 30 s buy
    /// phase, a 100 s round and a 7 s pause after each round. A match lasts up to an hour.
    pub fn competitive() -> Self {
        RulesConfig {
            buy: Duration::from_secs(30),
            round: Duration::from_secs(100),
            round_end: Duration::from_secs(7),
            rounds: nonzero_u8(24),
            ..RulesConfig::default()
        }
    }

    /// Rounds a team must win to end the match early: `rounds / 2 + 1`.
    pub fn majority(&self) -> u8 {
        self.rounds.get() / 2 + 1
    }

    /// `duration` in ticks of this match, rounded up.
    pub fn ticks(&self, duration: Duration) -> u32 {
        duration_to_ticks(duration, self.tick_hz)
    }
}

/// Everything the replication layer must deliver reliably, in the order it happened. Plain
/// data; [`Rules::drain_events`] hands them out after each tick.
///
/// A phase event's `tick` is the first tick of the phase it announces (the tick after the
/// [`Rules::end_tick`] that decided it); shots and hits carry the tick they happened on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RulesEvent {
    /// A buy phase begins: every player is alive at full health with a full magazine, and
    /// the world moves them to their spawns and holds them there until [`Self::CombatStarted`].
    RoundStarted {
        /// First tick of the buy phase.
        tick: Tick,
        /// The round, from 1.
        round: u8,
        /// Rounds won so far.
        score: Score,
    },
    /// Combat begins: players may move, fire and be hurt.
    CombatStarted {
        /// First tick of combat.
        tick: Tick,
        /// The round, from 1.
        round: u8,
        /// Rounds won so far.
        score: Score,
    },
    /// A player fired one round.
    ShotFired {
        /// The tick of the shot.
        tick: Tick,
        /// Who fired.
        shooter: PlayerSlot,
        /// With what.
        weapon: WeaponId,
        /// Rounds left in the magazine; at 0 the weapon reloads (a [`Self::ReloadStarted`]
        /// follows).
        ammo_left: u16,
    },
    /// A weapon began to reload, when its magazine ran dry or on request.
    ReloadStarted {
        /// The tick the reload began.
        tick: Tick,
        /// Whose weapon.
        slot: PlayerSlot,
        /// Which weapon.
        weapon: WeaponId,
        /// The first tick the weapon can fire again.
        ready: Tick,
    },
    /// A shot did damage.
    Hit {
        /// The tick of the hit.
        tick: Tick,
        /// Who fired.
        shooter: PlayerSlot,
        /// Who was hit.
        victim: PlayerSlot,
        /// Where.
        part: BodyPart,
        /// Health removed, in hit points: the weapon's damage capped at the victim's health.
        damage_hp: u16,
        /// The victim's health after the hit, in hit points; 0 means a [`Self::Kill`] follows.
        health_after_hp: u16,
    },
    /// A player died.
    Kill {
        /// The tick of the killing hit.
        tick: Tick,
        /// Who fired the killing shot (a teammate, with friendly fire on).
        killer: PlayerSlot,
        /// Who died.
        victim: PlayerSlot,
        /// With what.
        weapon: WeaponId,
        /// Where the killing shot landed ([`BodyPart::Head`]: a headshot).
        part: BodyPart,
    },
    /// A round was decided: the round-end pause (or the match end) begins.
    RoundEnded {
        /// First tick of the round-end pause.
        tick: Tick,
        /// The round, from 1.
        round: u8,
        /// Who won it.
        winner: Team,
        /// How.
        reason: RoundEndReason,
        /// Rounds won, this one included.
        score: Score,
    },
    /// The match is over; [`Rules::result`] has its result. Always follows a
    /// [`Self::RoundEnded`] on the same tick.
    MatchEnded {
        /// The tick after the last simulated one: `start + duration_ticks`.
        tick: Tick,
        /// Rounds played.
        rounds_played: u8,
        /// The final score.
        score: Score,
        /// The team with more rounds, or `None` for a draw.
        winner: Option<Team>,
    },
}

/// `duration` in ticks at `tick_hz`, rounded up, saturating at `u32::MAX`.
fn duration_to_ticks(duration: Duration, tick_hz: NonZeroU32) -> u32 {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let ticks = (duration.as_nanos() * u128::from(tick_hz.get())).div_ceil(NANOS_PER_SEC);
    u32::try_from(ticks).unwrap_or(u32::MAX)
}

/// `tick` plus `ticks`, saturating: at 128 Hz a `u32` tick lasts over a year.
fn tick_after(tick: Tick, ticks: u32) -> Tick {
    Tick(tick.0.saturating_add(ticks))
}

const fn nonzero_u32(n: u32) -> NonZeroU32 {
    match NonZeroU32::new(n) {
        Some(n) => n,
        None => panic!("zero"),
    }
}

const fn nonzero_u16(n: u16) -> NonZeroU16 {
    match NonZeroU16::new(n) {
        Some(n) => n,
        None => panic!("zero"),
    }
}

const fn nonzero_u8(n: u8) -> NonZeroU8 {
    match NonZeroU8::new(n) {
        Some(n) => n,
        None => panic!("zero"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{buttons, UserCmd};

    const A: Team = Team::Attackers;
    const D: Team = Team::Defenders;
    const FIRE: UserCmd = UserCmd {
        forward: 0,
        side: 0,
        buttons: buttons::FIRE,
        yaw: 0,
        pitch: 0,
    };
    const IDLE: UserCmd = UserCmd {
        forward: 0,
        side: 0,
        buttons: 0,
        yaw: 0,
        pitch: 0,
    };

    #[test]
    fn durations_become_whole_ticks_rounded_up() {
        let hz = nonzero_u32(128);
        assert_eq!(duration_to_ticks(Duration::from_secs(1), hz), 128);
        assert_eq!(duration_to_ticks(Duration::from_secs(15), hz), 1920);
        // 7.8125 ms is exactly one tick; a nanosecond more needs a second tick.
        assert_eq!(duration_to_ticks(Duration::from_nanos(7_812_500), hz), 1);
        assert_eq!(duration_to_ticks(Duration::from_nanos(7_812_501), hz), 2);
        assert_eq!(duration_to_ticks(Duration::ZERO, hz), 0);
        assert_eq!(duration_to_ticks(Duration::MAX, hz), u32::MAX);
    }

    #[test]
    fn defaults_are_a_short_first_to_three_match() {
        let c = RulesConfig::default();
        assert_eq!(c.tick_hz.get(), 128);
        assert_eq!(c.ticks(c.buy), 15 * 128);
        assert_eq!(c.ticks(c.round), 100 * 128);
        assert_eq!(c.ticks(c.round_end), 5 * 128);
        assert_eq!((c.rounds.get(), c.majority()), (5, 3));
        assert!(!c.friendly_fire);
        assert_eq!(c.max_health_hp.get(), 100);
        assert_eq!(c.weapon, RIFLE);
        let comp = RulesConfig::competitive();
        assert_eq!((comp.rounds.get(), comp.majority()), (24, 13));
    }

    #[test]
    fn score_leader_and_team_names() {
        let s = Score {
            attackers: 2,
            defenders: 1,
        };
        assert_eq!(s.leader(), Some(Team::Attackers));
        assert_eq!(s.of(Team::Defenders), 1);
        assert_eq!(Score::default().leader(), None);
        assert_eq!(Team::Attackers.other(), Team::Defenders);
        assert_eq!(Team::Defenders.as_str(), "defenders");
    }

    /// A 5-v-5 match scripted from a seed: commands and hits from a linear congruential
    /// generator. Returns the event log and the encoded result.
    fn scripted_match(seed: u64) -> (Vec<RulesEvent>, String) {
        let roster = [A, A, A, A, A, D, D, D, D, D];
        let config = RulesConfig {
            tick_hz: NonZeroU32::new(128).unwrap(),
            buy: Duration::from_millis(100),
            round: Duration::from_secs(2),
            round_end: Duration::from_millis(50),
            rounds: NonZeroU8::new(7).unwrap(),
            friendly_fire: true,
            ..RulesConfig::default()
        };
        let mut rules = Rules::new(config, &roster, Tick(1000));
        let mut rng = seed;
        let mut next = move || {
            rng = rng
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (rng >> 33) as u32
        };
        let mut log = Vec::new();
        let mut tick = Tick(1000);
        let mut fired = Vec::new();
        while rules.phase() != Phase::MatchOver {
            fired.clear();
            for s in 0..10u16 {
                let cmd = if next() % 4 != 0 { FIRE } else { IDLE };
                if rules.try_fire(PlayerSlot(s), &cmd, tick) {
                    fired.push(s);
                }
            }
            for &s in &fired {
                if next() % 3 == 0 {
                    let victim = PlayerSlot((next() % 10) as u16);
                    let part =
                        [BodyPart::Head, BodyPart::Body, BodyPart::Legs][(next() % 3) as usize];
                    let distance_m = (next() % 6000) as f32 / 100.0;
                    let _ = rules.apply_hit(PlayerSlot(s), victim, part, distance_m, tick);
                }
            }
            rules.end_tick(tick);
            log.extend(rules.drain_events());
            tick = tick.next();
            assert!(tick.0 < 1_000_000, "the match never ended");
        }
        let mut encoded = String::new();
        let origin = ResultOrigin {
            match_id: 1,
            run_id: 2,
            ended_at_unix_s: 3,
        };
        rules.result().unwrap().encode(&origin, &mut encoded);
        (log, encoded)
    }

    #[test]
    fn identical_scripted_matches_give_identical_events_and_results() {
        let (log_a, result_a) = scripted_match(7);
        let (log_b, result_b) = scripted_match(7);
        assert_eq!(log_a, log_b);
        assert_eq!(result_a, result_b);
        // The script exercises the rules: kills, several rounds, a decided match.
        let kills = log_a
            .iter()
            .filter(|e| matches!(e, RulesEvent::Kill { .. }))
            .count();
        let rounds = log_a
            .iter()
            .filter(|e| matches!(e, RulesEvent::RoundEnded { .. }))
            .count();
        assert!(kills > 10 && rounds >= 4, "kills {kills}, rounds {rounds}");
        // Another seed plays another match.
        assert_ne!(scripted_match(8).0, log_a);
    }
}
