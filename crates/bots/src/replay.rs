//! Action-file bots, the Quake paper's method: each bot sends a recorded player's inputs
//! instead of thinking, so a benchmark's load is a real match's, the same on every run.
//!
//! What it does: loads action files (`serve --record-dir`, read by
//! [`tickforge_game::replay::ActionFile`]) once, before any bot connects, refusing a bad
//! file with its name and the reason, and keeps each recorded seat's commands in memory
//! ([`ReplaySet`]). Bot `k` (from 0, across matches) replays the `k mod pairs`-th of the
//! files' `(file, seat)` pairs, taken file by file (sorted by name), each file's seats
//! ascending; only seats with at least one input recorded count. A [`Replayer`] plays one
//! pair: the first input a bot sends after its first snapshot carries the seat's first
//! recorded command, the next one the command the seat held a tick later, and so on, one
//! a tick; at the end of the recording it starts over from the seat's first command, and
//! a match that ends and starts over (a new epoch) starts it over too. Each input gets the
//! bot's own sequence number and view time (the recorded view times name ticks of another
//! match); forward, side, buttons, yaw and pitch are sent as recorded.
//!
//! What it does not do: close the loop. The replay is open, as the paper's was: the
//! server's world diverges from the recording at once (other seats, other spawns, other
//! timing), so a replayed player walks into walls the recorded one walked around and fires
//! at where someone stood. The load (inputs, movement, shots, what is replicated) has the
//! recording's shape; the outcome is not the recording's. Replayed shots are aimed at no
//! one the bot can see, so no hit registration is judged for them (they appear as the
//! server's verdicts only).

use std::path::Path;

use anyhow::{bail, Context, Result};
use tickforge_game::replay::ActionFile;
use tickforge_game::{BuiltinMap, UserCmd};
use tickforge_telemetry::report::{ReplayFile, ReplaySource};

/// The most bytes of action files one run loads: 256 MiB, some four hours of ten-player
/// matches at 17 KB a second (`tests/actions/README.md`); the commands kept from them take
/// about as much again.
pub const MAX_TOTAL_BYTES: u64 = 256 << 20;

/// The extension of the files a directory contributes.
const EXTENSION: &str = "actions";

/// One recorded seat's commands.
#[derive(Clone, Debug)]
struct SeatStream {
    /// Index into [`ReplaySet::files`].
    file: usize,
    seat: u16,
    /// `(tick offset, command)`: the offset from the seat's first input, ascending, one
    /// per tick at most (the last recorded for that tick, which is the one the world
    /// stepped with). The first is at offset 0.
    commands: Vec<(u32, UserCmd)>,
    /// Ticks one pass takes: from the seat's first input to the recording's end (or just
    /// past its last input, if that is later).
    ticks: u32,
}

/// Every recorded seat of the loaded action files, in assignment order.
#[derive(Clone, Debug)]
pub struct ReplaySet {
    files: Vec<ReplayFile>,
    streams: Vec<SeatStream>,
    skipped: Vec<String>,
}

