//! Test support: a real match ([`tickforge_server::Match`]) served from one loopback
//! socket on virtual time, for tests that drive bots as [`run`] drives them. The bots take
//! the first [`BOTS`] seats; two scripted hunters, seated without a connection, take the
//! rest, so that players die and come back (the bots alone seldom meet).

use tickforge_api::Seat;
use tickforge_game::rules::{MatchResult, RulesConfig, Team};
use tickforge_game::{PlayerSlot, Vec3, World, WorldConfig};
use tickforge_io::udp::SendBatch;
use tickforge_proto::netcode::{self, ServerEvent};
use tickforge_proto::{ClientIndex, MAX_PACKET_BYTES};
use tickforge_server::{HostedMatch, Match};
use tickforge_shooter::{Shooter, ShooterConfig};

/// A shooter match playing `world`, its tick 0 due at `start`.
pub(crate) fn shooter_match(id: MatchId, world: &WorldConfig, start: Instant) -> Match<Shooter> {
    let (config, setup) = ShooterConfig::from_world(world);
    Match::new(id, std::sync::Arc::new(config), setup, start)
}
use tickforge_telemetry::Scopes;

use super::*;

/// Seats of the match: the bots take the first [`BOTS`], the hunters the rest.
pub(crate) const PLAYERS: u16 = 10;
pub(crate) const BOTS: u16 = 8;

/// The match the bots play, served from one loopback socket on virtual time.
pub(crate) struct Host {
    socket: UdpSocket,
    transport: netcode::Server,
    pub(crate) m: Match<Shooter>,
    /// Each client index's seat.
    seats: Vec<Option<Seat>>,
    /// The input sequence of the hunters, one a tick.
    hunter_seq: u32,
    scopes: Scopes,
    buf: Vec<u8>,
    frame: Vec<u8>,
    out: SendBatch,
    io: IoStats,
}

impl Host {
    /// A host for `config`'s one match, played by `rules`, on `socket` (the bots'
    /// `config.servers[0]`).
    pub(crate) fn new(
        config: &BotsConfig,
        socket: UdpSocket,
        start: Instant,
        rules: RulesConfig,
    ) -> Host {
        let world = WorldConfig {
            players: PLAYERS,
            map: config.map,
            rules,
            ..WorldConfig::default()
        };
        let transport = netcode::Server::new(
            netcode::ServerConfig {
                protocol_id: config.protocol_id,
                private_key: config.private_key.0,
                public_addresses: config.servers.clone(),
                max_clients: BOTS,
                requests_per_second_per_ip: 10,
            },
            start,
            entropy::unix_now(),
            entropy::random_bytes(),
        );
        let mut m = shooter_match(MatchId(1), &world, start);
        for slot in BOTS..PLAYERS {
            // Client indices the transport never gives: the hunters have no connection.
            let hunter = ClientIndex(1000 + slot);
            assert_eq!(m.seat(start, hunter, Some(Seat(slot))), Some(Seat(slot)));
        }
        Host {
            socket,
            transport,
            m,
            seats: vec![None; usize::from(BOTS)],
            hunter_seq: 0,
            scopes: Scopes::new(Instant::now),
            buf: vec![0; SLOT_BYTES],
            frame: Vec::with_capacity(MAX_PACKET_BYTES),
            out: SendBatch::with_capacity(usize::from(PLAYERS) * 2 + 64, MAX_PACKET_BYTES),
            io: IoStats::default(),
        }
    }

