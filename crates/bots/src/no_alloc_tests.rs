//! A warm bot's packets allocate nothing: reading a snapshot datagram (netcode, the reliable
//! link and its events, the replica and the interpolation frames, the response-time
//! histograms), showing an aimer's or runner's view of the players at the render tick and
//! judging its shots there, taking a replaying bot's next recorded command, and sending an
//! input, with the network conditioner off and on.
//!
//! Eight bots (wanderers, aimers, runners and bots replaying action files) play a real match ([`tickforge_server::Match`])
//! over loopback sockets, driven as [`run`] drives them: each tick, every bot's
//! [`Bot::flush_out`], [`Bot::receive`] and [`Bot::tick`]. The test serves the match from
//! one socket, on virtual time, and seats two scripted hunters beside the bots so that
//! players die and come back within the window (the bots alone seldom meet). The server's
//! side is not measured here (`crates/shooter/tests/tick_no_alloc.rs` measures it).
//!
//! With shared sockets ([`SharedSockets`], as [`run`] gives bots against a loopback server)
//! each phase group's receive, hand-over, ticks and sends are measured together.
//!
//! A counting global allocator sees every allocation of this crate's test binary; only
//! those made inside the measured closure on the calling thread are counted.

use tickforge_game::rules::RulesConfig;
use tickforge_game::PlayerSlot;
use tickforge_server::Match;
use tickforge_shooter::Shooter;
use tickforge_testkit::alloc::{allocations_in, Counting};

use super::test_host::{step_counting, Counted, Host, BOTS, PLAYERS};
use super::*;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Ticks before the measured window: connecting, the buy phase, and a few seconds of play.
const WARMUP_TICKS: u32 = 640;
/// The measured window: four seconds at least, and until [`Window::is_complete`]; the
/// first round ends about 3.5 s into it.
const MIN_MEASURED_TICKS: u32 = 512;
const MAX_MEASURED_TICKS: u32 = 4096;

/// A run of [`play`], for the caller to check.
struct Played {
    /// Allocations the bots made in the window: `(tick, bot, allocations)` (with shared
    /// sockets, `(tick, phase group, allocations)`).
    allocating: Vec<(u32, usize, u64)>,
    bots: Vec<Bot>,
    scratch: Scratch,
    window: Window,
}

/// Plays the warm-up, then the measured window until it holds what
/// [`Window::is_complete`] asks, with the conditioner adding `rtt` and `jitter`, the bots
/// on [`SharedSockets`] when `shared`.
fn play(rtt: Duration, jitter: Duration, shared: bool) -> Played {
    let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), SocketOptions::default()).unwrap();
    let config = BotsConfig {
        servers: vec![socket.local_addr().unwrap()],
        // Sizes each bot's replica and view: a match of this many players.
        bots_per_match: u32::from(PLAYERS),
        rtt,
        jitter,
        seed: 9,
        ..BotsConfig::default()
    };
    let start = Instant::now();
    let period = Duration::from_nanos(1_000_000_000 / u64::from(config.tick_hz));
    // A short buy phase and 8 s rounds: fights within the warm-up, and a round's end and
    // the next one's start within the window; enough rounds that the match cannot end in
    // the test.
    let rules = RulesConfig {
        buy: Duration::from_millis(500),
        round: Duration::from_secs(8),
        round_end: Duration::from_millis(500),
        rounds: std::num::NonZeroU8::new(24).unwrap(),
        ..RulesConfig::default()
    };
    let mut host = Host::new(&config, socket, start, rules);
    let map = Arc::new(config.map.load());
    // Every behaviour: wanderers and replaying bots keep no view, aimers and runners do.
    // The checked-in recordings loop several times over the window.
    let recordings = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/actions");
    let replaying = BotsConfig {
        replay: Some(Arc::new(
            replay::ReplaySet::load(&recordings, config.map, config.tick_hz).unwrap(),
        )),
        ..config.clone()
    };
    let mut shared = shared.then(|| {
        SharedSockets::open(&config, usize::from(BOTS))
            .unwrap()
            .expect("bots share sockets against a loopback server")
    });
    let roles = [Some(Role::Wander), Some(Role::Aim), Some(Role::Run), None];
    let mut bots: Vec<Bot> = (0..u32::from(BOTS))
        .map(|i| match roles[i as usize % roles.len()] {
            Some(role) => Bot::new(
                &config,
                u64::from(i),
                MatchId(1),
                role,
                &map,
                start,
                shared.as_ref(),
            ),
            None => Bot::new(
                &replaying,
                u64::from(i),
                MatchId(1),
                Role::Wander,
                &map,
                start,
                shared.as_ref(),
            ),
        })
        .map(Result::unwrap)
        .collect();
    let mut counted = Counted::new();
    // The bots count what arrives in the window; it ends when the test stops.
    let window_start = start + period * WARMUP_TICKS;
    let window_end = start + period * (WARMUP_TICKS + MAX_MEASURED_TICKS + 1);
    let measured = (window_start, window_end);
    let mut window = Window::default();
    for t in 0.. {
        let now = start + period * t;
        if t == WARMUP_TICKS {
            window = Window::open(&host.m);
        }
        let in_window = t >= WARMUP_TICKS;
        if in_window {
            window.update(t - WARMUP_TICKS, &host.m, &bots);
            if window.is_complete() {
                break;
            }
            assert!(
                t - WARMUP_TICKS < MAX_MEASURED_TICKS,
                "the match played out as planned: {window:?}"
            );
        }
        let Some(shared) = &mut shared else {
            step_counting(&mut bots, (t, now), measured, &config, &mut counted);
            assert!(host.frame(now).is_none(), "the match goes on");
            continue;
        };
        let clocks = (now, stamped::realtime_now());
        let scratch = &mut counted.scratch;
        for g in 0..PHASE_GROUPS as usize {
            let ((), n) = allocations_in(|| {
                shared.receive(g, &mut bots, clocks, measured, scratch);
                for i in (g..bots.len()).step_by(PHASE_GROUPS as usize) {
                    let bot = &mut bots[i];
                    shared.hand_over(i, bot, clocks, measured, scratch);
                    bot.step(clocks, measured, &config, in_window, scratch);
                    shared.flush_if_full(g, scratch);
                }
                shared.flush(g, scratch);
            });
            if in_window && n > 0 {
                counted.allocating.push((t, g, n));
            }
        }
        assert!(host.frame(now).is_none(), "the match goes on");
    }
    let Counted {
        scratch,
        allocating,
    } = counted;
    Played {
        allocating,
        bots,
        scratch,
        window,
    }
}

