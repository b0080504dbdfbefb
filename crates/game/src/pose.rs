//! Server-side poses: how a player stands, aims and runs, and where that puts its hitboxes.
//!
//! What it does: derives a [`Pose`] (stance, aim pitch, run-cycle phase and weight, direction
//! of motion) from a [`PlayerState`] with [`pose_of`]; places a pose's hitboxes with
//! [`Pose::hitboxes`] — capsules for the head, the body and each leg, in the player's body
//! frame; moves them into the world at a feet position and yaw with [`LocalHitboxes::placed`];
//! and meets them with a ray ([`Hitboxes::first_hit`]). Every function here is pure: the same
//! inputs give the same bits.
//!
//! What it does not do: keep poses over time or rewind them ([`crate::history`]), trace
//! shots through the map ([`crate::hitscan`]), or price a hit ([`crate::rules`]).
//!
//! Hitboxes are capsules (a segment and a radius) rather than boxes: turning a capsule is
//! turning two points, lerping two poses is lerping endpoints, and a ray meets a capsule in one
//! quadratic. The body frame has x forward along the view yaw, y to the left and z up, with
//! its origin at the feet. A positive pitch looks up; looking down leans the torso forward
//! and tilts the head further.
//!
//! Locomotion is a [`Gait`] carried from tick to tick: the horizontal velocity, blended
//! toward the player's over [`PoseParams::gait_blend_s`] as animation graphs blend between
//! speeds, and the run cycle's phase, advanced by the distance run at that velocity (one
//! cycle is two steps, [`PoseParams::stride_m`] of ground). The legs swing along the
//! blended direction of motion (a strafing player's legs swing sideways), as far as its
//! speed allows, and the upper body bobs twice a cycle. The blend keeps poses continuous
//! when movement is not (a player stopped dead by a wall), which is what lets the history
//! pose every 4th tick and lerp in between.

use std::f32::consts::{FRAC_PI_2, TAU};

use crate::map::Aabb;
use crate::math::Vec3;
use crate::movement::{PlayerState, MAX_PITCH};
use crate::rules::BodyPart;

/// Hitboxes of one player.
pub const HITBOX_COUNT: usize = 4;

/// The body part of each hitbox, by index: head, body, left leg, right leg.
pub const HITBOX_PARTS: [BodyPart; HITBOX_COUNT] = [
    BodyPart::Head,
    BodyPart::Body,
    BodyPart::Legs,
    BodyPart::Legs,
];

/// Hits this close along a ray are at the same distance, and then the head wins over the
/// body and the body over the legs, metres: 1 mm, finer than hitboxes are modelled.
pub const SAME_DISTANCE_M: f32 = 0.001;

/// How a player holds its body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Stance {
    /// Upright.
    #[default]
    Standing,
    /// Knees bent, torso lower and leaning forward.
    Crouching,
}

impl PlayerState {
    /// The stance the pose follows: [`Stance::Crouching`] when crouched, which puts the eyes
    /// at [`PoseParams::eye_height_m`] of it (1.15 m against 1.6 m standing, by
    /// default).
    pub fn stance(&self) -> Stance {
        if self.crouched {
            Stance::Crouching
        } else {
            Stance::Standing
        }
    }
}

/// The proportions of one stance, metres and radians.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StanceShape {
    /// Height of the pelvis above the feet, metres.
    pub pelvis_m: f32,
    /// Pelvis to the base of the neck, metres.
    pub torso_m: f32,
    /// Forward lean of the torso with the view level, radians.
    pub lean_rad: f32,
    /// Height of the eyes above the feet, where shots start, metres.
    pub eye_m: f32,
}

