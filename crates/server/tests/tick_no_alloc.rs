//! A warm match tick allocates nothing on the server: ten netcode clients, each sending an
//! input a tick over its reliable link and acking the snapshots it reads, players running
//! and firing at each other through rounds with kills, so that the rules, fog of war, lag
//! compensation and replication all do their work.
//!
//! Measured is what the worker's frame does for the match (`worker/mod.rs`,
//! `worker/routing.rs`): the transport opens each client datagram, the match takes its
//! packet, the transport's timeouts run and its control packets are queued, then the tick
//! runs and seals a snapshot per client. The clients' side is not measured.
//!
//! No sockets: datagrams pass by hand, on virtual time. A counting global allocator sees
//! every allocation of this test binary; only those made inside the measured closure on
//! this thread are counted.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tickforge_game::rules::{Phase as RoundPhase, RulesConfig, Team};
use tickforge_game::{buttons, PlayerSlot, UserCmd, Vec3, World, WorldConfig};
use tickforge_io::udp::SendBatch;
use tickforge_proto::msg::{self, ClientMsg, Event, ServerMsg};
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::{self, Client, ClientEvent, ServerEvent};
use tickforge_proto::reliable::Endpoint;
use tickforge_proto::{ClientIndex, MatchId, MAX_PACKET_BYTES};
use tickforge_replication::{Replica, ReplicaConfig, ReplicationConfig};
use tickforge_server::Match;
use tickforge_shooter::cmd;
use tickforge_telemetry::Scopes;
use tickforge_testkit::alloc::{allocations_in, Counting};
use tickforge_testkit::SimRng;

#[global_allocator]
static GLOBAL: Counting = Counting;

const PLAYERS: u8 = 10;
const PROTOCOL_ID: u64 = 1;
const KEY: [u8; 32] = [1; 32];
/// Ticks the clients show the world behind the newest snapshot, as the bots do (35 ms).
const INTERP_TICKS: u32 = 4;

/// One client: its netcode connection, its end of the match's link, and what it rebuilt.
struct Player {
    addr: SocketAddr,
    slot: PlayerSlot,
    client: Client,
    link: Endpoint,
    replica: Replica,
    seq: u32,
    newest_tick: u32,
    /// This tick's sealed input; the server opens it in place. `None`: lost on the way.
    datagram: Option<Vec<u8>>,
}

/// What the clients heard, counted over the run.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Heard {
    /// Snapshots read.
    snapshots: u32,
    /// Shot verdicts, to their shooters, and of them hits.
    shots: u32,
    hits: u32,
    /// Kills and round changes, as one client heard them (every client is told each).
    kills: u32,
    round_events: u32,
}

impl Heard {
    fn since(self, before: Heard) -> Heard {
        Heard {
            snapshots: self.snapshots - before.snapshots,
            shots: self.shots - before.shots,
            hits: self.hits - before.hits,
            kills: self.kills - before.kills,
            round_events: self.round_events - before.round_events,
        }
    }
}

fn server_addr() -> SocketAddr {
    "127.0.0.1:40000".parse().unwrap()
}

/// A netcode server and `n` clients that completed the handshake at `now`, each with its
/// address and the client index the server gave it.
fn connected_clients(
    now: Instant,
    n: u16,
) -> (netcode::Server, Vec<(Client, SocketAddr, ClientIndex)>) {
    let mut server = netcode::Server::new(
        netcode::ServerConfig {
            protocol_id: PROTOCOL_ID,
            private_key: KEY,
            public_addresses: vec![server_addr()],
            max_clients: n,
            requests_per_second_per_ip: 10,
        },
        now,
        1_700_000_000,
        [2; 32],
    );
    let params = TokenParams {
        protocol_id: PROTOCOL_ID,
        create_timestamp: 1_700_000_000,
        expire_seconds: 30,
        timeout_seconds: 5,
        server_addresses: vec![server_addr()],
    };
    let mut buf = Vec::new();
    let clients = (0..n)
        .map(|i| {
            let addr: SocketAddr = format!("127.0.0.{}:50000", i + 1).parse().unwrap();
            let token = ConnectToken::mint(&params, u64::from(i), &[0; 256], &KEY, &[3; 88]);
            let mut client = Client::new(token, now);
            let mut index = None;
            for _ in 0..4 {
                while client.poll_transmit(now, &mut buf).is_some() {
                    if let Some(ServerEvent::Connected { client, .. }) =
                        server.handle_datagram(now, addr, &mut buf)
                    {
                        index = Some(client);
                    }
                }
                while let Some(to) = server.poll_transmit(&mut buf) {
                    assert_eq!(to, addr);
                    let _ = client.handle_datagram(now, server_addr(), &mut buf);
                }
            }
            assert!(client.is_connected());
            (client, addr, index.expect("connected"))
        })
        .collect();
    (server, clients)
}

