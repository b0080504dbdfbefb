//! A cache hint for the runtime's hot loops, shared by its crates.

/// Asks the CPU to start loading the cache line holding `p`, and returns at once: a loop
/// that is about to touch lines scattered over memory (a connection's tables, a packet
/// history's slot, a replica's records) issues these first, so that their misses overlap
/// rather than stall it one after another. Only a hint: it reads nothing and cannot fault,
/// and on targets without the instruction it does nothing.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint that never faults, whatever the address, and SSE is
    // part of every x86_64 target.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`prefetch`] of both ends of `item`, which may straddle two cache lines (a 72-byte
/// record, a 40-byte packet slot), or span two (a 128-byte entry).
#[inline(always)]
pub fn prefetch_item<T>(item: &T) {
    let p: *const T = item;
    prefetch(p);
    prefetch(p.cast::<u8>().wrapping_add(std::mem::size_of::<T>() - 1));
}

/// [`prefetch`] of every cache line `item` spans: a struct of several lines that a loop
/// will read much of (a seat's link, some 700 bytes), or a slice (a tick's states of a
/// small match), hinted whole.
#[inline(always)]
pub fn prefetch_lines<T: ?Sized>(item: &T) {
    let p: *const u8 = (item as *const T).cast();
    let size = std::mem::size_of_val(item);
    let mut at = 0;
    while at < size {
        prefetch(p.wrapping_add(at));
        at += 64;
    }
    if size > 0 {
        prefetch(p.wrapping_add(size - 1));
    }
}