/// The proportions of the body and the shape of the run cycle: fixed for a match. Sizes are
/// a modern shooter's on the 0.8 × 0.8 × 1.8 m player box of [`crate::MovementParams`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoseParams {
    /// Proportions when standing.
    pub standing: StanceShape,
    /// Proportions when crouching.
    pub crouching: StanceShape,
    /// Base of the neck to the base of the head capsule, metres.
    pub neck_m: f32,
    /// Length of the head capsule's segment, chin to crown centre, metres.
    pub head_length_m: f32,
    /// Radius of the head capsule, metres.
    pub head_radius_m: f32,
    /// Radius of the body capsule (torso and arms), metres.
    pub body_radius_m: f32,
    /// Sideways distance of each hip from the pelvis, metres.
    pub hip_half_width_m: f32,
    /// Radius of each leg capsule, metres.
    pub leg_radius_m: f32,
    /// Radians of torso lean per radian of pitch: looking down leans forward.
    pub lean_per_pitch: f32,
    /// Radians of head tilt, on top of the torso's lean, per radian of pitch.
    pub head_tilt_per_pitch: f32,
    /// Ground covered by one run cycle (two steps), metres.
    pub stride_m: f32,
    /// Time constant of the gait's blend toward the player's velocity, seconds; zero
    /// follows the velocity at once.
    pub gait_blend_s: f32,
    /// Horizontal speed at which the legs swing fully, m/s; slower players swing less.
    pub full_swing_speed_m_per_s: f32,
    /// Largest swing of a leg from the vertical, radians.
    pub leg_swing_rad: f32,
    /// Largest rise or fall of the upper body during the run cycle, metres.
    pub bob_m: f32,
}

impl Default for PoseParams {
    fn default() -> Self {
        PoseParams {
            standing: StanceShape {
                pelvis_m: 0.92,
                torso_m: 0.42,
                lean_rad: 0.0,
                eye_m: 1.6,
            },
            crouching: StanceShape {
                pelvis_m: 0.55,
                torso_m: 0.40,
                lean_rad: 0.35,
                eye_m: 1.15,
            },
            neck_m: 0.16,
            head_length_m: 0.10,
            head_radius_m: 0.12,
            body_radius_m: 0.20,
            hip_half_width_m: 0.10,
            leg_radius_m: 0.10,
            lean_per_pitch: 0.25,
            head_tilt_per_pitch: 0.35,
            // Two 1.4 m steps: three cycles a second at full speed.
            stride_m: 2.8,
            // Animation graphs blend locomotion over a tenth to a fifth of a second.
            gait_blend_s: 0.1,
            // MovementParams' default top speed.
            full_swing_speed_m_per_s: 8.13,
            leg_swing_rad: 0.5,
            bob_m: 0.03,
        }
    }
}

impl PoseParams {
    /// The proportions of `stance`.
    pub fn shape(&self, stance: Stance) -> &StanceShape {
        match stance {
            Stance::Standing => &self.standing,
            Stance::Crouching => &self.crouching,
        }
    }

    /// Eye height above the feet in `stance`, metres: where a shot starts.
    pub fn eye_height_m(&self, stance: Stance) -> f32 {
        self.shape(stance).eye_m
    }

    /// A box, relative to the feet, that holds every hitbox of every pose at any yaw: the
    /// broad phase tests a ray against it before looking at a player's hitboxes.
    pub fn reach(&self) -> Aabb {
        let max_pitch = angle16_to_rad_signed(MAX_PITCH);
        let sin_up_to_right_angle = |a: f32| a.abs().min(FRAC_PI_2).sin();
        let mut horizontal = 0.0_f32;
        let mut top = 0.0_f32;
        for shape in [&self.standing, &self.crouching] {
            let lean = shape.lean_rad.abs() + self.lean_per_pitch.abs() * max_pitch;
            let tilt = lean + self.head_tilt_per_pitch.abs() * max_pitch;
            let neck = (shape.torso_m + self.neck_m) * sin_up_to_right_angle(lean);
            let body = shape.torso_m * sin_up_to_right_angle(lean) + self.body_radius_m;
            let head = neck + self.head_length_m * sin_up_to_right_angle(tilt) + self.head_radius_m;
            let leg_length = shape.pelvis_m - self.leg_radius_m;
            let legs = self.hip_half_width_m
                + leg_length * sin_up_to_right_angle(self.leg_swing_rad)
                + self.leg_radius_m;
            horizontal = horizontal.max(body).max(head).max(legs);
            let crown = shape.pelvis_m
                + self.bob_m
                + shape.torso_m
                + self.neck_m
                + self.head_length_m
                + self.head_radius_m;
            top = top
                .max(crown)
                .max(shape.pelvis_m + self.bob_m + self.leg_radius_m);
        }
        // A leg reaches down by the bob below the feet when the pelvis dips.
        Aabb {
            min: Vec3::new(-horizontal, -horizontal, -self.bob_m.abs()),
            max: Vec3::new(horizontal, horizontal, top),
        }
    }
}

