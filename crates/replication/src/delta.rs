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
//!     fields of the mask, in the schema's table order (`Schema`, the game's):
//!       bit i            field i's lanes, in its coding; field i's lanes follow field
//!                        i - 1's. The mask has as many bits as the table has fields
//!                        (at most 16): a head with a bit past them, or a varint longer
//!                        than 4 + fields bits, is refused. Nothing on the wire names
//!                        the schema: server and client are built with the same one.
//!
//!   the reference shooter's table, for example (crates/shooter):
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
//! angle:   a scalar, or a pair's first lane, that wraps at a turn of 2^bits: its difference
//!          is wrapped to ±2^(bits-1) before zigzag, its value to 0..2^bits after
//! byte:    the value, one byte
//! ```
//!
//! A field's mask bit is set when its value differs from the expected one. The expected
//! value is the baseline's, except for fields predicted from a rate field (positions) in a
//! delta record, which are predicted from the baseline:
//! `base_p + round((base_v + v) × back / (2 × tick_hz))` with `v` the rate (velocity)
//! already decoded from this record (the trapezoid rule, exact under constant
//! acceleration). A player running or falling steadily then sends no position at all; the
//! reader computes the same integers, so the prediction costs nothing in accuracy. Full
//! records expect zeros everywhere.
//!
//! The game orders its table by how often fields change (Quake's `entityStateFields`), so
//! that a running, jumping, looking-around player's record head is one byte; the common head
//! spends one bit on its form, the rare records (full, gone, other baseline, id gap) a
//! second byte.

use crate::schema::{Kind, Lanes, Row, Schema, MAX_LANES, NO_RATE};

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
pub(crate) const HEAD_EXTENDED_MASK_SHIFT: u32 = 4;

/// The tick rate, as the position prediction divides by it: `d` = 4 × `tick_hz`, and
/// what dividing by `d` takes without a division instruction (one costs tens of cycles,
/// and a reader decodes millions of positions a second).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rate {
    d: u64,
    /// `d` is a power of two: divide by shifting this far.
    shift: Option<u32>,
    /// Otherwise ⌊2⁶⁴ / d⌋ + 1, which is above 2⁶⁴ / d by less than one.
    magic: u64,
}

impl Rate {
    pub(crate) fn new(tick_hz: u32) -> Rate {
        let d = 4 * u64::from(tick_hz.max(1));
        Rate {
            d,
            shift: d.is_power_of_two().then(|| d.trailing_zeros()),
            magic: u64::MAX / d + 1,
        }
    }

    /// ⌊`n` / d⌋ (rounded down, as `div_euclid` rounds for a positive divisor), for
    /// |`n`| < 2⁶³. For `a` = |`n`|, `a` × magic / 2⁶⁴ is at least a / d and above it by
    /// less than a / 2⁶⁴ < 1: its floor is ⌊a / d⌋ or one more, and one multiply tells.
    #[inline(always)]
    fn floor_div(self, n: i64) -> i64 {
        if let Some(shift) = self.shift {
            return n >> shift;
        }
        let a = n.unsigned_abs();
        let q = ((u128::from(a) * u128::from(self.magic)) >> 64) as u64;
        let q = q - u64::from(q * self.d > a);
        if n >= 0 {
            q as i64
        } else {
            -(q as i64) - i64::from(q * self.d != a)
        }
    }
}

/// What a record's fields are encoded against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Base<'a> {
    /// Zeros, no prediction: a full state.
    Zero,
    /// The state `back` ticks before the record's tick.
    Delta {
        state: &'a Lanes,
        back: u32,
        rate: Rate,
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
    // `bits.div_ceil(7)`, exact for 1..=64 bits (a test checks every width): an address
    // computation and a shift where the division is a multiply and its fix-up. A crowd's
    // write sizes two varints a candidate.
    (9 * bits + 64) >> 6
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
    if v >> 16 == 0 {
        // Most pairs are a byte or two: each byte gives four bits of each, from a table.
        let (lo, hi) = (GATHERED[(v & 0xff) as usize], GATHERED[(v >> 8) as usize]);
        let x = u32::from(lo & 0xf) | u32::from(hi & 0xf) << 4;
        let y = u32::from(lo >> 4) | u32::from(hi >> 4) << 4;
        return (x, y);
    }
    (gather(v), gather(v >> 1))
}

