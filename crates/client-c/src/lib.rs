//! tickforge's client session ([`tickforge_client::Session`]) behind a C ABI, for game
//! engines (Unity, Unreal, Godot) and any language with a C FFI.
//!
//! Built as a `cdylib` (`libtickforge_client_c.so`, `tickforge_client_c.dll`,
//! `libtickforge_client_c.dylib`) and a `staticlib`; `include/tickforge.h` is generated from
//! this file by cbindgen (`tests/header.rs` fails when it is stale). `docs/engines.md`
//! says how each engine loads it.
//!
//! ```text
//! tf_session_create(token, len, "shooter", TF_MODE_SOCKET, now, &s)
//! every frame / tick:
//!     tf_session_update(s, now)             receive, time out, send (own socket)
//!     while tf_session_poll_event(s, &ev) gives an event: WELCOME / EPOCH / GAME /
//!                                                          SNAPSHOT / DISCONNECTED
//!     tf_session_entity_newest(s, id, ...)  the replica's newest state of an entity
//!     tf_session_send_input(s, now, bytes, len)
//! tf_session_disconnect(s, now); tf_session_free(s)
//! ```
//!
//! With `TF_MODE_ENGINE_IO` the engine owns the socket: it hands each datagram from the
//! server to `tf_session_receive` and sends what `tf_session_next_datagram` gives.
//!
//! Rules the boundary keeps: no panic crosses it (each entry point catches one, returns
//! [`tf_result::TF_ERR_PANIC`] and the session refuses further calls); every failure is a
//! [`tf_result`] code with a message ([`tf_last_error`]); null pointers are errors; a
//! session is used from one thread at a time and calls nothing back. Once warm, updates
//! allocate nothing: buffers are made with the session.

#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::{c_char, CStr, CString};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tickforge_client::{compact_link_config, Ended, Session, SessionConfig, SessionEvent};
use tickforge_proto::netcode::token::ConnectToken;
use tickforge_proto::{DisconnectReason, MAX_PACKET_BYTES};
use tickforge_replication::{NetId, Schema};
use tickforge_sim::{Tick, ViewTime};

/// The session owns a non-blocking UDP socket: `tf_session_update` receives, times out
/// and sends.
pub const TF_MODE_SOCKET: u32 = 0;
/// The engine owns the socket: it passes each datagram from the server to
/// `tf_session_receive` and sends every datagram `tf_session_next_datagram` gives to the
/// server's address (`tf_session_server_addr`). `tf_session_update` only times out.
pub const TF_MODE_ENGINE_IO: u32 = 1;

/// Bytes of one shooter input (`tf_shooter_encode_input`).
pub const TF_SHOOTER_INPUT_BYTES: usize = 7;
/// Shooter input button: jump when on the ground.
pub const TF_SHOOTER_JUMP: u8 = 1;
/// Shooter input button: fire the held weapon.
pub const TF_SHOOTER_FIRE: u8 = 2;
/// Shooter input button: crouch while held.
pub const TF_SHOOTER_CROUCH: u8 = 4;
/// Shooter state flag: standing on a floor.
pub const TF_SHOOTER_ON_GROUND: u8 = 1;
/// Shooter state flag: crouched.
pub const TF_SHOOTER_CROUCHED: u8 = 2;
/// Shooter state flag: alive (clear for a dead player whose body is still shown).
pub const TF_SHOOTER_ALIVE: u8 = 4;
/// Most lanes (replicated integer fields) an entity has in any schema.
pub const TF_MAX_LANES: usize = 16;
/// Size of a buffer that holds any datagram `tf_session_next_datagram` gives.
pub const TF_MAX_DATAGRAM_BYTES: usize = 2048;

// The header's constants are literals (cbindgen copies only those): each is the game's.
const _: () = {
    assert!(TF_SHOOTER_INPUT_BYTES == tickforge_shooter::cmd::CMD_BYTES);
    assert!(TF_SHOOTER_JUMP == tickforge_game::buttons::JUMP);
    assert!(TF_SHOOTER_FIRE == tickforge_game::buttons::FIRE);
    assert!(TF_SHOOTER_CROUCH == tickforge_game::buttons::CROUCH);
    assert!(TF_SHOOTER_ON_GROUND == tickforge_shooter::flags::ON_GROUND);
    assert!(TF_SHOOTER_CROUCHED == tickforge_shooter::flags::CROUCHED);
    assert!(TF_SHOOTER_ALIVE == tickforge_shooter::flags::ALIVE);
    assert!(TF_MAX_LANES == tickforge_replication::MAX_LANES);
    assert!(TF_MAX_DATAGRAM_BYTES >= MAX_PACKET_BYTES + 64);
};

/// Events held for the caller at most; past it, events are dropped and counted
/// (`tf_stats.events_dropped`). A caller that polls every frame never comes near it.
const MAX_QUEUED_EVENTS: usize = 4096;
/// Bytes of game events held for the caller at most (as [`MAX_QUEUED_EVENTS`]).
const MAX_QUEUED_GAME_BYTES: usize = 1 << 20;

/// What a call returns: `TF_OK` (0) or a negative error; `tf_last_error` has the message.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum tf_result {
    /// It worked.
    TF_OK = 0,
    /// A required pointer was null.
    TF_ERR_NULL = -1,
    /// An argument is out of range (a mode, a time that is not finite, a bad id).
    TF_ERR_INVALID_ARGUMENT = -2,
    /// The connect token does not parse.
    TF_ERR_BAD_TOKEN = -3,
    /// The connect token has expired.
    TF_ERR_TOKEN_EXPIRED = -4,
    /// The game name is not one this library knows (`"shooter"`, `"ctf"`).
    TF_ERR_UNKNOWN_GAME = -5,
    /// A socket call failed (binding, or a send the OS refused).
    TF_ERR_IO = -6,
    /// The call does not fit the session's mode (`tf_session_receive` on a session that
    /// owns its socket, say).
    TF_ERR_WRONG_MODE = -7,
    /// The session is not connected (not yet, or no longer): nothing was sent.
    TF_ERR_NOT_CONNECTED = -8,
    /// The entity is not in view, or the welcome has not come yet.
    TF_ERR_NOT_FOUND = -9,
    /// The caller's buffer is too small; the size needed is in the length out-parameter.
    TF_ERR_BUFFER_TOO_SMALL = -10,
    /// The message was refused: too large, or too many unacknowledged.
    TF_ERR_MESSAGE_REFUSED = -11,
    /// A panic was caught inside the library: the session refuses every further call
    /// but `tf_session_free`. A bug: please report it with the message.
    TF_ERR_PANIC = -12,
    /// The input is too large for one packet.
    TF_ERR_TOO_LARGE = -13,
}

