//! Action files: every input of a match, recorded as the world applied it, and replayed
//! offline to the identical end state (the Quake paper's recorded inputs).
//!
//! ```text
//! header:  "TFRA" | version u8 (4) | tick_hz u32 | players u16 | map name len u8 | name
//!          | buy_ms u32 | round_ms u32 | round_end_ms u32 | rounds u8 | friendly_fire u8
//!          | max_rewind_ms u32 | pose_every u8
//! ticks:   tick u32 | n u8 | n × (slot u16 | cmd[7] | view_tick u32 | view_frac u8)
//!          one or more per tick with changes, ticks ascending, 1 ≤ n
//! footer:  0xffff_ffff | end_tick u32 | state_hash u64 | check u64
//! ```
//!
//! `check` is FNV-1a 64 ([`checksum`]) of every byte before it: a file that was cut short,
//! bit-flipped or glued to another fails it, and is refused before anything in it is
//! believed. Movement tuning and weapons are the build's defaults; the header holds what a
//! server configures. Little-endian throughout.
//!
//! The reader ([`ActionFile::parse`]) trusts no count: every field is checked against the
//! limits a server can be configured with, every record against the bytes left, and the end
//! tick against the longest match the header's rules allow, so a hostile file whose check
//! is valid still replays in time bounded by its rules ([`MAX_END_TICK`] at most) and never
//! panics. Version 3 files (`players` and `slot` a `u8`, from before a match could seat more
//! than 256) are still read; version 2 files (no check) are refused with their version named.

use std::num::{NonZeroU32, NonZeroU8};
use std::time::Duration;

use tickforge_telemetry::Scopes;

use crate::map::BuiltinMap;
use crate::rules::{MatchResult, RulesConfig};
use crate::world::{World, WorldConfig};
use crate::{PlayerSlot, Tick, UserCmd, ViewTime};

const MAGIC: &[u8; 4] = b"TFRA";
/// The version this code writes, and reads with [`NARROW_VERSION`].
pub const VERSION: u8 = 4;
/// The older version still read: players and slots in one byte.
pub const NARROW_VERSION: u8 = 3;
const FOOTER: u32 = u32::MAX;
/// Bytes of one player's entry in a tick record after its slot.
const ENTRY_TAIL_BYTES: usize = UserCmd::BYTES + 4 + 1;
/// Bytes of the check at the very end.
const CHECK_BYTES: usize = 8;

/// The highest end tick a file may name, whatever its rules allow: 36 hours at 128 Hz. A
/// replay simulates at most this many ticks.
pub const MAX_END_TICK: u32 = 1 << 24;
/// Ticks past the longest match its rules allow that an end tick may lie (rounding).
const END_MARGIN_TICKS: u64 = 16;
/// The longest phase a server may be configured with (`config.rs`: 86,400 s).
const MAX_PHASE_MS: u32 = 86_400_000;
/// The longest rewind a server may be configured with.
const MAX_REWIND_MS: u32 = 1000;
/// The sparsest posing a server may be configured with.
const MAX_POSE_EVERY: u8 = 32;
/// The tick rates a file may have.
const TICK_HZ: std::ops::RangeInclusive<u32> = 1..=1000;
/// The most players a match may have: the fog of war's bound, the shooter's seats.
const MAX_PLAYERS: u16 = crate::fow::MAX_PLAYERS as u16;

/// How wide a file's slots are: one byte in version 3, two since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SlotWidth(usize);

impl SlotWidth {
    fn of(version: u8) -> SlotWidth {
        SlotWidth(if version == NARROW_VERSION { 1 } else { 2 })
    }

    /// Bytes of one entry of a tick record.
    fn entry_bytes(self) -> usize {
        self.0 + ENTRY_TAIL_BYTES
    }

    /// The slot of an entry, and the rest of it.
    fn split(self, e: &[u8]) -> (PlayerSlot, &[u8]) {
        let (slot, rest) = e.split_at(self.0);
        let slot = match *slot {
            [a] => u16::from(a),
            [a, b] => u16::from_le_bytes([a, b]),
            _ => unreachable!("slots are one or two bytes"),
        };
        (PlayerSlot(slot), rest)
    }
}

