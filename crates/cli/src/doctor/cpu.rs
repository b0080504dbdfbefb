//! The doctor's checks of cores and time: which cores, isolated or shared, real-time
//! scheduling, frequency and idle states, NUMA, interrupts, the clocksource, timer slack.

use std::time::Duration;

use serde_json::json;
use tickforge_io::numa::{parse_cpulist, Topology};

use super::{format_cpulist, integer, read, Check, Read, ReadError};

/// The name of the real-time check; `run` asks it whether SCHED_FIFO may be measured.
pub const REALTIME: &str = "realtime";

const CPU_DIR: &str = "/sys/devices/system/cpu";

/// The deepest idle state a worker core should enter, by exit latency in µs. The AWS paper
/// keeps cores in C1 (2 µs on its Haswell hosts) rather than C6 (133 µs); C1E's 10 µs is
/// still small against a tick.
const MAX_IDLE_EXIT_US: u64 = 10;

/// `kernel.sched_rt_runtime_us` as the kernel ships it: real-time threads get 95% of each
/// one-second period. The fix when it is 0, and the value `doctor --sysctl` writes.
pub const RT_RUNTIME_DEFAULT_US: i64 = 950_000;

/// Reads the host and runs every check of this module.
pub fn gather(allowed: &[usize]) -> Vec<Check> {
    let isolated_text = read(format!("{CPU_DIR}/isolated"));
    let siblings: Vec<(usize, Read)> = allowed
        .iter()
        .map(|&c| {
            let path = format!("{CPU_DIR}/cpu{c}/topology/thread_siblings_list");
            (c, read(path))
        })
        .collect();
    let governors: Vec<(usize, Read)> = allowed
        .iter()
        .map(|&c| {
            (
                c,
                read(format!("{CPU_DIR}/cpu{c}/cpufreq/scaling_governor")),
            )
        })
        .collect();
    let idle_core = allowed.last().copied();
    let governor_ro = read(format!("{CPU_DIR}/cpuidle/current_governor_ro"));
    let idle_governor = match governor_ro {
        Err(ReadError::Absent) => read(format!("{CPU_DIR}/cpuidle/current_governor")),
        other => other,
    };
    vec![
        cores(allowed, &read(format!("{CPU_DIR}/online"))),
        isolated(allowed, &isolated_text),
        nohz_full(&isolated_text, &read(format!("{CPU_DIR}/nohz_full"))),
        smt(&read(format!("{CPU_DIR}/smt/control")), &siblings),
        realtime(&probe_realtime()),
        rt_runtime(
            &read("/proc/sys/kernel/sched_rt_runtime_us"),
            &read("/proc/sys/kernel/sched_rt_period_us"),
        ),
        governor(&governors),
        cpuidle(
            &read(format!("{CPU_DIR}/cpuidle/current_driver")),
            &idle_governor,
            idle_core,
            &idle_core.map(idle_states).unwrap_or_default(),
        ),
        numa(
            Topology::read().map_err(|e| format!("{:#}", anyhow::Error::from(e))),
            allowed,
            &read("/proc/sys/kernel/numa_balancing"),
        ),
        irq(allowed, &read("/proc/interrupts")),
        clocksource(
            &read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
            &read("/sys/devices/system/clocksource/clocksource0/available_clocksource"),
        ),
        timer_slack(probe_timer_slack()),
        huge_pages(&read("/sys/kernel/mm/transparent_hugepage/enabled")),
    ]
}

/// Cores this process may run on against those online.
pub fn cores(allowed: &[usize], online: &Read) -> Check {
    const NAME: &str = "cores";
    if allowed.is_empty() {
        return Check::unknown(NAME, "sched_getaffinity", "no core allowed");
    }
    let online_cpus = online
        .as_ref()
        .map_err(ToString::to_string)
        .and_then(|t| parse_cpulist(t).map_err(|e| e.to_string()));
    let data = json!({
        "allowed": allowed,
        "online": online_cpus.as_ref().ok(),
    });
    let online_text = match &online_cpus {
        Ok(cpus) => format!("{} ({})", format_cpulist(cpus), cpus.len()),
        Err(why) => format!("unknown ({why})"),
    };
    let reading = format!(
        "allowed {} ({}) of online {online_text}",
        format_cpulist(allowed),
        allowed.len()
    );
    let check = if allowed.len() == 1 {
        Check::info(
            NAME,
            format!("{reading}: bench runs the server and its bots on one core"),
        )
    } else {
        Check::ok(NAME, reading)
    };
    check.with_data(data)
}

