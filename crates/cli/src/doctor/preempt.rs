//! The doctor's preemption check: is the host taking the worker cores while ticks are due?
//!
//! It measures on the worker core for about a second (sleeps to absolute 1 ms deadlines, as
//! a worker does, counting the wake-ups more than 0.5 ms late, the thread's involuntary
//! context switches and run-queue delay, and the host's steal time), and with `--from
//! REPORT` reads a bench report's late ticks by cause: the share of late ticks the host
//! explains. Then it says what to change: isolate the worker cores, move interrupts off
//! them, lift RT throttling, or move away from other tenants (steal time is a VM's noisy
//! neighbour). [`advise`] is a pure function of what was read, so its tests feed it facts.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use tickforge_io::numa::parse_cpulist;
use tickforge_io::{cpu, time};
use tickforge_telemetry::report::{LateCauses, Report};

use super::{read, Check, Read};

/// The check's name.
pub const NAME: &str = "preemption";
/// Wake-ups in the probe: about a second at one a millisecond.
const PROBE_WAKEUPS: u32 = 1000;
/// A wake-up later than this is a stall (the worker's `HOST_SLACK`).
const STALL: Duration = Duration::from_micros(500);
/// Steal above this share of the host's CPU time is a neighbour worth moving away from.
const STEAL_WARN: f64 = 0.005;

/// What the probe measured on the worker core.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Probe {
    pub core: usize,
    pub wakeups: u32,
    /// Wake-ups more than [`STALL`] late.
    pub stalls: u32,
    pub worst_ms: f64,
    pub involuntary_switches: u64,
    pub run_delay_ms: f64,
    /// Steal over the probe, as a share of the host's CPU time (`None`: no steal field).
    pub steal_share: Option<f64>,
}

/// What the host's configuration says of the worker core.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Host {
    pub core: usize,
    /// The core is in `isolcpus` / `nohz_full`.
    pub isolated: bool,
    pub nohz_full: bool,
    /// `kernel.sched_rt_runtime_us` (`-1`: no throttling).
    pub rt_runtime_us: Option<i64>,
    /// The default IRQ affinity includes the core.
    pub irqs_on_core: Option<bool>,
    /// The 1-minute load average, and the cores allowed.
    pub load: Option<f64>,
    pub cores: usize,
}

/// Runs the probe and reads the host's configuration on `core`; with `from`, a bench
/// report's late ticks by cause.
pub fn gather(core: Option<usize>, from: Option<&Path>) -> Check {
    let Some(core) = core else {
        return Check::unknown(NAME, "sched_getaffinity", "no core allowed");
    };
    let (late, core) = match from.map(read_report) {
        // The core the bench pinned its server to, when the report names one.
        Some(Ok((c, server_core))) => (Some(c), server_core.map_or(core, |c| c as usize)),
        Some(Err(e)) => return Check::unknown(NAME, "--from", e),
        None => (None, core),
    };
    let probe = probe(core);
    advise(&probe, &host(core), late.as_ref())
}

/// The late ticks by cause of a bench report: its sweep's steps summed when it has one,
/// else the run's own.
pub fn late_causes(r: &Report) -> LateCauses {
    match &r.sweep {
        Some(s) if !s.steps.is_empty() => {
            let mut sum = LateCauses::default();
            for step in &s.steps {
                sum.add(&step.late_causes);
            }
            sum
        }
        _ => r.server.late_causes,
    }
}

fn read_report(path: &Path) -> Result<(LateCauses, Option<u32>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let r: Report = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((late_causes(&r), r.host.server_core))
}

fn cpulist_has(text: &Read, core: usize) -> bool {
    text.as_ref()
        .ok()
        .and_then(|t| parse_cpulist(t).ok())
        .is_some_and(|cpus| cpus.contains(&core))
}

/// Whether a hex CPU mask (`/proc/irq/default_smp_affinity`: `3`, `ff,ffffffff`) has `core`.
pub fn mask_has(mask: &str, core: usize) -> Option<bool> {
    let hex: String = mask.trim().chars().filter(|c| *c != ',').collect();
    let digit = hex.len().checked_sub(1 + core / 4)?;
    let d = hex.chars().nth(digit)?.to_digit(16)?;
    Some(d & (1 << (core % 4)) != 0)
}

fn host(core: usize) -> Host {
    const CPU_DIR: &str = "/sys/devices/system/cpu";
    Host {
        core,
        isolated: cpulist_has(&read(format!("{CPU_DIR}/isolated")), core),
        nohz_full: cpulist_has(&read(format!("{CPU_DIR}/nohz_full")), core),
        rt_runtime_us: read("/proc/sys/kernel/sched_rt_runtime_us")
            .ok()
            .and_then(|t| t.parse().ok()),
        irqs_on_core: read("/proc/irq/default_smp_affinity")
            .ok()
            .and_then(|m| mask_has(&m, core)),
        load: read("/proc/loadavg")
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse().ok()),
        cores: cpu::allowed_cores().len(),
    }
}

