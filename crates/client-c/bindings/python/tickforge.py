"""tickforge's client library (libtickforge_client_c) from Python, through ctypes.

It mirrors crates/client-c/include/tickforge.h. The library is found at $TICKFORGE_LIB,
else by the platform's name for it (libtickforge_client_c.so, .dylib, tickforge_client_c.dll)
on the loader's search path.

    s = tickforge.Session(open("token.bin", "rb").read(), "shooter")
    while playing:
        s.update(tickforge.now())
        for ev in s.events(): ...
        s.send_shooter_input(tickforge.now(), forward=127, yaw_deg=90.0)
    s.disconnect(tickforge.now()); s.close()

One session per thread; the library never calls back.
"""

import ctypes
import os
import sys
import time
from ctypes import (POINTER, Structure, byref, c_char_p, c_double, c_float, c_int8, c_int32,
                    c_size_t, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p)

OK = 0
ERR_NULL, ERR_INVALID_ARGUMENT, ERR_BAD_TOKEN, ERR_TOKEN_EXPIRED, ERR_UNKNOWN_GAME = -1, -2, -3, -4, -5
ERR_IO, ERR_WRONG_MODE, ERR_NOT_CONNECTED, ERR_NOT_FOUND, ERR_BUFFER_TOO_SMALL = -6, -7, -8, -9, -10
ERR_MESSAGE_REFUSED, ERR_PANIC, ERR_TOO_LARGE = -11, -12, -13

MODE_SOCKET, MODE_ENGINE_IO = 0, 1

EVENT_NONE, EVENT_WELCOME, EVENT_EPOCH, EVENT_GAME, EVENT_SNAPSHOT, EVENT_DISCONNECTED = range(6)

REASON_CLIENT_CLOSED = 9

SHOOTER_INPUT_BYTES = 7
SHOOTER_JUMP, SHOOTER_FIRE, SHOOTER_CROUCH = 1, 2, 4
SHOOTER_ON_GROUND, SHOOTER_CROUCHED, SHOOTER_ALIVE = 1, 2, 4
MAX_LANES = 16
MAX_DATAGRAM_BYTES = 2048


class Event(Structure):
    """tf_event: fields not named by its kind are 0."""
    _fields_ = [
        ("kind", c_uint32), ("reason", c_uint32), ("match_id", c_uint32), ("epoch", c_uint32),
        ("tick", c_uint32), ("input_ack", c_uint32), ("seat", c_uint16), ("seats", c_uint16),
        ("entities", c_uint16), ("tick_hz", c_uint16), ("data", c_void_p), ("len", c_size_t),
        ("text", c_char_p),
    ]

    def game_bytes(self):
        """A GAME event's bytes, copied."""
        return ctypes.string_at(self.data, self.len) if self.len else b""


class Stats(Structure):
    """tf_stats."""
    _fields_ = [
        ("rtt_ms", c_double), ("jitter_ms", c_double), ("loss", c_double),
        ("snapshot_jitter_ms", c_double), ("interp_delay_ticks", c_double),
        ("snapshots", c_uint64), ("bad_snapshots", c_uint64), ("events", c_uint64),
        ("packets_received", c_uint64), ("bytes_received", c_uint64),
        ("packets_sent", c_uint64), ("bytes_sent", c_uint64), ("inputs", c_uint64),
        ("events_dropped", c_uint64), ("send_errors", c_uint64),
        ("newest_tick", c_uint32), ("epoch", c_uint32), ("connected", c_uint32),
        ("welcomed", c_uint32),
    ]


class ShooterState(Structure):
    """tf_shooter_state: metres, degrees."""
    _fields_ = [
        ("x", c_float), ("y", c_float), ("z", c_float),
        ("vx", c_float), ("vy", c_float), ("vz", c_float),
        ("yaw_deg", c_float), ("pitch_deg", c_float), ("tick", c_uint32),
        ("flags", c_uint8), ("health", c_uint8), ("weapon", c_uint8), ("alive", c_uint8),
    ]


def _default_name():
    if sys.platform.startswith("win"):
        return "tickforge_client_c.dll"
    if sys.platform == "darwin":
        return "libtickforge_client_c.dylib"
    return "libtickforge_client_c.so"


