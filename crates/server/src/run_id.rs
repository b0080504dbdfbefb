//! The run id: one per server process, on every result line and action file name it
//! writes, so that a restarted server's output is told from the last run's and never
//! overwrites it.

use std::fmt;

/// One server process's identity: 64 random bits from the OS, shown as 16 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RunId(pub u64);

impl RunId {
    /// A fresh run id from the OS's random source.
    pub fn generate() -> RunId {
        RunId(u64::from_le_bytes(tickforge_io::entropy::random_bytes()))
    }
}

impl fmt::Display for RunId {
    /// 16 lowercase hex digits, as result lines and action file names carry it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_random_and_shown_as_16_hex_digits() {
        assert_ne!(RunId::generate(), RunId::generate());
        assert_eq!(RunId(0xab).to_string(), "00000000000000ab");
    }
}
