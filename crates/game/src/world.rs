//! The world of one match, stepped once per tick.

use std::sync::Arc;

use tickforge_telemetry::{Category, Scopes};

use crate::fow::{Fow, FowConfig, Neighbours};
use crate::history::{History, HistoryConfig, PlayerSample, Posing};
use crate::hitscan::{self, HitResult, Shot};
use crate::map::{BuiltinMap, Map, SKIN_M};
use crate::movement::{pmove, MovementParams, PlayerState};
use crate::rules::{HitOutcome, MatchResult, Phase, Rules, RulesConfig, RulesEvent, Team};
use crate::{buttons, PlayerSlot, Tick, UserCmd, Vec3, ViewTime};

/// What a world is made of; fixed for the life of a match.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorldConfig {
    /// Player slots.
    pub players: u16,
    /// Ticks per second; the step is `1 / tick_hz` seconds.
    pub tick_hz: u32,
    /// The map [`World::new`] loads; [`World::with_map`] takes any map instead.
    pub map: BuiltinMap,
    /// Movement tuning.
    pub movement: MovementParams,
    /// Rounds, weapons and damage. Its tick rate is taken from `tick_hz`.
    pub rules: RulesConfig,
    /// Lag compensation: how far back shots are tested, how often poses are computed.
    /// Its player count and tick rate are taken from `players` and `tick_hz`.
    pub history: HistoryConfig,
    /// Fog of war: who each client may be told about. Its tick rate and movement are
    /// taken from `tick_hz` and `movement`.
    pub fow: FowConfig,
}

impl Default for WorldConfig {
    fn default() -> Self {
        WorldConfig {
            players: 10,
            tick_hz: 128, // VALORANT's tick: 7.8125 ms
            map: BuiltinMap::Arena,
            movement: MovementParams::default(),
            rules: RulesConfig::default(),
            history: HistoryConfig::default(),
            fow: FowConfig {
                // Every 4th tick: under a third of the cost of every tick; a pair may come into
                // plain sight up to 3 ticks (23 ms) before its verdict does, inside the
                // 200 ms lookahead margin of movement (fow.rs has the measurements).
                trace_every_ticks: std::num::NonZeroU8::new(4).expect("4 is not 0"),
                ..FowConfig::default()
            },
        }
    }
}

/// One player slot of the world.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Player {
    /// Movement state.
    pub state: PlayerState,
    /// The command applied at the next step (the last one received is held).
    pub cmd: UserCmd,
    /// Shots fired since the match began.
    pub shots: u32,
    /// The moment of the world this player was looking at when it made `cmd`: where its
    /// shots are tested (lag compensation).
    pub view: ViewTime,
}

/// One shot fired in the last [`World::step`] and the server's verdict on it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShotRecord {
    /// Who fired.
    pub shooter: PlayerSlot,
    /// The tick it was fired in.
    pub tick: Tick,
    /// What lag-compensated hitscan found in the world as the shooter saw it; `None` for a
    /// miss.
    pub hit: Option<HitResult>,
    /// The hit did damage: its victim was still alive when the shot was fired (a victim
    /// killed by someone else in between is hit as seen, but takes nothing).
    pub landed: bool,
    /// The shooter's view was older than the max rewind: the shot was tested at the oldest
    /// tick held instead.
    pub clamped: bool,
}

/// Sets bit `i` of a bitset.
fn mark(bits: &mut [u64], i: usize) {
    if let Some(word) = bits.get_mut(i / 64) {
        *word |= 1 << (i % 64);
    }
}

