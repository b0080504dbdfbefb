//! A warm worker frame hosting the reference shooter allocates nothing on the server: ten
//! netcode clients connect to a real worker over loopback UDP, each sends an input a tick
//! over its reliable link and acks the snapshots it reads, and the players run and fire at each other through the rounds
//! of a short match, its end and the start of the next, so that admission of connections,
//! the rules, fog of war, lag compensation, replication, sealing and the restart all do
//! their work.
//!
//! Measured is [`Worker::frame`](tickforge_server::Worker::frame), the function
//! [`Worker::run`](tickforge_server::Worker::run) calls once a wake-up: `recvmmsg`, the
//! transport and routing, every due match's tick, its packets sealed, `sendmmsg`. The
//! clients, the run and the checks every game's run shares (the successor's world made
//! after the frame, not measured, and checked to have happened) are
//! [`tickforge_server::test_support::loopback`]; here is what the shooter's players do and
//! what they must have heard.
//!
//! The runtime's own version of this test, hosting the test kit's small game, is
//! `crates/server/tests/tick_no_alloc.rs`; this one holds the shooter to it.
//!
//! A counting global allocator sees every allocation of this test binary; only those made
//! inside the measured call on this thread are counted.

use tickforge_api::Seat;
use tickforge_game::rules::Team;
use tickforge_game::{buttons, PlayerSlot, UserCmd, Vec3, World};
use tickforge_server::test_support::loopback::{self, Player, Script};
use tickforge_server::Match;
use tickforge_shooter::{cmd, Shooter, ShooterEvent};
use tickforge_testkit::alloc::Counting;
use tickforge_testkit::SimRng;

#[global_allocator]
static GLOBAL: Counting = Counting;

const PLAYERS: u16 = 10;
/// Ticks the clients show the world behind the newest snapshot, as the bots do (35 ms).
const INTERP_TICKS: u32 = 4;

/// What the clients heard, counted over the run.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Heard {
    /// Shot verdicts, to their shooters, and of them hits.
    shots: u32,
    hits: u32,
    /// Kills, and rounds that ended (phase 2 or 3), as one client heard them.
    kills: u32,
    rounds_ended: u32,
}

/// Player `me`'s command on the arena: out of its spawn room through the doorway, to its
/// lane (north or south of the centre pillar, both teams in each) a few metres short of the
/// centre, then on across to the enemy's side; firing at the chest of the nearest living
/// enemy in sight, a little off either way, while it runs. The dead stand still. (The
/// players read the server's world to play: how they decide is not what is measured.)
fn command(m: &Match<Shooter>, me: PlayerSlot, rng: &mut SimRng) -> UserCmd {
    let world = m.game().world();
    let rules = world.rules();
    if !rules.is_alive(me) {
        return UserCmd::default();
    }
    let at = world.players()[usize::from(me.0)].state.origin;
    // Attackers spawn in the west room, defenders in the east one (maps/arena.map); each
    // room's doorway is at y = 0.
    let home = if World::team_of(me) == Team::Attackers {
        -1.0
    } else {
        1.0
    };
    let lane = if (me.0 / 2).is_multiple_of(2) {
        6.0
    } else {
        -6.0
    };
    let short = Vec3::new(home * 3.0, lane, 0.0);
    let goal = if at.x * home > 21.0 && at.y.abs() > 0.8 {
        Vec3::new(home * 26.0, 0.0, 0.0)
    } else if at.x * home > 21.0 {
        Vec3::new(home * 18.0, 0.0, 0.0)
    } else if at.x * home > 2.0 && (short - at).horizontal_length() > 1.5 {
        short
    } else {
        Vec3::new(-home * 6.0, lane, 0.0)
    };
    let turn = |rad: f32| (rad / std::f32::consts::TAU * 65536.0).round() as i32;
    let to_goal = goal - at;
    let r = rng.next_u64();
    let mut c = UserCmd {
        forward: if to_goal.horizontal_length() > 1.0 {
            127
        } else {
            0
        },
        side: [0, 0, 127, -127][(r % 4) as usize],
        buttons: 0,
        yaw: turn(to_goal.y.atan2(to_goal.x)) as u16,
        pitch: 0,
    };
    let eye = at + Vec3::new(0.0, 0.0, 1.6);
    let in_sight = (0..PLAYERS)
        .map(PlayerSlot)
        .filter(|&s| rules.team(s) != rules.team(me) && rules.is_alive(s))
        .map(|s| world.players()[usize::from(s.0)].state.origin + Vec3::new(0.0, 0.0, 1.2))
        .filter(|&aim| {
            let d = aim - eye;
            let dist = d.length();
            dist > 0.5 && world.map().trace_ray(eye, d * (1.0 / dist), dist).is_none()
        })
        .min_by(|a, b| (*a - eye).length().total_cmp(&(*b - eye).length()));
    if let Some(aim) = in_sight {
        let d = aim - eye;
        let look = d.y.atan2(d.x);
        // The movement keys turn with the view: on towards the goal, looking at the enemy.
        if c.forward != 0 {
            let rel = to_goal.y.atan2(to_goal.x) - look;
            c.forward = (127.0 * rel.cos()).round() as i8;
            c.side = (-127.0 * rel.sin()).round() as i8;
        }
        let off = (r >> 8) as i32 % 300 - 150;
        c.yaw = (turn(look) + off) as u16;
        c.pitch = turn(d.z.atan2(d.horizontal_length())) as i16;
        c.buttons = buttons::FIRE;
    }
    c
}

