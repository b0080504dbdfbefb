//! The reference shooter hosted by the runtime, through the server's public API
//! ([`Match`], [`HostedMatch`]): its inputs reaching its world and its entities the
//! snapshots, each shot's verdict reaching its shooter, a match under loss converging and
//! losing no event through its rounds, and a recording that replays identically.
//!
//! The runtime's own versions of these tests, with a small test game, are in
//! `crates/server/src/game_match/tests.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tickforge_api::{Game, Seat, ViewTime};
use tickforge_game::{PlayerSlot, UserCmd, WorldConfig};
use tickforge_proto::msg::{self, ClientMsg, Event, ServerMsg};
use tickforge_proto::reliable::Endpoint;
use tickforge_proto::{ClientIndex, MatchId};
use tickforge_replication::{NetId, ReplicaConfig, ReplicationConfig};
use tickforge_server::{HostedMatch, Match};
use tickforge_shooter::{cmd, entity_state, EntityState, Shooter, ShooterEvent};
use tickforge_telemetry::Scopes;

/// A match of the reference shooter.
type ShooterMatch = Match<Shooter>;

/// A reliable event as a client keeps it: the runtime's own events, and the shooter's
/// events decoded out of [`Event::Game`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Received {
    Welcome {
        match_id: u32,
        seat: u16,
        tick_hz: u16,
        seats: u16,
        entities: u16,
        schema: u32,
        epoch: u32,
    },
    Epoch {
        epoch: u32,
    },
    Game(ShooterEvent),
}

/// Decodes one reliable event of a shooter match; anything else fails the test.
fn received(bytes: &[u8]) -> Received {
    match Event::decode(bytes).expect("an event") {
        Event::Welcome {
            match_id,
            seat,
            tick_hz,
            seats,
            entities,
            schema,
            epoch,
        } => Received::Welcome {
            match_id,
            seat,
            tick_hz,
            seats,
            entities,
            schema,
            epoch,
        },
        Event::Epoch { epoch } => Received::Epoch { epoch },
        Event::Game(game) => Received::Game(ShooterEvent::decode(game).expect("a shooter event")),
    }
}

/// A shooter match playing `world`, its tick 0 due at `start`.
fn shooter_match(id: MatchId, world: &WorldConfig, start: Instant) -> ShooterMatch {
    let (config, setup) = tickforge_shooter::ShooterConfig::from_world(world);
    Match::new(id, Arc::new(config), setup, start)
}

/// What a client's replica needs to read the snapshots of `m`: as the match configures its
/// replicator.
fn replica_config(m: &ShooterMatch) -> ReplicaConfig {
    let seats = m.seats();
    ReplicaConfig::matching(&ReplicationConfig {
        max_entities: seats,
        max_connections: seats,
        tick_hz: u32::try_from(1_000_000_000 / m.period().as_nanos()).unwrap(),
        ..ReplicationConfig::default()
    })
}

/// The world's player slot of `seat`.
fn slot_of(seat: Seat) -> PlayerSlot {
    PlayerSlot(u8::try_from(seat.0).expect("a shooter seat is a player slot"))
}

/// The outbox's only payload.
fn only_payload(m: &ShooterMatch) -> Vec<u8> {
    assert_eq!(m.outbox().len(), 1);
    m.outbox().iter().next().unwrap().1.to_vec()
}

/// Match 1 of two players on the default world, its tick 0 due at `start`.
fn two_seat_match(start: Instant) -> ShooterMatch {
    shooter_match(
        MatchId(1),
        &WorldConfig {
            players: 2,
            ..Default::default()
        },
        start,
    )
}

