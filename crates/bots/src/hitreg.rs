//! Hit registration seen from the client: a bot keeps its own lag-compensation history of
//! the states its snapshots carried, decides from it what each of its shots should hit, and
//! compares that with the server's verdict ([`tickforge_proto::msg::Event::ShotResult`]).
//!
//! The bot's view is the newest snapshot (it does not interpolate), so its own verdict is
//! tested at the newest tick it holds: the pose there is computed exactly from the
//! quantized state. The server tests the same tick up to a round trip later, from exact
//! states and, between posing ticks, lerped poses. What the two disagree on is what hit
//! registration costs at that latency.

use std::sync::Arc;

use tickforge_game::history::{History, HistoryConfig, PlayerSample, Posing};
use tickforge_game::hitscan::{self, Shot};
use tickforge_game::pose::Stance;
use tickforge_game::rules::BodyPart;
use tickforge_game::{Map, PlayerSlot, PlayerState, Tick, UserCmd, Vec3};
use tickforge_proto::msg::NONE;
use tickforge_telemetry::Scopes;

/// Ticks of missed snapshots filled in with the last states seen, so the gaits (the run
/// cycle) go on as the server's do; a longer hole starts the history over.
const MAX_FILL_TICKS: u32 = 32;

/// Shot verdicts remembered until the server's arrives: a power of two, two seconds at
/// 128 Hz.
const VERDICT_RING: usize = 256;

/// Where aimers aim, above the feet, metres: the chest.
pub const CHEST_M: f32 = 1.2;

/// Who a shot hit: `(victim slot, part code)`, `None` for a miss.
pub type Verdict = Option<(u8, u8)>;

/// The wire code of a hitbox in a shot result: 0 head, 1 body, 2 legs.
pub fn part_code(part: BodyPart) -> u8 {
    match part {
        BodyPart::Head => 0,
        BodyPart::Body => 1,
        BodyPart::Legs => 2,
    }
}

/// Turns a shot result's fields into a [`Verdict`].
pub fn verdict_of(victim: u8, part: u8) -> Verdict {
    (victim != NONE).then_some((victim, part))
}

/// Agreement between the bots' verdicts and the server's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HitregCounts {
    /// Shots compared: a server verdict arrived for a shot the bot had judged.
    pub shots: u64,
    /// The server's verdict was a hit.
    pub server_hits: u64,
    /// Both named the same victim, or both a miss.
    pub agree: u64,
    /// The bot saw a hit, the server a miss.
    pub bot_hit_server_miss: u64,
    /// The bot saw a miss, the server a hit.
    pub bot_miss_server_hit: u64,
    /// Both saw a hit, on different players.
    pub other_victim: u64,
    /// Of `bot_hit_server_miss`: the bot's victim was already dead at the server when it
    /// fired (killed by someone else while the shot travelled).
    pub victim_dead_at_fire: u64,
}

impl HitregCounts {
    /// Counts one comparison; `victim_dead` when the bot's victim was dead at the server
    /// when it fired.
    pub fn compare(&mut self, bot: Verdict, server: Verdict, victim_dead: bool) {
        self.shots += 1;
        self.server_hits += u64::from(server.is_some());
        match (bot.map(|v| v.0), server.map(|v| v.0)) {
            (a, b) if a == b => self.agree += 1,
            (Some(_), None) => {
                self.bot_hit_server_miss += 1;
                self.victim_dead_at_fire += u64::from(victim_dead);
            }
            (None, Some(_)) => self.bot_miss_server_hit += 1,
            _ => self.other_victim += 1,
        }
    }

    /// Adds another bot's counts.
    pub fn merge(&mut self, other: &HitregCounts) {
        self.shots += other.shots;
        self.server_hits += other.server_hits;
        self.agree += other.agree;
        self.bot_hit_server_miss += other.bot_hit_server_miss;
        self.bot_miss_server_hit += other.bot_miss_server_hit;
        self.other_victim += other.other_victim;
        self.victim_dead_at_fire += other.victim_dead_at_fire;
    }
}

