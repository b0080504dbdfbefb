//! Transparent huge pages for the heap of `serve`, `bots`, `bench` and `capacity`, on
//! Linux with glibc (the only build this module is part of).
//!
//! A bots process keeps a session and a replica per bot: 1.7 GB for the thousand of the
//! crowd's fight, where each snapshot read touches a few lines in each of dozens of 4 KiB
//! pages, so that most reads miss the TLB as well as the cache. On 2 MiB pages the same read
//! takes about three quarters of the time (the replicate bench's fight read by 1,000
//! replicas, 5 alternated runs: median 21.6 → 15.9 ms a tick); the server's replication
//! of that fight gains less (15.7 → 14.9 ms), its tables being dense.
//!
//! Most hosts ship transparent huge pages in `madvise` mode, so a heap gets them only if
//! its allocator asks. glibc's does when its tunable `glibc.malloc.hugetlb=1` is set, and
//! it reads its tunables once, at start, from `GLIBC_TUNABLES`: so these commands start
//! themselves again with it set ([`restart_with_huge_pages`]), and the processes a bench
//! starts inherit it. Not when it is set already, nor with `TICKFORGE_HUGE_PAGES=0`.
//! Where huge pages are off (`never`), or the C library is not glibc, the tunable does
//! nothing, and costs nothing.

/// glibc's tunable: `madvise(MADV_HUGEPAGE)` on the heap it grows and the chunks it maps.
pub const TUNABLE: &str = "glibc.malloc.hugetlb=1";

/// The variable that turns the restart off: `0`.
pub const OPT_OUT: &str = "TICKFORGE_HUGE_PAGES";

/// `GLIBC_TUNABLES` to restart with, given its value now and [`OPT_OUT`]'s; `None` when
/// there is nothing to do: opted out, or the tunable already has a value (the user's,
/// whatever it is, is kept). Other tunables already set are kept, the hugetlb one added.
pub fn tunables(current: Option<&str>, opt_out: Option<&str>) -> Option<String> {
    if opt_out.is_some_and(|v| v.trim() == "0") {
        return None;
    }
    match current.map(str::trim).filter(|c| !c.is_empty()) {
        None => Some(TUNABLE.to_string()),
        Some(c) if c.split(':').any(|t| t.starts_with("glibc.malloc.hugetlb=")) => None,
        Some(c) => Some(format!("{c}:{TUNABLE}")),
    }
}

/// Replaces this process by itself, same arguments, with [`TUNABLE`] in `GLIBC_TUNABLES`
/// (see the module's doc). Returns only when there was nothing to do, or the `exec`
/// failed, and then the command runs as it is, on 4 KiB pages.
pub fn restart_with_huge_pages() {
    use std::os::unix::process::CommandExt;
    let current = match std::env::var("GLIBC_TUNABLES") {
        Ok(v) => Some(v),
        Err(std::env::VarError::NotPresent) => None,
        // Not text: not ours to edit.
        Err(std::env::VarError::NotUnicode(_)) => return,
    };
    let opt_out = std::env::var(OPT_OUT).ok();
    let Some(value) = tunables(current.as_deref(), opt_out.as_deref()) else {
        return;
    };
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // Only returns on failure.
    let _ = std::process::Command::new(exe)
        .args(args)
        .env("GLIBC_TUNABLES", value)
        .exec();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tunable_is_added_once_and_a_user_s_choice_kept() {
        assert_eq!(tunables(None, None).as_deref(), Some(TUNABLE));
        assert_eq!(tunables(Some(""), Some("1")).as_deref(), Some(TUNABLE));
        assert_eq!(
            tunables(Some("glibc.malloc.arena_max=2"), None).as_deref(),
            Some("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1")
        );
        // Set already, by this restart or by the user (even to 0): left alone, no loop.
        assert_eq!(tunables(Some(TUNABLE), None), None);
        assert_eq!(
            tunables(
                Some("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0"),
                None
            ),
            None
        );
        // Opted out.
        assert_eq!(tunables(None, Some("0")), None);
        assert_eq!(tunables(None, Some(" 0 ")), None);
    }
}
