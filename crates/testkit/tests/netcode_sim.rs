//! netcode's server and clients through the seeded simulator, tick by tick at 128 Hz on
//! virtual time: no sleeps, no sockets. The first test is the one to read first.

use std::collections::HashSet;
use std::time::Duration;

use tickforge_proto::netcode::{ClientState, ServerDrop, PACKET_SEND_INTERVAL};
use tickforge_proto::{ClientIndex, DisconnectReason, MAX_PACKET_BYTES};
use tickforge_testkit::{
    Event, Harness, HarnessConfig, LinkConditions, Logged, Side, SimRng, TICK,
};

/// Ticks in `d`, rounded up.
fn ticks(d: Duration) -> u32 {
    d.as_nanos().div_ceil(TICK.as_nanos()) as u32
}

/// 20% loss each way, duplicates, hold-backs, and 50 ms ± 10 ms one way.
fn rough_link() -> LinkConditions {
    LinkConditions {
        latency: Duration::from_millis(40),
        jitter: Duration::from_millis(20),
        loss_probability: 0.2,
        duplicate_probability: 0.1,
        reorder_probability: 0.1,
        reorder_delay: Duration::from_millis(30),
    }
}

/// Most steps a handshake takes on the default 10 ms link: request, challenge, response and
/// keep-alive each wait up to a tick for the receiver's next step.
fn handshake_ticks() -> u32 {
    4 * ticks(HarnessConfig::default().link.latency) + 1
}

/// The events of client `n` on `side`, without their ticks.
fn events(h: &Harness, side: Side, n: usize) -> Vec<Event> {
    h.events(side, n).map(|(_, e)| e.clone()).collect()
}

#[test]
fn connect_exchange_disconnect() {
    let mut h = Harness::new(HarnessConfig::default());
    let (a, b) = (h.add_client(), h.add_client());
    let taken = h
        .run_until(64, |h| {
            h.client(a).is_connected() && h.client(b).is_connected()
        })
        .expect("both connect");
    assert!(taken <= handshake_ticks(), "{taken} ticks");
    assert_eq!(h.server().connected(), 2);
    for n in [a, b] {
        let slot = h.slot_of(n).expect("seated on the server");
        assert_eq!(
            h.client(n).state(),
            ClientState::Connected {
                client: slot,
                max_clients: 4
            }
        );
        assert_eq!(events(&h, Side::Server, n), [Event::Connected(slot)]);
        assert_eq!(events(&h, Side::Client, n), [Event::Connected(slot)]);
    }
    assert_ne!(h.slot_of(a), h.slot_of(b));

    // Payloads both ways, each to its own peer only.
    assert!(h.send_to_server(a, b"input from a"));
    assert!(h.send_to_client(a, b"snapshot for a"));
    assert!(h.send_to_client(b, b"snapshot for b"));
    h.run(ticks(Duration::from_millis(10)) + 1);
    let payload = |bytes: &[u8]| Event::Payload(bytes.to_vec());
    assert_eq!(events(&h, Side::Server, a)[1..], [payload(b"input from a")]);
    assert_eq!(
        events(&h, Side::Client, a)[1..],
        [payload(b"snapshot for a")]
    );
    assert_eq!(
        events(&h, Side::Client, b)[1..],
        [payload(b"snapshot for b")]
    );
    assert_eq!(events(&h, Side::Server, b).len(), 1);

    // a leaves: ten disconnect packets; the first frees its slot, the other nine reach an
    // address with no connection and are dropped before any cryptography, counted as the
    // repeats they are rather than as unknown addresses.
    let slot_a = h.slot_of(a).unwrap();
    let dropped_before = h.server().stats().dropped_total();
    h.disconnect(a);
    h.run(ticks(Duration::from_millis(10)) + 1);
    assert_eq!(
        events(&h, Side::Server, a)[2..],
        [Event::Disconnected(DisconnectReason::ClientClosed)]
    );
    assert_eq!(h.server().connected(), 1);
    assert_eq!(h.slot_of(a), None);
    assert_eq!(h.server().stats().dropped(ServerDrop::DisconnectRepeat), 9);
    assert_eq!(h.server().stats().dropped(ServerDrop::UnknownAddress), 0);
    assert_eq!(h.server().stats().dropped_total(), dropped_before + 9);
    assert_eq!(h.server().stats().dropped_unexpected(), dropped_before);
    assert_eq!(
        h.client(a).state(),
        ClientState::Disconnected(DisconnectReason::ClientClosed)
    );

    // b stays, on keep-alives alone, past its 5 s timeout; a newcomer gets a's slot.
    let c = h.add_client();
    h.run(ticks(Duration::from_secs(6)));
    assert!(h.client(b).is_connected());
    assert_eq!(h.slot_of(c), Some(slot_a), "the lowest free slot");
    assert!(h.client(c).is_connected());
    assert_eq!(h.server().connected(), 2);
    let ended = h
        .log()
        .iter()
        .filter(|l| matches!(l.event, Event::Disconnected(_)))
        .count();
    assert_eq!(ended, 1, "only a's leaving ended anything");
}