/// FNV-1a 64 of `bytes`: the check an action file ends with, over every byte before it.
pub fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Records the inputs a world applies, tick by tick, into a byte buffer.
pub struct Recorder {
    bytes: Vec<u8>,
    /// Where the current tick's record starts, and how many entries it has.
    open: Option<(usize, u8)>,
}

impl Recorder {
    /// Starts a recording of a world made with `config` (`map` must be its built-in map).
    /// `capacity` bytes are reserved up front.
    pub fn new(config: &WorldConfig, capacity: usize) -> Self {
        let mut bytes = Vec::with_capacity(capacity.max(256));
        bytes.extend_from_slice(MAGIC);
        bytes.push(VERSION);
        bytes.extend_from_slice(&config.tick_hz.to_le_bytes());
        bytes.extend_from_slice(&config.players.to_le_bytes());
        let name = config.map.name().as_bytes();
        bytes.push(name.len() as u8);
        bytes.extend_from_slice(name);
        let r = &config.rules;
        for d in [r.buy, r.round, r.round_end] {
            bytes
                .extend_from_slice(&(d.as_millis().min(u128::from(u32::MAX)) as u32).to_le_bytes());
        }
        bytes.push(r.rounds.get());
        bytes.push(u8::from(r.friendly_fire));
        let h = &config.history;
        bytes.extend_from_slice(&(h.max_rewind.as_millis() as u32).to_le_bytes());
        bytes.push(h.pose_every.get());
        Recorder { bytes, open: None }
    }

    /// Records that, before stepping `tick`, `slot` got `cmd` made looking at `view`.
    pub fn input(&mut self, tick: Tick, slot: PlayerSlot, cmd: &UserCmd, view: ViewTime) {
        let (start, n) = match self.open {
            Some((start, n)) if self.tick_at(start) == tick.0 && n < u8::MAX => (start, n),
            _ => {
                let start = self.bytes.len();
                self.bytes.extend_from_slice(&tick.0.to_le_bytes());
                self.bytes.push(0);
                (start, 0)
            }
        };
        self.bytes.extend_from_slice(&slot.0.to_le_bytes());
        self.bytes.extend_from_slice(&cmd.to_bytes());
        self.bytes.extend_from_slice(&view.tick.0.to_le_bytes());
        self.bytes.push(view.frac);
        self.bytes[start + 4] = n + 1;
        self.open = Some((start, n + 1));
    }

    fn tick_at(&self, start: usize) -> u32 {
        u32::from_le_bytes(self.bytes[start..start + 4].try_into().expect("4 bytes"))
    }

    /// Closes the recording with the world's end state and the check, and returns the
    /// file's bytes.
    pub fn finish(mut self, world: &World) -> Vec<u8> {
        self.bytes.extend_from_slice(&FOOTER.to_le_bytes());
        self.bytes.extend_from_slice(&world.tick().0.to_le_bytes());
        self.bytes
            .extend_from_slice(&world.state_hash().to_le_bytes());
        let check = checksum(&self.bytes);
        self.bytes.extend_from_slice(&check.to_le_bytes());
        self.bytes
    }
}

/// An action file that cannot be replayed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// Not an action file at all.
    #[error("not a tickforge action file")]
    NotAnActionFile,
    /// An action file of a version this build does not read.
    #[error(
        "action file version {0}: this build reads versions {NARROW_VERSION} and {VERSION} only"
    )]
    Version(u8),
    /// The check at the end does not match the bytes before it: the file was cut short,
    /// damaged or changed after it was written. Nothing in it is believed.
    #[error("the action file is damaged or truncated: its checksum does not match its contents")]
    Checksum,
    /// The file ends inside a field (only a file whose check matches gets this far).
    #[error("the action file is truncated at byte {0}")]
    Truncated(usize),
    /// A field has a value the format does not allow.
    #[error("bad action file: {0}")]
    Bad(&'static str),
    /// A count or tick beyond what the file's own rules or this reader allow.
    #[error("bad action file: {what} is {value}, more than the {max} allowed")]
    TooLarge {
        /// What was counted.
        what: &'static str,
        /// Its value in the file.
        value: u64,
        /// The most allowed.
        max: u64,
    },
}

