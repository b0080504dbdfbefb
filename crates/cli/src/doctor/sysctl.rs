//! `doctor --sysctl`: the sysctl.d drop-in that the doctor's kernel checks ask for.
//!
//! One [`Setting`] per sysctl that a check warns about with a `sysctl -w` fix, at the value
//! that makes the check pass, taken from the same constants the check compares against.
//! Sysctls the doctor only reports (`rmem_default`, `udp_mem`, `busy_read`/`busy_poll`) are
//! named in a closing comment and left alone. The text does not depend on the host, so
//! `deploy/sysctl/90-tickforge.conf` can be checked in and compared with it.

use tickforge_io::udp::SocketOptions;

use super::{bytes, cpu, net};

/// One line of the drop-in: a sysctl, its value, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    /// The sysctl's dotted name, as `sysctl -w` and sysctl.d take it.
    pub key: &'static str,
    pub value: i64,
    /// The doctor check that warns when the host falls short of it.
    pub check: &'static str,
    /// One line for the comment above it.
    pub why: String,
}

/// Every sysctl a doctor check asks for, in the order the checks print.
pub fn settings() -> Vec<Setting> {
    let worker = SocketOptions::default();
    let mut out = Vec::new();
    for (key, check, direction, asks) in [
        (
            "net.core.rmem_max",
            "rmem_max",
            "receive",
            worker.recv_buffer_bytes,
        ),
        (
            "net.core.wmem_max",
            "wmem_max",
            "send",
            worker.send_buffer_bytes,
        ),
    ] {
        // A worker that asks for nothing is not cut short by any ceiling.
        if let Some(want) = asks {
            out.push(Setting {
                key,
                value: want as i64,
                check,
                why: format!(
                    "a worker's socket asks for a {} {direction} buffer, and the kernel \
                     silently cuts the request to this ceiling",
                    bytes(want as u64)
                ),
            });
        }
    }
    out.push(Setting {
        key: "net.core.netdev_max_backlog",
        value: net::RECOMMENDED_BACKLOG,
        check: "netdev_backlog",
        why: "datagrams wait here per CPU before the stack takes them; a full backlog drops \
              them (the kernel's default doubled, as the AWS paper does; raise it again if \
              the doctor still counts drops)"
            .to_string(),
    });
    out.push(Setting {
        key: "kernel.sched_rt_runtime_us",
        value: cpu::RT_RUNTIME_DEFAULT_US,
        check: "rt_runtime",
        why: "serve --rt-priority runs workers as SCHED_FIFO, which never runs at 0; the \
              kernel's default leaves 5% of each second to other tasks, so a real-time \
              thread busy past 95% of a second waits out the rest of it (bench's bots report \
              that wait as the host's, bots.host_held_ms)"
            .to_string(),
    });
    out
}

/// Sysctls the doctor reads but leaves as they are, with why, for the closing comment.
const NOT_SET: [(&str, &str); 3] = [
    (
        "net.core.rmem_default",
        "a worker sets its own buffer size (the check only asks that it stay under rmem_max)",
    ),
    (
        "net.core.busy_read, net.core.busy_poll",
        "workers sleep to their deadlines and read without blocking",
    ),
    (
        "net.ipv4.udp_mem",
        "sized by the kernel from memory; the doctor reports it",
    ),
];

/// The drop-in as `doctor --sysctl` prints it: a header, then each setting under a comment
/// naming its check and why.
pub fn drop_in() -> String {
    let mut out = String::from(
        "# tickforge: the kernel settings `tickforge doctor` checks for, as\n\
         # `tickforge doctor --sysctl` prints them. Install as\n\
         # /etc/sysctl.d/90-tickforge.conf, then `sysctl --system`. Where a host already has\n\
         # a larger buffer or backlog, keep the host's.\n",
    );
    for s in settings() {
        out.push('\n');
        comment(
            &mut out,
            "# ",
            &format!("{} (doctor: {}): {}.", s.key, s.check, s.why),
        );
        out.push_str(&format!("{} = {}\n", s.key, s.value));
    }
    out.push_str("\n# Not set here, as the doctor only reports them:\n");
    for (keys, why) in NOT_SET {
        comment(&mut out, "#   ", &format!("{keys}: {why}."));
    }
    out
}

