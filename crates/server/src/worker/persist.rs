//! Results off the frame: a finished match's action file and result line are written and
//! fsynced by the worker's persister thread, never inside a tick, and retried until the
//! disk takes them.
//!
//! ```text
//! worker, in its frame                          persister thread
//! a match ends → its job joins the backlog
//! after the send batch: backlog → channel       take every waiting job;
//!   (try_send: never blocks; a full channel       write the action files (create-new),
//!   leaves the job in the backlog for the         fsync each; append every kept result
//!   next wake-up)                                 line, one fsync; done = the last job's
//!                                                 ticket, written or kept to retry
//! the replacement match waits for done ≥ its ticket before its first tick (at most
//!   RESULT_HOLD, 1 s)
//! at the end of `Worker::run`: hand over the rest (bounded), close the channel, wait for
//!   the thread to end (bounded), join it or leave it behind
//! ```
//!
//! The promise: a match's result is durable before the match that replaces it runs its
//! first tick, unless the disk refuses it or does not answer within `RESULT_HOLD` (1 s, in
//! `worker/mod.rs`); everything about the match (its action file) is written before its
//! result line. The replacement's first tick is due a period after the last, which covers
//! a usual fsync; a slower disk holds that one match back while the others tick on, and a
//! disk that hangs (a hard NFS mount, a dead device) holds it back for `RESULT_HOLD`, after
//! which it ticks and the result stays counted pending (`/healthz` degraded).
//!
//! When the disk refuses (full, failing): a failed write or fsync is counted
//! (`results_failed`: attempts), the lines are kept in memory (`results_pending` until
//! durable, so `/healthz` reports degraded) and retried with a doubling backoff from
//! [`RETRY_FIRST`] to [`RETRY_MAX`], and the match they held back is released: the server
//! plays on while the disk is full. One message on stderr when a failure episode starts and
//! one when it ends, never one per retry. What a failed attempt left in the results file is
//! cut off under the file's lock before the next append ([`super::results`]), so a retried
//! line is never glued onto a partial one. An action file that fails is removed, kept and retried beside the lines
//! (at most [`KEPT_ACTION_FILES`]); a result line never waits for it.
//!
//! Action files are named `match-<id>-<run>-<n>.actions` (match id, the process's run id,
//! the worker's count of finished matches) and opened create-new (a `-k` suffix if the
//! name exists), so a restart with the same record dir never overwrites a file.
//!
//! A stopping worker hands over everything, then its persister retries for at most
//! [`FINISH_RETRY`]; whatever is still unwritten is printed to stderr and counted
//! (`results_unwritten` in the report; `tickforge serve` then exits 1). Stopping never
//! blocks without bound, even on a disk whose write or fsync never returns: the hand-over
//! waits for room in the channel at most [`FINISH_RETRY`], then the worker waits for the
//! thread's end at most [`FINISH_RETRY`] + [`FINISH_MARGIN`]; a thread still stuck is left
//! behind (detached), and everything it held counts unwritten (its lines cannot be printed:
//! the stuck thread holds them).
//!
//! One persister per worker: the worker's persister lives exactly as long as its `run`,
//! so the host has no part in starting, flushing or joining it; the workers share only the
//! results file's log. A match ends once in minutes, so an fsync per worker instead of one
//! batched per host costs nothing that shows. The thread is started from the worker's
//! thread and so inherits its core and scheduling class: when the worker runs real-time,
//! the persister only runs while the worker sleeps; its CPU per match is a few writes and
//! starting the fsyncs, whose waits take no CPU.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tickforge_api::sim::result_line::{self, ResultOrigin};
use tickforge_api::MatchEnd;

use super::results::ResultsLog;
use super::Worker;
#[cfg(test)]
use crate::RunId;

/// Jobs handed to the persister and not yet taken: a match ends once in minutes, so this
/// only fills while the disk stalls.
const IN_FLIGHT_JOBS: usize = 16;
/// Jobs kept on the worker while the channel is full; past this a finished match's job is
/// dropped and counted failed (a stalled disk must not grow the worker without bound).
const BACKLOG_JOBS: usize = 64;
/// Room reserved for a result line: about 130 bytes and 30 a player, so ten fit.
const LINE_BYTES: usize = 512;
/// Bytes reserved for a result line's `cost` token: the whole match and a dozen rounds
/// (a round takes about 90 bytes; more grow the string, once a match, off the tick).
const COST_BYTES: usize = 1280;
/// Result lines the persister keeps in memory while the disk refuses them: days of
/// matches. Past this a line is dropped and counted unwritten.
const KEPT_LINES: u64 = 4096;
/// Action files kept in memory to retry (each up to a few MB); past this one is dropped.
pub(super) const KEPT_ACTION_FILES: usize = 16;
/// The first wait before retrying a failed write; it doubles up to [`RETRY_MAX`].
pub(super) const RETRY_FIRST: Duration = Duration::from_millis(10);
/// The longest wait between retries.
pub(super) const RETRY_MAX: Duration = Duration::from_secs(1);
/// How long a stopping worker's persister keeps retrying what the disk refused.
pub(super) const FINISH_RETRY: Duration = Duration::from_secs(5);
/// How much longer than its retries a stopping worker waits for its persister thread to
/// end before it leaves it behind (a write or fsync that never returns).
pub(super) const FINISH_MARGIN: Duration = Duration::from_secs(1);
/// How often a stopping worker looks again for room in the full channel.
const HAND_OVER_POLL: Duration = Duration::from_millis(1);

/// What one finished match leaves to write.
#[derive(Debug)]
struct Job {
    ticket: u64,
    /// The action file's path and bytes, when matches are recorded.
    actions: Option<(PathBuf, Vec<u8>)>,
    /// The result line, newline included, when there is a results file.
    line: Option<String>,
}

