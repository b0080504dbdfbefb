//! The lag-compensation history: what every player looked like on each of the last ticks, so
//! that a shot is tested against the world its shooter saw ([`crate::hitscan`]).
//!
//! One ring per match, allocated by [`History::new`] and never again. Every tick,
//! [`History::record`] copies each player's sample (position, velocity, view, stance, alive)
//! and advances its [`Gait`]: cheap. Every [`HistoryConfig::pose_every`]th tick it also poses every living player and
//! keeps the hitboxes ([`crate::pose`]): the expensive part, charged to
//! [`Category::Animation`]. Posing every 4th tick and lerping between the kept poses when a
//! rewind needs a tick in between is what VALORANT's servers do, for a quarter of the cost.
//! In [`Posing::Idle`] (the buy phase, when no shot can hurt) nothing is posed at all and
//! every player stands in [`Pose::IDLE`].
//!
//! A rewind to tick `t` places a player's hitboxes from three things: its feet and yaw at
//! `t`, recorded that tick; its pose at `t`, lerped between the posed ticks around `t`; and,
//! for a time between two ticks, the same at `t + 1`, lerped by the fraction. A tick with no
//! later posed tick in its run of animated ticks (the newest few, or the last ones before a
//! buy phase) has nothing to lerp toward: the rewind poses it from its recorded sample, so
//! the newest ticks are exact rather than held. So is a tick whose player was dead, or in
//! another stance, at one of the posed ticks around it: a stance changes at once, and
//! lerping a standing pose into a crouching one would put the head where it never was.
//!
//! The history reads the world's states and never writes them: a rewind returns values, and
//! live players are wherever the world put them.
//!
//! Ticks are recorded in order, one after another. A gap or a step back forgets everything
//! recorded before: no rewind lerps across a hole.
//!
//! The per-tick storage, the rewind time and its clamp are the runtime's lag-compensation
//! service ([`tickforge_sim::lagcomp::LagHistory`]): each tick it holds every living
//! player's sample (a dead player is absent) and, per tick, the key that tick's pose lerps
//! from. The posing, the keys and the gait are the shooter's, here.

use std::f32::consts::TAU;
use std::num::{NonZeroU32, NonZeroU8};
use std::time::Duration;

use tickforge_sim::lagcomp::{
    Bracket, LagConfig, LagError, LagHistory, LagStats, Rewind, RewindView,
};
use tickforge_telemetry::{Category, Scopes};

use crate::map::Aabb;
use crate::math::Vec3;
use crate::movement::PlayerState;
use crate::pose::{
    gait_blend_factor, lerp, pose_of, Gait, Hitboxes, LocalHitboxes, Pose, PoseParams, Stance,
};
use crate::{angle16_to_rad, PlayerSlot, Tick};

pub(crate) mod broad;

use broad::{BroadPhase, GRID_MIN_PLAYERS};

/// The longest rewind a history may be configured for: a shooter seeing the world a second
/// late is not playing the same game, and a longer rewind lets lag shoot around corners.
pub use tickforge_sim::lagcomp::MAX_REWIND_CAP;

// 128 Hz: VALORANT's tick; 7.8125 ms.
const DEFAULT_TICK_HZ: NonZeroU32 = match NonZeroU32::new(128) {
    Some(n) => n,
    None => panic!("zero"),
};
// VALORANT's servers animate every 4th frame and lerp between the saved poses.
const DEFAULT_POSE_EVERY: NonZeroU8 = match NonZeroU8::new(4) {
    Some(n) => n,
    None => panic!("zero"),
};

/// What a history holds and how often it poses; fixed for the life of a match.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HistoryConfig {
    /// Player slots.
    pub players: u16,
    /// Ticks per second of the match; the rewind is counted in these ticks.
    pub tick_hz: NonZeroU32,
    /// How far back a shot may be tested, at most [`MAX_REWIND_CAP`]. Converted to whole
    /// ticks once, rounding up ([`History::max_rewind_ticks`]).
    pub max_rewind: Duration,
    /// Pose every this many ticks (ticks whose number is a multiple of it), and lerp in
    /// between; 1 poses every tick.
    pub pose_every: NonZeroU8,
    /// Body proportions and run cycle.
    pub pose: PoseParams,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            players: 10,
            tick_hz: DEFAULT_TICK_HZ,
            // Source's sv_maxunlag is 1 s; 200 ms covers a 150 ms round trip plus two
            // snapshots of interpolation.
            max_rewind: Duration::from_millis(200),
            pose_every: DEFAULT_POSE_EVERY,
            pose: PoseParams::default(),
        }
    }
}

