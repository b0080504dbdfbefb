#!/usr/bin/env python3
"""A second implementation of tickforge's snapshot decoding, written from PROTOCOL.md alone.

Usage:
    python3 tests/protocol/decode.py crates/shooter/tests/fixtures/wire.bin > decoded.json
    python3 tests/protocol/decode.py --fingerprint
    python3 tests/protocol/decode.py --packets FILE

--packets reads a file of `dir u8 ('s' or 'c') | len u16 | packet` records, reliability
packets (PROTOCOL.md sections 4 and 5) of one connection in the order the other side
received them, and prints their headers, the server's reliable events in delivery order,
its snapshots (decoded with the shooter's schema, 10 entities) and the client's inputs.

Parses the fixture (PROTOCOL.md section 9), keeps one replica per (scenario, connection),
decodes every non-empty snapshot body (section 7) with the shooter's schema (section 8),
and prints, as JSON, every snapshot's records: [id, lanes] or [id, null] for a gone record.
Standard library only. Exits non-zero if a body is refused or disagrees with the counts
its fixture entry records.
"""

import json
import struct
import sys

TICK_HZ = 128

# PROTOCOL.md section 8: (name, coding, bits, quantum, quantum arg, predicted from).
SHOOTER = [
    ("velocity xy", "pair", 0, "perunit", 256.0, None),
    ("position xy", "pair", 0, "perunit", 256.0, "velocity xy"),
    ("view", "anglepair", 12, "turn", 12, None),
    ("velocity z", "scalar", 0, "perunit", 256.0, None),
    ("position z", "scalar", 0, "perunit", 256.0, "velocity z"),
    ("flags", "byte", 0, "whole", None, None),
    ("health", "byte", 0, "whole", None, None),
    ("weapon", "byte", 0, "whole", None, None),
]

WIDTH = {"scalar": 1, "angle": 1, "byte": 1, "pair": 2, "anglepair": 2}


class Refused(Exception):
    pass


def wrap_i32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


class Schema:
    """Resolves each field's first lane and its rate field's first lane (section 7.3)."""

    def __init__(self, fields):
        self.fields = fields
        self.rows = []
        lane = 0
        first = {}
        for name, coding, bits, _q, _qa, rate in fields:
            first[name] = lane
            self.rows.append((lane, coding, bits, first[rate] if rate else None))
            lane += WIDTH[coding]
        self.lanes = lane
        self.head_bits = 4 + len(fields)

    def fingerprint(self):
        """Section 7.6: FNV-1a 32 over the table."""
        h = 0x811C9DC5

        def eat(bs):
            nonlocal h
            for b in bs:
                h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF

        codes = {"scalar": 1, "pair": 2, "angle": 3, "anglepair": 4, "byte": 5}
        for name, coding, bits, quantum, qarg, rate in self.fields:
            eat(name.encode())
            eat(b"\0")
            eat(bytes([codes[coding], bits]) if coding in ("angle", "anglepair") else bytes([codes[coding]]))
            if quantum == "whole":
                eat(b"\x01")
            elif quantum == "perunit":
                eat(b"\x02")
                eat(struct.pack("<f", qarg))
            else:
                eat(bytes([3, qarg]))
            eat((rate or "").encode())
            eat(b"\0")
        return h


class Cursor:
    def __init__(self, buf):
        self.buf = buf
        self.at = 0

    def u8(self):
        if self.at >= len(self.buf):
            raise Refused("truncated")
        b = self.buf[self.at]
        self.at += 1
        return b

    def u32(self):
        return self.u8() | self.u8() << 8 | self.u8() << 16 | self.u8() << 24

    def varint(self, bits):
        """Section 1: LEB128, refused if a set bit lands at or past `bits`."""
        v = 0
        shift = 0
        while True:
            b = self.u8()
            chunk = b & 0x7F
            if shift >= bits or (bits - shift < 7 and chunk >> (bits - shift)):
                raise Refused("overlong varint")
            v |= chunk << shift
            if not b & 0x80:
                return v
            shift += 7


def unzigzag(u):
    return (u >> 1) ^ -(u & 1)


def deinterleave(u):
    x = y = 0
    for i in range(32):
        x |= ((u >> (2 * i)) & 1) << i
        y |= ((u >> (2 * i + 1)) & 1) << i
    return x, y