impl ReplaySet {
    /// Loads `path`: an action file, or every `*.actions` file of a directory, sorted by
    /// name. Every file must be sound, recorded at `tick_hz` (a recording is not resampled:
    /// movement per tick would change) and hold an input; a file named alone must be
    /// recorded on `map`, a directory's files of another map are left out (and listed in
    /// the report). Refuses more than [`MAX_TOTAL_BYTES`] in all before reading any.
    pub fn load(path: &Path, map: BuiltinMap, tick_hz: u32) -> Result<ReplaySet> {
        let meta =
            std::fs::metadata(path).with_context(|| format!("--replay {}", path.display()))?;
        let (paths, alone) = if meta.is_dir() {
            let mut paths = Vec::new();
            for entry in std::fs::read_dir(path)
                .with_context(|| format!("--replay {}: reading the directory", path.display()))?
            {
                let entry = entry.with_context(|| {
                    format!("--replay {}: reading the directory", path.display())
                })?;
                let p = entry.path();
                if p.extension().is_some_and(|e| e == EXTENSION) && p.is_file() {
                    paths.push(p);
                }
            }
            paths.sort();
            if paths.is_empty() {
                bail!(
                    "--replay {}: no *.{EXTENSION} files in the directory",
                    path.display()
                );
            }
            (paths, false)
        } else {
            (vec![path.to_path_buf()], true)
        };
        let mut total = 0u64;
        for p in &paths {
            total += std::fs::metadata(p)
                .with_context(|| format!("--replay {}", p.display()))?
                .len();
        }
        if total > MAX_TOTAL_BYTES {
            bail!(
                "--replay {}: {total} bytes of action files, more than the {MAX_TOTAL_BYTES} \
                 a run loads",
                path.display()
            );
        }
        let mut files = Vec::with_capacity(paths.len());
        for p in &paths {
            let bytes =
                std::fs::read(p).with_context(|| format!("--replay: reading {}", p.display()))?;
            let name = p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            files.push((name, bytes));
        }
        ReplaySet::from_files(&files, map, tick_hz, alone)
            .with_context(|| format!("--replay {}", path.display()))
    }

    /// [`ReplaySet::load`] on files already read: `(name, bytes)`, in assignment order.
    /// `alone`: a file of another map is refused rather than left out.
    pub fn from_files(
        files: &[(String, Vec<u8>)],
        map: BuiltinMap,
        tick_hz: u32,
        alone: bool,
    ) -> Result<ReplaySet> {
        let mut set = ReplaySet {
            files: Vec::new(),
            streams: Vec::new(),
            skipped: Vec::new(),
        };
        for (name, bytes) in files {
            let file = ActionFile::parse(bytes).with_context(|| name.clone())?;
            let config = file.config();
            if config.tick_hz != tick_hz {
                bail!(
                    "{name}: recorded at {} Hz, the server ticks at {tick_hz} Hz (a recording \
                     is replayed tick for tick, not resampled)",
                    config.tick_hz
                );
            }
            if config.map != map {
                let why = format!(
                    "{name}: recorded on {}, the server plays {}",
                    config.map.name(),
                    map.name()
                );
                if alone {
                    bail!("{why}");
                }
                set.skipped.push(why);
                continue;
            }
            let index = set.files.len();
            let first_stream = set.streams.len();
            set.streams
                .extend((0..config.players).map(|seat| SeatStream {
                    file: index,
                    seat,
                    commands: Vec::new(),
                    ticks: 0,
                }));
            // Each seat's first input tick: its commands' offsets count from there.
            let mut firsts = vec![None; usize::from(config.players)];
            let mut last_tick = 0;
            for (tick, slot, cmd, _) in file.entries() {
                last_tick = tick.0;
                let first = *firsts[usize::from(slot.0)].get_or_insert(tick.0);
                let s = &mut set.streams[first_stream + usize::from(slot.0)];
                let offset = tick.0 - first;
                match s.commands.last_mut() {
                    // Two inputs in one tick: the world steps with the last.
                    Some(last) if last.0 == offset => last.1 = cmd,
                    _ => s.commands.push((offset, cmd)),
                }
            }
            let end = file.end_tick().0.max(last_tick + 1);
            for (s, first) in set.streams[first_stream..].iter_mut().zip(&firsts) {
                s.ticks = first.map_or(0, |f| end - f);
                s.commands.shrink_to_fit();
            }
            set.streams
                .retain(|s| s.file != index || !s.commands.is_empty());
            let seats: Vec<u16> = set.streams[first_stream..].iter().map(|s| s.seat).collect();
            if seats.is_empty() {
                bail!("{name}: records no inputs, nothing to replay");
            }
            set.files.push(ReplayFile {
                name: name.clone(),
                bytes: bytes.len() as u64,
                check: format!(
                    "{:016x}",
                    u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().expect("8 bytes"))
                ),
                map: config.map.name().to_string(),
                ticks: end,
                seats,
            });
        }
        if set.streams.is_empty() {
            let maps: Vec<&str> = set.skipped.iter().map(String::as_str).collect();
            bail!(
                "no action file recorded on {} to replay ({})",
                map.name(),
                maps.join("; ")
            );
        }
        Ok(set)
    }

    /// `(file, seat)` pairs in all: bots past this many replay the same pairs again.
    pub fn pairs(&self) -> usize {
        self.streams.len()
    }

    /// The files replayed, in assignment order.
    pub fn files(&self) -> &[ReplayFile] {
        &self.files
    }

    /// The pair bot `k` replays: its file's name and the seat.
    pub fn pair_of(&self, k: u64) -> (&str, u16) {
        let s = &self.streams[self.stream_of(k)];
        (&self.files[s.file].name, s.seat)
    }

    fn stream_of(&self, k: u64) -> usize {
        (k % self.streams.len() as u64) as usize
    }

    /// What the report says of the files, for `bots` bots of which the one that sent the
    /// fewest recorded commands sent `min_inputs_per_bot`.
    pub fn source(&self, bots: u64, min_inputs_per_bot: u64) -> ReplaySource {
        ReplaySource {
            files: self.files.clone(),
            pairs: self.streams.len() as u64,
            bots,
            min_inputs_per_bot,
            skipped: self.skipped.clone(),
        }
    }
}

