//! Replication over a bad link, on virtual time: seeded loss, duplication, reordering and
//! lost acks, then a clean link; and a property test over any states and ack pattern.

mod common;

use common::{running, viewer_of, EntityState, Push, Rng, Shown, Vec3, SCHEMA};
use proptest::prelude::*;
use tickforge_replication::{
    NetId, RateByDistance, Replica, ReplicaConfig, ReplicationConfig, Replicator,
};

const CLIENTS: usize = 8;
const ENTITIES: u16 = 40;

/// Entity `i` at `t`: clients' players (0..8) on a 30 m circle, the others on circles
/// whose centres sweep through the 150 m radius, in and out of every client's range.
fn state(i: u16, t: u32) -> EntityState {
    let i_us = usize::from(i);
    if i_us < CLIENTS {
        return running(i_us, t, Vec3::new(0.0, 0.0, 0.0), 30.0);
    }
    let sweep = ((t as f32 / 90.0) + f32::from(i)).sin() * 260.0;
    running(i_us, t, Vec3::new(sweep, f32::from(i) * 3.0, 0.0), 10.0)
}

/// Fog: client `c` cannot see entity `e` in some 50-tick stretches.
fn fog_row(c: usize, t: u32) -> [u64; 1] {
    let mut row = u64::MAX;
    for e in 0..u32::from(ENTITIES) {
        if (e + c as u32 + t / 50).is_multiple_of(7) {
            row &= !(1u64 << e);
        }
    }
    [row]
}

/// A datagram on the way: (tick it arrives, connection, payload).
type InFlight<T> = Vec<(u32, usize, T)>;

fn run(seed: u64, rate_by_distance: RateByDistance) {
    let config = ReplicationConfig {
        max_entities: 64,
        max_connections: CLIENTS,
        rate_by_distance,
        ..ReplicationConfig::default()
    };
    let mut r = Replicator::new(config, &SCHEMA);
    let mut replicas: Vec<Replica> = (0..CLIENTS)
        .map(|_| Replica::new(ReplicaConfig::matching(&config), &SCHEMA))
        .collect();
    for c in 0..CLIENTS {
        r.connect(c, Some(NetId(c as u16)));
    }
    let mut rng = Rng(seed);
    let mut down: InFlight<Vec<u8>> = Vec::new();
    let mut up: InFlight<u32> = Vec::new();
    const LOSSY: u32 = 400;
    const END: u32 = LOSSY + 80;
    // Ticks of clean link after which every view must be exact: each entity as of its
    // last tick, within the rate by distance's slowest wait of now.
    const SETTLE: u32 = 8;
    let every = rate_by_distance.slowest_every_ticks;
    assert!(every <= SETTLE);
    for t in 0..END {
        let lossy = t < LOSSY;
        r.begin_tick(t);
        for i in 0..ENTITIES {
            // Entity 30 leaves the match for a while; its id comes back as a new entity.
            if i == 30 && (150..250).contains(&t) {
                if t == 150 {
                    r.remove_entity(NetId(i));
                }
                continue;
            }
            r.push(NetId(i), &state(i, t));
        }
        up.retain(|&(at, c, tick)| {
            if at <= t {
                r.on_ack(c, tick);
            }
            at > t
        });
        for c in 0..CLIENTS {
            let mut body = Vec::with_capacity(1400);
            let own = state(c as u16, t);
            r.write(c, &viewer_of(&own), Some(&fog_row(c, t)), 1400, &mut body);
            if !lossy {
                down.push((t, c, body));
                continue;
            }
            if rng.chance(0.2) {
                continue;
            }
            if rng.chance(0.1) {
                down.push((t + rng.below(6) as u32, c, body.clone()));
            }
            down.push((t + rng.below(4) as u32, c, body));
        }
        // Deliver in arrival order; same-tick arrivals in the order they were queued.
        let mut i = 0;
        while i < down.len() {
            if down[i].0 > t {
                i += 1;
                continue;
            }
            let (_, c, body) = down.remove(i);
            let info = replicas[c]
                .read(&body)
                .unwrap_or_else(|e| panic!("seed {seed} tick {t} client {c}: {e}"));
            if !lossy {
                up.push((t + 1, c, info.tick));
            } else if !rng.chance(0.2) {
                up.push((t + 1 + rng.below(4) as u32, c, info.tick));
            }
        }
        if t >= LOSSY + SETTLE {
            for (c, replica) in replicas.iter().enumerate() {
                let want: Vec<NetId> = (0..ENTITIES)
                    .map(NetId)
                    .filter(|&e| r.is_relevant(c, e))
                    .collect();
                let got: Vec<(NetId, EntityState)> = replica.states();
                let ids: Vec<NetId> = got.iter().map(|&(id, _)| id).collect();
                assert_eq!(ids, want, "seed {seed} tick {t} client {c}");
                for (id, shown) in got {
                    let at = replica.entity_tick(id).expect("a state was read");
                    let context = format!("seed {seed} tick {t} client {c} {id:?} as of {at}");
                    assert!(t - at < every, "{context}: waited too long");
                    assert_eq!(shown, state(id.0, at).quantized(), "{context}");
                }
            }
        }
    }
    let s = r.stats();
    assert!(
        s.packets_lost > 0 && s.gone_records > 0 && s.full_records > 0,
        "{s:?}"
    );
    assert!(s.worst_staleness_ticks < 32, "{s:?}");
    assert_eq!(s.waiting > 0, every > 1, "{s:?}");
    for replica in &replicas {
        let rs = replica.stats();
        assert_eq!((rs.missing_baseline, rs.malformed), (0, 0), "{rs:?}");
        assert!(
            rs.duplicates > 0 && rs.stale > 0,
            "the link reordered and duplicated: {rs:?}"
        );
    }
}