/// The kind of a [`tf_event`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum tf_event_kind {
    /// No event: the queue is empty.
    TF_EVENT_NONE = 0,
    /// Seated in a match: `seat`, `seats`, `entities`, `tick_hz`, `match_id`, `epoch`.
    TF_EVENT_WELCOME = 1,
    /// The match started over under `epoch`; ticks count from 0 again and the replica
    /// was emptied.
    TF_EVENT_EPOCH = 2,
    /// One of the game's reliable events: `data`, `len` (the game's own bytes).
    TF_EVENT_GAME = 3,
    /// A snapshot of server tick `tick` was read into the replica; `input_ack` is the
    /// newest input the server had applied.
    TF_EVENT_SNAPSHOT = 4,
    /// The session ended: `reason` and `text`. Nothing more comes.
    TF_EVENT_DISCONNECTED = 5,
}

/// Why a session ended (`tf_event.reason` of a `TF_EVENT_DISCONNECTED`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum tf_disconnect_reason {
    /// Not a disconnect.
    TF_REASON_NONE = 0,
    /// Nothing heard from the server for the token's timeout.
    TF_REASON_TIMED_OUT = 1,
    /// The server never answered the connection request.
    TF_REASON_CONNECT_TIMED_OUT = 2,
    /// The server sent a challenge but never confirmed the response.
    TF_REASON_RESPONSE_TIMED_OUT = 3,
    /// The token expired before the connection was made.
    TF_REASON_TOKEN_EXPIRED = 4,
    /// The token was refused as invalid.
    TF_REASON_INVALID_TOKEN = 5,
    /// The server had no free slot.
    TF_REASON_SERVER_FULL = 6,
    /// The server refused this client (no such match, or the match is full).
    TF_REASON_REFUSED = 7,
    /// The server ended the connection (shutdown, match over, kicked).
    TF_REASON_SERVER_CLOSED = 8,
    /// This client ended it (`tf_session_disconnect`): the clean end.
    TF_REASON_CLIENT_CLOSED = 9,
    /// The same address connected again with a new session.
    TF_REASON_REPLACED = 10,
    /// A side broke the protocol.
    TF_REASON_MISBEHAVED = 11,
    /// The match plays another game (its schema is not this session's).
    TF_REASON_WRONG_SCHEMA = 12,
    /// The welcome named a match this client cannot hold.
    TF_REASON_BAD_WELCOME = 13,
}

/// One event from `tf_session_poll_event`. Fields not named by its kind are 0 / null.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct tf_event {
    /// What happened.
    pub kind: tf_event_kind,
    /// `TF_EVENT_DISCONNECTED`: why.
    pub reason: tf_disconnect_reason,
    /// `TF_EVENT_WELCOME`: the match.
    pub match_id: u32,
    /// `TF_EVENT_WELCOME`, `TF_EVENT_EPOCH`: the match's run (0: its first).
    pub epoch: u32,
    /// `TF_EVENT_SNAPSHOT`: the server tick.
    pub tick: u32,
    /// `TF_EVENT_SNAPSHOT`: the newest input sequence the server had applied.
    pub input_ack: u32,
    /// `TF_EVENT_WELCOME`: this client's seat (the shooter's entity id of its player).
    pub seat: u16,
    /// `TF_EVENT_WELCOME`: seats in the match.
    pub seats: u16,
    /// `TF_EVENT_WELCOME`: entity ids the match uses (`0..entities`).
    pub entities: u16,
    /// `TF_EVENT_WELCOME`: the match's tick rate.
    pub tick_hz: u16,
    /// `TF_EVENT_GAME`: the event's bytes, valid until the next call on this session
    /// other than a read (`tf_session_poll_event`'s next call included).
    pub data: *const u8,
    /// `TF_EVENT_GAME`: bytes at `data`.
    pub len: usize,
    /// `TF_EVENT_DISCONNECTED`: the reason in words (NUL-terminated, valid until
    /// `tf_session_free`).
    pub text: *const c_char,
}

/// The session's measurements, from `tf_session_stats`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct tf_stats {
    /// Smoothed round trip, milliseconds (includes the server's wait for its next tick).
    pub rtt_ms: f64,
    /// Smoothed round-trip deviation, milliseconds.
    pub jitter_ms: f64,
    /// Share of this client's packets presumed lost, 0 to 1.
    pub loss: f64,
    /// Jitter of snapshot arrivals against the server's tick clock, milliseconds.
    pub snapshot_jitter_ms: f64,
    /// The interpolation delay the session shows the world behind the server, ticks: it
    /// adapts to the snapshots' jitter and loss.
    pub interp_delay_ticks: f64,
    /// Snapshots read into the replica.
    pub snapshots: u64,
    /// Snapshots refused (undecodable).
    pub bad_snapshots: u64,
    /// Reliable events from the server (welcome, epochs, game events).
    pub events: u64,
    /// Datagrams received.
    pub packets_received: u64,
    /// Bytes of datagrams received.
    pub bytes_received: u64,
    /// Datagrams sent.
    pub packets_sent: u64,
    /// Bytes of datagrams sent.
    pub bytes_sent: u64,
    /// Inputs sent.
    pub inputs: u64,
    /// Events dropped because the caller left too many unpolled.
    pub events_dropped: u64,
    /// Datagrams the OS refused to send (own-socket mode) or the engine never took.
    pub send_errors: u64,
    /// The newest snapshot tick read in this run (0 before any).
    pub newest_tick: u32,
    /// The match's current run.
    pub epoch: u32,
    /// 1 while the connection is up.
    pub connected: u32,
    /// 1 once the welcome came (the replica holds entities from then on).
    pub welcomed: u32,
}

/// One shooter player as the replica holds it (`tf_shooter_entity_newest`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct tf_shooter_state {
    /// Feet position, metres.
    pub x: f32,
    /// Feet position, metres.
    pub y: f32,
    /// Feet position (up), metres.
    pub z: f32,
    /// Velocity, m/s.
    pub vx: f32,
    /// Velocity, m/s.
    pub vy: f32,
    /// Velocity (up), m/s.
    pub vz: f32,
    /// View yaw, degrees, 0 to 360 (0: +x, 90: +y).
    pub yaw_deg: f32,
    /// View pitch, degrees, −90 to 90 (up positive).
    pub pitch_deg: f32,
    /// The server tick of this state.
    pub tick: u32,
    /// `TF_SHOOTER_ON_GROUND`, `TF_SHOOTER_CROUCHED`, `TF_SHOOTER_ALIVE` bits.
    pub flags: u8,
    /// Health points.
    pub health: u8,
    /// Weapon state (the game's ammo count).
    pub weapon: u8,
    /// 1 when `flags` has `TF_SHOOTER_ALIVE`.
    pub alive: u8,
}

