//! One match: its world, its seats, and its tick.

use std::time::{Duration, Instant};

use tickforge_game::{PlayerSlot, Tick, UserCmd, World, WorldConfig};
use tickforge_io::udp::SendBatch;
use tickforge_proto::msg::ServerMsg;
use tickforge_proto::netcode::Server as Transport;
use tickforge_proto::{ClientIndex, MatchId};
use tickforge_replication::SnapshotWriter;
use tickforge_telemetry::{Category, FrameRecord, Phase, Scopes};

/// A player slot and the connection in it.
#[derive(Clone, Copy, Debug, Default)]
struct Seat {
    client: Option<ClientIndex>,
    /// Newest command received, applied at the next tick.
    cmd: UserCmd,
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
    snapshot: SnapshotWriter,
    /// Encoded messages of this tick, one per connected seat, before framing.
    payloads: Vec<u8>,
    payload_ends: Vec<(ClientIndex, usize)>,
    start: Instant,
    period_ns: u64,
    /// Receive work done for this match since its last tick, charged to its next frame.
    pub(crate) pending_receive_ns: u64,
}

impl Match {
    /// A match whose tick 0 is due at `start`.
    pub fn new(id: MatchId, config: WorldConfig, start: Instant) -> Self {
        let players = usize::from(config.players);
        Match {
            id,
            world: World::new(config),
            seats: vec![Seat::default(); players],
            snapshot: SnapshotWriter::with_capacity(players),
            payloads: Vec::with_capacity(players * tickforge_proto::MAX_PACKET_BYTES),
            payload_ends: Vec::with_capacity(players),
            start,
            period_ns: 1_000_000_000 / u64::from(config.tick_hz),
            pending_receive_ns: 0,
        }
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
        client: ClientIndex,
        preferred: Option<PlayerSlot>,
    ) -> Option<PlayerSlot> {
        let free = |i: usize| self.seats.get(i).is_some_and(|s| s.client.is_none());
        let i = match preferred.map(|p| usize::from(p.0)) {
            Some(p) if free(p) => p,
            _ => self.seats.iter().position(|s| s.client.is_none())?,
        };
        self.seats[i] = Seat {
            client: Some(client),
            ..Seat::default()
        };
        Some(PlayerSlot(i as u8))
    }

    /// Frees the seat of `slot`; the player stops where it is.
    pub fn unseat(&mut self, slot: PlayerSlot) {
        if let Some(seat) = self.seats.get_mut(usize::from(slot.0)) {
            *seat = Seat::default();
            self.world.set_cmd(slot, UserCmd::default());
        }
    }

    /// Connected players.
    pub fn connected(&self) -> usize {
        self.seats.iter().filter(|s| s.client.is_some()).count()
    }

    /// Queues a command for `slot`; older or repeated sequences are ignored.
    pub fn queue_input(&mut self, slot: PlayerSlot, seq: u32, cmd: UserCmd) {
        if let Some(seat) = self.seats.get_mut(usize::from(slot.0)) {
            if seq > seat.newest_seq {
                seat.newest_seq = seq;
                seat.cmd = cmd;
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
                if seat.client.is_some() && seat.newest_seq != seat.applied_seq {
                    self.world.set_cmd(PlayerSlot(i as u8), seat.cmd);
                    seat.applied_seq = seat.newest_seq;
                }
            }
        }
        self.world.step(scopes);

        scopes.phase(Phase::Replicate);
        {
            let _r = scopes.scope(Category::Replication);
            let tick = self.world.tick().0.wrapping_sub(1);
            let body = self.snapshot.write(&self.world);
            self.payloads.clear();
            self.payload_ends.clear();
            for seat in &self.seats {
                let Some(client) = seat.client else { continue };
                ServerMsg::Snapshot {
                    tick,
                    input_ack: seat.applied_seq,
                    body,
                }
                .encode(&mut self.payloads);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::connected_pair;
    use tickforge_proto::netcode::ClientEvent;
    use tickforge_replication::SnapshotReader;

    #[test]
    fn deadlines_are_absolute() {
        let t0 = Instant::now();
        let m = Match::new(MatchId(1), WorldConfig::default(), t0);
        assert_eq!(m.period(), Duration::from_nanos(7_812_500));
        // 60 s of ticks is exactly 60 s: no rounding accumulates.
        assert_eq!(m.deadline_of(Tick(60 * 128)), t0 + Duration::from_secs(60));
    }

    #[test]
    fn a_tick_applies_inputs_and_snapshots_every_seat() {
        let t0 = Instant::now();
        let scopes = Scopes::new(Instant::now);
        let (mut transport, mut client, index, server_addr) = connected_pair(t0);
        let mut m = Match::new(
            MatchId(1),
            WorldConfig {
                players: 2,
                ..Default::default()
            },
            t0,
        );
        let slot = m.seat(index, None).unwrap();
        let before = m.world().players()[usize::from(slot.0)].state.origin;
        m.queue_input(
            slot,
            1,
            UserCmd {
                forward: 127,
                ..Default::default()
            },
        );
        m.queue_input(slot, 1, UserCmd::default()); // a duplicate is ignored

        let mut out = SendBatch::with_capacity(8, 1300);
        let mut frame = Vec::new();
        let (record, queued) = m.run_tick(t0, &scopes, &mut transport, &mut frame, &mut out);
        assert_eq!(queued, 1);
        // The client never spoke after connecting: a keep-alive goes before the snapshot.
        assert_eq!(out.len(), 2);
        assert_eq!(record.category_sum_ns(), record.total_ns);
        assert!(m.world().players()[usize::from(slot.0)].state.origin != before);

        // The client reads a snapshot of tick 0 acknowledging input 1, with both players.
        let mut datagrams: Vec<Vec<u8>> = (0..out.len()).map(|i| out.get(i).1.to_vec()).collect();
        let mut seen = None;
        for d in &mut datagrams {
            if let Some(ClientEvent::Payload(p)) = client.handle_datagram(t0, server_addr, d) {
                seen = Some(p.to_vec());
            }
        }
        let payload = seen.expect("a snapshot");
        let ServerMsg::Snapshot {
            tick,
            input_ack,
            body,
        } = ServerMsg::decode(&payload).unwrap()
        else {
            panic!("not a snapshot")
        };
        assert_eq!((tick, input_ack), (0, 1));
        assert_eq!(SnapshotReader::default().read(body).unwrap().len(), 2);
    }

    #[test]
    fn seats_honour_a_preferred_free_slot_and_refuse_when_full() {
        let mut m = Match::new(
            MatchId(1),
            WorldConfig {
                players: 2,
                ..Default::default()
            },
            Instant::now(),
        );
        assert_eq!(
            m.seat(ClientIndex(0), Some(PlayerSlot(1))),
            Some(PlayerSlot(1))
        );
        // Taken: the next free one instead.
        assert_eq!(
            m.seat(ClientIndex(1), Some(PlayerSlot(1))),
            Some(PlayerSlot(0))
        );
        assert_eq!(m.seat(ClientIndex(2), None), None);
        m.unseat(PlayerSlot(0));
        assert_eq!(m.connected(), 1);
        assert_eq!(
            m.seat(ClientIndex(2), Some(PlayerSlot(9))),
            Some(PlayerSlot(0))
        );
    }
}