def decode_fields(schema, base, back, mask, cur_reader):
    """Section 7.3 and 7.4. `base` None: a full record (expects zeros)."""
    cur = [0] * schema.lanes

    def expected(l, row):
        if base is None:
            return 0
        lane, _coding, _bits, rate = row
        if rate is None:
            return base[l]
        r = rate + (l - lane)
        num = (base[r] + cur[r]) * back
        den = 2 * TICK_HZ
        step = (2 * num + den) // (2 * den)
        return wrap_i32(base[l] + step)

    for bit, row in enumerate(schema.rows):
        lane, coding, bits, _rate = row
        changed = mask >> bit & 1
        e0 = expected(lane, row)
        if coding in ("pair", "anglepair"):
            e1 = expected(lane + 1, row)
            dx = dy = 0
            if changed:
                zx, zy = deinterleave(cur_reader.varint(64))
                dx, dy = unzigzag(zx), unzigzag(zy)
            v0 = wrap_i32(e0 + dx)
            if coding == "anglepair":
                v0 &= (1 << bits) - 1
            cur[lane] = v0
            cur[lane + 1] = wrap_i32(e1 + dy)
        elif coding in ("scalar", "angle"):
            d = unzigzag(cur_reader.varint(32)) if changed else 0
            v = wrap_i32(e0 + d)
            if coding == "angle":
                v &= (1 << bits) - 1
            cur[lane] = v
        else:  # byte
            cur[lane] = cur_reader.u8() if changed else e0
    return cur


class Replica:
    """Section 7.5: history per (entity, tick); the view is not needed for the fixture's
    per-snapshot values."""

    def __init__(self, schema, entities):
        self.schema = schema
        self.entities = entities
        self.history = {}
        self.seen = set()

    def read(self, body):
        s = self.schema
        r = Cursor(body)
        tick = r.u32()
        default_back = r.u8()
        count = r.varint(16)
        if count > self.entities:
            raise Refused("too many records")
        if tick in self.seen:
            return tick, None  # duplicate
        records = []
        next_id = 0
        for _ in range(count):
            head = r.varint(s.head_bits)
            if head & 1 == 0:
                kind, follows, mask = 0, False, head >> 1
            else:
                kind, follows, mask = (head >> 1) & 3, bool(head & 8), head >> 4
            if mask >> len(s.rows):
                raise Refused("bad head")
            gap = r.varint(16) if follows else 0
            eid = next_id + gap
            if eid >= self.entities:
                raise Refused("id out of range")
            next_id = eid + 1
            if kind == 3:
                if mask:
                    raise Refused("gone with fields")
                records.append((eid, None, kind))
                continue
            if kind == 2:
                lanes = decode_fields(s, None, 0, mask, r)
            else:
                back = r.u8() if kind == 1 else default_back
                if back == 0 or back > tick:
                    raise Refused("bad back")
                base = self.history.get((eid, tick - back))
                if base is None:
                    raise Refused("missing baseline")
                lanes = decode_fields(s, base, back, mask, r)
            records.append((eid, lanes, kind))
        if r.at != len(body):
            raise Refused("trailing bytes")
        for eid, lanes, _kind in records:
            if lanes is not None:
                self.history[(eid, tick)] = lanes
        self.seen.add(tick)
        return tick, records


# Section 9: the scenarios' entity counts.
ENTITIES = {"arena": 10, "churn": 70, "crowd": 80, "crowd by distance": 80}


def entries(data):
    at = 0
    while at < len(data):
        tag = data[at]
        at += 1
        if tag == ord("n"):
            n = data[at]
            yield ("n", data[at + 1 : at + 1 + n].decode())
            at += 1 + n
        elif tag == ord("w"):
            tick, conn, states, full, gone, deferred, n = struct.unpack_from("<IHHHHHI", data, at)
            at += 18
            yield ("w", (tick, conn, states, full, gone, deferred, data[at : at + n]))
            at += n
        elif tag == ord("s"):
            tick, n = struct.unpack_from("<II", data, at)
            at += 8 + n
        else:
            raise SystemExit(f"unknown entry tag {tag} at {at - 1}")


