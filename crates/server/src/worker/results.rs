//! The results file: checked once when a process opens it, then shared by every worker's
//! persister, so that a failed append can be undone before the next one.
//!
//! At open, a torn last line (a crash mid-write: no trailing newline, or a last line that
//! does not decode) is copied to `FILE.torn-<unix seconds>` and cut off, with a warning on
//! stderr; every whole line before it is kept as it is. The next result so starts on a
//! line of its own.
//!
//! Appends go through [`ResultsLog::append_durable`]: write, then fsync. A failed write can
//! leave part of a line in the file, and a failed fsync leaves unknown what reached the
//! disk, so the log remembers the length of the file as of the last append that was synced
//! and cuts the file back to it before it writes again: a retried line is never glued onto
//! a partial one, nor written twice. One log per file per process (the workers share it
//! through [`ResultsLog::open`]), because another writer's appends would move that length.
//!
//! A results file that is not a regular file (a character device such as `/dev/null` or
//! `/dev/stdout`, a FIFO) is a stream: an append is a plain write, with no fsync (EINVAL
//! there), no cutting back and no repair at open.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tickforge_game::rules::MatchResult;

/// Where a results file's bytes go: a file, or a test's faulting stand-in.
pub(super) trait ResultsSink: Send {
    /// Writes all of `bytes` at the end of the file.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Makes what was written durable.
    fn sync(&mut self) -> io::Result<()>;
    /// Cuts the file back to `len` bytes.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
}

/// The results file itself. A regular file gets the guarantees of the module docs; any
/// other (a character device such as `/dev/null` or `/dev/stdout`, a FIFO) is a stream:
/// an append is a plain write, with nothing to sync and nothing to cut back.
struct FileSink {
    file: File,
    regular: bool,
}

impl ResultsSink for FileSink {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)
    }

    fn sync(&mut self) -> io::Result<()> {
        // A device or a pipe has no data to sync: fsync fails with EINVAL there.
        if self.regular {
            self.file.sync_data()
        } else {
            Ok(())
        }
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        // Opened for appending: the next write lands at the new end. A stream cannot be
        // cut back: what a failed write sent is gone.
        if self.regular {
            self.file.set_len(len)
        } else {
            Ok(())
        }
    }
}

struct LogState {
    sink: Box<dyn ResultsSink>,
    /// The file's length after the last append that was synced.
    good_len: u64,
    /// An append failed since: the file may hold bytes past `good_len`.
    dirty: bool,
}

/// The results file of this process, shared by the persisters that append to it.
#[derive(Clone)]
pub(super) struct ResultsLog {
    path: Arc<PathBuf>,
    state: Arc<Mutex<LogState>>,
}

/// A file's device and inode: the same file whatever path names it.
type FileKey = (u64, u64);

/// The results files this process has open, so that every worker appends through the
/// same [`ResultsLog`].
static OPEN: Mutex<Vec<(FileKey, Weak<Mutex<LogState>>)>> = Mutex::new(Vec::new());