/// An event held for the caller; a game event's bytes are in `Ffi::game_bytes`.
#[derive(Clone, Copy)]
struct Queued {
    event: tf_event,
    game_at: usize,
}

/// Where datagrams come from and go.
enum Io {
    Socket(UdpSocket),
    Engine,
}

/// An opaque client session: made by `tf_session_create`, freed by `tf_session_free`.
/// One thread at a time.
pub struct tf_session {
    session: Session,
    io: Io,
    /// The caller's clock (`now_s`) at creation, and the instant it stands for.
    epoch_s: f64,
    epoch: Instant,
    /// The latest instant handed to the session: time never runs backwards for it.
    last: Instant,
    queue: VecDeque<Queued>,
    game_bytes: Vec<u8>,
    events_dropped: u64,
    send_errors: u64,
    /// Receive and transmit buffers.
    rx: Vec<u8>,
    tx: Vec<u8>,
    /// In engine mode: a datagram `tf_session_next_datagram` could not hand out yet.
    tx_pending: bool,
    /// An input went out since the last update: its packet carried the acks and messages.
    sent_since_update: bool,
    disconnect_text: CString,
    last_error: CString,
    poisoned: bool,
}

thread_local! {
    /// The last error of a call without a session (`tf_session_create`), for
    /// `tf_last_error(NULL)`.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// A failure: its code and message.
struct Fail(tf_result, String);

type Res<T = ()> = Result<T, Fail>;

fn fail<T>(code: tf_result, msg: impl Into<String>) -> Res<T> {
    Err(Fail(code, msg.into()))
}

fn to_cstring(msg: String) -> CString {
    CString::new(msg.replace('\0', " ")).unwrap_or_default()
}

fn set_thread_error(msg: String) {
    LAST_ERROR.with(|e| *e.borrow_mut() = to_cstring(msg));
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_string()
    }
}

/// Runs `f` on the session at `s`: a null or poisoned session, a failure and a panic
/// each become an error code with the message kept for `tf_last_error`.
///
/// # Safety
/// `s` is null or a live session from `tf_session_create`, used by no other thread.
unsafe fn with_session(s: *mut tf_session, f: impl FnOnce(&mut tf_session) -> Res) -> tf_result {
    if s.is_null() {
        set_thread_error("the session is null".to_string());
        return tf_result::TF_ERR_NULL;
    }
    // SAFETY: the caller passes a live session, used from this thread only.
    let this = unsafe { &mut *s };
    if this.poisoned {
        return tf_result::TF_ERR_PANIC;
    }
    match catch_unwind(AssertUnwindSafe(|| f(&mut *this))) {
        Ok(Ok(())) => tf_result::TF_OK,
        Ok(Err(Fail(code, msg))) => {
            this.last_error = to_cstring(msg);
            code
        }
        Err(p) => {
            this.poisoned = true;
            this.last_error = to_cstring(format!("panic inside tickforge: {}", panic_text(&*p)));
            tf_result::TF_ERR_PANIC
        }
    }
}

/// Runs `f`, which needs no session, as [`with_session`] does.
fn guarded(f: impl FnOnce() -> Res) -> tf_result {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => tf_result::TF_OK,
        Ok(Err(Fail(code, msg))) => {
            set_thread_error(msg);
            code
        }
        Err(p) => {
            set_thread_error(format!("panic inside tickforge: {}", panic_text(&*p)));
            tf_result::TF_ERR_PANIC
        }
    }
}

/// The bytes at `ptr`, `len` long; null is an error unless `len` is 0.
///
/// # Safety
/// `ptr` is null or points at `len` readable bytes that outlive the call.
unsafe fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> Res<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return fail(tf_result::TF_ERR_NULL, format!("{what} is null"));
    }
    // SAFETY: the caller vouches for `len` readable bytes at `ptr`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Writes `v` to `out`, which must not be null.
///
/// # Safety
/// `out` is null or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, v: T, what: &str) -> Res {
    if out.is_null() {
        return fail(tf_result::TF_ERR_NULL, format!("{what} is null"));
    }
    // SAFETY: non-null, and the caller vouches it is writable.
    unsafe { out.write(v) };
    Ok(())
}

fn schema_of(game: &str) -> Option<&'static Schema> {
    match game {
        "shooter" => Some(tickforge_shooter::schema()),
        "ctf" => Some(tickforge_ctf::schema()),
        _ => None,
    }
}

fn reason_of(ended: Ended) -> tf_disconnect_reason {
    use tf_disconnect_reason::*;
    match ended {
        Ended::Transport(r) => match r {
            DisconnectReason::TimedOut => TF_REASON_TIMED_OUT,
            DisconnectReason::ConnectTimedOut => TF_REASON_CONNECT_TIMED_OUT,
            DisconnectReason::ResponseTimedOut => TF_REASON_RESPONSE_TIMED_OUT,
            DisconnectReason::TokenExpired => TF_REASON_TOKEN_EXPIRED,
            DisconnectReason::InvalidToken => TF_REASON_INVALID_TOKEN,
            DisconnectReason::ServerFull => TF_REASON_SERVER_FULL,
            DisconnectReason::Refused => TF_REASON_REFUSED,
            DisconnectReason::ServerClosed => TF_REASON_SERVER_CLOSED,
            DisconnectReason::ClientClosed => TF_REASON_CLIENT_CLOSED,
            DisconnectReason::Replaced => TF_REASON_REPLACED,
            DisconnectReason::Misbehaved => TF_REASON_MISBEHAVED,
        },
        Ended::WrongSchema { .. } => TF_REASON_WRONG_SCHEMA,
        Ended::BadWelcome(_) => TF_REASON_BAD_WELCOME,
    }
}

const EMPTY_EVENT: tf_event = tf_event {
    kind: tf_event_kind::TF_EVENT_NONE,
    reason: tf_disconnect_reason::TF_REASON_NONE,
    match_id: 0,
    epoch: 0,
    tick: 0,
    input_ack: 0,
    seat: 0,
    seats: 0,
    entities: 0,
    tick_hz: 0,
    data: std::ptr::null(),
    len: 0,
    text: std::ptr::null(),
};

impl tf_session {
    /// The instant the caller's clock `now_s` stands for; never before the last one.
    fn instant(&mut self, now_s: f64) -> Res<Instant> {
        if !now_s.is_finite() {
            return fail(tf_result::TF_ERR_INVALID_ARGUMENT, "now is not finite");
        }
        let since = (now_s - self.epoch_s).clamp(0.0, 1e9);
        let at = self.epoch + Duration::from_secs_f64(since);
        self.last = self.last.max(at);
        Ok(self.last)
    }

