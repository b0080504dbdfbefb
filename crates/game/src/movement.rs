//! Player movement in the manner of Quake III's `bg_pmove.c`: one pure function shared by the
//! server (which is authoritative) and the bots (which predict).
//!
//! [`pmove`] reads the world only through the [`Map`] passed in. On the ground it applies
//! friction, then accelerates toward the wished direction up to the maximum speed; in the air
//! only a little acceleration and gravity apply. The move itself is `PM_SlideMove`: sweep the
//! player box, stop at the first face, clip the velocity along it and sweep the rest, up to
//! four times. A walking player that was blocked tries the same move a step higher and settles
//! back down (`PM_StepSlideMove`), which climbs low boxes. Every move is a swept trace, so no
//! speed passes through a wall.
//!
//! # Crouching
//!
//! Holding [`buttons::CROUCH`] crouches at once: the player box shrinks to
//! [`MovementParams::crouch_hull_height`] with the feet where they were, and acceleration
//! aims for [`MovementParams::crouch_speed_scale`] of the top speed. A player running when it
//! crouches is not stopped dead: friction brings it down to the crouched speed in about a
//! fifth of a second, and acceleration never adds speed above it. Releasing the button stands
//! up only when the standing box fits (a sweep of the head up to standing height meets
//! nothing); under a low ceiling the player stays crouched until it walks out, as in Source's
//! `CanUnduck`. A crouched player may jump, at the same speed as standing (CS allows it). The
//! feet stay put in the air too, so a crouched jump reaches no higher than a standing one:
//! unlike Source, which tucks the feet up mid-air, crouch-jumping here only lowers the head.
//! [`PlayerState::crouched`] is the stance the pose and hitboxes follow
//! ([`PlayerState::stance`]).

use crate::map::{Aabb, Hull, Map, Near};
use crate::math::Vec3;
use crate::{angle16_to_rad, buttons, UserCmd};

/// Movement tuning, in metres and seconds. Defaults are Quake III's, converted at 39.37 units
/// per metre (`sv_maxspeed` 320, `pm_accelerate` 10, `pm_airaccelerate` 1, `pm_friction` 6,
/// `pm_stopspeed` 100, `g_gravity` 800, `JUMP_VELOCITY` 270, `STEPSIZE` 18), except the
/// player box, which is a modern shooter's 0.8 × 0.8 × 1.8 m (1.4 m crouched), and the
/// crouched speed, which is CS:GO's.
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
    /// Tallest ledge a player walks up without jumping, metres.
    pub step_height: f32,
    /// Half the player box's width along x and along y, metres.
    pub hull_half_width: f32,
    /// The player box's height above the feet when standing, metres.
    pub hull_height: f32,
    /// The player box's height above the feet when crouched, metres; below `hull_height`.
    pub crouch_hull_height: f32,
    /// Top speed when crouched, as a fraction of `max_speed`.
    pub crouch_speed_scale: f32,
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
            step_height: 0.45,
            hull_half_width: 0.4,
            hull_height: 1.8,
            // The crouched hitboxes of `PoseParams::default` reach 1.36 m (the crown with the
            // run cycle's bob); this keeps the standing box's 5 cm above them. CS:GO's 54 of
            // 72 units would be 1.35 m.
            crouch_hull_height: 1.4,
            // CS:GO's `CS_PLAYER_SPEED_DUCK_MODIFIER`.
            crouch_speed_scale: 0.34,
        }
    }
}

impl MovementParams {
    /// The player's collision box when standing: the largest it gets, so what holds for it
    /// (room at a spawn point, a fog-of-war bound) holds for a crouched player too.
    pub fn hull(&self) -> Hull {
        self.hull_for(false)
    }

    /// The player's collision box when `crouched` or standing: the box [`pmove`] moves for a
    /// player whose [`PlayerState::crouched`] is that.
    pub fn hull_for(&self, crouched: bool) -> Hull {
        Hull {
            half_width: self.hull_half_width,
            height: if crouched {
                self.crouch_hull_height
            } else {
                self.hull_height
            },
        }
    }

