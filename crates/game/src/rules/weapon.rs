//! Weapons: what a gun is ([`WeaponSpec`], plain data, with [`RIFLE`] and [`PISTOL`] in the
//! catalogue) and what one player's gun is doing ([`WeaponState`]: ready, cooling down
//! between shots, or reloading).
//!
//! The server decides every shot. The interval between two shots is the weapon's cycle time
//! rounded up to whole ticks, so no input pattern (holding FIRE, tapping it every tick, or
//! sending it on ticks the client made up) fires faster than the weapon's rate, and never
//! more than once a tick.

use std::num::{NonZeroU16, NonZeroU32};
use std::time::Duration;

use super::{duration_to_ticks, nonzero_u16, nonzero_u32, tick_after};
use crate::Tick;

/// Names a weapon in events; the catalogue uses 0 for [`PISTOL`] and 1 for [`RIFLE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WeaponId(pub u8);

/// Where a shot landed. Hit detection decides; the weapon prices it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BodyPart {
    /// The head hitbox: [`WeaponSpec::head_percent`] of body damage.
    Head,
    /// The torso and arms: body damage.
    Body,
    /// The legs: [`WeaponSpec::legs_percent`] of body damage.
    Legs,
}

/// How the trigger works.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FireMode {
    /// Fires while FIRE is held, once per fire interval.
    Automatic,
    /// Fires once per press: FIRE must be released before the next shot can fire. A press
    /// made during the interval and still held when it ends fires then.
    SemiAutomatic,
}

/// How damage falls off with distance: full up to `full_until_m`, then linearly down to
/// `floor_percent` of full at `floor_from_m`, and that floor beyond.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Falloff {
    /// Distance up to which a hit does full damage, in metres.
    pub full_until_m: f32,
    /// Distance from which a hit does `floor_percent` of full damage, in metres.
    pub floor_from_m: f32,
    /// Damage at and beyond `floor_from_m`, in percent of full damage.
    pub floor_percent: u8,
}

impl Falloff {
    /// No falloff: full damage at any distance.
    pub const NONE: Falloff = Falloff {
        full_until_m: f32::INFINITY,
        floor_from_m: f32::INFINITY,
        floor_percent: 100,
    };

    /// The fraction of full damage a hit at `distance_m` metres does, from
    /// `floor_percent / 100` to 1. A NaN distance (a caller's bug) gets the floor.
    pub fn factor(&self, distance_m: f32) -> f32 {
        debug_assert!(!distance_m.is_nan(), "hit distance is NaN");
        let floor = f32::from(self.floor_percent) / 100.0;
        if distance_m.is_nan() {
            return floor;
        }
        if distance_m <= self.full_until_m {
            return 1.0;
        }
        if distance_m >= self.floor_from_m {
            return floor;
        }
        // Here full_until_m < distance_m < floor_from_m, so the span is positive.
        let t = (distance_m - self.full_until_m) / (self.floor_from_m - self.full_until_m);
        1.0 + (floor - 1.0) * t
    }
}

/// What a weapon is: plain data, independent of the tick rate. [`WeaponState`] turns its
/// rates and durations into ticks once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WeaponSpec {
    /// How events name it.
    pub id: WeaponId,
    /// A short lowercase name for logs and tools.
    pub name: &'static str,
    /// Automatic or one shot per press.
    pub fire_mode: FireMode,
    /// The fastest the weapon cycles, in rounds per minute.
    pub rounds_per_minute: NonZeroU32,
    /// Damage of a body hit at full range, in hit points.
    pub body_damage_hp: u16,
    /// Damage of a head hit, in percent of body damage.
    pub head_percent: u16,
    /// Damage of a leg hit, in percent of body damage.
    pub legs_percent: u16,
    /// How damage falls with distance.
    pub falloff: Falloff,
    /// Rounds in a full magazine.
    pub magazine_rounds: NonZeroU16,
    /// Time from the start of a reload to the first shot it allows.
    pub reload: Duration,
}

