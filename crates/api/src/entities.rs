//! Entity ids the runtime hands out, and the states a game writes for replication.
//!
//! A game spawns an entity and gets an [`EntityId`]: an index (`0..max_entities`, the
//! network id clients know it by) and a generation, bumped each time the index is freed, so
//! an id kept past its entity's destruction is refused rather than aliasing the next entity
//! in that index.
//!
//! Generations stay on the server: clients know an entity by its index alone. So a freed
//! index is not handed out again for [`REUSE_AFTER_TICKS`] ticks (replication's baseline
//! ring), and then oldest first: by then every client has been told the old entity is gone,
//! or is sent the new one as a full state, never as a delta from the old one's baseline. A
//! game that spawns and destroys quickly (projectiles) reserves room for that much churn in
//! [`Game::max_entities`](crate::Game::max_entities), and clears what it keeps per entity
//! (a lag-compensation history's samples) when it destroys one.
//!
//! What a game writes in a tick (a state with [`Entities::set`], a destruction) is logged
//! in order in buffers made with the match; the runtime drains the log into replication
//! after the step. Nothing allocates after [`Entities::new`] while the log stays within
//! one write per entity a tick, plus one each for the states a game writes in
//! [`Game::new`](crate::Game::new) (they wait in the log for the first step's).

use std::collections::VecDeque;

use tickforge_replication::{Lanes, NetId, Position};

/// Ticks a freed index waits before [`Entities::spawn`] hands it out again: replication's
/// default baseline ring (`ReplicationConfig::ring_ticks`), past which a client's baseline
/// of an entity is too old to delta against.
pub const REUSE_AFTER_TICKS: u32 = 64;

/// A live entity: its index (its network id) and the generation of that index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntityId {
    /// `0..max_entities`: the network id clients see.
    pub index: u16,
    /// Times the index had been freed before this entity took it.
    pub generation: u16,
}

impl EntityId {
    /// The network id clients know the entity by.
    pub fn net_id(self) -> NetId {
        NetId(self.index)
    }
}

/// What happened to one entity in a tick, in the order the game did it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EntityChange {
    /// A new state (its first, for a spawn).
    Set {
        /// The entity's network id.
        id: NetId,
        /// Where it is, for relevancy and priority.
        position: Position,
        /// Its fields, in the schema's wire units.
        lanes: Lanes,
    },
    /// The entity is gone: clients are told, and its id may be reused.
    Destroyed(NetId),
}

/// The entities of one match: ids, generations, and this tick's changes.
#[derive(Debug)]
pub struct Entities {
    /// Generation of each index; odd bit unused.
    generation: Vec<u16>,
    live: Vec<bool>,
    /// Free indexes, oldest freed first, each with the tick from which it may be handed out.
    free: VecDeque<(u16, u32)>,
    changes: Vec<EntityChange>,
    /// Ticks drained: the clock of [`REUSE_AFTER_TICKS`].
    ticks: u32,
}

impl Entities {
    /// Room for `max` entities at once (indexes `0..max`), none spawned.
    pub fn new(max: u16) -> Entities {
        let n = usize::from(max);
        Entities {
            generation: vec![0; n],
            live: vec![false; n],
            free: (0..max).map(|i| (i, 0)).collect(),
            // A write per entity in `Game::new` and another in the first step.
            changes: Vec::with_capacity(2 * n),
            ticks: 0,
        }
    }

    /// The most entities at once.
    pub fn capacity(&self) -> u16 {
        self.live.len() as u16
    }

    /// Entities alive now.
    pub fn len(&self) -> usize {
        self.live.len() - self.free.len()
    }

    /// True when no entity is alive.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A new entity, the lowest index never used (or the one freed longest ago, at least
    /// [`REUSE_AFTER_TICKS`] ticks ago); `None` when every index is alive or freed too
    /// recently. It is sent to clients from its first [`Entities::set`].
    pub fn spawn(&mut self) -> Option<EntityId> {
        let &(index, ready) = self.free.front()?;
        if ready > self.ticks {
            return None;
        }
        self.free.pop_front();
        self.live[usize::from(index)] = true;
        Some(EntityId {
            index,
            generation: self.generation[usize::from(index)],
        })
    }

    /// True while `id` names a live entity (not destroyed, not a stale generation).
    pub fn is_live(&self, id: EntityId) -> bool {
        let i = usize::from(id.index);
        self.live.get(i).copied().unwrap_or(false) && self.generation[i] == id.generation
    }