/// Per byte: its even bits gathered in the low nibble, its odd bits in the high one.
const GATHERED: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        while k < 4 {
            t[b] |= ((b >> (2 * k) & 1) << k | (b >> (2 * k + 1) & 1) << (k + 4)) as u8;
            k += 1;
        }
        b += 1;
    }
    t
};

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

/// Lane `l` of a row, which [`Schema::new`] keeps below [`MAX_LANES`] (a pair's second
/// lane and a rate's too): taken modulo, so that the codec's lane accesses need no bounds
/// check.
#[inline(always)]
fn lane(l: usize) -> usize {
    debug_assert!(l < MAX_LANES);
    l % MAX_LANES
}

/// The value lane `l` (of `row`) is expected to hold, given the baseline and the lanes of
/// `cur` already decoded (rate fields come before the fields they predict).
#[inline(always)]
fn expected(base: Base<'_>, row: &Row, l: usize, cur: &Lanes) -> i32 {
    let Base::Delta { state, back, rate } = base else {
        return 0;
    };
    let b = state.0[lane(l)];
    if row.rate == NO_RATE {
        return b;
    }
    b.wrapping_add(prediction(state, back, rate, row, l, cur))
}

/// How far lane `l` of a predicted `row` moves from its baseline `state`, `back` ticks
/// before, at the mean of the rate lanes of `state` and `cur` (the rate as decoded).
#[inline(always)]
fn prediction(state: &Lanes, back: u32, rate: Rate, row: &Row, l: usize, cur: &Lanes) -> i32 {
    let v = usize::from(row.rate) + (l - usize::from(row.lane));
    // round((base_v + v) × back / (2 × tick_hz)) = ⌊(4 × num + d / 2) / d⌋, d = 4 × tick_hz,
    // in i64: |n| < 2⁴⁵, so nothing overflows.
    let num = (i64::from(state.0[lane(v)]) + i64::from(cur.0[lane(v)])) * i64::from(back);
    if num == 0 {
        // No rate along this lane, before or now (often so: a body at rest on one axis):
        // ⌊(d / 2) / d⌋ = 0.
        return 0;
    }
    let n = 2 * num + (rate.d / 2) as i64;
    rate.floor_div(n) as i32
}

/// The difference a lane encodes against `expected`: an angle lane (`wrap_bits` > 0)
/// wraps, so that 4095 → 0 is one step of a 12-bit turn.
#[inline(always)]
fn lane_delta(wrap_bits: u8, value: i32, expected: i32) -> i32 {
    let d = value.wrapping_sub(expected);
    if wrap_bits == 0 {
        d
    } else {
        let shift = 32 - u32::from(wrap_bits);
        (d << shift) >> shift
    }
}

/// The value a decoded difference gives a lane ([`apply_raw`] does it a whole state at once).
#[cfg(test)]
fn lane_apply(wrap_bits: u8, expected: i32, d: i32) -> i32 {
    let v = expected.wrapping_add(d);
    if wrap_bits == 0 {
        v
    } else {
        v & ((1u32 << wrap_bits) - 1) as i32
    }
}

/// Writes the fields of `cur` that differ from what `base` leads the reader to expect, and
/// returns the change mask. With [`Measure`] as the sink this is the size estimate.
pub(crate) fn encode_fields<S: Sink>(
    schema: &Schema,
    base: Base<'_>,
    cur: &Lanes,
    sink: &mut S,
) -> u16 {
    let mut mask = 0;
    for (bit, row) in schema.rows().iter().enumerate() {
        mask |= encode_field(bit, row, base, cur, sink);
    }
    mask
}

