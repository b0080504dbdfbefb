//! Randomness and wall-clock time from the OS: keys, nonces, salts and token timestamps.

/// Fills `buf` from the OS's cryptographic random source.
///
/// # Panics
/// When the OS has no random source to give, which leaves no safe way to make keys.
pub fn fill_random(buf: &mut [u8]) {
    getrandom::getrandom(buf).expect("the OS random source is unavailable");
}

/// An array of random bytes.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    fill_random(&mut b);
    b
}

/// Seconds since the Unix epoch, as connect tokens count time.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_bytes_differ_between_calls() {
        let a: [u8; 32] = random_bytes();
        let b: [u8; 32] = random_bytes();
        assert_ne!(a, b);
    }

    #[test]
    fn unix_time_is_after_2020() {
        assert!(unix_now() > 1_577_836_800);
    }
}
