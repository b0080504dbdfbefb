//! A worker: one thread, one socket, its matches, and the frame that drives them.
//!
//! ```text
//! wake at the earliest match deadline        (sleep, then spin)
//! receive every waiting datagram             → transport → route by client → match
//! for each match whose tick is due: run it   (snapshots queued into the send batch)
//! send the batch
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tickforge_game::history::HistoryConfig;
use tickforge_game::{PlayerSlot, WorldConfig};
use tickforge_io::udp::{IoStats, RecvBatch, SendBatch, SocketOptions, UdpSocket};
use tickforge_io::{cpu, entropy, time};
use tickforge_proto::netcode::{self, Server as Transport, ServerEvent};
use tickforge_proto::user_data::{UserData, ANY};
use tickforge_proto::{ClientIndex, MatchId, MAX_PACKET_BYTES};
use tickforge_telemetry::report::{Datagrams, ServerReport, Ticks};
use tickforge_telemetry::{
    budget_ms, projected_games_per_core, Category, DurationHistogram, FrameRecord, FrameStats,
    Phase, Scopes, TARGET_GAMES_PER_CORE,
};

use crate::config::ServerConfig;
use crate::game_match::{Match, ReceiveError};

/// A tick that starts later than this after its deadline is late (DESIGN.md).
const LATE_AFTER: Duration = Duration::from_millis(1);
/// Datagrams read per receive batch.
const RECV_BATCH: usize = 256;

/// Datagrams the worker dropped after the transport accepted them.
#[derive(Clone, Copy, Debug, Default)]
struct Drops {
    /// Clients disconnected for breaking the reliability protocol.
    misbehaved: u64,
    /// Clients disconnected for sending far more than one packet a tick.
    flooding: u64,
    /// Connections refused: no such match, or no free slot.
    refused: u64,
    oversize: u64,
    bad_message: u64,
    bad_cmd: u64,
}

/// Figures of the measured window.
#[derive(Default)]
struct Measure {
    frames: FrameStats,
    worker_frames: DurationHistogram,
    wake_late: DurationHistogram,
    ticks: Ticks,
    cpu_start: Option<Duration>,
    cpu_end: Option<Duration>,
}

/// What a running worker reports about once a second.
#[derive(Clone, Copy, Debug)]
pub struct WorkerStatus {
    /// Time since the worker started.
    pub elapsed: Duration,
    /// Connected players over all matches.
    pub connected: usize,
    /// Match ticks run since start.
    pub ticks_run: u64,
    /// Late ticks in the measured window so far.
    pub late: u64,
}

/// One worker thread's state: it lives as long as the thread.
pub struct Worker {
    config: ServerConfig,
    socket: UdpSocket,
    transport: Transport,
    matches: Vec<Match>,
    /// Where each connection sits: match index and slot, by client index.
    routes: Vec<Option<(usize, PlayerSlot)>>,
    recv: RecvBatch,
    send: SendBatch,
    frame_buf: Vec<u8>,
    /// Datagrams routed to each match in this wake-up, to share the receive cost.
    routed: Vec<u32>,
    /// Frames of this wake-up waiting for their share of the send cost.
    due: Vec<(usize, FrameRecord, usize, Duration, Instant)>,
    /// Where finished matches' results are appended, opened at start.
    results: Option<std::fs::File>,
    /// A result line, reused.
    result_line: String,
    matches_finished: u64,
    results_failed: u64,
    scopes: Scopes,
    io: IoStats,
    drops: Drops,
    start: Instant,
    measure: Measure,
}