/// Row `bit` of the table: writes its field if it differs, and returns its mask bit.
#[inline(always)]
fn encode_field<S: Sink>(bit: usize, row: &Row, base: Base<'_>, cur: &Lanes, sink: &mut S) -> u16 {
    let l = usize::from(row.lane);
    let d0 = lane_delta(row.wrap_bits, cur.0[l], expected(base, row, l, cur));
    match row.kind {
        Kind::Pair => {
            let d1 = lane_delta(0, cur.0[l + 1], expected(base, row, l + 1, cur));
            if d0 != 0 || d1 != 0 {
                put_varint(sink, interleave(zigzag(d0), zigzag(d1)));
                return 1 << bit;
            }
        }
        Kind::Scalar if d0 != 0 => {
            put_varint(sink, u64::from(zigzag(d0)));
            return 1 << bit;
        }
        Kind::Byte if d0 != 0 => {
            sink.put(cur.0[l] as u8);
            return 1 << bit;
        }
        Kind::Scalar | Kind::Byte => {}
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

    /// Bytes read so far.
    #[cfg(test)]
    pub fn position(&self) -> usize {
        self.at
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

    /// A varint whose value fits in `bits` (at most 64). Inlined: a call costs more than
    /// the one or two bytes most varints are.
    #[inline(always)]
    pub fn varint(&mut self, bits: u32) -> Result<u64, FieldError> {
        // Most are one byte: below 0x80, and in range when `bits` holds 7.
        if let Some(&b) = self.buf.get(self.at) {
            if b < 0x80 && (bits >= 7 || b >> bits == 0) {
                self.at += 1;
                return Ok(u64::from(b));
            }
            // Then two (a pair's deltas of a few units, a position's step): in range
            // whatever the second byte when `bits` holds 14.
            if let (true, Some(&c)) = (bits >= 14, self.buf.get(self.at + 1)) {
                if c < 0x80 {
                    self.at += 2;
                    return Ok(u64::from(b & 0x7f) | u64::from(c) << 7);
                }
            }
        }
        self.varint_long(bits)
    }

    /// [`Cursor::varint`] past its one- and two-byte cases.
    #[inline(never)]
    fn varint_long(&mut self, bits: u32) -> Result<u64, FieldError> {
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
#[cfg(test)]
pub(crate) fn decode_fields(
    schema: &Schema,
    base: Base<'_>,
    mask: u16,
    r: &mut Cursor<'_>,
) -> Result<Lanes, FieldError> {
    let mut raw = Lanes::ZERO;
    read_raw(schema, mask, r, &mut raw)?;
    let mut cur = Lanes::ZERO;
    apply_raw(schema, base, mask, &raw, &mut cur);
    Ok(cur)
}

/// Reads the fields named by `mask` as the wire holds them, before any baseline: a pair's
/// two differences and a scalar's (unzigzagged), a byte's value, each into its lanes of
/// `raw` (whose other lanes the caller keeps 0). Every byte of the fields is read and
/// checked here, so [`apply_raw`] cannot fail: a reader reads a snapshot's records in one
/// pass and applies them against their baselines in a second, once those are loaded,
/// without parsing the bytes twice.
pub(crate) fn read_raw(
    schema: &Schema,
    mask: u16,
    r: &mut Cursor<'_>,
    raw: &mut Lanes,
) -> Result<(), FieldError> {
    let rows = schema.rows();
    let mut todo = mask;
    while todo != 0 {
        let bit = todo.trailing_zeros() as usize;
        todo &= todo - 1;
        let Some(row) = rows.get(bit) else {
            break;
        };
        let l = usize::from(row.lane);
        match row.kind {
            Kind::Pair => {
                let (dx, dy) = deinterleave(r.varint(64)?);
                raw.0[lane(l)] = unzigzag(dx);
                raw.0[lane(l + 1)] = unzigzag(dy);
            }
            Kind::Scalar => raw.0[lane(l)] = unzigzag(r.varint(32)? as u32),
            Kind::Byte => raw.0[lane(l)] = i32::from(r.u8()?),
        }
    }
    Ok(())
}

/// The state the fields named by `mask`, as [`read_raw`] read them into `raw` (whose other
/// lanes are 0), encode against `base`, into `cur` (where the reader keeps it: lanes written
/// one at a time and then read back whole at once would stall on the stores still in
/// flight).
///
/// Every lane at once first: the baseline's value (0 for a full state) plus its difference
/// (0 when unchanged), kept within its turn; a byte sent is its value. Then, against a
/// baseline, each predicted field in order (a rate before what it predicts) moves by its
/// prediction, unless it is a byte that was sent.
pub(crate) fn apply_raw(schema: &Schema, base: Base<'_>, mask: u16, raw: &Lanes, cur: &mut Lanes) {
    let from = match base {
        Base::Delta { state, .. } => state,
        Base::Zero => &Lanes::ZERO,
    };
    let wrap = schema.wrap_masks();
    for (((c, &f), &r), &w) in cur.0.iter_mut().zip(&from.0).zip(&raw.0).zip(wrap) {
        *c = f.wrapping_add(r) & w;
    }
    let rows = schema.rows();
    let mut sent_bytes = mask & schema.byte_mask();
    while sent_bytes != 0 {
        let bit = sent_bytes.trailing_zeros() as usize;
        sent_bytes &= sent_bytes - 1;
        if let Some(row) = rows.get(bit) {
            let l = lane(usize::from(row.lane));
            cur.0[l] = raw.0[l];
        }
    }
    let Base::Delta { state, back, rate } = base else {
        return;
    };
    let mut predicted = schema.predicted_mask() & !(mask & schema.byte_mask());
    while predicted != 0 {
        let bit = predicted.trailing_zeros() as usize;
        predicted &= predicted - 1;
        let Some(row) = rows.get(bit) else {
            break;
        };
        let l = usize::from(row.lane);
        let width = if row.kind == Kind::Pair { 2 } else { 1 };
        for k in l..l + width {
            let moved = cur.0[lane(k)].wrapping_add(prediction(state, back, rate, row, k, cur));
            cur.0[lane(k)] = moved & wrap[lane(k)];
        }
    }
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

/// A decoded record head: kind, id_follows, mask; `None` with mask bits past the table's
/// `fields`.
pub(crate) fn split_head(h: u64, fields: usize) -> Option<(u32, bool, u16)> {
    let (kind, follows, mask) = if h & HEAD_EXTENDED == 0 {
        (KIND_DELTA_DEFAULT, false, h >> HEAD_COMMON_MASK_SHIFT)
    } else {
        (
            (h >> 1 & 3) as u32,
            h & HEAD_ID_FOLLOWS != 0,
            h >> HEAD_EXTENDED_MASK_SHIFT,
        )
    };
    (mask >> fields == 0).then_some((kind, follows, mask as u16))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::schema::{Coding, Field, Quantum, MAX_ANY_BODY_BYTES, MAX_LANES};

    use crate::schema::test_schema::SHOOTER_LIKE;

    /// Every other coding: a wrapping scalar angle, a predicted scalar, 16 lanes.
    static MIXED: Schema = match Schema::new(&[
        Field::new(
            "heading",
            Coding::Angle { bits: 8 },
            Quantum::Turn { bits: 8 },
        ),
        Field::new("rate", Coding::Scalar, Quantum::Whole),
        Field::new("x", Coding::Scalar, Quantum::Whole).predicted_from("rate"),
        Field::new("b0", Coding::Byte, Quantum::Whole),
        Field::new("b1", Coding::Byte, Quantum::Whole),
        Field::new("b2", Coding::Byte, Quantum::Whole),
        Field::new("b3", Coding::Byte, Quantum::Whole),
        Field::new("b4", Coding::Byte, Quantum::Whole),
        Field::new("b5", Coding::Byte, Quantum::Whole),
        Field::new("b6", Coding::Byte, Quantum::Whole),
        Field::new("b7", Coding::Byte, Quantum::Whole),
        Field::new("s0", Coding::Scalar, Quantum::Whole),
        Field::new("s1", Coding::Scalar, Quantum::Whole),
        Field::new("a", Coding::Angle { bits: 31 }, Quantum::Whole),
        Field::new("p", Coding::Pair, Quantum::Whole),
    ]) {
        Ok(s) => s,
        Err(_) => panic!("a valid table"),
    };

    /// A byte predicted from a byte: the schema allows it, and an unchanged one decodes to
    /// its prediction, not its baseline.
    static PREDICTED_BYTE: Schema = match Schema::new(&[
        Field::new("rate", Coding::Byte, Quantum::Whole),
        Field::new("level", Coding::Byte, Quantum::Whole).predicted_from("rate"),
        Field::new("s", Coding::Scalar, Quantum::Whole),
    ]) {
        Ok(s) => s,
        Err(_) => panic!("a valid table"),
    };

    /// Lanes as `schema` allows them: angles within their turn, bytes within a byte, lanes
    /// past the table zero.
    fn lanes(schema: &'static Schema) -> impl Strategy<Value = Lanes> {
        (
            prop::array::uniform16(any::<i32>()),
            prop::array::uniform16(-300i32..300),
            any::<bool>(),
        )
            .prop_map(move |(wild, small, pick)| {
                let mut q = Lanes(if pick { wild } else { small });
                for row in schema.rows() {
                    let l = usize::from(row.lane);
                    if row.wrap_bits != 0 {
                        q.0[l] &= ((1u32 << row.wrap_bits) - 1) as i32;
                    }
                    if row.kind == Kind::Byte {
                        q.0[l] &= 0xff;
                    }
                }
                for l in &mut q.0[schema.lane_count()..MAX_LANES] {
                    *l = 0;
                }
                q
            })
    }

    fn schemas() -> impl Strategy<Value = &'static Schema> {
        prop_oneof![Just(&SHOOTER_LIKE), Just(&MIXED), Just(&PREDICTED_BYTE)]
    }

    /// The fields decoded in one pass, each read and applied in turn: what the reader did
    /// before it read a snapshot's fields raw in its first pass ([`read_raw`]) and applied
    /// them in its second ([`apply_raw`]); kept as their oracle.
    fn decode_one_pass(
        schema: &Schema,
        base: Base<'_>,
        mask: u16,
        r: &mut Cursor<'_>,
    ) -> Result<Lanes, FieldError> {
        let (mut cur, todo) = match base {
            Base::Delta { state, .. } => (*state, mask | schema.predicted_mask()),
            Base::Zero => (Lanes::ZERO, mask),
        };
        for (bit, row) in schema.rows().iter().enumerate() {
            if todo >> bit & 1 == 0 {
                continue;
            }
            let l = usize::from(row.lane);
            let changed = mask >> bit & 1 != 0;
            match row.kind {
                Kind::Pair => {
                    let (e0, e1) = (
                        expected(base, row, l, &cur),
                        expected(base, row, l + 1, &cur),
                    );
                    let (dx, dy) = if changed {
                        deinterleave(r.varint(64)?)
                    } else {
                        (0, 0)
                    };
                    cur.0[l] = lane_apply(row.wrap_bits, e0, unzigzag(dx));
                    cur.0[l + 1] = lane_apply(0, e1, unzigzag(dy));
                }
                Kind::Scalar => {
                    let e0 = expected(base, row, l, &cur);
                    let d = if changed {
                        unzigzag(r.varint(32)? as u32)
                    } else {
                        0
                    };
                    cur.0[l] = lane_apply(row.wrap_bits, e0, d);
                }
                Kind::Byte if changed => cur.0[l] = i32::from(r.u8()?),
                Kind::Byte => cur.0[l] = expected(base, row, l, &cur),
            }
        }
        Ok(cur)
    }

    #[test]
    fn the_table_deinterleaves_two_bytes_as_the_shifts_do() {
        for v in 0..1u64 << 16 {
            assert_eq!(deinterleave(v), (gather(v), gather(v >> 1)), "{v:#x}");
            let (x, y) = deinterleave(v);
            assert_eq!(interleave(x, y), v);
        }
    }

    #[test]
    fn a_one_byte_varint_past_its_bits_is_overlong() {
        for bits in 1..8u32 {
            for b in 0..0x80u8 {
                let got = Cursor::new(&[b]).varint(bits);
                let fits = u32::from(b) < 1 << bits;
                assert_eq!(
                    got,
                    if fits {
                        Ok(u64::from(b))
                    } else {
                        Err(FieldError::Overlong)
                    }
                );
            }
        }
    }

    #[test]
    fn a_two_byte_varint_reads_as_the_long_loop_reads_it() {
        for bits in 1..=64u32 {
            for b in 0x80..=0xffu8 {
                for c in 0..=0xffu8 {
                    let bytes = [b, c, 0x01];
                    let (mut fast, mut long) = (Cursor::new(&bytes), Cursor::new(&bytes));
                    let got = fast.varint(bits);
                    assert_eq!(got, long.varint_long(bits), "{b:#x} {c:#x} in {bits} bits");
                    assert_eq!(fast.at, long.at, "{b:#x} {c:#x} in {bits} bits");
                }
            }
        }
    }

    #[test]
    fn varints_round_trip_and_measure() {
        // Every width, at both its ends, and a few between.
        let widths = (1..64).flat_map(|b| [1u64 << b, (1u64 << b) - 1]);
        for v in [0u64, 1, 300, 16383, 16384, u64::from(u32::MAX), u64::MAX]
            .into_iter()
            .chain(widths)
        {
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
    fn the_widest_record_fits_the_bound() {
        for schema in [&SHOOTER_LIKE, &MIXED] {
            let mut cur = Lanes::ZERO;
            for row in schema.rows() {
                let l = usize::from(row.lane);
                cur.0[l] = if row.kind == Kind::Byte {
                    255
                } else {
                    i32::MIN
                };
                cur.0[l + usize::from(row.kind == Kind::Pair)] = i32::MIN;
            }
            let mut buf = Vec::new();
            encode_fields(schema, Base::Zero, &cur, &mut buf);
            assert!(buf.len() <= schema.max_body_bytes(), "{}", buf.len());
        }
        assert_eq!(
            SHOOTER_LIKE.max_body_bytes(),
            10 + 10 + 10 + 5 + 5 + 1 + 1 + 1
        );
        assert_eq!(SHOOTER_LIKE.head_bits(), 12);
    }

    #[test]
    fn a_wrapping_angle_crosses_the_turn_in_one_step() {
        // MIXED's heading is an 8-bit angle in lane 0: 255 → 0 is +1, one byte; SHOOTER_LIKE's
        // yaw (lane 4, 12 bits) likewise, 4095 → 1 is +2.
        for (schema, l, from, to, zig) in
            [(&MIXED, 0, 255, 0, 2u8), (&SHOOTER_LIKE, 4, 4095, 1, 16)]
        {
            let mut base = Lanes::ZERO;
            base.0[l] = from;
            let mut cur = base;
            cur.0[l] = to;
            let b = Base::Delta {
                state: &base,
                back: 1,
                rate: Rate::new(128),
            };
            let mut buf = Vec::new();
            let mask = encode_fields(schema, b, &cur, &mut buf);
            assert_eq!(buf, [zig], "{from} → {to}");
            assert_eq!(
                decode_fields(schema, b, mask, &mut Cursor::new(&buf)),
                Ok(cur)
            );
        }
    }

    #[test]
    fn steady_running_sends_no_position() {
        let (vx, px) = (0, 2);
        let mut base = Lanes::ZERO;
        base.0[vx] = 500;
        base.0[px] = 10_000;
        let mut cur = base;
        // 500 units/s for 4 ticks at 128 Hz: 15.625 units, rounded to 16.
        cur.0[px] += 16;
        let mut buf = Vec::new();
        let mask = encode_fields(
            &SHOOTER_LIKE,
            Base::Delta {
                state: &base,
                back: 4,
                rate: Rate::new(128),
            },
            &cur,
            &mut buf,
        );
        assert_eq!((mask, buf.len()), (0, 0));
    }

    proptest! {
        #[test]
        fn fields_round_trip_and_measure_what_they_write(
            (schema, base, cur) in schemas().prop_flat_map(|s| (Just(s), lanes(s), lanes(s))),
            back in 0u32..256, tick_hz in 1u32..1000,
        ) {
            let b = if back == 0 { Base::Zero } else { Base::Delta { state: &base, back, rate: Rate::new(tick_hz) } };
            let mut buf = Vec::new();
            let mask = encode_fields(schema, b, &cur, &mut buf);
            let mut m = Measure::default();
            prop_assert_eq!(encode_fields(schema, b, &cur, &mut m), mask);
            prop_assert_eq!(m.0, buf.len(), "measured size equals written size");
            prop_assert!(buf.len() <= schema.max_body_bytes());
            prop_assert!(buf.len() <= MAX_ANY_BODY_BYTES);
            let mut r = Cursor::new(&buf);
            prop_assert_eq!(decode_fields(schema, b, mask, &mut r), Ok(cur));
            prop_assert_eq!(r.remaining(), 0);
            for kind in [KIND_DELTA_DEFAULT, KIND_DELTA_BACK, KIND_FULL, KIND_GONE] {
                for follows in [false, true] {
                    let h = head(kind, follows, mask);
                    prop_assert_eq!(split_head(h, schema.len()), Some((kind, follows, mask)));
                    let mut hb = Vec::new();
                    put_varint(&mut hb, h);
                    prop_assert_eq!(Cursor::new(&hb).varint(schema.head_bits()), Ok(h));
                }
            }
        }

        /// The division by the rate without a division agrees with `div_euclid`, for every
        /// numerator the prediction makes (|n| < 2⁴⁵) and any rate.
        #[test]
        fn the_rate_divides_as_div_euclid(tick_hz in 1u32..=u32::MAX, n in -(1i64 << 45)..(1i64 << 45), near in -3i64..=3) {
            let rate = Rate::new(tick_hz);
            let d = 4 * i64::from(tick_hz);
            // Around multiples of d too, where an estimate one off would show.
            let m = (n / d) * d + near;
            for n in [n, m] {
                prop_assert_eq!(rate.floor_div(n), n.div_euclid(d), "{} / {}", n, d);
            }
        }

        /// Reading the fields raw and applying them against the base decodes what one pass
        /// over the fields does (the decode before the reader's two passes): the same state,
        /// the same bytes, or the same error (long varints made likely, for `Overlong`).
        #[test]
        fn reading_raw_then_applying_decodes_as_one_pass(
            (schema, base) in schemas().prop_flat_map(|s| (Just(s), lanes(s))), mask: u16, full: bool,
            data in prop::collection::vec(prop_oneof![3 => 0x80u8..=0xff, 1 => any::<u8>()], 0..128),
            garbage in prop::array::uniform16(any::<i32>()),
        ) {
            let b = if full {
                Base::Zero
            } else {
                Base::Delta { state: &base, back: 3, rate: Rate::new(30) }
            };
            let (mut two, mut one) = (Cursor::new(&data), Cursor::new(&data));
            let mut raw = Lanes::ZERO;
            let read = read_raw(schema, mask, &mut two, &mut raw).map(|()| {
                // What `cur` held before is never read.
                let mut cur = Lanes(garbage);
                apply_raw(schema, b, mask, &raw, &mut cur);
                cur
            });
            prop_assert_eq!(read, decode_one_pass(schema, b, mask, &mut one));
            prop_assert_eq!(two.position(), one.position());
        }

        #[test]
        fn decoding_any_bytes_never_panics(
            schema in schemas(), base in lanes(&MIXED), mask: u16,
            data in prop::collection::vec(any::<u8>(), 0..128),
        ) {
            let b = Base::Delta { state: &base, back: 255, rate: Rate::new(1) };
            let _ = decode_fields(schema, b, mask, &mut Cursor::new(&data));
            let _ = decode_fields(schema, Base::Zero, mask, &mut Cursor::new(&data));
        }
    }
}