/// Why a history could not be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    /// The configured rewind is longer than [`MAX_REWIND_CAP`].
    #[error("max_rewind of {max_rewind:?} is over the cap of {cap:?}")]
    RewindOverCap {
        /// The rewind asked for.
        max_rewind: Duration,
        /// [`MAX_REWIND_CAP`].
        cap: Duration,
    },
}

/// Whether [`History::record`] poses players this tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Posing {
    /// Combat: pose every [`HistoryConfig::pose_every`]th tick, and on the first tick after
    /// an idle stretch.
    Animated,
    /// The buy phase: pose nobody; every player stands in [`Pose::IDLE`].
    Idle,
}

/// One player as the world left it after a tick: what [`History::record`] copies.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PlayerSample {
    /// Position, velocity and view.
    pub state: PlayerState,
    /// Standing or crouching.
    pub stance: Stance,
    /// Alive and in the match: only living players can be hit.
    pub alive: bool,
}

/// A point in time between two ticks: `frac` of the way from `tick` to the next one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RewindTime {
    /// The tick at or before the point.
    pub tick: Tick,
    /// How far past `tick`, in ticks, 0 ≤ `frac` ≤ 1.
    pub frac: f32,
}

/// A rewind time checked against what the history holds: the rows of its ticks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Resolved<'a> {
    tick: Tick,
    view: RewindView<'a, Recorded, FrameKey>,
}

/// Where a player's feet were and which way it faced at a rewind time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Root<'a> {
    pub(crate) origin: Vec3,
    yaw_rad: f32,
    /// The player's samples at the ticks around the time; `to` is `Some` when the time lies
    /// between two ticks at both of which the player was alive.
    samples: Bracket<&'a Recorded>,
}

/// A living player as recorded on a tick: its sample and its gait then.
#[derive(Clone, Copy, Debug, Default)]
struct Recorded {
    state: PlayerState,
    stance: Stance,
    gait: Gait,
}

/// What the ring keeps per tick besides the players: the sequence number of the newest key
/// at or before the tick; `None` when idle.
type FrameKey = Option<u64>;

#[derive(Clone, Copy, Debug, Default)]
struct KeyMeta {
    tick: Tick,
    /// Keys of one run of animated ticks share this; lerps never cross runs.
    run: u32,
}

/// Every player's samples and poses for the last ticks of a match, in a ring allocated once.
#[derive(Clone, Debug)]
pub struct History {
    config: HistoryConfig,
    players: usize,
    /// Ticks held when full: the max rewind and the newest tick.
    capacity: usize,
    dt_s: f32,
    /// How far a gait blends toward the velocity in one tick.
    gait_blend: f32,
    /// Per tick: each living player's [`Recorded`] and the tick's [`FrameKey`].
    ring: LagHistory<Recorded, FrameKey>,
    /// Per posed tick ("key"), `capacity` of them: at most one key a tick, so the keys of
    /// every held tick fit.
    keys: Vec<KeyMeta>,
    /// Per key and player: `key * players + slot`.
    key_hitboxes: Vec<LocalHitboxes>,
    /// Per key and player: the stance posed, `None` when dead at the key.
    key_stance: Vec<Option<Stance>>,
    /// Per player: the gait after the newest tick.
    gaits: Vec<Gait>,
    /// Sequence number of the next key.
    next_key: u64,
    run: u32,
    animated: bool,
    idle: LocalHitboxes,
    reach: Aabb,
    poses_computed: u64,
    /// The shots' grid over where players stood in the held ticks; `None` below
    /// [`GRID_MIN_PLAYERS`].
    broad: Option<BroadPhase>,
}