#[test]
fn a_tick_applies_inputs_and_snapshots_every_seat() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let mut m = two_seat_match(t0);
    let slot = m.seat(t0, ClientIndex(0), None).unwrap();
    let before = m.game().world().players()[slot.index()].state.origin;
    m.queue_input(
        slot,
        1,
        UserCmd {
            forward: 127,
            ..Default::default()
        },
        ViewTime::default(),
    );
    m.queue_input(slot, 1, UserCmd::default(), ViewTime::default()); // a duplicate is ignored

    let record = m.run_tick(t0, &scopes);
    assert_eq!(m.outbox().len(), 1, "a packet for the one seated client");
    assert_eq!(record.category_sum_ns(), record.total_ns);
    // The input reached the world: the player runs (inside its spawn room, in the buy
    // phase).
    assert_eq!(m.game().world().players()[slot.index()].cmd.forward, 127);
    assert_ne!(
        m.game().world().players()[slot.index()].state.origin,
        before
    );

    // The client reads a snapshot of tick 0 acknowledging input 1.
    let payload = only_payload(&m);
    let mut link = Endpoint::new(msg::link_config(), t0);
    let (tag, unreliable) = link.read_packet(t0, &payload).unwrap().expect("a snapshot");
    let ServerMsg::Snapshot {
        tick,
        input_ack,
        body,
    } = ServerMsg::decode(unreliable).unwrap();
    assert_eq!((tag, tick, input_ack), (0, 0, 1));
    // The first snapshot is full: the seat's own player, at the server's state; the
    // other is sent only if the fog of war lets this seat see it.
    let mut replica =
        tickforge_replication::Replica::new(replica_config(&m), tickforge_shooter::schema());
    let read = replica.read(body).unwrap();
    // The seat's entity is its player, the seat's number its network id.
    let own = NetId(slot.0);
    assert_eq!(
        m.game().view(slot).own.map(|e| e.net_id()),
        Some(own),
        "the seat's own entity"
    );
    assert_eq!(
        replica
            .entity(own)
            .map(|q| EntityState::from_lanes(&q).position),
        Some(
            entity_state(m.game().world(), slot_of(slot))
                .quantized()
                .position
        )
    );
    let other = PlayerSlot(1 - slot_of(slot).0);
    let visible = m.game().world().fow().is_visible(slot_of(slot), other);
    assert_eq!(read.states, 1 + u16::from(visible));
    // The welcome came with it, reliably.
    let mut event = Vec::new();
    assert!(link.poll_reliable(&mut event));
    assert_eq!(
        Event::decode(&event),
        Ok(Event::Welcome {
            match_id: 1,
            seat: slot.0,
            tick_hz: 128,
            seats: 2,
            entities: 2,
            schema: tickforge_shooter::schema().fingerprint(),
            epoch: 0
        })
    );
    // The game's join events follow it: where the match stands.
    assert!(link.poll_reliable(&mut event));
    assert!(matches!(
        received(&event),
        Received::Game(ShooterEvent::Round { .. })
    ));
}

#[test]
fn each_shot_s_verdict_goes_to_its_shooter_reliably() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let mut config = WorldConfig {
        players: 2,
        ..Default::default()
    };
    config.rules.buy = Duration::from_millis(100);
    let mut m = shooter_match(MatchId(1), &config, t0);
    let slot = m.seat(t0, ClientIndex(0), None).unwrap();
    m.queue_input(
        slot,
        7,
        UserCmd {
            buttons: tickforge_game::buttons::FIRE,
            ..Default::default()
        },
        ViewTime::default(),
    );
    let mut link = Endpoint::new(msg::link_config(), t0);
    let mut results = Vec::new();
    let mut event = Vec::new();
    for _ in 0..40 {
        m.run_tick(t0, &scopes);
        link.read_packet(t0, &only_payload(&m)).unwrap();
        while link.poll_reliable(&mut event) {
            if let Received::Game(e @ ShooterEvent::ShotResult { .. }) = received(&event) {
                results.push(e);
            }
        }
    }
    let fired = m.game().world().players()[slot.index()].shots;
    assert!(fired >= 1, "the rifle fired after the buy phase");
    assert_eq!(results.len(), fired as usize);
    // Fired into the spawn room at nobody: misses, under the input's sequence.
    assert!(results.iter().all(|e| matches!(
        e,
        ShooterEvent::ShotResult {
            seq: 7,
            victim: tickforge_shooter::NONE,
            part: tickforge_shooter::NONE,
            ..
        }
    )));
}

/// One client of [`a_match_under_loss_converges_and_loses_no_event`]: its end of the link,
/// what it rebuilt, and the events every client is sent, in the order received.
struct LossyClient {
    addr: std::net::SocketAddr,
    link: Endpoint,
    replica: tickforge_replication::Replica,
    shared_events: Vec<Received>,
    seq: u32,
    bad_snapshots: u32,
}

