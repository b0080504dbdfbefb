//! A warm worker frame hosting the reference shooter allocates nothing on the server: ten
//! netcode clients connect to a real worker over loopback UDP, each sends an input a tick
//! over its reliable link and acks the snapshots it reads, and the players run and fire at each other through the rounds
//! of a short match, its end and the start of the next, so that admission of connections,
//! the rules, fog of war, lag compensation, replication, sealing and the restart all do
//! their work.
//!
//! Measured is [`Worker::frame`], the function [`Worker::run`] calls once a wake-up:
//! `recvmmsg`, the transport and routing, every due match's tick, its packets sealed,
//! `sendmmsg`. What must allocate, a finished match's result and its
//! successor's world, is done by [`Worker::after_frame`] before the next wake-up, and is
//! not measured (the test checks that it happened). The worker's start lies in the past, so
//! every frame runs a tick of the match without waiting for its deadline. The clients'
//! side is not measured.
//!
//! The runtime's own version of this test, hosting the test kit's small game, is
//! `crates/server/tests/tick_no_alloc.rs`; this one holds the shooter to it.
//!
//! A counting global allocator sees every allocation of this test binary; only those made
//! inside the measured call on this thread are counted.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use tickforge_game::rules::Team;
use tickforge_game::{buttons, PlayerSlot, UserCmd, Vec3, World};
use tickforge_proto::msg::{self, ClientMsg, Event, ServerMsg};
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::{Client, ClientEvent, PrivateKey};
use tickforge_proto::reliable::Endpoint;
use tickforge_proto::MAX_PACKET_BYTES;
use tickforge_replication::{Replica, ReplicaConfig, ReplicationConfig};
use tickforge_server::config::GameChoice;
use tickforge_server::{Match, ServerConfig, Worker};
use tickforge_shooter::{cmd, Shooter, ShooterEvent};
use tickforge_testkit::alloc::{allocations_in, Counting};
use tickforge_testkit::SimRng;

#[global_allocator]
static GLOBAL: Counting = Counting;

const PLAYERS: u8 = 10;
const PROTOCOL_ID: u64 = 1;
const KEY: [u8; 32] = [1; 32];
/// Ticks the clients show the world behind the newest snapshot, as the bots do (35 ms).
const INTERP_TICKS: u32 = 4;

/// One client: its socket, its netcode connection, its end of the match's link, and what
/// it rebuilt.
struct Player {
    socket: UdpSocket,
    client: Client,
    /// The slot its welcome named; `None` until the welcome arrives.
    slot: Option<PlayerSlot>,
    link: Endpoint,
    replica: Replica,
    seq: u32,
    newest_tick: u32,
}

/// What the clients heard, counted over the run.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Heard {
    /// Snapshots read.
    snapshots: u32,
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

/// The worker's one match, as the shooter's match it is.
fn shooter(worker: &Worker) -> &Match<Shooter> {
    worker.matches()[0]
        .as_any()
        .downcast_ref::<Match<Shooter>>()
        .expect("the worker hosts the shooter")
}

/// Ten clients holding tokens for `server`, not yet connected, on sockets of their own.
fn players(server: SocketAddr, now: Instant) -> Vec<Player> {
    let params = TokenParams {
        protocol_id: PROTOCOL_ID,
        create_timestamp: tickforge_io::entropy::unix_now(),
        // The worker's clock started ten minutes ago (its start lies in the past).
        expire_seconds: 3600,
        timeout_seconds: 10,
        server_addresses: vec![server],
    };
    let replica_config = ReplicaConfig::matching(&ReplicationConfig {
        max_entities: usize::from(PLAYERS),
        max_connections: usize::from(PLAYERS),
        ..ReplicationConfig::default()
    });
    (0..PLAYERS)
        .map(|i| {
            let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
            socket.set_nonblocking(true).unwrap();
            // User data not in tickforge's format: any free seat of any match.
            let token = ConnectToken::mint(&params, u64::from(i), &[0; 256], &KEY, &[3; 88]);
            Player {
                socket,
                client: Client::new(token, now),
                slot: None,
                link: Endpoint::new(msg::link_config(), now),
                replica: Replica::new(replica_config, tickforge_shooter::schema()),
                seq: 0,
                newest_tick: 0,
            }
        })
        .collect()
}

