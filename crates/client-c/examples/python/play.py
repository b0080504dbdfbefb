"""Connects to a tickforge shooter match with a connect token, plays a few seconds (one
input per tick: run forward, turning), prints what it sees, disconnects.

    TICKFORGE_LIB=target/debug/libtickforge_client_c.so python3 play.py token.bin [seconds]

Exits 0 when welcomed, snapshots came at 90% of the tick rate or better, and the
disconnect was clean.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python"))
import tickforge  # noqa: E402


def main():
    if len(sys.argv) < 2:
        print("usage: play.py TOKEN_FILE [SECONDS]", file=sys.stderr)
        return 2
    play_for = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    with open(sys.argv[1], "rb") as f:
        token = f.read()
    print("tickforge", tickforge.lib().tf_version().decode())

    welcomed = clean = ended = False
    seat, tick_hz, snapshots, game_events = 0, 128, 0, 0
    start = tickforge.now()
    welcomed_at, nxt, yaw = 0.0, start, 0.0
    with tickforge.Session(token, "shooter", tickforge.MODE_SOCKET, start) as s:
        while not ended:
            now = tickforge.now()
            if not welcomed and now - start > 5.0:
                print("play: no welcome in 5 s", file=sys.stderr)
                break
            if welcomed and now - welcomed_at >= play_for:
                break
            s.update(now)
            for ev in s.events():
                if ev.kind == tickforge.EVENT_WELCOME:
                    welcomed, welcomed_at, seat, tick_hz = True, now, ev.seat, ev.tick_hz
                    print("welcome match=%d seat=%d seats=%d entities=%d tick_hz=%d epoch=%d"
                          % (ev.match_id, ev.seat, ev.seats, ev.entities, ev.tick_hz, ev.epoch))
                elif ev.kind == tickforge.EVENT_EPOCH:
                    print("epoch", ev.epoch)
                elif ev.kind == tickforge.EVENT_GAME:
                    game_events += 1
                elif ev.kind == tickforge.EVENT_SNAPSHOT:
                    snapshots += 1
                elif ev.kind == tickforge.EVENT_DISCONNECTED:
                    print("disconnected early: reason=%d (%s)" % (ev.reason, ev.text.decode()))
                    ended = True
            if welcomed and not ended:
                yaw += 90.0 / tick_hz
                s.send_shooter_input(tickforge.now(), forward=127, yaw_deg=yaw)
            nxt += 1.0 / tick_hz
            wait = nxt - tickforge.now()
            if wait > 0:
                time.sleep(wait)
            else:
                nxt = tickforge.now()
        played = tickforge.now() - welcomed_at if welcomed else 0.0

        me = s.shooter_entity_newest(seat) if welcomed else None
        if me is not None:
            print("me seat=%d at (%.2f, %.2f, %.2f) yaw=%.1f health=%d alive=%d tick=%d"
                  % (seat, me.x, me.y, me.z, me.yaw_deg, me.health, me.alive, me.tick))
        st = s.stats()
        print("stats rtt_ms=%.2f jitter_ms=%.2f loss=%.3f packets_in=%d bytes_in=%d packets_out=%d "
              "bytes_out=%d inputs=%d" % (st.rtt_ms, st.jitter_ms, st.loss, st.packets_received,
                                          st.bytes_received, st.packets_sent, st.bytes_sent, st.inputs))
        print("snapshots %d in %.2f s, game events %d" % (snapshots, played, game_events))
        if not ended:
            s.disconnect(tickforge.now())
            for ev in s.events():
                if ev.kind == tickforge.EVENT_DISCONNECTED:
                    clean = ev.reason == tickforge.REASON_CLIENT_CLOSED
                    print("disconnected reason=%d (%s)" % (ev.reason, ev.text.decode()))

    print("RESULT lang=python welcome=%d snapshots=%d seconds=%.3f tick_hz=%d clean=%d"
          % (welcomed, snapshots, played, tick_hz, clean))
    if not welcomed or not clean or snapshots < 0.9 * tick_hz * played:
        print("play: FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
