//! The server side through its public API, read back with a [`Replica`]: sharing of
//! encodings, relevancy (grid, hysteresis, fog, own entity), budgets and starvation,
//! full states and gone records.

mod common;

use common::{
    assert_view, config_small, running, viewer_of, EntityState, Push, Shown, Vec3, SCHEMA,
};
use tickforge_replication::{
    NetId, RateByDistance, Replica, ReplicaConfig, ReplicationConfig, Replicator, Viewer, WriteInfo,
};

const ORIGIN: Vec3 = Vec3::new(0.0, 0.0, 0.0);

fn at(x: f32, y: f32) -> EntityState {
    EntityState {
        position: Vec3::new(x, y, 0.0),
        ..EntityState::default()
    }
}

/// Writes connection `c`'s snapshot, reads it into `replica`, and acks it.
fn exchange(
    r: &mut Replicator,
    c: usize,
    viewer: &Viewer,
    visible: Option<&[u64]>,
    replica: &mut Replica,
) -> WriteInfo {
    let mut body = Vec::new();
    let info = r.write(c, viewer, visible, 1400, &mut body);
    let read = replica
        .read(&body)
        .expect("a snapshot the server wrote reads");
    assert_eq!((read.states, read.gone), (info.states, info.gone));
    r.on_ack(c, r.tick());
    info
}

#[test]
fn connections_with_the_same_baseline_share_byte_identical_encodings() {
    let mut r = Replicator::new(config_small(), &SCHEMA);
    let n = 10u16;
    let viewer = Viewer::default();
    for c in 0..3 {
        r.connect(c, None);
    }
    let mut bodies = [Vec::new(), Vec::new(), Vec::new()];
    for t in 0..20u32 {
        r.begin_tick(t);
        for i in 0..n {
            r.push(NetId(i), &running(usize::from(i), t, ORIGIN, 20.0));
        }
        let before = r.stats();
        for (c, body) in bodies.iter_mut().enumerate() {
            body.clear();
            r.write(c, &viewer, None, 1400, body);
        }
        let after = r.stats();
        assert_eq!(bodies[0], bodies[1], "tick {t}: same acks, same bytes");
        let misses = after.cache_misses - before.cache_misses;
        let hits = after.cache_hits - before.cache_hits;
        // Connection 2 acked tick 4k: from 4k + 2 on the others acked newer ticks.
        if t >= 2 && t % 4 != 1 {
            assert_ne!(bodies[0], bodies[2], "tick {t}");
            assert_eq!((misses, hits), (2 * u64::from(n), u64::from(n)), "tick {t}");
        } else {
            assert_eq!((misses, hits), (u64::from(n), 2 * u64::from(n)), "tick {t}");
        }
        r.on_ack(0, t);
        r.on_ack(1, t);
        if t % 4 == 0 {
            r.on_ack(2, t);
        }
    }
    let s = r.stats();
    assert_eq!(s.full_records, 3 * u64::from(n), "full states on join only");
    // 2 of 3 connections always share; the third 1 tick in 4.
    assert!(s.cache_hit_rate() > 0.4, "{s:?}");
}