/// The animation state that places a player's hitboxes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pose {
    /// Standing or crouching.
    pub stance: Stance,
    /// Aim pitch, radians; positive looks up.
    pub pitch_rad: f32,
    /// Where the run cycle is, in cycles, 0..1: the left leg is fully forward at 0.25.
    pub run_phase: f32,
    /// How far the legs swing, 0 (still) ..= 1 (full speed).
    pub run_weight: f32,
    /// The horizontal direction of motion in the body frame, `[forward, left]`, unit length
    /// or zero when still.
    pub move_dir: [f32; 2],
}

impl Pose {
    /// Standing, level, still: the pose of every player in the buy phase.
    pub const IDLE: Pose = Pose {
        stance: Stance::Standing,
        pitch_rad: 0.0,
        run_phase: 0.0,
        run_weight: 0.0,
        move_dir: [0.0, 0.0],
    };

    /// Places this pose's hitboxes in the body frame. A pure function of the pose and the
    /// proportions.
    pub fn hitboxes(&self, params: &PoseParams) -> LocalHitboxes {
        let shape = params.shape(self.stance);
        let cycle = self.run_phase * TAU;
        let bob = params.bob_m * self.run_weight * (2.0 * cycle).cos();
        let pelvis = Vec3::new(0.0, 0.0, shape.pelvis_m + bob);

        // In the x-z plane of the body frame: 0 is straight up, positive leans forward.
        let lean = shape.lean_rad - self.pitch_rad * params.lean_per_pitch;
        let tilt = lean - self.pitch_rad * params.head_tilt_per_pitch;
        let along = |angle: f32| {
            let (sin, cos) = angle.sin_cos();
            Vec3::new(sin, 0.0, cos)
        };
        let torso_dir = along(lean);
        let chest = pelvis + torso_dir * shape.torso_m;
        let chin = chest + torso_dir * params.neck_m;
        let crown = chin + along(tilt) * params.head_length_m;

        let swing = params.leg_swing_rad * self.run_weight.clamp(0.0, 1.0) * cycle.sin();
        let leg_length = shape.pelvis_m - params.leg_radius_m;
        let [forward, left] = self.move_dir;
        let foot = |hip: Vec3, swing: f32| {
            let (sin, cos) = swing.sin_cos();
            let reach = leg_length * sin;
            hip + Vec3::new(forward * reach, left * reach, -leg_length * cos)
        };
        let hip_left = pelvis + Vec3::new(0.0, params.hip_half_width_m, 0.0);
        let hip_right = pelvis - Vec3::new(0.0, params.hip_half_width_m, 0.0);

        LocalHitboxes {
            capsules: [
                Capsule::new(chin, crown, params.head_radius_m),
                Capsule::new(pelvis, chest, params.body_radius_m),
                Capsule::new(hip_left, foot(hip_left, swing), params.leg_radius_m),
                Capsule::new(hip_right, foot(hip_right, -swing), params.leg_radius_m),
            ],
        }
    }
}

/// A player's locomotion as its legs show it, carried from tick to tick by
/// [`Gait::advance`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Gait {
    /// Where the run cycle is, in cycles, 0..1: the left leg is fully forward at 0.25.
    pub run_phase: f32,
    /// Horizontal velocity blended toward the player's, m/s; z is always 0.
    pub velocity: Vec3,
}

