//! One match: its world, its seats, and its tick.
//!
//! The match sees plain data: packets in ([`HostedMatch::receive`]), and after each tick
//! one payload per connected seat in its [`Outbox`], which the worker seals and sends. It
//! never calls back into the worker or the transport.
//!
//! [`Match`] is generic over the game ([`tickforge_api::Game`]): it owns the game's state,
//! its entity ids and events, the seats' reliable links and the replicator, and drives the
//! game through the API each tick. Workers host matches of any game as
//! `Box<dyn HostedMatch>`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tickforge_api::{
    Entities, EntityChange, Events, Game, GameCounters, InputInfo, MatchEnd, MatchSetup, Refused,
    Seat, StepContext, Target, Tick, ViewTime, MAX_MESSAGES_PER_TICK,
};
use tickforge_proto::msg::{self, ClientMsg, Event, ServerMsg};
use tickforge_proto::reliable::{Endpoint, ReliableError};
use tickforge_proto::{ClientIndex, MatchId};
use tickforge_replication::{ReplicationConfig, Replicator};
use tickforge_sim::hint::prefetch_lines;
use tickforge_telemetry::{Category, FrameRecord, Phase, Scopes};

/// Packets a client may send beyond one a tick before it counts as flooding: two seconds'
/// worth at 128 Hz, so a stalled client catching up is never mistaken for a flood.
const FLOOD_ALLOWANCE: u32 = 256;
/// Packets a client may send per tick on average (one input a tick, and room for jitter).
const PACKETS_PER_TICK: u32 = 2;
/// Largest jump of input sequence accepted: two seconds of inputs at 128 Hz.
const MAX_INPUT_JUMP: u32 = 256;

/// Why a client's packet was refused; the worker disconnects the client.
#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    /// The reliability layer refused the packet: the client broke a bound.
    #[error("broken link: {0}")]
    Link(ReliableError),
    /// The client sends packets much faster than one a tick.
    #[error("flooding")]
    Flood,
    /// The game refused one of the client's reliable messages.
    #[error("{0}")]
    Refused(tickforge_api::Refused),
}

/// What a match wants sent after a tick: one payload per connected seat, back to back in
/// one buffer that lives as long as the match. The worker seals each for its client and
/// queues it; nothing here knows of sockets or encryption.
#[derive(Debug, Default)]
pub struct Outbox {
    bytes: Vec<u8>,
    /// Each payload's client and the end of its bytes.
    ends: Vec<(ClientIndex, usize)>,
}

impl Outbox {
    /// An empty outbox with room for `payloads` payloads of `bytes_each` bytes.
    fn with_capacity(payloads: usize, bytes_each: usize) -> Outbox {
        Outbox {
            bytes: Vec::with_capacity(payloads * bytes_each),
            ends: Vec::with_capacity(payloads),
        }
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    fn push(&mut self, client: ClientIndex, payload: &[u8]) {
        self.bytes.extend_from_slice(payload);
        self.ends.push((client, self.bytes.len()));
    }

    /// Payloads queued.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Each payload with its client, in seat order.
    pub fn iter(&self) -> impl Iterator<Item = (ClientIndex, &[u8])> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|&(_, end)| end));
        (self.ends.iter())
            .zip(starts)
            .map(|(&(client, end), start)| (client, &self.bytes[start..end]))
    }
}

