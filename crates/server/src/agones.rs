//! Agones: the fleet manager's SDK sidecar, spoken to over its REST gateway, so that one
//! process hosting many matches is one Agones GameServer (the high-density pattern).
//!
//! | what | when | SDK call |
//! |---|---|---|
//! | Ready | once every worker's loop has run | `POST /ready` `{}` |
//! | Health | every `agones_health_period_s` (at most half the GameServer's `health.periodSeconds`) while every worker's loop advances (a stuck or dead worker stops the pings, and Agones marks the GameServer Unhealthy); while draining, whatever the heartbeats | `POST /health` `{}` |
//! | the `rooms` counter | when the hosted matches or the admission capacity change: count = matches hosted, capacity = count + the matches the workers would still admit (0 more while draining); a capacity that only drifts is sent at most every 5 s | `PATCH /v1beta1/counters/rooms` `{"capacity": "N"}`, then `{"count": "N"}` |
//! | allocations | an `Allocated` GameServer with a new `agones.dev/last-allocated`: a match is created from its `tickforge.dev/spec` annotation, and the outcome written back | `GET /watch/gameserver`, `PUT /metadata/annotation` |
//! | public address | every GameServer update: its address and ports name each worker in tokens and outcomes | `GET /watch/gameserver`, `GET /gameserver` |
//! | Shutdown | after the drain, as the host stops | `POST /shutdown` `{}` |
//!
//! **Threads.** Two, neither a worker: the driver makes every call in turn, and the
//! watcher reads the watch stream and hands each GameServer to the driver over a channel.
//! Workers share with them only what they share with the admin thread
//! ([`crate::admin::worker_link`]): a heartbeat they bump once per wake-up, a status they
//! publish with `try_lock`, a command channel they poll. No worker ever waits on the SDK.
//!
//! **Failures.** Every call is bounded by a timeout; every failure is counted by call
//! ([`CallCounts`], `tickforge_agones_errors_total{call}` in `/metrics`) and retried with
//! exponential backoff from [`AgonesConfig::retry_first`] up to
//! [`AgonesConfig::retry_max`]: a sidecar that starts late, answers errors or never
//! answers costs retries, never serving or draining. `Shutdown` is tried for at most
//! [`AgonesConfig::shutdown_within`]; the host does not wait longer.
//!
//! See `docs/agones.md` for the annotations a matchmaker sets and reads.

mod client;
pub mod gameserver;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tickforge_telemetry::prometheus::AgonesCounts;

use crate::admin::{MatchCreator, MatchSpec, SpecDefaults};
pub use client::CallError;
use client::{Sidecar, StreamCloser};
use gameserver::{Counter, GameServer};
use tickforge_proto::MatchId;

/// The SDK sidecar's REST port when [`HTTP_PORT_ENV`] is not set (Agones' default).
pub const DEFAULT_HTTP_PORT: u16 = 9358;
/// The environment variable Agones sets to the REST gateway's port.
pub const HTTP_PORT_ENV: &str = "AGONES_SDK_HTTP_PORT";
/// The environment variable Agones sets to the gRPC port; its presence also turns Agones on.
pub const GRPC_PORT_ENV: &str = "AGONES_SDK_GRPC_PORT";
/// The counter whose capacity and count say how many matches this process can take and
/// holds (the GameServer spec must declare it).
pub const ROOMS_COUNTER: &str = "rooms";

/// How often the driver looks at the workers and its timers when no GameServer update
/// wakes it.
const TICK: Duration = Duration::from_millis(50);

/// The measured capacity moves a little every second; a change that is not urgent
/// ([`gameserver::capacity_is_urgent`]) waits this long after the last one.
const CAPACITY_SETTLE: Duration = Duration::from_secs(5);

/// How long a match placed for an allocation counts as hosted before its worker's status
/// shows it (a worker publishes about once a second, and at once after a creation).
const PLACED_UNSEEN: Duration = Duration::from_secs(3);

