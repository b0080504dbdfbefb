//! What a bench records about itself and its host ([`RunInfo`]): the version and commit
//! of the binary, the host's name, kernel and CPU, the command line, and the quick checks
//! of `tickforge doctor` run before the bench starts.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;
use tickforge_telemetry::report::{DoctorCheck, DoctorSummary, RunInfo};

/// The record of this run: `exe` is the tickforge binary, run once as
/// `doctor --quick --json` (it only reads `/proc` and `/sys`, in milliseconds). What cannot
/// be read is left empty, never guessed.
pub fn gather(exe: &Path, scratch: &Path) -> RunInfo {
    RunInfo {
        version: env!("CARGO_PKG_VERSION").to_string(),
        commit: option_env!("TICKFORGE_COMMIT").map(str::to_string),
        started_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        cpu_model: std::fs::read_to_string("/proc/cpuinfo")
            .map(|text| cpu_model(&text))
            .unwrap_or_default(),
        command: std::env::args().collect(),
        doctor: doctor(exe, &scratch.join("doctor.json")),
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The first `model name` of `/proc/cpuinfo` (x86), else its `Model` line (arm).
fn cpu_model(cpuinfo: &str) -> String {
    let value = |key: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    value("model name")
        .or_else(|| value("Model"))
        .unwrap_or_default()
}

/// Runs `exe doctor --quick --json out` and reads its checks; `None` when it fails.
fn doctor(exe: &Path, out: &Path) -> Option<DoctorSummary> {
    let status = Command::new(exe)
        .args(["doctor", "--quick", "--json"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    let json: Value = serde_json::from_str(&std::fs::read_to_string(out).ok()?).ok()?;
    Some(doctor_summary(&json))
}

/// The summary of a `doctor --json` document.
fn doctor_summary(json: &Value) -> DoctorSummary {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let count = |k: &str| json["summary"][k].as_u64().unwrap_or(0) as u32;
    DoctorSummary {
        ok: count("ok"),
        warn: count("warn"),
        info: count("info"),
        checks: json["checks"]
            .as_array()
            .map(|checks| {
                checks
                    .iter()
                    .map(|c| DoctorCheck {
                        name: text(&c["name"]),
                        verdict: text(&c["verdict"]),
                        reading: text(&c["reading"]),
                        fix: c["fix"].as_str().map(str::to_string),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_model_is_the_first_model_name_or_the_arm_model() {
        let x86 =
            "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(cpu_model(x86), "AMD EPYC 7B13");
        assert_eq!(cpu_model("Model\t\t: Raspberry Pi 4\n"), "Raspberry Pi 4");
        assert_eq!(cpu_model("processor: 0\n"), "");
    }

    #[test]
    fn a_doctor_document_becomes_its_counts_and_checks() {
        let json = serde_json::json!({
            "summary": {"ok": 2, "warn": 1, "info": 0},
            "checks": [
                {"name": "cores", "verdict": "ok", "reading": "allowed 0-1", "fix": null},
                {"name": "clocksource", "verdict": "warn", "reading": "hpet", "fix": "use tsc"},
            ],
        });
        let d = doctor_summary(&json);
        assert_eq!((d.ok, d.warn, d.info), (2, 1, 0));
        assert_eq!(d.checks.len(), 2);
        assert_eq!(d.checks[1].fix.as_deref(), Some("use tsc"));
        assert_eq!(d.checks[0].fix, None);
    }
}
