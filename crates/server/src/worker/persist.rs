//! Results off the frame: a finished match's action file and result line are written and
//! fsynced by the worker's persister thread, never inside a tick.
//!
//! ```text
//! worker, in its frame                          persister thread
//! a match ends → its job joins the backlog
//! after the send batch: backlog → channel       take every waiting job;
//!   (try_send: never blocks; a full channel       write the action files, fsync each;
//!   leaves the job in the backlog for the         append the result lines, one fsync;
//!   next wake-up)                                 done = the last job's ticket
//! the replacement match waits for done ≥ its ticket before its first tick
//! at the end of `Worker::run`: hand over the rest, close the channel, join
//! ```
//!
//! The promise: a match's result is durable before the match that replaces it runs its
//! first tick, and everything about the match (its action file) before its result line. The
//! replacement's first tick is due a period after the last, which covers a usual fsync; a
//! slower disk holds that one match back while the others tick on. A stopping worker
//! returns only once every job handed to it is written or counted failed, so a drained
//! process exits with every result on disk.
//!
//! One persister per worker: the worker owns its results file and counters, shares nothing
//! with other workers, and its persister lives exactly as long as its `run`, so the host
//! has no part in starting, flushing or joining it. A match ends once in minutes, so an
//! fsync per worker instead of one batched per host costs nothing that shows.
//! The thread is started from the worker's thread and so inherits its core and scheduling
//! class: when the worker runs real-time, the persister only runs while the worker sleeps;
//! its CPU per match is a few writes and starting the fsyncs, whose waits take no CPU.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use tickforge_game::rules::MatchResult;

use super::Worker;

/// Jobs handed to the persister and not yet taken: a match ends once in minutes, so this
/// only fills while the disk stalls.
const IN_FLIGHT_JOBS: usize = 16;
/// Jobs kept on the worker while the channel is full; past this a finished match's job is
/// dropped and counted failed (a stalled disk must not grow the worker without bound).
const BACKLOG_JOBS: usize = 64;
/// Room reserved for a result line: about 80 bytes and 30 a player, so ten fit.
const LINE_BYTES: usize = 512;

/// What one finished match leaves to write.
#[derive(Debug)]
struct Job {
    ticket: u64,
    /// The action file and its bytes, when matches are recorded.
    actions: Option<(PathBuf, Vec<u8>)>,
    /// The result line, newline included, when there is a results file.
    line: Option<String>,
}

/// What the persister thread tells the worker, without a lock.
#[derive(Debug, Default)]
struct Progress {
    /// The ticket of the last job written or failed (jobs finish in ticket order).
    done: AtomicU64,
    /// Result lines and action files that could not be written.
    failed: AtomicU64,
    /// The thread is gone (it panicked): nothing more will be written.
    dead: AtomicBool,
}

/// The persister thread while it runs.
struct Running {
    jobs: SyncSender<Job>,
    thread: JoinHandle<Option<File>>,
}

/// The worker's side of its persister.
pub(super) struct Persister {
    /// The worker's index, for the thread's name.
    index: usize,
    /// Where the thread may run (see [`super::WorkerSetup::helper_cores`]).
    cores: Vec<usize>,
    /// The results file, while no thread holds it.
    results: Option<File>,
    running: Option<Running>,
    /// Jobs not yet handed over, oldest first; reserved up front.
    backlog: VecDeque<Job>,
    /// The last ticket given out.
    ticket: u64,
    /// Lines and files dropped on the worker (the backlog was full), and jobs lost with a
    /// thread that panicked (one each).
    dropped: u64,
    progress: Arc<Progress>,
}

