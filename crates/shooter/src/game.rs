//! The reference shooter behind the game boundary: [`Shooter`] implements
//! [`tickforge_api::Game`], so the runtime hosts it like any studio's game.
//!
//! Per tick the runtime hands it each seat's newest command ([`cmd`](crate::cmd) bytes,
//! decoded here) with the moment the client was showing; [`Game::step`] steps the world
//! (movement, rules, lag-compensated shots, fog of war: the enemies near each other found in
//! the runtime's grid, [`StepContext::grid`]), queues the tick's events (the kill
//! feed, round phases, who is alive, and each shot's verdict to its shooter: the
//! [`ShooterEvent`]s), and writes the players whose state changed. A seat's entity is its
//! player, with the seat's number as its network id.

use tickforge_api::{
    Category, ConfigError, ConfigTable, Entities, EntityId, Events, Game, GameCounters, InputInfo,
    MatchEnd, MatchSetup, RateByDistance, Schema, Seat, StepContext, Target, View,
};
use tickforge_game::fow::Neighbours;
use tickforge_game::replay::Recorder;
use tickforge_game::rules::{BodyPart, Phase as RoundPhase, RulesEvent};
use tickforge_game::{PlayerSlot, UserCmd, World};

use crate::config::ShooterConfig;
use crate::event::{ShooterEvent, NONE, NO_SLOT};
use crate::{cmd, entity_state, viewer, ENTITY_BYTES, HEADER_BYTES};

/// Bytes reserved for a match's action file: about a minute of 10 players at 128 Hz, so
/// recording seldom grows the buffer inside a tick.
const RECORDING_BYTES: usize = 1 << 20;

/// One match of the reference shooter.
pub struct Shooter {
    world: World,
    /// Each seat's player entity, by seat.
    ids: Vec<EntityId>,
    /// The slot of each entity index: what the fog of war reads the runtime's grid with.
    slot_of: Vec<u16>,
    /// Who was alive after the last tick, by slot: changes go to every client.
    alive: Vec<bool>,
    /// Each seat's newest applied input sequence, echoed in its shots' verdicts.
    seqs: Vec<u32>,
    /// Every input applied, when the match is recorded.
    recorder: Option<Recorder>,
    counters: GameCounters,
}

