//! Exclusive-time scopes: a stack of categories, charged at every transition.
//!
//! A frame starts with [`Scopes::begin_frame`], which opens the root scope
//! ([`Category::Other`]) and the [`Phase::Receive`] phase. Entering a scope charges the time
//! since the last transition to the scope below it; leaving charges the scope being left.
//! So every nanosecond between `begin_frame` and `end_frame` lands in exactly one category
//! and exactly one phase, and nested scopes never count twice.
//!
//! With the `tracy` feature each scope is also a Tracy zone named after its category, each
//! frame a `match frame` zone around them, and [`Scopes::mark_wakeup`] a frame mark named
//! after the thread (`tickforge-worker-N`): a connected Tracy profiler sees the categories
//! on a timeline. Tracy collects only while a profiler is connected (its `ondemand` mode);
//! until then a zone costs a check of that flag and allocates nothing. Without the feature
//! none of it is compiled.

use std::cell::Cell;
use std::time::Instant;

use crate::{Category, Phase};

/// A monotonic clock. `tickforge-io` hands in the OS clock; tests hand in a fake one.
pub type Clock = fn() -> Instant;

/// Deepest nesting of scopes; deeper scopes are charged to the deepest one kept.
const MAX_DEPTH: usize = 16;

/// What one frame cost, split by category and by phase, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameRecord {
    /// Wall time from `begin_frame` to `end_frame`, plus time added with [`FrameRecord::add`].
    pub total_ns: u64,
    /// Exclusive time per category, indexed by [`Category::index`].
    pub category_ns: [u64; Category::COUNT],
    /// Time per phase, indexed by [`Phase::index`].
    pub phase_ns: [u64; Phase::COUNT],
    /// Bit `i` is set when category `i` was entered (or charged) at least once.
    pub entered: u16,
}

impl FrameRecord {
    /// Charges work done for this frame outside its scopes (for example its share of a
    /// batched receive that served several matches).
    pub fn add(&mut self, category: Category, phase: Phase, ns: u64) {
        self.total_ns += ns;
        self.category_ns[category.index()] += ns;
        self.phase_ns[phase.index()] += ns;
        self.entered |= 1 << category.index();
    }

    /// Sum over categories; equals `total_ns` for a record built by [`Scopes`].
    pub fn category_sum_ns(&self) -> u64 {
        self.category_ns.iter().sum()
    }
}

/// Exclusive-time accounting for one thread's frames.
///
/// Uses interior mutability so that a `&Scopes` can be handed down the frame while the
/// code under it borrows its own state mutably. Not `Sync`: one per worker thread.
pub struct Scopes {
    clock: Clock,
    stack: [Cell<Category>; MAX_DEPTH],
    depth: Cell<usize>,
    last_mark: Cell<Instant>,
    frame_start: Cell<Instant>,
    phase: Cell<Phase>,
    phase_mark: Cell<Instant>,
    record: Cell<FrameRecord>,
    #[cfg(feature = "tracy")]
    tracy: tracy::State,
}

impl Scopes {
    /// Creates the accounting for one thread, reading time from `clock`.
    pub fn new(clock: Clock) -> Self {
        let now = clock();
        Scopes {
            clock,
            stack: std::array::from_fn(|_| Cell::new(Category::Other)),
            depth: Cell::new(0),
            last_mark: Cell::new(now),
            frame_start: Cell::new(now),
            phase: Cell::new(Phase::Receive),
            phase_mark: Cell::new(now),
            record: Cell::new(FrameRecord::default()),
            #[cfg(feature = "tracy")]
            tracy: tracy::State::default(),
        }
    }

    /// Reads the clock this accounting uses.
    pub fn now(&self) -> Instant {
        (self.clock)()
    }

    /// Starts a frame: the root scope is [`Category::Other`], the phase [`Phase::Receive`].
    pub fn begin_frame(&self) {
        let now = self.now();
        self.record.set(FrameRecord::default());
        self.stack[0].set(Category::Other);
        self.depth.set(1);
        self.last_mark.set(now);
        self.frame_start.set(now);
        self.phase.set(Phase::Receive);
        self.phase_mark.set(now);
        #[cfg(feature = "tracy")]
        self.tracy.begin_frame();
    }

    /// Ends the frame started by [`Scopes::begin_frame`] and returns what it cost.
    ///
    /// Scopes still open are closed at this instant.
    pub fn end_frame(&self) -> FrameRecord {
        let now = self.now();
        self.charge(now);
        self.charge_phase(now);
        self.depth.set(0);
        let mut record = self.record.get();
        record.total_ns += nanos(now, self.frame_start.get());
        #[cfg(feature = "tracy")]
        self.tracy.end_frame();
        record
    }

    /// Marks the end of one wake-up of the thread that owns these scopes (a worker's
    /// frame: receive, every due match's tick, send). With the `tracy` feature, a Tracy
    /// frame mark named after the thread; without it, nothing.
    #[inline]
    pub fn mark_wakeup(&self) {
        #[cfg(feature = "tracy")]
        self.tracy.mark_wakeup();
    }

