//! The reference shooter hosted by the runtime, through the server's public API
//! ([`Match`], [`HostedMatch`]): its inputs reaching its world and its entities the
//! snapshots, each shot's verdict reaching its shooter, a match under loss converging and
//! losing no event through its rounds, and a recording that replays identically.
//!
//! The runtime's own versions of these tests, with a small test game, are in
//! `crates/server/src/game_match/tests.rs`; what the two share, generic over the game, is
//! `tickforge_server::test_support` (feature `test-support`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tickforge_api::{Seat, ViewTime};
use tickforge_game::{PlayerSlot, UserCmd, WorldConfig};
use tickforge_proto::msg;
use tickforge_proto::reliable::Endpoint;
use tickforge_proto::{ClientIndex, MatchId};
use tickforge_replication::{Lanes, NetId, ReplicaConfig, ReplicationConfig};
use tickforge_server::test_support::lossy::{self, Lossy};
use tickforge_server::test_support::{self, only_payload, FirstPacket};
use tickforge_server::{HostedMatch, Match};
use tickforge_shooter::{cmd, entity_state, EntityState, Shooter, ShooterEvent};
use tickforge_telemetry::Scopes;
use tickforge_testkit::SimRng;

/// A match of the reference shooter.
type ShooterMatch = Match<Shooter>;

/// A reliable event of a shooter match as a client keeps it.
type Received = test_support::Received<ShooterEvent>;

/// Decodes one reliable event of a shooter match; anything else fails the test.
fn received(bytes: &[u8]) -> Vec<Received> {
    test_support::received(bytes, ShooterUnderLoss::event)
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
    PlayerSlot(u16::from(
        u8::try_from(seat.0).expect("a shooter seat is a player slot"),
    ))
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

    // The client reads a snapshot of tick 0 acknowledging input 1, and the welcome.
    // The first snapshot is full: the seat's own player, at the server's state; the
    // other is sent only if the fog of war lets this seat see it.
    let FirstPacket {
        mut link,
        replica,
        read,
    } = FirstPacket::read(&m, slot, &only_payload(&m), t0, replica_config(&m));
    let own = NetId(slot.0);
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
    let mut event = Vec::new();
    // The game's join events follow it: where the match stands.
    assert!(link.poll_reliable(&mut event));
    assert!(matches!(
        received(&event)[..],
        [Received::Game(ShooterEvent::Round { .. })]
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
            for r in received(&event) {
                if let Received::Game(e @ ShooterEvent::ShotResult { .. }) = r {
                    results.push(e);
                }
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
            victim: tickforge_shooter::NO_SLOT,
            part: tickforge_shooter::NONE,
            ..
        }
    )));
}

/// The shooter under loss: its players run about and shoot; the welcome and each shot's
/// verdict go to one seat, the rest to all; what its fog of war hides from a seat is what
/// the seat must not hold (the match's replicator is not public).
struct ShooterUnderLoss;

impl Lossy<Shooter> for ShooterUnderLoss {
    type Event = ShooterEvent;
    type State = EntityState;

    fn event(bytes: &[u8]) -> ShooterEvent {
        ShooterEvent::decode(bytes).expect("a shooter event")
    }

    fn own(event: &Received) -> bool {
        matches!(
            event,
            Received::Welcome { .. } | Received::Game(ShooterEvent::ShotResult { .. })
        )
    }

    fn command(rng: &mut SimRng, moving: bool, out: &mut Vec<u8>) {
        // Run about and shoot until the network clears, then stand still.
        let c = if moving {
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
        out.extend_from_slice(&cmd::to_bytes(&c));
    }

    fn state(m: &ShooterMatch, seat: Seat) -> EntityState {
        entity_state(m.game().world(), slot_of(seat)).quantized()
    }

    fn replicated(lanes: &Lanes) -> EntityState {
        EntityState::from_lanes(lanes)
    }

    fn relevant(m: &ShooterMatch, client: usize, id: NetId) -> bool {
        let client = u16::try_from(client).unwrap();
        m.game()
            .world()
            .fow()
            .is_visible(slot_of(Seat(client)), slot_of(Seat(id.0)))
    }
}

#[test]
fn a_match_under_loss_converges_and_loses_no_event() {
    use tickforge_game::rules::RulesConfig;

    let t0 = Instant::now();
    let players = 4u8;
    let mut m = shooter_match(
        MatchId(1),
        &WorldConfig {
            players: u16::from(players),
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
    let replica_config = replica_config(&m);
    // Every client current, holding the server's states of what it may see, and every
    // event sent to all reaching each once and in order as it reached the client that lost
    // nothing.
    let clients = lossy::converge::<Shooter, ShooterUnderLoss>(&mut m, t0, replica_config);
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
