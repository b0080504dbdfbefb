//! The doctor's network checks: socket buffer limits, the receive backlog and its drops,
//! busy polling, UDP errors since boot, and UDP segmentation offload.

use serde_json::json;
use tickforge_io::udp::SocketOptions;

use super::{bytes, integer, read, Check, Read};

/// `net.core.netdev_max_backlog` as the kernel ships it; the AWS paper doubles it.
const KERNEL_DEFAULT_BACKLOG: i64 = 1000;

/// `net.core.netdev_max_backlog` the fixes ask for at least, and the value `doctor
/// --sysctl` writes: the kernel's default doubled, as the AWS paper does.
pub const RECOMMENDED_BACKLOG: i64 = 2 * KERNEL_DEFAULT_BACKLOG;

/// Reads the host and runs every check of this module.
pub fn gather() -> Vec<Check> {
    let worker = SocketOptions::default();
    let rmem_max = read("/proc/sys/net/core/rmem_max");
    let probe = |r: std::io::Result<bool>| r.map_err(|e| e.to_string());
    vec![
        buffer_max(
            "rmem_max",
            "net.core.rmem_max",
            "receive",
            &rmem_max,
            worker.recv_buffer_bytes,
        ),
        buffer_max(
            "wmem_max",
            "net.core.wmem_max",
            "send",
            &read("/proc/sys/net/core/wmem_max"),
            worker.send_buffer_bytes,
        ),
        rmem_default(&read("/proc/sys/net/core/rmem_default"), &rmem_max),
        udp_mem(&read("/proc/sys/net/ipv4/udp_mem")),
        backlog(
            &read("/proc/sys/net/core/netdev_max_backlog"),
            &read("/proc/net/softnet_stat"),
        ),
        busy_poll(
            &read("/proc/sys/net/core/busy_read"),
            &read("/proc/sys/net/core/busy_poll"),
        ),
        udp_errors(&read("/proc/net/snmp")),
        udp_offload(
            &probe(tickforge_io::host::udp_gso_supported()),
            &probe(tickforge_io::host::udp_gro_supported()),
        ),
    ]
}

/// A buffer ceiling (`rmem_max`, `wmem_max`) against what a worker's socket asks for: the
/// kernel silently caps the request at it.
pub fn buffer_max(
    name: &'static str,
    sysctl: &str,
    direction: &str,
    value: &Read,
    worker_asks: Option<usize>,
) -> Check {
    let v = match integer(value) {
        Ok(v) => v,
        Err(why) => return Check::unknown(name, sysctl, why),
    };
    let data = json!({ "bytes": v, "worker_asks_bytes": worker_asks });
    let reading = format!("{v} ({})", bytes(v.max(0) as u64));
    match worker_asks {
        Some(want) if (v.max(0) as u64) < want as u64 => Check::warn(
            name,
            format!(
                "{reading}, below the {} {direction} buffer a worker asks for: the kernel cuts it to this",
                bytes(want as u64)
            ),
            format!(
                "sysctl -w {sysctl}={want} (and in /etc/sysctl.d to keep it: `tickforge doctor --sysctl`)"
            ),
        ),
        Some(want) => Check::ok(
            name,
            format!("{reading}; a worker asks for {}", bytes(want as u64)),
        ),
        None => Check::info(name, reading),
    }
    .with_data(data)
}

/// The receive buffer of sockets that do not ask (a worker's does).
pub fn rmem_default(default: &Read, max: &Read) -> Check {
    const NAME: &str = "rmem_default";
    let v = match integer(default) {
        Ok(v) => v,
        Err(why) => return Check::unknown(NAME, "net.core.rmem_default", why),
    };
    let data = json!({ "bytes": v });
    let reading = format!("{v} ({})", bytes(v.max(0) as u64));
    match integer(max) {
        Ok(max) if v > max => Check::warn(
            NAME,
            format!("{reading}, above rmem_max {max}"),
            format!("sysctl -w net.core.rmem_default={max} (the AWS paper: never above rmem_max)"),
        ),
        _ => Check::info(
            NAME,
            format!("{reading} for sockets that do not ask; a worker sets its own"),
        ),
    }
    .with_data(data)
}

/// Pages all UDP sockets together may queue (min, pressure, max).
pub fn udp_mem(text: &Read) -> Check {
    const NAME: &str = "udp_mem";
    let pages: Option<Vec<u64>> = text
        .as_ref()
        .ok()
        .map(|t| t.split_whitespace().map(|p| p.parse().ok()).collect())
        .and_then(|v: Option<Vec<u64>>| v.filter(|v| v.len() == 3));
    let Some(pages) = pages else {
        let why = match text {
            Ok(t) => format!("`{t}` is not three page counts"),
            Err(e) => e.to_string(),
        };
        return Check::unknown(NAME, "net.ipv4.udp_mem", why);
    };
    Check::info(
        NAME,
        format!(
            "{} {} {} pages: UDP queues are squeezed past {} and capped at {}",
            pages[0],
            pages[1],
            pages[2],
            bytes(pages[1] * 4096),
            bytes(pages[2] * 4096)
        ),
    )
    .with_data(json!({ "pages": pages }))
}

