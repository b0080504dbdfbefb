//! A match driven tick by tick as the runtime would: inputs applied, one step, the
//! entity log drained into a client-like table of decoded states.

#![allow(dead_code)]

use tickforge_api::{
    Entities, EntityChange, Events, Game, InputInfo, MatchSetup, Scopes, Seat, StepContext, Tick,
    ViewTime,
};
use tickforge_ctf::{decode_state, Ctf, CtfConfig, EntityState, Event, Input};

pub const HZ: u32 = 128;

pub struct Match {
    pub game: Ctf,
    pub entities: Entities,
    pub events: Events,
    pub scopes: Scopes,
    /// Each entity's state as a client decoding the change log has it, by network id.
    pub world: Vec<Option<EntityState>>,
    pub tick: Tick,
    /// `Set` records drained after the last step.
    pub sets: usize,
}

impl Match {
    /// A match of `seats` seats, a client in each: every seat joined, as the runtime joins
    /// each client it seats.
    pub fn new(config: CtfConfig, seats: u16) -> Match {
        Match::seated(config, seats, 0..seats)
    }

    /// A match of `seats` seats where only `joined` have a client: the others stay idle.
    /// The joiners' events (the score) are this match's events until the first tick.
    pub fn seated(config: CtfConfig, seats: u16, joined: impl IntoIterator<Item = u16>) -> Match {
        let max = Ctf::max_entities(&config, seats);
        let mut entities = Entities::new(max);
        let setup = MatchSetup {
            seats,
            tick_hz: HZ,
            record: false,
            stagger: 0,
        };
        let game = Ctf::new(&config, &setup, &mut entities);
        let mut m = Match {
            game,
            entities,
            events: Events::with_capacity(64, 8),
            scopes: Scopes::new(std::time::Instant::now),
            world: vec![None; usize::from(max)],
            tick: Tick(0),
            sets: 0,
        };
        m.drain();
        for s in joined {
            m.game.join(Seat(s), &mut m.events);
        }
        m
    }

    fn drain(&mut self) {
        self.sets = 0;
        for change in self.entities.drain() {
            match change {
                EntityChange::Set { id, lanes, .. } => {
                    self.world[usize::from(id.0)] = Some(decode_state(&lanes));
                    self.sets += 1;
                }
                EntityChange::Destroyed(id) => self.world[usize::from(id.0)] = None,
            }
        }
    }

    /// One tick: each seat's input from `input(seat, world)`, then the step.
    pub fn tick(&mut self, mut input: impl FnMut(u16, &[Option<EntityState>]) -> Input) {
        self.events.clear();
        let seats = self.world.len() as u16 - 2;
        for s in 0..seats {
            let i = input(s, &self.world);
            self.game.apply_input(
                Seat(s),
                &i,
                InputInfo {
                    seq: 0,
                    view: ViewTime::at(self.tick),
                },
            );
        }
        let mut cx = StepContext {
            tick: self.tick,
            scopes: &self.scopes,
            entities: &mut self.entities,
            events: &mut self.events,
            grid: None,
        };
        self.game.step(&mut cx);
        self.drain();
        self.tick = self.tick.next();
    }

    /// This tick's events, decoded.
    pub fn events(&self) -> Vec<Event> {
        (self.events.iter())
            .map(|(_, b)| Event::decode(b).expect("the game's events decode"))
            .collect()
    }

    pub fn player(&self, seat: u16) -> EntityState {
        self.world[usize::from(seat)].expect("a player")
    }

    pub fn flag(&self, index: u16) -> EntityState {
        self.world[usize::from(index)].expect("a flag")
    }
}
