//! The GameServer as the SDK's REST gateway shows it, and what tickforge reads from it:
//! the public address of each worker, and the allocations to turn into matches. Pure
//! functions of the JSON; no I/O.
//!
//! ```json
//! {"object_meta": {"name": "gs-1", "annotations": {...}, "labels": {...}},
//!  "status": {"state": "Allocated", "address": "203.0.113.7",
//!             "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}],
//!             "ports": [{"name": "game-0", "port": 7000}],
//!             "counters": {"rooms": {"count": "3", "capacity": "40"}}}}
//! ```
//!
//! The gateway writes proto field names (`object_meta`) and 64-bit integers as strings
//! (`"3"`); both spellings of each are read.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Deserializer};

/// The annotation a matchmaker sets on an allocation (the GameServerAllocation's
/// `metadata.annotations`): the match's settings, as the `POST /matches` body.
pub const SPEC_ANNOTATION: &str = "tickforge.dev/spec";

/// The annotation a matchmaker may set to name its allocation (1 to 40 of `a-z A-Z 0-9 - _ .`);
/// the outcome is then also written under [`outcome_key`] for that name.
pub const ALLOCATION_ANNOTATION: &str = "tickforge.dev/allocation";

/// Set by Agones on every allocation, with its time: a new value is a new allocation,
/// whether or not the state changed (the high-density pattern re-allocates an Allocated
/// GameServer).
pub const LAST_ALLOCATED_ANNOTATION: &str = "agones.dev/last-allocated";

/// The prefix Agones gives every annotation and label set through the SDK.
pub const SDK_PREFIX: &str = "agones.dev/sdk-";

/// SDK annotation key (Agones prefixes it: `agones.dev/sdk-tickforge-match`): the last
/// allocation's match, as JSON.
pub const MATCH_KEY: &str = "tickforge-match";
/// SDK annotation key: the last refused allocation and why, as JSON.
pub const REFUSED_KEY: &str = "tickforge-refused";
/// SDK annotation key: the [`LAST_ALLOCATED_ANNOTATION`] value last handled, so that a
/// restarted process does not handle it again.
pub const HANDLED_KEY: &str = "tickforge-handled";

/// Most characters of a matchmaker's allocation name: the outcome key
/// `agones.dev/sdk-tickforge-match-NAME` must stay within Kubernetes' 63-character name.
pub const MAX_ALLOCATION_NAME: usize = 40;

/// A GameServer, as much of it as tickforge reads.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct GameServer {
    /// Name, labels and annotations.
    #[serde(default, alias = "objectMeta")]
    pub object_meta: ObjectMeta,
    /// State, address, ports and counters.
    #[serde(default)]
    pub status: Status,
}

/// The GameServer's Kubernetes metadata.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct ObjectMeta {
    /// The GameServer's name.
    #[serde(default)]
    pub name: String,
    /// Its annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Its labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// The GameServer's status.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Status {
    /// `Scheduled`, `RequestReady`, `Ready`, `Allocated`, `Shutdown`, …
    #[serde(default)]
    pub state: String,
    /// The address players reach the node at.
    #[serde(default)]
    pub address: String,
    /// The node's addresses by type.
    #[serde(default)]
    pub addresses: Vec<Address>,
    /// The host ports, by the names the GameServer spec gives them.
    #[serde(default)]
    pub ports: Vec<Port>,
    /// Counters by name (beta: the CountsAndLists feature).
    #[serde(default)]
    pub counters: BTreeMap<String, Counter>,
}

/// One of the node's addresses.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Address {
    /// `ExternalIP`, `InternalIP`, `Hostname`, …
    #[serde(default, rename = "type")]
    pub kind: String,
    /// The address.
    #[serde(default)]
    pub address: String,
}

/// A named host port.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Port {
    /// The name in the GameServer spec (`default`, `game-0`, …).
    #[serde(default)]
    pub name: String,
    /// The port on the node.
    #[serde(default, deserialize_with = "int64")]
    pub port: i64,
}

