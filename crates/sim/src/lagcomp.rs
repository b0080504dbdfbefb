//! Lag compensation as a service: a history of what every entity looked like on each of the
//! last ticks, and a rewind to the moment a client was showing, so that its shots are tested
//! against the world it saw.
//!
//! The game decides what an entity's sample is (`S`): its hit volumes, or whatever it needs
//! to place them (a position, a view, a stance). Each tick it calls
//! [`LagHistory::begin_tick`] and records a sample for every entity present that tick; an
//! entity with no sample (dead, not spawned yet) is absent that tick and a rewind finds
//! nothing for it. The game may also keep one value per tick (`M`, default `()`), such as
//! which of its animation keys that tick uses.
//!
//! A shot is then tested at [`LagHistory::rewind`] of the shooter's [`ViewTime`] (or
//! [`LagHistory::rewind_behind`] of a command tick and a render delay): the two recorded
//! ticks that bracket it and how far between them, clamped to the oldest tick held when
//! older (at most the max rewind, [`Clamp`] says why) and to the newest when newer. Per
//! entity, [`LagHistory::at`] gives the samples at both bracketing ticks, and
//! [`LagHistory::lerped_at`] blends them for sample types that are [`Lerp`]; a shot that
//! looks many entities up checks the rewind once with [`LagHistory::view`] and borrows the
//! samples from the [`RewindView`].
//!
//! Memory: one ring of `max_rewind_ticks + 1` ticks × `max_entities` samples, allocated by
//! [`LagHistory::new`]; recording, rewinding and lookups never allocate. The counters of
//! [`LagHistory::stats`] are atomics, so a history may be read by several threads at once.
//!
//! Ticks are recorded in order, one after another. A gap or a step back forgets every tick
//! recorded before: no rewind blends across a hole.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::{Tick, ViewTime};

/// The longest rewind a history may be configured for: a player seeing the world a second
/// late is not playing the same game, and a longer rewind lets lag shoot around corners.
pub const MAX_REWIND_CAP: Duration = Duration::from_secs(1);

/// What a [`LagHistory`] holds; fixed for its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LagConfig {
    /// Entity indexes run `0..max_entities`.
    pub max_entities: u16,
    /// Ticks per second of the match; the rewind is counted in these ticks.
    pub tick_hz: NonZeroU32,
    /// How far back a rewind may reach, at most [`MAX_REWIND_CAP`]. Converted to whole
    /// ticks once, rounding up ([`LagConfig::max_rewind_ticks`]).
    pub max_rewind: Duration,
}

impl LagConfig {
    /// The max rewind in whole ticks at the tick rate, rounded up (200 ms at 128 Hz is 26
    /// ticks), or why the config is invalid.
    pub fn max_rewind_ticks(&self) -> Result<u32, LagError> {
        if self.max_rewind > MAX_REWIND_CAP {
            return Err(LagError::RewindOverCap {
                max_rewind: self.max_rewind,
                cap: MAX_REWIND_CAP,
            });
        }
        const NANOS_PER_SEC: u128 = 1_000_000_000;
        let ticks =
            (self.max_rewind.as_nanos() * u128::from(self.tick_hz.get())).div_ceil(NANOS_PER_SEC);
        // Under the 1 s cap this is at most tick_hz; the ring holds one tick more.
        Ok(u32::try_from(ticks)
            .unwrap_or(u32::MAX - 1)
            .min(u32::MAX - 1))
    }
}

/// Why a [`LagHistory`] could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LagError {
    /// The configured rewind is longer than [`MAX_REWIND_CAP`].
    RewindOverCap {
        /// The rewind asked for.
        max_rewind: Duration,
        /// [`MAX_REWIND_CAP`].
        cap: Duration,
    },
}

impl fmt::Display for LagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LagError::RewindOverCap { max_rewind, cap } => {
                write!(f, "max_rewind of {max_rewind:?} is over the cap of {cap:?}")
            }
        }
    }
}

impl std::error::Error for LagError {}

/// Whether, and why, a rewind was moved to a tick the history holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Clamp {
    /// The time asked for is held: no clamp.
    #[default]
    None,
    /// Older than the max rewind: moved to the oldest tick held. The policy clamp a game
    /// reports (a shooter with a view this old sees its shots tested later than it aimed).
    PastMaxRewind,
    /// Within the max rewind but older than the oldest tick held (the history started, or
    /// forgot its past at a gap, since): moved to the oldest tick held.
    PastOldestHeld,
    /// Newer than the newest tick recorded: moved to the newest.
    Future,
}

