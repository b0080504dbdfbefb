//! Replication cost: one server tick of a match (begin_tick, set_entity for every entity,
//! the acks the transport reports, write for every connection), acks two ticks late so
//! deltas flow; and a client decoding one snapshot of it.
//!
//! - 100 entities for 100 connections that all see each other;
//! - the crowd: 100, 300 and 1,000 entities for as many connections, all within 20 m of
//!   each other (every one relevant to every client, more than a packet holds), with the
//!   growth from 100 to 1,000 printed as an exponent;
//! - the server's 10-player match on the 60 × 40 m arena: 10 entities, 10 connections,
//!   fog rows hiding some of the others, one ack in 16 lost; and 40 such matches ticked in
//!   turn, as one worker core hosts them, so each match's tables are cold in the cache.
//!
//! With `TICKFORGE_REPLICATE_TICKS=N` in the environment the binary skips criterion and,
//! after 256 warm ticks, runs `N` ticks of one arena match (`measured_one_match`), `N / 40`
//! rounds of the 40 (`measured_forty_matches`) and `N / 10` ticks of the 100 × 100 match
//! (`measured_hundred`), for instruction counts:
//!
//! ```text
//! TICKFORGE_REPLICATE_TICKS=1000 valgrind --tool=callgrind --toggle-collect='*measured_*' \
//!     target/release/deps/replicate-HASH
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use tickforge_replication::{
    NetId, RateByDistance, Replica, ReplicaConfig, ReplicationConfig, Replicator, Viewer,
};

// The shooter-like state and schema the tests use: the bench measures the shooter's table.
#[path = "../tests/common/mod.rs"]
mod common;
use common::{EntityState, Push, Vec3, SCHEMA};

/// Ticks of precomputed states each bench cycles through.
const TICKS: u32 = 512;
const ACK_DELAY: u32 = 2;

/// Entity `i` of `n` at `t`: running around a circle of `radius_m`, turning.
fn state(i: usize, n: usize, t: u32, radius_m: f32) -> EntityState {
    let phase = i as f32 * 6.3 / n as f32 + t as f32 * 7.0 / 128.0 / radius_m;
    running(radius_m, phase, t)
}

/// Player `i` at `t` (30 Hz) on a disc of `radius_m`: each runs a circle of its own
/// radius round the centre, the players spread evenly over the disc's area.
fn disc_state(i: usize, t: u32, radius_m: f32) -> EntityState {
    let r = radius_m * ((i as f32 * 0.618_034).fract() * 0.98 + 0.02).sqrt();
    running(r, i as f32 * 2.399_963 + t as f32 * 7.0 / 30.0 / r, t)
}

/// Running at 7 m/s round a circle of `r` about the origin, at angle `phase`, facing
/// along it.
fn running(r: f32, phase: f32, t: u32) -> EntityState {
    let (s, c) = phase.sin_cos();
    EntityState {
        position: Vec3::new(r * c, r * s, 0.0),
        velocity: Vec3::new(-7.0 * s, 7.0 * c, 0.0),
        yaw: (phase * 65536.0 / std::f32::consts::TAU) as u32 as u16,
        pitch: (t % 200) as i16 * 4,
        flags: 5,
        health: 100,
        weapon: 30,
    }
}

/// One match's replicator and what drives it.
struct Match {
    r: Replicator,
    n: usize,
    states: Vec<Vec<EntityState>>,
    /// Per tick and connection, the fog row (`None`: all visible).
    fog: Option<Vec<Vec<[u64; 2]>>>,
    outs: Vec<Vec<u8>>,
    tick: u32,
    /// Every `ack_loss_every`th ack is lost (0: none).
    ack_loss_every: usize,
    /// Per fog phase (64 ticks each) and connection, a fog row of any width: the fight's.
    wide_fog: Option<Vec<Vec<Vec<u64>>>>,
    /// Room for each snapshot, bytes: the fight's reliable events leave about 560.
    budget: usize,
}

impl Match {
    /// `n` entities, each one connection's player, on a circle of `radius_m`.
    fn new(n: usize, max_entities: usize, radius_m: f32) -> Match {
        let config = ReplicationConfig {
            max_entities,
            max_connections: n,
            ..ReplicationConfig::default()
        };
        let mut r = Replicator::new(config, &SCHEMA);
        for c in 0..n {
            r.connect(c, Some(NetId(c as u16)));
        }
        Match {
            r,
            n,
            states: (0..TICKS)
                .map(|t| (0..n).map(|i| state(i, n, t, radius_m)).collect())
                .collect(),
            fog: None,
            outs: (0..n).map(|_| Vec::with_capacity(1500)).collect(),
            tick: 0,
            ack_loss_every: 0,
            budget: 1200,
            wide_fog: None,
        }
    }