    /// One server frame at `now`: every datagram waiting, the transport's timeouts, the
    /// match's tick, and the send. The match's result when it ended on this tick: it
    /// starts over at its next deadline, as a worker's does.
    pub(crate) fn frame(&mut self, now: Instant) -> Option<MatchResult> {
        while let Some((len, from)) = self.socket.recv_from(&mut self.buf).unwrap() {
            match self
                .transport
                .handle_datagram(now, from, &mut self.buf[..len])
            {
                Some(ServerEvent::Connected { client, .. }) => {
                    self.seats[client.as_usize()] = self.m.seat(now, client, None);
                }
                Some(ServerEvent::Payload { client, data }) => {
                    let slot = self.seats[client.as_usize()].expect("a seated client");
                    self.m.receive(now, slot, data).expect("an honest bot");
                }
                Some(ServerEvent::Disconnected { client, .. }) => {
                    panic!("{client:?} left");
                }
                None => {}
            }
        }
        self.hunter_seq += 1;
        // The hunters see the world as it is.
        let shown = ViewTime::at(Tick(self.m.game().world().tick().0.saturating_sub(1)));
        for slot in (BOTS..PLAYERS).map(PlayerSlot) {
            let cmd = hunter_cmd(self.m.game().world(), slot);
            (self.m).queue_input(Seat(slot.0), self.hunter_seq, cmd, shown);
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
        let result = (self.m.finish_if_over())
            .map(|end| MatchResult::decode_body(&end.result).expect("the shooter's result"));
        self.out.flush(&self.socket, &mut self.io);
        result
    }
}

/// A hunter's command: out of its spawn room through the doorway (the arena's rooms open
/// at y = 0) to a post by the centre pillar, standing to fire at the chest of the nearest
/// living enemy in sight. It reads the server's world.
fn hunter_cmd(world: &World, me: PlayerSlot) -> UserCmd {
    let rules = world.rules();
    if !rules.is_alive(me) {
        return UserCmd::default();
    }
    let at = world.players()[usize::from(me.0)].state.origin;
    let home = if World::team_of(me) == Team::Attackers {
        -1.0
    } else {
        1.0
    };
    let post = Vec3::new(home * 3.0, 6.0, 0.0);
    let goal = if at.x * home > 21.0 && at.y.abs() > 0.8 {
        Vec3::new(home * 26.0, 0.0, 0.0)
    } else if at.x * home > 21.0 {
        Vec3::new(home * 18.0, 0.0, 0.0)
    } else {
        post
    };
    let turn = |v: Vec3| (v.y.atan2(v.x) / std::f32::consts::TAU * 65536.0).round() as i32;
    let eye = at + Vec3::new(0.0, 0.0, 1.6);
    let target = (0..PLAYERS)
        .map(PlayerSlot)
        .filter(|&s| rules.team(s) != rules.team(me) && rules.is_alive(s))
        .map(|s| world.players()[usize::from(s.0)].state.origin + Vec3::new(0.0, 0.0, 1.2))
        .filter(|&aim| {
            let d = aim - eye;
            let dist = d.length();
            dist > 0.5 && world.map().trace_ray(eye, d * (1.0 / dist), dist).is_none()
        })
        .min_by(|a, b| (*a - eye).length().total_cmp(&(*b - eye).length()));
    let to_goal = goal - at;
    let run = to_goal.horizontal_length() > 1.0;
    match target {
        Some(aim) => {
            let d = aim - eye;
            let pitch = d.z.atan2(d.horizontal_length()) / std::f32::consts::TAU * 65536.0;
            UserCmd {
                forward: 0,
                side: 0,
                buttons: buttons::FIRE,
                yaw: turn(d) as u16,
                pitch: pitch.round() as i16,
            }
        }
        None => UserCmd {
            forward: if run { 127 } else { 0 },
            side: 0,
            buttons: 0,
            yaw: turn(to_goal) as u16,
            pitch: 0,
        },
    }
}

/// What stepping bots with their allocations counted keeps: the bots' shared scratch, and
/// `(tick, bot, allocations)` for each step that allocated in the measured window.
pub(crate) struct Counted {
    pub scratch: Scratch,
    pub allocating: Vec<(u32, usize, u64)>,
}

impl Counted {
    pub fn new() -> Counted {
        Counted {
            scratch: Scratch::new(),
            allocating: Vec::new(),
        }
    }
}

/// Steps every bot once ([`Bot::step`]) at tick `t`, which falls at `now`, counting each
/// one's allocations apart, and keeps those made within the measured `window` (its start
/// and end) in `counted`.
pub(crate) fn step_counting(
    bots: &mut [Bot],
    (t, now): (u32, Instant),
    window: (Instant, Instant),
    config: &BotsConfig,
    counted: &mut Counted,
) {
    let clocks = (now, stamped::realtime_now());
    let in_window = now >= window.0;
    for (i, bot) in bots.iter_mut().enumerate() {
        let ((), n) = tickforge_testkit::alloc::allocations_in(|| {
            bot.step(clocks, window, config, in_window, &mut counted.scratch);
        });
        if in_window && n > 0 {
            counted.allocating.push((t, i, n));
        }
    }
}
