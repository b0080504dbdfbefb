//! Action-file bots against a real match ([`tickforge_server::Match`]) over loopback sockets
//! on virtual time, driven as [`run`] drives them: every input a replaying bot sends is the
//! command its recorded seat held at the corresponding tick of the recording, byte for
//! byte, as the server's world applies it; the recording loops at its end and starts over
//! with a new match.

use tickforge_game::replay::ActionFile;
use tickforge_game::rules::RulesConfig;
use tickforge_game::PlayerSlot;

use super::test_host::{Host, BOTS, PLAYERS};
use super::*;

/// The checked-in recordings (`tests/actions`).
fn recordings() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/actions")
}

/// The command `seat` of `file` held at each tick of the recording, from its first input
/// to the recording's end: read straight from the file's records, apart from
/// [`replay::ReplaySet`].
fn held_commands(file: &[u8], seat: u16) -> Vec<UserCmd> {
    let file = ActionFile::parse(file).unwrap();
    let mine: Vec<(u32, UserCmd)> = file
        .entries()
        .filter(|e| e.1 == PlayerSlot(seat))
        .map(|(t, _, c, _)| (t.0, c))
        .collect();
    let first = mine[0].0;
    let last = mine.last().unwrap().0;
    let end = file.end_tick().0.max(last + 1);
    (first..end)
        .map(|t| mine.iter().rev().find(|e| e.0 <= t).unwrap().1)
        .collect()
}

#[test]
fn a_replaying_bot_sends_its_recorded_seats_commands_tick_for_tick_looping_and_anew_each_match() {
    let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), SocketOptions::default()).unwrap();
    let set = Arc::new(ReplaySet::load(&recordings(), BuiltinMap::Arena, 128).unwrap());
    let config = BotsConfig {
        servers: vec![socket.local_addr().unwrap()],
        bots_per_match: u32::from(PLAYERS),
        replay: Some(set.clone()),
        ..BotsConfig::default()
    };
    // Two short matches: the second starts over (a new epoch) mid-recording.
    let rules = RulesConfig {
        buy: Duration::from_millis(250),
        round: Duration::from_secs(4),
        round_end: Duration::from_millis(250),
        rounds: std::num::NonZeroU8::new(1).unwrap(),
        ..RulesConfig::default()
    };
    let start = Instant::now();
    let period = Duration::from_nanos(1_000_000_000 / u64::from(config.tick_hz));
    let mut host = Host::new(&config, socket, start, rules);
    let map = Arc::new(config.map.load());
    let mut bots: Vec<Bot> = (0..u64::from(BOTS))
        .map(|i| Bot::new(&config, i, MatchId(1), Role::Wander, &map, start, None).unwrap())
        .collect();
    // What each bot's pair held, tick by tick, read apart from the replayer.
    let files: Vec<Vec<u8>> = set
        .files()
        .iter()
        .map(|f| std::fs::read(recordings().join(&f.name)).unwrap())
        .collect();
    let expected: Vec<Vec<UserCmd>> = (0..u64::from(BOTS))
        .map(|k| {
            let (name, seat) = set.pair_of(k);
            let i = set.files().iter().position(|f| f.name == name).unwrap();
            held_commands(&files[i], seat)
        })
        .collect();
    let mut scratch = Scratch::new();
    let window_end = start + period * 1_000_000;
    let mut checked = vec![0u32; bots.len()];
    let mut restarts = vec![0u32; bots.len()];
    let mut last_offset = vec![0u32; bots.len()];
    let mut matches_ended = 0;
    for t in 0..128 * 12 {
        let now = start + period * t;
        let realtime_now = stamped::realtime_now();
        let mut sent = vec![None; bots.len()];
        for (i, bot) in bots.iter_mut().enumerate() {
            bot.flush_out(now, &mut scratch.outs);
            bot.receive(now, realtime_now, start, window_end, &mut scratch);
            if let (
                Behaviour::Replay {
                    replayer,
                    started: true,
                },
                true,
            ) = (&bot.behaviour, bot.session.is_connected())
            {
                sent[i] = Some(replayer.position().1);
            }
            bot.tick(now, &config, true, &mut scratch);
            if let Behaviour::Replay { replayer, .. } = &bot.behaviour {
                let (_, offset) = replayer.position();
                // Back to the start, not at the end of a pass: a new match.
                if offset < last_offset[i] && last_offset[i] as usize != expected[i].len() - 1 {
                    restarts[i] += 1;
                }
                last_offset[i] = offset;
            }
        }
        if host.frame(now).is_some() {
            matches_ended += 1;
            continue;
        }
        let world = host.m.game().world();
        for (i, bot) in bots.iter().enumerate() {
            let (Some(offset), Some(slot)) = (sent[i], bot.slot) else {
                continue;
            };
            let applied = world.players()[usize::from(slot)].cmd;
            assert_eq!(
                cmd::to_bytes(&applied),
                cmd::to_bytes(&expected[i][offset as usize]),
                "bot {i} ({:?}) at tick {t}, offset {offset} of the recording",
                set.pair_of(i as u64)
            );
            checked[i] += 1;
        }
    }
    assert!(matches_ended >= 2, "{matches_ended} matches ended");
    for i in 0..bots.len() {
        let pass = expected[i].len() as u32;
        let Behaviour::Replay { replayer, .. } = &bots[i].behaviour else {
            unreachable!("every bot replays");
        };
        assert!(
            checked[i] > 2 * pass && replayer.position().0 >= 2 && restarts[i] >= 1,
            "bot {i}: {} inputs checked, a pass is {pass}, {:?}, {} restarts",
            checked[i],
            replayer.position(),
            restarts[i]
        );
        // Replayed shots are aimed at no one: nothing is judged.
        assert_eq!(bots[i].metrics.hitreg.shots, 0);
        assert!(bots[i].aim.is_none());
    }
}
