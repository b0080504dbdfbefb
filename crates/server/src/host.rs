//! The process: one worker thread per core, pinned, each with its own socket; the startup
//! matches placed over them; the admin server; and draining.
//!
//! Placement follows VALORANT's rule ([`tickforge_io::numa::Placer`]): match id modulo the
//! number of NUMA nodes picks the node, then the worker of that node hosting the fewest
//! matches takes it (the lowest CPU on a tie). On a one-node host this is exactly round
//! robin in CPU order, so startup match `id` lands on worker `(id - 1) % workers`: tools
//! that only see the `listening` addresses (the bots) rely on that.
//!
//! Workers share nothing on the hot path. Worker `i` binds the configured port plus `i`
//! (port 0: each its own free port). The host thread only starts them, relays draining to
//! the admin server and Agones, joins them, and tells Agones Shutdown at the end.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tickforge_io::numa::{self, NumaError, Topology};
use tickforge_io::{cpu, time};
use tickforge_proto::MatchId;
use tickforge_telemetry::report::{Memory, ServerReport};

use crate::admin::{worker_link, AdminConfig, AdminError, AdminServer, MatchCreator, SpecDefaults};
use crate::agones::{Agones, CallCounts};
use crate::config::ServerConfig;
use crate::worker::{bind_game_socket, Shutdown, Worker, WorkerError, WorkerFigures, WorkerSetup};
use crate::{RunId, WorkerStatus};