/// The state of one match: deterministic, stepped by [`World::step`].
#[derive(Clone, Debug)]
pub struct World {
    config: WorldConfig,
    map: Arc<Map>,
    tick: Tick,
    players: Vec<Player>,
    rules: Rules,
    history: History,
    /// The map with its buy-phase barriers raised: what players move in while the buy
    /// phase holds them in their spawn rooms.
    buy_map: Arc<Map>,
    /// How the last tick stepped was posed: idle while players were held.
    posing: Posing,
    /// Who a shot may hit, by slot: everyone, since the history knows who was alive at the
    /// moment the shooter saw.
    seen: Vec<bool>,
    /// The shots of the last step, in order (reused: no allocation).
    shots: Vec<ShotRecord>,
    /// Fog of war after the last step, and what it is fed (reused: no allocation).
    fow: Fow,
    fow_states: Vec<PlayerState>,
    fow_teams: Vec<Team>,
    fow_alive: Vec<bool>,
    /// Players whose replicated state (movement, health, weapon, life, posing) the last
    /// step wrote: bit `i % 64` of word `i / 64`. Gameplay marks what it writes; nothing
    /// scans every player's fields to find changes.
    changed: Vec<u64>,
    dt: f32,
}

impl World {
    /// A world at tick 0 on the built-in map `config.map`, every player at a spawn point of
    /// its team ([`World::team_of`]).
    /// The map is parsed once per process and shared ([`BuiltinMap::shared`]).
    pub fn new(config: WorldConfig) -> Self {
        let shared = config.map.shared();
        World::with_maps(config, shared.map, shared.with_barriers)
    }

    /// A world at tick 0 of the same configuration on the same maps (shared, not copied):
    /// what a finished match starts over with.
    pub fn restarted(&self) -> World {
        World::with_maps(
            self.config,
            Arc::clone(&self.map),
            Arc::clone(&self.buy_map),
        )
    }

    /// A world at tick 0 on `map` (`config.map` is not used), every player at a spawn point
    /// of its team ([`World::team_of`]). Slot 2k takes the attackers' kth spawn point and slot
    /// 2k + 1 the defenders', counting round when a team has fewer points than players.
    pub fn with_map(config: WorldConfig, map: Arc<Map>) -> Self {
        let buy_map = Arc::new(map.with_barriers(true));
        World::with_maps(config, map, buy_map)
    }

    /// [`World::with_map`] with `buy_map`, the same map with its barriers raised, given.
    fn with_maps(config: WorldConfig, map: Arc<Map>, buy_map: Arc<Map>) -> Self {
        let players = (0..config.players)
            .map(|slot| {
                let spawn =
                    map.spawn_point(World::team_of(PlayerSlot(slot)), usize::from(slot / 2));
                Player {
                    state: PlayerState {
                        // A skin above the floor, where movement keeps a standing player.
                        origin: spawn.origin + Vec3::new(0.0, 0.0, SKIN_M),
                        yaw: spawn.yaw,
                        on_ground: true,
                        ..Default::default()
                    },
                    cmd: UserCmd {
                        yaw: spawn.yaw,
                        ..Default::default()
                    },
                    ..Default::default()
                }
            })
            .collect();
        let roster: Vec<Team> = (0..config.players)
            .map(|s| World::team_of(PlayerSlot(s)))
            .collect();
        let rules_config = RulesConfig {
            tick_hz: std::num::NonZeroU32::new(config.tick_hz).unwrap_or(config.rules.tick_hz),
            ..config.rules
        };
        let tick_hz = std::num::NonZeroU32::new(config.tick_hz).unwrap_or(config.history.tick_hz);
        let history = History::new(HistoryConfig {
            players: config.players,
            tick_hz,
            ..config.history
        })
        .unwrap_or_else(|_| {
            // Over the 1 s cap: the default rewind instead, never an unbounded buffer.
            History::new(HistoryConfig {
                players: config.players,
                tick_hz,
                ..HistoryConfig::default()
            })
            .expect("the default history is valid")
        });
        World {
            dt: 1.0 / config.tick_hz as f32,
            rules: Rules::new(rules_config, &roster, Tick(0)),
            history,
            seen: vec![true; usize::from(config.players)],
            // A player fires at most once a tick.
            shots: Vec::with_capacity(usize::from(config.players)),
            fow: Fow::new(
                FowConfig {
                    tick_hz: config.tick_hz,
                    movement: config.movement,
                    ..config.fow
                },
                usize::from(config.players),
            ),
            fow_states: Vec::with_capacity(usize::from(config.players)),
            fow_teams: roster.clone(),
            fow_alive: vec![true; usize::from(config.players)],
            // A new world is news to everyone.
            changed: vec![u64::MAX; usize::from(config.players).div_ceil(64)],
            config,
            buy_map,
            map,
            posing: Posing::Idle,
            tick: Tick(0),
            players,
        }
    }

