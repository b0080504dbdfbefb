//! Sealing: what a match's tick wants sent, encrypted for each client into the send batch.
//!
//! The match knows nothing of the transport: it leaves one payload per connected seat in
//! its [`Outbox`](crate::game_match::Outbox), and the worker seals and queues them here.

use std::time::Instant;

use tickforge_io::time;
use tickforge_io::udp::SendBatch;
use tickforge_proto::netcode::{self, Server as Transport};
use tickforge_telemetry::{Category, FrameRecord, Phase, Scopes};

use super::nanos;
use crate::game_match::HostedMatch;

/// One match's frame as the worker runs it: the match's tick, then its outbox sealed for
/// each client and queued into `send`, the sealing charged to the frame as network work in
/// the send phase, with the receive work done for the match since its last tick.
///
/// Returns the frame's cost so far (the caller adds the shared send work) and the number
/// of payloads queued. Allocates nothing while `send` has room.
pub fn tick_match(
    m: &mut dyn HostedMatch,
    now: Instant,
    scopes: &Scopes,
    transport: &mut Transport,
    frame_buf: &mut Vec<u8>,
    send: &mut SendBatch,
) -> (FrameRecord, usize) {
    let mut record = m.run_tick(now, scopes);
    let sealing = time::now();
    let mut queued = 0;
    for (client, payload) in m.outbox().iter() {
        if let Some(tx) = transport.send_payload(now, client, payload, frame_buf) {
            push_transmit(send, tx, frame_buf);
            queued += 1;
        }
    }
    record.add(Category::Network, Phase::Send, nanos(time::now() - sealing));
    record.add(Category::Network, Phase::Receive, m.take_receive_ns());
    (record, queued)
}

/// Queues a sealed payload, after the keep-alive that must precede it to an unconfirmed
/// client.
pub(super) fn push_transmit(send: &mut SendBatch, tx: netcode::Transmit, bytes: &[u8]) {
    if tx.keepalive_bytes > 0 {
        send.push(tx.to, &bytes[..tx.keepalive_bytes]);
    }
    send.push(tx.to, &bytes[tx.keepalive_bytes..]);
}