/// A counter's value.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Counter {
    /// The count.
    #[serde(default, deserialize_with = "int64")]
    pub count: i64,
    /// The capacity.
    #[serde(default, deserialize_with = "int64")]
    pub capacity: i64,
}

/// A 64-bit integer as protobuf's JSON mapping writes it (a string) or as a number.
fn int64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Number(i64),
        Text(String),
    }
    match Either::deserialize(d)? {
        Either::Number(n) => Ok(n),
        Either::Text(t) => t.parse().map_err(serde::de::Error::custom),
    }
}

impl GameServer {
    /// Reads one GameServer as `GET /gameserver` answers it.
    pub fn from_json(text: &str) -> Result<GameServer, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// Reads one line of `GET /watch/gameserver`: `{"result": GameServer}`; a stream error
    /// (`{"error": …}`) is an error with its text.
    pub fn from_watch_line(line: &str) -> Result<GameServer, String> {
        #[derive(Deserialize)]
        struct Line {
            result: Option<GameServer>,
            error: Option<serde_json::Value>,
        }
        let line: Line = serde_json::from_str(line).map_err(|e| e.to_string())?;
        match (line.result, line.error) {
            (Some(gs), None) => Ok(gs),
            (_, Some(error)) => Err(format!("the watch stream sent an error: {error}")),
            (None, None) => Err("a watch line with no result".to_string()),
        }
    }

    /// Each worker's public address: the GameServer's address with the port named
    /// `game-<i>` for worker `i`; with one worker, also the port named `game` or `default`,
    /// or the only port. `None` where the status says nothing usable (no IP address yet,
    /// no such port): the worker keeps its configured address.
    pub fn public_addrs(&self, workers: usize) -> Vec<Option<SocketAddr>> {
        let s = &self.status;
        let ip = (s.address.parse::<IpAddr>().ok()).or_else(|| {
            // An address that is a host name: the first address that is an IP.
            (s.addresses.iter()).find_map(|a| a.address.parse::<IpAddr>().ok())
        });
        let port = |name: &str| {
            (s.ports.iter())
                .find(|p| p.name == name)
                .and_then(|p| u16::try_from(p.port).ok())
        };
        (0..workers)
            .map(|i| {
                let ip = ip?;
                let own = port(&format!("game-{i}"));
                let single = || {
                    let sole = match s.ports.as_slice() {
                        [only] => u16::try_from(only.port).ok(),
                        _ => None,
                    };
                    port("game").or_else(|| port("default")).or(sole)
                };
                let port = own.or_else(|| (workers == 1).then(single).flatten())?;
                (port != 0).then(|| SocketAddr::new(ip, port))
            })
            .collect()
    }

    /// The allocation this GameServer shows, if it is Allocated and not yet handled here
    /// (`seen`) or by an earlier process (the [`HANDLED_KEY`] annotation).
    pub fn pending_allocation(&self, seen: Option<&str>) -> Option<Allocation> {
        if self.status.state != "Allocated" {
            return None;
        }
        let a = &self.object_meta.annotations;
        let name = a.get(ALLOCATION_ANNOTATION).cloned();
        let key = (a.get(LAST_ALLOCATED_ANNOTATION).cloned()).or_else(|| name.clone())?;
        let handled = a.get(&format!("{SDK_PREFIX}{HANDLED_KEY}"));
        if seen == Some(key.as_str()) || handled == Some(&key) {
            return None;
        }
        Some(Allocation {
            name: name.unwrap_or_else(|| key.clone()),
            key,
            spec: a.get(SPEC_ANNOTATION).cloned().unwrap_or_default(),
        })
    }
}

/// One allocation to turn into a match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// What tells it from the others: Agones' `last-allocated` time (or the matchmaker's
    /// name for it, where Agones set none).
    pub key: String,
    /// The matchmaker's name for it ([`ALLOCATION_ANNOTATION`]), or else the key.
    pub name: String,
    /// The match's settings as JSON ([`SPEC_ANNOTATION`]); empty: the server's default
    /// match.
    pub spec: String,
}