    /// The team whose spawn points `slot` starts at: attackers for even slots, defenders
    /// for odd ones.
    pub fn team_of(slot: PlayerSlot) -> Team {
        if slot.0.is_multiple_of(2) {
            Team::Attackers
        } else {
            Team::Defenders
        }
    }

    /// The map players move in.
    pub fn map(&self) -> &Map {
        &self.map
    }

    /// The configuration.
    pub fn config(&self) -> &WorldConfig {
        &self.config
    }

    /// The next tick to be stepped.
    pub fn tick(&self) -> Tick {
        self.tick
    }

    /// All players, by slot.
    pub fn players(&self) -> &[Player] {
        &self.players
    }

    /// Sets the tick of the world `slot` was looking at when it made its current command.
    /// Unknown slots are ignored; the rewind is clamped when a shot is tested.
    pub fn set_view(&mut self, slot: PlayerSlot, view_tick: Tick) {
        self.set_view_time(slot, ViewTime::at(view_tick));
    }

    /// Sets the moment, between two ticks, that `slot` was showing when it made its current
    /// command (a client that interpolates). Unknown slots are ignored.
    pub fn set_view_time(&mut self, slot: PlayerSlot, view: ViewTime) {
        if let Some(p) = self.players.get_mut(usize::from(slot.0)) {
            p.view = view;
        }
    }

    /// The lag-compensation history.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Sets the command `slot` plays from the next step on. Unknown slots are ignored.
    pub fn set_cmd(&mut self, slot: PlayerSlot, cmd: UserCmd) {
        if let Some(p) = self.players.get_mut(usize::from(slot.0)) {
            p.cmd = cmd;
        }
    }

    /// The rules: round, health, weapons, score.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// What the last [`World::step`] decided (shots, hits, kills, round changes), in order;
    /// valid until the next step.
    pub fn events(&self) -> &[RulesEvent] {
        self.rules.events()
    }

    /// The shots the last [`World::step`] fired and what each hit, in order; valid until
    /// the next step.
    pub fn shots(&self) -> &[ShotRecord] {
        &self.shots
    }

    /// The match's result, once it is over.
    pub fn result(&self) -> Option<MatchResult> {
        self.rules.result()
    }

    /// Advances the world by one tick.
    pub fn step(&mut self, scopes: &Scopes) {
        self.step_near(scopes, None);
    }