impl Gait {
    /// The gait `dt_s` seconds later for a player moving at `velocity`: the blended velocity
    /// moves toward its horizontal part by `1 - exp(-dt_s / gait_blend_s)`, and the phase
    /// advances by the distance covered at the blended speed over the stride.
    pub fn advance(&self, velocity: Vec3, params: &PoseParams, dt_s: f32) -> Gait {
        self.advance_by(velocity, params, gait_blend_factor(params, dt_s), dt_s)
    }

    /// [`Gait::advance`] with the blend factor computed once for a fixed step.
    pub(crate) fn advance_by(
        &self,
        velocity: Vec3,
        params: &PoseParams,
        blend: f32,
        dt_s: f32,
    ) -> Gait {
        let target = Vec3::new(velocity.x, velocity.y, 0.0);
        let blended = lerp(self.velocity, target, blend);
        let mut run_phase = self.run_phase;
        if params.stride_m > 0.0 {
            let next = run_phase + blended.horizontal_length() * dt_s / params.stride_m;
            run_phase = next - next.floor();
            // A phase just below 1 can round up to exactly 1.
            if run_phase >= 1.0 {
                run_phase = 0.0;
            }
        }
        Gait {
            run_phase,
            velocity: blended,
        }
    }
}

/// How far a gait blends toward the velocity in a step of `dt_s` seconds, 0..=1.
pub(crate) fn gait_blend_factor(params: &PoseParams, dt_s: f32) -> f32 {
    if params.gait_blend_s > 0.0 {
        1.0 - (-dt_s / params.gait_blend_s).exp()
    } else {
        1.0
    }
}

/// The pose of a player in `state` and `stance` moving with `gait`. Reads the view pitch
/// and yaw from `state`; the legs follow the gait's velocity relative to the view yaw.
pub fn pose_of(state: &PlayerState, stance: Stance, gait: &Gait, params: &PoseParams) -> Pose {
    let speed = gait.velocity.horizontal_length();
    let run_weight = if params.full_swing_speed_m_per_s > 0.0 {
        (speed / params.full_swing_speed_m_per_s).min(1.0)
    } else {
        0.0
    };
    let move_dir = if speed > 0.0 {
        let (sin, cos) = crate::angle16_to_rad(state.yaw).sin_cos();
        let (vx, vy) = (gait.velocity.x / speed, gait.velocity.y / speed);
        [vx * cos + vy * sin, vy * cos - vx * sin]
    } else {
        [0.0, 0.0]
    };
    Pose {
        stance,
        pitch_rad: angle16_to_rad_signed(state.pitch),
        run_phase: gait.run_phase - gait.run_phase.floor(),
        run_weight,
        move_dir,
    }
}

/// A segment with a radius: every point within `radius_m` of the segment from `a` to `b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Capsule {
    /// One end of the segment, metres.
    pub a: Vec3,
    /// The other end, metres.
    pub b: Vec3,
    /// Radius, metres.
    pub radius_m: f32,
}

impl Capsule {
    /// A capsule from its segment and radius.
    pub const fn new(a: Vec3, b: Vec3, radius_m: f32) -> Self {
        Capsule { a, b, radius_m }
    }

    /// The capsule `t` of the way from `self` to `other` (0 is `self`, 1 is `other`).
    pub fn lerp(&self, other: &Capsule, t: f32) -> Capsule {
        Capsule {
            a: lerp(self.a, other.a, t),
            b: lerp(self.b, other.b, t),
            radius_m: self.radius_m + (other.radius_m - self.radius_m) * t,
        }
    }

