//! Hit registration seen from the client: an aiming bot shows the other players as its
//! session interpolates them ([`tickforge_client::Session::render_tick`],
//! [`tickforge_client::Session::entity_at`]), poses them there, decides what each of its
//! shots hits in that picture, and compares with the server's verdict
//! ([`tickforge_shooter::ShooterEvent::ShotResult`]).
//!
//! The input that fires names the moment shown (its view time: the render tick, to 1/256
//! of a tick), and the server's lag compensation rewinds its history to that moment. Both
//! sides test the shot at the same moment: the server against the states it simulated,
//! posed every few ticks and lerped between; the bot against the states its snapshots
//! carried, lerped between the two snapshots around the render tick and posed alike. What
//! the two disagree on is what hit registration costs at that latency.
//!
//! Poses, as the server poses: a player's hitboxes follow its stance, its view pitch and
//! its gait, posed on every [`HistoryConfig::pose_every`]th tick and lerped in between,
//! and lerped again between the two ticks around the moment. The bot reads the states of
//! those posing ticks from the session (a posing tick it has not received yet is its
//! newest state, held). What it cannot know it leaves out: the run cycle's phase is not
//! replicated, so a running player's legs are posed at the cycle's start (straight, the
//! middle of their swing), its upper body at the top of its bob (up to 3 cm high); and a
//! server that poses more often at the start of a fight (the first tick after the buy
//! phase) is posed as on any other tick. Only shots that graze a running player's legs
//! or the top of its head can tell.
//!
//! Cost: each frame reads the enemies the bot may aim at (teams by slot parity), at the
//! moment shown; a shot reads the other players it may hit, and the posing ticks of those
//! its line of fire meets.
//!
//! Nothing here allocates once made: the players' rows are sized with the welcome.
use std::num::NonZeroU8;
use std::sync::Arc;

use tickforge_game::history::HistoryConfig;
use tickforge_game::hitscan::segment_enters;
use tickforge_game::map::Aabb;
use tickforge_game::pose::{
    beats, pose_of, Gait, Hitboxes, LocalHitboxes, Pose, PoseParams, SAME_DISTANCE_M,
};
use tickforge_game::rules::BodyPart;
use tickforge_game::{angle16_to_rad, hitscan, Map, PlayerState, UserCmd, Vec3, ViewTime};
use tickforge_shooter::{flags, EntityState, NO_SLOT};

/// Shot verdicts remembered until the server's arrives: a power of two, two seconds at
/// 128 Hz.
const VERDICT_RING: usize = 256;

/// Players a judged shot remembers as shown or not ([`AimView::was_shown`]); a slot past
/// them is not known.
const SHOWN_SLOTS: usize = 128;

/// Where aimers aim, above the feet, metres: the chest.
pub const CHEST_M: f32 = 1.2;

/// Who a shot hit: `(victim slot, part code)`, `None` for a miss.
pub type Verdict = Option<(u16, u8)>;

/// The wire code of a hitbox in a shot result: 0 head, 1 body, 2 legs.
pub fn part_code(part: BodyPart) -> u8 {
    match part {
        BodyPart::Head => 0,
        BodyPart::Body => 1,
        BodyPart::Legs => 2,
    }
}

/// Turns a shot result's fields into a [`Verdict`].
pub fn verdict_of(victim: u16, part: u8) -> Verdict {
    (victim != NO_SLOT).then_some((victim, part))
}

/// Agreement between the bots' verdicts and the server's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HitregCounts {
    /// Shots compared: a server verdict arrived for a shot the bot had judged.
    pub shots: u64,
    /// The server's verdict was a hit.
    pub server_hits: u64,
    /// Both named the same victim, or both a miss.
    pub agree: u64,
    /// The bot saw a hit, the server a miss.
    pub bot_hit_server_miss: u64,
    /// The bot saw a miss, the server a hit.
    pub bot_miss_server_hit: u64,
    /// Of `bot_miss_server_hit`: the server's victim was not in the bot's view at that
    /// moment (never sent, or hidden by the fog of war).
    pub server_hit_unseen: u64,
    /// Both saw a hit, on different players.
    pub other_victim: u64,
    /// Server hits that did no damage: the victim, alive as the shooter saw it, had been
    /// killed by someone else before the shot reached the server.
    pub victim_dead_at_fire: u64,
}

impl HitregCounts {
    /// Counts one comparison; `victim_dead` when the server's hit did no damage because its
    /// victim had died before the shot arrived.
    pub fn compare(&mut self, bot: Verdict, server: Verdict, victim_dead: bool) {
        self.shots += 1;
        self.server_hits += u64::from(server.is_some());
        self.victim_dead_at_fire += u64::from(victim_dead);
        match (bot.map(|v| v.0), server.map(|v| v.0)) {
            (a, b) if a == b => self.agree += 1,
            (Some(_), None) => self.bot_hit_server_miss += 1,
            (None, Some(_)) => self.bot_miss_server_hit += 1,
            _ => self.other_victim += 1,
        }
    }

    /// Adds another bot's counts.
    pub fn merge(&mut self, other: &HitregCounts) {
        self.shots += other.shots;
        self.server_hits += other.server_hits;
        self.agree += other.agree;
        self.bot_hit_server_miss += other.bot_hit_server_miss;
        self.bot_miss_server_hit += other.bot_miss_server_hit;
        self.server_hit_unseen += other.server_hit_unseen;
        self.other_victim += other.other_victim;
        self.victim_dead_at_fire += other.victim_dead_at_fire;
    }
}

/// The render tick a view time stands for: the moment the server rewinds to.
pub fn render_tick(view: ViewTime) -> f64 {
    f64::from(view.tick.0) + f64::from(view.frac) / 256.0
}

/// One player as shown at the view time.
#[derive(Clone, Copy, Debug, Default)]
struct Shown {
    /// In view then: its snapshots carried it (the fog of war did not hide it).
    present: bool,
    state: PlayerState,
    alive: bool,
    /// The [`AimView::show`] that wrote it; older ones show nobody.
    generation: u32,
}

impl Shown {
    fn of(e: Option<EntityState>, generation: u32) -> Shown {
        e.map_or(
            Shown {
                generation,
                ..Shown::default()
            },
            |e| Shown {
                present: true,
                state: e.to_player(),
                alive: e.flags & flags::ALIVE != 0,
                generation,
            },
        )
    }
}

/// A shot judged: its input's sequence number, its verdict, and who was shown alive then
/// (bit `slot` of the first [`SHOWN_SLOTS`]).
#[derive(Clone, Copy, Debug, Default)]
struct Judged {
    seq: u32,
    verdict: Verdict,
    shown: u128,
}

/// Where an [`AimView`] reads the players: the session's interpolation
/// ([`tickforge_client::Session::entity_at`]). A closure `|slot, tick|` is one.
pub trait Players {
    /// Player `slot` at render tick `tick` (fractional), `None` when not in view.
    fn at(&mut self, slot: u16, tick: f64) -> Option<EntityState>;

