//! A client session fed hostile bytes from the server's side: raw datagrams before and
//! after a handshake, packets sealed with the connection's key (so they pass decryption
//! and reach the state machine and the reliable link), link packets carrying arbitrary
//! snapshot messages and arbitrary reliable events, welcomes with the right or a wrong
//! schema and any size. Between chunks the session is polled, ticked, asked for its clock
//! and its interpolated entities, and sends. It never panics.
//!
//! The server's side is played by sealing packets with the token's server-to-client key
//! (no netcode server: its request handling would cost most of each run).
#![no_main]

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use tickforge_client::{Session, SessionConfig, SessionEvent};
use tickforge_proto::msg::{self, Event, ServerMsg};
use tickforge_proto::netcode::packet::{self, PacketType};
use tickforge_proto::netcode::token::{ConnectToken, TokenParams};
use tickforge_proto::netcode::MAX_PAYLOAD_BYTES;
use tickforge_proto::reliable::Endpoint;
use tickforge_replication::NetId;
use tickforge_sim::{Tick, ViewTime};

const KEY: [u8; 32] = [4; 32];
const PROTOCOL: u64 = 1;
const UNIX: u64 = 1_700_000_000;

fn server_addr() -> SocketAddr {
    "127.0.0.1:40000".parse().unwrap()
}

fn token() -> ConnectToken {
    static TOKEN: OnceLock<ConnectToken> = OnceLock::new();
    TOKEN
        .get_or_init(|| {
            ConnectToken::mint(
                &TokenParams {
                    protocol_id: PROTOCOL,
                    create_timestamp: UNIX,
                    expire_seconds: 30,
                    timeout_seconds: 5,
                    server_addresses: vec![server_addr()],
                },
                7,
                &[0; 256],
                &KEY,
                &[7; 88],
            )
        })
        .clone()
}