impl Shooter {
    /// The world.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The round's phase and score as a [`ShooterEvent::Round`].
    fn round_event(&self) -> ShooterEvent {
        let state = self.world.rules().round_state();
        let score = state.score();
        ShooterEvent::Round {
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

    /// This tick's events: who died or came back and the round's phase to everyone, then
    /// each shot's verdict to its shooter (a death arrives before any verdict it explains).
    fn queue_events(&mut self, events: &mut Events) {
        for i in 0..self.world.events().len() {
            let event = match self.world.events()[i] {
                RulesEvent::Kill {
                    killer,
                    victim,
                    part,
                    ..
                } => ShooterEvent::Kill {
                    killer: killer.0,
                    victim: victim.0,
                    part: body_part_code(part),
                },
                RulesEvent::RoundStarted { .. }
                | RulesEvent::CombatStarted { .. }
                | RulesEvent::RoundEnded { .. }
                | RulesEvent::MatchEnded { .. } => self.round_event(),
                _ => continue,
            };
            events.write(Target::All, |out| event.encode(out));
        }
        for slot in 0..self.alive.len() {
            let alive = self.world.rules().is_alive(PlayerSlot(slot as u16));
            if alive == self.alive[slot] {
                continue;
            }
            self.alive[slot] = alive;
            let event = ShooterEvent::Alive {
                slot: slot as u16,
                alive,
            };
            events.write(Target::All, |out| event.encode(out));
        }
        for shot in self.world.shots() {
            self.counters.rewinds += 1;
            self.counters.rewinds_clamped += u64::from(shot.clamped);
            let shooter = usize::from(shot.shooter.0);
            let (victim, part) = shot
                .hit
                .map_or((NO_SLOT, NONE), |h| (h.victim.0, body_part_code(h.part)));
            let event = ShooterEvent::ShotResult {
                seq: self.seqs.get(shooter).copied().unwrap_or(0),
                tick: shot.tick.0,
                victim,
                part,
                landed: shot.landed,
            };
            let seat = Seat(shot.shooter.0);
            events.write(Target::Seat(seat), |out| event.encode(out));
        }
    }
}

impl Game for Shooter {
    type Config = ShooterConfig;
    type Input = UserCmd;

    const NAME: &'static str = "shooter";
    const ABOUT: &'static str = "the reference 5-v-5 tactical shooter: rounds, hitscan weapons \
                                 with lag-compensated hit registration, fog of war";
    /// The fog of war's bound ([`tickforge_game::fow::MAX_PLAYERS`]): its pair memos grow
    /// with the square of the players.
    const MAX_SEATS: u16 = tickforge_game::fow::MAX_PLAYERS as u16;

    fn schema() -> &'static Schema {
        crate::schema()
    }

    fn configure(table: &ConfigTable) -> Result<ShooterConfig, ConfigError> {
        ShooterConfig::from_table(table)
    }

    fn max_entities(_config: &ShooterConfig, seats: u16) -> u16 {
        seats.max(1)
    }

    fn rate_by_distance(config: &ShooterConfig) -> RateByDistance {
        config.rate_by_distance
    }

    fn new(config: &ShooterConfig, setup: &MatchSetup, entities: &mut Entities) -> Shooter {
        let seats = setup.seats.min(Self::MAX_SEATS);
        let mut world = config.world(seats, setup.tick_hz);
        // The matches stepped together trace their fog on different ticks.
        world.fow.phase = setup.stagger;
        let world = World::new(world);
        let ids: Vec<EntityId> = (0..seats)
            .map(|_| entities.spawn().expect("one entity per seat is reserved"))
            .collect();
        let mut slot_of = vec![u16::MAX; usize::from(entities.capacity())];
        for (slot, id) in ids.iter().enumerate() {
            slot_of[usize::from(id.index)] = slot as u16;
        }
        let recorder = setup
            .record
            .then(|| Recorder::new(world.config(), RECORDING_BYTES));
        Shooter {
            world,
            ids,
            slot_of,
            alive: vec![true; usize::from(seats)],
            seqs: vec![0; usize::from(seats)],
            recorder,
            counters: GameCounters::default(),
        }
    }

    fn decode_input(bytes: &[u8]) -> Option<UserCmd> {
        cmd::decode(bytes).ok()
    }

    fn apply_input(&mut self, seat: Seat, input: &UserCmd, info: InputInfo) {
        let slot = PlayerSlot(seat.0);
        if usize::from(slot.0) >= self.seqs.len() {
            return;
        }
        self.world.set_cmd(slot, *input);
        self.world.set_view_time(slot, info.view);
        if let Some(rec) = self.recorder.as_mut() {
            rec.input(self.world.tick(), slot, input, info.view);
        }
        self.seqs[usize::from(slot.0)] = info.seq;
    }

    /// Where the match stands, then who is dead (a client starts out thinking everyone
    /// alive): what a late joiner needs to make sense of the full state that follows.
    fn join(&mut self, seat: Seat, events: &mut Events) {
        let round = self.round_event();
        events.write(Target::Seat(seat), |out| round.encode(out));
        for (slot, _) in self.alive.iter().enumerate().filter(|(_, a)| !**a) {
            let dead = ShooterEvent::Alive {
                slot: slot as u16,
                alive: false,
            };
            events.write(Target::Seat(seat), |out| dead.encode(out));
        }
    }

    /// The player stops where it is; the recording says so, or its replay would run the
    /// player on with its last command.
    fn leave(&mut self, seat: Seat) {
        let slot = PlayerSlot(seat.0);
        let Some(view) = self
            .world
            .players()
            .get(usize::from(slot.0))
            .map(|p| p.view)
        else {
            return;
        };
        self.world.set_cmd(slot, UserCmd::default());
        if let Some(rec) = self.recorder.as_mut() {
            rec.input(self.world.tick(), slot, &UserCmd::default(), view);
        }
    }

    fn step(&mut self, cx: &mut StepContext<'_>) {
        let near = cx.grid.map(|grid| Neighbours {
            grid,
            slot_of: &self.slot_of,
            always: false,
        });
        self.world.step_near(cx.scopes, near);
        {
            let _n = cx.scopes.scope(Category::Network);
            self.queue_events(cx.events);
        }
        // Push: only what the step changed is quantized, once for every connection.
        let _r = cx.scopes.scope(Category::Replication);
        for slot in self.world.changed() {
            let state = entity_state(&self.world, slot);
            let id = self.ids[usize::from(slot.0)];
            cx.entities.set(id, state.position(), &state.lanes());
        }
    }

    fn view(&self, seat: Seat) -> View<'_> {
        let i = seat.index();
        let Some(player) = self.world.players().get(i) else {
            return View::default();
        };
        View {
            viewer: viewer(&player.state),
            own: self.ids.get(i).copied(),
            visible: Some(self.world.fow().row(PlayerSlot(i as u16))),
        }
    }