    /// Starts loading what `at(slot, tick)` will read: the player's own first line when
    /// `far`, else the states it is interpolated from. A hint, which the view gives
    /// [`READ_AHEAD`] players ahead of the one it reads (twice that for `far`), so that
    /// the misses of a crowd's players overlap. By default nothing.
    fn prefetch(&mut self, slot: u16, tick: f64, far: bool) {
        let _ = (slot, tick, far);
    }

    /// Player `slot`'s newest state, without interpolation: what a view that considers
    /// only its nearest enemies ([`AimView::considering`]) ranks them by. By default
    /// `None`: every enemy is read.
    fn newest(&mut self, slot: u16) -> Option<EntityState> {
        let _ = slot;
        None
    }

    /// Starts loading what `newest(slot)` will read: a hint, which a view ranking its
    /// enemies gives `2 × READ_AHEAD` listed players ahead of the one it ranks. By default
    /// nothing.
    fn prefetch_newest(&mut self, slot: u16) {
        let _ = slot;
    }
}

impl<F: FnMut(u16, f64) -> Option<EntityState>> Players for F {
    fn at(&mut self, slot: u16, tick: f64) -> Option<EntityState> {
        self(slot, tick)
    }
}

/// Slots `a` and `b` play on opposing teams (teams by slot parity).
fn foes(a: u16, b: u16) -> bool {
    a % 2 != b % 2
}

/// How many players ahead of the one it reads an [`AimView`] asks its [`Players`] to start
/// loading.
pub const READ_AHEAD: usize = 8;

/// What a loop over listed players starts loading ahead of the one it reads: the ones
/// [`READ_AHEAD`] and twice that further on in the listing, those of them it will read.
/// [`Ahead::step`] once per player, before reading it.
struct Ahead<I> {
    near: std::iter::Skip<I>,
    far: std::iter::Skip<I>,
}

impl<I: Iterator<Item = u16> + Clone> Ahead<I> {
    fn new(listed: I) -> Self {
        Ahead {
            near: listed.clone().skip(READ_AHEAD),
            far: listed.skip(2 * READ_AHEAD),
        }
    }

    /// Moves on one player: starts loading, as at `tick`, those ahead that `read` says
    /// will be read (the farther one's first lines only).
    fn step(&mut self, at: &mut impl Players, tick: f64, read: impl Fn(u16) -> bool) {
        if let Some(far) = self.far.next().filter(|&s| read(s)) {
            at.prefetch(far, tick, true);
        }
        if let Some(near) = self.near.next().filter(|&s| read(s)) {
            at.prefetch(near, tick, false);
        }
    }
}

/// What an aiming bot shows of its match, at its view time, and the verdicts of the shots
/// it judged there. It reads the players through [`Players`].
pub struct AimView {
    map: Arc<Map>,
    pose: PoseParams,
    pose_every: u32,
    /// Hitboxes of a player held idle, in the body frame.
    idle: LocalHitboxes,
    /// A box around the feet that holds a player's hitboxes in any pose: the broad phase.
    reach: Aabb,
    /// The enemies of `me` as shown at `view`, by slot (others are read when a shot needs
    /// them); only those of this `generation` count.
    players: Vec<Shown>,
    generation: u32,
    /// The slots that may be in view at `view` (what the replica lists), lowest first.
    listed: Vec<u16>,
    /// Of those, the enemies shown alive.
    enemies: Vec<u16>,
    me: u16,
    /// The enemy [`AimView::sight`] last picked, followed between the frames that pick one.
    target: Option<u16>,
    /// Every this many frames the enemies are shown (all, or the nearest
    /// [`AimView::considering`]) and a target picked among them; in between, only the
    /// target. 1: every frame.
    refresh_every: u32,
    /// At most this many enemies are shown on those frames: the nearest by their newest
    /// states ([`AimView::considering`]).
    consider: usize,
    /// Scratch of a frame that considers the nearest: (distance², slot) of each enemy.
    nearest: Vec<(f32, u16)>,
    /// Bit `slot`: shown this frame (of those frames).
    chosen: Vec<u64>,
    /// Frames shown since the last that picked a target.
    since_refresh: u32,
    /// The moment shown; `None` before the first (or after a start over).
    view: Option<ViewTime>,
    /// By `seq % VERDICT_RING`.
    verdicts: Box<[Judged]>,
}

impl AimView {
    /// A view of a match of `players` on `map`, posed every `pose_every`th tick (the
    /// server's [`HistoryConfig::pose_every`]), with the server's default body proportions.
    pub fn new(map: Arc<Map>, players: u16, pose_every: NonZeroU8) -> Self {
        let pose = HistoryConfig::default().pose;
        AimView {
            map,
            idle: Pose::IDLE.hitboxes(&pose),
            reach: pose.reach(),
            pose,
            pose_every: u32::from(pose_every.get()),
            players: vec![Shown::default(); usize::from(players)],
            generation: 0,
            listed: Vec::with_capacity(usize::from(players)),
            enemies: Vec::with_capacity(usize::from(players)),
            me: 0,
            target: None,
            refresh_every: 1,
            consider: usize::MAX,
            nearest: Vec::with_capacity(usize::from(players)),
            chosen: vec![0; usize::from(players).div_ceil(64)],
            since_refresh: 0,
            view: None,
            verdicts: vec![Judged::default(); VERDICT_RING].into_boxed_slice(),
        }
    }

    /// Shows every enemy (and picks a target among them) only every `frames` frames,
    /// and in between only the target it picked, as a player keeps a target for a
    /// reaction time rather than looking anew every frame: a frame then costs one player
    /// read rather than every enemy's. A target that dies or leaves the view is replaced
    /// at the next frame. Judging shots reads every player in view whatever this says.
    /// 1 (the default): every enemy every frame.
    pub fn refreshing_every(mut self, frames: u32) -> Self {
        self.refresh_every = frames.max(1);
        self
    }

    /// Shows at most `enemies` enemies on the frames that pick a target: the nearest
    /// to the player shown to, by their newest states ([`Players::newest`]), as a player
    /// in a crowd looks at the few nearest rather than at a hundred; the target is picked
    /// among them. The others are not read that frame (a shot then reads them, as between
    /// refreshes). Where the newest states are not at hand, every enemy is shown.
    /// Unlimited by default.
    pub fn considering(mut self, enemies: usize) -> Self {
        self.consider = enemies.max(1);
        self
    }

    /// Player slots.
    pub fn players(&self) -> usize {
        self.players.len()
    }

    /// Sized for a match of `players` (a welcome named another size); shows nobody until
    /// [`AimView::show`].
    pub fn resize(&mut self, players: u16) {
        self.players.clear();
        self.players.resize(usize::from(players), Shown::default());
        self.chosen.resize(usize::from(players).div_ceil(64), 0);
        self.nearest.reserve(usize::from(players));
        self.listed.reserve(usize::from(players));
        self.enemies.reserve(usize::from(players));
        self.start_over();
    }

    /// Forgets what was shown (a match that started over): nobody is shown until the next
    /// [`AimView::show`].
    pub fn start_over(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        self.listed.clear();
        self.enemies.clear();
        self.target = None;
        self.view = None;
    }

