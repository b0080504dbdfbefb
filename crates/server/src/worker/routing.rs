//! Routing: datagrams in through the transport to the match and seat of their client.

use std::time::Instant;

use tickforge_api::Seat;
use tickforge_io::udp::RecvBatch;
use tickforge_proto::netcode::{Server, ServerEvent};
use tickforge_proto::user_data::{UserData, ANY_SEAT};
use tickforge_proto::{ClientIndex, DisconnectReason};

use super::Worker;
use crate::game_match::{HostedMatch, ReceiveError};

impl Worker {
    pub(super) fn receive(&mut self, now: Instant) {
        let Worker {
            recv,
            socket,
            io,
            transport,
            matches,
            hosted,
            routes,
            routed,
            drops,
            ..
        } = self;
        routed.clear();
        routed.resize(matches.len(), 0);
        // The route of each datagram hinted ahead, by its index modulo the ring.
        let mut hinted = [None; HINT_AHEAD];
        loop {
            let n = recv.fill(socket, io);
            for (j, route) in hinted.iter_mut().enumerate().take(n) {
                *route = hint(recv, transport, routes, matches, j);
            }
            for i in 0..n {
                // The seat of the datagram HINT_AHEAD on starts loading, and what the seat
                // of the one half as far points to (its lines hinted two datagrams ago).
                if i + HINT_AHEAD < n {
                    hinted[i % HINT_AHEAD] = hint(recv, transport, routes, matches, i + HINT_AHEAD);
                }
                let deep = i + HINT_AHEAD / 2;
                if let Some((mi, seat)) = hinted[deep % HINT_AHEAD].filter(|_| deep < n) {
                    if let Some(m) = matches.get(mi) {
                        m.prefetch_seat(seat, true);
                    }
                }
                if recv.is_truncated(i) {
                    drops.oversize += 1;
                    continue;
                }
                let (from, datagram) = recv.get_mut(i);
                match transport.handle_datagram(now, from, datagram) {
                    None => {}
                    Some(ServerEvent::Connected {
                        client, user_data, ..
                    }) => match place(now, matches, &UserData::parse(&user_data), client) {
                        Ok(route) => {
                            hosted[route.0].joined = true;
                            routes[client.as_usize()] = Some(route);
                        }
                        Err(refusal) => {
                            match refusal {
                                Refusal::NoSuchMatch => drops.no_such_match += 1,
                                Refusal::MatchFull => drops.match_full += 1,
                            }
                            transport.disconnect(client);
                        }
                    },
                    Some(ServerEvent::Payload { client, data }) => {
                        let Some((mi, slot)) = routes[client.as_usize()] else {
                            drops.bad_message += 1;
                            continue;
                        };
                        routed[mi] += 1;
                        if let Err(e) = matches[mi].receive(now, slot, data) {
                            // A client that breaks the reliability protocol (bounds, malformed
                            // sections) or floods is disconnected; the others never notice.
                            match e {
                                ReceiveError::Flood => drops.flooding += 1,
                                ReceiveError::Link(_) => drops.misbehaved += 1,
                                ReceiveError::Refused(_) => drops.refused_messages += 1,
                            }
                            transport.disconnect(client);
                            unroute(routes, matches, client);
                        }
                    }
                    Some(ServerEvent::Disconnected { client, .. }) => {
                        unroute(routes, matches, client);
                    }
                }
            }
            if !recv.is_full() {
                break;
            }
        }
        transport.handle_timeout(now);
        while let Some((client, reason)) = transport.poll_disconnect() {
            drops.timed_out += u64::from(reason == DisconnectReason::TimedOut);
            unroute(routes, matches, client);
        }
        while let Some(to) = transport.poll_transmit(&mut self.frame_buf) {
            self.send.push(to, &self.frame_buf);
        }
    }

    pub(super) fn share_receive_cost(&mut self, ns: u64) {
        let total: u64 = self.routed.iter().map(|&r| u64::from(r)).sum();
        let n = self.matches.len() as u64;
        for (m, &r) in self.matches.iter_mut().zip(&self.routed) {
            // The cost follows the datagrams routed to each match (control packets and
            // garbage ride along in proportion); with none routed it is shared evenly.
            let share = (ns * u64::from(r))
                .checked_div(total)
                .unwrap_or(ns / n.max(1));
            let c = m.counters_mut();
            c.pending_receive_ns += share;
            c.wake_receive_ns = share;
        }
    }
}

/// How many datagrams ahead of the one being read the worker hints the connection and the
/// seat of (their own lines); half as far, what those lines point to. A datagram costs about
/// a microsecond to read, a cold line a tenth of that to load: two datagrams cover it.
const HINT_AHEAD: usize = 4;

