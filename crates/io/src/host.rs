//! Questions about the host that only a system call answers: whether the kernel offers UDP
//! segmentation offload, and the calling thread's timer slack. `tickforge doctor` asks
//! them; nothing on the hot path does. On the portable path both are Linux questions with
//! a neutral answer: no offload, no slack reading. And one request of it, for a bench's
//! many sockets: a higher open-files limit ([`raise_open_files`]).

#[cfg(not(linux_io))]
use std::{io, time::Duration};

/// Whether this kernel takes `UDP_SEGMENT`: never on the portable path.
#[cfg(not(linux_io))]
pub fn udp_gso_supported() -> io::Result<bool> {
    Ok(false)
}

/// Whether this kernel takes `UDP_GRO`: never on the portable path.
#[cfg(not(linux_io))]
pub fn udp_gro_supported() -> io::Result<bool> {
    Ok(false)
}

/// `None`: the portable path reads no timer slack.
#[cfg(not(linux_io))]
pub fn timer_slack() -> Option<Duration> {
    None
}

#[cfg(linux_io)]
pub use linux::*;

#[cfg(linux_io)]
mod linux {
    use std::io;
    use std::net::{Ipv4Addr, UdpSocket};
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    /// `UDP_SEGMENT` from linux/udp.h (Linux 4.18): the size the kernel cuts a send into.
    const UDP_SEGMENT: libc::c_int = 103;
    /// `UDP_GRO` from linux/udp.h (Linux 5.0): coalesce received datagrams of one flow.
    const UDP_GRO: libc::c_int = 104;

    /// Whether this kernel takes `UDP_SEGMENT` (generic segmentation offload for UDP) on a
    /// socket bound to 127.0.0.1. `Ok(false)` when the kernel does not know the option; an
    /// error when no socket could be made to ask.
    pub fn udp_gso_supported() -> io::Result<bool> {
        // 1200 bytes: any segment size under the loopback MTU is accepted where GSO exists.
        probe_udp_option(UDP_SEGMENT, 1200)
    }

    /// Whether this kernel takes `UDP_GRO` (receive coalescing for UDP) on a socket bound to
    /// 127.0.0.1. `Ok(false)` when the kernel does not know the option.
    pub fn udp_gro_supported() -> io::Result<bool> {
        probe_udp_option(UDP_GRO, 1)
    }

    fn probe_udp_option(option: libc::c_int, value: libc::c_int) -> io::Result<bool> {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        // SAFETY: setsockopt reads one c_int we own, for an option of this socket only.
        let rc = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_UDP,
                option,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            // An older kernel: the option does not exist at this level.
            Some(libc::ENOPROTOOPT) | Some(libc::EINVAL) => Ok(false),
            _ => Err(err),
        }
    }

    /// The calling thread's timer slack: how much later than asked the kernel may wake it
    /// from a sleep (50 µs by default; [`crate::time::tighten_timer_slack`] sets 1 ns). `None`
    /// where the OS will not say.
    pub fn timer_slack() -> Option<Duration> {
        // SAFETY: PR_GET_TIMERSLACK takes no pointer; it returns the slack in nanoseconds.
        let ns = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        u64::try_from(ns).ok().map(Duration::from_nanos)
    }
}

#[cfg(all(test, linux_io))]
mod tests {
    use super::*;

    #[test]
    fn udp_offload_probes_answer_without_error_on_loopback() {
        // Every kernel tickforge runs on answers yes or no; neither is an error.
        udp_gso_supported().unwrap();
        udp_gro_supported().unwrap();
    }

    #[test]
    fn tightened_timer_slack_reads_back() {
        std::thread::spawn(|| {
            assert!(timer_slack().is_some());
            if crate::time::tighten_timer_slack() {
                assert_eq!(timer_slack(), Some(std::time::Duration::from_nanos(1)));
            }
        })
        .join()
        .unwrap();
    }
}

/// Raises this process's soft limit on open files to `needed` if it is lower, as far as
/// the hard limit allows, and returns the soft limit then in force. A bench that opens a
/// socket per simulated player needs more than the 1,024 many systems start with.
#[cfg(unix)]
// `rlim_t` is a u64 on Linux, not on every unix.
#[allow(clippy::unnecessary_cast)]
pub fn raise_open_files(needed: u64) -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let needed = needed as libc::rlim_t;
    let had = limit.rlim_cur;
    if had >= needed || had == limit.rlim_max {
        return Ok(had as u64);
    }
    limit.rlim_cur = needed.min(limit.rlim_max);
    loop {
        // SAFETY: setrlimit reads one rlimit we own; a soft limit within the hard one.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0 {
            return Ok(limit.rlim_cur as u64);
        }
        let err = std::io::Error::last_os_error();
        // A system may refuse a soft limit under the hard one: macOS, whose hard limit is
        // often infinite, takes none past `kern.maxfilesperproc`. Step back towards what
        // it had, halving the raise, until one is taken (at most 64 tries).
        if err.raw_os_error() != Some(libc::EINVAL) || limit.rlim_cur - had <= 1 {
            return Err(err);
        }
        limit.rlim_cur = had + (limit.rlim_cur - had) / 2;
    }
}

/// Elsewhere there is no such limit to raise.
#[cfg(not(unix))]
pub fn raise_open_files(_needed: u64) -> std::io::Result<u64> {
    Ok(u64::MAX)
}

#[cfg(all(test, unix))]
mod open_files_tests {
    use super::raise_open_files;

    #[allow(clippy::unnecessary_cast)]
    fn soft_and_hard() -> (u64, u64) {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit we own.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
            0
        );
        (limit.rlim_cur as u64, limit.rlim_max as u64)
    }

    #[test]
    fn the_open_files_limit_only_goes_up_and_never_past_the_hard_one() {
        let (soft, hard) = soft_and_hard();
        // Room to raise it, if it has none (a process may always lower its own).
        let soft = if soft == hard {
            let lower = libc::rlimit {
                rlim_cur: (hard - 1) as libc::rlim_t,
                rlim_max: hard as libc::rlim_t,
            };
            // SAFETY: setrlimit reads one rlimit we own.
            assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lower) }, 0);
            hard - 1
        } else {
            soft
        };
        // Asking for less leaves it as it is.
        assert_eq!(raise_open_files(0).unwrap(), soft);
        assert_eq!(soft_and_hard().0, soft);
        // Asking for more raises it, and says where it stands.
        let now = raise_open_files(soft + 1).unwrap();
        assert_eq!(now, soft + 1);
        assert_eq!(soft_and_hard().0, now);
        // Never past the hard limit: on Linux up to it; where the system caps the soft limit
        // lower (macOS, under an infinite hard limit), as far as it takes.
        let top = raise_open_files(u64::MAX).unwrap();
        assert_eq!(soft_and_hard().0, top);
        if cfg!(target_os = "linux") {
            assert_eq!(top, hard);
        } else {
            assert!(top >= now && top <= hard, "{top} against {now} and {hard}");
        }
    }
}
