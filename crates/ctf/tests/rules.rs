//! The rules, tick by tick: capture, tag, timeouts, the end of a match and its result line,
//! the settings, the entities' order and writes, and the wire formats.

mod common;

use common::{Match, HZ};
use proptest::prelude::*;
use tickforge_api::{ConfigTable, EntityChange, Events, Game, Seat, Target};
use tickforge_ctf::bot::steer;
use tickforge_ctf::{buttons, Ctf, CtfConfig, Event, Input, Kind, Team, INPUT_BYTES};

const A_FLAG: u16 = 2;
const B_FLAG: u16 = 3;

/// Runs ticks until an event `until` picks, at most `seconds`; returns every event seen.
fn run(
    m: &mut Match,
    seconds: u32,
    mut input: impl FnMut(u16, &[Option<tickforge_ctf::EntityState>]) -> Input,
    until: impl Fn(&Event) -> bool,
) -> Vec<Event> {
    let mut seen = Vec::new();
    for _ in 0..seconds * HZ {
        m.tick(&mut input);
        let events = m.events();
        let done = events.iter().any(&until);
        seen.extend(events);
        if done {
            return seen;
        }
    }
    panic!("no such event in {seconds} s; saw {seen:?}");
}

fn table(json: &str) -> ConfigTable {
    serde_json::from_str(json).unwrap()
}

#[test]
fn a_carrier_brings_the_enemy_flag_home_and_captures() {
    let config = CtfConfig::default();
    let mut m = Match::new(config, 2);
    let corner = [config.arena_w - 1.0, config.arena_h - 1.0];
    let flag_b = config.base(Team::B);
    let seen = run(
        &mut m,
        30,
        |seat, world| {
            let me = world[usize::from(seat)].unwrap();
            match (seat, me.carrying) {
                // B keeps out of the way.
                (1, _) => steer(me.position, corner),
                (_, false) => steer(me.position, flag_b),
                (_, true) => steer(me.position, config.base(Team::A)),
            }
        },
        |e| matches!(e, Event::Capture { .. }),
    );
    assert_eq!(
        seen,
        [
            Event::Pickup {
                flag: Team::B,
                seat: 0
            },
            Event::Capture {
                team: Team::A,
                seat: 0,
                captures_a: 1,
                captures_b: 0
            },
        ]
    );
    assert_eq!(m.game.captures(), [1, 0]);
    let flag = m.flag(B_FLAG);
    assert_eq!((flag.kind, flag.team), (Kind::Flag, Team::B));
    assert!(
        !flag.carrying && !flag.dropped && flag.position == flag_b,
        "{flag:?}"
    );
    assert!(!m.player(0).carrying);
    // 38 m there at 6 m/s, 36 m back at 5.4 m/s: 13 s.
    assert!(
        (12 * HZ..14 * HZ).contains(&m.game.ticks()),
        "{}",
        m.game.ticks()
    );
}

#[test]
fn a_carrier_touched_in_the_defenders_half_is_sent_home_and_the_flag_returned() {
    let config = CtfConfig::default();
    let mut m = Match::new(config, 2);
    let flag_b = config.base(Team::B);
    let seen = run(
        &mut m,
        30,
        |seat, world| {
            let me = world[usize::from(seat)].unwrap();
            match (seat, me.carrying) {
                // B stands at its spawn, on A's way home.
                (1, _) => Input::default(),
                (_, false) => steer(me.position, flag_b),
                (_, true) => steer(me.position, config.base(Team::A)),
            }
        },
        |e| matches!(e, Event::Tag { .. }),
    );
    assert_eq!(
        seen,
        [
            Event::Pickup {
                flag: Team::B,
                seat: 0
            },
            Event::Tag {
                tagger: 1,
                tagged: 0
            },
            Event::Drop {
                flag: Team::B,
                seat: 0
            },
            Event::Return {
                flag: Team::B,
                seat: Some(1)
            },
        ]
    );
    let tagged = m.player(0);
    assert!(!tagged.carrying && tagged.velocity == [0.0; 2]);
    assert_eq!(tagged.position, config.spawn(0, 2));
    let flag = m.flag(B_FLAG);
    assert!(!flag.carrying && !flag.dropped && flag.position == flag_b);
    let end = m.game.finish();
    assert!(
        end.result.ends_with("player=0,a,0,0 player=1,b,0,1"),
        "{}",
        end.result
    );
}

