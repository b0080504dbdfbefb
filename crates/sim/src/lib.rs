//! What every tickforge game and the runtime agree on about time, with no I/O and no
//! networking: the tick a match is at ([`Tick`]), the moment a client was showing when it
//! made a command ([`ViewTime`]); lag compensation as a service
//! ([`lagcomp::LagHistory`]): a ring of the per-entity samples a game records each tick and
//! a rewind to a client's view time for its shot tests; the frame of the line a finished
//! match leaves in a results file ([`result_line`]); the spatial grid of where entities
//! stand ([`spatial::Grid`]), kept by replication and lent to the game's step; and the
//! cache hints the runtime's hot loops share ([`hint::prefetch`], [`hint::prefetch_item`]).
//!
//! The game crates (the reference shooter's `tickforge-game`, a studio's own), the
//! runtime's API (`tickforge-api`), replication and, for the cache hint, the protocol
//! crate depend on this crate; it depends on nothing in the workspace.

pub mod hint;
pub mod lagcomp;
pub mod result_line;
pub mod spatial;

/// A simulation step number; tick 0 is the match's first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tick(pub u32);

impl Tick {
    /// The tick after this one.
    pub fn next(self) -> Tick {
        Tick(self.0.wrapping_add(1))
    }
}

/// The moment of the world a client was showing when it made a command: a tick and
/// `frac`/256 of the way to the next one (clients render between snapshots).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ViewTime {
    /// The snapshot tick at or before the moment shown.
    pub tick: Tick,
    /// How far toward `tick + 1`, in 1/256 of a tick.
    pub frac: u8,
}

impl ViewTime {
    /// Exactly at `tick`.
    pub fn at(tick: Tick) -> ViewTime {
        ViewTime { tick, frac: 0 }
    }

    /// The view time `delay_ticks` before `newest`, rounded to 1/256 tick; a delay that is
    /// negative or NaN counts as 0.
    pub fn behind(newest: Tick, delay_ticks: f32) -> ViewTime {
        let q = if delay_ticks > 0.0 {
            (delay_ticks * 256.0).round().min(u32::MAX as f32) as u32
        } else {
            0
        };
        let (whole, part) = (q / 256, q % 256);
        if part == 0 {
            ViewTime::at(Tick(newest.0.wrapping_sub(whole)))
        } else {
            ViewTime {
                tick: Tick(newest.0.wrapping_sub(whole + 1)),
                frac: (256 - part) as u8,
            }
        }
    }

    /// The shot's rewind arguments for this view: a command tick and the interpolation
    /// delay before it, in ticks, as the shooter's history takes them.
    pub fn rewind_args(self) -> (Tick, f32) {
        if self.frac == 0 {
            (self.tick, 0.0)
        } else {
            (self.tick.next(), 1.0 - f32::from(self.frac) / 256.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_behind_the_newest_tick_rewinds_by_that_much() {
        let v = ViewTime::behind(Tick(100), 4.5);
        assert_eq!(
            v,
            ViewTime {
                tick: Tick(95),
                frac: 128
            }
        );
        let (command, delay) = v.rewind_args();
        assert_eq!(command, Tick(96));
        assert_eq!(command.0 as f32 - delay, 95.5);
        assert_eq!(ViewTime::behind(Tick(100), 3.0), ViewTime::at(Tick(97)));
        assert_eq!(ViewTime::at(Tick(97)).rewind_args(), (Tick(97), 0.0));
        assert_eq!(ViewTime::behind(Tick(5), -1.0), ViewTime::at(Tick(5)));
        assert_eq!(ViewTime::behind(Tick(5), f32::NAN), ViewTime::at(Tick(5)));
    }
}
