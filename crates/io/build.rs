//! Chooses the I/O path at compile time: `linux_io` (recvmmsg/sendmmsg, kernel receive
//! timestamps, pinning, SCHED_FIFO) on Linux, the portable path (std and socket2 sockets,
//! plain sleeps) everywhere else and wherever the `portable-io` feature asks for it. One
//! name for the choice keeps every `cfg` in the crate the same expression.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(linux_io)");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let portable = std::env::var_os("CARGO_FEATURE_PORTABLE_IO").is_some();
    if linux && !portable {
        println!("cargo::rustc-cfg=linux_io");
    }
}