impl ResultsLog {
    /// Opens `path` for appending, creating it; the first open in this process repairs a
    /// torn last line (module docs). Later opens of the same file share the first's log.
    pub(super) fn open(path: &Path) -> io::Result<ResultsLog> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)?;
        let meta = file.metadata()?;
        let key = (meta.dev(), meta.ino());
        let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
        open.retain(|(_, log)| log.strong_count() > 0);
        if let Some(state) = open
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|e| e.1.upgrade())
        {
            return Ok(ResultsLog {
                path: Arc::new(path.to_path_buf()),
                state,
            });
        }
        let regular = meta.is_file();
        let good_len = if regular {
            repair_torn_tail(&mut file, path)?
        } else {
            0
        };
        let log = ResultsLog::with_sink(path, Box::new(FileSink { file, regular }), good_len);
        open.push((key, Arc::downgrade(&log.state)));
        Ok(log)
    }

    /// A log writing to `sink`, whose file is `len` bytes long now.
    pub(super) fn with_sink(path: &Path, sink: Box<dyn ResultsSink>, len: u64) -> ResultsLog {
        ResultsLog {
            path: Arc::new(path.to_path_buf()),
            state: Arc::new(Mutex::new(LogState {
                sink,
                good_len: len,
                dirty: false,
            })),
        }
    }

    /// The file's path, for messages.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `lines` (whole lines) and syncs them. After a failure the file is first cut
    /// back to its length after the last synced append, so what a failed attempt left is
    /// gone before the lines are written again.
    pub(super) fn append_durable(&self, lines: &[u8]) -> io::Result<()> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let s = &mut *s;
        if s.dirty {
            s.sink.truncate(s.good_len)?;
            s.dirty = false;
        }
        match s.sink.append(lines).and_then(|()| s.sink.sync()) {
            Ok(()) => {
                s.good_len += lines.len() as u64;
                Ok(())
            }
            Err(e) => {
                s.dirty = true;
                Err(e)
            }
        }
    }
}

impl ResultsLog {
    /// Cuts off what failed appends left, if any: called when the lines they held are
    /// given up, so the file ends on a whole line. Best effort: a file left torn is
    /// repaired at the next open.
    pub(super) fn discard_partial(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let s = &mut *s;
        if s.dirty
            && s.sink
                .truncate(s.good_len)
                .and_then(|()| s.sink.sync())
                .is_ok()
        {
            s.dirty = false;
        }
    }
}

/// Where the torn tail of `tail` starts, `tail` being the last bytes of a file (all of it
/// when `whole`): `Some(None)` when the last line is whole and decodes, `Some(Some(i))`
/// when the bytes from `i` on are torn, `None` when the last line starts before `tail`.
fn torn_from(tail: &[u8], whole: bool) -> Option<Option<usize>> {
    let line_start = |before: &[u8]| match before.iter().rposition(|&b| b == b'\n') {
        Some(i) => Some(i + 1),
        None => whole.then_some(0),
    };
    match tail.split_last() {
        None => Some(None),
        Some((b'\n', body)) => {
            let start = line_start(body)?;
            let line = std::str::from_utf8(&body[start..]).ok();
            let whole_line = line.is_some_and(|l| MatchResult::decode(l).is_ok());
            Some((!whole_line).then_some(start))
        }
        Some(_) => Some(Some(line_start(tail)?)),
    }
}

/// Finds a torn last line in `file` and, if there is one, saves it beside `path` and cuts
/// the file before it, warning on stderr. Returns the file's length after.
fn repair_torn_tail(file: &mut File, path: &Path) -> io::Result<u64> {
    let len = file.metadata()?.len();
    let mut window = 64 * 1024u64;
    let (start, tail, cut) = loop {
        let start = len.saturating_sub(window);
        let mut tail = vec![0; (len - start) as usize];
        file.read_exact_at(&mut tail, start)?;
        if let Some(cut) = torn_from(&tail, start == 0) {
            break (start, tail, cut);
        }
        window *= 2;
    };
    let Some(cut) = cut else { return Ok(len) };
    let torn = &tail[cut..];
    let kept = start + cut as u64;
    let aside = save_aside(path, torn);
    file.set_len(kept)?;
    file.sync_all()?;
    match aside {
        Ok(aside) => eprintln!(
            "tickforge: results file {}: its last line was torn ({} bytes, a crash \
             mid-write?): moved to {} and cut off; the {} bytes of whole lines before it \
             are kept",
            path.display(),
            torn.len(),
            aside.display(),
            kept
        ),
        Err(e) => eprintln!(
            "tickforge: results file {}: its last line was torn ({} bytes, a crash \
             mid-write?) and could not be saved aside ({e}): cut off; the {} bytes of \
             whole lines before it are kept",
            path.display(),
            torn.len(),
            kept
        ),
    }
    Ok(kept)
}

