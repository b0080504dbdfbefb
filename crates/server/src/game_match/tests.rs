//! Tests of one match: seats, inputs, ticks, events and snapshots, hosting Walk, the test
//! kit's small game. (What is the reference shooter's own, its shot verdicts and the
//! replay of its recordings, is tested hosted in `crates/shooter/tests/hosted.rs`; what
//! the two share, generic over the game, is [`crate::test_support`].)
use super::*;
use crate::test_support::lossy::{self, Lossy};
use crate::test_support::{self, only_payload, FirstPacket};
use crate::testing::{connected_pair, walk_match, Walk, WalkConfig, WalkEvent, WalkInput};
use tickforge_proto::netcode::ClientEvent;
use tickforge_proto::reliable::Endpoint;
use tickforge_replication::NetId;
use tickforge_testkit::SimRng;

/// A match of the test game.
type WalkMatch = Match<Walk>;

/// A reliable event of a Walk match as a client keeps it.
type Received = test_support::Received<WalkEvent>;

/// Decodes one reliable event of a Walk match; anything else fails the test.
fn received(bytes: &[u8]) -> Vec<Received> {
    test_support::received(bytes, |game| WalkEvent::decode(game).expect("a walk event"))
}

/// The datagrams the worker would send for `m`'s last tick: each payload of its outbox
/// sealed for its client, after the keep-alive a client not yet confirmed is sent first.
fn sealed(
    transport: &mut tickforge_proto::netcode::Server,
    now: Instant,
    m: &WalkMatch,
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for (client, payload) in m.outbox().iter() {
        if let Some(tx) = transport.send_payload(now, client, payload, &mut buf) {
            if tx.keepalive_bytes > 0 {
                out.push(buf[..tx.keepalive_bytes].to_vec());
            }
            out.push(buf[tx.keepalive_bytes..].to_vec());
        }
    }
    out
}

/// Match 1 of two seats with the default settings, its tick 0 due at `start`.
fn two_seat_match(start: Instant) -> WalkMatch {
    walk_match(MatchId(1), 2, WalkConfig::default(), start)
}

/// An input that walks `dx` along x, marked for a verdict when `mark`.
fn walk(dx: i8, mark: bool) -> WalkInput {
    WalkInput {
        dx,
        dy: 0,
        flags: if mark { WalkInput::MARK } else { 0 },
    }
}

#[test]
fn deadlines_are_absolute() {
    let t0 = Instant::now();
    let m = walk_match(MatchId(1), 10, WalkConfig::default(), t0);
    assert_eq!(m.period(), Duration::from_nanos(7_812_500));
    // 60 s of ticks is exactly 60 s: no rounding accumulates.
    assert_eq!(m.deadline_of(Tick(60 * 128)), t0 + Duration::from_secs(60));
}

#[test]
fn a_tick_applies_inputs_and_snapshots_every_seat() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let (mut transport, mut client, index, server_addr) = connected_pair(t0);
    let mut m = two_seat_match(t0);
    let slot = m.seat(t0, index, None).unwrap();
    let before = m.game().position(slot).unwrap();
    m.queue_input(slot, 1, walk(5, false), ViewTime::default());
    m.queue_input(slot, 1, walk(-9, false), ViewTime::default()); // a duplicate is ignored

    let record = m.run_tick(t0, &scopes);
    assert_eq!(m.outbox().len(), 1, "a packet for the one seated client");
    assert_eq!(record.category_sum_ns(), record.total_ns);
    // The input reached the game, the first of the two with its sequence number only,
    // and was stepped.
    assert_eq!(m.game().input(slot), Some(walk(5, false)));
    assert_eq!(m.game().position(slot), Some([before[0] + 5, before[1]]));

    // The client reads a snapshot of tick 0 acknowledging input 1, with both players.
    // The client never spoke after connecting: a keep-alive goes before the snapshot.
    let mut datagrams = sealed(&mut transport, t0, &m);
    assert_eq!(datagrams.len(), 2);
    let mut seen = None;
    for d in &mut datagrams {
        if let Some(ClientEvent::Payload(p)) = client.handle_datagram(t0, server_addr, d) {
            seen = Some(p.to_vec());
        }
    }
    let payload = seen.expect("a snapshot");
    // The first snapshot is full: the seat's own entity at the server's state, and the
    // other seat's (Walk has no fog of war; they stand a metre apart). The welcome came
    // with it.
    let replica_config = tickforge_replication::ReplicaConfig::matching(m.replicator.config());
    let FirstPacket {
        mut link,
        replica,
        read,
    } = FirstPacket::read(&m, slot, &payload, t0, replica_config);
    let own = NetId(slot.0);
    let at = |r: &tickforge_replication::Replica, id: NetId| r.entity(id).map(|q| [q.0[0], q.0[1]]);
    assert_eq!(at(&replica, own), m.game().position(slot));
    let other = Seat(1 - slot.0);
    assert_eq!(at(&replica, NetId(other.0)), m.game().position(other));
    assert_eq!(read.states, 2);
    let mut event = Vec::new();
    // The game's join event follows it, then the tick's event to all.
    assert!(link.poll_reliable(&mut event));
    assert_eq!(
        received(&event),
        [Received::Game(WalkEvent::Joined {
            seat: slot.0,
            ticks: 0
        })]
    );
    assert!(link.poll_reliable(&mut event));
    assert_eq!(
        received(&event),
        [Received::Game(WalkEvent::Beat { tick: 0 })]
    );
    assert!(!link.poll_reliable(&mut event));
}

