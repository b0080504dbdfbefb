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
                    Event::Game(bytes) => self
                        .walk
                        .push(WalkEvent::decode(bytes).expect("a walk event")),
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