#[test]
fn an_entity_leaving_range_stays_for_the_hysteresis_then_is_gone_until_acked() {
    let config = ReplicationConfig {
        relevant_radius_m: 50.0,
        hysteresis_ticks: 10,
        ..config_small()
    };
    let mut r = Replicator::new(config, &SCHEMA);
    let mut replica = Replica::new(ReplicaConfig::matching(&config), &SCHEMA);
    r.connect(0, None);
    let viewer = Viewer::default();
    for t in 0..5 {
        r.begin_tick(t);
        r.push(NetId(1), &at(10.0, 0.0));
        exchange(&mut r, 0, &viewer, None, &mut replica);
    }
    // In range last at tick 4: relevant through tick 14.
    for t in 5..=14 {
        r.begin_tick(t);
        let s = at(80.0 + t as f32, 0.0);
        r.push(NetId(1), &s);
        exchange(&mut r, 0, &viewer, None, &mut replica);
        assert!(r.is_relevant(0, NetId(1)), "tick {t}");
        assert_view(
            &replica,
            &[(NetId(1), s)],
            "still sent while within the hysteresis",
        );
    }
    let mut body = Vec::new();
    for t in 15..=17 {
        r.begin_tick(t);
        body.clear();
        let info = r.write(0, &viewer, None, 1400, &mut body);
        assert_eq!(
            (info.states, info.gone),
            (0, 1),
            "tick {t}: gone until a gone is acked"
        );
        replica.read(&body).unwrap();
        assert!(replica.state(NetId(1)).is_none());
    }
    r.on_ack(0, 16);
    r.begin_tick(18);
    body.clear();
    let info = r.write(0, &viewer, None, 1400, &mut body);
    assert_eq!((info.states, info.gone), (0, 0));
    assert!(!r.is_relevant(0, NetId(1)));
}

#[test]
fn far_entities_wait_for_their_distance_tick_and_newcomers_do_not() {
    // Every tick within 10 m, every 2nd within 20 m, every 4th past that (the slowest).
    let config = ReplicationConfig {
        rate_by_distance: RateByDistance {
            halve_every_m: 10.0,
            slowest_every_ticks: 4,
        },
        ..config_small()
    };
    let mut r = Replicator::new(config, &SCHEMA);
    let mut replica = Replica::new(ReplicaConfig::matching(&config), &SCHEMA);
    r.connect(0, Some(NetId(0)));
    let viewer = Viewer::default();
    // (id, metres from the viewer); 0 is the viewer's own entity, 5 arrives at tick 6.
    let placed = [(0u16, 45.0f32), (1, 5.0), (2, 15.0), (3, 25.0), (4, 45.0)];
    let mut body = Vec::new();
    for t in 0..24u32 {
        r.begin_tick(t);
        // A step a tick, so that every record has something to say.
        let step = 0.01 * t as f32;
        for (id, d) in placed {
            r.push(NetId(id), &at(d + step, 0.0));
        }
        if t >= 6 {
            r.push(NetId(5), &at(0.0, 25.0 + step));
        }
        body.clear();
        let info = r.write(0, &viewer, None, 1400, &mut body);
        replica.read(&body).expect("reads");
        let sent: Vec<u16> = replica
            .last_read()
            .filter_map(|(id, q)| q.map(|_| id.0))
            .collect();
        // An entity's ticks are those where the tick plus its id is a multiple of its
        // wait; everything goes on the first tick (new to the client), and so does 5 on
        // its first (tick 6, though 6 + 5 is odd).
        let due = |id: u32, every: u32| t == 0 || (t + id).is_multiple_of(every);
        let mut want = vec![0, 1];
        want.extend(due(2, 2).then_some(2));
        want.extend(due(3, 4).then_some(3));
        want.extend(due(4, 4).then_some(4));
        want.extend((t == 6 || (t > 6 && due(5, 4))).then_some(5));
        assert_eq!(sent, want, "tick {t}");
        let relevant = if t >= 6 { 6 } else { 5 };
        assert_eq!(
            (info.deferred, usize::from(info.waiting)),
            (0, relevant - want.len()),
            "tick {t}: nothing left out for room, the rest waits"
        );
        r.on_ack(0, t);
    }
    let s = r.stats();
    assert_eq!(s.deferred, 0);
    assert_eq!(
        s.worst_staleness_ticks, 3,
        "the slowest waits 3 ticks between sends"
    );
}