#[test]
fn inputs_arrive_through_the_link_and_its_acks_name_the_baseline() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let (_transport, _client, index, _) = connected_pair(t0);
    let mut m = two_seat_match(t0);
    let slot = m.seat(t0, index, None).unwrap();
    m.run_tick(t0, &scopes);
    // The client's side of the link reads the tick-0 packet, then sends input 1.
    let packet = only_payload(&m);
    let mut link = Endpoint::new(msg::link_config(), t0);
    assert!(link.read_packet(t0, &packet).unwrap().is_some());
    let mut input = Vec::new();
    ClientMsg::Input {
        seq: 1,
        view_tick: 0,
        view_frac: 0,
        cmd: &walk(127, false).to_bytes(),
    }
    .encode(&mut input);
    let mut up = Vec::new();
    link.write_packet(t0, Some((1, &input)), &mut up);
    m.receive(t0, slot, &up).unwrap();
    assert_eq!(
        m.acked_tick(slot),
        Some(0),
        "the client's packet acked the tick-0 snapshot"
    );
    assert_eq!(m.seats[slot.index()].newest_seq, 1);
    // Garbage on the link is an error the worker disconnects for.
    assert!(m.receive(t0, slot, &[0xff; 40]).is_err());
}

#[test]
fn a_flooding_client_is_refused_and_far_inputs_are_dropped() {
    let t0 = Instant::now();
    let mut m = two_seat_match(t0);
    let slot = m.seat(t0, ClientIndex(0), None).unwrap();
    let mut link = Endpoint::new(msg::link_config(), t0);
    let mut input = Vec::new();
    let mut up = Vec::new();
    let mut send = |m: &mut WalkMatch, seq: u32| {
        input.clear();
        ClientMsg::Input {
            seq,
            view_tick: 0,
            view_frac: 0,
            cmd: &WalkInput::default().to_bytes(),
        }
        .encode(&mut input);
        link.write_packet(t0, Some((seq, &input)), &mut up);
        m.receive(t0, slot, &up)
    };
    // An input two seconds ahead of the newest is dropped, not applied.
    send(&mut m, 1).unwrap();
    send(&mut m, 1 + MAX_INPUT_JUMP + 1).unwrap();
    assert_eq!(
        (m.seats[slot.index()].newest_seq, m.counters().far_inputs),
        (1, 1)
    );
    // Without a tick in between, the allowance runs out: flooding.
    let mut result = Ok(());
    for seq in 2..=FLOOD_ALLOWANCE + 10 {
        result = send(&mut m, seq);
        if result.is_err() {
            break;
        }
    }
    assert!(matches!(result, Err(ReceiveError::Flood)), "{result:?}");
}