/// A point in time a [`LagHistory`] holds, as a rewind found it: `frac` of the way from
/// `tick` to the next tick. Plain data: look entities up with [`LagHistory::at`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rewind {
    /// The older bracketing tick: at or before the point.
    pub tick: Tick,
    /// How far toward `tick + 1`, in ticks, `0 ≤ frac < 1` from a rewind (0 at the newest
    /// tick, which has nothing after it); lookups accept up to 1.
    pub frac: f32,
    /// Whether the time asked for was moved to get here.
    pub clamp: Clamp,
}

/// An entity at a [`Rewind`]: its samples at the two bracketing ticks and how far between.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bracket<S> {
    /// The sample at [`Rewind::tick`].
    pub from: S,
    /// The sample at the tick after, when the rewind lies strictly after [`Rewind::tick`]
    /// and the entity was present then; `None` means "hold `from`".
    pub to: Option<S>,
    /// How far from `from` toward `to`, `0 < t ≤ 1` when `to` is `Some`.
    pub t: f32,
}

impl<S: Copy> Bracket<&S> {
    /// The same bracket with the samples copied out of the history.
    pub fn copied(self) -> Bracket<S> {
        Bracket {
            from: *self.from,
            to: self.to.copied(),
            t: self.t,
        }
    }
}

impl<S: Lerp> Bracket<S> {
    /// `from` blended toward `to` by `t`, or `from` when there is no `to`.
    pub fn lerped(&self) -> S {
        match &self.to {
            Some(to) => self.from.lerp(to, self.t),
            None => self.from,
        }
    }
}

/// A sample type that can be blended between two ticks: what [`LagHistory::lerped_at`]
/// and [`Bracket::lerped`] need.
pub trait Lerp: Copy {
    /// `self` at `t = 0`, `other` at `t = 1`, in between for `0 < t < 1`.
    fn lerp(&self, other: &Self, t: f32) -> Self;
}

impl Lerp for f32 {
    fn lerp(&self, other: &Self, t: f32) -> Self {
        self + (other - self) * t
    }
}

impl<const N: usize> Lerp for [f32; N] {
    fn lerp(&self, other: &Self, t: f32) -> Self {
        std::array::from_fn(|i| self[i].lerp(&other[i], t))
    }
}

/// What a history's rewinds have done since it was made: for a game's hit-registration
/// report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LagStats {
    /// Rewinds answered (a rewind of an empty history is not counted).
    pub rewinds: u64,
    /// Of those, clamped because the time was older than the max rewind.
    pub past_max_rewind: u64,
    /// Of those, clamped because the time was older than the oldest tick held, though
    /// within the max rewind.
    pub past_oldest_held: u64,
    /// Of those, clamped because the time was newer than the newest tick.
    pub future: u64,
}

impl LagStats {
    /// Rewinds moved to the oldest tick held, for either reason.
    pub fn clamped_to_oldest(&self) -> u64 {
        self.past_max_rewind + self.past_oldest_held
    }
}

#[derive(Debug, Default)]
struct Counters {
    rewinds: AtomicU64,
    past_max_rewind: AtomicU64,
    past_oldest_held: AtomicU64,
    future: AtomicU64,
}

impl Counters {
    fn get(&self) -> LagStats {
        LagStats {
            rewinds: self.rewinds.load(Ordering::Relaxed),
            past_max_rewind: self.past_max_rewind.load(Ordering::Relaxed),
            past_oldest_held: self.past_oldest_held.load(Ordering::Relaxed),
            future: self.future.load(Ordering::Relaxed),
        }
    }