impl History {
    /// An empty history for `config`, allocating all it will ever use.
    pub fn new(config: HistoryConfig) -> Result<History, HistoryError> {
        let ring = LagHistory::new(LagConfig {
            max_entities: config.players,
            tick_hz: config.tick_hz,
            max_rewind: config.max_rewind,
        })
        .map_err(|e| match e {
            LagError::RewindOverCap { max_rewind, cap } => {
                HistoryError::RewindOverCap { max_rewind, cap }
            }
        })?;
        let capacity = ring.capacity() as usize;
        let players = usize::from(config.players);
        let idle = Pose::IDLE.hitboxes(&config.pose);
        let dt_s = 1.0 / config.tick_hz.get() as f32;
        let broad = (players >= GRID_MIN_PLAYERS).then(|| BroadPhase::new(players, capacity));
        Ok(History {
            players,
            capacity,
            dt_s,
            gait_blend: gait_blend_factor(&config.pose, dt_s),
            ring,
            keys: vec![KeyMeta::default(); capacity],
            key_hitboxes: vec![idle; capacity * players],
            key_stance: vec![None; capacity * players],
            gaits: vec![Gait::default(); players],
            next_key: 0,
            run: 0,
            animated: false,
            idle,
            reach: config.pose.reach(),
            poses_computed: 0,
            broad,
            config,
        })
    }

    /// [`History::new`], with a grid for the shots whatever the player count: for tests.
    #[cfg(test)]
    pub(crate) fn with_grid(config: HistoryConfig, grid: bool) -> History {
        let mut h = History::new(config).expect("a valid config");
        h.broad = grid.then(|| BroadPhase::new(h.players, h.capacity));
        h
    }

    /// The configuration.
    pub fn config(&self) -> &HistoryConfig {
        &self.config
    }

    /// Player slots.
    pub fn players(&self) -> usize {
        self.players
    }

    /// The max rewind in ticks: [`HistoryConfig::max_rewind`] at the tick rate, rounded up
    /// (200 ms at 128 Hz is 26 ticks).
    pub fn max_rewind_ticks(&self) -> u32 {
        self.ring.max_rewind_ticks()
    }

    /// The newest tick recorded, if any.
    pub fn newest(&self) -> Option<Tick> {
        self.ring.newest()
    }

    /// The oldest tick still held, if any: at most [`History::max_rewind_ticks`] before the
    /// newest.
    pub fn oldest(&self) -> Option<Tick> {
        self.ring.oldest()
    }

    /// Ticks held, up to [`History::max_rewind_ticks`] + 1.
    pub fn held_ticks(&self) -> u32 {
        self.ring.held_ticks()
    }

    /// What [`History::rewind_time`] has done since the history was made: rewinds, and how
    /// many were clamped to the oldest tick held or to the newest.
    pub fn rewind_stats(&self) -> LagStats {
        self.ring.stats()
    }

    /// Poses computed by [`History::record`] since the history was made.
    pub fn poses_computed(&self) -> u64 {
        self.poses_computed
    }

    /// A box relative to a player's feet that holds its hitboxes in any pose and yaw: what
    /// the broad phase tests.
    pub fn reach(&self) -> Aabb {
        self.reach
    }

    /// The shots' grid, when the history keeps one ([`broad`]).
    pub(crate) fn broad_phase(&self) -> Option<&BroadPhase> {
        self.broad.as_ref()
    }

    /// Forgets every tick recorded: call when players are moved without moving (a round
    /// starts and they stand at their spawns), so that no rewind lerps across the jump.
    pub fn clear(&mut self) {
        self.ring.clear();
        if let Some(broad) = &mut self.broad {
            broad.clear();
        }
        self.animated = false;
        self.gaits.fill(Gait::default());
    }

