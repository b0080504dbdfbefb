//! The snapshot body: one field table drives encoding, decoding and measuring.
//!
//! ```text
//! body:
//!   tick u32                     server tick the snapshot describes (u32 from 0 per match)
//!   default_back u8              ticks from this snapshot's usual baseline to `tick`; 0: none
//!   count varint                 records that follow, 0..=max_entities
//!   count × record, ids strictly increasing:
//!     head varint            common: mask << 1 (bit 0 clear): a delta against
//!                                tick - default_back, id = previous id + 1
//!                            extended: 1 | kind << 1 | id_follows << 3 | mask << 4
//!                                kind 0: delta against tick - default_back
//!                                     1: delta against tick - back
//!                                     2: full state (delta against all zeros)
//!                                     3: gone: drop the entity (mask 0, no fields)
//!     [id_gap varint]            id_follows: id = previous id + 1 + id_gap;
//!                                otherwise id = previous id + 1 (the first record: id 0)
//!     [back u8]                  kind 1 only, 1..=255
//!     fields of the mask, in table order:
//!       bit field        lanes        coding
//!       0   velocity xy  vx, vy       pair     1/256 m/s
//!       1   position xy  px, py       pair     1/256 m, predicted from velocity
//!       2   view         yaw, pitch   pair     1/4096 turn; yaw wraps at a turn
//!       3   velocity z   vz           scalar   1/256 m/s
//!       4   position z   pz           scalar   1/256 m, predicted from velocity
//!       5   flags        flags        byte
//!       6   health       health       byte
//!       7   weapon       weapon       byte
//!
//! varint:  LEB128, 7 bits a byte, low first; at most 5 bytes (10 for a pair)
//! scalar:  varint(zigzag(value - expected))
//! pair:    varint(interleave(zigzag(dx), zigzag(dy))): two deltas within ±3 cost one byte
//! yaw:     its difference is wrapped to ±2048 before zigzag, its value to 0..4096 after
//! byte:    the value, one byte
//! ```
//!
//! A field's mask bit is set when its value differs from the expected one. The expected
//! value is the baseline's, except for positions in a delta record, which are predicted
//! from the baseline: `base_p + round((base_v + v) × back / (2 × tick_hz))` with `v` the
//! velocity already decoded from this record (the trapezoid rule, exact under constant
//! acceleration). A player running or falling steadily then sends no position at all; the
//! reader computes the same integers, so the prediction costs nothing in accuracy. Full
//! records expect zeros everywhere.
//!
//! The table is ordered by how often fields change (Quake's `entityStateFields`), so that a
//! running, jumping, looking-around player's record head is one byte; the common head
//! spends one bit on its form, the rare records (full, gone, other baseline, id gap) a
//! second byte.

use crate::state::{lane, QState, ANGLE_MASK};

/// Bytes of a snapshot header at most: tick, default back, and a 2-byte count.
pub(crate) const MAX_HEADER_BYTES: usize = 4 + 1 + 2;

/// Record kinds.
pub(crate) const KIND_DELTA_DEFAULT: u32 = 0;
pub(crate) const KIND_DELTA_BACK: u32 = 1;
pub(crate) const KIND_FULL: u32 = 2;
pub(crate) const KIND_GONE: u32 = 3;
const HEAD_EXTENDED: u64 = 1;
const HEAD_ID_FOLLOWS: u64 = 1 << 3;
const HEAD_COMMON_MASK_SHIFT: u32 = 1;
const HEAD_EXTENDED_MASK_SHIFT: u32 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Coding {
    Pair,
    Scalar,
    Byte,
}

/// One row of the field table.
#[derive(Clone, Copy, Debug)]
struct Field {
    /// First lane; a pair uses this lane and the next.
    lane: usize,
    coding: Coding,
    /// For a position: the lane of its velocity (the next lane too, for a pair).
    predicted_from: Option<usize>,
}

/// Fields on the wire, in mask-bit order.
pub(crate) const FIELD_COUNT: usize = 8;

const FIELDS: [Field; FIELD_COUNT] = [
    Field {
        lane: lane::VX,
        coding: Coding::Pair,
        predicted_from: None,
    },
    Field {
        lane: lane::PX,
        coding: Coding::Pair,
        predicted_from: Some(lane::VX),
    },
    Field {
        lane: lane::YAW,
        coding: Coding::Pair,
        predicted_from: None,
    },
    Field {
        lane: lane::VZ,
        coding: Coding::Scalar,
        predicted_from: None,
    },
    Field {
        lane: lane::PZ,
        coding: Coding::Scalar,
        predicted_from: Some(lane::VZ),
    },
    Field {
        lane: lane::FLAGS,
        coding: Coding::Byte,
        predicted_from: None,
    },
    Field {
        lane: lane::HEALTH,
        coding: Coding::Byte,
        predicted_from: None,
    },
    Field {
        lane: lane::WEAPON,
        coding: Coding::Byte,
        predicted_from: None,
    },
];