/// Datagrams each CPU dropped since boot because its input backlog was full: the second
/// (hexadecimal) column of `/proc/net/softnet_stat`, one line per CPU. `None` for text in
/// another form.
pub fn parse_softnet_drops(text: &str) -> Option<u64> {
    let mut total = 0u64;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let dropped = line.split_whitespace().nth(1)?;
        total = total.saturating_add(u64::from_str_radix(dropped, 16).ok()?);
    }
    Some(total)
}

/// The per-CPU input backlog's length and whether it has overflowed.
pub fn backlog(max_backlog: &Read, softnet: &Read) -> Check {
    const NAME: &str = "netdev_backlog";
    let v = match integer(max_backlog) {
        Ok(v) => v,
        Err(why) => return Check::unknown(NAME, "net.core.netdev_max_backlog", why),
    };
    let drops = softnet.as_ref().ok().and_then(|t| parse_softnet_drops(t));
    let data = json!({ "netdev_max_backlog": v, "dropped_since_boot": drops });
    let drops_text = drops.map_or("unknown".to_string(), |d| d.to_string());
    let reading = format!("{v}; dropped since boot for a full backlog: {drops_text}");
    match drops {
        Some(d) if d > 0 => Check::warn(
            NAME,
            reading,
            format!(
                "sysctl -w net.core.netdev_max_backlog={}",
                (v * 2).max(RECOMMENDED_BACKLOG)
            ),
        ),
        _ if v < KERNEL_DEFAULT_BACKLOG => Check::warn(
            NAME,
            format!("{reading}; below the kernel's default"),
            format!("sysctl -w net.core.netdev_max_backlog={RECOMMENDED_BACKLOG}"),
        ),
        Some(_) => Check::ok(NAME, reading),
        None => Check::info(NAME, reading),
    }
    .with_data(data)
}

/// Busy polling of device queues by blocking reads and polls (`busy_read`, `busy_poll`).
pub fn busy_poll(busy_read: &Read, busy_poll: &Read) -> Check {
    const NAME: &str = "busy_poll";
    let (r, p) = match (integer(busy_read), integer(busy_poll)) {
        (Ok(r), Ok(p)) => (r, p),
        (Err(why), _) | (_, Err(why)) => return Check::unknown(NAME, "net.core.busy_*", why),
    };
    Check::info(
        NAME,
        format!(
            "busy_read {r} µs, busy_poll {p} µs: workers sleep to their deadlines and read \
             without blocking, so it does not shorten their wait"
        ),
    )
    .with_data(json!({ "busy_read_us": r, "busy_poll_us": p }))
}

/// The `Udp:` counters of `/proc/net/snmp` as (name, value) pairs, in the kernel's order.
pub fn parse_udp_snmp(text: &str) -> Option<Vec<(String, u64)>> {
    let mut udp = text.lines().filter_map(|l| l.strip_prefix("Udp:"));
    let names = udp.next()?.split_whitespace();
    let values = udp.next()?.split_whitespace();
    names
        .zip(values)
        .map(|(n, v)| Some((n.to_string(), v.parse().ok()?)))
        .collect()
}

/// UDP datagrams any socket on the host lost since boot for want of buffer space.
pub fn udp_errors(snmp: &Read) -> Check {
    const NAME: &str = "udp_errors";
    let counters = match snmp.as_ref().map(|t| parse_udp_snmp(t)) {
        Ok(Some(c)) => c,
        Ok(None) => return Check::unknown(NAME, "/proc/net/snmp", "no Udp: counters"),
        Err(e) => return Check::unknown(NAME, "/proc/net/snmp", e),
    };
    let get = |name: &str| counters.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    let shown = ["RcvbufErrors", "SndbufErrors", "InErrors"];
    let reading = shown
        .iter()
        .map(|n| format!("{n} {}", get(n).map_or("?".to_string(), |v| v.to_string())))
        .collect::<Vec<_>>()
        .join(", ");
    let overflowed = get("RcvbufErrors").is_some_and(|v| v > 0);
    Check::info(
        NAME,
        format!(
            "{reading} since boot, every socket on the host{}",
            if overflowed {
                ": some receive buffer overflowed"
            } else {
                ""
            }
        ),
    )
    .with_data(json!(counters
        .iter()
        .map(|(n, v)| (n.clone(), json!(v)))
        .collect::<serde_json::Map<_, _>>()))
}