/// Cores kept from the scheduler's general use (`isolcpus=`), and whether this process may
/// use them.
pub fn isolated(allowed: &[usize], isolated: &Read) -> Check {
    const NAME: &str = "isolated";
    let cpus = match isolated {
        Ok(text) => match parse_cpulist(text) {
            Ok(cpus) => cpus,
            Err(e) => return Check::unknown(NAME, "cpu/isolated", e),
        },
        Err(e) => return Check::unknown(NAME, "cpu/isolated", e),
    };
    let data = json!({ "isolated": cpus });
    if cpus.is_empty() {
        return Check::info(
            NAME,
            "none (no isolcpus=): workers share their cores with every other task",
        )
        .with_data(data);
    }
    let usable: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|c| allowed.contains(c))
        .collect();
    if usable.is_empty() {
        let list = format_cpulist(&cpus);
        Check::warn(
            NAME,
            format!("{list}, none of them allowed to this process"),
            format!("start tickforge under `taskset -c {list}` so its workers run there"),
        )
    } else {
        Check::ok(
            NAME,
            format!(
                "{} (this process may use {})",
                format_cpulist(&cpus),
                format_cpulist(&usable)
            ),
        )
    }
    .with_data(data)
}

/// Cores without the periodic scheduler tick while they run one task (`nohz_full=`).
pub fn nohz_full(isolated: &Read, nohz: &Read) -> Check {
    const NAME: &str = "nohz_full";
    let text = match nohz {
        Ok(text) => text,
        Err(ReadError::Absent) => {
            return Check::info(NAME, "not in this kernel (no CONFIG_NO_HZ_FULL)");
        }
        Err(e) => return Check::unknown(NAME, "cpu/nohz_full", e),
    };
    // An empty mask prints as `(null)` on some kernels.
    let cpus = if text == "(null)" {
        Ok(Vec::new())
    } else {
        parse_cpulist(text)
    };
    let cpus = match cpus {
        Ok(cpus) => cpus,
        Err(e) => return Check::unknown(NAME, "cpu/nohz_full", e),
    };
    let data = json!({ "nohz_full": cpus });
    if cpus.is_empty() {
        return Check::info(NAME, "off: running cores take the scheduler tick").with_data(data);
    }
    let isolated = isolated
        .as_ref()
        .ok()
        .and_then(|t| parse_cpulist(t).ok())
        .unwrap_or_default();
    let covers = !isolated.is_empty() && isolated.iter().all(|c| cpus.contains(c));
    let reading = format_cpulist(&cpus);
    if covers {
        Check::ok(NAME, format!("{reading} (covers the isolated cores)"))
    } else {
        Check::info(NAME, reading)
    }
    .with_data(data)
}

/// Whether any two allowed cores are hyperthreads of one physical core.
pub fn smt(control: &Read, siblings: &[(usize, Read)]) -> Check {
    const NAME: &str = "smt";
    let control = match control {
        Ok(text) => text.clone(),
        Err(e) => format!("unknown ({e})"),
    };
    let allowed: Vec<usize> = siblings.iter().map(|(c, _)| *c).collect();
    let mut shared: Vec<Vec<usize>> = Vec::new();
    for (core, text) in siblings {
        let Ok(list) = text.as_ref().map(|t| parse_cpulist(t)) else {
            return Check::unknown(NAME, &format!("cpu{core} thread_siblings_list"), "absent");
        };
        let Ok(list) = list else {
            return Check::unknown(NAME, &format!("cpu{core} thread_siblings_list"), "garbled");
        };
        let mine: Vec<usize> = list.into_iter().filter(|c| allowed.contains(c)).collect();
        if mine.len() > 1 && !shared.contains(&mine) {
            shared.push(mine);
        }
    }
    let data = json!({ "control": control, "shared": shared });
    if shared.is_empty() {
        Check::ok(
            NAME,
            format!("{control}; no two allowed cores share a physical core"),
        )
    } else {
        let pairs: Vec<String> = shared.iter().map(|s| format_cpulist(s)).collect();
        Check::info(
            NAME,
            format!(
                "{control}; hyperthreads of one core: {} (two workers there share its units; \
                 --cores can take one of each)",
                pairs.join(" ")
            ),
        )
    }
    .with_data(data)
}