    /// Distance along a ray from `origin` with unit direction `dir` to where it enters this
    /// capsule, if it does within `max_m` metres; 0 when `origin` is inside.
    pub fn ray_entry(&self, origin: Vec3, dir: Vec3, max_m: f32) -> Option<f32> {
        let r2 = self.radius_m * self.radius_m;
        if distance_sq_to_segment(origin, self.a, self.b) <= r2 {
            return Some(0.0);
        }
        // Solve from the ray's point nearest the capsule's middle, and add the distance back:
        // from a ray origin hundreds of metres away the quadratic's terms would otherwise
        // cancel below f32's precision.
        let shift = (lerp(self.a, self.b, 0.5) - origin).dot(dir);
        let p = origin + dir * shift;
        let ba = self.b - self.a;
        let pa = p - self.a;
        let (baba, bard, bapa) = (ba.dot(ba), ba.dot(dir), ba.dot(pa));
        let mut entry = f32::INFINITY;

        // The cylinder between the end spheres, where the ray is not parallel to the axis.
        let k2 = baba - bard * bard;
        if k2 > 1e-12 * baba {
            let k1 = baba * dir.dot(pa) - bapa * bard;
            let k0 = baba * pa.dot(pa) - bapa * bapa - r2 * baba;
            let h = k1 * k1 - k2 * k0;
            if h >= 0.0 {
                let t = (-k1 - h.sqrt()) / k2;
                let along_axis = bapa + t * bard;
                if along_axis > 0.0 && along_axis < baba {
                    entry = t;
                }
            }
        }
        // The end spheres; their entries also cover the cylinder's end discs.
        for centre in [self.a, self.b] {
            let pc = p - centre;
            let half_b = dir.dot(pc);
            let h = half_b * half_b - (pc.dot(pc) - r2);
            if h >= 0.0 {
                entry = entry.min(-half_b - h.sqrt());
            }
        }
        let t = shift + entry;
        // From outside a convex shape, an entry behind the origin means the whole crossing is.
        // No entry stays infinite, which an unlimited `max_m` would otherwise take for a hit.
        (entry.is_finite() && t >= 0.0 && t <= max_m).then_some(t)
    }
}

/// A pose's hitboxes in the body frame (x forward, y left, z up, feet at the origin), in
/// [`HITBOX_PARTS`] order. What posing produces and the history keeps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalHitboxes {
    /// Head, body, left leg, right leg.
    pub capsules: [Capsule; HITBOX_COUNT],
}

impl LocalHitboxes {
    /// The hitboxes `t` of the way from `self` to `other`, capsule by capsule.
    pub fn lerp(&self, other: &LocalHitboxes, t: f32) -> LocalHitboxes {
        LocalHitboxes {
            capsules: std::array::from_fn(|i| self.capsules[i].lerp(&other.capsules[i], t)),
        }
    }

    /// These hitboxes in the world, for a player with its feet at `origin` facing `yaw_rad`
    /// (0 faces +x, a quarter turn faces +y).
    pub fn placed(&self, origin: Vec3, yaw_rad: f32) -> Hitboxes {
        let (sin, cos) = yaw_rad.sin_cos();
        let place = |p: Vec3| origin + Vec3::new(p.x * cos - p.y * sin, p.x * sin + p.y * cos, p.z);
        Hitboxes {
            capsules: self
                .capsules
                .map(|c| Capsule::new(place(c.a), place(c.b), c.radius_m)),
        }
    }
}

/// A player's hitboxes in the world, in [`HITBOX_PARTS`] order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hitboxes {
    /// Head, body, left leg, right leg.
    pub capsules: [Capsule; HITBOX_COUNT],
}

impl Hitboxes {
    /// The hitbox a ray from `origin` with unit direction `dir` enters first within `max_m`
    /// metres, and the distance to it. Entries within [`SAME_DISTANCE_M`] of each other are
    /// a tie, which the head wins over the body and the body over the legs.
    pub fn first_hit(&self, origin: Vec3, dir: Vec3, max_m: f32) -> Option<(BodyPart, f32)> {
        let mut best: Option<(BodyPart, f32)> = None;
        for (capsule, &part) in self.capsules.iter().zip(&HITBOX_PARTS) {
            if let Some(t) = capsule.ray_entry(origin, dir, max_m) {
                let better = match best {
                    None => true,
                    Some(b) => beats((part, t), b),
                };
                if better {
                    best = Some((part, t));
                }
            }
        }
        best
    }

