//! The runtime's guards around a game: a client's reliable messages are capped per tick, a
//! client whose link cannot take a reliable message is handed to the worker to disconnect,
//! and a match that starts over tells its new game who is still seated. Clients here are
//! bare reliable links on virtual time: what a match sees after netcode.

use super::*;
use crate::testing::{walk_match, Walk, WalkConfig, WalkEvent};

/// One client's end of its link, and what it has read.
struct Client {
    index: ClientIndex,
    seat: Seat,
    link: Endpoint,
    packet: Vec<u8>,
    message: Vec<u8>,
    /// Reliable events read, decoded.
    events: Vec<Event<'static>>,
    /// The game's events among them, decoded.
    walk: Vec<WalkEvent>,
}

impl Client {
    fn seat_in(m: &mut Match<Walk>, now: Instant, index: u16) -> Client {
        let index = ClientIndex(index);
        let seat = m.seat(now, index, None).expect("a free seat");
        Client {
            index,
            seat,
            link: Endpoint::new(msg::link_config(), now),
            packet: Vec::new(),
            message: Vec::new(),
            events: Vec::new(),
            walk: Vec::new(),
        }
    }

    /// Reads what the match's last tick queued for this client.
    fn read(&mut self, now: Instant, m: &Match<Walk>) {
        for (client, payload) in m.outbox().iter() {
            if client != self.index {
                continue;
            }
            self.link
                .read_packet(now, payload)
                .expect("the server's packet");
            while self.link.poll_reliable(&mut self.message) {
                match Event::decode(&self.message).expect("an event") {
                    e @ (Event::Game(_) | Event::Games(_)) => self.walk.extend(
                        e.game_events()
                            .map(|b| WalkEvent::decode(b).expect("a walk event")),
                    ),
                    Event::Welcome { .. } => self.events.push(Event::Welcome {
                        match_id: 0,
                        seat: 0,
                        tick_hz: 0,
                        seats: 0,
                        entities: 0,
                        schema: 0,
                        epoch: 0,
                    }),
                    Event::Epoch { epoch } => {
                        self.events.push(Event::Epoch { epoch });
                        // Where the epoch fell among the game's events.
                        self.walk.push(WalkEvent::Over { ticks: u32::MAX });
                    }
                }
            }
        }
    }

    /// Sends acks (and `messages`, reliably) to the match.
    fn send(
        &mut self,
        now: Instant,
        m: &mut Match<Walk>,
        messages: usize,
    ) -> Result<(), ReceiveError> {
        for i in 0..messages {
            self.link
                .send_reliable(&[i as u8])
                .expect("room for the messages");
        }
        self.link.write_packet(now, None, &mut self.packet);
        m.receive(now, self.seat, &self.packet)
    }
}

fn walk(ticks: u32, every: u32) -> WalkConfig {
    WalkConfig {
        ticks,
        every,
        ..WalkConfig::default()
    }
}

#[test]
fn a_client_sending_more_messages_in_a_tick_than_a_match_takes_is_refused_alone() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let mut m = walk_match(MatchId(1), 2, WalkConfig::default(), t0);
    let mut a = Client::seat_in(&mut m, t0, 0);
    let mut b = Client::seat_in(&mut m, t0, 1);
    // The most a tick takes, from each: accepted.
    let most = MAX_MESSAGES_PER_TICK as usize;
    assert!(a.send(t0, &mut m, most).is_ok());
    assert!(b.send(t0, &mut m, most).is_ok());
    m.run_tick(t0, &scopes);
    b.read(t0, &m);
    assert!(b.walk.contains(&WalkEvent::Joined { seat: 1, ticks: 0 }));
    // A new tick, a new allowance: one more than it takes is refused, for that client only.
    let t1 = t0 + m.period();
    assert!(matches!(
        a.send(t1, &mut m, most + 1),
        Err(ReceiveError::Refused(_))
    ));
    assert!(b.send(t1, &mut m, 1).is_ok());
    m.run_tick(t1, &scopes);
    assert!(
        m.outbox().iter().any(|(c, _)| c == b.index),
        "b is sent its tick"
    );
    b.read(t1, &m);
}

