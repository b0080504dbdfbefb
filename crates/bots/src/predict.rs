//! Client-side prediction and reconciliation of the bot's own player, with the shared
//! [`pmove`]: what a real client does so its own movement needs no round trip, measured by
//! how far the server's word moves it (the correction).
//!
//! What it does: every input sent is stepped through `pmove` at once ([`Predictor::sent`])
//! and kept in a ring with the state it predicts. Each snapshot that carries the bot's own
//! player and an `input_ack` ([`Predictor::snapshot`]) is compared with what the client
//! predicted for that input, and the prediction is reconciled: from the server's state, the
//! inputs the server has not applied yet are stepped again.
//!
//! The server applies, each tick, the newest input that arrived since the last (older ones
//! that arrived in the same tick are never applied) and repeats the last command on a tick
//! with no new input. The client sees, between two snapshots of ticks `T0 < T1` acking
//! `A0 <= A1`, `n = T1 - T0` ticks stepped and `m = A1 - A0` inputs newly applied, and
//! models them so: with `m >= n`, the newest `n` inputs once each (the older skipped); with
//! `m < n`, the previous command repeated `n - m` times, then each input once. The figure
//! reported is what remains: the distance between that modelled state and the server's.
//!
//! What it cannot predict (the measurement skips these and counts them, or they show as
//! correction): where in the window the server's repeats and skips fell (only how many);
//! other players (collisions between players do not exist in this game's movement, so
//! nothing); the moment a round starts (a teleport to the spawn), a death or a revival, a
//! match that starts over (skipped); the tick the buy phase's barriers drop (skipped);
//! movement parameters other than [`MovementParams::default`] (the shooter's server uses
//! them; a server configured otherwise would show as correction); an own entity the
//! server's packet budget deferred (the replica then holds an older state, which shows as
//! correction). A snapshot older than one already read (the network reordered them) is
//! ignored, not counted.
//!
//! Consistency: the wire carries positions to 1/256 m, finer than any correction worth
//! making. A snapshot whose quantized state equals the prediction's quantized state agrees
//! with it, and the prediction (exact floats, the server's own arithmetic) is kept rather
//! than replaced by the coarser wire copy; only a disagreement reconciles from the
//! server's state. Either way nothing allocates: the ring is made once.

use std::sync::Arc;

use tickforge_game::movement::{pmove, MovementParams, PlayerState};
use tickforge_game::{buttons, BuiltinMap, Map, UserCmd};
use tickforge_shooter::{flags, EntityState};

/// Inputs remembered: a power of two, two seconds at 128 Hz, far over any round trip the
/// bots are run at.
pub const RING: usize = 256;

/// One input sent and the state the client predicted after it.
#[derive(Clone, Copy, Debug, Default)]
struct Sent {
    seq: u32,
    cmd: UserCmd,
    state: PlayerState,
    /// How it was stepped: as the step's `alive`, `frozen` and the match over.
    how: How,
}

/// The conditions one step of movement ran under ([`Predictor::step`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct How {
    alive: bool,
    frozen: bool,
    over: bool,
}

/// What the server said at the last snapshot measured (or the prediction that agreed
/// with it): where the next snapshot's model starts.
#[derive(Clone, Copy, Debug)]
struct Base {
    tick: u32,
    ack: u32,
    state: PlayerState,
    alive: bool,
    frozen: bool,
}

/// What one snapshot did to the prediction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// No own player in it, no input acked yet, or older than the last one read: nothing.
    Ignored,
    /// Measured: the distance, metres, between the modelled and the server's origin.
    Corrected(f32),
    /// Not measured (a teleport or a change the client cannot place), but reconciled.
    Skipped,
}

/// Counters of a predictor (or of many, merged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PredictCounts {
    /// Corrections measured.
    pub samples: u64,
    /// Snapshots not measured: across a death, revival, round start, the barriers' drop, a
    /// new epoch, or too long a gap.
    pub skipped: u64,
    /// Snapshots not measured because the player was dead (held where it fell).
    pub dead: u64,
    /// Snapshots whose state disagreed with the prediction beyond the wire's quantum, so
    /// the prediction was replayed from the server's.
    pub reconciled: u64,
}

impl PredictCounts {
    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &PredictCounts) {
        self.samples += other.samples;
        self.skipped += other.skipped;
        self.dead += other.dead;
        self.reconciled += other.reconciled;
    }
}

