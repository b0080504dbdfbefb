//! The doctor's timed check: how late a thread pinned to a core wakes from sleeps to
//! absolute deadlines, as a worker sleeps to each tick, at normal priority and in the
//! real-time FIFO class.
//!
//! The worker sleeps to `spin` before a deadline and spins the rest, so a wake-up later
//! than its spin starts the tick late. The check sleeps with no spin at all and compares
//! the lateness with the worker's default spin.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use tickforge_io::{cpu, time};

use super::Check;

/// Name of the check at normal priority.
pub const NORMAL: &str = "wakeup";
/// Name of the check in the real-time FIFO class.
pub const FIFO: &str = "wakeup_fifo";
/// Sleeps per run: 2 s at one a millisecond.
const SAMPLES: usize = 2000;
/// Between two deadlines: a worker with a few phase groups wakes about this often.
const PERIOD: Duration = Duration::from_millis(1);

/// How late the wake-ups came, in nanoseconds after their deadlines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lateness {
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub samples: usize,
}

/// The nearest-rank percentiles of `samples` (sorted in place); `None` when empty.
pub fn lateness(samples: &mut [u64]) -> Option<Lateness> {
    samples.sort_unstable();
    let max_ns = *samples.last()?;
    // The smallest value with at least `percent`% of the samples at or below it.
    let rank = |percent: usize| {
        let n = samples.len();
        samples[(n * percent).div_ceil(100).clamp(1, n) - 1]
    };
    Some(Lateness {
        p50_ns: rank(50),
        p99_ns: rank(99),
        max_ns,
        samples: samples.len(),
    })
}

/// Both lines when the timed check does not run.
pub fn skipped(why: &str) -> Vec<Check> {
    [NORMAL, FIFO]
        .into_iter()
        .map(|name| Check::info(name, format!("skipped ({why})")))
        .collect()
}

/// Measures on `core` (the last allowed one), then again at SCHED_FIFO `fifo` when the
/// host permits it, with a progress bar on standard error.
pub fn gather(core: Option<usize>, fifo: Option<u8>) -> Vec<Check> {
    let Some(core) = core else {
        return [NORMAL, FIFO]
            .into_iter()
            .map(|name| Check::unknown(name, "sched_getaffinity", "no core allowed"))
            .collect();
    };
    let spin = tickforge_server::ServerConfig::default().spin;
    let runs = 1 + u64::from(fifo.is_some());
    let bar = ProgressBar::new(SAMPLES as u64 * runs);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix} {bar:30} {pos}/{len} {msg}")
            .expect("constant template"),
    );
    bar.set_prefix("wake-up");
    bar.set_message(format!("normal priority, cpu{core}"));
    let normal = measure(core, None, &bar, 0);
    let normal = check(NORMAL, core, None, &normal, spin, fifo.is_some());
    let fifo = match fifo {
        Some(p) => {
            bar.set_message(format!("SCHED_FIFO {p}, cpu{core}"));
            let r = measure(core, Some(p), &bar, SAMPLES as u64);
            check(FIFO, core, Some(p), &r, spin, true)
        }
        None => Check::info(FIFO, "skipped (SCHED_FIFO refused: see realtime)"),
    };
    bar.finish_and_clear();
    vec![normal, fifo]
}

/// One run on its own pinned thread. The bar is drawn from this thread, never from the
/// measuring one, so drawing does not delay a wake-up.
fn measure(
    core: usize,
    fifo: Option<u8>,
    bar: &ProgressBar,
    base: u64,
) -> Result<Lateness, String> {
    let done = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&done);
    let handle = std::thread::spawn(move || {
        // A development build pins nothing; its wake-ups are measured where the OS runs them.
        if tickforge_io::LINUX_PATH {
            cpu::pin_current_thread(core).map_err(|e| format!("pinning to cpu{core}: {e}"))?;
        }
        if let Some(p) = fifo {
            cpu::set_realtime(p).map_err(|e| format!("SCHED_FIFO {p}: {e}"))?;
        }
        // As a worker does at start.
        time::tighten_timer_slack();
        let mut late = Vec::with_capacity(SAMPLES);
        let start = time::now() + PERIOD;
        for i in 0..SAMPLES {
            let deadline = start + PERIOD * i as u32;
            let woke = time::sleep_until(deadline, Duration::ZERO);
            late.push(u64::try_from((woke - deadline).as_nanos()).unwrap_or(u64::MAX));
            counter.store(i + 1, Ordering::Relaxed);
        }
        lateness(&mut late).ok_or_else(|| "no samples".to_string())
    });
    while !handle.is_finished() {
        bar.set_position(base + done.load(Ordering::Relaxed) as u64);
        std::thread::sleep(Duration::from_millis(100));
    }
    handle
        .join()
        .unwrap_or_else(|_| Err("the measuring thread panicked".into()))
}

/// `85 µs` below a millisecond, `1.31 ms` from there.
fn micros(ns: u64) -> String {
    if ns < 1_000_000 {
        format!("{:.0} µs", ns as f64 / 1e3)
    } else {
        format!("{:.2} ms", ns as f64 / 1e6)
    }
}