/// How the Agones threads talk to the sidecar.
#[derive(Clone, Debug, PartialEq)]
pub struct AgonesConfig {
    /// The REST gateway: `127.0.0.1:AGONES_SDK_HTTP_PORT`.
    pub sdk: SocketAddr,
    /// Time between health pings: at most half the GameServer's `health.periodSeconds`.
    pub health_period: Duration,
    /// Bounds each health ping (shorter than [`AgonesConfig::call_timeout`]: a slow ping
    /// must not delay the next).
    pub health_timeout: Duration,
    /// A worker whose loop has not advanced for this long is stuck: health pings stop.
    pub worker_stall: Duration,
    /// Bounds each call as a whole, from connecting to the answer's last byte (the watch
    /// stream: each step up to its head).
    pub call_timeout: Duration,
    /// The first retry after a failure; each further failure doubles it.
    pub retry_first: Duration,
    /// The longest time between retries.
    pub retry_max: Duration,
    /// How long the host gives `Shutdown` (with its retries) at the end.
    pub shutdown_within: Duration,
}

impl AgonesConfig {
    /// The defaults for a sidecar on loopback port `port`.
    pub fn new(port: u16) -> AgonesConfig {
        AgonesConfig {
            sdk: SocketAddr::from(([127, 0, 0, 1], port)),
            // Half Agones' default health period (GameServer spec.health.periodSeconds = 5):
            // one late ping (a call in flight, an allocation) does not miss a period.
            health_period: Duration::from_millis(2500),
            // A worker wakes at least once a tick; a second is many ticks at any sane rate.
            worker_stall: Duration::from_secs(1),
            // The sidecar is on loopback: an answer takes milliseconds, or never comes.
            call_timeout: Duration::from_secs(2),
            health_timeout: Duration::from_secs(1),
            retry_first: Duration::from_millis(100),
            // Short against Agones' health failure threshold (3 × 5 s).
            retry_max: Duration::from_secs(5),
            shutdown_within: Duration::from_secs(3),
        }
    }
}

/// The SDK calls, as `/metrics` labels them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `POST /ready`.
    Ready,
    /// `POST /health`.
    Health,
    /// `PATCH /v1beta1/counters/rooms`.
    Counter,
    /// `PUT /metadata/annotation`.
    Annotation,
    /// `GET /gameserver`.
    GameServer,
    /// `GET /watch/gameserver` (connecting, and each line read).
    Watch,
    /// `POST /shutdown`.
    Shutdown,
}

impl Call {
    /// Every call, in label order.
    pub const ALL: [Call; 7] = [
        Call::Ready,
        Call::Health,
        Call::Counter,
        Call::Annotation,
        Call::GameServer,
        Call::Watch,
        Call::Shutdown,
    ];

    /// The `call` label.
    pub fn name(self) -> &'static str {
        match self {
            Call::Ready => "ready",
            Call::Health => "health",
            Call::Counter => "counter",
            Call::Annotation => "annotation",
            Call::GameServer => "gameserver",
            Call::Watch => "watch",
            Call::Shutdown => "shutdown",
        }
    }
}

/// The SDK calls made, by outcome; shared with the admin thread for `/metrics`.
#[derive(Debug, Default)]
pub struct CallCounts {
    ok: [AtomicU64; 7],
    errors: [AtomicU64; 7],
    ready: AtomicBool,
}

impl CallCounts {
    /// Calls of this kind the sidecar answered with success.
    pub fn succeeded(&self, call: Call) -> u64 {
        self.ok[call as usize].load(Ordering::Relaxed)
    }

    /// Calls of this kind that failed (each was retried).
    pub fn failed(&self, call: Call) -> u64 {
        self.errors[call as usize].load(Ordering::Relaxed)
    }

    /// The sidecar has acknowledged Ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// The counts as `/metrics` renders them.
    pub fn snapshot(&self) -> AgonesCounts {
        let by = |counts: &[AtomicU64; 7]| {
            (Call::ALL.iter())
                .map(|&c| (c.name(), counts[c as usize].load(Ordering::Relaxed)))
                .collect()
        };
        AgonesCounts {
            calls: by(&self.ok),
            errors: by(&self.errors),
            ready: self.is_ready(),
        }
    }

