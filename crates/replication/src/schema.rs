//! The replicated state a game declares: an ordered table of fields.
//!
//! A game supplies one [`Schema`] to its [`Replicator`](crate::Replicator) and the same one
//! to every [`Replica`](crate::Replica) (Quake's `entityStateFields`). The table drives
//! encoding, decoding and the size estimate alike; nothing in this crate knows what a
//! field means.
//!
//! Each field takes one or two lanes of an entity's [`Lanes`], in table order: the first
//! field's lanes come first. A lane is an `i32` in the field's wire units; the field's
//! [`Quantum`] says how a game value maps to them, and a game quantizes its values with it
//! once, when it pushes a state. The table's order is the mask-bit order on the wire, so
//! a game orders its fields by how often they change: the common record head holds the
//! first six fields' bits in one byte.

/// Most fields a schema holds: the change mask is 16 bits.
pub const MAX_FIELDS: usize = 16;

/// Most lanes a schema's fields take together: an entity's state is this many `i32`s.
pub const MAX_LANES: usize = 16;

/// Largest encoded field body any schema may have: a pair costs at most 10 bytes (two
/// lanes), a scalar 5 (one lane), a byte 1.
pub(crate) const MAX_ANY_BODY_BYTES: usize = 5 * MAX_LANES;

/// How a field is written, and how many lanes it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    /// One signed lane: `varint(zigzag(value - expected))`, 1 to 5 bytes.
    Scalar,
    /// Two signed lanes: `varint(interleave(zigzag(dx), zigzag(dy)))`; two deltas within
    /// ±3 cost one byte.
    Pair,
    /// One angle lane of `bits` bits (1..=31) that wraps at a turn: its difference is
    /// wrapped to ±half a turn before zigzag, its value to `0..2^bits` after. A scalar
    /// otherwise.
    Angle {
        /// Bits of a whole turn on the wire.
        bits: u8,
    },
    /// Two lanes, a pair whose first lane is an angle of `bits` bits (1..=31) that wraps
    /// at a turn (yaw), and whose second is a plain signed value (pitch).
    AnglePair {
        /// Bits of a whole turn on the wire.
        bits: u8,
    },
    /// One lane, `0..=255`, sent as its byte when it changed. A value outside that range
    /// arrives as its low byte.
    Byte,
}

impl Coding {
    /// Lanes a field of this coding takes.
    pub const fn lanes(self) -> usize {
        match self {
            Coding::Pair | Coding::AnglePair { .. } => 2,
            Coding::Scalar | Coding::Angle { .. } | Coding::Byte => 1,
        }
    }

    /// Most bytes a field of this coding costs.
    pub const fn max_bytes(self) -> usize {
        match self {
            Coding::Pair | Coding::AnglePair { .. } => 10,
            Coding::Scalar | Coding::Angle { .. } => 5,
            Coding::Byte => 1,
        }
    }

    const fn wrap_bits(self) -> u8 {
        match self {
            Coding::Angle { bits } | Coding::AnglePair { bits } => bits,
            _ => 0,
        }
    }
}

/// How a game value maps to a field's lanes. Documents the units on the wire and gives the
/// game its quantizer, so that the lanes a game pushes and the values a client reads back
/// agree on one scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Quantum {
    /// The lane is the game's value itself (flags, counts, ids).
    Whole,
    /// Lane units per game unit: 256.0 for a 1/256 m quantum of a value in metres.
    PerUnit(f32),
    /// A game angle in 1/65536 turn sent as 1/2^`bits` turn (`bits` 1..=16).
    Turn {
        /// Bits of a whole turn on the wire.
        bits: u8,
    },
}

impl Quantum {
    /// The lane value of game value `v` (a [`Quantum::PerUnit`] scale; [`Quantum::Whole`]
    /// rounds): rounded to the nearest unit, saturating, NaN to 0, so a wild float cannot
    /// wrap.
    pub fn to_lane(self, v: f32) -> i32 {
        match self {
            Quantum::PerUnit(scale) => (v * scale).round() as i32,
            Quantum::Whole | Quantum::Turn { .. } => v.round() as i32,
        }
    }