#[test]
fn a_client_that_stops_acknowledging_is_handed_to_the_worker_and_the_others_play_on() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    // An event to all every tick, for longer than a link's send queue holds.
    let mut m = walk_match(MatchId(1), 2, walk(100_000, 1), t0);
    let silent = Client::seat_in(&mut m, t0, 0);
    let mut b = Client::seat_in(&mut m, t0, 1);
    let mut kicked = Vec::new();
    let mut now = t0;
    for _ in 0..600 {
        m.run_tick(now, &scopes);
        b.read(now, &m);
        b.send(now, &mut m, 0).expect("b acknowledges");
        while let Some(client) = m.take_kicked() {
            kicked.push(client);
        }
        now += m.period();
    }
    assert_eq!(kicked, vec![silent.index], "the silent client, once");
    assert!(m.counters().dropped_events >= 1);
    let beats = b
        .walk
        .iter()
        .filter(|e| matches!(e, WalkEvent::Beat { .. }))
        .count();
    assert!(
        beats >= 590,
        "b heard every beat but the last few in flight: {beats}"
    );
}

#[test]
fn a_match_that_starts_over_tells_its_new_game_who_is_seated() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let mut m = walk_match(MatchId(1), 3, walk(20, 1_000), t0);
    let mut a = Client::seat_in(&mut m, t0, 0);
    let mut now = t0;
    let mut started_over = false;
    for _ in 0..60 {
        m.run_tick(now, &scopes);
        a.read(now, &m);
        a.send(now, &mut m, 0).expect("a acknowledges");
        if m.is_over() && !started_over {
            assert!(m.finish_if_over().is_some());
            started_over = true;
        }
        now += m.period();
    }
    assert!(started_over);
    // Its first run: joined at tick 0; then the epoch, and the new game's own join.
    let joins: Vec<(usize, u32)> = (a.walk.iter().enumerate())
        .filter_map(|(i, e)| match e {
            WalkEvent::Joined { seat, ticks } => {
                assert_eq!(*seat, a.seat.0);
                Some((i, *ticks))
            }
            _ => None,
        })
        .collect();
    let epoch = (a.walk.iter())
        .position(|e| *e == WalkEvent::Over { ticks: u32::MAX })
        .expect("the epoch");
    assert_eq!(joins.len(), 2, "{:?}", a.walk);
    assert!(joins[0].0 < epoch && epoch < joins[1].0, "{:?}", a.walk);
    assert_eq!(joins[1].1, 0, "the new game, at its tick 0");
    assert!(a.events.contains(&Event::Epoch { epoch: 1 }));
}

/// A game whose one entity blinks: spawned at the start, destroyed at tick 10, spawned
/// again once its index may be reused, with a new state. No seat has an entity.
mod blink {
    use tickforge_api::{
        Coding, ConfigError, ConfigTable, Entities, EntityId, Field, Game, InputInfo, Lanes,
        MatchEnd, MatchSetup, Position, Quantum, Schema, Seat, StepContext, View,
        REUSE_AFTER_TICKS,
    };

    static SCHEMA: Schema = match Schema::new(&[Field::new("n", Coding::Scalar, Quantum::Whole)]) {
        Ok(s) => s,
        Err(_) => panic!("a valid table"),
    };

    /// The tick the entity is destroyed in.
    pub const GONE_AT: u32 = 10;

    pub struct Blink {
        pub id: Option<EntityId>,
        /// Ids it was given, in order.
        pub given: Vec<EntityId>,
        tick: u32,
    }

    impl Game for Blink {
        type Config = ();
        type Input = ();
        const NAME: &'static str = "blink";
        const ABOUT: &'static str = "one entity that goes and comes back";

        fn schema() -> &'static Schema {
            &SCHEMA
        }
        fn configure(_: &ConfigTable) -> Result<(), ConfigError> {
            Ok(())
        }
        fn max_entities(_: &(), _: u16) -> u16 {
            1
        }
        fn new(_: &(), _: &MatchSetup, _: &mut Entities) -> Blink {
            Blink {
                id: None,
                given: Vec::new(),
                tick: 0,
            }
        }
        fn decode_input(_: &[u8]) -> Option<()> {
            Some(())
        }
        fn apply_input(&mut self, _: Seat, _: &(), _: InputInfo) {}
        fn step(&mut self, cx: &mut StepContext<'_>) {
            let t = self.tick;
            self.tick += 1;
            if t == GONE_AT {
                let id = self.id.take().expect("alive until now");
                assert!(cx.entities.destroy(id));
                assert!(
                    !cx.entities.set(id, Position::default(), &Lanes::ZERO),
                    "stale"
                );
            }
            if self.id.is_none() && (t == 0 || t > GONE_AT) {
                // Refused until the freed index has waited out the baseline ring.
                if let Some(id) = cx.entities.spawn() {
                    assert!(t == 0 || t >= GONE_AT + REUSE_AFTER_TICKS, "tick {t}");
                    self.id = Some(id);
                    self.given.push(id);
                }
            }
            if let Some(id) = self.id {
                let mut lanes = Lanes::ZERO;
                lanes.0[0] = self.given.len() as i32 * 100;
                cx.entities.set(id, Position::default(), &lanes);
            }
        }
        fn view(&self, _: Seat) -> View<'_> {
            View::default()
        }
        fn is_over(&self) -> bool {
            false
        }
        fn finish(&mut self) -> MatchEnd {
            MatchEnd::default()
        }
    }
}

