//! Test machinery shared by the runtime's own tests (hosting Walk, the test kit's small
//! game) and a game's hosted tests (the reference shooter's `crates/shooter/tests`):
//! generic over the game, so that each test says only what is its game's own.
//!
//! Compiled for the server's own tests, and with the `test-support` feature for other
//! crates' tests (a dev-dependency `tickforge-server = { features = ["test-support"] }`);
//! never in a server build.
//!
//! - [`Received`] and [`received`]: a reliable message's events as a client keeps them, the
//!   game's own decoded out of [`Event::Game`] and [`Event::Games`];
//! - [`only_payload`]: the one packet a match with one seated client sends;
//! - [`FirstPacket`]: a new client reading its first packet of a two-seat match;
//! - [`loopback`]: netcode clients on loopback UDP driving a real [`crate::Worker`]'s frames
//!   through connect, a match's end and its restart, every frame's allocations counted;
//! - [`lossy`]: a match's clients on a lossy simulated network, converging and losing no
//!   event.

use std::time::Instant;

use tickforge_api::{Game, Seat};
use tickforge_proto::msg::{self, Event, ServerMsg};
use tickforge_proto::reliable::Endpoint;
use tickforge_replication::{NetId, ReadInfo, Replica, ReplicaConfig};

use crate::{HostedMatch, Match};

pub mod loopback;
pub mod lossy;

/// A reliable event as a client keeps it: the runtime's own events, and the game's events
/// `E` decoded out of [`Event::Game`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received<E> {
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
    Game(E),
}

/// Decodes one reliable message's events, the game's with `game`; anything else fails the
/// test.
pub fn received<E>(bytes: &[u8], mut game: impl FnMut(&[u8]) -> E) -> Vec<Received<E>> {
    let e = Event::decode(bytes).expect("an event");
    let games = e.game_events().map(|b| Received::Game(game(b)));
    match e {
        Event::Welcome {
            match_id,
            seat,
            tick_hz,
            seats,
            entities,
            schema,
            epoch,
        } => vec![Received::Welcome {
            match_id,
            seat,
            tick_hz,
            seats,
            entities,
            schema,
            epoch,
        }],
        Event::Epoch { epoch } => vec![Received::Epoch { epoch }],
        Event::Game(_) | Event::Games(_) => games.collect(),
    }
}

/// The outbox's only payload.
pub fn only_payload<G: Game>(m: &Match<G>) -> Vec<u8> {
    assert_eq!(m.outbox().len(), 1);
    m.outbox().iter().next().unwrap().1.to_vec()
}

/// What a new client made of its first packet: its end of the link (the reliable events
/// after the welcome still to poll), its replica, and what the snapshot held.
pub struct FirstPacket {
    pub link: Endpoint,
    pub replica: Replica,
    pub read: ReadInfo,
}

impl FirstPacket {
    /// A new client of `seat` in `m`, match 1 of two seats and two entities at 128 Hz,
    /// reading `payload`, the match's first packet to it, at `now`, its replica configured
    /// with `replica_config`. Checks that the packet holds a snapshot of tick 0
    /// acknowledging input 1, which the replica reads, that the seat's own entity is its
    /// player, the seat's number its network id, and that the welcome came with it,
    /// reliably, first.
    pub fn read<G: Game>(
        m: &Match<G>,
        seat: Seat,
        payload: &[u8],
        now: Instant,
        replica_config: ReplicaConfig,
    ) -> FirstPacket {
        let mut link = Endpoint::new(msg::link_config(), now);
        let (tag, unreliable) = link.read_packet(now, payload).unwrap().expect("a snapshot");
        let ServerMsg::Snapshot {
            tick,
            input_ack,
            body,
        } = ServerMsg::decode(unreliable).unwrap();
        assert_eq!((tag, tick, input_ack), (0, 0, 1));
        let mut replica = Replica::new(replica_config, G::schema());
        let read = replica.read(body).unwrap();
        assert_eq!(
            m.game().view(seat).own.map(|e| e.net_id()),
            Some(NetId(seat.0)),
            "the seat's own entity"
        );
        let mut event = Vec::new();
        assert!(link.poll_reliable(&mut event));
        assert_eq!(
            Event::decode(&event),
            Ok(Event::Welcome {
                match_id: 1,
                seat: seat.0,
                tick_hz: 128,
                seats: 2,
                entities: 2,
                schema: G::schema().fingerprint(),
                epoch: 0
            })
        );
        FirstPacket {
            link,
            replica,
            read,
        }
    }
}
