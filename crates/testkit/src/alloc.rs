//! A counting global allocator for tests that prove a hot path allocates nothing.
//!
//! A test binary installs it with
//! `#[global_allocator] static GLOBAL: Counting = Counting;` and measures a closure with
//! [`allocations_in`]; only allocations made inside the closure on the calling thread count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Forwards to the system allocator, counting allocations per thread.
pub struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    // try_with: the thread-local may be gone while the thread shuts down.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
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
}
