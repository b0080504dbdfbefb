//! The C ABI end to end from Rust, against a real host on loopback: the engine-I/O mode
//! (the caller owns the socket) plays and disconnects cleanly, and a warm session
//! allocates nothing per update, event, input or read.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::CStr;
use std::net::{SocketAddr, UdpSocket};
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use tickforge_client_c::*;

mod common;

/// Counts the allocations of the threads that ask ([`counting`]): the host's own threads
/// allocate as they please.
struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counters are plain thread-locals.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ON.try_with(Cell::get).unwrap_or(false) {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        }
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ON.try_with(Cell::get).unwrap_or(false) {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        }
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Allocations this thread makes in `f`.
fn counting(f: impl FnOnce()) -> u64 {
    COUNT.with(|c| c.set(0));
    ON.with(|o| o.set(true));
    f();
    ON.with(|o| o.set(false));
    COUNT.with(Cell::get)
}

const TICK: Duration = Duration::from_micros(7812);
/// How long any phase may take before the test fails rather than hangs.
const BOUND: Duration = Duration::from_secs(10);

fn now_s(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64()
}

fn ok(s: *mut tf_session, r: tf_result) {
    if r != tf_result::TF_OK {
        // SAFETY: a live session or null.
        let msg = unsafe { CStr::from_ptr(tf_last_error(s)) };
        panic!("{r:?}: {msg:?}");
    }
}

/// A session for a seat in match `m`, in `mode`.
fn create(m: u32, mode: u32, t0: Instant) -> *mut tf_session {
    let token = common::token(m).to_bytes();
    let mut s = null_mut();
    // SAFETY: valid pointers.
    let r = unsafe {
        tf_session_create(
            token.as_ptr(),
            token.len(),
            c"shooter".as_ptr(),
            mode,
            now_s(t0),
            &mut s,
        )
    };
    ok(s, r);
    s
}

/// What the events so far said.
#[derive(Default, Debug)]
struct Seen {
    welcome: Option<tf_event>,
    snapshots: u64,
    ended: Option<tf_disconnect_reason>,
}

fn poll_all(s: *mut tf_session, seen: &mut Seen) {
    let mut ev = std::mem::MaybeUninit::<tf_event>::uninit();
    loop {
        // SAFETY: a live session; `ev` is written by the call.
        let ev = unsafe {
            ok(s, tf_session_poll_event(s, ev.as_mut_ptr()));
            ev.assume_init()
        };
        match ev.kind {
            tf_event_kind::TF_EVENT_NONE => return,
            tf_event_kind::TF_EVENT_WELCOME => seen.welcome = Some(ev),
            tf_event_kind::TF_EVENT_SNAPSHOT => seen.snapshots += 1,
            tf_event_kind::TF_EVENT_DISCONNECTED => seen.ended = Some(ev.reason),
            _ => {}
        }
    }
}

fn send_input(s: *mut tf_session, t0: Instant, yaw: f32) {
    let mut input = [0u8; TF_SHOOTER_INPUT_BYTES];
    let mut n = 0;
    // SAFETY: a live session and valid buffers.
    unsafe {
        ok(
            s,
            tf_shooter_encode_input(127, 0, 0, yaw, 0.0, input.as_mut_ptr(), input.len(), &mut n),
        );
        ok(s, tf_session_send_input(s, now_s(t0), input.as_ptr(), n));
    }
}

