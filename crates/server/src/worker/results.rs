//! The results file: checked once when a process opens it, then shared by every worker's
//! persister, so that a failed append can be undone before the next one.
//!
//! At open, the last line is looked at, and only when it lacks its trailing newline (a
//! crash mid-write): if it decodes as a result it was whole but for the newline, which is
//! added; if not, it is torn: copied to `FILE.torn-<unix seconds>`, synced, and only then
//! cut off, with a warning on stderr. A newline-terminated line is never touched, whatever
//! it holds (a newer format's line, a comment). The server refuses to start, naming the
//! file, rather than cut a line it could not save aside, or when the last [`SCAN_MAX`]
//! bytes hold no newline (not a results file?). The next result so starts on a line of
//! its own.
//!
//! Appends go through [`ResultsLog::append_durable`]: write, then fsync. Every writer of
//! the file, in this process or another (a rolling restart: the old process drains and
//! still appends while the new one opens the file), holds an exclusive `flock` on it
//! around the repair at open and around each append, fsync and cut-back. Under the lock an
//! append takes the file's length from fstat as its rollback point; when the write or the
//! fsync fails, the file is cut back to it before the lock is released, so a retried line
//! is never glued onto a partial one, nor written twice, and no other writer's line is
//! ever cut. A file cut meanwhile (copytruncate rotation) is never extended: the cut-back
//! only shortens. When the cut-back fails too, the next append retries it first, if nobody
//! wrote past the partial line since; a writer that finds the file ending in a partial
//! line (another's failed cut-back) ends that line before it appends its own. The workers
//! of one process share one log through [`ResultsLog::open`].
//!
//! A results file that is not a regular file (a character device such as `/dev/null` or
//! `/dev/stdout`, a FIFO) is a stream: an append is a plain write, with no lock, no fsync
//! (EINVAL there), no cutting back and no repair at open.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tickforge_api::sim::result_line;

/// How far back from the end the repair at open looks for the last line's start: a
/// result line is a few kilobytes at most (its `cost` token: 64 rounds of about 100
/// bytes), so a file whose last megabyte holds no newline is not a results file, and is
/// neither read whole nor cut.
pub(super) const SCAN_MAX: u64 = 1 << 20;