/// Largest encoded field body: every field at its widest.
pub(crate) const MAX_BODY_BYTES: usize = 10 + 10 + 10 + 5 + 5 + 1 + 1 + 1;

/// What a record's fields are encoded against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Base<'a> {
    /// Zeros, no prediction: a full state.
    Zero,
    /// The state `back` ticks before the record's tick.
    Delta {
        state: &'a QState,
        back: u32,
        tick_hz: u32,
    },
}

/// Where encoded bytes go: a buffer, or a counter that measures with the same code.
pub(crate) trait Sink {
    fn put(&mut self, byte: u8);
}

impl Sink for Vec<u8> {
    fn put(&mut self, byte: u8) {
        self.push(byte);
    }
}

/// Counts bytes instead of writing them.
#[derive(Default)]
pub(crate) struct Measure(pub usize);

impl Sink for Measure {
    fn put(&mut self, _: u8) {
        self.0 += 1;
    }
}

pub(crate) fn put_varint<S: Sink>(sink: &mut S, mut v: u64) {
    while v >= 0x80 {
        sink.put(v as u8 | 0x80);
        v >>= 7;
    }
    sink.put(v as u8);
}

pub(crate) fn varint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

fn zigzag(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

fn unzigzag(v: u32) -> i32 {
    (v >> 1) as i32 ^ -((v & 1) as i32)
}

/// Bits of `x` at even positions, bits of `y` at odd ones.
fn interleave(x: u32, y: u32) -> u64 {
    spread(x) | spread(y) << 1
}

fn deinterleave(v: u64) -> (u32, u32) {
    (gather(v), gather(v >> 1))
}

fn spread(v: u32) -> u64 {
    let mut v = u64::from(v);
    v = (v | v << 16) & 0x0000_ffff_0000_ffff;
    v = (v | v << 8) & 0x00ff_00ff_00ff_00ff;
    v = (v | v << 4) & 0x0f0f_0f0f_0f0f_0f0f;
    v = (v | v << 2) & 0x3333_3333_3333_3333;
    (v | v << 1) & 0x5555_5555_5555_5555
}

fn gather(v: u64) -> u32 {
    let mut v = v & 0x5555_5555_5555_5555;
    v = (v | v >> 1) & 0x3333_3333_3333_3333;
    v = (v | v >> 2) & 0x0f0f_0f0f_0f0f_0f0f;
    v = (v | v >> 4) & 0x00ff_00ff_00ff_00ff;
    v = (v | v >> 8) & 0x0000_ffff_0000_ffff;
    (v | v >> 16) as u32
}

/// The value lane `l` is expected to hold, given the baseline and the lanes of `cur`
/// already decoded (velocities come before their positions in the table).
fn expected(base: Base<'_>, field: &Field, l: usize, cur: &QState) -> i32 {
    let Base::Delta {
        state,
        back,
        tick_hz,
    } = base
    else {
        return 0;
    };
    let b = state.0[l];
    let Some(v) = field.predicted_from else {
        return b;
    };
    let v = v + (l - field.lane);
    // round((base_v + v) × back / (2 × tick_hz)) in i64: no input overflows it.
    let num = (i64::from(state.0[v]) + i64::from(cur.0[v])) * i64::from(back);
    let den = 2 * i64::from(tick_hz.max(1));
    let (n, d) = (2 * num + den, 2 * den);
    // A power-of-two rate (128 Hz) divides by shifting: the same floor, without a division.
    let step = if d & (d - 1) == 0 {
        n >> d.trailing_zeros()
    } else {
        n.div_euclid(d)
    };
    b.wrapping_add(step as i32)
}

/// The difference lane `l` of `cur` encodes against `expected`: yaw wraps, so that
/// 4095 → 0 is one step.
fn lane_delta(l: usize, value: i32, expected: i32) -> i32 {
    let d = value.wrapping_sub(expected);
    if l == lane::YAW {
        ((d & ANGLE_MASK) << 20) >> 20
    } else {
        d
    }
}

/// The value a decoded difference gives lane `l`.
fn lane_apply(l: usize, expected: i32, d: i32) -> i32 {
    let v = expected.wrapping_add(d);
    if l == lane::YAW {
        v & ANGLE_MASK
    } else {
        v
    }
}

/// Writes the fields of `cur` that differ from what `base` leads the reader to expect, and
/// returns the change mask. With [`Measure`] as the sink this is the size estimate.
pub(crate) fn encode_fields<S: Sink>(base: Base<'_>, cur: &QState, sink: &mut S) -> u16 {
    // The table, row by row: each call sees a constant row, so its coding and lanes fold
    // into straight-line code rather than a loop that looks them up per field.
    const _: () = assert!(FIELD_COUNT == 8, "one call per row of FIELDS");
    let mut mask = 0;
    mask |= encode_field(0, base, cur, sink);
    mask |= encode_field(1, base, cur, sink);
    mask |= encode_field(2, base, cur, sink);
    mask |= encode_field(3, base, cur, sink);
    mask |= encode_field(4, base, cur, sink);
    mask |= encode_field(5, base, cur, sink);
    mask |= encode_field(6, base, cur, sink);
    mask |= encode_field(7, base, cur, sink);
    mask
}

/// Row `bit` of the table: writes its field if it differs, and returns its mask bit.
#[inline(always)]
fn encode_field<S: Sink>(bit: usize, base: Base<'_>, cur: &QState, sink: &mut S) -> u16 {
    let f = &FIELDS[bit];
    let l = f.lane;
    let d0 = lane_delta(l, cur.0[l], expected(base, f, l, cur));
    match f.coding {
        Coding::Pair => {
            let d1 = lane_delta(l + 1, cur.0[l + 1], expected(base, f, l + 1, cur));
            if d0 != 0 || d1 != 0 {
                put_varint(sink, interleave(zigzag(d0), zigzag(d1)));
                return 1 << bit;
            }
        }
        Coding::Scalar if d0 != 0 => {
            put_varint(sink, u64::from(zigzag(d0)));
            return 1 << bit;
        }
        Coding::Byte if d0 != 0 => {
            sink.put(cur.0[l] as u8);
            return 1 << bit;
        }
        Coding::Scalar | Coding::Byte => {}
    }
    0
}

/// Why a record's fields did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FieldError {
    Truncated,
    Overlong,
}