/// Predicts one player's own movement and reconciles it with the server's snapshots.
pub struct Predictor {
    ring: Box<[Sent; RING]>,
    /// The newest input sent (0: none).
    newest: u32,
    /// The predicted state after `newest`.
    current: PlayerState,
    base: Option<Base>,
    params: MovementParams,
    map: Arc<Map>,
    /// The map with the buy phase's barriers raised.
    buy_map: Arc<Map>,
    dt: f32,
    /// What the newest snapshot said: alive, held by the buy phase, the match over.
    alive: bool,
    frozen: bool,
    over: bool,
    /// Each input sent after this one was stepped from the state the ring holds for the
    /// input before it (a replay that found its inputs gone restarts the chain here).
    chain_from: u32,
    /// Counters.
    pub counts: PredictCounts,
}

/// `cmd` as the server plays it for a player held (dead, or the match over): the view
/// turns, the body stays, crouching kept.
fn held(cmd: &UserCmd) -> UserCmd {
    UserCmd {
        forward: 0,
        side: 0,
        buttons: cmd.buttons & buttons::CROUCH,
        ..*cmd
    }
}

/// Whether `a` and `b` read the same on the wire (position, velocity, ground, crouch).
fn same_on_wire(a: &PlayerState, b: &PlayerState) -> bool {
    let q = |s: &PlayerState| EntityState::from_player(s, 0, 0, 0).lanes();
    let (qa, qb) = (q(a), q(b));
    qa.0[..4] == qb.0[..4] && qa.0[6..9] == qb.0[6..9]
}

/// Whether `a` and `b` are the same state to the bit (`==` takes -0.0 for 0.0).
fn same_bits(a: &PlayerState, b: &PlayerState) -> bool {
    let bits = |s: &PlayerState| {
        let (o, v) = (s.origin, s.velocity);
        [o.x, o.y, o.z, v.x, v.y, v.z].map(f32::to_bits)
    };
    bits(a) == bits(b)
        && (a.yaw, a.pitch, a.on_ground, a.crouched) == (b.yaw, b.pitch, b.on_ground, b.crouched)
}

impl Predictor {
    /// A predictor on the built-in `map` (and its barriers) at `tick_hz`.
    pub fn new(map: BuiltinMap, tick_hz: u32) -> Predictor {
        let shared = map.shared();
        Predictor::with_maps(shared.map, shared.with_barriers, tick_hz)
    }

    /// A predictor on `map`, with `buy_map` the same with its barriers raised.
    pub fn with_maps(map: Arc<Map>, buy_map: Arc<Map>, tick_hz: u32) -> Predictor {
        Predictor {
            ring: Box::new([Sent::default(); RING]),
            newest: 0,
            current: PlayerState::default(),
            base: None,
            params: MovementParams::default(),
            map,
            buy_map,
            dt: 1.0 / tick_hz.max(1) as f32,
            alive: true,
            frozen: false,
            over: false,
            chain_from: 0,
            counts: PredictCounts::default(),
        }
    }

    /// The predicted state after the newest input sent.
    pub fn predicted(&self) -> &PlayerState {
        &self.current
    }

    /// One tick of the server's movement for a player `alive`, the buy phase `frozen`;
    /// what it ran under.
    fn step(&self, state: &mut PlayerState, cmd: &UserCmd, alive: bool, frozen: bool) -> How {
        let map = if frozen { &*self.buy_map } else { &*self.map };
        if alive && !self.over {
            pmove(state, cmd, &self.params, map, self.dt);
        } else {
            pmove(state, &held(cmd), &self.params, map, self.dt);
        }
        How {
            alive,
            frozen,
            over: self.over,
        }
    }

    /// The ring's entry for `seq`, if it still holds it.
    fn entry(&self, seq: u32) -> Option<&Sent> {
        let e = &self.ring[seq as usize % RING];
        (e.seq == seq && seq != 0).then_some(e)
    }

    /// Input `seq` (the session's newest) was sent with `cmd`: predicts its effect.
    pub fn sent(&mut self, seq: u32, cmd: &UserCmd) {
        let mut state = self.current;
        let how = self.step(&mut state, cmd, self.alive, self.frozen);
        self.ring[seq as usize % RING] = Sent {
            seq,
            cmd: *cmd,
            state,
            how,
        };
        self.newest = seq;
        self.current = state;
    }

    /// A teleport the snapshots may not show in order: a round started, a new epoch. The
    /// next snapshot is not measured.
    pub fn discontinuity(&mut self) {
        self.base = None;
    }

