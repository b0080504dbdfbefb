//! Hit registration across round and match boundaries: aimers play a real match
//! ([`tickforge_server::Match`]) of short rounds over loopback sockets on virtual time, as
//! [`run`] drives them, through respawns at every round and a match that ends and starts
//! over (a new world, ticks from 0, replication afresh), and their verdicts must agree with
//! the server's after each boundary as well as before the first.
//!
//! A view that kept the old match's last states of the players the new match's snapshots
//! had not shown it (the fog of war hides them at the spawns) shot at them where they had
//! stood, alone: the matches that started over agreed on 86.3% of 605 shots here, the
//! first on 100% of 184. The aimers show the players through their sessions'
//! interpolation, which the epoch resets with the replica: the same holds of it.

use tickforge_game::rules::{MatchResult, RulesConfig};

use super::test_host::{Host, BOTS, PLAYERS};
use super::*;
use tickforge_server::HostedMatch;

/// Matches played: the first, and two that start over.
const MATCHES: u32 = 3;
/// A bound on the test: a match of three short rounds takes at most 29 s of play.
const MAX_TICKS: u32 = 128 * 30 * MATCHES;

/// The shots judged in one round of one match.
#[derive(Debug)]
struct Stretch {
    /// Which match, from 1, and which round of it.
    game: u32,
    round: u8,
    counts: HitregCounts,
}

/// Aiming bots and the match they play, on one loopback socket and virtual time.
struct Field {
    config: BotsConfig,
    host: Host,
    bots: Vec<Bot>,
    scratch: Scratch,
    start: Instant,
    period: Duration,
}

impl Field {
    /// `BOTS` aimers (the most shots judged) against a match of `rules`, seeded with `seed`.
    fn new(seed: u64, rules: RulesConfig) -> Field {
        let socket =
            UdpSocket::bind("127.0.0.1:0".parse().unwrap(), SocketOptions::default()).unwrap();
        let config = BotsConfig {
            servers: vec![socket.local_addr().unwrap()],
            // Sizes each bot's view: a match of this many players.
            bots_per_match: u32::from(PLAYERS),
            seed,
            ..BotsConfig::default()
        };
        let start = Instant::now();
        let period = Duration::from_nanos(1_000_000_000 / u64::from(config.tick_hz));
        let host = Host::new(&config, socket, start, rules);
        let map = Arc::new(config.map.load());
        let bots = (0..u32::from(BOTS))
            .map(|i| {
                Bot::new(
                    &config,
                    u64::from(i),
                    MatchId(1),
                    Role::Aim,
                    &map,
                    start,
                    None,
                )
                .unwrap()
            })
            .collect();
        Field {
            config,
            host,
            bots,
            scratch: Scratch::virtual_time(),
            start,
            period,
        }
    }

    /// Tick `t`: every bot sends, reads and thinks, then the server runs its frame; the
    /// finished match's result when one ended on this tick. Every tick is measured.
    fn tick(&mut self, t: u32) -> Option<MatchResult> {
        let now = self.start + self.period * t;
        let realtime_now = stamped::realtime_now();
        // Past the end of any test here: the measured window holds every tick.
        let window_end = self.start + self.period * 1_000_000;
        for bot in &mut self.bots {
            let (clocks, window) = ((now, realtime_now), (self.start, window_end));
            bot.step(clocks, window, &self.config, true, &mut self.scratch);
        }
        self.host.frame(now)
    }
}

fn total(bots: &[Bot]) -> HitregCounts {
    let mut c = HitregCounts::default();
    for b in bots {
        c.merge(&b.metrics.hitreg);
    }
    c
}

fn minus(a: &HitregCounts, b: &HitregCounts) -> HitregCounts {
    HitregCounts {
        shots: a.shots - b.shots,
        server_hits: a.server_hits - b.server_hits,
        agree: a.agree - b.agree,
        bot_hit_server_miss: a.bot_hit_server_miss - b.bot_hit_server_miss,
        bot_miss_server_hit: a.bot_miss_server_hit - b.bot_miss_server_hit,
        server_hit_unseen: a.server_hit_unseen - b.server_hit_unseen,
        other_victim: a.other_victim - b.other_victim,
        victim_dead_at_fire: a.victim_dead_at_fire - b.victim_dead_at_fire,
    }
}