    /// The smallest box holding every capsule.
    pub fn bounds(&self) -> Aabb {
        let mut min = Vec3::new(f32::INFINITY, f32::INFINITY, f32::INFINITY);
        let mut max = -min;
        for c in &self.capsules {
            let r = Vec3::new(c.radius_m, c.radius_m, c.radius_m);
            min = min.min(c.a - r).min(c.b - r);
            max = max.max(c.a + r).max(c.b + r);
        }
        Aabb { min, max }
    }
}

/// True when a hit on `part` at `t` metres should replace the best so far: nearer by more
/// than [`SAME_DISTANCE_M`], or as near and on a part that ranks first.
pub fn beats((part, t): (BodyPart, f32), (best_part, best_t): (BodyPart, f32)) -> bool {
    t < best_t - SAME_DISTANCE_M || (t <= best_t + SAME_DISTANCE_M && rank(part) < rank(best_part))
}

fn rank(part: BodyPart) -> u8 {
    match part {
        BodyPart::Head => 0,
        BodyPart::Body => 1,
        BodyPart::Legs => 2,
    }
}

/// `a` moved `t` of the way to `b`.
pub(crate) fn lerp(a: Vec3, b: Vec3, t: f32) -> Vec3 {
    a + (b - a) * t
}

/// A signed 16-bit fraction of a turn, in radians.
fn angle16_to_rad_signed(a: i16) -> f32 {
    f32::from(a) * (TAU / 65536.0)
}

