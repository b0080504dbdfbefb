//! Hit registration seen from the client: a bot keeps its own lag-compensation history of
//! the states its snapshots carried, decides from it what each of its shots should hit, and
//! compares that with the server's verdict ([`tickforge_shooter::ShooterEvent::ShotResult`]).
//!
//! The bot shows the world as a real client does: `interp_delay_ticks` behind the newest
//! snapshot, between two ticks. Snapshots wait in a small jitter buffer until they are
//! `commit_lag_ticks` behind the newest, so one that arrives late or out of order still
//! takes its place; only then do they enter the history, tick by tick, posed every
//! [`HistoryConfig::pose_every`]th tick and lerped between as the server's are. A shot is
//! judged at the moment shown, and the input names that moment, so the server rewinds to
//! the same one. What the two disagree on is what hit registration costs at that latency.
use std::sync::Arc;

use tickforge_game::history::{History, HistoryConfig, PlayerSample, Posing};
use tickforge_game::hitscan::{self, Shot};
use tickforge_game::rules::BodyPart;
use tickforge_game::{Map, PlayerSlot, PlayerState, Tick, UserCmd, Vec3, ViewTime};
use tickforge_shooter::NONE;
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
    /// Of `bot_miss_server_hit`: the server's victim was not in the bot's view at that
    /// moment (never sent, or hidden by the fog of war).
    pub server_hit_unseen: u64,
    /// Both saw a hit, on different players.
    pub other_victim: u64,
    /// Server hits that did no damage: the victim, alive as the shooter saw it, had been
    /// killed by someone else before the shot reached the server.
    pub victim_dead_at_fire: u64,
}

impl HitregCounts {
    /// Counts one comparison; `victim_dead` when the server's hit did no damage because its
    /// victim had died before the shot arrived.
    pub fn compare(&mut self, bot: Verdict, server: Verdict, victim_dead: bool) {
        self.shots += 1;
        self.server_hits += u64::from(server.is_some());
        self.victim_dead_at_fire += u64::from(victim_dead);
        match (bot.map(|v| v.0), server.map(|v| v.0)) {
            (a, b) if a == b => self.agree += 1,
            (Some(_), None) => self.bot_hit_server_miss += 1,
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
        self.server_hit_unseen += other.server_hit_unseen;
        self.other_victim += other.other_victim;
        self.victim_dead_at_fire += other.victim_dead_at_fire;
    }
}

/// How a bot shows the world: how far behind the newest snapshot, and how long snapshots
/// wait for late ones before they are history.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ViewDelay {
    /// Ticks between the newest snapshot and the moment shown (may be fractional).
    pub interp_delay_ticks: f32,
    /// Ticks a snapshot waits in the jitter buffer before it enters the history.
    pub commit_lag_ticks: u32,
}

impl ViewDelay {
    /// No delay at all: the newest snapshot is shown and committed at once.
    pub const NONE: ViewDelay = ViewDelay {
        interp_delay_ticks: 0.0,
        commit_lag_ticks: 0,
    };
}

/// A snapshot waiting in the jitter buffer: its tick and how the server posed it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Buffered {
    tick: Tick,
    posing: Option<Posing>,
}

/// Ticks of snapshots the jitter buffer holds: a power of two, a quarter second at 128 Hz.
const JITTER_RING: u32 = 32;

/// What one bot saw of its match: the states of its snapshots, tick by tick, and who is
/// alive.
pub struct ClientView {
    map: Arc<Map>,
    history: History,
    /// The states of the newest snapshot, by slot.
    states: Vec<PlayerState>,
    /// Who is alive now, as the server's events said.
    alive: Vec<bool>,
    /// `(seq, verdict)` by `seq % VERDICT_RING`.
    verdicts: Box<[(u32, Verdict, ViewTime)]>,
    scopes: Scopes,
    delay: ViewDelay,
    /// Snapshots not yet committed: the tick held in each slot of the ring (by
    /// `tick % JITTER_RING`) and how the server posed it (`None`: it did not say), and its
    /// rows of `(state, alive)` by player, `None` where the snapshot said nothing.
    buffered: Box<[Option<Buffered>]>,
    rows: Vec<Option<(PlayerState, bool)>>,
    /// The last row committed, held for a tick whose snapshot never came, and its posing.
    last_row: Vec<(PlayerState, bool)>,
    last_posing: Posing,
    newest: Option<Tick>,
    committed: Option<Tick>,
    /// Snapshots that came after their tick was committed.
    pub late: u64,
    /// Ticks committed without their snapshot (the last states held).
    pub filled: u64,
}