#[test]
fn fog_hides_an_entity_with_a_gone_record_and_never_its_state_after() {
    let config = config_small();
    let mut r = Replicator::new(config, &SCHEMA);
    let mut replica = Replica::new(ReplicaConfig::matching(&config), &SCHEMA);
    r.connect(0, None);
    let viewer = Viewer::default();
    let all = [u64::MAX];
    let hidden = [!(1u64 << 2)];
    for t in 0..40 {
        r.begin_tick(t);
        for i in 0..4 {
            r.push(NetId(i), &running(usize::from(i), t, ORIGIN, 10.0));
        }
        let row: &[u64] = if t < 5 { &all } else { &hidden };
        let info = exchange(&mut r, 0, &viewer, Some(row), &mut replica);
        if t == 5 {
            assert_eq!((info.states, info.gone), (3, 1));
        }
        if t >= 5 {
            assert!(replica.state(NetId(2)).is_none(), "tick {t}");
            assert_eq!(
                replica.entity_tick(NetId(2)),
                Some(5),
                "no record of 2 after its acked gone"
            );
            assert_eq!(replica.entities().count(), 3);
        }
    }
    // A row too short to hold a bit hides the entity too.
    r.begin_tick(40);
    let mut body = Vec::new();
    let info = r.write(0, &viewer, Some(&[]), 1400, &mut body);
    assert_eq!((info.states, info.gone), (0, 3));
}

#[test]
fn the_grid_never_considers_far_entities() {
    // Enough entities that scanning them all would cost more than the query.
    let config = ReplicationConfig {
        max_entities: 4096,
        max_connections: 2,
        ..ReplicationConfig::default()
    };
    let mut r = Replicator::new(config, &SCHEMA);
    r.connect(0, None);
    r.begin_tick(0);
    for i in 0..20u16 {
        r.push(NetId(i), &at(f32::from(i) * 4.0, -30.0));
    }
    for i in 20..4096u16 {
        r.push(
            NetId(i),
            &at(5_000.0 + f32::from(i) * 3.0, f32::from(i % 7) * 500.0),
        );
    }
    let mut body = Vec::new();
    let info = r.write(0, &Viewer::default(), None, 1400, &mut body);
    assert_eq!(info.states, 20);
    assert_eq!(
        r.stats().grid_candidates,
        20,
        "only the cells around the viewer"
    );
    assert_eq!(r.stats().scanned_words, 0);
    assert!(!r.is_relevant(0, NetId(500)));
}

#[test]
fn a_crowd_is_scanned_rather_than_queried() {
    // 1,000 entities within 40 m: the query's cells would hold all of them. Every write
    // weighs (a planned one would find the range as the last write left it).
    let config = ReplicationConfig {
        max_entities: 1000,
        max_connections: 2,
        plan_ahead: false,
        ..ReplicationConfig::default()
    };
    let mut r = Replicator::new(config, &SCHEMA);
    r.connect(0, None);
    for tick in 0..2 {
        r.begin_tick(tick);
        for i in 0..1000u16 {
            r.push(NetId(i), &at(f32::from(i % 40), f32::from(i / 40)));
        }
        let mut body = Vec::new();
        r.write(0, &Viewer::default(), None, 1400, &mut body);
    }
    let s = r.stats();
    assert_eq!((s.grid_candidates, s.scanned_words), (0, 2 * 16));
    assert_eq!(s.relevant, 2 * 1000, "every one in range, both ticks");
}

#[test]
fn the_own_entity_is_relevant_out_of_range_and_through_fog() {
    let config = config_small();
    let mut r = Replicator::new(config, &SCHEMA);
    let mut replica = Replica::new(ReplicaConfig::matching(&config), &SCHEMA);
    r.connect(0, Some(NetId(7)));
    for t in 0..3 {
        r.begin_tick(t);
        let own = at(1_000.0, 1_000.0);
        r.push(NetId(7), &own);
        r.push(NetId(8), &at(1_001.0, 1_000.0));
        // The viewer is elsewhere (a spectator camera, say) and its own bit is clear.
        exchange(&mut r, 0, &Viewer::default(), Some(&[0]), &mut replica);
        assert_view(&replica, &[(NetId(7), own)], "own entity only");
    }
}