/// The world's player slot of `seat`.
fn slot_of(seat: Seat) -> PlayerSlot {
    PlayerSlot(u16::from(u8::try_from(seat.0).unwrap()))
}

/// The players run and fire ([`command`]), showing the world [`INTERP_TICKS`] behind the
/// newest snapshot.
impl Script<Shooter> for Heard {
    fn ticks(game: &Shooter) -> u32 {
        game.world().tick().0
    }

    fn command(
        &mut self,
        m: &Match<Shooter>,
        _: usize,
        p: &Player,
        rng: &mut SimRng,
        out: &mut Vec<u8>,
    ) -> (u32, u8) {
        let c = command(m, slot_of(p.seat.unwrap()), rng);
        out.extend_from_slice(&cmd::to_bytes(&c));
        (p.newest_tick.saturating_sub(INTERP_TICKS), 128)
    }

    fn event(&mut self, _: usize, p: &Player, event: &[u8]) {
        let slot = p.seat.map(slot_of);
        match ShooterEvent::decode(event).unwrap() {
            ShooterEvent::ShotResult { victim, .. } => {
                self.shots += 1;
                self.hits += u32::from(victim != tickforge_shooter::NO_SLOT);
            }
            ShooterEvent::Kill { .. } if slot == Some(PlayerSlot(0)) => self.kills += 1,
            ShooterEvent::Round { phase: 2 | 3, .. } if slot == Some(PlayerSlot(0)) => {
                self.rounds_ended += 1
            }
            _ => {}
        }
    }
}

#[test]
fn a_warm_worker_frame_allocates_nothing_through_connect_match_end_and_restart() {
    let mut heard = Heard::default();
    // Two short rounds: deaths, a round's end and the match's, then the next match.
    let table = serde_json::json!({
        "buy_s": 0.1,
        "round_s": 3.0,
        "round_end_s": 0.2,
        "rounds": 2,
    })
    .as_object()
    .unwrap()
    .clone();
    let run = loopback::run::<Shooter, _>(PLAYERS, table, &mut heard);

    // The run was a match at play, joined in the measured frames, played to its end and
    // started over (checked by the run, with no measured frame allocating and the
    // successor ticking with everyone still seated): snapshots read, shots fired and
    // hitting, kills, both rounds' ends.
    let (frame, snapshots, connected_at) = (run.frames, run.snapshots, run.connected_at);
    assert!(
        snapshots > (frame - connected_at) * u32::from(PLAYERS) * 8 / 10
            && heard.hits > 0
            && heard.shots > heard.hits
            && heard.kills > 0
            && heard.rounds_ended >= 2,
        "{} frames measured, joined at {connected_at}, ended at {}, \
         {snapshots} snapshots read: {heard:?}",
        run.measured,
        run.ended_at
    );
}