/// A seat and the connection in it.
struct SeatLink<I> {
    /// Packets the client may still send before it counts as flooding.
    allowance: u32,
    client: Option<ClientIndex>,
    /// Acks, reliable events and snapshot baselines of the connection: made with the match,
    /// reset in place for each client seated.
    link: Endpoint,
    /// Newest snapshot tick the client acknowledged: its baseline for deltas.
    acked_tick: Option<u32>,
    /// Newest input received, applied at the next tick.
    input: I,
    /// The moment of the world the client showed when it made `input`.
    view: ViewTime,
    /// Sequence of `input`.
    newest_seq: u32,
    /// Newest sequence applied to the game (echoed in snapshots as `input_ack`).
    applied_seq: u32,
    /// Reliable messages the link must have acknowledged before the client is sent a
    /// snapshot: through the [`Event::Epoch`] of the match's latest start over, so that no
    /// snapshot of the new match reaches the client before the event does (an unreliable
    /// snapshot overtakes an event that waits behind a lost one, or that found no room).
    epoch_mark: u64,
    /// Reliable messages the client sent since the last tick.
    messages: u32,
    /// The link could not take a reliable message for the client (its queue is full: it
    /// stopped acknowledging): its stream has a hole, so the worker disconnects it.
    kicked: bool,
}

impl<I: Default> SeatLink<I> {
    /// A free seat; its link's memory is reserved now, once.
    fn new(now: Instant) -> Self {
        SeatLink {
            allowance: 0,
            client: None,
            link: Endpoint::new(msg::link_config(), now),
            acked_tick: None,
            input: I::default(),
            view: ViewTime::default(),
            newest_seq: 0,
            applied_seq: 0,
            epoch_mark: 0,
            messages: 0,
            kicked: false,
        }
    }

    /// Frees the seat, keeping its link's memory.
    fn clear(&mut self) {
        self.allowance = 0;
        self.client = None;
        self.acked_tick = None;
        self.input = I::default();
        self.view = ViewTime::default();
        self.newest_seq = 0;
        self.applied_seq = 0;
        self.epoch_mark = 0;
        self.messages = 0;
        self.kicked = false;
    }
}

/// A match of game `G` hosted by a worker. Sockets belong to the worker; the match sees
/// plain data.
pub struct Match<G: Game> {
    id: MatchId,
    /// Times the match has started over (announced as [`Event::Epoch`]).
    epoch: u32,
    config: Arc<G::Config>,
    setup: MatchSetup,
    game: G,
    /// The game's entity ids, and the states it wrote this tick.
    entities: Entities,
    /// The game's reliable events since they were last queued on the links: the clients'
    /// messages' and the step's, sent together after the step (or a join's, at once).
    events: Events,
    /// Indices into `events` of those to every seat, in order.
    to_all: Vec<u32>,
    /// Seat and index into `events` of those to one seat.
    to_one: Vec<(u16, u32)>,
    seats: Vec<SeatLink<G::Input>>,
    /// The game's tick: ticks stepped since the match (re)started.
    tick: Tick,
    /// What each client is sent: relevancy, priority, budgets and deltas.
    replicator: Replicator,
    /// One snapshot body, before it becomes a message.
    body: Vec<u8>,
    /// This tick's packets, one per connected seat, before the worker seals them.
    outbox: Outbox,
    /// One message, before the reliability layer packs it.
    message: Vec<u8>,
    /// One packet, before it joins the outbox.
    packet: Vec<u8>,
    start: Instant,
    period_ns: u64,
    counters: TrafficCounters,
    /// Clients whose link could not take a reliable message, for the worker to disconnect
    /// ([`HostedMatch::take_kicked`]).
    kicked: Vec<ClientIndex>,
    /// Replication counters of this match's earlier runs (a finished match starts over
    /// with a new replicator).
    past_replication: tickforge_replication::ReplicationStats,
    /// The game's counters of this match's earlier runs.
    past_game: GameCounters,
}

/// Queues the reliable `message` on `seat`'s link. A queue this full is a client that
/// stopped acknowledging (or the message is over the link's largest): its reliable stream
/// would have a hole, so it is handed to the worker to disconnect rather than left to play
/// on wrong.
fn queue_event<I>(
    seat: &mut SeatLink<I>,
    client: ClientIndex,
    message: &[u8],
    counters: &mut TrafficCounters,
    kicked: &mut Vec<ClientIndex>,
) {
    if seat.link.send_reliable(message).is_err() {
        counters.dropped_events += 1;
        if !seat.kicked {
            seat.kicked = true;
            kicked.push(client);
        }
    }
}

