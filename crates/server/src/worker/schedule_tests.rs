//! A worker that falls behind its tick schedule: its ticks belong to the measured window
//! by when they started, so a late server still reports its frames, the tick rate it
//! achieved and how far behind it fell, and fails the on-time rate.
//!
//! The tests drive the worker's accounting with a simulated schedule: time is a
//! parameter, nothing sleeps.

use std::time::{Duration, Instant};

use tickforge_io::time;
use tickforge_telemetry::report::ServerReport;
use tickforge_telemetry::{Category, FrameRecord, Phase, SLOWEST_FRAMES};

use super::{DueFrame, Worker};
use crate::config::ServerConfig;

const TICK_HZ: u32 = 30;

/// A worker hosting one Walk match at 30 Hz, its window `warmup` after its start and
/// `duration` long. Its start is a minute ago; the schedule below is simulated from it.
fn worker(warmup: Duration, duration: Duration) -> Worker {
    crate::testing::register_walk();
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        matches: 1,
        tick_hz: TICK_HZ,
        warmup,
        duration: Some(duration),
        ..ServerConfig::default()
    };
    Worker::lone(config, time::now() - Duration::from_secs(60)).unwrap()
}

/// Runs match 0's ticks through the worker's accounting as a worker whose ticks each take
/// `cost` would run them, one tick a wake-up: tick `k` is due at `grid + k × period`
/// and starts at its deadline plus `wake_late`, or when the previous tick ends if that is
/// later. Stops at the first tick that would start at or after `until`; returns the last
/// tick's start and deadline.
fn run_schedule(
    w: &mut Worker,
    cost: Duration,
    wake_late: Duration,
    until: Instant,
) -> (Instant, Instant) {
    let gameplay = |_| [(Category::Gameplay, Phase::Simulate, cost)];
    run_schedule_of(w, gameplay, wake_late, until)
}

/// [`run_schedule`] with tick `k` costing what `parts(k)` charges.
fn run_schedule_of<const N: usize>(
    w: &mut Worker,
    parts: impl Fn(u32) -> [(Category, Phase, Duration); N],
    wake_late: Duration,
    until: Instant,
) -> (Instant, Instant) {
    let grid = w.hosted[0].grid;
    let period = Duration::from_nanos(1_000_000_000 / u64::from(TICK_HZ));
    let window = w.window;
    let mut free_at = grid;
    let mut last = (grid, grid);
    for k in 0u32.. {
        let deadline = grid + period * k;
        let started = (deadline + wake_late).max(free_at);
        if started >= until {
            break;
        }
        let mut record = FrameRecord::default();
        for (category, phase, d) in parts(k) {
            record.add(category, phase, d.as_nanos() as u64);
        }
        let cost = Duration::from_nanos(record.total_ns);
        w.due.clear();
        w.due.push(DueFrame {
            index: 0,
            record,
            queued: 0,
            late: started - deadline,
            deadline,
            started,
            round: None,
        });
        w.charge_send_and_record(0, &window);
        free_at = started + cost;
        last = (started, deadline);
    }
    last
}

/// The report of the worker's window, closed at its end.
fn report(w: &Worker) -> ServerReport {
    let end = w.window.end.expect("a window with a duration");
    w.figures(&w.window, end).report()
}

#[test]
fn a_worker_whose_ticks_outlast_the_period_still_has_ticks_in_the_window() {
    // 66 ms a tick at 30 Hz (33.3 ms a period): about 15 ticks a second, each one 33 ms
    // further behind. The window opens 6 s in; the ticks that start in it were due
    // about 3 to 4.5 s in, so none of their deadlines ever reach it.
    let (warmup, duration) = (Duration::from_secs(6), Duration::from_secs(3));
    let mut w = worker(warmup, duration);
    let cost = Duration::from_millis(66);
    let end = w.window.end.unwrap();
    let (last_start, last_deadline) = run_schedule(&mut w, cost, Duration::ZERO, end);
    assert!(
        last_deadline < w.window.start,
        "the last tick was due before the window opened: the case deadlines miss"
    );
    let r = report(&w);

    // Its frames are reported: one tick every 66 ms from tick 91's start at 6.006 s to
    // tick 136's at 8.976 s, 46 ticks, every one of them 66 ms.
    let frame = r.match_frame_ms.expect("frames in the window");
    assert!((frame.mean - 66.0).abs() < 1.0, "{frame:?}");
    assert_eq!(r.ticks.on_time + r.ticks.late, 46, "{:?}", r.ticks);
    assert!(!r.frame_seconds.is_empty());

    // The achieved rate: 46 ticks run of the 90 due in 3 s at 30 Hz, 15.3 a second.
    assert_eq!(r.ticks.expected, 90, "{:?}", r.ticks);
    let hz = r.schedule.achieved_tick_hz.expect("ticks were due");
    assert!((hz - 30.0 * 46.0 / 90.0).abs() < 1e-9, "{hz}");

    // The lag: how late the last tick of the window started, 8.976 s - 4.533 s.
    let lag_ms = r.schedule.lag_ms.expect("ticks ran");
    let want_ms = (last_start - last_deadline).as_secs_f64() * 1e3;
    assert!((lag_ms - want_ms).abs() < 1e-6, "{lag_ms} vs {want_ms}");
    assert!((lag_ms - 4_442.7).abs() < 0.1, "{lag_ms}");
    assert!(r.schedule.fell_behind);
    let summary = tickforge_telemetry::summary::server(&r);
    assert!(
        summary.contains("fell behind   15.3 ticks/s of 30 (51%), last tick 4.4 s late"),
        "{summary}"
    );

    // And it fails: no tick on time, the backlog it added counted as skipped.
    assert_eq!(r.ticks.on_time, 0, "{:?}", r.ticks);
    assert_eq!(r.ticks.late, 46);
    assert_eq!(r.ticks.skipped, 44);
    let on_time_rate = r.ticks.on_time as f64 / r.ticks.expected as f64;
    assert_eq!(on_time_rate, 0.0, "a rate, not n/a: every due tick counts");
}