/// Plays one recorded seat's commands, a tick at a time, looping; allocates nothing.
#[derive(Clone, Debug)]
pub struct Replayer {
    set: std::sync::Arc<ReplaySet>,
    stream: usize,
    /// The tick offset of the next command, from the seat's first input.
    offset: u32,
    /// Index of the next recorded command not yet taken.
    next: usize,
    /// The command the seat holds at `offset - 1`.
    cmd: UserCmd,
    /// Passes over the recording completed.
    passes: u32,
    /// Commands taken in all.
    sent: u64,
}

impl Replayer {
    /// The replayer of bot `k` (from 0, across matches): pair `k mod pairs`.
    pub fn new(set: std::sync::Arc<ReplaySet>, k: u64) -> Replayer {
        let stream = set.stream_of(k);
        Replayer {
            set,
            stream,
            offset: 0,
            next: 0,
            cmd: UserCmd::default(),
            passes: 0,
            sent: 0,
        }
    }

    /// The command the recorded seat held at the next tick; after the recording's last
    /// tick, its first again.
    pub fn next_cmd(&mut self) -> UserCmd {
        let s = &self.set.streams[self.stream];
        while let Some(&(at, cmd)) = s.commands.get(self.next) {
            if at > self.offset {
                break;
            }
            self.cmd = cmd;
            self.next += 1;
        }
        self.offset += 1;
        self.sent += 1;
        if self.offset >= s.ticks {
            self.offset = 0;
            self.next = 0;
            self.passes += 1;
        }
        self.cmd
    }

    /// Starts over from the seat's first command (a new match).
    pub fn restart(&mut self) {
        self.offset = 0;
        self.next = 0;
        self.cmd = UserCmd::default();
    }

