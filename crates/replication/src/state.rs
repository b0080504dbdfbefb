//! Entity ids, positions, and the stored form of a state.

use crate::schema::Lanes;

/// An entity's network id, `0..max_entities` of the match (at most [`MAX_ENTITIES`]).
///
/// Distinct from the server's own entity handles: the game maps its entities to these
/// small ids, and may reuse an id once the entity is gone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetId(pub u16);

impl NetId {
    /// The id as an index into per-entity tables.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// Largest `max_entities` a replicator or replica may be configured with.
pub const MAX_ENTITIES: usize = 4096;

/// Where an entity or a viewer is, metres, as the game supplies it: relevancy and
/// priority use `x` and `y` (the ground plane).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Position {
    /// Metres east (or the game's first ground axis).
    pub x: f32,
    /// Metres north (or the game's second ground axis).
    pub y: f32,
    /// Metres up; unused by relevancy today.
    pub z: f32,
}

impl Position {
    /// The point (`x`, `y`, `z`), metres.
    pub const fn new(x: f32, y: f32, z: f32) -> Position {
        Position { x, y, z }
    }
}

/// One entity's state at one tick, kept as a baseline (server ring, client history).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stored {
    /// The tick the state is of.
    pub tick: u32,
    /// The slot holds a state (false: never written or forgotten).
    pub filled: bool,
    /// The state, in wire units.
    pub q: Lanes,
}