    /// Advances the world by one tick, with `near` the players' places at the end of the
    /// last tick for the fog of war to find the enemies near each other in
    /// ([`Fow::update`]; the server lends replication's grid). The same world as
    /// [`World::step`], in less time when players are spread out.
    pub fn step_near(&mut self, scopes: &Scopes, near: Option<Neighbours<'_>>) {
        let tick = self.tick;
        // Whether this tick is a held one is decided before the rules end it (the tick that
        // closes the buy phase is still a buy tick).
        let mut frozen = self.rules.is_frozen();
        // Players put back at their spawns stand there for the tick they arrive.
        let mut respawned = false;
        {
            let _g = scopes.scope(Category::Gameplay);
            // The last step's events and changes were the caller's to read until now.
            drop(self.rules.drain_events());
            self.shots.clear();
            self.changed.fill(0);
            for i in 0..self.players.len() {
                let slot = PlayerSlot(i as u16);
                if !self.rules.try_fire(slot, &self.players[i].cmd, tick) {
                    continue;
                }
                mark(&mut self.changed, i);
                let p = &mut self.players[i];
                p.shots += 1;
                let eye_m = self.config.history.pose.eye_height_m(p.state.stance());
                // Tested against the world as the shooter saw it: its view time, clamped
                // by the history to the max rewind; never written back into the live world.
                // Who could be hit is who was alive then (the history knows); whether the
                // hit lands is the rules' call on who is alive now.
                let view = if p.view.tick.0 < tick.0 {
                    p.view
                } else {
                    ViewTime::at(tick)
                };
                let (command_tick, interp_delay_ticks) = view.rewind_args();
                // The history's newest tick is the last one stepped, `tick - 1`.
                let back = tick.0.wrapping_sub(1).wrapping_sub(view.tick.0);
                let clamped = back > self.history.max_rewind_ticks();
                let shot = Shot {
                    shooter: slot,
                    command_tick,
                    interp_delay_ticks,
                    origin: p.state.origin + Vec3::new(0.0, 0.0, eye_m),
                    direction: hitscan::aim_direction(p.cmd.yaw, p.cmd.pitch),
                    max_range_m: f32::INFINITY,
                };
                let hit = hitscan::fire(&shot, &self.map, &self.history, &self.seen, scopes);
                let landed = hit.is_some_and(|hit| {
                    !matches!(
                        self.rules
                            .apply_hit(slot, hit.victim, hit.part, hit.distance_m, tick),
                        HitOutcome::Rejected(_)
                    )
                });
                if let (Some(hit), true) = (hit, landed) {
                    mark(&mut self.changed, usize::from(hit.victim.0));
                }
                self.shots.push(ShotRecord {
                    shooter: slot,
                    tick,
                    hit,
                    landed,
                    clamped,
                });
            }
            self.rules.end_tick(tick);
            if self
                .events()
                .iter()
                .any(|e| matches!(e, RulesEvent::RoundStarted { .. }))
            {
                self.respawn_all();
                self.changed.fill(u64::MAX);
                frozen = true;
                respawned = true;
            }
        }
        {
            let _m = scopes.scope(Category::Movement);
            // The buy phase holds players behind its barriers; at the match's end they stand.
            let over = self.rules.phase() == Phase::MatchOver || respawned;
            let map = if frozen { &*self.buy_map } else { &*self.map };
            let (params, dt) = (&self.config.movement, self.dt);
            for (slot, p) in self.players.iter_mut().enumerate() {
                let before = p.state;
                if !over && self.rules.is_alive(PlayerSlot(slot as u16)) {
                    pmove(&mut p.state, &p.cmd, params, map, dt);
                } else {
                    // Held: the view turns, the body stays (and still falls and lands).
                    let held = UserCmd {
                        forward: 0,
                        side: 0,
                        buttons: p.cmd.buttons & buttons::CROUCH,
                        ..p.cmd
                    };
                    pmove(&mut p.state, &held, params, map, dt);
                }
                if p.state != before {
                    mark(&mut self.changed, slot);
                }
            }
        }
        // In the buy phase no shot can hurt, so nobody is posed (VALORANT's idle pose).
        let posing = if frozen {
            Posing::Idle
        } else {
            Posing::Animated
        };
        if posing != self.posing {
            // Clients pose their own history as the server does: every player says so.
            self.changed.fill(u64::MAX);
        }
        self.posing = posing;
        let rules = &self.rules;
        let samples = self.players.iter().enumerate().map(|(i, p)| PlayerSample {
            state: p.state,
            stance: p.state.stance(),
            alive: rules.is_alive(PlayerSlot(i as u16)),
        });
        self.history.record(tick, samples, posing, scopes);
        // Who each client may be told about after this tick: charged to the fow category.
        self.fow_states.clear();
        self.fow_states.extend(self.players.iter().map(|p| p.state));
        for (i, alive) in self.fow_alive.iter_mut().enumerate() {
            *alive = self.rules.is_alive(PlayerSlot(i as u16));
        }
        self.fow.update(
            &self.fow_states,
            &self.fow_teams,
            &self.fow_alive,
            near,
            &self.map,
            tick,
            scopes,
        );
        self.tick = self.tick.next();
    }

    /// The fog of war after the last step: [`Fow::row`] says which players a viewer may be
    /// sent.
    pub fn fow(&self) -> &Fow {
        &self.fow
    }

