//! A worker on a real socket keeps serving a client while garbage arrives beside it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tickforge_io::udp::{SocketOptions, UdpSocket};
use tickforge_server::{ServerConfig, Shutdown, Worker};

mod common;
use common::{token_for, Player};

const GARBAGE: u64 = 2000;

#[test]
fn garbage_is_counted_and_dropped_while_a_client_plays_on() {
    common::register_games();
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
        let t0 = Instant::now();
        let mut player = Player::new(token_for(server, &key, protocol_id, 1));
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut garbage_sent = 0;

        while t0.elapsed() < Duration::from_millis(1300) {
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
            player.step();
        }
        let report = handle.join().unwrap();
        assert_eq!(garbage_sent, GARBAGE);

        // Every garbage datagram was dropped and counted under some reason.
        let dropped: u64 = report.datagrams.dropped.values().sum();
        assert_eq!(dropped, GARBAGE, "{:?}", report.datagrams.dropped);

        // The player saw one snapshot per tick, with no gap, for over a second, and every
        // packet it got was whole.
        assert_eq!(player.bad_packets, 0);
        let ticks_seen = player.ticks;
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
