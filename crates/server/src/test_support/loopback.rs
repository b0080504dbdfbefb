//! A warm worker frame measured through a whole match: netcode clients connect to a real
//! [`Worker`] over loopback UDP, each sends an input a tick over its reliable link and acks
//! the snapshots it reads, through a short match of game `G`, its end and the start of the
//! next; every [`Worker::frame`] after the warm-up has its allocations counted
//! ([`run`]). What the clients send and make of the game's events is the game's
//! ([`Script`]).
//!
//! Measured is [`Worker::frame`] (as [`Worker::frame_at`], on the clients' virtual time),
//! the function [`Worker::run`] calls once a wake-up, and
//! [`Worker::after_frame`] in every frame but the one the match ends in: what must
//! allocate, a finished match's result and its successor's state, is done there, after
//! the send ([`run`] checks that it happened); the rest of it (recording the frames, their
//! rounds' history) must not. The worker's start lies in the past, so every frame runs a tick of the
//! match without waiting for its deadline. The clients' side is not measured.
//!
//! The test binary must count allocations: `#[global_allocator] static GLOBAL: Counting`
//! ([`tickforge_testkit::alloc::Counting`]); only those made inside the measured call on
//! this thread are counted.

use std::fmt;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use tickforge_api::{ConfigTable, Game, Seat};
use tickforge_proto::msg::{self, ClientMsg, Event, ServerMsg};
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::{Client, ClientEvent, PrivateKey};
use tickforge_proto::reliable::Endpoint;
use tickforge_proto::MAX_PACKET_BYTES;
use tickforge_replication::{Replica, ReplicaConfig, ReplicationConfig};
use tickforge_testkit::alloc::allocations_in;
use tickforge_testkit::SimRng;

use crate::config::GameChoice;
use crate::{Match, ServerConfig, Worker};

const PROTOCOL_ID: u64 = 1;
const KEY: [u8; 32] = [1; 32];
/// Frames before the measured ones: the first receive and send, with nobody connected.
pub const WARM_UP: u32 = 8;
/// Frames the successor match runs after the restart, measured.
pub const AFTER_RESTART: u32 = 256;
/// Frames the run may take at most.
pub const MAX_FRAMES: u32 = 4000;
/// Inputs the clients lose on the way, and snapshots: reliable events are sent again and
/// snapshots delta against older baselines.
pub const LOSS: f64 = 0.05;

/// One client: its socket, its netcode connection, its end of the match's link, and what
/// it rebuilt.
pub struct Player {
    pub socket: UdpSocket,
    pub client: Client,
    /// The seat its welcome named; `None` until the welcome arrives.
    pub seat: Option<Seat>,
    pub link: Endpoint,
    pub replica: Replica,
    /// The sequence number of its newest input.
    pub seq: u32,
    /// The newest snapshot tick it read (of the match's current run).
    pub newest_tick: u32,
}

/// What the clients of a [`run`] do that is their game's: the commands they send and what
/// they make of the game's events. `Debug` shows what they heard when the run fails.
pub trait Script<G: Game>: fmt::Debug {
    /// The game's own count of the ticks its match has run: it falls back when the match
    /// starts over, and counts every tick of the successor.
    fn ticks(game: &G) -> u32;
    /// Writes the command of player `i`, seated, for this tick into `cmd` (empty); returns
    /// the view it was made at, its tick and fraction ([`ClientMsg::Input`]). `p.seq` is
    /// already the input's sequence number. `m` is the worker's match, for a player that
    /// reads the server's world to play (how it decides is not what is measured).
    fn command(
        &mut self,
        m: &Match<G>,
        i: usize,
        p: &Player,
        rng: &mut SimRng,
        cmd: &mut Vec<u8>,
    ) -> (u32, u8);
    /// One of the game's events, as player `i` received it.
    fn event(&mut self, i: usize, p: &Player, event: &[u8]);
}

/// How a [`run`] went: frames run, snapshots read, frames measured, and the frames in
/// which everyone had connected and in which the match ended (and started over).
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    pub frames: u32,
    /// Snapshots the clients read.
    pub snapshots: u32,
    pub measured: u32,
    pub connected_at: u32,
    pub ended_at: u32,
}

/// The worker's one match, as the match of `G` it is.
pub fn hosted<G: Game>(worker: &Worker) -> &Match<G> {
    worker.matches()[0]
        .as_any()
        .downcast_ref::<Match<G>>()
        .unwrap_or_else(|| panic!("the worker hosts {}", G::NAME))
}

/// `players` clients holding tokens for `server`, not yet connected, on sockets of their
/// own, their replicas reading `G`'s schema.
pub fn players<G: Game>(server: SocketAddr, now: Instant, players: u16) -> Vec<Player> {
    let params = TokenParams {
        protocol_id: PROTOCOL_ID,
        create_timestamp: tickforge_io::entropy::unix_now(),
        // The worker's clock started ten minutes ago (its start lies in the past).
        expire_seconds: 3600,
        timeout_seconds: 10,
        server_addresses: vec![server],
    };
    let replica_config = ReplicaConfig::matching(&ReplicationConfig {
        max_entities: usize::from(players),
        max_connections: usize::from(players),
        ..ReplicationConfig::default()
    });
    (0..players)
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
                replica: Replica::new(replica_config, G::schema()),
                seq: 0,
                newest_tick: 0,
            }
        })
        .collect()
}

