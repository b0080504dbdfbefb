//! A worker on a real socket keeps serving a client while garbage arrives beside it.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use tickforge_io::udp::{wait_readable, SocketOptions, UdpSocket};
use tickforge_proto::msg::{self, ClientMsg, ServerMsg};
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::{Client, ClientEvent};
use tickforge_proto::reliable::Endpoint;
use tickforge_proto::user_data::{UserData, ANY};
use tickforge_proto::MatchId;
use tickforge_server::{ServerConfig, Shutdown, Worker};

const GARBAGE: u64 = 2000;

#[test]
fn garbage_is_counted_and_dropped_while_a_client_plays_on() {
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        players_per_match: 2,
        duration: Some(Duration::from_millis(1500)),
        ..ServerConfig::default()
    };
    let key = config.private_key.clone();
    let protocol_id = config.protocol_id;
    let mut worker = Worker::new(config).unwrap();
    let server = worker.local_addr();
    let shutdown = Shutdown::new();

    std::thread::scope(|scope| {
        let handle = scope.spawn(|| {
            worker
                .run(&shutdown, Some(Duration::ZERO), &mut |_| {})
                .report()
        });

        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let attacker = UdpSocket::bind(any, SocketOptions::default()).unwrap();
        let player = UdpSocket::bind(any, SocketOptions::default()).unwrap();
        let t0 = Instant::now();
        let params = TokenParams {
            protocol_id,
            create_timestamp: tickforge_io::entropy::unix_now(),
            expire_seconds: 30,
            timeout_seconds: 5,
            server_addresses: vec![server],
        };
        let user_data = UserData {
            match_id: MatchId(1),
            team: ANY,
            slot: ANY,
        }
        .encode();
        let token = ConnectToken::mint(&params, 1, &user_data, &key.0, &[7; 88]);
        let mut client = Client::new(token, t0);
        let mut link = Endpoint::new(msg::link_config(), t0);
        let mut packet = Vec::new();
        let mut fds = vec![libc::pollfd {
            fd: player.as_raw_fd(),
            events: 0,
            revents: 0,
        }];
        let mut buf = vec![0u8; 1500];
        let mut out = Vec::new();
        let mut payload = Vec::new();
        let mut ticks_seen: Vec<u32> = Vec::new();
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut garbage_sent = 0;
        let mut seq = 0;

        while t0.elapsed() < Duration::from_millis(1300) {
            let now = Instant::now();
            // Garbage: random lengths (0..1500 bytes) and contents, interleaved with play.
            for _ in 0..20 {
                if garbage_sent == GARBAGE {
                    break;
                }
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let len = (rng % 1500) as usize;
                let bytes: Vec<u8> = (0..len).map(|i| (rng >> (i % 56)) as u8).collect();
                attacker.send_to(&bytes, server).unwrap();
                garbage_sent += 1;
            }
            while let Some(to) = client.poll_transmit(now, &mut out) {
                player.send_to(&out, to).unwrap();
            }
            if client.is_connected() {
                seq += 1;
                payload.clear();
                ClientMsg::Input {
                    seq,
                    view_tick: 0,
                    view_frac: 0,
                    cmd: &[0; 7],
                }
                .encode(&mut payload);
                link.write_packet(now, Some((seq, &payload)), &mut packet);
                let to = client.send_payload(now, &packet, &mut out).unwrap();
                player.send_to(&out, to).unwrap();
            }
            wait_readable(&mut fds, Duration::from_millis(4)).unwrap();
            while let Some((len, from)) = player.recv_from(&mut buf).unwrap() {
                if let Some(ClientEvent::Payload(p)) =
                    client.handle_datagram(Instant::now(), from, &mut buf[..len])
                {
                    let (_, body) = link
                        .read_packet(Instant::now(), p)
                        .unwrap()
                        .expect("a snapshot");
                    let ServerMsg::Snapshot { tick, .. } = ServerMsg::decode(body).unwrap();
                    ticks_seen.push(tick);
                }
            }
        }
        let report = handle.join().unwrap();
        assert_eq!(garbage_sent, GARBAGE);

        // Every garbage datagram was dropped and counted under some reason.
        let dropped: u64 = report.datagrams.dropped.values().sum();
        assert_eq!(dropped, GARBAGE, "{:?}", report.datagrams.dropped);

        // The player saw one snapshot per tick, with no gap, for over a second.
        assert!(
            ticks_seen.len() > 128,
            "only {} snapshots",
            ticks_seen.len()
        );
        for w in ticks_seen.windows(2) {
            assert_eq!(w[1], w[0] + 1, "a tick was missed or repeated");
        }
        assert_eq!(report.ticks.skipped, 0);
    });
}
