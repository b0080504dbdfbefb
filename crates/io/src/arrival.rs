//! A datagram's arrival time as the kernel stamps it (`SO_TIMESTAMPNS`, Linux path only), and reading that
//! stamp from a receive call's control buffer: what [`crate::udp`]'s batches and
//! [`crate::stamped`]'s single receive share. Public through [`crate::stamped`].

use std::time::{Duration, Instant};

/// A datagram's arrival time as the kernel stamped it, in the realtime clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ArrivalTime(pub Duration);

impl ArrivalTime {
    /// The same instant on the monotonic clock, given a pair of readings of both clocks
    /// taken together (`now` and `realtime_now`).
    pub fn to_instant(self, now: Instant, realtime_now: Duration) -> Instant {
        match realtime_now.checked_sub(self.0) {
            Some(age) => now.checked_sub(age).unwrap_or(now),
            // Stamped "after" now: the clocks disagree by a hair; take now.
            None => now,
        }
    }
}

/// The realtime clock, as kernel timestamps read it: time since the Unix epoch.
#[cfg(linux_io)]
pub fn realtime_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The realtime clock: time since the Unix epoch (0 for a clock set before 1970).
#[cfg(not(linux_io))]
pub fn realtime_now() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// The `SCM_TIMESTAMPNS` stamp in a control buffer the kernel filled for `msg`.
///
/// # Safety
/// `msg.msg_control` must point at a buffer of at least `msg.msg_controllen` bytes that a
/// receive call on `msg` just filled.
#[cfg(linux_io)]
pub(crate) unsafe fn stamp_of(msg: &libc::msghdr) -> Option<ArrivalTime> {
    let mut stamp = None;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, bounded by
    // msg_controllen (the caller's promise); CMSG_DATA of an SCM_TIMESTAMPNS message holds
    // one timespec, read unaligned because nothing promises its alignment.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = Some(ArrivalTime(Duration::new(
                    ts.tv_sec as u64,
                    ts.tv_nsec as u32,
                )));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    stamp
}