    /// The moment shown, if any.
    pub fn view(&self) -> Option<ViewTime> {
        self.view
    }

    /// Shows the match at `view` to `me`: reads `me`'s enemies (teams by slot parity)
    /// among `listed` as they are then. `listed` holds, lowest first, every slot that may
    /// be in view then (the replica's [`tickforge_replication::Replica::listed`]): the
    /// others are not read, so a frame costs what is in view, not the match's size. Between
    /// the frames that pick a target ([`AimView::refreshing_every`]) only the target is
    /// read (and `listed` only up to it: a crowd lists hundreds), and on those, only the
    /// nearest enemies when the view considers that many ([`AimView::considering`]). Call
    /// once a frame; a shot judged in it is given the same listing.
    pub fn show(
        &mut self,
        view: ViewTime,
        me: u16,
        listed: impl IntoIterator<Item = u16>,
        mut at: impl Players,
    ) {
        let r = render_tick(view);
        let target = self.target.filter(|_| {
            self.since_refresh + 1 < self.refresh_every && self.view.is_some() && me == self.me
        });
        self.since_refresh = if target.is_some() {
            self.since_refresh + 1
        } else {
            0
        };
        self.generation = self.generation.wrapping_add(1);
        self.enemies.clear();
        let players = self.players.len();
        let listed = listed.into_iter().filter(|&s| usize::from(s) < players);
        self.me = me;
        self.view = Some(view);
        if let Some(t) = target {
            // Between refreshes: the target alone, if still listed. The listing, lowest
            // first, is read up to it and not kept (a judged shot is given it again).
            if listed.take_while(|&s| s <= t).any(|s| s == t) {
                let p = &mut self.players[usize::from(t)];
                *p = Shown::of(at.at(t, r), self.generation);
                if p.present && p.alive {
                    self.enemies.push(t);
                }
            }
            return;
        }
        self.listed.clear();
        self.listed.extend(listed);
        let limited = self.choose_nearest(me, &mut at);
        let chosen = &self.chosen;
        let shows = |slot: u16| {
            if limited {
                chosen[usize::from(slot) / 64] >> (slot % 64) & 1 != 0
            } else {
                foes(slot, me)
            }
        };
        let mut ahead = Ahead::new(self.listed.iter().copied());
        for &slot in &self.listed {
            ahead.step(&mut at, r, shows);
            if shows(slot) {
                let p = &mut self.players[usize::from(slot)];
                *p = Shown::of(at.at(slot, r), self.generation);
                if p.present && p.alive {
                    self.enemies.push(slot);
                }
            }
        }
    }

