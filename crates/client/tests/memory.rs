//! Memory per client session: the heap a [`Session`] owns, for the reference shooter at
//! ten players, after its welcome and two seconds of snapshots.
//!
//! The test binary's allocator counts, on this thread, the bytes allocated and freed. The
//! session's heap is measured twice: what its own calls allocated net of what they freed
//! (from `Session::new`, the token included, through the welcome and the warm-up), and
//! what dropping it frees. The two agree; the figure is asserted at most 128 KiB.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use tickforge_client::{compact_link_config, Session, SessionConfig};

#[path = "shooter_world/mod.rs"]
mod shooter_world;

use shooter_world::{new_session, ShooterWorld};

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
    static FREED: Cell<u64> = const { Cell::new(0) };
}

struct Bytes;

// SAFETY: forwards every call unchanged to the system allocator; the counters are
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Bytes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|n| n.set(n.get() + layout.size() as u64));
        // SAFETY: the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|n| n.set(n.get() + layout.size() as u64));
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATED.try_with(|n| n.set(n.get() + new_size as u64));
        let _ = FREED.try_with(|n| n.set(n.get() + layout.size() as u64));
        // SAFETY: `ptr` and `layout` come from this allocator, which is `System`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = FREED.try_with(|n| n.set(n.get() + layout.size() as u64));
        // SAFETY: as for `realloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Bytes = Bytes;

/// Runs `f`; returns its result, the bytes it allocated and the bytes it freed.
fn heap_in<T>(f: impl FnOnce() -> T) -> (T, u64, u64) {
    let (a, d) = (ALLOCATED.get(), FREED.get());
    let out = f();
    (out, ALLOCATED.get() - a, FREED.get() - d)
}

const BUDGET: u64 = 128 * 1024;

/// The heap session 0 owns after its welcome and two seconds of play, made by `make`: what
/// dropping it frees, and what its calls allocated net of what they freed.
fn measure(make: fn(Instant) -> Session) -> (u64, i64, u16) {
    let mut w = ShooterWorld::new(Duration::from_millis(20));
    w.record = false;
    // Session 0 made again, measured: its token and everything `new` reserves.
    let (session, made, _) = heap_in(|| make(w.start));
    w.sessions[0] = session;
    let mut net = made as i64;
    // Two seconds of play, measuring session 0's calls only: the world's step drives
    // every session, so it is run with session 0 swapped out and then stepped by hand.
    for _ in 0..256 {
        w.step_measuring(0, &mut |f| {
            let ((), a, d) = heap_in(f);
            net += a as i64 - d as i64;
        });
    }
    let s = &w.sessions[0];
    assert!(
        s.welcome().is_some() && s.stats().snapshots > 200,
        "{:?}",
        s.stats()
    );
    let entities = s.welcome().unwrap().entities;
    let session = std::mem::replace(&mut w.sessions[0], new_session(0, w.start));
    let ((), _, freed) = heap_in(|| drop(session));
    (freed, net, entities)
}

fn report(name: &str, (freed, net, entities): (u64, i64, u16)) {
    eprintln!(
        "memory per session, {name} (shooter, {} players, {entities} entities): {freed} bytes \
         ({:.1} KiB) freed when dropped; {net} bytes net allocated by its calls; budget \
         {BUDGET}",
        shooter_world::PLAYERS,
        freed as f64 / 1024.0
    );
    // The two measures agree but for what the calls allocated that outlives the session
    // elsewhere (within a few hundred bytes).
    assert!(
        (freed as i64 - net).abs() < 2048,
        "{freed} freed, {net} net"
    );
}

/// A session with the compact settings: the C library's, and the bots'
/// (`tickforge-bots`' `session_config`).
fn compact(start: Instant) -> Session {
    Session::with_link_config(
        shooter_world::token(0),
        tickforge_shooter::schema(),
        SessionConfig::COMPACT,
        compact_link_config(),
        start,
    )
    .unwrap()
}

#[test]
fn a_compact_shooter_session_of_ten_players_owns_at_most_128_kib() {
    let m = measure(compact);
    report("compact", m);
    assert!(m.0 <= BUDGET, "{} bytes", m.0);
}

#[test]
fn a_default_shooter_session_of_ten_players_is_measured() {
    let m = measure(|start| new_session(0, start));
    report("default", m);
    // Not within the budget: the link's default queues and a second ring of history.
    assert!(m.0 <= 2 * BUDGET, "{} bytes", m.0);
}
