//! `serve --profile-s N`: a flame graph of the workers, from sampling inside the process.
//!
//! What it does: after the warm-up, samples every thread's stack on CPU time (SIGPROF at
//! [`SAMPLE_HZ`], the `pprof` crate) for N seconds, keeps the samples taken on the workers
//! (`tickforge-worker-N` threads), and writes them as a flame graph SVG; the server goes on
//! serving. The output file is checked at startup: a temporary file is made in its
//! directory then, and renamed over the output once the graph is written, so a graph is
//! never seen half written.
//!
//! What it does not do: split the workers. Linux keeps 15 bytes of a thread's name, so
//! every worker is `tickforge-worke`: their samples are one graph under `tickforge
//! workers`. It samples CPU time only: a worker asleep until its next deadline costs
//! nothing and is not in the graph. And the kernel checks the process's CPU timer on its
//! scheduler tick (CONFIG_HZ, often 250), so a worker gets at most about that many samples
//! a second of its CPU time, whatever [`SAMPLE_HZ`] asks: a lightly loaded worker (2% of a
//! core) gets a few samples a second, and wants a profile of a minute or more.
//!
//! The cost: each sample interrupts the thread that is on the CPU and walks its stack with
//! the DWARF unwinder, so the frame a sample lands in runs longer (in a release build on a
//! quiet host, a smoke bench's p99 worker frame went from about 0.15 ms to 0.21 ms while
//! sampling; its median did not move). Samples inside the unwinder itself (`libgcc`, `libunwind`) are dropped,
//! as re-entering it from the signal could deadlock. Resolving the samples' symbols and
//! drawing the graph afterwards runs on the profiling thread at the lowest priority (nice
//! 19), so it yields to the workers. The sampler's tables and the binary's symbols take a
//! few hundred megabytes of memory (a release server of 4 matches: 366 MB at most with a
//! profile, 15 MB without); the tables are made before the server starts (a few tenths of
//! a second, most of a second in a debug build) so that sampling starts when asked. Only
//! one profile runs in a process at a time.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};

use crate::RunId;

/// Samples a second of CPU time, per thread on the CPU. Not a multiple of the tick rate.
pub const SAMPLE_HZ: i32 = 997;

/// The longest profile: an hour.
const MAX_SECONDS: f64 = 3600.0;

/// The flags `--profile-s` and `--profile-out`, checked: how long to sample, and the file
/// that will hold the graph, ready to be written.
pub struct Prepared {
    length: Duration,
    #[cfg(all(unix, feature = "profile"))]
    out: sampler::Output,
}

/// The file name the graph gets without `--profile-out`, in the current directory.
pub fn default_file_name(run: RunId) -> PathBuf {
    PathBuf::from(format!("tickforge-profile-{run}.svg"))
}

/// Checks `--profile-s` and `--profile-out` before the server starts: `None` when no profile
/// is asked for. The output's directory must exist and be writable, and the output must
/// not be a directory; without `--profile-out` the file is
/// [`default_file_name`] in the current directory.
pub fn prepare(seconds: Option<f64>, out: Option<&Path>) -> Result<Option<Prepared>> {
    let Some(seconds) = seconds else {
        if out.is_some() {
            bail!("--profile-out: given without --profile-s, which says how long to sample");
        }
        return Ok(None);
    };
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= MAX_SECONDS) {
        bail!("--profile-s: expected seconds greater than 0, at most {MAX_SECONDS}, got {seconds}");
    }
    let length = Duration::from_secs_f64(seconds);
    #[cfg(all(unix, feature = "profile"))]
    {
        let out = sampler::Output::create(out)?;
        sampler::ready()?;
        Ok(Some(Prepared { length, out }))
    }
    #[cfg(not(all(unix, feature = "profile")))]
    {
        let _ = (length, out);
        bail!(
            "--profile-s: this build has no profiler (it needs Unix and the `profile` feature \
             of tickforge-server, on by default in the tickforge binary)"
        )
    }
}

impl Prepared {
    /// Starts the profile on its own thread: it waits `warmup`, samples for the length
    /// asked, writes the graph and says where on standard error. The graph's default name
    /// carries `run`.
    pub fn start(self, warmup: Duration, run: RunId) -> Result<Running> {
        #[cfg(all(unix, feature = "profile"))]
        {
            sampler::start(self, warmup, run)
        }
        #[cfg(not(all(unix, feature = "profile")))]
        {
            let _ = (warmup, run, self.length);
            unreachable!("prepare refuses --profile-s without a profiler")
        }
    }
}

/// A profile under way ([`Prepared::start`]).
pub struct Running {
    #[cfg(all(unix, feature = "profile"))]
    inner: sampler::Running,
}