impl ClientView {
    /// A view of a match of `players` on `map` at `tick_hz`, shown `delay` behind, with the
    /// server's default history settings (max rewind, posing every 4th tick) but
    /// `pose_every`.
    pub fn new(
        map: Arc<Map>,
        players: u8,
        tick_hz: u32,
        pose_every: std::num::NonZeroU8,
        delay: ViewDelay,
    ) -> Self {
        let defaults = HistoryConfig::default();
        let history = History::new(HistoryConfig {
            players,
            tick_hz: std::num::NonZeroU32::new(tick_hz).unwrap_or(defaults.tick_hz),
            pose_every,
            ..defaults
        })
        .expect("the default rewind is under the cap");
        let n = usize::from(players);
        ClientView {
            map,
            history,
            states: vec![PlayerState::default(); n],
            alive: vec![true; n],
            verdicts: vec![(0, None, ViewTime::default()); VERDICT_RING].into_boxed_slice(),
            scopes: Scopes::new(std::time::Instant::now),
            delay,
            buffered: vec![None; JITTER_RING as usize].into_boxed_slice(),
            rows: vec![None; JITTER_RING as usize * n],
            // A player never sent is nobody to aim at or hit.
            last_row: vec![(PlayerState::default(), false); n],
            last_posing: Posing::Animated,
            newest: None,
            committed: None,
            late: 0,
            filled: 0,
        }
    }

    /// Player slots.
    pub fn players(&self) -> usize {
        self.states.len()
    }

    /// The newest snapshot tick received.
    pub fn newest(&self) -> Option<Tick> {
        self.newest
    }

    /// The states of the newest snapshot, by slot.
    pub fn states(&self) -> &[PlayerState] {
        &self.states
    }

    /// Who is alive, by slot, as the server's events said.
    pub fn alive(&self) -> &[bool] {
        &self.alive
    }

    /// Marks `slot` alive or dead (an [`tickforge_shooter::ShooterEvent::Alive`]).
    pub fn set_alive(&mut self, slot: u8, alive: bool) {
        if let Some(a) = self.alive.get_mut(usize::from(slot)) {
            *a = alive;
        }
    }

    /// Takes the snapshot of `tick`, posed as `posing` on the server (`None`: unsaid, as
    /// before): `(slot, Some((state, alive)))` for each player it carried, `(slot, None)` for
    /// one it says is gone from view (hidden, so not a target); slots not given keep their
    /// last state. Commits to the history every tick that is now
    /// `commit_lag_ticks` behind the newest; a snapshot for a tick already committed is
    /// counted late and dropped. A long silence (a tick far ahead) starts the history over;
    /// a match that started over (a tick far behind) starts the whole view over: nothing
    /// the old match's snapshots said of anyone holds in the new one.
    pub fn record(
        &mut self,
        tick: Tick,
        posing: Option<Posing>,
        states: impl IntoIterator<Item = (u8, Option<(PlayerState, bool)>)>,
    ) {
        if let Some(newest) = self.newest {
            let ahead = tick.0.wrapping_sub(newest.0) as i32;
            if ahead < -(JITTER_RING as i32) {
                self.start_over();
            } else if ahead > MAX_FILL_TICKS as i32 {
                self.restart();
            }
        }
        if self
            .committed
            .is_some_and(|c| tick.0.wrapping_sub(c.0) as i32 <= 0)
        {
            self.late += 1;
            return;
        }
        let n = self.states.len();
        let at = (tick.0 % JITTER_RING) as usize;
        let row = &mut self.rows[at * n..(at + 1) * n];
        row.fill(None);
        let newer = self
            .newest
            .is_none_or(|t| tick.0.wrapping_sub(t.0) as i32 > 0);
        for (slot, record) in states {
            let i = usize::from(slot);
            let Some(r) = row.get_mut(i) else {
                continue;
            };
            *r = Some(match record {
                Some(seen) => seen,
                // Gone from view: where it was last seen, not a target.
                None => (self.states[i], false),
            });
            if let (true, Some((state, _))) = (newer, record) {
                self.states[i] = state;
            }
        }
        self.buffered[at] = Some(Buffered { tick, posing });
        if newer {
            self.newest = Some(tick);
        }
        self.commit();
    }