/// Why the host could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The NUMA topology could not be read, or no worker CPU is on a node.
    #[error("placement")]
    Numa(#[from] NumaError),
    /// A worker could not open its socket or results file.
    #[error("worker {worker}")]
    Worker {
        /// The worker's index.
        worker: usize,
        /// Why.
        source: WorkerError,
    },
    /// Worker `i` binds the configured port plus `i`, which must stay a port.
    #[error("config keys `bind`, `public_addr`: port {port} + {workers} workers runs past 65535")]
    Ports {
        /// The configured port.
        port: u16,
        /// Workers asked for.
        workers: usize,
    },
    /// The admin server could not start.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// The Agones threads could not be started.
    #[error("starting the Agones threads")]
    Agones(#[source] std::io::Error),
    /// A worker thread could not be started.
    #[error("starting worker {worker}")]
    Spawn {
        /// The worker's index.
        worker: usize,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A worker thread panicked.
    #[error("worker {worker} panicked")]
    Panicked {
        /// The worker's index.
        worker: usize,
    },
    /// A second signal stopped the drain: these matches and players were still playing,
    /// and these result lines not written.
    #[error("{}", abandoned_message(*matches, *players, *results_unwritten, *unreported, *workers))]
    Abandoned {
        /// Matches with connected players when the workers last reported (after the
        /// second signal).
        matches: usize,
        /// Their connected players.
        players: usize,
        /// Result lines not on disk: those the persisters still held in memory when the
        /// host gave up waiting for them, or could not write once the workers stopped.
        results_unwritten: usize,
        /// Workers that had not reported what they host when the host returned: their
        /// matches and result lines are not in the counts above.
        unreported: usize,
        /// Workers in all.
        workers: usize,
    },
}

/// [`HostError::Abandoned`]'s message: what was lost, and whether all of it is known.
fn abandoned_message(
    matches: usize,
    players: usize,
    results_unwritten: usize,
    unreported: usize,
    workers: usize,
) -> String {
    let mut text = "a second signal stopped the drain".to_string();
    if unreported > 0 {
        text += &format!(
            " before {unreported} of {} reported what {} hosted",
            count(workers, "worker", "workers"),
            if unreported == 1 { "it" } else { "they" }
        );
    }
    if unreported == 0 {
        text += &format!(
            ": abandoned {} with {} still playing",
            count(matches, "match", "matches"),
            count(players, "player", "players")
        );
    } else if matches > 0 {
        text += &format!(
            ": abandoned at least {} with {} still playing",
            count(matches, "match", "matches"),
            count(players, "player", "players")
        );
    } else {
        text += if unreported == 1 {
            ": whatever it was playing is abandoned"
        } else {
            ": whatever they were playing is abandoned"
        };
    }
    if results_unwritten > 0 {
        text += &format!(
            " and {} not yet written",
            count(results_unwritten, "result line", "result lines")
        );
    }
    text
}

/// What a draining host reports while it waits ([`Host::wait_with`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DrainEvent {
    /// Draining started: it waits for these matches with players, up to `timeout`.
    Started {
        /// Matches with a connected player (the others stopped at once).
        matches: usize,
        /// Their connected players.
        players: usize,
        /// The drain timeout.
        timeout: Duration,
    },
    /// About once a second, and whenever the counts change.
    Waiting {
        /// Matches with a connected player still running.
        matches: usize,
        /// Their connected players.
        players: usize,
        /// Time since draining started.
        elapsed: Duration,
        /// The drain timeout.
        timeout: Duration,
    },
    /// Every worker stopped: the matches and players still running then were cut off
    /// by the drain timeout (none when every match finished).
    Ended {
        /// Matches with players still running when the workers stopped.
        matches: usize,
        /// Their connected players.
        players: usize,
        /// Time since draining started.
        elapsed: Duration,
    },
}

impl std::fmt::Display for DrainEvent {
    /// The line `serve` prints (without its `tickforge serve: ` prefix).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            DrainEvent::Started { matches: 0, .. } => {
                write!(f, "draining: no match has a connected player; stopping now")
            }
            DrainEvent::Started {
                matches,
                players,
                timeout,
            } => write!(
                f,
                "draining: waiting for {} with {}, up to {} s (a second signal exits at once)",
                count(matches, "match", "matches"),
                count(players, "player", "players"),
                timeout.as_secs_f64()
            ),
            DrainEvent::Waiting {
                matches,
                players,
                elapsed,
                timeout,
            } => write!(
                f,
                "draining: {} with {} still playing, {:.0} s left",
                count(matches, "match", "matches"),
                count(players, "player", "players"),
                timeout.saturating_sub(elapsed).as_secs_f64().ceil()
            ),
            DrainEvent::Ended {
                matches: 0,
                elapsed,
                ..
            } => write!(
                f,
                "drained in {:.1} s: no match with players left running",
                elapsed.as_secs_f64()
            ),
            DrainEvent::Ended {
                matches,
                players,
                elapsed,
            } => write!(
                f,
                "drain timeout after {:.1} s: stopped {} with {} still playing",
                elapsed.as_secs_f64(),
                count(matches, "match", "matches"),
                count(players, "player", "players")
            ),
        }
    }
}

/// `n` and the noun in the number it takes: "1 match", "3 matches".
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// How long the admin server and Agones wait for a worker to accept a new match: many
/// ticks for a worker that polls once per wake-up; short for a matchmaker.
const REPLY_TIMEOUT: Duration = Duration::from_secs(1);

/// How long the host waits for its workers after a second signal before it returns anyway.
const ABANDON_GRACE: Duration = Duration::from_secs(1);

/// One worker as planned: its CPU, its node, and the startup matches it hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerPlan {
    /// The CPU it is pinned to; `None`: not pinned.
    pub core: Option<usize>,
    /// The NUMA node of that CPU (0 when not pinned).
    pub node: usize,
    /// The startup matches it hosts, ascending.
    pub matches: Vec<MatchId>,
}

/// Where every worker runs and which startup matches it hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// NUMA nodes the workers' CPUs are on.
    pub nodes: usize,
    /// The workers, in CPU order: worker `i` is `workers[i]`.
    pub workers: Vec<WorkerPlan>,
}

