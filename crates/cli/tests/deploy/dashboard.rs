//! The metrics the server exports, and the queries of the Grafana dashboard held to them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::promql;

/// Each sample name the server exports, by label, by value.
pub type Exported = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// A query and where it is: (where, expression, whether it must filter by `$instance`).
pub type Query = (String, String, bool);

/// Labels Prometheus adds to every scraped series.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

/// Each sample name the server exports, with each label it carries and that label's values,
/// from a snapshot where every family has a sample.
pub fn exported() -> Exported {
    use tickforge_telemetry::prometheus::{
        render_with_matches, AdminCounts, AgonesCounts, MatchTicks, MetricsSnapshot,
    };
    use tickforge_telemetry::rounds::{RoundSummary, FRAME_SLOT};
    use tickforge_telemetry::{Category, FrameRecord, Phase};
    let mut s = MetricsSnapshot::default();
    for us in [3u64, 40, 90, 120, 300, 20_000] {
        let mut r = FrameRecord::default();
        for c in Category::ALL {
            r.add(c, Phase::Simulate, us * 100);
        }
        s.record_frame(&r);
    }
    s.late_ticks = 2;
    s.late_by_cause = [0, 1, 1, 0, 0];
    s.skipped_ticks = 1;
    s.hitches = 1;
    s.bytes_in = 1200;
    s.bytes_out = 34_000;
    s.packets_in = 10;
    s.packets_out = 20;
    s.players_connected = 9;
    s.matches = 1;
    s.dropped.add("decrypt", 5);
    s.refused.add("match_full", 2);
    s.kicked.add("flooding", 1);
    s.results_written = 4;
    s.results_failed = 1;
    s.results_pending = 1;
    s.matches_reclaimed = 1;
    s.record_round(&RoundSummary {
        round: Some(1),
        ticks: 128,
        mean_ns: 90_000,
        category_mean_ns: [9_000; Category::COUNT],
        ..RoundSummary::default()
    });
    s.count_violations(1 << Category::Replication.index() | 1 << FRAME_SLOT);
    let matches = [MatchTicks {
        match_id: 1,
        ticks: 6,
        late_ticks: 2,
        hitches: 1,
    }];
    let admin = AdminCounts {
        requests: vec![(200, 7)],
        connections_closed: vec![("idle_timeout", 1)],
        agones: Some(AgonesCounts {
            calls: vec![("health", 3), ("counter", 2)],
            errors: vec![("health", 1)],
            ready: true,
        }),
    };
    let mut text = String::new();
    render_with_matches(&s, &matches, &admin, &mut text);

    let mut out: Exported = BTreeMap::new();
    let mut families = BTreeSet::new();
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("# TYPE ") {
            families.insert(t.split(' ').next().unwrap().to_string());
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let head = line.rsplit_once(' ').unwrap().0;
        let (name, labels) = head.split_once('{').unwrap_or((head, "}"));
        let entry = out.entry(name.to_string()).or_default();
        // Label values here are plain words and numbers: no escapes, commas or braces.
        for pair in labels
            .trim_end_matches('}')
            .split(',')
            .filter(|p| !p.is_empty())
        {
            let (k, v) = pair.split_once('=').unwrap();
            entry
                .entry(k.to_string())
                .or_default()
                .insert(v.trim_matches('"').to_string());
        }
    }
    // Every family the server can write is in the text, with a sample, and every sample
    // is of a family.
    let suffixes = ["", "_total", "_bucket", "_sum", "_count"];
    for family in &families {
        assert!(
            suffixes
                .iter()
                .any(|x| out.contains_key(&format!("{family}{x}"))),
            "{family} has no sample"
        );
    }
    for name in out.keys() {
        assert!(
            suffixes
                .iter()
                .any(|x| name.strip_suffix(x).is_some_and(|f| families.contains(f))),
            "{name} is of no family"
        );
    }
    assert!(families.contains("tickforge_match_hitches"), "{families:?}");
    assert!(
        families.contains("tickforge_admin_requests"),
        "{families:?}"
    );
    out
}

/// Every query of the dashboard, as (where, expression, whether it must filter by the
/// `instance` variable).
pub fn queries(dashboard: &Value) -> Vec<Query> {
    fn walk(panels: &Value, out: &mut Vec<Query>) {
        for p in panels.as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("?");
            for t in p["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{title}: a target without expr"));
                out.push((format!("panel `{title}`"), expr.to_string(), true));
            }
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if v["type"] != "query" {
            continue;
        }
        let query = v["query"]["query"]
            .as_str()
            .or(v["query"].as_str())
            .unwrap();
        // label_values(selector, label): the selector is PromQL, the label one it carries.
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .unwrap_or_else(|| panic!("variable {}: not label_values(...)", v["name"]));
        let (selector, label) = inner.rsplit_once(',').unwrap();
        let expr = format!("count by ({}) ({selector})", label.trim());
        let name = v["name"].as_str().unwrap_or("?");
        out.push((format!("variable `{name}`"), expr, false));
    }
    out
}

/// What in `queries` names a metric, a label or a bucket the server does not export.
pub fn problems(queries: &[Query], exported: &Exported) -> Vec<String> {
    let all_labels: BTreeSet<&str> = exported
        .values()
        .flat_map(|labels| labels.keys().map(String::as_str))
        .chain(TARGET_LABELS)
        .collect();
    let mut problems = Vec::new();
    for (place, expr, filtered) in queries {
        let refs = match promql::refs(expr) {
            Ok(r) => r,
            Err(e) => {
                problems.push(format!("{place}: {e}"));
                continue;
            }
        };
        if refs.selectors.is_empty() {
            problems.push(format!("{place}: names no metric: {expr}"));
        }
        for s in &refs.selectors {
            let Some(labels) = exported.get(&s.metric) else {
                problems.push(format!("{place}: {} is not exported", s.metric));
                continue;
            };
            for (label, _, value) in &s.matchers {
                if TARGET_LABELS.contains(&label.as_str()) {
                    continue;
                }
                match labels.get(label) {
                    None => problems.push(format!("{place}: {} has no label {label}", s.metric)),
                    Some(values) if label == "le" && !values.contains(value) => problems.push(
                        format!("{place}: {} has no bucket le=\"{value}\"", s.metric),
                    ),
                    Some(_) => {}
                }
            }
            if *filtered
                && !s
                    .matchers
                    .iter()
                    .any(|(l, op, v)| l == "instance" && op == "=~" && v == "$instance")
            {
                problems.push(format!(
                    "{place}: {} is not filtered by $instance",
                    s.metric
                ));
            }
        }
        for label in &refs.grouping {
            if !all_labels.contains(label.as_str()) {
                problems.push(format!("{place}: no metric has the label {label}"));
            }
        }
    }
    problems
}