    /// Moves every event the session has into the caller's queue.
    fn drain(&mut self) {
        while let Some(e) = self.session.poll_event() {
            let mut event = EMPTY_EVENT;
            let mut game_at = 0;
            match e {
                SessionEvent::Welcome(w) => {
                    event.kind = tf_event_kind::TF_EVENT_WELCOME;
                    event.match_id = w.match_id;
                    event.seat = w.seat;
                    event.seats = w.seats;
                    event.entities = w.entities;
                    event.tick_hz = w.tick_hz;
                    event.epoch = w.epoch;
                }
                SessionEvent::Epoch { epoch } => {
                    event.kind = tf_event_kind::TF_EVENT_EPOCH;
                    event.epoch = epoch;
                }
                SessionEvent::Game(bytes) => {
                    if self.game_bytes.len() + bytes.len() > MAX_QUEUED_GAME_BYTES {
                        self.events_dropped += 1;
                        continue;
                    }
                    event.kind = tf_event_kind::TF_EVENT_GAME;
                    event.len = bytes.len();
                    game_at = self.game_bytes.len();
                    self.game_bytes.extend_from_slice(bytes);
                }
                SessionEvent::Snapshot {
                    tick, input_ack, ..
                } => {
                    event.kind = tf_event_kind::TF_EVENT_SNAPSHOT;
                    event.tick = tick;
                    event.input_ack = input_ack;
                }
                SessionEvent::Disconnected(ended) => {
                    event.kind = tf_event_kind::TF_EVENT_DISCONNECTED;
                    event.reason = reason_of(ended);
                    self.disconnect_text = to_cstring(ended.to_string());
                }
            }
            // The end is always kept: nothing comes after it.
            if self.queue.len() >= MAX_QUEUED_EVENTS
                && event.kind != tf_event_kind::TF_EVENT_DISCONNECTED
            {
                self.events_dropped += 1;
                continue;
            }
            self.queue.push_back(Queued { event, game_at });
        }
    }

    /// Before taking new datagrams: the bytes of events already polled are freed.
    fn begin(&mut self) {
        if self.queue.is_empty() {
            self.game_bytes.clear();
        }
    }

    /// Own-socket mode: sends everything the session has to send.
    fn flush(&mut self, now: Instant) {
        let Io::Socket(socket) = &self.io else {
            return;
        };
        while let Some(to) = self.session.poll_transmit(now, &mut self.tx) {
            if socket.send_to(&self.tx, to).is_err() {
                // A lost datagram: the protocol copes with loss.
                self.send_errors += 1;
            }
        }
    }