    /// The 1,000-player fight's shape at 30 Hz: `n` players spread over a disc of 320 m,
    /// two teams, each seeing its mates and a third of the enemies (changing every 64
    /// ticks), so that about 150 are relevant to each client and a packet holds ~90, one
    /// ack in 6 lost so that baselines differ between clients. Each packet has 560 B of
    /// room; `TICKFORGE_REPLICATE_FIGHT_BUDGET=B` gives it `B`, so that instructions at a
    /// few budgets part what a write costs per record sent from what it costs whatever it
    /// sends.
    fn fight(n: usize) -> Match {
        const PHASES: usize = 4;
        // The disc the players run in: 320 m by default (~143 relevant of 1,000, ~83
        // sent); `TICKFORGE_REPLICATE_FIGHT_DISC=200` crowds them about as densely as the
        // server's bench fight (~239 relevant; ~73 sent, as its records fill 560 B).
        let disc_m: f32 = std::env::var("TICKFORGE_REPLICATE_FIGHT_DISC")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(320.0);
        // `TICKFORGE_REPLICATE_FIGHT_RATE=STEP,SLOWEST`: the rate by distance
        // (`halve_every_m`, `slowest_every_ticks`); off by default.
        let (step, slowest) = std::env::var("TICKFORGE_REPLICATE_FIGHT_RATE")
            .ok()
            .and_then(|v| {
                let (a, b) = v.split_once(',')?;
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .unwrap_or((50.0, 1));
        let config = ReplicationConfig {
            max_entities: n,
            max_connections: n,
            tick_hz: 30,
            rate_by_distance: RateByDistance {
                halve_every_m: step,
                slowest_every_ticks: slowest,
            },
            // `TICKFORGE_REPLICATE_FIGHT_PLAN=0`: every write weighs (no plans).
            plan_ahead: std::env::var_os("TICKFORGE_REPLICATE_FIGHT_PLAN").is_none_or(|v| v != "0"),
            ..ReplicationConfig::default()
        };
        let mut r = Replicator::new(config, &SCHEMA);
        for c in 0..n {
            r.connect(c, Some(NetId(c as u16)));
        }
        let words = n.div_ceil(64);
        let fog = (0..PHASES)
            .map(|p| {
                (0..n)
                    .map(|c| {
                        let mut row = vec![0u64; words];
                        for e in 0..n {
                            let mate = e % 2 == c % 2;
                            let h = ((e * 2_654_435_761) ^ (c * 40_503) ^ (p * 977)) % 3;
                            if mate || h == 0 {
                                row[e / 64] |= 1 << (e % 64);
                            }
                        }
                        row
                    })
                    .collect()
            })
            .collect();
        Match {
            r,
            n,
            states: (0..TICKS)
                .map(|t| (0..n).map(|i| disc_state(i, t, disc_m)).collect())
                .collect(),
            fog: None,
            outs: (0..n).map(|_| Vec::with_capacity(1500)).collect(),
            tick: 0,
            ack_loss_every: 6,
            budget: std::env::var("TICKFORGE_REPLICATE_FIGHT_BUDGET")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(560),
            wide_fog: Some(fog),
        }
    }

    /// The server's 10-player arena match: in a 20 m circle, walls hiding a changing few.
    fn arena() -> Match {
        const N: usize = 10;
        let mut m = Match::new(N, N, 20.0);
        m.fog = Some(
            (0..TICKS)
                .map(|t| {
                    (0..N)
                        .map(|c| {
                            let mut row = [(1u64 << N) - 1, 0];
                            for e in 0..N {
                                if e != c && (e * 7 + c * 3 + t as usize / 64).is_multiple_of(5) {
                                    row[0] &= !(1 << e);
                                }
                            }
                            row
                        })
                        .collect()
                })
                .collect(),
        );
        m.ack_loss_every = 16;
        m
    }

    fn step(&mut self) -> usize {
        let t = self.tick;
        self.tick += 1;
        let at = (t % TICKS) as usize;
        // As the server does: acks as datagrams arrive, then the tick.
        if t >= ACK_DELAY {
            for c in 0..self.n {
                let lost = self.ack_loss_every != 0
                    && (t as usize + c * 5).is_multiple_of(self.ack_loss_every);
                if !lost {
                    self.r.on_ack(c, t - ACK_DELAY);
                }
            }
        }
        let states = &self.states[at];
        self.r.begin_tick(t);
        for (i, s) in states.iter().enumerate() {
            self.r.push(NetId(i as u16), s);
        }
        let mut bytes = 0;
        for (c, (out, own)) in self.outs.iter_mut().zip(states).enumerate() {
            out.clear();
            let viewer = Viewer {
                position: own.position,
                yaw: own.yaw,
            };
            let phase = (t / 64) as usize;
            let fog = match (&self.fog, &self.wide_fog) {
                (Some(f), _) => Some(&f[at][c][..]),
                (None, Some(w)) => Some(&w[phase % w.len()][c][..]),
                (None, None) => None,
            };
            bytes += self.r.write(c, &viewer, fog, self.budget, out).bytes;
        }
        bytes
    }
}

/// Matches ticked in turn, each one tick per round, as a worker hosts them.
struct Worker {
    matches: Vec<Match>,
}

impl Worker {
    fn new(matches: usize) -> Worker {
        Worker {
            matches: (0..matches).map(|_| Match::arena()).collect(),
        }
    }

    fn step(&mut self) -> usize {
        self.matches.iter_mut().map(Match::step).sum()
    }
}

/// `ticks` ticks of one match: instructions counted in `TICKFORGE_REPLICATE_TICKS` mode.
#[inline(never)]
fn measured_one_match(m: &mut Match, ticks: u32) -> usize {
    (0..ticks).map(|_| m.step()).sum()
}

/// `rounds` ticks of each of the worker's matches, in turn.
#[inline(never)]
fn measured_forty_matches(w: &mut Worker, rounds: u32) -> usize {
    (0..rounds).map(|_| w.step()).sum()
}

/// `ticks` ticks of 100 entities for 100 connections.
#[inline(never)]
fn measured_hundred(m: &mut Match, ticks: u32) -> usize {
    (0..ticks).map(|_| m.step()).sum()
}

fn report(name: &str, m: &mut Match) {
    let before = m.r.stats();
    let mut bytes = 0;
    for _ in 0..TICKS {
        bytes += m.step();
    }
    let s = m.r.stats();
    eprintln!(
        "{name}: {} B per client per tick, cache hit rate {:.3}, {} full / {} delta records",
        bytes / (TICKS as usize * m.n),
        (s.cache_hits - before.cache_hits) as f64
            / ((s.cache_hits - before.cache_hits) + (s.cache_misses - before.cache_misses)) as f64,
        s.full_records - before.full_records,
        s.delta_records - before.delta_records,
    );
}

fn replicate(c: &mut Criterion) {
    let mut m = Match::new(100, 128, 40.0);
    for _ in 0..2 * TICKS {
        m.step();
    }
    report("100 x 100", &mut m);
    c.bench_function("replicate 100 entities x 100 connections, one tick", |b| {
        b.iter(|| black_box(m.step()));
    });

    let mut m = Match::arena();
    for _ in 0..2 * TICKS {
        m.step();
    }
    report("arena 10 x 10", &mut m);
    c.bench_function(
        "replicate arena 10 entities x 10 connections, one tick",
        |b| {
            b.iter(|| black_box(m.step()));
        },
    );

    let mut w = Worker::new(40);
    for _ in 0..TICKS {
        w.step();
    }
    c.bench_function("replicate 40 arena matches in turn, one tick each", |b| {
        b.iter(|| black_box(w.step()));
    });

    // The client: connection 0's snapshots of TICKS ticks, decoded in order.
    let mut m = Match::new(100, 128, 40.0);
    let bodies: Vec<Vec<u8>> = (0..TICKS)
        .map(|_| {
            m.step();
            m.outs[0].clone()
        })
        .collect();
    let config = ReplicaConfig::matching(m.r.config());
    let mut replica = Replica::new(config, &SCHEMA);
    let mut at = 0usize;
    c.bench_function("read one snapshot of 100 entities", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                if at == bodies.len() {
                    replica.reset();
                    at = 0;
                }
                let start = Instant::now();
                black_box(replica.read(&bodies[at]).unwrap());
                spent += start.elapsed();
                at += 1;
            }
            spent
        });
    });
}