/// What one bot saw of its match: the states of its snapshots, tick by tick, and who is
/// alive.
pub struct ClientView {
    map: Arc<Map>,
    history: History,
    states: Vec<PlayerState>,
    alive: Vec<bool>,
    /// `(seq, verdict)` by `seq % VERDICT_RING`.
    verdicts: Box<[(u32, Verdict)]>,
    scopes: Scopes,
}

impl ClientView {
    /// A view of a match of `players` on `map` at `tick_hz`, with the server's default
    /// history settings (max rewind, posing every 4th tick).
    pub fn new(map: Arc<Map>, players: u8, tick_hz: u32) -> Self {
        let defaults = HistoryConfig::default();
        let history = History::new(HistoryConfig {
            players,
            tick_hz: std::num::NonZeroU32::new(tick_hz).unwrap_or(defaults.tick_hz),
            ..defaults
        })
        .expect("the default rewind is under the cap");
        ClientView {
            map,
            history,
            states: vec![PlayerState::default(); usize::from(players)],
            alive: vec![true; usize::from(players)],
            verdicts: vec![(0, None); VERDICT_RING].into_boxed_slice(),
            scopes: Scopes::new(std::time::Instant::now),
        }
    }

    /// Player slots.
    pub fn players(&self) -> usize {
        self.states.len()
    }

    /// The newest tick recorded.
    pub fn newest(&self) -> Option<Tick> {
        self.history.newest()
    }

    /// The states of the newest snapshot, by slot.
    pub fn states(&self) -> &[PlayerState] {
        &self.states
    }

    /// Who is alive, by slot, as the server's events said.
    pub fn alive(&self) -> &[bool] {
        &self.alive
    }

    /// Marks `slot` alive or dead (an [`tickforge_proto::msg::Event::Alive`]).
    pub fn set_alive(&mut self, slot: u8, alive: bool) {
        if let Some(a) = self.alive.get_mut(usize::from(slot)) {
            *a = alive;
        }
    }

    /// Records the states of the snapshot of `tick` (`(slot, state)` pairs; slots not given
    /// keep their last state). Older snapshots than the newest are ignored; a match that
    /// started over (a tick far behind) starts the history over.
    pub fn record(&mut self, tick: Tick, states: impl IntoIterator<Item = (u8, PlayerState)>) {
        if let Some(newest) = self.history.newest() {
            let ahead = tick.0.wrapping_sub(newest.0);
            if ahead == 0 || ahead > u32::MAX / 2 && newest.0.wrapping_sub(tick.0) <= 1024 {
                return;
            }
            // Missed snapshots: the last states held, so the gaits keep running.
            if (2..=MAX_FILL_TICKS).contains(&ahead) {
                for t in 1..ahead {
                    self.record_now(Tick(newest.0.wrapping_add(t)));
                }
            }
        }
        for (slot, state) in states {
            if let Some(s) = self.states.get_mut(usize::from(slot)) {
                *s = state;
            }
        }
        self.record_now(tick);
    }

    fn record_now(&mut self, tick: Tick) {
        let samples = self
            .states
            .iter()
            .zip(&self.alive)
            .map(|(s, &alive)| PlayerSample {
                state: *s,
                stance: Stance::Standing,
                alive,
            });
        // The bot does not know the round's phase: combat is assumed (buy-phase ticks are
        // idle on the server, and no shot hurts then).
        self.history
            .record(tick, samples, Posing::Animated, &self.scopes);
    }

    /// Where `shooter`'s shots start in this view: its eye on the newest snapshot.
    pub fn eye_of(&self, shooter: u8) -> Option<Vec3> {
        let s = self.states.get(usize::from(shooter))?;
        let eye = self.history.config().pose.eye_height_m(Stance::Standing);
        Some(s.origin + Vec3::new(0.0, 0.0, eye))
    }

