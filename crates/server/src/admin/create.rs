//! The one way a match is created at run time, for `POST /matches` and for an Agones
//! allocation alike: pick the id, offer the match to the least-loaded worker first, and
//! wait for its answer with a timeout, passing it on to the next worker while one is full.
//!
//! The waiting side is the caller's thread (the admin thread awaits, the Agones thread
//! polls); a worker only ever `try_recv`s the command and answers on a oneshot.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tickforge_proto::MatchId;
use tokio::sync::oneshot;

use super::{AdminCommand, AdminHandle, CreateError, CreateMatch, MatchSpec};

/// How often a blocking caller looks for a worker's answer: a worker answers within one
/// wake-up (a tick, 7.8 ms at 128 Hz).
const ANSWER_POLL: Duration = Duration::from_millis(1);

/// Where a new match went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The match's id, unique in the process; its connect tokens name it.
    pub match_id: MatchId,
    /// The worker hosting it.
    pub worker: usize,
    /// Where players reach it: the worker's public address.
    pub server: SocketAddr,
}

/// Why no match was created, with the HTTP status `POST /matches` answers it with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// 422: no worker can host this spec; 503: full, draining, or a worker did not answer.
    pub status: u16,
    /// For the matchmaker.
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// The workers' command ends and what creating a match needs besides: shared by the admin
/// server and the Agones thread (behind an `Arc`).
#[derive(Debug)]
pub struct MatchCreator {
    workers: Vec<AdminHandle>,
    next_id: AtomicU32,
    draining: AtomicBool,
    reply_timeout: Duration,
    /// Each worker's address as tokens name it: the configured one until Agones reports the
    /// GameServer's address and ports.
    public: Mutex<Vec<SocketAddr>>,
}

/// What one worker's answer means for the search.
enum Step {
    Done(Result<Placed, Refusal>),
    /// Try the next worker; this is why, if none takes it.
    Next(String),
}

impl MatchCreator {
    /// A creator over one handle per worker, in worker order. Match ids count up from
    /// `first_match_id` (past the startup matches' ids); a worker that does not answer
    /// within `reply_timeout` gets the match refused (and removes it when it answers late).
    pub fn new(
        workers: Vec<AdminHandle>,
        first_match_id: u32,
        reply_timeout: Duration,
    ) -> MatchCreator {
        let public = workers.iter().map(|w| w.public_addr).collect();
        MatchCreator {
            workers,
            next_id: AtomicU32::new(first_match_id.max(1)),
            draining: AtomicBool::new(false),
            reply_timeout,
            public: Mutex::new(public),
        }
    }

    /// The workers' handles, in worker order.
    pub fn workers(&self) -> &[AdminHandle] {
        &self.workers
    }

    /// Starts or ends draining: every creation is refused from then on.
    pub fn set_draining(&self, draining: bool) {
        self.draining.store(draining, Ordering::Release);
    }

    /// True while draining.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Where players reach worker `worker`, as tokens and allocations name it.
    pub fn public_addr(&self, worker: usize) -> Option<SocketAddr> {
        let public = self.public.lock().unwrap_or_else(PoisonError::into_inner);
        public.get(worker).copied()
    }

    /// Replaces worker `worker`'s public address (Agones' GameServer status); ignored for
    /// a worker that does not exist.
    pub fn set_public_addr(&self, worker: usize, addr: SocketAddr) {
        let mut public = self.public.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = public.get_mut(worker) {
            *slot = addr;
        }
    }

    /// Creates a match of `spec`, awaiting the workers' answers (the admin thread).
    pub async fn create(&self, spec: &MatchSpec) -> Result<Placed, Refusal> {
        let (match_id, order) = self.begin()?;
        let mut refusal = String::from("no workers");
        for i in order {
            let mut answer = match self.offer(i, match_id, spec) {
                Ok(answer) => answer,
                Err(why) => {
                    refusal = why;
                    continue;
                }
            };
            // Awaited: other requests are served meanwhile.
            let answered = match tokio::time::timeout(self.reply_timeout, &mut answer).await {
                Ok(answered) => Some(answered.ok()),
                Err(_elapsed) => take_late_answer(&mut answer).map(Some),
            };
            match self.judge(i, match_id, answered) {
                Step::Done(done) => return done,
                Step::Next(why) => refusal = why,
            }
        }
        Err(Refusal {
            status: 503,
            reason: refusal,
        })
    }

