//! One match: its world, its seats, and its tick.
//!
//! The match sees plain data: packets in ([`Match::receive`]), and after each tick one
//! payload per connected seat in its [`Outbox`], which the worker seals and sends. It never
//! calls back into the worker or the transport.

use std::time::{Duration, Instant};

use tickforge_game::replay::Recorder;
use tickforge_game::rules::{Phase as RoundPhase, RulesEvent};
use tickforge_game::{PlayerSlot, Tick, UserCmd, ViewTime, World, WorldConfig};
use tickforge_proto::msg::{self, ClientMsg, Event, ServerMsg};
use tickforge_proto::reliable::{Endpoint, ReliableError};
use tickforge_proto::{ClientIndex, MatchId};
use tickforge_replication::{NetId, ReplicationConfig, Replicator};
use tickforge_shooter::{cmd, ENTITY_BYTES, HEADER_BYTES};
use tickforge_telemetry::{Category, FrameRecord, Phase, Scopes};

/// Packets a client may send beyond one a tick before it counts as flooding: two seconds'
/// worth at 128 Hz, so a stalled client catching up is never mistaken for a flood.
const FLOOD_ALLOWANCE: u32 = 256;
/// Packets a client may send per tick on average (one input a tick, and room for jitter).
const PACKETS_PER_TICK: u32 = 2;
/// Bytes reserved for a match's action file: about a minute of 10 players at 128 Hz, so
/// recording seldom grows the buffer inside a tick.
const RECORDING_BYTES: usize = 1 << 20;
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

/// A player slot and the connection in it.
struct Seat {
    /// Packets the client may still send before it counts as flooding.
    allowance: u32,
    client: Option<ClientIndex>,
    /// Acks, reliable events and snapshot baselines of the connection: made with the match,
    /// reset in place for each client seated.
    link: Endpoint,
    /// Newest snapshot tick the client acknowledged: its baseline for deltas.
    acked_tick: Option<u32>,
    /// Newest command received, applied at the next tick.
    cmd: UserCmd,
    /// The moment of the world the client showed when it made `cmd`.
    view: ViewTime,
    /// Sequence of `cmd`.
    newest_seq: u32,
    /// Newest sequence applied to the world (echoed in snapshots as `input_ack`).
    applied_seq: u32,
    /// Reliable messages the link must have acknowledged before the client is sent a
    /// snapshot: through the [`Event::Epoch`] of the match's latest start over, so that no
    /// snapshot of the new match reaches the client before the event does (an unreliable
    /// snapshot overtakes an event that waits behind a lost one, or that found no room).
    epoch_mark: u64,
}

impl Seat {
    /// A free seat; its link's memory is reserved now, once.
    fn new(now: Instant) -> Seat {
        Seat {
            allowance: 0,
            client: None,
            link: Endpoint::new(msg::link_config(), now),
            acked_tick: None,
            cmd: UserCmd::default(),
            view: ViewTime::default(),
            newest_seq: 0,
            applied_seq: 0,
            epoch_mark: 0,
        }
    }

    /// Frees the seat, keeping its link's memory.
    fn clear(&mut self) {
        self.allowance = 0;
        self.client = None;
        self.acked_tick = None;
        self.cmd = UserCmd::default();
        self.view = ViewTime::default();
        self.newest_seq = 0;
        self.applied_seq = 0;
        self.epoch_mark = 0;
    }

    /// The seat's link, when a client sits in it.
    fn link_mut(&mut self) -> Option<&mut Endpoint> {
        self.client.is_some().then_some(&mut self.link)
    }
}