    /// Enters `category` until the returned guard drops.
    #[must_use = "the scope ends when the guard drops"]
    pub fn scope(&self, category: Category) -> ScopeGuard<'_> {
        if self.depth.get() == 0 {
            // Outside a frame (a test, a tool stepping a world offline): nothing to charge.
            return ScopeGuard {
                scopes: self,
                active: false,
                #[cfg(feature = "tracy")]
                _zone: None,
            };
        }
        let now = self.now();
        self.charge(now);
        let depth = self.depth.get();
        if depth < MAX_DEPTH {
            self.stack[depth].set(category);
        }
        self.depth.set(depth + 1);
        let mut record = self.record.get();
        record.entered |= 1 << category.index();
        self.record.set(record);
        ScopeGuard {
            scopes: self,
            active: true,
            #[cfg(feature = "tracy")]
            _zone: tracy::zone(category),
        }
    }

    /// Moves the frame into `phase`; the time since the last phase change goes to the old one.
    pub fn phase(&self, phase: Phase) {
        let now = self.now();
        self.charge_phase(now);
        self.phase.set(phase);
    }

    /// Like [`Scopes::phase`], returning a guard that does nothing on drop; lets a caller
    /// write `let _p = scopes.enter_phase(..)` for symmetry with scopes.
    pub fn enter_phase(&self, phase: Phase) -> PhaseGuard {
        self.phase(phase);
        PhaseGuard(())
    }

    fn charge(&self, now: Instant) {
        let depth = self.depth.get();
        if depth == 0 {
            self.last_mark.set(now);
            return;
        }
        let top = self.stack[depth.min(MAX_DEPTH) - 1].get();
        let mut record = self.record.get();
        record.category_ns[top.index()] += nanos(now, self.last_mark.get());
        record.entered |= 1 << top.index();
        self.record.set(record);
        self.last_mark.set(now);
    }

    fn charge_phase(&self, now: Instant) {
        let mut record = self.record.get();
        record.phase_ns[self.phase.get().index()] += nanos(now, self.phase_mark.get());
        self.record.set(record);
        self.phase_mark.set(now);
    }

    fn exit(&self) {
        let now = self.now();
        self.charge(now);
        let depth = self.depth.get();
        debug_assert!(depth > 1, "scope exit without a matching enter");
        self.depth.set(depth.saturating_sub(1).max(1));
    }
}

fn nanos(later: Instant, earlier: Instant) -> u64 {
    u64::try_from(later.saturating_duration_since(earlier).as_nanos()).unwrap_or(u64::MAX)
}

/// Keeps a category open; leaving it charges the time since the last transition.
pub struct ScopeGuard<'a> {
    scopes: &'a Scopes,
    active: bool,
    /// Ends after the scope's time is charged.
    #[cfg(feature = "tracy")]
    _zone: Option<tracy_client::Span>,
}

impl Drop for ScopeGuard<'_> {
    fn drop(&mut self) {
        if self.active {
            self.scopes.exit();
        }
    }
}

/// Returned by [`Scopes::enter_phase`]; phases end when the next one starts.
pub struct PhaseGuard(());

/// The `tracy` feature: zones for the categories and the match frame, a frame mark per
/// wake-up.
#[cfg(feature = "tracy")]
mod tracy {
    use std::cell::{Cell, OnceCell};

    use tracy_client::{span_location, Client, FrameName, Span, SpanLocation};

    use crate::Category;