/// Ticks per second of a tick `period_ns` long.
fn tick_hz(period_ns: u64) -> u16 {
    (1_000_000_000 / period_ns).min(u64::from(u16::MAX)) as u16
}

impl<G: Game> Match<G> {
    /// A match whose tick 0 is due at `start`. Reserves everything its ticks use, a
    /// reliable link per seat among it.
    pub fn new(id: MatchId, config: Arc<G::Config>, setup: MatchSetup, start: Instant) -> Self {
        let seats = usize::from(setup.seats);
        let max_entities = G::max_entities(&config, setup.seats).max(1);
        let mut entities = Entities::new(max_entities);
        let game = G::new(&config, &setup, &mut entities);
        let replication = ReplicationConfig {
            max_entities: usize::from(max_entities),
            max_connections: seats.max(1),
            rate_by_distance: G::rate_by_distance(&config),
            // `TICKFORGE_REPLICATION_PLAN=0`: every write weighs, to compare.
            plan_ahead: std::env::var_os("TICKFORGE_REPLICATION_PLAN").is_none_or(|v| v != "0"),
            ..ReplicationConfig::at_tick_hz(setup.tick_hz)
        };
        Match {
            id,
            epoch: 0,
            config,
            setup,
            game,
            entities,
            events: Events::with_capacity(seats * 4 + 16, 16),
            to_all: Vec::with_capacity(seats * 4 + 16),
            to_one: Vec::with_capacity(seats * 4 + 16),
            seats: (0..seats).map(|_| SeatLink::new(start)).collect(),
            tick: Tick(0),
            replicator: Replicator::new(replication, G::schema()),
            body: Vec::with_capacity(tickforge_proto::MAX_PACKET_BYTES),
            outbox: Outbox::with_capacity(seats, tickforge_proto::MAX_PACKET_BYTES),
            message: Vec::with_capacity(tickforge_proto::MAX_PACKET_BYTES),
            packet: Vec::with_capacity(tickforge_proto::MAX_PACKET_BYTES),
            start,
            period_ns: 1_000_000_000 / u64::from(setup.tick_hz),
            counters: TrafficCounters::default(),
            kicked: Vec::with_capacity(seats),
            past_replication: Default::default(),
            past_game: GameCounters::default(),
        }
    }

    /// The game's state.
    pub fn game(&self) -> &G {
        &self.game
    }

    /// The link of `seat` for a test to look at.
    #[cfg(test)]
    pub(crate) fn link(&self, seat: Seat) -> &Endpoint {
        &self.seats[seat.index()].link
    }

    /// Queues the events the game left in `self.events` on its targets' links: each
    /// seated client's, in the order the game queued them, as one reliable message (more
    /// only past the link's largest message), so a burst to every seat (a round's
    /// revivals, a wave of kills in a crowd) costs each link one message of its queue, not
    /// one per event.
    fn send_events(&mut self) {
        if self.events.is_empty() {
            return;
        }
        let seats = self.seats.len();
        self.to_all.clear();
        self.to_one.clear();
        for (i, (to, _)) in self.events.iter().enumerate() {
            match to {
                Target::All => self.to_all.push(i as u32),
                Target::Seat(s) if s.index() < seats => self.to_one.push((s.0, i as u32)),
                Target::Seat(_) => {}
            }
        }
        // By seat, then in the order queued (each pair is unique).
        self.to_one.sort_unstable();
        let mut one = 0;
        for (i, seat) in self.seats.iter_mut().enumerate() {
            let (mut a, mut o) = (0, one);
            while one < self.to_one.len() && usize::from(self.to_one[one].0) == i {
                one += 1;
            }
            let Some(client) = seat.client else {
                continue;
            };
            self.message.clear();
            loop {
                // The next of this seat's events: to all or to it alone, whichever came first.
                let next_all = self.to_all.get(a).copied();
                let next_one = (o < one).then(|| self.to_one[o].1);
                let e = match (next_all, next_one) {
                    (Some(x), Some(y)) if y < x => {
                        o += 1;
                        y
                    }
                    (Some(x), _) => {
                        a += 1;
                        x
                    }
                    (None, Some(y)) => {
                        o += 1;
                        y
                    }
                    (None, None) => break,
                };
                let (_, bytes) = self.events.get(e as usize).expect("indexed above");
                if !self.message.is_empty()
                    && msg::with_game_event(&self.message, bytes.len()) > msg::MAX_EVENT_BYTES
                {
                    queue_event(
                        seat,
                        client,
                        &self.message,
                        &mut self.counters,
                        &mut self.kicked,
                    );
                    self.message.clear();
                }
                msg::push_game_event(&mut self.message, bytes);
            }
            if !self.message.is_empty() {
                queue_event(
                    seat,
                    client,
                    &self.message,
                    &mut self.counters,
                    &mut self.kicked,
                );
            }
        }
        self.events.clear();
    }