    /// The round's phase as the shooter's events tell it (3: the match is over, the
    /// players held).
    pub fn round_phase(&mut self, phase: u8) {
        self.over = phase == 3;
        if phase == 0 {
            self.discontinuity();
        }
    }

    /// The state the server reached at `tick` from `base`, as well as the client can model
    /// it, having applied inputs up to `ack`; `None` when the ring no longer holds them.
    fn model(&self, base: &Base, tick: u32, ack: u32) -> Option<PlayerState> {
        let n = tick - base.tick;
        let m = ack - base.ack;
        if n as usize > RING || m as usize > RING {
            return None;
        }
        if m == n {
            if let Some(s) = self.chained(base, ack) {
                // Every test that reads snapshots checks it.
                debug_assert!(
                    self.stepped(base, tick, ack)
                        .is_some_and(|m| same_bits(&m, &s)),
                    "chain ≠ model"
                );
                return Some(s);
            }
        }
        self.stepped(base, tick, ack)
    }

    /// [`Predictor::model`], stepped from `base`.
    fn stepped(&self, base: &Base, tick: u32, ack: u32) -> Option<PlayerState> {
        let (n, m) = (tick - base.tick, ack - base.ack);
        let mut s = base.state;
        if m < n {
            // Ticks without a new input repeat the command before.
            let before = if base.ack == 0 {
                UserCmd::default()
            } else {
                self.entry(base.ack)?.cmd
            };
            for _ in 0..n - m {
                self.step(&mut s, &before, base.alive, base.frozen);
            }
        }
        let first = if m > n { ack - n + 1 } else { base.ack + 1 };
        for seq in first..=ack {
            let cmd = self.entry(seq)?.cmd;
            self.step(&mut s, &cmd, base.alive, base.frozen);
        }
        Some(s)
    }

    /// What [`Predictor::model`] gives when the server applied each input from `base.ack`
    /// to `ack` once (one a tick): the prediction's own chain, when it was stepped from
    /// `base`'s state through those inputs under the conditions the model would use.
    /// Movement is a function of the state, the command and those conditions, so the
    /// chain's state after `ack` is the model's to the bit, without its steps: a bot whose
    /// inputs all arrive steps its movement once a tick, not twice.
    fn chained(&self, base: &Base, ack: u32) -> Option<PlayerState> {
        if base.ack < self.chain_from || !same_bits(&self.entry(base.ack)?.state, &base.state) {
            return None;
        }
        let how = How {
            alive: base.alive,
            frozen: base.frozen,
            over: self.over,
        };
        let mut last = None;
        for seq in base.ack + 1..=ack {
            let e = self.entry(seq).filter(|e| e.how == how)?;
            last = Some(e.state);
        }
        last
    }