/// Starts loading the connection and the seat datagram `j` of `recv` is for, and returns
/// its route: a hint, which changes nothing (a datagram from no route gets none).
fn hint(
    recv: &RecvBatch,
    transport: &Server,
    routes: &[Option<(usize, Seat)>],
    matches: &[Box<dyn HostedMatch>],
    j: usize,
) -> Option<(usize, Seat)> {
    let (from, _) = recv.get(j);
    let client = transport.prefetch_connection(from)?;
    let (mi, seat) = (*routes.get(client.as_usize())?)?;
    matches.get(mi)?.prefetch_seat(seat, false);
    Some((mi, seat))
}

/// Why a connection was refused after its handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    /// Its token names a match this worker does not host.
    NoSuchMatch,
    /// The match (or, for a token from another backend, every match) has no free slot.
    MatchFull,
}

/// Seats a new connection: in the match and slot its token names, or, for a token from
/// another backend, in the first match with a free slot.
fn place(
    now: Instant,
    matches: &mut [Box<dyn HostedMatch>],
    user_data: &Option<UserData>,
    client: ClientIndex,
) -> Result<(usize, Seat), Refusal> {
    match user_data {
        Some(ud) => {
            let mi =
                (matches.iter().position(|m| m.id() == ud.match_id)).ok_or(Refusal::NoSuchMatch)?;
            let preferred = (ud.seat != ANY_SEAT).then_some(Seat(ud.seat));
            (matches[mi].seat(now, client, preferred))
                .map(|slot| (mi, slot))
                .ok_or(Refusal::MatchFull)
        }
        None => (matches.iter_mut().enumerate())
            .find_map(|(mi, m)| m.seat(now, client, None).map(|slot| (mi, slot)))
            .ok_or(Refusal::MatchFull),
    }
}

pub(super) fn unroute(
    routes: &mut [Option<(usize, Seat)>],
    matches: &mut [Box<dyn HostedMatch>],
    client: ClientIndex,
) {
    if let Some((mi, slot)) = routes[client.as_usize()].take() {
        matches[mi].unseat(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{walk_match, WalkConfig};
    use tickforge_proto::user_data::ANY;
    use tickforge_proto::MatchId;

    fn two_matches(now: Instant) -> Vec<Box<dyn HostedMatch>> {
        vec![
            Box::new(walk_match(MatchId(1), 2, WalkConfig::default(), now)),
            Box::new(walk_match(MatchId(2), 2, WalkConfig::default(), now)),
        ]
    }

    fn ours(match_id: u32, seat: u16) -> Option<UserData> {
        Some(UserData {
            match_id: MatchId(match_id),
            team: ANY,
            seat,
        })
    }

    #[test]
    fn a_token_naming_a_match_and_slot_gets_them() {
        let now = Instant::now();
        let mut m = two_matches(now);
        assert_eq!(
            place(now, &mut m, &ours(2, 1), ClientIndex(0)),
            Ok((1, Seat(1)))
        );
        // The slot is taken: the next free one in the same match.
        assert_eq!(
            place(now, &mut m, &ours(2, 1), ClientIndex(1)),
            Ok((1, Seat(0)))
        );
        // The match is full: refused, not moved to another match.
        assert_eq!(
            place(now, &mut m, &ours(2, ANY_SEAT), ClientIndex(2)),
            Err(Refusal::MatchFull)
        );
    }

    #[test]
    fn a_token_naming_no_such_match_is_refused() {
        let now = Instant::now();
        let mut m = two_matches(now);
        assert_eq!(
            place(now, &mut m, &ours(9, ANY_SEAT), ClientIndex(0)),
            Err(Refusal::NoSuchMatch)
        );
        assert_eq!(m.iter().map(|m| m.connected()).sum::<usize>(), 0);
    }

    #[test]
    fn a_foreign_token_gets_any_match_with_a_free_slot() {
        let now = Instant::now();
        let mut m = two_matches(now);
        let placed: Vec<_> = (0..4)
            .map(|i| place(now, &mut m, &None, ClientIndex(i)))
            .collect();
        assert_eq!(
            placed,
            [
                Ok((0, Seat(0))),
                Ok((0, Seat(1))),
                Ok((1, Seat(0))),
                Ok((1, Seat(1)))
            ]
        );
        assert_eq!(
            place(now, &mut m, &None, ClientIndex(4)),
            Err(Refusal::MatchFull),
            "every match full"
        );
    }
}