/// Asks for SCHED_FIFO 1 on a thread that ends right after: the priority it reads back, or
/// the kernel's refusal.
fn probe_realtime() -> Result<Option<u8>, String> {
    std::thread::spawn(|| match tickforge_io::cpu::set_realtime(1) {
        Ok(()) => Ok(tickforge_io::cpu::realtime_priority()),
        Err(e) => Err(e.to_string()),
    })
    .join()
    .unwrap_or_else(|_| Err("the probing thread panicked".into()))
}

/// Whether this process may run threads in the real-time FIFO class.
pub fn realtime(probe: &Result<Option<u8>, String>) -> Check {
    match probe {
        Ok(Some(p)) => Check::ok(
            REALTIME,
            format!("SCHED_FIFO permitted (a test thread got priority {p}); serve and bench take --rt-priority P"),
        )
        .with_data(json!({ "permitted": true })),
        Ok(None) => Check::info(
            REALTIME,
            "SCHED_FIFO granted, but the test thread did not read it back",
        )
        .with_data(json!({ "permitted": null })),
        Err(why) => Check::warn(
            REALTIME,
            format!("SCHED_FIFO refused ({why}): workers wait behind other tasks"),
            "run as root, or grant CAP_SYS_NICE or an RLIMIT_RTPRIO (systemd LimitRTPRIO=99), then serve --rt-priority 10",
        )
        .with_data(json!({ "permitted": false, "error": why })),
    }
}

/// The kernel's budget for real-time threads (`kernel.sched_rt_runtime_us` per period).
pub fn rt_runtime(runtime: &Read, period: &Read) -> Check {
    const NAME: &str = "rt_runtime";
    let runtime_us = match integer(runtime) {
        Ok(v) => v,
        Err(why) => return Check::unknown(NAME, "kernel.sched_rt_runtime_us", why),
    };
    let period_us = integer(period).ok();
    let data = json!({ "runtime_us": runtime_us, "period_us": period_us });
    match (runtime_us, period_us) {
        (-1, _) => Check::info(
            NAME,
            "-1: no throttling; a SCHED_FIFO thread that never sleeps keeps its core",
        ),
        (0, _) => Check::warn(
            NAME,
            "0: SCHED_FIFO threads may never run",
            format!("sysctl -w kernel.sched_rt_runtime_us={RT_RUNTIME_DEFAULT_US}"),
        ),
        (r, Some(p)) if p > 0 => Check::ok(
            NAME,
            format!(
                "{r} of {p} µs ({:.0}%): real-time threads leave the rest to others",
                r as f64 * 100.0 / p as f64
            ),
        ),
        (r, _) => Check::ok(NAME, format!("{r} µs per period (period unknown)")),
    }
    .with_data(data)
}

/// The frequency governor of each allowed core.
pub fn governor(per_core: &[(usize, Read)]) -> Check {
    const NAME: &str = "governor";
    if per_core
        .iter()
        .all(|(_, r)| matches!(r, Err(ReadError::Absent)))
    {
        return Check::info(
            NAME,
            "no cpufreq (a VM, or the firmware sets the frequency)",
        )
        .with_data(json!({}));
    }
    // Governor → cores, in order of first appearance.
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (core, read) in per_core {
        let name = match read {
            Ok(text) => text.clone(),
            Err(_) => "unknown".to_string(),
        };
        match groups.iter_mut().find(|(g, _)| *g == name) {
            Some((_, cores)) => cores.push(*core),
            None => groups.push((name, vec![*core])),
        }
    }
    let reading = groups
        .iter()
        .map(|(g, cores)| format!("{g} on {}", format_cpulist(cores)))
        .collect::<Vec<_>>()
        .join(", ");
    let data = json!(groups
        .iter()
        .map(|(g, cores)| (g.clone(), json!(cores)))
        .collect::<serde_json::Map<_, _>>());
    let slow: Vec<&str> = groups
        .iter()
        .map(|(g, _)| g.as_str())
        .filter(|g| *g != "performance" && *g != "unknown")
        .collect();
    if !slow.is_empty() {
        Check::warn(
            NAME,
            format!("{reading}: a core may be slow when a tick starts"),
            "cpupower frequency-set -g performance (or write performance to cpuN/cpufreq/scaling_governor)",
        )
    } else if groups.iter().any(|(g, _)| g == "unknown") {
        Check::info(NAME, reading)
    } else {
        Check::ok(NAME, reading)
    }
    .with_data(data)
}

