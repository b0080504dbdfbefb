//! A warm worker frame allocates nothing in the runtime: ten netcode clients connect to a
//! real worker over loopback UDP, each sends an input a tick over its reliable link and acks
//! the snapshots it reads, and they walk about, asking for verdicts on some of their inputs,
//! through a short match of Walk (the test kit's small game), its end and the start of the
//! next, so that admission of connections, routing, inputs, the game's events to one seat
//! and to all, replication, sealing and the restart all do their work.
//!
//! Measured is [`Worker::frame`], the function [`Worker::run`] calls once a wake-up:
//! `recvmmsg`, the transport and routing, every due match's tick, its packets sealed,
//! `sendmmsg`. What must allocate, a finished match's result and its successor's state, is
//! done by [`Worker::after_frame`] before the next wake-up, and is not measured (the test
//! checks that it happened). The worker's start lies in the past, so every frame runs a
//! tick of the match without waiting for its deadline. The clients' side is not measured.
//!
//! The same test with the reference shooter (its rules, fog of war and lag compensation
//! on the tick path) is `crates/shooter/tests/tick_no_alloc.rs`.
//!
//! A counting global allocator sees every allocation of this test binary; only those made
//! inside the measured call on this thread are counted.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use tickforge_api::{Game, Seat};
use tickforge_proto::msg::{self, ClientMsg, Event, ServerMsg};
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::{Client, ClientEvent, PrivateKey};
use tickforge_proto::reliable::Endpoint;
use tickforge_proto::MAX_PACKET_BYTES;
use tickforge_replication::{Replica, ReplicaConfig, ReplicationConfig};
use tickforge_server::config::GameChoice;
use tickforge_server::{Match, ServerConfig, Worker};
use tickforge_testkit::alloc::{allocations_in, Counting};
use tickforge_testkit::game::{Walk, WalkEvent, WalkInput};
use tickforge_testkit::SimRng;

#[global_allocator]
static GLOBAL: Counting = Counting;

const PLAYERS: u16 = 10;
const PROTOCOL_ID: u64 = 1;
const KEY: [u8; 32] = [1; 32];
/// Ticks a match lasts.
const MATCH_TICKS: u32 = 400;
/// A beat goes to all every this many ticks.
const EVERY: u32 = 16;

/// One client: its socket, its netcode connection, its end of the match's link, and what
/// it rebuilt.
struct Player {
    socket: UdpSocket,
    client: Client,
    /// The seat its welcome named; `None` until the welcome arrives.
    seat: Option<Seat>,
    link: Endpoint,
    replica: Replica,
    seq: u32,
    newest_tick: u32,
    /// Sequence numbers of the inputs it marked for a verdict.
    marked: Vec<u32>,
}

/// What the clients heard, counted over the run.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Heard {
    /// Snapshots read.
    snapshots: u32,
    /// Verdicts, each to the seat that marked the input it names.
    marks: u32,
    /// Beats and match ends, as seat 0 heard them.
    beats: u32,
    overs: u32,
}

/// The worker's one match, as the Walk match it is.
fn walk(worker: &Worker) -> &Match<Walk> {
    worker.matches()[0]
        .as_any()
        .downcast_ref::<Match<Walk>>()
        .expect("the worker hosts walk")
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
                seat: None,
                link: Endpoint::new(msg::link_config(), now),
                replica: Replica::new(replica_config, Walk::schema()),
                seq: 0,
                newest_tick: 0,
                marked: Vec::new(),
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
        players_per_match: PLAYERS,
        protocol_id: PROTOCOL_ID,
        private_key: PrivateKey(KEY),
        // Every client comes from 127.0.0.1.
        requests_per_second_per_ip: 1000,
        // A short match, then the next.
        game: GameChoice {
            name: Some("walk".to_string()),
            table: serde_json::json!({ "ticks": MATCH_TICKS, "every": EVERY })
                .as_object()
                .unwrap()
                .clone(),
        },
        ..ServerConfig::default()
    };
    tickforge_server::games::register::<Walk>();
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
            if p.seat.is_none() {
                continue;
            }
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
            p.seq += 1;
            if c.flags != 0 {
                p.marked.push(p.seq);
            }
            input.clear();
            ClientMsg::Input {
                seq: p.seq,
                view_tick: p.newest_tick,
                view_frac: 0,
                cmd: &c.to_bytes(),
            }
            .encode(&mut input);
            p.link.write_packet(now, Some((p.seq, &input)), &mut packet);
            assert!(p.client.send_payload(now, &packet, &mut datagram).is_some());
            if !rng.chance(LOSS) {
                p.socket.send_to(&datagram, server).unwrap();
            }
        }

        let ticks_before = walk(&worker).game().ticks();
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
        let restarted = walk(&worker).game().ticks() <= ticks_before;
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
                        p.replica = Replica::new(*p.replica.config(), Walk::schema());
                        p.newest_tick = 0;
                    }
                    if p.replica.read(body).is_ok() {
                        p.newest_tick = p.newest_tick.max(tick);
                        heard.snapshots += 1;
                    }
                }
                while p.link.poll_reliable(&mut event) {
                    match Event::decode(&event).unwrap() {
                        Event::Welcome { seat, .. } => p.seat = Some(Seat(seat)),
                        Event::Game(bytes) => match WalkEvent::decode(bytes).unwrap() {
                            WalkEvent::Mark { seq, .. } => {
                                assert!(
                                    p.marked.binary_search(&seq).is_ok(),
                                    "{:?}: a verdict on {seq}, an input it did not mark",
                                    p.seat
                                );
                                heard.marks += 1;
                            }
                            WalkEvent::Beat { .. } if p.seat == Some(Seat(0)) => heard.beats += 1,
                            WalkEvent::Over { .. } if p.seat == Some(Seat(0)) => heard.overs += 1,
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
    // started over: snapshots read, verdicts to their seats, beats and the end heard, and
    // the successor ticking with everyone still seated.
    let marked: usize = players.iter().map(|p| p.marked.len()).sum();
    assert!(
        heard.snapshots > (frame - connected_at) * u32::from(PLAYERS) * 8 / 10
            && heard.marks > 0
            && heard.marks as usize <= marked
            && heard.beats >= (MATCH_TICKS - connected_at) / EVERY
            && heard.overs == 1,
        "{measured} frames measured, joined at {connected_at}, ended at {ended_at}, \
         {marked} inputs marked: {heard:?}"
    );
    assert_eq!(worker.connected(), usize::from(PLAYERS));
    assert_eq!(
        walk(&worker).game().ticks(),
        AFTER_RESTART,
        "the successor ticked every frame after the restart"
    );
}