    /// The game value of lane value `lane` (the inverse of [`Quantum::to_lane`]).
    pub fn from_lane(self, lane: i32) -> f32 {
        match self {
            Quantum::PerUnit(scale) => lane as f32 / scale,
            Quantum::Whole | Quantum::Turn { .. } => lane as f32,
        }
    }

    /// The lane value of a game angle `a` in 1/65536 turn: rounded to the nearest wire
    /// unit (a [`Quantum::Turn`]; other quanta take `a` whole). Not wrapped: the caller
    /// masks a wrapping angle to its turn, or clamps a bounded one.
    pub fn angle_to_lane(self, a: i32) -> i32 {
        match self {
            Quantum::Turn { bits } => {
                let shift = 16 - u32::from(bits.clamp(1, 16));
                if shift == 0 {
                    a
                } else {
                    (a + (1 << (shift - 1))) >> shift
                }
            }
            Quantum::Whole | Quantum::PerUnit(_) => a,
        }
    }

    /// The game angle, 1/65536 turn, of lane value `lane` (a [`Quantum::Turn`]).
    pub fn lane_to_angle(self, lane: i32) -> i32 {
        match self {
            Quantum::Turn { bits } => lane << (16 - u32::from(bits.clamp(1, 16))),
            Quantum::Whole | Quantum::PerUnit(_) => lane,
        }
    }
}

/// One field of a [`Schema`]: a name, how it is written, its quantum, and optionally the
/// field it is predicted from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Field {
    /// The field's name, unique in its schema (diagnostics, and [`Field::predicted_from`]).
    pub name: &'static str,
    /// How it is written; also how many lanes it takes.
    pub coding: Coding,
    /// How a game value maps to its lanes.
    pub quantum: Quantum,
    /// The field whose lanes are its rate of change per second (position from velocity):
    /// a delta record then expects `base + round((base_rate + rate) × back / (2 × tick_hz))`
    /// (the trapezoid rule, exact under constant acceleration) rather than `base`. The rate
    /// field must come earlier in the table and take as many lanes.
    pub predicted_from: Option<&'static str>,
}

impl Field {
    /// A field that is expected to keep its baseline's value.
    pub const fn new(name: &'static str, coding: Coding, quantum: Quantum) -> Field {
        Field {
            name,
            coding,
            quantum,
            predicted_from: None,
        }
    }

    /// This field, predicted from the rate field named `rate`.
    pub const fn predicted_from(self, rate: &'static str) -> Field {
        Field {
            predicted_from: Some(rate),
            ..self
        }
    }
}

/// A schema the table cannot be, naming the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// No fields, or more than [`MAX_FIELDS`].
    #[error("a schema has 1..=16 fields")]
    FieldCount,
    /// The fields take more than [`MAX_LANES`] lanes.
    #[error("a schema's fields take at most 16 lanes")]
    LaneCount,
    /// Two fields share this name.
    #[error("field name used twice: {0}")]
    DuplicateName(&'static str),
    /// An angle coding's bits are not 1..=31.
    #[error("angle bits of field {0} must be 1..=31")]
    AngleBits(&'static str),
    /// This field's rate field is not an earlier field with as many lanes.
    #[error("field {0} is predicted from a field that is not earlier or not as wide")]
    Predictor(&'static str),
}

/// One row as the codec walks it: lanes resolved, so a row reads like the const table did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Row {
    /// First lane; a two-lane field uses this lane and the next.
    pub lane: u8,
    pub kind: Kind,
    /// The first lane wraps at `1 << wrap_bits` (0: no wrap).
    pub wrap_bits: u8,
    /// The first lane of the rate field, or [`NO_RATE`].
    pub rate: u8,
}

pub(crate) const NO_RATE: u8 = u8::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Scalar,
    Pair,
    Byte,
}