/// Runs a worker hosting one match of `G` of `players` seats and the game settings
/// `table` (a short match, so that it ends and starts over within the run), with
/// `players` clients scripted by `script`, from the warm-up to [`AFTER_RESTART`] frames
/// past the match's end, counting the allocations of every frame after the warm-up.
///
/// Checks, besides what is the game's: every frame ticks the match; the match ends once,
/// after everyone joined in the measured frames; no measured frame allocated; everyone is
/// still connected at the end, and the successor ticked every frame after the restart.
pub fn run<G: Game, S: Script<G>>(players: u16, table: ConfigTable, script: &mut S) -> Outcome {
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        matches: 1,
        players_per_match: players,
        protocol_id: PROTOCOL_ID,
        private_key: PrivateKey(KEY),
        // Every client comes from 127.0.0.1.
        requests_per_second_per_ip: 1000,
        game: GameChoice {
            name: Some(G::NAME.to_string()),
            table,
        },
        ..ServerConfig::default()
    };
    crate::games::register::<G>();
    // Every deadline has passed: each frame runs one tick, as a late worker catches up.
    let mut worker = Worker::lone(config, Instant::now() - Duration::from_secs(600)).unwrap();
    let server = worker.local_addr();
    // The clients live on virtual time, a tick a frame, so that their handshake and their
    // pace take as many frames on any machine, and the worker's ticks on the same time
    // (`Worker::frame_at`): a lost reliable message is sent again as many frames later on
    // a fast build as on a slow one (on the real clock an optimised build's frames outran
    // the resend, and the match's end went unheard).
    let clients_t0 = Instant::now();
    let players_n = players;
    let mut players = self::players::<G>(server, clients_t0, players_n);

    let mut rng = SimRng::new(5);
    let (mut cmd, mut input, mut packet, mut event, mut datagram) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::with_capacity(MAX_PACKET_BYTES),
    );
    let mut down = vec![0u8; 2048];
    let mut snapshots = 0;
    let mut allocating = Vec::new();
    let mut connected_at = None;
    let mut ended_at = None;
    let mut measured = 0;
    let mut frame = 0;
    while ended_at.is_none_or(|end| frame <= end + AFTER_RESTART) {
        assert!(
            frame < MAX_FRAMES,
            "the match played out as planned: {snapshots} snapshots read, {script:?}"
        );
        let now = clients_t0 + worker.matches()[0].period() * frame;
        // The clients, once the warm-up is over: the handshake, then one input a tick through
        // the link that acks the snapshots read.
        for (i, p) in players.iter_mut().enumerate().filter(|_| frame >= WARM_UP) {
            assert!(p.client.handle_timeout(now).is_none(), "a client timed out");
            while p.client.poll_transmit(now, &mut datagram).is_some() {
                p.socket.send_to(&datagram, server).unwrap();
            }
            if p.seat.is_none() {
                continue;
            }
            p.seq += 1;
            cmd.clear();
            let (view_tick, view_frac) =
                script.command(hosted::<G>(&worker), i, p, &mut rng, &mut cmd);
            input.clear();
            ClientMsg::Input {
                seq: p.seq,
                view_tick,
                view_frac,
                cmd: &cmd,
            }
            .encode(&mut input);
            p.link.write_packet(now, Some((p.seq, &input)), &mut packet);
            assert!(p.client.send_payload(now, &packet, &mut datagram).is_some());
            if !rng.chance(LOSS) {
                p.socket.send_to(&datagram, server).unwrap();
            }
        }

        let ticks_before = S::ticks(hosted::<G>(&worker).game());
        let (done, n) = allocations_in(|| worker.frame_at(now));
        if frame >= WARM_UP {
            measured += 1;
            if n > 0 {
                allocating.push((frame, n));
            }
        }
        assert_eq!(done.ticks, 1, "frame {frame}: the match ticks");
        let ((), after) = allocations_in(|| worker.after_frame(&done, false));
        // The tick ran, and the match ended in it and started over.
        let restarted = S::ticks(hosted::<G>(&worker).game()) <= ticks_before;
        // Recording the frame (its round's history, a round that ends, budgets) allocates
        // nothing either; only a match's end does (its result, its new world).
        if frame >= WARM_UP && !restarted && after > 0 {
            allocating.push((frame, after));
        }
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
        for (i, p) in players.iter_mut().enumerate() {
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
                        p.replica = Replica::new(*p.replica.config(), G::schema());
                        p.newest_tick = 0;
                    }
                    if p.replica.read(body).is_ok() {
                        p.newest_tick = p.newest_tick.max(tick);
                        snapshots += 1;
                    }
                }
                while p.link.poll_reliable(&mut event) {
                    match Event::decode(&event).unwrap() {
                        Event::Welcome { seat, .. } => p.seat = Some(Seat(seat)),
                        e @ (Event::Game(_) | Event::Games(_)) => {
                            for bytes in e.game_events() {
                                script.event(i, p, bytes);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        if connected_at.is_none() && worker.connected() == usize::from(players_n) {
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
    // Everyone still seated, and the successor ticking every frame after the restart.
    assert_eq!(worker.connected(), usize::from(players_n));
    assert_eq!(
        S::ticks(hosted::<G>(&worker).game()),
        AFTER_RESTART,
        "the successor ticked every frame after the restart"
    );
    Outcome {
        frames: frame,
        snapshots,
        measured,
        connected_at,
        ended_at,
    }
}