#[test]
fn full_states_on_join_when_the_baseline_leaves_the_ring_and_after_reconnect() {
    let config = ReplicationConfig {
        ring_ticks: 8,
        ..config_small()
    };
    let mut r = Replicator::new(config, &SCHEMA);
    let mut replica = Replica::new(ReplicaConfig::matching(&config), &SCHEMA);
    r.connect(0, None);
    let viewer = Viewer::default();
    let mut body = Vec::new();
    let mut fulls = Vec::new();
    for t in 0..12 {
        r.begin_tick(t);
        r.push(NetId(0), &running(0, t, ORIGIN, 5.0));
        body.clear();
        let info = r.write(0, &viewer, None, 1400, &mut body);
        replica.read(&body).unwrap();
        fulls.push(info.full);
        if t == 0 {
            r.on_ack(0, 0);
        }
    }
    // Acked at 0; deltas against it until it is 8 ticks old.
    assert_eq!(fulls, [1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]);
    r.connect(0, None);
    replica.reset();
    r.begin_tick(12);
    body.clear();
    assert_eq!(r.write(0, &viewer, None, 1400, &mut body).full, 1);
    replica.read(&body).unwrap();
    assert_view(
        &replica,
        &[(NetId(0), running(0, 11, ORIGIN, 5.0))],
        "after reconnect",
    );
}

#[test]
fn a_removed_entity_is_gone_and_its_id_reusable() {
    let config = config_small();
    let mut r = Replicator::new(config, &SCHEMA);
    let mut replica = Replica::new(ReplicaConfig::matching(&config), &SCHEMA);
    r.connect(0, None);
    let viewer = Viewer::default();
    for t in 0..4 {
        r.begin_tick(t);
        r.push(NetId(3), &running(3, t, ORIGIN, 5.0));
        exchange(&mut r, 0, &viewer, None, &mut replica);
    }
    r.begin_tick(4);
    r.remove_entity(NetId(3));
    assert_eq!(exchange(&mut r, 0, &viewer, None, &mut replica).gone, 1);
    assert!(replica.state(NetId(3)).is_none());
    r.begin_tick(5);
    let newcomer = at(-3.0, 2.0);
    r.push(NetId(3), &newcomer);
    exchange(&mut r, 0, &viewer, None, &mut replica);
    assert_view(&replica, &[(NetId(3), newcomer)], "the id's new entity");
}

#[test]
fn a_state_set_after_the_first_write_waits_for_the_next_tick() {
    let config = config_small();
    let mut r = Replicator::new(config, &SCHEMA);
    let mut replicas = [
        Replica::new(ReplicaConfig::matching(&config), &SCHEMA),
        Replica::new(ReplicaConfig::matching(&config), &SCHEMA),
    ];
    r.connect(0, None);
    r.connect(1, None);
    let viewer = Viewer::default();
    let (a, b) = (at(1.0, 1.0), at(2.0, 2.0));
    r.begin_tick(0);
    r.push(NetId(0), &a);
    exchange(&mut r, 0, &viewer, None, &mut replicas[0]);
    r.push(NetId(0), &b);
    exchange(&mut r, 1, &viewer, None, &mut replicas[1]);
    assert_view(
        &replicas[1],
        &[(NetId(0), a)],
        "this tick's state is the first write's",
    );
    r.begin_tick(1);
    for (c, replica) in replicas.iter_mut().enumerate() {
        exchange(&mut r, c, &viewer, None, replica);
        assert_view(replica, &[(NetId(0), b)], "next tick");
    }
}