#[test]
fn eight_clients_connect_through_loss_duplication_and_reordering() {
    for seed in [1, 2, 3, 4] {
        let mut h = Harness::new(HarnessConfig {
            seed,
            link: rough_link(),
            max_clients: 8,
            ..HarnessConfig::default()
        });
        let clients: Vec<usize> = (0..8).map(|_| h.add_client()).collect();
        // Each leg is lost one time in five and retried after 100 ms: 2 s is over ten
        // attempts at each of the two exchanges.
        let bound = ticks(Duration::from_secs(2));
        let mut connected_at = vec![None; clients.len()];
        let mut seated = HashSet::new();
        while h.tick() < bound && connected_at.iter().any(Option::is_none) {
            h.step();
            assert!(h.server().connected() <= clients.len(), "seed {seed}");
            for &n in &clients {
                if connected_at[n].is_none() && h.client(n).is_connected() {
                    connected_at[n] = Some(h.tick());
                }
                if let Some(slot) = h.slot_of(n) {
                    seated.insert((n, slot));
                }
            }
        }
        let connected_at: Vec<u32> = connected_at
            .iter()
            .map(|t| t.unwrap_or_else(|| panic!("seed {seed}: not all connected: {t:?}")))
            .collect();
        // Some handshake needed a retransmission: the loss was real.
        let slowest = *connected_at.iter().max().unwrap();
        assert!(
            slowest > ticks(PACKET_SEND_INTERVAL),
            "seed {seed}: {connected_at:?}"
        );
        assert!(h.sim().stats().lost > 0 && h.sim().stats().duplicated > 0);

        // Everyone stays, once each, in a slot of its own, whatever still arrives late.
        h.run(ticks(Duration::from_secs(1)));
        assert_eq!(h.server().connected(), 8, "seed {seed}");
        assert_eq!(
            seated.len(),
            8,
            "seed {seed}: a client changed slots: {seated:?}"
        );
        let slots: HashSet<ClientIndex> = clients.iter().map(|&n| h.slot_of(n).unwrap()).collect();
        assert_eq!(slots.len(), 8);
        for &n in &clients {
            let slot = h.slot_of(n).unwrap();
            assert_eq!(
                events(&h, Side::Server, n),
                [Event::Connected(slot)],
                "seed {seed}"
            );
            assert_eq!(
                events(&h, Side::Client, n),
                [Event::Connected(slot)],
                "seed {seed}"
            );
        }
        assert!(
            h.server().stats().dropped(ServerDrop::AlreadyConnected) > 0,
            "seed {seed}: late requests and responses were refused"
        );
    }
}

/// Event `i` for client `n`: mostly small, some longer than a packet (fragmented).
fn event_bytes(n: usize, i: usize) -> Vec<u8> {
    let len = match i % 10 {
        0 => 1500 + i,
        1..=3 => 200,
        _ => 1 + i % 40,
    };
    (0..len).map(|j| (n * 97 + i * 31 + j) as u8).collect()
}