/// What the persister thread tells the worker, without a lock.
#[derive(Debug, Default)]
struct Progress {
    /// The ticket of the last job whose first attempt is over: written, or kept in memory
    /// to retry (jobs are taken in ticket order).
    done: AtomicU64,
    /// Result lines written and synced.
    written: AtomicU64,
    /// Write or fsync attempts that failed (a batch of lines, or an action file).
    failed: AtomicU64,
    /// Result lines that will never be written: over [`KEPT_LINES`], or still refused when
    /// the worker stopped and [`FINISH_RETRY`] ran out.
    lost: AtomicU64,
    /// Failure episodes: the disk refused after having taken everything.
    episodes: AtomicU64,
    /// The thread is gone (it panicked): nothing more will be written.
    dead: AtomicBool,
}

/// The persister thread while it runs.
struct Running {
    jobs: SyncSender<Job>,
    thread: JoinHandle<()>,
    /// Disconnected when the thread ends, however it ends (its sender is dropped).
    ended: Receiver<()>,
}

/// The worker's side of its persister.
pub(super) struct Persister {
    /// The worker's index, for the thread's name and messages.
    index: usize,
    /// Where the thread may run (see [`super::WorkerSetup::helper_cores`]).
    cores: Vec<usize>,
    /// The results file, shared with the other workers' persisters.
    results: Option<ResultsLog>,
    /// How long [`Persister::finish`] lets the thread retry.
    pub(super) finish_retry: Duration,
    running: Option<Running>,
    /// Jobs not yet handed over, oldest first; reserved up front.
    backlog: VecDeque<Job>,
    /// The last ticket given out.
    ticket: u64,
    /// Result lines submitted.
    lines: u64,
    /// Result lines dropped on the worker (the backlog was full, no thread took them, or
    /// a thread left behind on a hung disk held them).
    dropped_lines: u64,
    /// Lines and action files dropped on the worker: each counts as a failed attempt.
    dropped: u64,
    progress: Arc<Progress>,
}

impl Persister {
    /// Worker `index`'s persister, appending result lines to `results` (when given); its
    /// thread starts with [`Persister::start`] and runs on `cores` (empty: where it starts).
    pub(super) fn new(index: usize, results: Option<ResultsLog>, cores: Vec<usize>) -> Persister {
        Persister {
            index,
            cores,
            results,
            finish_retry: FINISH_RETRY,
            running: None,
            backlog: VecDeque::with_capacity(BACKLOG_JOBS),
            ticket: 0,
            lines: 0,
            dropped_lines: 0,
            dropped: 0,
            progress: Arc::default(),
        }
    }

    /// Starts the thread, if it is not running. Between frames: it spawns a thread.
    pub(super) fn start(&mut self) {
        if self.running.is_some() {
            return;
        }
        let (jobs, rx) = mpsc::sync_channel(IN_FLIGHT_JOBS);
        let mut thread = PersistThread {
            index: self.index,
            results: self.results.clone(),
            progress: Arc::clone(&self.progress),
            finish_retry: self.finish_retry,
            lines: String::new(),
            line_count: 0,
            actions: Vec::new(),
            failing: None,
        };
        let cores = self.cores.clone();
        let (ending, ended) = mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name(format!("tickforge-persist-{}", self.index))
            .spawn(move || {
                let _ending = ending;
                // Spawned by a pinned, maybe real-time worker: off its core and class, so
                // the disk's waits and the writes' CPU never come out of the worker's time.
                if !cores.is_empty() {
                    let _ = tickforge_io::cpu::release_current_thread(&cores);
                }
                thread.run(rx);
            });
        match spawned {
            Ok(thread) => {
                self.progress.dead.store(false, Ordering::Release);
                self.running = Some(Running {
                    jobs,
                    thread,
                    ended,
                });
            }
            // Without a thread every job fails, and is counted: the matches play on.
            Err(_) => self.progress.dead.store(true, Ordering::Release),
        }
    }

    /// Queues a finished match's job and returns its ticket; `None` when the backlog is
    /// full and the job was dropped (counted failed). Never blocks; allocates nothing.
    pub(super) fn submit(
        &mut self,
        actions: Option<(PathBuf, Vec<u8>)>,
        line: Option<String>,
    ) -> Option<u64> {
        self.lines += u64::from(line.is_some());
        if self.backlog.len() == BACKLOG_JOBS {
            self.dropped += u64::from(line.is_some()) + u64::from(actions.is_some());
            self.dropped_lines += u64::from(line.is_some());
            return None;
        }
        self.ticket += 1;
        self.backlog.push_back(Job {
            ticket: self.ticket,
            actions,
            line,
        });
        Some(self.ticket)
    }

    /// Hands the backlog to the thread, oldest first, while the channel has room. Call once
    /// per wake-up, after the send batch: waking the persister then delays no datagram.
    pub(super) fn hand_over(&mut self) {
        let Some(running) = &self.running else { return };
        while let Some(job) = self.backlog.pop_front() {
            match running.jobs.try_send(job) {
                Ok(()) => {}
                // Kept, in order, for the next wake-up.
                Err(TrySendError::Full(job)) => {
                    self.backlog.push_front(job);
                    return;
                }
                Err(TrySendError::Disconnected(job)) => {
                    self.backlog.push_front(job);
                    self.progress.dead.store(true, Ordering::Release);
                    return;
                }
            }
        }
    }

    /// Whether the job with `ticket` had its first attempt (written, or kept to retry; or
    /// it can no longer be written): the match it held back may tick.
    pub(super) fn is_done(&self, ticket: u64) -> bool {
        self.progress.done.load(Ordering::Acquire) >= ticket
            || self.progress.dead.load(Ordering::Acquire)
    }

    /// Write or fsync attempts that failed so far, lines and action files, with each one
    /// dropped on the worker counted as one.
    pub(super) fn failed(&self) -> u64 {
        self.progress.failed.load(Ordering::Acquire) + self.dropped
    }

    /// Result lines written and synced so far.
    pub(super) fn written(&self) -> u64 {
        self.progress.written.load(Ordering::Acquire)
    }

    /// Result lines that will never be written.
    pub(super) fn lost(&self) -> u64 {
        self.progress.lost.load(Ordering::Acquire) + self.dropped_lines
    }

    /// Result lines submitted and not yet durable nor lost: waiting for the disk, or kept
    /// in memory after a failed write.
    pub(super) fn pending(&self) -> u64 {
        let settled = self.written() + self.lost();
        self.lines.saturating_sub(settled)
    }