#[test]
fn engine_io_mode_plays_and_disconnects_cleanly() {
    let t0 = Instant::now();
    let s = create(1, TF_MODE_ENGINE_IO, t0);
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let mut addr = [0u8; 64];
    // SAFETY: a live session, a 64-byte buffer.
    ok(s, unsafe {
        tf_session_server_addr(s, addr.as_mut_ptr().cast(), addr.len())
    });
    let server: SocketAddr = CStr::from_bytes_until_nul(&addr)
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(server, common::server().addr);

    let mut rx = [0u8; 2048];
    let mut tx = [0u8; TF_MAX_DATAGRAM_BYTES];
    let send_all = |s: *mut tf_session, tx: &mut [u8]| -> usize {
        let mut sent = 0;
        loop {
            let mut n = 0;
            // SAFETY: a live session and a buffer of TF_MAX_DATAGRAM_BYTES.
            ok(s, unsafe {
                tf_session_next_datagram(s, now_s(t0), tx.as_mut_ptr(), tx.len(), &mut n)
            });
            if n == 0 {
                return sent;
            }
            socket.send_to(&tx[..n], server).unwrap();
            sent += 1;
        }
    };
    let mut seen = Seen::default();
    let mut welcomed_at = None;
    let mut snapshots_at_welcome = 0;
    let mut yaw = 0.0f32;
    let play = Duration::from_millis(1500);
    loop {
        let now = Instant::now();
        assert!(now - t0 < BOUND, "{seen:?}");
        if welcomed_at.is_some_and(|w| now - w >= play) {
            break;
        }
        while let Ok((n, from)) = socket.recv_from(&mut rx) {
            assert_eq!(from, server);
            // SAFETY: a live session, `n` bytes.
            ok(s, unsafe {
                tf_session_receive(s, now_s(t0), rx.as_ptr(), n)
            });
            poll_all(s, &mut seen);
        }
        // SAFETY: a live session.
        ok(s, unsafe { tf_session_update(s, now_s(t0)) });
        poll_all(s, &mut seen);
        assert_eq!(seen.ended, None);
        if seen.welcome.is_some() {
            if welcomed_at.is_none() {
                welcomed_at = Some(now);
                snapshots_at_welcome = seen.snapshots;
            }
            yaw += 90.0 / 128.0;
            send_input(s, t0, yaw);
        }
        send_all(s, &mut tx);
        std::thread::sleep(TICK.saturating_sub(now.elapsed()));
    }
    let played = welcomed_at.unwrap().elapsed().as_secs_f64();
    let welcome = seen.welcome.unwrap();
    assert_eq!(welcome.tick_hz, 128);
    let snapshots = (seen.snapshots - snapshots_at_welcome) as f64;
    assert!(
        snapshots >= 0.9 * 128.0 * played,
        "{snapshots} snapshots in {played} s"
    );
    let mut me = tf_shooter_state::default();
    // SAFETY: a live session.
    ok(s, unsafe {
        tf_shooter_entity_newest(s, welcome.seat, &mut me)
    });
    assert!(me.alive == 1 && me.health > 0, "{me:?}");
    let mut stats = tf_stats::default();
    // SAFETY: a live session.
    ok(s, unsafe { tf_session_stats(s, &mut stats) });
    assert!(stats.rtt_ms > 0.0 && stats.rtt_ms < 100.0, "{stats:?}");
    assert!(stats.inputs > 100 && stats.bytes_received > 0 && stats.bytes_sent > 0);
    assert_eq!((stats.connected, stats.welcomed), (1, 1));

    // SAFETY: a live session.
    ok(s, unsafe { tf_session_disconnect(s, now_s(t0)) });
    assert!(send_all(s, &mut tx) >= 1, "the server is told");
    poll_all(s, &mut seen);
    assert_eq!(
        seen.ended,
        Some(tf_disconnect_reason::TF_REASON_CLIENT_CLOSED)
    );
    let mut input = [0u8; TF_SHOOTER_INPUT_BYTES];
    // SAFETY: a live session.
    let r = unsafe { tf_session_send_input(s, now_s(t0), input.as_mut_ptr(), input.len()) };
    assert_eq!(r, tf_result::TF_ERR_NOT_CONNECTED);
    // SAFETY: freed once.
    unsafe { tf_session_free(s) };
}

#[test]
fn a_warm_session_allocates_nothing_per_tick() {
    let t0 = Instant::now();
    let s = create(2, TF_MODE_SOCKET, t0);
    let mut seen = Seen::default();
    let mut lanes = [0i32; TF_MAX_LANES];
    let mut me = tf_shooter_state::default();
    let mut stats = tf_stats::default();
    let mut yaw = 0.0f32;
    // One tick; true when its own player was in view.
    let mut tick = |seen: &mut Seen| -> bool {
        let now = Instant::now();
        // SAFETY: a live session.
        ok(s, unsafe { tf_session_update(s, now_s(t0)) });
        poll_all(s, seen);
        let mut in_view = false;
        if let Some(w) = seen.welcome {
            yaw += 90.0 / 128.0;
            send_input(s, t0, yaw);
            let mut n = 0;
            // SAFETY: a live session and valid buffers.
            unsafe {
                let r =
                    tf_session_entity_newest(s, w.seat, lanes.as_mut_ptr(), lanes.len(), &mut n);
                // Its player enters the snapshots a little after the welcome.
                in_view = r == tf_result::TF_OK;
                if in_view {
                    ok(s, tf_shooter_entity_newest(s, w.seat, &mut me));
                } else {
                    assert_eq!(r, tf_result::TF_ERR_NOT_FOUND);
                }
                ok(s, tf_session_stats(s, &mut stats));
            }
        }
        std::thread::sleep(TICK.saturating_sub(now.elapsed()));
        in_view
    };
    // Warm: welcomed, and a second of play.
    while seen.welcome.is_none() {
        assert!(t0.elapsed() < BOUND, "no welcome");
        tick(&mut seen);
    }
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_secs(1) {
        tick(&mut seen);
    }
    assert!(
        counting(|| drop(std::hint::black_box(vec![1u8; 8]))) > 0,
        "the counter counts"
    );
    let before = seen.snapshots;
    let measured = Instant::now();
    let mut in_view = 0;
    let mut ticks = 0;
    let allocations = counting(|| {
        while measured.elapsed() < Duration::from_secs(1) {
            ticks += 1;
            in_view += u32::from(tick(&mut seen));
        }
    });
    assert_eq!(
        in_view, ticks,
        "its own player in view every tick of the window"
    );
    assert!(
        seen.snapshots - before > 100,
        "the session played on: {seen:?}"
    );
    assert_eq!(allocations, 0, "allocations in a second of warm play");
    // SAFETY: a live session, freed once.
    unsafe {
        ok(s, tf_session_disconnect(s, now_s(t0)));
        tf_session_free(s);
    }
}