/// Player `me`'s command on the arena: out of its spawn room through the doorway, to its
/// lane (north or south of the centre pillar, both teams in each) a few metres short of the
/// centre, then on across to the enemy's side; firing at the chest of the nearest living
/// enemy in sight, a little off either way, while it runs. The dead stand still. (The
/// players read the server's world to play: how they decide is not what is measured.)
fn command(m: &Match, me: PlayerSlot, rng: &mut SimRng) -> UserCmd {
    let world = m.world();
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

/// The server's calls of one worker frame for this match, as `worker/routing.rs` and
/// `worker/mod.rs` make them: open each datagram and hand its packet to the match, run the
/// transport's timeouts and queue its control packets, tick, and see whether the match is
/// over. Returns the snapshots queued, the clients refused or timed out (none, for honest
/// clients), and whether the match ended.
fn server_frame(
    now: Instant,
    server: &mut Server,
    players: &mut [Player],
    out: &mut SendBatch,
) -> (usize, u32, bool) {
    let Server {
        transport,
        m,
        slots,
        scopes,
        frame_buf,
    } = server;
    let mut lost = 0;
    for p in players.iter_mut() {
        let Some(datagram) = p.datagram.as_mut() else {
            continue;
        };
        match transport.handle_datagram(now, p.addr, datagram) {
            Some(ServerEvent::Payload { client, data }) => {
                if m.receive(now, slots[client.as_usize()], data).is_err() {
                    lost += 1;
                }
            }
            _ => lost += 1,
        }
    }
    transport.handle_timeout(now);
    while transport.poll_disconnect().is_some() {
        lost += 1;
    }
    while let Some(to) = transport.poll_transmit(frame_buf) {
        out.push(to, frame_buf);
    }
    let (_, queued) = m.run_tick(now, scopes, transport, frame_buf, out);
    (queued, lost, m.finish_if_over().is_some())
}

/// The server's side of the test: what the worker holds for this match.
struct Server {
    transport: netcode::Server,
    m: Match,
    /// Each client index's seat.
    slots: Vec<PlayerSlot>,
    scopes: Scopes,
    frame_buf: Vec<u8>,
}

#[test]
fn a_warm_tick_of_a_ten_player_match_allocates_nothing() {
    const MIN_TICKS: u32 = 256;
    const MAX_TICKS: u32 = 3000;
    /// Each datagram, either way, is lost with this probability: reliable events are sent
    /// again and snapshots delta against older baselines.
    const LOSS: f64 = 0.05;
    let t0 = Instant::now();
    let config = WorldConfig {
        players: PLAYERS,
        // Short rounds: round ends, deaths and respawns within the run; enough of them that
        // the match cannot end in it.
        rules: RulesConfig {
            buy: Duration::from_millis(100),
            round: Duration::from_secs(4),
            round_end: Duration::from_millis(200),
            rounds: std::num::NonZeroU8::new(24).unwrap(),
            ..RulesConfig::default()
        },
        ..WorldConfig::default()
    };
    let mut m = Match::new(MatchId(1), config, t0);
    let (transport, clients) = connected_clients(t0, u16::from(PLAYERS));
    let replica_config = ReplicaConfig::matching(&ReplicationConfig {
        max_entities: usize::from(PLAYERS),
        max_connections: usize::from(PLAYERS),
        ..ReplicationConfig::default()
    });
    let mut slots = vec![PlayerSlot(0); usize::from(PLAYERS)];
    let mut players: Vec<Player> = clients
        .into_iter()
        .map(|(client, addr, index)| {
            let slot = m.seat(t0, index, None).expect("a free seat");
            slots[index.as_usize()] = slot;
            Player {
                addr,
                slot,
                client,
                link: Endpoint::new(msg::link_config(), t0),
                replica: Replica::new(replica_config, tickforge_shooter::schema()),
                seq: 0,
                newest_tick: 0,
                datagram: Some(Vec::with_capacity(MAX_PACKET_BYTES)),
            }
        })
        .collect();
    let mut server = Server {
        transport,
        m,
        slots,
        scopes: Scopes::new(Instant::now),
        frame_buf: Vec::with_capacity(MAX_PACKET_BYTES),
    };

    let mut rng = SimRng::new(5);
    let (mut input, mut packet, mut event, mut down) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::with_capacity(MAX_PACKET_BYTES),
    );
    let mut spare = Vec::with_capacity(MAX_PACKET_BYTES);
    let mut heard = Heard::default();
    // Warm-up: until a round has ended and players have been killed. Then the measured
    // window: at least MIN_TICKS, and until it holds kills and a round's end and the next
    // one's start.
    let mut window: Option<(u32, Heard, u8)> = None;
    let mut allocating = Vec::new();
    let mut t = 0;
    let (window_start, window_heard) = loop {
        assert!(t < MAX_TICKS, "the match played out as planned: {heard:?}");
        let now = t0 + server.m.period() * t;
        let round = server.m.world().rules().round_state().round();
        match window {
            None if t >= MIN_TICKS && round >= 2 && heard.kills > 0 => {
                window = Some((t, heard, round));
            }
            Some((start, before, round_before))
                if t - start >= MIN_TICKS
                    && heard.since(before).kills > 0
                    && round > round_before =>
            {
                break (start, heard.since(before));
            }
            _ => {}
        }

        // The clients: one input each, through the link that acks the snapshots read.
        for p in &mut players {
            let c = command(&server.m, p.slot, &mut rng);
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
            assert!(p.client.handle_timeout(now).is_none());
            let mut datagram = p
                .datagram
                .take()
                .unwrap_or_else(|| std::mem::take(&mut spare));
            assert!(p.client.send_payload(now, &packet, &mut datagram).is_some());
            if rng.chance(LOSS) {
                spare = datagram;
            } else {
                p.datagram = Some(datagram);
            }
        }
        // A worker-sized batch, made before the measured calls (a `SendBatch` empties only
        // by sending on a socket): queuing into it allocates only if it must grow.
        let mut out = SendBatch::with_capacity(usize::from(PLAYERS) * 2 + 64, MAX_PACKET_BYTES);

        let ((queued, lost, over), n) =
            allocations_in(|| server_frame(now, &mut server, &mut players, &mut out));
        if window.is_some() && n > 0 {
            allocating.push((t, n));
        }
        assert_eq!(lost, 0, "tick {t}: every client stays");
        assert!(!over, "tick {t}: the match goes on");
        assert_eq!(queued, usize::from(PLAYERS), "tick {t}: a snapshot each");

        // The clients read their snapshots and events.
        for i in 0..out.len() {
            if rng.chance(LOSS) {
                continue;
            }
            let (to, bytes) = out.get(i);
            let p = players.iter_mut().find(|p| p.addr == to).unwrap();
            down.clear();
            down.extend_from_slice(bytes);
            let Some(ClientEvent::Payload(payload)) =
                p.client.handle_datagram(now, server_addr(), &mut down)
            else {
                continue;
            };
            if let Some((_, body)) = p.link.read_packet(now, payload).unwrap() {
                let ServerMsg::Snapshot { tick, body, .. } = ServerMsg::decode(body).unwrap();
                p.replica.read(body).unwrap();
                p.newest_tick = p.newest_tick.max(tick);
                heard.snapshots += 1;
            }
            while p.link.poll_reliable(&mut event) {
                match Event::decode(&event).unwrap() {
                    Event::ShotResult { victim, .. } => {
                        heard.shots += 1;
                        heard.hits += u32::from(victim != msg::NONE);
                    }
                    Event::Kill { .. } if p.slot == PlayerSlot(0) => heard.kills += 1,
                    Event::Round { .. } if p.slot == PlayerSlot(0) => heard.round_events += 1,
                    _ => {}
                }
            }
        }
        t += 1;
    };

    assert!(
        allocating.is_empty(),
        "ticks that allocated (tick, allocations): {allocating:?}"
    );
    // The window was a match at play: snapshots read, shots fired and hitting, kills, and a
    // round's end and the next one's start (a round's end allocates nothing; the match's
    // end, whose result allocates, never came: `over` was false every tick).
    let ticks = t - window_start;
    assert!(
        window_heard.snapshots > ticks * u32::from(PLAYERS) * 9 / 10
            && window_heard.hits > 0
            && window_heard.shots > window_heard.hits
            && window_heard.kills > 0
            && window_heard.round_events >= 2,
        "{ticks} ticks: {window_heard:?}"
    );
    assert_ne!(server.m.world().rules().phase(), RoundPhase::MatchOver);
}
