//! Cores: which ones this process may use, pinning to one, and CPU time used.
//!
//! Pinning and the real-time class are the Linux path's: on the portable path they return
//! an `Unsupported` error (a development server runs where the OS puts it, at normal
//! priority), every core counts as allowed, and CPU time is read where the OS gives it
//! without a platform crate (Unix clocks; zero on Windows).

use std::io;
use std::time::Duration;

/// The error of what only the Linux path does.
#[cfg(not(linux_io))]
fn linux_only(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{what} is for the Linux production path; this is a development build"),
    )
}

/// Every logical CPU: the portable path reads no affinity mask.
#[cfg(not(linux_io))]
pub fn allowed_cores() -> Vec<usize> {
    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
}

/// Refused on the portable path (`Unsupported`): no pinning outside Linux.
#[cfg(not(linux_io))]
pub fn pin_current_thread(_core: usize) -> io::Result<()> {
    Err(linux_only("pinning a thread to a core"))
}

/// Refused on the portable path (`Unsupported`): no real-time class outside Linux.
#[cfg(not(linux_io))]
pub fn set_realtime(_priority: u8) -> io::Result<()> {
    Err(linux_only("the real-time scheduling class"))
}

/// Nothing to release on the portable path, which never pins or raises a thread.
#[cfg(not(linux_io))]
pub fn release_current_thread(_cores: &[usize]) -> io::Result<()> {
    Ok(())
}

/// Always `None` on the portable path.
#[cfg(not(linux_io))]
pub fn realtime_priority() -> Option<u8> {
    None
}

/// The logical CPUs this process may run on, in ascending order.
#[cfg(linux_io)]
pub fn allowed_cores() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins the calling thread to logical CPU `core`.
#[cfg(linux_io)]
pub fn pin_current_thread(core: usize) -> io::Result<()> {
    if core >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "core number out of range",
        ));
    }
    // SAFETY: as above; sched_setaffinity only reads the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Moves the calling thread to the real-time FIFO class at `priority` (1–99): it then runs
/// whenever it is ready, ahead of every normal thread on its core, so a deadline is met
/// at the wake-up instead of after whatever else the scheduler picked. The kernel's RT
/// throttling (`/proc/sys/kernel/sched_rt_runtime_us`, 95% by default) still leaves the
/// core some time for others. Needs CAP_SYS_NICE or an `RLIMIT_RTPRIO` of at least
/// `priority`; the error is the kernel's (EPERM) when neither is there.
#[cfg(linux_io)]
pub fn set_realtime(priority: u8) -> io::Result<()> {
    if !(1..=99).contains(&priority) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "real-time priority must be 1 to 99",
        ));
    }
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    // SAFETY: sched_setscheduler reads one sched_param we own; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Lets the calling thread run anywhere in `cores` and in the normal scheduling class:
/// for a helper thread spawned by a pinned real-time worker, which inherits both and would
/// otherwise take its time from the worker's own core, ahead of normal threads.
#[cfg(linux_io)]
pub fn release_current_thread(cores: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cores.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads one sched_param we own; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's real-time FIFO priority, or `None` when it is not SCHED_FIFO.
#[cfg(linux_io)]
pub fn realtime_priority() -> Option<u8> {
    // SAFETY: both calls only read the calling thread's scheduling and write `param`.
    unsafe {
        if libc::sched_getscheduler(0) != libc::SCHED_FIFO {
            return None;
        }
        let mut param: libc::sched_param = std::mem::zeroed();
        if libc::sched_getparam(0, &mut param) != 0 {
            return None;
        }
        u8::try_from(param.sched_priority).ok()
    }
}

/// CPU time (user + system) this process has used since it started; zero on Windows,
/// where reading it would take a platform crate for a development build's report.
#[cfg(unix)]
pub fn process_cpu_time() -> Duration {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Zero: not read on Windows.
#[cfg(not(unix))]
pub fn process_cpu_time() -> Duration {
    Duration::ZERO
}

/// CPU time (user + system) the calling thread has used since it started; zero on Windows.
#[cfg(unix)]
pub fn thread_cpu_time() -> Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Zero: not read on Windows.
#[cfg(not(unix))]
pub fn thread_cpu_time() -> Duration {
    Duration::ZERO
}

/// A thread's scheduler counters at one instant: what the host took from it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadSched {
    /// Involuntary context switches.
    pub nivcsw: u64,
    /// Time runnable but waiting for a CPU, nanoseconds: preempted, or a real-time thread
    /// throttled for the rest of a second (`kernel.sched_rt_runtime_us`); 0 where unknown.
    pub run_delay_ns: u64,
}

/// The calling thread's scheduler counters: `getrusage(RUSAGE_THREAD)` and its
/// `/proc/thread-self/schedstat`, opened once. Both read zero off Linux.
pub struct ThreadProbe {
    schedstat: Option<std::fs::File>,
}

impl ThreadProbe {
    /// Opens the calling thread's counters (call it on the thread it reads).
    pub fn open() -> ThreadProbe {
        ThreadProbe {
            schedstat: std::fs::File::open("/proc/thread-self/schedstat").ok(),
        }
    }

    /// Whether the OS gives the thread's run-queue delay (Linux's schedstat).
    pub fn knows_run_delay(&self) -> bool {
        self.schedstat.is_some()
    }

    /// Reads both now: a `getrusage` (about 0.2 µs) and a read of the open file (about
    /// 0.5 µs). Allocates nothing.
    pub fn read(&self) -> ThreadSched {
        ThreadSched {
            nivcsw: thread_nivcsw(),
            run_delay_ns: self.run_delay_ns(),
        }
    }

    /// The run-queue delay alone, nanoseconds (0 where unknown): one read of the open
    /// file, for a caller that needs no switch count.
    pub fn run_delay_ns(&self) -> u64 {
        self.schedstat
            .as_ref()
            .and_then(read_run_delay)
            .unwrap_or(0)
    }
}

/// The calling thread's involuntary context switches; 0 off Linux.
#[cfg(not(target_os = "linux"))]
pub fn thread_nivcsw() -> u64 {
    0
}

/// The calling thread's involuntary context switches.
#[cfg(target_os = "linux")]
pub fn thread_nivcsw() -> u64 {
    // SAFETY: getrusage writes a plain struct we own; RUSAGE_THREAD is Linux's.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if rc == 0 {
        ru.ru_nivcsw as u64
    } else {
        0
    }
}