    /// Records the world after `tick`: `samples` holds one sample per player, by slot
    /// (missing ones are recorded dead; a debug build asserts the count). Poses the living
    /// players when `posing` is [`Posing::Animated`] and `tick` is a posing tick or the first
    /// animated one after an idle stretch; gaits advance only while animated. Call once a
    /// tick, after the world has stepped; charged to [`Category::Animation`].
    pub fn record(
        &mut self,
        tick: Tick,
        samples: impl IntoIterator<Item = PlayerSample>,
        posing: Posing,
        scopes: &Scopes,
    ) {
        let _animation = scopes.scope(Category::Animation);
        if self
            .ring
            .newest()
            .is_some_and(|n| tick.0 != n.0.wrapping_add(1))
        {
            self.clear();
        }
        let animated = posing == Posing::Animated;
        let first_of_run = animated && !self.animated;
        if first_of_run {
            self.run = self.run.wrapping_add(1);
        }
        let posing_tick = tick
            .0
            .is_multiple_of(u32::from(self.config.pose_every.get()));
        let key = animated && (posing_tick || first_of_run);
        let capacity = self.capacity as u64;
        if key {
            self.keys[(self.next_key % capacity) as usize] = KeyMeta {
                tick,
                run: self.run,
            };
            self.next_key += 1;
        }
        // An animated run starts with a key, so `next_key - 1` is this run's newest.
        let mut frame = self
            .ring
            .begin_tick(tick, animated.then(|| self.next_key - 1));

        if let Some(broad) = &mut self.broad {
            broad.begin_tick();
        }
        let key_row = ((self.next_key.wrapping_sub(1)) % capacity) as usize * self.players;
        let params = &self.config.pose;
        let mut samples = samples.into_iter();
        let mut given = 0;
        for slot in 0..self.players {
            let sample = match samples.next() {
                Some(sample) => {
                    given += 1;
                    sample
                }
                None => PlayerSample::default(),
            };
            let mut gait = self.gaits[slot];
            if animated {
                gait = gait.advance_by(sample.state.velocity, params, self.gait_blend, self.dt_s);
                self.gaits[slot] = gait;
            }
            if let (Some(broad), true) = (&mut self.broad, sample.alive) {
                broad.add_feet(slot, sample.state.origin);
            }
            if sample.alive {
                // `slot` < players ≤ u16::MAX.
                frame.record(
                    slot as u16,
                    Recorded {
                        state: sample.state,
                        stance: sample.stance,
                        gait,
                    },
                );
            }
            if key {
                if sample.alive {
                    self.key_hitboxes[key_row + slot] =
                        pose_of(&sample.state, sample.stance, &gait, params).hitboxes(params);
                    self.poses_computed += 1;
                }
                self.key_stance[key_row + slot] = sample.alive.then_some(sample.stance);
            }
        }
        debug_assert!(
            given == self.players && samples.next().is_none(),
            "record wants one sample per player"
        );
        self.animated = animated;
        if let Some(broad) = &mut self.broad {
            let _physics = scopes.scope(Category::Physics);
            broad.rebuild(self.ring.held_ticks() as usize, self.reach);
        }
    }

    /// The time a shot fired with the command of `command_tick` by a client that renders
    /// `interp_delay_ticks` behind is tested at: `command_tick - interp_delay_ticks`, clamped
    /// to the newest tick and to the oldest held (at most the max rewind before the newest).
    /// A delay that is negative or NaN counts as 0. `None` before anything is recorded.
    /// Counted in [`History::rewind_stats`].
    pub fn rewind_time(&self, command_tick: Tick, interp_delay_ticks: f32) -> Option<RewindTime> {
        let rewind = self.ring.rewind_behind(command_tick, interp_delay_ticks)?;
        Some(RewindTime {
            tick: rewind.tick,
            frac: rewind.frac,
        })
    }

    /// Where `slot`'s feet were at `time`: `None` when the time is not held or the player
    /// was not alive then.
    pub fn origin_at(&self, slot: PlayerSlot, time: RewindTime) -> Option<Vec3> {
        let at = self.resolve(time)?;
        self.root_at(usize::from(slot.0), at).map(|r| r.origin)
    }

    /// `slot`'s hitboxes in the world at `time`, as a rewind places them: `None` when the
    /// time is not held or the player was not alive then.
    pub fn hitboxes_at(&self, slot: PlayerSlot, time: RewindTime) -> Option<Hitboxes> {
        let at = self.resolve(time)?;
        let slot = usize::from(slot.0);
        let root = self.root_at(slot, at)?;
        Some(self.hitboxes_of(slot, at, &root, None, &mut 0))
    }