/// Whether the kernel offers UDP GSO and GRO; tickforge uses neither (`io::udp`'s doc says
/// why), so this is information for whoever hosts another server here.
pub fn udp_offload(gso: &Result<bool, String>, gro: &Result<bool, String>) -> Check {
    const NAME: &str = "udp_gso";
    let say = |r: &Result<bool, String>| match r {
        Ok(true) => "supported".to_string(),
        Ok(false) => "not supported".to_string(),
        Err(why) => format!("unknown ({why})"),
    };
    Check::info(
        NAME,
        format!(
            "UDP_SEGMENT {}, UDP_GRO {}; tickforge sends one datagram per client per tick and needs neither",
            say(gso),
            say(gro)
        ),
    )
    .with_data(json!({ "gso": gso.as_ref().ok(), "gro": gro.as_ref().ok() }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::{ReadError, Verdict};

    fn text(s: &str) -> Read {
        Ok(s.to_string())
    }

    #[test]
    fn a_ceiling_below_the_workers_request_warns_with_the_sysctl() {
        let low = buffer_max(
            "rmem_max",
            "net.core.rmem_max",
            "receive",
            &text("212992"),
            Some(4 << 20),
        );
        assert_eq!(low.verdict, Verdict::Warn);
        assert_eq!(
            low.fix.as_deref(),
            Some(
                "sysctl -w net.core.rmem_max=4194304 (and in /etc/sysctl.d to keep it: \
                 `tickforge doctor --sysctl`)"
            )
        );
        let enough = buffer_max(
            "rmem_max",
            "net.core.rmem_max",
            "receive",
            &text("4194304"),
            Some(4 << 20),
        );
        assert_eq!(enough.verdict, Verdict::Ok);
        let unread = buffer_max(
            "rmem_max",
            "net.core.rmem_max",
            "receive",
            &Err(ReadError::Absent),
            Some(1),
        );
        assert_eq!(unread.verdict, Verdict::Info);
        assert_eq!(unread.reading, "unknown (net.core.rmem_max: absent)");
    }

    #[test]
    fn rmem_default_above_the_max_warns() {
        assert_eq!(
            rmem_default(&text("212992"), &text("4194304")).verdict,
            Verdict::Info
        );
        assert_eq!(
            rmem_default(&text("8388608"), &text("4194304")).verdict,
            Verdict::Warn
        );
    }

    #[test]
    fn udp_mem_needs_three_page_counts() {
        let c = udp_mem(&text("575802\t767736\t1151604"));
        assert_eq!(c.verdict, Verdict::Info);
        assert!(c.reading.ends_with("capped at 4.4 GiB"), "{}", c.reading);
        assert!(udp_mem(&text("1 2")).reading.starts_with("unknown"));
    }

    #[test]
    fn softnet_drops_are_the_second_hex_column_summed() {
        let text = "02be1e29 00000000 00000004 00000000\n029eb610 0000001a 00000003 00000000\n";
        assert_eq!(parse_softnet_drops(text), Some(26));
        assert_eq!(parse_softnet_drops(""), Some(0));
        assert_eq!(parse_softnet_drops("02be1e29\n"), None);
        assert_eq!(parse_softnet_drops("0 zz\n"), None);
    }

    #[test]
    fn backlog_drops_warn_and_none_is_ok() {
        let clean = "02be1e29 00000000 00000004\n";
        assert_eq!(backlog(&text("1000"), &text(clean)).verdict, Verdict::Ok);
        let dropped = backlog(&text("1000"), &text("02be1e29 00000010 00000004\n"));
        assert_eq!(dropped.verdict, Verdict::Warn);
        assert!(dropped.reading.ends_with(": 16"), "{}", dropped.reading);
        assert_eq!(
            dropped.fix.as_deref(),
            Some("sysctl -w net.core.netdev_max_backlog=2000")
        );
        assert_eq!(backlog(&text("300"), &text(clean)).verdict, Verdict::Warn);
    }

    #[test]
    fn udp_snmp_counters_by_name() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                    Udp: 89386330 1967 5 89403126 3 0\n\
                    UdpLite: InDatagrams\nUdpLite: 0\n";
        let c = parse_udp_snmp(snmp).unwrap();
        assert_eq!(c[4], ("RcvbufErrors".to_string(), 3));
        let check = udp_errors(&text(snmp));
        assert!(
            check
                .reading
                .starts_with("RcvbufErrors 3, SndbufErrors 0, InErrors 5 since boot"),
            "{}",
            check.reading
        );
        assert!(check.reading.ends_with("some receive buffer overflowed"));
        assert_eq!(parse_udp_snmp("Ip: 1\n"), None);
    }

    #[test]
    fn offload_is_information_either_way() {
        let c = udp_offload(&Ok(true), &Ok(false));
        assert_eq!(c.verdict, Verdict::Info);
        assert!(c
            .reading
            .starts_with("UDP_SEGMENT supported, UDP_GRO not supported"));
    }
}