#[test]
fn aimers_agree_with_the_server_across_rounds_and_a_match_that_starts_over() {
    // The short rounds of the field run (`--buy-s 2 --round-s 15 --round-end-s 1
    // --rounds 3`), shorter still: a match is two or three rounds, over in under 30 s.
    // Five times the health, so that a fight lasts and rounds mostly run out of time:
    // plenty of shots, and players still standing when the match ends.
    let rules = RulesConfig {
        buy: Duration::from_secs(1),
        round: Duration::from_secs(8),
        round_end: Duration::from_millis(500),
        rounds: std::num::NonZeroU8::new(3).unwrap(),
        max_health_hp: std::num::NonZeroU16::new(500).unwrap(),
        ..RulesConfig::default()
    };
    let mut field = Field::new(5, rules);
    let mut stretches: Vec<Stretch> = Vec::new();
    let mut game = 1;
    let mut round = 1;
    let mut since = HitregCounts::default();
    let mut rounds_played = Vec::new();
    for t in 0..MAX_TICKS {
        let ended = field.tick(t);
        let now_round = field.host.m.game().world().rules().round_state().round();
        if ended.is_some() || now_round != round {
            let counts = total(&field.bots);
            stretches.push(Stretch {
                game,
                round,
                counts: minus(&counts, &since),
            });
            since = counts;
            round = now_round;
        }
        if let Some(result) = ended {
            rounds_played.push(result.rounds_played);
            if game == MATCHES {
                break;
            }
            game += 1;
        }
    }
    assert_eq!(
        rounds_played.len(),
        MATCHES as usize,
        "every match played out: {stretches:#?}"
    );
    assert!(
        rounds_played.iter().all(|&r| r >= 2),
        "each match crossed a round's end and a respawn: {rounds_played:?}"
    );
    // Each match is judged at length, in its first round and after a respawn.
    let of = |games: &dyn Fn(u32) -> bool| {
        let mut c = HitregCounts::default();
        for s in stretches.iter().filter(|s| games(s.game)) {
            c.merge(&s.counts);
        }
        c
    };
    for g in 1..=MATCHES {
        let shots_in = |later: bool| {
            stretches
                .iter()
                .filter(|s| s.game == g && (s.round > 1) == later)
                .map(|s| s.counts.shots)
                .sum::<u64>()
        };
        let (first, later) = (shots_in(false), shots_in(true));
        assert!(
            first >= 20 && later >= 20,
            "match {g}: {first} shots judged in round 1, {later} after a respawn: \
             {stretches:#?}"
        );
    }
    // Enough shots that 99% means something: at most a few disagreements in each pool.
    for (name, c) in [
        ("the first match", of(&|g| g == 1)),
        ("the matches that started over", of(&|g| g > 1)),
    ] {
        assert!(c.shots >= 150, "{name}: {} shots judged", c.shots);
    }
    // The first match, then the ones that started over.
    for (name, c) in [
        ("the first match", of(&|g| g == 1)),
        ("the matches that started over", of(&|g| g > 1)),
    ] {
        // The bug this test was written for agreed on 86.3%; the 99% target is the
        // bench's, over thousands of shots (the README's figures). On a pool of some 200
        // shots a build that agrees on 99% lands within a point of it either way (one
        // standard deviation is 0.7 points), so the bar here is 98%.
        let rate = c.agree as f64 / c.shots as f64;
        assert!(
            rate >= 0.98,
            "{name}: agreement {rate:.4} of {} shots: {c:?}\nby round: {stretches:#?}",
            c.shots
        );
    }
}

