//! `tickforge doctor`: can this host hold many 128 Hz matches per core?
//!
//! Reads what the AWS game-server tuning paper and VALORANT's load tests look at (cores
//! and their isolation, real-time scheduling, frequency governor and C-states, NUMA, socket
//! buffers and backlog, interrupts, the clocksource, timer slack) from `/proc` and `/sys`,
//! then measures what they add up to: how late a thread pinned to a core wakes from a sleep
//! to an absolute deadline, as a worker does every tick.
//!
//! Each check is one line (name, verdict, what was read) and a warning adds the fix. A
//! read that fails is "unknown" with the reason, never a panic. The checks are pure
//! functions of the text read, so their tests feed them strings. `--sysctl` prints the
//! sysctl.d drop-in that makes the kernel checks pass.

mod cpu;
mod net;
mod preempt;
mod sysctl;
mod wakeup;

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use serde_json::{json, Value};

/// Flags of `doctor`.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Skip the timed wake-up check (about 4 s); its lines say "skipped".
    #[arg(long)]
    pub quick: bool,
    /// Write every check, with the figures it read, to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Real-time FIFO priority the second wake-up run asks for, as `serve` and `bench`
    /// take it.
    #[arg(long, value_name = "P", default_value_t = 10, value_parser = clap::value_parser!(u8).range(1..=99))]
    pub rt_priority: u8,
    /// Print the sysctl.d drop-in with the kernel settings the checks ask for (as
    /// deploy/sysctl/90-tickforge.conf holds it) and run no check.
    #[arg(long, conflicts_with_all = ["quick", "json"])]
    pub sysctl: bool,
    /// A bench report (`bench --json`): the preemption check gives the share of its late
    /// ticks the host explains, and what to change.
    #[arg(long, value_name = "REPORT")]
    pub from: Option<PathBuf>,
}

/// What a check concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// As a host for many matches per core wants it.
    Ok,
    /// Costs ticks or datagrams; the check gives the fix.
    Warn,
    /// Worth knowing, nothing to fix here (or it could not be read).
    Info,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Info => "info",
        }
    }
}

/// One line of the doctor's output.
#[derive(Clone, Debug)]
pub struct Check {
    /// Short and stable: the key other tools look the check up by.
    pub name: &'static str,
    /// What was read or measured, for a person.
    pub reading: String,
    pub verdict: Verdict,
    /// One line saying what to change; present exactly when the verdict is a warning.
    pub fix: Option<String>,
    /// The figures behind the reading, for `--json`.
    pub data: Value,
}

impl Check {
    fn new(name: &'static str, verdict: Verdict, reading: String, fix: Option<String>) -> Check {
        Check {
            name,
            reading,
            verdict,
            fix,
            data: Value::Null,
        }
    }

    fn ok(name: &'static str, reading: impl Into<String>) -> Check {
        Check::new(name, Verdict::Ok, reading.into(), None)
    }

    fn info(name: &'static str, reading: impl Into<String>) -> Check {
        Check::new(name, Verdict::Info, reading.into(), None)
    }

    fn warn(name: &'static str, reading: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(name, Verdict::Warn, reading.into(), Some(fix.into()))
    }

    /// A check whose input could not be read: `unknown (what: why)`.
    fn unknown(name: &'static str, what: &str, why: impl fmt::Display) -> Check {
        Check::info(name, format!("unknown ({what}: {why})"))
    }

    fn with_data(mut self, data: Value) -> Check {
        self.data = data;
        self
    }

    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "verdict": self.verdict.as_str(),
            "reading": self.reading,
            "fix": self.fix,
            "data": self.data,
        })
    }
}

/// Why a `/proc` or `/sys` file gave no text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The file does not exist (the kernel lacks the feature, or a VM hides it).
    Absent,
    /// It exists but could not be read: what the OS said.
    Failed(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Absent => f.write_str("absent"),
            ReadError::Failed(why) => f.write_str(why),
        }
    }
}

/// A file's text, trimmed, or why there is none.
pub type Read = Result<String, ReadError>;

/// Reads a `/proc` or `/sys` file.
fn read(path: impl AsRef<Path>) -> Read {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text.trim().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ReadError::Absent),
        Err(e) => Err(ReadError::Failed(e.to_string())),
    }
}

/// A sysctl's single integer (`212992`, `-1`), or what kept it from being one.
fn integer(read: &Read) -> Result<i64, String> {
    let text = read.as_ref().map_err(ToString::to_string)?;
    text.parse()
        .map_err(|_| format!("`{text}` is not an integer"))
}

/// The kernel's cpulist form of ascending CPU numbers: `0-3,8,10-11`; `none` when empty.
fn format_cpulist(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        while i + 1 < cpus.len() && cpus[i + 1] == cpus[i] + 1 {
            i += 1;
        }
        parts.push(if cpus[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", cpus[i])
        });
        i += 1;
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(",")
    }
}