    /// Own-socket mode: every datagram waiting on the socket, each one's events queued.
    fn receive_all(&mut self, now: Instant) {
        // Out of `self` while its datagrams are handled (put back after).
        let Io::Socket(socket) = std::mem::replace(&mut self.io, Io::Engine) else {
            return;
        };
        loop {
            match socket.recv_from(&mut self.rx) {
                Ok((n, from)) => {
                    self.session.handle_datagram(now, from, &mut self.rx[..n]);
                    self.drain();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                // Windows reports an earlier send's ICMP unreachable on the next receive.
                Err(e) if e.kind() == ErrorKind::ConnectionReset => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        self.io = Io::Socket(socket);
    }
}

/// Creates a session that connects with the connect token `token` (`len` bytes, 2048 for
/// netcode 1.02, as the matchmaker handed it out) to a match of `game` (`"shooter"` or
/// `"ctf"`: the schema its snapshots are decoded with). `mode` is `TF_MODE_SOCKET` (the
/// session binds its own non-blocking UDP socket) or `TF_MODE_ENGINE_IO`. `now_s` is the
/// caller's clock in seconds (any origin, monotonic: the same clock every later call
/// passes). Connection requests start at the first `tf_session_update`.
///
/// On success `*out` holds the session (free it with `tf_session_free`). Errors:
/// `TF_ERR_NULL`, `TF_ERR_BAD_TOKEN`, `TF_ERR_TOKEN_EXPIRED`, `TF_ERR_UNKNOWN_GAME`,
/// `TF_ERR_INVALID_ARGUMENT` (mode, now), `TF_ERR_IO` (no socket); the message is in
/// `tf_last_error(NULL)`.
///
/// # Safety
/// `token` points at `len` readable bytes, `game` at a NUL-terminated string, `out` at a
/// writable pointer.
#[no_mangle]
pub unsafe extern "C" fn tf_session_create(
    token: *const u8,
    len: usize,
    game: *const c_char,
    mode: u32,
    now_s: f64,
    out: *mut *mut tf_session,
) -> tf_result {
    guarded(|| {
        if out.is_null() {
            return fail(tf_result::TF_ERR_NULL, "out is null");
        }
        // SAFETY: checked non-null; the caller vouches it is writable.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: the caller vouches for `len` bytes at `token`.
        let token = unsafe { bytes(token, len, "token") }?;
        if game.is_null() {
            return fail(tf_result::TF_ERR_NULL, "game is null");
        }
        // SAFETY: non-null, and the caller vouches for a NUL-terminated string.
        let game = unsafe { CStr::from_ptr(game) }.to_string_lossy();
        let Some(schema) = schema_of(&game) else {
            return fail(
                tf_result::TF_ERR_UNKNOWN_GAME,
                format!("unknown game {game:?}: this library knows \"shooter\" and \"ctf\""),
            );
        };
        if mode != TF_MODE_SOCKET && mode != TF_MODE_ENGINE_IO {
            return fail(
                tf_result::TF_ERR_INVALID_ARGUMENT,
                format!("mode {mode} is neither TF_MODE_SOCKET (0) nor TF_MODE_ENGINE_IO (1)"),
            );
        }
        if !now_s.is_finite() {
            return fail(tf_result::TF_ERR_INVALID_ARGUMENT, "now is not finite");
        }
        let token = ConnectToken::from_bytes(token).map_err(|e| {
            Fail(
                tf_result::TF_ERR_BAD_TOKEN,
                format!("the connect token is unusable: {e}"),
            )
        })?;
        let unix_now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if token.expire_timestamp <= unix_now {
            return fail(
                tf_result::TF_ERR_TOKEN_EXPIRED,
                format!(
                    "the connect token expired {} s ago: ask the matchmaker for a new one",
                    unix_now - token.expire_timestamp
                ),
            );
        }
        let io = if mode == TF_MODE_SOCKET {
            let server = token.server_addresses[0];
            let bind: SocketAddr = match server {
                SocketAddr::V4(v4) if v4.ip().is_loopback() => ([127, 0, 0, 1], 0).into(),
                SocketAddr::V4(_) => ([0, 0, 0, 0], 0).into(),
                SocketAddr::V6(v6) if v6.ip().is_loopback() => {
                    (std::net::Ipv6Addr::LOCALHOST, 0).into()
                }
                SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
            };
            let socket = UdpSocket::bind(bind)
                .and_then(|s| s.set_nonblocking(true).map(|()| s))
                .map_err(|e| {
                    Fail(
                        tf_result::TF_ERR_IO,
                        format!("binding a UDP socket to {bind}: {e}"),
                    )
                })?;
            Io::Socket(socket)
        } else {
            Io::Engine
        };
        let now = Instant::now();
        // The compact settings: a session within 128 KiB (its reliable link's windows and
        // the replica's history sized for one client, not a server's hundreds).
        let session = Session::with_link_config(
            token,
            schema,
            SessionConfig::COMPACT,
            compact_link_config(),
            now,
        )
        .map_err(|e| Fail(tf_result::TF_ERR_BAD_TOKEN, format!("the session: {e}")))?;
        let session = tf_session {
            session,
            io,
            epoch_s: now_s,
            epoch: now,
            last: now,
            queue: VecDeque::with_capacity(256),
            game_bytes: Vec::with_capacity(16 << 10),
            events_dropped: 0,
            send_errors: 0,
            rx: vec![0; TF_MAX_DATAGRAM_BYTES],
            tx: Vec::with_capacity(MAX_PACKET_BYTES.max(TF_MAX_DATAGRAM_BYTES)),
            tx_pending: false,
            sent_since_update: false,
            disconnect_text: CString::default(),
            last_error: CString::default(),
            poisoned: false,
        };
        // SAFETY: checked non-null above.
        unsafe { out.write(Box::into_raw(Box::new(session))) };
        Ok(())
    })
}

/// Frees a session (null: nothing). Its socket closes; call `tf_session_disconnect`
/// first to tell the server. Never fails.
///
/// # Safety
/// `s` is null or a session from `tf_session_create` not freed before; it is not used
/// after.
#[no_mangle]
pub unsafe extern "C" fn tf_session_free(s: *mut tf_session) {
    if s.is_null() {
        return;
    }
    // SAFETY: the caller passes a session from `tf_session_create`, once.
    let session = unsafe { Box::from_raw(s) };
    // A panic in a drop is swallowed: nothing crosses the boundary.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(session)));
}

/// Drives the session at the caller's time `now_s`: in `TF_MODE_SOCKET` it receives
/// every datagram waiting (non-blocking), handles timeouts and sends what is due
/// (connection requests, keep-alives; acks and queued messages when no input went out
/// since the last update); in `TF_MODE_ENGINE_IO` it does the same but receiving, and
/// what is due waits for `tf_session_next_datagram`. Call once a frame or tick, then
/// poll the events.
///
/// # Safety
/// `s` is a live session used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn tf_session_update(s: *mut tf_session, now_s: f64) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        let now = t.instant(now_s)?;
        t.begin();
        t.receive_all(now);
        t.session.handle_timeout(now);
        t.drain();
        // No input since the last update: a packet of its own carries the acks and any
        // messages queued.
        if !std::mem::take(&mut t.sent_since_update) {
            t.session.send_packet(now);
        }
        t.flush(now);
        Ok(())
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// `TF_MODE_ENGINE_IO`: hands in one datagram the engine received from the server at
/// `now_s`; its events come out of `tf_session_poll_event`. Errors: `TF_ERR_WRONG_MODE`
/// on a session with its own socket.
///
/// # Safety
/// `s` is a live session; `bytes` points at `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn tf_session_receive(
    s: *mut tf_session,
    now_s: f64,
    bytes: *const u8,
    len: usize,
) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        if !matches!(t.io, Io::Engine) {
            return fail(
                tf_result::TF_ERR_WRONG_MODE,
                "tf_session_receive needs TF_MODE_ENGINE_IO: this session owns its socket",
            );
        }
        // SAFETY: the caller vouches for `len` bytes.
        let data = unsafe { self::bytes(bytes, len, "bytes") }?;
        let now = t.instant(now_s)?;
        t.begin();
        if data.len() > t.rx.len() {
            // No tickforge datagram is this large: dropped, as a socket would.
            return Ok(());
        }
        let rx = &mut t.rx[..data.len()];
        rx.copy_from_slice(data);
        let from = t.session.server_addr();
        t.session.handle_datagram(now, from, rx);
        t.drain();
        Ok(())
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// `TF_MODE_ENGINE_IO`: writes the next datagram to send to the server into `buf`
/// (`cap` bytes; `TF_MAX_DATAGRAM_BYTES` always suffices) and its length into
/// `*out_len`; `*out_len` is 0 when nothing more is due. Call until 0 after every update,
/// input and disconnect. `TF_ERR_BUFFER_TOO_SMALL`: `*out_len` is the size needed, and
/// the datagram waits for the next call.
///
/// # Safety
/// `s` is a live session; `buf` points at `cap` writable bytes; `out_len` is writable.
#[no_mangle]
pub unsafe extern "C" fn tf_session_next_datagram(
    s: *mut tf_session,
    now_s: f64,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        if !matches!(t.io, Io::Engine) {
            return fail(
                tf_result::TF_ERR_WRONG_MODE,
                "tf_session_next_datagram needs TF_MODE_ENGINE_IO: this session sends itself",
            );
        }
        if out_len.is_null() {
            return fail(tf_result::TF_ERR_NULL, "out_len is null");
        }
        let now = t.instant(now_s)?;
        if !t.tx_pending {
            t.tx_pending = t.session.poll_transmit(now, &mut t.tx).is_some();
        }
        if !t.tx_pending {
            // SAFETY: checked non-null.
            unsafe { out_len.write(0) };
            return Ok(());
        }
        // SAFETY: checked non-null.
        unsafe { out_len.write(t.tx.len()) };
        if cap < t.tx.len() {
            return fail(
                tf_result::TF_ERR_BUFFER_TOO_SMALL,
                format!("the datagram is {} bytes; the buffer {cap}", t.tx.len()),
            );
        }
        if buf.is_null() {
            return fail(tf_result::TF_ERR_NULL, "buf is null");
        }
        // SAFETY: `buf` has `cap` ≥ len writable bytes, and is not our buffer.
        unsafe { std::ptr::copy_nonoverlapping(t.tx.as_ptr(), buf, t.tx.len()) };
        t.tx_pending = false;
        Ok(())
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// The server's address as text (`"127.0.0.1:40000"`, NUL-terminated) into `buf`
/// (`cap` bytes, 64 suffice): where `TF_MODE_ENGINE_IO` sends its datagrams.
///
/// # Safety
/// `s` is a live session; `buf` points at `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn tf_session_server_addr(
    s: *mut tf_session,
    buf: *mut c_char,
    cap: usize,
) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        if buf.is_null() {
            return fail(tf_result::TF_ERR_NULL, "buf is null");
        }
        let text = t.session.server_addr().to_string();
        if text.len() + 1 > cap {
            return fail(
                tf_result::TF_ERR_BUFFER_TOO_SMALL,
                format!("the address needs {} bytes", text.len() + 1),
            );
        }
        // SAFETY: `buf` has `cap` > len writable bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
            buf.add(text.len()).write(0);
        }
        Ok(())
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// Sends this tick's input at `now_s`: the game's bytes (`TF_SHOOTER_INPUT_BYTES` made
/// by `tf_shooter_encode_input` for the shooter), with acks and any messages due. The
/// server is told the player saw the replica's newest tick (what
/// `tf_session_entity_newest` shows); `tf_session_send_input_viewed` names another.
/// Errors: `TF_ERR_NOT_CONNECTED` (nothing sent), `TF_ERR_TOO_LARGE`.
///
/// # Safety
/// `s` is a live session; `bytes` points at `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn tf_session_send_input(
    s: *mut tf_session,
    now_s: f64,
    bytes: *const u8,
    len: usize,
) -> tf_result {
    // SAFETY: forwarded from the caller.
    unsafe { send_input(s, now_s, None, bytes, len) }
}