/// The replicated fields of a game's entities, in mask-bit order. Fixed-size and `Copy`: a
/// `static` a game defines once with [`Schema::new`] in a const.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schema {
    fields: [Field; MAX_FIELDS],
    rows: [Row; MAX_FIELDS],
    len: u8,
    lanes: u8,
    max_body: u8,
    /// Bit `i`: field `i` is predicted from a rate field.
    predicted: u16,
    /// Bit `i`: field `i` is a byte (sent whole, not as a difference).
    bytes: u16,
    /// Per lane, what a value is masked with: its turn (`(1 << wrap_bits) - 1`) for the
    /// first lane of a wrapping field, all ones for any other.
    wrap: [i32; MAX_LANES],
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

impl Schema {
    /// The schema of `fields`, in mask-bit order. Usable in a const:
    ///
    /// ```
    /// use tickforge_replication::{Coding, Field, Quantum, Schema};
    /// static SCHEMA: Schema = match Schema::new(&[
    ///     Field::new("velocity", Coding::Pair, Quantum::PerUnit(256.0)),
    ///     Field::new("position", Coding::Pair, Quantum::PerUnit(256.0)).predicted_from("velocity"),
    ///     Field::new("hp", Coding::Byte, Quantum::Whole),
    /// ]) {
    ///     Ok(s) => s,
    ///     Err(_) => panic!("a valid table"),
    /// };
    /// assert_eq!(SCHEMA.lane_count(), 5);
    /// assert_eq!(SCHEMA.lane_of("hp"), Some(4));
    /// ```
    pub const fn new(fields: &[Field]) -> Result<Schema, SchemaError> {
        if fields.is_empty() || fields.len() > MAX_FIELDS {
            return Err(SchemaError::FieldCount);
        }
        let blank_field = Field::new("", Coding::Byte, Quantum::Whole);
        let blank_row = Row {
            lane: 0,
            kind: Kind::Byte,
            wrap_bits: 0,
            rate: NO_RATE,
        };
        let mut s = Schema {
            fields: [blank_field; MAX_FIELDS],
            rows: [blank_row; MAX_FIELDS],
            len: fields.len() as u8,
            lanes: 0,
            max_body: 0,
            predicted: 0,
            bytes: 0,
            wrap: [-1; MAX_LANES],
        };
        let mut lane = 0usize;
        let mut body = 0usize;
        let mut i = 0;
        while i < fields.len() {
            let f = fields[i];
            let mut j = 0;
            while j < i {
                if str_eq(fields[j].name, f.name) {
                    return Err(SchemaError::DuplicateName(f.name));
                }
                j += 1;
            }
            let wrap_bits = f.coding.wrap_bits();
            if matches!(f.coding, Coding::Angle { .. } | Coding::AnglePair { .. })
                && !(wrap_bits >= 1 && wrap_bits <= 31)
            {
                return Err(SchemaError::AngleBits(f.name));
            }
            let width = f.coding.lanes();
            if lane + width > MAX_LANES {
                return Err(SchemaError::LaneCount);
            }
            let mut rate = NO_RATE;
            if let Some(from) = f.predicted_from {
                let mut j = 0;
                while j < i {
                    if str_eq(fields[j].name, from) {
                        if fields[j].coding.lanes() != width {
                            return Err(SchemaError::Predictor(f.name));
                        }
                        rate = s.rows[j].lane;
                    }
                    j += 1;
                }
                if rate == NO_RATE {
                    return Err(SchemaError::Predictor(f.name));
                }
                s.predicted |= 1 << i;
            }
            s.fields[i] = f;
            if wrap_bits > 0 {
                s.wrap[lane] = ((1u32 << wrap_bits) - 1) as i32;
            }
            if matches!(f.coding, Coding::Byte) {
                s.bytes |= 1 << i;
            }
            s.rows[i] = Row {
                lane: lane as u8,
                kind: match f.coding {
                    Coding::Pair | Coding::AnglePair { .. } => Kind::Pair,
                    Coding::Scalar | Coding::Angle { .. } => Kind::Scalar,
                    Coding::Byte => Kind::Byte,
                },
                wrap_bits,
                rate,
            };
            lane += width;
            body += f.coding.max_bytes();
            i += 1;
        }
        s.lanes = lane as u8;
        s.max_body = body as u8;
        Ok(s)
    }