    fn count(&self, clamp: Clamp) {
        self.rewinds.fetch_add(1, Ordering::Relaxed);
        let counter = match clamp {
            Clamp::None => return,
            Clamp::PastMaxRewind => &self.past_max_rewind,
            Clamp::PastOldestHeld => &self.past_oldest_held,
            Clamp::Future => &self.future,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl Clone for Counters {
    fn clone(&self) -> Self {
        let s = self.get();
        Counters {
            rewinds: AtomicU64::new(s.rewinds),
            past_max_rewind: AtomicU64::new(s.past_max_rewind),
            past_oldest_held: AtomicU64::new(s.past_oldest_held),
            future: AtomicU64::new(s.future),
        }
    }
}

/// Every entity's samples (`S`) and one game value per tick (`M`) for the last ticks of a
/// match, in a ring allocated once. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct LagHistory<S, M = ()> {
    config: LagConfig,
    entities: usize,
    max_rewind_ticks: u32,
    /// Ticks held when full: the max rewind and the newest tick.
    capacity: usize,
    /// Per tick, `capacity` of them, indexed by sequence number modulo `capacity`.
    metas: Vec<M>,
    /// Per tick and entity: `frame * entities + entity`; `None` when absent.
    samples: Vec<Option<S>>,
    newest: Option<Tick>,
    /// Ticks held, 0..=capacity, ending at `newest`.
    held: u32,
    /// Ring index of the newest tick; the next tick goes one after (wrapping).
    head: usize,
    counters: Counters,
}

/// A [`Rewind`] checked against the ticks a [`LagHistory`] holds ([`LagHistory::view`]):
/// the rows of both bracketing ticks, found once, for the entity lookups of one shot.
#[derive(Clone, Copy, Debug)]
pub struct RewindView<'a, S, M = ()> {
    from: &'a [Option<S>],
    from_meta: &'a M,
    /// The later tick's row and value, when the time lies after the earlier one.
    to: Option<(&'a [Option<S>], &'a M)>,
    t: f32,
}

impl<'a, S, M> RewindView<'a, S, M> {
    /// `entity` at the view's time, as [`LagHistory::at`] gives it, borrowed: `None` when
    /// absent at the earlier tick or out of range.
    pub fn at(&self, entity: u16) -> Option<Bracket<&'a S>> {
        let entity = usize::from(entity);
        let from = self.from.get(entity)?.as_ref()?;
        Some(match self.to {
            Some((row, _)) => Bracket {
                from,
                to: row[entity].as_ref(),
                t: self.t,
            },
            None => Bracket {
                from,
                to: None,
                t: 0.0,
            },
        })
    }

    /// The game's values recorded with the earlier tick and, when the time lies after it,
    /// the later one.
    pub fn metas(&self) -> (&'a M, Option<&'a M>) {
        (self.from_meta, self.to.map(|(_, m)| m))
    }

    /// How far from the earlier tick toward the later one: 0 when there is no later one.
    pub fn t(&self) -> f32 {
        self.t
    }
}

/// The tick being recorded, from [`LagHistory::begin_tick`]: every entity is absent until
/// [`Recording::record`] gives it a sample.
#[derive(Debug)]
pub struct Recording<'a, S> {
    tick: Tick,
    row: &'a mut [Option<S>],
}

impl<S: Copy> Recording<'_, S> {
    /// The tick being recorded.
    pub fn tick(&self) -> Tick {
        self.tick
    }

    /// Records `entity`'s sample this tick, replacing one recorded before this tick; false
    /// (and nothing recorded) when `entity` is not below [`LagConfig::max_entities`].
    pub fn record(&mut self, entity: u16, sample: S) -> bool {
        match self.row.get_mut(usize::from(entity)) {
            Some(cell) => {
                *cell = Some(sample);
                true
            }
            None => false,
        }
    }

    /// Marks `entity` absent this tick, undoing a [`Recording::record`]; out of range is a
    /// no-op.
    pub fn remove(&mut self, entity: u16) {
        if let Some(cell) = self.row.get_mut(usize::from(entity)) {
            *cell = None;
        }
    }
}

impl<S: Copy, M: Copy + Default> LagHistory<S, M> {
    /// An empty history for `config`, allocating all it will ever use.
    pub fn new(config: LagConfig) -> Result<Self, LagError> {
        let max_rewind_ticks = config.max_rewind_ticks()?;
        let capacity = max_rewind_ticks as usize + 1;
        let entities = usize::from(config.max_entities);
        Ok(LagHistory {
            config,
            entities,
            max_rewind_ticks,
            capacity,
            metas: vec![M::default(); capacity],
            samples: vec![None; capacity * entities],
            newest: None,
            held: 0,
            head: capacity - 1,
            counters: Counters::default(),
        })
    }

