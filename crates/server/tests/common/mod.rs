//! A player for the server's real-socket tests: connects with a token, sends an input a
//! step, and records the snapshot ticks it receives.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tickforge_io::udp::{wait_readable, SocketOptions, UdpSocket};
use tickforge_proto::msg::{self, ClientMsg, ServerMsg};
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::{Client, ClientEvent, PrivateKey};
use tickforge_proto::reliable::Endpoint;
use tickforge_proto::user_data::{UserData, ANY, ANY_SEAT};
use tickforge_proto::MatchId;

/// Makes Walk, the test kit's small game, the game of this test process (its default: the
/// first registered); a Worker or Host needs a registered game. Registering again is
/// harmless.
pub fn register_games() {
    tickforge_server::games::register::<tickforge_testkit::game::Walk>();
}

/// A connect token for match `m` on `server`, any team and slot, client id `m`.
pub fn token_for(server: SocketAddr, key: &PrivateKey, protocol_id: u64, m: u32) -> ConnectToken {
    let params = TokenParams {
        protocol_id,
        create_timestamp: tickforge_io::entropy::unix_now(),
        expire_seconds: 30,
        timeout_seconds: 5,
        server_addresses: vec![server],
    };
    let user_data = UserData {
        match_id: MatchId(m),
        team: ANY,
        seat: ANY_SEAT,
    }
    .encode();
    ConnectToken::mint(&params, u64::from(m), &user_data, &key.0, &[7; 88])
}

/// One client on its own loopback socket.
pub struct Player {
    socket: UdpSocket,
    client: Client,
    link: Endpoint,
    buf: Vec<u8>,
    out: Vec<u8>,
    payload: Vec<u8>,
    packet: Vec<u8>,
    seq: u32,
    /// Ticks of the snapshots received, in arrival order.
    pub ticks: Vec<u32>,
    /// Packets the reliability layer refused, or that carried no snapshot.
    pub bad_packets: u32,
}

impl Player {
    /// A player that will connect with `token`.
    pub fn new(token: ConnectToken) -> Player {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let socket = UdpSocket::bind(any, SocketOptions::default()).unwrap();
        let now = Instant::now();
        Player {
            socket,
            client: Client::new(token, now),
            link: Endpoint::new(msg::link_config(), now),
            buf: vec![0; 1500],
            out: Vec::new(),
            payload: Vec::new(),
            packet: Vec::new(),
            seq: 0,
            ticks: Vec::new(),
            bad_packets: 0,
        }
    }

    /// Sends what the handshake needs and, once connected, one input; then waits up to
    /// 4 ms for datagrams and takes every one waiting.
    pub fn step(&mut self) {
        let now = Instant::now();
        while let Some(to) = self.client.poll_transmit(now, &mut self.out) {
            self.socket.send_to(&self.out, to).unwrap();
        }
        if self.client.is_connected() {
            self.seq += 1;
            self.payload.clear();
            ClientMsg::Input {
                seq: self.seq,
                view_tick: 0,
                view_frac: 0,
                cmd: &tickforge_testkit::game::WalkInput::default().to_bytes(),
            }
            .encode(&mut self.payload);
            self.link
                .write_packet(now, Some((self.seq, &self.payload)), &mut self.packet);
            let to = self
                .client
                .send_payload(now, &self.packet, &mut self.out)
                .unwrap();
            self.socket.send_to(&self.out, to).unwrap();
        }
        wait_readable(&[&self.socket], Duration::from_millis(4)).unwrap();
        while let Some((len, from)) = self.socket.recv_from(&mut self.buf).unwrap() {
            let Some(ClientEvent::Payload(p)) =
                self.client
                    .handle_datagram(Instant::now(), from, &mut self.buf[..len])
            else {
                continue;
            };
            match self.link.read_packet(Instant::now(), p) {
                Ok(Some((_, body))) => match ServerMsg::decode(body) {
                    Ok(ServerMsg::Snapshot { tick, .. }) => self.ticks.push(tick),
                    Err(_) => self.bad_packets += 1,
                },
                _ => self.bad_packets += 1,
            }
        }
    }
}