fn drain(session: &mut Session, now: Instant) {
    while let Some(e) = session.poll_event() {
        if let SessionEvent::Game(bytes) = e {
            std::hint::black_box(bytes.len());
        }
    }
    if let Some(r) = session.render_tick(now) {
        for id in 0..16 {
            std::hint::black_box(session.entity_at(NetId(id), r));
        }
        std::hint::black_box(session.entity_at(NetId(0), f64::NAN));
        std::hint::black_box(session.entity_at(NetId(0), -1e30));
        std::hint::black_box(session.entity_at(NetId(0), 1e30));
    }
    std::hint::black_box(session.server_tick(now));
    std::hint::black_box(session.interp_delay_ticks_at(now));
}

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let token = token();
    let s2c = packet::cipher(&token.server_to_client_key);
    let schema = tickforge_shooter::schema();
    let mut session = Session::new(token, schema, SessionConfig::default(), t0);
    let mut link = Endpoint::new(msg::link_config(), t0);
    let (mut buf, mut packet, mut message) = (Vec::new(), Vec::new(), Vec::new());
    let mut datagram = Vec::new();
    let mut now = t0;
    let mut sequence = 0u64;
    let mut deliver = |session: &mut Session, now: Instant, kind: PacketType, body: &[u8]| {
        sequence += 1;
        // The body cut or padded to a size the type allows (others are refused unopened).
        let size = match kind {
            PacketType::Denied | PacketType::Disconnect => 0,
            PacketType::Challenge => 8 + 300,
            PacketType::KeepAlive => 8,
            _ => body.len().clamp(1, MAX_PAYLOAD_BYTES),
        };
        packet::seal(&mut datagram, kind, sequence, PROTOCOL, &s2c, |out| {
            let at = out.len();
            out.extend_from_slice(&body[..body.len().min(size)]);
            out.resize(at + size, 0);
        });
        session.handle_datagram(now, server_addr(), &mut datagram);
        drain(session, now);
    };

    // The first byte picks whether the handshake completes first.
    let (handshake, mut rest) = match data.split_first() {
        Some((b, rest)) => (b & 1 == 0, rest),
        None => return,
    };
    if handshake {
        while session.poll_transmit(now, &mut buf).is_some() {}
        let mut challenge = vec![0u8; 8 + 300];
        challenge[0] = 1;
        deliver(&mut session, now, PacketType::Challenge, &challenge);
        now += Duration::from_millis(10);
        session.handle_timeout(now);
        while session.poll_transmit(now, &mut buf).is_some() {}
        let mut keepalive = [0u8; 8];
        keepalive[4] = 2;
        deliver(&mut session, now, PacketType::KeepAlive, &keepalive);
        assert!(session.is_connected(), "{:?}", session.state());
    }

    // Chunks: [selector, len, bytes...]
    let mut tick = 0u32;
    while rest.len() >= 2 {
        let (selector, len) = (rest[0], usize::from(rest[1]) * 6);
        rest = &rest[2..];
        let take = len.min(rest.len());
        let bytes = &rest[..take];
        rest = &rest[take..];
        now += Duration::from_micros(u64::from(selector >> 3) * 500);
        match selector & 7 {
            // Any packet type sealed with the connection's key, these bytes its body.
            1 => {
                let kind = match bytes.first().map(|b| b % 5) {
                    Some(0) => PacketType::Denied,
                    Some(1) => PacketType::Challenge,
                    Some(2) => PacketType::KeepAlive,
                    Some(3) => PacketType::Disconnect,
                    _ => PacketType::Payload,
                };
                deliver(&mut session, now, kind, bytes.get(1..).unwrap_or(&[]));
            }
            // A payload of these bytes: they reach the link.
            2 => deliver(&mut session, now, PacketType::Payload, bytes),
            // A link packet carrying a snapshot message of these bytes.
            3 => {
                tick = tick.wrapping_add(u32::from(bytes.first().copied().unwrap_or(1)));
                message.clear();
                ServerMsg::Snapshot {
                    tick,
                    input_ack: 0,
                    body: bytes,
                }
                .encode(&mut message);
                link.write_packet(now, Some((tick, &message)), &mut packet);
                deliver(&mut session, now, PacketType::Payload, &packet);
            }
            // A reliable event of these bytes, or a welcome.
            4 => {
                message.clear();
                if bytes.len() >= 5 && bytes[0] & 1 == 1 {
                    Event::Welcome {
                        match_id: 1,
                        seat: u16::from(bytes[1]),
                        tick_hz: u16::from(bytes[2]),
                        seats: 10,
                        // Mostly small (a big replica is slow to make), now and then any.
                        entities: if bytes[4] & 0x80 != 0 {
                            u16::from_le_bytes([bytes[3], bytes[4] & 0x7f])
                        } else {
                            u16::from(bytes[3] % 64)
                        },
                        schema: if bytes[0] & 2 == 0 {
                            schema.fingerprint()
                        } else {
                            u32::from(bytes[1])
                        },
                        epoch: u32::from(bytes[4] & 3),
                    }
                    .encode(&mut message);
                } else {
                    message.extend_from_slice(bytes);
                }
                let _ = link.send_reliable(&message);
                link.write_packet(now, None, &mut packet);
                deliver(&mut session, now, PacketType::Payload, &packet);
            }
            // From somewhere else.
            5 => {
                let mut d = bytes.to_vec();
                session.handle_datagram(now, "127.0.0.9:1".parse().unwrap(), &mut d);
                drain(&mut session, now);
            }
            // Raw bytes from the server's address.
            _ => {
                let mut d = bytes.to_vec();
                session.handle_datagram(now, server_addr(), &mut d);
                drain(&mut session, now);
            }
        }
        session.handle_timeout(now);
        drain(&mut session, now);
        // Sending seals a datagram: slow in this build, so only now and then.
        if selector & 0x20 != 0 {
            let view = ViewTime::behind(Tick(session.newest_tick()), 2.0);
            let _ = session.send_input(now, view, &[0; 7]);
            if selector & 0x40 != 0 {
                let _ = session.send_message(bytes);
            }
            while session.poll_transmit(now, &mut buf).is_some() {}
        }
        std::hint::black_box(session.stats());
    }
});