fn read_run_delay(f: &std::fs::File) -> Option<u64> {
    let mut buf = [0u8; 96];
    // Only Linux has the file; elsewhere `f` is never opened, but this still builds.
    #[cfg(unix)]
    let n = std::os::unix::fs::FileExt::read_at(f, &mut buf, 0).ok()?;
    #[cfg(windows)]
    let n = std::os::windows::fs::FileExt::seek_read(f, &mut buf, 0).ok()?;
    parse_run_delay(&buf[..n])
}

/// The second field of a schedstat line: `on-cpu-ns run-delay-ns timeslices`.
fn parse_run_delay(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

#[cfg(unix)]
fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    if unsafe { libc::clock_gettime(id, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_parses_and_the_real_counters_never_go_back() {
        assert_eq!(parse_run_delay(b"938636 1503212 1\n"), Some(1_503_212));
        assert_eq!(parse_run_delay(b"938636"), None);
        assert_eq!(parse_run_delay(b"garbage"), None);
        let probe = ThreadProbe::open();
        let a = probe.read();
        let mut x = 0u64;
        for i in 0..100_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        let b = probe.read();
        assert!(
            b.nivcsw >= a.nivcsw && b.run_delay_ns >= a.run_delay_ns,
            "{a:?} {b:?}"
        );
        assert!(probe.run_delay_ns() >= b.run_delay_ns);
        // Linux says; elsewhere the probe knows nothing and reads zero.
        assert_eq!(probe.knows_run_delay(), cfg!(target_os = "linux"));
        if !probe.knows_run_delay() {
            assert_eq!(probe.run_delay_ns(), 0);
        }
    }

    #[cfg(linux_io)]
    #[test]
    fn pinning_to_an_allowed_core_sticks() {
        let cores = allowed_cores();
        assert!(!cores.is_empty());
        let last = *cores.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(last).unwrap();
            assert_eq!(allowed_cores(), vec![last]);
            release_current_thread(&cores).unwrap();
            assert_eq!(allowed_cores(), cores);
        })
        .join()
        .unwrap();
        assert!(pin_current_thread(usize::MAX).is_err());
    }

    #[cfg(not(linux_io))]
    #[test]
    fn the_portable_path_refuses_pinning_and_real_time_and_counts_every_core() {
        let cores = allowed_cores();
        assert_eq!(
            cores,
            (0..std::thread::available_parallelism().unwrap().get()).collect::<Vec<_>>()
        );
        let e = pin_current_thread(0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
        let e = set_realtime(1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
        assert_eq!(realtime_priority(), None);
        release_current_thread(&cores).unwrap();
    }

    #[cfg(linux_io)]
    #[test]
    fn realtime_is_granted_or_refused_cleanly() {
        std::thread::spawn(|| {
            assert!(set_realtime(0).is_err());
            assert!(set_realtime(100).is_err());
            assert_eq!(realtime_priority(), None);
            match set_realtime(1) {
                // Root or CAP_SYS_NICE: the thread now says so, until released.
                Ok(()) => {
                    assert_eq!(realtime_priority(), Some(1));
                    release_current_thread(&allowed_cores()).unwrap();
                    assert_eq!(realtime_priority(), None);
                }
                // Otherwise the kernel's refusal, and nothing changed.
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
                    assert_eq!(realtime_priority(), None);
                }
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let before = thread_cpu_time();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(thread_cpu_time() > before);
        assert!(process_cpu_time() >= thread_cpu_time());
    }
}