#[test]
fn each_verdict_goes_to_its_own_seat_reliably_under_its_input_s_sequence_number() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let mut m = two_seat_match(t0);
    for c in 0..2 {
        let seat = Seat(c);
        assert_eq!(m.seat(t0, ClientIndex(c), Some(seat)), Some(seat));
    }
    let mut links = [0, 1].map(|_| Endpoint::new(msg::link_config(), t0));
    let mut marks: [Vec<(u32, u32)>; 2] = Default::default();
    let mut event = Vec::new();
    // Seat 0 marks inputs 7 and 9, seat 1 input 3; unmarked ones in between get nothing.
    let plan: [&[(u32, bool)]; 2] = [&[(7, true), (8, false), (9, true)], &[(3, true)]];
    for t in 0..8u32 {
        for (s, inputs) in plan.iter().enumerate() {
            if let Some(&(seq, mark)) = inputs.get(t as usize) {
                m.queue_input(Seat(s as u16), seq, walk(1, mark), ViewTime::default());
            }
        }
        m.run_tick(t0, &scopes);
        for (client, payload) in m.outbox().iter() {
            let s = usize::from(client.0);
            links[s].read_packet(t0, payload).unwrap();
            while links[s].poll_reliable(&mut event) {
                for e in received(&event) {
                    if let Received::Game(WalkEvent::Mark { seq, tick }) = e {
                        marks[s].push((seq, tick));
                    }
                }
            }
        }
    }
    assert_eq!(
        marks[0],
        [(7, 0), (9, 2)],
        "seat 0's verdicts, once each, in order"
    );
    assert_eq!(marks[1], [(3, 0)], "seat 1's only");
    assert_eq!(m.game().marks(), 3);
}

#[test]
fn a_slot_seated_again_starts_its_client_on_a_new_link() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let mut m = two_seat_match(t0);
    let slot = m.seat(t0, ClientIndex(0), Some(Seat(0))).unwrap();
    // The first client's link carries its welcome and the round's state, and more packets.
    for _ in 0..5 {
        m.run_tick(t0, &scopes);
    }
    m.unseat(slot);
    assert_eq!(m.outbox().len(), 1, "still seated at the last tick");
    let later = t0 + Duration::from_secs(1);
    assert_eq!(m.seat(later, ClientIndex(1), Some(slot)), Some(slot));
    m.run_tick(later, &scopes);
    // A new client's side of the link takes the packet as the first of a connection: the
    // welcome is message 0 again, and nothing of the first client's is resent.
    let mut link = Endpoint::new(msg::link_config(), later);
    link.read_packet(later, &only_payload(&m)).unwrap();
    let mut event = Vec::new();
    assert!(link.poll_reliable(&mut event), "the welcome arrived");
    assert!(matches!(
        Event::decode(&event),
        Ok(Event::Welcome { seat: 0, .. })
    ));
    assert!(
        link.poll_reliable(&mut event),
        "the game's join event follows"
    );
    assert_eq!(
        received(&event),
        [Received::Game(WalkEvent::Joined { seat: 0, ticks: 5 })]
    );
    assert!(
        !link.poll_reliable(&mut event),
        "nothing of the first client's"
    );
    assert_eq!(link.stats().packets_received, 1);
    // The server's end was reset in place too: one packet on it, carrying all it queued.
    let server_end = m.link(slot).stats();
    assert_eq!(server_end.packets_sent, 1);
    assert_eq!(server_end.messages_queued, link.stats().messages_delivered);
}

#[test]
fn seats_honour_a_preferred_free_slot_and_refuse_when_full() {
    let t = Instant::now();
    let mut m = two_seat_match(Instant::now());
    assert_eq!(m.seat(t, ClientIndex(0), Some(Seat(1))), Some(Seat(1)));
    // Taken: the next free one instead.
    assert_eq!(m.seat(t, ClientIndex(1), Some(Seat(1))), Some(Seat(0)));
    assert_eq!(m.seat(t, ClientIndex(2), None), None);
    m.unseat(Seat(0));
    assert_eq!(m.connected(), 1);
    assert_eq!(m.seat(t, ClientIndex(2), Some(Seat(9))), Some(Seat(0)));
}

/// Walk under loss: its inputs walk about, marking one in seven; the welcome, the join
/// and the verdicts go to one seat, the beats to all; every entity is relevant to every
/// seat the replicator says it is.
struct WalkUnderLoss;

impl Lossy<Walk> for WalkUnderLoss {
    type Event = WalkEvent;
    type State = [i32; 2];

    fn event(bytes: &[u8]) -> WalkEvent {
        WalkEvent::decode(bytes).expect("a walk event")
    }