    /// What a shot of `shooter` with `cmd`, made looking at `view_tick`, hits in this view.
    pub fn judge(&self, shooter: u8, cmd: &UserCmd, view_tick: Tick) -> Verdict {
        let origin = self.eye_of(shooter)?;
        let shot = Shot {
            shooter: PlayerSlot(shooter),
            command_tick: view_tick,
            interp_delay_ticks: 0.0,
            origin,
            direction: hitscan::aim_direction(cmd.yaw, cmd.pitch),
            max_range_m: f32::INFINITY,
        };
        hitscan::fire(&shot, &self.map, &self.history, &self.alive, &self.scopes)
            .map(|h| (h.victim.0, part_code(h.part)))
    }

    /// Judges and remembers the verdict of input `seq`.
    pub fn judge_input(&mut self, seq: u32, shooter: u8, cmd: &UserCmd, view_tick: Tick) {
        let v = self.judge(shooter, cmd, view_tick);
        self.verdicts[seq as usize % VERDICT_RING] = (seq, v);
    }

    /// The verdict remembered for input `seq`, if it is still held.
    pub fn verdict(&self, seq: u32) -> Option<Verdict> {
        let (s, v) = self.verdicts[seq as usize % VERDICT_RING];
        (s == seq && seq != 0).then_some(v)
    }

    /// The nearest living enemy of `me` (teams by slot parity) that `me`'s eye can see on
    /// the newest snapshot: the point to aim at, and whether `me` stands still.
    pub fn sight(&self, me: u8) -> Option<Sight> {
        let mine = usize::from(me);
        if !self.alive.get(mine).copied().unwrap_or(false) {
            return None;
        }
        let eye = self.eye_of(me)?;
        let mut best: Option<(f32, Vec3)> = None;
        for (slot, s) in self.states.iter().enumerate() {
            if slot % 2 == mine % 2 || !self.alive[slot] {
                continue;
            }
            let aim = s.origin + Vec3::new(0.0, 0.0, CHEST_M);
            let d = aim - eye;
            let dist = d.length();
            let too_near = dist.is_nan() || dist <= 0.5;
            if too_near || best.is_some_and(|(b, _)| b <= dist) {
                continue;
            }
            if self.map.trace_ray(eye, d * (1.0 / dist), dist).is_some() {
                continue;
            }
            best = Some((dist, aim));
        }
        let own = self.states[mine];
        best.map(|(_, aim)| Sight {
            eye,
            aim,
            still: own.on_ground && own.velocity.horizontal_length() < 0.05,
        })
    }
}

