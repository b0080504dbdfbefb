//! A match's ticks allocate nothing: [`Rules`] reserves its event buffer when it is made,
//! and draining it every tick keeps the capacity.
//!
//! A counting global allocator sees every allocation of this test binary; only those made
//! inside the measured closure on this thread are counted.

use std::time::Duration;

use tickforge_game::rules::{BodyPart, Phase, Rules, RulesConfig, RulesEvent, Team};
use tickforge_game::{buttons, PlayerSlot, Tick, UserCmd};
use tickforge_testkit::alloc::{allocations_in, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn rules_ticks_of_a_whole_match_allocate_nothing() {
    let roster: Vec<Team> = [Team::Attackers; 5]
        .into_iter()
        .chain([Team::Defenders; 5])
        .collect();
    let config = RulesConfig {
        buy: Duration::from_millis(100),
        round: Duration::from_secs(3),
        round_end: Duration::from_millis(100),
        ..RulesConfig::default()
    };
    let mut rules = Rules::new(config, &roster, Tick(0));
    let fire = UserCmd {
        buttons: buttons::FIRE,
        ..UserCmd::default()
    };
    let ((kills, ticks), allocations) = allocations_in(|| {
        let mut kills = 0u32;
        let mut tick = Tick(0);
        while rules.phase() != Phase::MatchOver {
            // Everyone holds FIRE and every shot hits the enemy across, 40 m away, in the
            // legs (31 hp): every round has kills on both sides.
            for s in 0..10u8 {
                if rules.try_fire(PlayerSlot(u16::from(s)), &fire, tick) {
                    let victim = PlayerSlot(u16::from((s + 5) % 10));
                    let _ = rules.apply_hit(
                        PlayerSlot(u16::from(s)),
                        victim,
                        BodyPart::Legs,
                        40.0,
                        tick,
                    );
                }
            }
            rules.end_tick(tick);
            for event in rules.drain_events() {
                kills += u32::from(matches!(event, RulesEvent::Kill { .. }));
            }
            tick = tick.next();
        }
        (kills, tick.0)
    });
    assert_eq!(allocations, 0, "allocations in {ticks} ticks");
    assert!(kills >= 15, "kills {kills}");
    assert!(rules.result().is_some());
}