    /// [`MatchCreator::create`] for a thread with no runtime (the Agones thread): blocks
    /// for at most the reply timeout per worker asked, never a worker.
    pub fn create_blocking(&self, spec: &MatchSpec) -> Result<Placed, Refusal> {
        let (match_id, order) = self.begin()?;
        let mut refusal = String::from("no workers");
        for i in order {
            let mut answer = match self.offer(i, match_id, spec) {
                Ok(answer) => answer,
                Err(why) => {
                    refusal = why;
                    continue;
                }
            };
            let deadline = Instant::now() + self.reply_timeout;
            let answered = loop {
                match answer.try_recv() {
                    Ok(answer) => break Some(Some(answer)),
                    Err(oneshot::error::TryRecvError::Closed) => break Some(None),
                    Err(oneshot::error::TryRecvError::Empty) if Instant::now() >= deadline => {
                        break take_late_answer(&mut answer).map(Some)
                    }
                    Err(oneshot::error::TryRecvError::Empty) => std::thread::sleep(ANSWER_POLL),
                }
            };
            match self.judge(i, match_id, answered) {
                Step::Done(done) => return done,
                Step::Next(why) => refusal = why,
            }
        }
        Err(Refusal {
            status: 503,
            reason: refusal,
        })
    }

    /// The new match's id and the workers to offer it to, least loaded first; refused at
    /// once while draining.
    fn begin(&self) -> Result<(MatchId, Vec<usize>), Refusal> {
        if self.is_draining() {
            return Err(Refusal {
                status: 503,
                reason: CreateError::Draining.to_string(),
            });
        }
        let mut order: Vec<(usize, usize)> = (self.workers.iter().enumerate())
            .map(|(i, w)| (w.with_status(|s| s.matches.len()), i))
            .collect();
        order.sort_unstable();
        Ok((
            self.allocate_id(),
            order.into_iter().map(|(_, i)| i).collect(),
        ))
    }

    /// Sends the command to worker `i`; the receiver gets its answer.
    fn offer(
        &self,
        i: usize,
        match_id: MatchId,
        spec: &MatchSpec,
    ) -> Result<oneshot::Receiver<Result<(), CreateError>>, String> {
        let (reply, answer) = oneshot::channel();
        let command = AdminCommand::CreateMatch(CreateMatch {
            match_id,
            spec: spec.clone(),
            reply,
        });
        self.workers[i]
            .commands
            .send(command)
            .map_err(|_| format!("worker {i} has stopped"))?;
        Ok(answer)
    }

    /// What worker `i`'s answer means: `None`, no answer within the reply timeout;
    /// `Some(None)`, the worker dropped the request.
    fn judge(
        &self,
        i: usize,
        match_id: MatchId,
        answered: Option<Option<Result<(), CreateError>>>,
    ) -> Step {
        let refuse = |status, e: CreateError| {
            Step::Done(Err(Refusal {
                status,
                reason: e.to_string(),
            }))
        };
        match answered {
            None => Step::Done(Err(Refusal {
                status: 503,
                reason: format!(
                    "worker {i} did not answer within {} ms",
                    self.reply_timeout.as_millis()
                ),
            })),
            Some(Some(Ok(()))) => Step::Done(Ok(Placed {
                match_id,
                worker: i,
                server: self.public_addr(i).unwrap_or(self.workers[i].public_addr),
            })),
            Some(Some(Err(e @ CreateError::Full { .. }))) => Step::Next(e.to_string()),
            Some(Some(Err(e @ CreateError::Unsupported { .. }))) => refuse(422, e),
            Some(Some(Err(e @ CreateError::Draining))) => refuse(503, e),
            Some(None) => Step::Next(format!("worker {i} dropped the request")),
        }
    }