/// Places startup matches `1..=config.matches` over one worker per configured CPU (or one
/// unpinned worker) by the NUMA rule of [`numa::Placer`].
pub fn plan(config: &ServerConfig, topology: &Topology) -> Result<Plan, HostError> {
    let ids = (1..=config.matches).map(MatchId);
    let Some(cores) = &config.cores else {
        return Ok(Plan {
            nodes: 1,
            workers: vec![WorkerPlan {
                core: None,
                node: 0,
                matches: ids.collect(),
            }],
        });
    };
    let mut placer = numa::Placer::new(topology, cores)?;
    let mut workers: Vec<WorkerPlan> = cores
        .iter()
        .map(|&c| WorkerPlan {
            core: Some(c),
            node: topology.node_of_cpu(c).unwrap_or(0),
            matches: Vec::new(),
        })
        .collect();
    for id in ids {
        let cpu = placer.place(id.0).cpu;
        // The placer only hands out the CPUs it was given.
        if let Some(w) = workers.iter_mut().find(|w| w.core == Some(cpu)) {
            w.matches.push(id);
        }
    }
    let mut nodes: Vec<usize> = workers.iter().map(|w| w.node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    Ok(Plan {
        nodes: nodes.len(),
        workers,
    })
}

/// A running host. Wait for it with [`Host::wait`].
pub struct Host {
    plan: Plan,
    addrs: Vec<SocketAddr>,
    admin: Option<AdminServer>,
    /// The run-time way into the workers, when the admin server or Agones runs.
    creator: Option<Arc<MatchCreator>>,
    agones: Option<Agones>,
    threads: Vec<JoinHandle<Result<WorkerFigures, WorkerError>>>,
    shutdown: Shutdown,
    run_id: RunId,
    /// How long draining waits for matches with players.
    config_drain_timeout: Duration,
}

impl Host {
    /// Plans the workers, binds their sockets, starts the admin server (with
    /// `config.admin_bind`) and the worker threads. Workers run until `shutdown` drains or
    /// stops them, or the measured window and `linger` after it have passed. `status` is
    /// called by each worker about once a second, on its own thread.
    pub fn start(
        config: &ServerConfig,
        shutdown: Shutdown,
        linger: Option<Duration>,
        status: Arc<dyn Fn(&WorkerStatus) + Send + Sync>,
    ) -> Result<Host, HostError> {
        let topology = match &config.cores {
            Some(_) => Topology::read()?,
            None => Topology::single_node(cpu::allowed_cores()),
        };
        let plan = plan(config, &topology)?;
        let mut sockets = Vec::with_capacity(plan.workers.len());
        for i in 0..plan.workers.len() {
            let mut bind = config.bind;
            if bind.port() != 0 {
                let port =
                    u16::try_from(usize::from(bind.port()) + i).map_err(|_| HostError::Ports {
                        port: config.bind.port(),
                        workers: plan.workers.len(),
                    })?;
                bind.set_port(port);
            }
            let (socket, bound) =
                bind_game_socket(bind).map_err(|source| HostError::Worker { worker: i, source })?;
            // Worker i is reached at the public port plus i, as it binds the port plus i.
            let public = match config.public_addr {
                None => bound,
                Some(mut p) => {
                    let port =
                        u16::try_from(usize::from(p.port()) + i).map_err(|_| HostError::Ports {
                            port: p.port(),
                            workers: plan.workers.len(),
                        })?;
                    p.set_port(port);
                    p
                }
            };
            sockets.push((socket, bound, public));
        }
        let addrs = sockets.iter().map(|s| s.1).collect();

        // Worker links exist when something creates matches at run time or reads the
        // workers' status: the admin server, Agones, or both sharing one creator.
        let mut links = Vec::new();
        let creator = (config.admin_bind.is_some() || config.agones.is_some()).then(|| {
            let mut handles = Vec::new();
            for (_, _, public) in &sockets {
                let (handle, link) = worker_link(*public);
                handles.push(handle);
                links.push(link);
            }
            // Past the ids of the startup matches.
            Arc::new(MatchCreator::new(
                handles,
                config.matches + 1,
                REPLY_TIMEOUT,
            ))
        });
        let defaults = SpecDefaults {
            players: config.players_per_match,
            tick_hz: config.tick_hz,
            game: config.game.clone(),
        };
        let counts = config
            .agones
            .as_ref()
            .map(|_| Arc::new(CallCounts::default()));
        let admin = match (config.admin_bind, &creator) {
            (Some(bind), Some(creator)) => {
                let admin_config = AdminConfig {
                    first_match_id: config.matches + 1,
                    reply_timeout: REPLY_TIMEOUT,
                    token: config.admin_token.clone(),
                    auth_probes: config.admin_auth_probes,
                    defaults: defaults.clone(),
                    agones: counts.clone(),
                    ..AdminConfig::new(bind, config.protocol_id, config.private_key.clone())
                };
                Some(AdminServer::start_shared(
                    admin_config,
                    Arc::clone(creator),
                )?)
            }
            _ => None,
        };
        let agones = match (&config.agones, &creator, counts) {
            (Some(agones), Some(creator), Some(counts)) => {
                let mut agones = agones.clone();
                // Several ticks without a wake-up is a stuck loop, whatever the tick rate.
                let period = Duration::from_secs_f64(1.0 / f64::from(config.tick_hz.max(1)));
                agones.worker_stall = agones.worker_stall.max(period * 4);
                Some(
                    Agones::start(agones, Arc::clone(creator), defaults, counts)
                        .map_err(HostError::Agones)?,
                )
            }
            _ => None,
        };
        let mut links = links.into_iter();

        let start = time::now();
        let run_id = RunId::generate();
        let host_thread = std::thread::current();
        // Read before any worker pins itself: where helper threads may go.
        let helper_cores = cpu::allowed_cores();
        let mut threads = Vec::with_capacity(plan.workers.len());
        for (i, ((socket, _, public), wp)) in sockets.into_iter().zip(&plan.workers).enumerate() {
            let mut setup = WorkerSetup {
                index: i,
                realtime: None,
                helper_cores: helper_cores.clone(),
                matches: wp.matches.clone(),
                start,
                public_addr: public,
                admin: links.next(),
                run_id,
            };
            let (config, shutdown, status) =
                (config.clone(), shutdown.clone(), Arc::clone(&status));
            let (core, node, host_thread) = (wp.core, wp.node, host_thread.clone());
            let rt_priority = config.rt_priority;
            let thread = std::thread::Builder::new()
                .name(format!("tickforge-worker-{i}"))
                .spawn(move || {
                    if let Some(core) = core {
                        // Checked at config time; a failure here only costs precision.
                        let _ = cpu::pin_current_thread(core);
                        // Pinned, first touch already keeps pages local; this covers the
                        // rest where the kernel allows it.
                        let _ = numa::prefer_node_memory(node);
                    }
                    if rt_priority > 0 {
                        match cpu::set_realtime(rt_priority) {
                            Ok(()) => setup.realtime = Some(rt_priority),
                            Err(e) => eprintln!(
                                "tickforge: worker {i}: rt_priority {rt_priority} refused \
                                 ({e}); running at normal priority"
                            ),
                        }
                    }
                    let result = Worker::with_socket(config, socket, setup)
                        .map(|mut w| w.run(&shutdown, linger, &mut |s| status(s)));
                    host_thread.unpark();
                    result
                })
                .map_err(|source| HostError::Spawn { worker: i, source })?;
            threads.push(thread);
        }
        Ok(Host {
            plan,
            addrs,
            admin,
            creator,
            agones,
            threads,
            shutdown,
            run_id,
            config_drain_timeout: config.drain_timeout,
        })
    }

    /// This process's run id, on every result line and action file name it writes.
    pub fn run_id(&self) -> RunId {
        self.run_id
    }

    /// The workers' game addresses, in worker order.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The workers and their startup matches.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Where the admin server listens, when it runs.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(AdminServer::local_addr)
    }

    /// The Agones SDK calls made so far, by outcome, when Agones is on.
    pub fn agones_counts(&self) -> Option<&Arc<CallCounts>> {
        self.agones.as_ref().map(Agones::counts)
    }

    /// Waits for every worker to stop, telling the admin server when draining starts
    /// (`/healthz` answers 503 from then on), and returns the report of all of them.
    pub fn wait(self) -> Result<ServerReport, HostError> {
        self.wait_with(&mut |_| {})
    }

    /// [`Host::wait`], calling `on_drain` as draining starts, about once a second and on
    /// every change while it waits, and when it ends. After a second signal
    /// ([`Shutdown::signal`]) it returns [`HostError::Abandoned`] as soon as the workers
    /// stop, or a second after the signal if they do not.
    pub fn wait_with(
        self,
        on_drain: &mut dyn FnMut(&DrainEvent),
    ) -> Result<ServerReport, HostError> {
        let mut told_admin = false;
        let timeout = self.config_drain_timeout;
        // When draining started, and the counts and time of the last event.
        let mut drain: Option<(std::time::Instant, (usize, usize), std::time::Instant)> = None;
        // When the host first saw the second signal.
        let mut abandoned: Option<std::time::Instant> = None;
        // Workers unpark this thread when they stop; the timeout bounds how late the admin
        // hears of draining and how late a drain line is (a flag set by a signal handler
        // wakes nobody).
        while !self.threads.iter().all(JoinHandle::is_finished) {
            if !told_admin && self.shutdown.is_draining() {
                // The admin server and Agones share the creator: both refuse new matches.
                if let Some(creator) = &self.creator {
                    creator.set_draining(true);
                }
                told_admin = true;
            }
            let now = time::now();
            if self.shutdown.is_draining() && !self.shutdown.is_abandoned() {
                let p = self.shutdown.drain_progress();
                let counts = (p.matches, p.players);
                match &mut drain {
                    // Every worker has stopped its unplayed matches and said what is left
                    // (or one has already stopped).
                    None if p.workers >= self.threads.len()
                        || self.threads.iter().any(JoinHandle::is_finished) =>
                    {
                        on_drain(&DrainEvent::Started {
                            matches: p.matches,
                            players: p.players,
                            timeout,
                        });
                        drain = Some((now, counts, now));
                    }
                    // Nothing left: the workers are stopping, and the end line follows.
                    Some((start, last, at))
                        if p.matches > 0
                            && (counts != *last || now - *at >= Duration::from_secs(1)) =>
                    {
                        on_drain(&DrainEvent::Waiting {
                            matches: p.matches,
                            players: p.players,
                            elapsed: now - *start,
                            timeout,
                        });
                        (*last, *at) = (counts, now);
                    }
                    _ => {}
                }
            }
            if self.shutdown.is_abandoned() {
                let since = *abandoned.get_or_insert(now);
                if now - since >= ABANDON_GRACE {
                    // Counted now, not at the signal: a worker reports once more as it
                    // stops, and what its persister still holds is lost with the process.
                    let p = self.shutdown.drain_progress();
                    return Err(HostError::Abandoned {
                        matches: p.matches,
                        players: p.players,
                        results_unwritten: p.results_pending,
                        unreported: self.threads.len().saturating_sub(p.workers),
                        workers: self.threads.len(),
                    });
                }
            }
            std::thread::park_timeout(Duration::from_millis(20));
        }
        if abandoned.is_some() || self.shutdown.is_abandoned() {
            // Every worker stopped in time: each reported as it stopped, and its persister
            // finished, so what it could not write is known exactly.
            let p = self.shutdown.drain_progress();
            let workers = self.threads.len();
            let mut results_unwritten = 0;
            for thread in self.threads {
                if let Ok(Ok(f)) = thread.join() {
                    results_unwritten += f.report().results_unwritten as usize;
                }
            }
            return Err(HostError::Abandoned {
                matches: p.matches,
                players: p.players,
                results_unwritten,
                unreported: workers.saturating_sub(p.workers),
                workers,
            });
        }
        if self.shutdown.is_draining() {
            let p = self.shutdown.drain_progress();
            let now = time::now();
            let start = match drain {
                Some((start, ..)) => start,
                None => {
                    on_drain(&DrainEvent::Started {
                        matches: p.matches,
                        players: p.players,
                        timeout,
                    });
                    now
                }
            };
            on_drain(&DrainEvent::Ended {
                matches: p.matches,
                players: p.players,
                elapsed: now - start,
            });
        }
        let mut figures: Option<WorkerFigures> = None;
        let mut first_error = None;
        for (worker, thread) in self.threads.into_iter().enumerate() {
            match thread.join() {
                Ok(Ok(f)) => match &mut figures {
                    None => figures = Some(f),
                    Some(all) => all.merge(&f),
                },
                Ok(Err(source)) => {
                    first_error.get_or_insert(HostError::Worker { worker, source });
                }
                Err(_) => {
                    first_error.get_or_insert(HostError::Panicked { worker });
                }
            }
        }
        // The drain is over: Agones may delete the pod now.
        if let Some(agones) = self.agones {
            agones.shutdown();
        }
        if let Some(admin) = self.admin {
            admin.shutdown()?;
        }
        match (first_error, figures) {
            (Some(e), _) => Err(e),
            (None, Some(f)) => Ok(ServerReport {
                memory: Memory::of_this_process(),
                ..f.report()
            }),
            // There is always at least one worker.
            (None, None) => Err(HostError::Panicked { worker: 0 }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(matches: u32, cores: Option<Vec<usize>>) -> ServerConfig {
        crate::testing::register_walk();
        ServerConfig {
            matches,
            cores,
            ..ServerConfig::default()
        }
    }

    fn ids(v: &[u32]) -> Vec<MatchId> {
        v.iter().copied().map(MatchId).collect()
    }

    #[test]
    fn startup_matches_go_round_robin_on_one_node() {
        let topology = Topology::single_node(vec![0, 1, 2, 3]);
        let p = plan(&config(7, Some(vec![1, 3])), &topology).unwrap();
        assert_eq!(p.nodes, 1);
        assert_eq!(p.workers.len(), 2);
        assert_eq!(p.workers[0].core, Some(1));
        assert_eq!(p.workers[0].matches, ids(&[1, 3, 5, 7]));
        assert_eq!(p.workers[1].core, Some(3));
        assert_eq!(p.workers[1].matches, ids(&[2, 4, 6]));
        // What the bots assume: match id goes to worker (id - 1) % workers.
        for (w, wp) in p.workers.iter().enumerate() {
            assert!(wp.matches.iter().all(|m| (m.0 as usize - 1) % 2 == w));
        }
    }

    #[test]
    fn an_abandoned_drain_says_what_it_lost_and_whether_every_worker_reported() {
        let abandoned = |matches, players, results_unwritten, unreported, workers| {
            HostError::Abandoned {
                matches,
                players,
                results_unwritten,
                unreported,
                workers,
            }
            .to_string()
        };
        assert_eq!(
            abandoned(1, 2, 0, 0, 1),
            "a second signal stopped the drain: abandoned 1 match with 2 players still playing"
        );
        assert_eq!(
            abandoned(3, 1, 1, 0, 2),
            "a second signal stopped the drain: abandoned 3 matches with 1 player still \
             playing and 1 result line not yet written"
        );
        assert_eq!(
            abandoned(0, 0, 0, 1, 1),
            "a second signal stopped the drain before 1 of 1 worker reported what it hosted: \
             whatever it was playing is abandoned"
        );
        assert_eq!(
            abandoned(1, 4, 5, 2, 3),
            "a second signal stopped the drain before 2 of 3 workers reported what they \
             hosted: abandoned at least 1 match with 4 players still playing and 5 result \
             lines not yet written"
        );
    }

    #[test]
    fn without_cores_one_unpinned_worker_hosts_every_match() {
        let topology = Topology::single_node(vec![0, 1]);
        let p = plan(&config(3, None), &topology).unwrap();
        assert_eq!(
            p.workers,
            vec![WorkerPlan {
                core: None,
                node: 0,
                matches: ids(&[1, 2, 3])
            }]
        );
    }
}