/// An assault rifle: a VALORANT Vandal's damage (40 body, 160 head, 34 legs: 4× and 0.85×)
/// with a Phantom-like falloff to 90 % by 30 m; Counter-Strike's AK-47 cycle (600 rounds a
/// minute) and 30-round magazine; a 2.5 s reload.
pub const RIFLE: WeaponSpec = WeaponSpec {
    id: WeaponId(1),
    name: "rifle",
    fire_mode: FireMode::Automatic,
    rounds_per_minute: nonzero_u32(600),
    body_damage_hp: 40,
    head_percent: 400,
    legs_percent: 85,
    falloff: Falloff {
        full_until_m: 15.0,
        floor_from_m: 30.0,
        floor_percent: 90,
    },
    magazine_rounds: nonzero_u16(30),
    reload: Duration::from_millis(2500),
};

/// A sidearm: a VALORANT Classic's damage (26 body, 78 head, 22 legs: 3× and 0.85×) full to
/// 30 m and down to 85 % by 50 m, its 12-round magazine and 1.75 s reload; semi-automatic at
/// Counter-Strike's pistol cap of 400 rounds a minute.
pub const PISTOL: WeaponSpec = WeaponSpec {
    id: WeaponId(0),
    name: "pistol",
    fire_mode: FireMode::SemiAutomatic,
    rounds_per_minute: nonzero_u32(400),
    body_damage_hp: 26,
    head_percent: 300,
    legs_percent: 85,
    falloff: Falloff {
        full_until_m: 30.0,
        floor_from_m: 50.0,
        floor_percent: 85,
    },
    magazine_rounds: nonzero_u16(12),
    reload: Duration::from_millis(1750),
};

impl WeaponSpec {
    /// Ticks from one shot to the next at `tick_hz`: the cycle time `60 / rounds_per_minute`
    /// seconds rounded up to whole ticks, and at least one, so the weapon never fires faster
    /// than its rate nor more than once a tick. The rifle at 128 Hz: 13 ticks (9.85 shots a
    /// second, 10 in the first second).
    pub fn fire_interval_ticks(&self, tick_hz: NonZeroU32) -> u32 {
        let ticks_per_minute = u64::from(tick_hz.get()) * 60;
        let interval = ticks_per_minute.div_ceil(u64::from(self.rounds_per_minute.get()));
        u32::try_from(interval).unwrap_or(u32::MAX).max(1)
    }

    /// Ticks a reload takes at `tick_hz`, rounded up, at least one.
    pub fn reload_ticks(&self, tick_hz: NonZeroU32) -> u32 {
        duration_to_ticks(self.reload, tick_hz).max(1)
    }

    /// Damage of a hit on `part` at `distance_m` metres, in hit points: body damage × the
    /// part's percentage × the falloff factor, rounded to the nearest hit point.
    pub fn damage_hp(&self, part: BodyPart, distance_m: f32) -> u16 {
        let part_percent = match part {
            BodyPart::Head => self.head_percent,
            BodyPart::Body => 100,
            BodyPart::Legs => self.legs_percent,
        };
        let full = f32::from(self.body_damage_hp) * f32::from(part_percent) / 100.0;
        // `as` saturates: a spec with absurd numbers gives u16::MAX, not a wrap.
        (full * self.falloff.factor(distance_m)).round() as u16
    }
}

/// What a weapon is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeaponPhase {
    /// Fires on the next FIRE.
    Ready,
    /// Cycling after a shot; fires again from tick `until`.
    Cooldown {
        /// First tick the weapon may fire again.
        until: Tick,
    },
    /// Reloading; the magazine is full and the weapon fires again from tick `until`.
    Reloading {
        /// First tick the weapon may fire again.
        until: Tick,
    },
}

/// A shot [`WeaponState::update`] fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fired {
    /// Rounds left in the magazine. At 0 the weapon has started reloading.
    pub ammo_left: u16,
}

/// One player's weapon: the server-side state machine that enforces the fire rate, counts
/// ammunition and reloads. The reserve is unlimited; only the magazine counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WeaponState {
    spec: WeaponSpec,
    fire_interval_ticks: u32,
    reload_ticks: u32,
    ammo: u16,
    phase: WeaponPhase,
    /// FIRE was up at some tick since the last shot (what a semi-automatic needs).
    trigger_released: bool,
}

