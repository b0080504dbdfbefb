//! A bot's brain: pure, allocation-free, reading only what a client is told.
//!
//! A bot holds the entity states its replica decoded ([`decode_state`](crate::decode_state)
//! of each network id's lanes) and asks [`Bot::think`] for its input each tick. The first
//! seat of each team with two or more players defends; the others attack. Carriers sidestep
//! enemies on their way home; enemy carriers are chased only within 10 m of our base, so
//! one that got away is let go (a perfect chaser at 6 m/s always catches a 5.4 m/s carrier,
//! and no bot match would ever score).

use tickforge_api::Tick;

use crate::{CtfConfig, EntityState, Input, Kind, Team};

/// Enemy carriers farther than this from our base are not chased, m.
const LEASH: f32 = 10.0;

/// One seat's brain.
#[derive(Clone, Copy, Debug)]
pub struct Bot {
    seat: u16,
    team: Team,
    defender: bool,
    config: CtfConfig,
}

fn dist(a: [f32; 2], b: [f32; 2]) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
}

/// The input that runs from `from` toward `to` at full stick (none when within 0.2 m).
pub fn steer(from: [f32; 2], to: [f32; 2]) -> Input {
    let d = [to[0] - from[0], to[1] - from[1]];
    let len = dist(from, to);
    if len < 0.2 {
        return Input::default();
    }
    Input {
        move_x: (d[0] / len * 127.0).round() as i8,
        move_y: (d[1] / len * 127.0).round() as i8,
        buttons: 0,
    }
}

impl Bot {
    /// The brain of `seat` in a match of `seats` seats played with `config` (its arena).
    pub fn new(seat: u16, seats: u16, config: &CtfConfig) -> Bot {
        let team = Team::of(seat);
        let in_team = (u32::from(seats) + 1 - team.index() as u32) / 2;
        Bot {
            seat,
            team,
            defender: in_team >= 2 && seat / 2 == 0,
            config: *config,
        }
    }

    /// True for the team's defender.
    pub fn is_defender(&self) -> bool {
        self.defender
    }

    /// A point a few metres from `from` toward `to`, bent away from enemies within 6 m
    /// while in their half (where they can tag).
    fn evade(&self, from: [f32; 2], to: [f32; 2], world: &[Option<EntityState>]) -> [f32; 2] {
        let d = dist(from, to).max(0.01);
        let mut dir = [(to[0] - from[0]) / d, (to[1] - from[1]) / d];
        if self.config.in_half(self.team, from) {
            return to;
        }
        for e in world.iter().flatten() {
            let r = dist(from, e.position);
            if e.kind == Kind::Player && e.team != self.team && !e.idle && r < 6.0 {
                let push = 2.0 * (6.0 - r) / 6.0 / r.max(0.01);
                dir[0] += (from[0] - e.position[0]) * push;
                dir[1] += (from[1] - e.position[1]) * push;
            }
        }
        [from[0] + dir[0] * 3.0, from[1] + dir[1] * 3.0]
    }

    /// The input for `tick`, from `world`: each entity's state by network id (`None`:
    /// not known). Carry the enemy flag home; tag an enemy carrier in our half; return our
    /// dropped flag; defend in front of our base, or go for the enemy flag.
    pub fn think(&self, tick: Tick, world: &[Option<EntityState>]) -> Input {
        let Some(Some(me)) = world.get(usize::from(self.seat)) else {
            return Input::default();
        };
        let (mut own_flag, mut enemy_flag, mut carrier) = (None, None, None);
        for s in world.iter().flatten() {
            match (s.kind, s.team == self.team) {
                (Kind::Flag, true) => own_flag = Some(s),
                (Kind::Flag, false) => enemy_flag = Some(s),
                (Kind::Player, false) if s.carrying => carrier = Some(s),
                _ => {}
            }
        }
        let home = self.config.base(self.team);
        let toward_middle = if self.team == Team::A { 3.0 } else { -3.0 };
        let target = if me.carrying {
            self.evade(me.position, home, world)
        } else if let Some(c) = carrier.filter(|c| {
            // Chase near our base only: a carrier that got this far away is let go.
            dist(c.position, home) < LEASH && (self.defender || dist(me.position, c.position) < 8.0)
        }) {
            [
                c.position[0] + c.velocity[0] * 0.2,
                c.position[1] + c.velocity[1] * 0.2,
            ]
        } else if let Some(f) = own_flag
            .filter(|f| f.dropped && (self.defender || dist(me.position, f.position) < 10.0))
        {
            f.position
        } else if self.defender {
            [home[0] + toward_middle, home[1]]
        } else if let Some(f) = enemy_flag.filter(|f| !f.carrying) {
            // Approach from a side that changes every two seconds, per seat.
            let mut h = u32::from(self.seat).wrapping_mul(0x9E37_79B1)
                ^ (tick.0 / 256).wrapping_mul(0x85EB_CA77);
            h ^= h >> 15;
            let side = (h % 9) as f32 - 4.0;
            let mut t = f.position;
            if dist(me.position, t) > 6.0 {
                t[1] = (t[1] + side).clamp(1.0, self.config.arena_h - 1.0);
            }
            t
        } else {
            // A teammate carries: wait in our half for their carrier.
            [self.config.arena_w / 2.0 - toward_middle * 2.0, home[1]]
        };
        steer(me.position, target)
    }
}