    /// The next match id: counts up from `first_match_id`, skipping 0 when it wraps.
    fn allocate_id(&self) -> MatchId {
        let next = |id: u32| Some(id.checked_add(1).unwrap_or(1));
        // `fetch_update` with a closure that always returns `Some` cannot fail.
        let id = (self
            .next_id
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, next))
        .unwrap_or_else(|id| id);
        MatchId(id)
    }
}

/// Gives up waiting for a worker's answer: closes the channel, so a worker answering
/// from now on sees it closed ([`CreateMatch::answer`] is false) and removes the match it
/// made, and returns an answer that came between the timeout and the close (the match
/// exists: it gets its tokens rather than left an orphan until the unjoined TTL).
fn take_late_answer(
    answer: &mut oneshot::Receiver<Result<(), CreateError>>,
) -> Option<Result<(), CreateError>> {
    answer.close();
    answer.try_recv().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::worker_link;

    #[test]
    fn a_blocking_create_goes_to_the_least_loaded_worker_and_names_its_public_address() {
        let (a, link_a) = worker_link("127.0.0.1:7000".parse().unwrap());
        let (b, link_b) = worker_link("127.0.0.1:7001".parse().unwrap());
        let hosted = crate::admin::MatchStatus {
            id: MatchId(1),
            players_connected: 0,
            tick: 0,
            state: crate::admin::MatchState::Waiting,
            ticks: 0,
            late_ticks: 0,
            hitches: 0,
            cost: Default::default(),
        };
        assert!(link_a.publish(|s| s.matches.extend([hosted.clone(), hosted])));
        let creator = MatchCreator::new(vec![a, b], 5, Duration::from_secs(5));
        creator.set_public_addr(1, "203.0.113.7:7777".parse().unwrap());
        let worker = std::thread::spawn(move || loop {
            if let Some(AdminCommand::CreateMatch(req)) = link_b.poll_command() {
                assert_eq!(req.match_id, MatchId(5));
                req.answer(Ok(()));
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        });
        let placed = creator.create_blocking(&MatchSpec::walk_default()).unwrap();
        worker.join().unwrap();
        assert_eq!(
            placed,
            Placed {
                match_id: MatchId(5),
                worker: 1,
                server: "203.0.113.7:7777".parse().unwrap(),
            }
        );
        drop(link_a);
        creator.set_draining(true);
        let refused = creator
            .create_blocking(&MatchSpec::walk_default())
            .unwrap_err();
        assert_eq!(refused.status, 503);
        assert_eq!(refused.reason, "draining: no new matches");
    }

    #[test]
    fn a_worker_that_never_answers_costs_a_blocking_create_the_reply_timeout_only() {
        let (a, _link) = worker_link("127.0.0.1:7000".parse().unwrap());
        let creator = MatchCreator::new(vec![a], 1, Duration::from_millis(50));
        let t0 = Instant::now();
        let refused = creator
            .create_blocking(&MatchSpec::walk_default())
            .unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert_eq!(refused.status, 503);
        assert!(
            refused.reason.contains("did not answer within 50 ms"),
            "{refused}"
        );
    }

    #[test]
    fn an_answer_just_after_the_timeout_is_taken_and_one_after_the_close_is_refused() {
        let request = |reply| CreateMatch {
            match_id: MatchId(7),
            spec: MatchSpec::walk_default(),
            reply,
        };
        // The worker answered between the timeout and the close: the match exists, so the
        // admin answers 201 with its tokens rather than leave it orphaned.
        let (reply, mut answer) = oneshot::channel();
        assert!(request(reply).answer(Ok(())));
        assert_eq!(take_late_answer(&mut answer), Some(Ok(())));
        let (reply, mut answer) = oneshot::channel();
        let full = CreateError::Full {
            reason: "60 of 60 matches".to_string(),
        };
        assert!(request(reply).answer(Err(full.clone())));
        assert_eq!(take_late_answer(&mut answer), Some(Err(full)));
        // After the close the worker learns the admin gave up, and removes the match.
        let (reply, mut answer) = oneshot::channel();
        assert_eq!(take_late_answer(&mut answer), None);
        assert!(!request(reply).answer(Ok(())));
    }
}