impl WeaponState {
    /// A ready weapon with a full magazine, its timings converted to ticks at `tick_hz`.
    pub fn new(spec: WeaponSpec, tick_hz: NonZeroU32) -> Self {
        WeaponState {
            fire_interval_ticks: spec.fire_interval_ticks(tick_hz),
            reload_ticks: spec.reload_ticks(tick_hz),
            ammo: spec.magazine_rounds.get(),
            phase: WeaponPhase::Ready,
            trigger_released: true,
            spec,
        }
    }

    /// What this weapon is.
    pub fn spec(&self) -> &WeaponSpec {
        &self.spec
    }

    /// Rounds in the magazine as of the last call. A finished reload shows from the next
    /// [`Self::update`].
    pub fn ammo(&self) -> u16 {
        self.ammo
    }

    /// The phase as of the last call.
    pub fn phase(&self) -> WeaponPhase {
        self.phase
    }

    /// Ticks from one shot to the next.
    pub fn fire_interval_ticks(&self) -> u32 {
        self.fire_interval_ticks
    }

    /// Ticks a reload takes.
    pub fn reload_ticks(&self) -> u32 {
        self.reload_ticks
    }

    /// Decides whether the weapon fires on `tick`, given whether FIRE is held on it.
    ///
    /// Call once per tick, with increasing ticks, whether FIRE is held or not (a
    /// semi-automatic must see the release). Firing the last round starts the reload.
    pub fn update(&mut self, fire_held: bool, tick: Tick) -> Option<Fired> {
        self.settle(tick);
        let trigger_ready = match self.spec.fire_mode {
            FireMode::Automatic => true,
            FireMode::SemiAutomatic => self.trigger_released,
        };
        let fired = if fire_held && trigger_ready && self.phase == WeaponPhase::Ready {
            debug_assert!(self.ammo > 0, "a ready weapon has ammunition");
            self.ammo = self.ammo.saturating_sub(1);
            self.trigger_released = false;
            self.phase = if self.ammo == 0 {
                WeaponPhase::Reloading {
                    until: tick_after(tick, self.reload_ticks),
                }
            } else {
                WeaponPhase::Cooldown {
                    until: tick_after(tick, self.fire_interval_ticks),
                }
            };
            Some(Fired {
                ammo_left: self.ammo,
            })
        } else {
            None
        };
        if !fire_held {
            self.trigger_released = true;
        }
        fired
    }

    /// Starts a reload on `tick` unless the weapon is already reloading or its magazine is
    /// full. Returns the first tick the weapon can fire again, if a reload started.
    pub fn start_reload(&mut self, tick: Tick) -> Option<Tick> {
        self.settle(tick);
        let reloading = matches!(self.phase, WeaponPhase::Reloading { .. });
        if reloading || self.ammo == self.spec.magazine_rounds.get() {
            return None;
        }
        let until = tick_after(tick, self.reload_ticks);
        self.phase = WeaponPhase::Reloading { until };
        Some(until)
    }

    /// Fills the magazine and readies the weapon, as at a round's start.
    pub fn refill(&mut self) {
        self.ammo = self.spec.magazine_rounds.get();
        self.phase = WeaponPhase::Ready;
    }