    /// Takes the entity changes the game wrote into replication.
    fn push_entities(&mut self) {
        for change in self.entities.drain() {
            match change {
                EntityChange::Set {
                    id,
                    position,
                    lanes,
                } => self.replicator.set_entity(id, position, &lanes),
                EntityChange::Destroyed(id) => self.replicator.remove_entity(id),
            }
        }
    }

    /// Connects `seat` to replication, with its own entity as the game says.
    fn connect_replication(&mut self, seat: Seat) {
        let own = self.game.view(seat).own.map(|e| e.net_id());
        self.replicator.connect(seat.index(), own);
    }
}

impl<G: Game> HostedMatch for Match<G> {
    fn id(&self) -> MatchId {
        self.id
    }

    fn game_name(&self) -> &'static str {
        G::NAME
    }

    fn epoch(&self) -> u32 {
        self.epoch
    }

    fn next_deadline(&self) -> Instant {
        self.deadline_of(self.tick)
    }

    fn deadline_of(&self, tick: Tick) -> Instant {
        self.start + Duration::from_nanos(u64::from(tick.0) * self.period_ns)
    }

    fn tick(&self) -> Tick {
        self.tick
    }

    fn period(&self) -> Duration {
        Duration::from_nanos(self.period_ns)
    }

    fn seats(&self) -> usize {
        self.seats.len()
    }

    fn seat(&mut self, now: Instant, client: ClientIndex, preferred: Option<Seat>) -> Option<Seat> {
        // Events the clients' messages raised go to those seated before this one.
        self.send_events();
        let free = |i: usize| self.seats.get(i).is_some_and(|s| s.client.is_none());
        let i = match preferred.map(Seat::index) {
            Some(p) if free(p) => p,
            _ => self.seats.iter().position(|s| s.client.is_none())?,
        };
        let seat = Seat(i as u16);
        let seats = self.seats.len() as u16;
        let link = &mut self.seats[i];
        link.clear();
        link.link.reset(now);
        let welcome = Event::Welcome {
            match_id: self.id.0,
            seat: seat.0,
            tick_hz: tick_hz(self.period_ns),
            seats,
            entities: self.entities.capacity(),
            schema: G::schema().fingerprint(),
            epoch: self.epoch,
        };
        self.message.clear();
        welcome.encode(&mut self.message);
        // A fresh link's queue is empty: the first message always fits.
        link.link
            .send_reliable(&self.message)
            .expect("an empty send queue takes a welcome");
        link.client = Some(client);
        link.allowance = FLOOD_ALLOWANCE;
        // What the game wants a joiner told, ahead of the first snapshot.
        self.game.join(seat, &mut self.events);
        self.send_events();
        self.connect_replication(seat);
        Some(seat)
    }

    fn receive(&mut self, now: Instant, seat: Seat, packet: &[u8]) -> Result<(), ReceiveError> {
        let Some(s) = self.seats.get_mut(seat.index()) else {
            return Ok(());
        };
        // A client sends one packet a tick; the allowance absorbs jitter and bursts after a
        // stall, and a client that keeps sending faster drains it and is disconnected.
        if s.allowance == 0 {
            return Err(ReceiveError::Flood);
        }
        s.allowance -= 1;
        if s.client.is_none() {
            return Ok(());
        }
        let link = &mut s.link;
        let input = match link.read_packet(now, packet).map_err(ReceiveError::Link)? {
            Some((_tag, body)) => match ClientMsg::decode(body) {
                Ok(ClientMsg::Input {
                    seq,
                    view_tick,
                    view_frac,
                    cmd: bytes,
                }) => G::decode_input(bytes).map(|input| {
                    let view = ViewTime {
                        tick: Tick(view_tick),
                        frac: view_frac,
                    };
                    (seq, input, view)
                }),
                Err(_) => None,
            },
            None => None,
        };
        // Reliable messages from the client go to the game, in order; one it refuses
        // disconnects the client. The events they raise wait for the tick's, to go with
        // them in one message per client.
        let mut refused = None;
        while link.poll_reliable(&mut self.packet) {
            s.messages = s.messages.saturating_add(1);
            if refused.is_some() {
                continue;
            }
            if s.messages > MAX_MESSAGES_PER_TICK {
                refused = Some(Refused(
                    "more reliable messages in a tick than a match takes",
                ));
            } else if let Err(e) = self.game.message(seat, &self.packet, &mut self.events) {
                refused = Some(e);
            }
        }
        let mut acked = None;
        while let Some(tick) = link.poll_acked_tag() {
            acked = Some(acked.map_or(tick, |t: u32| t.max(tick)));
            self.replicator.on_ack(seat.index(), tick);
        }
        let s = &mut self.seats[seat.index()];
        if let Some(tick) = acked {
            s.acked_tick = Some(s.acked_tick.map_or(tick, |t| t.max(tick)));
        }
        if let Some(e) = refused {
            return Err(ReceiveError::Refused(e));
        }
        match input {
            Some((seq, input, view)) => self.queue_input(seat, seq, input, view),
            None => self.counters.bad_inputs += 1,
        }
        Ok(())
    }

    fn prefetch_seat(&self, seat: Seat, deep: bool) {
        let Some(s) = self.seats.get(seat.index()) else {
            return;
        };
        if deep {
            s.link.prefetch_read();
        } else {
            prefetch_lines(s);
        }
        self.replicator.prefetch_ack(seat.index(), deep);
    }

    fn is_over(&self) -> bool {
        self.game.is_over()
    }

    fn finish_if_over(&mut self) -> Option<MatchEnd> {
        if !self.game.is_over() {
            return None;
        }
        // The old run's last events, ahead of the epoch.
        self.send_events();
        let end = self.game.finish();
        self.past_game = merged(self.past_game, self.game.counters());
        self.start = self.next_deadline();
        self.tick = Tick(0);
        self.entities.reset();
        self.game = G::new(&self.config, &self.setup, &mut self.entities);
        // Snapshot ticks start again from 0: old baselines mean nothing now.
        let config = *self.replicator.config();
        self.past_replication = self.replication_stats();
        self.replicator = Replicator::new(config, G::schema());
        // Announced in the reliable stream, ahead of every event of the new run: each
        // client drops its old baselines and view on it, and gets no snapshot of the new
        // run before it has the event (see `SeatLink::epoch_mark`).
        self.epoch = self.epoch.wrapping_add(1);
        self.message.clear();
        Event::Epoch { epoch: self.epoch }.encode(&mut self.message);
        for i in 0..self.seats.len() {
            let seat = &mut self.seats[i];
            seat.acked_tick = None;
            let Some(client) = seat.client else {
                continue;
            };
            if seat.link.send_reliable(&self.message).is_err() {
                // A queue this full is a client that stopped acknowledging: without the
                // epoch it would read the new run against the old one's baselines, so it
                // is disconnected, and gets nothing of the new run meanwhile.
                self.counters.dropped_events += 1;
                seat.epoch_mark = u64::MAX;
                if !seat.kicked {
                    seat.kicked = true;
                    self.kicked.push(client);
                }
                continue;
            }
            seat.epoch_mark = seat.link.stats().messages_queued;
            // The new game has every seat empty: it is told who is still here, and tells
            // each what a joiner needs (after the epoch, in the same reliable stream).
            self.game.join(Seat(i as u16), &mut self.events);
            self.connect_replication(Seat(i as u16));
        }
        self.send_events();
        Some(end)
    }

    fn replication_stats(&self) -> tickforge_replication::ReplicationStats {
        self.past_replication.merged(&self.replicator.stats())
    }

    fn game_counters(&self) -> GameCounters {
        merged(self.past_game, self.game.counters())
    }

    fn round(&self) -> Option<u32> {
        self.game.round()
    }

    fn acked_tick(&self, seat: Seat) -> Option<u32> {
        self.seats.get(seat.index())?.acked_tick
    }

    fn unseat(&mut self, seat: Seat) {
        if let Some(s) = self.seats.get_mut(seat.index()) {
            s.clear();
            self.replicator.disconnect(seat.index());
            self.game.leave(seat);
        }
    }

    fn connected(&self) -> usize {
        self.seats.iter().filter(|s| s.client.is_some()).count()
    }

    fn run_tick(&mut self, now: Instant, scopes: &Scopes) -> FrameRecord {
        scopes.begin_frame();
        // What replication will read of the entities starts loading while the game steps.
        self.replicator.prefetch_tick(self.tick.0);

        scopes.phase(Phase::Simulate);
        {
            let _g = scopes.scope(Category::Gameplay);
            for (i, seat) in self.seats.iter_mut().enumerate() {
                seat.allowance = (seat.allowance + PACKETS_PER_TICK).min(FLOOD_ALLOWANCE);
                seat.messages = 0;
                if seat.client.is_some() && seat.newest_seq != seat.applied_seq {
                    let info = InputInfo {
                        seq: seat.newest_seq,
                        view: seat.view,
                    };
                    self.game.apply_input(Seat(i as u16), &seat.input, info);
                    seat.applied_seq = seat.newest_seq;
                }
            }
        }
        let tick = self.tick.0;
        {
            let mut cx = StepContext {
                tick: self.tick,
                scopes,
                entities: &mut self.entities,
                events: &mut self.events,
                // What push_entities placed after the last step: a tick behind, by design.
                grid: Some(self.replicator.grid()),
            };
            self.game.step(&mut cx);
        }
        self.tick = self.tick.next();
        {
            let _n = scopes.scope(Category::Network);
            self.send_events();
        }

        scopes.phase(Phase::Replicate);
        {
            let _r = scopes.scope(Category::Replication);
            self.replicator.begin_tick(tick);
            self.push_entities();
            self.outbox.clear();
            for i in 0..self.seats.len() {
                let seat = &mut self.seats[i];
                let Some(client) = seat.client else {
                    continue;
                };
                let link = &mut seat.link;
                if link.stats().messages_acked < seat.epoch_mark {
                    // The client may not have the new run's epoch yet: acks and events
                    // only. Messages leave the send queue in order, so this many acked is
                    // the epoch event and everything before it.
                    link.write_packet(now, None, &mut self.packet);
                    self.outbox.push(client, &self.packet);
                    continue;
                }
                // The packet history's slot the write below replaces, loading while the
                // snapshot is built.
                link.prefetch_write();
                let view = self.game.view(Seat(i as u16));
                // One packet a tick: the snapshot takes what the reliable events' reserved
                // share leaves.
                let budget = link
                    .max_unreliable_bytes()
                    .saturating_sub(msg::SNAPSHOT_HEADER_BYTES);
                self.body.clear();
                let written =
                    self.replicator
                        .write(i, &view.viewer, view.visible, budget, &mut self.body);
                self.counters.snapshots += 1;
                self.counters.body_bytes += self.body.len() as u64;
                let shown = usize::from(written.states)
                    + usize::from(written.deferred)
                    + usize::from(written.waiting);
                self.counters.full_state_bytes += G::full_state_bytes(shown) as u64;
                self.message.clear();
                ServerMsg::Snapshot {
                    tick,
                    input_ack: seat.applied_seq,
                    body: &self.body,
                }
                .encode(&mut self.message);
                link.write_packet(now, Some((tick, &self.message)), &mut self.packet);
                self.outbox.push(client, &self.packet);
            }
        }
        scopes.end_frame()
    }

    fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    fn counters(&self) -> &TrafficCounters {
        &self.counters
    }

    fn counters_mut(&mut self) -> &mut TrafficCounters {
        &mut self.counters
    }

    fn take_receive_ns(&mut self) -> u64 {
        std::mem::take(&mut self.counters.pending_receive_ns)
    }

    fn take_kicked(&mut self) -> Option<ClientIndex> {
        self.kicked.pop()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl<G: Game> Match<G> {
    /// Queues an input for `seat`; older or repeated sequences are ignored.
    pub fn queue_input(&mut self, seat: Seat, seq: u32, input: G::Input, view: ViewTime) {
        let Some(s) = self.seats.get_mut(seat.index()) else {
            return;
        };
        if seq <= s.newest_seq {
            return;
        }
        // One input a tick: a sequence far ahead of the newest is no client's honest input
        // (a lost run of packets skips a few), so it is dropped and counted.
        if seq - s.newest_seq > MAX_INPUT_JUMP && s.newest_seq != 0 {
            self.counters.far_inputs += 1;
            return;
        }
        s.newest_seq = seq;
        s.input = input;
        s.view = view;
    }
}

fn merged(a: GameCounters, b: GameCounters) -> GameCounters {
    GameCounters {
        rewinds: a.rewinds + b.rewinds,
        rewinds_clamped: a.rewinds_clamped + b.rewinds_clamped,
    }
}

/// A match of any game, as a worker hosts it: what the worker calls, without knowing the
/// game. One virtual call per match per tick and per packet, nothing per entity.
pub trait HostedMatch: Send {
    /// The match id.
    fn id(&self) -> MatchId;
    /// The game's name ([`Game::NAME`]).
    fn game_name(&self) -> &'static str;
    /// Times the match has started over: 0 in its first run.
    fn epoch(&self) -> u32;
    /// The absolute deadline of the next tick: `start + tick × period`, so no drift builds up.
    fn next_deadline(&self) -> Instant;
    /// The absolute deadline of `tick`.
    fn deadline_of(&self, tick: Tick) -> Instant;
    /// The next tick to run (ticks since the match started or started over).
    fn tick(&self) -> Tick;
    /// One tick's length.
    fn period(&self) -> Duration;
    /// Seats in the match.
    fn seats(&self) -> usize;
    /// Seats `client` in `preferred` if it is free, else in the first free seat; `None`
    /// when the match is full.
    fn seat(&mut self, now: Instant, client: ClientIndex, preferred: Option<Seat>) -> Option<Seat>;
    /// Takes one packet from `seat`'s connection: acks, the game's reliable messages, and
    /// the input it carries. An error means the client broke the protocol or the game
    /// refused it; the caller disconnects it.
    fn receive(&mut self, now: Instant, seat: Seat, packet: &[u8]) -> Result<(), ReceiveError>;
    /// Starts loading what [`HostedMatch::receive`] will read of `seat`: a hint, which
    /// changes nothing. `deep` false, the seat's own lines (its link); `deep` true, given
    /// once those have arrived, what they point to (the link's packet histories,
    /// replication's ring). The worker hints the datagrams a few ahead of the one it reads:
    /// hundreds of connections' seats are cold by the time their inputs arrive.
    fn prefetch_seat(&self, seat: Seat, deep: bool) {
        let _ = (seat, deep);
    }
    /// True once the game says the match is over: [`HostedMatch::finish_if_over`] then has
    /// its result.
    fn is_over(&self) -> bool;
    /// When the match has ended: its result, and the match starts over (a new game, the
    /// same seats and links) at its next deadline. Allocates, once a match: call it
    /// between ticks, never inside one (the worker calls it after its send).
    fn finish_if_over(&mut self) -> Option<MatchEnd>;
    /// Replication's counters for this match over all its runs.
    fn replication_stats(&self) -> tickforge_replication::ReplicationStats;
    /// The game's counters over all its runs.
    fn game_counters(&self) -> GameCounters;
    /// The game's round after its last step ([`Game::round`]); `None`: no rounds.
    fn round(&self) -> Option<u32>;
    /// Newest snapshot tick `seat`'s client acknowledged.
    fn acked_tick(&self, seat: Seat) -> Option<u32>;
    /// Frees `seat`; the game is told its client left.
    fn unseat(&mut self, seat: Seat);
    /// Connected clients.
    fn connected(&self) -> usize;
    /// Runs one tick: inputs, the game's step, events, and a packet for every connected
    /// seat in [`HostedMatch::outbox`] (replacing the last tick's). Allocates nothing the
    /// game does not. Returns the tick's cost; the caller adds what it does for the match
    /// outside (sealing the outbox, its share of the batched receive and send).
    fn run_tick(&mut self, now: Instant, scopes: &Scopes) -> FrameRecord;
    /// What the last tick wants sent: a packet per connected seat, to be sealed.
    fn outbox(&self) -> &Outbox;
    /// The match's drop and replication counters.
    fn counters(&self) -> &TrafficCounters;
    /// The same, to add to.
    fn counters_mut(&mut self) -> &mut TrafficCounters;
    /// Receive work done for this match since its last tick (nanoseconds), to charge to
    /// the frame of its next tick; zero after.
    fn take_receive_ns(&mut self) -> u64;
    /// A client whose link could not take a reliable message (it stopped acknowledging):
    /// the worker disconnects it and frees its seat. `None` when there is none.
    fn take_kicked(&mut self) -> Option<ClientIndex>;
    /// The match as `Any`, for a test or a studio's tool to reach its game
    /// (`downcast_ref::<Match<MyGame>>()`).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// What a match counts of its traffic, summed by the worker's report.
#[derive(Clone, Copy, Debug, Default)]
pub struct TrafficCounters {
    /// Receive work done for this match since its last tick, charged to its next frame.
    pub pending_receive_ns: u64,
    /// Of that, the share of the latest wake-up's receive: the match's own work that
    /// precedes its tick in that wake-up, so not lateness (a crowd of a thousand spends
    /// milliseconds receiving its own inputs before its tick can start).
    pub wake_receive_ns: u64,
    /// Packets whose unreliable part was missing or not a valid input (ack-only packets
    /// from a client count here too).
    pub bad_inputs: u64,
    /// Inputs dropped for a sequence too far ahead of the client's newest.
    pub far_inputs: u64,
    /// Reliable messages (a tick's events for one client, an epoch) a client's link refused:
    /// its send queue was full, or the message was over the link's largest.
    pub dropped_events: u64,
    /// Snapshots written.
    pub snapshots: u64,
    /// Their body bytes.
    pub body_bytes: u64,
    /// What the same snapshots would have cost as full states (every entity they may
    /// show, every field).
    pub full_state_bytes: u64,
}

#[cfg(test)]
mod guard_tests;
#[cfg(test)]
mod tests;