impl Allocation {
    /// The SDK annotation key the outcome is written under for this allocation's name, when
    /// the name fits a Kubernetes key: `tickforge-match-<name>`.
    pub fn outcome_key(&self) -> Option<String> {
        outcome_key(&self.name)
    }
}

/// `tickforge-match-<name>` for a matchmaker's allocation name that fits a Kubernetes
/// annotation key (1 to [`MAX_ALLOCATION_NAME`] of `a-z A-Z 0-9 - _ .`, starting and
/// ending with a letter or digit); `None` for any other.
pub fn outcome_key(name: &str) -> Option<String> {
    let ok = (1..=MAX_ALLOCATION_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    ok.then(|| format!("{MATCH_KEY}-{name}"))
}

/// The next update to bring the `rooms` counter from `acked` (what the sidecar last
/// accepted; `None`: unknown) to `want`, one field per call as the SDK requires (one of
/// count, capacity or a difference per request), in an order that keeps count ≤ capacity
/// at every step: capacity first when it grows, count first when it shrinks.
pub fn next_counter_update(
    want: Counter,
    acked: (Option<i64>, Option<i64>),
) -> Option<CounterUpdate> {
    let (count, capacity) = acked;
    let capacity_differs = capacity != Some(want.capacity);
    let count_differs = count != Some(want.count);
    let grows = capacity.is_none_or(|c| want.capacity > c);
    if capacity_differs && (grows || !count_differs) {
        Some(CounterUpdate::Capacity(want.capacity))
    } else if count_differs {
        Some(CounterUpdate::Count(want.count))
    } else if capacity_differs {
        Some(CounterUpdate::Capacity(want.capacity))
    } else {
        None
    }
}

/// Whether a capacity change must go now rather than wait to be coalesced with the next:
/// when nothing was set yet, when the count would not fit, or when the room left crosses
/// zero (from full to not, or back), which is what Agones' allocation filters see.
/// Otherwise the measured capacity only drifts, and once every few seconds is enough.
pub fn capacity_is_urgent(want: Counter, acked: (Option<i64>, Option<i64>)) -> bool {
    let (Some(count), Some(capacity)) = acked else {
        return true;
    };
    let room_then = capacity - count > 0;
    let room_now = want.capacity - want.count > 0;
    want.count > capacity || room_then != room_now
}

/// One `PATCH /v1beta1/counters/{name}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterUpdate {
    /// Set the count.
    Count(i64),
    /// Set the capacity.
    Capacity(i64),
}