/// Reads from a byte slice, front to back; never panics.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, at: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    pub fn u8(&mut self) -> Result<u8, FieldError> {
        let b = *self.buf.get(self.at).ok_or(FieldError::Truncated)?;
        self.at += 1;
        Ok(b)
    }

    pub fn u32_le(&mut self) -> Result<u32, FieldError> {
        let mut v = [0u8; 4];
        for b in &mut v {
            *b = self.u8()?;
        }
        Ok(u32::from_le_bytes(v))
    }

    /// A varint whose value fits in `bits` (at most 64).
    pub fn varint(&mut self, bits: u32) -> Result<u64, FieldError> {
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            let chunk = u64::from(b & 0x7f);
            // Every bit of the chunk must land below `bits`.
            if shift >= bits || (bits - shift < 7 && chunk >> (bits - shift) != 0) {
                return Err(FieldError::Overlong);
            }
            v |= chunk << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
        }
    }
}

/// Decodes the fields named by `mask` into the state they encode against `base`.
pub(crate) fn decode_fields(
    base: Base<'_>,
    mask: u16,
    r: &mut Cursor<'_>,
) -> Result<QState, FieldError> {
    let mut cur = QState::ZERO;
    for (bit, f) in FIELDS.iter().enumerate() {
        let l = f.lane;
        let changed = mask & (1 << bit) != 0;
        let e0 = expected(base, f, l, &cur);
        match f.coding {
            Coding::Pair => {
                let e1 = expected(base, f, l + 1, &cur);
                let (dx, dy) = if changed {
                    deinterleave(r.varint(64)?)
                } else {
                    (0, 0)
                };
                cur.0[l] = lane_apply(l, e0, unzigzag(dx));
                cur.0[l + 1] = lane_apply(l + 1, e1, unzigzag(dy));
            }
            Coding::Scalar => {
                let d = if changed {
                    unzigzag(r.varint(32)? as u32)
                } else {
                    0
                };
                cur.0[l] = lane_apply(l, e0, d);
            }
            Coding::Byte => {
                cur.0[l] = if changed { i32::from(r.u8()?) } else { e0 };
            }
        }
    }
    Ok(cur)
}

/// A record head: the common form for a delta against the default baseline of the next id.
pub(crate) fn head(kind: u32, id_follows: bool, mask: u16) -> u64 {
    let mask = u64::from(mask);
    if kind == KIND_DELTA_DEFAULT && !id_follows {
        return mask << HEAD_COMMON_MASK_SHIFT;
    }
    let follows = if id_follows { HEAD_ID_FOLLOWS } else { 0 };
    HEAD_EXTENDED | u64::from(kind) << 1 | follows | mask << HEAD_EXTENDED_MASK_SHIFT
}