/// The snapshot of client `n` at `tick`: a tag the body must match.
fn snapshot_bytes(n: usize, tick: u32) -> Vec<u8> {
    let mut b = vec![n as u8; 100 + (tick as usize * 13) % 500];
    b[..4].copy_from_slice(&tick.to_le_bytes());
    b
}

#[test]
fn reliable_events_arrive_once_in_order_and_acked_snapshots_were_received() {
    const EVENTS: usize = 150;
    let mut h = Harness::new(HarnessConfig {
        seed: 77,
        link: rough_link(),
        reliable_links: true,
        ..HarnessConfig::default()
    });
    let clients: Vec<usize> = (0..3).map(|_| h.add_client()).collect();
    let mut queued = vec![0usize; clients.len()];
    let mut delivered = vec![0usize; clients.len()];
    let mut received: Vec<HashSet<u32>> = vec![HashSet::new(); clients.len()];
    let (mut snapshots_sent, mut snapshots_acked) = (0usize, 0usize);
    let mut seen = 0;
    while delivered.iter().any(|&d| d < EVENTS) {
        assert!(h.tick() < 2000, "stalled: {delivered:?} of {EVENTS}");
        h.step();
        let tick = h.tick();

        // What the clients received this tick: events in order, snapshots as sent.
        for Logged {
            client: n,
            side,
            event,
            ..
        } in &h.log()[seen..]
        {
            match (side, event) {
                (Side::Client, Event::Reliable(bytes)) => {
                    assert_eq!(
                        *bytes,
                        event_bytes(*n, delivered[*n]),
                        "client {n}: out of order"
                    );
                    assert!(
                        delivered[*n] < queued[*n],
                        "client {n}: an event never sent"
                    );
                    delivered[*n] += 1;
                }
                (Side::Client, Event::Unreliable { tag, bytes }) => {
                    assert_eq!(*bytes, snapshot_bytes(*n, *tag), "client {n}");
                    assert!(
                        received[*n].insert(*tag),
                        "client {n}: snapshot {tag} twice"
                    );
                }
                (_, Event::Connected(_) | Event::Reliable(_) | Event::Unreliable { .. }) => {}
                (_, other) => panic!("client {n}: {side:?} saw {other:?}"),
            }
        }
        seen = h.log().len();

        // The server: acks first, then this tick's event and snapshot for each client.
        for &n in &clients {
            let Some(link) = h.link(Side::Server, n) else {
                continue;
            };
            while let Some(tag) = link.endpoint.poll_acked_tag() {
                assert!(
                    received[n].contains(&tag),
                    "client {n}: {tag} acked, never received"
                );
                snapshots_acked += 1;
            }
            if queued[n] < EVENTS {
                link.endpoint
                    .send_reliable(&event_bytes(n, queued[n]))
                    .unwrap();
                queued[n] += 1;
            }
            link.next_unreliable = Some((tick, snapshot_bytes(n, tick)));
            snapshots_sent += 1;
        }
    }
    assert!(
        event_bytes(0, 0).len() > MAX_PACKET_BYTES,
        "some events are fragmented"
    );
    // About 80% of snapshots arrive, and the acks of nearly all of those come back.
    assert!(
        snapshots_acked * 10 > snapshots_sent * 6,
        "{snapshots_acked} of {snapshots_sent} acked"
    );

    // Exactly once: nothing more is handed out, and the server's queues drain.
    h.run(ticks(Duration::from_secs(1)));
    assert!(
        h.log()[seen..]
            .iter()
            .all(|l| !matches!(l.event, Event::Reliable(_) | Event::Disconnected(_))),
        "{:?}",
        &h.log()[seen..]
    );
    for &n in &clients {
        let link = h.link(Side::Server, n).unwrap();
        assert_eq!(link.endpoint.queued_reliable_messages(), 0, "client {n}");
        assert!(link.endpoint.stats().sections_resent > 0);
    }
    assert!(h.sim().stats().duplicated > 0 && h.sim().stats().reordered > 0);
}

