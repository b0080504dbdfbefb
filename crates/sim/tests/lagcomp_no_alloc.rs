//! The lag-compensation history allocates once, when made: recording ticks (the ring full
//! and wrapping, with gaps), rewinding and looking entities up allocate nothing.
//!
//! A counting global allocator sees every allocation of this test binary; only those made
//! inside the measured closure on this thread are counted.

use std::num::NonZeroU32;
use std::time::Duration;

use tickforge_sim::lagcomp::{Clamp, LagConfig, LagHistory};
use tickforge_sim::{Tick, ViewTime};
use tickforge_testkit::alloc::{allocations_in, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What a game might record per entity: feet, yaw and a hit radius.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Volume {
    feet: [f32; 3],
    yaw: f32,
    radius: f32,
}

#[test]
fn recording_and_rewinding_a_thousand_entities_allocate_nothing() {
    let config = LagConfig {
        max_entities: 1000,
        tick_hz: NonZeroU32::new(128).unwrap(),
        max_rewind: Duration::from_millis(200),
    };
    let (history, made) = allocations_in(|| LagHistory::<Volume, u64>::new(config));
    let mut history = history.unwrap();
    assert!(made > 0, "the history allocates when made");
    let ((found, clamped), allocations) = allocations_in(|| {
        let (mut found, mut clamped) = (0u64, 0u64);
        for t in 0..1000u32 {
            // A gap every 300 ticks forgets the past.
            let tick = Tick(t + t / 300);
            let mut frame = history.begin_tick(tick, u64::from(t));
            for e in 0..1000u16 {
                // Every 7th entity is dead this tick.
                if (u32::from(e) + t) % 7 != 0 {
                    frame.record(
                        e,
                        Volume {
                            feet: [t as f32, f32::from(e), 0.0],
                            yaw: 0.0,
                            radius: 0.4,
                        },
                    );
                }
            }
            let view = ViewTime::behind(tick, (t % 40) as f32 + 0.5);
            let rewind = history.rewind(view).unwrap();
            clamped += u64::from(rewind.clamp != Clamp::None);
            for e in 0..1000u16 {
                found += u64::from(history.at(&rewind, e).is_some());
            }
        }
        (found, clamped)
    });
    assert_eq!(allocations, 0);
    // About 6 of 7 entities are present at any tick; some views are past the max rewind.
    assert!(found > 800_000 && found < 900_000, "found {found}");
    assert!(clamped > 100, "clamped {clamped}");
    assert_eq!(history.stats().rewinds, 1000);
    assert_eq!(history.stats().clamped_to_oldest(), clamped);
}
