//! A counting global allocator for tests that prove a hot path allocates nothing.
//!
//! A test binary installs it with
//! `#[global_allocator] static GLOBAL: Counting = Counting;` and measures a closure with
//! [`allocations_in`]; only allocations made inside the closure on the calling thread count.
//! To find an allocation a test counted, measure with [`allocations_traced_in`] instead: it
//! prints where each one was made.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Forwards to the system allocator, counting allocations per thread.
pub struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Set inside [`allocations_traced_in`].
    static TRACING: Cell<bool> = const { Cell::new(false) };
}

fn count_one() {
    // try_with: the thread-local may be gone while the thread shuts down.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    if TRACING.try_with(Cell::get).unwrap_or(false) {
        // Taking and printing the backtrace allocates: tracing is off meanwhile, and what
        // it allocated is taken off the count.
        TRACING.set(false);
        let counted = ALLOCATIONS.get();
        eprintln!(
            "allocation {counted}:\n{}",
            std::backtrace::Backtrace::force_capture()
        );
        ALLOCATIONS.set(counted);
        TRACING.set(true);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches only
// a const-initialised thread-local cell, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: `ptr` and `layout` come from this allocator, which is `System`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` and `layout` come from this allocator, which is `System`'s.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Runs `f` and returns its result with the allocations it made on this thread (zero
/// unless [`Counting`] is the binary's global allocator).
pub fn allocations_in<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    let out = f();
    (out, ALLOCATIONS.with(Cell::get) - before)
}

/// As [`allocations_in`], and prints a backtrace of each allocation counted to stderr.
pub fn allocations_traced_in<T>(f: impl FnOnce() -> T) -> (T, u64) {
    /// Stops tracing however `f` ends.
    struct Tracing;
    impl Drop for Tracing {
        fn drop(&mut self) {
            TRACING.set(false);
        }
    }
    TRACING.set(true);
    let _tracing = Tracing;
    allocations_in(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    #[test]
    fn counts_what_the_closure_allocates_and_nothing_else() {
        let (v, n) = allocations_in(|| vec![1u8; 100]);
        assert_eq!((v.len(), n), (100, 1));
        let (_, n) = allocations_in(|| v.iter().map(|&b| u64::from(b)).sum::<u64>());
        assert_eq!(n, 0);
    }

    #[test]
    fn tracing_counts_what_the_closure_allocates_not_the_backtraces() {
        let (v, n) = allocations_traced_in(|| vec![1u8; 100]);
        assert_eq!((v.len(), n), (100, 1));
        let (_, n) = allocations_in(|| vec![1u8; 100]);
        assert_eq!(n, 1, "tracing is off again");
    }
}