#[test]
fn a_dead_link_times_out_both_ends_after_the_token_timeout() {
    let timeout = Duration::from_secs(2);
    let latency = Duration::from_millis(10);
    let mut h = Harness::new(HarnessConfig {
        timeout_seconds: 2,
        link: LinkConditions::ideal(latency),
        ..HarnessConfig::default()
    });
    let (dying, healthy) = (h.add_client(), h.add_client());
    // Its server never hears it: the handshake times out instead.
    let unheard = h.add_client();
    h.set_link(unheard, LinkConditions::dead());
    h.run_until(64, |h| {
        h.client(dying).is_connected() && h.client(healthy).is_connected()
    })
    .expect("connected");
    h.run(ticks(Duration::from_millis(500)));

    let died_at = h.tick();
    h.set_link(dying, LinkConditions::dead());
    h.run_until(ticks(timeout + Duration::from_millis(500)), |h| {
        events(h, Side::Server, dying).len() == 2 && events(h, Side::Client, dying).len() == 2
    })
    .expect("both ends time out");

    // Each end last heard the other at most one keep-alive interval before the link
    // died, or in flight just after; it gives up the timeout later, on a tick boundary.
    let earliest = died_at + ticks(timeout - PACKET_SEND_INTERVAL) - 1;
    let latest = died_at + ticks(timeout + latency) + 1;
    for side in [Side::Server, Side::Client] {
        let (at, event) = h.events(side, dying).nth(1).unwrap();
        assert_eq!(
            *event,
            Event::Disconnected(DisconnectReason::TimedOut),
            "{side:?}"
        );
        assert!(
            (earliest..=latest).contains(&at),
            "{side:?} at {at}, {earliest}..={latest}"
        );
    }
    assert_eq!(
        h.client(dying).state(),
        ClientState::Disconnected(DisconnectReason::TimedOut)
    );
    assert_eq!(
        events(&h, Side::Client, unheard),
        [Event::Disconnected(DisconnectReason::ConnectTimedOut)]
    );
    let (at, _) = h.events(Side::Client, unheard).next().unwrap();
    assert_eq!(
        at,
        ticks(timeout),
        "the handshake gave up at the timeout, not before"
    );
    assert_eq!(events(&h, Side::Server, unheard), []);

    // Nothing else ended: the healthy client lives on keep-alives alone.
    h.run(ticks(timeout * 2));
    assert!(h.client(healthy).is_connected());
    assert_eq!(events(&h, Side::Server, healthy).len(), 1);
    assert_eq!(events(&h, Side::Client, healthy).len(), 1);
    assert_eq!(h.server().connected(), 1);
}

#[test]
fn a_full_server_denies_the_third_client_and_keeps_the_first_two() {
    let mut h = Harness::new(HarnessConfig {
        max_clients: 2,
        ..HarnessConfig::default()
    });
    let (a, b) = (h.add_client(), h.add_client());
    h.run_until(64, |h| {
        h.client(a).is_connected() && h.client(b).is_connected()
    })
    .expect("the first two connect");
    let c = h.add_client();
    h.run_until(64, |h| {
        !matches!(h.client(c).state(), ClientState::SendingRequest)
    })
    .expect("the third hears back");
    assert_eq!(
        events(&h, Side::Client, c),
        [Event::Disconnected(DisconnectReason::ServerFull)]
    );
    assert_eq!(events(&h, Side::Server, c), []);
    assert_eq!(h.server().stats().denied, 1);
    h.run(ticks(Duration::from_secs(6)));
    assert_eq!(h.server().connected(), 2);
    for n in [a, b] {
        assert!(h.client(n).is_connected());
        assert_eq!(
            events(&h, Side::Server, n).len(),
            1,
            "client {n}: only connected"
        );
    }
    assert_eq!(
        h.client(c).state(),
        ClientState::Disconnected(DisconnectReason::ServerFull),
        "denied for good: it sends nothing more"
    );
    assert_eq!(h.server().stats().denied, 1);
}