    /// Commands taken so far, every pass and match.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Where the next command comes from: `(passes completed, tick offset)`.
    pub fn position(&self) -> (u32, u32) {
        (self.passes, self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;
    use tickforge_game::replay::Recorder;
    use tickforge_game::rules::RulesConfig;
    use tickforge_game::{PlayerSlot, Tick, ViewTime, World, WorldConfig};
    use tickforge_telemetry::Scopes;

    /// A recording of `players` on `map` at `tick_hz` over `ticks` ticks: seat `s` first
    /// sends at tick `2 s + 1`, then every `s + 1` ticks, its forward the tick's low bits
    /// and its yaw naming the seat; seat `players - 1` never sends when `silent_last`.
    fn recording(
        map: BuiltinMap,
        tick_hz: u32,
        players: u8,
        ticks: u32,
        silent_last: bool,
    ) -> Vec<u8> {
        let config = WorldConfig {
            players: u16::from(players),
            tick_hz,
            map,
            rules: RulesConfig {
                tick_hz: std::num::NonZeroU32::new(tick_hz).unwrap(),
                buy: Duration::from_millis(100),
                round: Duration::from_secs(60),
                ..RulesConfig::default()
            },
            ..WorldConfig::default()
        };
        let scopes = Scopes::new(std::time::Instant::now);
        let mut world = World::new(config);
        let mut rec = Recorder::new(&config, 1 << 12);
        for t in 0..ticks {
            for s in 0..players {
                if silent_last && s == players - 1 {
                    continue;
                }
                let first = 2 * u32::from(s) + 1;
                if t >= first && (t - first) % (u32::from(s) + 1) == 0 {
                    rec.input(
                        world.tick(),
                        PlayerSlot(u16::from(s)),
                        &cmd(t, u16::from(s)),
                        ViewTime::at(Tick(t)),
                    );
                }
            }
            world.step(&scopes);
        }
        rec.finish(&world)
    }

    fn cmd(t: u32, seat: u16) -> UserCmd {
        UserCmd {
            forward: (t % 100) as i8,
            yaw: seat * 1000,
            ..UserCmd::default()
        }
    }

    fn set(files: &[(&str, Vec<u8>)], map: BuiltinMap, alone: bool) -> Result<ReplaySet> {
        let files: Vec<(String, Vec<u8>)> = files
            .iter()
            .map(|(n, b)| (n.to_string(), b.clone()))
            .collect();
        ReplaySet::from_files(&files, map, 128, alone)
    }

    #[test]
    fn bots_take_the_files_seats_round_robin_in_file_then_seat_order() {
        let a = recording(BuiltinMap::Arena, 128, 3, 40, false);
        let b = recording(BuiltinMap::Arena, 128, 2, 40, false);
        let set = set(
            &[("a.actions", a), ("b.actions", b)],
            BuiltinMap::Arena,
            false,
        )
        .unwrap();
        assert_eq!(set.pairs(), 5);
        let pairs: Vec<(&str, u16)> = (0..12).map(|k| set.pair_of(k)).collect();
        assert_eq!(
            pairs,
            [
                ("a.actions", 0),
                ("a.actions", 1),
                ("a.actions", 2),
                ("b.actions", 0),
                ("b.actions", 1),
                ("a.actions", 0),
                ("a.actions", 1),
                ("a.actions", 2),
                ("b.actions", 0),
                ("b.actions", 1),
                ("a.actions", 0),
                ("a.actions", 1),
            ]
        );
        let source = set.source(12, 0);
        assert_eq!((source.pairs, source.bots), (5, 12));
        assert_eq!(source.files[0].seats, [0, 1, 2]);
        assert_eq!(source.files[1].ticks, 40);
    }

    #[test]
    fn a_seat_that_never_sent_is_not_a_pair() {
        let a = recording(BuiltinMap::Arena, 128, 3, 40, true);
        let set = set(&[("a.actions", a)], BuiltinMap::Arena, true).unwrap();
        assert_eq!(set.pairs(), 2);
        assert_eq!(set.files()[0].seats, [0, 1]);
        assert_eq!(set.pair_of(2), ("a.actions", 0));
    }

    #[test]
    fn a_replayer_sends_the_held_command_of_each_tick_from_the_seats_first_input_and_loops() {
        let bytes = recording(BuiltinMap::Arena, 128, 3, 50, false);
        let end = ActionFile::parse(&bytes).unwrap().end_tick().0;
        assert_eq!(end, 50);
        let set = Arc::new(set(&[("a.actions", bytes)], BuiltinMap::Arena, true).unwrap());
        for seat in 0..3u8 {
            let s = u32::from(seat);
            let first = 2 * s + 1;
            // The command the world held for this seat at tick t of the recording.
            let held = |t: u32| cmd(t - (t - first) % (s + 1), u16::from(seat));
            let mut r = Replayer::new(set.clone(), u64::from(seat));
            let pass: Vec<UserCmd> = (first..end).map(held).collect();
            for n in 0..3 {
                assert_eq!(r.position(), (n, 0), "seat {seat}");
                let sent: Vec<UserCmd> = (first..end).map(|_| r.next_cmd()).collect();
                assert_eq!(sent, pass, "seat {seat}, pass {n}");
            }
            // A new match starts it over.
            r.next_cmd();
            r.restart();
            assert_eq!(r.next_cmd(), cmd(first, u16::from(seat)));
        }
    }

    #[test]
    fn refuses_damaged_files_naming_them() {
        let mut bad = recording(BuiltinMap::Arena, 128, 2, 30, false);
        let at = bad.len() / 2;
        bad[at] ^= 1;
        let good = recording(BuiltinMap::Arena, 128, 2, 30, false);
        let err = format!(
            "{:#}",
            set(
                &[("good.actions", good), ("bad.actions", bad)],
                BuiltinMap::Arena,
                false
            )
            .unwrap_err()
        );
        assert!(
            err.starts_with("bad.actions: ") && err.contains("checksum"),
            "{err}"
        );
        let err = format!(
            "{:#}",
            set(
                &[("x.actions", b"hello".to_vec())],
                BuiltinMap::Arena,
                false
            )
            .unwrap_err()
        );
        assert!(
            err.contains("x.actions") && err.contains("not a tickforge action file"),
            "{err}"
        );
    }

    #[test]
    fn refuses_another_tick_rate_and_a_lone_file_of_another_map() {
        let at64 = recording(BuiltinMap::Arena, 64, 2, 30, false);
        let err = format!(
            "{:#}",
            set(&[("slow.actions", at64)], BuiltinMap::Arena, false).unwrap_err()
        );
        assert!(err.contains("slow.actions: recorded at 64 Hz"), "{err}");
        let flat = recording(BuiltinMap::Flat2km, 128, 2, 30, false);
        let err = format!(
            "{:#}",
            set(&[("flat.actions", flat.clone())], BuiltinMap::Arena, true).unwrap_err()
        );
        assert!(
            err.contains("flat.actions: recorded on flat2km, the server plays arena"),
            "{err}"
        );
        // In a directory it is left out, and said so; with nothing left, refused.
        let arena = recording(BuiltinMap::Arena, 128, 2, 30, false);
        let mixed = set(
            &[("arena.actions", arena), ("flat.actions", flat.clone())],
            BuiltinMap::Arena,
            false,
        )
        .unwrap();
        assert_eq!(mixed.files().len(), 1);
        assert_eq!(mixed.source(1, 0).skipped.len(), 1);
        let err = format!(
            "{:#}",
            set(&[("flat.actions", flat)], BuiltinMap::Arena, false).unwrap_err()
        );
        assert!(err.contains("no action file recorded on arena"), "{err}");
    }

    #[test]
    fn a_directory_with_no_action_files_or_too_many_bytes_is_refused() {
        let dir =
            std::env::temp_dir().join(format!("tickforge-replay-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("notes.txt"), "not an action file").unwrap();
        let err = format!(
            "{:#}",
            ReplaySet::load(&dir, BuiltinMap::Arena, 128).unwrap_err()
        );
        assert!(err.contains("no *.actions files"), "{err}");
        // A sparse file past the cap: refused by its size, before it is read.
        let big = std::fs::File::create(dir.join("big.actions")).unwrap();
        big.set_len(MAX_TOTAL_BYTES + 1).unwrap();
        let err = format!(
            "{:#}",
            ReplaySet::load(&dir, BuiltinMap::Arena, 128).unwrap_err()
        );
        assert!(err.contains("more than the 268435456 a run loads"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_checked_in_recordings_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/actions");
        let set = ReplaySet::load(&dir, BuiltinMap::Arena, 128).unwrap();
        let names: Vec<&str> = set.files().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "arena-10p.actions",
                "arena-4p-2-rounds.actions",
                "duel-arena-2p.actions"
            ]
        );
        assert_eq!(set.pairs(), 16);
        assert_eq!(
            set.source(0, 0).skipped.len(),
            1,
            "flat2km-6p-crowd.actions"
        );
        let flat = ReplaySet::load(&dir, BuiltinMap::Flat2km, 128).unwrap();
        assert_eq!(flat.pairs(), 6);
    }
}