#[test]
fn with_room_for_a_third_every_entity_still_goes_out_every_few_ticks() {
    let config = config_small();
    let mut r = Replicator::new(config, &SCHEMA);
    let mut replica = Replica::new(ReplicaConfig::matching(&config), &SCHEMA);
    r.connect(0, Some(NetId(0)));
    let n = 30u16;
    let mut body = Vec::new();
    let states =
        |t: u32| (0..n).map(move |i| running(usize::from(i), t, ORIGIN, 5.0 + f32::from(i) * 4.0));
    // A sixth of what every entity costs in full: about a third of them fit in a packet
    // once deltas are against the older baselines a tight budget leads to (asserted below).
    let mut everything = 0;
    for t in 0..8 {
        r.begin_tick(t);
        for (i, s) in states(t).enumerate() {
            r.push(NetId(i as u16), &s);
        }
        body.clear();
        let info = r.write(
            0,
            &viewer_of(&states(t).next().unwrap()),
            None,
            1400,
            &mut body,
        );
        if t == 0 {
            assert_eq!(info.full, n);
            everything = info.bytes;
        }
        replica.read(&body).unwrap();
        r.on_ack(0, t);
    }
    let budget = everything / 6;
    let mut last_seen = vec![7u32; usize::from(n)];
    let mut worst_gap = 0;
    let mut sent = 0u64;
    let mut most = 0u16;
    let mut deferred = 0u64;
    let mut bound = 0u32;
    let mut gaps = vec![0u32; usize::from(n)];
    let before = r.stats();
    let mut acks = std::collections::VecDeque::new();
    for t in 8..400 {
        r.begin_tick(t);
        for (i, s) in states(t).enumerate() {
            r.push(NetId(i as u16), &s);
        }
        while acks.front().is_some_and(|&(due, _)| due <= t) {
            r.on_ack(0, acks.pop_front().unwrap().1);
        }
        body.clear();
        let info = r.write(
            0,
            &viewer_of(&states(t).next().unwrap()),
            None,
            budget,
            &mut body,
        );
        assert!(info.bytes <= budget);
        bound += u32::from(info.deferred > 0);
        sent += u64::from(info.states);
        most = most.max(info.states);
        deferred += u64::from(info.deferred);
        replica.read(&body).unwrap();
        acks.push_back((t + 3, t));
        for (i, seen) in last_seen.iter_mut().enumerate() {
            if replica.entity_tick(NetId(i as u16)) == Some(t) {
                worst_gap = worst_gap.max(t - *seen);
                gaps[i] = gaps[i].max(t - *seen);
                *seen = t;
            }
        }
    }
    let s = r.stats();
    let per_tick = sent as f64 / 392.0;
    assert!(
        (8.0..=14.0).contains(&per_tick),
        "{per_tick:.1} of {n} sent per tick"
    );
    assert!(bound > 350, "the budget binds: {bound} ticks of 392");
    assert!(
        worst_gap <= 10,
        "an entity went {worst_gap} ticks unsent: {gaps:?}"
    );
    assert!(s.worst_staleness_ticks <= 10, "{s:?}");
    assert!(
        s.worst_staleness_ticks + 1 >= worst_gap,
        "staleness stat {} vs gap {worst_gap}",
        s.worst_staleness_ticks
    );
    assert!(last_seen.iter().all(|&t| t + 10 >= 399), "{last_seen:?}");
    // What the report says per snapshot: every entity relevant in every write, the most
    // states one snapshot carried, and how stale the deferred ones ran (at least a tick,
    // at most the worst).
    assert_eq!(s.relevant - before.relevant, 392 * u64::from(n));
    assert_eq!(s.max_states_per_snapshot, u32::from(most.max(n)));
    assert_eq!(s.deferred - before.deferred, deferred);
    let mean =
        (s.deferred_staleness_ticks - before.deferred_staleness_ticks) as f64 / deferred as f64;
    assert!(
        (1.0..=f64::from(s.worst_staleness_ticks)).contains(&mean),
        "mean staleness of the deferred {mean:.2}, worst {}",
        s.worst_staleness_ticks
    );
}

