//! Replication: what each client is sent of a match, and the reader that rebuilds it.
//!
//! What it does: quantizes the world once per tick into a snapshot body that every
//! connection shares ([`SnapshotWriter`]), decodes it on the client ([`SnapshotReader`]),
//! and encodes player commands ([`cmd`]).
//!
//! What it does not do: sockets, timing, or deciding when to send.
//!
//! In order of importance: a decoder never panics on hostile bytes; the world is quantized
//! once per tick, not once per connection; no allocation per tick once buffers are warm.

pub mod cmd;
mod snapshot;

pub use snapshot::{
    EntityView, SnapshotError, SnapshotReader, SnapshotWriter, ENTITY_BYTES, HEADER_BYTES,
};
