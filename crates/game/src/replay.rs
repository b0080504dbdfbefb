//! Action files: every input of a match, recorded as the world applied it, and replayed
//! offline to the identical end state (the Quake paper's recorded inputs).
//!
//! ```text
//! header:  "TFRA" | version u8 (2) | tick_hz u32 | players u8 | map name len u8 | name
//!          | buy_ms u32 | round_ms u32 | round_end_ms u32 | rounds u8 | friendly_fire u8
//!          | max_rewind_ms u32 | pose_every u8
//! ticks:   tick u32 | n u8 | n × (slot u8 | cmd[7] | view_tick u32 | view_frac u8)
//!          one per tick with changes
//! footer:  0xffff_ffff | end_tick u32 | state_hash u64
//! ```
//!
//! Movement tuning and weapons are the build's defaults; the header holds what a server
//! configures. Little-endian throughout.

use std::num::{NonZeroU32, NonZeroU8};
use std::time::Duration;

use tickforge_telemetry::Scopes;

use crate::map::BuiltinMap;
use crate::rules::{MatchResult, RulesConfig};
use crate::world::{World, WorldConfig};
use crate::{PlayerSlot, Tick, UserCmd, ViewTime};

const MAGIC: &[u8; 4] = b"TFRA";
const VERSION: u8 = 2;
const FOOTER: u32 = u32::MAX;
/// Bytes of one player's entry in a tick record.
const ENTRY_BYTES: usize = 1 + 7 + 4 + 1;

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
        bytes.push(config.players);
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
        self.bytes.push(slot.0);
        self.bytes.extend_from_slice(&crate_cmd_bytes(cmd));
        self.bytes.extend_from_slice(&view.tick.0.to_le_bytes());
        self.bytes.push(view.frac);
        self.bytes[start + 4] = n + 1;
        self.open = Some((start, n + 1));
    }

    fn tick_at(&self, start: usize) -> u32 {
        u32::from_le_bytes(self.bytes[start..start + 4].try_into().expect("4 bytes"))
    }

    /// Closes the recording with the world's end state and returns the file's bytes.
    pub fn finish(mut self, world: &World) -> Vec<u8> {
        self.bytes.extend_from_slice(&FOOTER.to_le_bytes());
        self.bytes.extend_from_slice(&world.tick().0.to_le_bytes());
        self.bytes
            .extend_from_slice(&world.state_hash().to_le_bytes());
        self.bytes
    }
}

fn crate_cmd_bytes(cmd: &UserCmd) -> [u8; 7] {
    let [y0, y1] = cmd.yaw.to_le_bytes();
    let [p0, p1] = cmd.pitch.to_le_bytes();
    [
        cmd.forward as u8,
        cmd.side as u8,
        cmd.buttons,
        y0,
        y1,
        p0,
        p1,
    ]
}

fn cmd_from_bytes(b: &[u8]) -> UserCmd {
    UserCmd {
        forward: b[0] as i8,
        side: b[1] as i8,
        buttons: b[2],
        yaw: u16::from_le_bytes([b[3], b[4]]),
        pitch: i16::from_le_bytes([b[5], b[6]]),
    }
}

/// An action file that cannot be replayed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// Not an action file of this version.
    #[error("not a tickforge action file (version 1)")]
    NotAnActionFile,
    /// The file ends before its footer: the recording was cut short.
    #[error("the action file is truncated at byte {0}")]
    Truncated(usize),
    /// A field has a value the format does not allow.
    #[error("bad action file: {0}")]
    Bad(&'static str),
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
}