#[test]
fn the_rate_bucket_holds_each_second_to_bytes_per_second() {
    let bytes_per_second = 12_800;
    let config = ReplicationConfig {
        bytes_per_second,
        burst_ticks: 4,
        ..config_small()
    };
    let mut r = Replicator::new(config, &SCHEMA);
    r.connect(0, None);
    let mut per_tick = Vec::new();
    let mut body = Vec::new();
    for t in 0..512 {
        r.begin_tick(t);
        for i in 0..30u16 {
            r.push(NetId(i), &running(usize::from(i), t, ORIGIN, 30.0));
        }
        body.clear();
        per_tick.push(r.write(0, &Viewer::default(), None, 1400, &mut body).bytes);
        if t % 2 == 0 {
            r.on_ack(0, t);
        }
    }
    let burst = 4 * bytes_per_second as usize / 128;
    for (start, second) in per_tick.windows(128).enumerate() {
        let sent: usize = second.iter().sum();
        assert!(
            sent <= bytes_per_second as usize + burst,
            "ticks {start}..: {sent} bytes"
        );
        assert!(
            sent * 10 >= bytes_per_second as usize * 9,
            "ticks {start}..: only {sent} bytes"
        );
    }
    assert!(r.stats().rate_limited > 400);
}

/// The crowd of the tests below: entities running circles of 5 to 39 m about the origin,
/// more than a packet of 1,200 bytes holds.
const CROWD: u16 = 700;

fn crowd_state(i: u16, t: u32) -> EntityState {
    running(usize::from(i), t, ORIGIN, 5.0 + f32::from(i % 35))
}

/// Starts tick `t` with every entity of the crowd where it runs then.
fn push_crowd(r: &mut Replicator, t: u32) {
    r.begin_tick(t);
    for i in 0..CROWD {
        r.push(NetId(i), &crowd_state(i, t));
    }
}

/// A crowd's server with connection 0 playing entity 0 (plans on), and that client's replica.
fn one_crowd_client() -> (Replicator, Replica) {
    let config = crowd_config(1, true);
    let mut r = Replicator::new(config, &SCHEMA);
    r.connect(0, Some(NetId(0)));
    (r, Replica::new(ReplicaConfig::matching(&config), &SCHEMA))
}

fn crowd_config(connections: usize, plan_ahead: bool) -> ReplicationConfig {
    ReplicationConfig {
        max_entities: usize::from(CROWD),
        max_connections: connections,
        plan_ahead,
        ..ReplicationConfig::default()
    }
}

/// More relevant entities than a packet could hold even at their smallest (the crowd): the
/// writer encodes them in priority order until the packet is full. Every snapshot stays in
/// its budget and reads back; each write accounts for every
/// relevant entity (sent or deferred); and priority grows with waiting, so every entity
/// still goes out within a few ticks.
#[test]
fn a_crowd_past_a_packets_worth_stays_in_budget_and_everyone_still_goes_out() {
    let n = CROWD;
    let (mut r, mut replica) = one_crowd_client();
    let budget = 1200;
    assert!(
        usize::from(n) * 2 > budget,
        "the crowd's path, not the sort"
    );
    let state = crowd_state;
    let mut last_sent = vec![None::<u32>; usize::from(n)];
    let mut body = Vec::new();
    for t in 0..120u32 {
        push_crowd(&mut r, t);
        body.clear();
        let before = r.stats();
        let info = r.write(0, &viewer_of(&state(0, t)), None, budget, &mut body);
        let after = r.stats();
        assert!(info.bytes <= budget, "tick {t}: {} bytes", info.bytes);
        assert!(info.states > 0 && info.deferred > 0, "tick {t}: {info:?}");
        assert_eq!(
            u64::from(info.states) + u64::from(info.deferred),
            after.relevant - before.relevant,
            "tick {t}: every relevant entity sent or deferred"
        );
        let read = replica.read(&body).expect("a crowd's snapshot reads");
        assert_eq!(read.states, info.states);
        for i in 0..n {
            if replica.entity_tick(NetId(i)) == Some(t) {
                last_sent[usize::from(i)] = Some(t);
            }
        }
        r.on_ack(0, t);
    }
    // Priority grows with waiting: nobody starves, at ~100 of 700 a tick.
    let s = r.stats();
    assert!(
        last_sent.iter().all(|t| t.is_some_and(|t| t + 20 >= 119)),
        "{last_sent:?}"
    );
    assert!(s.worst_staleness_ticks <= 20, "{s:?}");
    // The deferred had waited a tick or more, never more than the worst.
    let mean = s.deferred_staleness_ticks as f64 / s.deferred as f64;
    assert!(
        (1.0..=f64::from(s.worst_staleness_ticks)).contains(&mean),
        "{mean}"
    );
}