    fn own(event: &Received) -> bool {
        matches!(
            event,
            Received::Welcome { .. }
                | Received::Game(WalkEvent::Joined { .. } | WalkEvent::Mark { .. })
        )
    }

    fn command(rng: &mut SimRng, moving: bool, cmd: &mut Vec<u8>) {
        // Walk about, marking one input in seven, until the network clears; then stand
        // still.
        let input = if moving {
            let r = rng.next_u64();
            WalkInput {
                dx: [3, 0, -3][(r % 3) as usize],
                dy: [3, 0, -3][(r / 3 % 3) as usize],
                flags: if r.is_multiple_of(7) {
                    WalkInput::MARK
                } else {
                    0
                },
            }
        } else {
            WalkInput::default()
        };
        cmd.extend_from_slice(&input.to_bytes());
    }

    fn state(m: &WalkMatch, seat: Seat) -> [i32; 2] {
        m.game().position(seat).unwrap()
    }

    fn replicated(lanes: &tickforge_replication::Lanes) -> [i32; 2] {
        [lanes.0[0], lanes.0[1]]
    }

    fn relevant(m: &WalkMatch, client: usize, id: NetId) -> bool {
        m.replicator.is_relevant(client, id)
    }
}

#[test]
fn a_match_under_loss_converges_and_loses_no_event() {
    let t0 = Instant::now();
    let players = 4u16;
    // A beat to all every 16 ticks: many events to lose within the run.
    let config = WalkConfig {
        every: 16,
        ..WalkConfig::default()
    };
    let mut m = walk_match(MatchId(1), players, config, t0);
    let replica_config = tickforge_replication::ReplicaConfig::matching(m.replicator.config());
    // Every client current, holding the server's states, and every beat sent to all
    // reaching each once and in order as it reached the client that lost nothing.
    let clients = lossy::converge::<Walk, WalkUnderLoss>(&mut m, t0, replica_config);
    let ticks = lossy::TICKS;
    // The reference client heard every beat of the run, in order.
    let beats: Vec<Received> = (0..ticks)
        .step_by(16)
        .map(|tick| Received::Game(WalkEvent::Beat { tick }))
        .collect();
    assert_eq!(clients[0].shared_events, beats);
    // Each seat's own events: its welcome and join once, first, then the verdicts on its
    // marked inputs in the order of their sequence numbers, none twice (inputs may be
    // lost on the way up; a verdict sent is never lost on the way down).
    for (i, c) in clients.iter().enumerate() {
        assert!(
            matches!(c.own_events[0], Received::Welcome { seat, .. } if usize::from(seat) == i),
            "client {i}: {:?}",
            c.own_events
        );
        assert_eq!(
            c.own_events[1],
            Received::Game(WalkEvent::Joined {
                seat: i as u16,
                ticks: 0
            })
        );
        let seqs: Vec<u32> = c.own_events[2..]
            .iter()
            .map(|e| match e {
                Received::Game(WalkEvent::Mark { seq, .. }) => *seq,
                e => panic!("client {i}: {e:?} after its join"),
            })
            .collect();
        assert!(seqs.len() > 50, "client {i}: verdicts were sent: {seqs:?}");
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "client {i}: {seqs:?}");
    }
    let heard: usize = clients.iter().map(|c| c.own_events.len() - 2).sum();
    assert_eq!(
        heard as u64,
        m.game().marks(),
        "every verdict reached its seat"
    );
}

/// Ticks a [`short_match`] lasts.
const SHORT_TICKS: u32 = 50;

/// A two-seat match over after [`SHORT_TICKS`] ticks, its inputs recorded when `record`.
fn short_match(t0: Instant, record: bool) -> WalkMatch {
    let config = WalkConfig {
        ticks: SHORT_TICKS,
        ..WalkConfig::default()
    };
    let setup = MatchSetup {
        seats: 2,
        tick_hz: 128,
        record,
        stagger: 0,
    };
    Match::new(MatchId(1), Arc::new(config), setup, t0)
}

