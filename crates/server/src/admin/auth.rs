//! The admin API's bearer token: where it is checked, and how, in constant time.

use subtle::{Choice, ConstantTimeEq};

/// The environment variable that may hold the admin token (when no `admin_token_file`).
pub const TOKEN_ENV: &str = "TICKFORGE_ADMIN_TOKEN";

/// Fewest characters a token may have: 16 random characters are out of reach of guessing
/// over HTTP.
pub const MIN_TOKEN_CHARS: usize = 16;
/// Most characters a token may have; it has to fit in one header line.
pub const MAX_TOKEN_CHARS: usize = 1024;

/// The secret that `Authorization: Bearer <token>` must carry. Its `Debug` is redacted,
/// so a configuration can be printed without it.
#[derive(Clone)]
pub struct AdminToken(Box<[u8]>);

impl AdminToken {
    /// A token from the text of a token file or [`TOKEN_ENV`], surrounding whitespace (a
    /// trailing newline) removed. It must be [`MIN_TOKEN_CHARS`] to [`MAX_TOKEN_CHARS`]
    /// visible ASCII characters (what a header value can carry unchanged); the error says
    /// which rule was broken, never the text.
    pub fn new(text: &str) -> Result<AdminToken, &'static str> {
        let t = text.trim();
        if t.len() < MIN_TOKEN_CHARS {
            return Err("shorter than 16 characters");
        }
        if t.len() > MAX_TOKEN_CHARS {
            return Err("longer than 1024 characters");
        }
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("not all visible ASCII (no spaces or control characters)");
        }
        Ok(AdminToken(t.as_bytes().into()))
    }

    /// True when `header` (an `Authorization` value) is `Bearer <this token>`; the scheme
    /// is case-insensitive. The time taken depends on this token's length only, never on
    /// where a wrong token first differs or on its length.
    pub fn accepts(&self, header: &[u8]) -> bool {
        const SCHEME: &[u8] = b"bearer ";
        if header.len() < SCHEME.len() || !header[..SCHEME.len()].eq_ignore_ascii_case(SCHEME) {
            return false;
        }
        let given = header[SCHEME.len()..].trim_ascii();
        let mut same = Choice::from(u8::from(given.len() == self.0.len()));
        for (i, want) in self.0.iter().enumerate() {
            // Past the end of a short candidate, compare with 0 (never a token byte).
            same &= given.get(i).copied().unwrap_or(0).ct_eq(want);
        }
        same.into()
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

impl PartialEq for AdminToken {
    fn eq(&self, other: &AdminToken) -> bool {
        self.0.len() == other.0.len() && bool::from(self.0.ct_eq(&other.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "s3cret-admin-token-0123";

    #[test]
    fn only_the_exact_token_after_bearer_is_accepted() {
        let token = AdminToken::new(&format!("  {T}\n")).unwrap();
        assert!(token.accepts(format!("Bearer {T}").as_bytes()));
        assert!(token.accepts(format!("bearer {T}").as_bytes()));
        assert!(token.accepts(format!("BEARER  {T} ").as_bytes()));
        for wrong in [
            String::new(),
            "Bearer".to_string(),
            "Bearer ".to_string(),
            T.to_string(),
            format!("Basic {T}"),
            format!("Bearer {}", &T[..T.len() - 1]),
            format!("Bearer {T}x"),
            format!("Bearer {}X", &T[..T.len() - 1]),
            format!("Bearer {T}\0"),
        ] {
            assert!(!token.accepts(wrong.as_bytes()), "{wrong:?}");
        }
    }

    #[test]
    fn bad_tokens_say_why_and_never_show_the_text() {
        assert_eq!(
            AdminToken::new("short").unwrap_err(),
            "shorter than 16 characters"
        );
        assert!(AdminToken::new(&"a".repeat(2000)).is_err());
        assert!(AdminToken::new("0123456789 abcdef").is_err());
        assert!(AdminToken::new("0123456789\u{e9}abcdef").is_err());
        let token = AdminToken::new(T).unwrap();
        assert!(!format!("{token:?}").contains("s3cret"));
        assert_eq!(token, AdminToken::new(T).unwrap());
        assert_ne!(token, AdminToken::new(&format!("{T}x")).unwrap());
    }
}
