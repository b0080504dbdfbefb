//! What the README promises a netcode.io 1.02 client that is not ours, checked with an
//! independent implementation (the `netcode-rs` crate) against a real worker on 127.0.0.1:
//! it connects with a token from another backend, receives keep-alives and payloads, and
//! stays connected while it sends none; a client whose payloads are not tickforge's framing
//! is disconnected as misbehaving, one that vanishes (not even keep-alives) is timed out,
//! and the other never notices; the report counts each under its reason.

use std::time::{Duration, Instant};

use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_server::{ServerConfig, Shutdown, Worker};

/// Seconds of silence before either side times the connection out: the quiet client must
/// outlive this several times over.
const TIMEOUT_S: i32 = 1;
/// How long the quiet client stays connected while sending nothing.
const QUIET: Duration = Duration::from_millis(3500);

fn foreign_token(config: &ServerConfig, server: std::net::SocketAddr, id: u64) -> Vec<u8> {
    let params = TokenParams {
        protocol_id: config.protocol_id,
        create_timestamp: tickforge_io::entropy::unix_now(),
        expire_seconds: 30,
        timeout_seconds: TIMEOUT_S,
        server_addresses: vec![server],
    };
    // User data of zeros: not tickforge's tagged format, as another backend would mint.
    ConnectToken::mint(
        &params,
        id,
        &[0; 256],
        &config.private_key.0,
        &[id as u8; 88],
    )
    .to_bytes()
}

#[test]
fn a_foreign_netcode_client_stays_connected_silent_and_a_bad_framer_is_disconnected() {
    tickforge_server::games::register::<tickforge_testkit::game::Walk>();
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        players_per_match: 3,
        duration: Some(QUIET + Duration::from_millis(1500)),
        results_file: None,
        ..ServerConfig::default()
    };
    let mut worker = Worker::new(config.clone()).unwrap();
    let server = worker.local_addr();
    let shutdown = Shutdown::new();

    std::thread::scope(|scope| {
        let handle = scope.spawn(|| {
            worker
                .run(&shutdown, Some(Duration::ZERO), &mut |_| {})
                .report()
        });
        let mut quiet = netcode::Client::new(&foreign_token(&config, server, 1)).unwrap();
        let mut framer = netcode::Client::new(&foreign_token(&config, server, 2)).unwrap();
        // Connects, then sends nothing at all: the server times it out after TIMEOUT_S.
        let mut vanisher = netcode::Client::new(&foreign_token(&config, server, 3)).unwrap();
        quiet.connect();
        framer.connect();
        vanisher.connect();
        let mut vanished = false;
        let t0 = Instant::now();
        let (mut received, mut framer_connected, mut garbage_sent) = (0u64, false, false);
        let mut framer_gone_at = None;
        while t0.elapsed() < QUIET {
            let now = t0.elapsed().as_secs_f64();
            quiet.update(now);
            framer.update(now);
            if !vanished {
                vanisher.update(now);
                while vanisher.recv().is_some() {}
                vanished = vanisher.is_connected();
            }
            while quiet.recv().is_some() {
                received += 1;
            }
            while framer.recv().is_some() {}
            framer_connected |= framer.is_connected();
            if framer.is_connected() && !garbage_sent {
                // Connected at the transport: a payload that is not tickforge's framing.
                framer.send(&[0xff; 40]).unwrap();
                garbage_sent = true;
            }
            if garbage_sent && framer_gone_at.is_none() && !framer.is_connected() {
                framer_gone_at = Some(t0.elapsed());
            }
            // The clients' own frame: they poll their sockets, as a game loop would.
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(
            quiet.is_connected(),
            "the silent client was dropped: {:?}",
            quiet.state()
        );
        // Snapshots at 128 Hz (and the welcome before them) for the whole quiet time.
        assert!(received > 128 * 3, "only {received} payloads in {QUIET:?}");
        assert!(framer_connected && garbage_sent);
        let gone = framer_gone_at.expect("the client sending garbage payloads stays connected");
        assert!(
            framer.state() == netcode::ClientState::Disconnected,
            "the server closed it (not a timeout): {:?}",
            framer.state()
        );
        quiet.disconnect().unwrap();
        framer.disconnect().ok();
        let report = handle.join().unwrap();
        assert_eq!(report.kicked["misbehaved"], 1, "{gone:?}");
        assert!(
            !report.datagrams.dropped.contains_key("misbehaved"),
            "a kick is no drop"
        );
        assert_eq!(report.datagrams.dropped["refused"], 0);
        assert!(vanished, "the vanishing client connected first");
        assert_eq!(
            report.kicked["timed_out"], 1,
            "the vanished client, timed out"
        );
    });
}