#[test]
fn a_match_removed_while_behind_still_counts_the_ticks_due_in_the_window() {
    // The server drains when the bench ends, after the window: a match removed then was
    // due every tick of the window, though its next deadline lies long before the window.
    let (warmup, duration) = (Duration::from_secs(6), Duration::from_secs(3));
    let mut w = worker(warmup, duration);
    let end = w.window.end.unwrap();
    run_schedule(&mut w, Duration::from_millis(66), Duration::ZERO, end);
    w.stop_unplayed();
    assert!(w.matches.is_empty(), "nobody played it: removed");
    let r = report(&w);
    assert_eq!(r.ticks.expected, 90, "{:?}", r.ticks);
    assert_eq!((r.ticks.late, r.ticks.skipped), (46, 44));
    let hz = r.schedule.achieved_tick_hz.expect("ticks were due");
    assert!((hz - 30.0 * 46.0 / 90.0).abs() < 1e-9, "{hz}");
}

#[test]
fn a_worker_on_schedule_reports_its_full_rate_and_no_lag_line() {
    // 5 ms a tick, each started 0.2 ms after its deadline.
    let (warmup, duration) = (Duration::from_secs(6), Duration::from_secs(3));
    let mut w = worker(warmup, duration);
    let end = w.window.end.unwrap();
    let late = Duration::from_micros(200);
    run_schedule(&mut w, Duration::from_millis(5), late, end);
    let r = report(&w);
    assert_eq!(r.ticks.expected, 90, "{:?}", r.ticks);
    assert_eq!((r.ticks.on_time, r.ticks.late, r.ticks.skipped), (90, 0, 0));
    assert_eq!(r.schedule.achieved_tick_hz, Some(30.0));
    let lag_ms = r.schedule.lag_ms.expect("ticks ran");
    assert!((lag_ms - 0.2).abs() < 1e-6, "{lag_ms}");
    assert!(!r.schedule.fell_behind);
    let summary = tickforge_telemetry::summary::server(&r);
    assert!(!summary.contains("behind"), "{summary}");
}

#[test]
fn the_slowest_frames_of_the_window_are_reported_with_where_their_time_went() {
    // 5 ms a tick, but tick 30 (1 s in, the warm-up) takes 40 ms and ticks 190-209 (the
    // window is ticks 180-269) 10.00-10.19 ms, 7 ms of it replication.
    let (warmup, duration) = (Duration::from_secs(6), Duration::from_secs(3));
    let mut w = worker(warmup, duration);
    let end = w.window.end.unwrap();
    let ms = |v: f64| Duration::from_secs_f64(v / 1e3);
    let parts = |k: u32| {
        let (replication, rest) = match k {
            30 => (0.0, 40.0),
            190..=209 => (7.0, 3.0 + f64::from(k - 190) * 0.01),
            _ => (0.0, 5.0),
        };
        [
            (Category::Replication, Phase::Replicate, ms(replication)),
            (Category::Gameplay, Phase::Simulate, ms(rest)),
        ]
    };
    run_schedule_of(&mut w, parts, Duration::ZERO, end);
    let r = report(&w);
    let slowest = &r.slowest_frames;
    // The window's 16 slowest, slowest first: ticks 209 down to 194. The warm-up's 40 ms
    // tick is not the window's.
    assert_eq!(slowest.len(), SLOWEST_FRAMES);
    let costs: Vec<f64> = slowest.iter().map(|f| f.frame_ms).collect();
    let want: Vec<f64> = (194..=209)
        .rev()
        .map(|k| 10.0 + f64::from(k - 190) * 0.01)
        .collect();
    for (got, want) in costs.iter().zip(&want) {
        assert!((got - want).abs() < 1e-6, "{costs:?}");
    }
    let first = &slowest[0];
    let period = Duration::from_nanos(1_000_000_000 / u64::from(TICK_HZ));
    let started = w.hosted[0].grid + period * 209;
    let at_s = (started - w.window.start).as_secs_f64();
    assert!((first.at_s - at_s).abs() < 1e-6, "{} vs {at_s}", first.at_s);
    assert_eq!(first.match_id, w.matches[0].id().0);
    assert!(!first.late);
    assert_eq!(first.categories_ms.replication, Some(7.0));
    assert_eq!(first.phases_ms.replicate, Some(7.0));
    assert_eq!(first.categories_ms.fow, None, "a category it did not enter");
}