#[test]
fn a_destroyed_entity_leaves_every_client_and_its_index_comes_back_as_a_new_one() {
    use tickforge_api::REUSE_AFTER_TICKS;
    use tickforge_replication::{NetId, Replica, ReplicaConfig};
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let setup = MatchSetup {
        seats: 1,
        tick_hz: 128,
        record: false,
        stagger: 0,
    };
    let mut m = Match::<blink::Blink>::new(MatchId(1), Arc::new(()), setup, t0);
    let seat = m.seat(t0, ClientIndex(0), None).unwrap();
    let mut link = Endpoint::new(msg::link_config(), t0);
    let mut replica = Replica::new(
        ReplicaConfig::matching(m.replicator.config()),
        blink::Blink::schema(),
    );
    let mut packet = Vec::new();
    let mut seen = Vec::new();
    let mut now = t0;
    for _ in 0..(blink::GONE_AT + REUSE_AFTER_TICKS + 8) {
        m.run_tick(now, &scopes);
        for (_, payload) in m.outbox().iter() {
            if let Some((_, body)) = link.read_packet(now, payload).unwrap() {
                let Ok(ServerMsg::Snapshot { body, .. }) = ServerMsg::decode(body) else {
                    panic!("a snapshot");
                };
                replica.read(body).expect("every snapshot reads");
            }
        }
        while link.poll_reliable(&mut packet) {}
        seen.push(replica.entity(NetId(0)).map(|l| l.0[0]));
        link.write_packet(now, None, &mut packet);
        m.receive(now, seat, &packet).unwrap();
        now += m.period();
    }
    let gone = blink::GONE_AT as usize;
    let back = gone + REUSE_AFTER_TICKS as usize;
    assert_eq!(seen[gone - 1], Some(100), "the first entity");
    assert!(seen[gone..back].iter().all(Option::is_none), "{seen:?}");
    assert_eq!(
        seen[back + 1],
        Some(200),
        "the second, in the same index: {seen:?}"
    );
    let given = &m.game().given;
    assert_eq!(given.len(), 2);
    assert_eq!(given[0].index, given[1].index);
    assert_eq!(given[1].generation, given[0].generation + 1);
}

/// A game that floods its clients: every event it queues is logged, so a test can say what
/// each client should have read.
mod burst {
    use tickforge_api::{
        Coding, ConfigError, ConfigTable, Entities, Events, Field, Game, InputInfo, MatchEnd,
        MatchSetup, Quantum, Refused, Schema, Seat, StepContext, Target, View,
    };

    static SCHEMA: Schema = match Schema::new(&[Field::new("n", Coding::Scalar, Quantum::Whole)]) {
        Ok(s) => s,
        Err(_) => panic!("a valid table"),
    };

    /// The tick of the burst.
    pub const AT: u32 = 5;
    /// Events to all in the burst: more than a link's send queue holds messages, and more
    /// bytes than its largest message.
    pub const EVENTS: u32 = 600;
    /// Bytes of each burst event.
    pub const BYTES: usize = 40;

    pub struct Burst {
        tick: u32,
        /// Every event queued, in order.
        pub log: Vec<(Target, Vec<u8>)>,
    }

    impl Burst {
        fn send(&mut self, events: &mut Events, to: Target, bytes: Vec<u8>) {
            events.send(to, &bytes);
            self.log.push((to, bytes));
        }
    }

    impl Game for Burst {
        type Config = ();
        type Input = ();
        const NAME: &'static str = "burst";
        const ABOUT: &'static str = "bursts of events to every seat";