/// One idle state of a core, from `cpuN/cpuidle/stateK`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdleState {
    pub name: String,
    /// Exit latency in µs, as the driver declares it.
    pub exit_latency_us: Option<u64>,
    pub disabled: bool,
}

/// The idle states of `core`, shallowest first; empty without cpuidle.
fn idle_states(core: usize) -> Vec<IdleState> {
    let mut states = Vec::new();
    // Numbered from 0 without gaps; the first missing one ends the list.
    for k in 0.. {
        let dir = format!("{CPU_DIR}/cpu{core}/cpuidle/state{k}");
        let Ok(name) = read(format!("{dir}/name")) else {
            break;
        };
        states.push(IdleState {
            name,
            exit_latency_us: read(format!("{dir}/latency"))
                .ok()
                .and_then(|t| t.parse().ok()),
            disabled: read(format!("{dir}/disable")).is_ok_and(|t| t != "0"),
        });
    }
    states
}

/// The cpuidle driver and how deep the worker core may sleep when idle.
pub fn cpuidle(driver: &Read, governor: &Read, core: Option<usize>, states: &[IdleState]) -> Check {
    const NAME: &str = "cpuidle";
    let driver = match driver {
        Ok(d) if d != "none" => d.clone(),
        Ok(_) | Err(ReadError::Absent) => {
            return Check::info(
                NAME,
                "no cpuidle driver: idle cores halt as the platform decides",
            );
        }
        Err(e) => return Check::unknown(NAME, "cpuidle/current_driver", e),
    };
    let governor = governor
        .as_ref()
        .map_or("unknown".to_string(), Clone::clone);
    let core = core.map_or("?".to_string(), |c| c.to_string());
    let listed: Vec<String> = states
        .iter()
        .map(|s| {
            let latency = s
                .exit_latency_us
                .map_or("? µs".to_string(), |l| format!("{l} µs"));
            format!(
                "{} {latency}{}",
                s.name,
                if s.disabled { " (off)" } else { "" }
            )
        })
        .collect();
    let data = json!({
        "driver": driver,
        "governor": governor,
        "states": states.iter().map(|s| json!({
            "name": s.name, "exit_latency_us": s.exit_latency_us, "disabled": s.disabled,
        })).collect::<Vec<_>>(),
    });
    let reading = format!(
        "{driver} (governor {governor}); cpu{core}: {}",
        if listed.is_empty() {
            "no states listed".to_string()
        } else {
            listed.join(", ")
        }
    );
    let deepest = states
        .iter()
        .filter(|s| !s.disabled)
        .filter_map(|s| s.exit_latency_us.map(|l| (l, s)))
        .max_by_key(|(l, _)| *l);
    match deepest {
        Some((latency, state)) if latency > MAX_IDLE_EXIT_US => Check::warn(
            NAME,
            format!("{reading}: {} costs {latency} µs to leave", state.name),
            format!(
                "intel_idle.max_cstate=1 at boot, or `cpupower idle-set -D {}` now",
                MAX_IDLE_EXIT_US + 1
            ),
        ),
        Some(_) => Check::ok(NAME, reading),
        None => Check::info(NAME, reading),
    }
    .with_data(data)
}

