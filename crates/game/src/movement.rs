//! Player movement in the manner of Quake's `bg_pmove.c`: one pure function shared by the
//! server (which is authoritative) and the bots (which predict).
//!
//! Ground movement applies friction, then accelerates toward the wished direction up to the
//! maximum speed; in the air only a little acceleration and gravity apply. The world is an
//! open arena: a floor at z = 0 and walls at ±`half_extent` that the player slides along.

use crate::math::Vec3;
use crate::{angle16_to_rad, buttons, UserCmd};

/// Movement tuning, in metres and seconds. Defaults are Quake's, converted at 39.37 units
/// per metre (`sv_maxspeed` 320, `pm_accelerate` 10, `pm_friction` 6, `pm_stopspeed` 100,
/// `g_gravity` 800, jump velocity 270).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MovementParams {
    /// Top running speed, m/s.
    pub max_speed: f32,
    /// Ground acceleration, in multiples of `max_speed` per second.
    pub accelerate: f32,
    /// Air acceleration, in multiples of `max_speed` per second.
    pub air_accelerate: f32,
    /// Ground friction, per second.
    pub friction: f32,
    /// Below this speed friction acts as if at this speed, so players come to rest, m/s.
    pub stop_speed: f32,
    /// Downward acceleration, m/s².
    pub gravity: f32,
    /// Upward speed given by a jump, m/s.
    pub jump_speed: f32,
}

impl Default for MovementParams {
    fn default() -> Self {
        MovementParams {
            max_speed: 8.13,
            accelerate: 10.0,
            air_accelerate: 1.0,
            friction: 6.0,
            stop_speed: 2.54,
            gravity: 20.32,
            jump_speed: 6.86,
        }
    }
}

/// Where a player is and how it moves.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PlayerState {
    /// Feet position, metres.
    pub origin: Vec3,
    /// Velocity, m/s.
    pub velocity: Vec3,
    /// View yaw, 1/65536 turn.
    pub yaw: u16,
    /// View pitch, 1/65536 turn, within ±89°.
    pub pitch: i16,
    /// Standing on the floor.
    pub on_ground: bool,
}

/// Largest pitch accepted: 89° in 1/65536 turn.
pub const MAX_PITCH: i16 = (89.0 * 65536.0 / 360.0) as i16;

/// Advances `state` by `dt` seconds under `cmd`, inside an arena of `half_extent` metres.
pub fn pmove(
    state: &mut PlayerState,
    cmd: &UserCmd,
    params: &MovementParams,
    half_extent: f32,
    dt: f32,
) {
    state.yaw = cmd.yaw;
    state.pitch = cmd.pitch.clamp(-MAX_PITCH, MAX_PITCH);

    let yaw = angle16_to_rad(state.yaw);
    let (sin, cos) = yaw.sin_cos();
    let forward = Vec3::new(cos, sin, 0.0);
    let right = Vec3::new(sin, -cos, 0.0);
    let fmove = f32::from(cmd.forward.max(-127)) / 127.0;
    let smove = f32::from(cmd.side.max(-127)) / 127.0;
    let mut wish = forward * fmove + right * smove;
    let wish_len = wish.length();
    let wish_speed = params.max_speed * wish_len.min(1.0);
    if wish_len > 0.0 {
        wish = wish * (1.0 / wish_len);
    }

    if state.on_ground && cmd.has(buttons::JUMP) {
        state.velocity.z = params.jump_speed;
        state.on_ground = false;
    }

    if state.on_ground {
        apply_friction(state, params, dt);
        accelerate(
            state,
            wish,
            wish_speed,
            params.accelerate * params.max_speed,
            dt,
        );
        state.velocity.z = 0.0;
    } else {
        accelerate(
            state,
            wish,
            wish_speed,
            params.air_accelerate * params.max_speed,
            dt,
        );
        state.velocity.z -= params.gravity * dt;
    }

    state.origin += state.velocity * dt;

    // Walls: stop the component into the wall, keep the rest (slide).
    for (pos, vel) in [
        (&mut state.origin.x, &mut state.velocity.x),
        (&mut state.origin.y, &mut state.velocity.y),
    ] {
        if *pos > half_extent {
            *pos = half_extent;
            *vel = vel.min(0.0);
        } else if *pos < -half_extent {
            *pos = -half_extent;
            *vel = vel.max(0.0);
        }
    }
    // Floor.
    if state.origin.z <= 0.0 {
        state.origin.z = 0.0;
        state.velocity.z = state.velocity.z.max(0.0);
        state.on_ground = true;
    }
}

