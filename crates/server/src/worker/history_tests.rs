//! The worker's frame history: rounds cut where the game's round changes, budgets counted
//! exactly, and both carried to the result line, `/matches`, `/metrics` and the report.

use std::time::{Duration, Instant};

use tickforge_api::sim::result_line;
use tickforge_io::time;
use tickforge_telemetry::rounds::{Cost, FRAME_SLOT};
use tickforge_telemetry::{Category, FrameRecord};

use super::{DueFrame, Worker};
use crate::admin::worker_link;
use crate::config::ServerConfig;

/// A worker hosting one Walk match of `game`'s settings, started a second ago so that its
/// ticks are due at once.
fn worker(game: serde_json::Value, results: Option<std::path::PathBuf>) -> Worker {
    crate::testing::register_walk();
    let mut config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        matches: 1,
        results_file: results,
        ..ServerConfig::default()
    };
    config.game.table = game.as_object().unwrap().clone();
    config.budgets.ns[Category::Gameplay.index()] = Some(50_000);
    config.budgets.ns[FRAME_SLOT] = Some(1_000_000);
    Worker::lone(config, time::now() - Duration::from_secs(1)).unwrap()
}

/// A frame of `gameplay_ns` in gameplay and 20 µs in network.
fn frame(gameplay_ns: u64) -> FrameRecord {
    let mut r = FrameRecord::default();
    r.category_ns[Category::Gameplay.index()] = gameplay_ns;
    r.category_ns[Category::Network.index()] = 20_000;
    r.total_ns = gameplay_ns + 20_000;
    r
}

/// Records `frames` of match 0 as one wake-up's, with no send cost to share: the
/// accounting layer alone, its costs given.
fn record(w: &mut Worker, frames: &[(Option<u32>, FrameRecord)]) {
    let deadline = w.window.start;
    w.due.clear();
    w.due.extend(frames.iter().map(|&(round, record)| DueFrame {
        index: 0,
        record,
        queued: 0,
        late: Duration::ZERO,
        deadline,
        started: deadline,
        round,
    }));
    let window = w.window;
    w.charge_send_and_record(0, &window);
}

#[test]
fn budget_violations_are_counted_per_tick_category_and_match_exactly() {
    let mut w = worker(serde_json::json!({}), None);
    // Gameplay's budget is 50 µs and the frame's 1 ms: 50 µs is within, 50.001 over.
    let costs = [50_000, 50_001, 990_000, 980_001, 10_000];
    let frames: Vec<_> = costs.iter().map(|&g| (Some(1), frame(g))).collect();
    record(&mut w, &frames);
    let whole = w.hosted[0].history.whole();
    assert_eq!(whole.violations[Category::Gameplay.index()], 3);
    assert_eq!(whole.violations[FRAME_SLOT], 2, "1.01 ms and 1.000001 ms");
    assert_eq!(whole.violations.iter().sum::<u64>(), 5, "no other category");
    assert_eq!(w.metrics.budget_violations, whole.violations);
    assert_eq!(w.measure.violations, whole.violations);
    let report = w.figures(&w.window, time::now()).report();
    assert_eq!(report.budget_violations["gameplay"], 3);
    assert_eq!(report.budget_violations["frame"], 2);
    assert_eq!(
        report.budget_violations.len(),
        2,
        "{:?}",
        report.budget_violations
    );
    assert_eq!(report.budgets_ms["gameplay"], 0.05);
    assert_eq!(report.budgets_ms["frame"], 1.0);
}