    /// Ends a cooldown or a reload whose time has come.
    fn settle(&mut self, tick: Tick) {
        match self.phase {
            WeaponPhase::Cooldown { until } if tick >= until => self.phase = WeaponPhase::Ready,
            WeaponPhase::Reloading { until } if tick >= until => self.refill(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HZ: NonZeroU32 = nonzero_u32(128);

    /// Ticks `0..ticks` with FIRE as `held(tick)`; returns the ticks that fired.
    fn fire_pattern(
        spec: WeaponSpec,
        ticks: u32,
        held: impl Fn(u32) -> bool,
    ) -> (Vec<u32>, WeaponState) {
        let mut w = WeaponState::new(spec, HZ);
        let shots = (0..ticks)
            .filter(|&t| w.update(held(t), Tick(t)).is_some())
            .collect();
        (shots, w)
    }

    #[test]
    fn fire_interval_is_the_cycle_time_rounded_up_to_ticks() {
        assert_eq!(RIFLE.fire_interval_ticks(HZ), 13); // 12.8 → 13
        assert_eq!(PISTOL.fire_interval_ticks(HZ), 20); // 19.2 → 20
        let at_tick_rate = WeaponSpec {
            rounds_per_minute: nonzero_u32(128 * 60),
            ..RIFLE
        };
        assert_eq!(at_tick_rate.fire_interval_ticks(HZ), 1);
        // Faster than the tick rate still fires at most once a tick.
        let faster = WeaponSpec {
            rounds_per_minute: nonzero_u32(1_000_000),
            ..RIFLE
        };
        assert_eq!(faster.fire_interval_ticks(HZ), 1);
        assert_eq!(RIFLE.reload_ticks(HZ), 320); // 2.5 s
        assert_eq!(PISTOL.reload_ticks(HZ), 224); // 1.75 s
    }

    #[test]
    fn holding_fire_for_one_second_fires_the_rate_of_an_automatic() {
        // 600 rounds a minute is 10 a second: 128 ticks of FIRE fire exactly 10.
        let (shots, _) = fire_pattern(RIFLE, 128, |_| true);
        assert_eq!(shots, (0..10).map(|i| i * 13).collect::<Vec<_>>());
    }

    #[test]
    fn tapping_faster_than_the_rate_does_not_exceed_it() {
        // Every other tick, and every tick on alternating bits: neither beats the interval.
        let patterns: [fn(u32) -> bool; 2] = [|t| t % 2 == 0, |t| t % 3 != 1];
        for pattern in patterns {
            let (shots, _) = fire_pattern(RIFLE, 128, pattern);
            assert!(shots.len() <= 10, "{shots:?}");
            assert!(shots.windows(2).all(|w| w[1] - w[0] >= 13), "{shots:?}");
            let (shots, _) = fire_pattern(PISTOL, 128, pattern);
            assert!(shots.windows(2).all(|w| w[1] - w[0] >= 20), "{shots:?}");
        }
        // A pistol tapped every other tick fires as soon as each interval ends, no sooner.
        let (shots, _) = fire_pattern(PISTOL, 128, |t| t % 2 == 0);
        assert_eq!(shots, vec![0, 20, 40, 60, 80, 100, 120]);
    }

    #[test]
    fn a_semi_automatic_fires_once_per_press() {
        // Held for a second: one shot.
        let (shots, _) = fire_pattern(PISTOL, 128, |_| true);
        assert_eq!(shots, vec![0]);
        // Released on tick 5, pressed again from tick 6 and held: fires when the interval
        // ends on tick 20, then never again.
        let (shots, _) = fire_pattern(PISTOL, 128, |t| t != 5);
        assert_eq!(shots, vec![0, 20]);
        // Released and pressed only after the interval: fires on the press.
        let (shots, _) = fire_pattern(PISTOL, 128, |t| !(3..30).contains(&t));
        assert_eq!(shots, vec![0, 30]);
    }

    #[test]
    fn the_magazine_empties_then_reloads() {
        let mut w = WeaponState::new(RIFLE, HZ);
        let mut fired = Vec::new();
        for t in 0..1000 {
            if let Some(f) = w.update(true, Tick(t)) {
                fired.push((t, f.ammo_left));
            }
        }
        // 30 rounds 13 ticks apart; the 30th (tick 377) starts a 320-tick reload, and the
        // next magazine begins on tick 697.
        assert_eq!(fired[0], (0, 29));
        assert_eq!(fired[29], (29 * 13, 0));
        assert_eq!(fired[30], (29 * 13 + 320, 29));
        assert_eq!(fired.len(), 30 + (1000usize - 697).div_ceil(13));

        // Ammo and phase tick by tick around the reload.
        let mut w = WeaponState::new(RIFLE, HZ);
        w.ammo = 1;
        assert_eq!(w.update(true, Tick(10)), Some(Fired { ammo_left: 0 }));
        assert_eq!(w.phase(), WeaponPhase::Reloading { until: Tick(330) });
        assert_eq!(w.update(true, Tick(329)), None);
        assert_eq!(w.ammo(), 0);
        assert_eq!(w.update(true, Tick(330)), Some(Fired { ammo_left: 29 }));
    }

    #[test]
    fn a_requested_reload_refills_and_blocks_fire_until_done() {
        let mut w = WeaponState::new(PISTOL, HZ);
        // A full magazine needs no reload.
        assert_eq!(w.start_reload(Tick(0)), None);
        assert!(w.update(true, Tick(0)).is_some());
        assert_eq!(w.start_reload(Tick(5)), Some(Tick(5 + 224)));
        // Already reloading: no second reload.
        assert_eq!(w.start_reload(Tick(6)), None);
        assert_eq!(w.update(false, Tick(7)), None);
        assert_eq!(w.update(true, Tick(228)), None);
        assert_eq!(w.update(false, Tick(228)), None);
        assert_eq!(w.update(true, Tick(229)), Some(Fired { ammo_left: 11 }));
    }

    #[test]
    fn damage_by_body_part_at_full_range() {
        assert_eq!(RIFLE.damage_hp(BodyPart::Head, 5.0), 160);
        assert_eq!(RIFLE.damage_hp(BodyPart::Body, 5.0), 40);
        assert_eq!(RIFLE.damage_hp(BodyPart::Legs, 5.0), 34);
        assert_eq!(PISTOL.damage_hp(BodyPart::Head, 0.0), 78);
        assert_eq!(PISTOL.damage_hp(BodyPart::Body, 0.0), 26);
        assert_eq!(PISTOL.damage_hp(BodyPart::Legs, 0.0), 22);
    }

    #[test]
    fn damage_falls_off_linearly_to_a_floor() {
        let body = |d| RIFLE.damage_hp(BodyPart::Body, d);
        let head = |d| RIFLE.damage_hp(BodyPart::Head, d);
        assert_eq!((body(15.0), head(15.0)), (40, 160));
        assert_eq!((body(22.5), head(22.5)), (38, 152)); // halfway: 95 %
        assert_eq!((body(30.0), head(30.0)), (36, 144)); // the floor: 90 %
        assert_eq!((body(500.0), head(500.0)), (36, 144));
        assert_eq!(RIFLE.damage_hp(BodyPart::Legs, 30.0), 31); // 30.6
        assert_eq!(PISTOL.damage_hp(BodyPart::Body, 40.0), 24); // 92.5 % of 26 = 24.05
        assert_eq!(PISTOL.damage_hp(BodyPart::Head, 50.0), 66); // 85 % of 78 = 66.3
        let flat = WeaponSpec {
            falloff: Falloff::NONE,
            ..RIFLE
        };
        assert_eq!(flat.damage_hp(BodyPart::Body, 1.0e6), 40);
        assert_eq!(flat.damage_hp(BodyPart::Body, f32::INFINITY), 40);
    }

    proptest! {
        /// Over any window, held FIRE fires at most once per cycle time: shots are at least
        /// 60/rpm seconds apart, and ten seconds hold at most 10 s × rate + 1 shots.
        #[test]
        fn held_fire_never_exceeds_the_rate(rpm in 1u32..20_000, tick_hz in 1u32..=256) {
            let hz = NonZeroU32::new(tick_hz).unwrap();
            let spec = WeaponSpec {
                rounds_per_minute: NonZeroU32::new(rpm).unwrap(),
                magazine_rounds: NonZeroU16::MAX,
                ..RIFLE
            };
            let mut w = WeaponState::new(spec, hz);
            let ticks = tick_hz * 10;
            let shots: Vec<u32> =
                (0..ticks).filter(|&t| w.update(true, Tick(t)).is_some()).collect();
            for pair in shots.windows(2) {
                // (b − a) / tick_hz ≥ 60 / rpm, in integers.
                let gap_ticks = u64::from(pair[1] - pair[0]);
                prop_assert!(gap_ticks * u64::from(rpm) >= 60 * u64::from(tick_hz));
            }
            // Shots after the first fit in 10 s at the rate: (n − 1) ≤ 10 × rpm / 60.
            prop_assert!((shots.len() as u64 - 1) * 60 <= 10 * u64::from(rpm));
        }
    }
}