/// Where a results file's bytes go: a file, or a test's faulting stand-in.
pub(super) trait ResultsSink: Send {
    /// Takes the lock every writer of the file holds while it appends or cuts, waiting
    /// for it; held until [`ResultsSink::unlock`]. Default: nothing to lock.
    fn lock(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// Releases [`ResultsSink::lock`].
    fn unlock(&mut self) {}
    /// The file's length now: where the next append lands. `None`: a stream, which has
    /// nothing to cut back to.
    fn len(&mut self) -> io::Result<Option<u64>>;
    /// Whether the file, `len` bytes long, ends on a whole line (empty, or a newline last).
    fn ends_line(&mut self, len: u64) -> io::Result<bool>;
    /// Writes all of `bytes` at the end of the file.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Makes what was written durable.
    fn sync(&mut self) -> io::Result<()>;
    /// Cuts the file back to `len` bytes.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
}

/// The results file itself. A regular file gets the guarantees of the module docs; any
/// other (a character device such as `/dev/null` or `/dev/stdout`, a FIFO) is a stream:
/// an append is a plain write, with nothing to lock, sync or cut back.
pub(super) struct FileSink {
    file: File,
    regular: bool,
}

impl FileSink {
    /// Opens `path` for appending, creating it; returns it with its metadata.
    pub(super) fn open(path: &Path) -> io::Result<(FileSink, Metadata)> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)?;
        let meta = file.metadata()?;
        let regular = meta.is_file();
        Ok((FileSink { file, regular }, meta))
    }

    /// Takes (`exclusive`) or drops this process's lock on the file. Windows: no lock (a
    /// development server; the workers of one process share one log already).
    #[cfg(not(unix))]
    fn flock(&self, _exclusive: bool) -> io::Result<()> {
        Ok(())
    }

    #[cfg(unix)]
    fn flock(&self, exclusive: bool) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let op = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_UN
        };
        loop {
            // SAFETY: flock on a descriptor this sink owns, alive for the call.
            if unsafe { libc::flock(self.file.as_raw_fd(), op) } == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl ResultsSink for FileSink {
    fn lock(&mut self) -> io::Result<()> {
        if self.regular {
            self.flock(true)
        } else {
            Ok(())
        }
    }

    fn unlock(&mut self) {
        if self.regular {
            // Closing the file releases it too.
            let _ = self.flock(false);
        }
    }

    fn len(&mut self) -> io::Result<Option<u64>> {
        if self.regular {
            Ok(Some(self.file.metadata()?.len()))
        } else {
            Ok(None)
        }
    }

    fn ends_line(&mut self, len: u64) -> io::Result<bool> {
        if len == 0 {
            return Ok(true);
        }
        let mut last = [0];
        read_exact_at(&self.file, &mut last, len - 1)?;
        Ok(last[0] == b'\n')
    }

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
    /// A failed append whose cut-back failed too: the length to cut back to, and the
    /// file's length it left (`None`: unknown, so it is never cut).
    leftover: Option<(u64, Option<u64>)>,
}

impl LogState {
    /// One append and its fsync, the lock held; cut back on failure (module docs).
    fn append_locked(&mut self, lines: &[u8]) -> io::Result<()> {
        self.cut_leftover()?;
        let Some(mut start) = self.sink.len()? else {
            return self.sink.append(lines);
        };
        if !self.sink.ends_line(start)? {
            // A partial line that another writer could not cut back: end it, so that
            // ours is not glued onto it.
            self.sink.append(b"\n")?;
            start += 1;
        }
        match self.sink.append(lines).and_then(|()| self.sink.sync()) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.cut_back(start);
                Err(e)
            }
        }
    }

    /// Cuts off what a failed append left past `start`; when that fails, it is left for
    /// the next append to retry.
    fn cut_back(&mut self, start: u64) {
        let len = match self.sink.len() {
            Ok(Some(len)) => len,
            Ok(None) => return,
            Err(_) => {
                self.leftover = Some((start, None));
                return;
            }
        };
        // Nothing was written, or the file was cut meanwhile (copytruncate rotation):
        // set_len would only extend it with zeros.
        if len <= start {
            return;
        }
        let cut = self.sink.truncate(start).and_then(|()| self.sink.sync());
        if cut.is_err() {
            self.leftover = Some((start, Some(len)));
        }
    }

    /// Retries a failed cut-back, while nobody wrote past what it would cut.
    fn cut_leftover(&mut self) -> io::Result<()> {
        let Some((start, end)) = self.leftover else {
            return Ok(());
        };
        if end.is_some() && self.sink.len()? == end {
            self.sink.truncate(start).and_then(|()| self.sink.sync())?;
        }
        self.leftover = None;
        Ok(())
    }
}

/// The results file of this process, shared by the persisters that append to it.
#[derive(Clone)]
pub(super) struct ResultsLog {
    path: Arc<PathBuf>,
    state: Arc<Mutex<LogState>>,
}

/// A file's device and inode: the same file whatever path names it.
#[cfg(unix)]
type FileKey = (u64, u64);
/// A file's full path, links resolved: the same file whatever path names it (Windows,
/// where std gives no stable file id).
#[cfg(not(unix))]
type FileKey = PathBuf;