#[test]
fn rounds_cut_where_the_game_says_with_their_means_in_metrics_and_matches() {
    let mut w = worker(serde_json::json!({}), None);
    let (admin, link) = worker_link("127.0.0.1:1".parse().unwrap());
    w.admin = Some(link);
    let mut frames = vec![(Some(1), frame(10_000)); 3];
    frames.extend([(Some(2), frame(30_000)), (Some(2), frame(50_000))]);
    record(&mut w, &frames);
    // Round 1 closed when round 2 began; round 2 is being played.
    let rounds: Vec<_> = w.hosted[0].history.rounds().copied().collect();
    assert_eq!(rounds.len(), 1);
    assert_eq!((rounds[0].round, rounds[0].ticks), (Some(1), 3));
    assert_eq!(rounds[0].mean_ns, 30_000);
    assert_eq!(
        rounds[0].category_mean_ns[Category::Gameplay.index()],
        10_000
    );
    let m = &w.metrics.round_frame;
    assert_eq!(m[FRAME_SLOT].count(), 1);
    assert_eq!(m[FRAME_SLOT].sum_ns(), 30_000);
    assert_eq!(m[Category::Network.index()].sum_ns(), 20_000);
    w.publish();
    let cost = admin.with_status(|s| s.matches[0].cost.clone());
    assert_eq!(cost.rounds, rounds);
    let current = cost.current.unwrap();
    assert_eq!(
        (current.round, current.ticks, current.mean_ns),
        (Some(2), 2, 60_000)
    );
    assert_eq!(cost.whole.ticks, 5);
    assert_eq!(cost.budgets, *w.hosted[0].history.budgets());
    // Published again, the entry is rewritten in place.
    record(&mut w, &[(Some(3), frame(10_000))]);
    w.publish();
    let cost = admin.with_status(|s| s.matches[0].cost.clone());
    assert_eq!(cost.rounds.len(), 2);
    assert_eq!(cost.current.unwrap().round, Some(3));
}

/// Runs `w`'s frames until its first match has ended; returns the frames run.
fn play_first_match(w: &mut Worker) -> u32 {
    for frames in 1..=1000 {
        let f = w.frame(Instant::now());
        w.after_frame(&f, false);
        if w.retired.matches_finished > 0 {
            return frames;
        }
    }
    panic!("the match ended");
}

#[test]
fn the_result_line_carries_the_match_and_each_round_and_still_verifies() {
    let dir = std::env::temp_dir().join(format!("tickforge-history-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rounds.log");
    let _ = std::fs::remove_file(&path);
    let mut w = worker(
        serde_json::json!({"ticks": 10, "round_ticks": 4}),
        Some(path.clone()),
    );
    assert_eq!(play_first_match(&mut w), 10, "a tick a frame");
    // The history starts again with the next match; the metrics counted three rounds.
    assert_eq!(w.hosted[0].history.whole().ticks, 0);
    assert_eq!(w.metrics.round_frame[FRAME_SLOT].count(), 3);
    let violations = w.metrics.budget_violations;
    let p = w.persister.as_mut().unwrap();
    p.start();
    p.hand_over();
    p.finish();
    let text = std::fs::read_to_string(&path).unwrap();
    let framed = result_line::decode(text.lines().next().unwrap()).unwrap();
    assert_eq!(framed.version, result_line::COST_VERSION);
    let walk = tickforge_testkit::game::WalkResult::parse(framed.body).unwrap();
    assert_eq!(walk.ticks, 10, "the game's body reads as before");
    let cost = Cost::parse(framed.cost.unwrap()).unwrap();
    assert_eq!(cost.whole.ticks, 10);
    let rounds: Vec<_> = cost.rounds.iter().map(|r| (r.round, r.ticks)).collect();
    assert_eq!(rounds, [(Some(1), 4), (Some(2), 4), (Some(3), 2)]);
    assert_eq!(
        cost.whole.violations, violations,
        "every frame of it, counted once"
    );
    for r in cost.rounds.iter().chain([&cost.whole]) {
        // Means of sums: the categories add up to the frame, but for rounding down.
        let categories: u64 = r.category_mean_ns.iter().sum();
        assert!(
            categories <= r.mean_ns && r.mean_ns <= categories + 10,
            "{r:?}"
        );
        assert!(r.p99_ns > 0, "{r:?}");
    }
}