#[test]
fn a_flag_away_too_long_returns_by_itself_and_a_dropped_one_is_not_retaken_at_once() {
    let config = Ctf::configure(&table(r#"{"flag_return_s": 2}"#)).unwrap();
    let mut m = Match::new(config, 2);
    m.game.leave(Seat(1));
    let flag_b = config.base(Team::B);
    run(
        &mut m,
        30,
        |seat, world| {
            let me = world[usize::from(seat)].unwrap();
            if seat == 0 && !me.carrying {
                steer(me.position, flag_b)
            } else {
                Input::default()
            }
        },
        |e| matches!(e, Event::Pickup { .. }),
    );
    assert!(m.player(1).idle);
    let drop = Input {
        buttons: buttons::DROP,
        ..Input::default()
    };
    m.tick(|_, _| drop);
    assert_eq!(
        m.events(),
        [Event::Drop {
            flag: Team::B,
            seat: 0
        }]
    );
    assert!(m.flag(B_FLAG).dropped && !m.player(0).carrying);
    // Standing on it, seat 0 cannot take it back for a second.
    for _ in 0..HZ - 1 {
        m.tick(|_, _| Input::default());
        assert_eq!(m.events(), []);
    }
    m.tick(|_, _| Input::default());
    assert_eq!(
        m.events(),
        [Event::Pickup {
            flag: Team::B,
            seat: 0
        }]
    );
    // Two seconds after it first left home, it goes back.
    let seen = run(&mut m, 2, |_, _| Input::default(), |_| true);
    assert_eq!(
        seen,
        [Event::Return {
            flag: Team::B,
            seat: None
        }]
    );
    assert!(!m.player(0).carrying && !m.flag(B_FLAG).carrying);
    assert_eq!(m.flag(B_FLAG).position, flag_b);
}

#[test]
fn the_time_limit_ends_the_match_in_a_draw_with_its_result_line() {
    let config = Ctf::configure(&table(r#"{"time_limit_s": 1}"#)).unwrap();
    let mut m = Match::new(config, 3);
    for _ in 0..HZ - 1 {
        m.tick(|_, _| Input::default());
        assert!(!m.game.is_over());
    }
    m.tick(|_, _| Input::default());
    assert!(m.game.is_over());
    assert_eq!(
        m.events(),
        [Event::Over {
            winner: None,
            captures_a: 0,
            captures_b: 0
        }]
    );
    m.tick(|_, _| Input::default());
    assert_eq!(
        (m.game.ticks(), m.events().len()),
        (HZ, 0),
        "over: no more steps"
    );
    assert_eq!(
        m.game.finish().result,
        "ticks=128 captures_a=0 captures_b=0 winner=draw end=time players=3 \
         player=0,a,0,0 player=1,b,0,0 player=2,a,0,0"
    );
}

#[test]
fn the_last_capture_ends_the_match_and_names_the_winner() {
    let config = Ctf::configure(&table(r#"{"captures": 1}"#)).unwrap();
    let mut m = Match::new(config, 2);
    m.game.leave(Seat(1));
    run(
        &mut m,
        30,
        |seat, world| {
            let me = world[usize::from(seat)].unwrap();
            match (seat, me.carrying) {
                (1, _) => Input::default(),
                (_, false) => steer(me.position, config.base(Team::B)),
                (_, true) => steer(me.position, config.base(Team::A)),
            }
        },
        |e| matches!(e, Event::Over { .. }),
    );
    assert!(m.game.is_over());
    let result = m.game.finish().result;
    let tokens: Vec<(&str, &str)> = (result.split(' '))
        .map(|t| t.split_once('=').expect("key=value"))
        .collect();
    let keys: Vec<&str> = tokens.iter().map(|t| t.0).collect();
    assert_eq!(
        keys,
        [
            "ticks",
            "captures_a",
            "captures_b",
            "winner",
            "end",
            "players",
            "player",
            "player"
        ]
    );
    assert_eq!(
        &tokens[1..6],
        [
            ("captures_a", "1"),
            ("captures_b", "0"),
            ("winner", "a"),
            ("end", "captures"),
            ("players", "2")
        ]
    );
    assert_eq!(tokens[6].1, "0,a,1,0");
}

#[test]
fn settings_default_and_refuse_bad_keys_by_name() {
    assert_eq!(Ctf::configure(&table("{}")).unwrap(), CtfConfig::default());
    let c = Ctf::configure(&table(
        r#"{"captures": 5, "time_limit_s": 600, "arena_w": 64, "arena_h": 32, "flag_return_s": 10}"#,
    ))
    .unwrap();
    assert_eq!((c.captures, c.time_limit_s, c.flag_return_s), (5, 600, 10));
    assert_eq!((c.arena_w, c.arena_h), (64.0, 32.0));
    // The settings it plays with read back as the same settings, every key filled.
    let settings = Ctf::settings(&c);
    assert_eq!(settings.len(), 5);
    assert_eq!(Ctf::configure(&settings).unwrap(), c);
    for (json, key, got) in [
        (r#"{"captures": 0}"#, "captures", "0"),
        (r#"{"captures": 256}"#, "captures", "256"),
        (r#"{"time_limit_s": 0}"#, "time_limit_s", "0"),
        (r#"{"arena_w": 19}"#, "arena_w", "19"),
        (r#"{"arena_h": 500}"#, "arena_h", "500"),
        (r#"{"flag_return_s": -1}"#, "flag_return_s", "-1"),
    ] {
        let e = Ctf::configure(&table(json)).unwrap_err();
        assert_eq!((e.key.as_str(), e.got.as_str()), (key, got), "{json}: {e}");
        assert!(e.expected.contains(" to "), "{e}");
    }
    let e = Ctf::configure(&table(r#"{"capture": 3}"#)).unwrap_err();
    assert_eq!(
        (e.key.as_str(), e.got.as_str()),
        ("capture", "an unknown key")
    );
    let e = Ctf::configure(&table(r#"{"arena_w": "big"}"#)).unwrap_err();
    assert_eq!(e.key, "arena_w");
}

#[test]
fn players_come_first_in_seat_order_then_the_flags_and_only_changes_are_written() {
    let config = CtfConfig::default();
    let seats = 5;
    let mut entities = tickforge_api::Entities::new(Ctf::max_entities(&config, seats));
    let setup = tickforge_api::MatchSetup {
        seats,
        tick_hz: HZ,
        record: false,
        stagger: 0,
    };
    let _game = Ctf::new(&config, &setup, &mut entities);
    let log: Vec<(u16, tickforge_ctf::EntityState)> = (entities.drain())
        .map(|c| match c {
            EntityChange::Set { id, lanes, .. } => (id.0, tickforge_ctf::decode_state(&lanes)),
            other => panic!("{other:?}"),
        })
        .collect();
    let ids: Vec<u16> = log.iter().map(|e| e.0).collect();
    assert_eq!(ids, [0, 1, 2, 3, 4, 5, 6]);
    for (id, s) in &log[..5] {
        assert_eq!((s.kind, s.team), (Kind::Player, Team::of(*id)));
        assert_eq!(s.position, config.spawn(*id, seats));
        assert!(s.idle, "seat {id} is idle until its client joins");
    }
    assert_eq!((log[5].1.kind, log[5].1.team), (Kind::Flag, Team::A));
    assert_eq!((log[6].1.kind, log[6].1.team), (Kind::Flag, Team::B));
    assert_eq!(log[6].1.position, config.base(Team::B));

    let mut m = Match::new(config, 4);
    m.tick(|_, _| Input::default());
    assert_eq!(
        m.sets, 4,
        "the first step writes the joined players, no longer idle"
    );
    assert!((0..4).all(|s| !m.player(s).idle));
    m.tick(|_, _| Input::default());
    assert_eq!(m.sets, 0, "nothing moved");
    let right = Input {
        move_x: 127,
        ..Input::default()
    };
    m.tick(|seat, _| if seat == 2 { right } else { Input::default() });
    assert_eq!(m.sets, 1, "only seat 2 moved");
    assert!(m.player(2).velocity[0] > 0.0);
    let view = m.game.view(Seat(2));
    assert_eq!(view.own.map(|id| id.index), Some(2));
    assert!(view.visible.is_none());
    let x = m.game.state(2).unwrap().position[0];
    assert!(
        (view.viewer.position.x - x).abs() <= 1.0 / 128.0,
        "quantized to 1/64 m"
    );
    assert_eq!(m.flag(4).team, Team::A);
    assert_eq!(m.flag(A_FLAG + 3).team, Team::B);
}

#[test]
fn a_joiner_gets_the_score_and_emotes_are_relayed_others_refused() {
    let mut m = Match::new(CtfConfig::default(), 2);
    let mut events = Events::with_capacity(4, 8);
    m.game.join(Seat(1), &mut events);
    let got: Vec<(Target, Option<Event>)> =
        events.iter().map(|(t, b)| (t, Event::decode(b))).collect();
    assert_eq!(
        got,
        [(
            Target::Seat(Seat(1)),
            Some(Event::Score {
                captures_a: 0,
                captures_b: 0,
                target: 3,
                ticks_left: 300 * HZ
            })
        )]
    );
    events.clear();
    assert_eq!(m.game.message(Seat(1), &[1, 7], &mut events), Ok(()));
    let got: Vec<(Target, Option<Event>)> =
        events.iter().map(|(t, b)| (t, Event::decode(b))).collect();
    assert_eq!(
        got,
        [(Target::All, Some(Event::Emote { seat: 1, emote: 7 }))]
    );
    // Seat 0's first emote is relayed too: the limit is per seat.
    events.clear();
    assert_eq!(m.game.message(Seat(0), &[1, 15], &mut events), Ok(()));
    assert_eq!(events.len(), 1);
    for bad in [&[][..], &[1], &[1, 16], &[2, 0], &[1, 0, 0]] {
        assert!(
            m.game.message(Seat(0), bad, &mut events).is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn events_round_trip() {
    let all = [
        Event::Pickup {
            flag: Team::B,
            seat: 300,
        },
        Event::Drop {
            flag: Team::A,
            seat: 1,
        },
        Event::Return {
            flag: Team::A,
            seat: None,
        },
        Event::Return {
            flag: Team::B,
            seat: Some(4),
        },
        Event::Tag {
            tagger: 9,
            tagged: 2,
        },
        Event::Capture {
            team: Team::B,
            seat: 7,
            captures_a: 1,
            captures_b: 2,
        },
        Event::Score {
            captures_a: 1,
            captures_b: 2,
            target: 3,
            ticks_left: 1 << 20,
        },
        Event::Emote { seat: 5, emote: 15 },
        Event::Over {
            winner: Some(Team::B),
            captures_a: 0,
            captures_b: 3,
        },
        Event::Over {
            winner: None,
            captures_a: 2,
            captures_b: 2,
        },
    ];
    for e in all {
        let mut bytes = Vec::new();
        e.write(&mut bytes);
        assert_eq!(Event::decode(&bytes), Some(e), "{bytes:?}");
        assert_eq!(Event::decode(&bytes[..bytes.len() - 1]), None);
    }
}

proptest! {
    #[test]
    fn any_bytes_decode_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..8)) {
        let input = Ctf::decode_input(&bytes);
        let well_formed = bytes.len() == INPUT_BYTES && bytes[2] & !buttons::KNOWN == 0;
        prop_assert_eq!(input.is_some(), well_formed);
        if let Some(i) = input {
            prop_assert_eq!(&i.to_bytes()[..], &bytes[..]);
            let [x, y] = i.direction();
            prop_assert!(x * x + y * y <= 1.0001);
        }
        let _ = Event::decode(&bytes);
    }
}

#[test]
fn at_most_one_emote_a_second_per_seat_is_relayed() {
    let mut m = Match::new(CtfConfig::default(), 2);
    let mut events = Events::with_capacity(64, 8);
    let mut relayed = |m: &mut Match, seat: u16, emote: u8| {
        events.clear();
        assert_eq!(m.game.message(Seat(seat), &[1, emote], &mut events), Ok(()));
        let got: Vec<Option<Event>> = events.iter().map(|(_, b)| Event::decode(b)).collect();
        match got[..] {
            [] => false,
            [Some(Event::Emote { seat: s, emote: e })] => {
                assert_eq!((s, e), (seat, emote));
                true
            }
            _ => panic!("{got:?}"),
        }
    };
    assert!(relayed(&mut m, 0, 1));
    // Sooner than a second after: accepted, not relayed; seat 1 has its own second.
    assert!(!relayed(&mut m, 0, 2));
    assert!(relayed(&mut m, 1, 3));
    for _ in 0..HZ - 1 {
        m.tick(|_, _| Input::default());
        assert!(!relayed(&mut m, 0, 4));
    }
    m.tick(|_, _| Input::default());
    assert!(relayed(&mut m, 0, 5), "a second after the first");
    assert!(!relayed(&mut m, 0, 6));
    // One a tick for four seconds: four relayed.
    let mut n = 0;
    for _ in 0..4 * HZ {
        m.tick(|_, _| Input::default());
        n += u32::from(relayed(&mut m, 1, 7));
    }
    assert_eq!(n, 4);
    // A refused message is still refused, limit or not.
    assert!(m.game.message(Seat(0), &[1, 16], &mut events).is_err());
}

/// The seats an event names.
fn seats_named(e: &Event) -> Vec<u16> {
    match *e {
        Event::Pickup { seat, .. } | Event::Drop { seat, .. } | Event::Capture { seat, .. } => {
            vec![seat]
        }
        Event::Return { seat, .. } => seat.into_iter().collect(),
        Event::Tag { tagger, tagged } => vec![tagger, tagged],
        Event::Score { .. } | Event::Emote { .. } | Event::Over { .. } => vec![],
    }
}

#[test]
fn empty_seats_never_tag_pick_up_or_return() {
    let config = CtfConfig::default();
    let seats = 10;
    // Seats 0 (A) and 1 (B) have clients; 2..10 are empty.
    let mut m = Match::seated(config, seats, [0, 1]);
    let (a_flag, b_flag) = (seats, seats + 1);
    let spawn: Vec<[f32; 2]> = (0..seats).map(|s| config.spawn(s, seats)).collect();
    // The middle of each spawn wall, on the line between the bases: seat 4 (A), 5 (B).
    let mid = config.arena_h / 2.0;
    assert_eq!((spawn[4][1], spawn[5][1]), (mid, mid));
    let wall_b = spawn[5];
    let [ne, sw] = [[config.arena_w - 1.0, config.arena_h - 1.0], [1.0, 1.0]];
    let drop_at = |me: [f32; 2], at: [f32; 2]| {
        let mut i = steer(me, at);
        if (me[0] - at[0]).hypot(me[1] - at[1]) < 0.5 {
            i.buttons = buttons::DROP;
        }
        i
    };
    // What the two clients do, phase by phase; the empty seats' sticks are full on (a
    // runtime would apply none: the game must ignore them anyway).
    let script = |phase: u8, seat: u16, world: &[Option<tickforge_ctf::EntityState>]| {
        let me = world[usize::from(seat)].unwrap().position;
        let flag = |i: u16| world[usize::from(i)].unwrap().position;
        match (phase, seat) {
            (_, 2..) => Input {
                move_x: -127,
                move_y: 127,
                buttons: 0,
            },
            // A takes B's flag, drops it in B's spawn wall, takes it again, captures.
            (0, 0) => steer(me, config.base(Team::B)),
            (1, 0) => drop_at(me, wall_b),
            (2, 0) => steer(me, flag(b_flag)),
            (3, 0) => steer(me, config.base(Team::A)),
            (_, 0) => steer(me, sw),
            // Then B takes A's flag through A's spawn wall, and drops it in its own.
            (4, 1) => steer(me, config.base(Team::A)),
            (5, 1) => drop_at(me, wall_b),
            (6, 1) => steer(me, flag(a_flag)),
            (_, 1) => steer(me, ne),
        }
    };
    let mut phase = 0u8;
    let mut dropped_at = 0;
    // Ticks a carrier touched an empty enemy seat in that seat's half, and ticks a dropped
    // flag lay within reach of an empty seat.
    let (mut carrier_touched, mut flag_in_reach) = ([0u32; 2], 0u32);
    let mut seen = Vec::new();
    for t in 0..90 * HZ {
        m.tick(|seat, world| script(phase, seat, world));
        for s in 2..seats {
            let p = m.player(s);
            assert!(
                p.idle && p.position == spawn[usize::from(s)] && p.velocity == [0.0; 2],
                "tick {t}: empty seat {s}: {p:?}"
            );
            for c in 0..2 {
                let carrier = m.player(c);
                let touching = (carrier.position[0] - p.position[0])
                    .hypot(carrier.position[1] - p.position[1])
                    <= tickforge_ctf::TOUCH;
                if carrier.carrying && touching && config.in_half(p.team, p.position) {
                    carrier_touched[usize::from(c)] += 1;
                }
            }
            for f in [a_flag, b_flag] {
                let flag = m.flag(f);
                let d = (flag.position[0] - p.position[0]).hypot(flag.position[1] - p.position[1]);
                if flag.dropped && d <= tickforge_ctf::TOUCH {
                    flag_in_reach += 1;
                }
            }
        }
        for e in m.events() {
            assert!(
                seats_named(&e).iter().all(|&s| s < 2),
                "tick {t}: an empty seat in {e:?}"
            );
            let next = match (phase, e) {
                (0, Event::Pickup { seat: 0, .. }) => 1,
                (1, Event::Drop { seat: 0, .. }) | (5, Event::Drop { seat: 1, .. }) => {
                    dropped_at = t;
                    phase + 1
                }
                (2, Event::Pickup { seat: 0, .. }) | (6, Event::Pickup { seat: 1, .. }) => {
                    // Nobody took it for the second its dropper could not: not the empty
                    // seats it lay among.
                    assert_eq!(t - dropped_at, HZ, "phase {phase}: {seen:?}");
                    phase + 1
                }
                (3, Event::Capture { seat: 0, .. }) => 4,
                (4, Event::Pickup { seat: 1, .. }) => 5,
                _ => panic!("tick {t}, phase {phase}: {e:?}; saw {seen:?}"),
            };
            phase = next;
            seen.push(e);
        }
        if phase == 7 {
            break;
        }
    }
    assert_eq!(phase, 7, "the script ran out of time: {seen:?}");
    assert_eq!(m.game.captures(), [1, 0]);
    assert!(
        carrier_touched[0] > 0 && carrier_touched[1] > 0,
        "both carriers passed through an empty seat: {carrier_touched:?}"
    );
    assert!(flag_in_reach >= 2 * HZ, "{flag_in_reach}");
    let end = m.game.finish().result;
    for s in 2..seats {
        let team = if s % 2 == 0 { 'a' } else { 'b' };
        assert!(end.contains(&format!(" player={s},{team},0,0")), "{end}");
    }
}