#[test]
fn a_warm_worker_frame_allocates_nothing_through_connect_match_end_and_restart() {
    /// Frames before the measured ones: the first receive and send, with nobody connected.
    const WARM_UP: u32 = 8;
    /// Frames the successor match runs after the restart, measured.
    const AFTER_RESTART: u32 = 256;
    const MAX_FRAMES: u32 = 4000;
    /// Inputs the clients lose on the way, and snapshots: reliable events are sent again
    /// and snapshots delta against older baselines.
    const LOSS: f64 = 0.05;
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        matches: 1,
        players_per_match: u16::from(PLAYERS),
        protocol_id: PROTOCOL_ID,
        private_key: PrivateKey(KEY),
        // Every client comes from 127.0.0.1.
        requests_per_second_per_ip: 1000,
        // Two short rounds: deaths, a round's end and the match's, then the next match.
        game: GameChoice {
            name: Some("shooter".to_string()),
            table: serde_json::json!({
                "buy_s": 0.1,
                "round_s": 3.0,
                "round_end_s": 0.2,
                "rounds": 2,
            })
            .as_object()
            .unwrap()
            .clone(),
        },
        ..ServerConfig::default()
    };
    tickforge_server::games::register::<Shooter>();
    // Every deadline has passed: each frame runs one tick, as a late worker catches up.
    let mut worker = Worker::lone(config, Instant::now() - Duration::from_secs(600)).unwrap();
    let server = worker.local_addr();
    // The clients live on virtual time, a tick a frame, so that their handshake and their
    // pace take as many frames on any machine; the worker keeps the real clock.
    let clients_t0 = Instant::now();
    let mut players = players(server, clients_t0);

    let mut rng = SimRng::new(5);
    let (mut input, mut packet, mut event, mut datagram) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::with_capacity(MAX_PACKET_BYTES),
    );
    let mut down = vec![0u8; 2048];
    let mut heard = Heard::default();
    let mut allocating = Vec::new();
    let mut connected_at = None;
    let mut ended_at = None;
    let mut measured = 0;
    let mut frame = 0;
    while ended_at.is_none_or(|end| frame <= end + AFTER_RESTART) {
        assert!(
            frame < MAX_FRAMES,
            "the match played out as planned: {heard:?}"
        );
        let now = clients_t0 + worker.matches()[0].period() * frame;
        // The clients, once the warm-up is over: the handshake, then one input a tick through
        // the link that acks the snapshots read.
        for p in players.iter_mut().filter(|_| frame >= WARM_UP) {
            assert!(p.client.handle_timeout(now).is_none(), "a client timed out");
            while p.client.poll_transmit(now, &mut datagram).is_some() {
                p.socket.send_to(&datagram, server).unwrap();
            }
            let Some(slot) = p.slot else { continue };
            let c = command(shooter(&worker), slot, &mut rng);
            p.seq += 1;
            input.clear();
            ClientMsg::Input {
                seq: p.seq,
                view_tick: p.newest_tick.saturating_sub(INTERP_TICKS),
                view_frac: 128,
                cmd: &cmd::to_bytes(&c),
            }
            .encode(&mut input);
            p.link.write_packet(now, Some((p.seq, &input)), &mut packet);
            assert!(p.client.send_payload(now, &packet, &mut datagram).is_some());
            if !rng.chance(LOSS) {
                p.socket.send_to(&datagram, server).unwrap();
            }
        }

        let tick_before = shooter(&worker).game().world().tick();
        let (done, n) = allocations_in(|| worker.frame(Instant::now()));
        if frame >= WARM_UP {
            measured += 1;
            if n > 0 {
                allocating.push((frame, n));
            }
        }
        assert_eq!(done.ticks, 1, "frame {frame}: the match ticks");
        worker.after_frame(&done, false);
        // The tick ran, and the match ended in it and started over.
        let restarted = shooter(&worker).game().world().tick() <= tick_before;
        if restarted {
            assert!(
                ended_at.is_none(),
                "frame {frame}: one match end in the run"
            );
            assert!(
                connected_at.is_some(),
                "frame {frame}: the match ended before everyone joined"
            );
            ended_at = Some(frame);
        }

        // The clients read their snapshots and events.
        for p in &mut players {
            loop {
                let (len, from) = match p.socket.recv_from(&mut down) {
                    Ok(got) => got,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                };
                if rng.chance(LOSS) {
                    continue;
                }
                let Some(ClientEvent::Payload(payload)) =
                    p.client.handle_datagram(now, from, &mut down[..len])
                else {
                    continue;
                };
                if let Some((_, body)) = p.link.read_packet(now, payload).unwrap() {
                    let ServerMsg::Snapshot { tick, body, .. } = ServerMsg::decode(body).unwrap();
                    if tick + 64 < p.newest_tick {
                        // The match started over: snapshot ticks count from 0 again.
                        p.replica = Replica::new(*p.replica.config(), tickforge_shooter::schema());
                        p.newest_tick = 0;
                    }
                    if p.replica.read(body).is_ok() {
                        p.newest_tick = p.newest_tick.max(tick);
                        heard.snapshots += 1;
                    }
                }
                while p.link.poll_reliable(&mut event) {
                    match Event::decode(&event).unwrap() {
                        Event::Welcome { seat, .. } => {
                            p.slot = Some(PlayerSlot(u8::try_from(seat).unwrap()))
                        }
                        Event::Game(bytes) => match ShooterEvent::decode(bytes).unwrap() {
                            ShooterEvent::ShotResult { victim, .. } => {
                                heard.shots += 1;
                                heard.hits += u32::from(victim != tickforge_shooter::NONE);
                            }
                            ShooterEvent::Kill { .. } if p.slot == Some(PlayerSlot(0)) => {
                                heard.kills += 1
                            }
                            ShooterEvent::Round { phase: 2 | 3, .. }
                                if p.slot == Some(PlayerSlot(0)) =>
                            {
                                heard.rounds_ended += 1
                            }
                            _ => {}
                        },
                        _ => {}
                    }
                }
            }
        }
        if connected_at.is_none() && worker.connected() == usize::from(PLAYERS) {
            assert!(
                frame > WARM_UP,
                "the clients connect in the measured frames"
            );
            connected_at = Some(frame);
        }
        frame += 1;
    }

    assert!(
        allocating.is_empty(),
        "frames that allocated (frame, allocations): {allocating:?}"
    );
    let (connected_at, ended_at) = (connected_at.unwrap(), ended_at.unwrap());
    // The run was a match at play, joined in the measured frames, played to its end and
    // started over: snapshots read, shots fired and hitting, kills, both rounds' ends, and
    // the successor ticking with everyone still seated.
    assert!(
        heard.snapshots > (frame - connected_at) * u32::from(PLAYERS) * 8 / 10
            && heard.hits > 0
            && heard.shots > heard.hits
            && heard.kills > 0
            && heard.rounds_ended >= 2,
        "{measured} frames measured, joined at {connected_at}, ended at {ended_at}: {heard:?}"
    );
    assert_eq!(worker.connected(), usize::from(PLAYERS));
    assert_eq!(
        shooter(&worker).game().world().tick().0,
        AFTER_RESTART,
        "the successor ticked every frame after the restart"
    );
}