/// A match hosted by a worker. Sockets belong to the worker; the match sees plain data.
pub struct Match {
    id: MatchId,
    /// Times the match has started over (announced as [`Event::Epoch`]).
    epoch: u32,
    world: World,
    seats: Vec<Seat>,
    /// What each client is sent: relevancy, priority, budgets and deltas.
    replicator: Replicator,
    /// One snapshot body, before it becomes a message.
    body: Vec<u8>,
    /// This tick's packets, one per connected seat, before the worker seals them.
    outbox: Outbox,
    /// One snapshot message, before the reliability layer packs it.
    message: Vec<u8>,
    /// One packet, before it joins the outbox.
    packet: Vec<u8>,
    start: Instant,
    period_ns: u64,
    /// Receive work done for this match since its last tick, charged to its next frame.
    pub(crate) pending_receive_ns: u64,
    /// Packets whose unreliable part was missing or not a valid input (ack-only packets
    /// from a client count here too).
    pub(crate) bad_inputs: u64,
    /// Inputs dropped for a sequence too far ahead of the client's newest.
    pub(crate) far_inputs: u64,
    /// Every input applied, when the server records action files.
    recorder: Option<Recorder>,
    record: bool,
    /// Who was alive after the last tick, by slot: changes go to every client as
    /// [`Event::Alive`].
    alive: Vec<bool>,
    /// Reliable events refused because a client's send queue was full.
    pub(crate) dropped_events: u64,
    /// Shots fired, and of them those whose view was older than the max rewind.
    pub(crate) shots_fired: u64,
    pub(crate) shots_clamped: u64,
    /// Replication counters: snapshots written, their body bytes, and what the same
    /// snapshots would have cost as full states (every entity they may show, every field).
    pub(crate) snapshots: u64,
    pub(crate) body_bytes: u64,
    pub(crate) full_state_bytes: u64,
    /// Replication counters of this match's earlier runs (a finished match starts over
    /// with a new replicator).
    past_replication: tickforge_replication::ReplicationStats,
}

/// The replication settings of a match of `world`: one entity and one connection per
/// player, at its tick rate; `base` gives the rest.
pub fn replication_config(world: &WorldConfig, base: ReplicationConfig) -> ReplicationConfig {
    ReplicationConfig {
        max_entities: usize::from(world.players).max(1),
        max_connections: usize::from(world.players).max(1),
        tick_hz: world.tick_hz,
        ..base
    }
}

/// Ticks per second of a tick `period_ns` long.
fn tick_hz(period_ns: u64) -> u16 {
    (1_000_000_000 / period_ns).min(u64::from(u16::MAX)) as u16
}

/// The round's phase and score as an [`Event::Round`].
fn round_event(world: &World) -> Event {
    let state = world.rules().round_state();
    let score = state.score();
    Event::Round {
        round: state.round(),
        phase: match state.phase() {
            RoundPhase::Buy => 0,
            RoundPhase::Combat => 1,
            RoundPhase::RoundEnd => 2,
            RoundPhase::MatchOver => 3,
        },
        attackers: score.attackers,
        defenders: score.defenders,
    }
}

impl Match {
    /// A match whose tick 0 is due at `start`. Reserves everything its ticks use, a
    /// reliable link per seat among it; the built-in map is shared, not copied.
    pub fn new(id: MatchId, config: WorldConfig, start: Instant) -> Self {
        let players = usize::from(config.players);
        Match {
            id,
            epoch: 0,
            world: World::new(config),
            seats: (0..players).map(|_| Seat::new(start)).collect(),
            replicator: Replicator::new(
                replication_config(&config, ReplicationConfig::default()),
                tickforge_shooter::schema(),
            ),
            body: Vec::with_capacity(tickforge_proto::MAX_PACKET_BYTES),
            outbox: Outbox::with_capacity(players, tickforge_proto::MAX_PACKET_BYTES),
            message: Vec::with_capacity(tickforge_proto::MAX_PACKET_BYTES),
            packet: Vec::with_capacity(tickforge_proto::MAX_PACKET_BYTES),
            start,
            period_ns: 1_000_000_000 / u64::from(config.tick_hz),
            pending_receive_ns: 0,
            bad_inputs: 0,
            far_inputs: 0,
            recorder: None,
            record: false,
            alive: vec![true; players],
            dropped_events: 0,
            shots_fired: 0,
            shots_clamped: 0,
            snapshots: 0,
            body_bytes: 0,
            full_state_bytes: 0,
            past_replication: Default::default(),
        }
    }

    /// Records every input this match applies from now on, for an action file.
    pub fn record_actions(&mut self) {
        self.record = true;
        self.recorder = Some(Recorder::new(self.world.config(), RECORDING_BYTES));
    }

    /// The match id.
    pub fn id(&self) -> MatchId {
        self.id
    }

    /// Times the match has started over: 0 in its first run.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The world.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The absolute deadline of the next tick: `start + tick × period`, so no drift builds up.
    pub fn next_deadline(&self) -> Instant {
        self.deadline_of(self.world.tick())
    }

    /// The absolute deadline of `tick`.
    pub fn deadline_of(&self, tick: Tick) -> Instant {
        self.start + Duration::from_nanos(u64::from(tick.0) * self.period_ns)
    }

