//! Three languages play the shooter through the C library, end to end against a real
//! tickforge host on loopback (in this process): C (`examples/c/play.c`, built with the
//! system compiler), C# (`bindings/csharp/Tickforge.cs` with `examples/csharp/Play.cs`,
//! built with Mono's `mcs`, run with `mono`) and Python (`bindings/python/tickforge.py`
//! with `examples/python/play.py`, through ctypes).
//!
//! Each program connects with a connect token minted here, sends one input a tick for
//! [`PLAY_SECONDS`], disconnects, and prints a `RESULT` line; each test asserts it was
//! welcomed, received snapshots at ≥ 90% of the tick rate, and ended with a clean
//! disconnect (and that the program says the same with its exit status).
//!
//! A missing tool (cc, mcs, mono, python3) skips its test with the reason, unless
//! `TICKFORGE_REQUIRE_LANGS=1`, as CI sets it: then it fails.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

/// Seconds each program plays after its welcome.
const PLAY_SECONDS: f64 = 2.0;
/// The longest a program may run (compiling excluded) before it is killed and fails.
const RUN_BOUND: Duration = Duration::from_secs(40);

/// A connect token for a seat in match `m`, written to a file; its path.
fn token_file(m: u32, name: &str) -> PathBuf {
    let path = scratch().join(format!("{name}.token"));
    std::fs::write(&path, common::token(m).to_bytes()).unwrap();
    path
}

/// Where the built C library is: `cargo test` leaves it in `deps/` next to the test
/// binary (`cargo build` copies it up a directory).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    let up = deps.parent().unwrap().to_path_buf();
    [deps, up]
        .into_iter()
        .find(|d| d.join(lib_file()).exists())
        .unwrap_or_else(|| panic!("no {} next to {}", lib_file(), exe.display()))
}

fn lib_file() -> &'static str {
    if cfg!(windows) {
        "tickforge_client_c.dll"
    } else if cfg!(target_os = "macos") {
        "libtickforge_client_c.dylib"
    } else {
        "libtickforge_client_c.so"
    }
}

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("client-c-languages");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// True when `tool` runs; otherwise the test is skipped (false), or fails when
/// `TICKFORGE_REQUIRE_LANGS=1`.
fn have(tool: &str, version_arg: &str) -> bool {
    let ok = Command::new(tool)
        .arg(version_arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let required = std::env::var("TICKFORGE_REQUIRE_LANGS").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{tool} is not installed, and TICKFORGE_REQUIRE_LANGS=1 requires it"
        );
        // Straight to standard error: libtest shows a passing test's `eprintln!` only under
        // --nocapture, and a skip must show in every run.
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: {}: {tool} is not installed (TICKFORGE_REQUIRE_LANGS=1 makes this fail)",
            std::thread::current().name().unwrap_or("a test")
        );
    }
    ok
}

/// Runs a build step; panics with its output when it fails.
fn build(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What a program's `RESULT` line says.
#[derive(Debug)]
struct Played {
    welcome: bool,
    snapshots: f64,
    seconds: f64,
    tick_hz: f64,
    clean: bool,
}

/// Runs a player program, killing it after [`RUN_BOUND`]; asserts its exit status and
/// its `RESULT` line.
fn run_player(mut cmd: Command) -> Played {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if t0.elapsed() > RUN_BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} ran past {RUN_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    println!("{out}");
    eprintln!("{err}");
    assert!(status.success(), "{cmd:?}: {status}\n{out}\n{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line:\n{out}"));
    let field = |k: &str| -> f64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("{k} missing in {line}"))
            .parse()
            .unwrap()
    };
    let played = Played {
        welcome: field("welcome") == 1.0,
        snapshots: field("snapshots"),
        seconds: field("seconds"),
        tick_hz: field("tick_hz"),
        clean: field("clean") == 1.0,
    };
    assert!(played.welcome, "{line}");
    assert_eq!(played.tick_hz, 128.0, "{line}");
    assert!(played.seconds >= PLAY_SECONDS, "{line}");
    assert!(
        played.snapshots >= 0.9 * played.tick_hz * played.seconds,
        "snapshots below 90% of the tick rate: {line}"
    );
    assert!(played.clean, "no clean disconnect: {line}");
    assert!(
        out.lines().any(|l| l.starts_with("disconnected reason=9")),
        "no clean disconnect line:\n{out}"
    );
    played
}

#[test]
fn c_example_plays_the_shooter() {
    if !have("cc", "--version") {
        return;
    }
    let token = token_file(1, "c");
    let lib = lib_dir();
    let exe = scratch().join("play-c");
    build(
        Command::new("cc")
            .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-I"])
            .arg(crate_dir().join("include"))
            .arg(crate_dir().join("examples/c/play.c"))
            .arg("-L")
            .arg(&lib)
            .arg("-ltickforge_client_c")
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .arg("-o")
            .arg(&exe),
    );
    let mut cmd = Command::new(&exe);
    cmd.arg(&token).arg(PLAY_SECONDS.to_string());
    let played = run_player(cmd);
    println!("{played:?}");
}

#[test]
fn csharp_binding_plays_the_shooter_under_mono() {
    if !have("mcs", "--version") || !have("mono", "--version") {
        return;
    }
    let token = token_file(2, "csharp");
    let lib = lib_dir();
    let exe = scratch().join("Play.exe");
    build(
        Command::new("mcs")
            .arg(format!("-out:{}", exe.display()))
            .arg(crate_dir().join("bindings/csharp/Tickforge.cs"))
            .arg(crate_dir().join("examples/csharp/Play.cs")),
    );
    let mut cmd = Command::new("mono");
    cmd.arg(&exe)
        .arg(&token)
        .arg(PLAY_SECONDS.to_string())
        .env("LD_LIBRARY_PATH", &lib);
    let played = run_player(cmd);
    println!("{played:?}");
}

#[test]
fn python_ctypes_plays_the_shooter() {
    if !have("python3", "--version") {
        return;
    }
    let token = token_file(3, "python");
    let lib = lib_dir();
    let mut cmd = Command::new("python3");
    cmd.arg(crate_dir().join("examples/python/play.py"))
        .arg(&token)
        .arg(PLAY_SECONDS.to_string())
        .env("TICKFORGE_LIB", lib.join(lib_file()));
    let played = run_player(cmd);
    println!("{played:?}");
}