    /// On a frame that picks a target, when more enemies are listed than this view considers:
    /// marks in `chosen` the nearest `consider` living enemies of `me` by their newest
    /// states, and returns true. False (every enemy is shown) when they are few, or the
    /// newest states are not at hand.
    fn choose_nearest(&mut self, me: u16, at: &mut impl Players) -> bool {
        let enemies = self.listed.iter().filter(|&&s| foes(s, me)).count();
        if enemies <= self.consider {
            return false;
        }
        let Some(mine) = at.newest(me).map(|e| e.position) else {
            return false;
        };
        self.nearest.clear();
        for k in 0..self.listed.len() {
            // Each enemy's newest state, scattered over the replica's view, starts loading
            // well before it is ranked: a crowd's bot ranks over a hundred each refresh.
            if let Some(&ahead) = (self.listed.get(k + 2 * READ_AHEAD)).filter(|&&s| foes(s, me)) {
                at.prefetch_newest(ahead);
            }
            let slot = self.listed[k];
            if !foes(slot, me) {
                continue;
            }
            let Some(e) = at.newest(slot).filter(|e| e.flags & flags::ALIVE != 0) else {
                continue;
            };
            let d = e.position - mine;
            self.nearest.push((d.dot(d), slot));
        }
        if self.nearest.len() > self.consider {
            let k = self.consider - 1;
            self.nearest
                .select_nth_unstable_by(k, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            self.nearest.truncate(self.consider);
        }
        self.chosen.fill(0);
        for &(_, slot) in &self.nearest {
            self.chosen[usize::from(slot) / 64] |= 1 << (slot % 64);
        }
        true
    }

    /// Enemy `slot`'s state as shown and whether it is alive; `None` when not in view, not
    /// an enemy of the player shown to, or not read this frame (a frame between refreshes
    /// reads only the target).
    pub fn shown(&self, slot: u16) -> Option<(PlayerState, bool)> {
        let p = self.players.get(usize::from(slot))?;
        (p.generation == self.generation && p.present).then_some((p.state, p.alive))
    }

    /// Where a player in `state` starts its shots: its eye.
    pub fn eye_of(&self, state: &PlayerState) -> Vec3 {
        state.origin + Vec3::new(0.0, 0.0, self.pose.eye_height_m(state.stance()))
    }

    /// `e` posed, in the body frame: idle when the server held it idle; otherwise from its
    /// state, its legs at the start of their cycle (see the module documentation).
    fn posed(&self, e: &EntityState) -> LocalHitboxes {
        if e.flags & flags::POSED == 0 {
            return self.idle;
        }
        let state = e.to_player();
        let gait = Gait {
            run_phase: 0.0,
            velocity: Vec3::new(e.velocity.x, e.velocity.y, 0.0),
        };
        pose_of(&state, state.stance(), &gait, &self.pose).hitboxes(&self.pose)
    }

    /// `slot`'s pose at `tick`, in the body frame, as the server has it: posed on a
    /// posing tick, lerped between the posing ticks around it when it was alive, posed and
    /// in the same stance at both, and posed from its own state otherwise. `None` when not
    /// in view, or dead, then.
    fn local_at(&self, slot: u16, tick: u32, at: &mut impl Players) -> Option<LocalHitboxes> {
        let e = at
            .at(slot, f64::from(tick))
            .filter(|e| e.flags & flags::ALIVE != 0)?;
        let into = tick % self.pose_every;
        if into != 0 && e.flags & flags::POSED != 0 {
            let lower = tick - into;
            let upper = lower.wrapping_add(self.pose_every);
            let fits = |k: &EntityState| {
                let need = flags::ALIVE | flags::POSED;
                k.flags & need == need && k.flags & flags::CROUCHED == e.flags & flags::CROUCHED
            };
            let keys = at.at(slot, f64::from(lower)).filter(fits);
            if let Some((a, b)) = keys.zip(at.at(slot, f64::from(upper)).filter(fits)) {
                let t = into as f32 / self.pose_every as f32;
                return Some(self.posed(&a).lerp(&self.posed(&b), t));
            }
        }
        Some(self.posed(&e))
    }

    /// `slot`'s hitboxes in the world at the moment shown, `p` as shown then: its pose at
    /// the tick before the moment and (when alive at both) the one after, lerped by the
    /// fraction, placed where it is shown (or where it stood at the tick before, when it
    /// died in between).
    fn hitboxes(
        &self,
        slot: u16,
        p: &Shown,
        view: ViewTime,
        at: &mut impl Players,
    ) -> Option<Hitboxes> {
        let tick = view.tick.0;
        let local = self.local_at(slot, tick, at)?;
        let placed =
            |local: LocalHitboxes| local.placed(p.state.origin, angle16_to_rad(p.state.yaw));
        if view.frac == 0 {
            return Some(placed(local));
        }
        match self.local_at(slot, tick.wrapping_add(1), at) {
            Some(next) => Some(placed(local.lerp(&next, f32::from(view.frac) / 256.0))),
            None => {
                let e = at.at(slot, f64::from(tick))?;
                Some(local.placed(e.position, angle16_to_rad(e.yaw)))
            }
        }
    }

    /// What a shot of `shooter` (the player shown to) from `eye` with `cmd` hits in this
    /// view, and who was shown alive then (bit `slot`, of the first [`SHOWN_SLOTS`]): the
    /// nearest hitbox of a player shown alive (teammates included, as on the server), the
    /// map occluding; `None` for a miss, or before anything is shown. `listed` and `at`
    /// list and read the players as they did for this frame's [`AimView::show`].
    fn judge_shown<I>(
        &self,
        shooter: u16,
        eye: Vec3,
        cmd: &UserCmd,
        listed: I,
        mut at: impl Players,
    ) -> (Verdict, u128)
    where
        I: IntoIterator<Item = u16>,
        I::IntoIter: Clone,
    {
        let Some(view) = self.view else {
            return (None, 0);
        };
        let r = render_tick(view);
        let dir = hitscan::aim_direction(cmd.yaw, cmd.pitch);
        let limit = self
            .map
            .trace_ray(eye, dir, f32::INFINITY)
            .map_or(f32::INFINITY, |h| h.distance);
        let mut best: Option<(usize, BodyPart, f32)> = None;
        let mut shown = 0u128;
        // Teammates are read here, and the enemies this frame did not show (between
        // refreshes all but the target; on a refresh, those past the nearest considered).
        let generation = self.generation;
        let players = &self.players;
        let reads = |s: u16| {
            s != shooter && (!foes(s, self.me) || players[usize::from(s)].generation != generation)
        };
        let players = self.players.len();
        let listed = listed
            .into_iter()
            .filter(move |&s| usize::from(s) < players);
        let mut ahead = Ahead::new(listed.clone());
        for slot16 in listed {
            ahead.step(&mut at, r, reads);
            let slot = usize::from(slot16);
            if slot16 == shooter {
                continue;
            }
            let p = if reads(slot16) {
                Shown::of(at.at(slot16, r), self.generation)
            } else {
                self.players[slot]
            };
            if !p.present || !p.alive {
                continue;
            }
            if slot < SHOWN_SLOTS {
                shown |= 1 << slot;
            }
            // A player entered farther than the best hit so far cannot beat it.
            let near = best.map_or(limit, |(_, _, t)| limit.min(t + SAME_DISTANCE_M));
            let (lo, hi) = (
                p.state.origin + self.reach.min,
                p.state.origin + self.reach.max,
            );
            if !eye.is_finite() || !segment_enters(eye, dir, near, lo, hi) {
                continue;
            }
            let Some(boxes) = self.hitboxes(slot16, &p, view, &mut at) else {
                continue;
            };
            if let Some((part, t)) = boxes.first_hit(eye, dir, limit) {
                if best.is_none_or(|(_, bp, bt)| beats((part, t), (bp, bt))) {
                    best = Some((slot, part, t));
                }
            }
        }
        // `slot` < players ≤ u16::MAX.
        let verdict = best.map(|(slot, part, _)| (slot as u16, part_code(part)));
        (verdict, shown)
    }

    /// What a shot of `shooter` (the player shown to) from `eye` with `cmd` hits in this
    /// view: the nearest hitbox of a player shown alive (teammates included, as on the
    /// server), the map occluding; `None` for a miss, or before anything is shown.
    /// `listed` and `at` list and read the players as for this frame's [`AimView::show`]
    /// (the listing is not kept between the frames that pick a target).
    pub fn judge<I>(
        &self,
        shooter: u16,
        eye: Vec3,
        cmd: &UserCmd,
        listed: I,
        at: impl Players,
    ) -> Verdict
    where
        I: IntoIterator<Item = u16>,
        I::IntoIter: Clone,
    {
        self.judge_shown(shooter, eye, cmd, listed, at).0
    }

    /// Judges the shot of input `seq` ([`AimView::judge`]) and remembers its verdict and
    /// who was shown.
    pub fn judge_input<I>(
        &mut self,
        seq: u32,
        shooter: u16,
        eye: Vec3,
        cmd: &UserCmd,
        listed: I,
        at: impl Players,
    ) where
        I: IntoIterator<Item = u16>,
        I::IntoIter: Clone,
    {
        let (verdict, shown) = self.judge_shown(shooter, eye, cmd, listed, at);
        self.verdicts[seq as usize % VERDICT_RING] = Judged {
            seq,
            verdict,
            shown,
        };
    }

    /// The verdict remembered for input `seq`, if it is still held.
    pub fn verdict(&self, seq: u32) -> Option<Verdict> {
        let j = self.verdicts[seq as usize % VERDICT_RING];
        (j.seq == seq && seq != 0).then_some(j.verdict)
    }

    /// Whether `slot` was shown (in view, and alive) when input `seq` was judged; `None`
    /// when that input is no longer remembered or the slot is past those remembered.
    pub fn was_shown(&self, seq: u32, slot: u16) -> Option<bool> {
        let j = self.verdicts[seq as usize % VERDICT_RING];
        if j.seq != seq || seq == 0 || usize::from(slot) >= SHOWN_SLOTS {
            return None;
        }
        Some(j.shown & (1 << slot) != 0)
    }

    /// The nearest enemy shown alive that the player shown to, in `own` state, can see:
    /// the point to aim at, and whether it stands still. `None` when it is dead
    /// (`own_alive` false) or sees nobody.
    /// The enemy picked becomes the target that the frames in between follow.
    pub fn sight(&mut self, own: &PlayerState, own_alive: bool) -> Option<Sight> {
        self.target = None;
        self.view?;
        if !own_alive {
            return None;
        }
        let eye = self.eye_of(own);
        let mut best: Option<(f32, Vec3, u16)> = None;
        // Only the enemies shown alive are read.
        for &slot in &self.enemies {
            let p = &self.players[usize::from(slot)];
            let aim = p.state.origin + Vec3::new(0.0, 0.0, CHEST_M);
            let d = aim - eye;
            let dist = d.length();
            let too_near = dist.is_nan() || dist <= 0.5;
            if too_near || best.is_some_and(|(b, _, _)| b <= dist) {
                continue;
            }
            if self.map.trace_ray(eye, d * (1.0 / dist), dist).is_some() {
                continue;
            }
            best = Some((dist, aim, slot));
        }
        self.target = best.map(|(_, _, slot)| slot);
        best.map(|(_, aim, _)| Sight {
            eye,
            aim,
            still: own.on_ground && own.velocity.horizontal_length() < 0.05,
        })
    }
}

/// An enemy in view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sight {
    /// The bot's eye, metres.
    pub eye: Vec3,
    /// Where to aim, metres.
    pub aim: Vec3,
    /// The bot stands still (a shot starts where the server will start it).
    pub still: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickforge_client::view_time;
    use tickforge_game::history::{History, PlayerSample, Posing};
    use tickforge_game::hitscan::Shot;
    use tickforge_game::{BuiltinMap, PlayerSlot, Tick};
    use tickforge_telemetry::Scopes;