/// What replaying an action file gave.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayOutcome {
    /// The tick the recording ended on, and the replay reached.
    pub end_tick: Tick,
    /// The state hash the recording ended with.
    pub recorded_hash: u64,
    /// The state hash the replay ended with.
    pub replayed_hash: u64,
    /// The match result, when the match ended in the recording.
    pub result: Option<MatchResult>,
    /// Inputs applied.
    pub inputs: u64,
}

impl ReplayOutcome {
    /// True when the replay reached the recorded end state bit for bit.
    pub fn is_identical(&self) -> bool {
        self.recorded_hash == self.replayed_hash
    }
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ReplayError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(ReplayError::Truncated(self.at))?;
        let b = &self.bytes[self.at..end];
        self.at = end;
        Ok(b)
    }
    fn u8(&mut self) -> Result<u8, ReplayError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, ReplayError> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn u32(&mut self) -> Result<u32, ReplayError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, ReplayError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }
}

/// `value` if it is at most `max`, else [`ReplayError::TooLarge`].
fn at_most(what: &'static str, value: u64, max: u64) -> Result<u64, ReplayError> {
    if value > max {
        return Err(ReplayError::TooLarge { what, value, max });
    }
    Ok(value)
}

/// An action file whose check matched and whose every field and record was found sound:
/// what [`ActionFile::replay`] plays.
#[derive(Clone, Debug)]
pub struct ActionFile<'a> {
    config: WorldConfig,
    /// The tick records, back to back, each already checked.
    records: &'a [u8],
    width: SlotWidth,
    end_tick: Tick,
    recorded_hash: u64,
    inputs: u64,
}