    /// A Tracy zone named after `category`, ended when dropped.
    pub(super) fn zone(category: Category) -> Option<Span> {
        // One static location per category: a zone allocates nothing.
        let location: &'static SpanLocation = match category {
            Category::Replication => span_location!("replication"),
            Category::Fow => span_location!("fow"),
            Category::Network => span_location!("network"),
            Category::Animation => span_location!("animation"),
            Category::Gameplay => span_location!("gameplay"),
            Category::Movement => span_location!("movement"),
            Category::Equippable => span_location!("equippable"),
            Category::Character => span_location!("character"),
            Category::Physics => span_location!("physics"),
            Category::Other => span_location!("other"),
        };
        Some(Client::running()?.span(location, 0))
    }

    thread_local! {
        /// The zone of the frame under way on this thread. Kept by the thread, not by the
        /// `Scopes` (which a worker may be moved with): Tracy ends a zone on the thread
        /// that began it.
        static FRAME: Cell<Option<Span>> = const { Cell::new(None) };
    }

    /// The name of a thread's wake-ups.
    #[derive(Default)]
    pub(super) struct State {
        wakeup: OnceCell<Option<FrameName>>,
    }

    impl State {
        pub(super) fn begin_frame(&self) {
            FRAME.with(|frame| {
                // A frame begun again without its end ends the old zone first.
                drop(frame.take());
                let zone = Client::running().map(|c| c.span(span_location!("match frame"), 0));
                frame.set(zone);
            });
        }

        pub(super) fn end_frame(&self) {
            FRAME.with(|frame| drop(frame.take()));
        }

        pub(super) fn mark_wakeup(&self) {
            // Named once per thread (leaked once, as Tracy keeps frame names for good).
            let name = self.wakeup.get_or_init(|| {
                let client = Client::running()?;
                let thread = std::thread::current();
                let name = thread.name().unwrap_or("tickforge thread");
                // Linux keeps 15 bytes of a thread name; Tracy keeps the whole.
                client.set_thread_name(name);
                Some(FrameName::new_leak(name.to_string()))
            });
            if let (Some(client), Some(name)) = (Client::running(), name) {
                client.secondary_frame_mark(*name);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

    thread_local! {
        static BASE: Instant = Instant::now();
        static OFFSET_NS: Cell<u64> = const { Cell::new(0) };
    }

    /// A fake clock: time moves only when the test says so.
    pub(crate) fn fake_now() -> Instant {
        BASE.with(|b| *b) + Duration::from_nanos(OFFSET_NS.with(Cell::get))
    }

    pub(crate) fn advance(ns: u64) {
        OFFSET_NS.with(|o| o.set(o.get() + ns));
    }

    #[test]
    fn nested_scopes_charge_exclusive_time() {
        let s = Scopes::new(fake_now);
        s.begin_frame();
        advance(5); // other
        {
            let _n = s.scope(Category::Network);
            advance(10);
            {
                let _m = s.scope(Category::Movement);
                advance(100);
            }
            advance(20); // back in network
        }
        advance(7); // other again
        let r = s.end_frame();
        assert_eq!(r.total_ns, 142);
        assert_eq!(r.category_ns[Category::Other.index()], 12);
        assert_eq!(r.category_ns[Category::Network.index()], 30);
        assert_eq!(r.category_ns[Category::Movement.index()], 100);
        assert_eq!(r.category_sum_ns(), r.total_ns);
        let entered = (1 << Category::Other.index())
            | (1 << Category::Network.index())
            | (1 << Category::Movement.index());
        assert_eq!(r.entered, entered);
    }

    #[test]
    fn phases_partition_the_frame() {
        let s = Scopes::new(fake_now);
        s.begin_frame();
        advance(3);
        s.phase(Phase::Simulate);
        advance(40);
        s.phase(Phase::Replicate);
        advance(11);
        s.phase(Phase::Send);
        advance(2);
        let r = s.end_frame();
        assert_eq!(r.phase_ns, [3, 40, 11, 2]);
        assert_eq!(r.phase_ns.iter().sum::<u64>(), r.total_ns);
    }

    #[test]
    fn frames_are_independent() {
        let s = Scopes::new(fake_now);
        s.begin_frame();
        advance(50);
        let first = s.end_frame();
        advance(1_000); // between frames: charged to nothing
        s.begin_frame();
        advance(8);
        let second = s.end_frame();
        assert_eq!(first.total_ns, 50);
        assert_eq!(second.total_ns, 8);
        assert_eq!(second.category_sum_ns(), 8);
    }

    #[test]
    fn added_work_counts_in_total_category_and_phase() {
        let mut r = FrameRecord::default();
        r.add(Category::Network, Phase::Receive, 900);
        assert_eq!(r.total_ns, 900);
        assert_eq!(r.category_sum_ns(), 900);
        assert_eq!(r.phase_ns[Phase::Receive.index()], 900);
    }

    #[test]
    fn scopes_outside_a_frame_charge_nothing() {
        let s = Scopes::new(fake_now);
        {
            let _g = s.scope(Category::Movement);
            advance(10);
        }
        s.begin_frame();
        advance(4);
        let r = s.end_frame();
        assert_eq!(r.total_ns, 4);
        assert_eq!(r.category_ns[Category::Movement.index()], 0);
    }

    /// A worker moves to its thread with its scopes, with or without the `tracy` feature.
    #[test]
    fn scopes_can_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<Scopes>();
    }

    /// With the `tracy` feature and no profiler connected, the zones and marks neither
    /// block nor change the accounting.
    #[cfg(feature = "tracy")]
    #[test]
    fn tracy_zones_without_a_profiler_change_nothing() {
        let s = Scopes::new(fake_now);
        for _ in 0..1_000 {
            s.begin_frame();
            {
                let _n = s.scope(Category::Network);
                advance(3);
                let _m = s.scope(Category::Movement);
                advance(4);
            }
            let r = s.end_frame();
            assert_eq!(r.category_ns[Category::Network.index()], 3);
            assert_eq!(r.category_ns[Category::Movement.index()], 4);
            s.mark_wakeup();
        }
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let s = Scopes::new(fake_now);
        s.begin_frame();
        let guards: Vec<_> = (0..MAX_DEPTH + 4)
            .map(|_| s.scope(Category::Physics))
            .collect();
        advance(9);
        drop(guards);
        let r = s.end_frame();
        assert_eq!(r.category_ns[Category::Physics.index()], 9);
        assert_eq!(r.category_sum_ns(), r.total_ns);
    }
}