fn apply_friction(state: &mut PlayerState, params: &MovementParams, dt: f32) {
    let speed = state.velocity.horizontal_length();
    if speed < 1e-4 {
        state.velocity.x = 0.0;
        state.velocity.y = 0.0;
        return;
    }
    let control = speed.max(params.stop_speed);
    let new_speed = (speed - control * params.friction * dt).max(0.0);
    let scale = new_speed / speed;
    state.velocity.x *= scale;
    state.velocity.y *= scale;
}

/// Quake's `PM_Accelerate`: add speed along `dir` up to `wish_speed`, at most `accel * dt`.
fn accelerate(state: &mut PlayerState, dir: Vec3, wish_speed: f32, accel: f32, dt: f32) {
    let current = state.velocity.dot(dir);
    let add = wish_speed - current;
    if add <= 0.0 {
        return;
    }
    let step = (accel * dt).min(add);
    state.velocity.x += dir.x * step;
    state.velocity.y += dir.y * step;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DT: f32 = 1.0 / 128.0;

    fn on_ground() -> PlayerState {
        PlayerState {
            on_ground: true,
            ..Default::default()
        }
    }

    #[test]
    fn running_forward_reaches_max_speed_and_not_beyond() {
        let p = MovementParams::default();
        let mut s = on_ground();
        let cmd = UserCmd {
            forward: 127,
            ..Default::default()
        };
        for _ in 0..256 {
            pmove(&mut s, &cmd, &p, 1000.0, DT);
        }
        let speed = s.velocity.horizontal_length();
        assert!(
            speed > p.max_speed * 0.95 && speed <= p.max_speed * 1.001,
            "{speed}"
        );
        // Yaw 0 faces +x.
        assert!(
            s.origin.x > 10.0 && s.origin.y.abs() < 1e-3,
            "{:?}",
            s.origin
        );
    }

    #[test]
    fn friction_brings_a_player_to_rest() {
        let p = MovementParams::default();
        let mut s = PlayerState {
            velocity: Vec3::new(8.0, 0.0, 0.0),
            ..on_ground()
        };
        for _ in 0..128 {
            pmove(&mut s, &UserCmd::default(), &p, 1000.0, DT);
        }
        assert_eq!(s.velocity.horizontal_length(), 0.0);
    }

    #[test]
    fn a_jump_lands_after_the_ballistic_time() {
        let p = MovementParams::default();
        let mut s = on_ground();
        let jump = UserCmd {
            buttons: buttons::JUMP,
            ..Default::default()
        };
        pmove(&mut s, &jump, &p, 1000.0, DT);
        assert!(!s.on_ground);
        let mut ticks = 1;
        while !s.on_ground {
            pmove(&mut s, &UserCmd::default(), &p, 1000.0, DT);
            ticks += 1;
            assert!(ticks < 1000);
        }
        let expected = 2.0 * p.jump_speed / p.gravity / DT;
        assert!(
            (ticks as f32 - expected).abs() <= 2.0,
            "{ticks} vs {expected}"
        );
    }

    #[test]
    fn walls_stop_the_player_and_it_slides_along() {
        let p = MovementParams::default();
        let mut s = PlayerState {
            origin: Vec3::new(9.9, 0.0, 0.0),
            ..on_ground()
        };
        // Yaw 45°: into the +x wall and along +y.
        let cmd = UserCmd {
            forward: 127,
            yaw: 8192,
            ..Default::default()
        };
        for _ in 0..128 {
            pmove(&mut s, &cmd, &p, 10.0, DT);
        }
        assert_eq!(s.origin.x, 10.0);
        assert!(s.origin.y > 2.0);
    }

    #[test]
    fn pitch_is_clamped() {
        let mut s = on_ground();
        let cmd = UserCmd {
            pitch: i16::MAX,
            ..Default::default()
        };
        pmove(&mut s, &cmd, &MovementParams::default(), 10.0, DT);
        assert_eq!(s.pitch, MAX_PITCH);
    }

    proptest! {
        #[test]
        fn never_leaves_the_arena(cmds in proptest::collection::vec((any::<i8>(), any::<i8>(), any::<u8>(), any::<u16>()), 1..300)) {
            let p = MovementParams::default();
            let mut s = on_ground();
            for (f, side, b, yaw) in cmds {
                let cmd = UserCmd { forward: f, side, buttons: b, yaw, pitch: 0 };
                pmove(&mut s, &cmd, &p, 5.0, DT);
                prop_assert!(s.origin.x.abs() <= 5.0 && s.origin.y.abs() <= 5.0);
                prop_assert!(s.origin.z >= 0.0);
                prop_assert!(s.velocity.length().is_finite());
            }
        }
    }
}