impl Running {
    /// Ends the profile as the server stops: sampling stops now, and what was sampled so far
    /// is written (nothing, when sampling had not started). Waits for the graph's file.
    pub fn finish(self) {
        #[cfg(all(unix, feature = "profile"))]
        self.inner.finish();
    }
}

#[cfg(all(unix, feature = "profile"))]
mod sampler {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::{Arc, Condvar, Mutex};
    use std::thread::JoinHandle;
    use std::time::Instant;

    use anyhow::Context;

    /// Where a thread's samples are kept: the workers' threads, as Linux truncates their names.
    const WORKER_THREAD: &str = "tickforge-worke";

    /// The root of the graph: all the workers' samples.
    const ROOT: &str = "tickforge workers";

    /// The graph's file: the path asked for (or none: the default name, known once the run
    /// id is), and a temporary file beside it that becomes it.
    pub(super) struct Output {
        path: Option<PathBuf>,
        temp: tempfile::NamedTempFile,
    }

    impl Output {
        pub(super) fn create(path: Option<&Path>) -> Result<Output> {
            let flag = if path.is_some() {
                "--profile-out"
            } else {
                "--profile-s (writing to the current directory)"
            };
            let shown = path.map_or_else(|| ".".to_string(), |p| p.display().to_string());
            if path.is_some_and(Path::is_dir) {
                bail!("{flag}: {shown} is a directory; name the SVG file to write");
            }
            let dir = match path.and_then(Path::parent) {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let temp = tempfile::Builder::new()
                .prefix(".tickforge-profile-")
                .suffix(".svg.partial")
                .tempfile_in(&dir)
                .with_context(|| format!("{flag}: cannot write in {}", dir.display()))?;
            Ok(Output {
                path: path.map(Path::to_path_buf),
                temp,
            })
        }
    }

    /// Makes the sampler's tables (a hundred megabytes, most of a second to fill in a
    /// debug build) before the server starts, so that sampling starts on time: pprof makes
    /// them when first started, and again when stopped, ready for the next start.
    pub(super) fn ready() -> Result<()> {
        let guard = pprof::ProfilerGuardBuilder::default()
            .build()
            .context("--profile-s: starting the sampler")?;
        drop(guard);
        Ok(())
    }

    /// The stop flag the sampling thread waits on.
    #[derive(Default)]
    struct Stop {
        stopped: Mutex<bool>,
        cond: Condvar,
    }

    impl Stop {
        /// Waits `length` or until stopped; true when stopped.
        fn wait(&self, length: Duration) -> bool {
            let stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
            let (stopped, _) = self
                .cond
                .wait_timeout_while(stopped, length, |s| !*s)
                .unwrap_or_else(|e| e.into_inner());
            *stopped
        }

        fn stop(&self) {
            *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
            self.cond.notify_all();
        }
    }

    pub(super) struct Running {
        stop: Arc<Stop>,
        thread: JoinHandle<()>,
    }

    impl Running {
        pub(super) fn finish(self) {
            self.stop.stop();
            if self.thread.join().is_err() {
                eprintln!("tickforge serve: profile: the profiling thread panicked");
            }
        }
    }

    pub(super) fn start(
        prepared: Prepared,
        warmup: Duration,
        run: RunId,
    ) -> Result<super::Running> {
        let stop = Arc::new(Stop::default());
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("tickforge-profile".to_string())
                .spawn(move || {
                    if let Err(e) = profile(prepared, warmup, run, &stop) {
                        eprintln!("tickforge serve: profile: {e:#}");
                    }
                })
                .context("starting the profiling thread")?
        };
        Ok(super::Running {
            inner: Running { stop, thread },
        })
    }