/// A crowd of 700 for two connections, packets of 1,200 bytes: what each write of tick `t`
/// shows in the stats, as (planned writes, words scanned for the range).
fn crowd_of_700(plan_ahead: bool, ticks: u32) -> Vec<(u64, u64)> {
    let mut r = Replicator::new(crowd_config(2, plan_ahead), &SCHEMA);
    r.connect(0, Some(NetId(0)));
    r.connect(1, Some(NetId(1)));
    let mut body = Vec::new();
    let mut per_tick = Vec::new();
    for t in 0..ticks {
        push_crowd(&mut r, t);
        let before = r.stats();
        for c in 0..2 {
            body.clear();
            let info = r.write(
                c,
                &viewer_of(&crowd_state(c as u16, t)),
                None,
                1200,
                &mut body,
            );
            assert!(info.deferred > 0, "tick {t}: a crowd");
            r.on_ack(c, t);
        }
        let after = r.stats();
        per_tick.push((
            after.planned - before.planned,
            after.scanned_words - before.scanned_words,
        ));
    }
    per_tick
}

#[test]
fn a_crowded_connection_weighs_every_other_write_and_the_connections_take_turns() {
    // 700 entities are 11 words. From the second tick on, each tick one of the two
    // connections weighs (and scans) and the other takes its plan.
    let planned = crowd_of_700(true, 40);
    assert_eq!(planned[0], (0, 22), "the first writes weigh");
    for (t, &tick) in planned.iter().enumerate().skip(2) {
        assert_eq!(tick, (1, 11), "tick {t}");
    }
    // Without plans every write weighs.
    for (t, &tick) in crowd_of_700(false, 10).iter().enumerate() {
        assert_eq!(tick, (0, 22), "tick {t}");
    }
}

#[test]
fn a_planned_write_sends_nothing_fog_now_hides_nor_what_left_the_match() {
    let n = CROWD;
    let (mut r, mut replica) = one_crowd_client();
    let state = crowd_state;
    let all = [u64::MAX; 11];
    // Entities 1..=20 only: not the own entity, 0, nor 30.
    let mut few = [0u64; 11];
    few[0] = 0x1f_fffe;
    let (planned_tick, left) = (11u32, NetId(30));
    for t in 0..=planned_tick + 1 {
        r.begin_tick(t);
        for i in 0..n {
            if !(t >= planned_tick && NetId(i) == left) {
                r.push(NetId(i), &state(i, t));
            }
        }
        if t == planned_tick {
            r.remove_entity(left);
        }
        if t == planned_tick {
            assert!(
                replica.state(left).is_some(),
                "the entity that leaves was sent before it did"
            );
        }
        let row: &[u64] = if t == planned_tick { &few } else { &all };
        let before = r.stats().planned;
        exchange(&mut r, 0, &viewer_of(&state(0, t)), Some(row), &mut replica);
        let planned = r.stats().planned - before;
        if t == planned_tick {
            assert_eq!(planned, 1, "tick {t} is a planned write");
            let sent: Vec<u16> = (0..n)
                .filter(|&i| replica.entity_tick(NetId(i)) == Some(t))
                .collect();
            assert!(sent.len() > 1, "{sent:?}");
            assert!(
                sent.iter().all(|&i| i <= 20),
                "only the own entity and those still seen: {sent:?}"
            );
            assert!(
                sent.contains(&0),
                "the own entity goes through fog: {sent:?}"
            );
        }
    }
    // The weighed write after it sends the gone record of the entity that left.
    assert!(replica.state(left).is_none());
}