/// Appends `text` as comment lines of at most [`WIDTH`] characters, the first starting
/// with `first` and the rest indented two more.
fn comment(out: &mut String, first: &str, text: &str) {
    let more = format!("{first}  ");
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let prefix = if lines.is_empty() { first } else { &more };
        if !line.is_empty() && prefix.len() + line.len() + 1 + word.len() > WIDTH {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    for (i, line) in lines.iter().enumerate() {
        out.push_str(if i == 0 { first } else { &more });
        out.push_str(line);
        out.push('\n');
    }
}

/// Longest line of the drop-in, in bytes (the text is ASCII), unless one word is longer.
const WIDTH: usize = 90;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::{Read, Verdict};

    fn text(s: impl ToString) -> Read {
        Ok(s.to_string())
    }

    fn value_of(key: &str) -> i64 {
        settings()
            .iter()
            .find(|s| s.key == key)
            .unwrap_or_else(|| panic!("{key} is not in the drop-in"))
            .value
    }

    /// `sysctl -w KEY=VALUE` in a fix, as (KEY, VALUE).
    fn sysctl_in(fix: &str) -> (String, i64) {
        let rest = fix.split("sysctl -w ").nth(1).expect("a sysctl -w fix");
        let assignment = rest.split_whitespace().next().unwrap();
        let (key, value) = assignment.split_once('=').unwrap();
        (key.to_string(), value.parse().unwrap())
    }

    #[test]
    fn every_value_in_the_drop_in_passes_its_check() {
        let worker = SocketOptions::default();
        let rmem = value_of("net.core.rmem_max");
        let wmem = value_of("net.core.wmem_max");
        let checks = [
            net::buffer_max(
                "rmem_max",
                "net.core.rmem_max",
                "receive",
                &text(rmem),
                worker.recv_buffer_bytes,
            ),
            net::buffer_max(
                "wmem_max",
                "net.core.wmem_max",
                "send",
                &text(wmem),
                worker.send_buffer_bytes,
            ),
            net::backlog(
                &text(value_of("net.core.netdev_max_backlog")),
                &text("02be1e29 00000000 00000004\n"),
            ),
            cpu::rt_runtime(
                &text(value_of("kernel.sched_rt_runtime_us")),
                &text("1000000"),
            ),
        ];
        for c in &checks {
            assert_eq!(c.verdict, Verdict::Ok, "{}: {}", c.name, c.reading);
        }
        let names: Vec<&str> = checks.iter().map(|c| c.name).collect();
        let covered: Vec<&str> = settings().iter().map(|s| s.check).collect();
        assert_eq!(names, covered, "one check run above per setting");
        // One byte less than the drop-in and the check warns: the value is the threshold.
        let short = net::buffer_max(
            "rmem_max",
            "net.core.rmem_max",
            "receive",
            &text(rmem - 1),
            worker.recv_buffer_bytes,
        );
        assert_eq!(short.verdict, Verdict::Warn);
    }

    #[test]
    fn every_sysctl_fix_of_a_failing_check_is_a_line_of_the_drop_in() {
        let worker = SocketOptions::default();
        let failing = [
            net::buffer_max(
                "rmem_max",
                "net.core.rmem_max",
                "receive",
                &text(212_992),
                worker.recv_buffer_bytes,
            ),
            net::buffer_max(
                "wmem_max",
                "net.core.wmem_max",
                "send",
                &text(212_992),
                worker.send_buffer_bytes,
            ),
            net::backlog(&text(300), &text("02be1e29 00000000 00000004\n")),
            cpu::rt_runtime(&text(0), &text(1_000_000)),
        ];
        let printed = drop_in();
        for c in &failing {
            assert_eq!(c.verdict, Verdict::Warn, "{}", c.name);
            let (key, value) = sysctl_in(c.fix.as_deref().unwrap());
            assert_eq!(value, value_of(&key), "{}", c.name);
            assert!(
                printed.lines().any(|l| l == format!("{key} = {value}")),
                "{key} = {value} missing:\n{printed}"
            );
        }
    }

    #[test]
    fn each_setting_line_follows_a_comment_naming_its_check() {
        let printed = drop_in();
        let lines: Vec<&str> = printed.lines().collect();
        let mut settings_seen = 0;
        for (i, line) in lines.iter().enumerate() {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = line.split_once(" = ").expect("key = value");
            assert!(value.parse::<i64>().is_ok(), "{line}");
            // The comment block above it starts by naming the setting and its check.
            let mut first = i;
            while first > 0 && lines[first - 1].starts_with('#') {
                first -= 1;
            }
            assert!(first < i, "{line} has no comment");
            assert!(
                lines[first].starts_with(&format!("# {key} (doctor: ")),
                "{}",
                lines[first]
            );
            settings_seen += 1;
        }
        assert_eq!(settings_seen, settings().len());
        assert!(printed.ends_with(".\n"));
        assert!(printed.is_ascii());
        for line in &lines {
            assert!(line.len() <= WIDTH, "{} characters: {line}", line.len());
        }
    }
}