    /// Starts recording `tick` with the game's per-tick value `meta`: every entity is absent
    /// until recorded on the [`Recording`] returned. A `tick` that does not follow the newest
    /// one (a gap, a step back, the same tick again) first forgets every tick held. When the
    /// ring is full, the oldest tick is dropped.
    pub fn begin_tick(&mut self, tick: Tick, meta: M) -> Recording<'_, S> {
        if self.newest.is_some_and(|n| tick != n.next()) {
            self.clear();
        }
        let frame = if self.head + 1 == self.capacity {
            0
        } else {
            self.head + 1
        };
        self.head = frame;
        self.newest = Some(tick);
        self.held = (self.held + 1).min(self.capacity as u32);
        self.metas[frame] = meta;
        let row = &mut self.samples[frame * self.entities..(frame + 1) * self.entities];
        row.fill(None);
        Recording { tick, row }
    }

    /// Forgets every tick recorded (the counters stay): call when entities move without
    /// moving (a round restarts at the spawns), so that no rewind blends across the jump.
    pub fn clear(&mut self) {
        self.newest = None;
        self.held = 0;
    }

    /// The configuration.
    pub fn config(&self) -> &LagConfig {
        &self.config
    }

    /// The max rewind in ticks ([`LagConfig::max_rewind_ticks`]).
    pub fn max_rewind_ticks(&self) -> u32 {
        self.max_rewind_ticks
    }

    /// Ticks the ring holds when full: [`LagHistory::max_rewind_ticks`] + 1.
    pub fn capacity(&self) -> u32 {
        self.capacity as u32
    }

    /// The newest tick recorded, if any.
    pub fn newest(&self) -> Option<Tick> {
        self.newest
    }

    /// The oldest tick still held, if any: at most [`LagHistory::max_rewind_ticks`] before
    /// the newest.
    pub fn oldest(&self) -> Option<Tick> {
        self.newest
            .map(|n| Tick(n.0.wrapping_sub(self.held.saturating_sub(1))))
    }

    /// Ticks held, up to [`LagHistory::capacity`].
    pub fn held_ticks(&self) -> u32 {
        self.held
    }

    /// What the rewinds have done so far.
    pub fn stats(&self) -> LagStats {
        self.counters.get()
    }

    /// The rewind to `view`: the moment `view.frac`/256 of the way from `view.tick` to the
    /// next tick. `None` before anything is recorded. Counted in [`LagHistory::stats`].
    pub fn rewind(&self, view: ViewTime) -> Option<Rewind> {
        let newest = self.newest?;
        // Ticks may wrap; a view is near the newest tick, before or after it.
        let behind = f64::from(newest.0.wrapping_sub(view.tick.0) as i32);
        Some(self.rewind_back(newest, behind - f64::from(view.frac) / 256.0))
    }

    /// The rewind to `delay_ticks` before `command_tick` (the form of a client that renders
    /// a fixed delay behind the tick of its command). A delay that is negative or NaN counts
    /// as 0. `None` before anything is recorded. Counted in [`LagHistory::stats`].
    pub fn rewind_behind(&self, command_tick: Tick, delay_ticks: f32) -> Option<Rewind> {
        let newest = self.newest?;
        let delay = if delay_ticks > 0.0 {
            f64::from(delay_ticks)
        } else {
            0.0
        };
        // Ticks may wrap; a command tick is near the newest, before or after it.
        let ahead = f64::from(command_tick.0.wrapping_sub(newest.0) as i32);
        Some(self.rewind_back(newest, delay - ahead))
    }

    /// The rewind `back` ticks (exact, possibly negative or infinite) behind `newest`.
    fn rewind_back(&self, newest: Tick, back: f64) -> Rewind {
        let oldest_back = f64::from(self.held - 1);
        let clamp = if back > f64::from(self.max_rewind_ticks) {
            Clamp::PastMaxRewind
        } else if back > oldest_back {
            Clamp::PastOldestHeld
        } else if back < 0.0 {
            Clamp::Future
        } else {
            Clamp::None
        };
        self.counters.count(clamp);
        let back = back.clamp(0.0, oldest_back);
        let whole = back.ceil();
        Rewind {
            tick: Tick(newest.0.wrapping_sub(whole as u32)),
            frac: (whole - back) as f32,
            clamp,
        }
    }

    /// How many ticks `tick` is behind the newest, when held.
    fn back_of(&self, tick: Tick) -> Option<u32> {
        let back = self.newest?.0.wrapping_sub(tick.0);
        (back < self.held).then_some(back)
    }

    /// The ring index of the held tick `back` ticks behind the newest (no division: this is
    /// on every lookup).
    fn frame_of(&self, back: u32) -> usize {
        let back = back as usize;
        debug_assert!(back < self.capacity);
        if back <= self.head {
            self.head - back
        } else {
            self.head + self.capacity - back
        }
    }

    /// `entity`'s sample at `tick`: `None` when the tick is not held, the entity was absent
    /// then, or it is out of range.
    pub fn sample(&self, tick: Tick, entity: u16) -> Option<S> {
        let back = self.back_of(tick)?;
        let entity = usize::from(entity);
        if entity >= self.entities {
            return None;
        }
        self.samples[self.frame_of(back) * self.entities + entity]
    }

    /// The game's value recorded with `tick`, when held.
    pub fn meta(&self, tick: Tick) -> Option<&M> {
        let back = self.back_of(tick)?;
        Some(&self.metas[self.frame_of(back)])
    }

    /// `entity` at `rewind`: its sample at [`Rewind::tick`], and when the rewind lies after
    /// that tick, at the next one. `None` when the tick is not held, `frac` is not within
    /// 0..=1, or the entity was absent at [`Rewind::tick`] (or is out of range). An entity
    /// absent at the later tick has `to: None`: it stays where it was.
    pub fn at(&self, rewind: &Rewind, entity: u16) -> Option<Bracket<S>> {
        self.at_ref(rewind, entity).map(Bracket::copied)
    }

    /// [`LagHistory::at`] without copying: the samples borrowed from the history, for
    /// samples too big to copy cheaply.
    pub fn at_ref(&self, rewind: &Rewind, entity: u16) -> Option<Bracket<&S>> {
        self.view(rewind)?.at(entity)
    }

    /// `rewind` checked against the ticks held once, for looking up many entities at it:
    /// `None` when [`Rewind::tick`] is not held or `frac` is not within 0..=1. The view
    /// borrows the history, so no tick can be recorded while it is in use.
    pub fn view(&self, rewind: &Rewind) -> Option<RewindView<'_, S, M>> {
        let back = self.back_of(rewind.tick)?;
        if !(0.0..=1.0).contains(&rewind.frac) {
            return None;
        }
        let frame = self.frame_of(back);
        // Past the newest tick there is nothing to blend toward.
        let to = (back > 0 && rewind.frac != 0.0).then(|| {
            let next = self.frame_of(back - 1);
            (self.row(next), &self.metas[next])
        });
        Some(RewindView {
            t: if to.is_some() { rewind.frac } else { 0.0 },
            from: self.row(frame),
            from_meta: &self.metas[frame],
            to,
        })
    }

    fn row(&self, frame: usize) -> &[Option<S>] {
        &self.samples[frame * self.entities..(frame + 1) * self.entities]
    }

    /// `entity`'s sample blended to `rewind` ([`Bracket::lerped`] of [`LagHistory::at`]).
    pub fn lerped_at(&self, rewind: &Rewind, entity: u16) -> Option<S>
    where
        S: Lerp,
    {
        self.at(rewind, entity).map(|b| b.lerped())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HZ: NonZeroU32 = match NonZeroU32::new(128) {
        Some(n) => n,
        None => panic!("zero"),
    };

    fn config(entities: u16, max_rewind_ms: u64) -> LagConfig {
        LagConfig {
            max_entities: entities,
            tick_hz: HZ,
            max_rewind: Duration::from_millis(max_rewind_ms),
        }
    }

    /// A history of 3 entities, 200 ms (26 ticks) at 128 Hz, where entity `e` at tick `t`
    /// is at `t * 10 + e`.
    fn recorded(ticks: std::ops::Range<u32>) -> LagHistory<f32, u32> {
        let mut h = LagHistory::new(config(3, 200)).unwrap();
        for t in ticks {
            let mut r = h.begin_tick(Tick(t), t * 2);
            for e in 0..3 {
                assert!(r.record(e, (t * 10 + u32::from(e)) as f32));
            }
        }
        h
    }

    #[test]
    fn the_rewind_in_ticks_rounds_up_and_is_capped_at_a_second() {
        assert_eq!(config(1, 200).max_rewind_ticks(), Ok(26));
        assert_eq!(config(1, 1000).max_rewind_ticks(), Ok(128));
        assert_eq!(config(1, 0).max_rewind_ticks(), Ok(0));
        let over = config(1, 1001);
        assert_eq!(
            over.max_rewind_ticks(),
            Err(LagError::RewindOverCap {
                max_rewind: Duration::from_millis(1001),
                cap: MAX_REWIND_CAP
            })
        );
        assert!(LagHistory::<f32>::new(over).is_err());
        assert!(over
            .max_rewind_ticks()
            .unwrap_err()
            .to_string()
            .contains("1.001s"));
        let h = LagHistory::<f32>::new(config(1000, 1000)).unwrap();
        assert_eq!((h.capacity(), h.max_rewind_ticks()), (129, 128));
    }

    #[test]
    fn ticks_are_held_up_to_the_capacity_and_the_oldest_drop_off() {
        let mut h = LagHistory::<f32>::new(config(1, 200)).unwrap();
        assert_eq!((h.newest(), h.oldest(), h.held_ticks()), (None, None, 0));
        assert!(h.rewind(ViewTime::at(Tick(0))).is_none());
        assert_eq!(
            h.stats(),
            LagStats::default(),
            "an empty rewind is not counted"
        );
        for t in 0..27 {
            h.begin_tick(Tick(t), ()).record(0, t as f32);
            assert_eq!(h.held_ticks(), t + 1);
            assert_eq!(h.oldest(), Some(Tick(0)));
        }
        h.begin_tick(Tick(27), ()).record(0, 27.0);
        assert_eq!(h.held_ticks(), 27);
        assert_eq!((h.oldest(), h.newest()), (Some(Tick(1)), Some(Tick(27))));
        assert_eq!(h.sample(Tick(0), 0), None, "dropped");
        assert_eq!(h.sample(Tick(1), 0), Some(1.0));
        assert_eq!(h.sample(Tick(27), 0), Some(27.0));
        assert_eq!(h.sample(Tick(28), 0), None, "not yet");
    }

    #[test]
    fn a_rewind_within_range_brackets_the_view_time() {
        let h = recorded(100..200);
        let r = h
            .rewind(ViewTime {
                tick: Tick(190),
                frac: 64,
            })
            .unwrap();
        assert_eq!(
            r,
            Rewind {
                tick: Tick(190),
                frac: 0.25,
                clamp: Clamp::None
            }
        );
        let b = h.at(&r, 2).unwrap();
        assert_eq!((b.from, b.to, b.t), (1902.0, Some(1912.0), 0.25));
        let borrowed = h.at_ref(&r, 2).unwrap();
        assert_eq!(
            (*borrowed.from, borrowed.to.copied()),
            (1902.0, Some(1912.0))
        );
        assert_eq!(borrowed.copied(), b);
        let view = h.view(&r).unwrap();
        assert_eq!(view.metas(), (&380, Some(&382)));
        assert_eq!(
            (view.t(), view.at(0).unwrap().copied().to),
            (0.25, Some(1910.0))
        );
        assert!(view.at(3).is_none());
        assert_eq!(h.lerped_at(&r, 2), Some(1904.5));
        assert_eq!(h.meta(Tick(190)), Some(&380));
        // Exactly on a tick: nothing to blend.
        let r = h.rewind(ViewTime::at(Tick(180))).unwrap();
        assert_eq!((r.tick, r.frac, r.clamp), (Tick(180), 0.0, Clamp::None));
        assert_eq!(h.at(&r, 1).unwrap().to, None);
        assert_eq!(h.lerped_at(&r, 1), Some(1801.0));
        // The oldest tick held is in range.
        let r = h.rewind(ViewTime::at(Tick(173))).unwrap();
        assert_eq!((r.tick, r.clamp), (Tick(173), Clamp::None));
        // The command-and-delay form agrees.
        let r = h.rewind_behind(Tick(199), 2.5).unwrap();
        assert_eq!((r.tick, r.frac, r.clamp), (Tick(196), 0.5, Clamp::None));
        assert_eq!(
            h.stats(),
            LagStats {
                rewinds: 4,
                ..LagStats::default()
            }
        );
    }

    #[test]
    fn an_old_view_is_clamped_to_the_oldest_tick_and_a_new_one_to_the_newest() {
        let h = recorded(100..200);
        let r = h
            .rewind(ViewTime {
                tick: Tick(150),
                frac: 200,
            })
            .unwrap();
        assert_eq!(
            r,
            Rewind {
                tick: Tick(173),
                frac: 0.0,
                clamp: Clamp::PastMaxRewind
            }
        );
        assert_eq!(h.lerped_at(&r, 0), Some(1730.0));
        // Just past the max rewind: 26 ticks and 1/256 back.
        let r = h
            .rewind(ViewTime {
                tick: Tick(172),
                frac: 255,
            })
            .unwrap();
        assert_eq!((r.tick, r.clamp), (Tick(173), Clamp::PastMaxRewind));
        let r = h.rewind(ViewTime::at(Tick(205))).unwrap();
        assert_eq!((r.tick, r.frac, r.clamp), (Tick(199), 0.0, Clamp::Future));
        let r = h.rewind_behind(Tick(199), -3.0).unwrap();
        assert_eq!((r.tick, r.clamp), (Tick(199), Clamp::None));
        let r = h.rewind_behind(Tick(199), f32::NAN).unwrap();
        assert_eq!((r.tick, r.clamp), (Tick(199), Clamp::None));
        let r = h.rewind_behind(Tick(199), f32::INFINITY).unwrap();
        assert_eq!((r.tick, r.clamp), (Tick(173), Clamp::PastMaxRewind));
        // A young history clamps within the max rewind for want of ticks.
        let young = recorded(0..5);
        let r = young.rewind(ViewTime::behind(Tick(4), 10.0)).unwrap();
        assert_eq!((r.tick, r.clamp), (Tick(0), Clamp::PastOldestHeld));
        let s = h.stats();
        assert_eq!((s.rewinds, s.past_max_rewind, s.future), (6, 3, 1));
        assert_eq!((s.past_oldest_held, s.clamped_to_oldest()), (0, 3));
        assert_eq!(young.stats().clamped_to_oldest(), 1);
    }

    #[test]
    fn a_gap_or_a_step_back_forgets_the_past() {
        let mut h = recorded(0..10);
        assert_eq!(h.held_ticks(), 10);
        h.begin_tick(Tick(12), 0).record(0, 5.0);
        assert_eq!((h.held_ticks(), h.oldest()), (1, Some(Tick(12))));
        assert_eq!(h.sample(Tick(9), 0), None);
        let r = h.rewind(ViewTime::at(Tick(9))).unwrap();
        assert_eq!((r.tick, r.clamp), (Tick(12), Clamp::PastOldestHeld));
        h.begin_tick(Tick(13), 0);
        h.begin_tick(Tick(11), 0).record(1, 1.0);
        assert_eq!((h.held_ticks(), h.newest()), (1, Some(Tick(11))));
        // The same tick twice is a step back too.
        h.begin_tick(Tick(11), 0);
        assert_eq!(h.held_ticks(), 1);
        assert_eq!(h.sample(Tick(11), 1), None, "re-begun: nobody recorded");
        h.clear();
        assert_eq!((h.newest(), h.held_ticks()), (None, 0));
        assert!(h.rewind(ViewTime::at(Tick(11))).is_none());
    }

    #[test]
    fn an_absent_entity_is_found_only_where_it_was_present() {
        let mut h = LagHistory::<f32>::new(config(2, 200)).unwrap();
        for t in 0..10u32 {
            let mut r = h.begin_tick(Tick(t), ());
            r.record(0, t as f32);
            // Entity 1 is present on even ticks only.
            if t % 2 == 0 {
                r.record(1, t as f32);
            }
            assert_eq!(r.tick(), Tick(t));
        }
        let half = |t| Rewind {
            tick: Tick(t),
            frac: 0.5,
            clamp: Clamp::None,
        };
        // Present at the older tick, absent at the later: held, not blended.
        let b = h.at(&half(4), 1).unwrap();
        assert_eq!((b.from, b.to), (4.0, None));
        assert_eq!(h.lerped_at(&half(4), 1), Some(4.0));
        // Absent at the older tick: not there.
        assert_eq!(h.at(&half(5), 1), None);
        assert_eq!(h.lerped_at(&half(5), 0), Some(5.5));
        // Out of range entity, tick not held, frac out of range.
        assert_eq!(h.at(&half(4), 2), None);
        assert_eq!(h.sample(Tick(4), 2), None);
        assert_eq!(h.at(&half(10), 0), None);
        let bad = Rewind {
            frac: 1.5,
            ..half(4)
        };
        assert_eq!(h.at(&bad, 0), None);
        let nan = Rewind {
            frac: f32::NAN,
            ..half(4)
        };
        assert_eq!(h.at(&nan, 0), None);
        // At the newest tick a fraction has nothing to blend toward.
        assert_eq!(h.at(&half(9), 0).unwrap().to, None);
        // A fraction of 1 is the later tick.
        let one = Rewind {
            frac: 1.0,
            ..half(6)
        };
        assert_eq!(h.lerped_at(&one, 0), Some(7.0));
    }

    #[test]
    fn recording_out_of_range_or_removing_is_refused_or_undone() {
        let mut h = LagHistory::<f32>::new(config(2, 100)).unwrap();
        let mut r = h.begin_tick(Tick(0), ());
        assert!(!r.record(2, 1.0));
        assert!(r.record(1, 1.0));
        r.remove(1);
        r.remove(7);
        assert_eq!(h.sample(Tick(0), 1), None);
    }

    #[test]
    fn ticks_may_wrap() {
        let mut h = LagHistory::<f32>::new(config(1, 200)).unwrap();
        let mut tick = Tick(u32::MAX - 5);
        for i in 0..12 {
            h.begin_tick(tick, ()).record(0, i as f32);
            tick = tick.next();
        }
        assert_eq!(h.newest(), Some(Tick(5)));
        let r = h.rewind_behind(Tick(5), 8.0).unwrap();
        assert_eq!((r.tick, r.clamp), (Tick(u32::MAX - 2), Clamp::None));
        assert_eq!(h.lerped_at(&r, 0), Some(3.0));
        let r = h
            .rewind(ViewTime {
                tick: Tick(u32::MAX),
                frac: 128,
            })
            .unwrap();
        assert_eq!(h.lerped_at(&r, 0), Some(5.5));
    }

    #[test]
    fn a_thousand_entities_fit_and_arrays_lerp() {
        let mut h = LagHistory::<[f32; 2]>::new(config(1200, 1000)).unwrap();
        for t in 0..200u32 {
            let mut r = h.begin_tick(Tick(t), ());
            for e in 0..1200u16 {
                r.record(e, [t as f32, f32::from(e)]);
            }
        }
        let r = h.rewind(ViewTime::behind(Tick(199), 100.25)).unwrap();
        assert_eq!(r.clamp, Clamp::None);
        assert_eq!(h.lerped_at(&r, 1199), Some([98.75, 1199.0]));
        let clone = h.clone();
        assert_eq!(clone.stats().rewinds, 1);
        assert_eq!(clone.sample(Tick(150), 7), Some([150.0, 7.0]));
    }

    proptest! {
        /// Against a model: with random presence, gaps and views, a rewind lands on the held
        /// tick at or before the view (clamped into what is held), the fraction is what is
        /// left, and lookups give what was recorded at both ticks.
        #[test]
        fn rewinds_agree_with_a_model(
            max_rewind_ms in 0u64..=1000,
            steps in prop::collection::vec((0u32..40, any::<u8>()), 1..300),
            views in prop::collection::vec((0u32..200, any::<u8>()), 1..20),
        ) {
            let cfg = config(4, max_rewind_ms);
            let max_back = cfg.max_rewind_ticks().unwrap();
            let mut h = LagHistory::<f32, u32>::new(cfg).unwrap();
            // Model: the run of ticks held, each with its presence mask.
            let mut model: Vec<(u32, u8)> = Vec::new();
            let mut tick = 1000u32;
            for (i, &(step, mask)) in steps.iter().enumerate() {
                // Mostly the next tick; sometimes a gap or a step back.
                tick = match step { 0 => tick + 3, 1 => tick - 1, _ => tick + 1 };
                if model.last().is_some_and(|&(t, _)| t + 1 != tick) {
                    model.clear();
                }
                model.push((tick, mask));
                if model.len() > max_back as usize + 1 {
                    model.remove(0);
                }
                let mut r = h.begin_tick(Tick(tick), i as u32);
                for e in 0..4u16 {
                    if mask & (1 << e) != 0 {
                        r.record(e, (tick * 8 + u32::from(e)) as f32);
                    }
                }
            }
            let newest = model.last().unwrap().0;
            let oldest = model[0].0;
            prop_assert_eq!(h.held_ticks() as usize, model.len());
            prop_assert_eq!((h.newest(), h.oldest()), (Some(Tick(newest)), Some(Tick(oldest))));
            for &(back, frac) in &views {
                let view_tick = newest + 50 - back;
                let view = ViewTime { tick: Tick(view_tick), frac };
                let r = h.rewind(view).unwrap();
                let exact = f64::from(view_tick) + f64::from(frac) / 256.0;
                let expect_clamp = if exact > f64::from(newest) {
                    Clamp::Future
                } else if exact < f64::from(newest) - f64::from(max_back) {
                    Clamp::PastMaxRewind
                } else if exact < f64::from(oldest) {
                    Clamp::PastOldestHeld
                } else {
                    Clamp::None
                };
                prop_assert_eq!(r.clamp, expect_clamp);
                let held = exact.clamp(f64::from(oldest), f64::from(newest));
                prop_assert_eq!(r.tick.0, held.floor() as u32);
                prop_assert_eq!(f64::from(r.frac), held - held.floor());
                let (_, mask0) = model[(r.tick.0 - oldest) as usize];
                let next = model.get((r.tick.0 + 1 - oldest) as usize);
                for e in 0..4u16 {
                    let got = h.at(&r, e);
                    if mask0 & (1 << e) == 0 {
                        prop_assert_eq!(got, None);
                        continue;
                    }
                    let b = got.unwrap();
                    prop_assert_eq!(b.from, (r.tick.0 * 8 + u32::from(e)) as f32);
                    let to = next
                        .filter(|&&(_, m)| r.frac > 0.0 && m & (1 << e) != 0)
                        .map(|&(t, _)| (t * 8 + u32::from(e)) as f32);
                    prop_assert_eq!(b.to, to);
                }
                prop_assert!(h.meta(r.tick).is_some());
            }
            prop_assert_eq!(h.stats().rewinds, views.len() as u64);
        }
    }
}