    const FOUR: NonZeroU8 = NonZeroU8::new(4).unwrap();

    /// A player standing at `(x, y)` on the arena's floor.
    fn standing(x: f32, y: f32) -> PlayerState {
        PlayerState {
            origin: Vec3::new(x, y, 0.03125),
            on_ground: true,
            ..Default::default()
        }
    }

    /// `state` as a snapshot carries it: alive, posed (combat), through the wire's quanta.
    fn sent(state: &PlayerState) -> EntityState {
        EntityState::from_player(state, 100, 0, flags::ALIVE | flags::POSED).quantized()
    }

    /// `states` (by tick from 0, by slot, up to the newest received) as the session shows
    /// them at render tick `r`: the two snapshots around it lerped field by field
    /// ([`tickforge_client::lerp`]), the newest held past it.
    fn interpolated(states: &[Vec<PlayerState>], r: f64, slot: u16) -> EntityState {
        let schema = tickforge_shooter::schema();
        let view = view_time(r);
        let newest = states.len() - 1;
        let t = (view.tick.0 as usize).min(newest);
        let lanes = |t: usize| sent(&states[t][usize::from(slot)]).lanes();
        let next = (t + 1).min(newest);
        let f = f64::from(view.frac) / 256.0;
        EntityState::from_lanes(&tickforge_client::lerp(schema, &lanes(t), &lanes(next), f))
    }

    /// What the server's `history` says a shot of `shooter` from `eye` with `cmd`, made
    /// looking at `view`, hits (everyone alive now).
    fn server_verdict(
        history: &History,
        map: &Map,
        shooter: u16,
        eye: Vec3,
        cmd: &UserCmd,
        view: ViewTime,
    ) -> Verdict {
        let (command_tick, interp_delay_ticks) = view.rewind_args();
        let shot = Shot {
            shooter: PlayerSlot(shooter),
            command_tick,
            interp_delay_ticks,
            origin: eye,
            direction: hitscan::aim_direction(cmd.yaw, cmd.pitch),
            max_range_m: f32::INFINITY,
        };
        let anyone = vec![true; history.players()];
        let scopes = Scopes::new(std::time::Instant::now);
        hitscan::fire(&shot, map, history, &anyone, &scopes)
            .map(|h| (h.victim.0, part_code(h.part)))
    }

    /// Agreement, over a scripted crossing, between the server's history fed the exact
    /// states and tested `lag` ticks after each shot, and an aim view shown the same states
    /// through the wire and the session's interpolation, at a view time that trails the
    /// newest tick by a delay that wanders between 2 and 6 ticks (as an adaptive one does).
    /// Also the shots the server counted as hits.
    fn crossing_agreement(lag: u32) -> (HitregCounts, u32) {
        let map = Arc::new(BuiltinMap::Arena.load());
        let scopes = Scopes::new(std::time::Instant::now);
        let mut server = History::new(HistoryConfig {
            players: 2,
            ..HistoryConfig::default()
        })
        .unwrap();
        let mut view = AimView::new(map.clone(), 2, FOUR);
        // Open floor in the arena's north lane (y = 17): the shooter at x = -10 facing +x,
        // the target 10 m ahead running across the line of fire at 6 m/s, with a little
        // vertical bob; the shooter sweeps its aim slowly across it.
        let shooter = standing(-10.0, 17.0);
        let state_at = |t: u32| {
            // A triangle wave: 1.5 m either side of the line and back.
            let phase = 6.0 * t as f32 / 128.0 % 6.0 - 3.0;
            PlayerState {
                origin: Vec3::new(
                    0.0,
                    17.0 + 1.5 - phase.abs(),
                    0.03125 + 0.01 * (t as f32 * 0.37).sin(),
                ),
                velocity: Vec3::new(0.0, 6.0 * phase.signum(), 0.0),
                on_ground: true,
                yaw: 16384,
                ..Default::default()
            }
        };
        // Aim at the target as it was a few ticks ago, off by up to ±1.6° in yaw, at the
        // legs or the chest or the head.
        let aim = |t: u32| {
            let y = state_at(t.saturating_sub(4)).origin.y - 17.0;
            let yaw = (y.atan2(10.0) / std::f32::consts::TAU * 65536.0).round() as i32;
            UserCmd {
                yaw: (yaw + (t as i32 * 37 % 600 - 300)) as u16,
                pitch: [-400, 0, 300][t as usize % 3],
                ..Default::default()
            }
        };
        let total = 600;
        let mut states = Vec::new();
        let mut counts = HitregCounts::default();
        let mut hits = 0;
        let mut shots = vec![(ViewTime::default(), UserCmd::default()); total as usize];
        let eye = view.eye_of(&shooter);
        for t in 0..total + lag {
            let now = [shooter, state_at(t)];
            server.record(
                Tick(t),
                now.iter().map(|s| PlayerSample {
                    state: *s,
                    stance: s.stance(),
                    alive: true,
                }),
                Posing::Animated,
                &scopes,
            );
            states.push(now.to_vec());
            if t < total {
                let delay = 4.0 + 2.0 * (t as f32 * 0.05).sin();
                let shown = ViewTime::behind(Tick(t), delay);
                let shown = if shown.tick.0 > t {
                    ViewTime::at(Tick(0))
                } else {
                    shown
                };
                let at = |slot, r| Some(interpolated(&states, r, slot));
                view.show(shown, 0, 0..view.players() as u16, at);
                let cmd = aim(t);
                view.judge_input(t + 1, 0, eye, &cmd, 0..view.players() as u16, at);
                shots[t as usize] = (shown, cmd);
            }
            // The server fires the shot made at t - lag, now.
            if let Some(made) = t.checked_sub(lag) {
                let (shown, cmd) = shots[made as usize];
                let theirs = server_verdict(&server, &map, 0, eye, &cmd, shown);
                hits += u32::from(theirs.is_some());
                counts.compare(view.verdict(made + 1).unwrap(), theirs, false);
            }
        }
        (counts, hits)
    }

    #[test]
    fn shots_judged_on_the_interpolated_players_agree_with_the_servers_rewind() {
        for lag in [0, 6, 19] {
            let (counts, hits) = crossing_agreement(lag);
            assert_eq!(counts.shots, 600);
            assert!(hits > 60 && hits < 540, "hits and misses both: {hits}");
            let rate = counts.agree as f64 / counts.shots as f64;
            assert!(rate >= 0.99, "lag {lag}: {rate} {counts:?}");
        }
    }