/// A decoded record head: kind, id_follows, mask; `None` with mask bits past the table.
pub(crate) fn split_head(h: u64) -> Option<(u32, bool, u16)> {
    let (kind, follows, mask) = if h & HEAD_EXTENDED == 0 {
        (KIND_DELTA_DEFAULT, false, h >> HEAD_COMMON_MASK_SHIFT)
    } else {
        (
            (h >> 1 & 3) as u32,
            h & HEAD_ID_FOLLOWS != 0,
            h >> HEAD_EXTENDED_MASK_SHIFT,
        )
    };
    (mask >> FIELD_COUNT == 0).then_some((kind, follows, mask as u16))
}

/// Bits a record head holds; a longer varint is refused.
pub(crate) const HEAD_BITS: u32 = HEAD_EXTENDED_MASK_SHIFT + FIELD_COUNT as u32;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lanes() -> impl Strategy<Value = QState> {
        (
            prop::array::uniform11(any::<i32>()),
            prop::array::uniform11(-300i32..300),
            any::<bool>(),
        )
            .prop_map(|(wild, small, pick)| {
                let mut q = QState(if pick { wild } else { small });
                q.0[lane::YAW] &= ANGLE_MASK;
                for l in [lane::FLAGS, lane::HEALTH, lane::WEAPON] {
                    q.0[l] &= 0xff;
                }
                q
            })
    }

    #[test]
    fn varints_round_trip_and_measure() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16383,
            16384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(buf.len(), varint_len(v), "{v}");
            let mut m = Measure::default();
            put_varint(&mut m, v);
            assert_eq!(m.0, buf.len());
            assert_eq!(Cursor::new(&buf).varint(64), Ok(v));
        }
        assert_eq!(
            Cursor::new(&[0x80, 0x80, 0x80, 0x80, 0x10]).varint(32),
            Err(FieldError::Overlong)
        );
        assert_eq!(
            Cursor::new(&[0xff, 0x7f]).varint(12),
            Err(FieldError::Overlong)
        );
        assert_eq!(Cursor::new(&[0xff, 0x1f]).varint(12), Ok(4095));
        assert_eq!(Cursor::new(&[0x80]).varint(32), Err(FieldError::Truncated));
    }

    #[test]
    fn pairs_of_small_deltas_cost_one_byte() {
        for (dx, dy) in [(3, -3), (-3, 3), (0, 3), (-4, 0)] {
            let mut buf = Vec::new();
            put_varint(&mut buf, interleave(zigzag(dx), zigzag(dy)));
            assert_eq!(buf.len(), 1, "({dx}, {dy})");
        }
        assert_eq!(deinterleave(interleave(u32::MAX, 5)), (u32::MAX, 5));
    }

    #[test]
    fn steady_running_sends_no_position() {
        let mut base = QState::ZERO;
        base.0[lane::VX] = 500;
        base.0[lane::PX] = 10_000;
        let mut cur = base;
        // 500 cm/s for 4 ticks at 128 Hz: 15.625 cm, rounded to 16.
        cur.0[lane::PX] += 16;
        let mut buf = Vec::new();
        let mask = encode_fields(
            Base::Delta {
                state: &base,
                back: 4,
                tick_hz: 128,
            },
            &cur,
            &mut buf,
        );
        assert_eq!((mask, buf.len()), (0, 0));
    }

    proptest! {
        #[test]
        fn fields_round_trip_and_measure_what_they_write(
            base in lanes(), cur in lanes(), back in 0u32..256, tick_hz in 1u32..1000,
        ) {
            let b = if back == 0 { Base::Zero } else { Base::Delta { state: &base, back, tick_hz } };
            let mut buf = Vec::new();
            let mask = encode_fields(b, &cur, &mut buf);
            let mut m = Measure::default();
            prop_assert_eq!(encode_fields(b, &cur, &mut m), mask);
            prop_assert_eq!(m.0, buf.len(), "measured size equals written size");
            prop_assert!(buf.len() <= MAX_BODY_BYTES);
            let mut r = Cursor::new(&buf);
            prop_assert_eq!(decode_fields(b, mask, &mut r), Ok(cur));
            prop_assert_eq!(r.remaining(), 0);
            for kind in [KIND_DELTA_DEFAULT, KIND_DELTA_BACK, KIND_FULL, KIND_GONE] {
                for follows in [false, true] {
                    prop_assert_eq!(split_head(head(kind, follows, mask)), Some((kind, follows, mask)));
                }
            }
        }

        #[test]
        fn decoding_any_bytes_never_panics(
            base in lanes(), mask in 0u16..256, data in prop::collection::vec(any::<u8>(), 0..64),
        ) {
            let b = Base::Delta { state: &base, back: 255, tick_hz: 1 };
            let _ = decode_fields(b, mask, &mut Cursor::new(&data));
            let _ = decode_fields(Base::Zero, mask, &mut Cursor::new(&data));
        }
    }
}