/// Four clients on a rough link exchanging payloads; one leaves at 2 s, another's link
/// dies then and it times out a second later. Returns the whole log.
fn scenario(seed: u64) -> Vec<Logged> {
    let mut h = Harness::new(HarnessConfig {
        seed,
        link: rough_link(),
        timeout_seconds: 1,
        ..HarnessConfig::default()
    });
    let clients: Vec<usize> = (0..4).map(|_| h.add_client()).collect();
    let mut rng = SimRng::new(seed);
    for tick in 0..ticks(Duration::from_secs(4)) {
        if tick == ticks(Duration::from_secs(2)) {
            h.disconnect(0);
            h.set_link(1, LinkConditions::dead());
        }
        for &n in &clients {
            if rng.chance(0.1) {
                h.send_to_server(n, &tick.to_le_bytes());
            }
            if rng.chance(0.1) {
                h.send_to_client(n, &(tick as u64 + n as u64).to_le_bytes());
            }
        }
        h.step();
    }
    h.log().to_vec()
}

#[test]
fn the_same_seed_gives_the_same_log_and_another_seed_another() {
    use DisconnectReason::{ClientClosed, TimedOut};
    let a = scenario(5);
    assert_eq!(a, scenario(5));
    assert_ne!(a, scenario(6));
    let count = |f: fn(&Event) -> bool| a.iter().filter(|l| f(&l.event)).count();
    assert_eq!(count(|e| matches!(e, Event::Connected(_))), 8);
    // About 0.1 × 4 clients × 512 ticks each way, less the losses and the leavers.
    assert!(count(|e| matches!(e, Event::Payload(_))) > 150);
    let ended: Vec<(usize, Side, DisconnectReason)> = a
        .iter()
        .filter_map(|l| match l.event {
            Event::Disconnected(reason) => Some((l.client, l.side, reason)),
            _ => None,
        })
        .collect();
    assert_eq!(ended.len(), 3, "{ended:?}");
    for e in [
        (0, Side::Server, ClientClosed),
        (1, Side::Server, TimedOut),
        (1, Side::Client, TimedOut),
    ] {
        assert!(ended.contains(&e), "{ended:?}");
    }
}

/// A game client restarting on a fixed port (or behind a NAT that keeps its mapping) comes
/// back from the same address with a new token. netcode.c's `add_encryption_mapping`
/// replaces an address's keys on every request that passes the checks.
#[test]
fn a_client_restarting_with_a_new_token_connects_from_the_same_address() {
    let mut h = Harness::new(HarnessConfig::default());
    let a = h.add_client();
    // The first attempt: the server hears the requests, but its challenges never arrive.
    let (server, client) = (Harness::server_addr(), Harness::client_addr(a));
    h.sim_mut().set_link(server, client, LinkConditions::dead());
    h.run(ticks(Duration::from_secs(1)));
    assert!(h.server().stats().challenges > 0);
    assert_eq!(h.client(a).state(), ClientState::SendingRequest);

    // The player restarts the game, which binds the same port and fetches a new token.
    h.sim_mut()
        .set_link(server, client, HarnessConfig::default().link);
    h.restart_client(a);
    let taken = h.run_until(ticks(Duration::from_secs(6)), |h| {
        !matches!(
            h.client(a).state(),
            ClientState::SendingRequest | ClientState::SendingResponse
        )
    });
    assert_eq!(
        events(&h, Side::Client, a),
        [Event::Connected(ClientIndex(0))],
        "after {taken:?} ticks; server drops: {:?}",
        h.server()
            .stats()
            .dropped_all()
            .filter(|(_, n)| *n > 0)
            .collect::<Vec<_>>()
    );
    assert!(taken.unwrap() <= handshake_ticks());
}