#[test]
fn views_match_the_server_soon_after_a_lossy_link_clears() {
    for seed in [1, 2, 3] {
        run(seed, RateByDistance::EVERY_TICK);
    }
}

#[test]
fn with_a_rate_by_distance_views_match_the_server_as_of_each_entity_s_last_tick() {
    let rate = RateByDistance {
        halve_every_m: 30.0,
        slowest_every_ticks: 8,
    };
    for seed in [1, 2, 3] {
        run(seed, rate);
    }
}

fn any_state() -> impl Strategy<Value = EntityState> {
    let coord = prop_oneof![8 => -300.0f32..300.0, 1 => any::<f32>()];
    (
        coord.clone(),
        coord.clone(),
        coord,
        -20.0f32..20.0,
        -20.0f32..20.0,
        any::<u16>(),
        any::<i16>(),
        any::<[u8; 3]>(),
    )
        .prop_map(
            |(x, y, z, vx, vy, yaw, pitch, [flags, health, weapon])| EntityState {
                position: Vec3::new(x, y, z),
                velocity: Vec3::new(vx, vy, -vx),
                yaw,
                pitch,
                flags,
                health,
                weapon,
            },
        )
}

/// Per tick: the three entities' states, whether the snapshot arrives, and after how many
/// ticks its ack does (3: never).
fn ticks() -> impl Strategy<Value = Vec<([EntityState; 3], bool, u8)>> {
    prop::collection::vec(
        (
            prop::array::uniform3(any_state()),
            prop::bool::weighted(0.8),
            0u8..4,
        ),
        1..80,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every state a client reads is the server's state of that tick, quantized: entities
    /// jumping anywhere (full states, gone records), any baseline the acks lead to.
    #[test]
    fn any_states_with_any_acks_decode_to_the_server_state(ticks in ticks()) {
        let config = ReplicationConfig { max_entities: 4, max_connections: 1, ring_ticks: 16, ..ReplicationConfig::default() };
        let mut r = Replicator::new(config, &SCHEMA);
        let mut replica = Replica::new(ReplicaConfig::matching(&config), &SCHEMA);
        r.connect(0, Some(NetId(0)));
        let mut acks: Vec<(u32, u32)> = Vec::new();
        for (t, (states, arrives, ack_after)) in ticks.iter().enumerate() {
            let t = t as u32;
            r.begin_tick(t);
            for (i, s) in states.iter().enumerate() {
                r.push(NetId(i as u16), s);
            }
            acks.retain(|&(at, tick)| {
                if at <= t {
                    r.on_ack(0, tick);
                }
                at > t
            });
            let mut body = Vec::new();
            r.write(0, &viewer_of(&states[0]), None, 1400, &mut body);
            if !arrives {
                continue;
            }
            replica.read(&body).unwrap();
            if *ack_after < 3 {
                acks.push((t + 1 + u32::from(*ack_after), t));
            }
            for (i, s) in states.iter().enumerate() {
                let id = NetId(i as u16);
                if replica.entity_tick(id) == Some(t) {
                    if let Some(seen) = replica.state(id) {
                        prop_assert_eq!(seen, s.quantized(), "tick {} entity {}", t, i);
                    } else {
                        prop_assert!(!r.is_relevant(0, id));
                    }
                }
            }
            prop_assert_eq!(replica.state(NetId(0)), Some(states[0].quantized()));
        }
    }
}