#[cfg(unix)]
fn file_key(_path: &Path, meta: &Metadata) -> io::Result<FileKey> {
    use std::os::unix::fs::MetadataExt;
    Ok((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn file_key(path: &Path, _meta: &Metadata) -> io::Result<FileKey> {
    std::fs::canonicalize(path)
}

/// Reads exactly `buf.len()` bytes of `file` at `offset`.
#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Reads exactly `buf.len()` bytes of `file` at `offset` (the file is opened for
/// appending, so moving its cursor moves no write).
#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The results files this process has open, so that every worker appends through the
/// same [`ResultsLog`].
static OPEN: Mutex<Vec<(FileKey, Weak<Mutex<LogState>>)>> = Mutex::new(Vec::new());

impl ResultsLog {
    /// Opens `path` for appending, creating it; the first open in this process repairs a
    /// torn last line (module docs). Later opens of the same file share the first's log.
    pub(super) fn open(path: &Path) -> io::Result<ResultsLog> {
        let (mut sink, meta) = FileSink::open(path)?;
        let key = file_key(path, &meta)?;
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
        if sink.regular {
            sink.lock()?;
            let repaired = repair_torn_tail(&mut sink.file, path);
            sink.unlock();
            repaired?;
        }
        let log = ResultsLog::with_sink(path, Box::new(sink));
        open.push((key, Arc::downgrade(&log.state)));
        Ok(log)
    }

    /// A log writing to `sink`.
    pub(super) fn with_sink(path: &Path, sink: Box<dyn ResultsSink>) -> ResultsLog {
        ResultsLog {
            path: Arc::new(path.to_path_buf()),
            state: Arc::new(Mutex::new(LogState {
                sink,
                leftover: None,
            })),
        }
    }

    /// The file's path, for messages.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `lines` (whole lines) and syncs them, under the file's lock; a failed
    /// attempt is cut back before the lock is released (module docs).
    pub(super) fn append_durable(&self, lines: &[u8]) -> io::Result<()> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.sink.lock()?;
        let appended = s.append_locked(lines);
        s.sink.unlock();
        appended
    }

    /// Cuts off what failed appends left, if any: called when the lines they held are
    /// given up, so the file ends on a whole line. Best effort: a file left torn is
    /// repaired at the next open.
    pub(super) fn discard_partial(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.leftover.is_none() || s.sink.lock().is_err() {
            return;
        }
        let _ = s.cut_leftover();
        s.sink.unlock();
    }
}

/// Looks at the last line of `file` (module docs): a last line without its newline gets
/// it when it decodes, and is saved beside `path` and cut off when it does not. Refuses
/// (an error naming the file) rather than cut what it could not save, or scan past
/// [`SCAN_MAX`]. The caller holds the file's lock.
fn repair_torn_tail(file: &mut File, path: &Path) -> io::Result<()> {
    let len = file.metadata()?.len();
    let mut last = [0];
    if len == 0 || {
        read_exact_at(file, &mut last, len - 1)?;
        last[0] == b'\n'
    } {
        return Ok(());
    }
    let mut window = 64 * 1024u64;
    let (line_start, line) = loop {
        let start = len.saturating_sub(window);
        let mut tail = vec![0; (len - start) as usize];
        read_exact_at(file, &mut tail, start)?;
        if let Some(i) = tail.iter().rposition(|&b| b == b'\n') {
            break (start + i as u64 + 1, tail.split_off(i + 1));
        }
        if start == 0 {
            break (0, tail);
        }
        if window >= SCAN_MAX {
            return Err(io::Error::other(format!(
                "results file {}: its last {} bytes hold no newline (not a results file?); \
                 refusing to start rather than cut it: move it away or name another file",
                path.display(),
                window
            )));
        }
        window = (window * 2).min(SCAN_MAX);
    };
    let decodes = std::str::from_utf8(&line).is_ok_and(|l| result_line::decode(l).is_ok());
    if decodes {
        // Whole but for its newline: ended, so the next result is not glued onto it.
        file.write_all(b"\n").and_then(|()| file.sync_data())?;
        eprintln!(
            "tickforge: results file {}: its last line lacked its newline; added",
            path.display()
        );
        return Ok(());
    }
    let aside = save_aside(path, &line).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "results file {}: its last line is torn ({} bytes, a crash mid-write?) and \
                 cannot be saved aside ({e}); refusing to start rather than cut it: move the \
                 file away, or make room beside it",
                path.display(),
                line.len()
            ),
        )
    })?;
    file.set_len(line_start)?;
    file.sync_all()?;
    eprintln!(
        "tickforge: results file {}: its last line was torn ({} bytes, a crash mid-write?): \
         moved to {} and cut off; the {} bytes of whole lines before it are kept",
        path.display(),
        line.len(),
        aside.display(),
        line_start
    );
    Ok(())
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
        let origin = result_line::ResultOrigin {
            match_id,
            run_id: 1,
            ended_at_unix_s: 1_795_588_283,
        };
        let mut line = String::new();
        let body =
            "ticks=100 seats=2 marks=0 seat=0,4294967296,4294967296 seat=1,4294967396,4294967296";
        result_line::encode("walk", &origin, body, &mut line);
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
                result_line::decode(l).unwrap();
            }
        }
    }

    #[test]
    fn a_newline_terminated_last_line_is_never_touched() {
        let whole = format!("{}{}", line(1), line(2));
        let third = line(3);
        for (name, last) in [
            // A newer format's whole line, a comment, a line whose check is off.
            (
                "newer.log",
                "tickforge-result/9 match=3 something new\n".to_string(),
            ),
            ("comment.log", "# rotated by ops\n".to_string()),
            ("bad.log", format!("{}\n", &third[..third.len() - 3])),
        ] {
            let path = scratch(name);
            let text = format!("{whole}{last}");
            std::fs::write(&path, &text).unwrap();
            let log = ResultsLog::open(&path).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{name}");
            assert!(torn_files(&path).is_empty(), "{name}");
            log.append_durable(line(4).as_bytes()).unwrap();
            let after = std::fs::read_to_string(&path).unwrap();
            assert_eq!(after, format!("{text}{}", line(4)), "{name}");
        }
    }

    #[test]
    fn a_last_line_that_decodes_but_lacks_its_newline_gets_it() {
        let path = scratch("no-newline.log");
        let text = format!("{}{}", line(1), line(2).trim_end());
        std::fs::write(&path, &text).unwrap();
        let log = ResultsLog::open(&path).unwrap();
        assert!(torn_files(&path).is_empty(), "nothing moved aside");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}{}", line(1), line(2))
        );
        log.append_durable(line(3).as_bytes()).unwrap();
        let after = std::fs::read_to_string(&path).unwrap();
        assert_eq!(after, format!("{}{}{}", line(1), line(2), line(3)));
    }

    #[test]
    fn a_torn_line_that_cannot_be_saved_aside_is_kept_and_the_open_refused() {
        // The side copy's name is past the 255 bytes a file name may have: it cannot be
        // created, whoever runs the test (root included).
        let path = scratch(&format!("{}.log", "r".repeat(240)));
        let text = format!("{}{}", line(1), &line(2)[..30]);
        std::fs::write(&path, &text).unwrap();
        let err = ResultsLog::open(&path).err().expect("refused");
        let message = err.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("cannot be saved aside"), "{message}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "nothing cut");
    }

    #[test]
    fn a_last_line_past_the_scan_window_refuses_the_open_and_is_not_read_whole() {
        let path = scratch("huge-line.log");
        let text = format!("{}{}", line(1), "x".repeat(SCAN_MAX as usize + 10));
        std::fs::write(&path, &text).unwrap();
        let message = ResultsLog::open(&path).err().expect("refused").to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("no newline"), "{message}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), text.len() as u64);
        assert!(torn_files(&path).is_empty());
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

    #[cfg(unix)]
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

    /// A results file on disk, opened as another process would (its own descriptor and
    /// lock, its own log), whose next `fail` appends write half of what they were given
    /// and fail.
    struct Flaky {
        file: FileSink,
        fail: Arc<AtomicU32>,
    }

    impl ResultsSink for Flaky {
        fn lock(&mut self) -> io::Result<()> {
            self.file.lock()
        }
        fn unlock(&mut self) {
            self.file.unlock()
        }
        fn len(&mut self) -> io::Result<Option<u64>> {
            self.file.len()
        }
        fn ends_line(&mut self, len: u64) -> io::Result<bool> {
            self.file.ends_line(len)
        }
        fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
            if take_one(&self.fail) {
                self.file.append(&bytes[..bytes.len() / 2])?;
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.file.append(bytes)
        }
        fn sync(&mut self) -> io::Result<()> {
            self.file.sync()
        }
        fn truncate(&mut self, len: u64) -> io::Result<()> {
            self.file.truncate(len)
        }
    }

    /// A writer of `path` of its own, as another process is: (its log, its failures).
    fn process(path: &Path) -> (ResultsLog, Arc<AtomicU32>) {
        let fail = Arc::new(AtomicU32::new(0));
        let (file, _) = FileSink::open(path).unwrap();
        let sink = Flaky {
            file,
            fail: Arc::clone(&fail),
        };
        (ResultsLog::with_sink(path, Box::new(sink)), fail)
    }

    /// The match ids of the file's lines, each of which must decode.
    fn ids(path: &Path) -> Vec<u32> {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(text.ends_with('\n'), "{text}");
        text.lines()
            .map(|l| {
                let framed =
                    result_line::decode(l).unwrap_or_else(|e| panic!("a broken line {l:?}: {e:?}"));
                framed.origin.unwrap().match_id
            })
            .collect()
    }

    #[test]
    fn two_writers_of_one_file_never_cut_nor_glue_each_others_lines() {
        // A rolling restart: A drains and still appends, B has opened the same file.
        let path = scratch("two-writers.log");
        let (a, a_fails) = process(&path);
        let (b, _) = process(&path);
        a.append_durable(line(1).as_bytes()).unwrap();
        b.append_durable(line(2).as_bytes()).unwrap();
        a_fails.store(1, Ordering::Release);
        assert!(a.append_durable(line(3).as_bytes()).is_err());
        b.append_durable(line(4).as_bytes()).unwrap();
        // A's retry cuts back to the file's length now, not to where A last left it.
        a.append_durable(line(3).as_bytes()).unwrap();
        b.append_durable(line(5).as_bytes()).unwrap();
        assert_eq!(ids(&path), [1, 2, 4, 3, 5]);
    }

    #[test]
    fn two_writers_appending_at_once_with_failures_leave_every_line_once_and_whole() {
        let path = scratch("two-writers-at-once.log");
        let write = |first: u32, fail_every: u32| {
            let (log, fails) = process(&path);
            std::thread::spawn(move || {
                for id in first..first + 200 {
                    if fail_every > 0 && id % fail_every == 0 {
                        fails.store(1, Ordering::Release);
                    }
                    while log.append_durable(line(id).as_bytes()).is_err() {}
                }
            })
        };
        let a = write(1000, 3);
        let b = write(2000, 0);
        a.join().unwrap();
        b.join().unwrap();
        let mut found = ids(&path);
        found.sort_unstable();
        let expected: Vec<u32> = (1000..1200).chain(2000..2200).collect();
        assert_eq!(found, expected, "each line once");
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
        fn len(&mut self) -> io::Result<Option<u64>> {
            Ok(Some(self.bytes.lock().unwrap().len() as u64))
        }
        fn ends_line(&mut self, len: u64) -> io::Result<bool> {
            let file = self.bytes.lock().unwrap();
            Ok(len == 0 || file[len as usize - 1] == b'\n')
        }
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
        let log = ResultsLog::with_sink(Path::new("mem"), Box::new(disk.clone()));
        log.append_durable(line(1).as_bytes()).unwrap();
        disk.fail_writes.store(1, Ordering::Release);
        assert!(log.append_durable(line(2).as_bytes()).is_err());
        // The half line it wrote is cut off at once.
        assert_eq!(*disk.bytes.lock().unwrap(), line(1).as_bytes());
        log.append_durable(line(2).as_bytes()).unwrap();
        // Written, then its sync fails: it is written again, once.
        disk.fail_syncs.store(1, Ordering::Release);
        assert!(log.append_durable(line(3).as_bytes()).is_err());
        log.append_durable(line(3).as_bytes()).unwrap();
        let text = String::from_utf8(disk.bytes.lock().unwrap().clone()).unwrap();
        assert_eq!(text, format!("{}{}{}", line(1), line(2), line(3)));
    }
}