    /// Result lines not on disk: lost, and (before [`Persister::finish`]) pending.
    pub(super) fn unwritten(&self) -> u64 {
        self.lost() + self.pending()
    }

    /// Hands over every job, waiting for room, then stops the thread once it has written
    /// them all or retried for [`Persister::finish_retry`]. Off the frame, and bounded
    /// even on a disk that hangs instead of failing: the hand-over waits for room at most
    /// `finish_retry`, and the thread's end at most `finish_retry` + [`FINISH_MARGIN`]
    /// more; a thread still stuck then is left behind (detached), and what it held counts
    /// as lost. Jobs that no thread will write (it panicked, could not start, or was left
    /// behind) are counted failed and lost.
    pub(super) fn finish(&mut self) {
        if !self.backlog.is_empty() {
            self.start();
        }
        if let Some(Running {
            jobs,
            thread,
            ended,
        }) = self.running.take()
        {
            let hand_over_by = Instant::now() + self.finish_retry;
            while let Some(job) = self.backlog.pop_front() {
                match jobs.try_send(job) {
                    Ok(()) => {}
                    Err(TrySendError::Full(job)) => {
                        self.backlog.push_front(job);
                        if Instant::now() >= hand_over_by {
                            break;
                        }
                        // The thread takes jobs as the disk lets it: look again shortly.
                        std::thread::sleep(HAND_OVER_POLL);
                    }
                    // The thread is gone; its jobs are counted below.
                    Err(TrySendError::Disconnected(job)) => {
                        self.backlog.push_front(job);
                        break;
                    }
                }
            }
            drop(jobs);
            self.stop_thread(thread, &ended);
        }
        // What no thread took, or a dead thread held, will not be written.
        let left: Vec<Job> = self.backlog.drain(..).collect();
        for job in &left {
            self.dropped += u64::from(job.line.is_some()) + u64::from(job.actions.is_some());
            self.dropped_lines += u64::from(job.line.is_some());
        }
        if self.progress.dead.load(Ordering::Acquire) {
            let pending = self.pending();
            self.dropped_lines += pending;
            self.dropped += pending;
        }
        self.progress.done.store(self.ticket, Ordering::Release);
    }

    /// Waits for the thread, its channel closed, to end: at most `finish_retry` +
    /// [`FINISH_MARGIN`]. A thread stuck past that (in a write or fsync that does not
    /// return) is left behind: its progress is no longer read, a copy stands for it, and
    /// the worker counts it dead.
    fn stop_thread(&mut self, thread: JoinHandle<()>, ended: &Receiver<()>) {
        match ended.recv_timeout(self.finish_retry + FINISH_MARGIN) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                if thread.join().is_err() {
                    self.progress.dead.store(true, Ordering::Release);
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                eprintln!(
                    "tickforge: worker {}: the results disk has not answered for {:.1} s; \
                     leaving its writer behind, {} result line(s) unwritten",
                    self.index,
                    (self.finish_retry + FINISH_MARGIN).as_secs_f64(),
                    self.pending()
                );
                // What the stuck thread does from now on is not counted: were its write
                // to return after all, the lines are on disk and also counted lost.
                let stuck = &self.progress;
                let copy = Progress {
                    done: AtomicU64::new(stuck.done.load(Ordering::Acquire)),
                    written: AtomicU64::new(stuck.written.load(Ordering::Acquire)),
                    failed: AtomicU64::new(stuck.failed.load(Ordering::Acquire)),
                    lost: AtomicU64::new(stuck.lost.load(Ordering::Acquire)),
                    episodes: AtomicU64::new(stuck.episodes.load(Ordering::Acquire)),
                    dead: AtomicBool::new(true),
                };
                self.progress = Arc::new(copy);
                drop(thread);
            }
        }
    }
}

impl Drop for Persister {
    /// A worker that stops without [`Persister::finish`] (it panicked) still writes what it
    /// handed over, within the finish bound.
    fn drop(&mut self) {
        if let Some(Running {
            jobs,
            thread,
            ended,
        }) = self.running.take()
        {
            drop(jobs);
            self.stop_thread(thread, &ended);
        }
    }
}

impl Worker {
    /// Queues a finished match's action file and result line for the persister, and
    /// returns the ticket its replacement waits for; `None`: nothing to wait for. Allocates
    /// the line and the file name, and shrinks the action file's buffer to its length,
    /// once a match (off the tick); never blocks.
    pub(super) fn persist(&mut self, i: usize, end: MatchEnd) -> Option<u64> {
        let MatchEnd {
            result,
            recording: actions,
        } = end;
        self.retired.matches_finished += 1;
        let persister = self.persister.as_mut()?;
        let id = self.matches[i].id();
        let actions = match (&self.config.record_dir, actions) {
            (Some(dir), Some(mut bytes)) => {
                // The recording reserved a megabyte or more; a job waiting on a stalled
                // disk keeps only what it holds (the backlog and the channel hold up to
                // 80 jobs).
                bytes.shrink_to_fit();
                let name = format!(
                    "match-{id}-{}-{}.actions",
                    self.run_id, self.retired.matches_finished
                );
                Some((dir.join(name), bytes))
            }
            _ => None,
        };
        let game = self.matches[i].game_name();
        if self.config.results_file.is_some() && !result_line::is_body(&result) {
            // The game's tokens would not read back (a newline, a stray space): the line
            // is not written, and the count says so; the worker goes on.
            eprintln!(
                "tickforge: game `{game}`: match {id}'s result is not `key=value` tokens \
                 separated by single spaces; not written: {result:?}"
            );
            self.retired.results_failed += 1;
            self.retired.results_unwritten += 1;
        }
        let line =
            (self.config.results_file.is_some() && result_line::is_body(&result)).then(|| {
                let origin = ResultOrigin {
                    match_id: id.0,
                    run_id: self.run_id.0,
                    ended_at_unix_s: tickforge_io::entropy::unix_now(),
                };
                // What the match's frames cost, whole and by round, before the game's body.
                let mut cost = String::with_capacity(COST_BYTES);
                self.hosted[i].history.write_cost(&mut cost);
                let mut line =
                    String::with_capacity(LINE_BYTES.max(result.len() + cost.len() + 128));
                result_line::encode_with_cost(game, &origin, &cost, &result, &mut line);
                line
            });
        if actions.is_none() && line.is_none() {
            return None;
        }
        persister.submit(actions, line)
    }
}