/// Matches shorter than the 1,024 ticks a client's tick-jump rule needed to see a start
/// over: the server announces each (`Event::Epoch`), and the bots, resetting their
/// replica and frames on it, refuse none of the next match's snapshots: at least 126 of the
/// 128 a second (the one held back after each start over, until the epoch is acknowledged).
///
/// Before the epoch, the bots applied the second match's snapshots to the first's
/// baselines and refused every one of them (`serve --matches 2 --round-s 3` fell to
/// 47.5 Hz with 32,179 bad snapshots).
#[test]
fn bots_decode_every_snapshot_across_short_matches_that_start_over() {
    // One round of about 1.2 s: a match of some 154 ticks.
    let rules = RulesConfig {
        buy: Duration::from_millis(100),
        round: Duration::from_secs(1),
        round_end: Duration::from_millis(100),
        rounds: std::num::NonZeroU8::new(1).unwrap(),
        ..RulesConfig::default()
    };
    const RESTARTS: u32 = 2;
    // Ticks after the last start over still measured.
    const AFTER: u32 = 256;
    let mut field = Field::new(7, rules);
    let mut ended = Vec::new();
    // Each bot's snapshots at the end of every tick.
    let mut counts: Vec<Vec<u64>> = Vec::new();
    let mut last = None;
    for t in 0..128 * 30 {
        let match_ended = field.tick(t).is_some();
        counts.push(field.bots.iter().map(|b| b.metrics.snapshots).collect());
        if match_ended {
            ended.push(t);
            if ended.len() == RESTARTS as usize {
                last = Some(t);
            }
        }
        if last.is_some_and(|l| t >= l + AFTER) {
            break;
        }
    }
    let last = last.unwrap_or_else(|| panic!("{RESTARTS} matches ended: {ended:?}"));
    assert!(
        ended
            .iter()
            .zip(std::iter::once(&0).chain(&ended))
            .all(|(&e, &s)| e - s < 1024),
        "every match shorter than 1,024 ticks: {ended:?}"
    );
    // A match may have ended after the second, while it was measured.
    assert_eq!(field.host.m.epoch() as usize, ended.len());
    for (i, bot) in field.bots.iter().enumerate() {
        assert_eq!(bot.bad_snapshots(), 0, "bot {i}: snapshots refused");
        assert_eq!(bot.link_errors(), 0, "bot {i}: link errors");
        // Every second from the first full one (the bots connect during the first) to the
        // end: a snapshot a tick, but for the one tick after each start over whose packet
        // carries the epoch, before the server knows the client has it.
        for from in (128..=last + AFTER - 128).step_by(64) {
            let got = counts[from as usize + 128][i] - counts[from as usize][i];
            assert!(
                got >= 126,
                "bot {i}: {got} snapshots in the second from tick {from} (matches ended at \
                 {ended:?})"
            );
        }
    }
}

#[test]
fn the_replica_a_bot_prepares_is_the_one_its_match_s_welcome_asks_for() {
    let mut field = Field::new(5, RulesConfig::default());
    // As `run` does before the schedule starts.
    for bot in &mut field.bots {
        bot.session
            .prepare(prepared_replica(&field.config).unwrap());
    }
    for t in 0..256 {
        if field.bots.iter().all(|b| b.session.welcome().is_some()) {
            break;
        }
        field.tick(t);
    }
    let expected = prepared_replica(&field.config).unwrap();
    let reserved = RESERVED_RECORDS.min(usize::from(PLAYERS));
    assert_eq!(
        expected.room(),
        reserved * expected.config().history_ticks as usize
    );
    for bot in &field.bots {
        let w = bot.session.welcome().expect("welcomed within two seconds");
        let asked =
            session_config(true, field.config.pose_every).replica_config(w.entities, w.tick_hz);
        assert_eq!(*expected.config(), asked, "the match's welcome: {w:?}");
        // Of that config, the welcome takes it (the client's tests show a replica of
        // another is not); at ten players its room is also what one made there would have.
        assert_eq!(bot.session.replica().unwrap().config(), &asked);
    }
    // A match no replica holds, or a rate of 0: nothing prepared.
    for config in [
        BotsConfig {
            bots_per_match: 5000,
            ..field.config.clone()
        },
        BotsConfig {
            tick_hz: 0,
            ..field.config.clone()
        },
    ] {
        assert!(prepared_replica(&config).is_none());
    }
    // Capture the flag's match has its flags besides its players.
    let ctf = BotsConfig {
        game: BotGame::Ctf,
        ..field.config.clone()
    };
    let r = prepared_replica(&ctf).unwrap();
    assert_eq!(r.config().max_entities, usize::from(PLAYERS) + 2);
    assert!(std::ptr::eq(r.schema(), tickforge_ctf::schema()));
}