/// The verdict on one run: the worker's spin must cover the 99th percentile.
pub fn check(
    name: &'static str,
    core: usize,
    priority: Option<u8>,
    result: &Result<Lateness, String>,
    spin: Duration,
    fifo_permitted: bool,
) -> Check {
    let l = match result {
        Ok(l) => *l,
        Err(why) => return Check::unknown(name, "measuring", why),
    };
    let spin_ns = u64::try_from(spin.as_nanos()).unwrap_or(u64::MAX);
    let data = json!({
        "core": core,
        "rt_priority": priority,
        "samples": l.samples,
        "period_us": PERIOD.as_micros() as u64,
        "p50_us": l.p50_ns as f64 / 1e3,
        "p99_us": l.p99_ns as f64 / 1e3,
        "max_us": l.max_ns as f64 / 1e3,
        "worker_spin_us": spin_ns as f64 / 1e3,
    });
    let reading = format!(
        "late by p50 {}, p99 {}, max {} over {} sleeps on cpu{core}; a worker spins the last {}",
        micros(l.p50_ns),
        micros(l.p99_ns),
        micros(l.max_ns),
        l.samples,
        micros(spin_ns),
    );
    if l.p99_ns <= spin_ns {
        return Check::ok(name, reading).with_data(data);
    }
    let p99_us = l.p99_ns.div_ceil(1000);
    let fix = if priority.is_none() && fifo_permitted {
        "run serve and bench with --rt-priority 10 (see wakeup_fifo)".to_string()
    } else {
        format!(
            "keep other work off the worker cores (isolcpus=, nohz_full=), or raise serve \
             --spin-us to {p99_us} (a core spins that long per wake-up)"
        )
    };
    let behind = micros(l.p99_ns - spin_ns);
    Check::warn(
        name,
        format!("{reading}: 1 tick in 100 starts over {behind} late"),
        fix,
    )
    .with_data(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Verdict;

    #[test]
    fn percentiles_are_nearest_rank() {
        // 1..=100 µs, shuffled: the 50th and 99th values are the p50 and p99.
        let mut samples: Vec<u64> = (1..=100).rev().map(|us| us * 1000).collect();
        samples.swap(3, 70);
        let l = lateness(&mut samples).unwrap();
        assert_eq!((l.p50_ns, l.p99_ns, l.max_ns), (50_000, 99_000, 100_000));

        // 2000 samples with 20 outliers: p99 is the last ordinary one, max an outlier.
        let mut samples = vec![40_000u64; 1980];
        samples.extend([900_000; 20]);
        let l = lateness(&mut samples).unwrap();
        assert_eq!((l.p50_ns, l.p99_ns, l.max_ns), (40_000, 40_000, 900_000));
        samples.push(900_000);
        assert_eq!(lateness(&mut samples).unwrap().p99_ns, 900_000);

        assert_eq!(lateness(&mut [7]).unwrap().p99_ns, 7);
        assert_eq!(lateness(&mut []), None);
    }

    fn late(p50_us: u64, p99_us: u64, max_us: u64) -> Result<Lateness, String> {
        Ok(Lateness {
            p50_ns: p50_us * 1000,
            p99_ns: p99_us * 1000,
            max_ns: max_us * 1000,
            samples: 2000,
        })
    }

    #[test]
    fn the_workers_spin_must_cover_the_99th_percentile() {
        let spin = Duration::from_micros(100);
        let ok = check(NORMAL, 1, None, &late(55, 90, 1310), spin, true);
        assert_eq!(ok.verdict, Verdict::Ok);
        assert_eq!(
            ok.reading,
            "late by p50 55 µs, p99 90 µs, max 1.31 ms over 2000 sleeps on cpu1; a worker spins the last 100 µs"
        );
        let slow = check(NORMAL, 1, None, &late(60, 340, 2000), spin, true);
        assert_eq!(slow.verdict, Verdict::Warn);
        assert!(slow
            .reading
            .ends_with(": 1 tick in 100 starts over 240 µs late"));
        assert!(slow.fix.unwrap().contains("--rt-priority 10"));
        let still = check(FIFO, 1, Some(10), &late(20, 150, 400), spin, true);
        assert_eq!(still.verdict, Verdict::Warn);
        assert!(still.fix.unwrap().contains("--spin-us to 150"));
        let failed = check(FIFO, 1, Some(10), &Err("EPERM".into()), spin, true);
        assert_eq!(failed.verdict, Verdict::Info);
        assert_eq!(failed.reading, "unknown (measuring: EPERM)");
    }

    #[test]
    fn skipped_runs_still_give_both_lines() {
        let s = skipped("--quick");
        assert_eq!(s.iter().map(|c| c.name).collect::<Vec<_>>(), [NORMAL, FIFO]);
        assert!(s.iter().all(|c| c.verdict == Verdict::Info));
    }
}