/// As `tf_session_send_input`, with the server tick the player was shown when making the
/// input (`view_tick`, fractional: 1200.5 is halfway from tick 1200 to 1201), which the
/// server rewinds shots to.
///
/// # Safety
/// As `tf_session_send_input`.
#[no_mangle]
pub unsafe extern "C" fn tf_session_send_input_viewed(
    s: *mut tf_session,
    now_s: f64,
    view_tick: f64,
    bytes: *const u8,
    len: usize,
) -> tf_result {
    if !view_tick.is_finite() {
        // SAFETY: forwarded from the caller.
        return unsafe {
            with_session(s, |_| {
                fail(
                    tf_result::TF_ERR_INVALID_ARGUMENT,
                    "view_tick is not finite",
                )
            })
        };
    }
    // SAFETY: forwarded from the caller.
    unsafe { send_input(s, now_s, Some(view_tick), bytes, len) }
}

/// # Safety
/// As `tf_session_send_input`.
unsafe fn send_input(
    s: *mut tf_session,
    now_s: f64,
    view_tick: Option<f64>,
    bytes: *const u8,
    len: usize,
) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        // SAFETY: the caller vouches for `len` bytes.
        let data = unsafe { self::bytes(bytes, len, "bytes") }?;
        if data.len() > MAX_PACKET_BYTES / 2 {
            return fail(
                tf_result::TF_ERR_TOO_LARGE,
                format!("an input of {} bytes does not fit a packet", data.len()),
            );
        }
        let now = t.instant(now_s)?;
        let view = match view_tick {
            Some(v) => tickforge_client::view_time(v),
            None => ViewTime::at(Tick(t.session.newest_tick())),
        };
        if t.session.send_input(now, view, data).is_none() {
            return fail(
                tf_result::TF_ERR_NOT_CONNECTED,
                "not connected: nothing sent",
            );
        }
        t.sent_since_update = true;
        t.flush(now);
        Ok(())
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// Queues a reliable message for the game (chat, a vote, a buy): it goes out with the
/// next input or update, resent until acknowledged. Errors: `TF_ERR_MESSAGE_REFUSED`
/// (too large, or too many unacknowledged), `TF_ERR_NOT_CONNECTED`.
///
/// # Safety
/// `s` is a live session; `bytes` points at `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn tf_session_send_message(
    s: *mut tf_session,
    bytes: *const u8,
    len: usize,
) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        // SAFETY: the caller vouches for `len` bytes.
        let data = unsafe { self::bytes(bytes, len, "bytes") }?;
        if t.session.ended().is_some() {
            return fail(tf_result::TF_ERR_NOT_CONNECTED, "the session has ended");
        }
        t.session.send_message(data).map_err(|e| {
            Fail(
                tf_result::TF_ERR_MESSAGE_REFUSED,
                format!("message refused: {e}"),
            )
        })
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// The next event into `*out`, in the order they happened; `out->kind` is
/// `TF_EVENT_NONE` when there is none. A `TF_EVENT_GAME`'s `data` stays valid until the
/// next call on this session other than a read.
///
/// # Safety
/// `s` is a live session; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn tf_session_poll_event(
    s: *mut tf_session,
    out: *mut tf_event,
) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        if out.is_null() {
            return fail(tf_result::TF_ERR_NULL, "out is null");
        }
        let mut event = match t.queue.pop_front() {
            Some(q) => {
                let mut e = q.event;
                if e.kind == tf_event_kind::TF_EVENT_GAME {
                    e.data = t.game_bytes[q.game_at..].as_ptr();
                }
                e
            }
            None => EMPTY_EVENT,
        };
        if event.kind == tf_event_kind::TF_EVENT_DISCONNECTED {
            event.text = t.disconnect_text.as_ptr();
        }
        // SAFETY: the caller vouches `out` is writable (null is refused).
        unsafe { put(out, event, "out") }
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// The replica's newest lanes (the schema's quantized integer fields, in schema order)
/// of entity `id` into `lanes` (`cap` entries; `TF_MAX_LANES` always suffice), their
/// count into `*out_n`. The newest state, not interpolated (`tf_session_entity_at` reads
/// at a render tick). Errors: `TF_ERR_NOT_FOUND` (not in view, or
/// before the welcome), `TF_ERR_BUFFER_TOO_SMALL` (`*out_n` is the count needed).
///
/// # Safety
/// `s` is a live session; `lanes` points at `cap` writable `int32_t`; `out_n` is writable.
#[no_mangle]
pub unsafe extern "C" fn tf_session_entity_newest(
    s: *mut tf_session,
    id: u16,
    lanes: *mut i32,
    cap: usize,
    out_n: *mut usize,
) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        let q = newest_lanes(t, id);
        // SAFETY: forwarded from the caller.
        unsafe { write_lanes(t, id, q, lanes, cap, out_n) }
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// Writes entity `id`'s lanes `q` (`None`: not in view) into the caller's `lanes` (`cap`
/// entries) and their count into `*out_n`: the one body of the lane reads.
///
/// # Safety
/// `lanes` points at `cap` writable `int32_t` (or is null); `out_n` is writable or null.
unsafe fn write_lanes(
    t: &tf_session,
    id: u16,
    q: Option<tickforge_replication::Lanes>,
    lanes: *mut i32,
    cap: usize,
    out_n: *mut usize,
) -> Res {
    if out_n.is_null() {
        return fail(tf_result::TF_ERR_NULL, "out_n is null");
    }
    let n = t.session.schema().lane_count();
    // SAFETY: checked non-null.
    unsafe { out_n.write(n) };
    let Some(q) = q else {
        return fail(
            tf_result::TF_ERR_NOT_FOUND,
            format!("entity {id} is not in view"),
        );
    };
    if cap < n {
        return fail(
            tf_result::TF_ERR_BUFFER_TOO_SMALL,
            format!("the schema has {n} lanes; the buffer {cap}"),
        );
    }
    if lanes.is_null() {
        return fail(tf_result::TF_ERR_NULL, "lanes is null");
    }
    // SAFETY: `lanes` has `cap` ≥ n writable entries.
    unsafe { std::ptr::copy_nonoverlapping(q.0.as_ptr(), lanes, n) };
    Ok(())
}