    fn count<T>(&self, call: Call, result: &Result<T, CallError>) {
        let counts = if result.is_ok() {
            &self.ok
        } else {
            &self.errors
        };
        counts[call as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// When to try a call again: at once until it fails, then after a delay that doubles per
/// failure up to a cap.
#[derive(Clone, Copy, Debug)]
struct Backoff {
    first: Duration,
    max: Duration,
    delay: Duration,
    next: Instant,
}

impl Backoff {
    fn new(config: &AgonesConfig, now: Instant) -> Backoff {
        Backoff {
            first: config.retry_first,
            max: config.retry_max.max(config.retry_first),
            delay: config.retry_first,
            next: now,
        }
    }

    fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    fn failed(&mut self, now: Instant) {
        self.next = now + self.delay;
        self.delay = (self.delay * 2).min(self.max);
    }

    /// Success: the next call may go at `next`.
    fn succeeded(&mut self, next: Instant) {
        self.delay = self.first;
        self.next = next;
    }
}

/// What the driver is told.
enum Event {
    /// The watch stream brought a GameServer.
    Update(Box<GameServer>),
    /// The watch stream (re)connected: updates made while it was down were missed.
    Reconnected,
    /// Stop; with a deadline, send Shutdown first, until then. The deadline is also kept in
    /// `Driver::stopping`, for when the queue is full and this event is not sent.
    Stop(Option<Instant>),
}

/// The updates the watcher may have queued for a busy driver; then it waits (and the
/// stream with it) instead of the queue growing.
const EVENT_QUEUE: usize = 16;

/// At most this many annotations wait to be written while the sidecar fails; the oldest
/// go first (each key keeps only its last value anyway).
const MAX_ANNOTATIONS: usize = 64;

/// The running Agones threads. [`Agones::shutdown`] at the end of the host's life; dropping
/// it stops them without calling Shutdown.
pub struct Agones {
    events: SyncSender<Event>,
    /// Set before `stop`: the Shutdown deadline (`Some`) or none (`None` inside).
    stopping: Arc<Mutex<Option<Option<Instant>>>>,
    stop: Arc<AtomicBool>,
    done: Receiver<()>,
    counts: Arc<CallCounts>,
    shutdown_within: Duration,
    closer: Arc<Mutex<Option<StreamCloser>>>,
    watcher: Option<JoinHandle<()>>,
    driver: Option<JoinHandle<()>>,
}

impl Agones {
    /// Starts the driver and the watcher: Ready once every worker of `creator` has run,
    /// then health, the `rooms` counter, and matches for allocations (with `defaults` for
    /// what their spec leaves out). The calls are counted in `counts`.
    pub fn start(
        config: AgonesConfig,
        creator: Arc<MatchCreator>,
        defaults: SpecDefaults,
        counts: Arc<CallCounts>,
    ) -> std::io::Result<Agones> {
        let sidecar = Sidecar {
            addr: config.sdk,
            timeout: config.call_timeout,
        };
        let (events, inbox) = mpsc::sync_channel(EVENT_QUEUE);
        let stopping = Arc::new(Mutex::new(None));
        let (finished, done) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let closer = Arc::new(Mutex::new(None));
        let watcher = Watcher {
            sidecar,
            events: events.clone(),
            stop: Arc::clone(&stop),
            closer: Arc::clone(&closer),
            counts: Arc::clone(&counts),
            backoff: Backoff::new(&config, Instant::now()),
        };
        let watcher = std::thread::Builder::new()
            .name("tickforge-agones-watch".to_string())
            .spawn(move || watcher.run())?;
        let now = Instant::now();
        let workers = creator.workers().len();
        let driver = Driver {
            sidecar,
            creator,
            defaults,
            counts: Arc::clone(&counts),
            inbox,
            stop: Arc::clone(&stop),
            stopping: Arc::clone(&stopping),
            ready: Some(Backoff::new(&config, now)),
            fetched: Some(Backoff::new(&config, now)),
            health: Backoff::new(&config, now),
            counter: Backoff::new(&config, now),
            rooms: None,
            acked: (None, None),
            said_no_rooms: false,
            capacity_set: None,
            annotations: VecDeque::new(),
            annotate: Backoff::new(&config, now),
            beats: vec![(0, now); workers],
            stalled: false,
            said_dead: false,
            seen: None,
            placed: Vec::new(),
            failing: [false; 7],
            config: config.clone(),
        };
        let driver = std::thread::Builder::new()
            .name("tickforge-agones".to_string())
            .spawn(move || {
                driver.run();
                let _ = finished.send(());
            })
            .inspect_err(|_| {
                // The watcher must not outlive a start that failed.
                stop.store(true, Ordering::Release);
                watcher.thread().unpark();
            })?;
        Ok(Agones {
            events,
            stopping,
            stop,
            done,
            counts,
            shutdown_within: config.shutdown_within,
            closer,
            watcher: Some(watcher),
            driver: Some(driver),
        })
    }

    /// The calls made so far, by outcome.
    pub fn counts(&self) -> &Arc<CallCounts> {
        &self.counts
    }

    /// Stops the health pings and the counter, tells the sidecar Shutdown (retrying for at
    /// most [`AgonesConfig::shutdown_within`]) and stops the threads. Returns within about
    /// that bound whatever the sidecar does; a thread still inside a call then is left to
    /// end by its own timeout.
    pub fn shutdown(mut self) {
        // One deadline for the driver's Shutdown and for this wait.
        let deadline = Instant::now() + self.shutdown_within;
        self.stop_threads(Some(deadline));
        let bound = deadline.saturating_duration_since(Instant::now()) + TICK * 4;
        let _ = self.done.recv_timeout(bound);
        if let Some(driver) = self.driver.take() {
            if driver.is_finished() {
                let _ = driver.join();
            }
        }
    }

    fn stop_threads(&mut self, shutdown_by: Option<Instant>) {
        *self.stopping.lock().unwrap_or_else(PoisonError::into_inner) = Some(shutdown_by);
        self.stop.store(true, Ordering::Release);
        // Only a wake-up: when the queue is full the driver finds the stop by the flag.
        let _ = self.events.try_send(Event::Stop(shutdown_by));
        if let Some(closer) = (self.closer.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            closer.close();
        }
        if let Some(watcher) = self.watcher.take() {
            watcher.thread().unpark();
        }
    }
}

impl Drop for Agones {
    fn drop(&mut self) {
        if self.driver.is_some() {
            self.stop_threads(None);
        }
    }
}

/// Reads `GET /watch/gameserver` and hands each GameServer to the driver; reconnects
/// with backoff when the stream fails or ends.
struct Watcher {
    sidecar: Sidecar,
    events: SyncSender<Event>,
    stop: Arc<AtomicBool>,
    closer: Arc<Mutex<Option<StreamCloser>>>,
    counts: Arc<CallCounts>,
    backoff: Backoff,
}

impl Watcher {
    fn run(mut self) {
        while !self.stopped() {
            let opened = self.sidecar.watch("/watch/gameserver");
            self.counts.count(Call::Watch, &opened);
            if let Ok(mut stream) = opened {
                self.backoff.succeeded(Instant::now());
                *self.closer.lock().unwrap_or_else(PoisonError::into_inner) = Some(stream.closer());
                // The stop may have come before the closer was in place.
                if self.stopped() {
                    return;
                }
                // Whatever changed while the stream was down is fetched again.
                if self.events.send(Event::Reconnected).is_err() {
                    return;
                }
                loop {
                    let line = match stream.next_line() {
                        Ok(Some(line)) if line.trim().is_empty() => continue,
                        Ok(Some(line)) => line,
                        Ok(None) | Err(_) => break,
                    };
                    let update = GameServer::from_watch_line(&line).map_err(CallError::Malformed);
                    self.counts.count(Call::Watch, &update);
                    match update {
                        Ok(gs) => {
                            if self.events.send(Event::Update(Box::new(gs))).is_err() {
                                return;
                            }
                        }
                        Err(e) => eprintln!("tickforge agones: watch: {e}"),
                    }
                }
                if self.stopped() {
                    return;
                }
                // The stream ended: a failure like any other, retried.
                self.counts.errors[Call::Watch as usize].fetch_add(1, Ordering::Relaxed);
            }
            let now = Instant::now();
            self.backoff.failed(now);
            // Unparked by a stop.
            while !self.stopped() && Instant::now() < self.backoff.next {
                std::thread::park_timeout(self.backoff.next - Instant::now());
            }
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// Makes every call in turn, each when it is due.
struct Driver {
    sidecar: Sidecar,
    config: AgonesConfig,
    creator: Arc<MatchCreator>,
    defaults: SpecDefaults,
    counts: Arc<CallCounts>,
    inbox: Receiver<Event>,
    stop: Arc<AtomicBool>,
    stopping: Arc<Mutex<Option<Option<Instant>>>>,
    /// Ready, until acknowledged.
    ready: Option<Backoff>,
    /// `GET /gameserver` once Ready and after each watch reconnect, until it succeeds.
    fetched: Option<Backoff>,
    health: Backoff,
    counter: Backoff,
    /// The `rooms` counter as the last GameServer showed it; `None`: no GameServer seen
    /// yet, or it declares no such counter (nothing is sent).
    rooms: Option<Counter>,
    /// The count and capacity the sidecar last accepted or showed.
    acked: (Option<i64>, Option<i64>),
    /// The operator has been told the GameServer declares no `rooms` counter.
    said_no_rooms: bool,
    /// When the capacity was last set.
    capacity_set: Option<Instant>,
    /// Annotations (SDK keys) still to write, in order.
    annotations: VecDeque<(String, String)>,
    annotate: Backoff,
    /// Each worker's last heartbeat, and when it last changed.
    beats: Vec<(u64, Instant)>,
    /// A worker was stuck at the last health time (said once per episode).
    stalled: bool,
    /// A worker's loop ended outside a drain (said once).
    said_dead: bool,
    /// The last allocation handled.
    seen: Option<String>,
    /// Matches placed for allocations that their worker's status does not show yet: id,
    /// worker, when placed. They count as hosted meanwhile.
    placed: Vec<(MatchId, usize, Instant)>,
    /// Each call's last outcome was a failure (a streak is said once, and its end).
    failing: [bool; 7],
}

impl Driver {
    fn run(mut self) {
        loop {
            let event = self.inbox.recv_timeout(TICK);
            if self.stop.load(Ordering::Acquire) {
                // The deadline as the stop set it, whether its event came or not.
                let by = *self.stopping.lock().unwrap_or_else(PoisonError::into_inner);
                let by = match event {
                    Ok(Event::Stop(by)) => by,
                    _ => by.flatten(),
                };
                if let Some(deadline) = by {
                    self.shutdown(deadline);
                }
                return;
            }
            match event {
                Ok(Event::Update(gs)) => self.on_gameserver(&gs),
                Ok(Event::Reconnected) => {
                    if self.fetched.is_none() {
                        self.fetched = Some(Backoff::new(&self.config, Instant::now()));
                    }
                }
                Ok(Event::Stop(_)) => return,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            self.observe_workers(Instant::now());
            let steps: [fn(&mut Driver, Instant); 5] = [
                Driver::ready_step,
                Driver::fetch_step,
                Driver::health_step,
                Driver::counter_step,
                Driver::annotation_step,
            ];
            for step in steps {
                // A call may have taken its whole timeout: a stop is not kept waiting on
                // the rest.
                if self.stop.load(Ordering::Acquire) {
                    break;
                }
                step(&mut self, Instant::now());
            }
        }
    }

    /// Makes one call, counts it, and says when a call starts or stops failing.
    fn call(
        &mut self,
        call: Call,
        method: &str,
        path: &str,
        body: &str,
    ) -> Result<String, CallError> {
        let result = self.sidecar.call(method, path, body);
        self.note(call, &result);
        result
    }

    fn note<T>(&mut self, call: Call, result: &Result<T, CallError>) {
        self.counts.count(call, result);
        let failing = &mut self.failing[call as usize];
        match result {
            Err(e) if !*failing => {
                eprintln!("tickforge agones: {} failed, retrying: {e}", call.name());
                *failing = true;
            }
            Ok(_) if *failing => {
                eprintln!("tickforge agones: {} succeeded again", call.name());
                *failing = false;
            }
            _ => {}
        }
    }

    /// Reads each worker's heartbeat, noting when it last changed. Every tick.
    fn observe_workers(&mut self, now: Instant) {
        for (w, seen) in self.creator.workers().iter().zip(&mut self.beats) {
            let beat = w.heartbeat();
            if beat != seen.0 {
                *seen = (beat, now);
            }
        }
    }

    /// True when every worker's loop advanced within `worker_stall`. With `only_started`,
    /// true when each has run at all. A worker whose loop has ended counts only while the
    /// host drains (it ended because of the drain); at any other time it died. While
    /// draining, heartbeats are not looked at: the end of a drain (results being written)
    /// beats no more, and the drain has its own timeout.
    fn workers_alive(&self, now: Instant, only_started: bool) -> bool {
        let stall = self.config.worker_stall;
        let draining = self.creator.is_draining();
        (self.creator.workers().iter().zip(&self.beats)).all(|(w, &(beat, changed))| {
            if w.is_finished() {
                return draining && !only_started;
            }
            beat > 0 && (only_started || draining || now.saturating_duration_since(changed) < stall)
        })
    }

    /// Some worker's loop has ended outside a drain.
    fn worker_died(&self) -> bool {
        !self.creator.is_draining() && self.creator.workers().iter().any(|w| w.is_finished())
    }

    fn ready_step(&mut self, now: Instant) {
        let Some(backoff) = self.ready else { return };
        if !backoff.due(now) || !self.workers_alive(now, true) {
            return;
        }
        match self.call(Call::Ready, "POST", "/ready", "{}") {
            Ok(_) => {
                self.ready = None;
                self.counts.ready.store(true, Ordering::Relaxed);
                eprintln!("tickforge agones: Ready");
            }
            Err(_) => {
                if let Some(b) = &mut self.ready {
                    b.failed(Instant::now());
                }
            }
        }
    }

    /// `GET /gameserver` after Ready and after every watch reconnect: the stream may be slow
    /// to bring the GameServer, or an allocation may have come while it was down.
    fn fetch_step(&mut self, now: Instant) {
        let Some(backoff) = self.fetched else { return };
        if self.ready.is_some() || !backoff.due(now) {
            return;
        }
        let fetched = self
            .sidecar
            .call("GET", "/gameserver", "")
            .and_then(|text| GameServer::from_json(&text).map_err(CallError::Malformed));
        self.note(Call::GameServer, &fetched);
        match fetched {
            Ok(gs) => {
                self.fetched = None;
                self.on_gameserver(&gs);
            }
            Err(_) => {
                if let Some(b) = &mut self.fetched {
                    b.failed(Instant::now());
                }
            }
        }
    }

    fn health_step(&mut self, now: Instant) {
        if !self.health.due(now) {
            return;
        }
        if !self.workers_alive(now, false) {
            // Before every worker has run there is nothing stuck to report: Agones'
            // initial delay covers the start.
            if !self.said_dead && self.worker_died() {
                eprintln!(
                    "tickforge agones: a worker's loop has ended outside a drain: health \
                     pings stop"
                );
                self.said_dead = true;
            } else if !self.stalled && !self.worker_died() && self.workers_alive(now, true) {
                eprintln!(
                    "tickforge agones: a worker's loop has not advanced for {} ms: health \
                     pings stop until it does",
                    self.config.worker_stall.as_millis()
                );
                self.stalled = true;
            }
            // Looked at again next tick: pings resume as soon as the worker does.
            return;
        }
        if self.stalled {
            eprintln!("tickforge agones: every worker's loop advances again: health pings resume");
            self.stalled = false;
        }
        let period = self.config.health_period;
        let timeout = self.config.health_timeout.min(self.config.call_timeout);
        let result = (self.sidecar).call_within("POST", "/health", "{}", timeout);
        self.note(Call::Health, &result);
        match result {
            Ok(_) => self.health.succeeded(Instant::now() + period),
            Err(_) => {
                let now = Instant::now();
                self.health.failed(now);
                // Never later than the period.
                self.health.next = self.health.next.min(now + period);
            }
        }
    }

    /// What the `rooms` counter should say: count = matches hosted; capacity = count plus
    /// what the workers would still admit (nothing more while draining).
    /// A match the driver placed counts until the worker's status shows it (or for
    /// [`PLACED_UNSEEN`]); a worker whose loop has ended counts for nothing.
    fn wanted_rooms(&mut self, now: Instant) -> Counter {
        let (mut hosted, mut remaining) = (0i64, 0i64);
        let placed = &mut self.placed;
        placed.retain(|p| now.saturating_duration_since(p.2) < PLACED_UNSEEN);
        for (i, w) in self.creator.workers().iter().enumerate() {
            if w.is_finished() {
                placed.retain(|p| p.1 != i);
                continue;
            }
            w.with_status(|s| {
                placed.retain(|p| p.1 != i || !s.matches.iter().any(|m| m.id == p.0));
                let unseen = placed.iter().filter(|p| p.1 == i).count() as i64;
                hosted += s.matches.len() as i64 + unseen;
                remaining += (i64::from(s.remaining) - unseen).max(0);
            });
        }
        if self.creator.is_draining() {
            remaining = 0;
        }
        Counter {
            count: hosted,
            capacity: hosted + remaining,
        }
    }

    fn counter_step(&mut self, now: Instant) {
        if self.rooms.is_none() || !self.counter.due(now) {
            return;
        }
        let want = self.wanted_rooms(now);
        let Some(update) = gameserver::next_counter_update(want, self.acked) else {
            return;
        };
        let settling = (self.capacity_set)
            .is_some_and(|at| now.saturating_duration_since(at) < CAPACITY_SETTLE);
        let mut update = update;
        if matches!(update, gameserver::CounterUpdate::Capacity(_))
            && settling
            && !gameserver::capacity_is_urgent(want, self.acked)
        {
            // The capacity waits; a count that fits the acknowledged capacity does not.
            match self.acked {
                (count, Some(capacity)) if count != Some(want.count) && want.count <= capacity => {
                    update = gameserver::CounterUpdate::Count(want.count);
                }
                _ => return,
            }
        }
        let path = format!("/v1beta1/counters/{ROOMS_COUNTER}");
        match self.call(Call::Counter, "PATCH", &path, &update.body()) {
            Ok(_) => {
                match update {
                    gameserver::CounterUpdate::Count(n) => self.acked.0 = Some(n),
                    gameserver::CounterUpdate::Capacity(n) => {
                        self.acked.1 = Some(n);
                        self.capacity_set = Some(now);
                    }
                }
                self.counter.succeeded(Instant::now());
            }
            Err(_) => self.counter.failed(Instant::now()),
        }
    }

    fn annotation_step(&mut self, _now: Instant) {
        // `Instant::now()`: a success makes the next write due at once.
        while self.annotate.due(Instant::now()) {
            let Some((key, value)) = self.annotations.front() else {
                return;
            };
            let body = serde_json::json!({ "key": key, "value": value }).to_string();
            match self.call(Call::Annotation, "PUT", "/metadata/annotation", &body) {
                Ok(_) => {
                    self.annotations.pop_front();
                    self.annotate.succeeded(Instant::now());
                }
                Err(_) => self.annotate.failed(Instant::now()),
            }
        }
    }

    fn on_gameserver(&mut self, gs: &GameServer) {
        match gs.status.counters.get(ROOMS_COUNTER) {
            Some(&rooms) => {
                self.rooms = Some(rooms);
                // What Agones shows wins over what was sent: an allocation may have
                // changed the count itself.
                self.acked = (Some(rooms.count), Some(rooms.capacity));
            }
            None => {
                if !self.said_no_rooms {
                    eprintln!(
                        "tickforge agones: the GameServer declares no `{ROOMS_COUNTER}` \
                         counter: capacity is not reported (see docs/agones.md)"
                    );
                    self.said_no_rooms = true;
                }
                self.rooms = None;
            }
        }
        let workers = self.creator.workers().len();
        for (i, addr) in gs.public_addrs(workers).into_iter().enumerate() {
            if let Some(addr) = addr {
                if self.creator.public_addr(i) != Some(addr) {
                    eprintln!("tickforge agones: worker {i} is reached at {addr}");
                    self.creator.set_public_addr(i, addr);
                }
            }
        }
        if let Some(allocation) = gs.pending_allocation(self.seen.as_deref()) {
            self.seen = Some(allocation.key.clone());
            self.allocate(allocation);
        }
    }

    /// Creates the match an allocation asks for, and queues its outcome's annotations.
    fn allocate(&mut self, a: gameserver::Allocation) {
        let outcome = match MatchSpec::from_json(a.spec.as_bytes(), &self.defaults) {
            Err(e) => Err(format!("{}: {e}", gameserver::SPEC_ANNOTATION)),
            Ok(spec) => self.creator.create_blocking(&spec).map_err(|r| r.reason),
        };
        let (key, value) = match &outcome {
            Ok(placed) => {
                (self.placed).push((placed.match_id, placed.worker, Instant::now()));
                eprintln!(
                    "tickforge agones: allocation {}: match {} on worker {} at {}",
                    a.name, placed.match_id.0, placed.worker, placed.server
                );
                let value = serde_json::json!({
                    "allocation": a.name,
                    "match_id": placed.match_id.0,
                    "worker": placed.worker,
                    "server": placed.server.to_string(),
                });
                (gameserver::MATCH_KEY, value.to_string())
            }
            Err(reason) => {
                eprintln!("tickforge agones: allocation {} refused: {reason}", a.name);
                let value = serde_json::json!({ "allocation": a.name, "refused": reason });
                (gameserver::REFUSED_KEY, value.to_string())
            }
        };
        // The allocation's own key last of the outcome: a matchmaker waiting on it finds the
        // others written.
        self.annotate_later(key.to_string(), value.clone());
        if let Some(own) = a.outcome_key() {
            self.annotate_later(own, value);
        }
        self.annotate_later(gameserver::HANDLED_KEY.to_string(), a.key);
        // The counter follows as soon as the worker publishes the new match.
        self.counter.succeeded(Instant::now());
    }

    /// Queues an annotation: a value still waiting under the same key is dropped (only the
    /// last one matters), and the queue is kept to [`MAX_ANNOTATIONS`].
    fn annotate_later(&mut self, key: String, value: String) {
        queue_annotation(&mut self.annotations, key, value);
    }

    /// `POST /shutdown`, retried until `deadline` (the one [`Agones::shutdown`] waits for).
    fn shutdown(&mut self, deadline: Instant) {
        let mut backoff = Backoff::new(&self.config, Instant::now());
        loop {
            let now = Instant::now();
            let Some(left) = deadline
                .checked_duration_since(now)
                .filter(|d| !d.is_zero())
            else {
                eprintln!(
                    "tickforge agones: Shutdown not acknowledged within {} ms; exiting anyway",
                    self.config.shutdown_within.as_millis()
                );
                return;
            };
            let timeout = self.config.call_timeout.min(left);
            let result = self.sidecar.call_within("POST", "/shutdown", "{}", timeout);
            self.note(Call::Shutdown, &result);
            if result.is_ok() {
                eprintln!("tickforge agones: Shutdown");
                return;
            }
            backoff.failed(Instant::now());
            let wait = backoff
                .next
                .min(deadline)
                .saturating_duration_since(Instant::now());
            std::thread::sleep(wait);
        }
    }
}

/// Queues `key = value` to be written: a value still waiting under `key` is dropped (only
/// the last one matters), and the queue keeps at most [`MAX_ANNOTATIONS`], the oldest
/// dropped first.
fn queue_annotation(queue: &mut VecDeque<(String, String)>, key: String, value: String) {
    queue.retain(|(k, _)| *k != key);
    if queue.len() >= MAX_ANNOTATIONS {
        queue.pop_front();
    }
    queue.push_back((key, value));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_annotations_keep_the_last_value_per_key_and_stay_bounded() {
        let mut q = VecDeque::new();
        for i in 0..1000 {
            queue_annotation(&mut q, "tickforge-match".to_string(), i.to_string());
            queue_annotation(&mut q, format!("tickforge-match-{i}"), i.to_string());
            queue_annotation(&mut q, "tickforge-handled".to_string(), i.to_string());
        }
        assert_eq!(q.len(), MAX_ANNOTATIONS);
        // The newest outcome's keys are all there, its own key before `handled`.
        let keys: Vec<&str> = q.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys[keys.len() - 3..],
            [
                "tickforge-match",
                "tickforge-match-999",
                "tickforge-handled"
            ]
        );
        assert_eq!(q.iter().filter(|(k, _)| k == "tickforge-match").count(), 1);
        assert_eq!(q.back().unwrap().1, "999");
    }
}