    /// Forgets the ticks held (the history and the jitter buffer), keeping the last states
    /// seen: a long silence in the same match.
    fn restart(&mut self) {
        self.history.clear();
        self.buffered.fill(None);
        self.newest = None;
        self.committed = None;
    }

    /// Forgets the old match as well: its players' last states. A new match's snapshots
    /// never mention a player the fog of war hides from this client (its replication
    /// starts afresh, with nothing to say "gone" about), so a state held over from the old
    /// match would stand, alive, where that player was when the old match ended: a target
    /// only this client sees. Until a snapshot shows it, a player is nobody to aim at or
    /// hit, as at the first connection.
    pub(crate) fn start_over(&mut self) {
        self.restart();
        self.rows.fill(None);
        self.last_row.fill((PlayerState::default(), false));
        self.states.fill(PlayerState::default());
        self.last_posing = Posing::Animated;
    }

    /// Commits the buffered ticks up to `commit_lag_ticks` behind the newest.
    fn commit(&mut self) {
        let Some(newest) = self.newest else {
            return;
        };
        let upto = Tick(newest.0.wrapping_sub(self.delay.commit_lag_ticks));
        let mut next = match self.committed {
            Some(c) => c.next(),
            // The first commit waits for its own snapshot.
            None if self.buffered[(upto.0 % JITTER_RING) as usize].map(|b| b.tick)
                == Some(upto) =>
            {
                upto
            }
            None => return,
        };
        let n = self.states.len();
        while upto.0.wrapping_sub(next.0) as i32 >= 0 {
            let at = (next.0 % JITTER_RING) as usize;
            if let Some(Buffered { posing, .. }) = self.buffered[at].filter(|b| b.tick == next) {
                let row = &self.rows[at * n..(at + 1) * n];
                // Slots the snapshot said nothing of keep their last state.
                for (last, seen) in self.last_row.iter_mut().zip(row) {
                    if let Some(seen) = seen {
                        *last = *seen;
                    }
                }
                self.last_posing = posing.unwrap_or(self.last_posing);
                self.buffered[at] = None;
            } else {
                // Never came: the last states held, so the gaits keep running.
                self.filled += 1;
            }
            let samples = self.last_row.iter().map(|&(state, alive)| PlayerSample {
                state,
                stance: state.stance(),
                alive,
            });
            // Posed as the server posed it: idle in the buy phase.
            self.history
                .record(next, samples, self.last_posing, &self.scopes);
            self.committed = Some(next);
            next = next.next();
        }
    }

    /// The moment this bot shows: `interp_delay_ticks` behind the newest snapshot, no later
    /// than the newest tick committed. `None` before the first commit.
    pub fn view_time(&self) -> Option<ViewTime> {
        let newest = self.newest?;
        let committed = self.committed?;
        let v = ViewTime::behind(newest, self.delay.interp_delay_ticks);
        let upper = if v.frac == 0 { v.tick } else { v.tick.next() };
        Some(if upper.0.wrapping_sub(committed.0) as i32 > 0 {
            ViewTime::at(committed)
        } else {
            v
        })
    }

    /// Where `shooter`'s shots start in this view: its eye on the newest snapshot (the
    /// server starts a shot where the shooter is when it fires).
    pub fn eye_of(&self, shooter: u8) -> Option<Vec3> {
        let s = self.states.get(usize::from(shooter))?;
        let eye = self.history.config().pose.eye_height_m(s.stance());
        Some(s.origin + Vec3::new(0.0, 0.0, eye))
    }

    /// What a shot of `shooter` with `cmd`, made looking at `view`, hits in this view.
    pub fn judge(&self, shooter: u8, cmd: &UserCmd, view: ViewTime) -> Verdict {
        let origin = self.eye_of(shooter)?;
        let (command_tick, interp_delay_ticks) = view.rewind_args();
        let shot = Shot {
            shooter: PlayerSlot(shooter),
            command_tick,
            interp_delay_ticks,
            origin,
            direction: hitscan::aim_direction(cmd.yaw, cmd.pitch),
            max_range_m: f32::INFINITY,
        };
        // Who can be hit is who was alive at the moment shown: the history knows.
        let anyone = [true; u8::MAX as usize];
        let anyone = &anyone[..self.states.len()];
        hitscan::fire(&shot, &self.map, &self.history, anyone, &self.scopes)
            .map(|h| (h.victim.0, part_code(h.part)))
    }