    /// One tick's length.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period_ns)
    }

    /// Seats `client` in `preferred` if it is free, else in the first free slot; `None`
    /// when the match is full.
    pub fn seat(
        &mut self,
        now: Instant,
        client: ClientIndex,
        preferred: Option<PlayerSlot>,
    ) -> Option<PlayerSlot> {
        let free = |i: usize| self.seats.get(i).is_some_and(|s| s.client.is_none());
        let i = match preferred.map(|p| usize::from(p.0)) {
            Some(p) if free(p) => p,
            _ => self.seats.iter().position(|s| s.client.is_none())?,
        };
        let players = self.seats.len();
        let seat = &mut self.seats[i];
        seat.clear();
        seat.link.reset(now);
        let link = &mut seat.link;
        let welcome = Event::Welcome {
            match_id: self.id.0,
            slot: i as u8,
            tick_hz: tick_hz(self.period_ns),
            players: u8::try_from(players).unwrap_or(u8::MAX),
            epoch: self.epoch,
        };
        self.message.clear();
        welcome.encode(&mut self.message);
        // A fresh link's queue is empty: the first message always fits.
        link.send_reliable(&self.message)
            .expect("an empty send queue takes a welcome");
        // Where the match stands, then who is dead (a client starts out thinking everyone
        // alive): what a late joiner needs to make sense of the full state that follows.
        self.message.clear();
        round_event(&self.world).encode(&mut self.message);
        if link.send_reliable(&self.message).is_err() {
            self.dropped_events += 1;
        }
        for (slot, _) in self.alive.iter().enumerate().filter(|(_, a)| !**a) {
            self.message.clear();
            Event::Alive {
                slot: slot as u8,
                alive: false,
            }
            .encode(&mut self.message);
            if link.send_reliable(&self.message).is_err() {
                self.dropped_events += 1;
            }
        }
        seat.client = Some(client);
        seat.allowance = FLOOD_ALLOWANCE;
        self.replicator.connect(i, Some(NetId(i as u16)));
        Some(PlayerSlot(i as u8))
    }

    /// Takes one packet from `slot`'s connection: acks, events, and the input it carries.
    ///
    /// An error means the client broke the protocol; the caller disconnects it.
    pub fn receive(
        &mut self,
        now: Instant,
        slot: PlayerSlot,
        packet: &[u8],
    ) -> Result<(), ReceiveError> {
        let Some(seat) = self.seats.get_mut(usize::from(slot.0)) else {
            return Ok(());
        };
        // A client sends one packet a tick; the allowance absorbs jitter and bursts after a
        // stall, and a client that keeps sending faster drains it and is disconnected.
        if seat.allowance == 0 {
            return Err(ReceiveError::Flood);
        }
        seat.allowance -= 1;
        let Some(link) = seat.link_mut() else {
            return Ok(());
        };
        let input = match link.read_packet(now, packet).map_err(ReceiveError::Link)? {
            Some((_tag, body)) => match ClientMsg::decode(body) {
                Ok(ClientMsg::Input {
                    seq,
                    view_tick,
                    view_frac,
                    cmd: bytes,
                }) => cmd::decode(bytes).ok().map(|c| {
                    let view = ViewTime {
                        tick: Tick(view_tick),
                        frac: view_frac,
                    };
                    (seq, c, view)
                }),
                Err(_) => None,
            },
            None => None,
        };
        // Clients send no reliable messages yet; drain them so the window never stalls.
        while link.poll_reliable(&mut self.packet) {}
        let mut acked = None;
        while let Some(tick) = link.poll_acked_tag() {
            acked = Some(acked.map_or(tick, |t: u32| t.max(tick)));
            self.replicator.on_ack(usize::from(slot.0), tick);
        }
        let seat = &mut self.seats[usize::from(slot.0)];
        if let Some(tick) = acked {
            seat.acked_tick = Some(seat.acked_tick.map_or(tick, |t| t.max(tick)));
        }
        match input {
            Some((seq, c, view)) => self.queue_input(slot, seq, c, view),
            None => self.bad_inputs += 1,
        }
        Ok(())
    }

    /// True once the match has ended: [`Match::finish_if_over`] then has its result.
    pub fn is_over(&self) -> bool {
        self.world.rules().phase() == RoundPhase::MatchOver
    }

    /// When the match has ended: its result, and the match starts over (a new world on the
    /// same shared map, the same seats and links) at its next deadline. Allocates, once a
    /// match: call it between ticks, never inside one (the worker calls it after its send).
    pub fn finish_if_over(
        &mut self,
    ) -> Option<(tickforge_game::rules::MatchResult, Option<Vec<u8>>)> {
        let result = self.world.result()?;
        let actions = self.recorder.take().map(|r| r.finish(&self.world));
        self.start = self.next_deadline();
        self.world = self.world.restarted();
        // Snapshot ticks start again from 0: old baselines mean nothing now.
        let config = *self.replicator.config();
        self.past_replication = self.replication_stats();
        self.replicator = Replicator::new(config, tickforge_shooter::schema());
        // Announced in the reliable stream, ahead of every event of the new run: each
        // client drops its old baselines and view on it, and gets no snapshot of the new
        // run before it has the event (see `Seat::epoch_mark`).
        self.epoch = self.epoch.wrapping_add(1);
        self.message.clear();
        Event::Epoch { epoch: self.epoch }.encode(&mut self.message);
        for (i, seat) in self.seats.iter_mut().enumerate() {
            seat.acked_tick = None;
            if seat.client.is_some() {
                self.replicator.connect(i, Some(NetId(i as u16)));
                if seat.link.send_reliable(&self.message).is_err() {
                    // A queue this full is a client that stopped acknowledging.
                    self.dropped_events += 1;
                }
                seat.epoch_mark = seat.link.stats().messages_queued;
            }
        }
        if self.record {
            self.recorder = Some(Recorder::new(self.world.config(), RECORDING_BYTES));
        }
        Some((result, actions))
    }

    /// Replication's counters for this match over all its runs.
    pub fn replication_stats(&self) -> tickforge_replication::ReplicationStats {
        self.past_replication.merged(&self.replicator.stats())
    }

    /// Newest snapshot tick `slot`'s client acknowledged.
    pub fn acked_tick(&self, slot: PlayerSlot) -> Option<u32> {
        self.seats.get(usize::from(slot.0))?.acked_tick
    }

    /// Frees the seat of `slot`; the player stops where it is.
    pub fn unseat(&mut self, slot: PlayerSlot) {
        if let Some(seat) = self.seats.get_mut(usize::from(slot.0)) {
            seat.clear();
            self.replicator.disconnect(usize::from(slot.0));
            self.world.set_cmd(slot, UserCmd::default());
            // The world's input changed: the recording says so, or its replay would run
            // the player on with its last command.
            if let (Some(rec), Some(p)) = (
                self.recorder.as_mut(),
                self.world.players().get(usize::from(slot.0)),
            ) {
                rec.input(self.world.tick(), slot, &UserCmd::default(), p.view);
            }
        }
    }

    /// Connected players.
    pub fn connected(&self) -> usize {
        self.seats.iter().filter(|s| s.client.is_some()).count()
    }

    /// Queues a command for `slot`; older or repeated sequences are ignored.
    pub fn queue_input(&mut self, slot: PlayerSlot, seq: u32, cmd: UserCmd, view: ViewTime) {
        let Some(seat) = self.seats.get_mut(usize::from(slot.0)) else {
            return;
        };
        if seq <= seat.newest_seq {
            return;
        }
        // One input a tick: a sequence far ahead of the newest is no client's honest input
        // (a lost run of packets skips a few), so it is dropped and counted.
        if seq - seat.newest_seq > MAX_INPUT_JUMP && seat.newest_seq != 0 {
            self.far_inputs += 1;
            return;
        }
        seat.newest_seq = seq;
        seat.cmd = cmd;
        seat.view = view;
    }

    /// Queues this tick's reliable events: who died or came back, to everyone, then each
    /// shot's verdict to its shooter (the hit-registration measurement compares it with
    /// what the client saw; a death arrives before any verdict it explains). Sent before the
    /// snapshot, so they ride in its packet.
    fn send_events(&mut self) {
        for i in 0..self.world.events().len() {
            let event = match self.world.events()[i] {
                RulesEvent::Kill {
                    killer,
                    victim,
                    part,
                    ..
                } => Event::Kill {
                    killer: killer.0,
                    victim: victim.0,
                    part: body_part_code(part),
                },
                RulesEvent::RoundStarted { .. }
                | RulesEvent::CombatStarted { .. }
                | RulesEvent::RoundEnded { .. }
                | RulesEvent::MatchEnded { .. } => round_event(&self.world),
                _ => continue,
            };
            self.message.clear();
            event.encode(&mut self.message);
            for seat in &mut self.seats {
                if let Some(link) = seat.link_mut() {
                    if link.send_reliable(&self.message).is_err() {
                        self.dropped_events += 1;
                    }
                }
            }
        }
        for slot in 0..self.alive.len() {
            let alive = self.world.rules().is_alive(PlayerSlot(slot as u8));
            if alive == self.alive[slot] {
                continue;
            }
            self.alive[slot] = alive;
            self.message.clear();
            Event::Alive {
                slot: slot as u8,
                alive,
            }
            .encode(&mut self.message);
            for seat in &mut self.seats {
                if let Some(link) = seat.link_mut() {
                    if link.send_reliable(&self.message).is_err() {
                        self.dropped_events += 1;
                    }
                }
            }
        }
        for shot in self.world.shots() {
            self.shots_fired += 1;
            self.shots_clamped += u64::from(shot.clamped);
            let Some(seat) = self.seats.get_mut(usize::from(shot.shooter.0)) else {
                continue;
            };
            if seat.client.is_none() {
                continue;
            }
            let (victim, part) = shot.hit.map_or((msg::NONE, msg::NONE), |h| {
                (h.victim.0, body_part_code(h.part))
            });
            let landed = shot.landed;
            self.message.clear();
            Event::ShotResult {
                seq: seat.applied_seq,
                tick: shot.tick.0,
                victim,
                part,
                landed,
            }
            .encode(&mut self.message);
            if seat.link.send_reliable(&self.message).is_err() {
                self.dropped_events += 1;
            }
        }
    }

    /// Runs one tick: inputs, the world's step, events, and a packet for every connected
    /// seat in [`Match::outbox`] (replacing the last tick's). Allocates nothing.
    ///
    /// Returns the tick's cost; the caller adds what it does for the match outside
    /// (sealing the outbox, its share of the batched receive and send).
    pub fn run_tick(&mut self, now: Instant, scopes: &Scopes) -> FrameRecord {
        scopes.begin_frame();

        scopes.phase(Phase::Simulate);
        {
            let _g = scopes.scope(Category::Gameplay);
            for (i, seat) in self.seats.iter_mut().enumerate() {
                seat.allowance = (seat.allowance + PACKETS_PER_TICK).min(FLOOD_ALLOWANCE);
                if seat.client.is_some() && seat.newest_seq != seat.applied_seq {
                    self.world.set_cmd(PlayerSlot(i as u8), seat.cmd);
                    self.world.set_view_time(PlayerSlot(i as u8), seat.view);
                    if let Some(rec) = self.recorder.as_mut() {
                        rec.input(self.world.tick(), PlayerSlot(i as u8), &seat.cmd, seat.view);
                    }
                    seat.applied_seq = seat.newest_seq;
                }
            }
        }
        self.world.step(scopes);
        {
            let _n = scopes.scope(Category::Network);
            self.send_events();
        }

        scopes.phase(Phase::Replicate);
        {
            let _r = scopes.scope(Category::Replication);
            let tick = self.world.tick().0.wrapping_sub(1);
            // Push: only what the step wrote is quantized, once for every connection.
            self.replicator.begin_tick(tick);
            for slot in self.world.changed() {
                let state = tickforge_shooter::entity_state(&self.world, slot);
                tickforge_shooter::push(&mut self.replicator, NetId(u16::from(slot.0)), &state);
            }
            self.outbox.clear();
            for (i, seat) in self.seats.iter_mut().enumerate() {
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
                let slot = PlayerSlot(i as u8);
                let viewer = tickforge_shooter::viewer(&self.world.players()[i].state);
                // One packet a tick: the snapshot takes what the reliable events' reserved
                // share leaves.
                let budget = link
                    .max_unreliable_bytes()
                    .saturating_sub(msg::SNAPSHOT_HEADER_BYTES);
                self.body.clear();
                let written = self.replicator.write(
                    i,
                    &viewer,
                    Some(self.world.fow().row(slot)),
                    budget,
                    &mut self.body,
                );
                self.snapshots += 1;
                self.body_bytes += self.body.len() as u64;
                let shown = usize::from(written.states) + usize::from(written.deferred);
                self.full_state_bytes += (HEADER_BYTES + shown * ENTITY_BYTES) as u64;
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

    /// What the last tick wants sent: a packet per connected seat, to be sealed.
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// Receive work done for this match since its last tick (nanoseconds), to charge to
    /// the frame of its next tick; zero after.
    pub fn take_receive_ns(&mut self) -> u64 {
        std::mem::take(&mut self.pending_receive_ns)
    }
}

/// The wire code of a hitbox in [`Event::ShotResult`].
pub fn body_part_code(part: tickforge_game::rules::BodyPart) -> u8 {
    use tickforge_game::rules::BodyPart;
    match part {
        BodyPart::Head => 0,
        BodyPart::Body => 1,
        BodyPart::Legs => 2,
    }
}

#[cfg(test)]
mod tests;