        fn schema() -> &'static Schema {
            &SCHEMA
        }
        fn configure(_: &ConfigTable) -> Result<(), ConfigError> {
            Ok(())
        }
        fn max_entities(_: &(), _: u16) -> u16 {
            1
        }
        fn new(_: &(), _: &MatchSetup, _: &mut Entities) -> Burst {
            Burst {
                tick: 0,
                log: Vec::new(),
            }
        }
        fn decode_input(_: &[u8]) -> Option<()> {
            Some(())
        }
        fn apply_input(&mut self, _: Seat, _: &(), _: InputInfo) {}
        /// A chat line: relayed to every seat.
        fn message(
            &mut self,
            seat: Seat,
            bytes: &[u8],
            events: &mut Events,
        ) -> Result<(), Refused> {
            let mut line = vec![b'c', seat.0 as u8];
            line.extend_from_slice(bytes);
            self.send(events, Target::All, line);
            Ok(())
        }
        fn step(&mut self, cx: &mut StepContext<'_>) {
            let t = self.tick;
            self.tick += 1;
            // Each tick a word to seat 0 alone.
            self.send(cx.events, Target::Seat(Seat(0)), vec![b'o', t as u8]);
            if t == AT {
                for k in 0..EVENTS {
                    let mut e = vec![k as u8; BYTES];
                    e[..4].copy_from_slice(&k.to_le_bytes());
                    self.send(cx.events, Target::All, e);
                    if k == EVENTS / 2 {
                        // One to seat 1 amid the burst, and one to a seat that is not there.
                        self.send(cx.events, Target::Seat(Seat(1)), vec![b'm']);
                        self.send(cx.events, Target::Seat(Seat(40)), vec![b'x']);
                    }
                }
            }
        }
        fn view(&self, _: Seat) -> View<'_> {
            View::default()
        }
        fn is_over(&self) -> bool {
            false
        }
        fn finish(&mut self) -> MatchEnd {
            MatchEnd::default()
        }
    }
}

#[test]
fn a_burst_of_events_to_every_seat_costs_each_link_a_message_a_tick_and_kicks_nobody() {
    let t0 = Instant::now();
    let scopes = Scopes::new(Instant::now);
    let setup = MatchSetup {
        seats: 3,
        tick_hz: 128,
        record: false,
        stagger: 0,
    };
    let mut m = Match::<burst::Burst>::new(MatchId(1), Arc::new(()), setup, t0);
    let seats: Vec<Seat> = (0..3)
        .map(|i| m.seat(t0, ClientIndex(i), None).expect("a free seat"))
        .collect();
    let mut links: Vec<Endpoint> = (0..3)
        .map(|_| Endpoint::new(msg::link_config(), t0))
        .collect();
    let mut read: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
    let (mut packet, mut message) = (Vec::new(), Vec::new());
    let mut queued_in_burst = Vec::new();
    let mut now = t0;
    for t in 0..120 {
        if t == 2 {
            // Every client chats as much as a tick takes: relayed to all at the tick.
            for (i, link) in links.iter_mut().enumerate() {
                for k in 0..MAX_MESSAGES_PER_TICK {
                    link.send_reliable(&[k as u8]).unwrap();
                }
                link.write_packet(now, None, &mut packet);
                m.receive(now, seats[i], &packet).expect("within the cap");
            }
        }
        let before: Vec<u64> = (0..3)
            .map(|i| m.link(seats[i]).stats().messages_queued)
            .collect();
        m.run_tick(now, &scopes);
        let after: Vec<u64> = (0..3)
            .map(|i| m.link(seats[i]).stats().messages_queued)
            .collect();
        if t == burst::AT {
            queued_in_burst = before.iter().zip(&after).map(|(b, a)| a - b).collect();
        } else {
            for i in 0..3 {
                assert!(after[i] - before[i] <= 1, "tick {t}: one message a tick");
            }
        }
        let payloads: Vec<(ClientIndex, Vec<u8>)> =
            m.outbox().iter().map(|(c, p)| (c, p.to_vec())).collect();
        for (client, payload) in payloads {
            let i = usize::from(client.0);
            links[i].read_packet(now, &payload).unwrap();
            while links[i].poll_reliable(&mut message) {
                let e = Event::decode(&message).expect("an event");
                read[i].extend(e.game_events().map(<[u8]>::to_vec));
            }
            links[i].write_packet(now, None, &mut packet);
            m.receive(now, seats[i], &packet).expect("an honest client");
        }
        assert_eq!(m.take_kicked(), None, "tick {t}: nobody is kicked");
        now += m.period();
    }
    // The burst's bytes (600 × 41 and the word to seat 0) need two of the link's largest
    // messages; seat 2 has no word of its own but the same bytes.
    assert_eq!(queued_in_burst, [2, 2, 2]);
    assert_eq!(m.counters().dropped_events, 0);
    for (i, got) in read.iter().enumerate() {
        let want: Vec<Vec<u8>> = (m.game().log.iter())
            .filter(|(to, _)| matches!(to, Target::All) || *to == Target::Seat(Seat(i as u16)))
            .map(|(_, b)| b.clone())
            .collect();
        assert_eq!(got.len(), want.len(), "seat {i}: every event");
        assert!(*got == want, "seat {i}: every event, in the order queued");
    }
}