impl<'a> ActionFile<'a> {
    /// Checks an action file: its magic and version, its check, then every field against
    /// the limits a server can be configured with, every tick record against the bytes
    /// left and the ticks before it, and the end tick against the longest match its rules
    /// allow. Reads each byte a bounded number of times; allocates nothing.
    pub fn parse(bytes: &'a [u8]) -> Result<ActionFile<'a>, ReplayError> {
        if bytes.get(..4) != Some(MAGIC.as_slice()) {
            return Err(ReplayError::NotAnActionFile);
        }
        let width = match bytes.get(4) {
            Some(&v @ (NARROW_VERSION | VERSION)) => SlotWidth::of(v),
            Some(&v) => return Err(ReplayError::Version(v)),
            None => return Err(ReplayError::Truncated(4)),
        };
        let Some(body_len) = bytes.len().checked_sub(CHECK_BYTES) else {
            return Err(ReplayError::Checksum);
        };
        let (body, check) = bytes.split_at(body_len);
        if checksum(body) != u64::from_le_bytes(check.try_into().expect("8 bytes")) {
            return Err(ReplayError::Checksum);
        }
        let mut c = Cursor { bytes: body, at: 5 };
        let tick_hz = c.u32()?;
        if !TICK_HZ.contains(&tick_hz) {
            return Err(ReplayError::Bad("tick rate outside 1..=1000"));
        }
        let players = if width.0 == 1 {
            u16::from(c.u8()?)
        } else {
            c.u16()?
        };
        if !(1..=MAX_PLAYERS).contains(&players) {
            return Err(ReplayError::Bad("players outside 1..=2048"));
        }
        let name_len = usize::from(c.u8()?);
        let name =
            std::str::from_utf8(c.take(name_len)?).map_err(|_| ReplayError::Bad("map name"))?;
        let map = BuiltinMap::from_name(name).ok_or(ReplayError::Bad("unknown map"))?;
        let mut phase = |what| -> Result<Duration, ReplayError> {
            let ms = at_most(what, u64::from(c.u32()?), u64::from(MAX_PHASE_MS))?;
            Ok(Duration::from_millis(ms))
        };
        let buy = phase("the buy phase (ms)")?;
        let round = phase("the round (ms)")?;
        let round_end = phase("the round end (ms)")?;
        let rounds = NonZeroU8::new(c.u8()?).ok_or(ReplayError::Bad("zero rounds"))?;
        let friendly_fire = match c.u8()? {
            0 => false,
            1 => true,
            _ => return Err(ReplayError::Bad("friendly fire is neither 0 nor 1")),
        };
        let rewind_ms = at_most(
            "the max rewind (ms)",
            u64::from(c.u32()?),
            u64::from(MAX_REWIND_MS),
        )?;
        let max_rewind = Duration::from_millis(rewind_ms);
        let pose_every = NonZeroU8::new(c.u8()?).ok_or(ReplayError::Bad("zero pose interval"))?;
        at_most(
            "the pose interval",
            u64::from(pose_every.get()),
            u64::from(MAX_POSE_EVERY),
        )?;
        let defaults = WorldConfig::default();
        let rules = RulesConfig {
            tick_hz: NonZeroU32::new(tick_hz).ok_or(ReplayError::Bad("zero tick rate"))?,
            buy,
            round,
            round_end,
            rounds,
            friendly_fire,
            ..defaults.rules
        };
        let config = WorldConfig {
            players,
            tick_hz,
            map,
            rules,
            history: crate::history::HistoryConfig {
                max_rewind,
                pose_every,
                ..defaults.history
            },
            ..defaults
        };

        // The records: walked once to check them, so that replaying them trusts nothing.
        let records_at = c.at;
        let mut last_tick = 0u32;
        let mut inputs = 0u64;
        loop {
            let tick = c.u32()?;
            if tick == FOOTER {
                break;
            }
            if tick < last_tick {
                return Err(ReplayError::Bad("ticks out of order"));
            }
            last_tick = tick;
            let n = usize::from(c.u8()?);
            if n == 0 {
                return Err(ReplayError::Bad("a tick record with no inputs"));
            }
            // Backed by bytes before any is read: a count never runs past the file.
            if n * width.entry_bytes() > c.left() {
                return Err(ReplayError::Truncated(c.at));
            }
            for _ in 0..n {
                let (slot, _) = width.split(c.take(width.entry_bytes())?);
                if slot.0 >= players {
                    return Err(ReplayError::Bad(
                        "an input for a slot the match does not have",
                    ));
                }
            }
            inputs += n as u64;
        }
        let records = &body[records_at..c.at - 4];
        let end_tick = c.u32()?;
        let recorded_hash = c.u64()?;
        if c.left() != 0 {
            return Err(ReplayError::Bad("bytes after the footer"));
        }
        if end_tick < last_tick {
            return Err(ReplayError::Bad("footer tick before the last input"));
        }
        // The longest match these rules allow: every round to its time limit, each phase
        // at least a tick.
        let phase_ticks = |d: Duration| u64::from(rules.ticks(d).max(1));
        let longest = u64::from(rounds.get())
            * (phase_ticks(buy) + phase_ticks(round) + phase_ticks(round_end))
            + END_MARGIN_TICKS;
        at_most(
            "the end tick",
            u64::from(end_tick),
            longest.min(u64::from(MAX_END_TICK)),
        )?;
        Ok(ActionFile {
            config,
            records,
            width,
            end_tick: Tick(end_tick),
            recorded_hash,
            inputs,
        })
    }

    /// The world the match was played in.
    pub fn config(&self) -> &WorldConfig {
        &self.config
    }

    /// The tick the recording ended on.
    pub fn end_tick(&self) -> Tick {
        self.end_tick
    }

    /// Inputs recorded.
    pub fn inputs(&self) -> u64 {
        self.inputs
    }

    /// Every recorded input, in file order (ticks ascending): the tick it was applied
    /// before stepping, the slot, its command and the moment it was made looking at.
    /// Allocates nothing.
    pub fn entries(&self) -> impl Iterator<Item = (Tick, PlayerSlot, UserCmd, ViewTime)> + 'a {
        let mut c = Cursor {
            bytes: self.records,
            at: 0,
        };
        let mut tick = 0;
        let mut left = 0u8;
        let width = self.width;
        // Every record was checked by `parse`: the reads below cannot fail.
        std::iter::from_fn(move || {
            while left == 0 {
                tick = c.u32().ok()?;
                left = c.u8().ok()?;
            }
            left -= 1;
            let (slot, e) = width.split(c.take(width.entry_bytes()).ok()?);
            let (cmd, view) = entry(e);
            Some((Tick(tick), slot, cmd, view))
        })
    }