    #[test]
    fn a_view_time_is_the_render_tick_to_a_256th_and_the_server_rewinds_to_it() {
        let v = view_time(1013.5);
        assert_eq!(
            v,
            ViewTime {
                tick: Tick(1013),
                frac: 128
            }
        );
        assert_eq!(render_tick(v), 1013.5);
        // Rounded down: the 256th at or before the render tick.
        let v = view_time(7.999);
        assert_eq!((v.tick, v.frac), (Tick(7), 255));
        assert_eq!(view_time(12.0), ViewTime::at(Tick(12)));
        assert_eq!(view_time(-3.0), ViewTime::at(Tick(0)));
        assert_eq!(view_time(f64::NAN), ViewTime::at(Tick(0)));
        // The server's rewind (command tick less the delay) is the render tick again.
        for r in [40.0, 40.25, 41.75, 99.00390625] {
            let (command_tick, delay) = view_time(r).rewind_args();
            assert_eq!(f64::from(command_tick.0) - f64::from(delay), r, "{r}");
        }
    }

    #[test]
    fn a_player_is_posed_as_the_server_poses_it_between_posing_ticks() {
        let map = Arc::new(BuiltinMap::Arena.load());
        let scopes = Scopes::new(std::time::Instant::now);
        let mut server = History::new(HistoryConfig {
            players: 2,
            ..HistoryConfig::default()
        })
        .unwrap();
        // Slot 1 stands still and lifts its aim at tick 102, between the posing ticks 100
        // and 104 (values the wire carries exactly). Its legs stand still: the run cycle,
        // which the wire does not carry, plays no part.
        let state_at = |t: u32| PlayerState {
            yaw: 16384,
            pitch: if t >= 102 { 4096 } else { 0 },
            ..standing(0.0, 17.0)
        };
        let newest = 110;
        let mut states = Vec::new();
        for t in 0..=newest {
            let now = [standing(-10.0, 17.0), state_at(t)];
            let samples = now.map(|state| PlayerSample {
                state,
                stance: state.stance(),
                alive: true,
            });
            server.record(Tick(t), samples, Posing::Animated, &scopes);
            states.push(now.to_vec());
        }
        let mut at = |slot, r| Some(interpolated(&states, r, slot));
        let mut view = AimView::new(map, 2, FOUR);
        for r in [101.0, 102.0, 102.5, 103.75, 104.0] {
            let shown = view_time(r);
            view.show(shown, 0, 0..view.players() as u16, &mut at);
            let p = view.players[1];
            let mine = view.hitboxes(1, &p, shown, &mut at).unwrap();
            let (command_tick, delay) = shown.rewind_args();
            let time = server.rewind_time(command_tick, delay).unwrap();
            let theirs = server.hitboxes_at(PlayerSlot(1), time).unwrap();
            for (a, b) in mine.capsules.iter().zip(&theirs.capsules) {
                let off = (a.a - b.a).length().max((a.b - b.b).length());
                assert!(off < 1e-4, "at {r}: {a:?} against the server's {b:?}");
            }
        }
        // Posed from its state at the moment instead, its head would stand centimetres
        // from where the server has it between the posing ticks.
        let shown = view_time(102.5);
        view.show(shown, 0, 0..view.players() as u16, &mut at);
        let p = view.players[1];
        let direct = view
            .posed(&sent(&p.state))
            .placed(p.state.origin, angle16_to_rad(p.state.yaw));
        let lerped = view.hitboxes(1, &p, shown, &mut at).unwrap();
        assert!((direct.capsules[0].b - lerped.capsules[0].b).length() > 0.01);
        // Held idle (the buy phase), it stands idle.
        let idle = EntityState {
            flags: flags::ALIVE,
            ..sent(&p.state)
        };
        let mut idle_at = |_, _| Some(idle);
        view.show(shown, 0, 0..view.players() as u16, &mut idle_at);
        let p = view.players[1];
        assert_eq!(
            view.hitboxes(1, &p, shown, &mut idle_at),
            Some(
                view.idle
                    .placed(p.state.origin, angle16_to_rad(p.state.yaw))
            )
        );
    }

    /// A command aiming from `eye` at `at`, firing.
    fn aim_at(eye: Vec3, at: Vec3) -> UserCmd {
        let d = at - eye;
        let turns = |r: f32| (r / std::f32::consts::TAU * 65536.0).round() as i32;
        UserCmd {
            buttons: tickforge_game::buttons::FIRE,
            yaw: turns(d.y.atan2(d.x)) as u16,
            pitch: turns(d.z.atan2(d.horizontal_length())) as i16,
            ..Default::default()
        }
    }

    #[test]
    fn only_players_shown_alive_are_aimed_at_and_hit_and_teammates_block_shots() {
        let map = Arc::new(BuiltinMap::Arena.load());
        let mut view = AimView::new(map, 4, FOUR);
        // The arena's north lane: the shooter (slot 0) at x = -10, its enemy (slot 1) 10 m
        // ahead on the line, standing; a teammate (slot 2) off the line.
        let shooter = standing(-10.0, 17.0);
        let enemy = standing(0.0, 17.0);
        let mate = standing(-5.0, 15.0);
        let chest = enemy.origin + Vec3::new(0.0, 0.0, CHEST_M);
        let eye = view.eye_of(&shooter);
        let at_enemy = aim_at(eye, chest);
        // Nothing shown yet: no target, no hit.
        assert_eq!(view.sight(&shooter, true), None);
        let nobody = |_, _| None;
        assert_eq!(
            view.judge(0, eye, &at_enemy, 0..view.players() as u16, nobody),
            None
        );
        let world = |enemy: Option<EntityState>, mate: PlayerState| {
            move |slot: u16, _: f64| match slot {
                0 => Some(sent(&shooter)),
                1 => enemy,
                2 => Some(sent(&mate)),
                _ => None,
            }
        };
        let both = world(Some(sent(&enemy)), mate);
        view.show(view_time(100.0), 0, 0..view.players() as u16, both);
        let sight = view.sight(&shooter, true).unwrap();
        assert_eq!((sight.eye, sight.aim, sight.still), (eye, chest, true));
        assert_eq!(
            view.judge(0, eye, &at_enemy, 0..view.players() as u16, both)
                .map(|h| h.0),
            Some(1)
        );
        view.judge_input(7, 0, eye, &at_enemy, 0..view.players() as u16, both);
        assert_eq!(view.verdict(7).flatten().map(|h| h.0), Some(1));
        assert_eq!(view.was_shown(7, 1), Some(true));
        assert_eq!(view.was_shown(7, 3), Some(false));
        assert_eq!((view.verdict(8), view.was_shown(8, 1)), (None, None));
        // The shooter dead: it aims at nobody.
        assert_eq!(view.sight(&shooter, false), None);
        // The enemy hidden by the fog of war: nobody to aim at or hit.
        let hidden = world(None, mate);
        view.show(view_time(101.0), 0, 0..view.players() as u16, hidden);
        assert_eq!(view.sight(&shooter, true), None);
        view.judge_input(9, 0, eye, &at_enemy, 0..view.players() as u16, hidden);
        assert_eq!(view.verdict(9), Some(None));
        assert_eq!(view.was_shown(9, 1), Some(false));
        // Shown dead: the same.
        let dead = EntityState {
            flags: flags::POSED,
            ..sent(&enemy)
        };
        let shown_dead = world(Some(dead), mate);
        view.show(view_time(102.0), 0, 0..view.players() as u16, shown_dead);
        assert_eq!(view.sight(&shooter, true), None);
        assert_eq!(
            view.judge(0, eye, &at_enemy, 0..view.players() as u16, shown_dead),
            None
        );
        // A teammate stepping into the line of fire takes the shot, as on the server;
        // the sight still names the enemy (only walls hide it).
        let in_line = standing(-5.0, 17.0);
        let blocked = world(Some(sent(&enemy)), in_line);
        view.show(view_time(103.0), 0, 0..view.players() as u16, blocked);
        assert_eq!(
            view.judge(0, eye, &at_enemy, 0..view.players() as u16, blocked)
                .map(|h| h.0),
            Some(2)
        );
        assert_eq!(view.sight(&shooter, true).map(|s| s.aim), Some(chest));
        // A match that starts over: nobody is shown until the next show.
        view.start_over();
        assert_eq!(view.view(), None);
        assert_eq!(view.sight(&shooter, true), None);
        assert_eq!(
            view.judge(0, eye, &at_enemy, 0..view.players() as u16, both),
            None
        );
        assert_eq!(view.shown(1), None);
        // Only the slots listed are read: the enemy left out is neither aimed at nor hit,
        // and a teammate left out blocks nothing.
        view.show(view_time(104.0), 0, [0, 2], both);
        assert_eq!((view.shown(1), view.sight(&shooter, true)), (None, None));
        assert_eq!(view.judge(0, eye, &at_enemy, [0, 2], both), None);
        view.show(view_time(105.0), 0, [0, 1], blocked);
        assert!(view.shown(1).is_some());
        assert_eq!(
            view.judge(0, eye, &at_enemy, [0, 1], blocked).map(|h| h.0),
            Some(1)
        );
    }