    /// The top running speed when `crouched` or standing, m/s.
    pub fn top_speed(&self, crouched: bool) -> f32 {
        if crouched {
            self.max_speed * self.crouch_speed_scale
        } else {
            self.max_speed
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
    /// Standing on a floor or a box top.
    pub on_ground: bool,
    /// Crouched: the shorter, slower player box of [`MovementParams::hull_for`]. Set by
    /// [`pmove`] from [`buttons::CROUCH`] and the headroom.
    pub crouched: bool,
}

/// Largest pitch accepted: 89° in 1/65536 turn.
pub const MAX_PITCH: i16 = (89.0 * 65536.0 / 360.0) as i16;

/// Sweeps a move may take before giving up on the rest of the tick (Quake's `numbumps`).
const MAX_BUMPS: usize = 4;
/// Planes a move may be clipped against in one tick (Quake's `MAX_CLIP_PLANES`).
const MAX_CLIP_PLANES: usize = 5;
/// Clipping removes slightly more than the velocity into a plane, so the next sweep starts
/// moving away from it (Quake's `OVERCLIP`).
const OVERCLIP: f32 = 1.001;
/// Below this speed into a plane a move does not interact with it, m/s (Quake's 0.1 units/s).
const INTO_PLANE_M_PER_S: f32 = 0.1 / 39.37;
/// Speed added along a plane hit twice in one move, to get off it, m/s (1 unit/s).
const NUDGE_M_PER_S: f32 = 1.0 / 39.37;
/// How far below the feet the ground is looked for, metres: twice the skin a resting player
/// floats at (Quake's 0.25 units against its 0.125).
const GROUND_PROBE_M: f32 = 2.0 * crate::map::SKIN_M;
/// Faces this steep or flatter are ground (Quake's `MIN_WALK_NORMAL`); a box's top is 1.
const MIN_WALK_NORMAL: f32 = 0.7;
/// Rising faster than this off the ground is leaving it, m/s (Quake's 10 units/s).
const LEAVING_GROUND_M_PER_S: f32 = 10.0 / 39.37;
const UP: Vec3 = Vec3::new(0.0, 0.0, 1.0);

/// Advances `state` by `dt` seconds under `cmd` against the boxes of `map` (and its
/// barriers, when `map` has them raised: pass [`Map::with_barriers`]`(true)` during the buy
/// phase). A pure function of its arguments: the same inputs give bit-identical results.
pub fn pmove(state: &mut PlayerState, cmd: &UserCmd, params: &MovementParams, map: &Map, dt: f32) {
    state.yaw = cmd.yaw;
    state.pitch = cmd.pitch.clamp(-MAX_PITCH, MAX_PITCH);
    if cmd.has(buttons::CROUCH) {
        state.crouched = true;
    } else if state.crouched && has_headroom_to_stand(state, params, map) {
        state.crouched = false;
    }
    let hull = params.hull_for(state.crouched);
    let top_speed = params.top_speed(state.crouched);

    let yaw = angle16_to_rad(state.yaw);
    let (sin, cos) = yaw.sin_cos();
    let forward = Vec3::new(cos, sin, 0.0);
    let right = Vec3::new(sin, -cos, 0.0);
    let fmove = f32::from(cmd.forward.max(-127)) / 127.0;
    let smove = f32::from(cmd.side.max(-127)) / 127.0;
    let mut wish = forward * fmove + right * smove;
    let wish_len = wish.length();
    let wish_speed = top_speed * wish_len.min(1.0);
    if wish_len > 0.0 {
        wish = wish * (1.0 / wish_len);
    }

    // Every sweep from here on is of this hull and within a metre or so of the feet: find the
    // boxes that may stop them once.
    let near = map.near(tick_region(state, params, dt), hull);
    state.on_ground = ground_trace(state, &near).is_some();
    if state.on_ground && cmd.has(buttons::JUMP) {
        state.velocity.z = params.jump_speed;
        state.on_ground = false;
    }

    if state.on_ground {
        apply_friction(state, params, dt);
        // A player that crouched while running slows under friction, not at once, but
        // acceleration adds nothing above the crouched speed.
        let cap = if state.crouched {
            state
                .velocity
                .horizontal_length()
                .max(top_speed)
                .min(params.max_speed)
        } else {
            params.max_speed
        };
        accelerate(
            state,
            wish,
            wish_speed,
            params.accelerate * params.max_speed,
            dt,
        );
        // Quake's accelerate lets a player pressed diagonally into a wall run along it up to
        // 17% faster than its wished speed; Source's `WalkMove` caps ground speed, and so do
        // we.
        let speed = state.velocity.horizontal_length();
        if speed > cap {
            let scale = cap / speed;
            state.velocity.x *= scale;
            state.velocity.y *= scale;
        }
        // Every floor is a box top, so sliding along the ground plane is moving level.
        state.velocity.z = 0.0;
        if state.velocity.x != 0.0 || state.velocity.y != 0.0 {
            step_slide_move(state, params, &near, dt);
        }
    } else {
        accelerate(
            state,
            wish,
            wish_speed,
            params.air_accelerate * params.max_speed,
            dt,
        );
        // No stepping in the air, as in Source: Quake III's airborne step lets a jump climb
        // a ledge of apex plus step height, which blurs cover heights.
        slide_move(state, params, &near, dt, true);
    }

    if let Some(ground) = ground_trace(state, &near) {
        // Settle onto it: a standing player always rests one skin above its floor.
        state.origin = ground;
        state.on_ground = true;
        state.velocity.z = 0.0;
    } else {
        state.on_ground = false;
    }
}

/// True when the standing box fits where a crouched player is: a sweep of the crouched box up
/// by the difference in height meets nothing, so the head ends at least a skin below any
/// ceiling, as every trace leaves it.
fn has_headroom_to_stand(state: &PlayerState, params: &MovementParams, map: &Map) -> bool {
    let rise = params.hull_height - params.crouch_hull_height;
    if rise <= 0.0 {
        return true;
    }
    let up = state.origin + UP * rise;
    map.trace_hull(state.origin, up, params.hull_for(true))
        .fraction
        == 1.0
}

/// Where the feet may sweep in one tick from where they are, metres: as far as the player could
/// go at its speed plus a jump's, a tick's acceleration and a tick's fall, twice over, and a
/// step up or down besides. Only speed is at stake: a sweep that leaves the region is traced
/// through the whole map, to the same result.
fn tick_region(state: &PlayerState, params: &MovementParams, dt: f32) -> Aabb {
    // The sum of the components bounds the speed without a square root.
    let v = state.velocity;
    let speed = v.x.abs()
        + v.y.abs()
        + v.z.abs()
        + params.jump_speed
        + (params.accelerate * params.max_speed + params.gravity) * dt;
    let reach = 2.0 * speed * dt + params.step_height + GROUND_PROBE_M;
    let reach = Vec3::new(reach, reach, reach);
    Aabb {
        min: state.origin - reach,
        max: state.origin + reach,
    }
}

/// Quake's `PM_GroundTrace`: where the feet would rest when standing on something walkable
/// and not rising off it.
fn ground_trace(state: &PlayerState, near: &Near) -> Option<Vec3> {
    let below = state.origin - UP * GROUND_PROBE_M;
    let t = near.trace_hull(state.origin, below);
    let standing = t.fraction < 1.0
        && t.normal.z >= MIN_WALK_NORMAL
        && state.velocity.dot(t.normal) <= LEAVING_GROUND_M_PER_S;
    standing.then_some(t.end)
}

/// Quake's `PM_StepSlideMove` for a walking player: slide; if something was in the way,
/// slide again from a step higher and settle back down, which climbs ledges up to
/// `step_height`.
fn step_slide_move(state: &mut PlayerState, params: &MovementParams, near: &Near, dt: f32) {
    let start_origin = state.origin;
    let start_velocity = state.velocity;
    if !slide_move(state, params, near, dt, false) {
        return; // nothing in the way
    }

    let up = near.trace_hull(start_origin, start_origin + UP * params.step_height);
    let stepped = up.end.z - start_origin.z;
    state.origin = up.end;
    state.velocity = start_velocity;
    slide_move(state, params, near, dt, false);

    let settle = near.trace_hull(state.origin, state.origin - UP * stepped);
    state.origin = settle.end;
    if settle.fraction < 1.0 {
        state.velocity = clip_velocity(state.velocity, settle.normal, OVERCLIP);
    }
}

/// Quake's `PM_SlideMove`: sweep, stop at the first face, clip the velocity to slide along
/// every face met so far, and sweep the time left, up to [`MAX_BUMPS`] times. With `gravity`
/// the vertical speed is integrated with the trapezoid rule, which is exact for a fall.
/// Returns true when something was in the way.
fn slide_move(
    state: &mut PlayerState,
    params: &MovementParams,
    near: &Near,
    dt: f32,
    gravity: bool,
) -> bool {
    let mut end_velocity = state.velocity;
    if gravity {
        end_velocity.z -= params.gravity * dt;
        state.velocity.z = (state.velocity.z + end_velocity.z) * 0.5;
    }

    let mut planes = [Vec3::ZERO; MAX_CLIP_PLANES];
    let mut count = 0;
    if state.on_ground {
        planes[count] = UP;
        count += 1;
    }
    // Never turn back against the velocity the move began with.
    planes[count] = state.velocity.normalize_or_zero();
    count += 1;

    let mut time_left = dt;
    let mut bumps = 0;
    while bumps < MAX_BUMPS {
        let end = state.origin + state.velocity * time_left;
        let t = near.trace_hull(state.origin, end);
        if t.fraction > 0.0 {
            state.origin = t.end;
        }
        if t.fraction == 1.0 {
            break;
        }
        bumps += 1;
        time_left -= time_left * t.fraction;

        if count >= MAX_CLIP_PLANES {
            state.velocity = Vec3::ZERO;
            return true;
        }
        // The same face again: push off it a little rather than clip forever.
        if planes[..count].iter().any(|p| t.normal.dot(*p) > 0.99) {
            state.velocity += t.normal * NUDGE_M_PER_S;
            continue;
        }
        planes[count] = t.normal;
        count += 1;

        // Find a velocity that runs along every face met.
        for i in 0..count {
            if state.velocity.dot(planes[i]) >= INTO_PLANE_M_PER_S {
                continue; // not moving into this one
            }
            let mut clipped = clip_velocity(state.velocity, planes[i], OVERCLIP);
            let mut end_clipped = clip_velocity(end_velocity, planes[i], OVERCLIP);
            for j in 0..count {
                if j == i || clipped.dot(planes[j]) >= INTO_PLANE_M_PER_S {
                    continue;
                }
                clipped = clip_velocity(clipped, planes[j], OVERCLIP);
                end_clipped = clip_velocity(end_clipped, planes[j], OVERCLIP);
                if clipped.dot(planes[i]) >= 0.0 {
                    continue;
                }
                // Two faces meet in a crease: run along it.
                let crease = planes[i].cross(planes[j]).normalize_or_zero();
                clipped = crease * crease.dot(state.velocity);
                end_clipped = crease * crease.dot(end_velocity);
                // A third face closes the crease: stop dead.
                let closed = planes[..count]
                    .iter()
                    .enumerate()
                    .any(|(k, p)| k != i && k != j && clipped.dot(*p) < INTO_PLANE_M_PER_S);
                if closed {
                    state.velocity = Vec3::ZERO;
                    return true;
                }
            }
            state.velocity = clipped;
            end_velocity = end_clipped;
            break;
        }
    }
    if gravity {
        state.velocity = end_velocity;
    }
    bumps != 0
}

/// Quake's `PM_ClipVelocity`: remove the part of `v` into the plane of normal `n`, and a
/// little more (`overbounce`), so the result runs along the plane.
fn clip_velocity(v: Vec3, n: Vec3, overbounce: f32) -> Vec3 {
    let into = v.dot(n);
    let backoff = if into < 0.0 {
        into * overbounce
    } else {
        into / overbounce
    };
    v - n * backoff
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
    use crate::map::{Aabb, SKIN_M};
    use proptest::prelude::*;

    const DT: f32 = 1.0 / 128.0;

    /// A sealed 200 × 200 m room, plus `extra` box lines.
    fn room(extra: &str) -> Map {
        Map::parse(&format!(
            "box -101 -101 -1 101 101 0\n\
             box -101 -101 50 101 101 51\n\
             box -101 -101 0 -100 101 50\n\
             box 100 -101 0 101 101 50\n\
             box -100 -101 0 100 -100 50\n\
             box -100 100 0 100 101 50\n\
             spawn attackers 0 0 0 0\n{extra}"
        ))
        .unwrap()
    }

    fn standing_at(x: f32, y: f32, z: f32) -> PlayerState {
        PlayerState {
            origin: Vec3::new(x, y, z + SKIN_M),
            on_ground: true,
            ..Default::default()
        }
    }

    fn run(s: &mut PlayerState, cmd: UserCmd, map: &Map, ticks: usize) {
        for _ in 0..ticks {
            pmove(s, &cmd, &MovementParams::default(), map, DT);
        }
    }

    fn forward(yaw: u16) -> UserCmd {
        UserCmd {
            forward: 127,
            yaw,
            ..Default::default()
        }
    }

    fn jump() -> UserCmd {
        UserCmd {
            buttons: buttons::JUMP,
            ..Default::default()
        }
    }

    /// The player's box overlaps no box of `map`, and its feet are inside `interior`.
    fn assert_clear(map: &Map, s: &PlayerState, interior: &Aabb) {
        let hull = MovementParams::default().hull_for(s.crouched);
        let body = hull.at(s.origin);
        for (i, b) in map.boxes().iter().enumerate() {
            assert!(!b.overlaps(&body), "inside box {i} {b:?}: {s:?}");
        }
        let o = s.origin;
        assert!(
            o.x > interior.min.x
                && o.x < interior.max.x
                && o.y > interior.min.y
                && o.y < interior.max.y
                && o.z >= interior.min.z
                && o.z < interior.max.z,
            "outside: {s:?}"
        );
    }

    #[test]
    fn running_forward_reaches_max_speed_and_not_beyond() {
        let map = room("");
        let p = MovementParams::default();
        let mut s = standing_at(0.0, 0.0, 0.0);
        run(&mut s, forward(0), &map, 256);
        let speed = s.velocity.horizontal_length();
        assert!(
            speed > p.max_speed * 0.95 && speed <= p.max_speed * 1.001,
            "{speed}"
        );
        // Yaw 0 faces +x; the floor holds the player at a skin above it.
        assert!(s.origin.x > 10.0 && s.origin.y.abs() < 1e-3, "{s:?}");
        assert_eq!(s.origin.z, SKIN_M);
        assert!(s.on_ground);
    }

    #[test]
    fn friction_brings_a_player_to_rest() {
        let map = room("");
        let mut s = PlayerState {
            velocity: Vec3::new(8.0, 0.0, 0.0),
            ..standing_at(0.0, 0.0, 0.0)
        };
        run(&mut s, UserCmd::default(), &map, 128);
        assert_eq!(s.velocity.horizontal_length(), 0.0);
    }

    #[test]
    fn a_jump_reaches_its_apex_and_lands_after_the_ballistic_time() {
        let map = room("");
        let p = MovementParams::default();
        let mut s = standing_at(0.0, 0.0, 0.0);
        run(&mut s, jump(), &map, 1);
        assert!(!s.on_ground);
        let mut ticks = 1;
        let mut apex = s.origin.z;
        while !s.on_ground {
            run(&mut s, UserCmd::default(), &map, 1);
            apex = apex.max(s.origin.z);
            ticks += 1;
            assert!(ticks < 1000);
        }
        // v²/2g = 1.158 m above the skin; the trapezoid rule makes each tick's height exact.
        let expected_apex = p.jump_speed * p.jump_speed / (2.0 * p.gravity) + SKIN_M;
        assert!(
            (apex - expected_apex).abs() < 0.005,
            "{apex} vs {expected_apex}"
        );
        // 2v/g = 0.675 s = 86.4 ticks.
        let expected_ticks = 2.0 * p.jump_speed / p.gravity / DT;
        assert!(
            (ticks as f32 - expected_ticks).abs() <= 1.0,
            "{ticks} vs {expected_ticks}"
        );
        assert_eq!(s.origin.z, SKIN_M);
        assert_eq!(s.velocity.z, 0.0);
    }

    #[test]
    fn walls_stop_the_player_and_it_slides_along() {
        // A wall whose west face is at x = 10.
        let map = room("box 10 -50 0 11 50 3");
        let mut s = standing_at(8.0, 0.0, 0.0);
        // Yaw 45°: into the wall and along +y.
        run(&mut s, forward(8192), &map, 128);
        let half = MovementParams::default().hull_half_width;
        assert!(s.origin.x < 10.0 - half, "{s:?}");
        assert!(s.origin.x > 10.0 - half - 0.01, "{s:?}");
        assert!(s.origin.y > 2.0);
        // Along the wall at full speed, and no faster.
        let max = MovementParams::default().max_speed;
        assert!(
            s.velocity.y > max * 0.99 && s.velocity.y <= max * 1.0001,
            "{s:?}"
        );
    }

    #[test]
    fn sliding_along_a_wall_keeps_the_tangential_speed() {
        let map = room("box 10 -50 0 11 50 3");
        let half = MovementParams::default().hull_half_width;
        // In the air, 2 cm from the wall, moving into it at 30 m/s and along it at 5 m/s.
        let mut s = PlayerState {
            origin: Vec3::new(10.0 - half - 0.02, 0.0, 1.0),
            velocity: Vec3::new(30.0, 5.0, 0.0),
            ..Default::default()
        };
        run(&mut s, UserCmd::default(), &map, 1);
        assert_eq!(s.velocity.y, 5.0);
        assert!(s.velocity.x <= 0.0 && s.velocity.x > -0.05, "{s:?}");
        // The whole tick's worth of sliding happened.
        assert!((s.origin.y - 5.0 * DT).abs() < 1e-4, "{s:?}");
        assert!(s.origin.x < 10.0 - half);
    }

    #[test]
    fn walking_into_a_low_box_climbs_it() {
        let map = room("box 2 -5 0 4 5 0.4");
        let mut s = standing_at(0.0, 0.0, 0.0);
        run(&mut s, forward(0), &map, 64);
        assert!(s.origin.x > 2.5, "{s:?}");
        assert!((s.origin.z - (0.4 + SKIN_M)).abs() < 1e-4, "{s:?}");
        assert!(s.on_ground);
        // And down the far side onto the floor again.
        run(&mut s, forward(0), &map, 128);
        assert!(
            s.origin.x > 5.0 && s.origin.z == SKIN_M && s.on_ground,
            "{s:?}"
        );
    }

    #[test]
    fn walking_climbs_stairs_of_steps() {
        let map = room("box 2 -5 0 4 5 0.4\nbox 4 -5 0 6 5 0.8\nbox 6 -5 0 8 5 1.2");
        let mut s = standing_at(0.0, 0.0, 0.0);
        run(&mut s, forward(0), &map, 128);
        assert!((s.origin.z - (1.2 + SKIN_M)).abs() < 1e-4, "{s:?}");
    }

    #[test]
    fn walking_into_a_box_above_step_height_stops() {
        let map = room("box 2 -5 0 4 5 0.5");
        let mut s = standing_at(0.0, 0.0, 0.0);
        run(&mut s, forward(0), &map, 128);
        let half = MovementParams::default().hull_half_width;
        assert!(
            s.origin.x < 2.0 - half && s.origin.x > 2.0 - half - 0.01,
            "{s:?}"
        );
        assert_eq!(s.origin.z, SKIN_M);
        assert!(s.on_ground);
    }

    #[test]
    fn a_jump_lands_on_a_box_top() {
        let map = room("box 1.5 -5 0 3.5 5 1");
        let mut s = standing_at(0.0, 0.0, 0.0);
        // Run at the crate, jump, and keep pressing forward.
        run(&mut s, forward(0), &map, 20);
        run(
            &mut s,
            UserCmd {
                buttons: buttons::JUMP,
                ..forward(0)
            },
            &map,
            1,
        );
        run(&mut s, forward(0), &map, 100);
        assert!(s.on_ground, "{s:?}");
        assert!((s.origin.z - (1.0 + SKIN_M)).abs() < 1e-4, "{s:?}");
        assert!(s.origin.x > 1.5, "{s:?}");
    }

    #[test]
    fn a_jump_does_not_reach_a_box_top_above_its_apex() {
        let map = room("box 1.5 -5 0 3.5 5 1.3");
        let mut s = standing_at(0.0, 0.0, 0.0);
        run(&mut s, forward(0), &map, 20);
        run(
            &mut s,
            UserCmd {
                buttons: buttons::JUMP,
                ..forward(0)
            },
            &map,
            1,
        );
        run(&mut s, forward(0), &map, 100);
        assert_eq!(s.origin.z, SKIN_M);
        assert!(s.origin.x < 1.5);
    }

    #[test]
    fn a_fall_lands_on_a_box_top() {
        let map = room("box -1 -1 0 1 1 2");
        let mut s = PlayerState {
            origin: Vec3::new(0.0, 0.0, 10.0),
            velocity: Vec3::new(0.0, 0.0, -30.0),
            ..Default::default()
        };
        run(&mut s, UserCmd::default(), &map, 64);
        assert!(s.on_ground);
        assert_eq!(s.velocity, Vec3::ZERO);
        assert!((s.origin.z - (2.0 + SKIN_M)).abs() < 1e-4, "{s:?}");
    }

    #[test]
    fn walking_off_a_ledge_falls() {
        let map = room("box -5 -5 0 1 5 2");
        let mut s = standing_at(0.0, 0.0, 2.0);
        run(&mut s, forward(0), &map, 40);
        assert!(!s.on_ground && s.origin.z < 2.0, "{s:?}");
        run(&mut s, forward(0), &map, 128);
        assert!(s.on_ground && s.origin.z == SKIN_M, "{s:?}");
    }

    #[test]
    fn the_roof_stops_a_jump() {
        // A ceiling 2.4 m up: the head (1.8 m) meets it 0.6 m into the jump.
        let map = room("box -5 -5 2.4 5 5 3");
        let mut s = standing_at(0.0, 0.0, 0.0);
        run(&mut s, jump(), &map, 1);
        let mut top: f32 = 0.0;
        for _ in 0..200 {
            run(&mut s, UserCmd::default(), &map, 1);
            top = top.max(s.origin.z);
        }
        assert!(top <= 0.6 - SKIN_M + 1e-4 && top > 0.55, "{top}");
        assert!(s.on_ground);
    }

    #[test]
    fn running_into_a_corner_stops_there() {
        // Walls meeting at (10, 10).
        let map = room("box 10 -50 0 11 11 3\nbox -50 10 0 11 11 3");
        let mut s = standing_at(8.0, 8.0, 0.0);
        run(&mut s, forward(8192), &map, 256);
        let half = MovementParams::default().hull_half_width;
        let corner = 10.0 - half;
        assert!(s.origin.x < corner && s.origin.x > corner - 0.01, "{s:?}");
        assert!(s.origin.y < corner && s.origin.y > corner - 0.01, "{s:?}");
    }

    #[test]
    fn a_player_at_500_m_s_stops_at_a_thin_wall() {
        // 5 cm thick; 500 m/s crosses 3.9 m a tick.
        let map = room("box 10 -50 0 10.05 50 5");
        let half = MovementParams::default().hull_half_width;
        for start_x in [0.0, 2.0, 5.3, 9.0, 9.5] {
            let mut s = PlayerState {
                origin: Vec3::new(start_x, 0.0, 1.0),
                velocity: Vec3::new(500.0, 0.0, 0.0),
                ..Default::default()
            };
            run(&mut s, UserCmd::default(), &map, 8);
            assert!(s.origin.x < 10.0 - half, "from {start_x}: {s:?}");
            assert!(s.origin.x > 10.0 - half - 0.01, "from {start_x}: {s:?}");
        }
    }

    #[test]
    fn pitch_is_clamped() {
        let map = room("");
        let mut s = standing_at(0.0, 0.0, 0.0);
        let cmd = UserCmd {
            pitch: i16::MAX,
            ..Default::default()
        };
        pmove(&mut s, &cmd, &MovementParams::default(), &map, DT);
        assert_eq!(s.pitch, MAX_PITCH);
    }

    fn crouch(cmd: UserCmd) -> UserCmd {
        UserCmd {
            buttons: cmd.buttons | buttons::CROUCH,
            ..cmd
        }
    }

    /// The player's box, at the height of its stance, overlaps no box of `map`.
    fn assert_fits(map: &Map, s: &PlayerState) {
        let hull = MovementParams::default().hull_for(s.crouched);
        assert!(!map.hull_overlaps(hull, s.origin), "{s:?}");
    }

    #[test]
    fn crouching_shrinks_the_hull_at_once_and_standing_restores_it() {
        let map = room("");
        let p = MovementParams::default();
        assert_eq!(p.hull_for(false), p.hull());
        assert_eq!(p.hull_for(true).height, p.crouch_hull_height);
        assert_eq!(p.hull_for(true).half_width, p.hull_half_width);
        let mut s = standing_at(0.0, 0.0, 0.0);
        run(&mut s, crouch(UserCmd::default()), &map, 1);
        assert!(s.crouched && s.on_ground, "{s:?}");
        // The feet stay on the floor: crouching lowers the head, not the feet.
        assert_eq!(s.origin.z, SKIN_M);
        run(&mut s, UserCmd::default(), &map, 1);
        assert!(!s.crouched, "{s:?}");
    }

    #[test]
    fn crouched_under_a_low_ceiling_a_player_stands_only_once_out() {
        // A crawlspace from x = 3 to x = 8 under a slab 1.5 m up: room for the 1.4 m crouched
        // box, not the 1.8 m standing one.
        let map = room("box 3 -5 1.5 8 5 3");
        let p = MovementParams::default();
        let half = p.hull_half_width;

        // Standing, the slab's edge stops the head.
        let mut s = standing_at(0.0, 0.0, 0.0);
        run(&mut s, forward(0), &map, 128);
        assert!(!s.crouched && s.origin.x < 3.0 - half, "{s:?}");

        // Crouched, the player goes under it.
        for _ in 0..256 {
            run(&mut s, crouch(forward(0)), &map, 1);
            assert_fits(&map, &s);
            if s.origin.x > 5.0 {
                break;
            }
        }
        assert!(s.crouched && s.origin.x > 5.0 && s.origin.x < 8.0, "{s:?}");

        // Releasing the button under the slab leaves it crouched, however long.
        run(&mut s, UserCmd::default(), &map, 128);
        assert!(s.crouched && s.on_ground, "{s:?}");
        assert_eq!(s.origin.z, SKIN_M);

        // Walking out without the button, it stays crouched (and slow) until the standing
        // box fits, then stands at once.
        let mut stood_at = None;
        for _ in 0..256 {
            let before = s.origin.x;
            run(&mut s, forward(0), &map, 1);
            assert_fits(&map, &s);
            if s.crouched {
                // Still under the slab when the tick began.
                assert!(before < 8.0 + half + 0.01, "{s:?}");
                assert!(
                    s.velocity.horizontal_length() <= p.top_speed(true) * 1.0001,
                    "{s:?}"
                );
            } else if stood_at.is_none() {
                stood_at = Some(before);
            }
        }
        // Up within one crouched tick's walk of clearing the slab's edge.
        let stood_at = stood_at.expect("never stood up");
        let edge = 8.0 + half;
        assert!(
            stood_at >= edge && stood_at < edge + p.top_speed(true) * DT + 0.01,
            "{stood_at}"
        );
        assert!(!s.crouched && s.origin.x > 10.0, "{s:?}");
    }

    #[test]
    fn crouched_running_tops_out_at_the_crouched_speed() {
        let map = room("box 10 -50 0 11 50 3");
        let p = MovementParams::default();
        let top = p.top_speed(true);
        assert_eq!(top, p.max_speed * p.crouch_speed_scale);

        // From rest.
        let mut s = standing_at(0.0, 0.0, 0.0);
        run(&mut s, crouch(forward(16384)), &map, 256);
        let speed = s.velocity.horizontal_length();
        assert!(speed > top * 0.95 && speed <= top * 1.0001, "{speed}");

        // Diagonally into a wall, where Quake's acceleration alone would run faster along it.
        let mut s = standing_at(8.0, 0.0, 0.0);
        run(&mut s, crouch(forward(8192)), &map, 256);
        assert!(s.origin.x < 10.0 - p.hull_half_width, "{s:?}");
        let along = s.velocity.horizontal_length();
        assert!(along > top * 0.98 && along <= top * 1.0001, "{s:?}");

        // Crouching at full speed slows the player under friction, never speeding it up, to
        // the crouched speed within a fifth of a second.
        let mut s = standing_at(-50.0, 0.0, 0.0);
        run(&mut s, forward(16384), &map, 256);
        let mut last = s.velocity.horizontal_length();
        assert!(last > p.max_speed * 0.99);
        for _ in 0..26 {
            run(&mut s, crouch(forward(16384)), &map, 1);
            let speed = s.velocity.horizontal_length();
            assert!(speed <= last, "{speed} after {last}");
            last = speed;
        }
        assert!(last <= top * 1.0001, "{last}");
    }

    #[test]
    fn a_crouched_player_jumps_as_high_and_stays_crouched() {
        let map = room("");
        let p = MovementParams::default();
        let mut s = standing_at(0.0, 0.0, 0.0);
        run(&mut s, crouch(UserCmd::default()), &map, 4);
        run(&mut s, crouch(jump()), &map, 1);
        assert!(!s.on_ground && s.crouched, "{s:?}");
        let mut apex = s.origin.z;
        while !s.on_ground {
            run(&mut s, crouch(UserCmd::default()), &map, 1);
            apex = apex.max(s.origin.z);
            assert!(s.crouched);
        }
        let expected_apex = p.jump_speed * p.jump_speed / (2.0 * p.gravity) + SKIN_M;
        assert!((apex - expected_apex).abs() < 0.005, "{apex}");
    }

    #[test]
    fn crouching_is_deterministic() {
        let map = crate::BuiltinMap::Arena.load();
        let p = MovementParams::default();
        let script = |t: u32| UserCmd {
            forward: 127,
            side: if t % 50 < 25 { 60 } else { -60 },
            buttons: if t % 37 < 15 { buttons::CROUCH } else { 0 }
                | if t.is_multiple_of(71) {
                    buttons::JUMP
                } else {
                    0
                },
            yaw: (t.wrapping_mul(97) % 65536) as u16,
            pitch: 0,
        };
        let play = || {
            let mut s = standing_at(-27.5, 0.0, 0.0);
            let mut trail = Vec::new();
            for t in 0..2000 {
                pmove(&mut s, &script(t), &p, &map, DT);
                trail.push((
                    s.origin.to_bits(),
                    s.velocity.to_bits(),
                    s.crouched,
                    s.on_ground,
                ));
            }
            trail
        };
        let a = play();
        assert!(a.iter().any(|t| t.2) && a.iter().any(|t| !t.2));
        assert_eq!(a, play());
    }

    /// FNV-1a over the exact bits of every player's state after every tick of a seeded run:
    /// ten players on `map` under random commands, thrown now and then at up to 30 m/s.
    fn seeded_run_digest(map: &Map, seed: u64, ticks: u32) -> u64 {
        let p = MovementParams::default();
        let mut rng = tickforge_testkit::SimRng::new(seed);
        let mut players: Vec<PlayerState> = (0..10)
            .map(|n| PlayerState {
                origin: map.spawns()[n % map.spawns().len()].origin + UP * SKIN_M,
                ..Default::default()
            })
            .collect();
        let mut digest = 0xcbf2_9ce4_8422_2325_u64;
        for _ in 0..ticks {
            for s in &mut players {
                let draw = rng.next_u64();
                if draw.is_multiple_of(97) {
                    let v = |r: u64| (r % 6001) as f32 / 100.0 - 30.0;
                    s.velocity = Vec3::new(v(draw >> 8), v(draw >> 24), v(draw >> 40));
                }
                let cmd = UserCmd {
                    forward: (draw >> 8) as i8,
                    side: (draw >> 16) as i8,
                    buttons: (draw >> 24) as u8 & (buttons::JUMP | buttons::CROUCH),
                    yaw: (draw >> 32) as u16,
                    pitch: (draw >> 48) as i16,
                };
                pmove(s, &cmd, &p, map, DT);
                let flags = u32::from(s.on_ground) | u32::from(s.crouched) << 1;
                for word in s.origin.to_bits().into_iter().chain(s.velocity.to_bits()) {
                    for byte in word.to_le_bytes().into_iter().chain(flags.to_le_bytes()) {
                        digest = (digest ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
                    }
                }
            }
        }
        digest
    }

    /// Thousands of ticks of ten players over the built-in maps. In test builds every hull
    /// trace checks itself against the map's reference (every box, no grid), so this run holds
    /// the broad phase to it on the traces movement really makes; and a second run gives the
    /// same bits.
    #[test]
    fn seeded_movement_on_the_builtin_maps_is_exact_and_repeatable() {
        let arena = crate::BuiltinMap::Arena.load();
        let maps = [
            arena.with_barriers(true),
            arena,
            crate::BuiltinMap::Flat2km.load(),
        ];
        for (seed, map) in maps.iter().enumerate() {
            let digest = seeded_run_digest(map, seed as u64, 1_500);
            assert_eq!(digest, seeded_run_digest(map, seed as u64, 1_500));
        }
    }

    fn arena_interior() -> Aabb {
        Aabb {
            min: Vec3::new(-30.0, -20.0, 0.0),
            max: Vec3::new(30.0, 20.0, 12.0),
        }
    }

    fn speed() -> impl Strategy<Value = Vec3> {
        (-3000.0f32..3000.0, -3000.0f32..3000.0, -3000.0f32..3000.0)
            .prop_map(|(x, y, z)| Vec3::new(x, y, z))
    }

    fn cmds() -> impl Strategy<Value = Vec<UserCmd>> {
        proptest::collection::vec(
            (any::<i8>(), any::<i8>(), any::<u8>(), any::<u16>()).prop_map(
                |(forward, side, buttons, yaw)| UserCmd {
                    forward,
                    side,
                    buttons,
                    yaw,
                    pitch: 0,
                },
            ),
            1..300,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// From anywhere in the arena, thrown at up to 5 km/s in any direction now and then,
        /// under random commands: the player never ends a tick inside a box or outside the
        /// arena's walls.
        #[test]
        fn never_inside_or_beyond_a_box_at_any_speed(
            start in (-29.5f32..29.5, -19.5f32..19.5, 0.0f32..10.0),
            kicks in proptest::collection::vec((0usize..300, speed()), 1..6),
            cmds in cmds(),
        ) {
            let map = crate::BuiltinMap::Arena.load();
            let interior = arena_interior();
            let p = MovementParams::default();
            let origin = Vec3::new(start.0, start.1, start.2);
            prop_assume!(!map.hull_overlaps(p.hull(), origin));
            let mut s = PlayerState { origin, ..Default::default() };
            for (tick, cmd) in cmds.iter().enumerate() {
                for &(at, v) in &kicks {
                    if at == tick || (at >= cmds.len() && tick == 0) {
                        s.velocity = v;
                    }
                }
                pmove(&mut s, cmd, &p, &map, DT);
                assert_clear(&map, &s, &interior);
                prop_assert!(s.velocity.length().is_finite());
            }
        }

        /// Under low slabs and beside a thin wall, toggling crouch at random: the player's box
        /// at its stance's height never overlaps a box, and never gets past the wall.
        #[test]
        fn crouching_never_stands_up_into_a_box_or_passes_a_wall(
            start in (-20.0f32..9.5, -20.0f32..20.0, 0.0f32..1.0),
            v in speed(),
            cmds in cmds(),
        ) {
            // Slabs 1.45 m and 1.6 m up (room to crouch, not to stand), a 1 m crate and a
            // 5 cm wall.
            let map = room(
                "box -10 -10 1.45 0 0 2\n\
                 box 0 0 1.6 8 8 3\n\
                 box -4 4 0 -2 6 1\n\
                 box 10 -100 0 10.05 100 50",
            );
            let p = MovementParams::default();
            let origin = Vec3::new(start.0, start.1, start.2);
            prop_assume!(!map.hull_overlaps(p.hull_for(true), origin));
            let mut s = PlayerState {
                origin,
                velocity: v * 0.01,
                crouched: true,
                ..Default::default()
            };
            for cmd in &cmds {
                pmove(&mut s, cmd, &p, &map, DT);
                prop_assert!(!map.hull_overlaps(p.hull_for(s.crouched), s.origin), "{:?}", s);
                prop_assert!(s.origin.x + p.hull_half_width < 10.0, "{:?}", s);
            }
        }

        /// A 5 cm wall from floor to roof across the room: whatever the speed and commands,
        /// a player starting west of it stays west of it.
        #[test]
        fn nothing_tunnels_through_a_thin_wall(
            start in (-20.0f32..9.5, -20.0f32..20.0, 0.0f32..10.0),
            v in speed(),
            cmds in cmds(),
        ) {
            let map = room("box 10 -100 0 10.05 100 50");
            let p = MovementParams::default();
            let mut s = PlayerState {
                origin: Vec3::new(start.0, start.1, start.2),
                velocity: v,
                ..Default::default()
            };
            for cmd in &cmds {
                pmove(&mut s, cmd, &p, &map, DT);
                prop_assert!(s.origin.x + p.hull_half_width < 10.0, "{:?}", s);
            }
        }
    }
}