FRAGMENT_BYTES = 240
CELLS = 32768 // 240
MAX_FRAGMENTS = -(-16384 // 240)
WINDOW = 64


def seq_newer(a, b):
    """Section 4.1: a is newer than b under the half-range rule."""
    return 0 < (a - b) % 65536 < 32768


class ReliableReceiver:
    """Section 4.2 and 4.3: reliable messages by id, delivered once, in id order."""

    def __init__(self):
        self.next_expected = 0
        self.whole = {}
        self.frags = {}
        self.delivered = []

    def section(self, kind, mid, index=0, count=1, cell=0, body=b""):
        if mid != self.next_expected and not seq_newer(mid, self.next_expected):
            return  # duplicate: older than the first id not yet complete
        if (mid - self.next_expected) % 65536 >= WINDOW:
            raise Refused("message out of window")
        if kind == 1:
            if len(body) > FRAGMENT_BYTES:
                raise Refused("whole message longer than a fragment")
            if mid not in self.frags:
                self.whole.setdefault(mid, bytes(body))
        else:
            last = index + 1 == count
            if not 2 <= count <= MAX_FRAGMENTS or index >= count or cell >= CELLS:
                raise Refused("bad fragment")
            if (not last and len(body) != FRAGMENT_BYTES) or (
                last and not 1 <= len(body) <= FRAGMENT_BYTES
            ):
                raise Refused("bad fragment length")
            f = self.frags.setdefault(mid, {"count": count, "cell": cell, "pieces": {}})
            if (f["count"], f["cell"]) != (count, cell):
                raise Refused("fragments disagree")
            f["pieces"].setdefault(index, bytes(body))
        while True:
            m = self.next_expected
            if m in self.whole:
                msg = self.whole.pop(m)
            elif m in self.frags and len(self.frags[m]["pieces"]) == self.frags[m]["count"]:
                f = self.frags.pop(m)
                msg = b"".join(f["pieces"][i] for i in range(f["count"]))
            else:
                return
            self.delivered.append(msg)
            self.next_expected = (m + 1) % 65536


def read_packet(pkt, received, reliable):
    """Section 4: header, then sections to the end. Returns (header, unreliable or None);
    None for the header of a duplicate packet (dropped)."""
    if len(pkt) > 1200:
        raise Refused("packet too large")
    c = Cursor(pkt)
    seq = c.u8() | c.u8() << 8
    ack = c.u8() | c.u8() << 8
    ack_bits = c.u32()
    header = {"sequence": seq, "ack": ack, "ack_bits": ack_bits}
    if seq in received:
        return header, None, True
    sections = []
    unreliable = None
    while c.at < len(pkt):
        kind = c.u8()
        if kind == 1:
            mid = c.u8() | c.u8() << 8
            n = c.u8() | c.u8() << 8
            sections.append((1, mid, 0, 1, 0, bytes(c.u8() for _ in range(n))))
        elif kind == 2:
            f = [c.u8() | c.u8() << 8 for _ in range(5)]
            mid, index, count, cell, n = f
            sections.append((2, mid, index, count, cell, bytes(c.u8() for _ in range(n))))
        elif kind == 3:
            tag = c.u32()
            n = c.u8() | c.u8() << 8
            if unreliable is not None:
                raise Refused("two unreliable sections")
            unreliable = (tag, bytes(c.u8() for _ in range(n)))
        else:
            raise Refused(f"unknown section {kind}")
    received.add(seq)
    for sec in sections:
        reliable.section(*sec)
    return header, unreliable, False


def le(b, at, n):
    return int.from_bytes(b[at : at + n], "little")


def event(m):
    """Section 5.3."""
    kind = m[0]
    if kind == 1:
        if len(m) != 21:
            raise Refused("welcome size")
        return {
            "event": "welcome",
            "match_id": le(m, 1, 4),
            "seat": le(m, 5, 2),
            "tick_hz": le(m, 7, 2),
            "seats": le(m, 9, 2),
            "entities": le(m, 11, 2),
            "schema": le(m, 13, 4),
            "epoch": le(m, 17, 4),
        }
    if kind == 6:
        if len(m) != 5:
            raise Refused("epoch size")
        return {"event": "epoch", "epoch": le(m, 1, 4)}
    if kind == 7:
        return {"event": "game", "bytes": list(m[1:])}
    if kind == 8:
        events, at = [], 1
        while at < len(m):
            n, shift, width = 0, 0, 0
            while True:
                if at >= len(m) or width == 3:
                    raise Refused("games length")
                b = m[at]
                at, width = at + 1, width + 1
                n |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            if (width > 1 and b == 0) or n > 16384 or at + n > len(m):
                raise Refused("games length")
            events.append(list(m[at : at + n]))
            at += n
        if len(events) < 2:
            raise Refused("games with fewer than two events")
        return {"event": "games", "events": events}
    raise Refused(f"unknown event kind {kind}")


def packets_main(path):
    data = open(path, "rb").read()
    schema = Schema(SHOOTER)
    replica = Replica(schema, 10)
    out = {"packets": [], "events": [], "snapshots": [], "inputs": []}
    seen = {"s": set(), "c": set()}
    reliable = {"s": ReliableReceiver(), "c": ReliableReceiver()}
    at = 0
    while at < len(data):
        d = chr(data[at])
        n = le(data, at + 1, 2)
        pkt = data[at + 3 : at + 3 + n]
        at += 3 + n
        header, unreliable, _dup = read_packet(pkt, seen[d], reliable[d])
        out["packets"].append({"dir": d, "header": header})
        # Section 6.1: the packet's reliable messages before its snapshot.
        for m in reliable[d].delivered:
            if d == "s":
                out["events"].append(event(m))
        reliable[d].delivered.clear()
        if unreliable is None:
            continue
        _tag, m = unreliable
        if d == "s":
            if m[0] != 1 or len(m) < 9:
                raise Refused("not a snapshot")
            _t, records = replica.read(m[9:])
            out["snapshots"].append(
                {
                    "tick": le(m, 1, 4),
                    "input_ack": le(m, 5, 4),
                    "records": [[i, l] for i, l, _k in records],
                }
            )
        else:
            if m[0] != 1 or len(m) < 10:
                raise Refused("not an input")
            out["inputs"].append(
                {
                    "seq": le(m, 1, 4),
                    "view_tick": le(m, 5, 4),
                    "view_frac": m[9],
                    "cmd": list(m[10:]),
                }
            )
    json.dump(out, sys.stdout, separators=(",", ":"))
    print()
    return 0


def main(argv):
    schema = Schema(SHOOTER)
    if argv[1:] == ["--fingerprint"]:
        print(schema.fingerprint())
        return 0
    if len(argv) == 3 and argv[1] == "--packets":
        return packets_main(argv[2])
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = open(argv[1], "rb").read()
    out = {"fingerprint": schema.fingerprint(), "scenarios": []}
    replicas = {}
    scenario = None
    failures = 0
    for kind, e in entries(data):
        if kind == "n":
            scenario = {"name": e, "writes": []}
            out["scenarios"].append(scenario)
            replicas = {}
            continue
        tick, conn, states, full, gone, _deferred, body = e
        if not body:
            continue  # no packet
        rep = replicas.setdefault(conn, Replica(schema, ENTITIES[scenario["name"]]))
        try:
            btick, records = rep.read(body)
        except Refused as err:
            print(f"{scenario['name']} tick {tick} conn {conn}: refused: {err}", file=sys.stderr)
            failures += 1
            scenario["writes"].append({"tick": tick, "conn": conn, "error": str(err)})
            continue
        if records is None:
            print(f"{scenario['name']} tick {tick} conn {conn}: duplicate", file=sys.stderr)
            failures += 1
            continue
        got = (
            sum(1 for r in records if r[1] is not None),
            sum(1 for r in records if r[2] == 2),
            sum(1 for r in records if r[1] is None),
        )
        if btick != tick or got != (states, full, gone):
            print(
                f"{scenario['name']} tick {tick} conn {conn}: body tick {btick}, "
                f"(states, full, gone) {got} != recorded {(states, full, gone)}",
                file=sys.stderr,
            )
            failures += 1
        scenario["writes"].append(
            {"tick": tick, "conn": conn, "records": [[i, l] for i, l, _k in records]}
        )
    json.dump(out, sys.stdout, separators=(",", ":"))
    print()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