#[test]
fn a_match_under_loss_converges_and_loses_no_event() {
    use std::collections::HashMap;
    use tickforge_game::rules::RulesConfig;
    use tickforge_testkit::{LinkConditions, NetSim, SimRng};

    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let players = 4u8;
    let mut m = shooter_match(
        MatchId(1),
        &WorldConfig {
            players,
            // Short rounds: round events, deaths and respawns within the run.
            rules: RulesConfig {
                buy: Duration::from_millis(100),
                round: Duration::from_millis(1500),
                round_end: Duration::from_millis(200),
                ..RulesConfig::default()
            },
            ..WorldConfig::default()
        },
        t0,
    );
    let server: std::net::SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let replica_config = replica_config(&m);
    let mut clients: Vec<LossyClient> = (0..players)
        .map(|i| {
            let seat = Seat(u16::from(i));
            assert_eq!(
                m.seat(t0, ClientIndex(u16::from(i)), Some(seat)),
                Some(seat)
            );
            LossyClient {
                addr: format!("127.0.0.1:{}", 50_000 + u16::from(i))
                    .parse()
                    .unwrap(),
                link: Endpoint::new(msg::link_config(), t0),
                replica: tickforge_replication::Replica::new(
                    replica_config,
                    tickforge_shooter::schema(),
                ),
                shared_events: Vec::new(),
                seq: 0,
                bad_snapshots: 0,
            }
        })
        .collect();
    let lossy = LinkConditions {
        latency: Duration::from_millis(20),
        jitter: Duration::from_millis(10),
        loss_probability: 0.2,
        duplicate_probability: 0.1,
        reorder_probability: 0.1,
        reorder_delay: Duration::from_millis(30),
    };
    let clear = LinkConditions::ideal(Duration::from_millis(20));
    let mut sim = NetSim::new(7, lossy);
    // Client 0 is the reference: its link never loses anything.
    sim.set_link(clients[0].addr, server, clear);
    sim.set_link(server, clients[0].addr, clear);
    let mut rng = SimRng::new(11);
    // What the server replicated at each tick, quantized: what a client must end up with.
    let mut sent: HashMap<u32, Vec<EntityState>> = HashMap::new();
    let (mut up, mut input) = (Vec::new(), Vec::new());
    let mut event = Vec::new();
    let (ticks, clears_at) = (1200u32, 900u32);
    for t in 0..ticks {
        let now = t0 + m.period() * t;
        if t == clears_at {
            for c in &clients {
                sim.set_link(c.addr, server, clear);
                sim.set_link(server, c.addr, clear);
            }
        }
        for d in sim.take_due(now) {
            if d.to == server {
                let i = clients.iter().position(|c| c.addr == d.from).unwrap();
                m.receive(now, Seat(i as u16), &d.bytes)
                    .expect("an honest client's packet");
                continue;
            }
            let c = clients.iter_mut().find(|c| c.addr == d.to).unwrap();
            if let Some((_, body)) = c.link.read_packet(now, &d.bytes).unwrap() {
                let ServerMsg::Snapshot { body, .. } = ServerMsg::decode(body).unwrap();
                c.bad_snapshots += u32::from(c.replica.read(body).is_err());
            }
            while c.link.poll_reliable(&mut event) {
                match received(&event) {
                    Received::Welcome { .. } | Received::Game(ShooterEvent::ShotResult { .. }) => {}
                    e => c.shared_events.push(e),
                }
            }
        }
        for c in &mut clients {
            // Run about and shoot until the network clears, then stand still.
            let cmd = if t < clears_at {
                let r = rng.next_u64();
                UserCmd {
                    forward: [127, 0, -127][(r % 3) as usize],
                    side: [127, 0, -127][(r / 3 % 3) as usize],
                    buttons: if r.is_multiple_of(7) {
                        tickforge_game::buttons::FIRE
                    } else {
                        0
                    },
                    yaw: (r >> 16) as u16,
                    pitch: 0,
                }
            } else {
                UserCmd::default()
            };
            c.seq += 1;
            input.clear();
            ClientMsg::Input {
                seq: c.seq,
                view_tick: t.saturating_sub(8),
                view_frac: 0,
                cmd: &cmd::to_bytes(&cmd),
            }
            .encode(&mut input);
            c.link.write_packet(now, Some((c.seq, &input)), &mut up);
            sim.send(now, c.addr, server, &up);
        }
        m.run_tick(now, &scopes);
        let states = (0..players)
            .map(|s| entity_state(m.game().world(), PlayerSlot(s)).quantized())
            .collect();
        sent.insert(t, states);
        for (client, payload) in m.outbox().iter() {
            let to = clients[usize::from(client.0)].addr;
            sim.send(now, server, to, payload);
        }
    }
    assert!(
        sim.stats().lost > 500,
        "the link was lossy: {:?}",
        sim.stats()
    );
    let last = ticks - 1;
    for (i, c) in clients.iter().enumerate() {
        assert_eq!(c.bad_snapshots, 0, "client {i}: every snapshot decoded");
        let newest = c.replica.newest_tick().expect("snapshots arrived");
        assert!(
            last - newest <= 4,
            "client {i} is current: {newest} of {last}"
        );
        for s in 0..players {
            let id = NetId(u16::from(s));
            // The match's replicator is not public: what the shooter's fog of war hides
            // from a seat is what the seat must not hold.
            let fow = m.game().world().fow();
            if !fow.is_visible(PlayerSlot(i as u8), PlayerSlot(s)) {
                assert_eq!(c.replica.entity(id), None, "client {i} dropped hidden {s}");
                continue;
            }
            // Within a bounded number of ticks of the newest, at the server's state then.
            let at = c
                .replica
                .entity_tick(id)
                .expect("a relevant entity was sent");
            assert!(
                newest - at <= 8,
                "client {i}, entity {s}: tick {at} of {newest}"
            );
            assert_eq!(
                c.replica.entity(id).map(|q| EntityState::from_lanes(&q)),
                Some(sent[&at][usize::from(s)])
            );
        }
        // Every event every client is sent, once each and in order, as the client whose
        // link never lost anything got them.
        assert_eq!(c.shared_events, clients[0].shared_events, "client {i}");
    }
    let rounds = clients[0]
        .shared_events
        .iter()
        .filter(|e| matches!(e, Received::Game(ShooterEvent::Round { phase: 1, .. })))
        .count();
    assert!(
        rounds >= 3,
        "rounds were played: {:?}",
        clients[0].shared_events
    );
}