/// Bytes for a person: `4.4 GiB`, `4.0 MiB`, `208 KiB`, `512 B`.
pub(crate) fn bytes(n: u64) -> String {
    if n >= 1 << 30 {
        format!("{:.1} GiB", n as f64 / f64::from(1u32 << 30))
    } else if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
    } else if n >= 1 << 10 {
        format!("{:.0} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// Every check, in the order they print.
pub struct DoctorReport {
    pub quick: bool,
    pub allowed_cores: Vec<usize>,
    pub checks: Vec<Check>,
}

impl DoctorReport {
    fn count(&self, verdict: Verdict) -> usize {
        self.checks.iter().filter(|c| c.verdict == verdict).count()
    }

    fn to_json(&self) -> Value {
        json!({
            "quick": self.quick,
            "allowed_cores": self.allowed_cores,
            "checks": self.checks.iter().map(Check::to_json).collect::<Vec<_>>(),
            "summary": {
                "ok": self.count(Verdict::Ok),
                "warn": self.count(Verdict::Warn),
                "info": self.count(Verdict::Info),
            },
        })
    }

    /// The last line: the counts, and what to fix first.
    fn summary(&self) -> String {
        let warned: Vec<&str> = self
            .checks
            .iter()
            .filter(|c| c.verdict == Verdict::Warn)
            .map(|c| c.name)
            .collect();
        let counts = format!(
            "{} ok, {} warn, {} info",
            self.count(Verdict::Ok),
            warned.len(),
            self.count(Verdict::Info)
        );
        if warned.is_empty() {
            format!("summary: {counts}: nothing to fix")
        } else {
            format!(
                "summary: {counts}: fix {} before measuring games per core",
                warned.join(", ")
            )
        }
    }
}

/// One check as printed: name, verdict, reading; a warning adds its fix below.
fn line(c: &Check) -> String {
    let mut out = format!("  {:<15} {:<5} {}", c.name, c.verdict.as_str(), c.reading);
    if let Some(fix) = &c.fix {
        out.push_str(&format!("\n  {:<15} {:<5} fix: {fix}", "", ""));
    }
    out
}

pub fn run(args: DoctorArgs) -> Result<()> {
    if args.sysctl {
        print!("{}", sysctl::drop_in());
        return Ok(());
    }
    let allowed = tickforge_io::cpu::allowed_cores();
    println!("tickforge doctor: can this host hold many 128 Hz matches per core?");
    if !cfg!(target_os = "linux") {
        let os = std::env::consts::OS;
        println!(
            "  a development build on {os}: every host check reads Linux's /proc and /sys and \
             tunes the Linux production path; none applies here"
        );
        let checks = not_applicable_on(os);
        return finish(&args, allowed, checks, |c| println!("{}", line(c)));
    }
    let mut checks = cpu::gather(&allowed);
    checks.extend(net::gather());
    if !tickforge_io::LINUX_PATH {
        println!(
            "  a development build (the portable I/O path): {} do not apply",
            DEVELOPMENT_SKIPS.join(", ")
        );
        for c in checks.iter_mut() {
            if DEVELOPMENT_SKIPS.contains(&c.name) {
                *c = development_skip(c.name);
            }
        }
    }
    for c in &checks {
        println!("{}", line(c));
    }
    let realtime_permitted = checks
        .iter()
        .any(|c| c.name == cpu::REALTIME && c.verdict == Verdict::Ok);
    let timed = if args.quick {
        wakeup::skipped("--quick")
    } else {
        let fifo = realtime_permitted.then_some(args.rt_priority);
        wakeup::gather(allowed.last().copied(), fifo)
    };
    let timed: Vec<Check> = (timed.into_iter())
        .map(|c| {
            if !tickforge_io::LINUX_PATH && DEVELOPMENT_SKIPS.contains(&c.name) {
                development_skip(c.name)
            } else {
                c
            }
        })
        .collect();
    for c in &timed {
        println!("{}", line(c));
    }
    checks.extend(timed);
    // Preemption on the worker core: a 1 s probe, and the report's late ticks by cause.
    let preemption = if args.quick && args.from.is_none() {
        Check::info(preempt::NAME, "skipped (--quick)")
    } else {
        preempt::gather(allowed.last().copied(), args.from.as_deref())
    };
    println!("{}", line(&preemption));
    checks.push(preemption);
    finish(&args, allowed, checks, |_| {})
}

/// Prints each of `checks` with `print` (those not printed yet), the summary, and writes
/// `--json`.
fn finish(
    args: &DoctorArgs,
    allowed: Vec<usize>,
    checks: Vec<Check>,
    print: impl Fn(&Check),
) -> Result<()> {
    checks.iter().for_each(print);
    let report = DoctorReport {
        quick: args.quick,
        allowed_cores: allowed,
        checks,
    };
    println!("{}", report.summary());
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report.to_json())?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Every check's name, in the order a Linux host prints them: a development build on
/// another OS lists each as not applying (the test below keeps the list whole).
const HOST_CHECKS: &[&str] = &[
    "cores",
    "isolated",
    "nohz_full",
    "smt",
    cpu::REALTIME,
    "rt_runtime",
    "governor",
    "cpuidle",
    "numa",
    "irq",
    "clocksource",
    "timer_slack",
    "huge_pages",
    "rmem_max",
    "wmem_max",
    "rmem_default",
    "udp_mem",
    "netdev_backlog",
    "busy_poll",
    "udp_errors",
    "udp_gso",
    wakeup::NORMAL,
    wakeup::FIFO,
    preempt::NAME,
];

/// The checks of what a development build on Linux (the portable I/O path) never uses:
/// the real-time class, the timer slack it would tighten.
const DEVELOPMENT_SKIPS: &[&str] = &[cpu::REALTIME, "timer_slack", wakeup::FIFO];

/// A check of what this development build does not use.
fn development_skip(name: &'static str) -> Check {
    Check::info(
        name,
        "does not apply to a development build (the portable I/O path: no real-time class, \
         no pinning, no timer slack)",
    )
    .with_data(json!({ "applies": false, "build": "development" }))
}

/// Every host check, each saying it does not apply on `os`: they read Linux's `/proc` and
/// `/sys`, and what they tune only the Linux production path uses. Info, not a warning:
/// nothing on a development machine needs fixing for them.
fn not_applicable_on(os: &str) -> Vec<Check> {
    HOST_CHECKS
        .iter()
        .map(|&name| {
            Check::info(name, format!("does not apply on {os} (a Linux host check)"))
                .with_data(json!({ "applies": false, "os": os }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickforge_io::numa::parse_cpulist;

    #[test]
    fn cpulists_format_back_to_what_they_parse_from() {
        for text in ["0-3,8", "0", "0-1", "1,3,5", "0-3,8-11,16"] {
            assert_eq!(format_cpulist(&parse_cpulist(text).unwrap()), text);
        }
        assert_eq!(format_cpulist(&[]), "none");
        assert_eq!(format_cpulist(&[2, 3, 4, 7, 9, 10]), "2-4,7,9-10");
    }

    #[test]
    fn the_host_checks_listed_for_other_oses_are_the_ones_linux_runs() {
        let mut names: Vec<&str> = cpu::gather(&tickforge_io::cpu::allowed_cores())
            .iter()
            .chain(&net::gather())
            .map(|c| c.name)
            .collect();
        names.extend(wakeup::skipped("test").iter().map(|c| c.name));
        names.push(preempt::NAME);
        assert_eq!(names, HOST_CHECKS);

        let checks = not_applicable_on("macos");
        assert_eq!(checks.len(), HOST_CHECKS.len());
        for c in &checks {
            assert_eq!(c.verdict, Verdict::Info, "{}", c.name);
            assert_eq!(c.reading, "does not apply on macos (a Linux host check)");
            assert_eq!(c.data["applies"], false);
        }
        for name in DEVELOPMENT_SKIPS {
            assert!(HOST_CHECKS.contains(name), "{name}");
        }
    }

    #[test]
    fn integers_and_their_failures() {
        assert_eq!(integer(&Ok("212992".into())), Ok(212992));
        assert_eq!(integer(&Ok("-1".into())), Ok(-1));
        assert_eq!(
            integer(&Ok("4096 8192".into())),
            Err("`4096 8192` is not an integer".into())
        );
        assert_eq!(integer(&Err(ReadError::Absent)), Err("absent".into()));
    }

    #[test]
    fn a_missing_file_reads_as_absent() {
        assert_eq!(read("/proc/tickforge-no-such-file"), Err(ReadError::Absent));
    }

    #[test]
    fn bytes_read_as_a_person_would_say_them() {
        assert_eq!(bytes(1_151_604 * 4096), "4.4 GiB");
        assert_eq!(bytes(4 << 20), "4.0 MiB");
        assert_eq!(bytes(212_992), "208 KiB");
        assert_eq!(bytes(512), "512 B");
    }

    #[test]
    fn the_summary_names_what_to_fix() {
        let report = DoctorReport {
            quick: true,
            allowed_cores: vec![0, 1],
            checks: vec![
                Check::ok("cores", "allowed 0-1"),
                Check::warn("clocksource", "hpet", "use tsc"),
                Check::info("numa", "1 node"),
                Check::warn("rmem_max", "208 KiB", "raise it"),
            ],
        };
        assert_eq!(
            report.summary(),
            "summary: 1 ok, 2 warn, 1 info: fix clocksource, rmem_max before measuring games per core"
        );
        let v = report.to_json();
        assert_eq!(v["summary"]["warn"], 2);
        assert_eq!(v["checks"][1]["fix"], "use tsc");
        assert_eq!(v["checks"][0]["fix"], Value::Null);
        let printed = line(&report.checks[1]);
        assert_eq!(printed.lines().count(), 2, "{printed}");
        assert!(printed
            .lines()
            .nth(1)
            .unwrap()
            .trim_start()
            .starts_with("fix: use tsc"));
    }
}