    /// Rebuilds the world the file was recorded from and plays every input into it, to
    /// the end tick: at most [`ActionFile::end_tick`] steps.
    pub fn replay(&self, scopes: &Scopes) -> ReplayOutcome {
        self.replay_world(scopes).0
    }

    /// [`ActionFile::replay`], and the world it ended with: for a check of more of the end
    /// state than its hash (what a full-state snapshot of it holds, the result).
    pub fn replay_world(&self, scopes: &Scopes) -> (ReplayOutcome, World) {
        let mut world = World::new(self.config);
        let mut c = Cursor {
            bytes: self.records,
            at: 0,
        };
        // Every record was checked by `parse`: the reads below cannot fail.
        while let (Ok(tick), Ok(n)) = (c.u32(), c.u8()) {
            while world.tick().0 < tick {
                world.step(scopes);
            }
            for _ in 0..n {
                let Ok(e) = c.take(self.width.entry_bytes()) else {
                    break;
                };
                let (slot, e) = self.width.split(e);
                let (cmd, view) = entry(e);
                world.set_cmd(slot, cmd);
                world.set_view_time(slot, view);
            }
        }
        while world.tick() < self.end_tick {
            world.step(scopes);
        }
        let outcome = ReplayOutcome {
            end_tick: self.end_tick,
            recorded_hash: self.recorded_hash,
            replayed_hash: world.state_hash(),
            result: world.result(),
            inputs: self.inputs,
        };
        (outcome, world)
    }
}

/// The command and view time of an entry past its slot ([`ENTRY_TAIL_BYTES`]).
fn entry(e: &[u8]) -> (UserCmd, ViewTime) {
    let mut cmd = [0; UserCmd::BYTES];
    cmd.copy_from_slice(&e[..UserCmd::BYTES]);
    let at = UserCmd::BYTES;
    let view = ViewTime {
        tick: Tick(u32::from_le_bytes(
            e[at..at + 4].try_into().expect("4 bytes"),
        )),
        frac: e[at + 4],
    };
    (UserCmd::from_bytes(cmd), view)
}