/// The crowd's replication at 100, 300 and 1,000 players, every one relevant to every
/// client: a tick's cost should grow with what is sent (a packet per client), not with the
/// pairs.
fn crowd(c: &mut Criterion) {
    let mut group = c.benchmark_group("replicate crowd");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let mut medians = Vec::new();
    for n in [100usize, 300, 1000] {
        let mut m = Match::new(n, n, 20.0);
        for _ in 0..64 {
            m.step();
        }
        let before = m.r.stats();
        group.bench_function(format!("{n} entities x {n} connections, one tick"), |b| {
            b.iter(|| black_box(m.step()));
        });
        let mut times: Vec<Duration> = (0..15)
            .map(|_| {
                let start = Instant::now();
                black_box(m.step());
                start.elapsed()
            })
            .collect();
        times.sort();
        let s = m.r.stats();
        let writes = (s.snapshots - before.snapshots).max(1) as f64;
        println!(
            "  {n}: {:.1} states sent per snapshot of {:.0} relevant, median tick {:?}",
            ((s.full_records + s.delta_records) - (before.full_records + before.delta_records))
                as f64
                / writes,
            (s.relevant - before.relevant) as f64 / writes,
            times[7]
        );
        medians.push((n, times[7]));
    }
    group.finish();
    let ((n0, t0), (n1, t1)) = (medians[0], medians[medians.len() - 1]);
    let k = (t1.as_secs_f64() / t0.as_secs_f64()).ln() / (n1 as f64 / n0 as f64).ln();
    println!("growth from {n0} to {n1} (t ∝ n^k): k = {k:.2} ({t0:?} → {t1:?})");
}