/// The host's (total, steal) clock ticks from `/proc/stat`'s first line.
fn steal() -> Option<(u64, u64)> {
    let text = read("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let v: Vec<u64> = (line.split_whitespace().skip(1).take(8))
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    Some((v.iter().sum(), *v.get(7)?))
}

/// Sleeps to [`PROBE_WAKEUPS`] 1 ms deadlines on a thread pinned to `core` (normal
/// priority, no spin), counting what kept it from running.
fn probe(core: usize) -> Probe {
    std::thread::spawn(move || {
        let _ = cpu::pin_current_thread(core);
        time::tighten_timer_slack();
        let steal0 = steal();
        // The same counters the server's worker and the bots read.
        let counters = cpu::ThreadProbe::open();
        let before = counters.read();
        let mut p = Probe {
            core,
            ..Probe::default()
        };
        let start = Instant::now();
        for k in 1..=PROBE_WAKEUPS {
            let deadline = start + Duration::from_millis(u64::from(k));
            let woke = time::sleep_until(deadline, Duration::ZERO);
            let late = woke.saturating_duration_since(deadline);
            p.wakeups += 1;
            if late > STALL {
                p.stalls += 1;
            }
            p.worst_ms = p.worst_ms.max(late.as_secs_f64() * 1e3);
        }
        let after = counters.read();
        p.involuntary_switches = after.nivcsw.saturating_sub(before.nivcsw);
        p.run_delay_ms = after.run_delay_ns.saturating_sub(before.run_delay_ns) as f64 / 1e6;
        p.steal_share = match (steal0, steal()) {
            (Some((t0, s0)), Some((t1, s1))) if t1 > t0 => {
                Some(s1.saturating_sub(s0) as f64 / (t1 - t0) as f64)
            }
            _ => None,
        };
        p
    })
    .join()
    .unwrap_or_default()
}

/// The check from what was measured and read: a warning with what to change when the
/// probe saw the core taken (stalls, switches, run-queue delay, steal) or the report's
/// late ticks were the host's; the reading gives the share of late ticks it explains.
pub fn advise(p: &Probe, h: &Host, late: Option<&LateCauses>) -> Check {
    let mut reading = format!(
        "cpu{}: {} of {} wake-ups over 0.5 ms late (worst {:.2} ms), {} involuntary switches, {:.1} ms on the run queue, steal {}",
        p.core,
        p.stalls,
        p.wakeups,
        p.worst_ms,
        p.involuntary_switches,
        p.run_delay_ms,
        p.steal_share
            .map_or("n/a".into(), |s| format!("{:.2}%", s * 100.0)),
    );
    let mut host_share = None;
    if let Some(c) = late {
        let total = c.total();
        let share = (total > 0).then(|| c.host() as f64 / total as f64);
        host_share = share;
        let stalled = (total > 0).then(|| c.stalled() as f64 / total as f64);
        reading.push_str(&format!(
            "; report: {} of {} late ticks the host's ({}: preempted {}, steal {}), {} with the unexplained stalls ({}), own {}, others {}",
            c.host(),
            total,
            share.map_or("n/a".into(), |s| format!("{:.0}%", s * 100.0)),
            c.host_preempted,
            c.host_steal,
            c.stalled(),
            stalled.map_or("n/a".into(), |s| format!("{:.0}%", s * 100.0)),
            c.own,
            c.others,
        ));
    }
    let stolen =
        p.steal_share.is_some_and(|s| s > STEAL_WARN) || late.is_some_and(|c| c.host_steal > 0);
    let preempted =
        p.stalls > 0 || p.run_delay_ms > 1.0 || late.is_some_and(|c| c.host_preempted > 0);
    let mut fixes = Vec::new();
    if preempted && !h.isolated {
        fixes.push(format!(
            "isolate the worker cores from the scheduler and the tick (kernel command line isolcpus={c} nohz_full={c} rcu_nocbs={c}) and pin serve's workers to them",
            c = h.core
        ));
    } else if preempted && !h.nohz_full {
        fixes.push(format!(
            "add nohz_full={} rcu_nocbs={} to the isolated worker core",
            h.core, h.core
        ));
    }
    if preempted && h.irqs_on_core == Some(true) {
        fixes.push(format!(
            "move interrupts off cpu{} (IRQBALANCE_BANNED_CPUS, /proc/irq/*/smp_affinity, /proc/irq/default_smp_affinity)",
            h.core
        ));
    }
    if preempted && h.rt_runtime_us.is_some_and(|us| us >= 0) {
        fixes.push(format!(
            "RT throttling takes a FIFO worker's core {} ms a second: set kernel.sched_rt_runtime_us=-1 on a host whose real-time threads are the workers",
            (1_000_000 - h.rt_runtime_us.unwrap_or(0)) / 1000
        ));
    }
    let busy = h
        .load
        .is_some_and(|l| h.cores > 0 && l > 0.5 * h.cores as f64);
    if preempted && busy {
        fixes.push(format!(
            "other tenants: load average {:.1} on {} core(s); run the bench where nothing else runs, or keep other work off the worker cores (a cgroup cpuset, systemd CPUAffinity=)",
            h.load.unwrap_or(0.0),
            h.cores
        ));
    }
    if stolen {
        fixes.push(
            "steal time: a noisy VM neighbour takes the vCPU; ask for dedicated vCPUs (a dedicated host or a non-burstable instance type)"
                .to_string(),
        );
    }
    let data = json!({
        "core": p.core,
        "wakeups": p.wakeups,
        "stalls": p.stalls,
        "worst_ms": p.worst_ms,
        "involuntary_switches": p.involuntary_switches,
        "run_delay_ms": p.run_delay_ms,
        "steal_share": p.steal_share,
        "isolated": h.isolated,
        "nohz_full": h.nohz_full,
        "sched_rt_runtime_us": h.rt_runtime_us,
        "irqs_on_core": h.irqs_on_core,
        "load": h.load,
        "late_causes": late,
        "host_share_of_late": host_share,
    });
    if !(preempted || stolen) {
        return Check::ok(NAME, reading).with_data(data);
    }
    if fixes.is_empty() {
        fixes.push(
            "the core is isolated yet preempted: look for kernel threads or interrupts on it (perf sched, /proc/interrupts)"
                .to_string(),
        );
    }
    Check::warn(NAME, reading, fixes.join("; ")).with_data(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Verdict;

    fn shared_host() -> Host {
        Host {
            core: 1,
            isolated: false,
            nohz_full: false,
            rt_runtime_us: Some(950_000),
            irqs_on_core: Some(true),
            load: Some(4.2),
            cores: 2,
        }
    }

    #[test]
    fn a_quiet_core_is_ok() {
        let p = Probe {
            core: 1,
            wakeups: 1000,
            steal_share: Some(0.0),
            ..Probe::default()
        };
        let c = advise(&p, &shared_host(), None);
        assert_eq!(c.verdict, Verdict::Ok, "{}", c.reading);
    }

    #[test]
    fn preemption_on_a_shared_core_names_every_fix_and_the_share_it_explains() {
        let p = Probe {
            core: 1,
            wakeups: 1000,
            stalls: 3,
            worst_ms: 4.5,
            involuntary_switches: 12,
            run_delay_ms: 9.0,
            steal_share: Some(0.01),
        };
        let late = LateCauses {
            others: 10,
            host_preempted: 60,
            host_steal: 30,
            ..LateCauses::default()
        };
        let c = advise(&p, &shared_host(), Some(&late));
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(
            c.reading.contains("90 of 100 late ticks the host's (90%"),
            "{}",
            c.reading
        );
        let fix = c.fix.unwrap();
        for want in [
            "isolcpus=1 nohz_full=1",
            "IRQBALANCE_BANNED_CPUS",
            "sched_rt_runtime_us=-1",
            "load average 4.2",
            "noisy VM neighbour",
        ] {
            assert!(fix.contains(want), "{want}: {fix}");
        }
        assert_eq!(c.data["host_share_of_late"], 0.9);
    }

    #[test]
    fn an_isolated_core_with_rt_unthrottled_gets_only_what_is_left() {
        let p = Probe {
            core: 3,
            wakeups: 1000,
            stalls: 1,
            ..Probe::default()
        };
        let h = Host {
            core: 3,
            isolated: true,
            nohz_full: true,
            rt_runtime_us: Some(-1),
            irqs_on_core: Some(false),
            load: Some(0.1),
            cores: 4,
        };
        let c = advise(&p, &h, None);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.fix.unwrap().contains("isolated yet preempted"));
    }

    #[test]
    fn irq_masks_and_report_causes_read() {
        assert_eq!(mask_has("3", 1), Some(true));
        assert_eq!(mask_has("3", 2), Some(false));
        assert_eq!(mask_has("ff,fffffff0", 3), Some(false));
        assert_eq!(mask_has("ff,fffffff0", 32), Some(true));
        assert_eq!(mask_has("1", 9), None);
        let mut r = Report::default();
        r.server.late_causes.others = 4;
        assert_eq!(late_causes(&r).others, 4);
    }

    #[test]
    fn the_probe_counts_what_it_saw() {
        let p = probe(cpu::allowed_cores().last().copied().unwrap_or(0));
        assert_eq!(p.wakeups, PROBE_WAKEUPS);
        assert!(p.stalls <= p.wakeups && p.worst_ms >= 0.0);
    }
}