    /// Destroys `id`: clients are told it is gone. False (and nothing done) for an id that
    /// is not live.
    pub fn destroy(&mut self, id: EntityId) -> bool {
        if !self.is_live(id) {
            return false;
        }
        let i = usize::from(id.index);
        self.live[i] = false;
        self.generation[i] = self.generation[i].wrapping_add(1);
        let ready = self.ticks.saturating_add(REUSE_AFTER_TICKS);
        self.free.push_back((id.index, ready));
        self.changes.push(EntityChange::Destroyed(id.net_id()));
        true
    }

    /// `id`'s state this tick, at `position`; only what changed needs writing (an entity
    /// keeps its last state). False for an id that is not live.
    pub fn set(&mut self, id: EntityId, position: Position, lanes: &Lanes) -> bool {
        if !self.is_live(id) {
            return false;
        }
        self.changes.push(EntityChange::Set {
            id: id.net_id(),
            position,
            lanes: *lanes,
        });
        true
    }

    /// This tick's changes in order, emptying the log; the runtime calls it once after
    /// each step, and it counts the ticks freed indexes wait.
    pub fn drain(&mut self) -> std::vec::Drain<'_, EntityChange> {
        self.ticks = self.ticks.wrapping_add(1);
        self.changes.drain(..)
    }

    /// Forgets every entity and change, keeping the memory: the next match's start.
    pub fn reset(&mut self) {
        self.live.fill(false);
        self.generation.fill(0);
        self.free.clear();
        let max = self.capacity();
        self.free.extend((0..max).map(|i| (i, 0)));
        self.changes.clear();
        self.ticks = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> Lanes {
        Lanes::ZERO
    }

    #[test]
    fn spawns_take_the_lowest_indexes_first() {
        let mut e = Entities::new(4);
        let ids: Vec<u16> = (0..4).map(|_| e.spawn().unwrap().index).collect();
        assert_eq!(ids, [0, 1, 2, 3]);
        assert_eq!(e.spawn(), None, "full");
        assert_eq!(e.len(), 4);
    }

    #[test]
    fn a_destroyed_id_is_refused_and_its_index_comes_back_last_with_a_new_generation() {
        let mut e = Entities::new(3);
        let a = e.spawn().unwrap();
        let b = e.spawn().unwrap();
        assert!(e.destroy(a));
        assert!(!e.destroy(a), "twice");
        assert!(!e.set(a, Position::default(), &state()), "stale id");
        let c = e.spawn().unwrap();
        assert_eq!(c.index, 2, "the never-used index before the freed one");
        let log: Vec<_> = e.drain().collect();
        assert_eq!(log, vec![EntityChange::Destroyed(NetId(0))]);
        // The freed index waits out replication's baseline ring before it comes back.
        for _ in 1..REUSE_AFTER_TICKS {
            assert_eq!(e.spawn(), None, "freed too recently");
            e.drain();
        }
        let d = e.spawn().unwrap();
        assert_eq!((d.index, d.generation), (a.index, a.generation + 1));
        assert!(!e.is_live(a) && e.is_live(d) && e.is_live(b));
    }

    #[test]
    fn changes_are_logged_in_order_and_drained() {
        let mut e = Entities::new(2);
        let a = e.spawn().unwrap();
        let mut lanes = state();
        lanes.0[0] = 7;
        assert!(e.set(a, Position::new(1.0, 2.0, 3.0), &lanes));
        assert!(e.destroy(a));
        let log: Vec<_> = e.drain().collect();
        assert_eq!(log.len(), 2);
        assert!(matches!(log[0], EntityChange::Set { id: NetId(0), lanes: l, .. } if l.0[0] == 7));
        assert_eq!(log[1], EntityChange::Destroyed(NetId(0)));
        assert_eq!(e.drain().count(), 0);
    }

    #[test]
    fn a_write_each_in_new_and_in_the_first_step_fits_the_log_as_made() {
        let mut e = Entities::new(8);
        let ids: Vec<EntityId> = (0..8).map(|_| e.spawn().unwrap()).collect();
        let room = e.changes.capacity();
        for _ in 0..2 {
            for &id in &ids {
                e.set(id, Position::default(), &state());
            }
        }
        assert_eq!(e.changes.capacity(), room, "the log did not grow");
        assert_eq!(e.drain().count(), 16);
    }

    #[test]
    fn reset_starts_over_from_index_zero() {
        let mut e = Entities::new(2);
        let a = e.spawn().unwrap();
        e.destroy(a);
        e.reset();
        let b = e.spawn().unwrap();
        assert_eq!((b.index, b.generation), (0, 0));
        assert_eq!(e.drain().count(), 0);
    }
}