    /// Judges and remembers the verdict of input `seq`.
    pub fn judge_input(&mut self, seq: u32, shooter: u8, cmd: &UserCmd, view: ViewTime) {
        let v = self.judge(shooter, cmd, view);
        self.verdicts[seq as usize % VERDICT_RING] = (seq, v, view);
    }

    /// The verdict remembered for input `seq`, if it is still held.
    pub fn verdict(&self, seq: u32) -> Option<Verdict> {
        let (s, v, _) = self.verdicts[seq as usize % VERDICT_RING];
        (s == seq && seq != 0).then_some(v)
    }

    /// Whether `slot` was in this view (sent, and alive) at the moment input `seq` was
    /// judged; `None` when that input is no longer remembered or its moment no longer held.
    pub fn was_shown(&self, seq: u32, slot: u8) -> Option<bool> {
        let (s, _, view) = self.verdicts[seq as usize % VERDICT_RING];
        if s != seq || seq == 0 {
            return None;
        }
        let (command_tick, delay) = view.rewind_args();
        let time = self.history.rewind_time(command_tick, delay)?;
        Some(self.history.origin_at(PlayerSlot(slot), time).is_some())
    }

    /// The nearest living enemy of `me` (teams by slot parity) that `me`'s eye can see at
    /// the moment shown: the point to aim at, and whether `me` stands still.
    pub fn sight(&self, me: u8) -> Option<Sight> {
        let mine = usize::from(me);
        if !self.alive.get(mine).copied().unwrap_or(false) {
            return None;
        }
        let eye = self.eye_of(me)?;
        let (command_tick, delay) = self.view_time()?.rewind_args();
        let time = self.history.rewind_time(command_tick, delay)?;
        let mut best: Option<(f32, Vec3)> = None;
        for slot in 0..self.states.len() {
            if slot % 2 == mine % 2 || !self.alive[slot] {
                continue;
            }
            let Some(origin) = self.history.origin_at(PlayerSlot(slot as u8), time) else {
                continue;
            };
            let aim = origin + Vec3::new(0.0, 0.0, CHEST_M);
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

    const FOUR: std::num::NonZeroU8 = std::num::NonZeroU8::new(4).unwrap();
    /// Shown 4.5 ticks behind, committed 2 behind: a client with a jitter buffer.
    const INTERPOLATING: ViewDelay = ViewDelay {
        interp_delay_ticks: 4.5,
        commit_lag_ticks: 2,
    };

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
        delay: ViewDelay,
        client_state: impl Fn(&PlayerState) -> PlayerState,
    ) -> (HitregCounts, u32) {
        let map = Arc::new(BuiltinMap::Arena.load());
        let scopes = Scopes::new(std::time::Instant::now);
        let mut server = History::new(HistoryConfig {
            players: 2,
            ..HistoryConfig::default()
        })
        .unwrap();
        let mut client = ClientView::new(map.clone(), 2, 128, FOUR, delay);
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
        let mut views = vec![ViewTime::default(); total as usize];
        for t in 0..total + lag {
            let states = [shooter, state_at(t)];
            server.record(
                Tick(t),
                states.iter().map(|s| PlayerSample {
                    state: *s,
                    stance: tickforge_game::pose::Stance::Standing,
                    alive: true,
                }),
                Posing::Animated,
                &scopes,
            );
            if t < total {
                client.record(
                    Tick(t),
                    Some(Posing::Animated),
                    states
                        .iter()
                        .enumerate()
                        .map(|(i, s)| (i as u8, Some((client_state(s), true)))),
                );
                let cmd = aim(t);
                let view = client.view_time().unwrap_or(ViewTime::at(Tick(0)));
                views[t as usize] = view;
                client.judge_input(t + 1, 0, &cmd, view);
            }
            // The server fires the shot made at t - lag, now.
            if let Some(sent) = t.checked_sub(lag) {
                let cmd = aim(sent);
                let (command_tick, interp_delay_ticks) = views[sent as usize].rewind_args();
                let shot = Shot {
                    shooter: PlayerSlot(0),
                    command_tick,
                    interp_delay_ticks,
                    origin: client.eye_of(0).unwrap(),
                    direction: hitscan::aim_direction(cmd.yaw, cmd.pitch),
                    max_range_m: f32::INFINITY,
                };
                let theirs = hitscan::fire(&shot, &map, &server, &[true, true], &scopes)
                    .map(|h| (h.victim.0, part_code(h.part)));
                hits += u32::from(theirs.is_some());
                counts.compare(client.verdict(sent + 1).unwrap(), theirs, false);
            }
        }
        (counts, hits)
    }

    #[test]
    fn a_client_fed_the_servers_exact_states_agrees_on_every_shot() {
        for delay in [ViewDelay::NONE, INTERPOLATING] {
            for lag in [0, 6, 19] {
                let (counts, hits) = crossing_agreement(lag, delay, |s| *s);
                assert_eq!(counts.shots, 600);
                assert!(hits > 60 && hits < 540, "hits and misses both: {hits}");
                assert_eq!(counts.agree, counts.shots, "lag {lag}: {counts:?}");
            }
        }
    }

    #[test]
    fn a_client_fed_centimetre_states_agrees_on_nearly_every_shot() {
        for delay in [ViewDelay::NONE, INTERPOLATING] {
            for lag in [0, 19] {
                let (counts, _) = crossing_agreement(lag, delay, quantize);
                let rate = counts.agree as f64 / counts.shots as f64;
                assert!(rate >= 0.97, "lag {lag}: {rate} {counts:?}");
            }
        }
    }

    /// A row of two players, the second at `x`.
    fn row(x: f32) -> [(u8, Option<(PlayerState, bool)>); 2] {
        let at = |x| PlayerState {
            origin: Vec3::new(x, 0.0, 0.0),
            ..Default::default()
        };
        [(0, Some((at(0.0), true))), (1, Some((at(x), true)))]
    }

    #[test]
    fn the_jitter_buffer_places_late_snapshots_and_shows_between_ticks() {
        let map = Arc::new(BuiltinMap::Arena.load());
        let mut v = ClientView::new(map, 2, 128, FOUR, INTERPOLATING);
        // The target stands at x = tick - 1000. Tick 1012 arrives after 1013; 1014 never does.
        for t in [1010, 1011, 1013, 1012, 1015, 1016, 1017, 1018] {
            v.record(Tick(t), Some(Posing::Animated), row((t - 1000) as f32));
        }
        assert_eq!(v.newest(), Some(Tick(1018)));
        assert_eq!((v.late, v.filled), (0, 1), "1012 in time, 1014 filled");
        let x_at = |v: &ClientView, view: ViewTime| {
            let (c, d) = view.rewind_args();
            let time = v.history.rewind_time(c, d).unwrap();
            v.history.origin_at(PlayerSlot(1), time).unwrap().x
        };
        // Shown 4.5 ticks behind 1018, committed up to 1016.
        let shown = v.view_time().unwrap();
        assert_eq!(
            shown,
            ViewTime {
                tick: Tick(1013),
                frac: 128
            }
        );
        // 1014 holds 1013's states, so 1013.5 lerps 13 to 13; 1012.5, the late-but-placed
        // snapshot, lerps 12 to 13; 1014.5 lerps the held 13 to 15.
        assert_eq!(x_at(&v, shown), 13.0);
        let half = |t| ViewTime {
            tick: Tick(t),
            frac: 128,
        };
        assert_eq!(x_at(&v, half(1012)), 12.5);
        assert_eq!(x_at(&v, half(1014)), 14.0);
        // A snapshot for a committed tick is late.
        v.record(Tick(1014), Some(Posing::Animated), row(14.0));
        assert_eq!(v.late, 1);
        // A match that starts over starts the view over.
        v.record(Tick(0), Some(Posing::Animated), row(0.0));
        assert_eq!(v.newest(), Some(Tick(0)));
    }

    /// A command aiming from `eye` at `at`.
    fn aim_at(eye: Vec3, at: Vec3) -> UserCmd {
        let d = at - eye;
        let turns = |r: f32| (r / std::f32::consts::TAU * 65536.0).round() as i32;
        UserCmd {
            buttons: tickforge_game::buttons::FIRE,
            yaw: turns(d.y.atan2(d.x)) as u16,
            pitch: turns(d.z.atan2(d.horizontal_length())) as i16,
            ..Default::default()
        }
    }

    /// What the server's `history` says a shot of slot 0 from `eye` with `cmd`, made
    /// looking at `view`, hits.
    fn server_verdict(
        history: &History,
        map: &Map,
        eye: Vec3,
        cmd: &UserCmd,
        view: ViewTime,
    ) -> Verdict {
        let (command_tick, interp_delay_ticks) = view.rewind_args();
        let shot = Shot {
            shooter: PlayerSlot(0),
            command_tick,
            interp_delay_ticks,
            origin: eye,
            direction: hitscan::aim_direction(cmd.yaw, cmd.pitch),
            max_range_m: f32::INFINITY,
        };
        let scopes = Scopes::new(std::time::Instant::now);
        hitscan::fire(&shot, map, history, &[true, true], &scopes)
            .map(|h| (h.victim.0, part_code(h.part)))
    }

    #[test]
    fn a_match_that_starts_over_forgets_the_players_its_snapshots_have_not_shown() {
        let map = Arc::new(BuiltinMap::Arena.load());
        let scopes = Scopes::new(std::time::Instant::now);
        let mut v = ClientView::new(map.clone(), 2, 128, FOUR, INTERPOLATING);
        let standing = |x: f32, y: f32| PlayerState {
            origin: Vec3::new(x, y, 0.03125),
            on_ground: true,
            ..Default::default()
        };
        // The arena's north lane: the shooter (slot 0) at x = -10, its enemy (slot 1) 10 m
        // ahead on the line, standing.
        let shooter = standing(-10.0, 17.0);
        let ghost = standing(0.0, 17.0);
        let chest = |s: &PlayerState| s.origin + Vec3::new(0.0, 0.0, CHEST_M);
        let both = |target: PlayerState| [(0, Some((shooter, true))), (1, Some((target, true)))];
        for t in 5000..5040 {
            v.record(Tick(t), Some(Posing::Animated), both(ghost));
        }
        let eye = v.eye_of(0).unwrap();
        let at_ghost = aim_at(eye, chest(&ghost));
        let shown = v.view_time().unwrap();
        assert_eq!(v.judge(0, &at_ghost, shown).map(|h| h.0), Some(1));
        // A long silence in the same match keeps who was seen: snapshots of the shooter
        // alone (its enemy unchanged, so unsaid) still show the enemy where it stands.
        for t in 5080..5090 {
            v.record(
                Tick(t),
                Some(Posing::Animated),
                [(0, Some((shooter, true)))],
            );
        }
        let shown = v.view_time().unwrap();
        assert_eq!(v.judge(0, &at_ghost, shown).map(|h| h.0), Some(1));
        assert!(v.sight(0).is_some());

        // The match ends and starts over at tick 0. The enemy respawned 1.5 m off the line
        // of fire, where the fog of war hides it from this client: the new match's
        // snapshots never mention it.
        let target = standing(0.0, 15.5);
        let mut server = History::new(HistoryConfig {
            players: 2,
            ..HistoryConfig::default()
        })
        .unwrap();
        let samples = |target: PlayerState| {
            [shooter, target].map(|state| PlayerSample {
                state,
                stance: state.stance(),
                alive: true,
            })
        };
        for t in 0..40 {
            server.record(Tick(t), samples(target), Posing::Animated, &scopes);
            v.record(
                Tick(t),
                Some(Posing::Animated),
                [(0, Some((shooter, true)))],
            );
        }
        // The shot at where the enemy stood in the old match hits nobody on the server, nor
        // in this view; and nobody is in sight.
        let shown = v.view_time().unwrap();
        assert_eq!(shown.tick.0 / 64, 0, "a moment of the new match: {shown:?}");
        let theirs = server_verdict(&server, &map, eye, &at_ghost, shown);
        assert_eq!(theirs, None);
        assert_eq!(v.judge(0, &at_ghost, shown), theirs);
        assert_eq!(v.sight(0), None);
        // Once a snapshot shows the enemy, it is a target where the server has it.
        for t in 40..60 {
            server.record(Tick(t), samples(target), Posing::Animated, &scopes);
            v.record(Tick(t), Some(Posing::Animated), both(target));
        }
        let at_target = aim_at(eye, chest(&target));
        let shown = v.view_time().unwrap();
        let theirs = server_verdict(&server, &map, eye, &at_target, shown);
        assert_eq!(theirs.map(|h| h.0), Some(1));
        assert_eq!(v.judge(0, &at_target, shown), theirs);
        assert_eq!(v.sight(0).map(|s| s.aim), Some(chest(&target)));
    }

    #[test]
    fn counts_sort_disagreements() {
        let mut c = HitregCounts::default();
        c.compare(Some((1, 0)), Some((1, 2)), true);
        c.compare(None, None, false);
        c.compare(Some((1, 0)), None, false);
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
                server_hit_unseen: 0,
                victim_dead_at_fire: 1,
            }
        );
    }
}
