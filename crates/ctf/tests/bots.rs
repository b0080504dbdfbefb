//! Ten bot brains play a match through the game, each reading only the states a client
//! decodes from the entity log: the brains and the rules together make captures.

mod common;

use common::{Match, HZ};
use tickforge_api::Game;
use tickforge_ctf::bot::Bot;
use tickforge_ctf::{CtfConfig, Event};

#[test]
fn ten_bots_capture_within_five_minutes_of_game_time() {
    let config = CtfConfig {
        captures: 5,
        time_limit_s: 600,
        ..CtfConfig::default()
    };
    let seats = 10;
    let mut m = Match::new(config, seats);
    let bots: Vec<Bot> = (0..seats).map(|s| Bot::new(s, seats, &config)).collect();
    assert_eq!(bots.iter().filter(|b| b.is_defender()).count(), 2);
    let (mut pickups, mut tags, mut captures) = (0, 0, [0u8; 2]);
    while m.game.ticks() < 300 * HZ && captures == [0; 2] {
        let tick = m.tick;
        m.tick(|seat, world| bots[usize::from(seat)].think(tick, world));
        for e in m.events() {
            match e {
                Event::Pickup { .. } => pickups += 1,
                Event::Tag { .. } => tags += 1,
                Event::Capture { team, .. } => captures[team.index()] += 1,
                _ => {}
            }
        }
    }
    let seconds = m.game.ticks() / HZ;
    eprintln!("{seconds} s: pickups {pickups}, tags {tags}, captures {captures:?}");
    assert!(captures != [0; 2], "no capture in {seconds} s");
    assert_eq!(m.game.captures(), captures);
    assert!(!m.game.is_over());
}