/// What the measured window held so far.
#[derive(Debug, Default)]
struct Window {
    ticks: u32,
    /// Players killed, and rounds begun, in the window: every bot is told of each.
    deaths: u32,
    rounds_begun: u8,
    /// Shots the aimers and runners judged and compared with the server's verdict.
    judged: u64,
    /// At the window's start.
    deaths_before: u32,
    round_before: u8,
}

impl Window {
    fn open(m: &Match<Shooter>) -> Window {
        Window {
            deaths_before: deaths(m),
            round_before: m.game().world().rules().round_state().round(),
            ..Window::default()
        }
    }

    fn update(&mut self, ticks: u32, m: &Match<Shooter>, bots: &[Bot]) {
        self.ticks = ticks;
        self.deaths = deaths(m) - self.deaths_before;
        self.rounds_begun = m.game().world().rules().round_state().round() - self.round_before;
        self.judged = bots.iter().map(|b| b.metrics.hitreg.shots).sum();
    }

    /// At least [`MIN_MEASURED_TICKS`], with deaths, a round's end and the next one's
    /// start, and shots judged in it.
    fn is_complete(&self) -> bool {
        self.ticks >= MIN_MEASURED_TICKS
            && self.deaths > 0
            && self.rounds_begun > 0
            && self.judged > 0
    }
}

fn deaths(m: &Match<Shooter>) -> u32 {
    (0..PLAYERS)
        .filter_map(|s| m.game().world().rules().stats(PlayerSlot(s)))
        .map(|s| s.deaths)
        .sum()
}

/// Checks that the bots allocated nothing in the window, and that every bot played all of
/// it: a snapshot read and an input sent every tick (a tenth of the snapshots may still be
/// held by the conditioner), none refused, and the players shown by those that aim.
fn assert_allocated_nothing(played: &Played) {
    let Played {
        allocating,
        bots,
        scratch,
        window,
    } = played;
    assert!(
        allocating.is_empty(),
        "(tick, bot, allocations): {allocating:?}"
    );
    let ticks = u64::from(window.ticks);
    for (i, bot) in bots.iter().enumerate() {
        let metrics = &bot.metrics;
        assert!(
            metrics.snapshots > ticks * 9 / 10
                && metrics.packets_up >= ticks - 1
                && bot.link_errors() == 0
                && bot.bad_snapshots() == 0,
            "bot {i} in {ticks} ticks: {} snapshots, {} up, {} link errors, {} bad snapshots",
            metrics.snapshots,
            metrics.packets_up,
            bot.link_errors(),
            bot.bad_snapshots()
        );
        // Aimers and runners show the players their session interpolates; a wanderer or a
        // replaying bot keeps no view.
        let shows = !matches!(
            bot.behaviour,
            Behaviour::Wander(_) | Behaviour::Replay { .. }
        );
        if let Behaviour::Replay { replayer, started } = &bot.behaviour {
            // It replayed through the window: past the end of its recording, more than once.
            assert!(
                *started && replayer.position().0 >= 2,
                "bot {i}: {:?}",
                replayer.position()
            );
        }
        assert_eq!(bot.aim.is_some(), shows, "bot {i}");
        assert_eq!(
            bot.aim.as_ref().and_then(AimView::view).is_some(),
            shows,
            "bot {i}"
        );
        assert!(bot.session.interp_newest_tick().is_some(), "bot {i}");
    }
    assert!(scratch.hist.response.len() > ticks * u64::from(BOTS) * 9 / 10);
}

#[test]
fn a_warm_bot_s_packets_allocate_nothing() {
    let played = play(Duration::ZERO, Duration::ZERO, false);
    assert_allocated_nothing(&played);
}

#[cfg(target_os = "linux")]
#[test]
fn a_warm_bot_s_packets_allocate_nothing_on_shared_sockets() {
    let played = play(Duration::ZERO, Duration::ZERO, true);
    assert!(played
        .bots
        .iter()
        .all(|b| matches!(b.port, Port::Shared { .. })));
    assert_allocated_nothing(&played);
}

#[test]
fn a_warm_bot_s_packets_allocate_nothing_through_the_conditioner() {
    // 40 ms ± 4 ms each way: datagrams held, reordered, and their buffers reused.
    let played = play(Duration::from_millis(80), Duration::from_millis(4), false);
    assert!(played.bots.iter().all(|b| b.net.is_active()));
    assert_allocated_nothing(&played);
}