/// Rebuilds the world an action file was recorded from and plays every input into it.
pub fn replay(bytes: &[u8], scopes: &Scopes) -> Result<ReplayOutcome, ReplayError> {
    let mut c = Cursor { bytes, at: 0 };
    if c.take(4).ok() != Some(MAGIC.as_slice()) || c.u8()? != VERSION {
        return Err(ReplayError::NotAnActionFile);
    }
    let tick_hz = c.u32()?;
    if !(1..=1000).contains(&tick_hz) {
        return Err(ReplayError::Bad("tick rate outside 1..=1000"));
    }
    let players = c.u8()?;
    let name_len = usize::from(c.u8()?);
    let name = std::str::from_utf8(c.take(name_len)?).map_err(|_| ReplayError::Bad("map name"))?;
    let map = BuiltinMap::from_name(name).ok_or(ReplayError::Bad("unknown map"))?;
    let ms = |v: u32| Duration::from_millis(u64::from(v));
    let (buy, round, round_end) = (ms(c.u32()?), ms(c.u32()?), ms(c.u32()?));
    let rounds = NonZeroU8::new(c.u8()?).ok_or(ReplayError::Bad("zero rounds"))?;
    let friendly_fire = c.u8()? != 0;
    let max_rewind = ms(c.u32()?);
    let pose_every = NonZeroU8::new(c.u8()?).ok_or(ReplayError::Bad("zero pose interval"))?;
    let defaults = WorldConfig::default();
    let config = WorldConfig {
        players,
        tick_hz,
        map,
        rules: RulesConfig {
            tick_hz: NonZeroU32::new(tick_hz).expect("checked above"),
            buy,
            round,
            round_end,
            rounds,
            friendly_fire,
            ..defaults.rules
        },
        history: crate::history::HistoryConfig {
            max_rewind,
            pose_every,
            ..defaults.history
        },
        ..defaults
    };
    let mut world = World::new(config);
    let mut inputs = 0u64;
    loop {
        let tick = c.u32()?;
        if tick == FOOTER {
            break;
        }
        if tick < world.tick().0 {
            return Err(ReplayError::Bad("ticks out of order"));
        }
        while world.tick().0 < tick {
            world.step(scopes);
        }
        let n = usize::from(c.u8()?);
        for _ in 0..n {
            let e = c.take(ENTRY_BYTES)?;
            let slot = PlayerSlot(e[0]);
            world.set_cmd(slot, cmd_from_bytes(&e[1..8]));
            world.set_view_time(
                slot,
                ViewTime {
                    tick: Tick(u32::from_le_bytes(e[8..12].try_into().expect("4 bytes"))),
                    frac: e[12],
                },
            );
            inputs += 1;
        }
    }
    let end_tick = Tick(c.u32()?);
    let recorded_hash = c.u64()?;
    if end_tick < world.tick() {
        return Err(ReplayError::Bad("footer tick before the last input"));
    }
    while world.tick() < end_tick {
        world.step(scopes);
    }
    Ok(ReplayOutcome {
        end_tick,
        recorded_hash,
        replayed_hash: world.state_hash(),
        result: world.result(),
        inputs,
    })
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

    /// A scripted match: everyone runs and turns and fires, recorded as a server would.
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
        }
        let bytes = rec.finish(&world);
        (world, bytes)
    }

    #[test]
    fn a_recorded_match_replays_to_the_identical_end_state_and_result() {
        let (world, bytes) = play(short(), 128 * 12);
        let outcome = replay(&bytes, &Scopes::new(Instant::now)).unwrap();
        assert!(outcome.is_identical(), "{outcome:?}");
        assert_eq!(outcome.end_tick, world.tick());
        assert_eq!(outcome.result, world.result());
        assert!(outcome.inputs > 1000);
        // The match had shots in it, so the replay proves shots replay too.
        assert!(world.players().iter().map(|p| p.shots).sum::<u32>() > 0);
    }

    #[test]
    fn a_changed_input_changes_the_end_state() {
        // Three seconds: still in the first round's combat, before a respawn would reset the
        // positions the change moves.
        let (_, mut bytes) = play(short(), 128 * 3);
        // Walk the records to one in combat (the buy phase holds everyone still) and make
        // its first player run backwards instead.
        let mut at = 4 + 1 + 4 + 1 + 1 + "arena".len() + 12 + 1 + 1 + 4 + 1;
        loop {
            let tick = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            let n = usize::from(bytes[at + 4]);
            if tick > 64 && n > 0 {
                bytes[at + 5 + 1] = (-127i8) as u8;
                break;
            }
            at += 5 + n * ENTRY_BYTES;
        }
        let o = replay(&bytes, &Scopes::new(Instant::now)).unwrap();
        assert!(!o.is_identical(), "a changed input replayed identically");
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
}