/// An enemy in view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sight {
    /// The bot's eye, metres.
    pub eye: Vec3,
    /// Where to aim, metres.
    pub aim: Vec3,
    /// The bot stands still (a shot starts where the server will start it).
    pub still: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickforge_game::history::HistoryConfig;
    use tickforge_game::BuiltinMap;

    fn quantize(s: &PlayerState) -> PlayerState {
        let q = |v: f32| (v * 100.0).round() / 100.0;
        PlayerState {
            origin: Vec3::new(q(s.origin.x), q(s.origin.y), q(s.origin.z)),
            velocity: Vec3::new(q(s.velocity.x), q(s.velocity.y), q(s.velocity.z)),
            ..*s
        }
    }

    /// Agreement, over a scripted crossing, between a server history fed exact states and
    /// tested `lag` ticks later and a client view fed `client_state(state)`.
    fn crossing_agreement(
        lag: u32,
        client_state: impl Fn(&PlayerState) -> PlayerState,
    ) -> (HitregCounts, u32) {
        let map = Arc::new(BuiltinMap::Arena.load());
        let scopes = Scopes::new(std::time::Instant::now);
        let mut server = History::new(HistoryConfig {
            players: 2,
            ..HistoryConfig::default()
        })
        .unwrap();
        let mut client = ClientView::new(map.clone(), 2, 128);
        // Open floor in the arena's north lane (y = 17): the shooter at x = -10 facing +x,
        // the target 10 m ahead running across the line of fire at 6 m/s, with a little
        // vertical bob; the shooter sweeps its aim slowly across it.
        let shooter = PlayerState {
            origin: Vec3::new(-10.0, 17.0, 0.03125),
            on_ground: true,
            ..Default::default()
        };
        let state_at = |t: u32| PlayerState {
            origin: Vec3::new(
                0.0,
                // A triangle wave: 1.5 m either side of the line and back.
                17.0 + 1.5 - (6.0 * t as f32 / 128.0 % 6.0 - 3.0).abs(),
                0.03125 + 0.01 * (t as f32 * 0.37).sin(),
            ),
            velocity: Vec3::new(0.0, 6.0, 0.0),
            on_ground: true,
            yaw: 16384,
            ..Default::default()
        };
        // Aim at the target seen at `t`, off by up to ±1.6° in yaw, at the chest or the head
        // or over it.
        let aim = |t: u32| {
            let y = state_at(t).origin.y - 17.0;
            let yaw = (y.atan2(10.0) / std::f32::consts::TAU * 65536.0).round() as i32;
            UserCmd {
                yaw: (yaw + (t as i32 * 37 % 600 - 300)) as u16,
                pitch: [-400, 0, 300][t as usize % 3],
                ..Default::default()
            }
        };
        let mut counts = HitregCounts::default();
        let mut hits = 0;
        let total = 600;
        for t in 0..total + lag {
            let states = [shooter, state_at(t)];
            server.record(
                Tick(t),
                states.iter().map(|s| PlayerSample {
                    state: *s,
                    stance: Stance::Standing,
                    alive: true,
                }),
                Posing::Animated,
                &scopes,
            );
            if t < total {
                client.record(
                    Tick(t),
                    states
                        .iter()
                        .enumerate()
                        .map(|(i, s)| (i as u8, client_state(s))),
                );
                let cmd = aim(t);
                client.judge_input(t + 1, 0, &cmd, Tick(t));
            }
            // The server fires the shot made at t - lag, now.
            if let Some(view) = t.checked_sub(lag) {
                let cmd = aim(view);
                let shot = Shot {
                    shooter: PlayerSlot(0),
                    command_tick: Tick(view),
                    interp_delay_ticks: 0.0,
                    origin: client.eye_of(0).unwrap(),
                    direction: hitscan::aim_direction(cmd.yaw, cmd.pitch),
                    max_range_m: f32::INFINITY,
                };
                let theirs = hitscan::fire(&shot, &map, &server, &[true, true], &scopes)
                    .map(|h| (h.victim.0, part_code(h.part)));
                hits += u32::from(theirs.is_some());
                counts.compare(client.verdict(view + 1).unwrap(), theirs, false);
            }
        }
        (counts, hits)
    }

    #[test]
    fn a_client_fed_the_servers_exact_states_agrees_on_every_shot() {
        for lag in [0, 6, 19] {
            let (counts, hits) = crossing_agreement(lag, |s| *s);
            assert_eq!(counts.shots, 600);
            assert!(hits > 60 && hits < 540, "hits and misses both: {hits}");
            assert_eq!(counts.agree, counts.shots, "lag {lag}: {counts:?}");
        }
    }

    #[test]
    fn a_client_fed_centimetre_states_agrees_on_nearly_every_shot() {
        for lag in [0, 19] {
            let (counts, _) = crossing_agreement(lag, quantize);
            let rate = counts.agree as f64 / counts.shots as f64;
            assert!(rate >= 0.97, "lag {lag}: {rate} {counts:?}");
        }
    }

    #[test]
    fn counts_sort_disagreements() {
        let mut c = HitregCounts::default();
        c.compare(Some((1, 0)), Some((1, 2)), false);
        c.compare(None, None, false);
        c.compare(Some((1, 0)), None, true);
        c.compare(None, Some((3, 1)), false);
        c.compare(Some((1, 0)), Some((3, 1)), false);
        assert_eq!(
            c,
            HitregCounts {
                shots: 5,
                server_hits: 3,
                agree: 2,
                bot_hit_server_miss: 1,
                bot_miss_server_hit: 1,
                other_victim: 1,
                victim_dead_at_fire: 1,
            }
        );
    }
}
