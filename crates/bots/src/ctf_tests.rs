//! Capture-the-flag bots play a real match ([`tickforge_server::Match`] of
//! [`tickforge_ctf::Ctf`]) served from one loopback socket on virtual time, driven as
//! [`run`] drives them: their brains steer by what their replicas hold (they leave their
//! spawns, and an attacker reaches the enemy flag), they read every snapshot, and a warm
//! bot allocates nothing.

use super::test_host::{step_counting, Counted};
use tickforge_api::{MatchSetup, Seat};
use tickforge_ctf::{Ctf, Kind};
use tickforge_io::udp::SendBatch;
use tickforge_proto::netcode::{self, ServerEvent};
use tickforge_proto::MAX_PACKET_BYTES;
use tickforge_server::{HostedMatch, Match};
use tickforge_telemetry::Scopes;

use super::*;

const SEATS: u16 = 4;
/// Ticks before the measured window: connecting, and the first steps out of the bases.
const WARMUP_TICKS: u32 = 256;
/// Thirty seconds at 128 Hz: long enough for an attacker to cross the arena.
const TICKS: u32 = 128 * 30;

/// A capture-the-flag match served from one loopback socket.
struct CtfHost {
    socket: UdpSocket,
    transport: netcode::Server,
    m: Match<Ctf>,
    seats: Vec<Option<Seat>>,
    scopes: Scopes,
    buf: Vec<u8>,
    frame: Vec<u8>,
    out: SendBatch,
    io: IoStats,
}

impl CtfHost {
    fn new(config: &BotsConfig, socket: UdpSocket, start: Instant) -> CtfHost {
        let transport = netcode::Server::new(
            netcode::ServerConfig {
                protocol_id: config.protocol_id,
                private_key: config.private_key.0,
                public_addresses: config.servers.clone(),
                max_clients: SEATS,
                requests_per_second_per_ip: 10,
            },
            start,
            entropy::unix_now(),
            entropy::random_bytes(),
        );
        let setup = MatchSetup {
            seats: SEATS,
            tick_hz: config.tick_hz,
            record: false,
            stagger: 0,
        };
        CtfHost {
            socket,
            transport,
            m: Match::new(MatchId(1), Arc::new(config.ctf), setup, start),
            seats: vec![None; usize::from(SEATS)],
            scopes: Scopes::new(Instant::now),
            buf: vec![0; SLOT_BYTES],
            frame: Vec::with_capacity(MAX_PACKET_BYTES),
            out: SendBatch::with_capacity(usize::from(SEATS) * 2 + 16, MAX_PACKET_BYTES),
            io: IoStats::default(),
        }
    }

    /// One server frame at `now`: every datagram waiting, the timeouts, the tick, the send.
    fn frame(&mut self, now: Instant) {
        while let Some((len, from)) = self.socket.recv_from(&mut self.buf).unwrap() {
            match self
                .transport
                .handle_datagram(now, from, &mut self.buf[..len])
            {
                Some(ServerEvent::Connected { client, .. }) => {
                    self.seats[client.as_usize()] = self.m.seat(now, client, None);
                }
                Some(ServerEvent::Payload { client, data }) => {
                    let seat = self.seats[client.as_usize()].expect("a seated client");
                    self.m.receive(now, seat, data).expect("an honest bot");
                }
                Some(ServerEvent::Disconnected { client, .. }) => panic!("{client:?} left"),
                None => {}
            }
        }
        self.transport.handle_timeout(now);
        assert_eq!(self.transport.poll_disconnect(), None);
        while let Some(to) = self.transport.poll_transmit(&mut self.frame) {
            self.out.push(to, &self.frame);
        }
        tickforge_server::tick_match(
            &mut self.m,
            now,
            &self.scopes,
            &mut self.transport,
            &mut self.frame,
            &mut self.out,
        );
        assert!(self.m.finish_if_over().is_none(), "the match goes on");
        self.out.flush(&self.socket, &mut self.io);
    }
}

#[test]
fn ctf_bots_play_by_their_replicas_and_allocate_nothing_warm() {
    let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), SocketOptions::default()).unwrap();
    let config = BotsConfig {
        game: BotGame::Ctf,
        servers: vec![socket.local_addr().unwrap()],
        bots_per_match: u32::from(SEATS),
        seed: 3,
        ..BotsConfig::default()
    };
    let start = Instant::now();
    let period = Duration::from_nanos(1_000_000_000 / u64::from(config.tick_hz));
    let mut host = CtfHost::new(&config, socket, start);
    let map = Arc::new(config.map.load());
    let mut bots: Vec<Bot> = (0..u64::from(SEATS))
        .map(|i| Bot::new(&config, i, MatchId(1), Role::Wander, &map, start, None).unwrap())
        .collect();
    let mut counted = Counted::new();
    let window_start = start + period * WARMUP_TICKS;
    let window = (window_start, start + period * (TICKS + 1));
    let spawns: Vec<[f32; 2]> = (0..SEATS).map(|s| config.ctf.spawn(s, SEATS)).collect();
    let mut farthest = [0f32; SEATS as usize];
    let mut flag_carried = false;
    for t in 0..TICKS {
        let now = start + period * t;
        step_counting(&mut bots, (t, now), window, &config, &mut counted);
        host.frame(now);
        let game = host.m.game();
        for seat in 0..SEATS {
            let p = game.state(seat).expect("a player per seat");
            let [x, y] = spawns[usize::from(seat)];
            let d = ((p.position[0] - x).powi(2) + (p.position[1] - y).powi(2)).sqrt();
            farthest[usize::from(seat)] = farthest[usize::from(seat)].max(d);
        }
        flag_carried |= (SEATS..SEATS + 2)
            .filter_map(|id| game.state(id))
            .any(|f| f.kind == Kind::Flag && f.carrying);
    }
    let Counted {
        scratch,
        allocating,
    } = counted;
    assert!(
        allocating.is_empty(),
        "(tick, bot, allocations): {allocating:?}"
    );
    let ticks = u64::from(TICKS - WARMUP_TICKS);
    for (i, bot) in bots.iter().enumerate() {
        let welcome = bot.session.welcome().expect("welcomed");
        assert_eq!(welcome.seats, SEATS);
        assert!(
            bot.metrics.snapshots > ticks * 9 / 10
                && bot.metrics.packets_up >= ticks - 1
                && bot.bad_snapshots() == 0
                && bot.link_errors() == 0,
            "bot {i} in {ticks} ticks: {} snapshots, {} up, {} bad, {} link errors",
            bot.metrics.snapshots,
            bot.metrics.packets_up,
            bot.bad_snapshots(),
            bot.link_errors()
        );
        // No shot is judged in capture the flag.
        assert_eq!(bot.metrics.hitreg.shots, 0);
        assert!(bot.aim.is_none());
    }
    // Every seat's player left its spawn, steered by its bot (an idle player stands).
    assert!(farthest.iter().all(|&d| d > 3.0), "{farthest:?}");
    assert!(
        flag_carried,
        "an attacker reached the enemy flag: {farthest:?}"
    );
    assert!(scratch.hist.response.len() > ticks * u64::from(SEATS) * 9 / 10);
}
