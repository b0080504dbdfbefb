//! Replication: what each client is sent of a match, and the reader that rebuilds it.
//!
//! What it does:
//! - [`Replicator`], server side, one per match: the game pushes entity states as they
//!   change; every tick each connection gets a snapshot of the entities relevant to it
//!   (a spatial grid with hysteresis, `tickforge_sim::spatial::Grid`, or in a crowd a
//!   scan of what the client may see; and the game's fog-of-war row), highest priority
//!   first (distance, view direction, loss), within a packet budget and a per-second
//!   rate, each entity delta-encoded against the newest state that client acknowledged.
//!   Encodings are shared between connections that acked the same tick.
//! - [`Replica`], client side: decodes snapshots in any order into a per-entity history
//!   and a newest-wins view.
//! - [`Schema`]: the game declares its replicated fields (name, coding, quantum, the field
//!   that predicts it); that one table drives encoding, decoding and measuring, so one
//!   place says what an entity costs on the wire. Entities are [`Lanes`] of the schema's
//!   wire units; positions for relevancy and fog-of-war rows are the game's to supply.
//!
//! What it does not do: know any game (the reference shooter's schema, its state building
//! and its full-state and command formats live in `tickforge-shooter`), sockets, timing,
//! acks (the transport reports them with [`Replicator::on_ack`]), reliable events, or
//! deciding when to send. A tick is a number.
//!
//! In order of importance: a decoder never panics on hostile bytes and refuses a bad
//! snapshot whole; a client never decodes against a state other than the one the server
//! encoded against; the work of a tick follows the relevant entities, not all entities
//! times all connections, and each changed entity is quantized once per tick; no
//! allocation per tick once buffers are warm; then bytes on the wire.

mod bits;
mod conn;
mod delta;
mod priority;
mod reader;
mod schema;
mod state;
mod writer;

pub use bits::Ids;
pub use conn::LOSS_ACK_GAP;
pub use priority::{PriorityConfig, RateByDistance, Viewer};
pub use reader::{ReadError, ReadInfo, Replica, ReplicaConfig, ReplicaStats};
pub use schema::{Coding, Field, Lanes, Quantum, Schema, SchemaError, MAX_FIELDS, MAX_LANES};
pub use state::{NetId, Position, MAX_ENTITIES};
pub use writer::{
    ConfigError, ReplicationConfig, ReplicationStats, Replicator, WriteInfo, MIN_RING_TICKS,
};