    fn is_over(&self) -> bool {
        self.world.rules().phase() == RoundPhase::MatchOver
    }

    fn finish(&mut self) -> MatchEnd {
        let mut result = String::new();
        if let Some(r) = self.world.result() {
            r.encode_body(&mut result);
        }
        MatchEnd {
            result,
            recording: self.recorder.take().map(|r| r.finish(&self.world)),
        }
    }

    /// Every `[game]` key with the value it plays with, defaults filled.
    fn settings(config: &ShooterConfig) -> ConfigTable {
        let r = &config.rules;
        let mut t = ConfigTable::new();
        let mut put = |key: &str, v: serde_json::Value| {
            t.insert(key.to_string(), v);
        };
        put("map", config.map.name().into());
        put("buy_s", r.buy.as_secs_f64().into());
        put("round_s", r.round.as_secs_f64().into());
        put("round_end_s", r.round_end.as_secs_f64().into());
        put("rounds", r.rounds.get().into());
        put("max_health_hp", r.max_health_hp.get().into());
        put("pose_every", config.pose_every.get().into());
        put("fow_every", config.fow_every.get().into());
        put(
            "max_rewind_ms",
            (config.max_rewind.as_millis() as u64).into(),
        );
        let rate = &config.rate_by_distance;
        put("rate_halves_every_m", f64::from(rate.halve_every_m).into());
        put("rate_slowest_every_ticks", rate.slowest_every_ticks.into());
        t
    }

    fn full_state_bytes(shown: usize) -> usize {
        HEADER_BYTES + shown * ENTITY_BYTES
    }

    fn counters(&self) -> GameCounters {
        self.counters
    }

    /// The round being played (buy, combat and round end are one round), from 1; after
    /// the match, the last round played.
    fn round(&self) -> Option<u32> {
        Some(u32::from(self.world.rules().round_state().round()))
    }
}