    #[test]
    fn the_players_a_frame_or_a_shot_reads_are_started_ahead_of_their_reads() {
        /// Every call, in order: (slot, 0 read, 1 near start, 2 far start).
        struct Log(Vec<(u16, u8)>);
        impl Players for &mut Log {
            fn at(&mut self, slot: u16, _: f64) -> Option<EntityState> {
                self.0.push((slot, 0));
                Some(sent(&standing(f32::from(slot), 17.0)))
            }
            fn prefetch(&mut self, slot: u16, _: f64, far: bool) {
                self.0.push((slot, 1 + u8::from(far)));
            }
        }
        // Each read slot past the first ones was started near `READ_AHEAD` reads before,
        // and far twice that; nothing started is left unread.
        let check = |log: &Log, listed: &[u16]| {
            let reads: Vec<u16> = log.0.iter().filter(|c| c.1 == 0).map(|c| c.0).collect();
            for stage in [1u8, 2] {
                let started: Vec<u16> =
                    log.0.iter().filter(|c| c.1 == stage).map(|c| c.0).collect();
                let ahead = READ_AHEAD * usize::from(stage);
                let expected: Vec<u16> = (listed.iter().skip(ahead))
                    .filter(|s| reads.contains(s))
                    .copied()
                    .collect();
                assert_eq!(started, expected, "stage {stage}");
                for &slot in &started {
                    let start = log.0.iter().position(|&c| c == (slot, stage)).unwrap();
                    let read = log.0.iter().position(|&c| c == (slot, 0)).unwrap();
                    assert!(start < read, "slot {slot} started after its read");
                }
            }
            reads
        };
        let map = Arc::new(BuiltinMap::Arena.load());
        let mut view = AimView::new(map, 64, FOUR).refreshing_every(2);
        let listed: Vec<u16> = (0..64).filter(|s| s % 3 != 0).collect();
        let mut log = Log(Vec::new());
        view.show(view_time(100.0), 0, listed.iter().copied(), &mut log);
        let reads = check(&log, &listed);
        let enemies: Vec<u16> = listed.iter().copied().filter(|s| s % 2 == 1).collect();
        assert_eq!(reads, enemies, "a refresh reads every enemy listed");
        // A shot of slot 40 on that frame (away from everyone: no hitboxes are read) reads
        // its teammates, not itself.
        let shooter = standing(0.0, 17.0);
        let eye = view.eye_of(&shooter);
        let cmd = aim_at(eye, Vec3::new(0.0, -100.0, 60.0));
        log.0.clear();
        view.judge(40, eye, &cmd, listed.iter().copied(), &mut log);
        let mates: Vec<u16> = (listed.iter().copied())
            .filter(|s| s % 2 == 0 && *s != 40)
            .collect();
        assert_eq!(check(&log, &listed), mates, "the shooter is slot 40");
    }

    #[test]
    fn a_view_considering_the_nearest_shows_them_and_shots_read_the_rest() {
        /// The viewer (slot 0) on the north lane, and slot `s` `east(s)` m east of it (the
        /// enemies 8, 2, 16, 10, 4, 18, 12, 6, 20, 14 m for slots 1, 3 … 19); slot 9 dead.
        fn east(s: u16) -> f32 {
            if s == 0 {
                0.0
            } else {
                1.0 + f32::from((s * 7) % 20)
            }
        }
        fn state(s: u16) -> EntityState {
            let mut e = sent(&standing(-10.0 + east(s), 17.0));
            if s == 9 {
                e.flags &= !flags::ALIVE;
            }
            e
        }
        /// The lane's players, each read logged.
        struct Lane(Vec<u16>);
        impl Players for &mut Lane {
            fn at(&mut self, slot: u16, _: f64) -> Option<EntityState> {
                self.0.push(slot);
                Some(state(slot))
            }
            fn newest(&mut self, slot: u16) -> Option<EntityState> {
                Some(state(slot))
            }
        }
        let map = Arc::new(BuiltinMap::Arena.load());
        let mut view = AimView::new(map, 20, FOUR).considering(3);
        let mut lane = Lane(Vec::new());
        view.show(view_time(100.0), 0, 0..20, &mut lane);
        // The three nearest living enemies: 3, 15 and 1 (9, nearer, is dead).
        let nearest = [1, 3, 15];
        assert_eq!(
            lane.0, nearest,
            "only the three nearest living enemies are read"
        );
        assert!(nearest.iter().all(|&s| view.shown(s).is_some()));
        assert_eq!(
            view.shown(7),
            None,
            "the fourth nearest is not shown this frame"
        );
        // The target is the nearest of them (the lane is open).
        let sight = view.sight(&state(0).to_player(), true).map(|s| s.aim.x);
        assert_eq!(sight, Some(-10.0 + east(3)));
        // A shot reads the teammates and every enemy the frame did not show.
        lane.0.clear();
        let eye = view.eye_of(&state(0).to_player());
        view.judge(
            0,
            eye,
            &aim_at(eye, Vec3::new(-10.0, -100.0, 60.0)),
            0..20,
            &mut lane,
        );
        let unread: Vec<u16> = (1..20).filter(|s| !nearest.contains(s)).collect();
        assert_eq!(lane.0, unread);
    }