/// The newest lanes of `id` in the replica.
fn newest_lanes(t: &tf_session, id: u16) -> Option<tickforge_replication::Lanes> {
    t.session.replica()?.entity(NetId(id))
}

/// `id`'s lanes interpolated at `render_tick` (held at the newest past it).
fn lanes_at(t: &tf_session, id: u16, render_tick: f64) -> Option<tickforge_replication::Lanes> {
    if !render_tick.is_finite() {
        return None;
    }
    t.session.entity_at(NetId(id), render_tick)
}

/// The tick the session shows the world at, at `now_s`: the server's estimated tick less
/// the one-way trip and the adaptive interpolation delay, into `*out`. Render entities at
/// it with `tf_session_entity_at`, and pass it with inputs (`tf_session_send_input_viewed`)
/// so the server tests shots against what was shown. Errors: `TF_ERR_NOT_FOUND` before
/// the first snapshot.
///
/// # Safety
/// `s` is a live session; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn tf_session_render_tick(
    s: *mut tf_session,
    now_s: f64,
    out: *mut f64,
) -> tf_result {
    // SAFETY: forwarded from the caller.
    unsafe { write_tick(s, now_s, out, Session::render_tick) }
}

/// Reads a tick of the session at `now_s` (`read`: the render tick or the server-tick
/// estimate) into `*out`; `TF_ERR_NOT_FOUND` before the first snapshot.
///
/// # Safety
/// `s` is a live session; `out` is writable.
unsafe fn write_tick(
    s: *mut tf_session,
    now_s: f64,
    out: *mut f64,
    read: fn(&Session, Instant) -> Option<f64>,
) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        let now = t.instant(now_s)?;
        let Some(tick) = read(&t.session, now) else {
            return fail(tf_result::TF_ERR_NOT_FOUND, "no snapshot yet");
        };
        // SAFETY: the caller vouches `out` is writable (null is refused).
        unsafe { put(out, tick, "out") }
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// The server's tick as the session estimates it at `now_s` (a continuous value: clock
/// sync from the snapshots' ticks and arrival times, smoothed against jitter), into
/// `*out`. Errors: `TF_ERR_NOT_FOUND` before the first snapshot.
///
/// # Safety
/// `s` is a live session; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn tf_session_server_tick(
    s: *mut tf_session,
    now_s: f64,
    out: *mut f64,
) -> tf_result {
    // SAFETY: forwarded from the caller.
    unsafe { write_tick(s, now_s, out, Session::server_tick) }
}

/// Entity `id`'s lanes interpolated at `render_tick` (from `tf_session_render_tick`)
/// into `lanes` (`cap` entries), their count into `*out_n`: numeric fields linearly
/// between the two snapshots around it, angles the short way round, bytes from the
/// earlier; held at the newest state past it. Errors as `tf_session_entity_newest`.
///
/// # Safety
/// `s` is a live session; `lanes` points at `cap` writable `int32_t`; `out_n` is writable.
#[no_mangle]
pub unsafe extern "C" fn tf_session_entity_at(
    s: *mut tf_session,
    id: u16,
    render_tick: f64,
    lanes: *mut i32,
    cap: usize,
    out_n: *mut usize,
) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        let q = lanes_at(t, id, render_tick);
        // SAFETY: forwarded from the caller.
        unsafe { write_lanes(t, id, q, lanes, cap, out_n) }
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// The shooter's player `id` interpolated at `render_tick`, decoded into `*out` (its
/// `tick` is the render tick's whole part). Errors as `tf_shooter_entity_newest`.
///
/// # Safety
/// `s` is a live session; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn tf_shooter_entity_at(
    s: *mut tf_session,
    id: u16,
    render_tick: f64,
    out: *mut tf_shooter_state,
) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        if out.is_null() {
            return fail(tf_result::TF_ERR_NULL, "out is null");
        }
        if !std::ptr::eq(t.session.schema(), tickforge_shooter::schema()) {
            return fail(
                tf_result::TF_ERR_WRONG_MODE,
                "tf_shooter_entity_at needs a \"shooter\" session",
            );
        }
        let Some(q) = lanes_at(t, id, render_tick) else {
            return fail(
                tf_result::TF_ERR_NOT_FOUND,
                format!("entity {id} is not in view at tick {render_tick}"),
            );
        };
        let state = shooter_state(&q, render_tick.max(0.0) as u32);
        // SAFETY: the caller vouches `out` is writable (null is refused).
        unsafe { put(out, state, "out") }
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// The shooter's state of lanes `q`, at `tick`.
fn shooter_state(q: &tickforge_replication::Lanes, tick: u32) -> tf_shooter_state {
    let e = tickforge_shooter::EntityState::from_lanes(q);
    tf_shooter_state {
        x: e.position.x,
        y: e.position.y,
        z: e.position.z,
        vx: e.velocity.x,
        vy: e.velocity.y,
        vz: e.velocity.z,
        yaw_deg: f32::from(e.yaw) * (360.0 / 65536.0),
        pitch_deg: f32::from(e.pitch) * (360.0 / 65536.0),
        tick,
        flags: e.flags,
        health: e.health,
        weapon: e.weapon,
        alive: u8::from(e.flags & tickforge_shooter::flags::ALIVE != 0),
    }
}