/// The wire code of a hitbox in [`ShooterEvent::ShotResult`] and [`ShooterEvent::Kill`].
pub fn body_part_code(part: BodyPart) -> u8 {
    match part {
        BodyPart::Head => 0,
        BodyPart::Body => 1,
        BodyPart::Legs => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickforge_api::{EntityChange, Grid, Tick, ViewTime};
    use tickforge_game::buttons;

    /// The fog of war is lent the runtime's grid, filled after each step as the server fills
    /// it (a tick behind): its rows are those of a match stepped without one, tick for tick,
    /// through runs, deaths and respawns. (At 40 players and 300 m of view the update finds
    /// the scan cheaper than the grid's queries; tickforge-game's fow_grid test forces the
    /// grid.)
    #[test]
    fn the_fog_is_the_same_with_the_runtimes_grid_as_without() {
        let table: ConfigTable =
            serde_json::from_str(r#"{"map": "flat2km", "buy_s": 0.05, "round_s": 2}"#).unwrap();
        let config = Shooter::configure(&table).unwrap();
        let seats = 40u16;
        let setup = MatchSetup {
            seats,
            tick_hz: 64,
            record: false,
            stagger: 0,
        };
        let scopes = tickforge_api::Scopes::new(std::time::Instant::now);
        let mut runs: Vec<(Shooter, Entities, Events)> = (0..2)
            .map(|_| {
                let mut entities = Entities::new(Shooter::max_entities(&config, seats));
                let game = Shooter::new(&config, &setup, &mut entities);
                (game, entities, Events::default())
            })
            .collect();
        let mut grid = Grid::new(usize::from(seats), 32.0);
        let mut considered = [0u64; 2];
        for tick in 0..400u32 {
            for (k, (game, entities, events)) in runs.iter_mut().enumerate() {
                for s in 0..seats {
                    let x = tick.wrapping_mul(31) + u32::from(s) * 7;
                    let cmd = UserCmd {
                        forward: 127,
                        side: ((x / 64 % 3) as i8 - 1) * 127,
                        buttons: if x % 5 == 0 { buttons::FIRE } else { 0 },
                        yaw: (u32::from(s) * 6553 + tick * 200) as u16,
                        pitch: 0,
                    };
                    let info = InputInfo {
                        seq: tick + 1,
                        view: ViewTime::at(Tick(tick)),
                    };
                    game.apply_input(Seat(s), &cmd, info);
                }
                events.clear();
                game.step(&mut StepContext {
                    tick: Tick(tick),
                    scopes: &scopes,
                    entities,
                    events,
                    grid: (k == 1).then_some(&grid),
                });
                considered[k] += u64::from(game.world().fow().stats().pairs_considered);
                for change in entities.drain() {
                    match change {
                        EntityChange::Set { id, position, .. } if k == 1 => {
                            grid.place(id.index(), position.x, position.y);
                        }
                        EntityChange::Destroyed(id) if k == 1 => grid.remove(id.index()),
                        _ => {}
                    }
                }
            }
            let (plain, pruned) = (runs[0].0.world().fow(), runs[1].0.world().fow());
            for s in 0..seats {
                let slot = PlayerSlot(s);
                assert_eq!(plain.row(slot), pruned.row(slot), "tick {tick}, seat {s}");
            }
        }
        assert!(considered[1] <= considered[0], "{considered:?}");
    }

    #[test]
    fn the_round_is_the_rules_round_from_one_and_moves_on_with_them() {
        let table: ConfigTable = serde_json::from_str(
            r#"{"rounds": 3, "buy_s": 0.05, "round_s": 0.1, "round_end_s": 0.05}"#,
        )
        .unwrap();
        let config = Shooter::configure(&table).unwrap();
        let setup = MatchSetup {
            seats: 2,
            tick_hz: 128,
            record: false,
            stagger: 0,
        };
        let mut entities = Entities::new(Shooter::max_entities(&config, 2));
        let mut events = Events::default();
        let mut game = Shooter::new(&config, &setup, &mut entities);
        let scopes = tickforge_api::Scopes::new(std::time::Instant::now);
        let mut rounds = vec![game.round().unwrap()];
        for tick in 0..128 * 2 {
            events.clear();
            game.step(&mut StepContext {
                tick: tickforge_api::Tick(tick),
                scopes: &scopes,
                entities: &mut entities,
                events: &mut events,
                grid: None,
            });
            let round = game.round().unwrap();
            assert_eq!(round, u32::from(game.world().rules().round_state().round()));
            if rounds.last() != Some(&round) {
                rounds.push(round);
            }
        }
        assert_eq!(rounds[..2], [1, 2], "from 1, one at a time: {rounds:?}");
    }

    #[test]
    fn the_settings_read_back_as_the_same_config() {
        let table: ConfigTable = serde_json::from_str(
            r#"{"map": "flat2km", "rounds": 3, "buy_s": 0.5, "max_rewind_ms": 150,
                "rate_halves_every_m": 40, "rate_slowest_every_ticks": 8}"#,
        )
        .unwrap();
        let config = Shooter::configure(&table).unwrap();
        let settings = Shooter::settings(&config);
        assert_eq!(settings.len(), 11, "every key: {settings:?}");
        assert_eq!(settings["rate_slowest_every_ticks"], 8);
        assert_eq!(settings["map"], "flat2km");
        assert_eq!(settings["max_rewind_ms"], 150);
        assert_eq!(Shooter::configure(&settings).unwrap(), config);
        let defaults = Shooter::settings(&Shooter::configure(&ConfigTable::new()).unwrap());
        assert_eq!(
            (defaults["map"].as_str(), defaults["max_rewind_ms"].as_u64()),
            (Some("arena"), Some(200))
        );
    }
}