/// Checks an action file ([`ActionFile::parse`]), rebuilds the world it was recorded from
/// and plays every input into it.
pub fn replay(bytes: &[u8], scopes: &Scopes) -> Result<ReplayOutcome, ReplayError> {
    Ok(ActionFile::parse(bytes)?.replay(scopes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buttons;
    use std::time::Instant;

    fn short() -> WorldConfig {
        WorldConfig {
            rules: RulesConfig {
                buy: Duration::from_millis(200),
                round: Duration::from_secs(3),
                round_end: Duration::from_millis(200),
                rounds: NonZeroU8::new(3).unwrap(),
                ..RulesConfig::default()
            },
            ..WorldConfig::default()
        }
    }

    /// A scripted match: everyone runs and turns and fires, recorded as a server would (the
    /// recording ends when the match does, if before `ticks`).
    fn play(config: WorldConfig, ticks: u32) -> (World, Vec<u8>) {
        let scopes = Scopes::new(Instant::now);
        let mut world = World::new(config);
        let mut rec = Recorder::new(&config, 1 << 16);
        for t in 0..ticks {
            for slot in 0..config.players {
                if (t + u32::from(slot)) % 3 != 0 {
                    continue; // not every player sends every tick
                }
                let x = t
                    .wrapping_mul(2_654_435_761)
                    .wrapping_add(u32::from(slot) * 40_503);
                let cmd = UserCmd {
                    forward: 127,
                    side: [-127, 0, 127][((x >> 8) % 3) as usize],
                    buttons: if x % 5 == 0 { buttons::FIRE } else { 0 }
                        | if x % 97 == 0 { buttons::JUMP } else { 0 },
                    yaw: (t.wrapping_mul(97).wrapping_add(u32::from(slot) * 6553)) as u16,
                    pitch: ((x >> 16) % 2000) as i16 - 1000,
                };
                let view = ViewTime {
                    tick: Tick(world.tick().0.saturating_sub(x % 20)),
                    frac: (x >> 3) as u8,
                };
                world.set_cmd(PlayerSlot(slot), cmd);
                world.set_view_time(PlayerSlot(slot), view);
                rec.input(world.tick(), PlayerSlot(slot), &cmd, view);
            }
            world.step(&scopes);
            if world.result().is_some() {
                break;
            }
        }
        let bytes = rec.finish(&world);
        (world, bytes)
    }

    /// Puts a valid check on a file changed by hand: what a hostile writer would do.
    fn reseal(bytes: &mut [u8]) {
        let body = bytes.len() - CHECK_BYTES;
        let check = checksum(&bytes[..body]);
        bytes[body..].copy_from_slice(&check.to_le_bytes());
    }

    /// Bytes of the footer: marker, end tick, state hash, check.
    const FOOTER_BYTES: usize = 4 + 4 + 8 + 8;

    /// Where the tick records start in a file of `short()` on arena.
    const RECORDS_AT: usize = 4 + 1 + 4 + 2 + 1 + "arena".len() + 12 + 1 + 1 + 4 + 1;

    fn scopes() -> Scopes {
        Scopes::new(Instant::now)
    }

    #[test]
    fn a_recorded_match_replays_to_the_identical_end_state_and_result() {
        let (world, bytes) = play(short(), 128 * 12);
        assert!(world.result().is_some(), "the match ended");
        let outcome = replay(&bytes, &Scopes::new(Instant::now)).unwrap();
        assert!(outcome.is_identical(), "{outcome:?}");
        assert_eq!(outcome.end_tick, world.tick());
        assert_eq!(outcome.result, world.result());
        assert!(outcome.inputs > 1000);
        // The match had shots in it, so the replay proves shots replay too.
        assert!(world.players().iter().map(|p| p.shots).sum::<u32>() > 0);
    }

    #[test]
    fn entries_are_every_input_the_recording_holds_in_order() {
        let config = short();
        let scopes = scopes();
        let mut world = World::new(config);
        let mut rec = Recorder::new(&config, 1 << 12);
        let mut written = Vec::new();
        for t in 0..40u32 {
            for slot in (0..config.players).filter(|s| (t + u32::from(*s)) % 4 == 0) {
                let cmd = UserCmd {
                    forward: t as i8,
                    yaw: (t * 1000 + u32::from(slot)) as u16,
                    ..UserCmd::default()
                };
                let view = ViewTime {
                    tick: Tick(t.saturating_sub(2)),
                    frac: t as u8,
                };
                rec.input(world.tick(), PlayerSlot(slot), &cmd, view);
                written.push((world.tick(), PlayerSlot(slot), cmd, view));
            }
            world.step(&scopes);
        }
        let bytes = rec.finish(&world);
        let file = ActionFile::parse(&bytes).unwrap();
        let read: Vec<_> = file.entries().collect();
        assert_eq!(read, written);
        assert_eq!(read.len() as u64, file.inputs());
    }

    #[test]
    fn a_changed_input_changes_the_end_state() {
        // Three seconds: still in the first round's combat, before a respawn would reset the
        // positions the change moves.
        let (_, mut bytes) = play(short(), 128 * 3);
        // Walk the records to one in combat (the buy phase holds everyone still) and make
        // its first player run backwards instead.
        let mut at = RECORDS_AT;
        loop {
            let tick = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            let n = usize::from(bytes[at + 4]);
            if tick > 64 && n > 0 {
                bytes[at + 5 + 2] = (-127i8) as u8;
                break;
            }
            at += 5 + n * (2 + ENTRY_TAIL_BYTES);
        }
        assert_eq!(replay(&bytes, &scopes()), Err(ReplayError::Checksum));
        // Past the check, the replay itself finds the lie.
        reseal(&mut bytes);
        let o = replay(&bytes, &scopes()).unwrap();
        assert!(!o.is_identical(), "a changed input replayed identically");
    }

    #[test]
    fn a_flipped_bit_anywhere_is_refused() {
        let (_, bytes) = play(short(), 128 * 2);
        assert!(replay(&bytes, &scopes()).unwrap().is_identical());
        assert!(bytes.len() > 2000, "{} bytes", bytes.len());
        for i in 0..bytes.len() {
            for bit in [i % 8, 7 - i % 8] {
                let mut flipped = bytes.clone();
                flipped[i] ^= 1 << bit;
                let refused = ActionFile::parse(&flipped);
                assert!(refused.is_err(), "byte {i} bit {bit} was not refused");
            }
        }
        // Cut anywhere, or glued to more bytes, it is refused too.
        for cut in (0..bytes.len()).step_by(7) {
            assert!(ActionFile::parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.extend_from_slice(&bytes[RECORDS_AT..]);
        assert_eq!(
            ActionFile::parse(&longer).err(),
            Some(ReplayError::Checksum)
        );
    }

    #[test]
    fn hostile_files_with_a_valid_check_are_refused_before_any_tick_runs() {
        let (_, bytes) = play(short(), 128 * 2);
        let footer = bytes.len() - FOOTER_BYTES;
        let name = 4 + 1 + 4 + 2 + 1;
        let rules = name + "arena".len();
        type Change = Box<dyn Fn(&mut Vec<u8>)>;
        let hostile: Vec<(&str, Change)> = vec![
            // The v2 reader stepped to whatever tick a record named before it found the
            // next one out of order: this byte made it spin for hours.
            (
                "first record's tick",
                Box::new(|b| b[RECORDS_AT + 3] = 0x40),
            ),
            (
                "a record past the end tick",
                Box::new(move |b| b[footer + 4..footer + 8].copy_from_slice(&1u32.to_le_bytes())),
            ),
            (
                "end tick far past the rules",
                Box::new(move |b| b[footer + 7] = 0x7f),
            ),
            (
                "end tick at u32::MAX - 1",
                Box::new(move |b| {
                    b[footer + 4..footer + 8].copy_from_slice(&(u32::MAX - 1).to_le_bytes())
                }),
            ),
            (
                "entry count past the bytes",
                Box::new(|b| b[RECORDS_AT + 4] = 0xff),
            ),
            ("zero entries", Box::new(|b| b[RECORDS_AT + 4] = 0)),
            (
                "slot past the players",
                Box::new(|b| b[RECORDS_AT + 5] = 200),
            ),
            (
                "fewer players than slots used",
                Box::new(|b| b[4 + 1 + 4] = 1),
            ),
            (
                "more players than a match has",
                Box::new(|b| b[4 + 1 + 4..4 + 1 + 4 + 2].copy_from_slice(&2049u16.to_le_bytes())),
            ),
            ("tick rate", Box::new(|b| b[4 + 1 + 3] = 0x10)),
            ("map name length", Box::new(move |b| b[name - 1] = 200)),
            ("round length", Box::new(move |b| b[rules + 4 + 3] = 0xff)),
            ("zero rounds", Box::new(move |b| b[rules + 12] = 0)),
            ("friendly fire", Box::new(move |b| b[rules + 13] = 7)),
            ("max rewind", Box::new(move |b| b[rules + 14 + 2] = 0xff)),
            ("pose interval", Box::new(move |b| b[rules + 18] = 200)),
            (
                "bytes after the footer",
                Box::new(|b| b.splice(b.len() - 8..b.len() - 8, [0]).for_each(drop)),
            ),
        ];
        for (what, change) in hostile {
            let mut b = bytes.clone();
            change(&mut b);
            reseal(&mut b);
            let started = Instant::now();
            let verdict = ActionFile::parse(&b);
            match verdict {
                Ok(f) => panic!("{what}: accepted, end tick {}", f.end_tick().0),
                Err(e) => assert_ne!(e, ReplayError::Checksum, "{what}: resealed"),
            }
            assert!(started.elapsed() < Duration::from_millis(100), "{what}");
        }
    }

    #[test]
    fn a_version_2_file_is_refused_by_name() {
        let (_, mut bytes) = play(short(), 64);
        bytes[4] = 2;
        assert_eq!(replay(&bytes, &scopes()), Err(ReplayError::Version(2)));
        assert!(ReplayError::Version(2).to_string().contains("version 2"));
    }

    #[test]
    fn truncated_and_foreign_files_are_errors_not_panics() {
        let (_, bytes) = play(short(), 64);
        for cut in [0, 3, 10, 30, bytes.len() - 1] {
            assert!(
                replay(&bytes[..cut], &Scopes::new(Instant::now)).is_err(),
                "cut at {cut}"
            );
        }
        assert_eq!(
            replay(b"not an action file", &Scopes::new(Instant::now)),
            Err(ReplayError::NotAnActionFile)
        );
    }

    /// A header of `short()` on arena, for the reader to chew on.
    fn header() -> Vec<u8> {
        let (_, bytes) = play(short(), 1);
        bytes[..RECORDS_AT].to_vec()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Whatever follows a real header, with a valid check or not, the reader answers
        /// and a replay of what it accepts ends: no panic, no hang.
        #[test]
        fn any_records_after_a_header_are_read_without_panic(
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            seal: bool,
        ) {
            let mut bytes = header();
            bytes.extend_from_slice(&tail);
            if seal {
                let check = checksum(&bytes);
                bytes.extend_from_slice(&check.to_le_bytes());
            }
            if let Ok(file) = ActionFile::parse(&bytes) {
                // short(): 3 rounds of 26 + 384 + 26 ticks at most.
                let longest = 3 * (26 + 384 + 26) + END_MARGIN_TICKS as u32;
                proptest::prop_assert!(file.end_tick().0 <= longest);
                if file.end_tick().0 < 400 {
                    let outcome = file.replay(&scopes());
                    proptest::prop_assert_eq!(outcome.end_tick, file.end_tick());
                }
            }
        }

        /// Any inputs recorded replay to the identical end state, and the same file with any
        /// one byte changed is refused.
        #[test]
        fn recorded_inputs_replay_identically_and_any_changed_byte_is_refused(
            inputs in proptest::collection::vec(
                (0u32..3, 0u16..10, proptest::prelude::any::<[u8; 7]>(), 0u32..40, proptest::prelude::any::<u8>()),
                0..80,
            ),
            at: proptest::sample::Index,
            xor in 1u8..,
        ) {
            let config = short();
            let scopes = scopes();
            let mut world = World::new(config);
            let mut rec = Recorder::new(&config, 1024);
            for (gap, slot, cmd, behind, frac) in inputs {
                for _ in 0..gap {
                    world.step(&scopes);
                }
                let mut cmd = UserCmd::from_bytes(cmd);
                cmd.pitch = cmd.pitch.clamp(-16_000, 16_000);
                let view = ViewTime { tick: Tick(world.tick().0.saturating_sub(behind)), frac };
                world.set_cmd(PlayerSlot(slot), cmd);
                world.set_view_time(PlayerSlot(slot), view);
                rec.input(world.tick(), PlayerSlot(slot), &cmd, view);
            }
            world.step(&scopes);
            let bytes = rec.finish(&world);
            let outcome = replay(&bytes, &scopes).unwrap();
            proptest::prop_assert!(outcome.is_identical());
            proptest::prop_assert_eq!(outcome.end_tick, world.tick());
            let mut changed = bytes.clone();
            changed[at.index(bytes.len())] ^= xor;
            proptest::prop_assert!(ActionFile::parse(&changed).is_err());
        }
    }
}