impl CounterUpdate {
    /// The request body: protobuf's JSON writes 64-bit integers as strings.
    pub fn body(self) -> String {
        match self {
            CounterUpdate::Count(n) => format!(r#"{{"count":"{n}"}}"#),
            CounterUpdate::Capacity(n) => format!(r#"{{"capacity":"{n}"}}"#),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"object_meta":{"name":"local","namespace":"default","uid":"1234",
        "resource_version":"v1","generation":"1","creation_timestamp":"1531795395",
        "annotations":{"annotation":"true"},"labels":{"islocal":"true"}},
        "status":{"state":"Ready","address":"127.0.0.1","ports":[{"name":"default","port":7777}]}}"#;

    #[test]
    fn the_documented_gameserver_reads_and_its_one_port_is_the_one_workers() {
        let gs = GameServer::from_json(DOC).unwrap();
        assert_eq!(gs.object_meta.name, "local");
        assert_eq!(gs.status.state, "Ready");
        assert_eq!(
            gs.public_addrs(1),
            vec![Some("127.0.0.1:7777".parse().unwrap())]
        );
        // Two workers need a port each, by name.
        assert_eq!(gs.public_addrs(2), vec![None, None]);
        let line = format!(r#"{{"result":{DOC}}}"#).replace('\n', " ");
        assert_eq!(GameServer::from_watch_line(&line).unwrap(), gs);
        assert!(GameServer::from_watch_line(r#"{"error":{"message":"x"}}"#).is_err());
    }

    #[test]
    fn camel_case_names_and_numbers_for_int64_read_as_well() {
        let gs = GameServer::from_json(
            r#"{"objectMeta":{"name":"a"},"status":{"state":"Allocated","address":"host.example",
            "addresses":[{"type":"Hostname","address":"host.example"},{"type":"ExternalIP","address":"203.0.113.7"}],
            "ports":[{"name":"game-1","port":"7001"},{"name":"game-0","port":7000}],
            "counters":{"rooms":{"count":3,"capacity":"40"}}}}"#,
        )
        .unwrap();
        assert_eq!(gs.object_meta.name, "a");
        assert_eq!(
            gs.status.counters["rooms"],
            Counter {
                count: 3,
                capacity: 40
            }
        );
        assert_eq!(
            gs.public_addrs(3),
            vec![
                Some("203.0.113.7:7000".parse().unwrap()),
                Some("203.0.113.7:7001".parse().unwrap()),
                None
            ]
        );
    }

    #[test]
    fn bad_gameserver_json_is_an_error_not_a_panic() {
        for bad in [
            "",
            "7",
            "{",
            r#"{"status":{"ports":[{"port":"x"}]}}"#,
            r#"{"status":{"counters":{"rooms":{"count":"99999999999999999999"}}}}"#,
            r#"{"status":{"state":7}}"#,
        ] {
            assert!(GameServer::from_json(bad).is_err(), "{bad}");
        }
        // Out-of-range ports are no address.
        let gs = GameServer::from_json(
            r#"{"status":{"address":"10.0.0.1","ports":[{"name":"default","port":70000}]}}"#,
        )
        .unwrap();
        assert_eq!(gs.public_addrs(1), vec![None]);
    }

    fn allocated(annotations: &[(&str, &str)]) -> GameServer {
        let mut gs = GameServer::default();
        gs.status.state = "Allocated".to_string();
        for (k, v) in annotations {
            gs.object_meta
                .annotations
                .insert(k.to_string(), v.to_string());
        }
        gs
    }

    #[test]
    fn an_allocation_is_pending_once_until_handled_here_or_by_an_earlier_process() {
        let gs = allocated(&[
            (LAST_ALLOCATED_ANNOTATION, "2026-01-01T00:00:00.5Z"),
            (ALLOCATION_ANNOTATION, "mm-42"),
            (SPEC_ANNOTATION, r#"{"players":2}"#),
        ]);
        let a = gs.pending_allocation(None).unwrap();
        assert_eq!(a.key, "2026-01-01T00:00:00.5Z");
        assert_eq!(a.name, "mm-42");
        assert_eq!(a.spec, r#"{"players":2}"#);
        assert_eq!(a.outcome_key().as_deref(), Some("tickforge-match-mm-42"));
        assert_eq!(gs.pending_allocation(Some(&a.key)), None);
        let mut handled = gs.clone();
        handled.object_meta.annotations.insert(
            format!("{SDK_PREFIX}{HANDLED_KEY}"),
            "2026-01-01T00:00:00.5Z".to_string(),
        );
        assert_eq!(handled.pending_allocation(None), None);
        let mut ready = gs.clone();
        ready.status.state = "Ready".to_string();
        assert_eq!(ready.pending_allocation(None), None);
        // Neither annotation: nothing tells this allocation from the next.
        assert_eq!(allocated(&[]).pending_allocation(None), None);
        // Without Agones' time, the matchmaker's name is the key.
        let a = allocated(&[(ALLOCATION_ANNOTATION, "x")])
            .pending_allocation(None)
            .unwrap();
        assert_eq!((a.key.as_str(), a.name.as_str()), ("x", "x"));
    }

    #[test]
    fn only_names_that_fit_a_kubernetes_key_get_their_own_outcome_annotation() {
        assert!(outcome_key("a").is_some());
        assert!(outcome_key(&"a".repeat(MAX_ALLOCATION_NAME)).is_some());
        for bad in [
            "",
            "-a",
            "a-",
            "2026-01-01T00:00:00Z",
            "a/b",
            &"a".repeat(MAX_ALLOCATION_NAME + 1),
        ] {
            assert_eq!(outcome_key(bad), None, "{bad}");
        }
        // The longest key stays within Kubernetes' 63-character name part.
        let longest = format!("sdk-{}", outcome_key(&"a".repeat(40)).unwrap());
        assert!(longest.len() <= 63, "{longest}");
    }

    #[test]
    fn counter_updates_keep_count_within_capacity_at_every_step() {
        let want = |count, capacity| Counter { count, capacity };
        use CounterUpdate::*;
        // Unknown: capacity first.
        assert_eq!(
            next_counter_update(want(2, 10), (None, None)),
            Some(Capacity(10))
        );
        assert_eq!(
            next_counter_update(want(2, 10), (None, Some(10))),
            Some(Count(2))
        );
        assert_eq!(next_counter_update(want(2, 10), (Some(2), Some(10))), None);
        // Shrinking: count first, then capacity.
        assert_eq!(
            next_counter_update(want(1, 3), (Some(5), Some(10))),
            Some(Count(1))
        );
        assert_eq!(
            next_counter_update(want(1, 3), (Some(1), Some(10))),
            Some(Capacity(3))
        );
        // Growing: capacity first.
        assert_eq!(
            next_counter_update(want(6, 12), (Some(5), Some(10))),
            Some(Capacity(12))
        );
        assert_eq!(Count(3).body(), r#"{"count":"3"}"#);
        // Drift waits; running out of room, or out of capacity for the count, does not.
        assert!(capacity_is_urgent(want(2, 10), (None, None)));
        assert!(!capacity_is_urgent(want(2, 12), (Some(2), Some(10))));
        assert!(capacity_is_urgent(want(2, 2), (Some(2), Some(10))));
        assert!(capacity_is_urgent(want(3, 4), (Some(2), Some(2))));
        assert!(capacity_is_urgent(want(5, 6), (Some(2), Some(4))));
        assert_eq!(Capacity(40).body(), r#"{"capacity":"40"}"#);
    }

    proptest::proptest! {
        /// Any text as a GameServer or a watch line: a value or an error, never a panic;
        /// what reads yields addresses and allocations without panic too.
        #[test]
        fn any_text_from_the_sidecar_reads_without_panic(text in ".{0,300}") {
            for read in [GameServer::from_json, GameServer::from_watch_line] {
                if let Ok(gs) = read(&text) {
                    let _ = gs.public_addrs(3);
                    let _ = gs.pending_allocation(None);
                }
            }
        }

        /// A well-formed GameServer with any values in the fields tickforge reads.
        #[test]
        fn any_values_in_the_fields_read_without_panic(
            address in ".{0,24}",
            port in proptest::prelude::any::<i64>(),
            count in ".{0,24}",
            state in "(Allocated|Ready|.{0,8})",
            annotation in ".{0,48}",
        ) {
            let doc = serde_json::json!({
                "object_meta": {"annotations": {
                    LAST_ALLOCATED_ANNOTATION: annotation,
                    ALLOCATION_ANNOTATION: annotation,
                    SPEC_ANNOTATION: annotation,
                }},
                "status": {
                    "state": state,
                    "address": address,
                    "ports": [{"name": "default", "port": port}, {"name": "game-1", "port": port.to_string()}],
                    "counters": {"rooms": {"count": count, "capacity": port}},
                },
            });
            if let Ok(gs) = GameServer::from_json(&doc.to_string()) {
                for addr in gs.public_addrs(2).into_iter().flatten() {
                    proptest::prop_assert!(addr.port() != 0);
                }
                if let Some(a) = gs.pending_allocation(None) {
                    if let Some(key) = a.outcome_key() {
                        // Kubernetes' name part after `agones.dev/`: at most 63 characters.
                        proptest::prop_assert!(key.len() + "sdk-".len() <= 63);
                    }
                }
            }
        }
    }
}