    /// Checks `time` against the ticks held.
    pub(crate) fn resolve(&self, time: RewindTime) -> Option<Resolved<'_>> {
        let newest = self.ring.newest()?;
        let back = newest.0.wrapping_sub(time.tick.0);
        if back >= self.ring.held_ticks() || !(0.0..=1.0).contains(&time.frac) {
            return None;
        }
        // Past the newest tick there is nothing to lerp toward.
        let frac = if back == 0 { 0.0 } else { time.frac };
        let view = self.ring.view(&Rewind {
            tick: time.tick,
            frac,
            ..Rewind::default()
        })?;
        Some(Resolved {
            tick: time.tick,
            view,
        })
    }

    /// Where `slot` stood at `at`, if alive then. Between two ticks it lerps when the player
    /// was alive at both, and stands where it was at the first otherwise.
    pub(crate) fn root_at<'a>(&self, slot: usize, at: Resolved<'a>) -> Option<Root<'a>> {
        if slot >= self.players {
            return None;
        }
        // `slot` < players ≤ u16::MAX. Absent at the first tick: dead then.
        let samples = at.view.at(slot as u16)?;
        let s0 = samples.from;
        let yaw0 = angle16_to_rad(s0.state.yaw);
        if let Some(s1) = samples.to {
            // The short way round.
            let turn = f32::from(s1.state.yaw.wrapping_sub(s0.state.yaw) as i16);
            return Some(Root {
                origin: lerp(s0.state.origin, s1.state.origin, samples.t),
                yaw_rad: yaw0 + turn * samples.t * (TAU / 65536.0),
                samples,
            });
        }
        Some(Root {
            origin: s0.state.origin,
            yaw_rad: yaw0,
            samples,
        })
    }

    /// `slot`'s hitboxes at `at`, placed at `root`. Poses made on demand are counted in
    /// `poses` and charged to [`Category::Animation`].
    pub(crate) fn hitboxes_of(
        &self,
        slot: usize,
        at: Resolved<'_>,
        root: &Root<'_>,
        scopes: Option<&Scopes>,
        poses: &mut u32,
    ) -> Hitboxes {
        let tick = at.tick;
        let (key, next_key) = at.view.metas();
        let mut local = self.local_at(slot, tick, root.samples.from, *key, scopes, poses);
        if let Some(to) = root.samples.to {
            // `to` is there only when the view has a later tick, and so its key.
            let next_key = next_key.copied().flatten();
            let next = self.local_at(slot, tick.next(), to, next_key, scopes, poses);
            local = local.lerp(&next, root.samples.t);
        }
        local.placed(root.origin, root.yaw_rad)
    }

    /// `slot`'s pose at `tick`, a held tick at which it was alive and `recorded` and whose
    /// key was `key`, in the body frame.
    fn local_at(
        &self,
        slot: usize,
        tick: Tick,
        recorded: &Recorded,
        key: FrameKey,
        scopes: Option<&Scopes>,
        poses: &mut u32,
    ) -> LocalHitboxes {
        let Some(seq) = key else {
            return self.idle;
        };
        let capacity = self.capacity as u64;
        debug_assert!(
            self.next_key - seq <= capacity,
            "key of a held tick overwritten"
        );
        let lower_row = (seq % capacity) as usize * self.players;
        let lower = self.keys[(seq % capacity) as usize];
        // A stance changes at once: poses of another stance say nothing about this one.
        let stance = Some(recorded.stance);
        let lower_fits = self.key_stance[lower_row + slot] == stance;
        if lower_fits && lower.tick == tick {
            return self.key_hitboxes[lower_row + slot];
        }
        if lower_fits && seq + 1 < self.next_key {
            let upper_row = ((seq + 1) % capacity) as usize * self.players;
            let upper = self.keys[((seq + 1) % capacity) as usize];
            if upper.run == lower.run && self.key_stance[upper_row + slot] == stance {
                let span = upper.tick.0.wrapping_sub(lower.tick.0);
                let into = tick.0.wrapping_sub(lower.tick.0);
                let t = into as f32 / span as f32;
                return self.key_hitboxes[lower_row + slot]
                    .lerp(&self.key_hitboxes[upper_row + slot], t);
            }
        }
        // No later key in this run (the newest ticks), or the player was dead or in another
        // stance at a key: pose the recorded sample.
        let _animation = scopes.map(|s| s.scope(Category::Animation));
        *poses += 1;
        let params = &self.config.pose;
        pose_of(&recorded.state, recorded.stance, &recorded.gait, params).hitboxes(params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn scopes() -> Scopes {
        Scopes::new(Instant::now)
    }

    fn sample(x: f32) -> PlayerSample {
        PlayerSample {
            state: PlayerState {
                origin: Vec3::new(x, 0.0, 0.0),
                ..Default::default()
            },
            stance: Stance::Standing,
            alive: true,
        }
    }

    #[test]
    fn two_hundred_ms_at_128_hz_is_26_ticks_and_the_cap_is_enforced() {
        let h = History::new(HistoryConfig::default()).unwrap();
        assert_eq!(h.max_rewind_ticks(), 26);
        assert_eq!(h.config().pose_every.get(), 4);
        let full = History::new(HistoryConfig {
            max_rewind: MAX_REWIND_CAP,
            ..HistoryConfig::default()
        })
        .unwrap();
        assert_eq!(full.max_rewind_ticks(), 128);
        let err = History::new(HistoryConfig {
            max_rewind: Duration::from_millis(1001),
            ..HistoryConfig::default()
        });
        assert!(matches!(err, Err(HistoryError::RewindOverCap { .. })));
    }

    #[test]
    fn rewind_time_splits_a_fractional_delay() {
        let s = scopes();
        let mut h = History::new(HistoryConfig {
            players: 1,
            ..HistoryConfig::default()
        })
        .unwrap();
        for t in 100..200 {
            h.record(Tick(t), [sample(t as f32)], Posing::Animated, &s);
        }
        let at = h.rewind_time(Tick(199), 2.5).unwrap();
        assert_eq!(at.tick, Tick(196));
        assert!((at.frac - 0.5).abs() < 1e-6);
        let x = h.origin_at(PlayerSlot(0), at).unwrap().x;
        assert!((x - 196.5).abs() < 1e-4, "{x}");
        // NaN and negative delays are no delay; a future command is the newest tick.
        assert_eq!(h.rewind_time(Tick(199), f32::NAN).unwrap().tick, Tick(199));
        assert_eq!(h.rewind_time(Tick(199), -3.0).unwrap().tick, Tick(199));
        assert_eq!(h.rewind_time(Tick(250), 1.0).unwrap().tick, Tick(199));
        assert_eq!(
            h.rewind_time(Tick(199), f32::INFINITY).unwrap().tick,
            Tick(173)
        );
    }

    #[test]
    fn a_gap_forgets_the_past() {
        let s = scopes();
        let mut h = History::new(HistoryConfig {
            players: 1,
            ..HistoryConfig::default()
        })
        .unwrap();
        for t in 0..10 {
            h.record(Tick(t), [sample(0.0)], Posing::Animated, &s);
        }
        assert_eq!(h.held_ticks(), 10);
        h.record(Tick(12), [sample(0.0)], Posing::Animated, &s);
        assert_eq!(h.held_ticks(), 1);
        assert_eq!(h.oldest(), Some(Tick(12)));
    }

    #[test]
    fn ticks_may_wrap() {
        let s = scopes();
        let mut h = History::new(HistoryConfig {
            players: 1,
            ..HistoryConfig::default()
        })
        .unwrap();
        let mut tick = Tick(u32::MAX - 5);
        for i in 0..12 {
            h.record(tick, [sample(i as f32)], Posing::Animated, &s);
            tick = tick.next();
        }
        assert_eq!(h.newest(), Some(Tick(5)));
        let at = h.rewind_time(Tick(5), 8.0).unwrap();
        assert_eq!(at.tick, Tick(u32::MAX - 2));
        assert_eq!(h.origin_at(PlayerSlot(0), at).unwrap().x, 3.0);
    }
}