fn distance_sq_to_segment(p: Vec3, a: Vec3, b: Vec3) -> f32 {
    let ab = b - a;
    let len_sq = ab.dot(ab);
    let u = if len_sq > 0.0 {
        ((p - a).dot(ab) / len_sq).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let d = p - (a + ab * u);
    d.dot(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: Vec3 = Vec3::new(1.0, 0.0, 0.0);

    fn standing_capsule() -> Capsule {
        Capsule::new(Vec3::new(0.0, 0.0, 1.0), Vec3::new(0.0, 0.0, 2.0), 0.5)
    }

    #[test]
    fn a_ray_enters_a_capsule_on_its_side_and_its_caps() {
        let c = standing_capsule();
        let side = c.ray_entry(Vec3::new(-10.0, 0.0, 1.5), X, 100.0).unwrap();
        assert!((side - 9.5).abs() < 1e-5, "{side}");
        // Through the top sphere, off its centre: 10 - sqrt(0.25 - 0.09).
        let cap = c.ray_entry(Vec3::new(-10.0, 0.0, 2.3), X, 100.0).unwrap();
        assert!((cap - (10.0 - 0.16f32.sqrt())).abs() < 1e-5, "{cap}");
        // Down the axis: the top sphere first.
        let down = Vec3::new(0.0, 0.0, -1.0);
        let axial = c.ray_entry(Vec3::new(0.0, 0.0, 5.0), down, 100.0).unwrap();
        assert!((axial - 2.5).abs() < 1e-5, "{axial}");
        // Misses: past the radius, pointing away, and too short.
        assert!(c.ray_entry(Vec3::new(-10.0, 0.51, 1.5), X, 100.0).is_none());
        // A miss with no limit (a shot on an open map, no wall on its ray) is a miss, not an
        // entry at infinity.
        assert!(c
            .ray_entry(Vec3::new(-10.0, 0.51, 1.5), X, f32::INFINITY)
            .is_none());
        assert_eq!(
            c.ray_entry(Vec3::new(-10.0, 0.0, 1.5), X, f32::INFINITY),
            Some(side)
        );
        assert!(c.ray_entry(Vec3::new(-10.0, 0.0, 1.5), -X, 100.0).is_none());
        assert!(c.ray_entry(Vec3::new(-10.0, 0.0, 1.5), X, 9.4).is_none());
        assert!(c.ray_entry(Vec3::new(-10.0, 0.0, 2.51), X, 100.0).is_none());
        // From inside.
        assert_eq!(c.ray_entry(Vec3::new(0.1, 0.0, 1.2), X, 100.0), Some(0.0));
    }

    #[test]
    fn a_sphere_is_a_capsule_with_equal_ends() {
        let p = Vec3::new(3.0, 4.0, 1.0);
        let s = Capsule::new(p, p, 0.25);
        let t = s.ray_entry(Vec3::new(3.0, -10.0, 1.0), Vec3::new(0.0, 1.0, 0.0), 100.0);
        assert!((t.unwrap() - 13.75).abs() < 1e-5);
    }

    #[test]
    fn a_shot_from_a_kilometre_keeps_its_precision() {
        let c = Capsule::new(Vec3::new(900.0, 0.0, 1.0), Vec3::new(900.0, 0.0, 1.5), 0.1);
        let from = Vec3::new(-100.0, 0.0, 1.2);
        let hit = c.ray_entry(from, X, f32::INFINITY).unwrap();
        assert!((hit - 999.9).abs() < 1e-3, "{hit}");
        // 9 cm off the axis still hits, 11 cm does not.
        assert!(c
            .ray_entry(from + Vec3::new(0.0, 0.09, 0.0), X, 2000.0)
            .is_some());
        assert!(c
            .ray_entry(from + Vec3::new(0.0, 0.11, 0.0), X, 2000.0)
            .is_none());
    }

    #[test]
    fn the_head_wins_a_tie_and_loses_when_farther() {
        assert!(beats((BodyPart::Head, 1.0005), (BodyPart::Body, 1.0)));
        assert!(!beats((BodyPart::Body, 1.0), (BodyPart::Head, 1.0005)));
        assert!(!beats((BodyPart::Head, 1.01), (BodyPart::Body, 1.0)));
        assert!(beats((BodyPart::Legs, 0.9), (BodyPart::Head, 1.0)));
    }

    #[test]
    fn the_stance_follows_the_crouch() {
        let mut state = PlayerState::default();
        assert_eq!(state.stance(), Stance::Standing);
        state.crouched = true;
        assert_eq!(state.stance(), Stance::Crouching);
    }

    #[test]
    fn each_hull_holds_its_stances_hitboxes() {
        use crate::movement::MovementParams;
        let p = MovementParams::default();
        let pose = PoseParams::default();
        for crouched in [false, true] {
            let hull = p.hull_for(crouched);
            let state = PlayerState {
                crouched,
                ..Default::default()
            };
            let mut top: f32 = 0.0;
            for pitch in [-MAX_PITCH, -8000, 0, 8000, MAX_PITCH] {
                for phase in 0..16 {
                    let shape = Pose {
                        stance: state.stance(),
                        pitch_rad: f32::from(pitch) * std::f32::consts::TAU / 65536.0,
                        run_phase: phase as f32 / 16.0,
                        run_weight: 1.0,
                        move_dir: [1.0, 0.0],
                    };
                    for c in shape.hitboxes(&pose).capsules {
                        top = top.max(c.a.z.max(c.b.z) + c.radius_m);
                    }
                }
            }
            assert!(top <= hull.height, "crouched {crouched}: {top}");
            // And not loose: the box is within 10 cm of the head's crown.
            assert!(top > hull.height - 0.1, "crouched {crouched}: {top}");
        }
        assert!(pose.eye_height_m(Stance::Crouching) < p.crouch_hull_height);
    }

    #[test]
    fn the_idle_pose_stands_inside_the_player_box() {
        let params = PoseParams::default();
        let b = Pose::IDLE
            .hitboxes(&params)
            .placed(Vec3::ZERO, 0.0)
            .bounds();
        assert!(b.min.z >= -1e-6 && b.max.z <= 1.8, "{b:?}");
        assert!(b.min.x >= -0.4 && b.max.x <= 0.4 && b.min.y >= -0.4 && b.max.y <= 0.4);
        let head = Pose::IDLE.hitboxes(&params).capsules[0];
        assert!(head.a.z < params.standing.eye_m && head.b.z >= params.standing.eye_m);
    }

    #[test]
    fn every_pose_lies_within_the_reach() {
        let params = PoseParams::default();
        let reach = params.reach();
        let pitch = angle16_to_rad_signed(MAX_PITCH);
        for stance in [Stance::Standing, Stance::Crouching] {
            for p in [-pitch, -0.5, 0.0, 0.7, pitch] {
                for phase in 0..32 {
                    for dir in 0..8 {
                        let a = dir as f32 * TAU / 8.0;
                        let pose = Pose {
                            stance,
                            pitch_rad: p,
                            run_phase: phase as f32 / 32.0,
                            run_weight: 1.0,
                            move_dir: [a.cos(), a.sin()],
                        };
                        for yaw in [0.0, 0.3, 1.0, 2.5] {
                            let b = pose.hitboxes(&params).placed(Vec3::ZERO, yaw).bounds();
                            assert!(b.min.x >= reach.min.x && b.min.y >= reach.min.y);
                            assert!(b.min.z >= reach.min.z - 1e-6);
                            assert!(b.max.x <= reach.max.x && b.max.y <= reach.max.y);
                            assert!(b.max.z <= reach.max.z + 1e-6);
                        }
                    }
                }
            }
        }
        // And it is not wildly loose: within a metre of the player box.
        assert!(reach.max.x < 0.9 && reach.max.z < 1.9, "{reach:?}");
    }

    #[test]
    fn pitch_leans_the_torso_and_running_swings_the_legs() {
        let params = PoseParams::default();
        let state = PlayerState {
            yaw: 16384, // facing +y, running forward
            pitch: -8000,
            ..Default::default()
        };
        let gait = Gait {
            run_phase: 0.25,
            velocity: Vec3::new(0.0, 8.13, 0.0),
        };
        let pose = pose_of(&state, Stance::Standing, &gait, &params);
        assert!((pose.run_weight - 1.0).abs() < 1e-6);
        assert!((pose.move_dir[0] - 1.0).abs() < 1e-5 && pose.move_dir[1].abs() < 1e-5);
        let local = pose.hitboxes(&params);
        // Looking down: the head is ahead of the pelvis.
        assert!(local.capsules[0].b.x > 0.1);
        // A quarter into the cycle: the left foot forward, the right one back.
        assert!(local.capsules[2].b.x > 0.3 && local.capsules[3].b.x < -0.3);
        // In the world, forward is +y.
        let world = local.placed(Vec3::new(5.0, 5.0, 0.0), crate::angle16_to_rad(state.yaw));
        assert!(world.capsules[2].b.y > 5.3);
    }

    #[test]
    fn the_gait_blends_toward_the_velocity_and_its_phase_wraps() {
        let params = PoseParams::default();
        let run = Vec3::new(2.8, 0.0, -9.0);
        // One time constant: 63% of the way, the vertical part ignored.
        let g = Gait::default().advance(run, &params, 0.1);
        assert!((g.velocity.x - 2.8 * (1.0 - (-1.0f32).exp())).abs() < 1e-5);
        assert_eq!(g.velocity.z, 0.0);
        // With no blend it follows at once: 1.4 m is half a stride, turning 0.75 into 0.25;
        // 2.8 m is a whole one.
        let instant = PoseParams {
            gait_blend_s: 0.0,
            ..params
        };
        let from = Gait {
            run_phase: 0.75,
            velocity: Vec3::ZERO,
        };
        let g = from.advance(run, &instant, 0.5);
        assert!((g.run_phase - 0.25).abs() < 1e-6, "{g:?}");
        let g = from.advance(run * 2.0, &instant, 0.5);
        assert!((g.run_phase - 0.75).abs() < 1e-6, "{g:?}");
        let still = Gait {
            run_phase: 0.4,
            velocity: Vec3::ZERO,
        };
        assert_eq!(still.advance(Vec3::ZERO, &params, 1.0), still);
    }
}
