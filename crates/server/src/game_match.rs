//! One match: its world, its seats, and its tick.

use std::time::{Duration, Instant};

use tickforge_game::replay::Recorder;
use tickforge_game::rules::{Phase as RoundPhase, RulesEvent};
use tickforge_game::{PlayerSlot, Tick, UserCmd, ViewTime, World, WorldConfig};
use tickforge_io::udp::SendBatch;
use tickforge_proto::msg::{self, ClientMsg, Event, ServerMsg};
use tickforge_proto::netcode::Server as Transport;
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

/// A player slot and the connection in it.
#[derive(Default)]
struct Seat {
    /// Packets the client may still send before it counts as flooding.
    allowance: u32,
    client: Option<ClientIndex>,
    /// Acks, reliable events and snapshot baselines of the connection.
    link: Option<Endpoint>,
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
}

/// A match hosted by a worker. Sockets belong to the worker; the match sees plain data.
pub struct Match {
    id: MatchId,
    world: World,
    seats: Vec<Seat>,
    /// What each client is sent: relevancy, priority, budgets and deltas.
    replicator: Replicator,
    /// One snapshot body, before it becomes a message.
    body: Vec<u8>,
    /// Encoded packets of this tick, one per connected seat, before sealing.
    payloads: Vec<u8>,
    /// One snapshot message, before the reliability layer packs it.
    message: Vec<u8>,
    /// One packet, before it joins `payloads`.
    packet: Vec<u8>,
    payload_ends: Vec<(ClientIndex, usize)>,
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
    /// A match whose tick 0 is due at `start`.
    pub fn new(id: MatchId, config: WorldConfig, start: Instant) -> Self {
        let players = usize::from(config.players);
        Match {
            id,
            world: World::new(config),
            seats: (0..players).map(|_| Seat::default()).collect(),
            replicator: Replicator::new(
                replication_config(&config, ReplicationConfig::default()),
                tickforge_shooter::schema(),
            ),
            body: Vec::with_capacity(tickforge_proto::MAX_PACKET_BYTES),
            payloads: Vec::with_capacity(players * tickforge_proto::MAX_PACKET_BYTES),
            payload_ends: Vec::with_capacity(players),
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
        let mut link = Endpoint::new(msg::link_config(), now);
        let welcome = Event::Welcome {
            match_id: self.id.0,
            slot: i as u8,
            tick_hz: self.tick_hz(),
            players: u8::try_from(self.seats.len()).unwrap_or(u8::MAX),
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
        self.replicator.connect(i, Some(NetId(i as u16)));
        self.seats[i] = Seat {
            client: Some(client),
            link: Some(link),
            allowance: FLOOD_ALLOWANCE,
            ..Seat::default()
        };
        Some(PlayerSlot(i as u8))
    }

    fn tick_hz(&self) -> u16 {
        (1_000_000_000 / self.period_ns).min(u64::from(u16::MAX)) as u16
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
        let Some(link) = seat.link.as_mut() else {
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

    /// When the match has just ended: its result, and the match starts over (a new world,
    /// the same seats) at its next deadline. Allocates, once a match.
    pub fn finish_if_over(
        &mut self,
    ) -> Option<(tickforge_game::rules::MatchResult, Option<Vec<u8>>)> {
        let result = self.world.result()?;
        let actions = self.recorder.take().map(|r| r.finish(&self.world));
        self.start = self.next_deadline();
        self.world = World::new(*self.world.config());
        // Snapshot ticks start again from 0: old baselines mean nothing now.
        let config = *self.replicator.config();
        self.past_replication = self.replication_stats();
        self.replicator = Replicator::new(config, tickforge_shooter::schema());
        for (i, seat) in self.seats.iter_mut().enumerate() {
            seat.acked_tick = None;
            if seat.client.is_some() {
                self.replicator.connect(i, Some(NetId(i as u16)));
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
            *seat = Seat::default();
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
                if let Some(link) = seat.link.as_mut() {
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
                if let Some(link) = seat.link.as_mut() {
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
            let Some(link) = seat.link.as_mut() else {
                continue;
            };
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
            if link.send_reliable(&self.message).is_err() {
                self.dropped_events += 1;
            }
        }
    }

    /// Runs one tick and queues a snapshot for every connected player into `out`.
    ///
    /// Returns the frame's cost so far (the caller adds the shared send work) and the
    /// number of datagrams it queued.
    pub fn run_tick(
        &mut self,
        now: Instant,
        scopes: &Scopes,
        transport: &mut Transport,
        frame_buf: &mut Vec<u8>,
        out: &mut SendBatch,
    ) -> (FrameRecord, usize) {
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
            self.payloads.clear();
            self.payload_ends.clear();
            for (i, seat) in self.seats.iter_mut().enumerate() {
                let (Some(client), Some(link)) = (seat.client, seat.link.as_mut()) else {
                    continue;
                };
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
                self.payloads.extend_from_slice(&self.packet);
                self.payload_ends.push((client, self.payloads.len()));
            }
        }

        scopes.phase(Phase::Send);
        let mut queued = 0;
        {
            let _n = scopes.scope(Category::Network);
            let mut start = 0;
            for &(client, end) in &self.payload_ends {
                let payload = &self.payloads[start..end];
                start = end;
                if let Some(tx) = transport.send_payload(now, client, payload, frame_buf) {
                    crate::worker::push_transmit(out, tx, frame_buf);
                    queued += 1;
                }
            }
        }
        let mut record = scopes.end_frame();
        let receive_ns = std::mem::take(&mut self.pending_receive_ns);
        record.add(Category::Network, Phase::Receive, receive_ns);
        (record, queued)
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