/// NUMA nodes, which of them this process may use, and automatic NUMA balancing.
pub fn numa(topology: Result<Topology, String>, allowed: &[usize], balancing: &Read) -> Check {
    const NAME: &str = "numa";
    let topology = match topology {
        Ok(t) => t,
        Err(why) => return Check::unknown(NAME, "sys/devices/system/node", why),
    };
    let nodes: Vec<String> = topology
        .nodes()
        .iter()
        .map(|n| format!("{}: {}", n.id, format_cpulist(&n.cpus)))
        .collect();
    let mut used: Vec<usize> = allowed
        .iter()
        .filter_map(|&c| topology.node_of_cpu(c))
        .collect();
    used.sort_unstable();
    used.dedup();
    let balancing = integer(balancing).ok();
    let data = json!({
        "nodes": topology.nodes().iter().map(|n| json!({ "id": n.id, "cpus": n.cpus })).collect::<Vec<_>>(),
        "allowed_nodes": used,
        "numa_balancing": balancing,
    });
    let count = topology.nodes().len();
    if count == 1 {
        return Check::ok(NAME, format!("1 node ({}): nothing to place", nodes[0])).with_data(data);
    }
    Check::ok(
        NAME,
        format!(
            "{count} nodes ({}); allowed on node {}; serve places matches by id mod node and \
             keeps worker memory local; numa_balancing {}",
            nodes.join("; "),
            format_cpulist(&used),
            balancing.map_or("unknown".to_string(), |b| b.to_string()),
        ),
    )
    .with_data(data)
}