    /// Bit `i`: field `i` is predicted from a rate field (a delta record computes it
    /// even when unchanged).
    pub(crate) fn predicted_mask(&self) -> u16 {
        self.predicted
    }

    /// Bit `i`: field `i` is a byte.
    pub(crate) fn byte_mask(&self) -> u16 {
        self.bytes
    }

    /// Per lane, the mask a value is kept within: a wrapping lane's turn, else all ones.
    pub(crate) fn wrap_masks(&self) -> &[i32; MAX_LANES] {
        &self.wrap
    }

    /// The fields, in mask-bit order.
    pub fn fields(&self) -> &[Field] {
        &self.fields[..usize::from(self.len)]
    }

    /// Lanes the fields take together; an entity's [`Lanes`] past these stay 0.
    pub fn lane_count(&self) -> usize {
        usize::from(self.lanes)
    }

    /// The first lane of the field named `name`.
    pub fn lane_of(&self, name: &str) -> Option<usize> {
        self.fields()
            .iter()
            .position(|f| f.name == name)
            .map(|i| usize::from(self.rows[i].lane))
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields().iter().find(|f| f.name == name)
    }

    /// Most bytes one record's fields cost: every field at its widest.
    pub fn max_body_bytes(&self) -> usize {
        usize::from(self.max_body)
    }

    /// A fingerprint of the table: FNV-1a 32 over every field's name, coding, quantum and
    /// predictor, in order. Both ends of a connection must use the same table; the server
    /// sends this in its welcome and a client built with another table refuses the match
    /// instead of decoding its snapshots as nonsense.
    pub fn fingerprint(&self) -> u32 {
        let mut h: u32 = 0x811c_9dc5;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
            }
        };
        for f in self.fields() {
            eat(f.name.as_bytes());
            eat(&[0]);
            match f.coding {
                Coding::Scalar => eat(&[1]),
                Coding::Pair => eat(&[2]),
                Coding::Angle { bits } => eat(&[3, bits]),
                Coding::AnglePair { bits } => eat(&[4, bits]),
                Coding::Byte => eat(&[5]),
            }
            match f.quantum {
                Quantum::Whole => eat(&[1]),
                Quantum::PerUnit(scale) => {
                    eat(&[2]);
                    eat(&scale.to_bits().to_le_bytes());
                }
                Quantum::Turn { bits } => eat(&[3, bits]),
            }
            eat(f.predicted_from.unwrap_or("").as_bytes());
            eat(&[0]);
        }
        h
    }

    /// Fields in the table, so mask bits `0..len`.
    pub(crate) fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub(crate) fn rows(&self) -> &[Row] {
        &self.rows[..usize::from(self.len)]
    }

    /// Bits a record head holds under this schema; a longer varint is refused.
    pub(crate) fn head_bits(&self) -> u32 {
        crate::delta::HEAD_EXTENDED_MASK_SHIFT + u32::from(self.len)
    }
}

/// One entity's state in wire units: lane `i` is the `i`th lane of the schema's fields in
/// table order. Fixed-size, so states are stored and copied without allocating.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Lanes(pub [i32; MAX_LANES]);

impl Lanes {
    /// All lanes zero: what full records are encoded against.
    pub const ZERO: Lanes = Lanes([0; MAX_LANES]);
}

/// A table shaped like the reference shooter's, for this crate's tests: pairs, an angle
/// pair, predicted fields, scalars and bytes (lanes vx vy px py yaw pitch vz pz flags
/// health weapon).
#[cfg(test)]
pub(crate) mod test_schema {
    use super::*;

    const M: Quantum = Quantum::PerUnit(256.0);