/// Writes `torn` to a new `PATH.torn-<unix seconds>` (a `-k` suffix if that exists) and
/// syncs it; returns its path.
fn save_aside(path: &Path, torn: &[u8]) -> io::Result<PathBuf> {
    let stem = format!(
        "{}.torn-{}",
        path.display(),
        tickforge_io::entropy::unix_now()
    );
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for k in 0..100 {
        let aside = PathBuf::from(match k {
            0 => stem.clone(),
            k => format!("{stem}-{k}"),
        });
        match OpenOptions::new().write(true).create_new(true).open(&aside) {
            Ok(mut f) => {
                f.write_all(torn).and_then(|()| f.sync_all())?;
                return Ok(aside);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tickforge-results-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        path
    }

    /// A whole result line, as the server writes them.
    pub(crate) fn line(match_id: u32) -> String {
        let result = MatchResult {
            tick_hz: std::num::NonZeroU32::new(128).unwrap(),
            duration_ticks: 100,
            rounds_played: 1,
            score: Default::default(),
            players: Vec::new(),
        };
        let origin = tickforge_game::rules::ResultOrigin {
            match_id,
            run_id: 1,
            ended_at_unix_s: 1_795_588_283,
        };
        let mut line = String::new();
        result.encode(&origin, &mut line);
        line
    }

    /// Files beside `path` whose names start with its name and `.torn-`.
    fn torn_files(path: &Path) -> Vec<PathBuf> {
        let prefix = format!("{}.torn-", path.file_name().unwrap().to_str().unwrap());
        let mut found: Vec<PathBuf> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with(&prefix)
            })
            .collect();
        found.sort();
        found
    }

    #[test]
    fn a_torn_last_line_is_moved_aside_and_whole_lines_are_kept() {
        let whole = format!("{}{}", line(1), line(2));
        let third = line(3);
        let cases = [
            // A crash mid-append: no newline.
            ("cut.log", format!("{whole}{}", &third[..40])),
            // A last line that ends but does not decode (its check is off).
            ("bad.log", format!("{whole}{}\n", &third[..third.len() - 3])),
            // Nothing but a partial line.
            ("only.log", third[..10].to_string()),
        ];
        for (name, text) in cases {
            let path = scratch(name);
            std::fs::write(&path, &text).unwrap();
            let log = ResultsLog::open(&path).unwrap();
            let kept = if name == "only.log" { "" } else { &whole };
            assert_eq!(std::fs::read_to_string(&path).unwrap(), kept, "{name}");
            let aside = torn_files(&path);
            assert_eq!(aside.len(), 1, "{name}: {aside:?}");
            let torn = std::fs::read(&aside[0]).unwrap();
            assert_eq!(torn, text.as_bytes()[kept.len()..], "{name}");
            // The next result starts on a line of its own.
            log.append_durable(line(4).as_bytes()).unwrap();
            let after = std::fs::read_to_string(&path).unwrap();
            assert_eq!(after, format!("{kept}{}", line(4)), "{name}");
            for l in after.lines() {
                MatchResult::decode(l).unwrap();
            }
        }
    }

    #[test]
    fn a_whole_file_is_left_untouched_and_shared_between_opens() {
        let path = scratch("whole.log");
        let text = format!("{}{}", line(1), line(2));
        std::fs::write(&path, &text).unwrap();
        let a = ResultsLog::open(&path).unwrap();
        let b = ResultsLog::open(&path).unwrap();
        assert!(Arc::ptr_eq(&a.state, &b.state), "one log per file");
        assert!(torn_files(&path).is_empty());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        drop((a, b));
        // An empty file, and one that was never there, are whole too.
        let empty = scratch("empty.log");
        ResultsLog::open(&empty).unwrap();
        assert_eq!(std::fs::read(&empty).unwrap(), b"");
    }

    #[test]
    fn a_torn_tail_longer_than_the_first_window_is_found() {
        let path = scratch("long-tail.log");
        let text = format!("{}{}", line(1), "x".repeat(200_000));
        std::fs::write(&path, &text).unwrap();
        ResultsLog::open(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), line(1));
        assert_eq!(std::fs::read(&torn_files(&path)[0]).unwrap().len(), 200_000);
    }

    #[test]
    fn a_results_file_that_is_not_a_regular_file_takes_plain_writes() {
        // /dev/null, the natural "off": no fsync (EINVAL there), no truncation, no repair.
        let log = ResultsLog::open(Path::new("/dev/null")).unwrap();
        for i in 0..3 {
            log.append_durable(line(i).as_bytes()).unwrap();
        }
        log.discard_partial();
        // A FIFO, as `/dev/stdout` piped to a collector is: every line comes out whole.
        let fifo = scratch("results.fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path alive for the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Opened read-write, it does not wait for a reader; the reader then finds it.
        let log = ResultsLog::open(&fifo).unwrap();
        let mut fifo = File::open(&fifo).unwrap();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            io::Read::read_to_string(&mut fifo, &mut text).unwrap();
            text
        });
        log.append_durable(line(1).as_bytes()).unwrap();
        log.append_durable(line(2).as_bytes()).unwrap();
        drop(log);
        assert_eq!(reader.join().unwrap(), format!("{}{}", line(1), line(2)));
    }

    #[test]
    fn results_file_none_turns_the_results_file_off() {
        let resolve = |file: Option<&str>| {
            crate::config::ConfigFile {
                results_file: file.map(PathBuf::from),
                ..Default::default()
            }
            .resolve_with_env(Some("00".repeat(32)))
            .unwrap()
            .results_file
        };
        assert_eq!(resolve(Some("none")), None);
        assert_eq!(resolve(Some("./none")), Some(PathBuf::from("./none")));
        assert_eq!(
            resolve(None),
            Some(PathBuf::from(crate::config::DEFAULT_RESULTS_FILE))
        );
    }

    /// A results file in memory that fails the next `fail` writes (after writing half of
    /// what it was given) or syncs, as a full or failing disk does.
    #[derive(Clone, Default)]
    pub(crate) struct FaultyDisk {
        pub(crate) bytes: Arc<Mutex<Vec<u8>>>,
        pub(crate) fail_writes: Arc<AtomicU32>,
        pub(crate) fail_syncs: Arc<AtomicU32>,
    }

    fn take_one(n: &AtomicU32) -> bool {
        n.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| v.checked_sub(1))
            .is_ok()
    }

    impl ResultsSink for FaultyDisk {
        fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
            let mut file = self.bytes.lock().unwrap();
            if take_one(&self.fail_writes) {
                file.extend_from_slice(&bytes[..bytes.len() / 2]);
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            file.extend_from_slice(bytes);
            Ok(())
        }
        fn sync(&mut self) -> io::Result<()> {
            if take_one(&self.fail_syncs) {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            Ok(())
        }
        fn truncate(&mut self, len: u64) -> io::Result<()> {
            self.bytes.lock().unwrap().truncate(len as usize);
            Ok(())
        }
    }

    #[test]
    fn a_retried_append_is_never_glued_onto_a_partial_one_nor_doubled() {
        let disk = FaultyDisk::default();
        let log = ResultsLog::with_sink(Path::new("mem"), Box::new(disk.clone()), 0);
        log.append_durable(line(1).as_bytes()).unwrap();
        disk.fail_writes.store(1, Ordering::Release);
        assert!(log.append_durable(line(2).as_bytes()).is_err());
        // Half a line is in the file now.
        assert!(disk.bytes.lock().unwrap().len() > line(1).len());
        log.append_durable(line(2).as_bytes()).unwrap();
        // Written, then its sync fails: it is written again, once.
        disk.fail_syncs.store(1, Ordering::Release);
        assert!(log.append_durable(line(3).as_bytes()).is_err());
        log.append_durable(line(3).as_bytes()).unwrap();
        let text = String::from_utf8(disk.bytes.lock().unwrap().clone()).unwrap();
        assert_eq!(text, format!("{}{}{}", line(1), line(2), line(3)));
    }
}