/// A failure episode: since when the disk refuses, and how often it did.
struct Failing {
    since: Instant,
    attempts: u64,
    /// When to try again, and the wait after that.
    retry_at: Instant,
    backoff: Duration,
}

/// The persister thread's state.
struct PersistThread {
    index: usize,
    results: Option<ResultsLog>,
    progress: Arc<Progress>,
    finish_retry: Duration,
    /// Result lines not yet durable, in order, back to back.
    lines: String,
    line_count: u64,
    /// Action files not yet durable.
    actions: Vec<(PathBuf, Vec<u8>)>,
    failing: Option<Failing>,
}

impl PersistThread {
    /// Takes jobs until the worker closes the channel, writing them and retrying what
    /// the disk refused; then retries what is left for at most `finish_retry`.
    fn run(&mut self, rx: Receiver<Job>) {
        loop {
            let job = match &self.failing {
                None => match rx.recv() {
                    Ok(job) => Some(job),
                    Err(_) => break,
                },
                Some(f) => {
                    match rx.recv_timeout(f.retry_at.saturating_duration_since(Instant::now())) {
                        Ok(job) => Some(job),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
            };
            let Some(job) = job else {
                self.attempt();
                continue;
            };
            let mut last = self.keep(job);
            for job in rx.try_iter().take(IN_FLIGHT_JOBS) {
                last = self.keep(job);
            }
            // During an episode, new jobs wait in memory for the next retry.
            if self
                .failing
                .as_ref()
                .is_none_or(|f| Instant::now() >= f.retry_at)
            {
                self.attempt();
            }
            self.progress.done.store(last, Ordering::Release);
        }
        // The worker stopped: what the disk still refuses gets a bounded time more.
        let give_up = Instant::now() + self.finish_retry;
        while let Some(f) = &self.failing {
            let now = Instant::now();
            if now >= give_up {
                self.give_up();
                return;
            }
            std::thread::sleep(f.retry_at.min(give_up).saturating_duration_since(now));
            self.attempt();
        }
    }

    /// Keeps a job's files and line to write; returns its ticket.
    fn keep(&mut self, job: Job) -> u64 {
        if let Some(actions) = job.actions {
            if self.actions.len() < KEPT_ACTION_FILES {
                self.actions.push(actions);
            } else {
                self.progress.failed.fetch_add(1, Ordering::AcqRel);
            }
        }
        if let Some(line) = job.line {
            if self.line_count < KEPT_LINES && self.results.is_some() {
                self.lines.push_str(&line);
                self.line_count += 1;
            } else {
                self.progress.failed.fetch_add(1, Ordering::AcqRel);
                self.progress.lost.fetch_add(1, Ordering::AcqRel);
            }
        }
        job.ticket
    }

    /// One try at everything kept: the action files, each synced, then every line in one
    /// append and one fsync. Starts, goes on with or ends the failure episode.
    fn attempt(&mut self) {
        let mut first_error: Option<(PathBuf, io::Error)> = None;
        let mut failed = 0;
        let mut i = 0;
        while i < self.actions.len() {
            let (path, bytes) = &self.actions[i];
            match write_action_file(path, bytes) {
                Ok(_) => {
                    self.actions.swap_remove(i);
                }
                Err(e) => {
                    failed += 1;
                    first_error.get_or_insert((path.clone(), e));
                    i += 1;
                }
            }
        }
        if self.line_count > 0 {
            if let Some(log) = &self.results {
                match log.append_durable(self.lines.as_bytes()) {
                    Ok(()) => {
                        self.progress
                            .written
                            .fetch_add(self.line_count, Ordering::AcqRel);
                        self.lines.clear();
                        self.line_count = 0;
                    }
                    Err(e) => {
                        failed += 1;
                        first_error = Some((log.path().to_path_buf(), e));
                    }
                }
            }
        }
        self.progress.failed.fetch_add(failed, Ordering::AcqRel);
        let now = Instant::now();
        match (first_error, &mut self.failing) {
            (None, None) => {}
            (None, Some(f)) => {
                eprintln!(
                    "tickforge: worker {}: results written again after {} failed attempt(s) \
                     over {:.1} s",
                    self.index,
                    f.attempts,
                    (now - f.since).as_secs_f64()
                );
                self.failing = None;
            }
            (Some((path, e)), None) => {
                self.progress.episodes.fetch_add(1, Ordering::AcqRel);
                eprintln!(
                    "tickforge: worker {}: cannot write {}: {e}; keeping {} result line(s) \
                     and {} action file(s) in memory, retrying",
                    self.index,
                    path.display(),
                    self.line_count,
                    self.actions.len()
                );
                self.failing = Some(Failing {
                    since: now,
                    attempts: failed,
                    retry_at: now + RETRY_FIRST,
                    backoff: (RETRY_FIRST * 2).min(RETRY_MAX),
                });
            }
            (Some(_), Some(f)) => {
                f.attempts += failed;
                f.retry_at = now + f.backoff;
                f.backoff = (f.backoff * 2).min(RETRY_MAX);
            }
        }
    }

    /// The worker stopped and the disk still refuses: the lines go to stderr, so an
    /// operator can still recover them, and are counted lost.
    fn give_up(&mut self) {
        let path = self.results.as_ref().map_or_else(
            || "the results file".into(),
            |l| l.path().display().to_string(),
        );
        if self.line_count > 0 {
            eprintln!(
                "tickforge: worker {}: {} result line(s) could not be written to {path}; \
                 they follow:",
                self.index, self.line_count
            );
            eprint!("{}", self.lines);
        }
        if !self.actions.is_empty() {
            eprintln!(
                "tickforge: worker {}: {} action file(s) could not be written: {}",
                self.index,
                self.actions.len(),
                self.actions
                    .iter()
                    .map(|(p, _)| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if let Some(log) = &self.results {
            log.discard_partial();
        }
        self.progress
            .lost
            .fetch_add(self.line_count, Ordering::AcqRel);
        self.lines.clear();
        self.line_count = 0;
        self.actions.clear();
    }
}

/// Writes an action file under a name no other file has (`path`, or `path` with a `-k`
/// suffix before its extension when that exists) and syncs it; a failed attempt removes
/// what it wrote. Returns the path written.
fn write_action_file(path: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    let (mut file, path) = create_new_numbered(path)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_data());
    match written {
        Ok(()) => Ok(path),
        Err(e) => {
            drop(file);
            let _ = std::fs::remove_file(&path);
            Err(e)
        }
    }
}

/// Creates `path` if it does not exist, else `stem-2.ext`, `stem-3.ext` … (up to 1000).
fn create_new_numbered(path: &Path) -> io::Result<(File, PathBuf)> {
    let create = |p: &Path| OpenOptions::new().write(true).create_new(true).open(p);
    match create(path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        other => return other.map(|f| (f, path.to_path_buf())),
    }
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let ext = path
        .extension()
        .map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for k in 2..=1000 {
        let numbered = path.with_file_name(format!("{stem}-{k}{ext}"));
        match create(&numbered) {
            Ok(f) => return Ok((f, numbered)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::WalkConfig;
    use crate::worker::results::tests::{line, FaultyDisk};
    use crate::worker::{Shutdown, RESULT_POLL};
    use std::io::Read;
    use tickforge_testkit::game::{replay, WalkResult};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tickforge-persist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        path
    }

    /// Waits (bounded) until `done` holds: the persister thread's progress. Looks once a
    /// millisecond (a poll interval, not synchronization), so that a wait does not take a
    /// core from the timing-sensitive tests running beside it.
    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn faulty() -> (FaultyDisk, ResultsLog) {
        let disk = FaultyDisk::default();
        let log = ResultsLog::with_sink(Path::new("faulty.log"), Box::new(disk.clone()));
        (disk, log)
    }

    fn text(disk: &FaultyDisk) -> String {
        String::from_utf8(disk.bytes.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn lines_are_appended_in_order_and_actions_before_them() {
        let path = scratch("results.log");
        let actions = scratch("match.actions");
        let log = ResultsLog::open(&path).unwrap();
        let mut p = Persister::new(0, Some(log), Vec::new());
        p.start();
        let a = p.submit(None, Some("one\n".into())).unwrap();
        let b = p
            .submit(Some((actions.clone(), vec![7; 1000])), Some("two\n".into()))
            .unwrap();
        assert!(a < b);
        p.hand_over();
        p.finish();
        assert!(p.is_done(b));
        assert_eq!((p.failed(), p.written(), p.unwritten()), (0, 2, 0));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\n");
        assert_eq!(std::fs::read(&actions).unwrap(), vec![7; 1000]);
        // A second run appends to the same file.
        p.start();
        let c = p.submit(None, Some("three\n".into())).unwrap();
        p.hand_over();
        p.finish();
        assert!(p.is_done(c));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\nthree\n");
    }

    #[test]
    fn a_refused_line_is_kept_counted_retried_and_written_when_the_disk_comes_back() {
        let (disk, log) = faulty();
        disk.fail_writes.store(u32::MAX, Ordering::Release); // full
        let mut p = Persister::new(0, Some(log), Vec::new());
        p.start();
        let first = p.submit(None, Some(line(1))).unwrap();
        p.hand_over();
        // Its first attempt failed: the match it held back may go on, the line is kept.
        wait_until("the first attempt is over", || p.is_done(first));
        assert_eq!((p.written(), p.pending(), p.lost()), (0, 1, 0));
        assert!(p.failed() >= 1);
        let second = p.submit(None, Some(line(2))).unwrap();
        p.hand_over();
        wait_until("the second job is taken", || p.is_done(second));
        assert_eq!(p.pending(), 2);
        // Retried with backoff: more failed attempts, still one episode (one message).
        let failed = p.failed();
        wait_until("a retry fails", || p.failed() > failed + 1);
        assert_eq!(p.progress.episodes.load(Ordering::Acquire), 1);
        let both = line(1).len() + line(2).len();
        assert!(
            text(&disk).len() <= both / 2,
            "what one failed attempt left, no more"
        );
        // The disk comes back: both lines land, whole, once each, in order.
        disk.fail_writes.store(0, Ordering::Release);
        wait_until("the kept lines are written", || p.written() == 2);
        assert_eq!(p.pending(), 0);
        assert_eq!(text(&disk), format!("{}{}", line(1), line(2)));
        // A later failure is a new episode.
        disk.fail_syncs.store(1, Ordering::Release);
        let third = p.submit(None, Some(line(3))).unwrap();
        p.hand_over();
        p.finish();
        assert!(p.is_done(third));
        assert_eq!(p.progress.episodes.load(Ordering::Acquire), 2);
        assert_eq!((p.written(), p.unwritten()), (3, 0));
        assert_eq!(text(&disk), format!("{}{}{}", line(1), line(2), line(3)));
    }

    #[test]
    fn finish_retries_for_a_bounded_time_then_counts_what_is_unwritten() {
        let (disk, log) = faulty();
        disk.fail_writes.store(u32::MAX, Ordering::Release);
        let mut p = Persister::new(0, Some(log), Vec::new());
        p.finish_retry = Duration::from_millis(100);
        p.start();
        let missing_dir = scratch("no-such-dir").join("m.actions");
        let t = p
            .submit(Some((missing_dir, vec![1])), Some(line(1)))
            .unwrap();
        p.hand_over();
        let started = Instant::now();
        p.finish();
        assert!(started.elapsed() < Duration::from_secs(3), "bounded");
        assert!(p.is_done(t));
        assert!(
            p.failed() >= 4,
            "the line and the file, retried: {}",
            p.failed()
        );
        assert_eq!((p.written(), p.pending(), p.lost()), (0, 0, 1));
        assert_eq!(p.unwritten(), 1);
        assert_eq!(text(&disk), "", "no partial line is left behind");
    }

    fn worker_config(results: &std::path::Path) -> crate::config::ServerConfig {
        crate::testing::register_walk();
        crate::config::ServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            matches: 1,
            results_file: Some(results.to_path_buf()),
            ..crate::config::ServerConfig::default()
        }
    }

    #[test]
    fn the_replacement_match_does_not_tick_before_its_predecessors_result_is_durable() {
        let path = scratch("held.log");
        let mut w = Worker::new(worker_config(&path)).unwrap();
        // A result handed over to a persister that has not run yet: not durable.
        let ticket = w
            .persister
            .as_mut()
            .unwrap()
            .submit(None, Some("held\n".into()));
        assert!(ticket.is_some());
        w.hosted[0].await_result(ticket, tickforge_io::time::now());
        // Match 1's first deadline is the worker's start: it has passed.
        let before = tickforge_io::time::now();
        assert!(w.matches[0].next_deadline() <= before);
        assert_eq!(w.run_due_ticks(None), 0, "held back");
        assert!(
            w.next_wake().unwrap() >= before + RESULT_POLL,
            "a held match does not make the worker spin"
        );
        let p = w.persister.as_mut().unwrap();
        p.start();
        p.hand_over();
        p.finish();
        assert_eq!(w.run_due_ticks(None), 1, "durable: the match ticks");
        assert_eq!(w.hosted[0].awaiting_result, None);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "held\n");
    }

    #[test]
    fn metrics_show_lines_written_failed_and_pending() {
        let path = scratch("metrics.log");
        let mut w = Worker::new(worker_config(&path)).unwrap();
        let (disk, log) = faulty();
        disk.fail_writes.store(u32::MAX, Ordering::Release);
        w.persister = Some(Persister::new(0, Some(log), Vec::new()));
        let p = w.persister.as_mut().unwrap();
        p.start();
        let t = p.submit(None, Some(line(1))).unwrap();
        p.hand_over();
        wait_until("the first attempt is over", || {
            w.persister.as_ref().unwrap().is_done(t)
        });
        w.count_faults();
        assert_eq!(w.metrics.results_written, 0);
        assert_eq!(w.metrics.results_pending, 1, "/healthz: degraded");
        assert!(w.metrics.results_failed >= 1);
        disk.fail_writes.store(0, Ordering::Release);
        wait_until("the line is written", || {
            w.persister.as_ref().unwrap().written() == 1
        });
        w.count_faults();
        assert_eq!(w.metrics.results_written, 1);
        assert_eq!(w.metrics.results_pending, 0);
    }

    /// Ticks of a [`short_matches`] match.
    const SHORT_TICKS: u32 = 25;

    /// Matches of about 0.2 s with nobody in them, ended by the game after
    /// [`SHORT_TICKS`], for 0.8 s.
    fn short_matches(config: &mut crate::config::ServerConfig) {
        config.duration = Some(Duration::from_millis(800));
        let game = serde_json::json!({ "ticks": SHORT_TICKS });
        config.game.table = game.as_object().unwrap().clone();
    }

    #[test]
    fn a_worker_persists_every_match_it_finishes_before_it_returns() {
        let path = scratch("worker.log");
        let dir = scratch("actions");
        let mut config = worker_config(&path);
        config.record_dir = Some(dir.clone());
        short_matches(&mut config);
        let mut w = Worker::new(config).unwrap();
        let run = w.run_id;
        let report = w
            .run(&Shutdown::new(), Some(Duration::ZERO), &mut |_| {})
            .report();
        assert!(report.matches_finished >= 2, "{}", report.matches_finished);
        assert_eq!(report.results_failed, 0);
        assert_eq!(report.results_written, report.matches_finished);
        assert_eq!(report.results_unwritten, 0);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count() as u64, report.matches_finished);
        let mut positions = Vec::new();
        for line in text.lines() {
            let framed = result_line::decode(line).unwrap();
            assert_eq!(framed.game, "walk");
            let origin = framed.origin.unwrap();
            assert_eq!((origin.match_id, origin.run_id), (1, run.0));
            assert!(origin.ended_at_unix_s > 1_700_000_000);
            let result = WalkResult::parse(framed.body).expect("walk's result body");
            assert_eq!(result.ticks, SHORT_TICKS, "{line}");
            positions.push(result.positions);
        }
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names.len() as u64, report.matches_finished, "one a match");
        assert_eq!(names[0], format!("match-1-{run}-1.actions"));
        // Each match's recording, in count order, plays back to its result's positions.
        names.sort_by_key(|n| {
            n.trim_end_matches(".actions")
                .rsplit('-')
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        });
        let config = WalkConfig {
            ticks: SHORT_TICKS,
            ..WalkConfig::default()
        };
        for (name, positions) in names.iter().zip(&positions) {
            let bytes = std::fs::read(dir.join(name)).unwrap();
            let seats = positions.len() as u16;
            assert_eq!(
                replay(&config, seats, &bytes, SHORT_TICKS).as_ref(),
                Some(positions),
                "{name}"
            );
        }
    }

    #[test]
    fn a_worker_whose_disk_stays_full_reports_its_results_unwritten() {
        let path = scratch("full.log");
        let mut config = worker_config(&path);
        short_matches(&mut config);
        let mut w = Worker::new(config).unwrap();
        let (disk, log) = faulty();
        disk.fail_writes.store(u32::MAX, Ordering::Release);
        let mut p = Persister::new(0, Some(log), Vec::new());
        p.finish_retry = Duration::from_millis(50);
        w.persister = Some(p);
        let report = w
            .run(&Shutdown::new(), Some(Duration::ZERO), &mut |_| {})
            .report();
        assert!(report.matches_finished >= 2, "{}", report.matches_finished);
        assert_eq!(report.results_written, 0);
        assert_eq!(report.results_unwritten, report.matches_finished);
        assert!(report.results_failed >= report.matches_finished);
    }

    #[test]
    fn action_files_of_two_runs_in_one_dir_never_overwrite_each_other() {
        let dir = scratch("two-runs");
        let _ = std::fs::remove_dir_all(&dir);
        let end = |recording: Vec<u8>| MatchEnd {
            result: "ticks=1 seats=0 marks=0".to_string(),
            recording: Some(recording),
        };
        let record = |run: RunId, bytes: Vec<u8>| {
            let mut config = worker_config(&scratch("two-runs.log"));
            config.record_dir = Some(dir.clone());
            let mut w = Worker::new(config).unwrap();
            w.run_id = run;
            let p = w.persister.as_mut().unwrap();
            p.start();
            w.persist(0, end(bytes)).unwrap();
            let p = w.persister.as_mut().unwrap();
            p.hand_over();
            p.finish();
            assert_eq!(p.failed(), 0);
        };
        // A restart: another run id, the same match id and count.
        record(RunId(1), vec![1; 100]);
        record(RunId(2), vec![2; 100]);
        // Even the same run id (a test's) does not overwrite: create-new, then a suffix.
        record(RunId(2), vec![3; 100]);
        let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
        assert_eq!(read("match-1-0000000000000001-1.actions"), vec![1; 100]);
        assert_eq!(read("match-1-0000000000000002-1.actions"), vec![2; 100]);
        assert_eq!(read("match-1-0000000000000002-1-2.actions"), vec![3; 100]);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);
    }

    #[test]
    fn a_queued_action_file_keeps_only_its_length_not_the_recordings_reserve() {
        let mut config = worker_config(&scratch("shrunk.log"));
        config.record_dir = Some(scratch("shrunk-actions"));
        let mut w = Worker::new(config).unwrap();
        let end = |recording: Vec<u8>| MatchEnd {
            result: "ticks=1 seats=0 marks=0".to_string(),
            recording: Some(recording),
        };
        let mut recording = Vec::with_capacity(1 << 20);
        recording.extend_from_slice(&[5; 100]);
        w.persist(0, end(recording)).unwrap();
        let p = w.persister.as_ref().unwrap();
        let (_, bytes) = p.backlog[0].actions.as_ref().unwrap();
        assert_eq!(bytes, &vec![5; 100]);
        assert!(bytes.capacity() < 4096, "{}", bytes.capacity());
    }

    #[test]
    fn a_result_that_would_not_read_back_is_counted_not_written_and_nothing_panics() {
        let path = scratch("bad-body.log");
        let mut w = Worker::new(worker_config(&path)).unwrap();
        for body in ["two  spaces=1", "trailing=1 ", "new=1\nline=2"] {
            let end = MatchEnd {
                result: body.to_string(),
                recording: None,
            };
            assert_eq!(w.persist(0, end), None, "{body:?}: nothing handed over");
        }
        assert_eq!(w.retired.results_failed, 3);
        assert_eq!(w.retired.results_unwritten, 3);
    }

    #[cfg(target_os = "linux")]
    /// A tmpfs of 64 KiB mounted on a scratch directory; unmounted when dropped.
    struct TinyFs(PathBuf);

    #[cfg(target_os = "linux")]
    impl TinyFs {
        /// `None` where mounting is not permitted (not root, or in a container).
        fn mount() -> Option<TinyFs> {
            use std::ffi::CString;
            use std::os::unix::ffi::OsStrExt;
            let dir = scratch("tinyfs");
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).ok()?;
            let target = CString::new(dir.as_os_str().as_bytes()).ok()?;
            // SAFETY: every pointer is to a NUL-terminated string alive for the call.
            let rc = unsafe {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    target.as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    c"size=64k".as_ptr().cast(),
                )
            };
            (rc == 0).then_some(TinyFs(dir))
        }
    }

    #[cfg(target_os = "linux")]
    impl Drop for TinyFs {
        fn drop(&mut self) {
            use std::os::unix::ffi::OsStrExt;
            let target = std::ffi::CString::new(self.0.as_os_str().as_bytes()).unwrap();
            // SAFETY: a NUL-terminated path alive for the call.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_real_full_filesystem_is_retried_until_it_has_room() {
        let Some(fs) = TinyFs::mount() else {
            // Straight to standard error: libtest shows a passing test's `eprintln!` only
            // under --nocapture, and a skip must show in every run.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "skipped: a_real_full_filesystem_is_retried_until_it_has_room: cannot mount a \
                 tmpfs here"
            );
            return;
        };
        // Empty: its first line needs a page the full file system does not have.
        let path = fs.0.join("results.log");
        let log = ResultsLog::open(&path).unwrap();
        // Fill the file system to the last byte.
        let filler = fs.0.join("filler");
        let mut f = File::create(&filler).unwrap();
        while f.write(&[0; 4096]).is_ok_and(|n| n > 0) {}
        while f.write(&[0]).is_ok_and(|n| n > 0) {}
        drop(f);
        let mut p = Persister::new(0, Some(log), Vec::new());
        p.start();
        let t = p.submit(None, Some(line(1))).unwrap();
        p.hand_over();
        wait_until("the first attempt is over", || p.is_done(t));
        assert_eq!((p.written(), p.pending()), (0, 1), "the disk is full");
        let t = p.submit(None, Some(line(2))).unwrap();
        p.hand_over();
        wait_until("the second job is taken", || p.is_done(t));
        assert!(p.failed() >= 1);
        std::fs::remove_file(&filler).unwrap();
        wait_until("the lines are written", || p.written() == 2);
        p.finish();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{}{}", line(1), line(2)));
    }

    /// A results disk that hangs (a hard NFS mount, a dead device): every append blocks
    /// until the test lets it go, then fails.
    #[derive(Clone, Default)]
    struct Hung(Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

    impl Hung {
        fn log(&self) -> ResultsLog {
            ResultsLog::with_sink(Path::new("hung.log"), Box::new(self.clone()))
        }
        fn release(&self) {
            *self.0 .0.lock().unwrap() = true;
            self.0 .1.notify_all();
        }
    }

    /// Lets a [`Hung`] disk go when dropped: a failing test ends instead of hanging.
    struct Released(Hung);

    impl Drop for Released {
        fn drop(&mut self) {
            self.0.release();
        }
    }

    impl crate::worker::results::ResultsSink for Hung {
        fn len(&mut self) -> io::Result<Option<u64>> {
            Ok(Some(0))
        }
        fn ends_line(&mut self, _: u64) -> io::Result<bool> {
            Ok(true)
        }
        fn append(&mut self, _: &[u8]) -> io::Result<()> {
            let (released, wake) = &*self.0;
            let mut released = released.lock().unwrap();
            while !*released {
                released = wake.wait(released).unwrap();
            }
            Err(io::Error::from_raw_os_error(libc::EIO))
        }
        fn sync(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn truncate(&mut self, _: u64) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_hung_disk_holds_the_replacement_match_back_for_a_bounded_time_only() {
        use crate::worker::RESULT_HOLD;
        let path = scratch("hung-hold.log");
        let mut w = Worker::new(worker_config(&path)).unwrap();
        let hung = Hung::default();
        let _released = Released(hung.clone());
        let mut p = Persister::new(0, Some(hung.log()), Vec::new());
        p.finish_retry = Duration::from_millis(50);
        p.start();
        let ticket = p.submit(None, Some(line(1)));
        p.hand_over();
        w.persister = Some(p);
        let held_at = tickforge_io::time::now();
        w.hosted[0].await_result(ticket, held_at);
        assert_eq!(w.run_due_ticks(None), 0, "held back");
        let give_up = Instant::now() + Duration::from_secs(10);
        while w.run_due_ticks(None) == 0 {
            assert!(Instant::now() < give_up, "held back for ever");
            std::thread::sleep(Duration::from_millis(1));
        }
        let released = tickforge_io::time::now();
        assert!(released >= held_at + RESULT_HOLD, "released early");
        assert!(released < held_at + RESULT_HOLD * 3, "released late");
        let p = w.persister.as_mut().unwrap();
        assert_eq!(
            p.pending(),
            1,
            "the result stays pending: /healthz degraded"
        );
        // Stopping does not wait for the disk for ever either.
        let stopping = Instant::now();
        p.finish();
        assert!(stopping.elapsed() < p.finish_retry * 2 + FINISH_MARGIN * 2);
        assert_eq!((p.written(), p.pending(), p.unwritten()), (0, 0, 1));
        assert!(p.is_done(ticket.unwrap()));
    }

    #[test]
    fn a_worker_whose_disk_hangs_stops_within_the_bound_and_reports_its_results_unwritten() {
        let path = scratch("hung.log");
        let mut config = worker_config(&path);
        short_matches(&mut config);
        config.duration = Some(Duration::from_secs(2));
        let finish_retry = Duration::from_millis(100);
        let hung = Hung::default();
        let _released = Released(hung.clone());
        let log = hung.log();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut w = Worker::new(config).unwrap();
            let mut p = Persister::new(0, Some(log), Vec::new());
            p.finish_retry = finish_retry;
            w.persister = Some(p);
            let started = Instant::now();
            let report = w
                .run(&Shutdown::new(), Some(Duration::ZERO), &mut |_| {})
                .report();
            let _ = tx.send((report, started.elapsed()));
        });
        let (report, took) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the worker stops");
        // The first match's result hangs; its replacement ticks after the hold, and ends.
        assert!(report.matches_finished >= 2, "{}", report.matches_finished);
        assert_eq!(report.results_written, 0);
        assert_eq!(report.results_unwritten, report.matches_finished);
        let bound = Duration::from_secs(2) + finish_retry * 2 + FINISH_MARGIN;
        assert!(took < bound + Duration::from_secs(1), "{took:?}");
    }

    /// A results "file" that is a pipe: its writes block once the pipe is full, as a
    /// stalled disk would, until the test reads it. A pipe has nothing to sync.
    struct Pipe(std::io::PipeWriter);

    impl crate::worker::results::ResultsSink for Pipe {
        fn len(&mut self) -> io::Result<Option<u64>> {
            Ok(None)
        }
        fn ends_line(&mut self, _: u64) -> io::Result<bool> {
            Ok(true)
        }
        fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
            self.0.write_all(bytes)
        }
        fn sync(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn truncate(&mut self, _: u64) -> io::Result<()> {
            Err(io::ErrorKind::Unsupported.into())
        }
    }

    fn stalled_sink() -> (std::io::PipeReader, ResultsLog) {
        let (reader, writer) = std::io::pipe().unwrap();
        let log = ResultsLog::with_sink(Path::new("pipe"), Box::new(Pipe(writer)));
        (reader, log)
    }

    #[test]
    fn a_stalled_disk_never_blocks_the_worker_and_loses_no_line_it_kept() {
        let (mut reader, writer) = stalled_sink();
        let mut p = Persister::new(0, Some(writer), Vec::new());
        p.start();
        // A line larger than a pipe's buffer stalls the thread in its first write.
        let big = format!("{}\n", "x".repeat(1 << 20));
        let first = p.submit(None, Some(big.clone())).unwrap();
        p.hand_over();
        // Everything else fills the channel, then the backlog, then is dropped: all of it
        // without blocking.
        let started = std::time::Instant::now();
        let mut kept = Vec::new();
        for i in 0..IN_FLIGHT_JOBS + BACKLOG_JOBS + 5 {
            if let Some(t) = p.submit(None, Some(format!("{i}\n"))) {
                kept.push((t, i));
            }
            p.hand_over();
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(!p.is_done(first), "the disk is stalled");
        assert!(!p.backlog.is_empty(), "the channel filled up");
        assert!(kept.len() >= BACKLOG_JOBS + IN_FLIGHT_JOBS - 1);
        let dropped = (IN_FLIGHT_JOBS + BACKLOG_JOBS + 5 - kept.len()) as u64;
        assert_eq!(p.failed(), dropped, "dropped jobs count as failed");
        assert_eq!(p.pending(), kept.len() as u64 + 1, "kept lines are pending");
        // The disk comes back: every kept line lands, in order, after the big one.
        let drain = std::thread::spawn(move || {
            let mut text = String::new();
            reader.read_to_string(&mut text).unwrap();
            text
        });
        p.finish();
        assert_eq!(p.unwritten(), dropped);
        drop(p);
        let text = drain.join().unwrap();
        let mut expected = big;
        for (_, i) in &kept {
            expected.push_str(&format!("{i}\n"));
        }
        assert_eq!(text.len(), expected.len());
        assert!(text == expected, "lines out of order or missing");
    }
}
