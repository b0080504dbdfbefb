//! A warm worker frame allocates nothing in the runtime: ten netcode clients connect to a
//! real worker over loopback UDP, each sends an input a tick over its reliable link and acks
//! the snapshots it reads, and they walk about, asking for verdicts on some of their inputs,
//! through a short match of Walk (the test kit's small game), its end and the start of the
//! next, so that admission of connections, routing, inputs, the game's events to one seat
//! and to all, replication, sealing, the per-round frame history and the restart all do
//! their work.
//!
//! Measured is [`Worker::frame`](tickforge_server::Worker::frame), the function
//! [`Worker::run`](tickforge_server::Worker::run) calls once a wake-up: `recvmmsg`, the
//! transport and routing, every due match's tick, its packets sealed, `sendmmsg`. The
//! clients, the run and the checks every game's run shares are
//! [`tickforge_server::test_support::loopback`]; here is what the clients of Walk do and
//! what they must have heard.
//!
//! The same test with the reference shooter (its rules, fog of war and lag compensation
//! on the tick path) is `crates/shooter/tests/tick_no_alloc.rs`.
//!
//! A counting global allocator sees every allocation of this test binary; only those made
//! inside the measured call on this thread are counted.

use tickforge_api::Seat;
use tickforge_server::test_support::loopback::{self, Player, Script};
use tickforge_server::Match;
use tickforge_testkit::alloc::Counting;
use tickforge_testkit::game::{Walk, WalkEvent, WalkInput};
use tickforge_testkit::SimRng;

#[global_allocator]
static GLOBAL: Counting = Counting;

const PLAYERS: u16 = 10;
/// Ticks a match lasts.
const MATCH_TICKS: u32 = 400;
/// A beat goes to all every this many ticks.
const EVERY: u32 = 16;

/// What the clients heard, counted over the run, and what they asked for.
#[derive(Debug, Default)]
struct Heard {
    /// Verdicts, each to the seat that marked the input it names.
    marks: u32,
    /// Beats and match ends, as seat 0 heard them.
    beats: u32,
    overs: u32,
    /// Each player's sequence numbers of the inputs it marked for a verdict.
    marked: Vec<Vec<u32>>,
}

/// The clients walk about at random, marking one input in five for a verdict.
impl Script<Walk> for Heard {
    fn ticks(game: &Walk) -> u32 {
        game.ticks()
    }

    fn command(
        &mut self,
        _: &Match<Walk>,
        i: usize,
        p: &Player,
        rng: &mut SimRng,
        cmd: &mut Vec<u8>,
    ) -> (u32, u8) {
        let r = rng.next_u64();
        let c = WalkInput {
            dx: [2, 0, -2][(r % 3) as usize],
            dy: [2, 0, -2][(r / 3 % 3) as usize],
            flags: if r.is_multiple_of(5) {
                WalkInput::MARK
            } else {
                0
            },
        };
        if c.flags != 0 {
            self.marked[i].push(p.seq);
        }
        cmd.extend_from_slice(&c.to_bytes());
        (p.newest_tick, 0)
    }

    fn event(&mut self, i: usize, p: &Player, event: &[u8]) {
        match WalkEvent::decode(event).unwrap() {
            WalkEvent::Mark { seq, .. } => {
                assert!(
                    self.marked[i].binary_search(&seq).is_ok(),
                    "{:?}: a verdict on {seq}, an input it did not mark",
                    p.seat
                );
                self.marks += 1;
            }
            WalkEvent::Beat { .. } if p.seat == Some(Seat(0)) => self.beats += 1,
            WalkEvent::Over { .. } if p.seat == Some(Seat(0)) => self.overs += 1,
            _ => {}
        }
    }
}

#[test]
fn a_warm_worker_frame_allocates_nothing_through_connect_match_end_and_restart() {
    let mut heard = Heard {
        marked: vec![Vec::new(); usize::from(PLAYERS)],
        ..Heard::default()
    };
    // A short match, then the next; rounds of 64 ticks, so rounds end in measured frames.
    let table = serde_json::json!({ "ticks": MATCH_TICKS, "every": EVERY, "round_ticks": 64 })
        .as_object()
        .unwrap()
        .clone();
    let run = loopback::run::<Walk, _>(PLAYERS, table, &mut heard);

    // The run was a match at play, joined in the measured frames, played to its end and
    // started over (checked by the run, with no measured frame allocating and the
    // successor ticking with everyone still seated): snapshots read, verdicts to their
    // seats, beats and the end heard.
    let (frame, snapshots, connected_at) = (run.frames, run.snapshots, run.connected_at);
    let marked: usize = heard.marked.iter().map(Vec::len).sum();
    assert!(
        snapshots > (frame - connected_at) * u32::from(PLAYERS) * 8 / 10
            && heard.marks > 0
            && heard.marks as usize <= marked
            && heard.beats >= (MATCH_TICKS - connected_at) / EVERY
            && heard.overs == 1,
        "{} frames measured, joined at {connected_at}, ended at {}, \
         {marked} inputs marked, {snapshots} snapshots read: {heard:?}",
        run.measured,
        run.ended_at
    );
}
