//! The only things the admin and Agones threads and a worker share: a command channel, a
//! status slot and a heartbeat. The worker never waits on any of them: it takes commands
//! with `try_recv`, publishes its status with `try_lock` (skipping a publish when a reader
//! happens to hold it), and beats with one relaxed atomic add per wake-up.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};

use serde::Serialize;
use tickforge_proto::MatchId;
use tickforge_telemetry::prometheus::MetricsSnapshot;
use tickforge_telemetry::rounds::{Budgets, MatchHistory, RoundSummary};
use tokio::sync::oneshot;

use super::MatchSpec;

/// What the admin thread asks of a worker.
#[derive(Debug)]
pub enum AdminCommand {
    /// Create a match; answer with [`CreateMatch::answer`].
    CreateMatch(CreateMatch),
}

/// A request to create match `match_id` from `spec`. The admin thread chose the id (unique
/// in the process) and mints the players' tokens once the worker has accepted.
#[derive(Debug)]
pub struct CreateMatch {
    /// The id the new match must have; its tokens will name it.
    pub match_id: MatchId,
    /// What the matchmaker asked for.
    pub spec: MatchSpec,
    /// Sending on a oneshot never blocks; the admin thread awaits it without blocking
    /// other requests.
    pub(super) reply: oneshot::Sender<Result<(), CreateError>>,
}

impl CreateMatch {
    /// Answers the request without blocking: `Ok(())` once the match exists and accepts
    /// connections, or why not. Returns `false` when the admin thread stopped waiting (it
    /// timed out, so the matchmaker got a 503 and no tokens): the worker should remove the
    /// match it just created.
    pub fn answer(self, result: Result<(), CreateError>) -> bool {
        // Fails only when the receiving end is gone.
        self.reply.send(result).is_ok()
    }
}

/// Why a worker refused a match; the text is sent back to the matchmaker.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CreateError {
    /// The worker holds as many matches as it can run on time (HTTP 503).
    #[error("no room for another match: {reason}")]
    Full {
        /// What ran out, for the operator (`"60 of 60 matches"`).
        reason: String,
    },
    /// The worker is draining and takes no new matches (HTTP 503).
    #[error("draining: no new matches")]
    Draining,
    /// The worker cannot host this spec, for example another tick rate (HTTP 422).
    #[error("cannot host this match: {reason}")]
    Unsupported {
        /// What the worker cannot do.
        reason: String,
    },
}

/// Where a match is in its life, as `/matches` shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchState {
    /// Created; waiting for its players.
    #[default]
    Waiting,
    /// Being played.
    Running,
    /// Over; its results are written and it is about to be removed.
    Finished,
}

/// One match as a worker last published it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchStatus {
    /// The match.
    pub id: MatchId,
    /// Players connected now.
    pub players_connected: u32,
    /// The match's current tick.
    pub tick: u32,
    /// Where the match is in its life.
    pub state: MatchState,
    /// Ticks run since the match was created.
    pub ticks: u64,
    /// Of them, ticks that started more than 1 ms after their deadline.
    pub late_ticks: u64,
    /// Of them, hitches: more than one tick late, or a frame over twice its budget.
    pub hitches: u64,
    /// What its frames cost since it started (or started over): whole, by round, and the
    /// round being played.
    pub cost: MatchCost,
}

/// A match's frame history as a worker publishes it ([`MatchHistory`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatchCost {
    /// Every frame since the match (re)started.
    pub whole: RoundSummary,
    /// The finished rounds kept, oldest first.
    pub rounds: Vec<RoundSummary>,
    /// Finished rounds dropped from the front of `rounds` to keep it bounded.
    pub rounds_dropped: u32,
    /// The round being played, so far; `None` for a game without rounds.
    pub current: Option<RoundSummary>,
    /// The budgets its violations count against.
    pub budgets: Budgets,
}

impl MatchCost {
    /// Copies `history` in, reusing this value's memory.
    pub fn fill(&mut self, history: &MatchHistory) {
        self.whole = history.whole();
        self.rounds.clear();
        self.rounds.extend(history.rounds().copied());
        self.rounds_dropped = history.dropped();
        self.current = history.current();
        self.budgets = *history.budgets();
    }
}

/// What a worker publishes about once a second: its matches and its metrics.
#[derive(Clone, Debug, Default)]
pub struct WorkerStatus {
    /// Every match the worker hosts.
    pub matches: Vec<MatchStatus>,
    /// The worker's running totals (see [`MetricsSnapshot`]).
    pub metrics: MetricsSnapshot,
    /// More matches the worker would admit now, by its measured frame cost and
    /// `max_matches_per_worker` ([`crate::remaining_capacity`]).
    pub remaining: u32,
}

