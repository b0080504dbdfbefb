//! The tick path allocates nothing: ten bots think, their inputs are applied, the match
//! steps, every seat's view is taken and the entity log is drained, for a thousand ticks.
//!
//! A counting global allocator sees every allocation of this test binary; only those made
//! inside the measured closure on this thread count.

mod common;

use common::Match;
use tickforge_api::{Game, Seat};
use tickforge_ctf::bot::Bot;
use tickforge_ctf::{Ctf, CtfConfig};
use tickforge_testkit::alloc::{allocations_in, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn steps_inputs_views_and_bots_allocate_nothing() {
    let config = CtfConfig::default();
    let seats = 10;
    let mut m = Match::new(config, seats);
    let bots: Vec<Bot> = (0..seats).map(|s| Bot::new(s, seats, &config)).collect();
    let (events, allocations) = allocations_in(|| {
        let mut events = 0;
        for _ in 0..1000 {
            let tick = m.tick;
            m.tick(|seat, world| {
                let bytes = bots[usize::from(seat)].think(tick, world).to_bytes();
                Ctf::decode_input(&bytes).expect("a bot's input decodes")
            });
            events += m.events.len();
            for s in 0..seats {
                let _ = m.game.view(Seat(s));
            }
        }
        events
    });
    assert_eq!(allocations, 0);
    assert!(events > 0, "the bots did something");
}