impl Persister {
    /// Worker `index`'s persister, appending result lines to `results` (when given); its
    /// thread starts with [`Persister::start`] and runs on `cores` (empty: where it starts).
    pub(super) fn new(index: usize, results: Option<File>, cores: Vec<usize>) -> Persister {
        Persister {
            index,
            cores,
            results,
            running: None,
            backlog: VecDeque::with_capacity(BACKLOG_JOBS),
            ticket: 0,
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
        let (results, progress) = (self.results.take(), Arc::clone(&self.progress));
        let cores = self.cores.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("tickforge-persist-{}", self.index))
            .spawn(move || {
                // Spawned by a pinned, maybe real-time worker: off its core and class, so
                // the disk's waits and the writes' CPU never come out of the worker's time.
                if !cores.is_empty() {
                    let _ = tickforge_io::cpu::release_current_thread(&cores);
                }
                persist(rx, results, &progress)
            });
        match spawned {
            Ok(thread) => {
                self.progress.dead.store(false, Ordering::Release);
                self.running = Some(Running { jobs, thread });
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
        if self.backlog.len() == BACKLOG_JOBS {
            self.dropped += u64::from(line.is_some()) + u64::from(actions.is_some());
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

    /// Whether the job with `ticket` is written (or failed, or can no longer be): the
    /// match it held back may tick.
    pub(super) fn is_done(&self, ticket: u64) -> bool {
        self.progress.done.load(Ordering::Acquire) >= ticket
            || self.progress.dead.load(Ordering::Acquire)
    }

    /// Result lines and action files that could not be written, so far.
    pub(super) fn failed(&self) -> u64 {
        self.progress.failed.load(Ordering::Acquire) + self.dropped
    }

    /// Hands over every job, waiting for room, then stops the thread once it has written
    /// them all. Off the frame: it blocks for as long as the disk takes. Jobs that no
    /// thread will write (it panicked, or could not start) are counted failed.
    pub(super) fn finish(&mut self) {
        if !self.backlog.is_empty() {
            self.start();
        }
        if let Some(Running { jobs, thread }) = self.running.take() {
            while let Some(job) = self.backlog.pop_front() {
                // A send fails only when the thread is gone; its jobs are counted below.
                if jobs.send(job).is_err() {
                    break;
                }
            }
            drop(jobs);
            match thread.join() {
                Ok(results) => self.results = results,
                Err(_) => self.progress.dead.store(true, Ordering::Release),
            }
        }
        let done = self.progress.done.load(Ordering::Acquire);
        if done < self.ticket {
            self.dropped += self.ticket - done;
            self.backlog.clear();
            self.progress.done.store(self.ticket, Ordering::Release);
        }
    }
}

impl Drop for Persister {
    /// A worker that stops without [`Persister::finish`] (it panicked) still writes what it
    /// handed over.
    fn drop(&mut self) {
        if let Some(Running { jobs, thread }) = self.running.take() {
            drop(jobs);
            let _ = thread.join();
        }
    }
}

impl Worker {
    /// Queues a finished match's action file and result line for the persister, and
    /// returns the ticket its replacement waits for; `None`: nothing to wait for. Allocates
    /// the line and the file name, once a match; never blocks.
    pub(super) fn persist(
        &mut self,
        i: usize,
        result: &MatchResult,
        actions: Option<Vec<u8>>,
    ) -> Option<u64> {
        self.retired.matches_finished += 1;
        let persister = self.persister.as_mut()?;
        let actions = match (&self.config.record_dir, actions) {
            (Some(dir), Some(bytes)) => {
                let name = format!(
                    "match-{}-{}.actions",
                    self.matches[i].id(),
                    self.retired.matches_finished
                );
                Some((dir.join(name), bytes))
            }
            _ => None,
        };
        let line = self.config.results_file.is_some().then(|| {
            let mut line = String::with_capacity(LINE_BYTES);
            result.encode(&mut line);
            line
        });
        if actions.is_none() && line.is_none() {
            return None;
        }
        persister.submit(actions, line)
    }
}

/// The persister thread: takes every waiting job, writes them, and reports. Returns the
/// results file when the worker closes the channel.
fn persist(rx: Receiver<Job>, mut results: Option<File>, progress: &Progress) -> Option<File> {
    let mut batch = Vec::with_capacity(IN_FLIGHT_JOBS);
    let mut lines = String::new();
    while let Ok(job) = rx.recv() {
        batch.push(job);
        batch.extend(rx.try_iter().take(IN_FLIGHT_JOBS));
        let failed = write_batch(&batch, results.as_mut(), &mut lines);
        progress.failed.fetch_add(failed, Ordering::AcqRel);
        if let Some(last) = batch.last() {
            progress.done.store(last.ticket, Ordering::Release);
        }
        batch.clear();
    }
    results
}

/// Writes a batch of jobs: every action file (each synced), then every result line in one
/// append and one fsync, so a result on disk means its match's actions are too. Returns the
/// files and lines that failed.
fn write_batch(batch: &[Job], results: Option<&mut File>, lines: &mut String) -> u64 {
    let mut failed = 0;
    for (path, bytes) in batch.iter().filter_map(|j| j.actions.as_ref()) {
        let written = File::create(path).and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_data()
        });
        failed += u64::from(written.is_err());
    }
    lines.clear();
    let mut count = 0;
    for line in batch.iter().filter_map(|j| j.line.as_deref()) {
        lines.push_str(line);
        count += 1;
    }
    if count > 0 {
        let appended = match results {
            Some(file) => file
                .write_all(lines.as_bytes())
                .and_then(|()| file.sync_data()),
            None => Err(std::io::ErrorKind::NotFound.into()),
        };
        if appended.is_err() {
            failed += count;
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::{Shutdown, RESULT_POLL};
    use std::io::Read;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tickforge-persist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        path
    }

    fn append(path: &std::path::Path) -> File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap()
    }

    #[test]
    fn lines_are_appended_in_order_and_actions_before_them() {
        let path = scratch("results.log");
        let actions = scratch("match.actions");
        let mut p = Persister::new(0, Some(append(&path)), Vec::new());
        p.start();
        let a = p.submit(None, Some("one\n".into())).unwrap();
        let b = p
            .submit(Some((actions.clone(), vec![7; 1000])), Some("two\n".into()))
            .unwrap();
        assert!(a < b);
        p.hand_over();
        p.finish();
        assert!(p.is_done(b));
        assert_eq!(p.failed(), 0);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\n");
        assert_eq!(std::fs::read(&actions).unwrap(), vec![7; 1000]);
        // The thread gave the file back: a second run appends to it.
        p.start();
        let c = p.submit(None, Some("three\n".into())).unwrap();
        p.hand_over();
        p.finish();
        assert!(p.is_done(c));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\nthree\n");
    }

    #[test]
    fn a_write_that_fails_is_counted_and_releases_its_match() {
        let path = scratch("read-only.log");
        std::fs::write(&path, "").unwrap();
        let read_only = File::open(&path).unwrap();
        let mut p = Persister::new(0, Some(read_only), Vec::new());
        p.start();
        let missing_dir = scratch("no-such-dir").join("m.actions");
        let t = p
            .submit(Some((missing_dir, vec![1])), Some("lost\n".into()))
            .unwrap();
        p.hand_over();
        p.finish();
        assert!(p.is_done(t));
        assert_eq!(p.failed(), 2, "the action file and the line");
    }

    fn worker_config(results: &std::path::Path) -> crate::config::ServerConfig {
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
        w.hosted[0].awaiting_result = ticket;
        // Match 1's first deadline is the worker's start: it has passed.
        let before = tickforge_io::time::now();
        assert!(w.matches[0].next_deadline() <= before);
        assert_eq!(w.run_due_ticks(false), 0, "held back");
        assert!(
            w.next_wake().unwrap() >= before + RESULT_POLL,
            "a held match does not make the worker spin"
        );
        let p = w.persister.as_mut().unwrap();
        p.start();
        p.hand_over();
        p.finish();
        assert_eq!(w.run_due_ticks(false), 1, "durable: the match ticks");
        assert_eq!(w.hosted[0].awaiting_result, None);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "held\n");
    }

    #[test]
    fn a_worker_persists_every_match_it_finishes_before_it_returns() {
        use std::time::Duration;
        let path = scratch("worker.log");
        let dir = scratch("actions");
        let mut config = worker_config(&path);
        config.record_dir = Some(dir.clone());
        config.duration = Some(Duration::from_millis(800));
        // Matches of about 0.2 s with nobody in them, ended by the round timer.
        config.rules.buy = Duration::from_millis(50);
        config.rules.round = Duration::from_millis(100);
        config.rules.round_end = Duration::from_millis(20);
        config.rules.rounds = std::num::NonZeroU8::MIN;
        let mut w = Worker::new(config).unwrap();
        let report = w
            .run(&Shutdown::new(), Some(Duration::ZERO), &mut |_| {})
            .report();
        assert!(report.matches_finished >= 2, "{}", report.matches_finished);
        assert_eq!(report.results_failed, 0);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count() as u64, report.matches_finished);
        for line in text.lines() {
            let result = tickforge_game::rules::MatchResult::decode(line).unwrap();
            assert_eq!(result.rounds_played, 1);
        }
        let files = std::fs::read_dir(&dir).unwrap().count() as u64;
        assert_eq!(files, report.matches_finished, "one action file a match");
    }

    /// A results "file" that is a pipe: its writes block once the pipe is full, as a
    /// stalled disk would, until the test reads it.
    fn stalled_sink() -> (std::io::PipeReader, File) {
        let (reader, writer) = std::io::pipe().unwrap();
        (reader, File::from(std::os::fd::OwnedFd::from(writer)))
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
        // The disk comes back: every kept line lands, in order, after the big one.
        let drain = std::thread::spawn(move || {
            let mut text = String::new();
            reader.read_to_string(&mut text).unwrap();
            text
        });
        p.finish();
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