/// The shooter's player `id` (its seat) as the replica's newest state holds it, decoded
/// into `*out` (not interpolated: see `tf_session_entity_newest`). Errors:
/// `TF_ERR_WRONG_MODE` on a session of another game, `TF_ERR_NOT_FOUND`.
///
/// # Safety
/// `s` is a live session; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn tf_shooter_entity_newest(
    s: *mut tf_session,
    id: u16,
    out: *mut tf_shooter_state,
) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        if out.is_null() {
            return fail(tf_result::TF_ERR_NULL, "out is null");
        }
        if !std::ptr::eq(t.session.schema(), tickforge_shooter::schema()) {
            return fail(
                tf_result::TF_ERR_WRONG_MODE,
                "tf_shooter_entity_newest needs a \"shooter\" session",
            );
        }
        let Some(q) = newest_lanes(t, id) else {
            return fail(
                tf_result::TF_ERR_NOT_FOUND,
                format!("entity {id} is not in view"),
            );
        };
        let tick = t
            .session
            .replica()
            .and_then(|r| r.entity_tick(NetId(id)))
            .unwrap_or(0);
        let state = shooter_state(&q, tick);
        // SAFETY: the caller vouches `out` is writable (null is refused).
        unsafe { put(out, state, "out") }
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// Encodes a shooter input into `out` (`cap` ≥ `TF_SHOOTER_INPUT_BYTES`), its length into
/// `*out_len`: `forward` and `side` −127 to 127, `buttons` `TF_SHOOTER_*` bits, the view
/// in degrees (yaw 0: +x, counter-clockwise; pitch up positive, clamped to ±89 by the
/// game).
///
/// # Safety
/// `out` points at `cap` writable bytes; `out_len` is writable.
#[no_mangle]
pub unsafe extern "C" fn tf_shooter_encode_input(
    forward: i8,
    side: i8,
    buttons: u8,
    yaw_deg: f32,
    pitch_deg: f32,
    out: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> tf_result {
    guarded(|| {
        if out.is_null() || out_len.is_null() {
            return fail(tf_result::TF_ERR_NULL, "out or out_len is null");
        }
        if !yaw_deg.is_finite() || !pitch_deg.is_finite() {
            return fail(tf_result::TF_ERR_INVALID_ARGUMENT, "an angle is not finite");
        }
        // SAFETY: checked non-null.
        unsafe { out_len.write(TF_SHOOTER_INPUT_BYTES) };
        if cap < TF_SHOOTER_INPUT_BYTES {
            return fail(
                tf_result::TF_ERR_BUFFER_TOO_SMALL,
                format!("an input is {TF_SHOOTER_INPUT_BYTES} bytes"),
            );
        }
        let turn = |deg: f32| (f64::from(deg) / 360.0 * 65536.0).round() as i64;
        let cmd = tickforge_game::UserCmd {
            forward,
            side,
            buttons,
            yaw: turn(yaw_deg).rem_euclid(65536) as u16,
            pitch: turn(pitch_deg.clamp(-90.0, 90.0)).clamp(-16384, 16384) as i16,
        };
        let bytes = tickforge_shooter::cmd::to_bytes(&cmd);
        // SAFETY: `out` has `cap` ≥ 7 writable bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, bytes.len()) };
        Ok(())
    })
}

/// The session's measurements into `*out`: round trip, jitter, loss, packets, bytes.
///
/// # Safety
/// `s` is a live session; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn tf_session_stats(s: *mut tf_session, out: *mut tf_stats) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        let link = t.session.link_stats();
        let st = t.session.stats();
        let stats = tf_stats {
            rtt_ms: link.rtt.as_secs_f64() * 1e3,
            jitter_ms: link.jitter.as_secs_f64() * 1e3,
            loss: f64::from(link.loss),
            snapshot_jitter_ms: st.snapshot_jitter.as_secs_f64() * 1e3,
            interp_delay_ticks: t.session.interp_delay_ticks(),
            snapshots: st.snapshots,
            bad_snapshots: st.bad_snapshots,
            events: st.events,
            packets_received: st.packets_received,
            bytes_received: st.bytes_received,
            packets_sent: st.packets_sent,
            bytes_sent: st.bytes_sent,
            inputs: st.inputs,
            events_dropped: t.events_dropped,
            send_errors: t.send_errors,
            newest_tick: t.session.newest_tick(),
            epoch: t.session.epoch(),
            connected: u32::from(t.session.is_connected()),
            welcomed: u32::from(t.session.welcome().is_some()),
        };
        // SAFETY: the caller vouches `out` is writable (null is refused).
        unsafe { put(out, stats, "out") }
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// Closes the connection at `now_s`: the server is told (own socket: sent now; engine
/// mode: drain `tf_session_next_datagram`), and `TF_EVENT_DISCONNECTED` with
/// `TF_REASON_CLIENT_CLOSED` comes out of the next poll (unless the session had already
/// ended). Calling it again does nothing.
///
/// # Safety
/// `s` is a live session.
#[no_mangle]
pub unsafe extern "C" fn tf_session_disconnect(s: *mut tf_session, now_s: f64) -> tf_result {
    let f = |t: &mut tf_session| -> Res {
        let now = t.instant(now_s)?;
        t.begin();
        t.session.disconnect();
        t.drain();
        t.flush(now);
        Ok(())
    };
    // SAFETY: forwarded from the caller.
    unsafe { with_session(s, f) }
}

/// The message of the last failed call on `s` (NUL-terminated, valid until the next
/// failing call on it); with `s` null, of the last failed call without a session on this
/// thread (`tf_session_create`). Empty when none. Never null.
///
/// # Safety
/// `s` is null or a live session.
#[no_mangle]
pub unsafe extern "C" fn tf_last_error(s: *const tf_session) -> *const c_char {
    if s.is_null() {
        return LAST_ERROR
            .try_with(|e| e.borrow().as_ptr())
            .unwrap_or(c"".as_ptr());
    }
    // SAFETY: the caller passes a live session.
    unsafe { (*s).last_error.as_ptr() }
}

/// A fixed description of `code` (NUL-terminated, static). Never null.
#[no_mangle]
pub extern "C" fn tf_error_message(code: i32) -> *const c_char {
    let text: &CStr = match code {
        0 => c"ok",
        -1 => c"a required pointer was null",
        -2 => c"an argument is out of range",
        -3 => c"the connect token does not parse",
        -4 => c"the connect token has expired",
        -5 => c"unknown game",
        -6 => c"a socket call failed",
        -7 => c"the call does not fit the session's mode or game",
        -8 => c"not connected",
        -9 => c"not found",
        -10 => c"the buffer is too small",
        -11 => c"the message was refused",
        -12 => c"a panic was caught inside tickforge; the session is unusable",
        -13 => c"too large",
        _ => c"unknown error code",
    };
    text.as_ptr()
}

/// The library's version (`"0.1.0"`, static, NUL-terminated): check it against the
/// header's at load time.
#[no_mangle]
pub extern "C" fn tf_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests;
