//! Little-endian byte encoding with checked reads.
//!
//! [`Reader`] never panics on short input: every read returns [`Truncated`] instead.
//! [`Writer`] appends to a caller-owned `Vec<u8>`, so a buffer reused across ticks stops
//! allocating once it has grown to its working size.

/// The input ended before the value being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("datagram truncated")]
pub struct Truncated;

/// Reads values from a byte slice, front to back.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

macro_rules! read_le {
    ($($name:ident: $ty:ty),* $(,)?) => {$(
        #[doc = concat!("Reads a little-endian `", stringify!($ty), "`.")]
        pub fn $name(&mut self) -> Result<$ty, Truncated> {
            let bytes = self.array::<{ std::mem::size_of::<$ty>() }>()?;
            Ok(<$ty>::from_le_bytes(bytes))
        }
    )*};
}

impl<'a> Reader<'a> {
    /// Starts reading at the front of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The bytes not yet read, consuming them.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    /// Reads exactly `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        if self.buf.len() < n {
            return Err(Truncated);
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    /// Reads a fixed-size array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Truncated> {
        let b = self.bytes(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, Truncated> {
        Ok(self.array::<1>()?[0])
    }

    read_le!(u16: u16, u32: u32, u64: u64, i16: i16, i32: i32);
}

/// Appends values to a caller-owned buffer.
pub struct Writer<'a> {
    buf: &'a mut Vec<u8>,
}

macro_rules! write_le {
    ($($name:ident: $ty:ty),* $(,)?) => {$(
        #[doc = concat!("Appends a little-endian `", stringify!($ty), "`.")]
        pub fn $name(&mut self, v: $ty) {
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
    )*};
}

impl<'a> Writer<'a> {
    /// Appends to `buf` after what it already holds.
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        Writer { buf }
    }

    /// Bytes in the buffer, including those there before this writer.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Appends raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// Appends `n` zero bytes.
    pub fn zeros(&mut self, n: usize) {
        self.buf.resize(self.buf.len() + n, 0);
    }

    /// Appends one byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    write_le!(u16: u16, u32: u32, u64: u64, i16: i16, i32: i32);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_all_widths() {
        let mut buf = Vec::new();
        let mut w = Writer::new(&mut buf);
        w.u8(0xab);
        w.u16(0xbeef);
        w.u32(0xdead_beef);
        w.u64(u64::MAX - 1);
        w.i16(-2);
        w.i32(-70_000);
        w.bytes(b"xyz");
        assert_eq!(w.len(), 1 + 2 + 4 + 8 + 2 + 4 + 3);
        let mut r = Reader::new(&buf);
        assert_eq!(r.u8(), Ok(0xab));
        assert_eq!(r.u16(), Ok(0xbeef));
        assert_eq!(r.u32(), Ok(0xdead_beef));
        assert_eq!(r.u64(), Ok(u64::MAX - 1));
        assert_eq!(r.i16(), Ok(-2));
        assert_eq!(r.i32(), Ok(-70_000));
        assert_eq!(r.bytes(3), Ok(&b"xyz"[..]));
        assert_eq!(r.remaining(), 0);
        assert_eq!(r.u8(), Err(Truncated));
    }

    #[test]
    fn little_endian_on_the_wire() {
        let mut buf = Vec::new();
        Writer::new(&mut buf).u32(0x0403_0201);
        assert_eq!(buf, [1, 2, 3, 4]);
    }

    proptest! {
        #[test]
        fn short_reads_fail_without_consuming_past_the_end(data in proptest::collection::vec(any::<u8>(), 0..16)) {
            let mut r = Reader::new(&data);
            let mut consumed = 0;
            while r.u32().is_ok() { consumed += 4; }
            prop_assert_eq!(consumed, data.len() / 4 * 4);
            prop_assert_eq!(r.remaining(), data.len() % 4);
            prop_assert!(r.bytes(usize::MAX).is_err());
        }
    }
}
