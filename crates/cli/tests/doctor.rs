//! `tickforge doctor --quick`: every host check answers, on whatever host runs the tests.

use std::process::Command;

use serde_json::Value;

/// Every check the doctor runs, in its order; `--quick` keeps the timed ones as skipped.
const CHECKS: [&str; 24] = [
    "cores",
    "isolated",
    "nohz_full",
    "smt",
    "realtime",
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
    "wakeup",
    "wakeup_fifo",
    "preemption",
];

#[test]
fn quick_doctor_writes_every_check_with_a_verdict() {
    let dir = std::env::temp_dir().join(format!("tickforge-doctor-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("doctor.json");
    let out = Command::new(env!("CARGO_BIN_EXE_tickforge"))
        .args(["doctor", "--quick", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "doctor failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    assert_eq!(report["quick"], true);
    let checks = report["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, CHECKS);

    let (mut ok, mut warn, mut info) = (0, 0, 0);
    for c in checks {
        let name = c["name"].as_str().unwrap();
        let reading = c["reading"].as_str().unwrap();
        assert!(!reading.is_empty(), "{name} read nothing");
        match c["verdict"].as_str().unwrap() {
            "ok" => ok += 1,
            "info" => info += 1,
            "warn" => {
                warn += 1;
                let fix = c["fix"].as_str().unwrap_or_default();
                assert!(!fix.is_empty(), "{name} warns without a fix");
            }
            other => panic!("{name}: verdict {other}"),
        }
        if c["verdict"] != "warn" {
            assert!(c["fix"].is_null(), "{name} has a fix without a warning");
        }
        // One printed line per check, naming it and its verdict.
        assert!(
            stdout.lines().any(|l| {
                let mut words = l.split_whitespace();
                words.next() == Some(name) && words.next() == c["verdict"].as_str()
            }),
            "no line for {name} in\n{stdout}"
        );
    }
    for name in ["wakeup", "wakeup_fifo", "preemption"] {
        let c = checks.iter().find(|c| c["name"] == name).unwrap();
        assert_eq!(c["verdict"], "info");
        assert_eq!(c["reading"], "skipped (--quick)");
    }
    assert_eq!(report["summary"]["ok"], ok);
    assert_eq!(report["summary"]["warn"], warn);
    assert_eq!(report["summary"]["info"], info);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("summary: {ok} ok, {warn} warn, {info} info")),
        "{last}"
    );
}