    #[test]
    fn the_newest_states_a_refresh_ranks_are_started_ahead_of_their_reads() {
        /// Every call, in order: (slot, 0 newest read, 1 newest started).
        struct Log(Vec<(u16, u8)>);
        impl Players for &mut Log {
            fn at(&mut self, slot: u16, _: f64) -> Option<EntityState> {
                Some(sent(&standing(f32::from(slot), 17.0)))
            }
            fn newest(&mut self, slot: u16) -> Option<EntityState> {
                self.0.push((slot, 0));
                Some(sent(&standing(f32::from(slot), 17.0)))
            }
            fn prefetch_newest(&mut self, slot: u16) {
                self.0.push((slot, 1));
            }
        }
        let map = Arc::new(BuiltinMap::Arena.load());
        let mut view = AimView::new(map, 64, FOUR).considering(4);
        let listed: Vec<u16> = (0..64).filter(|s| s % 3 != 0).collect();
        let mut log = Log(Vec::new());
        view.show(view_time(100.0), 1, listed.iter().copied(), &mut log);
        // Slot 1's own state first; then, for each listed player in turn, the enemy (an
        // even slot) 2 × READ_AHEAD listed players on is started, and the player itself,
        // an enemy, is read. Nothing else is started or read.
        let foe = |s: u16| foes(s, 1);
        let mut expected = vec![(1, 0)];
        for (k, &slot) in listed.iter().enumerate() {
            if let Some(&ahead) = listed.get(k + 2 * READ_AHEAD).filter(|&&s| foe(s)) {
                expected.push((ahead, 1));
            }
            if foe(slot) {
                expected.push((slot, 0));
            }
        }
        assert_eq!(log.0, expected);
        assert!(
            log.0.iter().filter(|c| c.1 == 1).count() > 10,
            "some are started"
        );
    }

    #[test]
    fn between_refreshes_only_the_target_is_read_and_shots_still_see_everyone() {
        let map = Arc::new(BuiltinMap::Arena.load());
        let mut view = AimView::new(map, 6, FOUR).refreshing_every(3);
        // The shooter (slot 0) on the north lane; enemies 1 (10 m ahead) and 3 (20 m
        // ahead, on the same line, so 1 stands in front of it) and 5 (off the line, 13 m away).
        let shooter = standing(-10.0, 17.0);
        let eye = view.eye_of(&shooter);
        let near = standing(0.0, 17.0);
        let far = standing(10.0, 17.0);
        let aside = standing(2.0, 12.0);
        let reads = std::cell::RefCell::new(Vec::new());
        let world = |one: Option<PlayerState>| {
            let reads = &reads;
            move |slot: u16, _: f64| {
                reads.borrow_mut().push(slot);
                match slot {
                    0 => Some(sent(&shooter)),
                    1 => one.map(|p| sent(&p)),
                    3 => Some(sent(&far)),
                    5 => Some(sent(&aside)),
                    _ => None,
                }
            }
        };
        let all = 0..view.players() as u16;
        let show = |view: &mut AimView, t: f64, one: Option<PlayerState>| {
            reads.borrow_mut().clear();
            view.show(view_time(t), 0, all.clone(), world(one));
            std::mem::take(&mut *reads.borrow_mut())
        };
        // The first frame reads every enemy; the nearest visible one becomes the target.
        assert_eq!(show(&mut view, 100.0, Some(near)), [1, 3, 5]);
        let chest = |p: &PlayerState| p.origin + Vec3::new(0.0, 0.0, CHEST_M);
        assert_eq!(
            view.sight(&shooter, true).map(|s| s.aim),
            Some(chest(&near))
        );
        // The next two read only the target, and follow it as it moves.
        let moved = standing(1.0, 17.0);
        assert_eq!(show(&mut view, 101.0, Some(moved)), [1]);
        assert_eq!(
            view.sight(&shooter, true).map(|s| s.aim),
            Some(chest(&moved))
        );
        assert_eq!(view.shown(3), None, "not read this frame");
        // A shot at the far enemy is judged against everyone as shown now: the target in
        // front takes it, read afresh.
        let at_far = aim_at(eye, chest(&far));
        reads.borrow_mut().clear();
        let verdict = view.judge(0, eye, &at_far, all.clone(), world(Some(moved)));
        assert_eq!(verdict.map(|h| h.0), Some(1));
        assert!(reads.borrow().contains(&3) && reads.borrow().contains(&5));
        // The target gone from view: no sight, and the next frame reads every enemy and
        // picks the nearest left (5, nearer than 3).
        assert_eq!(show(&mut view, 102.0, None), [1]);
        assert_eq!(view.sight(&shooter, true), None);
        assert_eq!(show(&mut view, 103.0, None), [1, 3, 5]);
        assert_eq!(
            view.sight(&shooter, true).map(|s| s.aim),
            Some(chest(&aside))
        );
        // Every third frame reads every enemy again, target or not.
        assert_eq!(show(&mut view, 104.0, None), [5]);
        view.sight(&shooter, true);
        assert_eq!(show(&mut view, 105.0, None), [5]);
        view.sight(&shooter, true);
        assert_eq!(show(&mut view, 106.0, None), [1, 3, 5]);
        // Between refreshes, a target no longer listed is neither read nor shown, though
        // the slots listed past it are; a shot then is judged against the listing given.
        assert_eq!(
            view.sight(&shooter, true).map(|s| s.aim),
            Some(chest(&aside))
        );
        reads.borrow_mut().clear();
        view.show(view_time(107.0), 0, [0, 1, 3], world(None));
        assert!(reads.borrow().is_empty());
        assert_eq!((view.shown(5), view.sight(&shooter, true)), (None, None));
        let at_aside = aim_at(eye, chest(&aside));
        assert_eq!(view.judge(0, eye, &at_aside, [0, 1, 3], world(None)), None);
        assert_eq!(
            view.judge(0, eye, &at_aside, all.clone(), world(None))
                .map(|h| h.0),
            Some(5)
        );
    }

    #[test]
    fn counts_sort_disagreements() {
        let mut c = HitregCounts::default();
        c.compare(Some((1, 0)), Some((1, 2)), true);
        c.compare(None, None, false);
        c.compare(Some((1, 0)), None, false);
        c.compare(None, Some((3, 1)), false);
        c.compare(Some((1, 0)), Some((3, 1)), false);
        assert_eq!(
            c,
            HitregCounts {
                shots: 5,
                server_hits: 3,
                agree: 2,
                bot_hit_server_miss: 1,
                bot_miss_server_hit: 1,
                other_victim: 1,
                server_hit_unseen: 0,
                victim_dead_at_fire: 1,
            }
        );
    }
}