def load(path=None):
    """The library, with every entry point's signature declared."""
    lib = ctypes.CDLL(path or os.environ.get("TICKFORGE_LIB") or _default_name())
    P = c_void_p
    sigs = {
        "tf_session_create": (c_int32, [c_char_p, c_size_t, c_char_p, c_uint32, c_double, POINTER(P)]),
        "tf_session_free": (None, [P]),
        "tf_session_update": (c_int32, [P, c_double]),
        "tf_session_receive": (c_int32, [P, c_double, c_char_p, c_size_t]),
        "tf_session_next_datagram": (c_int32, [P, c_double, c_void_p, c_size_t, POINTER(c_size_t)]),
        "tf_session_server_addr": (c_int32, [P, c_void_p, c_size_t]),
        "tf_session_send_input": (c_int32, [P, c_double, c_char_p, c_size_t]),
        "tf_session_send_input_viewed": (c_int32, [P, c_double, c_double, c_char_p, c_size_t]),
        "tf_session_send_message": (c_int32, [P, c_char_p, c_size_t]),
        "tf_session_poll_event": (c_int32, [P, POINTER(Event)]),
        "tf_session_entity_newest": (c_int32, [P, c_uint16, POINTER(c_int32), c_size_t, POINTER(c_size_t)]),
        "tf_shooter_entity_newest": (c_int32, [P, c_uint16, POINTER(ShooterState)]),
        "tf_session_render_tick": (c_int32, [P, c_double, POINTER(c_double)]),
        "tf_session_server_tick": (c_int32, [P, c_double, POINTER(c_double)]),
        "tf_session_entity_at": (c_int32, [P, c_uint16, c_double, POINTER(c_int32), c_size_t,
                                           POINTER(c_size_t)]),
        "tf_shooter_entity_at": (c_int32, [P, c_uint16, c_double, POINTER(ShooterState)]),
        "tf_shooter_encode_input": (c_int32, [c_int8, c_int8, c_uint8, c_float, c_float,
                                              c_void_p, c_size_t, POINTER(c_size_t)]),
        "tf_session_stats": (c_int32, [P, POINTER(Stats)]),
        "tf_session_disconnect": (c_int32, [P, c_double]),
        "tf_last_error": (c_char_p, [P]),
        "tf_error_message": (c_char_p, [c_int32]),
        "tf_version": (c_char_p, []),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


_lib = None


def lib():
    """The library, loaded once."""
    global _lib
    if _lib is None:
        _lib = load()
    return _lib


def now():
    """A monotonic clock in seconds, for the now arguments."""
    return time.monotonic()


class TickforgeError(Exception):
    """A failed call: .code and the library's message."""

    def __init__(self, code, message):
        super().__init__("%s (%d)" % (message, code))
        self.code = code


class Session:
    """One connection to a match (tf_session). close() frees it; disconnect() first."""

    def __init__(self, token, game="shooter", mode=MODE_SOCKET, at=None):
        self._lib = lib()
        handle = c_void_p()
        r = self._lib.tf_session_create(token, len(token), game.encode(), mode,
                                        now() if at is None else at, byref(handle))
        if r != OK:
            raise TickforgeError(r, self._lib.tf_last_error(None).decode())
        self._s = handle
        self._event = Event()
        self._input = (c_uint8 * SHOOTER_INPUT_BYTES)()
        self._input_len = c_size_t()

    def _check(self, r):
        if r != OK:
            raise TickforgeError(r, self._lib.tf_last_error(self._s).decode())

    def update(self, at):
        self._check(self._lib.tf_session_update(self._s, at))

    def events(self):
        """Every event waiting, in order (the Event is reused: copy what you keep)."""
        while True:
            self._check(self._lib.tf_session_poll_event(self._s, byref(self._event)))
            if self._event.kind == EVENT_NONE:
                return
            yield self._event

    def send_input(self, at, data):
        """False when not connected (nothing sent)."""
        r = self._lib.tf_session_send_input(self._s, at, data, len(data))
        if r == ERR_NOT_CONNECTED:
            return False
        self._check(r)
        return True

    def send_shooter_input(self, at, forward=0, side=0, buttons=0, yaw_deg=0.0, pitch_deg=0.0):
        self._check(self._lib.tf_shooter_encode_input(forward, side, buttons, yaw_deg, pitch_deg,
                                                      self._input, SHOOTER_INPUT_BYTES,
                                                      byref(self._input_len)))
        return self.send_input(at, bytes(self._input[:self._input_len.value]))

    def send_message(self, data):
        self._check(self._lib.tf_session_send_message(self._s, data, len(data)))

    def render_tick(self, at):
        """The tick to render the world at, at time `at`, or None before the first snapshot."""
        tick = c_double()
        r = self._lib.tf_session_render_tick(self._s, at, byref(tick))
        if r == ERR_NOT_FOUND:
            return None
        self._check(r)
        return tick.value

    def shooter_entity_at(self, entity_id, render_tick):
        """The shooter player's state interpolated at `render_tick`, or None when not in view."""
        st = ShooterState()
        r = self._lib.tf_shooter_entity_at(self._s, entity_id, render_tick, byref(st))
        if r == ERR_NOT_FOUND:
            return None
        self._check(r)
        return st

    def shooter_entity_newest(self, entity_id):
        """The shooter player's newest state (not interpolated), or None when not in view."""
        st = ShooterState()
        r = self._lib.tf_shooter_entity_newest(self._s, entity_id, byref(st))
        if r == ERR_NOT_FOUND:
            return None
        self._check(r)
        return st

    def entity_newest(self, entity_id):
        """The entity's newest lanes as a list, or None when not in view."""
        lanes, n = (c_int32 * MAX_LANES)(), c_size_t()
        r = self._lib.tf_session_entity_newest(self._s, entity_id, lanes, MAX_LANES, byref(n))
        if r == ERR_NOT_FOUND:
            return None
        self._check(r)
        return list(lanes[:n.value])

    def stats(self):
        st = Stats()
        self._check(self._lib.tf_session_stats(self._s, byref(st)))
        return st

    def disconnect(self, at):
        self._check(self._lib.tf_session_disconnect(self._s, at))

    def close(self):
        if self._s:
            self._lib.tf_session_free(self._s)
            self._s = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