#[test]
fn a_recording_replays_identically_when_a_player_leaves_mid_match() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let (_transport, _client, index, _) = connected_pair(t0);
    let mut m = short_match(t0, true);
    let slot = m.seat(t0, index, None).unwrap();
    let start = m.game().position(slot).unwrap();
    let mut seq = 0;
    let (result, recording) = loop {
        let tick = m.game().ticks();
        // Walking from tick 10, then gone at tick 20: the game stops the seat, and the
        // recording must say so.
        if (10..20).contains(&tick) {
            seq += 1;
            let step = WalkInput {
                dx: 5,
                dy: -2,
                flags: 0,
            };
            m.queue_input(slot, seq, step, ViewTime::default());
        }
        if tick == 20 {
            m.unseat(slot);
        }
        m.run_tick(t0, &scopes);
        if let Some(end) = m.finish_if_over() {
            let result = tickforge_testkit::game::WalkResult::parse(&end.result)
                .expect("walk's result body");
            break (result, end.recording.expect("the match was recorded"));
        }
        assert!(tick < 1000, "the match never ended");
    };
    assert_eq!(result.ticks, SHORT_TICKS);
    assert_eq!(
        result.positions[slot.index()],
        [start[0] + 50, start[1] - 20],
        "ten steps, then stopped by the leave"
    );
    let config = WalkConfig {
        ticks: SHORT_TICKS,
        ..WalkConfig::default()
    };
    let replayed = tickforge_testkit::game::replay(&config, 2, &recording, SHORT_TICKS);
    assert_eq!(replayed, Some(result.positions));
}

#[test]
fn a_match_that_starts_over_announces_its_epoch_before_any_snapshot_of_it() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let mut m = short_match(t0, false);
    let slot = m.seat(t0, ClientIndex(0), None).unwrap();
    let mut link = Endpoint::new(msg::link_config(), t0);
    let mut event = Vec::new();
    let mut events = Vec::new();
    let mut ack = Vec::new();
    // The client's side: reads the tick's packet, keeps its events, acknowledges it when
    // `reply`. The snapshot's tick, if the packet had one.
    fn exchange(
        m: &mut WalkMatch,
        slot: Seat,
        link: &mut Endpoint,
        now: Instant,
        events: &mut Vec<Received>,
        reply: bool,
    ) -> Option<u32> {
        let snapshot = link
            .read_packet(now, &only_payload(m))
            .unwrap()
            .map(|(_, u)| match ServerMsg::decode(u).unwrap() {
                ServerMsg::Snapshot { tick, .. } => tick,
            });
        let mut event = Vec::new();
        while link.poll_reliable(&mut event) {
            events.extend(received(&event));
        }
        if reply {
            let mut ack = Vec::new();
            link.write_packet(now, None, &mut ack);
            m.receive(now, slot, &ack).unwrap();
        }
        snapshot
    }
    let mut t = 0;
    let period = m.period();
    let now = |t: u32| t0 + period * t;
    loop {
        m.run_tick(now(t), &scopes);
        assert!(exchange(&mut m, slot, &mut link, now(t), &mut events, true).is_some());
        t += 1;
        if m.finish_if_over().is_some() {
            break;
        }
        assert!(t < 1000, "the match never ended");
    }
    assert!(matches!(events[0], Received::Welcome { epoch: 0, .. }));
    assert_eq!(m.epoch(), 1);
    events.clear();
    // Until the client has acknowledged the epoch, the new run's ticks send it no
    // snapshot: the epoch rides in the first packet, ahead of the new run's events.
    for _ in 0..2 {
        m.run_tick(now(t), &scopes);
        assert_eq!(
            exchange(&mut m, slot, &mut link, now(t), &mut events, false),
            None
        );
        t += 1;
    }
    assert_eq!(events.first(), Some(&Received::Epoch { epoch: 1 }));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Received::Epoch { .. }))
            .count(),
        1
    );
    link.write_packet(now(t), None, &mut ack);
    m.receive(now(t), slot, &ack).unwrap();
    m.run_tick(now(t), &scopes);
    assert_eq!(
        exchange(&mut m, slot, &mut link, now(t), &mut events, true),
        Some(2)
    );
    // A client seated in the new run is welcomed into it.
    assert_eq!(m.seat(now(t), ClientIndex(1), None), Some(Seat(1 - slot.0)));
    let mut late = Endpoint::new(msg::link_config(), now(t));
    m.run_tick(now(t), &scopes);
    let payload = m.outbox().iter().nth(1).unwrap().1.to_vec();
    late.read_packet(now(t), &payload).unwrap();
    assert!(late.poll_reliable(&mut event));
    assert!(matches!(
        Event::decode(&event),
        Ok(Event::Welcome { epoch: 1, .. })
    ));
}