criterion_group!(benches, replicate, crowd);

fn main() {
    // `TICKFORGE_REPLICATE_CROWD=N`: 64 warm ticks then 32 of the N × N crowd, nothing else,
    // for cycle counts that a loaded host does not skew (`perf stat -e cycles:u`).
    if let Some(n) = std::env::var("TICKFORGE_REPLICATE_CROWD")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut m = Match::new(n, n, 20.0);
        for _ in 0..64 {
            m.step();
        }
        let start = Instant::now();
        let before = m.r.stats();
        let bytes: usize = (0..32).map(|_| m.step()).sum();
        let took = start.elapsed();
        let s = m.r.stats();
        let hits = s.cache_hits - before.cache_hits;
        let all = hits + s.cache_misses - before.cache_misses;
        println!(
            "32 ticks of the {n} crowd: {bytes} B in {took:?}; {:.1}% of encodings shared",
            100.0 * hits as f64 / all.max(1) as f64
        );
        return;
    }
    // `TICKFORGE_REPLICATE_FIGHT_READ=N`: the fight's N clients, as one bots process
    // holds them: each connection's snapshot read by its own replica every tick, 96 warm
    // ticks, then 64 timed (the read pass only): the median, the mean and the fastest tick.
    if let Some(n) = std::env::var("TICKFORGE_REPLICATE_FIGHT_READ")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut m = Match::fight(n);
        let mut config = ReplicaConfig::matching(m.r.config());
        if let Some(h) = std::env::var("TICKFORGE_REPLICATE_HISTORY")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            config.history_ticks = h;
        }
        let mut replicas: Vec<Replica> = (0..n).map(|_| Replica::new(config, &SCHEMA)).collect();
        let read = |m: &Match, replicas: &mut [Replica]| {
            let start = Instant::now();
            let mut states = 0usize;
            for (replica, out) in replicas.iter_mut().zip(&m.outs) {
                states += usize::from(replica.read(out).expect("every snapshot reads").states);
            }
            (start.elapsed(), states)
        };
        for _ in 0..192 {
            m.step();
            read(&m, &mut replicas);
        }
        // What interpolation asks each tick: every listed entity as of the two snapshots
        // around a render tick `TICKFORGE_REPLICATE_BEHIND` + 0.5 ticks behind (default 5:
        // a bot's aim, which shows the players past the server's next posing tick; a
        // client's interpolation is 2–3 behind), timed apart.
        let behind: u32 = std::env::var("TICKFORGE_REPLICATE_BEHIND")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5);
        // `TICKFORGE_REPLICATE_AHEAD=K`: read as a client reading ahead does (a bot's aim:
        // `READ_AHEAD` 8): each entity's first line started 2K entities before it is read,
        // its records K before ([`Replica::prefetch_entity`], [`Replica::prefetch_as_of`]).
        // 0 by default: each read cold.
        let ahead: usize = std::env::var("TICKFORGE_REPLICATE_AHEAD")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut ids = Vec::with_capacity(n);
        let mut as_of = |replicas: &[Replica]| {
            let start = Instant::now();
            let mut found = 0usize;
            for replica in replicas {
                let newest = replica.newest_tick().unwrap_or(0);
                let ticks = [
                    newest.saturating_sub(behind + 1),
                    newest.saturating_sub(behind),
                ];
                ids.clear();
                ids.extend(replica.listed());
                for (k, &id) in ids.iter().enumerate() {
                    if ahead > 0 {
                        if let Some(&far) = ids.get(k + 2 * ahead) {
                            replica.prefetch_entity(far);
                        }
                        if let Some(&near) = ids.get(k + ahead) {
                            for t in ticks {
                                replica.prefetch_as_of(near, t);
                            }
                        }
                    }
                    for t in ticks {
                        found += usize::from(replica.entity_as_of(id, t).is_some());
                    }
                }
            }
            black_box(found);
            start.elapsed()
        };
        let mut states = 0;
        let mut asked = Vec::new();
        let mut ticks: Vec<Duration> = (0..64)
            .map(|_| {
                m.step();
                let (took, s) = read(&m, &mut replicas);
                states += s;
                asked.push(as_of(&replicas));
                took
            })
            .collect();
        ticks.sort();
        asked.sort();
        println!(
            "64 ticks of the {n} fight read by {n} replicas: read median {:?} mean {:?} min {:?}; \
             {:.1} states a snapshot; every listed entity as of two past ticks ({behind} and \
             {} behind): median {:?}",
            ticks[32],
            ticks.iter().sum::<Duration>() / 64,
            ticks[0],
            states as f64 / (64 * n) as f64,
            behind + 1,
            asked[32],
        );
        return;
    }
    // `TICKFORGE_REPLICATE_FIGHT=N`: 96 warm ticks, then 64 of the shape of the fight
    // (`Match::fight`), each timed: the median and the fastest tick; and how long what a
    // write left out had gone unsent (the scheduler's fairness, beside its cost).
    if let Some(n) = std::env::var("TICKFORGE_REPLICATE_FIGHT")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut m = Match::fight(n);
        for _ in 0..96 {
            m.step();
        }
        let before = m.r.stats();
        let mut bytes = 0;
        let mut ticks: Vec<Duration> = (0..64)
            .map(|_| {
                let start = Instant::now();
                bytes += m.step();
                start.elapsed()
            })
            .collect();
        ticks.sort();
        let s = m.r.stats();
        let hits = s.cache_hits - before.cache_hits;
        let all = hits + s.cache_misses - before.cache_misses;
        let writes = (s.snapshots - before.snapshots).max(1) as f64;
        let sent =
            (s.full_records + s.delta_records) - (before.full_records + before.delta_records);
        println!(
            "64 ticks of the {n} fight: {bytes} B; tick median {:?} min {:?} max {:?}; \
             {:.1}% of encodings shared; {:.1} sent of {:.1} relevant",
            ticks[32],
            ticks[0],
            ticks[63],
            100.0 * hits as f64 / all.max(1) as f64,
            sent as f64 / writes,
            (s.relevant - before.relevant) as f64 / writes,
        );
        println!(
            "left out: {:.2} ticks since last sent on average over the timed ticks; \
             at most {} ticks over all",
            (s.deferred_staleness_ticks - before.deferred_staleness_ticks) as f64
                / (s.deferred - before.deferred).max(1) as f64,
            s.worst_staleness_ticks,
        );
        return;
    }
    if let Some(ticks) = std::env::var("TICKFORGE_REPLICATE_TICKS")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        let mut one = Match::arena();
        let mut forty = Worker::new(40);
        let mut hundred = Match::new(100, 128, 40.0);
        for _ in 0..256 {
            one.step();
            forty.step();
            hundred.step();
        }
        let one_bytes = measured_one_match(&mut one, ticks);
        let forty_bytes = measured_forty_matches(&mut forty, ticks / 40);
        let hundred_bytes = measured_hundred(&mut hundred, ticks / 10);
        println!(
            "{ticks} ticks of one arena match: {one_bytes} B; {} rounds of 40: {forty_bytes} B; \
             {} ticks of 100 x 100: {hundred_bytes} B",
            ticks / 40,
            ticks / 10
        );
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