/// The admin thread's end of one worker's link. Hand it to [`super::AdminServer::start`]
/// (or to a [`super::MatchCreator`]).
#[derive(Debug)]
pub struct AdminHandle {
    pub(super) commands: Sender<AdminCommand>,
    pub(super) status: Arc<Mutex<WorkerStatus>>,
    heartbeat: Arc<AtomicU64>,
    /// Where players reach this worker's matches as configured; the tokens name it unless
    /// Agones says otherwise ([`super::MatchCreator::set_public_addr`]).
    pub(super) public_addr: SocketAddr,
}

/// A worker's end of its link to the admin thread. Lives with the worker thread.
#[derive(Debug)]
pub struct WorkerLink {
    pub(super) commands: Receiver<AdminCommand>,
    status: Arc<Mutex<WorkerStatus>>,
    heartbeat: Arc<AtomicU64>,
}

/// Makes the link between the admin thread and one worker whose matches players reach at
/// `public_addr` (the worker's own port, or the shared one when workers share a port).
pub fn worker_link(public_addr: SocketAddr) -> (AdminHandle, WorkerLink) {
    let (tx, rx) = mpsc::channel();
    let status = Arc::new(Mutex::new(WorkerStatus::default()));
    let heartbeat = Arc::new(AtomicU64::new(0));
    (
        AdminHandle {
            commands: tx,
            status: Arc::clone(&status),
            heartbeat: Arc::clone(&heartbeat),
            public_addr,
        },
        WorkerLink {
            commands: rx,
            status,
            heartbeat,
        },
    )
}

impl WorkerLink {
    /// Says the worker's loop is alive: call once per wake-up. One relaxed atomic add; a
    /// worker stuck inside a frame stops beating, and Agones' health pings stop with it.
    pub fn beat(&self) {
        self.heartbeat.fetch_add(1, Ordering::Relaxed);
    }

    /// The next command, if one is waiting; never blocks. Call once per wake-up, outside
    /// any match's frame, until it returns `None`.
    pub fn poll_command(&self) -> Option<AdminCommand> {
        // Empty, or the admin thread has stopped: either way there is nothing to do.
        self.commands.try_recv().ok()
    }

    /// Lets `fill` update the published status in place, unless the admin thread is reading
    /// it right now: then nothing happens and this returns `false` (publish again next
    /// second). Call about once a second, off the tick.
    ///
    /// `fill` sees last second's status, so `matches.clear()` and pushing again reuses
    /// the vector's memory: after the first publishes this does not allocate.
    pub fn publish(&self, fill: impl FnOnce(&mut WorkerStatus)) -> bool {
        let mut status = match self.status.try_lock() {
            Ok(guard) => guard,
            // The admin thread panicked while reading; the data is still whole.
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        fill(&mut status);
        true
    }
}

impl AdminHandle {
    /// Copies what the worker last published (admin and Agones threads only).
    pub(crate) fn with_status<T>(&self, read: impl FnOnce(&WorkerStatus) -> T) -> T {
        let status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        read(&status)
    }

    /// The worker's wake-ups so far: it advances while the worker's loop runs.
    pub fn heartbeat(&self) -> u64 {
        self.heartbeat.load(Ordering::Relaxed)
    }

    /// True once the worker's end of the link is gone: the worker has stopped (it is not
    /// stuck, and its heartbeat will not advance again).
    pub fn is_finished(&self) -> bool {
        Arc::strong_count(&self.heartbeat) == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_never_waits_for_the_lock() {
        let (admin, link) = worker_link("127.0.0.1:1".parse().unwrap());
        assert!(link.publish(|s| s.metrics.ticks = 1));
        let held = admin.status.lock().unwrap();
        assert!(!link.publish(|s| s.metrics.ticks = 2));
        drop(held);
        assert!(link.publish(|s| s.metrics.ticks = 3));
        assert_eq!(admin.with_status(|s| s.metrics.ticks), 3);
    }

    #[test]
    fn commands_are_polled_and_answers_never_block() {
        let (admin, link) = worker_link("127.0.0.1:1".parse().unwrap());
        assert!(link.poll_command().is_none());
        let (reply, mut answers) = oneshot::channel();
        admin
            .commands
            .send(AdminCommand::CreateMatch(CreateMatch {
                match_id: MatchId(3),
                spec: MatchSpec::walk_default(),
                reply,
            }))
            .unwrap();
        let Some(AdminCommand::CreateMatch(req)) = link.poll_command() else {
            panic!("a command was sent");
        };
        assert_eq!(req.match_id, MatchId(3));
        assert!(req.answer(Ok(())));
        assert_eq!(answers.try_recv(), Ok(Ok(())));

        // The admin gave up waiting: the worker learns it from the answer.
        let (reply, answers) = oneshot::channel();
        drop(answers);
        let req = CreateMatch {
            match_id: MatchId(4),
            spec: MatchSpec::walk_default(),
            reply,
        };
        assert!(!req.answer(Err(CreateError::Draining)));
        drop(admin);
        assert!(link.poll_command().is_none());
    }
}