    fn profile(prepared: Prepared, warmup: Duration, run: RunId, stop: &Stop) -> Result<()> {
        let Prepared { length, out } = prepared;
        if stop.wait(warmup) {
            eprintln!("tickforge serve: profile: the server stopped in the warm-up; no profile");
            return Ok(());
        }
        let guard = pprof::ProfilerGuardBuilder::default()
            .frequency(SAMPLE_HZ)
            .blocklist(&["libgcc", "libunwind"])
            .build()
            .context("starting the sampler")?;
        let started = Instant::now();
        let cut_short = stop.wait(length);
        let sampled = started.elapsed();
        // Sampling is over; symbols and drawing take a while: this thread now yields to
        // the workers (not before: under load it would start sampling late). On Linux
        // the nice value is a thread's own (elsewhere it would be the whole process's).
        #[cfg(target_os = "linux")]
        // SAFETY: setpriority(2) with constant arguments, on this thread only.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, 0, 19);
        }
        let mut report = guard
            .report()
            .frames_post_processor(|frames| {
                if frames.thread_name.starts_with(WORKER_THREAD) {
                    ROOT.clone_into(&mut frames.thread_name);
                    // The thread's start, below the worker's loop, is the same in every
                    // sample: the loop stands on the root.
                    let run = frames
                        .frames
                        .iter()
                        .position(|f| f.iter().any(is_worker_loop));
                    if let Some(run) = run {
                        frames.frames.truncate(run + 1);
                    }
                }
                // The sampler's own frames, below the signal (pprof drops the handler's
                // frame; a debug build keeps the unwinder's calls above it).
                let own = frames
                    .frames
                    .iter()
                    .take_while(|f| f.iter().any(is_sampler));
                let own = own.count();
                frames.frames.drain(..own);
            })
            .build()
            .context("reading the samples")?;
        drop(guard);
        let all: isize = report.data.values().sum();
        report.data.retain(|frames, _| frames.thread_name == ROOT);
        let kept: isize = report.data.values().sum();
        let path = out.path.clone().unwrap_or_else(|| default_file_name(run));
        if kept == 0 {
            bail!(
                "no sample on a worker in {:.1} s ({all} on other threads): the workers were \
                 idle; {} not written",
                sampled.as_secs_f64(),
                path.display()
            );
        }
        let mut options = pprof::flamegraph::Options::default();
        options.title = format!(
            "tickforge workers, run {run}: {:.1} s at {SAMPLE_HZ} Hz",
            sampled.as_secs_f64()
        );
        options.count_name = "samples".to_string();
        let mut temp = out.temp;
        // A temporary file is its owner's alone; the graph is for anyone who may read here.
        std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("writing {}", path.display()))?;
        report
            .flamegraph_with_options(temp.as_file_mut(), &mut options)
            .context("drawing the flame graph")?;
        temp.as_file_mut()
            .flush()
            .and_then(|()| temp.as_file().sync_all())
            .with_context(|| format!("writing {}", path.display()))?;
        temp.persist(&path)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "tickforge serve: profile of the workers, {:.1} s{}: {} ({kept} samples on the \
             workers, {} elsewhere)",
            sampled.as_secs_f64(),
            if cut_short {
                ", cut short as the server stopped"
            } else {
                ""
            },
            path.display(),
            all - kept
        );
        Ok(())
    }

    /// The worker's loop, `Worker::run`.
    fn is_worker_loop(symbol: &pprof::Symbol) -> bool {
        symbol.name().ends_with("::Worker::run")
    }

    /// A symbol of the sampler's signal handler or of the unwinder it calls.
    fn is_sampler(symbol: &pprof::Symbol) -> bool {
        let name = symbol.name();
        name.contains("pprof::") || name.starts_with("backtrace::")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(seconds: Option<f64>, out: Option<&Path>) -> String {
        match prepare(seconds, out) {
            Ok(_) => panic!("{seconds:?} {out:?} accepted"),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn no_profile_without_the_flag() {
        assert!(prepare(None, None).unwrap().is_none());
    }

    #[test]
    fn seconds_must_be_positive_and_finite() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e9] {
            let e = error(Some(bad), Some(Path::new("x.svg")));
            assert!(e.starts_with("--profile-s: "), "{e}");
        }
    }

    #[test]
    fn an_output_without_seconds_is_refused() {
        let e = error(None, Some(Path::new("x.svg")));
        assert!(e.starts_with("--profile-out: "), "{e}");
    }

    #[test]
    fn the_default_name_carries_the_run_id() {
        assert_eq!(
            default_file_name(RunId(0xab)),
            PathBuf::from("tickforge-profile-00000000000000ab.svg")
        );
    }

    #[cfg(all(unix, feature = "profile"))]
    #[test]
    fn an_unwritable_output_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let e = error(Some(1.0), Some(dir.path()));
        assert!(
            e.starts_with("--profile-out: ") && e.contains("directory"),
            "{e}"
        );
        let missing = dir.path().join("no-such-dir").join("p.svg");
        let e = error(Some(1.0), Some(&missing));
        assert!(e.starts_with("--profile-out: cannot write in"), "{e}");
    }

    #[cfg(all(unix, feature = "profile"))]
    #[test]
    fn a_writable_output_leaves_nothing_until_written() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("p.svg");
        let prepared = prepare(Some(1.0), Some(&out)).unwrap().unwrap();
        assert!(!out.exists());
        drop(prepared);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[cfg(not(all(unix, feature = "profile")))]
    #[test]
    fn a_build_without_the_profiler_says_so() {
        let e = error(Some(1.0), None);
        assert!(e.contains("no profiler"), "{e}");
    }
}