    /// A snapshot of `tick` acking input `ack`, with the client's own player `own` in it:
    /// measures the correction and reconciles.
    pub fn snapshot(&mut self, tick: u32, ack: u32, own: Option<&EntityState>) -> Outcome {
        let Some(own) = own else {
            return Outcome::Ignored;
        };
        if ack == 0 || ack > self.newest {
            return Outcome::Ignored;
        }
        if self.base.is_some_and(|b| tick <= b.tick) {
            // Late (reordered by the network) or repeated: a newer one was already read.
            return Outcome::Ignored;
        }
        let server = own.to_player();
        let alive = own.flags & flags::ALIVE != 0;
        let frozen = own.flags & flags::POSED == 0;
        let modelled = match self.base {
            Some(b)
                if tick > b.tick
                    && ack >= b.ack
                    && alive
                    && b.alive == alive
                    && b.frozen == frozen =>
            {
                self.model(&b, tick, ack)
            }
            _ => None,
        };
        let (outcome, agreed) = match modelled {
            Some(m) => {
                self.counts.samples += 1;
                let d = m.origin - server.origin;
                let dist = (d.x * d.x + d.y * d.y + d.z * d.z).sqrt();
                (
                    Outcome::Corrected(dist),
                    same_on_wire(&m, &server).then_some(m),
                )
            }
            None => {
                if alive {
                    self.counts.skipped += 1;
                } else {
                    self.counts.dead += 1;
                }
                (Outcome::Skipped, None)
            }
        };
        self.alive = alive;
        self.frozen = frozen;
        // The chain already predicted from the agreed state needs no replay.
        let chain = self.entry(ack).map(|e| e.state);
        let replay = match agreed {
            Some(m) => chain.is_none_or(|c| c != m),
            None => true,
        };
        let start = agreed.unwrap_or(server);
        self.base = Some(Base {
            tick,
            ack,
            state: start,
            alive,
            frozen,
        });
        if replay {
            if agreed.is_none() {
                self.counts.reconciled += 1;
            }
            let mut s = start;
            if self.entry(ack).is_some() {
                self.ring[ack as usize % RING].state = s;
            }
            self.chain_from = ack;
            for seq in ack + 1..=self.newest {
                let Some(e) = self.entry(seq).copied() else {
                    // Older than the ring: the inputs held were stepped from elsewhere.
                    self.chain_from = self.newest.wrapping_add(1);
                    break;
                };
                let how = self.step(&mut s, &e.cmd, alive, frozen);
                let entry = &mut self.ring[seq as usize % RING];
                entry.state = s;
                entry.how = how;
            }
            self.current = s;
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickforge_game::{PlayerSlot, World, WorldConfig};
    use tickforge_telemetry::Scopes;

    /// The server's world, one player, past the buy phase; its state as a snapshot gives
    /// it (quantized, alive, posed).
    struct Server {
        world: World,
        scopes: Scopes,
    }

    impl Server {
        fn new() -> Server {
            let mut world = World::new(WorldConfig {
                players: 2,
                ..WorldConfig::default()
            });
            let scopes = Scopes::new(std::time::Instant::now);
            while world.rules().is_frozen() {
                world.step(&scopes);
            }
            // Settle on the floor.
            for _ in 0..16 {
                world.step(&scopes);
            }
            Server { world, scopes }
        }

        fn step(&mut self, cmd: Option<&UserCmd>) {
            if let Some(c) = cmd {
                self.world.set_cmd(PlayerSlot(0), *c);
            }
            self.world.step(&self.scopes);
        }

        /// The snapshot's own entity, `exact` or through the wire's quanta: the tick
        /// stepped last.
        fn own(&self, exact: bool) -> (u32, EntityState) {
            let s = tickforge_shooter::entity_state(&self.world, PlayerSlot(0));
            let s = if exact { s } else { s.quantized() };
            (self.world.tick().0 - 1, s)
        }
    }

    fn run_cmd(i: u32) -> UserCmd {
        UserCmd {
            forward: 127,
            side: if (i / 40).is_multiple_of(2) { 60 } else { -60 },
            yaw: (i * 97) as u16,
            buttons: if i % 50 == 10 { buttons::JUMP } else { 0 },
            ..UserCmd::default()
        }
    }

    fn predictor(server: &Server) -> Predictor {
        let mut p = Predictor::new(WorldConfig::default().map, 128);
        // The client starts where the server has it (its first snapshot reconciles anyway).
        p.current = server.own(true).1.to_player();
        p
    }

    /// Half a quantum each way on three axes, twice (the state reconciled from is the
    /// wire's copy too): sqrt(3) / 256 m, 6.8 mm.
    const WIRE_BOUND_M: f32 = 0.0068;

    /// Drives `p` and `server` with `cmd(i)` for inputs 1..=`inputs`; `lost` inputs never
    /// reach the server (it repeats the one before on their tick) and `unseen` snapshots
    /// never reach the client. The outcome of every snapshot read, by input.
    fn play(
        p: &mut Predictor,
        server: &mut Server,
        inputs: u32,
        cmd: impl Fn(u32) -> UserCmd,
        lost: &[u32],
        unseen: &[u32],
        exact: bool,
    ) -> Vec<(u32, Outcome)> {
        let mut out = Vec::new();
        let mut ack = 0;
        for i in 1..=inputs {
            let c = cmd(i);
            p.sent(i, &c);
            let arrives = !lost.contains(&i);
            server.step(arrives.then_some(&c));
            if arrives {
                ack = i;
            }
            if unseen.contains(&i) {
                continue;
            }
            let (tick, own) = server.own(exact);
            out.push((i, p.snapshot(tick, ack, Some(&own))));
        }
        out
    }

    fn correction(out: &[(u32, Outcome)], i: u32) -> f32 {
        match out.iter().find(|o| o.0 == i).map(|o| o.1) {
            Some(Outcome::Corrected(d)) => d,
            o => panic!("snapshot {i}: {o:?}"),
        }
    }

    /// Identical pmove on both sides, one input a tick, every snapshot read, the server's
    /// state unquantized: no correction at all, and the prediction never replayed.
    #[test]
    fn identical_movement_on_both_sides_needs_no_correction() {
        let mut server = Server::new();
        let mut p = predictor(&server);
        let out = play(&mut p, &mut server, 600, run_cmd, &[], &[], true);
        assert_eq!(
            out[0].1,
            Outcome::Skipped,
            "the first has nothing to compare"
        );
        for i in 2..=600 {
            assert_eq!(correction(&out, i), 0.0, "snapshot {i}");
        }
        assert_eq!(p.counts.samples, 599);
        assert_eq!(p.counts.reconciled, 1, "only from the first snapshot");
    }

    /// The same through the wire's quanta (1/256 m): corrections within two half quanta.
    #[test]
    fn identical_movement_through_the_wire_stays_within_its_quantum() {
        let mut server = Server::new();
        let mut p = predictor(&server);
        let out = play(&mut p, &mut server, 600, run_cmd, &[], &[], false);
        let worst = (2..=600).map(|i| correction(&out, i)).fold(0.0, f32::max);
        assert!(worst <= WIRE_BOUND_M, "worst correction {worst} m");
    }

    /// Each tick a sharp turn, and input 100 a step back: a lost input makes a difference.
    fn zigzag(i: u32) -> UserCmd {
        UserCmd {
            forward: if i == 100 { -127 } else { 127 },
            yaw: (i * 900) as u16,
            ..UserCmd::default()
        }
    }

    /// The chain's shortcut ([`Predictor::chained`]) gives the stepped model's state to the
    /// bit whenever it applies (one input applied a tick), through the wire's quanta (so
    /// replays happen), lost inputs and unseen snapshots; and it applies to most snapshots.
    #[test]
    fn the_chain_is_the_model_to_the_bit() {
        let mut server = Server::new();
        let mut p = predictor(&server);
        let (lost, unseen) = ([40, 41, 90, 150], [41, 60, 61, 62, 150, 151]);
        let (mut ack, mut chained) = (0, 0);
        for i in 1..=300 {
            let c = zigzag(i);
            p.sent(i, &c);
            let arrives = !lost.contains(&i);
            server.step(arrives.then_some(&c));
            ack = if arrives { i } else { ack };
            if unseen.contains(&i) {
                continue;
            }
            let (tick, own) = server.own(false);
            // One input applied a tick since the base: where the model may take the chain.
            if let Some(b) = p
                .base
                .filter(|b| tick > b.tick && ack - b.ack == tick - b.tick)
            {
                if let Some(s) = p.chained(&b, ack) {
                    let m = p.stepped(&b, tick, ack).expect("the ring holds the inputs");
                    assert!(same_bits(&s, &m), "snapshot {i}: {s:?} against {m:?}");
                    chained += 1;
                }
            }
            p.snapshot(tick, ack, Some(&own));
        }
        // Measured: 199 of 293 measured snapshots reconciled, the chain served 289.
        assert!(p.counts.reconciled >= 150, "{:?}", p.counts);
        assert!(
            chained >= 280,
            "the chain served {chained} of 293 snapshots"
        );
    }

    /// An input lost on the way (the server repeats the previous command on its tick), the
    /// snapshots all read: their acks say the server repeated 99 and then applied 101, and
    /// the model does the same, so no correction shows.
    #[test]
    fn a_dropped_input_the_acks_show_is_modelled_not_corrected() {
        let mut server = Server::new();
        let mut p = predictor(&server);
        let out = play(&mut p, &mut server, 200, zigzag, &[100], &[], true);
        for i in 2..=200 {
            assert_eq!(correction(&out, i), 0.0, "snapshot {i}");
        }
    }

    /// An input lost with the snapshot that would have said so: the client cannot tell a
    /// repeat from an input applied, the next snapshot shows a correction, and
    /// reconciliation removes it: the snapshots after agree exactly.
    #[test]
    fn a_dropped_input_unseen_is_corrected_then_reconciled_away() {
        let mut server = Server::new();
        let mut p = predictor(&server);
        let out = play(&mut p, &mut server, 200, zigzag, &[100], &[100], true);
        let d = correction(&out, 101);
        assert!(d > 0.005, "the lost input shows: {d} m");
        for i in (2..=99).chain(102..=200) {
            assert_eq!(correction(&out, i), 0.0, "snapshot {i}");
        }
        assert_eq!(p.counts.reconciled, 2, "the first snapshot and 101");
    }
}