/// Errors that stop a worker before it runs.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The game socket could not be opened.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The results file could not be opened for appending.
    #[error("cannot open results file {path}: {source}")]
    Results {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

impl Worker {
    /// Opens the socket and creates the matches; nothing runs until [`Worker::run`].
    pub fn new(config: ServerConfig) -> Result<Self, WorkerError> {
        let socket = UdpSocket::bind(config.bind, SocketOptions::default()).map_err(|source| {
            WorkerError::Bind {
                addr: config.bind,
                source,
            }
        })?;
        let bound = socket.local_addr().map_err(|source| WorkerError::Bind {
            addr: config.bind,
            source,
        })?;
        let players = usize::from(config.players_per_match);
        let max_clients = (config.matches as usize * players).min(usize::from(u16::MAX)) as u16;
        let start = time::now();
        let defaults = WorldConfig::default();
        let world = WorldConfig {
            players: config.players_per_match,
            tick_hz: config.tick_hz,
            map: config.map,
            rules: config.rules,
            history: HistoryConfig {
                pose_every: config.pose_every,
                max_rewind: config.max_rewind,
                ..defaults.history
            },
            ..defaults
        };
        let mut matches = (0..config.matches)
            .map(|i| Match::new(MatchId(i + 1), world, start))
            .collect::<Vec<_>>();
        if let Some(dir) = &config.record_dir {
            std::fs::create_dir_all(dir).map_err(|source| WorkerError::Results {
                path: dir.display().to_string(),
                source,
            })?;
            matches.iter_mut().for_each(Match::record_actions);
        }
        let datagrams_per_wake = usize::from(max_clients) * 2 + 64;
        let results = match &config.results_file {
            None => None,
            Some(path) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|source| WorkerError::Results {
                        path: path.display().to_string(),
                        source,
                    })?,
            ),
        };
        Ok(Worker {
            results,
            result_line: String::with_capacity(4096),
            matches_finished: 0,
            results_failed: 0,
            transport: Transport::new(
                netcode::ServerConfig {
                    protocol_id: config.protocol_id,
                    private_key: config.private_key.0,
                    public_addresses: vec![config.public_addr.unwrap_or(bound)],
                    max_clients,
                    requests_per_second_per_ip: config.requests_per_second_per_ip,
                },
                start,
                entropy::unix_now(),
                entropy::random_bytes(),
            ),
            routes: vec![None; usize::from(max_clients)],
            recv: RecvBatch::with_capacity(RECV_BATCH),
            send: SendBatch::with_capacity(datagrams_per_wake, MAX_PACKET_BYTES),
            frame_buf: Vec::with_capacity(MAX_PACKET_BYTES),
            routed: vec![0; matches.len()],
            due: Vec::with_capacity(matches.len()),
            scopes: Scopes::new(time::now),
            io: IoStats::default(),
            drops: Drops::default(),
            matches,
            socket,
            config,
            start,
            measure: Measure::default(),
        })
    }

    /// The address the game socket is bound to.
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.socket
            .local_addr()
            .expect("a bound socket has an address")
    }

    /// Runs frames until `stop` is set, or until the measured window and `linger` after it
    /// have passed. Calls `status` about once a second. Returns the report of the measured
    /// window.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        linger: Option<Duration>,
        status: &mut dyn FnMut(&WorkerStatus),
    ) -> ServerReport {
        if let Some(core) = self.config.core {
            // Checked at config time; a failure here only costs precision.
            let _ = cpu::pin_current_thread(core);
        }
        time::tighten_timer_slack();
        let window_start = self.start + self.config.warmup;
        let window_end = self.config.duration.map(|d| window_start + d);
        let exit_at = window_end.zip(linger).map(|(end, l)| end + l);
        let budget_ns = budget_ms(self.config.tick_hz, TARGET_GAMES_PER_CORE) * 1e6;
        let mut next_status = self.start + Duration::from_secs(1);
        let mut ticks_run = 0u64;
        let stopped_at = loop {
            let deadline = self
                .matches
                .iter()
                .map(Match::next_deadline)
                .min()
                .unwrap_or(self.start);
            if stop.load(Ordering::Relaxed) || exit_at.is_some_and(|t| deadline >= t) {
                break time::now();
            }
            let woke = time::sleep_until(deadline, self.config.spin);
            let in_window = |t: Instant| t >= window_start && window_end.is_none_or(|e| t < e);
            if in_window(deadline) {
                if self.measure.cpu_start.is_none() {
                    self.measure.cpu_start = Some(cpu::process_cpu_time());
                }
                self.measure.wake_late.record_ns(nanos(woke - deadline));
            } else if window_end.is_some_and(|e| deadline >= e) && self.measure.cpu_end.is_none() {
                self.measure.cpu_end = Some(cpu::process_cpu_time());
            }

            // Receive, and share its cost among the matches by datagrams routed to each.
            self.receive(woke);
            let received = time::now();
            self.share_receive_cost(nanos(received - woke));

            // Run every match whose tick is due: one tick per match per wake-up, so a late
            // worker catches up tick by tick and never skips one.
            self.due.clear();
            for i in 0..self.matches.len() {
                let deadline = self.matches[i].next_deadline();
                let now = time::now();
                if deadline > now {
                    continue;
                }
                let m = &mut self.matches[i];
                let (record, queued) = m.run_tick(
                    now,
                    &self.scopes,
                    &mut self.transport,
                    &mut self.frame_buf,
                    &mut self.send,
                );
                self.due.push((i, record, queued, now - deadline, deadline));
                if let Some((result, actions)) = self.matches[i].finish_if_over() {
                    // The action file first: once the result line is on disk, everything
                    // about the match is.
                    if let (Some(dir), Some(bytes)) = (&self.config.record_dir, actions) {
                        let path = dir.join(format!(
                            "match-{}-{}.actions",
                            self.matches[i].id(),
                            self.matches_finished + 1
                        ));
                        if std::fs::write(&path, bytes).is_err() {
                            self.results_failed += 1;
                        }
                    }
                    self.persist(&result);
                }
            }
            ticks_run += self.due.len() as u64;
            let ticked = time::now();
            self.send.flush(&self.socket, &mut self.io);
            let sent = time::now();
            self.charge_send_and_record(nanos(sent - ticked), budget_ns, &in_window);
            if in_window(deadline) {
                self.measure.worker_frames.record_ns(nanos(sent - woke));
            }
            if sent >= next_status {
                next_status += Duration::from_secs(1);
                status(&WorkerStatus {
                    elapsed: sent - self.start,
                    connected: self.connected(),
                    ticks_run,
                    late: self.measure.ticks.late,
                });
            }
        };
        let end = stopped_at;
        if self.measure.cpu_end.is_none() {
            self.measure.cpu_end = Some(cpu::process_cpu_time());
        }
        let window_close = window_end.map_or(end, |e| e.min(end));
        self.report(window_start, window_close)
    }

    fn receive(&mut self, now: Instant) {
        let Worker {
            recv,
            socket,
            io,
            transport,
            matches,
            routes,
            routed,
            drops,
            ..
        } = self;
        routed.iter_mut().for_each(|r| *r = 0);
        loop {
            let n = recv.fill(socket, io);
            for i in 0..n {
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
                        Some(route) => routes[client.as_usize()] = Some(route),
                        None => {
                            drops.refused += 1;
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
        while let Some((client, _reason)) = transport.poll_disconnect() {
            unroute(routes, matches, client);
        }
        while let Some(to) = transport.poll_transmit(&mut self.frame_buf) {
            self.send.push(to, &self.frame_buf);
        }
    }

    /// Appends a finished match's result to the results file and waits until it is on disk
    /// (fsync), before the match that replaces it runs its first tick: a crash after the end
    /// loses nothing. Rare (once a match), so it is done in the frame.
    fn persist(&mut self, result: &tickforge_game::rules::MatchResult) {
        use std::io::Write;
        self.matches_finished += 1;
        let Some(file) = self.results.as_mut() else {
            return;
        };
        self.result_line.clear();
        result.encode(&mut self.result_line);
        if file
            .write_all(self.result_line.as_bytes())
            .and_then(|()| file.sync_data())
            .is_err()
        {
            self.results_failed += 1;
        }
    }

    fn share_receive_cost(&mut self, ns: u64) {
        let total: u64 = self.routed.iter().map(|&r| u64::from(r)).sum();
        let n = self.matches.len() as u64;
        for (m, &r) in self.matches.iter_mut().zip(&self.routed) {
            // The cost follows the datagrams routed to each match (control packets and
            // garbage ride along in proportion); with none routed it is shared evenly.
            m.pending_receive_ns += (ns * u64::from(r))
                .checked_div(total)
                .unwrap_or(ns / n.max(1));
        }
    }

    fn charge_send_and_record(
        &mut self,
        send_ns: u64,
        budget_ns: f64,
        in_window: &impl Fn(Instant) -> bool,
    ) {
        let queued: u64 = self.due.iter().map(|d| d.2 as u64).sum();
        let due = self.due.len() as u64;
        for &(mi, mut record, q, late, deadline) in &self.due {
            let share = (send_ns * q as u64)
                .checked_div(queued)
                .unwrap_or(send_ns / due.max(1));
            record.add(Category::Network, Phase::Send, share);
            let m = &self.matches[mi];
            if !in_window(deadline) {
                continue;
            }
            self.measure.frames.record(&record);
            let t = &mut self.measure.ticks;
            if late <= LATE_AFTER {
                t.on_time += 1;
            } else {
                t.late += 1;
            }
            if late > m.period() || record.total_ns as f64 > 2.0 * budget_ns {
                t.hitches += 1;
            }
        }
    }

    /// What replication sent, summed over the matches.
    fn replication_report(&self) -> tickforge_telemetry::report::Replication {
        let mut r = tickforge_telemetry::report::Replication::default();
        let (mut body, mut full, mut hits, mut misses) = (0u64, 0u64, 0u64, 0u64);
        for m in &self.matches {
            let s = m.replication_stats();
            r.snapshots += m.snapshots;
            body += m.body_bytes;
            full += m.full_state_bytes;
            hits += s.cache_hits;
            misses += s.cache_misses;
            r.max_staleness_ticks = r.max_staleness_ticks.max(s.worst_staleness_ticks);
            r.full_records += s.full_records;
            r.delta_records += s.delta_records;
            r.deferred += s.deferred;
        }
        let per = |bytes: u64| (r.snapshots > 0).then(|| bytes as f64 / r.snapshots as f64);
        r.body_bytes_per_snapshot = per(body);
        r.full_state_bytes_per_snapshot = per(full);
        r.body_to_full_state = (full > 0).then(|| body as f64 / full as f64);
        r.cache_hit_rate = (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64);
        r
    }

    fn report(&self, window_start: Instant, window_close: Instant) -> ServerReport {
        let mut ticks = self.measure.ticks;
        // Expected: every tick whose deadline lies in the window, for every match.
        let period_ns = 1e9 / f64::from(self.config.tick_hz);
        let ticks_before = |t: Instant| {
            (nanos(t.saturating_duration_since(self.start)) as f64 / period_ns).ceil() as u64
        };
        let per_match = ticks_before(window_close).saturating_sub(ticks_before(window_start));
        ticks.expected = per_match * self.matches.len() as u64;
        ticks.skipped = ticks.expected.saturating_sub(ticks.on_time + ticks.late);
        let window_s = window_close
            .saturating_duration_since(window_start)
            .as_secs_f64();
        let cpu_util = match (self.measure.cpu_start, self.measure.cpu_end) {
            (Some(a), Some(b)) if window_s > 0.0 => Some((b - a).as_secs_f64() / window_s),
            _ => None,
        };
        let frames = self.measure.frames.frames();
        let mut dropped = std::collections::BTreeMap::new();
        for (name, n) in self.transport.stats().dropped_all() {
            dropped.insert(name.to_string(), n);
        }
        dropped.insert("refused".into(), self.drops.refused);
        dropped.insert("misbehaved".into(), self.drops.misbehaved);
        dropped.insert("flooding".into(), self.drops.flooding);
        dropped.insert(
            "far_inputs".into(),
            self.matches.iter().map(|m| m.far_inputs).sum(),
        );
        dropped.insert("oversize".into(), self.drops.oversize);
        dropped.insert("bad_message".into(), self.drops.bad_message);
        dropped.insert("bad_cmd".into(), self.drops.bad_cmd);
        ServerReport {
            tick_hz: self.config.tick_hz,
            map: self.config.map.name().to_string(),
            matches: self.config.matches,
            players_per_match: u32::from(self.config.players_per_match),
            duration_s: window_s,
            warmup_s: self.config.warmup.as_secs_f64(),
            match_frame_ms: frames.percentiles(),
            worker_frame_ms: self.measure.worker_frames.percentiles(),
            categories_ms: self.measure.frames.category_means_ms(),
            phases_ms: self.measure.frames.phase_means_ms(),
            ticks,
            wake_late_ms: self.measure.wake_late.percentiles(),
            matches_finished: self.matches_finished,
            shots_fired: self.matches.iter().map(|m| m.shots_fired).sum(),
            shots_rewind_clamped: self.matches.iter().map(|m| m.shots_clamped).sum(),
            max_rewind_ms: self.config.max_rewind.as_secs_f64() * 1e3,
            replication: self.replication_report(),
            results_failed: self.results_failed,
            projected_games_per_core: frames
                .mean_ms()
                .and_then(|m| projected_games_per_core(self.config.tick_hz, m)),
            cpu_util,
            datagrams: Datagrams {
                received: self.io.received,
                sent: self.io.sent,
                send_errors: self.io.send_errors,
                bytes_in: self.io.bytes_in,
                bytes_out: self.io.bytes_out,
                recv_calls: self.io.recv_calls,
                send_calls: self.io.send_calls,
                per_recv_call: (self.io.recv_calls > 0).then(|| self.io.datagrams_per_recv_call()),
                per_send_call: (self.io.send_calls > 0).then(|| self.io.datagrams_per_send_call()),
                dropped,
            },
        }
    }

    /// Connected players over all matches.
    pub fn connected(&self) -> usize {
        self.matches.iter().map(Match::connected).sum()
    }
}

/// Seats a new connection: in the match and slot its token names, or, for a token from
/// another backend, in the first match with a free slot. `None`: refused.
fn place(
    now: Instant,
    matches: &mut [Match],
    user_data: &Option<UserData>,
    client: ClientIndex,
) -> Option<(usize, PlayerSlot)> {
    match user_data {
        Some(ud) => {
            let mi = matches.iter().position(|m| m.id() == ud.match_id)?;
            let preferred = (ud.slot != ANY).then_some(PlayerSlot(ud.slot));
            matches[mi]
                .seat(now, client, preferred)
                .map(|slot| (mi, slot))
        }
        None => matches
            .iter_mut()
            .enumerate()
            .find_map(|(mi, m)| m.seat(now, client, None).map(|slot| (mi, slot))),
    }
}

/// Queues a sealed payload, after the keep-alive that must precede it to an unconfirmed
/// client.
pub(crate) fn push_transmit(send: &mut SendBatch, tx: netcode::Transmit, bytes: &[u8]) {
    if tx.keepalive_bytes > 0 {
        send.push(tx.to, &bytes[..tx.keepalive_bytes]);
    }
    send.push(tx.to, &bytes[tx.keepalive_bytes..]);
}

fn unroute(routes: &mut [Option<(usize, PlayerSlot)>], matches: &mut [Match], client: ClientIndex) {
    if let Some((mi, slot)) = routes[client.as_usize()].take() {
        matches[mi].unseat(slot);
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_matches(now: Instant) -> Vec<Match> {
        let world = WorldConfig {
            players: 2,
            ..WorldConfig::default()
        };
        vec![
            Match::new(MatchId(1), world, now),
            Match::new(MatchId(2), world, now),
        ]
    }

    fn ours(match_id: u32, slot: u8) -> Option<UserData> {
        Some(UserData {
            match_id: MatchId(match_id),
            team: ANY,
            slot,
        })
    }

    #[test]
    fn a_token_naming_a_match_and_slot_gets_them() {
        let now = Instant::now();
        let mut m = two_matches(now);
        assert_eq!(
            place(now, &mut m, &ours(2, 1), ClientIndex(0)),
            Some((1, PlayerSlot(1)))
        );
        // The slot is taken: the next free one in the same match.
        assert_eq!(
            place(now, &mut m, &ours(2, 1), ClientIndex(1)),
            Some((1, PlayerSlot(0)))
        );
        // The match is full: refused, not moved to another match.
        assert_eq!(place(now, &mut m, &ours(2, ANY), ClientIndex(2)), None);
    }

    #[test]
    fn a_token_naming_no_such_match_is_refused() {
        let now = Instant::now();
        let mut m = two_matches(now);
        assert_eq!(place(now, &mut m, &ours(9, ANY), ClientIndex(0)), None);
        assert_eq!(m.iter().map(Match::connected).sum::<usize>(), 0);
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
                Some((0, PlayerSlot(0))),
                Some((0, PlayerSlot(1))),
                Some((1, PlayerSlot(0))),
                Some((1, PlayerSlot(1)))
            ]
        );
        assert_eq!(
            place(now, &mut m, &None, ClientIndex(4)),
            None,
            "every match full"
        );
    }
}