    /// The players whose replicated state the last step wrote (moved, fired, were hit,
    /// died, respawned, or changed posing), in slot order; every player after
    /// [`World::new`]. The replication layer quantizes only these.
    pub fn changed(&self) -> impl Iterator<Item = PlayerSlot> + '_ {
        let players = self.players.len();
        self.changed
            .iter()
            .enumerate()
            .flat_map(|(w, &word)| crate::math::BitIter(word).map(move |b| w * 64 + b))
            .take_while(move |&i| i < players)
            .map(|i| PlayerSlot(i as u16))
    }

    /// Puts every player back at its team's spawn point, standing still.
    fn respawn_all(&mut self) {
        for (slot, p) in self.players.iter_mut().enumerate() {
            let slot = PlayerSlot(slot as u16);
            let spawn = self
                .map
                .spawn_point(World::team_of(slot), usize::from(slot.0 / 2));
            p.state = PlayerState {
                origin: spawn.origin + Vec3::new(0.0, 0.0, SKIN_M),
                yaw: spawn.yaw,
                on_ground: true,
                ..Default::default()
            };
        }
    }

    /// How the last tick stepped was posed: [`Posing::Idle`] while the buy phase held
    /// players (nothing posed), [`Posing::Animated`] in combat. Clients that judge shots
    /// themselves record their history alike.
    pub fn posing(&self) -> Posing {
        self.posing
    }

    /// A hash of the exact state (bit patterns, not rounded values): equal hashes after
    /// equal commands prove the step deterministic.
    pub fn state_hash(&self) -> u64 {
        // FNV-1a, 64-bit.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |v: u32| {
            for b in v.to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        eat(self.tick.0);
        for p in &self.players {
            for v in p
                .state
                .origin
                .to_bits()
                .into_iter()
                .chain(p.state.velocity.to_bits())
            {
                eat(v);
            }
            eat(u32::from(p.state.yaw));
            eat(p.state.pitch as u32);
            eat(u32::from(p.state.on_ground));
            eat(u32::from(p.state.crouched));
            eat(p.shots);
        }
        for slot in 0..self.players.len() {
            eat(u32::from(self.rules.health_hp(PlayerSlot(slot as u16))));
        }
        eat(u32::from(self.rules.round_state().round()));
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn scopes() -> Scopes {
        Scopes::new(Instant::now)
    }

    #[test]
    fn worlds_share_their_built_in_map_and_a_restart_copies_none() {
        let a = World::new(WorldConfig::default());
        let b = World::new(WorldConfig::default());
        assert!(Arc::ptr_eq(&a.map, &b.map) && Arc::ptr_eq(&a.buy_map, &b.buy_map));
        let mut played = World::new(WorldConfig::default());
        for _ in 0..10 {
            played.step(&scopes());
        }
        let again = played.restarted();
        assert!(Arc::ptr_eq(&again.map, &a.map) && Arc::ptr_eq(&again.buy_map, &a.buy_map));
        assert_eq!(again.tick(), Tick(0));
        assert_eq!(
            again.state_hash(),
            a.state_hash(),
            "a restart is a new world"
        );
        // The buy map is the map with its barriers raised.
        assert!(!Arc::ptr_eq(&a.map, &a.buy_map));
    }

    fn scripted(world: &mut World, s: &Scopes, ticks: u32) -> Vec<u64> {
        let mut hashes = Vec::new();
        for t in 0..ticks {
            for slot in 0..world.config().players {
                let x = t.wrapping_mul(31).wrapping_add(u32::from(slot) * 7);
                world.set_cmd(
                    PlayerSlot(slot),
                    UserCmd {
                        forward: (x % 255) as u8 as i8,
                        side: (x / 3 % 255) as u8 as i8,
                        buttons: (x % 4) as u8,
                        yaw: (x * 97) as u16,
                        pitch: 0,
                    },
                );
            }
            world.step(s);
            hashes.push(world.state_hash());
        }
        hashes
    }

    #[test]
    fn same_commands_give_bit_identical_states() {
        let s = scopes();
        let mut a = World::new(WorldConfig::default());
        let mut b = World::new(WorldConfig::default());
        let ha = scripted(&mut a, &s, 500);
        let hb = scripted(&mut b, &s, 500);
        assert_eq!(ha, hb);
        // And the state does change: the hash is not constant.
        assert_ne!(ha[0], ha[499]);
    }

    #[test]
    fn the_shots_grid_changes_no_hit() {
        // 64 players (the fewest with a grid) fighting from the first tick, one hit a kill:
        // dead players, a round run out and everyone respawned. One world's history tests every
        // player for every shot.
        let s = scopes();
        let config = WorldConfig {
            players: 64,
            rules: RulesConfig {
                buy: Duration::ZERO,
                round: Duration::from_secs(4),
                round_end: Duration::from_millis(500),
                max_health_hp: std::num::NonZeroU16::MIN,
                ..RulesConfig::default()
            },
            ..WorldConfig::default()
        };
        // A walled floor, the teams alternating on a ring.
        let map = Arc::new(
            Map::parse(
                "box -60 -60 -1 60 60 0\nbox -60 -60 0 -59 60 5\nbox 59 -60 0 60 60 5\n\
                 box -59 -60 0 59 -59 5\nbox -59 59 0 59 60 5\nspawn_ring 0 0 0 12 64\n",
            )
            .unwrap(),
        );
        let mut grid = World::with_map(config, Arc::clone(&map));
        let mut every = World::with_map(config, map);
        assert!(grid.history.broad_phase().is_some());
        every.history = History::with_grid(*every.history.config(), false);
        let (mut hits, mut dead, mut rounds) = (0, 0, 0);
        for t in 0..800u32 {
            for world in [&mut grid, &mut every] {
                for slot in 0..64 {
                    let x = t.wrapping_mul(31).wrapping_add(u32::from(slot) * 7);
                    let cmd = UserCmd {
                        forward: (x % 255) as u8 as i8,
                        side: (x / 3 % 255) as u8 as i8,
                        buttons: buttons::FIRE,
                        yaw: (x * 97) as u16,
                        pitch: 0,
                    };
                    world.set_cmd(PlayerSlot(slot), cmd);
                }
                world.step(&s);
            }
            assert_eq!(grid.state_hash(), every.state_hash(), "tick {t}");
            assert_eq!(grid.shots(), every.shots(), "tick {t}");
            hits += grid.shots().iter().filter(|s| s.landed).count();
            dead = dead.max(
                (0..64)
                    .filter(|&i| !grid.rules.is_alive(PlayerSlot(i)))
                    .count(),
            );
            rounds += grid
                .events()
                .iter()
                .filter(|e| matches!(e, RulesEvent::RoundStarted { .. }))
                .count();
        }
        assert!(hits > 0 && dead > 0 && rounds > 0, "{hits} {dead} {rounds}");
    }

    #[test]
    fn players_spawn_apart_on_their_teams_spawn_points() {
        let w = World::new(WorldConfig::default());
        let ps = w.players();
        assert_eq!(ps.len(), 10);
        let hull = w.config().movement.hull();
        for (i, a) in ps.iter().enumerate() {
            let spawn = w
                .map()
                .spawns()
                .iter()
                .find(|s| (s.origin - a.state.origin).horizontal_length() < 1e-6)
                .expect("at a spawn point");
            assert_eq!(spawn.team, World::team_of(PlayerSlot(i as u16)));
            assert_eq!(a.state.yaw, spawn.yaw);
            assert!(!w.map().hull_overlaps(hull, a.state.origin));
            for b in &ps[i + 1..] {
                assert!((a.state.origin - b.state.origin).length() > 1.0);
            }
        }
    }

    #[test]
    fn players_stand_still_on_spawn_until_moved() {
        let s = scopes();
        let mut w = World::new(WorldConfig::default());
        let before: Vec<_> = w.players().iter().map(|p| p.state).collect();
        for _ in 0..64 {
            w.step(&s);
        }
        for (p, b) in w.players().iter().zip(&before) {
            assert_eq!(p.state.origin, b.origin);
            assert!(p.state.on_ground);
        }
    }

    #[test]
    fn more_players_than_spawn_points_share_them() {
        let w = World::new(WorldConfig {
            players: 14,
            ..WorldConfig::default()
        });
        // The attackers have five points: slot 10 is their sixth player and takes slot 0's point.
        assert_eq!(w.players()[10].state.origin, w.players()[0].state.origin);
        assert_eq!(w.players().len(), 14);
    }

    #[test]
    fn the_crowd_spawns_on_the_800_m_circle() {
        let w = World::new(WorldConfig {
            players: 100,
            map: BuiltinMap::Flat2km,
            ..WorldConfig::default()
        });
        for p in w.players() {
            let r = p.state.origin.horizontal_length();
            assert!((r - 800.0).abs() < 0.01, "{r}");
        }
        // Each at its own point.
        assert!((w.players()[0].state.origin - w.players()[1].state.origin).length() > 40.0);
    }

    /// Slots past 255 are players like any other: the crowd of a thousand needs them.
    #[test]
    fn a_crowd_past_256_players_seats_and_steps_its_slots_past_255() {
        let s = scopes();
        let mut w = World::new(WorldConfig {
            players: 300,
            map: BuiltinMap::Flat2km,
            ..WorldConfig::default()
        });
        assert_eq!(w.players().len(), 300);
        let last = PlayerSlot(299);
        assert_eq!(World::team_of(last), Team::Defenders);
        // More players than the ring's 100 points: slot 299 shares slot 99's point.
        let shared = (w.players()[299].state.origin - w.players()[99].state.origin).length();
        assert!(shared < 1e-3, "{shared}");
        w.set_cmd(
            last,
            UserCmd {
                forward: 127,
                ..UserCmd::default()
            },
        );
        for _ in 0..2 {
            w.step(&s);
        }
        assert!(w.fow().is_visible(last, last));
        assert_eq!(w.fow().row(last).len(), 300usize.div_ceil(64));
        assert!(w.rules().is_alive(last));
    }

    /// A short buy phase, so tests reach combat quickly.
    fn quick() -> WorldConfig {
        WorldConfig {
            rules: RulesConfig {
                buy: std::time::Duration::from_millis(500),
                ..RulesConfig::default()
            },
            ..WorldConfig::default()
        }
    }

    #[test]
    fn the_buy_phase_holds_players_and_holds_fire_then_the_rules_enforce_the_rate() {
        use crate::buttons;
        let s = scopes();
        let mut w = World::new(quick());
        let start = w.players()[0].state.origin;
        w.set_cmd(
            PlayerSlot(0),
            UserCmd {
                forward: 127,
                buttons: buttons::FIRE,
                ..Default::default()
            },
        );
        // Half a second of buy phase: 64 ticks. The player runs, but the barrier across
        // its spawn room's doorway (x = -23..-22) holds it inside; nothing fires.
        let room_x = -23.0 - w.config().movement.hull_half_width;
        for _ in 0..64 {
            w.step(&s);
            assert!(w.players()[0].state.origin.x <= room_x + 1e-3);
        }
        assert!((w.players()[0].state.origin - start).horizontal_length() > 0.5);
        assert_eq!(w.players()[0].shots, 0);
        // One second of combat holding fire: the rifle's 600 rounds a minute.
        for _ in 0..128 {
            w.step(&s);
        }
        assert!((w.players()[0].state.origin - start).horizontal_length() > 1.0);
        assert_eq!(w.players()[0].shots, 10);
        assert_eq!(w.players()[1].shots, 0);
        assert_eq!(w.rules().weapon(PlayerSlot(0)).unwrap().ammo(), 20);
    }

    #[test]
    fn a_shot_hits_where_the_shooter_saw_the_target_not_where_it_is() {
        use crate::buttons;
        let s = scopes();
        let mut w = World::new(quick());
        for _ in 0..70 {
            w.step(&s); // past the buy phase
        }
        // Open floor in the arena's north lane (y = 17): shooter at x = -10 facing +x, the
        // target 10 m ahead, running across the line of fire (+y) every tick.
        w.players[0].state = PlayerState {
            origin: Vec3::new(-10.0, 17.0, SKIN_M),
            on_ground: true,
            ..Default::default()
        };
        w.players[1].state = PlayerState {
            origin: Vec3::new(0.0, 17.0, SKIN_M),
            velocity: Vec3::new(0.0, 8.0, 0.0),
            on_ground: true,
            ..Default::default()
        };
        w.set_cmd(
            PlayerSlot(1),
            UserCmd {
                side: -127,
                yaw: 0,
                ..Default::default()
            },
        );
        w.history.clear();
        let seen_at = w.tick();
        w.step(&s); // the tick the shooter sees: the target on the line
        for _ in 0..12 {
            w.step(&s); // ~100 ms later the target has moved well off the line
        }
        let off = w.players[1].state.origin.y - 17.0;
        assert!(off.abs() > 0.5, "the target moved {off} m");
        // Aim level at chest height: the eye is 1.6 m, aim down a little to the body.
        let pitch = -(0.4f32.atan2(10.0) / std::f32::consts::TAU * 65536.0) as i16;
        w.set_cmd(
            PlayerSlot(0),
            UserCmd {
                buttons: buttons::FIRE,
                yaw: 0,
                pitch,
                ..Default::default()
            },
        );
        // Seen at the present tick: a miss.
        w.set_view(PlayerSlot(0), w.tick());
        w.step(&s);
        assert_eq!(
            w.rules().health_hp(PlayerSlot(1)),
            100,
            "no hit on the live position"
        );
        // Seen ~100 ms ago (within the 200 ms rewind): a hit, though it is not there now.
        w.set_cmd(
            PlayerSlot(0),
            UserCmd {
                buttons: 0,
                yaw: 0,
                pitch,
                ..Default::default()
            },
        );
        for _ in 0..13 {
            w.step(&s); // let the rifle cool down
        }
        w.set_cmd(
            PlayerSlot(0),
            UserCmd {
                buttons: buttons::FIRE,
                yaw: 0,
                pitch,
                ..Default::default()
            },
        );
        w.set_view(PlayerSlot(0), seen_at);
        let before = w.players[1].state;
        w.step(&s);
        let hurt = w.rules().health_hp(PlayerSlot(1));
        assert!(hurt < 100, "rewound hit: health {hurt}");
        assert!(w
            .events()
            .iter()
            .any(|e| matches!(e, RulesEvent::Hit { .. })));
        assert_eq!(w.shots().len(), 1);
        assert_eq!(w.shots()[0].hit.map(|h| h.victim), Some(PlayerSlot(1)));
        // The rewind left the live world alone (the target only moved by its own step).
        assert!((w.players[1].state.origin.x - before.origin.x).abs() < 0.5);
    }

    #[test]
    fn a_round_timeout_respawns_everyone_for_the_next_buy_phase() {
        let s = scopes();
        let config = WorldConfig {
            rules: RulesConfig {
                buy: std::time::Duration::from_millis(100),
                round: std::time::Duration::from_millis(500),
                round_end: std::time::Duration::from_millis(100),
                ..RulesConfig::default()
            },
            ..WorldConfig::default()
        };
        let mut w = World::new(config);
        let spawn = w.players()[3].state.origin;
        w.set_cmd(
            PlayerSlot(3),
            UserCmd {
                forward: 127,
                ..Default::default()
            },
        );
        let mut rounds_started = 0;
        for _ in 0..(128 * 7 / 10 + 2) {
            w.step(&s);
            rounds_started += w
                .events()
                .iter()
                .filter(|e| matches!(e, RulesEvent::RoundStarted { .. }))
                .count();
            if rounds_started == 1 {
                break;
            }
        }
        assert_eq!(rounds_started, 1, "round two began");
        assert!(
            (w.players()[3].state.origin - spawn).horizontal_length() < 1e-3,
            "back at spawn"
        );
        assert_eq!(
            w.rules().round_state().score().of(Team::Defenders),
            1,
            "time-out: defenders"
        );
    }

    #[test]
    fn step_is_charged_to_gameplay_and_movement() {
        let s = scopes();
        let mut w = World::new(WorldConfig::default());
        s.begin_frame();
        w.step(&s);
        let r = s.end_frame();
        assert!(r.entered & (1 << Category::Movement.index()) != 0);
        assert!(r.entered & (1 << Category::Gameplay.index()) != 0);
        assert_eq!(w.tick(), Tick(1));
    }
}