    pub static SHOOTER_LIKE: Schema = match Schema::new(&[
        Field::new("vxy", Coding::Pair, M),
        Field::new("pxy", Coding::Pair, M).predicted_from("vxy"),
        Field::new(
            "view",
            Coding::AnglePair { bits: 12 },
            Quantum::Turn { bits: 12 },
        ),
        Field::new("vz", Coding::Scalar, M),
        Field::new("pz", Coding::Scalar, M).predicted_from("vz"),
        Field::new("flags", Coding::Byte, Quantum::Whole),
        Field::new("health", Coding::Byte, Quantum::Whole),
        Field::new("weapon", Coding::Byte, Quantum::Whole),
    ]) {
        Ok(s) => s,
        Err(_) => panic!("a valid table"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_changes_with_any_part_of_a_field() {
        let base = [
            Field::new("v", Coding::Pair, Quantum::PerUnit(256.0)),
            Field::new("p", Coding::Pair, Quantum::PerUnit(256.0)).predicted_from("v"),
            Field::new("f", Coding::Byte, Quantum::Whole),
        ];
        let print = |fields: &[Field]| Schema::new(fields).unwrap().fingerprint();
        let f0 = print(&base);
        assert_eq!(f0, print(&base), "stable");
        let mut renamed = base;
        renamed[2].name = "g";
        let mut recoded = base;
        recoded[2].coding = Coding::Scalar;
        let mut rescaled = base;
        rescaled[1].quantum = Quantum::PerUnit(64.0);
        let mut unpredicted = base;
        unpredicted[1].predicted_from = None;
        for other in [renamed, recoded, rescaled, unpredicted] {
            assert_ne!(print(&other), f0, "{other:?}");
        }
        assert_ne!(print(&base[..2]), f0, "a field fewer");
    }

    #[test]
    fn bad_tables_are_refused_with_the_field() {
        let px = Field::new("p", Coding::Pair, Quantum::PerUnit(256.0));
        let vx = Field::new("v", Coding::Pair, Quantum::PerUnit(256.0));
        let z = Field::new("z", Coding::Scalar, Quantum::PerUnit(256.0));
        assert_eq!(Schema::new(&[]), Err(SchemaError::FieldCount));
        assert_eq!(Schema::new(&[px, px]), Err(SchemaError::DuplicateName("p")));
        assert_eq!(
            Schema::new(&[px.predicted_from("v"), vx]),
            Err(SchemaError::Predictor("p")),
            "the rate comes first"
        );
        assert_eq!(
            Schema::new(&[z, px.predicted_from("z")]),
            Err(SchemaError::Predictor("p")),
            "as many lanes"
        );
        let wide = [Field::new("a", Coding::Angle { bits: 0 }, Quantum::Whole)];
        assert_eq!(Schema::new(&wide), Err(SchemaError::AngleBits("a")));
        let names = [
            "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q",
        ];
        let pairs: Vec<Field> = names[..9]
            .iter()
            .map(|n| Field::new(n, Coding::Pair, Quantum::Whole))
            .collect();
        assert_eq!(Schema::new(&pairs), Err(SchemaError::LaneCount));
        let bytes: Vec<Field> = names
            .iter()
            .map(|n| Field::new(n, Coding::Byte, Quantum::Whole))
            .collect();
        assert_eq!(Schema::new(&bytes), Err(SchemaError::FieldCount));
        let s = Schema::new(&bytes[..16]).unwrap();
        assert_eq!((s.lane_count(), s.max_body_bytes()), (16, 16));
        assert!(s.max_body_bytes() <= MAX_ANY_BODY_BYTES);
    }

    #[test]
    fn angle_quanta_round_to_the_nearest_unit() {
        let q = Quantum::Turn { bits: 12 };
        assert_eq!(q.angle_to_lane(65535), 4096);
        assert_eq!(q.angle_to_lane(7), 0);
        assert_eq!(q.angle_to_lane(8), 1);
        assert_eq!(q.angle_to_lane(-16000), -1000);
        assert_eq!(q.lane_to_angle(-1000), -16000);
        let m = Quantum::PerUnit(256.0);
        assert_eq!(m.to_lane(1.0 / 512.0), 1);
        assert_eq!(m.to_lane(f32::NAN), 0);
        assert_eq!(m.from_lane(-512), -2.0);
    }
}