/// A two-seat match of one round, over in under half a second (about 50 ticks), its
/// actions recorded when `record`.
fn short_match(t0: Instant, record: bool) -> ShooterMatch {
    let rules = tickforge_game::rules::RulesConfig {
        buy: Duration::from_millis(50),
        round: Duration::from_millis(300),
        round_end: Duration::from_millis(20),
        rounds: std::num::NonZeroU8::MIN,
        ..Default::default()
    };
    let world = WorldConfig {
        players: 2,
        rules,
        ..Default::default()
    };
    let (config, mut setup) = tickforge_shooter::ShooterConfig::from_world(&world);
    setup.record = record;
    Match::new(MatchId(1), Arc::new(config), setup, t0)
}

#[test]
fn a_recording_replays_identically_when_a_player_leaves_mid_match() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let mut m = short_match(t0, true);
    let slot = m.seat(t0, ClientIndex(0), None).unwrap();
    let mut seq = 0;
    let actions = loop {
        let tick = m.game().world().tick().0;
        // Running in combat from tick 10, then gone at tick 20: the world stops the
        // player, and the recording must say so.
        if (10..20).contains(&tick) {
            seq += 1;
            let run = UserCmd {
                forward: 127,
                ..Default::default()
            };
            m.queue_input(slot, seq, run, ViewTime::default());
        }
        if tick == 20 {
            m.unseat(slot);
        }
        m.run_tick(t0, &scopes);
        if let Some(end) = m.finish_if_over() {
            // The result names the one round played.
            let result = tickforge_game::rules::MatchResult::decode_body(&end.result)
                .expect("the shooter's result body");
            assert_eq!(result.rounds_played, 1, "{}", end.result);
            break end.recording.expect("the match was recorded");
        }
        assert!(tick < 1000, "the match never ended");
    };
    let outcome = tickforge_game::replay::replay(&actions, &scopes).unwrap();
    assert!(outcome.is_identical(), "{outcome:?}");
}