/// Device interrupts since boot on each CPU, from `/proc/interrupts`: the numbered lines
/// only (devices), not the per-CPU system counters (`LOC`, `RES`, …). `None` when the
/// header is missing.
pub fn parse_interrupts(text: &str) -> Option<Vec<(usize, u64)>> {
    let mut lines = text.lines();
    let cpus: Vec<usize> = lines
        .next()?
        .split_whitespace()
        .map(|h| h.strip_prefix("CPU").and_then(|n| n.parse().ok()))
        .collect::<Option<_>>()?;
    let mut totals = vec![0u64; cpus.len()];
    for line in lines {
        let Some((irq, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        if irq.is_empty() || !irq.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        for (total, count) in totals.iter_mut().zip(rest.split_whitespace()) {
            let Ok(n) = count.parse::<u64>() else { break };
            *total = total.saturating_add(n);
        }
    }
    Some(cpus.into_iter().zip(totals).collect())
}

/// Where device interrupts (network queues among them) land among the allowed cores.
pub fn irq(allowed: &[usize], interrupts: &Read) -> Check {
    const NAME: &str = "irq";
    let per_cpu = match interrupts.as_ref().map(|t| parse_interrupts(t)) {
        Ok(Some(v)) => v,
        Ok(None) => return Check::unknown(NAME, "/proc/interrupts", "no CPU header"),
        Err(e) => return Check::unknown(NAME, "/proc/interrupts", e),
    };
    let total: u64 = per_cpu.iter().map(|(_, n)| n).sum();
    let shown: Vec<String> = per_cpu
        .iter()
        .filter(|(c, _)| allowed.contains(c))
        .map(|(c, n)| {
            let share = if total == 0 {
                0.0
            } else {
                *n as f64 * 100.0 / total as f64
            };
            format!("cpu{c} {n} ({share:.0}%)")
        })
        .collect();
    Check::info(
        NAME,
        format!(
            "device interrupts since boot: {} of {total} (time a worker core spends on \
             them is lost to its ticks)",
            shown.join(", ")
        ),
    )
    .with_data(json!({
        "per_cpu": per_cpu.iter().map(|(c, n)| json!({ "cpu": c, "interrupts": n })).collect::<Vec<_>>(),
    }))
}

/// The kernel's clocksource: tsc is read in user space in nanoseconds.
pub fn clocksource(current: &Read, available: &Read) -> Check {
    const NAME: &str = "clocksource";
    let current = match current {
        Ok(c) => c.clone(),
        Err(e) => return Check::unknown(NAME, "current_clocksource", e),
    };
    let available = available
        .as_ref()
        .map_or("unknown".to_string(), Clone::clone);
    let data = json!({ "current": current, "available": available });
    let reading = format!("{current} (available: {available})");
    if current == "tsc" {
        return Check::ok(NAME, reading).with_data(data);
    }
    let fix = if available.split_whitespace().any(|c| c == "tsc") {
        "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource \
         (tsc=reliable clocksource=tsc at boot to keep it)"
    } else {
        "this kernel offers no tsc clocksource: a host with an invariant TSC reads time cheapest"
    };
    Check::warn(NAME, reading, fix).with_data(data)
}

/// Transparent huge pages, which `serve`, `bots` and `bench` ask glibc's heap for (with
/// `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`): `always` and `madvise` give them, `never`
/// does not. A bots process's replicas, most of its 1.7 GB for a thousand bots, are read
/// a few lines a page across thousands of pages a tick.
pub fn huge_pages(enabled: &Read) -> Check {
    const NAME: &str = "huge_pages";
    const WHAT: &str = "transparent_hugepage/enabled";
    let text = match enabled {
        Ok(t) => t.trim().to_string(),
        Err(e) => return Check::unknown(NAME, WHAT, e),
    };
    // `always [madvise] never`: the mode in force is the bracketed one.
    let mode = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .unwrap_or_default()
        .to_string();
    let data = json!({ "mode": mode });
    match mode.as_str() {
        "always" | "madvise" => Check::ok(
            NAME,
            format!(
                "transparent huge pages `{mode}`: serve, bots and bench get them for their heap"
            ),
        ),
        "never" => Check::warn(
            NAME,
            "transparent huge pages `never`: a bots process reads its replicas on 4 KiB pages, \
             missing the TLB (about a third slower in the crowd's fight)",
            "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled \
             (transparent_hugepage=madvise at boot to keep it)",
        ),
        _ => Check::unknown(NAME, WHAT, format!("`{text}`")),
    }
    .with_data(data)
}

/// The timer slack a new thread has, and what it reads after a worker's tightening.
fn probe_timer_slack() -> (Option<Duration>, Option<Duration>) {
    std::thread::spawn(|| {
        let before = tickforge_io::host::timer_slack();
        let after = if tickforge_io::time::tighten_timer_slack() {
            tickforge_io::host::timer_slack()
        } else {
            None
        };
        (before, after)
    })
    .join()
    .unwrap_or((None, None))
}

/// `50 µs`, `1 ns`: whole microseconds where they are whole, else nanoseconds.
fn slack_text(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns.is_multiple_of(1000) {
        format!("{} µs", ns / 1000)
    } else {
        format!("{ns} ns")
    }
}

/// Whether a worker can stop the kernel from delaying its wake-ups by the timer slack.
pub fn timer_slack((default, tightened): (Option<Duration>, Option<Duration>)) -> Check {
    const NAME: &str = "timer_slack";
    let us = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e6);
    let data = json!({ "default_us": us(default), "tightened_us": us(tightened) });
    let default_text = default.map_or("unknown".to_string(), slack_text);
    match tightened {
        Some(t) if t <= Duration::from_micros(1) => Check::ok(
            NAME,
            format!(
                "{default_text} by default; a worker tightens it to {}",
                slack_text(t)
            ),
        ),
        _ => Check::warn(
            NAME,
            format!("{default_text}, and PR_SET_TIMERSLACK is refused: every wake-up may come that late"),
            "allow prctl(PR_SET_TIMERSLACK) in the seccomp profile, or run workers with --rt-priority (real-time threads have no slack)",
        ),
    }
    .with_data(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Verdict;

    fn text(s: &str) -> Read {
        Ok(s.to_string())
    }

    #[test]
    fn cores_read_as_lists_and_one_core_is_noted() {
        let c = cores(&[0, 1, 2, 3, 8], &text("0-15"));
        assert_eq!(c.verdict, Verdict::Ok);
        assert_eq!(c.reading, "allowed 0-3,8 (5) of online 0-15 (16)");
        let one = cores(&[3], &Err(ReadError::Absent));
        assert_eq!(one.verdict, Verdict::Info);
        assert!(
            one.reading.contains("online unknown (absent)"),
            "{}",
            one.reading
        );
        assert!(cores(&[], &text("0-1")).reading.starts_with("unknown"));
    }

    #[test]
    fn isolated_cores_out_of_reach_warn() {
        assert_eq!(isolated(&[0, 1], &text("")).verdict, Verdict::Info);
        let reach = isolated(&[0, 1, 2, 3], &text("2-3"));
        assert_eq!(reach.verdict, Verdict::Ok);
        assert_eq!(reach.reading, "2-3 (this process may use 2-3)");
        let out = isolated(&[0, 1], &text("2-3"));
        assert_eq!(out.verdict, Verdict::Warn);
        assert!(out.fix.unwrap().contains("taskset -c 2-3"));
        let garbled = isolated(&[0], &text("2-x"));
        assert!(
            garbled.reading.starts_with("unknown"),
            "{}",
            garbled.reading
        );
    }

    #[test]
    fn nohz_full_absent_empty_and_covering() {
        assert!(nohz_full(&text(""), &Err(ReadError::Absent))
            .reading
            .contains("not in this kernel"));
        assert!(nohz_full(&text(""), &text("(null)"))
            .reading
            .starts_with("off"));
        assert_eq!(nohz_full(&text("2-3"), &text("1-3")).verdict, Verdict::Ok);
        assert_eq!(nohz_full(&text(""), &text("1-3")).verdict, Verdict::Info);
    }

    #[test]
    fn hyperthread_siblings_among_allowed_cores() {
        let alone = smt(&text("notsupported"), &[(0, text("0")), (1, text("1"))]);
        assert_eq!(alone.verdict, Verdict::Ok);
        let paired = smt(
            &text("on"),
            &[
                (0, text("0,2")),
                (1, text("1,3")),
                (2, text("0,2")),
                (3, text("1,3")),
            ],
        );
        assert_eq!(paired.verdict, Verdict::Info);
        assert!(paired.reading.contains("0,2 1,3"), "{}", paired.reading);
        // A sibling outside the allowed set is not shared by two workers.
        let outside = smt(&text("on"), &[(0, text("0,18")), (1, text("1,19"))]);
        assert_eq!(outside.verdict, Verdict::Ok);
        assert!(smt(&text("on"), &[(0, Err(ReadError::Absent))])
            .reading
            .starts_with("unknown"));
    }

    #[test]
    fn realtime_refused_says_how_to_permit_it() {
        assert_eq!(realtime(&Ok(Some(1))).verdict, Verdict::Ok);
        let refused = realtime(&Err("Operation not permitted (os error 1)".into()));
        assert_eq!(refused.verdict, Verdict::Warn);
        assert!(refused.fix.unwrap().contains("CAP_SYS_NICE"));
    }

    #[test]
    fn rt_runtime_shares_and_extremes() {
        let normal = rt_runtime(&text("950000"), &text("1000000"));
        assert_eq!(normal.verdict, Verdict::Ok);
        assert!(normal.reading.contains("(95%)"), "{}", normal.reading);
        assert_eq!(
            rt_runtime(&text("-1"), &text("1000000")).verdict,
            Verdict::Info
        );
        assert_eq!(
            rt_runtime(&text("0"), &text("1000000")).verdict,
            Verdict::Warn
        );
        assert!(rt_runtime(&text("lots"), &text("1000000"))
            .reading
            .starts_with("unknown"));
    }

    #[test]
    fn governors_group_by_name_and_warn_unless_performance() {
        let all = governor(&[(0, text("performance")), (1, text("performance"))]);
        assert_eq!(all.verdict, Verdict::Ok);
        assert_eq!(all.reading, "performance on 0-1");
        let mixed = governor(&[
            (0, text("performance")),
            (1, text("powersave")),
            (2, text("powersave")),
            (3, Err(ReadError::Failed("denied".into()))),
        ]);
        assert_eq!(mixed.verdict, Verdict::Warn);
        assert!(
            mixed
                .reading
                .starts_with("performance on 0, powersave on 1-2, unknown on 3"),
            "{}",
            mixed.reading
        );
        let vm = governor(&[(0, Err(ReadError::Absent)), (1, Err(ReadError::Absent))]);
        assert_eq!(vm.verdict, Verdict::Info);
        assert!(vm.reading.starts_with("no cpufreq"));
        assert_eq!(governor(&[(0, text("schedutil"))]).verdict, Verdict::Warn);
    }

    fn state(name: &str, latency: u64, disabled: bool) -> IdleState {
        IdleState {
            name: name.into(),
            exit_latency_us: Some(latency),
            disabled,
        }
    }

    #[test]
    fn deep_enabled_idle_states_warn() {
        let haswell = [
            state("POLL", 0, false),
            state("C1-HSW", 2, false),
            state("C6-HSW", 133, false),
        ];
        let c = cpuidle(&text("intel_idle"), &text("menu"), Some(1), &haswell);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.reading.contains("C6-HSW costs 133 µs"), "{}", c.reading);
        let capped = [
            state("POLL", 0, false),
            state("C1-HSW", 2, false),
            state("C6-HSW", 133, true),
        ];
        let c = cpuidle(&text("intel_idle"), &text("menu"), Some(1), &capped);
        assert_eq!(c.verdict, Verdict::Ok);
        assert!(c.reading.contains("C6-HSW 133 µs (off)"), "{}", c.reading);
        assert_eq!(
            cpuidle(&text("none"), &text("menu"), Some(0), &[]).verdict,
            Verdict::Info
        );
        assert_eq!(
            cpuidle(&Err(ReadError::Absent), &Err(ReadError::Absent), None, &[]).verdict,
            Verdict::Info
        );
    }

    #[test]
    fn numa_one_node_and_two() {
        let one = numa(Ok(Topology::single_node(vec![0, 1])), &[0, 1], &text("0"));
        assert_eq!(one.verdict, Verdict::Ok);
        assert_eq!(one.reading, "1 node (0: 0-1): nothing to place");
        assert!(numa(Err("denied".into()), &[0], &text("0"))
            .reading
            .starts_with("unknown"));
    }

    #[test]
    fn interrupts_count_devices_only() {
        let text = "           CPU0       CPU1       \n\
                    \x20 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n\
                    \x20 38:          0       7975 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n\
                    \x20 39:       6005          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\n\
                    NMI:          0          0   Non-maskable interrupts\n\
                    LOC:    3550898    8428671   Local timer interrupts\n\
                    ERR:          0\n";
        assert_eq!(parse_interrupts(text), Some(vec![(0, 6006), (1, 7975)]));
        assert_eq!(parse_interrupts("garbage\n 1: 2 3\n"), None);
        let c = irq(&[1], &Ok(text.to_string()));
        assert!(
            c.reading.contains("cpu1 7975 (57%) of 13981"),
            "{}",
            c.reading
        );
    }

    #[test]
    fn clocksource_tsc_or_a_fix() {
        assert_eq!(
            clocksource(&text("tsc"), &text("tsc hpet acpi_pm")).verdict,
            Verdict::Ok
        );
        let kvm = clocksource(&text("kvm-clock"), &text("kvm-clock tsc acpi_pm"));
        assert_eq!(kvm.verdict, Verdict::Warn);
        assert!(kvm.fix.unwrap().starts_with("echo tsc"));
        let xen = clocksource(&text("xen"), &text("xen"));
        assert!(xen.fix.unwrap().contains("no tsc"));
        assert!(clocksource(&Err(ReadError::Absent), &text("tsc"))
            .reading
            .starts_with("unknown"));
    }

    #[test]
    fn huge_pages_by_the_mode_in_brackets() {
        for mode in ["[always] madvise never", "always [madvise] never"] {
            assert_eq!(huge_pages(&text(mode)).verdict, Verdict::Ok, "{mode}");
        }
        let never = huge_pages(&text("always madvise [never]\n"));
        assert_eq!(never.verdict, Verdict::Warn);
        assert!(never.fix.unwrap().starts_with("echo madvise"));
        assert!(huge_pages(&text("always madvise never"))
            .reading
            .starts_with("unknown"));
        assert!(huge_pages(&Err(ReadError::Absent))
            .reading
            .starts_with("unknown"));
    }

    #[test]
    fn timer_slack_tightened_or_not() {
        let ok = timer_slack((
            Some(Duration::from_micros(50)),
            Some(Duration::from_nanos(1)),
        ));
        assert_eq!(ok.verdict, Verdict::Ok);
        assert_eq!(ok.reading, "50 µs by default; a worker tightens it to 1 ns");
        assert_eq!(
            timer_slack((Some(Duration::from_micros(50)), None)).verdict,
            Verdict::Warn
        );
    }
}
